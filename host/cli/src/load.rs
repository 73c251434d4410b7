//! Loading the plugin directory for a command: the host built from the
//! global flags, one plugin looked up by name, and the state directory.

use std::path::PathBuf;

use anyhow::{Result, bail};
use wasmprov_host::{Host, HostBuilder};

use crate::args::Cli;
use crate::exit;

pub(crate) async fn load(cli: &Cli) -> Result<Host> {
    load_waiting(cli, None, None).await
}

/// [`load`] for a command about the plugin `name`: only its manifest
/// (`NAME.toml`) is read and compiled, so another plugin of the directory
/// (a broken one, or one slow to compile) neither delays nor fails it. A
/// plugin whose manifest has another file name is found by loading them all.
pub(crate) async fn load_named(cli: &Cli, name: &str) -> Result<Host> {
    let host = load_waiting(cli, None, Some(name)).await?;
    if host.plugin(name).is_some() || !host.errors().is_empty() {
        return Ok(host);
    }
    load(cli).await
}

/// [`load`], waiting at most `compile_wait` for plugins to compile (the
/// rest load as their compiles end, under a watcher), and only the plugin
/// `only` when given.
pub(crate) async fn load_waiting(
    cli: &Cli,
    compile_wait: Option<std::time::Duration>,
    only: Option<&str>,
) -> Result<Host> {
    if !cli.plugin_dir.is_dir() {
        bail!(
            "plugin directory {} does not exist; create it, or write the bundled plugins with `wasmprov bundle --out {}`",
            cli.plugin_dir.display(),
            cli.plugin_dir.display()
        );
    }
    let mut builder = HostBuilder::new(&cli.plugin_dir);
    if let Some(owner) = &cli.owner {
        builder = builder.owner_id(owner);
    }
    if cli.no_cache {
        builder = builder.cache_dir(None);
    }
    if let Some(wait) = compile_wait {
        builder = builder.compile_wait(wait);
    }
    if let Some(name) = only {
        builder = builder.only_plugins([name]);
    }
    builder.price_hint_reuse(cli.price_hint_reuse).build().await
}

pub(crate) fn plugin(host: &Host, name: &str) -> Result<std::sync::Arc<wasmprov_host::WasmPlugin>> {
    if let Some(p) = host.wasm_plugin(name) {
        return Ok(p);
    }
    if let Some(err) = host.errors().iter().find(|e| e.to_string().contains(name)) {
        bail!("plugin {name:?} did not load: {err}");
    }
    let known = host.plugin_names();
    Err(exit::UnknownPlugin(format!(
        "no plugin {name:?} in the plugin directory (loaded: {})",
        if known.is_empty() {
            "none".to_string()
        } else {
            known.join(", ")
        }
    ))
    .into())
}

/// The state directory: `--state-dir`, else `./wasmprov-state`.
pub(crate) fn state_dir(cli: &Cli) -> PathBuf {
    cli.state_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from("wasmprov-state"))
}
