//! A plugin as it was written for `wasmprov:provisioner@0.2.0`, on the raw
//! bindings of the frozen WIT (`wit/deps/provisioner-0.2.0`), without the
//! guest SDK (which builds 0.3). It keeps its nodes through the operator's
//! commands, like the cloud-init plugin: `BIN/create.sh`, `BIN/list.sh` and
//! `BIN/destroy.sh --state STATE`, run through the 0.2 `exec` import, and
//! logs through the 0.2 `log` import, so both imports are exercised under a
//! 0.3 host. It has what 0.2 has (status, raw state, `get`, offerings, user
//! data) and nothing of 0.3 (`set-labels`, `networking`, a subnet).
//!
//! Config: `bin` (the scripts' directory) and `state` (their state directory).
#![allow(unsafe_code, reason = "the generated export glue is unsafe")]

// The export glue only links on wasm (natively, lld refuses the versioned
// export names), so a native `cargo build --workspace` builds an empty crate.
#[cfg(target_arch = "wasm32")]
#[allow(missing_docs, reason = "generated bindings")]
mod wit {
    wit_bindgen::generate!({
        path: "../../../wit",
        world: "wasmprov:provisioner/provider@0.2.0",
        generate_all,
    });
}

#[cfg(target_arch = "wasm32")]
mod plugin {
    use super::wit::exports::wasmprov::provisioner0_2_0::provisioner::Guest;
    use super::wit::wasi::config::store;
    use super::wit::wasmprov::provisioner0_2_0::exec::{self, Command};
    use super::wit::wasmprov::provisioner0_2_0::log::{self, Level};
    use super::wit::wasmprov::provisioner0_2_0::types as w;

    const OWNER: &str = "wasmprov-owner";
    const REQUEST: &str = "wasmprov-request";

    struct Older;

    fn setting(key: &str) -> Result<String, w::ProvisionError> {
        match store::get(key) {
            Ok(Some(v)) => Ok(v),
            _ => Err(w::ProvisionError::InvalidConfig(format!(
                "config key {key:?} is required"
            ))),
        }
    }

    /// Runs `BIN/<script> --state STATE <args>`; its stdout.
    fn run(
        script: &str,
        args: &[&str],
        env: Vec<(String, String)>,
        stdin: Option<Vec<u8>>,
    ) -> Result<String, w::ProvisionError> {
        let bin = setting("bin")?;
        let state = setting("state")?;
        let mut all = vec!["--state".to_string(), state];
        all.extend(args.iter().map(|a| (*a).to_string()));
        let out = exec::run(&Command {
            program: format!("{bin}/{script}"),
            args: all,
            env,
            stdin,
            timeout_ms: Some(10_000),
        })
        .map_err(|e| w::ProvisionError::Other(format!("{script}: {e:?}")))?;
        if out.exit_code != Some(0) {
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            return Err(if stdout_kind(&out.stdout) == Some("not_found") {
                w::ProvisionError::NotFound(stderr)
            } else {
                w::ProvisionError::Other(format!("{script} failed: {stderr}"))
            });
        }
        String::from_utf8(out.stdout)
            .map_err(|_| w::ProvisionError::Transport(format!("{script} printed non-UTF-8")))
    }

