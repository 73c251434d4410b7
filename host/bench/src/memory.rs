//! Section 4: resident memory, measured in child processes of this binary
//! that hold nothing but what is measured.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::common::{start_fake, warm_cache_dir};
use crate::config::Config;
use crate::gate::Gate;
use crate::report::{Section, Table};
use crate::stats::{bytes, ratio};

fn child(args: &[String]) -> std::process::Command {
    let me = std::env::current_exe().unwrap_or_else(|_| "wasmprov-bench".into());
    let mut c = std::process::Command::new(me);
    c.arg("--child").args(args);
    c
}

/// Runs a child mode to completion and parses its JSON line.
pub fn child_json(args: &[String]) -> Result<Value> {
    let out = child(args)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running child {args:?}"))?;
    if !out.status.success() {
        bail!("child {args:?} failed: {}", out.status);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().context("child printed nothing")?;
    serde_json::from_str(line).with_context(|| format!("child printed {line:?}"))
}

fn num(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

/// `VmRSS` of another process, bytes.
fn rss_of(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<u64>()
                .ok()
        })
        .unwrap_or(0)
        * 1024
}

/// Mappings of a process: start-end → (virtual size, resident, name,
/// private anonymous), bytes.
type Maps = std::collections::HashMap<String, (f64, f64, String, f64)>;

fn smaps(pid: u32) -> Maps {
    let mut out = std::collections::HashMap::new();
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let mut toks = line.split_whitespace();
        let Some(first) = toks.next() else { continue };
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            let name = toks.nth(4).unwrap_or("").to_string();
            let (a, b) = first.split_once('-').unwrap_or(("0", "0"));
            let size = u64::from_str_radix(b, 16)
                .unwrap_or(0)
                .saturating_sub(u64::from_str_radix(a, 16).unwrap_or(0));
            out.insert(first.to_string(), (size as f64, 0.0, name, 0.0));
            current = Some(first.to_string());
        } else if first == "Rss:"
            && let Some(key) = &current
            && let Some(e) = out.get_mut(key)
        {
            e.1 = toks
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
                * 1024.0;
        } else if first == "Anonymous:"
            && let Some(key) = &current
            && let Some(e) = out.get_mut(key)
        {
            e.3 = toks
                .next()
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
                * 1024.0;
        }
    }
    out
}

/// Where resident memory grew between two snapshots: mappings grouped by
/// name and size (a pool's slots, stacks or arenas come in equal sizes), the
/// groups that grew most first.
fn top_growth(before: &Maps, during: &Maps) -> Vec<(String, f64)> {
    let mut groups: std::collections::HashMap<(String, u64), (usize, f64, f64)> =
        std::collections::HashMap::new();
    for (k, (size, rss, name, anon)) in during {
        let (rss0, anon0) = before.get(k).map_or((0.0, 0.0), |e| (e.1, e.3));
        let grew = rss - rss0;
        if grew <= 0.0 {
            continue;
        }
        // A file's name, not where it is on this machine.
        let what = if name.is_empty() {
            "anonymous".to_string()
        } else if name.starts_with('/') {
            std::path::Path::new(name)
                .file_name()
                .map_or_else(|| name.clone(), |f| f.to_string_lossy().into_owned())
        } else {
            name.clone()
        };
        let e = groups.entry((what, *size as u64)).or_insert((0, 0.0, 0.0));
        e.0 += 1;
        e.1 += grew;
        e.2 += anon - anon0;
    }
    let mut v: Vec<(String, f64)> = groups
        .into_iter()
        .map(|((what, size), (n, grew, anon))| {
            let mut label = if n == 1 {
                format!("one {what} mapping of {}", bytes(size as f64))
            } else {
                format!("{n} {what} mappings of {} each", bytes(size as f64))
            };
            if (anon - grew).abs() > 1024.0 {
                label.push_str(&format!(
                    " (of the growth, {} private)",
                    bytes(anon.max(0.0))
                ));
            }
            (label, grew)
        })
        .collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1));
    v.truncate(4);
    v
}

/// RSS of a client process before its first call, after a warm-up burst of
/// `c` calls, and while `c` provisions are held in flight.
#[derive(Clone, Debug)]
pub struct InFlight {
    pub concurrency: usize,
    /// Before any call (client or host loaded).
    pub cold: f64,
    /// Idle after the warm-up burst.
    pub before: f64,
    pub during: f64,
    pub held: usize,
    /// Mappings that grew most, with their growth.
    pub top: Vec<(String, f64)>,
    /// Growth of private anonymous memory (RSS also counts shared file
    /// pages once per mapping).
    pub private: f64,
}

