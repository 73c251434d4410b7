//! Prices: node prices over a period (and the periods refused), a pod's
//! effective requests decoded from protobuf (built with this crate's subset,
//! with upstream's full types, and by hand with fields the subset does not
//! know), and a pod's share of the cheapest machine that fits it.

use std::collections::BTreeMap;

use prost::Message;
use prost_types::Timestamp;
use wasmprov_api::{Arch, Offering};
use wasmprov_autoscaler::k8s::{QuantityError, core_v1, quantity};
use wasmprov_autoscaler::pricing::{
    MAX_PERIOD_SECONDS, PriceError, Requests, node_price, period_hours, pod_price, pod_requests,
};
use wasmprov_autoscaler::template::{GPU_LABEL, Kubelet};

const GI: u64 = 1 << 30;
const MI: u64 = 1 << 20;
const T0: i64 = 1_764_000_000;

fn at(seconds: i64, nanos: i32) -> Timestamp {
    Timestamp { seconds, nanos }
}

#[test]
fn node_price_is_the_hourly_price_over_the_period() {
    let ok: &[(f64, Timestamp, Timestamp, f64)] = &[
        (0.40, at(T0, 0), at(T0 + 3600, 0), 0.40),
        (0.40, at(T0, 0), at(T0 + 5400, 0), 0.60),
        (1.00, at(T0, 0), at(T0 + 60, 0), 1.0 / 60.0),
        (
            2.00,
            at(T0, 500_000_000),
            at(T0 + 1, 400_000_000),
            2.0 * 0.9 / 3600.0,
        ),
        (3.00, at(T0, 0), at(T0, 0), 0.0),
        (0.00, at(T0, 0), at(T0 + 7200, 0), 0.0),
        (1.00, at(0, 0), at(MAX_PERIOD_SECONDS, 0), 366.0 * 24.0),
    ];
    for (hourly, start, end, want) in ok {
        let got = node_price(*hourly, Some(start), Some(end)).unwrap();
        assert!(
            (got - want).abs() < 1e-9,
            "{hourly} {start:?}..{end:?}: {got} != {want}"
        );
    }
}

#[test]
fn bad_periods_and_prices_are_errors() {
    let start = at(T0, 0);
    let end = at(T0 + 3600, 0);
    let cases: Vec<(f64, Option<Timestamp>, Option<Timestamp>, &str)> = vec![
        (1.0, None, Some(end), "no start timestamp"),
        (1.0, Some(start), None, "no end timestamp"),
        (1.0, None, None, "no start timestamp"),
        (1.0, Some(end), Some(start), "ends 3600s before it starts"),
        (1.0, Some(at(T0, 1)), Some(at(T0, 0)), "before it starts"),
        (1.0, Some(at(T0, -1)), Some(end), "not a valid time"),
        (
            1.0,
            Some(start),
            Some(at(T0, 1_000_000_000)),
            "not a valid time",
        ),
        (1.0, Some(at(i64::MIN, 0)), Some(end), "not a valid time"),
        (1.0, Some(start), Some(at(i64::MAX, 0)), "not a valid time"),
        (
            1.0,
            Some(at(0, 0)),
            Some(at(MAX_PERIOD_SECONDS + 1, 0)),
            "longer than the year",
        ),
        (
            1.0,
            Some(at(-62_135_596_800, 0)),
            Some(at(253_402_300_799, 0)),
            "longer than the year",
        ),
        (-0.5, Some(start), Some(end), "not a price"),
        (f64::NAN, Some(start), Some(end), "not a price"),
        (f64::INFINITY, Some(start), Some(end), "not a price"),
    ];
    for (hourly, s, e, why) in cases {
        let err = node_price(hourly, s.as_ref(), e.as_ref()).unwrap_err();
        assert!(err.to_string().contains(why), "{hourly} {s:?} {e:?}: {err}");
    }
    assert_eq!(period_hours(Some(&start), Some(&end)), Ok(1.0));
}

