//! Reconcile: the journal against what each backend lists, and the lease
//! sweep. Where a node is terminated, an intent forgotten, a leak proven or
//! an orphan found, and what is kept in the journal's history about it.
//!
//! Never destroy what may be acknowledged:
//! - a node is terminated as a leak only when this journal can prove it
//!   made it (`evidence.rs`: this owner, this journal's identity, a
//!   generation it issued), no intent wants it, no call on its request id is
//!   running, and two lists at least the grace apart both showed it;
//! - a node of this owner that the journal cannot prove it made is an
//!   orphan: reported, never terminated; one made by another journal, or
//!   under a generation this copy of the journal never issued, *holds*
//!   every destructive action (leak terminations, lease expiries,
//!   forgetting intents, scale-down) until the operator adopts or confirms
//!   the orphans;
//! - a journaled node is forgotten only when two lists the grace apart both
//!   missed it and the backend's `get` says it does not exist; a pending
//!   provision is given up only when two lists the grace apart missed it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use wasmprov_api::{CloudProvisioner, NodeHandle, ProvisionerError};

use crate::evidence::{Listing, Lookup, Standing};
use crate::fleet::{Fleet, REQUEST_LABEL};
use crate::journal::{
    Doubt, DoubtKind, Event, EventKind, EventStatus, Intent, IntentState, Sighting, now_ms,
    sighting_key,
};
use crate::report::{Leak, LeakPolicy, Orphan, OrphanKind, ReconcilePolicy, ReconcileReport};

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A node no intent wants that this journal can prove it made.
struct Candidate {
    plugin: String,
    node: NodeHandle,
    reason: String,
    sighting: Sighting,
}

