//! cluster-autoscaler's `externalgrpc` service (`wasmprov-autoscaler`)
//! driven over loopback HTTP/2 by a client generated from
//! `proto/externalgrpc.proto`, against the bundled Hetzner plugin on the
//! Hetzner fake: a table per RPC (happy path, bad input, foreign and
//! unknown ids), and the refusals: a delete naming a node of another group,
//! another owner or no journal terminates nothing; an emptied or stale
//! journal makes no delete or decrease terminate anything; no group lists
//! another owner's node.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic::Code;
use tonic::transport::Channel;
use wasmprov_autoscaler::proto::cloud_provider_client::CloudProviderClient;
use wasmprov_autoscaler::proto::{self, instance_status::InstanceState};
use wasmprov_autoscaler::{NodeGroups, Service};
use wasmprov_fake::{HetznerFake, HetznerFakeOptions};
use wasmprov_fleet::Fleet;
use wasmprov_tests::{PluginDir, guests};

const OWNER: &str = "autoscaler-test";

const GROUPS: &str = r##"
[[group]]
id = "web"
min = 0
max = 3
cpu = 2
memory_gib = 4
plugins = ["hetzner"]
labels = { pool = "web" }
[group.boot]
user_data = "#cloud-config\nruncmd: [[kubeadm, join, --token, '{{node_token}}']]\n"
[group.options]
scale_down_unneeded_secs = 120
scale_down_utilization_threshold = 0.3

[[group]]
id = "db"
min = 1
max = 2
instance_type = "cx22"
plugins = ["hetzner"]

[[group]]
id = "huge"
min = 0
max = 2
cpu = 4000
memory_gib = 9000
plugins = ["hetzner"]
"##;

struct Rig {
    fake: HetznerFake,
    _plugins: PluginDir,
    _state: tempfile::TempDir,
    host: Arc<wasmprov_host::Host>,
    fleet: Arc<Fleet>,
    client: CloudProviderClient<Channel>,
    _server: tokio::task::JoinHandle<()>,
}

async fn host_on(fake: &HetznerFake, owner: &str, dir: &PluginDir) -> Arc<wasmprov_host::Host> {
    let token = fake.token().to_string();
    let host = wasmprov_host::HostBuilder::new(dir.path())
        .owner_id(owner)
        .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
        .secret_source(move |name| (name == "HCLOUD_TOKEN").then(|| token.clone()))
        .build()
        .await
        .expect("the host builds");
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    Arc::new(host)
}

fn plugin_dir(fake: &HetznerFake) -> PluginDir {
    let dir = PluginDir::new();
    let grant = fake.url().trim_end_matches("/v1").to_string();
    dir.add(
        "hetzner",
        guests::HETZNER,
        &format!(
            "[config]\nendpoint = \"{}\"\n[secrets]\ntoken = {{ env = \"HCLOUD_TOKEN\" }}\n[http]\nallow = [\"{grant}\"]\n",
            fake.url()
        ),
    );
    dir
}

/// Serves `service` on loopback and connects a generated client to it.
async fn serve(service: Service) -> (CloudProviderClient<Channel>, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(service.server())
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await
            .expect("the service serves");
    });
    let channel = Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .expect("the client connects");
    (CloudProviderClient::new(channel), server)
}

async fn rig_with(opts: HetznerFakeOptions, increase_wait: Duration) -> Rig {
    rig_on(opts, increase_wait, GROUPS).await
}

async fn rig_on(opts: HetznerFakeOptions, increase_wait: Duration, groups: &str) -> Rig {
    let fake = HetznerFake::start("127.0.0.1:0".parse().unwrap(), opts)
        .await
        .expect("the fake starts");
    let plugins = plugin_dir(&fake);
    let host = host_on(&fake, OWNER, &plugins).await;
    let state = tempfile::tempdir().unwrap();
    let fleet = Arc::new(
        Fleet::open(host.clone(), state.path().join("journal.redb"))
            .unwrap()
            .owner_id(OWNER)
            .unwrap(),
    );
    let groups = NodeGroups::parse(groups).expect("the groups parse");
    let service = Service::with_retry(fleet.clone(), groups, Duration::from_millis(300))
        .increase_wait(increase_wait);
    let (client, server) = serve(service).await;
    Rig {
        fake,
        _plugins: plugins,
        _state: state,
        host,
        fleet,
        client,
        _server: server,
    }
}

async fn rig() -> Rig {
    rig_with(HetznerFakeOptions::default(), Duration::from_secs(20)).await
}

impl Rig {
    /// The fake's servers of `group` (by the label every member carries).
    fn servers_of(&self, group: &str) -> Vec<u64> {
        self.fake
            .servers()
            .iter()
            .filter(|s| s.labels.get("wasmprov-group").map(String::as_str) == Some(group))
            .map(|s| s.id)
            .collect()
    }

    async fn nodes(&mut self, group: &str) -> Vec<proto::Instance> {
        self.client
            .node_group_nodes(proto::NodeGroupNodesRequest { id: group.into() })
            .await
            .expect("NodeGroupNodes")
            .into_inner()
            .instances
    }

