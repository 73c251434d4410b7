//! Provider ids a cloud spells as decimal numbers (Hetzner servers,
//! DigitalOcean droplets, Linode instances, and the networks, floating IPs
//! and load balancers beside them), read one strict way.
//!
//! A cloud's API reads `+7`, `07` or ` 7` as node 7, and Rust's
//! `str::parse::<u64>` takes `+7` too. If a plugin read such a spelling as
//! node 7 in one call and as "no such node" in another, a caller could be
//! told a node is gone (a terminate answering `not_found`, which the
//! contract takes as success) while it keeps running, and then forget it.
//! So there is one spelling: [`numeric_id`] accepts decimal digits only,
//! with no sign, no leading zero, no whitespace, fitting a `u64`; anything
//! else is [`Error::Unsupported`] — deliberately *not* `not_found`, so no
//! caller reads a misspelt id as a node already gone.
//!
//! ```
//! use wasmprov_guest::ids::numeric_id;
//! use wasmprov_guest::Error;
//!
//! assert_eq!(numeric_id("server", "1000007").unwrap(), 1_000_007);
//! assert_eq!(numeric_id("server", "0").unwrap(), 0);
//! for bad in ["", "+1000007", "01000007", " 1000007", "1000007 ", "-1", "1e3", "18446744073709551616"] {
//!     assert!(matches!(numeric_id("server", bad), Err(Error::Unsupported(_))), "{bad:?}");
//! }
//! ```

use crate::{Error, Result};

/// The number a canonical decimal id spells: ASCII digits only, no sign,
/// no leading zero (`0` itself is fine), no whitespace, at most
/// `u64::MAX`. `what` names the id in the error (`"server"`, `"network"`).
///
/// # Errors
/// [`Error::Unsupported`] for any other spelling, never `not_found` (see
/// the [module docs](self)).
pub fn numeric_id(what: &str, id: &str) -> Result<u64> {
    let b = id.as_bytes();
    let canonical =
        !b.is_empty() && b.iter().all(u8::is_ascii_digit) && (b[0] != b'0' || b.len() == 1);
    let parsed = if canonical {
        id.parse::<u64>().ok()
    } else {
        None
    };
    parsed.ok_or_else(|| {
        let shown: String = id.chars().take(40).collect();
        Error::Unsupported(format!(
            "{what} id {shown:?} is not a canonical numeric id: use decimal digits only \
             (no sign, no leading zero, no whitespace), for example \"1000007\""
        ))
    })
}
