//! One loaded plugin: its manifest, its compiled and pre-linked component,
//! and the [`CloudProvisioner`] implementation that runs every call in a
//! fresh, limited instance.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::task::{Context, Poll, Wake};
use std::time::{Duration, Instant};

use wasmprov_api::{
    AddressRequest, CapacityType, CloudProvisioner, Interfaces, Labels, NodeHandle, NodeShape,
    Offering, PluginFault, PriceHint, ProviderNodeId, ProvisionRequest, ProvisionerError, Result,
    StableAddress, SubnetCapacity, Target,
};
use wasmprov_policy::Manifest;
use wasmtime::component::Component;
use wasmtime::{Store, Trap, UpdateDeadline};

use crate::admission::Admission;
use crate::contract::{Instance, Pre};
use crate::engine::SharedEngine;
use crate::error::LoadError;
use crate::exec::ExecRunner;
use crate::hooks::{CallKind, Hooks};
use crate::http::HttpGate;
use crate::metrics::{Op, PluginMetrics};
use crate::shared::PluginShared;
use crate::state::CallState;

/// The contract version this host speaks (and builds plugins for); older
/// ones it loads are in [`crate::contract::SUPPORTED`].
pub const CONTRACT_VERSION: &str = wasmprov_api::CONTRACT_VERSION;
const EXPORT_PREFIX: &str = "wasmprov:provisioner/provisioner@";
const CONTRACT_SECTION: &str = "wasmprov-contract";

/// What `inspect` shows about a plugin. Secret values never appear here.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PluginInfo {
    /// The plugin's name (from its manifest).
    pub name: String,
    /// The name the backend reports for itself.
    pub backend_name: String,
    /// The component file, relative to the plugin directory.
    pub component: String,
    /// sha256 of the component.
    pub sha256: String,
    /// Whether the manifest pins the digest.
    pub pinned: bool,
    /// What the component says it was built for (`wasmprov:provisioner@X;sdk=Y`).
    pub built_for: Option<String>,
    /// The contract version of the interface it exports (`0.3.0`, `0.2.0`, `0.1.0`).
    pub contract: String,
    /// Which interfaces beyond the core calls it exports (`set-labels`
    /// from 0.3 on; `networking` when it exports that too), read from the
    /// component's exports at load.
    pub interfaces: Interfaces,
    /// Capacity types the backend offers.
    pub capacity_types: Vec<CapacityType>,
    /// Plain configuration values.
    pub config: BTreeMap<String, String>,
    /// Secrets: key → where the value comes from and whether it is set; never the value.
    pub secrets: BTreeMap<String, String>,
    /// HTTP grants as written.
    pub http_allow: Vec<String>,
    /// Exec grants: program and argument patterns.
    pub exec_allow: Vec<String>,
    /// Limits in force.
    pub limits: LimitsInfo,
    /// Problems found at load that do not stop the plugin (such as an unset secret).
    pub warnings: Vec<String>,
    /// What the component declares it needs, each beside the grant that
    /// answers it, then grants it never asked for; `None` when it declares
    /// nothing.
    pub requested: Option<Vec<wasmprov_policy::requests::Check>>,
    /// Where it was installed from (`wasmprov install`), per the lock.
    pub source: Option<String>,
    /// Who signed it, per the lock (`unsigned` when the operator let it in unsigned).
    pub signer: Option<String>,
}

/// Limits in human units.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LimitsInfo {
    /// Memory per instance, MiB.
    pub memory_mib: u64,
    /// Wall-clock deadline per call, ms.
    pub call_timeout_ms: u64,
    /// CPU time per call, ms.
    pub cpu_time_ms: u64,
    /// HTTP requests in flight.
    pub http_max_in_flight: usize,
    /// HTTP request time limit, ms.
    pub http_timeout_ms: u64,
    /// Largest HTTP response body, bytes.
    pub http_max_response_bytes: u64,
    /// Processes at once.
    pub exec_max_concurrent: usize,
    /// Calls that may do I/O running at once.
    pub max_calls_in_flight: usize,
    /// How long a call may wait to start, ms.
    pub call_queue_ms: u64,
}

/// A loaded plugin. Cheap to share; every call gets a fresh instance.
pub struct WasmPlugin {
    shared: Arc<PluginShared>,
    engine: Arc<SharedEngine>,
    pre: Pre,
    owner_id: String,
    capacity_types: Vec<CapacityType>,
    info: PluginInfo,
    runtime: Option<tokio::runtime::Handle>,
    /// This plugin's handles into the host's metrics, taken at load.
    metrics: PluginMetrics,
    /// Instances kept to answer further price hints, when the engine allows
    /// reuse (`EngineSettings::price_hint_reuse`).
    warm: std::sync::Mutex<Vec<Warm>>,
    /// Which calls that may do I/O start now, wait, or are refused.
    admission: Admission,
    /// The host's locks (`Hooks::changes`, shared by every version of
    /// this plugin a reload loads): the calls that change a node
    /// (set-labels, assign-address, release-address, register- and
    /// deregister-target) run one after another per plugin name and
    /// provider id, so that two relabels never interleave their cloud calls
    /// into a mix of both; and the calls that change addresses run one
    /// after another per plugin ([`Self::address_turn`]).
    nodes: Arc<crate::keyed_lock::KeyedLocks>,
}

/// An instance that answered price hints and may answer more.
struct Warm {
    store: Store<CallState>,
    /// Boxed: the bindings are a few hundred bytes, moved on every call.
    instance: Box<Instance>,
    calls: u32,
}

/// Warm instances kept per plugin: enough for a few threads asking at once.
const MAX_WARM: usize = 4;

impl std::fmt::Debug for WasmPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmPlugin")
            .field("name", &self.shared.manifest.name)
            .field("owner_id", &self.owner_id)
            .finish_non_exhaustive()
    }
}

/// Inputs to loading one plugin.
pub(crate) struct LoadInput<'a> {
    pub(crate) dir: &'a cap_std::fs::Dir,
    pub(crate) dir_path: &'a Path,
    pub(crate) manifest_file: &'a str,
    pub(crate) engines: &'a crate::linker::Engines,
    pub(crate) owner_id: &'a str,
    pub(crate) work_root: &'a Path,
    pub(crate) secret: &'a (dyn Fn(&str) -> Option<String> + Send + Sync),
    pub(crate) lock: &'a crate::lock::Lock,
    pub(crate) lock_mode: crate::lock::LockMode,
    pub(crate) hooks: &'a Hooks,
    pub(crate) default_limits: &'a wasmprov_policy::limits::LimitsSpec,
    /// The directory's `wasmprov.toml` (or why it could not be read).
    pub(crate) settings: &'a Result<wasmprov_policy::trust::DirSettings, String>,
}

