//! The template node of a group: the `v1.Node` the autoscaler simulates when
//! it considers growing a group, above all one with no node yet (scale from
//! zero). Built from the group's cheapest fitting offering, its labels and
//! taints, and the kubelet settings its nodes boot with.
//!
//! What the node carries:
//! - capacity: `cpu`, `memory`, `ephemeral-storage` (when the size is
//!   known), `pods` (the kubelet's `maxPods`, 110 by default: without it no
//!   pod fits the simulated node) and the GPU resource;
//! - allocatable: capacity less the [`Kubelet`] reservation;
//! - the labels a kubelet and a cloud controller put on a real node
//!   (`kubernetes.io/arch`, `kubernetes.io/os`, `kubernetes.io/hostname`,
//!   `node.kubernetes.io/instance-type`, `topology.kubernetes.io/zone`),
//!   [`GPU_LABEL`], then the group's own labels; the group's taints;
//! - a Ready condition and no pressure conditions, as a fresh node reports.
//!
//! The real node must match: the group's boot data gives the kubelet the
//! same labels (`--node-labels`, including [`GPU_LABEL`] and the instance
//! type), taints (`--register-with-taints`) and reservations. That is why
//! [`check_labels`] refuses labels a kubelet may not set on its own node.
//!
//! ```
//! use wasmprov_api::{Arch, Offering};
//! use wasmprov_autoscaler::template::{GPU_LABEL, Kubelet, NodeTemplate};
//!
//! let offering = Offering {
//!     instance_type: "g5.xlarge".into(),
//!     cpu: 4.0,
//!     memory_bytes: 16 << 30,
//!     gpu: 1,
//!     gpu_vendor: Some("nvidia".into()),
//!     gpu_model: Some("nvidia-a10g".into()),
//!     arch: Some(Arch::X86_64),
//!     ..Offering::default()
//! };
//! let template = NodeTemplate::new("gpu", "aws-ec2", offering);
//! let node = template.node().unwrap();
//! let labels = &node.metadata.as_ref().unwrap().labels;
//! assert_eq!(labels["kubernetes.io/arch"], "amd64");
//! assert_eq!(labels[GPU_LABEL], "nvidia-a10g");
//! let status = node.status.as_ref().unwrap();
//! assert_eq!(status.capacity["nvidia.com/gpu"].string.as_deref(), Some("1"));
//! assert_eq!(status.allocatable["pods"].string.as_deref(), Some("110"));
//! assert!(!template.node_bytes().unwrap().is_empty());
//! ```

use std::collections::BTreeMap;

use prost::Message;
use serde::Deserialize;
use wasmprov_api::{Arch, Offering};

use crate::k8s::{
    self, LabelError, core_v1, format_bytes, format_count, format_millis, meta_v1, quantity,
};

/// The label that names a node's GPU model (`nvidia-a10g`), answered by
/// GPULabel and set on every GPU node of a group, by the template and by
/// the node's kubelet.
///
/// Prefixed with the project's domain, as its other labels are
/// (`wasmprov.io/pool`): an unprefixed key (`accelerator`) would collide
/// with users' own labels, and the `kubernetes.io` namespace is Kubernetes'
/// own, where a kubelet may not set new keys on its node.
pub const GPU_LABEL: &str = "wasmprov.io/accelerator";

/// The template node's annotation naming its node group.
pub(crate) const GROUP_ANNOTATION: &str = "wasmprov.io/node-group";

/// The template node's annotation naming the plugin of its offering.
pub(crate) const PLUGIN_ANNOTATION: &str = "wasmprov.io/plugin";

/// The template node's annotation naming its offering's instance type.
pub(crate) const INSTANCE_TYPE_ANNOTATION: &str = "wasmprov.io/instance-type";

/// The kubelet's default `maxPods`.
pub const DEFAULT_MAX_PODS: u32 = 110;

/// The kubelet's default hard eviction threshold on memory
/// (`memory.available<100Mi`).
pub const DEFAULT_EVICTION_MEMORY_BYTES: u64 = 100 << 20;

/// The kubelet's default hard eviction threshold on the node's file system
/// (`nodefs.available<10%`).
pub const DEFAULT_EVICTION_DISK_PERCENT: u8 = 10;

