//! State and request handling of the fake reference cloud.
//!
//! As in the Hetzner fake, one axum fallback handler takes every request, so
//! auth, faults and JSON 404s apply uniformly, and routing is a `match` on
//! method and path segments. The state sits behind one mutex held for the
//! whole (short, non-async) handling of a request, which makes every
//! request atomic.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::header::{CONTENT_TYPE, HeaderName, HeaderValue};
use http::{HeaderMap, Method, StatusCode};
use serde_json::{Map, Value, json};

use super::catalog::{self, DEFAULT_ZONE, NodeType, ON_DEMAND, SPOT};
use super::errors::{
    ErrorCode, ErrorResponse, capacity_error, quota_error, rate_limited_error, render_error,
};
use super::{RefCloudFakeOptions, RefFault, RefNode};
use crate::wire::{Query, authorized, lock, rfc3339_now};

/// Largest request body read; a bigger one is `invalid_request`.
const MAX_BODY_BYTES: usize = 1 << 20;
/// `per_page` when the client does not ask.
const DEFAULT_PER_PAGE: usize = 25;
/// Largest `per_page`.
const MAX_PER_PAGE: usize = 100;
/// Longest label key or value.
const MAX_LABEL_LEN: usize = 63;
/// Longest `Idempotency-Key`.
const MAX_IDEMPOTENCY_KEY_LEN: usize = 255;
/// Fields a create body may have.
const CREATE_FIELDS: [&str; 5] = ["type", "zone", "capacity_type", "labels", "subnet"];
/// The subnets: (id, zone, addresses for nodes).
pub const SUBNETS: [(&str, &str, u64); 2] = [("subnet-a", "zone-a", 8), ("subnet-b", "zone-b", 8)];
/// The target group every fake has.
pub const TARGET_GROUP: &str = "tg-web";

/// The router: a single fallback handler for every method and path.
pub(crate) fn router(state: Arc<Mutex<FakeState>>) -> Router {
    Router::new().fallback(entry).with_state(state)
}

async fn entry(State(state): State<Arc<Mutex<FakeState>>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|e| e.to_string());
    let reply = lock(&state).handle(&parts.method, &parts.uri, &parts.headers, body);
    tracing::debug!(method = %parts.method, uri = %parts.uri, status = reply.status(), "fake refcloud request");
    reply.into_response()
}

/// What a request produced.
#[derive(Debug)]
pub(crate) enum Reply {
    /// A JSON body with this status.
    Json(StatusCode, Value),
    /// 204, no body.
    NoContent,
    /// An error in the refcloud dialect.
    Error(ErrorResponse),
}

impl From<ErrorResponse> for Reply {
    fn from(e: ErrorResponse) -> Self {
        Reply::Error(e)
    }
}

impl Reply {
    fn status(&self) -> u16 {
        match self {
            Reply::Json(status, _) => status.as_u16(),
            Reply::NoContent => 204,
            Reply::Error(e) => e.status,
        }
    }

    fn into_response(self) -> Response {
        match self {
            Reply::Json(status, body) => {
                let body = serde_json::to_vec(&body).unwrap_or_else(|_| b"{}".to_vec());
                let mut resp = (status, Body::from(body)).into_response();
                resp.headers_mut()
                    .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                resp
            }
            Reply::NoContent => StatusCode::NO_CONTENT.into_response(),
            Reply::Error(e) => {
                let status =
                    StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
                let mut resp = (status, Body::from(e.body)).into_response();
                for (name, value) in &e.headers {
                    if let (Ok(name), Ok(value)) = (
                        HeaderName::from_bytes(name.as_bytes()),
                        HeaderValue::from_str(value),
                    ) {
                        resp.headers_mut().insert(name, value);
                    }
                }
                resp
            }
        }
    }
}

fn invalid(message: impl AsRef<str>) -> ErrorResponse {
    render_error(ErrorCode::InvalidRequest, message.as_ref())
}

fn not_found(id: &str) -> ErrorResponse {
    render_error(ErrorCode::NotFound, &format!("node {id} not found"))
}

fn group_not_found(group: &str) -> ErrorResponse {
    render_error(
        ErrorCode::NotFound,
        &format!("target group {group} not found"),
    )
}

