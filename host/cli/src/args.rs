//! The command line: every command, flag and argument, and how each value
//! is parsed (`clap`'s derive). What a command does is in `main.rs` and the
//! modules it calls.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};
use wasmprov_api::{Arch, BootData, CapacityType, NodeShape};

use crate::exit::CallFailed;
use crate::{bundled, help, install, scaffold};

/// Run cloud provisioner plugins (WebAssembly components) under a deny-by-default sandbox.
#[derive(Debug, Parser)]
#[command(name = "wasmprov", version, about, after_help = help::TOP)]
pub(crate) struct Cli {
    /// Directory holding NAME.wasm + NAME.toml plugins.
    #[arg(
        long,
        global = true,
        default_value = "./plugins.d",
        env = "WASMPROV_PLUGIN_DIR",
        help_heading = help::GLOBAL
    )]
    pub(crate) plugin_dir: PathBuf,
    /// Owner id every created node is tagged with [default: wasmprov-<hostname>].
    #[arg(long, global = true, env = "WASMPROV_OWNER", value_parser = parse_owner_id,
          help_heading = help::GLOBAL)]
    pub(crate) owner: Option<String>,
    /// Print JSON instead of tables (errors too: {"error": {...}} on stdout).
    #[arg(long, global = true, help_heading = help::GLOBAL)]
    pub(crate) json: bool,
    /// Do not use the on-disk compile cache.
    #[arg(long, global = true, help_heading = help::GLOBAL)]
    pub(crate) no_cache: bool,
    /// Price hints one plugin instance may answer before it is replaced
    /// (1: a fresh instance for every call). Calls that can do I/O always
    /// get a fresh instance.
    #[arg(long, global = true, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..), help_heading = help::GLOBAL)]
    pub(crate) price_hint_reuse: u32,
    /// Directory of the intent journal (`scale`, `reconcile`; `provision` and
    /// `terminate` journal too when it is given).
    #[arg(long, global = true, env = "WASMPROV_STATE_DIR", help_heading = help::GLOBAL)]
    pub(crate) state_dir: Option<PathBuf>,
    /// How log records on stderr look: text for people, json (one object
    /// per line) for collectors. WASMPROV_LOG sets what is logged; NO_COLOR
    /// (or a stderr that is not a terminal) turns colours off.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text,
          env = "WASMPROV_LOG_FORMAT", help_heading = help::GLOBAL)]
    pub(crate) log_format: LogFormat,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// The form of log records (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    /// One line per record, for people.
    Text,
    /// One JSON object per line (tracing-subscriber's JSON format).
    Json,
}

/// `wasmprov address ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum AddressAction {
    /// Put a stable address on a node (moving it from any other node): a new one, or
    /// --address.
    #[command(after_help = help::ADDRESS)]
    Assign {
        /// Plugin name.
        plugin: String,
        /// The node's provider id.
        id: String,
        /// Which kind of address.
        #[arg(long, value_parser = parse_address_kind)]
        kind: wasmprov_api::AddressKind,
        /// The address to move to the node (an IP, or the cloud's id of it); none takes a
        /// new one.
        #[arg(long, value_parser = parse_non_empty)]
        address: Option<String>,
    },
    /// Take an address off a node; it stays the account's.
    #[command(after_help = help::ADDRESS)]
    Release {
        /// Plugin name.
        plugin: String,
        /// The node's provider id.
        id: String,
        /// The address (an IP, or the cloud's id of it).
        #[arg(value_parser = parse_non_empty)]
        address: String,
    },
}

/// `wasmprov target ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum TargetAction {
    /// Add a node to a target group (again is no change).
    #[command(after_help = help::TARGET)]
    Register {
        /// Plugin name.
        plugin: String,
        /// The cloud's id of the target group or load balancer.
        group: String,
        /// The node's provider id.
        id: String,
        /// The port traffic goes to, when the group takes one per target.
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
        port: Option<u16>,
    },
    /// Take a node out of a target group.
    #[command(after_help = help::TARGET)]
    Deregister {
        /// Plugin name.
        plugin: String,
        /// The cloud's id of the target group or load balancer.
        group: String,
        /// The node's provider id.
        id: String,
        /// The port it was registered with, when the group takes one per target.
        #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
        port: Option<u16>,
    },
    /// Every target of a group.
    #[command(after_help = help::TARGET)]
    List {
        /// Plugin name.
        plugin: String,
        /// The cloud's id of the target group or load balancer.
        group: String,
    },
}