/// Label keys the template derives itself; a group may not set them.
const DERIVED: [&str; 8] = [
    "kubernetes.io/hostname",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
    GPU_LABEL,
];

const ARCH_LABEL: &str = "kubernetes.io/arch";
const OS_LABEL: &str = "kubernetes.io/os";

/// A template that cannot be built, or a group's labels or taints that
/// Kubernetes (or the node's kubelet) would refuse.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// A label or taint key or value is malformed.
    #[error(transparent)]
    Label(#[from] LabelError),
    /// A label the node's kubelet may not set on itself.
    #[error(
        "label {key:?} is in a namespace a kubelet may not label its own node with \
         (kubernetes.io and k8s.io, except kubelet.kubernetes.io, node.kubernetes.io and the \
         well-known keys); the node would never carry it. Use your own prefix, e.g. \
         \"example.com/{name}\""
    )]
    NotSelfSettable {
        /// The key.
        key: String,
        /// Its name part, for the example.
        name: String,
    },
    /// A label the template sets from the offering or the group's zone.
    #[error(
        "label {key:?} is set by wasmprov from the offering (instance type, zone, GPU model, \
         hostname); leave it out of the group's labels"
    )]
    Derived {
        /// The key.
        key: String,
    },
    /// A taint effect outside Kubernetes' three.
    #[error("taint effect {effect:?}: use NoSchedule, PreferNoSchedule or NoExecute")]
    TaintEffect {
        /// What was given.
        effect: String,
    },
    /// A taint not in `key[=value]:Effect` form.
    #[error("taint {text:?}: write key[=value]:Effect, e.g. \"gpu=true:NoSchedule\"")]
    TaintForm {
        /// What was given.
        text: String,
    },
    /// Two taints with the same key and effect.
    #[error("taint {key:?} with effect {effect} is given twice")]
    DuplicateTaint {
        /// The key.
        key: String,
        /// The effect.
        effect: TaintEffect,
    },
    /// The offering's CPU count is zero, negative or not a number.
    #[error("offering {instance_type:?} has {cpu} vCPUs; a node needs at least 1m (0.001)")]
    Cpu {
        /// The offering.
        instance_type: String,
        /// Its CPU count.
        cpu: f64,
    },
    /// The offering has no memory.
    #[error("offering {instance_type:?} has no memory")]
    Memory {
        /// The offering.
        instance_type: String,
    },
    /// The reservation takes all of a resource.
    #[error(
        "the kubelet reservation for {resource} ({reserved}) leaves nothing of the \
         {capacity} that {instance_type:?} has; lower the group's reservation"
    )]
    Reservation {
        /// The offering.
        instance_type: String,
        /// `cpu` or `memory`.
        resource: &'static str,
        /// Capacity, as a quantity.
        capacity: String,
        /// Reservation, as a quantity.
        reserved: String,
    },
    /// GPUs of a vendor whose Kubernetes resource name is not known.
    #[error(
        "offering {instance_type:?} has GPUs of vendor {vendor:?}, whose device plugin's \
         resource name wasmprov does not know; set the group's gpu_resource (e.g. \
         \"nvidia.com/gpu\")"
    )]
    GpuResource {
        /// The offering.
        instance_type: String,
        /// The vendor given or read from the model ("" when neither says).
        vendor: String,
    },
    /// A label value derived from the offering or group is not a label value.
    #[error("{what} {value:?} cannot be a Kubernetes label value ({why})")]
    DerivedValue {
        /// What it is ("instance type", "zone", "GPU model").
        what: &'static str,
        /// The value.
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// A group label contradicts the offering.
    #[error("the group's label {key}={given:?} contradicts the offering's {derived:?}")]
    Conflict {
        /// The key.
        key: String,
        /// The group's value.
        given: String,
        /// The offering's value.
        derived: String,
    },
}

/// How a taint keeps pods away.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
pub enum TaintEffect {
    /// New pods that do not tolerate it are not scheduled.
    NoSchedule,
    /// The scheduler avoids the node when it can.
    PreferNoSchedule,
    /// Pods that do not tolerate it are also evicted.
    NoExecute,
}

impl TaintEffect {
    /// Kubernetes' spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoSchedule => "NoSchedule",
            Self::PreferNoSchedule => "PreferNoSchedule",
            Self::NoExecute => "NoExecute",
        }
    }
}

