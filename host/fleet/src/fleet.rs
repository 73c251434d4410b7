//! Durable provisioning over any set of backends: every provision is
//! journaled before the cloud is asked, so a host that crashed at any point
//! can [`reconcile`](Fleet::reconcile) and end with neither a duplicate nor
//! a leaked node.
//!
//! **Ownership of a journal entry.** Inside one process the calls on one
//! request id run one after the other (a lock per request id, `locks.rs`).
//! Every write of an intent draws a new generation, and a call changes or
//! removes an intent only while the generation is the one it wrote
//! ([`Journal::replace_if`], [`Journal::remove_if`]). A failed provision
//! removes its intent only when it created the entry itself and the error
//! says the cloud made nothing ([`made_nothing`]); after anything else
//! (transport, timeout, rate limit, plugin fault) the intent stays pending,
//! marked with the error, until reconcile finds the node or the same request
//! id succeeds.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use serde::Serialize;
use wasmprov_api::{
    Backends, BootData, CloudProvisioner, NodeHandle, NodeShape, ProvisionRequest, ProvisionerError,
};

use crate::journal::{Intent, IntentState, Journal, deadline_ms, now_ms};
use crate::locks::{RequestGuard, RequestLocks};

/// The label a plugin puts on a node with the request id it was made for.
pub const REQUEST_LABEL: &str = "wasmprov-request";
/// The label a fleet puts on the nodes of a capacity group.
pub const GROUP_LABEL: &str = "wasmprov-group";

/// Why a fleet operation failed.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// No plugin (backend) of that name is loaded.
    #[error("no plugin {0:?} is loaded")]
    UnknownPlugin(String),
    /// The request id is being terminated; a new node needs a new id.
    #[error("request id {0:?} is being terminated; use another request id")]
    Terminating(String),
    /// The request id is already journaled for another plugin or shape.
    #[error(
        "request id {request_id:?} is already used for plugin {plugin:?} with another shape or boot data"
    )]
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
    /// What the node boots with; journaled with the intent, so that a
    /// provision resumed after a crash boots the same.
    pub boot: BootData,
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
    /// Provisions interrupted by a crash whose node is not found: ask again
    /// under the same request id (`true`, the default) or forget them. A
    /// provision whose caller was told it failed is never asked again.
    pub resume_pending: bool,
    /// How long a node may be missing from its cloud's list before
    /// reconcile believes it for good: a journaled node missing for less is
    /// kept (clouds list new nodes late), and a failed provision younger
    /// than this is not forgotten yet. Default 60 s; 0 believes at once.
    #[serde(serialize_with = "crate::secs::serialize")]
    pub grace: Duration,
}

impl Default for ReconcilePolicy {
    fn default() -> Self {
        Self {
            leaks: LeakPolicy::Report,
            resume_pending: true,
            grace: DEFAULT_GRACE,
        }
    }
}

/// The default [`ReconcilePolicy::grace`].
pub const DEFAULT_GRACE: Duration = Duration::from_secs(60);

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
    /// Provisions forgotten (not found after a failed call or with resume
    /// off, lease run out, or the plugin refused for good): request ids.
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

/// Whether an error of a provision means the cloud made no node, so that
/// the call that created the intent may remove it: the request was refused
/// before any create (an id or shape the plugin cannot take, bad
/// configuration, credentials), or the create itself was answered with a
/// refusal for capacity or quota (the plugins do not retry a create inside
/// one call, so a refusal is the cloud's whole answer), or the request id
/// names a node made for another request (`conflict`: that node is not
/// this call's). Transport errors,
/// timeouts, rate limits, plugin faults and anything else may come after
/// the cloud acted.
#[must_use]
pub fn made_nothing(e: &ProvisionerError) -> bool {
    matches!(
        e,
        ProvisionerError::Unsupported(_)
            | ProvisionerError::InvalidConfig(_)
            | ProvisionerError::Auth(_)
            | ProvisionerError::Capacity { .. }
            | ProvisionerError::Quota(_)
            | ProvisionerError::Conflict(_)
    )
}

