//! Choosing among every plugin's offerings: ranking by the contract's fit
//! rule (architecture, GPU model and disk bind), and falling back to the
//! next offering when one runs out of capacity, across types of one plugin
//! and across plugins, with what ran out skipped for a while.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use wasmprov_api::{
    Arch, CapacityScope, CapacityType, CloudProvisioner, JoinState, NodeHandle, NodeShape,
    Offering, PriceHint, ProviderNodeId, ProvisionRequest, ProvisionerError, Result,
};
use wasmprov_fleet::{BackendSet, CapacityGroup, Catalogues, Fleet, rank_offerings};

/// A native backend with a catalogue; types in `out` answer `capacity`.
struct Cloud {
    name: &'static str,
    offerings: Vec<Offering>,
    out: Mutex<BTreeMap<String, CapacityScope>>,
    asked: Mutex<Vec<String>>,
    nodes: Mutex<Vec<NodeHandle>>,
    /// Times its catalogue was read.
    reads: std::sync::atomic::AtomicUsize,
    /// When set, reading the catalogue waits here for the other readers.
    meet: Option<Arc<tokio::sync::Barrier>>,
    /// How long reading the catalogue takes.
    slow: Mutex<Duration>,
    /// When set, every provision is over the account's quota.
    over_quota: std::sync::atomic::AtomicBool,
    /// Times its price hint was asked.
    hints: std::sync::atomic::AtomicUsize,
}

fn offering(t: &str, cpu: f64, gib: u64, arch: Arch, usd: f64) -> Offering {
    Offering {
        instance_type: t.into(),
        cpu,
        memory_bytes: gib << 30,
        arch: Some(arch),
        on_demand_usd: Some(usd),
        ..Offering::default()
    }
}

