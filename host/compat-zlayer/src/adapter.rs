//! [`WasmprovProvisioner`]: a wasmprov provisioner behind ZLayer's trait
//! (`zlayer_provisioner::CloudProvisioner`, the real crate's).
//!
//! Each call is forwarded to the wasmprov provisioner and its answer
//! converted ([`convert`](crate::convert)). [`zlayer`](crate::zlayer) is the
//! one-liner from `Arc<dyn wasmprov_api::CloudProvisioner>` to
//! `Arc<dyn zlayer_provisioner::CloudProvisioner>`. Two things the older contract
//! cannot express are lost on the way:
//!
//! - **Request ids.** ZLayer's `provision` takes a shape and nothing else,
//!   so the adapter calls wasmprov's `provision(&shape)`, which makes up a
//!   fresh request id for every call. Provisioning is therefore not
//!   idempotent through this trait: a caller that retries after a lost
//!   answer (a timeout, a crash between the call and recording the node)
//!   may get a second node. wasmprov's ownership tag still marks that node
//!   as this host's, so `describe` lists it and it can be found and
//!   terminated. Callers that can choose request ids use
//!   [`inner`](WasmprovProvisioner::inner) and
//!   `wasmprov_api::CloudProvisioner::provision_request`.
//! - **wasmprov-only fields.** A handle's instance type and labels (among
//!   them the owner and request-id tags), a price's instance type, a
//!   shape's explicit instance type, and the finer error kinds (see the
//!   table in [`convert`](crate::convert)). Again, `inner` reaches them.

use std::sync::Arc;

use zlayer_provisioner as zl;

use crate::convert;

/// Any wasmprov provisioner, served through ZLayer's
/// [`CloudProvisioner`](zl::CloudProvisioner) (the real crate's trait).
///
/// Get one from a wasm plugin (`host.plugin("name")` of `wasmprov-host`)
/// or from a native backend; [`zlayer`](crate::zlayer) does it in one call:
///
/// ```
/// # use std::sync::Arc;
/// fn adapt(plugin: Arc<dyn wasmprov_api::CloudProvisioner>) -> Arc<dyn zlayer_provisioner::CloudProvisioner> {
///     wasmprov_compat_zlayer::zlayer(plugin)
/// }
/// ```
pub struct WasmprovProvisioner {
    inner: Arc<dyn wasmprov_api::CloudProvisioner>,
    /// Converted once: ZLayer's trait returns a borrowed slice.
    capacity_types: Vec<zl::CapacityType>,
    /// The same, as the deprecated copy of ZLayer's type.
    #[allow(
        deprecated,
        reason = "the copied trait is still implemented for one release"
    )]
    legacy_capacity_types: Vec<crate::contract::CapacityType>,
}

impl WasmprovProvisioner {
    /// Serves `inner` through ZLayer's trait. Its capacity types are read
    /// now, once (wasmprov's are fixed for the life of a provisioner; a
    /// reloaded plugin is a new one).
    #[must_use]
    #[allow(
        deprecated,
        reason = "the copied trait is still implemented for one release"
    )]
    pub fn new(inner: Arc<dyn wasmprov_api::CloudProvisioner>) -> Self {
        let capacity_types = inner
            .capacity_types()
            .iter()
            .map(|&c| convert::capacity_to_zlayer(c))
            .collect();
        let legacy_capacity_types = inner
            .capacity_types()
            .iter()
            .map(|&c| crate::contract::CapacityType::from(c))
            .collect();
        Self {
            inner,
            capacity_types,
            legacy_capacity_types,
        }
    }

    /// The wasmprov provisioner itself, for what ZLayer's trait cannot say:
    /// provisioning by request id, instance types, labels, typed errors.
    #[must_use]
    pub fn inner(&self) -> &Arc<dyn wasmprov_api::CloudProvisioner> {
        &self.inner
    }
}

