//! Test guest: a provisioner for the reference cloud
//! (`wasmprov_fake::refcloud`, whose module docs are the API it speaks) that
//! is correct by default and has one planted bug switched on by the `bug`
//! config key, so that tests can show the conformance suite catches each:
//!
//! | `bug` | what goes wrong |
//! | --- | --- |
//! | `none` (default) | nothing: the reference behaviour, as in the `wasmprov new` template |
//! | `duplicate-on-retry` | `provision` never looks for the request's node and sends no `Idempotency-Key`: every call creates a node |
//! | `foreign-in-describe` | `describe` lists every node of the account, not only this owner's |
//! | `wrong-error-variant` | every error response of the cloud (404 on terminate, 429, 422, 403, ...) comes back as `other` |
//! | `leak-node` | `terminate` answers success and deletes nothing |
//!
//! Config keys: `endpoint` (default [`DEFAULT_ENDPOINT`]) and `bug`; secret
//! `token` (needed by every call but `price-hint`).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use wasmprov_guest::http::{Request, Response};
use wasmprov_guest::shape::{self, InstanceType};
use wasmprov_guest::state::StateTable;
use wasmprov_guest::tags::{self, OWNER, REQUEST, id_tag, label_value};
use wasmprov_guest::{
    CapacityScope, CapacityType, Error, JoinState, Labels, NodeHandle, NodeShape, NodeStatus,
    PriceHint, Provider, ProvisionRequest, Result, config, export_provider, log,
};

/// The API base URL used when the manifest sets no `endpoint`.
pub const DEFAULT_ENDPOINT: &str = "https://api.refcloud.example/v1";
/// `per_page` of every list call (the API's largest).
const PER_PAGE: u32 = 100;
/// Most pages `describe` reads before giving up on an API that keeps
/// announcing a next page.
const MAX_PAGES: u32 = 10_000;

/// The planted bug, from the `bug` config key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// `none`: correct behaviour.
    None,
    /// `duplicate-on-retry`: no lookup and no idempotency key on provision.
    DuplicateOnRetry,
    /// `foreign-in-describe`: describe without the owner selector or check.
    ForeignInDescribe,
    /// `wrong-error-variant`: every cloud error becomes `other`.
    WrongErrorVariant,
    /// `leak-node`: terminate deletes nothing and says it did.
    LeakNode,
}

impl Bug {
    /// Every value of the `bug` key.
    pub const ALL: [(&'static str, Bug); 5] = [
        ("none", Bug::None),
        ("duplicate-on-retry", Bug::DuplicateOnRetry),
        ("foreign-in-describe", Bug::ForeignInDescribe),
        ("wrong-error-variant", Bug::WrongErrorVariant),
        ("leak-node", Bug::LeakNode),
    ];

    /// Parses a `bug` value.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] listing the accepted values.
    pub fn parse(value: &str) -> Result<Self> {
        let value = value.trim();
        Self::ALL
            .iter()
            .find(|(name, _)| *name == value)
            .map(|(_, bug)| *bug)
            .ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "config key \"bug\" has value {value:?}; accepted: {}",
                    Self::ALL.map(|(name, _)| name).join(", ")
                ))
            })
    }
}

// ---------------------------------------------------------------------------
// Catalogue (the same table as `wasmprov_fake::refcloud::NODE_TYPES`).
// ---------------------------------------------------------------------------

/// The zones, preferred first.
pub const ZONES: [&str; 2] = ["zone-a", "zone-b"];

/// One node type of the reference cloud.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NodeType {
    /// The API's name of the type.
    pub name: &'static str,
    /// vCPUs.
    pub vcpu: f64,
    /// Memory in GiB.
    pub memory_gib: u64,
    /// GPUs.
    pub gpu: u32,
    /// GPU vendor when `gpu > 0`.
    pub gpu_vendor: Option<&'static str>,
    /// On-demand USD per hour (the same in every zone).
    pub hourly_usd: f64,
    /// Spot USD per hour, `None` when not sold as spot.
    pub spot_hourly_usd: Option<f64>,
    /// Zones offering the type.
    pub zones: &'static [&'static str],
}

