//! Matching a [`NodeShape`] to the cheapest instance type that satisfies it,
//! by the contract's one rule (`wasmprov_api::fit`, which the host also
//! ranks offerings by).
//!
//! Every provider has a catalogue of instance types with prices; the rule is
//! the same everywhere: an explicit instance type in the shape wins over
//! CPU, memory and GPU count (and must exist); otherwise the cheapest type
//! with at least the CPU, memory and GPU count asked for, of the GPU vendor
//! asked for, offered in the zone asked for. The architecture, GPU model and
//! disk asked for bind either way: a type whose catalogue entry does not say
//! it has them does not match, so a plugin whose catalogue cannot tell
//! refuses such shapes instead of guessing.
//!
//! [`pick`] works over any catalogue whose entries implement
//! [`CatalogueEntry`]: the owned [`InstanceType`] for catalogues read from
//! configuration, or a provider's own `static` table, which then needs no
//! allocation per call. [`offerings`] turns a catalogue into the contract's
//! `offerings` answer, so `price_hint` and `offerings` agree by construction.

use wasmprov_api::fit::{Have, Want};

use crate::{Arch, CapacityScope, Error, NodeShape, Offering, Result};

/// What [`pick`] needs to know about one entry of a catalogue.
pub trait CatalogueEntry {
    /// The cloud's name of the type.
    fn name(&self) -> &str;
    /// vCPUs.
    fn cpu(&self) -> f64;
    /// Memory in bytes.
    fn memory_bytes(&self) -> u64;
    /// GPUs.
    fn gpu(&self) -> u32 {
        0
    }
    /// GPU vendor, when the type has GPUs.
    fn gpu_vendor(&self) -> Option<&str> {
        None
    }
    /// GPU model (`"nvidia-a10g"`), when the type has GPUs and it is known.
    fn gpu_model(&self) -> Option<&str> {
        None
    }
    /// CPU architecture, when known.
    fn arch(&self) -> Option<Arch> {
        None
    }
    /// Disk that comes with the type, in bytes, when fixed.
    fn disk_bytes(&self) -> Option<u64> {
        None
    }
    /// The hourly price in `zone` (or wherever it runs when `None`), or
    /// `None` when the type is not offered there.
    fn price_in(&self, zone: Option<&str>) -> Option<f64>;
    /// The spot price per hour wherever it runs, when offered and known.
    fn spot_price(&self) -> Option<f64> {
        None
    }
    /// The zones it is offered in; empty is wherever the plugin creates nodes.
    fn zones(&self) -> Vec<String> {
        Vec::new()
    }

    /// What the entry has, for [`wasmprov_api::fit`].
    fn have(&self) -> Have<'_> {
        Have {
            cpu: self.cpu(),
            memory_bytes: self.memory_bytes(),
            gpu: self.gpu(),
            gpu_vendor: self.gpu_vendor(),
            gpu_model: self.gpu_model(),
            arch: self.arch(),
            disk_bytes: self.disk_bytes(),
        }
    }

    /// Whether the type has what `want` asks for beyond what an explicit
    /// type overrides: architecture, GPU model and disk.
    fn binds(&self, want: &Criteria<'_>) -> bool {
        want.want().bound(&self.have())
    }

    /// Whether the type has what `want` asks for (ignoring zone).
    fn satisfies(&self, want: &Criteria<'_>) -> bool {
        want.want().fits(&self.have())
    }

    /// The entry as the contract's offering.
    fn offering(&self) -> Offering {
        Offering {
            instance_type: self.name().to_string(),
            cpu: self.cpu(),
            memory_bytes: self.memory_bytes(),
            gpu: self.gpu(),
            gpu_vendor: self.gpu_vendor().map(str::to_ascii_lowercase),
            gpu_model: self.gpu_model().map(str::to_ascii_lowercase),
            arch: self.arch(),
            disk_bytes: self.disk_bytes(),
            zones: self.zones(),
            on_demand_usd: self.price_in(None),
            spot_usd: self.spot_price(),
        }
    }
}

