//! The conformance suite: a plugin loaded by the real host under its real
//! grants, driven through the provisioner trait, checked from outside.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use wasmprov_testkit::{Fake, FaultSpec, Suite};
//! let report = Suite::from_dir("plugins.d", "hetzner")
//!     .fake(Fake::Hetzner)
//!     .faults(FaultSpec::default_mix())
//!     .run()
//!     .await?;
//! println!("{report}");
//! report.assert_passed();
//! # Ok(()) }
//! ```
//!
//! The steps, in order: identity and price hints (no I/O); nodes planted
//! behind the plugin's back (one by a second host with another owner id
//! through the plugin itself, and, when the fake can, untagged and
//! foreign-tagged ones made directly in the fake); provision, describe,
//! re-provision with the same request id; a second node in the first one's
//! zone; four more provisions (the ones faults hit most); foreign nodes
//! checked in describe and refused by terminate; terminate, describe,
//! terminate again; an impossible shape; then clean-up (without faults)
//! and the leak check against the fake's own record of what exists; then
//! contract 0.3's rules on nodes of their own (set-labels, a request's
//! subnet, and, with a fake that has them, subnet capacity, stable
//! addresses and target groups), removed again.
//!
//! With faults, every call that fails while a fault hit its last request is
//! checked against the fault (`errors.classified`) and tried again, up to
//! [`MAX_ATTEMPTS`] times, as an orchestrator would. A call that retried
//! past a fault itself and then failed is judged by its own answer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use wasmprov_api::{
    Arch, BootData, CapacityType, CloudProvisioner, JoinState, NodeHandle, NodeShape, NodeStatus,
    Offering, PriceHint, ProvisionRequest, ProvisionerError,
};
use wasmprov_host::{HostBuilder, LockMode, WasmPlugin};

use crate::cassette::{Cassette, Recorder, Redactor, Replayer};
use crate::fake::{Fake, FakeCloud, NodeRecord, TruthNode};
use crate::faults::{FaultSpec, Injector};
use crate::harness::{Denials, Harness, Target};
use crate::report::{Checks, Report};

mod net;

/// Label carrying the owner id (as the guest SDK writes it).
pub const OWNER_LABEL: &str = "wasmprov-owner";
/// Label carrying the request id.
pub const REQUEST_LABEL: &str = "wasmprov-request";
/// Tries of one call under faults before the suite gives up on it.
pub const MAX_ATTEMPTS: u32 = 20;
/// Longest the suite waits between tries (a fault's `Retry-After` is
/// honoured up to this).
const RETRY_PAUSE_MAX: Duration = Duration::from_millis(20);
/// The whole run must finish within this.
const RUN_LIMIT: Duration = Duration::from_secs(300);

const GIB: u64 = 1 << 30;

/// Where the plugin comes from.
#[derive(Clone, Debug)]
enum Source {
    Dir(PathBuf),
    Component { wasm: PathBuf, manifest: String },
}

/// What the plugin's requests go to.
#[derive(Clone, Debug)]
enum Mode {
    /// The fake that fits the plugin's name.
    Auto,
    Fake(Fake),
    /// A fake built by the caller.
    Custom(CustomFake),
    /// A fake speaking the fake-control protocol at this URL.
    Url(String),
    /// A fake speaking the fake-control protocol, started by this command.
    Command(String),
    Replay(PathBuf),
    Live,
}

/// A caller's fake, shown by its description.
#[derive(Clone)]
struct CustomFake(Arc<dyn FakeCloud>);

impl std::fmt::Debug for CustomFake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.describe())
    }
}

/// A conformance run, configured with the builder methods and started
/// with [`Suite::run`].
#[derive(Clone, Debug)]
pub struct Suite {
    plugin: String,
    source: Source,
    mode: Mode,
    faults: FaultSpec,
    record: Option<PathBuf>,
    owner: String,
    cache_dir: Option<PathBuf>,
}

impl Suite {
    fn new(plugin: &str, source: Source) -> Self {
        Self {
            plugin: plugin.to_string(),
            source,
            mode: Mode::Auto,
            faults: FaultSpec::none(),
            record: None,
            owner: "wasmprov-conformance".into(),
            cache_dir: default_cache_dir(),
        }
    }

    /// Tests plugin `plugin` of a plugin directory (its manifest is the one
    /// whose `name` is `plugin`).
    #[must_use]
    pub fn from_dir(plugin_dir: impl Into<PathBuf>, plugin: &str) -> Self {
        Self::new(plugin, Source::Dir(plugin_dir.into()))
    }

    /// Tests a component with the manifest `manifest` (TOML text; its
    /// `component` is replaced by `wasm`).
    #[must_use]
    pub fn from_component(plugin: &str, wasm: &Path, manifest: &str) -> Self {
        Self::new(
            plugin,
            Source::Component {
                wasm: wasm.to_path_buf(),
                manifest: manifest.to_string(),
            },
        )
    }

    /// Sends the plugin's HTTP to `fake` (or its exec to `fake`'s stubs).
    /// Without a target, the fake that fits the plugin's name is used.
    #[must_use]
    pub fn fake(mut self, fake: Fake) -> Self {
        self.mode = Mode::Fake(fake);
        self
    }

    /// Sends the plugin's HTTP (or exec) to a fake of your own cloud: any
    /// [`FakeCloud`]. Every rule runs against it: ground truth, planted
    /// nodes, faults in its dialect, leak checks.
    #[must_use]
    pub fn fake_cloud(mut self, fake: Arc<dyn FakeCloud>) -> Self {
        self.mode = Mode::Custom(CustomFake(fake));
        self
    }

    /// Sends the plugin's HTTP to the fake at `url` (`http://127.0.0.1:PORT`),
    /// read through the fake-control protocol (`docs/FAKE-PROTOCOL.md`):
    /// a fake of any cloud, in any language, running as its own process.
    #[must_use]
    pub fn fake_url(mut self, url: &str) -> Self {
        self.mode = Mode::Url(url.to_string());
        self
    }

    /// Like [`Suite::fake_url`], for a fake this run starts: `command`
    /// (run by `sh -c`) prints the fake's URL as the first line of its
    /// standard output; it is killed when the run ends.
    #[must_use]
    pub fn fake_command(mut self, command: &str) -> Self {
        self.mode = Mode::Command(command.to_string());
        self
    }

    /// Answers the plugin's HTTP from a cassette; nothing leaves the process.
    #[must_use]
    pub fn replay(mut self, cassette: impl Into<PathBuf>) -> Self {
        self.mode = Mode::Replay(cassette.into());
        self
    }

    /// Lets the plugin's requests go where it addresses them, with secrets
    /// from the environment: a real cloud (to record a cassette, say).
    /// Nodes are created for real and terminated at the end.
    #[must_use]
    pub fn live(mut self) -> Self {
        self.mode = Mode::Live;
        self
    }

    /// Records every HTTP exchange to this cassette file.
    #[must_use]
    pub fn record(mut self, cassette: impl Into<PathBuf>) -> Self {
        self.record = Some(cassette.into());
        self
    }

    /// Injects faults (with a fake target only).
    #[must_use]
    pub fn faults(mut self, spec: FaultSpec) -> Self {
        self.faults = spec;
        self
    }

    /// The owner id of the run (default `wasmprov-conformance`; the foreign
    /// owner is this with `-foreign`, cut to fit an id: [`foreign_owner_of`]).
    #[must_use]
    pub fn owner(mut self, owner: &str) -> Self {
        self.owner = owner.to_string();
        self
    }

