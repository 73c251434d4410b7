//! Between the wire and the library: protobuf messages to and from the
//! `wasmprov_api` / `wasmprov_fleet` types, and errors to gRPC statuses that
//! carry the contract's error kind in their metadata.

use std::time::Duration;

use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Status};
use wasmprov_api::{PluginFault, ProvisionerError};
use wasmprov_fleet::journal::{Event, EventKind, EventStatus, Intent, IntentState};
use wasmprov_fleet::{CapacityGroup, FleetError, ReconcileReport};

use super::{KIND_KEY, pb};

/// A status whose metadata names `kind`.
pub(super) fn with_kind(code: Code, message: String, kind: &'static str) -> Status {
    let mut meta = MetadataMap::new();
    meta.insert(KIND_KEY, MetadataValue::from_static(kind));
    Status::with_metadata(code, message, meta)
}

/// The gRPC status of a journaled operation's error: a plugin that is not
/// loaded is `NOT_FOUND` (`unknown_plugin`); a request id journaled for
/// another plugin or shape `ALREADY_EXISTS` (`conflict`); the plugin's own
/// error as [`status_of`] maps it; and a journal that could not be read or
/// written `INTERNAL` (`journal`).
/// `UNAVAILABLE` (kind `compiling`, retryable) when plugin `name` is not
/// loaded because its component is still compiling (`errors` are the
/// host's load errors): the call can succeed once the compile is done, so
/// it is no unknown plugin.
pub(super) fn compiling_status(errors: &[wasmprov_host::LoadError], name: &str) -> Option<Status> {
    errors.iter().find_map(|e| match e {
        wasmprov_host::LoadError::Compiling { plugin, .. } if plugin == name => Some(with_kind(
            Code::Unavailable,
            format!("{e}; ask again shortly"),
            "compiling",
        )),
        _ => None,
    })
}

pub(super) fn fleet_status(err: &FleetError) -> Status {
    match err {
        FleetError::UnknownPlugin(_) => {
            with_kind(Code::NotFound, err.to_string(), "unknown_plugin")
        }
        FleetError::Conflict { .. } => with_kind(Code::AlreadyExists, err.to_string(), "conflict"),
        FleetError::LeaseConflict { .. } => {
            with_kind(Code::AlreadyExists, err.to_string(), "conflict")
        }
        FleetError::Terminating(_) => {
            with_kind(Code::FailedPrecondition, err.to_string(), "terminating")
        }
        FleetError::NotJournaled(_) => with_kind(Code::NotFound, err.to_string(), "not_found"),
        FleetError::Closing => with_kind(Code::Unavailable, err.to_string(), "closing"),
        FleetError::Provisioner(e) => status_of(e),
        FleetError::Journal(e) => journal_status(e),
        other => with_kind(Code::Unknown, other.to_string(), "other"),
    }
}

/// `INTERNAL` (`journal`): the journal could not be read or written.
pub(super) fn journal_status(err: &anyhow::Error) -> Status {
    with_kind(Code::Internal, format!("journal: {err:#}"), "journal")
}

