//! Durable provisioning on top of a [`Host`]: every provision is journaled
//! before the cloud is asked, so a host that crashed at any point can
//! [`reconcile`](Fleet::reconcile) and end with neither a duplicate nor a
//! leaked node; leases; and capacity groups scaled by price.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use wasmprov_api::{NodeHandle, NodeShape, ProvisionRequest, ProvisionerError};

use crate::Host;
use crate::journal::{Intent, IntentState, Journal, deadline_ms, now_ms};

/// The label a plugin puts on a node with the request id it was made for.
pub const REQUEST_LABEL: &str = "wasmprov-request";
/// The label a fleet puts on the nodes of a capacity group.
pub const GROUP_LABEL: &str = "wasmprov-group";

/// Why a fleet operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// No plugin of that name is loaded.
    #[error("no plugin {0:?} is loaded")]
    UnknownPlugin(String),
    /// The request id is already journaled for another plugin or shape.
    #[error("request id {request_id:?} is already used for plugin {plugin:?} with another shape")]
    Conflict {
        /// The request id.
        request_id: String,
        /// The plugin it was used with.
        plugin: String,
    },
    /// The plugin's answer.
    #[error(transparent)]
    Provisioner(#[from] ProvisionerError),
    /// The journal could not be read or written; nothing was asked of the cloud
    /// after the failure.
    #[error("journal: {0:#}")]
    Journal(#[from] anyhow::Error),
}

/// Options of one [`Fleet::provision`].
#[derive(Clone, Debug, Default)]
pub struct ProvisionOptions {
    /// The request id (idempotency key); a random one when `None`.
    pub request_id: Option<String>,
    /// Time to live: reconcile terminates the node once it runs out.
    pub lease: Option<Duration>,
    /// The capacity group the node belongs to (also put on it as a label).
    pub group: Option<String>,
    /// The price the node was chosen at, kept for scale-down decisions.
    pub hourly_usd: Option<f64>,
}

/// What reconcile does with a node this host owns that no intent wants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LeakPolicy {
    /// List it in the report and leave it.
    #[default]
    Report,
    /// Terminate it.
    Terminate,
}

/// How [`Fleet::reconcile`] acts.
#[derive(Clone, Debug, Serialize)]
pub struct ReconcilePolicy {
    /// Leaked nodes: report or terminate.
    pub leaks: LeakPolicy,
    /// Provisions whose node is not found: ask again under the same request
    /// id (`true`, the default) or forget them.
    pub resume_pending: bool,
}

impl Default for ReconcilePolicy {
    fn default() -> Self {
        Self {
            leaks: LeakPolicy::Report,
            resume_pending: true,
        }
    }
}

/// A node reconcile found that no intent wants.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Leak {
    /// The plugin that lists it.
    pub plugin: String,
    /// The node.
    pub node: NodeHandle,
    /// Why it is a leak.
    pub reason: String,
    /// Whether reconcile terminated it.
    pub terminated: bool,
}

/// What one reconcile found and did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReconcileReport {
    /// Interrupted provisions whose node was found: `(request id, provider id)`.
    pub confirmed: Vec<(String, String)>,
    /// Interrupted provisions asked again and now done: `(request id, provider id)`.
    pub resumed: Vec<(String, String)>,
    /// Interrupted provisions forgotten (not found, resume off, or the plugin
    /// refused for good): request ids.
    pub abandoned: Vec<String>,
    /// Interrupted terminations finished: `(request id, provider id)`.
    pub terminated: Vec<(String, String)>,
    /// Nodes terminated because their lease ran out: `(request id, provider id)`.
    pub expired: Vec<(String, String)>,
    /// Nodes the journal had but the cloud no longer lists: `(request id, provider id)`.
    pub vanished: Vec<(String, String)>,
    /// Owned nodes no intent wants.
    pub leaks: Vec<Leak>,
    /// What could not be done this time (the intent stays for the next reconcile).
    pub errors: Vec<String>,
}

impl ReconcileReport {
    /// Whether reconcile found everything as the journal says.
    #[must_use]
    pub fn is_clean(&self) -> bool {
        *self == Self::default()
    }
}

