//! ZLayer's provisioner contract and wasmprov's, both ways, on ZLayer's
//! real crate (`zlayer-provisioner`).
//!
//! - [`WasmprovProvisioner`] implements `zlayer_provisioner::CloudProvisioner`
//!   for any [`wasmprov_api::CloudProvisioner`] (a wasm plugin loaded by
//!   `wasmprov-host`, or a native backend); [`zlayer`] turns an
//!   `Arc<dyn wasmprov_api::CloudProvisioner>` into an
//!   `Arc<dyn zlayer_provisioner::CloudProvisioner>` in one call. Code
//!   written against `zlayer_provisioner` takes it unchanged.
//! - [`ZLayerBackend`] is the other way: any ZLayer provisioner (ZLayer's
//!   own `CloudInitProvisioner` included, re-exported here with the
//!   `cloud-init` feature) as a wasmprov backend, for a fleet beside wasm
//!   plugins: it makes one instance type that a fleet can pin, and its
//!   `describe` answers only the nodes it made for its owner.
//! - [`convert`]: every conversion between the two vocabularies, with the
//!   table of how wasmprov's errors land on ZLayer's five.
//!
//! ZLayer's trait and value types are re-exported at the crate root (and
//! the crate itself as [`zlayer_provisioner`]); the copies this crate
//! declared before ([`contract`]) are deprecated.
//!
//! ```
//! use std::sync::Arc;
//!
//! use zlayer_provisioner::{CapacityType, CloudProvisioner, NodeShape};
//!
//! /// A wasmprov backend that has nothing to offer yet.
//! struct Empty;
//!
//! #[async_trait::async_trait]
//! impl wasmprov_api::CloudProvisioner for Empty {
//!     async fn provision(&self, _: &wasmprov_api::NodeShape) -> wasmprov_api::Result<wasmprov_api::NodeHandle> {
//!         Err(wasmprov_api::ProvisionerError::Quota("0 of 0 nodes left".into()))
//!     }
//!     async fn terminate(&self, id: &wasmprov_api::ProviderNodeId) -> wasmprov_api::Result<()> {
//!         Err(wasmprov_api::ProvisionerError::NotFound(id.clone()))
//!     }
//!     async fn describe(&self) -> wasmprov_api::Result<Vec<wasmprov_api::NodeHandle>> {
//!         Ok(Vec::new())
//!     }
//!     fn capacity_types(&self) -> &[wasmprov_api::CapacityType] {
//!         &[wasmprov_api::CapacityType::Spot]
//!     }
//!     fn price_hint(&self, _: &wasmprov_api::NodeShape) -> Option<wasmprov_api::PriceHint> {
//!         None
//!     }
//!     fn name(&self) -> &str {
//!         "empty"
//!     }
//! }
//!
//! // What a ZLayer autoscaler holds: a `dyn CloudProvisioner` of ZLayer's crate.
//! let backend: Arc<dyn CloudProvisioner> = wasmprov_compat_zlayer::zlayer(Arc::new(Empty));
//! assert_eq!(backend.name(), "empty");
//! assert_eq!(backend.capacity_types(), &[CapacityType::Spot]);
//! assert!(backend.price_hint(&NodeShape::new(2.0, 4 << 30)).is_none());
//!
//! let err = tokio::runtime::Builder::new_current_thread()
//!     .build()
//!     .unwrap()
//!     .block_on(backend.provision(&NodeShape::default()))
//!     .unwrap_err();
//! // No quota in ZLayer's contract: `Other`, with wasmprov's text.
//! assert_eq!(err.to_string(), "quota exceeded: 0 of 0 nodes left");
//! ```

#![warn(missing_docs)]

pub mod adapter;
pub mod backend;
pub mod contract;
pub mod convert;

pub use adapter::{WasmprovProvisioner, zlayer};
pub use backend::ZLayerBackend;
pub use zlayer_provisioner;
pub use zlayer_provisioner::{
    CapacityType, CloudProvisioner, JoinState, NodeHandle, NodeShape, PriceHint, ProviderNodeId,
    ProvisionerError, Result,
};
#[cfg(feature = "cloud-init")]
pub use zlayer_provisioner::{CloudInitConfig, CloudInitProvisioner};
