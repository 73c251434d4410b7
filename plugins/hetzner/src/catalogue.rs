//! The bundled Hetzner Cloud catalogue: server types, where they are sold and
//! what they cost, so that `price_hint` can answer without any I/O.
//!
//! Source: Hetzner Cloud price list, public, as of November 2025 (hourly
//! net prices in EUR, excluding VAT, as returned in the `prices` array of
//! `GET /v1/server_types`). The US locations (`ash`, `hil`) are 20 % dearer
//! than the EU ones and do not sell the `cx` and `cax` lines. Hetzner bills
//! by the hour up to a monthly cap; the hourly rate is what is priced here.
//!
//! Hetzner Cloud has no GPU server types in this catalogue and no spot market.

use wasmprov_guest::shape::{CatalogueEntry, Criteria, pick_for};
use wasmprov_guest::{Error, NodeShape, Result};

/// The locations the catalogue knows, with whether they are in the US.
pub const LOCATIONS: &[(&str, Region)] = &[
    ("fsn1", Region::Eu),
    ("nbg1", Region::Eu),
    ("hel1", Region::Eu),
    ("ash", Region::Us),
    ("hil", Region::Us),
];

/// Price region of a location.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Region {
    /// Germany and Finland.
    Eu,
    /// Ashburn, VA and Hillsboro, OR.
    Us,
}

/// CPU architecture of a server type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    /// Intel / AMD.
    X86,
    /// Ampere Altra.
    Arm,
}

impl Arch {
    /// The name Hetzner uses (`x86`, `arm`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::X86 => "x86",
            Self::Arm => "arm",
        }
    }

    /// The contract's name of the architecture.
    #[must_use]
    pub fn to_contract(self) -> wasmprov_guest::Arch {
        match self {
            Self::X86 => wasmprov_guest::Arch::X86_64,
            Self::Arm => wasmprov_guest::Arch::Arm64,
        }
    }

    /// Parses `x86` / `arm` (also `amd64`, `x86_64`, `arm64`, `aarch64`).
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "x86" | "x86_64" | "amd64" => Some(Self::X86),
            "arm" | "arm64" | "aarch64" => Some(Self::Arm),
            _ => None,
        }
    }
}

/// One server type of the bundled price list.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServerType {
    /// Hetzner's name, e.g. `cx22`.
    pub name: &'static str,
    /// vCPUs.
    pub cores: u32,
    /// Memory in GB as Hetzner lists it (these are GiB).
    pub memory_gb: u32,
    /// `shared` or `dedicated`.
    pub cpu_type: &'static str,
    /// CPU architecture.
    pub arch: Arch,
    /// Local disk in GB (GiB) that comes with the type.
    pub disk_gb: u32,
    /// Hourly net price in the EU locations, in 1/10000 EUR.
    pub eu_hourly: u32,
    /// Hourly net price in the US locations, in 1/10000 EUR; `None` when the
    /// type is not sold there.
    pub us_hourly: Option<u32>,
}

impl ServerType {
    /// Hourly net EUR price in `location`, or `None` when not sold there
    /// (or the location is unknown).
    #[must_use]
    pub fn hourly_eur(&self, location: &str) -> Option<f64> {
        let region = LOCATIONS.iter().find(|(l, _)| *l == location)?.1;
        self.hourly_in(region)
    }

    /// Hourly net EUR price in `region`, or `None` when not sold there.
    #[must_use]
    pub fn hourly_in(&self, region: Region) -> Option<f64> {
        let units = match region {
            Region::Eu => Some(self.eu_hourly),
            Region::Us => self.us_hourly,
        }?;
        Some(f64::from(units) / 10_000.0)
    }
}

#[allow(
    clippy::too_many_arguments,
    reason = "one row of the price list, in its columns"
)]
const fn st(
    name: &'static str,
    cores: u32,
    memory_gb: u32,
    cpu_type: &'static str,
    arch: Arch,
    disk_gb: u32,
    eu_hourly: u32,
    us_hourly: Option<u32>,
) -> ServerType {
    ServerType {
        name,
        cores,
        memory_gb,
        cpu_type,
        arch,
        disk_gb,
        eu_hourly,
        us_hourly,
    }
}

