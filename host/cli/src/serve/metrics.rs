//! What the daemon's `GET /metrics` answers, and in which format.
//!
//! The text is the host's per-plugin families ([`wasmprov_host::metrics`])
//! followed by the daemon's own:
//!
//! | series | labels | counted in |
//! | --- | --- | --- |
//! | `wasmprov_build_info` (info) | `version`, `contracts` | here, constant |
//! | `process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_virtual_memory_bytes`, `process_open_fds`, `process_max_fds`, `process_threads`, `process_start_time_seconds` | | here, read from `/proc/self` at each scrape (the names every Prometheus client library uses) |
//! | `wasmprov_journal_size_bytes`, `wasmprov_journal_writable`, `wasmprov_journal_write_failures_total`, `wasmprov_fleet_held` | | here, read from the journal at each scrape |
//! | `wasmprov_fleet_runs_total` | `run` (`reconcile`, `lease_sweep`), `outcome` (`ok`, `incomplete`: something could not be settled, `held`: destructive actions held, `failed`: the pass did not run) | `mod.rs`, the daemon's background work |
//! | `wasmprov_fleet_run_duration_seconds` (histogram) | `run` | same |
//! | `wasmprov_fleet_last_success_timestamp_seconds` (gauge) | `run` | same: when a pass last ended `ok` |
//! | `grpc_server_started_total`, `grpc_server_handled_total`, `grpc_server_handling_seconds` | `grpc_service`, `grpc_method`, `grpc_type`, `grpc_code` (handled only) | [`GrpcMetricsLayer`], around every gRPC request (the names and labels of the usual gRPC server metrics, so existing dashboards read them) |
//! | `wasmprov_auth_failures_total` | `reason` (`missing`, `wrong`) | `mod.rs`, the bearer-token check |
//!
//! A method the daemon does not serve is counted as `grpc_method="unknown"`
//! under `grpc_service="unknown"`: a client cannot grow the series.
//!
//! **Formats.** `prometheus-client` writes OpenMetrics 1.0 only. A scraper
//! that asks for the classic text format (`Accept: text/plain;
//! version=0.0.4`, ranked above OpenMetrics) gets the same samples
//! rewritten ([`to_classic`]): a counter's family named with its `_total`
//! suffix (in OpenMetrics the family name has none, so a classic parser
//! finds no help for the samples), `info` as a `gauge` named `_info`,
//! `unknown` as `untyped`, no `# UNIT` and no `# EOF`. The rewrite is by
//! line, written here because no maintained crate converts between the two.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::{Registry, Unit};
use wasmprov_fleet::{Fleet, ReconcileReport};
use wasmprov_host::Host;

/// The media type of the OpenMetrics text.
pub(crate) const OPENMETRICS: &str = wasmprov_host::metrics::CONTENT_TYPE;
/// The media type of the classic Prometheus text format.
pub(crate) const CLASSIC: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The format a scraper asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// OpenMetrics 1.0 text (the default).
    OpenMetrics,
    /// The classic Prometheus text format, version 0.0.4.
    Classic,
}

impl Format {
    /// The `Content-Type` of a body in this format.
    pub(crate) fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => OPENMETRICS,
            Format::Classic => CLASSIC,
        }
    }
}

/// The format an `Accept` header ranks first: classic text when
/// `text/plain` has a higher quality than any `application/openmetrics-text`
/// (or OpenMetrics is not named at all); OpenMetrics otherwise, also with no
/// header and for `*/*`. Quality values follow RFC 9110 (a missing or
/// malformed `q` counts as 1, `q=0` as "not acceptable").
pub(crate) fn negotiate(accept: Option<&str>) -> Format {
    let Some(accept) = accept else {
        return Format::OpenMetrics;
    };
    let mut openmetrics: Option<f32> = None;
    let mut classic: Option<f32> = None;
    for range in accept.split(',') {
        let mut parts = range.split(';');
        let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = parts
            .filter_map(|p| p.split_once('='))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
            .map_or(1.0, |(_, v)| v.trim().parse::<f32>().unwrap_or(1.0));
        let slot = match media.as_str() {
            "application/openmetrics-text" => &mut openmetrics,
            "text/plain" => &mut classic,
            _ => continue,
        };
        *slot = Some(slot.map_or(q, |old: f32| old.max(q)));
    }
    match (openmetrics, classic) {
        (_, Some(c)) if c > 0.0 && openmetrics.is_none_or(|o| c > o) => Format::Classic,
        // OpenMetrics refused outright: the other format is all there is.
        (Some(o), c) if o <= 0.0 && c.is_none_or(|c| c > 0.0) => Format::Classic,
        _ => Format::OpenMetrics,
    }
}

