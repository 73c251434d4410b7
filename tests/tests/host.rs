//! The host driven end to end with real components built from source.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmprov_api::{
    CapacityType, CloudProvisioner, NodeShape, PluginFault, ProvisionRequest, ProvisionerError,
};
use wasmprov_host::{Host, HostBuilder, LoadError};
use wasmprov_tests::{EchoServer, PluginDir, guests, sha256_of};

const OWNER: &str = "test-owner";

async fn host(dir: &PluginDir) -> Host {
    HostBuilder::new(dir.path())
        .owner_id(OWNER)
        .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
        .work_dir(dir.path().join(".work"))
        .secret_source(|name| (name == "PROBE_TOKEN").then(|| "tok-3f9a-secret".to_string()))
        .build()
        .await
        .expect("host builds")
}

async fn probe_with(extra: &str) -> (PluginDir, Host, Arc<dyn CloudProvisioner>) {
    let dir = PluginDir::new();
    dir.add("probe", guests::PROBE, extra);
    let host = host(&dir).await;
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let p = host.plugin("probe").expect("probe loaded");
    (dir, host, p)
}

fn shape_with(labels: &[(&str, &str)]) -> NodeShape {
    let mut shape = NodeShape::new(2.0, 4 << 30);
    for (k, v) in labels {
        shape.labels.insert((*k).into(), (*v).into());
    }
    shape
}

fn request(id: &str, labels: &[(&str, &str)]) -> ProvisionRequest {
    ProvisionRequest {
        request_id: id.into(),
        shape: shape_with(labels),
        boot: Default::default(),
        subnet: None,
    }
}

async fn assert_healthy(p: &Arc<dyn CloudProvisioner>) {
    let node = p
        .provision_request(&request("after", &[]))
        .await
        .expect("the next call works");
    assert_eq!(node.provider_id, "after");
}

mod exports {
    use super::*;

    #[tokio::test]
    async fn every_export_is_called_through_the_trait() {
        let (_dir, host, p) = probe_with("").await;
        assert_eq!(p.name(), "probe");
        assert_eq!(
            p.capacity_types(),
            &[CapacityType::OnDemand, CapacityType::Spot]
        );
        let hint = p.price_hint(&NodeShape::new(4.0, 8 << 30)).expect("a hint");
        assert!((hint.hourly_usd - 0.04).abs() < 1e-9);
        assert_eq!(hint.instance_type, "probe-1");
        assert_eq!(p.price_hint(&shape_with(&[("mode", "none")])), None);
        let wasm = host.wasm_plugin("probe").unwrap();
        assert!(matches!(
            wasm.try_price_hint(&shape_with(&[("mode", "unsupported")])),
            Err(ProvisionerError::Unsupported(_))
        ));

        let node = p.provision_request(&request("req-1", &[])).await.unwrap();
        assert_eq!(node.provider_id, "req-1");
        assert_eq!(node.labels["owner"], OWNER);
        assert_eq!(node.instance_type.as_deref(), Some("probe-1"));
        let auto = p.provision(&NodeShape::default()).await.unwrap();
        assert!(
            auto.provider_id.starts_with("auto-"),
            "{}",
            auto.provider_id
        );

        let nodes = p.describe().await.unwrap();
        assert_eq!(nodes.len(), 2);
        assert!(nodes.iter().all(|n| n.labels["owner"] == OWNER));

        p.terminate(&"probe-a".to_string()).await.unwrap();
        assert!(matches!(
            p.terminate(&"missing".to_string()).await,
            Err(ProvisionerError::NotFound(_))
        ));
        let err = p
            .provision_request(&request("e", &[("mode", "error")]))
            .await
            .unwrap_err();
        assert!(matches!(err, ProvisionerError::Capacity { .. }), "{err}");
        assert!(err.is_retryable());
    }

    #[tokio::test]
    async fn inspect_shows_grants_and_never_secret_values() {
        let (_dir, host, p) = probe_with(
            "[config]\nregion = \"eu\"\n[secrets]\ntoken = { env = \"PROBE_TOKEN\" }\nmissing = { env = \"NOT_SET_ANYWHERE\" }\n[http]\nallow = [\"https://api.example.com\"]\n",
        )
        .await;
        let info = host.wasm_plugin("probe").unwrap().info().clone();
        assert_eq!(info.backend_name, "probe");
        assert_eq!(info.http_allow, ["https://api.example.com"]);
        assert_eq!(info.warnings.len(), 1, "{:?}", info.warnings);
        let json = serde_json::to_string(&info).unwrap();
        assert!(!json.contains("tok-3f9a-secret"), "{json}");
        assert!(json.contains("PROBE_TOKEN"));

        // The plugin itself sees its own secret and config, and nothing else.
        let node = p
            .provision_request(&request("c", &[("mode", "config"), ("key", "token")]))
            .await
            .unwrap();
        assert_eq!(node.labels["value"], "tok-3f9a-secret");
        let node = p
            .provision_request(&request("c", &[("mode", "config"), ("key", "region")]))
            .await
            .unwrap();
        assert_eq!(node.labels["value"], "eu");
        let node = p
            .provision_request(&request("c", &[("mode", "config"), ("key", "missing")]))
            .await
            .unwrap();
        assert_eq!(node.labels["value"], "<unset>");
    }

