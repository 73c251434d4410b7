//! Stopping without dropping work: once a fleet is closed it takes no new
//! calls, and [`Fleet::drain`](crate::Fleet::drain) waits for the calls in
//! flight up to a deadline. A provision still running at the deadline has
//! its intent marked as cut short, so the next start does not make a node
//! its caller was told nothing about (reconcile confirms it if it exists,
//! and forgets it otherwise).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use serde::Serialize;

/// Counts the calls in flight and refuses new ones once closed.
#[derive(Debug, Default)]
pub(crate) struct CallGate {
    closed: AtomicBool,
    running: AtomicUsize,
    idle: tokio::sync::Notify,
    /// Provisions in flight: request id → generation of their intent.
    provisions: Mutex<HashMap<String, u64>>,
}

/// A call in flight; dropping it ends it.
#[derive(Debug)]
pub(crate) struct CallTicket<'a> {
    gate: &'a CallGate,
    request_id: Option<String>,
}

impl CallGate {
    /// A ticket for a new call, or `None` once closed.
    pub(crate) fn enter(&self) -> Option<CallTicket<'_>> {
        self.running.fetch_add(1, Ordering::SeqCst);
        if self.closed.load(Ordering::SeqCst) {
            self.leave();
            return None;
        }
        Some(CallTicket {
            gate: self,
            request_id: None,
        })
    }

    fn leave(&self) {
        if self.running.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle.notify_waiters();
        }
    }

    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    pub(crate) fn running(&self) -> usize {
        self.running.load(Ordering::SeqCst)
    }

    /// Waits until no call is in flight or `deadline` passed; whether none is.
    pub(crate) async fn wait_idle(&self, deadline: Duration) -> bool {
        let wait = async {
            loop {
                let idle = self.idle.notified();
                if self.running() == 0 {
                    return;
                }
                idle.await;
            }
        };
        tokio::time::timeout(deadline, wait).await.is_ok()
    }

    /// The provisions in flight.
    pub(crate) fn provisions(&self) -> Vec<(String, u64)> {
        self.provisions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|(r, g)| (r.clone(), *g))
            .collect()
    }
}

impl CallTicket<'_> {
    /// Marks this call as the provision of `request_id`, whose intent is at
    /// `generation`.
    pub(crate) fn provisioning(&mut self, request_id: &str, generation: u64) {
        self.gate
            .provisions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(request_id.to_string(), generation);
        self.request_id = Some(request_id.to_string());
    }
}

impl Drop for CallTicket<'_> {
    fn drop(&mut self) {
        if let Some(r) = self.request_id.take() {
            self.gate
                .provisions
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&r);
        }
        self.gate.leave();
    }
}

/// What [`Fleet::drain`](crate::Fleet::drain) saw.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DrainReport {
    /// Whether every call in flight finished before the deadline.
    pub drained: bool,
    /// Calls still running at the deadline.
    pub still_running: usize,
    /// Provisions still running at the deadline whose intents were marked
    /// as cut short: request ids.
    pub cut_short: Vec<String>,
}
