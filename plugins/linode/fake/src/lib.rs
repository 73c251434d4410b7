//! A fake of Linode's API v4 instances, written with the fake kit:
//! `/v4/linode/instances` filtered by tag (`X-Filter`), paged with
//! `page`/`pages`/`results`; one instance, create, delete; bearer token;
//! Linode's error bodies (`{"errors":[{"reason","field"}]}`) and its rules
//! for labels and tags. `cargo run -p wasmprov-fake-linode` serves it for
//! `wasmprov test --fake-command`; tests call [`serve`].

use axum::extract::{Path, Request, State};
use axum::response::Response;
use axum::routing::get;
use base64::Engine as _;
use serde_json::{Value, json};
use wasmprov_fake::control::Record;
use wasmprov_fake::kit::{self, Fake, Node, Query, Store};
use wasmprov_guest::tags::Preset;
use wasmprov_plugin_linode::types::TYPES;

/// The token the fake accepts.
pub const TOKEN: &str = "fake-linode-token";
/// Instances on a page of the standalone fake (`cargo run`, for `wasmprov
/// test --fake-command`): Linode's smallest `page_size`, so the suite plants
/// more than a page and a plugin that does not page fails `describe.pages`.
pub const STANDALONE_PAGE: usize = 25;
const TAGS: Preset = Preset::LINODE;
/// Where an instance's fields keep the SSH keys it was made with (not
/// shown by the API, only to the suite).
const KEYS: &str = "_authorized_keys";

fn error(status: u16, field: Option<&str>, reason: &str) -> Response {
    kit::json(
        status,
        &json!({"errors": [{"reason": reason, "field": field}]}),
    )
}

/// Starts the fake on a free loopback port, with at most `max_per_page`
/// instances on a page (Linode's own limit is 500; tests use less).
///
/// # Errors
/// When no port can be bound.
pub async fn serve(max_per_page: usize) -> anyhow::Result<kit::Running> {
    let errors =
        |reason: &str, field: &str| json!({"errors": [{"reason": reason, "field": field}]});
    Fake::new("linode fake")
        .token(TOKEN)
        .unauthorized(401, &errors("Invalid Token", "token").to_string())
        .creates("POST", "/v4/linode/instances")
        .fault(
            "capacity",
            400,
            &[],
            &errors("Not enough capacity in this region for that plan", "region").to_string(),
        )
        .fault(
            "quota",
            400,
            &[],
            &errors("Linode limit reached for this account", "type").to_string(),
        )
        .fault(
            "rate_limited",
            429,
            &[("retry-after", "1")],
            &errors("Too Many Requests", "").to_string(),
        )
        .page_size(max_per_page)
        .boot_image("linode/debian12")
        .planted(|labels| {
            json!({"status": "running", "type": "g6-nanode-1", "region": "us-east",
                   "ipv4": ["203.0.113.9"], "tags": TAGS.encode_all(labels).unwrap_or_default()})
        })
        .records(record)
        .serve(|store| {
            axum::Router::new()
                .route(
                    "/v4/linode/instances",
                    get(move |s, r| list(s, r, max_per_page)).post(create),
                )
                .route("/v4/linode/instances/{id}", get(one).delete(remove))
                .with_state(store)
        })
        .await
}

/// What reached the fake when the instance was made, and what it is now.
fn record(node: &Node) -> Record {
    let f = &node.fields;
    let text = |v: &Value| v.as_str().map(String::from);
    let ip = |private: bool| {
        let ips: Vec<std::net::Ipv4Addr> =
            serde_json::from_value(f["ipv4"].clone()).unwrap_or_default();
        ips.into_iter()
            .find(|ip| ip.is_private() == private)
            .map(|ip| ip.to_string())
    };
    Record {
        image: Some(text(&f["image"]).unwrap_or_default()),
        ssh_keys: Some(serde_json::from_value(f[KEYS].clone()).unwrap_or_default()),
        zone: text(&f["region"]),
        instance_type: text(&f["type"]),
        state: text(&f["status"]),
        private_address: ip(true),
        public_address: ip(false),
        ..Record::default()
    }
}

/// An instance as the API shows it: `created` in naive UTC, as Linode
/// writes it (the kit's time is RFC 3339 with `+00:00`).
fn instance(node: &Node) -> Value {
    let mut v = node.render();
    if let Some(o) = v.as_object_mut() {
        o.remove(KEYS);
    }
    v["id"] = json!(node.id.parse::<u64>().unwrap_or(0));
    v["created"] = json!(
        node.created
            .trim_end_matches("+00:00")
            .trim_end_matches('Z')
    );
    v
}

fn tags_of(node: &Node) -> Vec<String> {
    serde_json::from_value(node.fields["tags"].clone()).unwrap_or_default()
}