    #[tokio::test]
    async fn secret_values_never_reach_logs_or_errors() {
        use std::io::Write;
        #[derive(Clone, Default)]
        struct Capture(Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Capture {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let capture = Capture::default();
        let sink = capture.clone();
        // Everything at trace level except the runtime's own internals, whose
        // debug output echoes raw guest I/O (SECURITY.md says so).
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(
                "trace,wasmtime=info,wasmtime_wasi=info,wasmtime_wasi_io=info,wasmtime_wasi_http=info,cranelift_codegen=info",
            ))
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish();
        let _guard = tracing::subscriber::set_default(subscriber);

        let (_dir, _host, p) = probe_with("[secrets]\ntoken = { env = \"PROBE_TOKEN\" }\n").await;
        p.provision_request(&request("l", &[("mode", "log")]))
            .await
            .unwrap();
        let err = p
            .provision_request(&request("l", &[("mode", "leak")]))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ProvisionerError::Auth(m) if m.contains("[redacted]")),
            "{err:?}"
        );
        assert!(!err.to_string().contains("tok-3f9a-secret"), "{err}");
        let err = p
            .provision_request(&request("l", &[("mode", "leak"), ("how", "panic")]))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("panicking with [redacted]"),
            "{err}"
        );
        assert!(!err.to_string().contains("tok-3f9a-secret"), "{err}");

        let logs = String::from_utf8(capture.0.lock().unwrap().clone()).unwrap();
        assert!(
            logs.contains("probe log record"),
            "the guest's records reach the host log: {logs}"
        );
        assert!(
            logs.contains("plugin=\"probe\"") || logs.contains("plugin=probe"),
            "{logs}"
        );
        assert!(logs.contains("[redacted]"), "{logs}");
        assert!(
            !logs.contains("tok-3f9a-secret"),
            "a secret reached the log: {logs}"
        );
    }

    #[tokio::test]
    async fn guest_sees_no_environment_and_no_files() {
        let (_dir, _host, p) = probe_with("").await;
        let node = p
            .provision_request(&request("e", &[("mode", "env")]))
            .await
            .unwrap();
        assert_eq!(node.labels["env_count"], "0");
        assert_eq!(node.labels["home"], "<unset>");
        let node = p
            .provision_request(&request("f", &[("mode", "file"), ("path", "/etc/passwd")]))
            .await
            .unwrap();
        assert!(
            node.labels["file"].starts_with("error"),
            "{}",
            node.labels["file"]
        );
    }
}

mod http {
    use super::*;

    fn get(url: &str) -> ProvisionRequest {
        request("h", &[("mode", "http"), ("url", url)])
    }

    #[tokio::test]
    async fn granted_request_reaches_the_server() {
        let server = EchoServer::start().await;
        let (_dir, _host, p) = probe_with("[http]\nallow = [\"http://127.0.0.1:*\"]\n").await;
        let node = p
            .provision_request(&get(&format!("http://{}/hello?x=1", server.addr)))
            .await
            .unwrap();
        assert_eq!(node.labels["status"], "200");
        assert_eq!(node.labels["body"], "GET /hello?x=1 HTTP/1.1 probe=1");
        assert_eq!(server.hits(), 1);
    }

