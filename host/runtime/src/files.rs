//! Where the files of a plugin directory are read: manifests, components
//! and the lock file, all of them untrusted input. A file is opened inside
//! the directory (cap-std: no `..`, no absolute path, no symlink out),
//! without blocking (a FIFO or a device never stalls the open), checked on
//! the opened handle to be a regular file, and read only up to its cap: a
//! file over the cap is refused from its size, before a byte is read.

use std::io::Read;

use sha2::Digest;

/// Largest component read by default (`HostBuilder::max_component_bytes`).
pub const DEFAULT_MAX_COMPONENT_BYTES: u64 = 64 << 20;
/// Largest manifest or lock file read.
pub const MAX_TEXT_BYTES: u64 = 1 << 20;

/// Why a file was not read.
#[derive(Debug)]
pub(crate) enum FileError {
    /// There is no such file.
    NotFound,
    /// It could not be opened or read.
    Io(std::io::Error),
    /// It is not a regular file (a FIFO, a device, a socket, a directory).
    NotRegular(&'static str),
    /// It is larger than the cap.
    TooLarge { size: u64, max: u64 },
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotFound => f.write_str("no such file"),
            Self::Io(e) if e.kind() == std::io::ErrorKind::PermissionDenied => write!(
                f,
                "{e} (the path leads outside the plugin directory, or is not readable)"
            ),
            Self::Io(e) if e.to_string().contains("outside") || e.raw_os_error().is_none() => {
                write!(f, "the path leads outside the plugin directory ({e})")
            }
            Self::Io(e) => write!(f, "{e}"),
            Self::NotRegular(kind) => write!(f, "is a {kind}, not a regular file; refused"),
            Self::TooLarge { size, max } => write!(
                f,
                "is {size} bytes, over the limit of {max} bytes; refused without reading it"
            ),
        }
    }
}

impl From<std::io::Error> for FileError {
    fn from(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::NotFound {
            Self::NotFound
        } else {
            Self::Io(e)
        }
    }
}

fn kind_of(ft: &cap_std::fs::FileType) -> &'static str {
    use cap_std::fs::FileTypeExt;
    if ft.is_dir() {
        "directory"
    } else if ft.is_fifo() {
        "FIFO"
    } else if ft.is_socket() {
        "socket"
    } else if ft.is_block_device() || ft.is_char_device() {
        "device"
    } else {
        "special file"
    }
}

/// Reads `path` in `dir` as untrusted input: a regular file of at most
/// `max` bytes. Returns its bytes and their SHA-256 (hex), hashed as read.
pub(crate) fn read_regular(
    dir: &cap_std::fs::Dir,
    path: &str,
    max: u64,
) -> Result<(Vec<u8>, String), FileError> {
    use cap_std::fs::OpenOptionsExt;
    let mut options = cap_std::fs::OpenOptions::new();
    options
        .read(true)
        .custom_flags((nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_NOCTTY).bits());
    let file = dir.open_with(path, &options)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(FileError::NotRegular(kind_of(&meta.file_type())));
    }
    if meta.len() > max {
        return Err(FileError::TooLarge {
            size: meta.len(),
            max,
        });
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    let mut digest = sha2::Sha256::new();
    let mut reader = file.take(max + 1);
    let mut chunk = vec![0u8; 64 << 10];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(FileError::Io(e)),
        };
        digest.update(&chunk[..n]);
        bytes.extend_from_slice(&chunk[..n]);
    }
    // It grew while being read.
    if bytes.len() as u64 > max {
        return Err(FileError::TooLarge {
            size: bytes.len() as u64,
            max,
        });
    }
    Ok((bytes, hex::encode(digest.finalize())))
}

/// Reads a manifest or the lock file: a regular UTF-8 file of at most
/// [`MAX_TEXT_BYTES`].
pub(crate) fn read_text(dir: &cap_std::fs::Dir, path: &str) -> Result<String, FileError> {
    let (bytes, _) = read_regular(dir, path, MAX_TEXT_BYTES)?;
    String::from_utf8(bytes).map_err(|_| {
        FileError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not UTF-8 text",
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir() -> (tempfile::TempDir, cap_std::fs::Dir) {
        let t = tempfile::tempdir().unwrap();
        let d = cap_std::fs::Dir::open_ambient_dir(t.path(), cap_std::ambient_authority()).unwrap();
        (t, d)
    }

    #[test]
    fn regular_files_are_read_and_hashed() {
        let (t, d) = dir();
        std::fs::write(t.path().join("a"), b"abc").unwrap();
        let (bytes, sha) = read_regular(&d, "a", 3).unwrap();
        assert_eq!(bytes, b"abc");
        assert_eq!(
            sha,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(matches!(
            read_regular(&d, "nope", 3),
            Err(FileError::NotFound)
        ));
    }

    #[test]
    fn fifos_directories_and_oversized_files_are_refused_without_reading() {
        let (t, d) = dir();
        let fifo = t.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        // Opening a FIFO with no writer would block; here it is refused at once.
        let err = read_regular(&d, "fifo", 10).unwrap_err();
        assert!(err.to_string().contains("FIFO"), "{err}");
        std::fs::create_dir(t.path().join("sub")).unwrap();
        assert!(
            read_regular(&d, "sub", 10)
                .unwrap_err()
                .to_string()
                .contains("directory")
        );
        // A sparse 64 GiB file: refused from its size.
        let big = std::fs::File::create(t.path().join("big")).unwrap();
        big.set_len(64 << 30).unwrap();
        let err = read_regular(&d, "big", 1 << 20).unwrap_err();
        assert!(
            matches!(err, FileError::TooLarge { size, .. } if size == 64 << 30),
            "{err}"
        );
        assert!(err.to_string().contains("refused without reading"), "{err}");
    }
}
