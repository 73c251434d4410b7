//! The plugin's configuration, read from the manifest's `[config]` and
//! `[secrets]` through `wasi:config/store`.
//!
//! Every key is optional when the configuration is read, so that
//! `price-hint` and `capacity-types` work with only what they need; each
//! call then requires the keys it uses (`provision`: the create and list
//! commands and `join_command`; `describe`: the list command; `terminate`:
//! the list and destroy commands) and says which one is missing. A key that
//! is set but wrong is an error for every call.

use std::fmt;

use wasmprov_guest::{CapacityType, Error, Result};

use crate::catalogue::{self, Catalogue};
use crate::protocol;
use crate::template::{Template, Var};

/// One of the operator's commands: a granted program and fixed arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandSpec {
    /// Absolute path of the program.
    pub program: String,
    /// Arguments placed before the plugin's own.
    pub args: Vec<String>,
}

/// Which of the three commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// `create_command`.
    Create,
    /// `destroy_command`.
    Destroy,
    /// `list_command`.
    List,
}

impl Which {
    /// `create`, `destroy` or `list`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Destroy => "destroy",
            Self::List => "list",
        }
    }
}

/// Configuration of one call.
#[derive(Clone, PartialEq)]
pub struct Settings {
    /// `create_command` and `create_args`.
    pub create: Option<CommandSpec>,
    /// `destroy_command` and `destroy_args`.
    pub destroy: Option<CommandSpec>,
    /// `list_command` and `list_args`.
    pub list: Option<CommandSpec>,
    /// `join_command`, parsed.
    pub join: Option<Template>,
    /// `join_token` (a secret).
    pub join_token: Option<String>,
    /// `instance_types`, parsed.
    pub catalogue: Option<Catalogue>,
    /// `capacity_types`: what the backend offers (default on-demand).
    pub capacity_types: Vec<CapacityType>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            create: None,
            destroy: None,
            list: None,
            join: None,
            join_token: None,
            catalogue: None,
            capacity_types: vec![CapacityType::OnDemand],
        }
    }
}

impl fmt::Debug for Settings {
    /// Never shows the join token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("create", &self.create)
            .field("destroy", &self.destroy)
            .field("list", &self.list)
            .field("join", &self.join)
            .field(
                "join_token",
                &self.join_token.as_ref().map(|_| "<redacted>"),
            )
            .field("catalogue", &self.catalogue)
            .field("capacity_types", &self.capacity_types)
            .finish()
    }
}

fn invalid(key: &str, value: &str, why: &str) -> Error {
    Error::InvalidConfig(format!("config key {key:?} has value {value:?}: {why}"))
}

fn missing(key: &str, why: &str) -> Error {
    Error::InvalidConfig(format!(
        "config key {key:?} is required {why}; set it in the plugin's manifest"
    ))
}

/// Parses a `capacity_types` value: words separated by commas or blanks.
///
/// # Errors
/// What is wrong with the value.
pub fn parse_capacity_types(value: &str) -> std::result::Result<Vec<CapacityType>, String> {
    let mut out = Vec::new();
    for word in value
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
    {
        let c = protocol::capacity_type(word)
            .ok_or_else(|| format!("{word:?} is not a capacity type (on-demand or spot)"))?;
        if !out.contains(&c) {
            out.push(c);
        }
    }
    if out.is_empty() {
        return Err("name at least one capacity type: on-demand, spot".to_string());
    }
    Ok(out)
}

impl Settings {
    /// Reads the settings through `lookup` (the config store in the
    /// component, a map in tests). Unset and blank keys are unset.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the key whose value is wrong, or the
    /// error `lookup` returned.
    pub fn from_lookup(lookup: impl Fn(&str) -> Result<Option<String>>) -> Result<Self> {
        let get = |key: &str| -> Result<Option<String>> {
            Ok(lookup(key)?
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()))
        };
        let command = |which: Which| -> Result<Option<CommandSpec>> {
            let key = format!("{}_command", which.name());
            let args_key = format!("{}_args", which.name());
            let args: Vec<String> = get(&args_key)?
                .map(|a| a.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default();
            let Some(program) = get(&key)? else {
                if args.is_empty() {
                    return Ok(None);
                }
                return Err(missing(&key, &format!("when {args_key:?} is set")));
            };
            if !program.starts_with('/') || program.contains(char::is_whitespace) {
                return Err(invalid(
                    &key,
                    &program,
                    "must be the absolute path of the program, as granted in [[exec]] (arguments go in the _args key)",
                ));
            }
            Ok(Some(CommandSpec { program, args }))
        };
        let mut s = Self {
            create: command(Which::Create)?,
            destroy: command(Which::Destroy)?,
            list: command(Which::List)?,
            ..Self::default()
        };
        if let Some(v) = get("join_command")? {
            s.join = Some(Template::parse(&v).map_err(|e| invalid("join_command", &v, &e))?);
        }
        // The token is a secret: used as written, and never quoted in errors.
        s.join_token = lookup("join_token")?.filter(|t| !t.trim().is_empty());
        if let Some(v) = get("instance_types")? {
            s.catalogue = Some(Catalogue::parse(&v).map_err(|e| catalogue::invalid(&e))?);
        }
        if let Some(v) = get("capacity_types")? {
            s.capacity_types =
                parse_capacity_types(&v).map_err(|e| invalid("capacity_types", &v, &e))?;
        }
        Ok(s)
    }

