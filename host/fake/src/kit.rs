//! Write a fake of a REST cloud as a handful of handlers.
//!
//! The kit keeps the nodes ([`Store`]), answers the fake-control protocol
//! ([`crate::control`]) from them, checks the bearer token, and gives the
//! pieces every list endpoint needs ([`Query`], [`page`], [`json`]). The
//! author writes the cloud's own routes with axum and describes how the
//! cloud reports capacity, quota and throttling:
//!
//! ```no_run
//! use axum::extract::{Path, State};
//! use axum::routing::{delete, get};
//! use wasmprov_fake::kit::{Fake, Store, json};
//!
//! # async fn demo() -> anyhow::Result<()> {
//! let fake = Fake::new("tiny cloud")
//!     .token("secret")
//!     .creates("POST", "/nodes")
//!     .fault("capacity", 503, &[], r#"{"error":"no capacity"}"#)
//!     .fault("quota", 403, &[], r#"{"error":"quota"}"#)
//!     .fault("rate_limited", 429, &[("retry-after", "1")], r#"{"error":"slow down"}"#)
//!     .serve(|store| {
//!         axum::Router::new()
//!             .route("/nodes", get(|State(s): State<Store>| async move {
//!                 json(200, &s.all().iter().map(|n| n.render()).collect::<Vec<_>>())
//!             }))
//!             .route("/nodes/{id}", delete(|State(s): State<Store>, Path(id): Path<String>| async move {
//!                 match s.remove(&id) { Some(_) => json(204, &()), None => json(404, &"no such node") }
//!             }))
//!             .with_state(store)
//!     })
//!     .await?;
//! fake.run_until_stopped().await
//! # }
//! ```
//!
//! [`Running::run_until_stopped`] is the `main` of a fake started by the
//! suite's `--fake-command`: it prints the fake's URL as the first line of
//! standard output and serves until it is killed or standard input closes.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use serde::Serialize;

use crate::control::{self, Canned, Info, Record, Route, TagStyle};
use crate::wire::{self, lock};

pub use crate::wire::Query;

/// Labels, as everywhere in wasmprov.
pub type Labels = BTreeMap<String, String>;

/// One node of a fake cloud.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Node {
    /// Its id: the fake's prefix (none by default) and a decimal number,
    /// unique for the fake's life.
    pub id: String,
    /// Its labels (for a cloud with flat tags, the labels its tags stand
    /// for: [`Node::tags`] renders them).
    pub labels: Labels,
    /// The user data it was created with.
    #[serde(skip)]
    pub user_data: Option<Vec<u8>>,
    /// The cloud's own fields (name, size, region, status...), a JSON object.
    pub fields: serde_json::Value,
    /// Creation time, RFC 3339.
    pub created: String,
}

impl Node {
    /// The labels as flat tags ([`wasmprov_api::tags::FlatTags::DIGITALOCEAN`]),
    /// for a cloud whose tags are strings.
    #[must_use]
    pub fn tags(&self) -> Vec<String> {
        flat_tags(&self.labels)
    }

    /// The node as JSON: its fields, with `id` and `created` added.
    #[must_use]
    pub fn render(&self) -> serde_json::Value {
        let mut v = self.fields.clone();
        if let Some(obj) = v.as_object_mut() {
            obj.entry("id").or_insert_with(|| self.id.clone().into());
            obj.entry("created")
                .or_insert_with(|| self.created.clone().into());
        }
        v
    }
}

/// Labels as the flat tags a plugin writes with
/// [`wasmprov_api::tags::FlatTags::DIGITALOCEAN`]; a label that cannot be
/// a tag is left out.
#[must_use]
pub fn flat_tags(labels: &Labels) -> Vec<String> {
    let codec = wasmprov_api::tags::FlatTags::DIGITALOCEAN;
    labels
        .iter()
        .filter_map(|(k, v)| codec.encode(k, v).ok())
        .collect()
}

/// The labels flat `tags` stand for (tags that are not `key:value` as the
/// SDK writes them are left out).
#[must_use]
pub fn labels_of_tags<S: AsRef<str>>(tags: &[S]) -> Labels {
    wasmprov_api::tags::FlatTags::DIGITALOCEAN.decode_all(tags)
}

#[derive(Debug, Default)]
struct Nodes {
    nodes: Vec<Node>,
    next: u64,
    prefix: String,
}

/// The nodes of a fake cloud: the state its handlers share (an axum
/// state; clones share the nodes) and the ground truth the suite reads.
#[derive(Clone, Debug, Default)]
pub struct Store(Arc<Mutex<Nodes>>);