/// The gRPC status of a plugin's error. The code says what a generic gRPC
/// client should do; the metadata says exactly what happened:
///
/// | kind | code | why |
/// | --- | --- | --- |
/// | `not_found` | `NOT_FOUND` | |
/// | `rate_limited`, `quota`, `capacity` | `RESOURCE_EXHAUSTED` | something ran out; the kind says whether waiting (`rate_limited`), another type or zone (`capacity`) or a person (`quota`) helps |
/// | `transport` | `UNAVAILABLE` | the cloud could not be reached: retry |
/// | `not_sent` | `UNAVAILABLE` | nothing left the host (refused, no such name, TLS): nothing was made; retry |
/// | `auth` | `FAILED_PRECONDITION` | the *cloud's* credentials are wrong; not the caller's token, so not `UNAUTHENTICATED`/`PERMISSION_DENIED` |
/// | `invalid_config` | `FAILED_PRECONDITION` | the plugin's configuration needs fixing |
/// | `unsupported` | `INVALID_ARGUMENT` | the shape is not something this backend can do |
/// | `conflict` | `ALREADY_EXISTS` | the request id was used for another request |
/// | `plugin` (timeout) | `DEADLINE_EXCEEDED` | the call was stopped at the plugin's deadline |
/// | `plugin` (other faults) | `INTERNAL` | a bug in the plugin |
/// | `other` | `UNKNOWN` | |
pub(super) fn status_of(err: &ProvisionerError) -> Status {
    let mut meta = MetadataMap::new();
    meta.insert(KIND_KEY, MetadataValue::from_static(err.kind()));
    let code = match err {
        ProvisionerError::NotFound(_) => Code::NotFound,
        ProvisionerError::RateLimited { retry_after_ms, .. } => {
            if let Some(ms) = retry_after_ms {
                meta.insert("wasmprov-retry-after-ms", MetadataValue::from(*ms));
            }
            Code::ResourceExhausted
        }
        ProvisionerError::Capacity { scope, .. } => {
            let scope = match scope {
                wasmprov_api::CapacityScope::InstanceType => "instance_type",
                wasmprov_api::CapacityScope::Zone => "zone",
                wasmprov_api::CapacityScope::Group => "group",
            };
            meta.insert("wasmprov-capacity-scope", MetadataValue::from_static(scope));
            Code::ResourceExhausted
        }
        ProvisionerError::Quota(_) => Code::ResourceExhausted,
        ProvisionerError::Transport(_) | ProvisionerError::NotSent(_) => Code::Unavailable,
        ProvisionerError::Auth(_) | ProvisionerError::InvalidConfig(_) => Code::FailedPrecondition,
        ProvisionerError::Unsupported(_) => Code::InvalidArgument,
        ProvisionerError::Conflict(_) => Code::AlreadyExists,
        ProvisionerError::Plugin { fault, .. } => {
            meta.insert(
                "wasmprov-plugin-fault",
                MetadataValue::from_static(fault.as_str()),
            );
            if *fault == PluginFault::Timeout {
                Code::DeadlineExceeded
            } else {
                Code::Internal
            }
        }
        _ => Code::Unknown,
    };
    Status::with_metadata(code, err.to_string(), meta)
}

pub(super) fn capacity_to_pb(c: wasmprov_api::CapacityType) -> pb::CapacityType {
    match c {
        wasmprov_api::CapacityType::OnDemand => pb::CapacityType::OnDemand,
        wasmprov_api::CapacityType::Spot => pb::CapacityType::Spot,
    }
}

pub(super) fn capacity_from_pb(c: pb::CapacityType) -> wasmprov_api::CapacityType {
    match c {
        pb::CapacityType::Unspecified | pb::CapacityType::OnDemand => {
            wasmprov_api::CapacityType::OnDemand
        }
        pb::CapacityType::Spot => wasmprov_api::CapacityType::Spot,
    }
}

pub(super) fn shape_from_pb(
    shape: Option<pb::NodeShape>,
) -> std::result::Result<wasmprov_api::NodeShape, Status> {
    let shape = shape.ok_or_else(|| Status::invalid_argument("shape is required"))?;
    let capacity_type = pb::CapacityType::try_from(shape.capacity_type).map_err(|_| {
        Status::invalid_argument(format!(
            "shape.capacity_type {} is not a capacity type",
            shape.capacity_type
        ))
    })?;
    let arch = pb::Arch::try_from(shape.arch).map_err(|_| {
        Status::invalid_argument(format!("shape.arch {} is not an architecture", shape.arch))
    })?;
    let shape = wasmprov_api::NodeShape {
        cpu: shape.cpu,
        memory_bytes: shape.memory_bytes,
        gpu: shape.gpu,
        gpu_vendor: shape.gpu_vendor,
        gpu_model: shape.gpu_model,
        arch: arch_from_pb(arch),
        disk_bytes: shape.disk_bytes,
        labels: shape.labels.into_iter().collect(),
        zone: shape.zone,
        capacity_type: capacity_from_pb(capacity_type),
        instance_type: shape.instance_type,
    };
    // The contract's own rule (INVALID_ARGUMENT, kind `unsupported`).
    shape.validate().map_err(|e| status_of(&e))?;
    Ok(shape)
}

pub(super) fn arch_from_pb(a: pb::Arch) -> Option<wasmprov_api::Arch> {
    match a {
        pb::Arch::Unspecified => None,
        pb::Arch::X8664 => Some(wasmprov_api::Arch::X86_64),
        pb::Arch::Arm64 => Some(wasmprov_api::Arch::Arm64),
    }
}

