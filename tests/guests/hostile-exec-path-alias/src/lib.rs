//! Attack: run a granted program (`[config] program`, such as `/bin/echo`)
//! under other spellings of its path (`..`, `.`, doubled slashes,
//! `/proc/self/root`, a trailing slash, relative forms), hoping the check and
//! the kernel disagree. Each outcome is a label.

use hostile_kit::prelude::*;

/// Other spellings of `program` (an absolute path with a directory).
fn aliases(program: &str) -> Vec<String> {
    let (dir, base) = program.rsplit_once('/').unwrap_or(("", program));
    vec![
        format!("{dir}/..{dir}/{base}"),
        format!("/usr/..{program}"),
        format!("{dir}/./{base}"),
        format!("/{program}"),
        format!("{dir}//{base}"),
        format!("/proc/self/root{program}"),
        format!("{program}/"),
        format!("{program} "),
        program.to_uppercase(),
        base.to_string(),
        program.trim_start_matches('/').to_string(),
    ]
}

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let mut labels = Labels::new();
        for program in aliases(&cfg("program")?) {
            let outcome = match Command::new(&program).arg("pwned").run() {
                Ok(out) => format!("ran: {}", out.stdout_text()),
                Err(e) => format!("{:?}", Error::from(e)),
            };
            labels.insert(format!("try {program}"), outcome);
        }
        Ok(node(req, labels))
    }
);