    fn stdout_kind(stdout: &[u8]) -> Option<&'static str> {
        let v: serde_json::Value = serde_json::from_slice(stdout).ok()?;
        (v["error"]["kind"] == "not_found").then_some("not_found")
    }

    fn handle(v: &serde_json::Value) -> Option<w::NodeHandle> {
        let text = |k: &str| v[k].as_str().filter(|s| !s.is_empty()).map(str::to_string);
        let (status, join_state) = match v["state"].as_str() {
            Some("running" | "ready") => (w::NodeStatus::Running, w::JoinState::Joined),
            Some("stopped") => (w::NodeStatus::Stopped, w::JoinState::Failed),
            Some("failed") => (w::NodeStatus::Unknown, w::JoinState::Failed),
            _ => (w::NodeStatus::Pending, w::JoinState::Provisioning),
        };
        Some(w::NodeHandle {
            provider_id: text("id")?,
            status,
            raw_state: text("state"),
            created_at_ms: None,
            address: text("address"),
            private_address: text("address"),
            public_address: None,
            arch: Some(w::Arch::X8664),
            gpu_model: None,
            zone: text("zone"),
            capacity_type: w::CapacityType::OnDemand,
            join_state,
            instance_type: text("instance_type"),
            labels: v["labels"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string()))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    fn owned(owner_id: &str) -> Result<Vec<w::NodeHandle>, w::ProvisionError> {
        let listed: serde_json::Value =
            serde_json::from_str(&run("list.sh", &[], vec![], None)?)
                .map_err(|e| w::ProvisionError::Transport(format!("list.sh: {e}")))?;
        Ok(listed
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(handle)
            .filter(|n| n.labels.iter().any(|(k, v)| k == OWNER && v == owner_id))
            .collect())
    }

    impl Guest for Older {
        fn name() -> String {
            "older".into()
        }

        fn capacity_types() -> Vec<w::CapacityType> {
            vec![w::CapacityType::OnDemand]
        }

        fn price_hint(shape: w::NodeShape) -> Result<Option<w::PriceEstimate>, w::ProvisionError> {
            if shape.gpu > 0 {
                return Err(w::ProvisionError::Unsupported("no GPUs here".into()));
            }
            Ok(Some(w::PriceEstimate {
                hourly_usd: 0.01 * shape.cpu.ceil(),
                capacity_type: w::CapacityType::OnDemand,
                instance_type: format!("older-{}", shape.cpu.ceil()),
            }))
        }

        fn provision(request: w::ProvisionRequest) -> Result<w::NodeHandle, w::ProvisionError> {
            if request.boot.image.is_some() || !request.boot.ssh_keys.is_empty() {
                return Err(w::ProvisionError::Unsupported(
                    "only user data is honoured".into(),
                ));
            }
            if let Some(node) = owned(&request.owner_id)?.into_iter().find(|n| {
                n.labels
                    .iter()
                    .any(|(k, v)| k == REQUEST && *v == request.request_id)
            }) {
                return Ok(node);
            }
            let mut labels = serde_json::Map::new();
            for (k, v) in &request.shape.labels {
                labels.insert(k.clone(), v.clone().into());
            }
            labels.insert(OWNER.into(), request.owner_id.clone().into());
            labels.insert(REQUEST.into(), request.request_id.clone().into());
            let cpu = request.shape.cpu.ceil();
            let env = vec![
                (
                    "WASMPROV_ZONE".to_string(),
                    request.shape.zone.clone().unwrap_or_default(),
                ),
                ("WASMPROV_INSTANCE_TYPE".to_string(), format!("older-{cpu}")),
                (
                    "WASMPROV_CAPACITY_TYPE".to_string(),
                    "on-demand".to_string(),
                ),
                (
                    "WASMPROV_LABELS_JSON".to_string(),
                    serde_json::Value::Object(labels).to_string(),
                ),
            ];
            let out = run(
                "create.sh",
                &[&request.request_id],
                env,
                Some(
                    request
                        .boot
                        .user_data
                        .clone()
                        .unwrap_or_else(|| b"#cloud-config\n".to_vec()),
                ),
            )?;
            let node: serde_json::Value = serde_json::from_str(&out)
                .map_err(|e| w::ProvisionError::Transport(format!("create.sh: {e}")))?;
            let node = handle(&node)
                .ok_or_else(|| w::ProvisionError::Transport("create.sh printed no id".into()))?;
            log::log(
                Level::Info,
                "older node created",
                &[("id".to_string(), node.provider_id.clone())],
            );
            Ok(node)
        }

        fn terminate(owner_id: String, provider_id: String) -> Result<(), w::ProvisionError> {
            if !owned(&owner_id)?
                .iter()
                .any(|n| n.provider_id == provider_id)
            {
                return Err(w::ProvisionError::NotFound(provider_id));
            }
            run("destroy.sh", &[&provider_id], vec![], None).map(|_| ())
        }

        fn describe(owner_id: String) -> Result<Vec<w::NodeHandle>, w::ProvisionError> {
            owned(&owner_id)
        }

        fn get(
            owner_id: String,
            provider_id: String,
        ) -> Result<Option<w::NodeHandle>, w::ProvisionError> {
            Ok(owned(&owner_id)?
                .into_iter()
                .find(|n| n.provider_id == provider_id))
        }

        fn offerings() -> Result<Vec<w::Offering>, w::ProvisionError> {
            Ok((1u32..=4)
                .map(|cpu| w::Offering {
                    instance_type: format!("older-{cpu}"),
                    cpu: f64::from(cpu),
                    memory_bytes: u64::from(cpu) << 31,
                    gpu: 0,
                    gpu_vendor: None,
                    gpu_model: None,
                    arch: Some(w::Arch::X8664),
                    disk_bytes: None,
                    zones: Vec::new(),
                    on_demand_usd: Some(0.01 * f64::from(cpu)),
                    spot_usd: None,
                })
                .collect())
        }
    }

    super::wit::export!(Older with_types_in super::wit);
}
