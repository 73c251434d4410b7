//! Attack: recurse without end, to overflow the stack into the host.

use hostile_kit::prelude::*;

fn down(depth: u64, pad: [u64; 8]) -> u64 {
    if std::hint::black_box(depth) == u64::MAX {
        return 0;
    }
    let next = std::hint::black_box([depth; 8]);
    std::hint::black_box(down(depth + 1, next)) + pad[usize::try_from(depth % 8).unwrap_or(0)]
}

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let depth = down(0, [0; 8]);
        Ok(observed(
            req,
            &[("observed", &format!("returned from depth {depth}"))],
        ))
    }
);
