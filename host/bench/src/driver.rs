//! Closed-loop load: N tasks on the tokio runtime, each doing round trips one
//! after the other, bounded in count and in time.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::stats::{Summary, summarize};

/// What a run measured.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// Round trips per task at once.
    pub concurrency: usize,
    /// Latency percentiles of the measured round trips (ns).
    pub latency: Summary,
    /// Successful measured round trips.
    pub ok: u64,
    /// Failed ones (any failure fails the run's comparison).
    pub errors: u64,
    /// The first failure, for the log.
    pub first_error: Option<String>,
    /// Wall time of the measured phase.
    pub wall: Duration,
    /// CPU time of the client side per round trip (warm-ups included), when measured.
    pub client_cpu_per_op: Option<Duration>,
    /// CPU time of the server side (the fake) per round trip, when measured.
    pub server_cpu_per_op: Option<Duration>,
}

impl RunResult {
    /// Successful round trips per second.
    pub fn throughput(&self) -> f64 {
        self.ok as f64 / self.wall.as_secs_f64().max(1e-9)
    }
}

/// Limits of one run.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Round trips at once.
    pub concurrency: usize,
    /// Measured round trips in all (tickets; the run stops when they are gone).
    pub total: u64,
    /// Time limit of the measured phase.
    pub max_time: Duration,
}

/// Runs `op` with `bounds.concurrency` tasks. Each task first does one
/// unmeasured round trip (connections, instance slots and caches warm up),
/// all tasks wait for each other, then they take tickets until `total` round
/// trips have been started or `max_time` is over. `op` gets a number unique
/// within the run.
pub async fn drive<F, Fut, E>(bounds: Bounds, op: F) -> RunResult
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let op = Arc::new(op);
    let c = bounds.concurrency.max(1);
    let ids = Arc::new(AtomicU64::new(0));
    let tickets = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(tokio::sync::Barrier::new(c + 1));
    let start_at: Arc<std::sync::OnceLock<Instant>> = Arc::new(std::sync::OnceLock::new());
    let mut tasks = Vec::with_capacity(c);
    for _ in 0..c {
        let op = op.clone();
        let ids = ids.clone();
        let tickets = tickets.clone();
        let barrier = barrier.clone();
        let start_at = start_at.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut errors = 0u64;
            let mut first_error = None;
            let warm = op(ids.fetch_add(1, Ordering::Relaxed)).await;
            if let Err(e) = warm {
                errors += 1;
                first_error = Some(format!("warm-up: {e}"));
            }
            barrier.wait().await;
            let start = *start_at.get_or_init(Instant::now);
            let deadline = start + bounds.max_time;
            let mut last = start;
            while tickets.fetch_add(1, Ordering::Relaxed) < bounds.total
                && Instant::now() < deadline
            {
                let t0 = Instant::now();
                let r = op(ids.fetch_add(1, Ordering::Relaxed)).await;
                last = Instant::now();
                match r {
                    Ok(()) => lat.push((last - t0).as_nanos() as f64),
                    Err(e) => {
                        errors += 1;
                        first_error.get_or_insert_with(|| e.to_string());
                    }
                }
            }
            (lat, errors, first_error, last)
        }));
    }
    barrier.wait().await;
    let start = *start_at.get_or_init(Instant::now);
    let mut all = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    let mut end = start;
    for t in tasks {
        match t.await {
            Ok((lat, e, fe, last)) => {
                all.extend(lat);
                errors += e;
                if first_error.is_none() {
                    first_error = fe;
                }
                end = end.max(last);
            }
            Err(e) => {
                errors += 1;
                first_error.get_or_insert_with(|| format!("task failed: {e}"));
            }
        }
    }
    let ok = all.len() as u64;
    RunResult {
        concurrency: c,
        latency: summarize(&mut all),
        ok,
        errors,
        first_error,
        wall: end - start,
        client_cpu_per_op: None,
        server_cpu_per_op: None,
    }
}
