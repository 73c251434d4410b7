//! The EC2 catalogue the plugin knows without asking EC2: the current
//! instance families' sizes and GPUs, and their on-demand prices per region
//! ([`crate::prices`]), so that `price_hint` answers without any I/O.
//!
//! Sizes follow EC2's naming, checked against `DescribeInstanceTypes`: in
//! the general purpose (`m`), compute (`c`) and memory (`r`) families a
//! `large` has 2 vCPUs and 8, 4 or 16 GiB, a `medium` half of that and an
//! `Nxlarge` 4N vCPUs with memory in the same ratio; families ending in `g`
//! are Graviton (arm64). Burstable (`t3`, `t3a`, `t4g`) and GPU types are
//! listed one by one. Metal sizes are left out.
//!
//! A type with no price for the region is not picked by size there (an
//! explicit request for it is still sent, and EC2 decides); `offerings`
//! lists it anyway, with its price unknown. Regions the table does not
//! price pick by the [`REFERENCE_REGION`]'s prices, but quote none.
//!
//! `offerings` describes types from EC2's own answer (`DescribeInstanceTypes`)
//! and prices them ([`offering`]); `provision` checks an explicit type's
//! architecture and GPU model against that answer too ([`check_described`]).

use std::sync::OnceLock;

use wasmprov_guest::shape::{CatalogueEntry, Criteria, InstanceType, pick_for};
use wasmprov_guest::{CapacityType, Error, NodeShape, Offering, PriceHint, Result};

use crate::prices;
use crate::settings::{Arch, Settings};

/// Where the table's prices come from (also in the README).
pub const PRICE_SOURCE: &str = prices::SOURCE;

/// The region whose prices rank types in regions the table does not price.
pub const REFERENCE_REGION: &str = "us-east-1";

/// Regions the table has prices for.
pub fn priced_regions() -> impl Iterator<Item = &'static str> {
    prices::REGIONS.iter().map(|(r, _)| *r)
}

fn region_prices(region: &str) -> Option<&'static [(&'static str, f64)]> {
    prices::REGIONS
        .iter()
        .find(|(r, _)| *r == region)
        .map(|(_, p)| *p)
}

/// The table's on-demand price of `name` in `region`.
#[must_use]
pub fn price(region: &str, name: &str) -> Option<f64> {
    let table = region_prices(region)?;
    table
        .binary_search_by(|(n, _)| (*n).cmp(name))
        .ok()
        .map(|i| table[i].1)
}

/// One instance type the plugin knows.
#[derive(Clone, Debug, PartialEq)]
pub struct Ec2Type {
    /// EC2's name, e.g. `m6i.large`.
    pub name: String,
    /// vCPUs.
    pub vcpu: u32,
    /// Memory in MiB.
    pub memory_mib: u32,
    /// GPUs.
    pub gpu: u32,
    /// GPU vendor, lowercase (`nvidia`, `amd`).
    pub gpu_vendor: Option<&'static str>,
    /// GPU model, lowercase, vendor first (`nvidia-t4`), as shapes name it.
    pub gpu_model: Option<&'static str>,
    /// CPU architecture.
    pub arch: Arch,
}

impl Ec2Type {
    /// The on-demand price in `region`, when the table has one.
    #[must_use]
    pub fn price_in(&self, region: &str) -> Option<f64> {
        price(region, &self.name)
    }
}

const X86: Arch = Arch::X86_64;
const ARM: Arch = Arch::Arm64;

/// GPU types: name, vCPUs, MiB, GPUs, vendor, model.
const GPUS: &[(&str, u32, u32, u32, &str, &str)] = &[
    ("g4dn.xlarge", 4, 16384, 1, "nvidia", "nvidia-t4"),
    ("g4dn.2xlarge", 8, 32768, 1, "nvidia", "nvidia-t4"),
    ("g4dn.4xlarge", 16, 65536, 1, "nvidia", "nvidia-t4"),
    ("g4dn.8xlarge", 32, 131_072, 1, "nvidia", "nvidia-t4"),
    ("g4dn.12xlarge", 48, 196_608, 4, "nvidia", "nvidia-t4"),
    ("g4dn.16xlarge", 64, 262_144, 1, "nvidia", "nvidia-t4"),
    ("g4ad.xlarge", 4, 16384, 1, "amd", "amd-radeon-pro-v520"),
    ("g4ad.2xlarge", 8, 32768, 1, "amd", "amd-radeon-pro-v520"),
    ("g4ad.4xlarge", 16, 65536, 1, "amd", "amd-radeon-pro-v520"),
    ("g4ad.8xlarge", 32, 131_072, 2, "amd", "amd-radeon-pro-v520"),
    (
        "g4ad.16xlarge",
        64,
        262_144,
        4,
        "amd",
        "amd-radeon-pro-v520",
    ),
    ("g5.xlarge", 4, 16384, 1, "nvidia", "nvidia-a10g"),
    ("g5.2xlarge", 8, 32768, 1, "nvidia", "nvidia-a10g"),
    ("g5.4xlarge", 16, 65536, 1, "nvidia", "nvidia-a10g"),
    ("g5.8xlarge", 32, 131_072, 1, "nvidia", "nvidia-a10g"),
    ("g5.12xlarge", 48, 196_608, 4, "nvidia", "nvidia-a10g"),
    ("g5.16xlarge", 64, 262_144, 1, "nvidia", "nvidia-a10g"),
    ("g5.24xlarge", 96, 393_216, 4, "nvidia", "nvidia-a10g"),
    ("g5.48xlarge", 192, 786_432, 8, "nvidia", "nvidia-a10g"),
    ("g6.xlarge", 4, 16384, 1, "nvidia", "nvidia-l4"),
    ("g6.2xlarge", 8, 32768, 1, "nvidia", "nvidia-l4"),
    ("g6.4xlarge", 16, 65536, 1, "nvidia", "nvidia-l4"),
    ("g6.8xlarge", 32, 131_072, 1, "nvidia", "nvidia-l4"),
    ("g6.12xlarge", 48, 196_608, 4, "nvidia", "nvidia-l4"),
    ("g6.16xlarge", 64, 262_144, 1, "nvidia", "nvidia-l4"),
    ("g6.24xlarge", 96, 393_216, 4, "nvidia", "nvidia-l4"),
    ("g6.48xlarge", 192, 786_432, 8, "nvidia", "nvidia-l4"),
    ("p3.2xlarge", 8, 62464, 1, "nvidia", "nvidia-v100"),
    ("p3.8xlarge", 32, 249_856, 4, "nvidia", "nvidia-v100"),
    ("p3.16xlarge", 64, 499_712, 8, "nvidia", "nvidia-v100"),
    ("p4d.24xlarge", 96, 1_179_648, 8, "nvidia", "nvidia-a100"),
    ("p4de.24xlarge", 96, 1_179_648, 8, "nvidia", "nvidia-a100"),
    ("p5.4xlarge", 16, 262_144, 1, "nvidia", "nvidia-h100"),
    ("p5.48xlarge", 192, 2_097_152, 8, "nvidia", "nvidia-h100"),
];

