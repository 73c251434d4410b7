//! The provisioner contract as a Rust trait.
//!
//! [`CloudProvisioner`] is what an orchestrator programs against. A wasm
//! plugin loaded by `wasmprov-host` implements it, and so can a native,
//! in-process backend: this crate depends only on `serde`, `thiserror` and
//! `async-trait`, so implementing the trait pulls in no WebAssembly runtime.
//!
//! The value types mirror the WIT package `wasmprov:provisioner@0.1.0` one to
//! one; the guest SDK re-exports them so that plugin authors and embedders
//! share one vocabulary.
//!
//! ```
//! use wasmprov_api::{CapacityType, CloudProvisioner, NodeHandle, NodeShape, PriceHint, Result};
//!
//! /// A backend that only prices.
//! struct Quote;
//!
//! #[async_trait::async_trait]
//! impl CloudProvisioner for Quote {
//!     async fn provision(&self, _shape: &NodeShape) -> Result<NodeHandle> {
//!         Err(wasmprov_api::ProvisionerError::Unsupported("quote only".into()))
//!     }
//!     async fn terminate(&self, id: &String) -> Result<()> {
//!         Err(wasmprov_api::ProvisionerError::NotFound(id.clone()))
//!     }
//!     async fn describe(&self) -> Result<Vec<NodeHandle>> {
//!         Ok(Vec::new())
//!     }
//!     fn capacity_types(&self) -> &[CapacityType] {
//!         &[CapacityType::OnDemand]
//!     }
//!     fn price_hint(&self, shape: &NodeShape) -> Option<PriceHint> {
//!         Some(PriceHint {
//!             hourly_usd: 0.01 * shape.cpu,
//!             capacity_type: shape.capacity_type,
//!             instance_type: "virtual".into(),
//!         })
//!     }
//!     fn name(&self) -> &str {
//!         "quote"
//!     }
//! }
//!
//! let hint = Quote.price_hint(&NodeShape::new(4.0, 8 << 30)).unwrap();
//! assert_eq!(hint.instance_type, "virtual");
//! ```

#![warn(missing_docs)]

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub mod ids;

/// The version of the WIT contract these types mirror.
pub const CONTRACT_VERSION: &str = "0.1.0";

/// A backend's own identifier of a node (an instance id, a server number, an
/// opaque token printed by a script).
pub type ProviderNodeId = String;

/// Key/value labels on a shape or node.
pub type Labels = BTreeMap<String, String>;

/// How a node is billed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapacityType {
    /// Standard, non-interruptible capacity.
    #[default]
    OnDemand,
    /// Interruptible, discounted capacity (spot, preemptible).
    Spot,
}

impl CapacityType {
    /// The name used in JSON and on the command line.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OnDemand => "on_demand",
            Self::Spot => "spot",
        }
    }
}

impl std::fmt::Display for CapacityType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a caller wants a node to look like.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeShape {
    /// vCPUs wanted (fractional allowed for burstable shapes).
    pub cpu: f64,
    /// Memory wanted, in bytes.
    pub memory_bytes: u64,
    /// GPUs wanted (0 for none).
    pub gpu: u32,
    /// GPU vendor wanted (`"nvidia"`, `"amd"`).
    pub gpu_vendor: Option<String>,
    /// Scheduling labels to put on the node.
    pub labels: Labels,
    /// Availability zone or location wanted.
    pub zone: Option<String>,
    /// Billing wanted.
    pub capacity_type: CapacityType,
    /// An explicit instance type; when set it wins over cpu/memory/gpu matching.
    pub instance_type: Option<String>,
}

impl Default for NodeShape {
    /// One vCPU and 1 GiB, on demand, anywhere.
    fn default() -> Self {
        Self {
            cpu: 1.0,
            memory_bytes: 1 << 30,
            gpu: 0,
            gpu_vendor: None,
            labels: Labels::new(),
            zone: None,
            capacity_type: CapacityType::OnDemand,
            instance_type: None,
        }
    }
}

