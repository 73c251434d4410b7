//! The plugin's configuration, read from the manifest's `[config]` (and, for
//! the token, `[secrets]`) through `wasi:config/store`.
//!
//! Everything here has a default so that `price_hint` works with no
//! configuration at all; the API token is not part of [`Settings`] and is
//! only required when a call talks to the API.

use wasmprov_guest::{Error, Result};

use crate::catalogue::{self, Arch};

/// Default API base URL.
pub const DEFAULT_ENDPOINT: &str = "https://api.hetzner.cloud/v1";
/// Default system image.
pub const DEFAULT_IMAGE: &str = "ubuntu-24.04";
/// Default location when a shape names no zone.
pub const DEFAULT_LOCATION: &str = "fsn1";
/// Default EUR → USD rate.
pub const DEFAULT_EUR_USD: f64 = 1.08;
/// Default server name prefix.
pub const DEFAULT_NAME_PREFIX: &str = "wp";
/// Default (and largest) page size; the API clamps larger values to 50.
pub const DEFAULT_PAGE_SIZE: u32 = 50;
/// Longest name prefix accepted, so that names keep room for the request id.
pub const MAX_NAME_PREFIX: usize = 30;
/// Largest `user_data` the API accepts (32 KiB).
pub const MAX_USER_DATA: usize = 32 * 1024;

/// Configuration of one call.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// API base URL without a trailing slash, e.g. `https://api.hetzner.cloud/v1`.
    pub endpoint: String,
    /// Image name or id servers are created from.
    pub image: String,
    /// Location used when a shape names no zone.
    pub location: String,
    /// EUR → USD exchange rate for price hints.
    pub eur_usd: f64,
    /// Prefix of server names (`<prefix>-<request id>`).
    pub name_prefix: String,
    /// Cloud-init user data for created servers.
    pub user_data: Option<String>,
    /// `per_page` used when listing servers.
    pub page_size: u32,
    /// Only server types of this architecture are picked by size (an
    /// explicit instance type is always honoured); `None` allows both.
    pub architecture: Option<Arch>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            endpoint: DEFAULT_ENDPOINT.to_string(),
            image: DEFAULT_IMAGE.to_string(),
            location: DEFAULT_LOCATION.to_string(),
            eur_usd: DEFAULT_EUR_USD,
            name_prefix: DEFAULT_NAME_PREFIX.to_string(),
            user_data: None,
            page_size: DEFAULT_PAGE_SIZE,
            architecture: None,
        }
    }
}

fn invalid(key: &str, value: &str, why: &str) -> Error {
    Error::InvalidConfig(format!("config key {key:?} has value {value:?}: {why}"))
}

impl Settings {
    /// Reads the settings through `lookup` (the config store in the
    /// component, a map in tests). Unset and empty keys take their defaults.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the key whose value is wrong, or the
    /// error `lookup` returned.
    pub fn from_lookup(lookup: impl Fn(&str) -> Result<Option<String>>) -> Result<Self> {
        let get = |key: &str| -> Result<Option<String>> {
            Ok(lookup(key)?
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()))
        };
        let mut s = Self::default();

