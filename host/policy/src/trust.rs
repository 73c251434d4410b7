//! `wasmprov.toml`, the plugin directory's own settings: whose signatures
//! the directory trusts, and which plugins the operator lets in unsigned;
//! and the one check of a component's minisign signature against them,
//! made by `wasmprov install` and again by the host at every load.
//!
//! ```toml
//! [signatures]
//! unsigned = ["my-local-build"]      # plugins (by the name the operator installs them under) allowed without a signature
//!
//! [[signatures.unsigned_from]]       # the same, only from one source
//! name = "dev"
//! source = "127.0.0.1:5000/plugins/dev"
//!
//! [[signatures.keys]]
//! name = "acme releases"
//! minisign = "RWQf6LRCGA9i53mlYecO4IzT51TGPpvWucNSCh1CBM0QTaLn73Y7GFO3"
//! ```
//!
//! A signature binds the bytes *and the plugin's name*: its trusted comment
//! (signed with the bytes) must name the plugin it is installed or loaded
//! as, `wasmprov plugin NAME sha256:HEX timestamp:UNIX [version:V]` (what
//! `wasmprov push --sign` writes) or minisign's own
//! `timestamp:UNIX\tfile:NAME.wasm` (what `minisign -Sm NAME.wasm` writes).

use std::io::Cursor;

use minisign::{PublicKey, SignatureBox};
use serde::{Deserialize, Serialize};

/// The settings file's name inside the plugin directory (never a manifest).
pub const FILE: &str = "wasmprov.toml";

/// Largest signature file read, in bytes (a minisign signature is ~300).
pub const MAX_SIGNATURE_BYTES: u64 = 64 * 1024;

/// One trusted public key.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TrustedKey {
    /// A name for the signer, shown and recorded in the lock.
    pub name: String,
    /// A minisign public key (the base64 line of its `.pub` file).
    pub minisign: String,
}

/// A plugin let in unsigned from one source only.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct UnsignedSource {
    /// The plugin's name (as installed).
    pub name: String,
    /// `registry/repository` (no tag or digest), or the absolute path of a
    /// local `.wasm`.
    pub source: String,
}

/// The `[signatures]` table.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Signatures {
    /// Keys whose signatures are accepted.
    #[serde(default)]
    pub keys: Vec<TrustedKey>,
    /// Plugins the operator accepts without a (valid) signature, by the
    /// name they are installed under, from any source.
    #[serde(default)]
    pub unsigned: Vec<String>,
    /// Plugins the operator accepts without a signature from one source.
    #[serde(default)]
    pub unsigned_from: Vec<UnsignedSource>,
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

    /// Whether the operator lets `plugin` in without a signature from any
    /// source.
    #[deprecated(
        note = "use allows_unsigned_from, which also honours [[signatures.unsigned_from]]"
    )]
    #[must_use]
    pub fn allows_unsigned(&self, plugin: &str) -> bool {
        self.signatures.unsigned.iter().any(|p| p == plugin)
    }

    /// Whether the operator lets `plugin` in without a signature when it
    /// comes from `source` (`registry/repository`, or a file's absolute
    /// path; `None` when the source is not known, as for a file dropped
    /// into the directory).
    #[must_use]
    pub fn allows_unsigned_from(&self, plugin: &str, source: Option<&str>) -> bool {
        self.signatures.unsigned.iter().any(|p| p == plugin)
            || self
                .signatures
                .unsigned_from
                .iter()
                .any(|u| u.name == plugin && source.is_some_and(|s| source_is(s, &u.source)))
    }

    /// Whether the directory trusts any signer: then every plugin must be
    /// signed by one of them, or be let in unsigned by name.
    #[must_use]
    pub fn requires_signatures(&self) -> bool {
        !self.signatures.keys.is_empty()
    }
}

/// Whether `actual` (a reference as installed, `REG/REPO:TAG (REG/REPO@sha256:…)`,
/// or a file path) comes from `wanted` (`REG/REPO`, or the file path).
fn source_is(actual: &str, wanted: &str) -> bool {
    !wanted.is_empty()
        && actual
            .strip_prefix(wanted)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with([':', '@', ' ']))
}

/// What a signature's trusted comment says (it is signed with the bytes).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SignedFacts {
    /// The plugin the signer signed the bytes for.
    pub plugin: Option<String>,
    /// The component's sha256 (hex) the signer wrote.
    pub sha256: Option<String>,
    /// When it was signed (seconds since 1970).
    pub timestamp: Option<i64>,
    /// The version the signer gave.
    pub version: Option<String>,
}

