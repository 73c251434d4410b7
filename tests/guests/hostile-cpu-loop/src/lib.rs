//! Attack: spin forever, to take a host thread for good.

use hostile_kit::prelude::*;

hostile_kit::hostile!(
    |_owner: &str, _req: &ProvisionRequest| -> Result<NodeHandle> {
        let mut x: u64 = 0;
        loop {
            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1));
        }
    }
);
