//! Destroy only on proof: every way the journal, a cloud's list or a
//! backend's answer can be incomplete or wrong, and the fleet terminating
//! or forgetting nothing a caller was told exists. Real components (the
//! Hetzner plugin, the buggy reference-cloud plugin) against loopback
//! fakes, real journal files, a real filesystem filled up.
//!
//! `why` has one test per way the fleet used to destroy acknowledged
//! nodes; `damage` runs a few hundred randomized cases of all of them
//! together.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmprov_api::{
    CapacityType, CloudProvisioner, JoinState, NodeHandle, NodeShape, PriceHint, ProvisionRequest,
    ProvisionerError, provenance,
};
use wasmprov_fleet::journal::{EventKind, EventStatus, IntentState};
use wasmprov_fleet::{
    BackendSet, CapacityGroup, Fleet, FleetError, LeakPolicy, OrphanKind, ProvisionOptions,
    ReconcilePolicy,
};
use wasmprov_host::{Host, HostBuilder};
use wasmprov_tests::{PluginDir, guests};

const OWNER: &str = "proof-owner";

fn cache() -> Option<std::path::PathBuf> {
    Some(std::env::temp_dir().join("wasmprov-test-cache"))
}

/// A Hetzner fake and a host whose `hetzner` plugin is pointed at it.
struct Rig {
    fake: wasmprov_fake::HetznerFake,
    _dir: PluginDir,
    host: Arc<Host>,
}

fn quick() -> wasmprov_fake::HetznerFakeOptions {
    wasmprov_fake::HetznerFakeOptions {
        boot_delay_polls: 0,
        ..Default::default()
    }
}

async fn rig(opts: wasmprov_fake::HetznerFakeOptions) -> Rig {
    let fake = wasmprov_fake::HetznerFake::start("127.0.0.1:0".parse().unwrap(), opts)
        .await
        .unwrap();
    let grant = fake.url().trim_end_matches("/v1").to_string();
    let endpoint = fake.url();
    rig_at(fake, &endpoint, &grant).await
}

/// A host whose `hetzner` plugin calls `endpoint`, granted `grant`.
async fn rig_at(fake: wasmprov_fake::HetznerFake, endpoint: &str, grant: &str) -> Rig {
    let dir = PluginDir::new();
    dir.add(
        "hetzner",
        guests::HETZNER,
        &format!(
            "[config]\nendpoint = \"{endpoint}\"\nlocation = \"fsn1\"\n[secrets]\ntoken = {{ env = \"HCLOUD_TOKEN\" }}\n[http]\nallow = [\"{grant}\"]\n[limits]\ncall_timeout_ms = 8000\n"
        ),
    );
    let host = HostBuilder::new(dir.path())
        .owner_id(OWNER)
        .cache_dir(cache())
        .secret_source(|name| (name == "HCLOUD_TOKEN").then(|| "fake-hetzner-token".to_string()))
        .build()
        .await
        .unwrap();
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    Rig {
        fake,
        _dir: dir,
        host: Arc::new(host),
    }
}

impl Rig {
    fn alive(&self) -> BTreeSet<String> {
        self.fake
            .servers()
            .iter()
            .map(|s| s.id.to_string())
            .collect()
    }

    fn fleet(&self, path: &std::path::Path) -> Fleet {
        Fleet::open(self.host.clone(), path).unwrap()
    }
}

fn shape() -> NodeShape {
    NodeShape::new(2.0, 4 << 30)
}

fn opts(id: &str) -> ProvisionOptions {
    ProvisionOptions {
        request_id: Some(id.into()),
        ..ProvisionOptions::default()
    }
}

/// The most destructive reconcile there is: leaks terminated, nothing
/// believed late.
fn ruthless() -> ReconcilePolicy {
    ReconcilePolicy {
        leaks: LeakPolicy::Terminate,
        grace: Duration::ZERO,
        ..ReconcilePolicy::default()
    }
}

fn orphan_ids(report: &wasmprov_fleet::ReconcileReport) -> BTreeSet<String> {
    report
        .orphans
        .iter()
        .map(|o| o.node.provider_id.clone())
        .collect()
}

/// Nothing was terminated or forgotten by this reconcile.
fn destroyed_nothing(report: &wasmprov_fleet::ReconcileReport) {
    assert!(
        report.leaks.iter().all(|l| !l.terminated)
            && report.vanished.is_empty()
            && report.expired.is_empty()
            && report.abandoned.is_empty(),
        "{report}"
    );
}

/// A native backend over another one, with its answers spoiled on demand:
/// nodes of another owner (or of none) added to lists, a lookup answered
/// with another owner's node, nodes left out of lists. It also counts the
/// provisions it passes on.
struct Spoiled {
    inner: Arc<dyn CloudProvisioner>,
    /// Nodes added to every list.
    extra: Mutex<Vec<NodeHandle>>,
    /// Provider ids whose `get` answers a node of another owner.
    foreign_get: Mutex<BTreeSet<String>>,
    /// Provider ids left out of every list.
    hidden: Mutex<BTreeSet<String>>,
    /// Provider ids whose `get` says they do not exist.
    absent: Mutex<BTreeSet<String>>,
    /// The node every provision answers with, when set.
    answer: Mutex<Option<NodeHandle>>,
    provisions: AtomicUsize,
}

impl Spoiled {
    fn new(inner: Arc<dyn CloudProvisioner>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            extra: Mutex::default(),
            foreign_get: Mutex::default(),
            hidden: Mutex::default(),
            absent: Mutex::default(),
            answer: Mutex::default(),
            provisions: AtomicUsize::new(0),
        })
    }
}

fn node_of(owner: Option<&str>, id: &str) -> NodeHandle {
    let mut n = NodeHandle::new(id, JoinState::Joined);
    if let Some(o) = owner {
        n.labels.insert(provenance::OWNER_LABEL.into(), o.into());
    }
    n
}

#[async_trait::async_trait]
impl CloudProvisioner for Spoiled {
    async fn provision(&self, shape: &NodeShape) -> wasmprov_api::Result<NodeHandle> {
        self.inner.provision(shape).await
    }
    async fn provision_request(&self, r: &ProvisionRequest) -> wasmprov_api::Result<NodeHandle> {
        self.provisions.fetch_add(1, SeqCst);
        if let Some(node) = self.answer.lock().unwrap().clone() {
            return Ok(node);
        }
        self.inner.provision_request(r).await
    }
    async fn terminate(&self, id: &String) -> wasmprov_api::Result<()> {
        self.inner.terminate(id).await
    }
    async fn describe(&self) -> wasmprov_api::Result<Vec<NodeHandle>> {
        let hidden = self.hidden.lock().unwrap().clone();
        let mut nodes: Vec<NodeHandle> = self
            .inner
            .describe()
            .await?
            .into_iter()
            .filter(|n| !hidden.contains(&n.provider_id))
            .collect();
        nodes.extend(self.extra.lock().unwrap().iter().cloned());
        Ok(nodes)
    }
    async fn get(&self, id: &String) -> wasmprov_api::Result<Option<NodeHandle>> {
        if self.foreign_get.lock().unwrap().contains(id) {
            return Ok(Some(node_of(Some("someone-else"), id)));
        }
        if self.absent.lock().unwrap().contains(id) {
            return Ok(None);
        }
        self.inner.get(id).await
    }
    fn capacity_types(&self) -> &[CapacityType] {
        self.inner.capacity_types()
    }
    fn price_hint(&self, shape: &NodeShape) -> Option<PriceHint> {
        self.inner.price_hint(shape)
    }
    fn name(&self) -> &str {
        self.inner.name()
    }
}

mod why {
    use super::*;

