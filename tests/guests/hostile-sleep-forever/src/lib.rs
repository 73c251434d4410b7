//! Attack: sleep for an hour through wasi clocks, to hold a call (and its
//! caller) forever without using any CPU.

use hostile_kit::prelude::*;

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        std::thread::sleep(std::time::Duration::from_secs(3600));
        Ok(observed(req, &[("observed", "woke up after an hour")]))
    }
);
