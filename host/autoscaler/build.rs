//! Generates the cluster-autoscaler `externalgrpc` service (server and
//! client, no transport) and the Kubernetes `v1.Node`/`v1.Pod` subset from
//! `proto/` with protox, a protobuf compiler in Rust (no `protoc` needed;
//! the google well-known types are built into it). Every map is a
//! `BTreeMap`, so encoded messages are deterministic.

use std::path::Path;

fn main() {
    const PROTOS: [&str; 2] = ["proto/externalgrpc.proto", "proto/k8s.proto"];
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={proto}");
    }
    println!("cargo:rerun-if-changed=proto");
    let fds = match protox::compile(PROTOS, ["proto"]) {
        Ok(fds) => fds,
        Err(e) => panic!("compiling {PROTOS:?}: {e}"),
    };
    // The encoded descriptors, for server reflection.
    let out = Path::new(&std::env::var("OUT_DIR").expect("set by cargo"))
        .join("externalgrpc_descriptor.bin");
    std::fs::write(&out, protox::prost::Message::encode_to_vec(&fds))
        .unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
    if let Err(e) = tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .build_transport(false)
        // Maps as `BTreeMap`: prost encodes entries in the map's iteration
        // order, so the template node's bytes are the same on every call
        // (and in key order, as Go's generated `Marshal` writes them).
        .btree_map(".")
        .compile_fds(fds)
    {
        panic!("generating gRPC code from {PROTOS:?}: {e}");
    }
}