/// A journal over any set of backends: provisions that survive crashes,
/// reconcile, leases and capacity groups.
///
/// ```no_run
/// # async fn demo() -> anyhow::Result<()> {
/// use std::sync::Arc;
/// use wasmprov_fleet::{Fleet, ProvisionOptions, ReconcilePolicy};
/// use wasmprov_host::HostBuilder;
/// use wasmprov_api::NodeShape;
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
    backends: Arc<dyn Backends>,
    journal: Journal,
    pub(crate) reconciling: tokio::sync::Mutex<()>,
    pub(crate) scaling: tokio::sync::Mutex<()>,
    /// Calls on one request id run one at a time.
    pub(crate) requests: RequestLocks,
    /// Offerings that ran out of capacity recently; scaling skips them.
    pub(crate) unavailable: crate::Unavailable,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("backends", &self.backends.backend_names())
            .field("journal", &self.journal)
            .finish_non_exhaustive()
    }
}

impl Fleet {
    /// A fleet over `backends` (a wasm [`Host`](https://docs.rs/wasmprov-host),
    /// a map of native backends, or a [`BackendSet`](crate::BackendSet) of
    /// both) with its journal at `journal_path` (created if missing). Keep
    /// one journal per owner id: reconcile treats every node of the owner
    /// that the journal does not name as leaked.
    ///
    /// # Errors
    /// When the journal cannot be opened (see [`Journal::open`]).
    pub fn open<B: Backends + 'static>(
        backends: Arc<B>,
        journal_path: impl AsRef<Path>,
    ) -> Result<Self> {
        Ok(Self::with_journal(backends, Journal::open(journal_path)?))
    }

    /// A fleet over `backends` with a journal opened already.
    #[must_use]
    pub fn with_journal<B: Backends + 'static>(backends: Arc<B>, journal: Journal) -> Self {
        Self {
            backends,
            journal,
            reconciling: tokio::sync::Mutex::new(()),
            scaling: tokio::sync::Mutex::new(()),
            requests: RequestLocks::default(),
            unavailable: crate::Unavailable::default(),
        }
    }

    /// How long an offering that ran out of capacity is skipped by
    /// [`scale`](Fleet::scale) (default [`DEFAULT_UNAVAILABLE_FOR`](crate::DEFAULT_UNAVAILABLE_FOR);
    /// zero never skips).
    #[must_use]
    pub fn unavailable_for(mut self, ttl: std::time::Duration) -> Self {
        self.unavailable = crate::Unavailable::new(ttl);
        self
    }

    /// The offerings that ran out of capacity recently.
    #[must_use]
    pub fn unavailable(&self) -> &crate::Unavailable {
        &self.unavailable
    }

    /// The backends.
    #[must_use]
    pub fn backends(&self) -> &Arc<dyn Backends> {
        &self.backends
    }

    /// The journal.
    #[must_use]
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    pub(crate) fn backend(
        &self,
        name: &str,
    ) -> std::result::Result<Arc<dyn CloudProvisioner>, FleetError> {
        self.backends
            .backend(name)
            .ok_or_else(|| FleetError::UnknownPlugin(name.to_string()))
    }

    pub(crate) async fn lock(&self, request_id: &str) -> RequestGuard<'_> {
        self.requests.lock(request_id).await
    }

    /// Creates a node, journaling the intent first. Provisioning again with
    /// the same request id returns the same node (the plugins are
    /// idempotent per request id); calls with one request id run one after
    /// the other. When the cloud's answer is lost (a transport error, a
    /// timeout, a plugin fault, a crash), the intent stays pending and
    /// [`reconcile`](Self::reconcile) settles it.
    ///
    /// # Errors
    /// [`FleetError::UnknownPlugin`]; an invalid request id or shape
    /// ([`ProvisionerError::Unsupported`], before anything is journaled);
    /// [`FleetError::Conflict`] when the request id is journaled for
    /// another plugin or shape; [`FleetError::Terminating`]; the plugin's
    /// error; or a journal failure.
    pub async fn provision(
        &self,
        plugin: &str,
        shape: &NodeShape,
        options: ProvisionOptions,
    ) -> std::result::Result<NodeHandle, FleetError> {
        let request_id = options
            .request_id
            .clone()
            .unwrap_or_else(crate::random_request_id);
        wasmprov_api::ids::check_request_id(&request_id)?;
        shape.validate()?;
        options.boot.validate()?;
        let backend = self.backend(plugin)?;
        let mut shape = shape.clone();
        if let Some(group) = &options.group {
            shape.labels.insert(GROUP_LABEL.into(), group.clone());
        }
        let _turn = self.lock(&request_id).await;
        let new = Intent {
            request_id: request_id.clone(),
            plugin: plugin.to_string(),
            shape: shape.clone(),
            created_ms: now_ms(),
            expires_ms: options.lease.map(deadline_ms),
            group: options.group.clone(),
            hourly_usd: options.hourly_usd,
            boot: options.boot.clone(),
            state: IntentState::Pending,
            generation: 0,
            last_error: None,
            missing_since_ms: None,
        };
        let (intent, fresh) = match self.journal.insert_new(&new)? {
            Ok(written) => (written, true),
            Err(existing)
                if existing.plugin == plugin
                    && existing.shape == shape
                    && existing.boot == options.boot =>
            {
                (existing, false)
            }
            Err(existing) => {
                return Err(FleetError::Conflict {
                    request_id,
                    plugin: existing.plugin,
                });
            }
        };
        if matches!(intent.state, IntentState::Terminating { .. }) {
            return Err(FleetError::Terminating(request_id));
        }
        let request = ProvisionRequest {
            request_id: request_id.clone(),
            shape,
            boot: options.boot,
        };
        match backend.provision_request(&request).await {
            Ok(node) => {
                // The caller is told the node exists: the journal must say so
                // too, whoever wrote the entry last (under this id's lock only
                // this call can have).
                let active = Intent {
                    state: IntentState::Active {
                        provider_id: node.provider_id.clone(),
                    },
                    last_error: None,
                    missing_since_ms: None,
                    ..intent
                };
                if self
                    .journal
                    .replace_if(active.generation, &active)?
                    .is_none()
                {
                    tracing::warn!(
                        request_id,
                        "intent changed during its provision; recording the node"
                    );
                    self.journal.put(&active)?;
                }
                Ok(node)
            }
            Err(e) => {
                if fresh && made_nothing(&e) {
                    self.journal.remove_if(&request_id, intent.generation)?;
                } else if intent.state == IntentState::Pending {
                    let marked = Intent {
                        last_error: Some(e.to_string()),
                        ..intent.clone()
                    };
                    self.journal.replace_if(intent.generation, &marked)?;
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
        let backend = self.backend(plugin)?;
        let find = || -> Result<Option<Intent>> {
            Ok(self
                .journal
                .all()?
                .into_iter()
                .find(|i| i.plugin == plugin && i.provider_id() == Some(provider_id)))
        };
        let (intent, _turn) = match find()? {
            Some(found) => {
                let turn = self.lock(&found.request_id).await;
                // Read again under the lock: it may have changed while we waited.
                match self.journal.get(&found.request_id)? {
                    Some(i) if i.plugin == plugin && i.provider_id() == Some(provider_id) => {
                        (Some(i), Some(turn))
                    }
                    _ => (None, Some(turn)),
                }
            }
            None => (None, None),
        };
        let intent = match intent {
            Some(i) => {
                let terminating = Intent {
                    state: IntentState::Terminating {
                        provider_id: provider_id.to_string(),
                    },
                    ..i.clone()
                };
                Some(
                    self.journal
                        .replace_if(i.generation, &terminating)?
                        .unwrap_or(terminating),
                )
            }
            None => None,
        };
        match backend.terminate(&provider_id.to_string()).await {
            Ok(()) | Err(ProvisionerError::NotFound(_)) => {
                if let Some(intent) = intent {
                    self.journal
                        .remove_if(&intent.request_id, intent.generation)?;
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

    /// The newest `limit` entries of the journal's history (lease
    /// expiries, leak terminations, vanished nodes, abandoned provisions),
    /// oldest first.
    ///
    /// # Errors
    /// When the journal cannot be read.
    pub fn history(&self, limit: usize) -> Result<Vec<crate::journal::Event>> {
        self.journal.history(limit)
    }
}
