//! What the operator does with orphans: adopt them (each becomes an intent
//! of this journal, wanted, leased and scaled like any other node) or
//! confirm them as not this journal's (left where they are, no longer
//! reported). Either lifts the hold a foreign or stale orphan raised.

use anyhow::Result;
use wasmprov_api::{NodeHandle, NodeShape, provenance};

use crate::fleet::{Fleet, GROUP_LABEL, REQUEST_LABEL};
use crate::journal::{DoubtKind, EventKind, Intent, IntentState, now_ms, sighting_key};
use crate::report::{Orphan, ReconcileReport};

impl Fleet {
    /// Records each orphan as an active intent, under its own request id
    /// when it carries one the journal does not use, else under
    /// `adopted-<provider id>`; returns the orphans that could not be
    /// adopted. The hold is lifted when none is left.
    pub(crate) fn adopt(
        &self,
        orphans: Vec<Orphan>,
        report: &mut ReconcileReport,
    ) -> Result<Vec<Orphan>> {
        let mut left = Vec::new();
        for o in orphans {
            let Some(request_id) = self.adoption_id(&o.node)? else {
                report.errors.push(format!(
                    "{}: no free request id to adopt {} under",
                    o.plugin, o.node.provider_id
                ));
                left.push(o);
                continue;
            };
            let intent = Intent {
                request_id: request_id.clone(),
                plugin: o.plugin.clone(),
                shape: adopted_shape(&o.node),
                created_ms: o.node.created_at_ms.unwrap_or_else(now_ms),
                group: o.node.labels.get(GROUP_LABEL).cloned(),
                state: IntentState::Active {
                    provider_id: o.node.provider_id.clone(),
                },
                adopted: true,
                ..Intent::default()
            };
            match self.journal().insert_new(&intent)? {
                Ok(_) => {
                    self.journal().unforget(&o.plugin, &o.node.provider_id)?;
                    let event = self.event(
                        EventKind::Adopted,
                        &o.plugin,
                        Some(&request_id),
                        Some(&o.node.provider_id),
                        format!("{}: {}", o.kind.as_str(), o.reason),
                    );
                    self.journal().record(&event)?;
                    report
                        .adopted
                        .push((request_id, o.node.provider_id.clone()));
                }
                Err(_) => left.push(o),
            }
        }
        // Adopting answers a hold that orphans raised; one raised when the
        // journal was opened (rewound, repaired) is about writes no node
        // shows, and is lifted by confirming only.
        if left.is_empty()
            && let Some(doubt) = self.journal().doubt()?
            && matches!(
                doubt.kind,
                DoubtKind::Foreign | DoubtKind::Stale | DoubtKind::Returned
            )
        {
            self.journal().clear_doubt()?;
        }
        Ok(left)
    }

    /// Confirms `orphans` as not this journal's and lifts the hold.
    pub(crate) fn confirm(&self, orphans: &[Orphan]) -> Result<()> {
        let keys: Vec<String> = orphans
            .iter()
            .map(|o| sighting_key(&o.plugin, &o.node.provider_id))
            .collect();
        let event = self.event(
            EventKind::OrphansConfirmed,
            orphans.first().map_or("", |o| o.plugin.as_str()),
            None,
            None,
            format!(
                "the operator confirmed {} orphan(s) as not this journal's: {}",
                orphans.len(),
                orphans
                    .iter()
                    .map(|o| format!("{}/{}", o.plugin, o.node.provider_id))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
        self.journal().confirm_orphans(&keys, &event)
    }

    /// The request id an orphan is adopted under.
    fn adoption_id(&self, node: &NodeHandle) -> Result<Option<String>> {
        if let Some(r) = node.labels.get(REQUEST_LABEL)
            && wasmprov_api::ids::is_valid_id(r)
            && self.journal().get(r)?.is_none()
        {
            return Ok(Some(r.clone()));
        }
        let base =
            wasmprov_api::ids::id_from_text(&format!("adopted-{}", node.provider_id), "adopted");
        for n in 0..1000 {
            let id = if n == 0 {
                base.clone()
            } else {
                let suffix = format!("-{n}");
                let mut stem = base.clone();
                stem.truncate(wasmprov_api::ids::MAX_ID_LEN - suffix.len());
                let stem = stem.trim_end_matches(['-', '_']);
                format!("{stem}{suffix}")
            };
            if wasmprov_api::ids::is_valid_id(&id) && self.journal().get(&id)?.is_none() {
                return Ok(Some(id));
            }
        }
        Ok(None)
    }
}

/// The shape an adopted node is recorded with: what it is (instance type,
/// zone, billing, architecture, GPU model) and its own labels (the host's
/// and the plugins' left out).
fn adopted_shape(node: &NodeHandle) -> NodeShape {
    let labels = node
        .labels
        .iter()
        .filter(|(k, _)| !provenance::is_reserved_label(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    NodeShape {
        cpu: if node.instance_type.is_some() {
            0.0
        } else {
            1.0
        },
        memory_bytes: if node.instance_type.is_some() {
            0
        } else {
            1 << 30
        },
        arch: node.arch,
        gpu: u32::from(node.gpu_model.is_some()),
        gpu_model: node.gpu_model.clone(),
        labels,
        zone: node.zone.clone(),
        capacity_type: node.capacity_type,
        instance_type: node.instance_type.clone(),
        ..NodeShape::default()
    }
}
