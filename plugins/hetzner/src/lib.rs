//! wasmprov provisioner plugin for Hetzner Cloud (API v1).
//!
//! Creates, lists and deletes Hetzner Cloud servers as cluster nodes. Every
//! server carries the host's owner label and the request id it was created
//! for, so the cloud is the source of truth: `provision` is idempotent by
//! request id, `describe` lists exactly this owner's servers, and
//! `terminate` never touches a server without this owner's label.
//!
//! Prices come from a bundled table ([`catalogue`]), so `price_hint` does no
//! I/O and needs no configuration. See the crate's README for the manifest.
//!
//! Module layout: [`settings`] (config keys), [`catalogue`] (server types
//! and prices), [`labels`] (names, labels, selectors), [`api`] (wire format,
//! state and error mapping) and [`client`] (the operations, over a
//! transport that is `wasi:http` in the component and a script in tests).

pub mod api;
pub mod catalogue;
pub mod client;
pub mod labels;
pub mod network;
pub mod settings;

use wasmprov_guest::http::{Request, Response};
use wasmprov_guest::{
    AddressRequest, BootSupport, CapacityType, Labels, Networking, NodeHandle, NodeShape, Offering,
    PriceHint, Provider, ProvisionRequest, Result, StableAddress, SubnetCapacity, Target, config,
    log,
};

use wasmprov_guest::rest;

use crate::client::{Client, Transport};
use crate::settings::Settings;

/// The Hetzner Cloud provider.
#[derive(Clone, Debug)]
pub struct Hetzner {
    settings: Settings,
}

impl Hetzner {
    /// The provider with these settings.
    #[must_use]
    pub fn with_settings(settings: Settings) -> Self {
        Self { settings }
    }

    /// The settings in use.
    #[must_use]
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The price estimate for `shape`, without I/O.
    ///
    /// # Errors
    /// [`wasmprov_guest::Error::Unsupported`] for spot, GPUs, unknown
    /// locations or types and shapes too big; [`wasmprov_guest::Error::Capacity`]
    /// when no fitting type is sold in the location.
    pub fn estimate(&self, shape: &NodeShape) -> Result<PriceHint> {
        let choice = catalogue::choose(shape, &self.settings.location, self.settings.architecture)?;
        Ok(PriceHint {
            hourly_usd: choice.hourly_eur * self.settings.eur_usd,
            capacity_type: CapacityType::OnDemand,
            instance_type: choice.server_type.name.to_string(),
        })
    }

    /// A client over `wasi:http`; requires the `token` secret.
    fn client(&self) -> Result<Client<'_, Wasi>> {
        let token = config::Secret::new("token", config::require("token")?.trim());
        Ok(Client::new(
            &self.settings,
            Wasi {
                endpoint: self.settings.endpoint.clone(),
                token,
            },
        ))
    }
}

impl Provider for Hetzner {
    const NAME: &'static str = "hetzner";

    /// An image, user data and SSH keys per request (keys are registered
    /// in the project once and shared, see `Client::ssh_key_ids`).
    const BOOT: BootSupport = BootSupport::ALL;

    /// A request's subnet is a network id: the server is attached to it at
    /// create (`networks: [id]`), and a network the project lacks is refused.
    const SUBNET: bool = true;

    /// On-demand only: Hetzner Cloud has no spot market.
    fn capacity_types() -> Vec<CapacityType> {
        vec![CapacityType::OnDemand]
    }

    /// Reads the settings; the token is read only by calls that need it.
    fn new() -> Result<Self> {
        Ok(Self::with_settings(Settings::from_lookup(config::get)?))
    }

    fn price_hint(&self, shape: &NodeShape) -> Result<Option<PriceHint>> {
        self.estimate(shape).map(Some)
    }

    fn provision(&self, owner_id: &str, request: &ProvisionRequest) -> Result<NodeHandle> {
        self.client()?.provision(owner_id, request)
    }

    fn terminate(&self, owner_id: &str, provider_id: &str) -> Result<()> {
        self.client()?.terminate(owner_id, provider_id)
    }

    fn offerings(&self) -> Result<Vec<Offering>> {
        Ok(catalogue::offerings(
            &self.settings.location,
            self.settings.architecture,
            self.settings.eur_usd,
        ))
    }

    fn describe(&self, owner_id: &str) -> Result<Vec<NodeHandle>> {
        self.client()?.describe(owner_id)
    }

    fn get(&self, owner_id: &str, provider_id: &str) -> Result<Option<NodeHandle>> {
        self.client()?.get(owner_id, provider_id)
    }

    /// `PUT /servers/{id}` with the labels given plus the ones that say
    /// who made the server and what for.
    fn set_labels(&self, owner_id: &str, provider_id: &str, labels: &Labels) -> Result<NodeHandle> {
        self.client()?.set_labels(owner_id, provider_id, labels)
    }
}

