//! Conversions between the generated WIT types and the SDK's Rust types, and
//! the generic export that drives a [`Provider`].

use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;

use crate::wit::exports::wasmprov::provisioner0_3_0::provisioner::Guest;
use crate::wit::wasmprov::provisioner0_3_0::types as w;
use crate::wit_net::exports::wasmprov::provisioner0_3_0::networking as n;
use crate::{
    AddressKind, AddressRequest, Arch, BootData, CapacityScope, CapacityType, Error, Export,
    JoinState, Labels, Networking, NodeHandle, NodeShape, NodeStatus, Offering, PriceHint,
    Provider, ProvisionRequest, StableAddress, SubnetCapacity, Target,
};

pub(crate) fn capacity_to_wit(c: CapacityType) -> w::CapacityType {
    match c {
        CapacityType::OnDemand => w::CapacityType::OnDemand,
        CapacityType::Spot => w::CapacityType::Spot,
    }
}

fn capacity_from_wit(c: w::CapacityType) -> CapacityType {
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

fn arch_from_wit(a: w::Arch) -> Arch {
    match a {
        w::Arch::X8664 => Arch::X86_64,
        w::Arch::Arm64 => Arch::Arm64,
    }
}

fn shape_from_wit(s: w::NodeShape) -> NodeShape {
    NodeShape {
        cpu: s.cpu,
        memory_bytes: s.memory_bytes,
        gpu: s.gpu,
        gpu_vendor: s.gpu_vendor,
        gpu_model: s.gpu_model,
        arch: s.arch.map(arch_from_wit),
        disk_bytes: s.disk_bytes,
        labels: s.labels.into_iter().collect(),
        zone: s.zone,
        capacity_type: capacity_from_wit(s.capacity_type),
        instance_type: s.instance_type,
    }
}

fn handle_to_wit(h: NodeHandle) -> w::NodeHandle {
    w::NodeHandle {
        provider_id: h.provider_id,
        status: match h.status {
            NodeStatus::Pending => w::NodeStatus::Pending,
            NodeStatus::Running => w::NodeStatus::Running,
            NodeStatus::Stopping => w::NodeStatus::Stopping,
            NodeStatus::Stopped => w::NodeStatus::Stopped,
            NodeStatus::Suspending => w::NodeStatus::Suspending,
            NodeStatus::Suspended => w::NodeStatus::Suspended,
            NodeStatus::Deleting => w::NodeStatus::Deleting,
            NodeStatus::Deleted => w::NodeStatus::Deleted,
            NodeStatus::Repairing => w::NodeStatus::Repairing,
            NodeStatus::Unknown => w::NodeStatus::Unknown,
        },
        raw_state: h.raw_state,
        created_at_ms: h.created_at_ms,
        private_address: h.private_address,
        public_address: h.public_address,
        arch: h.arch.map(arch_to_wit),
        gpu_model: h.gpu_model,
        address: h.address,
        zone: h.zone,
        capacity_type: capacity_to_wit(h.capacity_type),
        join_state: match h.join_state {
            JoinState::Provisioning => w::JoinState::Provisioning,
            JoinState::Booting => w::JoinState::Booting,
            JoinState::Joining => w::JoinState::Joining,
            JoinState::Joined => w::JoinState::Joined,
            JoinState::Failed => w::JoinState::Failed,
        },
        instance_type: h.instance_type,
        labels: h.labels.into_iter().collect(),
        ipv6_address: h.ipv6_address,
        hostname: h.hostname,
    }
}

fn offering_to_wit(o: Offering) -> w::Offering {
    w::Offering {
        instance_type: o.instance_type,
        cpu: o.cpu,
        memory_bytes: o.memory_bytes,
        gpu: o.gpu,
        gpu_vendor: o.gpu_vendor,
        gpu_model: o.gpu_model,
        arch: o.arch.map(arch_to_wit),
        disk_bytes: o.disk_bytes,
        zones: o.zones,
        on_demand_usd: o.on_demand_usd,
        spot_usd: o.spot_usd,
    }
}

fn error_to_wit(e: Error) -> w::ProvisionError {
    match e {
        Error::Unsupported(m) => w::ProvisionError::Unsupported(m),
        Error::Capacity { scope, message } => w::ProvisionError::Capacity(w::CapacityError {
            scope: match scope {
                CapacityScope::InstanceType => w::CapacityScope::InstanceType,
                CapacityScope::Zone => w::CapacityScope::Zone,
                CapacityScope::Group => w::CapacityScope::Group,
            },
            message,
        }),
        Error::Quota(m) => w::ProvisionError::Quota(m),
        Error::RateLimited {
            retry_after_ms,
            message,
        } => w::ProvisionError::RateLimited(w::RateLimitedError {
            retry_after_ms,
            message,
        }),
        Error::NotFound(m) => w::ProvisionError::NotFound(m),
        Error::Auth(m) => w::ProvisionError::Auth(m),
        Error::Transport(m) => w::ProvisionError::Transport(m),
        Error::InvalidConfig(m) => w::ProvisionError::InvalidConfig(m),
        Error::Conflict(m) => w::ProvisionError::Conflict(m),
        other => w::ProvisionError::Other(other.to_string()),
    }
}

thread_local! {
    /// This instance's provider, made by the first call that could make it.
    /// A component has one provider type; `Rc<dyn Any>` lets this one slot
    /// serve whichever it is.
    static PROVIDER: RefCell<Option<Rc<dyn Any>>> = const { RefCell::new(None) };
    /// The provider's capacity types, asked once per instance (a reused
    /// instance answers many price hints).
    static CAPACITY: std::cell::OnceCell<Vec<crate::CapacityType>> =
        const { std::cell::OnceCell::new() };
}

/// Runs `f` with the instance's provider, making it with
/// [`Provider::new`] when there is none yet. A failed `new` is not kept: the
/// next call tries again.
fn with_provider<T: Provider + 'static, R>(
    f: impl FnOnce(&T) -> Result<R, Error>,
) -> Result<R, Error> {
    let kept = PROVIDER.with_borrow(|p| p.clone().and_then(|p| p.downcast::<T>().ok()));
    let provider = match kept {
        Some(p) => p,
        None => {
            let p = Rc::new(T::new()?);
            PROVIDER.set(Some(p.clone()));
            p
        }
    };
    f(&provider)
}