fn parse_address_kind(s: &str) -> Result<wasmprov_api::AddressKind, String> {
    s.parse()
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
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
        /// The cloud's id of the subnet (network, VPC) the node goes in; a plugin that
        /// cannot place it there refuses (unsupported), never places it elsewhere.
        #[arg(long, value_name = "ID", value_parser = parse_non_empty)]
        subnet: Option<String>,
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
    /// Replace the labels of a node of this owner (its ownership and request labels stay;
    /// none given removes the others).
    #[command(after_help = help::LABEL)]
    Label {
        /// Plugin name.
        plugin: String,
        /// The node's provider id.
        id: String,
        /// The labels it should have, as key=value.
        #[arg(value_parser = parse_label)]
        labels: Vec<(String, String)>,
    },
    /// Put a stable address on a node, or take it off (the plugin's networking).
    #[command(after_help = help::ADDRESS)]
    Address {
        #[command(subcommand)]
        action: AddressAction,
    },
    /// Load balancer membership: register, deregister or list a target group's nodes
    /// (the plugin's networking).
    #[command(after_help = help::TARGET)]
    Target {
        #[command(subcommand)]
        action: TargetAction,
    },
    /// How many addresses a subnet has free (the plugin's networking).
    #[command(after_help = help::SUBNET)]
    Subnet {
        /// Plugin name.
        plugin: String,
        /// The cloud's id of the subnet.
        #[arg(value_parser = parse_non_empty)]
        subnet: String,
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
        /// Group name (part of each member's request id) [with --group-file: the file's].
        #[arg(required_unless_present = "group_file", conflicts_with = "group_file")]
        group: Option<String>,
        /// Members wanted (brought within --min..--max).
        #[arg(long)]
        desired: u32,
        /// The group as a JSON file, in Alien's form (groupId, instanceType, profile,
        /// minSize, maxSize) or wasmprov's own (name, shape, min, max), told apart by
        /// its groupId; instead of GROUP, the shape options, --min and --max.
        #[arg(long, value_name = "FILE", conflicts_with = "ShapeArgs")]
        group_file: Option<PathBuf>,
        #[command(flatten)]
        shape: Option<ShapeArgs>,
        /// Fewest members.
        #[arg(long, default_value_t = 0, conflicts_with = "group_file")]
        min: u32,
        /// Most members.
        #[arg(long, default_value_t = 100, conflicts_with = "group_file")]
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
        #[command(flatten)]
        fallback: FallbackArgs,
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
        /// What a Rust plugin starts as: `refcloud`, the reference cloud's plugin and
        /// fake; `rest`, a REST cloud's plugin on the SDK's REST layer (tag presets,
        /// page counts, error pointers, a const type table) and its fake, to fill in.
        #[arg(long, value_enum, default_value_t = scaffold::RustTemplate::Refcloud)]
        template: scaffold::RustTemplate,
    },
    /// Serve the plugins over gRPC (wasmprov.v1.Provisioner, bearer-token auth) and
    /// their metrics over HTTP (GET /metrics), hot-reloading the plugin directory.
    #[command(after_help = help::SERVE)]
    Serve(ServeArgs),
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

/// Options of `wasmprov serve`.
#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// Address of the gRPC listener.
    #[arg(long, default_value = "127.0.0.1:50151")]
    pub(crate) listen: SocketAddr,
    /// Allow listeners on addresses other than loopback (put TLS in front: the token is sent in clear).
    #[arg(long)]
    pub(crate) allow_remote: bool,
    /// Address of the HTTP listener serving GET /metrics.
    #[arg(long, default_value = "127.0.0.1:9151")]
    pub(crate) metrics_listen: SocketAddr,
    /// Do not serve /metrics.
    #[arg(long)]
    pub(crate) no_metrics: bool,
    /// File holding the bearer token clients must send [default: $WASMPROV_SERVE_TOKEN, or a generated one].
    #[arg(long)]
    pub(crate) token_file: Option<PathBuf>,
    /// Where a generated token is written (mode 0600).
    #[arg(long, default_value = "./wasmprov-serve.token")]
    pub(crate) token_out: PathBuf,
    /// Seconds between periodic reconciles of the journal (from the end of one to the start of the next); 0 turns them off.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub(crate) reconcile_every: u64,
    /// Let the periodic reconcile terminate leaked nodes (owned, wanted by no intent) instead of only logging them.
    #[arg(long)]
    pub(crate) terminate_leaks: bool,
    /// Seconds between lease sweeps (terminating journaled nodes whose lease ran out; no cloud listing needed); 0 turns them off.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub(crate) lease_every: u64,
    /// Seconds a node may be missing from its cloud's list before a reconcile believes it (clouds list new nodes late); 0 believes at once.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    pub(crate) grace: u64,
    /// Seconds a start or a Reload waits for plugins to compile; what is still compiling
    /// then loads as soon as its compile ends (reported in Reload's `compiling`).
    #[arg(long, value_name = "SECS", default_value_t = 2)]
    pub(crate) compile_wait: u64,
    /// The largest `max` a capacity group may have; Scale refuses a larger one.
    #[arg(long, value_name = "N", default_value_t = wasmprov_fleet::DEFAULT_MAX_GROUP_SIZE)]
    pub(crate) max_group_size: u32,
    /// Seconds a plugin's catalogue (offerings) is used by Rank and Scale before it is read
    /// again (an older one answers at once while a new one is read).
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    pub(crate) catalogue_ttl: u64,
    /// Seconds Rank and Scale wait for a plugin's catalogue read; past it the plugin is
    /// ranked by its price hint, and the read goes on for the next time.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub(crate) catalogue_deadline: u64,
    /// Seconds calls in flight may run on after SIGTERM or SIGINT before the daemon exits
    /// anyway [default: the longest call deadline of the loaded plugins, plus 5].
    #[arg(long, value_name = "SECS")]
    pub(crate) drain_timeout: Option<u64>,
    /// Seconds a plugin's instance type (or zone, or whole plugin, as the error says) that
    /// ran out of capacity is skipped by Scale and Rank; 0 never skips.
    #[arg(long, value_name = "SECS", default_value_t = 180)]
    pub(crate) unavailable_for: u64,
    /// Do not watch the plugin directory: plugins reload only on SIGHUP or the Reload RPC.
    #[arg(long)]
    pub(crate) no_watch: bool,
    #[command(flatten)]
    pub(crate) fallback: FallbackArgs,
    #[command(flatten)]
    pub(crate) autoscaler: AutoscalerArgs,
}

