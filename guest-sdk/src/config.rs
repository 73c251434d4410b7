//! Configuration values and secrets, through `wasi:config/store`.
//!
//! The host gives a plugin only the keys of its own manifest: `[config]`
//! values and `[secrets]` read from the host's environment. Errors are
//! [`Error::InvalidConfig`] naming the key, so `?` reports them well.

use std::str::FromStr;

use crate::wit::wasi::config::store;
use crate::{Error, Result};

/// The value of `key`, or `None` when the manifest does not set it.
///
/// # Errors
/// [`Error::InvalidConfig`] when the host's store fails.
pub fn get(key: &str) -> Result<Option<String>> {
    store::get(key).map_err(|e| Error::InvalidConfig(format!("reading config key {key:?}: {e:?}")))
}

/// The value of `key`, which must be set.
///
/// # Errors
/// [`Error::InvalidConfig`] naming the key when it is missing or empty.
pub fn require(key: &str) -> Result<String> {
    match get(key)? {
        Some(v) if !v.is_empty() => Ok(v),
        _ => Err(Error::InvalidConfig(format!(
            "config key {key:?} is required; set it in the plugin's manifest"
        ))),
    }
}

/// The value of `key` parsed as `T`, or `default` when unset.
///
/// # Errors
/// [`Error::InvalidConfig`] naming the key when the value does not parse.
pub fn parse_or<T: FromStr>(key: &str, default: T) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    match get(key)? {
        None => Ok(default),
        Some(v) => v
            .trim()
            .parse()
            .map_err(|e| Error::InvalidConfig(format!("config key {key:?} has value {v:?}: {e}"))),
    }
}

/// The URL at `key`, or `default` when unset: `http://` or `https://`
/// with a host, without a trailing `/` (so paths can be appended).
///
/// # Errors
/// [`Error::InvalidConfig`] naming the key for anything else.
pub fn url_or(key: &str, default: &str) -> Result<String> {
    let url = get(key)?.unwrap_or_else(|| default.to_string());
    let url = url.trim().trim_end_matches('/');
    let host = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .map(|rest| rest.split(['/', '?', '#']).next().unwrap_or(""));
    match host {
        Some(h) if !h.is_empty() && !url.contains(char::is_whitespace) => Ok(url.to_string()),
        _ => Err(Error::InvalidConfig(format!(
            "config key {key:?} must be an http:// or https:// URL with a host, not {url:?}"
        ))),
    }
}

/// A secret value (a token, a key) that `Debug` never shows, so a provider
/// holding one can derive `Debug` without leaking it into logs. A secret
/// the manifest leaves unset is an error only when it is used
/// ([`Secret::expose`]): calls that need no credentials (price hints) work
/// without it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret {
    key: String,
    value: Option<String>,
}

impl Secret {
    /// A secret `key` with this value.
    #[must_use]
    pub fn new(key: &str, value: impl Into<String>) -> Self {
        Self {
            key: key.to_string(),
            value: Some(value.into()),
        }
    }

    /// The value, for the request that needs it.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the key when it is not set.
    pub fn expose(&self) -> Result<&str> {
        self.value.as_deref().ok_or_else(|| {
            Error::InvalidConfig(format!(
                "secret {:?} is not set; set it where the manifest's [secrets] read it from",
                self.key
            ))
        })
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.value {
            Some(_) => write!(f, "{}=<redacted>", self.key),
            None => write!(f, "{}=<unset>", self.key),
        }
    }
}

/// The secret `key` (from the manifest's `[secrets]`), blanks around it
/// dropped; empty counts as unset.
///
/// # Errors
/// [`Error::InvalidConfig`] when the host's store fails.
pub fn secret(key: &str) -> Result<Secret> {
    let value = get(key)?
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty());
    Ok(Secret {
        key: key.to_string(),
        value,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn secrets_do_not_show_in_debug_and_unset_ones_fail_when_used() {
        let s = super::Secret::new("token", "tok-123");
        assert_eq!(format!("{s:?}"), "token=<redacted>");
        assert_eq!(s.expose().unwrap(), "tok-123");
        let unset = super::Secret {
            key: "token".into(),
            value: None,
        };
        assert_eq!(format!("{unset:?}"), "token=<unset>");
        assert_eq!(unset.expose().unwrap_err().kind(), "invalid_config");
    }
}