    async fn target(&mut self, group: &str) -> Result<i32, tonic::Status> {
        self.client
            .node_group_target_size(proto::NodeGroupTargetSizeRequest { id: group.into() })
            .await
            .map(|r| r.into_inner().target_size)
    }

    async fn increase(&mut self, group: &str, delta: i32) -> Result<(), tonic::Status> {
        self.client
            .node_group_increase_size(proto::NodeGroupIncreaseSizeRequest {
                id: group.into(),
                delta,
            })
            .await
            .map(|_| ())
    }

    async fn delete(&mut self, group: &str, ids: &[&str]) -> Result<(), tonic::Status> {
        self.client
            .node_group_delete_nodes(proto::NodeGroupDeleteNodesRequest {
                id: group.into(),
                nodes: ids
                    .iter()
                    .map(|id| proto::ExternalGrpcNode {
                        provider_id: (*id).into(),
                        name: format!("node-{id}"),
                        ..Default::default()
                    })
                    .collect(),
            })
            .await
            .map(|_| ())
    }

    async fn decrease(&mut self, group: &str, delta: i32) -> Result<(), tonic::Status> {
        self.client
            .node_group_decrease_target_size(proto::NodeGroupDecreaseTargetSizeRequest {
                id: group.into(),
                delta,
            })
            .await
            .map(|_| ())
    }

    async fn group_for(&mut self, provider_id: &str) -> String {
        self.client
            .node_group_for_node(proto::NodeGroupForNodeRequest {
                node: Some(proto::ExternalGrpcNode {
                    provider_id: provider_id.into(),
                    ..Default::default()
                }),
            })
            .await
            .expect("NodeGroupForNode")
            .into_inner()
            .node_group
            .unwrap_or_default()
            .id
    }

