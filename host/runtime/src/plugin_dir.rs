//! The one writer of a plugin directory. Every file wasmprov writes there
//! (components, manifests, signatures, `wasmprov.lock`; by `install`,
//! `bundle`, `lock --update` and the host's trust-on-first-use) goes
//! through [`PluginDir::replace`]:
//!
//! - the directory is opened once as a capability (cap-std): no name may
//!   lead out of it (`..`, absolute paths, symlinks out are refused);
//! - a name must be one plain file name, not hidden, not a path;
//! - the bytes go to a temporary file with an unpredictable name, created
//!   exclusively (`O_CREAT|O_EXCL`, which never follows a symlink), synced,
//!   then renamed over the target (a symlink planted at the target is
//!   replaced, never followed);
//! - reads go through the same handle with the rules of `files.rs`
//!   (regular files only, opened without blocking, bounded);
//! - a read-modify-write (the lock, an install's files) holds the
//!   directory's writer lock ([`PluginDir::lock`]: `flock` on
//!   `.wasmprov.writing` in the directory), so two writers at once (two
//!   installs, an install and a host recording a first use) never lose
//!   each other's changes;
//! - several files that belong together (an install's component,
//!   signature, manifest and lock entry) are replaced all or nothing
//!   ([`PluginDir::replace_all`]): every target is checked and every new
//!   file written before the first rename.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use cap_std::ambient_authority;

/// A plugin directory opened for reading and writing.
#[derive(Debug)]
pub struct PluginDir {
    dir: cap_std::fs::Dir,
    path: PathBuf,
}

impl PluginDir {
    /// Opens (creating it if needed) the plugin directory at `path`.
    ///
    /// # Errors
    /// When it cannot be created or opened.
    pub fn open(path: &Path) -> Result<Self> {
        std::fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))?;
        let dir = cap_std::fs::Dir::open_ambient_dir(path, ambient_authority())
            .with_context(|| format!("opening plugin directory {}", path.display()))?;
        Ok(Self {
            dir,
            path: path.to_path_buf(),
        })
    }

    /// Opens an existing plugin directory without creating it.
    ///
    /// # Errors
    /// When it does not exist or cannot be opened.
    pub fn open_existing(path: &Path) -> Result<Self> {
        let dir = cap_std::fs::Dir::open_ambient_dir(path, ambient_authority())
            .with_context(|| format!("opening plugin directory {}", path.display()))?;
        Ok(Self {
            dir,
            path: path.to_path_buf(),
        })
    }

    /// The directory's path (for messages).
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads `name` as untrusted input: a regular file of at most `max`
    /// bytes, opened without blocking; `Ok(None)` when there is none.
    ///
    /// # Errors
    /// A FIFO, device, directory, a file over `max`, or a path leading out.
    pub fn read(&self, name: &str, max: u64) -> Result<Option<Vec<u8>>> {
        match crate::files::read_regular(&self.dir, name, max) {
            Ok((bytes, _)) => Ok(Some(bytes)),
            Err(crate::files::FileError::NotFound) => Ok(None),
            Err(e) => bail!("{}: {e}", self.path.join(name).display()),
        }
    }

    /// Replaces `name` with `bytes`: written to an exclusively created
    /// temporary file with an unpredictable name, synced, and renamed over
    /// `name`. A reader sees the old file or the new one, never a part.
    ///
    /// # Errors
    /// A name that is not one plain file name, or a write that fails (the
    /// temporary file is removed).
    pub fn replace(&self, name: &str, bytes: &[u8]) -> Result<()> {
        replace_in(&self.dir, name, bytes)
            .with_context(|| format!("writing {}", self.path.join(name).display()))
    }

    /// Takes the directory's writer lock: an exclusive `flock` on
    /// [`WRITER_LOCK_FILE`], waiting at most [`WRITER_LOCK_WAIT`] for
    /// another writer (another install, a host recording a first use,
    /// `lock --update`). Hold it across a read-modify-write; it is released
    /// when dropped. Not reentrant: the lock functions of
    /// [`crate::lock`] take it themselves.
    ///
    /// # Errors
    /// When the lock file cannot be opened, or another writer holds it too
    /// long.
    pub fn lock(&self) -> Result<WriterLock> {
        lock_in(&self.dir, &self.path)
    }

    /// Replaces (`Some(bytes)`) or removes (`None`) several files as one
    /// change: every target is checked first (a directory, FIFO or device
    /// where a file goes is refused before anything is written), every
    /// new file is written and synced, then each is renamed into place; if
    /// a rename still fails, the files already replaced are put back.
    /// Hold [`lock`](Self::lock) around it when it rests on what was read.
    ///
    /// # Errors
    /// A name that is not one plain file name, a target that cannot be
    /// replaced, or a write that fails: then nothing was changed.
    pub fn replace_all(&self, changes: &[(&str, Option<&[u8]>)]) -> Result<()> {
        replace_all_in(&self.dir, &self.path, changes)
    }

    /// Removes `name` if it is there.
    ///
    /// # Errors
    /// When it exists and cannot be removed.
    pub fn remove(&self, name: &str) -> Result<()> {
        match self.dir.remove_file(name) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => {
                Err(e).with_context(|| format!("removing {}", self.path.join(name).display()))
            }
        }
    }
}

