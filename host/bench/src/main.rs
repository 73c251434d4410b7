//! `wasmprov-bench`: the benchmark suite of the wasmprov host.
//!
//! One command runs every benchmark, prints a table per section, each figure
//! next to the ratio against its baseline measured in the same run, and
//! writes `docs/BENCHMARKS.md`:
//!
//! ```text
//! cargo run --release -p wasmprov-bench            # full run (≈ 3–4 minutes)
//! cargo run --release -p wasmprov-bench -- --quick # smoke run (≈ 30 s)
//! ```
//!
//! Sections: 1 call overhead (`price_hint`: native, fresh wasm instance,
//! subprocess, the Extism peer), 2 provision round trips over HTTP to a
//! loopback fake cloud, 3 load time, 4 memory, 5 scaling, 8 the same plugin
//! in Rust, Python and JavaScript, then a profile of the largest remaining
//! cost.

mod calls;
mod child;
mod common;
mod config;
mod driver;
mod extism;
mod gate;
mod languages;
mod load;
mod memory;
mod native;
mod price_loop;
mod profile;
mod report;
mod roundtrip;
mod scaling;
mod stats;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::common::{
    Machine, build_host, build_host_with, one_plugin_dir, wait_for_quiet, warm_cache_dir,
};
use crate::config::{Config, parse_args, workspace_root};
use crate::report::{Section, Table, Target, Verdict};
use crate::stats::{bytes, dur, ratio};

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        return child::run(&args[1..]);
    }
    let Some(cfg) = parse_args(&args)? else {
        return Ok(());
    };
    let started = Instant::now();
    let machine = Machine::probe();
    println!(
        "wasmprov-bench{}: {} cores ({}, pku {}), {}, {}",
        if cfg.quick { " --quick" } else { "" },
        machine.cores,
        machine.cpu,
        machine.pku_label(),
        machine.rustc,
        machine.date
    );
    let load_at_start = wait_for_quiet(1.0, Duration::from_secs(if cfg.quick { 5 } else { 60 }));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("tokio runtime")?;
    let mut sections: Vec<Section> = Vec::new();
    let mut loads: Vec<(String, f64)> = vec![("start".into(), load_at_start)];
    let quiet = |name: &str, loads: &mut Vec<(String, f64)>| {
        let l = wait_for_quiet(1.5, Duration::from_secs(if cfg.quick { 5 } else { 20 }));
        loads.push((name.to_string(), l));
        println!(
            "\n== {name} (load average {l:.2}, {:.0} s into the run)",
            started.elapsed().as_secs_f64()
        );
    };

    // Warm the shared compile cache; everything but section 3's cold cases
    // loads from it.
    let dir = one_plugin_dir(None, 16)?;
    let host = rt.block_on(build_host(dir.path(), Some(&warm_cache_dir()), None))?;
    // The same plugin, with instances that answer many price hints each.
    let reusing = rt.block_on(build_host_with(
        dir.path(),
        Some(&warm_cache_dir()),
        None,
        |b| b.price_hint_reuse(calls::REUSE),
    ))?;
    // Section 1's Extism peer, built before any measurement starts.
    let peer = if !cfg.extism {
        Err("skipped (--no-extism)".to_string())
    } else if cfg.only.is_some_and(|n| n != 1) {
        Err("not this section".to_string())
    } else {
        extism::build(&workspace_root())
    };
    if let Some(n) = cfg.only {
        match n {
            1 => drop(calls::run(&cfg, &host, &reusing, &peer)?),
            2 => drop(rt.block_on(roundtrip::run(&cfg))?),
            3 => drop(load::run(&cfg, &rt)?),
            4 => drop(rt.block_on(memory::run(&cfg))?),
            5 => drop(rt.block_on(scaling::run(&cfg, &[]))?),
            6 => println!("{}", profile::run(&cfg, &rt)?.markdown()),
            8 => drop(languages::run(&cfg, &rt, &workspace_root())?),
            _ => bail!("no section {n}"),
        }
        return Ok(());
    }

    quiet("1. call overhead", &mut loads);
    let (sec, calls) = calls::run(&cfg, &host, &reusing, &peer)?;
    sections.push(sec);
    drop(host);
    drop(reusing);

    quiet("2. provision round trip", &mut loads);
    let (sec, pairs, conns) = rt.block_on(roundtrip::run(&cfg))?;
    sections.push(sec);

    quiet("3. load time", &mut loads);
    let (sec, load) = load::run(&cfg, &rt)?;
    sections.push(sec);

    quiet("4. memory", &mut loads);
    let (sec, mem) = rt.block_on(memory::run(&cfg))?;
    sections.push(sec);

    quiet("5. scaling", &mut loads);
    let (sec, describe, sweep, _mem_sweep) = rt.block_on(scaling::run(&cfg, &pairs))?;
    sections.push(sec);

    quiet("8. plugins by language", &mut loads);
    sections.push(languages::run(&cfg, &rt, &workspace_root())?);

    let prof = if cfg.profile {
        quiet("profile", &mut loads);
        Some(profile::run(&cfg, &rt)?)
    } else {
        None
    };

    let targets = targets(&calls, &pairs, &load, &mem);
    let mut tt = Table::new(&[
        "target",
        "limit",
        "measured",
        "baseline (same run)",
        "verdict",
    ]);
    for t in &targets {
        tt.row(vec![
            t.what.clone(),
            t.target.clone(),
            t.measured.clone(),
            t.baseline.clone(),
            t.verdict.label().into(),
        ]);
    }
    println!("\n== targets\n{}", tt.markdown());
    if let Some(p) = &prof {
        println!("{}", p.summary());
    }

    let mut facts = facts(&calls, &pairs, &sweep, &conns, &load, &mem, &describe);
    if let Some(p) = &prof {
        p.facts(&mut facts);
    }
    let analysis = fill(include_str!("../ANALYSIS.md"), &facts);
    let elapsed = started.elapsed();
    let doc = document(
        &cfg,
        &machine,
        &loads,
        &tt,
        &sections,
        prof.as_ref(),
        &analysis,
        elapsed,
    );
    if let Some(parent) = cfg.out.parent() {
        std::fs::create_dir_all(parent).ok();
    }
    std::fs::write(&cfg.out, doc).with_context(|| format!("writing {}", cfg.out.display()))?;
    println!(
        "wrote {} ({} in all)",
        cfg.out.display(),
        dur(elapsed.as_nanos() as f64)
    );
    Ok(())
}

