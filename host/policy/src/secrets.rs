//! Where a secret's value comes from: a manifest's `[secrets]` entries and
//! its `[credentials.aws]` settings, checked. Plain Rust: the runtime runs
//! the sources (`wasmprov_host`'s `secrets` module); this only says what
//! they are and refuses what cannot work.
//!
//! ```toml
//! [secrets]
//! token = { env = "HCLOUD_TOKEN" }                       # read at load
//! api_key = { file = "/run/secrets/api-key" }            # read at every call
//! password = { command = ["/usr/local/bin/vault-get", "db"], refresh_seconds = 60 }
//! # credential_process style: one run serves every key that names the same command
//! key = { command = ["/usr/local/bin/creds"], json = "AccessKeyId" }
//! # the AWS SDK's standard credential chain, refreshed before expiry
//! access_key_id = { aws = "access_key_id" }
//! secret_access_key = { aws = "secret_access_key" }
//! session_token = { aws = "session_token" }
//!
//! [credentials.aws]          # optional: settings of the AWS chain
//! profile = "prod"
//! region = "us-east-1"
//! role_arn = "arn:aws:iam::123456789012:role/provisioner"
//! ```

use std::collections::BTreeMap;

use serde::Deserialize;

/// Largest value a file or command may give, in bytes (a credential is
/// small; a bigger answer is a mistake, not a secret).
pub const MAX_SECRET_BYTES: usize = 64 << 10;
/// How long a `command` may run before it is killed, unless the manifest says.
pub const DEFAULT_COMMAND_TIMEOUT_SECONDS: u64 = 10;
/// Largest `timeout_seconds` of a `command`.
pub const MAX_COMMAND_TIMEOUT_SECONDS: u64 = 120;
/// How long a `command`'s answer is used when it carries no `Expiration`,
/// unless the manifest says (`refresh_seconds`; 0 runs it for every call).
pub const DEFAULT_COMMAND_REFRESH_SECONDS: u64 = 300;

/// Where one secret's value comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SecretSource {
    /// `{ env = "NAME" }`: the host's environment variable, read at load.
    Env(String),
    /// `{ file = "/abs/path" }`: the file's content, trimmed, read at every
    /// call (a rotated file is seen by the next call).
    File {
        /// Absolute path of a regular file (symlinks followed, as mounted
        /// Kubernetes secrets are).
        path: String,
        /// When set, the file holds a JSON object and this is its field.
        json: Option<String>,
    },
    /// `{ command = ["/abs/program", "arg", …] }`: a program the host runs
    /// (no shell, empty environment but `PATH` and `HOME`), whose standard
    /// output is the value.
    Command(CommandSource),
    /// `{ aws = "access_key_id" }`: a field of the AWS credentials the
    /// host's standard chain gives (settings in `[credentials.aws]`).
    Aws(AwsField),
}

/// A program whose output is a secret.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CommandSource {
    /// Absolute path of the program.
    pub program: String,
    /// Its arguments, passed as they are.
    pub args: Vec<String>,
    /// When set, the output is a JSON object (such as AWS's
    /// `credential_process` answer) and this is the field taken; its
    /// `Expiration` (RFC 3339), when present, says when to run it again.
    pub json: Option<String>,
    /// How long an answer without `Expiration` is used, in seconds.
    pub refresh_seconds: u64,
    /// How long the program may run, in seconds.
    pub timeout_seconds: u64,
}

impl CommandSource {
    /// The program and its arguments, as one line (for `inspect`).
    #[must_use]
    pub fn command_line(&self) -> String {
        std::iter::once(self.program.as_str())
            .chain(self.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// A field of one set of AWS credentials.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum AwsField {
    /// `access_key_id`.
    AccessKeyId,
    /// `secret_access_key`.
    SecretAccessKey,
    /// `session_token` (absent for long-term keys: the plugin then does not
    /// see the key).
    SessionToken,
}

impl AwsField {
    /// The name as the manifest writes it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AccessKeyId => "access_key_id",
            Self::SecretAccessKey => "secret_access_key",
            Self::SessionToken => "session_token",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "access_key_id" => Self::AccessKeyId,
            "secret_access_key" => Self::SecretAccessKey,
            "session_token" => Self::SessionToken,
            _ => return None,
        })
    }
}

/// Settings of the AWS credential chain (`[credentials.aws]`); every field
/// is optional, and unset ones come from the host as the AWS SDKs read it
/// (`AWS_PROFILE`, `AWS_REGION`, the shared config files, …).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct AwsSettings {
    /// The profile of the shared config and credentials files.
    pub profile: Option<String>,
    /// The region STS and the chain's other services are asked in.
    pub region: Option<String>,
    /// A role assumed with the chain's credentials (`sts:AssumeRole`).
    pub role_arn: Option<String>,
    /// Session name of the assumed role (default: `wasmprov-PLUGIN`).
    pub role_session_name: Option<String>,
    /// External id the role's trust policy asks for.
    pub external_id: Option<String>,
}

