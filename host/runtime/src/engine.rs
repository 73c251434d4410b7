//! The WebAssembly engine shared by every plugin of a host: compiled code
//! cache, pooling allocator, and the epoch ticker that bounds CPU time.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch advances. CPU limits are counted in these ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Engine-wide settings.
#[derive(Clone, Debug)]
pub struct EngineSettings {
    /// Directory of the on-disk compile cache; `None` disables it.
    pub cache_dir: Option<PathBuf>,
    /// Plugin instances alive at once across all plugins (pool size).
    pub max_instances: u32,
    /// Largest linear memory any instance may have, in bytes; each plugin's
    /// manifest limit must be at most this.
    pub max_memory_bytes: u64,
    /// How many `price_hint` calls one instance may answer. 1 (the default)
    /// gives every call a fresh instance, like every other call. More lets a
    /// plugin keep a few warm instances for price hints only: such a call
    /// can do no I/O and sees only a shape, so what an instance keeps from
    /// one hint to the next stays inside the plugin. An instance that traps,
    /// runs out of time, grows its memory or reaches this count is dropped.
    pub price_hint_reuse: u32,
    /// Largest component file read from the plugin directory, in bytes
    /// (default 64 MiB, well above any real plugin); a larger file is
    /// refused from its size without being read.
    pub max_component_bytes: u64,
    /// The longest one component may take to compile (default 60 s). A
    /// compile runs on its own thread, off the reload path; one that runs
    /// longer is refused ([`crate::LoadError::CompileBudget`]) and not
    /// tried again by this host. The size budget is
    /// [`max_component_bytes`](Self::max_component_bytes).
    pub compile_budget: std::time::Duration,
    /// Write `/tmp/perf-<pid>.map` naming the JIT-compiled guest functions,
    /// so that `perf report` shows a plugin's own functions (for profiling a
    /// plugin; off by default).
    pub perf_map: bool,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            cache_dir: None,
            max_instances: 1000,
            max_memory_bytes: wasmprov_policy::limits::MAX_MEMORY_MIB << 20,
            price_hint_reuse: 1,
            max_component_bytes: crate::files::DEFAULT_MAX_COMPONENT_BYTES,
            compile_budget: crate::compile::DEFAULT_COMPILE_BUDGET,
            perf_map: false,
        }
    }
}

/// A wasmtime engine plus the thread that advances its epoch.
#[derive(Debug)]
pub(crate) struct SharedEngine {
    pub(crate) engine: Engine,
    pub(crate) settings: EngineSettings,
    stop: Arc<AtomicBool>,
    /// A small runtime of the host's own for the background work of
    /// synchronous calls (`price_hint`): wasi-http and wasi clocks spawn
    /// tasks and timers there, so such a call never depends on the caller's
    /// runtime having a free thread.
    side: Option<tokio::runtime::Runtime>,
    /// Instance slots for calls that can do I/O: such a call waits here,
    /// first come first served and within its deadline, rather than fail
    /// when the pool is full. An eighth of the pool stays for price hints.
    pub(crate) io_slots: Arc<tokio::sync::Semaphore>,
}

impl SharedEngine {
    /// An engine whose guests get `stack` bytes of stack (wasmtime sets the
    /// stack per engine, so plugins with different stack limits get
    /// different engines).
    pub(crate) fn new(settings: EngineSettings, stack: usize) -> Result<Arc<Self>> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        config.wasm_component_model(true);
        config.max_wasm_stack(stack);
        // Fibers need room for the guest stack plus host frames.
        config.async_stack_size(stack + (1 << 20));
        config.memory_init_cow(true);
        if settings.perf_map {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }

        let mut pool = PoolingAllocationConfig::new();
        pool.total_component_instances(settings.max_instances);
        // A Rust component built for wasip2 has a handful of core instances
        // (the program plus adapter shims) and one or two memories.
        pool.max_core_instances_per_component(16);
        pool.total_core_instances(settings.max_instances * 8);
        pool.max_memories_per_component(4);
        pool.total_memories(settings.max_instances * 2);
        pool.max_tables_per_component(8);
        pool.total_tables(settings.max_instances * 4);
        pool.total_stacks(settings.max_instances);
        pool.max_memory_size(usize::try_from(settings.max_memory_bytes).unwrap_or(usize::MAX));
        pool.max_unused_warm_slots(64);
        // A fresh instance per call means a slot is reset per call: reset the
        // pages a call dirtied with memset (found with PAGEMAP_SCAN where the
        // kernel has it) instead of madvise + page faults on the next call,
        // and batch the decommits that remain.
        pool.linear_memory_keep_resident(2 << 20);
        pool.table_keep_resident(64 << 10);
        pool.pagemap_scan(wasmtime::Enabled::Auto);
        pool.decommit_batch_size(16);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));

        if let Some(dir) = &settings.cache_dir {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating compile cache directory {}", dir.display()))?;
            let mut cache = wasmtime::CacheConfig::new();
            cache.with_directory(dir);
            config.cache(Some(wasmtime::Cache::new(cache).map_err(|e| {
                anyhow::anyhow!("setting up the compile cache: {e:#}")
            })?));
        }
        let engine =
            Engine::new(&config).map_err(|e| anyhow::anyhow!("creating the wasm engine: {e:#}"))?;

        let stop = Arc::new(AtomicBool::new(false));
        let ticker_engine = engine.weak();
        let ticker_stop = stop.clone();
        std::thread::Builder::new()
            .name("wasmprov-epoch".into())
            .spawn(move || {
                while !ticker_stop.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    match ticker_engine.upgrade() {
                        Some(engine) => engine.increment_epoch(),
                        None => break,
                    }
                }
            })
            .context("starting the epoch ticker")?;
        let side = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("wasmprov-side")
            .enable_all()
            .build()
            .context("starting the host's side runtime")?;
        let io = settings.max_instances - settings.max_instances / 8;
        Ok(Arc::new(Self {
            engine,
            io_slots: Arc::new(tokio::sync::Semaphore::new(io.max(1) as usize)),
            settings,
            stop,
            side: Some(side),
        }))
    }

    /// Handle of the side runtime.
    pub(crate) fn side_handle(&self) -> Option<tokio::runtime::Handle> {
        self.side.as_ref().map(|rt| rt.handle().clone())
    }
}

impl Drop for SharedEngine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Dropping a runtime may not block inside another runtime.
        if let Some(rt) = self.side.take() {
            rt.shutdown_background();
        }
    }
}
