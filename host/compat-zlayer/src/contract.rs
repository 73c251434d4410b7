//! The `zlayer_provisioner` contract, declared again: **deprecated**.
//!
//! Since issue 26 this crate implements the real `zlayer_provisioner`
//! crate's trait (re-exported at this crate's root), so code written for
//! ZLayer compiles unchanged; these copies stay for one release so code that
//! named `wasmprov_compat_zlayer::contract::…` keeps building, with a
//! deprecation warning naming the real item.
//! [`WasmprovProvisioner`](crate::WasmprovProvisioner) still implements the copied trait too, and the
//! `From` conversions between the copies and wasmprov's types stay.
//!
//! Everything a caller can see is kept as ZLayer declares it, because code
//! written against that crate must compile here unchanged:
//!
//! - the same names, fields (with their types) and variants, none added, so
//!   struct literals and exhaustive matches keep working;
//! - the same derives and no `serde` attributes, so the JSON is ZLayer's
//!   (`"OnDemand"`, `"Joined"`, every field present), not wasmprov's
//!   snake-case spelling;
//! - the same `Default` for [`NodeShape`] and [`CapacityType`], the same
//!   [`NodeShape::new`], the same `Display` text of each error;
//! - [`ProvisionerError`] stays exhaustive, and `Result` keeps its one
//!   parameter.
//!
//! Nothing here knows about wasmprov; the conversions live in
//! [`convert`](crate::convert).

#![allow(deprecated, reason = "the copies refer to each other")]

use std::collections::BTreeMap;

#[deprecated(
    note = "use zlayer_provisioner::ProviderNodeId (the real crate; also re-exported as wasmprov_compat_zlayer::ProviderNodeId)"
)]
/// A backend's own identifier of a node (an instance id, a VM name, a token
/// printed by a script); not a cluster-level node number.
pub type ProviderNodeId = String;

#[deprecated(
    note = "use zlayer_provisioner::CapacityType (the real crate; also re-exported as wasmprov_compat_zlayer::CapacityType)"
)]
/// How a node is billed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CapacityType {
    /// Regular capacity that the provider does not take back.
    #[default]
    OnDemand,
    /// Cheaper capacity the provider may reclaim (spot, preemptible).
    Spot,
}

#[deprecated(
    note = "use zlayer_provisioner::NodeShape (the real crate; also re-exported as wasmprov_compat_zlayer::NodeShape)"
)]
/// The node a caller asks for.
///
/// Start from [`NodeShape::new`] (or [`Default`]) and set the fields that
/// matter; there is no builder.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct NodeShape {
    /// vCPUs, fractions allowed (burstable shapes).
    pub cpu: f64,
    /// Memory, in bytes.
    pub memory_bytes: u64,
    /// Number of GPUs; 0 for none.
    pub gpu: u32,
    /// Which GPU maker, when it matters (`"nvidia"`, `"amd"`).
    pub gpu_vendor: Option<String>,
    /// Labels the node should carry for scheduling.
    pub labels: BTreeMap<String, String>,
    /// Where to place the node (availability zone, location), if anywhere.
    pub zone: Option<String>,
    /// How the node should be billed.
    pub capacity_type: CapacityType,
}

impl Default for NodeShape {
    /// One vCPU, 1 GiB, no GPU, no labels, any zone, on demand.
    fn default() -> Self {
        Self {
            cpu: 1.0,
            memory_bytes: 1 << 30,
            gpu: 0,
            gpu_vendor: None,
            labels: BTreeMap::new(),
            zone: None,
            capacity_type: CapacityType::OnDemand,
        }
    }
}

impl NodeShape {
    /// `cpu` vCPUs and `memory_bytes` of memory; every other field as in
    /// [`Default`].
    #[must_use]
    pub fn new(cpu: f64, memory_bytes: u64) -> Self {
        Self {
            cpu,
            memory_bytes,
            ..Self::default()
        }
    }
}

#[deprecated(
    note = "use zlayer_provisioner::JoinState (the real crate; also re-exported as wasmprov_compat_zlayer::JoinState)"
)]
/// How far a node has got on its way into the cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum JoinState {
    /// The machine is being created.
    Provisioning,
    /// The machine exists and is starting.
    Booting,
    /// The node's agent is asking to join.
    Joining,
    /// The node is a member.
    Joined,
    /// Creating or joining went wrong.
    Failed,
}

#[deprecated(
    note = "use zlayer_provisioner::NodeHandle (the real crate; also re-exported as wasmprov_compat_zlayer::NodeHandle)"
)]
/// A node the backend made or is making.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct NodeHandle {
    /// The backend's identifier, the one [`CloudProvisioner::terminate`] takes.
    pub provider_id: ProviderNodeId,
    /// IP address or host name, when the backend knows it.
    pub address: Option<String>,
    /// The zone the node is in, when known.
    pub zone: Option<String>,
    /// How the node is billed.
    pub capacity_type: CapacityType,
    /// Where the node is in its lifecycle.
    pub join_state: JoinState,
}