/// Provider settings of a manifest (`[credentials]`): one table per provider.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct CredentialSettings {
    /// `[credentials.aws]`.
    pub aws: Option<AwsSettings>,
}

/// One `[secrets]` entry as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSecret {
    env: Option<String>,
    file: Option<String>,
    command: Option<Vec<String>>,
    aws: Option<String>,
    json: Option<String>,
    refresh_seconds: Option<u64>,
    timeout_seconds: Option<u64>,
}

const EXAMPLES: &str = "{ env = \"HCLOUD_TOKEN\" }, { file = \"/run/secrets/token\" }, { command = [\"/usr/local/bin/get-token\"] } or { aws = \"access_key_id\" }";

impl RawSecret {
    /// The checked source, or `(field under secrets.KEY, what is wrong)`.
    pub(crate) fn check(self) -> Result<SecretSource, (String, String)> {
        let set = [
            self.env.is_some(),
            self.file.is_some(),
            self.command.is_some(),
            self.aws.is_some(),
        ]
        .iter()
        .filter(|s| **s)
        .count();
        if set != 1 {
            return Err((
                String::new(),
                format!("give exactly one source: {EXAMPLES}"),
            ));
        }
        let command_only = |field: &str, set: bool| -> Result<(), (String, String)> {
            if set && self.command.is_none() {
                return Err((
                    field.into(),
                    "only a `command` source takes this setting".into(),
                ));
            }
            Ok(())
        };
        command_only("refresh_seconds", self.refresh_seconds.is_some())?;
        command_only("timeout_seconds", self.timeout_seconds.is_some())?;
        if self.json.is_some() && (self.env.is_some() || self.aws.is_some()) {
            return Err((
                "json".into(),
                "only a `file` or `command` source holds JSON".into(),
            ));
        }
        if let Some(field) = &self.json
            && (field.is_empty() || field.contains(['\0', '\n']))
        {
            return Err((
                "json".into(),
                format!("{field:?} is not a field name, such as \"SecretAccessKey\""),
            ));
        }
        if let Some(env) = self.env {
            if env.is_empty() || env.contains(['=', '\0']) {
                return Err((
                    "env".into(),
                    format!(
                        "{env:?} is not an environment variable name, such as \"HCLOUD_TOKEN\""
                    ),
                ));
            }
            return Ok(SecretSource::Env(env));
        }
        if let Some(path) = self.file {
            absolute("file", &path)?;
            return Ok(SecretSource::File {
                path,
                json: self.json,
            });
        }
        if let Some(argv) = self.command {
            let Some((program, args)) = argv.split_first() else {
                return Err((
                    "command".into(),
                    "is empty; give the program and its arguments, such as [\"/usr/local/bin/get-token\", \"--name\", \"db\"]".into(),
                ));
            };
            absolute("command", program)?;
            if args.iter().any(|a| a.contains('\0')) {
                return Err(("command".into(), "an argument holds a NUL byte".into()));
            }
            let timeout_seconds = self
                .timeout_seconds
                .unwrap_or(DEFAULT_COMMAND_TIMEOUT_SECONDS);
            if !(1..=MAX_COMMAND_TIMEOUT_SECONDS).contains(&timeout_seconds) {
                return Err((
                    "timeout_seconds".into(),
                    format!("{timeout_seconds} is not between 1 and {MAX_COMMAND_TIMEOUT_SECONDS}"),
                ));
            }
            return Ok(SecretSource::Command(CommandSource {
                program: program.clone(),
                args: args.to_vec(),
                json: self.json,
                refresh_seconds: self
                    .refresh_seconds
                    .unwrap_or(DEFAULT_COMMAND_REFRESH_SECONDS),
                timeout_seconds,
            }));
        }
        let field = self.aws.unwrap_or_default();
        AwsField::parse(&field).map(SecretSource::Aws).ok_or_else(|| {
            (
                "aws".into(),
                format!(
                    "{field:?} is not a field of AWS credentials; use \"access_key_id\", \"secret_access_key\" or \"session_token\""
                ),
            )
        })
    }
}

fn absolute(field: &str, path: &str) -> Result<(), (String, String)> {
    let ok =
        path.starts_with('/') && !path.contains('\0') && !path.split('/').any(|part| part == "..");
    if ok {
        Ok(())
    } else {
        Err((
            field.into(),
            format!(
                "{path:?} must be an absolute path without `..`, such as \"/run/secrets/token\" (the host resolves no relative path or PATH lookup)"
            ),
        ))
    }
}

