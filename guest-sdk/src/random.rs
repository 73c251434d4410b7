//! Random secrets from the host's `wasi:random` (natively, the operating
//! system's random source, for a plugin's unit tests): bytes, and
//! passwords for clouds that want one at create (Linode's `root_pass`).
//!
//! ```
//! let p = wasmprov_guest::random::password(32);
//! assert_eq!(p.len(), 32);
//! assert!(p.chars().any(|c| c.is_ascii_uppercase()) && p.chars().any(|c| c.is_ascii_digit()));
//! ```

/// `len` cryptographically secure random bytes.
#[must_use]
pub fn bytes(len: usize) -> Vec<u8> {
    #[cfg(target_arch = "wasm32")]
    {
        wasip2::random::random::get_random_bytes(len as u64)
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use std::io::Read as _;
        let mut out = vec![0; len];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut out))
            .expect("the operating system's random source is readable");
        out
    }
}

const LOWER: &[u8] = b"abcdefghijkmnopqrstuvwxyz";
const UPPER: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ";
const DIGIT: &[u8] = b"23456789";
const SYMBOL: &[u8] = b"-_.+=@#%";

/// A password of `len` characters (at least 8), with lowercase and
/// uppercase letters, digits and symbols (`-_.+=@#%`, which no shell, URL
/// or JSON treats specially), each class at least once: what clouds'
/// password rules ask. Uniform over its alphabet (rejection sampling).
#[must_use]
pub fn password(len: usize) -> String {
    password_from(len.max(8), bytes)
}

/// [`password`] with the random bytes from `source` (for tests).
#[must_use]
pub fn password_from(len: usize, mut source: impl FnMut(usize) -> Vec<u8>) -> String {
    let all: Vec<u8> = [LOWER, UPPER, DIGIT, SYMBOL].concat();
    let mut pick = |set: &[u8]| loop {
        // Bytes below the largest multiple of the set's size: no bias.
        let limit = 256 - 256 % set.len();
        if let Some(b) = source(16).into_iter().find(|b| usize::from(*b) < limit) {
            return char::from(set[usize::from(b) % set.len()]);
        }
    };
    let mut out: Vec<char> = [LOWER, UPPER, DIGIT, SYMBOL]
        .iter()
        .map(|set| pick(set))
        .collect();
    while out.len() < len {
        out.push(pick(&all));
    }
    // The four classes at random places, not always first.
    for i in (1..out.len()).rev() {
        let j = loop {
            let limit = 256 - 256 % (i + 1).min(256);
            if let Some(b) = source(16).into_iter().find(|b| usize::from(*b) < limit) {
                break usize::from(b) % (i + 1);
            }
        };
        out.swap(i, j);
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_have_every_class_and_differ() {
        let classes = [LOWER, UPPER, DIGIT, SYMBOL];
        let mut seen = std::collections::BTreeSet::new();
        for len in [1, 8, 32, 128] {
            let p = password(len);
            assert_eq!(p.len(), len.max(8));
            for set in classes {
                assert!(p.bytes().any(|b| set.contains(&b)), "{p}");
            }
            assert!(seen.insert(p));
        }
        // A source that gives the same byte every time still ends.
        let p = password_from(12, |n| vec![7; n]);
        assert_eq!(p.len(), 12);
        assert_ne!(bytes(16), bytes(16));
    }
}