impl SignedFacts {
    /// Reads a trusted comment: wasmprov's (`wasmprov plugin NAME
    /// sha256:HEX timestamp:UNIX version:V`) or minisign's default
    /// (`timestamp:UNIX\tfile:NAME.wasm\thashed`).
    #[must_use]
    pub fn parse(comment: &str) -> Self {
        let mut facts = Self::default();
        let mut words = comment.split_whitespace().peekable();
        if words.peek() == Some(&"wasmprov") {
            words.next();
            if words.next() == Some("plugin") {
                facts.plugin = words.next().map(str::to_string);
            }
        }
        for w in words {
            if let Some(hex) = w.strip_prefix("sha256:") {
                facts.sha256 = Some(hex.to_ascii_lowercase());
            } else if let Some(t) = w.strip_prefix("timestamp:") {
                facts.timestamp = t.parse().ok();
            } else if let Some(v) = w.strip_prefix("version:") {
                facts.version = Some(v.to_string());
            } else if let Some(file) = w.strip_prefix("file:")
                && facts.plugin.is_none()
            {
                let base = file.rsplit('/').next().unwrap_or(file);
                facts.plugin = Some(base.strip_suffix(".wasm").unwrap_or(base).to_string());
            }
        }
        facts
    }

    /// The trusted comment `wasmprov push --sign` writes.
    #[must_use]
    pub fn comment(plugin: &str, sha256: &str, timestamp: i64, version: Option<&str>) -> String {
        let mut c = format!("wasmprov plugin {plugin} sha256:{sha256} timestamp:{timestamp}");
        if let Some(v) = version.filter(|v| !v.is_empty() && !v.contains(char::is_whitespace)) {
            c.push_str(&format!(" version:{v}"));
        }
        c
    }

    /// Whether `self` (being installed) is older than `installed`, and how
    /// that shows: by version when both carry one that reads as numbers,
    /// else by signing time.
    #[must_use]
    pub fn older_than(&self, installed: &Self) -> Option<String> {
        if let (Some(new), Some(old)) = (&self.version, &installed.version)
            && let (Some(n), Some(o)) = (version_numbers(new), version_numbers(old))
        {
            return (n < o).then(|| format!("version {new} is older than the installed {old}"));
        }
        match (self.timestamp, installed.timestamp) {
            (Some(new), Some(old)) if new < old => Some(format!(
                "it was signed at {new} (Unix time), before the installed one ({old})"
            )),
            _ => None,
        }
    }
}

fn version_numbers(v: &str) -> Option<Vec<u64>> {
    let core = v.strip_prefix('v').unwrap_or(v);
    let core = core.split(['-', '+']).next()?;
    core.split('.').map(|p| p.parse().ok()).collect()
}

/// The minisign key id of a public key, as minisign prints it.
#[must_use]
pub fn key_id(pk: &PublicKey) -> String {
    let mut n = [0u8; 8];
    n.copy_from_slice(&pk.keynum()[..8]);
    format!("{:016X}", u64::from_le_bytes(n))
}

/// Who vouches for a component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Signed for this plugin by a trusted key.
    Signed {
        /// The key's name in `wasmprov.toml`.
        key: String,
        /// What its trusted comment says.
        facts: SignedFacts,
    },
    /// Let in without a valid signature by the operator's opt-out.
    UnsignedAllowed,
}

impl Verdict {
    /// How the lock and `wasmprov plugins` show it.
    #[must_use]
    pub fn label(&self) -> String {
        match self {
            Self::Signed { key, .. } => key.clone(),
            Self::UnsignedAllowed => "unsigned (allowed in wasmprov.toml)".to_string(),
        }
    }
}