/// The catalogue.
pub const NODE_TYPES: [NodeType; 4] = [
    NodeType {
        name: "small",
        vcpu: 2.0,
        memory_gib: 4,
        gpu: 0,
        gpu_vendor: None,
        hourly_usd: 0.020,
        spot_hourly_usd: Some(0.008),
        zones: &ZONES,
    },
    NodeType {
        name: "medium",
        vcpu: 4.0,
        memory_gib: 8,
        gpu: 0,
        gpu_vendor: None,
        hourly_usd: 0.040,
        spot_hourly_usd: Some(0.016),
        zones: &ZONES,
    },
    NodeType {
        name: "large",
        vcpu: 8.0,
        memory_gib: 32,
        gpu: 0,
        gpu_vendor: None,
        hourly_usd: 0.160,
        spot_hourly_usd: Some(0.064),
        zones: &ZONES,
    },
    NodeType {
        name: "gpu",
        vcpu: 8.0,
        memory_gib: 64,
        gpu: 1,
        gpu_vendor: Some("nvidia"),
        hourly_usd: 1.100,
        spot_hourly_usd: None,
        zones: &["zone-b"],
    },
];

/// The catalogue as the SDK's [`shape::pick`] wants it: only the types sold
/// as `capacity`, at that price, in their zones.
fn catalogue(capacity: CapacityType) -> Vec<InstanceType> {
    NODE_TYPES
        .iter()
        .filter_map(|t| {
            let price = match capacity {
                CapacityType::OnDemand => t.hourly_usd,
                CapacityType::Spot => t.spot_hourly_usd?,
            };
            Some(InstanceType {
                name: t.name.to_string(),
                cpu: t.vcpu,
                memory_bytes: t.memory_gib << 30,
                gpu: t.gpu,
                gpu_vendor: t.gpu_vendor.map(str::to_string),
                gpu_model: None,
                arch: None,
                disk_bytes: None,
                spot_hourly_usd: t.spot_hourly_usd,
                zone_prices: t.zones.iter().map(|z| ((*z).to_string(), price)).collect(),
                default_hourly_usd: price,
            })
        })
        .collect()
}

/// Where a shape goes: node type, zone and price.
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    /// Node type name.
    pub node_type: String,
    /// Zone: the shape's, else the first zone offering the type.
    pub zone: String,
    /// USD per hour.
    pub hourly_usd: f64,
}

/// Chooses type and zone for `shape`, without I/O.
///
/// # Errors
/// [`Error::Unsupported`] for an unknown zone, a type not sold as spot, or a
/// shape no type fits; [`Error::Capacity`] when fitting types exist but not
/// in the zone asked for.
pub fn place(shape: &NodeShape) -> Result<Placement> {
    if let Some(zone) = shape.zone.as_deref()
        && !ZONES.contains(&zone)
    {
        return Err(Error::Unsupported(format!(
            "zone {zone:?} does not exist; zones are {}",
            ZONES.join(", ")
        )));
    }
    if shape.capacity_type == CapacityType::Spot
        && let Some(name) = shape.instance_type.as_deref()
        && NODE_TYPES
            .iter()
            .any(|t| t.name == name && t.spot_hourly_usd.is_none())
    {
        return Err(Error::Unsupported(format!(
            "node type {name:?} is not sold as spot"
        )));
    }
    let catalogue = catalogue(shape.capacity_type);
    let choice = shape::pick(shape, &catalogue).map_err(|e| match e {
        Error::Unsupported(m) if shape.capacity_type == CapacityType::Spot => {
            Error::Unsupported(format!("{m} sold as spot"))
        }
        e => e,
    })?;
    let zone = match &shape.zone {
        Some(zone) => zone.clone(),
        None => choice
            .instance_type
            .zone_prices
            .first()
            .map_or_else(|| ZONES[0].to_string(), |(z, _)| z.clone()),
    };
    Ok(Placement {
        node_type: choice.instance_type.name.clone(),
        zone,
        hourly_usd: choice.hourly_usd,
    })
}

// ---------------------------------------------------------------------------
// Wire format.
// ---------------------------------------------------------------------------

/// A node as the API returns it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Node {
    /// Node id, e.g. `n-000001`.
    pub id: String,
    /// Node type.
    #[serde(rename = "type")]
    pub node_type: String,
    /// Zone.
    pub zone: String,
    /// `on-demand` or `spot`.
    pub capacity_type: String,
    /// `provisioning` or `running`.
    pub state: String,
    /// Private address.
    #[serde(default)]
    pub address: Option<String>,
    /// Labels.
    #[serde(default)]
    pub labels: Labels,
}