/// `provisioner` as a ZLayer `CloudProvisioner`: what ZLayer code holds.
///
/// ```
/// # use std::sync::Arc;
/// # fn demo(plugin: Arc<dyn wasmprov_api::CloudProvisioner>) {
/// let backend: Arc<dyn zlayer_provisioner::CloudProvisioner> = wasmprov_compat_zlayer::zlayer(plugin);
/// # }
/// ```
#[must_use]
pub fn zlayer(
    provisioner: Arc<dyn wasmprov_api::CloudProvisioner>,
) -> Arc<dyn zl::CloudProvisioner> {
    Arc::new(WasmprovProvisioner::new(provisioner))
}

impl From<Arc<dyn wasmprov_api::CloudProvisioner>> for WasmprovProvisioner {
    fn from(inner: Arc<dyn wasmprov_api::CloudProvisioner>) -> Self {
        Self::new(inner)
    }
}

impl std::fmt::Debug for WasmprovProvisioner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmprovProvisioner")
            .field("name", &self.inner.name())
            .field("capacity_types", &self.capacity_types)
            .finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl zl::CloudProvisioner for WasmprovProvisioner {
    /// Forwards to wasmprov's `provision(&shape)`: a new request id per
    /// call, so a retry may make a second node (see the [module docs](self)).
    async fn provision(&self, shape: &zl::NodeShape) -> zl::Result<zl::NodeHandle> {
        let shape = convert::shape_to_wasmprov(shape);
        self.inner
            .provision(&shape)
            .await
            .map(convert::handle_to_zlayer)
            .map_err(convert::error_to_zlayer)
    }

    async fn terminate(&self, id: &zl::ProviderNodeId) -> zl::Result<()> {
        self.inner
            .terminate(id)
            .await
            .map_err(convert::error_to_zlayer)
    }

    async fn describe(&self) -> zl::Result<Vec<zl::NodeHandle>> {
        let nodes = self
            .inner
            .describe()
            .await
            .map_err(convert::error_to_zlayer)?;
        Ok(nodes.into_iter().map(convert::handle_to_zlayer).collect())
    }

    fn capacity_types(&self) -> &[zl::CapacityType] {
        &self.capacity_types
    }

    fn price_hint(&self, shape: &zl::NodeShape) -> Option<zl::PriceHint> {
        self.inner
            .price_hint(&convert::shape_to_wasmprov(shape))
            .map(convert::price_to_zlayer)
    }

    fn name(&self) -> &str {
        self.inner.name()
    }
}

/// The deprecated copy of ZLayer's trait, served as before for one release.
#[allow(
    deprecated,
    reason = "the copied trait is still implemented for one release"
)]
#[async_trait::async_trait]
impl crate::contract::CloudProvisioner for WasmprovProvisioner {
    async fn provision(
        &self,
        shape: &crate::contract::NodeShape,
    ) -> crate::contract::Result<crate::contract::NodeHandle> {
        let shape = wasmprov_api::NodeShape::from(shape);
        Ok(self.inner.provision(&shape).await?.into())
    }

    async fn terminate(&self, id: &crate::contract::ProviderNodeId) -> crate::contract::Result<()> {
        Ok(self.inner.terminate(id).await?)
    }

    async fn describe(&self) -> crate::contract::Result<Vec<crate::contract::NodeHandle>> {
        let nodes = self.inner.describe().await?;
        Ok(nodes.into_iter().map(Into::into).collect())
    }

    fn capacity_types(&self) -> &[crate::contract::CapacityType] {
        &self.legacy_capacity_types
    }

    fn price_hint(&self, shape: &crate::contract::NodeShape) -> Option<crate::contract::PriceHint> {
        self.inner
            .price_hint(&wasmprov_api::NodeShape::from(shape))
            .map(Into::into)
    }

