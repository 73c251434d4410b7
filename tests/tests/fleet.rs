//! Embedding: hot reload under load, the intent journal and reconcile,
//! leases, and capacity groups scaled by price, with real components
//! against loopback fake clouds.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

use wasmprov_api::{CloudProvisioner, NodeShape, ProvisionRequest};
use wasmprov_fleet::journal::{Intent, IntentState, now_ms};
use wasmprov_fleet::{CapacityGroup, Fleet, LeakPolicy, ProvisionOptions, ReconcilePolicy};
use wasmprov_host::{Host, HostBuilder, LockMode, ReloadReport};
use wasmprov_tests::{EchoServer, PluginDir, guests};

const OWNER: &str = "fleet-owner";

fn cache() -> Option<std::path::PathBuf> {
    Some(std::env::temp_dir().join("wasmprov-test-cache"))
}

/// Waits (bounded) for a reload report that satisfies `want`.
async fn reload_where(
    rx: &mut tokio::sync::broadcast::Receiver<Arc<ReloadReport>>,
    what: &str,
    want: impl Fn(&ReloadReport) -> bool,
) -> ReloadReport {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, rx.recv()).await {
            Ok(Ok(r)) if want(&r) => return (*r).clone(),
            Ok(Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => {}
            Ok(Err(e)) => panic!("reload reports ended waiting for {what}: {e}"),
            Err(_) => panic!("no reload {what} within 20 s"),
        }
    }
}

mod reload {
    use super::*;

    fn probe_manifest(version: u32) -> String {
        format!("[config]\nversion = \"{version}\"\n[http]\nallow = [\"http://127.0.0.1:*\"]\n")
    }

    fn config_request(id: &str) -> ProvisionRequest {
        let mut shape = NodeShape::new(1.0, 1 << 30);
        shape.labels.insert("mode".into(), "config".into());
        shape.labels.insert("key".into(), "version".into());
        ProvisionRequest {
            request_id: id.into(),
            shape,
            boot: Default::default(),
            subnet: None,
        }
    }

    async fn version_of(p: &Arc<dyn CloudProvisioner>) -> String {
        p.provision_request(&config_request("v"))
            .await
            .expect("config call")
            .labels["value"]
            .clone()
    }

    /// Calls keep flowing while plugins are changed, added, broken and
    /// removed under a watcher; none fails, a call in flight finishes on
    /// the version it started with, and a broken new version leaves the old
    /// one serving with the reason reported.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn plugins_swap_atomically_under_load() {
        let echo = EchoServer::start().await;
        let dir = PluginDir::new();
        dir.add("alpha", guests::PROBE, &probe_manifest(1));
        let host = Arc::new(
            HostBuilder::new(dir.path())
                .owner_id(OWNER)
                .cache_dir(cache())
                .lock_mode(LockMode::Off)
                .build()
                .await
                .unwrap(),
        );
        assert!(host.errors().is_empty(), "{:?}", host.errors());
        let mut reloads = host.subscribe_reloads();
        let _watcher = host.watch(Duration::from_millis(50)).unwrap();

        // Load: four tasks calling whatever version is current, until told to stop.
        let stop = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(AtomicU64::new(0));
        let mut load = Vec::new();
        for _ in 0..4 {
            let (host, stop, calls) = (host.clone(), stop.clone(), calls.clone());
            load.push(tokio::spawn(async move {
                let mut seen = Vec::new();
                while !stop.load(SeqCst) {
                    let p = host.plugin("alpha").expect("alpha is always served");
                    let v = version_of(&p).await;
                    if seen.last() != Some(&v) {
                        seen.push(v);
                    }
                    calls.fetch_add(1, SeqCst);
                }
                seen
            }));
        }

        // A slow call in flight on version 1.
        let old = host.plugin("alpha").unwrap();
        let in_flight = tokio::spawn({
            let old = old.clone();
            let mut shape = NodeShape::new(1.0, 1 << 30);
            shape.labels.insert("mode".into(), "http".into());
            shape.labels.insert("url".into(), echo.url("/slow?ms=1500"));
            async move {
                old.provision_request(&ProvisionRequest {
                    request_id: "slow".into(),
                    shape,
                    boot: Default::default(),
                    subnet: None,
                })
                .await
            }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;

        // Changed: version 2 replaces version 1.
        dir.write(
            "alpha.toml",
            &format!(
                "name = \"alpha\"\ncomponent = \"alpha.wasm\"\n{}",
                probe_manifest(2)
            ),
        );
        let r = reload_where(&mut reloads, "replacing alpha", |r| !r.replaced.is_empty()).await;
        assert_eq!(r.replaced, ["alpha"]);
        let new = host.plugin("alpha").unwrap();
        assert!(!Arc::ptr_eq(&old, &new));
        assert_eq!(version_of(&new).await, "2");
        assert_eq!(version_of(&old).await, "1", "a held version keeps working");
        let slow = in_flight
            .await
            .unwrap()
            .expect("the call in flight finished");
        assert_eq!(slow.labels["status"], "200");

        // Added.
        dir.add("beta", guests::PROBE, &probe_manifest(7));
        let r = reload_where(&mut reloads, "adding beta", |r| !r.added.is_empty()).await;
        assert_eq!(r.added, ["beta"]);
        assert_eq!(version_of(&host.plugin("beta").unwrap()).await, "7");

        // Broken: the new bytes are not a component; version 2 keeps serving.
        std::fs::write(dir.path().join("alpha.wasm"), b"\0asm not really").unwrap();
        let r = reload_where(&mut reloads, "keeping alpha", |r| !r.kept_old.is_empty()).await;
        assert_eq!(r.kept_old, ["alpha"]);
        assert!(r.failed[0].contains("alpha"), "{r:?}");
        assert_eq!(version_of(&host.plugin("alpha").unwrap()).await, "2");
        assert!(
            host.errors()
                .iter()
                .any(|e| e.to_string().contains("alpha")),
            "{:?}",
            host.errors()
        );

        // Removed.
        std::fs::remove_file(dir.path().join("beta.toml")).unwrap();
        let r = reload_where(&mut reloads, "removing beta", |r| !r.removed.is_empty()).await;
        assert_eq!(r.removed, ["beta"]);
        assert!(host.plugin("beta").is_none());

        stop.store(true, SeqCst);
        for task in load {
            let seen = task.await.expect("no load task failed");
            assert_eq!(seen.first().map(String::as_str), Some("1"));
            assert_eq!(seen.last().map(String::as_str), Some("2"), "{seen:?}");
        }
        let n = calls.load(SeqCst);
        assert!(n >= 20, "only {n} calls under load");
    }

    /// Under the default lock mode a changed component is refused (the old
    /// one keeps serving) until the lock accepts it.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_changed_component_waits_for_the_lock() {
        let dir = PluginDir::new();
        dir.add("alpha", guests::PROBE, &probe_manifest(1));
        let host = HostBuilder::new(dir.path())
            .owner_id(OWNER)
            .cache_dir(cache())
            .build()
            .await
            .unwrap();
        assert!(host.errors().is_empty(), "{:?}", host.errors());
        let before = host.wasm_plugin("alpha").unwrap().info().sha256.clone();

        std::fs::copy(guests::HETZNER, dir.path().join("alpha.wasm")).unwrap();
        let r = host.reload().await.unwrap();
        assert_eq!(r.kept_old, ["alpha"], "{r}");
        assert!(r.failed[0].contains("wasmprov.lock"), "{r}");
        assert_eq!(host.wasm_plugin("alpha").unwrap().info().sha256, before);

        // The operator accepts the new digest (here: forgets the old one).
        std::fs::remove_file(dir.path().join("wasmprov.lock")).unwrap();
        let r = host.reload().await.unwrap();
        assert_eq!(r.replaced, ["alpha"], "{r}");
        assert_ne!(host.wasm_plugin("alpha").unwrap().info().sha256, before);
        // Unchanged files are not loaded again.
        let r = host.reload().await.unwrap();
        assert!(!r.changed() && r.failed.is_empty(), "{r}");
    }
}

