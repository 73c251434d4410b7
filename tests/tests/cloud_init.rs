//! The cloud-init plugin driven through the host, with real shell scripts
//! (`tests/fixtures/cloud-init/*.sh`) as the operator's create, list and
//! destroy commands, run by the host's exec sandbox: cleared environment,
//! grants with argument patterns as tight as the protocol allows.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmprov_api::{
    CapacityScope, CapacityType, CloudProvisioner, JoinState, NodeShape, ProvisionRequest,
    ProvisionerError,
};
use wasmprov_host::{Host, HostBuilder};
use wasmprov_tests::{PluginDir, guests};

const OWNER: &str = "cloud-owner";
const TOKEN: &str = "join-tok-7c1e-secret";
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/cloud-init");
const CREATE_ENV: [&str; 7] = [
    "WASMPROV_OWNER",
    "WASMPROV_REQUEST_ID",
    "WASMPROV_INSTANCE_TYPE",
    "WASMPROV_ZONE",
    "WASMPROV_CAPACITY_TYPE",
    "WASMPROV_LABELS",
    "WASMPROV_LABELS_JSON",
];
const CATALOGUE: &str = r#"[
  {"name": "small", "cpu": 2, "memory_gib": 4, "hourly_usd": 0.02, "spot_hourly_usd": 0.008},
  {"name": "large", "cpu": 8, "memory_gib": 32, "hourly_usd": 0.16}
]"#;

/// The scripts, their state directory and the loaded plugin.
struct Rig {
    _dir: PluginDir,
    _host: Host,
    _tmp: tempfile::TempDir,
    bin: PathBuf,
    state: PathBuf,
    p: Arc<dyn CloudProvisioner>,
}

/// How the `[[exec]]` grants are written.
#[derive(Clone, Copy, PartialEq)]
enum Grants {
    /// Exactly the three scripts, tight argument patterns, the create env.
    Exact,
    /// The create grant names another program path.
    CreateElsewhere,
    /// The create grant names no environment variables.
    CreateWithoutEnv,
    /// The list grant is for another state directory.
    ListOtherArgs,
}

fn manifest(bin: &Path, state: &Path, grants: Grants) -> String {
    let bin = bin.display().to_string();
    let state = state.display().to_string();
    let env: Vec<String> = CREATE_ENV.iter().map(|e| format!("\"{e}\"")).collect();
    let create_program = match grants {
        Grants::CreateElsewhere => format!("{bin}/elsewhere/create.sh"),
        _ => format!("{bin}/create.sh"),
    };
    let create_env = match grants {
        Grants::CreateWithoutEnv => String::new(),
        _ => env.join(", "),
    };
    let list_state = match grants {
        Grants::ListOtherArgs => "/var/lib/other".to_string(),
        _ => state.clone(),
    };
    let config = r#"[config]
create_command = "BIN/create.sh"
create_args = "--state STATE"
list_command = "BIN/list.sh"
list_args = "--state STATE"
destroy_command = "BIN/destroy.sh"
destroy_args = "--state STATE"
join_command = "node-agent join --token {token} --labels {labels} --node {request_id} --zone={zone}"
capacity_types = "on-demand, spot"
instance_types = '''CATALOGUE'''

[secrets]
join_token = { env = "CLUSTER_JOIN_TOKEN" }
"#
    .replace("BIN", &bin)
    .replace("STATE", &state)
    .replace("CATALOGUE", CATALOGUE);
    format!(
        r#"{config}
[[exec]]
program = "{create_program}"
args = ["--state", "{state}", "*"]
env = [{create_env}]
timeout_ms = 10000

[[exec]]
program = "{bin}/list.sh"
args = ["--state", "{list_state}"]
timeout_ms = 10000

[[exec]]
program = "{bin}/destroy.sh"
args = ["--state", "{state}", "*"]
timeout_ms = 10000
"#
    )
}

async fn rig(grants: Grants) -> Rig {
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
    dir.add(
        "cloud-init",
        guests::CLOUD_INIT,
        &manifest(&bin, &state, grants),
    );
    let host = HostBuilder::new(dir.path())
        .owner_id(OWNER)
        .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
        .work_dir(tmp.path().join("work"))
        .secret_source(|name| (name == "CLUSTER_JOIN_TOKEN").then(|| TOKEN.to_string()))
        .build()
        .await
        .expect("host builds");
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let p = host.plugin("cloud-init").expect("plugin loaded");
    Rig {
        _dir: dir,
        _host: host,
        _tmp: tmp,
        bin,
        state,
        p,
    }
}

impl Rig {
    fn nodes_dir(&self) -> PathBuf {
        self.state.join("nodes")
    }

