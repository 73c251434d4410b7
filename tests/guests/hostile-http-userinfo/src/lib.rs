//! Attack: user information in the authority, hoping a check reads the
//! granted name before `@` while the connection goes to the host after it
//! (`[config] port` is the loopback server's). Each outcome is a label.

use hostile_kit::prelude::*;

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let port = cfg("port")?;
        let mut labels = Labels::new();
        for authority in [
            format!("allowed.example@127.0.0.1:{port}"),
            format!("allowed.example:80@127.0.0.1:{port}"),
            format!("user:pass@127.0.0.1:{port}"),
            format!("127.0.0.1:{port}@allowed.example"),
        ] {
            let url = format!("http://{authority}/");
            let outcome = match Request::get(&url).send() {
                Ok(resp) => format!("reached: status {}", resp.status),
                Err(e) => format!("{:?}", Error::from(e)),
            };
            labels.insert(format!("try {url}"), outcome);
        }
        Ok(node(req, labels))
    }
);
