//! The Hetzner plugin's contract 0.3 calls beyond what the conformance suite
//! asks, through the host against the Hetzner fake: alias IPs in a private
//! network as private stable addresses, and addresses never taken from
//! another owner's server. Each answer is checked against what the fake
//! holds.

use std::sync::Arc;

use wasmprov_api::{
    AddressKind, AddressRequest, CloudProvisioner, NodeShape, ProvisionRequest, ProvisionerError,
};
use wasmprov_fake::{HetznerFake, HetznerFakeOptions};
use wasmprov_tests::{PluginDir, guests};

struct Cloud {
    fake: HetznerFake,
    network: u64,
    _dir: PluginDir,
    _hosts: Vec<wasmprov_host::Host>,
    /// The plugin for owner `net-owner`, and for `other-owner`.
    mine: Arc<dyn CloudProvisioner>,
    theirs: Arc<dyn CloudProvisioner>,
}

async fn cloud() -> Cloud {
    let fake = HetznerFake::start(
        "127.0.0.1:0".parse().unwrap(),
        HetznerFakeOptions::default(),
    )
    .await
    .expect("the fake starts");
    // A /29: five addresses servers may have.
    let network = fake
        .add_network("nodes", "10.0.0.0/16", &["10.0.1.0/29"])
        .unwrap();
    let dir = PluginDir::new();
    dir.add(
        "hetzner",
        guests::HETZNER,
        &format!(
            "[config]\nendpoint = \"{}\"\n[secrets]\ntoken = {{ env = \"HCLOUD_TOKEN\" }}\n[http]\nallow = [\"http://{}\"]\n",
            fake.url(),
            fake.addr()
        ),
    );
    let mut hosts = Vec::new();
    let mut plugins = Vec::new();
    for owner in ["net-owner", "other-owner"] {
        let token = fake.token().to_string();
        let host = wasmprov_host::HostBuilder::new(dir.path())
            .owner_id(owner)
            .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
            .secret_source(move |name| (name == "HCLOUD_TOKEN").then(|| token.clone()))
            .build()
            .await
            .expect("the host builds");
        assert!(host.errors().is_empty(), "{:?}", host.errors());
        plugins.push(host.plugin("hetzner").expect("hetzner loaded"));
        hosts.push(host);
    }
    let theirs = plugins.pop().unwrap();
    let mine = plugins.pop().unwrap();
    Cloud {
        fake,
        network,
        _dir: dir,
        _hosts: hosts,
        mine,
        theirs,
    }
}

async fn node(p: &Arc<dyn CloudProvisioner>, id: &str, subnet: Option<u64>) -> String {
    let req = ProvisionRequest {
        subnet: subnet.map(|s| s.to_string()),
        ..ProvisionRequest::new(id, NodeShape::new(1.0, 1 << 30))
    };
    p.provision_request(&req).await.unwrap().provider_id
}

/// The alias IPs of server `id` in the fake.
fn aliases(c: &Cloud, id: &str) -> Vec<String> {
    c.fake
        .servers()
        .into_iter()
        .find(|s| s.id.to_string() == id)
        .map(|s| {
            s.private_net
                .into_iter()
                .flat_map(|n| n.alias_ips)
                .collect()
        })
        .unwrap_or_default()
}

fn private(address: Option<&str>) -> AddressRequest {
    AddressRequest {
        kind: AddressKind::Private,
        address: address.map(str::to_string),
    }
}

