//! Shared pieces: the component under test, plugin directories, hosts wired
//! to a fake cloud, the fake's own runtime, and process measurements.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use wasmprov_api::NodeShape;
use wasmprov_fake::{HetznerFake, HetznerFakeOptions};
use wasmprov_host::{Host, HostBuilder, LockMode};

/// The component built from source by `build.rs`.
pub mod guests {
    include!(concat!(env!("OUT_DIR"), "/guests.rs"));
}

/// Owner id of every host (and of the native client) in the benchmarks.
pub const OWNER: &str = "wasmprov-bench";

/// The shape every price hint and provision asks for: 2 vCPU, 4 GiB in the
/// default location (Hetzner `cax11`).
pub fn shape() -> NodeShape {
    NodeShape::new(2.0, 4 << 30)
}

/// The Hetzner component's bytes.
pub fn hetzner_bytes() -> Result<Vec<u8>> {
    std::fs::read(guests::HETZNER_WASM)
        .with_context(|| format!("reading the component {}", guests::HETZNER_WASM))
}

/// Resident set size of this process (`VmRSS`), bytes.
pub fn rss_bytes() -> u64 {
    proc_status_kib("VmRSS:") * 1024
}

fn proc_status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time used so far by this process, all threads, user and system,
/// to the nanosecond (the scheduler's own account, `CLOCK_PROCESS_CPUTIME_ID`).
///
/// The tick counts of `/proc/self/stat` are 10 ms samples: over a run of a
/// few hundred milliseconds they are off by several per cent, and a thread
/// that runs in bursts shorter than a tick is charged by chance.
pub fn cpu_time() -> Duration {
    clock(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
}

/// CPU time used so far by this process's threads whose name starts with
/// `prefix` (e.g. the fake's runtime threads), to the nanosecond.
pub fn threads_cpu(prefix: &str) -> Duration {
    let mut total = Duration::ZERO;
    if let Ok(dir) = std::fs::read_dir("/proc/self/task") {
        for e in dir.flatten() {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            if !comm.trim().starts_with(prefix) {
                continue;
            }
            if let Some(tid) = e.file_name().to_str().and_then(|t| t.parse::<i32>().ok()) {
                total += clock(thread_clock(tid));
            }
        }
    }
    total
}

/// The CPU-time clock of thread `tid` of this process: Linux encodes it as
/// `(!tid << 3) | CPUCLOCK_PERTHREAD | CPUCLOCK_SCHED`, as glibc's
/// `pthread_getcpuclockid` does for a thread it knows.
fn thread_clock(tid: i32) -> nix::time::ClockId {
    nix::time::ClockId::from_raw((!tid << 3) | 4 | 2)
}

fn clock(id: nix::time::ClockId) -> Duration {
    nix::time::clock_gettime(id).map_or(Duration::ZERO, Duration::from)
}

/// The 1-minute load average.
pub fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

/// Waits (up to `max`) for the 1-minute load average to drop below
/// `threshold`, so that a measurement does not start while something else
/// builds. Returns the load average it started at.
pub fn wait_for_quiet(threshold: f64, max: Duration) -> f64 {
    let end = std::time::Instant::now() + max;
    let mut warned = false;
    loop {
        let l = loadavg();
        if l < threshold || std::time::Instant::now() >= end {
            return l;
        }
        if !warned {
            eprintln!(
                "  (load average {l:.2} ≥ {threshold}: waiting up to {max:?} for it to drop)"
            );
            warned = true;
        }
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// The manifest of a Hetzner plugin named `name`, optionally pointed at a
/// (fake) endpoint, with room for `max_in_flight` HTTP requests.
pub fn manifest(
    name: &str,
    component: &str,
    endpoint: Option<&str>,
    max_in_flight: usize,
) -> String {
    let mut m = format!("name = \"{name}\"\ncomponent = \"{component}\"\n");
    if let Some(endpoint) = endpoint {
        let grant = endpoint.trim_end_matches("/v1");
        m.push_str(&format!(
            "[config]\nendpoint = \"{endpoint}\"\n[secrets]\ntoken = {{ env = \"HCLOUD_TOKEN\" }}\n[http]\nallow = [\"{grant}\"]\n"
        ));
    }
    // Calls at once too (admission per call, default 64): the benchmark
    // measures what a call costs, not how a plugin queues.
    m.push_str(&format!(
        "[limits]\nhttp_max_in_flight = {max_in_flight}\nmax_calls_in_flight = {max_in_flight}\n"
    ));
    m
}

/// A plugin directory with one Hetzner plugin `hetzner` in it.
pub fn one_plugin_dir(endpoint: Option<&str>, max_in_flight: usize) -> Result<tempfile::TempDir> {
    let dir = tempfile::tempdir().context("plugin directory")?;
    std::fs::copy(guests::HETZNER_WASM, dir.path().join("hetzner.wasm"))
        .context("copying the component")?;
    std::fs::write(
        dir.path().join("hetzner.toml"),
        manifest("hetzner", "hetzner.wasm", endpoint, max_in_flight),
    )
    .context("writing the manifest")?;
    Ok(dir)
}

/// Builds a host over `dir` with the benchmark owner id, the compile cache
/// in `cache`, secrets from `token`, the lock file ignored, and checks that
/// every plugin loaded.
pub async fn build_host(dir: &Path, cache: Option<&Path>, token: Option<&str>) -> Result<Host> {
    build_host_with(dir, cache, token, |b| b).await
}

/// [`build_host`] with more settings on the builder.
pub async fn build_host_with(
    dir: &Path,
    cache: Option<&Path>,
    token: Option<&str>,
    more: impl FnOnce(HostBuilder) -> HostBuilder,
) -> Result<Host> {
    let token = token.map(str::to_string);
    let host = more(HostBuilder::new(dir))
        .owner_id(OWNER)
        .cache_dir(cache.map(Path::to_path_buf))
        .work_dir(std::env::temp_dir().join("wasmprov-bench-work"))
        .secret_source(move |name| {
            if name == "HCLOUD_TOKEN" {
                token.clone()
            } else {
                None
            }
        })
        .lock_mode(LockMode::Off)
        .build()
        .await?;
    if let Some(e) = host.errors().first() {
        bail!("a plugin did not load: {e}");
    }
    Ok(host)
}

/// The compile cache shared by the runs that want a warm one.
pub fn warm_cache_dir() -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("cache directory"))
        .path()
        .to_path_buf()
}

/// The runtime fakes and gates run on: their own threads, so the server side
/// is not scheduled on the client's workers (as if it were another process
/// on the same machine).
pub fn server_runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("bench-fake")
            .enable_all()
            .build()
            .expect("server runtime")
    })
}