impl InFlight {
    /// RSS per call in flight, against the process before its first call.
    pub fn per_call(&self) -> f64 {
        (self.during - self.cold) / self.concurrency as f64
    }

    /// RSS still held, idle, after the warm-up burst.
    pub fn retained(&self) -> f64 {
        self.before - self.cold
    }
}

/// Starts a fake and a gate here, a client child (`native` or `wasm`) against
/// the gate; the child warms up with `c` provisions, then the gate closes, the
/// child starts `c` more, and once all `c` are held at the gate the child's
/// RSS is read.
pub async fn inflight(mode: &str, c: usize, cache: &Path) -> Result<InFlight> {
    let fake = start_fake(usize::MAX).await?;
    let gate = Gate::start(fake.url().trim_end_matches("/v1")).await?;
    let endpoint = format!("{}/v1", gate.url());
    let args: Vec<String> = [
        "inflight-client",
        mode,
        &c.to_string(),
        &endpoint,
        fake.token(),
        &cache.display().to_string(),
    ]
    .iter()
    .map(|s| (*s).to_string())
    .collect();
    let mut cmd = tokio::process::Command::from(child(&args));
    let mut proc = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .context("starting the client child")?;
    let pid = proc.id().context("child pid")?;
    let mut stdin = proc.stdin.take().context("stdin")?;
    let mut lines = BufReader::new(proc.stdout.take().context("stdout")?).lines();
    let loaded = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
        .await
        .context("child did not load in time")??;
    if loaded.as_deref() != Some("loaded") {
        bail!("child said {loaded:?}");
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let cold = rss_of(pid) as f64;
    let maps_before = smaps(pid);
    stdin.write_all(b"warm\n").await?;
    stdin.flush().await?;
    let ready = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
        .await
        .context("child did not warm up in time")??;
    if ready.as_deref() != Some("ready") {
        bail!("child said {ready:?}");
    }
    gate.set_open(false);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = rss_of(pid) as f64;
    stdin.write_all(b"go\n").await?;
    stdin.flush().await?;
    let end = Instant::now() + Duration::from_secs(60);
    while gate.waiting() < c && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let held = gate.waiting();
    let during = rss_of(pid) as f64;
    let maps_during = smaps(pid);
    let top = top_growth(&maps_before, &maps_during);
    let anon = |m: &Maps| m.values().map(|e| e.3).sum::<f64>();
    let private = anon(&maps_during) - anon(&maps_before);
    gate.set_open(true);
    let last = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
        .await
        .context("child did not finish in time")??
        .unwrap_or_default();
    let _ = proc.wait().await;
    let v: Value =
        serde_json::from_str(&last).with_context(|| format!("child printed {last:?}"))?;
    if let Some(e) = v.get("first_error").and_then(Value::as_str) {
        eprintln!("  {mode} in-flight run: {e}");
    }
    if held < c {
        eprintln!("  {mode}: only {held} of {c} calls reached the gate");
    }
    Ok(InFlight {
        concurrency: c,
        cold,
        before,
        during,
        held,
        top,
        private,
    })
}

/// Results of the memory section.
#[derive(Clone, Debug)]
pub struct MemoryResults {
    pub empty: f64,
    pub one: f64,
    pub many: f64,
    pub many_n: usize,
    pub wasm_inflight: InFlight,
    pub native_inflight: InFlight,
    pub calls_first: u64,
    pub calls_total: u64,
    pub rss_at_first: f64,
    pub rss_at_total: f64,
}

impl MemoryResults {
    pub fn growth(&self) -> f64 {
        self.rss_at_total - self.rss_at_first
    }
}

pub async fn run(cfg: &Config) -> Result<(Section, MemoryResults)> {
    let mut sec = Section::new(
        "4. Memory (resident set, `VmRSS`)",
        "Each figure comes from a child process of the benchmark binary that holds only what is measured. \
         Idle: a host with N Hetzner plugins loaded from the warm compile cache, each called once, then left idle; \
         the baseline is the same process before the host was built (tokio runtime, the binary itself). \
         In flight: a client process (the host with the plugin, or the native hyper-util client) is read before its \
         first call, warms up with C concurrent provisions (what it still holds afterwards, idle, is \"retained after \
         the burst\"), then C more are started while a gate in front of the fake holds every request; its RSS then, \
         minus its RSS before the first call, divided by C, is the cost per call in flight. \
         Growth: RSS of a host process after 10 000 and after 100 000 fresh-instance `price_hint` calls.",
    );
    let cache = warm_cache_dir();
    let cache_s = cache.display().to_string();
    let many_n = if cfg.quick { 10 } else { 100 };
    println!("  idle hosts …");
    let one = child_json(&["rss-idle".into(), "1".into(), cache_s.clone()])?;
    let many = child_json(&["rss-idle".into(), many_n.to_string(), cache_s.clone()])?;
    let c = 512;
    println!("  {c} calls in flight …");
    let native_inflight = inflight("native", c, &cache).await?;
    let wasm_inflight = inflight("wasm", c, &cache).await?;
    let (first, total) = if cfg.quick {
        (2_000, 20_000)
    } else {
        (10_000, 100_000)
    };
    println!("  {total} price_hint calls …");
    let calls = child_json(&[
        "rss-calls".into(),
        first.to_string(),
        total.to_string(),
        cache_s,
    ])?;
    let r = MemoryResults {
        empty: num(&one, "before"),
        one: num(&one, "after"),
        many: num(&many, "after"),
        many_n,
        wasm_inflight: wasm_inflight.clone(),
        native_inflight: native_inflight.clone(),
        calls_first: first,
        calls_total: total,
        rss_at_first: num(&calls, "at_first"),
        rss_at_total: num(&calls, "at_total"),
    };
    let mut t = Table::new(&["measurement", "RSS", "baseline", "vs baseline", "derived"]);
    t.row(vec![
        "process, no host yet (baseline)".into(),
        bytes(r.empty),
        "–".into(),
        "–".into(),
        "–".into(),
    ]);
    t.row(vec![
        "host, 1 plugin loaded, idle".into(),
        bytes(r.one),
        format!("no host: {}", bytes(r.empty)),
        ratio(r.one, r.empty),
        format!("host + 1 plugin: {}", bytes(r.one - r.empty)),
    ]);
    t.row(vec![
        format!("host, {many_n} plugins loaded, idle"),
        bytes(r.many),
        format!("1 plugin: {}", bytes(r.one)),
        ratio(r.many, r.one),
        format!(
            "per extra plugin: {}",
            bytes((r.many - r.one) / (many_n as f64 - 1.0))
        ),
    ]);
    for (label, f) in [
        ("native client", &r.native_inflight),
        ("wasm plugin through the host", &r.wasm_inflight),
    ] {
        t.row(vec![
            format!("{label}, {} provisions in flight", f.concurrency),
            format!("{} → {}", bytes(f.cold), bytes(f.during)),
            if label.starts_with("wasm") {
                format!("native: {}/call", bytes(r.native_inflight.per_call()))
            } else {
                "–".into()
            },
            if label.starts_with("wasm") {
                ratio(f.per_call(), r.native_inflight.per_call())
            } else {
                "–".into()
            },
            format!(
                "per call in flight: {} RSS, {} private ({} held); retained after the burst: {}",
                bytes(f.per_call()),
                bytes(f.private / f.concurrency as f64),
                f.held,
                bytes(f.retained())
            ),
        ]);
    }
    t.row(vec![
        format!("host after {first} → {total} `price_hint` calls"),
        format!("{} → {}", bytes(r.rss_at_first), bytes(r.rss_at_total)),
        format!("after {first}: {}", bytes(r.rss_at_first)),
        ratio(r.rss_at_total, r.rss_at_first),
        format!(
            "growth: {} ({:.2} B/call)",
            bytes(r.growth()),
            r.growth() / (total - first) as f64
        ),
    ]);
    sec.table("", t);
    for f in [&r.native_inflight, &r.wasm_inflight] {
        let who = if std::ptr::eq(f, &r.native_inflight) {
            "native"
        } else {
            "wasm"
        };
        sec.note(format!(
            "{who}, {} in flight, where resident memory grew most (`/proc/PID/smaps`): {}.",
            f.concurrency,
            f.top
                .iter()
                .map(|(m, g)| format!(
                    "{m} +{} ({}/call)",
                    bytes(*g),
                    bytes(g / f.concurrency as f64)
                ))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    Ok((sec, r))
}
