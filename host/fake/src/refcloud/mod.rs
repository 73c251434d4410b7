//! A stateful fake of the *reference cloud* ("refcloud"): a small, generic
//! node API that plugin authors start from (the `wasmprov new` template
//! talks to it) and the conformance tests run against. There is no real
//! refcloud; this module is its specification, and the fake implements it
//! exactly.
//!
//! # The API
//!
//! Base path `/v1`. Every request needs `Authorization: Bearer <token>`
//! (default token [`DEFAULT_TOKEN`]); a missing or wrong token is 401
//! `unauthorized`, on every path, before anything else is looked at.
//!
//! A node is
//!
//! ```json
//! {"id": "n-000001", "type": "small", "zone": "zone-a", "capacity_type": "on-demand",
//!  "state": "provisioning", "address": "10.1.0.1", "labels": {"k": "v"},
//!  "created": "2025-01-01T00:00:00+00:00"}
//! ```
//!
//! `state` is `provisioning` when created. Every `GET` that returns the
//! node (single or on a list page) counts as a read, and the state a
//! response shows depends on the reads made *before* it: the first read still
//! shows `provisioning`, every later one `running`. `deleting` is never shown:
//! `DELETE` removes a node at once. Ids are `n-` and six or more digits,
//! never reused; addresses come from 10.1.0.0/16 upwards, one per node.
//!
//! | request | answer |
//! | --- | --- |
//! | `GET /v1/nodes?label_selector=k1=v1,k2=v2&page=N&per_page=M` | 200 `{"nodes": [...], "next_page": N+1 or null}` |
//! | `GET /v1/nodes/{id}` | 200 `{"node": {...}}`, or 404 `not_found` |
//! | `POST /v1/nodes` | 201 `{"node": {...}}` (200 for an idempotent replay) |
//! | `DELETE /v1/nodes/{id}` | 204 with no body, or 404 `not_found` |
//! | `PUT /v1/nodes/{id}/labels` | `{"labels": {...}}` replaces every label: 200 `{"node": {...}}` (not a read), or 404 |
//! | `POST /v1/nodes/{id}/addresses` | `{"kind": "private"\|"public", "address": IP or id}`: 200 `{"address": {"id", "ip", "kind", "node_id"}}`, the address now on the node (moved from any other); without `address` a new one is taken (private from 10.9.0.1, public from 203.0.113.1, ids `ip-000001`...); an unknown address 404, one of the other kind 400 |
//! | `DELETE /v1/nodes/{id}/addresses/{IP or id}` | 204, the address stays the account's on no node; 404 when it is not on the node |
//! | `GET /v1/target-groups/{group}/targets` | 200 `{"targets": [{"node_id", "port", "health"}]}` (`initial` until the node was read, then `healthy`); 404 for a group that does not exist (there is one, [`TARGET_GROUP`]) |
//! | `PUT /v1/target-groups/{group}/targets/{id}` | optional `{"port": N}`; 204, again no change; 404 for an unknown group or node |
//! | `DELETE /v1/target-groups/{group}/targets/{id}` | 204, or 404 when the node is not a target |
//! | `GET /v1/subnets/{id}` | 200 `{"subnet": {"id", "zone", "total_addresses", "available_addresses"}}` ([`SUBNETS`]; a node created in it takes an address), or 404 |
//! | anything else | 404 `not_found` |
//!
//! Deleting a node takes it out of every target group and leaves its
//! stable addresses on no node.
//!
//! **Listing.** Nodes come in creation (id) order. `label_selector` is a
//! comma-separated list of exact `key=value` terms, all of which must match
//! (an empty selector matches every node); a term without `=` or with a key
//! or value outside the label syntax is 400 `invalid_request`. `page` counts
//! from 1 (default 1); `per_page` is 1..=100 (default 25); other values are
//! 400 `invalid_request` naming the parameter. `next_page` is `null` on the
//! last page; a page past the end is empty.
//!
//! **Creating.** The body is
//! `{"type": "small", "zone": "zone-a", "capacity_type": "on-demand", "labels": {...}, "subnet": "subnet-a"}`:
//! `type` is required; `zone` defaults to `zone-a` (or the subnet's zone),
//! `capacity_type` (`on-demand` or `spot`) to `on-demand`, `labels` to
//! none, `subnet` to none (an unknown subnet, or one in another zone than
//! `zone`, is 400; a full one 422 `insufficient_capacity`). Label keys and values must
//! match `[A-Za-z0-9._/-]{1,63}`. Bad JSON, an unknown field, type or zone,
//! or a bad label is 400 `invalid_request` with a message naming the field.
//! A type the catalogue does not offer in the zone (`gpu` outside `zone-b`),
//! or as spot (`gpu`), is 422 `insufficient_capacity` naming zone and type.
//! Creating beyond the account's node quota is 403 `quota_exceeded`.
//!
//! **Idempotency.** With an `Idempotency-Key: <key>` header (1 to 255
//! visible ASCII characters), a create whose key was already used returns
//! the node first created with it, with status 200 and without creating
//! anything, for as long as that node exists (after it is deleted the key is
//! free again). The same key with a different body (after defaults are
//! applied) is 409 `idempotency_conflict`.
//!
//! **Catalogue** ([`NODE_TYPES`], zones [`ZONES`]):
//!
//! | type | vCPU | memory | GPU | on-demand $/h | spot $/h | zones |
//! | --- | --- | --- | --- | --- | --- | --- |
//! | `small` | 2 | 4 GiB | | 0.020 | 0.008 | zone-a, zone-b |
//! | `medium` | 4 | 8 GiB | | 0.040 | 0.016 | zone-a, zone-b |
//! | `large` | 8 | 32 GiB | | 0.160 | 0.064 | zone-a, zone-b |
//! | `gpu` | 8 | 64 GiB | 1 nvidia | 1.100 | none | zone-b |
//!
//! **Errors.** Every error body is `{"error":{"code":"...","message":"..."}}`
//! ([`ErrorCode`]): 400 `invalid_request`, 401 `unauthorized`, 403
//! `quota_exceeded`, 404 `not_found`, 409 `idempotency_conflict`, 422
//! `insufficient_capacity`, 429 `rate_limited` (with `Retry-After: <seconds>`)
//! and 500 `internal`. [`render_error`], [`rate_limited_error`],
//! [`capacity_error`] and [`quota_error`] build these responses without a
//! server, identical to the fake's.
//!
//! # Faults
//!
//! [`RefCloudFake::inject`] queues one-shot [`RefFault`]s. Each is consumed
//! by the first authenticated request it applies to: `RateLimited`,
//! `ServerError` and `Unauthorized` apply to any request, `Capacity` and
//! `Quota` only to `POST /v1/nodes`. A faulted request has no other effect:
//! nothing is created or deleted, no read is counted, no idempotency key is
//! recorded.

