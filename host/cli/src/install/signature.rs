//! Who built a plugin: minisign signatures of the component's bytes, made
//! by `wasmprov push --sign KEY` or by the `minisign` tool itself
//! (`minisign -Sm hetzner.wasm`), checked against the keys the operator
//! trusts in the plugin directory's `wasmprov.toml`. The check itself is
//! `wasmprov_policy::trust::verify`, the one the host makes at every load;
//! here are the install's words around it, and signing.

use std::io::Cursor;
use std::path::Path;

use anyhow::{Context as _, Result, bail};
use minisign::{PublicKey, SecretKey, SecretKeyBox};
use wasmprov_host::policy::trust::{self, DirSettings, FILE, Refusal, Verdict};

/// Checks a component's signature for `plugin` against the directory's
/// trusted keys. `what` names the component in messages (a reference or a
/// file); `source` is where it comes from, for `[[signatures.unsigned_from]]`.
///
/// # Errors
/// When it is unsigned, no trusted key verifies it, or it is signed for
/// another plugin, and the operator has not let `plugin` in unsigned: the
/// message names the digest, every key tried, and what to do.
pub fn check(
    component: &[u8],
    signature: Option<&str>,
    settings: &DirSettings,
    dir: &Path,
    plugin: &str,
    what: &str,
    source: Option<&str>,
) -> Result<Verdict> {
    let digest = wasmprov_host::lock::sha256_hex(component);
    let refusal = match trust::verify(settings, component, signature, plugin, source) {
        Ok(v) => return Ok(v),
        Err(r) => r,
    };
    let fix = format!(
        "trust the signer's key in {} ([[signatures.keys]] name and minisign public key), or let this plugin in unsigned with [signatures] unsigned = [\"{plugin}\"]",
        dir.join(FILE).display()
    );
    let keys_text = |keys: &str| keys.replace(FILE, &dir.join(FILE).display().to_string());
    match refusal {
        Refusal::Unsigned { keys } => bail!(
            "refused: {what} (component sha256:{digest}) is not signed; keys tried: {}; {fix}",
            keys_text(&keys)
        ),
        Refusal::NotMinisign { reason, keys } => bail!(
            "refused: the signature of {what} (component sha256:{digest}) is not a minisign signature ({reason}); keys tried: {}; {fix}",
            keys_text(&keys)
        ),
        Refusal::Untrusted { keys, reasons } => bail!(
            "refused: the signature of {what} (component sha256:{digest}) does not verify with any trusted key; keys tried: {}{}; {fix}",
            keys_text(&keys),
            if reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", reasons.join("; "))
            }
        ),
        // Signed by a trusted key, but not acceptable as it is: trusting
        // the key again would not help.
        other => bail!("refused: {what} (component sha256:{digest}) {other}"),
    }
}

/// Opens a minisign secret key file: an encrypted one with `password`
/// (else `WASMPROV_SIGNING_PASSWORD`), an unencrypted one (`minisign -G
/// -W`, the usual CI key) without.
fn open_key(key_file: &Path) -> Result<SecretKey> {
    let text = std::fs::read_to_string(key_file)
        .with_context(|| format!("reading the signing key {}", key_file.display()))?;
    let boxed = SecretKeyBox::from_string(&text)
        .with_context(|| format!("{} is not a minisign secret key", key_file.display()))?;
    let encoded = text
        .lines()
        .nth(1)
        .with_context(|| format!("{} is not a minisign secret key", key_file.display()))?;
    let raw = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .with_context(|| format!("{} is not a minisign secret key", key_file.display()))?
    };
    // sig_alg (2) | kdf_alg (2) | chk_alg (2) | salt (32) | ops (8) | mem (8)
    // | keynum (8) | sk (64) | checksum (32)
    if raw.len() != 158 {
        bail!("{} is not a minisign secret key", key_file.display());
    }
    let encrypted = raw[2..4] != [0, 0];
    if !encrypted {
        if let Ok(key) = SecretKey::from_unencrypted_box(boxed) {
            return Ok(key);
        }
        // The minisign tool leaves the checksum of an unencrypted key
        // empty: check the key by signing with it instead.
        let key = SecretKey::from_bytes(&raw)
            .with_context(|| format!("{} is not a minisign secret key", key_file.display()))?;
        let pk = PublicKey::from_secret_key(&key)
            .with_context(|| format!("{} is not a minisign secret key", key_file.display()))?;
        let probe = minisign::sign(None, &key, Cursor::new(b"probe"), None, None)
            .context("signing with the key")?;
        minisign::verify(&pk, &probe, Cursor::new(b"probe"), true, false, false)
            .map_err(|_| anyhow::anyhow!("the signing key {} is corrupted", key_file.display()))?;
        return Ok(key);
    }
    let password = std::env::var("WASMPROV_SIGNING_PASSWORD").map_err(|_| {
        anyhow::anyhow!(
            "the signing key {} is password-protected: set WASMPROV_SIGNING_PASSWORD",
            key_file.display()
        )
    })?;
    SecretKey::from_box(boxed, Some(password))
        .with_context(|| format!("opening the signing key {}", key_file.display()))
}

