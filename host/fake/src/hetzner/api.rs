//! State and request handling of the fake Hetzner API.
//!
//! Everything goes through one axum fallback handler, so that auth, fault
//! injection, rate-limit headers and JSON 404s apply uniformly to every path,
//! and routing is a plain `match` on method and path segments. The state sits
//! behind one mutex that each request holds for its (short, non-async)
//! duration, which makes every request atomic.

use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, Method, StatusCode};
use serde_json::{Map, Value, json};

use super::catalog::{self, Image, LOCATIONS, Location, SERVER_TYPES, ServerType};
use super::selector::LabelSelector;
use super::{FakeServer, Fault, HetznerFakeOptions};
use crate::wire::{self, Query, authorized, rfc3339_now, unix_now};

/// Largest request body read; bigger ones are rejected as `invalid_input`.
const MAX_BODY_BYTES: usize = 1 << 20;
/// Largest `user_data` accepted, as documented for the real API (32 KiB).
const MAX_USER_DATA_BYTES: usize = 32 * 1024;
/// Requests per hour in the (advisory) rate-limit bucket.
const RATE_LIMIT: u64 = 3600;
/// `per_page` when the client does not ask.
const DEFAULT_PER_PAGE: usize = 25;

/// Locks the state, shrugging off poisoning (a panicking test thread must
/// not take the fake down with it).
pub(crate) fn lock(state: &Mutex<FakeState>) -> MutexGuard<'_, FakeState> {
    wire::lock(state)
}

/// The router: a single fallback handler for every method and path.
pub(crate) fn router(state: Arc<Mutex<FakeState>>) -> Router {
    Router::new().fallback(entry).with_state(state)
}

async fn entry(State(state): State<Arc<Mutex<FakeState>>>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|e| e.to_string());
    let (reply, rate, delay) = {
        let mut s = lock(&state);
        let delay = s.opts.response_delay;
        let (reply, rate) = s.handle(&parts.method, &parts.uri, &parts.headers, body);
        (reply, rate, delay)
    };
    // The request took effect; its answer is late (a crash of the client
    // in this window loses the answer, not the effect).
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    tracing::debug!(method = %parts.method, uri = %parts.uri, status = %reply.status, "fake hetzner request");
    reply.into_response(rate)
}

/// An error in the Hetzner envelope.
#[derive(Debug)]
pub(crate) struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    details: Value,
    retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            details: json!({}),
            retry_after: None,
        }
    }
    fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "unable to authenticate",
        )
    }
    fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} not found"),
        )
    }
    fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_input", message)
    }
    /// `invalid_input` naming the offending field in `details.fields`, as the
    /// real API does.
    fn invalid_field(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        let mut err = Self::invalid(format!("invalid input in field '{field}'"));
        err.details = json!({ "fields": [{ "name": field, "messages": [message] }] });
        err
    }
    fn json_error(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "json_error", message)
    }
    fn unavailable(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::PRECONDITION_FAILED,
            "resource_unavailable",
            message,
        )
    }
    fn limit_exceeded(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "resource_limit_exceeded", message)
    }
    fn from_fault(fault: &Fault) -> Self {
        match fault {
            Fault::RateLimited { retry_after_secs } => {
                let mut err = Self::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limit_exceeded",
                    "limit of 3600 requests per hour reached",
                );
                err.retry_after = Some(*retry_after_secs);
                err
            }
            Fault::ResourceUnavailable => {
                Self::unavailable("server location disabled or out of capacity")
            }
            Fault::ResourceLimitExceeded => Self::limit_exceeded("server limit exceeded"),
            Fault::ServerError => Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "an internal error occurred",
            ),
            Fault::Unauthorized => Self::unauthorized(),
        }
    }
}

/// What a request produced, before HTTP headers are added.
#[derive(Debug)]
pub(crate) struct Reply {
    status: StatusCode,
    body: Value,
    retry_after: Option<u64>,
}

impl From<ApiError> for Reply {
    fn from(e: ApiError) -> Self {
        Reply {
            status: e.status,
            body: json!({ "error": { "code": e.code, "message": e.message, "details": e.details } }),
            retry_after: e.retry_after,
        }
    }
}

impl Reply {
    fn ok(body: Value) -> Self {
        Self::with_status(StatusCode::OK, body)
    }
    fn with_status(status: StatusCode, body: Value) -> Self {
        Reply {
            status,
            body,
            retry_after: None,
        }
    }

