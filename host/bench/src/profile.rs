//! Profiles of the costs that miss their targets, with `perf` (cpu-clock
//! sampling, DWARF call graphs) over short runs of child processes that do
//! nothing but the profiled loop.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::Value;
use tokio::runtime::Runtime;

use crate::common::{start_fake, warm_cache_dir};
use crate::config::Config;
use crate::report::{Section, Table};
use crate::stats::{dur, ratio};

/// The profile section.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    pub section: Section,
    pub groups: Groups,
}

impl Profile {
    pub fn markdown(&self) -> String {
        self.section.markdown()
    }

    /// Figures for the analysis text: `price_KEY` and `reused_KEY` (per
    /// call, fresh and reused instance), `prov_native_KEY`,
    /// `prov_wasm_KEY`, `prov_diff_KEY` (per provision), and the CPU totals.
    pub fn facts(&self, facts: &mut std::collections::BTreeMap<String, String>) {
        let g = &self.groups;
        if g.price.is_empty() {
            return;
        }
        facts.insert("price_cpu".into(), dur(g.price_per_call));
        facts.insert("reused_cpu".into(), dur(g.reused_per_call));
        facts.insert("prov_cpu_wasm".into(), dur(g.cpu_wasm));
        facts.insert("prov_cpu_native".into(), dur(g.cpu_native));
        facts.insert("prov_cpu_ratio".into(), ratio(g.cpu_wasm, g.cpu_native));
        facts.insert("prov_cpu_extra".into(), dur(g.cpu_wasm - g.cpu_native));
        for (i, key) in group_keys().iter().enumerate() {
            if let Some((_, share)) = g.price.get(i) {
                facts.insert(
                    format!("price_{key}"),
                    dur(share.max(0.0) / 100.0 * g.price_per_call),
                );
                facts.insert(format!("price_{key}_pct"), pct(*share));
            }
            if let Some((_, share)) = g.reused.get(i) {
                facts.insert(
                    format!("reused_{key}"),
                    dur(share.max(0.0) / 100.0 * g.reused_per_call),
                );
            }
            let n = g
                .provision_native
                .get(i)
                .map_or(0.0, |x| x.1.max(0.0) / 100.0 * g.cpu_native);
            let w = g
                .provision_wasm
                .get(i)
                .map_or(0.0, |x| x.1.max(0.0) / 100.0 * g.cpu_wasm);
            facts.insert(format!("prov_native_{key}"), dur(n));
            facts.insert(format!("prov_wasm_{key}"), dur(w));
            facts.insert(format!("prov_diff_{key}"), dur(w - n));
        }
    }

    /// The largest costs, from the profiles (for the summary at the top).
    pub fn summary(&self) -> String {
        let g = &self.groups;
        if g.price.is_empty() {
            return String::new();
        }
        let mut out = String::from("## Largest remaining costs (from the profiles below)\n\n");
        let mut price = g.price.clone();
        price.sort_by(|a, b| b.1.total_cmp(&a.1));
        out.push_str(&format!(
            "- Fresh-instance `price_hint` ({} CPU per call in the profiled loop): {}.\n",
            dur(g.price_per_call),
            price
                .iter()
                .take(3)
                .map(|(n, s)| format!("{n} {} ({})", pct(*s), dur(s / 100.0 * g.price_per_call)))
                .collect::<Vec<_>>()
                .join("; ")
        ));
        let mut diff: Vec<(String, f64)> = g
            .provision_wasm
            .iter()
            .zip(&g.provision_native)
            .map(|((n, w), (_, nat))| {
                (
                    n.clone(),
                    w.max(0.0) / 100.0 * g.cpu_wasm - nat.max(0.0) / 100.0 * g.cpu_native,
                )
            })
            .collect();
        diff.sort_by(|a, b| b.1.total_cmp(&a.1));
        out.push_str(&format!(
            "- Provision, client CPU per call {} (wasm) against {} (native, {}); the extra {} is mostly: {}.\n\n",
            dur(g.cpu_wasm),
            dur(g.cpu_native),
            ratio(g.cpu_wasm, g.cpu_native),
            dur(g.cpu_wasm - g.cpu_native),
            diff.iter()
                .take(4)
                .map(|(n, d)| format!("{n} +{}", dur(*d)))
                .collect::<Vec<_>>()
                .join("; ")
        ));
        out
    }
}

