//! Where process exec is decided. A plugin runs a program only when a grant
//! names that program's absolute path and its arguments fit the grant's
//! patterns. There is never a shell: arguments go to the program as they are.
//!
//! Argument patterns, one per argument:
//! - a literal matches exactly that argument;
//! - `*` matches any one argument;
//! - `**`, last only, matches all remaining arguments (zero or more).

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

/// Default time limit of one process.
pub const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(30);
/// Default cap on each of stdout and stderr.
pub const DEFAULT_EXEC_MAX_OUTPUT: usize = 1 << 20;
/// Default cap on processes running at once per plugin.
pub const DEFAULT_EXEC_MAX_CONCURRENT: usize = 4;

/// One grant as written in a manifest's `[[exec]]` table.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ExecGrantSpec {
    /// Absolute path of the program.
    pub program: String,
    /// Argument patterns; absent means "no arguments".
    #[serde(default)]
    pub args: Vec<String>,
    /// Names of environment variables the plugin may set for the program.
    #[serde(default)]
    pub env: Vec<String>,
    /// Time limit in milliseconds (default 30 000).
    pub timeout_ms: Option<u64>,
    /// Cap on each of stdout and stderr in bytes (default 1 MiB).
    pub max_output_bytes: Option<usize>,
}

/// A checked grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecGrant {
    /// Absolute, normalized path of the program.
    pub program: String,
    /// Argument patterns.
    pub args: Vec<ArgPattern>,
    /// Variables the plugin may set.
    pub env: Vec<String>,
    /// Time limit of one run.
    pub timeout: Duration,
    /// Cap on each captured stream.
    pub max_output_bytes: usize,
}

/// One argument pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgPattern {
    /// Exactly this argument.
    Literal(String),
    /// Any one argument.
    One,
    /// All remaining arguments.
    Rest,
}

impl std::fmt::Display for ArgPattern {
    /// As a manifest writes it: the literal, `*` or `**`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Literal(s) => f.write_str(s),
            Self::One => f.write_str("*"),
            Self::Rest => f.write_str("**"),
        }
    }
}

impl std::fmt::Display for ExecGrant {
    /// The program and its argument patterns, as a manifest writes them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.program)?;
        for a in &self.args {
            write!(f, " {a}")?;
        }
        Ok(())
    }
}

impl ExecGrant {
    /// Checks a grant as written.
    ///
    /// # Errors
    /// What is wrong and what would be accepted.
    pub fn from_spec(spec: &ExecGrantSpec) -> Result<Self, String> {
        let path = Path::new(&spec.program);
        if !path.is_absolute() {
            return Err(format!(
                "program {:?} must be an absolute path, such as \"/usr/bin/ssh\"",
                spec.program
            ));
        }
        if spec.program[1..]
            .split('/')
            .any(|part| matches!(part, "" | "." | ".."))
        {
            return Err(format!(
                "program {:?} must be a normalized path without `.`, `..` or empty parts",
                spec.program
            ));
        }
        let mut args = Vec::with_capacity(spec.args.len());
        for (i, a) in spec.args.iter().enumerate() {
            args.push(match a.as_str() {
                "*" => ArgPattern::One,
                "**" if i + 1 == spec.args.len() => ArgPattern::Rest,
                "**" => {
                    return Err("`**` may only be the last argument pattern".to_string());
                }
                lit => ArgPattern::Literal(lit.to_string()),
            });
        }
        for name in &spec.env {
            if name.is_empty() || name.contains(['=', '\0']) {
                return Err(format!("environment variable name {name:?} is not valid"));
            }
        }
        Ok(Self {
            program: spec.program.clone(),
            args,
            env: spec.env.clone(),
            timeout: spec
                .timeout_ms
                .map_or(DEFAULT_EXEC_TIMEOUT, Duration::from_millis),
            max_output_bytes: spec.max_output_bytes.unwrap_or(DEFAULT_EXEC_MAX_OUTPUT),
        })
    }

    /// Whether the arguments fit the patterns.
    #[must_use]
    pub fn args_match(&self, args: &[String]) -> bool {
        let mut i = 0;
        for pat in &self.args {
            match pat {
                ArgPattern::Rest => return true,
                ArgPattern::One if i < args.len() => i += 1,
                ArgPattern::Literal(lit) if args.get(i) == Some(lit) => i += 1,
                _ => return false,
            }
        }
        i == args.len()
    }
}

/// The exec grants of one plugin. Empty means no exec at all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecPolicy {
    grants: Vec<ExecGrant>,
    /// Processes allowed at once.
    pub max_concurrent: usize,
}

/// Why a command was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExecDenial {
    /// The plugin has no exec grant.
    #[error("no exec is granted to this plugin")]
    NoGrants,
    /// No grant names this program.
    #[error("program {0:?} is not granted")]
    Program(String),
    /// The program is granted but not with these arguments.
    #[error("arguments {args:?} do not fit any grant of {program:?}")]
    Arguments {
        /// The program.
        program: String,
        /// The arguments asked for.
        args: Vec<String>,
    },
    /// A variable the grant does not name.
    #[error("environment variable {0:?} is not granted for this program")]
    Env(String),
}

