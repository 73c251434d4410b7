//! The intent journal: what this host asked clouds for, kept durably so a
//! restarted host knows what it was doing when it stopped.
//!
//! An intent is written (and synced to disk) *before* the plugin is asked
//! to create anything, and updated once the cloud answered. So after a
//! crash at any point, every node this host may have created is named by an
//! intent, and [`Fleet::reconcile`](crate::Fleet::reconcile) can tell an
//! interrupted provision (intent pending, node present or absent) from a
//! leaked node (present, owned, but no intent wants it).
//!
//! **Provenance.** A journal draws an identity when it is created
//! ([`Journal::identity`]), and every intent is recorded under a
//! generation drawn from a journal-wide counter. The fleet tags every node
//! with both (`wasmprov_api::provenance`), so the cloud itself says which
//! journal made a node and when. Each time a process opens the journal and
//! writes, its generations start a new *interval* at least the current
//! time in microseconds (and above any generation seen on a node); the
//! journal keeps the intervals it issued. So a copy of the journal knows
//! exactly which generations it issued: a node whose generation it did not
//! issue (made after the copy was taken, by the journal that was lost) is
//! never taken for a leak of this one (see [`Journal::issued`]).
//!
//! **Health.** A write that fails for storage reasons (a full disk, an I/O
//! error) marks the journal failed ([`Journal::healthy`]); the next use
//! reopens the database before anything else, so the journal recovers by
//! itself when the disk does, and a failed journal never lets a call go on
//! as if it had written.
//!
//! The journal is an embedded [redb](https://docs.rs/redb) database, one
//! file; one process at a time may hold it (a second gets an error naming
//! the file).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use serde::{Deserialize, Serialize};
use wasmprov_api::provenance::Provenance;
use wasmprov_api::{BootData, NodeShape};

const INTENTS: TableDefinition<&str, &[u8]> = TableDefinition::new("intents");
const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");
const HISTORY: TableDefinition<u64, &[u8]> = TableDefinition::new("history");
/// The journal's identity and its standing (doubt).
const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// The generations this journal issued: interval start → end (inclusive).
const ISSUED: TableDefinition<u64, u64> = TableDefinition::new("issued");
/// Nodes reconcile saw that no intent wants: `plugin \0 provider id` → [`Sighting`].
const SIGHTINGS: TableDefinition<&str, &[u8]> = TableDefinition::new("sightings");
/// Orphans the operator confirmed as not this journal's: key as above → ms.
const CONFIRMED: TableDefinition<&str, u64> = TableDefinition::new("confirmed");
/// Nodes whose active intent was forgotten as vanished: `plugin \0 provider
/// id` and `plugin \0\0 request id` → [`Forgotten`]. Such a node listed
/// again is never a leak: the lists or `get` were wrong about it.
const FORGOTTEN: TableDefinition<&str, &[u8]> = TableDefinition::new("forgotten");

/// The counter every intent's generation is drawn from.
const GENERATION: &str = "\u{0}generation";
/// The counter history entries are numbered from.
const HISTORY_SEQ: &str = "\u{0}history";
/// The counter of reconcile passes (sightings name the pass that saw them).
const PASS: &str = "\u{0}pass";
/// The highest generation seen on a node carrying this journal's identity.
const MAX_SEEN: &str = "\u{0}max-seen";
/// History entries kept; older ones are dropped as new ones come.
pub const HISTORY_KEEP: u64 = 10_000;
/// Issued intervals kept; a generation of an interval dropped is treated as
/// not issued (its nodes become orphans: never destroyed, only reported).
pub const ISSUED_KEEP: u64 = 100_000;
/// Confirmed orphans kept.
const CONFIRMED_KEEP: u64 = 100_000;
/// Where the identity is kept in [`META`].
const IDENTITY_KEY: &str = "identity";
/// Where the standing doubt is kept in [`META`].
const DOUBT_KEY: &str = "doubt";
/// Where the owner id the journal serves is kept in [`META`].
const OWNER_KEY: &str = "owner";
/// Forgotten nodes kept (oldest dropped first).
const FORGOTTEN_KEEP: u64 = 100_000;
/// How far past the floor a session's first generation may land, at random
/// (2^32 µs: about 72 minutes of generations); two sessions from one floor
/// overlap with a chance of about their length over this.
const SESSION_SPREAD: u64 = 1 << 32;
/// How far ahead of now a generation seen on a node may be and still be
/// believed (clocks ahead, and the random stretches of many sessions): a
/// century. Beyond it, it is a forgery.
const PLAUSIBLE_AHEAD: u64 = 100 * 365 * 24 * 3600 * 1_000_000;
/// Where [`Journal::check`] writes.
const PROBE_KEY: &str = "\u{0}probe";
/// What [`Journal::check`] writes: more than the largest intent (64 KiB of
/// user data, in JSON, and the rest of the shape).
const PROBE_BYTES: usize = 160 << 10;

/// Where an intent is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum IntentState {
    /// Recorded; the plugin was (or is being) asked to create the node, and
    /// its answer has not been recorded.
    #[default]
    Pending,
    /// The node exists.
    Active {
        /// The backend's id of the node.
        provider_id: String,
    },
    /// Termination was asked and has not been confirmed.
    Terminating {
        /// The backend's id of the node.
        provider_id: String,
    },
}

/// One node this host wants (or wanted, until confirmed gone).
///
/// Fields are added over time; build one with `..Intent::default()`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Intent {
    /// The request id the node is (being) provisioned under; the key.
    pub request_id: String,
    /// The plugin asked.
    pub plugin: String,
    /// The shape asked for.
    pub shape: NodeShape,
    /// When the intent was recorded, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// When the node's lease runs out, in milliseconds since the Unix epoch;
    /// reconcile terminates it after that.
    pub expires_ms: Option<u64>,
    /// The capacity group the node belongs to.
    pub group: Option<String>,
    /// The hourly price the plugin quoted when it was chosen, if known.
    pub hourly_usd: Option<f64>,
    /// What the node boots with (user data may carry a join token: the
    /// journal file is the operator's, like the plugin directory).
    #[serde(default, skip_serializing_if = "BootData::is_empty")]
    pub boot: BootData,
    /// The subnet (network, VPC) the node was asked in, if any (contract
    /// 0.3): a provision resumed after a crash asks the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<String>,
    /// Where it is.
    #[serde(flatten)]
    pub state: IntentState,
    /// Who wrote the intent last: a number drawn from a journal-wide
    /// counter on every write. A call removes or changes an intent only
    /// while the generation is the one it wrote.
    #[serde(default)]
    pub generation: u64,
    /// The generation the intent was first recorded under, which the node
    /// carries as its provenance (0: recorded before provenance existed, or
    /// adopted).
    #[serde(default)]
    pub born: u64,
    /// The lease asked for, in milliseconds (a repeated request with another
    /// lease is a conflict; a renewal moves [`expires_ms`](Self::expires_ms)
    /// only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
    /// The error the last call for this pending intent returned to its
    /// caller, when it failed in a way that may have left a node (a
    /// transport error, a timeout, a rate limit, a plugin fault). Reconcile
    /// confirms the node if it shows up, and otherwise forgets the intent
    /// (the caller was told it failed) instead of asking again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Since when (ms since the epoch) the node has been missing from its
    /// cloud's list (an active node, or a pending one's): it is believed
    /// gone only when a later list, at least the reconcile policy's grace
    /// after this one, misses it too (and, for an active node, `get` says
    /// it does not exist).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_since_ms: Option<u64>,
    /// The history entry of the termination under way (written before the
    /// cloud was asked; completed when it answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_seq: Option<u64>,
    /// Whether the intent records a node adopted by `reconcile --adopt`
    /// rather than one this journal asked for.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adopted: bool,
}

impl Intent {
    /// The node's provider id, once known.
    #[must_use]
    pub fn provider_id(&self) -> Option<&str> {
        match &self.state {
            IntentState::Pending => None,
            IntentState::Active { provider_id } | IntentState::Terminating { provider_id } => {
                Some(provider_id)
            }
        }
    }

    /// Whether the lease ran out at `now_ms`.
    #[must_use]
    pub fn expired(&self, now_ms: u64) -> bool {
        self.expires_ms.is_some_and(|t| t <= now_ms)
    }

    /// The lease asked for, in milliseconds: [`lease_ms`](Self::lease_ms),
    /// or for an intent recorded before it was kept, its first deadline
    /// minus its creation.
    #[must_use]
    pub fn lease(&self) -> Option<u64> {
        self.lease_ms
            .or_else(|| self.expires_ms.map(|e| e.saturating_sub(self.created_ms)))
    }
}

