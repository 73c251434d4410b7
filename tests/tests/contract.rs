//! Contract versions: plugins built against the frozen 0.1.0 and 0.2.0 WIT
//! (without the SDK) still load and work under the 0.3 host, beside 0.3
//! plugins, mapped as `wasmprov_host::contract` says; what 0.2 adds
//! (status, `get`, boot data, architecture) reaches callers from a 0.2
//! plugin; what 0.3 adds (set-labels, networking, a subnet) is refused for
//! older ones, never dropped; every component the test build makes fits its
//! contract's world as the standard tool checks it.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmprov_api::{
    Arch, BootData, CloudProvisioner, JoinState, NodeShape, NodeStatus, ProvisionRequest,
    ProvisionerError,
};
use wasmprov_host::{Host, HostBuilder};
use wasmprov_tests::{PluginDir, guests};

const OWNER: &str = "contract-owner";
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/cloud-init");

/// The fixture scripts in a temporary `bin/`, an empty `state/`, and a host
/// with one plugin granted them.
struct Rig {
    _dir: PluginDir,
    _host: Host,
    tmp: tempfile::TempDir,
    p: Arc<dyn CloudProvisioner>,
}

impl Rig {
    fn state(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    fn creates(&self) -> usize {
        std::fs::read_to_string(self.state().join("calls.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with("create"))
            .count()
    }

    /// Rewrites a field of a node file, as the backend would.
    fn set_field(&self, id: &str, field: &str, value: &str) {
        let path = self.state().join("nodes").join(format!("{id}.json"));
        let mut node: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        node[field] = value.into();
        std::fs::write(path, node.to_string()).unwrap();
    }
}

fn grants(bin: &Path, state: &Path, env: &str) -> String {
    let (bin, state) = (bin.display(), state.display());
    format!(
        r#"
[[exec]]
program = "{bin}/create.sh"
args = ["--state", "{state}", "*"]
env = [{env}]
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

async fn rig(name: &str, wasm: &str, manifest: impl Fn(&Path, &Path) -> String) -> Rig {
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
    dir.add(name, wasm, &manifest(&bin, &state));
    let host = HostBuilder::new(dir.path())
        .owner_id(OWNER)
        .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
        .work_dir(tmp.path().join("work"))
        .secret_source(|name| (name == "CLUSTER_JOIN_TOKEN").then(|| "tok".to_string()))
        .build()
        .await
        .expect("host builds");
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let p = host.plugin(name).expect("plugin loaded");
    Rig {
        _dir: dir,
        _host: host,
        tmp,
        p,
    }
}

fn unsupported(r: Result<impl std::fmt::Debug, ProvisionerError>, words: &[&str]) {
    match r {
        Err(ProvisionerError::Unsupported(m)) => {
            for w in words {
                assert!(m.contains(w), "{w:?} not in {m}");
            }
        }
        other => panic!("expected unsupported ({words:?}), got {other:?}"),
    }
}

mod v01 {
    use super::*;

    async fn legacy() -> Rig {
        rig("legacy", guests::CONTRACT_0_1, |bin, state| {
            format!(
                "[config]\nbin = \"{}\"\nstate = \"{}\"\n{}",
                bin.display(),
                state.display(),
                grants(
                    bin,
                    state,
                    r#""WASMPROV_ZONE", "WASMPROV_INSTANCE_TYPE", "WASMPROV_CAPACITY_TYPE", "WASMPROV_LABELS_JSON""#
                )
            )
        })
        .await
    }

    /// The whole life of a node through a 0.1 plugin: its exec and log
    /// imports are served, its answers mapped (status from the join state),
    /// `get` answered from describe.
    #[tokio::test]
    async fn a_plugin_built_for_0_1_loads_and_works() {
        let r = legacy().await;
        let plugin = r._host.wasm_plugin("legacy").expect("loaded");
        let info = plugin.info();
        assert_eq!(info.contract, "0.1.0");
        assert!(
            info.built_for.is_none(),
            "built without the SDK: {:?}",
            info.built_for
        );

        let hint =
            r.p.try_price_hint(&NodeShape::new(2.0, 4 << 30))
                .unwrap()
                .unwrap();
        assert_eq!(hint.instance_type, "legacy-2");

        let req = ProvisionRequest::new("legacy-1", NodeShape::new(2.0, 4 << 30));
        let node = r.p.provision_request(&req).await.unwrap();
        assert_eq!(node.join_state, JoinState::Provisioning);
        assert_eq!(
            node.status,
            NodeStatus::Pending,
            "derived from the join state"
        );
        assert_eq!(node.raw_state, None, "0.1 has no raw state");
        let again = r.p.provision_request(&req).await.unwrap();
        assert_eq!(again.provider_id, node.provider_id, "idempotent");
        assert_eq!(r.creates(), 1);

        let listed = r.p.describe().await.unwrap();
        assert_eq!(listed.len(), 1);
        let got =
            r.p.get(&node.provider_id)
                .await
                .unwrap()
                .expect("get finds it");
        assert_eq!(got.provider_id, node.provider_id);
        assert_eq!(r.p.get(&"node-9999".to_string()).await.unwrap(), None);

        r.set_field(&node.provider_id, "state", "running");
        let got = r.p.get(&node.provider_id).await.unwrap().unwrap();
        assert_eq!(
            (got.join_state, got.status),
            (JoinState::Joined, NodeStatus::Running)
        );

        r.p.terminate(&node.provider_id).await.unwrap();
        assert!(r.p.describe().await.unwrap().is_empty());
        assert!(matches!(
            r.p.terminate(&node.provider_id).await,
            Err(ProvisionerError::NotFound(_))
        ));
    }

    /// What 0.1 cannot carry is refused before the plugin runs, never
    /// dropped: boot data, architecture, GPU model, disk; and it has no
    /// catalogue.
    #[tokio::test]
    async fn what_0_1_cannot_carry_is_refused() {
        let r = legacy().await;
        let boot = ProvisionRequest {
            boot: BootData {
                user_data: Some(b"#cloud-config\nruncmd: [join]\n".to_vec()),
                ..BootData::default()
            },
            ..ProvisionRequest::new("legacy-boot", NodeShape::new(1.0, 1 << 30))
        };
        unsupported(
            r.p.provision_request(&boot).await,
            &["0.1.0", "boot data", "user_data"],
        );
        let arm = NodeShape {
            arch: Some(Arch::Arm64),
            ..NodeShape::new(1.0, 1 << 30)
        };
        unsupported(
            r.p.provision_request(&ProvisionRequest::new("legacy-arm", arm.clone()))
                .await,
            &["0.1.0", "arch"],
        );
        unsupported(r.p.try_price_hint(&arm), &["arch"]);
        assert_eq!(r.creates(), 0, "nothing reached the cloud");
        unsupported(r.p.offerings().await, &["0.1.0", "offerings"]);
        // The plugin still serves a plain request afterwards.
        let ok = ProvisionRequest::new("legacy-ok", NodeShape::new(1.0, 1 << 30));
        assert!(r.p.provision_request(&ok).await.is_ok());
    }
}

/// A plugin built for 0.2.0 on its raw bindings, beside a 0.3 plugin (the
/// probe) in one host.
mod v02_plugin {
    use super::*;
    use wasmprov_api::{AddressKind, AddressRequest, Interfaces, Labels, Target};

    fn instances(host: &Host, plugin: &str) -> String {
        let text = host.metrics().encode();
        text.lines()
            .find(|l| l.starts_with(&format!("wasmprov_instances_total{{plugin=\"{plugin}\"}}")))
            .unwrap_or_default()
            .to_string()
    }

    #[tokio::test]
    async fn a_plugin_built_for_0_2_loads_and_works_beside_0_3_ones() {
        let r = rig("older", guests::CONTRACT_0_2, |bin, state| {
            format!(
                "[config]\nbin = \"{}\"\nstate = \"{}\"\n{}",
                bin.display(),
                state.display(),
                grants(
                    bin,
                    state,
                    r#""WASMPROV_ZONE", "WASMPROV_INSTANCE_TYPE", "WASMPROV_CAPACITY_TYPE", "WASMPROV_LABELS_JSON""#
                )
            )
        })
        .await;
        // A 0.3 plugin in the same directory, loaded by the same host.
        r._dir.add("probe", guests::PROBE, "");
        let host = HostBuilder::new(r._dir.path())
            .owner_id(OWNER)
            .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
            .work_dir(r.tmp.path().join("work2"))
            .build()
            .await
            .expect("host builds");
        assert!(host.errors().is_empty(), "{:?}", host.errors());
        let older = host.wasm_plugin("older").expect("0.2 plugin loaded");
        let probe = host.wasm_plugin("probe").expect("0.3 plugin loaded");
        assert_eq!(older.info().contract, "0.2.0");
        assert_eq!(older.info().interfaces, Interfaces::default());
        assert_eq!(probe.info().contract, "0.3.0");
        assert_eq!(
            probe.info().interfaces,
            Interfaces {
                set_labels: true,
                networking: false
            }
        );
        let p = host.plugin("older").unwrap();
        assert_eq!(p.interfaces(), Interfaces::default());

        // Everything 0.2 has works: price, offerings, provision with user
        // data, describe, get, terminate.
        let hint = p
            .try_price_hint(&NodeShape::new(2.0, 4 << 30))
            .unwrap()
            .unwrap();
        assert_eq!(hint.instance_type, "older-2");
        let offerings = p.offerings().await.unwrap();
        assert_eq!(offerings.len(), 4);
        let req = ProvisionRequest {
            boot: BootData {
                user_data: Some(b"#cloud-config\nruncmd: [older]\n".to_vec()),
                ..BootData::default()
            },
            ..ProvisionRequest::new("older-1", NodeShape::new(2.0, 4 << 30))
        };
        let node = p.provision_request(&req).await.unwrap();
        assert_eq!(node.status, NodeStatus::Pending);
        assert_eq!(node.raw_state.as_deref(), Some("creating"));
        assert_eq!(
            (node.ipv6_address.clone(), node.hostname.clone()),
            (None, None)
        );
        assert_eq!(r.creates(), 1);
        assert_eq!(p.describe().await.unwrap().len(), 1);
        r.set_field(&node.provider_id, "state", "running");
        let got = p.get(&node.provider_id).await.unwrap().unwrap();
        assert_eq!(got.status, NodeStatus::Running);

        // What 0.3 adds is unsupported, answered by the host without an
        // instance of the plugin; a subnet is refused, never dropped.
        let before = instances(&host, "older");
        let mut labels = Labels::new();
        labels.insert("role".into(), "db".into());
        unsupported(
            p.set_labels(&node.provider_id, &labels).await,
            &["0.2.0", "set-labels"],
        );
        let id = node.provider_id.clone();
        let target = Target {
            group: "tg-1".into(),
            provider_id: id.clone(),
            port: Some(80),
            health: None,
        };
        let kind = AddressRequest {
            kind: AddressKind::Private,
            address: None,
        };
        unsupported(p.assign_address(&id, &kind).await, &["networking"]);
        unsupported(p.release_address(&id, "10.0.0.9").await, &["networking"]);
        unsupported(p.register_target(&target).await, &["networking"]);
        unsupported(p.deregister_target(&target).await, &["networking"]);
        unsupported(p.list_targets("tg-1").await, &["networking"]);
        unsupported(p.subnet_capacity("subnet-1").await, &["networking"]);
        assert_eq!(instances(&host, "older"), before, "no instance was made");
        let placed = ProvisionRequest {
            subnet: Some("subnet-1".into()),
            ..ProvisionRequest::new("older-2", NodeShape::new(1.0, 1 << 30))
        };
        unsupported(p.provision_request(&placed).await, &["0.2.0", "subnet"]);
        assert_eq!(r.creates(), 1, "the subnet was refused, not dropped");

        // The 0.3 plugin beside it takes the call (the probe cannot relabel
        // a node: its own answer, from an instance).
        let probe_p = host.plugin("probe").unwrap();
        let before = instances(&host, "probe");
        assert!(
            probe_p
                .set_labels(&"n-1".to_string(), &labels)
                .await
                .is_err()
        );
        assert_ne!(instances(&host, "probe"), before, "asked the plugin");

        p.terminate(&node.provider_id).await.unwrap();
        assert!(p.describe().await.unwrap().is_empty());
    }
}

mod v02 {
    use super::*;

    const CATALOGUE: &str = r#"[
  {"name": "arm-small", "cpu": 2, "memory_gib": 4, "arch": "arm64", "disk_gib": 40, "hourly_usd": 0.01},
  {"name": "x86-small", "cpu": 2, "memory_gib": 4, "arch": "x86_64", "disk_gib": 80, "hourly_usd": 0.02},
  {"name": "gpu-a10g", "cpu": 4, "memory_gib": 16, "gpu": 1, "gpu_vendor": "nvidia", "gpu_model": "nvidia-a10g", "arch": "x86_64", "hourly_usd": 1.0},
  {"name": "gpu-t4", "cpu": 4, "memory_gib": 16, "gpu": 1, "gpu_vendor": "nvidia", "gpu_model": "nvidia-t4", "arch": "x86_64", "hourly_usd": 0.5}
]"#;

    async fn cloud_init() -> Rig {
        rig("cloud-init", guests::CLOUD_INIT, |bin, state| {
            let env: Vec<String> = [
                "WASMPROV_OWNER",
                "WASMPROV_REQUEST_ID",
                "WASMPROV_INSTANCE_TYPE",
                "WASMPROV_ZONE",
                "WASMPROV_CAPACITY_TYPE",
                "WASMPROV_LABELS",
                "WASMPROV_LABELS_JSON",
            ]
            .iter()
            .map(|e| format!("\"{e}\""))
            .collect();
            format!(
                r#"[config]
create_command = "{b}/create.sh"
create_args = "--state {s}"
list_command = "{b}/list.sh"
list_args = "--state {s}"
destroy_command = "{b}/destroy.sh"
destroy_args = "--state {s}"
join_command = "node-agent join --token {{token}}"
instance_types = '''{CATALOGUE}'''

[secrets]
join_token = {{ env = "CLUSTER_JOIN_TOKEN" }}
{grants}"#,
                b = bin.display(),
                s = state.display(),
                grants = grants(bin, state, &env.join(", "))
            )
        })
        .await
    }

    /// A stopped node reports `stopped` (0.1 folded it into `failed`), and
    /// the cloud's own word is kept; `get` asks for the one node.
    #[tokio::test]
    async fn statuses_are_the_ten_and_the_raw_state_is_kept() {
        let r = cloud_init().await;
        let node =
            r.p.provision_request(&ProvisionRequest::new("st-1", NodeShape::new(2.0, 4 << 30)))
                .await
                .unwrap();
        assert_eq!(node.status, NodeStatus::Pending);
        assert_eq!(node.raw_state.as_deref(), Some("creating"));
        for (word, status, join) in [
            ("running", NodeStatus::Running, JoinState::Joined),
            ("stopped", NodeStatus::Stopped, JoinState::Failed),
            ("suspended", NodeStatus::Suspended, JoinState::Failed),
            ("deleted", NodeStatus::Deleted, JoinState::Failed),
            (
                "something-new",
                NodeStatus::Unknown,
                JoinState::Provisioning,
            ),
        ] {
            r.set_field(&node.provider_id, "state", word);
            let got = r.p.get(&node.provider_id).await.unwrap().expect("get");
            assert_eq!((got.status, got.join_state), (status, join), "{word}");
            assert_eq!(got.raw_state.as_deref(), Some(word));
        }
        r.set_field(&node.provider_id, "status", "repairing");
        let got = r.p.get(&node.provider_id).await.unwrap().unwrap();
        assert_eq!(got.status, NodeStatus::Repairing, "an explicit status wins");
        assert_eq!(r.p.get(&"node-0404".to_string()).await.unwrap(), None);
    }

    /// `arch = x86_64` never lands on ARM, though ARM is cheaper; the GPU
    /// model picks among GPU types; the catalogue is listed as offerings
    /// that agree with price hints.
    #[tokio::test]
    async fn architecture_and_gpu_model_are_honoured() {
        let r = cloud_init().await;
        let any = NodeShape::new(2.0, 4 << 30);
        assert_eq!(
            r.p.try_price_hint(&any).unwrap().unwrap().instance_type,
            "arm-small"
        );
        let x86 = NodeShape {
            arch: Some(Arch::X86_64),
            ..any.clone()
        };
        assert_eq!(
            r.p.try_price_hint(&x86).unwrap().unwrap().instance_type,
            "x86-small"
        );
        let node =
            r.p.provision_request(&ProvisionRequest::new("x86-1", x86))
                .await
                .unwrap();
        assert_eq!(node.instance_type.as_deref(), Some("x86-small"));
        let gpu = |model: &str| NodeShape {
            gpu: 1,
            gpu_vendor: Some("nvidia".into()),
            gpu_model: Some(model.into()),
            ..NodeShape::new(4.0, 16 << 30)
        };
        assert_eq!(
            r.p.try_price_hint(&gpu("NVIDIA-A10G"))
                .unwrap()
                .unwrap()
                .instance_type,
            "gpu-a10g"
        );
        unsupported(r.p.try_price_hint(&gpu("nvidia-a100")), &["nvidia-a100"]);
        let big_disk = NodeShape {
            disk_bytes: Some(60 << 30),
            ..NodeShape::new(2.0, 4 << 30)
        };
        assert_eq!(
            r.p.try_price_hint(&big_disk)
                .unwrap()
                .unwrap()
                .instance_type,
            "x86-small"
        );
        let offerings = r.p.offerings().await.unwrap();
        assert_eq!(offerings.len(), 4);
        let a10 = offerings
            .iter()
            .find(|o| o.instance_type == "gpu-a10g")
            .unwrap();
        assert_eq!(a10.gpu_model.as_deref(), Some("nvidia-a10g"));
        assert_eq!(a10.arch, Some(Arch::X86_64));
        assert_eq!(a10.on_demand_usd, Some(1.0));
    }

    /// Per-node user data reaches the node: each node's `#cloud-config`
    /// (what the create command got) is the caller's document merged with
    /// the join command, with the request's SSH keys.
    #[tokio::test]
    async fn per_node_user_data_is_merged_into_each_nodes_cloud_config() {
        let r = cloud_init().await;
        let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGw8 ops@example";
        let mut ids = Vec::new();
        for token in ["tok-node-1", "tok-node-2"] {
            let req = ProvisionRequest {
                boot: BootData {
                    user_data: Some(
                        format!("#cloud-config\nruncmd:\n  - [\"/opt/agent\", \"--token\", \"{token}\"]\n")
                            .into_bytes(),
                    ),
                    ssh_keys: vec![key.into()],
                    ..BootData::default()
                },
                ..ProvisionRequest::new(format!("ud-{token}"), NodeShape::new(2.0, 4 << 30))
            };
            ids.push((
                token,
                r.p.provision_request(&req).await.unwrap().provider_id,
            ));
        }
        for (token, id) in &ids {
            let doc =
                std::fs::read_to_string(r.state().join("nodes").join(format!("{id}.cloud-config")))
                    .unwrap();
            assert!(doc.starts_with("#cloud-config\n"), "{doc}");
            assert!(doc.contains(token), "{id} got its own token: {doc}");
            let other = ids.iter().find(|(t, _)| t != token).unwrap().0;
            assert!(!doc.contains(other), "{id} got another node's token: {doc}");
            let agent = doc.find("/opt/agent").expect("the caller's command");
            let join = doc.find("node-agent").expect("the join command");
            assert!(agent < join, "the caller's runcmd runs first: {doc}");
            assert!(doc.contains("ssh_authorized_keys"), "{doc}");
            assert!(doc.contains(key), "{doc}");
        }
        // A shell script cannot be merged into one #cloud-config: refused.
        let script = ProvisionRequest {
            boot: BootData {
                user_data: Some(b"#!/bin/sh\necho hi\n".to_vec()),
                ..BootData::default()
            },
            ..ProvisionRequest::new("ud-script", NodeShape::new(2.0, 4 << 30))
        };
        unsupported(r.p.provision_request(&script).await, &["#cloud-config"]);
        assert_eq!(r.creates(), 2);
    }

    /// A request id reused for another shape or other boot data is a
    /// `conflict` without any journal: the SDK records a digest of the
    /// request on the node and compares it when the id finds its node. The
    /// same request again is still the same node, and the plugin serves
    /// other calls after.
    #[tokio::test]
    async fn a_reused_request_id_is_a_conflict_without_the_journal() {
        let r = cloud_init().await;
        let first = ProvisionRequest::new("reuse-1", NodeShape::new(2.0, 4 << 30));
        let node = r.p.provision_request(&first).await.unwrap();
        assert_eq!(node.labels["wasmprov-request-digest"].len(), 16);
        let again = r.p.provision_request(&first).await.unwrap();
        assert_eq!(again.provider_id, node.provider_id);
        let bigger = ProvisionRequest::new("reuse-1", NodeShape::new(1.0, 2 << 30));
        let booted = ProvisionRequest {
            boot: BootData {
                user_data: Some(b"#cloud-config\n".to_vec()),
                ..BootData::default()
            },
            ..first.clone()
        };
        for other in [bigger, booted] {
            // Both fit the catalogue; only the digest differs.
            match r.p.provision_request(&other).await {
                Err(ProvisionerError::Conflict(m)) => {
                    assert!(
                        m.contains("reuse-1") && m.contains(&node.provider_id),
                        "{m}"
                    );
                }
                other => panic!("expected a conflict, got {other:?}"),
            }
        }
        assert_eq!(r.creates(), 1, "nothing more was created");
        let next = ProvisionRequest::new("reuse-2", NodeShape::new(2.0, 4 << 30));
        assert!(r.p.provision_request(&next).await.is_ok());
    }

    /// Boot data the plugin does not honour is refused by the SDK before
    /// any command runs.
    #[tokio::test]
    async fn boot_data_a_plugin_cannot_honour_is_refused() {
        let r = cloud_init().await;
        let req = ProvisionRequest {
            boot: BootData {
                image: Some("ubuntu-24.04".into()),
                ..BootData::default()
            },
            ..ProvisionRequest::new("boot-1", NodeShape::new(2.0, 4 << 30))
        };
        unsupported(r.p.provision_request(&req).await, &["boot data", "image"]);
        assert_eq!(r.creates(), 0);
    }
}

mod hetzner {
    use super::*;
    use wasmprov_fake::HetznerFake;

    async fn setup() -> (HetznerFake, PluginDir, Host, Arc<dyn CloudProvisioner>) {
        wasmprov_tests::hetzner_host(OWNER).await
    }

    const KEY_A: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGw8 alice@example";
    const KEY_B: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHx9 bob@example";

    /// Image, per-node user data and SSH keys reach the cloud; a key is
    /// registered once and shared, whatever its comment; an architecture
    /// picks the server type.
    #[tokio::test]
    async fn boot_data_reaches_the_cloud() {
        let (fake, _dir, _host, p) = setup().await;
        let booted = |id: &str, token: &str, keys: &[&str]| ProvisionRequest {
            boot: BootData {
                image: Some("debian-12".into()),
                user_data: Some(format!("#cloud-config\nruncmd: [[join, {token}]]\n").into_bytes()),
                ssh_keys: keys.iter().map(|k| (*k).to_string()).collect(),
            },
            ..ProvisionRequest::new(
                id,
                NodeShape {
                    arch: Some(Arch::Arm64),
                    ..NodeShape::new(2.0, 4 << 30)
                },
            )
        };
        let a = p
            .provision_request(&booted("hz-a", "tok-a", &[KEY_A]))
            .await
            .unwrap();
        let b = p
            .provision_request(&booted(
                "hz-b",
                "tok-b",
                &[&KEY_A.replace("alice@example", "alice@laptop"), KEY_B],
            ))
            .await
            .unwrap();
        assert_eq!(a.instance_type.as_deref(), Some("cax11"));
        assert_eq!(a.arch, Some(Arch::Arm64));
        let servers = fake.servers();
        let server = |id: &str| servers.iter().find(|s| s.id.to_string() == id).unwrap();
        assert!(
            server(&a.provider_id)
                .user_data
                .as_deref()
                .unwrap()
                .contains("tok-a")
        );
        assert!(
            server(&b.provider_id)
                .user_data
                .as_deref()
                .unwrap()
                .contains("tok-b")
        );
        assert_eq!(server(&a.provider_id).ssh_keys, [KEY_A]);
        assert_eq!(
            server(&b.provider_id).ssh_keys,
            [KEY_A, KEY_B],
            "the same key (another comment) is the one registered already"
        );
        let got = p.get(&a.provider_id).await.unwrap().unwrap();
        assert_eq!(got.status, NodeStatus::Pending);
        assert_eq!(got.raw_state.as_deref(), Some("initializing"));
        assert!(got.created_at_ms.is_some());
        assert!(got.public_address.is_some());
        // Non-UTF-8 user data cannot be sent as Hetzner's text field.
        let binary = ProvisionRequest {
            boot: BootData {
                user_data: Some(vec![0xff, 0xfe, 0x00]),
                ..BootData::default()
            },
            ..ProvisionRequest::new("hz-bin", NodeShape::new(2.0, 4 << 30))
        };
        unsupported(p.provision_request(&binary).await, &["UTF-8"]);
        assert_eq!(fake.servers().len(), 2);
        // The same id with other user data: a conflict, nothing created.
        assert!(matches!(
            p.provision_request(&booted("hz-a", "tok-z", &[KEY_A]))
                .await,
            Err(ProvisionerError::Conflict(_))
        ));
        assert_eq!(fake.servers().len(), 2);
    }
}

/// The check of `wasm-tools component targets wit/ X.wasm --world W`, made
/// with the function that command calls (by the build script, which has it
/// from wasmtime's bindgen): every component the test build makes (the
/// bundled plugins, the test and hostile guests; the 0.1 guest against the
/// frozen 0.1 world) imports only what its world declares, WASI included,
/// and exports the provisioner. And where the `wasmprov-*` custom sections
/// are, as docs/AUTHORING.md says.
mod wit_targets {
    use super::*;

    #[test]
    fn every_built_component_fits_its_world() {
        let v03 = wasmprov_guest_build::WORLD;
        let v01 = "wasmprov:provisioner/provider@0.1.0";
        let mut fitting = Vec::new();
        for (package, world, fits) in guests::TARGETS {
            match (*package, *world) {
                // Built for a contract this host does not speak (it is
                // refused by name): the check is not vacuous.
                ("wasmprov-test-future-contract", _) => {
                    assert!(fits.is_some(), "{package} fits {world}");
                }
                // The current contract's names, one of the wrong type.
                ("wasmprov-test-mistyped-contract", _) => {
                    assert!(fits.is_some(), "{package} fits {world}");
                }
                // A 0.3 plugin is not a 0.1 one.
                ("wasmprov-plugin-hetzner", w) if w == v01 => {
                    assert!(fits.is_some(), "{package} fits {world}");
                }
                _ => {
                    if let Some(why) = fits {
                        panic!("{package} does not fit {world}: {why}");
                    }
                    fitting.push((*package, *world));
                }
            }
        }
        for bundled in [
            "wasmprov-plugin-hetzner",
            "wasmprov-plugin-aws-ec2",
            "wasmprov-plugin-cloud-init",
            "wasmprov-plugin-digitalocean",
            "wasmprov-test-probe",
            "wasmprov-hostile-raw-socket",
        ] {
            assert!(fitting.contains(&(bundled, v03)), "{bundled} not checked");
        }
        assert!(fitting.contains(&("wasmprov-test-contract-0-1", v01)));
        assert!(fitting.contains(&(
            "wasmprov-test-contract-0-2",
            "wasmprov:provisioner/provider@0.2.0"
        )));
    }

    /// Custom sections by name, with their depth: 0 at the component's top
    /// level, 1 inside a module or component nested in it.
    fn custom_sections(bytes: &[u8]) -> Vec<(usize, String)> {
        let mut depth = 0usize;
        let mut found = Vec::new();
        for payload in wasmparser::Parser::new(0).parse_all(bytes) {
            match payload.unwrap() {
                wasmparser::Payload::ModuleSection { .. }
                | wasmparser::Payload::ComponentSection { .. } => depth += 1,
                wasmparser::Payload::End(_) => depth = depth.saturating_sub(1),
                wasmparser::Payload::CustomSection(r) => {
                    found.push((depth, r.name().to_string()));
                }
                _ => {}
            }
        }
        found
    }

    /// `export_provider!` writes its sections with `#[link_section]`, so
    /// they land in the component's core module (a component's linker
    /// keeps them there); `wasmprov declare` appends its section at the
    /// top level. The host reads either.
    #[test]
    fn custom_sections_are_where_the_docs_say() {
        for path in [guests::HETZNER, guests::CLOUD_INIT] {
            let sections = custom_sections(&std::fs::read(path).unwrap());
            for name in ["wasmprov-contract", "wasmprov-capabilities"] {
                assert!(
                    sections.contains(&(1, name.to_string())),
                    "{path}: {name} not in the core module: {sections:?}"
                );
            }
        }
        let hetzner = std::fs::read(guests::HETZNER).unwrap();
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../plugins/hetzner/capabilities.toml"
        ))
        .unwrap();
        let declared = wasmprov_host::policy::requests::embed(&hetzner, &text).unwrap();
        assert!(
            custom_sections(&declared).contains(&(0, "wasmprov-capabilities".to_string())),
            "declare writes at the top level"
        );
    }
}
