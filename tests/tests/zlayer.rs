//! Code written for ZLayer's provisioner contract (the real
//! `zlayer-provisioner` crate), run unchanged against real wasm plugins:
//! the cloud-init plugin with the fixture scripts
//! (`tests/fixtures/cloud-init/*.sh`) as its commands, and the Hetzner
//! plugin against its fake, each loaded by the host and served through
//! `wasmprov-compat-zlayer`. The other way, ZLayer's own
//! `CloudInitProvisioner` (with stub programs as its commands) serves a
//! fleet's capacity group beside the Hetzner plugin. And the crate that
//! holds the ZLayer code (tests/zlayer-port, outside the workspace) builds
//! on its own.
//!
//! The cloud-init plugin plays the part of ZLayer's own
//! `CloudInitProvisioner`: both create a node by running an operator's
//! command and hand the node a `#cloud-config` that runs the cluster's join
//! command at boot. Its set-up there (a command per operation, a join
//! command, a token) is this plugin's manifest here:
//!
//! | ZLayer's `CloudInitProvisioner` | the cloud-init plugin's manifest |
//! | --- | --- |
//! | the command that creates a node | `create_command` + `create_args`, granted by an `[[exec]]` |
//! | the command that lists nodes | `list_command` + `list_args`, granted |
//! | the command that destroys a node | `destroy_command` + `destroy_args`, granted |
//! | `zlayer node join …` in the `#cloud-config` | `join_command`, a template (`{token}`, `{labels}`, `{request_id}`, `{zone}`) |
//! | the cluster's join token | `[secrets] join_token`, read by the host, never shown |
//! | (no counterpart) | `instance_types` (the price list `price_hint` answers from), `capacity_types` |
//!
//! So where ZLayer's code would build `CloudInitProvisioner` from a config
//! of those commands, the ported code gets
//! `WasmprovProvisioner::new(host.plugin("cloud-init"))` and keeps using it
//! as a `CloudProvisioner`.

use std::path::{Path, PathBuf};

use wasmprov_compat_zlayer::{
    CapacityType, CloudProvisioner, JoinState, NodeHandle, ProvisionerError, WasmprovProvisioner,
};
use wasmprov_host::{Host, HostBuilder};
use wasmprov_tests::{PluginDir, guests};

/// ZLayer-style code written against ZLayer's real crate (unchanged; also
/// compiled on its own by tests/zlayer-port): the autoscaler's placement
/// logic.
#[path = "../seed/zlayer_orchestrator.rs"]
mod orchestrator;

use orchestrator::{FixedPool, Next};

const OWNER: &str = "zlayer-owner";
const TOKEN: &str = "zlayer-join-2f9a-secret";
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/cloud-init");
/// `small` anywhere (also spot), `large` only in z1 and z2.
const CATALOGUE: &str = r#"[
  {"name": "small", "cpu": 2, "memory_gib": 4, "hourly_usd": 0.02, "spot_hourly_usd": 0.008},
  {"name": "large", "cpu": 8, "memory_gib": 32, "hourly_usd": 0.16, "zones": ["z1", "z2"]}
]"#;

/// The cloud-init plugin in a host, its scripts and their state directory.
struct Rig {
    _dir: PluginDir,
    _host: Host,
    _tmp: tempfile::TempDir,
    state: PathBuf,
    cloud: WasmprovProvisioner,
}

