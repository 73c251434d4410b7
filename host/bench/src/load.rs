//! Section 3: load time, from a component dropped into the plugin directory
//! to its first successful call.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::runtime::Runtime;

use crate::common::{
    build_host, cpu_time, hetzner_bytes, manifest, shape, warm_cache_dir, with_nonce,
};
use crate::config::Config;
use crate::report::{Section, Table};
use crate::stats::{dur, median, ratio};

/// One load: wall time split into writing the files, building the host and
/// the first calls, and the CPU time it took.
#[derive(Clone, Copy, Debug, Default)]
pub struct Load {
    pub total: Duration,
    pub build: Duration,
    pub first_calls: Duration,
    pub cpu: Duration,
}

/// Drops `components` (name → bytes) into a new directory, builds a host over
/// it with the compile cache in `cache`, and calls `price_hint` once on every
/// plugin.
pub fn load_once(rt: &Runtime, components: &[(String, Vec<u8>)], cache: &Path) -> Result<Load> {
    let dir = tempfile::tempdir().context("plugin directory")?;
    let cpu0 = cpu_time();
    let t0 = Instant::now();
    for (name, bytes) in components {
        std::fs::write(dir.path().join(format!("{name}.wasm")), bytes)?;
        std::fs::write(
            dir.path().join(format!("{name}.toml")),
            manifest(name, &format!("{name}.wasm"), None, 16),
        )?;
    }
    let t_files = Instant::now();
    let host = rt.block_on(build_host(dir.path(), Some(cache), None))?;
    let t_built = Instant::now();
    let s = shape();
    for (name, _) in components {
        host.wasm_plugin(name)
            .context("plugin not loaded")?
            .try_price_hint(&s)?
            .context("no price")?;
    }
    let t_end = Instant::now();
    let cpu = cpu_time().saturating_sub(cpu0);
    drop(host);
    Ok(Load {
        total: t_end - t0,
        build: t_built - t_files,
        first_calls: t_end - t_built,
        cpu,
    })
}

/// Medians of each part over several loads.
fn med(loads: &[Load]) -> Load {
    let m = |f: fn(&Load) -> Duration| {
        Duration::from_nanos(median(
            &loads
                .iter()
                .map(|l| f(l).as_nanos() as f64)
                .collect::<Vec<_>>(),
        ) as u64)
    };
    Load {
        total: m(|l| l.total),
        build: m(|l| l.build),
        first_calls: m(|l| l.first_calls),
        cpu: m(|l| l.cpu),
    }
}

/// Results of the load section.
#[derive(Clone, Copy, Debug)]
pub struct LoadResults {
    pub cold1: Load,
    pub warm1: Load,
    pub many: usize,
    pub warm_many: Load,
    pub cold_many: Load,
    pub cores: usize,
}

fn ns(d: Duration) -> f64 {
    d.as_nanos() as f64
}