fn unauthorized() -> ErrorResponse {
    render_error(
        ErrorCode::Unauthorized,
        "missing or invalid bearer token (send Authorization: Bearer <token>)",
    )
}

/// A validated create request, defaults applied: what an idempotent replay
/// must repeat exactly.
#[derive(Clone, Debug, PartialEq, Eq)]
struct CreateSpec {
    node_type: &'static str,
    zone: &'static str,
    capacity_type: &'static str,
    labels: BTreeMap<String, String>,
    subnet: Option<&'static str>,
}

/// One live node.
#[derive(Debug)]
struct Node {
    seq: u64,
    spec: CreateSpec,
    address: Ipv4Addr,
    created: String,
    /// GETs that have returned this node so far.
    reads: u32,
    idempotency_key: Option<String>,
}

impl Node {
    fn id(&self) -> String {
        node_id(self.seq)
    }

    /// `provisioning` until the node has been read once, then `running`.
    fn state(&self) -> &'static str {
        if self.reads == 0 {
            "provisioning"
        } else {
            "running"
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "id": self.id(),
            "type": self.spec.node_type,
            "zone": self.spec.zone,
            "capacity_type": self.spec.capacity_type,
            "state": self.state(),
            "address": self.address.to_string(),
            "labels": self.spec.labels,
            "created": self.created,
            "subnet": self.spec.subnet,
        })
    }

    /// The JSON of a GET, which then counts as a read.
    fn read(&mut self) -> Value {
        let json = self.to_json();
        self.reads = self.reads.saturating_add(1);
        json
    }
}

fn node_id(seq: u64) -> String {
    format!("n-{seq:06}")
}

/// The sequence number in an id, only for ids exactly as [`node_id`]
/// writes them (so `n-1` or `n-0000001` are not found).
fn parse_node_id(id: &str) -> Option<u64> {
    let seq = id.strip_prefix("n-")?.parse::<u64>().ok()?;
    (node_id(seq) == id).then_some(seq)
}

/// The `seq`-th address (from 1): 10.1.0.1, 10.1.0.2, ... 10.1.0.254,
/// 10.1.1.1, ...; past 10.1.255.254 it goes on in 10.2.0.0/16 and so on.
fn address_for(seq: u64) -> Ipv4Addr {
    let i = seq.saturating_sub(1);
    let host = (i % 254 + 1) as u8;
    let third = (i / 254 % 256) as u8;
    let second = (1 + i / (254 * 256)).min(255) as u8;
    Ipv4Addr::new(10, second, third, host)
}

/// Whether `s` is a valid label key or value: `[A-Za-z0-9._/-]{1,63}`.
fn is_valid_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_LABEL_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/' | b'-'))
}

/// A parsed `label_selector`: exact `key=value` terms, all of which must match.
#[derive(Debug, Default, PartialEq)]
struct Selector(Vec<(String, String)>);

