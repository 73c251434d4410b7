//! Node groups over the fleet: each group's target size kept in the
//! journal, its members read from the journal, growth through
//! [`Fleet::scale`] behind the calls, and deletes of exactly the named
//! members.
//!
//! The numbers, for one group:
//! - **members**: the group's journaled intents. *Live* ones (pending or
//!   active, not marked for deletion) count towards the target; the others
//!   are being deleted.
//! - **target**: kept in the journal (`Journal::value`) under
//!   `autoscaler-target/<group>`, written before anything is asked of a
//!   cloud, so a host killed mid-increase resumes to the same target, never
//!   past it (each new member's request id comes from the fleet's durable
//!   counter, and a pending member counts as one).
//! - **wanted**: `target - live`, the members not yet asked of any cloud;
//!   the grower asks for them one at a time, each with its own boot data
//!   (a fresh join token). Each wanted slot has a stable number, never
//!   reused (`wasmprov-wanted://GROUP/N`): an increase hands out numbers
//!   above every slot (`autoscaler-wanted-hi/<group>`, written with the
//!   target), a member made retires the lowest (`autoscaler-wanted-lo`),
//!   and a delete or decrease drops exactly its slots
//!   (`autoscaler-wanted-gone/<group>/<n>`), so deleting one again is a
//!   no-op.
//!
//! A delete journals its whole decision in one write before any cloud is
//! asked: every named member, made or being created, is marked (under
//! `autoscaler-doomed/<request id>`) and stops counting, and the target is
//! lowered once. The grower (after a restart too) terminates every marked
//! member whose node exists until none is left, so a host killed mid-delete
//! or a failed terminate leaks nothing. A delete's min is checked on the
//! members that stay; naming a marked member again changes nothing. Nothing
//! here ever shrinks a group by count: only named members are terminated.
//! While the journal is held (its evidence in doubt) nothing is created or
//! terminated.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use wasmprov_fleet::journal::{Intent, IntentState};
use wasmprov_fleet::{CapacityGroup, Fleet};

use crate::config::{NodeGroup, NodeGroups};
use crate::provider_id::NodeRef;
use crate::status::AutoscalerError;

type Result<T> = std::result::Result<T, AutoscalerError>;

/// How a member stands, as NodeGroupNodes reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberState {
    /// Its node exists.
    Running,
    /// Being created (journaled, or wanted and not yet asked for).
    Creating,
    /// Being deleted.
    Deleting,
}

/// Why a member could not be made, in the autoscaler's classes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberError {
    /// A short code (`capacity`, `quota`, `create-failed`, ...).
    pub code: String,
    /// What happened.
    pub message: String,
    /// 1: out of resources; 99: anything else (the autoscaler's
    /// `InstanceErrorClass`).
    pub class: i32,
}

/// The autoscaler's class for capacity and quota failures.
pub const OUT_OF_RESOURCES: i32 = 1;
/// The autoscaler's class for every other failure.
pub const OTHER_ERROR: i32 = 99;

/// One instance of a group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    /// Its provider id ([`NodeRef::encode`]).
    pub id: String,
    /// Where it stands.
    pub state: MemberState,
    /// Why it is not being made, when it failed.
    pub error: Option<MemberError>,
}

/// The shared state of the node groups.
pub(crate) struct Scaler {
    pub(crate) fleet: Arc<Fleet>,
    pub(crate) groups: NodeGroups,
    /// Held while a group's target or marks change.
    targets: tokio::sync::Mutex<()>,
    /// Held while members are added or terminated: the fleet's scale grows
    /// from the count of members it finds, so a terminate during a grow
    /// step would make it add two.
    changes: tokio::sync::Mutex<()>,
    /// Per group: the last failure to make a member, and whether a grow
    /// step is under way.
    status: Mutex<BTreeMap<String, GroupStatus>>,
    /// Wakes the grower.
    wake: tokio::sync::Notify,
    /// Passes of the grower started and finished.
    passes: tokio::sync::watch::Sender<(u64, u64)>,
    /// How long to wait between passes when nothing wakes the grower.
    pub(crate) retry_every: Duration,
}