pub fn run(cfg: &Config, rt: &Runtime) -> Result<(Section, LoadResults)> {
    let mut sec = Section::new(
        "3. Load time: dropped into the directory → first successful call",
        "Wall time from writing `NAME.wasm` and `NAME.toml` into an empty plugin directory, through \
         `HostBuilder::build` (read, hash, compile or load from the compile cache, pre-link, probe call), to the \
         first successful `price_hint` of every plugin. Cold: an empty compile cache directory. Warm: the cache \
         already holds the component. 100 plugins: copies of the Hetzner component under distinct names in one \
         directory; for the cold case every copy gets a distinct custom section, so no copy hits the cache. \
         CPU/wall > 1 means more than one core worked.",
    );
    let bytes = hetzner_bytes()?;
    let single = vec![("hetzner".to_string(), bytes.clone())];
    let (cold_reps, warm_reps, many, many_reps) = if cfg.quick {
        (1, 5, 10, 1)
    } else {
        (3, 20, 100, 3)
    };

    println!("  cold single loads …");
    let mut colds = Vec::new();
    for _ in 0..cold_reps {
        let cache = tempfile::tempdir()?;
        colds.push(load_once(rt, &single, cache.path())?);
    }
    let cold1 = med(&colds);

    println!("  warm single loads …");
    let warm = warm_cache_dir();
    load_once(rt, &single, &warm)?; // make sure the cache holds it
    let mut warms = Vec::new();
    for _ in 0..warm_reps {
        warms.push(load_once(rt, &single, &warm)?);
    }
    let warm1 = med(&warms);

    println!("  {many} plugins, warm …");
    let copies: Vec<(String, Vec<u8>)> = (0..many)
        .map(|i| (format!("hetzner-{i:03}"), bytes.clone()))
        .collect();
    let mut wm = Vec::new();
    for _ in 0..many_reps {
        wm.push(load_once(rt, &copies, &warm)?);
    }
    let warm_many = med(&wm);

    println!("  {many} plugins, cold, distinct bytes …");
    let nonce = std::process::id();
    let distinct: Vec<(String, Vec<u8>)> = (0..many)
        .map(|i| {
            (
                format!("hetzner-{i:03}"),
                with_nonce(&bytes, &format!("{nonce}-{i}")),
            )
        })
        .collect();
    let cache = tempfile::tempdir()?;
    let cold_many = load_once(rt, &distinct, cache.path())?;

    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let util = |l: &Load| {
        format!(
            "{:.2}",
            l.cpu.as_secs_f64() / l.total.as_secs_f64().max(1e-9)
        )
    };
    let mut t = Table::new(&[
        "case",
        "plugins",
        "runs",
        "wall (median)",
        "of which build",
        "of which first calls",
        "per plugin",
        "CPU/wall",
        "baseline",
        "vs baseline",
    ]);
    t.row(vec![
        "cold cache, 1 plugin".into(),
        "1".into(),
        cold_reps.to_string(),
        dur(ns(cold1.total)),
        dur(ns(cold1.build)),
        dur(ns(cold1.first_calls)),
        dur(ns(cold1.total)),
        util(&cold1),
        "–".into(),
        "–".into(),
    ]);
    t.row(vec![
        "warm cache, 1 plugin".into(),
        "1".into(),
        warm_reps.to_string(),
        dur(ns(warm1.total)),
        dur(ns(warm1.build)),
        dur(ns(warm1.first_calls)),
        dur(ns(warm1.total)),
        util(&warm1),
        format!("cold, 1 plugin: {}", dur(ns(cold1.total))),
        ratio(ns(warm1.total), ns(cold1.total)),
    ]);
    t.row(vec![
        format!("warm cache, {many} plugins"),
        many.to_string(),
        many_reps.to_string(),
        dur(ns(warm_many.total)),
        dur(ns(warm_many.build)),
        dur(ns(warm_many.first_calls)),
        dur(ns(warm_many.total) / many as f64),
        util(&warm_many),
        format!(
            "{many} × warm single: {}",
            dur(ns(warm1.total) * many as f64)
        ),
        ratio(ns(warm_many.total), ns(warm1.total) * many as f64),
    ]);
    t.row(vec![
        format!("cold cache, {many} distinct plugins"),
        many.to_string(),
        "1".into(),
        dur(ns(cold_many.total)),
        dur(ns(cold_many.build)),
        dur(ns(cold_many.first_calls)),
        dur(ns(cold_many.total) / many as f64),
        util(&cold_many),
        format!(
            "{many} × cold single: {}",
            dur(ns(cold1.total) * many as f64)
        ),
        ratio(ns(cold_many.total), ns(cold1.total) * many as f64),
    ]);
    sec.table("", t);
    sec.note(format!(
        "{cores} cores. With compiles spread perfectly over them, the cold {many}-plugin load would take about \
         {many} × single ÷ {cores} (ratio ≈ {:.2}) if a single compile used one core; wasmtime's parallel \
         compilation already spreads one component's functions over the cores, so the single cold load's CPU/wall \
         shows how much is left to gain.",
        1.0 / cores as f64
    ));
    Ok((
        sec,
        LoadResults {
            cold1,
            warm1,
            many,
            warm_many,
            cold_many,
            cores,
        },
    ))
}