/// The bundled price list (Hetzner Cloud price list, public, as of November
/// 2025): name, cores, memory GB, CPU type, architecture, disk GB, hourly
/// net EUR prices in 1/10000 EUR, EU and US.
pub const SERVER_TYPES: &[ServerType] = &[
    st("cx22", 2, 4, "shared", Arch::X86, 40, 60, None),
    st("cx32", 4, 8, "shared", Arch::X86, 80, 108, None),
    st("cx42", 8, 16, "shared", Arch::X86, 160, 259, None),
    st("cx52", 16, 32, "shared", Arch::X86, 320, 513, None),
    st("cpx11", 2, 2, "shared", Arch::X86, 40, 69, Some(83)),
    st("cpx21", 3, 4, "shared", Arch::X86, 80, 119, Some(143)),
    st("cpx31", 4, 8, "shared", Arch::X86, 160, 215, Some(258)),
    st("cpx41", 8, 16, "shared", Arch::X86, 240, 399, Some(478)),
    st("cpx51", 16, 32, "shared", Arch::X86, 360, 869, Some(1042)),
    st("cax11", 2, 4, "shared", Arch::Arm, 40, 60, None),
    st("cax21", 4, 8, "shared", Arch::Arm, 80, 103, None),
    st("ccx13", 2, 8, "dedicated", Arch::X86, 80, 198, Some(237)),
    st("ccx23", 4, 16, "dedicated", Arch::X86, 160, 388, Some(465)),
    st("ccx33", 8, 32, "dedicated", Arch::X86, 240, 767, Some(921)),
    st(
        "ccx43",
        16,
        64,
        "dedicated",
        Arch::X86,
        360,
        1527,
        Some(1832),
    ),
];

/// Whether `location` is a Hetzner location this catalogue knows.
#[must_use]
pub fn is_known_location(location: &str) -> bool {
    LOCATIONS.iter().any(|(l, _)| *l == location)
}

/// The server type the catalogue picked for a shape, and its price.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Choice {
    /// The server type.
    pub server_type: &'static ServerType,
    /// Where it will run.
    pub location: &'static str,
    /// Hourly net price there, in EUR.
    pub hourly_eur: f64,
}

/// Picks the cheapest server type for `shape` in `location` (the shape's
/// zone, or the configured default location when it has none).
///
/// An explicit `instance_type` in the shape wins (and must exist); otherwise
/// only types of `arch` are considered when it is set.
///
/// # Errors
/// - [`Error::Unsupported`] for spot capacity, GPUs, an unknown location, an
///   unknown type, or a shape bigger than every type;
/// - [`Error::Capacity`] (zone) when fitting types exist but none is sold in
///   the location.
pub fn choose(shape: &NodeShape, default_location: &str, arch: Option<Arch>) -> Result<Choice> {
    if shape.capacity_type == wasmprov_guest::CapacityType::Spot {
        return Err(Error::Unsupported(
            "Hetzner Cloud has no spot capacity; ask for on-demand".into(),
        ));
    }
    if shape.gpu > 0 {
        return Err(Error::Unsupported(
            "Hetzner Cloud offers no GPU server types".into(),
        ));
    }
    let wanted = shape
        .zone
        .as_deref()
        .map(str::trim)
        .filter(|z| !z.is_empty())
        .unwrap_or(default_location);
    let Some(&(location, region)) = LOCATIONS
        .iter()
        .find(|(l, _)| l.eq_ignore_ascii_case(wanted))
    else {
        return Err(Error::Unsupported(format!(
            "{:?} is not a Hetzner Cloud location (known: {})",
            wanted.to_ascii_lowercase(),
            LOCATIONS
                .iter()
                .map(|(l, _)| *l)
                .collect::<Vec<_>>()
                .join(", ")
        )));
    };
    // Type names are lowercase; only a shape that names one pays for the copy.
    let explicit = shape
        .instance_type
        .as_deref()
        .map(|t| t.trim().to_ascii_lowercase());
    let want = Criteria {
        zone: Some(location),
        instance_type: explicit.as_deref(),
        ..Criteria::of(shape)
    };
    // The static table seen from one region, on the stack: no per-call
    // catalogue on the heap, and the location is looked up once.
    let priced: [InRegion; SERVER_TYPES.len()] = std::array::from_fn(|i| InRegion {
        server_type: &SERVER_TYPES[i],
        region,
    });
    let picked = pick_for(
        &want,
        priced
            .iter()
            .filter(|p| explicit.is_some() || arch.is_none_or(|a| a == p.server_type.arch)),
    )?;
    Ok(Choice {
        server_type: picked.instance_type.server_type,
        location,
        hourly_eur: picked.hourly_usd,
    })
}