/// OpenMetrics text rewritten in the classic Prometheus text format (see
/// the module doc for what changes).
pub(crate) fn to_classic(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // Counter families, for their `_created` samples.
    let mut counters: HashSet<&str> = HashSet::new();
    // A `# HELP` line waits for its family's `# TYPE` (which comes next),
    // since the classic name depends on the type.
    let mut help: Option<(&str, &str)> = None;
    for line in openmetrics.lines() {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut words = rest.splitn(3, ' ');
            let (keyword, name, tail) = (
                words.next().unwrap_or(""),
                words.next().unwrap_or(""),
                words.next().unwrap_or(""),
            );
            if keyword != "TYPE"
                && let Some((n, h)) = help.take()
            {
                let _ = writeln!(out, "# HELP {n} {}", classic_help(h));
            }
            match keyword {
                "EOF" | "UNIT" => {}
                "HELP" => help = Some((name, tail)),
                "TYPE" => {
                    let (classic, kind) = match tail {
                        "counter" => {
                            counters.insert(name);
                            (classic_name(name, "_total"), "counter")
                        }
                        "info" => (classic_name(name, "_info"), "gauge"),
                        "unknown" => (name.to_string(), "untyped"),
                        "gaugehistogram" => (name.to_string(), "histogram"),
                        "stateset" => (name.to_string(), "gauge"),
                        other => (name.to_string(), other),
                    };
                    match help.take() {
                        Some((n, h)) if n == name => {
                            let _ = writeln!(out, "# HELP {classic} {}", classic_help(h));
                        }
                        Some((n, h)) => {
                            let _ = writeln!(out, "# HELP {n} {}", classic_help(h));
                        }
                        None => {}
                    }
                    let _ = writeln!(out, "# TYPE {classic} {kind}");
                }
                _ => {
                    let _ = writeln!(out, "{line}");
                }
            }
            continue;
        }
        if let Some((n, h)) = help.take() {
            let _ = writeln!(out, "# HELP {n} {}", classic_help(h));
        }
        if line.is_empty() {
            continue;
        }
        let sample = strip_exemplar(line);
        let name_end = sample.find(['{', ' ']).unwrap_or(sample.len());
        let name = &sample[..name_end];
        // A counter's `_created` sample has no classic form.
        if let Some(family) = name.strip_suffix("_created")
            && counters.contains(family)
        {
            continue;
        }
        out.push_str(&classic_timestamp(sample));
        out.push('\n');
    }
    out
}

/// `name` with `suffix`, unless it has it already.
fn classic_name(name: &str, suffix: &str) -> String {
    if name.ends_with(suffix) {
        name.to_string()
    } else {
        format!("{name}{suffix}")
    }
}

/// OpenMetrics escapes `"` in help text; the classic format does not
/// (only `\` and newlines), and would show the backslash.
fn classic_help(help: &str) -> String {
    help.replace("\\\"", "\"")
}

/// A sample line without its exemplar (` # {…} value`), which the classic
/// format has no place for.
fn strip_exemplar(line: &str) -> &str {
    match unquoted(line, '#') {
        Some(i) => line[..i].trim_end(),
        None => line,
    }
}

/// Where `wanted` first stands in `sample` outside a quoted label value.
fn unquoted(sample: &str, wanted: char) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in sample.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            c if c == wanted && !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