/// Most vCPUs a shape may ask for.
pub const MAX_SHAPE_CPU: f64 = 4096.0;
/// Most GPUs a shape may ask for.
pub const MAX_SHAPE_GPUS: u32 = 64;
/// Most labels a shape may carry.
pub const MAX_SHAPE_LABELS: usize = 64;
/// Longest label key, in bytes.
pub const MAX_LABEL_KEY: usize = 128;
/// Longest label value, in bytes.
pub const MAX_LABEL_VALUE: usize = 256;
/// Longest zone, instance type or GPU vendor name, in bytes.
pub const MAX_SHAPE_NAME: usize = 128;

impl NodeShape {
    /// A shape with this CPU and memory and defaults for everything else.
    #[must_use]
    pub fn new(cpu: f64, memory_bytes: u64) -> Self {
        Self {
            cpu,
            memory_bytes,
            ..Self::default()
        }
    }

    /// Checks that the shape asks for something a cloud could make: CPU
    /// finite and above 0 (at most [`MAX_SHAPE_CPU`]), memory above 0, at
    /// most [`MAX_SHAPE_GPUS`] GPUs, at most [`MAX_SHAPE_LABELS`] labels with
    /// keys of 1 to [`MAX_LABEL_KEY`] and values of at most
    /// [`MAX_LABEL_VALUE`] bytes, names of at most [`MAX_SHAPE_NAME`] bytes.
    /// With an explicit instance type, CPU and memory may both be 0 (not
    /// asked: the type says).
    ///
    /// The host checks every shape with this before a plugin or the journal
    /// sees it.
    ///
    /// # Errors
    /// [`ProvisionerError::Unsupported`] naming the field and the rule.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(ProvisionerError::Unsupported(format!("invalid shape: {m}")));
        let by_type = self.instance_type.is_some() && self.cpu == 0.0 && self.memory_bytes == 0;
        if !self.cpu.is_finite() || self.cpu < 0.0 || (self.cpu == 0.0 && !by_type) {
            return bad(format!(
                "cpu must be a finite number above 0, got {}",
                self.cpu
            ));
        }
        if self.cpu > MAX_SHAPE_CPU {
            return bad(format!(
                "cpu {} is over the limit of {MAX_SHAPE_CPU}",
                self.cpu
            ));
        }
        if self.memory_bytes == 0 && !by_type {
            return bad("memory_bytes must be above 0".into());
        }
        if self.gpu > MAX_SHAPE_GPUS {
            return bad(format!(
                "gpu {} is over the limit of {MAX_SHAPE_GPUS}",
                self.gpu
            ));
        }
        if self.labels.len() > MAX_SHAPE_LABELS {
            return bad(format!(
                "{} labels, at most {MAX_SHAPE_LABELS} allowed",
                self.labels.len()
            ));
        }
        for (k, v) in &self.labels {
            if k.is_empty() || k.len() > MAX_LABEL_KEY {
                return bad(format!(
                    "label keys are 1 to {MAX_LABEL_KEY} bytes, one is {}",
                    k.len()
                ));
            }
            if v.len() > MAX_LABEL_VALUE {
                return bad(format!(
                    "label values are at most {MAX_LABEL_VALUE} bytes, the one of a {}-byte key is {}",
                    k.len(),
                    v.len()
                ));
            }
        }
        for (field, value) in [
            ("zone", &self.zone),
            ("instance_type", &self.instance_type),
            ("gpu_vendor", &self.gpu_vendor),
        ] {
            if let Some(v) = value
                && (v.is_empty() || v.len() > MAX_SHAPE_NAME)
            {
                return bad(format!(
                    "{field} is 1 to {MAX_SHAPE_NAME} bytes when given, got {}",
                    v.len()
                ));
            }
        }
        Ok(())
    }
}

/// Where a node is on its way to cluster membership.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JoinState {
    /// The backend is creating the machine.
    Provisioning,
    /// The machine exists and is booting.
    Booting,
    /// The node agent is joining the cluster.
    Joining,
    /// The node has joined.
    Joined,
    /// Creating or joining failed.
    Failed,
}

impl JoinState {
    /// The name used in JSON and tables.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Provisioning => "provisioning",
            Self::Booting => "booting",
            Self::Joining => "joining",
            Self::Joined => "joined",
            Self::Failed => "failed",
        }
    }
}

