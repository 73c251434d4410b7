//! The Hetzner Cloud API v1 wire format: the JSON this plugin reads and
//! writes, server status → join state, and API errors → contract errors.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use wasmprov_guest::http::Response;
use wasmprov_guest::state::StateTable;
use wasmprov_guest::{
    CapacityScope, CapacityType, Error, JoinState, Labels, NodeHandle, NodeStatus,
};

/// A server as `GET /servers`, `GET /servers/{id}` and `POST /servers`
/// return it (only the fields used here).
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Server {
    /// Server id.
    pub id: u64,
    /// Server name.
    #[serde(default)]
    pub name: String,
    /// `initializing`, `starting`, `running`, `stopping`, `off`, `deleting`,
    /// `migrating`, `rebuilding` or `unknown`.
    #[serde(default)]
    pub status: String,
    /// When the server was created (RFC 3339).
    #[serde(default)]
    pub created: Option<String>,
    /// Public addresses.
    #[serde(default)]
    pub public_net: Option<PublicNet>,
    /// Private networks the server is attached to.
    #[serde(default)]
    pub private_net: Vec<PrivateNet>,
    /// The server type.
    #[serde(default)]
    pub server_type: Option<ServerTypeRef>,
    /// The datacenter, with its location.
    #[serde(default)]
    pub datacenter: Option<Datacenter>,
    /// User labels.
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
}

/// `public_net` of a server.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct PublicNet {
    /// The primary IPv4, `null` for IPv6-only servers.
    #[serde(default)]
    pub ipv4: Option<Ipv4>,
    /// The primary IPv6 network (a /64), `null` for IPv4-only servers.
    #[serde(default)]
    pub ipv6: Option<Ipv6>,
    /// Ids of the floating IPs assigned to the server.
    #[serde(default)]
    pub floating_ips: Vec<u64>,
}

/// `public_net.ipv6`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Ipv6 {
    /// The network, such as `2001:db8:1234::/64`.
    pub ip: String,
}

impl Ipv6 {
    /// The server's own address in its /64: the first host
    /// (`2001:db8:1234::1`), as Hetzner configures it.
    #[must_use]
    pub fn address(&self) -> Option<String> {
        let (net, _) = self.ip.split_once('/').unwrap_or((&self.ip, ""));
        let net: std::net::Ipv6Addr = net.parse().ok()?;
        Some(std::net::Ipv6Addr::from(u128::from(net) | 1).to_string())
    }
}

/// `public_net.ipv4`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Ipv4 {
    /// The address.
    pub ip: String,
}

/// `private_net[]` of a server.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct PrivateNet {
    /// The network's id.
    #[serde(default)]
    pub network: Option<u64>,
    /// The server's address in that network.
    #[serde(default)]
    pub ip: Option<String>,
    /// Further addresses of the server in that network.
    #[serde(default)]
    pub alias_ips: Vec<String>,
}

/// `server_type` of a server.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ServerTypeRef {
    /// The name, e.g. `cx22`.
    pub name: String,
    /// `x86` or `arm`.
    #[serde(default)]
    pub architecture: Option<String>,
}

/// Anything referred to by name (a location).
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Named {
    /// The name, e.g. `cx22` or `fsn1`.
    pub name: String,
}

/// `datacenter` of a server.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Datacenter {
    /// The datacenter's location.
    #[serde(default)]
    pub location: Option<Named>,
}

/// `GET /servers`.
#[derive(Clone, Debug, Deserialize)]
pub struct ServerList {
    /// One page of servers.
    pub servers: Vec<Server>,
    /// Pagination.
    #[serde(default)]
    pub meta: Option<Meta>,
}

impl ServerList {
    /// `meta.pagination.next_page`, `None` on the last page.
    #[must_use]
    pub fn next_page(&self) -> Option<u64> {
        self.meta.as_ref()?.pagination.as_ref()?.next_page
    }
}

/// `meta` of a list response.
#[derive(Clone, Debug, Deserialize)]
pub struct Meta {
    /// Pagination block.
    #[serde(default)]
    pub pagination: Option<Pagination>,
}