/// A sample line with its timestamp, if any, in milliseconds (OpenMetrics
/// writes seconds, the classic format integer milliseconds). A sample is
/// `name[{labels}] value [timestamp]`.
fn classic_timestamp(sample: &str) -> String {
    let labels_end = if sample.contains('{') {
        unquoted(sample, '}').map_or(0, |i| i + 1)
    } else {
        0
    };
    let (head, tail) = sample.split_at(labels_end);
    let mut fields: Vec<&str> = tail.split_whitespace().collect();
    // Without labels the name is the first field.
    let name = if labels_end == 0 && !fields.is_empty() {
        Some(fields.remove(0))
    } else {
        None
    };
    let [value, ts] = fields.as_slice() else {
        return sample.to_string();
    };
    let Ok(secs) = ts.parse::<f64>() else {
        return sample.to_string();
    };
    // Inexact for stamps past 2^53 ms, far beyond any real clock.
    #[allow(clippy::cast_possible_truncation)]
    let ms = (secs * 1000.0).round() as i64;
    match name {
        Some(name) => format!("{name} {value} {ms}"),
        None => format!("{head} {value} {ms}"),
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunLabels {
    run: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunKindLabels {
    run: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

/// A pass of the daemon's background work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Run {
    /// A reconcile (the startup one and the periodic ones).
    Reconcile,
    /// A sweep of expired leases.
    LeaseSweep,
}

impl Run {
    fn as_str(self) -> &'static str {
        match self {
            Run::Reconcile => "reconcile",
            Run::LeaseSweep => "lease_sweep",
        }
    }
}

/// The daemon's metrics: the host's families and its own.
#[derive(Debug)]
pub(crate) struct DaemonMetrics {
    host: Arc<Host>,
    registry: Registry,
    runs: Family<RunLabels, Counter>,
    run_duration: Family<RunKindLabels, Histogram, fn() -> Histogram>,
    last_success: Family<RunKindLabels, Gauge<f64, AtomicU64>>,
    auth_failures: Family<ReasonLabels, Counter>,
    grpc: GrpcMetricsLayer,
}

/// Buckets of a reconcile or sweep: 1 ms (an empty journal) to 5 minutes
/// (many plugins, each listing slowly).
fn run_histogram() -> Histogram {
    Histogram::new([
        0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
    ])
}

impl DaemonMetrics {
    /// Metrics over `host` and the journal of `fleet`.
    pub(crate) fn new(host: Arc<Host>, fleet: Arc<Fleet>) -> Arc<Self> {
        let mut registry = Registry::default();
        registry.register(
            "wasmprov_build",
            "The wasmprov build serving: its version and the contract versions its host serves",
            Info::new(vec![
                ("version", env!("CARGO_PKG_VERSION").to_string()),
                ("contracts", wasmprov_host::contract::SUPPORTED.join(",")),
            ]),
        );
        registry.register_collector(Box::new(ProcessCollector));
        registry.register_collector(Box::new(JournalCollector(fleet)));
        let runs = Family::<RunLabels, Counter>::default();
        registry.register(
            "wasmprov_fleet_runs",
            "Reconciles and lease sweeps the daemon ran, by outcome: ok, incomplete (something could not be settled), held (destructive actions held) or failed (the pass did not run)",
            runs.clone(),
        );
        let run_duration =
            Family::<RunKindLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                run_histogram,
            );
        registry.register_with_unit(
            "wasmprov_fleet_run_duration",
            "Time of a reconcile or lease sweep",
            Unit::Seconds,
            run_duration.clone(),
        );
        let last_success = Family::<RunKindLabels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "wasmprov_fleet_last_success_timestamp_seconds",
            "When a reconcile or lease sweep last ended ok, in seconds since the Unix epoch",
            last_success.clone(),
        );
        let auth_failures = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "wasmprov_auth_failures",
            "gRPC calls refused for their bearer token: missing or wrong",
            auth_failures.clone(),
        );
        for reason in ["missing", "wrong"] {
            let _ = auth_failures.get_or_create(&ReasonLabels { reason });
        }
        let grpc = GrpcMetricsLayer::new(&mut registry);
        Arc::new(Self {
            host,
            registry,
            runs,
            run_duration,
            last_success,
            auth_failures,
            grpc,
        })
    }

    /// The layer that counts gRPC requests into these metrics.
    pub(crate) fn grpc_layer(&self) -> GrpcMetricsLayer {
        self.grpc.clone()
    }

    /// The counter of refused bearer tokens, for the token check.
    pub(crate) fn auth_failures(&self) -> AuthFailures {
        AuthFailures(self.auth_failures.clone())
    }

    /// Counts one pass of background work that took from `started` until
    /// now, with its outcome.
    pub(crate) fn ran(
        &self,
        run: Run,
        started: Instant,
        outcome: &anyhow::Result<ReconcileReport>,
    ) {
        let outcome_label = match outcome {
            Err(_) => "failed",
            Ok(r) if r.held.is_some() => "held",
            Ok(r) if !r.errors.is_empty() || !r.held_back.is_empty() => "incomplete",
            Ok(_) => "ok",
        };
        let kind = RunKindLabels { run: run.as_str() };
        self.runs
            .get_or_create(&RunLabels {
                run: run.as_str(),
                outcome: outcome_label,
            })
            .inc();
        self.run_duration
            .get_or_create(&kind)
            .observe(started.elapsed().as_secs_f64());
        if outcome_label == "ok" {
            let now = SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or(Duration::ZERO);
            self.last_success
                .get_or_create(&kind)
                .set(now.as_secs_f64());
        }
    }

    /// Every family in `format`.
    pub(crate) fn render(&self, format: Format) -> String {
        let mut text = String::with_capacity(16 << 10);
        self.host.metrics().encode_families(&mut text);
        if let Err(e) =
            prometheus_client::encoding::text::encode_registry(&mut text, &self.registry)
        {
            tracing::error!(target: super::LOG_TARGET, "encoding the daemon's metrics: {e}");
        }
        text.push_str("# EOF\n");
        match format {
            Format::OpenMetrics => text,
            Format::Classic => to_classic(&text),
        }
    }
}