/// One line of `perf report`: inclusive and self share, and the symbol.
#[derive(Clone, Debug)]
struct Line {
    children: f64,
    own: f64,
    symbol: String,
}

fn perf_works() -> bool {
    let Ok(dir) = tempfile::tempdir() else {
        return false;
    };
    Command::new("perf")
        .args(["record", "-q", "-e", "cpu-clock", "-o"])
        .arg(dir.path().join("probe.data"))
        .args(["--", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Removes the perf map a profiled child wrote (named by the `pid` in its
/// JSON line), once its profile has been read.
fn drop_perf_map(v: &Value) {
    if let Some(pid) = v.get("pid").and_then(Value::as_u64) {
        std::fs::remove_file(format!("/tmp/perf-{pid}.map")).ok();
    }
}

/// The guest's own functions (JIT-compiled wasm, named through the perf
/// map) with the most self samples.
fn guest_functions(sec: &mut Section, name: &str, data: &Path) -> Result<()> {
    let own = self_by_dso(data)?;
    let mut t = Table::new(&["self", "guest function"]);
    for (_, sym, p) in own.iter().filter(|(d, _, _)| d.contains("[JIT]")).take(10) {
        t.row(vec![pct(*p), format!("`{}`", short(sym))]);
    }
    sec.table(
        &format!("{name}: guest functions (JIT-compiled wasm) by self samples."),
        t,
    );
    Ok(())
}

/// Runs this binary's child mode `args` under `perf record`; returns the
/// child's JSON line.
fn record(data: &Path, args: &[String]) -> Result<Value> {
    let me = std::env::current_exe().context("own path")?;
    let out = Command::new("perf")
        .args([
            "record",
            "-q",
            "-e",
            "cpu-clock",
            "-F",
            "1000",
            "--call-graph",
            "dwarf,16384",
            "-o",
        ])
        .arg(data)
        .arg("--")
        .arg(me)
        .arg("--child")
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .context("running perf record")?;
    if !out.status.success() {
        bail!("perf record failed: {}", out.status);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().last().context("child printed nothing")?;
    serde_json::from_str(line).with_context(|| format!("child printed {line:?}"))
}

/// `perf report` lines: `--children` gives inclusive and self columns.
fn report(
    data: &Path,
    children: bool,
    sort: &str,
    limit: f64,
    extra: &[&str],
) -> Result<Vec<Line>> {
    let out = Command::new("perf")
        .arg("report")
        .arg("-i")
        .arg(data)
        .args(["--stdio", "--no-inline", "-g", "none", "--sort", sort])
        .arg(if children {
            "--children"
        } else {
            "--no-children"
        })
        .arg(format!("--percent-limit={limit}"))
        .args(extra)
        .stderr(Stdio::null())
        .output()
        .context("running perf report")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = Vec::new();
    for l in text.lines() {
        if l.starts_with('#') || l.trim().is_empty() {
            continue;
        }
        let mut toks = l.split_whitespace().peekable();
        let mut pcts = Vec::new();
        while let Some(t) = toks.peek() {
            match t.strip_suffix('%').and_then(|p| p.parse::<f64>().ok()) {
                Some(p) => {
                    pcts.push(p);
                    toks.next();
                }
                None => break,
            }
        }
        if pcts.is_empty() {
            continue;
        }
        let mut rest: Vec<&str> = toks.collect();
        // Drop the IPC columns perf appends ("-  -").
        while rest.last() == Some(&"-") {
            rest.pop();
        }
        let sym = rest.join(" ");
        let (children, own) = if children && pcts.len() >= 2 {
            (pcts[0], pcts[1])
        } else {
            (pcts[0], pcts[0])
        };
        lines.push(Line {
            children,
            own,
            symbol: sym,
        });
    }
    Ok(lines)
}

fn short(sym: &str) -> String {
    let s = sym
        .trim_start_matches("[.] ")
        .trim_start_matches("[k] ")
        .replace('|', "\\|");
    let s = s
        .replace(
            "wasmtime::runtime::vm::instance::allocator::pooling::",
            "pooling::",
        )
        .replace(
            "wasmtime::runtime::vm::instance::allocator::",
            "allocator::",
        )
        .replace("wasmtime::runtime::", "wasmtime::")
        .replace("wasmprov_host::", "host::");
    if s.chars().count() > 110 {
        format!("{}…", s.chars().take(110).collect::<String>())
    } else {
        s
    }
}

/// Frames that only say "the program ran".
fn generic(sym: &str) -> bool {
    let s = sym.trim_start_matches("[.] ").trim_start_matches("[k] ");
    [
        "main",
        "_start",
        "__libc_start",
        "std::rt::",
        "std::sys::",
        "wasmprov_bench::",
        "entry_SYSCALL",
        "do_syscall_64",
        "asm_exc_page_fault",
        "tokio::runtime::",
        "std::thread::",
        "core::ops::function::",
        "start_thread",
        "__clone",
        "clone3",
        "<tokio::runtime::",
        "tokio::task::",
        "wasmtime::runtime::vm::traphandlers::catch_unwind",
    ]
    .iter()
    .any(|g| s.starts_with(g))
        || s.starts_with("0x")
}

fn pct(v: f64) -> String {
    format!("{:.1}%", v.max(0.0))
}

/// Inclusive share of the first frame whose symbol contains `pattern`.
fn inclusive(lines: &[Line], pattern: &str) -> f64 {
    lines
        .iter()
        .filter(|l| l.symbol.contains(pattern))
        .map(|l| l.children)
        .fold(0.0, f64::max)
}

/// Tables of one profile: curated inclusive frames, top inclusive and top
/// self frames.
fn describe(sec: &mut Section, name: &str, data: &Path, curated: &[(&str, &str)]) -> Result<()> {
    let incl = report(data, true, "symbol", 0.3, &[])?;
    let own = report(data, false, "symbol", 0.3, &[])?;
    if !curated.is_empty() {
        let mut t = Table::new(&["frame", "symbol", "inclusive"]);
        for (label, pattern) in curated {
            t.row(vec![
                (*label).to_string(),
                format!("`{}`", short(pattern)),
                pct(inclusive(&incl, pattern)),
            ]);
        }
        sec.table(
            &format!(
                "{name}: selected frames, inclusive (they overlap; user-space figures are lower bounds, as DWARF \
                 unwinding stops at JIT-compiled and fiber frames)."
            ),
            t,
        );
    }
    let mut t = Table::new(&["inclusive", "self", "frame"]);
    for l in incl.iter().filter(|l| !generic(&l.symbol)).take(12) {
        t.row(vec![
            pct(l.children),
            pct(l.own),
            format!("`{}`", short(&l.symbol)),
        ]);
    }
    sec.table(&format!("{name}: top frames by inclusive samples."), t);
    let mut t = Table::new(&["self", "frame"]);
    for l in own.iter().take(12) {
        t.row(vec![pct(l.own), format!("`{}`", short(&l.symbol))]);
    }
    sec.table(&format!("{name}: top frames by self samples."), t);
    Ok(())
}

/// Self samples with their DSO: `perf report --no-children --sort dso,symbol`.
fn self_by_dso(data: &Path) -> Result<Vec<(String, String, f64)>> {
    let out = Command::new("perf")
        .arg("report")
        .arg("-i")
        .arg(data)
        .args([
            "--stdio",
            "--no-inline",
            "-g",
            "none",
            "--no-children",
            "--sort",
            "dso,symbol",
            "--percent-limit=0",
        ])
        .stderr(Stdio::null())
        .output()
        .context("running perf report")?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut v = Vec::new();
    for l in text.lines() {
        if l.starts_with('#') {
            continue;
        }
        let t = l.trim_start();
        let Some((p, rest)) = t.split_once('%') else {
            continue;
        };
        let Ok(p) = p.trim().parse::<f64>() else {
            continue;
        };
        let (dso, sym) = match rest.find(" [.] ").or_else(|| rest.find(" [k] ")) {
            Some(i) => (
                rest[..i].trim().to_string(),
                rest[i + 1..].trim().to_string(),
            ),
            None => (rest.trim().to_string(), String::new()),
        };
        let mut sym: Vec<&str> = sym.split_whitespace().collect();
        while sym.last() == Some(&"-") {
            sym.pop();
        }
        v.push((dso, sym.join(" "), p));
    }
    Ok(v)
}

/// Userspace groups, by the first crate a symbol names.
const USER_GROUPS: &[(&str, &str, &[&str])] = &[
    (
        "wasmtime",
        "wasmtime: instantiate, store, calls, lift/lower",
        &[
            "wasmtime::",
            "wasmtime_environ::",
            "wasmtime_internal",
            "cranelift",
        ],
    ),
    (
        "wasi",
        "WASI / wasi-http host functions",
        &["wasmtime_wasi"],
    ),
    (
        "host",
        "wasmprov host: HTTP hook, pool, glue",
        &["wasmprov_host::"],
    ),
    (
        "hyper",
        "hyper / http (HTTP/1)",
        &[
            "hyper::",
            "hyper_util::",
            "http::",
            "httparse::",
            "http_body",
        ],
    ),
    (
        "tokio",
        "tokio / mio (tasks, I/O driver, timers)",
        &["tokio::", "mio::"],
    ),
    ("serde", "serde / JSON (native)", &["serde"]),
    (
        "plugin",
        "plugin logic (native)",
        &["wasmprov_plugin_hetzner::"],
    ),
    (
        "cache",
        "compile cache: zstd, sha2",
        &["ZSTD_", "zstd", "sha2::"],
    ),
];

/// Kernel groups, by system call (inclusive: kernel call chains are complete).
const KERNEL_GROUPS: &[(&str, &str, &[&str])] = &[
    (
        "kmem",
        "kernel: memory (page faults, madvise, mprotect, mmap, PAGEMAP_SCAN)",
        &[
            "[k] exc_page_fault",
            "[k] __x64_sys_madvise",
            "[k] __x64_sys_mprotect",
            "[k] __x64_sys_mmap",
            "[k] __x64_sys_munmap",
            "[k] __x64_sys_ioctl",
        ],
    ),
    (
        "ktcp",
        "kernel: TCP over loopback (send, recv, connect, close)",
        &[
            "[k] __x64_sys_sendto",
            "[k] __x64_sys_recvfrom",
            "[k] do_writev",
            "[k] __x64_sys_writev",
            "[k] __x64_sys_connect",
            "[k] __x64_sys_close",
            "[k] __x64_sys_shutdown",
        ],
    ),
    (
        "kfutex",
        "kernel: futex / epoll (threads sleeping and waking)",
        &[
            "[k] __x64_sys_futex",
            "[k] __x64_sys_epoll_wait",
            "[k] __x64_sys_epoll_ctl",
        ],
    ),
    (
        "krw",
        "kernel: read / write (eventfd wake-ups, files)",
        &["[k] __x64_sys_write", "[k] __x64_sys_read"],
    ),
];

/// Short keys of the groups, in the order [`groups`] returns them.
pub fn group_keys() -> Vec<&'static str> {
    let mut k = vec!["guest"];
    k.extend(USER_GROUPS.iter().map(|g| g.0));
    k.extend(["rust", "libc"]);
    k.extend(KERNEL_GROUPS.iter().map(|g| g.0));
    k.push("kother");
    k
}

/// Shares (in % of samples) per group.
fn groups(data: &Path) -> Result<Vec<(String, f64)>> {
    let own = self_by_dso(data)?;
    let incl = report(data, true, "symbol", 0.01, &[])?;
    let mut out: Vec<(String, f64)> = Vec::new();
    let jit: f64 = own
        .iter()
        .filter(|(d, _, _)| d.contains("[JIT]"))
        .map(|x| x.2)
        .sum();
    out.push(("guest code (JIT-compiled wasm)".into(), jit));
    let mut user = vec![0.0; USER_GROUPS.len()];
    let mut other_user = 0.0;
    let mut libc = 0.0;
    let mut kernel_total = 0.0;
    for (dso, sym, p) in &own {
        if dso.contains("kernel") {
            kernel_total += p;
        } else if dso.contains("libc") || dso.contains("ld-linux") {
            libc += p;
        } else if !dso.contains("[JIT]") {
            let mut best: Option<(usize, usize)> = None;
            for (gi, (_, _, pats)) in USER_GROUPS.iter().enumerate() {
                for pat in *pats {
                    if let Some(pos) = sym.find(pat)
                        && best.is_none_or(|(bp, _)| pos < bp)
                    {
                        best = Some((pos, gi));
                    }
                }
            }
            match best {
                Some((_, gi)) => user[gi] += p,
                None => other_user += p,
            }
        }
    }
    for (gi, (_, name, _)) in USER_GROUPS.iter().enumerate() {
        out.push(((*name).to_string(), user[gi]));
    }
    out.push(("other Rust (std, core, alloc, harness)".into(), other_user));
    out.push(("libc (malloc, free, memcpy, memset)".into(), libc));
    let mut kernel_grouped = 0.0;
    for (_, name, pats) in KERNEL_GROUPS {
        let v: f64 = pats
            .iter()
            .map(|pat| {
                incl.iter()
                    .filter(|l| l.symbol == *pat)
                    .map(|l| l.children)
                    .fold(0.0, f64::max)
            })
            .sum();
        kernel_grouped += v;
        out.push(((*name).to_string(), v));
    }
    out.push((
        "kernel: other".into(),
        (kernel_total - kernel_grouped).max(0.0),
    ));
    Ok(out)
}

/// A table of groups, with the cost per operation when `per_op` (ns) is known.
/// One column of a group table: name, group shares, cost per operation (ns).
type Column<'a> = (&'a str, &'a [(String, f64)], Option<f64>);

fn group_table(cols: &[Column<'_>]) -> Table {
    let mut headers = vec!["where the CPU time goes".to_string()];
    for (name, _, per_op) in cols {
        headers.push(format!("{name}: share"));
        if per_op.is_some() {
            headers.push(format!("{name}: per op"));
        }
    }
    let mut t = Table {
        headers,
        rows: Vec::new(),
    };
    let n = cols.first().map_or(0, |c| c.1.len());
    for i in 0..n {
        let label = cols[0].1[i].0.clone();
        if cols.iter().all(|c| c.1[i].1 < 0.05) {
            continue;
        }
        let mut row = vec![label];
        for (_, g, per_op) in cols {
            row.push(pct(g[i].1));
            if let Some(op) = per_op {
                row.push(dur(g[i].1.max(0.0) / 100.0 * op));
            }
        }
        t.row(row);
    }
    t
}

fn num(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

/// Results the report's summary uses.
#[derive(Clone, Debug, Default)]
pub struct Groups {
    pub price: Vec<(String, f64)>,
    pub price_per_call: f64,
    pub reused: Vec<(String, f64)>,
    pub reused_per_call: f64,
    pub provision_native: Vec<(String, f64)>,
    pub provision_wasm: Vec<(String, f64)>,
    pub cpu_native: f64,
    pub cpu_wasm: f64,
}

pub fn run(cfg: &Config, rt: &Runtime) -> Result<Profile> {
    let mut sec = Section::new(
        "Profiles",
        "`perf record -e cpu-clock -F 1000 --call-graph dwarf` over child processes of the benchmark binary that \
         run only the profiled loop (the fake cloud, when needed, runs in the parent process, so it is not in the \
         profile). \"Where the CPU time goes\" splits all samples of the child: user-space samples by the first \
         crate their function names (self time), kernel samples by the system call or fault they are under; \
         \"per op\" multiplies the share by the CPU time per operation measured in the same child without perf.",
    );
    if !perf_works() {
        sec.note("`perf` is not available here (`perf record -e cpu-clock -- true` failed), so no profile was taken.");
        return Ok(Profile {
            section: sec,
            groups: Groups::default(),
        });
    }
    let secs = if cfg.quick { "1" } else { "3" };
    let cache = warm_cache_dir().display().to_string();
    let dir = tempfile::tempdir()?;
    let mut groups_out = Groups::default();

    // 1. Fresh-instance price_hint.
    println!("  profiling fresh-instance price_hint …");
    let price_args: Vec<String> = vec!["price-loop".into(), secs.into(), cache.clone()];
    let cal = crate::memory::child_json(&price_args)?;
    drop_perf_map(&cal);
    let per_call = num(&cal, "cpu_ns") / num(&cal, "calls");
    let data = dir.path().join("price.data");
    let v = record(&data, &price_args)?;
    let g = groups(&data)?;
    sec.table(
        &format!(
            "Fresh-instance `price_hint` (one thread, back to back): {} calls in {secs} s without perf, {} CPU per \
             call; {} calls under perf.",
            num(&cal, "calls"),
            dur(per_call),
            num(&v, "calls")
        ),
        group_table(&[("price_hint", &g, Some(per_call))]),
    );
    describe(
        &mut sec,
        "Fresh-instance `price_hint`",
        &data,
        &[
            (
                "instantiate from the InstancePre",
                "ProviderPre<_T>::instantiate_async",
            ),
            (
                "… of which memory slot + copy-on-write image",
                "MemoryImageSlot::instantiate",
            ),
            (
                "drop of the store (instance teardown)",
                "drop_in_place<wasmtime::runtime::store::StoreInner",
            ),
            (
                "… of which returning memory slots (decommit → madvise)",
                "DecommitQueue::flush",
            ),
            ("new store + WASI/HTTP contexts", "WasmPlugin::new_store"),
            (
                "guest `memory.grow` → host → mprotect",
                "wasmtime::runtime::vm::libcalls::memory_grow",
            ),
            ("kernel: page faults", "[k] exc_page_fault"),
            ("kernel: madvise", "[k] __x64_sys_madvise"),
            ("kernel: mprotect", "[k] __x64_sys_mprotect"),
            ("kernel: PAGEMAP_SCAN ioctl", "[k] __x64_sys_ioctl"),
        ],
    )?;
    drop_perf_map(&v);
    std::fs::remove_file(&data).ok();
    groups_out.price = g;
    groups_out.price_per_call = per_call;

    // 1b. The same call in warm instances (`price_hint_reuse`).
    println!("  profiling reused-instance price_hint …");
    let mut reused_args = price_args.clone();
    reused_args.push("reused".into());
    let cal = crate::memory::child_json(&reused_args)?;
    drop_perf_map(&cal);
    let reused_per_call = num(&cal, "cpu_ns") / num(&cal, "calls");
    let data = dir.path().join("reused.data");
    let v = record(&data, &reused_args)?;
    let g = groups(&data)?;
    sec.table(
        &format!(
            "Reused-instance `price_hint` (one thread, back to back, `price_hint_reuse({})`): {} calls in {secs} s \
             without perf, {} CPU per call; {} calls under perf.",
            crate::calls::REUSE,
            num(&cal, "calls"),
            dur(reused_per_call),
            num(&v, "calls")
        ),
        group_table(&[("price_hint, reused", &g, Some(reused_per_call))]),
    );
    describe(&mut sec, "Reused-instance `price_hint`", &data, &[])?;
    guest_functions(&mut sec, "Reused-instance `price_hint`", &data)?;
    drop_perf_map(&v);
    std::fs::remove_file(&data).ok();
    groups_out.reused = g;
    groups_out.reused_per_call = reused_per_call;

    // 2. Provision round trips: CPU per call of each client, both profiled.
    println!("  profiling provision round trips …");
    let fake = rt.block_on(start_fake(usize::MAX))?;
    let conc = "16";
    let args = |client: &str| -> Vec<String> {
        vec![
            "provision-loop".into(),
            client.into(),
            secs.into(),
            conc.into(),
            fake.url(),
            fake.token().into(),
            cache.clone(),
        ]
    };
    let nat = crate::memory::child_json(&args("native"))?;
    let was = crate::memory::child_json(&args("wasm"))?;
    drop_perf_map(&was);
    let per = |v: &Value| num(v, "cpu_ns") / num(v, "calls");
    let data_n = dir.path().join("native.data");
    record(&data_n, &args("native"))?;
    let gn = groups(&data_n)?;
    let data_w = dir.path().join("wasm.data");
    let recorded_w = record(&data_w, &args("wasm"))?;
    let gw = groups(&data_w)?;
    drop(fake);
    sec.table(
        &format!(
            "Provision (GET + POST) at concurrency {conc}, client process only: native {} and wasm {} provisions in \
             {secs} s without perf; client CPU per provision native {}, wasm {} ({}).",
            num(&nat, "calls"),
            num(&was, "calls"),
            dur(per(&nat)),
            dur(per(&was)),
            ratio(per(&was), per(&nat))
        ),
        group_table(&[("native", &gn, Some(per(&nat))), ("wasm", &gw, Some(per(&was)))]),
    );
    describe(
        &mut sec,
        "Wasm provision (client process)",
        &data_w,
        &[
            (
                "instantiate from the InstancePre",
                "ProviderPre<_T>::instantiate_async",
            ),
            (
                "drop of the store (instance teardown)",
                "drop_in_place<wasmtime::runtime::store::StoreInner",
            ),
            (
                "wasi-http `outgoing-handler.handle`",
                "outgoing_handler::Host for wasmtime_wasi_http::ctx::WasiHttpCtxView>::handle",
            ),
            (
                "host send hook (policy, pool, send)",
                "<wasmprov_host::http::HttpHooks as wasmtime_wasi_http::ctx::WasiHttpHooks>::send_request",
            ),
            (
                "spawning wasi-http's request task",
                "wasmtime_wasi::runtime::spawn",
            ),
            (
                "waking the I/O driver (eventfd)",
                "mio::sys::unix::waker::Waker::wake",
            ),
            (
                "the host's HTTP/1 connection tasks",
                "wasmprov_host::http::connect::{{closure}}::{{closure}}",
            ),
        ],
    )?;
    guest_functions(&mut sec, "Wasm provision (client process)", &data_w)?;
    drop_perf_map(&recorded_w);
    std::fs::remove_file(&data_n).ok();
    std::fs::remove_file(&data_w).ok();
    groups_out.provision_native = gn;
    groups_out.provision_wasm = gw;
    groups_out.cpu_native = per(&nat);
    groups_out.cpu_wasm = per(&was);

    // 3. Warm load.
    println!("  profiling warm loads …");
    let load_args: Vec<String> = vec!["load-loop".into(), secs.into(), cache];
    let cal = crate::memory::child_json(&load_args)?;
    let per_load = num(&cal, "cpu_ns") / num(&cal, "calls");
    let data = dir.path().join("load.data");
    record(&data, &load_args)?;
    let g = groups(&data)?;
    sec.table(
        &format!(
            "Warm-cache load (write the files, build a host, first call, drop the host): {} loads in {secs} s without \
             perf, {} CPU each (the drop is not part of the measured load time).",
            num(&cal, "calls"),
            dur(per_load)
        ),
        group_table(&[("load", &g, Some(per_load))]),
    );
    describe(
        &mut sec,
        "Warm-cache load",
        &data,
        &[
            (
                "engine creation (`Engines::get`)",
                "wasmprov_host::host::Engines::get",
            ),
            ("… pooling allocator setup", "PoolingInstanceAllocator::new"),
            (
                "loading the plugin (`WasmPlugin::load`)",
                "wasmprov_host::plugin::WasmPlugin::load",
            ),
            ("… component from the compile cache", "compile_component"),
            (
                "… … reading + zstd-decompressing the cache entry",
                "ModuleCacheEntryInner::get_data",
            ),
            ("… sha256 of the component", "sha2::sha256"),
            (
                "host drop: unmapping the pools (not in the load time)",
                "drop_in_place<wasmtime::engine::EngineInner",
            ),
        ],
    )?;
    Ok(Profile {
        section: sec,
        groups: groups_out,
    })
}
