//! `node-groups.toml`: the node groups the autoscaler may scale, each a
//! wasmprov capacity group with what Kubernetes needs to know of its nodes.
//!
//! ```toml
//! [[group]]
//! id = "gpu"                # the group's id (the id syntax of request ids)
//! min = 0
//! max = 4
//! cpu = 8                   # a shape: cpu and memory (and optionally GPUs) ...
//! memory_gib = 32
//! gpu = 1
//! gpu_vendor = "nvidia"
//! # instance_type = "cx22"  # ... or one pinned offering
//! plugins = ["hetzner"]     # empty or absent: every loaded plugin
//! disk_gib = 100           # each node's disk (its ephemeral-storage)
//! labels = { pool = "gpu" }
//! taints = [{ key = "nvidia.com/gpu", value = "present", effect = "NoSchedule" }]
//! # gpu_resource = "example.com/gpu"  # another vendor's GPU resource name
//!
//! [group.kubelet]           # optional: what the nodes' kubelet reserves
//! max_pods = 58
//! reserved_memory = "1Gi"
//!
//! [group.boot]
//! image = "ubuntu-24.04"
//! user_data = "#cloud-config\nruncmd: [[kubeadm, join, --token, '{{node_token}}']]\n"
//!
//! [group.options]           # optional; NodeGroupGetOptions answers them
//! scale_down_utilization_threshold = 0.4
//! scale_down_unneeded_secs = 300
//! ```
//!
//! Unknown keys are refused, as are a `min` above `max`, two groups with one
//! id, a group with neither a shape nor an instance type, labels a node's
//! kubelet may not set or that the template derives (`kubernetes.io/os`
//! other than `linux`, `kubernetes.io/arch` against the group's `arch`),
//! bad or repeated taints, a bad GPU resource name, a `gpu_vendor` with no
//! known GPU resource and no `gpu_resource`, a `{{…}}` in the user data
//! that is not exactly `{{node_token}}`, and kubelet settings no node can have:
//! each error names the group and says what is accepted. So a group whose
//! template Kubernetes would refuse stops `serve` at start, not at the
//! autoscaler's first template request.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use wasmprov_api::{Arch, BootData, NodeShape};
use wasmprov_fleet::CapacityGroup;

use crate::template::{self, Kubelet};

/// The placeholder in `boot.user_data` replaced by a fresh token for each
/// new node.
pub const NODE_TOKEN: &str = "{{node_token}}";

/// Why a node-groups file was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The text is not a node-groups file.
    #[error("{0}")]
    Parse(String),
    /// A group is wrong.
    #[error("group {group:?}: {problem}")]
    Group {
        /// The group's id.
        group: String,
        /// What is wrong, and what is accepted.
        problem: String,
    },
}

/// A taint put on the group's template node, unchecked.
#[deprecated(
    note = "use template::Taint, which is checked when built or read; NodeGroup::taints holds those"
)]
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Taint {
    /// The taint's key.
    pub key: String,
    /// Its value (may be empty).
    #[serde(default)]
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// A group's own autoscaling options (NodeGroupGetOptions); what is not
/// given is the autoscaler's default.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs, reason = "named as the autoscaler's options are")]
pub struct GroupOptions {
    pub scale_down_utilization_threshold: Option<f64>,
    pub scale_down_gpu_utilization_threshold: Option<f64>,
    pub zero_or_max_node_scaling: Option<bool>,
    pub ignore_daemonsets_utilization: Option<bool>,
    pub allow_non_atomic_scale_up_to_max: Option<bool>,
    pub scale_down_unneeded_secs: Option<u64>,
    pub scale_down_unready_secs: Option<u64>,
    pub max_node_provision_secs: Option<u64>,
    pub max_node_startup_secs: Option<u64>,
}

impl GroupOptions {
    /// Whether no option is given.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// What a group's nodes boot with, as written in the file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
struct BootFile {
    image: Option<String>,
    user_data: Option<String>,
    #[serde(default)]
    ssh_keys: Vec<String>,
}

/// One `[[group]]` as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupFile {
    id: String,
    min: u32,
    max: u32,
    cpu: Option<f64>,
    memory_gib: Option<f64>,
    #[serde(default)]
    gpu: u32,
    gpu_vendor: Option<String>,
    gpu_model: Option<String>,
    arch: Option<Arch>,
    disk_gib: Option<u64>,
    zone: Option<String>,
    instance_type: Option<String>,
    #[serde(default)]
    plugins: Vec<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    taints: Vec<template::Taint>,
    gpu_resource: Option<String>,
    #[serde(default)]
    kubelet: Kubelet,
    #[serde(default)]
    boot: BootFile,
    #[serde(default)]
    options: GroupOptions,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    group: Vec<GroupFile>,
}

/// One node group: a capacity group and what its template node carries.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeGroup {
    /// The capacity group (its name is the node group's id).
    pub capacity: CapacityGroup,
    /// Labels of the group's nodes, for the template.
    pub labels: BTreeMap<String, String>,
    /// Taints of the group's nodes, for the template.
    pub taints: Vec<template::Taint>,
    /// The GPU resource name of the group's nodes; `None`: the vendor's
    /// ([`template::gpu_resource_of`]).
    pub gpu_resource: Option<String>,
    /// What the kubelet of the group's nodes reserves, and their max pods.
    /// The size of their disk (the template's `ephemeral-storage`) is the
    /// shape's `disk_bytes` (`disk_gib` in the file).
    pub kubelet: Kubelet,
    /// The group's autoscaling options.
    pub options: GroupOptions,
}

