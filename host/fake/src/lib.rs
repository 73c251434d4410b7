//! In-process fakes of cloud provider APIs, so that wasmprov's provisioner
//! plugins and host can be tested end to end without real accounts, real
//! money or network access.
//!
//! Each fake is a real HTTP server bound to a loopback address that speaks the
//! provider's wire format (JSON bodies, status codes, error envelopes,
//! pagination, rate-limit headers) and keeps state, so a plugin can create,
//! list, poll and delete resources against it exactly as it would against the
//! provider. Faults can be injected to exercise retry and error paths.
//!
//! Provided: [`hetzner`] (Hetzner Cloud API v1), whose items are also
//! re-exported at the crate root, and [`refcloud`] (the reference cloud that
//! plugin authors start from), whose main types are re-exported at the crate
//! root. For any other cloud, [`kit`] turns a handful of axum handlers into
//! a fake the conformance suite reads through the fake-control protocol
//! ([`control`]), as it reads a fake written in any other language.

pub mod control;
pub mod hetzner;
pub mod kit;
pub mod refcloud;

mod wire;

pub use hetzner::*;
pub use refcloud::{RefCloudFake, RefCloudFakeOptions, RefFault, RefNode};
