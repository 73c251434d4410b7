//! Builds the bundled plugins from source and embeds them in the binary, so
//! `wasmprov demo` and `wasmprov bundle` work from one self-contained file;
//! and generates the gRPC code of `wasmprov serve` from
//! `proto/wasmprov.proto` with protox, a protobuf compiler in Rust (no
//! `protoc` needed).

use std::path::Path;

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
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let root = Path::new(&manifest_dir)
        .ancestors()
        .nth(2)
        .expect("host/cli is two levels below the workspace root");
    let packages: Vec<(&str, &str)> = BUNDLED.iter().map(|(_, p, d)| (*p, *d)).collect();
    let built = wasmprov_guest_build::build_guests(root, &packages);
    let mut code = String::new();
    for ((konst, _, _), b) in BUNDLED.iter().zip(&built) {
        code.push_str(&format!(
            "/// The `{}` component, built from source.\npub const {konst}: &[u8] = include_bytes!({:?});\n",
            b.package,
            b.path.display().to_string()
        ));
    }
    let out = Path::new(&std::env::var("OUT_DIR").expect("set by cargo")).join("bundled.rs");
    std::fs::write(out, code).expect("writing bundled.rs");
    generate_grpc();
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