mod api;
mod catalog;
mod errors;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use anyhow::{Context as _, bail};

use crate::wire::lock;

pub use api::{SUBNETS, TARGET_GROUP};
pub use catalog::{DEFAULT_ZONE, NODE_TYPES, NodeType, ON_DEMAND, SPOT, ZONES, node_type};
pub use errors::{
    ErrorCode, ErrorResponse, capacity_error, quota_error, rate_limited_error, render_error,
};

/// The bearer token a fake accepts unless told otherwise.
pub const DEFAULT_TOKEN: &str = "fake-refcloud-token";

/// How the fake behaves; `Default` gives values fit for most tests.
#[derive(Clone, Debug)]
pub struct RefCloudFakeOptions {
    /// The only bearer token the fake accepts.
    pub token: String,
    /// The account's node quota: a create while this many nodes exist is
    /// 403 `quota_exceeded`.
    pub max_nodes: usize,
}

impl Default for RefCloudFakeOptions {
    /// Token [`DEFAULT_TOKEN`], 1000 nodes.
    fn default() -> Self {
        Self {
            token: DEFAULT_TOKEN.to_string(),
            max_nodes: 1000,
        }
    }
}

/// A snapshot of one node as the fake holds it (ground truth for test
/// assertions; taking it does not count as a read).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct RefNode {
    /// Node id, as in `/v1/nodes/{id}`, e.g. `n-000001`.
    pub id: String,
    /// Node type name, e.g. `small`.
    pub node_type: String,
    /// Zone, e.g. `zone-a`.
    pub zone: String,
    /// `on-demand` or `spot`.
    pub capacity_type: String,
    /// The state the next read would show: `provisioning` or `running`.
    pub state: String,
    /// Private IPv4 address.
    pub address: String,
    /// Labels as created, or as last replaced.
    pub labels: BTreeMap<String, String>,
    /// The subnet it was created in, if any.
    pub subnet: Option<String>,
    /// Creation time, RFC 3339.
    pub created: String,
    /// GETs that have returned the node so far.
    pub reads: u32,
    /// The `Idempotency-Key` it was created with, if any.
    pub idempotency_key: Option<String>,
}

/// A stable address as the fake holds it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RefAddress {
    /// Its id, `ip-000001`...
    pub id: String,
    /// The IPv4 address.
    pub ip: String,
    /// `private` or `public`.
    pub kind: String,
    /// The node it is on, if any.
    pub node_id: Option<String>,
}