    /// A keep-alive HTTP/1.1 server that counts connections and requests.
    async fn keep_alive_server() -> (
        std::net::SocketAddr,
        Arc<std::sync::atomic::AtomicU64>,
        Arc<std::sync::atomic::AtomicU64>,
    ) {
        use std::sync::atomic::{AtomicU64, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let conns = Arc::new(AtomicU64::new(0));
        let reqs = Arc::new(AtomicU64::new(0));
        let (c, r) = (conns.clone(), reqs.clone());
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                c.fetch_add(1, Ordering::SeqCst);
                let r = r.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            match sock.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
                        buf.drain(..end);
                        let n = r.fetch_add(1, Ordering::SeqCst) + 1;
                        let body = format!("request {n}");
                        let resp = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if sock.write_all(resp.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (addr, conns, reqs)
    }

    #[tokio::test]
    async fn connections_are_reused_across_calls_of_a_plugin() {
        use std::sync::atomic::Ordering;
        let (addr, conns, reqs) = keep_alive_server().await;
        let (_dir, _host, p) = probe_with("[http]\nallow = [\"http://127.0.0.1:*\"]\n").await;
        for i in 1..=5 {
            let node = p
                .provision_request(&get(&format!("http://{addr}/n")))
                .await
                .unwrap();
            assert_eq!(node.labels["body"], format!("request {i}"));
        }
        assert_eq!(reqs.load(Ordering::SeqCst), 5);
        assert_eq!(
            conns.load(Ordering::SeqCst),
            1,
            "one keep-alive connection for five calls"
        );
    }

    #[tokio::test]
    async fn ungranted_requests_are_denied_before_any_connection() {
        let server = EchoServer::start().await;
        let port = server.addr.port();
        let other_port = if port == 65535 { port - 1 } else { port + 1 };
        let cases = [
            ("", format!("http://127.0.0.1:{port}/")),
            (
                "[http]\nallow = [\"http://127.0.0.1:OTHER\"]\n",
                format!("http://127.0.0.1:{port}/"),
            ),
            // A name that resolves to loopback is refused: only a literal grant reaches it.
            (
                "[http]\nallow = [\"http://localhost:*\"]\n",
                format!("http://localhost:{port}/"),
            ),
            // User information cannot smuggle a host.
            (
                "[http]\nallow = [\"http://api.example.com:*\"]\n",
                format!("http://api.example.com@127.0.0.1:{port}/"),
            ),
            // Another scheme on a granted host.
            (
                "[http]\nallow = [\"https://127.0.0.1:*\"]\n",
                format!("http://127.0.0.1:{port}/"),
            ),
        ];
        for (grants, url) in cases {
            let grants = grants.replace("OTHER", &other_port.to_string());
            let (_dir, _host, p) = probe_with(&grants).await;
            let err = p.provision_request(&get(&url)).await.unwrap_err();
            match &err {
                ProvisionerError::InvalidConfig(m) => {
                    assert!(
                        m.contains("denied") || m.contains("bad URL"),
                        "{grants} {url}: {m}"
                    )
                }
                other => panic!("{grants} {url}: expected a denial, got {other:?}"),
            }
            assert_healthy(&p).await;
        }
        assert_eq!(server.hits(), 0, "no denied request may reach the server");
    }

    #[tokio::test]
    async fn price_hint_may_not_do_http_even_when_granted() {
        let server = EchoServer::start().await;
        let (_dir, host, _p) = probe_with("[http]\nallow = [\"http://127.0.0.1:*\"]\n").await;
        let wasm = host.wasm_plugin("probe").unwrap();
        let err = wasm
            .try_price_hint(&shape_with(&[
                ("mode", "http"),
                ("url", &format!("http://{}/", server.addr)),
            ]))
            .unwrap_err();
        assert!(
            matches!(err, ProvisionerError::InvalidConfig(ref m) if m.contains("denied")),
            "{err}"
        );
        assert_eq!(server.hits(), 0);
    }
}

mod exec {
    use super::*;

    fn run(program: &str, args: &str) -> ProvisionRequest {
        request(
            "x",
            &[("mode", "exec"), ("program", program), ("args", args)],
        )
    }

    #[tokio::test]
    async fn granted_program_runs_with_a_cleared_environment() {
        let (dir, _host, p) = probe_with(
            "[[exec]]\nprogram = \"/bin/echo\"\nargs = [\"**\"]\n[[exec]]\nprogram = \"/usr/bin/env\"\nenv = [\"GREETING\"]\n[[exec]]\nprogram = \"/bin/pwd\"\n[[exec]]\nprogram = \"/bin/cat\"\n",
        )
        .await;
        let node = p
            .provision_request(&run("/bin/echo", "hello world"))
            .await
            .unwrap();
        assert_eq!(node.labels["exit"], "Some(0)");
        assert_eq!(node.labels["stdout"], "hello world\n");

        let node = p.provision_request(&run("/usr/bin/env", "")).await.unwrap();
        assert_eq!(node.labels["stdout"], "", "the environment is cleared");
        let mut req = run("/usr/bin/env", "");
        req.shape.labels.insert("env".into(), "GREETING=hi".into());
        let node = p.provision_request(&req).await.unwrap();
        assert_eq!(node.labels["stdout"], "GREETING=hi\n");

        let node = p.provision_request(&run("/bin/pwd", "")).await.unwrap();
        let work = dir.path().join(".work").join("probe");
        assert_eq!(node.labels["stdout"].trim(), work.display().to_string());

        let mut req = run("/bin/cat", "");
        req.shape
            .labels
            .insert("stdin".into(), "from the guest".into());
        let node = p.provision_request(&req).await.unwrap();
        assert_eq!(node.labels["stdout"], "from the guest");
    }

    #[tokio::test]
    async fn ungranted_commands_are_denied() {
        let (_dir, _host, p) =
            probe_with("[[exec]]\nprogram = \"/bin/echo\"\nargs = [\"hello\", \"*\"]\n").await;
        for (program, args) in [
            ("/bin/sh", "-c true"),
            ("/bin/../bin/echo", "hello x"),
            ("echo", "hello x"),
            ("/bin/echo", "bye x"),
            ("/bin/echo", "hello x y"),
            ("/bin/echo", "hello"),
        ] {
            let err = p.provision_request(&run(program, args)).await.unwrap_err();
            assert!(
                matches!(&err, ProvisionerError::InvalidConfig(m) if m.contains("exec denied")),
                "{program} {args}: {err:?}"
            );
        }
        let mut req = run("/bin/echo", "hello x");
        req.shape.labels.insert("env".into(), "PATH=/tmp".into());
        let err = p.provision_request(&req).await.unwrap_err();
        assert!(
            matches!(&err, ProvisionerError::InvalidConfig(m) if m.contains("PATH")),
            "{err:?}"
        );
        let node = p
            .provision_request(&run("/bin/echo", "hello x"))
            .await
            .unwrap();
        assert_eq!(node.labels["stdout"], "hello x\n");
    }

    #[tokio::test]
    async fn timeout_kills_the_process_and_output_is_capped() {
        let (_dir, _host, p) = probe_with(
            "[[exec]]\nprogram = \"/bin/sleep\"\nargs = [\"*\"]\ntimeout_ms = 300\n[[exec]]\nprogram = \"/usr/bin/yes\"\nmax_output_bytes = 1000\n",
        )
        .await;
        let start = Instant::now();
        let err = p
            .provision_request(&run("/bin/sleep", "30"))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ProvisionerError::Transport(m) if m.contains("timed out")),
            "{err:?}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        let err = p
            .provision_request(&run("/usr/bin/yes", ""))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ProvisionerError::Other(m) if m.contains("too large")),
            "{err:?}"
        );
        assert_healthy(&p).await;
    }

    #[tokio::test]
    async fn price_hint_may_not_exec() {
        let (_dir, host, _p) = probe_with("[[exec]]\nprogram = \"/bin/echo\"\n").await;
        let err = host
            .wasm_plugin("probe")
            .unwrap()
            .try_price_hint(&shape_with(&[("mode", "exec"), ("program", "/bin/echo")]))
            .unwrap_err();
        assert!(
            matches!(&err, ProvisionerError::InvalidConfig(m) if m.contains("denied")),
            "{err:?}"
        );
    }
}