    fn into_response(self, rate: RateInfo) -> Response {
        let body = serde_json::to_vec(&self.body).unwrap_or_else(|_| b"{}".to_vec());
        let mut resp = (self.status, Body::from(body)).into_response();
        let h = resp.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        h.insert("ratelimit-limit", HeaderValue::from(RATE_LIMIT));
        let remaining = if self.retry_after.is_some() {
            0
        } else {
            rate.remaining
        };
        h.insert("ratelimit-remaining", HeaderValue::from(remaining));
        h.insert("ratelimit-reset", HeaderValue::from(rate.reset_unix));
        if let Some(secs) = self.retry_after {
            h.insert(http::header::RETRY_AFTER, HeaderValue::from(secs));
        }
        resp
    }
}

/// Rate-limit header values for one response.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RateInfo {
    remaining: u64,
    reset_unix: u64,
}

/// Token bucket of [`RATE_LIMIT`] requests refilling one per second; only
/// reported in headers, never enforced.
#[derive(Debug)]
struct RateBucket {
    tokens: f64,
    last: Instant,
}

impl RateBucket {
    fn take(&mut self) -> RateInfo {
        let now = Instant::now();
        let refill = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + refill).min(RATE_LIMIT as f64);
        self.tokens = (self.tokens - 1.0).max(0.0);
        let remaining = self.tokens.floor() as u64;
        let until_full = (RATE_LIMIT as f64 - self.tokens).ceil() as u64;
        RateInfo {
            remaining,
            reset_unix: unix_now() + until_full,
        }
    }
}

/// One live server.
#[derive(Debug)]
struct Server {
    id: u64,
    name: String,
    server_type: &'static ServerType,
    location: &'static Location,
    image: &'static Image,
    labels: BTreeMap<String, String>,
    ipv4: Ipv4Addr,
    user_data: Option<String>,
    /// Ids of the SSH keys the server was created with.
    ssh_keys: Vec<u64>,
    start_after_create: bool,
    created: String,
    /// GETs that have returned this server so far.
    polls: u32,
}

/// An SSH key of the project (`/ssh_keys`).
#[derive(Clone, Debug)]
struct SshKey {
    id: u64,
    name: String,
    /// As given: `type base64 [comment]`.
    public_key: String,
    /// MD5 of the key's decoded data, `aa:bb:…`, as the API shows it.
    fingerprint: String,
    labels: BTreeMap<String, String>,
    created: String,
}

impl SshKey {
    fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "fingerprint": self.fingerprint,
            "public_key": self.public_key,
            "labels": self.labels,
            "created": self.created,
        })
    }
}

/// The MD5 fingerprint of an OpenSSH public key line, or `None` when it is
/// not one (`type base64 [comment]`).
fn fingerprint(public_key: &str) -> Option<String> {
    use base64::Engine as _;
    use md5::Digest as _;
    let mut parts = public_key.split_whitespace();
    let kind = parts.next()?;
    let data = base64::engine::general_purpose::STANDARD
        .decode(parts.next()?)
        .ok()?;
    // The data starts with the key type, length-prefixed.
    let name_len = u32::from_be_bytes(data.get(..4)?.try_into().ok()?) as usize;
    if data.get(4..4 + name_len)? != kind.as_bytes() {
        return None;
    }
    let digest = md5::Md5::digest(&data);
    Some(
        digest
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(":"),
    )
}

impl Server {
    fn status(&self, boot_delay_polls: u32) -> &'static str {
        if self.polls < boot_delay_polls {
            "initializing"
        } else if !self.start_after_create {
            "off"
        } else if self.polls < boot_delay_polls.saturating_mul(2) {
            "starting"
        } else {
            "running"
        }
    }

    fn to_json(&self, boot_delay_polls: u32) -> Value {
        let ip = self.ipv4.to_string();
        json!({
            "id": self.id,
            "name": self.name,
            "status": self.status(boot_delay_polls),
            "created": self.created,
            "public_net": {
                "ipv4": { "id": self.id + 40_000_000, "ip": ip, "blocked": false, "dns_ptr": format!("static.{ip}.clients.your-server.de") },
                "ipv6": null,
                "floating_ips": [],
                "firewalls": [],
            },
            "private_net": [],
            "server_type": self.server_type.to_json(),
            "datacenter": self.location.datacenter_json(),
            "image": self.image.to_json(self.server_type.architecture()),
            "iso": null,
            "rescue_enabled": false,
            "backup_window": null,
            "outgoing_traffic": 0,
            "ingoing_traffic": 0,
            "included_traffic": 21_990_232_555_520_u64,
            "primary_disk_size": self.server_type.disk_gb,
            "labels": self.labels,
            "locked": false,
            "protection": { "delete": false, "rebuild": false },
            "load_balancers": [],
            "volumes": [],
            "placement_group": null,
        })
    }
}

