//! [`ZLayerBackend`]: any ZLayer provisioner (a `zlayer_provisioner::CloudProvisioner`,
//! ZLayer's own `CloudInitProvisioner` included) as a wasmprov backend, to
//! sit in a fleet beside wasm plugins.
//!
//! ZLayer's contract is smaller than wasmprov's, and three of the gaps
//! matter to a fleet. The adapter closes each as follows.
//!
//! - **A pinned instance type.** A fleet asks a backend for the instance
//!   type of the offering it ranked cheapest, by name, in
//!   `NodeShape::instance_type`; ZLayer's shape has no such field. The
//!   adapter gives its backend **one** instance type name: the backend's
//!   own name unless set with [`instance_type`](ZLayerBackend::instance_type),
//!   or the name of the one [`Offering`] given with
//!   [`offering`](ZLayerBackend::offering). Its price hints are for that
//!   name, and a request pinned to it is forwarded: with the offering's
//!   CPU, memory and GPUs when one is given (the fleet ranked the shape
//!   against it), else with the shape's own. A request pinned to any
//!   other name is refused as `unsupported` before the ZLayer provisioner
//!   is asked, naming the one type it makes.
//! - **Owner scoping.** ZLayer's `describe` lists every node the
//!   provisioner can see, and its handles carry no labels. The adapter
//!   keeps a ledger of the nodes it made: provider id, request id, and
//!   the labels asked for (the owner, journal, group and request labels of
//!   wasmprov among them). `describe` answers only the listed nodes the
//!   ledger holds, under this adapter's owner when one is set
//!   ([`owner`](ZLayerBackend::owner)), with the ledger's labels; a node
//!   the ZLayer provisioner lists that the ledger does not hold (another
//!   owner's, or made by hand) never comes back, and `terminate` refuses it
//!   as `not found` without asking the provisioner. The labels also go to
//!   ZLayer's `provision` in its shape, so a provisioner that keeps them
//!   (`CloudInitProvisioner` passes them to its command and its
//!   `#cloud-config`) marks the machine in the cloud too. Keep the ledger
//!   in a file ([`ledger_file`](ZLayerBackend::ledger_file)) so that a
//!   restarted host still knows its nodes.
//! - **Request ids.** ZLayer's `provision` takes no request id. The ledger
//!   maps request ids to nodes, so a second `provision_request` with the
//!   same id returns the node the first made; a crash between the ZLayer
//!   call and the ledger write is the one window in which a node can be
//!   made and not recorded (the fleet then reports it as unproven, it is
//!   never adopted).
//!
//! What ZLayer's shape cannot say at all (a GPU model, an architecture, a
//! disk size, boot data, a subnet) is refused as `unsupported` unless the configured
//! offering says it (the fleet only ranks an offering that fits the shape).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use wasmprov_api::provenance::{OWNER_LABEL, REQUEST_LABEL};
use wasmprov_api::{
    CapacityType, NodeHandle, NodeShape, Offering, PriceHint, ProviderNodeId, ProvisionRequest,
    ProvisionerError, Result,
};
use zlayer_provisioner as zl;

use crate::convert;

/// What the ledger knows of a node this adapter made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Entry {
    request_id: String,
    labels: BTreeMap<String, String>,
    instance_type: String,
    /// The handle ZLayer's `provision` returned, converted.
    node: NodeHandle,
}

/// The nodes this adapter made, by provider id.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Ledger {
    nodes: BTreeMap<ProviderNodeId, Entry>,
}