/// What happened to a node or an intent, kept in the journal's history.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// A node was terminated because its lease ran out.
    #[default]
    LeaseExpired,
    /// A node no intent wanted was terminated.
    LeakTerminated,
    /// A journaled node was confirmed gone from its cloud, and its intent
    /// was forgotten.
    Vanished,
    /// A pending provision was given up (not found after a failed call,
    /// refused for good, lease run out, or resume turned off).
    Abandoned,
    /// A node was terminated because a caller asked (terminate).
    Terminated,
    /// A node was terminated to shrink its capacity group.
    ScaledDown,
    /// A node of this owner that this journal cannot prove it made was
    /// found (first sighting); it is left alone.
    Orphaned,
    /// An orphan was recorded as an intent (`reconcile --adopt`).
    Adopted,
    /// The operator confirmed orphans as not this journal's, lifting the
    /// hold on destructive actions.
    OrphansConfirmed,
    /// A lease was renewed.
    LeaseRenewed,
    /// This journal found nodes it did not make under its own identity
    /// (stale) or nodes of its owner made by another journal (foreign),
    /// and holds every destructive action until the operator adopts or
    /// confirms them.
    Held,
}

impl EventKind {
    /// The name used in JSON, metrics and tables.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::LeaseExpired => "lease_expired",
            Self::LeakTerminated => "leak_terminated",
            Self::Vanished => "vanished",
            Self::Abandoned => "abandoned",
            Self::Terminated => "terminated",
            Self::ScaledDown => "scaled_down",
            Self::Orphaned => "orphaned",
            Self::Adopted => "adopted",
            Self::OrphansConfirmed => "orphans_confirmed",
            Self::LeaseRenewed => "lease_renewed",
            Self::Held => "held",
        }
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where an entry of the history stands: a termination is written before
/// the cloud is asked (`started`) and completed after (`done` or `failed`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventStatus {
    /// What it records has happened.
    #[default]
    Done,
    /// Under way: the cloud was (or is being) asked.
    Started,
    /// The cloud refused or could not be reached (see `error`).
    Failed,
}

impl EventStatus {
    /// The name used in JSON and tables.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::Started => "started",
            Self::Failed => "failed",
        }
    }
}

/// One entry of the journal's history: what, when, why.
///
/// Fields are added over time; build one with `..Event::default()`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Its number (1, 2, ...; never reused).
    #[serde(default)]
    pub seq: u64,
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// What happened.
    pub kind: EventKind,
    /// The plugin of the node.
    pub plugin: String,
    /// The request id, when the node had one.
    pub request_id: Option<String>,
    /// The node, when it was known.
    pub provider_id: Option<String>,
    /// Why.
    pub reason: String,
    /// Where it stands.
    #[serde(default)]
    pub status: EventStatus,
    /// When it was completed (ms since the epoch), for an entry written
    /// before the cloud was asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_ms: Option<u64>,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why a journal holds every destructive action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DoubtKind {
    /// A node carries this journal's identity under a generation this copy
    /// of the journal never issued: the journal is older than the one that
    /// made it (restored from a backup, or one of two copies in use).
    Stale,
    /// A node of this owner carries another journal's identity: the journal
    /// was lost or replaced, or another host uses the same owner id.
    Foreign,
    /// A node whose intent this journal forgot as vanished is listed again:
    /// the lists and `get` said it was gone, and were wrong.
    Returned,
    /// The journal file was damaged and repaired when it was opened: the
    /// repair may have taken back writes (intents, renewals).
    Repaired,
    /// The journal is older than the one this state directory last ran
    /// (its mark says so): restored from a backup, writes since are lost
    /// (intents, renewals).
    Rewound,
}

impl DoubtKind {
    /// The name used in JSON and messages.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stale => "stale",
            Self::Foreign => "foreign",
            Self::Returned => "returned",
            Self::Repaired => "repaired",
            Self::Rewound => "rewound",
        }
    }
}

/// The evidence a journal found that it does not know the whole fleet of
/// its owner; while it stands, reconcile, the lease sweep and scale-down
/// terminate nothing and forget nothing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Doubt {
    /// Stale or foreign.
    pub kind: DoubtKind,
    /// When it was first found, ms since the epoch.
    pub since_ms: u64,
    /// The plugin listing the first node found.
    pub plugin: String,
    /// The first node found.
    pub provider_id: String,
    /// What the node carries, in words.
    pub detail: String,
}

impl std::fmt::Display for Doubt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.kind {
            DoubtKind::Stale => write!(
                f,
                "stale journal: {}/{} {}; this journal is older than the one that made it (restored from a backup?)",
                self.plugin, self.provider_id, self.detail
            ),
            DoubtKind::Foreign => write!(
                f,
                "foreign journal: {}/{} {}; the journal that made it was lost or replaced, or another host uses this owner id",
                self.plugin, self.provider_id, self.detail
            ),
            DoubtKind::Returned => write!(
                f,
                "node returned: {}/{} {}; the cloud's lists and get said it was gone, and were wrong (a wrong endpoint, project, token or owner id, or an outage)",
                self.plugin, self.provider_id, self.detail
            ),
            DoubtKind::Repaired | DoubtKind::Rewound => {
                write!(f, "{}", self.detail)?;
                return f.write_str(
                    ". Destructive actions are held until the operator lifts the hold (reconcile --confirm-orphans)",
                );
            }
        }?;
        f.write_str(
            ". Destructive actions are held until the operator adopts the orphans (reconcile --adopt) or confirms them (reconcile --confirm-orphans)",
        )
    }
}

/// A node whose active intent was forgotten as vanished.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forgotten {
    /// Its request id.
    pub request_id: String,
    /// Its provider id.
    pub provider_id: String,
    /// The generation its intent was born under (its provenance).
    pub born: u64,
    /// When it was forgotten, ms since the epoch.
    pub at_ms: u64,
}

/// What reconcile remembers of a node no intent wants, between passes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Sighting {
    /// When it was first seen, ms since the epoch.
    pub(crate) first_ms: u64,
    /// The pass that first saw it.
    pub(crate) first_pass: u64,
    /// Whether the orphan was written to the history.
    #[serde(default)]
    pub(crate) reported: bool,
}

/// Milliseconds since the Unix epoch, now.
#[must_use]
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// `now + ttl` in milliseconds since the epoch.
#[must_use]
pub fn deadline_ms(ttl: Duration) -> u64 {
    now_ms().saturating_add(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX))
}

/// The durable journal of intents.
///
/// ```
/// use wasmprov_fleet::journal::{Intent, IntentState, Journal};
/// use wasmprov_api::NodeShape;
///
/// let dir = tempfile::tempdir()?;
/// let journal = Journal::open(dir.path().join("journal.redb"))?;
/// let written = journal.put(&Intent {
///     request_id: "web-1".into(),
///     plugin: "hetzner".into(),
///     shape: NodeShape::new(2.0, 4 << 30),
///     created_ms: wasmprov_fleet::journal::now_ms(),
///     group: Some("web".into()),
///     ..Intent::default()
/// })?;
/// assert_eq!(journal.get("web-1")?.unwrap().state, IntentState::Pending);
/// assert!(journal.issued(written.generation)?);
/// assert_eq!(journal.next_seq("web")?, 1);
/// assert_eq!(journal.next_seq("web")?, 2);
/// journal.remove("web-1")?;
/// assert!(journal.all()?.is_empty());
/// # Ok::<(), anyhow::Error>(())
/// ```
pub struct Journal {
    db: RwLock<Option<redb::Database>>,
    path: PathBuf,
    identity: String,
    history_keep: u64,
    /// Set by a write that failed for storage reasons; the next use reopens.
    failed: AtomicBool,
    /// Writes that failed for storage reasons, ever.
    failures: std::sync::atomic::AtomicU64,
    /// The start of the interval this process issues generations in, once
    /// it wrote one.
    session: Mutex<Option<u64>>,
    /// The last generation this process wrote (committed or not).
    last: std::sync::atomic::AtomicU64,
    /// Held while the mark is written.
    marking: Mutex<()>,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl Drop for Journal {
    /// The mark records where this run left the journal.
    fn drop(&mut self) {
        if let Ok(hw) = self.high_water() {
            self.write_mark(hw, true);
        }
    }
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("path", &self.path)
            .field("identity", &self.identity)
            .finish_non_exhaustive()
    }
}