/// `meta.pagination`.
#[derive(Clone, Debug, Deserialize)]
pub struct Pagination {
    /// The next page, `null` on the last one.
    #[serde(default)]
    pub next_page: Option<u64>,
}

/// An SSH key of the project, as `GET /ssh_keys` and `POST /ssh_keys`
/// return it (only the fields used here).
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct SshKey {
    /// Key id, as servers are created with it.
    pub id: u64,
    /// Key name, unique in the project.
    #[serde(default)]
    pub name: String,
    /// The public key, as registered.
    #[serde(default)]
    pub public_key: String,
}

/// `GET /ssh_keys`.
#[derive(Clone, Debug, Deserialize)]
pub struct SshKeyList {
    /// One page of keys.
    pub ssh_keys: Vec<SshKey>,
    /// Pagination.
    #[serde(default)]
    pub meta: Option<Meta>,
}

/// `POST /ssh_keys`.
#[derive(Clone, Debug, Deserialize)]
pub struct OneSshKey {
    /// The key created.
    pub ssh_key: SshKey,
}

/// The body of `POST /ssh_keys`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CreateSshKey<'a> {
    /// Key name, unique in the project.
    pub name: &'a str,
    /// The public key, one OpenSSH line.
    pub public_key: &'a str,
    /// Labels.
    pub labels: &'a Labels,
}

/// `GET /servers/{id}` and `POST /servers` (which also returns an action).
#[derive(Clone, Debug, Deserialize)]
pub struct OneServer {
    /// The server.
    pub server: Server,
}

/// The body of `POST /servers`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CreateServer<'a> {
    /// Server name (a hostname).
    pub name: &'a str,
    /// Server type name.
    pub server_type: &'a str,
    /// Image name or id.
    pub image: &'a str,
    /// Location name.
    pub location: &'a str,
    /// Labels.
    pub labels: &'a Labels,
    /// Cloud-init user data.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_data: Option<&'a str>,
    /// Ids of the project's SSH keys to authorize.
    #[serde(skip_serializing_if = "<[u64]>::is_empty")]
    pub ssh_keys: &'a [u64],
    /// Always `true`: the node should boot.
    pub start_after_create: bool,
    /// Ids of the private networks to attach it to (the request's subnet).
    #[serde(skip_serializing_if = "<[u64]>::is_empty")]
    pub networks: &'a [u64],
}

/// The body of `PUT /servers/{id}` (and `PUT /floating_ips/{id}`) that
/// replaces its labels.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct UpdateLabels<'a> {
    /// Every label the server (or floating IP, `PUT /floating_ips/{id}`)
    /// is to have: they replace its labels, unconditionally.
    pub labels: &'a Labels,
}

/// A floating IP, as `/floating_ips` returns it (only the fields used here).
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct FloatingIp {
    /// Its id.
    pub id: u64,
    /// The address (for `ipv6`, a /64 network).
    pub ip: String,
    /// The server it is assigned to, if any.
    #[serde(default)]
    pub server: Option<u64>,
    /// Its labels.
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
}

/// The body of `POST /servers/{id}/actions/change_alias_ips`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ChangeAliasIps<'a> {
    /// The network.
    pub network: u64,
    /// Every alias IP the server is to have in it.
    pub alias_ips: &'a [String],
}

/// `GET /floating_ips/{id}` and `POST /floating_ips`.
#[derive(Clone, Debug, Deserialize)]
pub struct OneFloatingIp {
    /// The floating IP.
    pub floating_ip: FloatingIp,
}

/// The body of `POST /floating_ips`: a new IPv4 floating IP assigned to a
/// server at once.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CreateFloatingIp<'a> {
    /// Always `ipv4`.
    #[serde(rename = "type")]
    pub kind: &'a str,
    /// The server to assign it to.
    pub server: u64,
    /// What it is for.
    pub description: &'a str,
    /// Labels (the owner's, so an operator can find it).
    pub labels: &'a Labels,
}

/// The body of `POST /floating_ips/{id}/actions/assign`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct AssignFloatingIp {
    /// The server to move it to.
    pub server: u64,
}

/// An action, as an action call and `GET /actions/{id}` return it (only
/// the fields used here).
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Action {
    /// Its id.
    pub id: u64,
    /// `running`, `success` or `error`.
    pub status: String,
    /// Why it failed, for `error`.
    #[serde(default)]
    pub error: Option<ActionError>,
}

