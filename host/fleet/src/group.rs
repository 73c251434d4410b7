//! Capacity groups: a number of like nodes, kept between a minimum and a
//! maximum, placed on whichever plugin prices the shape lowest.

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::Result;
use serde::{Deserialize, Serialize};
use wasmprov_api::{NodeShape, ProvisionerError};

use crate::fleet::{Fleet, FleetError, ProvisionOptions};
use crate::journal::{EventKind, Intent, IntentState};

/// A set of like nodes scaled as one, in the spirit of a cluster's node
/// pool: an instance type or a machine profile (CPU, memory, GPUs) and the
/// bounds of its size.
///
/// ```
/// use wasmprov_fleet::CapacityGroup;
/// use wasmprov_api::NodeShape;
///
/// let mut shape = NodeShape::new(8.0, 32 << 30);
/// shape.gpu = 1;
/// shape.gpu_vendor = Some("nvidia".into());
/// let group = CapacityGroup::new("train", shape, 0, 4);
/// assert_eq!(group.clamp(9), 4);
/// assert!(group.validate().is_ok());
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CapacityGroup {
    /// The group's name; part of every member's request id, and put on
    /// members as the `wasmprov-group` label.
    pub name: String,
    /// What each member looks like: an explicit `instance_type`, or a
    /// profile (cpu, memory, gpu, gpu vendor).
    pub shape: NodeShape,
    /// The group never goes below this many members.
    pub min: u32,
    /// The group never goes above this many members.
    pub max: u32,
    /// The plugins the group may use; empty means every loaded plugin.
    #[serde(default)]
    pub plugins: Vec<String>,
    /// A lease on every member: reconcile terminates members older than this.
    #[serde(default, with = "opt_secs")]
    pub lease: Option<Duration>,
    /// What every member boots with (image, user data, SSH keys).
    #[serde(default, skip_serializing_if = "wasmprov_api::BootData::is_empty")]
    pub boot: wasmprov_api::BootData,
}

mod opt_secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_some(&d.as_secs_f64()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        let v = Option::<f64>::deserialize(d)?;
        v.map(|s| Duration::try_from_secs_f64(s).map_err(serde::de::Error::custom))
            .transpose()
    }
}

impl CapacityGroup {
    /// A group of `shape` nodes between `min` and `max`, on any plugin.
    #[must_use]
    pub fn new(name: impl Into<String>, shape: NodeShape, min: u32, max: u32) -> Self {
        Self {
            name: name.into(),
            shape,
            min,
            max,
            plugins: Vec::new(),
            lease: None,
            boot: wasmprov_api::BootData::default(),
        }
    }

    /// `desired` brought within `min..=max`.
    #[must_use]
    pub fn clamp(&self, desired: u32) -> u32 {
        desired.clamp(self.min, self.max.max(self.min))
    }

    /// Checks the group's definition. The name follows the id syntax of
    /// `wasmprov_api::ids` (1 to 63 lowercase letters, digits, `-`, `_`):
    /// it becomes a label value on every member and part of its request id.
    ///
    /// ```
    /// use wasmprov_api::NodeShape;
    /// use wasmprov_fleet::CapacityGroup;
    ///
    /// let shape = NodeShape::new(2.0, 4 << 30);
    /// assert!(CapacityGroup::new("web-1", shape.clone(), 0, 4).validate().is_ok());
    /// let long = "y".repeat(100_000);
    /// for bad in ["", "Web", "a/b", "-a", &"x".repeat(64), &long] {
    ///     let e = CapacityGroup::new(bad, shape.clone(), 0, 4).validate().unwrap_err();
    ///     assert!(e.to_string().len() < 300, "{bad:.20}: the error does not echo the name whole");
    /// }
    /// ```
    ///
    /// # Errors
    /// A name outside the id syntax, `min > max`, or a shape asking for nothing.
    pub fn validate(&self) -> Result<()> {
        if let Some(problem) = wasmprov_api::ids::id_problem("group name", &self.name) {
            anyhow::bail!("{problem}");
        }
        if self.min > self.max {
            anyhow::bail!(
                "group {}: min {} is above max {}",
                self.name,
                self.min,
                self.max
            );
        }
        if self.shape.instance_type.is_none()
            && (self.shape.cpu <= 0.0 || self.shape.memory_bytes == 0)
        {
            anyhow::bail!(
                "group {}: give an instance type, or cpu and memory above zero",
                self.name
            );
        }
        self.boot
            .validate()
            .map_err(|e| anyhow::anyhow!("group {}: {e}", self.name))?;
        Ok(())
    }

