//! `wasmprov`: load provisioner plugins under the sandbox and drive them.

mod bundled;
mod conformance;
mod declare;
mod demo;
mod exit;
mod fleet;
mod help;
mod install;
mod manual;
mod output;
mod scaffold;
mod serve;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::{Args, Parser, Subcommand};
use wasmprov_api::{Arch, BootData, CapacityType, NodeShape, ProvisionRequest, ProvisionerError};
use wasmprov_host::{Host, HostBuilder};

/// Run cloud provisioner plugins (WebAssembly components) under a deny-by-default sandbox.
#[derive(Debug, Parser)]
#[command(name = "wasmprov", version, about, after_help = help::TOP)]
struct Cli {
    /// Directory holding NAME.wasm + NAME.toml plugins.
    #[arg(
        long,
        global = true,
        default_value = "./plugins.d",
        env = "WASMPROV_PLUGIN_DIR",
        help_heading = help::GLOBAL
    )]
    plugin_dir: PathBuf,
    /// Owner id every created node is tagged with [default: wasmprov-<hostname>].
    #[arg(long, global = true, env = "WASMPROV_OWNER", value_parser = parse_owner_id,
          help_heading = help::GLOBAL)]
    owner: Option<String>,
    /// Print JSON instead of tables (errors too: {"error": {...}} on stdout).
    #[arg(long, global = true, help_heading = help::GLOBAL)]
    json: bool,
    /// Do not use the on-disk compile cache.
    #[arg(long, global = true, help_heading = help::GLOBAL)]
    no_cache: bool,
    /// Price hints one plugin instance may answer before it is replaced
    /// (1: a fresh instance for every call). Calls that can do I/O always
    /// get a fresh instance.
    #[arg(long, global = true, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..), help_heading = help::GLOBAL)]
    price_hint_reuse: u32,
    /// Directory of the intent journal (`scale`, `reconcile`; `provision` and
    /// `terminate` journal too when it is given).
    #[arg(long, global = true, env = "WASMPROV_STATE_DIR", help_heading = help::GLOBAL)]
    state_dir: Option<PathBuf>,
    /// How log records on stderr look: text for people, json (one object
    /// per line) for collectors. WASMPROV_LOG sets what is logged; NO_COLOR
    /// (or a stderr that is not a terminal) turns colours off.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text,
          env = "WASMPROV_LOG_FORMAT", help_heading = help::GLOBAL)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// The form of log records (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// One line per record, for people.
    Text,
    /// One JSON object per line (tracing-subscriber's JSON format).
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the plugins of the directory, and those that failed to load.
    #[command(after_help = help::PLUGINS)]
    Plugins,
    /// Show a plugin's grants, limits, config keys and digest (never secret values).
    #[command(after_help = help::INSPECT)]
    Inspect {
        /// Plugin name.
        plugin: String,
    },
    /// Ask a plugin what a shape costs.
    #[command(after_help = help::PRICE)]
    Price {
        /// Plugin name.
        plugin: String,
        #[command(flatten)]
        shape: ShapeArgs,
    },
    /// Rank every plugin offering that fits a shape, cheapest first (plugins without
    /// offerings by their price hint).
    #[command(after_help = help::RANK)]
    Rank {
        #[command(flatten)]
        shape: ShapeArgs,
    },
    /// Create a node (idempotent per request id).
    #[command(after_help = help::PROVISION)]
    Provision {
        /// Plugin name.
        plugin: String,
        #[command(flatten)]
        shape: ShapeArgs,
        /// Request id; a second provision with the same id returns the same node
        /// (1-63 of a-z, 0-9, '-', '_'; alphanumeric at both ends).
        #[arg(long, value_parser = parse_request_id)]
        request_id: Option<String>,
        /// A label for the node, as key=value (repeatable).
        #[arg(long = "label", value_parser = parse_label)]
        labels: Vec<(String, String)>,
        /// Lease in seconds (needs --state-dir): reconcile terminates the node once it ran
        /// this long, unless renewed (`wasmprov renew`). A repeated provision must ask the same lease.
        #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
        lease_secs: Option<u64>,
        #[command(flatten)]
        boot: BootArgs,
    },
    /// Move the lease of a journaled request to SECS from now (kept in the history).
    #[command(after_help = help::RENEW)]
    Renew {
        /// The request id the node was provisioned under.
        #[arg(value_parser = parse_request_id)]
        request_id: String,
        /// The new lease, in seconds from now.
        #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
        lease_secs: u64,
    },
    /// List the nodes this owner has on the plugin's cloud.
    #[command(after_help = help::DESCRIBE)]
    Describe {
        /// Plugin name.
        plugin: String,
    },
    /// Show one node of this owner (exit 66 when it does not exist or is not owned).
    #[command(after_help = help::GET)]
    Get {
        /// Plugin name.
        plugin: String,
        /// The node's provider id.
        id: String,
    },
    /// List the instance types a plugin can create: size, GPUs, architecture,
    /// disk, zones and prices.
    #[command(after_help = help::OFFERINGS)]
    Offerings {
        /// Plugin name.
        plugin: String,
    },
    /// Terminate a node (a node already gone is success, with a note).
    #[command(after_help = help::TERMINATE)]
    Terminate {
        /// Plugin name.
        plugin: String,
        /// The node's provider id.
        id: String,
    },
    /// Settle the journal against every plugin's describe: confirm or resume
    /// interrupted provisions, finish terminations, end expired leases, find leaks.
    #[command(after_help = help::RECONCILE)]
    Reconcile {
        /// Terminate leaked nodes (owned, but wanted by no intent) instead of only listing them.
        #[arg(long)]
        terminate_leaks: bool,
        /// Forget interrupted provisions whose node is not found instead of asking again.
        #[arg(long)]
        no_resume: bool,
        /// Seconds between the two lists that must both show a leak, or both miss a journaled
        /// node, before reconcile believes them (clouds list new nodes late); 0 still needs two
        /// lists, that is two reconciles.
        #[arg(long, value_name = "SECS", default_value_t = 60)]
        grace: u64,
        /// Record every orphan (a node of this owner the journal cannot prove it made, such as
        /// one made before the journal was lost) as an intent, lifting a hold it caused.
        #[arg(long, conflicts_with = "confirm_orphans")]
        adopt: bool,
        /// Confirm every orphan as not this journal's (left where it is, no longer reported),
        /// lifting a hold it caused.
        #[arg(long)]
        confirm_orphans: bool,
    },
    /// What was terminated, forgotten, found or adopted, when and why (terminations of
    /// every kind, written before the cloud is asked; lease renewals; orphans; holds;
    /// vanished nodes; abandoned provisions).
    #[command(after_help = help::HISTORY)]
    History {
        /// The newest this many entries.
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Scale a capacity group to a desired size on the cheapest plugins with room
    /// (after settling what an earlier run left half done).
    #[command(after_help = help::SCALE)]
    Scale {
        /// Group name (part of each member's request id).
        group: String,
        /// Members wanted (brought within --min..--max).
        #[arg(long)]
        desired: u32,
        #[command(flatten)]
        shape: ShapeArgs,
        /// Fewest members.
        #[arg(long, default_value_t = 0)]
        min: u32,
        /// Most members.
        #[arg(long, default_value_t = 100)]
        max: u32,
        /// A plugin the group may use (repeatable) [default: every plugin].
        #[arg(long = "plugin")]
        plugins: Vec<String>,
        /// Lease per member in seconds; reconcile terminates members older than this.
        #[arg(long)]
        lease_secs: Option<u64>,
        /// Terminate leaked nodes found on the way.
        #[arg(long)]
        terminate_leaks: bool,
        #[command(flatten)]
        boot: BootArgs,
    },
    /// Run a fake cloud API on loopback for trying plugins without an account.
    #[command(after_help = help::FAKE)]
    Fake {
        #[command(subcommand)]
        cloud: FakeCloud,
    },
    /// Write bundled plugins (components and manifests) into a directory: hetzner,
    /// unless --only or --all says otherwise.
    #[command(after_help = help::BUNDLE)]
    Bundle {
        /// Target directory (created if missing).
        #[arg(long, default_value = "./plugins.d")]
        out: PathBuf,
        /// Write these bundled plugins [default: hetzner].
        #[arg(long, value_name = "NAME", num_args = 1.., value_delimiter = ',',
              value_parser = clap::builder::PossibleValuesParser::new(bundled::NAMES))]
        only: Vec<String>,
        /// Write every bundled plugin.
        #[arg(long, conflicts_with = "only")]
        all: bool,
        /// Point the Hetzner plugin at this API base URL (such as a fake's) instead of the real one.
        #[arg(long)]
        hetzner_endpoint: Option<String>,
    },
    /// The whole path on an embedded fake cloud: price, provision, describe, terminate.
    #[command(after_help = help::DEMO)]
    Demo,
    /// Run the conformance suite against a plugin of the directory, under the sandbox,
    /// with its HTTP sent to a fake cloud (or a cassette) and its exec to stubs.
    #[command(after_help = help::TEST)]
    Test {
        /// Plugin name, in the plugin directory [default with --manifest: the manifest's name].
        #[arg(required_unless_present = "manifest")]
        plugin: Option<String>,
        /// Test this component file instead of the plugin directory's (with --manifest).
        #[arg(long, requires = "manifest")]
        component: Option<PathBuf>,
        /// The manifest (grants, config, secrets) to test the component under.
        #[arg(long, requires = "component")]
        manifest: Option<PathBuf>,
        /// Built-in fake: hetzner, ec2, cloud-init, refcloud or digitalocean [default: the one that fits the plugin].
        #[arg(long, conflicts_with_all = ["replay", "live", "fake_url", "fake_command"])]
        fake: Option<String>,
        /// A fake of any cloud, running at this loopback URL, that speaks the
        /// fake-control protocol (docs/FAKE-PROTOCOL.md).
        #[arg(long, conflicts_with_all = ["replay", "live", "fake_command"])]
        fake_url: Option<String>,
        /// Start such a fake with this shell command; it prints its URL as its
        /// first line of output, and is stopped when the suite ends.
        #[arg(long, conflicts_with_all = ["replay", "live"])]
        fake_command: Option<String>,
        /// Faults to inject: `default`, or kind=rate pairs (429, 5xx, timeout, reset,
        /// malformed, slow, capacity, quota) and seed=N, e.g. `429=0.1,reset=0.05,seed=7`.
        #[arg(long)]
        faults: Option<String>,
        /// Record the plugin's HTTP exchanges (secrets redacted) to this cassette file.
        #[arg(long)]
        record: Option<PathBuf>,
        /// Answer the plugin's HTTP from this cassette; nothing leaves the machine.
        #[arg(long, conflicts_with = "live")]
        replay: Option<PathBuf>,
        /// Send requests where the plugin addresses them, with secrets from the
        /// environment: a real cloud, real nodes (terminated at the end).
        #[arg(long)]
        live: bool,
    },
    /// Create a plugin crate on the guest SDK's rest layer: a manifest with minimal
    /// grants, a fake of its cloud, and a test running `wasmprov test` against it.
    #[command(after_help = help::NEW)]
    New {
        /// Plugin name: lowercase letters, digits and `-`.
        name: String,
        /// Directory to create [default: ./NAME].
        #[arg(long)]
        path: Option<PathBuf>,
        /// A wasmprov checkout whose guest-sdk and host/fake the crate builds with,
        /// through a [patch.crates-io] section (the dependencies stay versions)
        /// [default: the checkout this wasmprov was built from, if it is still there].
        #[arg(long, conflicts_with = "crates_io")]
        sdk: Option<PathBuf>,
        /// Depend on the published crates only, by version, even with a checkout at hand.
        #[arg(long)]
        crates_io: bool,
        /// The plugin's language: a Rust crate, or app.py (componentize-py) or
        /// app.js (ComponentizeJS) with the WIT, a manifest and a test.
        #[arg(long, value_enum, default_value_t = scaffold::Lang::Rust)]
        lang: scaffold::Lang,
    },
    /// Serve the plugins over gRPC (wasmprov.v1.Provisioner, bearer-token auth) and
    /// their metrics over HTTP (GET /metrics), hot-reloading the plugin directory.
    #[command(after_help = help::SERVE)]
    Serve(serve::ServeArgs),
    /// Install a plugin from an OCI registry (registry/repo:tag or @sha256:…) or a
    /// local .wasm: verify its digest and signature, show what it requests, write
    /// NAME.wasm and a NAME.toml granting exactly that, and record it in wasmprov.lock.
    #[command(after_help = help::INSTALL)]
    Install {
        /// OCI reference, or a path to a .wasm (its signature, if any, beside it as FILE.minisig).
        reference: String,
        /// The name to install it under [default: the repository's last part, or the
        /// file's stem]; never taken from the registry. A signature must name it.
        #[arg(long, value_parser = parse_plugin_name)]
        name: Option<String>,
        /// Install even when its signed version (or signing time) is older than the
        /// installed one's.
        #[arg(long)]
        allow_downgrade: bool,
        /// Give up after this many seconds of fetching and checking (the prompt is not counted).
        #[arg(long, value_name = "SECONDS", default_value_t = install::DEFAULT_TIMEOUT.as_secs())]
        timeout: u64,
        /// A config value for the manifest, key=value (repeatable).
        #[arg(long = "config", value_parser = parse_label)]
        config: Vec<(String, String)>,
        /// Where a secret comes from, key=ENV_VAR (repeatable).
        #[arg(long = "secret", value_parser = parse_label)]
        secrets: Vec<(String, String)>,
        /// Accept without asking (for scripts); without it a terminal is asked and
        /// anything else refuses.
        #[arg(long)]
        yes: bool,
    },
    /// Embed a capabilities.toml in a component built by another language's tools
    /// (componentize-py, ComponentizeJS), as export_provider! does for Rust.
    #[command(after_help = help::DECLARE)]
    Declare {
        /// The component (.wasm), rewritten in place unless --out is given.
        component: PathBuf,
        /// The declaration.
        #[arg(long, default_value = "capabilities.toml")]
        capabilities: PathBuf,
        /// Write the declared component here instead.
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Publish a built component to an OCI registry (registry/repo:tag), in the
    /// wasm-pkg-tools layout, with its minisign signature beside it.
    #[command(after_help = help::PUSH)]
    Push {
        /// The component (.wasm).
        file: PathBuf,
        /// Where to publish it.
        reference: String,
        /// Plugin name the signature binds and the artifact carries [default: the
        /// repository's last part, the name `install` gives it].
        #[arg(long, value_parser = parse_plugin_name)]
        name: Option<String>,
        /// Sign with this minisign secret key (password from WASMPROV_SIGNING_PASSWORD if it has one).
        #[arg(long, value_name = "KEY", conflicts_with = "signature")]
        sign: Option<PathBuf>,
        /// Publish this signature, made beforehand (`minisign -Sm FILE`).
        #[arg(long, value_name = "FILE.minisig")]
        signature: Option<PathBuf>,
        /// Give up after this many seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = install::DEFAULT_TIMEOUT.as_secs())]
        timeout: u64,
    },
    /// Check or update wasmprov.lock, the digests of the directory's components.
    #[command(after_help = help::LOCK)]
    Lock {
        /// Fail (exit 1) if any component differs from the lock or its manifest's
        /// sha256 pin, is not in the lock, or is gone.
        #[arg(long, conflicts_with = "update", required_unless_present = "update")]
        check: bool,
        /// Accept every component as it is now: record its digest in the lock, and in
        /// its manifest's sha256 pin when it has one (a hot-reloading host then loads it).
        #[arg(long)]
        update: bool,
    },
    /// Print a shell completion script to stdout.
    #[command(after_help = help::COMPLETIONS)]
    Completions {
        /// The shell to complete for.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff) to stdout, or write one page per command to a directory.
    #[command(after_help = help::MAN)]
    Man {
        /// Write wasmprov.1 and wasmprov-COMMAND.1 pages here instead.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
enum FakeCloud {
    /// A stateful fake of the Hetzner Cloud API v1.
    Hetzner {
        /// Loopback address to listen on.
        #[arg(long, default_value = "127.0.0.1:8787")]
        listen: SocketAddr,
    },
    /// The reference cloud that `wasmprov new` plugins talk to.
    Refcloud {
        /// Loopback address to listen on.
        #[arg(long, default_value = "127.0.0.1:8788")]
        listen: SocketAddr,
    },
}

#[derive(Debug, Args)]
struct ShapeArgs {
    /// vCPUs.
    #[arg(long)]
    cpu: f64,
    /// Memory: bytes, or with a unit (512MiB, 4GiB, 8G).
    #[arg(long, value_parser = parse_bytes)]
    memory: u64,
    /// GPUs.
    #[arg(long, default_value_t = 0)]
    gpu: u32,
    /// GPU vendor (nvidia, amd).
    #[arg(long)]
    gpu_vendor: Option<String>,
    /// Spot capacity instead of on-demand.
    #[arg(long)]
    spot: bool,
    /// Zone or location.
    #[arg(long)]
    zone: Option<String>,
    /// An explicit instance type (wins over cpu/memory/gpu matching).
    #[arg(long)]
    instance_type: Option<String>,
    /// CPU architecture the node's images run on: x86_64 (amd64) or arm64
    /// (aarch64) [default: any].
    #[arg(long)]
    arch: Option<Arch>,
    /// GPU model (nvidia-a100, nvidia-t4, amd-mi300x), compared ignoring case;
    /// needs --gpu.
    #[arg(long, requires = "gpu")]
    gpu_model: Option<String>,
    /// Disk at least: bytes, or with a unit (100GiB).
    #[arg(long, value_parser = parse_bytes)]
    disk: Option<u64>,
}

/// What a node boots with.
#[derive(Debug, Args)]
struct BootArgs {
    /// The image to boot (an AMI id, an image name) instead of the plugin's configured one.
    #[arg(long)]
    image: Option<String>,
    /// A file of user data for the first boot, such as a #cloud-config.
    #[arg(long, value_name = "FILE")]
    user_data: Option<PathBuf>,
    /// An SSH public key to authorize: the key itself, or a file holding one (repeatable).
    #[arg(long = "ssh-key", value_name = "KEY|FILE")]
    ssh_keys: Vec<String>,
}

impl BootArgs {
    fn boot(&self) -> anyhow::Result<BootData> {
        let user_data = match &self.user_data {
            Some(path) => Some(
                std::fs::read(path)
                    .with_context(|| format!("reading --user-data {}", path.display()))?,
            ),
            None => None,
        };
        let mut ssh_keys = Vec::new();
        for key in &self.ssh_keys {
            // A key has a space between its type and its data; a path to a
            // .pub file is read.
            if key.contains(' ') {
                ssh_keys.push(key.trim().to_string());
            } else {
                let text = std::fs::read_to_string(key)
                    .with_context(|| format!("reading --ssh-key {key}"))?;
                ssh_keys.extend(
                    text.lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty() && !l.starts_with('#'))
                        .map(str::to_string),
                );
            }
        }
        let boot = BootData {
            image: self.image.clone(),
            user_data,
            ssh_keys,
        };
        boot.validate().map_err(CallFailed)?;
        Ok(boot)
    }
}

impl ShapeArgs {
    fn shape(&self, labels: &[(String, String)]) -> NodeShape {
        NodeShape {
            cpu: self.cpu,
            memory_bytes: self.memory,
            gpu: self.gpu,
            gpu_vendor: self.gpu_vendor.clone(),
            labels: labels.iter().cloned().collect::<BTreeMap<_, _>>(),
            zone: self.zone.clone(),
            capacity_type: if self.spot {
                CapacityType::Spot
            } else {
                CapacityType::OnDemand
            },
            instance_type: self.instance_type.clone(),
            gpu_model: self.gpu_model.clone(),
            arch: self.arch,
            disk_bytes: self.disk,
        }
    }
}

/// A request id as `wasmprov_api::ids` defines it.
fn parse_request_id(s: &str) -> Result<String, String> {
    wasmprov_api::ids::id_problem("request id", s).map_or_else(|| Ok(s.to_string()), Err)
}

/// An owner id as `wasmprov_api::ids` defines it.
fn parse_owner_id(s: &str) -> Result<String, String> {
    wasmprov_api::ids::id_problem("owner id", s).map_or_else(|| Ok(s.to_string()), Err)
}

fn parse_plugin_name(s: &str) -> Result<String, String> {
    wasmprov_host::policy::manifest::plugin_name_problem(s).map_or_else(|| Ok(s.to_string()), Err)
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("label {s:?} must be key=value"))?;
    if k.is_empty() {
        return Err(format!("label {s:?} has an empty key"));
    }
    if wasmprov_api::provenance::is_reserved_label(k) {
        return Err(format!(
            "label {k:?} is set by the host and its plugins (owner, journal, request, group), not by a caller"
        ));
    }
    Ok((k.to_string(), v.to_string()))
}

/// Parses `4GiB`, `512MiB`, `8G`, `1024`: binary units, as memory is sized.
fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let num: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size; use bytes or a unit, such as 4GiB or 512MiB"))?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "unknown size unit {other:?}; use KiB, MiB, GiB or TiB"
            ));
        }
    };
    if !num.is_finite() || num < 0.0 {
        return Err(format!("{s:?} is not a size"));
    }
    Ok((num * mult as f64).round() as u64)
}

