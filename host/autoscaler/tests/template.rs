//! The template node: its bytes decoded with `k8s-pb` (prost types generated
//! from Kubernetes' own generated.proto files, so field numbers and wire
//! types are checked against upstream's, not against this crate's subset),
//! every field checked; worst-value offerings; the group label and taint
//! rules; GPU types.

use std::collections::BTreeMap;

use k8s_pb::api::core::v1 as upstream;
use prost::Message;
use wasmprov_api::{Arch, Offering};
use wasmprov_autoscaler::k8s::parse_quantity;
use wasmprov_autoscaler::template::{
    GPU_LABEL, Kubelet, NodeTemplate, Taint, TaintEffect, TemplateError, check_labels,
    check_taints, gpu_types,
};

const GI: u64 = 1 << 30;
const MI: u64 = 1 << 20;

fn gpu_offering() -> Offering {
    Offering {
        instance_type: "g5.xlarge".into(),
        cpu: 4.0,
        memory_bytes: 16 * GI,
        gpu: 1,
        gpu_vendor: Some("nvidia".into()),
        gpu_model: Some("nvidia-a10g".into()),
        arch: Some(Arch::X86_64),
        disk_bytes: Some(16 << 40),
        zones: vec!["us-east-1a".into(), "us-east-1b".into()],
        on_demand_usd: Some(1.006),
        spot_usd: None,
    }
}

/// Decodes with upstream's types, and checks every quantity is one Go's
/// decoder accepts (it parses each while it unmarshals).
fn decode(template: &NodeTemplate) -> upstream::Node {
    let bytes = template.node_bytes().expect("template builds");
    let node = upstream::Node::decode(bytes.as_slice()).expect("upstream types decode it");
    let status = node.status.as_ref().unwrap();
    for (name, q) in status.capacity.iter().chain(&status.allocatable) {
        let text = q
            .string
            .as_deref()
            .unwrap_or_else(|| panic!("{name} has a string"));
        parse_quantity(text).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    node
}

fn quantities(
    map: &BTreeMap<String, k8s_pb::apimachinery::pkg::api::resource::Quantity>,
) -> BTreeMap<&str, &str> {
    map.iter()
        .map(|(k, v)| (k.as_str(), v.string.as_deref().unwrap()))
        .collect()
}

fn strs<'a>(pairs: &[(&'a str, &'a str)]) -> BTreeMap<&'a str, &'a str> {
    pairs.iter().copied().collect()
}

