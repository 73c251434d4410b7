//! The plugin manifest, `NAME.toml`, beside `NAME.wasm` in the plugin
//! directory. The operator writes it: it is the whole of what the plugin may
//! do. Unknown fields are errors, so a misspelt grant never silently grants
//! nothing (or something else).
//!
//! ```toml
//! name = "hetzner"
//! component = "hetzner.wasm"
//! sha256 = "9f2c...e1"            # optional pin
//!
//! [config]                        # plain values, visible to the plugin
//! endpoint = "https://api.hetzner.cloud/v1"
//!
//! [secrets]                       # values the plugin reads like config (never shown)
//! token = { env = "HCLOUD_TOKEN" }  # or { file = … }, { command = […] }, { aws = … }:
//!                                 # see `secrets`
//!
//! [http]
//! allow = ["https://api.hetzner.cloud"]
//!
//! [[exec]]
//! program = "/usr/local/bin/node-ctl"
//! args = ["create", "*"]
//!
//! [limits]
//! memory_mib = 64
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::exec::{DEFAULT_EXEC_MAX_CONCURRENT, ExecGrantSpec, ExecPolicy};
use crate::http::HttpPolicy;
use crate::limits::{Limits, LimitsSpec};
use crate::secrets::{CredentialSettings, RawSecret, SecretSource};

/// A manifest that could not be accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {field}: {message}")]
pub struct ManifestError {
    /// The manifest file.
    pub file: String,
    /// The field at fault (a dotted path), or `line N` when the file did not parse.
    pub field: String,
    /// What is wrong and what would be accepted.
    pub message: String,
}

/// A secret taken from the host's environment: what [`Manifest::secrets`]
/// holds for the `{ env = … }` entries.
#[deprecated(
    note = "use `wasmprov_policy::secrets::SecretSource` (from `Manifest::secret_sources`), which also has file, command and AWS sources"
)]
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SecretSpec {
    /// Name of the environment variable holding the value.
    pub env: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HttpSpec {
    #[serde(default)]
    allow: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    name: String,
    component: String,
    sha256: Option<String>,
    #[serde(default)]
    config: BTreeMap<String, toml::Value>,
    #[serde(default)]
    secrets: BTreeMap<String, RawSecret>,
    #[serde(default)]
    credentials: CredentialSettings,
    http: Option<HttpSpec>,
    #[serde(default)]
    exec: Vec<ExecGrantSpec>,
    #[serde(default)]
    limits: LimitsSpec,
}

/// A checked manifest.
#[derive(Clone, Debug, PartialEq)]
#[allow(
    deprecated,
    reason = "the deprecated `secrets` field is kept for readers of 0.1"
)]
pub struct Manifest {
    /// The plugin's name: `[a-z0-9][a-z0-9_-]*`, at most 64 characters.
    pub name: String,
    /// Path of the component, relative to the plugin directory.
    pub component: String,
    /// The component's pinned sha256, lowercase hex.
    pub sha256: Option<String>,
    /// Plain configuration values.
    pub config: BTreeMap<String, String>,
    /// The secrets read from environment variables (`{ env = … }`) only.
    #[deprecated(
        note = "use `secret_sources`, which holds every secret (env, file, command, aws)"
    )]
    pub secrets: BTreeMap<String, SecretSpec>,
    /// Secrets: key seen by the plugin → where its value comes from.
    pub secret_sources: BTreeMap<String, SecretSource>,
    /// Settings of the credential providers the secrets use (`[credentials]`).
    pub credentials: CredentialSettings,
    /// Outgoing HTTP grants.
    pub http: HttpPolicy,
    /// Exec grants.
    pub exec: ExecPolicy,
    /// Resource limits.
    pub limits: Limits,
}

/// Files of the plugin directory itself (its settings and its lock): no
/// plugin's files may carry these names.
pub const DIRECTORY_FILES: &[&str] = &["wasmprov.toml", "wasmprov.lock"];

