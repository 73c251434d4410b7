//! The conformance suite (`wasmprov-testkit`) against the bundled plugins,
//! with and without faults, and against a plugin with planted bugs.

use std::time::Duration;

use wasmprov_testkit::{Fake, FaultSpec, Report, Suite};
use wasmprov_tests::{buggy_refcloud_suite, guests, run_suite as run};

/// Every run is over well within this.
const LIMIT: Duration = Duration::from_secs(120);

const HETZNER_MANIFEST: &str = r#"
name = "hetzner"
component = "hetzner.wasm"

[secrets]
token = { env = "HCLOUD_TOKEN" }

[http]
allow = ["https://api.hetzner.cloud"]
"#;

/// The plugin's retries within a call wait a share of 50 ms, 100 ms …
/// rather than of 1 s, 2 s …: the same retries, without most of a minute of
/// sleeping under injected faults.
const AWS_EC2_MANIFEST: &str = r#"
name = "aws-ec2"
component = "aws-ec2.wasm"

[config]
retry_base_ms = "50"

[secrets]
access_key_id = { env = "AWS_ACCESS_KEY_ID" }
secret_access_key = { env = "AWS_SECRET_ACCESS_KEY" }

[http]
allow = ["https://ec2.us-east-1.amazonaws.com"]
"#;

