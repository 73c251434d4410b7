//! What a plugin's calls share: its manifest and config, its HTTP gate and
//! exec runner, and its secret values. Above the gates, below a call's state.

use wasmprov_policy::Manifest;
use wasmtime_wasi_config::WasiConfigVariables;

use crate::exec::ExecRunner;
use crate::http::HttpGate;

/// Everything about a plugin that calls share.
pub(crate) struct PluginShared {
    pub(crate) manifest: Manifest,
    pub(crate) config: WasiConfigVariables,
    pub(crate) http: HttpGate,
    pub(crate) exec: ExecRunner,
    /// Secret values, for redaction of log records.
    pub(crate) secret_values: Vec<String>,
}

impl std::fmt::Debug for PluginShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginShared")
            .field("name", &self.manifest.name)
            .finish_non_exhaustive()
    }
}
