//! The optional pre-shared key of the control plane: read from the file
//! named by `auth_key_file`, else from the environment variable
//! [`KEY_ENV`]. The key never appears in logs, `Debug` or the text form.

use std::fmt;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

/// The environment variable holding the key itself (used when no key file is configured).
pub const KEY_ENV: &str = "IBDXNET_AUTH_KEY";
/// Shortest accepted key, in bytes.
pub const MIN_KEY_LEN: usize = 16;
/// Longest accepted key file (a key is short; anything longer is the wrong file).
const MAX_KEY_FILE: u64 = 4096;

/// Why no key could be had; each names where the key was to come from.
#[derive(Debug, thiserror::Error)]
pub enum AuthKeyError {
    /// Fewer than [`MIN_KEY_LEN`] bytes.
    #[error("{origin}: the key is {len} bytes after trimming trailing whitespace; at least {MIN_KEY_LEN} are needed")]
    TooShort {
        /// Where the key came from (`auth_key_file = <path>` or [`KEY_ENV`]).
        origin: String,
        /// Its length after trimming.
        len: usize,
    },
    /// The key file could not be opened, examined or read.
    #[error("{name}: cannot {what} the key file: {source}")]
    Io {
        /// `auth_key_file = <path>`.
        name: String,
        /// `open`, `stat` or `read`.
        what: &'static str,
        /// The system's error.
        source: std::io::Error,
    },
    /// The path names no regular file.
    #[error("{0}: not a regular file")]
    NotAFile(String),
    /// Group or others may access the file.
    #[error(
        "{name}: mode {mode:04o} lets group or others access the key; it must be readable by its owner \
         only (chmod 600)"
    )]
    Exposed {
        /// `auth_key_file = <path>`.
        name: String,
        /// The file's permission bits.
        mode: u32,
    },
    /// Longer than any key file should be.
    #[error("{name}: {len} bytes is too long for a key file (at most {MAX_KEY_FILE})")]
    TooLong {
        /// `auth_key_file = <path>`.
        name: String,
        /// The file's length.
        len: u64,
    },
}

/// A pre-shared key. `Debug` shows only its length.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthKey(Arc<[u8]>);

impl fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AuthKey(<redacted, {} bytes>)", self.0.len())
    }
}

impl AuthKey {
    /// A key from its bytes (trailing whitespace trimmed); `origin` names
    /// where it came from in the error.
    pub fn new(bytes: &[u8], origin: &str) -> Result<AuthKey, AuthKeyError> {
        let end = bytes.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(0, |i| i + 1);
        let key = &bytes[..end];
        if key.len() < MIN_KEY_LEN {
            return Err(AuthKeyError::TooShort { origin: origin.to_owned(), len: key.len() });
        }
        Ok(AuthKey(key.into()))
    }

    /// The key bytes (for the MAC only).
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// Reads a key file. It must be readable and writable by its owner only
    /// (`mode & 0o077 == 0`): a key others can read is no secret.
    pub fn from_file(path: &Path) -> Result<AuthKey, AuthKeyError> {
        let name = format!("auth_key_file = {}", path.display());
        let io = |what, source| AuthKeyError::Io { name: name.clone(), what, source };
        let mut file = std::fs::File::open(path).map_err(|e| io("open", e))?;
        // The mode of the file actually opened (no window between check and read).
        let meta = file.metadata().map_err(|e| io("stat", e))?;
        if !meta.is_file() {
            return Err(AuthKeyError::NotAFile(name));
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(AuthKeyError::Exposed { name, mode });
        }
        if meta.len() > MAX_KEY_FILE {
            return Err(AuthKeyError::TooLong { name, len: meta.len() });
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| io("read", e))?;
        AuthKey::new(&bytes, &name)
    }

    /// The key of an engine: the file if one is configured (`file` non-empty),
    /// else the value of [`KEY_ENV`] given as `env` (empty or unset: no key).
    pub fn resolve(file: Option<&Path>, env: Option<&str>) -> Result<Option<AuthKey>, AuthKeyError> {
        match (file.filter(|p| !p.as_os_str().is_empty()), env.filter(|v| !v.is_empty())) {
            (Some(path), _) => AuthKey::from_file(path).map(Some),
            (None, Some(value)) => AuthKey::new(value.as_bytes(), KEY_ENV).map(Some),
            (None, None) => Ok(None),
        }
    }

    /// [`AuthKey::resolve`] with this process's environment.
    pub fn from_config(file: Option<&Path>) -> Result<Option<AuthKey>, AuthKeyError> {
        let env = std::env::var(KEY_ENV).ok();
        AuthKey::resolve(file, env.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn key_file(name: &str, content: &[u8], mode: u32) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("ibdxnet-key-{}-{name}", std::process::id()));
        // A leftover of an earlier run may or may not exist.
        let _ = std::fs::remove_file(&dir);
        let mut f = std::fs::File::create(&dir).unwrap();
        f.write_all(content).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
        dir
    }

    #[test]
    fn keys_are_trimmed_checked_and_never_shown() {
        let k = AuthKey::new(b"0123456789abcdef \n", "test").unwrap();
        assert_eq!(k.bytes(), b"0123456789abcdef");
        assert_eq!(format!("{k:?}"), "AuthKey(<redacted, 16 bytes>)");
        let e = AuthKey::new(b"short key      \n\n", "IBDXNET_AUTH_KEY").unwrap_err().to_string();
        assert!(e.contains("IBDXNET_AUTH_KEY") && e.contains("9 bytes"), "{e}");
    }

    #[test]
    fn the_file_wins_over_the_environment_and_empty_means_no_key() {
        let f = key_file("wins", b"file-key-0123456789\n", 0o600);
        let k = AuthKey::resolve(Some(&f), Some("env-key-0123456789")).unwrap().unwrap();
        assert_eq!(k.bytes(), b"file-key-0123456789");
        let k = AuthKey::resolve(Some(Path::new("")), Some("env-key-0123456789")).unwrap().unwrap();
        assert_eq!(k.bytes(), b"env-key-0123456789");
        assert_eq!(AuthKey::resolve(None, Some("")).unwrap(), None);
        assert_eq!(AuthKey::resolve(None, None).unwrap(), None);
        assert!(AuthKey::resolve(None, Some("too short")).unwrap_err().to_string().contains("IBDXNET_AUTH_KEY"));
        std::fs::remove_file(f).unwrap();
    }

    #[test]
    fn bad_files_are_refused_naming_the_file() {
        let f = key_file("mode", b"0123456789abcdef0123", 0o640);
        let e = AuthKey::from_file(&f).unwrap_err().to_string();
        assert!(e.contains("auth_key_file") && e.contains(&f.display().to_string()) && e.contains("0640"), "{e}");
        std::fs::remove_file(f).unwrap();
        let f = key_file("short", b"abc\n", 0o400);
        let e = AuthKey::from_file(&f).unwrap_err().to_string();
        assert!(e.contains("auth_key_file") && e.contains("3 bytes"), "{e}");
        std::fs::remove_file(&f).unwrap();
        let e = AuthKey::from_file(&f).unwrap_err().to_string();
        assert!(e.contains("auth_key_file") && e.contains("cannot open"), "{e}");
    }
}