/// A Hetzner plugin named `name` against its own fake, in `location`.
struct Cloud {
    fake: wasmprov_fake::HetznerFake,
}

async fn cloud(dir: &PluginDir, name: &str, location: &str, max_servers: usize) -> Cloud {
    let opts = wasmprov_fake::HetznerFakeOptions {
        max_servers,
        boot_delay_polls: 0,
        ..Default::default()
    };
    cloud_with(dir, name, location, opts).await
}

async fn cloud_with(
    dir: &PluginDir,
    name: &str,
    location: &str,
    opts: wasmprov_fake::HetznerFakeOptions,
) -> Cloud {
    let fake = wasmprov_fake::HetznerFake::start("127.0.0.1:0".parse().unwrap(), opts)
        .await
        .unwrap();
    let grant = fake.url().trim_end_matches("/v1").to_string();
    dir.add(
        name,
        guests::HETZNER,
        &format!(
            "[config]\nendpoint = \"{}\"\nlocation = \"{location}\"\n[secrets]\ntoken = {{ env = \"HCLOUD_TOKEN\" }}\n[http]\nallow = [\"{grant}\"]\n",
            fake.url()
        ),
    );
    Cloud { fake }
}

/// Reconcile as the tests want it: the fakes list a node as soon as it
/// exists, so no grace is needed.
fn now_policy() -> ReconcilePolicy {
    ReconcilePolicy {
        grace: Duration::ZERO,
        ..ReconcilePolicy::default()
    }
}

async fn fleet(dir: &PluginDir, state: &tempfile::TempDir) -> Fleet {
    fleet_and_host(dir, state).await.1
}

async fn fleet_and_host(dir: &PluginDir, state: &tempfile::TempDir) -> (Arc<Host>, Fleet) {
    fleet_with(dir, state, OWNER, None).await
}

/// A host over `dir` (owner `owner`, the Hetzner token, an HTTP
/// interceptor if given) and a fleet with its journal in `state`.
async fn fleet_with(
    dir: &PluginDir,
    state: &tempfile::TempDir,
    owner: &str,
    interceptor: Option<Arc<dyn wasmprov_host::intercept::HttpInterceptor>>,
) -> (Arc<Host>, Fleet) {
    let mut builder = HostBuilder::new(dir.path())
        .owner_id(owner)
        .cache_dir(cache())
        .secret_source(|name| (name == "HCLOUD_TOKEN").then(|| "fake-hetzner-token".to_string()));
    if let Some(i) = interceptor {
        builder = builder.http_interceptor(i);
    }
    let host = builder.build().await.unwrap();
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let host = Arc::new(host);
    let fleet = Fleet::open(host.clone(), state.path().join("journal.redb")).unwrap();
    (host, fleet)
}