/// One instance type of a catalogue written as a `const` table: no struct
/// or trait impl per plugin. Rows are [`Entry::new`] with what most types
/// have; GPUs, architecture, zones and a spot price are added with the
/// `const` builders.
///
/// ```
/// use wasmprov_guest::shape::{self, Entry};
/// use wasmprov_guest::{Arch, NodeShape};
///
/// const TYPES: &[Entry] = &[
///     Entry::new("small", 1, 1024, 25, 0.0075).arch(Arch::X86_64),
///     Entry::new("gpu", 8, 65536, 640, 1.5)
///         .gpus(1, "nvidia", "nvidia-a100")
///         .zones(&["us-east"]),
/// ];
/// let pick = shape::pick(&NodeShape::new(1.0, 1 << 30), TYPES).unwrap();
/// assert_eq!(pick.instance_type.name, "small");
/// assert_eq!(shape::offerings(TYPES)[1].zones, ["us-east"]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Entry {
    /// The cloud's name of the type.
    pub name: &'static str,
    /// vCPUs.
    pub cpu: u32,
    /// Memory in MiB.
    pub memory_mib: u64,
    /// Disk that comes with the type, in GiB (0: none).
    pub disk_gib: u64,
    /// USD per hour.
    pub hourly_usd: f64,
    /// GPUs.
    pub gpu: u32,
    /// GPU vendor (`nvidia`), when it has GPUs.
    pub gpu_vendor: Option<&'static str>,
    /// GPU model (`nvidia-h100`), when known.
    pub gpu_model: Option<&'static str>,
    /// CPU architecture, when known.
    pub arch: Option<Arch>,
    /// Zones it is sold in; empty is every zone.
    pub zones: &'static [&'static str],
    /// Spot price per hour, when offered.
    pub spot_usd: Option<f64>,
}

impl Entry {
    /// A type with `cpu` vCPUs, `memory_mib` of memory, a `disk_gib` disk
    /// and an hourly price, sold in every zone.
    #[must_use]
    pub const fn new(
        name: &'static str,
        cpu: u32,
        memory_mib: u64,
        disk_gib: u64,
        hourly_usd: f64,
    ) -> Self {
        Self {
            name,
            cpu,
            memory_mib,
            disk_gib,
            hourly_usd,
            gpu: 0,
            gpu_vendor: None,
            gpu_model: None,
            arch: None,
            zones: &[],
            spot_usd: None,
        }
    }

    /// With `count` GPUs of `vendor` and `model`.
    #[must_use]
    pub const fn gpus(mut self, count: u32, vendor: &'static str, model: &'static str) -> Self {
        self.gpu = count;
        self.gpu_vendor = Some(vendor);
        self.gpu_model = Some(model);
        self
    }

    /// With its architecture.
    #[must_use]
    pub const fn arch(mut self, arch: Arch) -> Self {
        self.arch = Some(arch);
        self
    }

    /// Sold only in `zones`.
    #[must_use]
    pub const fn zones(mut self, zones: &'static [&'static str]) -> Self {
        self.zones = zones;
        self
    }

    /// With a spot price.
    #[must_use]
    pub const fn spot(mut self, usd: f64) -> Self {
        self.spot_usd = Some(usd);
        self
    }
}

impl CatalogueEntry for Entry {
    fn name(&self) -> &str {
        self.name
    }
    fn cpu(&self) -> f64 {
        f64::from(self.cpu)
    }
    fn memory_bytes(&self) -> u64 {
        self.memory_mib << 20
    }
    fn gpu(&self) -> u32 {
        self.gpu
    }
    fn gpu_vendor(&self) -> Option<&str> {
        self.gpu_vendor
    }
    fn gpu_model(&self) -> Option<&str> {
        self.gpu_model
    }
    fn arch(&self) -> Option<Arch> {
        self.arch
    }
    fn disk_bytes(&self) -> Option<u64> {
        (self.disk_gib > 0).then_some(self.disk_gib << 30)
    }
    fn price_in(&self, zone: Option<&str>) -> Option<f64> {
        match zone {
            Some(z) if !self.zones.is_empty() && !self.zones.contains(&z) => None,
            _ => Some(self.hourly_usd),
        }
    }
    fn spot_price(&self) -> Option<f64> {
        self.spot_usd
    }
    fn zones(&self) -> Vec<String> {
        self.zones.iter().map(|z| (*z).to_string()).collect()
    }
}

/// The contract's `offerings` answer for a catalogue: one offering per
/// entry, in catalogue order.
pub fn offerings<'a, T: CatalogueEntry + 'a>(
    catalogue: impl IntoIterator<Item = &'a T>,
) -> Vec<Offering> {
    catalogue
        .into_iter()
        .map(CatalogueEntry::offering)
        .collect()
}

