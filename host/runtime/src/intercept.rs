//! Hooks between a plugin's allowed I/O and the world, for embedders and
//! test harnesses: send a plugin's HTTP to a fake of its cloud, record or
//! replay it, inject faults, answer its exec with stubs, and hear about
//! every denial.
//!
//! An interceptor sees a request only *after* the plugin's grants allowed it:
//! it can change where an allowed request goes or what answers it, never
//! widen what a plugin may do. Denials still happen first and are reported
//! to the [`Observer`].
//!
//! ```no_run
//! use std::net::SocketAddr;
//! use wasmprov_host::intercept::{HttpFailure, HttpInterceptor, OutgoingRequest, Upstream};
//!
//! /// Sends every allowed request of every plugin to a fake cloud on loopback.
//! struct ToFake(SocketAddr);
//!
//! #[async_trait::async_trait]
//! impl HttpInterceptor for ToFake {
//!     async fn exchange(
//!         &self,
//!         req: OutgoingRequest,
//!         upstream: Upstream<'_>,
//!     ) -> Result<http::Response<bytes::Bytes>, HttpFailure> {
//!         upstream.send_to(self.0, req).await
//!     }
//! }
//! # async fn demo() -> anyhow::Result<()> {
//! let host = wasmprov_host::HostBuilder::new("./plugins.d")
//!     .http_interceptor(std::sync::Arc::new(ToFake("127.0.0.1:8787".parse()?)))
//!     .build()
//!     .await?;
//! # Ok(()) }
//! ```

use std::net::SocketAddr;

use bytes::Bytes;

/// An HTTP request a plugin sent and its grants allowed, with its body read.
#[derive(Clone, Debug)]
pub struct OutgoingRequest {
    /// The plugin that sent it.
    pub plugin: String,
    /// Request method.
    pub method: http::Method,
    /// The full URL as the plugin wrote it (scheme and authority included).
    pub uri: http::Uri,
    /// Headers as the plugin set them.
    pub headers: http::HeaderMap,
    /// The request body.
    pub body: Bytes,
}

/// How an HTTP exchange failed, as the plugin will see it (a `wasi:http`
/// error code).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpFailure {
    /// No response before the deadline (`connection-timeout`).
    Timeout,
    /// The connection broke before a whole response arrived
    /// (`connection-terminated`).
    ConnectionReset,
    /// Nothing listens at the destination (`connection-refused`).
    ConnectionRefused,
    /// The host refused the request (`HTTP-request-denied`).
    Denied(String),
    /// The response broke a limit of the plugin (`HTTP-response-body-size`).
    ResponseTooLarge,
    /// Anything else (`internal-error` with this message).
    Other(String),
}

impl std::fmt::Display for HttpFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Timeout => f.write_str("timed out"),
            Self::ConnectionReset => f.write_str("connection reset"),
            Self::ConnectionRefused => f.write_str("connection refused"),
            Self::Denied(why) => write!(f, "denied: {why}"),
            Self::ResponseTooLarge => f.write_str("response body too large"),
            Self::Other(why) => f.write_str(why),
        }
    }
}

impl HttpFailure {
    pub(crate) fn into_wasi(self) -> wasmtime_wasi_http::Error {
        use wasmtime_wasi_http::Error;
        match self {
            Self::Timeout => Error::ConnectionTimeout,
            Self::ConnectionReset => Error::ConnectionTerminated,
            Self::ConnectionRefused => Error::ConnectionRefused,
            Self::Denied(_) => Error::HttpRequestDenied,
            Self::ResponseTooLarge => Error::HttpResponseBodySize(None),
            Self::Other(why) => Error::InternalError(Some(why)),
        }
    }

    pub(crate) fn from_wasi(e: &wasmtime_wasi_http::Error) -> Self {
        use wasmtime_wasi_http::Error;
        match e {
            Error::ConnectionTimeout | Error::ConnectionReadTimeout | Error::DnsTimeout => {
                Self::Timeout
            }
            Error::ConnectionTerminated | Error::HttpResponseIncomplete => Self::ConnectionReset,
            Error::ConnectionRefused => Self::ConnectionRefused,
            Error::HttpRequestDenied => Self::Denied("denied by the host".into()),
            Error::HttpResponseBodySize(_) => Self::ResponseTooLarge,
            other => Self::Other(format!("{other:?}")),
        }
    }
}

/// How the host sends an allowed request itself (the HTTP gate, `http.rs`):
/// what [`Upstream`] calls, so that this file stays below the gate.
#[async_trait::async_trait]
pub(crate) trait RequestSender: Send + Sync {
    /// Sends a whole request and reads the whole response, within the
    /// plugin's limits: to `to` over plain HTTP when given, else to the
    /// checked destination after resolution.
    async fn send_buffered(
        &self,
        dest: &wasmprov_policy::http::Destination,
        to: Option<SocketAddr>,
        req: OutgoingRequest,
        deadline: tokio::time::Instant,
    ) -> Result<http::Response<Bytes>, HttpFailure>;
}

/// How the host runs an allowed program itself (the exec runner,
/// `exec.rs`): what [`RealExec`] calls.
#[async_trait::async_trait]
pub(crate) trait ProgramRunner: Send + Sync {
    /// Runs an allowed program for real, under `grant`'s limits.
    async fn run_granted(
        &self,
        grant: &Granted,
        req: ExecRequest,
    ) -> Result<ExecOutput, ExecFailure>;
}

/// The limits of one allowed run.
#[derive(Debug)]
pub(crate) struct Granted {
    pub(crate) timeout: std::time::Duration,
    pub(crate) max_output: usize,
}

