//! Every conversion between ZLayer's vocabulary (the real
//! `zlayer_provisioner` crate) and wasmprov's, as functions: both sides'
//! types are foreign to this crate, so `From` impls between them are not
//! allowed (the orphan rule); the adapters call these.
//!
//! | from | to | what changes |
//! | --- | --- | --- |
//! | `CapacityType`, both ways | | the same two variants ([`capacity_to_wasmprov`], [`capacity_to_zlayer`]) |
//! | `JoinState`, both ways | | the same five variants ([`join_state_to_wasmprov`], [`join_state_to_zlayer`]) |
//! | ZLayer's `&NodeShape` | `wasmprov_api::NodeShape` | all seven fields copied; wasmprov's own fields (an explicit instance type, ...) keep their defaults ([`shape_to_wasmprov`]) |
//! | `&wasmprov_api::NodeShape` | ZLayer's `NodeShape` | the seven fields ZLayer has; the caller checks the rest first ([`shape_to_zlayer`]) |
//! | `wasmprov_api::NodeHandle` | ZLayer's `NodeHandle` | the five fields ZLayer has; the instance type and the labels (with the owner and request-id tags) are dropped ([`handle_to_zlayer`]) |
//! | ZLayer's `NodeHandle` | `wasmprov_api::NodeHandle` | the five fields; the status from the join state ([`handle_to_wasmprov`]) |
//! | `wasmprov_api::PriceHint` | ZLayer's `PriceHint` | price and billing; the name of the priced instance type is dropped ([`price_to_zlayer`]) |
//! | `wasmprov_api::ProvisionerError` | ZLayer's `ProvisionerError` | ten kinds onto five, see below ([`error_to_zlayer`]) |
//! | ZLayer's `ProvisionerError` | `wasmprov_api::ProvisionerError` | five kinds onto their namesakes; `Capacity` with the scope `instance type` ([`error_to_wasmprov`]) |
//!
//! wasmprov values are built with `..Default::default()` and read field by
//! field, never spelt out whole, so fields wasmprov adds later need no
//! change here.
//!
//! # Errors
//!
//! ZLayer's callers decide by the variant: `Capacity` means "try another
//! backend or later", `Transport` "try again", and the other three "a person
//! must look". Each wasmprov kind goes to the variant that asks for the same
//! reaction, so the ZLayer variant is retry-worthy (`Capacity` or
//! `Transport`) exactly when wasmprov's
//! [`is_retryable`](wasmprov_api::ProvisionerError::is_retryable) says so.
//!
//! | wasmprov | ZLayer | why | text shown |
//! | --- | --- | --- | --- |
//! | `Unsupported(m)` | `Unsupported(m)` | same meaning (an invalid shape included) | unchanged |
//! | `Capacity { scope, message }` | `Capacity("(scope) message")` | same meaning; the scope goes into the text | `capacity unavailable: (zone) …` |
//! | `Quota(m)` | `Other` | an account limit does not lift by retrying; someone raises it | unchanged: `quota exceeded: …` |
//! | `RateLimited { retry_after_ms, message }` | `Transport` | passes by itself: retry later | `transport: rate limited (retry after N ms): …` |
//! | `NotFound(m)` | `Other` | no such kind in ZLayer; not retryable, and not "done" either: the id may name a node this host does not own | unchanged: `not found: …` |
//! | `Auth(m)` | `Auth(m)` | same meaning | unchanged |
//! | `Transport(m)` | `Transport(m)` | same meaning | unchanged |
//! | `InvalidConfig(m)` | `Other` | the operator must fix the backend's configuration | unchanged: `invalid config: …` |
//! | `Other(m)` | `Other(m)` | same meaning | unchanged |
//! | `Plugin { fault: Timeout, .. }` | `Transport` | the call ran out of time, like a lost connection; the next call gets a fresh instance | `transport: plugin NAME timed out: …` |
//! | `Plugin { .. }`, any other fault | `Other` | a bug in the plugin (trap, limit, contract); retrying repeats it | unchanged: `plugin NAME trapped: …` |
//! | a kind wasmprov adds later | `Other` | unknown, so not assumed retryable | unchanged |
//!
//! So the `Display` text of the converted error is wasmprov's own text,
//! prefixed with `transport: ` where the kind was folded into `Transport`,
//! and with the capacity scope moved after ZLayer's prefix. A caller that
//! needs the exact wasmprov kind (a retry-after, a quota) calls the
//! wasmprov provisioner directly (see
//! [`WasmprovProvisioner::inner`](crate::WasmprovProvisioner::inner)).

