//! What a plugin says it needs: the HTTP destinations, programs, config keys
//! and secrets it uses, each with a one-line reason. The author writes it
//! next to the crate (`capabilities.toml`); the SDK embeds it in the
//! component's `wasmprov-capabilities` custom section. It grants nothing:
//! the operator's manifest does. It lets `wasmprov install` write a manifest
//! that grants exactly what was asked, and `wasmprov inspect` show a grant
//! wider than the request, or a request that was not granted.
//!
//! ```toml
//! [[http]]
//! url = "{endpoint}"                # a grant, or a template over config keys
//! why = "the Hetzner Cloud API"
//!
//! [[exec]]
//! program = "/usr/local/bin/node-ctl"
//! args = ["create", "*"]
//! why = "creates the machines"
//!
//! [config.endpoint]
//! why = "base URL of the API"
//! default = "https://api.hetzner.cloud/v1"
//!
//! [config.location]
//! why = "where new servers go"
//! required = true
//! example = "fsn1"
//!
//! [secrets.token]
//! why = "a read/write API token"
//! env = "HCLOUD_TOKEN"              # the variable the operator usually has
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::exec::{ExecGrant, ExecGrantSpec};
use crate::http::HttpGrant;
use crate::manifest::Manifest;

/// The custom section the SDK writes the declaration into.
pub const SECTION: &str = "wasmprov-capabilities";
/// The file the SDK reads it from, next to the plugin's `Cargo.toml`.
pub const FILE: &str = "capabilities.toml";
/// Largest declaration accepted, in bytes.
pub const MAX_BYTES: usize = 64 * 1024;
/// Most entries of each kind.
pub const MAX_ENTRIES: usize = 64;
/// Longest reason, in characters.
pub const MAX_WHY_CHARS: usize = 200;

/// One requested HTTP destination.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpRequest {
    /// A grant (`https://api.example.com`), or a URL template whose
    /// `{key}` parts are config values (`{endpoint}`,
    /// `https://ec2.{region}.amazonaws.com`); the grant is its origin.
    pub url: String,
    /// Why the plugin needs it.
    pub why: String,
}

/// One requested program.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecRequest {
    /// Absolute path of the program, or a template over config keys
    /// (`{create_command}`).
    pub program: String,
    /// Argument patterns, as in a manifest's `[[exec]]`.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables the plugin sets for it.
    #[serde(default)]
    pub env: Vec<String>,
    /// Why the plugin needs it.
    pub why: String,
}

/// One config key the plugin reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigRequest {
    /// What it means.
    pub why: String,
    /// Whether the plugin cannot work without it.
    #[serde(default)]
    pub required: bool,
    /// The value the plugin uses when it is not set (may use `{key}` of other keys).
    pub default: Option<String>,
    /// A typical value, shown to the operator.
    pub example: Option<String>,
}

/// One secret the plugin reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretRequest {
    /// What it is and what access it needs.
    pub why: String,
    /// The environment variable operators usually keep it in.
    pub env: Option<String>,
    /// Whether the plugin works without it.
    #[serde(default)]
    pub optional: bool,
}

/// A plugin's declaration of what it needs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requests {
    /// HTTP destinations.
    #[serde(default)]
    pub http: Vec<HttpRequest>,
    /// Programs.
    #[serde(default)]
    pub exec: Vec<ExecRequest>,
    /// Config keys.
    #[serde(default)]
    pub config: BTreeMap<String, ConfigRequest>,
    /// Secrets.
    #[serde(default)]
    pub secrets: BTreeMap<String, SecretRequest>,
}

/// How one capability stands between a request and a manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// Requested and granted.
    Granted,
    /// Requested, not granted (the plugin will fail where it needs it).
    NotGranted,
    /// Requested as optional (or with a default) and not set: fine.
    Unset,
    /// Granted but never requested, or wider than the request.
    WiderThanRequested,
}

impl Standing {
    /// How a person reads it.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::Granted => "granted",
            Self::NotGranted => "REQUESTED, NOT GRANTED",
            Self::Unset => "not set (optional)",
            Self::WiderThanRequested => "WIDER THAN REQUESTED",
        }
    }
}

/// One row of the comparison.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Check {
    /// `http`, `exec`, `config` or `secret`.
    pub kind: &'static str,
    /// The destination, program, key or secret.
    pub item: String,
    /// The plugin's reason (empty for what it never asked for).
    pub why: String,
    /// The manifest's grant that answers it, if any.
    pub granted: Option<String>,
    /// How it stands.
    pub standing: Standing,
    /// For a grant made from a template: the template and the values that
    /// filled it (`{endpoint} with endpoint = "https://api.example.com/v1"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Why this grant is DANGEROUS ([`crate::danger`]), if it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub danger: Option<String>,
}

