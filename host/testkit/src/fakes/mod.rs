//! The fake clouds the suite starts by name.

pub(crate) mod cloud_init;
pub(crate) mod ec2;
pub(crate) mod hetzner;
pub(crate) mod refcloud;
