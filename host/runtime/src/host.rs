//! The embeddable host: loads every plugin of a directory under the sandbox
//! and hands each out as an `Arc<dyn CloudProvisioner>`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use cap_std::ambient_authority;
use wasmprov_api::CloudProvisioner;

use crate::engine::EngineSettings;
use crate::error::LoadError;
use crate::hooks::Hooks;
use crate::intercept::{ExecInterceptor, HttpInterceptor, Observer};
use crate::linker::Engines;
use crate::lock::{Lock, LockEntry, LockMode};
use crate::metrics::ReloadOutcome;
use crate::plugin::{LoadInput, WasmPlugin};
use crate::plugin_dir::manifest_files;
use wasmprov_policy::limits::LimitsSpec;

type SecretSource = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Builds a [`Host`].
///
/// ```no_run
/// # async fn demo() -> anyhow::Result<()> {
/// let host = wasmprov_host::HostBuilder::new("./plugins.d")
///     .owner_id("autoscaler-eu-1")
///     .build()
///     .await?;
/// for err in host.errors() {
///     eprintln!("not loaded: {err}");
/// }
/// if let Some(hetzner) = host.plugin("hetzner") {
///     let nodes = hetzner.describe().await?;
///     println!("{} nodes", nodes.len());
/// }
/// # Ok(()) }
/// ```
pub struct HostBuilder {
    plugin_dir: PathBuf,
    owner_id: Option<String>,
    work_dir: Option<PathBuf>,
    engine: EngineSettings,
    secrets: SecretSource,
    lock_mode: LockMode,
    hooks: Hooks,
    default_limits: LimitsSpec,
    compile_wait: Option<std::time::Duration>,
    only: Option<BTreeSet<String>>,
}

impl std::fmt::Debug for HostBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuilder")
            .field("plugin_dir", &self.plugin_dir)
            .field("owner_id", &self.owner_id)
            .finish_non_exhaustive()
    }
}

impl HostBuilder {
    /// A host loading plugins from `plugin_dir`, with default settings: owner
    /// id [`default_owner_id`], compile cache in the user's cache directory,
    /// secrets from the process environment.
    pub fn new(plugin_dir: impl Into<PathBuf>) -> Self {
        Self {
            plugin_dir: plugin_dir.into(),
            owner_id: None,
            work_dir: None,
            engine: EngineSettings {
                cache_dir: default_cache_dir(),
                ..EngineSettings::default()
            },
            secrets: Arc::new(|name: &str| std::env::var(name).ok()),
            lock_mode: LockMode::default(),
            hooks: Hooks::default(),
            default_limits: LimitsSpec::default(),
            compile_wait: None,
            only: None,
        }
    }

    /// Loads only the plugins whose manifest is `NAME.toml` for a `NAME` of
    /// `names` (and reloads only those): a command about one plugin neither
    /// reads nor compiles the others.
    #[must_use]
    pub fn only_plugins<I, S>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.only = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// How long [`build`](Self::build) and [`Host::reload`] wait for
    /// compiles before they serve without the plugins still compiling
    /// (reported in [`ReloadReport::compiling`] and loaded by a later
    /// pass). Default: the compile budget, so a pass returns with every
    /// plugin loaded or refused. A daemon that must answer at once sets a
    /// few seconds: a start from a warm compile cache then never waits for
    /// a cold compile. [`Host::watch`] waits at most one second.
    #[must_use]
    pub fn compile_wait(mut self, wait: std::time::Duration) -> Self {
        self.compile_wait = Some(wait);
        self
    }

    /// The longest one component may take to compile
    /// ([`EngineSettings::compile_budget`], default 60 s); one that takes
    /// longer is refused.
    #[must_use]
    pub fn compile_budget(mut self, budget: std::time::Duration) -> Self {
        self.engine.compile_budget = budget;
        self
    }