fn resources(requests: &[(&str, &str)], limits: &[(&str, &str)]) -> core_v1::ResourceRequirements {
    let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, _> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).into(), quantity((*v).into())))
            .collect()
    };
    core_v1::ResourceRequirements {
        requests: map(requests),
        limits: map(limits),
    }
}

fn container(name: &str, requests: &[(&str, &str)], limits: &[(&str, &str)]) -> core_v1::Container {
    core_v1::Container {
        name: Some(name.into()),
        resources: Some(resources(requests, limits)),
        restart_policy: None,
    }
}

fn sidecar(name: &str, requests: &[(&str, &str)]) -> core_v1::Container {
    core_v1::Container {
        restart_policy: Some("Always".into()),
        ..container(name, requests, &[])
    }
}

fn pod(spec: core_v1::PodSpec) -> Vec<u8> {
    core_v1::Pod {
        metadata: None,
        spec: Some(spec),
    }
    .encode_to_vec()
}

#[test]
fn effective_requests_follow_the_schedulers_rule() {
    // App containers add up; a request not given is its limit.
    let spec = core_v1::PodSpec {
        containers: vec![
            container("web", &[("cpu", "250m"), ("memory", "256Mi")], &[]),
            container(
                "log",
                &[("cpu", "0.1")],
                &[("memory", "64Mi"), ("cpu", "1")],
            ),
            container("gpu", &[], &[("nvidia.com/gpu", "2")]),
            core_v1::Container {
                name: Some("bare".into()),
                resources: None,
                restart_policy: None,
            },
        ],
        node_selector: BTreeMap::from([("kubernetes.io/arch".into(), "arm64".into())]),
        ..Default::default()
    };
    let r = pod_requests(&pod(spec)).unwrap();
    assert_eq!(r.cpu_millis, 350);
    assert_eq!(r.memory_bytes, 320 * MI);
    assert_eq!(r.other, BTreeMap::from([("nvidia.com/gpu".into(), 2)]));
    assert_eq!(r.gpus(), [("nvidia", 2)]);
    assert_eq!(r.node_selector["kubernetes.io/arch"], "arm64");

    // Init containers run one at a time before the app containers: the
    // largest counts when it is larger, resource by resource; sidecars
    // (restartPolicy Always) keep running, beside later init containers
    // and the app containers; then the overhead.
    let spec = core_v1::PodSpec {
        init_containers: vec![
            container("migrate", &[("cpu", "2"), ("memory", "100Mi")], &[]),
            sidecar("proxy", &[("cpu", "100m"), ("memory", "50Mi")]),
            container(
                "warm",
                &[
                    ("cpu", "500m"),
                    ("memory", "1Gi"),
                    ("ephemeral-storage", "1Gi"),
                ],
                &[],
            ),
        ],
        containers: vec![container("app", &[("cpu", "1"), ("memory", "512Mi")], &[])],
        overhead: BTreeMap::from([
            ("cpu".into(), quantity("10m".into())),
            ("memory".into(), quantity("20Mi".into())),
        ]),
        ..Default::default()
    };
    let r = pod_requests(&pod(spec.clone())).unwrap();
    // cpu: max(app 1000 + proxy 100, migrate 2000, warm 500 + proxy 100) + 10
    assert_eq!(r.cpu_millis, 2_010);
    // memory: max(512 + 50, 100, 1024 + 50) + 20 MiB
    assert_eq!(r.memory_bytes, 1_094 * MI);
    assert_eq!(r.ephemeral_storage_bytes, GI);

    // Pod-level requests replace the containers' sum for CPU and memory;
    // the overhead still adds.
    let with_pod_level = core_v1::PodSpec {
        resources: Some(resources(
            &[
                ("cpu", "4"),
                ("memory", "2Gi"),
                ("ephemeral-storage", "5Gi"),
            ],
            &[],
        )),
        ..spec
    };
    let r = pod_requests(&pod(with_pod_level)).unwrap();
    assert_eq!(r.cpu_millis, 4_010);
    assert_eq!(r.memory_bytes, 2 * GI + 20 * MI);
    assert_eq!(
        r.ephemeral_storage_bytes, GI,
        "pod level covers cpu and memory only"
    );

    // An empty pod asks for nothing.
    assert_eq!(
        pod_requests(&pod(core_v1::PodSpec::default())).unwrap(),
        Requests::default()
    );
    assert_eq!(pod_requests(&[]).unwrap(), Requests::default());
}

