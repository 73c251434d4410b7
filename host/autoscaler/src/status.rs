//! The one place errors become the gRPC codes cluster-autoscaler's client
//! expects.
//!
//! The autoscaler's Go client passes most errors on as they are, and treats
//! `UNIMPLEMENTED` on the optional calls (pricing, the template, options) as
//! "this provider does not do that", falling back to its own defaults. So:
//! - an unknown group: `NOT_FOUND`;
//! - a request that can never succeed as written (a delta of the wrong
//!   sign, an id that is not a wasmprov node, no node named):
//!   `INVALID_ARGUMENT`;
//! - a request the group's state refuses now (above max, below min, a node
//!   of another group, a decrease that would drop made nodes, a journal
//!   holding destructive actions): `FAILED_PRECONDITION`;
//! - a failure worth retrying as is (a journal that cannot be written now,
//!   a host stopping, a plugin's retryable error such as a rate limit or a
//!   lost connection): `UNAVAILABLE`;
//! - an optional call this provider cannot answer: `UNIMPLEMENTED`;
//! - anything else a plugin says: `INTERNAL`, with its message.

use tonic::Status;
use wasmprov_api::ProvisionerError;
use wasmprov_fleet::FleetError;

/// Why a call of the service failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AutoscalerError {
    /// No configured group has the id.
    #[error("no node group {0:?} (see node-groups.toml)")]
    UnknownGroup(String),
    /// The request cannot succeed as written.
    #[error("{0}")]
    InvalidArgument(String),
    /// The group's state refuses the request now.
    #[error("{0}")]
    FailedPrecondition(String),
    /// An optional call this provider does not answer.
    #[error("{0}")]
    Unimplemented(String),
    /// A fleet call failed.
    #[error(transparent)]
    Fleet(#[from] FleetError),
    /// The journal could not be read or written.
    #[error("journal: {0:#}")]
    Journal(anyhow::Error),
}

impl From<anyhow::Error> for AutoscalerError {
    fn from(e: anyhow::Error) -> Self {
        Self::Journal(e)
    }
}

/// Whether a plugin's error is worth retrying as is.
fn retryable(e: &ProvisionerError) -> bool {
    e.is_retryable()
}

impl From<AutoscalerError> for Status {
    fn from(e: AutoscalerError) -> Self {
        let message = e.to_string();
        match e {
            AutoscalerError::UnknownGroup(_) => Status::not_found(message),
            AutoscalerError::InvalidArgument(_) => Status::invalid_argument(message),
            AutoscalerError::FailedPrecondition(_) => Status::failed_precondition(message),
            AutoscalerError::Unimplemented(_) => Status::unimplemented(message),
            AutoscalerError::Journal(_) => Status::unavailable(message),
            AutoscalerError::Fleet(f) => match &f {
                FleetError::Closing | FleetError::Journal(_) => Status::unavailable(message),
                FleetError::Provisioner(p) if retryable(p) => Status::unavailable(message),
                FleetError::Provisioner(ProvisionerError::NotFound(_))
                | FleetError::UnknownPlugin(_)
                | FleetError::NotJournaled(_) => Status::not_found(message),
                FleetError::Terminating(_)
                | FleetError::Conflict { .. }
                | FleetError::LeaseConflict { .. } => Status::failed_precondition(message),
                _ => Status::internal(message),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::Code;

    #[test]
    fn codes() {
        let cases: Vec<(AutoscalerError, Code)> = vec![
            (AutoscalerError::UnknownGroup("g".into()), Code::NotFound),
            (
                AutoscalerError::InvalidArgument("x".into()),
                Code::InvalidArgument,
            ),
            (
                AutoscalerError::FailedPrecondition("x".into()),
                Code::FailedPrecondition,
            ),
            (
                AutoscalerError::Unimplemented("x".into()),
                Code::Unimplemented,
            ),
            (anyhow::anyhow!("disk full").into(), Code::Unavailable),
            (FleetError::Closing.into(), Code::Unavailable),
            (
                FleetError::Provisioner(ProvisionerError::RateLimited {
                    retry_after_ms: Some(10),
                    message: "slow down".into(),
                })
                .into(),
                Code::Unavailable,
            ),
            (
                FleetError::Provisioner(ProvisionerError::Transport("reset".into())).into(),
                Code::Unavailable,
            ),
            (
                FleetError::Provisioner(ProvisionerError::Auth("bad token".into())).into(),
                Code::Internal,
            ),
            (FleetError::UnknownPlugin("p".into()).into(), Code::NotFound),
            (
                FleetError::Terminating("r".into()).into(),
                Code::FailedPrecondition,
            ),
        ];
        for (e, code) in cases {
            let text = e.to_string();
            assert_eq!(Status::from(e).code(), code, "{text}");
        }
    }
}
