//! The provisioner contract as a Rust trait.
//!
//! [`CloudProvisioner`] is what an orchestrator programs against. A wasm
//! plugin loaded by `wasmprov-host` implements it, and so can a native,
//! in-process backend: this crate depends only on `serde`, `thiserror` and
//! `async-trait`, so implementing the trait pulls in no WebAssembly runtime.
//!
//! The value types mirror the WIT package `wasmprov:provisioner@0.2.0` one to
//! one; the guest SDK re-exports them so that plugin authors and embedders
//! share one vocabulary. (The host still loads plugins built for 0.1.0 and
//! maps them onto these types.)
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

mod canonical;
pub mod fit;
pub mod ids;
pub mod network;
pub mod provenance;
pub mod tags;

/// The version of the WIT contract these types mirror.
pub const CONTRACT_VERSION: &str = "0.3.0";

/// A backend's own identifier of a node (an instance id, a server number, an
/// opaque token printed by a script).
pub type ProviderNodeId = String;

pub use network::{AddressKind, AddressRequest, Interfaces, StableAddress, SubnetCapacity, Target};

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

/// A CPU architecture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    /// x86-64 (amd64).
    #[serde(rename = "x86_64", alias = "x86-64", alias = "amd64")]
    X86_64,
    /// 64-bit ARM (aarch64).
    #[serde(alias = "aarch64")]
    Arm64,
}

impl Arch {
    /// The name used in JSON and on the command line (`x86_64`, `arm64`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::X86_64 => "x86_64",
            Self::Arm64 => "arm64",
        }
    }
}

impl std::fmt::Display for Arch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Arch {
    type Err = String;

    /// Accepts the names clouds use: `x86_64`, `x86-64`, `amd64`, `arm64`,
    /// `aarch64` (any case).
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "x86_64" | "x86-64" | "amd64" => Ok(Self::X86_64),
            "arm64" | "aarch64" => Ok(Self::Arm64),
            other => Err(format!(
                "unknown architecture {other:?}: use x86_64 (amd64) or arm64 (aarch64)"
            )),
        }
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
    /// GPU model wanted (`"nvidia-a100"`, `"nvidia-t4"`, `"amd-mi300x"`),
    /// compared without regard to case against the offerings' model names.
    pub gpu_model: Option<String>,
    /// CPU architecture the caller's images run on; `None` is any.
    pub arch: Option<Arch>,
    /// Disk wanted, at least this many bytes; `None` is what the type comes with.
    pub disk_bytes: Option<u64>,
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
            gpu_model: None,
            arch: None,
            disk_bytes: None,
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
/// Longest zone, instance type, GPU vendor or GPU model name, in bytes.
pub const MAX_SHAPE_NAME: usize = 128;
/// Most labels on one node a plugin answers with (the host refuses an
/// answer holding a node with more).
pub const MAX_HANDLE_LABELS: usize = 256;
/// Longest label key on a node a plugin answers with, in bytes.
pub const MAX_HANDLE_LABEL_KEY: usize = 256;
/// Longest label value on a node a plugin answers with, in bytes.
pub const MAX_HANDLE_LABEL_VALUE: usize = 1024;
/// Largest user data a request may carry, in bytes. Clouds allow less
/// (EC2 16 KiB, Hetzner 32 KiB); their plugins refuse what their cloud would.
pub const MAX_USER_DATA: usize = 64 << 10;
/// Most SSH keys a request may carry.
pub const MAX_SSH_KEYS: usize = 32;
/// Longest SSH public key, in bytes.
pub const MAX_SSH_KEY: usize = 16 << 10;
/// Longest image name, in bytes.
pub const MAX_IMAGE: usize = 256;

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
    /// [`ProvisionerError::Unsupported`] naming the field and the rule;
    /// [`ProvisionerError::InvalidConfig`] for a label that is not canonical
    /// (`provenance::label_fault`: whitespace around a key, a control
    /// character, a key that reads as a reserved one).
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
            if let Some(m) = canonical::label_fault(k, v) {
                return Err(ProvisionerError::InvalidConfig(format!(
                    "invalid shape: {m}"
                )));
            }
        }
        for (field, value) in [
            ("zone", &self.zone),
            ("instance_type", &self.instance_type),
            ("gpu_vendor", &self.gpu_vendor),
            ("gpu_model", &self.gpu_model),
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
        if self.disk_bytes == Some(0) {
            return bad("disk_bytes must be above 0 when given".into());
        }
        if self.gpu_model.is_some() && self.gpu == 0 {
            return bad("gpu_model is given but gpu is 0; ask for at least one GPU".into());
        }
        Ok(())
    }
}

