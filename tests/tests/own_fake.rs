//! The conformance suite against fakes it does not ship: every rule (ground
//! truth, planted nodes, faults in the cloud's dialect, leak checks) runs
//! against a fake written with the fake kit in Rust, against one written in
//! Python that the suite starts by command, and against any `FakeCloud`.
//! A planted plugin bug fails a ground-truth rule there, and a fake that
//! cannot see the plugin's nodes fails the suite rather than passing it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path as UrlPath, Request, State};
use axum::routing::get;
use bytes::Bytes;
use wasmprov_fake::kit::{self, Fake, Query, Store};
use wasmprov_testkit::{FakeCloud, FaultKind, FaultSpec, Report, Status, TruthNode};
use wasmprov_tests::{buggy_refcloud_suite, run_suite as run};

/// Every run is over well within this.
const LIMIT: Duration = Duration::from_secs(120);

fn status(report: &Report, rule: &str) -> Status {
    report.rule(rule).expect(rule).status
}

fn python_fake(args: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("fakes/refcloud.py");
    format!("python3 {} {args}", script.display())
}

fn error(status: u16, code: &str, message: &str) -> axum::response::Response {
    kit::json(
        status,
        &serde_json::json!({"error": {"code": code, "message": message}}),
    )
}

/// The reference cloud's node API, written with the fake kit.
async fn kit_refcloud() -> kit::Running {
    let error_body = |code: &str| format!(r#"{{"error":{{"code":"{code}","message":"{code}"}}}}"#);
    Fake::new("refcloud fake (kit)")
        .token("kit-token")
        .unauthorized(401, &error_body("unauthorized"))
        .creates("POST", "/v1/nodes")
        .fault("capacity", 422, &[], &error_body("insufficient_capacity"))
        .fault("quota", 403, &[], &error_body("quota_exceeded"))
        .fault("rate_limited", 429, &[("retry-after", "1")], &error_body("rate_limited"))
        .planted(|_| serde_json::json!({"type": "small", "zone": "zone-a", "capacity_type": "on-demand", "state": "running"}))
        .serve(|store| {
            axum::Router::new()
                .route("/v1/nodes", get(list).post(create))
                .route("/v1/nodes/{id}", get(one).delete(remove))
                .with_state(store)
        })
        .await
        .expect("the kit fake starts")
}

fn render(n: &kit::Node) -> serde_json::Value {
    let mut v = n.render();
    v["labels"] = serde_json::json!(n.labels);
    v
}

async fn list(State(store): State<Store>, req: Request) -> axum::response::Response {
    let query = Query::parse(req.uri().query());
    let selector: BTreeMap<String, String> = query
        .get("label_selector")
        .unwrap_or_default()
        .split(',')
        .filter_map(|t| t.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    match kit::page(store.select(&selector), &query, 25, 100) {
        Ok(page) => kit::json(
            200,
            &serde_json::json!({
                "nodes": page.items.iter().map(render).collect::<Vec<_>>(),
                "next_page": page.next_page,
            }),
        ),
        Err(m) => error(400, "invalid_request", &m),
    }
}

async fn create(
    State(store): State<Store>,
    axum::Json(body): axum::Json<serde_json::Value>,
) -> axum::response::Response {
    let labels = serde_json::from_value(body["labels"].clone()).unwrap_or_default();
    let fields = serde_json::json!({
        "type": body["type"],
        "zone": body["zone"].as_str().unwrap_or("zone-a"),
        "capacity_type": body["capacity_type"].as_str().unwrap_or("on-demand"),
        "state": "provisioning",
    });
    let node = store.create(labels, None, fields);
    kit::json(201, &serde_json::json!({"node": render(&node)}))
}

async fn one(State(store): State<Store>, UrlPath(id): UrlPath<String>) -> axum::response::Response {
    match store.get(&id) {
        Some(n) => kit::json(200, &serde_json::json!({"node": render(&n)})),
        None => error(404, "not_found", "no such node"),
    }
}

async fn remove(
    State(store): State<Store>,
    UrlPath(id): UrlPath<String>,
) -> axum::response::Response {
    match store.remove(&id) {
        Some(_) => kit::json(204, &()),
        None => error(404, "not_found", "no such node"),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fake_written_with_the_kit_runs_every_rule_plain_and_under_faults() {
    let fake = kit_refcloud().await;
    let report = run(buggy_refcloud_suite("none").fake_url(&fake.url())).await;
    report.assert_passed();
    assert!(
        report.target.contains("refcloud fake (kit)"),
        "{}",
        report.target
    );
    for rule in ["provision.single-node", "leak.none", "describe.no-foreign"] {
        assert_eq!(status(&report, rule), Status::Pass, "{rule}: {report}");
    }
    // What is left is what the suite planted behind the plugin's back.
    let left = fake.store().all();
    assert!(
        left.iter().all(|n| n
            .labels
            .get("wasmprov-owner")
            .is_none_or(|o| o == "someone-else")),
        "the suite cleans up: {left:?}"
    );

    let report = run(buggy_refcloud_suite("none")
        .fake_url(&fake.url())
        .faults(FaultSpec::default_mix()))
    .await;
    report.assert_passed();
    for kind in [
        FaultKind::Capacity,
        FaultKind::RateLimited,
        FaultKind::Reset,
    ] {
        assert!(
            report.injected.iter().any(|f| f.kind == kind),
            "no {kind} injected: {report}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fake_in_python_started_by_command_runs_every_rule() {
    let report = run(buggy_refcloud_suite("none").fake_command(&python_fake(""))).await;
    report.assert_passed();
    assert!(
        report.target.contains("refcloud fake (python)"),
        "{}",
        report.target
    );
    assert_eq!(status(&report, "leak.none"), Status::Pass, "{report}");
    let report = run(buggy_refcloud_suite("none")
        .fake_command(&python_fake(""))
        .faults(FaultSpec::default_mix()))
    .await;
    report.assert_passed();
    assert!(!report.injected.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn planted_bugs_fail_ground_truth_rules_against_a_fake_of_ones_own() {
    let report = run(buggy_refcloud_suite("leak-node").fake_command(&python_fake(""))).await;
    let leak = report.rule("leak.none").unwrap();
    assert_eq!(leak.status, Status::Fail, "{report}");
    assert!(
        leak.failures[0].contains("is still in the cloud"),
        "{report}"
    );

    let fake = kit_refcloud().await;
    let report = run(buggy_refcloud_suite("duplicate-on-retry").fake_url(&fake.url())).await;
    let single = report.rule("provision.single-node").unwrap();
    assert_eq!(single.status, Status::Fail, "{report}");
    assert!(
        single.failures[0].contains("request conformance-a made 2 nodes"),
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_fake_that_cannot_see_the_plugins_nodes_fails_rather_than_passes() {
    let report = run(buggy_refcloud_suite("none").fake_command(&python_fake("--forget"))).await;
    assert!(!report.passed(), "{report}");
    let single = report.rule("provision.single-node").unwrap();
    assert_eq!(single.status, Status::Fail, "{report}");
    assert!(
        single.failures[0].contains("the fake's ground truth has no live node"),
        "{report}"
    );
    assert_eq!(status(&report, "leak.none"), Status::Skip, "{report}");
}

/// A `FakeCloud` of one's own: the kit fake's API, with a ground truth
/// that hides every node.
struct Blind(kit::Running);

#[async_trait::async_trait]
impl FakeCloud for Blind {
    fn describe(&self) -> String {
        "a blind fake".into()
    }
    fn http_target(&self) -> Option<SocketAddr> {
        Some(self.0.addr())
    }
    fn secret(&self, _env: &str) -> Option<String> {
        Some("kit-token".into())
    }
    async fn nodes(&self) -> anyhow::Result<Vec<TruthNode>> {
        Ok(Vec::new())
    }
    async fn plant(&self, _labels: BTreeMap<String, String>) -> anyhow::Result<Option<String>> {
        Ok(None)
    }
    fn is_create(&self, req: &wasmprov_host::intercept::OutgoingRequest) -> bool {
        req.method == http::Method::POST
    }
    fn renders(&self, kind: FaultKind) -> bool {
        kind != FaultKind::Capacity
    }
    fn fault_response(
        &self,
        _kind: FaultKind,
        _req: &wasmprov_host::intercept::OutgoingRequest,
    ) -> http::Response<Bytes> {
        wasmprov_testkit::fake::json_response(429, &[("retry-after", "1")], "{}")
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn any_fake_cloud_is_accepted_and_held_to_the_same_rules() {
    let blind = Arc::new(Blind(kit_refcloud().await));
    let report = run(buggy_refcloud_suite("none").fake_cloud(blind.clone())).await;
    assert_eq!(report.target, "a blind fake");
    assert_eq!(
        status(&report, "provision.single-node"),
        Status::Fail,
        "{report}"
    );
    assert_eq!(
        status(&report, "provision.handle"),
        Status::Pass,
        "{report}"
    );

    // A fault the fake cannot render is refused before anything runs.
    let err = buggy_refcloud_suite("none")
        .fake_cloud(blind)
        .faults(FaultSpec::default_mix())
        .run()
        .await
        .expect_err("capacity faults need the fake's dialect");
    assert!(err.to_string().contains("capacity"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_fake_urls_and_commands_are_clear_errors() {
    for (suite, expected) in [
        (
            buggy_refcloud_suite("none").fake_url("http://10.1.2.3:80"),
            "loopback",
        ),
        (
            buggy_refcloud_suite("none").fake_url("http://127.0.0.1:1"),
            "does not answer /_wasmprov/info",
        ),
        (
            buggy_refcloud_suite("none").fake_command("exit 3"),
            "exited",
        ),
        (
            buggy_refcloud_suite("none").fake_command("echo http://127.0.0.1:9"),
            "exited",
        ),
        (
            buggy_refcloud_suite("none").fake_command("echo not-a-url; sleep 5"),
            "is not the fake's URL",
        ),
    ] {
        let err = tokio::time::timeout(LIMIT, suite.run())
            .await
            .expect("in time")
            .expect_err("no fake");
        let text = format!("{err:#}");
        assert!(text.contains(expected), "{text}");
    }
}
