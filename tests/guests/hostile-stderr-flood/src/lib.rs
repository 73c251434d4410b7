//! Attack: write `[config] mib` (default 64) MiB to stderr in one call,
//! hoping the host keeps it all in memory. The host keeps a bounded tail.

use std::io::Write;

use hostile_kit::prelude::*;

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let mib: usize = cfg_or("mib", 64)?;
        let line = [b'E'; 64 << 10];
        let mut stderr = std::io::stderr().lock();
        let mut written = 0usize;
        for _ in 0..mib * 16 {
            if stderr.write_all(&line).is_err() {
                break;
            }
            written += line.len();
        }
        let _ = stderr.write_all(b"\nlast words of the stderr flood\n");
        Ok(observed(req, &[("written", &written.to_string())]))
    }
);