#[tokio::test]
async fn alias_ips_are_assigned_moved_between_own_servers_and_released() {
    let c = cloud().await;
    let a = node(&c.mine, "alias-a", Some(c.network)).await;
    let b = node(&c.mine, "alias-b", Some(c.network)).await;
    // a and b hold 10.0.1.2 and .3: the lowest free address is .4.
    let got = c.mine.assign_address(&a, &private(None)).await.unwrap();
    assert_eq!(got.address, "10.0.1.4");
    assert_eq!(got.kind, AddressKind::Private);
    assert_eq!(got.resource_id, Some(c.network.to_string()));
    assert_eq!(got.provider_id.as_deref(), Some(a.as_str()));
    assert_eq!(aliases(&c, &a), ["10.0.1.4"]);
    // Again, with or without naming it: no change.
    let again = c.mine.assign_address(&a, &private(None)).await.unwrap();
    assert_eq!(again, got);
    let named = c
        .mine
        .assign_address(&a, &private(Some("10.0.1.4")))
        .await
        .unwrap();
    assert_eq!(named, got);
    assert_eq!(aliases(&c, &a), ["10.0.1.4"]);
    let free = |c: &Cloud| c.fake.networks()[0].subnets[0].free;
    assert_eq!(free(&c), 2);
    // The plugin counts what the fake counts.
    let cap = c
        .mine
        .subnet_capacity(&c.network.to_string())
        .await
        .unwrap();
    assert_eq!((cap.available_addresses, cap.total_addresses), (2, Some(5)));

    // Moved to b: off a, on b.
    let moved = c
        .mine
        .assign_address(&b, &private(Some("10.0.1.4")))
        .await
        .unwrap();
    assert_eq!(moved.provider_id.as_deref(), Some(b.as_str()));
    assert!(aliases(&c, &a).is_empty());
    assert_eq!(aliases(&c, &b), ["10.0.1.4"]);

    // Released from b; again is not-found; so is releasing it from a.
    c.mine.release_address(&b, "10.0.1.4").await.unwrap();
    assert!(aliases(&c, &b).is_empty());
    for id in [&b, &a] {
        assert!(matches!(
            c.mine.release_address(id, "10.0.1.4").await,
            Err(ProvisionerError::NotFound(_))
        ));
    }

    // Not an address of the network, a server's own address, the gateway.
    for (ip, primary) in [("10.0.2.9", false), ("10.0.1.1", false), ("10.0.1.3", true)] {
        let e = c
            .mine
            .assign_address(&a, &private(Some(ip)))
            .await
            .unwrap_err();
        if primary {
            assert!(matches!(e, ProvisionerError::Unsupported(_)), "{ip}: {e}");
        } else {
            assert!(matches!(e, ProvisionerError::NotFound(_)), "{ip}: {e}");
        }
    }
    // A server in no network has no alias IPs.
    let lone = node(&c.mine, "alias-lone", None).await;
    assert!(matches!(
        c.mine.assign_address(&lone, &private(None)).await,
        Err(ProvisionerError::Unsupported(_))
    ));
}

#[tokio::test]
async fn addresses_are_never_taken_from_another_owners_server() {
    let c = cloud().await;
    let mine = node(&c.mine, "mine", Some(c.network)).await;
    let theirs = node(&c.theirs, "theirs", Some(c.network)).await;

    // Their alias IP stays theirs.
    let alias = c
        .theirs
        .assign_address(&theirs, &private(None))
        .await
        .unwrap();
    let e = c
        .mine
        .assign_address(&mine, &private(Some(&alias.address)))
        .await
        .unwrap_err();
    assert!(matches!(e, ProvisionerError::Unsupported(_)), "{e}");
    assert_eq!(aliases(&c, &theirs), std::slice::from_ref(&alias.address));
    assert!(aliases(&c, &mine).is_empty());

    // Their floating IP too, on their server or not.
    let public = AddressRequest {
        kind: AddressKind::Public,
        address: None,
    };
    let fip = c.theirs.assign_address(&theirs, &public).await.unwrap();
    let take = |address: &str| AddressRequest {
        kind: AddressKind::Public,
        address: Some(address.to_string()),
    };
    let e = c
        .mine
        .assign_address(&mine, &take(&fip.address))
        .await
        .unwrap_err();
    assert!(matches!(e, ProvisionerError::Unsupported(_)), "{e}");
    c.theirs
        .release_address(&theirs, &fip.address)
        .await
        .unwrap();
    let e = c
        .mine
        .assign_address(&mine, &take(fip.resource_id.as_deref().unwrap()))
        .await
        .unwrap_err();
    assert!(matches!(e, ProvisionerError::Unsupported(_)), "{e}");
    let held = c.fake.floating_ips();
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].server, None);
    // Nor can they release it from a server that is not theirs.
    let own = c.mine.assign_address(&mine, &public).await.unwrap();
    assert!(matches!(
        c.theirs.release_address(&mine, &own.address).await,
        Err(ProvisionerError::NotFound(_))
    ));
    assert_eq!(
        c.fake
            .floating_ips()
            .iter()
            .find(|f| f.ip == own.address)
            .and_then(|f| f.server)
            .map(|s| s.to_string()),
        Some(mine)
    );
}

/// `+N`, `0N` and ` N` are not server N: every call refuses them as
/// `unsupported` (never `not_found`, which a terminate would report as a
/// node already gone), and nothing is done to server N.
#[tokio::test]
async fn non_canonical_server_ids_are_refused_never_gone() {
    let c = cloud().await;
    let id = node(&c.mine, "spelt", Some(c.network)).await;
    let load_balancer = c.fake.add_load_balancer("lb", "fsn1").unwrap().to_string();
    let running = |c: &Cloud| c.fake.servers().iter().any(|s| s.id.to_string() == id);
    let public = AddressRequest {
        kind: AddressKind::Public,
        address: None,
    };
    for spelt in [
        format!("+{id}"),
        format!("0{id}"),
        format!(" {id}"),
        format!("{id} "),
        format!("{id}\n"),
    ] {
        let refused = |what: &str, r: Result<(), ProvisionerError>| {
            let e = r.expect_err(what);
            assert!(
                matches!(e, ProvisionerError::Unsupported(_)),
                "{what} {spelt:?}: {e}"
            );
        };
        refused("terminate", c.mine.terminate(&spelt).await);
        refused(
            "set-labels",
            c.mine
                .set_labels(&spelt, &Default::default())
                .await
                .map(drop),
        );
        refused(
            "assign-address",
            c.mine
                .assign_address(&spelt, &private(None))
                .await
                .map(drop),
        );
        refused(
            "assign public",
            c.mine.assign_address(&spelt, &public).await.map(drop),
        );
        refused(
            "register-target",
            c.mine
                .register_target(&wasmprov_api::Target {
                    group: load_balancer.clone(),
                    provider_id: spelt.clone(),
                    port: None,
                    health: None,
                })
                .await,
        );
        assert!(running(&c), "{spelt:?}");
    }
    assert!(aliases(&c, &id).is_empty());
    assert!(c.fake.floating_ips().is_empty());
    assert!(
        c.mine
            .list_targets(&load_balancer)
            .await
            .unwrap()
            .is_empty()
    );
    // The canonical id still works.
    c.mine.terminate(&id).await.unwrap();
}