    /// Limits for plugins whose manifest leaves them unset (a manifest's own
    /// `[limits]` win; what neither sets takes the built-in default). The
    /// engine-wide ceilings are in [`engine_settings`](Self::engine_settings).
    ///
    /// ```
    /// use wasmprov_host::policy::limits::LimitsSpec;
    ///
    /// let builder = wasmprov_host::HostBuilder::new("./plugins.d").default_limits(LimitsSpec {
    ///     call_timeout_ms: Some(10_000),
    ///     http_max_in_flight: Some(64),
    ///     ..LimitsSpec::default()
    /// });
    /// # let _ = builder;
    /// ```
    #[must_use]
    pub fn default_limits(mut self, limits: LimitsSpec) -> Self {
        self.default_limits = limits;
        self
    }

    /// Every HTTP request a plugin's grants allow goes through `interceptor`
    /// (see [`crate::intercept`]): to send it elsewhere, record, replay or
    /// fail it. Grants are checked before; an interceptor cannot widen them.
    #[must_use]
    pub fn http_interceptor(mut self, interceptor: Arc<dyn HttpInterceptor>) -> Self {
        self.hooks.http = Some(interceptor);
        self
    }

    /// Every program run a plugin's grants allow goes through `interceptor`
    /// (see [`crate::intercept`]): to run it, or to answer it with a stub.
    #[must_use]
    pub fn exec_interceptor(mut self, interceptor: Arc<dyn ExecInterceptor>) -> Self {
        self.hooks.exec = Some(interceptor);
        self
    }

    /// Reports what plugins were refused (see [`crate::intercept::Observer`]).
    #[must_use]
    pub fn observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.hooks.observer = Some(observer);
        self
    }

    /// How `wasmprov.lock` is used (default: trust on first use).
    #[must_use]
    pub fn lock_mode(mut self, mode: LockMode) -> Self {
        self.lock_mode = mode;
        self
    }

    /// The owner id every node this host creates is tagged with, unchanged:
    /// it must follow `wasmprov_api::ids` (1–63 of `[a-z0-9_-]`,
    /// alphanumeric at both ends), or [`build`](Self::build) fails.
    #[must_use]
    pub fn owner_id(mut self, owner: impl Into<String>) -> Self {
        self.owner_id = Some(owner.into());
        self
    }

    /// Where compiled components are cached; `None` disables the cache.
    #[must_use]
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.engine.cache_dir = dir;
        self
    }

    /// Root of the per-plugin working directories of exec'd programs.
    #[must_use]
    pub fn work_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.work_dir = Some(dir.into());
        self
    }

    /// Lets one instance answer up to `calls` `price_hint` calls (default 1:
    /// a fresh instance for each). See [`EngineSettings::price_hint_reuse`];
    /// calls that can do I/O always get a fresh instance.
    #[must_use]
    pub fn price_hint_reuse(mut self, calls: u32) -> Self {
        self.engine.price_hint_reuse = calls.max(1);
        self
    }

    /// Engine-wide settings (pool size, largest memory, stack).
    #[must_use]
    pub fn engine_settings(mut self, settings: EngineSettings) -> Self {
        self.engine = settings;
        self
    }

    /// Where secret values come from, by variable name (default: the process
    /// environment). Embedders with a secret store plug it in here.
    #[must_use]
    pub fn secret_source(
        mut self,
        source: impl Fn(&str) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.secrets = Arc::new(source);
        self
    }

    /// Loads every plugin of the directory. A plugin that fails to load is
    /// left out and reported in [`Host::errors`]; the others load.
    ///
    /// # Errors
    /// When the engine cannot be set up or the directory cannot be opened.
    pub async fn build(self) -> Result<Host> {
        let owner_id = self.owner_id.unwrap_or_else(default_owner_id);
        if let Some(problem) = wasmprov_api::ids::id_problem("owner id", &owner_id) {
            anyhow::bail!(problem);
        }
        let work_root = self
            .work_dir
            .unwrap_or_else(|| crate::plugin::default_work_root().join(&owner_id));
        let compile_wait = self.compile_wait.unwrap_or(self.engine.compile_budget);
        let engines = Arc::new(Engines::new(self.engine));
        let (reloads, _) = tokio::sync::broadcast::channel(16);
        let host = Host {
            owner_id,
            plugin_dir: self.plugin_dir,
            work_root,
            secrets: self.secrets,
            lock_mode: self.lock_mode,
            hooks: self.hooks,
            default_limits: self.default_limits,
            engines,
            registry: std::sync::RwLock::new(Arc::new(Registry::default())),
            reloading: tokio::sync::Mutex::new(()),
            reloads,
            compile_wait,
            only: self.only,
        };
        host.reload().await?;
        Ok(host)
    }
}