    /// Where compiled components are cached (default: the user's cache;
    /// `None`: a cache that lasts as long as the run).
    #[must_use]
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.cache_dir = dir;
        self
    }

    /// Runs the suite.
    ///
    /// # Errors
    /// When the run cannot start: the plugin is not found or does not load,
    /// the fake cannot start ([`crate::Unavailable`] when it cannot run
    /// here), the cassette cannot be read or written. Rule failures are
    /// not errors: they are in the report.
    pub async fn run(self) -> anyhow::Result<Report> {
        let started = Instant::now();
        let plugin = PreparedPlugin::prepare(&self.plugin, &self.source)?;
        let mode = match self.mode.clone() {
            Mode::Auto => Mode::Fake(Fake::for_plugin(&self.plugin).ok_or_else(|| {
                anyhow::anyhow!(
                    "no built-in fake fits plugin {:?}: choose one ({}), a fake of your own (fake_url, fake_command, fake_cloud), a cassette to replay, or a live run",
                    self.plugin,
                    Fake::ALL.map(|(n, _)| n).join(", ")
                )
            })?),
            m => m,
        };
        if self.faults.is_active() && matches!(mode, Mode::Replay(_) | Mode::Live) {
            anyhow::bail!(
                "faults need a fake cloud: a replayed cassette holds one answer per request, and a live cloud should not be faulted"
            );
        }
        let (target, fake, secret_source, target_name): (Target, _, SecretFn, String) = match &mode
        {
            Mode::Fake(_) | Mode::Custom(_) | Mode::Url(_) | Mode::Command(_) => {
                let fake: Arc<dyn FakeCloud> = match &mode {
                    Mode::Fake(kind) => kind.start(&plugin.config).await?,
                    Mode::Custom(CustomFake(fake)) => fake.clone(),
                    Mode::Url(url) => Arc::new(crate::fakes::remote::Remote::connect(url).await?),
                    Mode::Command(cmd) => Arc::new(crate::fakes::remote::Remote::start(cmd).await?),
                    _ => unreachable!("matched above"),
                };
                if let Some(kind) = self
                    .faults
                    .rates
                    .iter()
                    .filter(|(_, rate)| *rate > 0.0)
                    .map(|(kind, _)| *kind)
                    .find(|kind| !fake.renders(*kind))
                {
                    anyhow::bail!(
                        "{} does not say how its cloud answers a {kind} fault; describe it (`faults` in the fake-control protocol's info), or leave {kind} out of the faults",
                        fake.describe()
                    );
                }
                plugin.add_config(&self.plugin, &fake.config())?;
                let for_secrets = fake.clone();
                (
                    Target::Fake(fake.clone()),
                    Some(fake.clone()),
                    Arc::new(move |env: &str| for_secrets.secret(env)),
                    fake.describe(),
                )
            }
            Mode::Replay(path) => {
                let cassette = Cassette::load(path)?;
                let redact = plugin.redactor(&|env| Some(replay_secret(env)));
                (
                    Target::Replay(Arc::new(Replayer::new(cassette, redact))),
                    None,
                    Arc::new(|env: &str| Some(replay_secret(env))),
                    format!("cassette {}", path.display()),
                )
            }
            Mode::Live => (
                Target::Live,
                None,
                Arc::new(|env: &str| std::env::var(env).ok()),
                "the endpoints the plugin addresses (live)".into(),
            ),
            Mode::Auto => unreachable!("resolved above"),
        };
        let recorder = self.record.as_ref().map(|_| {
            Arc::new(Recorder::new(
                &self.plugin,
                &target_name,
                plugin.redactor(&*secret_source),
            ))
        });
        let injector = Arc::new(Injector::new(self.faults.clone()));
        let harness = Arc::new(Harness {
            target: target.clone(),
            recorder: recorder.clone(),
            injector: injector.clone(),
        });
        let denials = Arc::new(Denials::default());
        // Without a cache, the run still compiles the component once: the
        // second host loads it from a cache that lives as long as the run.
        let cache_dir = match &self.cache_dir {
            Some(dir) => dir.clone(),
            None => plugin.dir.path().join(".cache"),
        };
        let foreign_owner = foreign_owner_of(&self.owner);
        let load = |owner: &str| {
            let secrets = secret_source.clone();
            HostBuilder::new(plugin.dir.path())
                .owner_id(owner)
                .cache_dir(Some(cache_dir.clone()))
                .work_dir(plugin.dir.path().join(".work"))
                .lock_mode(LockMode::Off)
                .secret_source(move |env| secrets(env))
                .http_interceptor(harness.clone())
                .exec_interceptor(harness.clone())
                .observer(denials.clone())
                .build()
        };
        let host = load(&self.owner).await?;
        let foreign_host = load(&foreign_owner).await?;
        if let Some(err) = host.errors().first() {
            anyhow::bail!("plugin {} did not load: {err}", self.plugin);
        }
        let (Some(wasm), Some(foreign)) = (
            host.wasm_plugin(&self.plugin),
            foreign_host.wasm_plugin(&self.plugin),
        ) else {
            anyhow::bail!(
                "the manifest of {:?} loaded under another name",
                self.plugin
            );
        };

        let mut run = Run {
            plugin: wasm.clone(),
            foreign: foreign.clone(),
            fake: fake.clone(),
            injector: injector.clone(),
            checks: Checks::new(),
            owner: self.owner.clone(),
            foreign_owner,
            calls: 0,
            requests: Vec::new(),
            made: BTreeMap::new(),
            seen_in_truth: false,
            paged: Vec::new(),
            offerings: Vec::new(),
            started_ms: now_ms(),
            subnet_node: None,
        };
        let outcome = tokio::time::timeout(RUN_LIMIT, run.steps()).await;
        let mut notes = Vec::new();
        if outcome.is_err() {
            run.checks.fail(
                "errors.no-fault",
                format!(
                    "the suite did not finish within {} s; the plugin's calls hang",
                    RUN_LIMIT.as_secs()
                ),
            );
        }

        if outcome.is_ok() {
            // Every call went through `Run::call`, which fails this rule on
            // any plugin fault.
            run.checks.pass("errors.no-fault");
        }
        let denials = denials.0.lock().map(|d| d.clone()).unwrap_or_default();
        if denials.is_empty() {
            run.checks.pass("grants.inside");
        }
        for d in &denials {
            run.checks.fail(
                "grants.inside",
                format!(
                    "the host denied {} {} of owner's plugin: {}",
                    match d.kind {
                        wasmprov_host::intercept::DenialKind::Http => "HTTP request",
                        wasmprov_host::intercept::DenialKind::Exec => "program run",
                    },
                    d.target,
                    d.reason
                ),
            );
        }
        let mut unrecorded = Vec::new();
        match &target {
            Target::Replay(replayer) => {
                unrecorded = replayer.unrecorded();
                if unrecorded.is_empty() {
                    run.checks.pass("replay.recorded");
                }
                for u in &unrecorded {
                    run.checks.fail(
                        "replay.recorded",
                        format!(
                            "{} is not in the cassette:\n{}",
                            u.request,
                            u.diff.trim_end()
                        ),
                    );
                }
                let unused = replayer.unused();
                if unused > 0 {
                    notes.push(format!(
                        "{unused} recorded interactions were not asked for (the plugin made fewer requests than when recorded)"
                    ));
                }
            }
            _ => run.checks.skip("replay.recorded", "not a replay"),
        }
        if let (Some(path), Some(recorder)) = (&self.record, &recorder) {
            let cassette = recorder.cassette();
            cassette.save(path)?;
            notes.push(format!(
                "recorded {} interactions to {}",
                cassette.interactions.len(),
                path.display()
            ));
        }
        let rules = run.checks.finish();
        let passed = rules
            .iter()
            .all(|r| r.status != crate::report::Status::Fail);
        Ok(Report {
            plugin: self.plugin.clone(),
            target: target_name,
            faults: self.faults.to_string(),
            passed,
            rules,
            injected: injector.log(),
            denials,
            unrecorded,
            calls: run.calls,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            notes,
        })
    }
}

type SecretFn = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The other owner a run's foreign nodes belong to: `owner` with
/// `-foreign`, its head cut so the id stays valid (at most
/// [`wasmprov_api::ids::MAX_ID_LEN`]), and never `owner` itself.
#[must_use]
pub fn foreign_owner_of(owner: &str) -> String {
    for suffix in ["-foreign", "-alien"] {
        let room = wasmprov_api::ids::MAX_ID_LEN - suffix.len();
        let head = owner.get(..owner.len().min(room)).unwrap_or(owner);
        let id = format!("{}{suffix}", head.trim_end_matches(['-', '_']));
        if id != owner {
            return id;
        }
    }
    unreachable!("an owner cannot end with both suffixes")
}

/// Most nodes the suite plants to span two pages: a fake with larger
/// pages skips `describe.pages`.
const MAX_PAGE_PLANT: usize = 500;
/// How far a handle's creation time may be from the fake's (clouds and
/// fakes write whole seconds).
const CREATED_SLACK_MS: u64 = 2_000;
/// The SSH key the suite asks to authorize (`boot.ssh-keys`).
const SSH_KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGNvbmZvcm1hbmNlLWtleS1vZi13YXNtcHJvdi10ZXN0 conformance@wasmprov";

/// Valid ids that are easy to get wrong (see `wasmprov_api::ids`): a
/// double hyphen (not a hostname label on every cloud), underscores (not
/// hostname characters), and the longest id.
fn awkward_ids() -> Vec<String> {
    let mut longest = String::from("conformance_longest-id-");
    while longest.len() < wasmprov_api::ids::MAX_ID_LEN - 1 {
        longest.push('x');
    }
    longest.push('9');
    vec!["a--b".into(), "a_b__c".into(), longest]
}

/// The value a replay gives secret `env`: any value works, since secrets are
/// redacted to their names before requests are compared.
fn replay_secret(env: &str) -> String {
    format!("replayed-secret-{env}")
}

fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("wasmprov"))
}

/// The plugin copied alone into a directory of its own, its manifest's
/// `[config]` extended with the fake's values.
struct PreparedPlugin {
    dir: tempfile::TempDir,
    config: BTreeMap<String, String>,
    /// Secret name → environment variable.
    secrets: BTreeMap<String, String>,
}

