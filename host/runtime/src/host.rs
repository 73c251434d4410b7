//! The embeddable host: loads every plugin of a directory under the sandbox
//! and hands each out as an `Arc<dyn CloudProvisioner>`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use cap_std::ambient_authority;
use wasmprov_api::CloudProvisioner;
use wasmtime::component::Linker;

use crate::engine::{EngineSettings, SharedEngine};
use crate::error::LoadError;
use crate::intercept::{ExecInterceptor, HttpInterceptor, Observer};
use crate::lock::{Lock, LockEntry, LockMode};
use crate::plugin::{Hooks, LoadInput, WasmPlugin};
use crate::state::CallState;

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
        }
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

    /// The owner id every node this host creates is tagged with.
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
        let work_root = self
            .work_dir
            .unwrap_or_else(|| crate::plugin::default_work_root().join(&owner_id));
        let engines = Arc::new(Engines {
            settings: self.engine,
            by_stack: std::sync::Mutex::new(BTreeMap::new()),
        });
        let plugin_dir = self.plugin_dir;
        let secrets = self.secrets;
        let lock_mode = self.lock_mode;
        let hooks = self.hooks;
        let (plugins, errors) = tokio::task::spawn_blocking({
            let engines = engines.clone();
            let owner_id = owner_id.clone();
            move || {
                load_all(&LoadAll {
                    dir_path: &plugin_dir,
                    engines: &engines,
                    owner_id: &owner_id,
                    work_root: &work_root,
                    secret: &*secrets,
                    lock_mode,
                    hooks: &hooks,
                })
            }
        })
        .await
        .context("plugin loading panicked")??;
        Ok(Host {
            owner_id,
            plugins,
            errors,
            _engines: engines,
        })
    }
}

/// The engines of a host, one per guest stack size in use (wasmtime sets the
/// stack per engine), each with its linker. Most hosts have one.
pub(crate) struct Engines {
    settings: EngineSettings,
    by_stack: std::sync::Mutex<BTreeMap<usize, EngineAndLinker>>,
}

type EngineAndLinker = (Arc<SharedEngine>, Arc<Linker<CallState>>);

impl Engines {
    /// The engine and linker for guests with `stack` bytes of stack.
    pub(crate) fn get(&self, stack: usize) -> Result<EngineAndLinker> {
        let mut map = self
            .by_stack
            .lock()
            .map_err(|_| anyhow::anyhow!("engine table poisoned"))?;
        if let Some((e, l)) = map.get(&stack) {
            return Ok((e.clone(), l.clone()));
        }
        let engine = SharedEngine::new(self.settings.clone(), stack)?;
        let linker = Arc::new(build_linker(&engine.engine)?);
        map.insert(stack, (engine.clone(), linker.clone()));
        Ok((engine, linker))
    }
}

fn build_linker(engine: &wasmtime::Engine) -> Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    let wrap = |e: wasmtime::Error| anyhow::anyhow!("{e:#}");
    // The WASI interfaces a Rust program needs to start; the context behind
    // them grants nothing (no files, environment, sockets or stdin).
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(wrap)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).map_err(wrap)?;
    wasmtime_wasi_config::add_to_linker(&mut linker, |s: &mut CallState| {
        wasmtime_wasi_config::WasiConfig::new(s.config())
    })
    .map_err(wrap)?;
    crate::bindings::exec::add_to_linker::<_, wasmtime::component::HasSelf<_>>(&mut linker, |s| s)
        .map_err(wrap)?;
    crate::bindings::log::add_to_linker::<_, wasmtime::component::HasSelf<_>>(&mut linker, |s| s)
        .map_err(wrap)?;
    Ok(linker)
}

/// Plugins that loaded, by name, and the failures.
type Loaded = (BTreeMap<String, Arc<WasmPlugin>>, Vec<LoadError>);

struct LoadAll<'a> {
    dir_path: &'a Path,
    engines: &'a Engines,
    owner_id: &'a str,
    work_root: &'a Path,
    secret: &'a (dyn Fn(&str) -> Option<String> + Send + Sync),
    lock_mode: LockMode,
    hooks: &'a Hooks,
}