impl NodeGroup {
    /// The group's id.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.capacity.name
    }

    /// A group of `capacity` with no labels, taints or options, the
    /// vendor's GPU resource and the kubelet's defaults.
    #[must_use]
    pub fn new(capacity: CapacityGroup) -> Self {
        Self {
            capacity,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            gpu_resource: None,
            kubelet: Kubelet::default(),
            options: GroupOptions::default(),
        }
    }

    /// The boot data of one new node: the group's, with [`NODE_TOKEN`]
    /// replaced by `token`.
    #[must_use]
    pub fn boot_for(&self, token: &str) -> BootData {
        let mut boot = self.capacity.boot.clone();
        if let Some(text) = boot
            .user_data
            .as_deref()
            .and_then(|b| std::str::from_utf8(b).ok())
            && text.contains(NODE_TOKEN)
        {
            boot.user_data = Some(text.replace(NODE_TOKEN, token).into_bytes());
        }
        boot
    }

    /// Whether the user data asks for a per-node token.
    #[must_use]
    pub fn wants_token(&self) -> bool {
        self.capacity
            .boot
            .user_data
            .as_deref()
            .is_some_and(|b| String::from_utf8_lossy(b).contains(NODE_TOKEN))
    }
}

/// The node groups of a file, in the file's order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeGroups {
    groups: Vec<NodeGroup>,
}

impl NodeGroups {
    /// Groups given directly (each checked as a file's would be).
    ///
    /// # Errors
    /// As [`parse`](Self::parse).
    pub fn new(groups: Vec<NodeGroup>) -> Result<Self, ConfigError> {
        let mut ids = BTreeSet::new();
        for g in &groups {
            let bad = |problem: String| ConfigError::Group {
                group: g.id().to_string(),
                problem,
            };
            g.capacity.validate().map_err(|e| bad(format!("{e:#}")))?;
            if !ids.insert(g.id().to_string()) {
                return Err(bad(
                    "the id is given twice; every group needs its own".into()
                ));
            }
            // What the template would refuse, refused now.
            template::check_labels(&g.labels).map_err(|e| bad(e.to_string()))?;
            template::check_taints(&g.taints).map_err(|e| bad(e.to_string()))?;
            if let Some(arch) = g.capacity.shape.arch
                && let Some(given) = g.labels.get("kubernetes.io/arch")
                && given != template::kubernetes_arch(arch)
            {
                return Err(bad(format!(
                    "label kubernetes.io/arch={given:?} contradicts the group's arch {:?}; leave the label out (the template sets it from the offering)",
                    template::kubernetes_arch(arch)
                )));
            }
            if let Some(r) = &g.gpu_resource {
                crate::k8s::check_key(r)
                    .map_err(|e| bad(format!("gpu_resource: {e} (such as nvidia.com/gpu)")))?;
            }
            if let Some(vendor) = &g.capacity.shape.gpu_vendor
                && g.gpu_resource.is_none()
                && template::gpu_resource_of(vendor).is_none()
            {
                return Err(bad(format!(
                    "gpu_vendor {vendor:?} has no GPU resource wasmprov knows (nvidia, amd and intel have); give gpu_resource, the resource name its device plugin registers (such as \"habana.ai/gaudi\")"
                )));
            }
            if let Some(user_data) = &g.capacity.boot.user_data {
                check_placeholders(&String::from_utf8_lossy(user_data))
                    .map_err(|e| bad(format!("boot.user_data: {e}")))?;
            }
            if g.kubelet.max_pods == 0 {
                return Err(bad(
                    "kubelet.max_pods is 0: no pod would fit a node (the kubelet's default is 110)"
                        .into(),
                ));
            }
            if g.kubelet.eviction_disk_percent >= 100 {
                return Err(bad(format!(
                    "kubelet.eviction_disk_percent {} leaves no disk to pods; give less than 100 (the kubelet's default is 10)",
                    g.kubelet.eviction_disk_percent
                )));
            }
            for (name, v) in [
                (
                    "scale_down_utilization_threshold",
                    g.options.scale_down_utilization_threshold,
                ),
                (
                    "scale_down_gpu_utilization_threshold",
                    g.options.scale_down_gpu_utilization_threshold,
                ),
            ] {
                if v.is_some_and(|v| !(0.0..=1.0).contains(&v)) {
                    return Err(bad(format!("options.{name} must be between 0 and 1")));
                }
            }
        }
        Ok(Self { groups })
    }

