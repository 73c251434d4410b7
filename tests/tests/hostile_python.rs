//! The attacks of `hostile.rs` that apply to any language, run by a Python
//! guest (`tests/python-guests/hostile`, built with componentize-py): HTTP
//! to hosts it was not granted, reading files, reading the environment, an
//! endless loop and a memory bomb. The interpreter's own WASI imports are
//! linked as for Rust guests and deny the same: no files, no sockets, no
//! environment. After each attack a normal call to the same plugin works.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use wasmprov_api::{CloudProvisioner, NodeHandle, NodeShape, PluginFault, ProvisionRequest};
use wasmprov_api::{ProvisionerError, Result};
use wasmprov_host::{Host, HostBuilder};
use wasmprov_tests::{EchoServer, PluginDir};

const OWNER: &str = "hostile-python-owner";
/// A variable of the host's environment that must not reach the guest.
const CANARY: &str = "WASMPROV_HOSTILE_CANARY";
const STEP_LIMIT: Duration = Duration::from_secs(120);

fn guest() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostile-python.wasm");
        wasmprov_guest_build::build_python(
            &repo.join("wit"),
            &repo.join("tests/python-guests/hostile"),
            &out,
        )
        .unwrap();
        out
    })
}

async fn bounded<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(STEP_LIMIT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {STEP_LIMIT:?}"))
}

/// The guest loaded as `attacker` with `manifest` (config, grants, limits).
async fn load(manifest: &str) -> (PluginDir, Host, Arc<dyn CloudProvisioner>) {
    let dir = PluginDir::new();
    dir.add("attacker", guest().to_str().unwrap(), manifest);
    let host = bounded(
        "loading",
        HostBuilder::new(dir.path())
            .owner_id(OWNER)
            .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
            .work_dir(dir.path().join(".work"))
            .build(),
    )
    .await
    .expect("host builds");
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let p = host.plugin("attacker").expect("loaded");
    (dir, host, p)
}

fn request(id: &str) -> ProvisionRequest {
    ProvisionRequest {
        request_id: id.into(),
        shape: NodeShape::new(1.0, 1 << 30),
        boot: Default::default(),
        subnet: None,
    }
}

async fn attack(p: &Arc<dyn CloudProvisioner>) -> Result<NodeHandle> {
    bounded("the attack", p.provision_request(&request("attack"))).await
}

async fn assert_normal(p: &Arc<dyn CloudProvisioner>) {
    let node = bounded("the normal call", p.provision_request(&request("normal")))
        .await
        .unwrap_or_else(|e| panic!("a normal call after the attack failed: {e:?}"));
    assert_eq!(node.labels.get("path").map(String::as_str), Some("normal"));
}

fn fault_of(err: &ProvisionerError) -> PluginFault {
    match err {
        ProvisionerError::Plugin { fault, .. } => *fault,
        other => panic!("expected a plugin fault, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ungranted_http_is_denied_and_nothing_is_sent() {
    let server = EchoServer::start().await;
    // Granted: nothing but this loopback server's port; tried: others.
    let (_dir, _host, p) = load(&format!(
        "[config]\nattack = \"http\"\n[http]\nallow = [\"http://127.0.0.1:{}\"]\n",
        server.addr.port()
    ))
    .await;
    let node = attack(&p).await.expect("the attack reports what it saw");
    for (k, v) in node.labels.iter().filter(|(k, _)| k.starts_with("try ")) {
        assert!(
            v.contains("HttpRequestDenied") || v.contains("refused"),
            "{k}: {v}"
        );
        assert!(!v.starts_with("GOT"), "{k} got through: {v}");
    }
    assert_eq!(server.hits(), 0, "a request reached the server");
    assert_normal(&p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_cannot_be_read_or_listed() {
    let (_dir, _host, p) = load("[config]\nattack = \"file\"\n").await;
    let node = attack(&p).await.expect("the attack reports what it saw");
    let tries: Vec<_> = node
        .labels
        .iter()
        .filter(|(k, _)| k.starts_with("try "))
        .collect();
    assert_eq!(tries.len(), 4, "{node:?}");
    for (k, v) in tries {
        assert!(v.starts_with("refused: "), "{k}: {v}");
        assert!(!v.contains("root:"), "{k}: {v}");
    }
    assert_normal(&p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_host_environment_is_not_inherited() {
    // SAFETY of the test: one variable set before the host starts, read by no other test.
    #[allow(unsafe_code)]
    unsafe {
        std::env::set_var(CANARY, "leaked-3b1f");
    }
    let (_dir, _host, p) = load("[config]\nattack = \"env\"\n").await;
    let node = attack(&p).await.expect("the attack reports what it saw");
    let environ = node.labels.get("environ").expect("environ label");
    let vars: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(environ).expect("JSON");
    assert!(!environ.contains("leaked-3b1f"), "{environ}");
    assert!(
        vars.keys()
            .all(|k| !["PATH", "HOME", CANARY].contains(&k.as_str())),
        "{environ}"
    );
    assert_normal(&p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_loop_hits_the_cpu_limit() {
    let (_dir, _host, p) = load("[config]\nattack = \"cpu\"\n[limits]\ncpu_time_ms = 500\n").await;
    let start = Instant::now();
    let err = attack(&p).await.unwrap_err();
    assert_eq!(fault_of(&err), PluginFault::CpuLimit, "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "{:?}",
        start.elapsed()
    );
    assert_normal(&p).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_bomb_hits_the_memory_limit() {
    let (_dir, _host, p) = load("[config]\nattack = \"memory\"\n[limits]\nmemory_mib = 96\n").await;
    let err = attack(&p).await.unwrap_err();
    assert_eq!(fault_of(&err), PluginFault::MemoryLimit, "{err}");
    assert_normal(&p).await;
}