impl Selector {
    fn parse(raw: &str) -> Result<Self, ErrorResponse> {
        if raw.trim().is_empty() {
            return Ok(Self::default());
        }
        raw.split(',')
            .map(|term| {
                let bad = |why: &str| {
                    invalid(format!(
                        "invalid label_selector term {term:?}: {why} (expected key=value[,key=value...])"
                    ))
                };
                let (k, v) = term.split_once('=').ok_or_else(|| bad("no '='"))?;
                if !is_valid_label(k) {
                    return Err(bad("the key is not [A-Za-z0-9._/-]{1,63}"));
                }
                if !is_valid_label(v) {
                    return Err(bad("the value is not [A-Za-z0-9._/-]{1,63}"));
                }
                Ok((k.to_string(), v.to_string()))
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|(k, v)| labels.get(k) == Some(v))
    }
}

/// A positive integer query parameter, at most `max`.
fn page_param(q: &Query, key: &str, default: usize, max: usize) -> Result<usize, ErrorResponse> {
    match q.get(key) {
        None => Ok(default),
        Some(raw) => match raw.trim().parse::<usize>() {
            Ok(n) if (1..=max).contains(&n) => Ok(n),
            _ => Err(invalid(format!(
                "invalid value {raw:?} for {key}: must be an integer from 1 to {max}"
            ))),
        },
    }
}

/// Which endpoint a request is for.
enum Route<'a> {
    List,
    Create,
    Get(&'a str),
    Delete(&'a str),
    SetLabels(&'a str),
    Assign(&'a str),
    Release(&'a str, &'a str),
    Targets(&'a str),
    Register(&'a str, &'a str),
    Deregister(&'a str, &'a str),
    Subnet(&'a str),
    Unknown,
}

fn route<'a>(method: &Method, path: &'a str) -> Route<'a> {
    let path = path.strip_suffix('/').unwrap_or(path);
    let Some(rest) = path.strip_prefix("/v1/") else {
        return Route::Unknown;
    };
    let segments: Vec<&str> = rest.split('/').collect();
    match (method, segments.as_slice()) {
        (&Method::GET, ["nodes"]) => Route::List,
        (&Method::POST, ["nodes"]) => Route::Create,
        (&Method::GET, ["nodes", id]) => Route::Get(id),
        (&Method::DELETE, ["nodes", id]) => Route::Delete(id),
        (&Method::PUT, ["nodes", id, "labels"]) => Route::SetLabels(id),
        (&Method::POST, ["nodes", id, "addresses"]) => Route::Assign(id),
        (&Method::DELETE, ["nodes", id, "addresses", a]) => Route::Release(id, a),
        (&Method::GET, ["target-groups", g, "targets"]) => Route::Targets(g),
        (&Method::PUT, ["target-groups", g, "targets", id]) => Route::Register(g, id),
        (&Method::DELETE, ["target-groups", g, "targets", id]) => Route::Deregister(g, id),
        (&Method::GET, ["subnets", id]) => Route::Subnet(id),
        _ => Route::Unknown,
    }
}

/// All mutable state of one fake.
#[derive(Debug)]
pub(crate) struct FakeState {
    opts: RefCloudFakeOptions,
    nodes: BTreeMap<u64, Node>,
    /// `Idempotency-Key` → the node created with it.
    keys: HashMap<String, u64>,
    next_seq: u64,
    pub(crate) faults: VecDeque<RefFault>,
    pub(crate) request_count: u64,
    /// Stable addresses, in the order they were taken.
    pub(crate) addresses: Vec<StableAddr>,
    /// Target group → node → port.
    pub(crate) groups: BTreeMap<String, BTreeMap<u64, Option<u16>>>,
}

/// A stable address of the account.
#[derive(Clone, Debug)]
pub(crate) struct StableAddr {
    pub(crate) id: String,
    pub(crate) ip: Ipv4Addr,
    pub(crate) kind: &'static str,
    pub(crate) node: Option<u64>,
}

impl StableAddr {
    fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "ip": self.ip.to_string(),
            "kind": self.kind,
            "node_id": self.node.map(node_id),
        })
    }
}

impl FakeState {
    pub(crate) fn new(opts: RefCloudFakeOptions) -> Self {
        Self {
            opts,
            nodes: BTreeMap::new(),
            keys: HashMap::new(),
            next_seq: 1,
            faults: VecDeque::new(),
            request_count: 0,
            addresses: Vec::new(),
            groups: BTreeMap::from([(TARGET_GROUP.to_string(), BTreeMap::new())]),
        }
    }

    /// Public view of the live nodes, in id order.
    pub(crate) fn snapshot(&self) -> Vec<RefNode> {
        self.nodes
            .values()
            .map(|n| RefNode {
                id: n.id(),
                node_type: n.spec.node_type.to_string(),
                zone: n.spec.zone.to_string(),
                capacity_type: n.spec.capacity_type.to_string(),
                state: n.state().to_string(),
                address: n.address.to_string(),
                labels: n.spec.labels.clone(),
                subnet: n.spec.subnet.map(str::to_string),
                created: n.created.clone(),
                reads: n.reads,
                idempotency_key: n.idempotency_key.clone(),
            })
            .collect()
    }

    /// Creates a `small` on-demand node in the default zone, unchecked.
    pub(crate) fn plant(&mut self, labels: BTreeMap<String, String>) -> String {
        let spec = CreateSpec {
            node_type: "small",
            zone: DEFAULT_ZONE,
            capacity_type: ON_DEMAND,
            labels,
            subnet: None,
        };
        let seq = self.insert(spec, None);
        node_id(seq)
    }