async fn load(cli: &Cli) -> Result<Host> {
    load_waiting(cli, None, None).await
}

/// [`load`] for a command about the plugin `name`: only its manifest
/// (`NAME.toml`) is read and compiled, so another plugin of the directory
/// (a broken one, or one slow to compile) neither delays nor fails it. A
/// plugin whose manifest has another file name is found by loading them all.
async fn load_named(cli: &Cli, name: &str) -> Result<Host> {
    let host = load_waiting(cli, None, Some(name)).await?;
    if host.plugin(name).is_some() || !host.errors().is_empty() {
        return Ok(host);
    }
    load(cli).await
}

/// [`load`], waiting at most `compile_wait` for plugins to compile (the
/// rest load as their compiles end, under a watcher), and only the plugin
/// `only` when given.
async fn load_waiting(
    cli: &Cli,
    compile_wait: Option<std::time::Duration>,
    only: Option<&str>,
) -> Result<Host> {
    if !cli.plugin_dir.is_dir() {
        bail!(
            "plugin directory {} does not exist; create it, or write the bundled plugins with `wasmprov bundle --out {}`",
            cli.plugin_dir.display(),
            cli.plugin_dir.display()
        );
    }
    let mut builder = HostBuilder::new(&cli.plugin_dir);
    if let Some(owner) = &cli.owner {
        builder = builder.owner_id(owner);
    }
    if cli.no_cache {
        builder = builder.cache_dir(None);
    }
    if let Some(wait) = compile_wait {
        builder = builder.compile_wait(wait);
    }
    if let Some(name) = only {
        builder = builder.only_plugins([name]);
    }
    builder.price_hint_reuse(cli.price_hint_reuse).build().await
}