impl Store {
    /// A store whose node ids start with `prefix` (`n-`, `i-`).
    #[must_use]
    pub fn with_prefix(prefix: &str) -> Self {
        Self(Arc::new(Mutex::new(Nodes {
            prefix: prefix.to_string(),
            ..Nodes::default()
        })))
    }

    /// Creates a node; ids count up from 100001 after the prefix.
    #[must_use]
    pub fn create(
        &self,
        labels: Labels,
        user_data: Option<Vec<u8>>,
        fields: serde_json::Value,
    ) -> Node {
        let mut s = lock(&self.0);
        s.next += 1;
        let node = Node {
            id: format!("{}{}", s.prefix, 100_000 + s.next),
            labels,
            user_data,
            fields,
            created: wire::rfc3339_now(),
        };
        s.nodes.push(node.clone());
        node
    }

    /// Every node, oldest first.
    #[must_use]
    pub fn all(&self) -> Vec<Node> {
        lock(&self.0).nodes.clone()
    }

    /// The nodes that carry every label of `selector`, oldest first.
    #[must_use]
    pub fn select(&self, selector: &Labels) -> Vec<Node> {
        lock(&self.0)
            .nodes
            .iter()
            .filter(|n| selector.iter().all(|(k, v)| n.labels.get(k) == Some(v)))
            .cloned()
            .collect()
    }

    /// The node `id`.
    #[must_use]
    pub fn get(&self, id: &str) -> Option<Node> {
        lock(&self.0).nodes.iter().find(|n| n.id == id).cloned()
    }

    /// Changes node `id`; the node as changed.
    pub fn update(&self, id: &str, change: impl FnOnce(&mut Node)) -> Option<Node> {
        let mut s = lock(&self.0);
        let node = s.nodes.iter_mut().find(|n| n.id == id)?;
        change(node);
        Some(node.clone())
    }

    /// Deletes node `id`; the node deleted.
    pub fn remove(&self, id: &str) -> Option<Node> {
        let mut s = lock(&self.0);
        let at = s.nodes.iter().position(|n| n.id == id)?;
        Some(s.nodes.remove(at))
    }
}

/// One page of a list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page<T> {
    /// The items on it.
    pub items: Vec<T>,
    /// Its number, from 1.
    pub page: usize,
    /// Items per page.
    pub per_page: usize,
    /// Items on all pages.
    pub total: usize,
    /// The number of the last page (1 for an empty list).
    pub last_page: usize,
    /// The next page's number; `None` on the last page.
    pub next_page: Option<usize>,
}

/// Page `page` (`?page=`, from 1, default 1) of `per_page` (`?per_page=`,
/// 1..=`max`, default `default`) items.
///
/// # Errors
/// A message naming the bad parameter, for a 400 answer.
pub fn page<T>(
    items: Vec<T>,
    query: &Query,
    default: usize,
    max: usize,
) -> Result<Page<T>, String> {
    let number = |name: &str, default: usize| -> Result<usize, String> {
        match query.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| format!("{name} must be a whole number from 1, not {v:?}")),
        }
    };
    let page = number("page", 1)?;
    let per_page = number("per_page", default)?;
    if per_page > max {
        return Err(format!("per_page must be at most {max}, not {per_page}"));
    }
    let total = items.len();
    let last_page = total.div_ceil(per_page).max(1);
    let items = items
        .into_iter()
        .skip(per_page.saturating_mul(page - 1))
        .take(per_page)
        .collect();
    Ok(Page {
        items,
        page,
        per_page,
        total,
        last_page,
        next_page: (page < last_page).then_some(page + 1),
    })
}

/// [`page`], but a `per_page` above `max` is served as `max` (as most APIs
/// do) rather than refused.
///
/// # Errors
/// As [`page`], for a `page` or `per_page` that is not a number from 1.
pub fn page_capped<T>(
    items: Vec<T>,
    query: &Query,
    default: usize,
    max: usize,
) -> Result<Page<T>, String> {
    let asked = query.get("per_page").map(str::parse::<usize>);
    let capped = match asked {
        Some(Ok(n)) if n > max => Query::parse(Some(&query.with("per_page", &max.to_string()))),
        _ => query.clone(),
    };
    page(items, &capped, default, max)
}

