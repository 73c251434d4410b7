//! Price-aware choice: rank what every plugin offers for a shape.
//!
//! [`rank_offerings`] ranks every fitting offering of every plugin (by the
//! contract's one fit rule, `wasmprov_api::fit`): architecture, GPU model
//! and disk bind, and a plugin's second-cheapest type is a candidate when
//! its cheapest runs out. [`rank`] asks each plugin's price hint only: one
//! offer per plugin, no I/O.
//!
//! Catalogues are read through [`Catalogues`]: each plugin's within a
//! deadline of its own, and kept for a TTL, so that one plugin's slow or
//! failing catalogue never holds up a ranking beyond that deadline, and,
//! once read, never again (an expired catalogue answers at once while a
//! fresh one is read behind it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde::Serialize;
use wasmprov_api::{Backends, CloudProvisioner, NodeShape, Offering, PriceHint, ProvisionerError};

use crate::unavailable::Unavailable;

/// How long a catalogue read is waited for (default of [`Catalogues`]).
pub const DEFAULT_CATALOGUE_DEADLINE: Duration = Duration::from_secs(10);
/// How long a catalogue is used before it is read again (default of
/// [`Catalogues`]).
pub const DEFAULT_CATALOGUE_TTL: Duration = Duration::from_secs(300);

type Answer = Result<Arc<Vec<Offering>>, ProvisionerError>;

/// Price-hint prices for offerings that carry none, by the typed shape
/// asked (see [`Entry::hints`]).
type Hints = Mutex<HashMap<String, Option<f64>>>;

struct Entry {
    /// The backend the answer and the read are of: a plugin replaced by a
    /// reload is another backend under the same name, whose catalogue is
    /// read anew (held weakly: the entry keeps no plugin version alive).
    of: Weak<dyn CloudProvisioner>,
    /// Prices the plugin's price hint gave for offerings without one of
    /// their own, by the shape asked: a pure function of the plugin
    /// version, so kept as long as the entry is of that version.
    hints: Arc<Hints>,
    /// The last answer and when it came; `None` before the first.
    answer: Option<(Instant, Answer)>,
    /// A read under way: its answer comes on this channel.
    reading: Option<tokio::sync::watch::Receiver<Option<Answer>>>,
}

impl std::fmt::Debug for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entry")
            .field("answer", &self.answer)
            .field("reading", &self.reading.is_some())
            .finish_non_exhaustive()
    }
}

/// Every plugin's catalogue (`offerings`), each read with a deadline and
/// kept for a TTL.
///
/// - A catalogue younger than the TTL is used as it is.
/// - An older one is used as it is too, and read again behind it.
/// - None yet: it is read, and waited for up to the deadline; past it the
///   plugin is ranked by its price hint this time, and the read goes on
///   (its answer serves the next ranking).
///
/// Failed reads are kept for a tenth of the TTL (at least a second), so a
/// broken catalogue is not asked on every ranking. One read per plugin is
/// under way at a time.
#[derive(Debug)]
pub struct Catalogues {
    ttl: Duration,
    deadline: Duration,
    entries: Arc<Mutex<HashMap<String, Entry>>>,
}

impl Default for Catalogues {
    fn default() -> Self {
        Self::new(DEFAULT_CATALOGUE_TTL, DEFAULT_CATALOGUE_DEADLINE)
    }
}