/// `serve`'s cluster-autoscaler listener (docs/AUTOSCALER.md).
#[derive(Debug, Args)]
pub(crate) struct AutoscalerArgs {
    /// Also serve cluster-autoscaler's externalgrpc CloudProvider service on this address.
    #[arg(long, value_name = "ADDR", requires = "node_groups")]
    pub(crate) autoscaler_listen: Option<SocketAddr>,
    /// The node groups the autoscaler may scale (node-groups.toml).
    #[arg(long, value_name = "FILE", requires = "autoscaler_listen")]
    pub(crate) node_groups: Option<PathBuf>,
    /// TLS certificate (PEM) of the autoscaler listener; with --autoscaler-tls-key.
    #[arg(long, value_name = "FILE", requires_all = ["autoscaler_tls_key", "autoscaler_listen"])]
    pub(crate) autoscaler_tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) of the autoscaler listener.
    #[arg(long, value_name = "FILE", requires = "autoscaler_tls_cert")]
    pub(crate) autoscaler_tls_key: Option<PathBuf>,
    /// CA (PEM) the autoscaler's client certificate must be signed by (mutual TLS).
    #[arg(long, value_name = "FILE", requires = "autoscaler_tls_cert")]
    pub(crate) autoscaler_client_ca: Option<PathBuf>,
}

/// How far a scale falls back when offerings run out of capacity.
#[derive(Debug, Clone, Copy, Args)]
pub(crate) struct FallbackArgs {
    /// Capacity failures a scale pass takes before it stops trying further offerings.
    #[arg(long, value_name = "N", default_value_t = wasmprov_fleet::DEFAULT_MAX_CAPACITY_FAILURES,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_capacity_failures: u32,
    /// The dearest offering a scale may pick, as a multiple of the cheapest fitting offering's price.
    #[arg(long, value_name = "RATIO", default_value_t = wasmprov_fleet::DEFAULT_PRICE_CEILING,
          value_parser = parse_ceiling)]
    pub(crate) price_ceiling: f64,
}