fn request_ids(cloud: &Cloud) -> Vec<String> {
    let mut ids: Vec<String> = cloud
        .fake
        .servers()
        .iter()
        .map(|s| {
            s.labels
                .get(wasmprov_fleet::REQUEST_LABEL)
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    ids.sort();
    ids
}

fn shape() -> NodeShape {
    NodeShape::new(2.0, 4 << 30)
}

mod reconcile {
    use super::*;

    fn intent(request_id: &str, state: IntentState) -> Intent {
        Intent {
            request_id: request_id.into(),
            plugin: "hetzner".into(),
            shape: shape(),
            created_ms: now_ms(),
            state,
            ..Intent::default()
        }
    }

    /// The states a crash can leave behind, each settled by reconcile: a
    /// pending provision whose node exists is confirmed, one whose node does
    /// not is resumed under its request id, an interrupted termination is
    /// finished, a node gone out of band is forgotten, and a node no intent
    /// wants is reported, then terminated when the policy says so.
    #[tokio::test(flavor = "multi_thread")]
    async fn every_crash_state_is_settled() {
        let dir = PluginDir::new();
        let c = cloud(&dir, "hetzner", "fsn1", 100).await;
        let state = tempfile::tempdir().unwrap();
        let (host, fleet) = fleet_and_host(&dir, &state).await;
        let p = host.plugin("hetzner").unwrap();
        let make = |id: &str| ProvisionRequest {
            request_id: id.into(),
            shape: shape(),
            boot: Default::default(),
            subnet: None,
        };
        // Crashed after the cloud made the node, before the answer was journaled.
        fleet
            .journal()
            .put(&intent("made", IntentState::Pending))
            .unwrap();
        let made = p.provision_request(&make("made")).await.unwrap();
        // Crashed before the cloud was asked.
        fleet
            .journal()
            .put(&intent("asked", IntentState::Pending))
            .unwrap();
        // Crashed while terminating.
        let dying = p.provision_request(&make("dying")).await.unwrap();
        fleet
            .journal()
            .put(&intent(
                "dying",
                IntentState::Terminating {
                    provider_id: dying.provider_id.clone(),
                },
            ))
            .unwrap();
        // Terminated by someone else.
        let gone = p.provision_request(&make("gone")).await.unwrap();
        fleet
            .journal()
            .put(&intent(
                "gone",
                IntentState::Active {
                    provider_id: gone.provider_id.clone(),
                },
            ))
            .unwrap();
        p.terminate(&gone.provider_id).await.unwrap();
        // Owned, but made outside the journal: an orphan, never terminated.
        let stray = p.provision_request(&make("stray")).await.unwrap();
        // Made by this journal, whose intent is lost since: a leak.
        let leaked = fleet
            .provision(
                "hetzner",
                &shape(),
                ProvisionOptions {
                    request_id: Some("leaked".into()),
                    ..ProvisionOptions::default()
                },
            )
            .await
            .unwrap();
        fleet.journal().remove("leaked").unwrap();

        let report = fleet.reconcile(&now_policy()).await.unwrap();
        assert_eq!(
            report.confirmed,
            [("made".to_string(), made.provider_id.clone())]
        );
        assert_eq!(report.resumed.len(), 1, "{report}");
        assert_eq!(report.resumed[0].0, "asked");
        assert_eq!(
            report.terminated,
            [("dying".to_string(), dying.provider_id)]
        );
        // Missed by one list: not believed yet.
        assert!(report.vanished.is_empty(), "{report}");
        assert!(report.leaks.is_empty(), "{report}");
        assert_eq!(report.suspected.len(), 1, "{report}");
        assert_eq!(report.suspected[0].node.provider_id, leaked.provider_id);
        assert!(report.suspected[0].reason.contains("leaked"), "{report}");
        assert_eq!(report.orphans.len(), 1, "{report}");
        assert_eq!(report.orphans[0].node.provider_id, stray.provider_id);
        assert_eq!(report.orphans[0].kind, wasmprov_fleet::OrphanKind::Unproven);
        assert!(report.held.is_none(), "an unproven orphan holds nothing");
        assert!(report.errors.is_empty(), "{report}");
        assert_eq!(request_ids(&c), ["asked", "leaked", "made", "stray"]);

        // A second list: the missing node is looked up and forgotten, the
        // leak is proven and listed.
        let report = fleet.reconcile(&now_policy()).await.unwrap();
        assert_eq!(report.vanished, [("gone".to_string(), gone.provider_id)]);
        assert_eq!(report.leaks.len(), 1, "{report}");
        assert!(!report.leaks[0].terminated);

        let terminate = ReconcilePolicy {
            leaks: LeakPolicy::Terminate,
            ..now_policy()
        };
        let report = fleet.reconcile(&terminate).await.unwrap();
        assert_eq!(report.leaks.len(), 1, "{report}");
        assert!(report.leaks[0].terminated);
        assert_eq!(report.orphans.len(), 1, "{report}");
        assert_eq!(request_ids(&c), ["asked", "made", "stray"]);

        // Confirmed, the orphan is left where it is and no longer reported.
        let report = fleet
            .reconcile(&ReconcilePolicy {
                confirm_orphans: true,
                ..terminate.clone()
            })
            .await
            .unwrap();
        assert!(report.orphans.is_empty(), "{report}");
        let report = fleet.reconcile(&terminate).await.unwrap();
        assert!(report.is_clean(), "{report}");
        assert_eq!(request_ids(&c), ["asked", "made", "stray"]);
        let metrics = host.metrics().encode();
        assert!(
            metrics.contains("wasmprov_nodes{plugin=\"hetzner\"} 3"),
            "{metrics}"
        );
        assert!(
            metrics.contains("wasmprov_fleet_orphans{plugin=\"hetzner\"} 0"),
            "{metrics}"
        );
        let states: BTreeMap<String, bool> = fleet
            .intents()
            .unwrap()
            .into_iter()
            .map(|i| {
                (
                    i.request_id.clone(),
                    matches!(i.state, IntentState::Active { .. }),
                )
            })
            .collect();
        assert_eq!(
            states,
            BTreeMap::from([("asked".into(), true), ("made".into(), true)])
        );
    }

    /// A provision through the fleet is idempotent per request id, and a
    /// journal is held by one process (here: one fleet) at a time.
    #[tokio::test(flavor = "multi_thread")]
    async fn provisions_are_journaled_and_idempotent() {
        let dir = PluginDir::new();
        let c = cloud(&dir, "hetzner", "fsn1", 100).await;
        let state = tempfile::tempdir().unwrap();
        let (host, fleet) = fleet_and_host(&dir, &state).await;
        let opts = || ProvisionOptions {
            request_id: Some("once".into()),
            ..ProvisionOptions::default()
        };
        let a = fleet.provision("hetzner", &shape(), opts()).await.unwrap();
        let b = fleet.provision("hetzner", &shape(), opts()).await.unwrap();
        assert_eq!(a.provider_id, b.provider_id);
        assert_eq!(request_ids(&c), ["once"]);
        let err = fleet
            .provision("hetzner", &NodeShape::new(4.0, 8 << 30), opts())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("already used"), "{err}");
        let err = fleet
            .provision("nope", &shape(), ProvisionOptions::default())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no plugin \"nope\""), "{err}");

        let second = Fleet::open(host.clone(), state.path().join("journal.redb"));
        assert!(
            second
                .unwrap_err()
                .to_string()
                .contains("in use by another process"),
            "a second holder is refused"
        );

        fleet.terminate("hetzner", &a.provider_id).await.unwrap();
        assert!(fleet.intents().unwrap().is_empty());
        assert!(request_ids(&c).is_empty());
        // Terminating again: already gone is success.
        fleet.terminate("hetzner", &a.provider_id).await.unwrap();
    }

    /// A reconcile while a provision of the same fleet waits on the cloud
    /// leaves it alone: no second ask, no leak, one node.
    #[tokio::test(flavor = "multi_thread")]
    async fn reconcile_leaves_a_running_provision_alone() {
        let dir = PluginDir::new();
        let c = cloud_with(
            &dir,
            "hetzner",
            "fsn1",
            wasmprov_fake::HetznerFakeOptions {
                response_delay: Duration::from_millis(300),
                ..Default::default()
            },
        )
        .await;
        let fake = &c.fake;
        let state = tempfile::tempdir().unwrap();
        let fleet = Arc::new(fleet(&dir, &state).await);
        let running = tokio::spawn({
            let fleet = fleet.clone();
            async move {
                let opts = ProvisionOptions {
                    request_id: Some("slow".into()),
                    ..ProvisionOptions::default()
                };
                fleet.provision("hetzner", &shape(), opts).await
            }
        });
        // Twice: once before the create, once while its answer is delayed.
        for wait in [100, 400] {
            tokio::time::sleep(Duration::from_millis(wait)).await;
            let report = fleet
                .reconcile(&ReconcilePolicy {
                    leaks: LeakPolicy::Terminate,
                    ..now_policy()
                })
                .await
                .unwrap();
            assert!(report.is_clean(), "{report}");
        }
        let node = running.await.unwrap().unwrap();
        assert_eq!(fake.servers().len(), 1);
        assert_eq!(fake.servers()[0].id.to_string(), node.provider_id);
        let report = fleet.reconcile(&now_policy()).await.unwrap();
        assert!(report.is_clean(), "{report}");
    }

    /// A node with a lease is terminated by the first reconcile after it
    /// runs out, and not before.
    #[tokio::test(flavor = "multi_thread")]
    async fn leases_expire_through_reconcile() {
        let dir = PluginDir::new();
        let c = cloud(&dir, "hetzner", "fsn1", 100).await;
        let state = tempfile::tempdir().unwrap();
        let fleet = fleet(&dir, &state).await;
        let leased = fleet
            .provision(
                "hetzner",
                &shape(),
                ProvisionOptions {
                    request_id: Some("leased".into()),
                    lease: Some(Duration::from_millis(600)),
                    ..ProvisionOptions::default()
                },
            )
            .await
            .unwrap();
        fleet
            .provision(
                "hetzner",
                &shape(),
                ProvisionOptions {
                    request_id: Some("kept".into()),
                    ..ProvisionOptions::default()
                },
            )
            .await
            .unwrap();
        let report = fleet.reconcile(&now_policy()).await.unwrap();
        assert!(report.is_clean(), "{report}");
        assert_eq!(request_ids(&c), ["kept", "leased"]);

        tokio::time::sleep(Duration::from_millis(700)).await;
        let report = fleet.reconcile(&now_policy()).await.unwrap();
        assert_eq!(report.expired, [("leased".to_string(), leased.provider_id)]);
        assert_eq!(request_ids(&c), ["kept"]);
        assert_eq!(fleet.intents().unwrap().len(), 1);
    }
}

