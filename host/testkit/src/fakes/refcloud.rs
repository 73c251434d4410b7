//! The reference cloud fake of `wasmprov-fake`, as the suite uses it.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use bytes::Bytes;
use wasmprov_fake::refcloud::{
    DEFAULT_ZONE, ErrorResponse, SUBNETS, TARGET_GROUP, capacity_error, quota_error,
    rate_limited_error,
};
use wasmprov_fake::{RefCloudFake, RefCloudFakeOptions};
use wasmprov_host::intercept::OutgoingRequest;

use crate::fake::{
    FakeCloud, NetworkTruth, NodeRecord, TruthAddress, TruthGroup, TruthNode, TruthSubnet,
};
use crate::faults::FaultKind;

pub(crate) struct RefCloud {
    fake: RefCloudFake,
}

impl RefCloud {
    pub(crate) async fn start() -> anyhow::Result<Self> {
        let fake = RefCloudFake::start(
            SocketAddr::from(([127, 0, 0, 1], 0)),
            RefCloudFakeOptions::default(),
        )
        .await?;
        Ok(Self { fake })
    }
}

fn to_response(e: ErrorResponse) -> http::Response<Bytes> {
    e.to_http().map(Bytes::from)
}

#[async_trait::async_trait]
impl FakeCloud for RefCloud {
    fn describe(&self) -> String {
        format!("refcloud fake at {}", self.fake.url())
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
            .nodes()
            .into_iter()
            .map(|n| TruthNode {
                id: n.id,
                labels: n.labels,
                alive: true,
                user_data: None,
            })
            .collect())
    }

    /// Only the subnet a node went to: the other rules that compare with
    /// a record stay as they were for plugins of this cloud.
    async fn record(&self, id: &str) -> anyhow::Result<Option<NodeRecord>> {
        Ok(self
            .fake
            .nodes()
            .into_iter()
            .find(|n| n.id == id)
            .map(|n| NodeRecord {
                subnet: Some(n.subnet.unwrap_or_default()),
                ..NodeRecord::default()
            }))
    }

    /// Its two subnets (a node in one holds one of its addresses), its
    /// target group and its stable addresses.
    async fn network(&self) -> anyhow::Result<Option<NetworkTruth>> {
        let nodes = self.fake.nodes();
        let subnets = SUBNETS
            .iter()
            .map(|(id, _, total)| {
                let used = nodes
                    .iter()
                    .filter(|n| n.subnet.as_deref() == Some(*id))
                    .count() as u64;
                TruthSubnet {
                    id: (*id).to_string(),
                    available: total.saturating_sub(used),
                    total: Some(*total),
                }
            })
            .collect();
        let groups = vec![TruthGroup {
            id: TARGET_GROUP.to_string(),
            targets: self
                .fake
                .targets(TARGET_GROUP)
                .unwrap_or_default()
                .into_iter()
                .map(|(node, _)| node)
                .collect(),
        }];
        let addresses = self
            .fake
            .addresses()
            .into_iter()
            .map(|a| TruthAddress {
                address: a.ip,
                resource_id: Some(a.id),
                node: a.node_id,
            })
            .collect();
        Ok(Some(NetworkTruth {
            subnets,
            groups,
            addresses,
        }))
    }

    async fn plant(&self, labels: BTreeMap<String, String>) -> anyhow::Result<Option<String>> {
        Ok(Some(self.fake.plant(labels)))
    }

    fn is_create(&self, req: &OutgoingRequest) -> bool {
        req.method == http::Method::POST && req.uri.path().trim_end_matches('/').ends_with("/nodes")
    }

    fn fault_response(&self, kind: FaultKind, req: &OutgoingRequest) -> http::Response<Bytes> {
        match kind {
            FaultKind::Capacity => {
                let body: serde_json::Value = serde_json::from_slice(&req.body).unwrap_or_default();
                let zone = body["zone"].as_str().unwrap_or(DEFAULT_ZONE);
                let node_type = body["type"].as_str().unwrap_or("small");
                to_response(capacity_error(zone, node_type))
            }
            FaultKind::Quota => to_response(quota_error(1000)),
            _ => to_response(rate_limited_error(1)),
        }
    }
}