impl std::fmt::Display for JoinState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A node a backend created or is creating.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeHandle {
    /// The backend's own identifier of the node.
    pub provider_id: ProviderNodeId,
    /// Reachable address, once known.
    pub address: Option<String>,
    /// Zone the node landed in.
    pub zone: Option<String>,
    /// Billing the node runs under.
    pub capacity_type: CapacityType,
    /// Where the node is in its lifecycle.
    pub join_state: JoinState,
    /// The instance type the node runs on.
    #[serde(default)]
    pub instance_type: Option<String>,
    /// Labels on the node, including the ownership and request-id tags.
    #[serde(default)]
    pub labels: Labels,
}

/// An estimate of what a shape costs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PriceHint {
    /// Estimated cost per hour in US dollars.
    pub hourly_usd: f64,
    /// Billing the estimate applies to.
    pub capacity_type: CapacityType,
    /// The instance type that was priced.
    pub instance_type: String,
}

/// A request to create one node, idempotent by `request_id`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProvisionRequest {
    /// Chosen by the caller: provisioning twice with one id yields one node.
    pub request_id: String,
    /// The node wanted.
    pub shape: NodeShape,
}

/// What ran out when a backend had no capacity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapacityScope {
    /// The instance type, everywhere asked.
    InstanceType,
    /// The zone or location.
    Zone,
    /// The capacity group or pool as a whole.
    Group,
}

impl std::fmt::Display for CapacityScope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::InstanceType => "instance type",
            Self::Zone => "zone",
            Self::Group => "group",
        })
    }
}

/// Why a plugin could not answer at all (as opposed to answering with an error).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PluginFault {
    /// The plugin trapped or panicked.
    Trap,
    /// The call ran past its wall-clock deadline.
    Timeout,
    /// The call used more CPU time than allowed.
    CpuLimit,
    /// The plugin tried to grow its memory past its limit.
    MemoryLimit,
    /// The plugin held more host resources (handles: requests, streams,
    /// header maps) than one call may.
    ResourceLimit,
    /// The plugin could not be instantiated or broke the contract's types.
    Contract,
}

impl PluginFault {
    /// The name used in JSON and in metric labels (`"trap"`, `"cpu_limit"`, ...).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Trap => "trap",
            Self::Timeout => "timeout",
            Self::CpuLimit => "cpu_limit",
            Self::MemoryLimit => "memory_limit",
            Self::ResourceLimit => "resource_limit",
            Self::Contract => "contract",
        }
    }
}

impl std::fmt::Display for PluginFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Trap => "trapped",
            Self::Timeout => "timed out",
            Self::CpuLimit => "exceeded its CPU time limit",
            Self::MemoryLimit => "exceeded its memory limit",
            Self::ResourceLimit => "exceeded its host resource limit",
            Self::Contract => "broke the contract",
        })
    }
}

/// Errors of a [`CloudProvisioner`]. Each variant tells the caller what to do
/// next, so no one needs to parse messages: see [`ProvisionerError::is_retryable`].
///
/// In JSON: `{"kind": "not_found", "detail": "..."}`, or for the variants with
/// fields `{"kind": "capacity", "detail": {"scope": "zone", "message": "..."}}`.
#[derive(Clone, Debug, PartialEq, thiserror::Error, Serialize, Deserialize)]
#[serde(tag = "kind", content = "detail", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProvisionerError {
    /// The request or shape is not something this backend can do.
    #[error("unsupported: {0}")]
    Unsupported(String),
    /// No capacity for the request; retry with another type or zone, or later.
    #[error("capacity unavailable ({scope}): {message}")]
    Capacity {
        /// What ran out.
        scope: CapacityScope,
        /// What the backend said.
        message: String,
    },
    /// An account limit was reached.
    #[error("quota exceeded: {0}")]
    Quota(String),
    /// Too many requests; retry after `retry_after_ms` when given.
    #[error("rate limited{}: {message}", retry_after_ms.map(|ms| format!(" (retry after {ms} ms)")).unwrap_or_default())]
    RateLimited {
        /// How long to wait, in milliseconds, when the backend said.
        retry_after_ms: Option<u64>,
        /// What the backend said.
        message: String,
    },
    /// The node does not exist. A terminate of a node already gone returns this.
    #[error("not found: {0}")]
    NotFound(String),
    /// Credentials missing, wrong or not allowed.
    #[error("auth: {0}")]
    Auth(String),
    /// The backend could not be reached or answered garbage.
    #[error("transport: {0}")]
    Transport(String),
    /// The backend's configuration is wrong.
    #[error("invalid config: {0}")]
    InvalidConfig(String),
    /// Anything else the backend reported.
    #[error("{0}")]
    Other(String),
    /// The plugin could not answer: it trapped, ran out of time or memory, or
    /// broke the contract. The host stays up and the next call gets a fresh instance.
    #[error("plugin {plugin} {fault}: {message}")]
    Plugin {
        /// The plugin's name.
        plugin: String,
        /// What went wrong.
        fault: PluginFault,
        /// Details for the operator.
        message: String,
    },
}