    fn insert(&mut self, spec: CreateSpec, idempotency_key: Option<String>) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.nodes.insert(
            seq,
            Node {
                seq,
                spec,
                address: address_for(seq),
                created: rfc3339_now(),
                reads: 0,
                idempotency_key,
            },
        );
        seq
    }

    /// Serves one request: counts it, authenticates it, applies a queued
    /// fault if one matches, then dispatches it.
    pub(crate) fn handle(
        &mut self,
        method: &Method,
        uri: &http::Uri,
        headers: &HeaderMap,
        body: Result<Bytes, String>,
    ) -> Reply {
        self.request_count += 1;
        self.dispatch(method, uri, headers, body)
            .unwrap_or_else(Reply::from)
    }

    fn dispatch(
        &mut self,
        method: &Method,
        uri: &http::Uri,
        headers: &HeaderMap,
        body: Result<Bytes, String>,
    ) -> Result<Reply, ErrorResponse> {
        if !authorized(headers, &self.opts.token) {
            return Err(unauthorized());
        }
        let route = route(method, uri.path());
        let is_create = matches!(route, Route::Create);
        if let Some(fault) = self.take_fault(is_create) {
            return Err(self.fault_response(&fault, body.as_deref().unwrap_or_default()));
        }
        match route {
            Route::List => self.list(&Query::parse(uri.query())),
            Route::Create => {
                let body = body.map_err(|e| invalid(format!("unreadable request body: {e}")))?;
                self.create(headers, &body)
            }
            Route::Get(id) => {
                let node = parse_node_id(id)
                    .and_then(|seq| self.nodes.get_mut(&seq))
                    .ok_or_else(|| not_found(id))?;
                Ok(Reply::Json(StatusCode::OK, json!({ "node": node.read() })))
            }
            Route::Delete(id) => {
                let seq = parse_node_id(id)
                    .filter(|seq| self.nodes.contains_key(seq))
                    .ok_or_else(|| not_found(id))?;
                if let Some(node) = self.nodes.remove(&seq)
                    && let Some(key) = node.idempotency_key
                {
                    self.keys.remove(&key);
                }
                // What was on the node stays the account's, on no node.
                for a in &mut self.addresses {
                    if a.node == Some(seq) {
                        a.node = None;
                    }
                }
                for members in self.groups.values_mut() {
                    members.remove(&seq);
                }
                Ok(Reply::NoContent)
            }
            Route::SetLabels(id) => {
                let seq = self.seq_of(id)?;
                let body = body.map_err(|e| invalid(format!("unreadable request body: {e}")))?;
                let value: Value = serde_json::from_slice(&body)
                    .map_err(|e| invalid(format!("request body is not valid JSON: {e}")))?;
                let labels = parse_labels(value.get("labels"))?;
                let node = self.nodes.get_mut(&seq).ok_or_else(|| not_found(id))?;
                node.spec.labels = labels;
                Ok(Reply::Json(
                    StatusCode::OK,
                    json!({ "node": node.to_json() }),
                ))
            }
            Route::Assign(id) => {
                let seq = self.seq_of(id)?;
                let body = body.map_err(|e| invalid(format!("unreadable request body: {e}")))?;
                self.assign(seq, &body)
            }
            Route::Release(id, address) => {
                let seq = self.seq_of(id)?;
                let a = self
                    .addresses
                    .iter_mut()
                    .find(|a| {
                        a.node == Some(seq) && (a.id == address || a.ip.to_string() == address)
                    })
                    .ok_or_else(|| {
                        render_error(
                            ErrorCode::NotFound,
                            &format!("address {address} is not on node {id}"),
                        )
                    })?;
                a.node = None;
                Ok(Reply::NoContent)
            }
            Route::Targets(group) => {
                let members = self
                    .groups
                    .get(group)
                    .ok_or_else(|| group_not_found(group))?;
                let targets: Vec<Value> = members
                    .iter()
                    .map(|(seq, port)| {
                        let health = match self.nodes.get(seq) {
                            Some(n) if n.reads > 0 => "healthy",
                            _ => "initial",
                        };
                        json!({"node_id": node_id(*seq), "port": port, "health": health})
                    })
                    .collect();
                Ok(Reply::Json(StatusCode::OK, json!({ "targets": targets })))
            }
            Route::Register(group, id) => {
                let seq = self.seq_of(id)?;
                let body = body.map_err(|e| invalid(format!("unreadable request body: {e}")))?;
                let port = if body.is_empty() {
                    None
                } else {
                    let value: Value = serde_json::from_slice(&body)
                        .map_err(|e| invalid(format!("request body is not valid JSON: {e}")))?;
                    match value.get("port") {
                        None | Some(Value::Null) => None,
                        Some(p) => Some(
                            p.as_u64()
                                .and_then(|p| u16::try_from(p).ok())
                                .filter(|p| *p > 0)
                                .ok_or_else(|| invalid("port: must be 1 to 65535"))?,
                        ),
                    }
                };
                let members = self
                    .groups
                    .get_mut(group)
                    .ok_or_else(|| group_not_found(group))?;
                members.insert(seq, port);
                Ok(Reply::NoContent)
            }
            Route::Deregister(group, id) => {
                let seq = self.seq_of(id)?;
                let members = self
                    .groups
                    .get_mut(group)
                    .ok_or_else(|| group_not_found(group))?;
                members.remove(&seq).ok_or_else(|| {
                    render_error(
                        ErrorCode::NotFound,
                        &format!("node {id} is not a target of {group}"),
                    )
                })?;
                Ok(Reply::NoContent)
            }
            Route::Subnet(id) => {
                let (subnet, zone, total) =
                    SUBNETS.iter().find(|s| s.0 == id).ok_or_else(|| {
                        render_error(ErrorCode::NotFound, &format!("subnet {id} not found"))
                    })?;
                let used = self.in_subnet(subnet);
                Ok(Reply::Json(
                    StatusCode::OK,
                    json!({"subnet": {"id": subnet, "zone": zone, "total_addresses": total,
                        "available_addresses": total.saturating_sub(used)}}),
                ))
            }
            Route::Unknown => Err(render_error(
                ErrorCode::NotFound,
                &format!("no such endpoint: {method} {}", uri.path()),
            )),
        }
    }