fn plugin(host: &Host, name: &str) -> Result<std::sync::Arc<wasmprov_host::WasmPlugin>> {
    if let Some(p) = host.wasm_plugin(name) {
        return Ok(p);
    }
    if let Some(err) = host.errors().iter().find(|e| e.to_string().contains(name)) {
        bail!("plugin {name:?} did not load: {err}");
    }
    let known = host.plugin_names();
    Err(exit::UnknownPlugin(format!(
        "no plugin {name:?} in the plugin directory (loaded: {})",
        if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        }
    ))
    .into())
}

/// A provisioner error, kept typed for JSON output.
#[derive(Debug)]
pub(crate) struct CallFailed(pub(crate) ProvisionerError);

impl std::fmt::Display for CallFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.0, self.0.kind())
    }
}

impl std::error::Error for CallFailed {}

/// A failure whose details were already printed (as JSON); only the one-line
/// reason remains to be said.
#[derive(Debug)]
pub(crate) struct Reported(pub(crate) String);

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Reported {}

async fn run(cli: Cli) -> Result<()> {
    use wasmprov_api::CloudProvisioner;
    let json = cli.json;
    match &cli.command {
        Command::Plugins => {
            let host = load(&cli).await?;
            output::plugins(&host, json)?;
            if let Some(first) = host.errors().first() {
                bail!(
                    "{} plugin(s) failed to load; first: {first}",
                    host.errors().len()
                );
            }
        }
        Command::Inspect { plugin: name } => {
            let host = load_named(&cli, name).await?;
            output::inspect(plugin(&host, name)?.info(), host.owner_id(), json)?;
        }
        Command::Price {
            plugin: name,
            shape,
        } => {
            let host = load_named(&cli, name).await?;
            let p = plugin(&host, name)?;
            let shape = shape.shape(&[]);
            match p.try_price_hint(&shape).map_err(CallFailed)? {
                Some(hint) => output::price(&hint, json)?,
                None => bail!("plugin {name} cannot price this shape"),
            }
        }
        Command::Rank { shape } => {
            let host = load(&cli).await?;
            let ranking = wasmprov_fleet::rank_offerings(&host, &shape.shape(&[]), None).await;
            output::ranking(&ranking, json)?;
            if ranking.offers.is_empty() {
                bail!("no plugin can run this shape");
            }
        }
        Command::Provision {
            plugin: name,
            shape,
            request_id,
            labels,
            lease_secs,
            boot,
        } => {
            let boot = boot.boot()?;
            let host = load_named(&cli, name).await?;
            let p = plugin(&host, name)?;
            let request = ProvisionRequest {
                request_id: request_id.clone().unwrap_or_else(new_request_id),
                shape: shape.shape(labels),
                boot,
            };
            let lease = lease_secs.map(std::time::Duration::from_secs);
            let node = match &cli.state_dir {
                Some(state) => fleet::provision(host, state, name, request, lease).await?,
                None if lease.is_some() => {
                    return Err(exit::Usage(
                        "--lease-secs needs --state-dir: a lease lives in the journal".into(),
                    )
                    .into());
                }
                None => p.provision_request(&request).await.map_err(CallFailed)?,
            };
            output::nodes(std::slice::from_ref(&node), json, true)?;
        }
        Command::Describe { plugin: name } => {
            let host = load_named(&cli, name).await?;
            let nodes = plugin(&host, name)?.describe().await.map_err(CallFailed)?;
            output::nodes(&nodes, json, false)?;
        }
        Command::Get { plugin: name, id } => {
            let host = load_named(&cli, name).await?;
            match plugin(&host, name)?.get(id).await.map_err(CallFailed)? {
                Some(node) => output::nodes(std::slice::from_ref(&node), json, true)?,
                None => {
                    return Err(CallFailed(wasmprov_api::ProvisionerError::NotFound(format!(
                        "no node {id} of this owner on {name}"
                    )))
                    .into());
                }
            }
        }
        Command::Offerings { plugin: name } => {
            let host = load_named(&cli, name).await?;
            let list = plugin(&host, name)?.offerings().await.map_err(CallFailed)?;
            output::offerings(&list, json)?;
        }
        Command::Terminate { plugin: name, id } => {
            let host = load_named(&cli, name).await?;
            let p = plugin(&host, name)?;
            // The contract: a node already gone is `not_found`, and the
            // node is as the caller wants it, so that is success.
            let already_gone = match &cli.state_dir {
                Some(state) => fleet::terminate(host, state, name, id).await?,
                None => match p.terminate(id).await {
                    Ok(()) => false,
                    Err(ProvisionerError::NotFound(_)) => true,
                    Err(e) => return Err(CallFailed(e).into()),
                },
            };
            if json {
                println!(
                    "{}",
                    serde_json::json!({ "terminated": id, "already_gone": already_gone })
                );
            } else if already_gone {
                println!("{} was already gone; nothing to terminate", output::c(id));
            } else {
                println!("terminated {}", output::c(id));
            }
        }
        Command::Fake {
            cloud: FakeCloud::Hetzner { listen },
        } => {
            wasmprov_fake::run_standalone(*listen, wasmprov_fake::HetznerFakeOptions::default())
                .await?;
        }
        Command::Fake {
            cloud: FakeCloud::Refcloud { listen },
        } => {
            wasmprov_fake::refcloud::run_standalone(
                *listen,
                wasmprov_fake::RefCloudFakeOptions::default(),
            )
            .await?;
        }
        Command::New {
            name,
            path,
            sdk,
            crates_io,
            lang,
        } => {
            let built_from = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .ancestors()
                .nth(2)
                .map(std::path::Path::to_path_buf)
                .filter(|root| root.join("guest-sdk").join("Cargo.toml").is_file());
            let checkout = if *crates_io {
                None
            } else {
                sdk.clone().or(built_from)
            };
            let dest = path.clone().unwrap_or_else(|| PathBuf::from(name));
            let written = scaffold::scaffold(&scaffold::ScaffoldOptions {
                name: name.clone(),
                dest: dest.clone(),
                checkout: checkout.clone(),
                lang: *lang,
            })?;
            if json {
                println!("{}", serde_json::json!({ "dir": dest, "files": written }));
            } else {
                println!("created plugin {name} in {}:", dest.display());
                for f in &written {
                    println!("  {}", f.display());
                }
                match lang {
                    scaffold::Lang::Rust => {
                        match &checkout {
                            Some(c) => println!(
                                "the SDK and fake kit (version {}) come from the checkout {}, through [patch.crates-io] in Cargo.toml: delete that section to build with the published crates",
                                scaffold::SDK_VERSION,
                                c.display()
                            ),
                            None => println!(
                                "the SDK and fake kit come from crates.io, version {}",
                                scaffold::SDK_VERSION
                            ),
                        }
                        println!(
                            "next: cd {} && cargo test   (builds the component and its fake, and runs `wasmprov test` on them: wasmprov must be on PATH, or set WASMPROV)",
                            dest.display()
                        );
                    }
                    scaffold::Lang::Python => println!(
                        "next: cd {} && pip install componentize-py==0.25.1 && python3 -m unittest   (builds the component and runs `wasmprov test` on it: wasmprov must be on PATH, or set WASMPROV)",
                        dest.display()
                    ),
                    scaffold::Lang::Js => println!(
                        "next: cd {} && npm install && npm test   (builds the component and runs `wasmprov test` on it: wasmprov must be on PATH, or set WASMPROV)",
                        dest.display()
                    ),
                }
            }
        }
        Command::Bundle {
            out,
            only,
            all,
            hetzner_endpoint,
        } => bundle(out, only, *all, hetzner_endpoint.as_deref(), json)?,
        Command::Renew {
            request_id,
            lease_secs,
        } => {
            fleet::renew(
                &state_dir(&cli),
                request_id,
                std::time::Duration::from_secs(*lease_secs),
                json,
            )
            .await?;
        }
        Command::Reconcile {
            terminate_leaks,
            no_resume,
            grace,
            adopt,
            confirm_orphans,
        } => {
            let host = load(&cli).await?;
            let policy = wasmprov_fleet::ReconcilePolicy {
                leaks: if *terminate_leaks {
                    wasmprov_fleet::LeakPolicy::Terminate
                } else {
                    wasmprov_fleet::LeakPolicy::Report
                },
                resume_pending: !*no_resume,
                grace: std::time::Duration::from_secs(*grace),
                adopt: *adopt,
                confirm_orphans: *confirm_orphans,
            };
            fleet::reconcile(host, &state_dir(&cli), policy, json).await?;
        }
        Command::History { limit } => {
            fleet::history(&state_dir(&cli), *limit, json)?;
        }
        Command::Scale {
            group,
            desired,
            shape,
            min,
            max,
            plugins,
            lease_secs,
            terminate_leaks,
            boot,
        } => {
            let boot = boot.boot()?;
            let host = load(&cli).await?;
            let group = wasmprov_fleet::CapacityGroup {
                name: group.clone(),
                shape: shape.shape(&[]),
                min: *min,
                max: *max,
                plugins: plugins.clone(),
                lease: lease_secs.map(std::time::Duration::from_secs),
                boot,
            };
            fleet::scale(
                host,
                &state_dir(&cli),
                &group,
                *desired,
                *terminate_leaks,
                json,
            )
            .await?;
        }
        Command::Demo => demo::run(json).await?,
        Command::Serve(args) => serve::run(&cli, args).await?,
        Command::Test {
            plugin,
            component,
            manifest,
            fake,
            fake_url,
            fake_command,
            faults,
            record,
            replay,
            live,
        } => {
            conformance::run(conformance::TestArgs {
                plugin_dir: cli.plugin_dir.clone(),
                plugin: plugin.clone(),
                component: component.clone().zip(manifest.clone()),
                owner: cli.owner.clone(),
                fake: fake.clone(),
                fake_url: fake_url.clone(),
                fake_command: fake_command.clone(),
                faults: faults.clone(),
                record: record.clone(),
                replay: replay.clone(),
                live: *live,
                no_cache: cli.no_cache,
                json,
            })
            .await?;
        }
        Command::Install {
            reference,
            name,
            allow_downgrade,
            timeout,
            config,
            secrets,
            yes,
        } => {
            install::install(
                &cli.plugin_dir,
                &install::InstallArgs {
                    reference: reference.clone(),
                    name: name.clone(),
                    config: config.clone(),
                    secrets: secrets.clone(),
                    yes: *yes,
                    max_bytes: wasmprov_host::DEFAULT_MAX_COMPONENT_BYTES,
                    allow_downgrade: *allow_downgrade,
                    timeout: std::time::Duration::from_secs(*timeout),
                },
                json,
            )
            .await?;
        }
        Command::Declare {
            component,
            capabilities,
            out,
        } => {
            let changed = declare::declare(component, capabilities, out.as_deref())?;
            let target = out.as_ref().unwrap_or(component);
            if json {
                println!(
                    "{}",
                    serde_json::json!({ "component": target, "changed": changed })
                );
            } else if changed {
                println!(
                    "{} now declares {}",
                    target.display(),
                    capabilities.display()
                );
            } else {
                println!(
                    "{} already declares {}",
                    target.display(),
                    capabilities.display()
                );
            }
        }
        Command::Push {
            file,
            reference,
            name,
            sign,
            signature,
            timeout,
        } => {
            install::push(
                &install::PushArgs {
                    file: file.clone(),
                    reference: reference.clone(),
                    name: name.clone(),
                    sign: sign.clone(),
                    signature: signature.clone(),
                    max_bytes: wasmprov_host::DEFAULT_MAX_COMPONENT_BYTES,
                    timeout: std::time::Duration::from_secs(*timeout),
                },
                json,
            )
            .await?;
        }
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "wasmprov", &mut script);
            write_out(&script, "the completion script")?;
        }
        Command::Man { out } => {
            use clap::CommandFactory;
            match out {
                None => write_out(manual::page(Cli::command())?.as_bytes(), "the manual page")?,
                Some(dir) => {
                    let written = manual::write_pages(Cli::command(), dir)?;
                    if json {
                        println!("{}", serde_json::json!({ "dir": dir, "pages": written }));
                    } else {
                        println!("wrote {} manual pages to {}", written.len(), dir.display());
                    }
                }
            }
        }
        Command::Lock { check, .. } => {
            if *check {
                let drift = wasmprov_host::lock::check(&cli.plugin_dir)?;
                if json {
                    println!("{}", serde_json::json!({ "drift": drift }));
                } else {
                    for d in &drift {
                        println!("{d}");
                    }
                }
                if let Some(first) = drift.first() {
                    return Err(Reported(format!(
                        "{} difference(s) from {} or a manifest's pin; first: {first}; `wasmprov lock --update` accepts the components as they are",
                        drift.len(),
                        wasmprov_host::lock::LOCK_FILE
                    ))
                    .into());
                }
                if !json {
                    println!("every component matches {}", wasmprov_host::lock::LOCK_FILE);
                }
            } else {
                let updated = wasmprov_host::lock::update_all(&cli.plugin_dir)?;
                if json {
                    let mut value = serde_json::to_value(&updated.lock)?;
                    value["repinned"] = updated
                        .repinned
                        .iter()
                        .map(|(_, file)| file.as_str())
                        .collect();
                    println!("{value}");
                } else {
                    for (name, e) in &updated.lock.plugins {
                        println!("locked {name} {} {}", e.component, e.sha256);
                    }
                    for (name, file) in &updated.repinned {
                        println!("pinned {name} in {file} to the same digest");
                    }
                }
            }
        }
    }
    Ok(())
}

