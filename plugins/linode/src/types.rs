//! Linode instance types and their list prices (USD per hour, as
//! `/linode/types` gives `price.hourly`), for price hints and offerings
//! without I/O: a `const` table of the SDK's catalogue entries. Every type
//! is x86-64 with its own disk; general types are sold in every core
//! region, GPU types only where listed.

use wasmprov_guest::{Arch::X86_64, shape::Entry};

/// Linode regions the types are sold in.
const REGIONS: &[&str] = &["us-east", "us-central", "eu-west", "ap-south"];

/// An x86-64 type sold in every region: name, vCPUs, MiB, disk GiB, USD/hour.
const fn x86(name: &'static str, cpu: u32, mib: u64, gib: u64, usd: f64) -> Entry {
    Entry::new(name, cpu, mib, gib, usd)
        .arch(X86_64)
        .zones(REGIONS)
}

/// The types.
pub const TYPES: &[Entry] = &[
    x86("g6-nanode-1", 1, 1024, 25, 0.0075),
    x86("g6-standard-1", 1, 2048, 50, 0.018),
    x86("g6-standard-2", 2, 4096, 80, 0.036),
    x86("g6-standard-4", 4, 8192, 160, 0.072),
    x86("g6-standard-6", 6, 16384, 320, 0.144),
    x86("g6-standard-8", 8, 32768, 640, 0.288),
    x86("g6-dedicated-2", 2, 4096, 80, 0.054),
    x86("g6-dedicated-4", 4, 8192, 160, 0.108),
    x86("g6-dedicated-8", 8, 16384, 320, 0.216),
    x86("g7-highmem-1", 2, 24576, 20, 0.09),
    x86("g7-highmem-2", 2, 49152, 40, 0.18),
    x86("g1-gpu-rtx6000-1", 8, 32768, 640, 1.5)
        .gpus(1, "nvidia", "nvidia-rtx6000")
        .zones(&["us-east", "eu-west", "ap-south"]),
    x86("g1-gpu-rtx6000-2", 16, 65536, 1280, 3.0)
        .gpus(2, "nvidia", "nvidia-rtx6000")
        .zones(&["us-east", "eu-west", "ap-south"]),
];
