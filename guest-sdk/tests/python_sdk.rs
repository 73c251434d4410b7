//! The Python SDK (`guest-sdk/python`, package `wasmprov_sdk`) held to this
//! crate: its unit tests pass under plain `python3 -m unittest`, and its ids,
//! tags (flat tags, presets with their long forms, and what they read back),
//! names and request digests are this crate's byte for byte, for
//! inputs that reach every branch (escapes, hashes, cuts, long ids, floats
//! in each of serde_json's forms, Unicode and control characters). A fleet
//! may mix plugins in both languages: a node one made, the other finds.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use wasmprov_guest::tags::{self, FlatTags, TagCodec};
use wasmprov_guest::{Arch, BootData, CapacityType, NodeShape, ProvisionRequest};

fn sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python")
}

fn python(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new("python3")
        .args(args)
        .current_dir(sdk())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (tests/setup.sh's machine has it)");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn the_python_sdk_unit_tests_pass() {
    let out = python(
        &["-m", "unittest", "discover", "-s", "tests", "-t", "."],
        b"",
    );
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "python3 -m unittest failed:\n{log}");
    // Discovery found the suites: a count, not an empty run.
    let ran: usize = log
        .lines()
        .find_map(|l| l.strip_prefix("Ran ")?.split(' ').next()?.parse().ok())
        .unwrap_or(0);
    assert!(ran >= 30, "only {ran} Python tests ran:\n{log}");
    println!(
        "{}",
        log.lines().rev().take(3).collect::<Vec<_>>().join(" | ")
    );
}

/// What the Python side computes for the inputs, in the same shape.
const PARITY: &str = r#"
import json, sys
from wasmprov_sdk import tags, BootData, NodeShape, ProvisionRequest

def opt(f, *a):
    try:
        return f(*a)
    except tags.TooLong:
        return None

i = json.load(sys.stdin)
def request(r):
    b = r["boot"]
    boot = BootData(b["image"], None if b["user_data"] is None else bytes(b["user_data"]), b["ssh_keys"])
    return ProvisionRequest(r["request_id"], NodeShape(**r["shape"]), boot)
out = ({
    "valid": [tags.is_valid_id(s) for s in i["texts"]],
    "label_value": [tags.label_value(s) for s in i["texts"]],
    "codec": [opt(tags.LABEL_VALUE.encode, s) for s in i["texts"]],
    "decode": [tags.LABEL_VALUE.decode(s) for s in i["texts"]],
    "flat": [opt(tags.DIGITALOCEAN.encode, k, v) for k, v in i["pairs"]],
    "flat_decode": [tags.DIGITALOCEAN.decode(s) for s in i["texts"]],
    "hostname": [tags.hostname(p, t, k.encode()) for p, t, k in i["hosts"]],
    "hostname_with_hash": [tags.hostname_with_hash(p, t, k.encode()) for p, t, k in i["hosts"]],
    "pair_token": [tags.pair_token(o, r, n) for o, r, n in i["tokens"]],
    "ssh_key_name": [tags.ssh_key_name(k) for k in i["texts"]],
    "digest": [tags.request_digest(request(r)) for r in i["requests"]],
    "labels": [tags.node_labels("o-1", r["request_id"], tags.request_labels(request(r)))
               for r in i["requests"]],
})
from wasmprov_sdk import random, rest, time
for f in ("rfc3339_ms", "naive_utc_ms", "epoch_seconds_ms", "any_ms"):
    out["time_" + f] = [getattr(time, f)(s) for s in i["times"]]
def lcg(seed):
    state = [seed]
    def source(n):
        out = []
        for _ in range(n):
            state[0] = (state[0] * 1103515245 + 12345) % 2**32
            out.append(state[0] >> 24)
        return bytes(out)
    return source
out["password"] = [random.password_from(n, lcg(seed)) for n, seed in i["passwords"]]
def limited(labels):
    labels = dict(labels)
    rest.within_host_limits(labels)
    return labels
out["within_host_limits"] = [limited(l) for l in i["label_maps"]]
for name in ("DIGITALOCEAN", "LINODE", "VULTR"):
    preset = getattr(tags.Preset, name)
    out["preset_" + name] = [opt(preset.encode, k, v) for k, v in i["pairs"]]
    out["preset_decode_" + name] = [preset.decode_all(t) for t in i["tag_lists"]]
print(json.dumps(out, ensure_ascii=False))
"#;

