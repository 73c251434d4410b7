//! Where a plugin's answers are checked: once, at the host boundary, as
//! they are converted from the WIT types, so that the trait, the CLI, gRPC
//! and ranking all see only answers that keep the contract. A violation is
//! a `contract` fault naming the field; nothing of the bad answer is used.
//!
//! | answer | rule |
//! | --- | --- |
//! | price | `hourly_usd` finite and ≥ 0 (−0.0 becomes 0.0); instance type 1–[`MAX_NAME`] bytes |
//! | node handle | provider id 1–[`MAX_PROVIDER_ID`] bytes; address, zone, instance type at most [`MAX_NAME`]; at most [`MAX_LABELS`] labels, keys 1–[`MAX_LABEL_KEY`] and values at most [`MAX_LABEL_VALUE`] bytes |
//! | describe | at most [`MAX_NODES`] handles, provider ids distinct |
//! | backend name | 1–[`MAX_BACKEND_NAME`] bytes |
//! | capacity types | duplicates dropped |

use wasmprov_api::{CapacityType, NodeHandle, PluginFault, PriceHint, ProvisionerError};

use crate::bindings::types as w;

/// Longest provider id.
pub const MAX_PROVIDER_ID: usize = 1024;
/// Longest address, zone or instance type.
pub const MAX_NAME: usize = 256;
/// Most labels on one node.
pub const MAX_LABELS: usize = 256;
/// Longest label key.
pub const MAX_LABEL_KEY: usize = 256;
/// Longest label value.
pub const MAX_LABEL_VALUE: usize = 1024;
/// Most nodes one `describe` may return.
pub const MAX_NODES: usize = 1_000_000;
/// Longest backend name.
pub const MAX_BACKEND_NAME: usize = 64;

/// The fault for an answer that breaks the contract.
pub(crate) fn broken(plugin: &str, field: &str, why: String) -> ProvisionerError {
    tracing::warn!(plugin, field, why = %wasmprov_policy::text::line(&why), "plugin answer refused");
    ProvisionerError::Plugin {
        plugin: plugin.to_string(),
        fault: PluginFault::Contract,
        message: format!("its answer's {field} {why}"),
    }
}

fn sized(
    plugin: &str,
    field: &str,
    v: &str,
    min: usize,
    max: usize,
) -> Result<(), ProvisionerError> {
    if v.len() < min || v.len() > max {
        return Err(broken(
            plugin,
            field,
            format!("is {} bytes; {min} to {max} are allowed", v.len()),
        ));
    }
    Ok(())
}

pub(crate) fn capacity(c: w::CapacityType) -> CapacityType {
    match c {
        w::CapacityType::OnDemand => CapacityType::OnDemand,
        w::CapacityType::Spot => CapacityType::Spot,
    }
}

/// A price estimate.
pub(crate) fn price(plugin: &str, h: w::PriceEstimate) -> Result<PriceHint, ProvisionerError> {
    if !h.hourly_usd.is_finite() || h.hourly_usd < 0.0 {
        return Err(broken(
            plugin,
            "hourly_usd",
            format!("is {}, not a price (finite and at least 0)", h.hourly_usd),
        ));
    }
    sized(plugin, "instance_type", &h.instance_type, 1, MAX_NAME)?;
    Ok(PriceHint {
        // -0.0 is 0.0: it must not sort before a real 0.0.
        hourly_usd: h.hourly_usd + 0.0,
        capacity_type: capacity(h.capacity_type),
        instance_type: h.instance_type,
    })
}

/// A node handle.
pub(crate) fn handle(plugin: &str, h: w::NodeHandle) -> Result<NodeHandle, ProvisionerError> {
    sized(plugin, "provider_id", &h.provider_id, 1, MAX_PROVIDER_ID)?;
    for (field, v) in [
        ("address", &h.address),
        ("zone", &h.zone),
        ("instance_type", &h.instance_type),
    ] {
        if let Some(v) = v {
            sized(plugin, field, v, 0, MAX_NAME)?;
        }
    }
    if h.labels.len() > MAX_LABELS {
        return Err(broken(
            plugin,
            "labels",
            format!(
                "has {} entries; at most {MAX_LABELS} are allowed",
                h.labels.len()
            ),
        ));
    }
    for (k, v) in &h.labels {
        sized(plugin, "label key", k, 1, MAX_LABEL_KEY)?;
        sized(plugin, "label value", v, 0, MAX_LABEL_VALUE)?;
    }
    Ok(NodeHandle {
        provider_id: h.provider_id,
        address: h.address,
        zone: h.zone,
        capacity_type: capacity(h.capacity_type),
        join_state: match h.join_state {
            w::JoinState::Provisioning => wasmprov_api::JoinState::Provisioning,
            w::JoinState::Booting => wasmprov_api::JoinState::Booting,
            w::JoinState::Joining => wasmprov_api::JoinState::Joining,
            w::JoinState::Joined => wasmprov_api::JoinState::Joined,
            w::JoinState::Failed => wasmprov_api::JoinState::Failed,
        },
        instance_type: h.instance_type,
        labels: h.labels.into_iter().collect(),
    })
}

