//! Watching the plugin directory: every change to it is followed, after a
//! short quiet period, by a [`Host::reload`].

use std::sync::{Arc, Weak};
use std::time::Duration;

use anyhow::{Context, Result};
use notify::Watcher as _;

use crate::host::Host;

/// How long the directory must be quiet before a reload: copying a
/// component in produces a burst of events.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(200);

/// The longest a watcher's reload waits for compiles: a slow compile
/// never holds back the reload of another plugin for longer.
pub const WATCH_COMPILE_WAIT: Duration = Duration::from_secs(1);

/// Keeps a [`Host`] in step with its plugin directory while it lives.
/// Dropping it stops the watching; the host keeps what it has loaded.
pub struct Watcher {
    _watcher: notify::RecommendedWatcher,
    task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher").finish_non_exhaustive()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Host {
    /// Watches the plugin directory and reloads after every change, once
    /// the directory has been quiet for `debounce`. Reports go to
    /// [`subscribe_reloads`](Host::subscribe_reloads) and the log. The
    /// watcher holds the host weakly: dropping the host ends it too.
    ///
    /// Must be called within a Tokio runtime.
    ///
    /// # Errors
    /// When the platform's file watching cannot be set up for the directory.
    pub fn watch(self: &Arc<Self>, debounce: Duration) -> Result<Watcher> {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
        let mut watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
                Ok(e) if e.kind.is_access() => {}
                Ok(_) => {
                    let _ = tx.send(());
                }
                Err(e) => tracing::warn!("watching the plugin directory: {e}"),
            })
            .context("setting up file watching")?;
        watcher
            .watch(self.plugin_dir(), notify::RecursiveMode::NonRecursive)
            .with_context(|| format!("watching {}", self.plugin_dir().display()))?;
        let host: Weak<Host> = Arc::downgrade(self);
        let mut compiled = self.compiles_finished();
        let task = tokio::spawn(async move {
            loop {
                tokio::select! {
                    event = rx.recv() => {
                        if event.is_none() {
                            return;
                        }
                        // Wait for the burst to end.
                        while let Ok(Some(())) = tokio::time::timeout(debounce, rx.recv()).await {}
                    }
                    // A compile that outlasted a pass has ended: load it now.
                    changed = compiled.changed() => {
                        if changed.is_err() {
                            return;
                        }
                    }
                }
                let Some(host) = host.upgrade() else { return };
                // A pass waits briefly for compiles; one still running is
                // picked up by the pass its end triggers.
                let wait = host.compile_wait.min(WATCH_COMPILE_WAIT);
                if let Err(e) = host.reload_within(wait).await {
                    tracing::error!("reloading plugins: {e:#}");
                }
            }
        });
        Ok(Watcher {
            _watcher: watcher,
            task,
        })
    }
}
