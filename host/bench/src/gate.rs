//! A loopback proxy in front of the fake cloud that can hold requests: while
//! it is closed, every request waits (and is counted) until it opens, then
//! goes on to the fake. Used to keep N calls in flight for the memory
//! measurements.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context, Result};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

#[derive(Clone)]
struct Shared {
    upstream: String,
    client: Client<HttpConnector, Full<Bytes>>,
    waiting: Arc<AtomicUsize>,
    open: tokio::sync::watch::Receiver<bool>,
}

/// A running gate.
#[derive(Debug)]
pub struct Gate {
    addr: std::net::SocketAddr,
    waiting: Arc<AtomicUsize>,
    open: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Gate {
    /// Starts an open gate forwarding to `upstream` (`http://host:port`), on
    /// the server runtime.
    pub async fn start(upstream: &str) -> Result<Self> {
        let (open, open_rx) = tokio::sync::watch::channel(true);
        let waiting = Arc::new(AtomicUsize::new(0));
        let shared = Shared {
            upstream: upstream.trim_end_matches('/').to_string(),
            client: Client::builder(TokioExecutor::new()).build_http(),
            waiting: waiting.clone(),
            open: open_rx,
        };
        let listener = crate::common::server_runtime()
            .spawn(async { tokio::net::TcpListener::bind("127.0.0.1:0").await })
            .await
            .context("gate task")?
            .context("binding the gate")?;
        let addr = listener.local_addr()?;
        let router = axum::Router::new().fallback(forward).with_state(shared);
        let task = crate::common::server_runtime().spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Ok(Self {
            addr,
            waiting,
            open,
            task,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Requests held right now.
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// Opens (let everything through) or closes (hold new requests).
    pub fn set_open(&self, open: bool) {
        let _ = self.open.send(open);
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn forward(State(s): State<Shared>, req: Request) -> Response {
    let mut open = s.open.clone();
    if !*open.borrow() {
        s.waiting.fetch_add(1, Ordering::SeqCst);
        let _ = open.wait_for(|o| *o).await;
        s.waiting.fetch_sub(1, Ordering::SeqCst);
    }
    match relay(&s, req).await {
        Ok(r) => r,
        Err(e) => Response::builder()
            .status(502)
            .body(Body::from(format!("gate: {e:#}")))
            .unwrap_or_default(),
    }
}

async fn relay(s: &Shared, req: Request) -> Result<Response> {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, 64 << 20).await?;
    let pq = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut out = http::Request::builder()
        .method(parts.method)
        .uri(format!("{}{pq}", s.upstream));
    for (k, v) in &parts.headers {
        if k != http::header::HOST {
            out = out.header(k, v);
        }
    }
    let resp = s.client.request(out.body(Full::new(body))?).await?;
    let (parts, body) = resp.into_parts();
    let body = body.collect().await?.to_bytes();
    Ok(Response::from_parts(parts, Body::from(body)))
}

/// A TCP-level proxy that counts the connections it accepts, to check how
/// many connections a client opens for its requests.
#[derive(Debug)]
pub struct CountingProxy {
    addr: std::net::SocketAddr,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl CountingProxy {
    /// Starts a proxy to `upstream` (`host:port`) on the server runtime.
    pub async fn start(upstream: std::net::SocketAddr) -> Result<Self> {
        let listener = crate::common::server_runtime()
            .spawn(async { tokio::net::TcpListener::bind("127.0.0.1:0").await })
            .await
            .context("proxy task")?
            .context("binding the proxy")?;
        let addr = listener.local_addr()?;
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        let task = crate::common::server_runtime().spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(upstream).await {
                        let _ = inbound.set_nodelay(true);
                        let _ = outbound.set_nodelay(true);
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Ok(Self {
            addr,
            accepted,
            task,
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