pub(super) fn arch_to_pb(a: Option<wasmprov_api::Arch>) -> pb::Arch {
    match a {
        None => pb::Arch::Unspecified,
        Some(wasmprov_api::Arch::X86_64) => pb::Arch::X8664,
        Some(wasmprov_api::Arch::Arm64) => pb::Arch::Arm64,
    }
}

/// Boot data from the wire, checked against the contract's bounds
/// (INVALID_ARGUMENT, kind `unsupported`).
pub(super) fn boot_from_pb(
    boot: Option<pb::BootData>,
) -> std::result::Result<wasmprov_api::BootData, Status> {
    let boot = boot.map_or_else(wasmprov_api::BootData::default, |b| {
        wasmprov_api::BootData {
            image: b.image,
            user_data: b.user_data,
            ssh_keys: b.ssh_keys,
        }
    });
    boot.validate().map_err(|e| status_of(&e))?;
    Ok(boot)
}

pub(super) fn offering_to_pb(o: wasmprov_api::Offering) -> pb::Offering {
    pb::Offering {
        instance_type: o.instance_type,
        cpu: o.cpu,
        memory_bytes: o.memory_bytes,
        gpu: o.gpu,
        gpu_vendor: o.gpu_vendor,
        gpu_model: o.gpu_model,
        arch: arch_to_pb(o.arch).into(),
        disk_bytes: o.disk_bytes,
        zones: o.zones,
        on_demand_usd: o.on_demand_usd,
        spot_usd: o.spot_usd,
    }
}

pub(super) fn hint_to_pb(h: wasmprov_api::PriceHint) -> pb::PriceHint {
    pb::PriceHint {
        hourly_usd: h.hourly_usd,
        capacity_type: capacity_to_pb(h.capacity_type).into(),
        instance_type: h.instance_type,
    }
}

pub(super) fn node_to_pb(n: wasmprov_api::NodeHandle) -> pb::NodeHandle {
    use wasmprov_api::JoinState as J;
    let join_state = match n.join_state {
        J::Provisioning => pb::JoinState::Provisioning,
        J::Booting => pb::JoinState::Booting,
        J::Joining => pb::JoinState::Joining,
        J::Joined => pb::JoinState::Joined,
        J::Failed => pb::JoinState::Failed,
    };
    use wasmprov_api::NodeStatus as S;
    let status = match n.status {
        S::Pending => pb::NodeStatus::Pending,
        S::Running => pb::NodeStatus::Running,
        S::Stopping => pb::NodeStatus::Stopping,
        S::Stopped => pb::NodeStatus::Stopped,
        S::Suspending => pb::NodeStatus::Suspending,
        S::Suspended => pb::NodeStatus::Suspended,
        S::Deleting => pb::NodeStatus::Deleting,
        S::Deleted => pb::NodeStatus::Deleted,
        S::Repairing => pb::NodeStatus::Repairing,
        S::Unknown => pb::NodeStatus::Unknown,
    };
    pb::NodeHandle {
        provider_id: n.provider_id,
        address: n.address,
        zone: n.zone,
        capacity_type: capacity_to_pb(n.capacity_type).into(),
        join_state: join_state.into(),
        instance_type: n.instance_type,
        labels: n.labels.into_iter().collect(),
        status: status.into(),
        raw_state: n.raw_state,
        created_at_ms: n.created_at_ms,
        private_address: n.private_address,
        public_address: n.public_address,
        arch: arch_to_pb(n.arch).into(),
        gpu_model: n.gpu_model,
        ipv6_address: n.ipv6_address,
        hostname: n.hostname,
    }
}

/// A call to an interface the plugin lacks (or a cloud that cannot do it)
/// is a missing feature, not a bad argument: UNIMPLEMENTED, kind
/// `unsupported` (as `Offerings` without a catalogue).
pub(super) fn feature_status(err: &ProvisionerError) -> Status {
    match err {
        ProvisionerError::Unsupported(m) => {
            with_kind(Code::Unimplemented, m.clone(), "unsupported")
        }
        other => status_of(other),
    }
}

