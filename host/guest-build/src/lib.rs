//! Compiles guest crates of this workspace to `wasm32-wasip2` components from
//! a build script, so tests and the CLI use components built from source.
//!
//! The guests build in release mode into `target/wasm-guests` (one shared
//! target directory, separate from the host's so the nested cargo does not
//! wait on the outer one's lock).

use std::path::{Path, PathBuf};
use std::process::Command;

/// A built guest component.
#[derive(Clone, Debug)]
pub struct Built {
    /// The package name.
    pub package: String,
    /// Path of the `.wasm` component.
    pub path: PathBuf,
}

/// Removes from `cmd` what a build script's environment says about the
/// outer build (its flags, target, wrappers and jobserver), so that a cargo
/// run from it builds guests with their own settings.
pub fn without_outer_build(cmd: &mut Command) -> &mut Command {
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_MAKEFLAGS",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC_WRAPPER",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_WASM32_WASIP2_RUSTFLAGS",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

/// Sets the release profile guests are built with on `cmd` (a cargo
/// command): link-time optimization across the crate graph, in one codegen
/// unit. The host compiles and runs the result, so the guest's code speed is
/// every call's; measured on the Hetzner plugin against the default
/// release profile, a fresh `price_hint` costs about 2.5 % less CPU, a
/// provision no measurably different (`docs/BENCHMARKS.md`, analysis). Set
/// through cargo's environment so that it applies to guests only: the
/// host's release builds (the benchmark, the CLI) keep the workspace's
/// profile.
pub fn guest_profile(cmd: &mut Command) -> &mut Command {
    cmd.envs(GUEST_PROFILE.iter().copied())
}

/// The cargo environment of [`guest_profile`].
const GUEST_PROFILE: [(&str, &str); 2] = [
    ("CARGO_PROFILE_RELEASE_LTO", "fat"),
    ("CARGO_PROFILE_RELEASE_CODEGEN_UNITS", "1"),
];

/// Builds `packages` (package names of workspace members) and returns the
/// component of each. Prints `cargo:rerun-if-changed` for their sources, the
/// guest SDK and the WIT contract.
///
/// # Panics
/// When the build fails: a build script has no better way to report it, and
/// the message says how to reproduce the build by hand.
#[must_use]
pub fn build_guests(workspace_root: &Path, packages: &[(&str, &str)]) -> Vec<Built> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target_dir = workspace_root.join("target").join("wasm-guests");
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root)
        .arg("build")
        .arg("--release")
        .arg("--target")
        .arg("wasm32-wasip2")
        .env("CARGO_TARGET_DIR", &target_dir);
    for (package, _) in packages {
        cmd.arg("-p").arg(package);
    }
    without_outer_build(&mut cmd);
    guest_profile(&mut cmd);
    let status = cmd
        .status()
        .unwrap_or_else(|e| panic!("running cargo for guests: {e}"));
    assert!(
        status.success(),
        "building guest components failed; reproduce with: {} cargo build --release --target wasm32-wasip2 {} (is the target installed? rustup target add wasm32-wasip2)",
        GUEST_PROFILE
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" "),
        packages
            .iter()
            .map(|(p, _)| format!("-p {p}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    // Guest link flags (initial memory) live in the workspace's cargo config.
    println!(
        "cargo:rerun-if-changed={}",
        workspace_root.join(".cargo").join("config.toml").display()
    );
    for dir in ["guest-sdk", "wit", "host/api"] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace_root.join(dir).display()
        );
    }
    packages
        .iter()
        .map(|(package, dir)| {
            println!(
                "cargo:rerun-if-changed={}",
                workspace_root.join(dir).display()
            );
            let file = format!("{}.wasm", package.replace('-', "_"));
            let path = target_dir.join("wasm32-wasip2").join("release").join(file);
            assert!(
                path.exists(),
                "guest {package} built but {} is missing",
                path.display()
            );
            Built {
                package: (*package).to_string(),
                path,
            }
        })
        .collect()
}

/// The world a Rust plugin built on the guest SDK targets (one that also
/// registers `networking` targets [`NETWORKED_WORLD`]).
pub const WORLD: &str = "wasmprov:provisioner/provider@0.3.0";

/// The world of a plugin that also exports the contract's `networking`.
pub const NETWORKED_WORLD: &str = "wasmprov:provisioner/networked-provider@0.3.0";

/// The world the Python and JavaScript plugins are built for, as their
/// tools name it: still contract 0.2.0 (the host maps it onto 0.3).
pub const SCRIPT_WORLD: &str = "wasmprov:provisioner/provider@0.2.0";

fn run_tool(what: &str, cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{what}: {e} (tests/setup.sh installs it)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({})\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Embeds `src/capabilities.toml`, when there is one, in the component at
/// `out` (what `wasmprov declare` does for authors).
fn declare(src: &Path, out: &Path) -> Result<(), String> {
    let file = src.join(wasmprov_policy::requests::FILE);
    let Ok(text) = std::fs::read_to_string(&file) else {
        return Ok(());
    };
    let bytes = std::fs::read(out).map_err(|e| format!("reading {}: {e}", out.display()))?;
    let declared = wasmprov_policy::requests::embed(&bytes, &text)
        .map_err(|e| format!("{}: {e}", file.display()))?;
    std::fs::write(out, declared).map_err(|e| format!("writing {}: {e}", out.display()))
}

/// Builds a Python plugin with componentize-py: `app.py` (the module whose
/// `Provisioner` class is the export) in `src`, against the contract in
/// `wit`, into `out`, with `src/capabilities.toml` declared in it.
///
/// # Errors
/// The tool's output when it is missing or fails.
pub fn build_python(wit: &Path, src: &Path, out: &Path) -> Result<(), String> {
    build_python_with(wit, &[], src, out)
}

/// [`build_python`] with more directories of Python packages the plugin
/// imports, such as the Python SDK's (`guest-sdk/python`, whose
/// `wasmprov_sdk` package the reference plugin is written on).
///
/// # Errors
/// The tool's output when it is missing or fails.
pub fn build_python_with(
    wit: &Path,
    packages: &[&Path],
    src: &Path,
    out: &Path,
) -> Result<(), String> {
    let mut cmd = Command::new("componentize-py");
    cmd.arg("-d")
        .arg(wit)
        .args(["-w", SCRIPT_WORLD, "componentize", "app", "-p"])
        .arg(src);
    for dir in packages {
        cmd.arg("-p").arg(dir);
    }
    run_tool(
        "componentize-py",
        cmd.arg("-o").arg(out).env("PYTHONDONTWRITEBYTECODE", "1"),
    )?;
    declare(src, out)
}

/// Builds a JavaScript plugin with ComponentizeJS (the engine of `jco
/// componentize`), installed in `src/node_modules` by `npm install`: `app.js` in
/// `src` (exporting `provisioner`), against `wit`, into `out`.
///
/// # Errors
/// The tool's output when it is missing or fails.
pub fn build_js(wit: &Path, src: &Path, out: &Path) -> Result<(), String> {
    run_tool(
        "componentize-js",
        Command::new(src.join("node_modules/.bin/componentize-js"))
            .current_dir(src)
            .arg("app.js")
            .arg("--wit")
            .arg(wit)
            .args(["--world-name", SCRIPT_WORLD, "-o"])
            .arg(out),
    )?;
    declare(src, out)
}
