//! Contract 0.3's calls beyond the core, through the host: set-labels, a
//! subnet per request and the `networking` export (stable addresses,
//! target groups, subnet capacity), on the `netcloud` test guest against
//! the refcloud fake's endpoints for them; each answer checked against
//! what the fake holds.

use std::collections::BTreeMap;
use std::sync::Arc;

use wasmprov_api::{
    AddressKind, AddressRequest, CloudProvisioner, Interfaces, Labels, NodeShape, ProvisionRequest,
    ProvisionerError, Target,
};
use wasmprov_fake::refcloud::{RefCloudFake, RefCloudFakeOptions, TARGET_GROUP};
use wasmprov_tests::{PluginDir, guests};

const OWNER: &str = "net-owner";

struct Net {
    fake: RefCloudFake,
    _dir: PluginDir,
    host: wasmprov_host::Host,
    p: Arc<dyn CloudProvisioner>,
}

async fn net() -> Net {
    let fake = RefCloudFake::start(
        "127.0.0.1:0".parse().unwrap(),
        RefCloudFakeOptions::default(),
    )
    .await
    .expect("the fake starts");
    let dir = PluginDir::new();
    dir.add(
        "netcloud",
        guests::NETCLOUD,
        &format!(
            "[config]\nendpoint = \"{}\"\n[secrets]\ntoken = {{ env = \"REFCLOUD_TOKEN\" }}\n[http]\nallow = [\"http://{}\"]\n",
            fake.url(),
            fake.addr()
        ),
    );
    let token = fake.token().to_string();
    let host = wasmprov_host::HostBuilder::new(dir.path())
        .owner_id(OWNER)
        .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
        .secret_source(move |name| (name == "REFCLOUD_TOKEN").then(|| token.clone()))
        .build()
        .await
        .expect("the host builds");
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let p = host.plugin("netcloud").expect("netcloud loaded");
    Net {
        fake,
        _dir: dir,
        host,
        p,
    }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

fn without_reserved(l: &BTreeMap<String, String>) -> Labels {
    l.iter()
        .filter(|(k, _)| !wasmprov_api::provenance::is_reserved_label(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

async fn node(n: &Net, id: &str, subnet: Option<&str>) -> String {
    let shape = NodeShape {
        labels: labels(&[("tier", "web")]),
        ..NodeShape::new(2.0, 4 << 30)
    };
    let req = ProvisionRequest {
        subnet: subnet.map(str::to_string),
        ..ProvisionRequest::new(id, shape)
    };
    n.p.provision_request(&req).await.unwrap().provider_id
}

#[tokio::test]
async fn set_labels_replaces_the_callers_labels_and_keeps_the_reserved_ones() {
    let n = net().await;
    assert_eq!(
        n.p.interfaces(),
        Interfaces {
            set_labels: true,
            networking: true
        }
    );
    let info = n.host.wasm_plugin("netcloud").unwrap().info().clone();
    assert_eq!(
        (info.contract.as_str(), info.interfaces.networking),
        ("0.3.0", true)
    );

    let id = node(&n, "lbl-1", None).await;
    let before = n.fake.nodes()[0].labels.clone();
    let wanted = labels(&[("role", "db"), ("team", "core")]);
    let answer = n.p.set_labels(&id, &wanted).await.unwrap();
    assert_eq!(answer.provider_id, id);
    assert_eq!(without_reserved(&answer.labels), wanted, "tier is gone");
    let held = n.fake.nodes()[0].labels.clone();
    assert_eq!(without_reserved(&held), wanted);
    for (k, v) in before
        .iter()
        .filter(|(k, _)| wasmprov_api::provenance::is_reserved_label(k))
    {
        assert_eq!(held.get(k), Some(v), "{k} kept");
    }
    let got = n.p.get(&id).await.unwrap().unwrap();
    assert_eq!(without_reserved(&got.labels), wanted);

    // A reserved key never reaches the plugin.
    let requests = n.fake.request_count();
    for key in ["wasmprov-owner", "wasmprov-request", "wasmprov-group"] {
        let r = n.p.set_labels(&id, &labels(&[(key, "mine")])).await;
        assert!(
            matches!(&r, Err(ProvisionerError::InvalidConfig(m)) if m.contains(key)),
            "{r:?}"
        );
    }
    assert_eq!(n.fake.request_count(), requests, "nothing was sent");

    // Another owner's node, and a node gone, are not found.
    let foreign = n.fake.plant(
        labels(&[("wasmprov-owner", "someone-else")])
            .into_iter()
            .collect(),
    );
    assert!(matches!(
        n.p.set_labels(&foreign, &wanted).await,
        Err(ProvisionerError::NotFound(_))
    ));
    assert_eq!(
        without_reserved(&n.fake.nodes()[1].labels),
        Labels::new(),
        "untouched"
    );
    n.p.terminate(&id).await.unwrap();
    assert!(matches!(
        n.p.set_labels(&id, &wanted).await,
        Err(ProvisionerError::NotFound(_))
    ));
}

#[tokio::test]
async fn a_node_goes_in_the_subnet_asked_and_capacity_counts_it() {
    let n = net().await;
    let before = n.p.subnet_capacity("subnet-a").await.unwrap();
    assert_eq!(
        (
            before.subnet.as_str(),
            before.available_addresses,
            before.total_addresses
        ),
        ("subnet-a", 8, Some(8))
    );
    assert_eq!(before.zone.as_deref(), Some("zone-a"));
    let id = node(&n, "sub-1", Some("subnet-a")).await;
    let held = &n.fake.nodes()[0];
    assert_eq!(
        (held.id.as_str(), held.subnet.as_deref()),
        (id.as_str(), Some("subnet-a"))
    );
    let after = n.p.subnet_capacity("subnet-a").await.unwrap();
    assert_eq!(after.available_addresses, 7);
    // A subnet the cloud does not have: refused, nothing made.
    let r =
        n.p.provision_request(&ProvisionRequest {
            subnet: Some("subnet-zz".into()),
            ..ProvisionRequest::new("sub-2", NodeShape::new(2.0, 4 << 30))
        })
        .await;
    assert!(r.is_err(), "{r:?}");
    assert_eq!(n.fake.nodes().len(), 1);
    assert!(matches!(
        n.p.subnet_capacity("subnet-zz").await,
        Err(ProvisionerError::NotFound(_))
    ));
}

#[tokio::test]
async fn stable_addresses_move_between_nodes_and_are_released() {
    let n = net().await;
    let a = node(&n, "adr-1", None).await;
    let b = node(&n, "adr-2", None).await;
    let private = AddressRequest {
        kind: AddressKind::Private,
        address: None,
    };
    let got = n.p.assign_address(&a, &private).await.unwrap();
    assert_eq!(
        (got.address.as_str(), got.kind, got.provider_id.as_deref()),
        ("10.9.0.1", AddressKind::Private, Some(a.as_str()))
    );
    let held = n.fake.addresses();
    assert_eq!(
        (held.len(), held[0].node_id.as_deref()),
        (1, Some(a.as_str()))
    );
    // Again: no change. Then moved to the second node, by IP.
    let again = AddressRequest {
        kind: AddressKind::Private,
        address: Some(got.address.clone()),
    };
    n.p.assign_address(&a, &again).await.unwrap();
    assert_eq!(n.fake.addresses().len(), 1);
    let moved = n.p.assign_address(&b, &again).await.unwrap();
    assert_eq!(moved.provider_id.as_deref(), Some(b.as_str()));
    assert_eq!(n.fake.addresses()[0].node_id.as_deref(), Some(b.as_str()));
    // A public one, by the cloud's id.
    let public =
        n.p.assign_address(
            &a,
            &AddressRequest {
                kind: AddressKind::Public,
                address: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(public.address, "203.0.113.1");
    assert_eq!(public.resource_id.as_deref(), Some("ip-000002"));
    // Released: it stays the account's, on no node; again is not found.
    n.p.release_address(&b, &got.address).await.unwrap();
    assert_eq!(n.fake.addresses()[0].node_id, None);
    assert!(matches!(
        n.p.release_address(&b, &got.address).await,
        Err(ProvisionerError::NotFound(_))
    ));
    // Another owner's node is not found, and nothing moves.
    let foreign = n.fake.plant(
        labels(&[("wasmprov-owner", "someone-else")])
            .into_iter()
            .collect(),
    );
    assert!(matches!(
        n.p.assign_address(&foreign, &again).await,
        Err(ProvisionerError::NotFound(_))
    ));
    assert_eq!(n.fake.addresses()[0].node_id, None);
}

#[tokio::test]
async fn targets_are_registered_listed_and_deregistered() {
    let n = net().await;
    let a = node(&n, "tg-1", None).await;
    let target = Target {
        group: TARGET_GROUP.into(),
        provider_id: a.clone(),
        port: Some(8080),
        health: None,
    };
    n.p.register_target(&target).await.unwrap();
    n.p.register_target(&target).await.unwrap();
    assert_eq!(
        n.fake.targets(TARGET_GROUP).unwrap(),
        vec![(a.clone(), Some(8080))],
        "once"
    );
    let listed = n.p.list_targets(TARGET_GROUP).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (
            listed[0].provider_id.as_str(),
            listed[0].port,
            listed[0].group.as_str()
        ),
        (a.as_str(), Some(8080), TARGET_GROUP)
    );
    assert!(listed[0].health.is_some());
    n.p.deregister_target(&target).await.unwrap();
    assert_eq!(n.fake.targets(TARGET_GROUP).unwrap(), vec![]);
    assert!(matches!(
        n.p.deregister_target(&target).await,
        Err(ProvisionerError::NotFound(_))
    ));
    assert!(matches!(
        n.p.list_targets("tg-nope").await,
        Err(ProvisionerError::NotFound(_))
    ));
    let foreign = n.fake.plant(
        labels(&[("wasmprov-owner", "someone-else")])
            .into_iter()
            .collect(),
    );
    let theirs = Target {
        provider_id: foreign,
        ..target
    };
    assert!(matches!(
        n.p.register_target(&theirs).await,
        Err(ProvisionerError::NotFound(_))
    ));
    assert_eq!(n.fake.targets(TARGET_GROUP).unwrap(), vec![]);
    // Metrics name each call.
    let text = n.host.metrics().encode();
    for op in ["register_target", "deregister_target", "list_targets"] {
        assert!(text.contains(&format!("op=\"{op}\"")), "{op} in metrics");
    }
}