/// What identifies one version of a plugin on disk: its manifest's bytes and
/// its component file's size and modification time. An unchanged fingerprint
/// means a reload keeps the loaded plugin as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fingerprint {
    manifest_sha256: String,
    component: Option<FileStamp>,
    /// The component's signature beside it (`COMPONENT.minisig`).
    signature: Option<FileStamp>,
    /// The directory's `wasmprov.toml`: a change of trusted keys or of the
    /// unsigned list checks every plugin again.
    settings_sha256: String,
}

type FileStamp = (u64, Option<std::time::SystemTime>);

fn stamp(dir: &cap_std::fs::Dir, path: &str) -> Option<FileStamp> {
    dir.metadata(path).ok().map(|meta| {
        (
            meta.len(),
            meta.modified()
                .ok()
                .map(cap_std::time::SystemTime::into_std),
        )
    })
}

impl Fingerprint {
    fn of(dir: &cap_std::fs::Dir, manifest_file: &str, settings_sha256: &str) -> Option<Self> {
        let text = crate::files::read_text(dir, manifest_file).ok()?;
        let component = wasmprov_policy::Manifest::parse(manifest_file, &text)
            .ok()
            .map(|m| m.component);
        Some(Self {
            manifest_sha256: crate::lock::sha256_hex(text.as_bytes()),
            component: component.as_deref().and_then(|c| stamp(dir, c)),
            signature: component.and_then(|c| stamp(dir, &format!("{c}.minisig"))),
            settings_sha256: settings_sha256.to_string(),
        })
    }
}

/// The directory's `wasmprov.toml` (absent: the defaults, which trust no
/// signer) and the sha256 of its text.
fn read_settings(
    dir: &cap_std::fs::Dir,
) -> (Result<wasmprov_policy::trust::DirSettings, String>, String) {
    use wasmprov_policy::trust::{DirSettings, FILE};
    match crate::files::read_text(dir, FILE) {
        Ok(text) => (
            DirSettings::parse(&text),
            crate::lock::sha256_hex(text.as_bytes()),
        ),
        Err(crate::files::FileError::NotFound) => (Ok(DirSettings::default()), String::new()),
        Err(e) => (Err(format!("reading {FILE}: {e}")), "unreadable".into()),
    }
}

/// One loaded version of a plugin and what it was loaded from.
#[derive(Clone)]
struct Entry {
    plugin: Arc<WasmPlugin>,
    file: String,
    fingerprint: Option<Fingerprint>,
}

/// The plugins of a host at one moment. Replaced as a whole on reload, so a
/// reader sees either the old set or the new one.
#[derive(Clone, Default)]
struct Registry {
    plugins: BTreeMap<String, Entry>,
    errors: Vec<LoadError>,
}

/// What one [`Host::reload`] changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReloadReport {
    /// Plugins loaded for the first time.
    pub added: Vec<String>,
    /// Plugins whose new version replaced the old one.
    pub replaced: Vec<String>,
    /// Plugins whose manifest went away; they are no longer served.
    pub removed: Vec<String>,
    /// Plugins whose new version failed to load: the old version keeps
    /// serving, and the reason is in [`failed`](Self::failed).
    pub kept_old: Vec<String>,
    /// Every manifest that did not load in this pass, and why.
    pub failed: Vec<String>,
    /// Plugins whose component was still compiling when the pass stopped
    /// waiting ([`HostBuilder::compile_wait`]): the old version, if any,
    /// keeps serving (it is also in [`kept_old`](Self::kept_old)); a
    /// later pass loads them once compiled ([`Host::watch`] runs one as
    /// soon as a compile ends).
    pub compiling: Vec<String>,
}

