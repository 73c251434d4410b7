//! The EC2 Query API wire format: the XML this plugin reads, instance state
//! → join state, and API errors → contract errors.

use std::collections::BTreeMap;

use roxmltree::{Document, Node};
use wasmprov_guest::http::Response;
use wasmprov_guest::state::StateTable;
use wasmprov_guest::{
    Arch, CapacityScope, CapacityType, Error, JoinState, Labels, NodeHandle, NodeStatus, Result,
};

/// An instance as `DescribeInstances` and `RunInstances` return it (only
/// the fields used here).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Instance {
    /// `instanceId`, e.g. `i-0abc…`.
    pub id: String,
    /// `instanceState/name`: `pending`, `running`, `shutting-down`,
    /// `terminated`, `stopping` or `stopped`.
    pub state: String,
    /// `instanceType`.
    pub instance_type: Option<String>,
    /// `placement/availabilityZone`.
    pub zone: Option<String>,
    /// `ipAddress` (public IPv4).
    pub public_ip: Option<String>,
    /// `privateIpAddress`.
    pub private_ip: Option<String>,
    /// `launchTime` (RFC 3339).
    pub launch_time: Option<String>,
    /// `architecture`: `x86_64`, `arm64`, ...
    pub architecture: Option<String>,
    /// `instanceLifecycle`: `spot` or `scheduled`; absent for on-demand.
    pub lifecycle: Option<String>,
    /// `tagSet`, in the order sent.
    pub tags: Vec<(String, String)>,
    /// `privateDnsName`: the host name EC2 gave it.
    pub private_dns_name: Option<String>,
    /// `ipv6Address`: the instance's primary IPv6 address, when EC2 names
    /// one (else its primary interface's first, [`Instance::ipv6`]).
    pub ipv6_address: Option<String>,
    /// `subnetId`.
    pub subnet_id: Option<String>,
    /// `networkInterfaceSet`: its network interfaces.
    pub interfaces: Vec<Interface>,
}

/// A network interface of an instance, as `DescribeInstances` shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Interface {
    /// `networkInterfaceId`, e.g. `eni-0abc…`.
    pub id: String,
    /// `attachment/deviceIndex`: 0 is the primary interface.
    pub device_index: Option<u32>,
    /// `attachment/instanceId`: the instance it is attached to (only
    /// `DescribeNetworkInterfaces` says; within an instance it is that one).
    pub instance_id: Option<String>,
    /// `privateIpAddressesSet`: each private IPv4 address and whether it is
    /// the interface's primary one.
    pub private_ips: Vec<(String, bool)>,
    /// `ipv6AddressesSet`, the primary IPv6 address (`isPrimaryIpv6`) first.
    pub ipv6: Vec<String>,
}

impl Interface {
    /// Whether `ip` is one of its secondary (movable) private addresses.
    #[must_use]
    pub fn has_secondary(&self, ip: &str) -> bool {
        self.private_ips
            .iter()
            .any(|(a, primary)| a == ip && !primary)
    }

    /// Whether `ip` is its primary private address.
    #[must_use]
    pub fn has_primary(&self, ip: &str) -> bool {
        self.private_ips
            .iter()
            .any(|(a, primary)| a == ip && *primary)
    }
}

/// EC2 instance state → join state.
///
/// `running` maps to [`JoinState::Joining`]: the machine is up, but whether
/// its node agent joined the cluster is not something EC2 knows, so this
/// plugin never reports [`JoinState::Joined`]. An instance that is
/// `shutting-down`, `terminated`, `stopping` or `stopped` will not become a
/// usable node and is [`JoinState::Failed`]; its status says which
/// ([`STATES`]). `pending` (and any state this plugin does not know) is
/// still being created.
#[must_use]
pub fn join_state(state: &str) -> JoinState {
    STATES.get(state)
}

/// EC2 instance states: status and join state. `pending` is being created;
/// a state this plugin does not know is `unknown` (its name is kept as the
/// raw state).
pub const STATES: StateTable = StateTable::new(
    &[
        ("pending", NodeStatus::Pending, JoinState::Provisioning),
        ("running", NodeStatus::Running, JoinState::Joining),
        ("shutting-down", NodeStatus::Deleting, JoinState::Failed),
        ("terminated", NodeStatus::Deleted, JoinState::Failed),
        ("stopping", NodeStatus::Stopping, JoinState::Failed),
        ("stopped", NodeStatus::Stopped, JoinState::Failed),
    ],
    (NodeStatus::Unknown, JoinState::Provisioning),
);

impl Instance {
    /// The value of tag `key`, exactly as named. For a reserved key
    /// (`wasmprov_api::provenance::reads_as_reserved`: the owner, request,
    /// journal, digest and group tags) `None` as well when any other tag
    /// reads as the same key (`" wasmprov-owner"`, `"WASMPROV-OWNER"`) with
    /// another value: an instance two tags claim is nobody's, never the
    /// first's or the last's.
    #[must_use]
    pub fn tag(&self, key: &str) -> Option<&str> {
        let exact = self
            .tags
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())?;
        if wasmprov_api::provenance::reads_as_reserved(key) == Some(key)
            && self.tags.iter().any(|(k, v)| {
                v != exact && wasmprov_api::provenance::reads_as_reserved(k) == Some(key)
            })
        {
            return None;
        }
        Some(exact)
    }

    /// Whether EC2 has terminated the instance.
    #[must_use]
    pub fn is_terminated(&self) -> bool {
        self.state == "terminated"
    }

    /// Its primary network interface (device index 0), where stable private
    /// addresses go.
    #[must_use]
    pub fn primary_interface(&self) -> Option<&Interface> {
        self.interfaces
            .iter()
            .find(|i| i.device_index == Some(0))
            .or_else(|| self.interfaces.first())
    }

    /// Its IPv6 address: `ipv6Address`, else the first of its primary
    /// interface's.
    #[must_use]
    pub fn ipv6(&self) -> Option<String> {
        self.ipv6_address.clone().or_else(|| {
            self.primary_interface()
                .and_then(|i| i.ipv6.first().cloned())
        })
    }

    /// The instance's tags as labels, without AWS's reserved `aws:` tags,
    /// tags that only read as a reserved label (`" wasmprov-owner"`), and a
    /// reserved label another tag contradicts ([`tag`](Self::tag)).
    #[must_use]
    pub fn labels(&self) -> Labels {
        self.tags
            .iter()
            .filter(|(k, _)| !k.to_ascii_lowercase().starts_with("aws:"))
            .filter(
                |(k, _)| match wasmprov_api::provenance::reads_as_reserved(k) {
                    None => true,
                    Some(r) => r == k && self.tag(k).is_some(),
                },
            )
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The node handle for this instance. Architecture and GPU model come
    /// from the instance type's catalogue entry when it has one.
    #[must_use]
    pub fn to_handle(&self) -> NodeHandle {
        let known = self
            .instance_type
            .as_deref()
            .and_then(crate::catalogue::find);
        let mut node = NodeHandle {
            provider_id: self.id.clone(),
            created_at_ms: self
                .launch_time
                .as_deref()
                .and_then(wasmprov_guest::time::rfc3339_ms),
            address: self.public_ip.clone().or_else(|| self.private_ip.clone()),
            private_address: self.private_ip.clone(),
            public_address: self.public_ip.clone(),
            arch: self
                .architecture
                .as_deref()
                .and_then(|a| a.parse().ok())
                .or(known.map(|t| t.arch)),
            gpu_model: known.and_then(|t| t.gpu_model).map(str::to_string),
            zone: self.zone.clone(),
            capacity_type: if self.lifecycle.as_deref() == Some("spot") {
                CapacityType::Spot
            } else {
                CapacityType::OnDemand
            },
            instance_type: self.instance_type.clone(),
            labels: self.labels(),
            ipv6_address: self.ipv6(),
            hostname: self.private_dns_name.clone(),
            ..NodeHandle::default()
        };
        STATES.apply(&self.state, &mut node);
        node
    }
}

fn parse(xml: &str) -> Result<Document<'_>> {
    Document::parse(xml).map_err(|e| Error::Transport(format!("EC2 sent malformed XML: {e}")))
}

fn child<'a, 'i>(node: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    node.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
}