    /// Reads `node-groups.toml` text.
    ///
    /// # Errors
    /// Unknown keys, a value of the wrong type, a group that fails
    /// [`CapacityGroup::validate`] (bad id, `min` above `max`, no shape),
    /// two groups with one id, labels or taints
    /// [`template::check_labels`]/[`template::check_taints`] refuse, a bad
    /// GPU resource name, kubelet settings or option.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        let file: File = toml::from_str(text).map_err(|e| {
            ConfigError::Parse(format!(
                "not a node-groups file: {e}(each group is a [[group]] table with id, min, max and a shape: cpu and memory_gib, or instance_type)"
            ))
        })?;
        let groups = file
            .group
            .into_iter()
            .map(GroupFile::into_group)
            .collect::<Result<Vec<_>, _>>()?;
        Self::new(groups)
    }

    /// Reads `path`.
    ///
    /// # Errors
    /// When it cannot be read, or as [`parse`](Self::parse).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::parse(&text).map_err(|e| match e {
            ConfigError::Parse(m) => ConfigError::Parse(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    /// Every group.
    #[must_use]
    pub fn groups(&self) -> &[NodeGroup] {
        &self.groups
    }

    /// The group `id`.
    #[must_use]
    pub fn get(&self, id: &str) -> Option<&NodeGroup> {
        self.groups.iter().find(|g| g.id() == id)
    }
}

impl GroupFile {
    fn into_group(self) -> Result<NodeGroup, ConfigError> {
        let bad = |problem: &str| ConfigError::Group {
            group: self.id.clone(),
            problem: problem.to_string(),
        };
        let gib = |v: f64, what: &str| -> Result<u64, ConfigError> {
            if !(v.is_finite() && v > 0.0 && v < 1e9) {
                return Err(bad(&format!("{what} must be a number of GiB above 0")));
            }
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "checked above: positive and far below u64::MAX"
            )]
            Ok((v * f64::from(1u32 << 30)) as u64)
        };
        let mut shape = match (&self.instance_type, self.cpu, self.memory_gib) {
            (Some(t), None, None) => {
                let mut s = NodeShape::new(0.0, 0);
                s.instance_type = Some(t.clone());
                s
            }
            (None, Some(cpu), Some(mem)) => NodeShape::new(cpu, gib(mem, "memory_gib")?),
            (Some(_), _, _) => {
                return Err(bad(
                    "give either instance_type (one pinned offering) or cpu and memory_gib, not both",
                ));
            }
            _ => {
                return Err(bad(
                    "give a shape: cpu and memory_gib (such as cpu = 2, memory_gib = 4), or instance_type",
                ));
            }
        };
        shape.gpu = self.gpu;
        shape.gpu_vendor = self.gpu_vendor;
        shape.gpu_model = self.gpu_model;
        shape.arch = self.arch;
        shape.zone = self.zone;
        shape.disk_bytes = match self.disk_gib {
            Some(d) => Some(
                d.checked_mul(1 << 30)
                    .ok_or_else(|| bad("disk_gib is too large"))?,
            ),
            None => None,
        };
        let mut capacity = CapacityGroup::new(self.id.clone(), shape, self.min, self.max);
        capacity.plugins = self.plugins;
        capacity.boot = BootData {
            image: self.boot.image,
            user_data: self.boot.user_data.map(String::into_bytes),
            ssh_keys: self.boot.ssh_keys,
        };
        Ok(NodeGroup {
            capacity,
            labels: self.labels,
            taints: self.taints,
            gpu_resource: self.gpu_resource,
            kubelet: self.kubelet,
            options: self.options,
        })
    }
}

