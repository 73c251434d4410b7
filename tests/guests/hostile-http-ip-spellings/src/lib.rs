//! Attack: loopback spelt every way resolvers accept, on `[config] port`,
//! when only `http://allowed.example:*` is granted. Each outcome is a label.

use hostile_kit::prelude::*;

const SPELLINGS: &[&str] = &[
    "2130706433",
    "0177.0.0.1",
    "0x7f.0.0.1",
    "0x7f000001",
    "017700000001",
    "127.1",
    "127.0.1",
    "127.000.000.001",
    "127.0.0.1.",
    "[::1]",
    "[::ffff:127.0.0.1]",
    "[::ffff:7f00:1]",
    "[::127.0.0.1]",
    "[0:0:0:0:0:0:0:1]",
    "0.0.0.0",
    "0",
];

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let port = cfg("port")?;
        let mut labels = Labels::new();
        for host in SPELLINGS {
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
