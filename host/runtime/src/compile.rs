//! Where components are compiled: off the reload path, one thread per
//! component (at most [`COMPILE_SLOTS`] at once), each within a time budget.
//!
//! Compiling is the one step of loading whose cost the plugin's author
//! controls (a 1 MB component can be built to take 87 s), and
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

/// At most this many compiles run at once: enough that a few components
/// built to be slow (each holding its slot for at most the budget) leave
/// room for the others, few enough that a cold start of a large directory
/// does not start a compile per plugin at once (each compile already uses
/// every core through wasmtime's parallel compilation).
pub const COMPILE_SLOTS: usize = 8;

/// How long one component may take to compile by default.
pub const DEFAULT_COMPILE_BUDGET: Duration = Duration::from_secs(60);

/// What became of a compile, as seen by one waiter.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Compiled.
    Ready(Component),
    /// Still compiling (or waiting for a compile slot) when the waiter's
    /// deadline came.
    Pending {
        /// How long since it was asked for.
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
    /// Waiting for a compile slot.
    Queued,
    /// Compiling since then.
    Running(Instant),
    Done(Result<Component, String>),
    OverBudget,
}

/// One compile, shared by everyone waiting for it.
pub(crate) struct Job {
    asked: Instant,
    state: Mutex<State>,
    done: Condvar,
}

impl Job {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// How many compiles run at once ([`COMPILE_SLOTS`]); the rest wait their
/// turn. A compile past its budget gives its slot back at once, although
/// its thread runs on until wasmtime returns.
struct Slots {
    free: Mutex<usize>,
    freed: Condvar,
}

impl Slots {
    fn take(&self) {
        let mut free = self.free.lock().unwrap_or_else(|p| p.into_inner());
        while *free == 0 {
            free = self.freed.wait(free).unwrap_or_else(|p| p.into_inner());
        }
        *free -= 1;
    }

    fn give(&self) {
        *self.free.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        self.freed.notify_one();
    }
}

/// The compiles of one host, by engine (stack size) and component digest.
pub(crate) struct Compiler {
    budget: Duration,
    /// Where components refused for their budget are remembered across
    /// hosts (`<cache dir>/refused/<sha256>`): the compile that ran over
    /// goes on in the background and may land in the compile cache, which
    /// must not let a later host load what this one refused.
    refused_dir: Option<std::path::PathBuf>,
    jobs: Mutex<HashMap<(usize, String), Arc<Job>>>,
    slots: Arc<Slots>,
    /// Counts finished compiles, so a watcher can reload when one ends.
    finished: tokio::sync::watch::Sender<u64>,
}

impl Compiler {
    pub(crate) fn new(budget: Duration, cache_dir: Option<&std::path::Path>) -> Self {
        // At most one compile per core (and never more than COMPILE_SLOTS):
        // every compile holds its own memory, and more at once than cores
        // only adds memory, not speed.
        let slots = std::thread::available_parallelism()
            .map_or(2, std::num::NonZeroUsize::get)
            .clamp(1, COMPILE_SLOTS);
        Self {
            budget,
            refused_dir: cache_dir.map(|d| d.join("refused")),
            jobs: Mutex::new(HashMap::new()),
            slots: Arc::new(Slots {
                free: Mutex::new(slots),
                freed: Condvar::new(),
            }),
            finished: tokio::sync::watch::channel(0).0,
        }
    }

    /// Tells when a compile ends or runs out of budget (the value counts them).
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.finished.subscribe()
    }

    /// Starts compiling `bytes` (whose sha256 is `digest`) for `engine`
    /// unless that is already under way or done; returns at once. A
    /// supervisor thread takes a compile slot, starts the compile on a
    /// thread of its own and gives the slot back when it ends or its
    /// budget runs out, whichever comes first.
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
        let refused_mark = self.refused_dir.as_ref().map(|d| d.join(digest));
        let was_refused = refused_mark.as_ref().is_some_and(|m| m.is_file());
        let job = Arc::new(Job {
            asked: Instant::now(),
            state: Mutex::new(if was_refused {
                State::OverBudget
            } else {
                State::Queued
            }),
            done: Condvar::new(),
        });
        jobs.insert(key, job.clone());
        if was_refused {
            // Refused by an earlier host: not compiled again, nor loaded
            // from a cache that compile may have filled meanwhile.
            return job;
        }
        let engine = engine.clone();
        let supervised = job.clone();
        let finished = self.finished.clone();
        let slots = self.slots.clone();
        let budget = self.budget;
        let spawned = std::thread::Builder::new()
            .name("wasmprov-compile-supervisor".into())
            .spawn(move || {
                slots.take();
                let started = Instant::now();
                *supervised.lock() = State::Running(started);
                let worker = supervised.clone();
                let spawned = std::thread::Builder::new()
                    .name("wasmprov-compile".into())
                    .spawn(move || {
                        let result = Component::new(&engine, &bytes).map_err(|e| format!("{e:#}"));
                        let mut state = worker.lock();
                        if matches!(*state, State::Running(_)) {
                            *state = State::Done(result);
                        }
                        drop(state);
                        worker.done.notify_all();
                    });
                let mut state = supervised.lock();
                if let Err(e) = spawned {
                    *state = State::Done(Err(format!("starting a compile thread: {e}")));
                }
                while matches!(*state, State::Running(_)) {
                    let left = (started + budget).saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        *state = State::OverBudget;
                        break;
                    }
                    state = supervised
                        .done
                        .wait_timeout(state, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                // Over the budget (seen here or by a waiter): remembered.
                if matches!(*state, State::OverBudget)
                    && let Some(mark) = &refused_mark
                {
                    remember_refused(mark, budget);
                }
                drop(state);
                supervised.done.notify_all();
                slots.give();
                finished.send_modify(|n| *n += 1);
            });
        if let Err(e) = spawned {
            *job.lock() = State::Done(Err(format!("starting a compile thread: {e}")));
        }
        job
    }

    /// Waits for a compile until it ends, its budget runs out, or `until`.
    pub(crate) fn wait(&self, job: &Job, until: Instant) -> Outcome {
        let mut state = job.lock();
        loop {
            let over = match &*state {
                State::Done(Ok(c)) => return Outcome::Ready(c.clone()),
                State::Done(Err(e)) => return Outcome::Failed(e.clone()),
                State::OverBudget => {
                    return Outcome::OverBudget {
                        budget: self.budget,
                    };
                }
                State::Running(started) => Some(*started + self.budget),
                State::Queued => None,
            };
            let now = Instant::now();
            if over.is_some_and(|o| now >= o) {
                *state = State::OverBudget;
                return Outcome::OverBudget {
                    budget: self.budget,
                };
            }
            if now >= until {
                return Outcome::Pending {
                    running: job.asked.elapsed(),
                };
            }
            let wake = over.map_or(until, |o| o.min(until)) - now;
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

/// Writes the mark of a component refused for its budget.
fn remember_refused(mark: &std::path::Path, budget: Duration) {
    let written = mark
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            std::fs::write(
                mark,
                format!(
                    "refused: its compile ran past the budget of {} s\n",
                    budget.as_secs_f64()
                ),
            )
        });
    if let Err(e) = written {
        tracing::warn!(mark = %mark.display(), "a refused component could not be remembered: {e}");
    }
}
