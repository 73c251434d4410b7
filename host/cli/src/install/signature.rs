//! Who built a plugin: minisign signatures of the component's bytes, made
//! by `wasmprov push --sign KEY` or by the `minisign` tool itself
//! (`minisign -Sm hetzner.wasm`), checked against the keys the operator
//! trusts in the plugin directory's `wasmprov.toml`.

use std::io::Cursor;
use std::path::Path;

use anyhow::{Context as _, Result, bail};
use minisign::{PublicKey, SecretKey, SecretKeyBox, SignatureBox};
use wasmprov_host::policy::trust::{DirSettings, FILE};

/// What [`check`] recorded about a component.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signer {
    /// Signed by this trusted key (its name in `wasmprov.toml`).
    Key(String),
    /// Let in without a valid signature by the operator's opt-out.
    UnsignedAllowed,
}

impl Signer {
    /// How the lock and `wasmprov plugins` show it.
    pub fn label(&self) -> String {
        match self {
            Self::Key(name) => name.clone(),
            Self::UnsignedAllowed => "unsigned (allowed in wasmprov.toml)".to_string(),
        }
    }
}

fn key_id(pk: &PublicKey) -> String {
    let mut n = [0u8; 8];
    n.copy_from_slice(&pk.keynum()[..8]);
    format!("{:016X}", u64::from_le_bytes(n))
}

/// Checks a component's signature against the directory's trusted keys.
/// `what` names the component in messages (a reference or a file).
///
/// # Errors
/// When it is unsigned or no trusted key verifies it, and the operator has
/// not let `plugin` in unsigned: the message names the digest and every
/// key tried.
pub fn check(
    component: &[u8],
    signature: Option<&str>,
    settings: &DirSettings,
    dir: &Path,
    plugin: &str,
    what: &str,
) -> Result<Signer> {
    let digest = wasmprov_host::lock::sha256_hex(component);
    let mut tried = Vec::new();
    let mut reasons = Vec::new();
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
        if let Some(Ok(sig)) = &parsed {
            match minisign::verify(&pk, sig, Cursor::new(component), true, false, false) {
                Ok(()) => return Ok(Signer::Key(key.name.clone())),
                Err(e) => reasons.push(format!("{}: {e}", key.name)),
            }
        }
    }
    if settings.allows_unsigned(plugin) {
        return Ok(Signer::UnsignedAllowed);
    }
    let keys = if tried.is_empty() {
        format!(
            "none: {} lists no [[signatures.keys]]",
            dir.join(FILE).display()
        )
    } else {
        tried.join(", ")
    };
    let fix = format!(
        "trust the signer's key in {} ([[signatures.keys]] name and minisign public key), or let this plugin in unsigned with [signatures] unsigned = [\"{plugin}\"]",
        dir.join(FILE).display()
    );
    match parsed {
        None => bail!(
            "refused: {what} (component sha256:{digest}) is not signed; keys tried: {keys}; {fix}"
        ),
        Some(Err(e)) => bail!(
            "refused: the signature of {what} (component sha256:{digest}) is not a minisign signature ({e}); keys tried: {keys}; {fix}"
        ),
        Some(Ok(_)) => bail!(
            "refused: the signature of {what} (component sha256:{digest}) does not verify with any trusted key; keys tried: {keys}{}; {fix}",
            if reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", reasons.join("; "))
            }
        ),
    }
}