/// The absolute URL of page `number` of the list `req` asked for, on the
/// host it asked (`https`, or `http` for a loopback host), with its query
/// kept and `page` / `per_page` set: for clouds whose answers name the next
/// page by URL.
#[must_use]
pub fn page_url(req: &axum::extract::Request, number: usize, per_page: usize) -> String {
    let host = req
        .headers()
        .get(http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(http::uri::Authority::as_str))
        .unwrap_or("localhost");
    let name = host.rsplit_once(':').map_or(host, |(h, _)| h);
    let loopback = name == "localhost"
        || name
            .trim_matches(['[', ']'])
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    let scheme = if loopback { "http" } else { "https" };
    let query = Query::parse(req.uri().query()).with("per_page", &per_page.to_string());
    let query = Query::parse(Some(&query)).with("page", &number.to_string());
    format!("{scheme}://{host}{}?{query}", req.uri().path())
}

/// A JSON response (`204` and `304` without a body).
pub fn json(status: u16, body: &impl Serialize) -> Response {
    let status =
        http::StatusCode::from_u16(status).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    if status == http::StatusCode::NO_CONTENT || status == http::StatusCode::NOT_MODIFIED {
        return status.into_response();
    }
    (status, axum::Json(body)).into_response()
}

/// A [`Canned`] response.
#[must_use]
pub fn canned(c: &Canned) -> Response {
    c.to_http().map(axum::body::Body::from).into_response()
}

/// A fake being described, then served by [`Fake::serve`].
pub struct Fake {
    info: Info,
    id_prefix: String,
    token: Option<String>,
    unauthorized: Canned,
    plant_fields: Arc<dyn Fn(&Labels) -> serde_json::Value + Send + Sync>,
    records: Option<RecordFn>,
}

/// How a fake tells the suite what it recorded of a node.
type RecordFn = Arc<dyn Fn(&Node) -> Record + Send + Sync>;

impl std::fmt::Debug for Fake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fake")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl Fake {
    /// A fake called `name` ("digitalocean fake").
    #[must_use]
    pub fn new(name: &str) -> Self {
        Self {
            info: Info {
                name: name.to_string(),
                ..Info::default()
            },
            id_prefix: String::new(),
            token: None,
            unauthorized: Canned {
                status: 401,
                headers: BTreeMap::new(),
                body: r#"{"error":"unauthorized"}"#.into(),
            },
            plant_fields: Arc::new(|_| serde_json::json!({})),
            records: None,
        }
    }

    /// The most nodes one page of the cloud's node list holds: the suite
    /// plants more than a page before `describe` (`describe.pages`).
    #[must_use]
    pub fn page_size(mut self, max: usize) -> Self {
        self.info.page_size = Some(max);
        self
    }

    /// An image the cloud boots that is not the plugin's default, for the
    /// suite to ask for (`boot.image`).
    #[must_use]
    pub fn boot_image(mut self, image: &str) -> Self {
        self.info.boot_image = Some(image.to_string());
        self
    }

    /// What the fake recorded of a node, read from its fields: the image,
    /// SSH keys, zone, instance type, state and addresses as the create
    /// left them. The kit adds the node's creation time and user data
    /// ([`Node::created`], [`Node::user_data`]; none given is `""`) unless
    /// `record` sets them. The suite checks the plugin against each field
    /// set (`boot.*`, `shape.zone`, `handle.truth`, `handle.created-at`);
    /// without this, those rules are skipped.
    #[must_use]
    pub fn records(mut self, record: impl Fn(&Node) -> Record + Send + Sync + 'static) -> Self {
        self.records = Some(Arc::new(record));
        self
    }

    /// Every request of the cloud's API must carry `Authorization: Bearer
    /// TOKEN`; every secret the suite gives the plugin is this token.
    #[must_use]
    pub fn token(mut self, token: &str) -> Self {
        self.token = Some(token.to_string());
        self.info
            .secrets
            .insert(control::ANY_SECRET.into(), token.to_string());
        self
    }

    /// The answer to a request without the token (default 401
    /// `{"error":"unauthorized"}`).
    #[must_use]
    pub fn unauthorized(mut self, status: u16, body: &str) -> Self {
        self.unauthorized = Canned {
            status,
            headers: BTreeMap::new(),
            body: body.to_string(),
        };
        self
    }

    /// Node ids start with `prefix` (default none: plain numbers).
    #[must_use]
    pub fn id_prefix(mut self, prefix: &str) -> Self {
        self.id_prefix = prefix.to_string();
        self
    }

    /// The value of the secret the manifest reads from variable `env`.
    #[must_use]
    pub fn secret(mut self, env: &str, value: &str) -> Self {
        self.info.secrets.insert(env.into(), value.into());
        self
    }

    /// A configuration value the suite adds to the plugin's manifest.
    #[must_use]
    pub fn config(mut self, key: &str, value: &str) -> Self {
        self.info.config.insert(key.into(), value.into());
        self
    }

    /// Nodes carry flat string tags rather than labels.
    #[must_use]
    pub fn flat_tags(mut self) -> Self {
        self.info.tags = TagStyle::Flat;
        self
    }

    /// Requests with this method and path create a node (`*` matches one
    /// segment).
    #[must_use]
    pub fn creates(mut self, method: &str, path: &str) -> Self {
        self.info.creates.push(Route::new(method, path));
        self
    }

    /// How this cloud answers when `kind` (`capacity`, `quota`,
    /// `rate_limited`) happens.
    #[must_use]
    pub fn fault(mut self, kind: &str, status: u16, headers: &[(&str, &str)], body: &str) -> Self {
        self.info.faults.insert(
            kind.to_string(),
            Canned {
                status,
                headers: headers
                    .iter()
                    .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                    .collect(),
                body: body.to_string(),
            },
        );
        self
    }

    /// The cloud's fields of a node the suite plants (default none).
    #[must_use]
    pub fn planted(
        mut self,
        fields: impl Fn(&Labels) -> serde_json::Value + Send + Sync + 'static,
    ) -> Self {
        self.plant_fields = Arc::new(fields);
        self
    }

    /// Serves the fake on a free loopback port: the cloud's routes from
    /// `api` (given the store), the control endpoints beside them.
    ///
    /// # Errors
    /// When no loopback port can be bound.
    pub async fn serve(self, api: impl FnOnce(Store) -> axum::Router) -> anyhow::Result<Running> {
        self.serve_on(SocketAddr::from(([127, 0, 0, 1], 0)), api)
            .await
    }

    /// [`Fake::serve`] on `addr` (loopback only).
    ///
    /// # Errors
    /// When `addr` is not loopback or cannot be bound.
    pub async fn serve_on(
        self,
        addr: SocketAddr,
        api: impl FnOnce(Store) -> axum::Router,
    ) -> anyhow::Result<Running> {
        let store = Store::with_prefix(&self.id_prefix);
        let control = Arc::new(Control {
            info: self.info.clone(),
            store: store.clone(),
            plant_fields: self.plant_fields.clone(),
            records: self.records.clone(),
        });
        let mut router = api(store.clone());
        if let Some(token) = self.token.clone() {
            let refusal = self.unauthorized.clone();
            router = router.layer(axum::middleware::from_fn(
                move |req: axum::extract::Request, next: axum::middleware::Next| {
                    let ok = wire::authorized(req.headers(), &token);
                    let refusal = refusal.clone();
                    async move {
                        if ok {
                            next.run(req).await
                        } else {
                            canned(&refusal)
                        }
                    }
                },
            ));
        }
        let router = axum::Router::new()
            .route(control::INFO, get(info))
            .route(control::NODES, get(nodes))
            .route(control::PLANT, post(plant))
            .with_state(control)
            .merge(router);
        let server = wire::Server::start(&self.info.name, addr, router).await?;
        Ok(Running {
            server,
            store,
            info: self.info,
        })
    }
}

