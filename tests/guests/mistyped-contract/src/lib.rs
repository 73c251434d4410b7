//! A component exporting `wasmprov:provisioner/provisioner@0.3.0` with the
//! current contract's function names but `price-hint` of the wrong type, to
//! prove the host refuses it at load (it type-checks every export once
//! there, and each call only the function it calls).
#![allow(unsafe_code, reason = "the generated export glue is unsafe")]

// The export glue only links on wasm (natively, lld refuses the versioned
// export names), so a native `cargo build --workspace` builds an empty crate.
#[cfg(target_arch = "wasm32")]
#[allow(missing_docs, reason = "generated bindings")]
mod wit {
    wit_bindgen::generate!({ path: "wit", world: "provider" });
}

#[cfg(target_arch = "wasm32")]
struct Mistyped;

#[cfg(target_arch = "wasm32")]
impl wit::exports::wasmprov::provisioner::provisioner::Guest for Mistyped {
    fn name() -> String {
        "mistyped".into()
    }
    fn capacity_types() -> Vec<wit::exports::wasmprov::provisioner::provisioner::CapacityType> {
        vec![wit::exports::wasmprov::provisioner::provisioner::CapacityType::OnDemand]
    }
    fn price_hint(_shape: String) -> Option<u32> {
        Some(1)
    }
    fn provision() -> u32 {
        0
    }
    fn terminate() -> u32 {
        0
    }
    fn describe() -> u32 {
        0
    }
    fn get() -> u32 {
        0
    }
    fn offerings() -> u32 {
        0
    }
    fn set_labels() -> u32 {
        0
    }
}

#[cfg(target_arch = "wasm32")]
wit::export!(Mistyped with_types_in wit);
