//! A fake of DigitalOcean's Droplets API v2, written with the fake kit:
//! droplets listed by tag with `links.pages.next`, one droplet, create,
//! delete, sizes; bearer token; DigitalOcean's error bodies
//! (`{"id": ..., "message": ...}`) and `ratelimit-*` headers.
//! `cargo run -p wasmprov-fake-digitalocean` serves it for `wasmprov test
//! --fake-command`; tests call [`serve`].

use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::{Path, Request, State};
use axum::response::Response;
use axum::routing::get;
use serde_json::{Value, json};
use wasmprov_fake::control::Record;
use wasmprov_fake::kit::{self, Fake, Labels, Node, Query, Store};
use wasmprov_plugin_digitalocean::sizes::SIZES;

/// Where general sizes are sold (GPU sizes list their own).
const REGIONS: &[&str] = &[
    "nyc1", "nyc3", "sfo3", "ams3", "fra1", "lon1", "sgp1", "tor1", "blr1", "syd1",
];

const UNAUTHORIZED: &str = r#"{"id":"unauthorized","message":"Unable to authenticate you"}"#;
const NOT_AVAILABLE: &str =
    r#"{"id":"unprocessable_entity","message":"Size is not available in this region."}"#;
const OVER_LIMIT: &str = r#"{"id":"unprocessable_entity","message":"creating this/these droplet(s) will exceed your droplet limit"}"#;
const TOO_MANY: &str = r#"{"id":"too_many_requests","message":"API Rate limit exceeded."}"#;

/// The token the fake accepts.
pub const TOKEN: &str = "fake-do-token";

fn error(status: u16, id: &str, message: &str) -> Response {
    kit::json(status, &json!({"id": id, "message": message}))
}

/// Starts the fake on a free loopback port, with at most `max_per_page`
/// droplets on a page (DigitalOcean's own limit is 200; tests use less to
/// make the plugin walk pages).
///
/// # Errors
/// When no port can be bound.
pub async fn serve(max_per_page: usize) -> anyhow::Result<kit::Running> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let reset = now.to_string();
    let throttled = [
        ("ratelimit-limit", "5000"),
        ("ratelimit-remaining", "0"),
        ("ratelimit-reset", reset.as_str()),
    ];
    Fake::new("digitalocean fake")
        .token(TOKEN)
        .unauthorized(401, UNAUTHORIZED)
        .flat_tags()
        .creates("POST", "/v2/droplets")
        .fault("capacity", 422, &[], NOT_AVAILABLE)
        .fault("quota", 422, &[], OVER_LIMIT)
        .fault("rate_limited", 429, &throttled, TOO_MANY)
        .page_size(max_per_page)
        .boot_image("debian-12-x64")
        .planted(
            |_| json!({"status": "active", "size_slug": "s-1vcpu-1gb", "region": {"slug": "nyc3"}}),
        )
        .records(record)
        .serve(|store| {
            axum::Router::new()
                .route(
                    "/v2/droplets",
                    get(move |s, r| list(s, r, max_per_page)).post(create),
                )
                .route("/v2/droplets/{id}", get(one).delete(remove))
                .route("/v2/sizes", get(sizes))
                .with_state(store)
        })
        .await
}

/// What reached the fake when the droplet was made, and what it is now.
fn record(node: &Node) -> Record {
    let f = &node.fields;
    let text = |v: &Value| v.as_str().map(String::from);
    let ip = |kind: &str| {
        f["networks"]["v4"]
            .as_array()?
            .iter()
            .find(|n| n["type"] == kind)
            .and_then(|n| text(&n["ip_address"]))
    };
    Record {
        image: Some(text(&f["image"]["slug"]).unwrap_or_default()),
        ssh_keys: Some(serde_json::from_value(f[SSH_KEYS].clone()).unwrap_or_default()),
        zone: text(&f["region"]["slug"]),
        instance_type: text(&f["size_slug"]),
        state: text(&f["status"]),
        private_address: ip("private"),
        public_address: ip("public"),
        ..Record::default()
    }
}

/// Where a droplet's fields keep the SSH keys it was made with (not shown
/// by the API, only to the suite).
const SSH_KEYS: &str = "_ssh_keys";

/// A droplet as the API shows it (and `new` only on its first showing).
fn droplet(store: &Store, node: &Node) -> Value {
    let mut d = node.render();
    if let Some(o) = d.as_object_mut() {
        o.remove(SSH_KEYS);
    }
    d["id"] = json!(node.id.parse::<u64>().unwrap_or(0));
    d["created_at"] = json!(node.created);
    d["tags"] = json!(node.tags());
    store.update(&node.id, |n| n.fields["status"] = json!("active"));
    d
}

