//! Where outgoing HTTP is decided and sent: the one send-request hook every
//! guest request passes through.
//!
//! Order of checks, each a denial the guest sees as `HTTP-request-denied`
//! (never a trap):
//! 1. the call may do I/O at all (`price-hint` may not);
//! 2. the URL is well formed, carries no user information, and a grant
//!    covers its scheme, host and port ([`wasmprov_policy::http`]);
//! 3. a `Host` header, if any, names the same authority;
//! 4. the name resolves, and only to addresses the policy accepts; the
//!    connection goes to an address that was checked (no second lookup).
//!
//! Then limits: requests in flight (over the limit a request waits for a
//! slot, in order, for up to one request timeout; then
//! `connection-limit-reached`, retryable), one deadline
//! for connect-to-last-byte (`connection-timeout` / `connection-read-timeout`)
//! and the response body size (`HTTP-response-body-size`). Redirects are
//! never followed by the host: a 3xx goes back to the guest, and a follow-up
//! request is checked like any other.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::HOST;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::{Instant, Sleep};
use wasmprov_policy::http::{DestHost, Destination, HttpPolicy};
use wasmprov_policy::limits::Limits;
use wasmtime_wasi_http::io::TokioIo;
use wasmtime_wasi_http::{Error, WasiBody};

use crate::hooks::{CallKind, Hooks};
use crate::intercept::{Denial, DenialKind, HttpFailure, OutgoingRequest, RequestSender, Upstream};

/// How long the host waits for a guest to finish writing the body of a
/// request it is about to deny (so that the guest sees the denial rather
/// than a broken stream).
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// Per-plugin HTTP state: the policy, its limits and the in-flight gate.
#[derive(Debug)]
pub(crate) struct HttpGate {
    policy: HttpPolicy,
    limits: Limits,
    in_flight: Arc<Semaphore>,
    pool: Arc<ConnPool>,
    hooks: Hooks,
}

/// Largest request body an interceptor is handed (it is read into memory).
const INTERCEPT_MAX_REQUEST: usize = 16 << 20;

impl HttpGate {
    pub(crate) fn new(policy: HttpPolicy, limits: Limits, hooks: Hooks) -> Self {
        Self {
            in_flight: Arc::new(Semaphore::new(limits.http_max_in_flight)),
            pool: ConnPool::new(limits.http_max_in_flight),
            policy,
            limits,
            hooks,
        }
    }

    fn report_denial(&self, plugin: &str, uri: &http::Uri, reason: &str) {
        self.hooks.metrics.denied(plugin, DenialKind::Http);
        if let Some(observer) = &self.hooks.observer {
            observer.denied(&Denial {
                plugin: plugin.to_string(),
                kind: DenialKind::Http,
                target: uri.to_string(),
                reason: reason.to_string(),
            });
        }
    }