impl Journal {
    /// Opens (creating if needed) the journal at `path`, with a lock file
    /// beside it (`<path>.lock`) held for as long as the journal is open.
    /// A new journal draws its identity here.
    ///
    /// # Errors
    /// When another process holds the journal, or the file cannot be
    /// created, read or repaired.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        let lock_path = path.with_extension("lock");
        let lock_file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .with_context(|| format!("opening {}", lock_path.display()))?;
        let lock =
            match nix::fcntl::Flock::lock(lock_file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
                Ok(l) => l,
                Err((_, nix::errno::Errno::EWOULDBLOCK)) => bail!(
                    "the journal {} is in use by another process (one host per journal)",
                    path.display()
                ),
                Err((_, e)) => {
                    return Err(e).with_context(|| format!("locking {}", lock_path.display()));
                }
            };
        let (db, repaired) = guarded("opening", &path, || open_db(&path))?;
        let identity = {
            let txn = db.begin_write()?;
            let identity = {
                let mut meta = txn.open_table(META)?;
                let existing = meta
                    .get(IDENTITY_KEY)?
                    .map(|v| String::from_utf8_lossy(v.value()).into_owned());
                match existing {
                    Some(id) if wasmprov_api::provenance::is_journal_id(&id) => id,
                    Some(id) => bail!(
                        "the journal {} has a malformed identity {id:?}",
                        path.display()
                    ),
                    None => {
                        let id = wasmprov_api::provenance::journal_id_from(rand::random());
                        meta.insert(IDENTITY_KEY, id.as_bytes())?;
                        id
                    }
                }
            };
            txn.commit()
                .with_context(|| format!("initialising the journal {}", path.display()))?;
            identity
        };
        let journal = Self {
            db: RwLock::new(Some(db)),
            path,
            identity,
            history_keep: HISTORY_KEEP,
            failed: AtomicBool::new(false),
            failures: std::sync::atomic::AtomicU64::new(0),
            session: Mutex::new(None),
            last: std::sync::atomic::AtomicU64::new(0),
            marking: Mutex::new(()),
            _lock: lock,
        };
        // Read every record once: a damaged page is an error here, not a
        // panic at the first reconcile.
        journal.all()?;
        journal.history(usize::MAX)?;
        if repaired {
            journal.raise_open_doubt(
                DoubtKind::Repaired,
                format!(
                    "journal repaired: {} was damaged and repaired when opened, which may have taken back its last writes (intents, lease renewals)",
                    journal.path.display()
                ),
            )?;
        }
        let hw = journal.high_water()?;
        let mark_path = journal.mark_path();
        match read_mark(&mark_path) {
            Mark::Of(id, mark) if id == journal.identity && mark > hw => {
                journal.raise_open_doubt(
                    DoubtKind::Rewound,
                    format!(
                        "journal rewound: {} is at generation {hw}, but this state directory last ran it at {mark} (its mark, {}): it was restored from an older copy, and what was written since is lost: intents, and lease renewals{}",
                        journal.path.display(),
                        mark_path.display(),
                        journal.leases_to_check()?
                    ),
                )?;
            }
            Mark::Damaged(why) if hw > 0 => {
                journal.raise_open_doubt(
                    DoubtKind::Rewound,
                    format!(
                        "journal mark damaged: {} ({why}), so whether {} was restored from an older copy cannot be told{}",
                        mark_path.display(),
                        journal.path.display(),
                        journal.leases_to_check()?
                    ),
                )?;
            }
            Mark::Missing if hw > 0 => {
                tracing::warn!(
                    journal = %journal.path.display(),
                    "the journal has no mark beside it (a journal written by a version before marks, or the mark was removed): a restore of this journal file from an older copy could not be told this time"
                );
                journal.write_mark(hw, true);
            }
            Mark::Of(id, _) if id != journal.identity => {
                tracing::warn!(
                    journal = %journal.path.display(),
                    "the journal's mark belongs to another journal ({id}): the journal file was replaced"
                );
                journal.write_mark(hw, true);
            }
            _ => journal.write_mark(hw, true),
        }
        Ok(journal)
    }

    /// The leases a rewound journal holds, for the operator to check: each
    /// may have been renewed since, and would end at the old time.
    fn leases_to_check(&self) -> Result<String> {
        let leased: Vec<String> = self
            .all()?
            .into_iter()
            .filter(|i| i.expires_ms.is_some())
            .map(|i| {
                format!(
                    "{} ({}/{}) ends at {} ms",
                    i.request_id,
                    i.plugin,
                    i.provider_id().unwrap_or("pending"),
                    i.expires_ms.unwrap_or_default()
                )
            })
            .collect();
        Ok(if leased.is_empty() {
            String::new()
        } else {
            format!(
                ". Renew any of these leases renewed since (wasmprov renew) before lifting the hold with reconcile --confirm-orphans: {}{}",
                leased
                    .iter()
                    .take(20)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
                if leased.len() > 20 {
                    format!(
                        " and {} more (wasmprov --json reconcile lists every intent)",
                        leased.len() - 20
                    )
                } else {
                    String::new()
                }
            )
        })
    }

    /// Raises a doubt found when opening (no node to name).
    fn raise_open_doubt(&self, kind: DoubtKind, detail: String) -> Result<()> {
        let doubt = Doubt {
            kind,
            since_ms: now_ms(),
            plugin: String::new(),
            provider_id: String::new(),
            detail,
        };
        let event = Event {
            at_ms: now_ms(),
            kind: EventKind::Held,
            reason: doubt.to_string(),
            ..Event::default()
        };
        if self.raise_doubt(&doubt, &event)? {
            tracing::error!("{doubt}");
        }
        Ok(())
    }

    /// Beside the journal: its identity and the last generation a session
    /// of it started at, so that a journal file restored from an older copy
    /// is told from the one this directory ran.
    fn mark_path(&self) -> PathBuf {
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(".mark");
        self.path.with_file_name(name)
    }

    /// Writes the mark: `generation`, the journal's last; synced to disk at
    /// the start and end of a session (`sync`), left to the page cache after
    /// every other write (it survives the process, which is what restores
    /// follow).
    fn write_mark(&self, generation: u64, sync: bool) {
        // One writer at a time: they share the temporary file.
        let _one = self
            .marking
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let path = self.mark_path();
        let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(".tmp");
        let tmp = path.with_file_name(tmp_name);
        let text = format!("{} {generation}\n", self.identity);
        let written = std::fs::write(&tmp, text)
            .and_then(|()| {
                if sync {
                    std::fs::File::open(&tmp).and_then(|f| f.sync_all())
                } else {
                    Ok(())
                }
            })
            .and_then(|()| std::fs::rename(&tmp, &path));
        if let Err(e) = written {
            tracing::warn!(mark = %path.display(), "the journal's mark could not be written: {e}");
        }
    }

    /// Binds the journal to `owner`: the first fleet with an owner id
    /// records it; a fleet with another one is refused, since every node of
    /// the journal's owner would look gone to it (and every node of its
    /// own, unknown).
    ///
    /// # Errors
    /// When the journal serves another owner id, or cannot be written.
    pub fn bind_owner(&self, owner: &str) -> Result<()> {
        let bound = self.write(|txn| {
            let mut meta = txn.open_table(META)?;
            let existing = meta
                .get(OWNER_KEY)?
                .map(|v| String::from_utf8_lossy(v.value()).into_owned());
            match existing {
                Some(o) => Ok(Some(o)),
                None => {
                    meta.insert(OWNER_KEY, owner.as_bytes())?;
                    Ok(None)
                }
            }
        })?;
        match bound {
            Some(o) if o != owner => bail!(
                "the journal {} serves owner id {o:?}, and this host runs as {owner:?}: run with --owner {o} (WASMPROV_OWNER), or use another state directory for another owner id",
                self.path.display()
            ),
            _ => Ok(()),
        }
    }

    /// The owner id the journal serves, once a fleet with one used it.
    ///
    /// # Errors
    /// When the database cannot be read.
    pub fn owner(&self) -> Result<Option<String>> {
        self.read(|txn| {
            Ok(txn
                .open_table(META)?
                .get(OWNER_KEY)?
                .map(|v| String::from_utf8_lossy(v.value()).into_owned()))
        })
    }

    /// Keeps the newest `n` history entries (default [`HISTORY_KEEP`]).
    #[must_use]
    pub fn keep_history(mut self, n: u64) -> Self {
        self.history_keep = n.max(1);
        self
    }

    /// The journal's file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The journal's identity: drawn once, when the journal was created,
    /// and put on every node made for one of its intents.
    #[must_use]
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// The provenance a node made for `intent` carries.
    #[must_use]
    pub fn provenance_of(&self, intent: &Intent) -> Option<Provenance> {
        (intent.born > 0).then(|| Provenance {
            journal: self.identity.clone(),
            generation: intent.born,
        })
    }

    /// Whether the last write succeeded (or the journal was reopened
    /// since a failed one and written again).
    #[must_use]
    pub fn healthy(&self) -> bool {
        !self.failed.load(Ordering::SeqCst)
    }

    /// How many writes failed for storage reasons since the journal was
    /// opened (a watcher that saw this grow knows a write failed, even if
    /// the journal took writes again since).
    #[must_use]
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::SeqCst)
    }

    /// Reopens the database if a write failed, and writes to it as much as
    /// the largest intent takes (then takes it back, in the same
    /// transaction): `Ok` when the journal takes such writes again.
    ///
    /// # Errors
    /// When it still cannot be written.
    pub fn check(&self) -> Result<()> {
        self.write(|txn| {
            let mut meta = txn.open_table(META)?;
            meta.insert(PROBE_KEY, vec![0x5a_u8; PROBE_BYTES].as_slice())?;
            meta.remove(PROBE_KEY)?;
            Ok(())
        })
    }

    fn db(&self) -> Result<std::sync::RwLockReadGuard<'_, Option<redb::Database>>> {
        if self.failed.load(Ordering::SeqCst) {
            let mut slot = self
                .db
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if self.failed.load(Ordering::SeqCst) {
                // redb refuses every use after an I/O error: drop the
                // database and open the file again.
                *slot = None;
                *slot = Some(
                    open_db(&self.path)
                        .with_context(|| {
                            format!(
                                "reopening the journal {} after a failed write",
                                self.path.display()
                            )
                        })?
                        .0,
                );
                self.failed.store(false, Ordering::SeqCst);
                tracing::info!(journal = %self.path.display(), "journal reopened after a failed write");
            }
        }
        Ok(self
            .db
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Runs `f` in a write transaction and commits it; a storage failure
    /// marks the journal failed.
    fn write<T>(&self, f: impl FnOnce(&redb::WriteTransaction) -> Result<T>) -> Result<T> {
        let started_before = self.session_start();
        let last_before = self.last.load(Ordering::SeqCst);
        let result = guarded("writing", &self.path, || {
            let guard = self.db()?;
            let db = guard.as_ref().context("the journal is closed")?;
            let txn = db.begin_write()?;
            let out = f(&txn)?;
            txn.commit().context("committing to the journal")?;
            Ok(out)
        });
        let last = self.last.load(Ordering::SeqCst);
        if result.is_ok() && last != last_before {
            // The mark follows the journal: synced at a session's first
            // write, cached after the others.
            let first = self.session_start() != started_before;
            self.write_mark(last, first);
        }
        if let Err(e) = &result
            && storage_failure(e)
        {
            self.failures.fetch_add(1, Ordering::SeqCst);
            let first = !self.failed.swap(true, Ordering::SeqCst);
            if first {
                tracing::error!(journal = %self.path.display(), "journal write failed: {e:#}");
            }
        }
        result
    }

    fn read<T>(&self, f: impl FnOnce(&redb::ReadTransaction) -> Result<T>) -> Result<T> {
        guarded("reading", &self.path, || {
            let guard = self.db()?;
            let db = guard.as_ref().context("the journal is closed")?;
            let txn = db.begin_read()?;
            f(&txn)
        })
    }

    fn session_start(&self) -> Option<u64> {
        *self
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Writes `intent` under a new generation; the session's interval
    /// grows (or starts) with it. A `new` intent is born under it.
    fn write_intent(
        &self,
        txn: &redb::WriteTransaction,
        intent: &Intent,
        new: bool,
    ) -> Result<Intent> {
        let mut counters = txn.open_table(COUNTERS)?;
        let mut issued = txn.open_table(ISSUED)?;
        let mut session = self
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let last = counters.get(GENERATION)?.map_or(0, |v| v.value());
        let (start, generation) = match *session {
            // This process issued the last generation: go on with its interval.
            Some(start) if issued.get(start)?.map(|v| v.value()) == Some(last) => (
                start,
                last.checked_add(1)
                    .context("the journal's generations are used up")?,
            ),
            _ => {
                // Above everything issued or seen, at least now, and a
                // random stretch further: two copies of one journal that
                // start a session from the same point (a clock behind the
                // last generation, say) still issue different generations.
                let seen = counters.get(MAX_SEEN)?.map_or(0, |v| v.value());
                let floor = last.max(seen).max(now_us());
                let start = floor
                    .checked_add(1 + rand::random::<u64>() % SESSION_SPREAD)
                    .context("the journal's generations are used up")?;
                (start, start)
            }
        };
        issued.insert(start, generation)?;
        counters.insert(GENERATION, generation)?;
        self.last.store(generation, Ordering::SeqCst);
        if issued.len()? > ISSUED_KEEP {
            issued.pop_first()?;
        }
        // Taken as this session's only once the transaction commits: the
        // caller commits right after, and a failed commit leaves the next
        // write to start a new interval (the check above sees the mismatch).
        *session = Some(start);
        let written = Intent {
            generation,
            born: if new { generation } else { intent.born },
            ..intent.clone()
        };
        let bytes = serde_json::to_vec(&written)?;
        let mut table = txn.open_table(INTENTS)?;
        table.insert(written.request_id.as_str(), bytes.as_slice())?;
        Ok(written)
    }

    /// Whether this journal issued `generation` (the interval it falls in
    /// is one of this journal's, and it is not past that interval's end).
    ///
    /// # Errors
    /// When the database cannot be read.
    pub fn issued(&self, generation: u64) -> Result<bool> {
        self.read(|txn| {
            let issued = txn.open_table(ISSUED)?;
            let Some(row) = issued.range(..=generation)?.next_back() else {
                return Ok(false);
            };
            let (_, end) = row?;
            Ok(generation <= end.value())
        })
    }

    /// The last generation this journal issued (its high-water mark).
    ///
    /// # Errors
    /// When the database cannot be read.
    pub fn high_water(&self) -> Result<u64> {
        self.read(|txn| {
            let counters = txn.open_table(COUNTERS)?;
            Ok(counters.get(GENERATION)?.map_or(0, |v| v.value()))
        })
    }

    /// Notes a generation seen on a node carrying this journal's identity,
    /// so that generations issued from now on are above it.
    ///
    /// # Errors
    /// When the database cannot be written.
    pub fn saw_generation(&self, generation: u64) -> Result<()> {
        // A generation no journal could have issued yet (beyond this much of
        // the future) is a forgery: kept out of the floor, so a lying list
        // cannot use the generations up.
        if generation > now_us().saturating_add(PLAUSIBLE_AHEAD) {
            return Ok(());
        }
        self.write(|txn| {
            let mut counters = txn.open_table(COUNTERS)?;
            let seen = counters.get(MAX_SEEN)?.map_or(0, |v| v.value());
            if generation > seen {
                counters.insert(MAX_SEEN, generation)?;
            }
            Ok(())
        })
    }

    /// The standing doubt, if any.
    ///
    /// # Errors
    /// When the database cannot be read or holds a malformed record.
    pub fn doubt(&self) -> Result<Option<Doubt>> {
        self.read(|txn| {
            let meta = txn.open_table(META)?;
            match meta.get(DOUBT_KEY)? {
                Some(v) => Ok(Some(
                    serde_json::from_slice(v.value()).context("a malformed doubt record")?,
                )),
                None => Ok(None),
            }
        })
    }

    /// Records `doubt` (keeping an earlier one) and its history entry;
    /// whether it is new.
    ///
    /// # Errors
    /// When the database cannot be written.
    pub fn raise_doubt(&self, doubt: &Doubt, event: &Event) -> Result<bool> {
        self.write(|txn| {
            let mut meta = txn.open_table(META)?;
            if meta.get(DOUBT_KEY)?.is_some() {
                return Ok(false);
            }
            meta.insert(DOUBT_KEY, serde_json::to_vec(doubt)?.as_slice())?;
            let mut counters = txn.open_table(COUNTERS)?;
            let mut history = txn.open_table(HISTORY)?;
            append_event(&mut history, &mut counters, event, self.history_keep)?;
            Ok(true)
        })
    }

    /// Lifts the standing doubt, confirming the orphans `keys` (as
    /// [`sighting_key`]) as not this journal's, with a history entry.
    ///
    /// # Errors
    /// When the database cannot be written.
    pub(crate) fn confirm_orphans(&self, keys: &[String], event: &Event) -> Result<()> {
        self.write(|txn| {
            let mut meta = txn.open_table(META)?;
            meta.remove(DOUBT_KEY)?;
            let mut confirmed = txn.open_table(CONFIRMED)?;
            let now = now_ms();
            for k in keys {
                confirmed.insert(k.as_str(), now)?;
            }
            while confirmed.len()? > CONFIRMED_KEEP {
                let oldest = confirmed
                    .iter()?
                    .filter_map(std::result::Result::ok)
                    .min_by_key(|(_, v)| v.value())
                    .map(|(k, _)| k.value().to_string());
                match oldest {
                    Some(k) => {
                        confirmed.remove(k.as_str())?;
                    }
                    None => break,
                }
            }
            let mut counters = txn.open_table(COUNTERS)?;
            let mut history = txn.open_table(HISTORY)?;
            append_event(&mut history, &mut counters, event, self.history_keep)?;
            Ok(())
        })
    }

    /// Lifts the standing doubt without confirming anything (every orphan
    /// behind it was adopted).
    ///
    /// # Errors
    /// When the database cannot be written.
    pub(crate) fn clear_doubt(&self) -> Result<()> {
        self.write(|txn| {
            txn.open_table(META)?.remove(DOUBT_KEY)?;
            Ok(())
        })
    }

    /// Whether the operator confirmed the orphan `key` as not this journal's.
    ///
    /// # Errors
    /// When the database cannot be read.
    pub(crate) fn confirmed(&self, key: &str) -> Result<bool> {
        self.read(|txn| Ok(txn.open_table(CONFIRMED)?.get(key)?.is_some()))
    }

    /// The next reconcile pass's number.
    pub(crate) fn next_pass(&self) -> Result<u64> {
        self.next_seq(PASS)
    }

    /// What reconcile remembers of the node `key`.
    pub(crate) fn sighting(&self, key: &str) -> Result<Option<Sighting>> {
        self.read(|txn| {
            let table = txn.open_table(SIGHTINGS)?;
            match table.get(key)? {
                Some(v) => Ok(Some(
                    serde_json::from_slice(v.value()).context("a malformed sighting")?,
                )),
                None => Ok(None),
            }
        })
    }

    /// Remembers `sighting` of `key`.
    pub(crate) fn put_sighting(&self, key: &str, sighting: &Sighting) -> Result<()> {
        self.write(|txn| {
            let mut table = txn.open_table(SIGHTINGS)?;
            table.insert(key, serde_json::to_vec(sighting)?.as_slice())?;
            Ok(())
        })
    }

    /// Forgets the sightings of `plugin`'s nodes that are not in `seen`
    /// (keys as [`sighting_key`]): a node must be seen in consecutive lists.
    pub(crate) fn keep_sightings(
        &self,
        plugin: &str,
        seen: &std::collections::BTreeSet<String>,
    ) -> Result<()> {
        let prefix = format!("{plugin}\u{0}");
        self.write(|txn| {
            let mut table = txn.open_table(SIGHTINGS)?;
            table.retain(|k, _| !k.starts_with(&prefix) || seen.contains(k))?;
            Ok(())
        })
    }

    /// Forgets the active intent `intent` (while its generation is the one
    /// stored) whose node `provider_id` is confirmed gone, recording `event`
    /// and remembering the node ([`Forgotten`]) in the same transaction;
    /// whether it did.
    ///
    /// # Errors
    /// When the database cannot be read or written.
    pub fn forget_vanished(
        &self,
        intent: &Intent,
        provider_id: &str,
        event: &Event,
    ) -> Result<bool> {
        self.write(|txn| {
            if !holds(txn, &intent.request_id, intent.generation)? {
                return Ok(false);
            }
            txn.open_table(INTENTS)?
                .remove(intent.request_id.as_str())?;
            let mut counters = txn.open_table(COUNTERS)?;
            let mut history = txn.open_table(HISTORY)?;
            append_event(&mut history, &mut counters, event, self.history_keep)?;
            let record = Forgotten {
                request_id: intent.request_id.clone(),
                provider_id: provider_id.to_string(),
                born: intent.born,
                at_ms: now_ms(),
            };
            let bytes = serde_json::to_vec(&record)?;
            let mut forgotten = txn.open_table(FORGOTTEN)?;
            forgotten.insert(
                sighting_key(&intent.plugin, provider_id).as_str(),
                bytes.as_slice(),
            )?;
            forgotten.insert(
                request_key(&intent.plugin, &intent.request_id).as_str(),
                bytes.as_slice(),
            )?;
            while forgotten.len()? > 2 * FORGOTTEN_KEEP {
                let oldest = forgotten
                    .iter()?
                    .filter_map(std::result::Result::ok)
                    .filter_map(|(k, v)| {
                        serde_json::from_slice::<Forgotten>(v.value())
                            .ok()
                            .map(|f| (f.at_ms, k.value().to_string()))
                    })
                    .min();
                match oldest {
                    Some((_, k)) => {
                        forgotten.remove(k.as_str())?;
                    }
                    None => break,
                }
            }
            Ok(true)
        })
    }

    /// The forgotten node `provider_id` of `plugin`, or the one forgotten
    /// for the request id and generation `request` names.
    ///
    /// # Errors
    /// When the database cannot be read or holds a malformed record.
    pub fn forgotten(
        &self,
        plugin: &str,
        provider_id: &str,
        request: Option<(&str, u64)>,
    ) -> Result<Option<Forgotten>> {
        self.read(|txn| {
            let table = txn.open_table(FORGOTTEN)?;
            let decode = |v: &[u8]| -> Result<Forgotten> {
                serde_json::from_slice(v).context("a malformed forgotten record")
            };
            if let Some(v) = table.get(sighting_key(plugin, provider_id).as_str())? {
                return Ok(Some(decode(v.value())?));
            }
            if let Some((r, born)) = request
                && let Some(v) = table.get(request_key(plugin, r).as_str())?
            {
                let f = decode(v.value())?;
                if f.born == born && born > 0 {
                    return Ok(Some(f));
                }
            }
            Ok(None)
        })
    }

    /// Takes `provider_id` (and its request id) off the forgotten nodes:
    /// it was adopted again.
    pub(crate) fn unforget(&self, plugin: &str, provider_id: &str) -> Result<()> {
        self.write(|txn| {
            let mut table = txn.open_table(FORGOTTEN)?;
            let record = table
                .remove(sighting_key(plugin, provider_id).as_str())?
                .and_then(|v| serde_json::from_slice::<Forgotten>(v.value()).ok());
            if let Some(f) = record {
                table.remove(request_key(plugin, &f.request_id).as_str())?;
            }
            Ok(())
        })
    }

    /// Records `intent` (replacing one with the same request id) under a new
    /// generation, durably: when this returns, the intent survives a crash.
    /// Returns the intent as written.
    ///
    /// # Errors
    /// When the database cannot be written.
    pub fn put(&self, intent: &Intent) -> Result<Intent> {
        self.write(|txn| self.write_intent(txn, intent, false))
    }

    /// Records `intent` only if no intent has its request id yet:
    /// `Ok(Ok(written))` with its new generation (which is also the one it
    /// was born under), or `Ok(Err(existing))`.
    ///
    /// # Errors
    /// When the database cannot be read or written.
    pub fn insert_new(&self, intent: &Intent) -> Result<std::result::Result<Intent, Intent>> {
        self.write(|txn| {
            let existing = {
                let table = txn.open_table(INTENTS)?;
                match table.get(intent.request_id.as_str())? {
                    Some(v) => Some(decode(v.value())?),
                    None => None,
                }
            };
            Ok(match existing {
                Some(e) => Err(e),
                None => Ok(self.write_intent(txn, intent, !intent.adopted)?),
            })
        })
    }

    /// Replaces the intent of `new.request_id` with `new` (under a new
    /// generation) only while its stored generation is `generation`:
    /// `Some(written)`, or `None` when the intent is gone or another call
    /// wrote it since.
    ///
    /// # Errors
    /// When the database cannot be read or written.
    pub fn replace_if(&self, generation: u64, new: &Intent) -> Result<Option<Intent>> {
        self.write(|txn| {
            if holds(txn, new.request_id.as_str(), generation)? {
                Ok(Some(self.write_intent(txn, new, false)?))
            } else {
                Ok(None)
            }
        })
    }

    /// Replaces the intent like [`replace_if`](Self::replace_if) and, in the
    /// same transaction, records `event` (started: the cloud is about to be
    /// asked); the written intent names the entry in `event_seq`.
    ///
    /// # Errors
    /// When the database cannot be read or written.
    pub fn replace_with_event(
        &self,
        generation: u64,
        new: &Intent,
        event: &Event,
    ) -> Result<Option<(Intent, Event)>> {
        self.replace_recording(generation, new, event, true)
    }

    /// Replaces the intent like [`replace_if`](Self::replace_if) and records
    /// `event` in the same transaction (a renewal: the intent does not name
    /// the entry).
    ///
    /// # Errors
    /// When the database cannot be read or written.
    pub fn replace_and_record(
        &self,
        generation: u64,
        new: &Intent,
        event: &Event,
    ) -> Result<Option<(Intent, Event)>> {
        self.replace_recording(generation, new, event, false)
    }

    fn replace_recording(
        &self,
        generation: u64,
        new: &Intent,
        event: &Event,
        name_it: bool,
    ) -> Result<Option<(Intent, Event)>> {
        self.write(|txn| {
            if !holds(txn, new.request_id.as_str(), generation)? {
                return Ok(None);
            }
            let mut counters = txn.open_table(COUNTERS)?;
            let mut history = txn.open_table(HISTORY)?;
            let event = append_event(&mut history, &mut counters, event, self.history_keep)?;
            drop((counters, history));
            let intent = self.write_intent(
                txn,
                &Intent {
                    event_seq: if name_it {
                        Some(event.seq)
                    } else {
                        new.event_seq
                    },
                    ..new.clone()
                },
                false,
            )?;
            Ok(Some((intent, event)))
        })
    }

    /// Forgets `request_id` only while its generation is `generation`;
    /// whether it did.
    ///
    /// # Errors
    /// When the database cannot be read or written.
    pub fn remove_if(&self, request_id: &str, generation: u64) -> Result<bool> {
        self.write(|txn| {
            if holds(txn, request_id, generation)? {
                txn.open_table(INTENTS)?.remove(request_id)?;
                Ok(true)
            } else {
                Ok(false)
            }
        })
    }

    /// Forgets `request_id` only while its generation is `generation`, and
    /// records `event` in the same transaction; whether it did.
    ///
    /// # Errors
    /// When the database cannot be read or written.
    pub fn remove_with_event(
        &self,
        request_id: &str,
        generation: u64,
        event: &Event,
    ) -> Result<bool> {
        self.write(|txn| {
            if !holds(txn, request_id, generation)? {
                return Ok(false);
            }
            txn.open_table(INTENTS)?.remove(request_id)?;
            let mut counters = txn.open_table(COUNTERS)?;
            let mut history = txn.open_table(HISTORY)?;
            append_event(&mut history, &mut counters, event, self.history_keep)?;
            Ok(true)
        })
    }

    /// Forgets `request_id` only while its generation is `generation`, and
    /// completes the history entry `seq` in the same transaction; whether
    /// it did. (The entry is completed either way.)
    ///
    /// # Errors
    /// When the database cannot be read or written.
    pub fn remove_and_complete(
        &self,
        request_id: &str,
        generation: u64,
        seq: Option<u64>,
    ) -> Result<bool> {
        self.write(|txn| {
            if let Some(seq) = seq {
                complete_event(txn, seq, EventStatus::Done, None)?;
            }
            if !holds(txn, request_id, generation)? {
                return Ok(false);
            }
            txn.open_table(INTENTS)?.remove(request_id)?;
            Ok(true)
        })
    }

    /// Records `event` in the history (the oldest entries beyond
    /// [`keep_history`](Self::keep_history) are dropped); returns it with
    /// its number.
    ///
    /// # Errors
    /// When the database cannot be written.
    pub fn record(&self, event: &Event) -> Result<Event> {
        self.write(|txn| {
            let mut counters = txn.open_table(COUNTERS)?;
            let mut history = txn.open_table(HISTORY)?;
            append_event(&mut history, &mut counters, event, self.history_keep)
        })
    }

    /// Completes the history entry `seq` (written as started): done, or
    /// failed with `error`.
    ///
    /// # Errors
    /// When the database cannot be written.
    pub fn complete(&self, seq: u64, error: Option<String>) -> Result<()> {
        let status = if error.is_some() {
            EventStatus::Failed
        } else {
            EventStatus::Done
        };
        self.write(|txn| complete_event(txn, seq, status, error))
    }

    /// The newest `limit` history entries, oldest first.
    ///
    /// # Errors
    /// When the database cannot be read or holds a malformed record.
    pub fn history(&self, limit: usize) -> Result<Vec<Event>> {
        self.read(|txn| {
            let table = txn.open_table(HISTORY)?;
            let mut out = Vec::new();
            for row in table.iter()?.rev().take(limit) {
                let (_, v) = row?;
                out.push(serde_json::from_slice(v.value()).context("a malformed history entry")?);
            }
            out.reverse();
            Ok(out)
        })
    }

    /// The intent of `request_id`.
    ///
    /// # Errors
    /// When the database cannot be read or holds a malformed record.
    pub fn get(&self, request_id: &str) -> Result<Option<Intent>> {
        self.read(|txn| {
            let table = txn.open_table(INTENTS)?;
            match table.get(request_id)? {
                Some(v) => Ok(Some(decode(v.value())?)),
                None => Ok(None),
            }
        })
    }

    /// Forgets `request_id` (its node is gone, or was never made), durably.
    ///
    /// # Errors
    /// When the database cannot be written.
    pub fn remove(&self, request_id: &str) -> Result<()> {
        self.write(|txn| {
            txn.open_table(INTENTS)?.remove(request_id)?;
            Ok(())
        })
    }

    /// Every intent, by request id.
    ///
    /// # Errors
    /// When the database cannot be read or holds a malformed record.
    pub fn all(&self) -> Result<Vec<Intent>> {
        self.read(|txn| {
            let table = txn.open_table(INTENTS)?;
            let mut out = Vec::new();
            for row in table.iter()? {
                let (_, v) = row?;
                out.push(decode(v.value())?);
            }
            Ok(out)
        })
    }

    /// The number kept under `name` by [`set_value`](Self::set_value), if
    /// any: small durable state that belongs with the intents, such as a
    /// capacity group's target size (kept in the same file, so a restored
    /// journal restores it with the members it counts).
    ///
    /// # Errors
    /// When the database cannot be read or holds a malformed record.
    pub fn value(&self, name: &str) -> Result<Option<u64>> {
        Ok(self.values(&[name])?.pop().flatten())
    }

    /// The numbers kept under each of `names` ([`value`](Self::value) for
    /// each), read in one transaction: one consistent view, and one read
    /// of the database however many names.
    ///
    /// # Errors
    /// When the database cannot be read or holds a malformed record.
    pub fn values(&self, names: &[&str]) -> Result<Vec<Option<u64>>> {
        self.read(|txn| {
            let meta = txn.open_table(META)?;
            names
                .iter()
                .map(|name| {
                    let Some(v) = meta.get(value_key(name).as_str())? else {
                        return Ok(None);
                    };
                    let bytes: [u8; 8] = v
                        .value()
                        .try_into()
                        .map_err(|_| anyhow::anyhow!("a malformed value record {name:?}"))?;
                    Ok(Some(u64::from_le_bytes(bytes)))
                })
                .collect()
        })
    }

    /// Keeps `value` under `name` durably (`None` removes it).
    ///
    /// # Errors
    /// When the database cannot be written.
    pub fn set_value(&self, name: &str, value: Option<u64>) -> Result<()> {
        let key = value_key(name);
        self.write(|txn| {
            let mut meta = txn.open_table(META)?;
            match value {
                Some(v) => {
                    meta.insert(key.as_str(), v.to_le_bytes().as_slice())?;
                }
                None => {
                    meta.remove(key.as_str())?;
                }
            }
            Ok(())
        })
    }

    /// Keeps several values at once, in one transaction: after a crash
    /// either all of them are kept or none is (a decision that spans
    /// several values, such as a lowered target and the members it drops).
    ///
    /// # Errors
    /// When the database cannot be written.
    pub fn set_values(&self, values: &[(&str, Option<u64>)]) -> Result<()> {
        self.write(|txn| {
            let mut meta = txn.open_table(META)?;
            for (name, value) in values {
                let key = value_key(name);
                match value {
                    Some(v) => {
                        meta.insert(key.as_str(), v.to_le_bytes().as_slice())?;
                    }
                    None => {
                        meta.remove(key.as_str())?;
                    }
                }
            }
            Ok(())
        })
    }

    /// The next number of the counter `name` (1, 2, ...), durably: a number
    /// is never handed out twice, even across crashes.
    ///
    /// # Errors
    /// When the database cannot be written.
    pub fn next_seq(&self, name: &str) -> Result<u64> {
        self.write(|txn| {
            let mut table = txn.open_table(COUNTERS)?;
            bump(&mut table, name)
        })
    }
}

/// Where [`Journal::value`] keeps `name`: apart from the journal's own
/// records, which never begin with a NUL.
fn value_key(name: &str) -> String {
    format!("\u{0}value\u{0}{name}")
}

/// The key of a node in reconcile's memory: plugin and provider id.
pub(crate) fn sighting_key(plugin: &str, provider_id: &str) -> String {
    format!("{plugin}\u{0}{provider_id}")
}

/// The key of a forgotten node by its request id.
fn request_key(plugin: &str, request_id: &str) -> String {
    format!("{plugin}\u{0}\u{0}{request_id}")
}

/// What stands beside a journal as its mark.
enum Mark {
    /// Nothing.
    Missing,
    /// Something that is not a mark.
    Damaged(String),
    /// The mark of the journal of this identity, at this generation.
    Of(String, u64),
}

fn read_mark(path: &Path) -> Mark {
    let text = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Mark::Missing,
        Err(e) => return Mark::Damaged(e.to_string()),
    };
    let text = String::from_utf8_lossy(&text);
    let mut words = text.split_whitespace();
    match (
        words.next(),
        words.next().and_then(|g| g.parse().ok()),
        words.next(),
    ) {
        (Some(id), Some(generation), None) if wasmprov_api::provenance::is_journal_id(id) => {
            Mark::Of(id.to_string(), generation)
        }
        _ => Mark::Damaged("not a journal's mark".into()),
    }
}