fn texts() -> Vec<String> {
    let mut v: Vec<String> = [
        "",
        "a",
        "X",
        "XX",
        "X41",
        "x41",
        "X3A",
        "X+F",
        "k:X+F",
        ":",
        "a:b",
        "a::b",
        "--",
        "a--b",
        "a_b__c",
        "-a-",
        "_a",
        "Web-1",
        "web server",
        "ünïcödé ✓",
        "%41",
        "a.b/c",
        "\u{1b}[2J",
        "a\"b\\c",
        "tab\there",
        "line\nbreak",
        "\u{7f}",
        "wasmprov-owner",
        "team_a-1",
        "0b0c8f3e-5d5c-4f7a-9c39-1d3f7a3c2b11",
        "Req/1",
        "..a..",
        "___",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKs ops@laptop",
        "ssh-rsa  AAAAB3  x y",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    v.extend([
        "x".repeat(62),
        "x".repeat(63),
        "x".repeat(64),
        "Y".repeat(100),
    ]);
    v.push(format!("{}{}", "a-".repeat(40), "é"));
    v
}

fn requests() -> Vec<ProvisionRequest> {
    let floats = [
        1.0,
        0.5,
        2.25,
        1.0 / 3.0,
        1e15,
        1e16,
        1.5e16,
        1e-5,
        1e-7,
        1.25e-7,
        123_456_789.125,
        1e300,
        5e-324,
        -0.0,
    ];
    let mut out = Vec::new();
    for (i, cpu) in floats.into_iter().enumerate() {
        let mut shape = NodeShape::new(cpu, (i as u64 + 1) << 28);
        if i % 2 == 1 {
            shape.arch = Some(if i % 4 == 1 {
                Arch::X86_64
            } else {
                Arch::Arm64
            });
            shape.gpu = 1;
            shape.gpu_vendor = Some("nvidia".into());
            shape.gpu_model = Some("nvidia-t4".into());
            shape.disk_bytes = Some(80 << 30);
            shape.zone = Some("eu-1".into());
            shape.capacity_type = CapacityType::Spot;
            shape.instance_type = Some("g4dn.xlarge".into());
        }
        shape.labels = BTreeMap::from([
            ("role".to_string(), texts()[i % texts().len()].clone()),
            (tags::OWNER.to_string(), "someone-else".to_string()),
            (
                tags::JOURNAL.to_string(),
                "k7m2q4x6b3c5d-hdaaeuxydc".to_string(),
            ),
            ("ü\u{1}\"k".to_string(), "v\\\n".to_string()),
        ]);
        let boot = BootData {
            image: (i % 3 == 0).then(|| "debian-12".to_string()),
            user_data: (i % 3 == 1).then(|| vec![0, 1, 127, 128, 255, b'#']),
            ssh_keys: if i % 3 == 2 {
                vec!["ssh-ed25519 AAAA ops@ünï".into(), "k2".into()]
            } else {
                Vec::new()
            },
        };
        let mut r = ProvisionRequest::new(format!("req-{i}"), shape);
        r.boot = boot;
        out.push(r);
    }
    out
}

#[test]
fn python_ids_and_tags_are_the_rust_sdks_byte_for_byte() {
    let texts = texts();
    let pairs: Vec<(String, String)> = texts
        .iter()
        .flat_map(|k| [(k.clone(), "v".to_string()), ("k".to_string(), k.clone())])
        .chain([
            ("k".to_string(), "a".repeat(253)),
            ("k".to_string(), "a".repeat(254)),
            (tags::REQUEST.to_string(), "r".repeat(63)),
            (tags::OWNER.to_string(), "o_-".repeat(21)),
            (
                tags::REQUEST_DIGEST.to_string(),
                "0123456789abcdef".to_string(),
            ),
            ("a".to_string(), String::new()),
            ("k".to_string(), "é".repeat(100)),
            ("x".repeat(60), "v".to_string()),
            ("x".repeat(40), "w".repeat(300)),
        ])
        .collect();
    // What the presets wrote, whole, cut short, reordered and among
    // foreign tags: what a plugin reads back from a cloud.
    let mut tag_lists: Vec<Vec<String>> = Vec::new();
    for preset in [
        tags::Preset::DIGITALOCEAN,
        tags::Preset::LINODE,
        tags::Preset::VULTR,
    ] {
        for (k, v) in &pairs {
            let Ok(mut t) = preset.encode(k, v) else {
                continue;
            };
            tag_lists.push(t.clone());
            if t.len() > 2 {
                t.pop();
                tag_lists.push(t.clone());
                t.reverse();
                t.insert(1, "production".into());
                t.push(format!("{k}:9:x"));
                tag_lists.push(t);
            }
        }
    }
    // As a case-insensitive cloud may give them back (folded), and with
    // two claims for one key (plain and long forms).
    let folded: Vec<Vec<String>> = tag_lists
        .iter()
        .map(|t| t.iter().map(|s| s.to_ascii_uppercase()).collect())
        .collect();
    tag_lists.extend(folded);
    let (long_a, long_b) = ("r".repeat(63), format!("{}s", "r".repeat(62)));
    for preset in [tags::Preset::LINODE, tags::Preset::VULTR] {
        for key in [tags::OWNER, tags::REQUEST, "role"] {
            for (a, b) in [
                ("a", "b"),
                ("a", &long_b),
                (&long_a, "b"),
                (&long_a, &long_b),
            ] {
                let mut both = preset.encode(key, a).unwrap();
                both.extend(preset.encode(key, b).unwrap());
                tag_lists.push(both.clone());
                both.extend(preset.encode(key, a).unwrap());
                both.reverse();
                tag_lists.push(both);
            }
        }
    }
    let hosts: Vec<(String, String, String)> = texts
        .iter()
        .flat_map(|t| {
            [
                ("wp".to_string(), t.clone(), t.clone()),
                ("wasmprov-node".to_string(), t.clone(), format!("o\0{t}")),
            ]
        })
        .chain(
            [
                // Two ids of one owner that collided under the 32-bit hash.
                "batch-2026-11-24-pool-gpu-workers-eu-central-u8kbtbz92n",
                "batch-2026-11-24-pool-gpu-workers-eu-central-y8y41oq3cl",
            ]
            .map(|id| {
                let key = format!("{:?}/{id}", Some("fleet-a"));
                ("wasmprov".to_string(), id.to_string(), key)
            }),
        )
        .collect();
    let tokens: Vec<(String, String, usize)> = [
        ("o", "r", 64),
        ("o".repeat(63).as_str(), "r", 64),
        ("o".repeat(63).as_str(), "r".repeat(63).as_str(), 64),
        ("o".repeat(63).as_str(), "r".repeat(63).as_str(), 255),
    ]
    .iter()
    .map(|(o, r, n)| ((*o).to_string(), (*r).to_string(), *n))
    .collect();
    let requests = requests();
    let times: Vec<String> = [
        "1970-01-01T00:00:01Z",
        "2025-06-01T12:00:00.250Z",
        "2025-06-01T12:00:00.2509999999Z",
        "2025-06-01t12:00:00z",
        "2025-06-01 12:00:00Z",
        "2025-06-01x12:00:00Z",
        "2025-06-01é12:00:00Z",
        " 2025-06-01T14:00:00+02:00\n",
        "2025-06-01T14:00:00-02:30",
        "2016-12-31T23:59:60Z",
        "2016-12-30T23:59:60Z",
        "2017-01-01T00:59:60+01:00",
        "2016-01-01T00:00:00+24:00",
        "2016-01-01T00:00:00+23:59",
        "2016-01-01T00:00:00+00:99",
        "2016-01-01T00:00:00+0000",
        "２016-01-01T00:00:00Z",
        "2016-01-01T00:00:0٣Z",
        "2016-02-30T00:00:00Z",
        "2016-02-29T00:00:00Z",
        "2015-02-29T00:00:00Z",
        "2016-00-10T00:00:00Z",
        "2016-01-01T24:00:00Z",
        "2016-01-01T00:00:00.Z",
        "1969-12-31T23:59:59Z",
        "1969-12-31T23:59:59.9995Z",
        "1970-01-01T00:30:00+01:00",
        "9999-12-31T23:59:59.999Z",
        "2018-01-01T00:01:01",
        "2018-01-01 00:01:01.5",
        "2018-01-01T00:01:01Z",
        "2018-01-01T00:01:01+01:00",
        "2018-01-01T00:01:01-01:00",
        "2018-01-01",
        "1514764861",
        "1514764861.25",
        "1514764861.",
        "12.3456",
        ".5",
        "-1",
        "+1",
        "1e3",
        "١٢",
        "18446744073709551",
        "18446744073709552",
        "18446744073709551615",
        "",
        "soon",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    let passwords: Vec<(usize, u32)> = vec![(8, 1), (12, 7), (32, 42), (64, 9), (300, 3)];
    let label_maps: Vec<BTreeMap<String, String>> = vec![
        BTreeMap::from([
            (tags::OWNER.to_string(), "o".to_string()),
            (String::new(), "v".to_string()),
            ("big".to_string(), "é".repeat(513)),
            ("k".repeat(257), "v".to_string()),
            ("ok".to_string(), "v".repeat(1024)),
        ]),
        (0..300)
            .map(|i| (format!("k{i}"), "v".to_string()))
            .chain([
                (tags::OWNER.to_string(), "o".to_string()),
                (tags::REQUEST.to_string(), "r".to_string()),
            ])
            .collect(),
    ];
    let input = json!({
        "times": times, "passwords": passwords, "label_maps": label_maps,
        "texts": texts, "pairs": pairs, "hosts": hosts, "tokens": tokens, "requests": requests,
        "tag_lists": tag_lists,
    });

    let codec = TagCodec::LABEL_VALUE;
    let flat = FlatTags::DIGITALOCEAN;
    let rust = json!({
        "valid": texts.iter().map(|s| wasmprov_api::ids::is_valid_id(s)).collect::<Vec<_>>(),
        "label_value": texts.iter().map(|s| tags::label_value(s)).collect::<Vec<_>>(),
        "codec": texts.iter().map(|s| codec.encode(s).ok()).collect::<Vec<_>>(),
        "decode": texts.iter().map(|s| codec.decode(s)).collect::<Vec<_>>(),
        "flat": pairs.iter().map(|(k, v)| flat.encode(k, v).ok()).collect::<Vec<_>>(),
        "flat_decode": texts.iter().map(|s| flat.decode(s)).collect::<Vec<_>>(),
        "hostname": hosts.iter().map(|(p, t, k)| tags::hostname(p, t, k.as_bytes())).collect::<Vec<_>>(),
        "hostname_with_hash": hosts
            .iter()
            .map(|(p, t, k)| tags::hostname_with_hash(p, t, k.as_bytes()))
            .collect::<Vec<_>>(),
        "pair_token": tokens.iter().map(|(o, r, n)| tags::pair_token(o, r, *n)).collect::<Vec<_>>(),
        "ssh_key_name": texts.iter().map(|k| tags::ssh_key_name(k)).collect::<Vec<_>>(),
        "digest": requests.iter().map(tags::request_digest).collect::<Vec<_>>(),
        "labels": requests
            .iter()
            .map(|r| tags::node_labels("o-1", &r.request_id, &tags::request_labels(r)))
            .collect::<Vec<_>>(),
    });

    let mut rust = rust;
    type Parse = fn(&str) -> Option<u64>;
    for (name, parse) in [
        ("rfc3339_ms", wasmprov_guest::time::rfc3339_ms as Parse),
        ("naive_utc_ms", wasmprov_guest::time::naive_utc_ms),
        ("epoch_seconds_ms", wasmprov_guest::time::epoch_seconds_ms),
        ("any_ms", wasmprov_guest::time::any_ms),
    ] {
        rust[format!("time_{name}")] = json!(times.iter().map(|t| parse(t)).collect::<Vec<_>>());
    }
    let lcg = |seed: u32| {
        let mut state = seed;
        move |n: usize| {
            (0..n)
                .map(|_| {
                    state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    (state >> 24) as u8
                })
                .collect::<Vec<u8>>()
        }
    };
    rust["password"] = json!(
        passwords
            .iter()
            .map(|(n, seed)| wasmprov_guest::random::password_from(*n, lcg(*seed)))
            .collect::<Vec<_>>()
    );
    rust["within_host_limits"] = json!(
        label_maps
            .iter()
            .map(|l| {
                let mut l = l.clone();
                wasmprov_guest::rest::within_host_limits(&mut l);
                l
            })
            .collect::<Vec<_>>()
    );
    for (name, preset) in [
        ("DIGITALOCEAN", tags::Preset::DIGITALOCEAN),
        ("LINODE", tags::Preset::LINODE),
        ("VULTR", tags::Preset::VULTR),
    ] {
        let encoded: Vec<_> = pairs
            .iter()
            .map(|(k, v)| preset.encode(k, v).ok())
            .collect();
        let decoded: Vec<_> = tag_lists.iter().map(|t| preset.decode_all(t)).collect();
        rust[format!("preset_{name}")] = json!(encoded);
        rust[format!("preset_decode_{name}")] = json!(decoded);
    }

    let out = python(&["-c", PARITY], input.to_string().as_bytes());
    assert!(
        out.status.success(),
        "the Python side failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let py: Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut compared = 0;
    for (what, want) in rust.as_object().unwrap() {
        let got = py[what].as_array().unwrap();
        let want = want.as_array().unwrap();
        assert_eq!(got.len(), want.len(), "{what}");
        for (i, (g, w)) in got.iter().zip(want).enumerate() {
            // Python writes a pair as a list, Rust as a list too; options as null.
            assert_eq!(
                g,
                w,
                "{what}[{i}]: Python {g} != Rust {w} (input {})",
                describe(&input, what, i)
            );
            compared += 1;
        }
    }
    assert!(compared > 400, "{compared}");
    println!("{compared} values agree");
}

fn describe(input: &Value, what: &str, i: usize) -> Value {
    let list = match what {
        "flat" => "pairs",
        w if w.starts_with("preset_decode") => "tag_lists",
        w if w.starts_with("preset_") => "pairs",
        "hostname" | "hostname_with_hash" => "hosts",
        "pair_token" => "tokens",
        "digest" | "labels" => "requests",
        w if w.starts_with("time_") => "times",
        "password" => "passwords",
        "within_host_limits" => "label_maps",
        _ => "texts",
    };
    input[list][i].clone()
}