impl std::fmt::Display for ReconcileReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_clean() {
            return f.write_str("in step: every node wanted, every wanted node present");
        }
        let pairs = |v: &[(String, String)]| {
            v.iter()
                .map(|(r, p)| format!("{r}→{p}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts = Vec::new();
        for (what, v) in [
            ("confirmed", &self.confirmed),
            ("resumed", &self.resumed),
            ("terminated", &self.terminated),
            ("expired", &self.expired),
            ("vanished", &self.vanished),
        ] {
            if !v.is_empty() {
                parts.push(format!("{what} {}", pairs(v)));
            }
        }
        if !self.abandoned.is_empty() {
            parts.push(format!("abandoned {}", self.abandoned.join(", ")));
        }
        for l in &self.leaks {
            parts.push(format!(
                "leak {}/{} ({}){}",
                l.plugin,
                l.node.provider_id,
                l.reason,
                if l.terminated { ", terminated" } else { "" }
            ));
        }
        for e in &self.errors {
            parts.push(format!("error: {e}"));
        }
        f.write_str(&parts.join("; "))
    }
}

/// Whether an error means the cloud made no node (so the intent can go).
fn made_nothing(e: &ProvisionerError) -> bool {
    matches!(
        e,
        ProvisionerError::Unsupported(_)
            | ProvisionerError::Capacity { .. }
            | ProvisionerError::Quota(_)
            | ProvisionerError::RateLimited { .. }
            | ProvisionerError::Auth(_)
            | ProvisionerError::InvalidConfig(_)
    )
}

/// A [`Host`] with a journal: provisions that survive crashes, reconcile,
/// leases and capacity groups.
///
/// ```no_run
/// # async fn demo() -> anyhow::Result<()> {
/// use std::sync::Arc;
/// use wasmprov_host::{Fleet, HostBuilder, ProvisionOptions, ReconcilePolicy};
/// use wasmprov_host::api::NodeShape;
///
/// let host = Arc::new(HostBuilder::new("./plugins.d").owner_id("scaler-1").build().await?);
/// let fleet = Fleet::open(host, "./state/journal.redb")?;
/// // After a restart: finish what the last run left half done.
/// println!("{}", fleet.reconcile(&ReconcilePolicy::default()).await?);
/// let node = fleet
///     .provision("hetzner", &NodeShape::new(2.0, 4 << 30), ProvisionOptions {
///         request_id: Some("batch-7".into()),
///         lease: Some(std::time::Duration::from_secs(3600)),
///         ..ProvisionOptions::default()
///     })
///     .await?;
/// println!("{} until its lease runs out", node.provider_id);
/// # Ok(()) }
/// ```
pub struct Fleet {
    host: Arc<Host>,
    journal: Journal,
    reconciling: tokio::sync::Mutex<()>,
    pub(crate) scaling: tokio::sync::Mutex<()>,
    /// Request ids whose provision is running in this process: reconcile
    /// leaves them (and their nodes) to it.
    in_flight: std::sync::Mutex<BTreeSet<String>>,
}

/// Removes a request id from the in-flight set when its provision ends,
/// however it ends.
struct InFlight<'a> {
    set: &'a std::sync::Mutex<BTreeSet<String>>,
    request_id: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Ok(mut set) = self.set.lock() {
            set.remove(&self.request_id);
        }
    }
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("host", &self.host)
            .field("journal", &self.journal)
            .finish_non_exhaustive()
    }
}

impl Fleet {
    /// A fleet over `host` with its journal at `journal_path` (created if
    /// missing). Keep one journal per owner id: reconcile treats every node
    /// of the owner that the journal does not name as leaked.
    ///
    /// # Errors
    /// When the journal cannot be opened (see [`Journal::open`]).
    pub fn open(host: Arc<Host>, journal_path: impl AsRef<Path>) -> Result<Self> {
        Ok(Self {
            host,
            journal: Journal::open(journal_path)?,
            reconciling: tokio::sync::Mutex::new(()),
            scaling: tokio::sync::Mutex::new(()),
            in_flight: std::sync::Mutex::new(BTreeSet::new()),
        })
    }

