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
use super::network::{FloatingIp, LoadBalancer, Network, Networking, Subnet};
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
    /// The server's IPv6 network, a /64 of the documentation prefix
    /// (`2001:db8:<id>::/64`); the server's own address is its first host.
    fn ipv6_net(&self) -> String {
        format!(
            "2001:db8:{:x}:{:x}::/64",
            (self.id >> 16) & 0xffff,
            self.id & 0xffff
        )
    }

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
                "ipv6": { "id": self.id + 50_000_000, "ip": self.ipv6_net(), "blocked": false, "dns_ptr": [] },
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
    /// What it acted on: (id, type), such as (42, "server").
    resources: Vec<(u64, &'static str)>,
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
            "resources": self.resources.iter().map(|(id, kind)| json!({ "id": id, "type": kind })).collect::<Vec<_>>(),
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
    /// Networks, floating IPs, load balancers and what is attached to them.
    pub(crate) net: Networking,
    next_ssh_key_id: u64,
    /// Ids of networks, floating IPs and load balancers.
    next_resource_id: u64,
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
    UpdateServer(&'a str),
    DeleteServer(&'a str),
    ListFloatingIps,
    CreateFloatingIp,
    GetFloatingIp(&'a str),
    UpdateFloatingIp(&'a str),
    DeleteFloatingIp(&'a str),
    FloatingIpAction(&'a str, &'a str),
    ChangeAliasIps(&'a str),
    ListLoadBalancers,
    GetLoadBalancer(&'a str),
    LoadBalancerAction(&'a str, &'a str),
    ListNetworks,
    GetNetwork(&'a str),
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
        (&Method::PUT, ["servers", id]) => Route::UpdateServer(id),
        (&Method::POST, ["servers", id, "actions", "change_alias_ips"]) => {
            Route::ChangeAliasIps(id)
        }
        (&Method::DELETE, ["servers", id]) => Route::DeleteServer(id),
        (&Method::GET, ["floating_ips"]) => Route::ListFloatingIps,
        (&Method::POST, ["floating_ips"]) => Route::CreateFloatingIp,
        (&Method::GET, ["floating_ips", id]) => Route::GetFloatingIp(id),
        (&Method::PUT, ["floating_ips", id]) => Route::UpdateFloatingIp(id),
        (&Method::DELETE, ["floating_ips", id]) => Route::DeleteFloatingIp(id),
        (&Method::POST, ["floating_ips", id, "actions", action]) => {
            Route::FloatingIpAction(id, action)
        }
        (&Method::GET, ["load_balancers"]) => Route::ListLoadBalancers,
        (&Method::GET, ["load_balancers", id]) => Route::GetLoadBalancer(id),
        (&Method::POST, ["load_balancers", id, "actions", action]) => {
            Route::LoadBalancerAction(id, action)
        }
        (&Method::GET, ["networks"]) => Route::ListNetworks,
        (&Method::GET, ["networks", id]) => Route::GetNetwork(id),
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
            net: Networking::default(),
            next_ssh_key_id: 7_000_001,
            next_resource_id: 3_000_001,
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
                ipv6: s.ipv6_net(),
                private_net: self
                    .net
                    .attachments
                    .get(&s.id)
                    .into_iter()
                    .flatten()
                    .map(|a| super::FakePrivateNet {
                        network: a.network,
                        ip: a.ip.to_string(),
                        alias_ips: a.alias_ips.iter().map(ToString::to_string).collect(),
                    })
                    .collect(),
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

    /// Public view of the networks, with each subnet's free addresses.
    pub(crate) fn networks(&self) -> Vec<super::FakeNetwork> {
        self.net
            .networks
            .values()
            .map(|n| super::FakeNetwork {
                id: n.id,
                name: n.name.clone(),
                ip_range: n.ip_range.to_string(),
                subnets: n
                    .subnets
                    .iter()
                    .map(|s| super::FakeSubnet {
                        ip_range: s.ip_range.to_string(),
                        network_zone: s.network_zone.to_string(),
                        total: s.usable().count() as u64,
                        free: self.net.free_in(s).len() as u64,
                    })
                    .collect(),
                servers: self
                    .net
                    .attachments
                    .iter()
                    .filter(|(_, atts)| atts.iter().any(|a| a.network == n.id))
                    .map(|(id, _)| *id)
                    .collect(),
            })
            .collect()
    }

    /// Public view of the load balancers.
    pub(crate) fn load_balancers(&self) -> Vec<super::FakeLoadBalancer> {
        self.net
            .load_balancers
            .values()
            .map(|lb| super::FakeLoadBalancer {
                id: lb.id,
                name: lb.name.clone(),
                targets: lb.targets.clone(),
            })
            .collect()
    }

    /// Public view of the floating IPs.
    pub(crate) fn floating_ips(&self) -> Vec<super::FakeFloatingIp> {
        self.net
            .floating_ips
            .values()
            .map(|f| super::FakeFloatingIp {
                id: f.id,
                ip: f.ip.to_string(),
                server: f.server,
                labels: f.labels.clone(),
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
                let body = json!({ "server": self.poll_server(id)? });
                Ok(Reply::ok(body))
            }
            Route::UpdateServer(id) => {
                let body = body.map_err(|e| ApiError::invalid(format!("unreadable body: {e}")))?;
                self.update_server(parse_id(id, "server")?, &body)
            }
            Route::DeleteServer(id) => {
                let id = parse_id(id, "server")?;
                self.servers
                    .remove(&id)
                    .ok_or_else(|| ApiError::not_found("server"))?;
                self.net.server_deleted(id);
                let action = self.new_action("delete_server", id);
                Ok(Reply::ok(json!({ "action": action })))
            }
            Route::ChangeAliasIps(id) => {
                let body = body.map_err(|e| ApiError::invalid(format!("unreadable body: {e}")))?;
                self.change_alias_ips(parse_id(id, "server")?, &body)
            }
            Route::ListFloatingIps => self.list_floating_ips(&query),
            Route::CreateFloatingIp => {
                let body = body.map_err(|e| ApiError::invalid(format!("unreadable body: {e}")))?;
                self.create_floating_ip(&body)
            }
            Route::GetFloatingIp(id) => {
                let id = parse_id(id, "floating IP")?;
                self.net
                    .floating_ips
                    .get(&id)
                    .map(|f| Reply::ok(json!({ "floating_ip": f.to_json() })))
                    .ok_or_else(|| ApiError::not_found("floating IP"))
            }
            Route::UpdateFloatingIp(id) => {
                let body = body.map_err(|e| ApiError::invalid(format!("unreadable body: {e}")))?;
                self.update_floating_ip(parse_id(id, "floating IP")?, &body)
            }
            Route::DeleteFloatingIp(id) => {
                let id = parse_id(id, "floating IP")?;
                self.net
                    .floating_ips
                    .remove(&id)
                    .ok_or_else(|| ApiError::not_found("floating IP"))?;
                Ok(Reply::with_status(StatusCode::NO_CONTENT, Value::Null))
            }
            Route::FloatingIpAction(id, action) => {
                let body = body.map_err(|e| ApiError::invalid(format!("unreadable body: {e}")))?;
                self.floating_ip_action(parse_id(id, "floating IP")?, action, &body)
            }
            Route::ListLoadBalancers => {
                let items: Vec<Value> = self
                    .net
                    .load_balancers
                    .values()
                    .filter(|lb| query.get("name").is_none_or(|n| n == lb.name))
                    .map(|lb| self.load_balancer_json(lb))
                    .collect();
                self.page_of("load_balancers", items, &query)
            }
            Route::GetLoadBalancer(id) => {
                let id = parse_id(id, "load balancer")?;
                self.net
                    .load_balancers
                    .get(&id)
                    .map(|lb| Reply::ok(json!({ "load_balancer": self.load_balancer_json(lb) })))
                    .ok_or_else(|| ApiError::not_found("load balancer"))
            }
            Route::LoadBalancerAction(id, action) => {
                let body = body.map_err(|e| ApiError::invalid(format!("unreadable body: {e}")))?;
                self.load_balancer_action(parse_id(id, "load balancer")?, action, &body)
            }
            Route::ListNetworks => {
                let items: Vec<Value> = self
                    .net
                    .networks
                    .values()
                    .filter(|n| query.get("name").is_none_or(|name| name == n.name))
                    .map(|n| self.net.network_json(n))
                    .collect();
                self.page_of("networks", items, &query)
            }
            Route::GetNetwork(id) => {
                let id = parse_id(id, "network")?;
                self.net
                    .networks
                    .get(&id)
                    .map(|n| Reply::ok(json!({ "network": self.net.network_json(n) })))
                    .ok_or_else(|| ApiError::not_found("network"))
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
        self.action_on(command, vec![(server_id, "server")])
    }

    /// A finished action on these resources, as the API returns it.
    fn action_on(&mut self, command: &'static str, resources: Vec<(u64, &'static str)>) -> Value {
        let id = self.next_action_id;
        self.next_action_id += 1;
        let action = Action {
            id,
            command,
            resources,
            started: rfc3339_now(),
        };
        let json = action.to_json(false);
        self.actions.insert(id, action);
        json
    }

    /// A server as the API shows it, with its networks, floating IPs and
    /// load balancers; not counted as a poll.
    fn server_json(&self, id: u64) -> Option<Value> {
        let server = self.servers.get(&id)?;
        let mut json = server.to_json(self.opts.boot_delay_polls);
        json["private_net"] = self.net.private_net_json(id);
        json["public_net"]["floating_ips"] = json!(self.net.floating_ips_of(id));
        json["load_balancers"] = json!(self.net.load_balancers_of(id));
        Some(json)
    }

    /// A server as a read shows it, counting the read as a poll.
    fn poll_server(&mut self, id: u64) -> Result<Value, ApiError> {
        let json = self
            .server_json(id)
            .ok_or_else(|| ApiError::not_found("server"))?;
        if let Some(server) = self.servers.get_mut(&id) {
            server.polls = server.polls.saturating_add(1);
        }
        Ok(json)
    }

    /// `PUT /servers/{id}`: a new name and/or labels (the labels given
    /// replace all of the server's labels).
    fn update_server(&mut self, id: u64, body: &[u8]) -> Result<Reply, ApiError> {
        let obj = json_object(body)?;
        if !self.servers.contains_key(&id) {
            return Err(ApiError::not_found("server"));
        }
        let labels = match obj.get("labels") {
            None => None,
            some => Some(parse_labels(some)?),
        };
        let name = match opt_string(&obj, "name")? {
            Some(n) if !is_valid_hostname(&n) => {
                return Err(ApiError::invalid_field(
                    "name",
                    "name must be a valid hostname",
                ));
            }
            Some(n) if self.servers.values().any(|s| s.name == n && s.id != id) => {
                let mut err = ApiError::new(
                    StatusCode::CONFLICT,
                    "uniqueness_error",
                    "server name is already used",
                );
                err.details = json!({ "fields": [{ "name": "name" }] });
                return Err(err);
            }
            other => other,
        };
        if let Some(server) = self.servers.get_mut(&id) {
            if let Some(labels) = labels {
                server.labels = labels;
            }
            if let Some(name) = name {
                server.name = name;
            }
        }
        Ok(Reply::ok(json!({ "server": self.poll_server(id)? })))
    }

    /// `PUT /floating_ips/{id}`: new labels and/or description (the
    /// labels given replace all of the floating IP's labels,
    /// unconditionally, as Hetzner's do).
    fn update_floating_ip(&mut self, id: u64, body: &[u8]) -> Result<Reply, ApiError> {
        let obj = json_object(body)?;
        let labels = match obj.get("labels") {
            None => None,
            some => Some(parse_labels(some)?),
        };
        let description = opt_string(&obj, "description")?;
        let fip = self
            .net
            .floating_ips
            .get_mut(&id)
            .ok_or_else(|| ApiError::not_found("floating IP"))?;
        if let Some(labels) = labels {
            fip.labels = labels;
        }
        if description.is_some() {
            fip.description = description;
        }
        Ok(Reply::ok(json!({ "floating_ip": fip.to_json() })))
    }

    /// `POST /servers/{id}/actions/change_alias_ips`
    /// (`{"network": id, "alias_ips": [ip, ...]}`): the server's alias IPs
    /// in that network become exactly these. Each must be in one of the
    /// network's subnets, usable there, and held by no other server.
    fn change_alias_ips(&mut self, id: u64, body: &[u8]) -> Result<Reply, ApiError> {
        let obj = json_object(body)?;
        if !self.servers.contains_key(&id) {
            return Err(ApiError::not_found("server"));
        }
        let network = obj.get("network").and_then(Value::as_u64).ok_or_else(|| {
            ApiError::invalid_field("network", "Missing data for required field.")
        })?;
        let Some(net) = self.net.networks.get(&network) else {
            return Err(ApiError::not_found("network"));
        };
        let ips = match obj.get("alias_ips") {
            Some(Value::Array(list)) => list
                .iter()
                .map(|v| {
                    v.as_str()
                        .and_then(|s| s.parse::<Ipv4Addr>().ok())
                        .ok_or_else(|| {
                            ApiError::invalid_field(
                                "alias_ips",
                                format!("{v} is not an IPv4 address"),
                            )
                        })
                })
                .collect::<Result<Vec<Ipv4Addr>, ApiError>>()?,
            _ => {
                return Err(ApiError::invalid_field(
                    "alias_ips",
                    "Missing data for required field.",
                ));
            }
        };
        for ip in &ips {
            if !net.subnets.iter().any(|s| s.usable().any(|u| u == *ip)) {
                return Err(ApiError::invalid_field(
                    "alias_ips",
                    format!("{ip} is not a usable address of network {network}"),
                ));
            }
            let holder = self.net.attachments.iter().find(|(server, atts)| {
                atts.iter().any(|a| {
                    a.network == network
                        && (a.ip == *ip || (**server != id && a.alias_ips.contains(ip)))
                })
            });
            if let Some((server, _)) = holder {
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "ip_not_available",
                    format!("{ip} is already used by server {server}"),
                ));
            }
        }
        let attachment = self
            .net
            .attachments
            .get_mut(&id)
            .and_then(|atts| atts.iter_mut().find(|a| a.network == network))
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "server_not_attached_to_network",
                    format!("server {id} is not attached to network {network}"),
                )
            })?;
        attachment.alias_ips = ips;
        let action = self.action_on(
            "change_alias_ips",
            vec![(id, "server"), (network, "network")],
        );
        Ok(Reply::with_status(
            StatusCode::CREATED,
            json!({ "action": action }),
        ))
    }

    /// One page of a list, under `key`, with Hetzner's `meta`.
    fn page_of(&self, key: &str, items: Vec<Value>, q: &Query) -> Result<Reply, ApiError> {
        let page = Page::from_query(q, self.opts.page_size_max)?;
        let meta = page.meta(items.len());
        let items = items[page.range(items.len())].to_vec();
        Ok(Reply::ok(json!({ key: items, "meta": meta })))
    }

    fn list_floating_ips(&self, q: &Query) -> Result<Reply, ApiError> {
        let selector = match q.get("label_selector") {
            Some(raw) => LabelSelector::parse(raw).map_err(ApiError::invalid)?,
            None => LabelSelector::default(),
        };
        let items: Vec<Value> = self
            .net
            .floating_ips
            .values()
            .filter(|f| q.get("name").is_none_or(|n| n == f.name))
            .filter(|f| selector.matches(&f.labels))
            .map(FloatingIp::to_json)
            .collect();
        self.page_of("floating_ips", items, q)
    }

    /// `POST /floating_ips`: an IPv4 floating IP, assigned to `server` at
    /// once when it names one, else kept at `home_location`.
    fn create_floating_ip(&mut self, body: &[u8]) -> Result<Reply, ApiError> {
        let obj = json_object(body)?;
        match opt_string(&obj, "type")?.as_deref() {
            Some("ipv4") => {}
            Some("ipv6") => {
                return Err(ApiError::invalid_field(
                    "type",
                    "this fake serves IPv4 floating IPs only",
                ));
            }
            Some(other) => {
                return Err(ApiError::invalid_field(
                    "type",
                    format!("'{other}' is not one of ipv4, ipv6"),
                ));
            }
            None => {
                return Err(ApiError::invalid_field(
                    "type",
                    "Missing data for required field.",
                ));
            }
        }
        let server = match obj.get("server") {
            None | Some(Value::Null) => None,
            Some(v) => Some(
                v.as_u64()
                    .filter(|id| self.servers.contains_key(id))
                    .ok_or_else(|| {
                        ApiError::invalid_field("server", format!("server {v} not found"))
                    })?,
            ),
        };
        let home_location = match (opt_string(&obj, "home_location")?, server) {
            (Some(l), _) => catalog::location_by_name(&l).ok_or_else(|| {
                ApiError::invalid_field("home_location", format!("location '{l}' not found"))
            })?,
            (None, Some(id)) => self.servers[&id].location,
            (None, None) => {
                return Err(ApiError::invalid(
                    "one of 'server' or 'home_location' is required",
                ));
            }
        };
        let labels = parse_labels(obj.get("labels"))?;
        let id = self.next_resource_id;
        self.next_resource_id += 1;
        let name = opt_string(&obj, "name")?.unwrap_or_else(|| format!("floating-ip-{id}"));
        if self.net.floating_ips.values().any(|f| f.name == name) {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "uniqueness_error",
                "floating IP name is already used",
            ));
        }
        let ip = ip_for_index(self.next_ip_index)
            .ok_or_else(|| ApiError::unavailable("no public IPv4 addresses left"))?;
        self.next_ip_index += 1;
        let fip = FloatingIp {
            id,
            name,
            description: opt_string(&obj, "description")?,
            ip,
            home_location,
            server,
            labels,
            created: rfc3339_now(),
        };
        let json = fip.to_json();
        self.net.floating_ips.insert(id, fip);
        let action = match server {
            Some(s) => self.action_on(
                "assign_floating_ip",
                vec![(id, "floating_ip"), (s, "server")],
            ),
            None => Value::Null,
        };
        Ok(Reply::with_status(
            StatusCode::CREATED,
            json!({ "floating_ip": json, "action": action }),
        ))
    }

    /// `POST /floating_ips/{id}/actions/assign` (`{"server": id}`, moving
    /// it from any other server) and `.../unassign`.
    fn floating_ip_action(
        &mut self,
        id: u64,
        action: &str,
        body: &[u8],
    ) -> Result<Reply, ApiError> {
        if !self.net.floating_ips.contains_key(&id) {
            return Err(ApiError::not_found("floating IP"));
        }
        let (command, server) = match action {
            "assign" => {
                let obj = json_object(body)?;
                let server = obj.get("server").and_then(Value::as_u64).ok_or_else(|| {
                    ApiError::invalid_field("server", "Missing data for required field.")
                })?;
                if !self.servers.contains_key(&server) {
                    return Err(ApiError::invalid_field(
                        "server",
                        format!("server {server} not found"),
                    ));
                }
                ("assign_floating_ip", Some(server))
            }
            "unassign" => ("unassign_floating_ip", None),
            _ => return Err(ApiError::not_found("resource")),
        };
        let before = self
            .net
            .floating_ips
            .get_mut(&id)
            .and_then(|f| std::mem::replace(&mut f.server, server));
        let mut resources = vec![(id, "floating_ip")];
        resources.extend(server.or(before).map(|s| (s, "server")));
        let action = self.action_on(command, resources);
        Ok(Reply::with_status(
            StatusCode::CREATED,
            json!({ "action": action }),
        ))
    }

    fn load_balancer_json(&self, lb: &LoadBalancer) -> Value {
        let boot = self.opts.boot_delay_polls;
        lb.to_json(&|id| {
            self.servers
                .get(&id)
                .is_some_and(|s| s.status(boot) == "running")
        })
    }

    /// `POST /load_balancers/{id}/actions/add_target` and `remove_target`,
    /// for targets of type `server`.
    fn load_balancer_action(
        &mut self,
        id: u64,
        action: &str,
        body: &[u8],
    ) -> Result<Reply, ApiError> {
        if !self.net.load_balancers.contains_key(&id) {
            return Err(ApiError::not_found("load balancer"));
        }
        let obj = json_object(body)?;
        match opt_string(&obj, "type")?.as_deref() {
            Some("server") => {}
            Some(other) => {
                return Err(ApiError::invalid_field(
                    "type",
                    format!("this fake serves targets of type server only, not '{other}'"),
                ));
            }
            None => {
                return Err(ApiError::invalid_field(
                    "type",
                    "Missing data for required field.",
                ));
            }
        }
        let server = obj
            .get("server")
            .and_then(|s| s.get("id"))
            .and_then(Value::as_u64)
            .ok_or_else(|| ApiError::invalid_field("server", "Missing data for required field."))?;
        let lb = self
            .net
            .load_balancers
            .get_mut(&id)
            .ok_or_else(|| ApiError::not_found("load balancer"))?;
        let command = match action {
            "add_target" => {
                if lb.targets.contains(&server) {
                    return Err(ApiError::new(
                        StatusCode::UNPROCESSABLE_ENTITY,
                        "target_already_defined",
                        "the load balancer target you are trying to define is already defined",
                    ));
                }
                if !self.servers.contains_key(&server) {
                    return Err(ApiError::invalid_field(
                        "server",
                        format!("server {server} not found"),
                    ));
                }
                lb.targets.push(server);
                "add_target"
            }
            "remove_target" => {
                let before = lb.targets.len();
                lb.targets.retain(|t| *t != server);
                if lb.targets.len() == before {
                    return Err(ApiError::new(
                        StatusCode::NOT_FOUND,
                        "not_found",
                        "load balancer target not found",
                    ));
                }
                "remove_target"
            }
            _ => return Err(ApiError::not_found("resource")),
        };
        let action = self.action_on(command, vec![(id, "load_balancer"), (server, "server")]);
        Ok(Reply::with_status(
            StatusCode::CREATED,
            json!({ "action": action }),
        ))
    }

    /// Makes a network with these subnets (seeding, not an API call).
    pub(crate) fn add_network(
        &mut self,
        name: &str,
        ip_range: &str,
        subnets: &[&str],
    ) -> Result<u64, String> {
        let parse = |r: &str| r.parse::<ipnet::Ipv4Net>().map_err(|e| format!("{r}: {e}"));
        let range = parse(ip_range)?;
        let mut list = Vec::new();
        for s in subnets {
            let net = parse(s)?;
            if !range.contains(&net) {
                return Err(format!("subnet {s} is not inside {ip_range}"));
            }
            list.push(Subnet {
                ip_range: net,
                network_zone: "eu-central",
            });
        }
        let id = self.next_resource_id;
        self.next_resource_id += 1;
        self.net.networks.insert(
            id,
            Network {
                id,
                name: name.to_string(),
                ip_range: range,
                subnets: list,
                labels: BTreeMap::new(),
                created: rfc3339_now(),
            },
        );
        Ok(id)
    }

    /// Makes a load balancer without targets (seeding, not an API call).
    pub(crate) fn add_load_balancer(&mut self, name: &str, location: &str) -> Result<u64, String> {
        let location =
            catalog::location_by_name(location).ok_or_else(|| format!("no location {location}"))?;
        let ipv4 = ip_for_index(self.next_ip_index).ok_or("no public IPv4 addresses left")?;
        self.next_ip_index += 1;
        let id = self.next_resource_id;
        self.next_resource_id += 1;
        self.net.load_balancers.insert(
            id,
            LoadBalancer {
                id,
                name: name.to_string(),
                location,
                ipv4,
                targets: Vec::new(),
                labels: BTreeMap::new(),
                created: rfc3339_now(),
            },
        );
        Ok(id)
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
            items.push(self.poll_server(*id)?);
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

        let networks = match obj.get("networks") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(ids)) => ids
                .iter()
                .map(|v| {
                    v.as_u64()
                        .filter(|id| self.net.networks.contains_key(id))
                        .ok_or_else(|| {
                            ApiError::invalid_field("networks", format!("network {v} not found"))
                        })
                })
                .collect::<Result<Vec<u64>, ApiError>>()?,
            Some(_) => {
                return Err(ApiError::invalid_field(
                    "networks",
                    "must be a list of network ids",
                ));
            }
        };
        for network in &networks {
            let net = &self.net.networks[network];
            if !net.subnets.iter().any(|s| !self.net.free_in(s).is_empty()) {
                return Err(ApiError::new(
                    StatusCode::PRECONDITION_FAILED,
                    "no_subnet_available",
                    format!("no subnet or IP is available in network {network}"),
                ));
            }
        }

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
        self.servers.insert(id, server);
        for network in networks {
            self.net.attach(id, network);
        }
        // A fresh server is always reported `initializing`, whatever the delay.
        let mut server_json = self.server_json(id).unwrap_or(Value::Null);
        server_json["status"] = json!("initializing");
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

/// A request body that must be a JSON object.
fn json_object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::json_error(format!("invalid JSON in request body: {e}")))?;
    match value {
        Value::Object(obj) => Ok(obj),
        _ => Err(ApiError::invalid("request body must be a JSON object")),
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
