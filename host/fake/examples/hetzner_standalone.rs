//! Runs the fake Hetzner Cloud API until Ctrl-C, for poking at it by hand:
//! `cargo run -p wasmprov-fake --example hetzner_standalone [ADDR]`
//! (ADDR defaults to 127.0.0.1:8787 and must be a loopback address).

use wasmprov_fake::{HetznerFakeOptions, run_standalone};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8787".to_string())
        .parse()?;
    run_standalone(addr, HetznerFakeOptions::default()).await
}
