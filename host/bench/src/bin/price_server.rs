//! `price-server`: the subprocess baseline of the call-overhead benchmark.
//! Reads one JSON `NodeShape` per line on stdin and answers one JSON
//! `PriceHint` (or `null`) per line on stdout, with the same native Hetzner
//! pricing code the plugin runs.

#[path = "../price_loop.rs"]
mod price_loop;

fn main() -> std::io::Result<()> {
    price_loop::serve()
}