/// The cloud's states: `running` means the machine is up, not that its node
/// agent joined the cluster (the host learns that from the cluster).
const STATES: StateTable = StateTable::new(
    &[
        ("provisioning", NodeStatus::Pending, JoinState::Provisioning),
        ("running", NodeStatus::Running, JoinState::Joining),
        ("deleting", NodeStatus::Deleting, JoinState::Failed),
    ],
    (NodeStatus::Unknown, JoinState::Provisioning),
);

impl Node {
    /// The node handle for this node.
    #[must_use]
    pub fn to_handle(&self) -> NodeHandle {
        NodeHandle {
            provider_id: self.id.clone(),
            address: self.address.clone().filter(|a| !a.is_empty()),
            zone: Some(self.zone.clone()),
            capacity_type: if self.capacity_type == "spot" {
                CapacityType::Spot
            } else {
                CapacityType::OnDemand
            },
            join_state: STATES.get(&self.state),
            instance_type: Some(self.node_type.clone()),
            labels: self.labels.clone(),
            ..Default::default()
        }
    }

    fn owned_by(&self, owner_id: &str) -> bool {
        self.labels
            .get(OWNER)
            .is_some_and(|v| *v == id_tag(owner_id))
    }

    fn for_request(&self, owner_id: &str, request_id: &str) -> bool {
        self.owned_by(owner_id)
            && self
                .labels
                .get(REQUEST)
                .is_some_and(|v| *v == id_tag(request_id))
    }
}

#[derive(Deserialize)]
struct OneNode {
    node: Node,
}

#[derive(Deserialize)]
struct NodeList {
    nodes: Vec<Node>,
    #[serde(default)]
    next_page: Option<u32>,
}

#[derive(Serialize)]
struct CreateNode<'a> {
    #[serde(rename = "type")]
    node_type: &'a str,
    zone: &'a str,
    capacity_type: &'a str,
    labels: &'a Labels,
}

#[derive(Deserialize)]
struct ErrorEnvelope {
    error: ErrorBody,
}

#[derive(Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
}

/// Whether `s` is a valid label key or value for the API: `[A-Za-z0-9._/-]{1,63}`.
fn is_valid_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/' | b'-'))
}

/// The labels of a new node: the shape's (anything the API would refuse
/// rewritten by [`label_value`]) plus the owner and request tags, which win.
#[must_use]
pub fn node_labels(owner_id: &str, request_id: &str, shape_labels: &Labels) -> Labels {
    let fix = |s: &String| {
        if is_valid_label(s) {
            s.clone()
        } else {
            label_value(s)
        }
    };
    let cleaned = shape_labels.iter().map(|(k, v)| (fix(k), fix(v))).collect();
    tags::node_labels(owner_id, request_id, &cleaned)
}

/// The `Idempotency-Key` of a create. Scoped by owner as well as request:
/// two hosts sharing an account may use the same request id, and a key
/// equal to the bare request id would make the second host's create an
/// `idempotency_conflict`.
#[must_use]
pub fn idempotency_key(owner_id: &str, request_id: &str) -> String {
    format!("{}/{}", id_tag(owner_id), id_tag(request_id))
}

/// Whether `id` can be a node id (and is safe in a URL path).
fn is_node_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The contract error for an error response of the API: the status
/// decides. `scope` is what a 422 ran out of.
#[must_use]
pub fn api_error(resp: &Response, what: &str, scope: CapacityScope) -> Error {
    let (code, message) = match serde_json::from_slice::<ErrorEnvelope>(&resp.body) {
        Ok(env) => (env.error.code, env.error.message),
        Err(_) => (
            String::new(),
            resp.text().trim().chars().take(200).collect(),
        ),
    };
    let code = if code.is_empty() {
        String::new()
    } else {
        format!(", {code}")
    };
    let message = format!("refcloud {what} (HTTP {}{code}): {message}", resp.status);
    match resp.status {
        429 => Error::RateLimited {
            retry_after_ms: resp.retry_after_ms(),
            message,
        },
        422 => Error::Capacity { scope, message },
        403 => Error::Quota(message),
        401 => Error::Auth(message),
        404 => Error::NotFound(message),
        400 => Error::InvalidConfig(message),
        500..=599 => Error::Transport(message),
        _ => Error::Other(message),
    }
}

// ---------------------------------------------------------------------------
// The provider.
// ---------------------------------------------------------------------------

/// The reference-cloud provider, with its planted bug.
#[derive(Clone, Debug)]
pub struct BuggyRefCloud {
    endpoint: String,
    token: Option<String>,
    bug: Bug,
}

