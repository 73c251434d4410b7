//! What reconcile is asked to do ([`ReconcilePolicy`]) and what it found
//! and did ([`ReconcileReport`]): leaks, orphans, the hold.

use std::time::Duration;

use serde::Serialize;
use wasmprov_api::NodeHandle;

use crate::journal::Doubt;

/// What reconcile does with a node this host owns that no intent wants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LeakPolicy {
    /// List it in the report and leave it.
    #[default]
    Report,
    /// Terminate it, once proven (see [`Leak`]).
    Terminate,
}

/// How [`Fleet::reconcile`](crate::Fleet::reconcile) acts.
///
/// Fields are added over time; build one with `..ReconcilePolicy::default()`.
#[derive(Clone, Debug, Serialize)]
pub struct ReconcilePolicy {
    /// Leaked nodes: report or terminate.
    pub leaks: LeakPolicy,
    /// Provisions interrupted by a crash whose node is not found: ask again
    /// under the same request id (`true`, the default) or forget them. A
    /// provision whose caller was told it failed is never asked again.
    pub resume_pending: bool,
    /// How far apart the two lists must be that both show a leak, or both
    /// miss a journaled node, before reconcile believes them (clouds list
    /// new nodes late, and a list read while nodes change misses some).
    /// Default 60 s; 0 still needs two lists (two reconciles).
    #[serde(serialize_with = "crate::secs::serialize")]
    pub grace: Duration,
    /// Record every orphan found as an intent of this journal (its node is
    /// then wanted, leased or scaled down like any other), lifting a hold
    /// the orphans caused.
    pub adopt: bool,
    /// Confirm every orphan found as not this journal's: it stays where it
    /// is, is no longer reported, and the hold is lifted.
    pub confirm_orphans: bool,
}

impl Default for ReconcilePolicy {
    fn default() -> Self {
        Self {
            leaks: LeakPolicy::Report,
            resume_pending: true,
            grace: DEFAULT_GRACE,
            adopt: false,
            confirm_orphans: false,
        }
    }
}

/// The default [`ReconcilePolicy::grace`].
pub const DEFAULT_GRACE: Duration = Duration::from_secs(60);

/// A node reconcile found that no intent wants, and that this journal can
/// prove it made: it carries this host's owner id, this journal's identity
/// and a generation this journal issued, no intent names it, and no call
/// for its request id is running. It is a *leak* (terminated per policy)
/// only once two lists at least the grace apart both showed it; before
/// that it is *suspected*.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Leak {
    /// The plugin that lists it.
    pub plugin: String,
    /// The node.
    pub node: NodeHandle,
    /// Why it is a leak.
    pub reason: String,
    /// Whether reconcile terminated it.
    pub terminated: bool,
}

/// Why a node of this owner is an orphan rather than a leak.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OrphanKind {
    /// It carries no provenance (made outside a fleet, by a version before
    /// provenance, or by a backend that does not keep a shape's labels).
    Unproven,
    /// It carries another journal's identity: that journal was lost or
    /// replaced, or another host uses the same owner id.
    Foreign,
    /// It carries this journal's identity under a generation this copy of
    /// the journal never issued: the journal is older than the one that
    /// made it.
    Stale,
    /// This journal forgot it as vanished (lists missed it and `get` said it
    /// did not exist), and it is listed again: the cloud's answers were
    /// wrong, so it may be a node a caller was told exists.
    Returned,
}

impl OrphanKind {
    /// The name used in JSON, metrics and tables.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unproven => "unproven",
            Self::Foreign => "foreign",
            Self::Stale => "stale",
            Self::Returned => "returned",
        }
    }
}

/// A node of this owner that no intent wants and that this journal cannot
/// prove it made: never terminated by reconcile, only reported, until the
/// operator adopts it (`adopt`) or confirms it (`confirm_orphans`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Orphan {
    /// The plugin that lists it.
    pub plugin: String,
    /// The node.
    pub node: NodeHandle,
    /// Why it is not provably this journal's.
    pub kind: OrphanKind,
    /// What it carries, in words.
    pub reason: String,
}