/// Why a component's signature was not accepted. The caller adds what to
/// do (trust the key, or let the plugin in unsigned).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// There is no signature.
    #[error("is not signed; keys tried: {keys}")]
    Unsigned {
        /// The keys tried, with their ids.
        keys: String,
    },
    /// The signature is not a minisign signature.
    #[error("has a signature that is not a minisign signature ({reason}); keys tried: {keys}")]
    NotMinisign {
        /// The parser's reason.
        reason: String,
        /// The keys tried.
        keys: String,
    },
    /// A legacy (not prehashed) signature by a trusted key.
    #[error(
        "has a legacy minisign signature (made by `minisign -S -l` or a minisign before 0.6) by the trusted key {key}; legacy signatures are not accepted: sign it again with a current minisign (`minisign -S`, without -l) or `wasmprov push --sign`"
    )]
    Legacy {
        /// The trusted key that made it.
        key: String,
    },
    /// No trusted key verifies it.
    #[error("has a signature that does not verify with any trusted key; keys tried: {keys}{}", if reasons.is_empty() { String::new() } else { format!(" ({})", reasons.join("; ")) })]
    Untrusted {
        /// The keys tried.
        keys: String,
        /// Each key's reason.
        reasons: Vec<String>,
    },
    /// Signed by a trusted key, but the comment names no plugin.
    #[error(
        "is signed by {key}, but the signature names no plugin (trusted comment {comment:?}); a signature must say which plugin it is for: `wasmprov push --sign` writes \"wasmprov plugin NAME sha256:…\", `minisign -Sm NAME.wasm` writes \"file:NAME.wasm\""
    )]
    NamesNoPlugin {
        /// The trusted key.
        key: String,
        /// The trusted comment.
        comment: String,
    },
    /// Signed by a trusted key for another plugin.
    #[error(
        "is signed by {key} for plugin {signed_for:?}, not for {plugin:?}: a signature binds the plugin's name, so it cannot be installed or loaded under another"
    )]
    OtherPlugin {
        /// The trusted key.
        key: String,
        /// The plugin the signature names.
        signed_for: String,
        /// The plugin it would be.
        plugin: String,
    },
    /// The comment names other bytes than the signature covers.
    #[error(
        "is signed by {key} with a comment naming sha256:{signed}, but the component is sha256:{actual}"
    )]
    OtherBytes {
        /// The trusted key.
        key: String,
        /// The digest in the comment.
        signed: String,
        /// The component's digest.
        actual: String,
    },
}

/// Checks a component's signature for `plugin` against the directory's
/// trusted keys: the signature must verify with one of them and its
/// trusted comment must name `plugin` (and, if it names a digest, these
/// bytes). Otherwise the operator's opt-out for `plugin` (from `source`)
/// lets it in as [`Verdict::UnsignedAllowed`].
///
/// # Errors
/// Why it was refused.
pub fn verify(
    settings: &DirSettings,
    component: &[u8],
    signature: Option<&str>,
    plugin: &str,
    source: Option<&str>,
) -> Result<Verdict, Refusal> {
    let mut tried = Vec::new();
    let mut reasons = Vec::new();
    let mut binding: Option<Refusal> = None;
    let parsed = signature.map(|s| SignatureBox::from_string(s).map_err(|e| e.to_string()));
    for key in &settings.signatures.keys {
        let pk = match PublicKey::from_base64(key.minisign.trim()) {
            Ok(pk) => pk,
            Err(e) => {
                tried.push(format!("{} (unreadable key: {e})", key.name));
                continue;
            }
        };
        tried.push(format!("{} (key id {})", key.name, key_id(&pk)));
        let Some(Ok(sig)) = &parsed else { continue };
        if !sig.is_prehashed() {
            if minisign::verify(&pk, sig, Cursor::new(component), true, false, true).is_ok() {
                binding.get_or_insert(Refusal::Legacy {
                    key: key.name.clone(),
                });
            } else {
                reasons.push(format!("{}: legacy signature, not by this key", key.name));
            }
            continue;
        }
        match minisign::verify(&pk, sig, Cursor::new(component), true, false, false) {
            Ok(()) => {
                let comment = sig.trusted_comment().unwrap_or_default();
                let facts = SignedFacts::parse(&comment);
                let actual = hex_sha256(component);
                let refusal = match (&facts.plugin, &facts.sha256) {
                    (None, _) => Some(Refusal::NamesNoPlugin {
                        key: key.name.clone(),
                        comment,
                    }),
                    (Some(p), _) if p != plugin => Some(Refusal::OtherPlugin {
                        key: key.name.clone(),
                        signed_for: p.clone(),
                        plugin: plugin.to_string(),
                    }),
                    (_, Some(h)) if *h != actual => Some(Refusal::OtherBytes {
                        key: key.name.clone(),
                        signed: h.clone(),
                        actual,
                    }),
                    _ => None,
                };
                match refusal {
                    None => {
                        return Ok(Verdict::Signed {
                            key: key.name.clone(),
                            facts,
                        });
                    }
                    Some(r) => {
                        binding.get_or_insert(r);
                    }
                }
            }
            Err(e) => reasons.push(format!("{}: {e}", key.name)),
        }
    }
    if settings.allows_unsigned_from(plugin, source) {
        return Ok(Verdict::UnsignedAllowed);
    }
    if let Some(r) = binding {
        return Err(r);
    }
    let keys = if tried.is_empty() {
        format!("none: {FILE} lists no [[signatures.keys]]")
    } else {
        tried.join(", ")
    };
    Err(match parsed {
        None => Refusal::Unsigned { keys },
        Some(Err(reason)) => Refusal::NotMinisign { reason, keys },
        Some(Ok(_)) => Refusal::Untrusted { keys, reasons },
    })
}

