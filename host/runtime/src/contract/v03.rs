//! Contract 0.3.0: the WIT types of the current contract to and from the
//! Rust types, field for field, `networking` included. No rule is decided
//! here (`answers` checks what a plugin says).

use wasmprov_api::{
    AddressKind, AddressRequest, Arch, CapacityScope, CapacityType, JoinState, Labels, NodeHandle,
    NodeShape, NodeStatus, Offering, PriceHint, ProvisionRequest, ProvisionerError, StableAddress,
    SubnetCapacity, Target,
};

use crate::bindings::v03::types as w;
use crate::bindings::v03_net::networking as n;

pub(crate) fn capacity_to_wit(c: CapacityType) -> w::CapacityType {
    match c {
        CapacityType::OnDemand => w::CapacityType::OnDemand,
        CapacityType::Spot => w::CapacityType::Spot,
    }
}

pub(crate) fn capacity(c: w::CapacityType) -> CapacityType {
    match c {
        w::CapacityType::OnDemand => CapacityType::OnDemand,
        w::CapacityType::Spot => CapacityType::Spot,
    }
}

fn arch_to_wit(a: Arch) -> w::Arch {
    match a {
        Arch::X86_64 => w::Arch::X8664,
        Arch::Arm64 => w::Arch::Arm64,
    }
}

fn arch(a: w::Arch) -> Arch {
    match a {
        w::Arch::X8664 => Arch::X86_64,
        w::Arch::Arm64 => Arch::Arm64,
    }
}

pub(crate) fn shape_to_wit(s: &NodeShape) -> w::NodeShape {
    w::NodeShape {
        cpu: s.cpu,
        memory_bytes: s.memory_bytes,
        gpu: s.gpu,
        gpu_vendor: s.gpu_vendor.clone(),
        gpu_model: s.gpu_model.clone(),
        arch: s.arch.map(arch_to_wit),
        disk_bytes: s.disk_bytes,
        labels: labels_to_wit(&s.labels),
        zone: s.zone.clone(),
        capacity_type: capacity_to_wit(s.capacity_type),
        instance_type: s.instance_type.clone(),
    }
}

