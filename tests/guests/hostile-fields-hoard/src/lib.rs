//! Attack: make the host hold memory that the guest's memory limit does not
//! count. Each `wasi:http` `fields` resource lives in the host; the guest
//! creates `[config] count` (default 8192) of them and fills each with
//! `[config] kib` (default 120) KiB of header value from one small buffer,
//! keeping them all alive. Reports how many the host accepted.

use hostile_kit::prelude::*;
use wasip2::http::types::Fields;

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let count: usize = cfg_or("count", 8192)?;
        let kib: usize = cfg_or("kib", 120)?;
        let value = vec![b'h'; kib << 10];
        let mut held = Vec::with_capacity(count);
        let mut refused = String::from("none");
        for _ in 0..count {
            let fields = Fields::new();
            if let Err(e) = fields.append("x-hoard", &value) {
                refused = format!("{e:?}");
                break;
            }
            held.push(fields);
        }
        let held_bytes = held.len() * value.len();
        Ok(observed(
            req,
            &[
                ("held", &held.len().to_string()),
                ("held bytes", &held_bytes.to_string()),
                ("refused", &refused),
            ],
        ))
    }
);
