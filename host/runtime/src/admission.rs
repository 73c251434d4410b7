//! Admission of calls, per plugin: the one place that decides whether a
//! call that may do I/O starts now, waits to start, or is refused.
//!
//! Limits further in (HTTP requests in flight, instance slots) admit
//! *requests* first come first served across calls: under overload every
//! call's requests queue behind every other call's, and all of them finish
//! late together. Admission works on whole calls instead: at most
//! `max_calls_in_flight` calls of a plugin run at once; the next ones wait
//! in order, before they are instantiated, for at most `call_queue_ms`; a
//! call whose turn cannot come in that time — judged from the rate at
//! which this plugin's calls ended while every place was taken (the last
//! 5 s of the current burst, a full round of ends at least) and how many
//! wait ahead of it, looked at again every 100 ms — is refused as soon as
//! that is known, with `rate_limited` and a retry-after, instead of waiting
//! only to fail. A call with fewer than `max_calls_in_flight` ahead of it
//! is never refused early. The calls admitted run with the host to
//! themselves and finish in time.
//!
//! Only calls that may do I/O are admitted here; a price hint (pure, on the
//! caller's thread, microseconds) never waits.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use wasmprov_api::ProvisionerError;

/// The smallest retry-after given, so a refused caller does not spin.
const MIN_RETRY_AFTER: Duration = Duration::from_millis(100);
/// The largest retry-after given.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);
/// How often a waiting call looks again at whether its turn can come in
/// time.
const RECHECK: Duration = Duration::from_millis(100);
/// Calls that must have ended before the rate they end at is trusted, at
/// least (and at least the limit: a full round).
const MIN_SAMPLES: usize = 8;
/// The most recent ends the rate is measured over.
const WINDOW: usize = 256;
/// How far back an end still counts.
const RECENT: Duration = Duration::from_secs(5);

/// One plugin's admission gate.
#[derive(Debug)]
pub(crate) struct Admission {
    plugin: String,
    running: Arc<Semaphore>,
    limit: usize,
    /// Tickets handed to calls that had to wait, and how many of them have
    /// left the queue (admitted, refused or gone): a waiting call has
    /// about `its ticket - left` calls ahead of it.
    tickets: AtomicU64,
    left: AtomicU64,
    /// How long a call may wait to start.
    queue: Duration,
    /// When the most recent admitted calls ended: the rate at which places
    /// free up.
    ends: Mutex<VecDeque<Instant>>,
}

/// A call's place among the running ones, given back when it is dropped.
#[derive(Debug)]
pub(crate) struct Admitted<'a> {
    gate: &'a Admission,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        // Only ends while every place is taken say how fast places free up
        // under load (the permit is still held here); an end on a gate with
        // room says nothing about a queue.
        if self.gate.running.available_permits() > 0 {
            return;
        }
        let mut ends = self
            .gate
            .ends
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if ends.len() == WINDOW {
            ends.pop_front();
        }
        ends.push_back(Instant::now());
    }
}

impl Admission {
    /// A gate letting `limit` calls of `plugin` run at once, each next one
    /// waiting up to `queue` to start.
    pub(crate) fn new(plugin: &str, limit: usize, queue: Duration) -> Self {
        Self {
            plugin: plugin.to_string(),
            running: Arc::new(Semaphore::new(limit.max(1))),
            limit: limit.max(1),
            tickets: AtomicU64::new(0),
            left: AtomicU64::new(0),
            queue,
            ends: Mutex::new(VecDeque::with_capacity(WINDOW)),
        }
    }

    /// How long a call with `ahead` calls before it in the queue would
    /// wait, from the rate at which calls have been ending (`None` until
    /// enough have ended to tell).
    fn expected_wait(&self, ahead: u64) -> Option<Duration> {
        let mut ends = self
            .ends
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Only recent ends count: a rate measured over a quiet spell (the
        // last burst minutes ago) would make any queue look endless.
        let now = Instant::now();
        let recent = now.checked_sub(RECENT).unwrap_or(now);
        while ends.front().is_some_and(|t| *t < recent) {
            ends.pop_front();
        }
        // A full round of ends at least: the first few of a burst come
        // while everything starts at once, slower than the steady rate.
        if ends.len() < self.limit.clamp(MIN_SAMPLES, WINDOW) {
            return None;
        }
        let first = *ends.front()?;
        // Measured up to now, so a rate that dropped (calls stopped ending)
        // shows at once.
        let span = Instant::now()
            .saturating_duration_since(first)
            .as_secs_f64();
        if span <= 0.0 {
            return None;
        }
        let per_second = (ends.len() - 1) as f64 / span;
        Some(Duration::from_secs_f64(
            (ahead + 1) as f64 / per_second.max(1e-3),
        ))
    }

    /// Admits one call: at once when there is room; else after waiting its
    /// turn (in order) for up to the queue time; else a `rate_limited`
    /// refusal with a retry-after — as soon as the wait is known to run
    /// past the queue time, not only once it has.
    pub(crate) async fn admit(&self) -> Result<Admitted<'_>, ProvisionerError> {
        if let Ok(permit) = self.running.clone().try_acquire_owned() {
            // Room, so no burst is under way: the next one is measured
            // afresh (the rate of a burst of slow calls says nothing about
            // one of fast calls that follows it).
            if self.tickets.load(Ordering::SeqCst) == self.left.load(Ordering::SeqCst) {
                let mut ends = self
                    .ends
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                ends.clear();
            }
            return Ok(self.admitted(permit));
        }
        let ticket = self.tickets.fetch_add(1, Ordering::SeqCst);
        let _leave = Leave(&self.left);
        let since = Instant::now();
        let ahead = || ticket.saturating_sub(self.left.load(Ordering::SeqCst));
        // Kept across the checks: the place in line is this future's.
        let acquire = self.running.clone().acquire_owned();
        tokio::pin!(acquire);
        loop {
            let waited = since.elapsed();
            let left = self.queue.saturating_sub(waited);
            // A call with fewer than a full round ahead of it starts as soon
            // as that many running calls end: never refused early.
            if ahead() >= self.limit as u64
                && let Some(wait) = self.expected_wait(ahead())
                && wait > left
            {
                return Err(self.refusal(wait, ahead()));
            }
            if left.is_zero() {
                let wait = self.expected_wait(ahead()).unwrap_or(self.queue);
                return Err(self.refusal(wait, ahead()));
            }
            tokio::select! {
                biased;
                permit = &mut acquire => match permit {
                    Ok(permit) => return Ok(self.admitted(permit)),
                    // Closed: never (the gate lives as long as the plugin).
                    Err(_) => return Err(self.refusal(self.queue, ahead())),
                },
                () = tokio::time::sleep(RECHECK.min(left)) => {}
            }
        }
    }