pub(crate) fn labels_to_wit(labels: &Labels) -> w::Labels {
    labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

pub(crate) fn request_to_wit(owner_id: &str, r: &ProvisionRequest) -> w::ProvisionRequest {
    w::ProvisionRequest {
        request_id: r.request_id.clone(),
        owner_id: owner_id.to_string(),
        shape: shape_to_wit(&r.shape),
        boot: w::BootData {
            image: r.boot.image.clone(),
            user_data: r.boot.user_data.clone(),
            ssh_keys: r.boot.ssh_keys.clone(),
        },
        subnet: r.subnet.clone(),
    }
}

pub(crate) fn price(h: w::PriceEstimate) -> PriceHint {
    PriceHint {
        hourly_usd: h.hourly_usd,
        capacity_type: capacity(h.capacity_type),
        instance_type: h.instance_type,
    }
}

pub(crate) fn handle(h: w::NodeHandle) -> NodeHandle {
    NodeHandle {
        provider_id: h.provider_id,
        status: match h.status {
            w::NodeStatus::Pending => NodeStatus::Pending,
            w::NodeStatus::Running => NodeStatus::Running,
            w::NodeStatus::Stopping => NodeStatus::Stopping,
            w::NodeStatus::Stopped => NodeStatus::Stopped,
            w::NodeStatus::Suspending => NodeStatus::Suspending,
            w::NodeStatus::Suspended => NodeStatus::Suspended,
            w::NodeStatus::Deleting => NodeStatus::Deleting,
            w::NodeStatus::Deleted => NodeStatus::Deleted,
            w::NodeStatus::Repairing => NodeStatus::Repairing,
            w::NodeStatus::Unknown => NodeStatus::Unknown,
        },
        raw_state: h.raw_state,
        created_at_ms: h.created_at_ms,
        address: h.address,
        private_address: h.private_address,
        public_address: h.public_address,
        arch: h.arch.map(arch),
        gpu_model: h.gpu_model,
        zone: h.zone,
        capacity_type: capacity(h.capacity_type),
        join_state: match h.join_state {
            w::JoinState::Provisioning => JoinState::Provisioning,
            w::JoinState::Booting => JoinState::Booting,
            w::JoinState::Joining => JoinState::Joining,
            w::JoinState::Joined => JoinState::Joined,
            w::JoinState::Failed => JoinState::Failed,
        },
        instance_type: h.instance_type,
        labels: h.labels.into_iter().collect(),
        ipv6_address: h.ipv6_address,
        hostname: h.hostname,
    }
}

pub(crate) fn offering(o: w::Offering) -> Offering {
    Offering {
        instance_type: o.instance_type,
        cpu: o.cpu,
        memory_bytes: o.memory_bytes,
        gpu: o.gpu,
        gpu_vendor: o.gpu_vendor,
        gpu_model: o.gpu_model,
        arch: o.arch.map(arch),
        disk_bytes: o.disk_bytes,
        zones: o.zones,
        on_demand_usd: o.on_demand_usd,
        spot_usd: o.spot_usd,
    }
}

pub(crate) fn error(e: w::ProvisionError) -> ProvisionerError {
    match e {
        w::ProvisionError::Unsupported(m) => ProvisionerError::Unsupported(m),
        w::ProvisionError::Capacity(c) => ProvisionerError::Capacity {
            scope: match c.scope {
                w::CapacityScope::InstanceType => CapacityScope::InstanceType,
                w::CapacityScope::Zone => CapacityScope::Zone,
                w::CapacityScope::Group => CapacityScope::Group,
            },
            message: c.message,
        },
        w::ProvisionError::Quota(m) => ProvisionerError::Quota(m),
        w::ProvisionError::RateLimited(rl) => ProvisionerError::RateLimited {
            retry_after_ms: rl.retry_after_ms,
            message: rl.message,
        },
        w::ProvisionError::NotFound(m) => ProvisionerError::NotFound(m),
        w::ProvisionError::Auth(m) => ProvisionerError::Auth(m),
        w::ProvisionError::Transport(m) => ProvisionerError::Transport(m),
        w::ProvisionError::InvalidConfig(m) => ProvisionerError::InvalidConfig(m),
        w::ProvisionError::Conflict(m) => ProvisionerError::Conflict(m),
        w::ProvisionError::Other(m) => ProvisionerError::Other(m),
    }
}

fn kind_to_wit(k: AddressKind) -> n::AddressKind {
    match k {
        AddressKind::Private => n::AddressKind::Private,
        AddressKind::Public => n::AddressKind::Public,
    }
}

fn kind(k: n::AddressKind) -> AddressKind {
    match k {
        n::AddressKind::Private => AddressKind::Private,
        n::AddressKind::Public => AddressKind::Public,
    }
}

pub(crate) fn address_request_to_wit(r: &AddressRequest) -> n::AddressRequest {
    n::AddressRequest {
        kind: kind_to_wit(r.kind),
        address: r.address.clone(),
    }
}

pub(crate) fn stable_address(a: n::StableAddress) -> StableAddress {
    StableAddress {
        address: a.address,
        kind: kind(a.kind),
        resource_id: a.resource_id,
        provider_id: a.provider_id,
    }
}

pub(crate) fn target_to_wit(t: &Target) -> n::Target {
    n::Target {
        group: t.group.clone(),
        provider_id: t.provider_id.clone(),
        port: t.port,
        health: t.health.clone(),
    }
}

pub(crate) fn target(t: n::Target) -> Target {
    Target {
        group: t.group,
        provider_id: t.provider_id,
        port: t.port,
        health: t.health,
    }
}

pub(crate) fn subnet(s: n::SubnetAddresses) -> SubnetCapacity {
    SubnetCapacity {
        subnet: s.subnet,
        available_addresses: s.available_addresses,
        total_addresses: s.total_addresses,
        zone: s.zone,
    }
}