struct Control {
    info: Info,
    store: Store,
    plant_fields: Arc<dyn Fn(&Labels) -> serde_json::Value + Send + Sync>,
    records: Option<RecordFn>,
}

async fn info(State(c): State<Arc<Control>>) -> Response {
    json(200, &c.info)
}

async fn nodes(State(c): State<Arc<Control>>) -> Response {
    let nodes = c
        .store
        .all()
        .into_iter()
        .map(|n| {
            let record = c.records.as_ref().map(|f| {
                let mut r = f(&n);
                r.created_at.get_or_insert_with(|| n.created.clone());
                r.user_data_base64.get_or_insert_with(|| {
                    base64::engine::general_purpose::STANDARD
                        .encode(n.user_data.as_deref().unwrap_or_default())
                });
                r
            });
            let (labels, tags) = match c.info.tags {
                TagStyle::Labels => (n.labels.clone(), Vec::new()),
                TagStyle::Flat => (Labels::new(), n.tags()),
            };
            control::Node {
                id: n.id,
                labels,
                tags,
                alive: true,
                user_data_base64: n
                    .user_data
                    .map(|d| base64::engine::general_purpose::STANDARD.encode(d)),
                record,
            }
        })
        .collect();
    json(200, &control::NodeList { nodes })
}

async fn plant(
    State(c): State<Arc<Control>>,
    axum::Json(req): axum::Json<control::Plant>,
) -> Response {
    let fields = (c.plant_fields)(&req.labels);
    let node = c.store.create(req.labels, None, fields);
    json(200, &control::Planted { id: node.id })
}

