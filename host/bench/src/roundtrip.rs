//! Section 2: provision round trips over HTTP to a loopback fake cloud,
//! native client against the wasm plugin.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use wasmprov_api::ProvisionRequest;

use crate::common::{OWNER, build_host, one_plugin_dir, shape, start_fake, warm_cache_dir};
use crate::config::Config;
use crate::driver::{Bounds, RunResult, drive};
use crate::native::NativeHetzner;
use crate::report::{Section, Table};
use crate::stats::{dur, rate, ratio};

/// Who does the round trips.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// hyper-util client with its keep-alive pool (the baseline).
    NativePooled,
    /// hyper-util client with no idle connections kept: a new connection per request.
    NativeNewConnection,
    /// The Hetzner plugin through the host.
    Wasm,
}

impl Mode {
    pub fn label(self) -> &'static str {
        match self {
            Self::NativePooled => "native, keep-alive pool (baseline)",
            Self::NativeNewConnection => "native, new connection per request",
            Self::Wasm => "wasm plugin through the host",
        }
    }
}

/// HTTP requests one plugin may have in flight in these runs (the policy
/// default is 16; the benchmark raises it so that the limit is not what is
/// measured).
pub const MAX_IN_FLIGHT: usize = 4096;

static RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn request(run: u64, i: u64) -> ProvisionRequest {
    ProvisionRequest {
        request_id: format!("r{run}n{i}"),
        shape: shape(),
        boot: Default::default(),
        subnet: None,
    }
}

/// One closed-loop run of provisions against a fresh fake (so every run
/// starts from an empty cloud and both sides see the same server counts).
pub async fn provision_run(mode: Mode, bounds: Bounds) -> Result<RunResult> {
    let run = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let fake = start_fake(usize::MAX).await?;
    let url = fake.url();
    let token = fake.token().to_string();
    let (cpu0, server0) = (
        crate::common::cpu_time(),
        crate::common::threads_cpu("bench-fake"),
    );
    let mut result = match mode {
        Mode::NativePooled | Mode::NativeNewConnection => {
            let client = NativeHetzner::new(&url, &token, OWNER, mode == Mode::NativePooled);
            drive(bounds, move |i| {
                let client = client.clone();
                async move { client.provision(&request(run, i)).await.map(|_| ()) }
            })
            .await
        }
        Mode::Wasm => {
            let dir = one_plugin_dir(Some(&url), MAX_IN_FLIGHT)?;
            let host = build_host(dir.path(), Some(&warm_cache_dir()), Some(&token)).await?;
            let plugin = host.plugin("hetzner").context("plugin not loaded")?;
            let plugin = Arc::new(plugin);
            let (c0, s0) = (
                crate::common::cpu_time(),
                crate::common::threads_cpu("bench-fake"),
            );
            let mut r = drive(bounds, move |i| {
                let plugin = plugin.clone();
                async move { plugin.provision_request(&request(run, i)).await.map(|_| ()) }
            })
            .await;
            // Without the host build.
            let ops = (r.ok + r.errors + r.concurrency as u64).max(1) as u32;
            let server = crate::common::threads_cpu("bench-fake").saturating_sub(s0);
            let all = crate::common::cpu_time().saturating_sub(c0);
            r.server_cpu_per_op = Some(server / ops);
            r.client_cpu_per_op = Some(all.saturating_sub(server) / ops);
            drop(host);
            r
        }
    };
    if result.server_cpu_per_op.is_none() {
        let ops = (result.ok + result.errors + result.concurrency as u64).max(1) as u32;
        let server = crate::common::threads_cpu("bench-fake").saturating_sub(server0);
        let all = crate::common::cpu_time().saturating_sub(cpu0);
        result.server_cpu_per_op = Some(server / ops);
        result.client_cpu_per_op = Some(all.saturating_sub(server) / ops);
    }
    // Dropping the fake stops it at once (a graceful shutdown would wait for
    // idle keep-alive connections).
    drop(fake);
    if let Some(e) = &result.first_error {
        eprintln!(
            "  {} at concurrency {}: {} errors, first: {e}",
            mode.label(),
            bounds.concurrency,
            result.errors
        );
    }
    Ok(result)
}

