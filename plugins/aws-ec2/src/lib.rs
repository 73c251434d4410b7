//! wasmprov provisioner plugin for AWS EC2.
//!
//! Creates, lists and terminates EC2 instances as cluster nodes through the
//! EC2 Query API (`Version=2016-11-15`), every request signed with Signature
//! Version 4 by the `aws-sigv4` crate. Every instance carries the host's
//! owner tag and the request id it was created for, so the cloud is the
//! source of truth: `provision` is idempotent by request id, `describe`
//! lists exactly this owner's instances, and `terminate` never touches an
//! instance without this owner's tag.
//!
//! Prices come from a bundled table ([`catalogue`]), so `price_hint` does no
//! I/O. `offerings` describes the table's types with `DescribeInstanceTypes`
//! and prices them from the table (spot from `DescribeSpotPriceHistory`);
//! `get` asks for the one instance. See the crate's README for the manifest.
//!
//! Module layout: [`settings`] (config keys and credentials), [`catalogue`]
//! (instance types and prices), [`tagging`] (tags, client token, ids),
//! [`sign`] (form encoding and SigV4), [`api`] (XML, state and error
//! mapping) and [`client`] (the operations, over a transport that is
//! `wasi:http` in the component and a script in tests).

pub mod api;
pub mod catalogue;
pub mod client;
pub mod launch;
pub mod network;
pub mod prices;
pub mod pricing;
pub mod settings;
pub mod sign;
pub mod tagging;

use wasmprov_api::{AddressRequest, StableAddress, SubnetCapacity, Target};
use wasmprov_guest::http::{Request, Response};
use wasmprov_guest::{
    BootSupport, CapacityType, Labels, Networking, NodeHandle, NodeShape, Offering, PriceHint,
    Provider, ProvisionRequest, Result, config, log,
};

use crate::client::{ApiRequest, Client, JsonApi, JsonCall, QueryApi, Transport};
use crate::settings::{Credentials, Settings};

/// The AWS EC2 provider.
#[derive(Clone, Debug)]
pub struct Ec2 {
    settings: Settings,
}

impl Ec2 {
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

    /// The price estimate for `shape`, without I/O: the on-demand price of
    /// the type chosen, times `spot_discount` for spot; `None` when the
    /// table has no price for the type in the region.
    ///
    /// # Errors
    /// [`wasmprov_guest::Error::Unsupported`] for shapes no type fits, zones
    /// of other regions and types not allowed by `instance_types`.
    pub fn estimate(&self, shape: &NodeShape) -> Result<Option<PriceHint>> {
        let choice = catalogue::choose(shape, &self.settings)?;
        Ok(choice.hint(shape.capacity_type, self.settings.spot_discount))
    }

    /// A client over `wasi:http`; requires the credentials.
    fn client(&self) -> Result<Client<'_, Wasi>> {
        let creds = Credentials::from_lookup(config::get)?;
        Ok(Client::new(
            &self.settings,
            Wasi {
                endpoint: self.settings.endpoint.clone(),
                region: self.settings.region.clone(),
                ssm_endpoint: self.settings.ssm_endpoint.clone(),
                elb_endpoint: self.settings.elb_endpoint.clone(),
                price_list_endpoint: self.settings.price_list_endpoint.clone(),
                creds,
                started: std::time::Instant::now(),
            },
        ))
    }
}

impl Provider for Ec2 {
    const NAME: &'static str = "aws-ec2";

    /// An image (AMI id), user data and SSH keys per request. One key
    /// becomes a key pair (imported once, named by its digest); several
    /// keys, or one beside a configured `key_name`, go into the user data's
    /// `ssh_authorized_keys`, which must then be a `#cloud-config`.
    const BOOT: BootSupport = BootSupport {
        image: true,
        user_data: true,
        ssh_keys: true,
    };

    /// A request's subnet becomes `SubnetId` (checked first with
    /// `DescribeSubnets`).
    const SUBNET: bool = true;

    /// On-demand and spot.
    fn capacity_types() -> Vec<CapacityType> {
        vec![CapacityType::OnDemand, CapacityType::Spot]
    }

    /// Reads the settings; the credentials are read only by calls that need them.
    fn new() -> Result<Self> {
        Ok(Self::with_settings(Settings::from_lookup(config::get)?))
    }

    fn price_hint(&self, shape: &NodeShape) -> Result<Option<PriceHint>> {
        self.estimate(shape)
    }

    fn provision(&self, owner_id: &str, request: &ProvisionRequest) -> Result<NodeHandle> {
        self.client()?.provision(owner_id, request)
    }