/// Burstable sizes: size, vCPUs, MiB.
const BURSTABLE: &[(&str, u32, u32)] = &[
    ("nano", 2, 512),
    ("micro", 2, 1024),
    ("small", 2, 2048),
    ("medium", 2, 4096),
    ("large", 2, 8192),
    ("xlarge", 4, 16384),
    ("2xlarge", 8, 32768),
];

/// The size of `name` by EC2's naming rules (see the module's docs).
fn spec(name: &str) -> Option<Ec2Type> {
    if let Some(&(n, vcpu, memory_mib, gpu, vendor, model)) = GPUS.iter().find(|g| g.0 == name) {
        return Some(Ec2Type {
            name: n.to_string(),
            vcpu,
            memory_mib,
            gpu,
            gpu_vendor: Some(vendor),
            gpu_model: Some(model),
            arch: X86,
        });
    }
    let (family, size) = name.split_once('.')?;
    let arch = if family.ends_with('g') { ARM } else { X86 };
    let plain = |vcpu, memory_mib| Ec2Type {
        name: name.to_string(),
        vcpu,
        memory_mib,
        gpu: 0,
        gpu_vendor: None,
        gpu_model: None,
        arch,
    };
    if matches!(family, "t3" | "t3a" | "t4g") {
        let &(_, vcpu, mib) = BURSTABLE.iter().find(|b| b.0 == size)?;
        return Some(plain(vcpu, mib));
    }
    let gib_per_vcpu = match family.chars().next()? {
        'm' => 4,
        'c' => 2,
        'r' => 8,
        _ => return None,
    };
    let vcpu = match size {
        "medium" => 1,
        "large" => 2,
        "xlarge" => 4,
        s => 4 * s.strip_suffix("xlarge")?.parse::<u32>().ok()?,
    };
    Some(plain(vcpu, vcpu * gib_per_vcpu * 1024))
}

/// Every type the table prices somewhere, with its size, by name.
#[must_use]
pub fn types() -> &'static [Ec2Type] {
    static TYPES: OnceLock<Vec<Ec2Type>> = OnceLock::new();
    TYPES.get_or_init(|| {
        let mut names: Vec<&str> = prices::REGIONS
            .iter()
            .flat_map(|(_, p)| p.iter().map(|(n, _)| *n))
            .collect();
        names.sort_unstable();
        names.dedup();
        names.into_iter().filter_map(spec).collect()
    })
}

/// An instance type as `DescribeInstanceTypes` describes it (only the
/// fields used here).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TypeInfo {
    /// `instanceType`, e.g. `g5.xlarge`.
    pub name: String,
    /// `vCpuInfo/defaultVCpus`.
    pub vcpu: u32,
    /// `memoryInfo/sizeInMiB`.
    pub memory_mib: u64,
    /// The first of `processorInfo/supportedArchitectures` this plugin
    /// launches: `x86_64` or `arm64` (`i386` and the Mac ones are skipped).
    pub arch: Option<Arch>,
    /// GPUs: the sum of `gpuInfo/gpus/item/count`.
    pub gpu: u32,
    /// The first GPU's `manufacturer`, lowercase (`nvidia`, `amd`).
    pub gpu_vendor: Option<String>,
    /// The first GPU's model as shapes name it: [`gpu_model`](crate::api::gpu_model) of its
    /// manufacturer and `name` (`nvidia-a10g`).
    pub gpu_model: Option<String>,
    /// `gpuInfo/totalGpuMemoryInMiB`: the memory of all its GPUs.
    pub gpu_memory_mib: Option<u64>,
}

/// The table entry for `name`.
#[must_use]
pub fn find(name: &str) -> Option<&'static Ec2Type> {
    let all = types();
    all.binary_search_by(|t| t.name.as_str().cmp(name))
        .ok()
        .map(|i| &all[i])
}