#[test]
fn gpu_node_decodes_with_upstream_types_field_by_field() {
    let mut t = NodeTemplate::new("gpu-a10g", "aws-ec2", gpu_offering());
    t.zone = Some("us-east-1b".into());
    t.ephemeral_storage_bytes = Some(100 * GI);
    t.labels = BTreeMap::from([
        ("example.com/pool".into(), "gpu".into()),
        ("topology.kubernetes.io/region".into(), "us-east-1".into()),
        ("empty".into(), String::new()),
    ]);
    t.taints = vec![
        "nvidia.com/gpu=present:NoSchedule".parse().unwrap(),
        Taint::new("dedicated", "", TaintEffect::NoExecute).unwrap(),
    ];
    let node = decode(&t);

    let meta = node.metadata.as_ref().unwrap();
    assert_eq!(meta.name.as_deref(), Some("template-gpu-a10g"));
    assert_eq!(meta.namespace, None);
    let labels: BTreeMap<&str, &str> = meta
        .labels
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        labels,
        strs(&[
            ("kubernetes.io/hostname", "template-gpu-a10g"),
            ("kubernetes.io/os", "linux"),
            ("beta.kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
            ("beta.kubernetes.io/arch", "amd64"),
            ("node.kubernetes.io/instance-type", "g5.xlarge"),
            ("topology.kubernetes.io/zone", "us-east-1b"),
            ("topology.kubernetes.io/region", "us-east-1"),
            (GPU_LABEL, "nvidia-a10g"),
            ("example.com/pool", "gpu"),
            ("empty", ""),
        ])
    );
    let annotations: BTreeMap<&str, &str> = meta
        .annotations
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        annotations,
        strs(&[
            ("wasmprov.io/node-group", "gpu-a10g"),
            ("wasmprov.io/plugin", "aws-ec2"),
            ("wasmprov.io/instance-type", "g5.xlarge"),
        ])
    );

    let spec = node.spec.as_ref().unwrap();
    assert_eq!(spec.provider_id, None);
    assert_eq!(
        spec.unschedulable, None,
        "schedulable: the field is left out"
    );
    let taints: Vec<_> = spec
        .taints
        .iter()
        .map(|t| {
            (
                t.key.as_deref(),
                t.value.as_deref(),
                t.effect.as_deref(),
                t.time_added.is_some(),
            )
        })
        .collect();
    assert_eq!(
        taints,
        [
            (
                Some("nvidia.com/gpu"),
                Some("present"),
                Some("NoSchedule"),
                false
            ),
            (Some("dedicated"), None, Some("NoExecute"), false),
        ]
    );

    let status = node.status.as_ref().unwrap();
    // 4 cores less 6% of the first, 1% of the second, 0.5% of the third and
    // fourth (60m + 10m + 10m); 16 GiB less 25% of 4 GiB, 20% of 4 GiB, 10%
    // of 8 GiB (2662.4 MiB, rounded up to the byte) and the 100 MiB
    // eviction threshold; 100 GiB of disk less 10%.
    assert_eq!(
        quantities(&status.capacity),
        strs(&[
            ("cpu", "4"),
            ("memory", "16Gi"),
            ("ephemeral-storage", "100Gi"),
            ("pods", "110"),
            ("nvidia.com/gpu", "1"),
        ])
    );
    assert_eq!(
        quantities(&status.allocatable),
        strs(&[
            ("cpu", "3920m"),
            ("memory", "14283282841"),
            ("ephemeral-storage", "90Gi"),
            ("pods", "110"),
            ("nvidia.com/gpu", "1"),
        ])
    );
    assert_eq!(14_283_282_841, 16 * GI - 2_791_728_743 - 100 * MI);
    let conditions: Vec<_> = status
        .conditions
        .iter()
        .map(|c| (c.r#type.as_deref().unwrap(), c.status.as_deref().unwrap()))
        .collect();
    assert_eq!(
        conditions,
        [
            ("Ready", "True"),
            ("MemoryPressure", "False"),
            ("DiskPressure", "False"),
            ("PIDPressure", "False"),
        ]
    );
    assert!(
        status
            .conditions
            .iter()
            .all(|c| c.reason.is_some() && c.message.is_some())
    );
    let info = status.node_info.as_ref().unwrap();
    assert_eq!(info.architecture.as_deref(), Some("amd64"));
    assert_eq!(info.operating_system.as_deref(), Some("linux"));
    assert_eq!(info.kubelet_version, None);
    assert!(status.addresses.is_empty() && status.images.is_empty());
    assert_eq!(status.phase, None);

    // What upstream's types read is exactly what was written: re-encoded,
    // they give the same node back through this crate's subset.
    let ours = t.node().unwrap();
    let again =
        wasmprov_autoscaler::k8s::core_v1::Node::decode(node.encode_to_vec().as_slice()).unwrap();
    assert_eq!(again, ours);
}

#[test]
fn kubelet_settings_change_allocatable_and_pods() {
    let mut t = NodeTemplate::new("g", "p", gpu_offering());
    t.kubelet = Kubelet {
        max_pods: 58,
        reserved_cpu_millis: Some(250),
        reserved_memory_bytes: Some(GI),
        eviction_memory_bytes: 0,
        eviction_disk_percent: 0,
    };
    let node = decode(&t);
    let status = node.status.unwrap();
    let alloc = quantities(&status.allocatable);
    assert_eq!(alloc["cpu"], "3750m");
    assert_eq!(alloc["memory"], "15Gi");
    assert_eq!(alloc["pods"], "58");
    assert_eq!(quantities(&status.capacity)["pods"], "58");
    // The offering's disk stands in for a size the group does not give.
    assert_eq!(alloc["ephemeral-storage"], "16Ti");
}

fn small(cpu: f64, memory_bytes: u64) -> Offering {
    Offering {
        instance_type: "cx11".into(),
        cpu,
        memory_bytes,
        ..Offering::default()
    }
}

#[test]
fn worst_value_offerings() {
    // Zero, negative and non-numeric CPU counts are refused, naming the type.
    for cpu in [0.0, -1.0, 0.0004, f64::NAN, f64::INFINITY] {
        let err = NodeTemplate::new("g", "p", small(cpu, 4 * GI))
            .node()
            .unwrap_err();
        assert!(matches!(err, TemplateError::Cpu { .. }), "{cpu}: {err}");
        assert!(err.to_string().contains("cx11"), "{err}");
    }
    let err = NodeTemplate::new("g", "p", small(1.0, 0))
        .node()
        .unwrap_err();
    assert!(matches!(err, TemplateError::Memory { .. }), "{err}");

    // Half a core, memory not a multiple of a MiB, no arch, no disk, no
    // zone, no GPU.
    let t = NodeTemplate::new("Small_Group", "hetzner", small(0.5, 1_000_000_000));
    let node = decode(&t);
    let status = node.status.as_ref().unwrap();
    assert_eq!(
        quantities(&status.capacity),
        strs(&[("cpu", "500m"), ("memory", "1000000000"), ("pods", "110")])
    );
    // 6% of half a core; below 1 GiB, 255 MiB plus the 100 MiB threshold.
    assert_eq!(
        quantities(&status.allocatable),
        strs(&[("cpu", "470m"), ("memory", "627755520"), ("pods", "110")])
    );
    let meta = node.metadata.as_ref().unwrap();
    assert_eq!(meta.name.as_deref(), Some("template-small-group"));
    assert!(
        !meta.labels.contains_key("kubernetes.io/arch"),
        "no arch is guessed"
    );
    assert!(!meta.labels.contains_key("topology.kubernetes.io/zone"));
    assert!(!meta.labels.contains_key(GPU_LABEL));
    assert_eq!(status.node_info.as_ref().unwrap().architecture, None);

    // A machine smaller than the reservation.
    let err = NodeTemplate::new("g", "p", small(1.0, 256 * MI))
        .node()
        .unwrap_err();
    assert!(
        matches!(
            err,
            TemplateError::Reservation {
                resource: "memory",
                ..
            }
        ),
        "{err}"
    );
    let mut t = NodeTemplate::new("g", "p", small(1.0, 4 * GI));
    t.kubelet.reserved_cpu_millis = Some(1_000);
    let err = t.node().unwrap_err();
    assert!(
        matches!(
            err,
            TemplateError::Reservation {
                resource: "cpu",
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("lower the group's reservation"),
        "{err}"
    );

    // The only zone an offering has is the template's zone.
    let mut one_zone = small(2.0, 4 * GI);
    one_zone.zones = vec!["fsn1".into()];
    let node = decode(&NodeTemplate::new("g", "p", one_zone));
    assert_eq!(
        node.metadata.unwrap().labels["topology.kubernetes.io/zone"],
        "fsn1"
    );

    // An instance type that cannot be a label value.
    let err = NodeTemplate::new("g", "p", small(2.0, 4 * GI).with_type("big machine"))
        .node()
        .unwrap_err();
    assert!(
        matches!(
            err,
            TemplateError::DerivedValue {
                what: "instance type",
                ..
            }
        ),
        "{err}"
    );
}

trait WithType {
    fn with_type(self, t: &str) -> Self;
}
impl WithType for Offering {
    fn with_type(mut self, t: &str) -> Self {
        self.instance_type = t.into();
        self
    }
}

#[test]
fn gpu_vendors_and_counts() {
    let gpu = |vendor: Option<&str>, model: Option<&str>, count: u32| Offering {
        gpu: count,
        gpu_vendor: vendor.map(Into::into),
        gpu_model: model.map(Into::into),
        ..gpu_offering()
    };
    let resources = |o: Offering| -> Result<BTreeMap<String, String>, TemplateError> {
        let mut t = NodeTemplate::new("g", "p", o);
        t.ephemeral_storage_bytes = Some(0);
        let bytes = t.node_bytes()?;
        let node = upstream::Node::decode(bytes.as_slice()).unwrap();
        let status = node.status.unwrap();
        let mut out: BTreeMap<String, String> = status
            .capacity
            .into_iter()
            .filter(|(k, _)| !["cpu", "memory", "pods", "ephemeral-storage"].contains(&k.as_str()))
            .map(|(k, v)| (k, v.string.unwrap()))
            .collect();
        if let Some(label) = node.metadata.unwrap().labels.get(GPU_LABEL) {
            out.insert("label".into(), label.clone());
        }
        Ok(out)
    };
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    };
    assert_eq!(
        resources(gpu(Some("nvidia"), Some("nvidia-h100"), 8)).unwrap(),
        map(&[("nvidia.com/gpu", "8"), ("label", "nvidia-h100")])
    );
    assert_eq!(
        resources(gpu(Some("AMD"), Some("amd-mi300x"), 8)).unwrap(),
        map(&[("amd.com/gpu", "8"), ("label", "amd-mi300x")])
    );
    // No vendor: read from the model's first word.
    assert_eq!(
        resources(gpu(None, Some("nvidia-t4"), 1)).unwrap(),
        map(&[("nvidia.com/gpu", "1"), ("label", "nvidia-t4")])
    );
    // No model: the label names the vendor.
    assert_eq!(
        resources(gpu(Some("intel"), None, 2)).unwrap(),
        map(&[("gpu.intel.com/i915", "2"), ("label", "intel")])
    );
    // No GPUs: no resource and no label, whatever the vendor says.
    assert_eq!(
        resources(gpu(Some("nvidia"), Some("nvidia-a10g"), 0)).unwrap(),
        map(&[])
    );
    // Neither vendor nor a model naming one, or a vendor unknown: refused,
    // saying what to set.
    for o in [
        gpu(None, None, 1),
        gpu(None, Some("tpu-v5"), 1),
        gpu(Some("acme"), None, 1),
    ] {
        let err = resources(o).unwrap_err();
        assert!(matches!(err, TemplateError::GpuResource { .. }), "{err}");
        assert!(err.to_string().contains("gpu_resource"), "{err}");
    }
    // ... and the group's resource name makes it work.
    let mut t = NodeTemplate::new("g", "p", gpu(Some("acme"), Some("acme-x1"), 4));
    t.gpu_resource = Some("acme.example/gpu".into());
    let node = decode(&t);
    assert_eq!(
        node.status.unwrap().allocatable["acme.example/gpu"]
            .string
            .as_deref(),
        Some("4")
    );
    t.gpu_resource = Some("not a resource".into());
    assert!(matches!(t.node(), Err(TemplateError::Label(_))));
}

#[test]
fn gpu_types_are_the_models_once_each() {
    let mut t4 = gpu_offering();
    t4.gpu_model = Some("nvidia-t4".into());
    let mut no_model = gpu_offering();
    no_model.gpu_model = None;
    no_model.gpu_vendor = Some("amd".into());
    let cpu_only = small(2.0, 4 * GI);
    let mut zero = gpu_offering();
    zero.gpu = 0;
    zero.gpu_model = Some("nvidia-l4".into());
    let all = [
        gpu_offering(),
        t4.clone(),
        gpu_offering(),
        no_model,
        cpu_only,
        zero,
    ];
    let types = gpu_types(&all);
    let mut keys: Vec<_> = types.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["amd", "nvidia-a10g", "nvidia-t4"]);
    assert!(
        types
            .values()
            .all(|a| a.type_url.is_empty() && a.value.is_empty())
    );
    assert!(gpu_types(&[small(1.0, GI)]).is_empty());
}

#[test]
fn group_labels_are_checked_when_read() {
    let refused: &[(&str, &str, &str)] = &[
        ("Bad Key", "x", "only letters"),
        ("-pool", "x", "start and end"),
        ("pool-", "x", "start and end"),
        ("", "x", "empty"),
        ("a/b/c", "x", "only letters"),
        ("example.com/", "x", "empty"),
        ("/pool", "x", "empty prefix"),
        ("Example.com/pool", "x", "lowercase DNS subdomain"),
        ("exa_mple.com/pool", "x", "lowercase DNS subdomain"),
        ("example..com/pool", "x", "empty DNS label"),
        ("pool", "has space", "only letters"),
        ("pool", "-x", "start and end"),
        ("pool", "ünï", "start and end"),
        ("kubernetes.io/role", "x", "namespace a kubelet may not"),
        (
            "node-role.kubernetes.io/worker",
            "",
            "namespace a kubelet may not",
        ),
        ("k8s.io/x", "y", "namespace a kubelet may not"),
        ("x.k8s.io/y", "y", "namespace a kubelet may not"),
        (
            "node-restriction.kubernetes.io/x",
            "y",
            "namespace a kubelet may not",
        ),
        ("node.kubernetes.io/instance-type", "big", "set by wasmprov"),
        ("topology.kubernetes.io/zone", "a", "set by wasmprov"),
        ("kubernetes.io/hostname", "h", "set by wasmprov"),
        (GPU_LABEL, "nvidia-a10g", "set by wasmprov"),
    ];
    for &(key, value, why) in refused {
        let labels = BTreeMap::from([(key.to_owned(), value.to_owned())]);
        let err = check_labels(&labels).expect_err(key);
        assert!(err.to_string().contains(why), "{key}={value}: {err}");
        // The template refuses them too.
        let mut t = NodeTemplate::new("g", "p", small(2.0, 4 * GI));
        t.labels = labels;
        assert!(t.node().is_err(), "{key}");
    }
    let long = "a".repeat(64);
    for (key, value) in [(long.as_str(), "x"), ("pool", long.as_str())] {
        let err = check_labels(&BTreeMap::from([(key.into(), value.into())])).unwrap_err();
        assert!(err.to_string().contains("longer than 63"), "{err}");
    }
    let ok = BTreeMap::from(
        [
            ("pool", "web"),
            ("example.com/pool", ""),
            ("a.b-c.example/x_y.z", "A-1_b.2"),
            (
                "node.kubernetes.io/exclude-from-external-load-balancers",
                "true",
            ),
            ("eks.node.kubernetes.io/x", "y"),
            ("kubelet.kubernetes.io/x", "y"),
            ("topology.kubernetes.io/region", "eu-central"),
            ("kubernetes.io/os", "linux"),
            ("kubernetes.io/arch", "amd64"),
            (&"b".repeat(63), &"c".repeat(63)),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned())),
    );
    check_labels(&ok).unwrap();
}

