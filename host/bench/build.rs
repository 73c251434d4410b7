//! Builds the Hetzner plugin component from source with
//! `wasmprov-guest-build` and names its path in a generated constant, so the
//! benchmarks always measure the component of the current sources.

use std::path::Path;

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let root = Path::new(&manifest_dir)
        .ancestors()
        .nth(2)
        .expect("host/bench is two levels below the workspace root");
    let built = wasmprov_guest_build::build_guests(
        root,
        &[
            ("wasmprov-plugin-hetzner", "plugins/hetzner"),
            (
                "wasmprov-test-buggy-refcloud",
                "tests/guests/buggy-refcloud",
            ),
        ],
    );
    let code = format!(
        "/// The `wasmprov-plugin-hetzner` component, built from source.\npub const HETZNER_WASM: &str = {:?};\n\
         /// The reference cloud's provisioner in Rust (`buggy-refcloud`, no bug unless configured).\npub const REFCLOUD_WASM: &str = {:?};\n",
        built[0].path.display().to_string(),
        built[1].path.display().to_string()
    );
    let out = Path::new(&std::env::var("OUT_DIR").expect("set by cargo")).join("guests.rs");
    std::fs::write(out, code).expect("writing guests.rs");

    // The compiler that built the benchmarks, for the report.
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = std::process::Command::new(rustc)
        .arg("-V")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=BENCH_RUSTC_VERSION={version}");
}