/// What a machine is doing, normalized across clouds: the status the cloud
/// reports of the machine itself, where [`JoinState`] is the node's way into
/// a cluster.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    /// Accepted, not running yet.
    Pending,
    /// Running.
    Running,
    /// Being stopped.
    Stopping,
    /// Stopped; it can be started again.
    Stopped,
    /// Being suspended (hibernated, paused).
    Suspending,
    /// Suspended.
    Suspended,
    /// Being deleted.
    Deleting,
    /// Deleted; it will not come back.
    Deleted,
    /// Being repaired or migrated by the cloud.
    Repairing,
    /// No normalized equivalent; see the handle's `raw_state`.
    #[default]
    Unknown,
}

impl NodeStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [Self; 10] = [
        Self::Pending,
        Self::Running,
        Self::Stopping,
        Self::Stopped,
        Self::Suspending,
        Self::Suspended,
        Self::Deleting,
        Self::Deleted,
        Self::Repairing,
        Self::Unknown,
    ];

    /// The name used in JSON and tables.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Stopping => "stopping",
            Self::Stopped => "stopped",
            Self::Suspending => "suspending",
            Self::Suspended => "suspended",
            Self::Deleting => "deleting",
            Self::Deleted => "deleted",
            Self::Repairing => "repairing",
            Self::Unknown => "unknown",
        }
    }

    /// The status a plugin of contract 0.1, which reports only a join
    /// state, is taken to mean: provisioning is pending, booting to joined
    /// is running, failed is unknown (0.1 folded stopped and deleted into it).
    #[must_use]
    pub fn from_join_state(state: JoinState) -> Self {
        match state {
            JoinState::Provisioning => Self::Pending,
            JoinState::Booting | JoinState::Joining | JoinState::Joined => Self::Running,
            JoinState::Failed => Self::Unknown,
        }
    }

    /// Whether the machine is gone or going and will not run again.
    #[must_use]
    pub fn is_gone(self) -> bool {
        matches!(self, Self::Deleting | Self::Deleted)
    }
}

impl std::fmt::Display for NodeStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a node is on its way to cluster membership.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JoinState {
    /// The backend is creating the machine.
    #[default]
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
///
/// Build one with [`NodeHandle::new`] and set what the cloud said; the
/// fields added since contract 0.1 default when missing from JSON.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeHandle {
    /// The backend's own identifier of the node.
    pub provider_id: ProviderNodeId,
    /// The machine's status, normalized.
    #[serde(default)]
    pub status: NodeStatus,
    /// The cloud's own name of the machine's state, unchanged.
    #[serde(default)]
    pub raw_state: Option<String>,
    /// When the cloud created the machine, in milliseconds since the Unix epoch.
    #[serde(default)]
    pub created_at_ms: Option<u64>,
    /// Reachable address, once known (usually the private one).
    pub address: Option<String>,
    /// Address in the cloud's private network.
    #[serde(default)]
    pub private_address: Option<String>,
    /// Public address.
    #[serde(default)]
    pub public_address: Option<String>,
    /// CPU architecture, when known.
    #[serde(default)]
    pub arch: Option<Arch>,
    /// Model of its GPUs, when it has any and the cloud says.
    #[serde(default)]
    pub gpu_model: Option<String>,
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
    /// IPv6 address, when it has one (contract 0.3).
    #[serde(default)]
    pub ipv6_address: Option<String>,
    /// The host name the cloud gave it, when there is one (contract 0.3).
    #[serde(default)]
    pub hostname: Option<String>,
}

impl NodeHandle {
    /// A handle with this id and join state; everything else unknown.
    #[must_use]
    pub fn new(provider_id: impl Into<String>, join_state: JoinState) -> Self {
        Self {
            provider_id: provider_id.into(),
            join_state,
            ..Self::default()
        }
    }
}