impl PreparedPlugin {
    fn prepare(plugin: &str, source: &Source) -> anyhow::Result<Self> {
        let (mut manifest, wasm) = match source {
            Source::Component { wasm, manifest } => {
                let table: toml::Table = toml::from_str(manifest)
                    .with_context(|| format!("the manifest of {plugin} is not TOML"))?;
                (table, wasm.clone())
            }
            Source::Dir(dir) => find_manifest(dir, plugin)?,
        };
        let name = manifest.get("name").and_then(|v| v.as_str());
        if name != Some(plugin) {
            anyhow::bail!("the manifest names plugin {name:?}, not {plugin:?}");
        }
        let dir = tempfile::Builder::new()
            .prefix("wasmprov-test-")
            .tempdir()
            .context("creating a plugin directory")?;
        let file = format!("{plugin}.wasm");
        std::fs::copy(&wasm, dir.path().join(&file))
            .with_context(|| format!("copying the component {}", wasm.display()))?;
        manifest.insert("component".into(), toml::Value::String(file));
        let config: BTreeMap<String, String> = manifest
            .get("config")
            .and_then(|c| c.as_table())
            .map(|t| {
                t.iter()
                    .map(|(k, v)| {
                        let v = v
                            .as_str()
                            .map_or_else(|| v.to_string(), ToString::to_string);
                        (k.clone(), v)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let secrets = manifest
            .get("secrets")
            .and_then(|s| s.as_table())
            .map(|t| {
                t.iter()
                    .filter_map(|(k, v)| {
                        let env = v.get("env")?.as_str()?;
                        Some((k.clone(), env.to_string()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        std::fs::write(
            dir.path().join(format!("{plugin}.toml")),
            toml::to_string(&manifest).context("writing the manifest")?,
        )
        .context("writing the manifest")?;
        Ok(Self {
            dir,
            config,
            secrets,
        })
    }

    /// Adds `extra` to the manifest's `[config]` (for a fake's values).
    fn add_config(&self, plugin: &str, extra: &BTreeMap<String, String>) -> anyhow::Result<()> {
        if extra.is_empty() {
            return Ok(());
        }
        let path = self.dir.path().join(format!("{plugin}.toml"));
        let mut manifest: toml::Table = toml::from_str(&std::fs::read_to_string(&path)?)?;
        let config = manifest
            .entry("config")
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if let Some(table) = config.as_table_mut() {
            for (k, v) in extra {
                table.insert(k.clone(), toml::Value::String(v.clone()));
            }
        }
        std::fs::write(&path, toml::to_string(&manifest)?)?;
        Ok(())
    }

    /// A redactor of this plugin's secrets, valued by `source`.
    fn redactor(&self, source: &dyn Fn(&str) -> Option<String>) -> Redactor {
        Redactor::new(
            self.secrets
                .iter()
                .filter_map(|(name, env)| Some((name.clone(), source(env)?))),
        )
    }
}

/// Finds the manifest named `plugin` in a plugin directory.
fn find_manifest(dir: &Path, plugin: &str) -> anyhow::Result<(toml::Table, PathBuf)> {
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("reading plugin directory {}", dir.display()))?;
    let mut names = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("toml") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(table) = toml::from_str::<toml::Table>(&text) else {
            continue;
        };
        let name = table.get("name").and_then(|v| v.as_str()).unwrap_or("");
        if name == plugin {
            let component = table
                .get("component")
                .and_then(|v| v.as_str())
                .with_context(|| format!("{} names no component", path.display()))?;
            return Ok((table.clone(), dir.join(component)));
        }
        names.push(name.to_string());
    }
    names.sort();
    anyhow::bail!(
        "no plugin {plugin:?} in {} (plugins there: {})",
        dir.display(),
        if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        }
    )
}

/// One run's state.
struct Run {
    plugin: Arc<WasmPlugin>,
    foreign: Arc<WasmPlugin>,
    fake: Option<Arc<dyn FakeCloud>>,
    injector: Arc<Injector>,
    checks: Checks,
    owner: String,
    foreign_owner: String,
    calls: u32,
    /// Request ids this owner provisioned.
    requests: Vec<String>,
    /// Request ids whose provision returned a node, with the node's id.
    made: BTreeMap<String, String>,
    /// Whether the fake's ground truth ever listed a node of this owner:
    /// rules about nodes in the cloud pass only when it has.
    seen_in_truth: bool,
    /// Nodes of this owner planted in the fake, more than a page of them.
    paged: Vec<String>,
    /// What `offerings` listed (for a zone other than the default).
    offerings: Vec<Offering>,
    /// When the run started, in milliseconds since the Unix epoch.
    started_ms: u64,
    /// The node `request.subnet` placed in the fake's subnet, kept until
    /// `subnet.capacity` has counted it.
    subnet_node: Option<String>,
}

type CallResult<T> = Result<T, ProvisionerError>;

impl Run {
    /// Runs `call` until it succeeds, or fails with no injected fault to
    /// explain it; checks each fault-explained error against its fault.
    async fn call<T, F, Fut>(&mut self, what: &str, mut call: F) -> CallResult<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = CallResult<T>>,
    {
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.calls += 1;
            let mark = self.injector.mark();
            let err = match call().await {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            if let ProvisionerError::Plugin { fault, message, .. } = &err {
                self.checks.fail(
                    "errors.no-fault",
                    format!("{what}: the plugin {fault}: {message}"),
                );
            }
            let injected = self.injector.since(mark);
            let Some(last) = injected.last() else {
                return Err(err);
            };
            // A plugin that retried past the fault and then failed for
            // another reason answered for itself: the fault explains the
            // error only when it hit the call's last request.
            if last.request < self.injector.requests() {
                return Err(err);
            }
            if last.kind.accepts(&err) {
                self.checks.pass("errors.classified");
            } else {
                self.checks.fail(
                    "errors.classified",
                    format!(
                        "{what}: after an injected {} on {}, the plugin answered {} ({err}); expected {}",
                        last.kind,
                        last.target,
                        err.kind(),
                        last.kind.expected_kinds().unwrap_or(&[]).join(" or ")
                    ),
                );
            }
            if attempt >= MAX_ATTEMPTS {
                self.checks.fail(
                    "errors.classified",
                    format!("{what}: still failing after {attempt} tries: {err}"),
                );
                return Err(err);
            }
            let pause = err
                .retry_after()
                .unwrap_or(Duration::ZERO)
                .min(RETRY_PAUSE_MAX);
            tokio::time::sleep(pause).await;
        }
    }

    async fn provision(&mut self, request_id: &str, shape: &NodeShape) -> CallResult<NodeHandle> {
        self.provision_booting(request_id, shape, BootData::default())
            .await
    }

    async fn provision_booting(
        &mut self,
        request_id: &str,
        shape: &NodeShape,
        boot: BootData,
    ) -> CallResult<NodeHandle> {
        let plugin = self.plugin.clone();
        let req = ProvisionRequest {
            request_id: request_id.to_string(),
            shape: shape.clone(),
            boot,
            subnet: None,
        };
        if !self.requests.iter().any(|r| r == request_id) {
            self.requests.push(request_id.to_string());
        }
        let made = self
            .call(&format!("provision {request_id}"), || {
                let plugin = plugin.clone();
                let req = req.clone();
                async move { plugin.provision_request(&req).await }
            })
            .await;
        if let Ok(node) = &made {
            self.made
                .insert(request_id.to_string(), node.provider_id.clone());
        }
        made
    }

    async fn describe(&mut self) -> CallResult<Vec<NodeHandle>> {
        let plugin = self.plugin.clone();
        self.call("describe", || {
            let plugin = plugin.clone();
            async move { plugin.describe().await }
        })
        .await
    }

    async fn terminate(&mut self, id: &str) -> CallResult<()> {
        let plugin = self.plugin.clone();
        let id = id.to_string();
        let injector = self.injector.clone();
        let mark = injector.mark();
        let result = self
            .call(&format!("terminate {id}"), || {
                let plugin = plugin.clone();
                let id = id.clone();
                async move { plugin.terminate(&id).await }
            })
            .await;
        // A retried terminate whose first try took effect finds the node gone.
        let earlier_fault = !injector.since(mark).is_empty();
        match result {
            Err(ProvisionerError::NotFound(_)) if earlier_fault => Ok(()),
            other => other,
        }
    }

    async fn truth(&self) -> Option<Vec<TruthNode>> {
        let fake = self.fake.as_ref()?;
        match fake.nodes().await {
            Ok(nodes) => Some(nodes),
            Err(e) => {
                tracing::warn!("reading the fake's nodes: {e:#}");
                None
            }
        }
    }

    /// Live nodes of this owner for `request_id`, by the fake's record.
    fn made_for<'a>(&self, truth: &'a [TruthNode], request_id: &str) -> Vec<&'a TruthNode> {
        truth
            .iter()
            .filter(|n| {
                n.alive
                    && n.labels.get(OWNER_LABEL).map(String::as_str) == Some(self.owner.as_str())
                    && n.labels.get(REQUEST_LABEL).map(String::as_str) == Some(request_id)
            })
            .collect()
    }

    async fn steps(&mut self) {
        self.identity();
        let hints = self.prices();
        self.step_offerings(&hints).await;
        let planted = self.plant().await;

        let small = NodeShape::new(1.0, GIB);
        let a = self.step_first_node(&small).await;
        self.step_get(a.as_ref()).await;
        self.step_boot(&small).await;
        let zone = a.as_ref().and_then(|a| a.zone.clone());
        self.step_second_node(&small, zone).await;
        self.step_zone(&small, a.as_ref()).await;
        for i in 1..=4 {
            let id = format!("conformance-retry-{i}");
            if let Err(e) = self.provision(&id, &small).await {
                self.checks
                    .fail("provision.handle", format!("provision {id} failed: {e}"));
            }
        }
        self.check_single_nodes().await;
        self.step_foreign(&planted).await;
        if let Some(a) = &a {
            self.step_terminate(a).await;
        }
        self.step_unsatisfiable().await;
        self.cleanup().await;
        // With every node gone, so that its describes read few pages
        // under faults; it checks its own nodes are gone.
        self.injector.pause(false);
        self.step_awkward_ids(&small).await;
        self.injector.pause(true);
        // Last: with the fake, more nodes are planted than in a replay of
        // the same run, and a `get` answered from `describe` repeats its
        // request; anywhere earlier that would shift the cassette.
        self.step_get_foreign(&planted).await;
        // Contract 0.3's rules, on nodes of their own; after everything
        // else, since without a fake (a replay) the networking ones do
        // not run.
        self.step_contract_03().await;
    }

    fn identity(&mut self) {
        let (a, b) = (self.plugin.info(), self.foreign.info());
        let rule = "identity.stable";
        self.checks.check(
            rule,
            if a.backend_name.is_empty() {
                Err("the plugin's name() is empty".into())
            } else if a.backend_name != b.backend_name {
                Err(format!(
                    "name() said {:?}, then {:?} in another instance",
                    a.backend_name, b.backend_name
                ))
            } else {
                Ok(())
            },
        );
        self.checks.check(
            rule,
            if self.plugin.capacity_types().is_empty() {
                Err("capacity_types() is empty".into())
            } else if self.plugin.capacity_types() != self.foreign.capacity_types() {
                Err(format!(
                    "capacity_types() said {:?}, then {:?} in another instance",
                    self.plugin.capacity_types(),
                    self.foreign.capacity_types()
                ))
            } else {
                Ok(())
            },
        );
    }

    fn price(&mut self, shape: &NodeShape, label: &str) -> Option<wasmprov_api::PriceHint> {
        self.calls += 1;
        match self.plugin.try_price_hint(shape) {
            Ok(None) => None,
            Ok(Some(hint)) => {
                let outcome = if !(hint.hourly_usd.is_finite() && hint.hourly_usd > 0.0) {
                    Err(format!(
                        "{label}: hourly price {} is not a positive number",
                        hint.hourly_usd
                    ))
                } else if hint.instance_type.trim().is_empty() {
                    Err(format!("{label}: the hint names no instance type"))
                } else if hint.capacity_type != shape.capacity_type {
                    Err(format!(
                        "{label}: asked for {}, priced as {}",
                        shape.capacity_type, hint.capacity_type
                    ))
                } else {
                    Ok(())
                };
                self.checks.check("price.valid", outcome);
                Some(hint)
            }
            Err(e) => {
                if matches!(e, ProvisionerError::Plugin { .. }) {
                    self.checks
                        .fail("errors.no-fault", format!("price hint for {label}: {e}"));
                }
                None
            }
        }
    }

    /// Prices a few shapes; the hints given, for `offerings.agree`.
    fn prices(&mut self) -> Vec<PriceHint> {
        let shapes = [
            ("1 vCPU, 1 GiB", NodeShape::new(1.0, GIB)),
            ("4 vCPU, 16 GiB", NodeShape::new(4.0, 16 * GIB)),
            ("16 vCPU, 64 GiB", NodeShape::new(16.0, 64 * GIB)),
        ];
        let mut hints = Vec::new();
        let mut priced: Vec<(String, f64)> = Vec::new();
        for (label, shape) in &shapes {
            if let Some(hint) = self.price(shape, label) {
                priced.push(((*label).to_string(), hint.hourly_usd));
                hints.push(hint);
            }
        }
        for pair in priced.windows(2) {
            let ((small, p), (large, q)) = (&pair[0], &pair[1]);
            self.checks.check(
                "price.monotonic",
                if q + 1e-9 < *p {
                    Err(format!(
                        "{large} costs {q} $/h, less than {small} at {p} $/h"
                    ))
                } else {
                    Ok(())
                },
            );
        }
        if let Some(hint) = self.price(&shapes[0].1, "1 vCPU, 1 GiB") {
            let shape = NodeShape {
                instance_type: Some(hint.instance_type.clone()),
                ..NodeShape::new(1.0, GIB)
            };
            let label = format!("instance type {}", hint.instance_type);
            let again = self.price(&shape, &label);
            self.checks.check(
                "price.explicit-type",
                match again {
                    Some(h) if h.instance_type == hint.instance_type => Ok(()),
                    Some(h) => Err(format!(
                        "asked for instance type {}, priced {}",
                        hint.instance_type, h.instance_type
                    )),
                    None => Err(format!(
                        "no price for instance type {}, which it had just named",
                        hint.instance_type
                    )),
                },
            );
        }
        if self.plugin.capacity_types().contains(&CapacityType::Spot) {
            let shape = NodeShape {
                capacity_type: CapacityType::Spot,
                ..NodeShape::new(1.0, GIB)
            };
            self.price(&shape, "1 vCPU, 1 GiB, spot");
        }
        self.calls += 1;
        let huge = NodeShape::new(4096.0, 64 * 1024 * GIB);
        let outcome = match self.plugin.try_price_hint(&huge) {
            Ok(None)
            | Err(ProvisionerError::Unsupported(_) | ProvisionerError::Capacity { .. }) => Ok(()),
            Ok(Some(h)) => Err(format!(
                "4096 vCPU, 64 TiB priced as {} at {} $/h",
                h.instance_type, h.hourly_usd
            )),
            Err(e) => Err(format!("4096 vCPU, 64 TiB: {} ({e})", e.kind())),
        };
        self.checks.check("price.unsatisfiable", outcome);
        hints
    }

    /// `offerings.agree` and `shape.binds`.
    async fn step_offerings(&mut self, hints: &[PriceHint]) {
        let plugin = self.plugin.clone();
        let offerings = match self
            .call("offerings", || {
                let plugin = plugin.clone();
                async move { plugin.offerings().await }
            })
            .await
        {
            Ok(list) => Some(list),
            Err(ProvisionerError::Unsupported(m)) => {
                self.checks.skip(
                    "offerings.agree",
                    format!("the plugin lists no offerings: {m}"),
                );
                None
            }
            Err(e) => {
                self.checks
                    .fail("offerings.agree", format!("offerings failed: {e}"));
                None
            }
        };
        if let Some(list) = &offerings {
            self.check_offerings(list, hints);
            self.offerings.clone_from(list);
        }
        self.check_binding(offerings.as_deref());
    }

    fn check_offerings(&mut self, list: &[Offering], hints: &[PriceHint]) {
        let rule = "offerings.agree";
        for (i, o) in list.iter().enumerate() {
            if list[..i].iter().any(|p| p.instance_type == o.instance_type) {
                self.checks.fail(
                    rule,
                    format!("offering {} is listed twice", o.instance_type),
                );
            }
        }
        // Every type a hint names must be offered. Only on-demand prices are
        // compared: a spot hint is an estimate made without I/O, while an
        // offering may carry the spot price the cloud publishes now, which
        // moves by the hour, so the two need not be equal.
        for hint in hints {
            let outcome = match list.iter().find(|o| o.instance_type == hint.instance_type) {
                None => Err(format!(
                    "price-hint named {}, which is not among the {} offerings",
                    hint.instance_type,
                    list.len()
                )),
                Some(o) => match (hint.capacity_type, o.on_demand_usd) {
                    (CapacityType::OnDemand, Some(p))
                        if (p - hint.hourly_usd).abs() > 1e-9 * p.abs().max(1.0) =>
                    {
                        Err(format!(
                            "{} is offered at {p} $/h on-demand but price-hint said {} $/h",
                            hint.instance_type, hint.hourly_usd
                        ))
                    }
                    _ => Ok(()),
                },
            };
            self.checks.check(rule, outcome);
        }
    }

    /// Architecture, GPU model and disk bind: priced only as a type that
    /// has them (as its offering says), or refused.
    fn check_binding(&mut self, offerings: Option<&[Offering]>) {
        let rule = "shape.binds";
        let offering = |t: &str| offerings.and_then(|l| l.iter().find(|o| o.instance_type == t));
        for arch in [Arch::X86_64, Arch::Arm64] {
            let shape = NodeShape {
                arch: Some(arch),
                ..NodeShape::new(1.0, GIB)
            };
            self.calls += 1;
            let outcome = match self.plugin.try_price_hint(&shape) {
                Ok(Some(h)) => match offering(&h.instance_type).map(|o| o.arch) {
                    Some(Some(a)) if a != arch => Err(format!(
                        "asked for {arch}, priced {} which is {a}",
                        h.instance_type
                    )),
                    Some(None) => Err(format!(
                        "asked for {arch}, priced {} whose offering names no architecture",
                        h.instance_type
                    )),
                    _ => Ok(()),
                },
                Ok(None)
                | Err(ProvisionerError::Unsupported(_) | ProvisionerError::Capacity { .. }) => {
                    Ok(())
                }
                Err(e) => Err(format!("a shape asking for {arch}: {} ({e})", e.kind())),
            };
            self.checks.check(rule, outcome);
        }
        let impossible = [
            (
                "GPU model conformance-no-such-gpu",
                NodeShape {
                    gpu: 1,
                    gpu_model: Some("conformance-no-such-gpu".into()),
                    ..NodeShape::new(1.0, GIB)
                },
            ),
            (
                "a 1 PiB disk",
                NodeShape {
                    disk_bytes: Some(1 << 50),
                    ..NodeShape::new(1.0, GIB)
                },
            ),
        ];
        for (what, shape) in impossible {
            self.calls += 1;
            let outcome = match self.plugin.try_price_hint(&shape) {
                Ok(None)
                | Err(ProvisionerError::Unsupported(_) | ProvisionerError::Capacity { .. }) => {
                    Ok(())
                }
                Ok(Some(h)) => Err(format!(
                    "a shape asking for {what} was priced as {} at {} $/h",
                    h.instance_type, h.hourly_usd
                )),
                Err(e) => Err(format!("a shape asking for {what}: {} ({e})", e.kind())),
            };
            self.checks.check(rule, outcome);
        }
    }

    /// `get.agrees`: the node just made is the one `get` returns.
    async fn step_get(&mut self, a: Option<&NodeHandle>) {
        let rule = "get.agrees";
        let plugin = self.plugin.clone();
        if let Some(a) = a {
            let id = a.provider_id.clone();
            let before = self.record(&id).await;
            let got = self
                .call(&format!("get {id}"), || {
                    let plugin = plugin.clone();
                    let id = id.clone();
                    async move { plugin.get(&id).await }
                })
                .await;
            let after = self.record(&id).await;
            if let Ok(Some(n)) = &got {
                self.check_against_record(&format!("get {id}"), n, after.as_ref());
                self.check_state(n, before.as_ref(), after.as_ref());
            }
            let outcome = match got {
                Ok(Some(n))
                    if n.provider_id == a.provider_id
                        && n.instance_type == a.instance_type
                        && n.labels.get(OWNER_LABEL) == Some(&self.owner) =>
                {
                    Ok(())
                }
                Ok(Some(n)) => Err(format!(
                    "get {id} returned {} ({:?}, owner {:?}); provision said {} ({:?})",
                    n.provider_id,
                    n.instance_type,
                    n.labels.get(OWNER_LABEL),
                    a.provider_id,
                    a.instance_type
                )),
                Ok(None) => Err(format!("get {id} found nothing; the node was just made")),
                Err(e) => Err(format!("get {id}: {} ({e})", e.kind())),
            };
            self.checks.check(rule, outcome);
        }
    }

    /// `get.agrees`: another owner's node, or one without an owner tag, is none.
    async fn step_get_foreign(&mut self, planted: &[(String, String)]) {
        let rule = "get.agrees";
        let plugin = self.plugin.clone();
        for (id, how) in planted {
            let id = id.clone();
            let got = self
                .call(&format!("get {id}"), || {
                    let plugin = plugin.clone();
                    let id = id.clone();
                    async move { plugin.get(&id).await }
                })
                .await;
            self.checks.check(
                rule,
                match got {
                    Ok(None) | Err(ProvisionerError::NotFound(_)) => Ok(()),
                    Ok(Some(_)) => Err(format!("get {id} ({how}) returned the node")),
                    Err(e) => Err(format!("get {id} ({how}): {} ({e})", e.kind())),
                },
            );
        }
    }

    /// `boot.honoured`, `boot.user-data`, `boot.image`, `boot.ssh-keys`:
    /// each field of boot data, asked alone, is refused as unsupported or
    /// reaches the cloud as asked (where the fake records it).
    async fn step_boot(&mut self, shape: &NodeShape) {
        let data = b"#cloud-config\nruncmd: [\"echo conformance-boot\"]\n".to_vec();
        let want = data.clone();
        let boot = BootData {
            user_data: Some(data),
            ..BootData::default()
        };
        self.boot_case(
            "conformance-boot",
            "boot.user-data",
            shape,
            boot,
            move |r| {
                let got = r.user_data.as_ref()?;
                Some(if *got == want {
                    Ok(())
                } else if got.is_empty() {
                    Err(format!(
                        "the node reached the cloud without the {} bytes of user data asked for",
                        want.len()
                    ))
                } else {
                    Err(format!(
                        "the node was created with {} bytes of user data, not the {} asked for",
                        got.len(),
                        want.len()
                    ))
                })
            },
        )
        .await;
        match self.fake.as_ref().and_then(|f| f.boot_image()) {
            None => self.checks.skip(
                "boot.image",
                "the fake names no image of its cloud to ask for (FakeCloud::boot_image, `boot_image` in the fake-control protocol's info)",
            ),
            Some(image) => {
                let boot = BootData {
                    image: Some(image.clone()),
                    ..BootData::default()
                };
                self.boot_case("conformance-boot-image", "boot.image", shape, boot, move |r| {
                    let got = r.image.as_ref()?;
                    Some(if *got == image {
                        Ok(())
                    } else {
                        Err(format!(
                            "asked for image {image:?}; the cloud was asked for {got:?}"
                        ))
                    })
                })
                .await;
            }
        }
        let boot = BootData {
            ssh_keys: vec![SSH_KEY.to_string()],
            ..BootData::default()
        };
        self.boot_case("conformance-boot-ssh", "boot.ssh-keys", shape, boot, |r| {
            let got = r.ssh_keys.as_ref()?;
            // A cloud may keep a key without its comment.
            let key_of = |k: &str| k.split(' ').take(2).collect::<Vec<_>>().join(" ");
            Some(if got.iter().any(|k| key_of(k) == key_of(SSH_KEY)) {
                Ok(())
            } else {
                Err(format!(
                    "asked to authorize SSH key {}; the cloud got {}",
                    key_of(SSH_KEY),
                    if got.is_empty() {
                        "no key".to_string()
                    } else {
                        got.join(", ")
                    }
                ))
            })
        })
        .await;
    }

    /// Provisions `request` with `boot`: a refusal as unsupported passes
    /// `rule`; a node made is checked with `check` against what the fake
    /// recorded (`None` from `check`: the fake cannot tell, `rule` skipped).
    async fn boot_case(
        &mut self,
        request: &str,
        rule: &str,
        shape: &NodeShape,
        boot: BootData,
        check: impl Fn(&NodeRecord) -> Option<Result<(), String>>,
    ) {
        let asked = boot.given().join(", ");
        match self.provision_booting(request, shape, boot).await {
            Err(ProvisionerError::Unsupported(_)) => {
                self.checks.pass("boot.honoured");
                self.checks.pass(rule);
            }
            Err(e) => {
                let seen = format!("provision with {asked}: {} ({e})", e.kind());
                self.checks.fail("boot.honoured", seen.clone());
                self.checks.fail(rule, seen);
            }
            Ok(node) => {
                self.checks.pass("boot.honoured");
                let mut record = self.record(&node.provider_id).await;
                if record.is_none() {
                    // Fakes that keep only user data say it in the truth.
                    let truth = self.truth().await.unwrap_or_default();
                    record = truth
                        .into_iter()
                        .find(|n| n.id == node.provider_id)
                        .and_then(|n| n.user_data)
                        .map(|d| NodeRecord {
                            user_data: Some(d),
                            ..NodeRecord::default()
                        });
                }
                match record.as_ref().and_then(&check) {
                    Some(outcome) => self.checks.check(
                        rule,
                        outcome.map_err(|m| {
                            format!("provision {request} → {}: {m}", node.provider_id)
                        }),
                    ),
                    None => self.checks.skip(
                        rule,
                        format!("the fake does not record the {asked} a node was created with"),
                    ),
                }
                if request != "conformance-boot" {
                    self.discard(&node.provider_id).await;
                }
            }
        }
    }

    /// Terminates a node this owner no longer needs, so that describes
    /// stay short; one left behind is a leak (`leak.none`).
    async fn discard(&mut self, id: &str) {
        match self.terminate(id).await {
            Ok(()) | Err(ProvisionerError::NotFound(_)) => {
                // Counted by no later rule: it is gone on purpose.
                let requests: Vec<String> = self
                    .made
                    .iter()
                    .filter(|(_, made)| *made == id)
                    .map(|(request, _)| request.clone())
                    .collect();
                for request in requests {
                    self.made.remove(&request);
                    self.requests.retain(|r| *r != request);
                }
            }
            Err(e) => tracing::warn!("terminate {id}: {e}"),
        }
    }

    /// What the fake recorded of node `id`, if it records anything.
    async fn record(&self, id: &str) -> Option<NodeRecord> {
        match self.fake.as_ref()?.record(id).await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("reading the fake's record of {id}: {e:#}");
                None
            }
        }
    }

    /// A handle of a node this run made against what the fake recorded
    /// and holds: `handle.truth`, `handle.created-at`, and the node's
    /// labels in the cloud (`provision.tags`).
    async fn check_recorded(&mut self, what: &str, shape: &NodeShape, h: &NodeHandle) {
        let record = self.record(&h.provider_id).await;
        self.check_against_record(what, h, record.as_ref());
        let Some(truth) = self.truth().await else {
            return;
        };
        let Some(node) = truth.iter().find(|n| n.id == h.provider_id) else {
            return;
        };
        let mut missing = Vec::new();
        for (k, v) in h
            .labels
            .iter()
            .filter(|(k, _)| *k == OWNER_LABEL || *k == REQUEST_LABEL)
            .chain(&shape.labels)
        {
            if node.labels.get(k) != Some(v) {
                missing.push(format!("{k}={v} (the cloud has {:?})", node.labels.get(k)));
            }
        }
        self.checks.check(
            "provision.tags",
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "{what} → {}: the node in the cloud lacks {}",
                    h.provider_id,
                    missing.join(", ")
                ))
            },
        );
    }