use zlayer_provisioner as zl;

/// ZLayer's billing kind as wasmprov's.
#[must_use]
pub fn capacity_to_wasmprov(capacity: zl::CapacityType) -> wasmprov_api::CapacityType {
    match capacity {
        zl::CapacityType::OnDemand => wasmprov_api::CapacityType::OnDemand,
        zl::CapacityType::Spot => wasmprov_api::CapacityType::Spot,
    }
}

/// wasmprov's billing kind as ZLayer's.
#[must_use]
pub fn capacity_to_zlayer(capacity: wasmprov_api::CapacityType) -> zl::CapacityType {
    match capacity {
        wasmprov_api::CapacityType::OnDemand => zl::CapacityType::OnDemand,
        wasmprov_api::CapacityType::Spot => zl::CapacityType::Spot,
    }
}

/// ZLayer's join state as wasmprov's.
#[must_use]
pub fn join_state_to_wasmprov(state: zl::JoinState) -> wasmprov_api::JoinState {
    match state {
        zl::JoinState::Provisioning => wasmprov_api::JoinState::Provisioning,
        zl::JoinState::Booting => wasmprov_api::JoinState::Booting,
        zl::JoinState::Joining => wasmprov_api::JoinState::Joining,
        zl::JoinState::Joined => wasmprov_api::JoinState::Joined,
        zl::JoinState::Failed => wasmprov_api::JoinState::Failed,
    }
}

/// wasmprov's join state as ZLayer's.
#[must_use]
pub fn join_state_to_zlayer(state: wasmprov_api::JoinState) -> zl::JoinState {
    match state {
        wasmprov_api::JoinState::Provisioning => zl::JoinState::Provisioning,
        wasmprov_api::JoinState::Booting => zl::JoinState::Booting,
        wasmprov_api::JoinState::Joining => zl::JoinState::Joining,
        wasmprov_api::JoinState::Joined => zl::JoinState::Joined,
        wasmprov_api::JoinState::Failed => zl::JoinState::Failed,
    }
}

/// A ZLayer shape as wasmprov's: all seven fields; wasmprov's own at their
/// defaults.
#[must_use]
pub fn shape_to_wasmprov(shape: &zl::NodeShape) -> wasmprov_api::NodeShape {
    wasmprov_api::NodeShape {
        cpu: shape.cpu,
        memory_bytes: shape.memory_bytes,
        gpu: shape.gpu,
        gpu_vendor: shape.gpu_vendor.clone(),
        labels: shape.labels.clone(),
        zone: shape.zone.clone(),
        capacity_type: capacity_to_wasmprov(shape.capacity_type),
        ..wasmprov_api::NodeShape::default()
    }
}

/// A wasmprov shape as ZLayer's: the seven fields ZLayer has. What only
/// wasmprov can say (an instance type, a GPU model, an architecture, a
/// disk) is dropped here; [`ZLayerBackend`](crate::ZLayerBackend) decides
/// before calling this whether it may be.
#[must_use]
pub fn shape_to_zlayer(shape: &wasmprov_api::NodeShape) -> zl::NodeShape {
    zl::NodeShape {
        cpu: shape.cpu,
        memory_bytes: shape.memory_bytes,
        gpu: shape.gpu,
        gpu_vendor: shape.gpu_vendor.clone(),
        labels: shape.labels.clone(),
        zone: shape.zone.clone(),
        capacity_type: capacity_to_zlayer(shape.capacity_type),
    }
}

/// A wasmprov handle as ZLayer's: the five fields ZLayer has.
#[must_use]
pub fn handle_to_zlayer(node: wasmprov_api::NodeHandle) -> zl::NodeHandle {
    zl::NodeHandle {
        provider_id: node.provider_id,
        address: node.address,
        zone: node.zone,
        capacity_type: capacity_to_zlayer(node.capacity_type),
        join_state: join_state_to_zlayer(node.join_state),
    }
}