/// A fake Hetzner Cloud on loopback, on the server runtime.
pub async fn start_fake(max_servers: usize) -> Result<HetznerFake> {
    server_runtime()
        .spawn(async move {
            HetznerFake::start(
                "127.0.0.1:0".parse().expect("loopback address"),
                HetznerFakeOptions {
                    max_servers,
                    boot_delay_polls: 0,
                    ..HetznerFakeOptions::default()
                },
            )
            .await
        })
        .await
        .context("fake task")?
}

/// Appends a custom section named `wasmprov-bench-nonce` holding `nonce` to a
/// component, so that its bytes (and its compile-cache key) differ from every
/// other copy while its code stays the same.
pub fn with_nonce(component: &[u8], nonce: &str) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                return;
            }
            out.push(byte | 0x80);
        }
    }
    let name = b"wasmprov-bench-nonce";
    let mut payload = Vec::new();
    leb(name.len(), &mut payload);
    payload.extend_from_slice(name);
    payload.extend_from_slice(nonce.as_bytes());
    let mut out = component.to_vec();
    out.push(0); // custom section id
    leb(payload.len(), &mut out);
    out.extend_from_slice(&payload);
    out
}

/// Facts about the machine and toolchain, for the report.
#[derive(Clone, Debug)]
pub struct Machine {
    pub cores: usize,
    pub cpu: String,
    /// Whether the CPU has memory protection keys (the `pku` flag in
    /// /proc/cpuinfo), which wasmtime's pooling allocator can use to pack
    /// memory slots; `None` when /proc/cpuinfo lists no flags.
    pub pku: Option<bool>,
    pub memory: String,
    pub kernel: String,
    pub rustc: String,
    pub date: String,
    pub commit: String,
    /// sha256 (first 12 hex digits) of the sources measured: host runtime,
    /// policy, SDK and the Hetzner plugin, so a run can be matched to them.
    pub sources: String,
}