/// The files a plugin called `name` has in the plugin directory: its
/// manifest, its component and the component's signature.
#[must_use]
pub fn plugin_files(name: &str) -> [String; 3] {
    [
        format!("{name}.toml"),
        format!("{name}.wasm"),
        format!("{name}.wasm.minisig"),
    ]
}

/// Why `name` is not a plugin name, or `None` when it is one:
/// `[a-z0-9][a-z0-9_-]*`, at most 64 characters, and none of its files
/// ([`plugin_files`]) is one of the directory's own ([`DIRECTORY_FILES`]:
/// a plugin called `wasmprov` would overwrite `wasmprov.toml`).
#[must_use]
pub fn plugin_name_problem(name: &str) -> Option<String> {
    let syntax = !name.is_empty()
        && name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !syntax {
        let shown: String = name.chars().take(80).collect();
        return Some(format!(
            "{shown:?} is not a valid plugin name; use lowercase letters, digits, `-` and `_` (at most 64), such as \"hetzner\" or \"aws-ec2\""
        ));
    }
    plugin_files(name)
        .iter()
        .find(|f| DIRECTORY_FILES.contains(&f.as_str()))
        .map(|f| {
            format!(
                "{name:?} is reserved: its file {f} is the plugin directory's own; choose another name"
            )
        })
}

/// Whether `name` is a plugin name ([`plugin_name_problem`] says why
/// not). It names files in the plugin directory, so nothing else is
/// accepted from a manifest, a registry's artifact or the command line.
#[must_use]
pub fn valid_plugin_name(name: &str) -> bool {
    plugin_name_problem(name).is_none()
}

impl Manifest {
    /// Parses and checks a manifest. `file` names it in errors.
    ///
    /// # Errors
    /// A [`ManifestError`] naming the file, the field and what is accepted.
    pub fn parse(file: &str, text: &str) -> Result<Self, ManifestError> {
        Self::parse_with_defaults(file, text, &LimitsSpec::default())
    }

