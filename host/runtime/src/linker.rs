//! The engines of a host and the one linker per engine: every import a
//! plugin can reach is added here (WASI with nothing granted, wasi-http
//! through the HTTP gate, wasi:config, and the contract's `exec`, `log` and `http`
//! of each version).

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Result;
use wasmtime::component::Linker;

use crate::engine::{EngineSettings, SharedEngine};
use crate::state::CallState;

/// The engines of a host, one per guest stack size in use (wasmtime sets the
/// stack per engine), each with its linker. Most hosts have one.
pub(crate) struct Engines {
    pub(crate) settings: EngineSettings,
    by_stack: std::sync::Mutex<BTreeMap<usize, EngineAndLinker>>,
    /// Compiles, off the reload path (`compile.rs`).
    pub(crate) compiler: crate::compile::Compiler,
}

type EngineAndLinker = (Arc<SharedEngine>, Arc<Linker<CallState>>);

impl Engines {
    pub(crate) fn new(settings: EngineSettings) -> Self {
        Self {
            compiler: crate::compile::Compiler::new(
                settings.compile_budget,
                settings.cache_dir.as_deref(),
            ),
            settings,
            by_stack: std::sync::Mutex::new(BTreeMap::new()),
        }
    }

    /// The engine and linker for guests with `stack` bytes of stack.
    pub(crate) fn get(&self, stack: usize) -> Result<EngineAndLinker> {
        let mut map = self
            .by_stack
            .lock()
            .map_err(|_| anyhow::anyhow!("engine table poisoned"))?;
        if let Some((e, l)) = map.get(&stack) {
            return Ok((e.clone(), l.clone()));
        }
        let engine = SharedEngine::new(self.settings.clone(), stack)?;
        let linker = Arc::new(build_linker(&engine.engine)?);
        map.insert(stack, (engine.clone(), linker.clone()));
        Ok((engine, linker))
    }
}

fn build_linker(engine: &wasmtime::Engine) -> Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    let wrap = |e: wasmtime::Error| anyhow::anyhow!("{e:#}");
    // The WASI interfaces a Rust program needs to start; the context behind
    // them grants nothing (no files, environment, sockets or stdin).
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(wrap)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).map_err(wrap)?;
    wasmtime_wasi_config::add_to_linker(&mut linker, |s: &mut CallState| {
        wasmtime_wasi_config::WasiConfig::new(s.config())
    })
    .map_err(wrap)?;
    // Every contract version's imports: a plugin built for 0.2 or 0.1 links
    // its `exec` and `log` of that version, served by the current ones
    // (`contract::v02`, `contract::v01`).
    use crate::bindings::{v01, v02, v03};
    use wasmtime::component::HasSelf;
    v03::exec::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(wrap)?;
    v03::log::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(wrap)?;
    v03::http::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(wrap)?;
    v02::exec::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(wrap)?;
    v02::log::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(wrap)?;
    v01::exec::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(wrap)?;
    v01::log::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s).map_err(wrap)?;
    Ok(linker)
}