pub(super) fn kind_from_pb(kind: i32) -> Result<wasmprov_api::AddressKind, Status> {
    match pb::AddressKind::try_from(kind) {
        Ok(pb::AddressKind::Private) => Ok(wasmprov_api::AddressKind::Private),
        Ok(pb::AddressKind::Public) => Ok(wasmprov_api::AddressKind::Public),
        _ => Err(Status::invalid_argument(
            "kind is required: ADDRESS_KIND_PRIVATE or ADDRESS_KIND_PUBLIC",
        )),
    }
}

pub(super) fn address_to_pb(a: wasmprov_api::StableAddress) -> pb::StableAddress {
    let kind = match a.kind {
        wasmprov_api::AddressKind::Private => pb::AddressKind::Private,
        wasmprov_api::AddressKind::Public => pb::AddressKind::Public,
    };
    pb::StableAddress {
        address: a.address,
        kind: kind.into(),
        resource_id: a.resource_id,
        provider_id: a.provider_id,
    }
}

/// A name the caller gives (`what`: a provider id, target group, subnet),
/// by the rule every caller's name meets
/// (`wasmprov_api::network::name_fault`): INVALID_ARGUMENT, before any
/// plugin is asked.
pub(super) fn named(what: &str, value: &str) -> Result<(), Status> {
    match wasmprov_api::network::name_fault(what, value) {
        Some(why) => Err(Status::invalid_argument(why)),
        None => Ok(()),
    }
}

/// An address the caller gives `AssignAddress` (of `kind`) or
/// `ReleaseAddress` (no kind), by the rule the plugin's answer meets too
/// (`wasmprov_api::network::asked_address_fault`): INVALID_ARGUMENT.
pub(super) fn asked_address(
    kind: Option<wasmprov_api::AddressKind>,
    value: &str,
) -> Result<(), Status> {
    match wasmprov_api::network::asked_address_fault(kind, value) {
        Some(why) => Err(Status::invalid_argument(why)),
        None => Ok(()),
    }
}

pub(super) fn target_from_pb(t: Option<pb::Target>) -> Result<wasmprov_api::Target, Status> {
    let t = t.ok_or_else(|| Status::invalid_argument("target is required"))?;
    named("target group", &t.group)?;
    named("provider id", &t.provider_id)?;
    let port = t
        .port
        .map(|p| {
            u16::try_from(p).ok().filter(|p| *p > 0).ok_or_else(|| {
                Status::invalid_argument(format!("target.port {p} is not 1 to 65535"))
            })
        })
        .transpose()?;
    Ok(wasmprov_api::Target {
        group: t.group,
        provider_id: t.provider_id,
        port,
        health: None,
    })
}

pub(super) fn target_to_pb(t: wasmprov_api::Target) -> pb::Target {
    pb::Target {
        group: t.group,
        provider_id: t.provider_id,
        port: t.port.map(u32::from),
        health: t.health,
    }
}

pub(super) fn shape_to_pb(shape: wasmprov_api::NodeShape) -> pb::NodeShape {
    pb::NodeShape {
        cpu: shape.cpu,
        memory_bytes: shape.memory_bytes,
        gpu: shape.gpu,
        gpu_vendor: shape.gpu_vendor,
        labels: shape.labels.into_iter().collect(),
        zone: shape.zone,
        capacity_type: capacity_to_pb(shape.capacity_type).into(),
        instance_type: shape.instance_type,
        gpu_model: shape.gpu_model,
        arch: arch_to_pb(shape.arch).into(),
        disk_bytes: shape.disk_bytes,
    }
}

/// A lease in seconds, as a duration; 0 is refused (it would end at once).
pub(super) fn lease_from_pb(
    seconds: Option<u64>,
    field: &str,
) -> std::result::Result<Option<Duration>, Status> {
    match seconds {
        Some(0) => Err(Status::invalid_argument(format!(
            "{field} must be at least 1; leave it out for no lease"
        ))),
        s => Ok(s.map(Duration::from_secs)),
    }
}