/// A price ceiling: a finite ratio of at least 1.
fn parse_ceiling(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a number (a ratio such as 2 or 1.5)"))?;
    if v.is_finite() && v >= 1.0 {
        Ok(v)
    } else {
        Err(format!(
            "{s} is not a ratio of at least 1 to the cheapest fitting offering"
        ))
    }
}

#[derive(Debug, Subcommand)]
pub(crate) enum FakeCloud {
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
pub(crate) struct ShapeArgs {
    /// vCPUs.
    #[arg(long)]
    pub(crate) cpu: f64,
    /// Memory: bytes, or with a unit (512MiB, 4GiB, 8G).
    #[arg(long, value_parser = parse_bytes)]
    pub(crate) memory: u64,
    /// GPUs.
    #[arg(long, default_value_t = 0)]
    pub(crate) gpu: u32,
    /// GPU vendor (nvidia, amd).
    #[arg(long)]
    pub(crate) gpu_vendor: Option<String>,
    /// Spot capacity instead of on-demand.
    #[arg(long)]
    pub(crate) spot: bool,
    /// Zone or location.
    #[arg(long)]
    pub(crate) zone: Option<String>,
    /// An explicit instance type (wins over cpu/memory/gpu matching).
    #[arg(long)]
    pub(crate) instance_type: Option<String>,
    /// CPU architecture the node's images run on: x86_64 (amd64) or arm64
    /// (aarch64) [default: any].
    #[arg(long)]
    pub(crate) arch: Option<Arch>,
    /// GPU model (nvidia-a100, nvidia-t4, amd-mi300x), compared ignoring case;
    /// needs --gpu.
    #[arg(long, requires = "gpu")]
    pub(crate) gpu_model: Option<String>,
    /// Disk at least: bytes, or with a unit (100GiB).
    #[arg(long, value_parser = parse_bytes)]
    pub(crate) disk: Option<u64>,
}

/// What a node boots with.
#[derive(Debug, Args)]
pub(crate) struct BootArgs {
    /// The image to boot (an AMI id, an image name) instead of the plugin's configured one.
    #[arg(long)]
    pub(crate) image: Option<String>,
    /// A file of user data for the first boot, such as a #cloud-config.
    #[arg(long, value_name = "FILE")]
    pub(crate) user_data: Option<PathBuf>,
    /// An SSH public key to authorize: the key itself, or a file holding one (repeatable).
    #[arg(long = "ssh-key", value_name = "KEY|FILE")]
    pub(crate) ssh_keys: Vec<String>,
}

impl BootArgs {
    pub(crate) fn boot(&self) -> anyhow::Result<BootData> {
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
    pub(crate) fn shape(&self, labels: &[(String, String)]) -> NodeShape {
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
pub(crate) fn parse_request_id(s: &str) -> Result<String, String> {
    wasmprov_api::ids::id_problem("request id", s).map_or_else(|| Ok(s.to_string()), Err)
}

/// An owner id as `wasmprov_api::ids` defines it.
pub(crate) fn parse_owner_id(s: &str) -> Result<String, String> {
    wasmprov_api::ids::id_problem("owner id", s).map_or_else(|| Ok(s.to_string()), Err)
}

pub(crate) fn parse_plugin_name(s: &str) -> Result<String, String> {
    wasmprov_host::policy::manifest::plugin_name_problem(s).map_or_else(|| Ok(s.to_string()), Err)
}

pub(crate) fn parse_label(s: &str) -> Result<(String, String), String> {
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

/// The labels given on the command line as a map; a key given twice is a
/// usage error (not last-wins: which value was meant is not for us to pick).
pub(crate) fn unique_labels(labels: &[(String, String)]) -> Result<wasmprov_api::Labels, String> {
    let mut out = wasmprov_api::Labels::new();
    for (k, v) in labels {
        if out.insert(k.clone(), v.clone()).is_some() {
            return Err(format!("label {k:?} is given twice"));
        }
    }
    Ok(out)
}

/// A name a call about a node or the cloud's network takes (a subnet id,
/// an address, a target group): the rule every caller's name meets
/// (`wasmprov_api::network::name_fault`), as a usage error.
pub(crate) fn parse_non_empty(s: &str) -> Result<String, String> {
    match wasmprov_api::network::name_fault("value", s) {
        Some(why) => Err(why),
        None => Ok(s.to_string()),
    }
}

/// Parses `4GiB`, `512MiB`, `8G`, `1024`: binary units, as memory is sized.
pub(crate) fn parse_bytes(s: &str) -> Result<u64, String> {
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
}