    /// Sends one request of a guest's call, if the call may do I/O and a
    /// grant covers it (the checks and limits above).
    pub(crate) async fn send(
        &self,
        plugin: &str,
        kind: CallKind,
        open: &std::sync::atomic::AtomicBool,
        reached: &std::sync::atomic::AtomicBool,
        req: http::Request<WasiBody>,
    ) -> Result<http::Response<WasiBody>, Error> {
        let checked = match self.check(kind, &req) {
            Ok(checked) => checked,
            Err(reason) => {
                tracing::warn!(plugin, uri = %req.uri(), %reason, "HTTP request denied");
                self.report_denial(plugin, req.uri(), &reason);
                drain(req.into_body()).await;
                return Err(Error::HttpRequestDenied);
            }
        };
        // Over the in-flight limit a request waits for a permit, first come
        // first served (tokio's semaphore is fair), for up to one request
        // timeout; the call's own deadline bounds it too. Only then does it
        // fail, as `connection-limit-reached`, which the SDK reports as
        // retryable: load is back-pressure, never a configuration error.
        let (permit, req) = match self.in_flight.clone().try_acquire_owned() {
            Ok(permit) => (permit, req),
            Err(_) => self.wait_for_slot(plugin, open, req).await?,
        };
        let deadline = Instant::now() + self.limits.http_timeout;
        if let Some(interceptor) = &self.hooks.http {
            // What an interceptor does with the request is its own: count
            // it as sent.
            reached.store(true, std::sync::atomic::Ordering::SeqCst);
            let result = tokio::time::timeout_at(
                deadline,
                self.intercepted(plugin, interceptor.as_ref(), &checked, req, deadline),
            )
            .await
            .map_err(|_| Error::ConnectionTimeout)?;
            drop(permit);
            return result;
        }
        let addr = match tokio::time::timeout_at(deadline, self.resolve(&checked)).await {
            Err(_) => return Err(Error::DnsTimeout),
            Ok(Err(DenyOr::Deny(reason))) => {
                tracing::warn!(plugin, uri = %req.uri(), %reason, "HTTP request denied after resolution");
                self.report_denial(plugin, req.uri(), &reason);
                drain(req.into_body()).await;
                return Err(Error::HttpRequestDenied);
            }
            Ok(Err(DenyOr::Fail(e))) => return Err(e),
            Ok(Ok(addr)) => addr,
        };
        tracing::debug!(plugin, uri = %req.uri(), %addr, "HTTP request allowed");
        let key = PoolKey {
            https: checked.scheme == wasmprov_policy::http::Scheme::Https,
            host: checked.to_string(),
            addr,
        };
        // Whether this request was written to a connected peer: a deadline
        // after that is a first-byte timeout (the connection was made), one
        // before it a connect timeout.
        let sent = std::sync::atomic::AtomicBool::new(false);
        let (response, sender) = tokio::time::timeout_at(
            deadline,
            send_to(&self.pool, &key, &checked, req, &[reached, &sent]),
        )
        .await
        .map_err(|_| {
            if sent.load(std::sync::atomic::Ordering::SeqCst) {
                Error::ConnectionReadTimeout
            } else {
                Error::ConnectionTimeout
            }
        })??;
        let max = self.limits.http_max_response_bytes;
        if let Some(len) = response
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            && len > max
        {
            tracing::warn!(plugin, len, max, "HTTP response body over the size limit");
            return Err(Error::HttpResponseBodySize(Some(len)));
        }
        Ok(response.map(|incoming| {
            LimitedBody {
                inner: incoming,
                remaining: max,
                max,
                deadline: Box::pin(tokio::time::sleep_until(deadline)),
                _permit: Some(permit),
                reuse: Some((self.pool.clone(), key, sender)),
            }
            .boxed_unsync()
        }))
    }

    /// Waits, in order, for an in-flight slot for up to one request timeout;
    /// `connection-limit-reached` after it, or when the call ended meanwhile.
    async fn wait_for_slot(
        &self,
        plugin: &str,
        open: &std::sync::atomic::AtomicBool,
        req: http::Request<WasiBody>,
    ) -> Result<(OwnedSemaphorePermit, http::Request<WasiBody>), Error> {
        match tokio::time::timeout(
            self.limits.http_timeout,
            self.in_flight.clone().acquire_owned(),
        )
        .await
        {
            // The call ended while this request waited: it never goes out.
            Ok(Ok(_)) if !open.load(std::sync::atomic::Ordering::SeqCst) => {
                Err(Error::ConnectionTerminated)
            }
            Ok(Ok(permit)) => Ok((permit, req)),
            _ => {
                tracing::warn!(plugin, uri = %req.uri(), limit = self.limits.http_max_in_flight, "HTTP request waited past its timeout for an in-flight slot");
                drain(req.into_body()).await;
                Err(Error::ConnectionLimitReached)
            }
        }
    }