mod groups {
    use super::*;

    /// A group grows on the cheapest plugin, moves to the next offer when
    /// the cheapest runs out of quota, stays within min..max, and sheds the
    /// dearest members first.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_group_scales_within_bounds_choosing_by_price() {
        let dir = PluginDir::new();
        // The EU location is cheaper than the US one; its project allows 4 servers.
        let eu = cloud(&dir, "hetzner-eu", "fsn1", 4).await;
        let us = cloud(&dir, "hetzner-us", "ash", 100).await;
        let state = tempfile::tempdir().unwrap();
        let (host, fleet) = fleet_and_host(&dir, &state).await;
        // The US location costs more than twice the EU one: a ceiling above
        // the default ×2 lets the group fall back to it.
        let fleet = fleet.fallback_limits(5, 10.0).unwrap();
        let ranking = wasmprov_fleet::rank(&*host, &shape());
        assert_eq!(ranking.best().unwrap().plugin, "hetzner-eu", "{ranking:?}");

        let group = CapacityGroup::new("web", shape(), 1, 6);
        let r = fleet.scale(&group, 3).await.unwrap();
        assert!(r.converged(), "{r}");
        assert_eq!((r.before, r.after, r.added.len()), (0, 3, 3));
        assert!(r.added.iter().all(|m| m.plugin == "hetzner-eu"), "{r}");
        assert_eq!(eu.fake.servers().len(), 3);

        // 9 is above max: 6. The EU quota allows one more; the rest go to the US.
        let r = fleet.scale(&group, 9).await.unwrap();
        assert!(r.converged(), "{r}");
        assert_eq!(r.target, 6);
        assert_eq!(eu.fake.servers().len(), 4);
        assert_eq!(us.fake.servers().len(), 2);
        assert!(r.errors.iter().any(|e| e.contains("hetzner-eu")), "{r}");
        for s in eu.fake.servers().iter().chain(us.fake.servers().iter()) {
            assert_eq!(s.labels[wasmprov_fleet::GROUP_LABEL], "web");
        }

        // Nothing to do at the target.
        let r = fleet.scale(&group, 6).await.unwrap();
        assert!(r.added.is_empty() && r.removed.is_empty(), "{r}");

        // Down to 3: the dear US members go first.
        let r = fleet.scale(&group, 3).await.unwrap();
        assert!(r.converged(), "{r}");
        assert!(
            r.removed.iter().take(2).all(|m| m.plugin == "hetzner-us"),
            "{r}"
        );
        assert_eq!(us.fake.servers().len(), 0);
        assert_eq!(eu.fake.servers().len(), 3);

        // 0 is below min: 1.
        let r = fleet.scale(&group, 0).await.unwrap();
        assert_eq!((r.target, r.after), (1, 1), "{r}");
        assert_eq!(eu.fake.servers().len(), 1);
        let report = fleet.reconcile(&now_policy()).await.unwrap();
        assert!(report.is_clean(), "{report}");

        let bad = CapacityGroup::new("bad name", shape(), 3, 1);
        assert!(fleet.scale(&bad, 1).await.is_err());
    }
}

mod builder {
    use super::*;
    use wasmprov_host::policy::limits::LimitsSpec;

    /// The operator's default limits fill what a manifest leaves unset; a
    /// manifest's own limits win.
    #[tokio::test(flavor = "multi_thread")]
    async fn default_limits_fill_what_manifests_leave_unset() {
        let dir = PluginDir::new();
        dir.add("plain", guests::PROBE, "");
        dir.add("own", guests::PROBE, "[limits]\ncall_timeout_ms = 2000\n");
        let host = HostBuilder::new(dir.path())
            .owner_id(OWNER)
            .cache_dir(cache())
            .default_limits(LimitsSpec {
                call_timeout_ms: Some(7000),
                http_max_in_flight: Some(3),
                ..LimitsSpec::default()
            })
            .build()
            .await
            .unwrap();
        assert!(host.errors().is_empty(), "{:?}", host.errors());
        let limits = |name: &str| host.wasm_plugin(name).unwrap().info().limits.clone();
        assert_eq!(limits("plain").call_timeout_ms, 7000);
        assert_eq!(limits("plain").http_max_in_flight, 3);
        assert_eq!(limits("own").call_timeout_ms, 2000);
        assert_eq!(limits("own").http_max_in_flight, 3);
        // What neither sets keeps the built-in default.
        assert_eq!(limits("plain").memory_mib, 64);
    }
}

