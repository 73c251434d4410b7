//! Orchestration over any set of provisioners, kept apart from the sandbox
//! runtime: it works over [`Backends`] — the wasm plugins of a
//! `wasmprov_host::Host`, a map of native `Arc<dyn CloudProvisioner>`, or a
//! [`BackendSet`] of both — and pulls in no WebAssembly runtime.
//!
//! - [`Fleet`]: every provision is journaled ([`journal`]) before a cloud
//!   is asked, calls on one request id run one at a time, and
//!   [`Fleet::reconcile`] settles what a crash or a lost answer left behind
//!   (`reconcile.rs`): interrupted provisions confirmed or resumed, failed
//!   ones confirmed or forgotten, terminations finished, expired leases
//!   ([`ProvisionOptions::lease`]) terminated, leaks reported or terminated
//!   ([`LeakPolicy`]). [`Fleet::expire_leases`] is the lease step alone.
//!   What was terminated or forgotten, when and why, is kept in the
//!   journal's history ([`Fleet::history`]).
//! - [`rank`]: every backend's price for a shape, cheapest first.
//! - [`CapacityGroup`]: like nodes between a minimum and a maximum, scaled
//!   by [`Fleet::scale`] on the cheapest backend with room; [`alien`] reads
//!   one from Alien's JSON form.
//!
//! ```no_run
//! # async fn demo(host: wasmprov_host::Host, native: std::sync::Arc<dyn wasmprov_api::CloudProvisioner>) -> anyhow::Result<()> {
//! use std::sync::Arc;
//! use wasmprov_fleet::{BackendSet, CapacityGroup, Fleet};
//! use wasmprov_api::NodeShape;
//!
//! // Wasm plugins and an in-process backend side by side.
//! let backends = BackendSet::new().with_source(Arc::new(host)).with("in-house", native);
//! let fleet = Fleet::open(Arc::new(backends), "./state/journal.redb")?;
//! let group = CapacityGroup::new("web", NodeShape::new(2.0, 4 << 30), 1, 10);
//! println!("{}", fleet.scale(&group, 3).await?);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod adopt;
pub mod alien;
mod backends;
mod drain;
mod evidence;
mod fleet;
mod group;
pub mod journal;
mod locks;
mod rank;
mod reconcile;
mod report;
mod unavailable;

pub use backends::BackendSet;
pub use drain::DrainReport;
pub use fleet::{
    DEFAULT_MAX_CAPACITY_FAILURES, DEFAULT_MAX_GROUP_SIZE, DEFAULT_PRICE_CEILING, Fleet,
    FleetError, GROUP_LABEL, ProvisionOptions, REQUEST_LABEL, made_nothing,
};
pub use group::{CapacityGroup, Member, ScaleReport};
pub use rank::{
    Catalogues, DEFAULT_CATALOGUE_DEADLINE, DEFAULT_CATALOGUE_TTL, NoOffer, Offer, Ranking,
    Unpriced, rank, rank_offerings, rank_offerings_among,
};
pub use report::{
    DEFAULT_GRACE, Leak, LeakPolicy, Orphan, OrphanKind, ReconcilePolicy, ReconcileReport,
};
pub use unavailable::{DEFAULT_UNAVAILABLE_FOR, Unavailable};
pub use wasmprov_api::Backends;

/// A fresh random request id (`auto-` and 32 hex digits), for provisions
/// that carry none.
#[must_use]
pub fn random_request_id() -> String {
    format!("auto-{:032x}", rand::random::<u128>())
}

/// Durations written as seconds.
pub(crate) mod secs {
    use std::time::Duration;

    use serde::Serializer;

    pub(crate) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}