    /// Hands an allowed request to the embedder's interceptor, its body read.
    async fn intercepted(
        &self,
        plugin: &str,
        interceptor: &dyn crate::intercept::HttpInterceptor,
        checked: &Destination,
        req: http::Request<WasiBody>,
        deadline: Instant,
    ) -> Result<http::Response<WasiBody>, Error> {
        let (parts, body) = req.into_parts();
        let body = read_limited(body, INTERCEPT_MAX_REQUEST as u64)
            .await
            .map_err(|e| match e {
                ReadError::TooLarge => Error::HttpRequestBodySize(None),
                ReadError::Failed(e) => e,
            })?;
        let mut headers = parts.headers;
        if !headers.contains_key(HOST)
            && let Some(authority) = parts.uri.authority()
            && let Ok(value) = http::HeaderValue::from_str(authority.as_str())
        {
            headers.insert(HOST, value);
        }
        let outgoing = OutgoingRequest {
            plugin: plugin.to_string(),
            method: parts.method,
            uri: parts.uri,
            headers,
            body,
        };
        let upstream = Upstream {
            gate: self,
            dest: checked,
            deadline,
        };
        let response = interceptor
            .exchange(outgoing, upstream)
            .await
            .map_err(HttpFailure::into_wasi)?;
        let max = self.limits.http_max_response_bytes;
        if response.body().len() as u64 > max {
            tracing::warn!(plugin, max, "HTTP response body over the size limit");
            return Err(Error::HttpResponseBodySize(Some(max)));
        }
        Ok(response.map(|b| {
            http_body_util::Full::new(b)
                .map_err(|never| match never {})
                .boxed_unsync()
        }))
    }

    /// Sends a whole request and reads the whole response, within the
    /// plugin's limits: to `to` over plain HTTP when given, else to the
    /// checked destination after resolution.
    pub(crate) async fn send_buffered(
        &self,
        dest: &Destination,
        to: Option<SocketAddr>,
        req: OutgoingRequest,
        deadline: Instant,
    ) -> Result<http::Response<Bytes>, HttpFailure> {
        let work = async {
            let key = match to {
                Some(addr) => PoolKey {
                    https: false,
                    host: format!("redirected:{dest}"),
                    addr,
                },
                None => {
                    let addr = self.resolve(dest).await.map_err(|e| match e {
                        DenyOr::Deny(reason) => HttpFailure::Denied(reason),
                        DenyOr::Fail(e) => HttpFailure::from_wasi(&e),
                    })?;
                    PoolKey {
                        https: dest.scheme == wasmprov_policy::http::Scheme::Https,
                        host: dest.to_string(),
                        addr,
                    }
                }
            };
            let mut builder = http::Request::builder().method(req.method).uri(req.uri);
            if let Some(h) = builder.headers_mut() {
                *h = req.headers;
            }
            let request = builder
                .body(
                    http_body_util::Full::new(req.body)
                        .map_err(|never| match never {})
                        .boxed_unsync(),
                )
                .map_err(|e| HttpFailure::Other(format!("bad request: {e}")))?;
            let sent = std::sync::atomic::AtomicBool::new(false);
            let (response, sender) = send_to(&self.pool, &key, dest, request, &[&sent])
                .await
                .map_err(|e| HttpFailure::from_wasi(&e))?;
            let max = self.limits.http_max_response_bytes;
            let (parts, incoming) = response.into_parts();
            let limited = LimitedBody {
                inner: incoming,
                remaining: max,
                max,
                deadline: Box::pin(tokio::time::sleep_until(deadline)),
                _permit: None,
                reuse: Some((self.pool.clone(), key, sender)),
            };
            let body = read_limited(limited.boxed_unsync(), max)
                .await
                .map_err(|e| match e {
                    ReadError::TooLarge => HttpFailure::ResponseTooLarge,
                    ReadError::Failed(e) => HttpFailure::from_wasi(&e),
                })?;
            Ok(http::Response::from_parts(parts, body))
        };
        tokio::time::timeout_at(deadline, work)
            .await
            .map_err(|_| HttpFailure::Timeout)?
    }