impl std::fmt::Display for TaintEffect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for TaintEffect {
    type Err = TemplateError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "NoSchedule" => Ok(Self::NoSchedule),
            "PreferNoSchedule" => Ok(Self::PreferNoSchedule),
            "NoExecute" => Ok(Self::NoExecute),
            _ => Err(TemplateError::TaintEffect { effect: s.into() }),
        }
    }
}

/// A taint of a group's nodes. Built only through [`Taint::new`], parsing
/// (`key[=value]:Effect`, as `kubectl taint` writes it) or deserializing
/// (`{ key, value, effect }`), each of which checks it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "RawTaint")]
pub struct Taint {
    key: String,
    value: String,
    effect: TaintEffect,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTaint {
    key: String,
    #[serde(default)]
    value: String,
    effect: String,
}

impl TryFrom<RawTaint> for Taint {
    type Error = TemplateError;

    fn try_from(raw: RawTaint) -> Result<Self, Self::Error> {
        Taint::new(&raw.key, &raw.value, raw.effect.parse()?)
    }
}

impl Taint {
    /// A checked taint: the key a qualified name, the value a label value.
    ///
    /// # Errors
    /// [`TemplateError::Label`] naming what Kubernetes would refuse.
    pub fn new(key: &str, value: &str, effect: TaintEffect) -> Result<Self, TemplateError> {
        k8s::check_key(key)?;
        k8s::check_value(key, value)?;
        Ok(Self {
            key: key.into(),
            value: value.into(),
            effect,
        })
    }

    /// The key.
    #[must_use]
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The value (may be empty).
    #[must_use]
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The effect.
    #[must_use]
    pub fn effect(&self) -> TaintEffect {
        self.effect
    }
}

impl std::str::FromStr for Taint {
    type Err = TemplateError;

    /// `key=value:Effect` or `key:Effect`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kv, effect) = s
            .rsplit_once(':')
            .ok_or_else(|| TemplateError::TaintForm { text: s.into() })?;
        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
        Self::new(key, value, effect.parse()?)
    }
}

impl std::fmt::Display for Taint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect)
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect)
        }
    }
}

/// Checks a group's labels when the configuration is read: each key and
/// value valid, each key one a kubelet may set on its own node, none of the
/// keys the template derives itself, and `kubernetes.io/os` only `linux`.
///
/// # Errors
/// The first fault, as a [`TemplateError`] that says how to fix it.
pub fn check_labels(labels: &BTreeMap<String, String>) -> Result<(), TemplateError> {
    for (key, value) in labels {
        k8s::check_key(key)?;
        k8s::check_value(key, value)?;
        if DERIVED.contains(&key.as_str()) {
            return Err(TemplateError::Derived { key: key.clone() });
        }
        // wasmprov's nodes run Linux: the template says so, and a group
        // saying otherwise would have the scheduler place Windows pods on
        // them.
        if key == OS_LABEL && value != "linux" {
            return Err(TemplateError::Conflict {
                key: key.clone(),
                given: value.clone(),
                derived: "linux".to_owned(),
            });
        }
        if !k8s::kubelet_may_set(key) {
            let name = key.rsplit('/').next().unwrap_or(key).to_owned();
            return Err(TemplateError::NotSelfSettable {
                key: key.clone(),
                name,
            });
        }
    }
    Ok(())
}

/// Checks a group's taints: no key and effect given twice (Kubernetes
/// refuses such a node).
///
/// # Errors
/// [`TemplateError::DuplicateTaint`].
pub fn check_taints(taints: &[Taint]) -> Result<(), TemplateError> {
    let mut seen = std::collections::BTreeSet::new();
    for t in taints {
        if !seen.insert((t.key.as_str(), t.effect)) {
            return Err(TemplateError::DuplicateTaint {
                key: t.key.clone(),
                effect: t.effect,
            });
        }
    }
    Ok(())
}

/// Quantities in the configuration, as Kubernetes writes them.
fn de_quantity<'de, D, F>(d: D, scale: F) -> Result<u64, D::Error>
where
    D: serde::Deserializer<'de>,
    F: Fn(&k8s::ParsedQuantity) -> Result<u64, k8s::QuantityError>,
{
    let text = String::deserialize(d)?;
    k8s::parse_quantity(&text)
        .and_then(|q| scale(&q))
        .map_err(serde::de::Error::custom)
}

