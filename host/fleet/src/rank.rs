//! Price-aware choice: rank what every plugin offers for a shape.
//!
//! [`rank_offerings`] ranks every fitting offering of every plugin (by the
//! contract's one fit rule, `wasmprov_api::fit`): architecture, GPU model
//! and disk bind, and a plugin's second-cheapest type is a candidate when
//! its cheapest runs out. [`rank`] asks each plugin's price hint only: one
//! offer per plugin, no I/O.

use serde::Serialize;
use wasmprov_api::{Backends, CloudProvisioner, NodeShape, PriceHint, ProvisionerError};

use crate::unavailable::Unavailable;

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

    fn sort(&mut self) {
        self.offers.sort_by(|a, b| {
            a.hint
                .hourly_usd
                .total_cmp(&b.hint.hourly_usd)
                .then_with(|| a.plugin.cmp(&b.plugin))
                .then_with(|| a.hint.instance_type.cmp(&b.hint.instance_type))
        });
    }
}

/// Ranks every offering of every backend that fits `shape`, cheapest first
/// (ties: plugin, then type). An offering's price is its own for the
/// shape's capacity type, or else the plugin's price hint for that type.
/// A backend without offerings (`unsupported`), or whose offerings could not
/// be read, makes its one price-hint offer, as [`rank`] does. Offerings
/// marked in `unavailable` are left out, with the reason in
/// [`Ranking::none`].
///
/// Offerings may do I/O (a cloud's catalogue), so this is async; the
/// backends are asked at once, so the slowest one, not their sum, is what
/// a ranking waits for.
pub async fn rank_offerings(
    backends: &dyn Backends,
    shape: &NodeShape,
    unavailable: Option<&Unavailable>,
) -> Ranking {
    rank_offerings_among(backends, shape, unavailable, |_| true).await
}

/// [`rank_offerings`] over the backends `include` accepts only (a capacity
/// group's plugins): the others are not asked at all, so a plugin the
/// caller does not use can neither slow the ranking nor spend its cloud's
/// API calls on it.
pub async fn rank_offerings_among(
    backends: &dyn Backends,
    shape: &NodeShape,
    unavailable: Option<&Unavailable>,
    include: impl Fn(&str) -> bool,
) -> Ranking {
    let mut asked = Vec::new();
    for name in backends.backend_names() {
        if !include(&name) {
            continue;
        }
        let Some(backend) = backends.backend(&name) else {
            continue;
        };
        let b = backend.clone();
        asked.push((
            name,
            backend,
            tokio::spawn(async move { b.offerings().await }),
        ));
    }
    let mut ranking = Ranking::default();
    for (name, backend, answer) in asked {
        let answer = answer.await.unwrap_or_else(|e| {
            Err(ProvisionerError::Transport(format!(
                "the offerings call did not finish: {e}"
            )))
        });
        match answer {
            Ok(list) => {
                offerings_of(
                    &name,
                    backend.as_ref(),
                    &list,
                    shape,
                    unavailable,
                    &mut ranking,
                );
            }
            Err(ProvisionerError::Unsupported(_)) => {
                hint_offer(&name, backend.as_ref(), shape, unavailable, &mut ranking);
            }
            // The catalogue could not be read (a cloud's API down, no
            // credentials): the plugin's I/O-free price hint still stands.
            Err(e) => {
                tracing::debug!(plugin = %name, error = %e, "offerings failed; ranking by the price hint");
                hint_offer(&name, backend.as_ref(), shape, unavailable, &mut ranking);
            }
        }
    }
    ranking.sort();
    ranking
}

fn offerings_of(
    plugin: &str,
    backend: &dyn CloudProvisioner,
    list: &[wasmprov_api::Offering],
    shape: &NodeShape,
    unavailable: Option<&Unavailable>,
    ranking: &mut Ranking,
) {
    let zone = shape.zone.as_deref();
    let mut fitting = 0;
    let mut out_of_capacity = Vec::new();
    for o in list.iter().filter(|o| o.fits(shape)) {
        fitting += 1;
        if unavailable.is_some_and(|u| u.until(plugin, &o.instance_type, zone).is_some()) {
            out_of_capacity.push(o.instance_type.clone());
            continue;
        }
        let price = o.price(shape.capacity_type).or_else(|| {
            let typed = NodeShape {
                instance_type: Some(o.instance_type.clone()),
                ..shape.clone()
            };
            backend
                .try_price_hint(&typed)
                .ok()
                .flatten()
                .filter(|h| h.instance_type == o.instance_type)
                .map(|h| h.hourly_usd)
        });
        match price {
            Some(p) if p.is_finite() && p >= 0.0 => ranking.offers.push(Offer {
                plugin: plugin.to_string(),
                hint: PriceHint {
                    hourly_usd: p,
                    capacity_type: shape.capacity_type,
                    instance_type: o.instance_type.clone(),
                },
            }),
            _ => {}
        }
    }
    if !ranking.offers.iter().any(|o| o.plugin == plugin) {
        ranking.none.push(NoOffer {
            plugin: plugin.to_string(),
            reason: if fitting == 0 {
                format!("none of its {} offerings fits", list.len())
            } else if !out_of_capacity.is_empty() {
                format!(
                    "capacity ran out recently for {}",
                    out_of_capacity.join(", ")
                )
            } else {
                format!(
                    "{fitting} offerings fit, none with a {} price",
                    shape.capacity_type
                )
            },
        });
    }
}

fn hint_offer(
    plugin: &str,
    backend: &dyn CloudProvisioner,
    shape: &NodeShape,
    unavailable: Option<&Unavailable>,
    ranking: &mut Ranking,
) {
    let mut one = Ranking::default();
    push_hint(plugin.to_string(), backend, shape, &mut one);
    for offer in one.offers {
        if unavailable.is_some_and(|u| {
            u.until(plugin, &offer.hint.instance_type, shape.zone.as_deref())
                .is_some()
        }) {
            ranking.none.push(NoOffer {
                plugin: plugin.to_string(),
                reason: format!("capacity ran out recently for {}", offer.hint.instance_type),
            });
        } else {
            ranking.offers.push(offer);
        }
    }
    ranking.none.extend(one.none);
}

/// One backend's price hint as an offer, or why there is none.
fn push_hint(
    name: String,
    backend: &dyn CloudProvisioner,
    shape: &NodeShape,
    ranking: &mut Ranking,
) {
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
        push_hint(name, backend.as_ref(), shape, &mut ranking);
    }
    ranking.sort();
    ranking
}