/// `wasmprov bundle`: writes the plugins asked for (hetzner when none
/// is named), then says what each needs before it can reach its cloud,
/// and which were left out.
fn bundle(
    out: &std::path::Path,
    only: &[String],
    all: bool,
    hetzner_endpoint: Option<&str>,
    json: bool,
) -> Result<()> {
    let names: Vec<&str> = if all {
        bundled::NAMES.to_vec()
    } else if only.is_empty() {
        bundled::DEFAULT.to_vec()
    } else {
        only.iter().map(String::as_str).collect()
    };
    if hetzner_endpoint.is_some() && !names.contains(&"hetzner") {
        return Err(exit::Usage(
            "--hetzner-endpoint configures the hetzner plugin, which this bundle does not write (add it to --only)"
                .into(),
        )
        .into());
    }
    let written = bundled::write(out, &names, hetzner_endpoint)?;
    let left_out: Vec<&str> = bundled::NAMES
        .into_iter()
        .filter(|n| !written.iter().any(|w| w == n))
        .collect();
    if json {
        let needs: serde_json::Map<String, serde_json::Value> = written
            .iter()
            .map(|name| {
                let list = bundled::needs(name)
                    .iter()
                    .map(|n| serde_json::json!({ "need": n.to_string(), "met": n.met() }))
                    .collect();
                (name.clone(), serde_json::Value::Array(list))
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({ "dir": out, "plugins": written, "needs": needs, "not_written": left_out })
        );
        return Ok(());
    }
    println!("wrote {} to {}", written.join(", "), out.display());
    for name in &written {
        let needs: Vec<String> = bundled::needs(name)
            .iter()
            .map(|n| match n {
                bundled::Need::Env(_) if n.met() => format!("{n} (set)"),
                bundled::Need::Env(_) => format!("{n} (unset)"),
                bundled::Need::Program(_) if n.met() => n.to_string(),
                bundled::Need::Program(_) => format!("{n} (missing)"),
                bundled::Need::Config(..) => format!("{n} of {name}.toml"),
            })
            .collect();
        println!("  {name} needs {}", needs.join(", "));
    }
    if !left_out.is_empty() {
        println!(
            "not written: {} (name them with --only, or --all)",
            left_out.join(", ")
        );
    }
    Ok(())
}

/// Writes `bytes` to stdout; a reader that stopped reading (`| head`) is
/// not an error.
fn write_out(bytes: &[u8], what: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.with_context(|| format!("writing {what}")),
    }
}

