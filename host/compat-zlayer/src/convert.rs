//! Every conversion between ZLayer's vocabulary and wasmprov's, as `From`
//! impls.
//!
//! | from | to | what changes |
//! | --- | --- | --- |
//! | [`CapacityType`], both ways | | the same two variants |
//! | [`JoinState`], both ways | | the same five variants |
//! | [`&NodeShape`](NodeShape) | `wasmprov_api::NodeShape` | all seven fields copied; wasmprov's own fields (an explicit instance type, ...) keep their defaults |
//! | `wasmprov_api::NodeHandle` | [`NodeHandle`] | the five fields ZLayer has; the instance type and the labels (with the owner and request-id tags) are dropped |
//! | `wasmprov_api::PriceHint` | [`PriceHint`] | price and billing; the name of the priced instance type is dropped |
//! | `wasmprov_api::ProvisionerError` | [`ProvisionerError`] | ten kinds onto five, see below |
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

use crate::contract::{
    CapacityType, JoinState, NodeHandle, NodeShape, PriceHint, ProvisionerError,
};

impl From<CapacityType> for wasmprov_api::CapacityType {
    fn from(capacity: CapacityType) -> Self {
        match capacity {
            CapacityType::OnDemand => Self::OnDemand,
            CapacityType::Spot => Self::Spot,
        }
    }
}

impl From<wasmprov_api::CapacityType> for CapacityType {
    fn from(capacity: wasmprov_api::CapacityType) -> Self {
        match capacity {
            wasmprov_api::CapacityType::OnDemand => Self::OnDemand,
            wasmprov_api::CapacityType::Spot => Self::Spot,
        }
    }
}

impl From<JoinState> for wasmprov_api::JoinState {
    fn from(state: JoinState) -> Self {
        match state {
            JoinState::Provisioning => Self::Provisioning,
            JoinState::Booting => Self::Booting,
            JoinState::Joining => Self::Joining,
            JoinState::Joined => Self::Joined,
            JoinState::Failed => Self::Failed,
        }
    }
}

impl From<wasmprov_api::JoinState> for JoinState {
    fn from(state: wasmprov_api::JoinState) -> Self {
        match state {
            wasmprov_api::JoinState::Provisioning => Self::Provisioning,
            wasmprov_api::JoinState::Booting => Self::Booting,
            wasmprov_api::JoinState::Joining => Self::Joining,
            wasmprov_api::JoinState::Joined => Self::Joined,
            wasmprov_api::JoinState::Failed => Self::Failed,
        }
    }
}

impl From<&NodeShape> for wasmprov_api::NodeShape {
    fn from(shape: &NodeShape) -> Self {
        Self {
            cpu: shape.cpu,
            memory_bytes: shape.memory_bytes,
            gpu: shape.gpu,
            gpu_vendor: shape.gpu_vendor.clone(),
            labels: shape.labels.clone(),
            zone: shape.zone.clone(),
            capacity_type: shape.capacity_type.into(),
            ..Self::default()
        }
    }
}

impl From<wasmprov_api::NodeHandle> for NodeHandle {
    fn from(node: wasmprov_api::NodeHandle) -> Self {
        Self {
            provider_id: node.provider_id,
            address: node.address,
            zone: node.zone,
            capacity_type: node.capacity_type.into(),
            join_state: node.join_state.into(),
        }
    }
}

impl From<wasmprov_api::PriceHint> for PriceHint {
    fn from(hint: wasmprov_api::PriceHint) -> Self {
        Self {
            hourly_usd: hint.hourly_usd,
            capacity_type: hint.capacity_type.into(),
        }
    }
}

impl From<wasmprov_api::ProvisionerError> for ProvisionerError {
    /// See the [module docs](self) for the table.
    fn from(err: wasmprov_api::ProvisionerError) -> Self {
        use wasmprov_api::ProvisionerError as W;
        match err {
            W::Unsupported(m) => Self::Unsupported(m),
            W::Capacity { scope, message } => Self::Capacity(format!("({scope}) {message}")),
            W::Auth(m) => Self::Auth(m),
            W::Transport(m) => Self::Transport(m),
            W::Other(m) => Self::Other(m),
            e @ W::RateLimited { .. } => Self::Transport(e.to_string()),
            e @ W::Plugin {
                fault: wasmprov_api::PluginFault::Timeout,
                ..
            } => Self::Transport(e.to_string()),
            e @ (W::Quota(_) | W::NotFound(_) | W::InvalidConfig(_) | W::Plugin { .. }) => {
                Self::Other(e.to_string())
            }
            e => Self::Other(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use wasmprov_api::{CapacityScope, PluginFault};

    use super::*;

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
        let wasm = wasmprov_api::NodeShape::from(&shape);
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

        let plain = wasmprov_api::NodeShape::from(&NodeShape::default());
        assert_eq!(plain, wasmprov_api::NodeShape::default());
    }

    #[test]
    fn handle_and_price_fields_all_arrive() {
        let node = NodeHandle::from(wasmprov_api::NodeHandle {
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

        let bare = NodeHandle::from(wasm_handle());
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
        let hint = PriceHint::from(hint);
        assert!((hint.hourly_usd - 0.125).abs() < 1e-12);
        assert_eq!(hint.capacity_type, CapacityType::Spot);
    }

    #[test]
    fn enums_map_one_to_one_both_ways() {
        for c in [CapacityType::OnDemand, CapacityType::Spot] {
            let wasm = wasmprov_api::CapacityType::from(c);
            assert_eq!(CapacityType::from(wasm), c);
        }
        assert_eq!(
            wasmprov_api::CapacityType::from(CapacityType::Spot),
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
            assert_eq!(JoinState::from(wasm), state);
            assert_eq!(wasmprov_api::JoinState::from(state), wasm);
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
            let err = ProvisionerError::from(wasm);
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
}
