//! Host-side bindings of the `wasmprov:provisioner` world.

#![allow(missing_docs, reason = "generated bindings")]
#![allow(clippy::all, reason = "generated bindings")]

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "wasmprov:provisioner/provider",
    imports: {
        "wasmprov:provisioner/exec.run": async | trappable,
        default: trappable,
    },
    exports: { default: async },
    require_store_data_send: true,
    with: {
        "wasi:http": wasmtime_wasi_http::p2::bindings::http,
        "wasi:io": wasmtime_wasi::p2::bindings::io,
        "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
    },
});

pub(crate) use wasmprov::provisioner::{exec, log, types};
