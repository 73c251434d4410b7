//! Attack: run a granted script (`[config] program`) that starts many
//! children and then runs past its time limit, hoping the children outlive
//! the kill.

use hostile_kit::prelude::*;

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let out = Command::new(cfg("program")?).run()?;
        Ok(observed(
            req,
            &[("observed", &format!("finished: {:?}", out.exit_code))],
        ))
    }
);
