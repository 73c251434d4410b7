//! Attack: go past a limit the host (wasmtime) enforces rather than the
//! guest's own memory: `[config] attack` is `random` (ask for 256 MiB of
//! random bytes in one call) or `headers` (append 100 000 distinct headers
//! to one `fields`). The call must fail as a resource limit, not as a
//! broken contract.

use hostile_kit::prelude::*;
use wasip2::http::types::Fields;

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let attack = cfg("attack")?;
        let mut held = 0usize;
        match attack.as_str() {
            "random" => {
                held = wasip2::random::random::get_random_bytes(256 << 20).len();
            }
            "headers" => {
                let fields = Fields::new();
                for i in 0..100_000 {
                    if fields.append(&format!("x-h{i}"), b"v").is_err() {
                        break;
                    }
                    held += 1;
                }
            }
            other => return Err(Error::InvalidConfig(format!("unknown attack {other}"))),
        }
        Ok(observed(req, &[("held", &held.to_string())]))
    }
);