/// `action.error`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ActionError {
    /// Machine-readable code.
    #[serde(default)]
    pub code: String,
    /// What went wrong.
    #[serde(default)]
    pub message: String,
}

/// `{"action": …}`: an action call's answer and `GET /actions/{id}`.
#[derive(Clone, Debug, Deserialize)]
pub struct OneAction {
    /// The action.
    pub action: Action,
}

/// A load balancer, as `GET /load_balancers/{id}` returns it (only the
/// fields used here).
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct LoadBalancer {
    /// Its id.
    pub id: u64,
    /// Its targets.
    #[serde(default)]
    pub targets: Vec<LoadBalancerTarget>,
}

/// `GET /load_balancers/{id}`.
#[derive(Clone, Debug, Deserialize)]
pub struct OneLoadBalancer {
    /// The load balancer.
    pub load_balancer: LoadBalancer,
}

/// One target of a load balancer.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct LoadBalancerTarget {
    /// `server`, `label_selector` or `ip`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The server, for a `server` target.
    #[serde(default)]
    pub server: Option<IdRef>,
    /// Its health per service port.
    #[serde(default)]
    pub health_status: Vec<HealthStatus>,
}

impl LoadBalancerTarget {
    /// The server of a `server` target.
    #[must_use]
    pub fn server_id(&self) -> Option<u64> {
        (self.kind == "server").then_some(self.server.as_ref()?.id)
    }

    /// One word for the target's health over every service: `healthy` when
    /// every port is, `unhealthy` when any is, else `unknown`; `None`
    /// without services.
    #[must_use]
    pub fn health(&self) -> Option<String> {
        if self.health_status.is_empty() {
            return None;
        }
        let all = |word: &str| self.health_status.iter().all(|h| h.status == word);
        let any = |word: &str| self.health_status.iter().any(|h| h.status == word);
        Some(
            if all("healthy") {
                "healthy"
            } else if any("unhealthy") {
                "unhealthy"
            } else {
                "unknown"
            }
            .to_string(),
        )
    }
}

/// `{"id": N}`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct IdRef {
    /// The id.
    pub id: u64,
}

/// `health_status[]` of a load balancer target.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct HealthStatus {
    /// The service's port.
    #[serde(default)]
    pub listen_port: Option<u16>,
    /// `healthy`, `unhealthy` or `unknown`.
    #[serde(default)]
    pub status: String,
}

/// The body of `POST /load_balancers/{id}/actions/add_target` and
/// `remove_target` for a server.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ServerTarget {
    /// Always `server`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The server.
    pub server: IdRef,
    /// Only on `add_target`: send traffic to its public address.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub use_private_ip: Option<bool>,
}

/// A private network, as `GET /networks/{id}` returns it (only the fields
/// used here).
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Network {
    /// Its id.
    pub id: u64,
    /// Its subnets.
    #[serde(default)]
    pub subnets: Vec<NetworkSubnet>,
    /// The servers attached to it.
    #[serde(default)]
    pub servers: Vec<u64>,
    /// The load balancers attached to it.
    #[serde(default)]
    pub load_balancers: Vec<u64>,
}

/// `GET /networks/{id}`.
#[derive(Clone, Debug, Deserialize)]
pub struct OneNetwork {
    /// The network.
    pub network: Network,
}

/// One subnet of a network.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct NetworkSubnet {
    /// `cloud`, `server` (the older name of `cloud`) or `vswitch`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// Its range, such as `10.0.1.0/24`.
    pub ip_range: String,
    /// Its network zone, such as `eu-central`.
    #[serde(default)]
    pub network_zone: Option<String>,
}

/// Hetzner server status → join state.
///
/// `running` maps to [`JoinState::Joining`]: the machine is up, but whether
/// its node agent has joined the cluster is not something the cloud knows,
/// so this plugin never reports [`JoinState::Joined`]; the host learns that
/// from the cluster. A server that is `off`, `stopping` or `deleting` will
/// not become a usable node and is [`JoinState::Failed`]. `migrating` and
/// `rebuilding` boot the machine again; `unknown` (and any status this
/// plugin does not know) is treated as still being created.
#[must_use]
pub fn join_state(status: &str) -> JoinState {
    STATES.get(status)
}

