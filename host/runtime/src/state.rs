//! What one call's store holds: the WASI context with nothing granted, the
//! plugin's HTTP hooks and config, memory accounting and CPU accounting.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_config::WasiConfigVariables;
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use crate::bindings::v03::exec::{Command, ExecError, Output};
use crate::hooks::CallKind;
use crate::secrets::CallSecrets;
use crate::shared::PluginShared;

/// Bytes of guest stderr kept per call: the last ones, where a panic message is.
const STDERR_CAPTURE: usize = 16 << 10;

/// CPU time of a call that must not block its caller (`price_hint`, and the
/// `name`/`capacity-types` probe at load), whatever the manifest allows.
pub(crate) const PURE_CPU_CAP: std::time::Duration = std::time::Duration::from_millis(250);
/// Wall-clock time of such a call.
pub(crate) const PURE_WALL_CAP: std::time::Duration = std::time::Duration::from_secs(1);

/// Live host resources (handles) one call may hold.
pub(crate) const MAX_RESOURCES: usize = 4096;

/// Size limit of one header map: the plugin's memory limit shared out over
/// [`MAX_RESOURCES`], between 16 KiB and wasi-http's default of 128 KiB. At
/// most [`MAX_RESOURCES`] maps can be alive, so header memory held by the host
/// stays within about twice the plugin's own memory limit.
pub(crate) fn field_size_limit(memory_bytes: u64) -> usize {
    usize::try_from(memory_bytes / MAX_RESOURCES as u64)
        .unwrap_or(usize::MAX)
        .clamp(16 << 10, 128 << 10)
}

pub(crate) struct CallState {
    /// Made at the first WASI call the guest makes: most pure calls make
    /// none, and a WASI context (random generators, clocks, stdio) is a
    /// tenth of a fresh `price_hint`.
    wasi: Option<WasiCtx>,
    table: ResourceTable,
    http_ctx: WasiHttpCtx,
    pub(crate) hooks: HttpHooks,
    pub(crate) plugin: Arc<PluginShared>,
    /// The config and secret values current for this call, and every value
    /// to redact from its logs and errors (older ones too).
    pub(crate) secrets: Arc<CallSecrets>,
    pub(crate) kind: CallKind,
    pub(crate) memory: MemoryLimiter,
    pub(crate) ticks: u64,
    pub(crate) max_ticks: u64,
    pub(crate) cpu_exhausted: bool,
    pub(crate) log_records: u32,
    pub(crate) stderr: TailPipe,
    /// Set once something of this call may have reached a backend: an HTTP
    /// request written to a connected peer (or handed to an interceptor),
    /// or a program started. A call that fails with it unset made nothing.
    pub(crate) reached: Arc<std::sync::atomic::AtomicBool>,
    /// Programs asked for and not (yet) known to have been refused or to
    /// have failed to start: counted before the run, so that a call cut by
    /// its deadline while a program runs counts it as reached.
    pub(crate) execs: Arc<std::sync::atomic::AtomicUsize>,
}

/// The contract's `exec.run`: through the plugin's exec runner (`exec.rs`),
/// counted as possibly run before it runs (a call cut meanwhile may have
/// started it); a program that was denied or could not start did nothing,
/// and is taken back.
impl crate::bindings::v03::exec::Host for CallState {
    async fn run(&mut self, cmd: Command) -> wasmtime::Result<Result<Output, ExecError>> {
        let plugin = self.plugin.clone();
        self.execs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let out = plugin.exec.run(&plugin.manifest.name, self.kind, cmd).await;
        if matches!(out, Err(ExecError::Denied(_) | ExecError::SpawnFailed(_))) {
            self.execs.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        }
        Ok(out)
    }
}

/// The hook wasi-http calls for every outgoing request of one call.
pub(crate) struct HttpHooks {
    plugin: Arc<PluginShared>,
    kind: CallKind,
    /// False once the call ended: a request still waiting for an in-flight
    /// slot then never goes out (the slot goes to the next call's request).
    open: Arc<std::sync::atomic::AtomicBool>,
    /// The call's "something may have reached a backend" flag.
    reached: Arc<std::sync::atomic::AtomicBool>,
}

impl HttpHooks {
    pub(crate) fn new(
        plugin: Arc<PluginShared>,
        kind: CallKind,
        reached: Arc<std::sync::atomic::AtomicBool>,
    ) -> Self {
        Self {
            plugin,
            kind,
            open: Arc::new(std::sync::atomic::AtomicBool::new(true)),
            reached,
        }
    }

    /// The call's open flag and its reached flag, for a request sent
    /// outside wasi-http (`http_call.rs`).
    pub(crate) fn flags(
        &self,
    ) -> (
        Arc<std::sync::atomic::AtomicBool>,
        Arc<std::sync::atomic::AtomicBool>,
    ) {
        (self.open.clone(), self.reached.clone())
    }

    /// The call ended: requests still waiting for a slot are dropped.
    pub(crate) fn close(&self) {
        self.open.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}

type IoFuture = Box<dyn Future<Output = Result<(), Error>> + Send>;

impl WasiHttpHooks for HttpHooks {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: IoFuture,
    ) -> Box<dyn Future<Output = Result<(http::Response<WasiBody>, IoFuture), Error>> + Send> {
        let plugin = self.plugin.clone();
        let kind = self.kind;
        let open = self.open.clone();
        let reached = self.reached.clone();
        Box::new(async move {
            let response = plugin
                .http
                .send(&plugin.manifest.name, kind, &open, &reached, request)
                .await?;
            Ok((response, Box::new(async { Ok(()) }) as IoFuture))
        })
    }
}

