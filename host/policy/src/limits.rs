//! Resource limits of one plugin, and their defaults, written down once here.

use std::time::Duration;

use serde::Deserialize;

/// Limits as written in a manifest's `[limits]` table; absent fields take the defaults.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LimitsSpec {
    /// Linear memory per instance, in MiB (default 64).
    pub memory_mib: Option<u64>,
    /// Wall-clock deadline of one call, in ms (default 30 000).
    pub call_timeout_ms: Option<u64>,
    /// CPU time the guest may spend running in one call, in ms (default 5 000).
    pub cpu_time_ms: Option<u64>,
    /// Outgoing HTTP requests in flight at once (default 16).
    pub http_max_in_flight: Option<usize>,
    /// Time limit of one HTTP request, connect to last byte, in ms (default 15 000).
    pub http_timeout_ms: Option<u64>,
    /// Largest HTTP response body accepted, in bytes (default 16 MiB).
    pub http_max_response_bytes: Option<u64>,
    /// Processes running at once (default 4).
    pub exec_max_concurrent: Option<usize>,
    /// Guest stack, in KiB (default 512).
    pub stack_kib: Option<u64>,
    /// Calls that may do I/O (everything but a price hint) running at once;
    /// the next ones wait to start (default 64).
    pub max_calls_in_flight: Option<usize>,
    /// How long a call may wait to start once `max_calls_in_flight` run, in
    /// ms, before it is refused as `rate_limited` with a retry-after; a call
    /// known to need longer is refused at once (default 10 000).
    pub call_queue_ms: Option<u64>,
}

impl LimitsSpec {
    /// Each limit of `self`, or of `fallback` where `self` has none.
    #[must_use]
    pub fn or(&self, fallback: &Self) -> Self {
        Self {
            memory_mib: self.memory_mib.or(fallback.memory_mib),
            call_timeout_ms: self.call_timeout_ms.or(fallback.call_timeout_ms),
            cpu_time_ms: self.cpu_time_ms.or(fallback.cpu_time_ms),
            http_max_in_flight: self.http_max_in_flight.or(fallback.http_max_in_flight),
            http_timeout_ms: self.http_timeout_ms.or(fallback.http_timeout_ms),
            http_max_response_bytes: self
                .http_max_response_bytes
                .or(fallback.http_max_response_bytes),
            exec_max_concurrent: self.exec_max_concurrent.or(fallback.exec_max_concurrent),
            stack_kib: self.stack_kib.or(fallback.stack_kib),
            max_calls_in_flight: self.max_calls_in_flight.or(fallback.max_calls_in_flight),
            call_queue_ms: self.call_queue_ms.or(fallback.call_queue_ms),
        }
    }
}

/// Checked limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Linear memory per instance, in bytes.
    pub memory_bytes: u64,
    /// Wall-clock deadline of one call.
    pub call_timeout: Duration,
    /// CPU time the guest may spend running in one call.
    pub cpu_time: Duration,
    /// Outgoing HTTP requests in flight at once.
    pub http_max_in_flight: usize,
    /// Time limit of one HTTP request.
    pub http_timeout: Duration,
    /// Largest HTTP response body accepted.
    pub http_max_response_bytes: u64,
    /// Guest stack size, in bytes.
    pub stack_bytes: usize,
    /// Calls that may do I/O running at once (see `admission.rs` in the
    /// runtime).
    pub max_calls_in_flight: usize,
    /// How long a call may wait to start.
    pub call_queue: Duration,
}

/// Largest memory limit a manifest may ask for, in MiB.
pub const MAX_MEMORY_MIB: u64 = 1024;

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 << 20,
            call_timeout: Duration::from_secs(30),
            cpu_time: Duration::from_secs(5),
            http_max_in_flight: 16,
            http_timeout: Duration::from_secs(15),
            http_max_response_bytes: 16 << 20,
            stack_bytes: 512 << 10,
            max_calls_in_flight: 64,
            call_queue: Duration::from_secs(10),
        }
    }
}

impl Limits {
    /// Checks limits as written. Errors are (field, message).
    ///
    /// # Errors
    /// The field out of range and the accepted range.
    pub fn from_spec(spec: &LimitsSpec) -> Result<Self, (String, String)> {
        fn range<T: PartialOrd + std::fmt::Display + Copy>(
            field: &str,
            v: Option<T>,
            lo: T,
            hi: T,
            default: T,
        ) -> Result<T, (String, String)> {
            match v {
                None => Ok(default),
                Some(v) if v >= lo && v <= hi => Ok(v),
                Some(v) => Err((
                    format!("limits.{field}"),
                    format!(
                        "{v} is out of range; use a value between {lo} and {hi} (default {default})"
                    ),
                )),
            }
        }
        let d = Self::default();
        Ok(Self {
            memory_bytes: range(
                "memory_mib",
                spec.memory_mib,
                1,
                MAX_MEMORY_MIB,
                d.memory_bytes >> 20,
            )? << 20,
            call_timeout: Duration::from_millis(range(
                "call_timeout_ms",
                spec.call_timeout_ms,
                10,
                3_600_000,
                d.call_timeout.as_millis() as u64,
            )?),
            cpu_time: Duration::from_millis(range(
                "cpu_time_ms",
                spec.cpu_time_ms,
                10,
                3_600_000,
                d.cpu_time.as_millis() as u64,
            )?),
            http_max_in_flight: range(
                "http_max_in_flight",
                spec.http_max_in_flight,
                1,
                4096,
                d.http_max_in_flight,
            )?,
            http_timeout: Duration::from_millis(range(
                "http_timeout_ms",
                spec.http_timeout_ms,
                10,
                3_600_000,
                d.http_timeout.as_millis() as u64,
            )?),
            http_max_response_bytes: range(
                "http_max_response_bytes",
                spec.http_max_response_bytes,
                1,
                1 << 30,
                d.http_max_response_bytes,
            )?,
            stack_bytes: usize::try_from(range(
                "stack_kib",
                spec.stack_kib,
                64,
                8192,
                (d.stack_bytes >> 10) as u64,
            )?)
            .unwrap_or(usize::MAX)
                << 10,
            max_calls_in_flight: range(
                "max_calls_in_flight",
                spec.max_calls_in_flight,
                1,
                4096,
                d.max_calls_in_flight,
            )?,
            call_queue: Duration::from_millis(range(
                "call_queue_ms",
                spec.call_queue_ms,
                0,
                3_600_000,
                d.call_queue.as_millis() as u64,
            )?),
        })
    }
}