    fn running(&self, request_id: &str) -> InFlight<'_> {
        if let Ok(mut set) = self.in_flight.lock() {
            set.insert(request_id.to_string());
        }
        InFlight {
            set: &self.in_flight,
            request_id: request_id.to_string(),
        }
    }

    fn is_running(&self, request_id: &str) -> bool {
        self.in_flight
            .lock()
            .map(|set| set.contains(request_id))
            .unwrap_or(false)
    }

    fn mark_active(&self, intent: &Intent, provider_id: &str) -> Result<()> {
        self.journal.put(&Intent {
            state: IntentState::Active {
                provider_id: provider_id.to_string(),
            },
            ..intent.clone()
        })
    }

    fn mark_terminating(&self, intent: &Intent, provider_id: &str) -> Result<()> {
        self.journal.put(&Intent {
            state: IntentState::Terminating {
                provider_id: provider_id.to_string(),
            },
            ..intent.clone()
        })
    }

    /// The host.
    #[must_use]
    pub fn host(&self) -> &Arc<Host> {
        &self.host
    }

    /// The journal.
    #[must_use]
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// Creates a node, journaling the intent first. Provisioning again with
    /// the same request id returns the same node (the plugins are
    /// idempotent per request id). When the cloud's answer is lost (a
    /// transport error, a plugin fault, a crash), the intent stays pending
    /// and [`reconcile`](Self::reconcile) settles it.
    ///
    /// # Errors
    /// [`FleetError::UnknownPlugin`], [`FleetError::Conflict`] when the
    /// request id is journaled for another plugin, the plugin's error, or a
    /// journal failure.
    pub async fn provision(
        &self,
        plugin: &str,
        shape: &NodeShape,
        options: ProvisionOptions,
    ) -> std::result::Result<NodeHandle, FleetError> {
        let backend = self
            .host
            .plugin(plugin)
            .ok_or_else(|| FleetError::UnknownPlugin(plugin.to_string()))?;
        let request_id = options
            .request_id
            .clone()
            .unwrap_or_else(crate::plugin::random_request_id);
        let mut shape = shape.clone();
        if let Some(group) = &options.group {
            shape.labels.insert(GROUP_LABEL.into(), group.clone());
        }
        let intent = Intent {
            request_id: request_id.clone(),
            plugin: plugin.to_string(),
            shape: shape.clone(),
            created_ms: now_ms(),
            expires_ms: options.lease.map(deadline_ms),
            group: options.group.clone(),
            hourly_usd: options.hourly_usd,
            state: IntentState::Pending,
        };
        let intent = match self.journal.insert_new(&intent)? {
            None => intent,
            Some(existing) if existing.plugin == plugin && existing.shape == shape => existing,
            Some(existing) => {
                return Err(FleetError::Conflict {
                    request_id,
                    plugin: existing.plugin,
                });
            }
        };
        if matches!(intent.state, IntentState::Terminating { .. }) {
            return Err(ProvisionerError::Other(format!(
                "request {request_id} is being terminated; use another request id"
            ))
            .into());
        }
        let _running = self.running(&request_id);
        let request = ProvisionRequest {
            request_id: request_id.clone(),
            shape,
        };
        match backend.provision_request(&request).await {
            Ok(node) => {
                self.mark_active(&intent, &node.provider_id)?;
                Ok(node)
            }
            Err(e) => {
                if made_nothing(&e) && intent.state == IntentState::Pending {
                    self.journal.remove(&request_id)?;
                }
                Err(e.into())
            }
        }
    }

    /// Terminates a node, journaling the intent to terminate first so a
    /// crash in between is finished by reconcile. A node already gone is
    /// success.
    ///
    /// # Errors
    /// [`FleetError::UnknownPlugin`], the plugin's error (the intent then
    /// stays `terminating`), or a journal failure.
    pub async fn terminate(
        &self,
        plugin: &str,
        provider_id: &str,
    ) -> std::result::Result<(), FleetError> {
        let backend = self
            .host
            .plugin(plugin)
            .ok_or_else(|| FleetError::UnknownPlugin(plugin.to_string()))?;
        let intent = self
            .journal
            .all()?
            .into_iter()
            .find(|i| i.plugin == plugin && i.provider_id() == Some(provider_id));
        if let Some(intent) = &intent {
            self.mark_terminating(intent, provider_id)?;
        }
        match backend.terminate(&provider_id.to_string()).await {
            Ok(()) | Err(ProvisionerError::NotFound(_)) => {
                if let Some(intent) = intent {
                    self.journal.remove(&intent.request_id)?;
                }
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Every journaled intent.
    ///
    /// # Errors
    /// When the journal cannot be read.
    pub fn intents(&self) -> Result<Vec<Intent>> {
        self.journal.all()
    }

    /// Compares the journal with what each plugin describes, and settles the
    /// difference:
    /// - a pending provision whose node is listed (by its request-id label)
    ///   is confirmed; one whose node is not is asked again under the same
    ///   request id (or forgotten, per policy);
    /// - an interrupted termination is finished;
    /// - a node whose lease ran out is terminated;
    /// - a node the journal has but the cloud no longer lists is forgotten
    ///   (reported as vanished);
    /// - an owned node that no intent wants (unknown request id, a second
    ///   node for one request, no request label) is a leak: reported, or
    ///   terminated per policy.
    ///
    /// A plugin whose describe fails is skipped (its intents stay as they
    /// are); so is an intent whose plugin is not loaded, and a provision this
    /// fleet is running right now. One reconcile runs at a time.
    ///
    /// # Errors
    /// When the journal cannot be read or written.
    pub async fn reconcile(&self, policy: &ReconcilePolicy) -> Result<ReconcileReport> {
        let _one = self.reconciling.lock().await;
        let mut report = ReconcileReport::default();
        let plugins: BTreeSet<String> = self
            .host
            .plugin_names()
            .into_iter()
            .chain(self.journal.all()?.into_iter().map(|i| i.plugin))
            .collect();
        for name in plugins {
            self.reconcile_plugin(&name, policy, &mut report).await?;
        }
        Ok(report)
    }

    async fn reconcile_plugin(
        &self,
        name: &str,
        policy: &ReconcilePolicy,
        report: &mut ReconcileReport,
    ) -> Result<()> {
        let Some(backend) = self.host.plugin(name) else {
            let n = self
                .journal
                .all()?
                .iter()
                .filter(|i| i.plugin == name)
                .count();
            report.errors.push(format!(
                "plugin {name:?} is not loaded; its {n} intent(s) are left as they are"
            ));
            return Ok(());
        };
        // Describe first, then read the journal: a node visible here had its
        // intent written before it was created, so it is in the snapshot.
        let nodes = match backend.describe().await {
            Ok(n) => n,
            Err(e) => {
                report.errors.push(format!("{name}: describe failed: {e}"));
                return Ok(());
            }
        };
        self.host.metrics().set_nodes(name, nodes.len());
        let intents: BTreeMap<String, Intent> = self
            .journal
            .all()?
            .into_iter()
            .filter(|i| i.plugin == name)
            .map(|i| (i.request_id.clone(), i))
            .collect();
        let mut by_id: BTreeMap<&str, &NodeHandle> = BTreeMap::new();
        let mut by_request: BTreeMap<&str, Vec<&NodeHandle>> = BTreeMap::new();
        for n in &nodes {
            by_id.insert(&n.provider_id, n);
            if let Some(r) = n.labels.get(REQUEST_LABEL) {
                by_request.entry(r).or_default().push(n);
            }
        }
        let now = now_ms();
        let mut wanted: BTreeSet<String> = BTreeSet::new();
        for intent in intents.values() {
            let rid = intent.request_id.clone();
            match &intent.state {
                IntentState::Pending if self.is_running(&rid) => {
                    // Being provisioned by this process right now: its nodes
                    // are wanted, the provision will record the answer.
                    for node in by_request.get(rid.as_str()).into_iter().flatten() {
                        wanted.insert(node.provider_id.clone());
                    }
                }
                IntentState::Pending => {
                    let found = by_request.get(rid.as_str()).and_then(|v| {
                        // Prefer the node that is furthest along.
                        v.iter().min_by_key(|n| n.provider_id.clone()).copied()
                    });
                    if let Some(node) = found {
                        wanted.insert(node.provider_id.clone());
                        self.mark_active(intent, &node.provider_id)?;
                        report
                            .confirmed
                            .push((rid.clone(), node.provider_id.clone()));
                        if intent.expired(now) {
                            self.expire(&*backend, intent, &node.provider_id, report)
                                .await?;
                        }
                    } else if intent.expired(now) || !policy.resume_pending {
                        self.journal.remove(&rid)?;
                        report.abandoned.push(rid);
                    } else {
                        let request = ProvisionRequest {
                            request_id: rid.clone(),
                            shape: intent.shape.clone(),
                        };
                        match backend.provision_request(&request).await {
                            Ok(node) => {
                                wanted.insert(node.provider_id.clone());
                                self.mark_active(intent, &node.provider_id)?;
                                report.resumed.push((rid, node.provider_id));
                            }
                            Err(e) if made_nothing(&e) => {
                                self.journal.remove(&rid)?;
                                report.abandoned.push(rid.clone());
                                report
                                    .errors
                                    .push(format!("{name}: resuming {rid} refused: {e}"));
                            }
                            Err(e) => report
                                .errors
                                .push(format!("{name}: resuming {rid} failed: {e}")),
                        }
                    }
                }
                IntentState::Active { provider_id } => {
                    if !by_id.contains_key(provider_id.as_str()) {
                        self.journal.remove(&rid)?;
                        report.vanished.push((rid, provider_id.clone()));
                    } else if intent.expired(now) {
                        wanted.insert(provider_id.clone());
                        self.expire(&*backend, intent, provider_id, report).await?;
                    } else {
                        wanted.insert(provider_id.clone());
                    }
                }
                IntentState::Terminating { provider_id } => {
                    wanted.insert(provider_id.clone());
                    match backend.terminate(provider_id).await {
                        Ok(()) | Err(ProvisionerError::NotFound(_)) => {
                            self.journal.remove(&rid)?;
                            report.terminated.push((rid, provider_id.clone()));
                        }
                        Err(e) => report.errors.push(format!(
                            "{name}: terminating {provider_id} ({rid}) failed: {e}"
                        )),
                    }
                }
            }
        }
        for node in &nodes {
            if wanted.contains(&node.provider_id) {
                continue;
            }
            let reason = match node.labels.get(REQUEST_LABEL) {
                None => "no request id label".to_string(),
                Some(r) if intents.contains_key(r) => {
                    format!("a second node for request {r}")
                }
                Some(r) => format!("request {r} is not in the journal"),
            };
            let terminated = match policy.leaks {
                LeakPolicy::Report => false,
                LeakPolicy::Terminate => match backend.terminate(&node.provider_id).await {
                    Ok(()) | Err(ProvisionerError::NotFound(_)) => true,
                    Err(e) => {
                        report.errors.push(format!(
                            "{name}: terminating leaked {} failed: {e}",
                            node.provider_id
                        ));
                        false
                    }
                },
            };
            report.leaks.push(Leak {
                plugin: name.to_string(),
                node: node.clone(),
                reason,
                terminated,
            });
        }
        Ok(())
    }

    async fn expire(
        &self,
        backend: &dyn wasmprov_api::CloudProvisioner,
        intent: &Intent,
        provider_id: &str,
        report: &mut ReconcileReport,
    ) -> Result<()> {
        self.mark_terminating(intent, provider_id)?;
        match backend.terminate(&provider_id.to_string()).await {
            Ok(()) | Err(ProvisionerError::NotFound(_)) => {
                self.journal.remove(&intent.request_id)?;
                report
                    .expired
                    .push((intent.request_id.clone(), provider_id.to_string()));
            }
            Err(e) => report.errors.push(format!(
                "{}: terminating expired {provider_id} failed: {e}",
                intent.plugin
            )),
        }
        Ok(())
    }
}
