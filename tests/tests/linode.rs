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
