//! Attack: read a response body that never ends (`[config] url`), hoping
//! the host buffers it all. The host's size cap must cut it off.

use hostile_kit::prelude::*;

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let resp = Request::get(cfg("url")?).send()?;
        Ok(observed(
            req,
            &[("observed", &format!("read {} bytes", resp.body.len()))],
        ))
    }
);
