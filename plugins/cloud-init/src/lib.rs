//! wasmprov provisioner plugin that provisions through the operator's own
//! commands and boots each node with a cloud-init `#cloud-config`.
//!
//! Three commands, granted in the manifest's `[[exec]]`, do the work:
//! `create` makes a node (its standard input is the `#cloud-config`, which
//! runs the cluster's join command on first boot), `list` reports every
//! node as JSON, and `destroy` removes one. The plugin keeps no state of its
//! own: `provision` is idempotent by the request-id label the list reports,
//! `describe` returns the nodes carrying this host's owner label, and
//! `terminate` never runs `destroy` for a node without it. See the README
//! for the manifest and the command protocol.
//!
//! Module layout: [`settings`] (config keys), [`template`] (the join
//! command), [`cloud_config`] (the document), [`catalogue`] (instance types
//! and prices), [`protocol`] (what the commands print, states and errors)
//! and [`client`] (the operations, over a runner that is the host's `exec`
//! in the component and a fake in the unit tests).

pub mod catalogue;
pub mod client;
pub mod cloud_config;
pub mod protocol;
pub mod settings;
pub mod template;

use wasmprov_guest::exec::{Command, ExecError, Output};
use wasmprov_guest::{
    CapacityType, NodeHandle, NodeShape, PriceHint, Provider, ProvisionRequest, Result, config, log,
};

use crate::client::{Client, Invocation, Runner};
use crate::settings::Settings;

/// The cloud-init provider.
#[derive(Clone, Debug)]
pub struct CloudInit {
    settings: Settings,
}

impl CloudInit {
    /// The provider with these settings.
    #[must_use]
    pub fn with_settings(settings: Settings) -> Self {
        Self { settings }
    }

    /// The settings in use.
    #[must_use]
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    fn client(&self) -> Client<'_, Exec> {
        Client::new(&self.settings, Exec)
    }
}

impl Provider for CloudInit {
    const NAME: &'static str = "cloud-init";

    /// User data (a `#cloud-config`, merged with the join command into one
    /// document) and SSH keys (added to `ssh_authorized_keys`). The image
    /// is the operator's create command's business: refused.
    const BOOT: wasmprov_guest::BootSupport = wasmprov_guest::BootSupport {
        image: false,
        user_data: true,
        ssh_keys: true,
    };

    /// What `capacity_types` configures (default on-demand). A wrong value
    /// gives on-demand here; every other call reports it as invalid config.
    fn capacity_types() -> Vec<CapacityType> {
        config::get("capacity_types")
            .ok()
            .flatten()
            .and_then(|v| settings::parse_capacity_types(&v).ok())
            .unwrap_or_else(|| vec![CapacityType::OnDemand])
    }

    fn new() -> Result<Self> {
        Ok(Self::with_settings(Settings::from_lookup(config::get)?))
    }

    /// The cheapest catalogue type for the shape; `None` without a
    /// catalogue. No I/O.
    fn price_hint(&self, shape: &NodeShape) -> Result<Option<PriceHint>> {
        let Some(catalogue) = &self.settings.catalogue else {
            return Ok(None);
        };
        if !self.settings.capacity_types.contains(&shape.capacity_type) {
            return Err(wasmprov_guest::Error::Unsupported(format!(
                "capacity type {} is not offered here",
                protocol::capacity_word(shape.capacity_type)
            )));
        }
        catalogue.choose(shape).map(Some)
    }

    fn provision(&self, owner_id: &str, request: &ProvisionRequest) -> Result<NodeHandle> {
        self.client().provision(owner_id, request)
    }

    fn terminate(&self, owner_id: &str, provider_id: &str) -> Result<()> {
        self.client().terminate(owner_id, provider_id)
    }

    fn describe(&self, owner_id: &str) -> Result<Vec<NodeHandle>> {
        self.client().describe(owner_id)
    }

    /// Unsupported: the command protocol has no command that changes a
    /// live node's labels (they are what `create` stored, as `list`
    /// reports them).
    fn set_labels(
        &self,
        _owner_id: &str,
        _provider_id: &str,
        _labels: &wasmprov_guest::Labels,
    ) -> Result<NodeHandle> {
        Err(wasmprov_guest::Error::Unsupported(
            "the cloud-init plugin cannot change a live node's labels: its commands (create, list, destroy) have none that does; labels are what create stored".into(),
        ))
    }

    /// The `instance_types` catalogue; unsupported without one.
    fn offerings(&self) -> Result<Vec<wasmprov_guest::Offering>> {
        match &self.settings.catalogue {
            Some(c) => Ok(c.offerings()),
            None => Err(wasmprov_guest::Error::Unsupported(
                "no instance_types catalogue is configured".into(),
            )),
        }
    }
}

/// The component's runner: the host's `exec` and log.
#[derive(Clone, Copy, Debug)]
struct Exec;

impl Runner for Exec {
    fn run(&self, inv: &Invocation) -> std::result::Result<Output, ExecError> {
        let mut cmd = Command::new(&inv.program).args(&inv.args);
        for (k, v) in &inv.env {
            cmd = cmd.env(k, v);
        }
        if let Some(stdin) = &inv.stdin {
            cmd = cmd.stdin(stdin.clone());
        }
        cmd.run()
    }

    fn info(&self, message: &str, fields: &[(&str, &str)]) {
        log::info_with(message, fields);
    }
}

wasmprov_guest::export_provider!(CloudInit, capabilities = "capabilities.toml");

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use wasmprov_guest::Error;

    fn provider(pairs: &[(&str, &str)]) -> CloudInit {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        CloudInit::with_settings(Settings::from_lookup(|k| Ok(map.get(k).cloned())).unwrap())
    }

    #[test]
    fn price_hint_uses_the_catalogue_or_says_none() {
        assert_eq!(
            provider(&[])
                .price_hint(&NodeShape::new(2.0, 4 << 30))
                .unwrap(),
            None
        );
        let p = provider(&[
            (
                "instance_types",
                r#"[{"name": "a", "cpu": 2, "memory_gib": 4, "hourly_usd": 0.05, "spot_hourly_usd": 0.02},
                    {"name": "b", "cpu": 4, "memory_gib": 8, "hourly_usd": 0.08}]"#,
            ),
            ("capacity_types", "on-demand,spot"),
        ]);
        let h = p
            .price_hint(&NodeShape::new(2.0, 4 << 30))
            .unwrap()
            .unwrap();
        assert_eq!(h.instance_type, "a");
        assert!((h.hourly_usd - 0.05).abs() < 1e-12);
        let spot = NodeShape {
            capacity_type: CapacityType::Spot,
            ..NodeShape::new(3.0, 1 << 30)
        };
        let h = p.price_hint(&spot).unwrap().unwrap();
        assert_eq!(
            (h.instance_type.as_str(), h.capacity_type),
            ("b", CapacityType::Spot)
        );
        assert!(matches!(
            p.price_hint(&NodeShape::new(16.0, 1 << 30)),
            Err(Error::Unsupported(_))
        ));
        let on_demand_only = provider(&[(
            "instance_types",
            r#"[{"name": "a", "cpu": 2, "memory_gib": 4, "hourly_usd": 0.05}]"#,
        )]);
        assert!(matches!(
            on_demand_only.price_hint(&spot),
            Err(Error::Unsupported(m)) if m.contains("spot")
        ));
        assert_eq!(CloudInit::NAME, "cloud-init");
    }
}