/// What a shape asks of an instance type, borrowed: what [`pick_for`] matches.
/// [`Criteria::of`] takes it from a [`NodeShape`]; a provider that normalizes
/// the zone or type name first sets those fields itself.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Criteria<'a> {
    /// vCPUs at least.
    pub cpu: f64,
    /// Memory in bytes at least.
    pub memory_bytes: u64,
    /// GPUs at least.
    pub gpu: u32,
    /// GPU vendor, compared ignoring case, when GPUs are asked for.
    pub gpu_vendor: Option<&'a str>,
    /// GPU model, compared ignoring case.
    pub gpu_model: Option<&'a str>,
    /// Architecture.
    pub arch: Option<Arch>,
    /// Disk in bytes at least. A provider that sizes the disk itself (a root
    /// volume) sets this to `None` before matching.
    pub disk_bytes: Option<u64>,
    /// Zone the price must be offered in.
    pub zone: Option<&'a str>,
    /// An explicit type, which wins over the rest.
    pub instance_type: Option<&'a str>,
}

impl<'a> Criteria<'a> {
    /// The sizes and bindings, as the contract's one matching rule takes them.
    #[must_use]
    pub fn want(&self) -> Want<'a> {
        Want {
            cpu: self.cpu,
            memory_bytes: self.memory_bytes,
            gpu: self.gpu,
            gpu_vendor: self.gpu_vendor,
            gpu_model: self.gpu_model,
            arch: self.arch,
            disk_bytes: self.disk_bytes,
        }
    }

    /// The same criteria in `zone` when they name none (a provider's
    /// configured region or location).
    #[must_use]
    pub fn or_zone(mut self, zone: &'a str) -> Self {
        self.zone = Some(self.zone.unwrap_or(zone));
        self
    }

    /// The criteria of `shape`, as written.
    #[must_use]
    pub fn of(shape: &'a NodeShape) -> Self {
        Self {
            cpu: shape.cpu,
            memory_bytes: shape.memory_bytes,
            gpu: shape.gpu,
            gpu_vendor: shape.gpu_vendor.as_deref(),
            gpu_model: shape.gpu_model.as_deref(),
            arch: shape.arch,
            disk_bytes: shape.disk_bytes,
            zone: shape.zone.as_deref(),
            instance_type: shape.instance_type.as_deref(),
        }
    }
}

/// One instance type of a catalogue.
#[derive(Clone, Debug, PartialEq)]
pub struct InstanceType {
    /// The cloud's name of the type.
    pub name: String,
    /// vCPUs.
    pub cpu: f64,
    /// Memory in bytes.
    pub memory_bytes: u64,
    /// GPUs.
    pub gpu: u32,
    /// GPU vendor, lowercase, when `gpu > 0`.
    pub gpu_vendor: Option<String>,
    /// GPU model, lowercase (`"nvidia-t4"`), when `gpu > 0` and known.
    pub gpu_model: Option<String>,
    /// CPU architecture, when known.
    pub arch: Option<Arch>,
    /// Disk that comes with the type, in bytes, when fixed.
    pub disk_bytes: Option<u64>,
    /// Spot price per hour, when offered and known.
    pub spot_hourly_usd: Option<f64>,
    /// Hourly price in USD, per zone where offered (zone, price). An empty
    /// list means "offered everywhere at `default_hourly_usd`".
    pub zone_prices: Vec<(String, f64)>,
    /// Price used when no zone is asked for (usually the cheapest zone's).
    pub default_hourly_usd: f64,
}

impl InstanceType {
    /// The price in `zone`, or `None` when the type is not offered there.
    #[must_use]
    pub fn price_in(&self, zone: Option<&str>) -> Option<f64> {
        match zone {
            None => Some(self.default_hourly_usd),
            Some(_) if self.zone_prices.is_empty() => Some(self.default_hourly_usd),
            Some(z) => self
                .zone_prices
                .iter()
                .find(|(name, _)| name == z)
                .map(|(_, p)| *p),
        }
    }

    /// Whether the type has what the shape asks for (ignoring zone).
    #[must_use]
    pub fn satisfies(&self, shape: &NodeShape) -> bool {
        CatalogueEntry::satisfies(self, &Criteria::of(shape))
    }
}

