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