/// The file whose `flock` serializes the writers of one plugin directory
/// (hidden: never a manifest, never written to).
pub const WRITER_LOCK_FILE: &str = ".wasmprov.writing";

/// How long a writer waits for another one to finish before it gives up.
pub const WRITER_LOCK_WAIT: Duration = Duration::from_secs(30);

/// The directory's writer lock, held until dropped ([`PluginDir::lock`]).
#[derive(Debug)]
pub struct WriterLock {
    _file: std::fs::File,
}

/// Takes the writer lock of the directory `dir` (an exclusive `flock` on
/// [`WRITER_LOCK_FILE`]), waiting at most [`WRITER_LOCK_WAIT`].
pub(crate) fn lock_in(dir: &cap_std::fs::Dir, shown: &Path) -> Result<WriterLock> {
    let mut options = cap_std::fs::OpenOptions::new();
    options.read(true).write(true).create(true);
    let file = dir
        .open_with(WRITER_LOCK_FILE, &options)
        .with_context(|| format!("opening {}", shown.join(WRITER_LOCK_FILE).display()))?
        .into_std();
    if !file.metadata()?.is_file() {
        bail!(
            "{} is not a regular file; remove it",
            shown.join(WRITER_LOCK_FILE).display()
        );
    }
    let deadline = Instant::now() + WRITER_LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(WriterLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(std::fs::TryLockError::WouldBlock) => bail!(
                "another writer has held {} for {} s; nothing was changed",
                shown.join(WRITER_LOCK_FILE).display(),
                WRITER_LOCK_WAIT.as_secs()
            ),
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(e).with_context(|| {
                    format!("locking {}", shown.join(WRITER_LOCK_FILE).display())
                });
            }
        }
    }
}

fn plain_name(name: &str) -> Result<()> {
    if name.is_empty()
        || name.starts_with('.')
        || name.contains(['/', '\\', '\0'])
        || Path::new(name).components().count() != 1
    {
        bail!("{name:?} is not a plain file name inside the plugin directory");
    }
    Ok(())
}

/// Writes `bytes` to a new temporary file beside `name` (exclusively
/// created, unpredictable name, synced); returns its name.
fn stage(dir: &cap_std::fs::Dir, name: &str, bytes: &[u8]) -> std::io::Result<String> {
    let tmp = format!(".{name}.{:016x}.tmp", rand::random::<u64>());
    let mut options = cap_std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    let write = || -> std::io::Result<()> {
        let mut file = dir.open_with(&tmp, &options)?;
        file.write_all(bytes)?;
        file.sync_all()
    };
    match write() {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = dir.remove_file(&tmp);
            Err(e)
        }
    }
}

/// [`PluginDir::replace`] on a directory handle already open (the lock
/// writer's way in).
pub(crate) fn replace_in(dir: &cap_std::fs::Dir, name: &str, bytes: &[u8]) -> Result<()> {
    plain_name(name)?;
    let tmp = stage(dir, name, bytes)?;
    if let Err(e) = dir.rename(&tmp, dir, name) {
        let _ = dir.remove_file(&tmp);
        return Err(e.into());
    }
    Ok(())
}