/// The state directory: `--state-dir`, else `./wasmprov-state`.
fn state_dir(cli: &Cli) -> PathBuf {
    cli.state_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("wasmprov-state"))
}

fn new_request_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("cli-{nanos:x}-{}", std::process::id())
}

/// Output into a pipe whose reader has gone (`wasmprov describe hetzner |
/// head -1`) ends the command quietly with status 0, as `man` and
/// `completions` do. Rust's `println!` panics on a closed pipe (the runtime
/// ignores SIGPIPE, so that a peer that goes away is an error on a socket
/// or a program's stdin rather than the death of the process, which must
/// stay so); this hook turns exactly that panic into the exit, and leaves
/// every other panic to the default hook.
fn closed_pipe_ends_quietly() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        let printing = message.starts_with("failed printing to stdout")
            || message.starts_with("failed printing to stderr");
        if printing && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

#[tokio::main]
async fn main() -> ExitCode {
    closed_pipe_ends_quietly();
    // Usage errors exit 2 (clap's code, `exit::USAGE`), --help and
    // --version 0.
    let cli = Cli::parse();
    let log_format = cli.log_format;
    init_logging(&cli);
    let json = cli.json;
    let daemon = matches!(cli.command, Command::Serve(_));
    let code = match run(cli).await {
        Ok(()) => exit::SUCCESS,
        Err(e) => {
            let failure = exit::classify(&e);
            if json && e.downcast_ref::<Reported>().is_none() {
                println!("{}", exit::json_error(&e, &failure));
            }
            // One line, whatever a plugin put in its message.
            let line = output::line(&format!("{e:#}").replace('\n', " "));
            match log_format {
                LogFormat::Text => eprintln!("error: {line}"),
                // A log collector reading stderr sees only JSON lines.
                LogFormat::Json => tracing::error!(
                    target: "wasmprov",
                    kind = failure.kind,
                    retryable = failure.retryable,
                    retry_after_ms = failure.retry_after_ms,
                    exit_code = failure.code,
                    "{line}"
                ),
            }
            failure.code
        }
    };
    if daemon {
        // Shutdown is never held up by work on blocking threads (a reload
        // pass stuck on a file, say): the runtime would wait for it on drop.
        use std::io::Write;
        let _ = std::io::stdout().flush();
        std::process::exit(i32::from(code));
    }
    ExitCode::from(code)
}

