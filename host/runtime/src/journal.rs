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
use wasmprov_api::NodeShape;

const INTENTS: TableDefinition<&str, &[u8]> = TableDefinition::new("intents");
const COUNTERS: TableDefinition<&str, u64> = TableDefinition::new("counters");

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
    /// Where it is.
    #[serde(flatten)]
    pub state: IntentState,
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
/// use wasmprov_host::journal::{Intent, IntentState, Journal};
/// use wasmprov_host::api::NodeShape;
///
/// let dir = tempfile::tempdir()?;
/// let journal = Journal::open(dir.path().join("journal.redb"))?;
/// journal.put(&Intent {
///     request_id: "web-1".into(),
///     plugin: "hetzner".into(),
///     shape: NodeShape::new(2.0, 4 << 30),
///     created_ms: wasmprov_host::journal::now_ms(),
///     expires_ms: None,
///     group: Some("web".into()),
///     hourly_usd: None,
///     state: IntentState::Pending,
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
        }
        txn.commit()?;
        Ok(Self {
            db,
            path,
            _lock: lock,
        })
    }

    /// The journal's file.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records `intent` (replacing one with the same request id), durably:
    /// when this returns, the intent survives a crash.
    ///
    /// # Errors
    /// When the database cannot be written.
    pub fn put(&self, intent: &Intent) -> Result<()> {
        let bytes = serde_json::to_vec(intent)?;
        let txn = self.db.begin_write()?;
        {
            let mut table = txn.open_table(INTENTS)?;
            table.insert(intent.request_id.as_str(), bytes.as_slice())?;
        }
        txn.commit().context("committing to the journal")?;
        Ok(())
    }

    /// Records `intent` only if no intent has its request id yet; returns
    /// the existing one otherwise.
    ///
    /// # Errors
    /// When the database cannot be read or written.
    pub fn insert_new(&self, intent: &Intent) -> Result<Option<Intent>> {
        let txn = self.db.begin_write()?;
        let existing = {
            let mut table = txn.open_table(INTENTS)?;
            let existing = match table.get(intent.request_id.as_str())? {
                Some(v) => Some(decode(v.value())?),
                None => None,
            };
            if existing.is_none() {
                let bytes = serde_json::to_vec(intent)?;
                table.insert(intent.request_id.as_str(), bytes.as_slice())?;
            }
            existing
        };
        txn.commit().context("committing to the journal")?;
        Ok(existing)
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
            let next = table.get(name)?.map_or(0, |v| v.value()) + 1;
            table.insert(name, next)?;
            next
        };
        txn.commit().context("committing to the journal")?;
        Ok(next)
    }
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
            state: IntentState::Active {
                provider_id: "n-1".into(),
            },
        }
    }

    #[test]
    fn survives_reopening_and_refuses_a_second_holder() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.redb");
        {
            let j = Journal::open(&path).unwrap();
            j.put(&intent("a")).unwrap();
            assert_eq!(j.next_seq("g").unwrap(), 1);
            let err = Journal::open(&path).unwrap_err().to_string();
            assert!(err.contains("in use by another process"), "{err}");
        }
        let j = Journal::open(&path).unwrap();
        assert_eq!(j.all().unwrap(), vec![intent("a")]);
        assert_eq!(j.next_seq("g").unwrap(), 2);
        assert!(j.get("a").unwrap().unwrap().expired(10));
        assert!(!j.get("a").unwrap().unwrap().expired(9));
    }

    #[test]
    fn insert_new_keeps_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path().join("j.redb")).unwrap();
        assert!(j.insert_new(&intent("a")).unwrap().is_none());
        let mut other = intent("a");
        other.plugin = "q".into();
        assert_eq!(j.insert_new(&other).unwrap().unwrap().plugin, "p");
        assert_eq!(j.get("a").unwrap().unwrap().plugin, "p");
    }
}
