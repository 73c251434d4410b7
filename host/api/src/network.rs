//! What contract 0.3's optional `networking` interface speaks of: addresses
//! that outlive a node, load balancer target groups and subnet capacity.
//! The calls are on [`CloudProvisioner`](crate::CloudProvisioner); a backend
//! that has none of them says so in [`Interfaces`].

use serde::{Deserialize, Serialize};

use crate::ProviderNodeId;

/// Which interfaces of the contract a backend has beyond the core calls.
/// A call to one it lacks is [`Unsupported`](crate::ProvisionerError::Unsupported)
/// without the backend being asked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct Interfaces {
    /// `set-labels` (contract 0.3 and later; the backend may still answer
    /// that its cloud cannot relabel a live node).
    pub set_labels: bool,
    /// The `networking` interface: stable addresses, target groups, subnet capacity.
    pub networking: bool,
}

/// Which kind of stable address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressKind {
    /// An address in the cloud's private network that moves between nodes
    /// (EC2 secondary private IP, Hetzner alias IP).
    Private,
    /// A public address that moves between nodes (EC2 Elastic IP, Hetzner
    /// floating IP).
    Public,
}

impl AddressKind {
    /// The name used in JSON, on the command line and in the protocol.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Private => "private",
            Self::Public => "public",
        }
    }
}

impl std::fmt::Display for AddressKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for AddressKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "private" => Ok(Self::Private),
            "public" => Ok(Self::Public),
            other => Err(format!(
                "unknown address kind {other:?} (expected private or public)"
            )),
        }
    }
}

/// The address to put on a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressRequest {
    /// Which kind.
    pub kind: AddressKind,
    /// The address (an IP, or the cloud's id of it) to move to the node;
    /// `None` takes a new one from the cloud.
    #[serde(default)]
    pub address: Option<String>,
}

/// A stable address and where it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StableAddress {
    /// The IP address.
    pub address: String,
    /// Which kind.
    pub kind: AddressKind,
    /// The cloud's id of the address or of what holds it (Elastic IP
    /// allocation id, floating IP id, network interface id).
    #[serde(default)]
    pub resource_id: Option<String>,
    /// The node it is on, if any.
    #[serde(default)]
    pub provider_id: Option<ProviderNodeId>,
}

/// A node in a load balancer's target group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// The cloud's id of the target group or load balancer.
    pub group: String,
    /// The node.
    pub provider_id: ProviderNodeId,
    /// The port traffic goes to, when the group takes one per target.
    #[serde(default)]
    pub port: Option<u16>,
    /// The cloud's word for the target's health, when it says.
    #[serde(default)]
    pub health: Option<String>,
}

/// Free room in a subnet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubnetCapacity {
    /// The subnet asked about.
    pub subnet: String,
    /// Addresses still free for new nodes.
    pub available_addresses: u64,
    /// Every address the subnet has for nodes, when the cloud says.
    #[serde(default)]
    pub total_addresses: Option<u64>,
    /// Its zone, when it has one.
    #[serde(default)]
    pub zone: Option<String>,
}