/// An action returned by create/delete; served later as finished.
#[derive(Debug)]
struct Action {
    id: u64,
    command: &'static str,
    server_id: u64,
    started: String,
}

impl Action {
    fn to_json(&self, finished: bool) -> Value {
        json!({
            "id": self.id,
            "command": self.command,
            "status": if finished { "success" } else { "running" },
            "progress": if finished { 100 } else { 0 },
            "started": self.started,
            "finished": if finished { Value::String(self.started.clone()) } else { Value::Null },
            "resources": [{ "id": self.server_id, "type": "server" }],
            "error": null,
        })
    }
}

/// All mutable state of one fake.
#[derive(Debug)]
pub(crate) struct FakeState {
    opts: HetznerFakeOptions,
    servers: BTreeMap<u64, Server>,
    actions: BTreeMap<u64, Action>,
    ssh_keys: BTreeMap<u64, SshKey>,
    next_ssh_key_id: u64,
    next_server_id: u64,
    next_action_id: u64,
    next_ip_index: u32,
    pub(crate) faults: VecDeque<Fault>,
    pub(crate) request_count: u64,
    /// Servers each page after the first is short of, as if that many
    /// servers listed before it had been deleted meanwhile.
    pub(crate) list_shift: usize,
    rate: RateBucket,
}