/// A plugin read and verified, its compile under way ([`WasmPlugin::prepare`]).
pub(crate) struct Prepared {
    manifest: Manifest,
    name: String,
    sha256: String,
    built_for: Option<String>,
    declared: Option<String>,
    shared_engine: Arc<SharedEngine>,
    linker: Arc<wasmtime::component::Linker<CallState>>,
    job: Arc<crate::compile::Job>,
}

/// A directory that trusts signers loads only components signed for their
/// plugin by one of them (the signature beside the component, as
/// `COMPONENT.minisig`), or let in unsigned by the operator; the check is
/// `wasmprov_policy::trust::verify`, the same one `wasmprov install` makes.
fn check_signature(
    input: &LoadInput<'_>,
    name: &str,
    component: &str,
    bytes: &[u8],
) -> std::result::Result<(), LoadError> {
    use wasmprov_policy::trust;
    let settings_file = input.dir_path.join(trust::FILE);
    let refuse = |reason: String| LoadError::Unsigned {
        plugin: name.to_string(),
        component: component.to_string(),
        reason,
        settings: settings_file.clone(),
    };
    let settings = match input.settings {
        Ok(s) if !s.requires_signatures() => return Ok(()),
        Ok(s) => s,
        Err(e) => return Err(refuse(format!("cannot be checked: {e}"))),
    };
    let signature = match crate::files::read_regular(
        input.dir,
        &format!("{component}.minisig"),
        trust::MAX_SIGNATURE_BYTES,
    ) {
        Ok((sig, _)) => Some(
            String::from_utf8(sig)
                .map_err(|_| refuse("has a signature that is not text".into()))?,
        ),
        Err(crate::files::FileError::NotFound) => None,
        Err(e) => {
            return Err(refuse(format!(
                "has a signature file that cannot be read ({e})"
            )));
        }
    };
    let source = input
        .lock
        .plugins
        .get(name)
        .and_then(|e| e.source.as_deref());
    trust::verify(settings, bytes, signature.as_deref(), name, source)
        .map(|_| ())
        .map_err(|r| refuse(r.to_string()))
}

impl WasmPlugin {
    /// The first half of a load: reads and verifies the manifest and the
    /// component (pin, lock, signature, contract) and starts its compile
    /// off this thread (`compile.rs`); nothing here waits on the plugin.
    pub(crate) fn prepare(input: &LoadInput<'_>) -> std::result::Result<Prepared, LoadError> {
        let file = input.manifest_file;
        let text = crate::files::read_text(input.dir, file).map_err(|e| LoadError::Directory {
            dir: input.dir_path.to_path_buf(),
            reason: format!("reading {file}: {e}"),
        })?;
        let manifest = Manifest::parse_with_defaults(file, &text, input.default_limits)?;
        let expected = file.strip_suffix(".toml").unwrap_or(file);
        if manifest.name != expected {
            return Err(LoadError::NameMismatch {
                file: file.to_string(),
                name: manifest.name.clone(),
                expected: expected.to_string(),
            });
        }
        let name = manifest.name.clone();
        let (bytes, sha256) = crate::files::read_regular(
            input.dir,
            &manifest.component,
            input.engines.settings.max_component_bytes,
        )
        .map_err(|e| LoadError::Component {
            file: file.to_string(),
            component: manifest.component.clone(),
            dir: input.dir_path.to_path_buf(),
            reason: e.to_string(),
        })?;
        if let Some(pin) = &manifest.sha256
            && *pin != sha256
        {
            return Err(LoadError::Digest {
                file: file.to_string(),
                component: manifest.component.clone(),
                expected: pin.clone(),
                actual: sha256,
            });
        }
        if input.lock_mode != crate::lock::LockMode::Off {
            match input.lock.plugins.get(&name) {
                Some(entry) if entry.sha256 != sha256 => {
                    return Err(LoadError::LockMismatch {
                        plugin: name,
                        component: manifest.component.clone(),
                        locked: entry.sha256.clone(),
                        actual: sha256,
                    });
                }
                None if input.lock_mode == crate::lock::LockMode::Frozen => {
                    return Err(LoadError::NotLocked { plugin: name });
                }
                _ => {}
            }
        }
        check_signature(input, &name, &manifest.component, &bytes)?;
        let built_for = custom_section(&bytes, CONTRACT_SECTION);
        let declared = custom_section(&bytes, wasmprov_policy::requests::SECTION);
        if let Some(section) = &built_for {
            let version = section
                .split(';')
                .next()
                .and_then(|s| s.strip_prefix("wasmprov:provisioner@"))
                .unwrap_or(section);
            if !crate::contract::SUPPORTED.contains(&version) {
                return Err(LoadError::ContractVersion {
                    plugin: name,
                    found: version.to_string(),
                    supported: crate::contract::supported_text(),
                });
            }
        }

        let (shared_engine, linker) =
            input
                .engines
                .get(manifest.limits.stack_bytes)
                .map_err(|e| LoadError::Compile {
                    plugin: name.clone(),
                    reason: format!("setting up its engine: {e:#}"),
                })?;
        let job = input.engines.compiler.start(
            &shared_engine.engine,
            manifest.limits.stack_bytes,
            &sha256,
            Arc::from(bytes),
        );
        Ok(Prepared {
            manifest,
            name,
            sha256,
            built_for,
            declared,
            shared_engine,
            linker,
            job,
        })
    }