    /// The sequence number of live node `id`, or 404.
    fn seq_of(&self, id: &str) -> Result<u64, ErrorResponse> {
        parse_node_id(id)
            .filter(|seq| self.nodes.contains_key(seq))
            .ok_or_else(|| not_found(id))
    }

    /// Nodes in `subnet`.
    fn in_subnet(&self, subnet: &str) -> u64 {
        self.nodes
            .values()
            .filter(|n| n.spec.subnet == Some(subnet))
            .count() as u64
    }

    /// `POST /v1/nodes/{id}/addresses`: `{"kind": "private"|"public",
    /// "address": IP or id}`; without `address` a new one is taken.
    fn assign(&mut self, seq: u64, body: &[u8]) -> Result<Reply, ErrorResponse> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| invalid(format!("request body is not valid JSON: {e}")))?;
        let kind = match value.get("kind").and_then(Value::as_str) {
            Some("private") => "private",
            Some("public") => "public",
            _ => return Err(invalid("kind: must be \"private\" or \"public\"")),
        };
        let index = match value.get("address") {
            None | Some(Value::Null) => {
                let n = self.addresses.iter().filter(|a| a.kind == kind).count() as u8 + 1;
                let ip = if kind == "private" {
                    Ipv4Addr::new(10, 9, 0, n)
                } else {
                    Ipv4Addr::new(203, 0, 113, n)
                };
                self.addresses.push(StableAddr {
                    id: format!("ip-{:06}", self.addresses.len() + 1),
                    ip,
                    kind,
                    node: None,
                });
                self.addresses.len() - 1
            }
            Some(Value::String(wanted)) => {
                let index = self
                    .addresses
                    .iter()
                    .position(|a| a.id == *wanted || a.ip.to_string() == *wanted)
                    .ok_or_else(|| {
                        render_error(ErrorCode::NotFound, &format!("address {wanted} not found"))
                    })?;
                if self.addresses[index].kind != kind {
                    return Err(invalid(format!("address {wanted} is not a {kind} address")));
                }
                index
            }
            Some(_) => return Err(invalid("address: must be a string")),
        };
        let a = &mut self.addresses[index];
        a.node = Some(seq);
        Ok(Reply::Json(
            StatusCode::OK,
            json!({ "address": a.to_json() }),
        ))
    }

    /// Pops the first queued fault that applies to this request.
    fn take_fault(&mut self, is_create: bool) -> Option<RefFault> {
        let index = self.faults.iter().position(|f| match f {
            RefFault::RateLimited { .. } | RefFault::ServerError | RefFault::Unauthorized => true,
            RefFault::Capacity | RefFault::Quota => is_create,
        })?;
        self.faults.remove(index)
    }

    /// The response of a fault; a capacity error names the type and zone
    /// the create body asked for, as far as it can be read.
    fn fault_response(&self, fault: &RefFault, body: &[u8]) -> ErrorResponse {
        match fault {
            RefFault::RateLimited { retry_after_s } => rate_limited_error(*retry_after_s),
            RefFault::Capacity => {
                let value: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                let node_type = value["type"].as_str().unwrap_or("unknown");
                let zone = value["zone"].as_str().unwrap_or(DEFAULT_ZONE);
                capacity_error(zone, node_type)
            }
            RefFault::Quota => quota_error(self.opts.max_nodes),
            RefFault::ServerError => render_error(
                ErrorCode::Internal,
                "internal error (injected); retry later",
            ),
            RefFault::Unauthorized => unauthorized(),
        }
    }

    fn list(&mut self, q: &Query) -> Result<Reply, ErrorResponse> {
        let selector = Selector::parse(q.get("label_selector").unwrap_or(""))?;
        let page = page_param(q, "page", 1, usize::MAX)?;
        let per_page = page_param(q, "per_page", DEFAULT_PER_PAGE, MAX_PER_PAGE)?;
        let matching: Vec<u64> = self
            .nodes
            .values()
            .filter(|n| selector.matches(&n.spec.labels))
            .map(|n| n.seq)
            .collect();
        let start = (page - 1).saturating_mul(per_page).min(matching.len());
        let end = start.saturating_add(per_page).min(matching.len());
        let items: Vec<Value> = matching[start..end]
            .iter()
            .filter_map(|seq| self.nodes.get_mut(seq).map(Node::read))
            .collect();
        let next_page = if end < matching.len() {
            json!(page + 1)
        } else {
            Value::Null
        };
        Ok(Reply::Json(
            StatusCode::OK,
            json!({ "nodes": items, "next_page": next_page }),
        ))
    }

    fn create(&mut self, headers: &HeaderMap, body: &[u8]) -> Result<Reply, ErrorResponse> {
        let key = idempotency_key(headers)?;
        let spec = parse_create(body)?;

        if let Some(key) = &key
            && let Some(seq) = self.keys.get(key).copied()
        {
            match self.nodes.get(&seq) {
                Some(node) if node.spec == spec => {
                    return Ok(Reply::Json(
                        StatusCode::OK,
                        json!({ "node": node.to_json() }),
                    ));
                }
                Some(node) => {
                    return Err(render_error(
                        ErrorCode::IdempotencyConflict,
                        &format!(
                            "Idempotency-Key {key:?} was used for node {} with a different request body",
                            node.id()
                        ),
                    ));
                }
                // The node is gone: the key is free again.
                None => {
                    self.keys.remove(key);
                }
            }
        }

        let node_type = catalog::node_type(spec.node_type)
            .ok_or_else(|| invalid(format!("type: unknown node type {:?}", spec.node_type)))?;
        if !node_type.offered_in(spec.zone) || node_type.price(spec.capacity_type).is_none() {
            return Err(capacity_error(spec.zone, spec.node_type));
        }
        if self.nodes.len() >= self.opts.max_nodes {
            return Err(quota_error(self.opts.max_nodes));
        }
        if let Some(subnet) = spec.subnet
            && let Some((_, _, total)) = SUBNETS.iter().find(|s| s.0 == subnet)
            && self.in_subnet(subnet) >= *total
        {
            return Err(render_error(
                ErrorCode::InsufficientCapacity,
                &format!("subnet {subnet} has no free address"),
            ));
        }
        let seq = self.insert(spec, key.clone());
        if let Some(key) = key {
            self.keys.insert(key, seq);
        }
        let node = self
            .nodes
            .get(&seq)
            .map(Node::to_json)
            .unwrap_or(Value::Null);
        Ok(Reply::Json(StatusCode::CREATED, json!({ "node": node })))
    }
}