fn de_opt_millis<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_quantity(d, k8s::ParsedQuantity::milli_value).map(Some)
}

fn de_opt_bytes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    de_quantity(d, k8s::ParsedQuantity::value).map(Some)
}

fn de_bytes<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    de_quantity(d, k8s::ParsedQuantity::value)
}

/// The kubelet settings a group's nodes boot with, as far as they shape
/// what pods may use. Deserializes from a table of the group's
/// configuration with quantities as Kubernetes writes them:
///
/// ```toml
/// max_pods = 58
/// reserved_cpu = "200m"       # kube-reserved + system-reserved
/// reserved_memory = "1Gi"
/// eviction_memory = "100Mi"   # evictionHard memory.available
/// eviction_disk_percent = 10  # evictionHard nodefs.available
/// ```
///
/// Left out, the reservations follow the tiers GKE documents for its nodes
/// (and EKS's bootstrap uses for CPU), which grow more slowly than the
/// machine:
/// - CPU: 6% of the first core, 1% of the second, 0.5% of the third and
///   fourth, 0.25% of every core above four;
/// - memory: 255 MiB below 1 GiB; else 25% of the first 4 GiB, 20% of the
///   next 4, 10% of the next 8, 6% of the next 112 and 2% above 128 GiB;
///
/// plus the kubelet's default hard eviction thresholds: 100 MiB of memory
/// and 10% of the node's disk.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Kubelet {
    /// `maxPods`: the node's `pods` capacity.
    pub max_pods: u32,
    /// CPU reserved for the system and Kubernetes' daemons, in millicores;
    /// `None`: the tiers above.
    #[serde(rename = "reserved_cpu", deserialize_with = "de_opt_millis")]
    pub reserved_cpu_millis: Option<u64>,
    /// Memory reserved for the system and Kubernetes' daemons, in bytes;
    /// `None`: the tiers above.
    #[serde(rename = "reserved_memory", deserialize_with = "de_opt_bytes")]
    pub reserved_memory_bytes: Option<u64>,
    /// The hard eviction threshold on available memory, in bytes.
    #[serde(rename = "eviction_memory", deserialize_with = "de_bytes")]
    pub eviction_memory_bytes: u64,
    /// The hard eviction threshold on the node's disk, in percent.
    pub eviction_disk_percent: u8,
}

impl Default for Kubelet {
    fn default() -> Self {
        Self {
            max_pods: DEFAULT_MAX_PODS,
            reserved_cpu_millis: None,
            reserved_memory_bytes: None,
            eviction_memory_bytes: DEFAULT_EVICTION_MEMORY_BYTES,
            eviction_disk_percent: DEFAULT_EVICTION_DISK_PERCENT,
        }
    }
}

/// `Σ portion × rate` over tiers of (width, rate in basis points), the last
/// tier unbounded; rounded up.
fn tiered(amount: u64, tiers: &[(u64, u128)], last_rate: u128) -> u64 {
    let mut left = u128::from(amount);
    let mut total: u128 = 0;
    for &(width, rate) in tiers {
        let part = left.min(u128::from(width));
        total += part * rate;
        left -= part;
    }
    total += left * last_rate;
    u64::try_from(total.div_ceil(10_000)).unwrap_or(u64::MAX)
}

impl Kubelet {
    /// CPU reserved on a node of `cpu_millis`, in millicores.
    #[must_use]
    pub fn reserved_cpu(&self, cpu_millis: u64) -> u64 {
        self.reserved_cpu_millis
            .unwrap_or_else(|| tiered(cpu_millis, &[(1_000, 600), (1_000, 100), (2_000, 50)], 25))
    }

    /// Memory reserved on a node of `memory_bytes`, eviction threshold
    /// included, in bytes.
    #[must_use]
    pub fn reserved_memory(&self, memory_bytes: u64) -> u64 {
        const GI: u64 = 1 << 30;
        let reserved = self.reserved_memory_bytes.unwrap_or_else(|| {
            if memory_bytes < GI {
                255 << 20
            } else {
                tiered(
                    memory_bytes,
                    &[
                        (4 * GI, 2_500),
                        (4 * GI, 2_000),
                        (8 * GI, 1_000),
                        (112 * GI, 600),
                    ],
                    200,
                )
            }
        });
        reserved.saturating_add(self.eviction_memory_bytes)
    }