/// Runs `f` on the database, turning a panic of the database (a damaged
/// page it did not expect) into an error that says what to do.
fn guarded<T>(what: &str, path: &Path, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(panic) => {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            bail!(
                "the journal {} is damaged ({what} it failed: {why}); set it aside and start a new one, then adopt its nodes (docs/JOURNAL.md)",
                path.display()
            )
        }
    }
}

/// Opens (creating, or checking and repairing) the database; whether it
/// had to be repaired.
fn open_db(path: &Path) -> Result<(redb::Database, bool)> {
    let mut db = redb::Database::create(path)
        .with_context(|| format!("opening the journal {}", path.display()))?;
    let repaired = !db
        .check_integrity()
        .with_context(|| format!("the journal {} is damaged beyond repair", path.display()))?;
    let txn = db.begin_write()?;
    {
        txn.open_table(INTENTS)?;
        txn.open_table(COUNTERS)?;
        txn.open_table(HISTORY)?;
        txn.open_table(META)?;
        txn.open_table(ISSUED)?;
        txn.open_table(SIGHTINGS)?;
        txn.open_table(CONFIRMED)?;
        txn.open_table(FORGOTTEN)?;
    }
    txn.commit()
        .with_context(|| format!("opening the journal {}", path.display()))?;
    Ok((db, repaired))
}