impl ProvisionerError {
    /// The variant's name as used in JSON (`"capacity"`, `"rate_limited"`, ...).
    #[must_use]
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Unsupported(_) => "unsupported",
            Self::Capacity { .. } => "capacity",
            Self::Quota(_) => "quota",
            Self::RateLimited { .. } => "rate_limited",
            Self::NotFound(_) => "not_found",
            Self::Auth(_) => "auth",
            Self::Transport(_) => "transport",
            Self::InvalidConfig(_) => "invalid_config",
            Self::Other(_) => "other",
            Self::Plugin { .. } => "plugin",
        }
    }

    /// Whether the same call may succeed if tried again later (or, for
    /// capacity, elsewhere). Auth, quota, config and unsupported errors need a
    /// person; a plugin fault other than a timeout is a bug in the plugin.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Capacity { .. } | Self::RateLimited { .. } | Self::Transport(_) => true,
            Self::Plugin { fault, .. } => matches!(fault, PluginFault::Timeout),
            _ => false,
        }
    }

    /// How long to wait before retrying, when the backend said.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after_ms, .. } => retry_after_ms.map(Duration::from_millis),
            _ => None,
        }
    }
}

/// Result of provisioner operations.
pub type Result<T, E = ProvisionerError> = std::result::Result<T, E>;

/// A backend that creates, destroys and lists nodes.
///
/// Methods that talk to a backend are async; [`capacity_types`](Self::capacity_types),
/// [`price_hint`](Self::price_hint) and [`name`](Self::name) are synchronous
/// and must not block. Implementations are shared across tasks (`Send + Sync`).
#[async_trait::async_trait]
pub trait CloudProvisioner: Send + Sync {
    /// Create a node matching `shape`.
    ///
    /// This form carries no request id, so a retry after a crash may create a
    /// second node; prefer [`provision_request`](Self::provision_request).
    async fn provision(&self, shape: &NodeShape) -> Result<NodeHandle>;

    /// Terminate the node `id`. A node already gone is [`ProvisionerError::NotFound`].
    // The seed contract takes `&ProviderNodeId`, an owned-string alias; keep
    // that signature so native backends port over unchanged.
    #[allow(clippy::ptr_arg, reason = "signature shared with existing backends")]
    async fn terminate(&self, id: &ProviderNodeId) -> Result<()>;

    /// Every node this host owns on the backend, and no other.
    async fn describe(&self) -> Result<Vec<NodeHandle>>;

    /// The capacity types the backend really offers.
    fn capacity_types(&self) -> &[CapacityType];

    /// A best-effort estimate for `shape`, or `None` when it cannot be priced.
    fn price_hint(&self, shape: &NodeShape) -> Option<PriceHint>;

    /// A short, stable name of the backend.
    fn name(&self) -> &str;

    /// Create a node for `request`, idempotently: a second call with the same
    /// request id returns the node the first one created.
    ///
    /// The default forwards to [`provision`](Self::provision) and so is only
    /// as idempotent as that; wasm plugins implement it for real.
    async fn provision_request(&self, request: &ProvisionRequest) -> Result<NodeHandle> {
        self.provision(&request.shape).await
    }

    /// The price hint with the backend's reason when it has none. The
    /// default wraps [`price_hint`](Self::price_hint); wasm plugins return
    /// their error or fault.
    ///
    /// # Errors
    /// Why the shape could not be priced, when the backend says.
    fn try_price_hint(&self, shape: &NodeShape) -> Result<Option<PriceHint>> {
        Ok(self.price_hint(shape))
    }
}

