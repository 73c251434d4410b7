//! Runs wasmprov provisioner plugins, WebAssembly components, under a
//! sandbox that grants nothing by default.
//!
//! - [`HostBuilder`] / [`Host`]: load a plugin directory, get each plugin as
//!   an `Arc<dyn CloudProvisioner>`;
//! - where HTTP is decided: `http.rs` (the one send-request hook);
//! - where exec is decided: `exec.rs`;
//! - guest logging: `log.rs`; per-call limits and store: `state.rs`, `plugin.rs`.
//!
//! The policy itself (grant patterns, manifest) is in `wasmprov-policy`,
//! which has no WebAssembly runtime in it.

mod bindings;
mod engine;
mod error;
mod exec;
mod host;
mod http;
pub mod intercept;
pub mod lock;
mod log;
mod plugin;
mod rank;
mod state;

pub use engine::{EPOCH_TICK, EngineSettings};
pub use error::LoadError;
pub use host::{Host, HostBuilder, default_owner_id};
pub use lock::LockMode;
pub use plugin::{CONTRACT_VERSION, LimitsInfo, PluginInfo, WasmPlugin};
pub use rank::{NoOffer, Offer, Ranking};
pub use wasmprov_api as api;
pub use wasmprov_policy as policy;