/// Whether `name` may be replaced (or removed): absent, a regular file, or
/// a symlink (replaced, never followed). A directory, FIFO or device there
/// would make the rename fail halfway through a set of files.
fn replaceable(dir: &cap_std::fs::Dir, name: &str, shown: &Path) -> Result<bool> {
    match dir.symlink_metadata(name) {
        Ok(meta) if meta.is_file() || meta.is_symlink() => Ok(true),
        Ok(meta) => {
            let what = if meta.is_dir() {
                "a directory"
            } else {
                "not a regular file"
            };
            bail!(
                "{} is {what}; it would be replaced, so nothing was changed: remove it first",
                shown.join(name).display()
            )
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("reading {}", shown.join(name).display())),
    }
}

/// [`PluginDir::replace_all`] on a handle already open.
pub(crate) fn replace_all_in(
    dir: &cap_std::fs::Dir,
    shown: &Path,
    changes: &[(&str, Option<&[u8]>)],
) -> Result<()> {
    // Check every target before anything is written.
    let mut existed = Vec::with_capacity(changes.len());
    for (name, _) in changes {
        plain_name(name)?;
        existed.push(replaceable(dir, name, shown)?);
    }
    // Write every new file beside its target.
    let mut staged: Vec<Option<String>> = Vec::with_capacity(changes.len());
    for (name, bytes) in changes {
        let tmp = match bytes {
            Some(b) => match stage(dir, name, b) {
                Ok(t) => Some(t),
                Err(e) => {
                    for t in staged.iter().flatten() {
                        let _ = dir.remove_file(t);
                    }
                    return Err(e)
                        .with_context(|| format!("writing {}", shown.join(name).display()));
                }
            },
            None => None,
        };
        staged.push(tmp);
    }
    // Keep the old files (hard links) until every rename is done, to put
    // them back if one fails.
    let mut backups: Vec<Option<String>> = Vec::with_capacity(changes.len());
    for ((name, _), existed) in changes.iter().zip(&existed) {
        let backup = existed
            .then(|| format!(".{name}.{:016x}.old", rand::random::<u64>()))
            .filter(|b| dir.hard_link(name, dir, b).is_ok());
        backups.push(backup);
    }
    let mut done = 0;
    let mut failure = None;
    for (i, (name, _)) in changes.iter().enumerate() {
        let result = match &staged[i] {
            Some(tmp) => dir.rename(tmp, dir, name),
            None => match dir.remove_file(name) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                other => other,
            },
        };
        if let Err(e) = result {
            failure = Some((name, e));
            break;
        }
        done += 1;
    }
    if let Some((name, e)) = failure {
        // Put back what was already replaced or removed.
        for (i, (done_name, _)) in changes.iter().enumerate().take(done) {
            match &backups[i] {
                Some(b) => {
                    let _ = dir.rename(b, dir, done_name);
                }
                None if !existed[i] => {
                    let _ = dir.remove_file(done_name);
                }
                None => {}
            }
        }
        for t in staged.iter().flatten() {
            let _ = dir.remove_file(t);
        }
        for b in backups.iter().flatten() {
            let _ = dir.remove_file(b);
        }
        return Err(e).with_context(|| {
            format!(
                "replacing {}; the files replaced before it were put back",
                shown.join(name).display()
            )
        });
    }
    for b in backups.iter().flatten() {
        let _ = dir.remove_file(b);
    }
    Ok(())
}

