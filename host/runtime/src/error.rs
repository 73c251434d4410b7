//! Why a plugin could not be loaded. Each variant names the plugin (its
//! manifest file) and says what would fix it.

use std::path::PathBuf;

/// A plugin that could not be loaded.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LoadError {
    /// The manifest is malformed.
    #[error(transparent)]
    Manifest(#[from] wasmprov_policy::ManifestError),
    /// The manifest's name does not match its file name.
    #[error("{file}: name {name:?} must match the file name (expected name = {expected:?})")]
    NameMismatch {
        /// The manifest file.
        file: String,
        /// The name written in it.
        name: String,
        /// The name its file name implies.
        expected: String,
    },
    /// Two manifests name the same plugin.
    #[error("{file}: plugin {name:?} is already loaded from another manifest")]
    Duplicate {
        /// The manifest file.
        file: String,
        /// The plugin name.
        name: String,
    },
    /// The component file could not be read from inside the plugin directory.
    #[error("{file}: component {component:?} cannot be read inside the plugin directory {}: {reason}", dir.display())]
    Component {
        /// The manifest file.
        file: String,
        /// The component path written in the manifest.
        component: String,
        /// The plugin directory.
        dir: PathBuf,
        /// What went wrong (missing, or the path leads outside the directory).
        reason: String,
    },
    /// The component's sha256 is not the one pinned in the manifest.
    #[error(
        "{file}: component {component:?} has sha256 {actual}, but the manifest pins {expected}; refusing to load it; if the change is intended, run `wasmprov lock --update` (it rewrites the pin and wasmprov.lock together)"
    )]
    Digest {
        /// The manifest file.
        file: String,
        /// The component path.
        component: String,
        /// The pinned digest.
        expected: String,
        /// The digest of the file on disk.
        actual: String,
    },
    /// The component differs from the digest recorded in `wasmprov.lock`.
    #[error(
        "plugin {plugin}: component {component:?} has sha256 {actual}, but wasmprov.lock recorded {locked} when it was first loaded; if the change is intended, run `wasmprov lock --update`"
    )]
    LockMismatch {
        /// The plugin name.
        plugin: String,
        /// The component path.
        component: String,
        /// The recorded digest.
        locked: String,
        /// The digest now.
        actual: String,
    },
    /// The lock is frozen and does not record this plugin.
    #[error(
        "plugin {plugin}: not recorded in wasmprov.lock and the lock is frozen; run `wasmprov lock --update` to accept it"
    )]
    NotLocked {
        /// The plugin name.
        plugin: String,
    },
    /// The component was built for a contract version this host does not speak.
    #[error(
        "plugin {plugin}: built for contract wasmprov:provisioner@{found}, but this host speaks {supported}; rebuild the plugin with a matching wasmprov-guest"
    )]
    ContractVersion {
        /// The plugin name.
        plugin: String,
        /// The version the component was built for.
        found: String,
        /// The versions this host speaks.
        supported: String,
    },
    /// The file is not a provisioner component.
    #[error("plugin {plugin}: {reason}")]
    NotAProvider {
        /// The plugin name.
        plugin: String,
        /// What is missing or wrong.
        reason: String,
    },
    /// Compiling or linking the component failed.
    #[error("plugin {plugin}: {reason}")]
    Compile {
        /// The plugin name.
        plugin: String,
        /// The compiler's or linker's message.
        reason: String,
    },
    /// The directory trusts signers (`wasmprov.toml` lists keys) and this
    /// component is not signed for this plugin by one of them, nor let in
    /// unsigned.
    #[error(
        "plugin {plugin}: refused: component {component:?} {reason}; this directory loads only signed plugins: install it with `wasmprov install` (which keeps its signature beside it as {component}.minisig), put a signature there (`minisign -Sm {component}`), or let it in unsigned with [signatures] unsigned = [\"{plugin}\"] in {}", settings.display()
    )]
    Unsigned {
        /// The plugin name.
        plugin: String,
        /// The component path.
        component: String,
        /// Why its signature was not accepted.
        reason: String,
        /// The settings file that requires signatures.
        settings: PathBuf,
    },
    /// Compiling the component took longer than its budget, or it is
    /// larger than the compile budget allows.
    #[error(
        "plugin {plugin}: refused: {reason}; the other plugins were loaded without waiting for it"
    )]
    CompileBudget {
        /// The plugin name.
        plugin: String,
        /// What was over budget.
        reason: String,
    },
    /// Its component was still compiling when the reload pass's wait
    /// ended; the old version (if any) keeps serving, and the plugin is
    /// loaded by a later pass once the compile is done.
    #[error(
        "plugin {plugin}: still compiling after {running_ms} ms; loaded when done (the old version, if any, keeps serving)"
    )]
    Compiling {
        /// The plugin name.
        plugin: String,
        /// How long it has been compiling.
        running_ms: u64,
    },
    /// Reading the plugin directory failed.
    #[error("plugin directory {}: {reason}", dir.display())]
    Directory {
        /// The directory.
        dir: PathBuf,
        /// What went wrong.
        reason: String,
    },
}
