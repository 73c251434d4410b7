//! Where components are compiled: off the reload path, one thread per
//! component, each within a time budget.
//!
//! Compiling is the one step of loading whose cost the plugin's author
//! controls (a 0.9 MB component can be built to take minutes), and
//! wasmtime cannot stop a compile once started. So a reload pass never
//! compiles itself: it starts each compile on its own thread, waits for it
//! at most until the pass's own deadline, and moves on. A compile that is
//! still running then is *pending*: the old version keeps serving, and the
//! host is told when it ends (`Host::watch` reloads then). A compile that
//! runs past its budget is refused and remembered, so the same bytes are
//! never compiled again by this host; its thread finishes in the
//! background and its result is dropped. Components found in the compile
//! cache load at once, so a start from a warm cache never waits for a
//! cold one.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use wasmtime::component::Component;

/// How long one component may take to compile by default.
pub const DEFAULT_COMPILE_BUDGET: Duration = Duration::from_secs(60);

/// What became of a compile, as seen by one waiter.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Compiled.
    Ready(Component),
    /// Still compiling when the waiter's deadline came.
    Pending {
        /// How long it has been compiling.
        running: Duration,
    },
    /// Took longer than the budget: refused.
    OverBudget {
        /// The budget.
        budget: Duration,
    },
    /// Not a valid component.
    Failed(String),
}

enum State {
    Running,
    Done(Result<Component, String>),
    OverBudget,
}

/// One compile, shared by everyone waiting for it.
pub(crate) struct Job {
    started: Instant,
    state: Mutex<State>,
    done: Condvar,
}

/// The compiles of one host, by engine (stack size) and component digest.
pub(crate) struct Compiler {
    budget: Duration,
    jobs: Mutex<HashMap<(usize, String), Arc<Job>>>,
    /// Counts finished compiles, so a watcher can reload when one ends.
    finished: tokio::sync::watch::Sender<u64>,
}

impl Compiler {
    pub(crate) fn new(budget: Duration) -> Self {
        Self {
            budget,
            jobs: Mutex::new(HashMap::new()),
            finished: tokio::sync::watch::channel(0).0,
        }
    }

    /// Tells when a compile ends (the value counts them).
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.finished.subscribe()
    }

    /// Starts compiling `bytes` (whose sha256 is `digest`) for `engine`
    /// unless that is already under way or done; returns at once.
    pub(crate) fn start(
        &self,
        engine: &wasmtime::Engine,
        stack: usize,
        digest: &str,
        bytes: Arc<[u8]>,
    ) -> Arc<Job> {
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        let key = (stack, digest.to_string());
        if let Some(job) = jobs.get(&key) {
            return job.clone();
        }
        let job = Arc::new(Job {
            started: Instant::now(),
            state: Mutex::new(State::Running),
            done: Condvar::new(),
        });
        jobs.insert(key, job.clone());
        let engine = engine.clone();
        let worker = job.clone();
        let finished = self.finished.clone();
        let budget = self.budget;
        let spawned = std::thread::Builder::new()
            .name("wasmprov-compile".into())
            .spawn(move || {
                let result = Component::new(&engine, &bytes).map_err(|e| format!("{e:#}"));
                let mut state = worker.state.lock().unwrap_or_else(|p| p.into_inner());
                *state = if worker.started.elapsed() > budget {
                    State::OverBudget
                } else {
                    State::Done(result)
                };
                drop(state);
                worker.done.notify_all();
                finished.send_modify(|n| *n += 1);
            });
        if let Err(e) = spawned {
            *job.state.lock().unwrap_or_else(|p| p.into_inner()) =
                State::Done(Err(format!("starting a compile thread: {e}")));
        }
        job
    }

    /// Waits for a compile until it ends, its budget runs out, or `until`.
    pub(crate) fn wait(&self, job: &Job, until: Instant) -> Outcome {
        let over = job.started + self.budget;
        let mut state = job.state.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            match &*state {
                State::Done(Ok(c)) => return Outcome::Ready(c.clone()),
                State::Done(Err(e)) => return Outcome::Failed(e.clone()),
                State::OverBudget => {
                    return Outcome::OverBudget {
                        budget: self.budget,
                    };
                }
                State::Running => {}
            }
            let now = Instant::now();
            if now >= over {
                *state = State::OverBudget;
                return Outcome::OverBudget {
                    budget: self.budget,
                };
            }
            if now >= until {
                return Outcome::Pending {
                    running: job.started.elapsed(),
                };
            }
            let wake = over.min(until) - now;
            state = job
                .done
                .wait_timeout(state, wake)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Forgets the compiled code of components now loaded (their plugins
    /// hold it); keeps what is still pending, refused or failed, so
    /// refused bytes are not compiled again.
    pub(crate) fn forget_loaded(&self, loaded: &[String]) {
        let mut jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        jobs.retain(|(_, digest), job| {
            let state = job.state.lock().unwrap_or_else(|p| p.into_inner());
            !(matches!(*state, State::Done(Ok(_))) && loaded.contains(digest))
        });
    }
}
