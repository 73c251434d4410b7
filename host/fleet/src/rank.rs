//! Price-aware choice: ask every plugin what a shape costs and rank them.

use serde::Serialize;
use wasmprov_api::{Backends, NodeShape, PriceHint};

/// A plugin's offer for a shape.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Offer {
    /// The plugin.
    pub plugin: String,
    /// What it would run the shape on, and the price.
    pub hint: PriceHint,
}

/// A plugin that made no offer, and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NoOffer {
    /// The plugin.
    pub plugin: String,
    /// `no type fits`, or the plugin's error.
    pub reason: String,
}

/// Every plugin's answer to one shape, cheapest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Ranking {
    /// Offers by hourly price, then plugin name.
    pub offers: Vec<Offer>,
    /// Plugins that cannot run the shape.
    pub none: Vec<NoOffer>,
}

impl Ranking {
    /// The cheapest offer.
    #[must_use]
    pub fn best(&self) -> Option<&Offer> {
        self.offers.first()
    }
}

/// Asks every backend's price hint for `shape` (no I/O: hints are
/// answered from data in the plugins, under a small CPU budget) and ranks
/// them, cheapest first. Ties go to the backend whose name sorts first, so
/// the choice is stable. A price that is not finite or below 0 is no offer.
///
/// ```no_run
/// # async fn demo(host: wasmprov_host::Host) {
/// let shape = wasmprov_api::NodeShape::new(4.0, 16 << 30);
/// if let Some(best) = wasmprov_fleet::rank(&host, &shape).best() {
///     println!("{} on {} at {} $/h", best.plugin, best.hint.instance_type, best.hint.hourly_usd);
/// }
/// # }
/// ```
#[must_use]
pub fn rank(backends: &dyn Backends, shape: &NodeShape) -> Ranking {
    let mut ranking = Ranking::default();
    for name in backends.backend_names() {
        let Some(backend) = backends.backend(&name) else {
            continue;
        };
        match backend.try_price_hint(shape) {
            Ok(Some(hint)) if hint.hourly_usd.is_finite() && hint.hourly_usd >= 0.0 => {
                ranking.offers.push(Offer { plugin: name, hint });
            }
            Ok(Some(hint)) => ranking.none.push(NoOffer {
                plugin: name,
                reason: format!("priced at {} $/h, which is not a price", hint.hourly_usd),
            }),
            Ok(None) => ranking.none.push(NoOffer {
                plugin: name,
                reason: "no type fits".into(),
            }),
            Err(e) => ranking.none.push(NoOffer {
                plugin: name,
                reason: e.to_string(),
            }),
        }
    }
    ranking.offers.sort_by(|a, b| {
        a.hint
            .hourly_usd
            .total_cmp(&b.hint.hourly_usd)
            .then_with(|| a.plugin.cmp(&b.plugin))
    });
    ranking
}
