//! Attack: a granted server answers with a redirect to a denied host
//! (`[config] url`). The host must not follow it; the guest follows the
//! `Location` itself, and that request must be denied like any other.

use hostile_kit::prelude::*;

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let first = Request::get(cfg("url")?).send()?;
        let location = first.header("location").unwrap_or("").to_string();
        let follow = if location.is_empty() {
            "no location".to_string()
        } else {
            match Request::get(&location).send() {
                Ok(resp) => format!("reached: status {}", resp.status),
                Err(e) => format!("{:?}", Error::from(e)),
            }
        };
        Ok(observed(
            req,
            &[
                ("first status", &first.status.to_string()),
                ("location", &location),
                ("follow", &follow),
            ],
        ))
    }
);