/// The manifests of a plugin directory (`*.toml`, not hidden), sorted.
pub(crate) fn manifest_files(dir: &cap_std::fs::Dir) -> Result<Vec<String>> {
    let mut manifests: Vec<String> = dir
        .entries()
        .context("listing the plugin directory")?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.ends_with(".toml") && !n.starts_with('.'))
        .collect();
    manifests.sort();
    Ok(manifests)
}

fn load_all(a: &LoadAll<'_>) -> Result<Loaded> {
    let dir = cap_std::fs::Dir::open_ambient_dir(a.dir_path, ambient_authority())
        .with_context(|| format!("opening plugin directory {}", a.dir_path.display()))?;
    let mut lock = match a.lock_mode {
        LockMode::Off => Lock::default(),
        _ => Lock::read(&dir).with_context(|| format!("in {}", a.dir_path.display()))?,
    };
    let mut plugins = BTreeMap::new();
    let mut errors = Vec::new();
    let mut recorded = Vec::new();
    for file in &manifest_files(&dir)? {
        let input = LoadInput {
            dir: &dir,
            dir_path: a.dir_path,
            manifest_file: file,
            engines: a.engines,
            owner_id: a.owner_id,
            work_root: a.work_root,
            secret: a.secret,
            lock: &lock,
            lock_mode: a.lock_mode,
            hooks: a.hooks,
        };
        match WasmPlugin::load(&input) {
            Ok(p) => {
                let name = p.info().name.clone();
                if plugins.contains_key(&name) {
                    errors.push(LoadError::Duplicate {
                        file: file.clone(),
                        name,
                    });
                    continue;
                }
                for w in &p.info().warnings {
                    tracing::warn!(plugin = %name, "{w}");
                }
                tracing::info!(plugin = %name, sha256 = %p.info().sha256, "plugin loaded");
                if !lock.plugins.contains_key(&name) {
                    recorded.push((
                        name.clone(),
                        LockEntry {
                            component: p.info().component.clone(),
                            sha256: p.info().sha256.clone(),
                        },
                    ));
                }
                plugins.insert(name, Arc::new(p));
            }
            Err(e) => {
                tracing::error!("{e}");
                errors.push(e);
            }
        }
    }
    if a.lock_mode == LockMode::TrustOnFirstUse && !recorded.is_empty() {
        for (name, entry) in recorded {
            tracing::info!(plugin = %name, sha256 = %entry.sha256, "recorded in {}", crate::lock::LOCK_FILE);
            lock.plugins.insert(name, entry);
        }
        if let Err(e) = lock.write(&dir) {
            tracing::warn!(
                "could not record digests in {}: {e:#}",
                crate::lock::LOCK_FILE
            );
        }
    }
    Ok((plugins, errors))
}

/// A set of loaded plugins.
pub struct Host {
    owner_id: String,
    plugins: BTreeMap<String, Arc<WasmPlugin>>,
    errors: Vec<LoadError>,
    _engines: Arc<Engines>,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("owner_id", &self.owner_id)
            .field("plugins", &self.plugins.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Host {
    /// The plugin `name` through the provisioner trait.
    #[must_use]
    pub fn plugin(&self, name: &str) -> Option<Arc<dyn CloudProvisioner>> {
        self.plugins
            .get(name)
            .map(|p| p.clone() as Arc<dyn CloudProvisioner>)
    }

    /// The plugin `name` with its wasm-specific extras (inspect, errors from price hints).
    #[must_use]
    pub fn wasm_plugin(&self, name: &str) -> Option<Arc<WasmPlugin>> {
        self.plugins.get(name).cloned()
    }

    /// Every loaded plugin, by name.
    pub fn plugins(&self) -> impl Iterator<Item = &Arc<WasmPlugin>> {
        self.plugins.values()
    }

    /// Plugins that did not load, and why.
    #[must_use]
    pub fn errors(&self) -> &[LoadError] {
        &self.errors
    }

    /// The owner id nodes are tagged with.
    #[must_use]
    pub fn owner_id(&self) -> &str {
        &self.owner_id
    }
}

/// `wasmprov-<hostname>`: distinct per machine, stable across restarts, so a
/// restarted host finds its nodes again.
#[must_use]
pub fn default_owner_id() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into());
    format!("wasmprov-{host}")
}

fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("wasmprov"))
}