#[deprecated(
    note = "use zlayer_provisioner::PriceHint (the real crate; also re-exported as wasmprov_compat_zlayer::PriceHint)"
)]
/// What a shape would cost, as far as the backend can tell.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct PriceHint {
    /// US dollars per hour.
    pub hourly_usd: f64,
    /// The billing the price is for.
    pub capacity_type: CapacityType,
}

#[deprecated(
    note = "use zlayer_provisioner::ProvisionerError (the real crate; also re-exported as wasmprov_compat_zlayer::ProvisionerError)"
)]
/// Why a [`CloudProvisioner`] call failed: five kinds, each with the
/// backend's message.
#[derive(thiserror::Error, Debug)]
pub enum ProvisionerError {
    /// The backend cannot do this at all (this shape, this call).
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// The backend has no room for the request right now.
    #[error("capacity unavailable: {0}")]
    Capacity(String),
    /// The backend refused the credentials.
    #[error("auth: {0}")]
    Auth(String),
    /// The backend could not be reached, or its answer was lost or garbled.
    #[error("transport: {0}")]
    Transport(String),
    /// Anything else; the message says what.
    #[error("{0}")]
    Other(String),
}

#[deprecated(
    note = "use zlayer_provisioner::Result (the real crate; also re-exported as wasmprov_compat_zlayer::Result)"
)]
/// The result of every [`CloudProvisioner`] call that can fail.
pub type Result<T> = std::result::Result<T, ProvisionerError>;

#[deprecated(
    note = "use zlayer_provisioner::CloudProvisioner (the real crate; also re-exported as wasmprov_compat_zlayer::CloudProvisioner)"
)]
/// A backend that makes, removes and lists nodes.
///
/// The calls that reach the backend are async. [`capacity_types`](Self::capacity_types),
/// [`price_hint`](Self::price_hint) and [`name`](Self::name) answer from what
/// the backend already knows and must return at once. One value is shared
/// by many tasks, hence `Send + Sync`.
///
/// ```
/// use wasmprov_compat_zlayer::{
///     CapacityType, CloudProvisioner, NodeHandle, NodeShape, PriceHint, ProviderNodeId,
///     ProvisionerError, Result,
/// };
///
/// /// Knows prices, makes nothing.
/// struct PriceList;
///
/// #[async_trait::async_trait]
/// impl CloudProvisioner for PriceList {
///     async fn provision(&self, _shape: &NodeShape) -> Result<NodeHandle> {
///         Err(ProvisionerError::Unsupported("a price list makes no nodes".into()))
///     }
///     async fn terminate(&self, id: &ProviderNodeId) -> Result<()> {
///         Err(ProvisionerError::Other(format!("no node {id}")))
///     }
///     async fn describe(&self) -> Result<Vec<NodeHandle>> {
///         Ok(Vec::new())
///     }
///     fn capacity_types(&self) -> &[CapacityType] {
///         &[CapacityType::OnDemand]
///     }
///     fn price_hint(&self, shape: &NodeShape) -> Option<PriceHint> {
///         Some(PriceHint { hourly_usd: 0.01 * shape.cpu, capacity_type: shape.capacity_type })
///     }
///     fn name(&self) -> &str {
///         "price-list"
///     }
/// }
///
/// let hint = PriceList.price_hint(&NodeShape::new(4.0, 8 << 30)).unwrap();
/// assert!((hint.hourly_usd - 0.04).abs() < 1e-12);
/// ```
#[async_trait::async_trait]
pub trait CloudProvisioner: Send + Sync {
    /// Make a node of `shape`.
    ///
    /// # Errors
    /// The backend's refusal (shape not offered, no capacity, bad
    /// credentials) or a transport failure.
    async fn provision(&self, shape: &NodeShape) -> Result<NodeHandle>;

    /// Remove the node `id`.
    ///
    /// # Errors
    /// When the backend did not remove it or could not be reached.
    // ZLayer's signature takes the owned-string alias by reference; keeping
    // it is what lets existing implementations compile here.
    #[allow(clippy::ptr_arg, reason = "ZLayer's trait signature, kept as is")]
    async fn terminate(&self, id: &ProviderNodeId) -> Result<()>;

    /// The nodes this backend knows of.
    ///
    /// # Errors
    /// When the backend cannot be asked.
    async fn describe(&self) -> Result<Vec<NodeHandle>>;

    /// The billing kinds the backend offers.
    fn capacity_types(&self) -> &[CapacityType];

