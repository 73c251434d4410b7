//! A stateful fake of the Hetzner Cloud API v1, written from the public API
//! reference.
//!
//! Served endpoints (all under `/v1`, all requiring `Authorization: Bearer
//! <token>`):
//!
//! | method & path | what it does |
//! | --- | --- |
//! | `GET /locations`, `GET /locations/{id}` | the five Hetzner locations |
//! | `GET /server_types`, `GET /server_types/{id}` | catalogue with per-location prices; `?name=` filter |
//! | `POST /servers` | create a server (validated like the real API) |
//! | `GET /servers` | list, with `label_selector`, `name`, `status`, `sort`, `page`, `per_page` |
//! | `GET /servers/{id}` | one server |
//! | `DELETE /servers/{id}` | delete a server |
//! | `GET /actions/{id}` | the action a create/delete returned (always `success` by then) |
//! | `PUT /servers/{id}` | rename a server or replace its labels |
//! | `POST /servers/{id}/actions/change_alias_ips` | a server's alias IPs in one of its networks (`ip_not_available` 409 for one another server holds) |
//! | `GET /networks`, `GET /networks/{id}` | private networks with their `cloud` subnets and attached servers (made with [`HetznerFake::add_network`]) |
//! | `GET /floating_ips`, `POST /floating_ips`, `GET`/`PUT`/`DELETE /floating_ips/{id}` | IPv4 floating IPs: `label_selector`, `name`; a create names a `server` or a `home_location` |
//! | `POST /floating_ips/{id}/actions/assign`, `.../unassign` | move a floating IP to a server (from any other), or take it off |
//! | `GET /load_balancers`, `GET /load_balancers/{id}` | load balancers (made with [`HetznerFake::add_load_balancer`]) with server targets and their health |
//! | `POST /load_balancers/{id}/actions/add_target`, `.../remove_target` | server targets (`target_already_defined` 422 for one already there, `not_found` 404 for one that is not) |
//! | `GET /ssh_keys`, `POST /ssh_keys` | the project's SSH keys: `?name=`, `?fingerprint=` (MD5, as the API shows it); names and keys unique (`uniqueness_error`); servers are created with their ids or names |
//!
//! Anything else answers 404 `not_found`. Errors use the Hetzner envelope
//! `{"error":{"code","message","details"}}` with these statuses:
//! `unauthorized` 401, `forbidden` 403, `resource_limit_exceeded` 403,
//! `invalid_input` 400, `json_error` 400, `not_found` 404,
//! `uniqueness_error` 409, `resource_unavailable` 412,
//! `rate_limit_exceeded` 429 (with `Retry-After`), `server_error` 500.
//!
//! Behaviour choices, so tests can rely on them:
//! - A created server is `initializing`. Each `GET` that returns it (single
//!   or on a list page) counts as one poll; the status a response shows is
//!   computed from the polls made *before* it. With `boot_delay_polls = N`
//!   the first N polls show `initializing`, the next N `starting`, and from
//!   then on `running` (`off` instead of `starting`/`running` when created
//!   with `start_after_create: false`).
//! - `DELETE` removes the server at once: the returned action says
//!   `running`, but every later read (and [`HetznerFake::servers`]) no longer
//!   shows it, a second `DELETE` is 404 and its name is free again.
//! - Nothing is deduplicated: two creates with different names make two
//!   servers (the real API has no idempotency token either).
//! - `RateLimit-*` headers are sent on every response from a 3600-request
//!   bucket refilling one per second, but the limit is never enforced; use
//!   [`Fault::RateLimited`] to get a 429.
//! - `per_page` above `page_size_max` is clamped to it, as the real API does.
//! - Networking: `POST /servers` with `networks: [id]` attaches the server
//!   at the lowest free address of the network's first subnet with room
//!   (a subnet never hands out its network address, its first host, which
//!   is its gateway, or its broadcast address); an unknown network is
//!   `invalid_input` on `networks`, a full one 412 `no_subnet_available`.
//!   Every server has an IPv6 /64 (`2001:db8:<id>::/64`, its address the
//!   first host). Deleting a server frees its addresses, unassigns its
//!   floating IPs and takes it out of every load balancer. A load
//!   balancer has one TCP service on port 80; a target is `healthy` once
//!   its server is `running`, `unknown` before.
//! - Public IPv4 addresses come from the documentation ranges (203.0.113.0/24
//!   first, then 198.51.100.0/24, 192.0.2.0/24, 198.18.0.0/15) and are not
//!   reused.

mod api;
mod catalog;
mod network;
mod selector;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, bail};

/// How the fake behaves; `Default` gives values fit for most tests.
#[derive(Clone, Debug)]
pub struct HetznerFakeOptions {
    /// The only bearer token the fake accepts.
    pub token: String,
    /// Upper bound for `per_page` (larger requests are clamped), like the
    /// real API's 50. Lower it to force pagination with few servers.
    pub page_size_max: usize,
    /// How many polls (GETs returning the server) a new server stays
    /// `initializing`, and then again `starting`, before it is `running`.
    /// 0 makes servers `running` on the first read.
    pub boot_delay_polls: u32,
    /// Project server quota; a create beyond it fails with 403
    /// `resource_limit_exceeded`.
    pub max_servers: usize,
    /// How long every answer waits after the request took effect (0: none),
    /// to give a client's crash a window between effect and answer.
    pub response_delay: std::time::Duration,
}

