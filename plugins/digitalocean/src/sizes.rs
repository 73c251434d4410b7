//! DigitalOcean Droplet sizes and their list prices (USD per hour, as the
//! `/v2/sizes` endpoint gives `price_hourly`), for price hints without I/O.
//! Every size is x86-64; the disk is the size's own SSD. Regions: the
//! general sizes are sold in every region, GPU sizes only where listed.
//! `offerings` reads the live list from the API instead.

use wasmprov_guest::Arch;
use wasmprov_guest::shape::CatalogueEntry;

/// One Droplet size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Size {
    /// The size slug, such as `s-2vcpu-4gb`.
    pub slug: &'static str,
    /// vCPUs.
    pub vcpus: u32,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// Disk in GiB.
    pub disk_gib: u64,
    /// USD per hour.
    pub price_hourly: f64,
    /// GPUs and their model (`nvidia-h100`).
    pub gpus: (u32, Option<&'static str>),
    /// Regions it is sold in; empty is every region.
    pub regions: &'static [&'static str],
}

const GPU_REGIONS: &[&str] = &["tor1", "nyc2", "atl1"];

const fn size(
    slug: &'static str,
    vcpus: u32,
    memory_gib: u64,
    disk_gib: u64,
    price_hourly: f64,
) -> Size {
    Size {
        slug,
        vcpus,
        memory_mib: memory_gib * 1024,
        disk_gib,
        price_hourly,
        gpus: (0, None),
        regions: &[],
    }
}

/// The sizes, as DigitalOcean lists them.
pub const SIZES: &[Size] = &[
    Size {
        memory_mib: 512,
        ..size("s-1vcpu-512mb-10gb", 1, 0, 10, 0.00595)
    },
    size("s-1vcpu-1gb", 1, 1, 25, 0.00893),
    size("s-1vcpu-2gb", 1, 2, 50, 0.01786),
    size("s-2vcpu-2gb", 2, 2, 60, 0.02679),
    size("s-2vcpu-4gb", 2, 4, 80, 0.03571),
    size("s-4vcpu-8gb", 4, 8, 160, 0.07143),
    size("s-8vcpu-16gb", 8, 16, 320, 0.14286),
    size("c-2", 2, 4, 25, 0.0625),
    size("c-4", 4, 8, 50, 0.125),
    size("c-8", 8, 16, 100, 0.25),
    size("c-16", 16, 32, 200, 0.5),
    size("c-32", 32, 64, 400, 1.0),
    size("g-2vcpu-8gb", 2, 8, 25, 0.09375),
    size("m-2vcpu-16gb", 2, 16, 50, 0.125),
    size("m-8vcpu-64gb", 8, 64, 200, 0.5),
    Size {
        gpus: (1, Some("nvidia-h100")),
        regions: GPU_REGIONS,
        ..size("gpu-h100x1-80gb", 20, 240, 720, 3.39)
    },
    Size {
        gpus: (8, Some("nvidia-h100")),
        regions: GPU_REGIONS,
        ..size("gpu-h100x8-640gb", 160, 1920, 2046, 23.92)
    },
];

impl CatalogueEntry for Size {
    fn name(&self) -> &str {
        self.slug
    }
    fn cpu(&self) -> f64 {
        f64::from(self.vcpus)
    }
    fn memory_bytes(&self) -> u64 {
        self.memory_mib << 20
    }
    fn gpu(&self) -> u32 {
        self.gpus.0
    }
    fn gpu_vendor(&self) -> Option<&str> {
        self.gpus.1.map(|_| "nvidia")
    }
    fn gpu_model(&self) -> Option<&str> {
        self.gpus.1
    }
    fn arch(&self) -> Option<Arch> {
        Some(Arch::X86_64)
    }
    fn disk_bytes(&self) -> Option<u64> {
        Some(self.disk_gib << 30)
    }
    fn price_in(&self, zone: Option<&str>) -> Option<f64> {
        match zone {
            Some(z) if !self.regions.is_empty() && !self.regions.contains(&z) => None,
            _ => Some(self.price_hourly),
        }
    }
    fn zones(&self) -> Vec<String> {
        self.regions.iter().map(|r| (*r).to_string()).collect()
    }
}