/// The answer of `describe`.
pub(crate) fn handles(
    plugin: &str,
    nodes: Vec<w::NodeHandle>,
) -> Result<Vec<NodeHandle>, ProvisionerError> {
    if nodes.len() > MAX_NODES {
        return Err(broken(
            plugin,
            "node list",
            format!("has {} nodes; at most {MAX_NODES} are allowed", nodes.len()),
        ));
    }
    let mut seen = std::collections::HashSet::with_capacity(nodes.len());
    let mut out = Vec::with_capacity(nodes.len());
    for n in nodes {
        let n = handle(plugin, n)?;
        if !seen.insert(n.provider_id.clone()) {
            return Err(broken(
                plugin,
                "node list",
                format!(
                    "names provider id {:?} twice",
                    crate::answers::cut(&n.provider_id)
                ),
            ));
        }
        out.push(n);
    }
    Ok(out)
}

/// The backend's name and capacity types, asked once at load.
pub(crate) fn identity(
    plugin: &str,
    name: String,
    types: Vec<w::CapacityType>,
) -> Result<(String, Vec<CapacityType>), ProvisionerError> {
    sized(plugin, "backend name", &name, 1, MAX_BACKEND_NAME)?;
    let mut out: Vec<CapacityType> = Vec::new();
    for t in types.into_iter().map(capacity) {
        if !out.contains(&t) {
            out.push(t);
        }
    }
    Ok((name, out))
}

/// `s` cut to 64 characters for a message.
pub(crate) fn cut(s: &str) -> String {
    let mut out: String = s.chars().take(64).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est(usd: f64) -> w::PriceEstimate {
        w::PriceEstimate {
            hourly_usd: usd,
            capacity_type: w::CapacityType::OnDemand,
            instance_type: "t".into(),
        }
    }

    fn node(id: &str) -> w::NodeHandle {
        w::NodeHandle {
            provider_id: id.into(),
            address: None,
            zone: None,
            capacity_type: w::CapacityType::OnDemand,
            join_state: w::JoinState::Joined,
            instance_type: None,
            labels: Vec::new(),
        }
    }

    fn contract(r: Result<impl std::fmt::Debug, ProvisionerError>, field: &str) {
        match r {
            Err(ProvisionerError::Plugin {
                fault: PluginFault::Contract,
                message,
                ..
            }) => assert!(message.contains(field), "{field}: {message}"),
            other => panic!("{field}: {other:?}"),
        }
    }

    #[test]
    fn prices_are_finite_non_negative_and_zero_is_positive() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, -1e-300] {
            contract(price("p", est(bad)), "hourly_usd");
        }
        let zero = price("p", est(-0.0)).unwrap();
        assert!(zero.hourly_usd.is_sign_positive());
        assert_eq!(zero.hourly_usd.total_cmp(&0.0), std::cmp::Ordering::Equal);
        let mut e = est(1.0);
        e.instance_type = String::new();
        contract(price("p", e), "instance_type");
    }

    #[test]
    fn handles_are_well_formed_and_distinct() {
        contract(handle("p", node("")), "provider_id");
        contract(
            handle("p", node(&"x".repeat(MAX_PROVIDER_ID + 1))),
            "provider_id",
        );
        let mut n = node("a");
        n.labels = (0..=MAX_LABELS)
            .map(|i| (i.to_string(), String::new()))
            .collect();
        contract(handle("p", n), "labels");
        let mut n = node("a");
        n.zone = Some("z".repeat(MAX_NAME + 1));
        contract(handle("p", n), "zone");
        contract(handles("p", vec![node("a"), node("a")]), "twice");
        assert_eq!(handles("p", vec![node("a"), node("b")]).unwrap().len(), 2);
    }

    #[test]
    fn identity_dedups_capacity_types() {
        let (_, types) = identity(
            "p",
            "b".into(),
            vec![
                w::CapacityType::Spot,
                w::CapacityType::Spot,
                w::CapacityType::OnDemand,
            ],
        )
        .unwrap();
        assert_eq!(types, [CapacityType::Spot, CapacityType::OnDemand]);
        contract(
            identity("p", String::new(), vec![w::CapacityType::Spot]),
            "backend name",
        );
    }
}
