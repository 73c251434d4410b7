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

/// The AWS EC2 manifest, pinned to the bundled component's digest. The AMI
/// is left for the operator to set (`provision` says so until it is).
pub fn aws_ec2_manifest() -> String {
    let digest = hex::encode(sha2::Sha256::digest(components::AWS_EC2));
    format!(
        r#"# AWS EC2 provider, bundled with wasmprov.
name = "aws-ec2"
component = "aws-ec2.wasm"
sha256 = "{digest}"

[config]
region = "us-east-1"
# image_id = "ami-..."        # required to provision: an AMI of the region

[secrets]
access_key_id = {{ env = "AWS_ACCESS_KEY_ID" }}
secret_access_key = {{ env = "AWS_SECRET_ACCESS_KEY" }}
session_token = {{ env = "AWS_SESSION_TOKEN" }}

[http]
# EC2 itself, and ELBv2 for the target-group calls (`wasmprov target ...`).
allow = [
  "https://ec2.us-east-1.amazonaws.com",
  "https://elasticloadbalancing.us-east-1.amazonaws.com",
]

[limits]
memory_mib = 64
call_timeout_ms = 60000
"#
    )
}

/// The DigitalOcean manifest, pinned to the bundled component's digest.
pub fn digitalocean_manifest() -> String {
    let digest = hex::encode(sha2::Sha256::digest(components::DIGITALOCEAN));
    format!(
        r#"# DigitalOcean Droplets provider, bundled with wasmprov.
name = "digitalocean"
component = "digitalocean.wasm"
sha256 = "{digest}"

[config]
region = "nyc3"
image = "ubuntu-24-04-x64"

[secrets]
token = {{ env = "DIGITALOCEAN_TOKEN" }}

[http]
allow = ["https://api.digitalocean.com"]

[limits]
memory_mib = 64
call_timeout_ms = 60000
"#
    )
}

/// The program the bundled cloud-init manifest runs; the operator puts
/// their own create/list/destroy command there (see the plugin's README).
pub const CLOUD_INIT_COMMAND: &str = "/usr/local/bin/wasmprov-nodes";

/// The cloud-init manifest, pinned to the bundled component's digest.
pub fn cloud_init_manifest() -> String {
    let digest = hex::encode(sha2::Sha256::digest(components::CLOUD_INIT));
    let cmd = CLOUD_INIT_COMMAND;
    format!(
        r#"# Command-line backend provider (cloud-init), bundled with wasmprov.
# {cmd} must implement the plugin's command protocol.
name = "cloud-init"
component = "cloud-init.wasm"
sha256 = "{digest}"

[config]
create_command = "{cmd}"
create_args = "create"
list_command = "{cmd}"
list_args = "list"
destroy_command = "{cmd}"
destroy_args = "destroy"
join_command = "node-agent join --token {{token}} --labels {{labels}} --node {{request_id}}"
capacity_types = "on-demand, spot"
instance_types = '''[
  {{"name": "small", "cpu": 2, "memory_gib": 4, "hourly_usd": 0.02, "spot_hourly_usd": 0.008}},
  {{"name": "large", "cpu": 8, "memory_gib": 32, "hourly_usd": 0.16, "spot_hourly_usd": 0.06}},
  {{"name": "xlarge", "cpu": 32, "memory_gib": 128, "hourly_usd": 0.64}}
]'''

[secrets]
join_token = {{ env = "CLUSTER_JOIN_TOKEN" }}

[[exec]]
program = "{cmd}"
args = ["create", "*"]
env = ["WASMPROV_OWNER", "WASMPROV_REQUEST_ID", "WASMPROV_INSTANCE_TYPE", "WASMPROV_ZONE",
       "WASMPROV_CAPACITY_TYPE", "WASMPROV_LABELS", "WASMPROV_LABELS_JSON"]

[[exec]]
program = "{cmd}"
args = ["list"]

[[exec]]
program = "{cmd}"
args = ["destroy", "*"]
"#
    )
}

/// The bundled plugins' names, in the order they are written.
pub const NAMES: [&str; 4] = ["hetzner", "aws-ec2", "cloud-init", "digitalocean"];

/// What `wasmprov bundle` writes when not told: the one plugin that works
/// with nothing but a token, and whose cloud has a fake inside wasmprov
/// (`wasmprov fake hetzner`). Each of the others needs what only the
/// operator has, and a plugin that cannot list its nodes makes every
/// reconcile and scale fail, so it is written only when named.
pub const DEFAULT: [&str; 1] = ["hetzner"];

