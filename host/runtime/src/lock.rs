//! `wasmprov.lock`: the sha256 of every plugin component seen in a plugin
//! directory, recorded the first time it loads (trust on first use, as
//! Terraform's lock file). Afterwards a component whose bytes differ from
//! the recorded digest is refused until the operator updates the lock
//! (`wasmprov lock --update`). `wasmprov lock --check` reports any drift.
//!
//! A manifest may pin its component's digest too (`sha256 = "…"`, written
//! by `install` and `bundle`). The lock is the record the tools keep: the
//! one command that accepts a changed component, [`update`] (`wasmprov
//! lock --update`), rewrites a pin that no longer matches together with
//! the lock, so the two never disagree after it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use cap_std::ambient_authority;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use wasmprov_policy::Manifest;

/// The lock file's name inside the plugin directory.
pub const LOCK_FILE: &str = "wasmprov.lock";

/// How the host treats the lock file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LockMode {
    /// Check plugins that are in the lock; record new ones (the default).
    #[default]
    TrustOnFirstUse,
    /// Check plugins that are in the lock; refuse plugins that are not; never write.
    Frozen,
    /// Ignore the lock file.
    Off,
}

/// One recorded plugin.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockEntry {
    /// The component file.
    pub component: String,
    /// Its sha256, lowercase hex.
    pub sha256: String,
    /// Where `wasmprov install` fetched it (an OCI reference or a file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Who signed it (a trusted key's name), or `unsigned` when the
    /// operator let it in without a signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signer: Option<String>,
}

/// The lock file's contents.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lock {
    /// Recorded plugins by name.
    #[serde(default)]
    pub plugins: BTreeMap<String, LockEntry>,
}

const HEADER: &str = "# wasmprov.lock: sha256 of each plugin component, recorded on first load or by\n# `wasmprov install` (with where it came from and who signed it).\n# A component that no longer matches is refused. Update with `wasmprov lock --update`.\n\n";

impl Lock {
    /// Reads the lock of a directory; an absent file is an empty lock.
    ///
    /// # Errors
    /// When the file exists but cannot be read or parsed.
    pub fn read(dir: &cap_std::fs::Dir) -> Result<Self> {
        match crate::files::read_text(dir, LOCK_FILE) {
            Ok(text) => toml::from_str(&text).with_context(|| format!("{LOCK_FILE} is malformed")),
            Err(crate::files::FileError::NotFound) => Ok(Self::default()),
            Err(e) => anyhow::bail!("reading {LOCK_FILE}: {e}"),
        }
    }

    /// The lock file's text.
    ///
    /// # Errors
    /// When it cannot be serialized (it always can).
    pub fn text(&self) -> Result<String> {
        Ok(format!("{HEADER}{}", toml::to_string(self)?))
    }

    /// Writes the lock atomically, through the plugin directory's one writer
    /// ([`crate::plugin_dir::PluginDir::replace`]). This replaces the file
    /// with this value whatever another writer recorded since it was read:
    /// a read-modify-write goes through [`modify`] instead, which holds the
    /// directory's writer lock around it.
    ///
    /// # Errors
    /// When the directory is not writable.
    pub fn write(&self, dir: &cap_std::fs::Dir) -> Result<()> {
        crate::plugin_dir::replace_in(dir, LOCK_FILE, self.text()?.as_bytes())
            .with_context(|| format!("writing {LOCK_FILE}"))
    }
}

/// Reads the lock of `dir`, lets `change` edit it, and writes it back,
/// all under the directory's writer lock
/// ([`crate::plugin_dir::PluginDir::lock`]): two writers at once (two
/// installs, an install and a host recording a first use) never lose each
/// other's entries. Returns the lock as written.
///
/// # Errors
/// When the lock cannot be taken, read or written.
pub fn modify_in(
    dir: &cap_std::fs::Dir,
    dir_path: &Path,
    change: impl FnOnce(&mut Lock) -> Result<()>,
) -> Result<Lock> {
    let _writer = crate::plugin_dir::lock_in(dir, dir_path)?;
    let mut lock = Lock::read(dir)?;
    change(&mut lock)?;
    lock.write(dir)?;
    Ok(lock)
}