mod faults {
    use super::*;

    fn fault_of(err: &ProvisionerError) -> PluginFault {
        match err {
            ProvisionerError::Plugin { fault, .. } => *fault,
            other => panic!("expected a plugin fault, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn misbehaviour_fails_one_call_and_the_next_works() {
        let (_dir, host, p) = probe_with("[limits]\nmemory_mib = 32\ncpu_time_ms = 300\n").await;
        let cases = [
            ("panic", PluginFault::Trap),
            ("trap", PluginFault::Trap),
            ("loop", PluginFault::CpuLimit),
            ("membomb", PluginFault::MemoryLimit),
            ("recurse", PluginFault::Trap),
        ];
        for (mode, want) in cases {
            let start = Instant::now();
            let err = p
                .provision_request(&request("m", &[("mode", mode)]))
                .await
                .unwrap_err();
            assert_eq!(fault_of(&err), want, "{mode}: {err}");
            assert!(!err.is_retryable());
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "{mode} took {:?}",
                start.elapsed()
            );
            assert_healthy(&p).await;

            // The same misbehaviour in the synchronous price hint.
            let wasm = host.wasm_plugin("probe").unwrap();
            let err = wasm
                .try_price_hint(&shape_with(&[("mode", mode)]))
                .unwrap_err();
            assert_eq!(fault_of(&err), want, "price_hint {mode}: {err}");
            assert_eq!(p.price_hint(&shape_with(&[("mode", mode)])), None);
            assert!(p.price_hint(&NodeShape::default()).is_some());
        }
        let err = p
            .provision_request(&request("m", &[("mode", "panic")]))
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("probe was asked to panic"),
            "{err}"
        );
        // Misbehaviour in terminate too.
        let err = p.terminate(&"panic".to_string()).await.unwrap_err();
        assert_eq!(fault_of(&err), PluginFault::Trap);
        assert_healthy(&p).await;
    }

