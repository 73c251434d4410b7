//! The bundled EC2 catalogue: common instance types, their size and GPUs,
//! and their on-demand prices in a few regions, so that `price_hint` can
//! answer without any I/O.
//!
//! Source: AWS EC2 on-demand Linux pricing, public price list, June 2025
//! (hourly USD, Linux/UNIX, shared tenancy, no pre-installed software).
//! us-east-1 and us-west-2 charge the same for every type listed here;
//! eu-west-1 is dearer. A type with no price for a region is not picked by
//! size there (an explicit request for it is still sent, and EC2 decides).
//!
//! Regions outside [`PRICED_REGIONS`] work too: types are then ranked by
//! their us-east-1 price to pick one, but `price_hint` answers "none"
//! rather than quote a price that may be wrong.
//!
//! `offerings` describes types from EC2's own answer (`DescribeInstanceTypes`)
//! and prices them from this table ([`offering`]); `provision` checks an
//! explicit type's architecture and GPU model against that answer too
//! ([`check_described`]), so a type the table does not know can still be
//! asked for with an architecture or GPU model.

use wasmprov_guest::shape::{CatalogueEntry, Criteria, InstanceType, pick_for};
use wasmprov_guest::{CapacityType, Error, NodeShape, Offering, PriceHint, Result};

use crate::api::TypeInfo;
use crate::settings::{Arch, Settings};

/// Where [`TYPES`]' prices come from (also in the README).
pub const PRICE_SOURCE: &str = "AWS EC2 on-demand Linux pricing, public price list, June 2025";

/// Regions the table has prices for.
pub const PRICED_REGIONS: &[&str] = &["us-east-1", "us-west-2", "eu-west-1"];

/// The region whose prices rank types in regions the table does not price.
pub const REFERENCE_REGION: &str = "us-east-1";

/// One instance type of the bundled table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ec2Type {
    /// EC2's name, e.g. `m6i.large`.
    pub name: &'static str,
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
    /// Hourly on-demand USD per region.
    pub prices: &'static [(&'static str, f64)],
}

impl Ec2Type {
    /// The on-demand price in `region`, when the table has one.
    #[must_use]
    pub fn price_in(&self, region: &str) -> Option<f64> {
        self.prices
            .iter()
            .find(|(r, _)| *r == region)
            .map(|(_, p)| *p)
    }
}

const X86: Arch = Arch::X86_64;
const ARM: Arch = Arch::Arm64;

macro_rules! types {
    ($( $name:literal $vcpu:literal $mib:literal $gpu:literal $vendor:expr, $model:expr, $arch:ident
        [$($us:literal)?; $($eu:literal)?] ),* $(,)?) => {
        &[$(Ec2Type {
            name: $name,
            vcpu: $vcpu,
            memory_mib: $mib,
            gpu: $gpu,
            gpu_vendor: $vendor,
            gpu_model: $model,
            arch: $arch,
            prices: &[
                $(("us-east-1", $us), ("us-west-2", $us),)?
                $(("eu-west-1", $eu),)?
            ],
        }),*]
    };
}

