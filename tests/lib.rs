//! Shared pieces of the integration tests: the guest components built from
//! source by `build.rs`, plugin directories made from them, and a loopback
//! HTTP server.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Paths of the guest components, one constant per guest.
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

/// A temporary plugin directory.
#[derive(Debug)]
pub struct PluginDir {
    dir: tempfile::TempDir,
}

impl PluginDir {
    /// An empty directory.
    ///
    /// # Panics
    /// When no temporary directory can be made.
    #[must_use]
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// Its path.
    #[must_use]
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Copies `wasm` in as `NAME.wasm` and writes `NAME.toml` with the name,
    /// the component and `extra` manifest text.
    ///
    /// # Panics
    /// On I/O errors.
    pub fn add(&self, name: &str, wasm: &str, extra: &str) -> PathBuf {
        let target = self.path().join(format!("{name}.wasm"));
        std::fs::copy(wasm, &target).expect("copy component");
        self.write(
            &format!("{name}.toml"),
            &format!("name = \"{name}\"\ncomponent = \"{name}.wasm\"\n{extra}"),
        );
        target
    }

    /// Writes a file into the directory.
    ///
    /// # Panics
    /// On I/O errors.
    pub fn write(&self, file: &str, text: &str) {
        std::fs::write(self.path().join(file), text).expect("write file");
    }
}

impl Default for PluginDir {
    fn default() -> Self {
        Self::new()
    }
}

/// The sha256 of a file, hex.
///
/// # Panics
/// When the file cannot be read.
#[must_use]
pub fn sha256_of(path: &Path) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(std::fs::read(path).expect("read")))
}

/// What an [`EchoServer`] saw.
#[derive(Debug, Default)]
struct EchoStats {
    connections: AtomicU64,
    hits: AtomicU64,
    in_flight: AtomicU64,
    high_water: AtomicU64,
    heads: Mutex<Vec<String>>,
}

/// Counts a request in flight until dropped.
struct InFlight(Arc<EchoStats>);

impl InFlight {
    fn enter(stats: &Arc<EchoStats>) -> Self {
        let now = stats.in_flight.fetch_add(1, SeqCst) + 1;
        stats.high_water.fetch_max(now, SeqCst);
        Self(stats.clone())
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, SeqCst);
    }
}

/// The longest any one connection is served, whatever the route.
const CONNECTION_LIMIT: Duration = Duration::from_secs(60);

/// A loopback HTTP/1.1 server. By default it answers every request with
/// `200` and a body echoing the request line and the `x-probe` header. Some
/// paths misbehave on purpose, for the hostile-plugin tests:
///
/// - `/redirect?to=URL`: `302` with `Location: URL`;
/// - `/endless`: a chunked body that never ends;
/// - `/drip`: headers, then one body byte every 500 ms;
/// - `/hang`: never answers;
/// - `/slow?ms=N`: the echo answer after N ms.
///
/// It counts connections, requests, and requests in flight (with their
/// high-water mark), and keeps each request's line and `Host` header.
#[derive(Debug)]
pub struct EchoServer {
    /// Where it listens.
    pub addr: SocketAddr,
    stats: Arc<EchoStats>,
    task: tokio::task::JoinHandle<()>,
}