    /// The second half of a load: waits for the compile (until `until`,
    /// within its budget), then links, instantiates once under the
    /// plugin's limits and asks what never changes.
    pub(crate) fn finish(
        input: &LoadInput<'_>,
        prepared: Prepared,
        until: Instant,
    ) -> std::result::Result<Self, LoadError> {
        let Prepared {
            manifest,
            name,
            sha256,
            built_for,
            declared,
            shared_engine,
            linker,
            job,
        } = prepared;
        let engine = &shared_engine.engine;
        let component = match input.engines.compiler.wait(&job, until) {
            crate::compile::Outcome::Ready(c) => c,
            crate::compile::Outcome::Failed(e) => {
                return Err(LoadError::Compile {
                    plugin: name,
                    reason: format!("not a valid component: {e}"),
                });
            }
            crate::compile::Outcome::Pending { running } => {
                return Err(LoadError::Compiling {
                    plugin: name,
                    running_ms: running.as_millis() as u64,
                });
            }
            crate::compile::Outcome::OverBudget { budget } => {
                return Err(LoadError::CompileBudget {
                    plugin: name,
                    reason: format!(
                        "its component (sha256:{sha256}) took longer than the compile budget of {} s to compile; it is not compiled again by this host (the budget is EngineSettings::compile_budget)",
                        budget.as_secs_f64()
                    ),
                });
            }
        };
        let (version, interfaces) = check_exports(&name, &component, engine)?;
        let pre = linker
            .instantiate_pre(&component)
            .map_err(|e| LoadError::Compile {
                plugin: name.clone(),
                reason: format!("imports something the sandbox does not provide: {e:#}"),
            })?;
        let pre = Pre::new(version, interfaces, pre).map_err(|e| LoadError::NotAProvider {
            plugin: name.clone(),
            reason: format!("does not export the provisioner interface: {e:#}"),
        })?;

        let mut warnings = Vec::new();
        // Environment variables are read now; files, commands and the AWS
        // chain at each call (`secrets.rs`).
        let loaded = crate::secrets::PluginSecrets::load(&manifest, input.secret);
        warnings.extend(loaded.warnings);
        let secrets = loaded.shown;
        // What the manifest hands over that no plugin should get lightly
        // (host credentials, wide wildcards, loopback, shells): said at every
        // load, as the install screen and `inspect` say it.
        warnings.extend(
            wasmprov_policy::danger::manifest(&manifest)
                .iter()
                .map(ToString::to_string),
        );
        let requested = match declared
            .as_deref()
            .map(wasmprov_policy::requests::Requests::parse)
        {
            None => None,
            Some(Ok(requests)) => {
                warnings.extend(
                    requests
                        .dangers(&manifest.config)
                        .iter()
                        .map(ToString::to_string),
                );
                let checks = requests.compare(&manifest);
                for c in &checks {
                    use wasmprov_policy::requests::Standing;
                    match c.standing {
                        Standing::NotGranted => warnings.push(format!(
                            "{} {}: requested ({}), not granted",
                            c.kind, c.item, c.why
                        )),
                        Standing::WiderThanRequested => warnings.push(format!(
                            "{} {}: granted, but the plugin does not request it",
                            c.kind, c.item
                        )),
                        Standing::Granted | Standing::Unset => {}
                    }
                }
                Some(checks)
            }
            Some(Err(e)) => {
                warnings.push(format!("its capabilities declaration is malformed: {e}"));
                None
            }
        };
        let limits = &manifest.limits;
        let (max_calls, call_queue) = (limits.max_calls_in_flight, limits.call_queue);
        let info_limits = LimitsInfo {
            memory_mib: limits.memory_bytes >> 20,
            call_timeout_ms: limits.call_timeout.as_millis() as u64,
            cpu_time_ms: limits.cpu_time.as_millis() as u64,
            http_max_in_flight: limits.http_max_in_flight,
            http_timeout_ms: limits.http_timeout.as_millis() as u64,
            http_max_response_bytes: limits.http_max_response_bytes,
            exec_max_concurrent: manifest.exec.max_concurrent,
            max_calls_in_flight: limits.max_calls_in_flight,
            call_queue_ms: limits.call_queue.as_millis() as u64,
        };
        if limits.memory_bytes > shared_engine.settings.max_memory_bytes {
            return Err(LoadError::Compile {
                plugin: name,
                reason: format!(
                    "limits.memory_mib {} is above this host's maximum of {} MiB",
                    limits.memory_bytes >> 20,
                    shared_engine.settings.max_memory_bytes >> 20
                ),
            });
        }
        let shared = Arc::new(PluginShared {
            http: HttpGate::new(
                manifest.http.clone(),
                manifest.limits.clone(),
                input.hooks.clone(),
            ),
            exec: ExecRunner::new(
                manifest.exec.clone(),
                input.work_root.join(&name),
                input.hooks.clone(),
            ),
            secrets: loaded.secrets,
            manifest,
        });
        let info = PluginInfo {
            name: name.clone(),
            backend_name: String::new(),
            component: shared.manifest.component.clone(),
            sha256,
            pinned: shared.manifest.sha256.is_some(),
            built_for,
            contract: pre.version().to_string(),
            interfaces,
            capacity_types: Vec::new(),
            config: shared.manifest.config.clone(),
            secrets,
            http_allow: shared
                .manifest
                .http
                .grants()
                .iter()
                .map(|g| g.source.clone())
                .collect(),
            exec_allow: shared
                .manifest
                .exec
                .grants()
                .iter()
                .map(ToString::to_string)
                .collect(),
            limits: info_limits,
            warnings,
            requested,
            source: input.lock.plugins.get(&name).and_then(|e| e.source.clone()),
            signer: input.lock.plugins.get(&name).and_then(|e| e.signer.clone()),
        };
        let mut plugin = Self {
            shared,
            engine: shared_engine.clone(),
            pre,
            owner_id: input.owner_id.to_string(),
            capacity_types: Vec::new(),
            info,
            runtime: shared_engine.side_handle(),
            metrics: input.hooks.metrics.plugin(&name),
            warm: std::sync::Mutex::new(Vec::new()),
            admission: Admission::new(&name, max_calls, call_queue),
            nodes: input.hooks.changes.clone(),
        };
        // Ask the backend once for what never changes; this also proves the
        // component instantiates under its limits.
        let (backend, types) = plugin
            .call_pure(async |store: &mut Store<CallState>, p: &Instance| {
                p.check_types(&mut *store)?;
                let backend = p.name(&mut *store).await?;
                let types = p.capacity_types(&mut *store).await?;
                Ok((backend, types))
            })
            .map_err(|e| LoadError::NotAProvider {
                plugin: name.clone(),
                reason: format!("failed its first call: {e}"),
            })?;
        let (backend, types) = crate::answers::identity(&name, backend, types).map_err(|e| {
            LoadError::NotAProvider {
                plugin: name.clone(),
                reason: e.to_string(),
            }
        })?;
        plugin.capacity_types = types;
        plugin.info.backend_name = backend;
        plugin.info.capacity_types = plugin.capacity_types.clone();
        Ok(plugin)
    }