        if let Some(v) = get("endpoint")? {
            let lower = v.to_ascii_lowercase();
            if !(lower.starts_with("https://") || lower.starts_with("http://")) {
                return Err(invalid(
                    "endpoint",
                    &v,
                    "must start with https:// or http://",
                ));
            }
            if v.contains(['?', '#']) {
                return Err(invalid(
                    "endpoint",
                    &v,
                    "must not contain a query or fragment",
                ));
            }
            s.endpoint = v.trim_end_matches('/').to_string();
        }
        if let Some(v) = get("image")? {
            s.image = v;
        }
        if let Some(v) = get("location")? {
            let l = v.to_ascii_lowercase();
            if !catalogue::is_known_location(&l) {
                return Err(invalid(
                    "location",
                    &v,
                    "not a Hetzner Cloud location (fsn1, nbg1, hel1, ash, hil)",
                ));
            }
            s.location = l;
        }
        if let Some(v) = get("eur_usd")? {
            match v.parse::<f64>() {
                Ok(r) if r.is_finite() && r > 0.0 => s.eur_usd = r,
                _ => {
                    return Err(invalid(
                        "eur_usd",
                        &v,
                        "must be a positive number, like 1.08",
                    ));
                }
            }
        }
        if let Some(v) = get("name_prefix")? {
            let ok = v.len() <= MAX_NAME_PREFIX
                && v.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && v.starts_with(|c: char| c.is_ascii_alphanumeric())
                && v.ends_with(|c: char| c.is_ascii_alphanumeric());
            if !ok {
                return Err(invalid(
                    "name_prefix",
                    &v,
                    "must be 1-30 lowercase letters, digits and '-', starting and ending with a letter or digit",
                ));
            }
            s.name_prefix = v;
        }
        // user_data is passed as written (only surrounding whitespace is
        // ignored when deciding whether it is set).
        if let Some(raw) = lookup("user_data")?
            && !raw.trim().is_empty()
        {
            if raw.len() > MAX_USER_DATA {
                return Err(Error::InvalidConfig(format!(
                    "config key \"user_data\" is {} bytes; Hetzner accepts at most {MAX_USER_DATA}",
                    raw.len()
                )));
            }
            s.user_data = Some(raw);
        }
        if let Some(v) = get("page_size")? {
            match v.parse::<u32>() {
                Ok(n) if n >= 1 => s.page_size = n.min(DEFAULT_PAGE_SIZE),
                _ => return Err(invalid("page_size", &v, "must be an integer from 1 to 50")),
            }
        }
        if let Some(v) = get("architecture")?
            && !v.eq_ignore_ascii_case("any")
        {
            let arch = Arch::parse(&v)
                .ok_or_else(|| invalid("architecture", &v, "must be x86, arm or any"))?;
            s.architecture = Some(arch);
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn load(pairs: &[(&str, &str)]) -> Result<Settings> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        Settings::from_lookup(|k| Ok(map.get(k).cloned()))
    }

    #[test]
    fn no_config_gives_defaults() {
        let s = load(&[]).unwrap();
        assert_eq!(s, Settings::default());
        assert_eq!(s.endpoint, "https://api.hetzner.cloud/v1");
        assert_eq!(s.image, "ubuntu-24.04");
        assert_eq!(s.location, "fsn1");
        assert!((s.eur_usd - 1.08).abs() < 1e-12);
        assert_eq!(s.name_prefix, "wp");
        assert_eq!(s.page_size, 50);
        assert_eq!(s.user_data, None);
    }

    #[test]
    fn values_are_read_and_normalised() {
        let s = load(&[
            ("endpoint", "http://127.0.0.1:8080/v1/"),
            ("image", "debian-12"),
            ("location", "HEL1"),
            ("eur_usd", "1.1"),
            ("name_prefix", "k8s-pool"),
            ("user_data", "#cloud-config\nruncmd: []\n"),
            ("page_size", "500"),
            ("architecture", "x86"),
            ("token", "ignored-here"),
        ])
        .unwrap();
        assert_eq!(s.endpoint, "http://127.0.0.1:8080/v1");
        assert_eq!(s.image, "debian-12");
        assert_eq!(s.location, "hel1");
        assert!((s.eur_usd - 1.1).abs() < 1e-12);
        assert_eq!(s.name_prefix, "k8s-pool");
        assert_eq!(s.user_data.as_deref(), Some("#cloud-config\nruncmd: []\n"));
        assert_eq!(s.page_size, 50);
        assert_eq!(s.architecture, Some(Arch::X86));
        // Empty values mean "unset".
        assert_eq!(
            load(&[("location", ""), ("user_data", "  ")]).unwrap(),
            Settings::default()
        );
    }

    #[test]
    fn bad_values_name_the_key() {
        let cases = [
            ("endpoint", "api.hetzner.cloud"),
            ("endpoint", "https://x/v1?a=b"),
            ("location", "eu-central"),
            ("eur_usd", "0"),
            ("eur_usd", "NaN"),
            ("eur_usd", "abc"),
            ("name_prefix", "-wp"),
            ("name_prefix", "WP"),
            ("name_prefix", "w_p"),
            ("name_prefix", &"p".repeat(31)),
            ("page_size", "0"),
            ("page_size", "-1"),
            ("architecture", "riscv"),
        ];
        for (key, value) in cases {
            match load(&[(key, value)]) {
                Err(Error::InvalidConfig(m)) => assert!(m.contains(key), "{m}"),
                other => panic!("{key}={value:?}: {other:?}"),
            }
        }
        let big = "x".repeat(MAX_USER_DATA + 1);
        assert!(matches!(
            load(&[("user_data", &big)]),
            Err(Error::InvalidConfig(_))
        ));
    }
}