/// Something a bundled plugin needs before it can reach its cloud.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A host environment variable its manifest reads a secret from.
    Env(&'static str),
    /// A config key of its manifest the operator must set.
    Config(&'static str, &'static str),
    /// A program its manifest grants and runs.
    Program(&'static str),
}

impl Need {
    /// Whether this machine already has it (a config key never: it is an
    /// edit of the manifest written).
    #[must_use]
    pub fn met(&self) -> bool {
        match self {
            Need::Env(var) => std::env::var_os(var).is_some_and(|v| !v.is_empty()),
            Need::Config(..) => false,
            Need::Program(path) => Path::new(path).is_file(),
        }
    }
}

impl std::fmt::Display for Need {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Need::Env(var) => write!(f, "${var}"),
            Need::Config(key, what) => write!(f, "{key} ({what}) in the [config]"),
            Need::Program(path) => write!(f, "the program {path}"),
        }
    }
}

/// What each bundled plugin needs before `describe`, `provision`, `scale`
/// or `reconcile` work (`price`, `offerings`, `rank` and `test` need none).
#[must_use]
pub fn needs(name: &str) -> &'static [Need] {
    match name {
        "hetzner" => &[Need::Env("HCLOUD_TOKEN")],
        "aws-ec2" => &[
            Need::Env("AWS_ACCESS_KEY_ID"),
            Need::Env("AWS_SECRET_ACCESS_KEY"),
            Need::Config("image_id", "an AMI of the region, for provision"),
        ],
        "cloud-init" => &[
            Need::Program(CLOUD_INIT_COMMAND),
            Need::Env("CLUSTER_JOIN_TOKEN"),
        ],
        "digitalocean" => &[Need::Env("DIGITALOCEAN_TOKEN")],
        _ => &[],
    }
}

/// Writes the bundled plugins `names` (each one of [`NAMES`]) into `dir`
/// with their manifests, and records them in its lock; returns the names
/// written, in [`NAMES`] order.
pub fn write(dir: &Path, names: &[&str], hetzner_endpoint: Option<&str>) -> Result<Vec<String>> {
    if let Some(unknown) = names.iter().find(|n| !NAMES.contains(n)) {
        bail!(
            "no bundled plugin {unknown:?}; the bundled plugins are {}",
            NAMES.join(", ")
        );
    }
    // Through the plugin directory's one writer, as `install` writes.
    let out = wasmprov_host::plugin_dir::PluginDir::open(dir)?;
    let mut written = Vec::new();
    for name in NAMES.into_iter().filter(|n| names.contains(n)) {
        let (component, manifest): (&[u8], String) = match name {
            "hetzner" => (
                components::HETZNER,
                hetzner_manifest(hetzner_endpoint.unwrap_or(HETZNER_ENDPOINT))?,
            ),
            "aws-ec2" => (components::AWS_EC2, aws_ec2_manifest()),
            "cloud-init" => (components::CLOUD_INIT, cloud_init_manifest()),
            _ => (components::DIGITALOCEAN, digitalocean_manifest()),
        };
        let wasm = format!("{name}.wasm");
        out.replace(&wasm, component)?;
        out.replace(&format!("{name}.toml"), manifest.as_bytes())?;
        // Installing is the operator's act: record what was installed.
        wasmprov_host::lock::record(dir, name, &wasm, component)?;
        written.push(name.to_string());
    }
    Ok(written)
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

    /// Every need named is one its manifest has: the variables its
    /// secrets read, the program it runs, the key it leaves to set.
    #[test]
    fn needs_are_the_manifests_own() {
        for name in super::NAMES {
            let manifest = match name {
                "hetzner" => super::hetzner_manifest(super::HETZNER_ENDPOINT).unwrap(),
                "aws-ec2" => super::aws_ec2_manifest(),
                "cloud-init" => super::cloud_init_manifest(),
                _ => super::digitalocean_manifest(),
            };
            assert!(!super::needs(name).is_empty(), "{name}");
            for need in super::needs(name) {
                let word = match need {
                    super::Need::Env(v) => format!("env = \"{v}\""),
                    super::Need::Config(k, _) => format!("# {k} = "),
                    super::Need::Program(p) => format!("program = \"{p}\""),
                };
                assert!(manifest.contains(&word), "{name}: {word} in\n{manifest}");
            }
        }
    }
}