impl EchoServer {
    /// Starts it on 127.0.0.1 and an ephemeral port.
    ///
    /// # Panics
    /// When it cannot bind.
    pub async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let stats = Arc::new(EchoStats::default());
        let shared = stats.clone();
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                shared.connections.fetch_add(1, SeqCst);
                let stats = shared.clone();
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(CONNECTION_LIMIT, serve(sock, stats)).await;
                });
            }
        });
        Self { addr, stats, task }
    }

    /// Requests received so far (complete request heads).
    #[must_use]
    pub fn hits(&self) -> u64 {
        self.stats.hits.load(SeqCst)
    }

    /// TCP connections accepted so far, whether or not a request came.
    #[must_use]
    pub fn connections(&self) -> u64 {
        self.stats.connections.load(SeqCst)
    }

    /// The most requests that were being answered at the same time.
    #[must_use]
    pub fn max_in_flight(&self) -> u64 {
        self.stats.high_water.load(SeqCst)
    }

    /// Each request received, as `"REQUEST-LINE host=HOST"`.
    ///
    /// # Panics
    /// When a connection task panicked while holding the log.
    #[must_use]
    pub fn requests(&self) -> Vec<String> {
        self.stats.heads.lock().expect("request log").clone()
    }

    /// `http://127.0.0.1:PORT` + `path`.
    #[must_use]
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// Serves one connection: one request, then close (`/keep`: the client closes).
async fn serve(mut sock: tokio::net::TcpStream, stats: Arc<EchoStats>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = vec![0u8; 16 << 10];
    let mut len = 0;
    while !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") && len < buf.len() {
        match sock.read(&mut buf[len..]).await {
            Ok(0) | Err(_) => return,
            Ok(n) => len += n,
        }
    }
    stats.hits.fetch_add(1, SeqCst);
    let _in_flight = InFlight::enter(&stats);
    let head = String::from_utf8_lossy(&buf[..len]).to_string();
    let line = head.lines().next().unwrap_or("").to_string();
    let header = |name: &str| {
        head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let host = header("host").unwrap_or_else(|| "-".into());
    stats
        .heads
        .lock()
        .expect("request log")
        .push(format!("{line} host={host}"));
    let target = line.split(' ').nth(1).unwrap_or("/").to_string();
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    match path {
        "/redirect" => {
            let to = query.strip_prefix("to=").unwrap_or("");
            let resp = format!(
                "HTTP/1.1 302 Found\r\nlocation: {to}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
            let _ = sock.write_all(resp.as_bytes()).await;
        }
        "/keep" => {
            // A keep-alive answer, then the connection stays open until the
            // client closes it (what a client's idle pool holds).
            let resp =
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 4\r\n\r\nkept";
            if sock.write_all(resp.as_bytes()).await.is_err() {
                return;
            }
            drop(_in_flight);
            // Each later request on it (a GET: one read) gets the same answer.
            let mut rest = vec![0u8; 16 << 10];
            while matches!(sock.read(&mut rest).await, Ok(n) if n > 0) {
                stats.hits.fetch_add(1, SeqCst);
                if sock.write_all(resp.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
        "/endless" => {
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            if sock.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let mut chunk = format!("{:x}\r\n", 64 << 10).into_bytes();
            chunk.extend(std::iter::repeat_n(b'z', 64 << 10));
            chunk.extend_from_slice(b"\r\n");
            while sock.write_all(&chunk).await.is_ok() {}
        }
        "/drip" => {
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 1000\r\n\r\n";
            if sock.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            for _ in 0..1000 {
                if sock.write_all(b".").await.is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        "/hang" => {
            // Never answer; wait for the client to give up.
            let mut scratch = [0u8; 1024];
            while let Ok(n) = sock.read(&mut scratch).await {
                if n == 0 {
                    break;
                }
            }
        }
        _ => {
            if path == "/slow" {
                let ms = query
                    .strip_prefix("ms=")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            let probe = header("x-probe").unwrap_or_else(|| "-".into());
            let body = format!("{line} probe={probe}");
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            // Answered: no longer in flight here. (Counted until the
            // connection closed, a request could look in flight after the
            // client already had its whole answer and sent the next one.)
            drop(_in_flight);
            let _ = sock.write_all(resp.as_bytes()).await;
        }
    }
    let _ = sock.shutdown().await;
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A host of `owner` with the Hetzner plugin pointed at a fresh Hetzner
/// fake on loopback (granted exactly the fake, its token as the secret).
///
/// # Panics
/// When the fake or the host cannot start: a test cannot go on.
pub async fn hetzner_host(
    owner: &str,
) -> (
    wasmprov_fake::HetznerFake,
    PluginDir,
    wasmprov_host::Host,
    Arc<dyn wasmprov_api::CloudProvisioner>,
) {
    let fake = wasmprov_fake::HetznerFake::start(
        "127.0.0.1:0".parse().expect("an address"),
        wasmprov_fake::HetznerFakeOptions::default(),
    )
    .await
    .expect("the fake starts");
    let dir = PluginDir::new();
    let grant = fake.url().trim_end_matches("/v1").to_string();
    dir.add(
        "hetzner",
        guests::HETZNER,
        &format!(
            "[config]\nendpoint = \"{}\"\n[secrets]\ntoken = {{ env = \"HCLOUD_TOKEN\" }}\n[http]\nallow = [\"{grant}\"]\n",
            fake.url()
        ),
    );
    let token = fake.token().to_string();
    let host = wasmprov_host::HostBuilder::new(dir.path())
        .owner_id(owner)
        .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
        .secret_source(move |name| (name == "HCLOUD_TOKEN").then(|| token.clone()))
        .build()
        .await
        .expect("the host builds");
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let p = host.plugin("hetzner").expect("hetzner loaded");
    (fake, dir, host, p)
}

/// The conformance suite on the `buggy-refcloud` test guest with planted
/// bug `bug` (`none` for the clean plugin), its fake left to the caller.
#[must_use]
pub fn buggy_refcloud_suite(bug: &str) -> wasmprov_testkit::Suite {
    let manifest = format!(
        r#"
name = "buggy"
component = "buggy.wasm"

[config]
bug = "{bug}"

[secrets]
token = {{ env = "REFCLOUD_TOKEN" }}

[http]
allow = ["https://api.refcloud.example"]
"#
    );
    wasmprov_testkit::Suite::from_component("buggy", guests::BUGGY_REFCLOUD.as_ref(), &manifest)
}

/// Runs `suite` (which must finish within two minutes) and prints its
/// report; panics when it cannot run.
pub async fn run_suite(suite: wasmprov_testkit::Suite) -> wasmprov_testkit::Report {
    let report = tokio::time::timeout(std::time::Duration::from_secs(120), suite.run())
        .await
        .expect("the suite finished in time")
        .expect("the suite ran");
    eprintln!("{report}");
    report
}

/// A valid component that is small and slow to compile: one core function
/// of `blocks` nested blocks, each mixing a few of 2 000 locals, so the
/// compiler's register allocation works hard (about 1 MB at 40 000
/// blocks). It exports nothing a provisioner needs, so it could never
/// load; the host's compile budget is what refuses it first.
#[must_use]
pub fn slow_to_compile_component(blocks: u32) -> Vec<u8> {
    use wasm_encoder::{
        CodeSection, Component, ExportKind, ExportSection, Function, FunctionSection,
        Instruction as I, Module, ModuleSection, TypeSection, ValType,
    };
    const LOCALS: u32 = 2000;
    let mut types = TypeSection::new();
    types.ty().function([], [ValType::I32]);
    let mut funcs = FunctionSection::new();
    funcs.function(0);
    let mut f = Function::new([(LOCALS, ValType::I32)]);
    for k in 0..blocks {
        let (a, b, c) = (k % LOCALS, (k * 7 + 3) % LOCALS, (k * 13 + 5) % LOCALS);
        f.instruction(&I::Block(wasm_encoder::BlockType::Empty));
        f.instruction(&I::LocalGet(a));
        f.instruction(&I::LocalGet(b));
        f.instruction(&I::I32Add);
        f.instruction(&I::I32Const(k as i32));
        f.instruction(&I::I32Xor);
        f.instruction(&I::LocalTee(c));
        f.instruction(&I::BrIf(0));
        f.instruction(&I::LocalGet(b));
        f.instruction(&I::LocalSet(a));
        f.instruction(&I::End);
    }
    for l in (0..LOCALS).step_by(97) {
        f.instruction(&I::LocalGet(l));
        if l > 0 {
            f.instruction(&I::I32Add);
        }
    }
    f.instruction(&I::End);
    let mut code = CodeSection::new();
    code.function(&f);
    let mut exports = ExportSection::new();
    exports.export("run", ExportKind::Func, 0);
    let mut module = Module::new();
    module
        .section(&types)
        .section(&funcs)
        .section(&exports)
        .section(&code);
    let mut component = Component::new();
    component.section(&ModuleSection(&module));
    component.finish()
}

/// A small tmpfs mounted on a temporary directory, for tests of what
/// happens when a disk fills up: [`fill`](SmallDisk::fill) takes every
/// free byte, [`free`](SmallDisk::free) gives them back. Unmounted on drop.
#[derive(Debug)]
pub struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// A tmpfs of `bytes` bytes; `None` (and a note on stderr) when this
    /// process may not mount one (not root), so that a test can say so and
    /// skip the case.
    ///
    /// # Panics
    /// When running as root and the mount still fails.
    #[must_use]
    pub fn mount(bytes: u64) -> Option<Self> {
        let root = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1))
                == Some("0")
        });
        if !root {
            eprintln!("not root: no tmpfs can be mounted, so the full-disk case is not run");
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}")])
            .arg("tmpfs")
            .arg(dir.path())
            .status()
            .expect("running mount");
        assert!(
            status.success(),
            "mounting a tmpfs on {}",
            dir.path().display()
        );
        Some(Self { dir })
    }

    /// The mount point.
    #[must_use]
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    fn filler(&self) -> PathBuf {
        self.path().join("filler")
    }

    /// Writes (on) a file until the disk is full.
    ///
    /// # Panics
    /// When the filler cannot be created.
    pub fn fill(&self) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.filler())
            .expect("opening the filler");
        let block = vec![0x5au8; 64 << 10];
        loop {
            match f.write(&block) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        // Small writes until not even one byte fits.
        while f.write(&[0]).is_ok_and(|n| n == 1) {}
        let _ = f.sync_all();
    }

    /// Removes what [`fill`](SmallDisk::fill) wrote.
    pub fn free(&self) {
        let _ = std::fs::remove_file(self.filler());
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}