/// The manifest: the three fixture scripts as commands, granted exactly.
fn manifest(bin: &Path, state: &Path) -> String {
    let bin = bin.display();
    let state = state.display();
    format!(
        r#"[config]
create_command = "{bin}/create.sh"
create_args = "--state {state}"
list_command = "{bin}/list.sh"
list_args = "--state {state}"
destroy_command = "{bin}/destroy.sh"
destroy_args = "--state {state}"
join_command = "zlayer node join --token {{token}} --labels {{labels}}"
capacity_types = "on-demand, spot"
instance_types = '''{CATALOGUE}'''

[secrets]
join_token = {{ env = "CLUSTER_JOIN_TOKEN" }}

[[exec]]
program = "{bin}/create.sh"
args = ["--state", "{state}", "*"]
env = ["WASMPROV_OWNER", "WASMPROV_REQUEST_ID", "WASMPROV_INSTANCE_TYPE", "WASMPROV_ZONE",
       "WASMPROV_CAPACITY_TYPE", "WASMPROV_LABELS", "WASMPROV_LABELS_JSON"]
timeout_ms = 10000

[[exec]]
program = "{bin}/list.sh"
args = ["--state", "{state}"]
timeout_ms = 10000

[[exec]]
program = "{bin}/destroy.sh"
args = ["--state", "{state}", "*"]
timeout_ms = 10000
"#
    )
}

