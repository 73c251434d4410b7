//! Fake clouds the suite points a plugin at, and what the suite needs of
//! each: where to send the plugin's HTTP or which stub answers its exec,
//! credentials, the ground truth of which nodes exist, planting nodes the
//! plugin must not see, and this cloud's way of saying "no capacity" or
//! "over quota" when a fault asks for it.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use bytes::Bytes;
use wasmprov_host::intercept::{ExecFailure, ExecOutput, ExecRequest, OutgoingRequest};

use crate::faults::FaultKind;

/// A node as the fake cloud knows it, whatever the plugin says.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TruthNode {
    /// The id the plugin should report as `provider_id`.
    pub id: String,
    /// Labels or tags on the node.
    pub labels: BTreeMap<String, String>,
    /// False once the node is terminated but still listed (EC2 keeps
    /// terminated instances visible for a while).
    pub alive: bool,
    /// The user data the node was created with, when the fake records it
    /// (`None`: not given, or the fake cannot tell).
    pub user_data: Option<Vec<u8>>,
}

/// What a fake recorded of one node: what reached the cloud when the node
/// was made, and what the cloud holds of it now. Every field is optional:
/// `None` is something this fake cannot tell, and the rules that need it
/// are skipped, not passed. Build one with `NodeRecord::default()` and set
/// the fields the fake knows.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct NodeRecord {
    /// The image the create asked for (`Some("")`: it named none).
    pub image: Option<String>,
    /// The user data the create carried (`Some(empty)`: none).
    pub user_data: Option<Vec<u8>>,
    /// The SSH public keys the create carried (`Some(empty)`: none).
    pub ssh_keys: Option<Vec<String>>,
    /// The zone (region, location) the node is in.
    pub zone: Option<String>,
    /// Its instance type.
    pub instance_type: Option<String>,
    /// When the cloud created it, in milliseconds since the Unix epoch.
    pub created_at_ms: Option<u64>,
    /// The cloud's own name of its state now.
    pub state: Option<String>,
    /// Its private address.
    pub private_address: Option<String>,
    /// Its public address.
    pub public_address: Option<String>,
    /// Its IPv6 address.
    pub ipv6_address: Option<String>,
    /// The host name the cloud gave it.
    pub hostname: Option<String>,
    /// The subnet (network, VPC) its network interface is in, by the id a
    /// provision request names it with; `Some("")`: in none.
    pub subnet: Option<String>,
}

/// What a fake set up for the networking rules (`request.subnet`,
/// `subnet.capacity`, `address.assign`, `targets`) and what it holds now.
/// Build one with `NetworkTruth::default()` and fill in what the fake has.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub struct NetworkTruth {
    /// Subnets a node can be placed in, with their free addresses now.
    pub subnets: Vec<TruthSubnet>,
    /// Target groups (load balancers) and the nodes in each now.
    pub groups: Vec<TruthGroup>,
    /// The account's stable addresses and the node each is on now.
    pub addresses: Vec<TruthAddress>,
}

/// A subnet as the fake holds it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TruthSubnet {
    /// The id a provision request and `subnet-capacity` name it by.
    pub id: String,
    /// Addresses still free for new nodes.
    pub available: u64,
    /// Every address it has for nodes, when the fake says.
    pub total: Option<u64>,
}

/// A target group as the fake holds it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TruthGroup {
    /// The id the plugin names it by.
    pub id: String,
    /// The ids of the nodes that are its targets.
    pub targets: Vec<String>,
}

/// A stable address as the fake holds it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TruthAddress {
    /// The IP address.
    pub address: String,
    /// The cloud's id of it.
    pub resource_id: Option<String>,
    /// The node it is on.
    pub node: Option<String>,
}

impl NetworkTruth {
    /// The node address `ip` is on (`None`: on none); `Err` when the
    /// account has no such address.
    ///
    /// # Errors
    /// When the fake holds no address `ip`.
    pub fn address_node(&self, ip: &str) -> Result<Option<&str>, String> {
        self.addresses
            .iter()
            .find(|a| a.address == ip)
            .map(|a| a.node.as_deref())
            .ok_or_else(|| format!("the cloud has no address {ip}"))
    }