#[test]
fn group_arch_label_fills_in_and_never_contradicts() {
    let mut t = NodeTemplate::new("g", "p", small(2.0, 4 * GI));
    t.labels = BTreeMap::from([("kubernetes.io/arch".into(), "arm64".into())]);
    let labels = decode(&t).metadata.unwrap().labels;
    assert_eq!(labels["kubernetes.io/arch"], "arm64");
    assert_eq!(labels["beta.kubernetes.io/arch"], "arm64");
    t.offering.arch = Some(Arch::X86_64);
    let err = t.node().unwrap_err();
    assert!(matches!(err, TemplateError::Conflict { .. }), "{err}");
    t.offering.arch = Some(Arch::Arm64);
    t.node().unwrap();
}

#[test]
fn taints_parse_check_and_refuse() {
    let t: Taint = "gpu=true:NoSchedule".parse().unwrap();
    assert_eq!(
        (t.key(), t.value(), t.effect()),
        ("gpu", "true", TaintEffect::NoSchedule)
    );
    assert_eq!(t.to_string(), "gpu=true:NoSchedule");
    let t: Taint = "example.com/spot:PreferNoSchedule".parse().unwrap();
    assert_eq!((t.key(), t.value()), ("example.com/spot", ""));
    assert_eq!(t.to_string(), "example.com/spot:PreferNoSchedule");
    for bad in [
        "gpu=true",
        "gpu=true:Never",
        "gpu=true:noschedule",
        "=x:NoSchedule",
        "bad key:NoExecute",
        "k=bad value:NoExecute",
    ] {
        let err = bad.parse::<Taint>().expect_err(bad);
        assert!(
            matches!(
                err,
                TemplateError::TaintForm { .. }
                    | TemplateError::TaintEffect { .. }
                    | TemplateError::Label(_)
            ),
            "{bad}: {err}"
        );
    }
    // Deserialized from a table: checked the same way.
    use serde::Deserialize;
    use serde::de::value::{Error, MapDeserializer};
    let table = |pairs: &[(&'static str, &'static str)]| {
        Taint::deserialize(MapDeserializer::<_, Error>::new(pairs.iter().copied()))
    };
    let t = table(&[
        ("key", "dedicated"),
        ("value", "ml"),
        ("effect", "NoExecute"),
    ])
    .unwrap();
    assert_eq!(t.to_string(), "dedicated=ml:NoExecute");
    assert!(table(&[("key", "dedicated"), ("effect", "Sometimes")]).is_err());
    assert!(table(&[("key", "bad key"), ("effect", "NoSchedule")]).is_err());
    assert!(table(&[("key", "k"), ("effect", "NoSchedule"), ("colour", "red")]).is_err());

    let same_twice = ["a=1:NoSchedule", "a=2:NoSchedule"].map(|s| s.parse::<Taint>().unwrap());
    let err = check_taints(&same_twice).unwrap_err();
    assert!(matches!(err, TemplateError::DuplicateTaint { .. }), "{err}");
    let mut t = NodeTemplate::new("g", "p", small(2.0, 4 * GI));
    t.taints = same_twice.to_vec();
    assert!(t.node().is_err());
    let other_effect = ["a=1:NoSchedule", "a=1:NoExecute"].map(|s| s.parse::<Taint>().unwrap());
    check_taints(&other_effect).unwrap();
}
