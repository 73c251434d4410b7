//! What a wasmprov plugin may do, decided in plain Rust.
//!
//! Everything here is deny-by-default and free of any WebAssembly runtime, so
//! it can be read and table-tested on its own; the host wires it in:
//! - [`http`]: which outgoing HTTP requests pass (the host's send hook asks it);
//! - [`exec`]: which programs run with which arguments (the host's exec asks it);
//! - [`limits`]: memory, time and concurrency limits and their defaults;
//! - [`manifest`]: the operator's `NAME.toml`, which holds all of the above;
//! - [`secrets`]: where a secret's value comes from (env, file, command, the AWS chain);
//! - [`danger`]: grants flagged DANGEROUS (host credentials, wide wildcards, shells…);
//! - [`requests`]: what a plugin declares it needs, compared with what it is granted;
//! - [`trust`]: the plugin directory's settings (trusted signing keys);
//! - [`text`]: how text from a plugin is shown to a person (escaped, cut).

#![warn(missing_docs)]

pub mod danger;
pub mod exec;
pub mod http;
pub mod limits;
pub mod manifest;
pub mod requests;
pub mod secrets;
pub mod text;
pub mod trust;

pub use exec::{ExecDenial, ExecGrant, ExecPolicy};
pub use http::{Destination, HttpDenial, HttpGrant, HttpPolicy};
pub use limits::Limits;
#[allow(deprecated, reason = "re-exported for readers of 0.1")]
pub use manifest::SecretSpec;
pub use manifest::{Manifest, ManifestError};
pub use secrets::SecretSource;