    /// The targets of group `id`.
    #[must_use]
    pub fn targets(&self, id: &str) -> Vec<&str> {
        self.groups
            .iter()
            .filter(|g| g.id == id)
            .flat_map(|g| g.targets.iter().map(String::as_str))
            .collect()
    }
}

/// A stand-in for a cloud, on 127.0.0.1 or in-process.
#[async_trait::async_trait]
pub trait FakeCloud: Send + Sync + 'static {
    /// What this fake is, for reports ("hetzner fake at http://127.0.0.1:41234").
    fn describe(&self) -> String;

    /// Where every allowed HTTP request of the plugin goes instead of where
    /// it was addressed; `None` for a cloud the plugin reaches by exec.
    fn http_target(&self) -> Option<SocketAddr>;

    /// Answers a program run of the plugin, for a cloud reached by exec.
    /// `None` (the default) lets HTTP-only fakes refuse every run.
    async fn exec(&self, req: &ExecRequest) -> Option<Result<ExecOutput, ExecFailure>> {
        let _ = req;
        None
    }

    /// The value of the plugin's secret that the manifest reads from the
    /// environment variable `env`: credentials this fake accepts.
    fn secret(&self, env: &str) -> Option<String>;

    /// Configuration values the suite sets for the plugin on top of its
    /// manifest (for example an image id the fake knows).
    fn config(&self) -> BTreeMap<String, String> {
        BTreeMap::new()
    }

    /// Every node that exists, with its labels.
    async fn nodes(&self) -> anyhow::Result<Vec<TruthNode>>;

    /// Creates a node behind the plugin's back, with these labels; returns
    /// its id, or `None` when this fake cannot plant nodes.
    async fn plant(&self, labels: BTreeMap<String, String>) -> anyhow::Result<Option<String>>;

    /// Whether `req` asks the cloud to create a node (capacity and quota
    /// faults apply only to those).
    fn is_create(&self, req: &OutgoingRequest) -> bool;

    /// Whether [`FakeCloud::fault_response`] renders `kind` in this cloud's
    /// dialect (a fake that does not cannot have that fault injected).
    fn renders(&self, kind: FaultKind) -> bool {
        let _ = kind;
        true
    }

    /// The response this cloud gives a create request when it has no
    /// capacity, is over quota, or rate-limits it.
    fn fault_response(&self, kind: FaultKind, req: &OutgoingRequest) -> http::Response<Bytes>;

    /// For a cloud reached by exec: whether `req` creates a node, and the
    /// output of a command that fails with `kind`.
    fn exec_fault(
        &self,
        kind: FaultKind,
        req: &ExecRequest,
    ) -> Option<Result<ExecOutput, ExecFailure>> {
        let _ = (kind, req);
        None
    }

    /// Whether `req` (a program run) creates a node.
    fn exec_is_create(&self, req: &ExecRequest) -> bool {
        let _ = req;
        false
    }

    /// What this fake recorded of node `id` ([`NodeRecord`]); `None` (the
    /// default) when it records nothing or has no such node: the rules
    /// that compare a plugin with the record are then skipped.
    async fn record(&self, id: &str) -> anyhow::Result<Option<NodeRecord>> {
        let _ = id;
        Ok(None)
    }

    /// The most nodes one page of the cloud's node list holds. With it,
    /// the suite plants one more than a page of the run's own nodes (and of
    /// another owner's) before `describe` (`describe.pages`); `None` (the
    /// default) skips that rule.
    fn page_size(&self) -> Option<usize> {
        None
    }

    /// An image the cloud boots that is not the plugin's default, for
    /// `boot.image`; `None` (the default) skips that rule.
    fn boot_image(&self) -> Option<String> {
        None
    }

    /// The subnets, target groups and stable addresses the fake has now
    /// ([`NetworkTruth`]); `None` (the default) when it has no networking:
    /// the networking rules then check only that a plugin without the
    /// interface answers `unsupported`, and that a subnet that does not
    /// exist is refused.
    async fn network(&self) -> anyhow::Result<Option<NetworkTruth>> {
        Ok(None)
    }
}