    fn admitted(&self, permit: OwnedSemaphorePermit) -> Admitted<'_> {
        Admitted {
            gate: self,
            _permit: permit,
        }
    }

    fn refusal(&self, wait: Duration, ahead: u64) -> ProvisionerError {
        let retry = wait.clamp(MIN_RETRY_AFTER, MAX_RETRY_AFTER);
        tracing::debug!(
            plugin = %self.plugin,
            running = self.limit,
            ahead,
            retry_after_ms = retry.as_millis() as u64,
            "call refused: the plugin is at its call limit"
        );
        ProvisionerError::RateLimited {
            retry_after_ms: Some(u64::try_from(retry.as_millis()).unwrap_or(u64::MAX)),
            message: format!(
                "plugin {} is running its {} calls at once and about {ahead} more wait to start ahead of this one (limits.max_calls_in_flight, limits.call_queue_ms); the call was not started",
                self.plugin, self.limit
            ),
        }
    }
}

/// Counts a waiting call out of the queue when dropped (admitted, refused
/// or cancelled).
struct Leave<'a>(&'a AtomicU64);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` ends under load, `every` apart, the last one now.
    fn history(gate: &Admission, n: usize, every: Duration) {
        let now = Instant::now();
        let mut ends = gate.ends.lock().unwrap();
        for i in (0..n).rev() {
            ends.push_back(now - every * u32::try_from(i).unwrap());
        }
    }

    #[tokio::test]
    async fn calls_past_the_limit_wait_their_turn_then_are_refused_with_a_retry_after() {
        let gate = Arc::new(Admission::new("p", 2, Duration::from_millis(200)));
        let a = gate.admit().await.unwrap();
        let b = gate.admit().await.unwrap();
        // No call finished yet: nothing is known, so the third waits its
        // queue time, then is refused.
        let started = Instant::now();
        let err = gate.admit().await.unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(200));
        assert_eq!(err.kind(), "rate_limited");
        assert!(err.retry_after().unwrap() >= MIN_RETRY_AFTER);
        assert!(err.to_string().contains("not started"), "{err}");
        // A place freed while a call waits goes to it.
        let g = gate.clone();
        let waiter = tokio::spawn(async move { g.admit().await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(50)).await;
        drop(a);
        assert!(waiter.await.unwrap().is_ok());
        drop(b);
        assert_eq!(gate.left.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_wait_known_to_be_too_long_is_refused_at_once() {
        let gate = Arc::new(Admission::new("p", 1, Duration::from_millis(500)));
        let _running = gate.admit().await.unwrap();
        // Under this burst, calls have been ending one per 100 ms, and ten
        // wait ahead: a second or more of waiting, past the 500 ms.
        history(&gate, MIN_SAMPLES + 1, Duration::from_millis(100));
        gate.tickets.fetch_add(10, Ordering::SeqCst);
        let started = Instant::now();
        let err = gate.admit().await.unwrap_err();
        assert!(
            started.elapsed() < Duration::from_millis(400),
            "refused without waiting its 500 ms"
        );
        let retry = err.retry_after().unwrap();
        assert!(retry >= Duration::from_millis(900), "{retry:?}");
    }

    #[tokio::test]
    async fn a_call_less_than_a_round_behind_waits_whatever_the_history() {
        let gate = Arc::new(Admission::new("p", 2, Duration::from_millis(300)));
        let a = gate.admit().await.unwrap();
        let _b = gate.admit().await.unwrap();
        // Slow calls so far: 2.5 ends a second, which would put even
        // the first in line past the 300 ms.
        history(&gate, 12, Duration::from_millis(400));
        let g = gate.clone();
        let waiter = tokio::spawn(async move { g.admit().await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(a);
        assert!(waiter.await.unwrap().is_ok(), "first in line: admitted");
    }

    #[tokio::test]
    async fn a_cancelled_waiter_leaves_the_queue() {
        let gate = Arc::new(Admission::new("p", 1, Duration::from_secs(10)));
        let _running = gate.admit().await.unwrap();
        let g = gate.clone();
        let waiter = tokio::spawn(async move { g.admit().await.map(|_| ()) });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(gate.left.load(Ordering::SeqCst), 0);
        waiter.abort();
        let _ = waiter.await;
        assert_eq!(gate.left.load(Ordering::SeqCst), 1);
    }
}
