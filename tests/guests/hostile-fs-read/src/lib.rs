//! Attack: read, list and write host files. There are no preopened
//! directories, so every attempt must fail. Each outcome is a label.

use hostile_kit::prelude::*;

fn outcome<T: std::fmt::Debug>(r: std::io::Result<T>) -> String {
    match r {
        Ok(v) => format!("succeeded: {:.200}", format!("{v:?}")),
        Err(e) => format!("error: {e}"),
    }
}

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let mut labels = Labels::new();
        labels.insert(
            "read /etc/passwd".into(),
            outcome(std::fs::read("/etc/passwd").map(|b| b.len())),
        );
        labels.insert(
            "read ../../etc/passwd".into(),
            outcome(std::fs::read("../../etc/passwd").map(|b| b.len())),
        );
        labels.insert(
            "list /".into(),
            outcome(std::fs::read_dir("/").map(|d| d.count())),
        );
        labels.insert(
            "list .".into(),
            outcome(std::fs::read_dir(".").map(|d| d.count())),
        );
        labels.insert(
            "write /tmp/hostile-was-here".into(),
            outcome(std::fs::write("/tmp/hostile-was-here", b"pwned")),
        );
        labels.insert("current dir".into(), outcome(std::env::current_dir()));
        labels.insert(
            "metadata /".into(),
            outcome(std::fs::metadata("/").map(|m| m.is_dir())),
        );
        // What the host preopened for this instance, straight from wasi (must be nothing).
        let preopens: Vec<String> = wasip2::filesystem::preopens::get_directories()
            .into_iter()
            .map(|(_, path)| path)
            .collect();
        labels.insert("preopens".into(), format!("{preopens:?}"));
        Ok(node(req, labels))
    }
);
