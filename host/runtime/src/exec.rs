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

use crate::bindings::exec::{Command, ExecError, Host, Output};
use crate::state::{CallKind, CallState};

/// Per-plugin exec state.
#[derive(Debug)]
pub(crate) struct ExecRunner {
    policy: ExecPolicy,
    workdir: PathBuf,
    running: Arc<Semaphore>,
}

impl ExecRunner {
    pub(crate) fn new(policy: ExecPolicy, workdir: PathBuf) -> Self {
        Self {
            running: Arc::new(Semaphore::new(policy.max_concurrent.max(1))),
            policy,
            workdir,
        }
    }

    pub(crate) async fn run(&self, plugin: &str, cmd: Command) -> Result<Output, ExecError> {
        let grant = match self.policy.check(&cmd.program, &cmd.args, &cmd.env) {
            Ok(g) => g,
            Err(denial) => {
                tracing::warn!(plugin, program = %cmd.program, args = ?cmd.args, %denial, "exec denied");
                return Err(ExecError::Denied(denial.to_string()));
            }
        };
        let Ok(_permit) = self.running.clone().try_acquire_owned() else {
            tracing::warn!(plugin, program = %cmd.program, "exec over the concurrency limit");
            return Err(ExecError::Denied(format!(
                "at most {} processes may run at once for this plugin",
                self.policy.max_concurrent
            )));
        };
        let timeout = cmd.timeout_ms.map_or(grant.timeout, |ms| {
            grant.timeout.min(Duration::from_millis(u64::from(ms)))
        });
        let cap = grant.max_output_bytes;
        std::fs::create_dir_all(&self.workdir)
            .map_err(|e| ExecError::SpawnFailed(format!("creating working directory: {e}")))?;

        let mut child = tokio::process::Command::new(&grant.program)
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
            .map_err(|e| ExecError::SpawnFailed(format!("{}: {e}", grant.program)))?;
        let pgid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .map(Pid::from_raw);
        // Kills the whole group however this function ends: normally, by the
        // time limit, or because the call itself was cancelled (its deadline
        // passed, or the caller dropped it) while the program ran.
        let _group = GroupGuard(pgid);
        tracing::info!(plugin, program = %grant.program, args = ?cmd.args, pid = ?pgid, "exec started");

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
                .map_err(|e| ExecError::Other(format!("waiting: {e}")))?;
            Ok::<_, ExecError>((out, err, status))
        };
        let result = tokio::time::timeout(timeout, work).await;
        match result {
            Err(_) => {
                tracing::warn!(plugin, program = %grant.program, ?timeout, "exec timed out; process group killed");
                Err(ExecError::Timeout(format!(
                    "{} ran longer than {} ms and was killed",
                    grant.program,
                    timeout.as_millis()
                )))
            }
            Ok(Err(e)) => {
                tracing::warn!(plugin, program = %grant.program, error = ?e, "exec failed");
                Err(e)
            }
            Ok(Ok((stdout, stderr, status))) => {
                use std::os::unix::process::ExitStatusExt;
                tracing::info!(plugin, program = %grant.program, code = ?status.code(), signal = ?status.signal(), "exec finished");
                Ok(Output {
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
struct GroupGuard(Option<Pid>);

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
) -> Result<Vec<u8>, ExecError> {
    let Some(reader) = reader else {
        return Ok(Vec::new());
    };
    let mut buf = Vec::new();
    let mut limited = reader.take(cap as u64 + 1);
    limited
        .read_to_end(&mut buf)
        .await
        .map_err(|e| ExecError::Other(format!("reading output: {e}")))?;
    if buf.len() > cap {
        return Err(ExecError::OutputTooLarge(format!(
            "output exceeded {cap} bytes; the process group was killed"
        )));
    }
    Ok(buf)
}

impl Host for CallState {
    async fn run(&mut self, cmd: Command) -> wasmtime::Result<Result<Output, ExecError>> {
        if self.kind == CallKind::Pure {
            tracing::warn!(plugin = %self.plugin.manifest.name, program = %cmd.program, "exec denied: price-hint must not do I/O");
            return Ok(Err(ExecError::Denied("price-hint must not do I/O".into())));
        }
        let plugin = self.plugin.clone();
        Ok(plugin.exec.run(&plugin.manifest.name, cmd).await)
    }
}
