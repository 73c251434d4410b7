//! The host's per-plugin metrics, read as Prometheus would, after real
//! calls: the Hetzner plugin against its fake (successes and a `not_found`),
//! and hostile guests whose HTTP and exec are denied and one that traps.
//!
//! Servers listen on 127.0.0.1 only; every wait is bounded.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use wasmprov_api::{CloudProvisioner, NodeShape, ProvisionRequest, ProvisionerError};
use wasmprov_fake::{HetznerFake, HetznerFakeOptions};
use wasmprov_host::{Host, HostBuilder};
use wasmprov_tests::{EchoServer, PluginDir, guests};

const STEP_LIMIT: Duration = Duration::from_secs(60);

async fn bounded<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(STEP_LIMIT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {STEP_LIMIT:?}"))
}

fn request(id: &str) -> ProvisionRequest {
    ProvisionRequest {
        request_id: id.into(),
        shape: NodeShape {
            zone: Some("nbg1".into()),
            ..NodeShape::new(2.0, 4 << 30)
        },
        boot: Default::default(),
        subnet: None,
    }
}

fn plugin(host: &Host, name: &str) -> Arc<dyn CloudProvisioner> {
    host.plugin(name)
        .unwrap_or_else(|| panic!("{name} not loaded: {:?}", host.errors()))
}