impl Fleet {
    /// Compares the journal with what each plugin describes, and settles the
    /// difference:
    /// - every backend is listed first, and every node of this owner that no
    ///   intent wants is weighed: a *leak candidate* when the journal can
    ///   prove it made it, else an *orphan* ([`Orphan`]); an orphan made by
    ///   another journal, or by this one under a generation this copy never
    ///   issued, raises a hold ([`Fleet::held`]) before anything is done;
    /// - with [`ReconcilePolicy::adopt`] every orphan is recorded as an
    ///   intent; with [`ReconcilePolicy::confirm_orphans`] every orphan is
    ///   confirmed as not this journal's; either lifts the hold;
    /// - a pending provision whose node is listed (by its request-id label)
    ///   is confirmed; one whose node is not is asked again under the same
    ///   request id when a crash interrupted it (the plugin looks the node
    ///   up before creating one), or forgotten when its caller was told it
    ///   failed (or resume is off) once two lists the grace apart missed it;
    /// - an interrupted termination is finished;
    /// - a node whose lease ran out is terminated;
    /// - a journaled node missed by two lists the grace apart is looked up
    ///   with `get`, and forgotten (vanished) only when it does not exist;
    /// - a leak candidate seen by two lists the grace apart is a leak:
    ///   reported, or terminated per policy.
    ///
    /// While a hold stands, nothing is terminated or forgotten (what was
    /// held back is in the report); interrupted terminations are still
    /// finished and interrupted provisions confirmed or resumed.
    /// Terminations, orphans, adoptions, vanished nodes and abandoned
    /// provisions are kept in the journal's [history](Fleet::history). A
    /// plugin whose describe fails is skipped (its intents stay as they
    /// are); so is an intent whose plugin is not loaded, and a request id a
    /// call of this fleet is working on right now. One reconcile runs at a
    /// time; provisions and terminations of other request ids go on beside
    /// it.
    ///
    /// # Errors
    /// When the journal cannot be read or written.
    pub async fn reconcile(&self, policy: &ReconcilePolicy) -> Result<ReconcileReport> {
        let _one = self.reconciling.lock().await;
        self.usable()?;
        let pass = self.journal().next_pass()?;
        let mut report = ReconcileReport::default();
        let names: BTreeSet<String> = self
            .backends()
            .backend_names()
            .into_iter()
            .chain(self.journal().all()?.into_iter().map(|i| i.plugin))
            .collect();
        // 1. Every list first, so that a hold found on any backend stands
        //    before anything is destroyed on any.
        let mut lists: BTreeMap<String, (Arc<dyn CloudProvisioner>, Listing)> = BTreeMap::new();
        for name in names {
            let Some(backend) = self.backends().backend(&name) else {
                let n = self
                    .journal()
                    .all()?
                    .iter()
                    .filter(|i| i.plugin == name)
                    .count();
                report.errors.push(format!(
                    "plugin {name:?} is not loaded; its {n} intent(s) are left as they are"
                ));
                continue;
            };
            match self.evidence().list(&name, &*backend).await {
                Ok(listing) => {
                    self.listed
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .insert(name.clone());
                    self.backends().nodes_listed(&name, listing.nodes.len());
                    if listing.foreign > 0 {
                        report.foreign_answers.push((name.clone(), listing.foreign));
                    }
                    lists.insert(name, (backend, listing));
                }
                Err(e) => report.errors.push(format!("{name}: describe failed: {e}")),
            }
        }
        // 2. Nodes no intent wants (the journal read after the lists: a
        //    node listed had its intent written before it was created).
        let now = now_ms();
        let mut candidates = Vec::new();
        let mut orphans = Vec::new();
        for (name, (_, listing)) in &lists {
            self.weigh(
                name,
                &listing.nodes,
                pass,
                now,
                &mut candidates,
                &mut orphans,
            )?;
        }
        if policy.adopt {
            orphans = self.adopt(orphans, &mut report)?;
        }
        if policy.confirm_orphans {
            self.confirm(&orphans)?;
            orphans.clear();
        }
        for name in lists.keys() {
            let n = orphans.iter().filter(|o| &o.plugin == name).count();
            self.backends().orphans_found(name, n);
        }
        if !orphans.is_empty() {
            tracing::warn!(
                orphans = orphans.len(),
                "nodes of this owner that this journal cannot prove it made: left alone; adopt them (reconcile --adopt) or confirm them (reconcile --confirm-orphans)"
            );
        }
        report.orphans = orphans;
        let held = self.journal().doubt()?;
        // 3. The intents, plugin by plugin.
        for (name, (backend, listing)) in &lists {
            self.settle(
                name,
                &**backend,
                listing,
                policy,
                held.is_some(),
                &mut report,
            )
            .await?;
        }
        // 4. The leaks.
        self.leaks(candidates, policy, pass, held.is_some(), &mut report)
            .await?;
        report.held = self.journal().doubt()?;
        Ok(report)
    }

