//! The fake clouds the suite starts by name, and fakes of any cloud that
//! speak the fake-control protocol ([`remote`]).

pub(crate) mod cloud_init;
pub(crate) mod ec2;
pub(crate) mod hetzner;
mod loopback;
pub(crate) mod refcloud;
pub(crate) mod remote;

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::fake::{Fake, FakeCloud};

/// Starting a fake lives here, beside the fakes, so that `fake.rs` (what
/// every fake is) stays below them.
impl Fake {
    /// Starts the fake. `manifest_config` is the plugin's `[config]`
    /// (the cloud-init stubs read their command paths from it).
    ///
    /// # Errors
    /// When it cannot start; for EC2 when moto is not installed
    /// ([`crate::Unavailable`]).
    pub async fn start(
        &self,
        manifest_config: &BTreeMap<String, String>,
    ) -> anyhow::Result<Arc<dyn FakeCloud>> {
        Ok(match self {
            Self::Hetzner => Arc::new(hetzner::Hetzner::start().await?),
            Self::RefCloud => Arc::new(refcloud::RefCloud::start().await?),
            Self::Ec2 => Arc::new(ec2::Ec2::start().await?),
            Self::CloudInit => Arc::new(cloud_init::CloudInitStub::new(manifest_config)?),
            // Small pages, so that the plugin walks `links.pages.next`.
            Self::DigitalOcean => Arc::new(
                remote::Remote::serving(wasmprov_fake_digitalocean::serve(2).await?).await?,
            ),
        })
    }
}