/// A one-shot failure to inject (see the module docs for which requests
/// each applies to).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RefFault {
    /// 429 `rate_limited` with `Retry-After: retry_after_s`.
    RateLimited {
        /// Value of the `Retry-After` header, in seconds.
        retry_after_s: u64,
    },
    /// 422 `insufficient_capacity` naming the zone and type asked for; on
    /// create only.
    Capacity,
    /// 403 `quota_exceeded`; on create only.
    Quota,
    /// 500 `internal`.
    ServerError,
    /// 401 `unauthorized`, even with the right token.
    Unauthorized,
}

/// A running fake reference cloud.
///
/// Dropping it stops the server task; [`RefCloudFake::shutdown`] does so
/// gracefully and waits for it.
#[derive(Debug)]
pub struct RefCloudFake {
    token: String,
    state: Arc<Mutex<api::FakeState>>,
    server: crate::wire::Server,
}

impl RefCloudFake {
    /// Start on the given address (tests use `127.0.0.1:0` to get a free
    /// port). Only loopback addresses are accepted, so a fake can never be
    /// reachable from the network; anything else is an error, as is an
    /// empty token.
    pub async fn start(addr: SocketAddr, opts: RefCloudFakeOptions) -> anyhow::Result<Self> {
        if opts.token.trim().is_empty() || opts.token.contains(char::is_whitespace) {
            bail!("fake refcloud: the token must be non-empty and contain no whitespace");
        }
        let token = opts.token.clone();
        let state = Arc::new(Mutex::new(api::FakeState::new(opts)));
        let server =
            crate::wire::Server::start("refcloud", addr, api::router(Arc::clone(&state))).await?;
        Ok(Self {
            token,
            state,
            server,
        })
    }

    /// Base URL including the `/v1` prefix, e.g. `http://127.0.0.1:41234/v1`,
    /// to configure a plugin's `endpoint` with.
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

    /// Every node that exists, in id order, whatever its labels (ground
    /// truth; does not count as a read).
    pub fn nodes(&self) -> Vec<RefNode> {
        lock(&self.state).snapshot()
    }

    /// Creates a node directly, bypassing the API (no request is counted,
    /// the quota is not checked and the labels are not validated), and
    /// returns its id: for tests that need nodes a plugin did not make, such
    /// as another owner's or untagged ones. It is a `small` on-demand node in
    /// `zone-a`, `provisioning` like any new node.
    pub fn plant(&self, labels: BTreeMap<String, String>) -> String {
        lock(&self.state).plant(labels)
    }

    /// The account's stable addresses, in the order they were taken
    /// (ground truth).
    pub fn addresses(&self) -> Vec<RefAddress> {
        lock(&self.state)
            .addresses
            .iter()
            .map(|a| RefAddress {
                id: a.id.clone(),
                ip: a.ip.to_string(),
                kind: a.kind.to_string(),
                node_id: a.node.map(|seq| format!("n-{seq:06}")),
            })
            .collect()
    }

    /// The targets of `group`: (node id, port), in node order; `None` for
    /// a group that does not exist (ground truth).
    pub fn targets(&self, group: &str) -> Option<Vec<(String, Option<u16>)>> {
        lock(&self.state).groups.get(group).map(|members| {
            members
                .iter()
                .map(|(seq, port)| (format!("n-{seq:06}"), *port))
                .collect()
        })
    }

    /// Total HTTP requests served so far, including rejected ones.
    pub fn request_count(&self) -> u64 {
        lock(&self.state).request_count
    }

    /// Queue a one-shot fault for the next request it applies to.
    pub fn inject(&self, fault: RefFault) {
        lock(&self.state).faults.push_back(fault);
    }

    /// Stop accepting connections, let in-flight requests finish (for at
    /// most 5 seconds) and wait for the server task to end.
    pub async fn shutdown(self) {
        self.server.shutdown().await;
    }
}

/// Run the fake as a standalone process (for manual testing or for plugins
/// run outside the test harness): start it on `addr`, print one line
/// `fake refcloud listening on http://ADDR/v1 (token: TOKEN)` to stdout, and
/// serve until Ctrl-C.
pub async fn run_standalone(addr: SocketAddr, opts: RefCloudFakeOptions) -> anyhow::Result<()> {
    let fake = RefCloudFake::start(addr, opts).await?;
    println!(
        "fake refcloud listening on {} (token: {})",
        fake.url(),
        fake.token()
    );
    tokio::signal::ctrl_c()
        .await
        .context("fake refcloud: waiting for Ctrl-C")?;
    fake.shutdown().await;
    Ok(())
}