    fn terminate(&self, owner_id: &str, provider_id: &str) -> Result<()> {
        self.client()?.terminate(owner_id, provider_id)
    }

    fn describe(&self, owner_id: &str) -> Result<Vec<NodeHandle>> {
        self.client()?.describe(owner_id)
    }

    fn get(&self, owner_id: &str, provider_id: &str) -> Result<Option<NodeHandle>> {
        self.client()?.get(owner_id, provider_id)
    }

    fn offerings(&self) -> Result<Vec<Offering>> {
        self.client()?.offerings()
    }

    fn set_labels(&self, owner_id: &str, provider_id: &str, labels: &Labels) -> Result<NodeHandle> {
        self.client()?.set_labels(owner_id, provider_id, labels)
    }
}

/// Stable addresses (secondary private IPs, Elastic IPs), ELBv2 target
/// groups and subnet capacity: see [`network`].
impl Networking for Ec2 {
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

/// The component's transport: signed `wasi:http` requests, the host's log.
#[derive(Clone, Debug)]
struct Wasi {
    endpoint: String,
    region: String,
    ssm_endpoint: String,
    elb_endpoint: String,
    price_list_endpoint: Option<String>,
    /// Its `Debug` shows the key id only.
    creds: Credentials,
    /// When the call began, for retry budgets.
    started: std::time::Instant,
}

const USER_AGENT: &str = concat!("wasmprov-plugin-aws-ec2/", env!("CARGO_PKG_VERSION"));

fn send_signed(signed: sign::SignedRequest) -> Result<Response> {
    let mut r = Request::post(signed.url);
    for (k, v) in &signed.headers {
        r = r.header(k.as_str(), v.as_str());
    }
    // Not signed: the signer leaves user-agent out on purpose.
    r = r.header("user-agent", USER_AGENT);
    Ok(r.body(signed.body).send()?)
}

fn now() -> std::time::SystemTime {
    std::time::SystemTime::now()
}

impl Transport for Wasi {
    fn send(&self, req: &ApiRequest) -> Result<Response> {
        let body = sign::form_encode(&req.form());
        let (endpoint, service) = match req.api {
            QueryApi::Ec2 => (&self.endpoint, sign::SERVICE),
            QueryApi::Elb => (&self.elb_endpoint, sign::ELB_SERVICE),
        };
        let signed = sign::sign_form(endpoint, &self.region, service, &self.creds, body, now())?;
        send_signed(signed)
    }