impl Default for HetznerFakeOptions {
    /// Token `fake-hetzner-token`, 50 per page, 1 poll per boot stage,
    /// 1000 servers, answers without delay.
    fn default() -> Self {
        Self {
            token: "fake-hetzner-token".to_string(),
            page_size_max: 50,
            boot_delay_polls: 1,
            max_servers: 1000,
            response_delay: std::time::Duration::ZERO,
        }
    }
}

/// A snapshot of one server as the fake holds it, for test assertions
/// without going through the HTTP API (taking it does not count as a poll).
#[derive(Clone, Debug, serde::Serialize)]
pub struct FakeServer {
    /// Server id, as in `/servers/{id}`.
    pub id: u64,
    /// Server name (a hostname, unique among live servers).
    pub name: String,
    /// Current status: `initializing`, `starting`, `running` or `off`.
    pub status: String,
    /// Server type name, e.g. `cx22`.
    pub server_type: String,
    /// Location name, e.g. `fsn1`.
    pub location: String,
    /// Labels as created.
    pub labels: BTreeMap<String, String>,
    /// Public IPv4 address.
    pub ipv4: String,
    /// Public IPv6 network, a /64 (`2001:db8:…::/64`).
    pub ipv6: String,
    /// The private networks it is attached to, with its address in each.
    pub private_net: Vec<FakePrivateNet>,
    /// The cloud-init user data passed at creation, if any.
    pub user_data: Option<String>,
    /// The public keys of the SSH keys it was created with.
    pub ssh_keys: Vec<String>,
}

/// A server's place in a private network.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FakePrivateNet {
    /// The network's id.
    pub network: u64,
    /// The server's address in it.
    pub ip: String,
    /// Its alias IPs in it.
    pub alias_ips: Vec<String>,
}

/// A snapshot of a private network.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FakeNetwork {
    /// Network id, as in `/networks/{id}` and a create's `networks`.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// Its IPv4 range, such as `10.0.0.0/16`.
    pub ip_range: String,
    /// Its subnets.
    pub subnets: Vec<FakeSubnet>,
    /// The servers attached to it.
    pub servers: Vec<u64>,
}

/// A snapshot of a subnet, with the addresses the fake still has for servers.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FakeSubnet {
    /// Its range, such as `10.0.1.0/24`.
    pub ip_range: String,
    /// Its network zone, such as `eu-central`.
    pub network_zone: String,
    /// Addresses servers may have in it (all but its network address,
    /// gateway and broadcast address).
    pub total: u64,
    /// Of those, the ones no server holds.
    pub free: u64,
}

/// A snapshot of a load balancer.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FakeLoadBalancer {
    /// Load balancer id.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// The ids of its server targets.
    pub targets: Vec<u64>,
}

/// A snapshot of a floating IP.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FakeFloatingIp {
    /// Floating IP id.
    pub id: u64,
    /// The address.
    pub ip: String,
    /// The server it is assigned to.
    pub server: Option<u64>,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
}

/// A one-shot failure to inject, to exercise a client's error handling.
///
/// Faults are queued in order; each is consumed by the first authenticated
/// request it applies to. `RateLimited`, `ServerError` and `Unauthorized`
/// apply to a request of any kind; `ResourceUnavailable` and
/// `ResourceLimitExceeded` only to `POST /servers`. A faulted request has no
/// other effect (no server is created, no poll is counted).
#[derive(Clone, Debug)]
pub enum Fault {
    /// 429 `rate_limit_exceeded` with `Retry-After: retry_after_secs`.
    RateLimited {
        /// Value of the `Retry-After` header, in seconds.
        retry_after_secs: u64,
    },
    /// 412 `resource_unavailable` (e.g. location sold out), on create only.
    ResourceUnavailable,
    /// 403 `resource_limit_exceeded` (quota), on create only.
    ResourceLimitExceeded,
    /// 500 `server_error`.
    ServerError,
    /// 401 `unauthorized`, even with the right token.
    Unauthorized,
}

/// A running fake Hetzner Cloud API server.
///
/// Dropping it stops the server task; [`HetznerFake::shutdown`] does so
/// gracefully and waits for it.
#[derive(Debug)]
pub struct HetznerFake {
    token: String,
    state: Arc<Mutex<api::FakeState>>,
    server: crate::wire::Server,
}

