//! Attack: run a program no grant names (`[config] program`, such as
//! `/bin/sh`), with a payload that would prove it ran.

use hostile_kit::prelude::*;

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let out = Command::new(cfg("program")?)
            .args(["-c", "id; cat /etc/passwd"])
            .run()?;
        Ok(observed(
            req,
            &[("observed", &format!("ran: {}", out.stdout_text()))],
        ))
    }
);
