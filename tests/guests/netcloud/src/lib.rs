//! netcloud: the reference-cloud plugin of `wasmprov new` (its `lib.rs`
//! template, rendered), with what contract 0.3 adds on top: set-labels,
//! a subnet per request and the `networking` export (stable addresses,
//! target groups, subnet capacity), against the refcloud fake's endpoints
//! for them (`wasmprov_fake::refcloud`). The tests drive the host, the CLI
//! and gRPC through it without a real cloud.
#![allow(missing_docs, reason = "a test guest")]
#![allow(
    clippy::type_complexity,
    reason = "the template's catalogue table, kept as rendered"
)]

use serde::Deserialize;
use wasmprov_guest::prelude::*;
use wasmprov_guest::shape::InstanceType;

/// The zones, preferred first.
pub const ZONES: [&str; 2] = ["zone-a", "zone-b"];

/// The node types: (name, vCPUs, memory GiB, GPUs, on-demand $/h, spot
/// $/h, zones). Prices come from this table so that `price_hint` needs no
/// I/O (the host allows none there).
pub const NODE_TYPES: [(&str, f64, u64, u32, f64, Option<f64>, &[&str]); 4] = [
    ("small", 2.0, 4, 0, 0.020, Some(0.008), &ZONES),
    ("medium", 4.0, 8, 0, 0.040, Some(0.016), &ZONES),
    ("large", 8.0, 32, 0, 0.160, Some(0.064), &ZONES),
    ("gpu", 8.0, 64, 1, 1.100, None, &["zone-b"]),
];

/// The catalogue as sold with `capacity`: spot lists only the types sold
/// as spot, at their spot price.
fn catalogue(capacity: CapacityType) -> Vec<InstanceType> {
    let types = NODE_TYPES
        .iter()
        .filter_map(|(name, cpu, gib, gpu, price, spot, zones)| {
            let price = if capacity == CapacityType::Spot {
                (*spot)?
            } else {
                *price
            };
            Some(InstanceType {
                name: (*name).into(),
                cpu: *cpu,
                memory_bytes: gib << 30,
                gpu: *gpu,
                gpu_vendor: (*gpu > 0).then(|| "nvidia".into()),
                gpu_model: None,
                arch: None,
                disk_bytes: None,
                spot_hourly_usd: *spot,
                zone_prices: zones.iter().map(|z| ((*z).into(), price)).collect(),
                default_hourly_usd: price,
            })
        });
    types.collect()
}

/// How labels are stored: keys and values of `[A-Za-z0-9._-]`, others escaped.
const LABELS: TagCodec = TagCodec::LABEL_VALUE;

/// The cloud's states, and what each means.
pub const STATES: StateTable = StateTable::new(
    &[
        ("provisioning", NodeStatus::Pending, JoinState::Provisioning),
        ("running", NodeStatus::Running, JoinState::Joining),
        ("deleting", NodeStatus::Deleting, JoinState::Failed),
    ],
    (NodeStatus::Unknown, JoinState::Provisioning),
);

/// A node as the API returns it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Node {
    id: String,
    #[serde(rename = "type")]
    node_type: String,
    zone: String,
    capacity_type: String,
    state: String,
    address: Option<String>,
    labels: Labels,
    created: String,
}

/// A stable address as the API returns it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Address {
    id: String,
    ip: String,
    kind: String,
    node_id: Option<String>,
}

/// A target as the API returns it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Member {
    node_id: String,
    port: Option<u16>,
    health: Option<String>,
}

/// A subnet as the API returns it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Subnet {
    id: String,
    zone: Option<String>,
    total_addresses: Option<u64>,
    available_addresses: u64,
}

/// The provider: configuration read once per instance.
#[derive(Clone, Debug)]
pub struct NetCloud {
    endpoint: String,
    token: Secret,
}