#[derive(Clone, Debug, Default)]
struct GroupStatus {
    failure: Option<MemberError>,
    growing: u32,
}

fn target_key(group: &str) -> String {
    format!("autoscaler-target/{group}")
}

fn doomed_key(request_id: &str) -> String {
    format!("autoscaler-doomed/{request_id}")
}

/// The highest wanted slot number handed out for `group`.
fn slots_hi_key(group: &str) -> String {
    format!("autoscaler-wanted-hi/{group}")
}

/// Wanted slot numbers of `group` up to this one are retired for good.
fn slots_lo_key(group: &str) -> String {
    format!("autoscaler-wanted-lo/{group}")
}

/// Wanted slot `n` of `group` was dropped by a delete.
fn slot_gone_key(group: &str, n: u32) -> String {
    format!("autoscaler-wanted-gone/{group}/{n}")
}

/// A group's members, sorted out.
struct Members {
    /// Every journaled intent of the group.
    all: Vec<Intent>,
    /// Request ids marked for deletion.
    doomed: std::collections::BTreeSet<String>,
}

impl Members {
    fn is_live(&self, i: &Intent) -> bool {
        !self.doomed.contains(&i.request_id) && !matches!(i.state, IntentState::Terminating { .. })
    }

    fn live(&self) -> u32 {
        u32::try_from(self.all.iter().filter(|i| self.is_live(i)).count()).unwrap_or(u32::MAX)
    }
}

impl Scaler {
    pub(crate) fn new(fleet: Arc<Fleet>, groups: NodeGroups) -> Self {
        Self {
            fleet,
            groups,
            targets: tokio::sync::Mutex::new(()),
            changes: tokio::sync::Mutex::new(()),
            status: Mutex::new(BTreeMap::new()),
            wake: tokio::sync::Notify::new(),
            passes: tokio::sync::watch::channel((0, 0)).0,
            retry_every: Duration::from_secs(10),
        }
    }

    pub(crate) fn group(&self, id: &str) -> Result<&NodeGroup> {
        self.groups
            .get(id)
            .ok_or_else(|| AutoscalerError::UnknownGroup(id.to_string()))
    }

