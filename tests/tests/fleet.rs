//! Embedding: hot reload under load, the intent journal and reconcile,
//! leases, and capacity groups scaled by price, with real components
//! against loopback fake clouds.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::time::{Duration, Instant};

use wasmprov_api::{CloudProvisioner, NodeShape, ProvisionRequest};
use wasmprov_host::journal::{Intent, IntentState, now_ms};
use wasmprov_host::{
    CapacityGroup, Fleet, HostBuilder, LeakPolicy, LockMode, ProvisionOptions, ReconcilePolicy,
    ReloadReport,
};
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

async fn fleet(dir: &PluginDir, state: &tempfile::TempDir) -> Fleet {
    let host = HostBuilder::new(dir.path())
        .owner_id(OWNER)
        .cache_dir(cache())
        .secret_source(|name| (name == "HCLOUD_TOKEN").then(|| "fake-hetzner-token".to_string()))
        .build()
        .await
        .unwrap();
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    Fleet::open(Arc::new(host), state.path().join("journal.redb")).unwrap()
}

fn request_ids(cloud: &Cloud) -> Vec<String> {
    let mut ids: Vec<String> = cloud
        .fake
        .servers()
        .iter()
        .map(|s| {
            s.labels
                .get(wasmprov_host::REQUEST_LABEL)
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
            expires_ms: None,
            group: None,
            hourly_usd: None,
            state,
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
        let fleet = fleet(&dir, &state).await;
        let p = fleet.host().plugin("hetzner").unwrap();
        let make = |id: &str| ProvisionRequest {
            request_id: id.into(),
            shape: shape(),
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
        // Owned, but wanted by no intent.
        let stray = p.provision_request(&make("stray")).await.unwrap();

        let report = fleet.reconcile(&ReconcilePolicy::default()).await.unwrap();
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
        assert_eq!(report.vanished, [("gone".to_string(), gone.provider_id)]);
        assert_eq!(report.leaks.len(), 1, "{report}");
        assert_eq!(report.leaks[0].node.provider_id, stray.provider_id);
        assert!(report.leaks[0].reason.contains("stray"), "{report}");
        assert!(!report.leaks[0].terminated);
        assert!(report.errors.is_empty(), "{report}");
        assert_eq!(request_ids(&c), ["asked", "made", "stray"]);

        let terminate = ReconcilePolicy {
            leaks: LeakPolicy::Terminate,
            ..ReconcilePolicy::default()
        };
        let report = fleet.reconcile(&terminate).await.unwrap();
        assert_eq!(report.leaks.len(), 1, "{report}");
        assert!(report.leaks[0].terminated);
        assert_eq!(request_ids(&c), ["asked", "made"]);

        let report = fleet.reconcile(&terminate).await.unwrap();
        assert!(report.is_clean(), "{report}");
        let metrics = fleet.host().metrics().encode();
        assert!(
            metrics.contains("wasmprov_nodes{plugin=\"hetzner\"} 2"),
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
        let fleet = fleet(&dir, &state).await;
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

        let second = Fleet::open(fleet.host().clone(), state.path().join("journal.redb"));
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
                    ..ReconcilePolicy::default()
                })
                .await
                .unwrap();
            assert!(report.is_clean(), "{report}");
        }
        let node = running.await.unwrap().unwrap();
        assert_eq!(fake.servers().len(), 1);
        assert_eq!(fake.servers()[0].id.to_string(), node.provider_id);
        let report = fleet.reconcile(&ReconcilePolicy::default()).await.unwrap();
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
        let report = fleet.reconcile(&ReconcilePolicy::default()).await.unwrap();
        assert!(report.is_clean(), "{report}");
        assert_eq!(request_ids(&c), ["kept", "leased"]);

        tokio::time::sleep(Duration::from_millis(700)).await;
        let report = fleet.reconcile(&ReconcilePolicy::default()).await.unwrap();
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
        let fleet = fleet(&dir, &state).await;
        let ranking = fleet.host().rank(&shape());
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
            assert_eq!(s.labels[wasmprov_host::GROUP_LABEL], "web");
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
        let report = fleet.reconcile(&ReconcilePolicy::default()).await.unwrap();
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