/// Signs a component with a minisign secret key file, for `plugin`: the
/// trusted comment binds the name, the digest, the time and (when given)
/// the version ([`trust::SignedFacts::comment`]).
///
/// # Errors
/// When the key cannot be read or opened.
pub fn sign(
    component: &[u8],
    key_file: &Path,
    plugin: &str,
    version: Option<&str>,
) -> Result<String> {
    let key = open_key(key_file)?;
    let comment = trust::SignedFacts::comment(
        plugin,
        &wasmprov_host::lock::sha256_hex(component),
        chrono::Utc::now().timestamp(),
        version,
    );
    let sig = minisign::sign(
        None,
        &key,
        Cursor::new(component),
        Some(&comment),
        Some("signature from wasmprov push"),
    )
    .context("signing the component")?;
    Ok(sig.into_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use minisign::KeyPair;
    use wasmprov_host::policy::trust::TrustedKey;

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

    #[test]
    fn refusals_say_what_to_do_and_binding_refusals_do_not_ask_to_trust_the_key() {
        let acme = KeyPair::generate_unencrypted_keypair().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("acme.key");
        std::fs::write(&file, acme.sk.to_box(None).unwrap().to_string()).unwrap();
        let trusted = settings(&[("acme", &acme.pk)], &[]);
        let sig = sign(b"bytes", &file, "p", Some("1.0")).unwrap();
        assert_eq!(
            check(b"bytes", Some(&sig), &trusted, dir.path(), "p", "x", None)
                .unwrap()
                .label(),
            "acme"
        );
        let e = check(b"bytes", None, &trusted, dir.path(), "p", "x", None).unwrap_err();
        assert!(
            e.to_string().contains("is not signed")
                && e.to_string().contains("trust the signer's key"),
            "{e}"
        );
        let e = check(
            b"bytes",
            Some(&sig),
            &trusted,
            dir.path(),
            "victim",
            "x",
            None,
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("for plugin \"p\", not for \"victim\""),
            "{msg}"
        );
        assert!(!msg.contains("trust the signer's key"), "{msg}");
    }

    #[test]
    fn push_signs_with_a_key_file_password_or_not() {
        let dir = tempfile::tempdir().unwrap();
        let plain = KeyPair::generate_unencrypted_keypair().unwrap();
        let file = dir.path().join("plain.key");
        std::fs::write(&file, plain.sk.to_box(None).unwrap().to_string()).unwrap();
        let sig = sign(b"bytes", &file, "p", None).unwrap();
        let trusted = settings(&[("me", &plain.pk)], &[]);
        assert_eq!(
            check(b"bytes", Some(&sig), &trusted, dir.path(), "p", "x", None).unwrap(),
            Verdict::Signed {
                key: "me".into(),
                facts: trust::SignedFacts::parse(
                    &minisign::SignatureBox::from_string(&sig)
                        .unwrap()
                        .trusted_comment()
                        .unwrap()
                ),
            }
        );
        let comment = minisign::SignatureBox::from_string(&sig)
            .unwrap()
            .trusted_comment()
            .unwrap();
        assert!(
            comment.starts_with("wasmprov plugin p sha256:"),
            "{comment}"
        );
        assert!(comment.contains(" timestamp:"), "{comment}");
        let e = sign(b"bytes", &dir.path().join("absent.key"), "p", None).unwrap_err();
        assert!(format!("{e:#}").contains("absent.key"), "{e:#}");
    }
}
