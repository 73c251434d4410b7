//! Attack: run a granted program that writes without end (`[config]
//! program`, such as `/usr/bin/yes`), hoping the host buffers all of it.

use hostile_kit::prelude::*;

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let out = Command::new(cfg("program")?).run()?;
        Ok(observed(
            req,
            &[("observed", &format!("read {} bytes", out.stdout.len()))],
        ))
    }
);