fn children<'a, 'i: 'a>(node: Node<'a, 'i>, name: &'a str) -> impl Iterator<Item = Node<'a, 'i>> {
    node.children()
        .filter(move |c| c.is_element() && c.tag_name().name() == name)
}

fn text(node: Node<'_, '_>, name: &str) -> Option<String> {
    child(node, name)
        .and_then(|c| c.text())
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

/// A child's text exactly as sent (tag keys and values: `" x"` and `"x"`
/// are two tags to EC2, and must stay two here), `None` when empty.
fn raw_text(node: Node<'_, '_>, name: &str) -> Option<String> {
    child(node, name)
        .and_then(|c| c.text())
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

fn expect_root<'a, 'i>(doc: &'a Document<'i>, name: &str) -> Result<Node<'a, 'i>> {
    let root = doc.root_element();
    if root.tag_name().name() == name {
        Ok(root)
    } else {
        Err(Error::Transport(format!(
            "EC2 answered with <{}> where <{name}> was expected",
            root.tag_name().name()
        )))
    }
}

fn instance(item: Node<'_, '_>) -> Result<Instance> {
    let id = text(item, "instanceId")
        .ok_or_else(|| Error::Transport("EC2 sent an instance without instanceId".into()))?;
    let tags = tag_set(item);
    Ok(Instance {
        id,
        state: child(item, "instanceState")
            .and_then(|s| text(s, "name"))
            .unwrap_or_default(),
        instance_type: text(item, "instanceType"),
        zone: child(item, "placement").and_then(|p| text(p, "availabilityZone")),
        public_ip: text(item, "ipAddress"),
        private_ip: text(item, "privateIpAddress"),
        launch_time: text(item, "launchTime"),
        architecture: text(item, "architecture"),
        lifecycle: text(item, "instanceLifecycle"),
        tags,
        private_dns_name: text(item, "privateDnsName"),
        ipv6_address: text(item, "ipv6Address"),
        subnet_id: text(item, "subnetId"),
        interfaces: child(item, "networkInterfaceSet")
            .into_iter()
            .flat_map(|set| children(set, "item"))
            .filter_map(interface)
            .collect(),
    })
}

fn interface(item: Node<'_, '_>) -> Option<Interface> {
    let mut ipv6: Vec<(String, bool)> = child(item, "ipv6AddressesSet")
        .into_iter()
        .flat_map(|set| children(set, "item"))
        .filter_map(|a| {
            Some((
                text(a, "ipv6Address")?,
                text(a, "isPrimaryIpv6").as_deref() == Some("true"),
            ))
        })
        .collect();
    ipv6.sort_by_key(|(_, primary)| !primary);
    Some(Interface {
        id: text(item, "networkInterfaceId")?,
        device_index: child(item, "attachment")
            .and_then(|a| text(a, "deviceIndex"))
            .and_then(|d| d.parse().ok()),
        instance_id: child(item, "attachment").and_then(|a| text(a, "instanceId")),
        private_ips: child(item, "privateIpAddressesSet")
            .into_iter()
            .flat_map(|set| children(set, "item"))
            .filter_map(|a| {
                Some((
                    text(a, "privateIpAddress")?,
                    text(a, "primary").as_deref() == Some("true"),
                ))
            })
            .collect(),
        ipv6: ipv6.into_iter().map(|(a, _)| a).collect(),
    })
}

fn instances_in(set: Node<'_, '_>) -> Result<Vec<Instance>> {
    children(set, "item").map(instance).collect()
}

/// One page of `DescribeInstances`: the instances of every reservation, and
/// the `nextToken` when there are more.
///
/// # Errors
/// [`Error::Transport`] when the body is not a `DescribeInstancesResponse`.
pub fn parse_describe_instances(xml: &str) -> Result<(Vec<Instance>, Option<String>)> {
    let doc = parse(xml)?;
    let root = expect_root(&doc, "DescribeInstancesResponse")?;
    let mut out = Vec::new();
    if let Some(reservations) = child(root, "reservationSet") {
        for reservation in children(reservations, "item") {
            if let Some(set) = child(reservation, "instancesSet") {
                out.extend(instances_in(set)?);
            }
        }
    }
    Ok((out, text(root, "nextToken")))
}

/// The instances `RunInstances` created.
///
/// # Errors
/// [`Error::Transport`] when the body is not a `RunInstancesResponse`.
pub fn parse_run_instances(xml: &str) -> Result<Vec<Instance>> {
    let doc = parse(xml)?;
    let root = expect_root(&doc, "RunInstancesResponse")?;
    match child(root, "instancesSet") {
        Some(set) => instances_in(set),
        None => Ok(Vec::new()),
    }
}

pub use crate::catalogue::TypeInfo;

/// A GPU model as shapes name it: `<vendor>-<name>`, lowercase, runs of
/// spaces as one `-` (`NVIDIA` `A10G` is `nvidia-a10g`, `AMD`
/// `Radeon Pro V520` is `amd-radeon-pro-v520`). A name that already starts
/// with the vendor keeps it once.
#[must_use]
pub fn gpu_model(vendor: Option<&str>, name: &str) -> String {
    let norm = |s: &str| {
        s.split_whitespace()
            .map(str::to_ascii_lowercase)
            .collect::<Vec<_>>()
            .join("-")
    };
    let name = norm(name);
    match vendor.map(norm).filter(|v| !v.is_empty()) {
        Some(v) if name != v && !name.starts_with(&format!("{v}-")) => format!("{v}-{name}"),
        _ => name,
    }
}

fn type_info(item: Node<'_, '_>) -> Option<TypeInfo> {
    let name = text(item, "instanceType")?;
    let arch = child(item, "processorInfo")
        .and_then(|p| child(p, "supportedArchitectures"))
        .and_then(|set| {
            children(set, "item")
                .filter_map(|a| a.text().map(str::trim))
                .find_map(|a| a.parse::<Arch>().ok())
        });
    let gpus: Vec<Node<'_, '_>> = child(item, "gpuInfo")
        .and_then(|g| child(g, "gpus"))
        .map(|set| children(set, "item").collect())
        .unwrap_or_default();
    let count = |g: Node<'_, '_>| text(g, "count").and_then(|c| c.parse::<u32>().ok());
    let gpu = gpus
        .iter()
        .map(|g| count(*g).unwrap_or(0))
        .fold(0u32, u32::saturating_add);
    let first = gpus.first().copied().filter(|_| gpu > 0);
    let gpu_vendor = first
        .and_then(|g| text(g, "manufacturer"))
        .map(|m| m.to_ascii_lowercase());
    let model = first
        .and_then(|g| text(g, "name"))
        .map(|n| gpu_model(gpu_vendor.as_deref(), &n));
    Some(TypeInfo {
        name,
        vcpu: child(item, "vCpuInfo")
            .and_then(|v| text(v, "defaultVCpus"))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
        memory_mib: child(item, "memoryInfo")
            .and_then(|m| text(m, "sizeInMiB"))
            .and_then(|m| m.parse().ok())
            .unwrap_or(0),
        arch,
        gpu,
        gpu_vendor,
        gpu_model: model,
        gpu_memory_mib: child(item, "gpuInfo")
            .and_then(|g| text(g, "totalGpuMemoryInMiB"))
            .and_then(|m| m.parse().ok())
            .filter(|_| gpu > 0),
    })
}

/// One page of `DescribeInstanceTypes`: the types, and the `nextToken` when
/// there are more.
///
/// # Errors
/// [`Error::Transport`] when the body is not a `DescribeInstanceTypesResponse`.
pub fn parse_instance_types(xml: &str) -> Result<(Vec<TypeInfo>, Option<String>)> {
    let doc = parse(xml)?;
    let root = expect_root(&doc, "DescribeInstanceTypesResponse")?;
    let types = child(root, "instanceTypeSet")
        .map(|set| children(set, "item").filter_map(type_info).collect())
        .unwrap_or_default();
    Ok((types, text(root, "nextToken")))
}

/// An image's root device, as `DescribeImages` describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RootDevice {
    /// `rootDeviceName`, e.g. `/dev/xvda`.
    pub name: String,
    /// `rootDeviceType`: `ebs` or `instance-store`.
    pub kind: String,
    /// The `volumeSize` (GiB) of the image's mapping for the root device:
    /// the size of its snapshot, which a root volume may not be smaller than.
    pub snapshot_gib: Option<u64>,
}

/// The root device of `image_id` in a `DescribeImages` answer; `None` when
/// the answer does not list the image or names no root device.
///
/// # Errors
/// [`Error::Transport`] when the body is not a `DescribeImagesResponse`.
pub fn parse_root_device(xml: &str, image_id: &str) -> Result<Option<RootDevice>> {
    let doc = parse(xml)?;
    let root = expect_root(&doc, "DescribeImagesResponse")?;
    let Some(image) = child(root, "imagesSet")
        .into_iter()
        .flat_map(|set| children(set, "item"))
        .find(|i| text(*i, "imageId").as_deref() == Some(image_id))
    else {
        return Ok(None);
    };
    let Some(name) = text(image, "rootDeviceName") else {
        return Ok(None);
    };
    let snapshot_gib = child(image, "blockDeviceMapping")
        .into_iter()
        .flat_map(|set| children(set, "item"))
        .find(|m| text(*m, "deviceName").as_deref() == Some(name.as_str()))
        .and_then(|m| child(m, "ebs"))
        .and_then(|e| text(e, "volumeSize"))
        .and_then(|v| v.parse().ok());
    Ok(Some(RootDevice {
        kind: text(image, "rootDeviceType").unwrap_or_else(|| "ebs".into()),
        name,
        snapshot_gib,
    }))
}

/// An image as `DescribeImages` describes it (only the fields used here).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Image {
    /// `imageId`.
    pub id: String,
    /// `name`.
    pub name: Option<String>,
    /// `imageOwnerId`.
    pub owner: Option<String>,
    /// `architecture`, when it is one this plugin launches.
    pub arch: Option<Arch>,
    /// `creationDate` (RFC 3339): the newest of several matches wins.
    pub created: Option<String>,
    /// The root device, when named.
    pub root: Option<RootDevice>,
}