/// Bounds of a run at concurrency `c`.
pub fn bounds(cfg: &Config, c: usize) -> Bounds {
    let total = if cfg.quick {
        (c as u64 * 2).max(300)
    } else {
        (c as u64 * 6).max(if c == 1 { 1000 } else { 2000 })
    };
    Bounds {
        concurrency: c,
        total,
        max_time: Duration::from_secs(if cfg.quick { 3 } else { 10 }),
    }
}

/// Results at one concurrency.
#[derive(Clone, Debug)]
pub struct Pair {
    pub concurrency: usize,
    pub native: RunResult,
    pub wasm: RunResult,
    pub new_connection: Option<RunResult>,
}

/// Several runs of one client as one: percentiles, throughput and CPU per
/// round trip are the medians over the runs.
fn combine(runs: &[RunResult]) -> RunResult {
    let med =
        |f: fn(&RunResult) -> f64| crate::stats::median(&runs.iter().map(f).collect::<Vec<_>>());
    let med_d = |f: fn(&RunResult) -> Option<Duration>| {
        let v: Vec<f64> = runs
            .iter()
            .filter_map(f)
            .map(|d| d.as_nanos() as f64)
            .collect();
        (!v.is_empty()).then(|| Duration::from_nanos(crate::stats::median(&v) as u64))
    };
    let mut out = runs[0].clone();
    out.latency.p50 = med(|r| r.latency.p50);
    out.latency.p90 = med(|r| r.latency.p90);
    out.latency.p99 = med(|r| r.latency.p99);
    out.latency.n = runs.iter().map(|r| r.latency.n).sum();
    out.ok = runs.iter().map(|r| r.ok).sum();
    out.errors = runs.iter().map(|r| r.errors).sum();
    out.first_error = runs.iter().find_map(|r| r.first_error.clone());
    // Throughput: the median over the runs (robust to one disturbed run).
    let thr = med(|r| r.throughput());
    out.wall = Duration::from_secs_f64(out.ok as f64 / thr.max(1e-9));
    out.client_cpu_per_op = med_d(|r| r.client_cpu_per_op);
    out.server_cpu_per_op = med_d(|r| r.server_cpu_per_op);
    out
}

/// Measures native (pooled) and wasm at concurrency `c`, alternating, in
/// `rounds` rounds; at `c == 1` the native client without a pool too.
pub async fn pair(cfg: &Config, c: usize, rounds: usize) -> Result<Pair> {
    let b = bounds(cfg, c);
    let rounds = if cfg.quick { 1 } else { rounds };
    let (mut native, mut wasm, mut fresh) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rounds {
        native.push(provision_run(Mode::NativePooled, b).await?);
        wasm.push(provision_run(Mode::Wasm, b).await?);
        if c == 1 {
            fresh.push(provision_run(Mode::NativeNewConnection, b).await?);
        }
    }
    Ok(Pair {
        concurrency: c,
        native: combine(&native),
        wasm: combine(&wasm),
        new_connection: (!fresh.is_empty()).then(|| combine(&fresh)),
    })
}

pub fn table(pairs: &[Pair]) -> Table {
    let mut t = Table::new(&[
        "concurrency",
        "client",
        "round trips",
        "errors",
        "p50",
        "p90",
        "p99",
        "throughput",
        "p50 vs baseline",
        "throughput vs baseline",
        "client CPU/op",
        "fake CPU/op",
    ]);
    for p in pairs {
        let base = &p.native;
        let mut runs = vec![(Mode::NativePooled, &p.native), (Mode::Wasm, &p.wasm)];
        if let Some(n) = &p.new_connection {
            runs.push((Mode::NativeNewConnection, n));
        }
        for (mode, r) in runs {
            t.row(vec![
                p.concurrency.to_string(),
                mode.label().into(),
                r.ok.to_string(),
                r.errors.to_string(),
                dur(r.latency.p50),
                dur(r.latency.p90),
                dur(r.latency.p99),
                rate(r.throughput()),
                ratio(r.latency.p50, base.latency.p50),
                ratio(r.throughput(), base.throughput()),
                r.client_cpu_per_op
                    .map_or("–".into(), |d| dur(d.as_nanos() as f64)),
                r.server_cpu_per_op
                    .map_or("–".into(), |d| dur(d.as_nanos() as f64)),
            ]);
        }
    }
    t
}

