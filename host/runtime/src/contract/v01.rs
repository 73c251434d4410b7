//! Contract 0.1.0, frozen: how a plugin built for it is mapped onto the
//! current contract.
//!
//! | 0.3 asks | a 0.1 plugin |
//! | --- | --- |
//! | shape `arch`, `gpu_model`, `disk_bytes` | cannot honour them: `unsupported`, the plugin is not called |
//! | boot data | cannot honour it: `unsupported`, the plugin is not called |
//! | `get` | answered from `describe` |
//! | `offerings` | `unsupported` |
//! | request `subnet` | cannot honour it: `unsupported`, the plugin is not called |
//! | `set-labels`, `networking` | `unsupported`, from the host, without an instance |
//! | handle `status` | derived from the join state ([`NodeStatus::from_join_state`]) |
//!
//! Its imports (`exec`, `log` of 0.1.0) are served by the current ones.

use wasmprov_api::{
    CapacityScope, CapacityType, JoinState, NodeHandle, NodeShape, NodeStatus, PriceHint,
    ProvisionRequest, ProvisionerError,
};

use crate::bindings::{v01, v03};
use crate::state::CallState;

use v01::types as w;

/// The version, for messages.
pub(crate) const VERSION: &str = "0.1.0";

/// Why a 0.1 plugin cannot be asked for `shape`, if it cannot.
pub(crate) fn refuse_shape(shape: &NodeShape) -> Option<ProvisionerError> {
    let asked: Vec<&str> = [
        ("arch", shape.arch.is_some()),
        ("gpu_model", shape.gpu_model.is_some()),
        ("disk_bytes", shape.disk_bytes.is_some()),
    ]
    .into_iter()
    .filter_map(|(f, given)| given.then_some(f))
    .collect();
    (!asked.is_empty()).then(|| {
        ProvisionerError::Unsupported(format!(
            "the plugin is built for contract {VERSION}, which has no {}; rebuild it for 0.3 to ask for them",
            asked.join(", ")
        ))
    })
}

/// Why a 0.1 plugin cannot be asked for `request`, if it cannot.
pub(crate) fn refuse_request(request: &ProvisionRequest) -> Option<ProvisionerError> {
    refuse_shape(&request.shape)
        .or_else(|| super::v02::refuse_subnet(VERSION, request))
        .or_else(|| {
        let given = request.boot.given();
        (!given.is_empty()).then(|| {
            ProvisionerError::Unsupported(format!(
                "the plugin is built for contract {VERSION}, which takes no boot data ({} given); rebuild it for 0.3",
                given.join(", ")
            ))
        })
    })
}

pub(crate) fn capacity(c: w::CapacityType) -> CapacityType {
    match c {
        w::CapacityType::OnDemand => CapacityType::OnDemand,
        w::CapacityType::Spot => CapacityType::Spot,
    }
}

fn capacity_to_wit(c: CapacityType) -> w::CapacityType {
    match c {
        CapacityType::OnDemand => w::CapacityType::OnDemand,
        CapacityType::Spot => w::CapacityType::Spot,
    }
}

/// The shape in 0.1 terms; callers refuse first what 0.1 cannot carry.
pub(crate) fn shape_to_wit(s: &NodeShape) -> w::NodeShape {
    w::NodeShape {
        cpu: s.cpu,
        memory_bytes: s.memory_bytes,
        gpu: s.gpu,
        gpu_vendor: s.gpu_vendor.clone(),
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
    let join_state = match h.join_state {
        w::JoinState::Provisioning => JoinState::Provisioning,
        w::JoinState::Booting => JoinState::Booting,
        w::JoinState::Joining => JoinState::Joining,
        w::JoinState::Joined => JoinState::Joined,
        w::JoinState::Failed => JoinState::Failed,
    };
    NodeHandle {
        provider_id: h.provider_id,
        status: NodeStatus::from_join_state(join_state),
        address: h.address,
        zone: h.zone,
        capacity_type: capacity(h.capacity_type),
        join_state,
        instance_type: h.instance_type,
        labels: h.labels.into_iter().collect(),
        ..NodeHandle::default()
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
        w::ProvisionError::Other(m) => ProvisionerError::Other(m),
    }
}

// The 0.1 imports, served by the current ones.

impl v01::exec::Host for CallState {
    async fn run(
        &mut self,
        cmd: v01::exec::Command,
    ) -> wasmtime::Result<Result<v01::exec::Output, v01::exec::ExecError>> {
        use v03::exec::ExecError as E3;
        let cmd = v03::exec::Command {
            program: cmd.program,
            args: cmd.args,
            env: cmd.env,
            stdin: cmd.stdin,
            timeout_ms: cmd.timeout_ms,
        };
        Ok(match v03::exec::Host::run(self, cmd).await? {
            Ok(o) => Ok(v01::exec::Output {
                exit_code: o.exit_code,
                stdout: o.stdout,
                stderr: o.stderr,
            }),
            Err(e) => Err(match e {
                E3::Denied(m) => v01::exec::ExecError::Denied(m),
                E3::SpawnFailed(m) => v01::exec::ExecError::SpawnFailed(m),
                E3::Timeout(m) => v01::exec::ExecError::Timeout(m),
                E3::OutputTooLarge(m) => v01::exec::ExecError::OutputTooLarge(m),
                E3::Other(m) => v01::exec::ExecError::Other(m),
            }),
        })
    }
}

impl v01::log::Host for CallState {
    fn log(
        &mut self,
        level: v01::log::Level,
        message: String,
        fields: Vec<(String, String)>,
    ) -> wasmtime::Result<()> {
        use v01::log::Level as L1;
        use v03::log::Level as L3;
        let level = match level {
            L1::Trace => L3::Trace,
            L1::Debug => L3::Debug,
            L1::Info => L3::Info,
            L1::Warn => L3::Warn,
            L1::Error => L3::Error,
        };
        v03::log::Host::log(self, level, message, fields)
    }
}

impl v01::types::Host for CallState {}
