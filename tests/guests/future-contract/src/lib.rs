//! A component exporting `wasmprov:provisioner/provisioner@0.2.0`, to prove
//! the host refuses it with a message naming both versions.
#![allow(unsafe_code, reason = "the generated export glue is unsafe")]

#[allow(missing_docs, reason = "generated bindings")]
mod wit {
    wit_bindgen::generate!({ path: "wit", world: "provider" });
}

struct Future;

impl wit::exports::wasmprov::provisioner::provisioner::Guest for Future {
    fn name() -> String {
        "future".into()
    }
}

wit::export!(Future with_types_in wit);