fn one_line(what: &str, why: &str) -> Result<(), String> {
    if why.trim().is_empty() {
        return Err(format!(
            "{what}: `why` must say in one line why the plugin needs it"
        ));
    }
    if why.chars().count() > MAX_WHY_CHARS || why.chars().any(char::is_control) {
        return Err(format!(
            "{what}: `why` must be one line of at most {MAX_WHY_CHARS} characters"
        ));
    }
    Ok(())
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 64
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
}

/// The origin (`scheme://host[:port]`) of a URL, as a grant string.
fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    (!authority.is_empty() && !authority.contains('@')).then(|| format!("{scheme}://{authority}"))
}

impl Requests {
    /// Parses and checks a declaration.
    ///
    /// # Errors
    /// What is wrong, naming the entry.
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.len() > MAX_BYTES {
            return Err(format!(
                "the declaration is {} bytes; at most {MAX_BYTES} are accepted",
                text.len()
            ));
        }
        let requests: Self = toml::from_str(text).map_err(|e| e.message().to_string())?;
        for (kind, n) in [
            ("http", requests.http.len()),
            ("exec", requests.exec.len()),
            ("config", requests.config.len()),
            ("secrets", requests.secrets.len()),
        ] {
            if n > MAX_ENTRIES {
                return Err(format!(
                    "{n} {kind} entries; at most {MAX_ENTRIES} are accepted"
                ));
            }
        }
        for (key, c) in &requests.config {
            if !valid_key(key) {
                return Err(format!("config.{key}: not a valid key"));
            }
            one_line(&format!("config.{key}"), &c.why)?;
        }
        for (key, s) in &requests.secrets {
            if !valid_key(key) || requests.config.contains_key(key) {
                return Err(format!(
                    "secrets.{key}: not a valid key, or also a config key"
                ));
            }
            one_line(&format!("secrets.{key}"), &s.why)?;
            if let Some(env) = &s.env
                && (env.is_empty() || env.contains(['=', '\0']))
            {
                return Err(format!("secrets.{key}.env: {env:?} is not a variable name"));
            }
        }
        for h in &requests.http {
            one_line(&format!("http {:?}", h.url), &h.why)?;
            requests
                .http_grant(h, &BTreeMap::new())
                .map_err(|e| format!("http {:?}: {e}", h.url))?;
        }
        for x in &requests.exec {
            one_line(&format!("exec {:?}", x.program), &x.why)?;
            requests
                .exec_grant(x, &BTreeMap::new())
                .map_err(|e| format!("exec {:?}: {e}", x.program))?;
        }
        Ok(requests)
    }

    /// Fills the `{key}` parts of a template from `config`, then from the
    /// declared defaults (which may themselves use other keys).
    ///
    /// # Errors
    /// A key that is neither set nor has a default.
    pub fn expand(
        &self,
        template: &str,
        config: &BTreeMap<String, String>,
    ) -> Result<String, String> {
        let mut text = template.to_string();
        for _ in 0..4 {
            let Some(start) = text.find('{') else {
                return Ok(text);
            };
            let end = text[start..]
                .find('}')
                .map(|e| start + e)
                .ok_or_else(|| format!("unclosed `{{` in {template:?}"))?;
            let key = &text[start + 1..end];
            let value = config
                .get(key)
                .cloned()
                .or_else(|| self.config.get(key).and_then(|c| c.default.clone()))
                .ok_or_else(|| {
                    format!("{template:?} uses config key `{key}`, which is neither set nor declared with a default")
                })?;
            text.replace_range(start..=end, &value);
        }
        if text.contains('{') {
            return Err(format!("{template:?} nests config keys too deeply"));
        }
        Ok(text)
    }

    /// The `{key}` parts of a template and the values that fill them
    /// (fully expanded), in order; keys that cannot be filled are left out.
    #[must_use]
    pub fn template_values(
        &self,
        template: &str,
        config: &BTreeMap<String, String>,
    ) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut rest = template;
        while let Some(start) = rest.find('{') {
            let Some(end) = rest[start..].find('}').map(|e| start + e) else {
                break;
            };
            let key = &rest[start + 1..end];
            let raw = config
                .get(key)
                .cloned()
                .or_else(|| self.config.get(key).and_then(|c| c.default.clone()));
            if let Some(value) = raw.and_then(|v| self.expand(&v, config).ok()) {
                out.push((key.to_string(), value));
            }
            rest = &rest[end + 1..];
        }
        out
    }

    /// How a templated request was filled, for showing beside its grant:
    /// `https://{region}.example.com with region = "eu-1"`; `None` for a
    /// request written as a plain grant.
    #[must_use]
    pub fn filled_from(&self, template: &str, config: &BTreeMap<String, String>) -> Option<String> {
        if !template.contains('{') {
            return None;
        }
        let values: Vec<String> = self
            .template_values(template, config)
            .iter()
            .map(|(k, v)| {
                let set_by = if config.contains_key(k) {
                    ""
                } else {
                    " (the plugin's default)"
                };
                format!("{k} = {v:?}{set_by}")
            })
            .collect();
        Some(format!("{template} with {}", values.join(", ")))
    }

    /// Why a templated HTTP request, once filled, grants something other
    /// than its fixed text names. Only a whole URL (`{endpoint}`,
    /// `{endpoint}/v1`: the operator's value, checked as a grant) and a
    /// plain host name part (`https://ec2.{region}.amazonaws.com`) may come
    /// from config values; anything else outside the path is flagged: a
    /// `{key}` in the scheme (`{scheme}://…`, `http{s}://…`: plain HTTP, no
    /// TLS) or in the port (any service on the host), fixed text mixed into a scheme and host a key
    /// provides (`{base}.example.com`), or a host part whose value is not
    /// a plain host name part (`/`, `#`, `?`, `@`, `*`, `:`, `{`… move the
    /// host elsewhere or widen it to a wildcard).
    #[must_use]
    pub fn template_danger(
        &self,
        request: &HttpRequest,
        config: &BTreeMap<String, String>,
    ) -> Option<String> {
        let template = request.url.as_str();
        if !template.contains('{') {
            return None;
        }
        let filled = self.http_grant(request, config).unwrap_or_default();
        let Some(scheme_end) = template.find("://") else {
            let whole = template.starts_with('{')
                && template.find('}').is_some_and(|e| {
                    matches!(
                        template[e + 1..].chars().next(),
                        None | Some('/' | '?' | '#')
                    )
                });
            return (!whole).then(|| {
                format!(
                    "{template:?} builds its scheme and host from config values and fixed text together, so it grants {filled:?}; a `{{key}}` may be the whole URL or a part of the host name only"
                )
            });
        };
        if template[..scheme_end].contains('{') {
            return Some(format!(
                "{template:?} takes its scheme from a config value, which may make it plain http (no TLS); it grants {filled:?}"
            ));
        }
        let authority_start = scheme_end + 3;
        let authority_end = template[authority_start..]
            .find(['/', '?', '#'])
            .map_or(template.len(), |e| authority_start + e);
        // Where the port starts, if the fixed text has one (`]` closes an
        // IPv6 literal, whose `:` are not a port's).
        let authority = &template[authority_start..authority_end];
        let host_end = authority_start
            + authority
                .rfind(':')
                .filter(|c| !authority[*c..].contains(']'))
                .unwrap_or(authority.len());
        let mut pos = 0;
        while let Some(start) = template[pos..].find('{').map(|s| pos + s) {
            let end = template[start..].find('}').map(|e| start + e)?;
            pos = end + 1;
            if start < authority_start || start >= authority_end {
                continue;
            }
            let key = &template[start + 1..end];
            let raw = config
                .get(key)
                .cloned()
                .or_else(|| self.config.get(key).and_then(|c| c.default.clone()))?;
            let value = self.expand(&raw, config).unwrap_or(raw);
            if start >= host_end {
                return Some(format!(
                    "the port of {template:?} comes from `{key}` ({value:?}): any service on that host, not the one its fixed text names; it grants {filled:?}"
                ));
            }
            let plain = !value.is_empty()
                && !value.starts_with(['.', '-'])
                && !value.ends_with('.')
                && value
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.');
            if !plain {
                return Some(format!(
                    "the value of `{key}` ({value:?}) is not a plain host name part, so {template:?} grants {filled:?} instead of a host under its fixed text"
                ));
            }
        }
        None
    }

    /// The grant an HTTP request asks for, given the operator's config.
    ///
    /// # Errors
    /// A template that cannot be filled, or a URL that is no grant.
    pub fn http_grant(
        &self,
        request: &HttpRequest,
        config: &BTreeMap<String, String>,
    ) -> Result<String, String> {
        let url = self.expand(&request.url, config)?;
        let grant = origin(&url).unwrap_or(url);
        HttpGrant::parse(&grant).map_err(|e| e.to_string())?;
        Ok(grant)
    }

    /// The grant an exec request asks for, given the operator's config (the
    /// program may be a template, as `{create_command}`).
    ///
    /// # Errors
    /// A template that cannot be filled, or a program that is not granted as written.
    pub fn exec_grant(
        &self,
        request: &ExecRequest,
        config: &BTreeMap<String, String>,
    ) -> Result<ExecGrantSpec, String> {
        let spec = ExecGrantSpec {
            program: self.expand(&request.program, config)?,
            args: request.args.clone(),
            env: request.env.clone(),
            timeout_ms: None,
            max_output_bytes: None,
        };
        ExecGrant::from_spec(&spec)?;
        Ok(spec)
    }

    /// Compares the declaration with a manifest: every request and how it is
    /// answered, then every grant nobody asked for.
    #[must_use]
    pub fn compare(&self, manifest: &Manifest) -> Vec<Check> {
        let mut out = Vec::new();
        let grants = manifest.http.grants();
        let mut requested_http = Vec::new();
        for r in &self.http {
            let item = self
                .http_grant(r, &manifest.config)
                .unwrap_or_else(|e| format!("{} ({e})", r.url));
            let parsed = HttpGrant::parse(&item).ok();
            let granted = parsed
                .as_ref()
                .and_then(|p| grants.iter().find(|g| g.covers(p)));
            let danger = self.template_danger(r, &manifest.config).or_else(|| {
                parsed
                    .as_ref()
                    .and_then(|p| reasons(crate::danger::http_grant(p)))
            });
            out.push(Check {
                kind: "http",
                item,
                why: r.why.clone(),
                granted: granted.map(|g| g.source.clone()),
                standing: if granted.is_some() {
                    Standing::Granted
                } else {
                    Standing::NotGranted
                },
                from: self.filled_from(&r.url, &manifest.config),
                danger,
            });
            requested_http.extend(parsed);
        }
        for g in grants {
            if !requested_http.iter().any(|r| r.covers(g)) {
                out.push(Check {
                    kind: "http",
                    item: g.source.clone(),
                    why: String::new(),
                    granted: Some(g.source.clone()),
                    standing: Standing::WiderThanRequested,
                    from: None,
                    danger: reasons(crate::danger::http_grant(g)),
                });
            }
        }
        let exec_grants = manifest.exec.grants();
        let mut requested_exec = Vec::new();
        for r in &self.exec {
            let want = self
                .exec_grant(r, &manifest.config)
                .ok()
                .and_then(|spec| ExecGrant::from_spec(&spec).ok());
            let found = want.as_ref().and_then(|w| {
                exec_grants
                    .iter()
                    .find(|g| g.program == w.program && args_cover(&g.args, &w.args))
            });
            let danger = want
                .as_ref()
                .and_then(|w| reasons(crate::danger::exec_grant(w)));
            out.push(Check {
                kind: "exec",
                item: exec_text(want.as_ref().map_or(&r.program, |w| &w.program), &r.args),
                why: r.why.clone(),
                granted: found.map(ToString::to_string),
                standing: if found.is_some() {
                    Standing::Granted
                } else {
                    Standing::NotGranted
                },
                from: self.filled_from(&r.program, &manifest.config),
                danger,
            });
            requested_exec.extend(want);
        }
        for g in exec_grants {
            let asked = requested_exec
                .iter()
                .any(|w| w.program == g.program && args_cover(&w.args, &g.args));
            if !asked {
                out.push(Check {
                    kind: "exec",
                    item: g.to_string(),
                    why: String::new(),
                    granted: Some(g.to_string()),
                    standing: Standing::WiderThanRequested,
                    from: None,
                    danger: reasons(crate::danger::exec_grant(g)),
                });
            }
        }
        for (key, c) in &self.config {
            let set = manifest.config.get(key);
            out.push(Check {
                kind: "config",
                item: key.clone(),
                why: c.why.clone(),
                granted: set.cloned(),
                standing: match set {
                    Some(_) => Standing::Granted,
                    None if c.required => Standing::NotGranted,
                    None => Standing::Unset,
                },
                from: None,
                danger: None,
            });
        }
        for (key, value) in &manifest.config {
            if !self.config.contains_key(key) {
                out.push(Check {
                    kind: "config",
                    item: key.clone(),
                    why: String::new(),
                    granted: Some(value.clone()),
                    standing: Standing::WiderThanRequested,
                    from: None,
                    danger: None,
                });
            }
        }
        for (key, s) in &self.secrets {
            let set = manifest.secret_sources.get(key);
            out.push(Check {
                kind: "secret",
                item: key.clone(),
                why: s.why.clone(),
                granted: set.map(crate::secrets::SecretSource::describe),
                standing: match set {
                    Some(_) => Standing::Granted,
                    None if s.optional => Standing::Unset,
                    None => Standing::NotGranted,
                },
                from: None,
                danger: set.and_then(|source| crate::danger::secret_source(&manifest.name, source)),
            });
        }
        for (key, source) in &manifest.secret_sources {
            if !self.secrets.contains_key(key) {
                out.push(Check {
                    kind: "secret",
                    item: key.clone(),
                    why: String::new(),
                    granted: Some(source.describe()),
                    standing: Standing::WiderThanRequested,
                    from: None,
                    danger: crate::danger::secret_source(&manifest.name, source),
                });
            }
        }
        out
    }

    /// Every templated HTTP request whose filled grant is not what its
    /// fixed text names ([`template_danger`](Self::template_danger)), as
    /// dangers, for the install screen and the load warnings.
    #[must_use]
    pub fn dangers(&self, config: &BTreeMap<String, String>) -> Vec<crate::danger::Danger> {
        self.http
            .iter()
            .filter_map(|r| {
                self.template_danger(r, config)
                    .map(|reason| crate::danger::Danger {
                        kind: "http",
                        item: self
                            .filled_from(&r.url, config)
                            .unwrap_or_else(|| r.url.clone()),
                        reason,
                    })
            })
            .collect()
    }

    /// A manifest granting exactly what is requested: `config` values the
    /// operator gave, secrets from `secret_env` (else the variable the
    /// plugin suggests, else `NAME_KEY` in capitals); required config keys
    /// not given are left as commented placeholders that say what to set.
    ///
    /// # Errors
    /// A given key the plugin does not declare, or an HTTP template that
    /// cannot be filled.
    pub fn manifest_text(
        &self,
        name: &str,
        component: &str,
        sha256: &str,
        config: &BTreeMap<String, String>,
        secret_env: &BTreeMap<String, String>,
    ) -> Result<String, String> {
        for key in config.keys() {
            if !self.config.contains_key(key) {
                return Err(format!(
                    "config key `{key}` is not one the plugin declares (it declares: {})",
                    join_keys(self.config.keys())
                ));
            }
        }
        for key in secret_env.keys() {
            if !self.secrets.contains_key(key) {
                return Err(format!(
                    "secret `{key}` is not one the plugin declares (it declares: {})",
                    join_keys(self.secrets.keys())
                ));
            }
        }
        // Values are TOML strings with every hidden character escaped
        // (`\u2028`), comments the plugin's text escaped as on a terminal:
        // the written manifest shows exactly what it grants.
        let q = |s: &str| crate::text::toml_string(s);
        let note = |s: &str| crate::text::comment(s).into_owned();
        let mut t = format!(
            "# Written by `wasmprov install`: grants exactly what {name} declares it needs.\nname = {}\ncomponent = {}\nsha256 = {}\n",
            q(name),
            q(component),
            q(sha256)
        );
        if !self.config.is_empty() {
            t.push_str("\n[config]\n");
            for (key, c) in &self.config {
                t.push_str(&format!("# {key}: {}\n", note(&c.why)));
                match (config.get(key), c.required) {
                    (Some(v), _) => t.push_str(&format!("{key} = {}\n", q(v))),
                    (None, true) => t.push_str(&format!(
                        "# REQUIRED, not set: {key} = {}    (or `--config {key}=...` at install)\n",
                        q(c.example.as_deref().unwrap_or("..."))
                    )),
                    (None, false) => t.push_str(&format!(
                        "# {key} = {}\n",
                        q(c.default.as_deref().or(c.example.as_deref()).unwrap_or(""))
                    )),
                }
            }
        }
        if !self.secrets.is_empty() {
            t.push_str("\n[secrets]\n");
            for (key, s) in &self.secrets {
                let env = secret_env
                    .get(key)
                    .cloned()
                    .or_else(|| s.env.clone())
                    .unwrap_or_else(|| {
                        format!("{name}_{key}")
                            .to_ascii_uppercase()
                            .replace(|c: char| !c.is_ascii_alphanumeric(), "_")
                    });
                t.push_str(&format!(
                    "# {}\n{key} = {{ env = {} }}\n",
                    note(&s.why),
                    q(&env)
                ));
            }
        }
        if !self.http.is_empty() {
            t.push_str("\n[http]\nallow = [\n");
            for r in &self.http {
                let grant = self.http_grant(r, config)?;
                t.push_str(&format!("    {},    # {}\n", q(&grant), note(&r.why)));
            }
            t.push_str("]\n");
        }
        for x in &self.exec {
            let spec = self.exec_grant(x, config)?;
            let list = |v: &[String]| {
                let items: Vec<String> = v.iter().map(|a| q(a)).collect();
                format!("[{}]", items.join(", "))
            };
            t.push_str(&format!(
                "\n# {}\n[[exec]]\nprogram = {}\nargs = {}\n",
                note(&x.why),
                q(&spec.program),
                list(&spec.args)
            ));
            if !spec.env.is_empty() {
                t.push_str(&format!("env = {}\n", list(&spec.env)));
            }
        }
        Ok(t)
    }

    /// What changed between this declaration and `newer`'s, one line a
    /// change (`+ http https://…`, `- secret token`), for an update prompt.
    #[must_use]
    pub fn diff(&self, newer: &Self) -> Vec<String> {
        let lines = |r: &Self| {
            let mut v: Vec<String> = Vec::new();
            v.extend(r.http.iter().map(|h| format!("http {}", h.url)));
            v.extend(
                r.exec
                    .iter()
                    .map(|x| format!("exec {}", exec_text(&x.program, &x.args))),
            );
            v.extend(r.config.iter().map(|(k, c)| {
                format!("config {k}{}", if c.required { " (required)" } else { "" })
            }));
            v.extend(r.secrets.keys().map(|k| format!("secret {k}")));
            v
        };
        let (old, new) = (lines(self), lines(newer));
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

/// `component` with `text` (a declaration, checked first) appended as its
/// [`SECTION`] custom section: how a plugin built by another language's
/// tools (componentize-py, ComponentizeJS) declares what it needs, as
/// `export_provider!` does for Rust. The caller makes sure the component
/// has no such section yet.
///
/// # Errors
/// A declaration that does not parse.
pub fn embed(component: &[u8], text: &str) -> Result<Vec<u8>, String> {
    Requests::parse(text)?;
    use wasm_encoder::Encode as _;
    let mut out = Vec::with_capacity(component.len() + text.len() + SECTION.len() + 8);
    out.extend_from_slice(component);
    // A custom section (id 0) is valid after any section of a component.
    out.push(0);
    wasm_encoder::CustomSection {
        name: SECTION.into(),
        data: text.as_bytes().into(),
    }
    .encode(&mut out);
    Ok(out)
}

/// Every reason, in one line; `None` when there is none.
fn reasons(list: Vec<String>) -> Option<String> {
    (!list.is_empty()).then(|| list.join("; "))
}

fn join_keys<'a>(keys: impl Iterator<Item = &'a String>) -> String {
    let v: Vec<&str> = keys.map(String::as_str).collect();
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

/// Whether the argument patterns `wide` accept every argument list `narrow` does.
fn args_cover(wide: &[crate::exec::ArgPattern], narrow: &[crate::exec::ArgPattern]) -> bool {
    use crate::exec::ArgPattern::{Literal, One, Rest};
    let mut i = 0;
    for w in wide {
        match (w, narrow.get(i)) {
            (Rest, _) => return true,
            (One, Some(Literal(_) | One)) => i += 1,
            (Literal(a), Some(Literal(b))) if a == b => i += 1,
            _ => return false,
        }
    }
    i == narrow.len()
}

fn exec_text(program: &str, args: &[String]) -> String {
    if args.is_empty() {
        program.to_string()
    } else {
        format!("{program} {}", args.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DECL: &str = r#"
[[http]]
url = "{endpoint}"
why = "the cloud's API"

[[exec]]
program = "/usr/local/bin/node-ctl"
args = ["create", "*"]
why = "creates machines"

[config.endpoint]
why = "base URL of the API"
default = "https://api.example.com/v1"

[config.region]
why = "where nodes go"
required = true
example = "eu-1"

[secrets.token]
why = "an API token"
env = "EXAMPLE_TOKEN"
"#;

    fn manifest(body: &str) -> Manifest {
        Manifest::parse(
            "p.toml",
            &format!("name = \"p\"\ncomponent = \"p.wasm\"\n{body}"),
        )
        .unwrap()
    }

    #[test]
    fn templates_expand_through_defaults_and_config() {
        let r = Requests::parse(DECL).unwrap();
        let grant = |cfg: &[(&str, &str)]| {
            let c = cfg
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect();
            r.http_grant(&r.http[0], &c).unwrap()
        };
        assert_eq!(grant(&[]), "https://api.example.com");
        assert_eq!(
            grant(&[("endpoint", "http://127.0.0.1:8787/v1")]),
            "http://127.0.0.1:8787"
        );
        let nested = Requests::parse(
            "[[http]]\nurl = \"{endpoint}\"\nwhy = \"api\"\n[config.endpoint]\nwhy = \"e\"\ndefault = \"https://ec2.{region}.amazonaws.com\"\n[config.region]\nwhy = \"r\"\ndefault = \"us-east-1\"\n",
        )
        .unwrap();
        assert_eq!(
            nested
                .http_grant(&nested.http[0], &BTreeMap::new())
                .unwrap(),
            "https://ec2.us-east-1.amazonaws.com"
        );
    }

    #[test]
    fn templates_that_move_or_widen_the_host_are_dangerous_and_shown_with_their_values() {
        let r = Requests::parse(
            "[[http]]\nurl = \"https://{region}.api.example.com/v1\"\nwhy = \"api\"\n[[http]]\nurl = \"{endpoint}\"\nwhy = \"api\"\n[config.region]\nwhy = \"r\"\ndefault = \"eu-1\"\n[config.endpoint]\nwhy = \"e\"\ndefault = \"https://api.example.com\"\n[config.other]\nwhy = \"o\"\ndefault = \"https://evil.example\"\n",
        )
        .unwrap();
        let cfg = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect()
        };
        assert_eq!(r.template_danger(&r.http[0], &cfg(&[])), None);
        assert_eq!(
            r.filled_from(&r.http[0].url, &cfg(&[("region", "us-2")]))
                .unwrap(),
            "https://{region}.api.example.com/v1 with region = \"us-2\""
        );
        assert!(
            r.filled_from(&r.http[0].url, &cfg(&[]))
                .unwrap()
                .contains("(the plugin's default)")
        );
        for value in [
            "evil.example/#",
            "evil.example?",
            "x@evil.example#",
            "*",
            "{other}#",
            "evil.example:8443/",
        ] {
            let c = cfg(&[("region", value)]);
            let d = r.template_danger(&r.http[0], &c);
            assert!(
                d.as_deref()
                    .is_some_and(|d| d.contains("not a plain host name part")),
                "{value}: {d:?}"
            );
            assert_eq!(r.dangers(&c).len(), 1, "{value}");
        }
        // Moved to another host: the danger names the grant it became.
        let moved = r
            .template_danger(&r.http[0], &cfg(&[("region", "evil.example/#")]))
            .unwrap();
        assert!(moved.contains("\"https://evil.example\""), "{moved}");
        // A template in the scheme, the port, or mixed into a key's host.
        for (url, flagged) in [
            ("{scheme}://api.example.com/v1", true),
            ("http{s}://api.example.com/v1", true),
            ("https://api.example.com:{port}", true),
            ("{base}.example.com/v1", true),
            ("{endpoint}", false),
            ("{endpoint}/v1", false),
            ("https://{region}.api.example.com/v1", false),
            ("https://api.example.com/{region}/v1", false),
        ] {
            let decl = format!(
                "[[http]]\nurl = \"{url}\"\nwhy = \"api\"\n[config.scheme]\nwhy = \"s\"\ndefault = \"https\"\n[config.s]\nwhy = \"s\"\ndefault = \"s\"\n[config.port]\nwhy = \"p\"\ndefault = \"443\"\n[config.base]\nwhy = \"b\"\ndefault = \"https://api\"\n[config.endpoint]\nwhy = \"e\"\ndefault = \"https://api.example.com\"\n[config.region]\nwhy = \"r\"\ndefault = \"eu-1\"\n"
            );
            let r = Requests::parse(&decl).unwrap();
            let d = r.template_danger(&r.http[0], &cfg(&[]));
            assert_eq!(d.is_some(), flagged, "{url}: {d:?}");
            assert_eq!(r.dangers(&cfg(&[])).len(), usize::from(flagged), "{url}");
        }
        // A whole-URL template is the operator's value: checked as a grant.
        let wide = cfg(&[("endpoint", "https://*.com")]);
        assert_eq!(r.template_danger(&r.http[1], &wide), None);
        let m = Manifest::parse(
            "p.toml",
            "name = \"p\"\ncomponent = \"p.wasm\"\n[config]\nendpoint = \"https://*.com\"\n[http]\nallow = [\"https://*.com\"]\n",
        )
        .unwrap();
        let row = r
            .compare(&m)
            .into_iter()
            .find(|c| c.item == "https://*.com" && c.standing == Standing::Granted)
            .unwrap();
        assert!(row.danger.unwrap().contains("public suffix"));
        assert!(row.from.unwrap().contains("endpoint = \"https://*.com\""));
    }

    #[test]
    fn bad_declarations_name_the_entry() {
        for (text, wants) in [
            ("[[http]]\nurl = \"https://a.example\"\nwhy = \"\"\n", "why"),
            ("[[http]]\nurl = \"{nokey}\"\nwhy = \"x\"\n", "nokey"),
            (
                "[[http]]\nurl = \"ftp://a.example\"\nwhy = \"x\"\n",
                "scheme",
            ),
            (
                "[[exec]]\nprogram = \"node-ctl\"\nwhy = \"x\"\n",
                "absolute",
            ),
            ("[config.a]\nwhy = \"x\\ny\"\n", "one line"),
            ("[secrets.t]\nwhy = \"x\"\nenv = \"A=B\"\n", "variable"),
            ("[unknown]\n", "unknown field"),
        ] {
            let e = Requests::parse(text).unwrap_err();
            assert!(e.contains(wants), "{text:?}: {e}");
        }
        assert!(Requests::parse(&"#".repeat(MAX_BYTES + 1)).is_err());
    }

    #[test]
    fn exact_grants_stand_granted_and_wider_ones_are_flagged() {
        let r = Requests::parse(DECL).unwrap();
        let exact = manifest(
            "[config]\nregion = \"eu-1\"\n[secrets]\ntoken = { env = \"T\" }\n[http]\nallow = [\"https://api.example.com\"]\n[[exec]]\nprogram = \"/usr/local/bin/node-ctl\"\nargs = [\"create\", \"*\"]\n",
        );
        let checks = r.compare(&exact);
        assert!(
            checks
                .iter()
                .all(|c| matches!(c.standing, Standing::Granted | Standing::Unset)),
            "{checks:#?}"
        );

        let wide = manifest(
            "[config]\nextra = \"1\"\n[secrets]\nother = { env = \"O\" }\n[http]\nallow = [\"https://*.example.com\", \"http://127.0.0.1:*\"]\n[[exec]]\nprogram = \"/usr/local/bin/node-ctl\"\nargs = [\"**\"]\n",
        );
        let checks = r.compare(&wide);
        let standing = |kind: &str, item: &str| {
            checks
                .iter()
                .find(|c| c.kind == kind && c.item == item)
                .map(|c| c.standing)
        };
        // The wildcard covers the request, but is itself wider than it.
        assert_eq!(
            standing("http", "https://api.example.com"),
            Some(Standing::Granted)
        );
        assert_eq!(
            standing("http", "https://*.example.com"),
            Some(Standing::WiderThanRequested)
        );
        assert_eq!(
            standing("http", "http://127.0.0.1:*"),
            Some(Standing::WiderThanRequested)
        );
        assert_eq!(
            standing("exec", "/usr/local/bin/node-ctl create *"),
            Some(Standing::Granted)
        );
        assert_eq!(
            standing("exec", "/usr/local/bin/node-ctl **"),
            Some(Standing::WiderThanRequested)
        );
        assert_eq!(standing("config", "region"), Some(Standing::NotGranted));
        assert_eq!(
            standing("config", "extra"),
            Some(Standing::WiderThanRequested)
        );
        assert_eq!(standing("secret", "token"), Some(Standing::NotGranted));
        assert_eq!(
            standing("secret", "other"),
            Some(Standing::WiderThanRequested)
        );
    }

    #[test]
    fn the_written_manifest_parses_and_grants_exactly_the_request() {
        let r = Requests::parse(DECL).unwrap();
        let config = [("region".to_string(), "eu-1".to_string())].into();
        let text = r
            .manifest_text("p", "p.wasm", &"a".repeat(64), &config, &BTreeMap::new())
            .unwrap();
        let m = Manifest::parse("p.toml", &text).unwrap();
        assert_eq!(
            m.secret_sources["token"],
            crate::SecretSource::Env("EXAMPLE_TOKEN".into())
        );
        assert!(
            r.compare(&m)
                .iter()
                .all(|c| c.standing == Standing::Granted || c.standing == Standing::Unset),
            "{text}"
        );
        // A required key not given is a commented placeholder, not a value.
        let text = r
            .manifest_text(
                "p",
                "p.wasm",
                &"a".repeat(64),
                &BTreeMap::new(),
                &BTreeMap::new(),
            )
            .unwrap();
        assert!(text.contains("# REQUIRED, not set: region"), "{text}");
        assert!(
            !Manifest::parse("p.toml", &text)
                .unwrap()
                .config
                .contains_key("region")
        );
        let unknown = [("zone".to_string(), "x".to_string())].into();
        assert!(
            r.manifest_text("p", "p.wasm", "a", &unknown, &BTreeMap::new())
                .unwrap_err()
                .contains("zone")
        );
    }

    #[test]
    fn the_written_manifest_carries_no_line_separator_or_bidi_control_raw() {
        let r = Requests::parse(
            "[[http]]\nurl = \"https://api.example.com\"\nwhy = \"api\\u2028allow = [\\\"https://*.com\\\"]\"\n[config.zone]\nwhy = \"zone\\u202e\"\ndefault = \"eu\\u2029x\"\n[secrets.token]\nwhy = \"t\\u2066\"\nenv = \"P_TOKEN\\u2028\"\n",
        )
        .unwrap();
        let config = [("zone".to_string(), "fsn1\u{2028}[http]".to_string())].into();
        let text = r
            .manifest_text("p", "p.wasm", &"a".repeat(64), &config, &BTreeMap::new())
            .unwrap();
        assert!(
            !text
                .chars()
                .any(|c: char| c != '\n' && crate::text::hidden(c)),
            "{text}"
        );
        assert!(text.contains("api\\u{2028}allow"), "{text}");
        assert!(text.contains("zone = \"fsn1\\u2028[http]\""), "{text}");
        let m = Manifest::parse("p.toml", &text).unwrap();
        assert_eq!(m.config["zone"], "fsn1\u{2028}[http]");
        assert_eq!(
            m.secret_sources["token"],
            crate::SecretSource::Env("P_TOKEN\u{2028}".into())
        );
        assert_eq!(m.http.grants().len(), 1, "{text}");
    }

    #[test]
    fn diff_lists_what_was_added_and_removed() {
        let old = Requests::parse(DECL).unwrap();
        let mut new = old.clone();
        new.http.push(HttpRequest {
            url: "https://telemetry.example.com".into(),
            why: "usage".into(),
        });
        new.secrets.clear();
        let d = old.diff(&new);
        assert!(
            d.contains(&"+ http https://telemetry.example.com".to_string()),
            "{d:?}"
        );
        assert!(d.contains(&"- secret token".to_string()), "{d:?}");
        assert!(old.diff(&old).is_empty());
    }
}
