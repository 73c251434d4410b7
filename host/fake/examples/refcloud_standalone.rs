//! Runs the fake reference cloud until Ctrl-C, for poking at it by hand:
//! `cargo run -p wasmprov-fake --example refcloud_standalone [ADDR]`
//! (ADDR defaults to 127.0.0.1:8788 and must be a loopback address).

use wasmprov_fake::refcloud::{RefCloudFakeOptions, run_standalone};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8788".to_string())
        .parse()?;
    run_standalone(addr, RefCloudFakeOptions::default()).await
}