/// The manifests of a plugin directory (`*.toml`, not hidden, not the
/// directory's own `wasmprov.toml`), sorted.
pub(crate) fn manifest_files(dir: &cap_std::fs::Dir) -> Result<Vec<String>> {
    let mut manifests: Vec<String> = dir
        .entries()
        .context("listing the plugin directory")?
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| {
            n.ends_with(".toml") && !n.starts_with('.') && n != wasmprov_policy::trust::FILE
        })
        .collect();
    manifests.sort();
    Ok(manifests)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_replace_planted_symlinks_instead_of_following_them() {
        let t = tempfile::tempdir().unwrap();
        let outside = t.path().join("outside.txt");
        std::fs::write(&outside, "precious").unwrap();
        let plugins = t.path().join("plugins.d");
        let d = PluginDir::open(&plugins).unwrap();
        // Symlinks at the target and at the old predictable temporary names.
        for name in [
            "victim.toml",
            ".victim.toml.installing",
            ".victim.wasm.installing",
        ] {
            std::os::unix::fs::symlink(&outside, plugins.join(name)).unwrap();
        }
        d.replace("victim.toml", b"name = \"victim\"").unwrap();
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "precious");
        let meta = std::fs::symlink_metadata(plugins.join("victim.toml")).unwrap();
        assert!(meta.is_file(), "the symlink was replaced by a file");
        assert_eq!(
            d.read("victim.toml", 100).unwrap().unwrap(),
            b"name = \"victim\""
        );
        // No temporary file is left behind.
        let left: Vec<_> = std::fs::read_dir(&plugins)
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".tmp"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn names_that_are_paths_are_refused_and_reads_are_bounded() {
        let t = tempfile::tempdir().unwrap();
        let d = PluginDir::open(t.path()).unwrap();
        for bad in ["../x", "/etc/passwd", "a/b", ".hidden", "", "."] {
            assert!(d.replace(bad, b"x").is_err(), "{bad:?}");
        }
        assert!(d.read("absent", 10).unwrap().is_none());
        d.replace("big", &[0u8; 100]).unwrap();
        assert!(d.read("big", 10).is_err());
        nix::unistd::mkfifo(&t.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(d.read("fifo", 10).unwrap_err().to_string().contains("FIFO"));
        // A symlink out of the directory is not read.
        std::os::unix::fs::symlink("/etc/hostname", t.path().join("out")).unwrap();
        assert!(d.read("out", 1 << 20).is_err());
    }

    #[test]
    fn a_set_of_files_is_replaced_all_or_nothing() {
        let t = tempfile::tempdir().unwrap();
        let d = PluginDir::open(t.path()).unwrap();
        d.replace("x.wasm", b"old component").unwrap();
        d.replace("x.toml", b"old manifest").unwrap();
        // A directory where a file goes: refused before any write.
        std::fs::create_dir(t.path().join("x.wasm.minisig")).unwrap();
        let e = d
            .replace_all(&[
                ("x.wasm", Some(b"new component")),
                ("x.wasm.minisig", None),
                ("x.toml", Some(b"new manifest")),
            ])
            .unwrap_err();
        assert!(e.to_string().contains("is a directory"), "{e:#}");
        assert_eq!(d.read("x.wasm", 100).unwrap().unwrap(), b"old component");
        assert_eq!(d.read("x.toml", 100).unwrap().unwrap(), b"old manifest");
        std::fs::remove_dir(t.path().join("x.wasm.minisig")).unwrap();
        d.replace("x.wasm.minisig", b"sig").unwrap();
        d.replace_all(&[
            ("x.wasm", Some(b"new component")),
            ("x.wasm.minisig", None),
            ("x.toml", Some(b"new manifest")),
        ])
        .unwrap();
        assert_eq!(d.read("x.wasm", 100).unwrap().unwrap(), b"new component");
        assert!(d.read("x.wasm.minisig", 100).unwrap().is_none());
        assert_eq!(d.read("x.toml", 100).unwrap().unwrap(), b"new manifest");
        let left: Vec<_> = std::fs::read_dir(t.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".tmp") || n.ends_with(".old"))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn the_writer_lock_is_exclusive_between_handles() {
        let t = tempfile::tempdir().unwrap();
        let a = PluginDir::open(t.path()).unwrap();
        let b = PluginDir::open(t.path()).unwrap();
        let held = a.lock().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let _l = b.lock().unwrap();
            tx.send(Instant::now()).unwrap();
        });
        std::thread::sleep(Duration::from_millis(200));
        let released = Instant::now();
        drop(held);
        let got = rx.recv().unwrap();
        waiter.join().unwrap();
        assert!(got >= released, "the second writer waited for the first");
    }
}