impl Drop for CallState {
    /// Runs before the fields (the resource table holding the call's
    /// requests) are dropped: requests that waited for an in-flight slot
    /// see the call closed and do not go out when the slots free up.
    fn drop(&mut self) {
        self.hooks.close();
    }
}

impl CallState {
    pub(crate) fn new(
        plugin: Arc<PluginShared>,
        kind: CallKind,
        secrets: Arc<CallSecrets>,
    ) -> Self {
        let stderr = TailPipe::new(STDERR_CAPTURE);
        let limits = &plugin.manifest.limits;
        let max_ticks = max_ticks(limits, kind);
        // Host-side memory a guest can make the host hold (wasi-http header
        // maps, streams, pollables) is bounded too: a cap on live resources and
        // on each header map, scaled to the plugin's memory limit.
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_RESOURCES);
        let mut http_ctx = WasiHttpCtx::new();
        http_ctx.set_field_size_limit(field_size_limit(limits.memory_bytes));
        let reached = Arc::new(std::sync::atomic::AtomicBool::new(false));
        Self {
            wasi: None,
            table,
            http_ctx,
            hooks: HttpHooks::new(plugin.clone(), kind, reached.clone()),
            reached,
            execs: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            memory: MemoryLimiter::new(limits.memory_bytes),
            plugin,
            secrets,
            kind,
            ticks: 0,
            max_ticks,
            cpu_exhausted: false,
            log_records: 0,
            stderr,
        }
    }

    /// Readies a store that answered a pure call for the next one: a whole
    /// CPU budget and log allowance, no memory refusal on record, and the
    /// config and secret values current for that call (`newer`, when they
    /// are not the ones it has), so a kept instance reads what a fresh one
    /// would.
    pub(crate) fn restart_pure(&mut self, newer: Option<Arc<CallSecrets>>) {
        debug_assert_eq!(self.kind, CallKind::Pure);
        if let Some(secrets) = newer {
            self.secrets = secrets;
        }
        self.ticks = 0;
        self.cpu_exhausted = false;
        self.log_records = 0;
        self.memory.hit = false;
        self.stderr.clear();
    }

    pub(crate) fn config(&self) -> &WasiConfigVariables {
        &self.secrets.config
    }

    /// The guest's stderr so far, for error messages (panics print there).
    pub(crate) fn stderr_text(&self) -> String {
        let bytes = self.stderr.contents();
        String::from_utf8_lossy(&bytes).trim().to_string()
    }
}

/// Epoch ticks of CPU a call of `kind` may use.
fn max_ticks(limits: &wasmprov_policy::limits::Limits, kind: CallKind) -> u64 {
    let cpu = match kind {
        CallKind::Io => limits.cpu_time,
        CallKind::Pure => limits.cpu_time.min(PURE_CPU_CAP),
    };
    (cpu.as_millis() / crate::engine::EPOCH_TICK.as_millis()).max(1) as u64
}

/// A guest's stderr: accepts everything, keeps the last `cap` bytes. Writing
/// never fails, so a chatty guest is not trapped for it.
#[derive(Clone, Debug)]
pub(crate) struct TailPipe {
    buf: Arc<Mutex<VecDeque<u8>>>,
    cap: usize,
}

impl TailPipe {
    fn new(cap: usize) -> Self {
        Self {
            // Grown at the first write: most calls write nothing.
            buf: Arc::new(Mutex::new(VecDeque::new())),
            cap,
        }
    }

    fn clear(&self) {
        if let Ok(mut buf) = self.buf.lock() {
            buf.clear();
        }
    }

    fn contents(&self) -> Vec<u8> {
        self.buf
            .lock()
            .map(|b| b.iter().copied().collect())
            .unwrap_or_default()
    }
}

impl wasmtime_wasi::cli::IsTerminal for TailPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl wasmtime_wasi::cli::StdoutStream for TailPipe {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl tokio::io::AsyncWrite for TailPipe {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        if let Ok(mut buf) = self.buf.lock() {
            let keep = data.len().min(self.cap);
            buf.extend(&data[data.len() - keep..]);
            let excess = buf.len().saturating_sub(self.cap);
            buf.drain(..excess);
        }
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// The WASI context of a call: nothing is inherited (no environment, no
/// arguments, no preopened directories, no sockets, no name lookup, no
/// stdin); stderr goes to the call's [`TailPipe`].
fn wasi_context(stderr: &TailPipe) -> WasiCtx {
    WasiCtx::builder()
        .stderr(stderr.clone())
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false)
        .build()
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        let stderr = &self.stderr;
        WasiCtxView {
            ctx: self.wasi.get_or_insert_with(|| wasi_context(stderr)),
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for CallState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http_ctx,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

/// Caps linear memory and table growth per instance, and remembers a refusal
/// so that a following trap can be reported as "memory limit".
#[derive(Debug)]
pub(crate) struct MemoryLimiter {
    max_bytes: u64,
    pub(crate) hit: bool,
    /// A memory grew after the instance was made.
    pub(crate) grew: bool,
}

impl MemoryLimiter {
    fn new(max_bytes: u64) -> Self {
        Self {
            max_bytes,
            hit: false,
            grew: false,
        }
    }
}

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        // Making the memory is a growth from 0; later ones are the guest's.
        if current > 0 {
            self.grew = true;
        }
        if desired as u64 > self.max_bytes {
            self.hit = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}
