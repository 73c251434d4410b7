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
//! The journal is an embedded [redb](https://docs.rs/redb) database, one
//! file; one process at a time may hold it (a second gets an error naming
//! the file).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};
use wasmprov_api::{BootData, NodeShape};

const INTENTS: TableDefinition<&str, &[u8]> = TableDefinition::new("intents");
const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");
const HISTORY: TableDefinition<u64, &[u8]> = TableDefinition::new("history");

/// The counter every intent's generation is drawn from.
const GENERATION: &str = "\u{0}generation";
/// The counter history entries are numbered from.
const HISTORY_SEQ: &str = "\u{0}history";
/// History entries kept; older ones are dropped as new ones come.
pub const HISTORY_KEEP: u64 = 10_000;

/// Where an intent is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum IntentState {
    /// Recorded; the plugin was (or is being) asked to create the node, and
    /// its answer has not been recorded.
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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// Where it is.
    #[serde(flatten)]
    pub state: IntentState,
    /// Who wrote the intent last: a number drawn from a journal-wide
    /// counter on every write. A call removes or changes an intent only
    /// while the generation is the one it wrote.
    #[serde(default)]
    pub generation: u64,
    /// The error the last call for this pending intent returned to its
    /// caller, when it failed in a way that may have left a node (a
    /// transport error, a timeout, a rate limit, a plugin fault). Reconcile
    /// confirms the node if it shows up, and otherwise forgets the intent
    /// (the caller was told it failed) instead of asking again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Since when (ms since the epoch) an active node has been missing
    /// from its cloud's list; it is forgotten only once that lasted the
    /// reconcile policy's grace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing_since_ms: Option<u64>,
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
}

/// What happened to a node or an intent, kept in the journal's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A node was terminated because its lease ran out.
    LeaseExpired,
    /// A node no intent wanted was terminated.
    LeakTerminated,
    /// A journaled node was no longer listed by its cloud (for longer than
    /// the grace), and its intent was forgotten.
    Vanished,
    /// A pending provision was given up (not found after a failed call,
    /// refused for good, lease run out, or resume turned off).
    Abandoned,
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
        }
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of the journal's history: what, when, why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
}