/// Counts refused bearer tokens.
#[derive(Clone, Debug, Default)]
pub(crate) struct AuthFailures(Family<ReasonLabels, Counter>);

impl AuthFailures {
    /// How many were refused for `reason` (`missing`, `wrong`).
    #[cfg(test)]
    pub(crate) fn count(&self, reason: &'static str) -> u64 {
        self.0.get_or_create(&ReasonLabels { reason }).get()
    }

    /// A call came without a token.
    pub(crate) fn missing(&self) {
        self.0
            .get_or_create(&ReasonLabels { reason: "missing" })
            .inc();
    }

    /// A call came with a token that is not the daemon's.
    pub(crate) fn wrong(&self) {
        self.0
            .get_or_create(&ReasonLabels { reason: "wrong" })
            .inc();
    }
}

/// The `process_*` series, read from `/proc/self` at each scrape.
#[derive(Debug)]
struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        // A /proc that cannot be read (not Linux, hidepid) leaves the
        // series out rather than failing the scrape.
        let Ok(me) = procfs::process::Process::myself() else {
            return Ok(());
        };
        let ticks = procfs::ticks_per_second().max(1) as f64;
        if let Ok(stat) = me.stat() {
            let cpu = ConstCounter::new((stat.utime + stat.stime) as f64 / ticks);
            cpu.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                None,
                cpu.metric_type(),
            )?)?;
            let rss = stat.rss.saturating_mul(procfs::page_size());
            gauge(
                &mut encoder,
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                rss as f64,
            )?;
            gauge(
                &mut encoder,
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                stat.vsize as f64,
            )?;
            gauge(
                &mut encoder,
                "process_threads",
                "Number of OS threads in the process",
                stat.num_threads as f64,
            )?;
            if let Ok(boot) = procfs::boot_time_secs() {
                gauge(
                    &mut encoder,
                    "process_start_time_seconds",
                    "Start time of the process since unix epoch in seconds",
                    boot as f64 + stat.starttime as f64 / ticks,
                )?;
            }
        }
        if let Ok(fds) = me.fd_count() {
            gauge(
                &mut encoder,
                "process_open_fds",
                "Number of open file descriptors",
                fds as f64,
            )?;
        }
        if let Ok(limits) = me.limits()
            && let procfs::process::LimitValue::Value(max) = limits.max_open_files.soft_limit
        {
            gauge(
                &mut encoder,
                "process_max_fds",
                "Maximum number of open file descriptors",
                max as f64,
            )?;
        }
        Ok(())
    }
}

/// One gauge sample under its own descriptor.
fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let g = ConstGauge::new(value);
    g.encode(encoder.encode_descriptor(name, help, None, g.metric_type())?)
}

/// The journal's size, health and failed writes, read at each scrape.
struct JournalCollector(Arc<Fleet>);

impl std::fmt::Debug for JournalCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("JournalCollector")
            .field(&self.0.journal().path())
            .finish()
    }
}

