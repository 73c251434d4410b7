//! The subprocess baseline: the Hetzner plugin's pricing code behind a
//! line-delimited JSON protocol on stdin/stdout (one `NodeShape` per line
//! in, one `PriceHint` or `null` per line out).

use std::io::{BufRead, Write};

use wasmprov_api::NodeShape;
use wasmprov_plugin_hetzner::Hetzner;
use wasmprov_plugin_hetzner::settings::Settings;

/// Answers shapes on stdin until it closes.
pub fn serve() -> std::io::Result<()> {
    let plugin = Hetzner::with_settings(Settings::default());
    let stdin = std::io::stdin().lock();
    let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
    for line in stdin.lines() {
        let line = line?;
        let answer = match serde_json::from_str::<NodeShape>(&line) {
            Ok(shape) => match plugin.estimate(&shape) {
                Ok(hint) => serde_json::to_string(&hint).unwrap_or_else(|_| "null".into()),
                Err(_) => "null".into(),
            },
            Err(_) => "null".into(),
        };
        stdout.write_all(answer.as_bytes())?;
        stdout.write_all(b"\n")?;
        stdout.flush()?;
    }
    Ok(())
}