async fn list(State(store): State<Store>, req: Request, max: usize) -> Response {
    let filter = req
        .headers()
        .get("x-filter")
        .map(|h| h.to_str().unwrap_or_default());
    let tag = match filter.map(serde_json::from_str::<Value>) {
        None => None,
        Some(Ok(f)) if f.as_object().is_some_and(|o| o.len() == 1) && f["tags"].is_string() => {
            f["tags"].as_str().map(String::from)
        }
        Some(_) => return error(400, Some("X-Filter"), "This fake filters on tags only"),
    };
    let nodes: Vec<Node> = store
        .all()
        .into_iter()
        .filter(|n| tag.as_ref().is_none_or(|t| tags_of(n).contains(t)))
        .collect();
    let query = Query::parse(req.uri().query());
    let asked = Query::parse(Some(
        &query.with("per_page", query.get("page_size").unwrap_or("100")),
    ));
    let page = match kit::page_capped(nodes, &asked, 100, max) {
        Ok(page) => page,
        Err(m) => return error(400, Some("page"), &m),
    };
    let data: Vec<Value> = page.items.iter().map(|n| shown(&store, n)).collect();
    kit::json(
        200,
        &json!({"data": data, "page": page.page, "pages": page.last_page, "results": page.total}),
    )
}

/// An instance shown by a read: one still provisioning is running from then on.
fn shown(store: &Store, node: &Node) -> Value {
    store.update(&node.id, |n| n.fields["status"] = json!("running"));
    instance(node)
}

async fn one(State(store): State<Store>, Path(id): Path<String>) -> Response {
    match store.get(&id) {
        Some(n) => kit::json(200, &shown(&store, &n)),
        None => error(404, None, "Not found"),
    }
}

async fn remove(State(store): State<Store>, Path(id): Path<String>) -> Response {
    match store.remove(&id) {
        Some(_) => kit::json(200, &json!({})),
        None => error(404, None, "Not found"),
    }
}

/// Linode's label rule: 3–64 of `[A-Za-z0-9-_.]`, starting with a letter,
/// no two `-`, `_` or `.` in a row.
fn valid_label(l: &str) -> bool {
    (3..=64).contains(&l.len())
        && l.starts_with(|c: char| c.is_ascii_alphabetic())
        && l.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && !["--", "__", ".."].iter().any(|d| l.contains(d))
}

async fn create(State(store): State<Store>, axum::Json(body): axum::Json<Value>) -> Response {
    let text = |k: &str| body[k].as_str().unwrap_or_default();
    let (label, region, kind, image) = (text("label"), text("region"), text("type"), text("image"));
    if !valid_label(label) {
        return error(
            400,
            Some("label"),
            "Label must be 3-64 characters of letters, digits, -, _ and ., start with a letter, and have no two -, _ or . in a row",
        );
    }
    if store.all().iter().any(|n| n.fields["label"] == label) {
        return error(
            400,
            Some("label"),
            "Label must be unique among your Linodes",
        );
    }
    if region.is_empty() || image.is_empty() {
        return error(
            400,
            Some(if region.is_empty() { "region" } else { "image" }),
            "This field is required",
        );
    }
    let Some(size) = TYPES.iter().find(|t| t.name == kind) else {
        return error(
            400,
            Some("type"),
            "A valid plan type by that ID was not found",
        );
    };
    if !size.zones.contains(&region) {
        return error(400, Some("region"), "Region is not available for this plan");
    }
    if !(7..=128).contains(&text("root_pass").len()) {
        return error(400, Some("root_pass"), "Password must be 7-128 characters");
    }
    let tags: Vec<String> = serde_json::from_value(body["tags"].clone()).unwrap_or_default();
    if let Some(t) = tags.iter().find(|t| !(3..=50).contains(&t.len())) {
        return error(
            400,
            Some("tags"),
            &format!("Length must be 3-50 characters: {t:?}"),
        );
    }
    let user_data = match body["metadata"]["user_data"].as_str() {
        None => None,
        Some(b) => match base64::engine::general_purpose::STANDARD.decode(b) {
            Ok(d) if d.len() <= 65_535 => Some(d),
            _ => {
                return error(
                    400,
                    Some("metadata.user_data"),
                    "User data must be base64, at most 64 KiB",
                );
            }
        },
    };
    let n = store.all().len() + 1;
    let fields = json!({
        "label": label, "status": "provisioning", "type": kind, "region": region, "image": image,
        "specs": {"vcpus": size.cpu, "memory": size.memory_mib, "disk": size.disk_gib * 1024},
        "ipv4": [format!("203.0.113.{}", n % 250 + 1), format!("192.168.128.{}", n % 250 + 1)],
        "tags": tags, KEYS: body["authorized_keys"].as_array().cloned().unwrap_or_default(),
    });
    let node = store.create(TAGS.decode_all(&tags), user_data, fields);
    kit::json(200, &instance(&node))
}