/// The table: name, vCPUs, MiB, GPUs, vendor, model, architecture,
/// [us-east-1 = us-west-2 price; eu-west-1 price].
pub const TYPES: &[Ec2Type] = types![
    // Burstable, Intel.
    "t3.micro" 2 1024 0 None, None, X86 [0.0104; 0.0114],
    "t3.small" 2 2048 0 None, None, X86 [0.0208; 0.0228],
    "t3.medium" 2 4096 0 None, None, X86 [0.0416; 0.0456],
    "t3.large" 2 8192 0 None, None, X86 [0.0832; 0.0912],
    "t3.xlarge" 4 16384 0 None, None, X86 [0.1664; 0.1824],
    "t3.2xlarge" 8 32768 0 None, None, X86 [0.3328; 0.3648],
    // Burstable, AMD.
    "t3a.micro" 2 1024 0 None, None, X86 [0.0094; 0.0102],
    "t3a.small" 2 2048 0 None, None, X86 [0.0188; 0.0204],
    "t3a.medium" 2 4096 0 None, None, X86 [0.0376; 0.0408],
    "t3a.large" 2 8192 0 None, None, X86 [0.0752; 0.0816],
    "t3a.xlarge" 4 16384 0 None, None, X86 [0.1504; 0.1632],
    "t3a.2xlarge" 8 32768 0 None, None, X86 [0.3008; 0.3264],
    // General purpose.
    "m5.large" 2 8192 0 None, None, X86 [0.096; 0.107],
    "m5.xlarge" 4 16384 0 None, None, X86 [0.192; 0.214],
    "m5.2xlarge" 8 32768 0 None, None, X86 [0.384; 0.428],
    "m5.4xlarge" 16 65536 0 None, None, X86 [0.768; 0.856],
    "m6i.large" 2 8192 0 None, None, X86 [0.096; 0.107],
    "m6i.xlarge" 4 16384 0 None, None, X86 [0.192; 0.214],
    "m6i.2xlarge" 8 32768 0 None, None, X86 [0.384; 0.428],
    "m6i.4xlarge" 16 65536 0 None, None, X86 [0.768; 0.856],
    // Compute optimised.
    "c5.large" 2 4096 0 None, None, X86 [0.085; 0.096],
    "c5.xlarge" 4 8192 0 None, None, X86 [0.17; 0.192],
    "c5.2xlarge" 8 16384 0 None, None, X86 [0.34; 0.384],
    "c5.4xlarge" 16 32768 0 None, None, X86 [0.68; 0.768],
    "c6i.large" 2 4096 0 None, None, X86 [0.085; 0.096],
    "c6i.xlarge" 4 8192 0 None, None, X86 [0.17; 0.192],
    "c6i.2xlarge" 8 16384 0 None, None, X86 [0.34; 0.384],
    "c6i.4xlarge" 16 32768 0 None, None, X86 [0.68; 0.768],
    // Memory optimised.
    "r5.large" 2 16384 0 None, None, X86 [0.126; 0.141],
    "r5.xlarge" 4 32768 0 None, None, X86 [0.252; 0.282],
    "r5.2xlarge" 8 65536 0 None, None, X86 [0.504; 0.564],
    "r6i.large" 2 16384 0 None, None, X86 [0.126; 0.141],
    "r6i.xlarge" 4 32768 0 None, None, X86 [0.252; 0.282],
    "r6i.2xlarge" 8 65536 0 None, None, X86 [0.504; 0.564],
    // Graviton (arm64).
    "t4g.micro" 2 1024 0 None, None, ARM [0.0084; 0.0092],
    "t4g.small" 2 2048 0 None, None, ARM [0.0168; 0.0184],
    "t4g.medium" 2 4096 0 None, None, ARM [0.0336; 0.0368],
    "t4g.large" 2 8192 0 None, None, ARM [0.0672; 0.0736],
    "m6g.large" 2 8192 0 None, None, ARM [0.077; 0.086],
    "m6g.xlarge" 4 16384 0 None, None, ARM [0.154; 0.172],
    "m6g.2xlarge" 8 32768 0 None, None, ARM [0.308; 0.344],
    "c6g.large" 2 4096 0 None, None, ARM [0.068; 0.0768],
    "c6g.xlarge" 4 8192 0 None, None, ARM [0.136; 0.1536],
    // GPUs.
    "g4dn.xlarge" 4 16384 1 Some("nvidia"), Some("nvidia-t4"), X86 [0.526; 0.587],
    "g5.xlarge" 4 16384 1 Some("nvidia"), Some("nvidia-a10g"), X86 [1.006; 1.123],
    "p3.2xlarge" 8 62464 1 Some("nvidia"), Some("nvidia-v100"), X86 [3.06; 3.305],
    "g4ad.xlarge" 4 16384 1 Some("amd"), Some("amd-radeon-pro-v520"), X86 [0.37853;],
    // Eight-GPU training types, at the prices of AWS's June 2025 GPU price
    // cut; their eu-west-1 prices are not in the table.
    "p4d.24xlarge" 96 1179648 8 Some("nvidia"), Some("nvidia-a100"), X86 [21.957642;],
    "p4de.24xlarge" 96 1179648 8 Some("nvidia"), Some("nvidia-a100"), X86 [27.44705;],
    "p5.48xlarge" 192 2097152 8 Some("nvidia"), Some("nvidia-h100"), X86 [55.04;],
];

/// The table entry for `name`.
#[must_use]
pub fn find(name: &str) -> Option<&'static Ec2Type> {
    TYPES.iter().find(|t| t.name == name)
}

/// What `provision` and `price_hint` settled on.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// The instance type to launch.
    pub instance_type: String,
    /// Its on-demand price in the configured region, when the table has one.
    pub on_demand_usd: Option<f64>,
    /// Whether the type is in the bundled table.
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

