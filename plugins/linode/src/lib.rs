//! wasmprov plugin for Linode (API v4) on the SDK's `rest` layer: instances found by tag (labels
//! as Linode's 3–50 character tags, long ids in the SDK's hashed form), priced from `types`.

pub mod types;

use wasmprov_guest::prelude::*;

const API: &str = "https://api.linode.com/v4";
/// Where an instance's parts are (Linode's names are the common ones); its tags and states.
const INSTANCE: Fields = Fields {
    tags: tags::Preset::LINODE,
    arch: Some(Arch::X86_64),
    ..Fields::COMMON
};

/// The plugin: configuration read once per instance.
#[derive(Clone, Debug)]
pub struct Linode(Settings);

impl RestCloud for Linode {
    type Node = Value;
    const CLOUD: &'static str = "Linode";
    const PAGING: Paging = Paging::pages("page", "/pages");
    const LIST_ITEMS: &'static str = "/data";
    const ONE_ITEM: &'static str = "";
    const NUMERIC_IDS: Option<&'static str> = Some("instance");
    const ERROR_AT: ErrorAt = ErrorAt::new(&["/errors/0/reason"], &["/errors/0/field"]);
    const ERRORS: &'static [Rule] = &[
        Rule::new(Some(400), "limit", Kind::Quota),
        Rule::new(Some(400), "capacity", Kind::CapacityInZone),
        Rule::new(Some(400), "must be unique", Kind::Conflict),
    ];

    fn list(&self, owner_id: &str, request_id: Option<&str>) -> Result<Request> {
        let filter = json!({ "tags": INSTANCE.tags.list_selector(owner_id, request_id)? });
        let url = self.0.url("/linode/instances?page_size=500");
        Ok(Request::get(url).header("x-filter", filter.to_string()))
    }
    fn node_url(&self, id: &str) -> Option<String> {
        let id = wasmprov_guest::ids::numeric_id("instance", id).ok()?;
        Some(self.0.url(&format!("/linode/instances/{id}")))
    }
    fn create(&self, request: &ProvisionRequest, labels: &Labels) -> Result<Request> {
        let (id, shape, boot) = (&request.request_id, &request.shape, &request.boot);
        // Labels are unique per account: the owner goes into the name's hash.
        let key = format!("{:?}/{id}", labels.get(tags::OWNER));
        Ok(Request::post(self.0.url("/linode/instances")).json(&json!({
            "label": tags::hostname_with_hash("wasmprov", id, key.as_bytes()),
            "region": self.0.zone(shape),
            "type": self.0.pick(shape, types::TYPES)?.instance_type.name,
            "image": self.0.image(boot),
            "root_pass": random::password(32),
            "authorized_keys": boot.ssh_keys,
            "metadata": { "user_data": boot::user_data_base64(boot) },
            "tags": INSTANCE.tags.encode_all(labels)?,
        })))
    }
    fn authorize(&self, req: Request) -> Result<Request> {
        self.0.authorize(req)
    }
    fn handle(&self, instance: &Value) -> NodeHandle {
        rest::handle_of(instance, &INSTANCE)
    }
}

impl Provider for Linode {
    const NAME: &'static str = "linode";
    const BOOT: BootSupport = BootSupport::ALL;

    fn new() -> Result<Self> {
        Settings::read(API, "us-east", "linode/ubuntu24.04").map(Self)
    }
    fn price_hint(&self, shape: &NodeShape) -> Result<Option<PriceHint>> {
        self.0.price_hint(shape, types::TYPES)
    }
    fn offerings(&self) -> Result<Vec<Offering>> {
        Ok(shape::offerings(types::TYPES))
    }
    rest_calls!();
}

export_provider!(Linode, capabilities = "capabilities.toml");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_taken_is_a_conflict_so_a_lost_race_looks_again() {
        let body =
            r#"{"errors":[{"reason":"Label must be unique among your Linodes","field":"label"}]}"#;
        let resp = wasmprov_guest::http::Response {
            status: 400,
            headers: Vec::new(),
            body: body.into(),
            url: format!("{API}/linode/instances"),
        };
        let e = wasmprov_guest::classify::classify_at(
            &resp,
            "create",
            Linode::ERRORS,
            &Linode::ERROR_AT,
        );
        assert!(matches!(e, Error::Conflict(_)), "{e:?}");
    }
}
