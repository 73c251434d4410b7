//! `wasmprov reconcile` and `wasmprov scale`: the journaled operations, run
//! against a state directory that keeps the intent journal between runs.

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use wasmprov_api::{
    Backends, CloudProvisioner, NodeHandle, NodeShape, ProviderNodeId, Result as ApiResult,
};
use wasmprov_fleet::{CapacityGroup, Fleet, LeakPolicy, ReconcilePolicy};
use wasmprov_host::Host;

use crate::exit::{Reported, ReportedRetryable};
use crate::output::print_json;

/// The journal's file in a state directory.
pub const JOURNAL_FILE: &str = "journal.redb";

fn open(host: Host, state_dir: &Path) -> Result<Fleet> {
    Fleet::open(Arc::new(host), state_dir.join(JOURNAL_FILE))
}

/// Compares the journal with every plugin's describe and settles the
/// difference; fails when leaks were left or something could not be done.
pub async fn reconcile(
    host: Host,
    state_dir: &Path,
    policy: ReconcilePolicy,
    json: bool,
) -> Result<()> {
    let fleet = open(host, state_dir)?;
    let report = fleet.reconcile(&policy).await?;
    let intents = fleet.intents()?;
    if json {
        print_json(&serde_json::json!({ "report": report, "intents": intents }))?;
    } else {
        println!("{}", crate::output::line(&report.to_string()));
        println!("{} node(s) wanted in the journal", intents.len());
    }
    if let Some(doubt) = &report.held {
        return Err(Reported(format!("{doubt}")).into());
    }
    if !report.orphans.is_empty() {
        return Err(Reported(format!(
            "{} orphan(s) (nodes of this owner this journal cannot prove it made) left alone; \
             adopt them (--adopt) or confirm them (--confirm-orphans)",
            report.orphans.len()
        ))
        .into());
    }
    let left = report.leaks.iter().filter(|l| !l.terminated).count();
    if left > 0 {
        return Err(Reported(format!(
            "{left} leaked node(s) left; terminate them with --terminate-leaks"
        ))
        .into());
    }
    if let Some(first) = report.errors.first() {
        return Err(Reported(format!(
            "{} thing(s) could not be settled; first: {first}",
            report.errors.len()
        ))
        .into());
    }
    Ok(())
}

/// Settles what an earlier run left half done, then scales `group` to
/// `desired`; fails when the group fell short of its target.
pub async fn scale(
    host: Host,
    state_dir: &Path,
    group: &CapacityGroup,
    desired: u32,
    terminate_leaks: bool,
    (max_capacity_failures, price_ceiling): (u32, f64),
    json: bool,
) -> Result<()> {
    let fleet = open(host, state_dir)?.fallback_limits(max_capacity_failures, price_ceiling)?;
    let policy = ReconcilePolicy {
        leaks: if terminate_leaks {
            LeakPolicy::Terminate
        } else {
            LeakPolicy::Report
        },
        ..ReconcilePolicy::default()
    };
    let reconciled = fleet.reconcile(&policy).await?;
    let report = fleet.scale(group, desired).await?;
    if json {
        print_json(&serde_json::json!({ "reconcile": reconciled, "scale": report }))?;
    } else {
        if !reconciled.is_clean() {
            println!(
                "reconcile: {}",
                crate::output::line(&reconciled.to_string())
            );
        }
        println!(
            "group {}: {}",
            group.name,
            crate::output::line(&report.to_string())
        );
    }
    if !report.converged() {
        let short = format!(
            "group {} has {} of {} members",
            group.name, report.after, report.target
        );
        // Short for capacity (or a failure worth retrying): the same
        // command may reach the target later, exit 75; else 1.
        return Err(if report.retryable {
            ReportedRetryable(format!("{short}; a later scale may reach it")).into()
        } else {
            Reported(short).into()
        });
    }
    // At its target, but what the journal knows of some cloud could not be
    // settled (a plugin that cannot list its nodes): that is work for a
    // person, as it is for `reconcile`.
    if let Some(doubt) = &reconciled.held {
        return Err(Reported(format!("group {} is at its target; {doubt}", group.name)).into());
    }
    if let Some(first) = reconciled.errors.first() {
        return Err(Reported(format!(
            "group {} is at its target, but reconcile could not settle {} thing(s); first: {first}",
            group.name,
            reconciled.errors.len()
        ))
        .into());
    }
    Ok(())
}

/// Prints the journal's history (without loading any plugin).
pub fn history(state_dir: &Path, limit: usize, json: bool) -> Result<()> {
    let journal = wasmprov_fleet::journal::Journal::open(state_dir.join(JOURNAL_FILE))?;
    let events = journal.history(limit)?;
    if json {
        print_json(&events)?;
    } else {
        crate::output::history(&events);
    }
    Ok(())
}

/// A provision through the journal (when a state directory is given).
pub async fn provision(
    host: Host,
    state_dir: &Path,
    plugin: &str,
    request: wasmprov_api::ProvisionRequest,
    lease: Option<std::time::Duration>,
) -> Result<wasmprov_api::NodeHandle> {
    let fleet = open(host, state_dir)?;
    let options = wasmprov_fleet::ProvisionOptions {
        request_id: Some(request.request_id),
        boot: request.boot,
        subnet: request.subnet,
        lease,
        ..wasmprov_fleet::ProvisionOptions::default()
    };
    fleet
        .provision(plugin, &request.shape, options)
        .await
        .map_err(fleet_error)
}

