//! The fake clouds the suite starts by name, and fakes of any cloud that
//! speak the fake-control protocol ([`remote`]).

pub(crate) mod cloud_init;
pub(crate) mod ec2;
pub(crate) mod hetzner;
mod loopback;
pub(crate) mod refcloud;
pub(crate) mod remote;
