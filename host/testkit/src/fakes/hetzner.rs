//! The Hetzner Cloud fake of `wasmprov-fake`, as the suite uses it.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::Bytes;
use wasmprov_fake::{HetznerFake, HetznerFakeOptions};
use wasmprov_host::intercept::OutgoingRequest;

use crate::fake::{FakeCloud, NodeRecord, TruthNode, json_response};
use crate::faults::FaultKind;

/// Small pages, so that describe's paging is exercised.
const PAGE_SIZE: usize = 2;

pub(crate) struct Hetzner {
    fake: HetznerFake,
    planted: AtomicU32,
}

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
                ..NodeRecord::default()
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