/// A capacity type the provider does not offer (its
/// [`Provider::capacity_types`]) is `unsupported` before it sees the shape.
fn offers_capacity<T: Provider>(shape: &crate::NodeShape) -> Result<(), Error> {
    if CAPACITY.with(|c| {
        c.get_or_init(T::capacity_types)
            .contains(&shape.capacity_type)
    }) {
        return Ok(());
    }
    let offered = T::capacity_types();
    Err(Error::Unsupported(format!(
        "{} offers no {} capacity (it offers {})",
        T::NAME,
        shape.capacity_type,
        offered
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

impl<T: Provider + 'static> Guest for Export<T> {
    fn name() -> String {
        T::NAME.to_string()
    }

    fn capacity_types() -> Vec<w::CapacityType> {
        T::capacity_types()
            .into_iter()
            .map(capacity_to_wit)
            .collect()
    }

    fn price_hint(shape: w::NodeShape) -> Result<Option<w::PriceEstimate>, w::ProvisionError> {
        let shape = shape_from_wit(shape);
        offers_capacity::<T>(&shape).map_err(error_to_wit)?;
        with_provider(|p: &T| p.price_hint(&shape))
            .map(|hint| {
                hint.map(|h: PriceHint| w::PriceEstimate {
                    hourly_usd: h.hourly_usd,
                    capacity_type: capacity_to_wit(h.capacity_type),
                    instance_type: h.instance_type,
                })
            })
            .map_err(error_to_wit)
    }

    fn provision(request: w::ProvisionRequest) -> Result<w::NodeHandle, w::ProvisionError> {
        let owner = request.owner_id;
        let request = ProvisionRequest {
            request_id: request.request_id,
            shape: shape_from_wit(request.shape),
            boot: BootData {
                image: request.boot.image,
                user_data: request.boot.user_data,
                ssh_keys: request.boot.ssh_keys,
            },
            subnet: request.subnet,
        };
        // The ids become tags unchanged (`tags`), so a plugin never sees
        // one outside the syntax, whichever host called it.
        wasmprov_api::ids::check_owner_id(&owner).map_err(error_to_wit)?;
        wasmprov_api::ids::check_request_id(&request.request_id).map_err(error_to_wit)?;
        offers_capacity::<T>(&request.shape).map_err(error_to_wit)?;
        // Boot data the provider does not honour is refused, never dropped.
        let refused = T::BOOT.refused(&request.boot);
        if !refused.is_empty() {
            return Err(error_to_wit(Error::Unsupported(format!(
                "{} cannot honour boot data: {}",
                T::NAME,
                refused.join(", ")
            ))));
        }
        if let Some(subnet) = &request.subnet
            && !T::SUBNET
        {
            return Err(error_to_wit(Error::Unsupported(format!(
                "{} cannot place a node in a subnet ({subnet:?} asked)",
                T::NAME
            ))));
        }
        let node = with_provider(|p: &T| p.provision(&owner, &request)).map_err(error_to_wit)?;
        // The node of this request id was made for another request: the id
        // is being reused for something else.
        let digest = crate::tags::request_digest(&request);
        if let Some(found) = node.labels.get(crate::tags::REQUEST_DIGEST)
            && *found != digest
        {
            return Err(error_to_wit(Error::Conflict(format!(
                "request id {:?} was used for another request (node {} was made for shape and boot data with digest {found}; this request's is {digest}); choose a new request id",
                request.request_id, node.provider_id
            ))));
        }
        Ok(handle_to_wit(node))
    }

    fn terminate(owner_id: String, provider_id: String) -> Result<(), w::ProvisionError> {
        wasmprov_api::ids::check_owner_id(&owner_id).map_err(error_to_wit)?;
        with_provider(|p: &T| p.terminate(&owner_id, &provider_id)).map_err(error_to_wit)
    }

    fn describe(owner_id: String) -> Result<Vec<w::NodeHandle>, w::ProvisionError> {
        wasmprov_api::ids::check_owner_id(&owner_id).map_err(error_to_wit)?;
        with_provider(|p: &T| p.describe(&owner_id))
            .map(|nodes| nodes.into_iter().map(handle_to_wit).collect())
            .map_err(error_to_wit)
    }

    fn get(
        owner_id: String,
        provider_id: String,
    ) -> Result<Option<w::NodeHandle>, w::ProvisionError> {
        wasmprov_api::ids::check_owner_id(&owner_id).map_err(error_to_wit)?;
        with_provider(|p: &T| p.get(&owner_id, &provider_id))
            .map(|node| node.map(handle_to_wit))
            .map_err(error_to_wit)
    }

    fn offerings() -> Result<Vec<w::Offering>, w::ProvisionError> {
        with_provider(|p: &T| p.offerings())
            .map(|list| list.into_iter().map(offering_to_wit).collect())
            .map_err(error_to_wit)
    }

    fn set_labels(
        owner_id: String,
        provider_id: String,
        labels: w::Labels,
    ) -> Result<w::NodeHandle, w::ProvisionError> {
        wasmprov_api::ids::check_owner_id(&owner_id).map_err(error_to_wit)?;
        let labels: Labels = labels.into_iter().collect();
        // The ownership and request labels are never the caller's to
        // change, whichever host called.
        wasmprov_api::provenance::check_new_labels(&labels).map_err(error_to_wit)?;
        with_provider(|p: &T| p.set_labels(&owner_id, &provider_id, &labels))
            .map(handle_to_wit)
            .map_err(error_to_wit)
    }
}

fn kind_from_wit(k: n::AddressKind) -> AddressKind {
    match k {
        n::AddressKind::Private => AddressKind::Private,
        n::AddressKind::Public => AddressKind::Public,
    }
}

fn kind_to_wit(k: AddressKind) -> n::AddressKind {
    match k {
        AddressKind::Private => n::AddressKind::Private,
        AddressKind::Public => n::AddressKind::Public,
    }
}

fn target_from_wit(t: n::Target) -> Target {
    Target {
        group: t.group,
        provider_id: t.provider_id,
        port: t.port,
        health: t.health,
    }
}

fn target_to_wit(t: Target) -> n::Target {
    n::Target {
        group: t.group,
        provider_id: t.provider_id,
        port: t.port,
        health: t.health,
    }
}

impl<T: Networking + 'static> n::Guest for Export<T> {
    fn assign_address(
        owner_id: String,
        provider_id: String,
        request: n::AddressRequest,
    ) -> Result<n::StableAddress, w::ProvisionError> {
        wasmprov_api::ids::check_owner_id(&owner_id).map_err(error_to_wit)?;
        let request = AddressRequest {
            kind: kind_from_wit(request.kind),
            address: request.address,
        };
        with_provider(|p: &T| p.assign_address(&owner_id, &provider_id, &request))
            .map(|a: StableAddress| n::StableAddress {
                address: a.address,
                kind: kind_to_wit(a.kind),
                resource_id: a.resource_id,
                provider_id: a.provider_id,
            })
            .map_err(error_to_wit)
    }

    fn release_address(
        owner_id: String,
        provider_id: String,
        address: String,
    ) -> Result<(), w::ProvisionError> {
        wasmprov_api::ids::check_owner_id(&owner_id).map_err(error_to_wit)?;
        with_provider(|p: &T| p.release_address(&owner_id, &provider_id, &address))
            .map_err(error_to_wit)
    }

    fn register_target(owner_id: String, target: n::Target) -> Result<(), w::ProvisionError> {
        wasmprov_api::ids::check_owner_id(&owner_id).map_err(error_to_wit)?;
        let target = target_from_wit(target);
        with_provider(|p: &T| p.register_target(&owner_id, &target)).map_err(error_to_wit)
    }

    fn deregister_target(owner_id: String, target: n::Target) -> Result<(), w::ProvisionError> {
        wasmprov_api::ids::check_owner_id(&owner_id).map_err(error_to_wit)?;
        let target = target_from_wit(target);
        with_provider(|p: &T| p.deregister_target(&owner_id, &target)).map_err(error_to_wit)
    }

    fn list_targets(owner_id: String, group: String) -> Result<Vec<n::Target>, w::ProvisionError> {
        wasmprov_api::ids::check_owner_id(&owner_id).map_err(error_to_wit)?;
        with_provider(|p: &T| p.list_targets(&owner_id, &group))
            .map(|list| list.into_iter().map(target_to_wit).collect())
            .map_err(error_to_wit)
    }

    fn subnet_capacity(subnet: String) -> Result<n::SubnetAddresses, w::ProvisionError> {
        with_provider(|p: &T| p.subnet_capacity(&subnet))
            .map(|c: SubnetCapacity| n::SubnetAddresses {
                subnet: c.subnet,
                available_addresses: c.available_addresses,
                total_addresses: c.total_addresses,
                zone: c.zone,
            })
            .map_err(error_to_wit)
    }
}