async fn rig() -> Rig {
    let tmp = tempfile::tempdir().expect("tempdir");
    let bin = tmp.path().join("bin");
    let state = tmp.path().join("state");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(state.join("nodes")).unwrap();
    for script in ["create.sh", "list.sh", "destroy.sh"] {
        use std::os::unix::fs::PermissionsExt;
        let to = bin.join(script);
        std::fs::copy(Path::new(FIXTURES).join(script), &to).expect("copy script");
        std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let dir = PluginDir::new();
    dir.add("cloud-init", guests::CLOUD_INIT, &manifest(&bin, &state));
    let host = HostBuilder::new(dir.path())
        .owner_id(OWNER)
        .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
        .work_dir(tmp.path().join("work"))
        .secret_source(|name| (name == "CLUSTER_JOIN_TOKEN").then(|| TOKEN.to_string()))
        .build()
        .await
        .expect("host builds");
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let plugin = host.plugin("cloud-init").expect("plugin loaded");
    Rig {
        _dir: dir,
        _host: host,
        _tmp: tmp,
        state,
        cloud: WasmprovProvisioner::new(plugin),
    }
}

impl Rig {
    /// Ids of the node files the scripts keep, sorted.
    fn node_files(&self) -> Vec<String> {
        let mut ids: Vec<String> = std::fs::read_dir(self.state.join("nodes"))
            .unwrap()
            .filter_map(|e| {
                let name = e.unwrap().file_name().to_string_lossy().to_string();
                name.strip_suffix(".json").map(str::to_string)
            })
            .collect();
        ids.sort();
        ids
    }

    fn read(&self, file: &str) -> String {
        std::fs::read_to_string(self.state.join("nodes").join(file))
            .unwrap_or_else(|e| panic!("{file}: {e}"))
    }

    /// How many commands starting with `prefix` ran (`create`, `list`, `destroy`).
    fn count_calls(&self, prefix: &str) -> usize {
        std::fs::read_to_string(self.state.join("calls.log"))
            .unwrap_or_default()
            .lines()
            .filter(|c| c.starts_with(prefix))
            .count()
    }

    /// Makes the next run of `command` fail as the fixture's `fault` says.
    fn fault(&self, command: &str, fault: &str) {
        std::fs::write(self.state.join(format!("{command}.fault")), fault).unwrap();
    }

    /// Sets a node's state as the backend would report it.
    fn set_state(&self, id: &str, state: &str) {
        let path = self.state.join("nodes").join(format!("{id}.json"));
        let mut node: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        node["state"] = state.into();
        std::fs::write(path, node.to_string()).unwrap();
    }
}

fn ids(nodes: &[NodeHandle]) -> Vec<&str> {
    nodes.iter().map(|n| n.provider_id.as_str()).collect()
}

#[tokio::test]
async fn the_orchestrator_scales_describes_and_drains_through_the_plugin() {
    let r = rig().await;
    let pool = FixedPool::new("rack", 0.03, &["metal-1"]);
    let backends: [&dyn CloudProvisioner; 2] = [&r.cloud, &pool];
    assert_eq!(r.cloud.name(), "cloud-init");
    assert_eq!(
        r.cloud.capacity_types(),
        &[CapacityType::OnDemand, CapacityType::Spot]
    );

    // The worker shape from the autoscaler's JSON config, ZLayer spelling.
    let worker = orchestrator::shape_from_json(
        r#"{"cpu": 2.0, "memory_bytes": 4294967296, "gpu": 0, "gpu_vendor": null,
            "labels": {"role": "worker"}, "zone": "z1", "capacity_type": "OnDemand"}"#,
    )
    .unwrap();
    let literal = orchestrator::worker_shape(Some("z1"), CapacityType::OnDemand);
    assert_eq!(
        serde_json::to_value(&worker).unwrap(),
        serde_json::to_value(&literal).unwrap()
    );
    // wasmprov's own spelling is not accepted where ZLayer's is expected.
    let err = orchestrator::shape_from_json(
        &serde_json::to_string(&literal)
            .unwrap()
            .replace("OnDemand", "on_demand"),
    )
    .unwrap_err();
    assert_eq!(orchestrator::next_step(&err), Next::GiveUp, "{err}");

    // Cheapest: the plugin's `small` (0.02/h) beats the pool (2 × 0.03/h).
    let (best, hint) = orchestrator::cheapest(&backends, &worker).unwrap();
    assert_eq!(best.name(), "cloud-init");
    assert!((hint.hourly_usd - 0.02).abs() < 1e-12, "{hint:?}");
    assert_eq!(hint.capacity_type, CapacityType::OnDemand);
    let pool_hint = pool.price_hint(&worker).unwrap();
    assert!((pool_hint.hourly_usd - 0.06).abs() < 1e-12);

    // Three workers: three runs of the create script, three nodes.
    let nodes = orchestrator::scale_up(best, &worker, 3).await.unwrap();
    assert_eq!(ids(&nodes), ["node-0001", "node-0002", "node-0003"]);
    for (i, node) in nodes.iter().enumerate() {
        assert_eq!(node.address, Some(format!("10.0.0.{}", i + 1)));
        assert_eq!(node.zone.as_deref(), Some("z1"));
        assert_eq!(node.capacity_type, CapacityType::OnDemand);
        assert_eq!(node.join_state, JoinState::Provisioning);
    }
    assert_eq!(r.count_calls("create"), 3);
    // Each got a #cloud-config that runs the join command with its labels.
    let doc = r.read("node-0002.cloud-config");
    assert!(doc.starts_with("#cloud-config\n"), "{doc}");
    let join = doc
        .lines()
        .find(|l| l.contains(r#""zlayer", "node", "join""#))
        .unwrap_or_else(|| panic!("no join command in {doc}"));
    assert!(join.contains(TOKEN), "{join}");
    assert!(join.contains("role=worker"), "{join}");
    // ZLayer's provision carries no request id: each call made up its own,
    // so the same shape three times is three nodes (a retry would be a
    // fourth). The ids are on the nodes, where only wasmprov's API sees them.
    let tagged = r.cloud.inner().describe().await.unwrap();
    let requests: std::collections::BTreeSet<&str> = tagged
        .iter()
        .map(|n| n.labels["wasmprov-request"].as_str())
        .collect();
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert!(
        requests.iter().all(|r| r.starts_with("auto-")),
        "{requests:?}"
    );

    // A spot worker: only the plugin offers spot.
    let spot = orchestrator::shape_from_json(
        r#"{"cpu": 2.0, "memory_bytes": 4294967296, "gpu": 0, "gpu_vendor": null,
            "labels": {}, "zone": null, "capacity_type": "Spot"}"#,
    )
    .unwrap();
    let (best, hint) = orchestrator::cheapest(&backends, &spot).unwrap();
    assert_eq!(best.name(), "cloud-init");
    assert!((hint.hourly_usd - 0.008).abs() < 1e-12, "{hint:?}");
    assert_eq!(hint.capacity_type, CapacityType::Spot);
    let spot_node = best.provision(&spot).await.unwrap();
    assert_eq!(spot_node.provider_id, "node-0004");
    assert_eq!(spot_node.capacity_type, CapacityType::Spot);
    assert_eq!(spot_node.zone, None);

    // describe: the states the list script reports, as ZLayer's JoinState.
    r.set_state("node-0001", "running");
    r.set_state("node-0002", "booting");
    r.set_state("node-0003", "failed");
    r.set_state("node-0004", "joining");
    let listed = r.cloud.describe().await.unwrap();
    assert_eq!(
        ids(&listed),
        ["node-0001", "node-0002", "node-0003", "node-0004"]
    );
    let states: Vec<JoinState> = listed.iter().map(|n| n.join_state).collect();
    assert_eq!(
        states,
        [
            JoinState::Joined,
            JoinState::Booting,
            JoinState::Failed,
            JoinState::Joining
        ]
    );
    let census = orchestrator::census(&listed);
    assert_eq!((census.pending, census.ready, census.failed), (2, 1, 1));

    // A described node in ZLayer's JSON, and back.
    let json = serde_json::to_value(&listed[0]).unwrap();
    assert_eq!(
        json,
        serde_json::json!({
            "provider_id": "node-0001",
            "address": "10.0.0.1",
            "zone": "z1",
            "capacity_type": "OnDemand",
            "join_state": "Joined",
        })
    );
    let back: NodeHandle = serde_json::from_str(
        r#"{"provider_id": "node-0004", "address": "10.0.0.4", "zone": null,
            "capacity_type": "Spot", "join_state": "Joining"}"#,
    )
    .unwrap();
    assert_eq!(
        serde_json::to_value(&back).unwrap(),
        serde_json::to_value(&listed[3]).unwrap()
    );

    // The failed node goes first, then everything.
    assert_eq!(
        orchestrator::reap(&r.cloud, false).await.unwrap(),
        ["node-0003"]
    );
    assert_eq!(r.node_files(), ["node-0001", "node-0002", "node-0004"]);
    let gone = orchestrator::reap(&r.cloud, true).await.unwrap();
    assert_eq!(gone, ["node-0001", "node-0002", "node-0004"]);
    assert!(r.cloud.describe().await.unwrap().is_empty());
    assert!(r.node_files().is_empty());
    assert_eq!(r.count_calls("destroy"), 4);

    // A node already gone: wasmprov's not-found, as ZLayer's `Other`.
    let err = r
        .cloud
        .terminate(&"node-0001".to_string())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ProvisionerError::Other(m) if m.starts_with("not found:")),
        "{err:?}"
    );
    assert_eq!(
        r.count_calls("destroy"),
        4,
        "no destroy for a node not ours"
    );
}