impl Collector for JournalCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let journal = self.0.journal();
        if let Ok(meta) = std::fs::metadata(journal.path()) {
            gauge(
                &mut encoder,
                "wasmprov_journal_size_bytes",
                "Size of the journal file in bytes",
                meta.len() as f64,
            )?;
        }
        gauge(
            &mut encoder,
            "wasmprov_journal_writable",
            "1 while the journal takes writes, 0 after a failed write until it takes one again",
            if self.0.healthy() { 1.0 } else { 0.0 },
        )?;
        let failures = ConstCounter::new(journal.failures());
        failures.encode(encoder.encode_descriptor(
            "wasmprov_journal_write_failures",
            "Journal writes that failed for storage reasons since the daemon started",
            None,
            failures.metric_type(),
        )?)?;
        // A journal that cannot be read says nothing about holds: no sample.
        if let Ok(doubt) = journal.doubt() {
            gauge(
                &mut encoder,
                "wasmprov_fleet_held",
                "1 while the journal holds every destructive action (rewound, repaired or foreign evidence) until an operator confirms or adopts",
                if doubt.is_some() { 1.0 } else { 0.0 },
            )?;
        }
        Ok(())
    }
}

// ---- gRPC requests -------------------------------------------------------

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StartedLabels {
    grpc_service: &'static str,
    grpc_method: &'static str,
    grpc_type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct HandledLabels {
    grpc_service: &'static str,
    grpc_method: &'static str,
    grpc_type: &'static str,
    grpc_code: &'static str,
}

/// A method the daemon serves, as its metrics name it.
#[derive(Clone, Copy, Debug)]
struct Method {
    service: &'static str,
    method: &'static str,
    kind: &'static str,
}

const UNKNOWN_METHOD: Method = Method {
    service: "unknown",
    method: "unknown",
    kind: "unknown",
};

/// The tower layer that counts every gRPC request: started, handled by
/// status code, and how long it took until its status.
#[derive(Clone, Debug)]
pub(crate) struct GrpcMetricsLayer(Arc<GrpcInner>);

#[derive(Debug)]
struct GrpcInner {
    /// `/package.Service/Method` of every method served.
    methods: std::collections::HashMap<String, Method>,
    started: Family<StartedLabels, Counter>,
    handled: Family<HandledLabels, Counter>,
    seconds: Family<StartedLabels, Histogram, fn() -> Histogram>,
}

fn grpc_histogram() -> Histogram {
    Histogram::new([
        0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
        30.0, 60.0, 300.0,
    ])
}

impl GrpcMetricsLayer {
    fn new(registry: &mut Registry) -> Self {
        let started = Family::<StartedLabels, Counter>::default();
        let handled = Family::<HandledLabels, Counter>::default();
        let seconds = Family::<StartedLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            grpc_histogram,
        );
        registry.register(
            "grpc_server_started",
            "gRPC calls started on the server",
            started.clone(),
        );
        registry.register(
            "grpc_server_handled",
            "gRPC calls completed on the server, by status code",
            handled.clone(),
        );
        registry.register(
            "grpc_server_handling_seconds",
            "Time from a gRPC call's start to its status on the server",
            seconds.clone(),
        );
        let methods = served_methods();
        for m in methods.values() {
            let _ = started.get_or_create(&m.started());
        }
        Self(Arc::new(GrpcInner {
            methods,
            started,
            handled,
            seconds,
        }))
    }
}

impl Method {
    fn started(self) -> StartedLabels {
        StartedLabels {
            grpc_service: self.service,
            grpc_method: self.method,
            grpc_type: self.kind,
        }
    }
}

/// Every method of the services the daemon serves, from their descriptor
/// sets (so the list cannot drift from the `.proto` files).
fn served_methods() -> std::collections::HashMap<String, Method> {
    use prost::Message as _;
    let mut methods = std::collections::HashMap::new();
    for set in [
        super::pb::FILE_DESCRIPTOR_SET,
        tonic_health::pb::FILE_DESCRIPTOR_SET,
        tonic_reflection::pb::v1::FILE_DESCRIPTOR_SET,
        tonic_reflection::pb::v1alpha::FILE_DESCRIPTOR_SET,
    ] {
        let Ok(set) = prost_types::FileDescriptorSet::decode(set) else {
            continue;
        };
        for file in set.file {
            let package = file.package.unwrap_or_default();
            for service in file.service {
                let service_name = format!("{package}.{}", service.name.unwrap_or_default());
                // Leaked once per daemon: a few dozen short strings, so the
                // labels stay `&'static str` and a request allocates none.
                let service_label: &'static str = Box::leak(service_name.clone().into_boxed_str());
                for m in service.method {
                    let name = m.name.unwrap_or_default();
                    let kind = match (
                        m.client_streaming.unwrap_or(false),
                        m.server_streaming.unwrap_or(false),
                    ) {
                        (false, false) => "unary",
                        (false, true) => "server_stream",
                        (true, false) => "client_stream",
                        (true, true) => "bidi_stream",
                    };
                    methods.insert(
                        format!("/{service_name}/{name}"),
                        Method {
                            service: service_label,
                            method: Box::leak(name.into_boxed_str()),
                            kind,
                        },
                    );
                }
            }
        }
    }
    methods
}