    /// What `inspect` shows.
    #[must_use]
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// The owner id this plugin tags nodes with.
    #[must_use]
    pub fn owner_id(&self) -> &str {
        &self.owner_id
    }

    /// Nodes that did not carry this host's owner id, dropped from this
    /// plugin's `describe` answers since it was loaded (each a contract
    /// fault of the plugin; see `answers.rs`).
    #[must_use]
    pub fn foreign_answers(&self) -> u64 {
        self.metrics.foreign_total()
    }

    /// A store for one call, holding `secrets` (current for an I/O call,
    /// the last ones for a call that must not wait).
    fn new_store(
        &self,
        kind: CallKind,
        secrets: Arc<crate::secrets::CallSecrets>,
    ) -> Store<CallState> {
        let mut store = Store::new(
            &self.engine.engine,
            CallState::new(self.shared.clone(), kind, secrets),
        );
        store.limiter(|s| &mut s.memory);
        store.set_epoch_deadline(1);
        store.epoch_deadline_callback(move |mut ctx| {
            let s = ctx.data_mut();
            s.ticks += 1;
            if s.ticks > s.max_ticks {
                s.cpu_exhausted = true;
                return Ok(UpdateDeadline::Interrupt);
            }
            Ok(match s.kind {
                CallKind::Io => UpdateDeadline::Yield(1),
                CallKind::Pure => UpdateDeadline::Continue(1),
            })
        });
        store
    }

    /// Maps a failure of the instance to a plugin fault.
    fn fault(&self, state: &CallState, err: &wasmtime::Error) -> ProvisionerError {
        let fault = if state.cpu_exhausted {
            PluginFault::CpuLimit
        } else if state.memory.hit {
            PluginFault::MemoryLimit
        } else if host_limit(err) {
            PluginFault::ResourceLimit
        } else if err.downcast_ref::<Trap>().is_some() {
            PluginFault::Trap
        } else {
            PluginFault::Contract
        };
        let mut message = match err.downcast_ref::<Trap>() {
            Some(trap) => trap.to_string(),
            None => format!("{err:#}"),
        };
        let stderr = state.stderr_text();
        if !stderr.is_empty() {
            let tail: String = stderr
                .chars()
                .rev()
                .take(2000)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            message = format!("{message}; guest stderr: {tail}");
        }
        let message = crate::log::redact(&state.secrets.redact, &message);
        tracing::warn!(plugin = %self.shared.manifest.name, %fault, message = %wasmprov_policy::text::line(&message), "plugin call failed");
        ProvisionerError::Plugin {
            plugin: self.shared.manifest.name.clone(),
            fault,
            message,
        }
    }

    fn timeout_error(&self) -> ProvisionerError {
        let ms = self.shared.manifest.limits.call_timeout.as_millis();
        tracing::warn!(plugin = %self.shared.manifest.name, ms, "plugin call timed out");
        ProvisionerError::Plugin {
            plugin: self.shared.manifest.name.clone(),
            fault: PluginFault::Timeout,
            message: format!("the call ran past its {ms} ms deadline and was stopped"),
        }
    }

    /// Runs one call that may do I/O in a fresh instance, under the deadline.
    async fn call_io<R: Send>(
        &self,
        f: impl AsyncFnOnce(&mut Store<CallState>, &Instance) -> wasmtime::Result<R> + Send,
    ) -> Result<R> {
        self.call_io_reached(f).await.0
    }

    /// [`call_io`](Self::call_io), and whether anything of the call may
    /// have reached a backend (`CallState::reached`).
    async fn call_io_reached<R: Send>(
        &self,
        f: impl AsyncFnOnce(&mut Store<CallState>, &Instance) -> wasmtime::Result<R> + Send,
    ) -> (Result<R>, bool) {
        // The secrets current for this call: a provider's cache refreshes
        // them when near expiry; its failure is the call's answer (nothing
        // was sent).
        let secrets = match self.shared.secrets.for_call().await {
            Ok(s) => s,
            Err(e) => return (Err(e), false),
        };
        let _instance = self.metrics.instance();
        let mut store = self.new_store(CallKind::Io, secrets);
        let reached = store.data().reached.clone();
        let execs = store.data().execs.clone();
        let result = self.run_io(&mut store, f).await;
        let reached = reached.load(std::sync::atomic::Ordering::SeqCst)
            || execs.load(std::sync::atomic::Ordering::SeqCst) > 0;
        (result, reached)
    }

    async fn run_io<R: Send>(
        &self,
        store: &mut Store<CallState>,
        f: impl AsyncFnOnce(&mut Store<CallState>, &Instance) -> wasmtime::Result<R> + Send,
    ) -> Result<R> {
        // Admitted first, outside the deadline: the call's time starts once
        // it may run (a refusal here is the whole answer; nothing ran).
        let _admitted = self.admission.admit().await?;
        let deadline = self.shared.manifest.limits.call_timeout;
        let slots = self.engine.io_slots.clone();
        let outcome = tokio::time::timeout(deadline, async {
            // Under load, wait for a slot of the pool instead of failing.
            let _slot = slots.acquire_owned().await?;
            let instance = self.pre.instantiate(&mut *store).await?;
            f(&mut *store, &instance).await
        })
        .await;
        match outcome {
            Err(_) => Err(self.timeout_error()),
            Ok(Err(e)) => Err(self.fault(store.data(), &e)),
            Ok(Ok(r)) => Ok(r),
        }
    }

    /// Runs one call that must not do I/O, on the calling thread, under the
    /// deadline. HTTP and exec are refused during it.
    fn call_pure<R>(
        &self,
        f: impl AsyncFnOnce(&mut Store<CallState>, &Instance) -> wasmtime::Result<R>,
    ) -> Result<R> {
        let _guard = self.runtime.as_ref().map(tokio::runtime::Handle::enter);
        let _instance = self.metrics.instance();
        let mut store = self.new_store(CallKind::Pure, self.shared.secrets.last());
        let deadline = self
            .shared
            .manifest
            .limits
            .call_timeout
            .min(crate::state::PURE_WALL_CAP);
        let outcome = block_on_with_deadline(deadline, async {
            let instance = self.pre.instantiate(&mut store).await?;
            f(&mut store, &instance).await
        });
        match outcome {
            None => Err(self.timeout_error()),
            Some(Err(e)) => Err(self.fault(store.data(), &e)),
            Some(Ok(r)) => Ok(r),
        }
    }