/// One instance type a backend can create: what it has, where and at what price.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Offering {
    /// The cloud's name of the type.
    pub instance_type: String,
    /// vCPUs.
    pub cpu: f64,
    /// Memory in bytes.
    pub memory_bytes: u64,
    /// GPUs.
    pub gpu: u32,
    /// GPU vendor, lowercase, when it has GPUs.
    pub gpu_vendor: Option<String>,
    /// GPU model, lowercase (`"nvidia-a10g"`), when it has GPUs.
    pub gpu_model: Option<String>,
    /// CPU architecture, when known.
    pub arch: Option<Arch>,
    /// The most disk a node of the type can have, in bytes, when known: the
    /// disk that comes with it, or, for a disk sized per request (a network
    /// volume such as EC2's EBS), the largest volume a request may ask for.
    /// The fit rule ([`fit`]) accepts any disk up to it.
    pub disk_bytes: Option<u64>,
    /// Zones it is offered in; empty is wherever the backend creates nodes.
    pub zones: Vec<String>,
    /// On-demand price per hour in US dollars, when known.
    pub on_demand_usd: Option<f64>,
    /// Spot price per hour in US dollars, when offered and known.
    pub spot_usd: Option<f64>,
}

impl Offering {
    /// The hourly price under `capacity`, when known.
    #[must_use]
    pub fn price(&self, capacity: CapacityType) -> Option<f64> {
        match capacity {
            CapacityType::OnDemand => self.on_demand_usd,
            CapacityType::Spot => self.spot_usd,
        }
    }
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
    /// What the node boots with.
    #[serde(default)]
    pub boot: BootData,
    /// The cloud's id of the subnet (or network, or VPC) its network
    /// interface goes in; `None` for the backend's configured default
    /// (contract 0.3). A backend that cannot place it so refuses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<String>,
}

impl ProvisionRequest {
    /// A request for `shape` under `request_id`, booting as the backend is configured.
    #[must_use]
    pub fn new(request_id: impl Into<String>, shape: NodeShape) -> Self {
        Self {
            request_id: request_id.into(),
            shape,
            boot: BootData::default(),
            subnet: None,
        }
    }
}

/// What a node boots with, per request. Every field is optional; a backend
/// that cannot honour a field that is given fails
/// [`ProvisionerError::Unsupported`] instead of dropping it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BootData {
    /// The image (AMI, image name or id) to boot instead of the configured one.
    pub image: Option<String>,
    /// User data for the first boot, such as a `#cloud-config` document.
    pub user_data: Option<Vec<u8>>,
    /// SSH public keys (OpenSSH format) to authorize.
    pub ssh_keys: Vec<String>,
}

impl BootData {
    /// The user data as text, for clouds that take it as a string.
    ///
    /// # Errors
    /// [`ProvisionerError::Unsupported`] when it is not UTF-8.
    pub fn user_data_text(&self) -> Result<Option<&str>> {
        self.user_data
            .as_deref()
            .map(std::str::from_utf8)
            .transpose()
            .map_err(|_| {
                ProvisionerError::Unsupported(
                    "this cloud takes user data as text, and this user data is not UTF-8".into(),
                )
            })
    }