/// Python that runs moto's server (`python3 -m moto.server`) with Elastic
/// IPs from public space, as EC2 allocates them: moto draws them from
/// 127.0.0.0/8, which the host refuses as a stable address (a loopback
/// address is no node's). The rest of moto is unchanged.
const MOTO_SERVER: &str = r#"
import random, sys
import moto.ec2.models.elastic_ip_addresses as eip
eip.random_ip = lambda: "54.%d.%d.%d" % (random.randint(144, 255), random.randint(0, 255), random.randint(1, 254))
from moto.server import main
main(sys.argv[1:])
"#;

/// A command starting moto's server on `127.0.0.1:port`, as the EC2 fake
/// does (Elastic IPs in public space, see [`Fake::Ec2`]); the caller sets
/// its environment and output and spawns it.
#[must_use]
pub fn moto_command(port: u16) -> std::process::Command {
    let mut cmd = std::process::Command::new("python3");
    cmd.args([
        "-c",
        MOTO_SERVER,
        "-H",
        "127.0.0.1",
        "-p",
        &port.to_string(),
    ]);
    cmd
}

/// The fakes the suite can start by name.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fake {
    /// The Hetzner Cloud API v1 fake ([`wasmprov_fake::HetznerFake`]).
    Hetzner,
    /// EC2 as served by moto (`python3 -m moto.server`), when installed,
    /// with Elastic IPs in public space ([`moto_command`]).
    Ec2,
    /// Stateful stubs for the cloud-init plugin's create/list/destroy commands.
    CloudInit,
    /// The reference cloud ([`wasmprov_fake::refcloud`]), which `wasmprov new`
    /// plugins start from.
    RefCloud,
    /// DigitalOcean's Droplets API v2, the DigitalOcean plugin's own fake
    /// (written with the fake kit).
    DigitalOcean,
}

impl Fake {
    /// Every fake, with the name `--fake` takes.
    pub const ALL: [(&'static str, Fake); 5] = [
        ("hetzner", Fake::Hetzner),
        ("ec2", Fake::Ec2),
        ("cloud-init", Fake::CloudInit),
        ("refcloud", Fake::RefCloud),
        ("digitalocean", Fake::DigitalOcean),
    ];

    /// The fake for a `--fake` name.
    ///
    /// # Errors
    /// An unknown name, listing the known ones.
    pub fn parse(name: &str) -> anyhow::Result<Self> {
        Self::ALL
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, f)| f.clone())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "unknown fake {name:?}; known: {}",
                    Self::ALL.map(|(n, _)| n).join(", ")
                )
            })
    }

    /// The fake that fits a bundled plugin, by the plugin's name.
    #[must_use]
    pub fn for_plugin(plugin: &str) -> Option<Self> {
        match plugin {
            "hetzner" => Some(Self::Hetzner),
            "aws-ec2" | "ec2" => Some(Self::Ec2),
            "cloud-init" => Some(Self::CloudInit),
            "refcloud" => Some(Self::RefCloud),
            "digitalocean" => Some(Self::DigitalOcean),
            _ => None,
        }
    }
}

/// A plain JSON response, for fakes rendering errors.
#[must_use]
pub fn json_response(status: u16, headers: &[(&str, &str)], body: &str) -> http::Response<Bytes> {
    let mut builder = http::Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "application/json");
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    builder
        .body(Bytes::from(body.to_string()))
        .unwrap_or_else(|_| http::Response::new(Bytes::new()))
}

/// Milliseconds since the Unix epoch of an RFC 3339 time; `None` when it
/// is not one.
pub(crate) fn rfc3339_ms(text: &str) -> Option<u64> {
    let t =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    u64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}
