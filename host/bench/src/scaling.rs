//! Section 5: how the costs grow with the nodes `describe` returns
//! (pagination included) and with the calls in flight.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::common::{OWNER, build_host, one_plugin_dir, start_fake, warm_cache_dir};
use crate::config::Config;
use crate::memory::{InFlight, inflight};
use crate::native::NativeHetzner;
use crate::report::{Section, Table};
use crate::roundtrip::{MAX_IN_FLIGHT, Pair, pair};
use crate::stats::{bytes, dur, median, rate, ratio};

/// One `describe` size.
#[derive(Clone, Copy, Debug)]
pub struct DescribePoint {
    pub nodes: usize,
    pub native: f64,
    pub wasm: f64,
    pub runs: usize,
}

/// Seeds the fake up to `n` servers of the benchmark owner, 16 creates at a time.
async fn seed(client: &NativeHetzner, from: usize, to: usize) -> Result<()> {
    let next = Arc::new(AtomicU64::new(from as u64));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let client = client.clone();
        let next = next.clone();
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= to as u64 {
                    return Ok::<(), anyhow::Error>(());
                }
                client.create(&format!("seed{i}")).await?;
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}

async fn describe_points(cfg: &Config, sec: &mut Section) -> Result<Vec<DescribePoint>> {
    let sizes: &[usize] = if cfg.quick {
        &[1, 100, 1000]
    } else {
        &[1, 100, 1000, 10_000]
    };
    let fake = start_fake(usize::MAX).await?;
    let url = fake.url();
    let token = fake.token().to_string();
    let client = NativeHetzner::new(&url, &token, OWNER, true);
    let dir = one_plugin_dir(Some(&url), MAX_IN_FLIGHT)?;
    let host = build_host(dir.path(), Some(&warm_cache_dir()), Some(&token)).await?;
    let plugin = host.plugin("hetzner").context("not loaded")?;
    let mut points = Vec::new();
    let mut have = 0;
    for &n in sizes {
        let t0 = Instant::now();
        seed(&client, have, n).await?;
        have = n;
        let seeded = t0.elapsed();
        let runs = match n {
            0..=100 => 30,
            101..=1000 => 10,
            _ => 5,
        };
        let runs = if cfg.quick { runs.min(5) } else { runs };
        let budget = Duration::from_secs(if cfg.quick { 4 } else { 20 });
        let mut nat = Vec::new();
        let mut was = Vec::new();
        let end = Instant::now() + budget;
        // Alternate, so that drift (the fake's poll counters, the allocator)
        // hits both sides alike.
        for i in 0..runs {
            if i > 0 && Instant::now() > end {
                break;
            }
            let t = Instant::now();
            let a = client.describe().await?;
            nat.push(t.elapsed().as_nanos() as f64);
            let t = Instant::now();
            let b = plugin.describe().await?;
            was.push(t.elapsed().as_nanos() as f64);
            if a.len() != n || b.len() != n {
                bail!(
                    "describe returned {} (native) and {} (wasm) nodes, seeded {n}",
                    a.len(),
                    b.len()
                );
            }
        }
        println!(
            "  describe {n} nodes (seeded in {}): native {}, wasm {}",
            dur(seeded.as_nanos() as f64),
            dur(median(&nat)),
            dur(median(&was))
        );
        points.push(DescribePoint {
            nodes: n,
            native: median(&nat),
            wasm: median(&was),
            runs: nat.len(),
        });
    }
    drop(host);
    let mut t = Table::new(&[
        "nodes",
        "pages",
        "runs",
        "native p50",
        "wasm p50",
        "wasm vs native",
        "native per node",
        "wasm per node",
        "wasm − native per page",
    ]);
    for p in &points {
        let pages = p.nodes.div_ceil(50).max(1);
        t.row(vec![
            p.nodes.to_string(),
            pages.to_string(),
            p.runs.to_string(),
            dur(p.native),
            dur(p.wasm),
            ratio(p.wasm, p.native),
            dur(p.native / p.nodes as f64),
            dur(p.wasm / p.nodes as f64),
            dur((p.wasm - p.native) / pages as f64),
        ]);
    }
    sec.table(
        "`describe` against a fake seeded (through its API) with N servers of this owner; page size 50.",
        t,
    );
    if !cfg.quick {
        sec.note("N = 10 000 was seeded in full (10 000 creates through the fake's API).");
    }
    Ok(points)
}

pub async fn run(
    cfg: &Config,
    earlier: &[Pair],
) -> Result<(
    Section,
    Vec<DescribePoint>,
    Vec<Pair>,
    Vec<(InFlight, InFlight)>,
)> {
    let mut sec = Section::new(
        "5. Scaling",
        "How the costs of sections 2–4 grow: with the nodes `describe` returns (pagination included) and with \
         the calls in flight (provision round trips as in section 2; memory per call in flight as in section 4).",
    );
    println!("  describe scaling …");
    let points = describe_points(cfg, &mut sec).await?;

    let levels: &[usize] = if cfg.quick {
        &[1, 16, 64, 256]
    } else {
        &[1, 16, 64, 256, 512, 1000]
    };
    let mut pairs: Vec<Pair> = Vec::new();
    for &c in levels {
        if let Some(p) = earlier.iter().find(|p| p.concurrency == c) {
            pairs.push(p.clone());
            continue;
        }
        println!("  provision round trips at concurrency {c} …");
        pairs.push(pair(cfg, c, 3).await?);
    }
    let mut t = Table::new(&[
        "concurrency",
        "native p50",
        "wasm p50",
        "p50 wasm vs native",
        "wasm p99",
        "native throughput",
        "wasm throughput",
        "throughput wasm vs native",
        "errors (native/wasm)",
    ]);
    for p in &pairs {
        t.row(vec![
            p.concurrency.to_string(),
            dur(p.native.latency.p50),
            dur(p.wasm.latency.p50),
            ratio(p.wasm.latency.p50, p.native.latency.p50),
            dur(p.wasm.latency.p99),
            rate(p.native.throughput()),
            rate(p.wasm.throughput()),
            ratio(p.wasm.throughput(), p.native.throughput()),
            format!("{}/{}", p.native.errors, p.wasm.errors),
        ]);
    }
    sec.table(
        "Provision round trips, 1 to 1 000 at once (rows at 1, 64 and 512 are section 2's runs).",
        t,
    );

    let mem_levels: &[usize] = if cfg.quick { &[64] } else { &[64, 1000] };
    let cache = warm_cache_dir();
    let mut mem = Vec::new();
    for &c in mem_levels {
        println!("  memory with {c} calls in flight …");
        let n = inflight("native", c, &cache).await?;
        let w = inflight("wasm", c, &cache).await?;
        mem.push((n, w));
    }
    let mut t = Table::new(&[
        "in flight",
        "native RSS per call",
        "wasm RSS per call",
        "wasm vs native",
        "wasm private per call",
        "wasm retained after the burst",
    ]);
    for (n, w) in &mem {
        t.row(vec![
            n.concurrency.to_string(),
            bytes(n.per_call()),
            bytes(w.per_call()),
            ratio(w.per_call(), n.per_call()),
            bytes(w.private / w.concurrency as f64),
            bytes(w.retained()),
        ]);
    }
    sec.table("Memory per provision in flight (512 is in section 4).", t);
    Ok((sec, points, pairs, mem))
}