/// Milliseconds since the Unix epoch, now.
#[must_use]
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
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
/// journal.put(&Intent {
///     request_id: "web-1".into(),
///     plugin: "hetzner".into(),
///     shape: NodeShape::new(2.0, 4 << 30),
///     created_ms: wasmprov_fleet::journal::now_ms(),
///     expires_ms: None,
///     group: Some("web".into()),
///     hourly_usd: None,
///     boot: Default::default(),
///     state: IntentState::Pending,
///     generation: 0,
///     last_error: None,
///     missing_since_ms: None,
/// })?;
/// assert_eq!(journal.get("web-1")?.unwrap().state, IntentState::Pending);
/// assert_eq!(journal.next_seq("web")?, 1);
/// assert_eq!(journal.next_seq("web")?, 2);
/// journal.remove("web-1")?;
/// assert!(journal.all()?.is_empty());
/// # Ok::<(), anyhow::Error>(())
/// ```
pub struct Journal {
    db: redb::Database,
    path: PathBuf,
    history_keep: u64,
    _lock: nix::fcntl::Flock<std::fs::File>,
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl Journal {
    /// Opens (creating if needed) the journal at `path`, with a lock file
    /// beside it (`<path>.lock`) held for as long as the journal is open.
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
        let db = redb::Database::create(&path)
            .with_context(|| format!("opening the journal {}", path.display()))?;
        let txn = db.begin_write()?;
        {
            txn.open_table(INTENTS)?;
            txn.open_table(COUNTERS)?;
            txn.open_table(HISTORY)?;
        }
        txn.commit()?;
        Ok(Self {
            db,
            path,
            history_keep: HISTORY_KEEP,
            _lock: lock,
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

    /// Records `intent` (replacing one with the same request id) under a new
    /// generation, durably: when this returns, the intent survives a crash.
    /// Returns the intent as written.
    ///
    /// # Errors
    /// When the database cannot be written.
    pub fn put(&self, intent: &Intent) -> Result<Intent> {
        let txn = self.db.begin_write()?;
        let written = {
            let mut counters = txn.open_table(COUNTERS)?;
            let mut table = txn.open_table(INTENTS)?;
            write_intent(&mut table, &mut counters, intent)?
        };
        txn.commit().context("committing to the journal")?;
        Ok(written)
    }

    /// Records `intent` only if no intent has its request id yet:
    /// `Ok(Ok(written))` with its new generation, or `Ok(Err(existing))`.
    ///
    /// # Errors
    /// When the database cannot be read or written.
    pub fn insert_new(&self, intent: &Intent) -> Result<std::result::Result<Intent, Intent>> {
        let txn = self.db.begin_write()?;
        let outcome = {
            let mut counters = txn.open_table(COUNTERS)?;
            let mut table = txn.open_table(INTENTS)?;
            let existing = match table.get(intent.request_id.as_str())? {
                Some(v) => Some(decode(v.value())?),
                None => None,
            };
            match existing {
                Some(e) => Err(e),
                None => Ok(write_intent(&mut table, &mut counters, intent)?),
            }
        };
        txn.commit().context("committing to the journal")?;
        Ok(outcome)
    }

    /// Replaces the intent of `new.request_id` with `new` (under a new
    /// generation) only while its stored generation is `generation`:
    /// `Some(written)`, or `None` when the intent is gone or another call
    /// wrote it since.
    ///
    /// # Errors
    /// When the database cannot be read or written.
    pub fn replace_if(&self, generation: u64, new: &Intent) -> Result<Option<Intent>> {
        let txn = self.db.begin_write()?;
        let outcome = {
            let mut counters = txn.open_table(COUNTERS)?;
            let mut table = txn.open_table(INTENTS)?;
            if holds(&table, new.request_id.as_str(), generation)? {
                Some(write_intent(&mut table, &mut counters, new)?)
            } else {
                None
            }
        };
        txn.commit().context("committing to the journal")?;
        Ok(outcome)
    }

    /// Forgets `request_id` only while its generation is `generation`;
    /// whether it did.
    ///
    /// # Errors
    /// When the database cannot be read or written.
    pub fn remove_if(&self, request_id: &str, generation: u64) -> Result<bool> {
        let txn = self.db.begin_write()?;
        let removed = {
            let mut table = txn.open_table(INTENTS)?;
            if holds(&table, request_id, generation)? {
                table.remove(request_id)?;
                true
            } else {
                false
            }
        };
        txn.commit().context("committing to the journal")?;
        Ok(removed)
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
        let txn = self.db.begin_write()?;
        let removed = {
            let mut table = txn.open_table(INTENTS)?;
            if holds(&table, request_id, generation)? {
                table.remove(request_id)?;
                let mut counters = txn.open_table(COUNTERS)?;
                let mut history = txn.open_table(HISTORY)?;
                append_event(&mut history, &mut counters, event, self.history_keep)?;
                true
            } else {
                false
            }
        };
        txn.commit().context("committing to the journal")?;
        Ok(removed)
    }

    /// Records `event` in the history (the oldest entries beyond
    /// [`keep_history`](Self::keep_history) are dropped); returns it with
    /// its number.
    ///
    /// # Errors
    /// When the database cannot be written.
    pub fn record(&self, event: &Event) -> Result<Event> {
        let txn = self.db.begin_write()?;
        let written = {
            let mut counters = txn.open_table(COUNTERS)?;
            let mut history = txn.open_table(HISTORY)?;
            append_event(&mut history, &mut counters, event, self.history_keep)?
        };
        txn.commit().context("committing to the journal")?;
        Ok(written)
    }

    /// The newest `limit` history entries, oldest first.
    ///
    /// # Errors
    /// When the database cannot be read or holds a malformed record.
    pub fn history(&self, limit: usize) -> Result<Vec<Event>> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(HISTORY)?;
        let mut out = Vec::new();
        for row in table.iter()?.rev().take(limit) {
            let (_, v) = row?;
            out.push(serde_json::from_slice(v.value()).context("a malformed history entry")?);
        }
        out.reverse();
        Ok(out)
    }

    /// The intent of `request_id`.
    ///
    /// # Errors
    /// When the database cannot be read or holds a malformed record.
    pub fn get(&self, request_id: &str) -> Result<Option<Intent>> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(INTENTS)?;
        match table.get(request_id)? {
            Some(v) => Ok(Some(decode(v.value())?)),
            None => Ok(None),
        }
    }

    /// Forgets `request_id` (its node is gone, or was never made), durably.
    ///
    /// # Errors
    /// When the database cannot be written.
    pub fn remove(&self, request_id: &str) -> Result<()> {
        let txn = self.db.begin_write()?;
        {
            let mut table = txn.open_table(INTENTS)?;
            table.remove(request_id)?;
        }
        txn.commit().context("committing to the journal")?;
        Ok(())
    }

    /// Every intent, by request id.
    ///
    /// # Errors
    /// When the database cannot be read or holds a malformed record.
    pub fn all(&self) -> Result<Vec<Intent>> {
        let txn = self.db.begin_read()?;
        let table = txn.open_table(INTENTS)?;
        let mut out = Vec::new();
        for row in table.iter()? {
            let (_, v) = row?;
            out.push(decode(v.value())?);
        }
        Ok(out)
    }

    /// The next number of the counter `name` (1, 2, ...), durably: a number
    /// is never handed out twice, even across crashes.
    ///
    /// # Errors
    /// When the database cannot be written.
    pub fn next_seq(&self, name: &str) -> Result<u64> {
        let txn = self.db.begin_write()?;
        let next = {
            let mut table = txn.open_table(COUNTERS)?;
            bump(&mut table, name)?
        };
        txn.commit().context("committing to the journal")?;
        Ok(next)
    }
}

/// Whether the intent of `request_id` is stored under `generation`.
fn holds(table: &redb::Table<&str, &[u8]>, request_id: &str, generation: u64) -> Result<bool> {
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

fn write_intent(
    table: &mut redb::Table<&str, &[u8]>,
    counters: &mut redb::Table<&str, u64>,
    intent: &Intent,
) -> Result<Intent> {
    let written = Intent {
        generation: bump(counters, GENERATION)?,
        ..intent.clone()
    };
    let bytes = serde_json::to_vec(&written)?;
    table.insert(written.request_id.as_str(), bytes.as_slice())?;
    Ok(written)
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
            group: None,
            hourly_usd: Some(0.5),
            boot: BootData::default(),
            state: IntentState::Active {
                provider_id: "n-1".into(),
            },
            generation: 0,
            last_error: None,
            missing_since_ms: None,
        }
    }