impl BuggyRefCloud {
    /// Sends `req` with the token; an error status becomes a contract error.
    fn send(&self, req: Request, what: &str, scope: CapacityScope) -> Result<Response> {
        let token = self.token.as_deref().ok_or_else(|| {
            Error::InvalidConfig(
                "secret \"token\" is required; set it in the manifest's [secrets]".into(),
            )
        })?;
        let resp = req
            .bearer(token)
            .header("accept", "application/json")
            .send()?;
        if resp.is_success() {
            return Ok(resp);
        }
        let err = api_error(&resp, what, scope);
        Err(match self.bug {
            // Planted bug: the variant the caller acts on is lost.
            Bug::WrongErrorVariant => Error::Other(err.to_string()),
            _ => err,
        })
    }

    fn list_page(&self, selector: Option<&str>, page: u32) -> Result<NodeList> {
        let mut req = Request::get(format!("{}/nodes", self.endpoint));
        if let Some(selector) = selector {
            req = req.query("label_selector", selector);
        }
        let req = req
            .query("page", &page.to_string())
            .query("per_page", &PER_PAGE.to_string());
        self.send(req, "GET /nodes", CapacityScope::Zone)?.json()
    }

    /// The node created for this request, if any (the lowest id if several).
    fn find_for_request(&self, owner_id: &str, request_id: &str) -> Result<Option<Node>> {
        let selector = format!(
            "{OWNER}={},{REQUEST}={}",
            id_tag(owner_id),
            id_tag(request_id)
        );
        let list = self.list_page(Some(&selector), 1)?;
        Ok(list
            .nodes
            .into_iter()
            .filter(|n| n.for_request(owner_id, request_id))
            .min_by(|a, b| a.id.cmp(&b.id)))
    }
}

impl Provider for BuggyRefCloud {
    const NAME: &'static str = "buggy-refcloud";

    fn capacity_types() -> Vec<CapacityType> {
        vec![CapacityType::OnDemand, CapacityType::Spot]
    }

    fn new() -> Result<Self> {
        let endpoint = config::get("endpoint")?
            .map(|e| e.trim().trim_end_matches('/').to_string())
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        let bug = match config::get("bug")? {
            Some(v) if !v.trim().is_empty() => Bug::parse(&v)?,
            _ => Bug::None,
        };
        let token = config::get("token")?
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty());
        Ok(Self {
            endpoint,
            token,
            bug,
        })
    }

    fn price_hint(&self, shape: &NodeShape) -> Result<Option<PriceHint>> {
        let placement = place(shape)?;
        Ok(Some(PriceHint {
            hourly_usd: placement.hourly_usd,
            capacity_type: shape.capacity_type,
            instance_type: placement.node_type,
        }))
    }

    fn provision(&self, owner_id: &str, request: &ProvisionRequest) -> Result<NodeHandle> {
        let shape = &request.shape;
        let request_id = request.request_id.as_str();
        let placement = place(shape)?;
        let careful = self.bug != Bug::DuplicateOnRetry;
        if careful && let Some(existing) = self.find_for_request(owner_id, request_id)? {
            return Ok(existing.to_handle());
        }
        let labels = node_labels(owner_id, request_id, &shape.labels);
        let body = CreateNode {
            node_type: &placement.node_type,
            zone: &placement.zone,
            capacity_type: match shape.capacity_type {
                CapacityType::OnDemand => "on-demand",
                CapacityType::Spot => "spot",
            },
            labels: &labels,
        };
        let mut req = Request::post(format!("{}/nodes", self.endpoint)).json(&body);
        if careful {
            req = req.header("idempotency-key", idempotency_key(owner_id, request_id));
        }
        // A 422 is about the zone when the caller chose it, else about the type.
        let scope = if shape.zone.is_some() {
            CapacityScope::Zone
        } else {
            CapacityScope::InstanceType
        };
        let node = self
            .send(req, "POST /nodes", scope)?
            .json::<OneNode>()?
            .node;
        log::info_with(
            "created refcloud node",
            &[
                ("node_id", &node.id),
                ("type", &node.node_type),
                ("zone", &node.zone),
                ("request_id", request_id),
            ],
        );
        Ok(node.to_handle())
    }

    fn terminate(&self, owner_id: &str, provider_id: &str) -> Result<()> {
        if self.bug == Bug::LeakNode {
            // Planted bug: success without deleting anything.
            return Ok(());
        }
        if !is_node_id(provider_id) {
            return Err(Error::NotFound(format!(
                "{provider_id:?} is not a refcloud node id"
            )));
        }
        let url = format!("{}/nodes/{provider_id}", self.endpoint);
        let node = self
            .send(Request::get(&url), "GET /nodes/{id}", CapacityScope::Zone)?
            .json::<OneNode>()?
            .node;
        if !node.owned_by(owner_id) {
            return Err(Error::NotFound(format!(
                "node {provider_id} is not owned by this host"
            )));
        }
        self.send(
            Request::delete(&url),
            "DELETE /nodes/{id}",
            CapacityScope::Zone,
        )?;
        Ok(())
    }

    fn describe(&self, owner_id: &str) -> Result<Vec<NodeHandle>> {
        let owner_only = self.bug != Bug::ForeignInDescribe;
        let selector = format!("{OWNER}={}", id_tag(owner_id));
        let selector = owner_only.then_some(selector.as_str());
        let mut seen = BTreeSet::new();
        let mut nodes = Vec::new();
        let mut page = 1;
        for _ in 0..MAX_PAGES {
            let list = self.list_page(selector, page)?;
            for node in list.nodes {
                // The API filters already; checking again guarantees no
                // foreign node is returned. Pages shift while nodes come
                // and go, so drop repeats.
                if (!owner_only || node.owned_by(owner_id)) && seen.insert(node.id.clone()) {
                    nodes.push(node.to_handle());
                }
            }
            match list.next_page {
                None => return Ok(nodes),
                Some(next) if next > page => page = next,
                Some(next) => {
                    return Err(Error::Transport(format!(
                        "refcloud pagination does not advance (page {page} says next page is {next})"
                    )));
                }
            }
        }
        Err(Error::Transport(format!(
            "refcloud listed more than {MAX_PAGES} pages of nodes; giving up"
        )))
    }
}