/// Digest of the measured sources (see [`Machine::sources`]).
fn sources_digest() -> String {
    use sha2::Digest;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    for dir in [
        "host/runtime/src",
        "host/policy/src",
        "guest-sdk/src",
        "plugins/hetzner/src",
    ] {
        let mut stack = vec![root.join(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else {
                    files.push(p);
                }
            }
        }
    }
    files.sort();
    let mut h = sha2::Sha256::new();
    for f in &files {
        h.update(
            f.strip_prefix(&root)
                .unwrap_or(f)
                .to_string_lossy()
                .as_bytes(),
        );
        h.update(std::fs::read(f).unwrap_or_default());
    }
    hex::encode(h.finalize())[..12].to_string()
}

impl Machine {
    pub fn probe() -> Self {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map_or_else(|| "unknown".to_string(), |(_, v)| v.trim().to_string());
        let pku = cpuinfo
            .lines()
            .find(|l| l.starts_with("flags"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, flags)| flags.split_whitespace().any(|f| f == "pku"));
        let mem_kib: u64 = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("MemTotal:"))?
                    .split_whitespace()
                    .nth(1)?
                    .parse()
                    .ok()
            })
            .unwrap_or(0);
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map_or_else(|_| "unknown".into(), |s| s.trim().to_string());
        let commit = std::process::Command::new("git")
            .args(["rev-parse", "--short", "HEAD"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map_or_else(
                || "unknown".into(),
                |o| String::from_utf8_lossy(&o.stdout).trim().to_string(),
            );
        let dirty = std::process::Command::new("git")
            .args(["status", "--porcelain", "--untracked-files=no"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .is_some_and(|o| !o.stdout.is_empty());
        Self {
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            cpu,
            pku,
            memory: crate::stats::bytes(mem_kib as f64 * 1024.0),
            kernel,
            rustc: env!("BENCH_RUSTC_VERSION").to_string(),
            date: utc_now(),
            commit: if dirty {
                format!("{commit} (with uncommitted changes)")
            } else {
                commit
            },
            sources: sources_digest(),
        }
    }
}

impl Machine {
    /// `yes`, `no`, or `unknown` for [`Machine::pku`].
    pub fn pku_label(&self) -> &'static str {
        match self.pku {
            Some(true) => "yes",
            Some(false) => "no",
            None => "unknown",
        }
    }
}

/// The current UTC time as `YYYY-MM-DD HH:MM UTC`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nonce_section_is_appended() {
        let base = b"\0asm\x0d\0\x01\0".to_vec();
        let out = with_nonce(&base, "7");
        assert_eq!(&out[..base.len()], &base[..]);
        assert_eq!(out[base.len()], 0);
        assert_eq!(out[base.len() + 1] as usize, 1 + 20 + 1);
        assert!(out.ends_with(b"wasmprov-bench-nonce7"));
    }

    #[test]
    fn proc_readings() {
        assert!(rss_bytes() > 0);
        assert!(utc_now().ends_with("UTC"));
    }
}
