//! The Extism peer of section 1: the Hetzner plugin's `price_hint` as an
//! Extism 1.30 plugin, measured by its own host binary.
//!
//! Both live in `host/bench/extism-peer`, a workspace of their own outside
//! the project's (Extism 1.30 pins wasmtime 43), so only this benchmark
//! builds them, into `target/extism-peer`. When the peer cannot be built or
//! run, section 1 says why and the run goes on.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use wasmprov_api::PriceHint;

use crate::stats::Summary;

/// The guest's target.
pub const TARGET: &str = "wasm32-unknown-unknown";

/// The Extism version the peer pins (`host/bench/extism-peer/host/Cargo.toml`).
pub const VERSION: &str = "1.30";

/// The built peer: its host binary and its plugin.
#[derive(Clone, Debug)]
pub struct Peer {
    bin: PathBuf,
    wasm: PathBuf,
}

/// What the peer measured.
#[derive(Clone, Copy, Debug)]
pub struct ExtismResults {
    /// A new plugin per call (`Plugin::new_from_compiled` from one
    /// `CompiledPlugin`).
    pub fresh: Summary,
    /// One plugin answering every call.
    pub reused: Summary,
    /// The peer's host-side work natively: the shape to JSON, the pricing
    /// code, the answer to JSON and back.
    pub native_json: Summary,
}

/// The cargo of this build (as `wasmprov-guest-build` runs it), without the
/// outer build's flags and target settings.
fn cargo(dir: &Path, target_dir: &Path) -> Command {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(dir).env("CARGO_TARGET_DIR", target_dir);
    wasmprov_guest_build::without_outer_build(&mut cmd);
    cmd
}

/// Adds the guest's target with rustup when `rustup target list
/// --installed` lacks it (and says so). Without rustup the build is tried
/// as is.
fn ensure_target() -> Result<(), String> {
    let Ok(out) = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
    else {
        return Ok(());
    };
    if !out.status.success()
        || String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.trim() == TARGET)
    {
        return Ok(());
    }
    println!("  the Extism peer's guest needs the {TARGET} target: rustup target add {TARGET}");
    let status = Command::new("rustup")
        .args(["target", "add", TARGET])
        .status()
        .map_err(|e| format!("running rustup target add {TARGET}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("rustup target add {TARGET} failed ({status})"))
    }
}

/// Builds the peer (release; the guest for [`TARGET`]) into
/// `target/extism-peer` under `root`.
pub fn build(root: &Path) -> Result<Peer, String> {
    let dir = root.join("host").join("bench").join("extism-peer");
    if !dir.join("Cargo.toml").exists() {
        return Err(format!("{} is missing", dir.display()));
    }
    let target_dir = root.join("target").join("extism-peer");
    ensure_target()?;
    println!(
        "  building the Extism peer (host/bench/extism-peer, into target/extism-peer; the first build compiles wasmtime 43, minutes) …"
    );
    for (what, guest, args) in [
        (
            "its plugin",
            true,
            &[
                "build",
                "-q",
                "--release",
                "--locked",
                "--target",
                TARGET,
                "-p",
                "extism-peer-guest",
            ][..],
        ),
        (
            "its host",
            false,
            &["build", "-q", "--release", "--locked", "-p", "extism-peer"][..],
        ),
    ] {
        let mut cmd = cargo(&dir, &target_dir);
        if guest {
            // The same guest profile as the wasmprov plugins it is compared with.
            wasmprov_guest_build::guest_profile(&mut cmd);
        }
        let status = cmd
            .args(args)
            .status()
            .map_err(|e| format!("running cargo to build {what}: {e}"))?;
        if !status.success() {
            return Err(format!(
                "building {what} failed ({status}; reproduce with `cargo {}` in host/bench/extism-peer)",
                args.join(" ")
            ));
        }
    }
    let peer = Peer {
        bin: target_dir.join("release").join("extism-peer"),
        wasm: target_dir
            .join(TARGET)
            .join("release")
            .join("extism_peer_guest.wasm"),
    };
    for p in [&peer.bin, &peer.wasm] {
        if !p.exists() {
            return Err(format!("built, but {} is missing", p.display()));
        }
    }
    Ok(peer)
}

fn summary(v: &serde_json::Value, key: &str) -> Result<Summary, String> {
    let s = &v[key];
    let f = |k: &str| {
        s[k].as_f64()
            .ok_or_else(|| format!("the peer's output has no {key}.{k}"))
    };
    Ok(Summary {
        n: f("n")? as usize,
        p50: f("p50")?,
        p90: f("p90")?,
        p99: f("p99")?,
    })
}

/// Runs the peer: `n` timed calls each way (at most `max` each), as section
/// 1 times the wasmprov host. Returns its figures and its answer.
pub fn measure(peer: &Peer, n: usize, max: Duration) -> Result<(ExtismResults, PriceHint), String> {
    let out = Command::new(&peer.bin)
        .arg(&peer.wasm)
        .args(["--samples", &n.to_string()])
        .args(["--max-secs", &max.as_secs_f64().to_string()])
        .output()
        .map_err(|e| format!("starting {}: {e}", peer.bin.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "the peer failed ({}): {}",
            out.status,
            err.trim().lines().last().unwrap_or("no message")
        ));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("reading the peer's output: {e}"))?;
    let answer: PriceHint = serde_json::from_value(v["answer"].clone())
        .map_err(|e| format!("reading the peer's answer: {e}"))?;
    Ok((
        ExtismResults {
            fresh: summary(&v, "fresh")?,
            reused: summary(&v, "reused")?,
            native_json: summary(&v, "native_json")?,
        },
        answer,
    ))
}
