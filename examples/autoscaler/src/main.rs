//! An autoscaler embedding wasmprov: it keeps a capacity group at the size
//! its demand asks for, across two clouds, always growing on the one that
//! prices the group's shape lowest, and keeps going while one of its
//! plugins is replaced under it.
//!
//! Everything runs on this machine: two fake Hetzner Cloud APIs on
//! 127.0.0.1 (one in Falkenstein, one in Ashburn, which is dearer), the
//! bundled Hetzner plugin loaded twice from a plugin directory, a journal
//! in a temporary state directory.
//!
//! ```sh
//! cargo run -p wasmprov-example-autoscaler
//! ```
//!
//! Each tick it reconciles (settling anything a crash left half done and
//! terminating leaked nodes), then scales the group to the tick's demand.
//! Half way, a new version of the `hetzner-eu` plugin (the same component,
//! with a much dearer exchange rate in its manifest) is copied into the plugin
//! directory; the host's watcher swaps it in, and from then on the group
//! grows in Ashburn and shrinks in Falkenstein. At the end it checks the
//! clouds themselves: every member is there once, nothing else is.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use wasmprov_api::NodeShape;
use wasmprov_fake::{HetznerFake, HetznerFakeOptions};
use wasmprov_fleet::{CapacityGroup, Fleet, LeakPolicy, REQUEST_LABEL, ReconcilePolicy};
use wasmprov_host::HostBuilder;

mod component {
    include!(concat!(env!("OUT_DIR"), "/hetzner.rs"));
}

/// Demand per tick; the plugin is replaced after `REPLACE_AFTER` ticks.
const DEMAND: &[u32] = &[2, 4, 6, 6, 3, 5, 7, 5, 5];
const REPLACE_AFTER: usize = 4;
/// Servers the Falkenstein project may have (its quota).
const EU_QUOTA: usize = 4;

fn manifest(name: &str, fake: &HetznerFake, location: &str, eur_usd: f64) -> String {
    let grant = fake.url().trim_end_matches("/v1").to_string();
    format!(
        "name = \"{name}\"\ncomponent = \"{name}.wasm\"\n\n[config]\nendpoint = \"{}\"\nlocation = \"{location}\"\neur_usd = \"{eur_usd}\"\n\n[secrets]\ntoken = {{ env = \"HCLOUD_TOKEN\" }}\n\n[http]\nallow = [\"{grant}\"]\n",
        fake.url()
    )
}

/// Writes a plugin as an operator would: component and manifest written
/// aside, then renamed into place.
fn install(dir: &Path, name: &str, manifest: &str) -> Result<()> {
    let stage = |file: &str, bytes: &[u8]| -> Result<()> {
        let tmp = dir.join(format!(".{file}.new"));
        std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, dir.join(file)).context("renaming into place")
    };
    stage(&format!("{name}.wasm"), component::HETZNER)?;
    stage(&format!("{name}.toml"), manifest.as_bytes())
}

