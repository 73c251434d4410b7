//! Attack: read another plugin's configuration and secrets (`[config]
//! victim_key` names a key only another plugin has), and enumerate the
//! whole store with `wasi:config/store.get-all`. Only this plugin's own keys
//! may show.

use hostile_kit::prelude::*;
use wasmprov_guest::wit::wasi::config::store;

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let victim_key = cfg("victim_key")?;
        let mut labels = Labels::new();
        labels.insert(
            "victim value".into(),
            match store::get(&victim_key) {
                Ok(Some(v)) => format!("leaked: {v}"),
                Ok(None) => "absent".into(),
                Err(e) => format!("error: {e:?}"),
            },
        );
        labels.insert(
            "all keys".into(),
            match store::get_all() {
                Ok(all) => {
                    let mut keys: Vec<String> = all.into_iter().map(|(k, _)| k).collect();
                    keys.sort();
                    keys.join(",")
                }
                Err(e) => format!("error: {e:?}"),
            },
        );
        // Keys that commonly hold other plugins' or the host's secrets.
        for key in [
            "token",
            "HCLOUD_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "../victim/secret_b",
        ] {
            labels.insert(
                format!("get {key}"),
                match store::get(key) {
                    Ok(Some(v)) => format!("leaked: {v}"),
                    Ok(None) => "absent".into(),
                    Err(e) => format!("error: {e:?}"),
                },
            );
        }
        Ok(node(req, labels))
    }
);