#[tokio::test]
async fn impossible_and_failing_requests_arrive_as_the_five_kinds() {
    let r = rig().await;
    let pool = FixedPool::new("rack", 0.03, &["metal-1"]);
    let backends: [&dyn CloudProvisioner; 2] = [&r.cloud, &pool];

    // No GPU type in the catalogue: the plugin refuses before any command.
    let gpu = orchestrator::gpu_shape(4, "nvidia");
    assert!(r.cloud.price_hint(&gpu).is_none());
    let err = r.cloud.provision(&gpu).await.unwrap_err();
    assert!(matches!(&err, ProvisionerError::Unsupported(_)), "{err:?}");
    assert_eq!(orchestrator::next_step(&err), Next::Skip);
    // Neither backend offers it: the orchestrator says so, in ZLayer's terms.
    let err = orchestrator::place(&backends, &gpu, 1).await.unwrap_err();
    assert!(
        matches!(&err, ProvisionerError::Unsupported(m) if m.contains("cloud-init: unsupported") && m.contains("rack: unsupported")),
        "{err:?}"
    );

    // `large` is not offered in z9: no capacity there. The pool (priced)
    // is asked first and has one machine; after that both are full.
    let batch = orchestrator::batch_shape(8.0, 32, "z9");
    let err = r.cloud.provision(&batch).await.unwrap_err();
    assert!(
        matches!(&err, ProvisionerError::Capacity(m) if m.starts_with("(zone)")),
        "{err:?}"
    );
    assert_eq!(orchestrator::next_step(&err), Next::TryElsewhere);
    let (name, rented) = orchestrator::place(&backends, &batch, 1).await.unwrap();
    assert_eq!(name, "rack");
    assert_eq!(ids(&rented), ["metal-1"]);
    assert_eq!(rented[0].join_state, JoinState::Booting);
    let err = orchestrator::place(&backends, &batch, 1).await.unwrap_err();
    assert!(
        matches!(&err, ProvisionerError::Capacity(m)
            if m.contains("every machine of rack is rented")
                && m.contains("cloud-init: capacity unavailable: (zone)")),
        "{err:?}"
    );
    assert_eq!(r.count_calls("create"), 0, "no create ran for any of these");
    // In z1 it fits the plugin's `large`.
    let (name, placed) =
        orchestrator::place(&backends, &orchestrator::batch_shape(8.0, 32, "z1"), 1)
            .await
            .unwrap();
    assert_eq!(name, "cloud-init");
    assert_eq!(placed[0].zone.as_deref(), Some("z1"));

    // What the backend's commands report, through the same match.
    let worker = orchestrator::worker_shape(Some("z1"), CapacityType::OnDemand);
    for (command, fault, want) in [
        ("create", "capacity-json", Next::TryElsewhere),
        ("create", "rate-stderr", Next::RetryLater),
        ("create", "garbage", Next::RetryLater),
        ("create", "auth-json", Next::GiveUp),
        ("create", "quota-json", Next::GiveUp),
        ("create", "other-stderr", Next::GiveUp),
        ("list", "auth-json", Next::GiveUp),
        ("list", "garbage", Next::RetryLater),
    ] {
        r.fault(command, fault);
        let err = if command == "create" {
            r.cloud.provision(&worker).await.map(drop).unwrap_err()
        } else {
            r.cloud.describe().await.map(drop).unwrap_err()
        };
        assert_eq!(orchestrator::next_step(&err), want, "{fault}: {err:?}");
        let text = err.to_string();
        match fault {
            "capacity-json" => assert_eq!(
                text,
                "capacity unavailable: (zone) create command: zone z1 is full"
            ),
            "rate-stderr" => assert!(text.starts_with("transport: rate limited"), "{text}"),
            "quota-json" => assert!(
                text.starts_with("quota exceeded: ") && text.contains("20 of 20"),
                "{text}"
            ),
            _ => {}
        }
    }
    assert_eq!(
        ids(&r.cloud.describe().await.unwrap()),
        [placed[0].provider_id.as_str()]
    );

    // A shape the orchestrator cannot parse never reaches a backend.
    let err = orchestrator::shape_from_json(r#"{"cpu": 2.0}"#).unwrap_err();
    assert!(
        matches!(&err, ProvisionerError::Other(m) if m.starts_with("bad node shape")),
        "{err:?}"
    );

    assert_eq!(orchestrator::reap(&pool, true).await.unwrap(), ["metal-1"]);
    assert!(pool.describe().await.unwrap().is_empty());
    orchestrator::reap(&r.cloud, true).await.unwrap();
    assert!(r.node_files().is_empty());
}

/// The port crate builds on its own, as a ZLayer user's crate would: its
/// own workspace and lock file, ZLayer's real crate from the registry, the
/// ZLayer code of tests/seed unchanged, a wasmprov provisioner handed to it
/// as `Arc<dyn zlayer_provisioner::CloudProvisioner>`.
#[test]
fn the_port_crate_builds_outside_the_workspace() {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/zlayer-port/Cargo.toml");
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/zlayer-port"),
        |t| PathBuf::from(t).join("zlayer-port"),
    );
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let started = std::time::Instant::now();
    let out = std::process::Command::new(cargo)
        .args([
            "build",
            "--locked",
            "--offline",
            "--quiet",
            "--manifest-path",
            manifest,
        ])
        .arg("--target-dir")
        .arg(&target)
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "the port crate does not build on its own:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rlib = target.join("debug/libzlayer_port.rlib");
    assert!(rlib.is_file(), "{} was not built", rlib.display());
    eprintln!(
        "zlayer-port built in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// ZLayer's code, unchanged, drives the Hetzner plugin against its fake:
/// price, place, scale, census, reap, through `zlayer_provisioner`'s trait.
#[tokio::test]
async fn the_seed_usage_on_the_real_crate_drives_the_hetzner_plugin() {
    let fake = wasmprov_fake::HetznerFake::start(
        "127.0.0.1:0".parse().unwrap(),
        wasmprov_fake::HetznerFakeOptions {
            boot_delay_polls: 0,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let dir = PluginDir::new();
    let grant = fake.url().trim_end_matches("/v1").to_string();
    dir.add(
        "hetzner",
        guests::HETZNER,
        &format!(
            "[config]\nendpoint = \"{}\"\nlocation = \"fsn1\"\n[secrets]\ntoken = {{ env = \"HCLOUD_TOKEN\" }}\n[http]\nallow = [\"{grant}\"]\n",
            fake.url()
        ),
    );
    let host = HostBuilder::new(dir.path())
        .owner_id(OWNER)
        .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
        .secret_source(|name| (name == "HCLOUD_TOKEN").then(|| "fake-hetzner-token".to_string()))
        .build()
        .await
        .expect("host builds");
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    // The one line a ZLayer user writes (as tests/zlayer-port's `backend`).
    let cloud: std::sync::Arc<dyn CloudProvisioner> =
        wasmprov_compat_zlayer::zlayer(host.plugin("hetzner").expect("loaded"));
    let pool = FixedPool::new("rack", 0.03, &["metal-1"]);
    let backends: [&dyn CloudProvisioner; 2] = [cloud.as_ref(), &pool];

    let worker = orchestrator::worker_shape(Some("fsn1"), CapacityType::OnDemand);
    let (best, hint) = orchestrator::cheapest(&backends, &worker).unwrap();
    assert_eq!(best.name(), "hetzner");
    assert!(hint.hourly_usd > 0.0 && hint.hourly_usd < 0.06, "{hint:?}");
    let (name, nodes) = orchestrator::place(&backends, &worker, 2).await.unwrap();
    assert_eq!(name, "hetzner");
    assert_eq!(nodes.len(), 2);
    let servers = fake.servers();
    assert_eq!(servers.len(), 2);
    for s in &servers {
        assert_eq!(s.labels["wasmprov-owner"], OWNER, "{s:?}");
        assert_eq!(s.labels["role"], "worker", "{s:?}");
        assert!(
            nodes.iter().any(|n| n.provider_id == s.id.to_string()),
            "{s:?}"
        );
    }
    let listed = cloud.describe().await.unwrap();
    assert_eq!(listed.len(), 2);
    let census = orchestrator::census(&listed);
    assert_eq!(census.pending + census.ready, 2, "{census:?}");
    assert_eq!(census.failed, 0);

    // A GPU shape: the plugin offers no GPU type, in ZLayer's terms.
    let err = cloud
        .provision(&orchestrator::gpu_shape(1, "nvidia"))
        .await
        .unwrap_err();
    assert_eq!(orchestrator::next_step(&err), Next::Skip, "{err:?}");

    let gone = orchestrator::reap(cloud.as_ref(), true).await.unwrap();
    assert_eq!(gone.len(), 2);
    assert!(cloud.describe().await.unwrap().is_empty());
    assert!(fake.servers().is_empty());
    // Already gone: wasmprov's not-found, ZLayer's `Other`.
    let err = cloud.terminate(&gone[0]).await.unwrap_err();
    assert_eq!(orchestrator::next_step(&err), Next::GiveUp, "{err:?}");
}

/// Stub programs for ZLayer's `CloudInitProvisioner`: create (at most
/// `room` nodes), list, destroy, over files in `state`.
fn zlayer_stub_programs(bin: &Path, state: &Path, room: usize) {
    use std::os::unix::fs::PermissionsExt;
    let state = state.display();
    let scripts = [
        (
            "create.sh",
            format!(
                r#"#!/bin/sh
# create.sh CPU MEMORY_MB LABELS ZONE CAPACITY USER_DATA
n=$(ls {state} | grep -c '^zl-')
if [ "$n" -ge {room} ]; then echo "no room: $n of {room} machines" >&2; exit 1; fi
id="zl-$(( $(cat {state}/../seq 2>/dev/null || echo 0) + 1 ))"
echo "${{id#zl-}}" > {state}/../seq
printf 'cpu=%s\nmemory_mb=%s\nlabels=%s\nzone=%s\ncapacity=%s\n%s\n' "$1" "$2" "$3" "$4" "$5" "$6" > {state}/$id
echo "$id"
"#
            ),
        ),
        (
            "list.sh",
            format!(
                r#"#!/bin/sh
i=0
for f in $(ls {state}); do i=$((i+1)); echo "$f,10.2.0.$i"; done
"#
            ),
        ),
        (
            "destroy.sh",
            format!(
                r#"#!/bin/sh
[ -f {state}/$1 ] || {{ echo "no machine $1" >&2; exit 1; }}
rm {state}/$1
"#
            ),
        ),
    ];
    for (name, text) in scripts {
        let path = bin.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// A fleet's capacity group over ZLayer's real `CloudInitProvisioner` (its
/// commands are stub programs) and the Hetzner plugin together: the ZLayer
/// backend is cheaper and takes what it has room for, the plugin the rest;
/// the fleet pins each offering's instance type; a machine made by hand is
/// listed by ZLayer's describe but never reaches the fleet.
#[tokio::test]
async fn a_fleet_group_scales_over_zlayers_cloud_init_provisioner_and_a_wasm_plugin() {
    use std::sync::Arc;
    use wasmprov_compat_zlayer::{CloudInitConfig, CloudInitProvisioner, ZLayerBackend};

    let tmp = tempfile::tempdir().unwrap();
    let bin = tmp.path().join("bin");
    let machines = tmp.path().join("machines");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&machines).unwrap();
    zlayer_stub_programs(&bin, &machines, 2);
    std::fs::write(machines.join("by-hand"), "made by someone else\n").unwrap();
    let b = bin.display();
    let zlayer = CloudInitProvisioner::new(CloudInitConfig {
        leader_addr: "10.0.0.1:3669".into(),
        join_token: TOKEN.into(),
        provision_cmd: format!(
            "{b}/create.sh {{cpu}} {{memory_mb}} '{{labels}}' '{{zone}}' {{capacity}} '{{user_data}}'"
        ),
        terminate_cmd: format!("{b}/destroy.sh {{provider_id}}"),
        describe_cmd: Some(format!("{b}/list.sh")),
        user_data_template: "#cloud-config\nruncmd:\n  - zlayer node join {leader_addr} --token {join_token} --labels {labels}\n".into(),
        hourly_usd: 0.004,
    });
    let backend = ZLayerBackend::new(Arc::new(zlayer))
        .named("zlayer")
        .instance_type("zl-standard")
        .owner(OWNER)
        .ledger_file(tmp.path().join("zlayer-ledger.json"))
        .unwrap();

    let fake = wasmprov_fake::HetznerFake::start(
        "127.0.0.1:0".parse().unwrap(),
        wasmprov_fake::HetznerFakeOptions {
            boot_delay_polls: 0,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let dir = PluginDir::new();
    let grant = fake.url().trim_end_matches("/v1").to_string();
    dir.add(
        "hetzner",
        guests::HETZNER,
        &format!(
            "[config]\nendpoint = \"{}\"\nlocation = \"fsn1\"\n[secrets]\ntoken = {{ env = \"HCLOUD_TOKEN\" }}\n[http]\nallow = [\"{grant}\"]\n",
            fake.url()
        ),
    );
    let host = HostBuilder::new(dir.path())
        .owner_id(OWNER)
        .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
        .secret_source(|name| (name == "HCLOUD_TOKEN").then(|| "fake-hetzner-token".to_string()))
        .build()
        .await
        .expect("host builds");
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let backends = wasmprov_fleet::BackendSet::new()
        .with_source(Arc::new(host))
        .with("zlayer", Arc::new(backend));
    let fleet =
        wasmprov_fleet::Fleet::open(Arc::new(backends), tmp.path().join("journal.redb")).unwrap();
    let group =
        wasmprov_fleet::CapacityGroup::new("web", wasmprov_api::NodeShape::new(2.0, 4 << 30), 0, 6);

    let report = fleet.scale(&group, 4).await.unwrap();
    assert!(report.converged(), "{report}");
    let on = |plugin: &str| report.added.iter().filter(|m| m.plugin == plugin).count();
    assert_eq!((on("zlayer"), on("hetzner")), (2, 2), "{report}");
    assert!(
        report
            .errors
            .iter()
            .any(|e| e.contains("zlayer (zl-standard)") && e.contains("no room")),
        "the third ZLayer machine failed for capacity: {report}"
    );
    // What ZLayer's provisioner was given: the profile, the labels (owner
    // and request among them) in its command and in the #cloud-config.
    let zl_member = report.added.iter().find(|m| m.plugin == "zlayer").unwrap();
    let made = std::fs::read_to_string(machines.join(&zl_member.provider_id)).unwrap();
    assert!(
        made.contains("cpu=2\n") && made.contains("memory_mb=4096\n"),
        "{made}"
    );
    assert!(made.contains(&format!("wasmprov-owner={OWNER}")), "{made}");
    assert!(
        made.contains(&format!("wasmprov-request={}", zl_member.request_id)),
        "{made}"
    );
    assert!(
        made.contains("#cloud-config") && made.contains("zlayer node join 10.0.0.1:3669"),
        "{made}"
    );
    assert_eq!(fake.servers().len(), 2);

    // The fleet sees its four members and nothing else: "by-hand" is
    // listed by ZLayer's describe, not by the backend.
    let zl = fleet.backends().backend("zlayer").unwrap();
    let listed = zl.describe().await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed.iter().all(|n| n.provider_id != "by-hand"));
    assert!(
        listed
            .iter()
            .all(|n| n.instance_type.as_deref() == Some("zl-standard"))
    );
    let reconciled = fleet
        .reconcile(&wasmprov_fleet::ReconcilePolicy {
            grace: std::time::Duration::ZERO,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        reconciled.orphans.is_empty() && reconciled.leaks.is_empty(),
        "{reconciled:?}"
    );
    assert_eq!(fleet.members("web").unwrap().len(), 4);

    // Down to zero: every member terminated on both; "by-hand" stays.
    let report = fleet.scale(&group, 0).await.unwrap();
    assert!(report.converged(), "{report}");
    assert_eq!(report.removed.len(), 4, "{report}");
    let left: Vec<String> = std::fs::read_dir(&machines)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    assert_eq!(left, ["by-hand"]);
    assert!(fake.servers().is_empty());
}
