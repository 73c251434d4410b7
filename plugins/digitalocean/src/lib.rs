//! wasmprov plugin for DigitalOcean Droplets (API v2) on the SDK's `rest` layer: droplets found by
//! tag (labels as flat `key:value` tags), priced from `sizes`, offered as `/v2/sizes` lists them.

pub mod sizes;

use serde::Deserialize;
use serde_json::Value;
use wasmprov_guest::prelude::*;

const TAGS: FlatTags = FlatTags::DIGITALOCEAN;
const STATES: StateTable = StateTable::new(
    &[
        ("new", NodeStatus::Pending, JoinState::Provisioning),
        ("active", NodeStatus::Running, JoinState::Joining),
        ("off", NodeStatus::Stopped, JoinState::Failed),
        ("archive", NodeStatus::Deleted, JoinState::Failed),
    ],
    (NodeStatus::Unknown, JoinState::Provisioning),
);

/// The plugin: configuration read once per instance.
#[derive(Clone, Debug)]
pub struct DigitalOcean {
    endpoint: String,
    token: Secret,
    region: String,
    image: String,
}

/// A droplet as the API returns it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Droplet {
    id: u64,
    status: String,
    size_slug: String,
    region: Value,
    tags: Vec<String>,
    networks: Value,
    created_at: String,
}

/// A size as `/v2/sizes` lists it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ApiSize {
    slug: String,
    available: bool,
    price_hourly: f64,
    regions: Vec<String>,
}

impl DigitalOcean {
    fn size(&self, shape: &NodeShape) -> Result<shape::Choice<'static, sizes::Size>> {
        shape::pick_for(&Criteria::of(shape).or_zone(&self.region), sizes::SIZES)
    }
}

impl RestCloud for DigitalOcean {
    type Node = Droplet;
    const CLOUD: &'static str = "DigitalOcean";
    const PAGING: Paging = Paging::next_url("/links/pages/next");
    const LIST_ITEMS: &'static str = "/droplets";
    const ONE_ITEM: &'static str = "/droplet";
    const ERRORS: &'static [Rule] = &[
        Rule::new(Some(422), "limit", Kind::Quota),
        Rule::new(Some(422), "available", Kind::CapacityInZone),
    ];

    fn list(&self, owner_id: &str, request_id: Option<&str>) -> Result<Request> {
        let (key, value) = request_id.map_or((tags::OWNER, owner_id), |r| (tags::REQUEST, r));
        let url = format!("{}/droplets?per_page=200", self.endpoint);
        Ok(Request::get(url).query("tag_name", &TAGS.encode(key, value)?))
    }
    fn node_url(&self, id: &str) -> Option<String> {
        let id: u64 = id.parse().ok()?;
        Some(format!("{}/droplets/{id}", self.endpoint))
    }
    fn create(&self, request: &ProvisionRequest, labels: &Labels) -> Result<Request> {
        let (id, shape, boot) = (&request.request_id, &request.shape, &request.boot);
        let url = format!("{}/droplets", self.endpoint);
        Ok(Request::post(url).json(&serde_json::json!({
            "name": tags::hostname("wasmprov", id, id.as_bytes()),
            "region": shape.zone.as_deref().unwrap_or(&self.region),
            "size": self.size(shape)?.instance_type.slug,
            "image": boot.image.as_deref().unwrap_or(&self.image),
            "user_data": boot.user_data_text()?,
            "tags": TAGS.encode_all(labels)?,
        })))
    }
    fn authorize(&self, req: Request) -> Result<Request> {
        Ok(req.bearer(self.token.expose()?))
    }
    fn handle(&self, d: &Droplet) -> NodeHandle {
        let ip = |kind: &str| {
            let v4 = d.networks["v4"].as_array()?;
            v4.iter().find(|n| n["type"] == kind)?["ip_address"]
                .as_str()
                .map(Into::into)
        };
        let mut node = NodeHandle {
            provider_id: d.id.to_string(),
            labels: TAGS.decode_all(&d.tags),
            zone: d.region["slug"].as_str().map(Into::into),
            instance_type: Some(d.size_slug.clone()),
            address: ip("private").or_else(|| ip("public")),
            private_address: ip("private"),
            public_address: ip("public"),
            created_at_ms: time::rfc3339_ms(&d.created_at),
            arch: Some(Arch::X86_64),
            ..NodeHandle::default()
        };
        STATES.apply(&d.status, &mut node);
        node
    }
}

impl Provider for DigitalOcean {
    const NAME: &'static str = "digitalocean";
    const BOOT: BootSupport = BootSupport::IMAGE_AND_USER_DATA;

    fn new() -> Result<Self> {
        Ok(Self {
            endpoint: config::url_or("endpoint", "https://api.digitalocean.com/v2")?,
            token: config::secret("token")?,
            region: config::parse_or("region", "nyc3".into())?,
            image: config::parse_or("image", "ubuntu-24-04-x64".into())?,
        })
    }
    fn price_hint(&self, shape: &NodeShape) -> Result<Option<PriceHint>> {
        Ok(Some(self.size(shape)?.price_hint(CapacityType::OnDemand)))
    }
    rest_calls!();

    /// The table's sizes the account can buy now, as `/v2/sizes` lists them.
    fn offerings(&self) -> Result<Vec<Offering>> {
        let first = Request::get(format!("{}/sizes?per_page=200", self.endpoint));
        let sold: Vec<ApiSize> = rest::collect(self, &Wasi, first, "/sizes")?;
        let offering = |size: &sizes::Size| {
            let api = sold.iter().find(|s| s.slug == size.slug && s.available)?;
            let mut offering = size.offering();
            (offering.on_demand_usd, offering.zones) =
                (Some(api.price_hourly), api.regions.clone());
            Some(offering)
        };
        Ok(sizes::SIZES.iter().filter_map(offering).collect())
    }
}

export_provider!(DigitalOcean, capabilities = "capabilities.toml");