/// Records plugins seen for the first time (trust on first use): under the
/// directory's writer lock, each entry is added unless the lock, read
/// again now, already holds one for that plugin (another writer's record
/// wins over a first sighting).
///
/// # Errors
/// When the lock cannot be taken, read or written.
pub fn record_first_use(
    dir: &cap_std::fs::Dir,
    dir_path: &Path,
    entries: impl IntoIterator<Item = (String, LockEntry)>,
) -> Result<()> {
    modify_in(dir, dir_path, |lock| {
        for (name, entry) in entries {
            lock.plugins.entry(name).or_insert(entry);
        }
        Ok(())
    })
    .map(|_| ())
}

/// Reads the lock of the directory at `dir_path`; an absent directory or
/// file is an empty lock.
///
/// # Errors
/// When the file exists but cannot be read or parsed.
pub fn read(dir_path: &Path) -> Result<Lock> {
    if !dir_path.exists() {
        return Ok(Lock::default());
    }
    let dir = cap_std::fs::Dir::open_ambient_dir(dir_path, ambient_authority())
        .with_context(|| format!("opening plugin directory {}", dir_path.display()))?;
    Lock::read(&dir)
}

/// The digest of a file, lowercase hex.
#[must_use]
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// One difference between a directory and its lock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "drift", rename_all = "snake_case")]
pub enum Drift {
    /// The component changed since it was recorded.
    Changed {
        /// Plugin name.
        plugin: String,
        /// Recorded digest.
        locked: String,
        /// Digest now.
        actual: String,
    },
    /// The plugin is not in the lock.
    Unlocked {
        /// Plugin name.
        plugin: String,
        /// Digest now.
        actual: String,
    },
    /// The lock records a plugin the directory no longer has.
    Missing {
        /// Plugin name.
        plugin: String,
    },
    /// The manifest pins another digest than its component's (the plugin
    /// is refused until `wasmprov lock --update` or an edit of the pin).
    Pinned {
        /// Plugin name.
        plugin: String,
        /// The manifest file.
        file: String,
        /// The digest the manifest pins.
        pinned: String,
        /// Digest now.
        actual: String,
    },
    /// A manifest or component could not be read.
    Unreadable {
        /// The manifest file.
        file: String,
        /// Why.
        reason: String,
    },
}

impl std::fmt::Display for Drift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Changed {
                plugin,
                locked,
                actual,
            } => {
                write!(
                    f,
                    "{plugin}: component changed (locked {locked}, now {actual})"
                )
            }
            Self::Unlocked { plugin, actual } => {
                write!(f, "{plugin}: not in the lock (now {actual})")
            }
            Self::Missing { plugin } => write!(f, "{plugin}: in the lock but not in the directory"),
            Self::Pinned {
                plugin,
                file,
                pinned,
                actual,
            } => write!(
                f,
                "{plugin}: {file} pins sha256 {pinned}, but the component is {actual}"
            ),
            Self::Unreadable { file, reason } => write!(f, "{file}: {reason}"),
        }
    }
}

/// A manifest whose `sha256` pin is not its component's digest.
struct StalePin {
    plugin: String,
    file: String,
    text: String,
    pinned: String,
    actual: String,
}

/// What a plugin directory holds now, read without compiling.
struct Current {
    /// The digest of every plugin, by name.
    found: BTreeMap<String, LockEntry>,
    /// Manifests that pin another digest than their component's.
    stale_pins: Vec<StalePin>,
    /// Manifests or components that could not be read.
    problems: Vec<Drift>,
}

fn current(dir: &cap_std::fs::Dir) -> Result<Current> {
    let mut now = Current {
        found: BTreeMap::new(),
        stale_pins: Vec::new(),
        problems: Vec::new(),
    };
    for file in crate::plugin_dir::manifest_files(dir)? {
        let read = crate::files::read_text(dir, &file)
            .map_err(|e| e.to_string())
            .and_then(|text| {
                let m = Manifest::parse(&file, &text).map_err(|e| e.to_string())?;
                let (_, sha256) = crate::files::read_regular(
                    dir,
                    &m.component,
                    crate::files::DEFAULT_MAX_COMPONENT_BYTES,
                )
                .map_err(|e| format!("component {}: {e}", m.component))?;
                Ok((text, m, sha256))
            });
        let (text, m, sha256) = match read {
            Ok(read) => read,
            Err(reason) => {
                now.problems.push(Drift::Unreadable { file, reason });
                continue;
            }
        };
        if let Some(pinned) = m.sha256.as_ref().filter(|p| **p != sha256) {
            now.stale_pins.push(StalePin {
                plugin: m.name.clone(),
                file,
                text,
                pinned: pinned.clone(),
                actual: sha256.clone(),
            });
        }
        now.found.insert(
            m.name,
            LockEntry {
                component: m.component,
                sha256,
                source: None,
                signer: None,
            },
        );
    }
    Ok(now)
}