/// The images of a `DescribeImages` answer, and the `nextToken`.
///
/// # Errors
/// [`Error::Transport`] when the body is not a `DescribeImagesResponse`.
pub fn parse_images(xml: &str) -> Result<(Vec<Image>, Option<String>)> {
    let doc = parse(xml)?;
    let root = expect_root(&doc, "DescribeImagesResponse")?;
    let images = child(root, "imagesSet")
        .into_iter()
        .flat_map(|set| children(set, "item"))
        .filter_map(|i| {
            Some(Image {
                id: text(i, "imageId")?,
                name: text(i, "name"),
                owner: text(i, "imageOwnerId"),
                arch: text(i, "architecture").and_then(|a| a.parse().ok()),
                created: text(i, "creationDate"),
                root: root_device_of(i),
            })
        })
        .collect();
    Ok((images, text(root, "nextToken")))
}

fn root_device_of(image: Node<'_, '_>) -> Option<RootDevice> {
    let name = text(image, "rootDeviceName")?;
    let snapshot_gib = child(image, "blockDeviceMapping")
        .into_iter()
        .flat_map(|set| children(set, "item"))
        .find(|m| text(*m, "deviceName").as_deref() == Some(name.as_str()))
        .and_then(|m| child(m, "ebs"))
        .and_then(|e| text(e, "volumeSize"))
        .and_then(|v| v.parse().ok());
    Some(RootDevice {
        kind: text(image, "rootDeviceType").unwrap_or_else(|| "ebs".into()),
        name,
        snapshot_gib,
    })
}

/// A subnet as `DescribeSubnets` describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Subnet {
    /// `subnetId`.
    pub id: String,
    /// `availabilityZone`.
    pub zone: String,
    /// `availableIpAddressCount`.
    pub free: u64,
    /// `cidrBlock`, e.g. `10.0.1.0/24`.
    pub cidr: Option<String>,
}

impl Subnet {
    /// The addresses its IPv4 block has for nodes: every address of the
    /// block but the five AWS reserves in each subnet (network, router,
    /// DNS, future use, broadcast); `None` without a readable block.
    #[must_use]
    pub fn total_addresses(&self) -> Option<u64> {
        let prefix: u32 = self.cidr.as_deref()?.split_once('/')?.1.parse().ok()?;
        let size = 1u64.checked_shl(32u32.checked_sub(prefix)?)?;
        Some(size.saturating_sub(RESERVED_PER_SUBNET))
    }
}

/// Addresses AWS reserves in every subnet: the first four and the last.
pub const RESERVED_PER_SUBNET: u64 = 5;

/// One page of `DescribeSubnets`, and its `nextToken`.
///
/// # Errors
/// [`Error::Transport`] when the body is not a `DescribeSubnetsResponse`.
pub fn parse_subnets(xml: &str) -> Result<(Vec<Subnet>, Option<String>)> {
    let doc = parse(xml)?;
    let root = expect_root(&doc, "DescribeSubnetsResponse")?;
    let subnets = child(root, "subnetSet")
        .into_iter()
        .flat_map(|set| children(set, "item"))
        .filter_map(|i| {
            Some(Subnet {
                id: text(i, "subnetId")?,
                zone: text(i, "availabilityZone").unwrap_or_default(),
                free: text(i, "availableIpAddressCount")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0),
                cidr: text(i, "cidrBlock"),
            })
        })
        .collect();
    Ok((subnets, text(root, "nextToken")))
}

/// The network interfaces of a `DescribeNetworkInterfaces` page, and its
/// `nextToken`.
///
/// # Errors
/// [`Error::Transport`] when the body is not a `DescribeNetworkInterfacesResponse`.
pub fn parse_network_interfaces(xml: &str) -> Result<(Vec<Interface>, Option<String>)> {
    let doc = parse(xml)?;
    let root = expect_root(&doc, "DescribeNetworkInterfacesResponse")?;
    let interfaces = child(root, "networkInterfaceSet")
        .into_iter()
        .flat_map(|set| children(set, "item"))
        .filter_map(interface)
        .collect();
    Ok((interfaces, text(root, "nextToken")))
}

/// An Elastic IP as `DescribeAddresses` describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ElasticIp {
    /// `publicIp`.
    pub public_ip: String,
    /// `allocationId`, e.g. `eipalloc-0abc…`.
    pub allocation_id: Option<String>,
    /// `associationId`, while it is associated.
    pub association_id: Option<String>,
    /// `instanceId` it is associated with.
    pub instance_id: Option<String>,
    /// `networkInterfaceId` it is associated with.
    pub interface_id: Option<String>,
    /// `tagSet`.
    pub tags: Vec<(String, String)>,
}

/// The Elastic IPs of a `DescribeAddresses` answer (it is not paged).
///
/// # Errors
/// [`Error::Transport`] when the body is not a `DescribeAddressesResponse`.
pub fn parse_addresses(xml: &str) -> Result<Vec<ElasticIp>> {
    let doc = parse(xml)?;
    let root = expect_root(&doc, "DescribeAddressesResponse")?;
    Ok(child(root, "addressesSet")
        .into_iter()
        .flat_map(|set| children(set, "item"))
        .filter_map(|i| {
            Some(ElasticIp {
                public_ip: text(i, "publicIp")?,
                allocation_id: text(i, "allocationId"),
                association_id: text(i, "associationId"),
                instance_id: text(i, "instanceId"),
                interface_id: text(i, "networkInterfaceId"),
                tags: tag_set(i),
            })
        })
        .collect())
}

/// The address and allocation id `AllocateAddress` answered.
///
/// # Errors
/// [`Error::Transport`] when the body is not an `AllocateAddressResponse`
/// with both.
pub fn parse_allocate_address(xml: &str) -> Result<(String, String)> {
    let doc = parse(xml)?;
    let root = expect_root(&doc, "AllocateAddressResponse")?;
    match (text(root, "publicIp"), text(root, "allocationId")) {
        (Some(ip), Some(id)) => Ok((ip, id)),
        _ => Err(Error::Transport(
            "EC2 AllocateAddress answered without publicIp or allocationId".into(),
        )),
    }
}

