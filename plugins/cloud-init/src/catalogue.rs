//! The operator's instance type catalogue (`instance_types`), for price
//! hints and for choosing the instance type a shape asks for.
//!
//! ```json
//! [
//!   {"name": "small", "cpu": 2, "memory_gib": 4, "hourly_usd": 0.02},
//!   {"name": "gpu-1", "cpu": 8, "memory_gib": 32, "gpu": 1, "gpu_vendor": "nvidia",
//!    "hourly_usd": 0.9, "spot_hourly_usd": 0.3, "zones": ["z1", "z2"]}
//! ]
//! ```
//!
//! `gpu` (default 0), `gpu_vendor`, `gpu_model` (`nvidia-a10g`), `arch`
//! (`x86_64` or `arm64`), `disk_gib`, `spot_hourly_usd` (default: the
//! on-demand price) and `zones` (default: offered everywhere) are optional.
//! A shape that asks for an architecture, GPU model or disk matches only
//! entries that state theirs.

use serde::Deserialize;
use wasmprov_guest::shape::{self, InstanceType};
use wasmprov_guest::{Arch, CapacityType, Error, NodeShape, Offering, PriceHint, Result};

/// One catalogue entry as written.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// The type's name, passed to the create command.
    pub name: String,
    /// vCPUs.
    pub cpu: f64,
    /// Memory in GiB (fractions allowed).
    pub memory_gib: f64,
    /// GPUs.
    #[serde(default)]
    pub gpu: u32,
    /// GPU vendor, such as `nvidia`.
    #[serde(default)]
    pub gpu_vendor: Option<String>,
    /// GPU model, such as `nvidia-a10g`.
    #[serde(default)]
    pub gpu_model: Option<String>,
    /// CPU architecture.
    #[serde(default)]
    pub arch: Option<Arch>,
    /// Disk that comes with the type, in GiB.
    #[serde(default)]
    pub disk_gib: Option<u64>,
    /// On-demand price per hour in USD.
    pub hourly_usd: f64,
    /// Spot price per hour in USD; the on-demand price when absent.
    #[serde(default)]
    pub spot_hourly_usd: Option<f64>,
    /// Zones where the type is offered; everywhere when absent.
    #[serde(default)]
    pub zones: Option<Vec<String>>,
}

/// A checked catalogue.
#[derive(Clone, Debug, PartialEq)]
pub struct Catalogue {
    entries: Vec<Entry>,
}

fn finite_non_negative(x: f64) -> bool {
    x.is_finite() && x >= 0.0
}

impl Catalogue {
    /// Parses and checks the JSON of the `instance_types` key.
    ///
    /// # Errors
    /// What is wrong, naming the entry.
    pub fn parse(json: &str) -> std::result::Result<Self, String> {
        let entries: Vec<Entry> = serde_json::from_str(json).map_err(|e| {
            format!(
                "{e}; expected a JSON array of {{\"name\", \"cpu\", \"memory_gib\", \"gpu\"?, \"gpu_vendor\"?, \"gpu_model\"?, \"arch\"?, \"disk_gib\"?, \"hourly_usd\", \"spot_hourly_usd\"?, \"zones\"?}}"
            )
        })?;
        for (i, e) in entries.iter().enumerate() {
            let at = format!("entry {i} ({:?})", e.name);
            if e.name.trim().is_empty() {
                return Err(format!("entry {i} has an empty name"));
            }
            if entries[..i].iter().any(|o| o.name == e.name) {
                return Err(format!("{at} is listed twice"));
            }
            if !(e.cpu.is_finite() && e.cpu > 0.0) {
                return Err(format!("{at}: cpu must be a positive number"));
            }
            if !(finite_non_negative(e.memory_gib) && e.memory_gib < 1e9) {
                return Err(format!("{at}: memory_gib must be a non-negative number"));
            }
            if !finite_non_negative(e.hourly_usd)
                || !e.spot_hourly_usd.is_none_or(finite_non_negative)
            {
                return Err(format!("{at}: prices must be non-negative numbers"));
            }
            if e.zones.as_ref().is_some_and(Vec::is_empty) {
                return Err(format!(
                    "{at}: zones must name at least one zone (leave it out for everywhere)"
                ));
            }
        }
        Ok(Self { entries })
    }