/// Hetzner server statuses: status and join state. `initializing` is being
/// created; `unknown` and anything new are `unknown`, still taken to be on
/// their way (the raw status is kept).
pub const STATES: StateTable = StateTable::new(
    &[
        ("initializing", NodeStatus::Pending, JoinState::Provisioning),
        ("starting", NodeStatus::Pending, JoinState::Booting),
        ("migrating", NodeStatus::Repairing, JoinState::Booting),
        ("rebuilding", NodeStatus::Repairing, JoinState::Booting),
        ("running", NodeStatus::Running, JoinState::Joining),
        ("off", NodeStatus::Stopped, JoinState::Failed),
        ("stopping", NodeStatus::Stopping, JoinState::Failed),
        ("deleting", NodeStatus::Deleting, JoinState::Failed),
    ],
    (NodeStatus::Unknown, JoinState::Provisioning),
);

impl Server {
    /// The server's labels (empty when the API sent none).
    #[must_use]
    pub fn labels(&self) -> Labels {
        self.labels.clone().unwrap_or_default()
    }

    /// The node handle for this server.
    #[must_use]
    pub fn to_handle(&self) -> NodeHandle {
        let public = self
            .public_net
            .as_ref()
            .and_then(|n| n.ipv4.as_ref())
            .map(|v4| v4.ip.clone())
            .filter(|ip| !ip.is_empty());
        let private = self
            .private_net
            .iter()
            .find_map(|n| n.ip.clone())
            .filter(|ip| !ip.is_empty());
        let mut node = NodeHandle {
            provider_id: self.id.to_string(),
            created_at_ms: self
                .created
                .as_deref()
                .and_then(wasmprov_guest::time::rfc3339_ms),
            address: public.clone().or_else(|| private.clone()),
            public_address: public,
            private_address: private,
            arch: self
                .server_type
                .as_ref()
                .and_then(|t| t.architecture.as_deref())
                .and_then(crate::catalogue::Arch::parse)
                .map(crate::catalogue::Arch::to_contract),
            zone: self
                .datacenter
                .as_ref()
                .and_then(|d| d.location.as_ref())
                .map(|l| l.name.clone()),
            capacity_type: CapacityType::OnDemand,
            instance_type: self.server_type.as_ref().map(|t| t.name.clone()),
            labels: self.labels(),
            ipv6_address: self
                .public_net
                .as_ref()
                .and_then(|n| n.ipv6.as_ref())
                .and_then(Ipv6::address),
            hostname: Some(self.name.clone()).filter(|n| !n.is_empty()),
            ..NodeHandle::default()
        };
        STATES.apply(&self.status, &mut node);
        node
    }
}

/// `{"error": {...}}`.
#[derive(Debug, Deserialize)]
struct Envelope {
    error: ErrorBody,
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    details: Option<serde_json::Value>,
}

/// An error response of the API, before it becomes a contract error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiFailure {
    /// HTTP status.
    pub status: u16,
    /// `error.code`, empty when the body was not the error envelope.
    pub code: String,
    /// `error.message`, or a snippet of the body.
    pub message: String,
    /// Names in `error.details.fields[].name` (for `invalid_input`).
    pub fields: Vec<String>,
    /// How long to wait, for a 429: `Retry-After`, else `RateLimit-Reset`.
    pub retry_after_ms: Option<u64>,
    /// The URL, for messages.
    pub url: String,
}

/// The longest piece of a non-JSON error body kept in a message.
const SNIPPET: usize = 200;