/// Floating IPs, load balancer targets, network capacity ([`network`]).
impl Networking for Hetzner {
    fn assign_address(
        &self,
        owner_id: &str,
        provider_id: &str,
        request: &AddressRequest,
    ) -> Result<StableAddress> {
        self.client()?
            .assign_address(owner_id, provider_id, request)
    }

    fn release_address(&self, owner_id: &str, provider_id: &str, address: &str) -> Result<()> {
        self.client()?
            .release_address(owner_id, provider_id, address)
    }

    fn register_target(&self, owner_id: &str, target: &Target) -> Result<()> {
        self.client()?.register_target(owner_id, target)
    }

    fn deregister_target(&self, owner_id: &str, target: &Target) -> Result<()> {
        self.client()?.deregister_target(owner_id, target)
    }

    fn list_targets(&self, _owner_id: &str, group: &str) -> Result<Vec<Target>> {
        self.client()?.list_targets(group)
    }

    fn subnet_capacity(&self, subnet: &str) -> Result<SubnetCapacity> {
        self.client()?.subnet_capacity(subnet)
    }
}

/// The component's transport: `wasi:http` for the API, the host's log.
#[derive(Clone, Debug)]
struct Wasi {
    endpoint: String,
    /// Never shown by `Debug`.
    token: config::Secret,
}

impl rest::Transport for Wasi {
    fn send(&self, req: Request) -> Result<Response> {
        let url = format!("{}{}", self.endpoint, req.url());
        let req = req
            .with_url(url)
            .bearer(self.token.expose()?)
            .header("accept", "application/json")
            .header(
                "user-agent",
                concat!("wasmprov-plugin-hetzner/", env!("CARGO_PKG_VERSION")),
            );
        Ok(req.send()?)
    }
}

impl Transport for Wasi {
    fn info(&self, message: &str, fields: &[(&str, &str)]) {
        log::info_with(message, fields);
    }

    fn now_unix(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    fn pause(&self, millis: u64) {
        std::thread::sleep(std::time::Duration::from_millis(millis));
    }
}

wasmprov_guest::export_provider!(Hetzner, networking, capabilities = "capabilities.toml");

#[cfg(test)]
mod tests {
    use super::*;
    use wasmprov_guest::Error;

    #[test]
    fn price_hint_needs_no_config_and_converts_to_usd() {
        let p = Hetzner::with_settings(Settings::default());
        let h = p
            .price_hint(&NodeShape::new(2.0, 4 << 30))
            .unwrap()
            .unwrap();
        assert_eq!(h.capacity_type, CapacityType::OnDemand);
        assert_eq!(h.instance_type, "cax11");
        assert!(
            (h.hourly_usd - 0.0060 * 1.08).abs() < 1e-12,
            "{}",
            h.hourly_usd
        );

        let p = Hetzner::with_settings(Settings {
            eur_usd: 1.25,
            location: "ash".into(),
            ..Settings::default()
        });
        let h = p
            .price_hint(&NodeShape::new(4.0, 8 << 30))
            .unwrap()
            .unwrap();
        assert_eq!(h.instance_type, "cpx31");
        assert!((h.hourly_usd - 0.0258 * 1.25).abs() < 1e-12);

        let explicit = NodeShape {
            instance_type: Some("ccx13".into()),
            zone: Some("nbg1".into()),
            ..NodeShape::default()
        };
        let h = p.price_hint(&explicit).unwrap().unwrap();
        assert_eq!(h.instance_type, "ccx13");
        assert!((h.hourly_usd - 0.0198 * 1.25).abs() < 1e-12);
    }

    #[test]
    fn price_hint_refuses_spot_and_gpus() {
        let p = Hetzner::with_settings(Settings::default());
        let spot = NodeShape {
            capacity_type: CapacityType::Spot,
            ..NodeShape::default()
        };
        assert!(matches!(p.price_hint(&spot), Err(Error::Unsupported(_))));
        let gpu = NodeShape {
            gpu: 1,
            gpu_vendor: Some("nvidia".into()),
            ..NodeShape::default()
        };
        assert!(matches!(p.price_hint(&gpu), Err(Error::Unsupported(_))));
        assert_eq!(Hetzner::capacity_types(), [CapacityType::OnDemand]);
        assert_eq!(Hetzner::NAME, "hetzner");
    }

    #[test]
    fn the_transport_never_prints_the_token() {
        let w = Wasi {
            endpoint: "https://api.hetzner.cloud/v1".into(),
            token: config::Secret::new("token", "secret-token"),
        };
        assert!(!format!("{w:?}").contains("secret-token"));
    }
}