/// A terminate through the journal (when a state directory is given);
/// true when the plugin said the node was already gone (which the fleet
/// takes as success, as the contract does).
pub async fn terminate(host: Host, state_dir: &Path, plugin: &str, id: &str) -> Result<bool> {
    let gone = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let backends = Arc::new(NotingGone {
        host,
        gone: gone.clone(),
    });
    let fleet = Fleet::open(backends, state_dir.join(JOURNAL_FILE))?;
    fleet.terminate(plugin, id).await.map_err(fleet_error)?;
    Ok(gone.load(std::sync::atomic::Ordering::SeqCst))
}

/// The host's plugins, each noting a terminate answered `not_found`, so the
/// CLI can say a node was already gone when the fleet reports success.
struct NotingGone {
    host: Host,
    gone: Arc<std::sync::atomic::AtomicBool>,
}

impl Backends for NotingGone {
    fn backend_names(&self) -> Vec<String> {
        Backends::backend_names(&self.host)
    }

    fn backend(&self, name: &str) -> Option<Arc<dyn CloudProvisioner>> {
        let inner = Backends::backend(&self.host, name)?;
        Some(Arc::new(GoneNoted {
            inner,
            gone: self.gone.clone(),
        }))
    }

    fn owner_id(&self) -> Option<String> {
        Backends::owner_id(&self.host)
    }

    fn nodes_listed(&self, name: &str, count: usize) {
        Backends::nodes_listed(&self.host, name, count);
    }

    fn orphans_found(&self, name: &str, count: usize) {
        Backends::orphans_found(&self.host, name, count);
    }

    fn fleet_event(&self, name: &str, event: &str) {
        Backends::fleet_event(&self.host, name, event);
    }
}

/// One plugin, unchanged but for noting a terminate answered `not_found`.
struct GoneNoted {
    inner: Arc<dyn CloudProvisioner>,
    gone: Arc<std::sync::atomic::AtomicBool>,
}

#[async_trait::async_trait]
impl CloudProvisioner for GoneNoted {
    async fn provision(&self, shape: &NodeShape) -> ApiResult<NodeHandle> {
        self.inner.provision(shape).await
    }

    async fn terminate(&self, id: &ProviderNodeId) -> ApiResult<()> {
        let answer = self.inner.terminate(id).await;
        if matches!(answer, Err(wasmprov_api::ProvisionerError::NotFound(_))) {
            self.gone.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        answer
    }

    async fn describe(&self) -> ApiResult<Vec<NodeHandle>> {
        self.inner.describe().await
    }

    fn capacity_types(&self) -> &[wasmprov_api::CapacityType] {
        self.inner.capacity_types()
    }

    fn price_hint(&self, shape: &NodeShape) -> Option<wasmprov_api::PriceHint> {
        self.inner.price_hint(shape)
    }

    fn name(&self) -> &str {
        self.inner.name()
    }

    async fn provision_request(
        &self,
        request: &wasmprov_api::ProvisionRequest,
    ) -> ApiResult<NodeHandle> {
        self.inner.provision_request(request).await
    }

    fn try_price_hint(&self, shape: &NodeShape) -> ApiResult<Option<wasmprov_api::PriceHint>> {
        self.inner.try_price_hint(shape)
    }

    async fn get(&self, id: &ProviderNodeId) -> ApiResult<Option<NodeHandle>> {
        self.inner.get(id).await
    }

    async fn offerings(&self) -> ApiResult<Vec<wasmprov_api::Offering>> {
        self.inner.offerings().await
    }
}

/// Renews the lease of a journaled request (no plugin is loaded: a renewal
/// is the journal's alone).
pub async fn renew(
    state_dir: &Path,
    request_id: &str,
    lease: std::time::Duration,
    json: bool,
) -> Result<()> {
    let journal = wasmprov_fleet::journal::Journal::open(state_dir.join(JOURNAL_FILE))?;
    let backends: std::collections::BTreeMap<String, Arc<dyn wasmprov_api::CloudProvisioner>> =
        std::collections::BTreeMap::new();
    let fleet = Fleet::with_journal(Arc::new(backends), journal);
    let intent = fleet.renew(request_id, lease).await.map_err(fleet_error)?;
    if json {
        print_json(&intent)?;
    } else {
        let ends = intent.expires_ms.unwrap_or_default();
        let when = std::time::UNIX_EPOCH
            .checked_add(std::time::Duration::from_millis(ends))
            .filter(|t| {
                t.duration_since(std::time::UNIX_EPOCH)
                    .is_ok_and(|d| d.as_secs() < 253_402_300_800)
            })
            .map_or_else(
                || format!("at {ends} ms since the epoch (past the year 9999)"),
                httpdate::fmt_http_date,
            );
        println!(
            "{request_id}: lease renewed for {} s, ends {when}",
            lease.as_secs()
        );
    }
    Ok(())
}

/// A fleet's error as the CLI reports it: with the contract's kind where
/// one fits (a conflict is `conflict`, an unknown request id `not_found`),
/// as gRPC does.
fn fleet_error(e: wasmprov_fleet::FleetError) -> anyhow::Error {
    use wasmprov_api::ProvisionerError;
    use wasmprov_fleet::FleetError;
    match e {
        FleetError::Provisioner(p) => crate::exit::CallFailed(p).into(),
        e @ (FleetError::Conflict { .. }
        | FleetError::LeaseConflict { .. }
        | FleetError::Terminating(_)) => {
            crate::exit::CallFailed(ProvisionerError::Conflict(e.to_string())).into()
        }
        e @ FleetError::NotJournaled(_) => {
            crate::exit::CallFailed(ProvisionerError::NotFound(e.to_string())).into()
        }
        other => other.into(),
    }
}