    fn allows(&self, plugin: &str) -> bool {
        self.plugins.is_empty() || self.plugins.iter().any(|p| p == plugin)
    }
}

/// One member added or removed by [`Fleet::scale`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Member {
    /// The plugin it runs on.
    pub plugin: String,
    /// Its request id.
    pub request_id: String,
    /// Its provider id.
    pub provider_id: String,
    /// The hourly price it was chosen at.
    pub hourly_usd: Option<f64>,
}

/// What one [`Fleet::scale`] did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ScaleReport {
    /// The size aimed at (the desired count within min..max).
    pub target: u32,
    /// Members before.
    pub before: u32,
    /// Members after.
    pub after: u32,
    /// Members created.
    pub added: Vec<Member>,
    /// Members terminated.
    pub removed: Vec<Member>,
    /// Offers that failed, and why (the next offer was tried when the
    /// failure was capacity, quota or an unsupported shape).
    pub errors: Vec<String>,
    /// Whether a later scale may reach the target where this one fell
    /// short without anyone changing anything: something ran out of
    /// capacity (or was skipped as out), a call failed in a way worth
    /// retrying (rate limit, transport, timeout), rather than only quota,
    /// credentials, configuration or shapes no plugin runs.
    pub retryable: bool,
    /// Whether the group fell short for lack of room alone: every offer
    /// that failed failed for capacity or quota (or was skipped as out of
    /// capacity recently), and at least one did. Read from the plugins'
    /// typed errors ([`ProvisionerError::Capacity`],
    /// [`ProvisionerError::Quota`]), not from the text of [`errors`](Self::errors);
    /// cluster-autoscaler calls this "out of resources" and tries other
    /// groups.
    pub out_of_resources: bool,
}

impl ScaleReport {
    /// Whether the group reached its target.
    #[must_use]
    pub fn converged(&self) -> bool {
        self.after == self.target
    }
}

impl std::fmt::Display for ScaleReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} → {} (target {})",
            self.before, self.after, self.target
        )?;
        for m in &self.added {
            write!(f, "; +{}/{}", m.plugin, m.provider_id)?;
            if let Some(p) = m.hourly_usd {
                write!(f, " at {p:.4} $/h")?;
            }
        }
        for m in &self.removed {
            write!(f, "; -{}/{}", m.plugin, m.provider_id)?;
        }
        for e in &self.errors {
            write!(f, "; {e}")?;
        }
        Ok(())
    }
}

/// The failed offers of one grow, by whether room was what they lacked.
#[derive(Default)]
struct Failures {
    /// Out of capacity (or skipped as such), or over quota.
    room: u32,
    /// Anything else.
    other: u32,
}

impl Failures {
    fn count(&mut self, e: &FleetError) {
        match e {
            FleetError::Provisioner(
                ProvisionerError::Capacity { .. } | ProvisionerError::Quota(_),
            ) => self.room += 1,
            _ => self.other += 1,
        }
    }
}

/// Whether another offer may succeed where this one failed.
fn try_next_offer(e: &FleetError) -> bool {
    matches!(
        e,
        FleetError::Provisioner(
            ProvisionerError::Capacity { .. }
                | ProvisionerError::Quota(_)
                | ProvisionerError::Unsupported(_)
                | ProvisionerError::Auth(_)
                | ProvisionerError::InvalidConfig(_)
                | ProvisionerError::Plugin { .. }
        ) | FleetError::UnknownPlugin(_)
    )
}

