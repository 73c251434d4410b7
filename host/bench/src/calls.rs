//! Section 1: call overhead of `price_hint` for one shape.

use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use wasmprov_api::{NodeShape, PriceHint};
use wasmprov_host::Host;
use wasmprov_plugin_hetzner::Hetzner;
use wasmprov_plugin_hetzner::settings::Settings;

use crate::common::shape;
use crate::config::Config;
use crate::extism::{self, ExtismResults, Peer};
use crate::report::{Section, Table};
use crate::stats::{Summary, dur, ratio, summarize};

/// Medians of the call-overhead section.
#[derive(Clone, Debug)]
pub struct CallResults {
    pub native: Summary,
    pub fresh: Summary,
    pub reused: Summary,
    pub subprocess: Summary,
    /// The Extism peer, or why it was not measured.
    pub extism: Result<ExtismResults, String>,
}

/// Price hints one instance may answer in the reused-instance runs
/// (`HostBuilder::price_hint_reuse`).
pub const REUSE: u32 = 10_000;

/// Native in-process: the plugin crate's pricing code called directly. Timed
/// in batches (one call is shorter than the clock's resolution); each
/// sample is the mean of one batch.
fn native(batches: usize) -> (Summary, PriceHint) {
    let plugin = Hetzner::with_settings(Settings::default());
    let s = shape();
    let expect = plugin.estimate(&s).expect("the shape has a price");
    const BATCH: usize = 1000;
    for _ in 0..BATCH * 10 {
        black_box(plugin.estimate(black_box(&s)).ok());
    }
    let mut samples = Vec::with_capacity(batches);
    for _ in 0..batches {
        let t0 = Instant::now();
        for _ in 0..BATCH {
            black_box(plugin.estimate(black_box(&s)).ok());
        }
        samples.push(t0.elapsed().as_nanos() as f64 / BATCH as f64);
    }
    (summarize(&mut samples), expect)
}

/// Through the host: a fresh store and instance per call, or (with a host
/// built with `price_hint_reuse`) a warm instance answering many.
pub fn through_host(host: &Host, n: usize, max: Duration) -> Result<(Summary, PriceHint)> {
    let plugin = host.wasm_plugin("hetzner").context("plugin not loaded")?;
    let s = shape();
    let first = plugin
        .try_price_hint(&s)?
        .context("the plugin gave no price")?;
    for _ in 0..n.min(500) {
        black_box(plugin.try_price_hint(black_box(&s))?);
    }
    let mut samples = Vec::with_capacity(n);
    let end = Instant::now() + max;
    while samples.len() < n && Instant::now() < end {
        let t0 = Instant::now();
        let r = plugin.try_price_hint(black_box(&s));
        samples.push(t0.elapsed().as_nanos() as f64);
        black_box(r?);
    }
    Ok((summarize(&mut samples), first))
}