    #[tokio::test]
    async fn guest_stack_is_set_per_plugin() {
        let dir = PluginDir::new();
        dir.add("small", guests::PROBE, "[limits]\nstack_kib = 64\n");
        dir.add("roomy", guests::PROBE, "");
        let host = host(&dir).await;
        assert!(host.errors().is_empty(), "{:?}", host.errors());
        let deep = request("d", &[("mode", "depth"), ("depth", "3000")]);
        let err = host
            .plugin("small")
            .unwrap()
            .provision_request(&deep)
            .await
            .unwrap_err();
        assert_eq!(fault_of(&err), PluginFault::Trap, "{err}");
        let roomy = host.plugin("roomy").unwrap();
        roomy
            .provision_request(&deep)
            .await
            .expect("512 KiB holds 3000 small frames that overflow 64 KiB");
        assert_healthy(&host.plugin("small").unwrap()).await;
    }

    #[tokio::test]
    async fn wall_clock_deadline_stops_a_blocked_call() {
        let (_dir, _host, p) = probe_with(
            "[[exec]]\nprogram = \"/bin/sleep\"\nargs = [\"*\"]\n[limits]\ncall_timeout_ms = 400\n",
        )
        .await;
        let start = Instant::now();
        let err = p
            .provision_request(&request(
                "s",
                &[("mode", "exec"), ("program", "/bin/sleep"), ("args", "20")],
            ))
            .await
            .unwrap_err();
        assert_eq!(fault_of(&err), PluginFault::Timeout, "{err}");
        assert!(err.is_retryable());
        assert!(start.elapsed() < Duration::from_secs(5));
        assert_healthy(&p).await;
    }

    #[tokio::test]
    async fn many_concurrent_calls_with_faults_mixed_in() {
        let (_dir, _host, p) = probe_with("[limits]\ncpu_time_ms = 200\n").await;
        let mut tasks = Vec::new();
        for i in 0..40 {
            let p = p.clone();
            tasks.push(tokio::spawn(async move {
                let mode = match i % 4 {
                    0 => "panic",
                    1 => "loop",
                    _ => "",
                };
                (
                    mode,
                    p.provision_request(&request(&format!("r{i}"), &[("mode", mode)]))
                        .await,
                )
            }));
        }
        for t in tasks {
            let (mode, r) = t.await.unwrap();
            assert_eq!(r.is_ok(), mode.is_empty(), "{mode}: {r:?}");
        }
    }
}

mod loading {
    use super::*;

    fn error_texts(host: &Host) -> Vec<String> {
        host.errors().iter().map(ToString::to_string).collect()
    }

