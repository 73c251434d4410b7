//! ThreeFold zos's provision engine (seed 003), ported onto wasmprov: a
//! test-only Rust port of its `Engine` — reservations from a source, a
//! provisioner and a decommissioner per reservation type, feedback of each
//! result, reservations that expire, statistics — with a wasmprov fleet
//! (journal, leases) over the Hetzner plugin against its fake as the place
//! workloads go.
//!
//! How zos's terms land on wasmprov's:
//!
//! | zos | wasmprov |
//! | --- | --- |
//! | `Reservation.ID` | the request id (idempotency key): a reservation delivered twice, or again after a restart, makes one node |
//! | `Reservation.Duration` (`Expired()`) | the intent's lease: `Fleet::expire_leases` terminates it, and the engine sends `Deleted` |
//! | `ToDelete` → decommissioner | `Fleet::terminate` of the node the journal has for that reservation id, and no other |
//! | `ProvisionerFunc` / `DecomissionerFunc` per `ReservationType` | functions per type, here one type `vm` over the Hetzner plugin |
//! | `Feedbacker.Feedback` / `Deleted` / `UpdateStats` | the same three, recorded |
//! | `Counters` | counts per type and outcome |
//!
//! The decommissioner terminates only what the journal says this engine
//! made for that reservation: an id the journal does not have (a reservation
//! never provisioned here, or a journal emptied behind the engine's back) is
//! refused with an error result, and the server stays.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use wasmprov_api::NodeShape;
use wasmprov_fleet::journal::IntentState;
use wasmprov_fleet::{Fleet, FleetError, ProvisionOptions, ReconcilePolicy};
use wasmprov_host::{Host, HostBuilder};
use wasmprov_tests::{PluginDir, guests};

const OWNER: &str = "zos-node-7";
const NODE_ID: &str = "zos-node-7";

// ---- the port: zos's provision package, in Rust ----

/// `ReservationType`.
type ReservationType = &'static str;

/// `Reservation`: what a user asked this node to run, for how long.
#[derive(Clone, Debug)]
struct Reservation {
    id: String,
    node_id: String,
    user: String,
    kind: ReservationType,
    data: Value,
    created: SystemTime,
    duration: Duration,
    to_delete: bool,
}

impl Reservation {
    /// `Expired()`: the reservation's time is up.
    fn expired(&self) -> bool {
        self.created + self.duration <= SystemTime::now()
    }
}

/// `ResultState`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ResultState {
    Ok,
    Error,
    Deleted,
}

/// `Result`: what the engine tells the source about a reservation.
#[derive(Clone, Debug)]
struct ProvisionResult {
    kind: ReservationType,
    id: String,
    state: ResultState,
    error: String,
    data: Value,
}

/// `Feedbacker`.
trait Feedbacker: Send + Sync {
    fn feedback(&self, node_id: &str, result: &ProvisionResult);
    fn deleted(&self, node_id: &str, id: &str);
    fn update_stats(&self, node_id: &str, counters: &BTreeMap<String, u64>);
}

type Answer = Pin<Box<dyn Future<Output = anyhow::Result<Value>> + Send>>;
/// `ProvisionerFunc`.
type ProvisionerFunc = Arc<dyn Fn(Arc<Fleet>, Reservation) -> Answer + Send + Sync>;
/// `DecomissionerFunc`.
type DecomissionerFunc = Arc<dyn Fn(Arc<Fleet>, Reservation) -> Answer + Send + Sync>;

/// `Engine`: one reservation at a time, as zos's default.
struct Engine {
    node_id: String,
    fleet: Arc<Fleet>,
    provisioners: HashMap<ReservationType, ProvisionerFunc>,
    decomissioners: HashMap<ReservationType, DecomissionerFunc>,
    feedback: Arc<dyn Feedbacker>,
    counters: Mutex<BTreeMap<String, u64>>,
}

impl Engine {
    fn count(&self, kind: &str, outcome: &str) {
        *self
            .counters
            .lock()
            .unwrap()
            .entry(format!("{kind}.{outcome}"))
            .or_default() += 1;
    }

    /// `Counters`.
    fn counters(&self) -> BTreeMap<String, u64> {
        self.counters.lock().unwrap().clone()
    }

