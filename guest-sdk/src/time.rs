//! Times as clouds write them, turned into the contract's milliseconds
//! since the Unix epoch (a handle's `created_at_ms`): RFC 3339 with an
//! offset or `Z` ([`rfc3339_ms`]), naive UTC as Linode writes it
//! ([`naive_utc_ms`]), epoch seconds ([`epoch_seconds_ms`]), or whichever
//! of them a string is ([`any_ms`]).
//!
//! ```
//! use wasmprov_guest::time;
//! assert_eq!(time::any_ms("2018-01-01T00:01:01"), Some(1_514_764_861_000));
//! assert_eq!(time::any_ms("2018-01-01T00:01:01Z"), Some(1_514_764_861_000));
//! assert_eq!(time::any_ms("1514764861"), Some(1_514_764_861_000));
//! ```

/// Milliseconds since the Unix epoch of an RFC 3339 time
/// (`2025-06-01T12:00:00.000Z`, `2016-01-30T23:55:00+00:00`); `None` when
/// `s` is not one or lies before the epoch.
#[must_use]
pub fn rfc3339_ms(s: &str) -> Option<u64> {
    let t = time::OffsetDateTime::parse(s.trim(), &time::format_description::well_known::Rfc3339)
        .ok()?;
    u64::try_from(t.unix_timestamp_nanos() / 1_000_000).ok()
}

/// Milliseconds since the Unix epoch of a UTC time written without an
/// offset (`2018-01-01T00:01:01`, `2018-01-01T00:01:01.5`, or with a space
/// for the `T`); `None` when `s` is not one.
#[must_use]
pub fn naive_utc_ms(s: &str) -> Option<u64> {
    let s = s.trim();
    let (date, clock) = s.split_once(['T', ' '])?;
    if clock.contains(['Z', 'z', '+']) || clock.contains('-') {
        return None;
    }
    rfc3339_ms(&format!("{date}T{clock}Z"))
}

/// Milliseconds of a count of seconds since the Unix epoch, as text
/// (`"1514764861"`, `"1514764861.25"`); `None` when it is not one.
#[must_use]
pub fn epoch_seconds_ms(s: &str) -> Option<u64> {
    let s = s.trim();
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let ms: u64 = format!("{frac:0<3}").get(..3)?.parse().ok()?;
    whole
        .parse::<u64>()
        .ok()?
        .checked_mul(1000)?
        .checked_add(ms)
}

/// Milliseconds since the Unix epoch of any of the forms clouds write:
/// RFC 3339, naive UTC, or epoch seconds.
#[must_use]
pub fn any_ms(s: &str) -> Option<u64> {
    rfc3339_ms(s)
        .or_else(|| naive_utc_ms(s))
        .or_else(|| epoch_seconds_ms(s))
}

#[cfg(test)]
mod tests {
    use super::{any_ms, epoch_seconds_ms, naive_utc_ms, rfc3339_ms};

    #[test]
    fn naive_and_epoch_forms_parse() {
        assert_eq!(naive_utc_ms("1970-01-01T00:00:01"), Some(1000));
        assert_eq!(naive_utc_ms("1970-01-01 00:00:01.25"), Some(1250));
        assert_eq!(naive_utc_ms("1970-01-01T00:00:01Z"), None);
        assert_eq!(naive_utc_ms("1970-01-01T00:00:01+02:00"), None);
        assert_eq!(naive_utc_ms("soon"), None);
        assert_eq!(epoch_seconds_ms("12"), Some(12_000));
        assert_eq!(epoch_seconds_ms("12.5"), Some(12_500));
        assert_eq!(epoch_seconds_ms("-1"), None);
        assert_eq!(epoch_seconds_ms("1e3"), None);
        assert_eq!(any_ms("2016-01-30T23:55:00+00:00"), Some(1_454_198_100_000));
        assert_eq!(any_ms("2016-01-30T23:55:00"), Some(1_454_198_100_000));
        assert_eq!(any_ms("1454198100"), Some(1_454_198_100_000));
        assert_eq!(any_ms(""), None);
    }

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