    /// Policy checks that need no network.
    fn check(&self, kind: CallKind, req: &http::Request<WasiBody>) -> Result<Destination, String> {
        if kind == CallKind::Pure {
            return Err("price-hint must not do I/O".into());
        }
        let uri = req.uri();
        let scheme = uri.scheme_str().ok_or("no scheme")?;
        let authority = uri.authority().ok_or("no host")?.as_str();
        let dest = Destination::from_parts(scheme, authority)?;
        self.policy.check(&dest).map_err(|e| e.to_string())?;
        if let Some(host) = req.headers().get(HOST)
            && !host.as_bytes().eq_ignore_ascii_case(authority.as_bytes())
        {
            return Err(format!(
                "Host header {:?} differs from the URL's authority {authority:?}",
                String::from_utf8_lossy(host.as_bytes())
            ));
        }
        Ok(dest)
    }

    /// Resolves the destination and returns the first address the policy accepts.
    async fn resolve(&self, dest: &Destination) -> Result<SocketAddr, DenyOr> {
        let candidates: Vec<SocketAddr> = match &dest.host {
            DestHost::Ip(ip) => vec![SocketAddr::new(*ip, dest.port)],
            DestHost::Name(name) => tokio::net::lookup_host((name.as_str(), dest.port))
                .await
                .map_err(|e| {
                    DenyOr::Fail(Error::DnsError {
                        rcode: Some(e.to_string()),
                        info_code: None,
                    })
                })?
                .collect(),
        };
        let mut first_denial = None;
        for addr in &candidates {
            match self.policy.check_resolved(dest, addr.ip()) {
                Ok(()) => {
                    return Ok(SocketAddr::new(
                        wasmprov_policy::http::canonical_ip(addr.ip()),
                        addr.port(),
                    ));
                }
                Err(e) => {
                    first_denial.get_or_insert(e.to_string());
                }
            }
        }
        Err(match first_denial {
            Some(reason) => DenyOr::Deny(reason),
            None => DenyOr::Fail(Error::DestinationNotFound),
        })
    }
}

enum DenyOr {
    Deny(String),
    Fail(Error),
}

/// Reads and discards a request body, within limits.
async fn drain(body: WasiBody) {
    let _ = tokio::time::timeout(DRAIN_LIMIT, async {
        let mut body = body;
        let mut seen: u64 = 0;
        while let Some(Ok(frame)) = body.frame().await {
            seen += frame.data_ref().map_or(0, |d| d.len() as u64);
            if seen > 64 << 20 {
                break;
            }
        }
    })
    .await;
}

fn tls_config() -> Arc<rustls::ClientConfig> {
    static CONFIG: OnceLock<Arc<rustls::ClientConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.into(),
            };
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map(|b| b.with_root_certificates(roots).with_no_client_auth());
            Arc::new(config.unwrap_or_else(|e| {
                // The ring provider supports the default versions; this is unreachable
                // in practice, and an empty config fails every handshake safely.
                tracing::error!("TLS configuration failed: {e}");
                rustls::ClientConfig::builder_with_provider(Arc::new(
                    rustls::crypto::ring::default_provider(),
                ))
                .with_protocol_versions(&[])
                .expect("an empty version list is accepted")
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth()
            }))
        })
        .clone()
}

trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Stream for T {}

type Sender = hyper::client::conn::http1::SendRequest<WasiBody>;

/// Idle connections older than this are not reused.
const IDLE_LIMIT: Duration = Duration::from_secs(20);
/// Idle connections a plugin's pool keeps in all, at least (a plugin allowed
/// more requests in flight keeps as many as it may use at once).
const MIN_IDLE: usize = 32;

/// Where a pooled connection goes: the checked address, and the name it was
/// checked (and, for TLS, verified) for. A connection is reused only for a
/// request that passed every check and resolved to the same address.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PoolKey {
    https: bool,
    host: String,
    addr: SocketAddr,
}