/// Checks the `[credentials]` tables against the secrets that use them.
pub(crate) fn check_settings(
    settings: &CredentialSettings,
    sources: &BTreeMap<String, SecretSource>,
) -> Result<(), (String, String)> {
    let uses_aws = sources.values().any(|s| matches!(s, SecretSource::Aws(_)));
    if let Some(aws) = &settings.aws {
        if !uses_aws {
            return Err((
                "credentials.aws".into(),
                "no secret takes { aws = … }; remove the table or add access_key_id = { aws = \"access_key_id\" }".into(),
            ));
        }
        if let Some(arn) = &aws.role_arn
            && !arn.starts_with("arn:")
        {
            return Err((
                "credentials.aws.role_arn".into(),
                format!("{arn:?} is not an ARN, such as \"arn:aws:iam::123456789012:role/name\""),
            ));
        }
        for (field, value) in [
            ("profile", &aws.profile),
            ("region", &aws.region),
            ("role_session_name", &aws.role_session_name),
            ("external_id", &aws.external_id),
        ] {
            if value
                .as_deref()
                .is_some_and(|v| v.is_empty() || v.chars().any(char::is_control))
            {
                return Err((
                    format!("credentials.aws.{field}"),
                    "must be a non-empty single-line text".into(),
                ));
            }
        }
    }
    Ok(())
}

impl SecretSource {
    /// Where the value comes from, as `inspect` and the grant lines say it:
    /// `$NAME`, `file /path`, `command /prog args`, `aws access_key_id`.
    #[must_use]
    pub fn describe(&self) -> String {
        match self {
            Self::Env(name) => format!("${name}"),
            Self::File { path, json } => match json {
                None => format!("file {path}"),
                Some(f) => format!("file {path} (JSON field {f})"),
            },
            Self::Command(c) => match &c.json {
                None => format!("command {}", c.command_line()),
                Some(f) => format!("command {} (JSON field {f})", c.command_line()),
            },
            Self::Aws(field) => format!("aws {}", field.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<SecretSource, (String, String)> {
        toml::from_str::<RawSecret>(text)
            .map_err(|e| (String::new(), e.to_string()))?
            .check()
    }

    #[test]
    fn each_source_parses_and_is_described() {
        for (text, shown) in [
            ("env = \"T\"", "$T"),
            ("file = \"/run/secrets/t\"", "file /run/secrets/t"),
            (
                "file = \"/run/s.json\"\njson = \"token\"",
                "file /run/s.json (JSON field token)",
            ),
            (
                "command = [\"/usr/bin/get\", \"a b\", \"--x\"]",
                "command /usr/bin/get a b --x",
            ),
            (
                "command = [\"/usr/bin/creds\"]\njson = \"SecretAccessKey\"",
                "command /usr/bin/creds (JSON field SecretAccessKey)",
            ),
            ("aws = \"access_key_id\"", "aws access_key_id"),
            ("aws = \"session_token\"", "aws session_token"),
        ] {
            assert_eq!(parse(text).unwrap().describe(), shown, "{text}");
        }
        let SecretSource::Command(c) =
            parse("command = [\"/bin/x\"]\nrefresh_seconds = 0\ntimeout_seconds = 3").unwrap()
        else {
            panic!("a command")
        };
        assert_eq!((c.refresh_seconds, c.timeout_seconds), (0, 3));
        let SecretSource::Command(c) = parse("command = [\"/bin/x\"]").unwrap() else {
            panic!("a command")
        };
        assert_eq!(
            (c.refresh_seconds, c.timeout_seconds),
            (
                DEFAULT_COMMAND_REFRESH_SECONDS,
                DEFAULT_COMMAND_TIMEOUT_SECONDS
            )
        );
    }

    #[test]
    fn what_cannot_work_is_refused_with_the_field_and_an_example() {
        for (text, field, says) in [
            ("", "", "exactly one source"),
            ("env = \"T\"\nfile = \"/x\"", "", "exactly one source"),
            ("env = \"A=B\"", "env", "not an environment variable"),
            ("file = \"relative/token\"", "file", "absolute path"),
            ("file = \"/run/../etc/shadow\"", "file", "without `..`"),
            ("command = []", "command", "is empty"),
            ("command = [\"vault\", \"get\"]", "command", "absolute path"),
            (
                "command = [\"/bin/x\"]\ntimeout_seconds = 0",
                "timeout_seconds",
                "between",
            ),
            (
                "command = [\"/bin/x\"]\ntimeout_seconds = 999",
                "timeout_seconds",
                "between",
            ),
            (
                "file = \"/x\"\nrefresh_seconds = 5",
                "refresh_seconds",
                "only a `command`",
            ),
            (
                "env = \"T\"\njson = \"x\"",
                "json",
                "only a `file` or `command`",
            ),
            ("aws = \"secret\"", "aws", "\"secret_access_key\""),
        ] {
            let (f, m) = parse(text).unwrap_err();
            assert_eq!(f, field, "{text}: {m}");
            assert!(m.contains(says), "{text}: {m}");
        }
        // An unknown key is a parse error, not a silently ignored setting.
        assert!(parse("file = \"/x\"\nmode = \"0600\"").is_err());
    }
}