    fn send_json(&self, call: &JsonCall) -> Result<Response> {
        let (endpoint, region, service) = match call.api {
            JsonApi::Ssm => (self.ssm_endpoint.clone(), self.region.clone(), "ssm"),
            JsonApi::Pricing => {
                let endpoint = self.price_list_endpoint.clone().ok_or_else(|| {
                    wasmprov_guest::Error::InvalidConfig(
                        "config key \"price_list_endpoint\" is not set".into(),
                    )
                })?;
                let region = pricing::signing_region(&endpoint);
                (endpoint, region, pricing::SERVICE)
            }
        };
        let signed = sign::sign_json(
            &endpoint,
            &region,
            service,
            call.target,
            &self.creds,
            call.body.clone(),
            now(),
        )?;
        send_signed(signed)
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn sleep_ms(&self, ms: u64) {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }

    /// From the hasher keys std draws from the system's randomness.
    fn jitter(&self) -> f64 {
        use std::hash::{BuildHasher, Hasher};
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u128(self.started.elapsed().as_nanos());
        #[allow(clippy::cast_precision_loss, reason = "53 random bits are plenty")]
        let unit = (h.finish() >> 11) as f64 / (1u64 << 53) as f64;
        unit
    }

    fn info(&self, message: &str, fields: &[(&str, &str)]) {
        log::info_with(message, fields);
    }

    fn now_unix(&self) -> u64 {
        now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

wasmprov_guest::export_provider!(Ec2, networking, capabilities = "capabilities.toml");

#[cfg(test)]
mod tests {
    use super::*;
    use wasmprov_guest::Error;

    #[test]
    fn price_hint_prices_on_demand_and_spot_from_the_table() {
        let p = Ec2::with_settings(Settings::for_region("us-east-1"));
        let h = p
            .price_hint(&NodeShape::new(2.0, 4 << 30))
            .unwrap()
            .unwrap();
        assert_eq!(h.instance_type, "t3a.medium");
        assert_eq!(h.capacity_type, CapacityType::OnDemand);
        assert!((h.hourly_usd - 0.0376).abs() < 1e-12);

        let p = Ec2::with_settings(Settings {
            spot_discount: 0.5,
            ..Settings::for_region("eu-west-1")
        });
        let spot = NodeShape {
            gpu: 1,
            gpu_vendor: Some("nvidia".into()),
            capacity_type: CapacityType::Spot,
            ..NodeShape::default()
        };
        let h = p.price_hint(&spot).unwrap().unwrap();
        assert_eq!(h.instance_type, "g4dn.xlarge");
        assert_eq!(h.capacity_type, CapacityType::Spot);
        assert!((h.hourly_usd - 0.587 * 0.5).abs() < 1e-12);

        // Unknown prices are "none", impossible shapes an error.
        let p = Ec2::with_settings(Settings::for_region("sa-east-1"));
        assert_eq!(p.price_hint(&NodeShape::default()).unwrap(), None);
        let huge = NodeShape::new(512.0, 1 << 40);
        assert!(matches!(p.price_hint(&huge), Err(Error::Unsupported(_))));
        assert_eq!(
            Ec2::capacity_types(),
            [CapacityType::OnDemand, CapacityType::Spot]
        );
        assert_eq!(Ec2::NAME, "aws-ec2");
    }

    #[test]
    fn the_transport_never_prints_the_secret() {
        let w = Wasi {
            endpoint: "https://ec2.us-east-1.amazonaws.com".into(),
            region: "us-east-1".into(),
            ssm_endpoint: "https://ssm.us-east-1.amazonaws.com".into(),
            elb_endpoint: "https://elasticloadbalancing.us-east-1.amazonaws.com".into(),
            price_list_endpoint: None,
            creds: Credentials {
                access_key_id: "AKIDEXAMPLE".into(),
                secret_access_key: "very-secret-key".into(),
                session_token: Some("session-token-value".into()),
            },
            started: std::time::Instant::now(),
        };
        let shown = format!("{w:?}");
        assert!(!shown.contains("very-secret-key"), "{shown}");
        assert!(!shown.contains("session-token-value"), "{shown}");
    }
}

#[cfg(test)]
mod iam_policy {
    /// The README's IAM policy allows every action the plugin calls.
    #[test]
    fn the_readme_policy_allows_every_call() {
        let readme = include_str!("../README.md");
        let start = readme
            .find("### IAM policy")
            .and_then(|i| readme[i..].find("```json").map(|j| i + j + 7))
            .expect("the policy block");
        let end = start + readme[start..].find("```").expect("its end");
        let policy: serde_json::Value =
            serde_json::from_str(&readme[start..end]).expect("the policy is JSON");
        let allowed: Vec<String> = policy["Statement"]
            .as_array()
            .expect("statements")
            .iter()
            .flat_map(|s| match &s["Action"] {
                serde_json::Value::String(a) => vec![a.clone()],
                serde_json::Value::Array(v) => v
                    .iter()
                    .filter_map(|a| a.as_str().map(str::to_string))
                    .collect(),
                _ => vec![],
            })
            .collect();
        // Every Query API action and JSON target the sources name.
        let sources = [
            include_str!("client.rs"),
            include_str!("network.rs"),
            include_str!("pricing.rs"),
            include_str!("lib.rs"),
        ]
        .concat();
        let actions = |constructor: &str, service: &str| -> Vec<String> {
            sources
                .split(constructor)
                .skip(1)
                .filter_map(|rest| rest.split('"').next())
                .map(|a| format!("{service}:{a}"))
                .collect()
        };
        let mut called = actions("ApiRequest::new(\"", "ec2");
        let elb = actions("ApiRequest::elb(\"", "elasticloadbalancing");
        assert_eq!(elb.len(), 3, "{elb:?}");
        called.extend(elb);
        called.push("pricing:GetProducts".into());
        called.push("ec2:CreateTags".into());
        called.sort();
        called.dedup();
        assert!(
            called.contains(&"ec2:RunInstances".to_string()),
            "{called:?}"
        );
        assert!(called.len() >= 9, "{called:?}");
        for action in &called {
            assert!(
                allowed.contains(action),
                "{action} is not in the README's policy"
            );
        }
        for scoped in [
            "aws:RequestTag/wasmprov-owner",
            "aws:ResourceTag/wasmprov-owner",
        ] {
            assert!(readme[start..end].contains(scoped), "{scoped}");
        }
        assert_eq!(wasmprov_guest::tags::OWNER, "wasmprov-owner");
    }
}
