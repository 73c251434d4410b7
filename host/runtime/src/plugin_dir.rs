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
//!   (regular files only, opened without blocking, bounded).

use std::io::Write as _;
use std::path::{Path, PathBuf};

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

/// [`PluginDir::replace`] on a directory handle already open (the lock
/// writer's way in).
pub(crate) fn replace_in(dir: &cap_std::fs::Dir, name: &str, bytes: &[u8]) -> Result<()> {
    if name.is_empty()
        || name.starts_with('.')
        || name.contains(['/', '\\', '\0'])
        || Path::new(name).components().count() != 1
    {
        bail!("{name:?} is not a plain file name inside the plugin directory");
    }
    let tmp = format!(".{name}.{:016x}.tmp", rand::random::<u64>());
    let mut options = cap_std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    let write = || -> std::io::Result<()> {
        let mut file = dir.open_with(&tmp, &options)?;
        file.write_all(bytes)?;
        file.sync_all()
    };
    if let Err(e) = write().and_then(|()| dir.rename(&tmp, dir, name)) {
        let _ = dir.remove_file(&tmp);
        return Err(e.into());
    }
    Ok(())
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
}