fn targets(
    calls: &calls::CallResults,
    pairs: &[roundtrip::Pair],
    load: &load::LoadResults,
    mem: &memory::MemoryResults,
) -> Vec<Target> {
    let mut out = Vec::new();
    let fr = calls.fresh.p50;
    out.push(Target {
        what: "`price_hint`, fresh instance per call (p50)".into(),
        target: "≤ 10 µs".into(),
        measured: dur(fr),
        baseline: format!(
            "native {} ({})",
            dur(calls.native.p50),
            ratio(fr, calls.native.p50)
        ),
        verdict: Verdict::of(fr <= 10_000.0),
    });
    out.push(Target {
        what: "`price_hint`, fresh instance vs subprocess round trip (p50)".into(),
        target: "≤ ×0.25".into(),
        measured: ratio(fr, calls.subprocess.p50),
        baseline: format!("subprocess {}", dur(calls.subprocess.p50)),
        verdict: Verdict::of(fr <= 0.25 * calls.subprocess.p50),
    });
    out.push(extism_target(fr, &calls.extism));
    let re = calls.reused.p50;
    out.push(Target {
        what: "`price_hint`, reused instance (p50)".into(),
        target: "≤ 1 µs".into(),
        measured: dur(re),
        baseline: format!(
            "native {} ({})",
            dur(calls.native.p50),
            ratio(re, calls.native.p50)
        ),
        verdict: Verdict::of(re <= 1_000.0),
    });
    for p in pairs {
        let r = p.wasm.latency.p50 / p.native.latency.p50;
        out.push(Target {
            what: format!("provision round trip p50, concurrency {}", p.concurrency),
            target: "≤ ×1.2 native pooled".into(),
            measured: format!(
                "{} ({})",
                dur(p.wasm.latency.p50),
                ratio(p.wasm.latency.p50, p.native.latency.p50)
            ),
            baseline: format!("native pooled {}", dur(p.native.latency.p50)),
            verdict: Verdict::of(r <= 1.2 && p.wasm.errors == 0),
        });
    }
    if let Some(p) = pairs.iter().find(|p| p.concurrency == 1)
        && let (Some(w), Some(n)) = (p.wasm.client_cpu_per_op, p.native.client_cpu_per_op)
    {
        let (w, n) = (w.as_nanos() as f64, n.as_nanos() as f64);
        out.push(Target {
            what: "client CPU per provision, concurrency 1".into(),
            target: "≤ ×2 native pooled".into(),
            measured: format!("{} ({})", dur(w), ratio(w, n)),
            baseline: format!("native pooled {}", dur(n)),
            verdict: Verdict::of(w <= 2.0 * n),
        });
    }
    if let Some(p) = pairs.iter().find(|p| p.concurrency == 512) {
        let r = p.wasm.throughput() / p.native.throughput();
        out.push(Target {
            what: "provision throughput, concurrency 512".into(),
            target: "≥ ×0.8 native pooled".into(),
            measured: format!(
                "{} ({})",
                stats::rate(p.wasm.throughput()),
                ratio(p.wasm.throughput(), p.native.throughput())
            ),
            baseline: format!("native pooled {}", stats::rate(p.native.throughput())),
            verdict: Verdict::of(r >= 0.8 && p.wasm.errors == 0),
        });
    }
    let w1 = load.warm1.total.as_nanos() as f64;
    out.push(Target {
        what: "warm-cache load → first call, 1 plugin".into(),
        target: "≤ 10 ms".into(),
        measured: dur(w1),
        baseline: format!(
            "cold {} ({})",
            dur(load.cold1.total.as_nanos() as f64),
            ratio(w1, load.cold1.total.as_nanos() as f64)
        ),
        verdict: Verdict::of(w1 <= 10e6),
    });
    let wm = load.warm_many.total.as_nanos() as f64;
    out.push(Target {
        what: format!("warm-cache load → first calls, {} plugins", load.many),
        target: if load.many == 100 {
            "≤ 1 s".into()
        } else {
            format!("≤ {} ms (1 s per 100)", load.many * 10)
        },
        measured: dur(wm),
        baseline: format!(
            "{} × warm single: {}",
            load.many,
            dur(w1 * load.many as f64)
        ),
        verdict: Verdict::of(wm <= 1e9 * load.many as f64 / 100.0),
    });
    let cm = load.cold_many.total.as_secs_f64();
    let util = load.cold_many.cpu.as_secs_f64() / cm.max(1e-9);
    out.push(Target {
        what: format!(
            "cold compiles of {} plugins spread over the cores",
            load.many
        ),
        target: format!(
            "CPU/wall ≥ {:.1} on {} cores",
            0.75 * load.cores as f64,
            load.cores
        ),
        measured: format!("CPU/wall {util:.2}; wall {}", dur(cm * 1e9)),
        baseline: format!(
            "{} × cold single: {} ({})",
            load.many,
            dur(load.cold1.total.as_nanos() as f64 * load.many as f64),
            ratio(
                cm * 1e9,
                load.cold1.total.as_nanos() as f64 * load.many as f64
            )
        ),
        verdict: Verdict::of(util >= 0.75 * load.cores as f64),
    });
    out.push(Target {
        what: format!("idle host with {} plugins, RSS", mem.many_n),
        target: if mem.many_n == 100 {
            "≤ 300 MiB".into()
        } else {
            format!("≤ {} MiB (300 per 100)", 3 * mem.many_n)
        },
        measured: bytes(mem.many),
        baseline: format!(
            "1 plugin: {} ({})",
            bytes(mem.one),
            ratio(mem.many, mem.one)
        ),
        verdict: Verdict::of(mem.many <= 3.0 * mem.many_n as f64 * 1048576.0),
    });
    let per_call = mem.growth() / (mem.calls_total - mem.calls_first) as f64;
    out.push(Target {
        what: format!(
            "RSS growth, {} → {} `price_hint` calls",
            mem.calls_first, mem.calls_total
        ),
        target: "none (< 1 B/call)".into(),
        measured: format!("{} ({per_call:.2} B/call)", bytes(mem.growth())),
        baseline: format!("RSS after {}: {}", mem.calls_first, bytes(mem.rss_at_first)),
        verdict: Verdict::of(per_call < 1.0),
    });
    out
}