#[test]
fn bad_pods_are_errors_naming_the_container() {
    let bad = |requests: &[(&str, &str)]| {
        pod_requests(&pod(core_v1::PodSpec {
            containers: vec![container("web", requests, &[])],
            ..Default::default()
        }))
        .unwrap_err()
    };
    let err = bad(&[("cpu", "lots")]);
    assert!(
        matches!(&err, PriceError::Quantity { container, resource, error: QuantityError::Malformed { .. } }
            if container == "web" && resource == "cpu"),
        "{err}"
    );
    assert!(err.to_string().starts_with("web: cpu: \"lots\""), "{err}");
    assert!(matches!(
        bad(&[("memory", "-1Gi")]),
        PriceError::Quantity {
            error: QuantityError::Negative { .. },
            ..
        }
    ));
    assert!(matches!(
        bad(&[("memory", "16Ei")]),
        PriceError::Quantity {
            error: QuantityError::TooLarge { .. },
            ..
        }
    ));
    let err = pod_requests(&pod(core_v1::PodSpec {
        overhead: BTreeMap::from([("memory".into(), quantity("1 Gi".into()))]),
        ..Default::default()
    }))
    .unwrap_err();
    assert!(err.to_string().starts_with("overhead: memory"), "{err}");
    // Bytes that are no protobuf message.
    for garbage in [
        &[0xff_u8, 0xff, 0xff][..],
        &[0x12, 0x05, 0x01],
        b"{\"kind\":\"Pod\"}",
    ] {
        let err = pod_requests(garbage).unwrap_err();
        assert!(
            matches!(err, PriceError::PodDecode { .. }),
            "{garbage:?}: {err}"
        );
    }
}

#[test]
fn a_full_upstream_pod_decodes_with_the_subset() {
    use k8s_pb::api::core::v1 as up;
    use k8s_pb::apimachinery::pkg::api::resource::Quantity as UpQuantity;
    let q = |s: &str| UpQuantity {
        string: Some(s.into()),
    };
    let full = up::Pod {
        metadata: Some(k8s_pb::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            name: Some("web-0".into()),
            namespace: Some("shop".into()),
            generate_name: Some("web-".into()),
            finalizers: vec!["x/y".into()],
            ..Default::default()
        }),
        spec: Some(up::PodSpec {
            containers: vec![up::Container {
                name: Some("web".into()),
                image: Some("nginx:1.27".into()),
                command: vec!["nginx".into()],
                resources: Some(up::ResourceRequirements {
                    requests: BTreeMap::from([
                        ("cpu".into(), q("1500m")),
                        ("memory".into(), q("1.5Gi")),
                    ]),
                    limits: BTreeMap::from([("amd.com/gpu".into(), q("1"))]),
                    claims: vec![up::ResourceClaim {
                        name: Some("c".into()),
                        request: None,
                    }],
                }),
                tty: Some(true),
                ..Default::default()
            }],
            service_account_name: Some("web".into()),
            priority: Some(1000),
            host_network: Some(false),
            node_selector: BTreeMap::from([(GPU_LABEL.into(), "amd-mi300x".into())]),
            ..Default::default()
        }),
        status: Some(up::PodStatus {
            phase: Some("Pending".into()),
            ..Default::default()
        }),
    };
    let r = pod_requests(&full.encode_to_vec()).unwrap();
    assert_eq!(r.cpu_millis, 1_500);
    assert_eq!(r.memory_bytes, 1_536 * MI);
    assert_eq!(r.gpus(), [("amd", 1)]);
    assert_eq!(r.node_selector[GPU_LABEL], "amd-mi300x");

    // And what this crate writes for a pod, upstream reads the same.
    let ours = pod(core_v1::PodSpec {
        containers: vec![container("a", &[("cpu", "2")], &[])],
        ..Default::default()
    });
    let theirs = up::Pod::decode(ours.as_slice()).unwrap();
    let c = &theirs.spec.unwrap().containers[0];
    assert_eq!(
        c.resources.as_ref().unwrap().requests["cpu"]
            .string
            .as_deref(),
        Some("2")
    );
}