    /// At start, as zos syncs its reservation cache: one reconcile lists
    /// the cloud, so the journal is known to match it before any lease is
    /// ended (the fleet ends none on a journal nothing has checked).
    async fn start(&self) -> anyhow::Result<()> {
        let report = self.fleet.reconcile(&ReconcilePolicy::default()).await?;
        anyhow::ensure!(
            report.errors.is_empty() && report.held.is_none(),
            "{report:?}"
        );
        Ok(())
    }

    /// Runs every reservation of the source, then reports statistics.
    async fn run(&self, source: Vec<Reservation>) {
        for r in source {
            self.apply(r).await;
        }
        self.feedback.update_stats(&self.node_id, &self.counters());
    }

    async fn apply(&self, r: Reservation) {
        if r.node_id != self.node_id {
            return; // another node's reservation
        }
        if r.to_delete || r.expired() {
            self.decommission(r).await;
            return;
        }
        let Some(provision) = self.provisioners.get(r.kind) else {
            self.count(r.kind, "error");
            self.feedback.feedback(
                &self.node_id,
                &ProvisionResult {
                    kind: r.kind,
                    id: r.id.clone(),
                    state: ResultState::Error,
                    error: format!("unknown reservation type '{}'", r.kind),
                    data: Value::Null,
                },
            );
            return;
        };
        let (state, error, data) = match provision(self.fleet.clone(), r.clone()).await {
            Ok(data) => (ResultState::Ok, String::new(), data),
            Err(e) => (ResultState::Error, format!("{e:#}"), Value::Null),
        };
        self.count(
            r.kind,
            if state == ResultState::Ok {
                "ok"
            } else {
                "error"
            },
        );
        self.feedback.feedback(
            &self.node_id,
            &ProvisionResult {
                kind: r.kind,
                id: r.id,
                state,
                error,
                data,
            },
        );
    }

    async fn decommission(&self, r: Reservation) {
        let Some(decommission) = self.decomissioners.get(r.kind) else {
            return;
        };
        match decommission(self.fleet.clone(), r.clone()).await {
            Ok(_) => self.report_deleted(r.kind, &r.id),
            Err(e) => {
                self.count(r.kind, "error");
                self.feedback.feedback(
                    &self.node_id,
                    &ProvisionResult {
                        kind: r.kind,
                        id: r.id,
                        state: ResultState::Error,
                        error: format!("{e:#}"),
                        data: Value::Null,
                    },
                );
            }
        }
    }

    /// A reservation's workload is gone: its result says so, and the
    /// source is told.
    fn report_deleted(&self, kind: ReservationType, id: &str) {
        self.count(kind, "deleted");
        self.feedback.feedback(
            &self.node_id,
            &ProvisionResult {
                kind,
                id: id.to_string(),
                state: ResultState::Deleted,
                error: String::new(),
                data: Value::Null,
            },
        );
        self.feedback.deleted(&self.node_id, id);
    }

    /// The `ReservationExpirer` pass: every reservation whose lease ran out
    /// is terminated by the fleet and reported `Deleted`.
    async fn expire(&self) -> anyhow::Result<Vec<String>> {
        let report = self.fleet.expire_leases().await?;
        anyhow::ensure!(report.errors.is_empty(), "{:?}", report.errors);
        let mut gone = Vec::new();
        for (request_id, _provider_id) in report.expired {
            self.report_deleted("vm", &request_id);
            gone.push(request_id);
        }
        Ok(gone)
    }
}

/// The `vm` type's provisioner: the reservation's data is the machine, its
/// id the request id, its duration the lease.
fn vm_provisioner() -> ProvisionerFunc {
    Arc::new(|fleet, r| {
        Box::pin(async move {
            let cpu = r.data["cpu"].as_f64().unwrap_or(1.0);
            let memory_gib = r.data["memory_gib"].as_u64().unwrap_or(1);
            let mut shape = NodeShape::new(cpu, memory_gib << 30);
            shape.labels.insert("zos-user".into(), r.user.clone());
            let node = fleet
                .provision(
                    "hetzner",
                    &shape,
                    ProvisionOptions {
                        request_id: Some(r.id.clone()),
                        lease: Some(r.duration),
                        ..Default::default()
                    },
                )
                .await?;
            Ok(json!({
                "provider_id": node.provider_id,
                "ip": node.address,
                "instance_type": node.instance_type,
            }))
        })
    })
}

