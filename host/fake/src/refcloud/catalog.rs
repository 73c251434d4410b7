//! The reference cloud's fixed catalogue: four node types, two zones.
//!
//! The template plugin and the `buggy-refcloud` test guest carry the same
//! table (a guest cannot depend on this crate); tests compare against
//! [`NODE_TYPES`] so the copies cannot drift unnoticed.

/// The zones, in the order a plugin should prefer them.
pub const ZONES: [&str; 2] = ["zone-a", "zone-b"];

/// The zone a create without `zone` lands in.
pub const DEFAULT_ZONE: &str = "zone-a";

/// `capacity_type` of standard capacity, also the default of a create.
pub const ON_DEMAND: &str = "on-demand";

/// `capacity_type` of interruptible, discounted capacity.
pub const SPOT: &str = "spot";

/// One node type of the catalogue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NodeType {
    /// The name used in `type` fields, e.g. `small`.
    pub name: &'static str,
    /// vCPUs.
    pub vcpu: u32,
    /// Memory in GiB.
    pub memory_gib: u32,
    /// GPUs (0 for none).
    pub gpu: u32,
    /// GPU vendor, lowercase, when `gpu > 0`.
    pub gpu_vendor: Option<&'static str>,
    /// On-demand price in USD per hour, the same in every zone.
    pub hourly_usd: f64,
    /// Spot price in USD per hour; `None` when the type is never sold as spot.
    pub spot_hourly_usd: Option<f64>,
    /// The zones the type is offered in.
    pub zones: &'static [&'static str],
}

impl NodeType {
    /// Whether the type can be created in `zone`.
    #[must_use]
    pub fn offered_in(&self, zone: &str) -> bool {
        self.zones.contains(&zone)
    }

    /// The hourly price for `capacity_type` (`on-demand` or `spot`), or
    /// `None` when the type is not sold that way.
    #[must_use]
    pub fn price(&self, capacity_type: &str) -> Option<f64> {
        match capacity_type {
            ON_DEMAND => Some(self.hourly_usd),
            SPOT => self.spot_hourly_usd,
            _ => None,
        }
    }
}

/// The catalogue, cheapest first.
pub const NODE_TYPES: [NodeType; 4] = [
    NodeType {
        name: "small",
        vcpu: 2,
        memory_gib: 4,
        gpu: 0,
        gpu_vendor: None,
        hourly_usd: 0.020,
        spot_hourly_usd: Some(0.008),
        zones: &ZONES,
    },
    NodeType {
        name: "medium",
        vcpu: 4,
        memory_gib: 8,
        gpu: 0,
        gpu_vendor: None,
        hourly_usd: 0.040,
        spot_hourly_usd: Some(0.016),
        zones: &ZONES,
    },
    NodeType {
        name: "large",
        vcpu: 8,
        memory_gib: 32,
        gpu: 0,
        gpu_vendor: None,
        hourly_usd: 0.160,
        spot_hourly_usd: Some(0.064),
        zones: &ZONES,
    },
    NodeType {
        name: "gpu",
        vcpu: 8,
        memory_gib: 64,
        gpu: 1,
        gpu_vendor: Some("nvidia"),
        hourly_usd: 1.100,
        spot_hourly_usd: None,
        zones: &["zone-b"],
    },
];

/// The node type called `name`.
#[must_use]
pub fn node_type(name: &str) -> Option<&'static NodeType> {
    NODE_TYPES.iter().find(|t| t.name == name)
}

/// The zone called `name`, as a `'static` string.
#[must_use]
pub fn zone(name: &str) -> Option<&'static str> {
    ZONES.iter().copied().find(|z| *z == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_is_consistent() {
        for t in &NODE_TYPES {
            assert!(!t.zones.is_empty(), "{}", t.name);
            assert!(t.zones.iter().all(|z| zone(z).is_some()), "{}", t.name);
            assert_eq!(t.gpu > 0, t.gpu_vendor.is_some(), "{}", t.name);
            if let Some(spot) = t.spot_hourly_usd {
                assert!(spot < t.hourly_usd, "{}", t.name);
            }
        }
        let gpu = node_type("gpu").unwrap();
        assert!(!gpu.offered_in("zone-a") && gpu.offered_in("zone-b"));
        assert_eq!(gpu.price(SPOT), None);
        assert_eq!(node_type("medium").unwrap().price(SPOT), Some(0.016));
        assert_eq!(node_type("large").unwrap().price(ON_DEMAND), Some(0.160));
        assert_eq!(node_type("xl"), None);
        assert_eq!(zone("zone-c"), None);
    }
}