    /// The entries, as written.
    #[must_use]
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The catalogue in the SDK's form, priced for `capacity`.
    #[must_use]
    pub fn types(&self, capacity: CapacityType) -> Vec<InstanceType> {
        self.entries
            .iter()
            .map(|e| {
                let price = match capacity {
                    CapacityType::OnDemand => e.hourly_usd,
                    CapacityType::Spot => e.spot_hourly_usd.unwrap_or(e.hourly_usd),
                };
                InstanceType {
                    name: e.name.clone(),
                    cpu: e.cpu,
                    // memory_gib is checked to be in 0..1e9, so this fits.
                    memory_bytes: (e.memory_gib * f64::from(1u32 << 30)).round() as u64,
                    gpu: e.gpu,
                    gpu_vendor: e.gpu_vendor.as_ref().map(|v| v.to_ascii_lowercase()),
                    gpu_model: e.gpu_model.as_ref().map(|v| v.to_ascii_lowercase()),
                    arch: e.arch,
                    disk_bytes: e.disk_gib.map(|g| g << 30),
                    spot_hourly_usd: e.spot_hourly_usd,
                    zone_prices: e
                        .zones
                        .iter()
                        .flatten()
                        .map(|z| (z.clone(), price))
                        .collect(),
                    default_hourly_usd: price,
                }
            })
            .collect()
    }

    /// The `offerings` answer: every entry, on-demand and spot priced.
    #[must_use]
    pub fn offerings(&self) -> Vec<Offering> {
        shape::offerings(&self.types(CapacityType::OnDemand))
    }

    /// The cheapest type for `shape` (or the one it names) and its price.
    ///
    /// # Errors
    /// [`Error::Unsupported`] when no type fits or the named one does not
    /// exist; [`Error::Capacity`] when none that fits is offered in the zone.
    pub fn choose(&self, shape: &NodeShape) -> Result<PriceHint> {
        let types = self.types(shape.capacity_type);
        let choice = shape::pick(shape, &types)?;
        Ok(PriceHint {
            hourly_usd: choice.hourly_usd,
            capacity_type: shape.capacity_type,
            instance_type: choice.instance_type.name.clone(),
        })
    }
}