    fn name(&self) -> &str {
        self.inner.name()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use wasmprov_api::{CapacityScope, PluginFault};

    use super::*;
    use zl::{CapacityType, CloudProvisioner, JoinState, NodeShape, ProvisionerError};

    /// A native wasmprov backend that keeps nodes in memory, records the
    /// shapes it is asked for, and answers with a queued error when one is
    /// set.
    #[derive(Default)]
    struct Double {
        nodes: Mutex<Vec<wasmprov_api::NodeHandle>>,
        shapes: Mutex<Vec<wasmprov_api::NodeShape>>,
        fail_next: Mutex<Option<wasmprov_api::ProvisionerError>>,
    }

    impl Double {
        fn fail_next(&self, err: wasmprov_api::ProvisionerError) {
            *self.fail_next.lock().unwrap() = Some(err);
        }

        fn check(&self) -> wasmprov_api::Result<()> {
            self.fail_next.lock().unwrap().take().map_or(Ok(()), Err)
        }
    }

    /// A handle read from the fields every version of wasmprov has.
    fn handle(id: &str) -> wasmprov_api::NodeHandle {
        serde_json::from_value(serde_json::json!({
            "provider_id": id,
            "address": null,
            "zone": null,
            "capacity_type": "on_demand",
            "join_state": "provisioning",
        }))
        .expect("a wasmprov NodeHandle from its required fields")
    }

    fn price(hourly_usd: f64, capacity: wasmprov_api::CapacityType) -> wasmprov_api::PriceHint {
        let mut hint: wasmprov_api::PriceHint = serde_json::from_value(serde_json::json!({
            "hourly_usd": 0.0,
            "capacity_type": "on_demand",
            "instance_type": "standard-1",
        }))
        .expect("a wasmprov PriceHint from its required fields");
        hint.hourly_usd = hourly_usd;
        hint.capacity_type = capacity;
        hint
    }

    #[async_trait::async_trait]
    impl wasmprov_api::CloudProvisioner for Double {
        async fn provision(
            &self,
            shape: &wasmprov_api::NodeShape,
        ) -> wasmprov_api::Result<wasmprov_api::NodeHandle> {
            self.check()?;
            self.shapes.lock().unwrap().push(shape.clone());
            let mut nodes = self.nodes.lock().unwrap();
            let node = wasmprov_api::NodeHandle {
                address: Some(format!("10.1.0.{}", nodes.len() + 1)),
                zone: shape.zone.clone(),
                capacity_type: shape.capacity_type,
                instance_type: Some("standard-1".into()),
                labels: shape.labels.clone(),
                ..handle(&format!("vm-{}", nodes.len() + 1))
            };
            nodes.push(node.clone());
            Ok(node)
        }

        async fn terminate(&self, id: &wasmprov_api::ProviderNodeId) -> wasmprov_api::Result<()> {
            self.check()?;
            let mut nodes = self.nodes.lock().unwrap();
            let before = nodes.len();
            nodes.retain(|n| &n.provider_id != id);
            if nodes.len() == before {
                return Err(wasmprov_api::ProvisionerError::NotFound(format!(
                    "no node {id}"
                )));
            }
            Ok(())
        }

        async fn describe(&self) -> wasmprov_api::Result<Vec<wasmprov_api::NodeHandle>> {
            self.check()?;
            Ok(self.nodes.lock().unwrap().clone())
        }

        fn capacity_types(&self) -> &[wasmprov_api::CapacityType] {
            &[
                wasmprov_api::CapacityType::Spot,
                wasmprov_api::CapacityType::OnDemand,
            ]
        }

        fn price_hint(&self, shape: &wasmprov_api::NodeShape) -> Option<wasmprov_api::PriceHint> {
            self.shapes.lock().unwrap().push(shape.clone());
            (shape.gpu == 0).then(|| price(0.02 * shape.cpu, shape.capacity_type))
        }

        fn name(&self) -> &str {
            "double"
        }
    }

    fn adapted() -> (Arc<Double>, WasmprovProvisioner) {
        let double = Arc::new(Double::default());
        let inner: Arc<dyn wasmprov_api::CloudProvisioner> = double.clone();
        (double, WasmprovProvisioner::from(inner))
    }

    #[tokio::test]
    async fn calls_are_forwarded_and_answers_converted() {
        let (double, p) = adapted();
        assert_eq!(p.name(), "double");
        assert_eq!(
            p.capacity_types(),
            &[CapacityType::Spot, CapacityType::OnDemand]
        );
        assert_eq!(p.inner().name(), "double");
        let debug = format!("{p:?}");
        assert!(
            debug.contains("double") && debug.contains("Spot"),
            "{debug}"
        );

        let mut shape = NodeShape::new(4.0, 8 << 30);
        shape.zone = Some("z3".into());
        shape.capacity_type = CapacityType::Spot;
        shape.labels.insert("pool".into(), "web".into());
        let node = p.provision(&shape).await.unwrap();
        assert_eq!(node.provider_id, "vm-1");
        assert_eq!(node.address.as_deref(), Some("10.1.0.1"));
        assert_eq!(node.zone.as_deref(), Some("z3"));
        assert_eq!(node.capacity_type, CapacityType::Spot);
        assert_eq!(node.join_state, JoinState::Provisioning);
        {
            let seen = double.shapes.lock().unwrap();
            assert_eq!(seen.len(), 1);
            assert!((seen[0].cpu - 4.0).abs() < 1e-12);
            assert_eq!(seen[0].memory_bytes, 8 << 30);
            assert_eq!(seen[0].zone.as_deref(), Some("z3"));
            assert_eq!(seen[0].labels["pool"], "web");
            assert_eq!(seen[0].capacity_type, wasmprov_api::CapacityType::Spot);
        }

        // The same shape again is a second node: no request id to match.
        p.provision(&shape).await.unwrap();
        double.nodes.lock().unwrap()[1].join_state = wasmprov_api::JoinState::Joined;
        let nodes = p.describe().await.unwrap();
        let ids: Vec<&str> = nodes.iter().map(|n| n.provider_id.as_str()).collect();
        assert_eq!(ids, ["vm-1", "vm-2"]);
        assert_eq!(nodes[1].join_state, JoinState::Joined);

        let hint = p.price_hint(&shape).unwrap();
        assert!((hint.hourly_usd - 0.08).abs() < 1e-12);
        assert_eq!(hint.capacity_type, CapacityType::Spot);
        shape.gpu = 1;
        assert!(p.price_hint(&shape).is_none());

        p.terminate(&"vm-1".to_string()).await.unwrap();
        let err = p.terminate(&"vm-1".to_string()).await.unwrap_err();
        assert!(
            matches!(&err, ProvisionerError::Other(m) if m == "not found: no node vm-1"),
            "{err:?}"
        );
        assert_eq!(p.describe().await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn errors_of_every_call_are_converted() {
        let (double, p) = adapted();
        double.fail_next(wasmprov_api::ProvisionerError::Capacity {
            scope: CapacityScope::Group,
            message: "pool full".into(),
        });
        let err = p.provision(&NodeShape::default()).await.unwrap_err();
        assert!(
            matches!(&err, ProvisionerError::Capacity(m) if m == "(group) pool full"),
            "{err:?}"
        );
        assert!(double.nodes.lock().unwrap().is_empty());

        double.fail_next(wasmprov_api::ProvisionerError::Plugin {
            plugin: "double".into(),
            fault: PluginFault::Timeout,
            message: "5 s".into(),
        });
        let err = p.describe().await.unwrap_err();
        assert!(matches!(err, ProvisionerError::Transport(_)), "{err:?}");

        double.fail_next(wasmprov_api::ProvisionerError::Auth("token revoked".into()));
        let err = p.terminate(&"vm-1".to_string()).await.unwrap_err();
        assert_eq!(err.to_string(), "auth: token revoked");
    }

    #[tokio::test]
    #[allow(deprecated, reason = "the copied trait is still served")]
    async fn the_deprecated_copy_is_still_served() {
        use crate::contract::CloudProvisioner as Copy;
        let (_double, p) = adapted();
        let node = Copy::provision(&p, &crate::contract::NodeShape::new(1.0, 1 << 30))
            .await
            .unwrap();
        assert_eq!(node.provider_id, "vm-1");
        assert_eq!(Copy::capacity_types(&p).len(), 2);
        assert_eq!(Copy::describe(&p).await.unwrap().len(), 1);
    }

    #[tokio::test]
    async fn the_one_liner_gives_a_zlayer_trait_object() {
        let inner: Arc<dyn wasmprov_api::CloudProvisioner> = Arc::new(Double::default());
        let z: Arc<dyn CloudProvisioner> = crate::zlayer(inner);
        assert_eq!(z.name(), "double");
        let node = z.provision(&NodeShape::new(2.0, 2 << 30)).await.unwrap();
        assert_eq!(node.join_state, JoinState::Provisioning);
    }
}