/// Which endpoint a request is for.
enum Route<'a> {
    Locations,
    Location(&'a str),
    ServerTypes,
    ServerType(&'a str),
    ListServers,
    CreateServer,
    GetServer(&'a str),
    DeleteServer(&'a str),
    Action(&'a str),
    ListSshKeys,
    CreateSshKey,
    Unknown,
}

fn route<'a>(method: &Method, path: &'a str) -> Route<'a> {
    let path = path.strip_suffix('/').unwrap_or(path);
    let Some(rest) = path.strip_prefix("/v1/") else {
        return Route::Unknown;
    };
    let segments: Vec<&str> = rest.split('/').collect();
    match (method, segments.as_slice()) {
        (&Method::GET, ["locations"]) => Route::Locations,
        (&Method::GET, ["locations", id]) => Route::Location(id),
        (&Method::GET, ["server_types"]) => Route::ServerTypes,
        (&Method::GET, ["server_types", id]) => Route::ServerType(id),
        (&Method::GET, ["servers"]) => Route::ListServers,
        (&Method::POST, ["servers"]) => Route::CreateServer,
        (&Method::GET, ["servers", id]) => Route::GetServer(id),
        (&Method::DELETE, ["servers", id]) => Route::DeleteServer(id),
        (&Method::GET, ["actions", id]) => Route::Action(id),
        (&Method::GET, ["ssh_keys"]) => Route::ListSshKeys,
        (&Method::POST, ["ssh_keys"]) => Route::CreateSshKey,
        _ => Route::Unknown,
    }
}

fn parse_id(raw: &str, what: &str) -> Result<u64, ApiError> {
    raw.parse::<u64>()
        .map_err(|_| ApiError::invalid(format!("invalid {what} id '{raw}'")))
}

/// Page window chosen by `page` / `per_page`.
struct Page {
    page: usize,
    per_page: usize,
}

impl Page {
    fn from_query(q: &Query, max: usize) -> Result<Self, ApiError> {
        let num = |key: &str, default: usize| -> Result<usize, ApiError> {
            match q.get(key) {
                None => Ok(default),
                Some(raw) => match raw.trim().parse::<usize>() {
                    Ok(n) if n >= 1 => Ok(n),
                    _ => Err(ApiError::invalid(format!(
                        "invalid value '{raw}' for '{key}': must be a positive integer"
                    ))),
                },
            }
        };
        let page = num("page", 1)?;
        let per_page = num("per_page", DEFAULT_PER_PAGE)?.min(max);
        Ok(Page { page, per_page })
    }

    /// The slice of `0..total` on this page.
    fn range(&self, total: usize) -> std::ops::Range<usize> {
        let start = (self.page - 1).saturating_mul(self.per_page).min(total);
        let end = start.saturating_add(self.per_page).min(total);
        start..end
    }

    /// The `meta` object with Hetzner's pagination block.
    fn meta(&self, total: usize) -> Value {
        let last_page = total.div_ceil(self.per_page).max(1);
        json!({
            "pagination": {
                "page": self.page,
                "per_page": self.per_page,
                "previous_page": if self.page > 1 { json!(self.page - 1) } else { Value::Null },
                "next_page": if self.page < last_page { json!(self.page + 1) } else { Value::Null },
                "last_page": last_page,
                "total_entries": total,
            }
        })
    }
}

impl FakeState {
    pub(crate) fn new(opts: HetznerFakeOptions) -> Self {
        Self {
            opts,
            servers: BTreeMap::new(),
            actions: BTreeMap::new(),
            ssh_keys: BTreeMap::new(),
            next_ssh_key_id: 7_000_001,
            next_server_id: 1_000_001,
            next_action_id: 5_000_001,
            next_ip_index: 0,
            faults: VecDeque::new(),
            request_count: 0,
            list_shift: 0,
            rate: RateBucket {
                tokens: RATE_LIMIT as f64,
                last: Instant::now(),
            },
        }
    }

    /// Public view of the live servers, in id order.
    pub(crate) fn snapshot(&self) -> Vec<FakeServer> {
        self.servers
            .values()
            .map(|s| FakeServer {
                id: s.id,
                name: s.name.clone(),
                status: s.status(self.opts.boot_delay_polls).to_string(),
                server_type: s.server_type.name.to_string(),
                location: s.location.name.to_string(),
                labels: s.labels.clone(),
                ipv4: s.ipv4.to_string(),
                user_data: s.user_data.clone(),
                ssh_keys: s
                    .ssh_keys
                    .iter()
                    .filter_map(|id| self.ssh_keys.get(id))
                    .map(|k| k.public_key.clone())
                    .collect(),
            })
            .collect()
    }

    /// Serves one request: counts it, authenticates it, applies a queued
    /// fault if one matches, then dispatches it.
    pub(crate) fn handle(
        &mut self,
        method: &Method,
        uri: &http::Uri,
        headers: &HeaderMap,
        body: Result<Bytes, String>,
    ) -> (Reply, RateInfo) {
        self.request_count += 1;
        let rate = self.rate.take();
        let reply = self
            .dispatch(method, uri, headers, body)
            .unwrap_or_else(Reply::from);
        (reply, rate)
    }

    fn dispatch(
        &mut self,
        method: &Method,
        uri: &http::Uri,
        headers: &HeaderMap,
        body: Result<Bytes, String>,
    ) -> Result<Reply, ApiError> {
        if !authorized(headers, &self.opts.token) {
            return Err(ApiError::unauthorized());
        }
        let route = route(method, uri.path());
        self.take_fault(matches!(route, Route::CreateServer))?;
        let query = Query::parse(uri.query());
        match route {
            Route::Locations => self.list_locations(&query),
            Route::Location(id) => {
                let id = parse_id(id, "location")?;
                LOCATIONS
                    .iter()
                    .find(|l| l.id == id)
                    .map(|l| Reply::ok(json!({ "location": l.to_json() })))
                    .ok_or_else(|| ApiError::not_found("location"))
            }
            Route::ServerTypes => self.list_server_types(&query),
            Route::ServerType(id) => {
                let id = parse_id(id, "server type")?;
                SERVER_TYPES
                    .iter()
                    .find(|t| t.id == id)
                    .map(|t| Reply::ok(json!({ "server_type": t.to_json() })))
                    .ok_or_else(|| ApiError::not_found("server type"))
            }
            Route::ListServers => self.list_servers(&query),
            Route::CreateServer => {
                let body = body.map_err(|e| ApiError::invalid(format!("unreadable body: {e}")))?;
                self.create_server(&body)
            }
            Route::GetServer(id) => {
                let id = parse_id(id, "server")?;
                let boot = self.opts.boot_delay_polls;
                let server = self
                    .servers
                    .get_mut(&id)
                    .ok_or_else(|| ApiError::not_found("server"))?;
                let body = json!({ "server": server.to_json(boot) });
                server.polls = server.polls.saturating_add(1);
                Ok(Reply::ok(body))
            }
            Route::DeleteServer(id) => {
                let id = parse_id(id, "server")?;
                self.servers
                    .remove(&id)
                    .ok_or_else(|| ApiError::not_found("server"))?;
                let action = self.new_action("delete_server", id);
                Ok(Reply::ok(json!({ "action": action })))
            }
            Route::Action(id) => {
                let id = parse_id(id, "action")?;
                self.actions
                    .get(&id)
                    .map(|a| Reply::ok(json!({ "action": a.to_json(true) })))
                    .ok_or_else(|| ApiError::not_found("action"))
            }
            Route::ListSshKeys => {
                let keys: Vec<Value> = self
                    .ssh_keys
                    .values()
                    .filter(|k| query.get("name").is_none_or(|n| k.name == n))
                    .filter(|k| query.get("fingerprint").is_none_or(|f| k.fingerprint == f))
                    .map(SshKey::to_json)
                    .collect();
                let page = Page::from_query(&query, 50)?;
                let range = page.range(keys.len());
                Ok(Reply::ok(json!({
                    "ssh_keys": keys[range].to_vec(),
                    "meta": page.meta(keys.len()),
                })))
            }
            Route::CreateSshKey => {
                let body = body.map_err(|e| ApiError::invalid(format!("unreadable body: {e}")))?;
                self.create_ssh_key(&body)
            }
            Route::Unknown => Err(ApiError::not_found("resource")),
        }
    }

    /// `POST /ssh_keys`: a name unique in the project, a public key whose
    /// fingerprint is unique too.
    fn create_ssh_key(&mut self, body: &[u8]) -> Result<Reply, ApiError> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::json_error(format!("invalid JSON in request body: {e}")))?;
        let Value::Object(obj) = value else {
            return Err(ApiError::invalid("request body must be a JSON object"));
        };
        let name = opt_string(&obj, "name")?
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ApiError::invalid_field("name", "Missing data for required field."))?;
        let public_key = opt_string(&obj, "public_key")?.ok_or_else(|| {
            ApiError::invalid_field("public_key", "Missing data for required field.")
        })?;
        let fingerprint = fingerprint(&public_key)
            .ok_or_else(|| ApiError::invalid_field("public_key", "invalid public key"))?;
        let labels = parse_labels(obj.get("labels"))?;
        let taken = |field: &str, message: &str| {
            let mut err = ApiError::new(StatusCode::CONFLICT, "uniqueness_error", message);
            err.details = json!({ "fields": [{ "name": field }] });
            err
        };
        if self.ssh_keys.values().any(|k| k.name == name) {
            return Err(taken("name", "SSH key with the same name already exists"));
        }
        if self.ssh_keys.values().any(|k| k.fingerprint == fingerprint) {
            return Err(taken(
                "public_key",
                "SSH key with the same fingerprint already exists",
            ));
        }
        let id = self.next_ssh_key_id;
        self.next_ssh_key_id += 1;
        let key = SshKey {
            id,
            name,
            public_key,
            fingerprint,
            labels,
            created: rfc3339_now(),
        };
        let body = json!({ "ssh_key": key.to_json() });
        self.ssh_keys.insert(id, key);
        Ok(Reply::with_status(StatusCode::CREATED, body))
    }

    /// Pops the first queued fault that applies to this request.
    fn take_fault(&mut self, is_create: bool) -> Result<(), ApiError> {
        let applies = |f: &Fault| match f {
            Fault::RateLimited { .. } | Fault::ServerError | Fault::Unauthorized => true,
            Fault::ResourceUnavailable | Fault::ResourceLimitExceeded => is_create,
        };
        let index = self.faults.iter().position(applies);
        match index.and_then(|i| self.faults.remove(i)) {
            Some(fault) => Err(ApiError::from_fault(&fault)),
            None => Ok(()),
        }
    }

    fn new_action(&mut self, command: &'static str, server_id: u64) -> Value {
        let id = self.next_action_id;
        self.next_action_id += 1;
        let action = Action {
            id,
            command,
            server_id,
            started: rfc3339_now(),
        };
        let json = action.to_json(false);
        self.actions.insert(id, action);
        json
    }

    fn list_locations(&self, q: &Query) -> Result<Reply, ApiError> {
        let items: Vec<Value> = LOCATIONS
            .iter()
            .filter(|l| q.get("name").is_none_or(|n| n == l.name))
            .map(Location::to_json)
            .collect();
        let page = Page::from_query(q, self.opts.page_size_max)?;
        let meta = page.meta(items.len());
        let items = items[page.range(items.len())].to_vec();
        Ok(Reply::ok(json!({ "locations": items, "meta": meta })))
    }

    fn list_server_types(&self, q: &Query) -> Result<Reply, ApiError> {
        let items: Vec<Value> = SERVER_TYPES
            .iter()
            .filter(|t| q.get("name").is_none_or(|n| n == t.name))
            .map(ServerType::to_json)
            .collect();
        let page = Page::from_query(q, self.opts.page_size_max)?;
        let meta = page.meta(items.len());
        let items = items[page.range(items.len())].to_vec();
        Ok(Reply::ok(json!({ "server_types": items, "meta": meta })))
    }

    fn list_servers(&mut self, q: &Query) -> Result<Reply, ApiError> {
        let boot = self.opts.boot_delay_polls;
        let selector = match q.get("label_selector") {
            Some(raw) => LabelSelector::parse(raw).map_err(ApiError::invalid)?,
            None => LabelSelector::default(),
        };
        let name = q.get("name");
        let statuses: Vec<&str> = q.all("status").collect();
        let mut ids: Vec<(u64, &str)> = self
            .servers
            .values()
            .filter(|s| name.is_none_or(|n| n == s.name))
            .filter(|s| statuses.is_empty() || statuses.contains(&s.status(boot)))
            .filter(|s| selector.matches(&s.labels))
            .map(|s| (s.id, s.name.as_str()))
            .collect();
        // Apply sort keys last-to-first with a stable sort, so the first key
        // is the primary one. The default (and tie-break) order is by id.
        for sort in q.all("sort").collect::<Vec<_>>().into_iter().rev() {
            let (field, dir) = sort.split_once(':').unwrap_or((sort, "asc"));
            let desc = match dir {
                "asc" => false,
                "desc" => true,
                _ => {
                    return Err(ApiError::invalid(format!(
                        "invalid sort direction in '{sort}'"
                    )));
                }
            };
            match field {
                "id" | "created" => ids.sort_by_key(|(id, _)| *id),
                "name" => ids.sort_by(|a, b| a.1.cmp(b.1)),
                _ => return Err(ApiError::invalid(format!("invalid sort field '{field}'"))),
            }
            if desc {
                ids.reverse();
            }
        }
        let mut ids: Vec<u64> = ids.into_iter().map(|(id, _)| id).collect();
        let page = Page::from_query(q, self.opts.page_size_max)?;
        // A list read while servers are deleted: by page p, (p - 1) * shift
        // servers listed before it are gone, so as many of those that were
        // to come move to pages already read, and the reader misses them.
        let gone = self.list_shift.saturating_mul(page.page - 1).min(ids.len());
        ids.drain(..gone);
        let meta = page.meta(ids.len());
        let mut items = Vec::new();
        for id in &ids[page.range(ids.len())] {
            if let Some(server) = self.servers.get_mut(id) {
                items.push(server.to_json(boot));
                server.polls = server.polls.saturating_add(1);
            }
        }
        Ok(Reply::ok(json!({ "servers": items, "meta": meta })))
    }

    pub(crate) fn create_server(&mut self, body: &[u8]) -> Result<Reply, ApiError> {
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::json_error(format!("invalid JSON in request body: {e}")))?;
        let Value::Object(obj) = value else {
            return Err(ApiError::invalid("request body must be a JSON object"));
        };

        let name = match obj.get("name") {
            Some(Value::String(n)) if is_valid_hostname(n) => n.clone(),
            Some(Value::String(_)) => {
                return Err(ApiError::invalid_field(
                    "name",
                    "name must be a valid hostname",
                ));
            }
            None | Some(Value::Null) => {
                return Err(ApiError::invalid_field(
                    "name",
                    "Missing data for required field.",
                ));
            }
            Some(_) => return Err(ApiError::invalid_field("name", "Not a valid string.")),
        };

        let type_key = string_or_id(&obj, "server_type")?;
        let server_type = catalog::server_type_by_name(&type_key)
            .or_else(|| {
                let id = type_key.parse::<u64>().ok()?;
                SERVER_TYPES.iter().find(|t| t.id == id)
            })
            .ok_or_else(|| {
                ApiError::invalid_field(
                    "server_type",
                    format!("server type '{type_key}' not found"),
                )
            })?;

        let image_key = string_or_id(&obj, "image")?;
        let image = catalog::image_by_name_or_id(&image_key).ok_or_else(|| {
            ApiError::invalid_field("image", format!("image '{image_key}' not found"))
        })?;

        let location = match (
            opt_string(&obj, "location")?,
            opt_string(&obj, "datacenter")?,
        ) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid(
                    "specify either 'location' or 'datacenter', not both",
                ));
            }
            (Some(l), None) => catalog::location_by_name(&l).ok_or_else(|| {
                ApiError::invalid_field("location", format!("location '{l}' not found"))
            })?,
            (None, Some(dc)) => catalog::location_by_datacenter(&dc).ok_or_else(|| {
                ApiError::invalid_field("datacenter", format!("datacenter '{dc}' not found"))
            })?,
            (None, None) => catalog::location_by_name("fsn1")
                .ok_or_else(|| ApiError::invalid("default location missing"))?,
        };
        if !server_type.offered_in(location) {
            return Err(ApiError::unavailable(format!(
                "server type {} is not available in location {}",
                server_type.name, location.name
            )));
        }

        let labels = parse_labels(obj.get("labels"))?;
        let user_data = opt_string(&obj, "user_data")?;
        if user_data
            .as_ref()
            .is_some_and(|u| u.len() > MAX_USER_DATA_BYTES)
        {
            return Err(ApiError::invalid_field(
                "user_data",
                format!("user_data must be at most {MAX_USER_DATA_BYTES} bytes"),
            ));
        }
        let start_after_create = match obj.get("start_after_create") {
            None | Some(Value::Null) => true,
            Some(Value::Bool(b)) => *b,
            Some(_) => {
                return Err(ApiError::invalid_field(
                    "start_after_create",
                    "Not a valid boolean.",
                ));
            }
        };
        let ssh_keys = match obj.get("ssh_keys") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(keys)) if keys.iter().all(|k| k.is_string() || k.is_u64()) => keys
                .iter()
                .map(|k| {
                    self.ssh_keys
                        .values()
                        .find(|key| match k {
                            Value::String(name) => key.name == *name,
                            _ => k.as_u64() == Some(key.id),
                        })
                        .map(|key| key.id)
                        .ok_or_else(|| {
                            ApiError::invalid_field("ssh_keys", format!("SSH key {k} not found"))
                        })
                })
                .collect::<Result<Vec<u64>, ApiError>>()?,
            Some(_) => {
                return Err(ApiError::invalid_field(
                    "ssh_keys",
                    "must be a list of SSH key names or ids",
                ));
            }
        };

        if self.servers.values().any(|s| s.name == name) {
            let mut err = ApiError::new(
                StatusCode::CONFLICT,
                "uniqueness_error",
                "server name is already used",
            );
            err.details = json!({ "fields": [{ "name": "name" }] });
            return Err(err);
        }
        if self.servers.len() >= self.opts.max_servers {
            return Err(ApiError::limit_exceeded(format!(
                "server limit of {} exceeded",
                self.opts.max_servers
            )));
        }
        let ipv4 = ip_for_index(self.next_ip_index)
            .ok_or_else(|| ApiError::unavailable("no public IPv4 addresses left"))?;
        self.next_ip_index += 1;

        let id = self.next_server_id;
        self.next_server_id += 1;
        let server = Server {
            id,
            name,
            server_type,
            location,
            image,
            labels,
            ipv4,
            user_data,
            ssh_keys,
            start_after_create,
            created: rfc3339_now(),
            polls: 0,
        };
        // A fresh server is always reported `initializing`, whatever the delay.
        let mut server_json = server.to_json(self.opts.boot_delay_polls);
        server_json["status"] = json!("initializing");
        self.servers.insert(id, server);
        let action = self.new_action("create_server", id);
        Ok(Reply::with_status(
            StatusCode::CREATED,
            json!({
                "server": server_json,
                "action": action,
                "next_actions": [],
                "root_password": null,
            }),
        ))
    }
}

