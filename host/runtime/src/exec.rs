//! Where process exec is decided and run. Every `exec.run` of a guest comes
//! here: the policy check is the first thing done, then the program runs with
//! a cleared environment in the plugin's own working directory, in its own
//! process group, with captured and capped output and a time limit that kills
//! the whole group.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::Semaphore;
use wasmprov_policy::ExecPolicy;

use crate::bindings::v03::exec::{Command, ExecError, Output};
use crate::hooks::{CallKind, Hooks};
use crate::intercept::{
    Denial, DenialKind, ExecFailure, ExecOutput, ExecRequest, Granted, ProgramRunner, RealExec,
};

/// Per-plugin exec state.
#[derive(Debug)]
pub(crate) struct ExecRunner {
    policy: ExecPolicy,
    workdir: PathBuf,
    running: Arc<Semaphore>,
    hooks: Hooks,
}

impl ExecRunner {
    pub(crate) fn new(policy: ExecPolicy, workdir: PathBuf, hooks: Hooks) -> Self {
        Self {
            running: Arc::new(Semaphore::new(policy.max_concurrent.max(1))),
            policy,
            workdir,
            hooks,
        }
    }

    /// Runs one `exec.run` of a guest, if the call may do I/O and the
    /// policy allows it.
    pub(crate) async fn run(
        &self,
        plugin: &str,
        kind: CallKind,
        cmd: Command,
    ) -> Result<Output, ExecError> {
        if kind == CallKind::Pure {
            tracing::warn!(plugin, program = %wasmprov_policy::text::cell(&cmd.program), "exec denied: price-hint must not do I/O");
            self.hooks.metrics.denied(plugin, DenialKind::Exec);
            return Err(ExecError::Denied("price-hint must not do I/O".into()));
        }
        let grant = match self.policy.check(&cmd.program, &cmd.args, &cmd.env) {
            Ok(g) => g,
            Err(denial) => {
                tracing::warn!(plugin, program = %wasmprov_policy::text::cell(&cmd.program), args = ?cmd.args, %denial, "exec denied");
                self.report_denial(plugin, &cmd.program, &denial.to_string());
                return Err(ExecError::Denied(denial.to_string()));
            }
        };
        let granted = Granted {
            timeout: cmd.timeout_ms.map_or(grant.timeout, |ms| {
                grant.timeout.min(Duration::from_millis(u64::from(ms)))
            }),
            max_output: grant.max_output_bytes,
        };
        // Over the concurrency limit a command waits for a slot, first come
        // first served, for up to its own time limit (the call's deadline
        // bounds it too); then it fails as a timeout, which is retryable.
        let Ok(Ok(_permit)) =
            tokio::time::timeout(granted.timeout, self.running.clone().acquire_owned()).await
        else {
            tracing::warn!(plugin, program = %wasmprov_policy::text::cell(&cmd.program), "exec waited past its time limit for a process slot");
            return Err(ExecError::Timeout(format!(
                "waited {} ms for one of the {} process slots of this plugin",
                granted.timeout.as_millis(),
                self.policy.max_concurrent
            )));
        };
        let req = ExecRequest {
            plugin: plugin.to_string(),
            program: grant.program.clone(),
            args: cmd.args,
            env: cmd.env,
            stdin: cmd.stdin,
        };
        let result = match &self.hooks.exec {
            Some(interceptor) => {
                let real = RealExec {
                    runner: self,
                    grant: &granted,
                };
                interceptor.run(req, real).await
            }
            None => self.run_granted(&granted, req).await,
        };
        result
            .map(|o| Output {
                exit_code: o.exit_code,
                stdout: o.stdout,
                stderr: o.stderr,
            })
            .map_err(|e| match e {
                ExecFailure::Denied(m) => ExecError::Denied(m),
                ExecFailure::SpawnFailed(m) => ExecError::SpawnFailed(m),
                ExecFailure::Timeout(m) => ExecError::Timeout(m),
                ExecFailure::OutputTooLarge(m) => ExecError::OutputTooLarge(m),
                ExecFailure::Other(m) => ExecError::Other(m),
            })
    }