    /// Disk reserved on a node of `disk_bytes` (the eviction threshold).
    #[must_use]
    pub fn reserved_disk(&self, disk_bytes: u64) -> u64 {
        let percent = u128::from(self.eviction_disk_percent.min(100));
        u64::try_from((u128::from(disk_bytes) * percent).div_ceil(100)).unwrap_or(u64::MAX)
    }
}

/// Everything the template of one group is built from.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct NodeTemplate {
    /// The node group's id.
    pub group: String,
    /// The plugin whose offering it is.
    pub plugin: String,
    /// The group's cheapest fitting offering.
    pub offering: Offering,
    /// The group's labels (checked with [`check_labels`] when read).
    pub labels: BTreeMap<String, String>,
    /// The group's taints.
    pub taints: Vec<Taint>,
    /// The zone new nodes go to; `None`: the offering's only zone, if it
    /// has exactly one, else no zone label.
    pub zone: Option<String>,
    /// The size of a node's disk; `None`: the offering's `disk_bytes`, if
    /// known, else no `ephemeral-storage`. (For clouds whose offerings give
    /// the largest volume a request may ask for, such as EC2's, set it to
    /// the size the group's nodes get.)
    pub ephemeral_storage_bytes: Option<u64>,
    /// The GPU resource name; `None`: the vendor's (`nvidia.com/gpu`,
    /// `amd.com/gpu`, `gpu.intel.com/i915`).
    pub gpu_resource: Option<String>,
    /// The kubelet settings the group's nodes boot with.
    pub kubelet: Kubelet,
}

/// The Kubernetes resource name of a vendor's GPUs, as its device plugin
/// advertises them.
#[must_use]
pub fn gpu_resource_of(vendor: &str) -> Option<&'static str> {
    match vendor.to_ascii_lowercase().as_str() {
        "nvidia" => Some("nvidia.com/gpu"),
        "amd" => Some("amd.com/gpu"),
        "intel" => Some("gpu.intel.com/i915"),
        _ => None,
    }
}

/// The vendor an offering's GPUs are of: as given, else the first word of
/// the model (`nvidia-a10g`).
fn gpu_vendor(offering: &Offering) -> Option<String> {
    offering
        .gpu_vendor
        .clone()
        .filter(|v| !v.is_empty())
        .or_else(|| {
            let model = offering.gpu_model.as_deref()?;
            let first = model.split(['-', '_', ' ']).next()?;
            gpu_resource_of(first).map(|_| first.to_ascii_lowercase())
        })
}

/// The value of [`GPU_LABEL`] for an offering with GPUs: its model, else its
/// vendor. `None` without GPUs.
#[must_use]
pub fn gpu_type(offering: &Offering) -> Option<String> {
    if offering.gpu == 0 {
        return None;
    }
    offering
        .gpu_model
        .clone()
        .filter(|m| !m.is_empty())
        .or_else(|| gpu_vendor(offering))
}

/// GetAvailableGPUTypes: every GPU type among `offerings`, each mapped to
/// an empty `Any`. The autoscaler reads only the keys (its Go side turns
/// the map into a set), and upstream's example server sends empty values
/// too.
#[must_use]
pub fn gpu_types<'a>(
    offerings: impl IntoIterator<Item = &'a Offering>,
) -> BTreeMap<String, prost_types::Any> {
    offerings
        .into_iter()
        .filter_map(gpu_type)
        .map(|t| (t, prost_types::Any::default()))
        .collect()
}

/// Kubernetes' name of an architecture (Go's `GOARCH`).
#[must_use]
pub fn kubernetes_arch(arch: Arch) -> &'static str {
    match arch {
        Arch::X86_64 => "amd64",
        Arch::Arm64 => "arm64",
    }
}

/// A node name (and hostname label value) for the template of `group`:
/// lowercase letters, digits and '-', at most 63 characters. The autoscaler
/// renames template nodes anyway; this one only has to be valid.
fn node_name(group: &str) -> String {
    let mut name = String::from("template-");
    for c in group.chars() {
        let c = c.to_ascii_lowercase();
        name.push(if c.is_ascii_alphanumeric() { c } else { '-' });
    }
    name.truncate(63);
    let trimmed = name.trim_end_matches('-');
    trimmed.to_owned()
}