/// What `provision` and `price_hint` settled on.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// The instance type to launch.
    pub instance_type: String,
    /// Its on-demand price in the configured region, when the table has one.
    pub on_demand_usd: Option<f64>,
    /// Whether the type is in the table.
    pub known: bool,
}

impl Choice {
    /// The price hint for `capacity`: on-demand, or on-demand times
    /// `spot_discount` for spot. `None` when the price is not known.
    #[must_use]
    pub fn hint(&self, capacity: CapacityType, spot_discount: f64) -> Option<PriceHint> {
        let od = self.on_demand_usd?;
        Some(PriceHint {
            hourly_usd: match capacity {
                CapacityType::OnDemand => od,
                CapacityType::Spot => od * spot_discount,
            },
            capacity_type: capacity,
            instance_type: self.instance_type.clone(),
        })
    }
}

/// Whether `instance_types` allows `name`.
#[must_use]
pub fn allowed(settings: &Settings, name: &str) -> bool {
    settings
        .instance_types
        .as_ref()
        .is_none_or(|list| list.iter().any(|n| n == name))
}

/// The architecture types may have: the configured one narrowed by the
/// image's, when known. `None` allows any.
///
/// # Errors
/// [`Error::InvalidConfig`] when the image is of another architecture than
/// the one configured.
pub fn arch_for(settings: &Settings, image: Option<(&str, Arch)>) -> Result<Option<Arch>> {
    match (settings.architecture, image) {
        (Some(a), Some((id, b))) if a != b => Err(Error::InvalidConfig(format!(
            "image {id:?} is {b} but config key \"architecture\" is {a}: set architecture = \"{b}\" (or \"any\"), or use an image of {a}"
        ))),
        (Some(a), _) => Ok(Some(a)),
        (None, image) => Ok(image.map(|(_, b)| b)),
    }
}

/// The types `pick` chooses from in `settings.region`: allowed by
/// `instance_types`, of architecture `arch` (when given), priced in the
/// region (or, for a region the table does not price, at their reference
/// price).
#[must_use]
pub fn candidates(settings: &Settings, arch: Option<Arch>) -> Vec<InstanceType> {
    let region = if region_prices(&settings.region).is_some() {
        settings.region.as_str()
    } else {
        REFERENCE_REGION
    };
    types()
        .iter()
        .filter(|t| allowed(settings, &t.name))
        .filter(|t| arch.is_none_or(|a| a == t.arch))
        .filter_map(|t| Some(entry(t, t.price_in(region)?)))
        .collect()
}

/// A table entry as a catalogue entry priced at `price`.
fn entry(t: &Ec2Type, price: f64) -> InstanceType {
    InstanceType {
        name: t.name.clone(),
        cpu: f64::from(t.vcpu),
        memory_bytes: u64::from(t.memory_mib) << 20,
        gpu: t.gpu,
        gpu_vendor: t.gpu_vendor.map(str::to_string),
        gpu_model: t.gpu_model.map(str::to_string),
        arch: Some(t.arch),
        // The root volume is sized per request, not per type.
        disk_bytes: None,
        spot_hourly_usd: None,
        // Zones are not priced separately: offered in every zone.
        zone_prices: Vec::new(),
        default_hourly_usd: price,
    }
}

/// EBS's largest volume (`gp3`): 16 TiB. An offering's disk: any disk up
/// to this is a root volume sized per request.
pub const MAX_ROOT_VOLUME_BYTES: u64 = 16 << 40;

/// The root volume for a disk of at least `disk_bytes`, in GiB: rounded
/// up, at least 1.
///
/// # Errors
/// [`Error::Unsupported`] above [`MAX_ROOT_VOLUME_BYTES`].
pub fn root_volume_gib(disk_bytes: u64) -> Result<u64> {
    if disk_bytes > MAX_ROOT_VOLUME_BYTES {
        return Err(Error::Unsupported(format!(
            "a disk of {} GiB is over EBS's 16 TiB volume limit",
            disk_bytes.div_ceil(1 << 30)
        )));
    }
    Ok(disk_bytes.div_ceil(1 << 30).max(1))
}

/// What of `shape` binds a type, for matching: the disk is left out, since
/// any type gets a root volume of the size asked for; zone and type are
/// handled by [`choose`].
fn criteria(shape: &NodeShape) -> Criteria<'_> {
    Criteria {
        disk_bytes: None,
        zone: None,
        instance_type: None,
        ..Criteria::of(shape)
    }
}

/// `Unsupported`: `name` is `arch` with `model`, not what the shape asks for.
fn mismatch(name: &str, arch: Option<Arch>, model: Option<&str>, shape: &NodeShape) -> Error {
    let has = match (arch, model) {
        (Some(a), Some(m)) => format!("{a} with {m}"),
        (Some(a), None) => format!("{a} without a GPU model"),
        (None, Some(m)) => format!("of no known architecture, with {m}"),
        (None, None) => "of no known architecture or GPU model".to_string(),
    };
    let wants: Vec<String> = shape
        .arch
        .map(|a| a.to_string())
        .into_iter()
        .chain(shape.gpu_model.clone())
        .collect();
    Error::Unsupported(format!(
        "instance type {name:?} is {has}; the shape asks for {}",
        wants.join(" with ")
    ))
}

