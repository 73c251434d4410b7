//! Attack: HTTP to a host no grant covers (`[config] url`). The host must
//! deny it before any connection; the SDK reports the denial as an error.

use hostile_kit::prelude::*;

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let resp = Request::get(cfg("url")?)
            .header("x-probe", "hostile")
            .send()?;
        Ok(observed(
            req,
            &[("observed", &format!("reached: status {}", resp.status))],
        ))
    }
);