fn derived_value(what: &'static str, value: &str) -> Result<String, TemplateError> {
    match k8s::check_value("", value) {
        Ok(()) if !value.is_empty() => Ok(value.to_owned()),
        Ok(()) => Err(TemplateError::DerivedValue {
            what,
            value: value.into(),
            why: "empty".into(),
        }),
        Err(e) => Err(TemplateError::DerivedValue {
            what,
            value: value.into(),
            why: match e {
                LabelError::Value { why, .. } | LabelError::Key { why, .. } => why.into(),
            },
        }),
    }
}

fn condition(kind: &str, status: &str, reason: &str, message: &str) -> core_v1::NodeCondition {
    core_v1::NodeCondition {
        r#type: Some(kind.into()),
        status: Some(status.into()),
        reason: Some(reason.into()),
        message: Some(message.into()),
    }
}

impl NodeTemplate {
    /// A template with no labels, taints, zone or disk size and the
    /// kubelet's defaults.
    #[must_use]
    pub fn new(group: &str, plugin: &str, offering: Offering) -> Self {
        Self {
            group: group.into(),
            plugin: plugin.into(),
            offering,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            zone: None,
            ephemeral_storage_bytes: None,
            gpu_resource: None,
            kubelet: Kubelet::default(),
        }
    }