/// A set of provisioners by name: what an orchestrator (a fleet, a
/// capacity group, a ranking) works over. The wasm host is one; a map of
/// native backends is another; `wasmprov-fleet` combines several.
pub trait Backends: Send + Sync {
    /// The names of the backends, sorted.
    fn backend_names(&self) -> Vec<String>;

    /// The backend of that name.
    fn backend(&self, name: &str) -> Option<std::sync::Arc<dyn CloudProvisioner>>;

    /// Told how many nodes a backend listed (for metrics); nothing by default.
    fn nodes_listed(&self, _name: &str, _count: usize) {}

    /// Told of an orchestration event on a backend's nodes (`lease_expired`,
    /// `leak_terminated`, ...), for metrics; nothing by default.
    fn fleet_event(&self, _name: &str, _event: &str) {}
}

impl Backends for BTreeMap<String, std::sync::Arc<dyn CloudProvisioner>> {
    fn backend_names(&self) -> Vec<String> {
        self.keys().cloned().collect()
    }

    fn backend(&self, name: &str) -> Option<std::sync::Arc<dyn CloudProvisioner>> {
        self.get(name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_names_are_the_json_names() {
        for f in [
            PluginFault::Trap,
            PluginFault::Timeout,
            PluginFault::CpuLimit,
            PluginFault::MemoryLimit,
            PluginFault::ResourceLimit,
            PluginFault::Contract,
        ] {
            assert_eq!(serde_json::to_value(f).unwrap(), f.as_str());
        }
    }

    #[test]
    fn json_uses_snake_case_names() {
        let shape = NodeShape {
            capacity_type: CapacityType::Spot,
            ..NodeShape::new(2.0, 4 << 30)
        };
        let json = serde_json::to_value(&shape).unwrap();
        assert_eq!(json["capacity_type"], "spot");
        assert_eq!(json["memory_bytes"], 4u64 << 30);
        let back: NodeShape = serde_json::from_value(json).unwrap();
        assert_eq!(back, shape);

        let state = serde_json::to_value(JoinState::Provisioning).unwrap();
        assert_eq!(state, "provisioning");
        assert_eq!(
            serde_json::to_value(CapacityType::OnDemand).unwrap(),
            "on_demand"
        );
    }

    #[test]
    fn shapes_are_validated() {
        assert!(NodeShape::new(2.0, 4 << 30).validate().is_ok());
        assert!(NodeShape::new(0.5, 1).validate().is_ok());
        let typed = NodeShape {
            instance_type: Some("cx22".into()),
            ..NodeShape::new(0.0, 0)
        };
        assert!(typed.validate().is_ok(), "a type alone is a shape");
        let labels = |n: usize, k: usize, v: usize| NodeShape {
            labels: (0..n)
                .map(|i| {
                    (
                        format!("{i:03}{}", "k".repeat(k.saturating_sub(3))),
                        "v".repeat(v),
                    )
                })
                .collect(),
            ..NodeShape::default()
        };
        assert!(labels(64, 128, 256).validate().is_ok());
        for (bad, field) in [
            (NodeShape::new(0.0, 0), "cpu"),
            (NodeShape::new(0.0, 1 << 30), "cpu"),
            (NodeShape::new(1.0, 0), "memory"),
            (NodeShape::new(f64::NAN, 1), "cpu"),
            (NodeShape::new(f64::INFINITY, 1), "cpu"),
            (NodeShape::new(-1.0, 1), "cpu"),
            (NodeShape::new(1e9, 1), "cpu"),
            (
                NodeShape {
                    instance_type: Some("cx22".into()),
                    ..NodeShape::new(0.0, 1)
                },
                "cpu",
            ),
            (
                NodeShape {
                    gpu: 65,
                    ..NodeShape::default()
                },
                "gpu",
            ),
            (labels(65, 1, 1), "labels"),
            (labels(1, 129, 1), "label keys"),
            (labels(1, 1, 257), "label values"),
            (
                NodeShape {
                    zone: Some(String::new()),
                    ..NodeShape::default()
                },
                "zone",
            ),
            (
                NodeShape {
                    instance_type: Some("t".repeat(129)),
                    ..NodeShape::default()
                },
                "instance_type",
            ),
        ] {
            match bad.validate() {
                Err(ProvisionerError::Unsupported(m)) => {
                    assert!(m.contains(field), "{field}: {m}");
                    assert!(m.starts_with("invalid shape"), "{m}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn partial_shape_json_takes_defaults() {
        let shape: NodeShape = serde_json::from_str(r#"{"cpu": 8}"#).unwrap();
        assert_eq!(shape.cpu, 8.0);
        assert_eq!(shape.memory_bytes, 1 << 30);
        assert_eq!(shape.capacity_type, CapacityType::OnDemand);
    }

    #[test]
    fn errors_are_tagged_by_kind_and_classified() {
        let err = ProvisionerError::RateLimited {
            retry_after_ms: Some(1500),
            message: "slow down".into(),
        };
        let json = serde_json::to_value(&err).unwrap();
        assert_eq!(json["kind"], "rate_limited");
        assert_eq!(json["detail"]["retry_after_ms"], 1500);
        let nf = serde_json::to_value(ProvisionerError::NotFound("x".into())).unwrap();
        assert_eq!(nf, serde_json::json!({"kind": "not_found", "detail": "x"}));
        assert_eq!(err.kind(), "rate_limited");
        assert!(err.is_retryable());
        assert_eq!(err.retry_after(), Some(Duration::from_millis(1500)));
        assert_eq!(
            err.to_string(),
            "rate limited (retry after 1500 ms): slow down"
        );

        let cap = ProvisionerError::Capacity {
            scope: CapacityScope::Zone,
            message: "fsn1 full".into(),
        };
        assert!(cap.is_retryable());
        assert_eq!(cap.to_string(), "capacity unavailable (zone): fsn1 full");

        for fatal in [
            ProvisionerError::Auth("bad token".into()),
            ProvisionerError::Quota("20 servers".into()),
            ProvisionerError::InvalidConfig("no image".into()),
            ProvisionerError::Unsupported("gpu".into()),
        ] {
            assert!(!fatal.is_retryable(), "{fatal} must not be retryable");
        }
        let trap = ProvisionerError::Plugin {
            plugin: "p".into(),
            fault: PluginFault::Trap,
            message: "unreachable".into(),
        };
        assert!(!trap.is_retryable());
        assert_eq!(trap.to_string(), "plugin p trapped: unreachable");
        let back: ProvisionerError =
            serde_json::from_value(serde_json::to_value(&trap).unwrap()).unwrap();
        assert_eq!(back, trap);
    }

    struct Native;

    #[async_trait::async_trait]
    impl CloudProvisioner for Native {
        async fn provision(&self, shape: &NodeShape) -> Result<NodeHandle> {
            Ok(NodeHandle {
                provider_id: format!("n-{}", shape.cpu),
                address: None,
                zone: shape.zone.clone(),
                capacity_type: shape.capacity_type,
                join_state: JoinState::Provisioning,
                instance_type: None,
                labels: shape.labels.clone(),
            })
        }
        async fn terminate(&self, id: &ProviderNodeId) -> Result<()> {
            Err(ProvisionerError::NotFound(id.clone()))
        }
        async fn describe(&self) -> Result<Vec<NodeHandle>> {
            Ok(Vec::new())
        }
        fn capacity_types(&self) -> &[CapacityType] {
            &[CapacityType::OnDemand]
        }
        fn price_hint(&self, _shape: &NodeShape) -> Option<PriceHint> {
            None
        }
        fn name(&self) -> &str {
            "native"
        }
    }

    #[tokio::test]
    async fn default_provision_request_forwards_the_shape() {
        let backend: std::sync::Arc<dyn CloudProvisioner> = std::sync::Arc::new(Native);
        let req = ProvisionRequest {
            request_id: "r1".into(),
            shape: NodeShape::new(3.0, 1 << 30),
        };
        let node = backend.provision_request(&req).await.unwrap();
        assert_eq!(node.provider_id, "n-3");
        assert!(matches!(
            backend.terminate(&"x".to_string()).await,
            Err(ProvisionerError::NotFound(id)) if id == "x"
        ));
    }
}