impl RestCloud for NetCloud {
    type Node = Node;
    const CLOUD: &'static str = "refcloud";
    const PAGING: Paging = Paging::Numbers {
        page: "page",
        size: 100,
        next: Some("/next_page"),
        items: "/nodes",
    };
    const LIST_ITEMS: &'static str = "/nodes";
    const ONE_ITEM: &'static str = "/node";
    const ERRORS: &'static [Rule] = &[
        Rule::new(Some(403), "quota", Kind::Quota),
        Rule::new(Some(422), "capacity", Kind::CapacityInZone),
    ];

    fn list(&self, owner_id: &str, request_id: Option<&str>) -> Result<Request> {
        let mut selector = format!("{}={owner_id}", tags::OWNER);
        if let Some(request_id) = request_id {
            selector.push_str(&format!(",{}={request_id}", tags::REQUEST));
        }
        let url = format!("{}/nodes?per_page=100", self.endpoint);
        Ok(Request::get(url).query("label_selector", &selector))
    }
    fn node_url(&self, id: &str) -> Option<String> {
        let digits = id.strip_prefix("n-")?;
        digits
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| format!("{}/nodes/{id}", self.endpoint))
    }
    fn create(&self, request: &ProvisionRequest, labels: &Labels) -> Result<Request> {
        let shape = &request.shape;
        let (node_type, _) = pick(shape)?;
        // In a subnet, the subnet's zone unless the shape names one.
        let zone = match (&shape.zone, &request.subnet) {
            (Some(z), _) => Some(z.clone()),
            (None, Some(_)) => None,
            (None, None) => Some(place(&node_type).to_string()),
        };
        let encoded = labels
            .iter()
            .map(|(k, v)| Ok((LABELS.encode(k)?, LABELS.encode(v)?)));
        let labels: Labels = encoded.collect::<Result<_>>()?;
        let owner = labels.get(tags::OWNER).map_or("", String::as_str);
        Ok(Request::post(format!("{}/nodes", self.endpoint))
            .header("idempotency-key", tags::pair_token(owner, &request.request_id, 255))
            .json(&serde_json::json!({
                "type": node_type,
                "zone": zone,
                "capacity_type": if shape.capacity_type == CapacityType::Spot { "spot" } else { "on-demand" },
                "labels": labels,
                "subnet": request.subnet,
            })))
    }
    fn relabel(&self, id: &str, labels: &Labels) -> Result<Request> {
        let encoded = labels
            .iter()
            .map(|(k, v)| Ok((LABELS.encode(k)?, LABELS.encode(v)?)));
        let labels: Labels = encoded.collect::<Result<_>>()?;
        let url = self
            .node_url(id)
            .ok_or_else(|| Error::NotFound(id.to_string()))?;
        Ok(Request::put(format!("{url}/labels")).json(&serde_json::json!({ "labels": labels })))
    }
    fn authorize(&self, req: Request) -> Result<Request> {
        Ok(req.bearer(self.token.expose()?))
    }
    fn handle(&self, n: &Node) -> NodeHandle {
        let decode = |s: &String| LABELS.decode(s).unwrap_or_else(|| s.clone());
        let mut node = NodeHandle {
            provider_id: n.id.clone(),
            labels: n
                .labels
                .iter()
                .map(|(k, v)| (decode(k), decode(v)))
                .collect(),
            zone: Some(n.zone.clone()),
            instance_type: Some(n.node_type.clone()),
            capacity_type: if n.capacity_type == "spot" {
                CapacityType::Spot
            } else {
                CapacityType::OnDemand
            },
            address: n.address.clone(),
            private_address: n.address.clone(),
            created_at_ms: time::rfc3339_ms(&n.created),
            ..NodeHandle::default()
        };
        STATES.apply(&n.state, &mut node);
        node
    }
}

/// The cheapest type for `shape` and its price, as its capacity type.
fn pick(shape: &NodeShape) -> Result<(String, f64)> {
    let catalogue = catalogue(shape.capacity_type);
    let choice = shape::pick(shape, &catalogue)?;
    Ok((choice.instance_type.name.clone(), choice.hourly_usd))
}

/// The first zone that sells `node_type`.
fn place(node_type: &str) -> &'static str {
    let zones = NODE_TYPES
        .iter()
        .find(|t| t.0 == node_type)
        .map_or(&ZONES[..], |t| t.6);
    zones.first().copied().unwrap_or(ZONES[0])
}

impl Provider for NetCloud {
    const NAME: &'static str = "netcloud";
    const SUBNET: bool = true;

    fn capacity_types() -> Vec<CapacityType> {
        vec![CapacityType::OnDemand, CapacityType::Spot]
    }
    fn new() -> Result<Self> {
        Ok(Self {
            endpoint: config::url_or("endpoint", "https://api.refcloud.example/v1")?,
            token: config::secret("token")?,
        })
    }
    fn price_hint(&self, shape: &NodeShape) -> Result<Option<PriceHint>> {
        let (instance_type, hourly_usd) = pick(shape)?;
        let capacity_type = shape.capacity_type;
        Ok(Some(PriceHint {
            hourly_usd,
            capacity_type,
            instance_type,
        }))
    }
    rest_calls!();