/// The target row "fresh instance vs Extism reused plugin": met when the
/// fresh-instance p50 is at most Extism's reused-plugin p50 in the same run;
/// "not measured", with the reason, without the peer.
fn extism_target(fresh_p50: f64, extism: &Result<extism::ExtismResults, String>) -> Target {
    let what = "`price_hint`, fresh instance vs Extism reused plugin (p50)".to_string();
    let target = "≤ ×1.0".to_string();
    match extism {
        Ok(e) => Target {
            what,
            target,
            measured: ratio(fresh_p50, e.reused.p50),
            baseline: format!("Extism {} reused {}", extism::VERSION, dur(e.reused.p50)),
            verdict: Verdict::of(fresh_p50 <= e.reused.p50),
        },
        Err(why) => Target {
            what,
            target,
            measured: "not measured".into(),
            baseline: format!("Extism peer: {why}"),
            verdict: Verdict::NotMeasured,
        },
    }
}

/// Named figures of this run, for `{{name}}` placeholders in the analysis.
fn facts(
    calls: &calls::CallResults,
    pairs: &[roundtrip::Pair],
    sweep: &[roundtrip::Pair],
    conns: &roundtrip::Conns,
    load: &load::LoadResults,
    mem: &memory::MemoryResults,
    describe: &[scaling::DescribePoint],
) -> BTreeMap<String, String> {
    let mut f = BTreeMap::new();
    let mut put = |k: &str, v: String| {
        f.insert(k.to_string(), v);
    };
    let verdict = |met: bool| if met { "met" } else { "missed" }.to_string();
    put("v_fresh", verdict(calls.fresh.p50 <= 10_000.0));
    put(
        "v_sub",
        verdict(calls.fresh.p50 <= 0.25 * calls.subprocess.p50),
    );
    for p in pairs {
        let c = p.concurrency;
        put(
            &format!("v_prov{c}"),
            verdict(p.wasm.latency.p50 <= 1.2 * p.native.latency.p50 && p.wasm.errors == 0),
        );
        put(
            &format!("v_thr{c}"),
            verdict(p.wasm.throughput() >= 0.8 * p.native.throughput() && p.wasm.errors == 0),
        );
    }
    put("native_p50", dur(calls.native.p50));
    put("fresh_p50", dur(calls.fresh.p50));
    put("reused_p50", dur(calls.reused.p50));
    put("v_reused", verdict(calls.reused.p50 <= 1_000.0));
    put(
        "reused_vs_native",
        ratio(calls.reused.p50, calls.native.p50),
    );
    put("sub_p50", dur(calls.subprocess.p50));
    put("sub_p90", dur(calls.subprocess.p90));
    put("fresh_vs_sub", ratio(calls.fresh.p50, calls.subprocess.p50));
    put("fresh_vs_native", ratio(calls.fresh.p50, calls.native.p50));
    let na = || "not measured".to_string();
    let ext = calls.extism.as_ref().ok();
    put(
        "extism_fresh_p50",
        ext.map_or_else(na, |e| dur(e.fresh.p50)),
    );
    put(
        "extism_reused_p50",
        ext.map_or_else(na, |e| dur(e.reused.p50)),
    );
    put(
        "fresh_vs_extism_reused",
        ext.map_or_else(na, |e| ratio(calls.fresh.p50, e.reused.p50)),
    );
    put(
        "v_extism",
        ext.map_or_else(na, |e| verdict(calls.fresh.p50 <= e.reused.p50)),
    );
    let ns = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_nanos() as f64);
    for p in pairs.iter().chain(sweep) {
        let c = p.concurrency;
        put(&format!("prov{c}_native"), dur(p.native.latency.p50));
        put(&format!("prov{c}_wasm"), dur(p.wasm.latency.p50));
        put(
            &format!("prov{c}_ratio"),
            ratio(p.wasm.latency.p50, p.native.latency.p50),
        );
        put(
            &format!("thr{c}_native"),
            stats::rate(p.native.throughput()),
        );
        put(&format!("thr{c}_wasm"), stats::rate(p.wasm.throughput()));
        put(
            &format!("thr{c}_ratio"),
            ratio(p.wasm.throughput(), p.native.throughput()),
        );
        put(
            &format!("cpu{c}_native"),
            dur(ns(p.native.client_cpu_per_op)),
        );
        put(&format!("cpu{c}_wasm"), dur(ns(p.wasm.client_cpu_per_op)));
        put(
            &format!("fake{c}_native"),
            dur(ns(p.native.server_cpu_per_op)),
        );
        put(&format!("fake{c}_wasm"), dur(ns(p.wasm.server_cpu_per_op)));
        if let Some(n) = &p.new_connection {
            put(&format!("prov{c}_newconn"), dur(n.latency.p50));
            put(
                &format!("prov{c}_newconn_ratio"),
                ratio(n.latency.p50, p.native.latency.p50),
            );
        }
    }
    for (c, wasm, n, reqs) in conns {
        let who = if *wasm { "wasm" } else { "native" };
        put(&format!("conns{c}_{who}"), n.to_string());
        put(&format!("reqs{c}"), reqs.to_string());
    }
    let ms = |d: Duration| dur(d.as_nanos() as f64);
    put("cold1", ms(load.cold1.total));
    put("warm1", ms(load.warm1.total));
    put("many", load.many.to_string());
    put("warm_many", ms(load.warm_many.total));
    put("cold_many", ms(load.cold_many.total));
    put(
        "warm_extra",
        dur(
            (load.warm_many.total.as_nanos() as f64 - load.warm1.total.as_nanos() as f64)
                / (load.many as f64 - 1.0),
        ),
    );
    put(
        "cold_util",
        format!(
            "{:.2}",
            load.cold_many.cpu.as_secs_f64() / load.cold_many.total.as_secs_f64().max(1e-9)
        ),
    );
    put(
        "cold1_util",
        format!(
            "{:.2}",
            load.cold1.cpu.as_secs_f64() / load.cold1.total.as_secs_f64().max(1e-9)
        ),
    );
    put(
        "cold_many_ratio",
        ratio(
            load.cold_many.total.as_nanos() as f64,
            load.cold1.total.as_nanos() as f64 * load.many as f64,
        ),
    );
    put("idle_none", bytes(mem.empty));
    put("idle1", bytes(mem.one));
    put("idle_many", bytes(mem.many));
    put(
        "per_plugin",
        bytes((mem.many - mem.one) / (mem.many_n as f64 - 1.0)),
    );
    let w = &mem.wasm_inflight;
    put("inflight_rss", bytes(w.per_call()));
    put("inflight_private", bytes(w.private / w.concurrency as f64));
    put("inflight_native", bytes(mem.native_inflight.per_call()));
    put("inflight_retained", bytes(w.retained()));
    put(
        "inflight_native_retained",
        bytes(mem.native_inflight.retained()),
    );
    for (i, (what, grew)) in w.top.iter().enumerate() {
        put(
            &format!("inflight_top{i}"),
            format!("{what}: {}/call", bytes(grew / w.concurrency as f64)),
        );
    }
    put(
        "growth_per_call",
        format!(
            "{:.2} B",
            mem.growth() / (mem.calls_total - mem.calls_first) as f64
        ),
    );
    if let Some(p) = sweep.iter().max_by_key(|p| p.concurrency) {
        put("sweep_max_c", p.concurrency.to_string());
        put(
            "sweep_max_ratio",
            ratio(p.wasm.latency.p50, p.native.latency.p50),
        );
        put(
            "sweep_max_thr_ratio",
            ratio(p.wasm.throughput(), p.native.throughput()),
        );
    }
    if let Some(d) = describe.last() {
        let n = d.nodes;
        put("desc_last_n", n.to_string());
        put("desc_last_ratio", ratio(d.wasm, d.native));
        put(
            "desc_last_per_page",
            dur((d.wasm - d.native) / n.div_ceil(50).max(1) as f64),
        );
        put("desc_last_native_per_node", dur(d.native / n as f64));
    }
    for d in describe {
        let n = d.nodes;
        put(&format!("desc{n}_ratio"), ratio(d.wasm, d.native));
        put(&format!("desc{n}_native"), dur(d.native));
        put(&format!("desc{n}_wasm"), dur(d.wasm));
        put(
            &format!("desc{n}_per_page"),
            dur((d.wasm - d.native) / n.div_ceil(50).max(1) as f64),
        );
        put(
            &format!("desc{n}_native_per_node"),
            dur(d.native / n as f64),
        );
    }
    f
}

