//! Kubernetes cluster-autoscaler's `externalgrpc` cloud provider over
//! wasmprov capacity groups.
//!
//! Filled in by the following commits: the generated protocol, the
//! Kubernetes `v1.Node`/`v1.Pod` subset ([`k8s`]), the template node
//! ([`template`]) and prices ([`pricing`]).

pub mod k8s;
pub mod pricing;
pub mod template;

/// The `clusterautoscaler.cloudprovider.v1.externalgrpc` package, generated
/// from `proto/externalgrpc.proto`: messages, the `CloudProvider` server and
/// a client (which brings no transport of its own: hand it a channel).
#[allow(missing_docs, clippy::all, reason = "generated code")]
pub mod proto {
    include!(concat!(
        env!("OUT_DIR"),
        "/clusterautoscaler.cloudprovider.v1.externalgrpc.rs"
    ));
}
