//! Plugins as OCI artifacts, in the layout the WebAssembly ecosystem's own
//! tools use (wasm-pkg-tools): one `application/wasm` layer holding the
//! component, an `application/vnd.wasm.config.v0+json` config. A minisign
//! signature of the component's bytes travels beside it as its own
//! artifact, tagged `sha256-<manifest hex>.minisig` (the tag scheme cosign
//! uses for its signatures), so any registry that stores OCI artifacts
//! holds both.
//!
//! Every byte fetched is bounded (component, signature, manifest) and
//! checked against its digest here; nothing else in wasmprov talks to a
//! registry.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use futures::StreamExt as _;
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::manifest::{OciDescriptor, OciImageManifest, OciManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest as _, Sha256};

/// Media type of the component layer.
pub const WASM_LAYER: &str = "application/wasm";
/// Media type of the config of a wasm artifact.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// Media type of the layer holding a minisign signature.
pub const MINISIGN_LAYER: &str = "application/vnd.wasmprov.minisign.signature.v1";
/// Media type of an empty config (the signature artifact has none).
const EMPTY_CONFIG: &str = "application/vnd.oci.empty.v1+json";
/// Annotation naming the plugin.
pub const PLUGIN_ANNOTATION: &str = "dev.wasmprov.plugin";
/// Largest signature accepted.
const MAX_SIGNATURE_BYTES: u64 = 64 * 1024;

/// An artifact fetched and checked.
#[derive(Debug)]
pub struct Fetched {
    /// The reference pinned to the manifest digest (`registry/repo@sha256:…`).
    pub pinned: String,
    /// The plugin name the artifact carries, if any.
    pub plugin: Option<String>,
    /// The component.
    pub component: Vec<u8>,
    /// The minisign signature beside it, if one is published.
    pub signature: Option<String>,
}

/// Parses a reference, naming what is accepted when it is not one.
pub fn reference(text: &str) -> Result<Reference> {
    Reference::try_from(text).with_context(|| {
        format!(
            "{text:?} is not an OCI reference; expected registry/repository:tag or registry/repository@sha256:<digest>, such as 127.0.0.1:5000/plugins/hetzner:1.0"
        )
    })
}

fn is_loopback(registry: &str) -> bool {
    let host = registry
        .strip_prefix('[')
        .and_then(|r| r.split_once(']'))
        .map_or_else(
            || registry.split(':').next().unwrap_or(registry),
            |(h, _)| h,
        );
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn client(reference: &Reference) -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // A registry on this machine is reached over plain HTTP (as Docker does
    // for loopback registries); every other one over HTTPS.
    let registry = reference.resolve_registry().to_string();
    let protocol = if is_loopback(&registry) {
        ClientProtocol::HttpsExcept(vec![registry])
    } else {
        ClientProtocol::Https
    };
    Client::new(ClientConfig {
        protocol,
        connect_timeout: Some(Duration::from_secs(10)),
        read_timeout: Some(Duration::from_secs(60)),
        ..ClientConfig::default()
    })
}

/// Credentials from `WASMPROV_REGISTRY_USERNAME` / `WASMPROV_REGISTRY_PASSWORD`,
/// else anonymous.
fn auth() -> RegistryAuth {
    match (
        std::env::var("WASMPROV_REGISTRY_USERNAME"),
        std::env::var("WASMPROV_REGISTRY_PASSWORD"),
    ) {
        (Ok(user), Ok(password)) if !user.is_empty() => RegistryAuth::Basic(user, password),
        _ => RegistryAuth::Anonymous,
    }
}

/// The tag a component's signature is published under.
fn signature_tag(manifest_digest: &str) -> String {
    format!("{}.minisig", manifest_digest.replace(':', "-"))
}

fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Says what went wrong talking to a registry, in the operator's words.
fn registry_error(
    reference: &Reference,
    what: &str,
    e: oci_client::errors::OciDistributionError,
) -> anyhow::Error {
    let text = format!("{e:#}");
    let source = std::error::Error::source(&e)
        .map(ToString::to_string)
        .unwrap_or_default();
    let unreachable = text.contains("error sending request")
        || text.contains("connect")
        || source.contains("connect");
    if unreachable {
        anyhow::anyhow!(
            "cannot reach the registry {} ({what}): {text}; nothing was changed",
            reference.resolve_registry()
        )
    } else {
        anyhow::anyhow!("{what} {reference}: {text}")
    }
}

/// Reads a blob whole, refusing more than `max` bytes and any byte that
/// does not hash to the descriptor's digest.
async fn blob(
    client: &Client,
    reference: &Reference,
    layer: &OciDescriptor,
    max: u64,
) -> Result<Vec<u8>> {
    if u64::try_from(layer.size).unwrap_or(u64::MAX) > max {
        bail!(
            "{reference}: the layer is {} bytes; at most {max} are accepted",
            layer.size
        );
    }
    let mut stream = client
        .pull_blob_stream(reference, layer)
        .await
        .map_err(|e| registry_error(reference, "fetching the layer of", e))?;
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| {
            if e.to_string().contains("digest") {
                anyhow::anyhow!(
                    "{reference}: digest mismatch: the registry served bytes that do not hash to the manifest's layer {} ({e}); refusing it",
                    layer.digest
                )
            } else {
                anyhow::anyhow!("reading the layer of {reference}: {e}")
            }
        })?;
        if (out.len() + chunk.len()) as u64 > max {
            bail!("{reference}: the registry sent more than {max} bytes for one layer");
        }
        out.extend_from_slice(&chunk);
    }
    let actual = sha256_digest(&out);
    if actual != layer.digest {
        bail!(
            "{reference}: digest mismatch: the manifest names layer {}, the registry served bytes whose digest is {actual}; refusing it",
            layer.digest
        );
    }
    Ok(out)
}

/// Fetches a plugin: resolves the reference to a manifest digest, checks
/// the layout, reads the component (at most `max` bytes, digest-checked)
/// and its signature if one is published.
pub async fn fetch(reference_text: &str, max: u64) -> Result<Fetched> {
    let reference = reference(reference_text)?;
    let client = client(&reference);
    let auth = auth();
    let (manifest, manifest_digest) = client
        .pull_manifest(&reference, &auth)
        .await
        .map_err(|e| registry_error(&reference, "fetching the manifest of", e))?;
    if let Some(want) = reference.digest()
        && want != manifest_digest
    {
        bail!(
            "{reference}: the registry answered manifest {manifest_digest}, not the {want} asked for"
        );
    }
    let OciManifest::Image(image) = manifest else {
        bail!("{reference} is an image index, not a wasm component artifact");
    };
    if image.config.media_type != WASM_CONFIG {
        bail!(
            "{reference} is not a wasm component artifact: its config is {:?}, expected {WASM_CONFIG:?}",
            image.config.media_type
        );
    }
    let layers: Vec<&OciDescriptor> = image
        .layers
        .iter()
        .filter(|l| l.media_type == WASM_LAYER)
        .collect();
    let [layer] = layers.as_slice() else {
        bail!(
            "{reference} must hold exactly one {WASM_LAYER:?} layer; it holds {}",
            layers.len()
        );
    };
    let pinned_ref = reference.clone_with_digest(manifest_digest.clone());
    let component = blob(&client, &pinned_ref, layer, max).await?;
    let plugin = image
        .annotations
        .as_ref()
        .and_then(|a| a.get(PLUGIN_ANNOTATION))
        .cloned();

    let sig_ref = Reference::with_tag(
        reference.registry().to_string(),
        reference.repository().to_string(),
        signature_tag(&manifest_digest),
    );
    let signature = match client.pull_manifest(&sig_ref, &auth).await {
        Ok((OciManifest::Image(sig), _)) => {
            let layer = sig
                .layers
                .iter()
                .find(|l| l.media_type == MINISIGN_LAYER)
                .with_context(|| format!("{sig_ref} holds no {MINISIGN_LAYER:?} layer"))?;
            let bytes = blob(&client, &sig_ref, layer, MAX_SIGNATURE_BYTES).await?;
            Some(String::from_utf8(bytes).with_context(|| format!("{sig_ref} is not text"))?)
        }
        Ok(_) => bail!("{sig_ref} is an image index, not a signature"),
        Err(oci_client::errors::OciDistributionError::ImageManifestNotFoundError(_)) => None,
        Err(oci_client::errors::OciDistributionError::RegistryError { envelope, .. })
            if envelope
                .errors
                .iter()
                .any(|e| matches!(e.code, oci_client::errors::OciErrorCode::ManifestUnknown)) =>
        {
            None
        }
        Err(e) => return Err(registry_error(&sig_ref, "fetching the signature of", e)),
    };
    Ok(Fetched {
        pinned: format!(
            "{}/{}@{manifest_digest}",
            reference.registry(),
            reference.repository()
        ),
        plugin,
        component,
        signature,
    })
}

