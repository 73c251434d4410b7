//! The benchmark's options: the command line, and where the report goes.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

/// Options of a run.
#[derive(Clone, Debug)]
pub struct Config {
    /// Smaller counts and sizes (a smoke run).
    pub quick: bool,
    /// Where the report goes.
    pub out: PathBuf,
    /// Whether to profile (needs `perf`).
    pub profile: bool,
    /// Whether section 1 builds and measures the Extism peer
    /// (`host/bench/extism-peer`).
    pub extism: bool,
    /// Run only this section (1–5, or 6 for the profile) and write nothing.
    pub only: Option<u8>,
}

const USAGE: &str = "\
wasmprov-bench: benchmarks of the wasmprov host against native baselines.

USAGE: cargo run --release -p wasmprov-bench [-- OPTIONS]

OPTIONS:
  --quick        smoke run (~30 s): smaller counts; writes target/BENCHMARKS.quick.md
  --out PATH     write the report to PATH (default: docs/BENCHMARKS.md, or
                 target/BENCHMARKS.quick.md with --quick)
  --no-profile   skip the perf profile
  --no-extism    skip the Extism peer of section 1 (built from
                 host/bench/extism-peer into target/extism-peer)
  --only N       run only section N (1-5, 8; 6 = profile), print it, write nothing
  -h, --help     this text
";

/// The workspace root (two levels above this crate).
pub(crate) fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map_or_else(|| PathBuf::from("."), PathBuf::from)
}

pub(crate) fn parse_args(args: &[String]) -> Result<Option<Config>> {
    let mut quick = false;
    let mut out = None;
    let mut profile = true;
    let mut extism = true;
    let mut only = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--quick" => quick = true,
            "--out" => out = Some(PathBuf::from(it.next().context("--out needs a path")?)),
            "--no-profile" => profile = false,
            "--no-extism" => extism = false,
            "--only" => only = Some(it.next().context("--only needs a section")?.parse()?),
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(None);
            }
            other => bail!("unknown option {other:?}\n\n{USAGE}"),
        }
    }
    let out = out.unwrap_or_else(|| {
        if quick {
            workspace_root().join("target").join("BENCHMARKS.quick.md")
        } else {
            workspace_root().join("docs").join("BENCHMARKS.md")
        }
    });
    Ok(Some(Config {
        quick,
        out,
        profile,
        extism,
        only,
    }))
}