    fn offerings(&self) -> Result<Vec<Offering>> {
        Ok(shape::offerings(&catalogue(CapacityType::OnDemand)))
    }
    fn set_labels(&self, owner_id: &str, provider_id: &str, labels: &Labels) -> Result<NodeHandle> {
        rest::set_labels(self, &Wasi, owner_id, provider_id, labels)
    }
}

impl NetCloud {
    /// The node's URL when `owner_id` owns it; `not_found` otherwise.
    fn owned(&self, owner_id: &str, provider_id: &str) -> Result<String> {
        match (
            self.node_url(provider_id),
            rest::get(self, &Wasi, owner_id, provider_id)?,
        ) {
            (Some(url), Some(_)) => Ok(url),
            _ => Err(Error::NotFound(format!(
                "node {provider_id:?} is not this owner's"
            ))),
        }
    }

    fn send(&self, req: Request) -> Result<Response> {
        rest::send(self, &Wasi, req)
    }

    fn target_url(&self, target: &Target) -> String {
        format!(
            "{}/target-groups/{}/targets/{}",
            self.endpoint, target.group, target.provider_id
        )
    }
}

fn kind_of(word: &str) -> AddressKind {
    if word == "public" {
        AddressKind::Public
    } else {
        AddressKind::Private
    }
}

impl Networking for NetCloud {
    fn assign_address(
        &self,
        owner_id: &str,
        provider_id: &str,
        request: &AddressRequest,
    ) -> Result<StableAddress> {
        let url = self.owned(owner_id, provider_id)?;
        let body = serde_json::json!({ "kind": request.kind.as_str(), "address": request.address });
        let resp = self.send(Request::post(format!("{url}/addresses")).json(&body))?;
        let answer: serde_json::Value = resp.json()?;
        let a: Address = serde_json::from_value(answer["address"].clone())
            .map_err(|e| Error::Transport(format!("refcloud: malformed address: {e}")))?;
        Ok(StableAddress {
            address: a.ip,
            kind: kind_of(&a.kind),
            resource_id: Some(a.id),
            provider_id: a.node_id,
        })
    }
    fn release_address(&self, owner_id: &str, provider_id: &str, address: &str) -> Result<()> {
        let url = self.owned(owner_id, provider_id)?;
        self.send(Request::delete(format!("{url}/addresses/{address}")))
            .map(|_| ())
    }
    fn register_target(&self, owner_id: &str, target: &Target) -> Result<()> {
        self.owned(owner_id, &target.provider_id)?;
        let body = serde_json::json!({ "port": target.port });
        self.send(Request::put(self.target_url(target)).json(&body))
            .map(|_| ())
    }
    fn deregister_target(&self, owner_id: &str, target: &Target) -> Result<()> {
        self.owned(owner_id, &target.provider_id)?;
        self.send(Request::delete(self.target_url(target)))
            .map(|_| ())
    }
    fn list_targets(&self, _owner_id: &str, group: &str) -> Result<Vec<Target>> {
        let url = format!("{}/target-groups/{group}/targets", self.endpoint);
        let answer: serde_json::Value = self.send(Request::get(url))?.json()?;
        let members: Vec<Member> = serde_json::from_value(answer["targets"].clone())
            .map_err(|e| Error::Transport(format!("refcloud: malformed targets: {e}")))?;
        Ok(members
            .into_iter()
            .map(|m| Target {
                group: group.to_string(),
                provider_id: m.node_id,
                port: m.port,
                health: m.health,
            })
            .collect())
    }
    fn subnet_capacity(&self, subnet: &str) -> Result<SubnetCapacity> {
        let url = format!("{}/subnets/{subnet}", self.endpoint);
        let answer: serde_json::Value = self.send(Request::get(url))?.json()?;
        let s: Subnet = serde_json::from_value(answer["subnet"].clone())
            .map_err(|e| Error::Transport(format!("refcloud: malformed subnet: {e}")))?;
        Ok(SubnetCapacity {
            subnet: s.id,
            available_addresses: s.available_addresses,
            total_addresses: s.total_addresses,
            zone: s.zone,
        })
    }
}

export_provider!(NetCloud, networking);
