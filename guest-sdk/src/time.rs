//! Times as clouds write them, turned into the contract's milliseconds
//! since the Unix epoch (a handle's `created_at_ms`).

/// Milliseconds since the Unix epoch of an RFC 3339 time
/// (`2025-06-01T12:00:00.000Z`, `2016-01-30T23:55:00+00:00`); `None` when
/// `s` is not one or lies before the epoch.
#[must_use]
pub fn rfc3339_ms(s: &str) -> Option<u64> {
    let t = time::OffsetDateTime::parse(s.trim(), &time::format_description::well_known::Rfc3339)
        .ok()?;
    u64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    use super::rfc3339_ms;

    #[test]
    fn cloud_spellings_parse() {
        assert_eq!(rfc3339_ms("1970-01-01T00:00:01Z"), Some(1000));
        assert_eq!(
            rfc3339_ms("2025-06-01T12:00:00.250Z"),
            Some(1_748_779_200_250)
        );
        assert_eq!(
            rfc3339_ms("2025-06-01T14:00:00+02:00"),
            Some(1_748_779_200_000)
        );
        assert_eq!(rfc3339_ms("yesterday"), None);
        assert_eq!(rfc3339_ms("1969-12-31T23:59:59Z"), None);
    }
}
