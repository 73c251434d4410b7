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
//!
//! **Provenance.** Every request a fleet sends carries two labels on top of
//! the caller's: this host's owner id and the intent's provenance (the
//! journal's identity and the generation the intent was born under,
//! `wasmprov_api::provenance`), so the cloud keeps, on the node itself,
//! which journal made it and when. A caller's shape may not carry them.
//!
//! **A repeated request** whose intent is active is answered from the
//! backend's `get` of the node it made, without asking it to provision
//! again; one with another plugin, shape, boot data or lease is a conflict.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use wasmprov_api::provenance::{self, Provenance};
use wasmprov_api::{
    Backends, BootData, CloudProvisioner, NodeHandle, NodeShape, ProvisionRequest, ProvisionerError,
};

use crate::drain::{CallGate, DrainReport};
use crate::evidence::{Evidence, Lookup};
use crate::journal::{
    Event, EventKind, EventStatus, Intent, IntentState, Journal, deadline_ms, now_ms,
};
use crate::locks::{RequestGuard, RequestLocks};

/// The label a plugin puts on a node with the request id it was made for.
pub const REQUEST_LABEL: &str = provenance::REQUEST_LABEL;
/// The label a fleet puts on the nodes of a capacity group.
pub const GROUP_LABEL: &str = provenance::GROUP_LABEL;

/// The largest `max` a capacity group may have unless the fleet says
/// otherwise ([`Fleet::max_group_size`]): a group asked for more is refused,
/// so a typo or a hostile caller cannot make thousands of nodes.
pub const DEFAULT_MAX_GROUP_SIZE: u32 = 2000;

/// Capacity failures one [`scale`](Fleet::scale) pass takes before it stops
/// trying further offerings (unless the fleet says otherwise,
/// [`Fleet::fallback_limits`]).
pub const DEFAULT_MAX_CAPACITY_FAILURES: u32 = 5;

/// How much dearer than the cheapest fitting offering a [`scale`](Fleet::scale)
/// may go when it falls back (unless the fleet says otherwise,
/// [`Fleet::fallback_limits`]): ×2.
pub const DEFAULT_PRICE_CEILING: f64 = 2.0;

/// Why a fleet operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetError {
    /// No plugin (backend) of that name is loaded.
    #[error("no plugin {0:?} is loaded")]
    UnknownPlugin(String),
    /// The request id is being terminated; a new node needs a new id.
    #[error("request id {0:?} is being terminated; use another request id")]
    Terminating(String),
    /// The request id is already journaled for another plugin or shape.
    #[error(
        "request id {request_id:?} is already used for plugin {plugin:?} with another shape, boot data or subnet"
    )]
    Conflict {
        /// The request id.
        request_id: String,
        /// The plugin it was used with.
        plugin: String,
    },
    /// The request id is already journaled with another lease (renew a
    /// lease with [`Fleet::renew`]).
    #[error(
        "request id {request_id:?} is already used with {}; asked with {}; renew a lease explicitly instead",
        lease_words(*journaled), lease_words(*asked)
    )]
    LeaseConflict {
        /// The request id.
        request_id: String,
        /// The lease it was journaled with, in milliseconds.
        journaled: Option<u64>,
        /// The lease asked for now, in milliseconds.
        asked: Option<u64>,
    },
    /// No intent has that request id.
    #[error("request id {0:?} is not in the journal")]
    NotJournaled(String),
    /// The fleet is stopping and takes no new calls.
    #[error("the host is stopping and takes no new calls; retry against the next one")]
    Closing,
    /// The plugin's answer.
    #[error(transparent)]
    Provisioner(#[from] ProvisionerError),
    /// The journal could not be read or written; nothing was asked of the cloud
    /// after the failure.
    #[error("journal: {0:#}")]
    Journal(#[from] anyhow::Error),
}

fn lease_words(ms: Option<u64>) -> String {
    match ms {
        Some(ms) => format!("a lease of {} s", ms as f64 / 1000.0),
        None => "no lease".into(),
    }
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
    /// The cloud's id of the subnet (network, VPC) the node goes in; `None`
    /// for the backend's default. Journaled with the intent; a backend
    /// that cannot place it there refuses.
    pub subnet: Option<String>,
}

/// Whether an error of a provision means the cloud made no node, so that
/// the call that created the intent may remove it
/// ([`ProvisionerError::made_nothing`]).
#[must_use]
pub fn made_nothing(e: &ProvisionerError) -> bool {
    e.made_nothing()
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
    owner: Option<String>,
    pub(crate) reconciling: tokio::sync::Mutex<()>,
    pub(crate) scaling: tokio::sync::Mutex<()>,
    /// Calls on one request id run one at a time.
    pub(crate) requests: RequestLocks,
    /// Offerings that ran out of capacity recently; scaling skips them.
    pub(crate) unavailable: crate::Unavailable,
    /// Calls in flight; none taken once closed.
    pub(crate) calls: CallGate,
    /// Every plugin's catalogue, read with a deadline and kept for a TTL.
    pub(crate) catalogues: crate::Catalogues,
    /// The largest `max` a capacity group may have.
    pub(crate) max_group_size: u32,
    /// Capacity failures a scale pass takes before it stops.
    pub(crate) max_capacity_failures: u32,
    /// The dearest offering a scale pass may pick, relative to the cheapest fit.
    pub(crate) price_ceiling: f64,
    /// Why this fleet may not use its journal: it serves another owner id.
    owner_conflict: Option<String>,
    /// The plugins a reconcile listed since the journal was opened: the
    /// lease sweep ends a lease only once its plugin's cloud was listed (so
    /// a hold its nodes would raise had its chance).
    pub(crate) listed: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("backends", &self.backends.backend_names())
            .field("owner", &self.owner)
            .field("journal", &self.journal)
            .finish_non_exhaustive()
    }
}