/// A required field given as a string or a non-negative integer id.
fn string_or_id(obj: &Map<String, Value>, field: &str) -> Result<String, ApiError> {
    match obj.get(field) {
        Some(Value::String(s)) if !s.is_empty() => Ok(s.clone()),
        Some(Value::Number(n)) if n.is_u64() => Ok(n.to_string()),
        None | Some(Value::Null) => Err(ApiError::invalid_field(
            field,
            "Missing data for required field.",
        )),
        Some(_) => Err(ApiError::invalid_field(field, "Not a valid name or id.")),
    }
}

/// An optional string field.
fn opt_string(obj: &Map<String, Value>, field: &str) -> Result<Option<String>, ApiError> {
    match obj.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::invalid_field(field, "Not a valid string.")),
    }
}

/// RFC 1123 hostname: dot-separated labels of 1–63 ASCII letters, digits and
/// hyphens, not starting or ending with a hyphen; at most 253 characters.
fn is_valid_hostname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// A label name or value segment: at most 63 characters of letters, digits,
/// `-`, `_` and `.`, beginning and ending with a letter or digit.
fn is_valid_label_segment(s: &str) -> bool {
    s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
}

/// A label key: `name` or `prefix/name`, where prefix is a DNS subdomain.
fn is_valid_label_key(key: &str) -> bool {
    match key.split_once('/') {
        None => is_valid_label_segment(key),
        Some((prefix, name)) => {
            prefix.len() <= 253 && is_valid_hostname(prefix) && is_valid_label_segment(name)
        }
    }
}