    #[tokio::test]
    async fn manifest_errors_name_file_and_field_and_leave_others_loaded() {
        let dir = PluginDir::new();
        dir.add("probe", guests::PROBE, "");
        dir.add(
            "typo",
            guests::PROBE,
            "[http]\nalow = [\"https://x.example\"]\n",
        );
        dir.add(
            "badgrant",
            guests::PROBE,
            "[http]\nallow = [\"x.example\"]\n",
        );
        dir.write(
            "wrongname.toml",
            "name = \"other\"\ncomponent = \"probe.wasm\"\n",
        );
        let host = host(&dir).await;
        assert!(host.plugin("probe").is_some());
        let errors = error_texts(&host);
        assert_eq!(errors.len(), 3, "{errors:#?}");
        assert!(
            errors.iter().any(|e| e.contains("typo.toml")
                && e.contains("alow")
                && e.contains("expected `allow`")),
            "{errors:#?}"
        );
        assert!(
            errors.iter().any(|e| e.contains("badgrant.toml")
                && e.contains("http.allow")
                && e.contains("scheme://host")),
            "{errors:#?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("wrongname.toml") && e.contains("\"wrongname\"")),
            "{errors:#?}"
        );
    }

    #[tokio::test]
    async fn component_paths_cannot_leave_the_directory() {
        let outer = PluginDir::new();
        let outside = outer.path().join("outside.wasm");
        std::fs::copy(guests::PROBE, &outside).unwrap();
        let dir = PluginDir::new();
        dir.write(
            "up.toml",
            &format!(
                "name = \"up\"\ncomponent = \"../{}/outside.wasm\"\n",
                outer.path().file_name().unwrap().to_string_lossy()
            ),
        );
        std::os::unix::fs::symlink(&outside, dir.path().join("link.wasm")).unwrap();
        dir.write("link.toml", "name = \"link\"\ncomponent = \"link.wasm\"\n");
        dir.write(
            "abs.toml",
            &format!(
                "name = \"abs\"\ncomponent = {:?}\n",
                outside.display().to_string()
            ),
        );
        let host = host(&dir).await;
        assert_eq!(host.plugins().len(), 0);
        let errors = error_texts(&host);
        assert_eq!(errors.len(), 3, "{errors:#?}");
        for name in ["up.toml", "link.toml"] {
            assert!(
                errors
                    .iter()
                    .any(|e| e.contains(name) && e.contains("inside the plugin directory")),
                "{name}: {errors:#?}"
            );
        }
        assert!(
            errors
                .iter()
                .any(|e| e.contains("abs.toml") && e.contains("relative to the plugin directory")),
            "{errors:#?}"
        );
    }

    #[tokio::test]
    async fn sha256_pin_is_enforced() {
        let dir = PluginDir::new();
        let wasm = dir.add("probe", guests::PROBE, "");
        let digest = sha256_of(&wasm);
        dir.add("pinned", guests::PROBE, &format!("sha256 = \"{digest}\"\n"));
        dir.add(
            "wrongpin",
            guests::PROBE,
            &format!("sha256 = \"{}\"\n", "0".repeat(64)),
        );
        let host = host(&dir).await;
        assert!(host.plugin("pinned").is_some());
        assert!(host.wasm_plugin("pinned").unwrap().info().pinned);
        assert!(host.plugin("wrongpin").is_none());
        let err = host
            .errors()
            .into_iter()
            .find(|e| matches!(e, LoadError::Digest { .. }))
            .expect("digest error");
        let text = err.to_string();
        assert!(
            text.contains(&digest) && text.contains(&"0".repeat(64)),
            "{text}"
        );
    }

    #[tokio::test]
    async fn lock_records_on_first_load_and_refuses_a_changed_component() {
        let dir = PluginDir::new();
        let wasm = dir.add("probe", guests::PROBE, "");
        let first = host(&dir).await;
        assert!(first.plugin("probe").is_some());
        let lock = std::fs::read_to_string(dir.path().join("wasmprov.lock")).unwrap();
        assert!(lock.contains(&sha256_of(&wasm)), "{lock}");
        assert!(wasmprov_host::lock::check(dir.path()).unwrap().is_empty());

        // Another valid component put in its place is refused until the lock is updated.
        std::fs::copy(guests::HETZNER, &wasm).unwrap();
        let second = host(&dir).await;
        assert!(second.plugin("probe").is_none());
        let text = second.errors()[0].to_string();
        assert!(
            matches!(second.errors()[0], LoadError::LockMismatch { .. }),
            "{text}"
        );
        assert!(
            text.contains(&sha256_of(&wasm)) && text.contains("wasmprov lock --update"),
            "{text}"
        );
        let drift = wasmprov_host::lock::check(dir.path()).unwrap();
        assert!(
            matches!(
                drift.as_slice(),
                [wasmprov_host::lock::Drift::Changed { .. }]
            ),
            "{drift:?}"
        );
        wasmprov_host::lock::update(dir.path()).unwrap();
        assert!(host(&dir).await.plugin("probe").is_some());

        // A frozen lock refuses plugins it does not record, and writes nothing.
        dir.add("newcomer", guests::PROBE, "");
        let frozen = HostBuilder::new(dir.path())
            .owner_id(OWNER)
            .lock_mode(wasmprov_host::LockMode::Frozen)
            .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
            .build()
            .await
            .unwrap();
        assert!(frozen.plugin("probe").is_some());
        assert!(
            matches!(&frozen.errors()[..], [LoadError::NotLocked { plugin }] if plugin == "newcomer")
        );
        let lock = std::fs::read_to_string(dir.path().join("wasmprov.lock")).unwrap();
        assert!(!lock.contains("newcomer"));
    }

    /// Every export of a 0.3 component is type-checked once, at load (a
    /// call then checks only the function it calls): a component with the
    /// contract's names whose `price-hint` has the wrong type is refused
    /// at load, though its `name` and `capacity-types` answer, and a
    /// well-typed plugin beside it loads.
    #[tokio::test]
    async fn a_mistyped_export_is_refused_at_load() {
        let dir = PluginDir::new();
        dir.add("mistyped", guests::MISTYPED_CONTRACT, "");
        dir.add("fine", guests::HETZNER, "");
        let host = host(&dir).await;
        assert!(host.plugin("mistyped").is_none());
        assert!(host.plugin("fine").is_some());
        let errors = error_texts(&host);
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert!(
            matches!(&host.errors()[0], LoadError::NotAProvider { plugin, .. } if plugin == "mistyped"),
            "{errors:#?}"
        );
        assert!(
            errors[0].contains("the export `price-hint` has the wrong type"),
            "{errors:#?}"
        );
    }

    #[tokio::test]
    async fn other_contract_versions_are_refused_naming_both() {
        let dir = PluginDir::new();
        dir.add("future", guests::FUTURE_CONTRACT, "");
        dir.write("garbage.wasm", "not wasm at all");
        dir.write(
            "garbage.toml",
            "name = \"garbage\"\ncomponent = \"garbage.wasm\"\n",
        );
        let host = host(&dir).await;
        assert_eq!(host.plugins().len(), 0);
        let errors = error_texts(&host);
        assert!(
            errors
                .iter()
                .any(|e| e.contains("wasmprov:provisioner@0.99.0")
                    && e.contains("wasmprov:provisioner@0.3.0")
                    && e.contains("wasmprov:provisioner@0.2.0")
                    && e.contains("wasmprov:provisioner@0.1.0")),
            "{errors:#?}"
        );
        assert!(
            errors
                .iter()
                .any(|e| e.contains("garbage") && e.contains("not a valid component")),
            "{errors:#?}"
        );
    }

    #[tokio::test]
    async fn the_sdk_records_the_contract_version() {
        let (_dir, host, _p) = probe_with("").await;
        let built_for = host.wasm_plugin("probe").unwrap().info().built_for.clone();
        assert!(
            built_for
                .as_deref()
                .is_some_and(|s| s.starts_with("wasmprov:provisioner@0.3.0;sdk=")),
            "{built_for:?}"
        );
    }
}

