//! Attack: the grant names `localhost` (`http://localhost:*`); the name
//! resolves to loopback, which a name grant may never reach. Tries several
//! spellings of the name against `[config] port`; each outcome is a label.

use hostile_kit::prelude::*;

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let port = cfg("port")?;
        let mut labels = Labels::new();
        for host in ["localhost", "LOCALHOST", "localhost."] {
            let url = format!("http://{host}:{port}/");
            let outcome = match Request::get(&url).send() {
                Ok(resp) => format!("reached: status {}", resp.status),
                Err(e) => format!("{:?}", Error::from(e)),
            };
            labels.insert(format!("try {url}"), outcome);
        }
        Ok(node(req, labels))
    }
);