impl ApiFailure {
    /// Reads an error response; `now_unix` (seconds) turns a
    /// `RateLimit-Reset` timestamp into a delay.
    #[must_use]
    pub fn from_response(resp: &Response, now_unix: u64) -> Self {
        let (code, message, fields) = match serde_json::from_slice::<Envelope>(&resp.body) {
            Ok(env) => {
                let fields = env
                    .error
                    .details
                    .as_ref()
                    .and_then(|d| d.get("fields"))
                    .and_then(|f| f.as_array())
                    .map(|fs| {
                        fs.iter()
                            .filter_map(|f| f.get("name").and_then(|n| n.as_str()))
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default();
                (env.error.code, env.error.message, fields)
            }
            Err(_) => {
                let text = resp.text();
                let snippet: String = text.trim().chars().take(SNIPPET).collect();
                (String::new(), snippet, Vec::new())
            }
        };
        // `Retry-After`, else `RateLimit-Reset` (a Unix time), read by the SDK.
        let now = std::time::UNIX_EPOCH + std::time::Duration::from_secs(now_unix);
        let retry_after_ms = wasmprov_guest::http::wait_ms(&resp.headers, now);
        Self {
            status: resp.status,
            code,
            message,
            fields,
            retry_after_ms,
            url: resp.url.clone(),
        }
    }

    /// Whether the API said the resource does not exist.
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        self.code == "not_found" || (self.code.is_empty() && self.status == 404)
    }

    /// Whether the API refused a create because a name is taken.
    #[must_use]
    pub fn is_uniqueness_error(&self) -> bool {
        self.code == "uniqueness_error"
    }

    fn describe(&self) -> String {
        let what = if self.message.is_empty() {
            "no message"
        } else {
            self.message.as_str()
        };
        if self.code.is_empty() {
            format!("Hetzner API {} (HTTP {}): {what}", self.url, self.status)
        } else {
            format!(
                "Hetzner API {} (HTTP {}, {}): {what}",
                self.url, self.status, self.code
            )
        }
    }

    /// The contract error for this failure: the error code decides, the
    /// HTTP status is the fallback for codes this plugin does not know.
    #[must_use]
    pub fn into_error(self) -> Error {
        let message = self.describe();
        match self.code.as_str() {
            "unauthorized" | "forbidden" | "token_readonly" => Error::Auth(message),
            "resource_limit_exceeded" => Error::Quota(message),
            "resource_unavailable" | "placement_error" => Error::Capacity {
                scope: CapacityScope::Zone,
                message,
            },
            "rate_limit_exceeded" | "limit_reached" => Error::RateLimited {
                retry_after_ms: self.retry_after_ms,
                message,
            },
            "not_found" => Error::NotFound(message),
            "invalid_server_type" | "unsupported_error" => Error::Unsupported(message),
            "invalid_input" if self.fields.iter().any(|f| f == "server_type") => {
                Error::Unsupported(message)
            }
            // Retryable conditions: the API or the resource is busy.
            "server_error" | "service_error" | "unavailable" | "timeout" | "maintenance"
            | "robot_unavailable" | "locked" | "conflict" => Error::Transport(message),
            // Requests this plugin should not have sent, or that need a person.
            "invalid_input"
            | "json_error"
            | "uniqueness_error"
            | "protected"
            | "resource_locked"
            | "deprecated_api_endpoint" => Error::Other(message),
            // Codes this plugin does not know: the HTTP status decides.
            _ => match self.status {
                401 | 403 => Error::Auth(message),
                404 => Error::NotFound(message),
                429 => Error::RateLimited {
                    retry_after_ms: self.retry_after_ms,
                    message,
                },
                s if s >= 500 => Error::Transport(message),
                _ => Error::Other(message),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A server as the real API returns it (abridged from the API reference).
    const SERVER: &str = r#"{
      "server": {
        "id": 42,
        "name": "wp-req-1",
        "status": "running",
        "created": "2025-06-01T10:00:00+00:00",
        "public_net": {
          "ipv4": {"id": 1, "ip": "203.0.113.7", "blocked": false, "dns_ptr": "static.7.113.0.203.clients.your-server.de"},
          "ipv6": {"id": 2, "ip": "2001:db8::/64", "blocked": false, "dns_ptr": []},
          "floating_ips": [], "firewalls": []
        },
        "private_net": [],
        "server_type": {
          "id": 104, "name": "cx22", "description": "CX22", "cores": 2, "memory": 4.0, "disk": 40,
          "storage_type": "local", "cpu_type": "shared", "architecture": "x86", "deprecated": false,
          "prices": [{"location": "fsn1", "price_hourly": {"net": "0.0060", "gross": "0.0071"},
                      "price_monthly": {"net": "3.7900", "gross": "4.5101"}}]
        },
        "datacenter": {
          "id": 4, "name": "fsn1-dc14", "description": "Falkenstein 1 virtual DC 14",
          "location": {"id": 1, "name": "fsn1", "description": "Falkenstein DC Park 1", "country": "DE",
                       "city": "Falkenstein", "latitude": 50.47612, "longitude": 12.370071,
                       "network_zone": "eu-central"}
        },
        "image": {"id": 161547269, "type": "system", "status": "available", "name": "ubuntu-24.04"},
        "iso": null, "rescue_enabled": false, "locked": false, "backup_window": null,
        "outgoing_traffic": 0, "ingoing_traffic": 0, "included_traffic": 21990232555520,
        "protection": {"delete": false, "rebuild": false},
        "labels": {"wasmprov-owner": "host-a", "wasmprov-request": "req-1", "env": "prod"},
        "volumes": [], "load_balancers": [], "primary_disk_size": 40, "placement_group": null
      },
      "action": {"id": 13, "command": "create_server", "status": "running"},
      "next_actions": [],
      "root_password": null
    }"#;

    #[test]
    fn server_json_maps_to_a_node_handle() {
        let one: OneServer = serde_json::from_str(SERVER).unwrap();
        let h = one.server.to_handle();
        assert_eq!(h.provider_id, "42");
        assert_eq!(h.address.as_deref(), Some("203.0.113.7"));
        assert_eq!(h.zone.as_deref(), Some("fsn1"));
        assert_eq!(h.capacity_type, CapacityType::OnDemand);
        assert_eq!(h.join_state, JoinState::Joining);
        assert_eq!(h.instance_type.as_deref(), Some("cx22"));
        assert_eq!(h.labels.len(), 3);
        assert_eq!(h.labels["wasmprov-owner"], "host-a");
        assert_eq!(h.labels["env"], "prod");
        assert_eq!(h.ipv6_address.as_deref(), Some("2001:db8::1"));
        assert_eq!(h.hostname.as_deref(), Some("wp-req-1"));
    }

    #[test]
    fn a_server_in_a_network_and_its_ipv6_address() {
        let s: Server = serde_json::from_value(json!({
            "id": 7, "name": "wp-r", "status": "running",
            "public_net": {"ipv4": null, "ipv6": {"ip": "2001:db8:0:f::/64"}, "floating_ips": [9]},
            "private_net": [{"network": 3, "ip": "10.0.1.2", "alias_ips": ["10.0.1.9"]}],
        }))
        .unwrap();
        assert_eq!(s.public_net.as_ref().unwrap().floating_ips, [9]);
        let h = s.to_handle();
        assert_eq!(h.ipv6_address.as_deref(), Some("2001:db8:0:f::1"));
        assert_eq!(h.private_address.as_deref(), Some("10.0.1.2"));
        assert_eq!(h.address.as_deref(), Some("10.0.1.2"));
        assert_eq!(s.private_net[0].network, Some(3));
        let bad = Ipv6 {
            ip: "not-an-ip/64".into(),
        };
        assert_eq!(bad.address(), None);
    }

    #[test]
    fn target_health_is_one_word() {
        let t = |statuses: &[&str]| LoadBalancerTarget {
            kind: "server".into(),
            server: Some(IdRef { id: 1 }),
            health_status: statuses
                .iter()
                .map(|s| HealthStatus {
                    listen_port: Some(80),
                    status: (*s).to_string(),
                })
                .collect(),
        };
        assert_eq!(
            t(&["healthy", "healthy"]).health().as_deref(),
            Some("healthy")
        );
        assert_eq!(
            t(&["healthy", "unhealthy"]).health().as_deref(),
            Some("unhealthy")
        );
        assert_eq!(
            t(&["healthy", "unknown"]).health().as_deref(),
            Some("unknown")
        );
        assert_eq!(t(&[]).health(), None);
        assert_eq!(t(&[]).server_id(), Some(1));
        let ip = LoadBalancerTarget {
            kind: "ip".into(),
            ..t(&[])
        };
        assert_eq!(ip.server_id(), None);
    }

    #[test]
    fn sparse_server_json_still_maps() {
        let s: Server = serde_json::from_value(json!({
            "id": 7, "name": "x", "status": "initializing",
            "public_net": {"ipv4": null, "ipv6": null},
            "labels": null
        }))
        .unwrap();
        let h = s.to_handle();
        assert_eq!(h.provider_id, "7");
        assert_eq!(h.address, None);
        assert_eq!(h.zone, None);
        assert_eq!(h.instance_type, None);
        assert_eq!(h.join_state, JoinState::Provisioning);
        assert!(h.labels.is_empty());
    }

    #[test]
    fn pagination_is_read() {
        let page: ServerList = serde_json::from_value(json!({
            "servers": [],
            "meta": {"pagination": {"page": 1, "per_page": 25, "previous_page": null,
                                    "next_page": 2, "last_page": 2, "total_entries": 30}}
        }))
        .unwrap();
        assert_eq!(page.next_page(), Some(2));
        let last: ServerList = serde_json::from_value(json!({
            "servers": [], "meta": {"pagination": {"next_page": null}}
        }))
        .unwrap();
        assert_eq!(last.next_page(), None);
        let bare: ServerList = serde_json::from_value(json!({"servers": []})).unwrap();
        assert_eq!(bare.next_page(), None);
    }

    #[test]
    fn status_table() {
        let table = [
            ("initializing", JoinState::Provisioning),
            ("starting", JoinState::Booting),
            ("running", JoinState::Joining),
            ("stopping", JoinState::Failed),
            ("off", JoinState::Failed),
            ("deleting", JoinState::Failed),
            ("migrating", JoinState::Booting),
            ("rebuilding", JoinState::Booting),
            ("unknown", JoinState::Provisioning),
            ("something-new", JoinState::Provisioning),
        ];
        for (status, want) in table {
            assert_eq!(join_state(status), want, "{status}");
        }
    }

    #[test]
    fn create_body_has_the_api_field_names() {
        let labels: Labels = [("wasmprov-owner".to_string(), "a".to_string())].into();
        let body = CreateServer {
            name: "wp-r",
            server_type: "cx22",
            image: "ubuntu-24.04",
            location: "fsn1",
            labels: &labels,
            ssh_keys: &[],
            user_data: None,
            start_after_create: true,
            networks: &[],
        };
        assert_eq!(
            serde_json::to_value(&body).unwrap(),
            json!({"name": "wp-r", "server_type": "cx22", "image": "ubuntu-24.04",
                   "location": "fsn1", "labels": {"wasmprov-owner": "a"},
                   "start_after_create": true})
        );
        let with = CreateServer {
            user_data: Some("#cloud-config"),
            ..body
        };
        assert_eq!(
            serde_json::to_value(&with).unwrap()["user_data"],
            "#cloud-config"
        );
    }

    fn response(status: u16, headers: &[(&str, &str)], body: &str) -> Response {
        Response {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            body: body.as_bytes().to_vec(),
            url: "https://api.hetzner.cloud/v1/servers".into(),
        }
    }

    fn envelope(code: &str, details: serde_json::Value) -> String {
        json!({"error": {"code": code, "message": format!("{code} happened"), "details": details}})
            .to_string()
    }

    #[test]
    fn error_table() {
        const NOW: u64 = 1_700_000_000;
        let kinds: &[(u16, &str, &str)] = &[
            (401, "unauthorized", "auth"),
            (403, "forbidden", "auth"),
            (403, "token_readonly", "auth"),
            (403, "resource_limit_exceeded", "quota"),
            (412, "resource_unavailable", "capacity"),
            (412, "placement_error", "capacity"),
            (429, "rate_limit_exceeded", "rate_limited"),
            (404, "not_found", "not_found"),
            (400, "invalid_input", "other"),
            (400, "json_error", "other"),
            (409, "uniqueness_error", "other"),
            (423, "locked", "transport"),
            (409, "conflict", "transport"),
            (403, "protected", "other"),
            (400, "invalid_server_type", "unsupported"),
            (500, "server_error", "transport"),
            (503, "unavailable", "transport"),
            (504, "timeout", "transport"),
            (503, "maintenance", "transport"),
            (502, "some_new_code", "transport"),
            (418, "some_new_code", "other"),
        ];
        for (status, code, kind) in kinds {
            let resp = response(*status, &[], &envelope(code, json!({})));
            let failure = ApiFailure::from_response(&resp, NOW);
            assert_eq!(failure.code, *code);
            let err = failure.into_error();
            assert_eq!(err.kind(), *kind, "{status} {code}: {err}");
            assert!(
                err.to_string().contains(&format!("{code} happened")),
                "{err}"
            );
        }
        // Capacity always names the zone.
        let err = ApiFailure::from_response(
            &response(412, &[], &envelope("resource_unavailable", json!({}))),
            NOW,
        )
        .into_error();
        assert!(matches!(
            err,
            Error::Capacity {
                scope: CapacityScope::Zone,
                ..
            }
        ));
        // An unknown server type is unsupported, other input errors are not.
        let bad_type = envelope(
            "invalid_input",
            json!({"fields": [{"name": "server_type", "messages": ["server type 'cx11' not found"]}]}),
        );
        let f = ApiFailure::from_response(&response(400, &[], &bad_type), NOW);
        assert_eq!(f.fields, ["server_type"]);
        assert!(matches!(f.into_error(), Error::Unsupported(_)));
        let bad_name = envelope("invalid_input", json!({"fields": [{"name": "name"}]}));
        assert!(matches!(
            ApiFailure::from_response(&response(400, &[], &bad_name), NOW).into_error(),
            Error::Other(_)
        ));
    }

    #[test]
    fn status_decides_when_the_body_is_not_the_envelope() {
        let cases: &[(u16, &str, &str)] = &[
            (401, "", "auth"),
            (403, "<html>Forbidden</html>", "auth"),
            (404, "", "not_found"),
            (429, "slow down", "rate_limited"),
            (500, "", "transport"),
            (502, "<html>Bad Gateway</html>", "transport"),
            (400, "nope", "other"),
        ];
        for (status, body, kind) in cases {
            let f = ApiFailure::from_response(&response(*status, &[], body), 0);
            assert_eq!(f.code, "");
            assert_eq!(f.into_error().kind(), *kind, "{status} {body}");
        }
        let long = "x".repeat(10_000);
        let f = ApiFailure::from_response(&response(502, &[], &long), 0);
        assert!(f.message.len() <= SNIPPET);
    }

    #[test]
    fn rate_limit_delay_comes_from_retry_after_then_ratelimit_reset() {
        const NOW: u64 = 1_700_000_000;
        let body = envelope("rate_limit_exceeded", json!({}));
        let retry = |headers: &[(&str, &str)]| match ApiFailure::from_response(
            &response(429, headers, &body),
            NOW,
        )
        .into_error()
        {
            Error::RateLimited { retry_after_ms, .. } => retry_after_ms,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            retry(&[("retry-after", "7"), ("ratelimit-reset", "1700000100")]),
            Some(7_000)
        );
        assert_eq!(retry(&[("ratelimit-reset", "1700000030")]), Some(30_000));
        assert_eq!(retry(&[("RateLimit-Reset", "1600000000")]), Some(0));
        assert_eq!(retry(&[("ratelimit-reset", "soon")]), None);
        assert_eq!(retry(&[]), None);
        // 429 without the envelope is rate limiting too.
        let f = ApiFailure::from_response(&response(429, &[("retry-after", "2")], ""), NOW);
        assert_eq!(
            f.into_error(),
            Error::RateLimited {
                retry_after_ms: Some(2_000),
                message: "Hetzner API https://api.hetzner.cloud/v1/servers (HTTP 429): no message"
                    .into()
            }
        );
    }

    #[test]
    fn not_found_and_uniqueness_are_recognised() {
        let nf =
            ApiFailure::from_response(&response(404, &[], &envelope("not_found", json!({}))), 0);
        assert!(nf.is_not_found());
        assert!(ApiFailure::from_response(&response(404, &[], ""), 0).is_not_found());
        let dup = ApiFailure::from_response(
            &response(
                409,
                &[],
                &envelope("uniqueness_error", json!({"fields": [{"name": "name"}]})),
            ),
            0,
        );
        assert!(dup.is_uniqueness_error());
        assert!(!dup.is_not_found());
    }
}