/// Whether `e` says the database could not be written or read (as opposed
/// to a record it holds being malformed).
fn storage_failure(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.is::<redb::StorageError>()
            || c.is::<redb::CommitError>()
            || c.is::<redb::TransactionError>()
            || c.is::<redb::TableError>()
            || c.is::<redb::DatabaseError>()
            || c.is::<redb::Error>()
            || c.is::<std::io::Error>()
    })
}

/// Whether the intent of `request_id` is stored under `generation`.
fn holds(txn: &redb::WriteTransaction, request_id: &str, generation: u64) -> Result<bool> {
    let table = txn.open_table(INTENTS)?;
    Ok(match table.get(request_id)? {
        Some(v) => decode(v.value())?.generation == generation,
        None => false,
    })
}

fn bump(counters: &mut redb::Table<&str, u64>, name: &str) -> Result<u64> {
    let next = counters.get(name)?.map_or(0, |v| v.value()) + 1;
    counters.insert(name, next)?;
    Ok(next)
}

fn append_event(
    history: &mut redb::Table<u64, &[u8]>,
    counters: &mut redb::Table<&str, u64>,
    event: &Event,
    keep: u64,
) -> Result<Event> {
    let seq = bump(counters, HISTORY_SEQ)?;
    let written = Event {
        seq,
        ..event.clone()
    };
    history.insert(seq, serde_json::to_vec(&written)?.as_slice())?;
    // Entries are numbered without gaps, so one removal per append keeps
    // the table at `keep` (a smaller `keep` than before trims gradually).
    if seq > keep {
        history.remove(seq - keep)?;
    }
    Ok(written)
}

