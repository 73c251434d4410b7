//! `wasmprov test`: the conformance suite against a plugin of the directory.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use wasmprov_testkit::{Fake, FaultSpec, Suite, Unavailable};

use crate::exit::Reported;

/// What `wasmprov test` was asked.
#[derive(Debug)]
pub struct TestArgs {
    pub plugin_dir: PathBuf,
    /// A plugin of the directory; with `component`, the manifest's name
    /// must be this when given.
    pub plugin: Option<String>,
    /// A component file and its manifest, tested instead of the directory's.
    pub component: Option<(PathBuf, PathBuf)>,
    pub owner: Option<String>,
    pub fake: Option<String>,
    pub fake_url: Option<String>,
    pub fake_command: Option<String>,
    pub faults: Option<String>,
    pub record: Option<PathBuf>,
    pub replay: Option<PathBuf>,
    pub live: bool,
    pub no_cache: bool,
    pub json: bool,
}

/// Runs the suite and prints its report; a failed rule is an error.
pub async fn run(args: TestArgs) -> Result<()> {
    let mut suite = match (&args.component, &args.plugin) {
        (Some((wasm, manifest)), plugin) => {
            let text = std::fs::read_to_string(manifest)
                .with_context(|| format!("reading the manifest {}", manifest.display()))?;
            let checked = wasmprov_host::policy::manifest::Manifest::parse(
                &manifest.display().to_string(),
                &text,
            )?;
            let name = checked.name.as_str();
            if let Some(plugin) = plugin
                && plugin != name
            {
                anyhow::bail!(
                    "{} names plugin {name:?}, not {plugin:?}",
                    manifest.display()
                );
            }
            if !wasm.is_file() {
                anyhow::bail!(
                    "no component file {}; build it first (cargo build --release --target wasm32-wasip2)",
                    wasm.display()
                );
            }
            Suite::from_component(name, wasm, &text)
        }
        (None, Some(plugin)) => Suite::from_dir(&args.plugin_dir, plugin),
        (None, None) => anyhow::bail!("name a plugin, or give --component and --manifest"),
    };
    if let Some(name) = &args.fake {
        suite = suite.fake(Fake::parse(name)?);
    }
    if let Some(url) = &args.fake_url {
        suite = suite.fake_url(url);
    }
    if let Some(command) = &args.fake_command {
        suite = suite.fake_command(command);
    }
    if let Some(path) = &args.replay {
        suite = suite.replay(path);
    }
    if args.live {
        suite = suite.live();
    }
    if let Some(path) = &args.record {
        suite = suite.record(path);
    }
    if let Some(spec) = &args.faults {
        suite = suite.faults(FaultSpec::parse(spec)?);
    }
    if args.live {
        // A live run provisions, then terminates every node of its owner it
        // can list: never under the owner id of a fleet (--owner and
        // WASMPROV_OWNER are not used), always under a fresh one of its own.
        let owner = format!(
            "wasmprov-test-{}",
            &wasmprov_fleet::random_request_id()["auto-".len()..][..12]
        );
        eprintln!(
            "wasmprov test: a live run, under owner id {owner} (its own; only its nodes are terminated)"
        );
        suite = suite.owner(&owner);
    } else if let Some(owner) = &args.owner {
        suite = suite.owner(owner);
    }
    if args.no_cache {
        suite = suite.cache_dir(None);
    }
    let report = match suite.run().await {
        Ok(report) => report,
        Err(e) if e.downcast_ref::<Unavailable>().is_some() => {
            return Err(anyhow::anyhow!(
                "cannot run here: {e:#}; the suite did not run"
            ));
        }
        Err(e) => return Err(e),
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{}", crate::output::block(&report.to_string()));
    }
    if report.passed() {
        Ok(())
    } else {
        let rules: Vec<&str> = report.failures().map(|r| r.rule).collect();
        Err(Reported(format!(
            "plugin {} failed {} rule(s): {}",
            report.plugin,
            rules.len(),
            rules.join(", ")
        ))
        .into())
    }
}