    /// What `shape` would cost, or `None` when the backend cannot say.
    fn price_hint(&self, shape: &NodeShape) -> Option<PriceHint>;

    /// A short name for the backend that does not change between runs.
    fn name(&self) -> &str;
}

// The conversions between the copies and wasmprov's types, as before (the
// real crate's types are converted by the functions of `crate::convert`).

impl From<CapacityType> for wasmprov_api::CapacityType {
    fn from(capacity: CapacityType) -> Self {
        match capacity {
            CapacityType::OnDemand => Self::OnDemand,
            CapacityType::Spot => Self::Spot,
        }
    }
}

impl From<wasmprov_api::CapacityType> for CapacityType {
    fn from(capacity: wasmprov_api::CapacityType) -> Self {
        match capacity {
            wasmprov_api::CapacityType::OnDemand => Self::OnDemand,
            wasmprov_api::CapacityType::Spot => Self::Spot,
        }
    }
}

impl From<JoinState> for wasmprov_api::JoinState {
    fn from(state: JoinState) -> Self {
        let real: zlayer_provisioner::JoinState = match state {
            JoinState::Provisioning => zlayer_provisioner::JoinState::Provisioning,
            JoinState::Booting => zlayer_provisioner::JoinState::Booting,
            JoinState::Joining => zlayer_provisioner::JoinState::Joining,
            JoinState::Joined => zlayer_provisioner::JoinState::Joined,
            JoinState::Failed => zlayer_provisioner::JoinState::Failed,
        };
        crate::convert::join_state_to_wasmprov(real)
    }
}

impl From<wasmprov_api::JoinState> for JoinState {
    fn from(state: wasmprov_api::JoinState) -> Self {
        match crate::convert::join_state_to_zlayer(state) {
            zlayer_provisioner::JoinState::Provisioning => Self::Provisioning,
            zlayer_provisioner::JoinState::Booting => Self::Booting,
            zlayer_provisioner::JoinState::Joining => Self::Joining,
            zlayer_provisioner::JoinState::Joined => Self::Joined,
            zlayer_provisioner::JoinState::Failed => Self::Failed,
        }
    }
}

impl From<&NodeShape> for wasmprov_api::NodeShape {
    fn from(shape: &NodeShape) -> Self {
        Self {
            cpu: shape.cpu,
            memory_bytes: shape.memory_bytes,
            gpu: shape.gpu,
            gpu_vendor: shape.gpu_vendor.clone(),
            labels: shape.labels.clone(),
            zone: shape.zone.clone(),
            capacity_type: shape.capacity_type.into(),
            ..Self::default()
        }
    }
}

impl From<wasmprov_api::NodeHandle> for NodeHandle {
    fn from(node: wasmprov_api::NodeHandle) -> Self {
        Self {
            provider_id: node.provider_id,
            address: node.address,
            zone: node.zone,
            capacity_type: node.capacity_type.into(),
            join_state: node.join_state.into(),
        }
    }
}

impl From<wasmprov_api::PriceHint> for PriceHint {
    fn from(hint: wasmprov_api::PriceHint) -> Self {
        Self {
            hourly_usd: hint.hourly_usd,
            capacity_type: hint.capacity_type.into(),
        }
    }
}

