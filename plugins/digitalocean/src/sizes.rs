//! DigitalOcean Droplet sizes and their list prices (USD per hour, as the
//! `/v2/sizes` endpoint gives `price_hourly`), for price hints without I/O:
//! a `const` table of the SDK's catalogue entries. Every size is x86-64 with
//! its own SSD; general sizes are sold in every region, GPU sizes only where
//! listed. `offerings` reads the live list from the API instead.

use wasmprov_guest::{Arch::X86_64, shape::Entry};

/// The sizes, as DigitalOcean lists them (name, vCPUs, MiB, disk GiB, USD/hour).
pub const SIZES: &[Entry] = &[
    Entry::new("s-1vcpu-512mb-10gb", 1, 512, 10, 0.00595).arch(X86_64),
    Entry::new("s-1vcpu-1gb", 1, 1024, 25, 0.00893).arch(X86_64),
    Entry::new("s-1vcpu-2gb", 1, 2048, 50, 0.01786).arch(X86_64),
    Entry::new("s-2vcpu-2gb", 2, 2048, 60, 0.02679).arch(X86_64),
    Entry::new("s-2vcpu-4gb", 2, 4096, 80, 0.03571).arch(X86_64),
    Entry::new("s-4vcpu-8gb", 4, 8192, 160, 0.07143).arch(X86_64),
    Entry::new("s-8vcpu-16gb", 8, 16384, 320, 0.14286).arch(X86_64),
    Entry::new("c-2", 2, 4096, 25, 0.0625).arch(X86_64),
    Entry::new("c-4", 4, 8192, 50, 0.125).arch(X86_64),
    Entry::new("c-8", 8, 16384, 100, 0.25).arch(X86_64),
    Entry::new("c-16", 16, 32768, 200, 0.5).arch(X86_64),
    Entry::new("c-32", 32, 65536, 400, 1.0).arch(X86_64),
    Entry::new("g-2vcpu-8gb", 2, 8192, 25, 0.09375).arch(X86_64),
    Entry::new("m-2vcpu-16gb", 2, 16384, 50, 0.125).arch(X86_64),
    Entry::new("m-8vcpu-64gb", 8, 65536, 200, 0.5).arch(X86_64),
    Entry::new("gpu-h100x1-80gb", 20, 245_760, 720, 3.39)
        .arch(X86_64)
        .gpus(1, "nvidia", "nvidia-h100")
        .zones(&["tor1", "nyc2", "atl1"]),
    Entry::new("gpu-h100x8-640gb", 160, 1_966_080, 2046, 23.92)
        .arch(X86_64)
        .gpus(8, "nvidia", "nvidia-h100")
        .zones(&["tor1", "nyc2", "atl1"]),
];

/// One Droplet size: now the SDK's `const` catalogue entry.
#[deprecated(
    note = "use wasmprov_guest::shape::Entry (slug is `name`, vcpus `cpu`, \
                     price_hourly `hourly_usd`, regions `zones`)"
)]
pub type Size = Entry;