/// A ZLayer handle as wasmprov's: the five fields, the status read from
/// the join state; no labels (ZLayer's handle has none).
#[must_use]
pub fn handle_to_wasmprov(node: zl::NodeHandle) -> wasmprov_api::NodeHandle {
    let join_state = join_state_to_wasmprov(node.join_state);
    wasmprov_api::NodeHandle {
        status: wasmprov_api::NodeStatus::from_join_state(join_state),
        address: node.address,
        zone: node.zone,
        capacity_type: capacity_to_wasmprov(node.capacity_type),
        ..wasmprov_api::NodeHandle::new(node.provider_id, join_state)
    }
}

/// A wasmprov price as ZLayer's: price and billing.
#[must_use]
pub fn price_to_zlayer(hint: wasmprov_api::PriceHint) -> zl::PriceHint {
    zl::PriceHint {
        hourly_usd: hint.hourly_usd,
        capacity_type: capacity_to_zlayer(hint.capacity_type),
    }
}

/// A wasmprov error as ZLayer's; see the table in the [module docs](self).
#[must_use]
pub fn error_to_zlayer(err: wasmprov_api::ProvisionerError) -> zl::ProvisionerError {
    use wasmprov_api::ProvisionerError as W;
    use zl::ProvisionerError as Z;
    match err {
        W::Unsupported(m) => Z::Unsupported(m),
        W::Capacity { scope, message } => Z::Capacity(format!("({scope}) {message}")),
        W::Auth(m) => Z::Auth(m),
        W::Transport(m) => Z::Transport(m),
        W::Other(m) => Z::Other(m),
        e @ W::RateLimited { .. } => Z::Transport(e.to_string()),
        e @ W::Plugin {
            fault: wasmprov_api::PluginFault::Timeout,
            ..
        } => Z::Transport(e.to_string()),
        e @ (W::Quota(_) | W::NotFound(_) | W::InvalidConfig(_) | W::Plugin { .. }) => {
            Z::Other(e.to_string())
        }
        e => Z::Other(e.to_string()),
    }
}