impl CatalogueEntry for InstanceType {
    fn name(&self) -> &str {
        &self.name
    }
    fn cpu(&self) -> f64 {
        self.cpu
    }
    fn memory_bytes(&self) -> u64 {
        self.memory_bytes
    }
    fn gpu(&self) -> u32 {
        self.gpu
    }
    fn gpu_vendor(&self) -> Option<&str> {
        self.gpu_vendor.as_deref()
    }
    fn gpu_model(&self) -> Option<&str> {
        self.gpu_model.as_deref()
    }
    fn arch(&self) -> Option<Arch> {
        self.arch
    }
    fn disk_bytes(&self) -> Option<u64> {
        self.disk_bytes
    }
    fn price_in(&self, zone: Option<&str>) -> Option<f64> {
        InstanceType::price_in(self, zone)
    }
    fn spot_price(&self) -> Option<f64> {
        self.spot_hourly_usd
    }
    fn zones(&self) -> Vec<String> {
        self.zone_prices.iter().map(|(z, _)| z.clone()).collect()
    }
}

/// A chosen type and its price in the zone asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice<'a, T = InstanceType> {
    /// The type.
    pub instance_type: &'a T,
    /// Its hourly price where it will run.
    pub hourly_usd: f64,
}

impl<T: CatalogueEntry> Choice<'_, T> {
    /// The price hint of this choice, as `capacity_type`.
    #[must_use]
    pub fn price_hint(&self, capacity_type: crate::CapacityType) -> crate::PriceHint {
        crate::PriceHint {
            hourly_usd: self.hourly_usd,
            capacity_type,
            instance_type: self.instance_type.name().to_string(),
        }
    }
}

/// Picks the instance type for `shape` from `catalogue`.
///
/// # Errors
/// - [`Error::Unsupported`] when an explicit type does not exist or no type is
///   big enough;
/// - [`Error::Capacity`] with [`CapacityScope::Zone`] when types exist but
///   none is offered in the zone asked for.
pub fn pick<'a, T: CatalogueEntry + 'a>(
    shape: &NodeShape,
    catalogue: impl IntoIterator<Item = &'a T>,
) -> Result<Choice<'a, T>> {
    pick_for(&Criteria::of(shape), catalogue)
}

/// [`pick`] for criteria given field by field. One pass over the catalogue;
/// allocates only for an error message.
///
/// # Errors
/// As [`pick`].
pub fn pick_for<'a, T: CatalogueEntry + 'a>(
    want: &Criteria<'_>,
    catalogue: impl IntoIterator<Item = &'a T>,
) -> Result<Choice<'a, T>> {
    let zone = want.zone;
    if let Some(name) = want.instance_type {
        let t = catalogue
            .into_iter()
            .find(|t| t.name() == name)
            .ok_or_else(|| Error::Unsupported(format!("instance type {name:?} does not exist")))?;
        if !t.binds(want) {
            return Err(Error::Unsupported(format!(
                "instance type {name:?} does not have {}",
                binding_text(want)
            )));
        }
        let hourly_usd = t.price_in(zone).ok_or_else(|| Error::Capacity {
            scope: CapacityScope::Zone,
            message: format!(
                "instance type {name:?} is not offered in {}",
                zone.unwrap_or("?")
            ),
        })?;
        return Ok(Choice {
            instance_type: t,
            hourly_usd,
        });
    }
    let mut any_fits = false;
    let mut best: Option<Choice<'a, T>> = None;
    for t in catalogue {
        if !t.satisfies(want) {
            continue;
        }
        any_fits = true;
        let Some(price) = t.price_in(zone) else {
            continue;
        };
        let better = best.as_ref().is_none_or(|b| {
            price
                .total_cmp(&b.hourly_usd)
                .then_with(|| t.name().cmp(b.instance_type.name()))
                .is_lt()
        });
        if better {
            best = Some(Choice {
                instance_type: t,
                hourly_usd: price,
            });
        }
    }
    if let Some(best) = best {
        return Ok(best);
    }
    if !any_fits {
        let binding = binding_text(want);
        return Err(Error::Unsupported(format!(
            "no instance type has {} vCPU, {} MiB and {} GPU{}{}",
            want.cpu,
            want.memory_bytes >> 20,
            want.gpu,
            want.gpu_vendor
                .map(|v| format!(" ({v})"))
                .unwrap_or_default(),
            if binding.is_empty() {
                String::new()
            } else {
                format!(" with {binding}")
            }
        )));
    }
    Err(Error::Capacity {
        scope: CapacityScope::Zone,
        message: format!(
            "no instance type big enough is offered in {}",
            zone.unwrap_or("any zone")
        ),
    })
}