/// One page of `items` (rendered by `show`, at most `max` to a page) and
/// its `links.pages`.
fn paged<T>(
    req: &Request,
    items: Vec<T>,
    key: &str,
    max: usize,
    show: impl Fn(&T) -> Value,
) -> Response {
    let page = match kit::page_capped(items, &Query::parse(req.uri().query()), 20, max) {
        Ok(page) => page,
        Err(m) => return error(400, "bad_request", &m),
    };
    let url = |n| kit::page_url(req, n, page.per_page);
    let pages = match page.next_page {
        Some(next) => json!({"next": url(next), "last": url(page.last_page)}),
        None => json!({}),
    };
    let shown: Vec<Value> = page.items.iter().map(show).collect();
    kit::json(
        200,
        &json!({key: shown, "links": {"pages": pages}, "meta": {"total": page.total}}),
    )
}

async fn list(State(store): State<Store>, req: Request, max: usize) -> Response {
    let query = Query::parse(req.uri().query());
    let nodes = match query.get("tag_name") {
        Some(tag) => store
            .all()
            .into_iter()
            .filter(|n| n.tags().iter().any(|t| t == tag))
            .collect(),
        None => store.all(),
    };
    paged(&req, nodes, "droplets", max, |n| droplet(&store, n))
}

async fn one(State(store): State<Store>, Path(id): Path<String>) -> Response {
    match store.get(&id) {
        Some(n) => kit::json(200, &json!({"droplet": droplet(&store, &n)})),
        None => error(
            404,
            "not_found",
            "The resource you were accessing could not be found.",
        ),
    }
}

async fn remove(State(store): State<Store>, Path(id): Path<String>) -> Response {
    match store.remove(&id) {
        Some(_) => kit::json(204, &()),
        None => error(
            404,
            "not_found",
            "The resource you were accessing could not be found.",
        ),
    }
}

async fn create(State(store): State<Store>, axum::Json(body): axum::Json<Value>) -> Response {
    let (Some(name), Some(region), Some(slug)) = (
        body["name"].as_str(),
        body["region"].as_str(),
        body["size"].as_str(),
    ) else {
        return error(
            422,
            "unprocessable_entity",
            "name, region and size are required",
        );
    };
    let Some(size) = SIZES.iter().find(|s| s.name == slug) else {
        return error(
            422,
            "unprocessable_entity",
            "You specified an invalid size for Droplet creation.",
        );
    };
    if !size.zones.is_empty() && !size.zones.contains(&region) {
        return error(
            422,
            "unprocessable_entity",
            "Size is not available in this region.",
        );
    }
    // DigitalOcean takes hostname characters only (and at most 255).
    if name.is_empty()
        || name.len() > 255
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-".contains(&b))
    {
        return error(
            422,
            "unprocessable_entity",
            "Only valid hostname characters are allowed. (a-z, A-Z, 0-9, . and -)",
        );
    }
    let tags: Vec<String> = serde_json::from_value(body["tags"].clone()).unwrap_or_default();
    let bad_tag = |t: &String| {
        t.is_empty()
            || t.len() > 255
            || !t
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b":_-".contains(&b))
    };
    if let Some(t) = tags.iter().find(|t| bad_tag(t)) {
        return error(
            422,
            "unprocessable_entity",
            &format!("invalid tag name {t:?}"),
        );
    }
    let user_data = body["user_data"].as_str().map(|u| u.as_bytes().to_vec());
    if user_data.as_ref().is_some_and(|u| u.len() > 64 * 1024) {
        return error(
            422,
            "unprocessable_entity",
            "user_data is limited to 64 KiB",
        );
    }
    let labels: Labels = kit::labels_of_tags(&tags);
    let fields = json!({
        "name": name, "status": "new", "size_slug": slug, "vcpus": size.cpu, "memory": size.memory_mib,
        "disk": size.disk_gib, "region": {"slug": region}, "image": {"slug": body["image"]},
        "networks": {"v4": [{"ip_address": "10.10.0.1", "type": "private"}, {"ip_address": "203.0.113.10", "type": "public"}]},
        SSH_KEYS: body["ssh_keys"].as_array().cloned().unwrap_or_default(),
    });
    let node = store.create(labels, user_data, fields);
    // The create answer shows the droplet as `new` without counting a read.
    let mut d = node.render();
    if let Some(o) = d.as_object_mut() {
        o.remove(SSH_KEYS);
    }
    d["id"] = json!(node.id.parse::<u64>().unwrap_or(0));
    d["created_at"] = json!(node.created);
    d["tags"] = json!(node.tags());
    kit::json(202, &json!({"droplet": d}))
}

/// Every size on one page, as DigitalOcean's whole list fits its 200.
async fn sizes(req: Request) -> Response {
    paged(&req, SIZES.to_vec(), "sizes", 200, |s| {
        let gpu = s
            .gpu_model
            .map(|m| json!({"count": s.gpu, "model": m.replace('-', "_")}));
        json!({"slug": s.name, "vcpus": s.cpu, "memory": s.memory_mib, "disk": s.disk_gib,
               "price_hourly": s.hourly_usd, "available": true, "gpu_info": gpu,
               "regions": if s.zones.is_empty() { REGIONS } else { s.zones }})
    })
}