/// The name of a gRPC status code, as gRPC libraries print it.
fn code_name(code: i32) -> &'static str {
    match code {
        0 => "OK",
        1 => "Canceled",
        2 => "Unknown",
        3 => "InvalidArgument",
        4 => "DeadlineExceeded",
        5 => "NotFound",
        6 => "AlreadyExists",
        7 => "PermissionDenied",
        8 => "ResourceExhausted",
        9 => "FailedPrecondition",
        10 => "Aborted",
        11 => "OutOfRange",
        12 => "Unimplemented",
        13 => "Internal",
        14 => "Unavailable",
        15 => "DataLoss",
        16 => "Unauthenticated",
        _ => "Unknown",
    }
}

/// The status code a `grpc-status` header or trailer carries.
fn status_of(headers: &http::HeaderMap) -> Option<&'static str> {
    let value = headers.get("grpc-status")?.to_str().ok()?;
    Some(code_name(value.trim().parse().unwrap_or(2)))
}

impl<S> tower_layer::Layer<S> for GrpcMetricsLayer {
    type Service = GrpcMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcMetrics {
            inner,
            metrics: self.0.clone(),
        }
    }
}

/// [`GrpcMetricsLayer`] around a service.
#[derive(Clone, Debug)]
pub(crate) struct GrpcMetrics<S> {
    inner: S,
    metrics: Arc<GrpcInner>,
}

/// One call being counted: records its status once, when it is known.
#[derive(Debug)]
struct Call {
    metrics: Arc<GrpcInner>,
    method: Method,
    started: Instant,
    done: bool,
}

impl Call {
    fn finish(&mut self, code: &'static str) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let labels = self.method.started();
        self.metrics
            .seconds
            .get_or_create(&labels)
            .observe(self.started.elapsed().as_secs_f64());
        self.metrics
            .handled
            .get_or_create(&HandledLabels {
                grpc_service: labels.grpc_service,
                grpc_method: labels.grpc_method,
                grpc_type: labels.grpc_type,
                grpc_code: code,
            })
            .inc();
    }
}

impl Drop for Call {
    fn drop(&mut self) {
        // The response (or its body) went away before a status: the client
        // left, or the connection broke.
        self.finish("Canceled");
    }
}

impl<S, ReqBody, ResBody> tower_service::Service<http::Request<ReqBody>> for GrpcMetrics<S>
where
    S: tower_service::Service<http::Request<ReqBody>, Response = http::Response<ResBody>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<CountedBody<ResBody>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<ReqBody>) -> Self::Future {
        let method = self
            .metrics
            .methods
            .get(req.uri().path())
            .copied()
            .unwrap_or(UNKNOWN_METHOD);
        self.metrics.started.get_or_create(&method.started()).inc();
        let mut call = Call {
            metrics: self.metrics.clone(),
            method,
            started: Instant::now(),
            done: false,
        };
        let future = self.inner.call(req);
        Box::pin(async move {
            match future.await {
                Ok(response) => {
                    // A trailers-only answer (every error, and the token
                    // check's) carries its status in the headers.
                    if let Some(code) = status_of(response.headers()) {
                        call.finish(code);
                    }
                    Ok(response.map(|body| CountedBody { body, call }))
                }
                Err(e) => {
                    call.finish("Unknown");
                    Err(e)
                }
            }
        })
    }
}

pin_project_lite::pin_project! {
    /// A response body that records its call's status from the trailers.
    pub(crate) struct CountedBody<B> {
        #[pin]
        body: B,
        call: Call,
    }
}