    /// The price hint, with the plugin's error when it has one (the trait's
    /// `price_hint` folds errors into `None`).
    ///
    /// # Errors
    /// The plugin's error, or a plugin fault.
    pub fn try_price_hint(&self, shape: &NodeShape) -> Result<Option<PriceHint>> {
        let started = Instant::now();
        let result = self.price_hint_call(shape, started);
        self.metrics.record(Op::PriceHint, started, &result);
        result
    }

    fn price_hint_call(&self, shape: &NodeShape, started: Instant) -> Result<Option<PriceHint>> {
        shape.validate()?;
        let reuse = self.engine.settings.price_hint_reuse;
        let r = if reuse > 1 {
            self.price_hint_reused(shape, reuse, started)?
        } else {
            self.call_pure(async |store: &mut Store<CallState>, p: &Instance| {
                p.price_hint(&mut *store, shape).await
            })?
        };
        match r {
            Ok(Some(h)) => crate::answers::price(&self.shared.manifest.name, h).map(Some),
            Ok(None) => Ok(None),
            Err(e) => Err(self.plugin_error(e)),
        }
    }
}

impl WasmPlugin {
    /// `price_hint` in a warm instance when one is kept, else in a new one
    /// that is kept afterwards. The instance is dropped instead when the call
    /// failed in any way the plugin did not answer (trap, CPU, deadline), when
    /// its memory grew, or after `reuse` calls.
    fn price_hint_reused(
        &self,
        shape: &NodeShape,
        reuse: u32,
        started: Instant,
    ) -> Result<Result<Option<PriceHint>>> {
        let _guard = self.runtime.as_ref().map(tokio::runtime::Handle::enter);
        let end = started
            + self
                .shared
                .manifest
                .limits
                .call_timeout
                .min(crate::state::PURE_WALL_CAP);
        let warm = self.warm.lock().ok().and_then(|mut w| w.pop());
        let (_instance, mut store, instance, calls) = match warm {
            Some(mut w) => {
                let newer = self.shared.secrets.newer_than(&w.store.data().secrets);
                w.store.data_mut().restart_pure(newer);
                w.store.set_epoch_deadline(1);
                (self.metrics.reused_instance(), w.store, w.instance, w.calls)
            }
            None => {
                let guard = self.metrics.instance();
                let mut store = self.new_store(CallKind::Pure, self.shared.secrets.last());
                let instance = match block_on_until(end, self.pre.instantiate(&mut store)) {
                    None => return Err(self.timeout_error()),
                    Some(Err(e)) => return Err(self.fault(store.data(), &e)),
                    Some(Ok(instance)) => Box::new(instance),
                };
                (guard, store, instance, 0)
            }
        };
        let call = instance.price_hint(&mut store, shape);
        match block_on_until(end, call) {
            None => Err(self.timeout_error()),
            Some(Err(e)) => Err(self.fault(store.data(), &e)),
            Some(Ok(answer)) => {
                let calls = calls + 1;
                if calls < reuse
                    && !store.data().memory.grew
                    && let Ok(mut warm) = self.warm.lock()
                    && warm.len() < MAX_WARM
                {
                    warm.push(Warm {
                        store,
                        instance,
                        calls,
                    });
                }
                Ok(answer)
            }
        }
    }
}

struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls a future to completion on this thread, giving up after `limit`.
fn block_on_with_deadline<F: Future>(limit: Duration, fut: F) -> Option<F::Output> {
    block_on_until(Instant::now() + limit, fut)
}

/// Polls a future to completion on this thread, giving up at `end`.
fn block_on_until<F: Future>(end: Instant, fut: F) -> Option<F::Output> {
    thread_local! {
        /// This thread's waker, made once: a pure call is too short to pay
        /// for an allocation per call.
        static WAKER: std::task::Waker = Arc::new(ThreadWaker(std::thread::current())).into();
    }
    let waker = WAKER.with(std::task::Waker::clone);
    let mut cx = Context::from_waker(&waker);
    let mut fut = std::pin::pin!(fut);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Some(v);
        }
        let now = Instant::now();
        if now >= end {
            return None;
        }
        std::thread::park_timeout(end - now);
    }
}

/// Whether a failed call ran into a limit the host (wasmtime) enforces on
/// what one call may take from it: live handles, the bytes copied between
/// guest and host, random bytes per request, the size or count of a header
/// map, a stream's write budget. These are `resource_limit` faults, not
/// broken contracts. Where wasmtime gives no typed error, its message is
/// matched (these strings are pinned by the hostile suite).
fn host_limit(err: &wasmtime::Error) -> bool {
    use wasmtime_wasi_http::FieldMapError;
    if matches!(
        err.downcast_ref::<wasmtime::component::ResourceTableError>(),
        Some(wasmtime::component::ResourceTableError::Full)
    ) || matches!(
        err.downcast_ref::<FieldMapError>(),
        Some(FieldMapError::TooManyFields | FieldMapError::TotalSizeTooBig)
    ) {
        return true;
    }
    let text = format!("{err:#}");
    [
        "fuel allocated for hostcalls",
        "requested len",
        "too many fields in the field map",
        "total size of fields exceeds limit",
        "write exceeded budget",
        "max blocking attempts exceeded",
    ]
    .iter()
    .any(|m| text.contains(m))
}

/// The text of a custom section (`wasmprov-contract`,
/// `wasmprov-capabilities`), wherever it sits in the component's nested
/// modules.
#[must_use]
pub fn custom_section(bytes: &[u8], name: &str) -> Option<String> {
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        if let Ok(wasmparser::Payload::CustomSection(reader)) = payload
            && reader.name() == name
        {
            return Some(String::from_utf8_lossy(reader.data()).into_owned());
        }
    }
    None
}

/// The contract version of the provisioner interface the component
/// exports, when it is one this host loads, and which interfaces beyond the
/// core it exports (`contract::interfaces`).
fn check_exports(
    name: &str,
    component: &Component,
    engine: &wasmtime::Engine,
) -> std::result::Result<(&'static str, Interfaces), LoadError> {
    let exports: Vec<String> = component
        .component_type()
        .exports(engine)
        .map(|(n, _)| n.to_string())
        .collect();
    if let Some(export) = exports.iter().find(|e| e.starts_with(EXPORT_PREFIX)) {
        let version = &export[EXPORT_PREFIX.len()..];
        return crate::contract::SUPPORTED
            .into_iter()
            .find(|v| *v == version)
            .map(|v| (v, crate::contract::interfaces(v, &exports)))
            .ok_or_else(|| LoadError::ContractVersion {
                plugin: name.to_string(),
                found: version.to_string(),
                supported: crate::contract::supported_text(),
            });
    }
    Err(LoadError::NotAProvider {
        plugin: name.to_string(),
        reason: format!(
            "the component exports {exports:?} but not wasmprov:provisioner/provisioner@{CONTRACT_VERSION} (or an older version this host loads); build it with wasmprov-guest's export_provider!"
        ),
    })
}

