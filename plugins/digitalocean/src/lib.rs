//! wasmprov plugin for DigitalOcean Droplets (API v2) on the SDK's `rest` layer: droplets found by
//! tag (labels as flat `key:value` tags), priced from `sizes`, offered as `/v2/sizes` lists them.

pub mod sizes;

use wasmprov_guest::prelude::*;

const API: &str = "https://api.digitalocean.com/v2";
/// Where a droplet's parts are; its tags and states.
const DROPLET: Fields = Fields {
    tags: tags::Preset::DIGITALOCEAN,
    zone: "/region/slug",
    instance_type: "/size_slug",
    created: "/created_at",
    addresses: "/networks/v4",
    arch: Some(Arch::X86_64),
    ..Fields::COMMON
};
/// Where `/v2/sizes` says what is sold: the sizes, each's slug, hourly price, regions, availability.
const SOLD: Listing =
    Listing::new("/sizes", "/slug", "/price_hourly", "/regions").available("/available");

/// A droplet as the API returns it: now its JSON, read with `rest::handle_of`.
#[deprecated(note = "droplets are serde_json::Value, read with rest::handle_of(d, &DROPLET)")]
pub type Droplet = Value;

/// The plugin: configuration read once per instance.
#[derive(Clone, Debug)]
pub struct DigitalOcean(Settings);

impl RestCloud for DigitalOcean {
    type Node = Value;
    const CLOUD: &'static str = "DigitalOcean";
    const PAGING: Paging = Paging::next_url("/links/pages/next");
    const LIST_ITEMS: &'static str = "/droplets";
    const ONE_ITEM: &'static str = "/droplet";
    const NUMERIC_IDS: Option<&'static str> = Some("droplet");
    const ERRORS: &'static [Rule] = &[
        Rule::new(Some(422), "limit", Kind::Quota),
        Rule::new(Some(422), "available", Kind::CapacityInZone),
    ];

    fn list(&self, owner_id: &str, request_id: Option<&str>) -> Result<Request> {
        let tag = DROPLET.tags.list_selector(owner_id, request_id)?;
        Ok(Request::get(self.0.url("/droplets?per_page=200")).query("tag_name", &tag))
    }
    fn node_url(&self, id: &str) -> Option<String> {
        let id = wasmprov_guest::ids::numeric_id("droplet", id).ok()?;
        Some(self.0.url(&format!("/droplets/{id}")))
    }
    fn create(&self, request: &ProvisionRequest, labels: &Labels) -> Result<Request> {
        let (id, shape, boot) = (&request.request_id, &request.shape, &request.boot);
        Ok(Request::post(self.0.url("/droplets")).json(&json!({
            "name": tags::hostname("wasmprov", id, id.as_bytes()),
            "region": self.0.zone(shape),
            "size": self.0.pick(shape, sizes::SIZES)?.instance_type.name,
            "image": self.0.image(boot),
            "user_data": boot.user_data_text()?,
            "tags": DROPLET.tags.encode_all(labels)?,
        })))
    }
    fn authorize(&self, req: Request) -> Result<Request> {
        self.0.authorize(req)
    }
    fn handle(&self, droplet: &Value) -> NodeHandle {
        rest::handle_of(droplet, &DROPLET)
    }
}

impl Provider for DigitalOcean {
    const NAME: &'static str = "digitalocean";
    const BOOT: BootSupport = BootSupport::IMAGE_AND_USER_DATA;

    fn new() -> Result<Self> {
        Settings::read(API, "nyc3", "ubuntu-24-04-x64").map(Self)
    }
    fn price_hint(&self, shape: &NodeShape) -> Result<Option<PriceHint>> {
        self.0.price_hint(shape, sizes::SIZES)
    }
    rest_calls!();

    /// The table's sizes the account can buy now, as `/v2/sizes` lists them.
    fn offerings(&self) -> Result<Vec<Offering>> {
        let first = Request::get(self.0.url("/sizes?per_page=200"));
        rest::offerings(self, &Wasi, first, &SOLD, sizes::SIZES)
    }
}

export_provider!(DigitalOcean, capabilities = "capabilities.toml");