/// The price the ceiling is measured from: the cheapest fitting offering
/// above zero of a plugin still in the pass (a free offering is within any
/// ceiling, and cannot set one). `offers` is sorted by price.
fn cheapest_fit(offers: &[&crate::Offer], out: &BTreeSet<&str>) -> Option<f64> {
    offers
        .iter()
        .filter(|o| !out.contains(o.plugin.as_str()))
        .map(|o| o.hint.hourly_usd)
        .find(|p| *p > 0.0)
}

/// A ratio as people write it: `2`, `1.5`, `1e300`.
fn ratio(r: f64) -> String {
    if r < 1e6 {
        format!("{r}")
    } else {
        format!("{r:e}")
    }
}

/// Whether a failure is of the plugin's whole account or set-up, so that
/// none of its other offerings can succeed in this pass.
fn whole_plugin(e: &FleetError) -> bool {
    matches!(
        e,
        FleetError::Provisioner(
            ProvisionerError::Quota(_)
                | ProvisionerError::Auth(_)
                | ProvisionerError::InvalidConfig(_)
                | ProvisionerError::Plugin { .. }
        ) | FleetError::UnknownPlugin(_)
    )
}

impl Fleet {
    /// Refuses a group whose `max` is above this fleet's limit
    /// ([`Fleet::max_group_size`]).
    ///
    /// # Errors
    /// When it is.
    pub fn check_group_size(&self, group: &CapacityGroup) -> Result<()> {
        if group.max > self.max_group_size {
            anyhow::bail!(
                "group {}: max {} is above this host's largest group size, {} (raise it with the fleet's max_group_size, `--max-group-size`)",
                group.name,
                group.max,
                self.max_group_size
            );
        }
        Ok(())
    }

    /// The journaled members of `group` (pending ones included).
    ///
    /// # Errors
    /// When the journal cannot be read.
    pub fn members(&self, group: &str) -> Result<Vec<Intent>> {
        Ok(self
            .intents()?
            .into_iter()
            .filter(|i| i.group.as_deref() == Some(group))
            .collect())
    }

    /// Scales `group` to `desired` members (within its min..max).
    ///
    /// Members are counted from the journal, pending provisions included, so
    /// a provision whose answer was lost is never doubled: run
    /// [`reconcile`](Fleet::reconcile) to settle those. To grow, every
    /// fitting offering of every allowed plugin is ranked
    /// ([`rank_offerings`](crate::rank_offerings): architecture, GPU model
    /// and disk bind) and the cheapest is asked for by its instance type;
    /// when it fails for capacity, quota or a shape it cannot run, the next
    /// one is tried: another type of the same plugin, or another plugin. A
    /// capacity failure marks what ran out ([`Fleet::unavailable`]) so the
    /// next scales skip it for a while. Each new member's request id (`<group>-<n>`) comes from
    /// a durable counter and is journaled before the cloud is asked. To
    /// shrink, the members whose plugin quotes the shape dearest now go
    /// first, the newest among equals.
    ///
    /// # Errors
    /// An invalid group, or a journal failure. Plugin failures are in the
    /// report (the group then falls short of its target).
    pub async fn scale(&self, group: &CapacityGroup, desired: u32) -> Result<ScaleReport> {
        self.usable()?;
        group.validate()?;
        self.check_group_size(group)?;
        // Two scales at once would both count the same members and overshoot.
        let _one = self.scaling.lock().await;
        let members = self.members(&group.name)?;
        let target = group.clamp(desired);
        let before = u32::try_from(members.len()).unwrap_or(u32::MAX);
        let mut report = ScaleReport {
            target,
            before,
            after: before,
            ..ScaleReport::default()
        };
        if before < target {
            self.grow(group, target - before, &mut report).await?;
        } else if before > target {
            self.shrink(group, members, before - target, &mut report)
                .await?;
        }
        report.after = u32::try_from(self.members(&group.name)?.len()).unwrap_or(u32::MAX);
        Ok(report)
    }

    /// Adds up to `count` members, and says whether what failed failed for
    /// room alone ([`ScaleReport::out_of_resources`]).
    async fn grow(
        &self,
        group: &CapacityGroup,
        count: u32,
        report: &mut ScaleReport,
    ) -> Result<()> {
        let mut failures = Failures::default();
        let grown = self.grow_offers(group, count, report, &mut failures).await;
        report.out_of_resources = failures.room > 0 && failures.other == 0;
        grown
    }