/// `Unsupported`: `name` is `has`, the image (or the configured
/// architecture) `want`.
#[must_use]
pub fn wrong_arch(name: &str, has: Arch, want: Arch, image: Option<&str>) -> Error {
    let whose = match image {
        Some(id) => format!("image {id:?} is {want}"),
        None => format!(
            "this plugin's images are {want} (config key \"architecture\"; \"any\" leaves it to each image)"
        ),
    };
    Error::Unsupported(format!(
        "instance type {name:?} is {has} and {whose}: EC2 would refuse to launch it"
    ))
}

/// Chooses the instance type for `shape` with the configured architecture
/// ([`choose_for`] without an image).
///
/// # Errors
/// As [`choose_for`].
pub fn choose(shape: &NodeShape, settings: &Settings) -> Result<Choice> {
    choose_for(shape, settings, settings.architecture, None)
}

/// Chooses the instance type for `shape` among types of `arch` (the
/// configured architecture narrowed by the image's, [`arch_for`]).
///
/// - A zone must belong to the configured region (`us-east-1b` for
///   `us-east-1`).
/// - A disk is a root volume of that size (see [`root_volume_gib`]), so it
///   does not restrict the type; over 16 TiB is refused.
/// - An explicit instance type wins over size; it must be allowed by
///   `instance_types` but need not be in the table (then it has no price).
///   A table type must be of `arch` and have the architecture and GPU model
///   asked for; another type is checked against EC2's answer by
///   `provision` ([`check_described`]).
/// - Otherwise the cheapest allowed type of `arch` with at least the
///   vCPUs, memory and GPUs (of the vendor) asked for, and of the
///   architecture and GPU model asked for.
///
/// # Errors
/// [`Error::Unsupported`] for a zone of another region, a disk over 16 TiB,
/// a type not allowed or of another architecture, or a shape no type fits.
pub fn choose_for(
    shape: &NodeShape,
    settings: &Settings,
    arch: Option<Arch>,
    image: Option<&str>,
) -> Result<Choice> {
    if let Some(zone) = shape.zone.as_deref()
        && !zone_in_region(zone, &settings.region)
    {
        return Err(Error::Unsupported(format!(
            "zone {zone:?} is not an availability zone of region {}",
            settings.region
        )));
    }
    if let Some(disk) = shape.disk_bytes {
        root_volume_gib(disk)?;
    }
    let want = criteria(shape);
    if let Some(name) = shape.instance_type.as_deref() {
        if !allowed(settings, name) {
            return Err(Error::Unsupported(format!(
                "instance type {name:?} is not in this plugin's instance_types"
            )));
        }
        let known = find(name);
        if let Some(t) = known {
            // The type wins over size, but the architecture and GPU model
            // asked for still bind, and so does the image's architecture.
            if !entry(t, 0.0).binds(&want) {
                return Err(mismatch(name, Some(t.arch), t.gpu_model, shape));
            }
            if let Some(a) = arch
                && a != t.arch
            {
                return Err(wrong_arch(name, t.arch, a, image));
            }
        }
        return Ok(Choice {
            instance_type: name.to_string(),
            on_demand_usd: known.and_then(|t| t.price_in(&settings.region)),
            known: known.is_some(),
        });
    }
    // Zones are not priced separately, so pick without one; the zone was
    // checked above.
    let catalogue = candidates(settings, arch);
    let chosen = pick_for(&want, &catalogue)?;
    let name = chosen.instance_type.name.clone();
    Ok(Choice {
        on_demand_usd: price(&settings.region, &name),
        instance_type: name,
        known: true,
    })
}

/// A type as EC2 describes it, priced: what `offerings` lists. Its disk is
/// a root volume sized per request, so it says the largest one
/// ([`MAX_ROOT_VOLUME_BYTES`]); it has no zones (it is offered wherever the
/// plugin launches).
struct Described<'a> {
    info: &'a TypeInfo,
    on_demand: Option<f64>,
    spot: Option<f64>,
}

impl CatalogueEntry for Described<'_> {
    fn name(&self) -> &str {
        &self.info.name
    }
    fn cpu(&self) -> f64 {
        f64::from(self.info.vcpu)
    }
    fn memory_bytes(&self) -> u64 {
        self.info.memory_mib << 20
    }
    fn gpu(&self) -> u32 {
        self.info.gpu
    }
    fn gpu_vendor(&self) -> Option<&str> {
        self.info.gpu_vendor.as_deref()
    }
    fn gpu_model(&self) -> Option<&str> {
        self.info.gpu_model.as_deref()
    }
    fn arch(&self) -> Option<Arch> {
        self.info.arch
    }
    fn disk_bytes(&self) -> Option<u64> {
        Some(MAX_ROOT_VOLUME_BYTES)
    }
    fn price_in(&self, _zone: Option<&str>) -> Option<f64> {
        self.on_demand
    }
    fn spot_price(&self) -> Option<f64> {
        self.spot
    }
}

/// `instance_types`, each once, in order: what `offerings` asks EC2 about
/// by name when it is set (else it asks for every current type).
#[must_use]
pub fn allowed_names(settings: &Settings) -> Option<Vec<String>> {
    let list = settings.instance_types.as_ref()?;
    let mut out: Vec<String> = Vec::new();
    for name in list {
        if !out.contains(name) {
            out.push(name.clone());
        }
    }
    Some(out)
}