/// The private addresses an `AssignPrivateIpAddresses` answer lists.
///
/// # Errors
/// [`Error::Transport`] when the body is not an
/// `AssignPrivateIpAddressesResponse`.
pub fn parse_assigned_private_ips(xml: &str) -> Result<Vec<String>> {
    let doc = parse(xml)?;
    let root = expect_root(&doc, "AssignPrivateIpAddressesResponse")?;
    Ok(child(root, "assignedPrivateIpAddressesSet")
        .into_iter()
        .flat_map(|set| children(set, "item"))
        .filter_map(|i| text(i, "privateIpAddress"))
        .collect())
}

/// One target of an ELBv2 target group, as `DescribeTargetHealth` says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TargetHealth {
    /// `Target/Id`: an instance id (or an IP, for IP target groups).
    pub id: String,
    /// `Target/Port`.
    pub port: Option<u16>,
    /// `TargetHealth/State`: `initial`, `healthy`, `unhealthy`, `unused`,
    /// `draining`, `unavailable`.
    pub state: Option<String>,
}

/// The targets of an ELBv2 `DescribeTargetHealth` answer (not paged).
///
/// # Errors
/// [`Error::Transport`] when the body is not a `DescribeTargetHealthResponse`.
pub fn parse_target_health(xml: &str) -> Result<Vec<TargetHealth>> {
    let doc = parse(xml)?;
    let root = expect_root(&doc, "DescribeTargetHealthResponse")?;
    Ok(child(root, "DescribeTargetHealthResult")
        .and_then(|r| child(r, "TargetHealthDescriptions"))
        .into_iter()
        .flat_map(|set| children(set, "member"))
        .filter_map(|m| {
            let target = child(m, "Target")?;
            Some(TargetHealth {
                id: text(target, "Id")?,
                port: text(target, "Port").and_then(|p| p.parse().ok()),
                state: child(m, "TargetHealth").and_then(|h| text(h, "State")),
            })
        })
        .collect())
}

/// Whether a 2xx answer is the `<{action}Response>` expected (ELBv2's
/// `RegisterTargets`, `DeregisterTargets`; EC2's tag and address calls).
///
/// # Errors
/// [`Error::Transport`] when it is anything else.
pub fn expect_response(xml: &str, action: &str) -> Result<()> {
    let doc = parse(xml)?;
    expect_root(&doc, &format!("{action}Response")).map(|_| ())
}

