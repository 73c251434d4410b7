// ZLayer orchestration code written against ZLayer's own crate, compiled
// unchanged (tests/zlayer-port) with wasmprov provisioners behind the trait.
use zlayer_provisioner::{
    CapacityType, CloudProvisioner, JoinState, NodeHandle, NodeShape, PriceHint, ProviderNodeId,
    ProvisionerError, Result,
};

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};

const GIB: u64 = 1024 * 1024 * 1024;

/// What the autoscaler does after a failed call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// This backend will never do it: skip it for this shape.
    Skip,
    /// This backend is full: ask the next one.
    TryElsewhere,
    /// Ask the same backend again after a pause.
    RetryLater,
    /// Stop and tell the operator.
    GiveUp,
}

/// Decides by the kind of error alone, never by its text.
pub fn next_step(err: &ProvisionerError) -> Next {
    match err {
        ProvisionerError::Unsupported(_) => Next::Skip,
        ProvisionerError::Capacity(_) => Next::TryElsewhere,
        ProvisionerError::Transport(_) => Next::RetryLater,
        ProvisionerError::Auth(_) => Next::GiveUp,
        ProvisionerError::Other(_) => Next::GiveUp,
    }
}

/// The standard worker: every field spelt out, as the autoscaler's config
/// code does.
pub fn worker_shape(zone: Option<&str>, capacity_type: CapacityType) -> NodeShape {
    NodeShape {
        cpu: 2.0,
        memory_bytes: 4 * GIB,
        gpu: 0,
        gpu_vendor: None,
        labels: BTreeMap::from([("role".to_string(), "worker".to_string())]),
        zone: zone.map(str::to_string),
        capacity_type,
    }
}

/// A batch node: `NodeShape::new`, then the fields that differ.
pub fn batch_shape(cpu: f64, memory_gib: u64, zone: &str) -> NodeShape {
    let mut shape = NodeShape::new(cpu, memory_gib * GIB);
    shape.zone = Some(zone.to_string());
    shape.labels.insert("role".to_string(), "batch".to_string());
    shape
}

/// A GPU node.
pub fn gpu_shape(gpus: u32, vendor: &str) -> NodeShape {
    let mut shape = NodeShape::new(8.0, 64 * GIB);
    shape.gpu = gpus;
    shape.gpu_vendor = Some(vendor.to_string());
    shape
}

/// A shape from the autoscaler's JSON configuration.
pub fn shape_from_json(text: &str) -> Result<NodeShape> {
    serde_json::from_str(text).map_err(|e| ProvisionerError::Other(format!("bad node shape: {e}")))
}

/// The backend with the lowest price for `shape` among those offering its
/// capacity type, with that price.
pub fn cheapest<'a>(
    backends: &[&'a dyn CloudProvisioner],
    shape: &NodeShape,
) -> Option<(&'a dyn CloudProvisioner, PriceHint)> {
    backends
        .iter()
        .filter(|b| b.capacity_types().contains(&shape.capacity_type))
        .filter_map(|b| b.price_hint(shape).map(|hint| (*b, hint)))
        .min_by(|a, b| a.1.hourly_usd.total_cmp(&b.1.hourly_usd))
}

/// Asks `backend` for `count` nodes of `shape`, one after the other.
pub async fn scale_up<P: CloudProvisioner + ?Sized>(
    backend: &P,
    shape: &NodeShape,
    count: usize,
) -> Result<Vec<NodeHandle>> {
    let mut nodes = Vec::with_capacity(count);
    for _ in 0..count {
        nodes.push(backend.provision(shape).await?);
    }
    Ok(nodes)
}

