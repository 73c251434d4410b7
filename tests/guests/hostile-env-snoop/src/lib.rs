//! Attack: read the host's environment (tokens often live there), the
//! command line and the working directory, through `std` and straight
//! through `wasi:cli/environment`. All must be empty.

use hostile_kit::prelude::*;
use wasip2::cli::environment;

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let vars: Vec<String> = std::env::vars().map(|(k, _)| k).collect();
        let raw: Vec<String> = environment::get_environment()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        Ok(observed(
            req,
            &[
                ("std vars", &format!("{vars:?}")),
                (
                    "std args",
                    &format!("{:?}", std::env::args().collect::<Vec<_>>()),
                ),
                (
                    "std HOME",
                    &std::env::var("HOME").unwrap_or_else(|_| "<unset>".into()),
                ),
                ("wasi environment", &format!("{raw:?}")),
                (
                    "wasi arguments",
                    &format!("{:?}", environment::get_arguments()),
                ),
                ("wasi cwd", &format!("{:?}", environment::initial_cwd())),
            ],
        ))
    }
);