/// A server type as sold in one price region.
struct InRegion {
    server_type: &'static ServerType,
    region: Region,
}

/// [`pick_for`] compares prices only, so they stay in EUR here (the caller
/// converts). The zone was resolved to the region already.
impl CatalogueEntry for InRegion {
    fn name(&self) -> &str {
        self.server_type.name
    }
    fn cpu(&self) -> f64 {
        f64::from(self.server_type.cores)
    }
    fn memory_bytes(&self) -> u64 {
        u64::from(self.server_type.memory_gb) << 30
    }
    fn arch(&self) -> Option<wasmprov_guest::Arch> {
        Some(self.server_type.arch.to_contract())
    }
    fn disk_bytes(&self) -> Option<u64> {
        Some(u64::from(self.server_type.disk_gb) << 30)
    }
    fn price_in(&self, _zone: Option<&str>) -> Option<f64> {
        self.server_type.hourly_in(self.region)
    }
}

/// The `offerings` answer: every server type, the locations it is sold in,
/// and its price in `default_location`'s region (where `price_hint` prices
/// a shape without a zone), converted at `eur_usd`. Types of another
/// architecture than `arch` are left out, as `price_hint` leaves them out.
#[must_use]
pub fn offerings(
    default_location: &str,
    arch: Option<Arch>,
    eur_usd: f64,
) -> Vec<wasmprov_guest::Offering> {
    let region = LOCATIONS
        .iter()
        .find(|(l, _)| *l == default_location)
        .map(|(_, r)| *r);
    SERVER_TYPES
        .iter()
        .filter(|t| arch.is_none_or(|a| a == t.arch))
        .map(|t| wasmprov_guest::Offering {
            instance_type: t.name.to_string(),
            cpu: f64::from(t.cores),
            memory_bytes: u64::from(t.memory_gb) << 30,
            arch: Some(t.arch.to_contract()),
            disk_bytes: Some(u64::from(t.disk_gb) << 30),
            zones: LOCATIONS
                .iter()
                .filter(|(_, r)| t.hourly_in(*r).is_some())
                .map(|(l, _)| (*l).to_string())
                .collect(),
            on_demand_usd: region.and_then(|r| t.hourly_in(r)).map(|eur| eur * eur_usd),
            ..wasmprov_guest::Offering::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmprov_guest::{CapacityScope, CapacityType};

    fn shape(cpu: f64, gib: u64) -> NodeShape {
        NodeShape::new(cpu, gib << 30)
    }

    #[test]
    fn catalogue_has_the_fifteen_types_once() {
        let mut names: Vec<&str> = SERVER_TYPES.iter().map(|t| t.name).collect();
        assert_eq!(names.len(), 15);
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 15);
        for t in SERVER_TYPES {
            // US prices are the EU price plus 20 %, rounded.
            if let Some(us) = t.us_hourly {
                let expected = f64::from(t.eu_hourly) * 1.2;
                assert!((f64::from(us) - expected).abs() <= 1.0, "{}", t.name);
            }
            assert!(matches!(t.cpu_type, "shared" | "dedicated"));
        }
    }

    #[test]
    fn prices_match_the_api_price_list() {
        // Values as the API serves them (`price_hourly.net`).
        let cases = [
            ("cx22", "fsn1", Some(0.0060)),
            ("cx22", "ash", None),
            ("cpx11", "nbg1", Some(0.0069)),
            ("cpx11", "ash", Some(0.0083)),
            ("cpx51", "hil", Some(0.1042)),
            ("ccx43", "hel1", Some(0.1527)),
            ("cax21", "fsn1", Some(0.0103)),
            ("cax21", "hil", None),
            ("cx22", "nowhere", None),
        ];
        for (name, loc, want) in cases {
            let t = SERVER_TYPES.iter().find(|t| t.name == name).unwrap();
            let got = t.hourly_eur(loc);
            match (got, want) {
                (Some(g), Some(w)) => assert!((g - w).abs() < 1e-9, "{name} {loc}: {g}"),
                (g, w) => assert_eq!(g, w, "{name} {loc}"),
            }
        }
    }

    #[test]
    fn cheapest_fitting_type_is_chosen() {
        let cases: &[(NodeShape, Option<Arch>, &str, &str, f64)] = &[
            // cax11 and cx22 cost the same; the name breaks the tie.
            (shape(1.0, 1), None, "cax11", "fsn1", 0.0060),
            (shape(1.0, 1), Some(Arch::X86), "cx22", "fsn1", 0.0060),
            (shape(2.0, 4), Some(Arch::X86), "cx22", "fsn1", 0.0060),
            (shape(3.0, 4), None, "cax21", "fsn1", 0.0103),
            (shape(3.0, 4), Some(Arch::X86), "cx32", "fsn1", 0.0108),
            (shape(16.0, 64), None, "ccx43", "fsn1", 0.1527),
            (
                NodeShape {
                    zone: Some("ash".into()),
                    ..shape(1.0, 1)
                },
                None,
                "cpx11",
                "ash",
                0.0083,
            ),
            (
                NodeShape {
                    zone: Some("HEL1".into()),
                    ..shape(8.0, 16)
                },
                None,
                "cx42",
                "hel1",
                0.0259,
            ),
            // An explicit type wins over size and architecture.
            (
                NodeShape {
                    instance_type: Some("cax11".into()),
                    ..shape(64.0, 512)
                },
                Some(Arch::X86),
                "cax11",
                "fsn1",
                0.0060,
            ),
        ];
        for (s, arch, name, loc, eur) in cases {
            let c = choose(s, "fsn1", *arch).unwrap();
            assert_eq!(c.server_type.name, *name, "{s:?}");
            assert_eq!(c.location, *loc, "{s:?}");
            assert!((c.hourly_eur - eur).abs() < 1e-9, "{s:?}: {}", c.hourly_eur);
        }
        // The default location applies when the shape has none.
        let c = choose(&shape(1.0, 1), "hil", None).unwrap();
        assert_eq!((c.server_type.name, c.location), ("cpx11", "hil"));
    }

    #[test]
    fn impossible_shapes_are_refused() {
        let unsupported = [
            NodeShape {
                capacity_type: CapacityType::Spot,
                ..shape(1.0, 1)
            },
            NodeShape {
                gpu: 1,
                ..shape(1.0, 1)
            },
            NodeShape {
                zone: Some("us-east-1a".into()),
                ..shape(1.0, 1)
            },
            NodeShape {
                instance_type: Some("cx11".into()),
                ..shape(1.0, 1)
            },
            shape(32.0, 1),
        ];
        for s in unsupported {
            assert!(
                matches!(choose(&s, "fsn1", None), Err(Error::Unsupported(_))),
                "{s:?}"
            );
        }
        let not_in_us = NodeShape {
            instance_type: Some("cx22".into()),
            zone: Some("ash".into()),
            ..shape(1.0, 1)
        };
        assert!(matches!(
            choose(&not_in_us, "fsn1", None),
            Err(Error::Capacity {
                scope: CapacityScope::Zone,
                ..
            })
        ));
        // No arm type is sold in the US.
        assert!(matches!(
            choose(
                &NodeShape {
                    zone: Some("ash".into()),
                    ..shape(1.0, 1)
                },
                "fsn1",
                Some(Arch::Arm)
            ),
            Err(Error::Capacity { .. })
        ));
    }

    #[test]
    fn architectures_parse() {
        assert_eq!(Arch::parse("ARM64"), Some(Arch::Arm));
        assert_eq!(Arch::parse(" x86_64"), Some(Arch::X86));
        assert_eq!(Arch::parse("riscv"), None);
        assert_eq!(Arch::X86.as_str(), "x86");
    }
}
