//! Hostile plugins: one guest per attack (`tests/guests/hostile-*`), each
//! loaded under a manifest that grants just what the attack needs to be
//! tried. Every test runs the attack, asserts the documented error (variant
//! and message), asserts that nothing got through (no request reached the
//! loopback server, no process survived), and then asserts that a normal
//! call to the same plugin still works. `tests/HOSTILE.md` is the summary.
//!
//! Servers listen on 127.0.0.1 only; every wait is bounded.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmprov_api::{CloudProvisioner, NodeHandle, NodeShape, PluginFault, ProvisionRequest};
use wasmprov_api::{ProvisionerError, Result};
use wasmprov_host::{Host, HostBuilder, LoadError};
use wasmprov_tests::{EchoServer, PluginDir, guests};

const OWNER: &str = "hostile-test-owner";
/// Request id of every guest's normal path (`hostile_kit::NORMAL`).
const NORMAL: &str = "normal";
/// The longest any one step of a test may take.
const STEP_LIMIT: Duration = Duration::from_secs(30);
/// The plugin name every test loads its attacker under.
const ATTACKER: &str = "attacker";
/// A secret another plugin gets from the host's secret source.
const VICTIM_SECRET: &str = "victim-secret-3b1f";

/// Runs `fut`, failing the test if it takes longer than [`STEP_LIMIT`].
async fn bounded<T>(what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(STEP_LIMIT, fut)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {STEP_LIMIT:?}"))
}

async fn host(dir: &PluginDir) -> Host {
    bounded(
        "loading the plugin directory",
        HostBuilder::new(dir.path())
            .owner_id(OWNER)
            .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
            .work_dir(dir.path().join(".work"))
            .secret_source(|name| (name == "VICTIM_SECRET").then(|| VICTIM_SECRET.to_string()))
            .build(),
    )
    .await
    .expect("host builds")
}

/// A plugin directory, its host, and the attacker plugin in it.
struct Loaded {
    dir: PluginDir,
    host: Host,
    p: Arc<dyn CloudProvisioner>,
}

/// Loads `wasm` as the plugin [`ATTACKER`] with `manifest` (grants, config, limits).
async fn load(wasm: &str, manifest: &str) -> Loaded {
    let dir = PluginDir::new();
    dir.add(ATTACKER, wasm, manifest);
    let host = host(&dir).await;
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let p = host.plugin(ATTACKER).expect("attacker loaded");
    Loaded { dir, host, p }
}

fn request(id: &str) -> ProvisionRequest {
    ProvisionRequest {
        request_id: id.into(),
        shape: NodeShape::new(1.0, 1 << 30),
        boot: Default::default(),
        subnet: None,
    }
}

/// Runs the attack (a `provision` that is not the normal one).
async fn attack(p: &Arc<dyn CloudProvisioner>) -> Result<NodeHandle> {
    bounded("the attack", p.provision_request(&request("attack"))).await
}

/// Runs the attack, which must be answered with a node reporting what it saw.
async fn attack_observed(p: &Arc<dyn CloudProvisioner>) -> NodeHandle {
    attack(p)
        .await
        .unwrap_or_else(|e| panic!("the attack should report what it saw, got {e:?}"))
}

/// A normal call to the same plugin works after the attack.
async fn assert_normal(p: &Arc<dyn CloudProvisioner>) {
    let node = bounded("the normal call", p.provision_request(&request(NORMAL)))
        .await
        .unwrap_or_else(|e| panic!("a normal call after the attack failed: {e:?}"));
    assert_eq!(node.provider_id, NORMAL);
    assert_eq!(
        node.labels.get("path").map(String::as_str),
        Some(NORMAL),
        "{node:?}"
    );
}

/// The `try ...` labels of a guest that made several attempts.
fn tries(node: &NodeHandle) -> Vec<(&str, &str)> {
    let tries: Vec<(&str, &str)> = node
        .labels
        .iter()
        .filter(|(k, _)| k.starts_with("try "))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert!(!tries.is_empty(), "no attempts reported: {node:?}");
    tries
}

fn label<'a>(node: &'a NodeHandle, key: &str) -> &'a str {
    node.labels
        .get(key)
        .unwrap_or_else(|| panic!("label {key:?} missing: {node:?}"))
}

/// The SDK's rendering of a host HTTP denial (`HttpError::Denied` → `InvalidConfig`).
const HTTP_DENIED: &str = "InvalidConfig(\"HTTP request denied by the host: ";
/// The SDK's rendering of an exec denial (`ExecError::Denied` → `InvalidConfig`).
const EXEC_DENIED: &str = "InvalidConfig(\"exec denied: ";

/// Wasmtime's message when one call copies more than its budget (128 MiB)
/// between guest memory and the host.
const HOSTCALL_FUEL: &str = "too much data is being copied between the host and the guest: fuel allocated for hostcalls has been exhausted";

fn fault_of(err: &ProvisionerError) -> PluginFault {
    match err {
        ProvisionerError::Plugin { fault, .. } => *fault,
        other => panic!("expected a plugin fault, got {other:?}"),
    }
}

fn assert_fault(err: &ProvisionerError, want: PluginFault, fragment: &str) {
    assert_eq!(fault_of(err), want, "{err}");
    assert!(err.to_string().contains(fragment), "{fragment:?} in {err}");
}