    /// Weighs the nodes of `name` that no intent wants: proven leak
    /// candidates, or orphans (reported once in the history; a foreign or
    /// stale one raises the hold). Sightings of nodes no longer listed are
    /// forgotten: a leak must show in consecutive lists.
    fn weigh(
        &self,
        name: &str,
        nodes: &[NodeHandle],
        pass: u64,
        now: u64,
        candidates: &mut Vec<Candidate>,
        orphans: &mut Vec<Orphan>,
    ) -> Result<()> {
        let journal = self.journal();
        let intents: BTreeMap<String, Intent> = journal
            .all()?
            .into_iter()
            .map(|i| (i.request_id.clone(), i))
            .collect();
        // Named by any intent, of any plugin: two manifests may reach one
        // cloud (a renamed manifest, a second region), and a node one of
        // them made is never another's leak.
        let named: BTreeSet<&str> = intents.values().filter_map(Intent::provider_id).collect();
        let born: BTreeMap<u64, &Intent> = intents
            .values()
            .filter(|i| i.born > 0)
            .map(|i| (i.born, i))
            .collect();
        let mut seen = BTreeSet::new();
        for node in nodes {
            if named.contains(node.provider_id.as_str()) {
                continue;
            }
            let reason = match node.labels.get(REQUEST_LABEL) {
                None => "no request id label".to_string(),
                Some(r) => {
                    // A call on this id in flight, or a pending intent: it
                    // may be acknowledged any moment. Not unwanted.
                    if self.requests.is_busy(r) {
                        continue;
                    }
                    match intents.get(r) {
                        Some(i)
                            if i.plugin == name
                                && i.state == IntentState::Pending
                                && self.evidence().made_here(node) =>
                        {
                            continue;
                        }
                        Some(i) if i.plugin == name => format!("a second node for request {r}"),
                        Some(i) => {
                            tracing::warn!(
                                plugin = name,
                                node = %node.provider_id,
                                request_id = %r,
                                journaled_for = %i.plugin,
                                "a node of a request journaled for another plugin (two manifests reaching one cloud?): left alone"
                            );
                            continue;
                        }
                        None => format!("request {r} is not in the journal"),
                    }
                }
            };
            // The node of an intent (by the generation it was born under)
            // listed through another plugin, or under another request label.
            if let Some(p) = wasmprov_api::provenance::Provenance::of(node)
                && p.journal == journal.identity()
                && let Some(owner) = born.get(&p.generation)
                && !(owner.plugin == name
                    && node.labels.get(REQUEST_LABEL) == Some(&owner.request_id))
            {
                tracing::warn!(
                    plugin = name,
                    node = %node.provider_id,
                    intent = %owner.request_id,
                    intent_plugin = %owner.plugin,
                    "a node born for another intent's request or plugin: left alone"
                );
                continue;
            }
            let key = sighting_key(name, &node.provider_id);
            seen.insert(key.clone());
            let known = journal.sighting(&key)?;
            let mut sighting = known.clone().unwrap_or(Sighting {
                first_ms: now,
                first_pass: pass,
                reported: false,
            });
            let forgotten = journal.forgotten(
                name,
                &node.provider_id,
                node.labels.get(REQUEST_LABEL).and_then(|r| {
                    wasmprov_api::provenance::Provenance::of(node)
                        .filter(|p| p.journal == journal.identity())
                        .map(|p| (r.as_str(), p.generation))
                }),
            )?;
            let standing = match forgotten {
                Some(f) => Standing::Orphan(
                    OrphanKind::Returned,
                    format!(
                        "forgotten as vanished at {} ms (request {}), listed again",
                        f.at_ms, f.request_id
                    ),
                ),
                None => self.evidence().standing(node)?,
            };
            match standing {
                Standing::Proven => candidates.push(Candidate {
                    plugin: name.to_string(),
                    node: node.clone(),
                    reason,
                    sighting: sighting.clone(),
                }),
                Standing::Orphan(kind, why) => {
                    if !journal.confirmed(&key)? {
                        let reason = format!("{why}; {reason}");
                        if !sighting.reported {
                            let event = self.event(
                                EventKind::Orphaned,
                                name,
                                node.labels.get(REQUEST_LABEL).map(String::as_str),
                                Some(&node.provider_id),
                                format!("{}: {reason}", kind.as_str()),
                            );
                            journal.record(&event)?;
                            sighting.reported = true;
                            tracing::warn!(
                                plugin = name,
                                node = %node.provider_id,
                                kind = kind.as_str(),
                                "orphan: {reason}; left alone"
                            );
                        }
                        if kind != OrphanKind::Unproven {
                            self.hold(name, node, kind, &reason)?;
                        }
                        orphans.push(Orphan {
                            plugin: name.to_string(),
                            node: node.clone(),
                            kind,
                            reason,
                        });
                    }
                }
            }
            if known.as_ref() != Some(&sighting) {
                journal.put_sighting(&key, &sighting)?;
            }
        }
        journal.keep_sightings(name, &seen)
    }

    /// Raises the hold for a foreign or stale orphan, unless one stands.
    fn hold(&self, name: &str, node: &NodeHandle, kind: OrphanKind, reason: &str) -> Result<()> {
        let kind = match kind {
            OrphanKind::Stale => DoubtKind::Stale,
            OrphanKind::Returned => DoubtKind::Returned,
            _ => DoubtKind::Foreign,
        };
        let doubt = Doubt {
            kind,
            since_ms: now_ms(),
            plugin: name.to_string(),
            provider_id: node.provider_id.clone(),
            detail: reason.to_string(),
        };
        let event = self.event(
            EventKind::Held,
            name,
            node.labels.get(REQUEST_LABEL).map(String::as_str),
            Some(&node.provider_id),
            doubt.to_string(),
        );
        if self.journal().raise_doubt(&doubt, &event)? {
            tracing::error!("{doubt}");
        }
        Ok(())
    }