    /// The command `which`, which this call needs.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the missing key.
    pub fn command(&self, which: Which) -> Result<&CommandSpec> {
        let spec = match which {
            Which::Create => &self.create,
            Which::Destroy => &self.destroy,
            Which::List => &self.list,
        };
        spec.as_ref().ok_or_else(|| {
            missing(
                &format!("{}_command", which.name()),
                "(an absolute program path, granted in [[exec]])",
            )
        })
    }

    /// The join template and the token it needs, for `provision`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `join_command` is unset, or uses
    /// `{token}` while `join_token` is unset.
    pub fn join(&self) -> Result<(&Template, &str)> {
        let template = self.join.as_ref().ok_or_else(|| {
            missing(
                "join_command",
                "to provision (the command each node runs to join, such as \"node-agent join --token {token}\")",
            )
        })?;
        let token = match &self.join_token {
            Some(t) => t.as_str(),
            None if template.uses(Var::Token) => {
                return Err(missing(
                    "join_token",
                    "because join_command uses {token} (put it under [secrets])",
                ));
            }
            None => "",
        };
        Ok((template, token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn load(pairs: &[(&str, &str)]) -> Result<Settings> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        Settings::from_lookup(|k| Ok(map.get(k).cloned()))
    }

    #[test]
    fn nothing_set_is_fine_until_a_call_needs_it() {
        let s = load(&[]).unwrap();
        assert_eq!(s, Settings::default());
        assert_eq!(s.capacity_types, [CapacityType::OnDemand]);
        for (which, key) in [
            (Which::Create, "create_command"),
            (Which::Destroy, "destroy_command"),
            (Which::List, "list_command"),
        ] {
            match s.command(which) {
                Err(Error::InvalidConfig(m)) => assert!(m.contains(key), "{m}"),
                other => panic!("{other:?}"),
            }
        }
        assert!(matches!(s.join(), Err(Error::InvalidConfig(m)) if m.contains("join_command")));
    }

    #[test]
    fn values_are_read() {
        let s = load(&[
            ("create_command", " /usr/local/bin/nodes "),
            ("create_args", "create  --state /var/lib/x "),
            ("destroy_command", "/usr/local/bin/nodes"),
            ("destroy_args", "destroy"),
            ("list_command", "/usr/local/bin/list"),
            (
                "join_command",
                "agent join --token {token} --labels {labels}",
            ),
            ("join_token", "s3cret"),
            (
                "instance_types",
                r#"[{"name": "a", "cpu": 1, "memory_gib": 1, "hourly_usd": 0.1}]"#,
            ),
            ("capacity_types", "spot, on-demand spot"),
        ])
        .unwrap();
        assert_eq!(
            s.command(Which::Create).unwrap(),
            &CommandSpec {
                program: "/usr/local/bin/nodes".into(),
                args: vec!["create".into(), "--state".into(), "/var/lib/x".into()],
            }
        );
        assert_eq!(s.command(Which::Destroy).unwrap().args, ["destroy"]);
        assert!(s.command(Which::List).unwrap().args.is_empty());
        let (t, token) = s.join().unwrap();
        assert!(t.uses(Var::Labels));
        assert_eq!(token, "s3cret");
        assert_eq!(s.catalogue.as_ref().unwrap().entries().len(), 1);
        assert_eq!(
            s.capacity_types,
            [CapacityType::Spot, CapacityType::OnDemand]
        );
        let debug = format!("{s:?}");
        assert!(!debug.contains("s3cret"), "{debug}");
        assert!(debug.contains("<redacted>"), "{debug}");
    }

    #[test]
    fn the_token_is_needed_only_when_the_template_uses_it() {
        let s = load(&[("join_command", "agent join {labels}")]).unwrap();
        assert_eq!(s.join().unwrap().1, "");
        let s = load(&[("join_command", "agent join {token}"), ("join_token", " ")]).unwrap();
        match s.join() {
            Err(Error::InvalidConfig(m)) => {
                assert!(m.contains("join_token") && m.contains("[secrets]"), "{m}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bad_values_name_the_key_and_never_the_token() {
        let cases: &[(&[(&str, &str)], &str)] = &[
            (&[("create_command", "nodes")], "create_command"),
            (&[("list_command", "./list.sh")], "list_command"),
            (
                &[("destroy_command", "/usr/bin/nodes destroy")],
                "destroy_command",
            ),
            (&[("list_args", "--state /x")], "list_command"),
            (&[("join_command", "agent {nope}")], "join_command"),
            (&[("join_command", "agent 'x")], "join_command"),
            (&[("instance_types", "[{}]")], "instance_types"),
            (&[("capacity_types", "reserved")], "capacity_types"),
            (&[("capacity_types", ",")], "capacity_types"),
        ];
        for (pairs, key) in cases {
            let mut with_token = pairs.to_vec();
            with_token.push(("join_token", "tok-secret-value"));
            match load(&with_token) {
                Err(Error::InvalidConfig(m)) => {
                    assert!(m.contains(key), "{pairs:?}: {m}");
                    assert!(!m.contains("tok-secret-value"), "{m}");
                }
                other => panic!("{pairs:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn capacity_type_lists() {
        assert_eq!(
            parse_capacity_types("on-demand").unwrap(),
            [CapacityType::OnDemand]
        );
        assert_eq!(
            parse_capacity_types("spot,on_demand").unwrap(),
            [CapacityType::Spot, CapacityType::OnDemand]
        );
        assert!(parse_capacity_types("spot, sometimes").is_err());
    }
}