/// Protobuf by hand: a field's key, then a length-delimited payload.
fn field(number: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::encode_key(number, prost::encoding::WireType::LengthDelimited, &mut out);
    prost::encoding::encode_varint(payload.len() as u64, &mut out);
    out.extend_from_slice(payload);
    out
}

fn varint_field(number: u32, value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::encode_key(number, prost::encoding::WireType::Varint, &mut out);
    prost::encoding::encode_varint(value, &mut out);
    out
}

fn fixed64_field(number: u32, value: u64) -> Vec<u8> {
    let mut out = Vec::new();
    prost::encoding::encode_key(number, prost::encoding::WireType::SixtyFourBit, &mut out);
    out.extend_from_slice(&value.to_le_bytes());
    out
}

#[test]
fn hand_encoded_pod_with_unknown_fields_decodes() {
    // ResourceRequirements.requests (2): map entries {key 1, value 2 = Quantity{string 1}}.
    let entry = |k: &str, v: &str| {
        field(
            2,
            &[field(1, k.as_bytes()), field(2, &field(1, v.as_bytes()))].concat(),
        )
    };
    let requirements = [
        entry("cpu", "750m"),
        entry("memory", "3e9"),
        field(3, &field(1, b"claim")), // claims: not in the subset
        varint_field(77, 5),           // a field no version has
    ]
    .concat();
    let container = [
        field(1, b"app"),
        field(2, b"registry.example/app:1"), // image
        field(8, &requirements),
        varint_field(16, 1),   // stdin
        fixed64_field(99, 42), // unknown, 64-bit
    ]
    .concat();
    let spec = [
        field(1, &field(1, b"volume")), // volumes
        field(2, &container),
        varint_field(25, 100), // priority
        field(7, &[field(1, b"disktype"), field(2, b"ssd")].concat()),
    ]
    .concat();
    let pod = [
        field(1, &field(1, b"app-0")),
        field(2, &spec),
        field(3, &field(1, b"Pending")), // status
    ]
    .concat();
    let r = pod_requests(&pod).unwrap();
    assert_eq!(r.cpu_millis, 750);
    assert_eq!(r.memory_bytes, 3_000_000_000);
    assert_eq!(r.node_selector["disktype"], "ssd");
    // Truncated: an error, not a partial pod.
    assert!(matches!(
        pod_requests(&pod[..pod.len() - 3]),
        Err(PriceError::PodDecode { .. })
    ));
}

fn offering(t: &str, cpu: f64, memory_bytes: u64, usd: f64) -> Offering {
    Offering {
        instance_type: t.into(),
        cpu,
        memory_bytes,
        arch: Some(Arch::X86_64),
        on_demand_usd: Some(usd),
        ..Offering::default()
    }
}

fn asks(cpu_millis: u64, memory_bytes: u64) -> Requests {
    let mut r = Requests::default();
    r.cpu_millis = cpu_millis;
    r.memory_bytes = memory_bytes;
    r
}