    /// Settles the intents of one listed plugin.
    #[allow(
        clippy::too_many_lines,
        reason = "one pass over one plugin's intents, case by case"
    )]
    async fn settle(
        &self,
        name: &str,
        backend: &dyn CloudProvisioner,
        listing: &Listing,
        policy: &ReconcilePolicy,
        held: bool,
        report: &mut ReconcileReport,
    ) -> Result<()> {
        let mut by_id: BTreeSet<&str> = BTreeSet::new();
        let mut by_request: BTreeMap<&str, Vec<&NodeHandle>> = BTreeMap::new();
        for n in &listing.nodes {
            by_id.insert(&n.provider_id);
            if let Some(r) = n.labels.get(REQUEST_LABEL) {
                by_request.entry(r).or_default().push(n);
            }
        }
        let snapshot: Vec<Intent> = self
            .journal()
            .all()?
            .into_iter()
            .filter(|i| i.plugin == name)
            .collect();
        let now = now_ms();
        let grace = ms(policy.grace);
        for snap in &snapshot {
            let rid = snap.request_id.as_str();
            // A call on this id is running: its intent is its business.
            let Some(_turn) = self.requests.try_lock(rid) else {
                continue;
            };
            // Read again under the lock: a call may have ended meanwhile.
            let Some(intent) = self.journal().get(rid)? else {
                continue;
            };
            if intent.plugin != name {
                continue;
            }
            match intent.state.clone() {
                IntentState::Pending => {
                    // Another journal's node under the same request id is
                    // not this one's answer.
                    let found = by_request.get(rid).and_then(|v| {
                        v.iter()
                            .filter(|n| self.evidence().not_the_answer(&intent, n).is_none())
                            .min_by_key(|n| n.provider_id.clone())
                            .copied()
                    });
                    if let Some(node) = found {
                        let active = Intent {
                            state: IntentState::Active {
                                provider_id: node.provider_id.clone(),
                            },
                            last_error: None,
                            missing_since_ms: None,
                            ..intent.clone()
                        };
                        let Some(active) = self.journal().replace_if(intent.generation, &active)?
                        else {
                            continue;
                        };
                        report
                            .confirmed
                            .push((rid.to_string(), node.provider_id.clone()));
                        if active.expired(now) {
                            self.expire_or_hold(backend, &active, &node.provider_id, held, report)
                                .await?;
                        }
                        continue;
                    }
                    let give_up = if let Some(err) = &intent.last_error {
                        Some(format!("not found after a failed call ({err})"))
                    } else if intent.expired(now) {
                        Some("its lease ran out before the node was made".to_string())
                    } else if !policy.resume_pending {
                        Some("interrupted, not found, and resume is off".to_string())
                    } else {
                        None
                    };
                    if let Some(reason) = give_up {
                        // Forgetting is for good (a node that shows up later
                        // is a leak): believe the cloud only when two lists
                        // the grace apart both miss it.
                        let Some(since) = intent.missing_since_ms else {
                            self.mark_missing(&intent, now)?;
                            continue;
                        };
                        if now.saturating_sub(since) < grace
                            || now.saturating_sub(intent.created_ms) < grace
                        {
                            continue;
                        }
                        if held {
                            report
                                .held_back
                                .push(format!("forgetting pending {name}/{rid} ({reason})"));
                            continue;
                        }
                        self.abandon(&intent, reason, report)?;
                        continue;
                    }
                    // Interrupted by a crash: ask again under the same id;
                    // the plugin looks the node up before it creates one.
                    let request = self.request_for(&intent);
                    let answer = backend.provision_request(&request).await;
                    if let Ok(node) = &answer
                        && let Some(why) = self.evidence().not_the_answer(&intent, node)
                    {
                        // Not this intent's node: neither its answer nor a
                        // refusal of it. Kept, and said.
                        report.errors.push(format!("{name}: resuming {rid}: {why}"));
                        continue;
                    }
                    match answer {
                        Ok(node) => {
                            let active = Intent {
                                state: IntentState::Active {
                                    provider_id: node.provider_id.clone(),
                                },
                                missing_since_ms: None,
                                ..intent.clone()
                            };
                            if self
                                .journal()
                                .replace_if(intent.generation, &active)?
                                .is_none()
                            {
                                self.journal().put(&active)?;
                            }
                            report.resumed.push((rid.to_string(), node.provider_id));
                        }
                        Err(e @ ProvisionerError::NotSent(_)) => {
                            // Nothing left the host: try again next time.
                            report
                                .errors
                                .push(format!("{name}: resuming {rid} failed: {e}"));
                        }
                        Err(e) if e.made_nothing() && !held => {
                            report
                                .errors
                                .push(format!("{name}: resuming {rid} refused: {e}"));
                            self.abandon(&intent, format!("resuming was refused: {e}"), report)?;
                        }
                        Err(e) => {
                            report
                                .errors
                                .push(format!("{name}: resuming {rid} failed: {e}"));
                            let marked = Intent {
                                last_error: Some(e.to_string()),
                                ..intent.clone()
                            };
                            self.journal().replace_if(intent.generation, &marked)?;
                        }
                    }
                }
                IntentState::Active { provider_id } => {
                    if by_id.contains(provider_id.as_str()) {
                        let intent = self.seen(intent)?;
                        if intent.expired(now) {
                            self.expire_or_hold(backend, &intent, &provider_id, held, report)
                                .await?;
                        }
                        continue;
                    }
                    let Some(since) = intent.missing_since_ms else {
                        self.mark_missing(&intent, now)?;
                        continue;
                    };
                    if now.saturating_sub(since) < grace {
                        continue;
                    }
                    // Two lists missed it: the backend's word on the one node.
                    match self.evidence().look_up(name, backend, &provider_id).await {
                        Ok(Lookup::Present(_)) => {
                            // The lists were partial; it is there.
                            let intent = self.seen(intent)?;
                            if intent.expired(now) {
                                self.expire_or_hold(backend, &intent, &provider_id, held, report)
                                    .await?;
                            }
                        }
                        Ok(Lookup::Absent) if held => report.held_back.push(format!(
                            "forgetting {name}/{provider_id} ({rid}), which is gone"
                        )),
                        Ok(Lookup::Absent) => {
                            let event = self.event(
                                EventKind::Vanished,
                                name,
                                Some(rid),
                                Some(&provider_id),
                                format!(
                                    "missed by the lists for {} ms, and get answers no node of this owner with that id",
                                    now.saturating_sub(since)
                                ),
                            );
                            if self
                                .journal()
                                .forget_vanished(&intent, &provider_id, &event)?
                            {
                                tracing::warn!(
                                    plugin = name,
                                    request_id = rid,
                                    node = %provider_id,
                                    "forgotten as vanished: two lists missed it and get answers no node of this owner with that id (if it is listed again it is an orphan that holds the journal, never a leak)"
                                );
                                report.vanished.push((rid.to_string(), provider_id));
                            }
                        }
                        Ok(Lookup::Foreign) => report.errors.push(format!(
                            "{name}: {provider_id} ({rid}) is missing from the lists and get answered a node of another owner; kept"
                        )),
                        Err(e) => report.errors.push(format!(
                            "{name}: {provider_id} ({rid}) is missing from the lists and get failed ({e}); kept"
                        )),
                    }
                }
                IntentState::Terminating { provider_id } => {
                    match backend.terminate(&provider_id).await {
                        Ok(()) | Err(ProvisionerError::NotFound(_)) => {
                            if self.journal().remove_and_complete(
                                rid,
                                intent.generation,
                                intent.event_seq,
                            )? {
                                report.terminated.push((rid.to_string(), provider_id));
                            }
                        }
                        Err(e) => report.errors.push(format!(
                            "{name}: terminating {provider_id} ({rid}) failed: {e}"
                        )),
                    }
                }
            }
        }
        Ok(())
    }

    /// `intent` seen in a list: no longer missing.
    fn seen(&self, intent: Intent) -> Result<Intent> {
        if intent.missing_since_ms.is_none() {
            return Ok(intent);
        }
        let seen = Intent {
            missing_since_ms: None,
            ..intent.clone()
        };
        Ok(self
            .journal()
            .replace_if(intent.generation, &seen)?
            .unwrap_or(seen))
    }

    /// `intent`'s node missed by a list for the first time.
    fn mark_missing(&self, intent: &Intent, now: u64) -> Result<()> {
        let missing = Intent {
            missing_since_ms: Some(now),
            ..intent.clone()
        };
        self.journal().replace_if(intent.generation, &missing)?;
        Ok(())
    }

    /// Terminates the proven leaks seen by two lists the grace apart (per
    /// policy, unless held); the others are suspected.
    async fn leaks(
        &self,
        candidates: Vec<Candidate>,
        policy: &ReconcilePolicy,
        pass: u64,
        held: bool,
        report: &mut ReconcileReport,
    ) -> Result<()> {
        let now = now_ms();
        let grace = ms(policy.grace);
        for c in candidates {
            let mut leak = Leak {
                plugin: c.plugin.clone(),
                node: c.node.clone(),
                reason: c.reason.clone(),
                terminated: false,
            };
            let proven =
                c.sighting.first_pass < pass && now.saturating_sub(c.sighting.first_ms) >= grace;
            if !proven {
                report.suspected.push(leak);
                continue;
            }
            if policy.leaks == LeakPolicy::Terminate {
                if held {
                    report.held_back.push(format!(
                        "terminating leak {}/{}",
                        c.plugin, c.node.provider_id
                    ));
                } else {
                    leak.terminated = self.terminate_leak(&c, report).await?;
                }
            }
            report.leaks.push(leak);
        }
        Ok(())
    }

    /// Terminates a proven leak, unless it became wanted since it was
    /// weighed; whether it did.
    async fn terminate_leak(&self, c: &Candidate, report: &mut ReconcileReport) -> Result<bool> {
        let request = c.node.labels.get(REQUEST_LABEL);
        let _turn = match request {
            Some(r) => match self.requests.try_lock(r) {
                Some(turn) => Some(turn),
                None => return Ok(false),
            },
            None => None,
        };
        // Whatever happened since the lists: an intent that is pending for
        // its request, or that names it, means it may be acknowledged.
        let wanted = self.journal().all()?.iter().any(|i| {
            i.plugin == c.plugin
                && (i.provider_id() == Some(c.node.provider_id.as_str())
                    || (request == Some(&i.request_id) && i.state == IntentState::Pending))
        });
        if wanted {
            return Ok(false);
        }
        let Some(backend) = self.backends().backend(&c.plugin) else {
            return Ok(false);
        };
        let event = self.event(
            EventKind::LeakTerminated,
            &c.plugin,
            request.map(String::as_str),
            Some(&c.node.provider_id),
            c.reason.clone(),
        );
        let started = self.journal().record(&Event {
            status: EventStatus::Started,
            ..event
        })?;
        match backend.terminate(&c.node.provider_id).await {
            Ok(()) | Err(ProvisionerError::NotFound(_)) => {
                self.journal().complete(started.seq, None)?;
                Ok(true)
            }
            Err(e) => {
                self.journal().complete(started.seq, Some(e.to_string()))?;
                report.errors.push(format!(
                    "{}: terminating leaked {} failed: {e}",
                    c.plugin, c.node.provider_id
                ));
                Ok(false)
            }
        }
    }

    /// The lease step of reconcile alone: terminates every journaled node
    /// whose lease ran out, and keeps each expiry in the history. Needs no
    /// listing of the clouds, so a daemon runs it often. While a hold stands
    /// it terminates nothing (what it held back is in the report).
    ///
    /// # Errors
    /// When the journal cannot be read or written.
    pub async fn expire_leases(&self) -> Result<ReconcileReport> {
        self.usable()?;
        let mut report = ReconcileReport::default();
        let now = now_ms();
        let held = self.journal().doubt()?;
        for snap in self.journal().all()? {
            if !snap.expired(now) || !matches!(snap.state, IntentState::Active { .. }) {
                continue;
            }
            let Some(_turn) = self.requests.try_lock(&snap.request_id) else {
                continue;
            };
            let Some(intent) = self.journal().get(&snap.request_id)? else {
                continue;
            };
            let (IntentState::Active { provider_id }, true) = (&intent.state, intent.expired(now))
            else {
                continue;
            };
            let Some(backend) = self.backends().backend(&intent.plugin) else {
                continue;
            };
            let provider_id = provider_id.clone();
            let listed = self
                .listed
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .contains(&intent.plugin);
            if !listed {
                report.held_back.push(format!(
                    "ending the lease of {}/{provider_id} ({}): no reconcile has listed {} since the journal was opened",
                    intent.plugin, intent.request_id, intent.plugin
                ));
                continue;
            }
            self.expire_or_hold(
                &*backend,
                &intent,
                &provider_id,
                held.is_some(),
                &mut report,
            )
            .await?;
        }
        // Said when it kept the sweep from something (reconcile says it
        // every time).
        if !report.held_back.is_empty() {
            report.held = held;
        }
        Ok(report)
    }

    /// Forgets a pending provision, kept in the history.
    fn abandon(&self, intent: &Intent, reason: String, report: &mut ReconcileReport) -> Result<()> {
        let event = self.event(
            EventKind::Abandoned,
            &intent.plugin,
            Some(&intent.request_id),
            None,
            reason,
        );
        if self
            .journal()
            .remove_with_event(&intent.request_id, intent.generation, &event)?
        {
            report.abandoned.push(intent.request_id.clone());
        }
        Ok(())
    }

    async fn expire_or_hold(
        &self,
        backend: &dyn CloudProvisioner,
        intent: &Intent,
        provider_id: &str,
        held: bool,
        report: &mut ReconcileReport,
    ) -> Result<()> {
        if held {
            report.held_back.push(format!(
                "ending the lease of {}/{provider_id} ({})",
                intent.plugin, intent.request_id
            ));
            return Ok(());
        }
        self.expire(backend, intent, provider_id, report).await
    }

    /// Terminates a node whose lease ran out (the caller holds its request
    /// id's lock): the expiry is in the history before the cloud is asked,
    /// and completed when it answered.
    async fn expire(
        &self,
        backend: &dyn CloudProvisioner,
        intent: &Intent,
        provider_id: &str,
        report: &mut ReconcileReport,
    ) -> Result<()> {
        let terminating = Intent {
            state: IntentState::Terminating {
                provider_id: provider_id.to_string(),
            },
            ..intent.clone()
        };
        let lease_s = intent.lease().unwrap_or(0) / 1000;
        let event = self.event(
            EventKind::LeaseExpired,
            &intent.plugin,
            Some(&intent.request_id),
            Some(provider_id),
            format!("its lease of {lease_s} s ran out"),
        );
        let started = Event {
            status: EventStatus::Started,
            ..event
        };
        let Some((terminating, event)) =
            self.journal()
                .replace_with_event(intent.generation, &terminating, &started)?
        else {
            return Ok(());
        };
        match backend.terminate(&provider_id.to_string()).await {
            Ok(()) | Err(ProvisionerError::NotFound(_)) => {
                if self.journal().remove_and_complete(
                    &terminating.request_id,
                    terminating.generation,
                    Some(event.seq),
                )? {
                    report
                        .expired
                        .push((terminating.request_id.clone(), provider_id.to_string()));
                }
            }
            Err(e) => {
                self.journal().complete(event.seq, Some(e.to_string()))?;
                report.errors.push(format!(
                    "{}: terminating expired {provider_id} failed: {e}",
                    terminating.plugin
                ));
            }
        }
        Ok(())
    }
}