impl<B: http_body::Body> http_body::Body for CountedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        let polled = this.body.poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(code) = frame.trailers_ref().and_then(status_of) {
                    this.call.finish(code);
                }
            }
            Poll::Ready(Some(Err(_))) => this.call.finish("Unknown"),
            // The body ended without trailers after headers without a
            // status: not a gRPC answer.
            Poll::Ready(None) => this.call.finish("Unknown"),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_headers_pick_the_format() {
        use Format::{Classic, OpenMetrics};
        for (accept, want) in [
            (None, OpenMetrics),
            (Some("*/*"), OpenMetrics),
            (Some("text/plain;version=0.0.4"), Classic),
            (Some("text/plain; version=0.0.4; charset=utf-8"), Classic),
            (
                Some("application/openmetrics-text; version=1.0.0"),
                OpenMetrics,
            ),
            // What Prometheus 2.x sends by default.
            (
                Some(
                    "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
                ),
                OpenMetrics,
            ),
            // Prometheus with scrape_protocols: [PrometheusText0.0.4, …].
            (
                Some(
                    "text/plain;version=0.0.4;q=0.5,application/openmetrics-text;version=1.0.0;q=0.4,*/*;q=0.1",
                ),
                Classic,
            ),
            (Some("text/plain;q=0, */*"), OpenMetrics),
            (Some("application/openmetrics-text;q=0"), Classic),
            (
                Some("application/openmetrics-text;q=0, text/plain;q=0"),
                OpenMetrics,
            ),
            (Some("TEXT/PLAIN"), Classic),
            (Some("application/json"), OpenMetrics),
        ] {
            assert_eq!(negotiate(accept), want, "{accept:?}");
        }
    }

    #[test]
    fn classic_text_names_counters_with_total_and_drops_openmetrics_only_lines() {
        let om = "# HELP wasmprov_calls Contract calls by \\\"plugin\\\".\n\
# TYPE wasmprov_calls counter\n\
wasmprov_calls_total{plugin=\"a # b\",op=\"get\"} 3\n\
wasmprov_calls_created{plugin=\"a\"} 1700000000.5\n\
# HELP wasmprov_call_duration_seconds Time.\n\
# TYPE wasmprov_call_duration_seconds histogram\n\
# UNIT wasmprov_call_duration_seconds seconds\n\
wasmprov_call_duration_seconds_bucket{le=\"+Inf\"} 1 # {trace_id=\"x\"} 0.5\n\
# HELP wasmprov_build The build.\n\
# TYPE wasmprov_build info\n\
wasmprov_build_info{version=\"1\"} 1\n\
# HELP odd Something.\n\
# TYPE odd unknown\n\
odd 2 1700000000.25\n\
# HELP plain A gauge without labels.\n\
# TYPE plain gauge\n\
plain 7.0\n\
stamped{a=\"1\"} 3.5 1700000000\n\
# EOF\n";
        let classic = to_classic(om);
        assert_eq!(
            classic,
            "# HELP wasmprov_calls_total Contract calls by \"plugin\".\n\
# TYPE wasmprov_calls_total counter\n\
wasmprov_calls_total{plugin=\"a # b\",op=\"get\"} 3\n\
# HELP wasmprov_call_duration_seconds Time.\n\
# TYPE wasmprov_call_duration_seconds histogram\n\
wasmprov_call_duration_seconds_bucket{le=\"+Inf\"} 1\n\
# HELP wasmprov_build_info The build.\n\
# TYPE wasmprov_build_info gauge\n\
wasmprov_build_info{version=\"1\"} 1\n\
# HELP odd Something.\n\
# TYPE odd untyped\n\
odd 2 1700000000250\n\
# HELP plain A gauge without labels.\n\
# TYPE plain gauge\n\
plain 7.0\n\
stamped{a=\"1\"} 3.5 1700000000000\n"
        );
    }

    #[test]
    fn every_status_code_has_its_name() {
        assert_eq!(code_name(0), "OK");
        assert_eq!(code_name(16), "Unauthenticated");
        assert_eq!(code_name(99), "Unknown");
        let mut h = http::HeaderMap::new();
        h.insert("grpc-status", http::HeaderValue::from_static("5"));
        assert_eq!(status_of(&h), Some("NotFound"));
    }

    #[test]
    fn the_served_methods_come_from_the_descriptors() {
        let m = served_methods();
        let provision = m
            .get("/wasmprov.v1.Provisioner/Provision")
            .expect("Provision");
        assert_eq!(
            (provision.service, provision.kind),
            ("wasmprov.v1.Provisioner", "unary")
        );
        let watch = m.get("/grpc.health.v1.Health/Watch").expect("Watch");
        assert_eq!(watch.kind, "server_stream");
        assert!(m.contains_key("/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"));
        assert!(m.contains_key("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"));
    }
}