pub(super) fn group_from_pb(
    group: Option<pb::CapacityGroup>,
) -> std::result::Result<CapacityGroup, Status> {
    let group = group.ok_or_else(|| Status::invalid_argument("group is required"))?;
    let group = CapacityGroup {
        name: group.name,
        shape: shape_from_pb(group.shape)
            .map_err(|s| Status::invalid_argument(format!("group.{}", s.message())))?,
        min: group.min,
        max: group.max,
        plugins: group.plugins,
        lease: lease_from_pb(group.lease_seconds, "group.lease_seconds")?,
        boot: boot_from_pb(group.boot)
            .map_err(|s| Status::invalid_argument(format!("group.{}", s.message())))?,
    };
    group
        .validate()
        .map_err(|e| Status::invalid_argument(format!("{e:#}")))?;
    Ok(group)
}

/// A group from ScaleRequest.alien_group_json (Alien's form only: its
/// `groupId` is required), validated.
pub(super) fn alien_group_from_json(json: &str) -> std::result::Result<CapacityGroup, Status> {
    let alien: wasmprov_fleet::alien::AlienGroup = serde_json::from_str(json).map_err(|e| {
        Status::invalid_argument(format!(
            "alien_group_json: not a capacity group in Alien's form: {e}"
        ))
    })?;
    CapacityGroup::try_from(alien)
        .map_err(|e| Status::invalid_argument(format!("alien_group_json: {e}")))
}

pub(super) fn pairs_to_pb(pairs: Vec<(String, String)>) -> Vec<pb::RequestNode> {
    pairs
        .into_iter()
        .map(|(request_id, provider_id)| pb::RequestNode {
            request_id,
            provider_id,
        })
        .collect()
}

pub(super) fn reconcile_to_pb(r: ReconcileReport) -> pb::ReconcileResponse {
    pb::ReconcileResponse {
        confirmed: pairs_to_pb(r.confirmed),
        resumed: pairs_to_pb(r.resumed),
        abandoned: r.abandoned,
        terminated: pairs_to_pb(r.terminated),
        expired: pairs_to_pb(r.expired),
        vanished: pairs_to_pb(r.vanished),
        leaks: r.leaks.into_iter().map(leak_to_pb).collect(),
        errors: r.errors,
        suspected: r.suspected.into_iter().map(leak_to_pb).collect(),
        orphans: r
            .orphans
            .into_iter()
            .map(|o| pb::Orphan {
                plugin: o.plugin,
                node: Some(node_to_pb(o.node)),
                kind: o.kind.as_str().to_string(),
                reason: o.reason,
            })
            .collect(),
        adopted: pairs_to_pb(r.adopted),
        foreign_answers: r
            .foreign_answers
            .into_iter()
            .map(|(plugin, count)| pb::ForeignAnswer {
                plugin,
                count: count as u64,
            })
            .collect(),
        held: r.held.map(|d| d.to_string()),
        held_back: r.held_back,
    }
}

fn leak_to_pb(l: wasmprov_fleet::Leak) -> pb::Leak {
    pb::Leak {
        plugin: l.plugin,
        node: Some(node_to_pb(l.node)),
        reason: l.reason,
        terminated: l.terminated,
    }
}

pub(super) fn member_to_pb(m: wasmprov_fleet::Member) -> pb::Member {
    pb::Member {
        plugin: m.plugin,
        request_id: m.request_id,
        provider_id: m.provider_id,
        hourly_usd: m.hourly_usd,
    }
}

pub(super) fn intent_to_pb(i: Intent, journal: &str) -> pb::Intent {
    let provenance = (i.born > 0).then(|| {
        wasmprov_api::provenance::Provenance {
            journal: journal.to_string(),
            generation: i.born,
        }
        .label_value()
    });
    let lease_seconds = i.lease().map(|ms| ms as f64 / 1000.0);
    let (state, provider_id) = match i.state {
        IntentState::Pending => (pb::IntentState::Pending, None),
        IntentState::Active { provider_id } => (pb::IntentState::Active, Some(provider_id)),
        IntentState::Terminating { provider_id } => {
            (pb::IntentState::Terminating, Some(provider_id))
        }
    };
    pb::Intent {
        request_id: i.request_id,
        plugin: i.plugin,
        shape: Some(shape_to_pb(i.shape)),
        created_ms: i.created_ms,
        expires_ms: i.expires_ms,
        group: i.group,
        state: state.into(),
        provider_id,
        hourly_usd: i.hourly_usd,
        last_error: i.last_error,
        lease_seconds,
        provenance,
        adopted: i.adopted,
    }
}

