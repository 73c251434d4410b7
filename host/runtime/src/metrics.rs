//! Per-plugin metrics in the Prometheus text format (OpenMetrics 1.0).
//!
//! Every series carries a `plugin` label. What is counted, and where:
//!
//! | series | labels | counted in |
//! | --- | --- | --- |
//! | `wasmprov_calls_total` | `plugin`, `op`, `outcome` (`ok` or the error's [`kind`](wasmprov_api::ProvisionerError::kind)) | `plugin.rs`, around each contract call |
//! | `wasmprov_call_duration_seconds` (histogram) | `plugin`, `op` | same |
//! | `wasmprov_errors_total` | `plugin`, `op`, `kind` | same, failed calls only |
//! | `wasmprov_faults_total` | `plugin`, `fault` (`trap`, `timeout`, `cpu_limit`, ...) | same, plugin faults only |
//! | `wasmprov_denials_total` | `plugin`, `kind` (`http` / `exec`) | `http.rs`, `exec.rs`, where a request is refused |
//! | `wasmprov_instances_total` | `plugin` | `plugin.rs`, once per instance made (every call and the probe at load; a reused price-hint instance once) |
//! | `wasmprov_instances_in_flight` (gauge) | `plugin` | same, while the instance lives |
//! | `wasmprov_nodes` (gauge) | `plugin` | `wasmprov-fleet`, the nodes each reconcile's describe found |
//! | `wasmprov_fleet_events_total` | `plugin`, `event` | `wasmprov-fleet`: every history entry by kind (`lease_expired`, `leak_terminated`, `terminated`, `scaled_down`, `vanished`, `abandoned`, `orphaned`, `adopted`, `orphans_confirmed`, `lease_renewed`, `held`), and `foreign_answer` for an answer that named nodes of another owner |
//! | `wasmprov_fleet_orphans` (gauge) | `plugin` | `wasmprov-fleet`, the orphans (nodes of this owner the journal cannot prove it made) the last reconcile found |
//! | `wasmprov_reloads_total` | `outcome` (`changed`, `unchanged`, `failed`: some manifest did not load, `error`: the pass did not run) | `host.rs`, once per reload of the plugin directory (watcher, SIGHUP, Reload RPC, [`Host::reload`](crate::Host::reload)) |
//!
//! The hot path does not allocate: a plugin takes its handles (one counter
//! and one histogram per operation, the instance counter and gauge) once at
//! load, and a successful call only bumps atomics and one histogram. Errors,
//! faults and denials look their series up by label set when they happen.
//!
//! Series of a plugin that is removed stay until the host ends: a counter
//! that vanishes looks like a reset to Prometheus.

use std::sync::Arc;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use wasmprov_api::ProvisionerError;

use crate::intercept::DenialKind;

/// The media type of what [`Metrics::encode`] returns, for an HTTP
/// `Content-Type` header.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upper bounds of the latency buckets, in seconds: 10 µs (an instance
/// answering a price hint from memory) to 30 s (a slow cloud API under
/// retries), in 1–2.5–5 steps.
const LATENCY_BUCKETS: [f64; 20] = [
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// A contract operation, as the `op` label names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Op {
    /// `provision` / `provision_request`.
    Provision,
    /// `terminate`.
    Terminate,
    /// `describe`.
    Describe,
    /// `price_hint` / `try_price_hint`.
    PriceHint,
    /// `get`.
    Get,
    /// `offerings`.
    Offerings,
    /// `set_labels`.
    SetLabels,
    /// `assign_address`.
    AssignAddress,
    /// `release_address`.
    ReleaseAddress,
    /// `register_target`.
    RegisterTarget,
    /// `deregister_target`.
    DeregisterTarget,
    /// `list_targets`.
    ListTargets,
    /// `subnet_capacity`.
    SubnetCapacity,
}

