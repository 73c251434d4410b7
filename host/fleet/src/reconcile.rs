//! Reconcile: the journal against what each backend lists, and the lease
//! sweep. Where a node is terminated, an intent forgotten or a leak found,
//! and what is kept in the journal's history about it.
//!
//! Never destroy what may be acknowledged: a node is terminated as a leak
//! only when its request id is neither journaled (for this node, or still
//! pending) nor in flight in this process, and a journaled node that a
//! cloud stops listing is forgotten only after the policy's grace.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::Result;
use wasmprov_api::{CloudProvisioner, NodeHandle, ProvisionRequest, ProvisionerError};

use crate::fleet::{
    Fleet, Leak, LeakPolicy, REQUEST_LABEL, ReconcilePolicy, ReconcileReport, made_nothing,
};
use crate::journal::{Event, EventKind, Intent, IntentState, now_ms};

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Fleet {
    /// Compares the journal with what each plugin describes, and settles the
    /// difference:
    /// - a pending provision whose node is listed (by its request-id label)
    ///   is confirmed; one whose node is not is asked again under the same
    ///   request id when a crash interrupted it (the plugin looks the node
    ///   up before creating one), or forgotten when its caller was told it
    ///   failed (or resume is off), once it is older than the grace;
    /// - an interrupted termination is finished;
    /// - a node whose lease ran out is terminated;
    /// - a node the journal has but the cloud has not listed for longer than
    ///   the grace is forgotten (reported as vanished);
    /// - an owned node that no intent wants (unknown request id, a second
    ///   node for one request, no request label) is a leak: reported, or
    ///   terminated per policy.
    ///
    /// Lease expiries, leak terminations, vanished nodes and abandoned
    /// provisions are kept in the journal's [history](Fleet::history).
    /// A plugin whose describe fails is skipped (its intents stay as they
    /// are); so is an intent whose plugin is not loaded, and a request id a
    /// call of this fleet is working on right now. One reconcile runs at a
    /// time; provisions and terminations of other request ids go on beside it.
    ///
    /// # Errors
    /// When the journal cannot be read or written.
    pub async fn reconcile(&self, policy: &ReconcilePolicy) -> Result<ReconcileReport> {
        let _one = self.reconciling.lock().await;
        let mut report = ReconcileReport::default();
        let plugins: BTreeSet<String> = self
            .backends()
            .backend_names()
            .into_iter()
            .chain(self.journal().all()?.into_iter().map(|i| i.plugin))
            .collect();
        for name in plugins {
            self.reconcile_plugin(&name, policy, &mut report).await?;
        }
        Ok(report)
    }

    /// The lease step of reconcile alone: terminates every journaled node
    /// whose lease ran out, and keeps each expiry in the history. Needs no
    /// listing of the clouds, so a daemon runs it often.
    ///
    /// # Errors
    /// When the journal cannot be read or written.
    pub async fn expire_leases(&self) -> Result<ReconcileReport> {
        let mut report = ReconcileReport::default();
        let now = now_ms();
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
            self.expire(&*backend, &intent, &provider_id, &mut report)
                .await?;
        }
        Ok(report)
    }

    fn event(
        &self,
        kind: EventKind,
        plugin: &str,
        request_id: Option<&str>,
        provider_id: Option<&str>,
        reason: String,
    ) -> Event {
        self.backends().fleet_event(plugin, kind.as_str());
        Event {
            seq: 0,
            at_ms: now_ms(),
            kind,
            plugin: plugin.to_string(),
            request_id: request_id.map(str::to_string),
            provider_id: provider_id.map(str::to_string),
            reason,
        }
    }

    #[allow(
        clippy::too_many_lines,
        reason = "one pass over one plugin's intents, case by case"
    )]
    async fn reconcile_plugin(
        &self,
        name: &str,
        policy: &ReconcilePolicy,
        report: &mut ReconcileReport,
    ) -> Result<()> {
        let Some(backend) = self.backends().backend(name) else {
            let n = self
                .journal()
                .all()?
                .iter()
                .filter(|i| i.plugin == name)
                .count();
            report.errors.push(format!(
                "plugin {name:?} is not loaded; its {n} intent(s) are left as they are"
            ));
            return Ok(());
        };
        // Describe first, then read the journal: a node visible here had its
        // intent written before it was created, so it is in the snapshot.
        let nodes = match backend.describe().await {
            Ok(n) => n,
            Err(e) => {
                report.errors.push(format!("{name}: describe failed: {e}"));
                return Ok(());
            }
        };
        self.backends().nodes_listed(name, nodes.len());
        let snapshot: Vec<Intent> = self
            .journal()
            .all()?
            .into_iter()
            .filter(|i| i.plugin == name)
            .collect();
        let mut by_id: BTreeMap<&str, &NodeHandle> = BTreeMap::new();
        let mut by_request: BTreeMap<&str, Vec<&NodeHandle>> = BTreeMap::new();
        for n in &nodes {
            by_id.insert(&n.provider_id, n);
            if let Some(r) = n.labels.get(REQUEST_LABEL) {
                by_request.entry(r).or_default().push(n);
            }
        }
        let now = now_ms();
        let grace = ms(policy.grace);
        let mut wanted: BTreeSet<String> = BTreeSet::new();
        let want_request = |wanted: &mut BTreeSet<String>, rid: &str| {
            for node in by_request.get(rid).into_iter().flatten() {
                wanted.insert(node.provider_id.clone());
            }
        };
        for snap in &snapshot {
            let rid = snap.request_id.as_str();
            if let Some(p) = snap.provider_id() {
                wanted.insert(p.to_string());
            }
            // A call on this id is running: its nodes are its business.
            let Some(_turn) = self.requests.try_lock(rid) else {
                want_request(&mut wanted, rid);
                continue;
            };
            // Read again under the lock: a call may have ended meanwhile.
            let Some(intent) = self.journal().get(rid)? else {
                want_request(&mut wanted, rid);
                continue;
            };
            if intent.plugin != name {
                want_request(&mut wanted, rid);
                continue;
            }
            match intent.state.clone() {
                IntentState::Pending => {
                    want_request(&mut wanted, rid);
                    let found = by_request
                        .get(rid)
                        .and_then(|v| v.iter().min_by_key(|n| n.provider_id.clone()).copied());
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
                            self.expire(&*backend, &active, &node.provider_id, report)
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
                        // is a leak): believe the cloud only after the grace.
                        if now.saturating_sub(intent.created_ms) >= grace {
                            self.abandon(&intent, reason, report)?;
                        }
                        continue;
                    }
                    // Interrupted by a crash: ask again under the same id;
                    // the plugin looks the node up before it creates one.
                    let request = ProvisionRequest {
                        request_id: rid.to_string(),
                        shape: intent.shape.clone(),
                        boot: intent.boot.clone(),
                    };
                    match backend.provision_request(&request).await {
                        Ok(node) => {
                            wanted.insert(node.provider_id.clone());
                            let active = Intent {
                                state: IntentState::Active {
                                    provider_id: node.provider_id.clone(),
                                },
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
                        Err(e) if made_nothing(&e) => {
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
                    if by_id.contains_key(provider_id.as_str()) {
                        let intent = if intent.missing_since_ms.is_some() {
                            let seen = Intent {
                                missing_since_ms: None,
                                ..intent.clone()
                            };
                            self.journal()
                                .replace_if(intent.generation, &seen)?
                                .unwrap_or(seen)
                        } else {
                            intent
                        };
                        if intent.expired(now) {
                            self.expire(&*backend, &intent, &provider_id, report)
                                .await?;
                        }
                        continue;
                    }
                    let since = intent.missing_since_ms.unwrap_or(now);
                    if now.saturating_sub(since) >= grace {
                        let event = self.event(
                            EventKind::Vanished,
                            name,
                            Some(rid),
                            Some(&provider_id),
                            format!(
                                "not listed by the cloud for {} ms",
                                now.saturating_sub(since)
                            ),
                        );
                        if self
                            .journal()
                            .remove_with_event(rid, intent.generation, &event)?
                        {
                            report.vanished.push((rid.to_string(), provider_id));
                        }
                    } else if intent.missing_since_ms.is_none() {
                        let missing = Intent {
                            missing_since_ms: Some(now),
                            ..intent.clone()
                        };
                        self.journal().replace_if(intent.generation, &missing)?;
                    }
                }
                IntentState::Terminating { provider_id } => {
                    match backend.terminate(&provider_id).await {
                        Ok(()) | Err(ProvisionerError::NotFound(_)) => {
                            if self.journal().remove_if(rid, intent.generation)? {
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
        for node in &nodes {
            if wanted.contains(&node.provider_id) {
                continue;
            }
            let reason = match node.labels.get(REQUEST_LABEL) {
                None => "no request id label".to_string(),
                Some(r) => {
                    // Whatever happened since the snapshot: a call on this id
                    // in flight, or an intent that is pending or names this
                    // node, means it may be acknowledged. Not a leak.
                    if self.requests.is_busy(r) {
                        continue;
                    }
                    match self.journal().get(r)? {
                        Some(i)
                            if i.plugin == name
                                && (i.state == IntentState::Pending
                                    || i.provider_id() == Some(node.provider_id.as_str())) =>
                        {
                            continue;
                        }
                        Some(i) if i.plugin == name => format!("a second node for request {r}"),
                        _ => format!("request {r} is not in the journal"),
                    }
                }
            };
            let terminated = match policy.leaks {
                LeakPolicy::Report => false,
                LeakPolicy::Terminate => match backend.terminate(&node.provider_id).await {
                    Ok(()) | Err(ProvisionerError::NotFound(_)) => {
                        let event = self.event(
                            EventKind::LeakTerminated,
                            name,
                            node.labels.get(REQUEST_LABEL).map(String::as_str),
                            Some(&node.provider_id),
                            reason.clone(),
                        );
                        self.journal().record(&event)?;
                        true
                    }
                    Err(e) => {
                        report.errors.push(format!(
                            "{name}: terminating leaked {} failed: {e}",
                            node.provider_id
                        ));
                        false
                    }
                },
            };
            report.leaks.push(Leak {
                plugin: name.to_string(),
                node: node.clone(),
                reason,
                terminated,
            });
        }
        Ok(())
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

    /// Terminates a node whose lease ran out (the caller holds its request
    /// id's lock), kept in the history.
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
        let Some(terminating) = self.journal().replace_if(intent.generation, &terminating)? else {
            return Ok(());
        };
        match backend.terminate(&provider_id.to_string()).await {
            Ok(()) | Err(ProvisionerError::NotFound(_)) => {
                let lease_ms = terminating
                    .expires_ms
                    .map_or(0, |e| e.saturating_sub(terminating.created_ms));
                let event = self.event(
                    EventKind::LeaseExpired,
                    &terminating.plugin,
                    Some(&terminating.request_id),
                    Some(provider_id),
                    format!("its lease of {} s ran out", lease_ms / 1000),
                );
                if self.journal().remove_with_event(
                    &terminating.request_id,
                    terminating.generation,
                    &event,
                )? {
                    report
                        .expired
                        .push((terminating.request_id.clone(), provider_id.to_string()));
                }
            }
            Err(e) => report.errors.push(format!(
                "{}: terminating expired {provider_id} failed: {e}",
                terminating.plugin
            )),
        }
        Ok(())
    }
}
