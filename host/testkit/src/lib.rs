//! Test a wasmprov provisioner plugin under the real sandbox, without a real
//! cloud and without trusting the plugin.
//!
//! - [`Suite`]: the conformance suite (`wasmprov test` runs the same), through
//!   the real host: the plugin's HTTP goes to a [`Fake`] cloud (or a
//!   [`cassette`]), its exec to stubs, with [`faults`] injected.
//! - [`fake`]: the fake clouds and what the suite needs of them.
//! - [`cassette`]: record a plugin's HTTP against any endpoint, replay it
//!   offline.
//! - [`build_component`]: builds a plugin crate to a component from a test.

pub mod cassette;
pub mod fake;
mod fakes;
pub mod faults;
mod harness;
pub mod report;
mod suite;

pub use fake::{
    Fake, FakeCloud, NetworkTruth, NodeRecord, TruthAddress, TruthGroup, TruthNode, TruthSubnet,
};
pub use faults::{FaultKind, FaultSpec};
pub use report::{Report, RuleResult, Status};
pub use suite::{MAX_ATTEMPTS, OWNER_LABEL, REQUEST_LABEL, Suite};

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context as _;

/// Builds the plugin crate in `crate_dir` for `wasm32-wasip2` in release
/// mode and returns the path of its component. The build goes to
/// `<crate_dir>/target/wasm-component` (or `$CARGO_TARGET_DIR/wasm-component`),
/// apart from the test's own target directory.
///
/// # Errors
/// When the crate cannot be read or does not build; the message says how
/// to reproduce the build.
pub fn build_component(crate_dir: impl AsRef<Path>) -> anyhow::Result<PathBuf> {
    let crate_dir = crate_dir.as_ref();
    let manifest_path = crate_dir.join("Cargo.toml");
    let manifest: toml::Table = toml::from_str(
        &std::fs::read_to_string(&manifest_path)
            .with_context(|| format!("reading {}", manifest_path.display()))?,
    )
    .with_context(|| format!("parsing {}", manifest_path.display()))?;
    let package = manifest
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(|n| n.as_str())
        .with_context(|| format!("{} has no package name", manifest_path.display()))?;
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| crate_dir.join("target"), PathBuf::from)
        .join("wasm-component");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(crate_dir)
        .args(["build", "--release", "--lib", "--target", "wasm32-wasip2"])
        .arg("--manifest-path")
        .arg(&manifest_path)
        .env("CARGO_TARGET_DIR", &target_dir);
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_TARGET_WASM32_WASIP2_RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd.status().context("running cargo")?;
    if !status.success() {
        anyhow::bail!(
            "building {package} for wasm32-wasip2 failed; reproduce with: cargo build --release --lib --target wasm32-wasip2 --manifest-path {} (is the target installed? rustup target add wasm32-wasip2)",
            manifest_path.display()
        );
    }
    let wasm = target_dir
        .join("wasm32-wasip2")
        .join("release")
        .join(format!("{}.wasm", package.replace('-', "_")));
    if !wasm.is_file() {
        anyhow::bail!(
            "the build of {package} produced no {}: is its crate-type cdylib?",
            wasm.display()
        );
    }
    Ok(wasm)
}

/// The fake asked for cannot run on this machine (moto not installed, say);
/// suites report it rather than fail.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);