/// Signs a component with a minisign secret key file. A password-protected
/// key takes its password from `WASMPROV_SIGNING_PASSWORD`.
///
/// # Errors
/// When the key cannot be read or opened.
pub fn sign(component: &[u8], key_file: &Path, trusted_comment: &str) -> Result<String> {
    let text = std::fs::read_to_string(key_file)
        .with_context(|| format!("reading the signing key {}", key_file.display()))?;
    let boxed = SecretKeyBox::from_string(&text)
        .with_context(|| format!("{} is not a minisign secret key", key_file.display()))?;
    let key = match SecretKey::from_unencrypted_box(boxed.clone()) {
        Ok(key) => key,
        Err(_) => {
            let password = std::env::var("WASMPROV_SIGNING_PASSWORD").map_err(|_| {
                anyhow::anyhow!(
                    "the signing key {} is password-protected: set WASMPROV_SIGNING_PASSWORD",
                    key_file.display()
                )
            })?;
            SecretKey::from_box(boxed, Some(password))
                .with_context(|| format!("opening the signing key {}", key_file.display()))?
        }
    };
    let sig = minisign::sign(
        None,
        &key,
        Cursor::new(component),
        Some(trusted_comment),
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

    fn sign_with(sk: &SecretKey, data: &[u8]) -> String {
        minisign::sign(None, sk, Cursor::new(data), None, None)
            .unwrap()
            .into_string()
    }

    #[test]
    fn a_trusted_signature_names_its_signer_and_others_are_refused() {
        let acme = KeyPair::generate_unencrypted_keypair().unwrap();
        let other = KeyPair::generate_unencrypted_keypair().unwrap();
        let data = b"\0asm component bytes";
        let dir = Path::new("plugins.d");
        let trusted = settings(&[("acme", &acme.pk)], &[]);
        let sig = sign_with(&acme.sk, data);
        assert_eq!(
            check(data, Some(&sig), &trusted, dir, "p", "p.wasm").unwrap(),
            Signer::Key("acme".into())
        );

        // The same signature over other bytes, a stranger's signature, none at all.
        let e = check(b"tampered", Some(&sig), &trusted, dir, "p", "p.wasm").unwrap_err();
        assert!(e.to_string().contains("does not verify"), "{e}");
        assert!(e.to_string().contains(&key_id(&acme.pk)), "{e}");
        let e = check(
            data,
            Some(&sign_with(&other.sk, data)),
            &trusted,
            dir,
            "p",
            "p.wasm",
        )
        .unwrap_err();
        assert!(e.to_string().contains("does not verify"), "{e}");
        let e = check(data, None, &trusted, dir, "p", "p.wasm").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("is not signed") && msg.contains("sha256:"),
            "{msg}"
        );
        assert!(msg.contains("acme (key id"), "{msg}");
        let e = check(data, Some("garbage"), &trusted, dir, "p", "p.wasm").unwrap_err();
        assert!(e.to_string().contains("not a minisign signature"), "{e}");

        // No keys at all says so; the per-plugin opt-out lets it in.
        let e = check(
            data,
            Some(&sig),
            &DirSettings::default(),
            dir,
            "p",
            "p.wasm",
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("lists no [[signatures.keys]]"),
            "{e}"
        );
        let opted_out = settings(&[("acme", &acme.pk)], &["p"]);
        assert_eq!(
            check(b"tampered", Some(&sig), &opted_out, dir, "p", "p.wasm").unwrap(),
            Signer::UnsignedAllowed
        );
    }

    #[test]
    fn push_signs_with_a_key_file_password_or_not() {
        let dir = tempfile::tempdir().unwrap();
        let plain = KeyPair::generate_unencrypted_keypair().unwrap();
        let file = dir.path().join("plain.key");
        std::fs::write(&file, plain.sk.to_box(None).unwrap().to_string()).unwrap();
        let sig = sign(b"bytes", &file, "wasmprov plugin p").unwrap();
        let trusted = settings(&[("me", &plain.pk)], &[]);
        assert_eq!(
            check(b"bytes", Some(&sig), &trusted, dir.path(), "p", "x").unwrap(),
            Signer::Key("me".into())
        );
        assert!(
            SignatureBox::from_string(&sig)
                .unwrap()
                .trusted_comment()
                .unwrap()
                == "wasmprov plugin p"
        );
        let e = sign(b"bytes", &dir.path().join("absent.key"), "c").unwrap_err();
        assert!(format!("{e:#}").contains("absent.key"), "{e:#}");
    }
}