/// The `Idempotency-Key` header, if sent: 1 to 255 visible ASCII characters.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ErrorResponse> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    let bad = || {
        invalid(format!(
            "Idempotency-Key: must be 1 to {MAX_IDEMPOTENCY_KEY_LEN} visible ASCII characters"
        ))
    };
    let key = value.to_str().map_err(|_| bad())?.trim();
    if key.is_empty()
        || key.len() > MAX_IDEMPOTENCY_KEY_LEN
        || !key.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(bad());
    }
    Ok(Some(key.to_string()))
}

/// Parses and checks a create body, applying defaults. Each error names
/// the field at fault.
fn parse_create(body: &[u8]) -> Result<CreateSpec, ErrorResponse> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| invalid(format!("request body is not valid JSON: {e}")))?;
    let Value::Object(obj) = value else {
        return Err(invalid("request body must be a JSON object"));
    };
    if let Some(unknown) = obj.keys().find(|k| !CREATE_FIELDS.contains(&k.as_str())) {
        return Err(invalid(format!(
            "{unknown}: unknown field; accepted fields are {}",
            CREATE_FIELDS.join(", ")
        )));
    }

    let node_type: &'static NodeType = match obj.get("type") {
        Some(Value::String(t)) => catalog::node_type(t).ok_or_else(|| {
            invalid(format!(
                "type: unknown node type {t:?}; known types are {}",
                catalog::NODE_TYPES
                    .iter()
                    .map(|t| t.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?,
        None | Some(Value::Null) => return Err(invalid("type: required field is missing")),
        Some(_) => return Err(invalid("type: must be a string")),
    };
    let subnet = match opt_string(&obj, "subnet")? {
        None => None,
        Some(id) => Some(SUBNETS.iter().find(|s| s.0 == id).ok_or_else(|| {
            invalid(format!(
                "subnet: unknown subnet {id:?}; known subnets are {}",
                SUBNETS.map(|s| s.0).join(", ")
            ))
        })?),
    };
    let zone = match opt_string(&obj, "zone")? {
        None if subnet.is_some() => subnet.map_or(DEFAULT_ZONE, |s| s.1),
        None => DEFAULT_ZONE,
        Some(z) => catalog::zone(z).ok_or_else(|| {
            invalid(format!(
                "zone: unknown zone {z:?}; known zones are {}",
                catalog::ZONES.join(", ")
            ))
        })?,
    };
    let capacity_type = match opt_string(&obj, "capacity_type")? {
        None | Some(ON_DEMAND) => ON_DEMAND,
        Some(SPOT) => SPOT,
        Some(other) => {
            return Err(invalid(format!(
                "capacity_type: {other:?} is not one of \"{ON_DEMAND}\", \"{SPOT}\""
            )));
        }
    };
    if let Some((id, subnet_zone, _)) = subnet
        && *subnet_zone != zone
    {
        return Err(invalid(format!(
            "subnet: {id} is in {subnet_zone}, not in zone {zone}"
        )));
    }
    let labels = parse_labels(obj.get("labels"))?;
    Ok(CreateSpec {
        node_type: node_type.name,
        zone,
        capacity_type,
        labels,
        subnet: subnet.map(|s| s.0),
    })
}

fn opt_string<'a>(
    obj: &'a Map<String, Value>,
    field: &str,
) -> Result<Option<&'a str>, ErrorResponse> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(invalid(format!("{field}: must be a string"))),
    }
}