export_provider!(BuggyRefCloud);

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(status: u16, headers: &[(&str, &str)], body: &str) -> Response {
        Response {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            body: body.as_bytes().to_vec(),
            url: "http://fake/v1/nodes".into(),
        }
    }

    #[test]
    fn catalogue_matches_the_fake() {
        use wasmprov_fake::refcloud as fake;
        assert_eq!(ZONES, fake::ZONES);
        assert_eq!(NODE_TYPES.len(), fake::NODE_TYPES.len());
        for (ours, theirs) in NODE_TYPES.iter().zip(&fake::NODE_TYPES) {
            assert_eq!(ours.name, theirs.name);
            assert_eq!(ours.vcpu, f64::from(theirs.vcpu), "{}", ours.name);
            assert_eq!(
                ours.memory_gib,
                u64::from(theirs.memory_gib),
                "{}",
                ours.name
            );
            assert_eq!(ours.gpu, theirs.gpu, "{}", ours.name);
            assert_eq!(ours.gpu_vendor, theirs.gpu_vendor, "{}", ours.name);
            assert_eq!(ours.hourly_usd, theirs.hourly_usd, "{}", ours.name);
            assert_eq!(
                ours.spot_hourly_usd, theirs.spot_hourly_usd,
                "{}",
                ours.name
            );
            assert_eq!(ours.zones, theirs.zones, "{}", ours.name);
        }
    }

    #[test]
    fn bug_values() {
        assert_eq!(Bug::parse("none").unwrap(), Bug::None);
        assert_eq!(Bug::parse(" leak-node ").unwrap(), Bug::LeakNode);
        let err = Bug::parse("typo").unwrap_err().to_string();
        assert!(err.contains("duplicate-on-retry"), "{err}");
    }

    #[test]
    fn placement() {
        let p = place(&NodeShape::new(2.0, 4 << 30)).unwrap();
        assert_eq!(
            p,
            Placement {
                node_type: "small".into(),
                zone: "zone-a".into(),
                hourly_usd: 0.020
            }
        );
        let spot = NodeShape {
            capacity_type: CapacityType::Spot,
            zone: Some("zone-b".into()),
            ..NodeShape::new(3.0, 8 << 30)
        };
        let p = place(&spot).unwrap();
        assert_eq!(
            (p.node_type.as_str(), p.zone.as_str(), p.hourly_usd),
            ("medium", "zone-b", 0.016)
        );
        // A GPU lands in the only zone that has one.
        let gpu = NodeShape {
            gpu: 1,
            ..NodeShape::new(1.0, 1 << 30)
        };
        let p = place(&gpu).unwrap();
        assert_eq!((p.node_type.as_str(), p.zone.as_str()), ("gpu", "zone-b"));
        assert!(matches!(
            place(&NodeShape {
                zone: Some("zone-a".into()),
                ..gpu.clone()
            }),
            Err(Error::Capacity {
                scope: CapacityScope::Zone,
                ..
            })
        ));
        assert!(matches!(
            place(&NodeShape {
                capacity_type: CapacityType::Spot,
                ..gpu.clone()
            }),
            Err(Error::Unsupported(_))
        ));
        assert!(matches!(
            place(&NodeShape {
                capacity_type: CapacityType::Spot,
                instance_type: Some("gpu".into()),
                ..NodeShape::default()
            }),
            Err(Error::Unsupported(_))
        ));
        assert!(matches!(
            place(&NodeShape {
                zone: Some("zone-z".into()),
                ..NodeShape::default()
            }),
            Err(Error::Unsupported(_))
        ));
        assert!(matches!(
            place(&NodeShape::new(64.0, 1 << 30)),
            Err(Error::Unsupported(_))
        ));
    }

    #[test]
    fn error_mapping() {
        let env = |code: &str| format!(r#"{{"error":{{"code":"{code}","message":"m"}}}}"#);
        let scope = CapacityScope::InstanceType;
        let e = api_error(
            &resp(429, &[("retry-after", "3")], &env("rate_limited")),
            "GET /nodes",
            scope,
        );
        assert_eq!(
            e,
            Error::RateLimited {
                retry_after_ms: Some(3000),
                message: "refcloud GET /nodes (HTTP 429, rate_limited): m".into()
            }
        );
        let kinds: Vec<&str> = [
            (422, "insufficient_capacity"),
            (403, "quota_exceeded"),
            (401, "unauthorized"),
            (404, "not_found"),
            (400, "invalid_request"),
            (500, "internal"),
            (503, ""),
            (409, "idempotency_conflict"),
        ]
        .iter()
        .map(|(status, code)| api_error(&resp(*status, &[], &env(code)), "x", scope).kind())
        .collect();
        assert_eq!(
            kinds,
            [
                "capacity",
                "quota",
                "auth",
                "not_found",
                "invalid_config",
                "transport",
                "transport",
                "other"
            ]
        );
        assert!(matches!(
            api_error(&resp(422, &[], &env("x")), "x", CapacityScope::Zone),
            Error::Capacity {
                scope: CapacityScope::Zone,
                ..
            }
        ));
        let e = api_error(&resp(502, &[], "<html>bad gateway</html>"), "x", scope);
        assert_eq!(
            e,
            Error::Transport("refcloud x (HTTP 502): <html>bad gateway</html>".into())
        );
    }

    #[test]
    fn labels_and_keys() {
        let shape: Labels = [("role", "worker"), ("bad key", "v"), (OWNER, "spoof")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let labels = node_labels("owner-1", "req-1", &shape);
        assert_eq!(labels["role"], "worker");
        assert_eq!(labels[OWNER], "owner-1");
        assert_eq!(labels[REQUEST], "req-1");
        assert!(
            labels
                .iter()
                .all(|(k, v)| is_valid_label(k) && is_valid_label(v))
        );
        assert_ne!(idempotency_key("a", "r"), idempotency_key("b", "r"));
        assert!(
            idempotency_key("o", &"x".repeat(63))
                .bytes()
                .all(|b| b.is_ascii_graphic())
        );
        assert!(is_node_id("n-000001"));
        assert!(!is_node_id("n-1/../x") && !is_node_id("") && !is_node_id("a?b"));
    }

    #[test]
    fn node_handles() {
        let node: Node = serde_json::from_str(
            r#"{"id":"n-000007","type":"gpu","zone":"zone-b","capacity_type":"spot","state":"running","address":"10.1.0.7","labels":{"k":"v"},"created":"x"}"#,
        )
        .unwrap();
        let h = node.to_handle();
        assert_eq!(h.provider_id, "n-000007");
        assert_eq!(h.capacity_type, CapacityType::Spot);
        assert_eq!(h.join_state, JoinState::Joining);
        assert_eq!(h.instance_type.as_deref(), Some("gpu"));
        assert_eq!(h.zone.as_deref(), Some("zone-b"));
        assert_eq!(h.address.as_deref(), Some("10.1.0.7"));
    }
}