impl HetznerFake {
    /// Start on the given address (tests use `127.0.0.1:0` to get a free
    /// port). Only loopback addresses are accepted, so a fake can never be
    /// reachable from the network; anything else is an error.
    pub async fn start(addr: SocketAddr, opts: HetznerFakeOptions) -> anyhow::Result<HetznerFake> {
        if opts.page_size_max == 0 {
            bail!("fake hetzner: page_size_max must be at least 1");
        }
        let token = opts.token.clone();
        let state = Arc::new(Mutex::new(api::FakeState::new(opts)));
        let server =
            crate::wire::Server::start("hetzner", addr, api::router(Arc::clone(&state))).await?;
        Ok(HetznerFake {
            token,
            state,
            server,
        })
    }

    /// Base URL including the `/v1` prefix, e.g. `http://127.0.0.1:41234/v1`,
    /// to configure a client with in place of `https://api.hetzner.cloud/v1`.
    pub fn url(&self) -> String {
        format!("http://{}/v1", self.server.addr())
    }

    /// The address actually bound (with the real port when started on 0).
    pub fn addr(&self) -> SocketAddr {
        self.server.addr()
    }

    /// The bearer token the fake accepts.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Snapshot of the live servers in id order, for test assertions; does
    /// not count as a poll.
    pub fn servers(&self) -> Vec<FakeServer> {
        api::lock(&self.state).snapshot()
    }

    /// Creates a server directly, as someone else using the same project
    /// would (not counted as a request); returns its id. For tests that
    /// plant servers a plugin must not see or touch.
    ///
    /// # Errors
    /// When the fake's API would refuse it (an invalid name or label, a
    /// name already in use).
    pub fn plant(&self, name: &str, labels: &BTreeMap<String, String>) -> anyhow::Result<u64> {
        let body = serde_json::json!({
            "name": name,
            "server_type": "cx22",
            "image": "ubuntu-24.04",
            "labels": labels,
        });
        let mut state = api::lock(&self.state);
        state
            .create_server(body.to_string().as_bytes())
            .map_err(|e| anyhow::anyhow!("fake hetzner: planting {name}: {e:?}"))?;
        state
            .snapshot()
            .into_iter()
            .find(|s| s.name == name)
            .map(|s| s.id)
            .context("fake hetzner: planted server missing")
    }

    /// Makes a private network with `cloud` subnets in `eu-central`, as
    /// the project's owner would (not counted as a request); returns its id.
    ///
    /// # Errors
    /// A range that is not IPv4 CIDR, or a subnet outside the network.
    pub fn add_network(&self, name: &str, ip_range: &str, subnets: &[&str]) -> anyhow::Result<u64> {
        api::lock(&self.state)
            .add_network(name, ip_range, subnets)
            .map_err(|e| anyhow::anyhow!("fake hetzner: network {name}: {e}"))
    }

    /// Makes a load balancer without targets in `location` (not counted
    /// as a request); returns its id.
    ///
    /// # Errors
    /// An unknown location.
    pub fn add_load_balancer(&self, name: &str, location: &str) -> anyhow::Result<u64> {
        api::lock(&self.state)
            .add_load_balancer(name, location)
            .map_err(|e| anyhow::anyhow!("fake hetzner: load balancer {name}: {e}"))
    }

    /// Snapshot of the networks, with their subnets' free addresses.
    pub fn networks(&self) -> Vec<FakeNetwork> {
        api::lock(&self.state).networks()
    }

    /// Snapshot of the load balancers and their targets.
    pub fn load_balancers(&self) -> Vec<FakeLoadBalancer> {
        api::lock(&self.state).load_balancers()
    }

    /// Snapshot of the floating IPs and where they are.
    pub fn floating_ips(&self) -> Vec<FakeFloatingIp> {
        api::lock(&self.state).floating_ips()
    }

    /// Total HTTP requests served so far, including rejected ones.
    pub fn request_count(&self) -> u64 {
        api::lock(&self.state).request_count
    }

    /// Serve server lists as if `shift` servers listed on each earlier page
    /// had been deleted by the time the next page is asked (0: lists are
    /// consistent). A client paging through then misses servers that moved
    /// to pages it already read: what a real cloud's paged list looks like
    /// while nodes are deleted.
    pub fn shift_pages(&self, shift: usize) {
        api::lock(&self.state).list_shift = shift;
    }

    /// Queue a one-shot fault for the next request it applies to (see
    /// [`Fault`]).
    pub fn inject(&self, fault: Fault) {
        api::lock(&self.state).faults.push_back(fault);
    }

    /// Stop accepting connections, let in-flight requests finish (for at
    /// most 5 seconds) and wait for the server task to end.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
    }
}

/// Run the fake as a standalone process (for manual testing or for plugins
/// run outside the test harness): start it on `addr`, print one line
/// `fake hetzner listening on http://ADDR/v1 (token: TOKEN)` to stdout, and
/// serve until Ctrl-C.
pub async fn run_standalone(addr: SocketAddr, opts: HetznerFakeOptions) -> anyhow::Result<()> {
    let fake = HetznerFake::start(addr, opts).await?;
    println!(
        "fake hetzner listening on {} (token: {})",
        fake.url(),
        fake.token()
    );
    tokio::signal::ctrl_c()
        .await
        .context("fake hetzner: waiting for Ctrl-C")?;
    fake.shutdown().await;
    Ok(())
}
