//! Attack: set environment variables no grant names (`LD_PRELOAD`,
//! `PATH`, `BASH_ENV`) on a granted `env` (`[config] program`, such as
//! `/usr/bin/env`), and read the environment it sees (it must be empty:
//! nothing is inherited).

use hostile_kit::prelude::*;

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let program = cfg("program")?;
        let mut labels = Labels::new();
        for (k, v) in [
            ("LD_PRELOAD", "/tmp/x.so"),
            ("PATH", "/tmp"),
            ("BASH_ENV", "/tmp/x.sh"),
        ] {
            let outcome = match Command::new(&program).env(k, v).run() {
                Ok(out) => format!("ran: {}", out.stdout_text()),
                Err(e) => format!("{:?}", Error::from(e)),
            };
            labels.insert(format!("try {k}"), outcome);
        }
        let out = Command::new(&program).run()?;
        labels.insert("env stdout".into(), out.stdout_text());
        Ok(node(req, labels))
    }
);