/// A ZLayer error as wasmprov's: each kind onto its namesake. ZLayer's
/// `Capacity` does not say what ran out; it becomes the scope
/// `instance type`, since a ZLayer backend served by
/// [`ZLayerBackend`](crate::ZLayerBackend) makes one type, so the fleet
/// sets that backend aside for a while and tries the next offering.
#[must_use]
pub fn error_to_wasmprov(err: zl::ProvisionerError) -> wasmprov_api::ProvisionerError {
    use wasmprov_api::ProvisionerError as W;
    use zl::ProvisionerError as Z;
    match err {
        Z::Unsupported(m) => W::Unsupported(m),
        Z::Capacity(message) => W::Capacity {
            scope: wasmprov_api::CapacityScope::InstanceType,
            message,
        },
        Z::Auth(m) => W::Auth(m),
        Z::Transport(m) => W::Transport(m),
        Z::Other(m) => W::Other(m),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use wasmprov_api::{CapacityScope, PluginFault};

    use super::*;
    use zl::{CapacityType, JoinState, NodeHandle, NodeShape, PriceHint, ProvisionerError};

    /// A wasmprov handle with every field at a plain value, built the way
    /// a plugin's answer is read (so fields wasmprov adds take their
    /// defaults instead of breaking this test's build).
    fn wasm_handle() -> wasmprov_api::NodeHandle {
        serde_json::from_value(serde_json::json!({
            "provider_id": "",
            "address": null,
            "zone": null,
            "capacity_type": "on_demand",
            "join_state": "provisioning",
        }))
        .expect("a wasmprov NodeHandle from its required fields")
    }

    #[test]
    fn shape_fields_all_arrive() {
        let shape = NodeShape {
            cpu: 3.5,
            memory_bytes: 7 << 30,
            gpu: 2,
            gpu_vendor: Some("amd".into()),
            labels: BTreeMap::from([("role".into(), "gpu-worker".into())]),
            zone: Some("fsn1".into()),
            capacity_type: CapacityType::Spot,
        };
        let wasm = shape_to_wasmprov(&shape);
        assert!((wasm.cpu - 3.5).abs() < 1e-12);
        assert_eq!(wasm.memory_bytes, 7 << 30);
        assert_eq!(wasm.gpu, 2);
        assert_eq!(wasm.gpu_vendor.as_deref(), Some("amd"));
        assert_eq!(wasm.labels, shape.labels);
        assert_eq!(wasm.zone.as_deref(), Some("fsn1"));
        assert_eq!(wasm.capacity_type, wasmprov_api::CapacityType::Spot);
        assert_eq!(
            wasm.instance_type, None,
            "ZLayer shapes never pin an instance type"
        );

        let plain = shape_to_wasmprov(&NodeShape::default());
        assert_eq!(plain, wasmprov_api::NodeShape::default());
    }

    #[test]
    fn handle_and_price_fields_all_arrive() {
        let node = handle_to_zlayer(wasmprov_api::NodeHandle {
            provider_id: "node-0042".into(),
            address: Some("10.0.0.42".into()),
            zone: Some("z1".into()),
            capacity_type: wasmprov_api::CapacityType::Spot,
            join_state: wasmprov_api::JoinState::Joining,
            instance_type: Some("small".into()),
            ..wasm_handle()
        });
        assert_eq!(node.provider_id, "node-0042");
        assert_eq!(node.address.as_deref(), Some("10.0.0.42"));
        assert_eq!(node.zone.as_deref(), Some("z1"));
        assert_eq!(node.capacity_type, CapacityType::Spot);
        assert_eq!(node.join_state, JoinState::Joining);

        let bare = handle_to_zlayer(wasm_handle());
        assert_eq!(bare.address, None);
        assert_eq!(bare.zone, None);
        assert_eq!(bare.capacity_type, CapacityType::OnDemand);
        assert_eq!(bare.join_state, JoinState::Provisioning);

        let hint: wasmprov_api::PriceHint = serde_json::from_value(serde_json::json!({
            "hourly_usd": 0.125,
            "capacity_type": "spot",
            "instance_type": "cx22",
        }))
        .unwrap();
        let hint: PriceHint = price_to_zlayer(hint);
        assert!((hint.hourly_usd - 0.125).abs() < 1e-12);
        assert_eq!(hint.capacity_type, CapacityType::Spot);
    }

    #[test]
    fn enums_map_one_to_one_both_ways() {
        for c in [CapacityType::OnDemand, CapacityType::Spot] {
            let wasm = capacity_to_wasmprov(c);
            assert_eq!(capacity_to_zlayer(wasm), c);
        }
        assert_eq!(
            capacity_to_wasmprov(CapacityType::Spot),
            wasmprov_api::CapacityType::Spot
        );
        for (state, wasm) in [
            (
                JoinState::Provisioning,
                wasmprov_api::JoinState::Provisioning,
            ),
            (JoinState::Booting, wasmprov_api::JoinState::Booting),
            (JoinState::Joining, wasmprov_api::JoinState::Joining),
            (JoinState::Joined, wasmprov_api::JoinState::Joined),
            (JoinState::Failed, wasmprov_api::JoinState::Failed),
        ] {
            assert_eq!(join_state_to_zlayer(wasm), state);
            assert_eq!(join_state_to_wasmprov(state), wasm);
        }
    }

    /// Every wasmprov kind (and every plugin fault), with the ZLayer
    /// variant it lands on and the text that must be shown.
    fn error_table() -> Vec<(wasmprov_api::ProvisionerError, &'static str, &'static str)> {
        use wasmprov_api::ProvisionerError as W;
        let plugin = |fault| W::Plugin {
            plugin: "acme".into(),
            fault,
            message: "call 7".into(),
        };
        vec![
            (
                W::Unsupported("gpu".into()),
                "unsupported",
                "unsupported: gpu",
            ),
            (
                W::Capacity {
                    scope: CapacityScope::Zone,
                    message: "z1 is full".into(),
                },
                "capacity",
                "capacity unavailable: (zone) z1 is full",
            ),
            (
                W::Capacity {
                    scope: CapacityScope::InstanceType,
                    message: "no cx22".into(),
                },
                "capacity",
                "capacity unavailable: (instance type) no cx22",
            ),
            (
                W::Quota("20 of 20".into()),
                "other",
                "quota exceeded: 20 of 20",
            ),
            (
                W::RateLimited {
                    retry_after_ms: Some(1500),
                    message: "slow down".into(),
                },
                "transport",
                "transport: rate limited (retry after 1500 ms): slow down",
            ),
            (
                W::RateLimited {
                    retry_after_ms: None,
                    message: "slow down".into(),
                },
                "transport",
                "transport: rate limited: slow down",
            ),
            (W::NotFound("vm-9".into()), "other", "not found: vm-9"),
            (W::Auth("expired".into()), "auth", "auth: expired"),
            (
                W::Transport("reset".into()),
                "transport",
                "transport: reset",
            ),
            (
                W::InvalidConfig("no image".into()),
                "other",
                "invalid config: no image",
            ),
            (W::Other("disk on fire".into()), "other", "disk on fire"),
            (
                plugin(PluginFault::Timeout),
                "transport",
                "transport: plugin acme timed out: call 7",
            ),
            (
                plugin(PluginFault::Trap),
                "other",
                "plugin acme trapped: call 7",
            ),
            (
                plugin(PluginFault::CpuLimit),
                "other",
                "plugin acme exceeded its CPU time limit: call 7",
            ),
            (
                plugin(PluginFault::MemoryLimit),
                "other",
                "plugin acme exceeded its memory limit: call 7",
            ),
            (
                plugin(PluginFault::ResourceLimit),
                "other",
                "plugin acme exceeded its host resource limit: call 7",
            ),
            (
                plugin(PluginFault::Contract),
                "other",
                "plugin acme broke the contract: call 7",
            ),
        ]
    }

    fn variant(err: &ProvisionerError) -> &'static str {
        match err {
            ProvisionerError::Unsupported(_) => "unsupported",
            ProvisionerError::Capacity(_) => "capacity",
            ProvisionerError::Auth(_) => "auth",
            ProvisionerError::Transport(_) => "transport",
            ProvisionerError::Other(_) => "other",
        }
    }

    #[test]
    fn errors_land_on_the_variant_with_the_same_next_step() {
        let table = error_table();
        let kinds: std::collections::BTreeSet<&str> =
            table.iter().map(|(w, _, _)| w.kind()).collect();
        assert_eq!(kinds.len(), 10, "every wasmprov kind is in the table");
        for (wasm, want, text) in table {
            let retryable = wasm.is_retryable();
            let shown = wasm.to_string();
            let err = error_to_zlayer(wasm);
            assert_eq!(variant(&err), want, "{shown}");
            assert_eq!(err.to_string(), text, "{shown}");
            assert_eq!(
                matches!(
                    err,
                    ProvisionerError::Capacity(_) | ProvisionerError::Transport(_)
                ),
                retryable,
                "{shown}: retry-worthy in ZLayer's terms iff in wasmprov's"
            );
            if !matches!(err, ProvisionerError::Capacity(_)) {
                assert!(text.ends_with(&shown), "{text} keeps {shown}");
            }
        }
    }

    #[test]
    fn zlayer_handles_and_errors_come_back_as_wasmprovs() {
        let node = handle_to_wasmprov(NodeHandle {
            provider_id: "i-7".into(),
            address: Some("10.0.0.7".into()),
            zone: Some("z2".into()),
            capacity_type: CapacityType::Spot,
            join_state: JoinState::Joined,
        });
        assert_eq!(node.provider_id, "i-7");
        assert_eq!(node.address.as_deref(), Some("10.0.0.7"));
        assert_eq!(node.zone.as_deref(), Some("z2"));
        assert_eq!(node.capacity_type, wasmprov_api::CapacityType::Spot);
        assert_eq!(node.join_state, wasmprov_api::JoinState::Joined);
        assert_eq!(
            node.status,
            wasmprov_api::NodeStatus::from_join_state(wasmprov_api::JoinState::Joined)
        );
        assert!(node.labels.is_empty());

        let mut shape = wasmprov_api::NodeShape::new(2.0, 4 << 30);
        shape.zone = Some("z1".into());
        shape.labels.insert("role".into(), "web".into());
        let z = shape_to_zlayer(&shape);
        assert!((z.cpu - 2.0).abs() < 1e-12);
        assert_eq!(z.memory_bytes, 4 << 30);
        assert_eq!(z.labels["role"], "web");
        assert_eq!(z.zone.as_deref(), Some("z1"));

        for (err, kind, text) in [
            (
                ProvisionerError::Unsupported("gpu".into()),
                "unsupported",
                "unsupported: gpu",
            ),
            (
                ProvisionerError::Capacity("full".into()),
                "capacity",
                "capacity unavailable (instance type): full",
            ),
            (ProvisionerError::Auth("no".into()), "auth", "auth: no"),
            (
                ProvisionerError::Transport("reset".into()),
                "transport",
                "transport: reset",
            ),
            (ProvisionerError::Other("odd".into()), "other", "odd"),
        ] {
            let w = error_to_wasmprov(err);
            assert_eq!(w.kind(), kind);
            assert_eq!(w.to_string(), text);
        }
    }
}