/// `text` (a manifest) with the value of its top-level `sha256` key
/// replaced by `digest`; everything else, comments included, as it was.
fn repin(text: &str, digest: &str) -> Result<String> {
    #[derive(Deserialize)]
    struct Pin {
        sha256: Option<toml::Spanned<String>>,
    }
    let pin: Pin = toml::from_str(text).context("reading the manifest's sha256")?;
    let span = pin.sha256.context("the manifest has no sha256 pin")?.span();
    Ok(format!(
        "{}\"{digest}\"{}",
        &text[..span.start],
        &text[span.end..]
    ))
}

/// Compares a plugin directory with its lock.
///
/// # Errors
/// When the directory or the lock cannot be read.
pub fn check(dir_path: &Path) -> Result<Vec<Drift>> {
    let dir = cap_std::fs::Dir::open_ambient_dir(dir_path, ambient_authority())
        .with_context(|| format!("opening plugin directory {}", dir_path.display()))?;
    let lock = Lock::read(&dir)?;
    let Current {
        found,
        stale_pins,
        problems: mut drift,
    } = current(&dir)?;
    for (name, entry) in &found {
        match lock.plugins.get(name) {
            Some(l) if l.sha256 == entry.sha256 => {}
            Some(l) => drift.push(Drift::Changed {
                plugin: name.clone(),
                locked: l.sha256.clone(),
                actual: entry.sha256.clone(),
            }),
            None => drift.push(Drift::Unlocked {
                plugin: name.clone(),
                actual: entry.sha256.clone(),
            }),
        }
    }
    for name in lock.plugins.keys() {
        if !found.contains_key(name) {
            drift.push(Drift::Missing {
                plugin: name.clone(),
            });
        }
    }
    drift.extend(stale_pins.into_iter().map(|p| Drift::Pinned {
        plugin: p.plugin,
        file: p.file,
        pinned: p.pinned,
        actual: p.actual,
    }));
    Ok(drift)
}

/// Rewrites the lock from the directory's current components; returns the
/// new lock. A manifest pin that no longer matches is rewritten with it
/// ([`update_all`]).
///
/// # Errors
/// When a manifest or component cannot be read, or the lock cannot be written.
pub fn update(dir_path: &Path) -> Result<Lock> {
    update_all(dir_path).map(|u| u.lock)
}

/// What [`update_all`] wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Updated {
    /// The lock as written.
    pub lock: Lock,
    /// The manifests whose `sha256` pin was rewritten: (plugin, manifest file).
    pub repinned: Vec<(String, String)>,
}

/// Accepts every component of the directory as it is now: records its
/// digest in the lock, and rewrites the `sha256` pin of each manifest that
/// pins another digest (only that value; the rest of the file, comments
/// included, stays). The manifests and the lock are replaced as one change
/// under the directory's writer lock, so a host reloading the directory
/// never sees a new pin with an old lock for long, and a failure changes
/// nothing.
///
/// # Errors
/// When a manifest or component cannot be read, or the files cannot be written.
pub fn update_all(dir_path: &Path) -> Result<Updated> {
    let dir = cap_std::fs::Dir::open_ambient_dir(dir_path, ambient_authority())
        .with_context(|| format!("opening plugin directory {}", dir_path.display()))?;
    let _writer = crate::plugin_dir::lock_in(&dir, dir_path)?;
    let mut lock = Lock::read(&dir)?;
    let now = current(&dir)?;
    if let Some(p) = now.problems.first() {
        anyhow::bail!("cannot lock: {p}");
    }
    // Where a plugin came from and who signed it stay known while its bytes do not change.
    lock.plugins = now
        .found
        .into_iter()
        .map(|(name, mut entry)| {
            if let Some(old) = lock.plugins.get(&name)
                && old.sha256 == entry.sha256
            {
                entry.source.clone_from(&old.source);
                entry.signer.clone_from(&old.signer);
            }
            (name, entry)
        })
        .collect();
    let mut texts = Vec::with_capacity(now.stale_pins.len() + 1);
    for pin in &now.stale_pins {
        let text = repin(&pin.text, &pin.actual)
            .with_context(|| format!("updating the sha256 pin of {}", pin.file))?;
        texts.push((pin.file.as_str(), text));
    }
    let lock_text = lock.text()?;
    let mut changes: Vec<(&str, Option<&[u8]>)> = texts
        .iter()
        .map(|(file, text)| (*file, Some(text.as_bytes())))
        .collect();
    changes.push((LOCK_FILE, Some(lock_text.as_bytes())));
    crate::plugin_dir::replace_all_in(&dir, dir_path, &changes)
        .with_context(|| format!("writing {LOCK_FILE}"))?;
    Ok(Updated {
        lock,
        repinned: now
            .stale_pins
            .into_iter()
            .map(|p| (p.plugin, p.file))
            .collect(),
    })
}