fn parse_labels(value: Option<&Value>) -> Result<BTreeMap<String, String>, ErrorResponse> {
    let obj = match value {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(obj)) => obj,
        Some(_) => return Err(invalid("labels: must be an object of strings")),
    };
    let mut labels = BTreeMap::new();
    for (k, v) in obj {
        if !is_valid_label(k) {
            return Err(invalid(format!(
                "labels: key {k:?} does not match [A-Za-z0-9._/-]{{1,63}}"
            )));
        }
        let Value::String(v) = v else {
            return Err(invalid(format!(
                "labels: the value of {k:?} must be a string"
            )));
        };
        if !is_valid_label(v) {
            return Err(invalid(format!(
                "labels: value {v:?} of {k:?} does not match [A-Za-z0-9._/-]{{1,63}}"
            )));
        }
        labels.insert(k.clone(), v.clone());
    }
    Ok(labels)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_exactly() {
        assert_eq!(node_id(1), "n-000001");
        assert_eq!(node_id(1_234_567), "n-1234567");
        assert_eq!(parse_node_id("n-000001"), Some(1));
        assert_eq!(parse_node_id("n-1234567"), Some(1_234_567));
        for bad in ["n-1", "n-0000001", "000001", "n-", "n-00000x", "n--00001"] {
            assert_eq!(parse_node_id(bad), None, "{bad}");
        }
    }

    #[test]
    fn addresses() {
        assert_eq!(address_for(1), Ipv4Addr::new(10, 1, 0, 1));
        assert_eq!(address_for(254), Ipv4Addr::new(10, 1, 0, 254));
        assert_eq!(address_for(255), Ipv4Addr::new(10, 1, 1, 1));
        assert_eq!(address_for(254 * 256 + 1), Ipv4Addr::new(10, 2, 0, 1));
    }

    #[test]
    fn labels() {
        for ok in ["a", "wasmprov-owner", "A.b_c/d-e", &"x".repeat(63)] {
            assert!(is_valid_label(ok), "{ok}");
        }
        for bad in ["", "a b", "a=b", "é", "a,b", &"x".repeat(64)] {
            assert!(!is_valid_label(bad), "{bad}");
        }
    }

    #[test]
    fn selectors() {
        assert_eq!(Selector::parse("").unwrap(), Selector::default());
        let s = Selector::parse("a=1,b=x.y").unwrap();
        let labels: BTreeMap<String, String> = [("a", "1"), ("b", "x.y"), ("c", "z")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert!(s.matches(&labels));
        assert!(!Selector::parse("a=2").unwrap().matches(&labels));
        assert!(!Selector::parse("d=1").unwrap().matches(&labels));
        for bad in ["a", "a==1", "=1", "a=", "a=1,", ",a=1", "a!=1", "a in (1)"] {
            let err = Selector::parse(bad).unwrap_err();
            assert_eq!(err.status, 400, "{bad}");
            assert!(err.body.contains("label_selector"), "{bad}: {}", err.body);
        }
    }

    #[test]
    fn create_bodies() {
        let spec = parse_create(br#"{"type":"small"}"#).unwrap();
        assert_eq!(
            spec,
            CreateSpec {
                node_type: "small",
                zone: "zone-a",
                capacity_type: "on-demand",
                labels: BTreeMap::new(),
                subnet: None,
            }
        );
        let spec = parse_create(br#"{"type":"small","subnet":"subnet-b"}"#).unwrap();
        assert_eq!((spec.zone, spec.subnet), ("zone-b", Some("subnet-b")));
        for bad in [
            r#"{"type":"small","subnet":"subnet-x"}"#,
            r#"{"type":"small","subnet":"subnet-b","zone":"zone-a"}"#,
            r#"{"type":"small","subnet":7}"#,
        ] {
            let err = parse_create(bad.as_bytes()).unwrap_err();
            assert!(err.body.contains("subnet"), "{bad}: {}", err.body);
        }
        let spec = parse_create(
            br#"{"type":"gpu","zone":"zone-b","capacity_type":"spot","labels":{"k":"v"}}"#,
        )
        .unwrap();
        assert_eq!((spec.zone, spec.capacity_type), ("zone-b", "spot"));
        for (body, field) in [
            (&br#"{"type":"xl"}"#[..], "type"),
            (br#"{}"#, "type"),
            (br#"{"type":3}"#, "type"),
            (br#"{"type":"small","zone":"zone-c"}"#, "zone"),
            (
                br#"{"type":"small","capacity_type":"reserved"}"#,
                "capacity_type",
            ),
            (br#"{"type":"small","labels":{"a b":"c"}}"#, "labels"),
            (br#"{"type":"small","labels":{"a":""}}"#, "labels"),
            (br#"{"type":"small","labels":{"a":1}}"#, "labels"),
            (br#"{"type":"small","labels":[]}"#, "labels"),
            (br#"{"type":"small","name":"x"}"#, "name"),
            (br#"{"type":"small""#, "JSON"),
            (br#"[]"#, "object"),
        ] {
            let err = parse_create(body).unwrap_err();
            assert_eq!(err.status, 400);
            assert!(
                err.body.contains(field),
                "{}: {}",
                String::from_utf8_lossy(body),
                err.body
            );
        }
    }
}
