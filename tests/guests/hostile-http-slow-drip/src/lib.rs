//! Attack: wait on a response that trickles in one byte at a time, or whose
//! headers never come (`[config] url`), to hold the call and a connection
//! forever. The host's request deadline must end it.

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
