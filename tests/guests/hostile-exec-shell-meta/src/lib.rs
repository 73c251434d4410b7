//! Attack: shell metacharacters in the arguments of a granted `echo`
//! (`[config] program`, granted with `**`). There is no shell, so they must
//! come back literally.

use hostile_kit::prelude::*;

/// The arguments sent; the test expects them echoed verbatim.
pub const PAYLOAD: &[&str] = &[
    "hello; cat /etc/passwd",
    "$(id)",
    "`id`",
    "&& touch pwned",
    "| id",
    "> pwned",
    "$HOME",
    "*",
];

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let out = Command::new(cfg("program")?)
            .args(PAYLOAD.iter().copied())
            .run()?;
        Ok(observed(
            req,
            &[
                ("stdout", &out.stdout_text()),
                ("exit", &format!("{:?}", out.exit_code)),
            ],
        ))
    }
);