#[tokio::main]
async fn main() -> Result<()> {
    let interval = std::env::args()
        .skip_while(|a| a != "--interval-ms")
        .nth(1)
        .map_or(Ok(300), |v| v.parse::<u64>())
        .context("--interval-ms takes milliseconds")?;
    let interval = Duration::from_millis(interval);

    let eu = HetznerFake::start(
        "127.0.0.1:0".parse()?,
        HetznerFakeOptions {
            max_servers: EU_QUOTA,
            boot_delay_polls: 0,
            ..HetznerFakeOptions::default()
        },
    )
    .await?;
    let us = HetznerFake::start(
        "127.0.0.1:0".parse()?,
        HetznerFakeOptions {
            boot_delay_polls: 0,
            ..HetznerFakeOptions::default()
        },
    )
    .await?;
    let token = eu.token().to_string();

    let plugins = tempfile::tempdir()?;
    let state = tempfile::tempdir()?;
    install(
        plugins.path(),
        "hetzner-eu",
        &manifest("hetzner-eu", &eu, "fsn1", 1.08),
    )?;
    install(
        plugins.path(),
        "hetzner-us",
        &manifest("hetzner-us", &us, "ash", 1.08),
    )?;

    let host = Arc::new(
        HostBuilder::new(plugins.path())
            .owner_id("example-autoscaler")
            .work_dir(state.path().join("work"))
            .secret_source(move |name| (name == "HCLOUD_TOKEN").then(|| token.clone()))
            .build()
            .await?,
    );
    if let Some(e) = host.errors().first() {
        bail!("a plugin did not load: {e}");
    }
    let _watcher = host.watch(Duration::from_millis(100))?;
    let mut reloads = host.subscribe_reloads();
    // Ashburn costs more than twice Falkenstein here: a ceiling of ×3 lets
    // the group spill over there when Falkenstein's quota is used up (the
    // default, ×2, would keep it short instead).
    let fleet =
        Fleet::open(host.clone(), state.path().join("journal.redb"))?.fallback_limits(5, 3.0)?;

    let group = CapacityGroup::new("workers", NodeShape::new(2.0, 4 << 30), 1, 8);
    println!(
        "group {:?}: {} vCPU, {} GiB each, between {} and {} members, on {}",
        group.name,
        group.shape.cpu,
        group.shape.memory_bytes >> 30,
        group.min,
        group.max,
        host.plugin_names().join(" and ")
    );
    print_prices(&fleet, &group);

    let policy = ReconcilePolicy {
        leaks: LeakPolicy::Terminate,
        ..ReconcilePolicy::default()
    };
    let mut replacing = None;
    for (tick, &desired) in DEMAND.iter().enumerate() {
        if tick == REPLACE_AFTER {
            // The operator drops a new version in while the loop runs.
            println!(
                "\n** replacing plugin hetzner-eu with a dearer version (exchange rate 1.08 -> 3.00) while the loop runs"
            );
            let dir = plugins.path().to_path_buf();
            let text = manifest("hetzner-eu", &eu, "fsn1", 3.00);
            replacing = Some(tokio::task::spawn_blocking(move || {
                install(&dir, "hetzner-eu", &text)
            }));
        }
        let reconciled = fleet.reconcile(&policy).await?;
        if !reconciled.is_clean() {
            println!("   reconcile: {reconciled}");
        }
        let report = fleet.scale(&group, desired).await?;
        while let Ok(r) = reloads.try_recv() {
            if r.changed() || !r.failed.is_empty() {
                println!("   plugins reloaded: {r}");
                print_prices(&fleet, &group);
            }
        }
        let members = fleet.members(&group.name)?;
        let mut per_plugin: BTreeMap<String, u32> =
            host.plugin_names().into_iter().map(|n| (n, 0)).collect();
        for m in &members {
            *per_plugin.entry(m.plugin.clone()).or_default() += 1;
        }
        let spread: Vec<String> = per_plugin.iter().map(|(p, n)| format!("{p} {n}")).collect();
        let mut changes = String::new();
        if !report.added.is_empty() {
            changes.push_str(&format!(" +{}", report.added.len()));
        }
        if !report.removed.is_empty() {
            changes.push_str(&format!(" -{}", report.removed.len()));
        }
        println!(
            "tick {:>2}: demand {desired} -> {} members [{}]{}{}",
            tick + 1,
            report.after,
            spread.join(", "),
            changes,
            if report.converged() {
                ""
            } else {
                "  (short of target)"
            }
        );
        for e in &report.errors {
            println!("          {e}");
        }
        if let Some(task) = replacing.take_if(|t| t.is_finished()) {
            task.await??;
        }
        tokio::time::sleep(interval).await;
    }

    // Ground truth: ask the clouds, not the plugins.
    let mut on_clouds: Vec<String> = eu
        .servers()
        .into_iter()
        .chain(us.servers())
        .filter_map(|s| s.labels.get(REQUEST_LABEL).cloned())
        .collect();
    on_clouds.sort();
    let mut wanted: Vec<String> = fleet
        .members(&group.name)?
        .into_iter()
        .map(|m| m.request_id)
        .collect();
    wanted.sort();
    let target = group.clamp(*DEMAND.last().unwrap_or(&0));
    let mut unique = on_clouds.clone();
    unique.dedup();
    if on_clouds != wanted
        || u32::try_from(wanted.len())? != target
        || unique.len() != on_clouds.len()
    {
        bail!("not converged: target {target}, journal {wanted:?}, clouds {on_clouds:?}");
    }
    println!(
        "\nconverged: target {target}, {} members in the journal, {} servers on the clouds, no duplicate, no leak",
        wanted.len(),
        on_clouds.len()
    );

    let r = fleet
        .scale(
            &CapacityGroup {
                min: 0,
                ..group.clone()
            },
            0,
        )
        .await?;
    println!("cleaned up: {} servers terminated", r.removed.len());
    Ok(())
}

fn print_prices(fleet: &Fleet, group: &CapacityGroup) {
    let ranking = wasmprov_fleet::rank(fleet.backends().as_ref(), &group.shape);
    let offers: Vec<String> = ranking
        .offers
        .iter()
        .map(|o| {
            format!(
                "{} {} at {:.4} $/h",
                o.plugin, o.hint.instance_type, o.hint.hourly_usd
            )
        })
        .collect();
    println!("   prices, cheapest first: {}", offers.join("; "));
}