impl ExecPolicy {
    /// Checks the grants of a manifest.
    ///
    /// # Errors
    /// The first bad grant, with its index.
    pub fn from_specs(specs: &[ExecGrantSpec], max_concurrent: usize) -> Result<Self, String> {
        let grants = specs
            .iter()
            .enumerate()
            .map(|(i, s)| ExecGrant::from_spec(s).map_err(|e| format!("exec[{i}]: {e}")))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            grants,
            max_concurrent,
        })
    }

    /// The grants, in the order written.
    #[must_use]
    pub fn grants(&self) -> &[ExecGrant] {
        &self.grants
    }

    /// Finds the grant that allows this command.
    ///
    /// # Errors
    /// Why it is refused.
    pub fn check(
        &self,
        program: &str,
        args: &[String],
        env: &[(String, String)],
    ) -> Result<&ExecGrant, ExecDenial> {
        if self.grants.is_empty() {
            return Err(ExecDenial::NoGrants);
        }
        let mut named = self
            .grants
            .iter()
            .filter(|g| g.program == program)
            .peekable();
        if named.peek().is_none() {
            return Err(ExecDenial::Program(program.to_string()));
        }
        let grant = named
            .find(|g| g.args_match(args))
            .ok_or_else(|| ExecDenial::Arguments {
                program: program.to_string(),
                args: args.to_vec(),
            })?;
        if let Some((name, _)) = env.iter().find(|(k, _)| !grant.env.contains(k)) {
            return Err(ExecDenial::Env(name.clone()));
        }
        Ok(grant)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(program: &str, args: &[&str], env: &[&str]) -> ExecGrantSpec {
        ExecGrantSpec {
            program: program.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
            env: env.iter().map(|s| s.to_string()).collect(),
            timeout_ms: None,
            max_output_bytes: None,
        }
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn argument_patterns_table() {
        let cases: &[(&[&str], &[&str], bool)] = &[
            (&[], &[], true),
            (&[], &["x"], false),
            (&["create"], &["create"], true),
            (&["create"], &["delete"], false),
            (&["create", "*"], &["create", "n1"], true),
            (&["create", "*"], &["create"], false),
            (&["create", "*"], &["create", "n1", "n2"], false),
            (&["create", "**"], &["create"], true),
            (&["create", "**"], &["create", "a", "b", "c"], true),
            (&["create", "**"], &["delete", "a"], false),
            (&["*", "--json"], &["list", "--json"], true),
            (&["*", "--json"], &["list", "--yaml"], false),
            (&["**"], &["anything", "at", "all"], true),
        ];
        for (pats, args, want) in cases {
            let g = ExecGrant::from_spec(&grant("/bin/tool", pats, &[])).unwrap();
            assert_eq!(g.args_match(&strings(args)), *want, "{pats:?} vs {args:?}");
        }
    }

    #[test]
    fn grants_are_validated() {
        for bad in [
            "tool",
            "./tool",
            "/usr/bin/../bin/sh",
            "/usr//bin/sh",
            "/usr/bin/",
            "/a/./b",
        ] {
            assert!(
                ExecGrant::from_spec(&grant(bad, &[], &[])).is_err(),
                "{bad}"
            );
        }
        assert!(ExecGrant::from_spec(&grant("/bin/x", &["**", "y"], &[])).is_err());
        assert!(ExecGrant::from_spec(&grant("/bin/x", &[], &["A=B"])).is_err());
    }

    #[test]
    fn check_decides_program_args_and_env() {
        let policy = ExecPolicy::from_specs(
            &[
                grant("/usr/bin/node-ctl", &["create", "*"], &["REGION"]),
                grant("/usr/bin/node-ctl", &["list"], &[]),
            ],
            4,
        )
        .unwrap();
        assert!(
            policy
                .check("/usr/bin/node-ctl", &strings(&["list"]), &[])
                .is_ok()
        );
        let env = vec![("REGION".to_string(), "eu".to_string())];
        assert!(
            policy
                .check("/usr/bin/node-ctl", &strings(&["create", "a"]), &env)
                .is_ok()
        );
        assert_eq!(
            policy.check("/usr/bin/node-ctl", &strings(&["list"]), &env),
            Err(ExecDenial::Env("REGION".into()))
        );
        assert!(matches!(
            policy.check("/usr/bin/node-ctl", &strings(&["delete", "a"]), &[]),
            Err(ExecDenial::Arguments { .. })
        ));
        for program in [
            "/bin/sh",
            "/usr/bin/../bin/node-ctl",
            "node-ctl",
            "/usr/bin/node-ctl ",
        ] {
            assert!(
                matches!(policy.check(program, &[], &[]), Err(ExecDenial::Program(_))),
                "{program}"
            );
        }
        assert_eq!(
            ExecPolicy::default().check("/bin/true", &[], &[]),
            Err(ExecDenial::NoGrants)
        );
    }
}