impl Fleet {
    /// A fleet over `backends` (a wasm [`Host`](https://docs.rs/wasmprov-host),
    /// a map of native backends, or a [`BackendSet`](crate::BackendSet) of
    /// both) with its journal at `journal_path` (created if missing), and the
    /// backends' owner id ([`Backends::owner_id`]). Keep one journal per
    /// owner id: a second journal's nodes are orphans to this one (never
    /// terminated), and finding them holds every destructive action.
    ///
    /// # Errors
    /// When the journal cannot be opened (see [`Journal::open`]).
    pub fn open<B: Backends + 'static>(
        backends: Arc<B>,
        journal_path: impl AsRef<Path>,
    ) -> Result<Self> {
        let fleet = Self::with_journal(backends, Journal::open(journal_path)?);
        if let Some(why) = &fleet.owner_conflict {
            anyhow::bail!("{why}");
        }
        Ok(fleet)
    }

    /// A fleet over `backends` with a journal opened already. The journal
    /// is bound to the backends' owner id ([`Journal::bind_owner`]): a
    /// journal of another owner id makes every call of this fleet fail (and
    /// [`open`](Self::open) fail at once), since to it every node the
    /// journal names would look gone.
    #[must_use]
    pub fn with_journal<B: Backends + 'static>(backends: Arc<B>, journal: Journal) -> Self {
        let owner = backends.owner_id();
        let owner_conflict = owner
            .as_deref()
            .and_then(|o| journal.bind_owner(o).err())
            .map(|e| format!("{e:#}"));
        Self {
            backends,
            journal,
            owner,
            reconciling: tokio::sync::Mutex::new(()),
            scaling: tokio::sync::Mutex::new(()),
            requests: RequestLocks::default(),
            unavailable: crate::Unavailable::default(),
            calls: CallGate::default(),
            catalogues: crate::Catalogues::default(),
            max_group_size: DEFAULT_MAX_GROUP_SIZE,
            max_capacity_failures: DEFAULT_MAX_CAPACITY_FAILURES,
            price_ceiling: DEFAULT_PRICE_CEILING,
            owner_conflict,
            listed: std::sync::Mutex::default(),
        }
    }

    /// Fails when the journal serves another owner id.
    pub(crate) fn usable(&self) -> Result<()> {
        match &self.owner_conflict {
            Some(why) => anyhow::bail!("{why}"),
            None => Ok(()),
        }
    }

    /// How catalogues are read for scaling (and for callers that rank
    /// through [`catalogues`](Self::catalogues)): each kept for `ttl`, and
    /// waited for at most `deadline` (default
    /// [`DEFAULT_CATALOGUE_TTL`](crate::DEFAULT_CATALOGUE_TTL),
    /// [`DEFAULT_CATALOGUE_DEADLINE`](crate::DEFAULT_CATALOGUE_DEADLINE)).
    #[must_use]
    pub fn catalogue_cache(mut self, ttl: Duration, deadline: Duration) -> Self {
        self.catalogues = crate::Catalogues::new(ttl, deadline);
        self
    }

    /// The catalogues this fleet ranks with.
    #[must_use]
    pub fn catalogues(&self) -> &crate::Catalogues {
        &self.catalogues
    }

    /// The largest `max` a capacity group may have (default
    /// [`DEFAULT_MAX_GROUP_SIZE`](DEFAULT_MAX_GROUP_SIZE)); a group
    /// above it is refused by [`scale`](Self::scale).
    #[must_use]
    pub fn max_group_size(mut self, max: u32) -> Self {
        self.max_group_size = max;
        self
    }

    /// The largest `max` a capacity group may have.
    #[must_use]
    pub fn group_size_limit(&self) -> u32 {
        self.max_group_size
    }

    /// How far a [`scale`](Self::scale) pass falls back when offerings run
    /// out: it stops after `max_capacity_failures` capacity failures
    /// (default [`DEFAULT_MAX_CAPACITY_FAILURES`]; at least one attempt is
    /// always made), and never picks an offering priced above
    /// `price_ceiling` times the cheapest fitting offering's price (default
    /// [`DEFAULT_PRICE_CEILING`], ×2), whether or not that one has capacity
    /// now.
    ///
    /// # Errors
    /// A ceiling below 1 or not finite.
    pub fn fallback_limits(
        mut self,
        max_capacity_failures: u32,
        price_ceiling: f64,
    ) -> Result<Self> {
        if !price_ceiling.is_finite() || price_ceiling < 1.0 {
            anyhow::bail!(
                "price ceiling {price_ceiling} is not a ratio of at least 1 to the cheapest fitting offering"
            );
        }
        self.max_capacity_failures = max_capacity_failures.max(1);
        self.price_ceiling = price_ceiling;
        Ok(self)
    }

    /// The fallback limits of [`scale`](Self::scale): capacity failures per
    /// pass, and the price ceiling relative to the cheapest fit.
    #[must_use]
    pub fn fallback(&self) -> (u32, f64) {
        (self.max_capacity_failures, self.price_ceiling)
    }

    /// The owner id this fleet's nodes carry, instead of the backends' own.
    /// Every request carries it as the `wasmprov-owner` label, and every
    /// node a backend returns must carry it. Without any owner id (a set of
    /// native backends that names none), answers are not filtered by owner
    /// and only provenance tells this journal's nodes.
    ///
    /// # Errors
    /// When `owner` is not a valid id (`wasmprov_api::ids`).
    pub fn owner_id(mut self, owner: impl Into<String>) -> Result<Self> {
        let owner = owner.into();
        wasmprov_api::ids::check_owner_id(&owner)?;
        self.journal.bind_owner(&owner)?;
        self.owner_conflict = None;
        self.owner = Some(owner);
        Ok(self)
    }

    /// The owner id, when known.
    #[must_use]
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
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

    /// What this fleet judges backends' answers by (`evidence.rs`).
    pub(crate) fn evidence(&self) -> Evidence<'_> {
        Evidence {
            owner: self.owner(),
            journal: &self.journal,
            backends: &*self.backends,
        }
    }

    /// Whether the journal takes writes: false after a failed write until
    /// it was reopened and written again ([`check_journal`](Self::check_journal)).
    /// A fleet whose journal is unhealthy serves nothing it cannot journal.
    #[must_use]
    pub fn healthy(&self) -> bool {
        self.journal.healthy()
    }

    /// Reopens the journal after a failed write and writes to it.
    ///
    /// # Errors
    /// When it still cannot be written.
    pub fn check_journal(&self) -> Result<()> {
        self.journal.check()
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

    /// The request a backend is asked for `intent`: its shape with this
    /// host's owner id and the intent's provenance as labels.
    pub(crate) fn request_for(&self, intent: &Intent) -> ProvisionRequest {
        let mut shape = intent.shape.clone();
        let provenance: Option<Provenance> = self.journal.provenance_of(intent);
        if let Some(owner) = &self.owner {
            for (k, v) in provenance::request_labels(owner, provenance.as_ref()) {
                shape.labels.insert(k, v);
            }
        } else if let Some(p) = &provenance {
            shape
                .labels
                .insert(provenance::JOURNAL_LABEL.into(), p.label_value());
        }
        ProvisionRequest {
            request_id: intent.request_id.clone(),
            shape,
            boot: intent.boot.clone(),
            subnet: intent.subnet.clone(),
        }
    }

    /// Creates a node, journaling the intent first. Provisioning again with
    /// the same request id returns the same node: while the intent is
    /// active, from the backend's `get` of it without asking it to create
    /// anything; while it is pending, by asking again (the plugins are
    /// idempotent per request id). Calls with one request id run one after
    /// the other. When the cloud's answer is lost (a transport error, a
    /// timeout, a plugin fault, a crash), the intent stays pending and
    /// [`reconcile`](Self::reconcile) settles it; when nothing left the host
    /// ([`ProvisionerError::made_nothing`]), it is forgotten at once.
    ///
    /// # Errors
    /// [`FleetError::UnknownPlugin`]; an invalid request id, shape or label
    /// ([`ProvisionerError::Unsupported`], before anything is journaled);
    /// [`FleetError::Conflict`] when the request id is journaled for
    /// another plugin or shape, [`FleetError::LeaseConflict`] for another
    /// lease; [`FleetError::Terminating`]; `not-found` when the node an
    /// active intent names no longer exists; the plugin's error;
    /// [`FleetError::Closing`]; or a journal failure.
    pub async fn provision(
        &self,
        plugin: &str,
        shape: &NodeShape,
        options: ProvisionOptions,
    ) -> std::result::Result<NodeHandle, FleetError> {
        let mut ticket = self.calls.enter().ok_or(FleetError::Closing)?;
        self.usable()?;
        let request_id = options
            .request_id
            .clone()
            .unwrap_or_else(crate::random_request_id);
        wasmprov_api::ids::check_request_id(&request_id)?;
        shape.validate()?;
        if let Some(key) = shape
            .labels
            .keys()
            .find(|k| provenance::is_reserved_label(k))
        {
            return Err(ProvisionerError::Unsupported(format!(
                "invalid shape: label {key:?} is set by the host and its plugins, not by a caller"
            ))
            .into());
        }
        options.boot.validate()?;
        let backend = self.backend(plugin)?;
        let mut shape = shape.clone();
        if let Some(group) = &options.group {
            shape.labels.insert(GROUP_LABEL.into(), group.clone());
        }
        let lease_ms = options
            .lease
            .map(|l| u64::try_from(l.as_millis()).unwrap_or(u64::MAX));
        let _turn = self.lock(&request_id).await;
        let new = Intent {
            request_id: request_id.clone(),
            plugin: plugin.to_string(),
            shape: shape.clone(),
            created_ms: now_ms(),
            expires_ms: options.lease.map(deadline_ms),
            lease_ms,
            group: options.group.clone(),
            hourly_usd: options.hourly_usd,
            boot: options.boot.clone(),
            subnet: options.subnet.clone(),
            state: IntentState::Pending,
            ..Intent::default()
        };
        let (intent, fresh) = match self.journal.insert_new(&new)? {
            Ok(written) => (written, true),
            Err(existing)
                if existing.plugin == plugin
                    && existing.shape == shape
                    && existing.boot == options.boot
                    && existing.subnet == options.subnet =>
            {
                if existing.lease() != lease_ms {
                    return Err(FleetError::LeaseConflict {
                        request_id,
                        journaled: existing.lease(),
                        asked: lease_ms,
                    });
                }
                (existing, false)
            }
            Err(existing) => {
                return Err(FleetError::Conflict {
                    request_id,
                    plugin: existing.plugin,
                });
            }
        };
        match &intent.state {
            IntentState::Terminating { .. } => return Err(FleetError::Terminating(request_id)),
            IntentState::Active { provider_id } => {
                // Made already: the node answers, the backend makes nothing.
                return match self
                    .evidence()
                    .look_up(plugin, &*backend, provider_id)
                    .await?
                {
                    Lookup::Present(node) => Ok(*node),
                    Lookup::Absent => Err(ProvisionerError::NotFound(format!(
                        "the node {provider_id} made for request {request_id} no longer exists; \
                         reconcile forgets it once confirmed, then the request id can be used again"
                    ))
                    .into()),
                    Lookup::Foreign => Err(ProvisionerError::Plugin {
                        plugin: plugin.to_string(),
                        fault: wasmprov_api::PluginFault::Contract,
                        message: format!(
                            "its get of {provider_id} answered a node of another owner"
                        ),
                    }
                    .into()),
                };
            }
            IntentState::Pending => {}
        }
        ticket.provisioning(&request_id, intent.generation);
        let request = self.request_for(&intent);
        let answer = match backend.provision_request(&request).await {
            Ok(node) => match self.evidence().not_the_answer(&intent, &node) {
                Some(why) => {
                    tracing::warn!(request_id, node = %node.provider_id, "{why}");
                    Err(ProvisionerError::Conflict(why))
                }
                None => Ok(node),
            },
            other => other,
        };
        match answer {
            Ok(node) => {
                // The caller is told the node exists: the journal must say so
                // too, whoever wrote the entry last (under this id's lock only
                // this call, or a drain marking it cut short, can have).
                let current = self.journal.get(&request_id)?.unwrap_or(intent);
                let active = Intent {
                    state: IntentState::Active {
                        provider_id: node.provider_id.clone(),
                    },
                    last_error: None,
                    missing_since_ms: None,
                    ..current
                };
                let made = |e: anyhow::Error| {
                    FleetError::Journal(e.context(format!(
                        "the node {} was made for request {request_id}, but the journal could not record it: its intent, written before the cloud was asked, names the request, reconcile confirms the node, and repeating the request returns it",
                        node.provider_id
                    )))
                };
                if self
                    .journal
                    .replace_if(active.generation, &active)
                    .map_err(made)?
                    .is_none()
                {
                    tracing::warn!(
                        request_id,
                        "intent changed during its provision; recording the node"
                    );
                    self.journal.put(&active).map_err(made)?;
                }
                Ok(node)
            }
            Err(e) => {
                if fresh && e.made_nothing() {
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
    /// crash in between is finished by reconcile, and writing the
    /// termination to the history before the cloud is asked (completed
    /// after). A node already gone is success.
    ///
    /// # Errors
    /// [`FleetError::UnknownPlugin`], the plugin's error (the intent then
    /// stays `terminating`), [`FleetError::Closing`], or a journal failure.
    pub async fn terminate(
        &self,
        plugin: &str,
        provider_id: &str,
    ) -> std::result::Result<(), FleetError> {
        self.terminate_as(
            plugin,
            provider_id,
            EventKind::Terminated,
            "a caller asked".into(),
        )
        .await
    }

    pub(crate) async fn terminate_as(
        &self,
        plugin: &str,
        provider_id: &str,
        kind: EventKind,
        reason: String,
    ) -> std::result::Result<(), FleetError> {
        let _ticket = self.calls.enter().ok_or(FleetError::Closing)?;
        self.usable()?;
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
        let event = self.event(
            kind,
            plugin,
            intent.as_ref().map(|i| i.request_id.as_str()),
            Some(provider_id),
            reason,
        );
        let started = Event {
            status: EventStatus::Started,
            ..event
        };
        let (intent, seq) = match intent {
            Some(i) => {
                let terminating = Intent {
                    state: IntentState::Terminating {
                        provider_id: provider_id.to_string(),
                    },
                    ..i.clone()
                };
                match self
                    .journal
                    .replace_with_event(i.generation, &terminating, &started)?
                {
                    Some((t, e)) => (Some(t), e.seq),
                    None => (None, self.journal.record(&started)?.seq),
                }
            }
            None => (None, self.journal.record(&started)?.seq),
        };
        match backend.terminate(&provider_id.to_string()).await {
            Ok(()) | Err(ProvisionerError::NotFound(_)) => {
                match intent {
                    Some(intent) => {
                        self.journal.remove_and_complete(
                            &intent.request_id,
                            intent.generation,
                            Some(seq),
                        )?;
                    }
                    None => self.journal.complete(seq, None)?,
                }
                Ok(())
            }
            Err(e) => {
                self.journal.complete(seq, Some(e.to_string()))?;
                Err(e.into())
            }
        }
    }

    /// Moves the lease of `request_id` to `lease` from now, and keeps the
    /// renewal in the history. The lease a repeated provision must match
    /// stays the one first asked for.
    ///
    /// # Errors
    /// [`FleetError::NotJournaled`], [`FleetError::Terminating`],
    /// [`FleetError::Closing`], or a journal failure.
    pub async fn renew(
        &self,
        request_id: &str,
        lease: Duration,
    ) -> std::result::Result<Intent, FleetError> {
        let _ticket = self.calls.enter().ok_or(FleetError::Closing)?;
        self.usable()?;
        wasmprov_api::ids::check_request_id(request_id)?;
        let _turn = self.lock(request_id).await;
        let Some(intent) = self.journal.get(request_id)? else {
            return Err(FleetError::NotJournaled(request_id.to_string()));
        };
        if matches!(intent.state, IntentState::Terminating { .. }) {
            return Err(FleetError::Terminating(request_id.to_string()));
        }
        let expires = deadline_ms(lease);
        let renewed = Intent {
            expires_ms: Some(expires),
            ..intent.clone()
        };
        let event = self.event(
            EventKind::LeaseRenewed,
            &intent.plugin,
            Some(request_id),
            intent.provider_id(),
            format!(
                "lease renewed for {} s (was {})",
                lease.as_secs_f64(),
                match intent.expires_ms {
                    Some(e) => format!("ending at {e} ms"),
                    None => "no lease".into(),
                }
            ),
        );
        // One transaction: the renewal and its history entry.
        let Some((written, _)) =
            self.journal
                .replace_and_record(intent.generation, &renewed, &event)?
        else {
            return Err(FleetError::NotJournaled(request_id.to_string()));
        };
        Ok(written)
    }

    /// Takes no new calls from now on ([`FleetError::Closing`]); calls in
    /// flight go on. Reconciles and lease sweeps are the caller's to stop.
    pub fn close(&self) {
        self.calls.close();
    }

    /// Whether the fleet was closed ([`close`](Self::close)).
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.calls.is_closed()
    }

    /// Calls in flight now.
    #[must_use]
    pub fn calls_in_flight(&self) -> usize {
        self.calls.running()
    }

    /// Closes the fleet and waits for the calls in flight, up to
    /// `deadline`. A provision still running then has its intent marked as
    /// cut short (as if its caller had been told it failed): reconcile
    /// confirms its node if one shows up and forgets it otherwise, instead
    /// of making one on the next start.
    ///
    /// # Errors
    /// When the journal cannot be written.
    pub async fn drain(&self, deadline: Duration) -> Result<DrainReport> {
        self.close();
        let drained = self.calls.wait_idle(deadline).await;
        let mut report = DrainReport {
            drained,
            still_running: self.calls.running(),
            cut_short: Vec::new(),
        };
        if drained {
            return Ok(report);
        }
        for (request_id, _) in self.calls.provisions() {
            if let Some(i) = self.journal.get(&request_id)?
                && i.state == IntentState::Pending
            {
                let marked = Intent {
                    last_error: Some(format!(
                        "the host stopped before the call finished (after waiting {} s)",
                        deadline.as_secs_f64()
                    )),
                    ..i.clone()
                };
                if self.journal.replace_if(i.generation, &marked)?.is_some() {
                    report.cut_short.push(request_id);
                }
            }
        }
        Ok(report)
    }

    /// Every journaled intent.
    ///
    /// # Errors
    /// When the journal cannot be read.
    pub fn intents(&self) -> Result<Vec<Intent>> {
        self.journal.all()
    }

    /// The newest `limit` entries of the journal's history (terminations,
    /// lease expiries and renewals, leaks, orphans, adoptions, vanished
    /// nodes, abandoned provisions), oldest first.
    ///
    /// # Errors
    /// When the journal cannot be read.
    pub fn history(&self, limit: usize) -> Result<Vec<crate::journal::Event>> {
        self.journal.history(limit)
    }

    /// The doubt holding every destructive action, if one stands (see
    /// [`Fleet::reconcile`]).
    ///
    /// # Errors
    /// When the journal cannot be read.
    pub fn held(&self) -> Result<Option<crate::journal::Doubt>> {
        self.journal.doubt()
    }

    /// A history entry of `kind` (counted in the backends' metrics).
    pub(crate) fn event(
        &self,
        kind: EventKind,
        plugin: &str,
        request_id: Option<&str>,
        provider_id: Option<&str>,
        reason: String,
    ) -> Event {
        self.backends().fleet_event(plugin, kind.as_str());
        Event {
            at_ms: now_ms(),
            kind,
            plugin: plugin.to_string(),
            request_id: request_id.map(str::to_string),
            provider_id: provider_id.map(str::to_string),
            reason,
            ..Event::default()
        }
    }
}
