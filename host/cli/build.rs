//! Embeds the bundled plugins in the binary, so `wasmprov demo` and
//! `wasmprov bundle` work from one self-contained file; and generates the
//! gRPC code of `wasmprov serve` from `proto/wasmprov.proto` with protox, a
//! protobuf compiler in Rust (no `protoc` needed).
//!
//! In a wasmprov checkout the bundled plugins are built from the workspace's
//! source (`plugins/*`). A packaged `wasmprov` crate (crates.io, `cargo
//! install wasmprov`) has no workspace: it carries the components prebuilt
//! in `components/`, put there at package time by `tests/package.sh` and
//! never committed (docs/PACKAGING.md says why).

use std::path::{Path, PathBuf};

/// The constant naming each bundled component in `bundled.rs`, its package
/// and its directory in the workspace. Its file in `components/` is the
/// package's artifact name (`wasmprov_plugin_hetzner.wasm`).
const BUNDLED: &[(&str, &str, &str)] = &[
    ("HETZNER", "wasmprov-plugin-hetzner", "plugins/hetzner"),
    ("AWS_EC2", "wasmprov-plugin-aws-ec2", "plugins/aws-ec2"),
    (
        "CLOUD_INIT",
        "wasmprov-plugin-cloud-init",
        "plugins/cloud-init",
    ),
    (
        "DIGITALOCEAN",
        "wasmprov-plugin-digitalocean",
        "plugins/digitalocean",
    ),
];

fn main() {
    let manifest_dir = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest_dir
        .ancestors()
        .nth(2)
        .filter(|root| {
            BUNDLED
                .iter()
                .all(|(_, _, dir)| root.join(dir).join("Cargo.toml").is_file())
        })
        .map(Path::to_path_buf);
    let (origin, paths) = match workspace {
        Some(root) => {
            let packages: Vec<(&str, &str)> = BUNDLED.iter().map(|(_, p, d)| (*p, *d)).collect();
            let built = wasmprov_guest_build::build_guests(&root, &packages);
            (
                "built from source",
                built.into_iter().map(|b| b.path).collect(),
            )
        }
        None => ("prebuilt, from the package", prebuilt(&manifest_dir)),
    };
    let mut code = String::new();
    for ((konst, package, _), path) in BUNDLED.iter().zip(&paths) {
        code.push_str(&format!(
            "/// The `{package}` component, {origin}.\npub const {konst}: &[u8] = include_bytes!({:?});\n",
            path.display().to_string()
        ));
    }
    let out = Path::new(&std::env::var("OUT_DIR").expect("set by cargo")).join("bundled.rs");
    std::fs::write(out, code).expect("writing bundled.rs");
    generate_grpc();
}

/// The components a packaged crate carries in `components/`.
fn prebuilt(manifest_dir: &Path) -> Vec<PathBuf> {
    let dir = manifest_dir.join("components");
    println!("cargo:rerun-if-changed={}", dir.display());
    BUNDLED
        .iter()
        .map(|(_, package, _)| {
            let path = dir.join(format!("{}.wasm", package.replace('-', "_")));
            assert!(
                path.is_file(),
                "{} is missing: outside a wasmprov checkout the bundled plugins come prebuilt in the package's components/ (tests/package.sh puts them there before `cargo package -p wasmprov`)",
                path.display()
            );
            path
        })
        .collect()
}

/// Writes `wasmprov.v1.rs` (messages, server and client) and
/// `wasmprov_descriptor.bin` (the encoded descriptors) to `OUT_DIR`. The
/// client has no transport of its own, so the binary needs only tonic's
/// server side; the tests hand it a channel.
fn generate_grpc() {
    const PROTO: &str = "proto/wasmprov.proto";
    println!("cargo:rerun-if-changed={PROTO}");
    let fds = match protox::compile([PROTO], ["proto"]) {
        Ok(fds) => fds,
        Err(e) => panic!("{PROTO}: {e}"),
    };
    // The compiled descriptors, for `wasmprov serve`'s server reflection.
    let out =
        Path::new(&std::env::var("OUT_DIR").expect("set by cargo")).join("wasmprov_descriptor.bin");
    std::fs::write(&out, protox::prost::Message::encode_to_vec(&fds))
        .unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
    if let Err(e) = tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .build_transport(false)
        .compile_fds(fds)
    {
        panic!("generating gRPC code from {PROTO}: {e}");
    }
}