fn hex_sha256(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    use std::fmt::Write as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use minisign::{KeyPair, SecretKey};

    #[test]
    fn parses_keys_and_opt_outs() {
        let s = DirSettings::parse(
            "[signatures]\nunsigned = [\"dev\"]\n[[signatures.unsigned_from]]\nname = \"pinned\"\nsource = \"127.0.0.1:5000/p/pinned\"\n[[signatures.keys]]\nname = \"acme\"\nminisign = \"RWQ\"\n",
        )
        .unwrap();
        assert_eq!(s.signatures.keys[0].name, "acme");
        assert!(s.allows_unsigned_from("dev", None) && !s.allows_unsigned_from("acme", None));
        assert!(s.allows_unsigned_from("pinned", Some("127.0.0.1:5000/p/pinned")));
        assert!(!s.allows_unsigned_from("pinned", Some("127.0.0.1:5000/evil/pinned")));
        assert!(!s.allows_unsigned_from("pinned", None));
        assert!(s.allows_unsigned_from(
            "pinned",
            Some("127.0.0.1:5000/p/pinned:1 (127.0.0.1:5000/p/pinned@sha256:00)")
        ));
        assert!(!s.allows_unsigned_from("pinned", Some("127.0.0.1:5000/p/pinned2:1")));
        assert!(s.requires_signatures());
        assert_eq!(DirSettings::parse("").unwrap(), DirSettings::default());
        assert!(!DirSettings::default().requires_signatures());
        for bad in [
            "[signatures]\nkeys = [{ name = \"\", minisign = \"RWQ\" }]\n",
            "[signatures]\nkeys = [{ name = \"a\", minisign = \"\" }]\n",
            "[signature]\n",
        ] {
            assert!(DirSettings::parse(bad).unwrap_err().contains(FILE), "{bad}");
        }
    }

    #[test]
    fn trusted_comments_are_read_in_both_formats() {
        let f = SignedFacts::parse(
            "wasmprov plugin hetzner sha256:AB12 timestamp:1700000000 version:1.2.0",
        );
        assert_eq!(f.plugin.as_deref(), Some("hetzner"));
        assert_eq!(f.sha256.as_deref(), Some("ab12"));
        assert_eq!(f.timestamp, Some(1_700_000_000));
        assert_eq!(f.version.as_deref(), Some("1.2.0"));
        let f = SignedFacts::parse("timestamp:1700000001\tfile:/tmp/x/digitalocean.wasm\thashed");
        assert_eq!(f.plugin.as_deref(), Some("digitalocean"));
        assert_eq!(f.timestamp, Some(1_700_000_001));
        // The older wasmprov comment, without time.
        let f = SignedFacts::parse("wasmprov plugin p sha256:00");
        assert_eq!((f.plugin.as_deref(), f.timestamp), (Some("p"), None));
        assert_eq!(SignedFacts::parse("anything else").plugin, None);
        let c = SignedFacts::comment("p", "ab", 5, Some("2.0"));
        assert_eq!(SignedFacts::parse(&c).version.as_deref(), Some("2.0"));
    }

    #[test]
    fn downgrades_are_told_by_version_then_by_time() {
        let at = |t: i64, v: Option<&str>| SignedFacts {
            timestamp: Some(t),
            version: v.map(str::to_string),
            ..SignedFacts::default()
        };
        assert!(
            at(10, Some("1.2.0"))
                .older_than(&at(5, Some("1.10.0")))
                .is_some()
        );
        assert!(
            at(5, Some("v2.0"))
                .older_than(&at(10, Some("1.9")))
                .is_none()
        );
        assert!(at(5, None).older_than(&at(10, None)).is_some());
        assert!(at(10, None).older_than(&at(5, None)).is_none());
        assert!(
            at(5, Some("latest"))
                .older_than(&at(10, Some("stable")))
                .is_some()
        );
        assert!(SignedFacts::default().older_than(&at(10, None)).is_none());
    }

    fn settings(keys: &[(&str, &PublicKey)], unsigned: &[&str]) -> DirSettings {
        let mut s = DirSettings::default();
        s.signatures.keys = keys
            .iter()
            .map(|(name, pk)| TrustedKey {
                name: (*name).to_string(),
                minisign: pk.to_base64(),
            })
            .collect();
        s.signatures.unsigned = unsigned.iter().map(|p| (*p).to_string()).collect();
        s
    }

    fn sign(sk: &SecretKey, data: &[u8], comment: &str) -> String {
        minisign::sign(None, sk, Cursor::new(data), Some(comment), None)
            .unwrap()
            .into_string()
    }

    #[test]
    fn a_signature_binds_the_bytes_and_the_plugin_name() {
        let acme = KeyPair::generate_unencrypted_keypair().unwrap();
        let other = KeyPair::generate_unencrypted_keypair().unwrap();
        let data = b"\0asm component bytes";
        let sha = hex_sha256(data);
        let trusted = settings(&[("acme", &acme.pk)], &[]);
        let for_p = sign(&acme.sk, data, &SignedFacts::comment("p", &sha, 1, None));
        let v = verify(&trusted, data, Some(&for_p), "p", None).unwrap();
        assert_eq!(v.label(), "acme");

        // For another plugin, for no plugin, naming other bytes.
        let e = verify(&trusted, data, Some(&for_p), "victim", None).unwrap_err();
        assert!(
            matches!(&e, Refusal::OtherPlugin { signed_for, .. } if signed_for == "p"),
            "{e}"
        );
        let nameless = sign(&acme.sk, data, "release 7");
        let e = verify(&trusted, data, Some(&nameless), "p", None).unwrap_err();
        assert!(matches!(e, Refusal::NamesNoPlugin { .. }), "{e}");
        let lying = sign(&acme.sk, data, "wasmprov plugin p sha256:00ff");
        assert!(matches!(
            verify(&trusted, data, Some(&lying), "p", None).unwrap_err(),
            Refusal::OtherBytes { .. }
        ));
        // minisign's own comment names the file.
        let tool = sign(&acme.sk, data, "timestamp:1\tfile:p.wasm\thashed");
        assert!(verify(&trusted, data, Some(&tool), "p", None).is_ok());

        // Other bytes, a stranger's key, none at all, garbage.
        assert!(matches!(
            verify(&trusted, b"tampered", Some(&for_p), "p", None).unwrap_err(),
            Refusal::Untrusted { .. }
        ));
        let stranger = sign(&other.sk, data, &SignedFacts::comment("p", &sha, 1, None));
        let e = verify(&trusted, data, Some(&stranger), "p", None).unwrap_err();
        assert!(e.to_string().contains(&key_id(&acme.pk)), "{e}");
        assert!(matches!(
            verify(&trusted, data, None, "p", None).unwrap_err(),
            Refusal::Unsigned { .. }
        ));
        assert!(matches!(
            verify(&trusted, data, Some("garbage"), "p", None).unwrap_err(),
            Refusal::NotMinisign { .. }
        ));
        let e = verify(&DirSettings::default(), data, Some(&for_p), "p", None).unwrap_err();
        assert!(
            e.to_string().contains("lists no [[signatures.keys]]"),
            "{e}"
        );

        // The opt-out is by the name the operator gives, and by source.
        let opted = settings(&[("acme", &acme.pk)], &["victim"]);
        assert_eq!(
            verify(&opted, data, Some(&for_p), "victim", None).unwrap(),
            Verdict::UnsignedAllowed
        );
        let mut from = settings(&[("acme", &acme.pk)], &[]);
        from.signatures.unsigned_from.push(UnsignedSource {
            name: "dev".into(),
            source: "127.0.0.1:5000/plugins/dev".into(),
        });
        assert!(verify(&from, data, None, "dev", Some("127.0.0.1:5000/plugins/dev")).is_ok());
        assert!(verify(&from, data, None, "dev", Some("127.0.0.1:5000/evil/dev")).is_err());
    }
}
