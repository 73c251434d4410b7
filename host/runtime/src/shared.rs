//! What a plugin's calls share: its manifest and config, its HTTP gate and
//! exec runner, and its secret values. Above the gates, below a call's state.

use wasmprov_policy::Manifest;

use crate::exec::ExecRunner;
use crate::http::HttpGate;
use crate::secrets::PluginSecrets;

/// Everything about a plugin that calls share.
pub(crate) struct PluginShared {
    pub(crate) manifest: Manifest,
    pub(crate) http: HttpGate,
    pub(crate) exec: ExecRunner,
    /// Config and secrets: what each call's `wasi:config` holds, resolved
    /// when its store is made, and the values to redact.
    pub(crate) secrets: PluginSecrets,
}

impl std::fmt::Debug for PluginShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginShared")
            .field("name", &self.manifest.name)
            .finish_non_exhaustive()
    }
}
