//! Running programs the operator granted. There is no shell: the program
//! path and each argument go to the host as they are, and the host checks
//! them against the manifest's `[[exec]]` grants.

use std::time::Duration;

use crate::Error;
use crate::wit::wasmprov::provisioner0_3_0::exec as wit_exec;

/// Why a program did not run to completion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExecError {
    /// No grant allows the program with these arguments or variables.
    Denied(String),
    /// The program could not be started.
    SpawnFailed(String),
    /// The program ran past its time limit and was killed.
    Timeout(String),
    /// The program wrote more than its cap and was killed.
    OutputTooLarge(String),
    /// Anything else.
    Other(String),
}

impl std::fmt::Display for ExecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Denied(m) => write!(f, "exec denied: {m}"),
            Self::SpawnFailed(m) => write!(f, "exec failed to start: {m}"),
            Self::Timeout(m) => write!(f, "exec timed out: {m}"),
            Self::OutputTooLarge(m) => write!(f, "exec output too large: {m}"),
            Self::Other(m) => write!(f, "exec: {m}"),
        }
    }
}

impl std::error::Error for ExecError {}

impl From<ExecError> for Error {
    /// A denial is a configuration problem (the grant is missing); the rest
    /// are failures of the backend's tooling.
    fn from(e: ExecError) -> Self {
        match e {
            ExecError::Denied(_) => Error::InvalidConfig(e.to_string()),
            ExecError::Timeout(_) => Error::Transport(e.to_string()),
            _ => Error::Other(e.to_string()),
        }
    }
}

/// What a finished program left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Output {
    /// Exit code; `None` when a signal ended it.
    pub exit_code: Option<i32>,
    /// Captured standard output.
    pub stdout: Vec<u8>,
    /// Captured standard error.
    pub stderr: Vec<u8>,
}

impl Output {
    /// Whether the program exited with code 0.
    #[must_use]
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }

    /// Standard output as text (lossy).
    #[must_use]
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// Standard error as text (lossy).
    #[must_use]
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

/// A program to run, built up like `std::process::Command`.
#[derive(Clone, Debug, Default)]
pub struct Command {
    program: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    stdin: Option<Vec<u8>>,
    timeout: Option<Duration>,
}

impl Command {
    /// A command for the program at this absolute path.
    #[must_use]
    pub fn new(program: impl Into<String>) -> Self {
        Self {
            program: program.into(),
            ..Self::default()
        }
    }

    /// Adds one argument.
    #[must_use]
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable (the grant must name it).
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Bytes to write to standard input.
    #[must_use]
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(bytes.into());
        self
    }

    /// A time limit, capped by the host at the grant's limit.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Runs the program to completion.
    ///
    /// # Errors
    /// An [`ExecError`] saying why it did not complete.
    pub fn run(&self) -> Result<Output, ExecError> {
        let cmd = wit_exec::Command {
            program: self.program.clone(),
            args: self.args.clone(),
            env: self.env.clone(),
            stdin: self.stdin.clone(),
            timeout_ms: self
                .timeout
                .map(|t| u32::try_from(t.as_millis()).unwrap_or(u32::MAX)),
        };
        match wit_exec::run(&cmd) {
            Ok(o) => Ok(Output {
                exit_code: o.exit_code,
                stdout: o.stdout,
                stderr: o.stderr,
            }),
            Err(wit_exec::ExecError::Denied(m)) => Err(ExecError::Denied(m)),
            Err(wit_exec::ExecError::SpawnFailed(m)) => Err(ExecError::SpawnFailed(m)),
            Err(wit_exec::ExecError::Timeout(m)) => Err(ExecError::Timeout(m)),
            Err(wit_exec::ExecError::OutputTooLarge(m)) => Err(ExecError::OutputTooLarge(m)),
            Err(wit_exec::ExecError::Other(m)) => Err(ExecError::Other(m)),
        }
    }
}