/// The ways a fleet could destroy a node its caller was told exists, and
/// the other findings of the fleet-correctness round: each a scenario that
/// failed before and passes now.
mod safety {
    use super::*;
    use std::sync::Mutex;
    use wasmprov_api::{CapacityType, JoinState, NodeHandle, PriceHint, ProvisionerError};
    use wasmprov_fleet::{BackendSet, journal::EventKind};
    use wasmprov_host::intercept::{HttpFailure, HttpInterceptor, OutgoingRequest, Upstream};

    /// What the scripted network does with one request.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Act {
        /// Send it to the cloud.
        Forward,
        /// Answer 429 without sending it.
        RateLimit,
        /// Send it, let the cloud act, then break the connection.
        ForwardThenReset,
    }

    /// An interceptor whose next answers are set by the test: a `POST`
    /// (a create) and every other request each follow their own setting.
    struct Script {
        create: Mutex<Act>,
        other: Mutex<Act>,
        creates: AtomicU64,
        /// Once a create is answered, everything is rate limited.
        limit_after_create: AtomicBool,
    }

    impl Script {
        fn new() -> Arc<Self> {
            Arc::new(Self {
                create: Mutex::new(Act::Forward),
                other: Mutex::new(Act::Forward),
                creates: AtomicU64::new(0),
                limit_after_create: AtomicBool::new(false),
            })
        }
        fn set(&self, create: Act, other: Act) {
            *self.create.lock().unwrap() = create;
            *self.other.lock().unwrap() = other;
        }
    }

    #[async_trait::async_trait]
    impl HttpInterceptor for Script {
        async fn exchange(
            &self,
            req: OutgoingRequest,
            upstream: Upstream<'_>,
        ) -> Result<http::Response<bytes::Bytes>, HttpFailure> {
            let act = if req.method == http::Method::POST {
                self.creates.fetch_add(1, SeqCst);
                *self.create.lock().unwrap()
            } else {
                *self.other.lock().unwrap()
            };
            let create = req.method == http::Method::POST;
            match act {
                Act::Forward => {
                    let r = upstream.send(req).await;
                    if create && self.limit_after_create.load(SeqCst) {
                        self.set(Act::RateLimit, Act::RateLimit);
                    }
                    r
                }
                Act::RateLimit => Ok(http::Response::builder()
                    .status(429)
                    .header("retry-after", "1")
                    .header("content-type", "application/json")
                    .body(bytes::Bytes::from_static(
                        br#"{"error":{"code":"rate_limit_exceeded","message":"slow down"}}"#,
                    ))
                    .unwrap()),
                Act::ForwardThenReset => {
                    upstream.send(req).await?;
                    Err(HttpFailure::ConnectionReset)
                }
            }
        }
    }

    async fn scripted(
        dir: &PluginDir,
        state: &tempfile::TempDir,
        owner: &str,
        script: Arc<Script>,
    ) -> (Arc<Host>, Fleet) {
        fleet_with(dir, state, owner, Some(script)).await
    }

    /// A Hetzner fake whose every answer waits `delay`, servers running at once.
    async fn slow_cloud(dir: &PluginDir, delay: Duration) -> Cloud {
        let opts = wasmprov_fake::HetznerFakeOptions {
            response_delay: delay,
            boot_delay_polls: 0,
            ..Default::default()
        };
        cloud_with(dir, "hetzner", "fsn1", opts).await
    }

    fn opts(id: &str) -> ProvisionOptions {
        ProvisionOptions {
            request_id: Some(id.into()),
            ..ProvisionOptions::default()
        }
    }

    fn terminate_leaks() -> ReconcilePolicy {
        ReconcilePolicy {
            leaks: LeakPolicy::Terminate,
            ..now_policy()
        }
    }

    /// Two provisions with one request id overlap: the first succeeds, the
    /// second fails with a retryable 429. The acknowledged node stays
    /// journaled, and reconcile with leak termination leaves it alone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_failed_duplicate_call_keeps_the_acknowledged_node() {
        let dir = PluginDir::new();
        let c = slow_cloud(&dir, Duration::from_millis(200)).await;
        let state = tempfile::tempdir().unwrap();
        let script = Script::new();
        let (_host, fleet) = scripted(&dir, &state, OWNER, script.clone()).await;
        let fleet = Arc::new(fleet);
        // From the moment the first create is answered, the cloud only says 429.
        script.limit_after_create.store(true, SeqCst);
        let first = tokio::spawn({
            let fleet = fleet.clone();
            async move { fleet.provision("hetzner", &shape(), opts("dup")).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let second = tokio::spawn({
            let fleet = fleet.clone();
            async move { fleet.provision("hetzner", &shape(), opts("dup")).await }
        });
        let node = first.await.unwrap().expect("the first call succeeds");
        let err = second
            .await
            .unwrap()
            .expect_err("the second call is rate limited");
        assert!(
            matches!(&err, wasmprov_fleet::FleetError::Provisioner(e) if e.is_retryable()),
            "{err}"
        );
        let intent = fleet
            .journal()
            .get("dup")
            .unwrap()
            .expect("still journaled");
        assert_eq!(intent.provider_id(), Some(node.provider_id.as_str()));

        script.limit_after_create.store(false, SeqCst);
        script.set(Act::Forward, Act::Forward);
        let report = fleet.reconcile(&terminate_leaks()).await.unwrap();
        assert!(report.is_clean(), "{report}");
        assert_eq!(c.fake.servers().len(), 1);
        assert_eq!(c.fake.servers()[0].id.to_string(), node.provider_id);
    }

    /// A create that went through but whose answer was lost (reset), then
    /// a retry that is rate limited: the intent is kept, reconcile finds
    /// the node under its request id, and nothing is destroyed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lost_answer_then_a_failed_retry_keeps_the_node() {
        let dir = PluginDir::new();
        let c = cloud(&dir, "hetzner", "fsn1", 100).await;
        let state = tempfile::tempdir().unwrap();
        let script = Script::new();
        let (_host, fleet) = scripted(&dir, &state, OWNER, script.clone()).await;

        script.set(Act::ForwardThenReset, Act::Forward);
        let err = fleet
            .provision("hetzner", &shape(), opts("lost"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("transport"), "{err}");
        assert_eq!(c.fake.servers().len(), 1, "the cloud acted");
        let intent = fleet.journal().get("lost").unwrap().expect("kept pending");
        assert_eq!(intent.state, IntentState::Pending);
        assert!(intent.last_error.is_some(), "{intent:?}");

        script.set(Act::RateLimit, Act::RateLimit);
        let err = fleet
            .provision("hetzner", &shape(), opts("lost"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("rate limited"), "{err}");
        assert!(fleet.journal().get("lost").unwrap().is_some());

        script.set(Act::Forward, Act::Forward);
        let report = fleet.reconcile(&terminate_leaks()).await.unwrap();
        assert_eq!(report.confirmed.len(), 1, "{report}");
        assert!(report.leaks.is_empty(), "{report}");
        assert_eq!(c.fake.servers().len(), 1);
        // And the same id now returns that node.
        let node = fleet
            .provision("hetzner", &shape(), opts("lost"))
            .await
            .unwrap();
        assert_eq!(node.provider_id, c.fake.servers()[0].id.to_string());
    }

    /// A call that failed before any create (the cloud refused for
    /// quota) leaves nothing in the journal; one that failed after the
    /// cloud may have acted, but whose node never shows up, is forgotten by
    /// reconcile (not asked again: its caller was told it failed), and the
    /// history says so.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn failures_are_forgotten_only_when_nothing_was_made() {
        let dir = PluginDir::new();
        let c = cloud(&dir, "hetzner", "fsn1", 0).await;
        let state = tempfile::tempdir().unwrap();
        let script = Script::new();
        let (_host, fleet) = scripted(&dir, &state, OWNER, script.clone()).await;
        let err = fleet
            .provision("hetzner", &shape(), opts("over-quota"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("quota"), "{err}");
        assert!(fleet.intents().unwrap().is_empty());

        // Rate limited before the create: the intent stays until reconcile.
        script.set(Act::RateLimit, Act::RateLimit);
        fleet
            .provision("hetzner", &shape(), opts("limited"))
            .await
            .unwrap_err();
        assert_eq!(fleet.intents().unwrap().len(), 1);
        script.set(Act::Forward, Act::Forward);
        // Within the grace it is left alone ...
        let report = fleet.reconcile(&ReconcilePolicy::default()).await.unwrap();
        assert!(report.is_clean(), "{report}");
        // ... after it, forgotten without a second ask.
        let report = fleet.reconcile(&now_policy()).await.unwrap();
        assert_eq!(report.abandoned, ["limited"], "{report}");
        assert!(fleet.intents().unwrap().is_empty());
        assert_eq!(script.creates.load(SeqCst), 1, "only the over-quota create");
        assert!(c.fake.servers().is_empty());
        let history = fleet.history(10).unwrap();
        assert_eq!(history.len(), 1);
        assert_eq!(history[0].kind, EventKind::Abandoned);
        assert!(history[0].reason.contains("rate limited"), "{history:?}");
    }

    /// Request ids map one-to-one onto tags: ids outside the documented
    /// syntax are refused everywhere with the rule named; ids that an old
    /// rewrite would have merged (a separator changed, one id equal to the
    /// other's reduced form) get distinct nodes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn request_ids_are_one_to_one_with_their_nodes() {
        let dir = PluginDir::new();
        let c = cloud(&dir, "hetzner", "fsn1", 100).await;
        let state = tempfile::tempdir().unwrap();
        let (host, fleet) = fleet_and_host(&dir, &state).await;
        let p = host.plugin("hetzner").unwrap();
        for bad in [
            "",
            "Req/1",
            "REQ-1",
            "a.b",
            "-x",
            "x-",
            &"x".repeat(64),
            "ñ",
        ] {
            let err = fleet
                .provision("hetzner", &shape(), opts(bad))
                .await
                .unwrap_err();
            assert!(err.to_string().contains("is not valid"), "{bad:?}: {err}");
            let err = p
                .provision_request(&ProvisionRequest {
                    request_id: bad.into(),
                    shape: shape(),
                    boot: Default::default(),
                    subnet: None,
                })
                .await
                .unwrap_err();
            assert!(
                matches!(&err, ProvisionerError::Unsupported(m) if m.contains("request id")),
                "{bad:?}: {err}"
            );
        }
        assert!(fleet.intents().unwrap().is_empty());
        assert!(c.fake.servers().is_empty());
        // Pairs the old label rewrite merged or that look like its output.
        let ids = [
            "req-1",
            "req_1",
            "req-1-6c4bf8d1",
            "req1",
            "x",
            "x-x",
            "x_x",
        ];
        let mut nodes = BTreeMap::new();
        for id in ids {
            let n = fleet
                .provision("hetzner", &shape(), opts(id))
                .await
                .unwrap();
            assert_eq!(n.labels[wasmprov_fleet::REQUEST_LABEL], id);
            assert!(
                nodes.insert(n.provider_id.clone(), id).is_none(),
                "{id} shares a node"
            );
        }
        assert_eq!(c.fake.servers().len(), ids.len());
        let report = fleet.reconcile(&terminate_leaks()).await.unwrap();
        assert!(report.is_clean(), "{report}");
        assert_eq!(c.fake.servers().len(), ids.len());
    }

    /// Owner ids are one-to-one too: two hosts whose owner ids an old
    /// rewrite merged see only their own nodes, and a host refuses an owner
    /// id outside the syntax.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn owner_ids_do_not_see_each_other() {
        let dir = PluginDir::new();
        let c = cloud(&dir, "hetzner", "fsn1", 100).await;
        let err = HostBuilder::new(dir.path())
            .owner_id("Team A")
            .build()
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("owner id \"Team A\" is not valid"),
            "{err}"
        );
        let (sa, sb) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (_, a) = scripted(&dir, &sa, "team-a", Script::new()).await;
        let (_, b) = scripted(&dir, &sb, "team_a", Script::new()).await;
        let na = a
            .provision("hetzner", &shape(), opts("web-1"))
            .await
            .unwrap();
        let nb = b
            .provision("hetzner", &shape(), opts("web-1"))
            .await
            .unwrap();
        assert_ne!(na.provider_id, nb.provider_id);
        assert_eq!(c.fake.servers().len(), 2);
        for (fleet, mine) in [(&a, &na), (&b, &nb)] {
            let report = fleet.reconcile(&terminate_leaks()).await.unwrap();
            assert!(report.is_clean(), "{report}");
            let listed = fleet
                .backends()
                .backend("hetzner")
                .unwrap()
                .describe()
                .await
                .unwrap();
            assert_eq!(listed.len(), 1);
            assert_eq!(listed[0].provider_id, mine.provider_id);
        }
        // Neither can terminate the other's node.
        let other = a.backends().backend("hetzner").unwrap();
        let err = other.terminate(&nb.provider_id).await.unwrap_err();
        assert!(matches!(err, ProvisionerError::NotFound(_)), "{err}");
        assert_eq!(c.fake.servers().len(), 2);
    }

    /// Shapes no cloud could make are refused before the journal or a
    /// plugin sees them.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn invalid_shapes_are_refused_at_the_boundary() {
        let dir = PluginDir::new();
        let c = cloud(&dir, "hetzner", "fsn1", 100).await;
        let state = tempfile::tempdir().unwrap();
        let (host, fleet) = fleet_and_host(&dir, &state).await;
        let p = host.plugin("hetzner").unwrap();
        let mut many_gpus = shape();
        many_gpus.gpu = 1000;
        for bad in [
            NodeShape::new(0.0, 0),
            NodeShape::new(2.0, 0),
            NodeShape::new(f64::NAN, 1 << 30),
            NodeShape::new(-1.0, 1 << 30),
            many_gpus,
        ] {
            let err = fleet
                .provision("hetzner", &bad, ProvisionOptions::default())
                .await
                .unwrap_err();
            assert!(err.to_string().contains("invalid shape"), "{err}");
            let err = p.provision(&bad).await.unwrap_err();
            assert!(matches!(err, ProvisionerError::Unsupported(_)), "{err}");
            assert!(matches!(
                p.try_price_hint(&bad),
                Err(ProvisionerError::Unsupported(_))
            ));
        }
        assert!(fleet.intents().unwrap().is_empty());
        assert!(c.fake.servers().is_empty());
    }

    /// With the default manifest (16 requests in flight), 50 concurrent
    /// provisions all succeed: requests over the limit wait their turn.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn load_waits_for_the_in_flight_limit() {
        let dir = PluginDir::new();
        let c = slow_cloud(&dir, Duration::from_millis(50)).await;
        let state = tempfile::tempdir().unwrap();
        let fleet = Arc::new(fleet(&dir, &state).await);
        let mut calls = Vec::new();
        for i in 0..50 {
            let fleet = fleet.clone();
            calls.push(tokio::spawn(async move {
                fleet
                    .provision("hetzner", &shape(), opts(&format!("load-{i}")))
                    .await
            }));
        }
        let mut failed = Vec::new();
        for call in calls {
            if let Err(e) = call.await.unwrap() {
                failed.push(e.to_string());
            }
        }
        assert!(
            failed.is_empty(),
            "{} failed: {:?}",
            failed.len(),
            failed.first()
        );
        assert_eq!(c.fake.servers().len(), 50);
        assert_eq!(fleet.intents().unwrap().len(), 50);
    }

    /// The lease sweep ends leases without listing any cloud, and every
    /// expiry and leak termination is kept in the history and counted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn leases_expire_on_their_own_and_are_kept_in_history() {
        let dir = PluginDir::new();
        let c = cloud(&dir, "hetzner", "fsn1", 100).await;
        let state = tempfile::tempdir().unwrap();
        let (host, fleet) = fleet_and_host(&dir, &state).await;
        let leased = fleet
            .provision(
                "hetzner",
                &shape(),
                ProvisionOptions {
                    lease: Some(Duration::from_millis(300)),
                    ..opts("leased")
                },
            )
            .await
            .unwrap();
        fleet
            .provision("hetzner", &shape(), opts("kept"))
            .await
            .unwrap();
        // Not before a reconcile listed the cloud once since the journal
        // was opened; then on its own.
        let swept = fleet.expire_leases().await.unwrap();
        assert!(swept.expired.is_empty(), "{swept}");
        assert!(fleet.reconcile(&now_policy()).await.unwrap().is_clean());
        assert!(fleet.expire_leases().await.unwrap().is_clean());
        tokio::time::sleep(Duration::from_millis(400)).await;
        let report = fleet.expire_leases().await.unwrap();
        assert_eq!(
            report.expired,
            [("leased".to_string(), leased.provider_id.clone())]
        );
        assert_eq!(request_ids(&c), ["kept"]);
        // A node this journal made whose intent is lost: a leak, proven by
        // a second list, terminated and kept too.
        let stray = fleet
            .provision("hetzner", &shape(), opts("stray"))
            .await
            .unwrap();
        fleet.journal().remove("stray").unwrap();
        let first = fleet.reconcile(&terminate_leaks()).await.unwrap();
        assert_eq!(first.suspected.len(), 1, "{first}");
        assert!(first.leaks.is_empty(), "{first}");
        assert_eq!(request_ids(&c), ["kept", "stray"]);
        let second = fleet.reconcile(&terminate_leaks()).await.unwrap();
        assert!(second.leaks[0].terminated, "{second}");
        assert_eq!(request_ids(&c), ["kept"]);
        let history = fleet.history(10).unwrap();
        let kinds: Vec<_> = history
            .iter()
            .map(|e| (e.kind, e.provider_id.clone(), e.status))
            .collect();
        use wasmprov_fleet::journal::EventStatus::Done;
        assert_eq!(
            kinds,
            [
                (EventKind::LeaseExpired, Some(leased.provider_id), Done),
                (EventKind::LeakTerminated, Some(stray.provider_id), Done),
            ]
        );
        assert!(
            history.iter().all(|e| e.completed_ms.is_some()),
            "{history:?}"
        );
        assert!(history[0].reason.contains("lease"), "{history:?}");
        assert!(history[1].reason.contains("stray"), "{history:?}");
        let metrics = host.metrics().encode();
        for event in ["lease_expired", "leak_terminated"] {
            assert!(
                metrics.contains(&format!(
                    "wasmprov_fleet_events_total{{plugin=\"hetzner\",event=\"{event}\"}} 1"
                )),
                "{metrics}"
            );
        }
    }

    /// A native, in-process backend: nodes in memory, idempotent by request
    /// id, a flat price.
    struct Native {
        nodes: Mutex<BTreeMap<String, NodeHandle>>,
        price: f64,
    }

    #[async_trait::async_trait]
    impl CloudProvisioner for Native {
        async fn provision(&self, shape: &NodeShape) -> wasmprov_api::Result<NodeHandle> {
            self.provision_request(&ProvisionRequest {
                request_id: wasmprov_fleet::random_request_id(),
                shape: shape.clone(),
                boot: Default::default(),
                subnet: None,
            })
            .await
        }
        async fn provision_request(
            &self,
            req: &ProvisionRequest,
        ) -> wasmprov_api::Result<NodeHandle> {
            let mut nodes = self.nodes.lock().unwrap();
            if let Some(n) = nodes
                .values()
                .find(|n| n.labels.get(wasmprov_fleet::REQUEST_LABEL) == Some(&req.request_id))
            {
                return Ok(n.clone());
            }
            let mut labels = req.shape.labels.clone();
            labels.insert(wasmprov_fleet::REQUEST_LABEL.into(), req.request_id.clone());
            let node = NodeHandle {
                provider_id: format!("native-{}", nodes.len() + 1),
                address: None,
                zone: None,
                capacity_type: CapacityType::OnDemand,
                join_state: JoinState::Joined,
                instance_type: Some("native".into()),
                labels,
                ..Default::default()
            };
            nodes.insert(node.provider_id.clone(), node.clone());
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
        fn price_hint(&self, shape: &NodeShape) -> Option<PriceHint> {
            Some(PriceHint {
                hourly_usd: self.price,
                capacity_type: shape.capacity_type,
                instance_type: "native".into(),
            })
        }
        fn name(&self) -> &str {
            "native"
        }
    }

    /// A capacity group across one wasm plugin and one native backend:
    /// ranked together, filled cheapest first, spilled to the other when
    /// the cheap one runs out of quota, reconciled without leaks.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_group_spans_a_wasm_plugin_and_a_native_backend() {
        let dir = PluginDir::new();
        let c = cloud(&dir, "hetzner", "fsn1", 2).await;
        let host = Arc::new(
            HostBuilder::new(dir.path())
                .owner_id(OWNER)
                .cache_dir(cache())
                .secret_source(|name| {
                    (name == "HCLOUD_TOKEN").then(|| "fake-hetzner-token".to_string())
                })
                .build()
                .await
                .unwrap(),
        );
        let native = Arc::new(Native {
            nodes: Mutex::new(BTreeMap::new()),
            price: 50.0,
        });
        let set = BackendSet::new()
            .with_source(host.clone())
            .with("native", native.clone());
        assert_eq!(
            wasmprov_api::Backends::backend_names(&set),
            ["hetzner", "native"]
        );
        let state = tempfile::tempdir().unwrap();
        // The native backend's price is far above Hetzner's: no ceiling, so
        // the group spans both.
        let fleet = Fleet::open(Arc::new(set), state.path().join("journal.redb"))
            .unwrap()
            .fallback_limits(5, f64::MAX)
            .unwrap();
        let ranking = wasmprov_fleet::rank(fleet.backends().as_ref(), &shape());
        assert_eq!(
            ranking
                .offers
                .iter()
                .map(|o| o.plugin.as_str())
                .collect::<Vec<_>>(),
            ["hetzner", "native"]
        );
        let group = CapacityGroup::new("mixed", shape(), 0, 10);
        let r = fleet.scale(&group, 4).await.unwrap();
        assert!(r.converged(), "{r}");
        assert_eq!(c.fake.servers().len(), 2);
        assert_eq!(native.nodes.lock().unwrap().len(), 2);
        let report = fleet.reconcile(&terminate_leaks()).await.unwrap();
        assert!(report.is_clean(), "{report}");
        let r = fleet.scale(&group, 1).await.unwrap();
        assert!(r.converged(), "{r}");
        assert!(
            native.nodes.lock().unwrap().is_empty(),
            "the dear ones go first"
        );
        assert_eq!(c.fake.servers().len(), 1);
    }
}

