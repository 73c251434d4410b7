//! Runs wasmprov provisioner plugins, WebAssembly components, under a
//! sandbox that grants nothing by default, and gives an orchestrator what it
//! needs around them.
//!
//! # Loading plugins
//!
//! A plugin directory holds `NAME.wasm` + `NAME.toml` pairs (see the
//! manifest format in `wasmprov-policy`). [`HostBuilder`] sets the owner id
//! every node is tagged with, the compile cache, engine limits, where
//! secrets come from and the HTTP/exec policy hooks ([`intercept`]); the
//! [`Host`] it builds is a registry of plugins by name, each an
//! `Arc<dyn CloudProvisioner>`:
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! use wasmprov_host::HostBuilder;
//! use wasmprov_host::api::NodeShape;
//!
//! let host = HostBuilder::new("./plugins.d").owner_id("scaler-eu-1").build().await?;
//! for name in host.plugin_names() {
//!     let plugin = host.plugin(&name).expect("just listed");
//!     println!("{name}: {:?}", plugin.price_hint(&NodeShape::new(2.0, 4 << 30)));
//! }
//! # Ok(()) }
//! ```
//!
//! # Hot reload
//!
//! [`Host::reload`] swaps in what changed in the directory, all at once;
//! [`Host::watch`] does it whenever the directory changes. A call in flight
//! finishes on the version it started with; a broken new version leaves the
//! old one serving ([`ReloadReport::kept_old`]).
//!
//! ```no_run
//! # async fn demo(host: wasmprov_host::Host) -> anyhow::Result<()> {
//! let host = std::sync::Arc::new(host);
//! let _watcher = host.watch(wasmprov_host::DEFAULT_DEBOUNCE)?;
//! let mut reloads = host.subscribe_reloads();
//! while let Ok(report) = reloads.recv().await {
//!     println!("plugins reloaded: {report}");
//! }
//! # Ok(()) }
//! ```
//!
//! # Orchestration
//!
//! The host implements `wasmprov_api::Backends`: the intent journal,
//! reconcile, leases, capacity groups and price ranking work over it (and
//! over native backends) in `wasmprov-fleet`; nothing of that lives here.
//!
//! # Metrics
//!
//! [`Host::metrics`] counts calls, latency, errors by variant, denials,
//! traps and instances per plugin, in the Prometheus text format.
//!
//! # Where things are decided
//!
//! HTTP: `http.rs` (the one gate every request passes: wasi-http's
//! send-request hook, and the contract's one-call `http.send`, whose
//! request is built in `http_call.rs`); exec: `exec.rs`; guest
//! logging: `log.rs`; which imports a plugin can reach at all: `linker.rs`;
//! per-call limits and store: `state.rs`, `plugin.rs`; calls admitted per
//! plugin: `admission.rs`; compiling, off the reload path and within a
//! budget: `compile.rs`; reading the plugin directory's files: `files.rs`;
//! writing them: `plugin_dir.rs`; checking a plugin's answers: `answers.rs`.
//!
//! # Layers
//!
//! No file imports one that imports it back (a test reads every crate's
//! modules to keep it so). From the bottom: the embedder's vocabulary
//! (`intercept.rs`, `metrics.rs`) and the call path's (`hooks.rs`: the
//! embedder's hooks, the kind of a call); the gates (`http.rs`, `exec.rs`),
//! which reach the embedder's hooks but not the call that uses them; what a
//! plugin's calls share (`shared.rs`: manifest, config, gates, and the
//! secrets, resolved per call by `secrets.rs` and its providers);
//! one call's store (`state.rs`, with the hooks wasi-http and the
//! contract's `exec` call into); the contract versions over it
//! (`contract/`) and the linker (`linker.rs`); one plugin (`plugin.rs`);
//! the set of plugins (`host.rs`) and its watcher (`watch.rs`).
//! The policy itself (grant patterns, manifest) is in `wasmprov-policy`,
//! which has no WebAssembly runtime in it.

#![warn(missing_docs)]

mod admission;
mod answers;
mod bindings;
mod compile;
pub mod contract;
mod engine;
mod error;
mod exec;
mod files;
mod hooks;
mod host;
mod http;
mod http_call;
pub mod intercept;
mod keyed_lock;
mod linker;
pub mod lock;
mod log;
pub mod metrics;
mod plugin;
pub mod plugin_dir;
mod secrets;
mod shared;
mod state;
mod watch;

pub use compile::{COMPILE_SLOTS, DEFAULT_COMPILE_BUDGET};
pub use engine::{EPOCH_TICK, EngineSettings};
pub use error::LoadError;
pub use files::{DEFAULT_MAX_COMPONENT_BYTES, MAX_TEXT_BYTES};
pub use host::{Host, HostBuilder, RELOAD_LIMIT, ReloadReport, default_owner_id};
pub use lock::LockMode;
pub use plugin::{CONTRACT_VERSION, LimitsInfo, PluginInfo, WasmPlugin, custom_section};
pub use wasmprov_api as api;
pub use wasmprov_policy as policy;
pub use watch::{DEFAULT_DEBOUNCE, WATCH_COMPILE_WAIT, Watcher};