impl Catalogues {
    /// Catalogues kept for `ttl` and each read waited for `deadline`.
    #[must_use]
    pub fn new(ttl: Duration, deadline: Duration) -> Self {
        Self {
            ttl,
            deadline,
            entries: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The catalogue of `name` (see the type's rules).
    async fn get(&self, name: &str, backend: &Arc<dyn CloudProvisioner>) -> (Answer, Arc<Hints>) {
        let hints;
        let mut waiting = {
            let mut entries = self
                .entries
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let of = Arc::downgrade(backend);
            let entry = entries.entry(name.to_string()).or_insert_with(|| Entry {
                of: of.clone(),
                hints: Arc::default(),
                answer: None,
                reading: None,
            });
            if !Weak::ptr_eq(&entry.of, &of) {
                *entry = Entry {
                    of,
                    hints: Arc::default(),
                    answer: None,
                    reading: None,
                };
            }
            hints = entry.hints.clone();
            let fresh_for = |answer: &Answer| match answer {
                Ok(_) => self.ttl,
                Err(_) => (self.ttl / 10).max(Duration::from_secs(1)),
            };
            if let Some((at, answer)) = &entry.answer {
                let answer = answer.clone();
                if at.elapsed() >= fresh_for(&answer) && entry.reading.is_none() {
                    entry.reading = Some(self.read(name, backend));
                }
                return (answer, hints);
            }
            match &entry.reading {
                Some(r) => r.clone(),
                None => {
                    let r = self.read(name, backend);
                    entry.reading = Some(r.clone());
                    r
                }
            }
        };
        let answer = tokio::time::timeout(self.deadline, async {
            loop {
                if let Some(a) = waiting.borrow_and_update().clone() {
                    return a;
                }
                if waiting.changed().await.is_err() {
                    return Err(ProvisionerError::Transport(
                        "the offerings call did not finish".into(),
                    ));
                }
            }
        })
        .await;
        let answer = answer.unwrap_or_else(|_| {
            Err(ProvisionerError::Transport(format!(
                "the catalogue was not read within {} s (it is still being read, for the next ranking)",
                self.deadline.as_secs_f64()
            )))
        });
        (answer, hints)
    }

    /// Starts a read of `name`'s catalogue (the caller holds the entries'
    /// lock and records the read); its answer is kept when it comes,
    /// whoever is still waiting.
    fn read(
        &self,
        name: &str,
        backend: &Arc<dyn CloudProvisioner>,
    ) -> tokio::sync::watch::Receiver<Option<Answer>> {
        let (tx, rx) = tokio::sync::watch::channel(None);
        let b = backend.clone();
        let name = name.to_string();
        let entries = self.entries.clone();
        tokio::spawn(async move {
            let answer = b.offerings().await.map(Arc::new);
            if let Some(entry) = entries
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get_mut(&name)
                && Weak::ptr_eq(&entry.of, &Arc::downgrade(&b))
            {
                entry.answer = Some((Instant::now(), answer.clone()));
                entry.reading = None;
            }
            let _ = tx.send(Some(answer));
        });
        rx
    }

    /// [`rank_offerings_among`] with these catalogues.
    pub async fn rank(
        &self,
        backends: &dyn Backends,
        shape: &NodeShape,
        unavailable: Option<&Unavailable>,
        include: impl Fn(&str) -> bool,
    ) -> Ranking {
        let mut names = Vec::new();
        for name in backends.backend_names() {
            if !include(&name) {
                continue;
            }
            if let Some(backend) = backends.backend(&name) {
                names.push((name, backend));
            }
        }
        // Every plugin's catalogue at once: the ranking waits for the
        // slowest, and for none longer than the deadline.
        let answers =
            futures::future::join_all(names.iter().map(|(name, backend)| self.get(name, backend)))
                .await;
        let mut ranking = Ranking::default();
        for ((name, backend), (answer, hints)) in names.into_iter().zip(answers) {
            match answer {
                Ok(list) => {
                    offerings_of(
                        &name,
                        backend.as_ref(),
                        &list,
                        shape,
                        unavailable,
                        &hints,
                        &mut ranking,
                    );
                }
                Err(ProvisionerError::Unsupported(_)) => {
                    hint_offer(&name, backend.as_ref(), shape, unavailable, &mut ranking);
                }
                // The catalogue could not be read (a cloud's API down, no
                // credentials, too slow): the plugin's I/O-free price hint
                // still stands.
                Err(e) => {
                    tracing::debug!(plugin = %name, error = %e, "offerings failed; ranking by the price hint");
                    hint_offer(&name, backend.as_ref(), shape, unavailable, &mut ranking);
                }
            }
        }
        ranking.sort();
        ranking
    }
}

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

/// A fitting offering whose price is not known: ranked after every priced
/// offer, never chosen by price.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Unpriced {
    /// The plugin.
    pub plugin: String,
    /// The instance type that fits.
    pub instance_type: String,
    /// The billing asked for.
    pub capacity_type: wasmprov_api::CapacityType,
}

/// Every plugin's answer to one shape, cheapest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Ranking {
    /// Offers by hourly price, then plugin name.
    pub offers: Vec<Offer>,
    /// Fitting offerings without a known price (for the shape's capacity
    /// type, from the offering or the plugin's price hint), after the
    /// priced ones: by plugin, then type.
    pub unpriced: Vec<Unpriced>,
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
        self.unpriced.sort_by(|a, b| {
            a.plugin
                .cmp(&b.plugin)
                .then_with(|| a.instance_type.cmp(&b.instance_type))
        });
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
/// a ranking waits for, and none for longer than
/// [`DEFAULT_CATALOGUE_DEADLINE`] (past it, that plugin is ranked by its
/// price hint). Nothing is kept between calls: keep a [`Catalogues`] (a
/// fleet has one, [`Fleet::catalogues`](crate::Fleet::catalogues)) to read
/// each catalogue once per TTL.
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
    Catalogues::default()
        .rank(backends, shape, unavailable, include)
        .await
}

fn offerings_of(
    plugin: &str,
    backend: &dyn CloudProvisioner,
    list: &[wasmprov_api::Offering],
    shape: &NodeShape,
    unavailable: Option<&Unavailable>,
    hints: &Hints,
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
            // The plugin's price hint for the type: a pure function of the
            // plugin version and the shape, so asked once per version and
            // shape (a catalogue of hundreds of unpriced types would
            // otherwise cost as many calls on every ranking). Failed calls
            // are not kept.
            let typed = NodeShape {
                instance_type: Some(o.instance_type.clone()),
                ..shape.clone()
            };
            let key = format!("{typed:?}");
            if let Some(known) = hints
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(&key)
            {
                return *known;
            }
            let answer = backend.try_price_hint(&typed);
            let hint = answer
                .as_ref()
                .ok()
                .and_then(Option::as_ref)
                .filter(|h| h.instance_type == o.instance_type)
                .map(|h| h.hourly_usd);
            if answer.is_ok() {
                hints
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(key, hint);
            }
            hint
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
            _ => ranking.unpriced.push(Unpriced {
                plugin: plugin.to_string(),
                instance_type: o.instance_type.clone(),
                capacity_type: shape.capacity_type,
            }),
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
                    "{fitting} offerings fit, none with a known {} price (listed as unpriced)",
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
