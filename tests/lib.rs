//! Shared pieces of the integration tests: the guest components built from
//! source by `build.rs`, plugin directories made from them, and a loopback
//! HTTP server.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

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

/// A loopback HTTP/1.1 server that answers every request with `200` and a
/// body echoing the request line and the `x-probe` header, and counts requests.
#[derive(Debug)]
pub struct EchoServer {
    /// Where it listens.
    pub addr: SocketAddr,
    hits: std::sync::Arc<std::sync::atomic::AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl EchoServer {
    /// Starts it on 127.0.0.1 and an ephemeral port.
    ///
    /// # Panics
    /// When it cannot bind.
    pub async fn start() -> Self {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = hits.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 16 << 10];
                    let mut len = 0;
                    while !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") && len < buf.len() {
                        match sock.read(&mut buf[len..]).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => len += n,
                        }
                    }
                    counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let head = String::from_utf8_lossy(&buf[..len]).to_string();
                    let line = head.lines().next().unwrap_or("").to_string();
                    let probe = head
                        .lines()
                        .find_map(|l| l.strip_prefix("x-probe: "))
                        .unwrap_or("-")
                        .to_string();
                    let body = format!("{line} probe={probe}");
                    let resp = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = sock.write_all(resp.as_bytes()).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        Self { addr, hits, task }
    }

    /// Requests answered so far.
    #[must_use]
    pub fn hits(&self) -> u64 {
        self.hits.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}