/// Connections each client opens for `n` provisions at concurrency `c`,
/// counted by a TCP proxy in front of the fake (not a timed run).
async fn connections(mode: Mode, c: usize, n: u64) -> Result<(usize, u64)> {
    let run = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let fake = start_fake(usize::MAX).await?;
    let proxy = crate::gate::CountingProxy::start(fake.addr()).await?;
    let url = format!("{}/v1", proxy.url());
    let token = fake.token().to_string();
    let bounds = Bounds {
        concurrency: c,
        total: n,
        max_time: Duration::from_secs(10),
    };
    let r = match mode {
        Mode::NativePooled | Mode::NativeNewConnection => {
            let client = NativeHetzner::new(&url, &token, OWNER, mode == Mode::NativePooled);
            drive(bounds, move |i| {
                let client = client.clone();
                async move { client.provision(&request(run, i)).await.map(|_| ()) }
            })
            .await
        }
        Mode::Wasm => {
            let dir = one_plugin_dir(Some(&url), MAX_IN_FLIGHT)?;
            let host = build_host(dir.path(), Some(&warm_cache_dir()), Some(&token)).await?;
            let plugin = host.plugin("hetzner").context("plugin not loaded")?;
            drive(bounds, move |i| {
                let plugin = plugin.clone();
                async move { plugin.provision_request(&request(run, i)).await.map(|_| ()) }
            })
            .await
        }
    };
    Ok((proxy.accepted(), (r.ok + r.concurrency as u64) * 2))
}

/// Connections opened: (concurrency, wasm?, connections, requests).
pub type Conns = Vec<(usize, bool, usize, u64)>;

pub async fn run(cfg: &Config) -> Result<(Section, Vec<Pair>, Conns)> {
    let mut sec = Section::new(
        "2. Provision round trip over HTTP (loopback fake cloud)",
        "One provision = what the Hetzner plugin does for a new request id: `GET /servers?label_selector=…` \
         (finds nothing), then `POST /servers`, against `wasmprov-fake`'s Hetzner API on 127.0.0.1. \
         The baseline is a native hyper-util `Client` with its keep-alive pool doing the same two requests \
         with the plugin crate's own label, catalogue and JSON code. N tasks on the tokio multi-thread runtime \
         each do provisions back to back (one unmeasured warm-up each, then until the round-trip budget or the \
         time limit is used up). Every run gets a fresh fake (an empty cloud) and a fresh client or host, so both \
         sides meet the same server counts; the fake runs on its own 2-thread runtime in the same process. \
         The clients take turns, five runs each (one with `--quick`); percentiles, throughput and CPU per round \
         trip are the medians over the runs (\"round trips\" counts all of them). CPU per round trip is split by \
         thread: the fake's threads, and everything else (the client side).",
    );
    let mut pairs = Vec::new();
    for c in [1usize, 64, 512] {
        println!("  provision round trips at concurrency {c} …");
        pairs.push(pair(cfg, c, 5).await?);
    }
    sec.table("", table(&pairs));
    let mut t = Table::new(&[
        "concurrency",
        "client",
        "HTTP requests",
        "TCP connections opened",
        "requests per connection",
    ]);
    let n = if cfg.quick { 200 } else { 1000 };
    let mut counted = Vec::new();
    for c in [1usize, 64, 512] {
        for mode in [Mode::NativePooled, Mode::Wasm] {
            let (conns, reqs) = connections(mode, c, n.max(c as u64 * 2)).await?;
            counted.push((c, mode == Mode::Wasm, conns, reqs));
            t.row(vec![
                c.to_string(),
                mode.label().into(),
                reqs.to_string(),
                conns.to_string(),
                format!("{:.1}", reqs as f64 / conns.max(1) as f64),
            ]);
        }
    }
    sec.table(
        "Connection reuse, counted by a TCP proxy in front of the fake (separate, untimed runs).",
        t,
    );
    sec.note(format!(
        "The benchmark's manifest raises `limits.http_max_in_flight` (default 16) and `limits.max_calls_in_flight` (default 64) \
         to {MAX_IN_FLIGHT}: with the defaults, calls beyond them at once wait their turn or are refused as `rate_limited`, \
         which is the policy working, not a cost."
    ));
    Ok((sec, pairs, counted))
}