/// The offering for a type EC2 described: its vCPUs, memory, architecture
/// and GPUs from EC2, the on-demand and spot prices given (none when not
/// known), and a disk of up to [`MAX_ROOT_VOLUME_BYTES`] (sized per
/// request).
#[must_use]
pub fn offering(info: &TypeInfo, on_demand: Option<f64>, spot: Option<f64>) -> Offering {
    Described {
        info,
        on_demand,
        spot,
    }
    .offering()
}

/// Checks that the type EC2 described has the architecture and GPU model
/// `shape` asks for (which an explicit type does not override).
///
/// # Errors
/// [`Error::Unsupported`] when it has not.
pub fn check_described(shape: &NodeShape, info: &TypeInfo) -> Result<()> {
    let described = Described {
        info,
        on_demand: None,
        spot: None,
    };
    if described.binds(&criteria(shape)) {
        Ok(())
    } else {
        Err(mismatch(
            &info.name,
            info.arch,
            info.gpu_model.as_deref(),
            shape,
        ))
    }
}

/// Whether `zone` is an availability (or local) zone name of `region`:
/// the region name followed by a letter, or by `-` and a suffix.
#[must_use]
pub fn zone_in_region(zone: &str, region: &str) -> bool {
    zone.strip_prefix(region).is_some_and(|rest| {
        let mut chars = rest.chars();
        match chars.next() {
            Some(c) if c.is_ascii_lowercase() => chars.as_str().is_empty(),
            Some('-') => !chars.as_str().is_empty(),
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(region: &str) -> Settings {
        Settings::for_region(region)
    }

    fn shape(cpu: f64, gib: u64) -> NodeShape {
        NodeShape::new(cpu, gib << 30)
    }

    #[test]
    fn table_is_consistent() {
        for (region, table) in prices::REGIONS {
            assert!(
                table.windows(2).all(|w| w[0].0 < w[1].0),
                "{region}: sorted, once each"
            );
            for (name, p) in *table {
                assert!(*p > 0.0 && *p < 200.0, "{region} {name} {p}");
                assert!(find(name).is_some(), "{name} has a size");
                if let Some(us) = price("us-east-1", name) {
                    assert!(
                        *p >= us,
                        "{region} {name}: no region is cheaper than us-east-1"
                    );
                }
            }
        }
        let all = types();
        assert!(all.windows(2).all(|w| w[0].name < w[1].name));
        for t in all {
            assert!(t.vcpu > 0 && t.memory_mib >= 512, "{}", t.name);
            assert_eq!(t.gpu > 0, t.gpu_vendor.is_some(), "{}", t.name);
            assert_eq!(t.gpu > 0, t.gpu_model.is_some(), "{}", t.name);
            assert!(t.price_in("us-east-1").is_some(), "{}", t.name);
            assert_eq!(t.price_in("us-east-1"), t.price_in("us-west-2"));
            assert_eq!(t.price_in("us-east-1"), t.price_in("us-east-2"));
        }
        // The families the README lists, in every US region and priced.
        for family in [
            "m5", "m6i", "m6a", "m6g", "m7i", "m7a", "m7g", "c5", "c6i", "c6g", "c7i", "c7g", "r5",
            "r6i", "r6g", "r7i", "r7g", "t3", "t3a", "t4g", "g4dn", "g5", "g6", "p3", "p4d", "p5",
        ] {
            assert!(
                all.iter()
                    .any(|t| t.name.starts_with(&format!("{family}."))),
                "{family}"
            );
        }
        let t = find("m7g.xlarge").unwrap();
        assert_eq!((t.vcpu, t.memory_mib, t.arch), (4, 16384, Arch::Arm64));
        let t = find("c7i.2xlarge").unwrap();
        assert_eq!((t.vcpu, t.memory_mib, t.arch), (8, 16384, Arch::X86_64));
        let t = find("r7g.medium").unwrap();
        assert_eq!((t.vcpu, t.memory_mib), (1, 8192));
        let t = find("m7i.48xlarge").unwrap();
        assert_eq!((t.vcpu, t.memory_mib), (192, 786_432));
        let t = find("g5.48xlarge").unwrap();
        assert_eq!((t.gpu, t.gpu_model), (8, Some("nvidia-a10g")));
        assert_eq!(find("g4ad.xlarge").unwrap().gpu_vendor, Some("amd"));
        for eight in ["p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge"] {
            assert_eq!(find(eight).unwrap().gpu, 8, "{eight}");
        }
        assert!(find("m7g.metal").is_none(), "metal sizes are left out");
        // The A100 in the big regions, the Graviton 3 types in the US.
        for region in [
            "us-east-1",
            "eu-west-1",
            "eu-central-1",
            "ap-southeast-1",
            "ap-northeast-1",
        ] {
            assert!(price(region, "p4d.24xlarge").is_some(), "{region}");
        }
        assert_eq!(price("us-east-1", "m7g.large"), Some(0.0816));
        assert_eq!(price("us-east-2", "c7g.large"), Some(0.0725));
        assert_eq!(price("eu-west-1", "p4d.24xlarge"), Some(23.71569));
        assert_eq!(price("sa-east-1", "m5.large"), None);
        assert!(PRICE_SOURCE.contains("Price List"));
        assert!(priced_regions().count() >= 7);
    }

    #[test]
    fn cheapest_fitting_x86_type_wins() {
        let us = settings("us-east-1");
        let eu = settings("eu-west-1");
        let cases: &[(&Settings, NodeShape, &str, f64)] = &[
            (&us, shape(1.0, 1), "t3a.micro", 0.0094),
            (&us, shape(2.0, 4), "t3a.medium", 0.0376),
            (&us, shape(4.0, 8), "t3a.xlarge", 0.1504),
            (&us, shape(2.0, 16), "r6a.large", 0.1134),
            (&us, shape(16.0, 64), "m6a.4xlarge", 0.6912),
            (&us, shape(64.0, 512), "r6a.16xlarge", 3.6288),
            (&eu, shape(1.0, 1), "t3a.micro", 0.0102),
            (&eu, shape(8.0, 32), "t3a.2xlarge", 0.3264),
            (
                &us,
                NodeShape {
                    zone: Some("us-east-1b".into()),
                    ..shape(2.0, 2)
                },
                "t3a.small",
                0.0188,
            ),
        ];
        for (s, sh, name, price) in cases {
            let c = choose(sh, s).unwrap();
            assert_eq!(c.instance_type, *name, "{sh:?}");
            assert!((c.on_demand_usd.unwrap() - price).abs() < 1e-12, "{sh:?}");
            assert!(c.known);
        }
    }

    #[test]
    fn gpus_by_vendor_and_model() {
        let us = settings("us-east-1");
        let gpu = |vendor: Option<&str>, model: Option<&str>| NodeShape {
            gpu: 1,
            gpu_vendor: vendor.map(Into::into),
            gpu_model: model.map(Into::into),
            ..shape(4.0, 16)
        };
        let cases = [
            (None, None, "g4ad.xlarge"),
            (Some("nvidia"), None, "g4dn.xlarge"),
            (Some("AMD"), None, "g4ad.xlarge"),
            (Some("nvidia"), Some("nvidia-t4"), "g4dn.xlarge"),
            (Some("nvidia"), Some("NVIDIA-A10G"), "g5.xlarge"),
            (Some("nvidia"), Some("nvidia-l4"), "g6.xlarge"),
            (Some("nvidia"), Some("nvidia-v100"), "p3.2xlarge"),
            (Some("nvidia"), Some("nvidia-h100"), "p5.4xlarge"),
            // A100s come eight to an instance, the cheaper p4d first.
            (Some("nvidia"), Some("nvidia-a100"), "p4d.24xlarge"),
        ];
        for (vendor, model, want) in cases {
            assert_eq!(
                choose(&gpu(vendor, model), &us).unwrap().instance_type,
                want,
                "{vendor:?} {model:?}"
            );
        }
        assert!(matches!(
            choose(&gpu(None, Some("amd-mi300x")), &us),
            Err(Error::Unsupported(_))
        ));
        // eu-west-1 prices the A100 too.
        let eu = settings("eu-west-1");
        let c = choose(&gpu(Some("nvidia"), Some("nvidia-a100")), &eu).unwrap();
        assert_eq!(c.instance_type, "p4d.24xlarge");
        assert_eq!(c.on_demand_usd, Some(23.71569));
        // More than one GPU: the cheapest type with as many.
        let two = NodeShape {
            gpu: 2,
            ..shape(1.0, 1)
        };
        assert_eq!(choose(&two, &us).unwrap().instance_type, "g4ad.8xlarge");
        let nine = NodeShape {
            gpu: 9,
            ..shape(1.0, 1)
        };
        assert!(matches!(choose(&nine, &us), Err(Error::Unsupported(_))));
    }

    #[test]
    fn architecture_and_allow_list_restrict_picking() {
        let arm = Settings {
            architecture: Some(Arch::Arm64),
            ..settings("us-east-1")
        };
        assert_eq!(
            choose(&shape(1.0, 1), &arm).unwrap().instance_type,
            "t4g.micro"
        );
        assert_eq!(
            choose(&shape(4.0, 16), &arm).unwrap().instance_type,
            "t4g.xlarge"
        );
        assert_eq!(
            choose(&shape(16.0, 64), &arm).unwrap().instance_type,
            "m6g.4xlarge"
        );
        let any = Settings {
            architecture: None,
            ..settings("us-east-1")
        };
        assert_eq!(
            choose(&shape(2.0, 4), &any).unwrap().instance_type,
            "t4g.medium"
        );
        // The image narrows "any".
        assert_eq!(
            choose_for(&shape(2.0, 4), &any, Some(Arch::X86_64), Some("ami-1"))
                .unwrap()
                .instance_type,
            "t3a.medium"
        );

        let only = Settings {
            instance_types: Some(vec![
                "m6i.large".into(),
                "m6i.xlarge".into(),
                "x9.huge".into(),
            ]),
            ..settings("us-east-1")
        };
        assert_eq!(
            choose(&shape(1.0, 1), &only).unwrap().instance_type,
            "m6i.large"
        );
        assert_eq!(
            choose(&shape(3.0, 1), &only).unwrap().instance_type,
            "m6i.xlarge"
        );
        assert!(matches!(
            choose(&shape(8.0, 1), &only),
            Err(Error::Unsupported(_))
        ));
        let explicit = |name: &str| NodeShape {
            instance_type: Some(name.into()),
            ..NodeShape::default()
        };
        // Explicit types must be allowed, and need not be in the table.
        assert!(matches!(
            choose(&explicit("t3.micro"), &only),
            Err(Error::Unsupported(_))
        ));
        let c = choose(&explicit("x9.huge"), &only).unwrap();
        assert_eq!(
            (c.instance_type.as_str(), c.on_demand_usd, c.known),
            ("x9.huge", None, false)
        );
        // An explicit arm type is refused under the x86 default: the
        // configured image is x86_64, and EC2 would refuse the launch.
        match choose(&explicit("t4g.micro"), &settings("us-east-1")) {
            Err(Error::Unsupported(m)) => {
                assert!(m.contains("arm64") && m.contains("x86_64"), "{m}");
            }
            other => panic!("{other:?}"),
        }
        match choose_for(
            &explicit("m7g.large"),
            &any,
            Some(Arch::X86_64),
            Some("ami-x86"),
        ) {
            Err(Error::Unsupported(m)) => assert!(m.contains("image \"ami-x86\" is x86_64"), "{m}"),
            other => panic!("{other:?}"),
        }
        let c = choose(&explicit("t4g.micro"), &any).unwrap();
        assert_eq!(c.on_demand_usd, Some(0.0084));
        let c = choose(&explicit("m7g.xlarge"), &arm).unwrap();
        assert_eq!(c.on_demand_usd, Some(0.1632));
        let c = choose(&explicit("g4ad.xlarge"), &settings("eu-central-1")).unwrap();
        assert_eq!((c.on_demand_usd, c.known), (Some(0.47327), true));
        let c = choose(&explicit("m7i.2xlarge"), &settings("eu-central-1")).unwrap();
        assert_eq!((c.on_demand_usd, c.known), (None, true));
    }

    #[test]
    fn the_image_and_the_configured_architecture_must_agree() {
        let x86 = settings("us-east-1");
        let any = Settings {
            architecture: None,
            ..settings("us-east-1")
        };
        assert_eq!(arch_for(&x86, None).unwrap(), Some(Arch::X86_64));
        assert_eq!(arch_for(&any, None).unwrap(), None);
        assert_eq!(
            arch_for(&any, Some(("ami-1", Arch::Arm64))).unwrap(),
            Some(Arch::Arm64)
        );
        assert_eq!(
            arch_for(&x86, Some(("ami-1", Arch::X86_64))).unwrap(),
            Some(Arch::X86_64)
        );
        match arch_for(&x86, Some(("ami-1", Arch::Arm64))) {
            Err(Error::InvalidConfig(m)) => {
                assert!(m.contains("ami-1") && m.contains("architecture"), "{m}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn disk_is_a_root_volume_and_does_not_pick_the_type() {
        let us = settings("us-east-1");
        let disk = |bytes: u64| NodeShape {
            disk_bytes: Some(bytes),
            ..shape(2.0, 4)
        };
        for bytes in [1, 100 << 30, MAX_ROOT_VOLUME_BYTES] {
            let c = choose(&disk(bytes), &us).unwrap();
            assert_eq!(c.instance_type, "t3a.medium", "{bytes}");
        }
        assert!(matches!(
            choose(&disk(MAX_ROOT_VOLUME_BYTES + 1), &us),
            Err(Error::Unsupported(_))
        ));
        let named = NodeShape {
            instance_type: Some("m6i.large".into()),
            ..disk(500 << 30)
        };
        assert_eq!(choose(&named, &us).unwrap().instance_type, "m6i.large");
        assert_eq!(root_volume_gib(0).unwrap(), 1);
        assert_eq!(root_volume_gib(1).unwrap(), 1);
        assert_eq!(root_volume_gib(1 << 30).unwrap(), 1);
        assert_eq!(root_volume_gib((1 << 30) + 1).unwrap(), 2);
        assert_eq!(root_volume_gib(MAX_ROOT_VOLUME_BYTES).unwrap(), 16_384);
        match root_volume_gib(1 << 50) {
            Err(Error::Unsupported(m)) => assert!(m.contains("16 TiB"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn architecture_and_gpu_model_bind() {
        let any = Settings {
            architecture: None,
            ..settings("us-east-1")
        };
        let sized = |arch: Option<Arch>| NodeShape {
            arch,
            ..shape(2.0, 4)
        };
        assert_eq!(
            choose(&sized(Some(Arch::X86_64)), &any)
                .unwrap()
                .instance_type,
            "t3a.medium"
        );
        assert_eq!(
            choose(&sized(Some(Arch::Arm64)), &any)
                .unwrap()
                .instance_type,
            "t4g.medium"
        );
        // The x86 default picks no ARM type, even when asked for one.
        assert!(matches!(
            choose(&sized(Some(Arch::Arm64)), &settings("us-east-1")),
            Err(Error::Unsupported(_))
        ));
        let us = settings("us-east-1");
        let explicit = |name: &str, arch: Arch| NodeShape {
            instance_type: Some(name.into()),
            arch: Some(arch),
            ..NodeShape::default()
        };
        match choose(&explicit("t4g.micro", Arch::X86_64), &any) {
            Err(Error::Unsupported(m)) => {
                assert!(m.contains("arm64") && m.contains("asks for x86_64"), "{m}");
            }
            other => panic!("{other:?}"),
        }
        assert!(choose(&explicit("t4g.micro", Arch::Arm64), &any).is_ok());
        let c = choose(&explicit("x7z.large", Arch::X86_64), &us).unwrap();
        assert_eq!((c.known, c.on_demand_usd), (false, None));
    }

    fn info(name: &str, arch: Option<Arch>, model: Option<&str>) -> TypeInfo {
        TypeInfo {
            name: name.into(),
            vcpu: 4,
            memory_mib: 16384,
            arch,
            gpu: u32::from(model.is_some()),
            gpu_vendor: model.map(|m| m.split('-').next().unwrap().to_string()),
            gpu_model: model.map(Into::into),
            ..TypeInfo::default()
        }
    }

    #[test]
    fn offerings_are_what_ec2_says_with_a_disk_sized_per_request() {
        let o = offering(
            &info("g5.xlarge", Some(Arch::X86_64), Some("nvidia-a10g")),
            Some(1.006),
            Some(0.4),
        );
        assert_eq!(o.instance_type, "g5.xlarge");
        assert_eq!((o.cpu, o.memory_bytes, o.gpu), (4.0, 16 << 30, 1));
        assert_eq!(o.gpu_vendor.as_deref(), Some("nvidia"));
        assert_eq!(o.gpu_model.as_deref(), Some("nvidia-a10g"));
        assert_eq!(o.arch, Some(Arch::X86_64));
        assert_eq!((o.on_demand_usd, o.spot_usd), (Some(1.006), Some(0.4)));
        assert_eq!(
            (o.disk_bytes, o.zones.len()),
            (Some(MAX_ROOT_VOLUME_BYTES), 0)
        );
        // The host's one fit rule takes any disk up to the volume limit.
        let with_disk = |bytes: u64| NodeShape {
            disk_bytes: Some(bytes),
            ..shape(2.0, 8)
        };
        assert!(o.fits(&with_disk(8 << 30)));
        assert!(o.fits(&with_disk(MAX_ROOT_VOLUME_BYTES)));
        assert!(!o.fits(&with_disk(MAX_ROOT_VOLUME_BYTES + 1)));

        let only = Settings {
            instance_types: Some(vec!["b".into(), "a".into(), "b".into()]),
            ..settings("us-east-1")
        };
        assert_eq!(allowed_names(&only).unwrap(), ["b", "a"]);
        assert_eq!(allowed_names(&settings("us-east-1")), None);
    }

    #[test]
    fn described_types_bind_architecture_and_gpu_model() {
        let want = |arch: Option<Arch>, model: Option<&str>| NodeShape {
            instance_type: Some("x".into()),
            arch,
            gpu: u32::from(model.is_some()),
            gpu_model: model.map(Into::into),
            disk_bytes: Some(100 << 30),
            ..NodeShape::default()
        };
        let l4 = info("g6.xlarge", Some(Arch::X86_64), Some("nvidia-l4"));
        assert!(
            check_described(&want(None, None), &l4).is_ok(),
            "disk never binds"
        );
        assert!(check_described(&want(Some(Arch::X86_64), Some("NVIDIA-L4")), &l4).is_ok());
        for bad in [
            want(Some(Arch::Arm64), None),
            want(None, Some("nvidia-t4")),
            want(Some(Arch::Arm64), Some("nvidia-l4")),
        ] {
            match check_described(&bad, &l4) {
                Err(Error::Unsupported(m)) => {
                    assert!(m.contains("\"g6.xlarge\" is x86_64 with nvidia-l4"), "{m}");
                }
                other => panic!("{other:?}"),
            }
        }
        let mac = info("mac2.metal", None, None);
        assert!(check_described(&want(None, None), &mac).is_ok());
        assert!(matches!(
            check_described(&want(Some(Arch::Arm64), None), &mac),
            Err(Error::Unsupported(_))
        ));
    }

    #[test]
    fn zones_must_be_in_the_region() {
        let us = settings("us-east-1");
        for ok in ["us-east-1a", "us-east-1f", "us-east-1-bos-1a"] {
            assert!(zone_in_region(ok, "us-east-1"), "{ok}");
        }
        for bad in [
            "us-east-1",
            "us-east-12a",
            "us-east-1ab",
            "eu-west-1a",
            "use1-az1",
            "us-east-1-",
        ] {
            assert!(!zone_in_region(bad, "us-east-1"), "{bad}");
        }
        let elsewhere = NodeShape {
            zone: Some("eu-west-1a".into()),
            ..NodeShape::default()
        };
        assert!(matches!(
            choose(&elsewhere, &us),
            Err(Error::Unsupported(_))
        ));
    }

    #[test]
    fn unpriced_regions_pick_by_reference_price_but_quote_nothing() {
        let s = settings("ap-south-1");
        let c = choose(&shape(2.0, 4), &s).unwrap();
        assert_eq!(c.instance_type, "t3a.medium");
        assert_eq!(c.on_demand_usd, None);
        assert_eq!(c.hint(CapacityType::OnDemand, 0.35), None);
    }

    #[test]
    fn hints_price_spot_as_a_fraction_of_on_demand() {
        let c = choose(
            &NodeShape {
                instance_type: Some("g5.xlarge".into()),
                ..NodeShape::default()
            },
            &settings("us-east-1"),
        )
        .unwrap();
        let od = c.hint(CapacityType::OnDemand, 0.35).unwrap();
        assert!((od.hourly_usd - 1.006).abs() < 1e-12);
        assert_eq!(od.capacity_type, CapacityType::OnDemand);
        let spot = c.hint(CapacityType::Spot, 0.35).unwrap();
        assert!((spot.hourly_usd - 1.006 * 0.35).abs() < 1e-12);
        assert_eq!(spot.capacity_type, CapacityType::Spot);
        assert_eq!(spot.instance_type, "g5.xlarge");
    }
}