/// Keep-alive connections of one plugin, bounded in total: at most
/// `max_idle` idle connections across all destinations (so a plugin granted
/// a wildcard cannot make the host hold a socket per address it ever
/// reached), none older than [`IDLE_LIMIT`] (a reaper drops them on a timer,
/// whether or not the destination is used again).
#[derive(Debug)]
pub(crate) struct ConnPool {
    idle: std::sync::Mutex<IdleSet>,
    max_idle: usize,
}

#[derive(Debug, Default)]
struct IdleSet {
    by_key: std::collections::HashMap<PoolKey, Vec<(Sender, Instant)>>,
    total: usize,
}

impl IdleSet {
    /// Drops closed and expired connections, and destinations left with none.
    fn prune(&mut self) {
        let mut total = 0;
        self.by_key.retain(|_, list| {
            list.retain(|(s, since)| !s.is_closed() && since.elapsed() < IDLE_LIMIT);
            total += list.len();
            !list.is_empty()
        });
        self.total = total;
    }
}

impl ConnPool {
    /// A pool for a plugin that may have `max_in_flight` requests at once:
    /// it keeps up to that many idle connections (at least
    /// [`MIN_IDLE`]), so a busy plugin does not close connections it
    /// needs again a moment later, and starts its reaper.
    fn new(max_in_flight: usize) -> Arc<Self> {
        let pool = Arc::new(Self {
            idle: std::sync::Mutex::default(),
            max_idle: max_in_flight.max(MIN_IDLE),
        });
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let weak = Arc::downgrade(&pool);
            rt.spawn(async move {
                loop {
                    tokio::time::sleep(IDLE_LIMIT / 4).await;
                    let Some(pool) = weak.upgrade() else { return };
                    if let Ok(mut idle) = pool.idle.lock() {
                        idle.prune();
                    }
                }
            });
        }
        pool
    }

    fn take(&self, key: &PoolKey) -> Option<Sender> {
        let mut idle = self.idle.lock().ok()?;
        let list = idle.by_key.get_mut(key)?;
        let mut found = None;
        let mut taken = 0;
        while let Some((sender, since)) = list.pop() {
            taken += 1;
            if !sender.is_closed() && since.elapsed() < IDLE_LIMIT {
                found = Some(sender);
                break;
            }
        }
        if list.is_empty() {
            idle.by_key.remove(key);
        }
        idle.total -= taken;
        found
    }

    fn put(&self, key: PoolKey, sender: Sender) {
        if sender.is_closed() {
            return;
        }
        if let Ok(mut idle) = self.idle.lock() {
            if idle.total >= self.max_idle {
                idle.prune();
            }
            // Still full: this connection closes instead of waiting.
            if idle.total < self.max_idle {
                idle.by_key
                    .entry(key)
                    .or_default()
                    .push((sender, Instant::now()));
                idle.total += 1;
            }
        }
    }
}

/// Opens a new connection to the checked address; TLS (verified for the
/// destination's name) when `https`.
async fn connect(addr: SocketAddr, dest: &Destination, https: bool) -> Result<Sender, Error> {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::ConnectionRefused => Error::ConnectionRefused,
            _ => Error::Connect(e),
        })?;
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Stream> = match https {
        false => Box::new(tcp),
        true => {
            let name = match &dest.host {
                DestHost::Name(n) => rustls::pki_types::ServerName::try_from(n.clone())
                    .map_err(|_| Error::HttpRequestUriInvalid)?,
                DestHost::Ip(ip) => rustls::pki_types::ServerName::IpAddress((*ip).into()),
            };
            let tls = tokio_rustls::TlsConnector::from(tls_config())
                .connect(name, tcp)
                .await
                .map_err(Error::Tls)?;
            Box::new(tls)
        }
    };
    let (sender, conn) = hyper::client::conn::http1::Builder::new()
        .handshake(TokioIo::new(stream))
        .await
        .map_err(Error::from)?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!("HTTP connection ended: {e}");
        }
    });
    Ok(sender)
}