    /// Ids of the node files, sorted.
    fn node_files(&self) -> Vec<String> {
        let mut ids: Vec<String> = std::fs::read_dir(self.nodes_dir())
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
        std::fs::read_to_string(self.nodes_dir().join(file))
            .unwrap_or_else(|e| panic!("{file}: {e}"))
    }

    /// The commands run so far, one per line: `create REQ`, `list`, `destroy ID`.
    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(self.state.join("calls.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    fn count_calls(&self, prefix: &str) -> usize {
        self.calls()
            .iter()
            .filter(|c| c.starts_with(prefix))
            .count()
    }

    fn fault(&self, command: &str, fault: &str) {
        std::fs::write(self.state.join(format!("{command}.fault")), fault).unwrap();
    }

    /// Rewrites a field of a node file, as the backend would.
    fn set_field(&self, id: &str, field: &str, value: &str) {
        let path = self.nodes_dir().join(format!("{id}.json"));
        let mut node: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        node[field] = value.into();
        std::fs::write(path, node.to_string()).unwrap();
    }
}

fn request(id: &str, zone: Option<&str>) -> ProvisionRequest {
    let mut shape = NodeShape::new(2.0, 4 << 30);
    shape.labels.insert("role".into(), "worker".into());
    shape.zone = zone.map(str::to_string);
    ProvisionRequest {
        request_id: id.into(),
        shape,
        boot: Default::default(),
        subnet: None,
    }
}

#[tokio::test]
async fn lifecycle_through_the_host_with_real_scripts() {
    let r = rig(Grants::Exact).await;
    assert_eq!(r.p.name(), "cloud-init");
    assert_eq!(
        r.p.capacity_types(),
        &[CapacityType::OnDemand, CapacityType::Spot]
    );

    let node =
        r.p.provision_request(&request("req-1", Some("z1")))
            .await
            .unwrap();
    assert_eq!(node.provider_id, "node-0001");
    assert_eq!(node.address.as_deref(), Some("10.0.0.1"));
    assert_eq!(node.zone.as_deref(), Some("z1"));
    assert_eq!(node.join_state, JoinState::Provisioning);
    assert_eq!(node.instance_type.as_deref(), Some("small"));
    assert_eq!(node.capacity_type, CapacityType::OnDemand);
    assert_eq!(node.labels["wasmprov-owner"], OWNER);
    assert_eq!(node.labels["wasmprov-request"], "req-1");
    assert_eq!(node.labels["role"], "worker");

    // The cloud-config the create command read on stdin.
    let doc = r.read("node-0001.cloud-config");
    assert!(doc.starts_with("#cloud-config\n"), "{doc}");
    let labels = format!("role=worker,wasmprov-owner={OWNER},wasmprov-request=req-1");
    let runcmd = format!(
        r#"  - ["node-agent", "join", "--token", "{TOKEN}", "--labels", "{labels}", "--node", "req-1", "--zone=z1"]"#
    );
    assert!(doc.lines().any(|l| l == runcmd), "{doc}");
    assert!(doc.contains("runcmd:\n"), "{doc}");
    assert!(
        doc.contains("  - path: \"/etc/wasmprov/node.json\"\n"),
        "{doc}"
    );
    assert!(doc.contains(r#"\"instance_type\":\"small\""#), "{doc}");

    // The environment it ran with: the seven variables, nothing inherited.
    let env: BTreeMap<String, String> = r
        .read("node-0001.env")
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    for name in CREATE_ENV {
        assert!(env.contains_key(name), "{name} missing: {env:?}");
    }
    assert_eq!(env["WASMPROV_OWNER"], OWNER);
    assert_eq!(env["WASMPROV_REQUEST_ID"], "req-1");
    assert_eq!(env["WASMPROV_INSTANCE_TYPE"], "small");
    assert_eq!(env["WASMPROV_ZONE"], "z1");
    assert_eq!(env["WASMPROV_CAPACITY_TYPE"], "on-demand");
    // The node's labels carry the request digest too (the SDK's conflict
    // check); the join command's above do not.
    assert!(
        env["WASMPROV_LABELS"].starts_with(&format!("{labels},wasmprov-request-digest=")),
        "{}",
        env["WASMPROV_LABELS"]
    );
    let json: serde_json::Value = serde_json::from_str(&env["WASMPROV_LABELS_JSON"]).unwrap();
    assert_eq!(json["wasmprov-owner"], OWNER);
    let extra: Vec<&String> = env
        .keys()
        .filter(|k| !CREATE_ENV.contains(&k.as_str()) && *k != "PWD")
        .collect();
    assert!(extra.is_empty(), "inherited environment: {extra:?}");

    let nodes = r.p.describe().await.unwrap();
    assert_eq!(nodes.len(), 1);
    assert_eq!(nodes[0].provider_id, "node-0001");
    assert_eq!(nodes[0].instance_type.as_deref(), Some("small"));

    // Provisioning the same request again returns the same node.
    let again =
        r.p.provision_request(&request("req-1", Some("z1")))
            .await
            .unwrap();
    assert_eq!(again.provider_id, node.provider_id);
    assert_eq!(r.node_files(), ["node-0001"], "one request id, one node");
    assert_eq!(r.count_calls("create"), 1);

    // States come from what the list reports.
    for (state, want) in [
        ("booting", JoinState::Booting),
        ("joining", JoinState::Joining),
        ("running", JoinState::Joined),
        ("failed", JoinState::Failed),
        ("something-new", JoinState::Provisioning),
    ] {
        r.set_field("node-0001", "state", state);
        assert_eq!(r.p.describe().await.unwrap()[0].join_state, want, "{state}");
    }

    // A spot node, priced and created with the spot capacity type.
    let mut spot = request("req-spot", None);
    spot.shape.capacity_type = CapacityType::Spot;
    let hint = r.p.price_hint(&spot.shape).unwrap();
    assert_eq!(hint.instance_type, "small");
    assert!((hint.hourly_usd - 0.008).abs() < 1e-12);
    let spot_node = r.p.provision_request(&spot).await.unwrap();
    assert_eq!(spot_node.capacity_type, CapacityType::Spot);
    assert_eq!(spot_node.zone, None);
    assert_eq!(
        r.p.describe().await.unwrap().len(),
        2,
        "both nodes are this host's"
    );

    r.p.terminate(&node.provider_id).await.unwrap();
    assert!(matches!(
        r.p.terminate(&node.provider_id).await,
        Err(ProvisionerError::NotFound(_))
    ));
    r.p.terminate(&spot_node.provider_id).await.unwrap();
    assert!(r.p.describe().await.unwrap().is_empty());
    assert!(r.node_files().is_empty());
    assert!(
        !r.nodes_dir().join("node-0001.cloud-config").exists(),
        "destroy removed the node's files"
    );
    assert_eq!(
        r.count_calls("destroy"),
        2,
        "the second terminate of a node gone ran no destroy"
    );
}

#[tokio::test]
async fn command_errors_map_to_contract_variants() {
    let r = rig(Grants::Exact).await;
    let provision_err = |fault: &'static str| {
        let r = &r;
        async move {
            r.fault("create", fault);
            r.p.provision_request(&request(&format!("e-{fault}"), Some("z1")))
                .await
                .unwrap_err()
        }
    };

    let err = provision_err("capacity-json").await;
    assert!(
        matches!(&err, ProvisionerError::Capacity { scope: CapacityScope::Zone, message } if message.contains("zone z1 is full")),
        "{err:?}"
    );
    assert!(err.is_retryable());
    let err = provision_err("capacity-stderr").await;
    assert!(
        matches!(
            &err,
            ProvisionerError::Capacity {
                scope: CapacityScope::InstanceType,
                ..
            }
        ),
        "{err:?}"
    );
    let err = provision_err("quota-json").await;
    assert!(
        matches!(&err, ProvisionerError::Quota(m) if m.contains("20 of 20")),
        "{err:?}"
    );
    let err = provision_err("quota-stderr").await;
    assert!(
        matches!(&err, ProvisionerError::Quota(m) if m.contains("exited with code 2")),
        "{err:?}"
    );
    let err = provision_err("rate-json").await;
    assert!(
        matches!(
            &err,
            ProvisionerError::RateLimited {
                retry_after_ms: Some(1500),
                ..
            }
        ),
        "{err:?}"
    );
    let err = provision_err("rate-stderr").await;
    assert!(
        matches!(
            &err,
            ProvisionerError::RateLimited {
                retry_after_ms: None,
                ..
            }
        ),
        "{err:?}"
    );
    let err = provision_err("auth-json").await;
    assert!(
        matches!(&err, ProvisionerError::Auth(m) if m.contains("token expired")),
        "{err:?}"
    );
    let err = provision_err("other-stderr").await;
    assert!(
        matches!(&err, ProvisionerError::Other(m) if m.contains("disk on fire") && m.contains("code 3")),
        "{err:?}"
    );
    let err = provision_err("garbage").await;
    assert!(
        matches!(&err, ProvisionerError::Transport(m) if m.contains("Created your node. Have a nice day!")),
        "{err:?}"
    );
    assert!(
        r.node_files().is_empty(),
        "no failed create left a node behind"
    );

    r.fault("list", "garbage");
    let err = r.p.describe().await.unwrap_err();
    assert!(
        matches!(&err, ProvisionerError::Transport(m) if m.contains("502 Bad Gateway")),
        "{err:?}"
    );
    r.fault("list", "auth-json");
    let err = r.p.describe().await.unwrap_err();
    assert!(matches!(&err, ProvisionerError::Auth(_)), "{err:?}");

    // Terminate: a destroy that says not_found, then one that is throttled.
    let node = r.p.provision_request(&request("t-1", None)).await.unwrap();
    r.fault("destroy", "not-found-json");
    let err = r.p.terminate(&node.provider_id).await.unwrap_err();
    assert!(
        matches!(&err, ProvisionerError::NotFound(m) if m.contains("already gone")),
        "{err:?}"
    );
    r.fault("destroy", "rate-stderr");
    let err = r.p.terminate(&node.provider_id).await.unwrap_err();
    assert!(
        matches!(&err, ProvisionerError::RateLimited { .. }),
        "{err:?}"
    );
    r.p.terminate(&node.provider_id).await.unwrap();
    assert!(r.node_files().is_empty());

    // Shapes the catalogue cannot fit never reach a command.
    let creates = r.count_calls("create");
    let mut huge = request("huge", None);
    huge.shape.cpu = 64.0;
    let err = r.p.provision_request(&huge).await.unwrap_err();
    assert!(matches!(&err, ProvisionerError::Unsupported(_)), "{err:?}");
    assert_eq!(r.count_calls("create"), creates);
}

#[tokio::test]
async fn nodes_of_other_owners_are_never_described_or_terminated() {
    let r = rig(Grants::Exact).await;
    // Another host's node, and one with no labels at all, on the same backend.
    std::fs::write(
        r.nodes_dir().join("foreign-1.json"),
        r#"{"id": "foreign-1", "state": "running", "labels": {"wasmprov-owner": "someone-else", "wasmprov-request": "shared-req"}}"#,
    )
    .unwrap();
    std::fs::write(
        r.nodes_dir().join("bare-1.json"),
        r#"{"id": "bare-1", "state": "running"}"#,
    )
    .unwrap();
    assert!(r.p.describe().await.unwrap().is_empty());
    for id in ["foreign-1", "bare-1"] {
        let err = r.p.terminate(&id.to_string()).await.unwrap_err();
        assert!(matches!(err, ProvisionerError::NotFound(_)), "{err:?}");
    }
    assert_eq!(r.count_calls("destroy"), 0, "destroy never ran");
    assert_eq!(r.node_files(), ["bare-1", "foreign-1"]);

    // The other owner's request id is not ours: a new node is made.
    let node =
        r.p.provision_request(&request("shared-req", None))
            .await
            .unwrap();
    assert_eq!(node.provider_id, "node-0001");
    let ours = r.p.describe().await.unwrap();
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0].provider_id, "node-0001");
    r.p.terminate(&node.provider_id).await.unwrap();
    assert_eq!(r.node_files(), ["bare-1", "foreign-1"]);
}

