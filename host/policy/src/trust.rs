//! `wasmprov.toml`, the plugin directory's own settings: whose signatures
//! `wasmprov install` accepts, and which plugins the operator lets in
//! unsigned. Read here; the signatures themselves are checked where they
//! are fetched.
//!
//! ```toml
//! [signatures]
//! unsigned = ["my-local-build"]      # plugins allowed without a signature
//!
//! [[signatures.keys]]
//! name = "acme releases"
//! minisign = "RWQf6LRCGA9i53mlYecO4IzT51TGPpvWucNSCh1CBM0QTaLn73Y7GFO3"
//! ```

use serde::Deserialize;

/// The settings file's name inside the plugin directory (never a manifest).
pub const FILE: &str = "wasmprov.toml";

/// One trusted public key.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TrustedKey {
    /// A name for the signer, shown and recorded in the lock.
    pub name: String,
    /// A minisign public key (the base64 line of its `.pub` file).
    pub minisign: String,
}

/// The `[signatures]` table.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Signatures {
    /// Keys whose signatures are accepted.
    #[serde(default)]
    pub keys: Vec<TrustedKey>,
    /// Plugins the operator accepts without a (valid) signature.
    #[serde(default)]
    pub unsigned: Vec<String>,
}

/// The whole settings file.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DirSettings {
    /// Signature policy.
    #[serde(default)]
    pub signatures: Signatures,
}

impl DirSettings {
    /// Parses the settings.
    ///
    /// # Errors
    /// What is wrong, naming the field.
    pub fn parse(text: &str) -> Result<Self, String> {
        let s: Self = toml::from_str(text).map_err(|e| format!("{FILE}: {}", e.message()))?;
        for (i, k) in s.signatures.keys.iter().enumerate() {
            if k.name.trim().is_empty() || k.name.chars().any(char::is_control) {
                return Err(format!(
                    "{FILE}: signatures.keys[{i}].name must be a one-line name for the signer"
                ));
            }
            if k.minisign.trim().is_empty() {
                return Err(format!(
                    "{FILE}: signatures.keys[{i}].minisign must be a minisign public key"
                ));
            }
        }
        Ok(s)
    }

    /// Whether the operator lets `plugin` in without a signature.
    #[must_use]
    pub fn allows_unsigned(&self, plugin: &str) -> bool {
        self.signatures.unsigned.iter().any(|p| p == plugin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_keys_and_opt_outs() {
        let s = DirSettings::parse(
            "[signatures]\nunsigned = [\"dev\"]\n[[signatures.keys]]\nname = \"acme\"\nminisign = \"RWQ\"\n",
        )
        .unwrap();
        assert_eq!(s.signatures.keys[0].name, "acme");
        assert!(s.allows_unsigned("dev") && !s.allows_unsigned("acme"));
        assert_eq!(DirSettings::parse("").unwrap(), DirSettings::default());
        for bad in [
            "[signatures]\nkeys = [{ name = \"\", minisign = \"RWQ\" }]\n",
            "[signatures]\nkeys = [{ name = \"a\", minisign = \"\" }]\n",
            "[signature]\n",
        ] {
            assert!(DirSettings::parse(bad).unwrap_err().contains(FILE), "{bad}");
        }
    }
}