/// A fake being served; dropping it stops the server.
#[derive(Debug)]
pub struct Running {
    server: wire::Server,
    store: Store,
    info: Info,
}

impl Running {
    /// The fake's base URL, `http://127.0.0.1:PORT`: give it to `wasmprov
    /// test --fake-url` or `Suite::fake_url`.
    #[must_use]
    pub fn url(&self) -> String {
        format!("http://{}", self.server.addr())
    }

    /// The address bound.
    #[must_use]
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The nodes.
    #[must_use]
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// What the fake tells the suite.
    #[must_use]
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// For a fake's `main`: prints [`Running::url`] as the first line of
    /// standard output, then serves until interrupted, terminated, or
    /// standard input closes (the suite that started it is gone).
    ///
    /// # Errors
    /// When standard output cannot be written.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{}", self.url())?;
        out.flush()?;
        drop(out);
        // Standard input is watched only when it is a pipe or socket (the
        // suite's): a terminal or /dev/null (a fake run by hand, in the
        // background) must not stop it. It is read on a thread of its own.
        let watch = stdin_is_a_pipe();
        let (closed, stdin_closed) = tokio::sync::oneshot::channel::<()>();
        if watch {
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
                let _ = closed.send(());
            });
        }
        let stdin_closed = async move {
            if watch {
                let _ = stdin_closed.await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        let terminated = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut s) => {
                    s.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = terminated => {}
            () = stdin_closed => {}
        }
        self.server.shutdown().await;
        Ok(())
    }
}

/// Whether standard input is a pipe or a socket.
fn stdin_is_a_pipe() -> bool {
    use std::os::unix::fs::FileTypeExt as _;
    std::fs::metadata("/dev/stdin")
        .is_ok_and(|m| m.file_type().is_fifo() || m.file_type().is_socket())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_count_from_one_and_refuse_bad_numbers() {
        let q = Query::parse(Some("page=2&per_page=2"));
        let p = page((1..=5).collect(), &q, 20, 200).unwrap();
        assert_eq!(
            (p.items, p.last_page, p.next_page, p.total),
            (vec![3, 4], 3, Some(3), 5)
        );
        let p = page(
            (1..=5).collect::<Vec<_>>(),
            &Query::parse(Some("page=3&per_page=2")),
            20,
            200,
        )
        .unwrap();
        assert_eq!((p.items, p.next_page), (vec![5], None));
        let p = page(Vec::<u8>::new(), &Query::parse(None), 20, 200).unwrap();
        assert_eq!((p.last_page, p.next_page), (1, None));
        for bad in ["page=0", "page=x", "per_page=0", "per_page=201", "page=-1"] {
            assert!(
                page(vec![1], &Query::parse(Some(bad)), 20, 200).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn capped_pages_and_next_page_urls() {
        let q = Query::parse(Some("per_page=500&tag_name=a%3Ab"));
        let p = page_capped((1..=5).collect::<Vec<_>>(), &q, 20, 2).unwrap();
        assert_eq!((p.per_page, p.next_page), (2, Some(2)));
        assert!(page_capped(vec![1], &Query::parse(Some("per_page=x")), 20, 2).is_err());
        let req = http::Request::builder()
            .uri("/v2/droplets?tag_name=k%3Av&per_page=500&page=1")
            .header("host", "api.example.com")
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(
            page_url(&req, 2, 200),
            "https://api.example.com/v2/droplets?tag_name=k%3Av&per_page=200&page=2"
        );
        let req = http::Request::builder()
            .uri("/x")
            .header("host", "127.0.0.1:8080")
            .body(axum::body::Body::empty())
            .unwrap();
        assert_eq!(
            page_url(&req, 3, 2),
            "http://127.0.0.1:8080/x?per_page=2&page=3"
        );
    }

    #[test]
    fn stores_select_by_labels_and_render_tags() {
        let s = Store::default();
        let a = s.create(
            Labels::from([
                ("wasmprov-owner".into(), "o".into()),
                ("role".into(), "a b".into()),
            ]),
            None,
            serde_json::json!({"name": "a"}),
        );
        let _b = s.create(Labels::new(), None, serde_json::json!({}));
        let sel = Labels::from([("wasmprov-owner".into(), "o".into())]);
        assert_eq!(s.select(&sel), vec![a.clone()]);
        assert_eq!(
            a.tags(),
            vec!["role:aX20b".to_string(), "wasmprov-owner:o".into()]
        );
        assert_eq!(labels_of_tags(&a.tags()), a.labels);
        assert_eq!(a.render()["id"], a.id.as_str());
        assert!(s.remove(&a.id).is_some());
        assert!(s.get(&a.id).is_none());
    }
}