/// Moving an alias IP off server M rewrites M's whole alias list; an
/// assign to M at the same moment rewrites it too. The host runs the
/// address calls of one plugin one after another, so neither write drops
/// the other's address: every address a call was told is on its server.
#[tokio::test]
async fn concurrent_address_moves_never_drop_another_calls_alias() {
    let c = cloud().await;
    let wide = c
        .fake
        .add_network("wide", "10.1.0.0/16", &["10.1.0.0/24"])
        .unwrap();
    let s = node(&c.mine, "move-s", Some(wide)).await;
    let m = node(&c.mine, "move-m", Some(wide)).await;
    let moving = "10.1.0.50";
    c.mine
        .assign_address(&m, &private(Some(moving)))
        .await
        .unwrap();
    for round in 0..10u8 {
        let (src, dst) = if aliases(&c, &m).iter().any(|a| a == moving) {
            (&m, &s)
        } else {
            (&s, &m)
        };
        let added = format!("10.1.0.{}", 100 + round);
        let (move_it, add_it) = (private(Some(moving)), private(Some(&added)));
        let (moved, add) = tokio::join!(
            c.mine.assign_address(dst, &move_it),
            c.mine.assign_address(src, &add_it),
        );
        let moved = moved.unwrap();
        let add = add.unwrap();
        assert!(
            aliases(&c, dst).contains(&moved.address),
            "round {round}: told {moving} is on {dst}; it has {:?}",
            aliases(&c, dst)
        );
        assert!(
            aliases(&c, src).contains(&add.address),
            "round {round}: told {added} is on {src}; it has {:?}",
            aliases(&c, src)
        );
    }
}

/// The host's turn per node outlives a reload: a relabel still running in
/// the version loaded before and one started in the version loaded after
/// run one after the other, not at once.
#[tokio::test]
async fn relabels_across_a_reload_run_in_turn() {
    let delay = std::time::Duration::from_millis(250);
    let fake = HetznerFake::start(
        "127.0.0.1:0".parse().unwrap(),
        HetznerFakeOptions {
            response_delay: delay,
            ..HetznerFakeOptions::default()
        },
    )
    .await
    .expect("the fake starts");
    let dir = PluginDir::new();
    let manifest = format!(
        "[config]\nendpoint = \"{}\"\n[secrets]\ntoken = {{ env = \"HCLOUD_TOKEN\" }}\n[http]\nallow = [\"http://{}\"]\n",
        fake.url(),
        fake.addr()
    );
    dir.add("hetzner", guests::HETZNER, &manifest);
    let token = fake.token().to_string();
    let host = wasmprov_host::HostBuilder::new(dir.path())
        .owner_id("reload-owner")
        .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
        .secret_source(move |name| (name == "HCLOUD_TOKEN").then(|| token.clone()))
        .build()
        .await
        .expect("the host builds");
    let old = host.plugin("hetzner").expect("hetzner loaded");
    let id = node(&old, "relabelled", None).await;
    // A new version of the plugin (its manifest changed), loaded while the
    // old one is still held by a caller.
    dir.add(
        "hetzner",
        guests::HETZNER,
        &format!("{manifest}# the second version\n"),
    );
    host.reload().await.expect("the reload runs");
    let new = host.plugin("hetzner").expect("hetzner reloaded");
    assert!(!Arc::ptr_eq(&old, &new), "the reload loaded a new version");
    let labels = |v: &str| wasmprov_api::Labels::from([("pool".to_string(), v.to_string())]);
    let (blue, green) = (labels("blue"), labels("green"));
    let start = std::time::Instant::now();
    let (a, b) = tokio::join!(old.set_labels(&id, &blue), new.set_labels(&id, &green));
    let took = start.elapsed();
    a.unwrap();
    b.unwrap();
    // Each relabel is at least three answers of the fake (the host's read,
    // the plugin's read, the write): in turn, at least six.
    assert!(
        took >= delay * 6,
        "two relabels of one node across a reload overlapped: {took:?} for both"
    );
}