/// A plugin's error with every secret value of the plugin redacted from
/// its message.
fn redacted(secrets: &[String], e: ProvisionerError) -> ProvisionerError {
    use ProvisionerError as E;
    let r = |m: String| crate::log::redact(secrets, &m);
    match e {
        E::Unsupported(m) => E::Unsupported(r(m)),
        E::Capacity { scope, message } => E::Capacity {
            scope,
            message: r(message),
        },
        E::Quota(m) => E::Quota(r(m)),
        E::RateLimited {
            retry_after_ms,
            message,
        } => E::RateLimited {
            retry_after_ms,
            message: r(message),
        },
        E::NotFound(m) => E::NotFound(r(m)),
        E::Auth(m) => E::Auth(r(m)),
        E::Transport(m) => E::Transport(r(m)),
        E::InvalidConfig(m) => E::InvalidConfig(r(m)),
        E::Conflict(m) => E::Conflict(r(m)),
        E::Other(m) => E::Other(r(m)),
        E::Plugin {
            plugin,
            fault,
            message,
        } => E::Plugin {
            plugin,
            fault,
            message: r(message),
        },
        other => other,
    }
}

/// A fresh random request id, for `provision` calls that carry none.
pub(crate) fn random_request_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut out = String::from("auto-");
    for _ in 0..2 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        out.push_str(&format!("{:016x}", h.finish()));
    }
    out
}

#[async_trait::async_trait]
impl CloudProvisioner for WasmPlugin {
    async fn provision(&self, shape: &NodeShape) -> Result<NodeHandle> {
        self.provision_request(&ProvisionRequest::new(random_request_id(), shape.clone()))
            .await
    }

    async fn provision_request(&self, request: &ProvisionRequest) -> Result<NodeHandle> {
        let started = Instant::now();
        let result = self.provision_call(request).await;
        self.metrics.record(Op::Provision, started, &result);
        result
    }

    async fn terminate(&self, id: &ProviderNodeId) -> Result<()> {
        let started = Instant::now();
        let result = self.terminate_call(id).await;
        self.metrics.record(Op::Terminate, started, &result);
        result
    }

    async fn describe(&self) -> Result<Vec<NodeHandle>> {
        let started = Instant::now();
        let result = self.describe_call().await;
        self.metrics.record(Op::Describe, started, &result);
        result
    }

    fn capacity_types(&self) -> &[CapacityType] {
        &self.capacity_types
    }

    fn price_hint(&self, shape: &NodeShape) -> Option<PriceHint> {
        match self.try_price_hint(shape) {
            Ok(hint) => hint,
            Err(e) => {
                tracing::debug!(plugin = %self.shared.manifest.name, error = %e, "no price hint");
                None
            }
        }
    }

    fn name(&self) -> &str {
        &self.shared.manifest.name
    }

    fn try_price_hint(&self, shape: &NodeShape) -> Result<Option<PriceHint>> {
        WasmPlugin::try_price_hint(self, shape)
    }

    async fn get(&self, id: &ProviderNodeId) -> Result<Option<NodeHandle>> {
        let started = Instant::now();
        let result = self.get_call(id).await;
        self.metrics.record(Op::Get, started, &result);
        result
    }

    async fn offerings(&self) -> Result<Vec<Offering>> {
        let started = Instant::now();
        let result = self.offerings_call().await;
        self.metrics.record(Op::Offerings, started, &result);
        result
    }

    fn interfaces(&self) -> Interfaces {
        self.info.interfaces
    }

    async fn set_labels(&self, id: &ProviderNodeId, labels: &Labels) -> Result<NodeHandle> {
        let started = Instant::now();
        let result = self.set_labels_call(id, labels).await;
        self.metrics.record(Op::SetLabels, started, &result);
        result
    }

    async fn assign_address(
        &self,
        id: &ProviderNodeId,
        request: &AddressRequest,
    ) -> Result<StableAddress> {
        let started = Instant::now();
        let result = self.assign_address_call(id, request).await;
        self.metrics.record(Op::AssignAddress, started, &result);
        result
    }

    async fn release_address(&self, id: &ProviderNodeId, address: &str) -> Result<()> {
        let started = Instant::now();
        let result = self.release_address_call(id, address).await;
        self.metrics.record(Op::ReleaseAddress, started, &result);
        result
    }

    async fn register_target(&self, target: &Target) -> Result<()> {
        let started = Instant::now();
        let result = self.target_call(target, true).await;
        self.metrics.record(Op::RegisterTarget, started, &result);
        result
    }

    async fn deregister_target(&self, target: &Target) -> Result<()> {
        let started = Instant::now();
        let result = self.target_call(target, false).await;
        self.metrics.record(Op::DeregisterTarget, started, &result);
        result
    }

    async fn list_targets(&self, group: &str) -> Result<Vec<Target>> {
        let started = Instant::now();
        let result = self.list_targets_call(group).await;
        self.metrics.record(Op::ListTargets, started, &result);
        result
    }

    async fn subnet_capacity(&self, subnet: &str) -> Result<SubnetCapacity> {
        let started = Instant::now();
        let result = self.subnet_capacity_call(subnet).await;
        self.metrics.record(Op::SubnetCapacity, started, &result);
        result
    }
}

/// The contract calls themselves; the trait methods above wrap them in
/// metrics.
impl WasmPlugin {
    async fn provision_call(&self, request: &ProvisionRequest) -> Result<NodeHandle> {
        // The host boundary: an id outside the syntax, a shape no cloud
        // could make or boot data out of bounds never reaches a plugin.
        wasmprov_api::ids::check_request_id(&request.request_id)?;
        request.shape.validate()?;
        request.boot.validate()?;
        if let Some(subnet) = &request.subnet {
            asked("subnet", subnet)?;
        }
        let owner = self.owner_id.as_str();
        let (r, reached) = self
            .call_io_reached(async |store: &mut Store<CallState>, p: &Instance| {
                p.provision(&mut *store, owner, request).await
            })
            .await;
        let r = r.map_err(|e| not_sent(e, reached))?;
        match r {
            Ok(h) => crate::answers::handle(&self.shared.manifest.name, h),
            Err(e) => Err(not_sent(self.plugin_error(e), reached)),
        }
    }

