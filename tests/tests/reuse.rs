//! Price hints answered by reused instances (`HostBuilder::price_hint_reuse`),
//! with the real probe component: what an instance keeps between hints, and
//! when the host drops it instead of reusing it.

use std::sync::Arc;

use wasmprov_api::{CloudProvisioner, NodeShape, PluginFault, ProvisionerError};
use wasmprov_host::{Host, HostBuilder};
use wasmprov_tests::{PluginDir, guests};

async fn probe_host(reuse: Option<u32>) -> (PluginDir, Host, Arc<dyn CloudProvisioner>) {
    let dir = PluginDir::new();
    dir.add("probe", guests::PROBE, "");
    let mut builder = HostBuilder::new(dir.path())
        .owner_id("test-owner")
        .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
        .work_dir(dir.path().join(".work"));
    if let Some(n) = reuse {
        builder = builder.price_hint_reuse(n);
    }
    let host = builder.build().await.expect("host builds");
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let p = host.plugin("probe").expect("probe loaded");
    (dir, host, p)
}

fn mode(m: &str) -> NodeShape {
    let mut shape = NodeShape::new(2.0, 4 << 30);
    shape.labels.insert("mode".into(), m.into());
    shape
}

/// The answer's type: `probe-call-N`, N the hints the instance has answered.
fn count(host: &Host) -> String {
    host.wasm_plugin("probe")
        .unwrap()
        .try_price_hint(&mode("count"))
        .expect("count answers")
        .expect("with a price")
        .instance_type
        .trim_start_matches("probe-call-")
        .to_string()
}