/// Any ZLayer provisioner as a wasmprov backend; see the [module docs](self)
/// for how it maps a pinned instance type and scopes `describe` to its
/// owner.
///
/// ```
/// use std::sync::Arc;
/// use wasmprov_compat_zlayer::ZLayerBackend;
///
/// fn backend(zlayer: Arc<dyn zlayer_provisioner::CloudProvisioner>) -> Arc<dyn wasmprov_api::CloudProvisioner> {
///     Arc::new(ZLayerBackend::new(zlayer).instance_type("zl-standard").owner("scaler-1"))
/// }
/// ```
pub struct ZLayerBackend {
    inner: Arc<dyn zl::CloudProvisioner>,
    name: String,
    instance_type: String,
    offering: Option<Offering>,
    owner: Option<String>,
    capacity_types: Vec<CapacityType>,
    ledger: Mutex<Ledger>,
    ledger_path: Option<PathBuf>,
}

impl std::fmt::Debug for ZLayerBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZLayerBackend")
            .field("name", &self.name)
            .field("instance_type", &self.instance_type)
            .field("owner", &self.owner)
            .field("ledger_path", &self.ledger_path)
            .finish_non_exhaustive()
    }
}

impl ZLayerBackend {
    /// Serves `inner` as a wasmprov backend named as `inner` names itself,
    /// making one instance type of that name, for every owner, with its
    /// ledger in memory.
    #[must_use]
    pub fn new(inner: Arc<dyn zl::CloudProvisioner>) -> Self {
        let name = inner.name().to_string();
        let capacity_types = inner
            .capacity_types()
            .iter()
            .map(|&c| convert::capacity_to_wasmprov(c))
            .collect();
        Self {
            instance_type: name.clone(),
            name,
            inner,
            offering: None,
            owner: None,
            capacity_types,
            ledger: Mutex::new(Ledger::default()),
            ledger_path: None,
        }
    }

    /// The backend's name, instead of the ZLayer provisioner's own.
    #[must_use]
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The name of the one instance type the backend makes: what its price
    /// hints name and what a fleet pins.
    #[must_use]
    pub fn instance_type(mut self, name: impl Into<String>) -> Self {
        self.instance_type = name.into();
        self
    }

    /// The one type the backend makes, with what it has (CPU, memory, GPUs,
    /// zones, prices): the backend's catalogue, so a fleet ranks it as it
    /// ranks a plugin's offerings. Sets the instance type name too.
    #[must_use]
    pub fn offering(mut self, offering: Offering) -> Self {
        self.instance_type.clone_from(&offering.instance_type);
        self.offering = Some(offering);
        self
    }

    /// Answers only nodes made under this owner id (its `wasmprov-owner`
    /// label), and makes nodes for no other.
    #[must_use]
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Keeps the ledger in `path` (JSON, rewritten whole on each change),
    /// reading what is there first.
    ///
    /// # Errors
    /// When the file exists and cannot be read or is not a ledger.
    pub fn ledger_file(mut self, path: impl Into<PathBuf>) -> std::io::Result<Self> {
        let path = path.into();
        match std::fs::read(&path) {
            Ok(bytes) => {
                let ledger: Ledger = serde_json::from_slice(&bytes).map_err(|e| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("{}: not a ledger of ZLayer nodes: {e}", path.display()),
                    )
                })?;
                *self
                    .ledger
                    .get_mut()
                    .unwrap_or_else(PoisonError::into_inner) = ledger;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        self.ledger_path = Some(path);
        Ok(self)
    }

    /// The ZLayer provisioner itself.
    #[must_use]
    pub fn inner(&self) -> &Arc<dyn zl::CloudProvisioner> {
        &self.inner
    }

    fn save(&self, ledger: &Ledger) -> Result<()> {
        let Some(path) = &self.ledger_path else {
            return Ok(());
        };
        let text = serde_json::to_vec_pretty(ledger)
            .map_err(|e| ProvisionerError::Other(format!("ledger: {e}")))?;
        write_atomically(path, &text)
            .map_err(|e| ProvisionerError::Other(format!("ledger {}: {e}", path.display())))
    }

    fn ours(&self, entry: &Entry) -> bool {
        self.owner
            .as_ref()
            .is_none_or(|o| entry.labels.get(OWNER_LABEL) == Some(o))
    }