    #[test]
    fn survives_reopening_and_refuses_a_second_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.redb");
        let written = {
            let j = Journal::open(&path).unwrap();
            let written = j.put(&intent("a")).unwrap();
            assert_eq!(j.next_seq("g").unwrap(), 1);
            let err = Journal::open(&path).unwrap_err().to_string();
            assert!(err.contains("in use by another process"), "{err}");
            written
        };
        let j = Journal::open(&path).unwrap();
        assert_eq!(j.all().unwrap(), vec![written]);
        assert_eq!(j.next_seq("g").unwrap(), 2);
        assert!(j.get("a").unwrap().unwrap().expired(10));
        assert!(!j.get("a").unwrap().unwrap().expired(9));
    }

    #[test]
    fn insert_new_keeps_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path().join("j.redb")).unwrap();
        let first = j.insert_new(&intent("a")).unwrap().unwrap();
        assert!(first.generation > 0);
        let mut other = intent("a");
        other.plugin = "q".into();
        assert_eq!(j.insert_new(&other).unwrap().unwrap_err(), first);
        assert_eq!(j.get("a").unwrap().unwrap().plugin, "p");
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

    #[test]
    fn history_is_numbered_kept_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path().join("j.redb"))
            .unwrap()
            .keep_history(5);
        let event = |n: u64| Event {
            seq: 0,
            at_ms: n,
            kind: EventKind::LeaseExpired,
            plugin: "p".into(),
            request_id: Some(format!("r-{n}")),
            provider_id: Some(format!("n-{n}")),
            reason: "lease ran out".into(),
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
}