pub(super) fn event_to_pb(e: Event) -> pb::Event {
    let kind = match e.kind {
        EventKind::LeaseExpired => pb::EventKind::LeaseExpired,
        EventKind::LeakTerminated => pb::EventKind::LeakTerminated,
        EventKind::Vanished => pb::EventKind::Vanished,
        EventKind::Abandoned => pb::EventKind::Abandoned,
        EventKind::Terminated => pb::EventKind::Terminated,
        EventKind::ScaledDown => pb::EventKind::ScaledDown,
        EventKind::Orphaned => pb::EventKind::Orphaned,
        EventKind::Adopted => pb::EventKind::Adopted,
        EventKind::OrphansConfirmed => pb::EventKind::OrphansConfirmed,
        EventKind::LeaseRenewed => pb::EventKind::LeaseRenewed,
        EventKind::Held => pb::EventKind::Held,
        _ => pb::EventKind::Unspecified,
    };
    let status = match e.status {
        EventStatus::Done => pb::EventStatus::Done,
        EventStatus::Started => pb::EventStatus::Started,
        EventStatus::Failed => pb::EventStatus::Failed,
        _ => pb::EventStatus::Unspecified,
    };
    pb::Event {
        seq: e.seq,
        at_ms: e.at_ms,
        kind: kind.into(),
        plugin: e.plugin,
        request_id: e.request_id,
        provider_id: e.provider_id,
        reason: e.reason,
        status: status.into(),
        completed_ms: e.completed_ms,
        error: e.error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> pb::NodeShape {
        pb::NodeShape {
            cpu: 2.0,
            memory_bytes: 4 << 30,
            ..Default::default()
        }
    }

    fn refused(r: std::result::Result<impl std::fmt::Debug, Status>, fragment: &str) {
        let status = r.expect_err("refused");
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains(fragment), "{status:?}");
    }

    #[test]
    fn enum_values_outside_the_proto_are_invalid_arguments() {
        // What a client of another language can put on the wire: any i32.
        for bad in [3, 7, -1, i32::MAX] {
            refused(
                shape_from_pb(Some(pb::NodeShape {
                    arch: bad,
                    ..shape()
                })),
                "is not an architecture",
            );
        }
        for bad in [3, -5, i32::MIN] {
            refused(
                shape_from_pb(Some(pb::NodeShape {
                    capacity_type: bad,
                    ..shape()
                })),
                "is not a capacity type",
            );
        }
        refused(shape_from_pb(None), "shape is required");
        // The values the proto defines map as documented.
        let arm = shape_from_pb(Some(pb::NodeShape {
            arch: pb::Arch::Arm64.into(),
            capacity_type: pb::CapacityType::Spot.into(),
            ..shape()
        }))
        .unwrap();
        assert_eq!(arm.arch, Some(wasmprov_api::Arch::Arm64));
        assert_eq!(arm.capacity_type, wasmprov_api::CapacityType::Spot);
        let any = shape_from_pb(Some(shape())).unwrap();
        assert_eq!(any.arch, None);
        assert_eq!(any.capacity_type, wasmprov_api::CapacityType::OnDemand);
    }

    #[test]
    fn shapes_and_boot_data_past_the_contract_are_refused_on_the_wire() {
        refused(
            shape_from_pb(Some(pb::NodeShape {
                cpu: f64::NAN,
                ..shape()
            })),
            "cpu",
        );
        refused(
            shape_from_pb(Some(pb::NodeShape {
                gpu_model: Some("nvidia-a100".into()),
                ..shape()
            })),
            "gpu",
        );
        refused(
            boot_from_pb(Some(pb::BootData {
                user_data: Some(vec![b'x'; 64 * 1024 + 1]),
                ..Default::default()
            })),
            "user_data is 65537 bytes",
        );
        refused(
            boot_from_pb(Some(pb::BootData {
                ssh_keys: vec!["ssh-ed25519 AAAA a\nssh-rsa BBBB b".into()],
                ..Default::default()
            })),
            "ssh_keys[0] is not one OpenSSH public key line",
        );
        assert_eq!(
            boot_from_pb(None).unwrap(),
            wasmprov_api::BootData::default()
        );
    }
}