/// Asserts that every line of `want` is a whole line of the exposition.
fn assert_lines(text: &str, want: &[&str]) {
    for line in want {
        assert!(
            text.lines().any(|l| l == *line),
            "{line} missing in\n{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_errors_denials_faults_and_instances_are_counted_per_plugin() {
    let fake = HetznerFake::start(
        "127.0.0.1:0".parse().unwrap(),
        HetznerFakeOptions::default(),
    )
    .await
    .unwrap();
    let server = EchoServer::start().await;
    let dir = PluginDir::new();
    dir.add(
        "hetzner",
        guests::HETZNER,
        &format!(
            "[config]\nendpoint = \"{}\"\n[secrets]\ntoken = {{ env = \"HCLOUD_TOKEN\" }}\n[http]\nallow = [\"{}\"]\n",
            fake.url(),
            fake.url().trim_end_matches("/v1")
        ),
    );
    dir.add(
        "http-attacker",
        guests::HOSTILE_HTTP_UNGRANTED,
        &format!("[config]\nurl = \"{}\"\n", server.url("/steal")),
    );
    dir.add(
        "exec-attacker",
        guests::HOSTILE_EXEC_UNGRANTED,
        "[[exec]]\nprogram = \"/bin/echo\"\n[config]\nprogram = \"/bin/sh\"\n",
    );
    dir.add("trapper", guests::HOSTILE_STACK_OVERFLOW, "");
    let token = fake.token().to_string();
    let host = bounded(
        "loading the plugins",
        HostBuilder::new(dir.path())
            .owner_id("metrics-test")
            .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
            .work_dir(dir.path().join(".work"))
            .secret_source(move |name| (name == "HCLOUD_TOKEN").then(|| token.clone()))
            .build(),
    )
    .await
    .expect("host builds");
    assert!(host.errors().is_empty(), "{:?}", host.errors());

    // Loaded, not called yet: every op has its zeroed series, and the probe
    // at load made one instance.
    let text = host.metrics().encode();
    assert_lines(
        &text,
        &[
            r#"wasmprov_calls_total{plugin="hetzner",op="provision",outcome="ok"} 0"#,
            r#"wasmprov_calls_total{plugin="hetzner",op="price_hint",outcome="ok"} 0"#,
            r#"wasmprov_instances_total{plugin="hetzner"} 1"#,
            r#"wasmprov_instances_in_flight{plugin="hetzner"} 0"#,
        ],
    );

    let hetzner = plugin(&host, "hetzner");
    assert!(hetzner.price_hint(&NodeShape::new(2.0, 4 << 30)).is_some());
    let node = bounded("provision", hetzner.provision_request(&request("m-1")))
        .await
        .unwrap();
    let again = bounded(
        "provision again",
        hetzner.provision_request(&request("m-1")),
    )
    .await
    .unwrap();
    assert_eq!(again.provider_id, node.provider_id);
    assert_eq!(
        bounded("describe", hetzner.describe()).await.unwrap().len(),
        1
    );
    bounded("terminate", hetzner.terminate(&node.provider_id))
        .await
        .unwrap();
    let gone = bounded("terminate again", hetzner.terminate(&node.provider_id)).await;
    assert!(
        matches!(gone, Err(ProvisionerError::NotFound(_))),
        "{gone:?}"
    );

    // Denied HTTP and exec: the guests see the denial as an error value.
    let err = bounded(
        "http attack",
        plugin(&host, "http-attacker").provision_request(&request("attack")),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), "invalid_config", "{err:?}");
    assert_eq!(server.connections(), 0);
    let err = bounded(
        "exec attack",
        plugin(&host, "exec-attacker").provision_request(&request("attack")),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), "invalid_config", "{err:?}");
    // A guest bug: a trap, a plugin fault.
    let err = bounded(
        "trap",
        plugin(&host, "trapper").provision_request(&request("attack")),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), "plugin", "{err:?}");

    let text = host.metrics().encode();
    assert_lines(
        &text,
        &[
            // hetzner: two provisions (one node), a describe, a terminate
            // and a terminate of the node already gone.
            r#"wasmprov_calls_total{plugin="hetzner",op="price_hint",outcome="ok"} 1"#,
            r#"wasmprov_calls_total{plugin="hetzner",op="provision",outcome="ok"} 2"#,
            r#"wasmprov_calls_total{plugin="hetzner",op="describe",outcome="ok"} 1"#,
            r#"wasmprov_calls_total{plugin="hetzner",op="terminate",outcome="ok"} 1"#,
            r#"wasmprov_calls_total{plugin="hetzner",op="terminate",outcome="not_found"} 1"#,
            r#"wasmprov_errors_total{plugin="hetzner",op="terminate",kind="not_found"} 1"#,
            r#"wasmprov_call_duration_seconds_count{plugin="hetzner",op="provision"} 2"#,
            r#"wasmprov_call_duration_seconds_count{plugin="hetzner",op="terminate"} 2"#,
            // One instance per call, plus the probe at load; none left.
            r#"wasmprov_instances_total{plugin="hetzner"} 7"#,
            r#"wasmprov_instances_in_flight{plugin="hetzner"} 0"#,
            // The attackers: denied, and the call failed with the guest's error.
            r#"wasmprov_denials_total{plugin="http-attacker",kind="http"} 1"#,
            r#"wasmprov_denials_total{plugin="exec-attacker",kind="exec"} 1"#,
            r#"wasmprov_calls_total{plugin="http-attacker",op="provision",outcome="invalid_config"} 1"#,
            r#"wasmprov_errors_total{plugin="exec-attacker",op="provision",kind="invalid_config"} 1"#,
            // The trap: an error of kind `plugin`, and a fault.
            r#"wasmprov_calls_total{plugin="trapper",op="provision",outcome="plugin"} 1"#,
            r#"wasmprov_faults_total{plugin="trapper",fault="trap"} 1"#,
            r#"wasmprov_instances_in_flight{plugin="trapper"} 0"#,
        ],
    );
    // Nothing is counted for what did not happen.
    assert!(
        !text.contains(r#"wasmprov_faults_total{plugin="hetzner""#),
        "{text}"
    );
    assert!(
        !text.contains(r#"wasmprov_denials_total{plugin="hetzner""#),
        "{text}"
    );
    // A latency was observed in a plausible bucket: provisioning against a
    // loopback fake takes more than 10 µs.
    assert_lines(
        &text,
        &[
            r#"wasmprov_call_duration_seconds_bucket{le="0.00001",plugin="hetzner",op="provision"} 0"#,
        ],
    );
    assert!(text.ends_with("# EOF\n"));
}