    async fn grow_offers(
        &self,
        group: &CapacityGroup,
        count: u32,
        report: &mut ScaleReport,
        failures: &mut Failures,
    ) -> Result<()> {
        // Ranked without the marks of what ran out: the cheapest fit sets
        // the price ceiling whether or not it has capacity now (else the
        // ceiling would climb with every pass that finds it out); marked
        // offerings are skipped below, unasked.
        let ranking = self
            .catalogues
            .rank(self.backends().as_ref(), &group.shape, None, |plugin| {
                group.allows(plugin)
            })
            .await;
        if ranking.offers.is_empty() {
            let why: Vec<String> = ranking
                .none
                .iter()
                .map(|n| format!("{}: {}", n.plugin, n.reason))
                .collect();
            failures.other += 1;
            report.errors.push(format!(
                "no plugin offers the group's shape ({})",
                if why.is_empty() {
                    "no allowed plugin is loaded".to_string()
                } else {
                    why.join("; ")
                }
            ));
            return Ok(());
        }
        let offers: Vec<_> = ranking.offers.iter().collect();
        let mut capacity_failures = 0u32;
        // Plugins out for the rest of this pass: a failure of the whole
        // account (quota, credentials, configuration, a broken plugin) is
        // not asked again for each of its other offerings, and no longer
        // sets the price ceiling: what cannot be had is no measure of price.
        let mut plugins_out = BTreeSet::new();
        let mut first_offer = 0;
        for _ in 0..count {
            let mut request_id =
                format!("{}-{}", group.name, self.journal().next_seq(&group.name)?);
            let mut made = false;
            for offer in &offers[first_offer..] {
                if plugins_out.contains(offer.plugin.as_str()) {
                    first_offer += 1;
                    continue;
                }
                let anchor = cheapest_fit(&offers, &plugins_out);
                if let Some(anchor) = anchor
                    && offer.hint.hourly_usd > anchor * self.price_ceiling
                {
                    let dearer = offers[first_offer..]
                        .iter()
                        .filter(|o| !plugins_out.contains(o.plugin.as_str()))
                        .count();
                    report.errors.push(format!(
                        "stopped at the price ceiling: {dearer} more fitting offering(s), from {} ({}) at {:.4} $/h, cost more than {}× the cheapest fit ({anchor:.4} $/h)",
                        offer.plugin,
                        offer.hint.instance_type,
                        offer.hint.hourly_usd,
                        ratio(self.price_ceiling),
                    ));
                    return Ok(());
                }
                let shape = NodeShape {
                    instance_type: Some(offer.hint.instance_type.clone()),
                    ..group.shape.clone()
                };
                if let Some(until) = self.unavailable.until(
                    &offer.plugin,
                    &offer.hint.instance_type,
                    shape.zone.as_deref(),
                ) {
                    report.errors.push(format!(
                        "{} ({}): ran out of capacity recently; skipped for {} s more",
                        offer.plugin,
                        offer.hint.instance_type,
                        until
                            .saturating_duration_since(std::time::Instant::now())
                            .as_secs()
                    ));
                    report.retryable = true;
                    failures.room += 1;
                    first_offer += 1;
                    continue;
                }
                // A failed attempt that may have left a node keeps its id
                // (reconcile settles it); the next offer gets a new one.
                if self.journal().get(&request_id)?.is_some() {
                    request_id =
                        format!("{}-{}", group.name, self.journal().next_seq(&group.name)?);
                }
                let options = ProvisionOptions {
                    request_id: Some(request_id.clone()),
                    lease: group.lease,
                    group: Some(group.name.clone()),
                    hourly_usd: Some(offer.hint.hourly_usd),
                    boot: group.boot.clone(),
                    // A group's nodes go where each plugin places them.
                    subnet: None,
                };
                // The offering chosen, by name: the plugin makes that type.
                match self.provision(&offer.plugin, &shape, options).await {
                    Ok(node) => {
                        report.added.push(Member {
                            plugin: offer.plugin.clone(),
                            request_id: request_id.clone(),
                            provider_id: node.provider_id,
                            hourly_usd: Some(offer.hint.hourly_usd),
                        });
                        made = true;
                        break;
                    }
                    Err(e) if try_next_offer(&e) => {
                        failures.count(&e);
                        report.errors.push(format!(
                            "{} ({}): {e}",
                            offer.plugin, offer.hint.instance_type
                        ));
                        // This offer is out for the rest of this pass; the
                        // whole plugin when the failure is its account's.
                        first_offer += 1;
                        if whole_plugin(&e) {
                            plugins_out.insert(offer.plugin.as_str());
                        }
                        if let FleetError::Provisioner(ProvisionerError::Capacity {
                            scope, ..
                        }) = &e
                        {
                            self.unavailable.mark(
                                &offer.plugin,
                                &offer.hint.instance_type,
                                shape.zone.as_deref(),
                                *scope,
                            );
                            report.retryable = true;
                            capacity_failures += 1;
                            if capacity_failures >= self.max_capacity_failures {
                                report.errors.push(format!(
                                    "stopped after {capacity_failures} capacity failures in this pass (the fleet's limit); the next scale tries again"
                                ));
                                return Ok(());
                            }
                        }
                    }
                    Err(e) => {
                        failures.count(&e);
                        report.retryable |= match &e {
                            FleetError::Provisioner(p) => p.is_retryable(),
                            FleetError::Journal(_) | FleetError::Closing => true,
                            _ => false,
                        };
                        report.errors.push(format!("{}: {e}", offer.plugin));
                        return Ok(());
                    }
                }
            }
            if !made {
                return Ok(());
            }
        }
        Ok(())
    }