fn complete_event(
    txn: &redb::WriteTransaction,
    seq: u64,
    status: EventStatus,
    error: Option<String>,
) -> Result<()> {
    let mut history = txn.open_table(HISTORY)?;
    let existing = match history.get(seq)? {
        Some(v) => {
            Some(serde_json::from_slice::<Event>(v.value()).context("a malformed history entry")?)
        }
        None => None,
    };
    // An entry already dropped from a full history stays dropped.
    if let Some(e) = existing {
        let done = Event {
            status,
            completed_ms: Some(now_ms()),
            error,
            ..e
        };
        history.insert(seq, serde_json::to_vec(&done)?.as_slice())?;
    }
    Ok(())
}

fn decode(bytes: &[u8]) -> Result<Intent> {
    serde_json::from_slice(bytes).context("a malformed record in the journal")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(id: &str) -> Intent {
        Intent {
            request_id: id.into(),
            plugin: "p".into(),
            shape: NodeShape::new(1.0, 1 << 30),
            created_ms: 1,
            expires_ms: Some(10),
            hourly_usd: Some(0.5),
            state: IntentState::Active {
                provider_id: "n-1".into(),
            },
            ..Intent::default()
        }
    }

    #[test]
    fn values_read_together_as_they_were_kept_together() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path().join("v.redb")).unwrap();
        j.set_values(&[("a", Some(1)), ("b", Some(u64::MAX))])
            .unwrap();
        assert_eq!(
            j.values(&["b", "missing", "a"]).unwrap(),
            [Some(u64::MAX), None, Some(1)]
        );
        assert_eq!(j.value("a").unwrap(), Some(1));
        assert_eq!(j.value("missing").unwrap(), None);
        j.set_values(&[("a", None)]).unwrap();
        assert_eq!(j.values(&["a", "b"]).unwrap(), [None, Some(u64::MAX)]);
        assert!(j.values(&[]).unwrap().is_empty());
    }

    #[test]
    fn survives_reopening_and_refuses_a_second_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.redb");
        let (written, identity) = {
            let j = Journal::open(&path).unwrap();
            let written = j.put(&intent("a")).unwrap();
            assert_eq!(j.next_seq("g").unwrap(), 1);
            let err = Journal::open(&path).unwrap_err().to_string();
            assert!(err.contains("in use by another process"), "{err}");
            (written, j.identity().to_string())
        };
        let j = Journal::open(&path).unwrap();
        assert_eq!(j.identity(), identity, "the identity is drawn once");
        assert_eq!(j.all().unwrap(), vec![written]);
        assert_eq!(j.next_seq("g").unwrap(), 2);
        assert!(j.get("a").unwrap().unwrap().expired(10));
        assert!(!j.get("a").unwrap().unwrap().expired(9));
    }

    #[test]
    fn a_new_file_is_a_new_identity() {
        let dir = tempfile::tempdir().unwrap();
        let a = Journal::open(dir.path().join("a.redb")).unwrap();
        let b = Journal::open(dir.path().join("b.redb")).unwrap();
        assert_ne!(a.identity(), b.identity());
        assert!(wasmprov_api::provenance::is_journal_id(a.identity()));
    }

    #[test]
    fn insert_new_keeps_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path().join("j.redb")).unwrap();
        let first = j.insert_new(&intent("a")).unwrap().unwrap();
        assert!(first.generation > 0);
        assert_eq!(first.born, first.generation);
        let mut other = intent("a");
        other.plugin = "q".into();
        assert_eq!(j.insert_new(&other).unwrap().unwrap_err(), first);
        assert_eq!(j.get("a").unwrap().unwrap().plugin, "p");
        // Later writes keep the generation it was born under.
        let again = j.put(&first).unwrap();
        assert!(again.generation > first.generation);
        assert_eq!(again.born, first.born);
    }

    #[test]
    fn only_the_writer_of_a_generation_changes_or_removes_it() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path().join("j.redb")).unwrap();
        let mine = j.insert_new(&intent("a")).unwrap().unwrap();
        // Someone else writes the intent after me.
        let theirs = j.put(&mine).unwrap();
        assert_ne!(theirs.generation, mine.generation);
        // My stale generation neither removes nor replaces theirs.
        assert!(!j.remove_if("a", mine.generation).unwrap());
        assert!(j.replace_if(mine.generation, &mine).unwrap().is_none());
        assert_eq!(j.get("a").unwrap().unwrap(), theirs);
        // Theirs does.
        let again = j.replace_if(theirs.generation, &theirs).unwrap().unwrap();
        assert!(again.generation > theirs.generation);
        assert!(!j.remove_if("a", theirs.generation).unwrap());
        assert!(j.remove_if("a", again.generation).unwrap());
        assert!(j.get("a").unwrap().is_none());
        assert!(!j.remove_if("a", again.generation).unwrap());
    }

    /// A copy of the journal taken earlier knows exactly the generations it
    /// issued: not those the original issued after the copy, and its own
    /// new ones never collide with those.
    #[test]
    fn a_restored_copy_knows_what_it_did_not_issue() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.redb");
        let copy = dir.path().join("copy.redb");
        let before = {
            let j = Journal::open(&path).unwrap();
            let a = j.insert_new(&intent("a")).unwrap().unwrap();
            std::fs::copy(&path, &copy).unwrap();
            let b = j.insert_new(&intent("b")).unwrap().unwrap();
            let c = j.insert_new(&intent("c")).unwrap().unwrap();
            assert_eq!(c.generation, b.generation + 1, "one session, one interval");
            (a, b, c)
        };
        // The original is lost; the copy comes back.
        std::fs::remove_file(&path).unwrap();
        std::fs::rename(&copy, &path).unwrap();
        let j = Journal::open(&path).unwrap();
        assert!(j.issued(before.0.generation).unwrap());
        assert!(!j.issued(before.1.generation).unwrap());
        assert!(!j.issued(before.2.generation).unwrap());
        assert!(j.high_water().unwrap() < before.1.generation);
        // Its next generations are above anything the lost one issued.
        let d = j.insert_new(&intent("d")).unwrap().unwrap();
        assert!(d.generation > before.2.generation, "{d:?} {before:?}");
        assert!(j.issued(d.generation).unwrap());
        assert!(!j.issued(d.generation + 1).unwrap());
        assert!(!j.issued(0).unwrap());
    }

    /// The journal file alone restored from an older copy (its mark left
    /// as this directory last ran it): held at open, even when no node
    /// shows what was lost (a lease renewal, say).
    #[test]
    fn a_journal_file_older_than_its_mark_holds_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.redb");
        let copy = dir.path().join("copy.redb");
        {
            let j = Journal::open(&path).unwrap();
            let a = j.insert_new(&intent("a")).unwrap().unwrap();
            std::fs::copy(&path, &copy).unwrap();
            // A renewal: a write the cloud never sees.
            j.replace_if(a.generation, &a).unwrap().unwrap();
        }
        // A normal restart is not held.
        assert!(Journal::open(&path).unwrap().doubt().unwrap().is_none());
        std::fs::rename(&copy, &path).unwrap();
        let j = Journal::open(&path).unwrap();
        let doubt = j.doubt().unwrap().expect("held");
        assert_eq!(doubt.kind, DoubtKind::Rewound, "{doubt}");
        assert!(
            doubt.to_string().contains("restored from an older copy"),
            "{doubt}"
        );
        // A journal whose mark is another journal's is not held for it.
        drop(j);
        std::fs::remove_file(&path).unwrap();
        let fresh = Journal::open(&path).unwrap();
        assert!(fresh.doubt().unwrap().is_none());
    }

    /// A mark that is not a journal's (damaged) holds a journal that has
    /// written; none at all is only said.
    #[test]
    fn a_damaged_mark_holds_and_a_missing_one_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.redb");
        let mark = dir.path().join("j.redb.mark");
        {
            let j = Journal::open(&path).unwrap();
            let mut leased = intent("a");
            leased.expires_ms = Some(123);
            j.insert_new(&leased).unwrap().unwrap();
        }
        std::fs::remove_file(&mark).unwrap();
        assert!(Journal::open(&path).unwrap().doubt().unwrap().is_none());
        std::fs::write(&mark, b"\xff\xfe not a mark").unwrap();
        let j = Journal::open(&path).unwrap();
        let d = j.doubt().unwrap().expect("held");
        assert_eq!(d.kind, DoubtKind::Rewound);
        let text = d.to_string();
        assert!(text.contains("mark damaged"), "{text}");
        assert!(text.contains("a (p/n-1) ends at 123 ms"), "{text}");
        assert!(text.contains("--confirm-orphans"), "{text}");
    }

    /// Two copies of one journal, each opened and written from the same
    /// point (a clock behind its last generation, say), issue different
    /// generations: neither takes the other's for its own.
    #[test]
    fn two_copies_from_one_point_issue_different_generations() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.redb"), dir.path().join("b.redb"));
        {
            let j = Journal::open(&a).unwrap();
            // A generation far ahead of the clock is the floor of both.
            j.saw_generation(now_us() + 3_600_000_000).unwrap();
            j.insert_new(&intent("x")).unwrap().unwrap();
        }
        std::fs::copy(&a, &b).unwrap();
        let (ja, jb) = (Journal::open(&a).unwrap(), Journal::open(&b).unwrap());
        assert_eq!(ja.identity(), jb.identity());
        let ga = ja.insert_new(&intent("y")).unwrap().unwrap().generation;
        let gb = jb.insert_new(&intent("y")).unwrap().unwrap().generation;
        assert_ne!(ga, gb);
        assert!(!ja.issued(gb).unwrap() && !jb.issued(ga).unwrap());
        // A generation no journal could have issued yet raises no floor.
        ja.saw_generation(u64::MAX - 1).unwrap();
        ja.insert_new(&intent("z")).unwrap().unwrap();
        ja.insert_new(&intent("w")).unwrap().unwrap();
    }

    #[test]
    fn a_journal_serves_one_owner_id() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path().join("j.redb")).unwrap();
        assert_eq!(j.owner().unwrap(), None);
        j.bind_owner("o1").unwrap();
        j.bind_owner("o1").unwrap();
        let err = j.bind_owner("o2").unwrap_err().to_string();
        assert!(err.contains("serves owner id \"o1\""), "{err}");
        assert_eq!(j.owner().unwrap().as_deref(), Some("o1"));
    }

    /// A damaged journal is an error naming what to do, never a panic.
    #[test]
    fn a_damaged_journal_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.redb");
        {
            let j = Journal::open(&path).unwrap();
            for i in 0..50 {
                j.insert_new(&intent(&format!("r{i}"))).unwrap().unwrap();
            }
        }
        let clean = std::fs::read(&path).unwrap();
        let mut errors = 0;
        for page in 1..(clean.len() / 4096) {
            let mut bytes = clean.clone();
            for b in &mut bytes[page * 4096..(page + 1) * 4096] {
                *b ^= 0xa5;
            }
            std::fs::write(&path, &bytes).unwrap();
            let opened = std::panic::catch_unwind(|| Journal::open(&path).map(|j| j.all()));
            match opened {
                Err(_) => panic!("page {page}: a panic"),
                Ok(Err(e)) => {
                    errors += 1;
                    assert!(e.to_string().contains("journal"), "{e:#}");
                }
                Ok(Ok(_)) => {}
            }
        }
        assert!(errors > 0, "no damaged page was noticed");
    }

    #[test]
    fn generations_start_above_what_nodes_showed() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path().join("j.redb")).unwrap();
        let far = now_us() + 3_600_000_000;
        j.saw_generation(far).unwrap();
        let a = j.insert_new(&intent("a")).unwrap().unwrap();
        assert!(a.generation > far);
    }

    #[test]
    fn history_is_numbered_kept_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path().join("j.redb"))
            .unwrap()
            .keep_history(5);
        let event = |n: u64| Event {
            at_ms: n,
            kind: EventKind::LeaseExpired,
            plugin: "p".into(),
            request_id: Some(format!("r-{n}")),
            provider_id: Some(format!("n-{n}")),
            reason: "lease ran out".into(),
            ..Event::default()
        };
        let a = j.put(&intent("a")).unwrap();
        assert!(j.remove_with_event("a", a.generation, &event(1)).unwrap());
        assert!(!j.remove_with_event("a", a.generation, &event(2)).unwrap());
        assert_eq!(j.record(&event(3)).unwrap().seq, 2);
        let h = j.history(10).unwrap();
        assert_eq!(
            h.iter().map(|e| (e.seq, e.at_ms)).collect::<Vec<_>>(),
            [(1, 1), (2, 3)]
        );
        assert_eq!(j.history(1).unwrap()[0].seq, 2);
        for n in 0..5 {
            j.record(&event(n)).unwrap();
        }
        let all = j.history(usize::MAX).unwrap();
        assert_eq!(all.len(), 5);
        assert_eq!(all[0].seq, 3);
    }

    #[test]
    fn a_termination_is_written_before_and_completed_after() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path().join("j.redb")).unwrap();
        let a = j.insert_new(&intent("a")).unwrap().unwrap();
        let started = Event {
            kind: EventKind::Terminated,
            plugin: "p".into(),
            request_id: Some("a".into()),
            status: EventStatus::Started,
            ..Event::default()
        };
        let (t, e) = j
            .replace_with_event(a.generation, &a, &started)
            .unwrap()
            .unwrap();
        assert_eq!(t.event_seq, Some(e.seq));
        assert_eq!(j.history(10).unwrap()[0].status, EventStatus::Started);
        assert!(
            j.remove_and_complete("a", t.generation, t.event_seq)
                .unwrap()
        );
        let h = j.history(10).unwrap();
        assert_eq!(h[0].status, EventStatus::Done);
        assert!(h[0].completed_ms.is_some());
        j.complete(e.seq, Some("refused".into())).unwrap();
        assert_eq!(j.history(10).unwrap()[0].status, EventStatus::Failed);
    }

    #[test]
    fn records_of_older_versions_read_with_defaults() {
        let old = r#"{"request_id":"a","plugin":"p","shape":{"cpu":1.0,"memory_bytes":1},"created_ms":5,"expires_ms":65,"group":null,"hourly_usd":null,"state":"active","provider_id":"n","generation":3}"#;
        let i = decode(old.as_bytes()).unwrap();
        assert_eq!(i.born, 0);
        assert_eq!(i.lease(), Some(60));
        let e: Event = serde_json::from_str(
            r#"{"seq":1,"at_ms":2,"kind":"vanished","plugin":"p","request_id":null,"provider_id":null,"reason":"x"}"#,
        )
        .unwrap();
        assert_eq!(e.status, EventStatus::Done);
    }
}