/// The `vm` type's decommissioner: terminates the node the journal has for
/// this reservation, and nothing when the journal has none.
fn vm_decomissioner() -> DecomissionerFunc {
    Arc::new(|fleet, r| {
        Box::pin(async move {
            let intent = fleet.journal().get(&r.id)?.ok_or_else(|| {
                anyhow::anyhow!(
                    "reservation {} was not provisioned by this node (not in its journal): nothing terminated",
                    r.id
                )
            })?;
            let provider_id = match &intent.state {
                IntentState::Active { provider_id } | IntentState::Terminating { provider_id } => {
                    provider_id.clone()
                }
                IntentState::Pending => anyhow::bail!(
                    "reservation {} is still being provisioned: nothing terminated",
                    r.id
                ),
            };
            match fleet.terminate(&intent.plugin, &provider_id).await {
                Ok(()) => Ok(Value::Null),
                Err(FleetError::Closing) => anyhow::bail!("closing"),
                Err(e) => Err(e.into()),
            }
        })
    })
}

/// What the source was told.
#[derive(Default)]
struct Recorded {
    results: Mutex<Vec<ProvisionResult>>,
    deleted: Mutex<Vec<String>>,
    stats: Mutex<Vec<BTreeMap<String, u64>>>,
}

impl Feedbacker for Recorded {
    fn feedback(&self, node_id: &str, result: &ProvisionResult) {
        assert_eq!(node_id, NODE_ID);
        self.results.lock().unwrap().push(result.clone());
    }
    fn deleted(&self, node_id: &str, id: &str) {
        assert_eq!(node_id, NODE_ID);
        self.deleted.lock().unwrap().push(id.to_string());
    }
    fn update_stats(&self, node_id: &str, counters: &BTreeMap<String, u64>) {
        assert_eq!(node_id, NODE_ID);
        self.stats.lock().unwrap().push(counters.clone());
    }
}

impl Recorded {
    fn result(&self, id: &str) -> ProvisionResult {
        self.results
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|r| r.id == id)
            .cloned()
            .unwrap_or_else(|| panic!("no result for {id}"))
    }
}

// ---- the rig ----

async fn hetzner_host(fake: &wasmprov_fake::HetznerFake, dir: &PluginDir) -> Host {
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
    host
}

fn engine(fleet: Arc<Fleet>, feedback: Arc<Recorded>) -> Engine {
    Engine {
        node_id: NODE_ID.into(),
        fleet,
        provisioners: HashMap::from([("vm", vm_provisioner())]),
        decomissioners: HashMap::from([("vm", vm_decomissioner())]),
        feedback,
        counters: Mutex::new(BTreeMap::new()),
    }
}

fn vm(id: &str, duration: Duration) -> Reservation {
    Reservation {
        id: id.into(),
        node_id: NODE_ID.into(),
        user: "alice".into(),
        kind: "vm",
        data: json!({"cpu": 2, "memory_gib": 4}),
        created: SystemTime::now(),
        duration,
        to_delete: false,
    }
}