impl Op {
    const ALL: [Op; 13] = [
        Op::Provision,
        Op::Terminate,
        Op::Describe,
        Op::PriceHint,
        Op::Get,
        Op::Offerings,
        Op::SetLabels,
        Op::AssignAddress,
        Op::ReleaseAddress,
        Op::RegisterTarget,
        Op::DeregisterTarget,
        Op::ListTargets,
        Op::SubnetCapacity,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Op::Provision => "provision",
            Op::Terminate => "terminate",
            Op::Describe => "describe",
            Op::PriceHint => "price_hint",
            Op::Get => "get",
            Op::Offerings => "offerings",
            Op::SetLabels => "set_labels",
            Op::AssignAddress => "assign_address",
            Op::ReleaseAddress => "release_address",
            Op::RegisterTarget => "register_target",
            Op::DeregisterTarget => "deregister_target",
            Op::ListTargets => "list_targets",
            Op::SubnetCapacity => "subnet_capacity",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PluginLabels {
    plugin: Arc<str>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OpLabels {
    plugin: Arc<str>,
    op: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    plugin: Arc<str>,
    op: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    plugin: Arc<str>,
    op: &'static str,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FaultLabels {
    plugin: Arc<str>,
    fault: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DenialLabels {
    plugin: Arc<str>,
    kind: &'static str,
}

/// The metrics of one host: every plugin's calls, latency, errors, denials,
/// faults and instances. Shared by all plugins of the host, and kept across
/// reloads (a new version of a plugin counts on in the same series).
///
/// ```
/// // Usually `host.metrics()`; a host's plugins fill it as they load and run.
/// let metrics = wasmprov_host::metrics::Metrics::new();
/// // No plugin yet, so no series: only the end marker.
/// assert_eq!(metrics.encode(), "# EOF\n");
/// ```
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    latency: Family<OpLabels, Histogram, fn() -> Histogram>,
    errors: Family<ErrorLabels, Counter>,
    faults: Family<FaultLabels, Counter>,
    denials: Family<DenialLabels, Counter>,
    instances: Family<PluginLabels, Counter>,
    in_flight: Family<PluginLabels, Gauge>,
    nodes: Family<PluginLabels, Gauge>,
    orphans: Family<PluginLabels, Gauge>,
    fleet_events: Family<EventLabels, Counter>,
    reloads: Family<OutcomeLabels, Counter>,
}

/// How one reload of the plugin directory went (`wasmprov_reloads_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReloadOutcome {
    /// The pass ran and the set of plugins changed.
    Changed,
    /// The pass ran and nothing changed.
    Unchanged,
    /// The pass ran and some manifest did not load.
    Failed,
    /// The pass did not run.
    Error,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    plugin: Arc<str>,
    event: Arc<str>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Empty metrics, every family registered.
    #[must_use]
    pub fn new() -> Self {
        let calls = Family::<CallLabels, Counter>::default();
        let latency = Family::<OpLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            latency_histogram,
        );
        let errors = Family::<ErrorLabels, Counter>::default();
        let faults = Family::<FaultLabels, Counter>::default();
        let denials = Family::<DenialLabels, Counter>::default();
        let instances = Family::<PluginLabels, Counter>::default();
        let in_flight = Family::<PluginLabels, Gauge>::default();
        let nodes = Family::<PluginLabels, Gauge>::default();
        let orphans = Family::<PluginLabels, Gauge>::default();
        let fleet_events = Family::<EventLabels, Counter>::default();
        let reloads = Family::<OutcomeLabels, Counter>::default();
        let mut registry = Registry::with_prefix("wasmprov");
        registry.register(
            "calls",
            "Contract calls by plugin, operation and outcome (ok, or the error kind)",
            calls.clone(),
        );
        registry.register_with_unit(
            "call_duration",
            "Time of a contract call, instantiation included",
            Unit::Seconds,
            latency.clone(),
        );
        registry.register(
            "errors",
            "Failed contract calls by plugin, operation and error kind",
            errors.clone(),
        );
        registry.register(
            "faults",
            "Plugin faults (traps, timeouts, exhausted limits, contract breaks) by plugin",
            faults.clone(),
        );
        registry.register(
            "denials",
            "HTTP requests and program runs of a plugin the host refused",
            denials.clone(),
        );
        registry.register(
            "instances",
            "WebAssembly instances created (one per call, and one at load)",
            instances.clone(),
        );
        registry.register(
            "instances_in_flight",
            "WebAssembly instances alive now",
            in_flight.clone(),
        );
        registry.register(
            "nodes",
            "Nodes this owner has on the plugin's cloud, as the last reconcile found them",
            nodes.clone(),
        );
        registry.register(
            "fleet_orphans",
            "Nodes of this owner on the plugin's cloud that the journal cannot prove it made (left alone until adopted or confirmed), as the last reconcile found them",
            orphans.clone(),
        );
        registry.register(
            "fleet_events",
            "Orchestration events on a plugin's nodes (every history entry by kind, and foreign_answer), as the fleet journals them",
            fleet_events.clone(),
        );
        registry.register(
            "reloads",
            "Reloads of the plugin directory by outcome: changed, unchanged, failed (some manifest did not load; the old version of a plugin keeps serving) or error (the pass did not run)",
            reloads.clone(),
        );
        Self {
            registry,
            calls,
            latency,
            errors,
            faults,
            denials,
            instances,
            in_flight,
            nodes,
            orphans,
            fleet_events,
            reloads,
        }
    }

    /// Counts one reload of the plugin directory.
    pub(crate) fn reloaded(&self, outcome: ReloadOutcome) {
        let outcome = match outcome {
            ReloadOutcome::Changed => "changed",
            ReloadOutcome::Unchanged => "unchanged",
            ReloadOutcome::Failed => "failed",
            ReloadOutcome::Error => "error",
        };
        self.reloads.get_or_create(&OutcomeLabels { outcome }).inc();
    }

    /// Counts one orchestration event on `plugin`'s nodes.
    pub(crate) fn fleet_event(&self, plugin: &str, event: &str) {
        self.fleet_events
            .get_or_create(&EventLabels {
                plugin: Arc::from(plugin),
                event: Arc::from(event),
            })
            .inc();
    }

    /// Records how many nodes a reconcile found on `plugin`'s cloud.
    pub(crate) fn set_nodes(&self, plugin: &str, count: usize) {
        self.nodes
            .get_or_create(&PluginLabels {
                plugin: Arc::from(plugin),
            })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Records how many orphans a reconcile found on `plugin`'s cloud.
    pub(crate) fn set_orphans(&self, plugin: &str, count: usize) {
        self.orphans
            .get_or_create(&PluginLabels {
                plugin: Arc::from(plugin),
            })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// Every series in the OpenMetrics text format (which Prometheus
    /// scrapes; serve it as [`CONTENT_TYPE`]), ending in `# EOF`.
    #[must_use]
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(8 << 10);
        self.encode_families(&mut out);
        out.push_str("# EOF\n");
        out
    }

    /// Every family in the OpenMetrics text format, appended to `out`
    /// without the `# EOF` end marker: for a server that serves these
    /// beside families of its own and ends the text itself (`wasmprov
    /// serve` does).
    pub fn encode_families(&self, out: &mut String) {
        if let Err(e) = prometheus_client::encoding::text::encode_registry(out, &self.registry) {
            // Writing to a String does not fail; a metric that cannot be
            // encoded is a bug here, not something a scraper can act on.
            tracing::error!("encoding metrics: {e}");
        }
    }

    /// The handles of plugin `name`, taken once at load.
    pub(crate) fn plugin(self: &Arc<Self>, name: &str) -> PluginMetrics {
        let plugin: Arc<str> = Arc::from(name);
        let ops = Op::ALL.map(|op| OpHandles {
            ok: self.calls.get_or_create_owned(&CallLabels {
                plugin: plugin.clone(),
                op: op.as_str(),
                outcome: "ok",
            }),
            latency: self.latency.get_or_create_owned(&OpLabels {
                plugin: plugin.clone(),
                op: op.as_str(),
            }),
        });
        let labels = PluginLabels {
            plugin: plugin.clone(),
        };
        PluginMetrics {
            instances: self.instances.get_or_create_owned(&labels),
            in_flight: self.in_flight.get_or_create_owned(&labels),
            ops,
            plugin,
            metrics: self.clone(),
            foreign: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Counts a request of `plugin` the host refused.
    pub(crate) fn denied(&self, plugin: &str, kind: DenialKind) {
        let kind = match kind {
            DenialKind::Http => "http",
            DenialKind::Exec => "exec",
        };
        self.denials
            .get_or_create(&DenialLabels {
                plugin: Arc::from(plugin),
                kind,
            })
            .inc();
    }
}

#[derive(Debug)]
struct OpHandles {
    ok: Counter,
    latency: Histogram,
}

/// One plugin's handles into [`Metrics`].
#[derive(Debug)]
pub(crate) struct PluginMetrics {
    plugin: Arc<str>,
    metrics: Arc<Metrics>,
    ops: [OpHandles; Op::ALL.len()],
    instances: Counter,
    in_flight: Gauge,
    /// Nodes of another owner dropped from this plugin's answers.
    foreign: std::sync::atomic::AtomicU64,
}

impl PluginMetrics {
    /// Nodes of another owner dropped from this plugin's answers so far.
    pub(crate) fn foreign_total(&self) -> u64 {
        self.foreign.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Records one call of `op` that began at `started` and ended with `result`.
    pub(crate) fn record<T>(
        &self,
        op: Op,
        started: Instant,
        result: &std::result::Result<T, ProvisionerError>,
    ) {
        let handles = &self.ops[op.index()];
        handles.latency.observe(started.elapsed().as_secs_f64());
        let err = match result {
            Ok(_) => {
                handles.ok.inc();
                return;
            }
            Err(e) => e,
        };
        let m = &self.metrics;
        let kind = err.kind();
        m.calls
            .get_or_create(&CallLabels {
                plugin: self.plugin.clone(),
                op: op.as_str(),
                outcome: kind,
            })
            .inc();
        m.errors
            .get_or_create(&ErrorLabels {
                plugin: self.plugin.clone(),
                op: op.as_str(),
                kind,
            })
            .inc();
        if let ProvisionerError::Plugin { fault, .. } = err {
            m.faults
                .get_or_create(&FaultLabels {
                    plugin: self.plugin.clone(),
                    fault: fault.as_str(),
                })
                .inc();
        }
    }

    /// Counts `count` nodes of another owner dropped from an answer: a
    /// contract fault of the plugin (the call itself still answered).
    pub(crate) fn foreign_nodes(&self, count: usize) {
        if count == 0 {
            return;
        }
        self.foreign
            .fetch_add(count as u64, std::sync::atomic::Ordering::SeqCst);
        self.metrics
            .faults
            .get_or_create(&FaultLabels {
                plugin: self.plugin.clone(),
                fault: wasmprov_api::PluginFault::Contract.as_str(),
            })
            .inc_by(count as u64);
    }

    /// Counts a new instance; it is in flight until the guard drops (on
    /// success, error, timeout or cancellation alike).
    pub(crate) fn instance(&self) -> InstanceGuard<'_> {
        self.instances.inc();
        self.in_flight.inc();
        InstanceGuard(&self.in_flight)
    }

    /// A call in an instance that answered before (a reused price-hint
    /// instance): in flight until the guard drops, not counted as new.
    pub(crate) fn reused_instance(&self) -> InstanceGuard<'_> {
        self.in_flight.inc();
        InstanceGuard(&self.in_flight)
    }
}

/// An instance in flight; dropping it ends that.
#[derive(Debug)]
pub(crate) struct InstanceGuard<'a>(&'a Gauge);

impl Drop for InstanceGuard<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmprov_api::PluginFault;

    fn has_line(text: &str, line: &str) -> bool {
        text.lines().any(|l| l == line)
    }

    #[test]
    fn a_fresh_plugin_has_zeroed_series_for_every_op() {
        let metrics = Arc::new(Metrics::new());
        let _p = metrics.plugin("hetzner");
        let text = metrics.encode();
        for op in ["provision", "terminate", "describe", "price_hint"] {
            let line =
                format!(r#"wasmprov_calls_total{{plugin="hetzner",op="{op}",outcome="ok"}} 0"#);
            assert!(has_line(&text, &line), "{line} missing in\n{text}");
            let line =
                format!(r#"wasmprov_call_duration_seconds_count{{plugin="hetzner",op="{op}"}} 0"#);
            assert!(has_line(&text, &line), "{line} missing in\n{text}");
        }
        assert!(
            has_line(&text, r#"wasmprov_instances_total{plugin="hetzner"} 0"#),
            "{text}"
        );
        assert!(has_line(
            &text,
            r#"wasmprov_instances_in_flight{plugin="hetzner"} 0"#
        ));
        assert!(has_line(
            &text,
            "# UNIT wasmprov_call_duration_seconds seconds"
        ));
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn outcomes_errors_faults_denials_and_instances_are_encoded() {
        let metrics = Arc::new(Metrics::new());
        let p = metrics.plugin("probe");
        let t = Instant::now();
        p.record(Op::Provision, t, &Ok::<_, ProvisionerError>(()));
        p.record(Op::Provision, t, &Ok::<_, ProvisionerError>(()));
        p.record::<()>(
            Op::Terminate,
            t,
            &Err(ProvisionerError::NotFound("x".into())),
        );
        p.record::<()>(
            Op::Describe,
            t,
            &Err(ProvisionerError::RateLimited {
                retry_after_ms: Some(5),
                message: "slow down".into(),
            }),
        );
        p.record::<()>(
            Op::PriceHint,
            t,
            &Err(ProvisionerError::Plugin {
                plugin: "probe".into(),
                fault: PluginFault::CpuLimit,
                message: "spun".into(),
            }),
        );
        metrics.denied("probe", DenialKind::Http);
        metrics.denied("probe", DenialKind::Http);
        metrics.denied("probe", DenialKind::Exec);
        let guard = p.instance();
        {
            let _second = p.instance();
            assert!(has_line(
                &metrics.encode(),
                r#"wasmprov_instances_in_flight{plugin="probe"} 2"#
            ));
        }
        let text = metrics.encode();
        assert!(has_line(
            &text,
            r#"wasmprov_instances_in_flight{plugin="probe"} 1"#
        ));
        drop(guard);
        let text_after = metrics.encode();
        assert!(has_line(
            &text_after,
            r#"wasmprov_instances_in_flight{plugin="probe"} 0"#
        ));

        for line in [
            r#"wasmprov_calls_total{plugin="probe",op="provision",outcome="ok"} 2"#,
            r#"wasmprov_calls_total{plugin="probe",op="terminate",outcome="not_found"} 1"#,
            r#"wasmprov_calls_total{plugin="probe",op="terminate",outcome="ok"} 0"#,
            r#"wasmprov_calls_total{plugin="probe",op="describe",outcome="rate_limited"} 1"#,
            r#"wasmprov_calls_total{plugin="probe",op="price_hint",outcome="plugin"} 1"#,
            r#"wasmprov_errors_total{plugin="probe",op="terminate",kind="not_found"} 1"#,
            r#"wasmprov_errors_total{plugin="probe",op="describe",kind="rate_limited"} 1"#,
            r#"wasmprov_errors_total{plugin="probe",op="price_hint",kind="plugin"} 1"#,
            r#"wasmprov_faults_total{plugin="probe",fault="cpu_limit"} 1"#,
            r#"wasmprov_denials_total{plugin="probe",kind="http"} 2"#,
            r#"wasmprov_denials_total{plugin="probe",kind="exec"} 1"#,
            r#"wasmprov_instances_total{plugin="probe"} 2"#,
            r#"wasmprov_call_duration_seconds_count{plugin="probe",op="provision"} 2"#,
            r#"wasmprov_call_duration_seconds_bucket{le="+Inf",plugin="probe",op="provision"} 2"#,
        ] {
            assert!(has_line(&text, line), "{line} missing in\n{text}");
        }
        assert!(text.contains("# TYPE wasmprov_call_duration_seconds histogram"));
        assert!(text.contains("# TYPE wasmprov_instances_in_flight gauge"));
        // Only the variants that happened have error series.
        assert!(!text.contains(r#"kind="quota""#), "{text}");
    }

    #[test]
    fn a_reloaded_plugin_counts_on_in_the_same_series() {
        let metrics = Arc::new(Metrics::new());
        let old = metrics.plugin("p");
        old.record(Op::Describe, Instant::now(), &Ok::<_, ProvisionerError>(()));
        let new = metrics.plugin("p");
        new.record(Op::Describe, Instant::now(), &Ok::<_, ProvisionerError>(()));
        let text = metrics.encode();
        assert!(
            has_line(
                &text,
                r#"wasmprov_calls_total{plugin="p",op="describe",outcome="ok"} 2"#
            ),
            "{text}"
        );
    }

    #[test]
    fn every_fault_has_a_stable_label() {
        for (fault, name) in [
            (PluginFault::Trap, "trap"),
            (PluginFault::Timeout, "timeout"),
            (PluginFault::CpuLimit, "cpu_limit"),
            (PluginFault::MemoryLimit, "memory_limit"),
            (PluginFault::ResourceLimit, "resource_limit"),
            (PluginFault::Contract, "contract"),
        ] {
            assert_eq!(fault.as_str(), name);
            // The same name as in JSON.
            assert_eq!(serde_json::to_value(fault).unwrap(), name);
        }
    }

    #[test]
    fn buckets_span_ten_microseconds_to_thirty_seconds() {
        assert_eq!(LATENCY_BUCKETS[0], 1e-5);
        assert_eq!(LATENCY_BUCKETS[LATENCY_BUCKETS.len() - 1], 30.0);
        assert!(LATENCY_BUCKETS.windows(2).all(|w| w[0] < w[1]));
    }
}
