//! How a failed command ends: its exit code, and the error `--json` prints.
//!
//! The codes follow `sysexits.h` where it has one for the case, so that
//! supervisors name them (systemd shows `75/TEMPFAIL`, `66/NOINPUT`):
//!
//! | code | name | when |
//! |---|---|---|
//! | 0 | success | the command did what it was asked (a terminate of a node already gone included) |
//! | 1 | failure | a retry will fail the same way until someone changes something: credentials (`auth`), `quota`, `invalid_config`, `unsupported`, `conflict`, a plugin that trapped or broke the contract, a plugin that did not load, a reconcile or scale that left work for a person |
//! | 2 | usage | the command line is wrong (clap's code; also `--lease-secs` without `--state-dir`) |
//! | 66 | `EX_NOINPUT`, not found | the one thing the command names does not exist: the node of a `get`, the request id of a `renew`, the plugin of a plugin command (`not_found`, `unknown_plugin`) |
//! | 75 | `EX_TEMPFAIL`, retryable | the same command may succeed later: `rate_limited`, `transport`, `not_sent`, `capacity`, a plugin `timeout`, a journal that cannot be written or is in use (`journal`), a host that is stopping (`closing`), a registry that cannot be reached or is overloaded, a scale short of its target because capacity ran out |
//!
//! 69 (`EX_UNAVAILABLE`) is deliberately not used for permanent failures:
//! supervisors and scripts read it as an outage, which is the retryable
//! case here. Anything not classified below is 1.
//!
//! [`classify`] is the one place that decides; `--json` errors carry what
//! it decided (`retryable`, `retry_after_ms`, `exit_code`) beside the
//! contract's `kind`.

use wasmprov_api::ProvisionerError;
use wasmprov_fleet::FleetError;

/// A provisioner error, kept typed for JSON output.
#[derive(Debug)]
pub(crate) struct CallFailed(pub(crate) ProvisionerError);

impl std::fmt::Display for CallFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.0, self.0.kind())
    }
}

impl std::error::Error for CallFailed {}

/// A failure whose details were already printed (as JSON); only the one-line
/// reason remains to be said.
#[derive(Debug)]
pub(crate) struct Reported(pub(crate) String);

impl std::fmt::Display for Reported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Reported {}

/// [`Reported`], for a failure that the same command may mend later (a
/// scale that fell short because capacity ran out): exit 75.
#[derive(Debug)]
pub(crate) struct ReportedRetryable(pub(crate) String);

impl std::fmt::Display for ReportedRetryable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ReportedRetryable {}

/// Whether `e`'s details were already printed (as JSON), so that `--json`
/// prints no error object after them.
pub(crate) fn already_reported(e: &anyhow::Error) -> bool {
    e.downcast_ref::<Reported>().is_some() || e.downcast_ref::<ReportedRetryable>().is_some()
}

/// The command did what it was asked.
pub(crate) const SUCCESS: u8 = 0;
/// A failure that a retry will not mend.
pub(crate) const FAILURE: u8 = 1;
/// The command line is wrong (clap exits with it too).
pub(crate) const USAGE: u8 = 2;
/// `EX_NOINPUT`: the one thing the command names does not exist.
pub(crate) const NOT_FOUND: u8 = 66;
/// `EX_TEMPFAIL`: the same command may succeed later.
pub(crate) const TEMPFAIL: u8 = 75;

/// What [`classify`] decided about a failed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    /// The process's exit code.
    pub(crate) code: u8,
    /// The contract's error kind, or the host's (`host`, `unknown_plugin`,
    /// `journal`, `closing`, `usage`, `temporary`).
    pub(crate) kind: &'static str,
    /// Whether the same command may succeed if run again later.
    pub(crate) retryable: bool,
    /// How long to wait first, when the cloud said.
    pub(crate) retry_after_ms: Option<u64>,
}

impl Failure {
    fn host(code: u8, kind: &'static str) -> Self {
        Self {
            code,
            kind,
            retryable: code == TEMPFAIL,
            retry_after_ms: None,
        }
    }

    fn of(e: &ProvisionerError) -> Self {
        let retryable = e.is_retryable();
        Self {
            code: if retryable {
                TEMPFAIL
            } else if matches!(e, ProvisionerError::NotFound(_)) {
                NOT_FOUND
            } else {
                FAILURE
            },
            kind: e.kind(),
            retryable,
            retry_after_ms: e
                .retry_after()
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        }
    }
}

