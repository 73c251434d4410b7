//! The Linode plugin (written on the SDK's REST layer) against its own fake
//! (written with the fake kit), through the real host: the whole
//! conformance suite, plain and under faults, with pages of two instances
//! (`page`/`pages`), tags of at most 50 characters (63-character request ids
//! in the SDK's hashed long form), labels that refuse `--`, naive-UTC
//! creation times and `errors[0].reason` error bodies.

use wasmprov_fake::kit::Running;
use wasmprov_testkit::{FaultKind, FaultSpec, Suite};
use wasmprov_tests::{guests, run_suite as run};

/// The manifest the plugin comes with (the test's grants).
const MANIFEST: &str = r#"
name = "linode"
component = "linode.wasm"

[config]
region = "us-east"

[secrets]
token = { env = "LINODE_TOKEN" }

[http]
allow = ["https://api.linode.com"]
"#;

/// The suite against a fresh fake with two instances to a page (kept
/// running while the suite is).
async fn suite() -> (Suite, Running) {
    let fake = wasmprov_fake_linode::serve(2)
        .await
        .expect("the fake starts");
    let suite =
        Suite::from_component("linode", guests::LINODE.as_ref(), MANIFEST).fake_url(&fake.url());
    (suite, fake)
}

#[tokio::test(flavor = "multi_thread")]
async fn linode_passes_the_suite_plain() {
    let (suite, fake) = suite().await;
    let report = run(suite).await;
    report.assert_passed();
    for rule in [
        "describe.pages",
        "ids.awkward",
        "boot.ssh-keys",
        "boot.user-data",
        "handle.created-at",
        "shape.zone",
    ] {
        assert_eq!(
            report.rule(rule).map(|r| r.status),
            Some(wasmprov_testkit::Status::Pass),
            "{rule} was not checked: {report}"
        );
    }
    // Every tag the plugin wrote fits Linode's 3 to 50 characters, and no
    // label holds `--`.
    for node in fake.store().all() {
        let tags: Vec<String> = serde_json::from_value(node.fields["tags"].clone()).unwrap();
        assert!(tags.iter().all(|t| (3..=50).contains(&t.len())), "{tags:?}");
        assert!(
            !node.fields["label"]
                .as_str()
                .unwrap_or_default()
                .contains("--")
        );
    }
}

/// The longest owner id (63 characters): its own and its foreign owner's
/// tags take the hashed long form, and the suite's foreign owner is still a
/// valid id.
#[tokio::test(flavor = "multi_thread")]
async fn linode_passes_the_suite_with_the_longest_owner_id() {
    let (suite, _fake) = suite().await;
    let report = run(suite.owner(&format!("{}-z", "o".repeat(61)))).await;
    report.assert_passed();
}

#[tokio::test(flavor = "multi_thread")]
async fn linode_passes_the_suite_under_faults() {
    for seed in [1, 7] {
        let (suite, _fake) = suite().await;
        let spec = FaultSpec::parse(&format!("default,seed={seed}")).unwrap();
        let report = run(suite.faults(spec)).await;
        report.assert_passed();
        assert!(!report.injected.is_empty());
    }
    let (suite, _fake) = suite().await;
    let spec = FaultSpec::parse("429=0.3,capacity=0.2,quota=0.2,seed=3").unwrap();
    let report = run(suite.faults(spec)).await;
    report.assert_passed();
    for kind in [
        FaultKind::RateLimited,
        FaultKind::Capacity,
        FaultKind::Quota,
    ] {
        assert!(
            report.injected.iter().any(|f| f.kind == kind),
            "no {kind}: {report}"
        );
    }
}

/// A Linode API that answers `GET /v4/linode/instances/{id}` with instance
/// 1 whatever the id (a buggy API, or something between plugin and cloud),
/// served on loopback: the plugin, through the host, must not delete or
/// relabel instance 2 (another owner's) after checking instance 1's owner.
#[tokio::test(flavor = "multi_thread")]
async fn an_answer_about_another_instance_never_changes_the_one_asked() {
    use std::sync::{Arc, Mutex};

    use axum::extract::Path;
    use axum::routing::get;
    use serde_json::json;
    use wasmprov_api::ProvisionerError;

    let changed = Arc::new(Mutex::new(Vec::<String>::new()));
    let mine = json!({"id": 1, "label": "wasmprov-n1", "status": "running",
        "region": "us-east", "type": "g6-nanode-1", "ipv4": ["203.0.113.9"],
        "created": "2026-11-24T00:00:00", "tags": ["wasmprov-owner:o-a"]});
    let (on_delete, on_put) = (changed.clone(), changed.clone());
    let app = axum::Router::new().route(
        "/v4/linode/instances/{id}",
        get(move || {
            let mine = mine.clone();
            async move { axum::Json(mine) }
        })
        .delete(move |Path(id): Path<String>| async move {
            on_delete.lock().unwrap().push(format!("DELETE {id}"));
            axum::Json(json!({}))
        })
        .put(move |Path(id): Path<String>| async move {
            on_put.lock().unwrap().push(format!("PUT {id}"));
            axum::Json(json!({}))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = wasmprov_tests::PluginDir::new();
    dir.add(
        "linode",
        guests::LINODE,
        &format!(
            "[config]\nendpoint = \"http://{addr}/v4\"\n[secrets]\ntoken = {{ env = \"LINODE_TOKEN\" }}\n[http]\nallow = [\"http://{addr}\"]\n"
        ),
    );
    let host = wasmprov_host::HostBuilder::new(dir.path())
        .owner_id("o-a")
        .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
        .secret_source(|name| (name == "LINODE_TOKEN").then(|| "t".to_string()))
        .build()
        .await
        .expect("the host builds");
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let linode = host.plugin("linode").expect("linode loaded");
    let e = linode.terminate(&"2".to_string()).await.unwrap_err();
    assert!(matches!(e, ProvisionerError::NotFound(_)), "{e:?}");
    assert!(linode.get(&"2".to_string()).await.unwrap().is_none());
    assert!(
        changed.lock().unwrap().is_empty(),
        "{:?}",
        changed.lock().unwrap()
    );
    // The instance asked for and answered is this owner's: deleted.
    linode.terminate(&"1".to_string()).await.unwrap();
    assert_eq!(*changed.lock().unwrap(), ["DELETE 1"]);
}