/// The suite against the EC2 plugin and moto's EC2; `None` (skipped) when
/// moto is not installed.
async fn run_ec2(faults: bool) -> Option<Report> {
    let mut suite = Suite::from_component("aws-ec2", guests::AWS_EC2.as_ref(), AWS_EC2_MANIFEST)
        .fake(Fake::Ec2);
    if faults {
        suite = suite.faults(FaultSpec::default_mix());
    }
    match tokio::time::timeout(LIMIT, suite.run())
        .await
        .expect("the suite finished in time")
    {
        Ok(report) => {
            eprintln!("{report}");
            Some(report)
        }
        Err(e) if e.downcast_ref::<wasmprov_testkit::Unavailable>().is_some() => {
            eprintln!("skipping: {e}");
            None
        }
        Err(e) => panic!("the suite ran: {e:#}"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn aws_ec2_passes() {
    if let Some(report) = run_ec2(false).await {
        report.assert_passed();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn aws_ec2_passes_under_faults() {
    if let Some(report) = run_ec2(true).await {
        report.assert_passed();
        assert!(!report.injected.is_empty());
    }
}

/// Contract 0.3's rules, each of which a plugin with set-labels and the
/// networking export must pass (not skip) against a fake that has them.
const CONTRACT_0_3_RULES: [&str; 7] = [
    "labels.set",
    "request.subnet",
    "address.assign",
    "targets",
    "subnet.capacity",
    "handle.ipv6",
    "handle.hostname",
];

fn assert_ran(report: &Report, rules: &[&str]) {
    for rule in rules {
        let r = report.rule(rule).unwrap();
        assert_eq!(
            r.status,
            wasmprov_testkit::Status::Pass,
            "{rule} did not run and pass: {report}"
        );
        assert!(r.checks > 0, "{rule}: {report}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn hetzner_passes() {
    let report = run(
        Suite::from_component("hetzner", guests::HETZNER.as_ref(), HETZNER_MANIFEST)
            .fake(Fake::Hetzner),
    )
    .await;
    report.assert_passed();
    assert_ran(&report, &CONTRACT_0_3_RULES);
}

const NETCLOUD_MANIFEST: &str = r#"
name = "netcloud"
component = "netcloud.wasm"

[secrets]
token = { env = "REFCLOUD_TOKEN" }

[http]
allow = ["https://api.refcloud.example"]
"#;

/// The rules hold for a networked plugin of another cloud too: the test
/// guest on the reference cloud, plainly and under faults.
#[tokio::test(flavor = "multi_thread")]
async fn a_networked_plugin_of_another_cloud_passes_the_contract_0_3_rules() {
    for faults in [FaultSpec::none(), FaultSpec::default_mix()] {
        let report =
            run(
                Suite::from_component("netcloud", guests::NETCLOUD.as_ref(), NETCLOUD_MANIFEST)
                    .fake(Fake::RefCloud)
                    .faults(faults),
            )
            .await;
        report.assert_passed();
        // The reference cloud's fake records no IPv6 address or hostname.
        assert_ran(&report, &CONTRACT_0_3_RULES[..5]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn hetzner_passes_under_faults() {
    let report = run(
        Suite::from_component("hetzner", guests::HETZNER.as_ref(), HETZNER_MANIFEST)
            .fake(Fake::Hetzner)
            .faults(FaultSpec::default_mix()),
    )
    .await;
    report.assert_passed();
    assert!(!report.injected.is_empty());
    assert_ran(&report, &CONTRACT_0_3_RULES);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_recorded_session_replays_offline_and_an_unrecorded_request_fails_with_a_diff() {
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("hetzner.cassette.json");
    let recorded =
        run(
            Suite::from_component("hetzner", guests::HETZNER.as_ref(), HETZNER_MANIFEST)
                .fake(Fake::Hetzner)
                .record(&cassette),
        )
        .await;
    recorded.assert_passed();
    let text = std::fs::read_to_string(&cassette).unwrap();
    assert!(!text.contains("fake-hetzner-token"), "the token leaked");
    assert!(!text.to_lowercase().contains("\"authorization\""));
    assert!(text.contains("/v1/servers"));

    // Offline: the cassette answers everything.
    let replayed =
        run(
            Suite::from_component("hetzner", guests::HETZNER.as_ref(), HETZNER_MANIFEST)
                .replay(&cassette),
        )
        .await;
    replayed.assert_passed();
    assert!(replayed.target.starts_with("cassette "));
    assert_eq!(
        replayed.rule("replay.recorded").unwrap().status,
        wasmprov_testkit::Status::Pass
    );

    // A plugin configured differently asks for another server type: the
    // replay fails naming the request, with a diff against the recording.
    let other = HETZNER_MANIFEST.replace("[secrets]", "[config]\nlocation = \"nbg1\"\n\n[secrets]");
    let failed =
        run(Suite::from_component("hetzner", guests::HETZNER.as_ref(), &other).replay(&cassette))
            .await;
    assert!(!failed.passed());
    let rule = failed.rule("replay.recorded").unwrap();
    assert_eq!(rule.status, wasmprov_testkit::Status::Fail);
    let first = &rule.failures[0];
    assert!(first.contains("is not in the cassette"), "{first}");
    assert!(first.contains("-  \"location\": \"fsn1\""), "{first}");
    assert!(first.contains("+  \"location\": \"nbg1\""), "{first}");
    assert!(!failed.unrecorded.is_empty());
}

/// The planted-bug guest against the built-in reference cloud fake.
fn buggy(bug: &str) -> Suite {
    buggy_refcloud_suite(bug).fake(Fake::RefCloud)
}

/// The rules a report failed.
fn failed(report: &Report) -> Vec<&'static str> {
    report.failures().map(|r| r.rule).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reference_plugin_without_bugs_passes_with_and_without_faults() {
    run(buggy("none")).await.assert_passed();
    let report = run(buggy("none").faults(FaultSpec::default_mix())).await;
    report.assert_passed();
    assert!(!report.injected.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_duplicate_on_retry_fails_idempotency_and_single_node() {
    let report = run(buggy("duplicate-on-retry")).await;
    let failed = failed(&report);
    assert!(failed.contains(&"provision.idempotent"), "{report}");
    assert!(failed.contains(&"provision.single-node"), "{report}");
    let seen = &report.rule("provision.single-node").unwrap().failures[0];
    assert!(
        seen.contains("request conformance-a made 2 nodes"),
        "{seen}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_foreign_node_in_describe_fails_no_foreign() {
    let report = run(buggy("foreign-in-describe")).await;
    // Its `get` answers from that describe, so it finds them too, and the
    // host refuses those answers as contract faults.
    assert_eq!(
        failed(&report),
        ["describe.no-foreign", "get.agrees", "errors.no-fault"],
        "{report}"
    );
    let seen = report
        .rule("describe.no-foreign")
        .unwrap()
        .failures
        .join("\n");
    // The host drops them from the answer (so nothing downstream sees
    // them) and counts them: the node the foreign owner provisioned and the
    // two planted in the cloud.
    assert!(
        seen.contains("describe listed 3 node(s) that do not carry this owner id"),
        "{seen}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wrong_error_variant_fails_classification() {
    let report = run(buggy("wrong-error-variant")).await;
    let failed = failed(&report);
    assert!(failed.contains(&"errors.classified"), "{report}");
    assert!(failed.contains(&"terminate.repeat"), "{report}");
    let seen = &report.rule("errors.classified").unwrap().failures[0];
    assert!(seen.contains("answered other"), "{seen}");
    assert!(seen.contains("expected not_found or success"), "{seen}");
    // Under faults, injected errors are misclassified too.
    let report =
        run(buggy("wrong-error-variant")
            .faults(FaultSpec::parse("429=0.3,quota=0.3,seed=4").unwrap()))
        .await;
    let seen = report
        .rule("errors.classified")
        .unwrap()
        .failures
        .join("\n");
    assert!(seen.contains("after an injected 429"), "{seen}");
    assert!(seen.contains("expected rate_limited"), "{seen}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_leaked_node_fails_terminate_and_leak_checks() {
    let report = run(buggy("leak-node")).await;
    let failed = failed(&report);
    assert!(failed.contains(&"terminate.removes"), "{report}");
    assert!(failed.contains(&"leak.none"), "{report}");
    let seen = &report.rule("leak.none").unwrap().failures[0];
    assert!(seen.contains("is still in the cloud"), "{seen}");
}
