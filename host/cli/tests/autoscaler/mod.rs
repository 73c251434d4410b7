//! cluster-autoscaler against `wasmprov serve --autoscaler-listen`, a real
//! process: the autoscaler's loop played call by call over the Hetzner fake
//! and EC2 on moto (a GPU group grown from zero on the template alone,
//! named deletes, a SIGKILL mid-increase and a restart on the same state
//! without duplicates, other owners' nodes never claimed), and the
//! listener's mutual TLS.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use prost::Message as _;
use tonic::Code;
use tonic::transport::Channel;
use wasmprov_autoscaler::k8s::{self, core_v1};
use wasmprov_autoscaler::proto::cloud_provider_client::CloudProviderClient;
use wasmprov_autoscaler::proto::{self, instance_status::InstanceState};
use wasmprov_fake::{HetznerFake, HetznerFakeOptions};

use super::{
    OWNER, STEP_LIMIT, Served, TOKEN, authed, bounded, client, pb, send_signal, serve, start_fake,
    wasmprov,
};

type Client = CloudProviderClient<Channel>;

/// The whole end-to-end test is over well within this.
const TEST_LIMIT: Duration = Duration::from_secs(150);

/// Plugins compiled once for these tests (a restart, the second test).
fn cache() -> std::path::PathBuf {
    std::env::temp_dir().join("wasmprov-serve-autoscaler-cache")
}

/// The bundled plugins `names` in `d`, Hetzner's pointed at `hetzner`.
async fn bundle(d: &Path, names: &[&str], hetzner: &str) {
    let out = bounded(
        "wasmprov bundle",
        STEP_LIMIT,
        wasmprov(d)
            .args(["bundle", "--out"])
            .arg(d)
            .arg("--only")
            .args(names)
            .args(["--hetzner-endpoint", hetzner])
            .output(),
    )
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for other in ["aws-ec2", "cloud-init", "digitalocean"] {
        if !names.contains(&other) {
            let _ = std::fs::remove_file(d.join(format!("{other}.toml")));
        }
    }
}