/// Publishes a component under `reference_text`, and its signature beside
/// it when one is given. Returns the manifest digest.
pub async fn push(
    component: &[u8],
    plugin: &str,
    reference_text: &str,
    signature: Option<&str>,
) -> Result<String> {
    let reference = reference(reference_text)?;
    if reference.digest().is_some() {
        bail!("push to a tag (registry/repository:tag), not to a digest");
    }
    let client = client(&reference);
    let auth = auth();
    let layer_digest = sha256_digest(component);
    let config = serde_json::json!({
        "created": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
    });
    let layers = [ImageLayer::new(
        component.to_vec(),
        WASM_LAYER.to_string(),
        None,
    )];
    let config = Config::new(serde_json::to_vec(&config)?, WASM_CONFIG.to_string(), None);
    let annotations = BTreeMap::from([
        (PLUGIN_ANNOTATION.to_string(), plugin.to_string()),
        (
            "org.opencontainers.image.title".to_string(),
            format!("{plugin}.wasm"),
        ),
    ]);
    let manifest = OciImageManifest::build(&layers, &config, Some(annotations));
    client
        .push(&reference, &layers, config, &auth, Some(manifest))
        .await
        .map_err(|e| registry_error(&reference, "pushing", e))?;
    let digest = client
        .fetch_manifest_digest(&reference, &auth)
        .await
        .map_err(|e| registry_error(&reference, "reading back the digest of", e))?;
    if let Some(sig) = signature {
        let sig_ref = Reference::with_tag(
            reference.registry().to_string(),
            reference.repository().to_string(),
            signature_tag(&digest),
        );
        let layers = [ImageLayer::new(
            sig.as_bytes().to_vec(),
            MINISIGN_LAYER.to_string(),
            None,
        )];
        let config = Config::new(b"{}".to_vec(), EMPTY_CONFIG.to_string(), None);
        client
            .push(&sig_ref, &layers, config, &auth, None)
            .await
            .map_err(|e| registry_error(&sig_ref, "pushing the signature", e))?;
    }
    Ok(digest)
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_registries_are_recognized() {
        for r in [
            "127.0.0.1:5000",
            "localhost:5000",
            "[::1]:5000",
            "127.0.0.2",
        ] {
            assert!(super::is_loopback(r), "{r}");
        }
        for r in ["ghcr.io", "registry.example.com:5000", "10.0.0.1:5000"] {
            assert!(!super::is_loopback(r), "{r}");
        }
    }

    #[test]
    fn signature_tags_follow_the_digest() {
        assert_eq!(super::signature_tag("sha256:ab12"), "sha256-ab12.minisig");
    }
}