/// The subprocess plugin: `price-server` next to this binary (built here
/// when `cargo run` built only this binary), or else this binary in its
/// price-server mode (the same code).
fn price_server_command() -> (Command, String) {
    let me = std::env::current_exe().unwrap_or_else(|_| "wasmprov-bench".into());
    let sibling = me.with_file_name("price-server");
    if !sibling.exists()
        && let Some(cargo) = std::env::var_os("CARGO")
    {
        let release = me
            .parent()
            .and_then(|d| d.file_name())
            .is_some_and(|n| n == "release");
        let mut build = Command::new(cargo);
        build
            .args([
                "build",
                "-q",
                "-p",
                "wasmprov-bench",
                "--bin",
                "price-server",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"));
        if release {
            build.arg("--release");
        }
        println!("  building price-server …");
        let _ = build.status();
    }
    // Shown by file name: where the build put it is this machine's business.
    let name = |p: &std::path::Path| {
        p.file_name().map_or_else(
            || p.display().to_string(),
            |f| f.to_string_lossy().into_owned(),
        )
    };
    if sibling.exists() {
        let shown = name(&sibling);
        (Command::new(sibling), shown)
    } else {
        let mut c = Command::new(&me);
        c.args(["--child", "price-server"]);
        (c, format!("{} --child price-server", name(&me)))
    }
}

fn subprocess(n: usize, max: Duration) -> Result<(Summary, PriceHint, String)> {
    let (mut cmd, shown) = price_server_command();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {shown}"))?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let mut stdout = BufReader::new(child.stdout.take().context("stdout")?);
    let s = shape();
    let mut line = String::new();
    let mut ask = |shape: &NodeShape| -> Result<Option<PriceHint>> {
        let mut req = serde_json::to_vec(shape)?;
        req.push(b'\n');
        stdin.write_all(&req)?;
        stdin.flush()?;
        line.clear();
        if stdout.read_line(&mut line)? == 0 {
            bail!("price-server closed its output");
        }
        Ok(serde_json::from_str(&line)?)
    };
    let first = ask(&s)?.context("price-server gave no price")?;
    for _ in 0..n.min(500) {
        black_box(ask(&s)?);
    }
    let mut samples = Vec::with_capacity(n);
    let end = Instant::now() + max;
    while samples.len() < n && Instant::now() < end {
        let t0 = Instant::now();
        let r = ask(black_box(&s))?;
        samples.push(t0.elapsed().as_nanos() as f64);
        black_box(r);
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok((summarize(&mut samples), first, shown))
}

/// `peer` is the Extism peer as built before the section (or why not).
pub fn run(
    cfg: &Config,
    host: &Host,
    reusing: &Host,
    peer: &Result<Peer, String>,
) -> Result<(Section, CallResults)> {
    let mut sec = Section::new(
        "1. Call overhead: `price_hint` for one shape",
        "`price_hint` of the Hetzner plugin for 2 vCPU / 4 GiB (answer: `cax11`), called from one thread. \
         Native: the plugin crate's pricing code called in-process (timed in batches of 1000, each sample the batch mean). \
         Fresh instance: `WasmPlugin::try_price_hint`, which makes a new store and instance from the `InstancePre` for every call. \
         Reused instance: the same call on a host built with `HostBuilder::price_hint_reuse(10000)`, where one instance answers up to 10 000 price hints (the host's opt-in path for calls that can do no I/O). \
         Subprocess: the same native code in the `price-server` binary, one JSON line in, one out, over pipes.\n\n\
         Extism 1.30: a peer from another plugin system, measured in the same run by its own binary (`host/bench/extism-peer`, \
         its own workspace since Extism 1.30 pins wasmtime 43): an extism-pdk plugin built for wasm32-unknown-unknown in release, \
         whose `price_hint` takes the shape as JSON and answers the price hint as JSON, computed by the Hetzner plugin's own \
         catalogue and settings modules (compiled in from `plugins/hetzner/src`). The module is compiled once (`CompiledPlugin`); \
         new plugin per call: `Plugin::new_from_compiled`, the call and the plugin's drop, Extism's cheapest fresh path; \
         reused plugin: one plugin answering every call. Same sample counts and percentiles as the rows above; \
         both answers must equal the native one.",
    );
    let (n, batches, max) = if cfg.quick {
        (3_000, 100, Duration::from_secs(3))
    } else {
        (20_000, 400, Duration::from_secs(8))
    };
    let (nat, expect) = native(batches);
    let (fr, got) = through_host(host, n, max)?;
    let (re, got_reused) = through_host(reusing, n, max)?;
    let (sub, from_sub, shown) = subprocess(n, max)?;
    let ext = match peer {
        Ok(peer) => extism::measure(peer, n, max),
        Err(why) => Err(why.clone()),
    };
    let ext = match ext {
        Ok((_, answer))
            if answer.instance_type != expect.instance_type
                || (answer.hourly_usd - expect.hourly_usd).abs() > 1e-12 =>
        {
            Err(format!(
                "its price hint {answer:?} differs from the native one {expect:?}"
            ))
        }
        Ok((r, _)) => Ok(r),
        Err(why) => Err(why),
    };
    for (what, h) in [
        ("wasm", &got),
        ("reused wasm", &got_reused),
        ("subprocess", &from_sub),
    ] {
        if h.instance_type != expect.instance_type
            || (h.hourly_usd - expect.hourly_usd).abs() > 1e-12
        {
            bail!("the {what} price hint {h:?} differs from the native one {expect:?}");
        }
    }
    let mut t = Table::new(&[
        "path",
        "samples",
        "p50",
        "p90",
        "p99",
        "p50 vs native",
        "p50 vs subprocess",
    ]);
    t.row(vec![
        "native in-process (baseline)".into(),
        format!("{}×1000", nat.n),
        dur(nat.p50),
        dur(nat.p90),
        dur(nat.p99),
        "×1".into(),
        ratio(nat.p50, sub.p50),
    ]);
    // A row measured against both baselines.
    let against_both = |t: &mut Table, path: String, r: &Summary| {
        t.row(vec![
            path,
            r.n.to_string(),
            dur(r.p50),
            dur(r.p90),
            dur(r.p99),
            ratio(r.p50, nat.p50),
            ratio(r.p50, sub.p50),
        ]);
    };
    against_both(&mut t, "wasm, fresh instance per call".into(), &fr);
    against_both(&mut t, "wasm, reused instance".into(), &re);
    t.row(vec![
        "subprocess, JSON lines (baseline)".into(),
        sub.n.to_string(),
        dur(sub.p50),
        dur(sub.p90),
        dur(sub.p99),
        ratio(sub.p50, nat.p50),
        "×1".into(),
    ]);
    if let Ok(e) = &ext {
        let fresh = format!("Extism {}, new plugin per call", extism::VERSION);
        against_both(&mut t, fresh, &e.fresh);
        let reused = format!("Extism {}, reused plugin", extism::VERSION);
        against_both(&mut t, reused, &e.reused);
    }
    sec.table("", t);
    match &ext {
        Ok(e) => {
            sec.note(format!(
                "Fresh instance vs Extism: {} of Extism's reused plugin, {} of its new plugin per call (p50). \
                 The Extism peer's host-side work natively (shape to JSON, the pricing code, answer to JSON and back): {} (p50 of {}×1000).",
                ratio(fr.p50, e.reused.p50),
                ratio(fr.p50, e.fresh.p50),
                dur(e.native_json.p50),
                e.native_json.n
            ));
        }
        Err(why) => {
            sec.note(format!("Extism peer not measured: {why}."));
        }
    }
    sec.note(
        "Reuse is off by default: every call gets a fresh store and instance unless the embedder sets `price_hint_reuse`; calls that can do I/O always do.",
    );
    sec.note(format!("Subprocess: `{shown}`."));
    Ok((
        sec,
        CallResults {
            native: nat,
            fresh: fr,
            reused: re,
            subprocess: sub,
            extism: ext,
        },
    ))
}