impl ReloadReport {
    /// How this pass counts in `wasmprov_reloads_total`.
    fn outcome(&self) -> ReloadOutcome {
        if !self.failed.is_empty() {
            ReloadOutcome::Failed
        } else if self.changed() {
            ReloadOutcome::Changed
        } else {
            ReloadOutcome::Unchanged
        }
    }

    /// Whether the pass changed which plugin versions are served.
    #[must_use]
    pub fn changed(&self) -> bool {
        !(self.added.is_empty() && self.replaced.is_empty() && self.removed.is_empty())
    }
}

impl std::fmt::Display for ReloadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        for (what, names) in [
            ("added", &self.added),
            ("replaced", &self.replaced),
            ("removed", &self.removed),
            ("kept old version of", &self.kept_old),
            ("still compiling", &self.compiling),
        ] {
            if !names.is_empty() {
                parts.push(format!("{what} {}", names.join(", ")));
            }
        }
        if !self.failed.is_empty() {
            parts.push(format!(
                "{} failed: {}",
                self.failed.len(),
                self.failed.join("; ")
            ));
        }
        if parts.is_empty() {
            f.write_str("no change")
        } else {
            f.write_str(&parts.join("; "))
        }
    }
}

/// A set of loaded plugins, reloadable while in use.
///
/// Lookups ([`plugin`](Self::plugin), [`plugins`](Self::plugins)) hand out
/// `Arc`s of the version loaded at that moment; a [`reload`](Self::reload)
/// swaps the whole set at once, and a call that already holds a plugin
/// finishes on that version.
///
/// ```no_run
/// # async fn demo() -> anyhow::Result<()> {
/// use wasmprov_host::HostBuilder;
///
/// let host = HostBuilder::new("./plugins.d").build().await?;
/// let before = host.plugin("hetzner");
/// // ... an operator copies a new hetzner.wasm + hetzner.toml in ...
/// let report = host.reload().await?;
/// if report.kept_old.contains(&"hetzner".to_string()) {
///     eprintln!("new version refused: {}", report.failed.join("; "));
/// }
/// // `before` still works: it is the version it was when taken.
/// if let Some(old) = before {
///     old.describe().await?;
/// }
/// # Ok(()) }
/// ```
pub struct Host {
    owner_id: String,
    plugin_dir: PathBuf,
    work_root: PathBuf,
    secrets: SecretSource,
    lock_mode: LockMode,
    hooks: Hooks,
    default_limits: LimitsSpec,
    engines: Arc<Engines>,
    registry: std::sync::RwLock<Arc<Registry>>,
    reloading: tokio::sync::Mutex<()>,
    reloads: tokio::sync::broadcast::Sender<Arc<ReloadReport>>,
    pub(crate) compile_wait: std::time::Duration,
    /// The manifests (`NAME.toml` stems) this host loads, when not all.
    only: Option<BTreeSet<String>>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("owner_id", &self.owner_id)
            .field("plugin_dir", &self.plugin_dir)
            .field(
                "plugins",
                &self.snapshot().plugins.keys().collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl Host {
    fn snapshot(&self) -> Arc<Registry> {
        match self.registry.read() {
            Ok(r) => r.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The plugin `name` through the provisioner trait.
    #[must_use]
    pub fn plugin(&self, name: &str) -> Option<Arc<dyn CloudProvisioner>> {
        self.wasm_plugin(name)
            .map(|p| p as Arc<dyn CloudProvisioner>)
    }

    /// The plugin `name` with its wasm-specific extras (inspect, errors from price hints).
    #[must_use]
    pub fn wasm_plugin(&self, name: &str) -> Option<Arc<WasmPlugin>> {
        self.snapshot().plugins.get(name).map(|e| e.plugin.clone())
    }

    /// Every loaded plugin, sorted by name.
    #[must_use]
    pub fn plugins(&self) -> Vec<Arc<WasmPlugin>> {
        self.snapshot()
            .plugins
            .values()
            .map(|e| e.plugin.clone())
            .collect()
    }

    /// The names of the loaded plugins, sorted.
    #[must_use]
    pub fn plugin_names(&self) -> Vec<String> {
        self.snapshot().plugins.keys().cloned().collect()
    }

    /// Manifests that did not load in the last (re)load, and why. A plugin
    /// whose new version failed while its old one still serves is listed
    /// here too.
    #[must_use]
    pub fn errors(&self) -> Vec<LoadError> {
        self.snapshot().errors.clone()
    }

    /// The owner id nodes are tagged with.
    #[must_use]
    pub fn owner_id(&self) -> &str {
        &self.owner_id
    }

    /// The directory plugins are loaded from.
    #[must_use]
    pub fn plugin_dir(&self) -> &Path {
        &self.plugin_dir
    }

    /// Calls, latency, errors, denials, traps and instances of every plugin.
    #[must_use]
    pub fn metrics(&self) -> &Arc<crate::metrics::Metrics> {
        &self.hooks.metrics
    }

    /// Changes each time a compile ends (for a watcher to reload then).
    pub(crate) fn compiles_finished(&self) -> tokio::sync::watch::Receiver<u64> {
        self.engines.compiler.subscribe()
    }

    /// Reports of every later reload, as they happen (from
    /// [`reload`](Self::reload) and from a [`watch`](Self::watch)er).
    #[must_use]
    pub fn subscribe_reloads(&self) -> tokio::sync::broadcast::Receiver<Arc<ReloadReport>> {
        self.reloads.subscribe()
    }

    /// Reads the plugin directory again and swaps in what changed: a new
    /// manifest is loaded, a changed one (manifest text, or the component's
    /// size or modification time) is loaded and replaces the old version, a
    /// removed one is dropped. A new version that fails to load leaves the
    /// old one serving; the reason is in the report and in
    /// [`errors`](Self::errors). The lock file is read again each time, so
    /// after `wasmprov lock --update` a refused new version is picked up.
    ///
    /// One reload runs at a time; calls keep being served during it.
    ///
    /// # Errors
    /// When the directory cannot be opened or listed (nothing is changed).
    pub async fn reload(&self) -> Result<ReloadReport> {
        self.reload_within(self.compile_wait).await
    }

    /// [`reload`](Self::reload), waiting at most `compile_wait` for
    /// compiles: a plugin still compiling then keeps its old version (or
    /// is not served yet) and is reported in [`ReloadReport::compiling`].
    ///
    /// # Errors
    /// When the directory cannot be opened or listed (nothing is changed).
    pub async fn reload_within(&self, compile_wait: std::time::Duration) -> Result<ReloadReport> {
        let _one_at_a_time = self.reloading.lock().await;
        let before = self.snapshot();
        let input = ReloadInput {
            dir_path: self.plugin_dir.clone(),
            engines: self.engines.clone(),
            owner_id: self.owner_id.clone(),
            work_root: self.work_root.clone(),
            secrets: self.secrets.clone(),
            lock_mode: self.lock_mode,
            hooks: self.hooks.clone(),
            default_limits: self.default_limits.clone(),
            compile_wait,
            only: self.only.clone(),
        };
        // Files are opened without blocking and read up to a cap
        // (`files.rs`); the bound here is the backstop for anything else
        // that stalls a pass: the old plugins keep serving.
        let pass = tokio::task::spawn_blocking(move || input.run(&before));
        let ran = tokio::time::timeout(RELOAD_LIMIT, pass)
            .await
            .map_err(|_| {
                anyhow::anyhow!(
                    "reloading {} took longer than {} s; the loaded plugins keep serving",
                    self.plugin_dir.display(),
                    RELOAD_LIMIT.as_secs()
                )
            })
            .and_then(|joined| joined.context("plugin loading panicked")?);
        let (registry, report) = match ran {
            Ok(pass) => pass,
            Err(e) => {
                self.metrics().reloaded(ReloadOutcome::Error);
                return Err(e);
            }
        };
        self.metrics().reloaded(report.outcome());
        match self.registry.write() {
            Ok(mut r) => *r = Arc::new(registry),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(registry),
        }
        if report.changed() || !report.failed.is_empty() || !report.compiling.is_empty() {
            tracing::info!(dir = %self.plugin_dir.display(), "plugins reloaded: {report}");
        }
        let report = Arc::new(report);
        let _ = self.reloads.send(report.clone());
        Ok(Arc::unwrap_or_clone(report))
    }
}

/// The longest one reload pass may take (100 cold compiles take ~20 s on
/// two cores); past it the pass is abandoned and the old plugins serve.
pub const RELOAD_LIMIT: std::time::Duration = std::time::Duration::from_secs(300);

/// What a reload needs, owned so it can run on a blocking thread.
struct ReloadInput {
    dir_path: PathBuf,
    engines: Arc<Engines>,
    owner_id: String,
    work_root: PathBuf,
    secrets: SecretSource,
    lock_mode: LockMode,
    hooks: Hooks,
    default_limits: LimitsSpec,
    /// How long this pass waits for compiles.
    compile_wait: std::time::Duration,
    /// The manifests this pass reads, when not all.
    only: Option<BTreeSet<String>>,
}

impl ReloadInput {
    fn run(&self, before: &Registry) -> Result<(Registry, ReloadReport)> {
        let dir = cap_std::fs::Dir::open_ambient_dir(&self.dir_path, ambient_authority())
            .with_context(|| format!("opening plugin directory {}", self.dir_path.display()))?;
        let lock = match self.lock_mode {
            LockMode::Off => Lock::default(),
            _ => Lock::read(&dir).with_context(|| format!("in {}", self.dir_path.display()))?,
        };
        let old_by_file: BTreeMap<&str, &Entry> = before
            .plugins
            .values()
            .map(|e| (e.file.as_str(), e))
            .collect();
        let mut next = Registry::default();
        let mut report = ReloadReport::default();
        let mut recorded = Vec::new();
        let (settings, settings_sha256) = read_settings(&dir);
        // Read and check every changed plugin and start its compile, all
        // before waiting on any: one slow compile does not hold up another.
        let mut prepared = Vec::new();
        let mut files = manifest_files(&dir)?;
        if let Some(only) = &self.only {
            files.retain(|f| f.strip_suffix(".toml").is_some_and(|n| only.contains(n)));
        }
        for file in &files {
            let fingerprint = Fingerprint::of(&dir, file, &settings_sha256);
            let old = old_by_file.get(file.as_str()).copied();
            if let Some(old) = old
                && fingerprint.is_some()
                && old.fingerprint == fingerprint
                && self.lock_allows(&lock, &old.plugin)
            {
                next.plugins
                    .insert(old.plugin.info().name.clone(), old.clone());
                continue;
            }
            let p = WasmPlugin::prepare(&self.load_input(&dir, file, &lock, &settings));
            prepared.push((file, fingerprint, old, p));
        }
        let until = std::time::Instant::now() + self.compile_wait;
        let mut loaded = Vec::new();
        for (file, fingerprint, old, p) in prepared {
            let input = self.load_input(&dir, file, &lock, &settings);
            match p.and_then(|p| WasmPlugin::finish(&input, p, until)) {
                Ok(p) => {
                    let name = p.info().name.clone();
                    if next.plugins.contains_key(&name) {
                        let e = LoadError::Duplicate {
                            file: file.clone(),
                            name,
                        };
                        report.failed.push(e.to_string());
                        next.errors.push(e);
                        continue;
                    }
                    for w in &p.info().warnings {
                        tracing::warn!(plugin = %name, "{w}");
                    }
                    tracing::info!(plugin = %name, sha256 = %p.info().sha256, "plugin loaded");
                    loaded.push(p.info().sha256.clone());
                    if !lock.plugins.contains_key(&name) {
                        recorded.push((
                            name.clone(),
                            LockEntry {
                                component: p.info().component.clone(),
                                sha256: p.info().sha256.clone(),
                                source: None,
                                signer: None,
                            },
                        ));
                    }
                    match before.plugins.get(&name) {
                        Some(_) => report.replaced.push(name.clone()),
                        None => report.added.push(name.clone()),
                    }
                    next.plugins.insert(
                        name,
                        Entry {
                            plugin: Arc::new(p),
                            file: file.clone(),
                            fingerprint,
                        },
                    );
                }
                Err(e) => {
                    if let LoadError::Compiling { plugin, .. } = &e {
                        tracing::info!("{e}");
                        report.compiling.push(plugin.clone());
                    } else {
                        tracing::error!("{e}");
                        report.failed.push(e.to_string());
                    }
                    if let Some(old) = old
                        && !next.plugins.contains_key(&old.plugin.info().name)
                    {
                        // The new version is broken: keep serving the old one.
                        let name = old.plugin.info().name.clone();
                        tracing::warn!(plugin = %name, "new version not loaded; the old one keeps serving");
                        report.kept_old.push(name.clone());
                        next.plugins.insert(name, old.clone());
                    }
                    next.errors.push(e);
                }
            }
        }
        self.engines.compiler.forget_loaded(&loaded);
        report.removed = before
            .plugins
            .keys()
            .filter(|name| !next.plugins.contains_key(*name))
            .cloned()
            .collect();
        if self.lock_mode == LockMode::TrustOnFirstUse && !recorded.is_empty() {
            for (name, entry) in &recorded {
                tracing::info!(plugin = %name, sha256 = %entry.sha256, "recorded in {}", crate::lock::LOCK_FILE);
            }
            // Under the directory's writer lock, against the lock as it is
            // now: an install meanwhile keeps its entry.
            if let Err(e) = crate::lock::record_first_use(&dir, &self.dir_path, recorded) {
                tracing::warn!(
                    "could not record digests in {}: {e:#}",
                    crate::lock::LOCK_FILE
                );
            }
        }
        Ok((next, report))
    }

    /// Whether the lock (read again for this pass) still accepts a loaded plugin.
    fn lock_allows(&self, lock: &Lock, plugin: &WasmPlugin) -> bool {
        match (self.lock_mode, lock.plugins.get(&plugin.info().name)) {
            (LockMode::Off, _) | (LockMode::TrustOnFirstUse, None) => true,
            (_, Some(entry)) => entry.sha256 == plugin.info().sha256,
            (LockMode::Frozen, None) => false,
        }
    }

    fn load_input<'a>(
        &'a self,
        dir: &'a cap_std::fs::Dir,
        file: &'a str,
        lock: &'a Lock,
        settings: &'a Result<wasmprov_policy::trust::DirSettings, String>,
    ) -> LoadInput<'a> {
        LoadInput {
            dir,
            dir_path: &self.dir_path,
            manifest_file: file,
            engines: &self.engines,
            owner_id: &self.owner_id,
            work_root: &self.work_root,
            secret: &*self.secrets,
            lock,
            lock_mode: self.lock_mode,
            hooks: &self.hooks,
            default_limits: &self.default_limits,
            settings,
        }
    }
}

/// The loaded plugins, for orchestration over any set of backends
/// (`wasmprov-fleet`).
impl wasmprov_api::Backends for Host {
    fn backend_names(&self) -> Vec<String> {
        self.plugin_names()
    }

    fn backend(&self, name: &str) -> Option<Arc<dyn CloudProvisioner>> {
        self.plugin(name)
    }

    fn owner_id(&self) -> Option<String> {
        Some(self.owner_id.clone())
    }

    fn nodes_listed(&self, name: &str, count: usize) {
        self.metrics().set_nodes(name, count);
    }

    fn orphans_found(&self, name: &str, count: usize) {
        self.metrics().set_orphans(name, count);
    }

    fn fleet_event(&self, name: &str, event: &str) {
        self.metrics().fleet_event(name, event);
    }
}

/// `wasmprov-<hostname>`, made a valid id (`wasmprov_api::ids`: lowercase,
/// other characters as `-`, at most 63): distinct per machine, stable
/// across restarts, so a restarted host finds its nodes again.
#[must_use]
pub fn default_owner_id() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into());
    wasmprov_api::ids::id_from_text(&format!("wasmprov-{host}"), "wasmprov-host")
}

fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("wasmprov"))
}