    /// `handle.truth` and `handle.created-at` for one handle.
    fn check_against_record(&mut self, what: &str, h: &NodeHandle, record: Option<&NodeRecord>) {
        let id = &h.provider_id;
        let Some(r) = record else {
            self.checks.skip(
                "handle.truth",
                "the fake records no fields of its nodes (FakeCloud::record, `record` in the fake-control protocol's node list)",
            );
            self.check_created_plausible(what, h);
            return;
        };
        let fields = [
            ("zone", &h.zone, &r.zone),
            ("instance type", &h.instance_type, &r.instance_type),
            ("private address", &h.private_address, &r.private_address),
            ("public address", &h.public_address, &r.public_address),
        ];
        let mut problems = Vec::new();
        let mut known = 0;
        for (name, got, want) in fields {
            let Some(want) = want else { continue };
            known += 1;
            match got {
                Some(g) if g == want => {}
                Some(g) => problems.push(format!("its {name} is {g}, the cloud says {want}")),
                None => problems.push(format!("it has no {name}, the cloud says {want}")),
            }
        }
        for (rule, name, got, want) in [
            (
                "handle.ipv6",
                "IPv6 address",
                &h.ipv6_address,
                &r.ipv6_address,
            ),
            ("handle.hostname", "hostname", &h.hostname, &r.hostname),
        ] {
            match (got, want) {
                (_, None) => self.checks.skip(
                    rule,
                    format!("the fake does not record a node's {name} (NodeRecord)"),
                ),
                (Some(g), Some(w)) if g == w => self.checks.pass(rule),
                (Some(g), Some(w)) => self.checks.fail(
                    rule,
                    format!("{what} → {id}: its {name} is {g}, the cloud says {w}"),
                ),
                (None, Some(w)) => self.checks.fail(
                    rule,
                    format!("{what} → {id} has no {name}, the cloud says {w}"),
                ),
            }
        }
        if known == 0 {
            self.checks.skip(
                "handle.truth",
                "the fake records no zone, instance type or address of its nodes",
            );
        } else {
            self.checks.check(
                "handle.truth",
                if problems.is_empty() {
                    Ok(())
                } else {
                    Err(format!("{what} → {id}: {}", problems.join("; ")))
                },
            );
        }
        match (r.created_at_ms, h.created_at_ms) {
            (Some(want), Some(got)) => self.checks.check(
                "handle.created-at",
                if got.abs_diff(want) <= CREATED_SLACK_MS {
                    Ok(())
                } else {
                    Err(format!(
                        "{what} → {id}: created_at is {got} ms since the epoch, the cloud created it at {want} ({} s apart)",
                        got.abs_diff(want) / 1000
                    ))
                },
            ),
            (Some(want), None) => self.checks.fail(
                "handle.created-at",
                format!(
                    "{what} → {id} has no created_at; the cloud created it at {want} ms since the epoch"
                ),
            ),
            (None, _) => self.check_created_plausible(what, h),
        }
    }