/// Issue 26, finding 1: `label N 'wasmprov-journal =<journal>-<gen>'` made
/// a node made outside the journal read as this journal's, and reconcile
/// with leak termination terminated it. The host refuses the relabel (the
/// padded key and the reserved one alike) before a plugin sees it, the
/// fleet reads provenance from the exact key only, and the node is never
/// terminated.
#[tokio::test(flavor = "multi_thread")]
async fn reconcile_never_terminates_a_node_whose_journal_label_was_forged() {
    use wasmprov_api::provenance::{JOURNAL_LABEL, Provenance};
    let dir = PluginDir::new();
    let c = cloud(&dir, "hetzner", "fsn1", 100).await;
    let state = tempfile::tempdir().unwrap();
    let (host, fleet) = fleet_and_host(&dir, &state).await;
    let p = host.plugin("hetzner").unwrap();
    // This journal's provenance, read off a node it made.
    let ours = fleet
        .provision(
            "hetzner",
            &shape(),
            ProvisionOptions {
                request_id: Some("journaled".into()),
                ..ProvisionOptions::default()
            },
        )
        .await
        .unwrap();
    let mut forged = Provenance::of(&ours).expect("the fleet's nodes carry provenance");
    forged.generation += 1;
    let stray = p
        .provision_request(&ProvisionRequest {
            request_id: "made-by-hand".into(),
            shape: shape(),
            boot: Default::default(),
            subnet: None,
        })
        .await
        .unwrap();
    for key in [
        format!("{JOURNAL_LABEL} "),
        format!(" {JOURNAL_LABEL}"),
        JOURNAL_LABEL.to_uppercase(),
        JOURNAL_LABEL.to_string(),
    ] {
        let labels = BTreeMap::from([(key.clone(), forged.label_value())]);
        let err = p.set_labels(&stray.provider_id, &labels).await.unwrap_err();
        assert!(
            matches!(err, wasmprov_api::ProvisionerError::InvalidConfig(_)),
            "{key:?}: {err:?}"
        );
    }
    // Were such a key on a node, the fleet would not read it as provenance.
    let mut padded = stray.clone();
    padded
        .labels
        .insert(format!("{JOURNAL_LABEL} "), forged.label_value());
    assert_eq!(Provenance::of(&padded), None);

    let leaks = ReconcilePolicy {
        leaks: LeakPolicy::Terminate,
        ..now_policy()
    };
    for _ in 0..2 {
        let report = fleet.reconcile(&leaks).await.unwrap();
        assert!(report.leaks.is_empty(), "{report}");
        assert!(
            report
                .terminated
                .iter()
                .all(|(_, id)| *id != stray.provider_id),
            "{report}"
        );
    }
    let alive: Vec<String> = c.fake.servers().iter().map(|s| s.id.to_string()).collect();
    assert!(alive.contains(&stray.provider_id), "{alive:?}");
    assert!(alive.contains(&ours.provider_id), "{alive:?}");
    let got = p.get(&stray.provider_id).await.unwrap().unwrap();
    assert!(
        got.labels
            .keys()
            .all(|k| !k.eq_ignore_ascii_case(JOURNAL_LABEL) && k.trim() == k),
        "{:?}",
        got.labels
    );
}
