//! Matching a [`NodeShape`] to the cheapest instance type that satisfies it.
//!
//! Every provider has a catalogue of instance types with prices; the rule is
//! the same everywhere: an explicit instance type in the shape wins (and must
//! exist); otherwise the cheapest type with at least the CPU, memory and GPU
//! count asked for, of the GPU vendor asked for, offered in the zone asked for.

use crate::{CapacityScope, Error, NodeShape, Result};

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
        self.cpu + 1e-9 >= shape.cpu
            && self.memory_bytes >= shape.memory_bytes
            && self.gpu >= shape.gpu
            && (shape.gpu == 0
                || shape.gpu_vendor.as_deref().is_none_or(|v| {
                    self.gpu_vendor
                        .as_deref()
                        .is_some_and(|have| have.eq_ignore_ascii_case(v))
                }))
    }
}

/// A chosen type and its price in the zone asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice<'a> {
    /// The type.
    pub instance_type: &'a InstanceType,
    /// Its hourly price in USD where it will run.
    pub hourly_usd: f64,
}

/// Picks the instance type for `shape` from `catalogue`.
///
/// # Errors
/// - [`Error::Unsupported`] when an explicit type does not exist or no type is
///   big enough;
/// - [`Error::Capacity`] with [`CapacityScope::Zone`] when types exist but
///   none is offered in the zone asked for.
pub fn pick<'a>(shape: &NodeShape, catalogue: &'a [InstanceType]) -> Result<Choice<'a>> {
    let zone = shape.zone.as_deref();
    if let Some(name) = shape.instance_type.as_deref() {
        let t = catalogue
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| Error::Unsupported(format!("instance type {name:?} does not exist")))?;
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
    let fitting: Vec<&InstanceType> = catalogue.iter().filter(|t| t.satisfies(shape)).collect();
    if fitting.is_empty() {
        return Err(Error::Unsupported(format!(
            "no instance type has {} vCPU, {} MiB and {} GPU{}",
            shape.cpu,
            shape.memory_bytes >> 20,
            shape.gpu,
            shape
                .gpu_vendor
                .as_deref()
                .map(|v| format!(" ({v})"))
                .unwrap_or_default()
        )));
    }
    fitting
        .into_iter()
        .filter_map(|t| {
            t.price_in(zone).map(|p| Choice {
                instance_type: t,
                hourly_usd: p,
            })
        })
        .min_by(|a, b| {
            a.hourly_usd
                .total_cmp(&b.hourly_usd)
                .then_with(|| a.instance_type.name.cmp(&b.instance_type.name))
        })
        .ok_or_else(|| Error::Capacity {
            scope: CapacityScope::Zone,
            message: format!(
                "no instance type big enough is offered in {}",
                zone.unwrap_or("any zone")
            ),
        })
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
}
