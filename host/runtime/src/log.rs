//! Guest log records become host `tracing` events tagged with the plugin's
//! name. Secret values are redacted from messages and fields, control
//! characters shown escaped, and records capped in size so a plugin cannot
//! flood (or paint) the host's log with one call.

use crate::bindings::v03::log::{Host, Level};
use crate::state::CallState;

const MAX_MESSAGE: usize = 4096;
const MAX_FIELDS: usize = 32;
/// Records per call; further ones are counted and dropped.
const MAX_RECORDS_PER_CALL: u32 = 1000;

/// Secret values shorter than this are not redacted: too short to tell
/// from ordinary text, replacing them would garble every message (and, by
/// the pattern of what was replaced, show the value).
const MIN_REDACTED: usize = 4;

/// Replaces every secret value in `text` with `[redacted]` (the longest
/// first, so one that contains another goes whole), and caps its length.
pub(crate) fn redact(secrets: &[String], text: &str) -> String {
    let mut out = text.to_string();
    let mut by_length: Vec<&String> = secrets
        .iter()
        .filter(|s| s.chars().count() >= MIN_REDACTED)
        .collect();
    by_length.sort_by_key(|s| std::cmp::Reverse(s.len()));
    for s in by_length {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), "[redacted]");
        }
    }
    if out.len() > MAX_MESSAGE {
        let mut cut = MAX_MESSAGE;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push('…');
    }
    out
}

impl Host for CallState {
    fn log(
        &mut self,
        level: Level,
        message: String,
        fields: Vec<(String, String)>,
    ) -> wasmtime::Result<()> {
        self.log_records += 1;
        if self.log_records > MAX_RECORDS_PER_CALL {
            return Ok(());
        }
        // A record no subscriber takes is not redacted and formatted.
        let enabled = match level {
            Level::Trace => tracing::enabled!(target: "wasmprov::plugin", tracing::Level::TRACE),
            Level::Debug => tracing::enabled!(target: "wasmprov::plugin", tracing::Level::DEBUG),
            Level::Info => tracing::enabled!(target: "wasmprov::plugin", tracing::Level::INFO),
            Level::Warn => tracing::enabled!(target: "wasmprov::plugin", tracing::Level::WARN),
            Level::Error => tracing::enabled!(target: "wasmprov::plugin", tracing::Level::ERROR),
        };
        if !enabled {
            return Ok(());
        }
        let secrets = &self.secrets.redact;
        let plugin = self.plugin.manifest.name.as_str();
        // Redacted, then shown escaped: a log line never carries a plugin's
        // control characters to a terminal (wasmprov_policy::text).
        let shown = |t: &str| wasmprov_policy::text::line(&redact(secrets, t)).into_owned();
        let message = shown(&message);
        let fields: Vec<String> = fields
            .iter()
            .take(MAX_FIELDS)
            .map(|(k, v)| format!("{}={}", shown(k), shown(v)))
            .collect();
        let fields = fields.join(" ");
        match level {
            Level::Trace => {
                tracing::trace!(target: "wasmprov::plugin", plugin, %fields, "{message}")
            }
            Level::Debug => {
                tracing::debug!(target: "wasmprov::plugin", plugin, %fields, "{message}")
            }
            Level::Info => tracing::info!(target: "wasmprov::plugin", plugin, %fields, "{message}"),
            Level::Warn => tracing::warn!(target: "wasmprov::plugin", plugin, %fields, "{message}"),
            Level::Error => {
                tracing::error!(target: "wasmprov::plugin", plugin, %fields, "{message}")
            }
        }
        Ok(())
    }
}

impl crate::bindings::v03::types::Host for CallState {}

#[cfg(test)]
mod tests {
    #[test]
    fn secrets_are_redacted_and_long_text_capped() {
        let secrets = vec!["s3cr3t-token".to_string()];
        assert_eq!(
            super::redact(&secrets, "auth with s3cr3t-token failed (s3cr3t-token)"),
            "auth with [redacted] failed ([redacted])"
        );
        let long = "é".repeat(5000);
        assert!(super::redact(&[], &long).len() <= super::MAX_MESSAGE + 3);
        // A one-character "secret" does not garble every message; a secret
        // containing another is redacted whole.
        let short = vec!["x".to_string(), "tok".to_string()];
        assert_eq!(super::redact(&short, "image x86_64"), "image x86_64");
        let nested = vec!["abcd".to_string(), "abcdefgh".to_string()];
        assert_eq!(super::redact(&nested, "k=abcdefgh"), "k=[redacted]");
    }
}