/// What of `want` an explicit type must also have, in words (empty if nothing).
fn binding_text(want: &Criteria<'_>) -> String {
    let mut parts = Vec::new();
    if let Some(a) = want.arch {
        parts.push(format!("architecture {a}"));
    }
    if let Some(m) = want.gpu_model {
        parts.push(format!("GPU model {m}"));
    }
    if let Some(d) = want.disk_bytes {
        parts.push(format!("a disk of {} GiB", d.div_ceil(1 << 30)));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(
        name: &str,
        cpu: f64,
        gib: u64,
        gpu: u32,
        vendor: Option<&str>,
        prices: &[(&str, f64)],
    ) -> InstanceType {
        InstanceType {
            name: name.into(),
            cpu,
            memory_bytes: gib << 30,
            gpu,
            gpu_vendor: vendor.map(Into::into),
            gpu_model: None,
            arch: Some(Arch::X86_64),
            disk_bytes: None,
            spot_hourly_usd: None,
            zone_prices: prices.iter().map(|(z, p)| ((*z).into(), *p)).collect(),
            default_hourly_usd: prices.iter().map(|(_, p)| *p).fold(f64::INFINITY, f64::min),
        }
    }

    fn catalogue() -> Vec<InstanceType> {
        vec![
            t("small", 2.0, 4, 0, None, &[("a", 0.01), ("b", 0.012)]),
            t("medium", 4.0, 8, 0, None, &[("a", 0.02), ("b", 0.024)]),
            t("big-cheap", 8.0, 16, 0, None, &[("b", 0.03)]),
            t("big", 8.0, 32, 0, None, &[("a", 0.05), ("b", 0.06)]),
            t("gpu-n", 8.0, 32, 1, Some("nvidia"), &[("a", 0.9)]),
            t("gpu-a", 8.0, 32, 1, Some("amd"), &[("a", 0.7)]),
        ]
    }

    fn shape(cpu: f64, gib: u64) -> NodeShape {
        NodeShape::new(cpu, gib << 30)
    }

    #[test]
    fn cheapest_fitting_type_wins() {
        let c = catalogue();
        let cases: &[(NodeShape, &str, f64)] = &[
            (shape(1.0, 1), "small", 0.01),
            (shape(2.0, 4), "small", 0.01),
            (shape(2.5, 4), "medium", 0.02),
            (shape(6.0, 12), "big-cheap", 0.03),
            (
                NodeShape {
                    zone: Some("a".into()),
                    ..shape(6.0, 12)
                },
                "big",
                0.05,
            ),
            (
                NodeShape {
                    zone: Some("b".into()),
                    ..shape(1.0, 1)
                },
                "small",
                0.012,
            ),
            (
                NodeShape {
                    gpu: 1,
                    ..shape(1.0, 1)
                },
                "gpu-a",
                0.7,
            ),
            (
                NodeShape {
                    gpu: 1,
                    gpu_vendor: Some("NVIDIA".into()),
                    ..shape(1.0, 1)
                },
                "gpu-n",
                0.9,
            ),
            (
                NodeShape {
                    instance_type: Some("big".into()),
                    ..shape(1.0, 1)
                },
                "big",
                0.05,
            ),
        ];
        for (s, name, price) in cases {
            let got = pick(s, &c).unwrap();
            assert_eq!(got.instance_type.name, *name, "{s:?}");
            assert!((got.hourly_usd - price).abs() < 1e-12, "{s:?}");
        }
    }

    #[test]
    fn impossible_shapes_say_why() {
        let c = catalogue();
        assert!(matches!(
            pick(&shape(64.0, 1), &c),
            Err(Error::Unsupported(_))
        ));
        assert!(matches!(
            pick(
                &NodeShape {
                    gpu: 2,
                    ..shape(1.0, 1)
                },
                &c
            ),
            Err(Error::Unsupported(_))
        ));
        assert!(matches!(
            pick(
                &NodeShape {
                    instance_type: Some("nope".into()),
                    ..shape(1.0, 1)
                },
                &c
            ),
            Err(Error::Unsupported(_))
        ));
        assert!(matches!(
            pick(
                &NodeShape {
                    gpu: 1,
                    zone: Some("b".into()),
                    ..shape(1.0, 1)
                },
                &c
            ),
            Err(Error::Capacity {
                scope: CapacityScope::Zone,
                ..
            })
        ));
        assert!(matches!(
            pick(
                &NodeShape {
                    instance_type: Some("big-cheap".into()),
                    zone: Some("a".into()),
                    ..shape(1.0, 1)
                },
                &c
            ),
            Err(Error::Capacity {
                scope: CapacityScope::Zone,
                ..
            })
        ));
    }

    #[test]
    fn arch_gpu_model_and_disk_bind() {
        let mut c = catalogue();
        c.push(InstanceType {
            arch: Some(Arch::Arm64),
            ..t("arm-cheap", 8.0, 32, 0, None, &[("a", 0.001)])
        });
        c[4].gpu_model = Some("nvidia-t4".into());
        c.push(InstanceType {
            gpu_model: Some("nvidia-a10g".into()),
            disk_bytes: Some(250 << 30),
            ..t("gpu-a10", 8.0, 32, 1, Some("nvidia"), &[("a", 1.2)])
        });
        let name = |s: &NodeShape| pick(s, &c).map(|ch| ch.instance_type.name.clone());
        assert_eq!(name(&shape(1.0, 1)).unwrap(), "arm-cheap");
        let x86 = NodeShape {
            arch: Some(Arch::X86_64),
            ..shape(1.0, 1)
        };
        assert_eq!(name(&x86).unwrap(), "small", "x86 never lands on ARM");
        let named_arm = NodeShape {
            instance_type: Some("arm-cheap".into()),
            ..x86.clone()
        };
        match name(&named_arm) {
            Err(Error::Unsupported(m)) => assert!(m.contains("architecture x86_64"), "{m}"),
            other => panic!("{other:?}"),
        }
        let gpu = |model: &str| NodeShape {
            gpu: 1,
            gpu_vendor: Some("nvidia".into()),
            gpu_model: Some(model.into()),
            ..shape(4.0, 16)
        };
        assert_eq!(name(&gpu("NVIDIA-A10G")).unwrap(), "gpu-a10");
        assert_eq!(name(&gpu("nvidia-t4")).unwrap(), "gpu-n");
        match name(&gpu("nvidia-a100")) {
            Err(Error::Unsupported(m)) => assert!(m.contains("GPU model nvidia-a100"), "{m}"),
            other => panic!("{other:?}"),
        }
        let disk = |gib: u64| NodeShape {
            disk_bytes: Some(gib << 30),
            ..shape(1.0, 1)
        };
        assert_eq!(name(&disk(200)).unwrap(), "gpu-a10");
        assert!(matches!(name(&disk(300)), Err(Error::Unsupported(_))));
        let offered = offerings(&c);
        assert_eq!(offered.len(), c.len());
        let a10 = offered
            .iter()
            .find(|o| o.instance_type == "gpu-a10")
            .unwrap();
        assert_eq!(a10.gpu_model.as_deref(), Some("nvidia-a10g"));
        assert_eq!(a10.on_demand_usd, Some(1.2));
        assert_eq!(a10.zones, ["a"]);
    }

    /// A provider's own static table works without building `InstanceType`s.
    #[test]
    fn static_tables_pick_like_owned_ones() {
        struct Row(&'static str, u32, u64, f64);
        impl CatalogueEntry for Row {
            fn name(&self) -> &str {
                self.0
            }
            fn cpu(&self) -> f64 {
                f64::from(self.1)
            }
            fn memory_bytes(&self) -> u64 {
                self.2 << 30
            }
            fn price_in(&self, zone: Option<&str>) -> Option<f64> {
                (zone != Some("nowhere")).then_some(self.3)
            }
        }
        static ROWS: &[Row] = &[
            Row("b", 2, 4, 0.02),
            Row("a", 2, 4, 0.02),
            Row("c", 8, 16, 0.01),
        ];
        // Equal prices: the name breaks the tie, as with owned types.
        assert_eq!(pick(&shape(1.0, 1), ROWS).unwrap().instance_type.0, "c");
        let small = ROWS.iter().filter(|r| r.1 < 8);
        assert_eq!(pick(&shape(1.0, 1), small).unwrap().instance_type.0, "a");
        let one = shape(1.0, 1);
        let want = Criteria {
            zone: Some("nowhere"),
            ..Criteria::of(&one)
        };
        assert!(matches!(
            pick_for(&want, ROWS),
            Err(Error::Capacity {
                scope: CapacityScope::Zone,
                ..
            })
        ));
        let named = Criteria {
            instance_type: Some("b"),
            ..Criteria::of(&one)
        };
        assert_eq!(pick_for(&named, ROWS).unwrap().instance_type.0, "b");
    }
}
