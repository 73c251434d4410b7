//! Builds the Hetzner plugin from source; the example embeds its component.

use std::path::Path;

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let root = Path::new(&manifest_dir)
        .ancestors()
        .nth(2)
        .expect("examples/autoscaler is two levels below the workspace root");
    let built =
        wasmprov_guest_build::build_guests(root, &[("wasmprov-plugin-hetzner", "plugins/hetzner")]);
    let out = Path::new(&std::env::var("OUT_DIR").expect("set by cargo")).join("hetzner.rs");
    std::fs::write(
        out,
        format!(
            "/// The Hetzner plugin component, built from source.\npub const HETZNER: &[u8] = include_bytes!({:?});\n",
            built[0].path.display().to_string()
        ),
    )
    .expect("writing hetzner.rs");
}