impl Cloud {
    fn new(name: &'static str, offerings: Vec<Offering>) -> Arc<Self> {
        Arc::new(Self {
            name,
            offerings,
            out: Mutex::new(BTreeMap::new()),
            asked: Mutex::new(Vec::new()),
            nodes: Mutex::new(Vec::new()),
            reads: std::sync::atomic::AtomicUsize::new(0),
            meet: None,
            slow: Mutex::new(Duration::ZERO),
            over_quota: std::sync::atomic::AtomicBool::new(false),
            hints: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    fn reads(&self) -> usize {
        self.reads.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn run_out(&self, t: &str, scope: CapacityScope) {
        self.out.lock().unwrap().insert(t.into(), scope);
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl CloudProvisioner for Cloud {
    async fn provision(&self, shape: &NodeShape) -> Result<NodeHandle> {
        self.provision_request(&ProvisionRequest::new("anon", shape.clone()))
            .await
    }

    async fn provision_request(&self, req: &ProvisionRequest) -> Result<NodeHandle> {
        let t = req
            .shape
            .instance_type
            .clone()
            .expect("the fleet asks for an offering by name");
        self.asked.lock().unwrap().push(t.clone());
        if self.over_quota.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(ProvisionerError::Quota(format!("no room for {t}")));
        }
        if let Some(scope) = self.out.lock().unwrap().get(&t) {
            return Err(ProvisionerError::Capacity {
                scope: *scope,
                message: format!("no {t} left"),
            });
        }
        let mut nodes = self.nodes.lock().unwrap();
        let node = NodeHandle {
            instance_type: Some(t),
            labels: req.shape.labels.clone(),
            ..NodeHandle::new(format!("{}-{}", self.name, nodes.len()), JoinState::Booting)
        };
        nodes.push(node.clone());
        Ok(node)
    }

    async fn terminate(&self, id: &ProviderNodeId) -> Result<()> {
        let mut nodes = self.nodes.lock().unwrap();
        let before = nodes.len();
        nodes.retain(|n| &n.provider_id != id);
        if nodes.len() == before {
            return Err(ProvisionerError::NotFound(id.clone()));
        }
        Ok(())
    }

    async fn describe(&self) -> Result<Vec<NodeHandle>> {
        Ok(self.nodes.lock().unwrap().clone())
    }

    fn capacity_types(&self) -> &[CapacityType] {
        &[CapacityType::OnDemand]
    }

    fn price_hint(&self, shape: &NodeShape) -> Option<PriceHint> {
        self.hints.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.offerings
            .iter()
            .filter(|o| o.fits(shape) && o.on_demand_usd.is_some())
            .min_by(|a, b| {
                a.on_demand_usd
                    .unwrap()
                    .total_cmp(&b.on_demand_usd.unwrap())
            })
            .map(|o| PriceHint {
                hourly_usd: o.on_demand_usd.unwrap(),
                capacity_type: shape.capacity_type,
                instance_type: o.instance_type.clone(),
            })
    }

    fn name(&self) -> &str {
        self.name
    }

    async fn offerings(&self) -> Result<Vec<Offering>> {
        self.reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let slow = *self.slow.lock().unwrap();
        tokio::time::sleep(slow).await;
        if let Some(meet) = &self.meet {
            // Read one after the other, the first reader would wait here
            // for a second that never comes.
            tokio::time::timeout(Duration::from_secs(10), meet.wait())
                .await
                .map_err(|_| ProvisionerError::Transport("read alone".into()))?;
        }
        Ok(self.offerings.clone())
    }
}

fn fleet(clouds: &[Arc<Cloud>], dir: &tempfile::TempDir) -> Fleet {
    let mut set = BackendSet::new();
    for c in clouds {
        set = set.with(c.name, c.clone() as Arc<dyn CloudProvisioner>);
    }
    Fleet::open(Arc::new(set), dir.path().join("journal.redb")).expect("journal")
}

/// The cheapest type of one cloud runs out: the next offering is its own
/// second type (cheaper than the other cloud), then the other cloud; what
/// ran out is skipped by the next scale instead of asked again.
#[tokio::test]
async fn capacity_falls_back_to_the_next_offering_and_is_remembered() {
    let a = Cloud::new(
        "a",
        vec![
            offering("a-small", 2.0, 4, Arch::X86_64, 0.010),
            offering("a-medium", 4.0, 8, Arch::X86_64, 0.020),
        ],
    );
    let b = Cloud::new("b", vec![offering("b-small", 2.0, 4, Arch::X86_64, 0.030)]);
    a.run_out("a-small", CapacityScope::InstanceType);
    let dir = tempfile::tempdir().unwrap();
    // b-small is ×3 of a-small: within a ceiling of ×4 (the default ×2
    // would stop before it: `fallback_stops_at_the_price_ceiling`).
    let f = fleet(&[a.clone(), b.clone()], &dir)
        .fallback_limits(5, 4.0)
        .unwrap();
    let group = CapacityGroup::new("web", NodeShape::new(2.0, 4 << 30), 0, 10);

    let report = f.scale(&group, 1).await.unwrap();
    assert_eq!(report.added.len(), 1, "{report:?}");
    assert_eq!(a.asked(), ["a-small", "a-medium"]);
    assert!(
        report.errors[0].contains("a-small") && report.errors[0].contains("capacity"),
        "{:?}",
        report.errors
    );
    assert!(
        f.unavailable().until("a", "a-small", None).is_some(),
        "what ran out is marked"
    );

    // The next scale skips a-small without asking; a-medium then runs out
    // for the whole cloud: b is next.
    a.run_out("a-medium", CapacityScope::Group);
    let report = f.scale(&group, 2).await.unwrap();
    assert_eq!(report.added.len(), 1, "{report:?}");
    assert_eq!(report.added[0].plugin, "b");
    assert_eq!(a.asked(), ["a-small", "a-medium", "a-medium"]);
    assert_eq!(b.asked(), ["b-small"]);

    // The whole of `a` is marked: a third member goes to b at once.
    let report = f.scale(&group, 3).await.unwrap();
    assert_eq!(report.added[0].plugin, "b");
    assert_eq!(a.asked().len(), 3, "a is not asked while marked");

    // The rank says why a is out.
    let ranking = rank_offerings(f.backends().as_ref(), &group.shape, Some(f.unavailable())).await;
    assert!(
        ranking.offers.iter().all(|o| o.plugin == "b"),
        "{ranking:?}"
    );
    assert!(
        ranking
            .none
            .iter()
            .any(|n| n.plugin == "a" && n.reason.contains("capacity ran out")),
        "{ranking:?}"
    );
}

/// Marks end: with a short time, the cheapest offering is asked again.
#[tokio::test]
async fn marks_expire() {
    let a = Cloud::new("a", vec![offering("a-small", 2.0, 4, Arch::X86_64, 0.01)]);
    let b = Cloud::new("b", vec![offering("b-small", 2.0, 4, Arch::X86_64, 0.02)]);
    a.run_out("a-small", CapacityScope::Zone);
    let dir = tempfile::tempdir().unwrap();
    let f = fleet(&[a.clone(), b.clone()], &dir).unavailable_for(Duration::from_millis(200));
    let group = CapacityGroup::new("web", NodeShape::new(1.0, 1 << 30), 0, 10);
    f.scale(&group, 1).await.unwrap();
    f.scale(&group, 2).await.unwrap();
    assert_eq!(a.asked().len(), 1, "skipped while marked");
    tokio::time::sleep(Duration::from_millis(300)).await;
    a.out.lock().unwrap().clear();
    let report = f.scale(&group, 3).await.unwrap();
    assert_eq!(report.added[0].plugin, "a", "{report:?}");
}

/// Architecture, GPU model and disk bind across clouds: an `x86_64` group
/// never lands on the cheaper ARM type; a GPU model picks the type that has
/// it, wherever it is; a disk larger than any type's is no offer at all.
#[tokio::test]
async fn architecture_gpu_model_and_disk_bind_in_the_ranking() {
    let mut t4 = offering("a-t4", 4.0, 16, Arch::X86_64, 0.5);
    t4.gpu = 1;
    t4.gpu_vendor = Some("nvidia".into());
    t4.gpu_model = Some("nvidia-t4".into());
    let mut a10g = offering("b-a10g", 4.0, 16, Arch::X86_64, 1.0);
    a10g.gpu = 1;
    a10g.gpu_vendor = Some("nvidia".into());
    a10g.gpu_model = Some("nvidia-a10g".into());
    a10g.disk_bytes = Some(250 << 30);
    let a = Cloud::new("a", vec![offering("a-arm", 2.0, 4, Arch::Arm64, 0.005), t4]);
    let b = Cloud::new(
        "b",
        vec![offering("b-x86", 2.0, 4, Arch::X86_64, 0.02), a10g],
    );
    let dir = tempfile::tempdir().unwrap();
    let f = fleet(&[a.clone(), b.clone()], &dir);
    let rank = |shape: NodeShape| {
        let backends = f.backends().clone();
        async move { rank_offerings(backends.as_ref(), &shape, None).await }
    };

    let any = rank(NodeShape::new(2.0, 4 << 30)).await;
    assert_eq!(any.best().unwrap().hint.instance_type, "a-arm");
    let x86 = NodeShape {
        arch: Some(Arch::X86_64),
        ..NodeShape::new(2.0, 4 << 30)
    };
    let ranked = rank(x86.clone()).await;
    assert!(
        ranked
            .offers
            .iter()
            .all(|o| o.hint.instance_type != "a-arm"),
        "{ranked:?}"
    );
    assert_eq!(ranked.best().unwrap().hint.instance_type, "b-x86");
    let group = CapacityGroup::new("x86", x86, 0, 4);
    f.scale(&group, 2).await.unwrap();
    assert!(a.asked().iter().all(|t| t != "a-arm"), "{:?}", a.asked());

    let gpu = |model: &str| NodeShape {
        gpu: 1,
        gpu_vendor: Some("nvidia".into()),
        gpu_model: Some(model.into()),
        ..NodeShape::new(4.0, 16 << 30)
    };
    let plain_gpu = rank(NodeShape {
        gpu: 1,
        ..NodeShape::new(4.0, 16 << 30)
    })
    .await;
    assert_eq!(plain_gpu.best().unwrap().hint.instance_type, "a-t4");
    let ranked = rank(gpu("NVIDIA-A10G")).await;
    assert_eq!(ranked.offers.len(), 1, "{ranked:?}");
    assert_eq!(ranked.best().unwrap().plugin, "b");
    assert!(rank(gpu("nvidia-a100")).await.offers.is_empty());

    let disk = |gib: u64| NodeShape {
        disk_bytes: Some(gib << 30),
        ..NodeShape::new(2.0, 4 << 30)
    };
    assert_eq!(
        rank(disk(200)).await.best().unwrap().hint.instance_type,
        "b-a10g"
    );
    let none = rank(disk(1000)).await;
    assert!(none.offers.is_empty());
    assert!(
        none.none.iter().all(|n| n.reason.contains("fits")),
        "{none:?}"
    );
}

/// A group's scale reads only its own plugins' catalogues (another
/// plugin's cloud is not asked, so it can neither slow the group nor spend
/// its API calls on it); a ranking reads every catalogue at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn catalogues_are_read_at_once_and_only_for_the_plugins_asked() {
    let meet = Arc::new(tokio::sync::Barrier::new(2));
    let with_meet = |name: &'static str, offerings: Vec<Offering>| {
        let mut c = Arc::into_inner(Cloud::new(name, offerings)).unwrap();
        c.meet = Some(meet.clone());
        Arc::new(c)
    };
    let a = with_meet(
        "a",
        vec![
            offering("a-small", 2.0, 4, Arch::X86_64, 0.010),
            offering("a-medium", 4.0, 8, Arch::X86_64, 0.020),
        ],
    );
    let b = with_meet("b", vec![offering("b-small", 2.0, 4, Arch::X86_64, 0.030)]);
    let dir = tempfile::tempdir().unwrap();
    let f = fleet(&[a.clone(), b.clone()], &dir);
    let shape = NodeShape::new(2.0, 4 << 30);
    let ranking = rank_offerings(f.backends().as_ref(), &shape, None).await;
    let types: Vec<&str> = ranking
        .offers
        .iter()
        .map(|o| o.hint.instance_type.as_str())
        .collect();
    // Both catalogues were read (a's second type is only in its catalogue).
    assert_eq!(types, ["a-small", "a-medium", "b-small"], "{ranking:?}");
    assert!(ranking.none.is_empty(), "{ranking:?}");
    assert_eq!((a.reads(), b.reads()), (1, 1));

    // A group of b only: a's catalogue is not read.
    let plain_a = Cloud::new("a", vec![offering("a-small", 2.0, 4, Arch::X86_64, 0.010)]);
    let plain_b = Cloud::new("b", vec![offering("b-small", 2.0, 4, Arch::X86_64, 0.030)]);
    let dir = tempfile::tempdir().unwrap();
    let f = fleet(&[plain_a.clone(), plain_b.clone()], &dir);
    let mut group = CapacityGroup::new("only-b", shape, 0, 5);
    group.plugins = vec!["b".into()];
    let report = f.scale(&group, 2).await.unwrap();
    assert_eq!(report.added.len(), 2, "{report:?}");
    assert!(report.added.iter().all(|m| m.plugin == "b"), "{report:?}");
    assert_eq!(plain_a.reads(), 0, "a is not the group's");
    assert!(plain_a.asked().is_empty());
    assert_eq!(plain_b.reads(), 1, "one read per scale");
}

/// One plugin's slow catalogue holds a ranking up for no longer than the
/// catalogue deadline (it is ranked by its price hint meanwhile), and once
/// read it is kept: later rankings answer at once, an expired catalogue
/// included (read again behind it), one read at a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_catalogue_holds_no_ranking_up() {
    let fast = Cloud::new(
        "fast",
        vec![offering("f-small", 2.0, 4, Arch::X86_64, 0.030)],
    );
    let slow = Cloud::new(
        "slow",
        vec![
            offering("s-small", 2.0, 4, Arch::X86_64, 0.010),
            offering("s-big", 4.0, 8, Arch::X86_64, 0.020),
        ],
    );
    *slow.slow.lock().unwrap() = Duration::from_millis(1500);
    let dir = tempfile::tempdir().unwrap();
    let f = fleet(&[fast.clone(), slow.clone()], &dir);
    let catalogues = Catalogues::new(Duration::from_secs(3), Duration::from_millis(300));
    let shape = NodeShape::new(2.0, 4 << 30);
    let types = |r: &wasmprov_fleet::Ranking| {
        r.offers
            .iter()
            .map(|o| o.hint.instance_type.clone())
            .collect::<Vec<_>>()
    };
    let rank = async || {
        let started = std::time::Instant::now();
        let r = catalogues
            .rank(f.backends().as_ref(), &shape, None, |_| true)
            .await;
        (r, started.elapsed())
    };
    // Not read yet: ranked by its price hint, after the deadline.
    let (r, took) = rank().await;
    assert!(took < Duration::from_millis(1000), "{took:?}");
    assert_eq!(types(&r), ["s-small", "f-small"], "{r:?}");
    // Again while its read goes on: no second read, no longer wait.
    let (_, took) = rank().await;
    assert!(took < Duration::from_millis(1000), "{took:?}");
    assert_eq!(slow.reads(), 1);
    // Read: its whole catalogue (its second type too), at once.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (r, took) = rank().await;
    assert!(took < Duration::from_millis(200), "{took:?}");
    assert_eq!(types(&r), ["s-small", "s-big", "f-small"], "{r:?}");
    assert_eq!((slow.reads(), fast.reads()), (1, 1));
    // Expired: the old catalogue answers at once, one read goes on behind.
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let (_, took) = rank().await;
    assert!(took < Duration::from_millis(200), "{took:?}");
    let (_, took) = rank().await;
    assert!(took < Duration::from_millis(200), "{took:?}");
    // (The read behind runs on its own task.)
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(slow.reads(), 2, "one read per expiry");
}

/// A group larger than the fleet's limit is refused before anything is
/// asked of a cloud.
#[tokio::test]
async fn groups_above_the_size_limit_are_refused() {
    let a = Cloud::new("a", vec![offering("a-small", 2.0, 4, Arch::X86_64, 0.010)]);
    let dir = tempfile::tempdir().unwrap();
    let f = fleet(std::slice::from_ref(&a), &dir);
    let shape = NodeShape::new(2.0, 4 << 30);
    let huge = CapacityGroup::new("huge", shape.clone(), 0, u32::MAX);
    let err = f.scale(&huge, u32::MAX).await.unwrap_err();
    assert!(
        err.to_string().contains("largest group size, 2000"),
        "{err}"
    );
    assert!(a.asked().is_empty() && a.reads() == 0);
    let f = f.max_group_size(3);
    let err = f
        .scale(&CapacityGroup::new("g", shape.clone(), 0, 4), 1)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("largest group size, 3"), "{err}");
    let ok = f
        .scale(&CapacityGroup::new("g", shape, 0, 3), 3)
        .await
        .unwrap();
    assert!(ok.converged(), "{ok}");
}

/// Falling back never climbs past the price ceiling (×2 of the cheapest
/// fit by default): with the two cheap types out, the third, at ×5, is not
/// asked; a second pass, with the cheapest marked as out, keeps the same
/// ceiling instead of measuring from the cheapest left. A fleet with a
/// higher ceiling takes it.
#[tokio::test]
async fn fallback_stops_at_the_price_ceiling() {
    let a = Cloud::new(
        "a",
        vec![
            offering("a-cheap", 2.0, 4, Arch::X86_64, 0.010),
            offering("a-near", 2.0, 4, Arch::X86_64, 0.018),
            offering("a-dear", 2.0, 4, Arch::X86_64, 0.050),
        ],
    );
    a.run_out("a-cheap", CapacityScope::InstanceType);
    a.run_out("a-near", CapacityScope::InstanceType);
    let dir = tempfile::tempdir().unwrap();
    let f = fleet(std::slice::from_ref(&a), &dir);
    let group = CapacityGroup::new("web", NodeShape::new(2.0, 4 << 30), 0, 10);

    let report = f.scale(&group, 1).await.unwrap();
    assert!(report.added.is_empty(), "{report}");
    assert_eq!(a.asked(), ["a-cheap", "a-near"]);
    let last = report.errors.last().unwrap();
    assert!(
        last.contains("price ceiling") && last.contains("a-dear") && last.contains("2×"),
        "{report}"
    );

    // Both cheap types are marked now; the ceiling is still ×2 of a-cheap.
    let report = f.scale(&group, 1).await.unwrap();
    assert!(report.added.is_empty(), "{report}");
    assert_eq!(a.asked().len(), 2, "nothing asked: {report}");
    assert!(
        report
            .errors
            .iter()
            .any(|e| e.contains("ran out of capacity recently")),
        "{report}"
    );
    assert!(
        report.errors.iter().any(|e| e.contains("price ceiling")),
        "{report}"
    );

    let f = f.fallback_limits(5, 6.0).unwrap();
    let report = f.scale(&group, 1).await.unwrap();
    assert_eq!(report.added.len(), 1, "{report}");
    assert_eq!(report.added[0].hourly_usd, Some(0.050));
    assert_eq!(a.asked(), ["a-cheap", "a-near", "a-dear"]);
}

/// A pass stops after the fleet's number of capacity failures (5 by
/// default), whatever is left to try, and says so; the limit is the
/// fleet's to set; a ceiling below 1 is refused.
#[tokio::test]
async fn fallback_stops_after_the_capacity_failure_limit() {
    let types: Vec<String> = (0..9).map(|i| format!("t{i}")).collect();
    let a = Cloud::new(
        "a",
        types
            .iter()
            .enumerate()
            .map(|(i, t)| offering(t, 2.0, 4, Arch::X86_64, 0.010 + 0.001 * i as f64))
            .collect(),
    );
    for t in &types {
        a.run_out(t, CapacityScope::InstanceType);
    }
    let dir = tempfile::tempdir().unwrap();
    let f = fleet(std::slice::from_ref(&a), &dir);
    let group = CapacityGroup::new("web", NodeShape::new(2.0, 4 << 30), 0, 10);

    let report = f.scale(&group, 3).await.unwrap();
    assert!(report.added.is_empty(), "{report}");
    assert_eq!(a.asked(), ["t0", "t1", "t2", "t3", "t4"]);
    assert!(
        report
            .errors
            .last()
            .unwrap()
            .contains("stopped after 5 capacity failures"),
        "{report}"
    );

    // Marks expire at once here, so every type may be asked again.
    let dir = tempfile::tempdir().unwrap();
    let b = Cloud::new("b", a.offerings.clone());
    for t in &types {
        b.run_out(t, CapacityScope::InstanceType);
    }
    let f = fleet(std::slice::from_ref(&b), &dir)
        .unavailable_for(Duration::ZERO)
        .fallback_limits(2, 100.0)
        .unwrap();
    let report = f.scale(&group, 1).await.unwrap();
    assert_eq!(b.asked(), ["t0", "t1"], "{report}");
    assert_eq!(f.fallback(), (2, 100.0));

    for bad in [0.5, f64::NAN, f64::INFINITY] {
        assert!(
            fleet(std::slice::from_ref(&b), &tempfile::tempdir().unwrap())
                .fallback_limits(3, bad)
                .is_err(),
            "{bad}"
        );
    }
}

/// A quota failure is the account's: the pass asks none of that plugin's
/// other offerings and goes on to the next plugin.
#[tokio::test]
async fn over_quota_skips_the_rest_of_that_plugin_for_the_pass() {
    let a = Cloud::new(
        "a",
        vec![
            offering("a-1", 2.0, 4, Arch::X86_64, 0.010),
            offering("a-2", 2.0, 4, Arch::X86_64, 0.011),
            offering("a-3", 2.0, 4, Arch::X86_64, 0.012),
        ],
    );
    let b = Cloud::new("b", vec![offering("b-1", 2.0, 4, Arch::X86_64, 0.015)]);
    a.over_quota
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let f = fleet(&[a.clone(), b.clone()], &dir);
    let group = CapacityGroup::new("web", NodeShape::new(2.0, 4 << 30), 0, 10);
    let report = f.scale(&group, 2).await.unwrap();
    assert_eq!(report.added.len(), 2, "{report}");
    assert!(report.added.iter().all(|m| m.plugin == "b"), "{report}");
    assert_eq!(a.asked(), ["a-1"], "one quota failure is enough: {report}");
    assert_eq!(b.asked(), ["b-1", "b-1"]);
}

/// A plugin replaced under the same name (a reload) is another backend:
/// its catalogue is read anew instead of served from the old version's
/// for the rest of the TTL.
#[tokio::test]
async fn a_replaced_plugin_is_ranked_by_its_own_catalogue() {
    struct Swappable(Mutex<Arc<Cloud>>);
    impl wasmprov_api::Backends for Swappable {
        fn backend_names(&self) -> Vec<String> {
            vec!["a".into()]
        }
        fn backend(&self, name: &str) -> Option<Arc<dyn CloudProvisioner>> {
            (name == "a").then(|| self.0.lock().unwrap().clone() as Arc<dyn CloudProvisioner>)
        }
    }
    let old = Cloud::new("a", vec![offering("old", 2.0, 4, Arch::X86_64, 0.010)]);
    let new = Cloud::new("a", vec![offering("new", 2.0, 4, Arch::X86_64, 0.030)]);
    let backends = Swappable(Mutex::new(old.clone()));
    let catalogues = Catalogues::new(Duration::from_secs(3600), Duration::from_secs(10));
    let shape = NodeShape::new(2.0, 4 << 30);
    let ranking = catalogues.rank(&backends, &shape, None, |_| true).await;
    assert_eq!(ranking.offers[0].hint.instance_type, "old");
    *backends.0.lock().unwrap() = new.clone();
    let ranking = catalogues.rank(&backends, &shape, None, |_| true).await;
    assert_eq!(ranking.offers[0].hint.instance_type, "new", "{ranking:?}");
    assert_eq!((old.reads(), new.reads()), (1, 1));
    // Unchanged, it is served from the cache.
    catalogues.rank(&backends, &shape, None, |_| true).await;
    assert_eq!(new.reads(), 1);
}

/// The ceiling is measured from what can be had: a free offering (an
/// on-premises pool) sets none, and a plugin out for the pass (over quota,
/// refused credentials) no longer sets it. Whether a later scale may mend
/// a shortfall is said: capacity may come back, quota alone does not.
#[tokio::test]
async fn the_ceiling_is_measured_from_what_can_be_had() {
    // A full free pool, then a cloud: falls back to the cloud.
    let free = Cloud::new("onprem", vec![offering("pool", 2.0, 4, Arch::X86_64, 0.0)]);
    let cloud = Cloud::new("cloud", vec![offering("c-1", 2.0, 4, Arch::X86_64, 0.02)]);
    free.run_out("pool", CapacityScope::Group);
    let dir = tempfile::tempdir().unwrap();
    let f = fleet(&[free.clone(), cloud.clone()], &dir);
    let group = CapacityGroup::new("web", NodeShape::new(2.0, 4 << 30), 0, 10);
    let report = f.scale(&group, 1).await.unwrap();
    assert_eq!(report.added.len(), 1, "{report}");
    assert_eq!(report.added[0].plugin, "cloud");

    // The cheapest plugin is over quota: the next, at ×3, is within ×2 of
    // the cheapest that can be had (itself).
    let a = Cloud::new("a", vec![offering("a-1", 2.0, 4, Arch::X86_64, 0.010)]);
    let b = Cloud::new("b", vec![offering("b-1", 2.0, 4, Arch::X86_64, 0.030)]);
    a.over_quota
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let dir = tempfile::tempdir().unwrap();
    let f = fleet(&[a.clone(), b.clone()], &dir);
    let report = f.scale(&group, 1).await.unwrap();
    assert_eq!(report.added.len(), 1, "{report}");
    assert_eq!(report.added[0].plugin, "b");

    // Quota alone: not retryable. Capacity: retryable. Both are out of
    // resources (from the typed errors); a shape nobody offers is not.
    let dir = tempfile::tempdir().unwrap();
    let f = fleet(std::slice::from_ref(&a), &dir);
    let report = f.scale(&group, 1).await.unwrap();
    assert!(!report.converged() && !report.retryable, "{report}");
    assert!(report.out_of_resources, "{report}");
    let c = Cloud::new("c", vec![offering("c-1", 2.0, 4, Arch::X86_64, 0.010)]);
    c.run_out("c-1", CapacityScope::InstanceType);
    let dir = tempfile::tempdir().unwrap();
    let f = fleet(std::slice::from_ref(&c), &dir);
    let report = f.scale(&group, 1).await.unwrap();
    assert!(!report.converged() && report.retryable, "{report}");
    assert!(report.out_of_resources, "{report}");
    // The next pass skips it, marked, and is still retryable.
    let report = f.scale(&group, 1).await.unwrap();
    assert!(report.retryable && report.out_of_resources, "{report}");
    assert_eq!(c.asked().len(), 1);
    let huge = CapacityGroup::new("huge", NodeShape::new(64.0, 4 << 30), 0, 10);
    let report = f.scale(&huge, 1).await.unwrap();
    assert!(!report.converged() && !report.out_of_resources, "{report}");
}

/// Offerings without a price of their own are priced by the plugin's price
/// hint, asked once per plugin version and shape, not on every ranking: a
/// catalogue of hundreds of unpriced types costs no calls once known.
#[tokio::test]
async fn price_hints_for_unpriced_offerings_are_asked_once() {
    let unpriced = |t: &str, cpu: f64| Offering {
        on_demand_usd: None,
        ..offering(t, cpu, 4, Arch::X86_64, 0.0)
    };
    let mut list = vec![offering("priced", 2.0, 4, Arch::X86_64, 0.05)];
    list.extend((0..20).map(|i| unpriced(&format!("u{i}"), 2.0 + f64::from(i))));
    let a = Cloud::new("a", list);
    let backends = BackendSet::new().with("a", a.clone() as Arc<dyn CloudProvisioner>);
    let catalogues = Catalogues::new(Duration::from_secs(3600), Duration::from_secs(10));
    let shape = NodeShape::new(2.0, 4 << 30);
    let first = catalogues.rank(&backends, &shape, None, |_| true).await;
    let asked = a.hints.load(std::sync::atomic::Ordering::SeqCst);
    assert!(asked >= 20, "each unpriced type asked: {asked}");
    for _ in 0..5 {
        let again = catalogues.rank(&backends, &shape, None, |_| true).await;
        assert_eq!(again, first);
    }
    assert_eq!(
        a.hints.load(std::sync::atomic::Ordering::SeqCst),
        asked,
        "asked once"
    );
    // Another shape is another question.
    let spot = NodeShape {
        capacity_type: CapacityType::Spot,
        ..shape.clone()
    };
    catalogues.rank(&backends, &spot, None, |_| true).await;
    assert!(a.hints.load(std::sync::atomic::Ordering::SeqCst) > asked);
}