    /// Without the fake's creation time: a node this run made was created
    /// during the run (give or take a day of clock skew), when it says.
    fn check_created_plausible(&mut self, what: &str, h: &NodeHandle) {
        const DAY_MS: u64 = 86_400_000;
        match h.created_at_ms {
            None => self.checks.skip(
                "handle.created-at",
                "neither the handles nor the fake say when a node was created",
            ),
            Some(got) => self.checks.check(
                "handle.created-at",
                if got + DAY_MS >= self.started_ms && got <= now_ms() + DAY_MS {
                    Ok(())
                } else {
                    Err(format!(
                        "{what} → {}: created_at is {got} ms since the epoch, not during this run ({} ms)",
                        h.provider_id, self.started_ms
                    ))
                },
            ),
        }
    }

    /// `handle.truth` for the state: `get`'s raw state is the one the
    /// cloud had just before or just after it (a state may move on).
    fn check_state(
        &mut self,
        h: &NodeHandle,
        before: Option<&NodeRecord>,
        after: Option<&NodeRecord>,
    ) {
        let known: Vec<&String> = [before, after]
            .into_iter()
            .flatten()
            .filter_map(|r| r.state.as_ref())
            .collect();
        if known.is_empty() {
            return;
        }
        self.checks.check(
            "handle.truth",
            match &h.raw_state {
                Some(s) if known.contains(&s) => Ok(()),
                other => Err(format!(
                    "get {} says raw state {other:?}; the cloud had {}",
                    h.provider_id,
                    known
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", then ")
                )),
            },
        );
    }

    /// `describe.pages`: every node of this owner planted across pages is
    /// listed.
    fn check_pages(&mut self, nodes: &[NodeHandle]) {
        if self.paged.is_empty() {
            return;
        }
        let missing: Vec<&String> = self
            .paged
            .iter()
            .filter(|id| !nodes.iter().any(|n| n.provider_id == **id))
            .collect();
        let page = self.fake.as_ref().and_then(|f| f.page_size()).unwrap_or(0);
        self.checks.check(
            "describe.pages",
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "describe listed {} of the {} nodes of this owner planted over more than one page (the cloud's pages hold {page}); missing {}{}: does the plugin follow the cloud's next page?",
                    self.paged.len() - missing.len(),
                    self.paged.len(),
                    missing
                        .iter()
                        .take(5)
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                    if missing.len() > 5 { ", ..." } else { "" }
                ))
            },
        );
    }

    /// `shape.zone`: a shape naming a zone other than the default one (one
    /// the offerings list for the type) makes the node there.
    async fn step_zone(&mut self, base: &NodeShape, a: Option<&NodeHandle>) {
        let rule = "shape.zone";
        let Some(a) = a else {
            self.checks
                .skip(rule, "no node was provisioned to find another zone from");
            return;
        };
        let other = self
            .offerings
            .iter()
            .filter(|o| Some(&o.instance_type) == a.instance_type.as_ref())
            .flat_map(|o| o.zones.iter())
            .find(|z| Some(*z) != a.zone.as_ref())
            .cloned();
        let Some(zone) = other else {
            self.checks.skip(
                rule,
                format!(
                    "the offerings name no zone of {:?} other than {:?}",
                    a.instance_type, a.zone
                ),
            );
            return;
        };
        let request = "conformance-zone";
        let shape = NodeShape {
            zone: Some(zone.clone()),
            ..base.clone()
        };
        match self.provision(request, &shape).await {
            Ok(h) => {
                self.check_handle(request, &shape, &h);
                self.checks.check(
                    rule,
                    match &h.zone {
                        Some(z) if *z == zone => Ok(()),
                        other => Err(format!(
                            "provision {request} asked for zone {zone}; the handle says {other:?}"
                        )),
                    },
                );
                if let Some(z) = self.record(&h.provider_id).await.and_then(|r| r.zone) {
                    self.checks.check(
                        rule,
                        if z == zone {
                            Ok(())
                        } else {
                            Err(format!(
                                "provision {request} asked for zone {zone}; the cloud made {} in {z}",
                                h.provider_id
                            ))
                        },
                    );
                }
                self.check_recorded(&format!("provision {request}"), &shape, &h)
                    .await;
                self.discard(&h.provider_id).await;
            }
            Err(e) => self.checks.fail(
                rule,
                format!(
                    "provision {request} in zone {zone} (offered for {:?}) failed: {} ({e})",
                    a.instance_type,
                    e.kind()
                ),
            ),
        }
    }

    /// `ids.awkward`: valid ids that are easy to get wrong round-trip:
    /// labels in the cloud, handle, idempotent retry, describe, get,
    /// terminate.
    async fn step_awkward_ids(&mut self, shape: &NodeShape) {
        let rule = "ids.awkward";
        for request in awkward_ids() {
            let h = match self.provision(&request, shape).await {
                Ok(h) => h,
                Err(e) => {
                    self.checks.fail(
                        rule,
                        format!(
                            "provision {request} (a valid request id) failed: {} ({e})",
                            e.kind()
                        ),
                    );
                    continue;
                }
            };
            let id = h.provider_id.clone();
            let mut problems = Vec::new();
            if h.labels.get(REQUEST_LABEL) != Some(&request) {
                problems.push(format!(
                    "the handle's {REQUEST_LABEL} is {:?}",
                    h.labels.get(REQUEST_LABEL)
                ));
            }
            if let Some(truth) = self.truth().await {
                let made: Vec<&str> = self
                    .made_for(&truth, &request)
                    .iter()
                    .map(|n| n.id.as_str())
                    .collect();
                if made != [id.as_str()] {
                    problems.push(format!(
                        "the cloud holds {made:?} labelled {REQUEST_LABEL}={request}, not [{id}]"
                    ));
                }
            }
            match self.provision(&request, shape).await {
                Ok(again) if again.provider_id == id => {}
                Ok(again) => problems.push(format!(
                    "provisioning it again returned {}",
                    again.provider_id
                )),
                Err(e) => problems.push(format!("provisioning it again failed: {e}")),
            }
            match self.describe().await {
                Ok(nodes) => match nodes.iter().find(|n| n.provider_id == id) {
                    Some(n) if n.labels.get(REQUEST_LABEL) == Some(&request) => {}
                    Some(n) => problems.push(format!(
                        "describe lists it with {REQUEST_LABEL} {:?}",
                        n.labels.get(REQUEST_LABEL)
                    )),
                    None => problems.push("describe does not list it".into()),
                },
                Err(e) => problems.push(format!("describe failed: {e}")),
            }
            let plugin = self.plugin.clone();
            let got = self
                .call(&format!("get {id}"), || {
                    let plugin = plugin.clone();
                    let id = id.clone();
                    async move { plugin.get(&id).await }
                })
                .await;
            match got {
                Ok(Some(n)) if n.labels.get(REQUEST_LABEL) == Some(&request) => {}
                Ok(Some(n)) => problems.push(format!(
                    "get returns it with {REQUEST_LABEL} {:?}",
                    n.labels.get(REQUEST_LABEL)
                )),
                Ok(None) => problems.push("get finds nothing".into()),
                Err(e) => problems.push(format!("get failed: {e}")),
            }
            match self.terminate(&id).await {
                Ok(()) => {
                    if let Some(truth) = self.truth().await
                        && truth.iter().any(|n| n.id == id && n.alive)
                    {
                        problems.push("terminate succeeded, but it is still in the cloud".into());
                    }
                }
                Err(e) => problems.push(format!("terminate failed: {e}")),
            }
            self.checks.check(
                rule,
                if problems.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "request id {request:?} → {id}: {}",
                        problems.join("; ")
                    ))
                },
            );
        }
    }

    /// Plants nodes the plugin must not see: returns (id, how it was made).
    async fn plant(&mut self) -> Vec<(String, String)> {
        let mut planted = Vec::new();
        let foreign = self.foreign.clone();
        let req = ProvisionRequest {
            request_id: "conformance-foreign".into(),
            shape: NodeShape::new(1.0, GIB),
            boot: Default::default(),
            subnet: None,
        };
        // The foreign owner's node goes through the plugin, so this works
        // against cassettes and live clouds too.
        self.calls += 1;
        let mut made = None;
        for _ in 0..MAX_ATTEMPTS {
            match foreign.provision_request(&req).await {
                Ok(h) => {
                    made = Some(h);
                    break;
                }
                Err(e) if e.is_retryable() => {}
                Err(e) => {
                    tracing::warn!("planting a node of another owner: {e}");
                    break;
                }
            }
        }
        if let Some(h) = made {
            planted.push((
                h.provider_id,
                format!(
                    "provisioned by this plugin for owner {:?}",
                    self.foreign_owner
                ),
            ));
        }
        if let Some(fake) = &self.fake {
            let sets = [
                (
                    BTreeMap::from([
                        (OWNER_LABEL.to_string(), "someone-else".to_string()),
                        (REQUEST_LABEL.to_string(), "conformance-a".to_string()),
                    ]),
                    "planted in the cloud for owner \"someone-else\" with this run's request id",
                ),
                (
                    BTreeMap::from([("team".to_string(), "databases".to_string())]),
                    "planted in the cloud without an owner tag",
                ),
            ];
            for (labels, how) in sets {
                match fake.plant(labels).await {
                    Ok(Some(id)) => planted.push((id, how.to_string())),
                    Ok(None) => {}
                    Err(e) => tracing::warn!("planting a node in the fake: {e:#}"),
                }
            }
            self.plant_pages(fake.clone()).await;
        } else {
            self.checks
                .skip("describe.pages", "no fake cloud to plant nodes in");
        }
        planted
    }

    /// For `describe.pages`: one more than a page of this owner's nodes,
    /// and as many of another owner's, planted in the fake.
    async fn plant_pages(&mut self, fake: Arc<dyn FakeCloud>) {
        let rule = "describe.pages";
        let Some(page) = fake.page_size() else {
            self.checks.skip(
                rule,
                "the fake does not say how many nodes a page of its list holds (FakeCloud::page_size, `page_size` in the fake-control protocol's info)",
            );
            return;
        };
        if page >= MAX_PAGE_PLANT {
            self.checks.skip(
                rule,
                format!(
                    "the fake's pages hold {page} nodes; the suite plants at most {MAX_PAGE_PLANT}"
                ),
            );
            return;
        }
        for i in 0..=page {
            let request = format!("conformance-page-{i}");
            for owner in [self.owner.clone(), "someone-else".to_string()] {
                let labels = BTreeMap::from([
                    (OWNER_LABEL.to_string(), owner.clone()),
                    (REQUEST_LABEL.to_string(), request.clone()),
                ]);
                match fake.plant(labels).await {
                    Ok(Some(id)) if owner == self.owner => self.paged.push(id),
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        self.checks.skip(rule, "the fake cannot plant nodes");
                        return;
                    }
                    Err(e) => {
                        self.checks
                            .fail(rule, format!("planting a node in the fake: {e:#}"));
                        return;
                    }
                }
            }
        }
    }

    async fn step_first_node(&mut self, shape: &NodeShape) -> Option<NodeHandle> {
        let request = "conformance-a";
        let a = match self.provision(request, shape).await {
            Ok(a) => a,
            Err(e) => {
                self.checks.fail(
                    "provision.handle",
                    format!("provision {request} failed: {} ({e})", e.kind()),
                );
                return None;
            }
        };
        self.check_handle(request, shape, &a);
        self.check_recorded(&format!("provision {request}"), shape, &a)
            .await;
        match self.describe().await {
            Ok(nodes) => {
                self.check_pages(&nodes);
                // Gone again, so that later describes read as many pages as
                // the plugin's own nodes fill.
                for id in std::mem::take(&mut self.paged) {
                    self.discard(&id).await;
                }
                let found = nodes.iter().find(|n| n.provider_id == a.provider_id);
                if let Some(n) = found {
                    let record = self.record(&n.provider_id).await;
                    self.check_against_record("describe", n, record.as_ref());
                }
                self.checks.check(
                    "describe.lists-own",
                    match found {
                        None => Err(format!(
                            "describe does not list {} (provisioned for {request}); it listed {:?}",
                            a.provider_id,
                            nodes.iter().map(|n| &n.provider_id).collect::<Vec<_>>()
                        )),
                        Some(n) if n.labels.get(OWNER_LABEL) != Some(&self.owner) => Err(format!(
                            "describe lists {} with owner tag {:?}, not {:?}",
                            n.provider_id,
                            n.labels.get(OWNER_LABEL),
                            self.owner
                        )),
                        Some(_) => Ok(()),
                    },
                );
            }
            Err(e) => self
                .checks
                .fail("describe.lists-own", format!("describe failed: {e}")),
        }
        match self.provision(request, shape).await {
            Ok(again) => self.checks.check(
                "provision.idempotent",
                if again.provider_id == a.provider_id {
                    Ok(())
                } else {
                    Err(format!(
                        "provision {request} returned {}, then {} for the same request id",
                        a.provider_id, again.provider_id
                    ))
                },
            ),
            Err(e) => self.checks.fail(
                "provision.idempotent",
                format!("provision {request} again failed: {e}"),
            ),
        }
        Some(a)
    }

    fn check_handle(&mut self, request: &str, shape: &NodeShape, h: &NodeHandle) {
        self.checks.check(
            "status.live",
            match h.status {
                NodeStatus::Pending | NodeStatus::Running | NodeStatus::Unknown => Ok(()),
                other => Err(format!(
                    "provision {request} → {} is {other} ({})",
                    h.provider_id,
                    h.raw_state.as_deref().unwrap_or("no raw state")
                )),
            },
        );
        let mut problems = Vec::new();
        if h.provider_id.trim().is_empty() {
            problems.push("the node id is empty".to_string());
        }
        if h.join_state == JoinState::Failed {
            problems.push("the node is in state failed".to_string());
        }
        match (&h.zone, &shape.zone) {
            (None, _) => problems.push("the handle has no zone".to_string()),
            (Some(z), _) if z.trim().is_empty() => {
                problems.push("the handle's zone is empty".to_string());
            }
            (Some(z), Some(want)) if z != want => {
                problems.push(format!("asked for zone {want}, got {z}"));
            }
            _ => {}
        }
        if h.capacity_type != shape.capacity_type {
            problems.push(format!(
                "asked for {}, got {}",
                shape.capacity_type, h.capacity_type
            ));
        }
        self.checks.check(
            "provision.handle",
            if problems.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "provision {request} → {}: {}",
                    h.provider_id,
                    problems.join("; ")
                ))
            },
        );
        let mut missing = Vec::new();
        if h.labels.get(OWNER_LABEL) != Some(&self.owner) {
            missing.push(format!(
                "{OWNER_LABEL}={} (has {:?})",
                self.owner,
                h.labels.get(OWNER_LABEL)
            ));
        }
        if h.labels.get(REQUEST_LABEL).map(String::as_str) != Some(request) {
            missing.push(format!(
                "{REQUEST_LABEL}={request} (has {:?})",
                h.labels.get(REQUEST_LABEL)
            ));
        }
        for (k, v) in &shape.labels {
            if h.labels.get(k) != Some(v) {
                missing.push(format!("the shape's label {k}={v}"));
            }
        }
        self.checks.check(
            "provision.tags",
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!(
                    "provision {request} → {} lacks {}",
                    h.provider_id,
                    missing.join(", ")
                ))
            },
        );
    }

    async fn step_second_node(&mut self, base: &NodeShape, zone: Option<String>) {
        let request = "conformance-b";
        let shape = NodeShape {
            zone,
            labels: BTreeMap::from([("conformance-role".to_string(), "second".to_string())]),
            capacity_type: self
                .plugin
                .capacity_types()
                .last()
                .copied()
                .unwrap_or_default(),
            ..base.clone()
        };
        match self.provision(request, &shape).await {
            Ok(b) => {
                self.check_handle(request, &shape, &b);
                self.check_recorded(&format!("provision {request}"), &shape, &b)
                    .await;
            }
            Err(e) => self.checks.fail(
                "provision.handle",
                format!(
                    "provision {request} ({} in zone {:?}) failed: {e}",
                    shape.capacity_type, shape.zone
                ),
            ),
        }
    }

    async fn check_single_nodes(&mut self) {
        let Some(truth) = self.truth().await else {
            self.checks
                .skip("provision.single-node", "no fake cloud to count nodes in");
            return;
        };
        for request in self.requests.clone() {
            let made = self.made_for(&truth, &request);
            self.seen_in_truth |= !made.is_empty();
            let returned = self.made.get(&request);
            self.checks.check(
                "provision.single-node",
                if let (Some(id), true) = (returned, made.is_empty()) {
                    // Nothing to count is not a pass: the plugin may talk
                    // to another cloud than this fake, or not tag its nodes.
                    Err(format!(
                        "provision {request} returned node {id}, but the fake's ground truth has no live node labelled {OWNER_LABEL}={} {REQUEST_LABEL}={request}: is the fake the cloud this plugin talks to, and does the plugin label its nodes?",
                        self.owner
                    ))
                } else if made.len() <= 1 {
                    Ok(())
                } else {
                    Err(format!(
                        "request {request} made {} nodes in the cloud: {}",
                        made.len(),
                        made.iter()
                            .map(|n| n.id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                },
            );
        }
    }

    async fn step_foreign(&mut self, planted: &[(String, String)]) {
        // The host drops nodes of another owner from a describe before
        // anyone sees them (and counts them): a plugin that lists them is
        // still caught.
        let dropped_before = self.plugin.foreign_answers();
        let described = self.describe().await;
        let dropped = self.plugin.foreign_answers() - dropped_before;
        if dropped > 0 {
            self.checks.fail(
                "describe.no-foreign",
                format!(
                    "describe listed {dropped} node(s) that do not carry this owner id (the host dropped them from the answer)"
                ),
            );
        }
        match described {
            Ok(nodes) => {
                for n in &nodes {
                    let problem = if let Some((_, how)) =
                        planted.iter().find(|(id, _)| *id == n.provider_id)
                    {
                        Some(format!("describe returned {} ({how})", n.provider_id))
                    } else if n.labels.get(OWNER_LABEL) != Some(&self.owner) {
                        Some(format!(
                            "describe returned {} with owner tag {:?}",
                            n.provider_id,
                            n.labels.get(OWNER_LABEL)
                        ))
                    } else {
                        None
                    };
                    match problem {
                        Some(p) => self.checks.fail("describe.no-foreign", p),
                        None => self.checks.pass("describe.no-foreign"),
                    }
                }
            }
            Err(e) => self
                .checks
                .fail("describe.no-foreign", format!("describe failed: {e}")),
        }
        for (id, how) in planted {
            let result = self.terminate_expecting_refusal(id).await;
            let still_there = match self.truth().await {
                Some(truth) => truth.iter().any(|n| n.id == *id && n.alive),
                None => true,
            };
            if matches!(result, Err(ProvisionerError::NotFound(_))) {
                self.checks.pass("errors.classified");
            }
            let outcome = match result {
                Err(ProvisionerError::NotFound(_)) if still_there => Ok(()),
                Err(ProvisionerError::NotFound(_)) => Err(format!(
                    "terminate {id} ({how}) said not-found, but the node is gone from the cloud"
                )),
                Ok(()) => Err(format!("terminate {id} ({how}) succeeded")),
                Err(e) => {
                    self.checks.fail(
                        "errors.classified",
                        format!(
                            "terminate of a node this owner does not own ({id}) answered {} ({e}); expected not_found",
                            e.kind()
                        ),
                    );
                    Err(format!(
                        "terminate {id} ({how}) answered {} ({e})",
                        e.kind()
                    ))
                }
            };
            self.checks.check("terminate.foreign-refused", outcome);
        }
    }

    /// Terminate that expects not-found: retried only for injected faults.
    async fn terminate_expecting_refusal(&mut self, id: &str) -> CallResult<()> {
        let plugin = self.plugin.clone();
        let id = id.to_string();
        self.call(&format!("terminate {id}"), || {
            let plugin = plugin.clone();
            let id = id.clone();
            async move { plugin.terminate(&id).await }
        })
        .await
    }

    async fn step_terminate(&mut self, a: &NodeHandle) {
        let id = a.provider_id.clone();
        if let Err(e) = self.terminate(&id).await {
            self.checks.fail(
                "terminate.removes",
                format!("terminate {id} failed: {} ({e})", e.kind()),
            );
            return;
        }
        match self.describe().await {
            Ok(nodes) => self.checks.check(
                "terminate.removes",
                if nodes.iter().any(|n| n.provider_id == id) {
                    Err(format!("describe still lists {id} after terminate"))
                } else {
                    Ok(())
                },
            ),
            Err(e) => self.checks.fail(
                "terminate.removes",
                format!("describe after terminate failed: {e}"),
            ),
        }
        if let Some(truth) = self.truth().await {
            self.checks.check(
                "terminate.removes",
                if truth.iter().any(|n| n.id == id && n.alive) {
                    Err(format!(
                        "terminate {id} succeeded, but the node still exists in the cloud"
                    ))
                } else {
                    Ok(())
                },
            );
        }
        self.calls += 1;
        let outcome = match self.plugin.terminate(&id).await {
            Ok(()) | Err(ProvisionerError::NotFound(_)) => Ok(()),
            Err(e) if self.injector.spec().is_active() && e.is_retryable() => Ok(()),
            Err(e) => {
                self.checks.fail(
                    "errors.classified",
                    format!(
                        "terminate of a terminated node ({id}) answered {} ({e}); expected not_found or success",
                        e.kind()
                    ),
                );
                Err(format!("terminate {id} again answered {} ({e})", e.kind()))
            }
        };
        self.checks.check("terminate.repeat", outcome);
    }

    async fn step_unsatisfiable(&mut self) {
        let request = "conformance-impossible";
        let shape = NodeShape::new(4096.0, 64 * 1024 * GIB);
        let outcome = match self.provision(request, &shape).await {
            Err(ProvisionerError::Unsupported(_) | ProvisionerError::Capacity { .. }) => Ok(()),
            Ok(h) => Err(format!(
                "provision of 4096 vCPU, 64 TiB returned node {} ({:?})",
                h.provider_id, h.instance_type
            )),
            Err(e) => Err(format!(
                "provision of 4096 vCPU, 64 TiB answered {} ({e})",
                e.kind()
            )),
        };
        self.checks.check("provision.unsatisfiable", outcome);
        if let Some(truth) = self.truth().await {
            let made = self.made_for(&truth, request);
            self.checks.check(
                "provision.unsatisfiable",
                if made.is_empty() {
                    Ok(())
                } else {
                    Err(format!(
                        "the refused provision created {} in the cloud",
                        made.iter()
                            .map(|n| n.id.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                },
            );
        }
    }

    /// Terminates what describe lists, for both owners, without faults;
    /// then every node of this owner left in the cloud is a leak.
    async fn cleanup(&mut self) {
        self.injector.pause(true);
        for plugin in [self.plugin.clone(), self.foreign.clone()] {
            self.calls += 1;
            match plugin.describe().await {
                Ok(nodes) => {
                    for n in nodes {
                        self.calls += 1;
                        if let Err(e) = plugin.terminate(&n.provider_id).await
                            && !matches!(e, ProvisionerError::NotFound(_))
                        {
                            tracing::warn!("clean-up: terminate {}: {e}", n.provider_id);
                        }
                    }
                }
                Err(e) => tracing::warn!("clean-up: describe: {e}"),
            }
        }
        let Some(truth) = self.truth().await else {
            self.checks
                .skip("leak.none", "no fake cloud to look for leaked nodes in");
            return;
        };
        let leaked: Vec<&TruthNode> = truth
            .iter()
            .filter(|n| {
                n.alive && n.labels.get(OWNER_LABEL).map(String::as_str) == Some(&self.owner)
            })
            .collect();
        if leaked.is_empty() && self.seen_in_truth {
            self.checks.pass("leak.none");
        } else if leaked.is_empty() {
            self.checks.skip(
                "leak.none",
                if self.made.is_empty() {
                    "nothing was provisioned, so nothing could leak".to_string()
                } else {
                    "the fake never listed a node of this owner, so a leak could not be seen"
                        .to_string()
                },
            );
        }
        for n in leaked {
            self.checks.fail(
                "leak.none",
                format!(
                    "node {} (request {:?}) is still in the cloud after every node describe listed was terminated",
                    n.id,
                    n.labels.get(REQUEST_LABEL)
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_foreign_owner_is_a_valid_id_other_than_the_owner() {
        let long = "o".repeat(63);
        let tail = format!("{}-foreign", "x".repeat(55));
        for owner in [
            "a",
            "wasmprov-conformance",
            &"o".repeat(55),
            &"o".repeat(56),
            &long,
            &tail,
        ] {
            let foreign = super::foreign_owner_of(owner);
            assert!(
                wasmprov_api::ids::is_valid_id(&foreign),
                "{owner} -> {foreign}"
            );
            assert_ne!(foreign, owner);
        }
        assert_eq!(super::foreign_owner_of("o-1"), "o-1-foreign");
    }
}
