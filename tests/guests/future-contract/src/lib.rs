//! A component exporting `wasmprov:provisioner/provisioner@0.99.0`, to prove
//! the host refuses it with a message naming both versions.
#![allow(unsafe_code, reason = "the generated export glue is unsafe")]

// The export glue only links on wasm (natively, lld refuses the versioned
// export names), so a native `cargo build --workspace` builds an empty crate.
#[cfg(target_arch = "wasm32")]
#[allow(missing_docs, reason = "generated bindings")]
mod wit {
    wit_bindgen::generate!({ path: "wit", world: "provider" });
}

#[cfg(target_arch = "wasm32")]
struct Future;

#[cfg(target_arch = "wasm32")]
impl wit::exports::wasmprov::provisioner::provisioner::Guest for Future {
    fn name() -> String {
        "future".into()
    }
}

#[cfg(target_arch = "wasm32")]
wit::export!(Future with_types_in wit);