#[test]
fn pod_price_is_its_share_of_the_cheapest_fitting_machine() {
    let kubelet = Kubelet {
        reserved_cpu_millis: Some(0),
        reserved_memory_bytes: Some(0),
        eviction_memory_bytes: 0,
        ..Kubelet::default()
    };
    let catalogue = [
        offering("small", 2.0, 4 * GI, 0.10),
        offering("big", 8.0, 32 * GI, 0.32),
        offering("himem", 2.0, 16 * GI, 0.12),
        Offering {
            on_demand_usd: None,
            ..offering("unpriced", 64.0, 256 * GI, 0.0)
        },
    ];
    // 1 core of 2 (half), 1 GiB of 4 (a quarter): half of small's $0.10
    // for 2 hours; on big it would be max(1/8, 1/32) × 0.32 × 2 = 0.08.
    let p = pod_price(&asks(1_000, GI), &catalogue, &kubelet, 2.0).unwrap();
    assert_eq!(p.instance_type, "big");
    assert!(
        (p.share - 0.125).abs() < 1e-12 && (p.usd - 0.08).abs() < 1e-12,
        "{p:?}"
    );
    // Memory-heavy: 12 GiB is 3/4 of himem (0.09/h) but 3/8 of big (0.12/h).
    let p = pod_price(&asks(100, 12 * GI), &catalogue, &kubelet, 1.0).unwrap();
    assert_eq!(p.instance_type, "himem");
    assert!((p.usd - 0.09).abs() < 1e-12, "{p:?}");
    // Too big for any priced machine.
    let err = pod_price(&asks(16_000, GI), &catalogue, &kubelet, 1.0).unwrap_err();
    assert!(matches!(err, PriceError::NoFit { .. }), "{err}");
    assert!(err.to_string().contains("cpu 16"), "{err}");
    // Nothing asked: free.
    let p = pod_price(&Requests::default(), &catalogue, &kubelet, 1.0).unwrap();
    assert_eq!(p.usd, 0.0);
    // The node selector binds the type and the architecture.
    let mut r = asks(500, GI);
    r.node_selector
        .insert("node.kubernetes.io/instance-type".into(), "small".into());
    assert_eq!(
        pod_price(&r, &catalogue, &kubelet, 1.0)
            .unwrap()
            .instance_type,
        "small"
    );
    let mut r = asks(500, GI);
    r.node_selector
        .insert("kubernetes.io/arch".into(), "arm64".into());
    assert!(pod_price(&r, &catalogue, &kubelet, 1.0).is_err());
    r.node_selector
        .insert("kubernetes.io/arch".into(), "amd64".into());
    assert!(pod_price(&r, &catalogue, &kubelet, 1.0).is_ok());
    // Bad hours.
    assert!(pod_price(&asks(1, 1), &catalogue, &kubelet, f64::NAN).is_err());
    assert!(pod_price(&asks(1, 1), &catalogue, &kubelet, -1.0).is_err());
}

#[test]
fn gpu_pods_and_the_default_reservation() {
    let gpu = |t: &str, n: u32, model: &str, usd: f64| Offering {
        gpu: n,
        gpu_vendor: Some("nvidia".into()),
        gpu_model: Some(model.into()),
        ..offering(t, 8.0, 64 * GI, usd)
    };
    let catalogue = [
        offering("cpu", 8.0, 64 * GI, 0.30),
        gpu("a10g-4", 4, "nvidia-a10g", 4.0),
        gpu("t4-1", 1, "nvidia-t4", 0.50),
    ];
    let mut r = asks(1_000, 4 * GI);
    r.other.insert("nvidia.com/gpu".into(), 1);
    let kubelet = Kubelet::default();
    // One GPU of one: the whole t4 node.
    let p = pod_price(&r, &catalogue, &kubelet, 1.0).unwrap();
    assert_eq!((p.instance_type.as_str(), p.share), ("t4-1", 1.0));
    // Asking for the A10G by the GPU label: a quarter of the 4-GPU node.
    r.node_selector
        .insert(GPU_LABEL.into(), "nvidia-a10g".into());
    let p = pod_price(&r, &catalogue, &kubelet, 1.0).unwrap();
    assert_eq!(
        (p.instance_type.as_str(), p.share, p.usd),
        ("a10g-4", 0.25, 1.0)
    );
    // Another vendor's GPU fits nothing here.
    let mut amd = asks(1_000, GI);
    amd.other.insert("amd.com/gpu".into(), 1);
    assert!(matches!(
        pod_price(&amd, &catalogue, &kubelet, 1.0),
        Err(PriceError::NoFit { .. })
    ));
    // The default reservation counts: 8 cores leave 7910m allocatable, so
    // 7950m does not fit an 8-core machine.
    let err = pod_price(&asks(7_950, GI), &catalogue[..1], &kubelet, 1.0).unwrap_err();
    assert!(matches!(err, PriceError::NoFit { .. }), "{err}");
    assert!(pod_price(&asks(7_900, GI), &catalogue[..1], &kubelet, 1.0).is_ok());
}

