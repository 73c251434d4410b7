//! Host-side bindings of the `wasmprov:provisioner` worlds: the current
//! contract (0.2.0, `wit/`) and the frozen 0.1.0 (`wit/deps/provisioner-0.1.0`),
//! whose plugins still load. `contract` maps both onto the Rust types.

#![allow(missing_docs, reason = "generated bindings")]
#![allow(clippy::all, reason = "generated bindings")]

/// Contract 0.2.0.
pub(crate) mod v02 {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "wasmprov:provisioner/provider@0.2.0",
        imports: {
            "wasmprov:provisioner/exec@0.2.0.run": async | trappable,
            default: trappable,
        },
        exports: { default: async },
        require_store_data_send: true,
        // Every WASI import the world declares (`wasi:cli/imports`) is
        // wasmtime-wasi's own, linked by `wasmtime_wasi::p2::add_to_linker_async`.
        with: {
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
            "wasi:cli": wasmtime_wasi::p2::bindings::cli,
            "wasi:filesystem": wasmtime_wasi::p2::bindings::filesystem,
            "wasi:sockets": wasmtime_wasi::p2::bindings::sockets,
            "wasi:random": wasmtime_wasi::p2::bindings::random,
        },
    });

    pub(crate) use wasmprov::provisioner0_2_0::{exec, log, types};
}

/// Contract 0.1.0, frozen.
pub(crate) mod v01 {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "wasmprov:provisioner/provider@0.1.0",
        imports: {
            "wasmprov:provisioner/exec@0.1.0.run": async | trappable,
            default: trappable,
        },
        exports: { default: async },
        require_store_data_send: true,
        // Every WASI import the world declares (`wasi:cli/imports`) is
        // wasmtime-wasi's own, linked by `wasmtime_wasi::p2::add_to_linker_async`.
        with: {
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
            "wasi:cli": wasmtime_wasi::p2::bindings::cli,
            "wasi:filesystem": wasmtime_wasi::p2::bindings::filesystem,
            "wasi:sockets": wasmtime_wasi::p2::bindings::sockets,
            "wasi:random": wasmtime_wasi::p2::bindings::random,
        },
    });

    pub(crate) use wasmprov::provisioner0_1_0::{exec, log, types};
}