/// A plugin named on the command line that the plugin directory does not
/// have (one that is there but failed to load is a plain failure).
#[derive(Debug)]
pub(crate) struct UnknownPlugin(pub(crate) String);

impl std::fmt::Display for UnknownPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UnknownPlugin {}

/// A failure the same command may get past later (a registry that cannot
/// be reached, a deadline that ran out).
#[derive(Debug)]
pub(crate) struct Temporary(pub(crate) String);

impl std::fmt::Display for Temporary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Temporary {}

/// A command line clap accepted but that cannot work as given.
#[derive(Debug)]
pub(crate) struct Usage(pub(crate) String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// What the journal says when another process holds it
/// (`wasmprov_fleet::journal::Journal::open`): that process ends, and
/// the same command then works.
const JOURNAL_IN_USE: &str = "is in use by another process";

/// The exit code, kind and retry advice of a failed command: the
/// outermost error of the chain that says, else a plain failure.
pub(crate) fn classify(e: &anyhow::Error) -> Failure {
    for cause in e.chain() {
        if let Some(CallFailed(p)) = cause.downcast_ref::<CallFailed>() {
            return Failure::of(p);
        }
        if let Some(p) = cause.downcast_ref::<ProvisionerError>() {
            return Failure::of(p);
        }
        if let Some(f) = cause.downcast_ref::<FleetError>() {
            return match f {
                FleetError::Provisioner(p) => Failure::of(p),
                FleetError::UnknownPlugin(_) => Failure::host(NOT_FOUND, "unknown_plugin"),
                FleetError::NotJournaled(_) => Failure::host(NOT_FOUND, "not_found"),
                FleetError::Closing => Failure::host(TEMPFAIL, "closing"),
                FleetError::Journal(_) => Failure::host(TEMPFAIL, "journal"),
                FleetError::Conflict { .. }
                | FleetError::LeaseConflict { .. }
                | FleetError::Terminating(_) => Failure::host(FAILURE, "conflict"),
                _ => Failure::host(FAILURE, "host"),
            };
        }
        if cause.downcast_ref::<UnknownPlugin>().is_some() {
            return Failure::host(NOT_FOUND, "unknown_plugin");
        }
        if cause.downcast_ref::<Temporary>().is_some()
            || cause.downcast_ref::<ReportedRetryable>().is_some()
        {
            return Failure::host(TEMPFAIL, "temporary");
        }
        if cause.downcast_ref::<Usage>().is_some() {
            return Failure::host(USAGE, "usage");
        }
        if cause.to_string().contains(JOURNAL_IN_USE) {
            return Failure::host(TEMPFAIL, "journal");
        }
    }
    Failure::host(FAILURE, "host")
}

/// The `--json` form of a failed command: `{"error": {...}}` with the
/// contract's `kind` (and `detail`) for a plugin's error, `kind` and
/// `message` for the host's, and for both `message`, `retryable`,
/// `retry_after_ms` (null when unknown) and `exit_code`.
pub(crate) fn json_error(e: &anyhow::Error, failure: &Failure) -> serde_json::Value {
    let provisioner = e.chain().find_map(|c| {
        c.downcast_ref::<CallFailed>()
            .map(|CallFailed(p)| p)
            .or_else(|| c.downcast_ref::<ProvisionerError>())
            .or_else(|| match c.downcast_ref::<FleetError>() {
                Some(FleetError::Provisioner(p)) => Some(p),
                _ => None,
            })
    });
    let mut error = match provisioner {
        Some(p) if p.kind() == failure.kind => {
            serde_json::to_value(p).unwrap_or_else(|_| serde_json::json!({ "kind": p.kind() }))
        }
        _ => serde_json::json!({ "kind": failure.kind }),
    };
    if let Some(fields) = error.as_object_mut() {
        fields.insert("message".into(), format!("{e:#}").into());
        fields.insert("retryable".into(), failure.retryable.into());
        fields.insert("retry_after_ms".into(), failure.retry_after_ms.into());
        fields.insert("exit_code".into(), failure.code.into());
    }
    serde_json::json!({ "error": error })
}

#[cfg(test)]
mod tests {
    #[test]
    fn errors_keep_their_kind() {
        let e = anyhow::anyhow!(CallFailed(ProvisionerError::NotFound("x".into())));
        assert!(e.downcast_ref::<CallFailed>().is_some());
        assert_eq!(e.to_string(), "not found: x (not_found)");
    }

    use super::*;
    use wasmprov_api::{CapacityScope, PluginFault};

    fn code(e: anyhow::Error) -> (u8, &'static str, bool) {
        let f = classify(&e);
        (f.code, f.kind, f.retryable)
    }

    #[test]
    fn every_error_has_one_code() {
        let call = |p: ProvisionerError| code(CallFailed(p).into());
        let plugin = |fault| ProvisionerError::Plugin {
            plugin: "p".into(),
            fault,
            message: "m".into(),
        };
        for (err, want) in [
            (
                ProvisionerError::RateLimited {
                    retry_after_ms: Some(7000),
                    message: "slow".into(),
                },
                (TEMPFAIL, "rate_limited", true),
            ),
            (
                ProvisionerError::Transport("reset".into()),
                (TEMPFAIL, "transport", true),
            ),
            (
                ProvisionerError::NotSent("refused".into()),
                (TEMPFAIL, "not_sent", true),
            ),
            (
                ProvisionerError::Capacity {
                    scope: CapacityScope::Zone,
                    message: "full".into(),
                },
                (TEMPFAIL, "capacity", true),
            ),
            (plugin(PluginFault::Timeout), (TEMPFAIL, "plugin", true)),
            (plugin(PluginFault::Trap), (FAILURE, "plugin", false)),
            (
                ProvisionerError::NotFound("x".into()),
                (NOT_FOUND, "not_found", false),
            ),
            (
                ProvisionerError::Auth("no".into()),
                (FAILURE, "auth", false),
            ),
            (
                ProvisionerError::Quota("no".into()),
                (FAILURE, "quota", false),
            ),
            (
                ProvisionerError::InvalidConfig("no".into()),
                (FAILURE, "invalid_config", false),
            ),
            (
                ProvisionerError::Unsupported("no".into()),
                (FAILURE, "unsupported", false),
            ),
            (
                ProvisionerError::Conflict("no".into()),
                (FAILURE, "conflict", false),
            ),
            (
                ProvisionerError::Other("no".into()),
                (FAILURE, "other", false),
            ),
        ] {
            assert_eq!(call(err.clone()), want, "{err}");
            // The same through a fleet, and under context.
            assert_eq!(code(FleetError::Provisioner(err.clone()).into()), want);
            assert_eq!(
                code(anyhow::Error::new(CallFailed(err.clone())).context("while asking")),
                want
            );
        }
        for (err, want) in [
            (FleetError::Closing, (TEMPFAIL, "closing", true)),
            (
                FleetError::Journal(anyhow::anyhow!("disk full")),
                (TEMPFAIL, "journal", true),
            ),
            (
                FleetError::UnknownPlugin("x".into()),
                (NOT_FOUND, "unknown_plugin", false),
            ),
            (
                FleetError::NotJournaled("r".into()),
                (NOT_FOUND, "not_found", false),
            ),
            (
                FleetError::Terminating("r".into()),
                (FAILURE, "conflict", false),
            ),
        ] {
            assert_eq!(code(err.into()), want);
        }
        assert_eq!(
            code(UnknownPlugin("no plugin".into()).into()),
            (NOT_FOUND, "unknown_plugin", false)
        );
        assert_eq!(
            code(Temporary("registry down".into()).into()),
            (TEMPFAIL, "temporary", true)
        );
        assert_eq!(code(Usage("bad".into()).into()), (USAGE, "usage", false));
        assert_eq!(
            code(anyhow::anyhow!(
                "the journal /x/journal.redb is in use by another process (one host per journal)"
            )),
            (TEMPFAIL, "journal", true)
        );
        assert_eq!(code(anyhow::anyhow!("anything")), (FAILURE, "host", false));
    }

    #[test]
    fn json_errors_carry_retry_advice() {
        let e: anyhow::Error = CallFailed(ProvisionerError::RateLimited {
            retry_after_ms: Some(1500),
            message: "slow".into(),
        })
        .into();
        let v = json_error(&e, &classify(&e));
        assert_eq!(v["error"]["kind"], "rate_limited");
        assert_eq!(v["error"]["detail"]["retry_after_ms"], 1500);
        assert_eq!(v["error"]["retryable"], true);
        assert_eq!(v["error"]["retry_after_ms"], 1500);
        assert_eq!(v["error"]["exit_code"], 75);

        let e = anyhow::anyhow!("no such file");
        let v = json_error(&e, &classify(&e));
        assert_eq!(v["error"]["kind"], "host");
        assert_eq!(v["error"]["message"], "no such file");
        assert_eq!(v["error"]["retryable"], false);
        assert!(v["error"]["retry_after_ms"].is_null());
        assert_eq!(v["error"]["exit_code"], 1);
    }
}
