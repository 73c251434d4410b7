//! One lock per key, held across `await`s: inside one process, the calls
//! that share a key run one after the other, first come first served.
//! Entries exist only while someone holds or waits for one.
//!
//! The host serializes the calls that change one node (set-labels, and the
//! networking calls that change it) per plugin and provider id with it. (The
//! fleet's request-id locks are the same shape; the fleet does not depend
//! on this crate's wasmtime side, so it keeps its own.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

type Entry = Arc<tokio::sync::Mutex<()>>;

/// The locks, by key.
#[derive(Debug, Default)]
pub(crate) struct KeyedLocks {
    map: Mutex<HashMap<String, Entry>>,
}

/// A held lock; released (and its entry dropped when no one
/// else waits) on drop.
#[derive(Debug)]
pub(crate) struct KeyedGuard<'a> {
    locks: &'a KeyedLocks,
    id: String,
    guard: Option<OwnedMutexGuard<()>>,
}

impl KeyedLocks {
    fn entry(&self, id: &str) -> Entry {
        let mut map = self
            .map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.entry(id.to_string()).or_default().clone()
    }

    /// Waits for the lock of `id`.
    pub(crate) async fn lock(&self, id: &str) -> KeyedGuard<'_> {
        let entry = self.entry(id);
        let guard = entry.lock_owned().await;
        KeyedGuard {
            locks: self,
            id: id.to_string(),
            guard: Some(guard),
        }
    }

    /// The lock of `id` if no one holds it now.
    #[cfg(test)]
    pub(crate) fn try_lock(&self, id: &str) -> Option<KeyedGuard<'_>> {
        let entry = self.entry(id);
        let guard = entry.try_lock_owned().ok();
        let held = KeyedGuard {
            locks: self,
            id: id.to_string(),
            guard,
        };
        // Dropping a guard without a lock still tidies the entry up.
        held.guard.is_some().then_some(held)
    }

    /// Whether someone holds or waits for the lock of `id` now.
    #[cfg(test)]
    pub(crate) fn is_busy(&self, id: &str) -> bool {
        let map = self
            .map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.contains_key(id)
    }
}

impl Drop for KeyedGuard<'_> {
    fn drop(&mut self) {
        let mut map = self
            .locks
            .map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        drop(self.guard.take());
        // Every clone of an entry is taken under the map's lock, so a count
        // of one (the map's own) means no one holds or waits for it.
        if map.get(&self.id).is_some_and(|e| Arc::strong_count(e) == 1) {
            map.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn one_holder_at_a_time_and_entries_go_away() {
        let locks = KeyedLocks::default();
        let a = locks.lock("a").await;
        assert!(locks.try_lock("a").is_none());
        assert!(locks.is_busy("a"));
        let b = locks.try_lock("b").expect("another id is free");
        drop(a);
        drop(b);
        assert!(!locks.is_busy("a") && !locks.is_busy("b"));
        assert!(locks.map.lock().unwrap().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiters_run_in_turn() {
        let locks = Arc::new(KeyedLocks::default());
        let inside = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..16 {
            let (locks, inside) = (locks.clone(), inside.clone());
            tasks.push(tokio::spawn(async move {
                let _g = locks.lock("same").await;
                let n = inside.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                assert_eq!(n, 0, "two holders at once");
                tokio::task::yield_now().await;
                inside.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert!(!locks.is_busy("same"));
    }
}