    /// Ten nodes provisioned, then the journal emptied, deleted, cut in
    /// half or restored from a copy taken after five: the most destructive
    /// reconcile, three times, terminates and forgets nothing. Every node
    /// the journal cannot account for is an orphan (made by another
    /// journal, or under a generation this copy never issued), the journal
    /// holds, and adopting the orphans brings it back in step.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lost_emptied_cut_or_older_journal_destroys_nothing() {
        for damage in ["emptied", "deleted", "cut", "older"] {
            let rig = rig(quick()).await;
            let state = tempfile::tempdir().unwrap();
            let path = state.path().join("journal.redb");
            let copy = state.path().join("older.redb");
            let mut acked = Vec::new();
            {
                let fleet = rig.fleet(&path);
                for i in 0..10 {
                    if i == 5 {
                        std::fs::copy(&path, &copy).unwrap();
                    }
                    let lease = (i % 4 == 0).then_some(Duration::from_secs(3600));
                    let n = fleet
                        .provision(
                            "hetzner",
                            &shape(),
                            ProvisionOptions {
                                lease,
                                ..opts(&format!("n{i}"))
                            },
                        )
                        .await
                        .unwrap();
                    acked.push(n.provider_id);
                }
            }
            match damage {
                "emptied" => drop(std::fs::File::create(&path).unwrap()),
                "deleted" => std::fs::remove_file(&path).unwrap(),
                "cut" => {
                    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                    let len = f.metadata().unwrap().len();
                    f.set_len(len / 2).unwrap();
                }
                _ => std::fs::rename(&copy, &path).unwrap(),
            }
            let fleet = match Fleet::open(rig.host.clone(), &path) {
                Ok(f) => f,
                Err(e) => {
                    // What an operator does with a journal that does not
                    // open: set it aside and start a new one.
                    eprintln!("{damage}: the journal does not open ({e:#}); set aside");
                    std::fs::rename(&path, path.with_extension("damaged")).unwrap();
                    rig.fleet(&path)
                }
            };
            // What the journal still knows is wanted; every other node is
            // an orphan: another journal's, or (a journal that went back
            // in time) its own under generations it no longer knows.
            let known: BTreeSet<String> = fleet
                .intents()
                .unwrap()
                .iter()
                .filter_map(|i| i.provider_id().map(str::to_string))
                .collect();
            let expected: BTreeSet<String> = acked
                .iter()
                .filter(|id| !known.contains(*id))
                .cloned()
                .collect();
            match damage {
                "older" => assert_eq!(expected, acked[5..].iter().cloned().collect()),
                "emptied" | "deleted" => assert_eq!(expected.len(), 10),
                _ => assert!(!expected.is_empty()),
            }
            let kind = if known.is_empty() {
                OrphanKind::Foreign
            } else {
                OrphanKind::Stale
            };
            for pass in 0..3 {
                let report = fleet.reconcile(&ruthless()).await.unwrap();
                destroyed_nothing(&report);
                assert_eq!(
                    orphan_ids(&report),
                    expected,
                    "{damage} pass {pass}: {report}"
                );
                assert!(
                    report.orphans.iter().all(|o| o.kind == kind),
                    "{damage}: {report}"
                );
                assert!(report.held.is_some(), "{damage}: {report}");
                let swept = fleet.expire_leases().await.unwrap();
                assert!(swept.expired.is_empty(), "{swept}");
            }
            assert_eq!(
                rig.alive(),
                acked.iter().cloned().collect::<BTreeSet<_>>(),
                "{damage}"
            );
            let history = fleet.history(100).unwrap();
            assert!(
                history.iter().any(|e| e.kind == EventKind::Held),
                "{damage}: {history:?}"
            );
            assert_eq!(
                history
                    .iter()
                    .filter(|e| e.kind == EventKind::Orphaned)
                    .count(),
                expected.len(),
                "each orphan recorded once: {history:?}"
            );
            // The operator adopts them: the journal is whole again.
            let report = fleet
                .reconcile(&ReconcilePolicy {
                    adopt: true,
                    ..ruthless()
                })
                .await
                .unwrap();
            destroyed_nothing(&report);
            assert_eq!(report.adopted.len(), expected.len(), "{report}");
            // The file alone was restored under a newer mark: what it lost
            // beyond nodes (renewals) is not adopted away; the operator
            // lifts that hold by confirming.
            if let Some(held) = &report.held {
                assert_eq!(damage, "older", "{report}");
                assert!(held.to_string().contains("journal rewound"), "{held}");
                let report = fleet
                    .reconcile(&ReconcilePolicy {
                        confirm_orphans: true,
                        ..ruthless()
                    })
                    .await
                    .unwrap();
                assert!(report.held.is_none(), "{report}");
            }
            let report = fleet.reconcile(&ruthless()).await.unwrap();
            assert!(report.is_clean(), "{damage}: {report}");
            assert_eq!(fleet.intents().unwrap().len(), 10, "{damage}");
            // Adopted under the request ids the nodes carry.
            assert!(
                fleet
                    .intents()
                    .unwrap()
                    .iter()
                    .all(|i| i.request_id.starts_with('n')),
                "{:?}",
                fleet.intents()
            );
        }
    }

    /// A paged list read while servers are deleted misses the ones that
    /// move to pages already read. Reconciles alternating such lists with
    /// whole ones forget nothing and terminate nothing: a node missed by two
    /// lists is looked up before anything is believed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_paged_list_read_mid_change_forgets_and_destroys_nothing() {
        let rig = rig(wasmprov_fake::HetznerFakeOptions {
            page_size_max: 5,
            ..quick()
        })
        .await;
        let state = tempfile::tempdir().unwrap();
        let fleet = rig.fleet(&state.path().join("journal.redb"));
        let mut acked = BTreeSet::new();
        for i in 0..30 {
            let n = fleet
                .provision("hetzner", &shape(), opts(&format!("p{i}")))
                .await
                .unwrap();
            acked.insert(n.provider_id);
        }
        let mut missed_any = false;
        for (pass, shift) in [2, 0, 3, 0, 2, 2, 1, 0].into_iter().enumerate() {
            rig.fake.shift_pages(shift);
            let report = fleet.reconcile(&ruthless()).await.unwrap();
            destroyed_nothing(&report);
            assert!(
                report.leaks.is_empty() && report.suspected.is_empty(),
                "{report}"
            );
            assert!(report.errors.is_empty(), "pass {pass}: {report}");
            let missing = fleet
                .intents()
                .unwrap()
                .iter()
                .filter(|i| i.missing_since_ms.is_some())
                .count();
            missed_any |= missing > 0;
        }
        assert!(missed_any, "the shifted lists missed nodes");
        assert_eq!(rig.alive(), acked);
        assert_eq!(fleet.intents().unwrap().len(), 30);
        rig.fake.shift_pages(0);
        fleet.reconcile(&ruthless()).await.unwrap();
        assert!(
            fleet
                .intents()
                .unwrap()
                .iter()
                .all(|i| i.missing_since_ms.is_none()),
            "a whole list clears every miss"
        );
        // A node really gone is still forgotten: two lists, then get.
        let gone = acked.iter().next().unwrap().clone();
        rig.host
            .plugin("hetzner")
            .unwrap()
            .terminate(&gone)
            .await
            .unwrap();
        let first = fleet.reconcile(&ruthless()).await.unwrap();
        assert!(first.vanished.is_empty(), "{first}");
        let second = fleet.reconcile(&ruthless()).await.unwrap();
        assert_eq!(second.vanished.len(), 1, "{second}");
        assert_eq!(second.vanished[0].1, gone);
        let history = fleet.history(10).unwrap();
        assert!(
            history
                .iter()
                .any(|e| e.kind == EventKind::Vanished && e.reason.contains("get answers no node")),
            "{history:?}"
        );
    }

    /// Two hosts with one owner id and their own journals: each one's most
    /// destructive reconcile leaves the other's nodes alone (orphans of
    /// another journal), and holds until the operator confirms them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_journals_on_one_owner_leave_each_other_alone() {
        let rig = rig(quick()).await;
        let (sa, sb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = rig.fleet(&sa.path().join("journal.redb"));
        let b = rig.fleet(&sb.path().join("journal.redb"));
        assert_ne!(a.journal().identity(), b.journal().identity());
        let mut of_a = BTreeSet::new();
        for i in 0..5 {
            let n = a
                .provision("hetzner", &shape(), opts(&format!("a{i}")))
                .await
                .unwrap();
            of_a.insert(n.provider_id);
        }
        let mut of_b = BTreeSet::new();
        for i in 0..3 {
            let n = b
                .provision("hetzner", &shape(), opts(&format!("b{i}")))
                .await
                .unwrap();
            of_b.insert(n.provider_id);
        }
        for _ in 0..3 {
            let rb = b.reconcile(&ruthless()).await.unwrap();
            destroyed_nothing(&rb);
            assert_eq!(orphan_ids(&rb), of_a, "{rb}");
            assert!(rb.held.is_some(), "{rb}");
            let ra = a.reconcile(&ruthless()).await.unwrap();
            destroyed_nothing(&ra);
            assert_eq!(orphan_ids(&ra), of_b, "{ra}");
        }
        assert_eq!(rig.alive(), &of_a | &of_b);
        // One request id in both journals: b is never answered with a's
        // node (which b could then end), and keeps no intent for it.
        let err = b
            .provision("hetzner", &shape(), opts("a0"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("made by another journal"), "{err}");
        assert!(b.journal().get("a0").unwrap().is_none());
        assert_eq!(rig.alive(), &of_a | &of_b);
        // The operator of b confirms a's nodes as not b's: no longer
        // reported, still never touched, the hold lifted ...
        let rb = b
            .reconcile(&ReconcilePolicy {
                confirm_orphans: true,
                ..ruthless()
            })
            .await
            .unwrap();
        assert!(rb.held.is_none(), "{rb}");
        let rb = b.reconcile(&ruthless()).await.unwrap();
        assert!(rb.is_clean(), "{rb}");
        // ... until a makes another node: b holds again.
        let n = a.provision("hetzner", &shape(), opts("a9")).await.unwrap();
        let rb = b.reconcile(&ruthless()).await.unwrap();
        assert_eq!(orphan_ids(&rb), BTreeSet::from([n.provider_id.clone()]));
        assert!(rb.held.is_some(), "{rb}");
        of_a.insert(n.provider_id);
        // A hold keeps b from shrinking its own group too.
        let group = CapacityGroup::new("bg", shape(), 0, 5);
        let grown = b.scale(&group, 2).await.unwrap();
        assert!(grown.converged(), "{grown}");
        let shrunk = b.scale(&group, 0).await.unwrap();
        assert!(!shrunk.converged(), "{shrunk}");
        assert!(shrunk.errors[0].contains("not shrinking"), "{shrunk}");
        assert!(of_a.is_subset(&rig.alive()) && of_b.is_subset(&rig.alive()));
    }

    /// Nodes of another owner (or of none) in a backend's answers are
    /// dropped and counted at the fleet's boundary, native backends alike:
    /// never reconciled, never terminated; a `get` answering another
    /// owner's node is no answer, so the node it was asked for is kept.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn answers_of_another_owner_are_dropped_not_reconciled() {
        let rig = rig(quick()).await;
        let spoiled = Spoiled::new(rig.host.plugin("hetzner").unwrap());
        let set = BackendSet::new()
            .with_owner(OWNER)
            .with("hetzner", spoiled.clone());
        let state = tempfile::tempdir().unwrap();
        let fleet = Fleet::open(Arc::new(set), state.path().join("journal.redb")).unwrap();
        let mut acked = Vec::new();
        for i in 0..3 {
            acked.push(
                fleet
                    .provision("hetzner", &shape(), opts(&format!("f{i}")))
                    .await
                    .unwrap(),
            );
        }
        // Real servers of another owner and of none, and an answer that
        // names them: what an adapter over an unscoped backend lists.
        let other = rig
            .fake
            .plant(
                "other-1",
                &BTreeMap::from([(provenance::OWNER_LABEL.into(), "someone-else".into())]),
            )
            .unwrap()
            .to_string();
        let outside = rig
            .fake
            .plant("outside-1", &BTreeMap::new())
            .unwrap()
            .to_string();
        spoiled.extra.lock().unwrap().extend([
            node_of(Some("someone-else"), &other),
            node_of(None, &outside),
        ]);
        // One acknowledged node missing from the lists, and its lookup
        // answered with another owner's node.
        let hidden = acked[0].provider_id.clone();
        spoiled.hidden.lock().unwrap().insert(hidden.clone());
        spoiled.foreign_get.lock().unwrap().insert(hidden.clone());
        for _ in 0..3 {
            let report = fleet.reconcile(&ruthless()).await.unwrap();
            destroyed_nothing(&report);
            assert_eq!(
                report.foreign_answers,
                [("hetzner".to_string(), 2)],
                "{report}"
            );
            assert!(
                report.orphans.is_empty() && report.leaks.is_empty(),
                "{report}"
            );
        }
        let alive = rig.alive();
        for id in [&other, &outside, &hidden] {
            assert!(alive.contains(id), "{id} destroyed");
        }
        assert!(
            fleet
                .intents()
                .unwrap()
                .iter()
                .any(|i| i.provider_id() == Some(hidden.as_str()))
        );
        let report = fleet.reconcile(&ruthless()).await.unwrap();
        assert!(
            report.errors.iter().any(|e| e.contains("another owner")),
            "{report}"
        );
        // Repeating the hidden node's request asks get, not provision.
        let before = spoiled.provisions.load(SeqCst);
        let err = fleet
            .provision("hetzner", &shape(), opts("f0"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("another owner"), "{err}");
        assert_eq!(spoiled.provisions.load(SeqCst), before);
    }

    /// Lists and `get` that say an acknowledged node is gone when it is not
    /// (a wrong endpoint or token, an outage, a relabelled node): the
    /// intent is forgotten, but the node listed again is an orphan that
    /// holds the journal, never a leak; adopting it brings it back.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_node_forgotten_on_wrong_answers_is_never_a_leak_when_it_returns() {
        let rig = rig(quick()).await;
        let spoiled = Spoiled::new(rig.host.plugin("hetzner").unwrap());
        let set = BackendSet::new()
            .with_owner(OWNER)
            .with("hetzner", spoiled.clone());
        let state = tempfile::tempdir().unwrap();
        let fleet = Fleet::open(Arc::new(set), state.path().join("journal.redb")).unwrap();
        let node = fleet
            .provision("hetzner", &shape(), opts("back-1"))
            .await
            .unwrap();
        let id = node.provider_id.clone();
        spoiled.hidden.lock().unwrap().insert(id.clone());
        spoiled.absent.lock().unwrap().insert(id.clone());
        fleet.reconcile(&ruthless()).await.unwrap();
        let report = fleet.reconcile(&ruthless()).await.unwrap();
        assert_eq!(report.vanished.len(), 1, "{report}");
        assert!(fleet.intents().unwrap().is_empty());
        // The answers are right again: the node is back.
        spoiled.hidden.lock().unwrap().clear();
        spoiled.absent.lock().unwrap().clear();
        for _ in 0..3 {
            let report = fleet.reconcile(&ruthless()).await.unwrap();
            destroyed_nothing(&report);
            assert!(
                report.leaks.is_empty() && report.suspected.is_empty(),
                "{report}"
            );
            assert_eq!(
                orphan_ids(&report),
                BTreeSet::from([id.clone()]),
                "{report}"
            );
            assert_eq!(report.orphans[0].kind, OrphanKind::Returned);
            let held = report.held.as_ref().expect("held");
            assert!(held.to_string().contains("node returned"), "{held}");
        }
        assert!(rig.alive().contains(&id));
        let report = fleet
            .reconcile(&ReconcilePolicy {
                adopt: true,
                ..ruthless()
            })
            .await
            .unwrap();
        assert_eq!(
            report.adopted,
            [("back-1".to_string(), id.clone())],
            "{report}"
        );
        let report = fleet.reconcile(&ruthless()).await.unwrap();
        assert!(report.is_clean(), "{report}");
    }

    /// Two manifests reaching one cloud (a renamed manifest beside the old
    /// one, a second region with the same token): each lists the other's
    /// nodes, and none is ever taken for a leak.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_manifests_for_one_cloud_take_nothing_for_a_leak() {
        let rig = rig(quick()).await;
        let grant = rig.fake.url().trim_end_matches("/v1").to_string();
        rig._dir.add(
            "hcloud",
            guests::HETZNER,
            &format!(
                "[config]\nendpoint = \"{}\"\nlocation = \"nbg1\"\n[secrets]\ntoken = {{ env = \"HCLOUD_TOKEN\" }}\n[http]\nallow = [\"{grant}\"]\n",
                rig.fake.url()
            ),
        );
        rig.host.reload().await.unwrap();
        assert_eq!(rig.host.plugin_names(), ["hcloud", "hetzner"]);
        let state = tempfile::tempdir().unwrap();
        let fleet = rig.fleet(&state.path().join("journal.redb"));
        let mut acked = BTreeSet::new();
        for (i, plugin) in ["hetzner", "hcloud", "hetzner", "hcloud"]
            .iter()
            .enumerate()
        {
            let n = fleet
                .provision(plugin, &shape(), opts(&format!("two-{i}")))
                .await
                .unwrap();
            acked.insert(n.provider_id);
        }
        for _ in 0..3 {
            let report = fleet.reconcile(&ruthless()).await.unwrap();
            destroyed_nothing(&report);
            assert!(
                report.leaks.is_empty() && report.suspected.is_empty(),
                "{report}"
            );
        }
        assert_eq!(rig.alive(), acked);
    }

    /// A backend whose create answers with another node of this journal
    /// (another request's): refused as a conflict, never recorded.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_answer_naming_another_node_is_not_taken() {
        let rig = rig(quick()).await;
        let spoiled = Spoiled::new(rig.host.plugin("hetzner").unwrap());
        let set = BackendSet::new()
            .with_owner(OWNER)
            .with("hetzner", spoiled.clone());
        let state = tempfile::tempdir().unwrap();
        let fleet = Fleet::open(Arc::new(set), state.path().join("journal.redb")).unwrap();
        let r2 = fleet
            .provision("hetzner", &shape(), opts("r2"))
            .await
            .unwrap();
        *spoiled.answer.lock().unwrap() = Some(r2.clone());
        let err = fleet
            .provision("hetzner", &shape(), opts("r1"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("made for request \"r2\""), "{err}");
        assert!(fleet.journal().get("r1").unwrap().is_none());
        // The same node relabelled as r1's, but born for r2's intent.
        let mut forged = r2.clone();
        forged
            .labels
            .insert(provenance::REQUEST_LABEL.into(), "r3".into());
        *spoiled.answer.lock().unwrap() = Some(forged);
        let err = fleet
            .provision("hetzner", &shape(), opts("r3"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("another intent"), "{err}");
        *spoiled.answer.lock().unwrap() = None;
        let report = fleet.reconcile(&ruthless()).await.unwrap();
        destroyed_nothing(&report);
        assert!(rig.alive().contains(&r2.provider_id));
    }

    /// The lease sweep ends a lease only once a reconcile listed its
    /// plugin's cloud since the journal was opened (so that what the lists
    /// show, a hold, had its chance).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_lease_sweep_waits_for_a_list() {
        let rig = rig(quick()).await;
        let state = tempfile::tempdir().unwrap();
        let path = state.path().join("journal.redb");
        {
            let fleet = rig.fleet(&path);
            fleet
                .provision(
                    "hetzner",
                    &shape(),
                    ProvisionOptions {
                        lease: Some(Duration::from_millis(1)),
                        ..opts("short")
                    },
                )
                .await
                .unwrap();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let fleet = rig.fleet(&path);
        let swept = fleet.expire_leases().await.unwrap();
        assert!(swept.expired.is_empty(), "{swept}");
        assert!(
            swept.held_back[0].contains("no reconcile has listed"),
            "{swept}"
        );
        assert_eq!(rig.alive().len(), 1);
        let report = fleet.reconcile(&ruthless()).await.unwrap();
        assert_eq!(report.expired.len(), 1, "{report}");
    }

    /// A journal serves the owner id it was first used with: a host run
    /// under another one (a changed host name, a forgotten --owner) is
    /// refused instead of finding every node gone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_journal_refuses_another_owner_id() {
        let rig = rig(quick()).await;
        let state = tempfile::tempdir().unwrap();
        let path = state.path().join("journal.redb");
        {
            let fleet = rig.fleet(&path);
            fleet
                .provision("hetzner", &shape(), opts("own-1"))
                .await
                .unwrap();
        }
        let other = HostBuilder::new(rig._dir.path())
            .owner_id("someone-else")
            .cache_dir(cache())
            .secret_source(|name| {
                (name == "HCLOUD_TOKEN").then(|| "fake-hetzner-token".to_string())
            })
            .build()
            .await
            .unwrap();
        let err = Fleet::open(Arc::new(other), &path).unwrap_err();
        assert!(
            err.to_string().contains("serves owner id \"proof-owner\""),
            "{err:#}"
        );
        // The journal and the node are as they were.
        let fleet = rig.fleet(&path);
        let report = fleet.reconcile(&ruthless()).await.unwrap();
        assert!(report.is_clean(), "{report}");
        assert_eq!(rig.alive().len(), 1);
    }

    /// A wasm plugin whose describe lists every node of the account and
    /// whose get answers any of them: the host drops the others' nodes from
    /// the list (a contract fault, counted), and a get of one is a contract
    /// fault, never an answer.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_plugin_answering_other_owners_nodes_is_refused_at_the_host() {
        let fake = wasmprov_fake::refcloud::RefCloudFake::start(
            "127.0.0.1:0".parse().unwrap(),
            wasmprov_fake::refcloud::RefCloudFakeOptions::default(),
        )
        .await
        .unwrap();
        let token = fake.token().to_string();
        let dir = PluginDir::new();
        dir.add(
            "buggy",
            guests::BUGGY_REFCLOUD,
            &format!(
                "[config]\nendpoint = \"{}\"\nbug = \"foreign-in-describe\"\n[secrets]\ntoken = {{ env = \"REFCLOUD_TOKEN\" }}\n[http]\nallow = [\"{}\"]\n",
                fake.url(),
                fake.url().trim_end_matches("/v1")
            ),
        );
        let host = HostBuilder::new(dir.path())
            .owner_id(OWNER)
            .cache_dir(cache())
            .secret_source(move |name| (name == "REFCLOUD_TOKEN").then(|| token.clone()))
            .build()
            .await
            .unwrap();
        assert!(host.errors().is_empty(), "{:?}", host.errors());
        let p = host.wasm_plugin("buggy").unwrap();
        let mine = p
            .provision_request(&ProvisionRequest::new("mine-1", shape()))
            .await
            .unwrap();
        let theirs = fake.plant(BTreeMap::from([(
            provenance::OWNER_LABEL.to_string(),
            "someone-else".to_string(),
        )]));
        let listed = p.describe().await.unwrap();
        let listed: Vec<&str> = listed.iter().map(|n| n.provider_id.as_str()).collect();
        assert_eq!(listed, [mine.provider_id.as_str()]);
        assert_eq!(p.foreign_answers(), 1);
        match p.get(&theirs).await {
            Err(ProvisionerError::Plugin { fault, message, .. }) => {
                assert_eq!(fault, wasmprov_api::PluginFault::Contract);
                assert!(message.contains("owner"), "{message}");
            }
            other => panic!("get of another owner's node: {other:?}"),
        }
        let metrics = host.metrics().encode();
        assert!(
            metrics.contains("wasmprov_faults_total{plugin=\"buggy\",fault=\"contract\"}"),
            "{metrics}"
        );
    }

    /// A native backend without a lookup of its own makes a node per call:
    /// a repeated request whose intent is active is answered from `get`,
    /// and the backend is not asked again (neither after the node is gone).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_repeated_request_is_answered_without_a_second_create() {
        #[derive(Default)]
        struct Forgetful {
            nodes: Mutex<BTreeMap<String, NodeHandle>>,
            creates: AtomicUsize,
        }
        #[async_trait::async_trait]
        impl CloudProvisioner for Forgetful {
            async fn provision(&self, shape: &NodeShape) -> wasmprov_api::Result<NodeHandle> {
                let n = self.creates.fetch_add(1, SeqCst) + 1;
                let mut node = NodeHandle::new(format!("m-{n}"), JoinState::Joined);
                node.labels = shape.labels.clone();
                self.nodes
                    .lock()
                    .unwrap()
                    .insert(node.provider_id.clone(), node.clone());
                Ok(node)
            }
            async fn terminate(&self, id: &String) -> wasmprov_api::Result<()> {
                match self.nodes.lock().unwrap().remove(id) {
                    Some(_) => Ok(()),
                    None => Err(ProvisionerError::NotFound(id.clone())),
                }
            }
            async fn describe(&self) -> wasmprov_api::Result<Vec<NodeHandle>> {
                Ok(self.nodes.lock().unwrap().values().cloned().collect())
            }
            fn capacity_types(&self) -> &[CapacityType] {
                &[CapacityType::OnDemand]
            }
            fn price_hint(&self, _: &NodeShape) -> Option<PriceHint> {
                None
            }
            fn name(&self) -> &str {
                "mem"
            }
        }
        let mem = Arc::new(Forgetful::default());
        let set = BackendSet::new().with_owner(OWNER).with("mem", mem.clone());
        let state = tempfile::tempdir().unwrap();
        let fleet = Fleet::open(Arc::new(set), state.path().join("journal.redb")).unwrap();
        let lease = |s| ProvisionOptions {
            lease: Some(Duration::from_secs(s)),
            ..opts("once")
        };
        let a = fleet.provision("mem", &shape(), lease(3600)).await.unwrap();
        // The node carries this owner and its provenance.
        assert_eq!(
            a.labels.get(provenance::OWNER_LABEL).map(String::as_str),
            Some(OWNER)
        );
        let p = provenance::Provenance::of(&a).expect("provenance");
        assert_eq!(p.journal, fleet.journal().identity());
        for _ in 0..3 {
            let b = fleet.provision("mem", &shape(), lease(3600)).await.unwrap();
            assert_eq!(a.provider_id, b.provider_id);
        }
        assert_eq!(mem.creates.load(SeqCst), 1);
        // Another lease for the same request is a conflict; renewing is
        // explicit.
        let err = fleet
            .provision("mem", &shape(), lease(60))
            .await
            .unwrap_err();
        assert!(matches!(err, FleetError::LeaseConflict { .. }), "{err}");
        assert_eq!(mem.creates.load(SeqCst), 1);
        let report = fleet.reconcile(&ruthless()).await.unwrap();
        assert!(report.is_clean(), "{report}");
        // Gone out of band: the repeated request says so, makes nothing.
        mem.nodes.lock().unwrap().clear();
        let err = fleet
            .provision("mem", &shape(), lease(3600))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no longer exists"), "{err}");
        assert_eq!(mem.creates.load(SeqCst), 1);
        // A caller's shape cannot carry the host's labels.
        let mut forged = shape();
        forged
            .labels
            .insert(provenance::JOURNAL_LABEL.into(), p.label_value());
        let err = fleet
            .provision("mem", &forged, opts("forged"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("set by the host"), "{err}");
    }

    /// Failures before anything left the host made nothing: a refused
    /// connection, a name that does not resolve, a failed TLS handshake,
    /// a request the policy denied. The fleet forgets them at once and a
    /// group is short by exactly them; a request that reached the cloud
    /// before the connection broke is kept as maybe-made.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failures_before_anything_left_the_host_made_nothing() {
        let closed = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        // Answers plain HTTP, at once, where TLS is expected.
        let plain = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let plain_port = plain.local_addr().unwrap().port();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            while let Ok((mut s, _)) = plain.accept().await {
                let _ = s
                    .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n")
                    .await;
                drop(s);
            }
        });
        // Reads a request and hangs up without answering.
        let rude = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let rude_port = rude.local_addr().unwrap().port();
        tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            while let Ok((mut s, _)) = rude.accept().await {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                drop(s);
            }
        });
        let cases = [
            (
                "refused",
                format!("http://127.0.0.1:{closed}/v1"),
                format!("http://127.0.0.1:{closed}"),
                true,
            ),
            (
                "dns",
                "http://nowhere.invalid/v1".to_string(),
                "http://nowhere.invalid".to_string(),
                true,
            ),
            (
                "tls",
                format!("https://127.0.0.1:{plain_port}/v1"),
                format!("https://127.0.0.1:{plain_port}"),
                true,
            ),
            (
                "denied",
                format!("http://127.0.0.1:{closed}/v1"),
                "http://127.0.0.2:1".to_string(),
                true,
            ),
            (
                "reset",
                format!("http://127.0.0.1:{rude_port}/v1"),
                format!("http://127.0.0.1:{rude_port}"),
                false,
            ),
        ];
        for (what, endpoint, grant, nothing) in cases {
            let fake = wasmprov_fake::HetznerFake::start("127.0.0.1:0".parse().unwrap(), quick())
                .await
                .unwrap();
            let rig = rig_at(fake, &endpoint, &grant).await;
            let state = tempfile::tempdir().unwrap();
            let fleet = rig.fleet(&state.path().join("journal.redb"));
            let err = fleet
                .provision("hetzner", &shape(), opts("x1"))
                .await
                .unwrap_err();
            let FleetError::Provisioner(e) = &err else {
                panic!("{what}: {err}");
            };
            let group = CapacityGroup::new("g", shape(), 0, 3);
            let scaled = fleet.scale(&group, 1).await.unwrap();
            if nothing {
                // Denied by policy is the plugin's configuration's fault
                // (invalid_config); the others are not_sent.
                let kind = if what == "denied" {
                    "invalid_config"
                } else {
                    "not_sent"
                };
                assert_eq!(e.kind(), kind, "{what}: {e}");
                assert!(e.made_nothing());
                assert!(fleet.intents().unwrap().is_empty(), "{what}");
                assert_eq!(scaled.after, 0, "{what}: {scaled}");
                assert!(!scaled.converged(), "{what}: {scaled}");
            } else {
                assert_ne!(e.kind(), "not_sent", "{what}: {e}");
                let intents = fleet.intents().unwrap();
                assert!(
                    intents
                        .iter()
                        .any(|i| i.request_id == "x1" && i.last_error.is_some()),
                    "{what}: {intents:?}"
                );
            }
        }
    }

    /// A journal on a filesystem that fills up: a provision fails with a
    /// journal error (before the cloud is asked, or after it answered, with
    /// the intent written before it was asked naming the node), and the
    /// fleet says it is unhealthy; once space is back the journal is
    /// reopened by itself, provisions work again and reconcile confirms
    /// every node made: none is left unnamed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_journal_that_cannot_write_serves_nothing_until_it_can() {
        let Some(disk) = wasmprov_tests::SmallDisk::mount(2 << 20) else {
            return;
        };
        let rig = rig(quick()).await;
        let fleet = rig.fleet(&disk.path().join("journal.redb"));
        fleet
            .provision("hetzner", &shape(), opts("before"))
            .await
            .unwrap();
        assert!(fleet.healthy());
        // Each attempt on a full disk either fails before the cloud is
        // asked (and the fleet says it is unhealthy) or, when the journal
        // found room in its own file, is journaled like any other.
        let mut failed = 0;
        for i in 0..5 {
            // (A failed write may give space back: fill up again.)
            disk.fill();
            let id = format!("full{i}");
            match fleet.provision("hetzner", &shape(), opts(&id)).await {
                Err(err) => {
                    failed += 1;
                    assert!(matches!(err, FleetError::Journal(_)), "{err}");
                    assert!(!fleet.healthy());
                    // Failed before the cloud was asked, or after it
                    // answered: then the intent written before it was
                    // asked names the node, and reconcile confirms it.
                    let asked = rig
                        .fake
                        .servers()
                        .iter()
                        .any(|s| s.labels.get(provenance::REQUEST_LABEL) == Some(&id));
                    if asked {
                        let intent = fleet.journal().get(&id).unwrap();
                        assert!(intent.is_some(), "{id}: a node no intent names");
                    }
                }
                Ok(node) => {
                    let intent = fleet.journal().get(&id).unwrap().unwrap();
                    assert_eq!(intent.provider_id(), Some(node.provider_id.as_str()));
                }
            }
        }
        assert!(failed > 0, "a full disk failed no journal write");
        disk.free();
        fleet.check_journal().unwrap();
        assert!(fleet.healthy());
        fleet
            .provision("hetzner", &shape(), opts("after"))
            .await
            .unwrap();
        let report = fleet.reconcile(&ruthless()).await.unwrap();
        destroyed_nothing(&report);
        assert!(
            fleet
                .intents()
                .unwrap()
                .iter()
                .all(|i| matches!(i.state, IntentState::Active { .. })),
            "{report}"
        );
        let ids: BTreeSet<String> = fleet
            .intents()
            .unwrap()
            .into_iter()
            .map(|i| i.request_id)
            .collect();
        let made: BTreeSet<String> = rig
            .fake
            .servers()
            .iter()
            .filter_map(|s| s.labels.get(provenance::REQUEST_LABEL).cloned())
            .collect();
        assert_eq!(ids, made, "every node made is journaled, nothing else");
        assert!(ids.contains("after") && ids.contains("before"));
    }

    /// Every termination is in the history before the cloud is asked and
    /// completed after, so one cut short (a crash mid-call) still leaves a
    /// record, which the reconcile that finishes it completes; renewals
    /// are explicit and recorded.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn terminations_and_renewals_are_in_the_history() {
        let rig = rig(wasmprov_fake::HetznerFakeOptions {
            response_delay: Duration::from_millis(600),
            ..quick()
        })
        .await;
        let state = tempfile::tempdir().unwrap();
        let fleet = Arc::new(rig.fleet(&state.path().join("journal.redb")));
        let leased = |id: &str, s| ProvisionOptions {
            lease: Some(Duration::from_millis(s)),
            ..opts(id)
        };
        let a = fleet
            .provision("hetzner", &shape(), opts("a"))
            .await
            .unwrap();
        // (The sweep ends leases once a reconcile listed the cloud.)
        fleet.reconcile(&ruthless()).await.unwrap();
        let b = fleet
            .provision("hetzner", &shape(), leased("b", 300))
            .await
            .unwrap();
        let c = fleet
            .provision("hetzner", &shape(), leased("c", 3_600_000))
            .await
            .unwrap();
        // Renewed before it runs out: the sweep leaves it.
        let renewed = fleet.renew("b", Duration::from_secs(3600)).await.unwrap();
        assert!(renewed.expires_ms.unwrap() > wasmprov_fleet::journal::now_ms() + 3_000_000);
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert!(fleet.expire_leases().await.unwrap().expired.is_empty());
        // Renewing is the journal's: an unknown request id is refused.
        assert!(matches!(
            fleet.renew("nope", Duration::from_secs(1)).await,
            Err(FleetError::NotJournaled(_))
        ));
        // An explicit termination, cut short while the cloud answers.
        let cut = tokio::spawn({
            let fleet = fleet.clone();
            let id = a.provider_id.clone();
            async move { fleet.terminate("hetzner", &id).await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        cut.abort();
        let _ = cut.await;
        // A lease expiry cut short the same way.
        fleet.renew("c", Duration::from_millis(1)).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        let sweep = tokio::spawn({
            let fleet = fleet.clone();
            async move { fleet.expire_leases().await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        sweep.abort();
        let _ = sweep.await;
        let history = fleet.history(20).unwrap();
        let started: Vec<(EventKind, Option<String>)> = history
            .iter()
            .filter(|e| e.status == EventStatus::Started)
            .map(|e| (e.kind, e.provider_id.clone()))
            .collect();
        assert_eq!(
            started,
            [
                (EventKind::Terminated, Some(a.provider_id.clone())),
                (EventKind::LeaseExpired, Some(c.provider_id.clone())),
            ],
            "{history:?}"
        );
        assert_eq!(
            history
                .iter()
                .filter(|e| e.kind == EventKind::LeaseRenewed)
                .count(),
            2
        );
        // The next reconcile finishes both and completes their entries.
        let report = fleet.reconcile(&ruthless()).await.unwrap();
        assert_eq!(report.terminated.len(), 2, "{report}");
        let history = fleet.history(20).unwrap();
        for id in [&a.provider_id, &c.provider_id] {
            let e = history
                .iter()
                .find(|e| e.provider_id.as_ref() == Some(id) && e.kind != EventKind::LeaseRenewed)
                .unwrap();
            assert_eq!(e.status, EventStatus::Done, "{e:?}");
            assert!(e.completed_ms.is_some());
        }
        // An explicit termination that runs to its end is recorded too.
        fleet.terminate("hetzner", &b.provider_id).await.unwrap();
        let last = fleet.history(1).unwrap().pop().unwrap();
        assert_eq!(
            (last.kind, last.status, last.provider_id),
            (
                EventKind::Terminated,
                EventStatus::Done,
                Some(b.provider_id)
            )
        );
        assert!(rig.alive().is_empty());
    }

    /// Draining: calls in flight finish and new ones are refused; a
    /// provision still running at the deadline is marked cut short, so the
    /// next start confirms its node if the cloud made it and otherwise
    /// forgets it, and never makes one.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_drain_finishes_calls_and_marks_the_rest_cut_short() {
        let rig = rig(wasmprov_fake::HetznerFakeOptions {
            response_delay: Duration::from_millis(800),
            ..quick()
        })
        .await;
        let state = tempfile::tempdir().unwrap();
        let path = state.path().join("journal.redb");
        {
            let fleet = Arc::new(rig.fleet(&path));
            let calls: Vec<_> = (0..8)
                .map(|i| {
                    let fleet = fleet.clone();
                    tokio::spawn(async move {
                        fleet
                            .provision("hetzner", &shape(), opts(&format!("d{i}")))
                            .await
                    })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(200)).await;
            let drained = fleet.drain(Duration::from_secs(20)).await.unwrap();
            assert!(drained.drained, "{drained:?}");
            for c in calls {
                c.await.unwrap().unwrap();
            }
            assert!(matches!(
                fleet.provision("hetzner", &shape(), opts("late")).await,
                Err(FleetError::Closing)
            ));
        }
        assert_eq!(rig.alive().len(), 8);
        {
            let fleet = Arc::new(rig.fleet(&path));
            let calls: Vec<_> = (0..6)
                .map(|i| {
                    let fleet = fleet.clone();
                    tokio::spawn(async move {
                        fleet
                            .provision("hetzner", &shape(), opts(&format!("e{i}")))
                            .await
                    })
                })
                .collect();
            tokio::time::sleep(Duration::from_millis(300)).await;
            let drained = fleet.drain(Duration::from_millis(50)).await.unwrap();
            assert!(!drained.drained, "{drained:?}");
            assert!(!drained.cut_short.is_empty(), "{drained:?}");
            // The process ends here: the calls are dropped.
            for c in calls {
                c.abort();
                let _ = c.await;
            }
        }
        let made = rig.alive().len();
        let fleet = rig.fleet(&path);
        for _ in 0..3 {
            let report = fleet.reconcile(&ruthless()).await.unwrap();
            assert!(
                report.resumed.is_empty(),
                "cut short is never asked again: {report}"
            );
        }
        assert_eq!(rig.alive().len(), made, "no node made after the stop");
        let states: Vec<bool> = fleet
            .intents()
            .unwrap()
            .iter()
            .map(|i| matches!(i.state, IntentState::Active { .. }))
            .collect();
        assert_eq!(
            states.len(),
            made,
            "every node made is wanted, nothing else"
        );
        assert!(states.iter().all(|a| *a));
    }
}

/// Randomized cases of everything above at once: journals emptied,
/// deleted, cut, restored from an older copy, on a disk that fills up;
/// lists missing nodes between pages; answers naming other owners' nodes;
/// a second host with the same owner id; leaks that are real. The most
/// destructive reconciles and lease sweeps run over each, and no node any
/// caller was told exists is ever destroyed; every orphan that should be
/// reported is; a real leak is terminated once no hold stands.
///
/// `WASMPROV_DAMAGE_SEED` replays a run; `WASMPROV_DAMAGE_CASES` sets how
/// many cases (default 240).
mod damage {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum JournalDamage {
        None,
        Emptied,
        Deleted,
        Cut,
        Older,
    }

    #[derive(Debug)]
    struct Case {
        journal: JournalDamage,
        shifted: bool,
        foreign: bool,
        second_host: bool,
        full_disk: bool,
        real_leak: bool,
        /// Lists and `get` say an acknowledged node is gone, for two passes.
        lying: bool,
    }

    impl Case {
        fn draw(rng: &mut StdRng, disk: bool) -> Self {
            let journal = match rng.random_range(0..6) {
                0 => JournalDamage::Emptied,
                1 => JournalDamage::Deleted,
                2 => JournalDamage::Cut,
                3 => JournalDamage::Older,
                _ => JournalDamage::None,
            };
            Self {
                journal,
                shifted: rng.random_bool(0.4),
                foreign: rng.random_bool(0.3),
                second_host: rng.random_bool(0.25),
                full_disk: disk && rng.random_bool(0.15),
                real_leak: rng.random_bool(0.3),
                lying: rng.random_bool(0.25),
            }
        }
    }

    /// What one case saw: the counts are summed over the run.
    #[derive(Debug, Default)]
    struct Seen {
        acked: usize,
        orphans_expected: usize,
        leaks_terminated: usize,
        journal_failures: usize,
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn randomized_damage_destroys_no_acknowledged_node() {
        let seed: u64 = std::env::var("WASMPROV_DAMAGE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(rand::random);
        let cases: usize = std::env::var("WASMPROV_DAMAGE_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(240);
        eprintln!("damage: seed {seed} ({cases} cases; WASMPROV_DAMAGE_SEED={seed} replays it)");
        let mut rng = StdRng::seed_from_u64(seed);
        let rig = rig(wasmprov_fake::HetznerFakeOptions {
            page_size_max: 3,
            ..quick()
        })
        .await;
        let disk = wasmprov_tests::SmallDisk::mount(16 << 20);
        let started = std::time::Instant::now();
        let mut total = Seen::default();
        for n in 0..cases {
            let case = Case::draw(&mut rng, disk.is_some());
            let case_seed = rng.random();
            let seen = run_case(&rig, disk.as_ref(), n, &case, case_seed)
                .await
                .unwrap_or_else(|e| panic!("case {n} {case:?} (seed {seed}): {e}"));
            total.acked += seen.acked;
            total.orphans_expected += seen.orphans_expected;
            total.leaks_terminated += seen.leaks_terminated;
            total.journal_failures += seen.journal_failures;
            // The next case starts from an empty cloud.
            let p = rig.host.plugin("hetzner").unwrap();
            rig.fake.shift_pages(0);
            for s in rig.fake.servers() {
                // (Planted servers of another owner are refused: they stay,
                // out of every later case's sight.)
                let _ = p.terminate(&s.id.to_string()).await;
            }
        }
        eprintln!(
            "damage: {cases} cases in {:.1} s: {} acknowledged nodes, none destroyed; {} orphans reported as expected; {} real leaks terminated; {} journal writes refused on a full disk",
            started.elapsed().as_secs_f64(),
            total.acked,
            total.orphans_expected,
            total.leaks_terminated,
            total.journal_failures,
        );
        assert!(total.acked > cases, "cases made nodes");
        assert!(
            total.leaks_terminated > 0,
            "real leaks are still terminated"
        );
    }

    async fn run_case(
        rig: &Rig,
        disk: Option<&wasmprov_tests::SmallDisk>,
        n: usize,
        case: &Case,
        seed: u64,
    ) -> Result<Seen, String> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut seen = Seen::default();
        let local = tempfile::tempdir().unwrap();
        let dir = match (case.full_disk, disk) {
            (true, Some(d)) => d.path().join(format!("case-{n}")),
            _ => local.path().to_path_buf(),
        };
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("journal.redb");
        let copy = dir.join("older.redb");
        let spoiled = Spoiled::new(rig.host.plugin("hetzner").unwrap());
        let set = Arc::new(
            BackendSet::new()
                .with_owner(OWNER)
                .with("hetzner", spoiled.clone()),
        );
        let open = |p: &std::path::Path| Fleet::open(set.clone(), p);
        let mut acked: BTreeSet<String> = BTreeSet::new();
        let mut by_a: Vec<String> = Vec::new();
        let mut next = 0usize;
        let mut id = |who: &str| {
            next += 1;
            format!("c{n}-{who}{next}")
        };
        let provision = async |fleet: &Fleet, id: String, lease: bool| {
            let options = ProvisionOptions {
                lease: lease.then_some(Duration::from_secs(3600)),
                ..opts(&id)
            };
            fleet.provision("hetzner", &shape(), options).await
        };

        // A makes a few nodes; an older copy may be taken on the way.
        let first = rng.random_range(1..=5);
        let copy_at = rng.random_range(0..first);
        let mut after_copy = BTreeSet::new();
        let mut leaked = None;
        {
            let a = open(&path).map_err(|e| format!("{e:#}"))?;
            for i in 0..first {
                if case.journal == JournalDamage::Older && i == copy_at {
                    std::fs::copy(&path, &copy).unwrap();
                }
                let node = provision(&a, id("a"), rng.random_bool(0.3))
                    .await
                    .map_err(|e| e.to_string())?;
                if case.journal == JournalDamage::Older && i >= copy_at {
                    after_copy.insert(node.provider_id.clone());
                }
                acked.insert(node.provider_id.clone());
                by_a.push(node.provider_id);
            }
            if case.real_leak {
                let rid = id("leak");
                let node = provision(&a, rid.clone(), false)
                    .await
                    .map_err(|e| e.to_string())?;
                a.journal().remove(&rid).unwrap();
                leaked = Some(node.provider_id);
            }
            if case.second_host {
                let state_b = tempfile::tempdir().unwrap();
                let b = open(&state_b.path().join("journal.redb")).map_err(|e| format!("{e:#}"))?;
                for _ in 0..rng.random_range(1..=3) {
                    let node = provision(&b, id("b"), false)
                        .await
                        .map_err(|e| e.to_string())?;
                    acked.insert(node.provider_id);
                }
                // b reconciles too, the most destructive way.
                for _ in 0..2 {
                    let r = b
                        .reconcile(&ruthless())
                        .await
                        .map_err(|e| format!("{e:#}"))?;
                    no_acked_destroyed(&r, &acked, &BTreeSet::new())?;
                }
            }
        }
        let journal_lost = match case.journal {
            JournalDamage::None => false,
            JournalDamage::Emptied => {
                drop(std::fs::File::create(&path).unwrap());
                true
            }
            JournalDamage::Deleted => {
                std::fs::remove_file(&path).unwrap();
                true
            }
            JournalDamage::Cut => {
                let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                let len = f.metadata().unwrap().len();
                f.set_len(rng.random_range(0..len.max(1))).unwrap();
                true
            }
            JournalDamage::Older => {
                std::fs::rename(&copy, &path).unwrap();
                true
            }
        };
        let a = match open(&path) {
            Ok(f) => f,
            Err(_) => {
                std::fs::rename(&path, path.with_extension("damaged")).unwrap();
                open(&path).map_err(|e| format!("{e:#}"))?
            }
        };
        let known: BTreeSet<String> = a
            .intents()
            .unwrap()
            .iter()
            .filter_map(|i| i.provider_id().map(str::to_string))
            .collect();
        if case.foreign {
            let other = rig
                .fake
                .plant(
                    &format!("c{n}-other"),
                    &BTreeMap::from([(provenance::OWNER_LABEL.into(), "someone-else".into())]),
                )
                .unwrap()
                .to_string();
            spoiled.extra.lock().unwrap().extend([
                node_of(Some("someone-else"), &other),
                node_of(None, &format!("c{n}-nobody")),
            ]);
            if let Some(victim) = by_a.first() {
                spoiled.foreign_get.lock().unwrap().insert(victim.clone());
                if rng.random_bool(0.5) {
                    spoiled.hidden.lock().unwrap().insert(victim.clone());
                }
            }
        }
        let liar_victim = if case.lying {
            let v = by_a.last().cloned();
            if let Some(v) = &v {
                spoiled.hidden.lock().unwrap().insert(v.clone());
                spoiled.absent.lock().unwrap().insert(v.clone());
            }
            v
        } else {
            None
        };
        let hidden = spoiled.hidden.lock().unwrap().clone();
        // The orphans the first reconcile must report: every node of this
        // owner the journal does not know and that the list shows, but a
        // leak this journal can prove (which it still knows it made).
        let mut expected: BTreeSet<String> = acked
            .iter()
            .filter(|id| !known.contains(*id) && !hidden.contains(*id))
            .cloned()
            .collect();
        if !journal_lost {
            // Whatever the intact journal made, it knows.
            expected.retain(|id| !by_a.contains(id));
        }
        if case.journal == JournalDamage::Older {
            // The copy knows what was made before it.
            let before: BTreeSet<&String> =
                by_a.iter().filter(|id| !after_copy.contains(*id)).collect();
            if let Some(x) = expected.iter().find(|id| before.contains(id)) {
                return Err(format!("the older copy does not know {x}, made before it"));
            }
        }

        for pass in 0..5 {
            if pass == 2
                && let Some(v) = &liar_victim
            {
                spoiled.hidden.lock().unwrap().remove(v);
                spoiled.absent.lock().unwrap().remove(v);
            }
            // (The first list is whole, so every orphan shows in it.)
            if case.shifted && pass > 0 {
                rig.fake.shift_pages(rng.random_range(0..3));
            }
            if case.full_disk
                && let Some(d) = disk
            {
                if rng.random_bool(0.5) {
                    d.fill();
                } else {
                    d.free();
                }
            }
            // More nodes asked for meanwhile: acknowledged when answered.
            if rng.random_bool(0.5) {
                match provision(&a, id("a"), rng.random_bool(0.3)).await {
                    Ok(node) => {
                        acked.insert(node.provider_id);
                    }
                    Err(FleetError::Journal(_)) => seen.journal_failures += 1,
                    Err(e) => return Err(format!("provision: {e}")),
                }
            }
            let policy = ReconcilePolicy {
                adopt: pass == 3 && rng.random_bool(0.3),
                confirm_orphans: pass == 4 && rng.random_bool(0.3),
                ..ruthless()
            };
            let report = match a.reconcile(&policy).await {
                Ok(r) => r,
                // A full disk: the pass stops at its first write.
                Err(e) if case.full_disk => {
                    seen.journal_failures += 1;
                    let _ = e;
                    continue;
                }
                Err(e) => return Err(format!("reconcile: {e:#}")),
            };
            // The node the lists and get lied about may be forgotten (the
            // evidence said gone), never terminated.
            let may_forget: BTreeSet<String> = liar_victim.iter().cloned().collect();
            no_acked_destroyed(&report, &acked, &may_forget)?;
            if pass == 0 && !case.full_disk {
                let reported = orphan_ids(&report);
                let missing: Vec<_> = expected.difference(&reported).collect();
                if !missing.is_empty() {
                    return Err(format!(
                        "orphans not reported: {missing:?} (expected {expected:?}); {report}"
                    ));
                }
                seen.orphans_expected += expected.len();
            }
            match a.expire_leases().await {
                Ok(r) => no_acked_destroyed(&r, &acked, &BTreeSet::new())?,
                Err(_) if case.full_disk => seen.journal_failures += 1,
                Err(e) => return Err(format!("lease sweep: {e:#}")),
            }
            let alive = rig.alive();
            if let Some(lost) = acked.iter().find(|id| !alive.contains(*id)) {
                return Err(format!("acknowledged node {lost} destroyed (pass {pass})"));
            }
        }
        if let Some(d) = disk {
            d.free();
        }
        // A real leak is terminated when nothing holds the journal, the
        // journal knows it made it, and the lists showed it twice in a row.
        if let Some(l) = &leaked
            && !journal_lost
            && !case.second_host
            && !case.full_disk
            && !case.shifted
            && !case.lying
            && a.held().unwrap().is_none()
        {
            if rig.alive().contains(l) {
                return Err(format!("the real leak {l} is still there"));
            }
            seen.leaks_terminated += 1;
        }
        seen.acked = acked.len();
        drop(a);
        if case.full_disk {
            let _ = std::fs::remove_dir_all(&dir);
        }
        Ok(seen)
    }

    /// Nothing acknowledged was terminated or forgotten by this report (but
    /// the nodes in `may_forget` may be forgotten).
    fn no_acked_destroyed(
        r: &wasmprov_fleet::ReconcileReport,
        acked: &BTreeSet<String>,
        may_forget: &BTreeSet<String>,
    ) -> Result<(), String> {
        let hit = r
            .leaks
            .iter()
            .filter(|l| l.terminated)
            .map(|l| &l.node.provider_id)
            .chain(
                r.vanished
                    .iter()
                    .map(|(_, p)| p)
                    .filter(|p| !may_forget.contains(*p)),
            )
            .chain(r.expired.iter().map(|(_, p)| p))
            .find(|p| acked.contains(*p));
        match hit {
            Some(p) => Err(format!("acknowledged node {p} destroyed or forgotten: {r}")),
            None => Ok(()),
        }
    }
}