/// `wasmprov serve` in `d` with the autoscaler's listener and `args`.
async fn daemon(d: &Path, fake: &HetznerFake, args: &[&str]) -> Served {
    let mut cmd = wasmprov(d);
    cmd.env("XDG_CACHE_HOME", cache())
        .env("HCLOUD_TOKEN", fake.token())
        .env("WASMPROV_SERVE_TOKEN", TOKEN)
        .env("AWS_ACCESS_KEY_ID", "AKIAFAKEAUTOSCALER")
        .env("AWS_SECRET_ACCESS_KEY", "moto-checks-no-signature")
        .env_remove("AWS_SESSION_TOKEN");
    let mut all = vec!["--no-metrics", "--reconcile-every", "0"];
    all.extend_from_slice(args);
    let served = serve(cmd, &all, d).await;
    assert!(
        served.autoscaler.is_some(),
        "no autoscaler= on the first line"
    );
    // The daemon listens at once; a plugin may still be compiling.
    let want: BTreeSet<String> = std::fs::read_dir(d)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".toml").map(str::to_string)
        })
        .collect();
    let mut c = client(served.grpc).await;
    bounded("the plugins loaded", STEP_LIMIT, async {
        loop {
            let listed: BTreeSet<String> = c
                .list_plugins(authed(TOKEN, pb::ListPluginsRequest {}))
                .await
                .unwrap()
                .into_inner()
                .plugins
                .into_iter()
                .map(|p| p.name)
                .collect();
            if listed == want {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    served
}

async fn connect(addr: SocketAddr) -> Client {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect_timeout(STEP_LIMIT)
        .timeout(STEP_LIMIT)
        .connect()
        .await
        .expect("connect to the autoscaler listener");
    CloudProviderClient::new(channel)
}

// ---------------------------------------------------------------- moto

/// EC2 as moto serves it, on a free loopback port, signatures unchecked;
/// killed on drop.
struct Moto {
    child: std::process::Child,
    url: String,
    log: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            eprintln!(
                "moto log (last lines):\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
    }
}

fn moto_installed() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import moto, moto.server"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn form(params: &[(&str, &str)]) -> String {
    let enc = |s: &str| -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    char::from(b).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    params
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The text of every `<tag>…</tag>` in `xml`.
fn texts(xml: &str, tag: &str) -> Vec<String> {
    let open = format!("<{tag}>");
    let close = format!("</{tag}>");
    xml.split(&open)
        .skip(1)
        .filter_map(|rest| rest.split_once(&close).map(|(t, _)| t.trim().to_string()))
        .collect()
}

impl Moto {
    async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("moto.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = std::process::Command::new("python3")
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p"])
            .arg(port.to_string())
            .env_remove("INITIAL_NO_AUTH_ACTION_COUNT")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start python3 -m moto.server");
        let moto = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            log,
            _dir: dir,
        };
        bounded("moto answering", Duration::from_secs(30), async {
            while moto
                .try_query(&[("Action", "DescribeRegions")])
                .await
                .is_err()
            {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        moto
    }

    async fn try_query(&self, params: &[(&str, &str)]) -> Result<String, String> {
        let mut all = params.to_vec();
        all.push(("Version", "2016-11-15"));
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let body = form(&all);
        let addr = self.url.trim_start_matches("http://");
        let mut stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| e.to_string())?;
        // HTTP/1.0: one request, the answer unchunked, then closed. Moto
        // picks the service from the credential scope.
        let request = format!(
            "POST / HTTP/1.0\r\nHost: {addr}\r\n\
             Authorization: AWS4-HMAC-SHA256 Credential=AKIAFAKEAUTOSCALER/20260101/us-east-1/ec2/aws4_request, SignedHeaders=host, Signature=00\r\n\
             Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| e.to_string())?;
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .await
            .map_err(|e| e.to_string())?;
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        if head.split(' ').nth(1) == Some("200") {
            Ok(body.to_string())
        } else {
            Err(format!("{head}\n{body}"))
        }
    }

    async fn query(&self, params: &[(&str, &str)]) -> String {
        bounded("a moto call", STEP_LIMIT, self.try_query(params))
            .await
            .unwrap_or_else(|e| panic!("{params:?}: {e}"))
    }

    /// An AMI moto knows.
    async fn image(&self) -> String {
        let xml = self
            .query(&[("Action", "DescribeImages"), ("Owner.1", "amazon")])
            .await;
        texts(&xml, "imageId")
            .into_iter()
            .next()
            .expect("moto lists an AMI")
    }

    /// The live (pending or running) instances tagged with `owner` and
    /// `group`, by id: what EC2 itself holds.
    async fn instances(&self, owner: &str, group: &str) -> BTreeSet<String> {
        let xml = self
            .query(&[
                ("Action", "DescribeInstances"),
                ("Filter.1.Name", "tag:wasmprov-owner"),
                ("Filter.1.Value.1", owner),
                ("Filter.2.Name", "tag:wasmprov-group"),
                ("Filter.2.Value.1", group),
                ("Filter.3.Name", "instance-state-name"),
                ("Filter.3.Value.1", "pending"),
                ("Filter.3.Value.2", "running"),
            ])
            .await;
        texts(&xml, "instanceId").into_iter().collect()
    }

    /// An instance of another owner, tagged as a member of `group`.
    async fn plant(&self, image: &str, owner: &str, group: &str) -> String {
        let xml = self
            .query(&[
                ("Action", "RunInstances"),
                ("ImageId", image),
                ("InstanceType", "g4dn.xlarge"),
                ("MinCount", "1"),
                ("MaxCount", "1"),
                ("TagSpecification.1.ResourceType", "instance"),
                ("TagSpecification.1.Tag.1.Key", "wasmprov-owner"),
                ("TagSpecification.1.Tag.1.Value", owner),
                ("TagSpecification.1.Tag.2.Key", "wasmprov-group"),
                ("TagSpecification.1.Tag.2.Value", group),
            ])
            .await;
        texts(&xml, "instanceId")
            .into_iter()
            .next()
            .expect("RunInstances answers an instance id")
    }
}

/// The bundled EC2 manifest pointed at moto, with two instance types.
fn point_ec2_at(d: &Path, moto: &Moto, image: &str) {
    let path = d.join("aws-ec2.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let (head, rest) = text.split_once("[config]").expect("a [config] table");
    let (_, limits) = rest.split_once("[limits]").expect("a [limits] table");
    let url = &moto.url;
    let text = format!(
        "{head}[config]\nregion = \"us-east-1\"\nendpoint = \"{url}\"\nelb_endpoint = \"{url}\"\nssm_endpoint = \"{url}\"\nimage_id = \"{image}\"\ninstance_types = \"g4dn.xlarge,t3.medium\"\n\n\
         [secrets]\naccess_key_id = {{ env = \"AWS_ACCESS_KEY_ID\" }}\nsecret_access_key = {{ env = \"AWS_SECRET_ACCESS_KEY\" }}\n\n\
         [http]\nallow = [\"{url}\"]\n\n[limits]{limits}"
    );
    std::fs::write(path, text).unwrap();
}

// ------------------------------------------------------- the autoscaler

/// A pod waiting for a node: what it asks for, where it may go.
struct Pod {
    cpu_millis: u64,
    memory_bytes: u64,
    gpus: u64,
    selector: &'static [(&'static str, &'static str)],
    /// Keys of the taints it tolerates.
    tolerates: &'static [&'static str],
}

fn allocatable(node: &core_v1::Node, name: &str, milli: bool) -> u64 {
    let text = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.get(name))
        .and_then(|q| q.string.clone())
        .unwrap_or_else(|| "0".into());
    let q = k8s::parse_quantity(&text).unwrap_or_else(|e| panic!("{name}={text}: {e}"));
    if milli { q.milli_value() } else { q.value() }.unwrap()
}

/// How many of `pod` the template `node` holds, as the autoscaler's
/// scheduler simulation decides it: allocatable resources, the node
/// selector (the GPU label included) and the taints. 0: it does not fit.
fn pods_per_node(node: &core_v1::Node, gpu_label: &str, pod: &Pod) -> u64 {
    let labels = &node.metadata.as_ref().expect("metadata").labels;
    if pod.gpus > 0 && !labels.contains_key(gpu_label) {
        return 0;
    }
    if pod
        .selector
        .iter()
        .any(|(k, v)| labels.get(*k).map(String::as_str) != Some(*v))
    {
        return 0;
    }
    let taints = node
        .spec
        .as_ref()
        .map(|s| s.taints.clone())
        .unwrap_or_default();
    if taints.iter().any(|t| {
        matches!(t.effect.as_deref(), Some("NoSchedule" | "NoExecute"))
            && !pod.tolerates.contains(&t.key.as_deref().unwrap_or(""))
    }) {
        return 0;
    }
    let mut n = allocatable(node, "pods", false);
    n = n.min(allocatable(node, "cpu", true) / pod.cpu_millis);
    n = n.min(allocatable(node, "memory", false) / pod.memory_bytes);
    if let Some(k) = allocatable(node, "nvidia.com/gpu", false).checked_div(pod.gpus) {
        n = n.min(k);
    }
    n
}

/// What one pass of the autoscaler's loop read.
#[derive(Debug, Default)]
struct View {
    groups: Vec<String>,
    targets: BTreeMap<String, i32>,
    instances: BTreeMap<String, Vec<proto::Instance>>,
    /// Node (provider id) → its group as NodeGroupForNode answers ("").
    owners: BTreeMap<String, String>,
    templates: BTreeMap<String, core_v1::Node>,
}

impl View {
    fn running(&self, group: &str) -> BTreeSet<String> {
        self.instances[group]
            .iter()
            .filter(|i| state(i) == InstanceState::InstanceRunning)
            .map(|i| i.id.clone())
            .collect()
    }
}

fn state(i: &proto::Instance) -> InstanceState {
    i.status
        .as_ref()
        .map_or(InstanceState::Unspecified, |s| s.instance_state())
}

/// One pass of `StaticAutoscaler.RunOnce` through the externalgrpc
/// provider: Refresh; NodeGroups; per group NodeGroupNodes and
/// NodeGroupTargetSize; NodeGroupForNode for every registered node (the
/// members that run, and `foreign`, nodes of the cluster wasmprov did not
/// make); NodeGroupTemplateNodeInfo for the groups with no node.
async fn run_once(c: &mut Client, foreign: &[String]) -> View {
    let mut view = View::default();
    c.refresh(proto::RefreshRequest {})
        .await
        .unwrap_or_else(|e| panic!("Refresh: {e:?}"));
    view.groups = c
        .node_groups(proto::NodeGroupsRequest {})
        .await
        .unwrap_or_else(|e| panic!("NodeGroups: {e:?}"))
        .into_inner()
        .node_groups
        .into_iter()
        .map(|g| g.id)
        .collect();
    for g in &view.groups {
        let instances = c
            .node_group_nodes(proto::NodeGroupNodesRequest { id: g.clone() })
            .await
            .unwrap_or_else(|e| panic!("NodeGroupNodes: {e:?}"))
            .into_inner()
            .instances;
        let target = c
            .node_group_target_size(proto::NodeGroupTargetSizeRequest { id: g.clone() })
            .await
            .unwrap_or_else(|e| panic!("NodeGroupTargetSize: {e:?}"))
            .into_inner()
            .target_size;
        view.instances.insert(g.clone(), instances);
        view.targets.insert(g.clone(), target);
    }
    let registered: Vec<String> = view
        .instances
        .values()
        .flatten()
        .filter(|i| state(i) == InstanceState::InstanceRunning)
        .map(|i| i.id.clone())
        .chain(foreign.iter().cloned())
        .collect();
    for node in registered {
        let group = c
            .node_group_for_node(proto::NodeGroupForNodeRequest {
                node: Some(proto::ExternalGrpcNode {
                    provider_id: node.clone(),
                    name: format!("node-{}", view.owners.len()),
                    ..Default::default()
                }),
            })
            .await
            .unwrap_or_else(|e| panic!("NodeGroupForNode: {e:?}"))
            .into_inner()
            .node_group
            .unwrap_or_default()
            .id;
        view.owners.insert(node, group);
    }
    for g in &view.groups {
        if view.instances[g].is_empty() {
            let answer = c
                .node_group_template_node_info(proto::NodeGroupTemplateNodeInfoRequest {
                    id: g.clone(),
                })
                .await
                .unwrap_or_else(|e| panic!("NodeGroupTemplateNodeInfo: {e:?}"))
                .into_inner();
            let node = core_v1::Node::decode(answer.node_bytes.as_slice())
                .expect("the template is a v1.Node");
            view.templates.insert(g.clone(), node);
        }
    }
    // Other owners' nodes are never anybody's, nor listed.
    for f in foreign {
        assert_eq!(view.owners[f], "", "{f} was claimed");
        for list in view.instances.values() {
            assert!(list.iter().all(|i| &i.id != f), "{f} listed: {list:?}");
        }
    }
    view
}

async fn increase(c: &mut Client, group: &str, delta: i32) -> Result<(), tonic::Status> {
    c.node_group_increase_size(proto::NodeGroupIncreaseSizeRequest {
        id: group.into(),
        delta,
    })
    .await
    .map(|_| ())
}

async fn delete(c: &mut Client, group: &str, ids: &[String]) -> Result<(), tonic::Status> {
    c.node_group_delete_nodes(proto::NodeGroupDeleteNodesRequest {
        id: group.into(),
        nodes: ids
            .iter()
            .map(|id| proto::ExternalGrpcNode {
                provider_id: id.clone(),
                name: format!("node-of-{id}"),
                ..Default::default()
            })
            .collect(),
    })
    .await
    .map(|_| ())
}

/// The fake's live servers of this owner in `group`, by id, and the
/// request ids they were made for.
fn hetzner_members(fake: &HetznerFake, group: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let servers: Vec<_> = fake
        .servers()
        .into_iter()
        .filter(|s| {
            s.labels.get("wasmprov-owner").map(String::as_str) == Some(OWNER)
                && s.labels.get("wasmprov-group").map(String::as_str) == Some(group)
        })
        .collect();
    let ids = servers
        .iter()
        .map(|s| format!("wasmprov://hetzner/{}", s.id))
        .collect();
    let requests = servers
        .iter()
        .filter_map(|s| s.labels.get("wasmprov-request").cloned())
        .collect();
    (ids, requests)
}

const GROUPS_WEB: &str = r##"
[[group]]
id = "web"
min = 0
max = 4
cpu = 2
memory_gib = 4
plugins = ["hetzner"]
labels = { pool = "web" }
[group.boot]
user_data = "#cloud-config\nruncmd: [[kubeadm, join, --token, '{{node_token}}']]\n"
"##;

const GROUPS_GPU: &str = r#"
[[group]]
id = "gpu"
min = 0
max = 2
cpu = 4
memory_gib = 16
gpu = 1
gpu_vendor = "nvidia"
disk_gib = 100
plugins = ["aws-ec2"]
labels = { pool = "gpu" }
taints = [{ key = "nvidia.com/gpu", value = "present", effect = "NoSchedule" }]
[group.kubelet]
max_pods = 58
"#;

/// cluster-autoscaler's loop against `wasmprov serve --autoscaler-listen`
/// over the Hetzner fake and (when installed) EC2 on moto: a GPU group
/// grown from zero because its template alone says a pending GPU pod fits;
/// `serve` SIGKILLed mid-increase and restarted on the same state dir
/// reaches the target with no duplicate on the clouds themselves; named
/// deletes terminate exactly those nodes; other owners' nodes planted in
/// the same clouds never appear in a group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_autoscalers_loop_against_serve_survives_sigkill() {
    let started = Instant::now();
    bounded("the autoscaler's loop", TEST_LIMIT, autoscalers_loop()).await;
    eprintln!(
        "the autoscaler's loop: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

async fn autoscalers_loop() {
    // Each answer waits: a create takes a while, so `serve` can be killed
    // between a member's create and its answer.
    let fake = start_fake(HetznerFakeOptions {
        response_delay: Duration::from_millis(400),
        ..HetznerFakeOptions::default()
    })
    .await;
    let moto = if moto_installed() {
        Some(Moto::start().await)
    } else {
        eprintln!(
            "moto is not installed (pip install 'moto[server]'): the EC2 half (the GPU group) is not run"
        );
        None
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut groups = GROUPS_WEB.to_string();
    let mut foreign = vec![format!(
        "wasmprov://hetzner/{}",
        fake.plant(
            "someone-elses-web",
            &BTreeMap::from([
                ("wasmprov-owner".to_string(), "someone-else".to_string()),
                ("wasmprov-group".to_string(), "web".to_string()),
            ]),
        )
        .unwrap()
    )];
    if let Some(moto) = &moto {
        bundle(d, &["hetzner", "aws-ec2"], &fake.url()).await;
        let image = moto.image().await;
        point_ec2_at(d, moto, &image);
        groups.push_str(GROUPS_GPU);
        let planted = moto.plant(&image, "someone-else", "gpu").await;
        foreign.push(format!("wasmprov://aws-ec2/{planted}"));
    } else {
        bundle(d, &["hetzner"], &fake.url()).await;
    }
    // Beside the plugin directory, not in it (every .toml there is a
    // plugin's manifest).
    std::fs::create_dir_all(d.join("conf")).unwrap();
    std::fs::write(d.join("conf/node-groups.toml"), groups).unwrap();
    let args = [
        "--state-dir",
        "state",
        "--autoscaler-listen",
        "127.0.0.1:0",
        "--node-groups",
        "conf/node-groups.toml",
    ];
    let mut served = daemon(d, &fake, &args).await;
    let mut c = connect(served.autoscaler.unwrap()).await;
    let gpu_label = c
        .gpu_label(proto::GpuLabelRequest {})
        .await
        .unwrap()
        .into_inner()
        .label;

    // Nothing runs: every group is pictured by its template alone.
    let view = run_once(&mut c, &foreign).await;
    let want: Vec<&str> = if moto.is_some() {
        vec!["web", "gpu"]
    } else {
        vec!["web"]
    };
    assert_eq!(view.groups, want);
    for g in &want {
        assert_eq!(view.targets[*g], 0, "{g}");
        assert!(view.instances[*g].is_empty(), "{g}");
    }
    // Three web pods, each too big to share a 2-cpu node with another.
    let web_pod = Pod {
        cpu_millis: 1200,
        memory_bytes: 1 << 30,
        gpus: 0,
        selector: &[("pool", "web")],
        tolerates: &[],
    };
    let gpu_pod = Pod {
        cpu_millis: 2000,
        memory_bytes: 8 << 30,
        gpus: 1,
        selector: &[],
        tolerates: &["nvidia.com/gpu"],
    };
    let web = &view.templates["web"];
    let per_node = pods_per_node(web, &gpu_label, &web_pod);
    assert_eq!(per_node, 1, "{web:?}");
    assert_eq!(pods_per_node(web, &gpu_label, &gpu_pod), 0, "no GPU on web");
    let web_nodes = 3u64.div_ceil(per_node);

    let mut gpu_node = None;
    if let Some(moto) = &moto {
        let node = &view.templates["gpu"];
        let status = node.status.as_ref().unwrap();
        let labels = &node.metadata.as_ref().unwrap().labels;
        assert_eq!(
            status.capacity["nvidia.com/gpu"].string.as_deref(),
            Some("1")
        );
        assert_eq!(
            status.capacity["ephemeral-storage"].string.as_deref(),
            Some("100Gi"),
            "the group's disk"
        );
        assert_eq!(status.capacity["pods"].string.as_deref(), Some("58"));
        assert_eq!(labels["pool"], "gpu");
        assert_eq!(labels["node.kubernetes.io/instance-type"], "g4dn.xlarge");
        let types = c
            .get_available_gpu_types(proto::GetAvailableGpuTypesRequest {})
            .await
            .unwrap()
            .into_inner()
            .gpu_types;
        assert!(types.contains_key(&labels[&gpu_label]), "{types:?}");
        let taints = &node.spec.as_ref().unwrap().taints;
        assert_eq!(taints.len(), 1);
        assert_eq!(taints[0].key.as_deref(), Some("nvidia.com/gpu"));
        // The GPU pod fits the template, and only because it tolerates
        // the taint: the decision is the template's.
        assert_eq!(pods_per_node(node, &gpu_label, &gpu_pod), 1);
        let intolerant = Pod {
            tolerates: &[],
            ..gpu_pod
        };
        assert_eq!(pods_per_node(node, &gpu_label, &intolerant), 0);
        // The same template, byte for byte, on every call.
        let again = c
            .node_group_template_node_info(proto::NodeGroupTemplateNodeInfoRequest {
                id: "gpu".into(),
            })
            .await
            .unwrap()
            .into_inner()
            .node_bytes;
        assert_eq!(again, node.encode_to_vec());

        increase(&mut c, "gpu", 1).await.expect("IncreaseSize gpu");
        let made = bounded("the GPU node on EC2", STEP_LIMIT, async {
            loop {
                let view = run_once(&mut c, &foreign).await;
                let running = view.running("gpu");
                if running.len() == 1 {
                    break running.into_iter().next().unwrap();
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
        .await;
        let on_ec2 = moto.instances(OWNER, "gpu").await;
        assert_eq!(
            on_ec2
                .iter()
                .map(|i| format!("wasmprov://aws-ec2/{i}"))
                .collect::<Vec<_>>(),
            std::slice::from_ref(&made)
        );
        gpu_node = Some(made);
    }

    // Web grows by three; `serve` is killed once the first server exists
    // and before the others do.
    let mut grower = c.clone();
    let asked = tokio::spawn(async move {
        increase(&mut grower, "web", i32::try_from(web_nodes).unwrap()).await
    });
    let at_kill = bounded("the first web server", STEP_LIMIT, async {
        loop {
            let (ids, _) = hetzner_members(&fake, "web");
            if !ids.is_empty() {
                break ids.len();
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    send_signal(&served.child, nix::sys::signal::Signal::SIGKILL);
    let _ = served.child.wait().await;
    let _ = asked.await;
    assert!(
        at_kill < 3,
        "{at_kill} web servers before the kill: not mid-increase"
    );
    drop(served);

    // Restarted on the same state dir: the target holds, the member being
    // made is resumed, and only what is still wanted is asked for.
    served = daemon(d, &fake, &args).await;
    let mut c = connect(served.autoscaler.unwrap()).await;
    let view = bounded("web at its target after the restart", STEP_LIMIT, async {
        loop {
            let (ids, _) = hetzner_members(&fake, "web");
            assert!(ids.len() <= 3, "duplicates on the cloud: {ids:?}");
            if let Some(moto) = &moto {
                assert!(moto.instances(OWNER, "gpu").await.len() <= 1);
            }
            let view = run_once(&mut c, &foreign).await;
            if view.targets["web"] == 3 && view.running("web").len() == 3 {
                break view;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    let (ids, requests) = hetzner_members(&fake, "web");
    assert_eq!(
        ids,
        view.running("web"),
        "the group is what the cloud holds"
    );
    assert_eq!(requests.len(), 3, "three requests, one server each");
    for id in &ids {
        assert_eq!(view.owners[id], "web");
    }
    if let (Some(moto), Some(gpu_node)) = (&moto, &gpu_node) {
        assert_eq!(view.running("gpu"), BTreeSet::from([gpu_node.clone()]));
        assert_eq!(view.owners[gpu_node], "gpu");
        assert_eq!(moto.instances(OWNER, "gpu").await.len(), 1);
    }

    // Deletes: another owner's node is refused and nothing goes; named
    // members go, exactly those.
    let before = fake.servers().len();
    let err = delete(
        &mut c,
        "web",
        &[ids.first().unwrap().clone(), foreign[0].clone()],
    )
    .await
    .expect_err("another owner's node");
    assert_eq!(err.code(), Code::FailedPrecondition, "{}", err.message());
    assert_eq!(fake.servers().len(), before);
    let gone = ids.first().unwrap().clone();
    delete(&mut c, "web", std::slice::from_ref(&gone))
        .await
        .expect("DeleteNodes web");
    let (left, _) = hetzner_members(&fake, "web");
    assert_eq!(left.len(), 2);
    assert!(!left.contains(&gone));
    if let (Some(moto), Some(gpu_node)) = (&moto, &gpu_node) {
        delete(&mut c, "gpu", std::slice::from_ref(gpu_node))
            .await
            .expect("DeleteNodes gpu");
        assert!(moto.instances(OWNER, "gpu").await.is_empty());
        assert_eq!(moto.instances("someone-else", "gpu").await.len(), 1);
    }
    let view = run_once(&mut c, &foreign).await;
    assert_eq!(view.targets["web"], 2);
    assert_eq!(view.running("web"), left);
    if moto.is_some() {
        assert_eq!(view.targets["gpu"], 0);
        assert!(view.instances["gpu"].is_empty());
        // Empty again: pictured by its template once more.
        assert!(view.templates.contains_key("gpu"));
    }
    assert!(
        fake.servers()
            .iter()
            .any(|s| format!("wasmprov://hetzner/{}", s.id) == foreign[0]),
        "another owner's server was terminated"
    );
    drop(served);
}

// ---------------------------------------------------------- mutual TLS

struct Pki {
    dir: tempfile::TempDir,
}

/// A CA; a server certificate for `localhost`/127.0.0.1 and a client
/// certificate it signed; and a client certificate of another CA. Written
/// as PEM files in a directory of their own.
fn pki() -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: String| std::fs::write(dir.path().join(name), text).unwrap();
    let ca = |name: &str| {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
    };
    let leaf = |names: Vec<String>, issuer: &CertifiedIssuer<'_, KeyPair>, stem: &str| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, issuer)
            .unwrap();
        write(&format!("{stem}.crt"), cert.pem());
        write(&format!("{stem}.key"), key.serialize_pem());
    };
    let ours = ca("wasmprov test CA");
    let theirs = ca("another CA");
    write("ca.crt", ours.pem());
    write("other-ca.crt", theirs.pem());
    leaf(
        vec!["localhost".into(), "127.0.0.1".into()],
        &ours,
        "server",
    );
    leaf(vec!["autoscaler".into()], &ours, "client");
    leaf(vec!["autoscaler".into()], &theirs, "other-client");
    Pki { dir }
}

impl Pki {
    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_string()
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap()
    }

    /// A client trusting our CA, presenting `identity` (`client`,
    /// `other-client`) or no certificate.
    async fn client(&self, addr: SocketAddr, identity: Option<&str>) -> Result<Client, String> {
        use tonic::transport::{Certificate, ClientTlsConfig, Identity};
        let mut tls = ClientTlsConfig::new()
            .ca_certificate(Certificate::from_pem(self.read("ca.crt")))
            .domain_name("localhost");
        if let Some(stem) = identity {
            tls = tls.identity(Identity::from_pem(
                self.read(&format!("{stem}.crt")),
                self.read(&format!("{stem}.key")),
            ));
        }
        let channel = tonic::transport::Endpoint::from_shared(format!("https://{addr}"))
            .unwrap()
            .tls_config(tls)
            .map_err(|e| e.to_string())?
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(10))
            .connect()
            .await
            .map_err(|e| format!("{e:?}"))?;
        Ok(CloudProviderClient::new(channel))
    }
}

/// NodeGroups over a client that may fail to connect: the groups' ids, or
/// why not.
async fn groups_over(client: Result<Client, String>) -> Result<Vec<String>, String> {
    let mut c = client?;
    let groups = c
        .node_groups(proto::NodeGroupsRequest {})
        .await
        .map_err(|e| format!("{e:?}"))?;
    Ok(groups
        .into_inner()
        .node_groups
        .into_iter()
        .map(|g| g.id)
        .collect())
}

/// The autoscaler listener with mutual TLS accepts only clients whose
/// certificate the client CA signed (none, another CA's and plain HTTP/2
/// are refused); a non-loopback listener without mutual TLS is refused at
/// start with an error that says what to give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_autoscaler_listener_needs_the_client_cas_certificate() {
    let started = Instant::now();
    let fake = start_fake(HetznerFakeOptions::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bundle(d, &["hetzner"], &fake.url()).await;
    std::fs::create_dir_all(d.join("conf")).unwrap();
    std::fs::write(d.join("conf/node-groups.toml"), GROUPS_WEB).unwrap();
    let pki = pki();
    let served = daemon(
        d,
        &fake,
        &[
            "--autoscaler-listen",
            "127.0.0.1:0",
            "--node-groups",
            "conf/node-groups.toml",
            "--autoscaler-tls-cert",
            &pki.path("server.crt"),
            "--autoscaler-tls-key",
            &pki.path("server.key"),
            "--autoscaler-client-ca",
            &pki.path("ca.crt"),
        ],
    )
    .await;
    let addr = served.autoscaler.unwrap();
    let ok = groups_over(pki.client(addr, Some("client")).await).await;
    assert_eq!(ok, Ok(vec!["web".to_string()]));
    for (who, identity) in [
        ("no certificate", None),
        ("another CA's certificate", Some("other-client")),
    ] {
        let refused = groups_over(pki.client(addr, identity).await).await;
        assert!(refused.is_err(), "{who}: {refused:?}");
    }
    // Plain HTTP/2 to the TLS listener.
    let plain = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .timeout(Duration::from_secs(10))
        .connect()
        .await
        .map(CloudProviderClient::new)
        .map_err(|e| e.to_string());
    assert!(groups_over(plain).await.is_err());
    drop(served);

    // Remote without mutual TLS: refused before anything is served.
    let refusals: [(&[&str], &str); 3] = [
        (&[], "not a loopback address"),
        (&["--allow-remote"], "mutual TLS"),
        (
            &[
                "--allow-remote",
                "--autoscaler-tls-cert",
                &pki.path("server.crt"),
                "--autoscaler-tls-key",
                &pki.path("server.key"),
            ],
            "mutual TLS",
        ),
    ];
    for (extra, want) in refusals {
        let out = bounded(
            "a refused serve",
            STEP_LIMIT,
            wasmprov(d)
                .env("XDG_CACHE_HOME", cache())
                .env("HCLOUD_TOKEN", fake.token())
                .env("WASMPROV_SERVE_TOKEN", TOKEN)
                .args(["serve", "--listen", "127.0.0.1:0", "--no-metrics"])
                .args(["--autoscaler-listen", "0.0.0.0:0"])
                .args(["--node-groups", "conf/node-groups.toml"])
                .args(extra)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .output(),
        )
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?} started: {stderr}");
        assert!(out.stdout.is_empty(), "{extra:?} listened");
        assert!(stderr.contains(want), "{extra:?}: {stderr}");
        assert!(stderr.contains("--autoscaler-client-ca"), "{stderr}");
    }

    // A key that is not the certificate's (the client's key beside the
    // server's certificate), or no key at all: refused at start, naming both
    // flags, instead of listening and failing every handshake.
    std::fs::write(d.join("empty.key"), "").unwrap();
    for key in [
        pki.path("client.key"),
        d.join("empty.key").display().to_string(),
    ] {
        let out = bounded(
            "a refused serve",
            STEP_LIMIT,
            wasmprov(d)
                .env("XDG_CACHE_HOME", cache())
                .env("HCLOUD_TOKEN", fake.token())
                .env("WASMPROV_SERVE_TOKEN", TOKEN)
                .args(["serve", "--listen", "127.0.0.1:0", "--no-metrics"])
                .args(["--autoscaler-listen", "127.0.0.1:0"])
                .args(["--node-groups", "conf/node-groups.toml"])
                .args(["--autoscaler-tls-cert", &pki.path("server.crt")])
                .args(["--autoscaler-tls-key", &key])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .output(),
        )
        .await
        .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{key}: started: {stderr}");
        assert!(out.stdout.is_empty(), "{key}: listened");
        for flag in ["--autoscaler-tls-cert", "--autoscaler-tls-key"] {
            assert!(stderr.contains(flag), "{key}: {stderr}");
        }
    }
    eprintln!(
        "the autoscaler listener's mutual TLS: {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// Connections that stall before their TLS handshake (three bytes of a TLS
/// record) or before the HTTP/2 preface (nothing sent) are closed within
/// the set-up bound (10 s), on the autoscaler's TLS listener and on the main
/// one, and a valid client is served meanwhile; connections over the
/// autoscaler listener's cap are closed at accept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_connections_are_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fake = start_fake(HetznerFakeOptions::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bundle(d, &["hetzner"], &fake.url()).await;
    std::fs::create_dir_all(d.join("conf")).unwrap();
    std::fs::write(d.join("conf/node-groups.toml"), GROUPS_WEB).unwrap();
    let pki = pki();
    let served = daemon(
        d,
        &fake,
        &[
            "--autoscaler-listen",
            "127.0.0.1:0",
            "--node-groups",
            "conf/node-groups.toml",
            "--autoscaler-tls-cert",
            &pki.path("server.crt"),
            "--autoscaler-tls-key",
            &pki.path("server.key"),
            "--autoscaler-client-ca",
            &pki.path("ca.crt"),
        ],
    )
    .await;
    let addr = served.autoscaler.unwrap();
    let opened = Instant::now();
    let mut stalled = Vec::new();
    for _ in 0..100 {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        s.write_all(b"\x16\x03\x01").await.unwrap();
        stalled.push(s);
    }
    for _ in 0..100 {
        stalled.push(tokio::net::TcpStream::connect(served.grpc).await.unwrap());
    }
    // Served meanwhile, on both listeners.
    let ok = groups_over(pki.client(addr, Some("client")).await).await;
    assert_eq!(ok, Ok(vec!["web".to_string()]));
    let mut c = client(served.grpc).await;
    c.list_plugins(authed(TOKEN, pb::ListPluginsRequest {}))
        .await
        .unwrap();
    // Over the autoscaler listener's cap (128 open at once) a connection
    // is closed at accept.
    let mut over = Vec::new();
    for _ in 0..40 {
        over.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    let at_once = futures::future::join_all(over.into_iter().map(|mut s| async move {
        let mut buf = [0u8; 8];
        matches!(
            tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf)).await,
            Ok(Ok(0) | Err(_))
        )
    }))
    .await;
    let refused = at_once.iter().filter(|c| **c).count();
    assert!(refused >= 10, "{refused} of 40 over the cap closed at once");
    // Every stalled connection is closed by the server within the bound.
    let bound = Duration::from_secs(10) + Duration::from_secs(8);
    let closed = futures::future::join_all(stalled.into_iter().map(|mut s| async move {
        let mut buf = [0u8; 64];
        let deadline = tokio::time::Instant::from_std(opened + bound);
        loop {
            match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
                Err(_) => return false,
                Ok(Ok(0) | Err(_)) => return true,
                Ok(Ok(_)) => {}
            }
        }
    }))
    .await;
    let open = closed.iter().filter(|c| !**c).count();
    assert_eq!(
        open, 0,
        "{open} stalled connections still open after {bound:?}"
    );
    // And the listener still serves.
    let ok = groups_over(pki.client(addr, Some("client")).await).await;
    assert_eq!(ok, Ok(vec!["web".to_string()]));
}

// ---------------------------------------------------------- the figures

fn median_and_p90(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    let at = |p: f64| {
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "an index into a short, non-empty list"
        )]
        v[(((v.len() - 1) as f64) * p).round() as usize]
    };
    (at(0.5), at(0.9))
}

/// The autoscaler's per-loop reads for 10 groups of 100 nodes (NodeGroups,
/// then NodeGroupNodes and NodeGroupTargetSize per group) against the same
/// membership read through the wasmprov service (ListIntents per group),
/// both from one `wasmprov serve` over loopback HTTP/2, the 1000 members
/// made on the Hetzner fake through IncreaseSize. Run by hand in release
/// (`docs/BENCHMARKS.md`, section 9):
///
/// ```sh
/// cargo test --release -p wasmprov --test serve -- --ignored --nocapture autoscaler_loop_figures
/// ```
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "figures for docs/BENCHMARKS.md, run by hand in release"]
async fn autoscaler_loop_figures() {
    const GROUPS: usize = 10;
    const PER_GROUP: usize = 100;
    const LOOPS: usize = 50;
    let fake = start_fake(HetznerFakeOptions {
        max_servers: 2 * GROUPS * PER_GROUP,
        boot_delay_polls: 0,
        ..HetznerFakeOptions::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    bundle(d, &["hetzner"], &fake.url()).await;
    let groups: String = (0..GROUPS)
        .map(|g| {
            format!(
                "[[group]]\nid = \"g{g}\"\nmin = 0\nmax = {PER_GROUP}\ncpu = 2\nmemory_gib = 4\nplugins = [\"hetzner\"]\n\n"
            )
        })
        .collect();
    std::fs::create_dir_all(d.join("conf")).unwrap();
    std::fs::write(d.join("conf/node-groups.toml"), groups).unwrap();
    let served = daemon(
        d,
        &fake,
        &[
            "--state-dir",
            "state",
            "--autoscaler-listen",
            "127.0.0.1:0",
            "--node-groups",
            "conf/node-groups.toml",
        ],
    )
    .await;
    let mut c = connect(served.autoscaler.unwrap()).await;
    let mut w = client(served.grpc).await;
    let ids: Vec<String> = (0..GROUPS).map(|g| format!("g{g}")).collect();
    let filling = Instant::now();
    for id in &ids {
        increase(&mut c, id, i32::try_from(PER_GROUP).unwrap())
            .await
            .unwrap();
    }
    bounded("1000 members made", Duration::from_secs(600), async {
        loop {
            let view = run_once(&mut c, &[]).await;
            if ids.iter().all(|g| view.running(g).len() == PER_GROUP) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    })
    .await;
    eprintln!(
        "{} members made through IncreaseSize in {:.1} s",
        GROUPS * PER_GROUP,
        filling.elapsed().as_secs_f64()
    );

    let autoscaler_loop = |c: &mut Client| {
        let mut c = c.clone();
        let ids = ids.clone();
        async move {
            let t = Instant::now();
            let groups = c
                .node_groups(proto::NodeGroupsRequest {})
                .await
                .unwrap()
                .into_inner()
                .node_groups;
            assert_eq!(groups.len(), GROUPS);
            let mut nodes = 0;
            for id in &ids {
                nodes += c
                    .node_group_nodes(proto::NodeGroupNodesRequest { id: id.clone() })
                    .await
                    .unwrap()
                    .into_inner()
                    .instances
                    .len();
                let target = c
                    .node_group_target_size(proto::NodeGroupTargetSizeRequest { id: id.clone() })
                    .await
                    .unwrap()
                    .into_inner()
                    .target_size;
                assert_eq!(target, i32::try_from(PER_GROUP).unwrap());
            }
            assert_eq!(nodes, GROUPS * PER_GROUP);
            t.elapsed()
        }
    };
    let wasmprov_reads = |w: &mut super::pb::provisioner_client::ProvisionerClient<Channel>| {
        let mut w = w.clone();
        let ids = ids.clone();
        async move {
            let t = Instant::now();
            let mut nodes = 0;
            for id in &ids {
                nodes += w
                    .list_intents(authed(
                        TOKEN,
                        pb::ListIntentsRequest {
                            group: Some(id.clone()),
                        },
                    ))
                    .await
                    .unwrap()
                    .into_inner()
                    .intents
                    .len();
            }
            assert_eq!(nodes, GROUPS * PER_GROUP);
            t.elapsed()
        }
    };
    // One warm-up each, then the two alternate.
    autoscaler_loop(&mut c).await;
    wasmprov_reads(&mut w).await;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..LOOPS {
        a.push(autoscaler_loop(&mut c).await);
        b.push(wasmprov_reads(&mut w).await);
    }
    let (a50, a90) = median_and_p90(a);
    let (b50, b90) = median_and_p90(b);
    println!(
        "\n| reads of {GROUPS} groups × {PER_GROUP} members | calls | p50 | p90 | p50 vs wasmprov |\n|---|---:|---:|---:|---:|"
    );
    println!(
        "| the autoscaler's loop: NodeGroups + NodeGroupNodes + NodeGroupTargetSize per group | {} | {:.2} ms | {:.2} ms | ×{:.2} |",
        1 + 2 * GROUPS,
        a50.as_secs_f64() * 1e3,
        a90.as_secs_f64() * 1e3,
        a50.as_secs_f64() / b50.as_secs_f64()
    );
    println!(
        "| the wasmprov service: ListIntents per group (baseline) | {GROUPS} | {:.2} ms | {:.2} ms | ×1.00 |",
        b50.as_secs_f64() * 1e3,
        b90.as_secs_f64() * 1e3,
    );
    println!("\n{LOOPS} loops each, alternating, after one warm-up.");
    drop(served);
}
