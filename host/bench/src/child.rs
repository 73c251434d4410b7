//! Modes this binary runs in when started by itself (`--child MODE …`), so
//! that memory is measured in a process holding nothing but what is being
//! measured, and profiles cover nothing but the loop being profiled.
//!
//! Every mode prints its result as one JSON line on stdout.

use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;
use wasmprov_api::{CloudProvisioner, ProvisionRequest};

use crate::common::{OWNER, build_host, hetzner_bytes, manifest, one_plugin_dir, rss_bytes, shape};
use crate::native::NativeHetzner;

fn arg<'a>(args: &'a [String], i: usize, what: &str) -> Result<&'a str> {
    args.get(i)
        .map(String::as_str)
        .with_context(|| format!("missing argument {i} ({what})"))
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?)
}

pub fn run(args: &[String]) -> Result<()> {
    match arg(args, 0, "mode")? {
        "price-server" => Ok(crate::price_loop::serve()?),
        "rss-idle" => rss_idle(
            arg(args, 1, "plugins")?.parse()?,
            Path::new(arg(args, 2, "cache")?),
        ),
        "rss-calls" => rss_calls(
            arg(args, 1, "first")?.parse()?,
            arg(args, 2, "total")?.parse()?,
            Path::new(arg(args, 3, "cache")?),
        ),
        "inflight-client" => inflight_client(
            arg(args, 1, "mode")?,
            arg(args, 2, "concurrency")?.parse()?,
            arg(args, 3, "endpoint")?,
            arg(args, 4, "token")?,
            Path::new(arg(args, 5, "cache")?),
        ),
        "price-loop" => price_loop(
            Duration::from_secs_f64(arg(args, 1, "seconds")?.parse()?),
            Path::new(arg(args, 2, "cache")?),
            args.get(3).is_some_and(|a| a == "reused"),
        ),
        "provision-loop" => provision_loop(
            arg(args, 1, "client")?,
            Duration::from_secs_f64(arg(args, 2, "seconds")?.parse()?),
            arg(args, 3, "concurrency")?.parse()?,
            arg(args, 4, "endpoint")?,
            arg(args, 5, "token")?,
            Path::new(arg(args, 6, "cache")?),
        ),
        "load-loop" => load_loop(
            Duration::from_secs_f64(arg(args, 1, "seconds")?.parse()?),
            Path::new(arg(args, 2, "cache")?),
        ),
        "fake" => {
            // A fake cloud for profiling by hand: prints its URL and token,
            // serves for the given seconds.
            let rt = runtime()?;
            let secs: f64 = arg(args, 1, "seconds")?.parse()?;
            rt.block_on(async {
                let fake = crate::common::start_fake(usize::MAX).await?;
                println!("{} {}", fake.url(), fake.token());
                tokio::time::sleep(Duration::from_secs_f64(secs)).await;
                Ok(())
            })
        }
        other => bail!("unknown child mode {other:?}"),
    }
}

/// RSS before a host exists, and with `n` plugins loaded, each called once,
/// then left idle.
fn rss_idle(n: usize, cache: &Path) -> Result<()> {
    let rt = runtime()?;
    let bytes = hetzner_bytes()?;
    let dir = tempfile::tempdir()?;
    let names: Vec<String> = (0..n).map(|i| format!("hetzner-{i:03}")).collect();
    for name in &names {
        std::fs::write(dir.path().join(format!("{name}.wasm")), &bytes)?;
        std::fs::write(
            dir.path().join(format!("{name}.toml")),
            manifest(name, &format!("{name}.wasm"), None, 16),
        )?;
    }
    drop(bytes);
    std::thread::sleep(Duration::from_millis(100));
    let before = rss_bytes();
    let host = rt.block_on(build_host(dir.path(), Some(cache), None))?;
    let s = shape();
    for name in &names {
        host.wasm_plugin(name)
            .context("not loaded")?
            .try_price_hint(&s)?;
    }
    std::thread::sleep(Duration::from_millis(500));
    let after = rss_bytes();
    println!("{}", json!({ "before": before, "after": after }));
    drop(host);
    Ok(())
}