mod hetzner {
    use super::*;
    use wasmprov_api::{CapacityScope, JoinState};
    use wasmprov_fake::{Fault, HetznerFake};

    async fn setup() -> (HetznerFake, PluginDir, Host, Arc<dyn CloudProvisioner>) {
        wasmprov_tests::hetzner_host(OWNER).await
    }

    fn req(id: &str, zone: &str) -> ProvisionRequest {
        ProvisionRequest {
            request_id: id.into(),
            shape: NodeShape {
                zone: Some(zone.into()),
                ..NodeShape::new(2.0, 4 << 30)
            },
            boot: Default::default(),
            subnet: None,
        }
    }

    #[tokio::test]
    async fn lifecycle_through_the_host() {
        let (fake, _dir, _host, p) = setup().await;
        assert_eq!(p.capacity_types(), &[CapacityType::OnDemand]);
        let hint = p.price_hint(&NodeShape::new(2.0, 4 << 30)).unwrap();
        assert!(hint.hourly_usd > 0.0);

        let node = p.provision_request(&req("life-1", "nbg1")).await.unwrap();
        assert_eq!(node.zone.as_deref(), Some("nbg1"));
        assert_eq!(node.join_state, JoinState::Provisioning);
        assert!(node.address.is_some());
        let again = p.provision_request(&req("life-1", "nbg1")).await.unwrap();
        assert_eq!(again.provider_id, node.provider_id);
        assert_eq!(fake.servers().len(), 1, "one request id, one server");
        let server = &fake.servers()[0];
        assert_eq!(server.labels["wasmprov-owner"], OWNER);
        assert_eq!(server.labels["wasmprov-request"], "life-1");

        let nodes = p.describe().await.unwrap();
        assert_eq!(nodes.len(), 1);
        p.terminate(&node.provider_id).await.unwrap();
        assert!(matches!(
            p.terminate(&node.provider_id).await,
            Err(ProvisionerError::NotFound(_))
        ));
        assert!(p.describe().await.unwrap().is_empty());
        assert!(matches!(
            p.provision_request(&ProvisionRequest {
                request_id: "spot".into(),
                shape: NodeShape {
                    capacity_type: CapacityType::Spot,
                    ..NodeShape::default()
                },
                boot: Default::default(),
                subnet: None,
            })
            .await,
            Err(ProvisionerError::Unsupported(_))
        ));
    }

    #[tokio::test]
    async fn cloud_errors_map_to_contract_variants() {
        let (fake, _dir, _host, p) = setup().await;
        fake.inject(Fault::RateLimited {
            retry_after_secs: 7,
        });
        let err = p.provision_request(&req("e1", "fsn1")).await.unwrap_err();
        assert!(
            matches!(
                err,
                ProvisionerError::RateLimited {
                    retry_after_ms: Some(7000),
                    ..
                }
            ),
            "{err:?}"
        );
        fake.inject(Fault::ResourceUnavailable);
        let err = p.provision_request(&req("e2", "fsn1")).await.unwrap_err();
        assert!(
            matches!(
                err,
                ProvisionerError::Capacity {
                    scope: CapacityScope::Zone,
                    ..
                }
            ),
            "{err:?}"
        );
        fake.inject(Fault::ResourceLimitExceeded);
        let err = p.provision_request(&req("e3", "fsn1")).await.unwrap_err();
        assert!(matches!(err, ProvisionerError::Quota(_)), "{err:?}");
        fake.inject(Fault::Unauthorized);
        let err = p.describe().await.unwrap_err();
        assert!(matches!(err, ProvisionerError::Auth(_)), "{err:?}");
        fake.inject(Fault::ServerError);
        let err = p.describe().await.unwrap_err();
        assert!(matches!(err, ProvisionerError::Transport(_)), "{err:?}");
        assert!(
            fake.servers().is_empty(),
            "no failed call left a server behind"
        );
        // And the plugin still works.
        p.provision_request(&req("ok", "fsn1")).await.unwrap();
        assert_eq!(fake.servers().len(), 1);
    }

