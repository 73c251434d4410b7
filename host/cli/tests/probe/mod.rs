//! The tests crate's probe guest (`tests/guests/probe`), built from source
//! for the CLI's own tests.

use std::path::Path;

/// Builds the probe and installs it in `dir` as plugin `probe` with
/// `manifest` (the manifest text after its name and component).
pub fn install(dir: &Path, manifest: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let probe =
        wasmprov_guest_build::build_guests(&root, &[("wasmprov-test-probe", "tests/guests/probe")])
            .remove(0);
    std::fs::copy(&probe.path, dir.join("probe.wasm")).expect("copy the probe");
    std::fs::write(
        dir.join("probe.toml"),
        format!("name = \"probe\"\ncomponent = \"probe.wasm\"\n{manifest}"),
    )
    .expect("write the probe's manifest");
}