    async fn terminate_call(&self, id: &str) -> Result<()> {
        // Refused, not passed on: a plugin could answer `not_found` for an
        // id no node can have, and the caller would be told it is gone.
        asked("provider id", id)?;
        let owner = self.owner_id.as_str();
        let (r, reached) = self
            .call_io_reached(async |store: &mut Store<CallState>, p: &Instance| {
                p.terminate(&mut *store, owner, id).await
            })
            .await;
        let r = r.map_err(|e| not_sent(e, reached))?;
        r.map_err(|e| not_sent(self.plugin_error(e), reached))
    }

    async fn describe_call(&self) -> Result<Vec<NodeHandle>> {
        let owner = self.owner_id.as_str();
        let r = self
            .call_io(async |store: &mut Store<CallState>, p: &Instance| {
                p.describe(&mut *store, owner).await
            })
            .await?;
        match r {
            Ok(nodes) => {
                let (nodes, foreign) =
                    crate::answers::handles(&self.shared.manifest.name, owner, nodes)?;
                self.metrics.foreign_nodes(foreign);
                Ok(nodes)
            }
            Err(e) => Err(self.plugin_error(e)),
        }
    }

    async fn get_call(&self, id: &str) -> Result<Option<NodeHandle>> {
        let owner = self.owner_id.as_str();
        let plugin = self.shared.manifest.name.as_str();
        let r = self
            .call_io(async |store: &mut Store<CallState>, p: &Instance| {
                p.get(&mut *store, owner, id, plugin).await
            })
            .await?;
        match r {
            Ok(node) => crate::answers::got(plugin, owner, id, node),
            Err(e) => Err(self.plugin_error(e)),
        }
    }

    async fn offerings_call(&self) -> Result<Vec<Offering>> {
        let plugin = self.shared.manifest.name.as_str();
        let r = self
            .call_io(async |store: &mut Store<CallState>, p: &Instance| {
                p.offerings(&mut *store, plugin).await
            })
            .await?;
        match r {
            Ok(list) => crate::answers::offerings(plugin, list),
            Err(e) => Err(self.plugin_error(e)),
        }
    }

    /// Refuses a call to an interface the plugin does not export
    /// (`PluginInfo::interfaces`), before any instance is made: nothing was
    /// sent.
    fn has(&self, call: &str, present: bool) -> Result<()> {
        if present {
            return Ok(());
        }
        Err(ProvisionerError::Unsupported(format!(
            "plugin {} (contract {}) does not export {call}",
            self.shared.manifest.name, self.info.contract
        )))
    }

    /// The turn of node `id` of this plugin among the calls that change a
    /// node, in this process (across reloads; not across processes).
    async fn node_turn(&self, id: &str) -> crate::keyed_lock::KeyedGuard<'_> {
        let key = format!("node\0{}\0{id}", self.shared.manifest.name);
        self.nodes.lock(&key).await
    }

    /// The turn of this plugin among the calls that change addresses
    /// (assign-address, release-address), taken after the node's. One per
    /// plugin, not per node: moving an address off node M changes M too
    /// (Hetzner rewrites a server's whole alias IP list, so two moves
    /// under two nodes' locks could each write back a list missing the
    /// other's address), and which nodes a call touches is known only to
    /// the plugin.
    async fn address_turn(&self) -> crate::keyed_lock::KeyedGuard<'_> {
        let key = format!("addresses\0{}", self.shared.manifest.name);
        self.nodes.lock(&key).await
    }

    async fn set_labels_call(&self, id: &str, labels: &Labels) -> Result<NodeHandle> {
        self.has("set-labels", self.info.interfaces.set_labels)?;
        // The host boundary: labels a shape could not carry, or that would
        // overwrite the ownership and request labels, never reach a plugin.
        asked("provider id", id)?;
        wasmprov_api::provenance::check_new_labels(labels)?;
        let _turn = self.node_turn(id).await;
        // The node as it is: it must exist and be this owner's before
        // set-labels is asked, and its reserved labels are what the answer
        // must keep, exactly.
        let before = self.get_call(id).await?.ok_or_else(|| {
            ProvisionerError::NotFound(format!(
                "node {id:?} of plugin {}: not there, or not owned by this host; its labels were not changed",
                self.shared.manifest.name
            ))
        })?;
        let owner = self.owner_id.as_str();
        let (r, reached) = self
            .call_io_reached(async |store: &mut Store<CallState>, p: &Instance| {
                p.set_labels(&mut *store, owner, id, labels).await
            })
            .await;
        let r = r.map_err(|e| not_sent(e, reached))?;
        match r {
            Ok(h) => crate::answers::relabelled(
                &self.shared.manifest.name,
                owner,
                id,
                labels,
                &before,
                h,
            ),
            Err(e) => Err(not_sent(self.plugin_error(e), reached)),
        }
    }

    async fn assign_address_call(
        &self,
        id: &str,
        request: &AddressRequest,
    ) -> Result<StableAddress> {
        self.has("networking", self.info.interfaces.networking)?;
        asked("provider id", id)?;
        if let Some(a) = &request.address {
            asked_address(Some(request.kind), a)?;
        }
        let _turn = self.node_turn(id).await;
        let _addresses = self.address_turn().await;
        let owner = self.owner_id.as_str();
        let (r, reached) = self
            .call_io_reached(async |store: &mut Store<CallState>, p: &Instance| {
                p.assign_address(&mut *store, owner, id, request).await
            })
            .await;
        let r = r.map_err(|e| not_sent(e, reached))?;
        match r {
            Ok(a) => crate::answers::stable_address(&self.shared.manifest.name, id, request, a),
            Err(e) => Err(not_sent(self.plugin_error(e), reached)),
        }
    }

    async fn release_address_call(&self, id: &str, address: &str) -> Result<()> {
        self.has("networking", self.info.interfaces.networking)?;
        asked("provider id", id)?;
        asked_address(None, address)?;
        let _turn = self.node_turn(id).await;
        let _addresses = self.address_turn().await;
        let owner = self.owner_id.as_str();
        let (r, reached) = self
            .call_io_reached(async |store: &mut Store<CallState>, p: &Instance| {
                p.release_address(&mut *store, owner, id, address).await
            })
            .await;
        let r = r.map_err(|e| not_sent(e, reached))?;
        r.map_err(|e| not_sent(self.plugin_error(e), reached))
    }

    /// `register-target` (`register`) or `deregister-target`.
    async fn target_call(&self, target: &Target, register: bool) -> Result<()> {
        self.has("networking", self.info.interfaces.networking)?;
        asked("target group", &target.group)?;
        asked("provider id", &target.provider_id)?;
        let _turn = self.node_turn(&target.provider_id).await;
        let owner = self.owner_id.as_str();
        let (r, reached) = self
            .call_io_reached(async |store: &mut Store<CallState>, p: &Instance| {
                if register {
                    p.register_target(&mut *store, owner, target).await
                } else {
                    p.deregister_target(&mut *store, owner, target).await
                }
            })
            .await;
        let r = r.map_err(|e| not_sent(e, reached))?;
        r.map_err(|e| not_sent(self.plugin_error(e), reached))
    }

    async fn list_targets_call(&self, group: &str) -> Result<Vec<Target>> {
        self.has("networking", self.info.interfaces.networking)?;
        asked("target group", group)?;
        let owner = self.owner_id.as_str();
        let r = self
            .call_io(async |store: &mut Store<CallState>, p: &Instance| {
                p.list_targets(&mut *store, owner, group).await
            })
            .await?;
        match r {
            Ok(list) => crate::answers::targets(&self.shared.manifest.name, group, list),
            Err(e) => Err(self.plugin_error(e)),
        }
    }

    async fn subnet_capacity_call(&self, subnet: &str) -> Result<SubnetCapacity> {
        self.has("networking", self.info.interfaces.networking)?;
        asked("subnet", subnet)?;
        let r = self
            .call_io(async |store: &mut Store<CallState>, p: &Instance| {
                p.subnet_capacity(&mut *store, subnet).await
            })
            .await?;
        match r {
            Ok(c) => crate::answers::subnet_capacity(&self.shared.manifest.name, subnet, c),
            Err(e) => Err(self.plugin_error(e)),
        }
    }

    /// The plugin's own error, as the caller sees it: secrets redacted.
    fn plugin_error(&self, e: ProvisionerError) -> ProvisionerError {
        redacted(&self.shared.secrets.known(), e)
    }
}