    /// The ZLayer shape for `shape`, or why the backend cannot make it.
    fn zlayer_shape(&self, shape: &NodeShape) -> Result<zl::NodeShape> {
        let unsupported = |what: String| {
            Err(ProvisionerError::Unsupported(format!(
                "{} (a ZLayer provisioner) {what}",
                self.name
            )))
        };
        if let Some(asked) = &shape.instance_type
            && asked != &self.instance_type
        {
            return unsupported(format!(
                "makes one instance type, {}; {asked} was asked for",
                self.instance_type
            ));
        }
        let mut out = convert::shape_to_zlayer(shape);
        match &self.offering {
            Some(o) => {
                if !o.fits(shape) {
                    return unsupported(format!(
                        "makes only {} ({} vCPU, {} bytes, {} GPU), which does not fit",
                        o.instance_type, o.cpu, o.memory_bytes, o.gpu
                    ));
                }
                if shape.instance_type.is_some() || shape.cpu == 0.0 {
                    out.cpu = o.cpu;
                    out.memory_bytes = o.memory_bytes;
                    out.gpu = o.gpu;
                    out.gpu_vendor.clone_from(&o.gpu_vendor);
                }
            }
            None => {
                let mut cannot = Vec::new();
                if shape.gpu_model.is_some() {
                    cannot.push("a GPU model");
                }
                if shape.arch.is_some() {
                    cannot.push("an architecture");
                }
                if shape.disk_bytes.is_some() {
                    cannot.push("a disk size");
                }
                if !cannot.is_empty() {
                    return unsupported(format!(
                        "cannot be asked for {} (ZLayer's shape has no such field; describe its one type with an offering)",
                        cannot.join(", ")
                    ));
                }
            }
        }
        Ok(out)
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// A request id for a provision that carries none.
fn fresh_request_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("auto-{nanos:x}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

#[async_trait::async_trait]
impl wasmprov_api::CloudProvisioner for ZLayerBackend {
    async fn provision(&self, shape: &NodeShape) -> Result<NodeHandle> {
        self.provision_request(&ProvisionRequest::new(fresh_request_id(), shape.clone()))
            .await
    }

    async fn provision_request(&self, request: &ProvisionRequest) -> Result<NodeHandle> {
        request.shape.validate()?;
        if !request.boot.is_empty() {
            return Err(ProvisionerError::Unsupported(format!(
                "{} (a ZLayer provisioner) cannot be given boot data ({}): ZLayer's provision takes a shape only",
                self.name,
                request.boot.given().join(", ")
            )));
        }
        if let Some(subnet) = &request.subnet {
            return Err(ProvisionerError::Unsupported(format!(
                "{} (a ZLayer provisioner) cannot be given a subnet ({subnet:?}): ZLayer's provision takes a shape only",
                self.name
            )));
        }
        if let (Some(owner), Some(asked)) = (&self.owner, request.shape.labels.get(OWNER_LABEL))
            && owner != asked
        {
            return Err(ProvisionerError::InvalidConfig(format!(
                "{} makes nodes for owner {owner}, not {asked}",
                self.name
            )));
        }
        let made = {
            let ledger = self.ledger.lock().unwrap_or_else(PoisonError::into_inner);
            ledger
                .nodes
                .values()
                .find(|e| e.request_id == request.request_id && self.ours(e))
                .cloned()
        };
        if let Some(entry) = made {
            return Ok(entry.node);
        }
        let zshape = self.zlayer_shape(&request.shape)?;
        let mut labels = request.shape.labels.clone();
        labels.insert(REQUEST_LABEL.into(), request.request_id.clone());
        if let Some(owner) = &self.owner {
            labels
                .entry(OWNER_LABEL.into())
                .or_insert_with(|| owner.clone());
        }
        let zshape = zl::NodeShape {
            labels: labels.clone(),
            ..zshape
        };
        let made = self
            .inner
            .provision(&zshape)
            .await
            .map_err(convert::error_to_wasmprov)?;
        if made.provider_id.is_empty() {
            return Err(ProvisionerError::Other(format!(
                "{}: the ZLayer provisioner answered a node without an id",
                self.name
            )));
        }
        let mut node = convert::handle_to_wasmprov(made);
        node.instance_type = Some(self.instance_type.clone());
        node.labels.clone_from(&labels);
        let entry = Entry {
            request_id: request.request_id.clone(),
            labels,
            instance_type: self.instance_type.clone(),
            node: node.clone(),
        };
        let mut ledger = self.ledger.lock().unwrap_or_else(PoisonError::into_inner);
        ledger.nodes.insert(node.provider_id.clone(), entry);
        self.save(&ledger)?;
        Ok(node)
    }

    async fn terminate(&self, id: &ProviderNodeId) -> Result<()> {
        let known = {
            let ledger = self.ledger.lock().unwrap_or_else(PoisonError::into_inner);
            ledger.nodes.get(id).is_some_and(|e| self.ours(e))
        };
        if !known {
            return Err(ProvisionerError::NotFound(format!(
                "{id} is not a node {} made for this owner",
                self.name
            )));
        }
        self.inner
            .terminate(id)
            .await
            .map_err(convert::error_to_wasmprov)?;
        let mut ledger = self.ledger.lock().unwrap_or_else(PoisonError::into_inner);
        ledger.nodes.remove(id);
        self.save(&ledger)
    }

    async fn describe(&self) -> Result<Vec<NodeHandle>> {
        let listed = self
            .inner
            .describe()
            .await
            .map_err(convert::error_to_wasmprov)?;
        let ledger = self.ledger.lock().unwrap_or_else(PoisonError::into_inner);
        Ok(listed
            .into_iter()
            .filter_map(|z| {
                let entry = ledger.nodes.get(&z.provider_id)?;
                if !self.ours(entry) {
                    return None;
                }
                let mut node = convert::handle_to_wasmprov(z);
                node.instance_type = Some(entry.instance_type.clone());
                node.labels.clone_from(&entry.labels);
                // What the listing does not say, the provision answer did.
                node.zone = node.zone.or_else(|| entry.node.zone.clone());
                node.address = node.address.or_else(|| entry.node.address.clone());
                // ZLayer's listings need not know the billing (ZLayer's
                // own cloud-init one says on-demand for every node).
                node.capacity_type = entry.node.capacity_type;
                Some(node)
            })
            .collect())
    }

    fn capacity_types(&self) -> &[CapacityType] {
        &self.capacity_types
    }

    fn price_hint(&self, shape: &NodeShape) -> Option<PriceHint> {
        let zshape = self.zlayer_shape(shape).ok()?;
        if let Some(o) = &self.offering
            && let Some(p) = o.price(shape.capacity_type)
        {
            return Some(PriceHint {
                hourly_usd: p,
                capacity_type: shape.capacity_type,
                instance_type: self.instance_type.clone(),
            });
        }
        let hint = self.inner.price_hint(&zshape)?;
        Some(PriceHint {
            hourly_usd: hint.hourly_usd,
            capacity_type: convert::capacity_to_wasmprov(hint.capacity_type),
            instance_type: self.instance_type.clone(),
        })
    }

    fn name(&self) -> &str {
        &self.name
    }

    async fn offerings(&self) -> Result<Vec<Offering>> {
        match &self.offering {
            Some(o) => Ok(vec![o.clone()]),
            None => Err(ProvisionerError::Unsupported(format!(
                "{} has no catalogue of offerings: it is ranked by its price hint for {}",
                self.name, self.instance_type
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use wasmprov_api::CloudProvisioner as _;

    use super::*;

    /// A ZLayer provisioner in memory: every node it made, plus a node made
    /// by someone else, in its listing; counts its provisions.
    #[derive(Default)]
    struct Machines {
        nodes: Mutex<Vec<zl::NodeHandle>>,
        shapes: Mutex<Vec<zl::NodeShape>>,
    }

    #[async_trait::async_trait]
    impl zl::CloudProvisioner for Machines {
        async fn provision(&self, shape: &zl::NodeShape) -> zl::Result<zl::NodeHandle> {
            self.shapes.lock().unwrap().push(shape.clone());
            let mut nodes = self.nodes.lock().unwrap();
            let node = zl::NodeHandle {
                provider_id: format!("m-{}", nodes.len() + 1),
                address: None,
                zone: shape.zone.clone(),
                capacity_type: shape.capacity_type,
                join_state: zl::JoinState::Provisioning,
            };
            nodes.push(node.clone());
            Ok(node)
        }
        async fn terminate(&self, id: &zl::ProviderNodeId) -> zl::Result<()> {
            self.nodes.lock().unwrap().retain(|n| &n.provider_id != id);
            Ok(())
        }
        async fn describe(&self) -> zl::Result<Vec<zl::NodeHandle>> {
            let mut all = self.nodes.lock().unwrap().clone();
            all.push(zl::NodeHandle {
                provider_id: "by-hand".into(),
                address: Some("10.9.9.9".into()),
                zone: None,
                capacity_type: zl::CapacityType::OnDemand,
                join_state: zl::JoinState::Joined,
            });
            Ok(all)
        }
        fn capacity_types(&self) -> &[zl::CapacityType] {
            &[zl::CapacityType::OnDemand]
        }
        fn price_hint(&self, shape: &zl::NodeShape) -> Option<zl::PriceHint> {
            Some(zl::PriceHint {
                hourly_usd: 0.01 * shape.cpu,
                capacity_type: shape.capacity_type,
            })
        }
        fn name(&self) -> &str {
            "machines"
        }
    }

    fn owned_shape(owner: &str) -> NodeShape {
        let mut shape = NodeShape::new(2.0, 4 << 30);
        shape.labels.insert(OWNER_LABEL.into(), owner.into());
        shape
    }

    #[tokio::test]
    async fn pinned_types_owner_scoping_and_the_ledger() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("ledger.json");
        let machines = Arc::new(Machines::default());
        let b = ZLayerBackend::new(machines.clone())
            .instance_type("zl-2c")
            .owner("team-a")
            .ledger_file(&file)
            .unwrap();
        assert_eq!(b.name(), "machines");
        let hint = b.price_hint(&owned_shape("team-a")).unwrap();
        assert_eq!(hint.instance_type, "zl-2c");
        assert!((hint.hourly_usd - 0.02).abs() < 1e-12);

        // Pinned to its own type: made, labelled, recorded.
        let mut shape = owned_shape("team-a");
        shape.instance_type = Some("zl-2c".into());
        let node = b
            .provision_request(&ProvisionRequest::new("web-1", shape.clone()))
            .await
            .unwrap();
        assert_eq!(node.provider_id, "m-1");
        assert_eq!(node.instance_type.as_deref(), Some("zl-2c"));
        assert_eq!(node.labels[REQUEST_LABEL], "web-1");
        assert_eq!(node.labels[OWNER_LABEL], "team-a");
        // The labels reached ZLayer's shape.
        assert_eq!(
            machines.shapes.lock().unwrap()[0].labels[OWNER_LABEL],
            "team-a"
        );
        // The same request id again: the same node, no second provision.
        let again = b
            .provision_request(&ProvisionRequest::new("web-1", shape.clone()))
            .await
            .unwrap();
        assert_eq!(again.provider_id, "m-1");
        assert_eq!(machines.shapes.lock().unwrap().len(), 1);

        // Pinned to another type: refused before ZLayer is asked.
        shape.instance_type = Some("cx22".into());
        let err = b
            .provision_request(&ProvisionRequest::new("web-2", shape.clone()))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ProvisionerError::Unsupported(m) if m.contains("makes one instance type, zl-2c; cx22 was asked for")),
            "{err:?}"
        );
        assert!(b.price_hint(&shape).is_none());
        // What ZLayer's shape cannot carry is refused, not dropped.
        let mut model = owned_shape("team-a");
        model.gpu = 1;
        model.gpu_model = Some("nvidia-t4".into());
        let err = b.provision(&model).await.unwrap_err();
        assert!(
            matches!(&err, ProvisionerError::Unsupported(m) if m.contains("a GPU model")),
            "{err:?}"
        );
        // Nor is a subnet, even for a request id it already made.
        for id in ["web-1", "web-3"] {
            let mut in_subnet = ProvisionRequest::new(id, owned_shape("team-a"));
            in_subnet.shape.instance_type = Some("zl-2c".into());
            in_subnet.subnet = Some("subnet-1".into());
            let err = b.provision_request(&in_subnet).await.unwrap_err();
            assert!(
                matches!(&err, ProvisionerError::Unsupported(m) if m.contains("subnet-1")),
                "{err:?}"
            );
        }
        // Another owner's request is not made under this one.
        let err = b.provision(&owned_shape("team-b")).await.unwrap_err();
        assert_eq!(err.kind(), "invalid_config", "{err:?}");
        assert_eq!(machines.shapes.lock().unwrap().len(), 1);

        // describe: only the ledger's node, with its labels; not "by-hand".
        let listed = b.describe().await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].provider_id, "m-1");
        assert_eq!(listed[0].labels[REQUEST_LABEL], "web-1");
        let err = b.terminate(&"by-hand".to_string()).await.unwrap_err();
        assert_eq!(err.kind(), "not_found", "{err:?}");
        assert_eq!(
            machines.describe_len().await,
            2,
            "by-hand was not terminated"
        );

        // A second adapter over the same file (a restarted host) knows m-1;
        // one of another owner over it does not.
        let again = ZLayerBackend::new(machines.clone())
            .instance_type("zl-2c")
            .owner("team-a")
            .ledger_file(&file)
            .unwrap();
        assert_eq!(again.describe().await.unwrap().len(), 1);
        let other = ZLayerBackend::new(machines.clone())
            .owner("team-b")
            .ledger_file(&file)
            .unwrap();
        assert!(other.describe().await.unwrap().is_empty());
        assert_eq!(
            other
                .terminate(&"m-1".to_string())
                .await
                .unwrap_err()
                .kind(),
            "not_found"
        );
        again.terminate(&"m-1".to_string()).await.unwrap();
        assert!(again.describe().await.unwrap().is_empty());
        assert_eq!(machines.describe_len().await, 1);
        let saved: Ledger = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert!(saved.nodes.is_empty());
    }

    impl Machines {
        async fn describe_len(&self) -> usize {
            zl::CloudProvisioner::describe(self).await.unwrap().len()
        }
    }

    #[tokio::test]
    async fn an_offering_is_the_catalogue_and_the_profile_sent() {
        let machines = Arc::new(Machines::default());
        let offering = Offering {
            instance_type: "zl-8c".into(),
            cpu: 8.0,
            memory_bytes: 32 << 30,
            on_demand_usd: Some(0.3),
            ..Offering::default()
        };
        let b = ZLayerBackend::new(machines.clone()).offering(offering.clone());
        assert_eq!(b.offerings().await.unwrap(), vec![offering]);
        let mut shape = NodeShape::new(4.0, 8 << 30);
        assert!((b.price_hint(&shape).unwrap().hourly_usd - 0.3).abs() < 1e-12);
        shape.instance_type = Some("zl-8c".into());
        b.provision(&shape).await.unwrap();
        let sent = machines.shapes.lock().unwrap()[0].clone();
        assert!(
            (sent.cpu - 8.0).abs() < 1e-12,
            "the offering's profile is sent"
        );
        assert_eq!(sent.memory_bytes, 32 << 30);
        // Too big for its one type.
        assert!(b.price_hint(&NodeShape::new(16.0, 8 << 30)).is_none());
    }
}