/// Log records go to stderr, as text or JSON (`--log-format`), filtered
/// by `WASMPROV_LOG`; colour only on a terminal and without `NO_COLOR`.
fn init_logging(cli: &Cli) {
    // A daemon reports what it does (reloads, reconciles) by default; a
    // one-shot command only its errors.
    let default = if matches!(cli.command, Command::Serve(_)) {
        "error,wasmprov=info,wasmprov_host=info"
    } else {
        "error"
    };
    let mut filter = std::env::var("WASMPROV_LOG").unwrap_or_else(|_| default.into());
    // The runtime's own debug output echoes raw guest I/O (secrets
    // included), so it stays at info unless the operator names those
    // targets explicitly.
    if !filter.contains("wasmtime") {
        filter.push_str(
            ",wasmtime=info,wasmtime_wasi=info,wasmtime_wasi_io=info,wasmtime_wasi_http=info",
        );
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => builder.with_ansi(output::colour(&std::io::stderr())).init(),
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_bytes("4GiB").unwrap(), 4 << 30);
        assert_eq!(parse_bytes("4G").unwrap(), 4 << 30);
        assert_eq!(parse_bytes("512MiB").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_bytes("1024").unwrap(), 1024);
        assert!(parse_bytes("lots").is_err());
        assert!(parse_bytes("4 parsecs").is_err());
    }

    #[test]
    fn labels_parse() {
        assert_eq!(parse_label("a=b=c").unwrap(), ("a".into(), "b=c".into()));
        assert!(parse_label("nokey").is_err());
        assert!(parse_label("=v").is_err());
    }

    #[test]
    fn cli_definition_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn errors_keep_their_kind() {
        let e = anyhow::anyhow!(CallFailed(ProvisionerError::NotFound("x".into())));
        assert!(e.downcast_ref::<CallFailed>().is_some());
        assert_eq!(e.to_string(), "not found: x (not_found)");
    }
}