/// A name the caller gives a networking or labelling call (a provider id,
/// target group, subnet), refused before a plugin sees it by the one rule
/// for callers' names (`wasmprov_api::network::name_fault`).
fn asked(what: &str, v: &str) -> Result<()> {
    match wasmprov_api::network::name_fault(what, v) {
        Some(why) => Err(ProvisionerError::Unsupported(why)),
        None => Ok(()),
    }
}

/// An address a caller gives `assign-address` (of `kind`) or
/// `release-address` (no kind), refused before a plugin sees it by the rule
/// its answer meets too (`wasmprov_api::network::asked_address_fault`).
fn asked_address(kind: Option<wasmprov_api::AddressKind>, v: &str) -> Result<()> {
    match wasmprov_api::network::asked_address_fault(kind, v) {
        Some(why) => Err(ProvisionerError::Unsupported(why)),
        None => Ok(()),
    }
}

/// The error of a call that changes a backend (provision, terminate), as
/// the caller sees it: when nothing of the call left the host (`reached`
/// unset: no HTTP request written to a connected peer, no program
/// started), an error that would leave the caller guessing whether the
/// backend acted (transport, rate limit, anything else) is
/// [`ProvisionerError::NotSent`], which says it did not. Errors that already
/// say so, `not-found`, plugin faults (kept as they are, so that a timeout
/// or a bug stays visible) and a rate limit with a retry-after (the host's
/// admission refusing to start the call) are left alone.
fn not_sent(e: ProvisionerError, reached: bool) -> ProvisionerError {
    if reached || e.made_nothing() {
        return e;
    }
    // The host's own refusal to start the call (`admission.rs`) says when
    // to come back; it stays a rate limit so the caller gets that. Nothing
    // ran, so a retry under the same request id is safe either way.
    if let ProvisionerError::RateLimited {
        retry_after_ms: Some(_),
        ..
    } = &e
    {
        return e;
    }
    match e {
        ProvisionerError::Transport(_)
        | ProvisionerError::RateLimited { .. }
        | ProvisionerError::Other(_) => ProvisionerError::NotSent(e.to_string()),
        other => other,
    }
}

/// Where each plugin's processes run: `<work root>/<plugin>`.
pub(crate) fn default_work_root() -> PathBuf {
    std::env::temp_dir().join("wasmprov-work")
}

#[cfg(test)]
mod tests {
    use super::asked_address;
    use wasmprov_api::AddressKind::{Private, Public};

    /// Issue 26 (second attack), finding 6: the caller's address meets the
    /// rule the plugin's answer meets (`answers::address_refusal`), and an
    /// id is an id, not an IP in another notation.
    #[test]
    fn a_callers_address_is_an_allowed_ip_or_an_id() {
        for (kind, ok) in [
            (Some(Private), "10.0.0.5"),
            (Some(Private), "fd00::5"),
            (Some(Public), "203.0.113.7"),
            (Some(Public), "2001:db8::7"),
            (None, "10.0.0.5"),
            (None, "eipalloc-0abc123"),
            (Some(Public), "4711"),
        ] {
            assert!(asked_address(kind, ok).is_ok(), "{kind:?} {ok}");
        }
        for (kind, bad) in [
            (Some(Private), "127.0.0.1"),
            (None, "127.0.0.1"),
            (None, "0.0.0.0"),
            (None, "224.0.0.5"),
            (None, "255.255.255.255"),
            (None, "169.254.169.254"),
            (None, "fe80::1"),
            (None, "::ffff:169.254.169.254"),
            (None, "::ffff:10.0.0.5"),
            (None, "::10.0.0.5"),
            (None, "64:ff9b::a9fe:a9fe"),
            (Some(Public), "10.0.0.5"),
            (Some(Public), "100.64.1.1"),
            (Some(Public), "fd00::5"),
            (None, "127.1"),
            (None, "0x7f.0.0.1"),
            (None, "fe80::1%eth0"),
            (None, "eipalloc-1; rm -rf /"),
            (None, ""),
        ] {
            assert!(asked_address(kind, bad).is_err(), "{kind:?} {bad}");
        }
    }
}