    #[tokio::test]
    async fn describe_follows_pages_and_ignores_foreign_servers() {
        let (fake, dir, _host, p) = setup().await;
        for i in 0..120 {
            p.provision_request(&req(&format!("page-{i}"), "fsn1"))
                .await
                .unwrap();
        }
        // Another host's nodes on the same account.
        let token = fake.token().to_string();
        let other = HostBuilder::new(dir.path())
            .owner_id("someone-else")
            .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
            .secret_source(move |name| (name == "HCLOUD_TOKEN").then(|| token.clone()))
            .build()
            .await
            .unwrap();
        let foreign = other.plugin("hetzner").unwrap();
        let theirs = foreign
            .provision_request(&req("page-0", "fsn1"))
            .await
            .unwrap();
        let nodes = p.describe().await.unwrap();
        assert_eq!(nodes.len(), 120);
        let mut ids: Vec<&str> = nodes.iter().map(|n| n.provider_id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 120);
        assert!(!ids.contains(&theirs.provider_id.as_str()));
        // Our host cannot terminate the other host's node.
        assert!(matches!(
            p.terminate(&theirs.provider_id).await,
            Err(ProvisionerError::NotFound(_))
        ));
        assert_eq!(foreign.describe().await.unwrap().len(), 1);
    }
}

mod ranking {
    use super::*;

    /// Every plugin's price hint for one shape, cheapest first, with the
    /// plugins that cannot run it and why.
    #[tokio::test(flavor = "multi_thread")]
    async fn plugins_are_ranked_by_price_with_reasons_for_the_rest() {
        let dir = PluginDir::new();
        dir.add("hetzner", guests::HETZNER, "");
        dir.add(
            "aws-ec2",
            guests::AWS_EC2,
            "[config]\nregion = \"us-east-1\"\n",
        );
        let catalogue = |price: f64| {
            format!(
                "[config]\ninstance_types = '''[{{\"name\": \"box\", \"cpu\": 4, \"memory_gib\": 16, \"hourly_usd\": {price}}}]'''\n"
            )
        };
        dir.add("cheap", guests::CLOUD_INIT, &catalogue(0.001));
        dir.add("dear", guests::CLOUD_INIT, &catalogue(99.0));
        dir.add("tied", guests::CLOUD_INIT, &catalogue(0.001));
        let host = host(&dir).await;
        assert!(host.errors().is_empty(), "{:?}", host.errors());

        let ranking = wasmprov_fleet::rank(&host, &NodeShape::new(4.0, 16 << 30));
        let order: Vec<&str> = ranking.offers.iter().map(|o| o.plugin.as_str()).collect();
        assert_eq!(order.len(), 5, "{ranking:?}");
        // Ties go to the name that sorts first; the dearest comes last.
        assert_eq!(&order[..2], ["cheap", "tied"]);
        assert_eq!(order[4], "dear");
        for pair in ranking.offers.windows(2) {
            assert!(pair[0].hint.hourly_usd <= pair[1].hint.hourly_usd);
        }
        assert_eq!(ranking.best().unwrap().hint.instance_type, "box");
        assert!(ranking.none.is_empty());

        // A shape only the clouds can hold: the catalogues say why not.
        let big = wasmprov_fleet::rank(&host, &NodeShape::new(16.0, 64 << 30));
        let offered: Vec<&str> = big.offers.iter().map(|o| o.plugin.as_str()).collect();
        assert_eq!(offered.len(), 2, "{big:?}");
        assert!(
            offered.contains(&"aws-ec2") && offered.contains(&"hetzner"),
            "{big:?}"
        );
        let refused: Vec<&str> = big.none.iter().map(|n| n.plugin.as_str()).collect();
        assert_eq!(refused, ["cheap", "dear", "tied"], "{big:?}");
        for n in &big.none {
            assert!(!n.reason.is_empty());
        }
    }
}