/// Refuses a `{{…}}` in user data that is not exactly a placeholder
/// wasmprov replaces ([`NODE_TOKEN`]): `{{ node_token }}`, `{{NODE_TOKEN}}`
/// or `{{other}}` would reach the node verbatim, and its join would fail.
fn check_placeholders(text: &str) -> Result<(), String> {
    let mut rest = text;
    while let Some(at) = rest.find("{{") {
        let from = &rest[at..];
        let found = match from.find("}}") {
            Some(end) => &from[..end + 2],
            None => from,
        };
        if found != NODE_TOKEN {
            let shown: String = found.chars().take(40).collect();
            return Err(format!(
                "{shown:?} is not a placeholder wasmprov fills in; the only one is {NODE_TOKEN} (exactly so: no spaces, lower case)"
            ));
        }
        rest = &from[found.len()..];
    }
    Ok(())
}

/// Seconds as a duration.
pub(crate) fn secs(s: Option<u64>) -> Option<Duration> {
    s.map(Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[group]]
id = "web"
min = 1
max = 5
cpu = 2
memory_gib = 4
plugins = ["hetzner"]
labels = { pool = "web" }
taints = [{ key = "dedicated", value = "web", effect = "NoSchedule" }]
[group.boot]
user_data = "join {{node_token}}"
[group.options]
scale_down_unneeded_secs = 120

[[group]]
id = "pinned"
min = 0
max = 2
instance_type = "cx22"

[[group]]
id = "gpu"
min = 0
max = 2
cpu = 8
memory_gib = 32
gpu = 1
disk_gib = 200
gpu_resource = "example.com/gpu"
[group.kubelet]
max_pods = 58
reserved_memory = "1Gi"
"#;

    #[test]
    fn reads_groups() {
        let groups = NodeGroups::parse(GOOD).expect("parses");
        let web = groups.get("web").expect("web");
        assert_eq!(web.capacity.min, 1);
        assert_eq!(web.capacity.shape.memory_bytes, 4 << 30);
        assert_eq!(web.capacity.plugins, ["hetzner"]);
        assert_eq!(web.labels["pool"], "web");
        assert_eq!(web.options.scale_down_unneeded_secs, Some(120));
        assert!(web.wants_token());
        assert_eq!(
            web.boot_for("abc.def").user_data.as_deref(),
            Some(&b"join abc.def"[..])
        );
        assert_eq!(web.taints, ["dedicated=web:NoSchedule".parse().unwrap()]);
        assert_eq!(web.kubelet, Kubelet::default());
        assert_eq!(web.gpu_resource, None);
        let gpu = groups.get("gpu").expect("gpu");
        assert_eq!(gpu.capacity.shape.disk_bytes, Some(200 << 30));
        assert_eq!(gpu.gpu_resource.as_deref(), Some("example.com/gpu"));
        assert_eq!(gpu.kubelet.max_pods, 58);
        assert_eq!(gpu.kubelet.reserved_memory_bytes, Some(1 << 30));
        assert_eq!(gpu.kubelet.reserved_cpu_millis, None);
        let pinned = groups.get("pinned").expect("pinned");
        assert_eq!(pinned.capacity.shape.instance_type.as_deref(), Some("cx22"));
        assert!(!pinned.wants_token());
    }

    #[test]
    fn accepts_the_known_placeholder_and_a_vendor_with_its_resource() {
        let one = |body: &str| format!("[[group]]\nid = \"g\"\nmin = 0\nmax = 1\n{body}");
        for text in [
            one(
                "cpu = 1\nmemory_gib = 1\n[group.boot]\nuser_data = \"A={{node_token}} B={{node_token}} {x} }}\"",
            ),
            one("cpu = 1\nmemory_gib = 1\n[group.boot]\nuser_data = \"no placeholder\""),
            one(
                "cpu = 8\nmemory_gib = 64\ngpu = 1\ngpu_vendor = \"habana\"\ngpu_resource = \"habana.ai/gaudi\"",
            ),
            one("cpu = 8\nmemory_gib = 64\ngpu = 1\ngpu_vendor = \"NVIDIA\""),
        ] {
            NodeGroups::parse(&text).expect(&text);
        }
    }

    #[test]
    fn refuses_bad_files() {
        let one = |body: &str| format!("[[group]]\nid = \"g\"\n{body}");
        let cases = [
            (
                one("min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\ncolour = 1"),
                "unknown field",
            ),
            (
                one("min = 3\nmax = 1\ncpu = 1\nmemory_gib = 1"),
                "min 3 is above max 1",
            ),
            (one("min = 0\nmax = 1"), "give a shape"),
            (
                one("min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\ninstance_type = \"x\""),
                "not both",
            ),
            (one("min = 0\nmax = 1\ncpu = 1\nmemory_gib = -1"), "above 0"),
            (
                one(
                    "min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\ntaints = [{ key = \"k\", effect = \"Never\" }]",
                ),
                "NoSchedule",
            ),
            (
                one(
                    "min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\n[group.options]\nscale_down_utilization_threshold = 2.0",
                ),
                "between 0 and 1",
            ),
            (
                format!(
                    "{}\n{}",
                    one("min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1"),
                    one("min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1")
                ),
                "given twice",
            ),
            (
                "[[group]]\nid = \"Bad Id\"\nmin = 0\nmax = 1\ncpu = 1\nmemory_gib = 1".into(),
                "not valid",
            ),
            ("[groups]\n".into(), "unknown field"),
            // What the template would refuse is refused when read.
            (
                one("min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\nlabels = { \"bad key!\" = \"x\" }"),
                "bad key!",
            ),
            (
                one(
                    "min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\nlabels = { \"node-role.kubernetes.io/gpu\" = \"\" }",
                ),
                "node-role.kubernetes.io/gpu",
            ),
            (
                one(
                    "min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\nlabels = { \"node.kubernetes.io/instance-type\" = \"x\" }",
                ),
                "node.kubernetes.io/instance-type",
            ),
            (
                one(
                    "min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\ntaints = [{ key = \"k\", effect = \"NoSchedule\" }, { key = \"k\", value = \"v\", effect = \"NoSchedule\" }]",
                ),
                "twice",
            ),
            (
                one(
                    "min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\ntaints = [{ key = \"no spaces\", effect = \"NoSchedule\" }]",
                ),
                "no spaces",
            ),
            (
                one("min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\ngpu_resource = \"a gpu\""),
                "gpu_resource",
            ),
            (
                one("min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\n[group.kubelet]\nmax_pods = 0"),
                "max_pods",
            ),
            (
                one(
                    "min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\n[group.kubelet]\neviction_disk_percent = 100",
                ),
                "eviction_disk_percent",
            ),
            (
                one(
                    "min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\n[group.kubelet]\nreserved_memory = \"lots\"",
                ),
                "lots",
            ),
            (
                one("min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\n[group.kubelet]\npods = 3"),
                "unknown field",
            ),
            // Labels the template derives: the os (linux) and the arch.
            (
                one(
                    "min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\nlabels = { \"kubernetes.io/os\" = \"windows\" }",
                ),
                "kubernetes.io/os",
            ),
            (
                one(
                    "min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\narch = \"arm64\"\nlabels = { \"kubernetes.io/arch\" = \"amd64\" }",
                ),
                "kubernetes.io/arch",
            ),
            // Placeholders wasmprov would leave verbatim.
            (
                one(
                    "min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\n[group.boot]\nuser_data = \"join {{ node_token }}\"",
                ),
                "{{ node_token }}",
            ),
            (
                one(
                    "min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\n[group.boot]\nuser_data = \"join {{NODE_TOKEN}}\"",
                ),
                "{{NODE_TOKEN}}",
            ),
            (
                one(
                    "min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\n[group.boot]\nuser_data = \"A={{node_token}} E={{other}}\"",
                ),
                "{{other}}",
            ),
            (
                one(
                    "min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\n[group.boot]\nuser_data = \"F={{{node_token}}}\"",
                ),
                "not a placeholder",
            ),
            (
                one(
                    "min = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\n[group.boot]\nuser_data = \"G={{node_token\"",
                ),
                "not a placeholder",
            ),
            // A GPU vendor without a resource name the template could use.
            (
                one("min = 0\nmax = 1\ncpu = 8\nmemory_gib = 64\ngpu = 1\ngpu_vendor = \"habana\""),
                "gpu_resource",
            ),
        ];
        for (text, want) in cases {
            let err = NodeGroups::parse(&text).expect_err(&text).to_string();
            assert!(err.contains(want), "{text}\n→ {err}\n(wanted {want:?})");
        }
    }
}