    /// Whether nothing is asked.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.image.is_none() && self.user_data.is_none() && self.ssh_keys.is_empty()
    }

    /// The names of the fields that are given (`image`, `user_data`, `ssh_keys`).
    #[must_use]
    pub fn given(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.image.is_some() {
            out.push("image");
        }
        if self.user_data.is_some() {
            out.push("user_data");
        }
        if !self.ssh_keys.is_empty() {
            out.push("ssh_keys");
        }
        out
    }

    /// Checks the boot data against the contract's bounds: image 1 to
    /// [`MAX_IMAGE`] bytes of printable characters, user data at most
    /// [`MAX_USER_DATA`] bytes, at most [`MAX_SSH_KEYS`] keys, each one line
    /// of 1 to [`MAX_SSH_KEY`] bytes in OpenSSH form (`type base64 [comment]`).
    ///
    /// # Errors
    /// [`ProvisionerError::Unsupported`] naming the field and the rule;
    /// [`ProvisionerError::InvalidConfig`] for a label that is not canonical
    /// (`provenance::label_fault`: whitespace around a key, a control
    /// character, a key that reads as a reserved one).
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| {
            Err(ProvisionerError::Unsupported(format!(
                "invalid boot data: {m}"
            )))
        };
        if let Some(image) = &self.image
            && (image.is_empty()
                || image.len() > MAX_IMAGE
                || image.chars().any(|c| c.is_control() || c.is_whitespace()))
        {
            return bad(format!(
                "image is 1 to {MAX_IMAGE} bytes without spaces or control characters, got {} bytes",
                image.len()
            ));
        }
        if let Some(data) = &self.user_data
            && data.len() > MAX_USER_DATA
        {
            return bad(format!(
                "user_data is {} bytes, at most {MAX_USER_DATA} allowed",
                data.len()
            ));
        }
        if self.ssh_keys.len() > MAX_SSH_KEYS {
            return bad(format!(
                "{} ssh_keys, at most {MAX_SSH_KEYS} allowed",
                self.ssh_keys.len()
            ));
        }
        for (i, key) in self.ssh_keys.iter().enumerate() {
            let mut parts = key.split(' ');
            let well_formed = key.len() <= MAX_SSH_KEY
                && !key.chars().any(char::is_control)
                && parts.next().is_some_and(|t| {
                    !t.is_empty()
                        && t.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "-@.".contains(c))
                })
                && parts.next().is_some_and(|b| {
                    !b.is_empty()
                        && b.chars()
                            .all(|c| c.is_ascii_alphanumeric() || "+/=".contains(c))
                });
            if !well_formed {
                return bad(format!(
                    "ssh_keys[{i}] is not one OpenSSH public key line (`type base64 [comment]`, at most {MAX_SSH_KEY} bytes)"
                ));
            }
        }
        Ok(())
    }
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
    /// The request id was already used for a different request (another
    /// shape or boot data).
    #[error("conflict: {0}")]
    Conflict(String),
    /// Anything else the backend reported.
    #[error("{0}")]
    Other(String),
    /// The call failed before anything it asked for left the host: no
    /// HTTP request reached a connected peer and no program was started
    /// (the connection was refused, the name did not resolve, the TLS
    /// handshake failed, the policy denied it). So the backend did nothing
    /// for it, and the same call may simply be tried again. The message
    /// carries the error the call ended with.
    #[error("not sent (nothing left the host): {0}")]
    NotSent(String),
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
            Self::Conflict(_) => "conflict",
            Self::Other(_) => "other",
            Self::NotSent(_) => "not_sent",
            Self::Plugin { .. } => "plugin",
        }
    }

    /// Whether the same call may succeed if tried again later (or, for
    /// capacity, elsewhere). Auth, quota, config and unsupported errors need a
    /// person; a plugin fault other than a timeout is a bug in the plugin.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Capacity { .. }
            | Self::RateLimited { .. }
            | Self::Transport(_)
            | Self::NotSent(_) => true,
            Self::Plugin { fault, .. } => matches!(fault, PluginFault::Timeout),
            _ => false,
        }
    }

    /// Whether this error of a provision proves that the backend made no
    /// node, so that whoever recorded the request may forget it: the
    /// request was refused before any create (an id or shape the backend
    /// cannot take, bad configuration, credentials), the create itself was
    /// refused for capacity or quota (plugins do not retry a create inside
    /// one call, so a refusal is the cloud's whole answer), the request id
    /// names a node made for another request (`conflict`), or nothing left
    /// the host ([`NotSent`](Self::NotSent)). Transport errors, timeouts,
    /// rate limits, plugin faults and anything else may come after the
    /// backend acted.
    #[must_use]
    pub fn made_nothing(&self) -> bool {
        matches!(
            self,
            Self::Unsupported(_)
                | Self::InvalidConfig(_)
                | Self::Auth(_)
                | Self::Capacity { .. }
                | Self::Quota(_)
                | Self::Conflict(_)
                | Self::NotSent(_)
        )
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
    /// `provision` takes a shape only, so the default refuses a request
    /// with a subnet or boot data ([`ProvisionerError::Unsupported`], before
    /// anything is made) rather than make a node without them.
    ///
    /// # Errors
    /// [`ProvisionerError::Unsupported`] for a subnet or boot data;
    /// [`provision`](Self::provision)'s errors.
    async fn provision_request(&self, request: &ProvisionRequest) -> Result<NodeHandle> {
        if let Some(subnet) = &request.subnet {
            return Err(ProvisionerError::Unsupported(format!(
                "backend {} takes no subnet (asked for {subnet:?})",
                self.name()
            )));
        }
        if !request.boot.is_empty() {
            return Err(ProvisionerError::Unsupported(format!(
                "backend {} takes no boot data (given: {})",
                self.name(),
                request.boot.given().join(", ")
            )));
        }
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

    /// The node `id`, when it exists and this host owns it; `None` otherwise.
    ///
    /// The default looks for it in [`describe`](Self::describe); wasm
    /// plugins of contract 0.2 ask the cloud for the one node.
    async fn get(&self, id: &ProviderNodeId) -> Result<Option<NodeHandle>> {
        Ok(self
            .describe()
            .await?
            .into_iter()
            .find(|n| &n.provider_id == id))
    }

    /// Every instance type the backend can create, with what it has and
    /// costs. May do I/O. [`price_hint`](Self::price_hint) agrees with it.
    ///
    /// The default is [`ProvisionerError::Unsupported`]: a backend without
    /// a catalogue is ranked by its price hints alone.
    async fn offerings(&self) -> Result<Vec<Offering>> {
        Err(ProvisionerError::Unsupported(format!(
            "{} has no catalogue of offerings",
            self.name()
        )))
    }

    /// Which interfaces beyond the core calls the backend has. The default
    /// is none: every call below answers [`ProvisionerError::Unsupported`].
    fn interfaces(&self) -> Interfaces {
        Interfaces::default()
    }

    /// Replace the labels of node `id` with `labels` (the ownership and
    /// request-id tags stay), answering the node as it is now.
    async fn set_labels(&self, id: &ProviderNodeId, labels: &Labels) -> Result<NodeHandle> {
        let _ = (id, labels);
        Err(self.lacks("set-labels"))
    }

    /// Put a stable address on node `id`, moving it from any other node.
    async fn assign_address(
        &self,
        id: &ProviderNodeId,
        request: &AddressRequest,
    ) -> Result<StableAddress> {
        let _ = (id, request);
        Err(self.lacks("assign-address"))
    }

    /// Take `address` (an IP or the cloud's id of it) off node `id`; the
    /// address stays the account's.
    async fn release_address(&self, id: &ProviderNodeId, address: &str) -> Result<()> {
        let _ = (id, address);
        Err(self.lacks("release-address"))
    }

    /// Add a node to a target group.
    async fn register_target(&self, target: &Target) -> Result<()> {
        let _ = target;
        Err(self.lacks("register-target"))
    }

    /// Take a node out of a target group.
    async fn deregister_target(&self, target: &Target) -> Result<()> {
        let _ = target;
        Err(self.lacks("deregister-target"))
    }

    /// Every target of a group.
    async fn list_targets(&self, group: &str) -> Result<Vec<Target>> {
        let _ = group;
        Err(self.lacks("list-targets"))
    }

    /// How many addresses `subnet` has free.
    async fn subnet_capacity(&self, subnet: &str) -> Result<SubnetCapacity> {
        let _ = subnet;
        Err(self.lacks("subnet-capacity"))
    }

    /// The error a call the backend lacks answers.
    #[doc(hidden)]
    fn lacks(&self, call: &str) -> ProvisionerError {
        ProvisionerError::Unsupported(format!("{} does not support {call}", self.name()))
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

    /// The owner id the backends tag their nodes with (see
    /// [`provenance::owned_by`]), when the set knows one. A wasm host
    /// answers its own; a fleet checks every node a backend returns
    /// against it.
    fn owner_id(&self) -> Option<String> {
        None
    }

    /// Told how many nodes a backend listed (for metrics); nothing by default.
    fn nodes_listed(&self, _name: &str, _count: usize) {}

    /// Told how many orphans (nodes of this owner the journal cannot prove
    /// it made) a backend listed (for metrics); nothing by default.
    fn orphans_found(&self, _name: &str, _count: usize) {}

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
    fn boot_data_is_bounded() {
        assert!(BootData::default().validate().is_ok());
        let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGw8 ops@example";
        let ok = BootData {
            image: Some("ami-0abc123".into()),
            user_data: Some(vec![0; MAX_USER_DATA]),
            ssh_keys: vec![key.into()],
        };
        assert!(ok.validate().is_ok());
        assert_eq!(ok.given(), ["image", "user_data", "ssh_keys"]);
        for (bad, field) in [
            (
                BootData {
                    image: Some(String::new()),
                    ..BootData::default()
                },
                "image",
            ),
            (
                BootData {
                    image: Some("ubuntu 24.04".into()),
                    ..BootData::default()
                },
                "image",
            ),
            (
                BootData {
                    user_data: Some(vec![0; MAX_USER_DATA + 1]),
                    ..BootData::default()
                },
                "user_data",
            ),
            (
                BootData {
                    ssh_keys: vec![format!("{key}\nssh-rsa AAAA evil")],
                    ..BootData::default()
                },
                "ssh_keys[0]",
            ),
            (
                BootData {
                    ssh_keys: vec!["not-a-key".into()],
                    ..BootData::default()
                },
                "ssh_keys[0]",
            ),
            (
                BootData {
                    ssh_keys: vec![key.into(); MAX_SSH_KEYS + 1],
                    ..BootData::default()
                },
                "ssh_keys",
            ),
        ] {
            match bad.validate() {
                Err(ProvisionerError::Unsupported(m)) => {
                    assert!(m.contains(field), "{field}: {m}");
                }
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn statuses_arches_and_0_1_json() {
        for s in NodeStatus::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
        }
        assert_eq!(
            NodeStatus::from_join_state(JoinState::Joined),
            NodeStatus::Running
        );
        assert_eq!(serde_json::to_value(Arch::X86_64).unwrap(), "x86_64");
        assert_eq!(
            serde_json::from_str::<Arch>("\"aarch64\"").unwrap(),
            Arch::Arm64
        );
        assert_eq!("AMD64".parse::<Arch>().unwrap(), Arch::X86_64);
        assert!("riscv".parse::<Arch>().is_err());
        // A handle as 0.1 wrote it still parses, with the new fields unknown.
        let old: NodeHandle = serde_json::from_str(
            r#"{"provider_id": "n-1", "address": null, "zone": null,
                "capacity_type": "on_demand", "join_state": "booting"}"#,
        )
        .unwrap();
        assert_eq!(old.status, NodeStatus::Unknown);
        let req: ProvisionRequest =
            serde_json::from_str(r#"{"request_id": "r", "shape": {"cpu": 1}}"#).unwrap();
        assert!(req.boot.is_empty());
        let gpu_model_alone = NodeShape {
            gpu_model: Some("nvidia-t4".into()),
            ..NodeShape::default()
        };
        assert!(gpu_model_alone.validate().is_err(), "a model needs a count");
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
                ..Default::default()
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
            boot: Default::default(),
            subnet: None,
        };
        let node = backend.provision_request(&req).await.unwrap();
        assert_eq!(node.provider_id, "n-3");
        // `provision` takes a shape only: a subnet or boot data is refused,
        // never dropped.
        let subnet = ProvisionRequest {
            subnet: Some("subnet-1".into()),
            ..req.clone()
        };
        assert!(matches!(
            backend.provision_request(&subnet).await,
            Err(ProvisionerError::Unsupported(m)) if m.contains("subnet-1")
        ));
        let boot = ProvisionRequest {
            boot: BootData {
                image: Some("ami-1".into()),
                ..BootData::default()
            },
            ..req.clone()
        };
        assert!(matches!(
            backend.provision_request(&boot).await,
            Err(ProvisionerError::Unsupported(m)) if m.contains("boot data")
        ));
        assert!(matches!(
            backend.terminate(&"x".to_string()).await,
            Err(ProvisionerError::NotFound(id)) if id == "x"
        ));
    }
}
