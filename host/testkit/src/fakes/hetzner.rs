//! The Hetzner Cloud fake of `wasmprov-fake`, as the suite uses it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use wasmprov_fake::{HetznerFake, HetznerFakeOptions};
use wasmprov_host::intercept::OutgoingRequest;

use crate::fake::{
    FakeCloud, NetworkTruth, NodeRecord, TruthAddress, TruthGroup, TruthNode, TruthSubnet,
    json_response,
};
use crate::faults::FaultKind;

/// Small pages, so that describe's paging is exercised.
const PAGE_SIZE: usize = 2;

pub(crate) struct Hetzner {
    fake: HetznerFake,
    planted: AtomicU32,
}

/// The network the suite places nodes in and asks the capacity of: one
/// /24 subnet, 253 addresses for servers.
const NETWORK: (&str, &str, &[&str]) = ("conformance-net", "10.0.0.0/16", &["10.0.1.0/24"]);

impl Hetzner {
    pub(crate) async fn start() -> anyhow::Result<Self> {
        let fake = HetznerFake::start(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            HetznerFakeOptions {
                // Small pages, so that describe's pagination is exercised.
                page_size_max: PAGE_SIZE,
                ..HetznerFakeOptions::default()
            },
        )
        .await?;
        let (name, range, subnets) = NETWORK;
        fake.add_network(name, range, subnets)?;
        fake.add_load_balancer("conformance-lb", "fsn1")?;
        Ok(Self {
            fake,
            planted: AtomicU32::new(0),
        })
    }
}

#[async_trait::async_trait]
impl FakeCloud for Hetzner {
    fn describe(&self) -> String {
        format!("hetzner fake at {}", self.fake.url())
    }

    fn http_target(&self) -> Option<SocketAddr> {
        Some(self.fake.addr())
    }

    fn secret(&self, _env: &str) -> Option<String> {
        Some(self.fake.token().to_string())
    }

    async fn nodes(&self) -> anyhow::Result<Vec<TruthNode>> {
        Ok(self
            .fake
            .servers()
            .into_iter()
            .map(|s| TruthNode {
                id: s.id.to_string(),
                labels: s.labels,
                alive: true,
                user_data: s.user_data.map(String::into_bytes),
            })
            .collect())
    }

    /// The fake keeps no image or creation time; the state moves on as
    /// servers are read, so it is the one a read right now would show.
    async fn record(&self, id: &str) -> anyhow::Result<Option<NodeRecord>> {
        Ok(self
            .fake
            .servers()
            .into_iter()
            .find(|s| s.id.to_string() == id)
            .map(|s| NodeRecord {
                user_data: Some(s.user_data.map(String::into_bytes).unwrap_or_default()),
                ssh_keys: Some(s.ssh_keys),
                zone: Some(s.location),
                instance_type: Some(s.server_type),
                state: Some(s.status),
                public_address: Some(s.ipv4),
                private_address: Some(
                    s.private_net
                        .first()
                        .map(|n| n.ip.clone())
                        .unwrap_or_default(),
                )
                .filter(|ip| !ip.is_empty()),
                // The server's address is the first host of its /64.
                ipv6_address: first_host(&s.ipv6),
                hostname: Some(s.name),
                subnet: Some(
                    s.private_net
                        .first()
                        .map(|n| n.network.to_string())
                        .unwrap_or_default(),
                ),
                ..NodeRecord::default()
            }))
    }

    /// The network, the load balancer and the floating IPs, with where
    /// each is now. The network's free addresses are its subnets'.
    async fn network(&self) -> anyhow::Result<Option<NetworkTruth>> {
        let subnets = self
            .fake
            .networks()
            .into_iter()
            .map(|n| TruthSubnet {
                id: n.id.to_string(),
                available: n.subnets.iter().map(|s| s.free).sum(),
                total: Some(n.subnets.iter().map(|s| s.total).sum()),
            })
            .collect();
        let groups = self
            .fake
            .load_balancers()
            .into_iter()
            .map(|lb| TruthGroup {
                id: lb.id.to_string(),
                targets: lb.targets.iter().map(ToString::to_string).collect(),
            })
            .collect();
        let addresses = self
            .fake
            .floating_ips()
            .into_iter()
            .map(|f| TruthAddress {
                address: f.ip,
                resource_id: Some(f.id.to_string()),
                node: f.server.map(|s| s.to_string()),
            })
            .collect();
        Ok(Some(NetworkTruth {
            subnets,
            groups,
            addresses,
        }))
    }

    fn page_size(&self) -> Option<usize> {
        Some(PAGE_SIZE)
    }

    async fn plant(&self, labels: BTreeMap<String, String>) -> anyhow::Result<Option<String>> {
        let n = self.planted.fetch_add(1, Ordering::Relaxed);
        let id = self.fake.plant(&format!("planted-{n}"), &labels)?;
        Ok(Some(id.to_string()))
    }

    fn is_create(&self, req: &OutgoingRequest) -> bool {
        req.method == http::Method::POST
            && req.uri.path().trim_end_matches('/').ends_with("/servers")
    }

    fn fault_response(&self, kind: FaultKind, _req: &OutgoingRequest) -> http::Response<Bytes> {
        let error = |code: &str, message: &str| {
            serde_json::json!({"error": {"code": code, "message": message, "details": {}}})
                .to_string()
        };
        match kind {
            FaultKind::Capacity => json_response(
                412,
                &[],
                &error(
                    "resource_unavailable",
                    "error during placement (injected by the test suite)",
                ),
            ),
            FaultKind::Quota => json_response(
                403,
                &[],
                &error(
                    "resource_limit_exceeded",
                    "server limit exceeded (injected by the test suite)",
                ),
            ),
            _ => json_response(
                429,
                &[("Retry-After", "1")],
                &error(
                    "rate_limit_exceeded",
                    "limit of 3600 requests per hour reached (injected by the test suite)",
                ),
            ),
        }
    }
}

/// The first host of an IPv6 network (`2001:db8:1::/64` → `2001:db8:1::1`).
fn first_host(net: &str) -> Option<String> {
    let addr: std::net::Ipv6Addr = net.split('/').next()?.parse().ok()?;
    Some(std::net::Ipv6Addr::from(u128::from(addr) | 1).to_string())
}