    async fn shrink(
        &self,
        group: &CapacityGroup,
        mut members: Vec<Intent>,
        count: u32,
        report: &mut ScaleReport,
    ) -> Result<()> {
        if let Some(doubt) = self.journal().doubt()? {
            report
                .errors
                .push(format!("not shrinking group {}: {doubt}", group.name));
            return Ok(());
        }
        // Settled members only: a pending one may be a node being made.
        members.retain(|m| matches!(m.state, IntentState::Active { .. }));
        // Prices as the plugins quote them now (a plugin may have been
        // replaced since), else as quoted when the member was made.
        // A member's own shape names the type it was made as.
        type Quote = (String, Option<String>);
        let mut now: std::collections::BTreeMap<Quote, Option<f64>> = Default::default();
        for m in &members {
            let key = (m.plugin.clone(), m.shape.instance_type.clone());
            now.entry(key).or_insert_with(|| {
                self.backends()
                    .backend(&m.plugin)
                    .and_then(|p| p.try_price_hint(&m.shape).ok().flatten())
                    .map(|h| h.hourly_usd)
            });
        }
        for m in &mut members {
            let key = (m.plugin.clone(), m.shape.instance_type.clone());
            if let Some(Some(price)) = now.get(&key) {
                m.hourly_usd = Some(*price);
            }
        }
        members.sort_by(|a, b| {
            b.hourly_usd
                .unwrap_or(0.0)
                .total_cmp(&a.hourly_usd.unwrap_or(0.0))
                .then_with(|| b.created_ms.cmp(&a.created_ms))
                .then_with(|| b.request_id.cmp(&a.request_id))
        });
        for m in members.into_iter().take(count as usize) {
            let Some(provider_id) = m.provider_id().map(str::to_string) else {
                continue;
            };
            let reason = format!("group {} scaled down", group.name);
            match self
                .terminate_as(&m.plugin, &provider_id, EventKind::ScaledDown, reason)
                .await
            {
                Ok(()) => report.removed.push(Member {
                    plugin: m.plugin.clone(),
                    request_id: m.request_id.clone(),
                    provider_id,
                    hourly_usd: m.hourly_usd,
                }),
                Err(e) => report.errors.push(format!(
                    "{}: terminating {provider_id} of group {}: {e}",
                    m.plugin, group.name
                )),
            }
        }
        Ok(())
    }
}