mod http {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn host_with_no_grant_is_denied_before_connecting() {
        let server = EchoServer::start().await;
        let l = load(
            guests::HOSTILE_HTTP_UNGRANTED,
            &format!("[config]\nurl = \"{}\"\n", server.url("/steal")),
        )
        .await;
        let err = attack(&l.p).await.unwrap_err();
        assert!(
            matches!(&err, ProvisionerError::InvalidConfig(m)
                if m.starts_with("HTTP request denied by the host") && m.contains("HttpRequestDenied")),
            "{err:?}"
        );
        assert_eq!(server.connections(), 0, "{:?}", server.requests());
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn granted_name_resolving_to_loopback_is_denied() {
        let server = EchoServer::start().await;
        let l = load(
            guests::HOSTILE_HTTP_LOCALHOST_NAME,
            &format!(
                "[http]\nallow = [\"http://localhost:*\"]\n[config]\nport = \"{}\"\n",
                server.addr.port()
            ),
        )
        .await;
        let node = attack_observed(&l.p).await;
        for (url, outcome) in tries(&node) {
            assert!(
                outcome.starts_with(HTTP_DENIED) && outcome.contains("HttpRequestDenied"),
                "{url}: {outcome}"
            );
        }
        assert_eq!(server.connections(), 0, "{:?}", server.requests());
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn cloud_metadata_addresses_are_denied() {
        let server = EchoServer::start().await;
        let l = load(
            guests::HOSTILE_HTTP_METADATA,
            &format!("[http]\nallow = [\"http://{}\"]\n", server.addr),
        )
        .await;
        let node = attack_observed(&l.p).await;
        assert_eq!(tries(&node).len(), 5, "{node:?}");
        for (url, outcome) in tries(&node) {
            assert!(
                outcome.starts_with(HTTP_DENIED) && outcome.contains("HttpRequestDenied"),
                "{url}: {outcome}"
            );
        }
        assert_eq!(server.connections(), 0);
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn loopback_ip_spellings_are_denied() {
        let server = EchoServer::start().await;
        let l = load(
            guests::HOSTILE_HTTP_IP_SPELLINGS,
            &format!(
                "[http]\nallow = [\"http://allowed.example:*\"]\n[config]\nport = \"{}\"\n",
                server.addr.port()
            ),
        )
        .await;
        let node = attack_observed(&l.p).await;
        assert_eq!(tries(&node).len(), 16, "{node:?}");
        for (url, outcome) in tries(&node) {
            assert!(
                outcome.starts_with(HTTP_DENIED) && outcome.contains("HttpRequestDenied"),
                "{url}: {outcome}"
            );
        }
        assert_eq!(server.connections(), 0, "{:?}", server.requests());
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn user_information_cannot_smuggle_a_host() {
        let server = EchoServer::start().await;
        let l = load(
            guests::HOSTILE_HTTP_USERINFO,
            &format!(
                "[http]\nallow = [\"http://allowed.example:*\"]\n[config]\nport = \"{}\"\n",
                server.addr.port()
            ),
        )
        .await;
        let node = attack_observed(&l.p).await;
        assert_eq!(tries(&node).len(), 4, "{node:?}");
        for (url, outcome) in tries(&node) {
            assert!(
                outcome.starts_with(HTTP_DENIED) && outcome.contains("HttpRequestDenied"),
                "{url}: {outcome}"
            );
        }
        assert_eq!(server.connections(), 0, "{:?}", server.requests());
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn host_header_and_request_target_cannot_be_forged() {
        let server = EchoServer::start().await;
        let l = load(
            guests::HOSTILE_HTTP_HEADER_SMUGGLE,
            &format!(
                "[http]\nallow = [\"http://{0}\"]\n[config]\nauthority = \"{0}\"\n",
                server.addr
            ),
        )
        .await;
        let node = attack_observed(&l.p).await;
        // wasi-http refuses `Host` as a forbidden header and CRLF as bad
        // syntax before a request exists; request targets must start with `/`.
        // The one-call `http.send` refuses the same before anything is sent,
        // and a length or transfer coding that could split the request.
        let sdk_host = format!(
            "InvalidConfig(\"bad URL: http://{}/: header host is not allowed\")",
            server.addr
        );
        let expect = [
            ("sdk host header", sdk_host.as_str()),
            ("raw host header", "header refused: HeaderError::Forbidden"),
            ("raw HOST header", "header refused: HeaderError::Forbidden"),
            (
                "crlf injection",
                "header refused: HeaderError::InvalidSyntax",
            ),
            ("absolute-form target", "path refused"),
            ("authority-form target", "path refused"),
            (
                "one-call host header",
                "refused: header host is not allowed",
            ),
            (
                "one-call HOST header",
                "refused: header host is not allowed",
            ),
            (
                "one-call crlf injection",
                "refused: invalid value of header x-probe",
            ),
            (
                "one-call absolute-form target",
                "refused: invalid path \"http://evil.example/\": it must start with / or ?",
            ),
            (
                "one-call authority-form target",
                "refused: invalid path \"evil.example:80\": it must start with / or ?",
            ),
            (
                "one-call chunked",
                "refused: header transfer-encoding is not allowed",
            ),
            (
                "one-call short length",
                "refused: content-length \"0\" does not match the body of 38 bytes",
            ),
        ];
        for (key, want) in expect {
            assert_eq!(label(&node, key), want, "{key}");
        }
        // The one well-formed one-call request reached the server, alone.
        assert_eq!(label(&node, "one-call plain"), "reached: status 200");
        let requests = server.requests();
        assert!(
            requests.iter().all(|r| !r.contains("evil.example")),
            "{requests:?}"
        );
        assert_eq!(requests.len(), 1, "{requests:?}");
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn redirects_are_not_followed_and_the_target_is_checked() {
        let server = EchoServer::start().await;
        let target = "http://169.254.169.254/latest/meta-data/iam/security-credentials/";
        let l = load(
            guests::HOSTILE_HTTP_REDIRECT,
            &format!(
                "[http]\nallow = [\"http://{}\"]\n[config]\nurl = \"{}\"\n",
                server.addr,
                server.url(&format!("/redirect?to={target}"))
            ),
        )
        .await;
        let node = attack_observed(&l.p).await;
        assert_eq!(label(&node, "first status"), "302", "the host followed");
        assert_eq!(label(&node, "location"), target);
        let follow = label(&node, "follow");
        assert!(
            follow.starts_with(HTTP_DENIED) && follow.contains("HttpRequestDenied"),
            "{follow}"
        );
        assert_eq!(server.hits(), 1, "{:?}", server.requests());
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ten_thousand_requests_at_once_are_capped_in_flight() {
        let server = EchoServer::start().await;
        let manifest = |count: u32| {
            format!(
                "[http]\nallow = [\"http://{0}\"]\n[config]\nauthority = \"{0}\"\npath = \"/slow?ms=300\"\ncount = {count}\n[limits]\nhttp_max_in_flight = 4\nhttp_timeout_ms = 5000\n",
                server.addr
            )
        };
        // 1 500 at once fit in the handle budget. Over the in-flight cap a
        // request waits for a slot for up to its timeout (5 s here): about
        // 4 per 300 ms get through, the rest give up at 5 s as
        // `connection-limit-reached`, and the server never sees more than 4
        // at once.
        let l = load(guests::HOSTILE_HTTP_FLOOD, &manifest(1500)).await;
        let start = Instant::now();
        let node = attack_observed(&l.p).await;
        let elapsed = start.elapsed();
        let count = |k: &str| -> u64 { label(&node, k).parse().expect("a count") };
        let (ok, limited) = (count("ok"), count("limited"));
        // The cap is on requests at once, not in total: a request the host
        // gets to after the guest dropped an earlier response may go out.
        assert!(ok >= 1 && limited >= 1_400, "{node:?}");
        assert_eq!(ok + limited, 1_500, "{node:?}");
        assert_eq!(count("other") + count("refused at start"), 0, "{node:?}");
        assert!(server.max_in_flight() <= 4, "{}", server.max_in_flight());
        assert_eq!(server.hits(), ok, "{:?}", server.requests());
        assert!(elapsed < Duration::from_secs(20), "{elapsed:?}");
        assert_normal(&l.p).await;

        // 10 000 at once run out of the call's host resources (4 096 live
        // handles): the call fails with a resource-limit fault, still with
        // at most 4 requests on the wire.
        let l = load(guests::HOSTILE_HTTP_FLOOD, &manifest(10_000)).await;
        let err = attack(&l.p).await.unwrap_err();
        assert_fault(&err, PluginFault::ResourceLimit, "resource table");
        assert!(server.max_in_flight() <= 4, "{}", server.max_in_flight());
        assert_normal(&l.p).await;
    }

    /// Loads the endless-body guest with these `[limits]` lines and checks
    /// that its provision stops within 10 s at `cap` bytes, the SDK (on the
    /// one-call `http.send`) told which limit it hit (HOSTILE.md, note a).
    async fn endless_body_is_refused_at(limits: &str, cap: u64) {
        let server = EchoServer::start().await;
        let l = load(
            guests::HOSTILE_HTTP_ENDLESS_BODY,
            &format!(
                "[http]\nallow = [\"http://{}\"]\n[config]\nurl = \"{}\"\n[limits]\n{limits}",
                server.addr,
                server.url("/endless")
            ),
        )
        .await;
        let start = Instant::now();
        let err = attack(&l.p).await.unwrap_err();
        let suffix = format!("/endless: ErrorCode::HttpResponseBodySize(Some({cap}))");
        assert!(
            matches!(&err, ProvisionerError::Transport(m)
                if m.starts_with("HTTP response too large: ") && m.ends_with(&suffix)),
            "{err:?}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{:?}",
            start.elapsed()
        );
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn endless_response_body_is_cut_at_the_size_cap() {
        endless_body_is_refused_at("http_max_response_bytes = 1048576\n", 1_048_576).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_response_is_never_held_past_what_the_guest_could_take() {
        // The operator allows 256 MiB responses but gives the plugin 8 MiB
        // of memory: `http.send` reads a body whole before handing it to the
        // guest, and stops at the guest's memory limit instead.
        endless_body_is_refused_at(
            "memory_mib = 8\nhttp_max_response_bytes = 268435456\n",
            8_388_608,
        )
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn slow_drip_and_silent_servers_are_cut_at_the_request_deadline() {
        let server = EchoServer::start().await;
        let dir = PluginDir::new();
        for (name, path) in [("drip", "/drip"), ("hang", "/hang")] {
            dir.add(
                name,
                guests::HOSTILE_HTTP_SLOW_DRIP,
                &format!(
                    "[http]\nallow = [\"http://{}\"]\n[config]\nurl = \"{}\"\n[limits]\nhttp_timeout_ms = 1000\n",
                    server.addr,
                    server.url(path)
                ),
            );
        }
        let host = host(&dir).await;
        assert!(host.errors().is_empty(), "{:?}", host.errors());
        // Headers, then a byte every 500 ms: the body read runs into the
        // deadline, reported as a body timeout (HOSTILE.md, note a).
        // No headers at all: the wait for the response does.
        for (name, prefix, suffix) in [
            (
                "drip",
                "HTTP timeout: body timeout: ",
                "/drip: ErrorCode::ConnectionReadTimeout",
            ),
            (
                "hang",
                "HTTP timeout: ",
                // Connected and sent: a first-byte timeout, not a connect one.
                "/hang: ErrorCode::ConnectionReadTimeout",
            ),
        ] {
            let p = host.plugin(name).unwrap();
            let start = Instant::now();
            let err = attack(&p).await.unwrap_err();
            assert!(
                matches!(&err, ProvisionerError::Transport(m)
                    if m.starts_with(prefix) && m.ends_with(suffix)),
                "{name}: {err:?}"
            );
            let elapsed = start.elapsed();
            assert!(
                elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(5),
                "{name}: {elapsed:?}"
            );
            assert_normal(&p).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn endless_upload_to_a_denied_host_is_bounded() {
        let server = EchoServer::start().await;
        let l = load(
            guests::HOSTILE_HTTP_UPLOAD_FLOOD,
            &format!(
                "[http]\nallow = [\"http://{}\"]\n[config]\nauthority = \"169.254.169.254\"\npath = \"/upload\"\n",
                server.addr
            ),
        )
        .await;
        let start = Instant::now();
        let node = attack_observed(&l.p).await;
        let elapsed = start.elapsed();
        assert_eq!(
            label(&node, "answer"),
            "error code: ErrorCode::HttpRequestDenied",
            "{node:?}"
        );
        let written: u64 = label(&node, "written").parse().unwrap();
        assert!(written <= 65 << 20, "the host read {written} bytes");
        assert_ne!(label(&node, "write error"), "none", "{node:?}");
        assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
        assert_eq!(server.connections(), 0);
        assert_normal(&l.p).await;
    }
}

mod exec {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn ungranted_program_is_denied() {
        let l = load(
            guests::HOSTILE_EXEC_UNGRANTED,
            "[[exec]]\nprogram = \"/bin/echo\"\n[config]\nprogram = \"/bin/sh\"\n",
        )
        .await;
        let err = attack(&l.p).await.unwrap_err();
        assert_eq!(
            err,
            ProvisionerError::InvalidConfig(
                "exec denied: program \"/bin/sh\" is not granted".into()
            )
        );
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn other_spellings_of_a_granted_path_are_denied() {
        let l = load(
            guests::HOSTILE_EXEC_PATH_ALIAS,
            "[[exec]]\nprogram = \"/bin/echo\"\nargs = [\"**\"]\n[config]\nprogram = \"/bin/echo\"\n",
        )
        .await;
        let node = attack_observed(&l.p).await;
        assert_eq!(tries(&node).len(), 11, "{node:?}");
        for (program, outcome) in tries(&node) {
            assert!(
                outcome.starts_with(EXEC_DENIED) && outcome.contains("is not granted"),
                "{program}: {outcome}"
            );
        }
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn arguments_outside_the_pattern_are_denied() {
        let l = load(
            guests::HOSTILE_EXEC_ARGS,
            "[[exec]]\nprogram = \"/bin/echo\"\nargs = [\"hello\", \"*\"]\n[config]\nprogram = \"/bin/echo\"\n",
        )
        .await;
        let node = attack_observed(&l.p).await;
        assert_eq!(tries(&node).len(), 9, "{node:?}");
        for (args, outcome) in tries(&node) {
            assert!(
                outcome.starts_with(EXEC_DENIED) && outcome.contains("do not fit any grant"),
                "{args}: {outcome}"
            );
        }
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn shell_metacharacters_are_passed_literally() {
        let l = load(
            guests::HOSTILE_EXEC_SHELL_META,
            "[[exec]]\nprogram = \"/bin/echo\"\nargs = [\"**\"]\n[config]\nprogram = \"/bin/echo\"\n",
        )
        .await;
        let node = attack_observed(&l.p).await;
        assert_eq!(
            label(&node, "stdout"),
            "hello; cat /etc/passwd $(id) `id` && touch pwned | id > pwned $HOME *\n"
        );
        assert_eq!(label(&node, "exit"), "Some(0)");
        let work = l.dir.path().join(".work").join(ATTACKER);
        assert!(!work.join("pwned").exists(), "a shell ran the arguments");
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn environment_is_neither_inherited_nor_settable() {
        let l = load(
            guests::HOSTILE_EXEC_ENV,
            "[[exec]]\nprogram = \"/usr/bin/env\"\n[config]\nprogram = \"/usr/bin/env\"\n",
        )
        .await;
        let node = attack_observed(&l.p).await;
        assert_eq!(tries(&node).len(), 3, "{node:?}");
        for (var, outcome) in tries(&node) {
            let name = var.trim_start_matches("try ");
            assert_eq!(
                outcome,
                format!(
                    "InvalidConfig(\"exec denied: environment variable \\\"{name}\\\" is not granted for this program\")"
                ),
            );
        }
        assert_eq!(label(&node, "env stdout"), "", "the environment leaked");
        assert_normal(&l.p).await;
    }

    /// A script that records its pid (its process group: the host starts
    /// each program in a group of its own), starts 50 `sleep 60` children and
    /// then sleeps itself.
    fn fork_bomb(dir: &PluginDir) -> (String, std::path::PathBuf) {
        use std::os::unix::fs::PermissionsExt;
        let pid_file = dir.path().join("bomb.pid");
        let script = dir.path().join("bomb.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho $$ > '{}'\ni=0\nwhile [ \"$i\" -lt 50 ]; do\n  sleep 60 &\n  i=$((i+1))\ndone\nsleep 60\n",
                pid_file.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        (script.display().to_string(), pid_file)
    }

    /// Live (not zombie) processes whose process group is `pgid`.
    fn live_in_group(pgid: i32) -> Vec<String> {
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            let Some((head, rest)) = stat.rsplit_once(") ") else {
                continue;
            };
            let fields: Vec<&str> = rest.split_whitespace().collect();
            if fields.len() > 2 && fields[2] == pgid.to_string() && fields[0] != "Z" {
                found.push(format!("{head}) {}", fields[0]));
            }
        }
        found
    }

    /// Waits up to 3 s for the group to die out; returns the survivors.
    async fn survivors(pid_file: &std::path::Path) -> Vec<String> {
        let pgid: i32 = std::fs::read_to_string(pid_file)
            .expect("the script ran and wrote its pid")
            .trim()
            .parse()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(3);
        loop {
            let live = live_in_group(pgid);
            if live.is_empty() || Instant::now() > until {
                return live;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Kills what is left of the group, so a failing test leaves nothing behind.
    struct KillGroup(std::path::PathBuf);

    impl Drop for KillGroup {
        fn drop(&mut self) {
            if let Ok(pid) = std::fs::read_to_string(&self.0) {
                let _ = std::process::Command::new("/bin/sh")
                    .args(["-c", &format!("kill -KILL -- -{} 2>/dev/null", pid.trim())])
                    .status();
            }
        }
    }

    /// Runs the attack, retrying when the freshly written script is still
    /// "busy" (another test's fork held our write descriptor for a moment).
    async fn attack_script(p: &Arc<dyn CloudProvisioner>) -> Result<NodeHandle> {
        for _ in 0..3 {
            match attack(p).await {
                Err(ProvisionerError::Other(m)) if m.contains("Text file busy") => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                other => return other,
            }
        }
        attack(p).await
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fork_bomb_is_killed_with_its_process_group() {
        let dir = PluginDir::new();
        let (script, pid_file) = fork_bomb(&dir);
        let _cleanup = KillGroup(pid_file.clone());
        dir.add(
            ATTACKER,
            guests::HOSTILE_EXEC_FORK_BOMB,
            &format!("[[exec]]\nprogram = \"{script}\"\ntimeout_ms = 500\n[config]\nprogram = \"{script}\"\n"),
        );
        let host = host(&dir).await;
        let p = host.plugin(ATTACKER).unwrap();
        let start = Instant::now();
        let err = attack_script(&p).await.unwrap_err();
        assert_eq!(
            err,
            ProvisionerError::Transport(format!(
                "exec timed out: {script} ran longer than 500 ms and was killed"
            ))
        );
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        let live = survivors(&pid_file).await;
        assert!(live.is_empty(), "survivors of the group: {live:?}");
        assert_normal(&p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn processes_do_not_outlive_a_call_cut_by_its_deadline() {
        let dir = PluginDir::new();
        let (script, pid_file) = fork_bomb(&dir);
        let _cleanup = KillGroup(pid_file.clone());
        // The exec grant allows 30 s (the default), the call only 500 ms.
        dir.add(
            ATTACKER,
            guests::HOSTILE_EXEC_FORK_BOMB,
            &format!("[[exec]]\nprogram = \"{script}\"\n[config]\nprogram = \"{script}\"\n[limits]\ncall_timeout_ms = 500\n"),
        );
        let host = host(&dir).await;
        let p = host.plugin(ATTACKER).unwrap();
        let err = attack_script(&p).await.unwrap_err();
        assert_fault(&err, PluginFault::Timeout, "500 ms deadline");
        let live = survivors(&pid_file).await;
        assert!(live.is_empty(), "survivors of the group: {live:?}");
        assert_normal(&p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn endless_output_is_capped() {
        let l = load(
            guests::HOSTILE_EXEC_OUTPUT_FLOOD,
            "[[exec]]\nprogram = \"/usr/bin/yes\"\n[config]\nprogram = \"/usr/bin/yes\"\n",
        )
        .await;
        let start = Instant::now();
        let err = attack(&l.p).await.unwrap_err();
        assert_eq!(
            err,
            ProvisionerError::Other(
                "exec output too large: output exceeded 1048576 bytes; the process group was killed"
                    .into()
            )
        );
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{:?}",
            start.elapsed()
        );
        assert_normal(&l.p).await;
    }
}

mod isolation {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn host_files_are_unreachable() {
        let l = load(guests::HOSTILE_FS_READ, "").await;
        let node = attack_observed(&l.p).await;
        for key in [
            "read /etc/passwd",
            "read ../../etc/passwd",
            "list /",
            "list .",
            "write /tmp/hostile-was-here",
            "metadata /",
        ] {
            assert!(label(&node, key).starts_with("error: "), "{key}: {node:?}");
        }
        assert_eq!(label(&node, "preopens"), "[]");
        assert!(!std::path::Path::new("/tmp/hostile-was-here").exists());
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn another_plugins_config_and_secrets_are_invisible() {
        let dir = PluginDir::new();
        dir.add(
            ATTACKER,
            guests::HOSTILE_CONFIG_SNOOP,
            "[config]\nvictim_key = \"secret_b\"\nmine = \"a\"\n",
        );
        dir.add(
            "victim",
            guests::HOSTILE_ENV_SNOOP,
            "[config]\nsecret_b = \"victim-config-value\"\n[secrets]\ntoken = { env = \"VICTIM_SECRET\" }\n",
        );
        let host = host(&dir).await;
        assert!(host.errors().is_empty(), "{:?}", host.errors());
        let p = host.plugin(ATTACKER).unwrap();
        let node = attack_observed(&p).await;
        assert_eq!(label(&node, "victim value"), "absent");
        assert_eq!(label(&node, "all keys"), "mine,victim_key");
        for key in [
            "get token",
            "get HCLOUD_TOKEN",
            "get AWS_SECRET_ACCESS_KEY",
            "get ../victim/secret_b",
        ] {
            assert_eq!(label(&node, key), "absent", "{key}");
        }
        let text = format!("{node:?}");
        assert!(!text.contains("victim-config-value") && !text.contains(VICTIM_SECRET));
        assert_normal(&p).await;
        assert_normal(&host.plugin("victim").unwrap()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn raw_sockets_and_name_lookup_are_unavailable() {
        let server = EchoServer::start().await;
        let l = load(
            guests::HOSTILE_RAW_SOCKET,
            &format!(
                "[http]\nallow = [\"http://{0}\"]\n[config]\naddr = \"{0}\"\n",
                server.addr
            ),
        )
        .await;
        let node = attack_observed(&l.p).await;
        let expect = [
            ("std tcp", "error: Permission denied"),
            ("std udp", "error: Permission denied"),
            (
                "raw tcp",
                "create refused: ErrorCode { code: 1, name: \"access-denied\"",
            ),
            (
                "raw udp",
                "create refused: ErrorCode { code: 1, name: \"access-denied\"",
            ),
            (
                "lookup localhost",
                "lookup refused: ErrorCode { code: 20, name: \"permanent-resolver-failure\"",
            ),
            (
                "lookup example.com",
                "lookup refused: ErrorCode { code: 20, name: \"permanent-resolver-failure\"",
            ),
        ];
        for (key, want) in expect {
            assert!(label(&node, key).starts_with(want), "{key}: {node:?}");
        }
        assert_eq!(server.connections(), 0);
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn host_environment_is_invisible() {
        let l = load(guests::HOSTILE_ENV_SNOOP, "").await;
        let node = attack_observed(&l.p).await;
        for (key, want) in [
            ("std vars", "[]"),
            ("std args", "[]"),
            ("std HOME", "<unset>"),
            ("wasi environment", "[]"),
            ("wasi arguments", "[]"),
            ("wasi cwd", "None"),
        ] {
            assert_eq!(label(&node, key), want, "{key}");
        }
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn log_flood_finishes_and_is_capped() {
        let l = load(guests::HOSTILE_LOG_FLOOD, "").await;
        let start = Instant::now();
        let node = attack_observed(&l.p).await;
        assert_eq!(label(&node, "sent"), "100000");
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{:?}",
            start.elapsed()
        );
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stderr_flood_is_kept_to_a_bounded_tail() {
        let l = load(guests::HOSTILE_STDERR_FLOOD, "").await;
        let start = Instant::now();
        let node = attack_observed(&l.p).await;
        assert_eq!(label(&node, "written"), (64u64 << 20).to_string());
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{:?}",
            start.elapsed()
        );
        assert_normal(&l.p).await;
    }
}

mod limits {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn endless_loop_hits_the_cpu_limit() {
        let l = load(guests::HOSTILE_CPU_LOOP, "[limits]\ncpu_time_ms = 300\n").await;
        let start = Instant::now();
        let err = attack(&l.p).await.unwrap_err();
        assert_fault(&err, PluginFault::CpuLimit, "exceeded its CPU time limit");
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{:?}",
            start.elapsed()
        );
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn memory_bomb_hits_the_memory_limit() {
        let l = load(guests::HOSTILE_MEMORY_BOMB, "[limits]\nmemory_mib = 32\n").await;
        let err = attack(&l.p).await.unwrap_err();
        assert_fault(&err, PluginFault::MemoryLimit, "exceeded its memory limit");
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn unbounded_recursion_traps() {
        let l = load(guests::HOSTILE_STACK_OVERFLOW, "").await;
        let err = attack(&l.p).await.unwrap_err();
        assert_fault(&err, PluginFault::Trap, "call stack exhausted");
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_in_any_export_is_contained() {
        let l = load(guests::HOSTILE_PANIC_EVERYWHERE, "").await;
        let wasm = l.host.wasm_plugin(ATTACKER).unwrap();
        let err = wasm.try_price_hint(&NodeShape::default()).unwrap_err();
        assert_fault(&err, PluginFault::Trap, "hostile panic in price_hint");
        assert_eq!(l.p.price_hint(&NodeShape::default()), None);
        let err = attack(&l.p).await.unwrap_err();
        assert_fault(
            &err,
            PluginFault::Trap,
            "hostile panic in provision of attack",
        );
        let err = bounded("terminate", l.p.terminate(&"node-1".to_string()))
            .await
            .unwrap_err();
        assert_fault(
            &err,
            PluginFault::Trap,
            "hostile panic in terminate of node-1",
        );
        let err = bounded("describe", l.p.describe()).await.unwrap_err();
        assert_fault(&err, PluginFault::Trap, "hostile panic in describe");
        bounded("terminate", l.p.terminate(&NORMAL.to_string()))
            .await
            .unwrap();
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_panic_in_name_refuses_only_that_plugin() {
        let dir = PluginDir::new();
        dir.add("panicky", guests::HOSTILE_PANIC_NAME, "");
        dir.add("bystander", guests::HOSTILE_ENV_SNOOP, "");
        let host = host(&dir).await;
        assert!(host.plugin("panicky").is_none());
        let errors: Vec<String> = host.errors().iter().map(ToString::to_string).collect();
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(
            matches!(&host.errors()[0], LoadError::NotAProvider { plugin, .. } if plugin == "panicky"),
            "{errors:#?}"
        );
        assert!(
            errors[0].contains("failed its first call")
                && errors[0].contains("trapped")
                && errors[0].contains("hostile panic in name()"),
            "{errors:#?}"
        );
        assert_normal(&host.plugin("bystander").unwrap()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn huge_describe_is_bounded_by_guest_memory() {
        let dir = PluginDir::new();
        dir.add(ATTACKER, guests::HOSTILE_HUGE_DESCRIBE, "");
        dir.add(
            "roomy",
            guests::HOSTILE_HUGE_DESCRIBE,
            "[config]\ncount = 200000\nowned = \"true\"\n[limits]\nmemory_mib = 256\ncpu_time_ms = 30000\n",
        );
        dir.add(
            "giant",
            guests::HOSTILE_HUGE_DESCRIBE,
            "[limits]\nmemory_mib = 1024\ncpu_time_ms = 30000\n",
        );
        let host = host(&dir).await;
        // Two million handles do not fit in the default 64 MiB.
        let p = host.plugin(ATTACKER).unwrap();
        let err = bounded("describe", p.describe()).await.unwrap_err();
        assert_fault(&err, PluginFault::MemoryLimit, "exceeded its memory limit");
        assert_normal(&p).await;
        // What fits comes back whole.
        let p = host.plugin("roomy").unwrap();
        let nodes = bounded("describe", p.describe()).await.unwrap();
        assert_eq!(nodes.len(), 200_000);
        assert_normal(&p).await;
        // Two million in 1 GiB fit the guest, but not the 128 MiB wasmtime
        // lets one call copy out of guest memory.
        let p = host.plugin("giant").unwrap();
        let err = bounded("describe", p.describe()).await.unwrap_err();
        assert_fault(&err, PluginFault::ResourceLimit, HOSTCALL_FUEL);
        assert_normal(&p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn aliased_strings_do_not_amplify_host_memory() {
        // 1024 provider ids pointing at one 1 MiB buffer: 1 GiB to copy out
        // of a 32 MiB guest. Wasmtime stops at 128 MiB of copying per call.
        let l = load(
            guests::HOSTILE_ALIAS_DESCRIBE,
            "[config]\nmib = 1\ncount = 1024\n[limits]\nmemory_mib = 32\n",
        )
        .await;
        let err = bounded("describe", l.p.describe()).await.unwrap_err();
        assert_fault(&err, PluginFault::ResourceLimit, HOSTCALL_FUEL);
        assert_normal(&l.p).await;
        // Under the copy budget, a 1 MiB provider id is still no provider
        // id: the answer is refused at the host boundary, naming the field.
        let dir = PluginDir::new();
        dir.add(
            ATTACKER,
            guests::HOSTILE_ALIAS_DESCRIBE,
            "[config]\nmib = 1\ncount = 64\n[limits]\nmemory_mib = 32\n",
        );
        let host = host(&dir).await;
        let err = bounded("describe", host.plugin(ATTACKER).unwrap().describe())
            .await
            .unwrap_err();
        assert_fault(&err, PluginFault::Contract, "provider_id is 1048576 bytes");
    }

    /// This process's peak resident memory so far, in bytes.
    fn peak_rss() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let kb: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc/self/status");
        kb << 10
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn host_resources_do_not_hold_memory_past_the_limit() {
        // 2048 header maps of 120 KiB each: 240 MiB held in the host by a
        // plugin limited to 32 MiB, from one 120 KiB buffer. (Wasmtime's own
        // caps are 100 000 handles and 128 KiB per map: 12.5 GiB per call.)
        let l = load(
            guests::HOSTILE_FIELDS_HOARD,
            "[config]\ncount = 2048\nkib = 120\n[limits]\nmemory_mib = 32\ncpu_time_ms = 25000\n",
        )
        .await;
        let before = peak_rss();
        let outcome = attack(&l.p).await;
        let grew = peak_rss().saturating_sub(before);
        let limit: u64 = 32 << 20;
        if let Ok(node) = &outcome {
            let held: u64 = label(node, "held bytes").parse().unwrap();
            assert!(
                held <= 4 * limit,
                "a plugin limited to {} MiB made the host hold {} MiB of headers (peak RSS grew {} MiB); {node:?}",
                limit >> 20,
                held >> 20,
                grew >> 20
            );
        }
        assert_normal(&l.p).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sleeping_forever_hits_the_wall_clock_deadline() {
        let l = load(
            guests::HOSTILE_SLEEP_FOREVER,
            "[limits]\ncall_timeout_ms = 500\n",
        )
        .await;
        let start = Instant::now();
        let err = attack(&l.p).await.unwrap_err();
        assert_fault(&err, PluginFault::Timeout, "ran past its 500 ms deadline");
        assert!(err.is_retryable());
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        assert_normal(&l.p).await;
    }
}

/// The probe guest (not a hostile-kit guest) answers a plain provision.
async fn probe_ok(p: &Arc<dyn CloudProvisioner>) {
    bounded("a normal call", p.provision_request(&request(NORMAL)))
        .await
        .unwrap_or_else(|e| panic!("a normal call after the attack failed: {e:?}"));
}

/// The plugin directory is untrusted input: files that are not regular, or
/// too large, are refused from their type or size, and the old version
/// keeps serving.
mod directory {
    use super::*;

    fn priced(p: &Arc<dyn CloudProvisioner>) -> f64 {
        p.try_price_hint(&NodeShape::new(2.0, 1 << 30))
            .expect("a price")
            .expect("priced")
            .hourly_usd
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fifos_and_huge_files_in_the_directory_are_refused_at_once() {
        let l = load(guests::PROBE, "").await;
        let component = l.dir.path().join(format!("{ATTACKER}.wasm"));
        let manifest = l.dir.path().join(format!("{ATTACKER}.toml"));
        let before = priced(&l.p);

        // The component becomes a FIFO nobody writes to: opening it for
        // reading would block forever; the reload is refused at once.
        std::fs::remove_file(&component).unwrap();
        nix::unistd::mkfifo(&component, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let r = bounded("a reload over a FIFO", l.host.reload())
            .await
            .unwrap();
        assert_eq!(r.kept_old, [ATTACKER], "{r}");
        assert!(r.failed[0].contains("FIFO"), "{r}");
        let p = l.host.plugin(ATTACKER).unwrap();
        assert_eq!(priced(&p), before, "the old version serves");

        // A 64 GiB sparse file: refused from its size, nothing read.
        std::fs::remove_file(&component).unwrap();
        std::fs::File::create(&component)
            .unwrap()
            .set_len(64 << 30)
            .unwrap();
        let r = bounded("a reload over a huge file", l.host.reload())
            .await
            .unwrap();
        assert_eq!(r.kept_old, [ATTACKER], "{r}");
        assert!(r.failed[0].contains("over the limit"), "{r}");
        assert_eq!(priced(&l.host.plugin(ATTACKER).unwrap()), before);

        // The manifest as a FIFO: refused too.
        let text = std::fs::read_to_string(&manifest).unwrap();
        std::fs::remove_file(&manifest).unwrap();
        nix::unistd::mkfifo(&manifest, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let r = bounded("a reload over a FIFO manifest", l.host.reload())
            .await
            .unwrap();
        assert!(r.failed.iter().any(|f| f.contains("FIFO")), "{r}");

        // Later changes are still taken: a good new plugin loads.
        std::fs::remove_file(&manifest).unwrap();
        std::fs::write(&manifest, text).unwrap();
        l.dir.add("beta", guests::PROBE, "");
        let r = bounded("a later reload", l.host.reload()).await.unwrap();
        assert!(r.added.contains(&"beta".to_string()), "{r}");
        assert!(priced(&l.host.plugin("beta").unwrap()) > 0.0);
        probe_ok(&l.host.plugin(ATTACKER).unwrap()).await;
    }
}

/// A directory whose `wasmprov.toml` trusts signers loads only components
/// signed for their plugin (the signature beside the component) or let in
/// unsigned by name: a component dropped into it is refused at load and
/// never recorded in the lock.
mod trust {
    use super::*;

    fn sign(sk: &minisign::SecretKey, bytes: &[u8], plugin: &str) -> String {
        minisign::sign(
            None,
            sk,
            std::io::Cursor::new(bytes),
            Some(&format!("wasmprov plugin {plugin} sha256:{}", {
                use sha2::Digest as _;
                hex::encode(sha2::Sha256::digest(bytes))
            })),
            None,
        )
        .unwrap()
        .into_string()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_signed_only_directory_refuses_dropped_and_renamed_components() {
        let dir = PluginDir::new();
        let kp = minisign::KeyPair::generate_unencrypted_keypair().unwrap();
        let settings = |unsigned: &str| {
            format!(
                "[signatures]\nunsigned = [{unsigned}]\n[[signatures.keys]]\nname = \"acme\"\nminisign = \"{}\"\n",
                kp.pk.to_base64()
            )
        };
        dir.write("wasmprov.toml", &settings(""));
        let bytes = std::fs::read(guests::PROBE).unwrap();
        // Signed for its name: loads.
        dir.add("signed", guests::PROBE, "");
        dir.write("signed.wasm.minisig", &sign(&kp.sk, &bytes, "signed"));
        // Dropped in without a signature.
        dir.add("dropped", guests::PROBE, "");
        // A signature made for another plugin, copied beside it.
        dir.add("renamed", guests::PROBE, "");
        dir.write("renamed.wasm.minisig", &sign(&kp.sk, &bytes, "signed"));

        let host = host(&dir).await;
        assert_eq!(host.plugin_names(), ["signed"], "{:?}", host.errors());
        let errors: Vec<String> = host.errors().iter().map(ToString::to_string).collect();
        let of = |name: &str| {
            errors
                .iter()
                .find(|e| e.starts_with(&format!("plugin {name}:")))
                .unwrap_or_else(|| panic!("no error for {name}: {errors:?}"))
        };
        assert!(
            of("dropped").contains("is not signed")
                && of("dropped").contains("loads only signed plugins")
                && of("dropped").contains("unsigned = [\"dropped\"]"),
            "{errors:?}"
        );
        assert!(
            of("renamed").contains("for plugin \"signed\", not for \"renamed\""),
            "{errors:?}"
        );
        assert!(
            host.errors()
                .iter()
                .all(|e| matches!(e, LoadError::Unsigned { .. }))
        );
        let lock = std::fs::read_to_string(dir.path().join("wasmprov.lock")).unwrap();
        assert!(lock.contains("[plugins.signed]"), "{lock}");
        assert!(
            !lock.contains("dropped") && !lock.contains("renamed"),
            "{lock}"
        );

        // The operator lets `dropped` in by name: the next pass loads it.
        dir.write("wasmprov.toml", &settings("\"dropped\""));
        let r = bounded("a reload", host.reload()).await.unwrap();
        assert_eq!(r.added, ["dropped"], "{r}");
        probe_ok(&host.plugin("dropped").unwrap()).await;

        // A signed plugin whose component is swapped for other bytes (the
        // lock is updated too) is refused on the next load.
        std::fs::write(dir.path().join("signed.wasm"), b"\0asm\x0d\x00\x01\x00").unwrap();
        wasmprov_host::lock::update(dir.path()).unwrap_or_default();
        let r = bounded("a reload", host.reload()).await.unwrap();
        assert!(
            r.failed
                .iter()
                .any(|f| f.contains("plugin signed:") && f.contains("does not verify")),
            "{r}"
        );
    }
}

/// Grants no plugin should get lightly are said at every load.
mod dangerous {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dangerous_grants_are_warned_about_at_load() {
        let l = load(
            guests::PROBE,
            "[secrets]\ntoken = { env = \"AWS_SECRET_ACCESS_KEY\" }\ndaemon = { env = \"WASMPROV_SERVE_TOKEN\" }\n[http]\nallow = [\"https://*.com\", \"http://[::1]:*\", \"http://169.254.169.254\"]\n[[exec]]\nprogram = \"/bin/sh\"\nargs = [\"-c\", \"*\"]\nenv = [\"LD_PRELOAD\"]\n",
        )
        .await;
        let info = l.host.wasm_plugin(ATTACKER).unwrap();
        let warnings = &info.info().warnings;
        for want in [
            "DANGEROUS secret token: $AWS_SECRET_ACCESS_KEY belongs to AWS's credential chain",
            "DANGEROUS secret daemon: $WASMPROV_SERVE_TOKEN is a variable of the host itself",
            "DANGEROUS http https://*.com: *.com is wider than one registrable domain",
            "DANGEROUS http http://[::1]:*: ::1 is a loopback address",
            "DANGEROUS http http://[::1]:*: any port",
            "DANGEROUS http http://169.254.169.254: 169.254.169.254 is a link-local (cloud metadata) address",
            "DANGEROUS exec /bin/sh -c *: /bin/sh is a shell",
            "DANGEROUS exec /bin/sh -c *: the plugin may set LD_PRELOAD",
        ] {
            assert!(
                warnings.iter().any(|w| w.starts_with(want)),
                "{want:?} in {warnings:#?}"
            );
        }
        probe_ok(&l.p).await;
    }
}

/// Compiles run off the reload path, each within a budget: a component
/// built to be slow to compile is refused, and never holds up another
/// plugin's reload or a start from a warm cache.
mod compiles {
    use super::*;

    const BUDGET: Duration = Duration::from_secs(3);

    fn builder(dir: &PluginDir, cache: &std::path::Path) -> HostBuilder {
        HostBuilder::new(dir.path())
            .owner_id(OWNER)
            .cache_dir(Some(cache.to_path_buf()))
            .work_dir(dir.path().join(".work"))
            .compile_budget(BUDGET)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_slow_to_compile_component_is_refused_and_holds_up_nothing() {
        let cache = tempfile::tempdir().unwrap();
        let dir = PluginDir::new();
        dir.add("alpha", guests::PROBE, "");
        // A first start compiles alpha (within the budget) and fills the cache.
        let host = bounded("a start", builder(&dir, cache.path()).build())
            .await
            .unwrap();
        assert_eq!(host.plugin_names(), ["alpha"], "{:?}", host.errors());

        // The slow component (~1/4 MB, well over a minute of compiling
        // unbounded) arrives, and alpha's manifest changes in the same pass.
        let slow = wasmprov_tests::slow_to_compile_component(12_000);
        std::fs::write(dir.path().join("slow.wasm"), &slow).unwrap();
        dir.write("slow.toml", "name = \"slow\"\ncomponent = \"slow.wasm\"\n");
        dir.write(
            "alpha.toml",
            "name = \"alpha\"\ncomponent = \"alpha.wasm\"\n[config]\nround = \"2\"\n",
        );
        let start = Instant::now();
        let r = bounded(
            "a short reload",
            host.reload_within(Duration::from_millis(500)),
        )
        .await
        .unwrap();
        let took = start.elapsed();
        eprintln!("reload beside the slow compile: {took:?}");
        assert_eq!(r.replaced, ["alpha"], "{r}");
        assert_eq!(r.compiling, ["slow"], "{r}");
        assert!(took < Duration::from_secs(2), "{took:?}");
        probe_ok(&host.plugin("alpha").unwrap()).await;

        // Waited for, it is refused at its budget, and not compiled again.
        let start = Instant::now();
        let r = bounded("a reload", host.reload()).await.unwrap();
        assert!(
            start.elapsed() < BUDGET + Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        assert!(
            r.failed.iter().any(|f| f.contains("plugin slow:")
                && f.contains("took longer than the compile budget of 3 s")),
            "{r}"
        );
        let start = Instant::now();
        let r = bounded("a later reload", host.reload()).await.unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(1),
            "{:?}",
            start.elapsed()
        );
        assert!(r.failed.iter().any(|f| f.contains("compile budget")), "{r}");
        assert!(host.plugin("slow").is_none());

        // A second host starting on the same directory from the warm cache
        // does not wait for the cold compile.
        let start = Instant::now();
        let again = bounded(
            "a warm start",
            builder(&dir, cache.path())
                .compile_wait(Duration::from_millis(500))
                .build(),
        )
        .await
        .unwrap();
        eprintln!("warm start beside the slow compile: {:?}", start.elapsed());
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        // (slow is still compiling there, or was refused; alpha serves.)
        probe_ok(&again.plugin("alpha").expect("alpha loaded")).await;
        // The refusal is remembered beside the compile cache: a later host
        // refuses it at once, though its compile may have landed in the
        // cache meanwhile.
        let start = Instant::now();
        let later = bounded("a later start", builder(&dir, cache.path()).build())
            .await
            .unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        assert!(later.plugin("slow").is_none());
        assert!(
            later
                .errors()
                .iter()
                .any(|e| e.to_string().contains("compile budget")),
            "{:?}",
            later.errors()
        );
        // A host for one plugin neither reads nor compiles the others.
        let one = bounded(
            "a start for alpha alone",
            builder(&dir, cache.path()).only_plugins(["alpha"]).build(),
        )
        .await
        .unwrap();
        assert_eq!(one.plugin_names(), ["alpha"]);
        assert!(one.errors().is_empty(), "{:?}", one.errors());
    }
}

/// Host resources a plugin can hold are bounded per plugin.
mod pool {
    use super::*;

    /// Established TCP connections of this machine whose remote port is one
    /// of `ports`: the client side of connections to the test's servers,
    /// which here are the host's (this process's) pooled ones. Exact even
    /// while other tests of this binary open and close descriptors.
    fn connections_to(ports: &std::collections::BTreeSet<u16>) -> usize {
        let table = std::fs::read_to_string("/proc/net/tcp").unwrap();
        table
            .lines()
            .skip(1)
            .filter(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let port = f
                    .get(2)
                    .and_then(|rem| rem.split(':').nth(1))
                    .and_then(|p| u16::from_str_radix(p, 16).ok());
                f.get(3) == Some(&"01") && port.is_some_and(|p| ports.contains(&p))
            })
            .count()
    }

    /// A plugin granted every loopback port reaches 150 keep-alive
    /// destinations, one request each; the host keeps at most 32 idle
    /// connections (descriptors) for it in all, not 150.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idle_connections_are_bounded_across_destinations() {
        let mut servers = Vec::new();
        for _ in 0..150 {
            servers.push(EchoServer::start().await);
        }
        let ports: std::collections::BTreeSet<u16> =
            servers.iter().map(|s| s.addr.port()).collect();
        let l = load(guests::PROBE, "[http]\nallow = [\"http://127.0.0.1:*\"]\n").await;
        let call = |url: String| {
            let mut shape = NodeShape::new(1.0, 1 << 30);
            shape.labels.insert("mode".into(), "http".into());
            shape.labels.insert("url".into(), url);
            ProvisionRequest {
                request_id: "probe".into(),
                shape,
                boot: Default::default(),
                subnet: None,
            }
        };
        assert_eq!(connections_to(&ports), 0);
        for s in &servers {
            bounded("a request", l.p.provision_request(&call(s.url("/keep"))))
                .await
                .unwrap();
        }
        // Connections the pool let go close (the kernel drops them at once
        // on loopback; give the tasks a moment).
        tokio::time::sleep(Duration::from_millis(500)).await;
        let held = connections_to(&ports);
        assert!(
            (1..=32).contains(&held),
            "{held} connections held after 150 destinations"
        );
        assert!(servers.iter().all(|s| s.hits() >= 1));
        bounded(
            "a call after",
            l.p.provision_request(&call(servers[149].url("/keep"))),
        )
        .await
        .unwrap();
        probe_ok(&l.p).await;
    }
}

/// Limits wasmtime enforces on what one call takes from the host are
/// reported as `resource_limit`, like the host's own.
mod host_limits {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wasmtime_host_limits_are_resource_limit_faults() {
        for (attack, fragment) in [("random", "requested len"), ("headers", "field")] {
            let l = load(
                guests::HOSTILE_HOST_LIMITS,
                &format!("[config]\nattack = \"{attack}\"\n"),
            )
            .await;
            let err = attack_err(&l.p).await;
            assert_fault(&err, PluginFault::ResourceLimit, fragment);
            assert_normal(&l.p).await;
        }
    }

    async fn attack_err(p: &Arc<dyn CloudProvisioner>) -> ProvisionerError {
        attack(p).await.expect_err("the attack must fail")
    }
}

/// Plugin answers are checked once, at the host boundary.
mod answers {
    use super::*;

    fn priced(usd: &str) -> NodeShape {
        let mut shape = NodeShape::new(2.0, 1 << 30);
        shape.labels.insert("mode".into(), "price".into());
        shape.labels.insert("usd".into(), usd.into());
        shape
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn prices_that_are_not_prices_are_contract_faults_everywhere() {
        let l = load(guests::PROBE, "").await;
        for bad in ["NaN", "inf", "-inf", "-1", "-0.0001"] {
            let err = l.p.try_price_hint(&priced(bad)).unwrap_err();
            assert_fault(&err, PluginFault::Contract, "hourly_usd");
            // The trait's infallible form sees no price; ranking says why.
            assert!(l.p.price_hint(&priced(bad)).is_none());
            let ranking = wasmprov_fleet::rank(&l.host, &priced(bad));
            assert!(ranking.offers.is_empty(), "{bad}: {ranking:?}");
            assert!(ranking.none[0].reason.contains("hourly_usd"), "{ranking:?}");
        }
        // -0.0 is 0.0, and does not sort before it.
        let zero = l.p.try_price_hint(&priced("-0")).unwrap().unwrap();
        assert!(zero.hourly_usd == 0.0 && zero.hourly_usd.is_sign_positive());
        probe_ok(&l.p).await;
    }

    /// Issue 26, finding 4: a relabel that changes, adds or removes a
    /// reserved label (request id, journal, group, digest) is refused, and
    /// a relabel of a node that is not there is not-found, set-labels never
    /// called (the guest would answer it as the owner's).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_relabel_keeps_every_reserved_label_exactly() {
        let l = load(guests::HOSTILE_RELABEL_RESERVED, "").await;
        let asked = |change: &str| {
            wasmprov_api::Labels::from([
                ("change".to_string(), change.to_string()),
                ("pool".to_string(), "green".to_string()),
            ])
        };
        let id = "n-1".to_string();
        let honest = l.p.set_labels(&id, &asked("none")).await.unwrap();
        assert_eq!(honest.labels["pool"], "green");
        assert_eq!(honest.labels["wasmprov-request"], "r-1");
        for (change, label) in [
            ("request", "wasmprov-request"),
            ("journal", "wasmprov-journal"),
            ("group", "wasmprov-group"),
            ("digest", "wasmprov-request-digest"),
            ("drop-request", "wasmprov-request"),
        ] {
            let err = l.p.set_labels(&id, &asked(change)).await.unwrap_err();
            assert_fault(&err, PluginFault::Contract, label);
        }
        let err =
            l.p.set_labels(&"n-2".to_string(), &asked("none"))
                .await
                .unwrap_err();
        assert!(matches!(err, ProvisionerError::NotFound(_)), "{err:?}");
        assert_normal(&l.p).await;
    }
}