#[tokio::test]
async fn ungranted_commands_are_invalid_config() {
    // The create grant names another path: listing works, creating is denied.
    let r = rig(Grants::CreateElsewhere).await;
    let err =
        r.p.provision_request(&request("d-1", None))
            .await
            .unwrap_err();
    assert!(
        matches!(&err, ProvisionerError::InvalidConfig(m) if m.contains("exec denied") && m.contains("create.sh")),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    assert_eq!(r.count_calls("create"), 0, "the script never ran");
    assert_eq!(r.count_calls("list"), 1);
    assert!(r.p.describe().await.unwrap().is_empty());

    // The create grant names no environment variables.
    let r = rig(Grants::CreateWithoutEnv).await;
    let err =
        r.p.provision_request(&request("d-2", None))
            .await
            .unwrap_err();
    assert!(
        matches!(&err, ProvisionerError::InvalidConfig(m) if m.contains("exec denied") && m.contains("WASMPROV_")),
        "{err:?}"
    );
    assert_eq!(r.count_calls("create"), 0);

    // The list grant is for other arguments.
    let r = rig(Grants::ListOtherArgs).await;
    let err = r.p.describe().await.unwrap_err();
    assert!(
        matches!(&err, ProvisionerError::InvalidConfig(m) if m.contains("exec denied") && m.contains("list.sh")),
        "{err:?}"
    );
    assert!(r.calls().is_empty());
    assert!(r.bin.join("list.sh").exists());
}

#[tokio::test]
async fn the_join_token_never_reaches_errors() {
    let r = rig(Grants::Exact).await;
    // A create command that fails, echoing its stdin (with the token) to stderr.
    std::fs::write(r.bin.join("create.sh"), "#!/bin/sh\n/bin/cat >&2\nexit 1\n").unwrap();
    let err =
        r.p.provision_request(&request("leak", None))
            .await
            .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("#cloud-config"), "{text}");
    assert!(text.contains("[redacted]"), "{text}");
    assert!(!text.contains(TOKEN), "{text}");
}