    /// The template node.
    ///
    /// # Errors
    /// A [`TemplateError`] when the offering cannot make a node (no CPU or
    /// memory, GPUs of an unknown vendor, a reservation larger than the
    /// machine), when a value it derives is no label value, or when the
    /// group's labels or taints are refused (see [`check_labels`]).
    pub fn node(&self) -> Result<core_v1::Node, TemplateError> {
        check_labels(&self.labels)?;
        check_taints(&self.taints)?;
        let o = &self.offering;
        let cpu_millis = if o.cpu.is_finite() && o.cpu >= 0.001 {
            // Rounded to the nearest millicore; 1e6 cores at most is far
            // beyond any machine and keeps the cast exact.
            (o.cpu.min(1e6) * 1000.0).round() as u64
        } else {
            return Err(TemplateError::Cpu {
                instance_type: o.instance_type.clone(),
                cpu: o.cpu,
            });
        };
        if o.memory_bytes == 0 {
            return Err(TemplateError::Memory {
                instance_type: o.instance_type.clone(),
            });
        }
        let reserved_cpu = self.kubelet.reserved_cpu(cpu_millis);
        let reserved_memory = self.kubelet.reserved_memory(o.memory_bytes);
        if reserved_cpu >= cpu_millis {
            return Err(TemplateError::Reservation {
                instance_type: o.instance_type.clone(),
                resource: "cpu",
                capacity: format_millis(cpu_millis),
                reserved: format_millis(reserved_cpu),
            });
        }
        if reserved_memory >= o.memory_bytes {
            return Err(TemplateError::Reservation {
                instance_type: o.instance_type.clone(),
                resource: "memory",
                capacity: format_bytes(o.memory_bytes),
                reserved: format_bytes(reserved_memory),
            });
        }

        let mut capacity = BTreeMap::new();
        let mut allocatable = BTreeMap::new();
        let mut both = |name: &str, cap: String, alloc: String| {
            capacity.insert(name.to_owned(), quantity(cap));
            allocatable.insert(name.to_owned(), quantity(alloc));
        };
        both(
            "cpu",
            format_millis(cpu_millis),
            format_millis(cpu_millis - reserved_cpu),
        );
        both(
            "memory",
            format_bytes(o.memory_bytes),
            format_bytes(o.memory_bytes - reserved_memory),
        );
        if let Some(disk) = self.ephemeral_storage_bytes.or(o.disk_bytes) {
            both(
                "ephemeral-storage",
                format_bytes(disk),
                format_bytes(disk - self.kubelet.reserved_disk(disk)),
            );
        }
        let pods = format_count(u64::from(self.kubelet.max_pods));
        both("pods", pods.clone(), pods);

        let name = node_name(&self.group);
        let mut labels = BTreeMap::new();
        labels.insert("kubernetes.io/hostname".to_owned(), name.clone());
        labels.insert(OS_LABEL.to_owned(), "linux".to_owned());
        if let Some(arch) = o.arch {
            labels.insert(ARCH_LABEL.to_owned(), kubernetes_arch(arch).to_owned());
        }
        let instance_type = derived_value("instance type", &o.instance_type)?;
        labels.insert("node.kubernetes.io/instance-type".to_owned(), instance_type);
        let zone = self.zone.clone().or_else(|| match o.zones.as_slice() {
            [only] => Some(only.clone()),
            _ => None,
        });
        if let Some(zone) = zone {
            let zone = derived_value("zone", &zone)?;
            labels.insert("topology.kubernetes.io/zone".to_owned(), zone);
        }
        if o.gpu > 0 {
            let resource = match &self.gpu_resource {
                Some(r) => {
                    k8s::check_key(r)?;
                    r.clone()
                }
                None => gpu_vendor(o)
                    .as_deref()
                    .and_then(gpu_resource_of)
                    .map(str::to_owned)
                    .ok_or_else(|| TemplateError::GpuResource {
                        instance_type: o.instance_type.clone(),
                        vendor: gpu_vendor(o).unwrap_or_default(),
                    })?,
            };
            let count = format_count(u64::from(o.gpu));
            both(&resource, count.clone(), count);
            if let Some(kind) = gpu_type(o) {
                labels.insert(GPU_LABEL.to_owned(), derived_value("GPU model", &kind)?);
            }
        }
        for (key, value) in &self.labels {
            if key == ARCH_LABEL
                && let Some(derived) = labels.get(ARCH_LABEL)
                && derived != value
            {
                return Err(TemplateError::Conflict {
                    key: key.clone(),
                    given: value.clone(),
                    derived: derived.clone(),
                });
            }
            labels.insert(key.clone(), value.clone());
        }
        // The beta spellings the kubelet still writes beside the GA ones.
        for (beta, ga) in [
            ("beta.kubernetes.io/arch", ARCH_LABEL),
            ("beta.kubernetes.io/os", OS_LABEL),
        ] {
            if let Some(v) = labels.get(ga).cloned() {
                labels.insert(beta.to_owned(), v);
            }
        }

        let annotations = BTreeMap::from([
            (GROUP_ANNOTATION.to_owned(), self.group.clone()),
            (PLUGIN_ANNOTATION.to_owned(), self.plugin.clone()),
            (INSTANCE_TYPE_ANNOTATION.to_owned(), o.instance_type.clone()),
        ]);
        let node_info = core_v1::NodeSystemInfo {
            operating_system: labels.get(OS_LABEL).cloned(),
            architecture: labels.get(ARCH_LABEL).cloned(),
        };
        Ok(core_v1::Node {
            metadata: Some(meta_v1::ObjectMeta {
                name: Some(name),
                namespace: None,
                uid: None,
                labels,
                annotations,
            }),
            spec: Some(core_v1::NodeSpec {
                provider_id: None,
                unschedulable: None,
                taints: self
                    .taints
                    .iter()
                    .map(|t| core_v1::Taint {
                        key: Some(t.key.clone()),
                        value: (!t.value.is_empty()).then(|| t.value.clone()),
                        effect: Some(t.effect.as_str().to_owned()),
                    })
                    .collect(),
            }),
            status: Some(core_v1::NodeStatus {
                capacity,
                allocatable,
                conditions: vec![
                    condition(
                        "Ready",
                        "True",
                        "KubeletReady",
                        "template node of a wasmprov node group",
                    ),
                    condition(
                        "MemoryPressure",
                        "False",
                        "KubeletHasSufficientMemory",
                        "template node",
                    ),
                    condition(
                        "DiskPressure",
                        "False",
                        "KubeletHasNoDiskPressure",
                        "template node",
                    ),
                    condition(
                        "PIDPressure",
                        "False",
                        "KubeletHasSufficientPID",
                        "template node",
                    ),
                ],
                node_info: Some(node_info),
            }),
        })
    }

    /// The template node, protobuf-encoded as Go's `v1.Node.Marshal` would
    /// (the NodeGroupTemplateNodeInfo answer's `nodeBytes`).
    ///
    /// # Errors
    /// As [`NodeTemplate::node`].
    pub fn node_bytes(&self) -> Result<Vec<u8>, TemplateError> {
        Ok(self.node()?.encode_to_vec())
    }
}
