//! Kubernetes cluster-autoscaler's `externalgrpc` cloud provider over
//! wasmprov capacity groups: every wasmprov plugin, in any language, becomes
//! a cluster-autoscaler cloud provider (`docs/AUTOSCALER.md`).
//!
//! - [`config`]: `node-groups.toml`, the groups and what their nodes carry.
//! - [`provider_id`]: node ids in the `wasmprov://PLUGIN/PROVIDER-ID` form,
//!   written and read in one place.
//! - `scaler.rs`: targets and members in the journal, growth through the
//!   fleet, deletes of exactly the named members.
//! - [`Service`] (`service.rs`): the gRPC service; `status.rs`: errors as
//!   the autoscaler's client expects them.
//! - [`k8s`], [`template`], [`pricing`]: the Kubernetes `v1.Node`/`v1.Pod`
//!   subset, the template node of a group, prices from offerings.

pub mod config;
pub mod k8s;
pub mod pricing;
pub mod provider_id;
mod scaler;
mod service;
mod status;
pub mod template;

pub use config::{ConfigError, NodeGroup, NodeGroups};
pub use provider_id::NodeRef;
pub use scaler::{Instance, MemberError, MemberState, OTHER_ERROR, OUT_OF_RESOURCES};
pub use service::{DEFAULT_INCREASE_WAIT, DEFAULT_RETRY_EVERY, FILE_DESCRIPTOR_SET, Service};
pub use status::AutoscalerError;

/// The `clusterautoscaler.cloudprovider.v1.externalgrpc` package, generated
/// from `proto/externalgrpc.proto`: messages, the `CloudProvider` server and
/// a client (which brings no transport of its own: hand it a channel).
#[allow(
    missing_docs,
    missing_debug_implementations,
    clippy::all,
    clippy::pedantic,
    reason = "generated code"
)]
pub mod proto {
    include!(concat!(
        env!("OUT_DIR"),
        "/clusterautoscaler.cloudprovider.v1.externalgrpc.rs"
    ));
}