/// A pod asking for what no offering provides fits nothing (an error
/// naming what it asks for), as does one asking for more ephemeral storage
/// than the disk or more pods than maxPods; an extended resource asked for
/// in a fraction is refused as Kubernetes refuses it.
#[test]
fn pods_asking_for_what_nothing_has_fit_nothing() {
    let gpu_node = Offering {
        gpu: 1,
        gpu_vendor: Some("nvidia".into()),
        disk_bytes: Some(80 * GI),
        ..offering("t4", 8.0, 32 * GI, 0.50)
    };
    let catalogue = [
        Offering {
            disk_bytes: Some(40 * GI),
            ..offering("small", 2.0, 8 * GI, 0.10)
        },
        offering("ebs", 4.0, 16 * GI, 0.20),
        gpu_node,
    ];
    let kubelet = Kubelet::default();
    let price = |extra: (&str, &str)| {
        let spec = core_v1::PodSpec {
            containers: vec![container("app", &[("cpu", "1"), extra], &[])],
            ..core_v1::PodSpec::default()
        };
        pod_requests(&pod(spec)).and_then(|r| pod_price(&r, &catalogue, &kubelet, 1.0))
    };
    let plain = price(("cpu", "1")).unwrap();
    for (resource, amount, named) in [
        ("example.com/fpga", "1", "example.com/fpga 1"),
        ("hugepages-1Gi", "4Gi", "hugepages-1Gi"),
        ("ephemeral-storage", "100Ti", "ephemeral-storage 100"),
        ("pods", "1000", "pods 1000"),
    ] {
        let err = price((resource, amount)).unwrap_err();
        assert!(matches!(err, PriceError::NoFit { .. }), "{resource}: {err}");
        assert!(err.to_string().contains(named), "{resource}: {err}");
    }
    // What the offerings do have is priced: a GPU, ephemeral storage within
    // a disk (the small one's 40 GiB less 10 % is not enough for 50 GiB, an
    // unlisted disk is), a few pods.
    assert_eq!(price(("nvidia.com/gpu", "1")).unwrap().instance_type, "t4");
    let p = price(("ephemeral-storage", "50Gi")).unwrap();
    assert_ne!(p.instance_type, "small", "{p:?}");
    assert_eq!(price(("ephemeral-storage", "1Gi")).unwrap(), plain);
    assert_eq!(price(("pods", "1")).unwrap(), plain);
    // Fractional extended resources are not pods Kubernetes would take.
    for amount in ["500m", "1.5", "1u"] {
        let err = price(("nvidia.com/gpu", amount)).unwrap_err();
        assert!(
            matches!(&err, PriceError::Fractional { resource, .. } if resource == "nvidia.com/gpu"),
            "{amount}: {err}"
        );
        assert!(err.to_string().contains("app"), "{err}");
    }
    // Native resources may be fractional.
    assert!(price(("memory", "1.5Gi")).is_ok());
}
