//! The vocabulary every part of a plugin's call path shares, below the
//! gates that use it: the embedder's hooks and the kind of a call.

use std::sync::Arc;

use crate::intercept::{ExecInterceptor, HttpInterceptor, Observer};
use crate::metrics::Metrics;

/// Whether a call may do I/O. `price-hint` may not: the trait method is
/// synchronous and must not block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CallKind {
    /// A call that may use HTTP and exec as granted.
    Io,
    /// A call that must not do I/O.
    Pure,
}

/// The embedder's interceptors and observer, shared by every plugin of a host.
#[derive(Clone, Default)]
pub(crate) struct Hooks {
    pub(crate) http: Option<Arc<dyn HttpInterceptor>>,
    pub(crate) exec: Option<Arc<dyn ExecInterceptor>>,
    pub(crate) observer: Option<Arc<dyn Observer>>,
    pub(crate) metrics: Arc<Metrics>,
    /// The locks of the calls that change a node, held by the host (not by
    /// a loaded plugin version), so that they outlive a reload: a call
    /// still running in the old version and one starting in the new one
    /// wait for each other. Keyed by plugin name and node
    /// ([`WasmPlugin`](crate::plugin::WasmPlugin)'s `node_turn`).
    pub(crate) changes: Arc<crate::keyed_lock::KeyedLocks>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field("http", &self.http.is_some())
            .field("exec", &self.exec.is_some())
            .field("observer", &self.observer.is_some())
            .finish()
    }
}