/// What one reconcile found and did.
///
/// Fields are added over time; build one with `..ReconcileReport::default()`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReconcileReport {
    /// Interrupted provisions whose node was found: `(request id, provider id)`.
    pub confirmed: Vec<(String, String)>,
    /// Interrupted provisions asked again and now done: `(request id, provider id)`.
    pub resumed: Vec<(String, String)>,
    /// Provisions forgotten (not found in two lists the grace apart after a
    /// failed call or with resume off, lease run out, or the plugin refused
    /// for good): request ids.
    pub abandoned: Vec<String>,
    /// Interrupted terminations finished: `(request id, provider id)`.
    pub terminated: Vec<(String, String)>,
    /// Nodes terminated because their lease ran out: `(request id, provider id)`.
    pub expired: Vec<(String, String)>,
    /// Nodes the journal had that are confirmed gone (missed by two lists
    /// the grace apart, and `get` says they do not exist):
    /// `(request id, provider id)`.
    pub vanished: Vec<(String, String)>,
    /// Proven leaks (seen by two lists the grace apart).
    pub leaks: Vec<Leak>,
    /// Leaks seen once so far; proven (and terminated, per policy) when a
    /// list at least the grace later still shows them.
    pub suspected: Vec<Leak>,
    /// Nodes of this owner the journal cannot prove it made: left alone.
    pub orphans: Vec<Orphan>,
    /// Orphans recorded as intents by this reconcile (`adopt`):
    /// `(request id, provider id)`.
    pub adopted: Vec<(String, String)>,
    /// Nodes dropped from the backends' answers because they do not carry
    /// this host's owner id: `(plugin, count)`.
    pub foreign_answers: Vec<(String, usize)>,
    /// The doubt that holds every destructive action, when one stands
    /// after this reconcile.
    pub held: Option<Doubt>,
    /// What the hold kept this reconcile from doing.
    pub held_back: Vec<String>,
    /// What could not be done this time (the intent stays for the next reconcile).
    pub errors: Vec<String>,
}

impl ReconcileReport {
    /// Whether reconcile found everything as the journal says.
    #[must_use]
    pub fn is_clean(&self) -> bool {
        *self == Self::default()
    }
}

impl std::fmt::Display for ReconcileReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_clean() {
            return f.write_str("in step: every node wanted, every wanted node present");
        }
        let pairs = |v: &[(String, String)]| {
            v.iter()
                .map(|(r, p)| format!("{r}→{p}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut parts = Vec::new();
        if let Some(d) = &self.held {
            parts.push(format!("HELD: {d}"));
        }
        for (what, v) in [
            ("confirmed", &self.confirmed),
            ("resumed", &self.resumed),
            ("terminated", &self.terminated),
            ("expired", &self.expired),
            ("vanished", &self.vanished),
            ("adopted", &self.adopted),
        ] {
            if !v.is_empty() {
                parts.push(format!("{what} {}", pairs(v)));
            }
        }
        if !self.abandoned.is_empty() {
            parts.push(format!("abandoned {}", self.abandoned.join(", ")));
        }
        for l in &self.leaks {
            parts.push(format!(
                "leak {}/{} ({}){}",
                l.plugin,
                l.node.provider_id,
                l.reason,
                if l.terminated { ", terminated" } else { "" }
            ));
        }
        for l in &self.suspected {
            parts.push(format!(
                "suspected leak {}/{} ({}; proven when a list at least the grace later shows it again)",
                l.plugin, l.node.provider_id, l.reason
            ));
        }
        for o in &self.orphans {
            parts.push(format!(
                "orphan {}/{} ({}: {}; left alone)",
                o.plugin,
                o.node.provider_id,
                o.kind.as_str(),
                o.reason
            ));
        }
        for (plugin, n) in &self.foreign_answers {
            parts.push(format!(
                "{plugin} answered {n} node(s) of another owner (dropped)"
            ));
        }
        for h in &self.held_back {
            parts.push(format!("held back: {h}"));
        }
        for e in &self.errors {
            parts.push(format!("error: {e}"));
        }
        f.write_str(&parts.join("; "))
    }
}
