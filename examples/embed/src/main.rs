//! An orchestrator's view of wasmprov: load a plugin directory, then use every
//! plugin through `Arc<dyn CloudProvisioner>`, the same trait a native
//! backend implements, to find the cheapest cloud for a shape.
//!
//! ```sh
//! cargo run -p wasmprov -- bundle --all --out plugins.d
//! cargo run -p wasmprov-example-embed -- plugins.d 4 16
//! ```

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use wasmprov_api::{CloudProvisioner, NodeShape};
use wasmprov_host::HostBuilder;

#[tokio::main]
async fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| "plugins.d".into());
    let cpu: f64 = args.next().map_or(Ok(2.0), |a| a.parse()).context("cpu")?;
    let gib: u64 = args
        .next()
        .map_or(Ok(4), |a| a.parse())
        .context("memory in GiB")?;

    let host = HostBuilder::new(&dir)
        .owner_id("example-embed")
        .build()
        .await?;
    for err in host.errors() {
        eprintln!("not loaded: {err}");
    }
    let backends: Vec<Arc<dyn CloudProvisioner>> = host
        .plugins()
        .into_iter()
        .map(|p| p as Arc<dyn CloudProvisioner>)
        .collect();
    if backends.is_empty() {
        bail!("no plugins in {dir}; write the bundled ones with `wasmprov bundle --out {dir}`");
    }

    let shape = NodeShape::new(cpu, gib << 30);
    let mut offers: Vec<(String, wasmprov_api::PriceHint)> = backends
        .iter()
        .filter_map(|b| b.price_hint(&shape).map(|h| (b.name().to_string(), h)))
        .collect();
    offers.sort_by(|a, b| a.1.hourly_usd.total_cmp(&b.1.hourly_usd));
    println!("{cpu} vCPU / {gib} GiB:");
    for (name, hint) in &offers {
        println!(
            "  {name:<12} {:<10} ${:.4}/hour ({})",
            hint.instance_type, hint.hourly_usd, hint.capacity_type
        );
    }
    match offers.first() {
        Some((name, hint)) => println!("cheapest: {name} {}", hint.instance_type),
        None => println!("no plugin can price this shape"),
    }
    Ok(())
}