fn allowed(settings: &Settings, name: &str) -> bool {
    settings
        .instance_types
        .as_ref()
        .is_none_or(|list| list.iter().any(|n| n == name))
}

/// The types `pick` chooses from in `settings.region`: allowed by
/// `instance_types`, of the configured architecture, priced in the region
/// (or, for a region the table does not price, at their reference price).
#[must_use]
pub fn candidates(settings: &Settings) -> Vec<InstanceType> {
    let priced = PRICED_REGIONS.contains(&settings.region.as_str());
    let region = if priced {
        settings.region.as_str()
    } else {
        REFERENCE_REGION
    };
    TYPES
        .iter()
        .filter(|t| allowed(settings, t.name))
        .filter(|t| settings.architecture.is_none_or(|a| a == t.arch))
        .filter_map(|t| Some(entry(t, t.price_in(region)?)))
        .collect()
}

/// A table entry as a catalogue entry priced at `price`.
fn entry(t: &Ec2Type, price: f64) -> InstanceType {
    InstanceType {
        name: t.name.to_string(),
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

/// EBS's largest volume (`gp3`): 16 TiB.
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

/// Chooses the instance type for `shape`.
///
/// - A zone must belong to the configured region (`us-east-1b` for
///   `us-east-1`).
/// - A disk is a root volume of that size (see [`root_volume_gib`]), so it
///   does not restrict the type; over 16 TiB is refused.
/// - An explicit instance type wins; it must be allowed by `instance_types`
///   but need not be in the table (then it has no price). A table type
///   must have the architecture and GPU model asked for; another type is
///   checked against EC2's answer by `provision` ([`check_described`]).
/// - Otherwise the cheapest allowed type of the configured architecture
///   with at least the vCPUs, memory and GPUs (of the vendor) asked for,
///   and of the architecture and GPU model asked for.
///
/// # Errors
/// [`Error::Unsupported`] for a zone of another region, a disk over 16 TiB,
/// a type not allowed, or a shape no type fits.
pub fn choose(shape: &NodeShape, settings: &Settings) -> Result<Choice> {
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
        // The type wins over size, but the architecture and GPU model asked
        // for still bind.
        if let Some(t) = known
            && !entry(t, 0.0).binds(&want)
        {
            return Err(mismatch(name, Some(t.arch), t.gpu_model, shape));
        }
        return Ok(Choice {
            instance_type: name.to_string(),
            on_demand_usd: known.and_then(|t| t.price_in(&settings.region)),
            known: known.is_some(),
        });
    }
    // Zones are not priced separately, so pick without one; the zone was
    // checked above.
    let catalogue = candidates(settings);
    let chosen = pick_for(&want, &catalogue)?;
    let name = chosen.instance_type.name.clone();
    Ok(Choice {
        on_demand_usd: find(&name).and_then(|t| t.price_in(&settings.region)),
        instance_type: name,
        known: true,
    })
}

/// A type as EC2 describes it, priced: what `offerings` lists. It has no
/// fixed disk (the root volume is sized per request) and no zones (it is
/// offered wherever the plugin launches).
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
    fn price_in(&self, _zone: Option<&str>) -> Option<f64> {
        self.on_demand
    }
    fn spot_price(&self) -> Option<f64> {
        self.spot
    }
}

/// The instance types `offerings` asks EC2 about: `instance_types` when
/// set, else every type of the table; each once, in order.
#[must_use]
pub fn offered_names(settings: &Settings) -> Vec<String> {
    let names: Vec<&str> = match &settings.instance_types {
        Some(list) => list.iter().map(String::as_str).collect(),
        None => TYPES.iter().map(|t| t.name).collect(),
    };
    let mut out: Vec<String> = Vec::new();
    for name in names {
        if !out.iter().any(|n| n == name) {
            out.push(name.to_string());
        }
    }
    out
}

