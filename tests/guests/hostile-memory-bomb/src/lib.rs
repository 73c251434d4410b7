//! Attack: allocate (and touch) memory without end, to exhaust the host.

use hostile_kit::prelude::*;

hostile_kit::hostile!(
    |_owner: &str, _req: &ProvisionRequest| -> Result<NodeHandle> {
        let mut hoard: Vec<Vec<u8>> = Vec::new();
        loop {
            hoard.push(vec![0xA5; 1 << 20]);
            std::hint::black_box(&hoard);
        }
    }
);