impl From<wasmprov_api::ProvisionerError> for ProvisionerError {
    /// As [`crate::convert::error_to_zlayer`], onto the copy.
    fn from(err: wasmprov_api::ProvisionerError) -> Self {
        match crate::convert::error_to_zlayer(err) {
            zlayer_provisioner::ProvisionerError::Unsupported(m) => Self::Unsupported(m),
            zlayer_provisioner::ProvisionerError::Capacity(m) => Self::Capacity(m),
            zlayer_provisioner::ProvisionerError::Auth(m) => Self::Auth(m),
            zlayer_provisioner::ProvisionerError::Transport(m) => Self::Transport(m),
            zlayer_provisioner::ProvisionerError::Other(m) => Self::Other(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_use_the_variant_names_in_json() {
        for (capacity, name) in [
            (CapacityType::OnDemand, "OnDemand"),
            (CapacityType::Spot, "Spot"),
        ] {
            assert_eq!(serde_json::to_value(capacity).unwrap(), name);
            let back: CapacityType = serde_json::from_value(name.into()).unwrap();
            assert_eq!(back, capacity);
        }
        for (state, name) in [
            (JoinState::Provisioning, "Provisioning"),
            (JoinState::Booting, "Booting"),
            (JoinState::Joining, "Joining"),
            (JoinState::Joined, "Joined"),
            (JoinState::Failed, "Failed"),
        ] {
            assert_eq!(serde_json::to_value(state).unwrap(), name);
            let back: JoinState = serde_json::from_value(name.into()).unwrap();
            assert_eq!(back, state);
        }
        // wasmprov's spelling is not ZLayer's.
        assert!(serde_json::from_value::<CapacityType>("on_demand".into()).is_err());
        assert!(serde_json::from_value::<JoinState>("joined".into()).is_err());
    }

    #[test]
    fn shape_json_has_every_field_and_needs_every_field() {
        let mut shape = NodeShape::new(2.5, 3 << 30);
        shape.capacity_type = CapacityType::Spot;
        shape.labels.insert("pool".into(), "batch".into());
        let json = serde_json::to_value(&shape).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "cpu": 2.5,
                "memory_bytes": 3u64 << 30,
                "gpu": 0,
                "gpu_vendor": null,
                "labels": {"pool": "batch"},
                "zone": null,
                "capacity_type": "Spot",
            })
        );
        let back: NodeShape = serde_json::from_value(json).unwrap();
        assert_eq!(back.capacity_type, CapacityType::Spot);
        assert_eq!(back.labels["pool"], "batch");
        // No `#[serde(default)]`: a partial shape is an error, as in ZLayer.
        assert!(serde_json::from_str::<NodeShape>(r#"{"cpu": 8}"#).is_err());
    }

    #[test]
    fn handle_and_price_json() {
        let handle = NodeHandle {
            provider_id: "vm-3".into(),
            address: None,
            zone: Some("z2".into()),
            capacity_type: CapacityType::OnDemand,
            join_state: JoinState::Booting,
        };
        assert_eq!(
            serde_json::to_value(&handle).unwrap(),
            serde_json::json!({
                "provider_id": "vm-3",
                "address": null,
                "zone": "z2",
                "capacity_type": "OnDemand",
                "join_state": "Booting",
            })
        );
        let hint: PriceHint =
            serde_json::from_str(r#"{"hourly_usd": 0.25, "capacity_type": "Spot"}"#).unwrap();
        assert!((hint.hourly_usd - 0.25).abs() < 1e-12);
        assert_eq!(hint.capacity_type, CapacityType::Spot);
    }

    #[test]
    fn defaults() {
        assert_eq!(CapacityType::default(), CapacityType::OnDemand);
        let shape = NodeShape::default();
        assert!((shape.cpu - 1.0).abs() < 1e-12);
        assert_eq!(shape.memory_bytes, 1_073_741_824);
        assert_eq!(shape.gpu, 0);
        assert_eq!(shape.gpu_vendor, None);
        assert!(shape.labels.is_empty());
        assert_eq!(shape.zone, None);
        assert_eq!(shape.capacity_type, CapacityType::OnDemand);

        let shape = NodeShape::new(0.5, 512 << 20);
        assert!((shape.cpu - 0.5).abs() < 1e-12);
        assert_eq!(shape.memory_bytes, 512 << 20);
        assert_eq!(shape.gpu, 0);
        assert_eq!(shape.gpu_vendor, None);
        assert!(shape.labels.is_empty());
        assert_eq!(shape.zone, None);
        assert_eq!(shape.capacity_type, CapacityType::OnDemand);
    }

    #[test]
    fn error_text() {
        for (err, text) in [
            (
                ProvisionerError::Unsupported("no GPUs here".into()),
                "unsupported: no GPUs here",
            ),
            (
                ProvisionerError::Capacity("z1 is full".into()),
                "capacity unavailable: z1 is full",
            ),
            (
                ProvisionerError::Auth("token expired".into()),
                "auth: token expired",
            ),
            (
                ProvisionerError::Transport("connection reset".into()),
                "transport: connection reset",
            ),
            (
                ProvisionerError::Other("disk on fire".into()),
                "disk on fire",
            ),
        ] {
            assert_eq!(err.to_string(), text);
        }
        let failed: Result<()> = Err(ProvisionerError::Other("x".into()));
        assert!(failed.is_err());
    }

    #[test]
    fn the_copies_still_convert() {
        let mut shape = NodeShape::new(3.0, 5 << 30);
        shape.capacity_type = CapacityType::Spot;
        let wasm = wasmprov_api::NodeShape::from(&shape);
        assert_eq!(wasm.memory_bytes, 5 << 30);
        assert_eq!(wasm.capacity_type, wasmprov_api::CapacityType::Spot);
        let mut handle = wasmprov_api::NodeHandle::new("vm-1", wasmprov_api::JoinState::Joined);
        handle.zone = Some("z1".into());
        let back = NodeHandle::from(handle);
        assert_eq!(back.join_state, JoinState::Joined);
        assert_eq!(back.zone.as_deref(), Some("z1"));
        let err = ProvisionerError::from(wasmprov_api::ProvisionerError::Quota("2 of 2".into()));
        assert_eq!(err.to_string(), "quota exceeded: 2 of 2");
    }
}
