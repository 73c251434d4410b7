//! Log records, delivered to the host's log tagged with the plugin's name
//! (natively, in a plugin's unit tests, written to standard error).

#[cfg(target_arch = "wasm32")]
use crate::wit::wasmprov::provisioner0_3_0::log as wit_log;
use crate::wit::wasmprov::provisioner0_3_0::log::Level;

fn emit(level: Level, message: &str, fields: &[(&str, &str)]) {
    // Natively (a plugin's unit tests) there is no host: standard error.
    #[cfg(not(target_arch = "wasm32"))]
    {
        let level = match level {
            Level::Trace => "TRACE",
            Level::Debug => "DEBUG",
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Error => "ERROR",
        };
        eprintln!("{level} {message} {fields:?}");
    }
    #[cfg(target_arch = "wasm32")]
    let fields: Vec<(String, String)> = fields
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    #[cfg(target_arch = "wasm32")]
    wit_log::log(level, message, &fields);
}

/// A record with structured fields at `info` level.
pub fn info_with(message: &str, fields: &[(&str, &str)]) {
    emit(Level::Info, message, fields);
}

/// A `trace` record.
pub fn trace(message: &str) {
    emit(Level::Trace, message, &[]);
}

/// A `debug` record.
pub fn debug(message: &str) {
    emit(Level::Debug, message, &[]);
}

/// An `info` record.
pub fn info(message: &str) {
    emit(Level::Info, message, &[]);
}

/// A `warn` record.
pub fn warn(message: &str) {
    emit(Level::Warn, message, &[]);
}

/// An `error` record.
pub fn error(message: &str) {
    emit(Level::Error, message, &[]);
}