    fn report_denial(&self, plugin: &str, program: &str, reason: &str) {
        self.hooks.metrics.denied(plugin, DenialKind::Exec);
        if let Some(observer) = &self.hooks.observer {
            observer.denied(&Denial {
                plugin: plugin.to_string(),
                kind: DenialKind::Exec,
                target: program.to_string(),
                reason: reason.to_string(),
            });
        }
    }

    /// Runs an allowed program for real.
    pub(crate) async fn run_granted(
        &self,
        grant: &Granted,
        cmd: ExecRequest,
    ) -> Result<ExecOutput, ExecFailure> {
        let plugin = cmd.plugin.as_str();
        let program = cmd.program.as_str();
        let timeout = grant.timeout;
        let cap = grant.max_output;
        std::fs::create_dir_all(&self.workdir)
            .map_err(|e| ExecFailure::SpawnFailed(format!("creating working directory: {e}")))?;

        let mut child = tokio::process::Command::new(program)
            .args(&cmd.args)
            .env_clear()
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.workdir)
            .stdin(if cmd.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ExecFailure::SpawnFailed(format!("{program}: {e}")))?;
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw);
        // Kills the whole group however this function ends: normally, by the
        // time limit, or because the call itself was cancelled (its deadline
        // passed, or the caller dropped it) while the program ran.
        let _group = GroupGuard(pgid);
        tracing::info!(plugin, program, args = ?cmd.args, pid = ?pgid, "exec started");

        if let (Some(bytes), Some(mut stdin)) = (cmd.stdin, child.stdin.take()) {
            tokio::spawn(async move {
                let _ = stdin.write_all(&bytes).await;
                let _ = stdin.shutdown().await;
            });
        }
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let work = async {
            let (out, err) = tokio::try_join!(read_capped(stdout, cap), read_capped(stderr, cap))?;
            let status = child
                .wait()
                .await
                .map_err(|e| ExecFailure::Other(format!("waiting: {e}")))?;
            Ok::<_, ExecFailure>((out, err, status))
        };
        let result = tokio::time::timeout(timeout, work).await;
        match result {
            Err(_) => {
                tracing::warn!(
                    plugin,
                    program,
                    ?timeout,
                    "exec timed out; process group killed"
                );
                Err(ExecFailure::Timeout(format!(
                    "{program} ran longer than {} ms and was killed",
                    timeout.as_millis()
                )))
            }
            Ok(Err(e)) => {
                tracing::warn!(plugin, program, error = ?e, "exec failed");
                Err(e)
            }
            Ok(Ok((stdout, stderr, status))) => {
                use std::os::unix::process::ExitStatusExt;
                tracing::info!(plugin, program, code = ?status.code(), signal = ?status.signal(), "exec finished");
                Ok(ExecOutput {
                    exit_code: status.code(),
                    stdout,
                    stderr,
                })
            }
        }
    }
}

/// Kills a process group when dropped, so nothing a program started outlives
/// the call that started it.
pub(crate) struct GroupGuard(pub(crate) Option<Pid>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            let _ = killpg(pgid, Signal::SIGKILL);
        }
    }
}

async fn read_capped<R: AsyncRead + Unpin>(
    reader: Option<R>,
    cap: usize,
) -> Result<Vec<u8>, ExecFailure> {
    let Some(reader) = reader else {
        return Ok(Vec::new());
    };
    let mut buf = Vec::new();
    let mut limited = reader.take(cap as u64 + 1);
    limited
        .read_to_end(&mut buf)
        .await
        .map_err(|e| ExecFailure::Other(format!("reading output: {e}")))?;
    if buf.len() > cap {
        return Err(ExecFailure::OutputTooLarge(format!(
            "output exceeded {cap} bytes; the process group was killed"
        )));
    }
    Ok(buf)
}

#[async_trait::async_trait]
impl ProgramRunner for ExecRunner {
    async fn run_granted(
        &self,
        grant: &Granted,
        req: ExecRequest,
    ) -> Result<ExecOutput, ExecFailure> {
        ExecRunner::run_granted(self, grant, req).await
    }
}
