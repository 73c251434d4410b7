//! What a fleet believes of a backend's answers: where a node's ownership
//! and provenance are checked before anything is terminated or forgotten.
//!
//! - Every node a backend returns from `describe` or `get`, wasm plugin or
//!   native backend alike, must carry this host's owner id
//!   ([`wasmprov_api::provenance::owned_by`]); others are dropped from the
//!   answer and counted, never returned or reconciled. A `get` that answers
//!   a node of another owner is no answer ([`Lookup::Foreign`]), never "not
//!   found".
//! - A node no intent wants is this journal's to terminate only if its
//!   provenance proves it: this journal's identity and a generation this
//!   journal issued ([`Standing::Proven`]). Anything else is an orphan
//!   ([`OrphanKind`]).

use std::collections::BTreeSet;

use anyhow::Result;
use wasmprov_api::provenance::{OWNER_LABEL, Provenance, owned_by};
use wasmprov_api::{CloudProvisioner, NodeHandle, ProvisionerError};

use wasmprov_api::Backends;
use wasmprov_api::provenance::REQUEST_LABEL;

use crate::journal::{Intent, Journal};
use crate::report::OrphanKind;

/// A backend's list of nodes, as the fleet believes it.
#[derive(Debug)]
pub(crate) struct Listing {
    /// The nodes of this owner, each provider id once.
    pub(crate) nodes: Vec<NodeHandle>,
    /// Nodes dropped because they do not carry this owner id.
    pub(crate) foreign: usize,
}

/// A backend's answer to `get`, as the fleet believes it.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// The node exists and is this owner's.
    Present(Box<NodeHandle>),
    /// The backend says it does not exist.
    Absent,
    /// The backend answered a node of another owner: no answer.
    Foreign,
}

/// Whether this journal can prove it made a node.
#[derive(Debug)]
pub(crate) enum Standing {
    /// This journal's identity, a generation it issued.
    Proven,
    /// Not provably this journal's.
    Orphan(OrphanKind, String),
}

/// What a fleet's judgement of an answer rests on: its owner id, its
/// journal's identity and issued generations, and where foreign answers
/// are counted ([`Fleet::evidence`](crate::Fleet::evidence)).
pub(crate) struct Evidence<'a> {
    pub(crate) owner: Option<&'a str>,
    pub(crate) journal: &'a Journal,
    pub(crate) backends: &'a dyn Backends,
}

impl Evidence<'_> {
    fn owns(&self, node: &NodeHandle) -> bool {
        self.owner.is_none_or(|owner| owned_by(node, owner))
    }

    /// `backend`'s nodes of this owner (the fleet's one `describe`).
    pub(crate) async fn list(
        &self,
        name: &str,
        backend: &dyn CloudProvisioner,
    ) -> Result<Listing, ProvisionerError> {
        let all = backend.describe().await?;
        let listed = all.len();
        let mut seen = BTreeSet::new();
        let mut nodes = Vec::with_capacity(listed);
        let mut foreign = 0;
        for n in all {
            if !self.owns(&n) {
                foreign += 1;
                continue;
            }
            // A list read while nodes move between pages may name one twice.
            if seen.insert(n.provider_id.clone()) {
                nodes.push(n);
            }
        }
        if foreign > 0 {
            tracing::warn!(
                plugin = name,
                foreign,
                listed,
                "describe answered nodes that do not carry this host's owner id; they were dropped"
            );
            self.backends.fleet_event(name, "foreign_answer");
        }
        Ok(Listing { nodes, foreign })
    }

    /// `backend`'s node `id` (the fleet's one `get`).
    pub(crate) async fn look_up(
        &self,
        name: &str,
        backend: &dyn CloudProvisioner,
        id: &str,
    ) -> Result<Lookup, ProvisionerError> {
        match backend.get(&id.to_string()).await? {
            None => Ok(Lookup::Absent),
            Some(n) if n.provider_id != id => {
                tracing::warn!(plugin = name, asked = id, got = %n.provider_id, "get answered another node");
                Ok(Lookup::Foreign)
            }
            Some(n) if !self.owns(&n) => {
                tracing::warn!(
                    plugin = name,
                    id,
                    owner = ?n.labels.get(OWNER_LABEL),
                    "get answered a node that does not carry this host's owner id"
                );
                self.backends.fleet_event(name, "foreign_answer");
                Ok(Lookup::Foreign)
            }
            Some(n) => Ok(Lookup::Present(Box::new(n))),
        }
    }

    /// Whether `node` may be this journal's: it carries no provenance (a
    /// backend that keeps no labels, a version before provenance) or this
    /// journal's identity. A node of another journal is never taken as the
    /// answer to one of this journal's requests, even under the same
    /// request id (two hosts with one owner id, a lost journal).
    pub(crate) fn made_here(&self, node: &NodeHandle) -> bool {
        Provenance::of(node).is_none_or(|p| p.journal == self.journal.identity())
    }

    /// Why `node`, answered by a backend for `intent`'s provision, is not
    /// that intent's node, if it is not: another journal made it, or this
    /// journal made it for another intent (its provenance names another
    /// generation, its request label another request).
    pub(crate) fn not_the_answer(&self, intent: &Intent, node: &NodeHandle) -> Option<String> {
        let rid = &intent.request_id;
        if let Some(r) = node.labels.get(REQUEST_LABEL)
            && r != rid
        {
            return Some(format!(
                "the backend answered the provision of request {rid:?} with node {}, which was made for request {r:?}",
                node.provider_id
            ));
        }
        let p = Provenance::of(node)?;
        if p.journal != self.journal.identity() {
            return Some(format!(
                "the node {} answered for request {rid:?} was made by another journal ({}; this one is {}): another host uses this owner id, this journal was lost or replaced, or the backend answered wrong; adopt it (reconcile --adopt) or use another request id",
                node.provider_id,
                p.journal,
                self.journal.identity()
            ));
        }
        if intent.born > 0 && p.generation != intent.born {
            return Some(format!(
                "the backend answered the provision of request {rid:?} with node {}, which this journal made for another intent (generation {}, not {})",
                node.provider_id, p.generation, intent.born
            ));
        }
        None
    }

    /// Whether this journal can prove it made `node` (which no intent
    /// wants): only its identity under a generation it issued does. A
    /// generation of its own that it did not issue is also noted, so that
    /// the generations it issues from now on are above it.
    pub(crate) fn standing(&self, node: &NodeHandle) -> Result<Standing> {
        let Some(p) = Provenance::of(node) else {
            return Ok(Standing::Orphan(
                OrphanKind::Unproven,
                "it carries no provenance label".into(),
            ));
        };
        let journal = self.journal;
        if p.journal != journal.identity() {
            return Ok(Standing::Orphan(
                OrphanKind::Foreign,
                format!(
                    "made by journal {} (generation {})",
                    p.journal, p.generation
                ),
            ));
        }
        if !journal.issued(p.generation)? {
            journal.saw_generation(p.generation)?;
            let hw = journal.high_water()?;
            return Ok(Standing::Orphan(
                OrphanKind::Stale,
                if p.generation > hw {
                    format!(
                        "made by this journal under generation {}, above its high-water mark {hw}",
                        p.generation
                    )
                } else {
                    format!(
                        "made by this journal under generation {}, which this copy of it never issued",
                        p.generation
                    )
                },
            ));
        }
        Ok(Standing::Proven)
    }
}
