//! The interceptors the suite installs in the host: every allowed request of
//! the plugin goes to the fake cloud, the cassette, or the real endpoint,
//! with faults injected on the way and the exchange recorded when asked.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmprov_host::intercept::{
    Denial, ExecFailure, ExecInterceptor, ExecOutput, ExecRequest, HttpFailure, HttpInterceptor,
    Observer, OutgoingRequest, RealExec, Upstream,
};

use crate::cassette::{Recorder, Replayer};
use crate::fake::{FakeCloud, json_response};
use crate::faults::{FaultKind, Injector};

/// Where allowed requests go.
#[derive(Clone)]
pub(crate) enum Target {
    /// A fake cloud: HTTP redirected to it, exec answered by it.
    Fake(Arc<dyn FakeCloud>),
    /// A cassette; nothing leaves the process.
    Replay(Arc<Replayer>),
    /// Wherever the plugin addressed them, as in production.
    Live,
}

/// The suite's HTTP and exec interceptor.
pub(crate) struct Harness {
    pub(crate) target: Target,
    pub(crate) recorder: Option<Arc<Recorder>>,
    pub(crate) injector: Arc<Injector>,
}

impl Harness {
    fn fake(&self) -> Option<&Arc<dyn FakeCloud>> {
        match &self.target {
            Target::Fake(f) => Some(f),
            _ => None,
        }
    }

    async fn forward(
        &self,
        req: OutgoingRequest,
        upstream: &Upstream<'_>,
    ) -> Result<http::Response<Bytes>, HttpFailure> {
        let recorded = self.recorder.as_ref().map(|_| req.clone());
        let response = match &self.target {
            Target::Fake(fake) => match fake.http_target() {
                Some(addr) => upstream.send_to(addr, req).await?,
                None => {
                    return Err(HttpFailure::Denied(format!(
                        "{} takes no HTTP",
                        fake.describe()
                    )));
                }
            },
            Target::Replay(replayer) => replayer.answer(&req).ok_or_else(|| {
                HttpFailure::Other(format!("{} {} is not in the cassette", req.method, req.uri))
            })?,
            Target::Live => upstream.send(req).await?,
        };
        if let (Some(recorder), Some(req)) = (&self.recorder, recorded) {
            recorder.record(&req, &response);
        }
        Ok(response)
    }
}

#[async_trait::async_trait]
impl HttpInterceptor for Harness {
    async fn exchange(
        &self,
        req: OutgoingRequest,
        upstream: Upstream<'_>,
    ) -> Result<http::Response<Bytes>, HttpFailure> {
        let create = self.fake().is_some_and(|f| f.is_create(&req));
        let fault = self.injector.draw(create);
        let target = format!("{} {}", req.method, req.uri);
        match fault {
            Some(kind @ FaultKind::Timeout) => {
                self.injector.applied(kind, target);
                return Err(HttpFailure::Timeout);
            }
            Some(kind @ FaultKind::ServerError) => {
                self.injector.applied(kind, target);
                // 500 rather than 503: some APIs (EC2, S3) use 503 to throttle.
                return Ok(json_response(
                    500,
                    &[],
                    r#"{"error":{"code":"internal_error","message":"internal server error (injected by the test suite)"}}"#,
                ));
            }
            Some(kind @ (FaultKind::RateLimited | FaultKind::Capacity | FaultKind::Quota)) => {
                self.injector.applied(kind, target);
                return Ok(match self.fake() {
                    Some(fake) => fake.fault_response(kind, &req),
                    None => json_response(
                        429,
                        &[("Retry-After", "1")],
                        r#"{"error":{"code":"rate_limited","message":"too many requests (injected by the test suite)"}}"#,
                    ),
                });
            }
            Some(kind @ FaultKind::Slow) => {
                self.injector.applied(kind, target.clone());
                tokio::time::sleep(self.injector.spec().slow).await;
            }
            _ => {}
        }
        let response = self.forward(req, &upstream).await?;
        match fault {
            Some(kind @ FaultKind::Reset) => {
                self.injector.applied(kind, target);
                Err(HttpFailure::ConnectionReset)
            }
            Some(kind @ FaultKind::Malformed) if response.status().is_success() => {
                self.injector.applied(kind, target);
                let (mut parts, _) = response.into_parts();
                parts.headers.remove(http::header::CONTENT_LENGTH);
                Ok(http::Response::from_parts(
                    parts,
                    Bytes::from_static(b"<html><body>upstream sent garbage {\"id\": "),
                ))
            }
            _ => Ok(response),
        }
    }
}

#[async_trait::async_trait]
impl ExecInterceptor for Harness {
    async fn run(&self, req: ExecRequest, real: RealExec<'_>) -> Result<ExecOutput, ExecFailure> {
        let Some(fake) = self.fake() else {
            // A cassette holds HTTP exchanges only: a replay runs no
            // program, since a real one would reach the real cloud.
            if matches!(self.target, Target::Replay(_)) {
                return Err(ExecFailure::Denied(format!(
                    "a replay runs no programs (a cassette holds HTTP only), and {} was not run; test a plugin that runs programs against a fake of them",
                    req.program
                )));
            }
            return real.run(req).await;
        };
        let fault = self.injector.draw(fake.exec_is_create(&req));
        let target = format!("{} {}", req.program, req.args.join(" "));
        if let Some(kind) = fault {
            if let Some(answer) = fake.exec_fault(kind, &req) {
                self.injector.applied(kind, target);
                return answer;
            }
            if kind == FaultKind::Slow {
                self.injector.applied(kind, target.clone());
                tokio::time::sleep(self.injector.spec().slow).await;
            }
        }
        let answer = fake.exec(&req).await.unwrap_or_else(|| {
            Err(ExecFailure::Denied(format!(
                "{} has no stub for {target}",
                fake.describe()
            )))
        });
        if fault == Some(FaultKind::Reset) {
            self.injector.applied(FaultKind::Reset, target);
            // The command ran; its answer is lost as if it had been killed.
            return Ok(ExecOutput {
                exit_code: None,
                stdout: Vec::new(),
                stderr: b"killed by signal 9 (injected by the test suite)\n".to_vec(),
            });
        }
        answer
    }
}

/// Collects the host's denials.
#[derive(Debug, Default)]
pub(crate) struct Denials(pub(crate) Mutex<Vec<Denial>>);

impl Observer for Denials {
    fn denied(&self, denial: &Denial) {
        if let Ok(mut d) = self.0.lock() {
            d.push(denial.clone());
        }
    }
}