/// Places `count` nodes on the first backend that takes them: priced
/// backends cheapest first, then the ones that gave no price. A full or
/// unwilling backend passes the request on; any other error stops.
pub async fn place(
    backends: &[&dyn CloudProvisioner],
    shape: &NodeShape,
    count: usize,
) -> Result<(String, Vec<NodeHandle>)> {
    let mut ranked: Vec<(&dyn CloudProvisioner, f64)> = backends
        .iter()
        .filter(|b| b.capacity_types().contains(&shape.capacity_type))
        .map(|b| {
            (
                *b,
                b.price_hint(shape).map_or(f64::INFINITY, |h| h.hourly_usd),
            )
        })
        .collect();
    ranked.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut refusals = Vec::new();
    let mut all_unsupported = true;
    for (backend, _) in ranked {
        match scale_up(backend, shape, count).await {
            Ok(nodes) => return Ok((backend.name().to_string(), nodes)),
            Err(err) => match next_step(&err) {
                Next::Skip => refusals.push(format!("{}: {err}", backend.name())),
                Next::TryElsewhere => {
                    all_unsupported = false;
                    refusals.push(format!("{}: {err}", backend.name()));
                }
                Next::RetryLater | Next::GiveUp => return Err(err),
            },
        }
    }
    let why = refusals.join("; ");
    if all_unsupported {
        Err(ProvisionerError::Unsupported(format!(
            "no backend offers this shape ({why})"
        )))
    } else {
        Err(ProvisionerError::Capacity(format!(
            "no backend has room for {count} nodes ({why})"
        )))
    }
}

/// Nodes by how far they got.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Census {
    /// Still on their way.
    pub pending: usize,
    /// Members of the cluster.
    pub ready: usize,
    /// Given up on.
    pub failed: usize,
}

/// Counts `nodes` by join state.
pub fn census(nodes: &[NodeHandle]) -> Census {
    let mut census = Census::default();
    for node in nodes {
        match node.join_state {
            JoinState::Provisioning | JoinState::Booting | JoinState::Joining => {
                census.pending += 1;
            }
            JoinState::Joined => census.ready += 1,
            JoinState::Failed => census.failed += 1,
        }
    }
    census
}

/// Terminates the backend's failed nodes, or all of its nodes with `all`;
/// returns the ids it terminated.
pub async fn reap(backend: &dyn CloudProvisioner, all: bool) -> Result<Vec<ProviderNodeId>> {
    let mut gone = Vec::new();
    for node in backend.describe().await? {
        if all || node.join_state == JoinState::Failed {
            backend.terminate(&node.provider_id).await?;
            gone.push(node.provider_id);
        }
    }
    Ok(gone)
}

/// A backend implemented against the contract directly: a fixed set of
/// machines (reserved hardware), rented whole at a price per vCPU-hour.
pub struct FixedPool {
    name: String,
    usd_per_cpu_hour: f64,
    free: Mutex<Vec<ProviderNodeId>>,
    rented: Mutex<Vec<NodeHandle>>,
}

impl FixedPool {
    /// A pool of the machines `ids`.
    pub fn new(name: &str, usd_per_cpu_hour: f64, ids: &[&str]) -> Self {
        Self {
            name: name.to_string(),
            usd_per_cpu_hour,
            free: Mutex::new(ids.iter().rev().map(|id| id.to_string()).collect()),
            rented: Mutex::new(Vec::new()),
        }
    }
}

#[async_trait::async_trait]
impl CloudProvisioner for FixedPool {
    async fn provision(&self, shape: &NodeShape) -> Result<NodeHandle> {
        if shape.gpu > 0 {
            return Err(ProvisionerError::Unsupported(
                "the pool has no GPUs".to_string(),
            ));
        }
        let id = self
            .free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .ok_or_else(|| {
                ProvisionerError::Capacity(format!("every machine of {} is rented", self.name))
            })?;
        let node = NodeHandle {
            provider_id: id,
            address: None,
            zone: Some("rack-1".to_string()),
            capacity_type: CapacityType::OnDemand,
            join_state: JoinState::Booting,
        };
        self.rented
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(node.clone());
        Ok(node)
    }

    async fn terminate(&self, id: &ProviderNodeId) -> Result<()> {
        let mut rented = self.rented.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(at) = rented.iter().position(|n| &n.provider_id == id) else {
            return Err(ProvisionerError::Other(format!("{id} is not rented")));
        };
        rented.remove(at);
        self.free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(id.clone());
        Ok(())
    }

    async fn describe(&self) -> Result<Vec<NodeHandle>> {
        Ok(self
            .rented
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone())
    }

    fn capacity_types(&self) -> &[CapacityType] {
        &[CapacityType::OnDemand]
    }

    fn price_hint(&self, shape: &NodeShape) -> Option<PriceHint> {
        if shape.gpu > 0 || shape.capacity_type != CapacityType::OnDemand {
            return None;
        }
        Some(PriceHint {
            hourly_usd: self.usd_per_cpu_hour * shape.cpu,
            capacity_type: CapacityType::OnDemand,
        })
    }

    fn name(&self) -> &str {
        &self.name
    }
}
