//! Builds every guest the tests use from source, and names each artifact in
//! a generated constant. A directory under `guests/` that is not listed here
//! fails the build, so no test program goes unbuilt.

use std::path::Path;

const GUESTS: &[(&str, &str, &str)] = &[
    ("PROBE", "wasmprov-test-probe", "tests/guests/probe"),
    (
        "FUTURE_CONTRACT",
        "wasmprov-test-future-contract",
        "tests/guests/future-contract",
    ),
    ("HETZNER", "wasmprov-plugin-hetzner", "plugins/hetzner"),
];

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let root = Path::new(&manifest_dir)
        .parent()
        .expect("tests/ is inside the workspace");
    let guests_dir = Path::new(&manifest_dir).join("guests");
    for entry in std::fs::read_dir(&guests_dir).expect("tests/guests exists") {
        let entry = entry.expect("readable");
        let rel = format!("tests/guests/{}", entry.file_name().to_string_lossy());
        assert!(
            GUESTS.iter().any(|(_, _, dir)| *dir == rel),
            "{rel} is not listed in tests/build.rs; every test guest must be built and named"
        );
    }
    println!("cargo:rerun-if-changed={}", guests_dir.display());
    let packages: Vec<(&str, &str)> = GUESTS.iter().map(|(_, p, d)| (*p, *d)).collect();
    let built = wasmprov_guest_build::build_guests(root, &packages);
    let mut code = String::new();
    for ((konst, _, _), b) in GUESTS.iter().zip(&built) {
        code.push_str(&format!(
            "/// Component of `{}`, built from source.\npub const {konst}: &str = {:?};\n",
            b.package,
            b.path.display().to_string()
        ));
    }
    let out = Path::new(&std::env::var("OUT_DIR").expect("set by cargo")).join("guests.rs");
    std::fs::write(out, code).expect("writing guests.rs");
}