/// Reservations in, nodes out; again after a restart without a second node;
/// an unknown type and another node's reservation; expiry; deletion; and a
/// deletion the journal cannot back refused.
#[tokio::test]
async fn the_zos_engine_runs_reservations_on_a_wasmprov_fleet() {
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
    let state = tempfile::tempdir().unwrap();
    let journal = state.path().join("journal");
    let host = Arc::new(hetzner_host(&fake, &dir).await);
    let feedback = Arc::new(Recorded::default());
    let fleet = Arc::new(Fleet::open(host.clone(), &journal).unwrap());
    let zos = engine(fleet.clone(), feedback.clone());
    zos.start().await.unwrap();

    let short = vm("res-short", Duration::from_secs(2));
    let long = vm("res-long", Duration::from_secs(3600));
    let mut unknown = vm("res-zdb", Duration::from_secs(3600));
    unknown.kind = "zdb";
    let mut elsewhere = vm("res-elsewhere", Duration::from_secs(3600));
    elsewhere.node_id = "zos-node-8".into();
    zos.run(vec![short.clone(), long.clone(), unknown, elsewhere])
        .await;

    let servers = fake.servers();
    assert_eq!(servers.len(), 2, "{servers:?}");
    for id in ["res-short", "res-long"] {
        let r = feedback.result(id);
        assert_eq!(r.state, ResultState::Ok, "{r:?}");
        assert_eq!(r.kind, "vm");
        let provider_id = r.data["provider_id"].as_str().unwrap();
        let server = servers
            .iter()
            .find(|s| s.id.to_string() == provider_id)
            .unwrap_or_else(|| panic!("{provider_id} not in the fake"));
        assert_eq!(server.labels["wasmprov-request"], id);
        assert_eq!(server.labels["wasmprov-owner"], OWNER);
        assert_eq!(server.labels["zos-user"], "alice");
    }
    let zdb = feedback.result("res-zdb");
    assert_eq!(zdb.state, ResultState::Error);
    assert!(
        zdb.error.contains("unknown reservation type 'zdb'"),
        "{zdb:?}"
    );
    assert!(
        feedback
            .results
            .lock()
            .unwrap()
            .iter()
            .all(|r| r.id != "res-elsewhere")
    );
    let stats = feedback.stats.lock().unwrap().last().cloned().unwrap();
    assert_eq!(stats.get("vm.ok"), Some(&2), "{stats:?}");
    assert_eq!(stats.get("zdb.error"), Some(&1), "{stats:?}");

    // The source delivers the same reservations again after the engine
    // restarts over the same journal: the same nodes, no new one.
    drop(zos);
    drop(fleet);
    let fleet = Arc::new(Fleet::open(host.clone(), &journal).unwrap());
    let zos = engine(fleet.clone(), feedback.clone());
    zos.start().await.unwrap();
    zos.run(vec![short.clone(), long.clone()]).await;
    assert_eq!(fake.servers().len(), 2);
    assert_eq!(
        feedback.result("res-long").data["provider_id"],
        feedback.results.lock().unwrap()[1].data["provider_id"]
    );

    // The short reservation's time runs out: the expirer's pass terminates
    // it and says so; the long one stays. (Before the restart's reconcile
    // listed the cloud, the fleet would have held it back.)
    tokio::time::sleep(Duration::from_millis(2200)).await;
    assert!(short.expired() && !long.expired());
    let gone = zos.expire().await.unwrap();
    assert_eq!(gone, vec!["res-short".to_string()]);
    assert_eq!(*feedback.deleted.lock().unwrap(), vec!["res-short"]);
    assert_eq!(feedback.result("res-short").state, ResultState::Deleted);
    let left = fake.servers();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].labels["wasmprov-request"], "res-long");

    // A deletion for a reservation this node never provisioned, and one
    // whose journal is gone: refused, the server stays.
    let mut stranger = vm("res-never-here", Duration::from_secs(3600));
    stranger.to_delete = true;
    zos.apply(stranger).await;
    let refused = feedback.result("res-never-here");
    assert_eq!(refused.state, ResultState::Error);
    assert!(refused.error.contains("not in its journal"), "{refused:?}");
    let empty_state = tempfile::tempdir().unwrap();
    let blank = Arc::new(Fleet::open(host.clone(), empty_state.path().join("journal")).unwrap());
    let forgetful = engine(blank, feedback.clone());
    let mut delete_long = long.clone();
    delete_long.to_delete = true;
    forgetful.apply(delete_long.clone()).await;
    assert_eq!(feedback.result("res-long").state, ResultState::Error);
    assert_eq!(
        fake.servers().len(),
        1,
        "a journal without it terminates nothing"
    );

    // The engine that made it deletes it.
    zos.apply(delete_long).await;
    assert_eq!(
        *feedback.deleted.lock().unwrap(),
        vec!["res-short", "res-long"]
    );
    assert!(fake.servers().is_empty());
    let counters = zos.counters();
    assert_eq!(counters.get("vm.deleted"), Some(&2), "{counters:?}");
    assert_eq!(counters.get("vm.error"), Some(&1), "{counters:?}");
}