/// RSS after `first` fresh-instance price hints and after `total`.
fn rss_calls(first: u64, total: u64, cache: &Path) -> Result<()> {
    let rt = runtime()?;
    let dir = one_plugin_dir(None, 16)?;
    let host = rt.block_on(build_host(dir.path(), Some(cache), None))?;
    let p = host.wasm_plugin("hetzner").context("not loaded")?;
    let s = shape();
    let before = rss_bytes();
    let t0 = Instant::now();
    for _ in 0..first {
        p.try_price_hint(&s)?;
    }
    let at_first = rss_bytes();
    for _ in first..total {
        p.try_price_hint(&s)?;
    }
    let at_total = rss_bytes();
    println!(
        "{}",
        json!({ "before": before, "at_first": at_first, "at_total": at_total,
                "seconds": t0.elapsed().as_secs_f64() })
    );
    Ok(())
}

fn request(i: usize, phase: &str) -> ProvisionRequest {
    ProvisionRequest {
        request_id: format!("{phase}{}n{i}", std::process::id()),
        shape: shape(),
        boot: Default::default(),
        subnet: None,
    }
}

/// `c` provisions at once through `native` or `wasm` against `endpoint`:
/// after `warm` on stdin once to warm up (prints `loaded` before, `ready`
/// after), then, after `go` on stdin, again while
/// the parent holds them at its gate and reads this process's RSS.
fn inflight_client(mode: &str, c: usize, endpoint: &str, token: &str, cache: &Path) -> Result<()> {
    let rt = runtime()?;
    let dir = one_plugin_dir(Some(endpoint), crate::roundtrip::MAX_IN_FLIGHT)?;
    let (provider, host) = make_client(
        &rt,
        mode,
        dir.path(),
        endpoint,
        token,
        cache,
        Default::default(),
    )?;
    let round = |phase: &'static str| {
        let provider = provider.clone();
        rt.block_on(async move {
            let tasks: Vec<_> = (0..c)
                .map(|i| {
                    let p = provider.clone();
                    tokio::spawn(async move { p.provision(&request(i, phase)).await })
                })
                .collect();
            let mut ok = 0u64;
            let mut first_error = None;
            for t in tasks {
                match t.await {
                    Ok(Ok(_)) => ok += 1,
                    Ok(Err(e)) => {
                        first_error.get_or_insert(e.to_string());
                    }
                    Err(e) => {
                        first_error.get_or_insert(e.to_string());
                    }
                }
            }
            (ok, first_error)
        })
    };
    // Wait for the parent to read this process before any call, warm up
    // with one round, wait for the parent again.
    let mut line = String::new();
    println!("loaded");
    std::io::stdin().lock().read_line(&mut line)?;
    let (warm_ok, warm_err) = round("w");
    println!("ready");
    line.clear();
    std::io::stdin().lock().read_line(&mut line)?;
    let (ok, first_error) = round("m");
    println!(
        "{}",
        json!({ "warm_ok": warm_ok, "warm_error": warm_err, "ok": ok, "first_error": first_error })
    );
    drop(host);
    Ok(())
}

/// Either client, behind one `provision`.
#[derive(Clone)]
enum AnyClient {
    Native(Box<NativeHetzner>),
    Wasm(Arc<dyn CloudProvisioner>),
}

impl AnyClient {
    async fn provision(&self, request: &ProvisionRequest) -> Result<()> {
        match self {
            Self::Native(n) => n.provision(request).await.map(|_| ()),
            Self::Wasm(p) => p
                .provision_request(request)
                .await
                .map(|_| ())
                .map_err(anyhow::Error::from),
        }
    }
}

/// The client `mode` names: the native one, or the Hetzner plugin in `dir`
/// through a host with `settings` (returned too, to be kept alive).
fn make_client(
    rt: &tokio::runtime::Runtime,
    mode: &str,
    dir: &Path,
    endpoint: &str,
    token: &str,
    cache: &Path,
    settings: wasmprov_host::EngineSettings,
) -> Result<(AnyClient, Option<wasmprov_host::Host>)> {
    match mode {
        "native" => Ok((
            AnyClient::Native(Box::new(NativeHetzner::new(endpoint, token, OWNER, true))),
            None,
        )),
        "wasm" => {
            let h = rt.block_on(crate::common::build_host_with(
                dir,
                Some(cache),
                Some(token),
                |b| b.engine_settings(settings),
            ))?;
            let p = h.plugin("hetzner").context("not loaded")?;
            Ok((AnyClient::Wasm(p), Some(h)))
        }
        other => bail!("unknown client {other:?}"),
    }
}