/// Sends the request over HTTP/1.1 on a pooled connection to the checked
/// address, or a new one; returns the response and the connection, which
/// goes back to the pool once the response body has been read to its end.
/// Each of `reached` (the call's flag and this request's) is set just
/// before the request is written to a connected (and, for HTTPS, verified)
/// peer: an error before that (refused, unreachable, TLS) means the request
/// never left the host.
async fn send_to(
    pool: &ConnPool,
    key: &PoolKey,
    dest: &Destination,
    mut req: http::Request<WasiBody>,
    reached: &[&std::sync::atomic::AtomicBool],
) -> Result<(http::Response<hyper::body::Incoming>, Sender), Error> {
    let mut sender = loop {
        match pool.take(key) {
            Some(mut s) => {
                if s.ready().await.is_ok() {
                    break s;
                }
            }
            None => break connect(key.addr, dest, key.https).await?,
        }
    };
    // On the wire the request line carries only the path; the authority was
    // checked above and goes in the Host header, which wasi-http sets from it.
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", http::uri::PathAndQuery::as_str)
        .to_string();
    *req.uri_mut() = http::Uri::builder()
        .path_and_query(path)
        .build()
        .map_err(|_| Error::HttpRequestUriInvalid)?;
    for flag in reached {
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    }
    let response = sender.send_request(req).await.map_err(Error::from)?;
    Ok((response, sender))
}

/// A response body that stops at the size cap and the request deadline,
/// and holds the in-flight permit until it is done.
struct LimitedBody {
    inner: hyper::body::Incoming,
    remaining: u64,
    max: u64,
    deadline: Pin<Box<Sleep>>,
    _permit: Option<OwnedSemaphorePermit>,
    /// The connection, returned to the pool when the body ends cleanly.
    reuse: Option<(Arc<ConnPool>, PoolKey, Sender)>,
}

impl LimitedBody {
    /// Returns the connection to the pool once the response has ended
    /// (its stated length read): a guest that stops reading at that length,
    /// or drops a body it knows is empty, does not cost a new connection.
    fn release_if_ended(&mut self) {
        if self.inner.is_end_stream()
            && let Some((pool, key, sender)) = self.reuse.take()
        {
            pool.put(key, sender);
        }
    }
}

impl Drop for LimitedBody {
    fn drop(&mut self) {
        self.release_if_ended();
    }
}

impl Body for LimitedBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                let len = frame.data_ref().map_or(0, |d| d.len() as u64);
                if len > this.remaining {
                    this.reuse = None;
                    return Poll::Ready(Some(Err(Error::HttpResponseBodySize(Some(this.max)))));
                }
                this.remaining -= len;
                this.release_if_ended();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.reuse = None;
                Poll::Ready(Some(Err(Error::from(e))))
            }
            Poll::Ready(None) => {
                if let Some((pool, key, sender)) = this.reuse.take() {
                    pool.put(key, sender);
                }
                Poll::Ready(None)
            }
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.reuse = None;
                    Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }
}

#[async_trait::async_trait]
impl RequestSender for HttpGate {
    async fn send_buffered(
        &self,
        dest: &Destination,
        to: Option<SocketAddr>,
        req: OutgoingRequest,
        deadline: Instant,
    ) -> Result<http::Response<Bytes>, HttpFailure> {
        HttpGate::send_buffered(self, dest, to, req, deadline).await
    }
}

enum ReadError {
    TooLarge,
    Failed(Error),
}

/// Reads a whole body, failing once it passes `max` bytes.
async fn read_limited(mut body: WasiBody, max: u64) -> Result<Bytes, ReadError> {
    let mut out = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(ReadError::Failed)?;
        if let Some(data) = frame.data_ref() {
            if (out.len() + data.len()) as u64 > max {
                return Err(ReadError::TooLarge);
            }
            out.extend_from_slice(data);
        }
    }
    Ok(out.freeze())
}