/// The offering for a type EC2 described: its vCPUs, memory, architecture
/// and GPUs from EC2, its on-demand price from the table for the region
/// (none where the table has none, as `price_hint` answers none there),
/// and the spot price given (EC2's current lowest, when published).
#[must_use]
pub fn offering(info: &TypeInfo, settings: &Settings, spot: Option<f64>) -> Offering {
    Described {
        info,
        on_demand: find(&info.name).and_then(|t| t.price_in(&settings.region)),
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
        for (i, t) in TYPES.iter().enumerate() {
            assert!(
                TYPES[..i].iter().all(|o| o.name != t.name),
                "{} twice",
                t.name
            );
            assert!(t.vcpu > 0 && t.memory_mib >= 512, "{}", t.name);
            assert_eq!(t.gpu > 0, t.gpu_vendor.is_some(), "{}", t.name);
            assert_eq!(t.gpu > 0, t.gpu_model.is_some(), "{}", t.name);
            assert!(t.price_in("us-east-1").is_some(), "{}", t.name);
            assert_eq!(t.price_in("us-east-1"), t.price_in("us-west-2"));
            for (r, p) in t.prices {
                assert!(PRICED_REGIONS.contains(r), "{r}");
                assert!(*p > 0.0 && *p < 100.0, "{} {r} {p}", t.name);
            }
            if let Some(eu) = t.price_in("eu-west-1") {
                assert!(eu >= t.price_in("us-east-1").unwrap(), "{}", t.name);
            }
        }
        for gpu in ["g4dn.xlarge", "g5.xlarge", "p3.2xlarge", "g4ad.xlarge"] {
            assert_eq!(find(gpu).unwrap().gpu, 1, "{gpu}");
        }
        assert_eq!(find("g4ad.xlarge").unwrap().gpu_vendor, Some("amd"));
        assert_eq!(find("g5.xlarge").unwrap().gpu_model, Some("nvidia-a10g"));
        for eight in ["p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge"] {
            assert_eq!(find(eight).unwrap().gpu, 8, "{eight}");
        }
        assert!(PRICE_SOURCE.contains("2025"));
        assert_eq!(TYPES.len(), 50, "the README counts the types");
    }

    #[test]
    fn cheapest_fitting_x86_type_wins() {
        let us = settings("us-east-1");
        let eu = settings("eu-west-1");
        let cases: &[(&Settings, NodeShape, &str, f64)] = &[
            (&us, shape(1.0, 1), "t3a.micro", 0.0094),
            (&us, shape(2.0, 4), "t3a.medium", 0.0376),
            (&us, shape(4.0, 8), "t3a.xlarge", 0.1504),
            (&us, shape(2.0, 16), "r5.large", 0.126),
            (&us, shape(16.0, 64), "m5.4xlarge", 0.768),
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
    fn gpus_by_vendor() {
        let us = settings("us-east-1");
        let gpu = |vendor: Option<&str>| NodeShape {
            gpu: 1,
            gpu_vendor: vendor.map(Into::into),
            ..shape(2.0, 8)
        };
        assert_eq!(
            choose(&gpu(None), &us).unwrap().instance_type,
            "g4ad.xlarge"
        );
        assert_eq!(
            choose(&gpu(Some("nvidia")), &us).unwrap().instance_type,
            "g4dn.xlarge"
        );
        assert_eq!(
            choose(&gpu(Some("AMD")), &us).unwrap().instance_type,
            "g4ad.xlarge"
        );
        // g4ad is not priced in eu-west-1, so the cheapest GPU there is a T4.
        let eu = settings("eu-west-1");
        assert_eq!(
            choose(&gpu(None), &eu).unwrap().instance_type,
            "g4dn.xlarge"
        );
        assert!(matches!(
            choose(&gpu(Some("amd")), &eu),
            Err(Error::Unsupported(_))
        ));
        // More than one GPU: only the eight-GPU types have them.
        let two = NodeShape {
            gpu: 2,
            ..shape(1.0, 1)
        };
        assert_eq!(choose(&two, &us).unwrap().instance_type, "p4d.24xlarge");
        assert!(matches!(choose(&two, &eu), Err(Error::Unsupported(_))));
        let nine = NodeShape {
            gpu: 9,
            ..shape(1.0, 1)
        };
        assert!(matches!(choose(&nine, &us), Err(Error::Unsupported(_))));
        let v100 = NodeShape {
            gpu: 1,
            gpu_vendor: Some("nvidia".into()),
            ..shape(8.0, 60)
        };
        assert_eq!(choose(&v100, &us).unwrap().instance_type, "p3.2xlarge");
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
        let any = Settings {
            architecture: None,
            ..settings("us-east-1")
        };
        assert_eq!(
            choose(&shape(2.0, 4), &any).unwrap().instance_type,
            "t4g.medium"
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
        // An explicit arm type is honoured under the x86 default.
        let c = choose(&explicit("t4g.micro"), &settings("us-east-1")).unwrap();
        assert_eq!(c.on_demand_usd, Some(0.0084));
        let c = choose(&explicit("g4ad.xlarge"), &settings("eu-west-1")).unwrap();
        assert_eq!((c.on_demand_usd, c.known), (None, true));
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
            choose(&sized(None), &any).unwrap().instance_type,
            "t4g.medium"
        );
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
        let gpu = |model: Option<&str>| NodeShape {
            gpu: 1,
            gpu_vendor: Some("nvidia".into()),
            gpu_model: model.map(Into::into),
            ..shape(4.0, 16)
        };
        let us = settings("us-east-1");
        assert_eq!(
            choose(&gpu(None), &us).unwrap().instance_type,
            "g4dn.xlarge"
        );
        assert_eq!(
            choose(&gpu(Some("nvidia-t4")), &us).unwrap().instance_type,
            "g4dn.xlarge"
        );
        assert_eq!(
            choose(&gpu(Some("NVIDIA-A10G")), &us)
                .unwrap()
                .instance_type,
            "g5.xlarge"
        );
        // An A100 comes eight to an instance, the cheaper p4d first.
        assert_eq!(
            choose(&gpu(Some("nvidia-a100")), &us)
                .unwrap()
                .instance_type,
            "p4d.24xlarge"
        );
        assert!(matches!(
            choose(&gpu(Some("amd-mi300x")), &us),
            Err(Error::Unsupported(_))
        ));
        // Explicit: a table type must match; another type is left to
        // provision, which asks EC2.
        let explicit = |name: &str, arch: Arch| NodeShape {
            instance_type: Some(name.into()),
            arch: Some(arch),
            ..NodeShape::default()
        };
        match choose(&explicit("t4g.micro", Arch::X86_64), &us) {
            Err(Error::Unsupported(m)) => {
                assert!(m.contains("arm64") && m.contains("asks for x86_64"), "{m}");
            }
            other => panic!("{other:?}"),
        }
        assert!(choose(&explicit("t4g.micro", Arch::Arm64), &us).is_ok());
        let c = choose(&explicit("m7g.large", Arch::X86_64), &us).unwrap();
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
        }
    }

    #[test]
    fn offerings_are_what_ec2_says_priced_from_the_table() {
        let us = settings("us-east-1");
        let o = offering(
            &info("g5.xlarge", Some(Arch::X86_64), Some("nvidia-a10g")),
            &us,
            Some(0.4),
        );
        assert_eq!(o.instance_type, "g5.xlarge");
        assert_eq!((o.cpu, o.memory_bytes, o.gpu), (4.0, 16 << 30, 1));
        assert_eq!(o.gpu_vendor.as_deref(), Some("nvidia"));
        assert_eq!(o.gpu_model.as_deref(), Some("nvidia-a10g"));
        assert_eq!(o.arch, Some(Arch::X86_64));
        assert_eq!((o.on_demand_usd, o.spot_usd), (Some(1.006), Some(0.4)));
        assert_eq!((o.disk_bytes, o.zones.len()), (None, 0));
        // The same price price_hint quotes, or none where it quotes none.
        let hint = choose(
            &NodeShape {
                instance_type: Some("g5.xlarge".into()),
                ..NodeShape::default()
            },
            &us,
        )
        .unwrap()
        .hint(CapacityType::OnDemand, 0.35)
        .unwrap();
        assert_eq!(o.on_demand_usd, Some(hint.hourly_usd));
        let eu = offering(
            &info(
                "g4ad.xlarge",
                Some(Arch::X86_64),
                Some("amd-radeon-pro-v520"),
            ),
            &settings("eu-west-1"),
            None,
        );
        assert_eq!(eu.on_demand_usd, None);
        let elsewhere = offering(
            &info("t3a.medium", Some(Arch::X86_64), None),
            &settings("ap-south-1"),
            None,
        );
        assert_eq!(elsewhere.on_demand_usd, None);
        let unknown = offering(&info("m7g.large", Some(Arch::Arm64), None), &us, Some(0.03));
        assert_eq!(
            (unknown.on_demand_usd, unknown.spot_usd),
            (None, Some(0.03))
        );

        assert_eq!(offered_names(&us).len(), TYPES.len());
        assert_eq!(offered_names(&us)[0], TYPES[0].name);
        let only = Settings {
            instance_types: Some(vec!["b".into(), "a".into(), "b".into()]),
            ..settings("us-east-1")
        };
        assert_eq!(offered_names(&only), ["b", "a"]);
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