/// Engine settings of the profiled loops: default, plus a perf map so that
/// the profile names the guest's functions.
fn profiled() -> wasmprov_host::EngineSettings {
    wasmprov_host::EngineSettings {
        perf_map: true,
        ..wasmprov_host::EngineSettings::default()
    }
}

/// Price hints for `secs` (the profiled loop): a fresh instance per call, or
/// with `reused` warm instances answering many.
fn price_loop(secs: Duration, cache: &Path, reused: bool) -> Result<()> {
    let rt = runtime()?;
    let dir = one_plugin_dir(None, 16)?;
    let reuse = if reused { crate::calls::REUSE } else { 1 };
    let host = rt.block_on(crate::common::build_host_with(
        dir.path(),
        Some(cache),
        None,
        |b| b.engine_settings(profiled()).price_hint_reuse(reuse),
    ))?;
    let p = host.wasm_plugin("hetzner").context("not loaded")?;
    let s = shape();
    for _ in 0..1000 {
        std::hint::black_box(p.try_price_hint(&s)?);
    }
    let cpu0 = crate::common::cpu_time();
    let end = Instant::now() + secs;
    let mut n = 0u64;
    while Instant::now() < end {
        for _ in 0..100 {
            std::hint::black_box(p.try_price_hint(&s)?);
        }
        n += 100;
    }
    let cpu = crate::common::cpu_time().saturating_sub(cpu0);
    println!(
        "{}",
        json!({ "calls": n, "cpu_ns": cpu.as_nanos() as f64, "pid": std::process::id() })
    );
    Ok(())
}

/// Provisions through `client` at concurrency `c` for `secs` against
/// `endpoint` (the profiled loop); reports calls and the CPU time this
/// process used for them.
fn provision_loop(
    client: &str,
    secs: Duration,
    c: usize,
    endpoint: &str,
    token: &str,
    cache: &Path,
) -> Result<()> {
    let rt = runtime()?;
    let dir = one_plugin_dir(Some(endpoint), crate::roundtrip::MAX_IN_FLIGHT)?;
    let (provider, host) =
        make_client(&rt, client, dir.path(), endpoint, token, cache, profiled())?;
    let bounds = crate::driver::Bounds {
        concurrency: c,
        total: u64::MAX,
        max_time: secs,
    };
    let pid = std::process::id();
    let cpu0 = crate::common::cpu_time();
    let r = rt.block_on(crate::driver::drive(bounds, move |i| {
        let p = provider.clone();
        async move {
            p.provision(&ProvisionRequest {
                request_id: format!("p{pid}n{i}"),
                shape: shape(),
                boot: Default::default(),
                subnet: None,
            })
            .await
        }
    }));
    let cpu = crate::common::cpu_time().saturating_sub(cpu0);
    println!(
        "{}",
        json!({ "calls": r.ok + r.concurrency as u64, "errors": r.errors,
                "cpu_ns": cpu.as_nanos() as f64, "wall_ns": r.wall.as_nanos() as f64,
                "pid": pid })
    );
    drop(host);
    Ok(())
}

/// Warm-cache loads of one plugin to its first call, for `secs`.
fn load_loop(secs: Duration, cache: &Path) -> Result<()> {
    let rt = runtime()?;
    let single = vec![("hetzner".to_string(), hetzner_bytes()?)];
    crate::load::load_once(&rt, &single, cache)?;
    let cpu0 = crate::common::cpu_time();
    let end = Instant::now() + secs;
    let mut n = 0u64;
    while Instant::now() < end {
        crate::load::load_once(&rt, &single, cache)?;
        n += 1;
    }
    let cpu = crate::common::cpu_time().saturating_sub(cpu0);
    println!(
        "{}",
        json!({ "calls": n, "cpu_ns": cpu.as_nanos() as f64, "pid": std::process::id() })
    );
    Ok(())
}
