//! Host-side bindings of the `wasmprov:provisioner` worlds: the current
//! contract (0.3.0, `wit/`, with its optional `networking` export) and the
//! frozen 0.2.0 and 0.1.0 (`wit/deps/`), whose plugins still load.
//! `contract` maps each onto the Rust types.

#![allow(missing_docs, reason = "generated bindings")]
#![allow(clippy::all, reason = "generated bindings")]

/// Contract 0.3.0: the `provider` world (what every 0.3 plugin exports).
pub(crate) mod v03 {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "wasmprov:provisioner/provider@0.3.0",
        imports: {
            "wasmprov:provisioner/exec@0.3.0.run": async | trappable,
            "wasmprov:provisioner/http@0.3.0.send": async | trappable,
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

    pub(crate) use wasmprov::provisioner0_3_0::{exec, http, log, types};
}

/// Contract 0.3.0's optional export: the `networked-provider` world, of
/// which only the `networking` export is used (its imports and types are
/// [`v03`]'s). A plugin exports it or not; `contract` looks it up per
/// component.
pub(crate) mod v03_net {
    wasmtime::component::bindgen!({
        path: "wit",
        world: "wasmprov:provisioner/networked-provider@0.3.0",
        exports: { default: async },
        require_store_data_send: true,
        with: {
            "wasi:http": wasmtime_wasi_http::p2::bindings::http,
            "wasi:io": wasmtime_wasi::p2::bindings::io,
            "wasi:clocks": wasmtime_wasi::p2::bindings::clocks,
            "wasi:cli": wasmtime_wasi::p2::bindings::cli,
            "wasi:filesystem": wasmtime_wasi::p2::bindings::filesystem,
            "wasi:sockets": wasmtime_wasi::p2::bindings::sockets,
            "wasi:random": wasmtime_wasi::p2::bindings::random,
            "wasi:config": super::v03::wasi::config,
            "wasmprov:provisioner/types@0.3.0": super::v03::wasmprov::provisioner0_3_0::types,
            "wasmprov:provisioner/exec@0.3.0": super::v03::wasmprov::provisioner0_3_0::exec,
            "wasmprov:provisioner/log@0.3.0": super::v03::wasmprov::provisioner0_3_0::log,
            "wasmprov:provisioner/http@0.3.0": super::v03::wasmprov::provisioner0_3_0::http,
        },
    });

    pub(crate) use exports::wasmprov::provisioner0_3_0::networking;
}

/// Contract 0.2.0, frozen.
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