    /// Parses and checks a manifest; a limit the manifest leaves unset takes
    /// its value from `defaults` (the operator's), then the built-in default.
    ///
    /// # Errors
    /// A [`ManifestError`] naming the file, the field and what is accepted.
    pub fn parse_with_defaults(
        file: &str,
        text: &str,
        defaults: &LimitsSpec,
    ) -> Result<Self, ManifestError> {
        let err = |field: &str, message: String| ManifestError {
            file: file.to_string(),
            field: field.to_string(),
            message,
        };
        let raw: RawManifest = toml::from_str(text).map_err(|e| {
            let missing = e
                .message()
                .strip_prefix("missing field `")
                .and_then(|m| m.split('`').next());
            let field = missing
                .map(str::to_string)
                .or_else(|| {
                    e.span()
                        .filter(|s| s.start > 0 || s.end < text.len())
                        .map(|s| {
                            let line = text[..s.start].matches('\n').count() + 1;
                            let key = text
                                .lines()
                                .nth(line - 1)
                                .and_then(|l| l.split('=').next())
                                .map(str::trim)
                                .filter(|k| !k.is_empty())
                                .unwrap_or("?");
                            format!("line {line} ({key})")
                        })
                })
                .unwrap_or_else(|| "manifest".to_string());
            err(&field, e.message().to_string())
        })?;

        if let Some(problem) = plugin_name_problem(&raw.name) {
            return Err(err("name", problem));
        }
        if raw.component.is_empty()
            || raw.component.starts_with('/')
            || raw.component.contains('\\')
        {
            return Err(err(
                "component",
                format!(
                    "{:?} must be a file name relative to the plugin directory, such as \"{}.wasm\"",
                    raw.component, raw.name
                ),
            ));
        }
        let sha256 = match raw.sha256 {
            None => None,
            Some(h) => {
                let h = h.trim().to_ascii_lowercase();
                let h = h.strip_prefix("sha256:").unwrap_or(&h).to_string();
                if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(err(
                        "sha256",
                        "must be 64 hex digits (the output of `sha256sum NAME.wasm`)".into(),
                    ));
                }
                Some(h)
            }
        };
        let mut config = BTreeMap::new();
        for (k, v) in raw.config {
            let value = match v {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => {
                    return Err(err(
                        &format!("config.{k}"),
                        format!(
                            "a {} is not accepted; config values are strings, numbers or booleans",
                            other.type_str()
                        ),
                    ));
                }
            };
            config.insert(k, value);
        }
        let mut secret_sources = BTreeMap::new();
        for (k, s) in raw.secrets {
            if config.contains_key(&k) {
                return Err(err(
                    &format!("secrets.{k}"),
                    "the same key is also in [config]; a key is either config or secret".into(),
                ));
            }
            let source = s.check().map_err(|(field, m)| {
                let at = if field.is_empty() {
                    format!("secrets.{k}")
                } else {
                    format!("secrets.{k}.{field}")
                };
                err(&at, m)
            })?;
            secret_sources.insert(k, source);
        }
        crate::secrets::check_settings(&raw.credentials, &secret_sources)
            .map_err(|(field, m)| err(&field, m))?;
        #[allow(deprecated, reason = "filled for readers of the deprecated field")]
        let secrets = secret_sources
            .iter()
            .filter_map(|(k, s)| match s {
                SecretSource::Env(env) => Some((k.clone(), SecretSpec { env: env.clone() })),
                _ => None,
            })
            .collect();
        let http = HttpPolicy::parse(&raw.http.map(|h| h.allow).unwrap_or_default())
            .map_err(|e| err("http.allow", e.to_string()))?;
        let spec = raw.limits.or(defaults);
        let limits = Limits::from_spec(&spec).map_err(|(field, m)| err(&field, m))?;
        let exec = ExecPolicy::from_specs(
            &raw.exec,
            spec.exec_max_concurrent
                .unwrap_or(DEFAULT_EXEC_MAX_CONCURRENT),
        )
        .map_err(|m| err("exec", m))?;
        #[allow(deprecated, reason = "the deprecated field is still filled")]
        Ok(Self {
            name: raw.name,
            component: raw.component,
            sha256,
            config,
            secrets,
            secret_sources,
            credentials: raw.credentials,
            http,
            exec,
            limits,
        })
    }

    /// What this manifest hands the plugin, one line each: `http GRANT`,
    /// `exec PROGRAM ARGS`, `secret KEY from $VAR` (or `from file PATH`,
    /// `from command PROGRAM ARGS`, `from aws FIELD (profile …)`). These are the grants
    /// in effect (a template is already filled), so comparing two
    /// manifests' lines shows where a plugin can really go.
    #[must_use]
    pub fn grant_lines(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .http
            .grants()
            .iter()
            .map(|g| format!("http {}", g.source))
            .collect();
        out.extend(self.exec.grants().iter().map(|g| format!("exec {g}")));
        let aws = self.aws_settings_line();
        out.extend(self.secret_sources.iter().map(|(k, s)| match s {
            SecretSource::Aws(_) => format!("secret {k} from {}{aws}", s.describe()),
            _ => format!("secret {k} from {}", s.describe()),
        }));
        out
    }

    /// ` (profile P, role R, region X)` for the AWS chain's settings that
    /// are set, or nothing.
    fn aws_settings_line(&self) -> String {
        let Some(aws) = &self.credentials.aws else {
            return String::new();
        };
        let parts: Vec<String> = [
            ("profile", &aws.profile),
            ("role", &aws.role_arn),
            ("external id", &aws.external_id),
            ("region", &aws.region),
        ]
        .iter()
        .filter_map(|(name, v)| v.as_ref().map(|v| format!("{name} {v}")))
        .collect();
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join(", "))
        }
    }

    /// What changed between this manifest's grants in effect and
    /// `newer`'s ([`grant_lines`](Self::grant_lines)): `- http OLD` and
    /// `+ http NEW` for a grant that moved; empty when nothing did.
    #[must_use]
    pub fn grant_diff(&self, newer: &Self) -> Vec<String> {
        let (old, new) = (self.grant_lines(), newer.grant_lines());
        let mut out: Vec<String> = old
            .iter()
            .filter(|l| !new.contains(l))
            .map(|l| format!("- {l}"))
            .collect();
        out.extend(
            new.iter()
                .filter(|l| !old.contains(l))
                .map(|l| format!("+ {l}")),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_names_that_could_name_another_file_are_refused() {
        for ok in ["hetzner", "aws-ec2", "0x", "a_b", &"a".repeat(64)] {
            assert!(valid_plugin_name(ok), "{ok:?}");
        }
        for bad in [
            "",
            "../x",
            "a/b",
            "a\\b",
            ".hidden",
            "-x",
            "_x",
            "Hetzner",
            "a b",
            "a.wasm",
            "x\u{202e}",
            "wasmprov\0",
            &"a".repeat(65),
            // The directory's own files: wasmprov.toml, wasmprov.lock.
            "wasmprov",
        ] {
            assert!(!valid_plugin_name(bad), "{bad:?}");
        }
        assert!(
            plugin_name_problem("wasmprov")
                .unwrap()
                .contains("wasmprov.toml is the plugin directory's own"),
        );
        // Every name's files stay clear of the directory's own.
        for name in ["wasmprov-x", "wasmprov_lock", "wasmprovx"] {
            assert!(valid_plugin_name(name), "{name}");
        }
        let e = Manifest::parse(
            "x.toml",
            "name = \"wasmprov\"\ncomponent = \"wasmprov.wasm\"\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("reserved"), "{e}");
    }

    #[test]
    fn the_grant_diff_shows_where_a_grant_moved() {
        let m = |host: &str, env: &str| {
            Manifest::parse(
                "p.toml",
                &format!(
                    "name = \"p\"\ncomponent = \"p.wasm\"\n[config]\nendpoint = \"https://{host}/v1\"\n[secrets]\ntoken = {{ env = \"{env}\" }}\n[http]\nallow = [\"https://{host}\"]\n"
                ),
            )
            .unwrap()
        };
        let old = m("api.example.com", "P_TOKEN");
        assert!(old.grant_diff(&old).is_empty());
        assert_eq!(
            old.grant_diff(&m("collector.evil.example", "P_TOKEN")),
            [
                "- http https://api.example.com",
                "+ http https://collector.evil.example"
            ]
        );
        assert_eq!(
            old.grant_diff(&m("api.example.com", "AWS_SECRET_ACCESS_KEY")),
            [
                "- secret token from $P_TOKEN",
                "+ secret token from $AWS_SECRET_ACCESS_KEY"
            ]
        );
    }

    const FULL: &str = r#"
name = "hetzner"
component = "hetzner.wasm"
sha256 = "sha256:ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789"

[config]
endpoint = "https://api.hetzner.cloud/v1"
eur_usd = 1.08
page_size = 50

[secrets]
token = { env = "HCLOUD_TOKEN" }

[http]
allow = ["https://api.hetzner.cloud"]

[[exec]]
program = "/usr/bin/true"
args = ["*"]

[limits]
memory_mib = 32
call_timeout_ms = 5000
"#;

    #[test]
    fn full_manifest_parses() {
        let m = Manifest::parse("hetzner.toml", FULL).unwrap();
        assert_eq!(m.name, "hetzner");
        assert_eq!(
            m.sha256.as_deref(),
            Some("abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789")
        );
        assert_eq!(m.config["eur_usd"], "1.08");
        assert_eq!(m.config["page_size"], "50");
        assert_eq!(
            m.secret_sources["token"],
            SecretSource::Env("HCLOUD_TOKEN".into())
        );
        #[allow(deprecated, reason = "the deprecated field still holds env secrets")]
        let env = &m.secrets["token"].env;
        assert_eq!(env, "HCLOUD_TOKEN");
        assert_eq!(m.http.grants().len(), 1);
        assert_eq!(m.exec.grants().len(), 1);
        assert_eq!(m.limits.memory_bytes, 32 << 20);
        assert_eq!(m.limits.call_timeout.as_millis(), 5000);
    }

    #[test]
    fn minimal_manifest_denies_everything() {
        let m = Manifest::parse("x.toml", "name = \"x\"\ncomponent = \"x.wasm\"\n").unwrap();
        assert!(m.http.is_empty());
        assert!(m.exec.grants().is_empty());
        assert!(m.config.is_empty() && m.secret_sources.is_empty());
        assert_eq!(m.limits, Limits::default());
    }

    #[test]
    fn errors_name_file_field_and_what_is_accepted() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "name = \"x\"\ncomponent = \"x.wasm\"\nallow_all = true\n",
                "line 3 (allow_all)",
                "unknown field `allow_all`",
            ),
            ("name = \"x\"\n", "component", "missing field `component`"),
            (
                "name = \"X Y\"\ncomponent = \"x.wasm\"\n",
                "name",
                "lowercase letters",
            ),
            (
                "name = \"x\"\ncomponent = \"/etc/passwd\"\n",
                "component",
                "relative to the plugin directory",
            ),
            (
                "name = \"x\"\ncomponent = \"x.wasm\"\nsha256 = \"abc\"\n",
                "sha256",
                "64 hex digits",
            ),
            (
                "name = \"x\"\ncomponent = \"x.wasm\"\n[http]\nallow = [\"api.example.com\"]\n",
                "http.allow",
                "expected scheme://host[:port]",
            ),
            (
                "name = \"x\"\ncomponent = \"x.wasm\"\n[http]\nalow = []\n",
                "line 4 (alow)",
                "unknown field `alow`, expected `allow`",
            ),
            (
                "name = \"x\"\ncomponent = \"x.wasm\"\n[[exec]]\nprogram = \"sh\"\n",
                "exec",
                "absolute path",
            ),
            (
                "name = \"x\"\ncomponent = \"x.wasm\"\n[limits]\nmemory_mib = 0\n",
                "limits.memory_mib",
                "between",
            ),
            (
                "name = \"x\"\ncomponent = \"x.wasm\"\n[limits]\nmemory = 5\n",
                "line 4 (memory)",
                "expected one of",
            ),
            (
                "name = \"x\"\ncomponent = \"x.wasm\"\n[config]\na = [1]\n",
                "config.a",
                "strings, numbers or booleans",
            ),
            (
                "name = \"x\"\ncomponent = \"x.wasm\"\n[config]\nt = \"1\"\n[secrets]\nt = { env = \"T\" }\n",
                "secrets.t",
                "either config or secret",
            ),
            (
                "name = \"x\"\ncomponent = \"x.wasm\"\n[secrets]\nt = \"T\"\n",
                "line 4 (t)",
                "expected struct RawSecret",
            ),
            (
                "name = \"x\"\ncomponent = \"x.wasm\"\n[secrets]\nt = { file = \"token\" }\n",
                "secrets.t.file",
                "absolute path",
            ),
            (
                "name = \"x\"\ncomponent = \"x.wasm\"\n[secrets]\nt = { env = \"T\" }\n[credentials.aws]\nprofile = \"p\"\n",
                "credentials.aws",
                "no secret takes { aws = … }",
            ),
            (
                "name = \"x\"\ncomponent = \"x.wasm\"\n[secrets]\nk = { aws = \"access_key_id\" }\n[credentials.aws]\nrole_arn = \"role/x\"\n",
                "credentials.aws.role_arn",
                "not an ARN",
            ),
            (
                "name = \"x\"\ncomponent = \"x.wasm\"\n[secrets]\nk = { aws = \"access_key_id\" }\n[credentials.aws]\nprofle = \"p\"\n",
                "line 6 (profle)",
                "unknown field `profle`",
            ),
        ];
        for (text, field, msg) in cases {
            let e = Manifest::parse("bad.toml", text).expect_err(text);
            assert_eq!(e.file, "bad.toml");
            assert_eq!(&e.field, field, "{text}: {e}");
            assert!(e.message.contains(msg), "{text}: {e}");
        }
    }
}