fn tag_set(item: Node<'_, '_>) -> Vec<(String, String)> {
    child(item, "tagSet")
        .map(|set| {
            children(set, "item")
                .filter_map(|t| {
                    Some((
                        raw_text(t, "key")?,
                        raw_text(t, "value").unwrap_or_default(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// One page of `DescribeSecurityGroups`: the group ids, and `nextToken`.
///
/// # Errors
/// [`Error::Transport`] when the body is not a `DescribeSecurityGroupsResponse`.
pub fn parse_security_groups(xml: &str) -> Result<(Vec<String>, Option<String>)> {
    let doc = parse(xml)?;
    let root = expect_root(&doc, "DescribeSecurityGroupsResponse")?;
    let ids = child(root, "securityGroupInfo")
        .into_iter()
        .flat_map(|set| children(set, "item"))
        .filter_map(|i| text(i, "groupId"))
        .collect();
    Ok((ids, text(root, "nextToken")))
}

/// One spot price: zone, instance type and hourly USD.
#[derive(Clone, Debug, PartialEq)]
pub struct SpotPrice {
    /// Availability zone.
    pub zone: String,
    /// Instance type.
    pub instance_type: String,
    /// Hourly price in USD.
    pub usd: f64,
}

/// One page of `DescribeSpotPriceHistory`: its prices (those that are not
/// positive finite numbers are left out), and the `nextToken` when there
/// are more.
///
/// # Errors
/// [`Error::Transport`] when the body is not a `DescribeSpotPriceHistoryResponse`.
pub fn parse_spot_prices(xml: &str) -> Result<(Vec<SpotPrice>, Option<String>)> {
    let doc = parse(xml)?;
    let root = expect_root(&doc, "DescribeSpotPriceHistoryResponse")?;
    let prices = child(root, "spotPriceHistorySet")
        .map(|set| {
            children(set, "item")
                .filter_map(|i| {
                    Some(SpotPrice {
                        zone: text(i, "availabilityZone").unwrap_or_default(),
                        instance_type: text(i, "instanceType").unwrap_or_default(),
                        usd: text(i, "spotPrice")?
                            .parse()
                            .ok()
                            .filter(|p: &f64| p.is_finite() && *p > 0.0)?,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Ok((prices, text(root, "nextToken")))
}

/// The lowest price per instance type across zones: what a spot node of
/// the type costs now where it is cheapest.
#[must_use]
pub fn lowest_spot_prices(prices: &[SpotPrice]) -> BTreeMap<String, f64> {
    let mut out: BTreeMap<String, f64> = BTreeMap::new();
    for p in prices.iter().filter(|p| !p.instance_type.is_empty()) {
        out.entry(p.instance_type.clone())
            .and_modify(|low| *low = low.min(p.usd))
            .or_insert(p.usd);
    }
    out
}

/// An error response of the API, before it becomes a contract error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiFailure {
    /// HTTP status.
    pub status: u16,
    /// `<Error><Code>`, empty when the body had none.
    pub code: String,
    /// `<Error><Message>`, or a snippet of the body.
    pub message: String,
    /// `Retry-After`, in milliseconds, when sent.
    pub retry_after_ms: Option<u64>,
    /// The URL, for messages.
    pub url: String,
}

/// The longest piece of an unparsable error body kept in a message.
const SNIPPET: usize = 200;

/// Codes that say the credentials are missing, wrong or not allowed.
const AUTH_CODES: &[&str] = &[
    "AuthFailure",
    "UnauthorizedOperation",
    "SignatureDoesNotMatch",
    "InvalidClientTokenId",
    "IncompleteSignature",
    "MissingAuthenticationToken",
    "AccessDenied",
    "RequestExpired",
    "ExpiredToken",
    "OptInRequired",
    "Blocked",
    "AccessDeniedException",
    "UnrecognizedClientException",
];

/// Codes for configuration values EC2 refused (AMI, subnet, groups, key…).
const CONFIG_CODES: &[&str] = &[
    "InvalidGroup.NotFound",
    "InvalidGroupId.Malformed",
    "InvalidKeyPair.NotFound",
    "InvalidSubnet",
    "InvalidParameterValue",
    "InvalidParameterCombination",
    "InvalidParameter",
    "InvalidParameterDependency",
    "InvalidUserData.Malformed",
    "ParameterNotFound",
    "InvalidParameterException",
    "ValidationException",
    "InvalidIamInstanceProfile.NotFound",
    "InvalidKmsKey.NotFound",
];

impl ApiFailure {
    /// Reads an error response: `<Response><Errors><Error>` (EC2) or
    /// `<ErrorResponse><Error>` (other AWS front ends).
    #[must_use]
    pub fn from_response(resp: &Response) -> Self {
        let text = resp.text();
        let parsed = Document::parse(&text).ok().and_then(|doc| {
            let err = doc
                .descendants()
                .find(|n| n.is_element() && n.tag_name().name() == "Error")?;
            Some((
                self::text(err, "Code").unwrap_or_default(),
                self::text(err, "Message").unwrap_or_default(),
            ))
        });
        let (code, message) = parsed.unwrap_or_else(|| {
            (
                String::new(),
                text.trim().chars().take(SNIPPET).collect::<String>(),
            )
        });
        Self {
            status: resp.status,
            code,
            message,
            retry_after_ms: resp.retry_after_ms(),
            url: resp.url.clone(),
        }
    }

    /// Reads an AWS JSON 1.1 error response (`{"__type": "…#Code",
    /// "message": "…"}`), such as the Price List API's or SSM's.
    #[must_use]
    pub fn from_json_response(resp: &Response) -> Self {
        let parsed: Option<serde_json::Value> = serde_json::from_slice(&resp.body).ok();
        let field = |names: &[&str]| {
            parsed.as_ref().and_then(|v| {
                names
                    .iter()
                    .find_map(|n| v.get(*n).and_then(serde_json::Value::as_str))
                    .map(str::to_string)
            })
        };
        let code = field(&["__type", "code", "Code"])
            .map(|t| t.rsplit('#').next().unwrap_or_default().to_string())
            .unwrap_or_default();
        let message = field(&["message", "Message"])
            .unwrap_or_else(|| resp.text().trim().chars().take(SNIPPET).collect::<String>());
        Self {
            status: resp.status,
            code,
            message,
            retry_after_ms: resp.retry_after_ms(),
            url: resp.url.clone(),
        }
    }

    fn describe(&self) -> String {
        let what = if self.message.is_empty() {
            "no message"
        } else {
            self.message.as_str()
        };
        if self.code.is_empty() {
            format!("EC2 {} (HTTP {}): {what}", self.url, self.status)
        } else {
            format!(
                "EC2 {} (HTTP {}, {}): {what}",
                self.url, self.status, self.code
            )
        }
    }

    /// The contract error for this failure. The error code decides; the
    /// HTTP status is the fallback for codes this plugin does not know.
    /// `zone_asked` says whether the request named an availability zone:
    /// capacity errors then name the zone as what ran out.
    #[must_use]
    pub fn into_error(self, zone_asked: bool) -> Error {
        let message = self.describe();
        let where_ = if zone_asked {
            CapacityScope::Zone
        } else {
            CapacityScope::InstanceType
        };
        let code = self.code.as_str();
        match code {
            "InsufficientInstanceCapacity"
            | "InsufficientCapacityOnHost"
            | "InsufficientHostCapacity"
            | "InsufficientReservedInstanceCapacity" => Error::Capacity {
                scope: where_,
                message,
            },
            // The type is not offered in the zone asked for.
            "Unsupported" if zone_asked => Error::Capacity {
                scope: CapacityScope::Zone,
                message,
            },
            "Unsupported" | "InvalidInstanceType" | "UnsupportedOperation" => {
                Error::Unsupported(message)
            }
            "SpotMaxPriceTooLow" => Error::Capacity {
                scope: CapacityScope::Group,
                message,
            },
            "MaxSpotInstanceCountExceeded"
            | "InstanceLimitExceeded"
            | "VcpuLimitExceeded"
            | "AddressLimitExceeded"
            | "PrivateIpAddressLimitExceeded" => Error::Quota(message),
            "RequestLimitExceeded"
            | "Throttling"
            | "ThrottlingException"
            | "Unavailable"
            | "ServiceUnavailable" => Error::RateLimited {
                retry_after_ms: self.retry_after_ms,
                message,
            },
            // The same client token with other parameters: another request
            // already holds this token.
            "IdempotentParameterMismatch" => Error::Conflict(message),
            c if AUTH_CODES.contains(&c) => Error::Auth(message),
            "InvalidInstanceID.NotFound"
            | "InvalidInstanceID.Malformed"
            | "InvalidAddress.NotFound"
            | "InvalidAllocationID.NotFound"
            | "InvalidAssociationID.NotFound"
            | "InvalidNetworkInterfaceID.NotFound"
            | "TargetGroupNotFound" => Error::NotFound(message),
            c if c.starts_with("InvalidAMIID.")
                || c.starts_with("InvalidSubnetID.")
                || CONFIG_CODES.contains(&c) =>
            {
                Error::InvalidConfig(message)
            }
            "InternalError" | "InternalFailure" => Error::Transport(message),
            _ => match self.status {
                401 | 403 => Error::Auth(message),
                429 | 503 => Error::RateLimited {
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

    /// `RunInstances` as EC2 returns it (abridged from the API reference,
    /// with a spot instance and tags).
    const RUN: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<RunInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>d3253568-edcb-4db0-95e8-7b1e4a0e2a9d</requestId>
  <reservationId>r-0a1b2c3d4e5f67890</reservationId>
  <ownerId>111122223333</ownerId>
  <groupSet/>
  <instancesSet>
    <item>
      <instanceId>i-0598c7d356eba48d7</instanceId>
      <imageId>ami-0abcdef1234567890</imageId>
      <instanceState><code>0</code><name>pending</name></instanceState>
      <privateDnsName>ip-10-0-0-157.ec2.internal</privateDnsName>
      <instanceType>g4dn.xlarge</instanceType>
      <placement><availabilityZone>us-east-1b</availabilityZone><groupName/><tenancy>default</tenancy></placement>
      <subnetId>subnet-04a636d18e83cfacb</subnetId>
      <privateIpAddress>10.0.0.157</privateIpAddress>
      <groupSet><item><groupId>sg-1</groupId><groupName>default</groupName></item></groupSet>
      <instanceLifecycle>spot</instanceLifecycle>
      <networkInterfaceSet><item><tagSet><item><key>nested</key><value>no</value></item></tagSet></item></networkInterfaceSet>
      <tagSet>
        <item><key>wasmprov-owner</key><value>host-a</value></item>
        <item><key>wasmprov-request</key><value>req-1</value></item>
        <item><key>Name</key><value>wasmprov-req-1</value></item>
        <item><key>aws:ec2spot:fleet-request-id</key><value>sfr-1</value></item>
        <item><key>empty</key><value/></item>
      </tagSet>
    </item>
  </instancesSet>
</RunInstancesResponse>"#;

    /// Two reservations, a terminated instance and a next page.
    const DESCRIBE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>8f7724cf-496f-496e-8fe3-example</requestId>
  <reservationSet>
    <item>
      <reservationId>r-1</reservationId>
      <instancesSet>
        <item>
          <instanceId>i-1111</instanceId>
          <instanceState><code>16</code><name>running</name></instanceState>
          <instanceType>t3.micro</instanceType>
          <placement><availabilityZone>eu-west-1a</availabilityZone></placement>
          <privateIpAddress>10.0.1.5</privateIpAddress>
          <ipAddress>203.0.113.7</ipAddress>
          <tagSet><item><key>wasmprov-owner</key><value>host-a</value></item></tagSet>
        </item>
        <item>
          <instanceId>i-2222</instanceId>
          <instanceState><code>48</code><name>terminated</name></instanceState>
          <instanceType>t3.micro</instanceType>
        </item>
      </instancesSet>
    </item>
    <item>
      <reservationId>r-2</reservationId>
      <instancesSet>
        <item>
          <instanceId>i-3333</instanceId>
          <instanceState><code>80</code><name>stopped</name></instanceState>
        </item>
      </instancesSet>
    </item>
  </reservationSet>
  <nextToken>eyJ2IjoiMiIsImMiOiJ0b2tlbiJ9</nextToken>
</DescribeInstancesResponse>"#;

    fn response(status: u16, headers: &[(&str, &str)], body: &str) -> Response {
        Response {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), (*v).to_string()))
                .collect(),
            body: body.as_bytes().to_vec(),
            url: "https://ec2.us-east-1.amazonaws.com/".into(),
        }
    }

    fn ec2_error(code: &str) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{code} happened</Message></Error></Errors><RequestID>ea966190-f9aa-478e-9ede-example</RequestID></Response>"
        )
    }

    #[test]
    fn run_instances_maps_to_a_node_handle() {
        let got = parse_run_instances(RUN).unwrap();
        assert_eq!(got.len(), 1);
        let i = &got[0];
        assert_eq!(i.id, "i-0598c7d356eba48d7");
        assert_eq!(i.state, "pending");
        assert_eq!(i.tags.len(), 5, "only the instance's own tags");
        assert_eq!(i.tag("empty"), Some(""));
        let h = i.to_handle();
        assert_eq!(h.provider_id, "i-0598c7d356eba48d7");
        assert_eq!(
            h.address.as_deref(),
            Some("10.0.0.157"),
            "private IP without a public one"
        );
        assert_eq!(h.zone.as_deref(), Some("us-east-1b"));
        assert_eq!(h.capacity_type, CapacityType::Spot);
        assert_eq!(h.join_state, JoinState::Provisioning);
        assert_eq!(h.instance_type.as_deref(), Some("g4dn.xlarge"));
        assert_eq!(h.labels.len(), 4, "aws: tags are left out: {:?}", h.labels);
        assert_eq!(h.labels["wasmprov-owner"], "host-a");
        assert_eq!(h.labels["Name"], "wasmprov-req-1");
    }

    #[test]
    fn describe_instances_reads_every_reservation_and_the_next_token() {
        let (got, next) = parse_describe_instances(DESCRIBE).unwrap();
        let ids: Vec<&str> = got.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["i-1111", "i-2222", "i-3333"]);
        assert_eq!(next.as_deref(), Some("eyJ2IjoiMiIsImMiOiJ0b2tlbiJ9"));
        let h = got[0].to_handle();
        assert_eq!(h.address.as_deref(), Some("203.0.113.7"), "public IP first");
        assert_eq!(h.capacity_type, CapacityType::OnDemand);
        assert_eq!(h.join_state, JoinState::Joining);
        assert!(got[1].is_terminated());
        assert_eq!(got[2].to_handle().join_state, JoinState::Failed);
        assert_eq!(got[2].to_handle().address, None);

        let empty = r#"<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>x</requestId><reservationSet/></DescribeInstancesResponse>"#;
        assert_eq!(parse_describe_instances(empty).unwrap(), (vec![], None));
    }

    #[test]
    fn wrong_or_broken_bodies_are_transport_errors() {
        for body in ["", "not xml", "<a><b></a>", RUN] {
            assert!(
                matches!(parse_describe_instances(body), Err(Error::Transport(_))),
                "{body}"
            );
        }
        assert!(matches!(
            parse_run_instances(DESCRIBE),
            Err(Error::Transport(_))
        ));
        let no_id = "<RunInstancesResponse><instancesSet><item><instanceType>t3.micro</instanceType></item></instancesSet></RunInstancesResponse>";
        assert!(matches!(
            parse_run_instances(no_id),
            Err(Error::Transport(_))
        ));
    }

    /// `DescribeInstanceTypes` as EC2 answers it (abridged from the API
    /// reference and moto's data): a GPU type, a Graviton type, a type that
    /// also runs i386, a Mac type and a type with two kinds of GPUs.
    const TYPES: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeInstanceTypesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>x</requestId>
  <instanceTypeSet>
    <item>
      <instanceType>g5.xlarge</instanceType>
      <processorInfo><supportedArchitectures><item>x86_64</item></supportedArchitectures><manufacturer>AMD</manufacturer></processorInfo>
      <vCpuInfo><defaultVCpus>4</defaultVCpus><defaultCores>2</defaultCores></vCpuInfo>
      <memoryInfo><sizeInMiB>16384</sizeInMiB></memoryInfo>
      <gpuInfo><gpus><item><name>A10G</name><manufacturer>NVIDIA</manufacturer><count>1</count><memoryInfo><sizeInMiB>22888</sizeInMiB></memoryInfo></item></gpus><totalGpuMemoryInMiB>22888</totalGpuMemoryInMiB></gpuInfo>
    </item>
    <item>
      <instanceType>t4g.medium</instanceType>
      <processorInfo><supportedArchitectures><item>arm64</item></supportedArchitectures></processorInfo>
      <vCpuInfo><defaultVCpus>2</defaultVCpus></vCpuInfo>
      <memoryInfo><sizeInMiB>4096</sizeInMiB></memoryInfo>
    </item>
    <item>
      <instanceType>t2.micro</instanceType>
      <processorInfo><supportedArchitectures><item>i386</item><item>x86_64</item></supportedArchitectures></processorInfo>
      <vCpuInfo><defaultVCpus>1</defaultVCpus></vCpuInfo>
      <memoryInfo><sizeInMiB>1024</sizeInMiB></memoryInfo>
    </item>
    <item>
      <instanceType>mac2.metal</instanceType>
      <processorInfo><supportedArchitectures><item>arm64_mac</item></supportedArchitectures></processorInfo>
      <vCpuInfo><defaultVCpus>12</defaultVCpus></vCpuInfo>
      <memoryInfo><sizeInMiB>16384</sizeInMiB></memoryInfo>
    </item>
    <item>
      <instanceType>g4ad.2xlarge</instanceType>
      <processorInfo><supportedArchitectures><item>x86_64</item></supportedArchitectures></processorInfo>
      <vCpuInfo><defaultVCpus>8</defaultVCpus></vCpuInfo>
      <memoryInfo><sizeInMiB>32768</sizeInMiB></memoryInfo>
      <gpuInfo><gpus><item><name>Radeon Pro V520</name><manufacturer>AMD</manufacturer><count>1</count></item><item><name>Radeon Pro V520</name><manufacturer>AMD</manufacturer><count>1</count></item></gpus></gpuInfo>
    </item>
    <item><vCpuInfo><defaultVCpus>2</defaultVCpus></vCpuInfo></item>
  </instanceTypeSet>
  <nextToken>page-2</nextToken>
</DescribeInstanceTypesResponse>"#;

    #[test]
    fn instance_types_carry_cpu_memory_arch_and_gpus() {
        let (types, next) = parse_instance_types(TYPES).unwrap();
        assert_eq!(next.as_deref(), Some("page-2"));
        let names: Vec<&str> = types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "g5.xlarge",
                "t4g.medium",
                "t2.micro",
                "mac2.metal",
                "g4ad.2xlarge"
            ],
            "an item without a name is left out"
        );
        assert_eq!(
            types[0],
            TypeInfo {
                name: "g5.xlarge".into(),
                vcpu: 4,
                memory_mib: 16384,
                arch: Some(Arch::X86_64),
                gpu: 1,
                gpu_vendor: Some("nvidia".into()),
                gpu_model: Some("nvidia-a10g".into()),
                gpu_memory_mib: Some(22888),
            },
            "the GPU's own memoryInfo is not the type's"
        );
        assert_eq!(types[1].arch, Some(Arch::Arm64));
        assert_eq!((types[1].gpu, types[1].gpu_model.as_deref()), (0, None));
        assert_eq!(types[2].arch, Some(Arch::X86_64), "i386 is skipped");
        assert_eq!(types[3].arch, None, "Mac architectures are not launched");
        assert_eq!(types[4].gpu, 2, "counts add up");
        assert_eq!(types[4].gpu_vendor.as_deref(), Some("amd"));
        assert_eq!(types[4].gpu_model.as_deref(), Some("amd-radeon-pro-v520"));

        let none =
            r#"<DescribeInstanceTypesResponse><instanceTypeSet/></DescribeInstanceTypesResponse>"#;
        assert_eq!(parse_instance_types(none).unwrap(), (vec![], None));
        assert!(matches!(
            parse_instance_types(DESCRIBE),
            Err(Error::Transport(_))
        ));
    }

    #[test]
    fn gpu_models_are_vendor_dash_name() {
        let cases = [
            (Some("NVIDIA"), "A10G", "nvidia-a10g"),
            (Some("NVIDIA"), "T4", "nvidia-t4"),
            (Some("NVIDIA"), "T4g", "nvidia-t4g"),
            (Some("AMD"), "Radeon Pro V520", "amd-radeon-pro-v520"),
            (Some("AMD"), "  Radeon   Pro V520 ", "amd-radeon-pro-v520"),
            (Some("NVIDIA"), "NVIDIA H100", "nvidia-h100"),
            (Some("Habana"), "Gaudi HL-205", "habana-gaudi-hl-205"),
            (Some(""), "L4", "l4"),
            (None, "L4", "l4"),
        ];
        for (vendor, name, want) in cases {
            assert_eq!(gpu_model(vendor, name), want, "{vendor:?} {name}");
        }
    }

    #[test]
    fn images_name_their_root_device_and_snapshot_size() {
        let images = r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeImagesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>x</requestId>
  <imagesSet>
    <item>
      <imageId>ami-0abc</imageId>
      <architecture>x86_64</architecture>
      <rootDeviceType>ebs</rootDeviceType>
      <rootDeviceName>/dev/xvda</rootDeviceName>
      <blockDeviceMapping>
        <item><deviceName>/dev/sdb</deviceName><virtualName>ephemeral0</virtualName></item>
        <item><deviceName>/dev/xvda</deviceName><ebs><snapshotId>snap-1</snapshotId><volumeSize>8</volumeSize><deleteOnTermination>true</deleteOnTermination><volumeType>gp3</volumeType></ebs></item>
      </blockDeviceMapping>
    </item>
    <item>
      <imageId>ami-0store</imageId>
      <rootDeviceType>instance-store</rootDeviceType>
      <rootDeviceName>/dev/sda1</rootDeviceName>
    </item>
  </imagesSet>
</DescribeImagesResponse>"#;
        assert_eq!(
            parse_root_device(images, "ami-0abc").unwrap(),
            Some(RootDevice {
                name: "/dev/xvda".into(),
                kind: "ebs".into(),
                snapshot_gib: Some(8),
            })
        );
        assert_eq!(
            parse_root_device(images, "ami-0store").unwrap(),
            Some(RootDevice {
                name: "/dev/sda1".into(),
                kind: "instance-store".into(),
                snapshot_gib: None,
            })
        );
        assert_eq!(parse_root_device(images, "ami-0other").unwrap(), None);
        let nameless = "<DescribeImagesResponse><imagesSet><item><imageId>ami-1</imageId></item></imagesSet></DescribeImagesResponse>";
        assert_eq!(parse_root_device(nameless, "ami-1").unwrap(), None);
        assert!(matches!(
            parse_root_device(RUN, "ami-0abc"),
            Err(Error::Transport(_))
        ));
    }

    #[test]
    fn spot_history_is_read_and_the_lowest_price_per_type_kept() {
        let spot = r#"<DescribeSpotPriceHistoryResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><spotPriceHistorySet>
<item><instanceType>g5.xlarge</instanceType><productDescription>Linux/UNIX</productDescription><spotPrice>0.412300</spotPrice><timestamp>2025-06-01T10:00:00.000Z</timestamp><availabilityZone>us-east-1a</availabilityZone></item>
<item><instanceType>g5.xlarge</instanceType><productDescription>Linux/UNIX</productDescription><spotPrice>0.398100</spotPrice><timestamp>2025-06-01T10:00:00.000Z</timestamp><availabilityZone>us-east-1c</availabilityZone></item>
<item><instanceType>t4g.medium</instanceType><productDescription>Linux/UNIX</productDescription><spotPrice>0.0101</spotPrice><availabilityZone>us-east-1b</availabilityZone></item>
<item><instanceType>g5.xlarge</instanceType><spotPrice>0.5</spotPrice><availabilityZone>us-east-1d</availabilityZone></item>
<item><instanceType>t4g.medium</instanceType><spotPrice>oops</spotPrice></item>
<item><instanceType>t4g.medium</instanceType><spotPrice>-1</spotPrice></item>
<item><instanceType>t4g.medium</instanceType><spotPrice>NaN</spotPrice></item>
</spotPriceHistorySet><nextToken/></DescribeSpotPriceHistoryResponse>"#;
        let (prices, next) = parse_spot_prices(spot).unwrap();
        assert_eq!(next, None, "an empty nextToken is the last page");
        assert_eq!(prices.len(), 4, "unusable prices are left out");
        assert_eq!(
            prices[0],
            SpotPrice {
                zone: "us-east-1a".into(),
                instance_type: "g5.xlarge".into(),
                usd: 0.4123
            }
        );
        let lowest = lowest_spot_prices(&prices);
        assert_eq!(
            lowest,
            BTreeMap::from([
                ("g5.xlarge".to_string(), 0.3981),
                ("t4g.medium".into(), 0.0101)
            ])
        );
        assert!(lowest_spot_prices(&[]).is_empty());
        let paged = "<DescribeSpotPriceHistoryResponse><spotPriceHistorySet/><nextToken>more</nextToken></DescribeSpotPriceHistoryResponse>";
        assert_eq!(
            parse_spot_prices(paged).unwrap(),
            (vec![], Some("more".into()))
        );
    }

    #[test]
    fn state_table() {
        let table = [
            ("pending", JoinState::Provisioning),
            ("running", JoinState::Joining),
            ("shutting-down", JoinState::Failed),
            ("terminated", JoinState::Failed),
            ("stopping", JoinState::Failed),
            ("stopped", JoinState::Failed),
            ("", JoinState::Provisioning),
            ("something-new", JoinState::Provisioning),
        ];
        for (state, want) in table {
            assert_eq!(join_state(state), want, "{state}");
        }
    }

    #[test]
    fn error_table() {
        let cases: &[(u16, &str, bool, &str)] = &[
            (500, "InsufficientInstanceCapacity", false, "capacity"),
            (500, "InsufficientCapacityOnHost", false, "capacity"),
            (400, "InsufficientHostCapacity", false, "capacity"),
            (400, "SpotMaxPriceTooLow", false, "capacity"),
            (400, "MaxSpotInstanceCountExceeded", false, "quota"),
            (400, "InstanceLimitExceeded", false, "quota"),
            (400, "VcpuLimitExceeded", false, "quota"),
            (503, "RequestLimitExceeded", false, "rate_limited"),
            (400, "Throttling", false, "rate_limited"),
            (503, "Unavailable", false, "rate_limited"),
            (401, "AuthFailure", false, "auth"),
            (403, "UnauthorizedOperation", false, "auth"),
            (403, "SignatureDoesNotMatch", false, "auth"),
            (403, "InvalidClientTokenId", false, "auth"),
            (403, "IncompleteSignature", false, "auth"),
            (400, "RequestExpired", false, "auth"),
            (400, "OptInRequired", false, "auth"),
            (400, "InvalidInstanceID.NotFound", false, "not_found"),
            (400, "InvalidInstanceID.Malformed", false, "not_found"),
            (400, "InvalidAMIID.NotFound", false, "invalid_config"),
            (400, "InvalidAMIID.Malformed", false, "invalid_config"),
            (400, "InvalidSubnetID.NotFound", false, "invalid_config"),
            (400, "InvalidGroup.NotFound", false, "invalid_config"),
            (400, "InvalidKeyPair.NotFound", false, "invalid_config"),
            (400, "InvalidParameterValue", false, "invalid_config"),
            (400, "InvalidInstanceType", false, "unsupported"),
            (400, "Unsupported", false, "unsupported"),
            (400, "Unsupported", true, "capacity"),
            (500, "InternalError", false, "transport"),
            (503, "SomethingNew", false, "rate_limited"),
            (502, "SomethingNew", false, "transport"),
            (403, "SomethingNew", false, "auth"),
            (429, "SomethingNew", false, "rate_limited"),
            (400, "IdempotentParameterMismatch", false, "conflict"),
            (400, "SomethingNew", false, "other"),
        ];
        for (status, code, zone, kind) in cases {
            let f = ApiFailure::from_response(&response(*status, &[], &ec2_error(code)));
            assert_eq!(f.code, *code);
            assert_eq!(f.message, format!("{code} happened"));
            let e = f.into_error(*zone);
            assert_eq!(e.kind(), *kind, "{status} {code}: {e}");
            assert!(e.to_string().contains(&format!("{code} happened")), "{e}");
        }
    }

    #[test]
    fn capacity_scopes() {
        let scope = |code: &str, zone: bool| match ApiFailure::from_response(&response(
            500,
            &[],
            &ec2_error(code),
        ))
        .into_error(zone)
        {
            Error::Capacity { scope, .. } => scope,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            scope("InsufficientInstanceCapacity", false),
            CapacityScope::InstanceType
        );
        assert_eq!(
            scope("InsufficientInstanceCapacity", true),
            CapacityScope::Zone
        );
        assert_eq!(scope("InsufficientHostCapacity", true), CapacityScope::Zone);
        assert_eq!(scope("SpotMaxPriceTooLow", true), CapacityScope::Group);
        assert_eq!(scope("Unsupported", true), CapacityScope::Zone);
    }

    /// An instance with two interfaces, a secondary private IP and IPv6,
    /// as moto and EC2 describe it (abridged).
    const NETWORKED: &str = r#"<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15"><reservationSet><item><instancesSet><item>
      <instanceId>i-6cb73c0214ffee780</instanceId><instanceState><name>running</name></instanceState>
      <privateDnsName>ip-172-31-0-4.ec2.internal</privateDnsName><subnetId>subnet-ff67</subnetId>
      <privateIpAddress>172.31.0.4</privateIpAddress>
      <networkInterfaceSet>
        <item><attachment><deviceIndex>1</deviceIndex></attachment><networkInterfaceId>eni-second</networkInterfaceId>
          <privateIpAddressesSet><item><primary>true</primary><privateIpAddress>172.31.9.9</privateIpAddress></item></privateIpAddressesSet></item>
        <item><attachment><deviceIndex>0</deviceIndex></attachment><networkInterfaceId>eni-first</networkInterfaceId>
          <ipv6AddressesSet><item><ipv6Address>2600:1f18::2</ipv6Address></item><item><ipv6Address>2600:1f18::1</ipv6Address><isPrimaryIpv6>true</isPrimaryIpv6></item></ipv6AddressesSet>
          <privateIpAddressesSet><item><primary>true</primary><privateIpAddress>172.31.0.4</privateIpAddress></item>
            <item><primary>false</primary><privateIpAddress>172.31.0.99</privateIpAddress></item></privateIpAddressesSet></item>
      </networkInterfaceSet>
    </item></instancesSet></item></reservationSet></DescribeInstancesResponse>"#;

    #[test]
    fn interfaces_ipv6_and_host_names() {
        let (instances, _) = parse_describe_instances(NETWORKED).unwrap();
        let i = &instances[0];
        let eni = i.primary_interface().unwrap();
        assert_eq!(eni.id, "eni-first");
        assert!(eni.has_secondary("172.31.0.99") && !eni.has_secondary("172.31.0.4"));
        assert!(eni.has_primary("172.31.0.4") && !eni.has_primary("172.31.0.99"));
        assert_eq!(i.subnet_id.as_deref(), Some("subnet-ff67"));
        let h = i.to_handle();
        assert_eq!(h.ipv6_address.as_deref(), Some("2600:1f18::1"));
        assert_eq!(h.hostname.as_deref(), Some("ip-172-31-0-4.ec2.internal"));
        // EC2's own instance-level ipv6Address wins.
        let top = NETWORKED.replace(
            "<subnetId>",
            "<ipv6Address>2600:1f18::7</ipv6Address><subnetId>",
        );
        let (instances, _) = parse_describe_instances(&top).unwrap();
        assert_eq!(instances[0].ipv6().as_deref(), Some("2600:1f18::7"));
        assert_eq!(Instance::default().to_handle().ipv6_address, None);
    }

    #[test]
    fn addresses_target_health_and_subnets() {
        let eips = parse_addresses(r#"<DescribeAddressesResponse><addressesSet><item><allocationId>eipalloc-1</allocationId><associationId>eipassoc-1</associationId><networkInterfaceId>eni-first</networkInterfaceId><tagSet><item><key>wasmprov-owner</key><value>o1</value></item></tagSet><instanceId>i-1</instanceId><publicIp>127.216.189.213</publicIp></item><item><publicIp>198.51.100.1</publicIp></item></addressesSet></DescribeAddressesResponse>"#).unwrap();
        assert_eq!(eips.len(), 2);
        assert_eq!(eips[0].allocation_id.as_deref(), Some("eipalloc-1"));
        assert_eq!(eips[0].association_id.as_deref(), Some("eipassoc-1"));
        assert_eq!(eips[0].instance_id.as_deref(), Some("i-1"));
        assert_eq!(eips[0].tags, [("wasmprov-owner".into(), "o1".into())]);
        assert_eq!(eips[1].instance_id, None);
        assert_eq!(
            parse_allocate_address("<AllocateAddressResponse><allocationId>eipalloc-2</allocationId><publicIp>198.51.100.2</publicIp></AllocateAddressResponse>").unwrap(),
            ("198.51.100.2".to_string(), "eipalloc-2".to_string())
        );
        assert!(parse_allocate_address("<AllocateAddressResponse/>").is_err());
        assert_eq!(
            parse_assigned_private_ips("<AssignPrivateIpAddressesResponse><assignedPrivateIpAddressesSet><item><privateIpAddress>10.0.0.7</privateIpAddress></item></assignedPrivateIpAddressesSet></AssignPrivateIpAddressesResponse>").unwrap(),
            ["10.0.0.7"]
        );
        let targets = parse_target_health(r#"<DescribeTargetHealthResponse xmlns="http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/"><DescribeTargetHealthResult><TargetHealthDescriptions><member><Target><Id>i-1</Id><Port>6443</Port></Target><TargetHealth><State>healthy</State></TargetHealth></member><member><Target><Id>i-2</Id></Target><TargetHealth><State>draining</State></TargetHealth></member></TargetHealthDescriptions></DescribeTargetHealthResult></DescribeTargetHealthResponse>"#).unwrap();
        assert_eq!(
            targets,
            [
                TargetHealth {
                    id: "i-1".into(),
                    port: Some(6443),
                    state: Some("healthy".into())
                },
                TargetHealth {
                    id: "i-2".into(),
                    port: None,
                    state: Some("draining".into())
                },
            ]
        );
        assert!(expect_response("<RegisterTargetsResponse/>", "RegisterTargets").is_ok());
        assert!(expect_response("<Other/>", "RegisterTargets").is_err());
        let (subnets, _) = parse_subnets("<DescribeSubnetsResponse><subnetSet><item><subnetId>subnet-1</subnetId><availabilityZone>us-east-1a</availabilityZone><availableIpAddressCount>4091</availableIpAddressCount><cidrBlock>172.31.0.0/20</cidrBlock></item></subnetSet></DescribeSubnetsResponse>").unwrap();
        assert_eq!(subnets[0].free, 4091);
        assert_eq!(subnets[0].total_addresses(), Some(4096 - 5));
        let total = |cidr: &str| {
            Subnet {
                cidr: Some(cidr.into()),
                ..Subnet::default()
            }
            .total_addresses()
        };
        assert_eq!(total("10.0.0.0/28"), Some(11));
        assert_eq!(total("10.0.0.0/16"), Some(65_531));
        assert_eq!(total("10.0.0.0/33"), None);
        assert_eq!(total("10.0.0.0"), None);
    }

    #[test]
    fn address_and_target_group_errors() {
        for (code, kind) in [
            ("InvalidAddress.NotFound", "not_found"),
            ("InvalidAllocationID.NotFound", "not_found"),
            ("TargetGroupNotFound", "not_found"),
            ("AddressLimitExceeded", "quota"),
        ] {
            let f = ApiFailure::from_response(&response(400, &[], &ec2_error(code)));
            assert_eq!(f.into_error(false).kind(), kind, "{code}");
        }
        let elb = r#"<ErrorResponse xmlns="http://elasticloadbalancing.amazonaws.com/doc/2015-12-01/"><Error><Type>Sender</Type><Code>TargetGroupNotFound</Code><Message>One or more target groups not found</Message></Error></ErrorResponse>"#;
        let f = ApiFailure::from_response(&response(400, &[], elb));
        assert_eq!(f.code, "TargetGroupNotFound");
        assert_eq!(f.into_error(false).kind(), "not_found");
    }

    #[test]
    fn other_error_envelopes_and_plain_bodies() {
        let sts = r#"<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>InvalidClientTokenId</Code><Message>The security token included in the request is invalid.</Message></Error><RequestId>x</RequestId></ErrorResponse>"#;
        let f = ApiFailure::from_response(&response(403, &[], sts));
        assert_eq!(f.code, "InvalidClientTokenId");
        assert!(matches!(f.into_error(false), Error::Auth(_)));

        let cases: &[(u16, &str, &str)] = &[
            (401, "", "auth"),
            (403, "<html>Forbidden</html>", "auth"),
            (429, "slow down", "rate_limited"),
            (503, "", "rate_limited"),
            (500, "", "transport"),
            (502, "<html>Bad Gateway</html>", "transport"),
            (400, "nope", "other"),
        ];
        for (status, body, kind) in cases {
            let f = ApiFailure::from_response(&response(*status, &[], body));
            assert_eq!(f.code, "");
            assert_eq!(f.into_error(false).kind(), *kind, "{status} {body}");
        }
        let long = "x".repeat(10_000);
        assert!(
            ApiFailure::from_response(&response(502, &[], &long))
                .message
                .len()
                <= SNIPPET
        );
    }

    #[test]
    fn rate_limits_carry_retry_after() {
        let retry =
            |status: u16, headers: &[(&str, &str)], body: &str| match ApiFailure::from_response(
                &response(status, headers, body),
            )
            .into_error(false)
            {
                Error::RateLimited { retry_after_ms, .. } => retry_after_ms,
                other => panic!("{other:?}"),
            };
        let throttled = ec2_error("RequestLimitExceeded");
        assert_eq!(retry(503, &[("Retry-After", "3")], &throttled), Some(3_000));
        assert_eq!(retry(503, &[], &throttled), None);
        assert_eq!(retry(429, &[("retry-after", "1")], ""), Some(1_000));
    }
}