    fn status(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, GroupStatus>> {
        self.status
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn members(&self, group: &str) -> Result<Members> {
        let all = self.fleet.members(group)?;
        // Every member's mark in one read of the journal.
        let keys: Vec<String> = all.iter().map(|i| doomed_key(&i.request_id)).collect();
        let names: Vec<&str> = keys.iter().map(String::as_str).collect();
        let marks = self.fleet.journal().values(&names)?;
        let doomed = all
            .iter()
            .zip(marks)
            .filter(|(_, mark)| mark.is_some())
            .map(|(i, _)| i.request_id.clone())
            .collect();
        Ok(Members { all, doomed })
    }

    /// The group's target: as kept, else its live members within min..max.
    fn target_of(&self, g: &NodeGroup, members: &Members) -> Result<u32> {
        match self.fleet.journal().value(&target_key(g.id()))? {
            Some(t) => Ok(u32::try_from(t).unwrap_or(u32::MAX)),
            None => Ok(g.capacity.clamp(members.live())),
        }
    }

    /// The group's wanted-slot bounds: numbers up to `lo` are retired, `hi`
    /// is the highest handed out.
    fn slot_bounds(&self, group: &str) -> Result<(u32, u32)> {
        let j = self.fleet.journal();
        let num = |v: Option<u64>| u32::try_from(v.unwrap_or(0)).unwrap_or(u32::MAX);
        let lo = num(j.value(&slots_lo_key(group))?);
        let hi = num(j.value(&slots_hi_key(group))?);
        Ok((lo, hi.max(lo)))
    }

    fn slot_gone(&self, group: &str, n: u32) -> Result<bool> {
        Ok(self
            .fleet
            .journal()
            .value(&slot_gone_key(group, n))?
            .is_some())
    }

    /// The numbers of the group's `wanted` slots, lowest first: stable ids
    /// (`wasmprov-wanted://GROUP/N`), never reused. They are the highest
    /// numbers handed out that are neither retired nor dropped, and above
    /// the highest ones handed out when the group wants more (a member
    /// lost). A new member takes the lowest slot; an increase hands out
    /// numbers above every slot; a delete drops exactly the slot named.
    fn slots(&self, group: &str, wanted: u32) -> Result<Vec<u32>> {
        let (lo, hi) = self.slot_bounds(group)?;
        let want = usize::try_from(wanted).unwrap_or(usize::MAX);
        let mut out = Vec::new();
        let mut n = hi;
        while n > lo && out.len() < want {
            if !self.slot_gone(group, n)? {
                out.push(n);
            }
            n -= 1;
        }
        out.reverse();
        let mut n = hi;
        while out.len() < want && n < u32::MAX {
            n += 1;
            if !self.slot_gone(group, n)? {
                out.push(n);
            }
        }
        Ok(out)
    }

    /// Retires every wanted slot number up to `n` (written with the
    /// others under `targets`).
    fn retire_slots(&self, group: &str, n: u32) -> Result<()> {
        let (lo, hi) = self.slot_bounds(group)?;
        if n <= lo {
            return Ok(());
        }
        let (lo_key, hi_key) = (slots_lo_key(group), slots_hi_key(group));
        self.fleet.journal().set_values(&[
            (lo_key.as_str(), Some(u64::from(n))),
            (hi_key.as_str(), Some(u64::from(hi.max(n)))),
        ])?;
        Ok(())
    }

    /// The group's target size.
    pub(crate) fn target(&self, id: &str) -> Result<u32> {
        let g = self.group(id)?;
        let members = self.members(id)?;
        self.target_of(g, &members)
    }

    /// Raises the target by `delta` (durably), wakes the grower and waits up
    /// to `wait` for a pass that saw the new target to finish.
    pub(crate) async fn increase(&self, id: &str, delta: i32, wait: Duration) -> Result<()> {
        let g = self.group(id)?;
        let delta = u32::try_from(delta)
            .ok()
            .filter(|d| *d > 0)
            .ok_or_else(|| {
                AutoscalerError::InvalidArgument(format!(
                    "delta {delta}: an increase must be positive"
                ))
            })?;
        if let Some(doubt) = self.fleet.held()? {
            return Err(AutoscalerError::FailedPrecondition(format!(
                "creating nothing: the journal is held, it does not know the whole fleet ({doubt}); clear the doubt first"
            )));
        }
        self.fleet
            .check_journal()
            .map_err(AutoscalerError::Journal)?;
        {
            let _t = self.targets.lock().await;
            let members = self.members(id)?;
            let target = self.target_of(g, &members)?;
            let new = target.saturating_add(delta);
            if new > g.capacity.max {
                return Err(AutoscalerError::FailedPrecondition(format!(
                    "group {id}: target {target} + {delta} is above its max {}",
                    g.capacity.max
                )));
            }
            // The new wanted slots are numbered above every slot there is.
            let (_, hi) = self.slot_bounds(id)?;
            let top = self
                .slots(id, target.saturating_sub(members.live()))?
                .last()
                .copied()
                .unwrap_or(0)
                .max(hi);
            let (target_key, hi_key) = (target_key(id), slots_hi_key(id));
            self.fleet.journal().set_values(&[
                (target_key.as_str(), Some(u64::from(new))),
                (hi_key.as_str(), Some(u64::from(top.saturating_add(delta)))),
            ])?;
        }
        let started = self.passes.borrow().0;
        self.wake.notify_one();
        let mut rx = self.passes.subscribe();
        let _ = tokio::time::timeout(wait, rx.wait_for(|(_, done)| *done > started)).await;
        Ok(())
    }

    /// Lowers the target by `-delta`, dropping only wanted members no
    /// cloud was asked for.
    pub(crate) async fn decrease(&self, id: &str, delta: i32) -> Result<()> {
        let g = self.group(id)?;
        let drop = u32::try_from(delta.checked_neg().unwrap_or(0))
            .ok()
            .filter(|d| *d > 0)
            .ok_or_else(|| {
                AutoscalerError::InvalidArgument(format!(
                    "delta {delta}: a decrease must be negative"
                ))
            })?;
        let _t = self.targets.lock().await;
        let members = self.members(id)?;
        let target = self.target_of(g, &members)?;
        let growing = self.status().get(id).map_or(0, |s| s.growing);
        let made = members.live().saturating_add(growing);
        let wanted = target.saturating_sub(made);
        if drop > wanted {
            return Err(AutoscalerError::FailedPrecondition(format!(
                "group {id}: attempt to delete existing nodes: target {target}, {made} member(s) made or being made, so at most {wanted} can be dropped, not {drop}; delete members by name"
            )));
        }
        // The lowest wanted slots go, with the target: naming one of them
        // in a delete afterwards changes nothing.
        let slots = self.slots(id, target.saturating_sub(members.live()))?;
        let dropped = usize::try_from(drop).unwrap_or(usize::MAX);
        let gone_keys: Vec<String> = slots
            .iter()
            .take(dropped)
            .map(|n| slot_gone_key(id, *n))
            .collect();
        let target_key = target_key(id);
        let mut values: Vec<(&str, Option<u64>)> =
            vec![(target_key.as_str(), Some(u64::from(target - drop)))];
        values.extend(gone_keys.iter().map(|k| (k.as_str(), Some(1))));
        self.fleet.journal().set_values(&values)?;
        Ok(())
    }

    /// The group's instances.
    pub(crate) fn instances(&self, id: &str) -> Result<Vec<Instance>> {
        let g = self.group(id)?;
        let members = self.members(id)?;
        let target = self.target_of(g, &members)?;
        let mut out = Vec::new();
        for i in &members.all {
            let doomed = members.doomed.contains(&i.request_id);
            let (id, state) = match &i.state {
                IntentState::Active { provider_id } => (
                    NodeRef::node(&i.plugin, provider_id),
                    if doomed {
                        MemberState::Deleting
                    } else {
                        MemberState::Running
                    },
                ),
                IntentState::Terminating { provider_id } => {
                    (NodeRef::node(&i.plugin, provider_id), MemberState::Deleting)
                }
                IntentState::Pending => (
                    NodeRef::Creating {
                        group: g.id().to_string(),
                        request_id: i.request_id.clone(),
                    }
                    .encode(),
                    if doomed {
                        MemberState::Deleting
                    } else {
                        MemberState::Creating
                    },
                ),
            };
            let error = match (&state, &i.last_error) {
                (MemberState::Creating, Some(e)) => Some(MemberError {
                    code: "create-uncertain".into(),
                    message: e.clone(),
                    class: OTHER_ERROR,
                }),
                _ => None,
            };
            out.push(Instance { id, state, error });
        }
        let failure = self.status().get(id).and_then(|s| s.failure.clone());
        for n in self.slots(g.id(), target.saturating_sub(members.live()))? {
            out.push(Instance {
                id: NodeRef::Wanted {
                    group: g.id().to_string(),
                    n,
                }
                .encode(),
                state: MemberState::Creating,
                error: failure.clone(),
            });
        }
        Ok(out)
    }

    /// The group a provider id belongs to, if it is a member of a
    /// configured group.
    pub(crate) fn group_of(&self, provider_id: &str) -> Result<Option<&NodeGroup>> {
        let group = match NodeRef::decode(provider_id) {
            None => return Ok(None),
            Some(NodeRef::Creating { group, request_id }) => self
                .fleet
                .journal()
                .get(&request_id)?
                .filter(|i| i.group.as_deref() == Some(group.as_str()))
                .map(|_| group),
            Some(NodeRef::Wanted { group, .. }) => Some(group),
            Some(NodeRef::Node {
                plugin,
                provider_id,
            }) => self
                .fleet
                .intents()?
                .into_iter()
                .find(|i| i.plugin == plugin && i.provider_id() == Some(provider_id.as_str()))
                .and_then(|i| i.group),
        };
        Ok(group.and_then(|g| self.groups.get(&g)))
    }

    /// Deletes exactly the named members of group `id`, refusing all of
    /// them, before anything is changed, when one is not a member of the
    /// group, when the group would go below its min, or when the journal's
    /// evidence is in doubt.
    pub(crate) async fn delete(&self, id: &str, provider_ids: &[String]) -> Result<()> {
        let g = self.group(id)?;
        if provider_ids.is_empty() {
            return Err(AutoscalerError::InvalidArgument(
                "no node named: name the nodes to delete".into(),
            ));
        }
        if let Some(doubt) = self.fleet.held()? {
            return Err(AutoscalerError::FailedPrecondition(format!(
                "deleting nothing: the journal does not know the whole fleet ({doubt})"
            )));
        }
        self.fleet
            .check_journal()
            .map_err(AutoscalerError::Journal)?;
        // The members marked by this call.
        let mut doom: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        {
            let _t = self.targets.lock().await;
            let members = self.members(id)?;
            let target = self.target_of(g, &members)?;
            let live = members.live();
            let wanted = target.saturating_sub(live);
            let slots = self.slots(id, wanted)?;
            let (_, hi) = self.slot_bounds(id)?;
            let issued = slots.last().copied().unwrap_or(0).max(hi);
            let mut gone: Vec<u32> = Vec::new();
            let mut seen = std::collections::BTreeSet::new();
            // Live members named here (each once), wanted slots named, and
            // the named members not marked yet (a member already marked is
            // being deleted: naming it again changes nothing).
            let mut live_named = std::collections::BTreeSet::new();
            let mut named_wanted = 0u32;
            for pid in provider_ids {
                if !seen.insert(pid.as_str()) {
                    continue;
                }
                let not_member = |why: &str| {
                    AutoscalerError::FailedPrecondition(format!(
                        "deleting nothing: {pid:?} is not a member of group {id}: {why}"
                    ))
                };
                match NodeRef::decode(pid) {
                    None => {
                        return Err(AutoscalerError::InvalidArgument(format!(
                            "deleting nothing: {pid:?} is not a wasmprov node id (wasmprov://PLUGIN/PROVIDER-ID)"
                        )));
                    }
                    Some(NodeRef::Node {
                        plugin,
                        provider_id,
                    }) => {
                        let Some(m) = members.all.iter().find(|i| {
                            i.plugin == plugin && i.provider_id() == Some(provider_id.as_str())
                        }) else {
                            let elsewhere = self
                                .fleet
                                .intents()?
                                .into_iter()
                                .find(|i| {
                                    i.plugin == plugin
                                        && i.provider_id() == Some(provider_id.as_str())
                                })
                                .map(|i| i.group.unwrap_or_else(|| "no group".into()));
                            return Err(not_member(&match elsewhere {
                                Some(other) => format!("it belongs to {other}"),
                                None => "this host's journal does not have it".into(),
                            }));
                        };
                        if members.is_live(m) {
                            live_named.insert(m.request_id.clone());
                        }
                        if !members.doomed.contains(&m.request_id) {
                            doom.insert(m.request_id.clone());
                        }
                    }
                    Some(NodeRef::Creating { group, request_id }) => {
                        if group != id {
                            return Err(not_member(&format!("it is named for group {group}")));
                        }
                        let Some(m) = members.all.iter().find(|i| i.request_id == request_id)
                        else {
                            return Err(not_member("no member is being created under that id"));
                        };
                        if members.is_live(m) {
                            live_named.insert(request_id.clone());
                        }
                        if !members.doomed.contains(&request_id) {
                            doom.insert(request_id);
                        }
                    }
                    Some(NodeRef::Wanted { group, n }) => {
                        if group != id {
                            return Err(not_member(&format!("it is named for group {group}")));
                        }
                        if slots.contains(&n) {
                            gone.push(n);
                            named_wanted += 1;
                        } else if n > issued {
                            return Err(not_member(&format!(
                                "no wanted member {n} was ever listed (the group wants {wanted} more)"
                            )));
                        } else if !self.slot_gone(id, n)? {
                            return Err(not_member(&format!(
                                "wanted member {n} is no longer wanted: a member was made for it; name that member"
                            )));
                        }
                        // Else a slot already dropped: deleting it again
                        // changes nothing.
                    }
                }
            }
            // The min is kept by the members that stay: live ones not named
            // here, and wanted ones not named (a doomed member never stays).
            let named_live = u32::try_from(live_named.len()).unwrap_or(u32::MAX);
            let staying = live.saturating_sub(named_live) + wanted.saturating_sub(named_wanted);
            if staying < g.capacity.min {
                return Err(AutoscalerError::FailedPrecondition(format!(
                    "deleting nothing: group {id} would keep {staying} member(s) (target {target}, {named_live} live and {named_wanted} wanted named), below its min {}",
                    g.capacity.min
                )));
            }
            // The whole decision in one write, before any cloud is asked:
            // the target lowered once (never below the members staying, so
            // members left over a target by an older host are dropped
            // without lowering it twice) and every named member marked, so
            // a crash from here on leaves the grower (after a restart too)
            // to terminate each of them.
            let new = target.min(staying);
            let doomed_keys: Vec<String> = doom.iter().map(|r| doomed_key(r)).collect();
            let target_key = target_key(id);
            let mut values: Vec<(&str, Option<u64>)> =
                vec![(target_key.as_str(), Some(u64::from(new)))];
            values.extend(doomed_keys.iter().map(|k| (k.as_str(), Some(1))));
            let gone_keys: Vec<String> = gone.iter().map(|n| slot_gone_key(id, *n)).collect();
            values.extend(gone_keys.iter().map(|k| (k.as_str(), Some(1))));
            self.fleet.journal().set_values(&values)?;
        }
        // The members marked by this call whose node exists (or is being
        // terminated) are terminated now; those still being created, and
        // those marked before (a retried delete), are left to the grower.
        let mut failed = None;
        {
            let _c = self.changes.lock().await;
            for i in self.fleet.members(id)? {
                if !doom.contains(&i.request_id) {
                    continue;
                }
                let (IntentState::Active { provider_id }
                | IntentState::Terminating { provider_id }) = &i.state
                else {
                    continue;
                };
                if let Err(e) = self.fleet.terminate(&i.plugin, provider_id).await {
                    tracing::warn!(plugin = i.plugin, provider_id, "deleting a member: {e}");
                    failed.get_or_insert(e);
                }
            }
        }
        // Members marked while being created may have been made meanwhile;
        // a terminate that failed is tried again.
        self.wake.notify_one();
        match failed {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Starts the grower: a task that brings every group to its target
    /// and terminates members deleted while being created, woken by
    /// increases and deletes, and every `retry_every`. It ends when the
    /// scaler is dropped.
    pub(crate) fn start(
        self: &Arc<Self>,
        gate: Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>,
    ) {
        let weak: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            // Nothing is created or terminated before the gate opens (the
            // daemon's startup reconcile: until it has compared the journal
            // with the clouds, a fresh or foreign journal is not yet held).
            if let Some(gate) = gate {
                gate.await;
            }
            loop {
                let Some(me) = weak.upgrade() else { return };
                me.passes.send_modify(|(started, _)| *started += 1);
                let started = me.passes.borrow().0;
                me.pass().await;
                me.passes.send_modify(|(_, done)| *done = started);
                let wait = me.retry_every;
                let woken = async {
                    me.wake.notified().await;
                };
                let _ = tokio::time::timeout(wait, woken).await;
                drop(me);
            }
        });
    }

    /// One pass over every group.
    async fn pass(&self) {
        if self.fleet.is_closed() {
            return;
        }
        for g in self.groups.groups() {
            if let Err(e) = self.settle(g).await {
                tracing::warn!(group = g.id(), "autoscaler group: {e}");
            }
        }
    }

    /// Terminates the group's doomed members whose node exists, then asks
    /// for its wanted members one at a time.
    async fn settle(&self, g: &NodeGroup) -> Result<()> {
        // While the journal's evidence is in doubt nothing is created nor
        // terminated: its members and targets may not be the fleet's.
        if let Some(doubt) = self.fleet.held()? {
            tracing::warn!(
                group = g.id(),
                "the journal is held: the group is not settled ({doubt})"
            );
            return Ok(());
        }
        let members = self.members(g.id())?;
        for i in &members.all {
            if !members.doomed.contains(&i.request_id) {
                continue;
            }
            // Made (or half terminated): terminated until it is gone; one
            // still being created waits for its create to finish.
            if let IntentState::Active { provider_id } | IntentState::Terminating { provider_id } =
                &i.state
            {
                let _c = self.changes.lock().await;
                if let Err(e) = self.fleet.terminate(&i.plugin, provider_id).await {
                    tracing::warn!(
                        group = g.id(),
                        plugin = i.plugin,
                        provider_id,
                        "terminating a deleted member: {e}"
                    );
                }
            }
        }
        // Marks of members gone (terminated, or never made) are dropped.
        for request_id in &members.doomed {
            if self.fleet.journal().get(request_id)?.is_none() {
                self.fleet
                    .journal()
                    .set_value(&doomed_key(request_id), None)?;
            }
        }
        loop {
            let _c = self.changes.lock().await;
            let all = {
                let _t = self.targets.lock().await;
                if self.fleet.held()?.is_some() {
                    return Ok(());
                }
                let members = self.members(g.id())?;
                let target = self.target_of(g, &members)?;
                if members.live() >= target {
                    self.status().entry(g.id().to_string()).or_default().failure = None;
                    return Ok(());
                }
                self.status().entry(g.id().to_string()).or_default().growing += 1;
                let slot = self
                    .slots(g.id(), target - members.live())?
                    .first()
                    .copied();
                (u32::try_from(members.all.len()).unwrap_or(u32::MAX), slot)
            };
            let (all, slot) = all;
            let step = self.grow_one(g, all).await;
            self.status().entry(g.id().to_string()).or_default().growing -= 1;
            // The member made took the lowest wanted slot: its number is
            // never listed again.
            if let (Ok(None), Some(n)) = (&step, slot) {
                let _t = self.targets.lock().await;
                self.retire_slots(g.id(), n)?;
            }
            let failure = match step {
                Ok(None) => None,
                Ok(Some(f)) => Some(f),
                Err(e) => Some(MemberError {
                    code: "create-failed".into(),
                    message: e.to_string(),
                    class: OTHER_ERROR,
                }),
            };
            if let Some(f) = failure {
                tracing::warn!(group = g.id(), "a member could not be made: {}", f.message);
                self.status().entry(g.id().to_string()).or_default().failure = Some(f);
                return Ok(());
            }
        }
    }

    /// Adds one member to the group through the fleet's scale (its
    /// fallback across offerings and plugins), with its own boot data.
    /// `all` is the number of the group's intents when the step began.
    async fn grow_one(
        &self,
        g: &NodeGroup,
        all: u32,
    ) -> std::result::Result<Option<MemberError>, anyhow::Error> {
        let token = join_token();
        let mut one: CapacityGroup = g.capacity.clone();
        one.boot = g.boot_for(&token);
        // Grows by one from the members there are, never shrinks: the
        // bounds are the count and the count plus one.
        let desired = all.saturating_add(1);
        one.min = desired;
        one.max = desired;
        let report = self.fleet.scale(&one, desired).await?;
        if !report.added.is_empty() {
            return Ok(None);
        }
        let message = if report.errors.is_empty() {
            "no member was made".to_string()
        } else {
            report.errors.join("; ")
        };
        // From the plugins' typed errors (capacity, quota), never the text.
        let (code, class) = if report.out_of_resources {
            ("out-of-resources", OUT_OF_RESOURCES)
        } else {
            ("create-failed", OTHER_ERROR)
        };
        Ok(Some(MemberError {
            code: code.into(),
            message,
            class,
        }))
    }
}

/// A fresh join token in kubeadm's bootstrap-token form
/// (`[a-z0-9]{6}.[a-z0-9]{16}`).
fn join_token() -> String {
    use rand::Rng;
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    let mut pick = |n: usize| -> String {
        (0..n)
            .map(|_| char::from(CHARS[rng.random_range(0..CHARS.len())]))
            .collect()
    };
    format!("{}.{}", pick(6), pick(16))
}

#[cfg(test)]
mod tests {
    #[test]
    fn join_tokens_have_kubeadms_form() {
        let t = super::join_token();
        let (a, b) = t.split_once('.').expect("a dot");
        assert_eq!((a.len(), b.len()), (6, 16));
        assert!(
            t.chars()
                .all(|c| c == '.' || c.is_ascii_lowercase() || c.is_ascii_digit())
        );
        assert_ne!(super::join_token(), t);
    }
}