/// Records (or replaces) one plugin's digest in a directory's lock, as the
/// operator's deliberate act (for example after installing a new version).
///
/// # Errors
/// When the lock cannot be read or written.
pub fn record(dir_path: &Path, plugin: &str, component: &str, bytes: &[u8]) -> Result<()> {
    record_entry(
        dir_path,
        plugin,
        LockEntry {
            component: component.to_string(),
            sha256: sha256_hex(bytes),
            source: None,
            signer: None,
        },
    )
}

/// Records (or replaces) one plugin's entry, with where it came from and
/// who signed it (`wasmprov install`).
///
/// # Errors
/// When the lock cannot be read or written.
pub fn record_entry(dir_path: &Path, plugin: &str, entry: LockEntry) -> Result<()> {
    let dir = cap_std::fs::Dir::open_ambient_dir(dir_path, ambient_authority())
        .with_context(|| format!("opening plugin directory {}", dir_path.display()))?;
    modify_in(&dir, dir_path, |lock| {
        lock.plugins.insert(plugin.to_string(), entry);
        Ok(())
    })
    .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pin_is_rewritten_in_place() {
        let new = "a".repeat(64);
        for (text, want) in [
            (
                "# keep me\nname = \"x\"\nsha256 = \"0123\"   # the pin\n[config]\nsha256 = \"not this\"\n",
                format!(
                    "# keep me\nname = \"x\"\nsha256 = \"{new}\"   # the pin\n[config]\nsha256 = \"not this\"\n"
                ),
            ),
            (
                "name = 'x'\nsha256 = 'sha256:0123'\n",
                format!("name = 'x'\nsha256 = \"{new}\"\n"),
            ),
        ] {
            assert_eq!(repin(text, &new).unwrap(), want);
        }
        assert!(repin("name = \"x\"\n", &new).is_err());
    }

    #[test]
    fn the_lock_file_is_one_of_the_directorys_own_files() {
        assert!(wasmprov_policy::manifest::DIRECTORY_FILES.contains(&LOCK_FILE));
        assert!(wasmprov_policy::manifest::DIRECTORY_FILES.contains(&wasmprov_policy::trust::FILE));
    }

    #[test]
    fn concurrent_records_keep_every_entry() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().to_path_buf();
        let writers: Vec<_> = (0..8)
            .map(|w| {
                let path = path.clone();
                std::thread::spawn(move || {
                    for i in 0..10 {
                        let name = format!("p{w}-{i}");
                        record_entry(
                            &path,
                            &name,
                            LockEntry {
                                component: format!("{name}.wasm"),
                                sha256: "0".repeat(64),
                                source: None,
                                signer: None,
                            },
                        )
                        .unwrap();
                    }
                })
            })
            .collect();
        // The host's first-use records race with them.
        let dir = cap_std::fs::Dir::open_ambient_dir(&path, ambient_authority()).unwrap();
        for i in 0..10 {
            record_first_use(
                &dir,
                &path,
                [(
                    format!("host-{i}"),
                    LockEntry {
                        component: format!("host-{i}.wasm"),
                        sha256: "1".repeat(64),
                        source: None,
                        signer: None,
                    },
                )],
            )
            .unwrap();
        }
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(read(&path).unwrap().plugins.len(), 8 * 10 + 10);
        // A first sighting never overwrites another writer's record.
        record_first_use(
            &dir,
            &path,
            [(
                "p0-0".to_string(),
                LockEntry {
                    component: "p0-0.wasm".into(),
                    sha256: "2".repeat(64),
                    source: None,
                    signer: None,
                },
            )],
        )
        .unwrap();
        assert_eq!(read(&path).unwrap().plugins["p0-0"].sha256, "0".repeat(64));
    }
}
