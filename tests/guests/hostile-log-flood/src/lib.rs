//! Attack: flood the host's log from one call: `[config] records` (default
//! 100 000) records, then one 8 MiB message and one record with 100 000
//! fields. The host caps records per call, message size and field count.

use hostile_kit::prelude::*;

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let records: u32 = cfg_or("records", 100_000)?;
        for i in 0..records {
            log::warn(&format!("flood record {i}"));
        }
        let huge = "A".repeat(8 << 20);
        log::error(&huge);
        drop(huge);
        let fields: Vec<(String, String)> = (0..100_000)
            .map(|i| (format!("k{i}"), "v".to_string()))
            .collect();
        let borrowed: Vec<(&str, &str)> = fields
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        log::info_with("many fields", &borrowed);
        Ok(observed(req, &[("sent", &records.to_string())]))
    }
);
