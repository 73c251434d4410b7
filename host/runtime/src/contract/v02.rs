//! Contract 0.2.0, frozen: how a plugin built for it is mapped onto the
//! current contract.
//!
//! | 0.3 asks | a 0.2 plugin |
//! | --- | --- |
//! | request `subnet` | cannot honour it: `unsupported`, the plugin is not called |
//! | `set-labels`, `networking` | `unsupported`, from the host, without an instance |
//! | handle `ipv6_address`, `hostname` | none |
//!
//! Everything else maps field for field. Its imports (`exec`, `log` of
//! 0.2.0) are served by the current ones.

use wasmprov_api::{
    Arch, CapacityScope, CapacityType, JoinState, NodeHandle, NodeShape, NodeStatus, Offering,
    PriceHint, ProvisionRequest, ProvisionerError,
};

use crate::bindings::{v02, v03};
use crate::state::CallState;

use v02::types as w;

/// The version, for messages.
pub(crate) const VERSION: &str = "0.2.0";

/// Why a plugin built for `version` (0.2 or older, which have no subnet in
/// the request) cannot be asked for `request`, if it cannot: a subnet is
/// refused, never dropped.
pub(crate) fn refuse_subnet(version: &str, request: &ProvisionRequest) -> Option<ProvisionerError> {
    request.subnet.as_ref().map(|subnet| {
        ProvisionerError::Unsupported(format!(
            "the plugin is built for contract {version}, which cannot place a node in a subnet ({subnet:?} asked); rebuild it for 0.3"
        ))
    })
}

/// Why a 0.2 plugin cannot be asked for `request`, if it cannot.
pub(crate) fn refuse_request(request: &ProvisionRequest) -> Option<ProvisionerError> {
    refuse_subnet(VERSION, request)
}

fn capacity_to_wit(c: CapacityType) -> w::CapacityType {
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
        labels: s
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        zone: s.zone.clone(),
        capacity_type: capacity_to_wit(s.capacity_type),
        instance_type: s.instance_type.clone(),
    }
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
        ..NodeHandle::default()
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

// The 0.2 imports, served by the current ones.

impl v02::exec::Host for CallState {
    async fn run(
        &mut self,
        cmd: v02::exec::Command,
    ) -> wasmtime::Result<Result<v02::exec::Output, v02::exec::ExecError>> {
        use v03::exec::ExecError as E3;
        let cmd = v03::exec::Command {
            program: cmd.program,
            args: cmd.args,
            env: cmd.env,
            stdin: cmd.stdin,
            timeout_ms: cmd.timeout_ms,
        };
        Ok(match v03::exec::Host::run(self, cmd).await? {
            Ok(o) => Ok(v02::exec::Output {
                exit_code: o.exit_code,
                stdout: o.stdout,
                stderr: o.stderr,
            }),
            Err(e) => Err(match e {
                E3::Denied(m) => v02::exec::ExecError::Denied(m),
                E3::SpawnFailed(m) => v02::exec::ExecError::SpawnFailed(m),
                E3::Timeout(m) => v02::exec::ExecError::Timeout(m),
                E3::OutputTooLarge(m) => v02::exec::ExecError::OutputTooLarge(m),
                E3::Other(m) => v02::exec::ExecError::Other(m),
            }),
        })
    }
}

impl v02::log::Host for CallState {
    fn log(
        &mut self,
        level: v02::log::Level,
        message: String,
        fields: Vec<(String, String)>,
    ) -> wasmtime::Result<()> {
        use v02::log::Level as L2;
        use v03::log::Level as L3;
        let level = match level {
            L2::Trace => L3::Trace,
            L2::Debug => L3::Debug,
            L2::Info => L3::Info,
            L2::Warn => L3::Warn,
            L2::Error => L3::Error,
        };
        v03::log::Host::log(self, level, message, fields)
    }
}

impl v02::types::Host for CallState {}
