//! ZLayer's provisioner contract, served by wasmprov.
//!
//! ZLayer's autoscaler programs against the `zlayer_provisioner` crate: a
//! [`CloudProvisioner`] trait and a handful of value types. This crate
//! declares that trait and those types again, name for name, field for field
//! and derive for derive (so their JSON is the same too), and adds
//! [`WasmprovProvisioner`], which serves any [`wasmprov_api::CloudProvisioner`]
//! (a wasm plugin loaded by `wasmprov-host`, or a native backend) through
//! them. Code written against `zlayer_provisioner` compiles against this
//! crate once its `use` lines name `wasmprov_compat_zlayer` instead.
//!
//! - [`contract`]: the trait, the value types, the error enum and the
//!   `Result` alias, re-exported here at the crate root;
//! - [`convert`]: every conversion between the two vocabularies, with the
//!   table of how wasmprov's errors land on ZLayer's five;
//! - [`adapter`]: [`WasmprovProvisioner`] and what it cannot carry over.
//!
//! What the older contract cannot carry (request ids, instance types, node
//! labels, the finer error kinds) is listed in [`adapter`] and [`convert`].
//!
//! ```
//! use std::sync::Arc;
//!
//! use wasmprov_compat_zlayer::{CapacityType, CloudProvisioner, NodeShape, WasmprovProvisioner};
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
//! // What a ZLayer autoscaler holds: a `dyn CloudProvisioner` of its own contract.
//! let backend: Box<dyn CloudProvisioner> = Box::new(WasmprovProvisioner::new(Arc::new(Empty)));
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
pub mod contract;
pub mod convert;

pub use adapter::WasmprovProvisioner;
pub use contract::{
    CapacityType, CloudProvisioner, JoinState, NodeHandle, NodeShape, PriceHint, ProviderNodeId,
    ProvisionerError, Result,
};