fn metric(host: &Host, name: &str) -> String {
    let text = host.metrics().encode();
    let prefix = format!("{name}{{plugin=\"probe\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn without_reuse_every_hint_gets_a_fresh_instance() {
    let (_dir, host, _p) = probe_host(None).await;
    let seen: Vec<String> = (0..4).map(|_| count(&host)).collect();
    assert_eq!(seen, ["1", "1", "1", "1"]);
    // The probe at load, then one per call.
    assert_eq!(metric(&host, "wasmprov_instances_total"), "5");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_instance_answers_up_to_the_limit_then_is_replaced() {
    let (_dir, host, p) = probe_host(Some(3)).await;
    let seen: Vec<String> = (0..7).map(|_| count(&host)).collect();
    assert_eq!(seen, ["1", "2", "3", "1", "2", "3", "1"]);
    assert_eq!(metric(&host, "wasmprov_instances_total"), "4");
    assert_eq!(metric(&host, "wasmprov_instances_in_flight"), "0");
    // Calls that can do I/O never reuse: a provision gets its own instance.
    let node = p
        .provision_request(&wasmprov_api::ProvisionRequest {
            request_id: "r1".into(),
            shape: mode(""),
            boot: Default::default(),
            subnet: None,
        })
        .await
        .expect("provision works");
    assert_eq!(node.provider_id, "r1");
    assert_eq!(metric(&host, "wasmprov_instances_total"), "5");
    // The warm instance (one hint answered) is still there for hints.
    assert_eq!(count(&host), "2");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_error_keeps_the_instance_a_fault_drops_it() {
    let (_dir, host, _p) = probe_host(Some(100)).await;
    let wasm = host.wasm_plugin("probe").unwrap();
    assert_eq!(count(&host), "1");
    // A contract error is an answer: the instance stays.
    let err = wasm.try_price_hint(&mode("unsupported")).unwrap_err();
    assert!(matches!(err, ProvisionerError::Unsupported(_)), "{err:?}");
    assert_eq!(count(&host), "3");
    // Each kind of fault drops the instance; the next hint starts afresh.
    for (m, fault) in [
        ("trap", PluginFault::Trap),
        ("loop", PluginFault::CpuLimit),
        ("membomb", PluginFault::MemoryLimit),
    ] {
        let err = wasm.try_price_hint(&mode(m)).unwrap_err();
        assert!(
            matches!(err, ProvisionerError::Plugin { fault: f, .. } if f == fault),
            "{m}: {err:?}"
        );
        assert_eq!(count(&host), "1", "after {m}");
        assert_eq!(count(&host), "2", "after {m}");
    }
    // The fault's message carries this call's stderr only.
    let err = wasm.try_price_hint(&mode("panic")).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("probe was asked to panic"), "{text}");
    assert_eq!(text.matches("panicked").count(), 1, "{text}");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_instance_whose_memory_grew_is_not_kept() {
    let (_dir, host, _p) = probe_host(Some(100)).await;
    let wasm = host.wasm_plugin("probe").unwrap();
    assert_eq!(count(&host), "1");
    let grown = wasm
        .try_price_hint(&mode("grow"))
        .expect("grow answers")
        .expect("with a price");
    assert_eq!(grown.instance_type, "probe-call-2");
    assert_eq!(count(&host), "1");
}

#[tokio::test(flavor = "multi_thread")]
async fn threads_asking_at_once_share_a_few_warm_instances() {
    let (_dir, host, _p) = probe_host(Some(1_000)).await;
    let host = Arc::new(host);
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let host = host.clone();
            std::thread::spawn(move || {
                let wasm = host.wasm_plugin("probe").unwrap();
                for _ in 0..200 {
                    let hint = wasm.try_price_hint(&mode("count")).unwrap().unwrap();
                    assert!(hint.instance_type.starts_with("probe-call-"));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no thread failed");
    }
    // 800 hints; at most one instance per thread was ever made at once,
    // and the warm ones were reused (plus the probe at load).
    let made: u32 = metric(&host, "wasmprov_instances_total").parse().unwrap();
    assert!((2..=5).contains(&made), "{made} instances for 800 hints");
    assert_eq!(metric(&host, "wasmprov_instances_in_flight"), "0");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kept_instance_reads_the_values_of_each_call_not_of_its_first() {
    // A secret read from a file: an I/O call re-reads it, and every later
    // hint, from a kept instance or a fresh one, must see that value.
    let dir = PluginDir::new();
    let file = dir.path().join("token.txt");
    std::fs::write(&file, "first-3c1d").unwrap();
    dir.add(
        "probe",
        guests::PROBE,
        &format!("[secrets]\ntoken = {{ file = \"{}\" }}\n", file.display()),
    );
    let host = HostBuilder::new(dir.path())
        .owner_id("test-owner")
        .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
        .work_dir(dir.path().join(".work"))
        .price_hint_reuse(8)
        .build()
        .await
        .expect("host builds");
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let p = host.plugin("probe").expect("probe loaded");
    let plugin = host.wasm_plugin("probe").unwrap();
    let token = || {
        let mut shape = mode("config");
        shape.labels.insert("key".into(), "token".into());
        plugin
            .try_price_hint(&shape)
            .expect("config answers")
            .expect("with a price")
            .instance_type
    };
    let provision = |id: &'static str| {
        let p = p.clone();
        async move {
            p.provision_request(&wasmprov_api::ProvisionRequest {
                request_id: id.into(),
                shape: mode(""),
                boot: Default::default(),
                subnet: None,
            })
            .await
            .expect("provision works")
        }
    };
    provision("r1").await;
    assert_eq!(token(), "first-3c1d");
    assert_eq!(token(), "first-3c1d");
    let created = metric(&host, "wasmprov_instances_total");

    std::fs::write(&file, "second-77ab").unwrap();
    provision("r2").await;
    // The kept instance answers (no instance made for the hint) and reads
    // the rotated value, not the one it read at its first hint.
    assert_eq!(token(), "second-77ab");
    assert_eq!(token(), "second-77ab");
    let now: u64 = metric(&host, "wasmprov_instances_total").parse().unwrap();
    assert_eq!(
        now,
        created.parse::<u64>().unwrap() + 1,
        "only the provision made an instance"
    );
}