/// An [`Error::InvalidConfig`] for the `instance_types` key.
#[must_use]
pub fn invalid(why: &str) -> Error {
    Error::InvalidConfig(format!("config key \"instance_types\": {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmprov_guest::CapacityScope;

    const JSON: &str = r#"[
        {"name": "small", "cpu": 2, "memory_gib": 4, "hourly_usd": 0.02},
        {"name": "medium", "cpu": 4, "memory_gib": 8, "hourly_usd": 0.04, "spot_hourly_usd": 0.01},
        {"name": "half", "cpu": 0.5, "memory_gib": 0.5, "hourly_usd": 0.005, "zones": ["z2"]},
        {"name": "gpu-1", "cpu": 8, "memory_gib": 32, "gpu": 1, "gpu_vendor": "NVIDIA",
         "hourly_usd": 0.9, "zones": ["z1"]}
    ]"#;

    fn shape(cpu: f64, gib: u64) -> NodeShape {
        NodeShape::new(cpu, gib << 30)
    }

    #[test]
    fn the_cheapest_fitting_type_is_chosen_per_capacity_type_and_zone() {
        let c = Catalogue::parse(JSON).unwrap();
        assert_eq!(c.entries().len(), 4);
        let h = c.choose(&shape(2.0, 3)).unwrap();
        assert_eq!(h.instance_type, "small");
        assert!((h.hourly_usd - 0.02).abs() < 1e-12);
        assert_eq!(h.capacity_type, CapacityType::OnDemand);

        let spot = NodeShape {
            capacity_type: CapacityType::Spot,
            ..shape(2.0, 3)
        };
        let h = c.choose(&spot).unwrap();
        assert_eq!(h.instance_type, "medium", "cheaper on spot");
        assert!((h.hourly_usd - 0.01).abs() < 1e-12);
        assert_eq!(h.capacity_type, CapacityType::Spot);

        let tiny = NodeShape::new(0.5, 512 << 20);
        assert_eq!(c.choose(&tiny).unwrap().instance_type, "half");
        let tiny_z1 = NodeShape {
            zone: Some("z1".into()),
            ..tiny
        };
        assert_eq!(c.choose(&tiny_z1).unwrap().instance_type, "small");

        let gpu = NodeShape {
            gpu: 1,
            gpu_vendor: Some("nvidia".into()),
            ..shape(1.0, 1)
        };
        assert_eq!(c.choose(&gpu).unwrap().instance_type, "gpu-1");
        let gpu_z2 = NodeShape {
            zone: Some("z2".into()),
            ..gpu.clone()
        };
        assert!(matches!(
            c.choose(&gpu_z2),
            Err(Error::Capacity {
                scope: CapacityScope::Zone,
                ..
            })
        ));
        let amd = NodeShape {
            gpu_vendor: Some("amd".into()),
            ..gpu
        };
        assert!(matches!(c.choose(&amd), Err(Error::Unsupported(_))));
        assert!(matches!(
            c.choose(&shape(64.0, 1)),
            Err(Error::Unsupported(_))
        ));

        let named = NodeShape {
            instance_type: Some("medium".into()),
            ..shape(1.0, 1)
        };
        assert_eq!(c.choose(&named).unwrap().instance_type, "medium");
        let unknown = NodeShape {
            instance_type: Some("huge".into()),
            ..shape(1.0, 1)
        };
        assert!(matches!(c.choose(&unknown), Err(Error::Unsupported(_))));
    }

    #[test]
    fn bad_catalogues_say_why() {
        for (json, why) in [
            ("{}", "expected a JSON array"),
            ("not json", "expected a JSON array"),
            (
                r#"[{"name": "a", "cpu": 1, "memory_gb": 1, "hourly_usd": 1}]"#,
                "memory_gb",
            ),
            (
                r#"[{"name": "a", "cpu": 1, "hourly_usd": 1}]"#,
                "memory_gib",
            ),
            (
                r#"[{"name": " ", "cpu": 1, "memory_gib": 1, "hourly_usd": 1}]"#,
                "empty name",
            ),
            (
                r#"[{"name": "a", "cpu": 0, "memory_gib": 1, "hourly_usd": 1}]"#,
                "cpu must be",
            ),
            (
                r#"[{"name": "a", "cpu": 1, "memory_gib": -1, "hourly_usd": 1}]"#,
                "memory_gib must be",
            ),
            (
                r#"[{"name": "a", "cpu": 1, "memory_gib": 1, "hourly_usd": -1}]"#,
                "prices",
            ),
            (
                r#"[{"name": "a", "cpu": 1, "memory_gib": 1, "hourly_usd": 1, "spot_hourly_usd": -2}]"#,
                "prices",
            ),
            (
                r#"[{"name": "a", "cpu": 1, "memory_gib": 1, "hourly_usd": 1, "zones": []}]"#,
                "at least one zone",
            ),
            (
                r#"[{"name": "a", "cpu": 1, "memory_gib": 1, "hourly_usd": 1},
                    {"name": "a", "cpu": 2, "memory_gib": 1, "hourly_usd": 1}]"#,
                "listed twice",
            ),
        ] {
            let err = Catalogue::parse(json).unwrap_err();
            assert!(err.contains(why), "{json}: {err}");
        }
        assert!(Catalogue::parse("[]").unwrap().entries().is_empty());
        assert!(matches!(invalid("x"), Error::InvalidConfig(m) if m.contains("instance_types")));
    }
}
