//! `extism-peer`: the Extism peer of wasmprov-bench's call-overhead section.
//!
//! ```text
//! extism-peer GUEST.wasm [--samples N] [--max-secs S]
//! ```
//!
//! Compiles the peer plugin (`extism-peer-guest`) once, then measures its
//! `price_hint` for 2 vCPU / 4 GiB the way section 1 measures the wasmprov
//! host: N timed calls (at most S seconds) after min(N, 500) warm-up calls,
//! nearest-rank percentiles (the bench's own `stats.rs`):
//!
//! - a new plugin per call: `Plugin::new_from_compiled` from one
//!   `CompiledPlugin` (the module compiled once; each plugin gets its own
//!   store, linker and instances), the call, and the plugin's drop;
//! - one reused plugin answering every call.
//!
//! Also times the same work natively (JSON in, the pricing code, JSON out;
//! in batches of 1000), checks both answers equal the Hetzner plugin
//! crate's native `estimate`, and prints one JSON object on stdout.

use std::hint::black_box;
use std::time::{Duration, Instant};

use extism::convert::Json;
use extism::{CompiledPlugin, Plugin, PluginBuilder};
use wasmprov_guest::{NodeShape, PriceHint};
use wasmprov_plugin_hetzner::Hetzner;
use wasmprov_plugin_hetzner::settings::Settings;

#[allow(
    dead_code,
    reason = "the bench's module; the peer uses its percentiles only"
)]
#[path = "../../../src/stats.rs"]
mod stats;

use stats::{Summary, summarize};

type Error = Box<dyn std::error::Error>;

/// Times `call` like section 1 of wasmprov-bench: min(n, 500) warm-up
/// calls, then up to `n` timed calls within `max`.
fn measure(
    n: usize,
    max: Duration,
    mut call: impl FnMut() -> Result<PriceHint, Error>,
) -> Result<(Summary, PriceHint), Error> {
    let first = call()?;
    for _ in 0..n.min(500) {
        black_box(call()?);
    }
    let mut samples = Vec::with_capacity(n);
    let end = Instant::now() + max;
    while samples.len() < n && Instant::now() < end {
        let t0 = Instant::now();
        let r = call();
        samples.push(t0.elapsed().as_nanos() as f64);
        black_box(r?);
    }
    Ok((summarize(&mut samples), first))
}

/// The host side natively: the shape to JSON, the pricing code, the answer
/// to JSON and back (what the plugin and the host do around the call), in
/// batches of 1000, each sample the batch mean.
fn native(batches: usize, shape: &NodeShape) -> Result<Summary, Error> {
    let plugin = Hetzner::with_settings(Settings::default());
    let once = || -> Result<PriceHint, Error> {
        let input = serde_json::to_vec(black_box(shape))?;
        let shape: NodeShape = serde_json::from_slice(&input)?;
        let output = serde_json::to_vec(&plugin.estimate(&shape)?)?;
        Ok(serde_json::from_slice(&output)?)
    };
    const BATCH: usize = 1000;
    for _ in 0..BATCH * 10 {
        black_box(once()?);
    }
    let mut samples = Vec::with_capacity(batches);
    for _ in 0..batches {
        let t0 = Instant::now();
        for _ in 0..BATCH {
            black_box(once()?);
        }
        samples.push(t0.elapsed().as_nanos() as f64 / BATCH as f64);
    }
    Ok(summarize(&mut samples))
}

fn json(s: &Summary) -> serde_json::Value {
    serde_json::json!({ "n": s.n, "p50": s.p50, "p90": s.p90, "p99": s.p99 })
}

fn same(a: &PriceHint, b: &PriceHint) -> bool {
    a.instance_type == b.instance_type
        && a.capacity_type == b.capacity_type
        && (a.hourly_usd - b.hourly_usd).abs() <= 1e-12
}

fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let mut wasm = None;
    let mut n = 20_000usize;
    let mut max = Duration::from_secs(8);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--samples" => n = args.next().ok_or("--samples needs a count")?.parse()?,
            "--max-secs" => {
                max = Duration::from_secs_f64(
                    args.next().ok_or("--max-secs needs seconds")?.parse()?,
                );
            }
            _ if wasm.is_none() && !a.starts_with('-') => wasm = Some(a),
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let wasm = wasm.ok_or("usage: extism-peer GUEST.wasm [--samples N] [--max-secs S]")?;
    let bytes = std::fs::read(&wasm).map_err(|e| format!("reading {wasm}: {e}"))?;

    // 2 vCPU / 4 GiB, as wasmprov-bench's `common::shape`.
    let shape = NodeShape::new(2.0, 4 << 30);
    let expect = Hetzner::with_settings(Settings::default()).estimate(&shape)?;

    let t0 = Instant::now();
    let compiled = CompiledPlugin::new(
        PluginBuilder::new(bytes)
            .with_wasi(false)
            .with_cache_disabled(),
    )?;
    let compile_ns = t0.elapsed().as_nanos() as f64;

    let (fresh, fresh_answer) = measure(n, max, || {
        let mut plugin = Plugin::new_from_compiled(&compiled)?;
        let Json(hint) =
            plugin.call::<Json<&NodeShape>, Json<PriceHint>>("price_hint", Json(&shape))?;
        drop(plugin);
        Ok(hint)
    })?;
    let mut plugin = Plugin::new_from_compiled(&compiled)?;
    let (reused, reused_answer) = measure(n, max, || {
        let Json(hint) =
            plugin.call::<Json<&NodeShape>, Json<PriceHint>>("price_hint", Json(&shape))?;
        Ok(hint)
    })?;
    let native = native((n / 30).clamp(20, 400), &shape)?;

    for (what, got) in [
        ("new-plugin", &fresh_answer),
        ("reused-plugin", &reused_answer),
    ] {
        if !same(got, &expect) {
            return Err(format!(
                "the Extism {what} price hint {got:?} differs from the native one {expect:?}"
            )
            .into());
        }
    }
    let out = serde_json::json!({
        "extism": "1.30.0",
        "fresh_path": "CompiledPlugin::new once, Plugin::new_from_compiled per call",
        "compile_ns": compile_ns,
        "fresh": json(&fresh),
        "reused": json(&reused),
        "native_json": json(&native),
        "answer": reused_answer,
    });
    println!("{out}");
    Ok(())
}