    /// Waits until `check` holds (the grower works behind the calls).
    async fn until(&mut self, what: &str, mut check: impl FnMut(&Self) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !check(self) {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn state(i: &proto::Instance) -> InstanceState {
    i.status
        .as_ref()
        .map_or(InstanceState::Unspecified, |s| s.instance_state())
}

fn hetzner_id(server: u64) -> String {
    format!("wasmprov://hetzner/{server}")
}

/// NodeGroups, NodeGroupTargetSize, NodeGroupIncreaseSize and
/// NodeGroupNodes: the groups as configured; an increase makes real
/// servers, each with its own join token, listed as running members.
#[tokio::test]
async fn groups_targets_and_increases() {
    let mut rig = rig().await;
    let groups = rig
        .client
        .node_groups(proto::NodeGroupsRequest {})
        .await
        .unwrap()
        .into_inner()
        .node_groups;
    let got: Vec<(String, i32, i32)> = groups
        .iter()
        .map(|g| (g.id.clone(), g.min_size, g.max_size))
        .collect();
    assert_eq!(
        got,
        [
            ("web".to_string(), 0, 3),
            ("db".to_string(), 1, 2),
            ("huge".to_string(), 0, 2)
        ]
    );

    // The target starts at the group's min; db's grower makes its one
    // member without being asked.
    for (group, want) in [("web", Ok(0)), ("db", Ok(1)), ("nope", Err(Code::NotFound))] {
        assert_eq!(
            rig.target(group).await.map_err(|s| s.code()),
            want,
            "{group}"
        );
    }
    rig.until("db's min member", |r| r.servers_of("db").len() == 1)
        .await;

    // IncreaseSize, table: bad deltas and unknown groups are refused and
    // change nothing.
    let table = [
        ("web", 0, Code::InvalidArgument),
        ("web", -1, Code::InvalidArgument),
        ("web", 4, Code::FailedPrecondition),
        ("nope", 1, Code::NotFound),
        ("", 1, Code::NotFound),
    ];
    for (group, delta, code) in table {
        let err = rig.increase(group, delta).await.expect_err("refused");
        assert_eq!(err.code(), code, "{group} {delta}: {}", err.message());
    }
    assert_eq!(rig.target("web").await.unwrap(), 0);
    assert!(rig.servers_of("web").is_empty());

    // The happy path: the call returns once the members were asked for.
    rig.increase("web", 2).await.expect("IncreaseSize");
    assert_eq!(rig.target("web").await.unwrap(), 2);
    rig.until("two web servers", |r| r.servers_of("web").len() == 2)
        .await;
    let servers = rig.servers_of("web");
    let fake_servers = rig.fake.servers();
    let tokens: Vec<String> = fake_servers
        .iter()
        .filter(|s| servers.contains(&s.id))
        .map(|s| s.user_data.clone().unwrap_or_default())
        .collect();
    assert_eq!(tokens.len(), 2);
    assert!(
        tokens
            .iter()
            .all(|t| t.contains("kubeadm") && !t.contains("{{node_token}}"))
    );
    assert_ne!(tokens[0], tokens[1], "each node gets its own join token");
    // Above max counting what is there: 2 + 2 > 3.
    let err = rig.increase("web", 2).await.expect_err("above max");
    assert_eq!(err.code(), Code::FailedPrecondition);

    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let nodes = rig.nodes("web").await;
        let mut ids: Vec<String> = nodes.iter().map(|i| i.id.clone()).collect();
        ids.sort();
        let mut want: Vec<String> = servers.iter().map(|s| hetzner_id(*s)).collect();
        want.sort();
        if ids == want
            && nodes
                .iter()
                .all(|i| state(i) == InstanceState::InstanceRunning)
        {
            break;
        }
        assert!(Instant::now() < deadline, "web's nodes: {nodes:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let err = rig
        .client
        .node_group_nodes(proto::NodeGroupNodesRequest { id: "nope".into() })
        .await
        .expect_err("unknown group");
    assert_eq!(err.code(), Code::NotFound);
}

/// NodeGroupForNode and NodeGroupNodes never claim another owner's node,
/// another cloud's id, or garbage; NodeGroupDeleteNodes refuses a list
/// naming any node that is not a member of the group (another group's,
/// another owner's, one no journal has, another cloud's, twice the same
/// group below min) and terminates nothing; then deletes exactly the named
/// member.
#[tokio::test]
async fn for_node_and_deletes() {
    let mut rig = rig().await;
    rig.increase("web", 2).await.unwrap();
    rig.until("web's servers", |r| r.servers_of("web").len() == 2)
        .await;
    rig.until("db's server", |r| r.servers_of("db").len() == 1)
        .await;
    let web = rig.servers_of("web");
    let db = rig.servers_of("db")[0];
    // Another owner's server on the same cloud, labelled as if it were in
    // group web.
    let foreign = rig
        .fake
        .plant(
            "other-owners",
            &BTreeMap::from([
                ("wasmprov-owner".to_string(), "someone-else".to_string()),
                ("wasmprov-group".to_string(), "web".to_string()),
            ]),
        )
        .unwrap();
    // A server of this owner that no journal has.
    let unjournaled = rig
        .fake
        .plant(
            "not-journaled",
            &BTreeMap::from([("wasmprov-owner".to_string(), OWNER.to_string())]),
        )
        .unwrap();

    let table = [
        (hetzner_id(web[0]), "web"),
        (hetzner_id(db), "db"),
        (hetzner_id(foreign), ""),
        (hetzner_id(unjournaled), ""),
        (format!("wasmprov://other-plugin/{}", web[0]), ""),
        (format!("hcloud://{}", web[0]), ""),
        ("".to_string(), ""),
        ("wasmprov://hetzner/".to_string(), ""),
    ];
    for (id, want) in &table {
        assert_eq!(&rig.group_for(id).await, want, "{id}");
    }
    let listed: Vec<String> = rig.nodes("web").await.into_iter().map(|i| i.id).collect();
    assert!(!listed.contains(&hetzner_id(foreign)), "{listed:?}");
    assert!(!listed.contains(&hetzner_id(unjournaled)), "{listed:?}");

    let before = rig.fake.servers().len();
    let good = hetzner_id(web[0]);
    let refusals: Vec<(&str, Vec<String>, Code)> = vec![
        (
            "web",
            vec![good.clone(), hetzner_id(db)],
            Code::FailedPrecondition,
        ),
        (
            "web",
            vec![good.clone(), hetzner_id(foreign)],
            Code::FailedPrecondition,
        ),
        (
            "web",
            vec![hetzner_id(unjournaled)],
            Code::FailedPrecondition,
        ),
        (
            "web",
            vec![good.clone(), format!("hcloud://{}", web[1])],
            Code::InvalidArgument,
        ),
        (
            "web",
            vec![good.clone(), "wasmprov://hetzner/99999".into()],
            Code::FailedPrecondition,
        ),
        (
            "web",
            vec![good.clone(), "wasmprov-wanted://web/1".into()],
            Code::FailedPrecondition,
        ),
        (
            "web",
            vec![good.clone(), "wasmprov-creating://db/db-1".into()],
            Code::FailedPrecondition,
        ),
        ("web", vec![], Code::InvalidArgument),
        ("web", vec![String::new()], Code::InvalidArgument),
        ("db", vec![hetzner_id(db)], Code::FailedPrecondition), // below db's min 1
        ("nope", vec![good.clone()], Code::NotFound),
    ];
    for (group, ids, code) in &refusals {
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        let err = rig.delete(group, &refs).await.expect_err("refused");
        assert_eq!(err.code(), *code, "{group} {ids:?}: {}", err.message());
        assert_eq!(
            rig.fake.servers().len(),
            before,
            "{ids:?} terminated something"
        );
    }
    assert_eq!(rig.target("web").await.unwrap(), 2);

    // Exactly the named member goes, and the target with it.
    rig.delete("web", &[&good]).await.expect("DeleteNodes");
    let left: Vec<u64> = rig.fake.servers().iter().map(|s| s.id).collect();
    assert!(!left.contains(&web[0]));
    for kept in [web[1], db, foreign, unjournaled] {
        assert!(left.contains(&kept), "{kept} was terminated");
    }
    assert_eq!(rig.target("web").await.unwrap(), 1);
    // Deleting it again: no longer a member.
    let err = rig.delete("web", &[&good]).await.expect_err("gone");
    assert_eq!(err.code(), Code::FailedPrecondition);
}

/// NodeGroupDecreaseTargetSize drops only wanted members not yet made; a
/// group no plugin can make lists its wanted members as creating with the
/// autoscaler's error info, and a delete of one lowers the target.
#[tokio::test]
async fn decreases_and_failed_creates() {
    let mut rig = rig().await;
    rig.increase("web", 1).await.unwrap();
    rig.until("web's server", |r| r.servers_of("web").len() == 1)
        .await;
    let table = [
        ("web", 1, Code::InvalidArgument),
        ("web", 0, Code::InvalidArgument),
        ("web", -1, Code::FailedPrecondition), // the member is made
        ("nope", -1, Code::NotFound),
    ];
    for (group, delta, code) in table {
        let err = rig.decrease(group, delta).await.expect_err("refused");
        assert_eq!(err.code(), code, "{group} {delta}: {}", err.message());
    }
    assert_eq!(rig.target("web").await.unwrap(), 1);
    assert_eq!(
        rig.servers_of("web").len(),
        1,
        "a decrease terminated a node"
    );

    // No Hetzner type has 4000 cpus: the wanted members fail to be made.
    rig.increase("huge", 2).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let nodes = loop {
        let nodes = rig.nodes("huge").await;
        if nodes.iter().all(|i| {
            i.status
                .as_ref()
                .and_then(|s| s.error_info.as_ref())
                .is_some_and(|e| !e.error_code.is_empty())
        }) && nodes.len() == 2
        {
            break nodes;
        }
        assert!(Instant::now() < deadline, "huge's nodes: {nodes:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for n in &nodes {
        assert_eq!(state(n), InstanceState::InstanceCreating);
        let info = n.status.as_ref().unwrap().error_info.as_ref().unwrap();
        assert_eq!(info.instance_error_class, 99, "{info:?}");
        assert!(n.id.starts_with("wasmprov-wanted://huge/"), "{}", n.id);
    }
    rig.decrease("huge", -1)
        .await
        .expect("one wanted member dropped");
    assert_eq!(rig.target("huge").await.unwrap(), 1);
    // The autoscaler deletes the failed ones by id.
    let id = rig.nodes("huge").await[0].id.clone();
    rig.delete("huge", &[&id])
        .await
        .expect("a wanted member deleted");
    assert_eq!(rig.target("huge").await.unwrap(), 0);
    assert!(rig.nodes("huge").await.is_empty());
}

/// Wanted members have stable ids, never reused: deleting the same
/// `wasmprov-wanted://GROUP/N` again is a no-op success (the target drops
/// once), the other wanted ids keep their numbers, an increase numbers its
/// slots above every slot there was, and a number never listed is not a
/// member.
#[tokio::test]
async fn wanted_ids_are_stable() {
    let mut rig = rig().await;
    // No Hetzner type has 4000 cpus: the wanted members stay wanted.
    rig.increase("huge", 2).await.unwrap();
    let ids =
        |nodes: Vec<proto::Instance>| -> Vec<String> { nodes.into_iter().map(|i| i.id).collect() };
    assert_eq!(
        ids(rig.nodes("huge").await),
        ["wasmprov-wanted://huge/1", "wasmprov-wanted://huge/2"]
    );
    for _ in 0..3 {
        rig.delete("huge", &["wasmprov-wanted://huge/1"])
            .await
            .expect("deleting a wanted member, again");
        assert_eq!(rig.target("huge").await.unwrap(), 1);
        assert_eq!(ids(rig.nodes("huge").await), ["wasmprov-wanted://huge/2"]);
    }
    rig.increase("huge", 1).await.unwrap();
    assert_eq!(
        ids(rig.nodes("huge").await),
        ["wasmprov-wanted://huge/2", "wasmprov-wanted://huge/3"]
    );
    // A decrease drops the lowest; deleting it afterwards changes nothing.
    rig.decrease("huge", -1).await.unwrap();
    assert_eq!(ids(rig.nodes("huge").await), ["wasmprov-wanted://huge/3"]);
    rig.delete("huge", &["wasmprov-wanted://huge/2"])
        .await
        .expect("a slot already dropped");
    assert_eq!(rig.target("huge").await.unwrap(), 1);
    let err = rig
        .delete("huge", &["wasmprov-wanted://huge/9"])
        .await
        .expect_err("never listed");
    assert_eq!(err.code(), Code::FailedPrecondition, "{}", err.message());
    rig.delete("huge", &["wasmprov-wanted://huge/3"])
        .await
        .unwrap();
    assert_eq!(rig.target("huge").await.unwrap(), 0);
    assert!(rig.nodes("huge").await.is_empty());
    rig.increase("huge", 1).await.unwrap();
    assert_eq!(ids(rig.nodes("huge").await), ["wasmprov-wanted://huge/4"]);
}

/// A member the cloud has no room for (the project's server quota) is
/// listed with the autoscaler's out-of-resources class, read from the
/// plugin's typed error, so the autoscaler tries other groups.
#[tokio::test]
async fn a_full_quota_is_out_of_resources() {
    let opts = HetznerFakeOptions {
        max_servers: 1,
        ..HetznerFakeOptions::default()
    };
    let mut rig = rig_with(opts, Duration::from_secs(20)).await;
    // db's min member takes the one server the quota allows.
    rig.until("db's server", |r| r.servers_of("db").len() == 1)
        .await;
    rig.increase("web", 1).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let info = loop {
        let nodes = rig.nodes("web").await;
        if let Some(info) = nodes
            .first()
            .and_then(|n| n.status.as_ref())
            .and_then(|s| s.error_info.clone())
        {
            break info;
        }
        assert!(Instant::now() < deadline, "web's nodes: {nodes:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        (info.instance_error_class, info.error_code.as_str()),
        (wasmprov_autoscaler::OUT_OF_RESOURCES, "out-of-resources"),
        "{info:?}"
    );
    assert!(rig.servers_of("web").is_empty());
}

/// A member deleted while its create is still under way is terminated once
/// the create finishes: no node is left behind.
#[tokio::test]
async fn deleting_a_member_being_created_leaks_nothing() {
    let opts = HetznerFakeOptions {
        response_delay: Duration::from_millis(1500),
        ..HetznerFakeOptions::default()
    };
    let mut rig = rig_with(opts, Duration::from_millis(100)).await;
    rig.increase("web", 1).await.unwrap();
    // The create is under way: the member is listed as being created.
    let deadline = Instant::now() + Duration::from_secs(20);
    let creating = loop {
        let nodes = rig.nodes("web").await;
        if let Some(n) = nodes
            .iter()
            .find(|n| n.id.starts_with("wasmprov-creating://web/"))
        {
            break n.id.clone();
        }
        assert!(Instant::now() < deadline, "web's nodes: {nodes:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    rig.delete("web", &[&creating])
        .await
        .expect("deleting a member being created");
    assert_eq!(rig.target("web").await.unwrap(), 0);
    let listed = rig.nodes("web").await;
    assert!(
        listed
            .iter()
            .all(|n| state(n) == InstanceState::InstanceDeleting),
        "{listed:?}"
    );
    // The create finishes, then the node is terminated: nothing remains.
    rig.until("the node made and then terminated", |r| {
        r.servers_of("web").is_empty() && r.fleet.members("web").unwrap().is_empty()
    })
    .await;
    assert!(rig.nodes("web").await.is_empty());
}

/// A group at min 1 whose members are all named but one.
const BIG: &str = r##"
[[group]]
id = "big"
min = 1
max = 5
instance_type = "cx22"
plugins = ["hetzner"]
"##;

/// A delete whose terminates fail (as a host killed mid-delete leaves
/// them) is journaled whole first: every named member is marked and the
/// target lowered once, the grower terminates each marked member until
/// none is left, and a retried delete of marked members is accepted (it
/// changes nothing), never refused by the min: the min counts the
/// members that stay.
#[tokio::test]
async fn a_failed_delete_leaves_nothing_running() {
    let mut rig = rig_on(HetznerFakeOptions::default(), Duration::from_secs(20), BIG).await;
    rig.until("big's min", |r| r.servers_of("big").len() == 1)
        .await;
    rig.increase("big", 3).await.unwrap();
    rig.until("big's servers", |r| r.servers_of("big").len() == 4)
        .await;
    let named: Vec<String> = rig.servers_of("big")[1..]
        .iter()
        .map(|s| hetzner_id(*s))
        .collect();
    let refs: Vec<&str> = named.iter().map(String::as_str).collect();
    // Every cloud call fails for a while: the terminates too.
    for _ in 0..30 {
        rig.fake.inject(wasmprov_fake::hetzner::Fault::Unauthorized);
    }
    let _ = rig.delete("big", &refs).await;
    assert_eq!(rig.target("big").await.unwrap(), 1);
    // Asked again while they are being deleted: accepted, nothing changes.
    rig.delete("big", &refs)
        .await
        .expect("a retried delete of members being deleted");
    assert_eq!(rig.target("big").await.unwrap(), 1);
    let listed = rig.nodes("big").await;
    for id in &named {
        let n = listed.iter().find(|n| &n.id == id);
        assert!(
            n.is_none_or(|n| state(n) == InstanceState::InstanceDeleting),
            "{id}: {listed:?}"
        );
    }
    rig.until("the named members terminated", |r| {
        r.servers_of("big").len() == 1 && r.fleet.members("big").unwrap().len() == 1
    })
    .await;
    assert_eq!(rig.target("big").await.unwrap(), 1);
    // The last member is the min: refused.
    let last = hetzner_id(rig.servers_of("big")[0]);
    let err = rig.delete("big", &[&last]).await.expect_err("below min");
    assert_eq!(err.code(), Code::FailedPrecondition, "{}", err.message());
}

/// An emptied journal (a fresh one beside the same cloud) or a stale one
/// (holding destructive actions) never makes a delete or decrease
/// terminate anything.
#[tokio::test]
async fn emptied_or_stale_journal_terminates_nothing() {
    let mut rig = rig().await;
    rig.increase("web", 2).await.unwrap();
    rig.until("web's servers", |r| r.servers_of("web").len() == 2)
        .await;
    let web = rig.servers_of("web");

    // A fresh journal over the same host and cloud.
    let state = tempfile::tempdir().unwrap();
    let empty = Arc::new(
        Fleet::open(rig.host.clone(), state.path().join("journal.redb"))
            .unwrap()
            .owner_id(OWNER)
            .unwrap(),
    );
    let groups = NodeGroups::parse(GROUPS).unwrap();
    let (mut client, _server) = serve(Service::with_retry(
        empty,
        groups,
        Duration::from_millis(300),
    ))
    .await;
    let before = rig.fake.servers().len();
    let err = client
        .node_group_delete_nodes(proto::NodeGroupDeleteNodesRequest {
            id: "web".into(),
            nodes: vec![proto::ExternalGrpcNode {
                provider_id: hetzner_id(web[0]),
                ..Default::default()
            }],
        })
        .await
        .expect_err("refused");
    assert_eq!(err.code(), Code::FailedPrecondition, "{}", err.message());
    let err = client
        .node_group_decrease_target_size(proto::NodeGroupDecreaseTargetSizeRequest {
            id: "web".into(),
            delta: -1,
        })
        .await
        .expect_err("nothing to drop");
    assert_eq!(err.code(), Code::FailedPrecondition);
    let nodes = client
        .node_group_nodes(proto::NodeGroupNodesRequest { id: "web".into() })
        .await
        .unwrap()
        .into_inner()
        .instances;
    assert!(nodes.is_empty(), "{nodes:?}");
    assert_eq!(rig.fake.servers().len(), before);

    // The original journal, held: it found evidence it is stale.
    let doubt = wasmprov_fleet::journal::Doubt {
        kind: wasmprov_fleet::journal::DoubtKind::Stale,
        since_ms: wasmprov_fleet::journal::now_ms(),
        plugin: "hetzner".into(),
        provider_id: web[1].to_string(),
        detail: "planted by the test".into(),
    };
    rig.fleet
        .journal()
        .raise_doubt(&doubt, &wasmprov_fleet::journal::Event::default())
        .unwrap();
    let err = rig
        .delete("web", &[&hetzner_id(web[0])])
        .await
        .expect_err("held");
    assert_eq!(err.code(), Code::FailedPrecondition, "{}", err.message());
    assert!(err.message().contains("stale"), "{}", err.message());
    let err = rig.decrease("web", -1).await.expect_err("nothing to drop");
    assert_eq!(err.code(), Code::FailedPrecondition);
    assert_eq!(rig.fake.servers().len(), before);
    assert_eq!(rig.target("web").await.unwrap(), 2);
}

/// While the journal is held (its evidence in doubt: emptied, foreign or
/// stale), the grower creates nothing, not even a group's min, and
/// NodeGroupIncreaseSize is refused as a failed precondition naming the
/// hold.
#[tokio::test]
async fn a_held_journal_creates_nothing() {
    let mut rig = rig().await;
    rig.until("db's server", |r| r.servers_of("db").len() == 1)
        .await;
    // A fresh journal beside the same cloud, held as reconcile holds one
    // that finds this owner's nodes under another journal's identity.
    let state = tempfile::tempdir().unwrap();
    let fresh = Arc::new(
        Fleet::open(rig.host.clone(), state.path().join("journal.redb"))
            .unwrap()
            .owner_id(OWNER)
            .unwrap(),
    );
    let doubt = wasmprov_fleet::journal::Doubt {
        kind: wasmprov_fleet::journal::DoubtKind::Foreign,
        since_ms: wasmprov_fleet::journal::now_ms(),
        plugin: "hetzner".into(),
        provider_id: rig.servers_of("db")[0].to_string(),
        detail: "planted by the test".into(),
    };
    fresh
        .journal()
        .raise_doubt(&doubt, &wasmprov_fleet::journal::Event::default())
        .unwrap();
    let before = rig.fake.servers().len();
    let groups = NodeGroups::parse(GROUPS).unwrap();
    let (mut client, _server) = serve(
        Service::with_retry(fresh.clone(), groups, Duration::from_millis(100))
            .increase_wait(Duration::from_secs(2)),
    )
    .await;
    let err = client
        .node_group_increase_size(proto::NodeGroupIncreaseSizeRequest {
            id: "web".into(),
            delta: 1,
        })
        .await
        .expect_err("held");
    assert_eq!(err.code(), Code::FailedPrecondition, "{}", err.message());
    assert!(err.message().contains("held"), "{}", err.message());
    // Several passes of the grower: db's min is not made by this journal.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(rig.fake.servers().len(), before);
    assert!(fresh.members("db").unwrap().is_empty());
    assert!(fresh.members("web").unwrap().is_empty());
}

/// A service whose grower waits for a gate (`wasmprov serve` gives it the
/// end of its startup reconcile) makes nothing before the gate opens: a
/// fresh journal beside a cloud that has this owner's nodes is held only
/// once a reconcile has seen them, and a grower that ran first would have
/// made db's min under it. After the reconcile it is held: still nothing.
#[tokio::test]
async fn the_grower_waits_for_the_startup_reconcile() {
    let mut rig = rig().await;
    rig.until("db's server", |r| r.servers_of("db").len() == 1)
        .await;
    let state = tempfile::tempdir().unwrap();
    let fresh = Arc::new(
        Fleet::open(rig.host.clone(), state.path().join("journal.redb"))
            .unwrap()
            .owner_id(OWNER)
            .unwrap(),
    );
    let before = rig.fake.servers().len();
    let (open, gate) = tokio::sync::oneshot::channel::<()>();
    let (_client, _server) = serve(Service::starting_after(
        fresh.clone(),
        NodeGroups::parse(GROUPS).unwrap(),
        Duration::from_millis(100),
        async move {
            let _ = gate.await;
        },
    ))
    .await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(rig.fake.servers().len(), before, "made before the gate");
    assert!(fresh.held().unwrap().is_none());
    let policy = wasmprov_fleet::ReconcilePolicy {
        grace: Duration::ZERO,
        ..wasmprov_fleet::ReconcilePolicy::default()
    };
    fresh.reconcile(&policy).await.unwrap();
    assert!(fresh.held().unwrap().is_some(), "the reconcile holds it");
    open.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(rig.fake.servers().len(), before, "made while held");
    assert!(fresh.members("db").unwrap().is_empty());
}

/// NodeGroupGetOptions, Refresh, Cleanup, and the optional calls.
#[tokio::test]
async fn options_refresh_cleanup() {
    let mut rig = rig().await;
    let defaults = proto::NodeGroupAutoscalingOptions {
        scale_down_utilization_threshold: 0.5,
        scale_down_gpu_utilization_threshold: 0.5,
        max_node_provision_duration: Some(prost_types_duration(900)),
        ..Default::default()
    };
    let got = rig
        .client
        .node_group_get_options(proto::NodeGroupAutoscalingOptionsRequest {
            id: "web".into(),
            defaults: Some(defaults),
        })
        .await
        .unwrap()
        .into_inner()
        .node_group_autoscaling_options
        .unwrap();
    assert_eq!(got.scale_down_utilization_threshold, 0.3);
    assert_eq!(got.scale_down_gpu_utilization_threshold, 0.5);
    assert_eq!(
        got.scale_down_unneeded_duration.map(|d| d.seconds),
        Some(120)
    );
    assert_eq!(
        got.max_node_provision_duration.map(|d| d.seconds),
        Some(900)
    );
    for (group, code) in [("db", Code::Unimplemented), ("nope", Code::NotFound)] {
        let err = rig
            .client
            .node_group_get_options(proto::NodeGroupAutoscalingOptionsRequest {
                id: group.into(),
                defaults: Some(defaults),
            })
            .await
            .expect_err("no options");
        assert_eq!(err.code(), code, "{group}");
    }
    // Refresh asks no cloud (once db's min member is made, nothing does).
    rig.until("db's server", |r| r.servers_of("db").len() == 1)
        .await;
    rig.until("db's member active", |r| {
        r.fleet
            .members("db")
            .unwrap()
            .iter()
            .all(|i| i.provider_id().is_some())
    })
    .await;
    let requests = rig.fake.request_count();
    rig.client
        .refresh(proto::RefreshRequest {})
        .await
        .expect("Refresh");
    rig.client
        .cleanup(proto::CleanupRequest {})
        .await
        .expect("Cleanup");
    rig.client
        .refresh(proto::RefreshRequest {})
        .await
        .expect("Refresh after Cleanup");
    assert_eq!(
        rig.fake.request_count(),
        requests,
        "Refresh or Cleanup asked the cloud"
    );
}

fn prost_types_duration(seconds: i64) -> prost_types::Duration {
    prost_types::Duration { seconds, nanos: 0 }
}

/// NodeGroupTemplateNodeInfo (T's template over the group's cheapest
/// offering, in the new and the older field), GPULabel,
/// GetAvailableGPUTypes and the prices.
#[tokio::test]
async fn template_gpu_and_prices() {
    use prost::Message;
    let mut rig = rig().await;
    let answer = rig
        .client
        .node_group_template_node_info(proto::NodeGroupTemplateNodeInfoRequest { id: "web".into() })
        .await
        .expect("a template")
        .into_inner();
    assert_eq!(answer.node_bytes, answer.legacy_node_info);
    // Deterministic: the same bytes on every call (maps in key order).
    let again = rig
        .client
        .node_group_template_node_info(proto::NodeGroupTemplateNodeInfoRequest { id: "web".into() })
        .await
        .expect("a template")
        .into_inner();
    assert_eq!(again.node_bytes, answer.node_bytes);
    let node = wasmprov_autoscaler::k8s::core_v1::Node::decode(answer.node_bytes.as_slice())
        .expect("a v1.Node");
    let labels = &node.metadata.as_ref().unwrap().labels;
    assert_eq!(labels.get("pool").map(String::as_str), Some("web"));
    assert!(
        labels.contains_key("node.kubernetes.io/instance-type"),
        "{labels:?}"
    );
    for (group, code) in [("nope", Code::NotFound), ("huge", Code::FailedPrecondition)] {
        let err = rig
            .client
            .node_group_template_node_info(proto::NodeGroupTemplateNodeInfoRequest {
                id: group.into(),
            })
            .await
            .expect_err("no template");
        assert_eq!(err.code(), code, "{group}: {}", err.message());
    }
    let label = rig
        .client
        .gpu_label(proto::GpuLabelRequest {})
        .await
        .unwrap()
        .into_inner()
        .label;
    assert_eq!(label, wasmprov_autoscaler::template::GPU_LABEL);
    rig.client
        .get_available_gpu_types(proto::GetAvailableGpuTypesRequest {})
        .await
        .expect("GPU types");

    rig.increase("web", 1).await.unwrap();
    rig.until("web's server", |r| r.servers_of("web").len() == 1)
        .await;
    let member = hetzner_id(rig.servers_of("web")[0]);
    let hour = |start: i64| proto::PricingNodePriceRequest {
        node: Some(proto::ExternalGrpcNode {
            provider_id: member.clone(),
            ..Default::default()
        }),
        start_timestamp: Some(prost_types::Timestamp {
            seconds: start,
            nanos: 0,
        }),
        end_timestamp: Some(prost_types::Timestamp {
            seconds: start + 3600,
            nanos: 0,
        }),
    };
    let price = rig
        .client
        .pricing_node_price(hour(1_700_000_000))
        .await
        .unwrap()
        .into_inner()
        .price;
    assert!(price > 0.0, "{price}");
    // The template node, as the price expander sends it for a group
    // without nodes: no provider id, the template's labels and
    // annotations. Priced as the offering the member was made on.
    let meta = node.metadata.clone().unwrap();
    let template = proto::ExternalGrpcNode {
        provider_id: String::new(),
        name: meta.name.clone().unwrap_or_default(),
        labels: meta.labels.clone().into_iter().collect(),
        annotations: meta.annotations.clone().into_iter().collect(),
    };
    let template_price = rig
        .client
        .pricing_node_price(proto::PricingNodePriceRequest {
            node: Some(template.clone()),
            ..hour(1_700_000_000)
        })
        .await
        .expect("the template node priced")
        .into_inner()
        .price;
    assert!(
        (template_price - price).abs() < 1e-9,
        "template {template_price}, member {price}"
    );
    let named_neither = |keep: &[&str]| proto::ExternalGrpcNode {
        annotations: template
            .annotations
            .iter()
            .filter(|(k, _)| keep.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        ..template.clone()
    };
    let mut table: Vec<(proto::PricingNodePriceRequest, Code)> = vec![
        (
            proto::PricingNodePriceRequest {
                node: Some(named_neither(&[])),
                ..hour(1_700_000_000)
            },
            Code::InvalidArgument,
        ),
        (
            proto::PricingNodePriceRequest {
                node: Some(named_neither(&["wasmprov.io/plugin"])),
                ..hour(1_700_000_000)
            },
            Code::InvalidArgument,
        ),
        (
            proto::PricingNodePriceRequest {
                node: Some(proto::ExternalGrpcNode {
                    annotations: [
                        ("wasmprov.io/plugin".to_string(), "hetzner".to_string()),
                        (
                            "wasmprov.io/instance-type".to_string(),
                            "nosuch".to_string(),
                        ),
                    ]
                    .into(),
                    ..template.clone()
                }),
                ..hour(1_700_000_000)
            },
            Code::Unimplemented,
        ),
    ];
    table.extend(vec![
        (
            proto::PricingNodePriceRequest {
                end_timestamp: None,
                ..hour(1_700_000_000)
            },
            Code::InvalidArgument,
        ),
        (
            proto::PricingNodePriceRequest {
                node: Some(proto::ExternalGrpcNode {
                    provider_id: "hcloud://1".into(),
                    ..Default::default()
                }),
                ..hour(1_700_000_000)
            },
            Code::InvalidArgument,
        ),
        (
            proto::PricingNodePriceRequest {
                node: Some(proto::ExternalGrpcNode {
                    provider_id: "wasmprov://hetzner/424242".into(),
                    ..Default::default()
                }),
                ..hour(1_700_000_000)
            },
            Code::Unimplemented,
        ),
    ]);
    for (req, code) in table {
        let err = rig
            .client
            .pricing_node_price(req)
            .await
            .expect_err("refused");
        assert_eq!(err.code(), code, "{}", err.message());
    }
    let err = rig
        .client
        .pricing_pod_price(proto::PricingPodPriceRequest {
            pod_bytes: vec![0xff, 0xff, 0xff],
            start_timestamp: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
            end_timestamp: Some(prost_types::Timestamp {
                seconds: 1_700_003_600,
                nanos: 0,
            }),
            ..Default::default()
        })
        .await
        .expect_err("not a pod");
    assert_eq!(err.code(), Code::InvalidArgument, "{}", err.message());
}