fn parse_labels(value: Option<&Value>) -> Result<BTreeMap<String, String>, ApiError> {
    let obj = match value {
        None | Some(Value::Null) => return Ok(BTreeMap::new()),
        Some(Value::Object(obj)) => obj,
        Some(_) => {
            return Err(ApiError::invalid_field(
                "labels",
                "labels must be an object",
            ));
        }
    };
    let mut labels = BTreeMap::new();
    for (k, v) in obj {
        if !is_valid_label_key(k) {
            return Err(ApiError::invalid_field(
                "labels",
                format!("invalid label key '{k}'"),
            ));
        }
        let Value::String(v) = v else {
            return Err(ApiError::invalid_field(
                "labels",
                format!("label '{k}' must have a string value"),
            ));
        };
        if !(v.is_empty() || is_valid_label_segment(v)) {
            return Err(ApiError::invalid_field(
                "labels",
                format!("invalid value '{v}' for label '{k}'"),
            ));
        }
        labels.insert(k.clone(), v.clone());
    }
    Ok(labels)
}

/// The `index`-th public address: the three /24 documentation networks
/// (TEST-NET-3, -2, -1), then the 198.18.0.0/15 benchmarking range.
fn ip_for_index(index: u32) -> Option<Ipv4Addr> {
    const NETS: [[u8; 3]; 3] = [[203, 0, 113], [198, 51, 100], [192, 0, 2]];
    const PER_NET: u32 = 254;
    let small = PER_NET * NETS.len() as u32;
    if index < small {
        let [a, b, c] = NETS[(index / PER_NET) as usize];
        return Some(Ipv4Addr::new(a, b, c, (index % PER_NET + 1) as u8));
    }
    let offset = index - small;
    // 198.18.0.1 ..= 198.19.255.254
    if offset >= (1 << 17) - 2 {
        return None;
    }
    Some(Ipv4Addr::from(
        u32::from(Ipv4Addr::new(198, 18, 0, 1)) + offset,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_pool() {
        assert_eq!(ip_for_index(0), Some(Ipv4Addr::new(203, 0, 113, 1)));
        assert_eq!(ip_for_index(253), Some(Ipv4Addr::new(203, 0, 113, 254)));
        assert_eq!(ip_for_index(254), Some(Ipv4Addr::new(198, 51, 100, 1)));
        assert_eq!(ip_for_index(762), Some(Ipv4Addr::new(198, 18, 0, 1)));
        assert_eq!(
            ip_for_index(762 + 131_069),
            Some(Ipv4Addr::new(198, 19, 255, 254))
        );
        assert_eq!(ip_for_index(762 + 131_070), None);
    }

    #[test]
    fn hostnames_and_labels() {
        for ok in ["web-1", "a", "node.example.com", "A1"] {
            assert!(is_valid_hostname(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a..b", "a_b", "a b", &"x".repeat(64)] {
            assert!(!is_valid_hostname(bad), "{bad}");
        }
        assert!(is_valid_label_key("wasmprov.io/pool"));
        assert!(is_valid_label_key("env"));
        assert!(!is_valid_label_key("a/b/c"));
        assert!(!is_valid_label_key(&"k".repeat(64)));
        assert!(!is_valid_label_key(""));
        assert!(is_valid_label_segment("v1.2_x-y"));
        assert!(!is_valid_label_segment("-x"));
    }
}
