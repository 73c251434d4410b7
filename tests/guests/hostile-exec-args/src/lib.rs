//! Attack: run a program granted with the argument pattern `["hello", "*"]`
//! (`[config] program`, such as `/bin/echo`) with arguments outside that
//! pattern. Each outcome is a label.

use hostile_kit::prelude::*;

const ARGS: &[&[&str]] = &[
    &[],
    &["hello"],
    &["bye", "x"],
    &["hello", "x", "y"],
    &["hello", "x", "--help"],
    &["x", "hello"],
    &["hello x"],
    &["--version"],
    &["hello", "x", ""],
];

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let program = cfg("program")?;
        let mut labels = Labels::new();
        for args in ARGS {
            let outcome = match Command::new(&program).args(args.iter().copied()).run() {
                Ok(out) => format!("ran: {}", out.stdout_text()),
                Err(e) => format!("{:?}", Error::from(e)),
            };
            labels.insert(format!("try {args:?}"), outcome);
        }
        Ok(node(req, labels))
    }
);