/// Replaces `{{name}}` with the figure of that name (`?` when unknown).
fn fill(template: &str, facts: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find("{{") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        match after.find("}}") {
            Some(j) => {
                let key = after[..j].trim();
                match facts.get(key) {
                    Some(v) => out.push_str(v),
                    None => {
                        eprintln!("  analysis: no figure named {key:?}");
                        out.push('?');
                    }
                }
                rest = &after[j + 2..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

#[allow(clippy::too_many_arguments)]
fn document(
    cfg: &Config,
    m: &Machine,
    loads: &[(String, f64)],
    targets: &Table,
    sections: &[Section],
    prof: Option<&profile::Profile>,
    analysis: &str,
    elapsed: Duration,
) -> String {
    let mut d = String::new();
    d.push_str("# Benchmarks\n\n");
    d.push_str(
        "Every number below was produced by one run of the benchmark suite (`host/bench`), each next to the \
         baseline it is compared with, measured in the same run. Reproduce them with:\n\n",
    );
    d.push_str("```sh\ncargo run --release -p wasmprov-bench\n```\n\n");
    d.push_str(&format!(
        "(`-- --quick` for a ~30 s smoke run that writes `target/BENCHMARKS.quick.md` instead; `-- --no-profile` \
         without `perf`, `-- --no-extism` without section 1's Extism peer.) This file was written by {} run that took {}.\n\n",
        if cfg.quick { "a `--quick`" } else { "a full" },
        dur(elapsed.as_nanos() as f64)
    ));
    d.push_str("## Machine\n\n");
    let mut t = Table::new(&["", ""]);
    t.row(vec!["date".into(), m.date.clone()]);
    t.row(vec!["cores".into(), m.cores.to_string()]);
    t.row(vec!["CPU".into(), m.cpu.clone()]);
    t.row(vec![
        "memory protection keys (`pku` in /proc/cpuinfo)".into(),
        m.pku_label().into(),
    ]);
    t.row(vec!["memory".into(), m.memory.clone()]);
    t.row(vec!["kernel".into(), m.kernel.clone()]);
    t.row(vec!["compiler".into(), format!("`{}`", m.rustc)]);
    t.row(vec!["commit".into(), m.commit.clone()]);
    t.row(vec![
        "sources measured (sha256 of host/runtime, host/policy, guest-sdk, plugins/hetzner)".into(),
        format!("`{}`", m.sources),
    ]);
    t.row(vec![
        "load average at section starts".into(),
        loads
            .iter()
            .map(|(n, l)| format!("{n}: {l:.2}"))
            .collect::<Vec<_>>()
            .join("; "),
    ]);
    d.push_str(&t.markdown());
    d.push_str("\n## Targets\n\n");
    d.push_str(&targets.markdown());
    d.push('\n');
    if let Some(p) = prof {
        d.push_str(&p.summary());
    }
    // Sections 1-5 as measured; 6 and 7 were measured outside this suite
    // (the daemon under load, an author's first build, the autoscaler's
    // loop through the daemon) and are kept as written; 8 and later as
    // measured.
    let (before, after): (Vec<&Section>, Vec<&Section>) =
        sections.iter().partition(|s| !s.title.starts_with('8'));
    for s in before {
        d.push_str(&s.markdown());
    }
    d.push_str(include_str!("../RELIABILITY.md"));
    d.push_str(include_str!("../AUTHORING.md"));
    d.push_str(include_str!("../CLI.md"));
    d.push_str(include_str!("../EC2.md"));
    d.push('\n');
    d.push_str(include_str!("../REST.md"));
    d.push_str(include_str!("../AUTOSCALER.md"));
    for s in after {
        d.push_str(&s.markdown());
    }
    if let Some(p) = prof {
        d.push_str(&p.markdown());
    }
    d.push_str(analysis);
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Summary;

    #[test]
    fn extism_target_row() {
        let at = |p50| Summary {
            n: 3000,
            p50,
            p90: p50,
            p99: p50,
        };
        let peer = Ok(extism::ExtismResults {
            fresh: at(231_000.0),
            reused: at(12_700.0),
            native_json: at(263.0),
        });
        let t = extism_target(23_700.0, &peer);
        assert_eq!(t.target, "≤ ×1.0");
        assert_eq!(t.measured, "×1.87");
        assert_eq!(t.baseline, "Extism 1.30 reused 12.7 µs");
        assert_eq!(t.verdict, Verdict::Missed);
        assert_eq!(extism_target(12_000.0, &peer).verdict, Verdict::Met);
        let t = extism_target(23_700.0, &Err("skipped (--no-extism)".into()));
        assert_eq!(t.measured, "not measured");
        assert_eq!(t.baseline, "Extism peer: skipped (--no-extism)");
        assert_eq!(t.verdict.label(), "not measured");
    }
}