/// The host's own way out for one intercepted request: the connection pool,
/// limits and deadline of the plugin that sent it.
pub struct Upstream<'a> {
    pub(crate) gate: &'a dyn RequestSender,
    pub(crate) dest: &'a wasmprov_policy::http::Destination,
    pub(crate) deadline: tokio::time::Instant,
}

impl std::fmt::Debug for Upstream<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("dest", &self.dest.to_string())
            .finish_non_exhaustive()
    }
}

impl Upstream<'_> {
    /// Sends the request where the plugin addressed it, exactly as the host
    /// would without an interceptor: the name is resolved and each address
    /// checked against the plugin's grants.
    ///
    /// # Errors
    /// The failure the plugin would see.
    pub async fn send(&self, req: OutgoingRequest) -> Result<http::Response<Bytes>, HttpFailure> {
        self.gate
            .send_buffered(self.dest, None, req, self.deadline)
            .await
    }

    /// Sends the request over plain HTTP to `addr` instead of where the
    /// plugin addressed it (for example, a fake of its cloud on loopback).
    /// The plugin cannot tell: the `Host` header still names the authority
    /// it wrote. No address check applies, since the embedder chose `addr`.
    ///
    /// # Errors
    /// The failure the plugin would see.
    pub async fn send_to(
        &self,
        addr: SocketAddr,
        req: OutgoingRequest,
    ) -> Result<http::Response<Bytes>, HttpFailure> {
        self.gate
            .send_buffered(self.dest, Some(addr), req, self.deadline)
            .await
    }

    /// When the plugin's deadline for this request passes.
    #[must_use]
    pub fn deadline(&self) -> tokio::time::Instant {
        self.deadline
    }
}

/// Decides what happens to every HTTP request a plugin's grants allowed.
#[async_trait::async_trait]
pub trait HttpInterceptor: Send + Sync + 'static {
    /// Answers `req`: by sending it on through `upstream` (changed or not),
    /// by answering it directly, or with a failure. Runs under the request's
    /// deadline; the response goes through the plugin's body-size limit.
    async fn exchange(
        &self,
        req: OutgoingRequest,
        upstream: Upstream<'_>,
    ) -> Result<http::Response<Bytes>, HttpFailure>;
}

/// A program run a plugin asked for and its grants allowed.
#[derive(Clone, Debug)]
pub struct ExecRequest {
    /// The plugin that asked.
    pub plugin: String,
    /// Absolute path of the program, as granted.
    pub program: String,
    /// Arguments.
    pub args: Vec<String>,
    /// Environment (the only variables the program gets).
    pub env: Vec<(String, String)>,
    /// Standard input, when the plugin gave one.
    pub stdin: Option<Vec<u8>>,
}

impl ExecRequest {
    /// The value of environment variable `name`, if set.
    #[must_use]
    pub fn var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What a finished program produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecOutput {
    /// Exit code; `None` when a signal ended it.
    pub exit_code: Option<i32>,
    /// Standard output.
    pub stdout: Vec<u8>,
    /// Standard error.
    pub stderr: Vec<u8>,
}

/// Why a program run failed, as the plugin will see it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ExecFailure {
    /// The host refused it.
    Denied(String),
    /// The program could not be started.
    SpawnFailed(String),
    /// It ran past its time limit and was killed.
    Timeout(String),
    /// It wrote more than its output limit and was killed.
    OutputTooLarge(String),
    /// Anything else.
    Other(String),
}

impl std::fmt::Display for ExecFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Denied(m) => write!(f, "denied: {m}"),
            Self::SpawnFailed(m) => write!(f, "could not start: {m}"),
            Self::Timeout(m) => write!(f, "timed out: {m}"),
            Self::OutputTooLarge(m) => write!(f, "output too large: {m}"),
            Self::Other(m) => f.write_str(m),
        }
    }
}

/// The host's own way to run one intercepted program: for real, under the
/// grant's working directory, process group, time and output limits.
pub struct RealExec<'a> {
    pub(crate) runner: &'a dyn ProgramRunner,
    pub(crate) grant: &'a Granted,
}

impl std::fmt::Debug for RealExec<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealExec").finish_non_exhaustive()
    }
}

impl RealExec<'_> {
    /// Runs `req` as the host would without an interceptor. The program may
    /// be changed (to a stub, say) but it runs with the original grant's
    /// limits.
    ///
    /// # Errors
    /// The failure the plugin would see.
    pub async fn run(&self, req: ExecRequest) -> Result<ExecOutput, ExecFailure> {
        self.runner.run_granted(self.grant, req).await
    }

    /// The time limit of this run.
    #[must_use]
    pub fn timeout(&self) -> std::time::Duration {
        self.grant.timeout
    }
}

/// Decides what happens to every program run a plugin's grants allowed.
#[async_trait::async_trait]
pub trait ExecInterceptor: Send + Sync + 'static {
    /// Answers `req`: by running it (changed or not) through `real`, or by
    /// answering it directly.
    async fn run(&self, req: ExecRequest, real: RealExec<'_>) -> Result<ExecOutput, ExecFailure>;
}

/// What was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DenialKind {
    /// An HTTP request.
    Http,
    /// A program run.
    Exec,
}

/// A request of a plugin the host refused.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Denial {
    /// The plugin.
    pub plugin: String,
    /// HTTP or exec.
    pub kind: DenialKind,
    /// The URL or program asked for.
    pub target: String,
    /// Why it was refused.
    pub reason: String,
}

/// Hears about what plugins do; every method has an empty default.
pub trait Observer: Send + Sync + 'static {
    /// The host refused a request of a plugin.
    fn denied(&self, _denial: &Denial) {}
}
