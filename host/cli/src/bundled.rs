//! The plugins shipped inside the binary, and the manifests they come with.

use std::path::Path;

use anyhow::{Context, Result, bail};
use sha2::Digest;

mod components {
    include!(concat!(env!("OUT_DIR"), "/bundled.rs"));
}

/// The real Hetzner Cloud API.
pub const HETZNER_ENDPOINT: &str = "https://api.hetzner.cloud/v1";

/// The `scheme://host:port` grant that covers a base URL.
pub fn grant_for(endpoint: &str) -> Result<String> {
    let (scheme, rest) = endpoint
        .split_once("://")
        .with_context(|| format!("endpoint {endpoint:?} has no scheme"))?;
    if scheme != "http" && scheme != "https" {
        bail!("endpoint {endpoint:?} must be http or https");
    }
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    if authority.is_empty() {
        bail!("endpoint {endpoint:?} has no host");
    }
    Ok(format!("{scheme}://{authority}"))
}

/// The Hetzner manifest, pinned to the bundled component's digest.
pub fn hetzner_manifest(endpoint: &str) -> Result<String> {
    let digest = hex::encode(sha2::Sha256::digest(components::HETZNER));
    let grant = grant_for(endpoint)?;
    Ok(format!(
        r#"# Hetzner Cloud provider, bundled with wasmprov.
name = "hetzner"
component = "hetzner.wasm"
sha256 = "{digest}"

[config]
endpoint = "{endpoint}"
location = "fsn1"

[secrets]
token = {{ env = "HCLOUD_TOKEN" }}

[http]
allow = ["{grant}"]

[limits]
memory_mib = 64
call_timeout_ms = 60000
"#
    ))
}

/// Writes every bundled plugin into `dir`; returns their names.
pub fn write(dir: &Path, hetzner_endpoint: Option<&str>) -> Result<Vec<String>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let manifest = hetzner_manifest(hetzner_endpoint.unwrap_or(HETZNER_ENDPOINT))?;
    std::fs::write(dir.join("hetzner.wasm"), components::HETZNER)
        .with_context(|| format!("writing {}", dir.join("hetzner.wasm").display()))?;
    std::fs::write(dir.join("hetzner.toml"), manifest)
        .with_context(|| format!("writing {}", dir.join("hetzner.toml").display()))?;
    // Installing is the operator's act: record what was installed.
    wasmprov_host::lock::record(dir, "hetzner", "hetzner.wasm", components::HETZNER)?;
    Ok(vec!["hetzner".to_string()])
}

#[cfg(test)]
mod tests {
    #[test]
    fn grants_cover_the_endpoint() {
        assert_eq!(
            super::grant_for("https://api.hetzner.cloud/v1").unwrap(),
            "https://api.hetzner.cloud"
        );
        assert_eq!(
            super::grant_for("http://127.0.0.1:8787/v1").unwrap(),
            "http://127.0.0.1:8787"
        );
        assert!(super::grant_for("api.hetzner.cloud").is_err());
        assert!(super::grant_for("ftp://x/").is_err());
        let m = super::hetzner_manifest("http://127.0.0.1:9/v1").unwrap();
        wasmprov_host::policy::Manifest::parse("hetzner.toml", &m).unwrap();
    }
}
