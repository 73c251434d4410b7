//! Who made a node: the labels that tie a node in a cloud to the host and
//! the journal entry that made it, so that the cloud itself is the witness
//! of which journal made a node and when.
//!
//! - [`OWNER_LABEL`] carries the host's owner id (the id itself, see
//!   [`crate::ids`]). A node without it, or with another owner, is not the
//!   host's: [`owned_by`] is the one test, applied at the host boundary to
//!   every node a backend returns from `describe` or `get`.
//! - [`JOURNAL_LABEL`] carries a [`Provenance`]: the identity of the journal
//!   that recorded the intent (drawn once, when the journal was created) and
//!   the generation the intent was recorded under (monotonic within that
//!   journal). Written compactly, `<journal>-<generation>` with the
//!   generation in base 36, it is at most 27 characters of `[a-z0-9-]`, so a
//!   label value, a DigitalOcean or Linode tag (`wasmprov-journal:` and the
//!   value: 44 characters) and every other common cloud's tag store it
//!   unchanged.
//!
//! A host's fleet puts both labels on every shape it asks for, so that any
//! backend that keeps a shape's labels on its nodes (every plugin built on
//! the guest SDK, and native backends that keep labels) makes nodes that
//! say where they came from. The guest SDK leaves them out of the request
//! digest: a request is the same request whichever journal asks for it.
//!
//! ```
//! use wasmprov_api::provenance::{Provenance, JOURNAL_LABEL};
//!
//! let p = Provenance { journal: "k7m2q4x6b3c5d".into(), generation: 1_764_000_000_123_456 };
//! let value = p.label_value();
//! assert_eq!(value, "k7m2q4x6b3c5d-hdaaeuxydc");
//! assert_eq!(Provenance::parse(&value), Some(p));
//! assert!(value.len() + JOURNAL_LABEL.len() + 1 <= 50);
//! for bad in ["", "k7m2q4x6b3c5d", "k7m2q4x6b3c5d-", "K7M2Q4X9B3C5D-1", "k7m2q4x6b3c5d-01", "short-1"] {
//!     assert_eq!(Provenance::parse(bad), None, "{bad:?}");
//! }
//! ```

use crate::NodeHandle;

pub use crate::canonical::{label_fault, reads_as_reserved};

/// The label carrying the owner id of the host that created the node.
pub const OWNER_LABEL: &str = "wasmprov-owner";
/// The label carrying the node's [`Provenance`].
pub const JOURNAL_LABEL: &str = "wasmprov-journal";
/// Characters of a journal identity.
pub const JOURNAL_ID_LEN: usize = 13;
/// The alphabet of a journal identity (RFC 4648 base 32, lowercase).
const ID_ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// Which journal recorded the intent a node was made for, and under which
/// generation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Provenance {
    /// The journal's identity: [`JOURNAL_ID_LEN`] characters of `[a-z2-7]`.
    pub journal: String,
    /// The generation the intent was recorded under.
    pub generation: u64,
}

impl Provenance {
    /// The label value: `<journal>-<generation in base 36>`.
    #[must_use]
    pub fn label_value(&self) -> String {
        format!("{}-{}", self.journal, base36(self.generation))
    }

    /// The provenance a label value stands for; `None` for anything
    /// [`label_value`](Self::label_value) does not write (so a value someone
    /// else wrote that merely looks alike is not misread).
    #[must_use]
    pub fn parse(value: &str) -> Option<Self> {
        let (journal, generation) = value.split_once('-')?;
        if !is_journal_id(journal) {
            return None;
        }
        let generation = parse_base36(generation)?;
        Some(Self {
            journal: journal.to_string(),
            generation,
        })
    }

    /// The provenance a node's labels carry, when it has a well-formed one.
    #[must_use]
    pub fn of(node: &NodeHandle) -> Option<Self> {
        node.labels.get(JOURNAL_LABEL).and_then(|v| Self::parse(v))
    }
}

impl std::fmt::Display for Provenance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "journal {} generation {}", self.journal, self.generation)
    }
}

/// Whether `id` is a journal identity: [`JOURNAL_ID_LEN`] characters of
/// `[a-z2-7]`.
#[must_use]
pub fn is_journal_id(id: &str) -> bool {
    id.len() == JOURNAL_ID_LEN && id.bytes().all(|b| ID_ALPHABET.contains(&b))
}

/// A journal identity made from 64 random bits (the caller draws them).
#[must_use]
pub fn journal_id_from(random: u64) -> String {
    (0..JOURNAL_ID_LEN)
        .map(|i| {
            let shift = 5 * i;
            let bits = if shift < 64 {
                (random >> shift) & 31
            } else {
                0
            };
            char::from(ID_ALPHABET[usize::try_from(bits).unwrap_or(0)])
        })
        .collect()
}

/// Whether `node` carries `owner` in its [`OWNER_LABEL`]: the one test of
/// whether a node a backend returned belongs to this host.
#[must_use]
pub fn owned_by(node: &NodeHandle, owner: &str) -> bool {
    node.labels.get(OWNER_LABEL).map(String::as_str) == Some(owner)
}

/// The labels a host asks a backend to put on a node (on top of the
/// shape's own): the owner, and the provenance when the request is
/// journaled.
#[must_use]
pub fn request_labels(owner: &str, provenance: Option<&Provenance>) -> Vec<(String, String)> {
    let mut out = vec![(OWNER_LABEL.to_string(), owner.to_string())];
    if let Some(p) = provenance {
        out.push((JOURNAL_LABEL.to_string(), p.label_value()));
    }
    out
}

/// The label a plugin puts on a node with the request id it was made for.
pub const REQUEST_LABEL: &str = "wasmprov-request";
/// The label a plugin built on the guest SDK puts on a node with a digest
/// of what it was requested as.
pub const REQUEST_DIGEST_LABEL: &str = "wasmprov-request-digest";

/// The label a fleet puts on the nodes of a capacity group.
pub const GROUP_LABEL: &str = "wasmprov-group";

/// Whether `key` is a label a caller's shape may not carry: the ones the
/// host and the plugins set to say who made a node and what for
/// ([`OWNER_LABEL`], [`JOURNAL_LABEL`], [`REQUEST_LABEL`],
/// [`REQUEST_DIGEST_LABEL`], [`GROUP_LABEL`]). A caller who could set them
/// could make a node look like another journal's, like this one's, or like
/// a member of a group it was not made for.
#[must_use]
pub fn is_reserved_label(key: &str) -> bool {
    is_host_label(key) || key == REQUEST_LABEL || key == REQUEST_DIGEST_LABEL || key == GROUP_LABEL
}

/// Checks the labels a caller asks `set_labels` to put on a node, as a
/// shape's labels are checked (at most [`MAX_SHAPE_LABELS`](crate::MAX_SHAPE_LABELS),
/// keys of 1 to [`MAX_LABEL_KEY`](crate::MAX_LABEL_KEY) bytes, values of at
/// most [`MAX_LABEL_VALUE`](crate::MAX_LABEL_VALUE)), and that none would
/// overwrite a reserved label ([`is_reserved_label`]). The host checks
/// every `set_labels` call with this before a backend sees it.
///
/// # Errors
/// [`ProvisionerError::InvalidConfig`](crate::ProvisionerError::InvalidConfig)
/// naming the label and the rule.
pub fn check_new_labels(labels: &crate::Labels) -> crate::Result<()> {
    use crate::{MAX_LABEL_KEY, MAX_LABEL_VALUE, MAX_SHAPE_LABELS};
    let bad = |m: String| {
        Err(crate::ProvisionerError::InvalidConfig(format!(
            "invalid labels: {m}"
        )))
    };
    if labels.len() > MAX_SHAPE_LABELS {
        return bad(format!(
            "{} labels, at most {MAX_SHAPE_LABELS} allowed",
            labels.len()
        ));
    }
    for (k, v) in labels {
        if k.is_empty() || k.len() > MAX_LABEL_KEY {
            return bad(format!(
                "label keys are 1 to {MAX_LABEL_KEY} bytes, one is {}",
                k.len()
            ));
        }
        if v.len() > MAX_LABEL_VALUE {
            return bad(format!(
                "label values are at most {MAX_LABEL_VALUE} bytes, the one of {k:?} is {}",
                v.len()
            ));
        }
        if let Some(m) = label_fault(k, v) {
            return bad(m);
        }
        if is_reserved_label(k) {
            return bad(format!(
                "{k:?} is reserved: the ownership and request labels stay as the node was made (set other keys)"
            ));
        }
    }
    Ok(())
}

/// Whether `key` is a label the host itself sets ([`OWNER_LABEL`],
/// [`JOURNAL_LABEL`]): a caller's shape may not carry it, and the guest SDK
/// leaves it out of a request's digest.
#[must_use]
pub fn is_host_label(key: &str) -> bool {
    key == OWNER_LABEL || key == JOURNAL_LABEL
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    if n == 0 {
        return "0".into();
    }
    let mut out = Vec::with_capacity(13);
    while n > 0 {
        out.push(DIGITS[usize::try_from(n % 36).unwrap_or(0)]);
        n /= 36;
    }
    out.reverse();
    String::from_utf8(out).unwrap_or_default()
}

/// Canonical base 36 only: lowercase, no leading zeros, no overflow.
fn parse_base36(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 13 || (s.len() > 1 && s.starts_with('0')) {
        return None;
    }
    let mut n: u64 = 0;
    for b in s.bytes() {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'z' => b - b'a' + 10,
            _ => return None,
        };
        n = n.checked_mul(36)?.checked_add(u64::from(d))?;
    }
    Some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_that_are_not_canonical_are_refused_for_shapes_and_relabels() {
        let refused = [
            (" wasmprov-owner", "ownerb"),
            ("wasmprov-owner ", "ownerb"),
            ("\twasmprov-request", "r"),
            ("WASMPROV-OWNER", "ownerb"),
            ("Wasmprov-Journal", "k7m2q4x6b3c5d-1"),
            ("wasmprov-journal ", "k7m2q4x6b3c5d-1"),
            ("\u{a0}wasmprov-group", "g"),
            // Full-width and compatibility spellings (NFKC) of reserved keys.
            (
                "\u{ff57}\u{ff41}\u{ff53}\u{ff4d}\u{ff50}\u{ff52}\u{ff4f}\u{ff56}-owner",
                "ownerb",
            ),
            ("\u{ff37}ASMPROV\u{ff0d}JOURNAL", "k7m2q4x6b3c5d-1"),
            (" pool", "blue"),
            ("pool ", "blue"),
            ("po\0ol", "blue"),
            ("pool", "bl\0ue"),
            ("pool", "line\nbreak"),
            ("pool", "\u{85}"),
        ];
        for (k, v) in refused {
            assert!(label_fault(k, v).is_some(), "{k:?}={v:?}");
            let labels = crate::Labels::from([(k.to_string(), v.to_string())]);
            assert!(
                matches!(
                    check_new_labels(&labels),
                    Err(crate::ProvisionerError::InvalidConfig(_))
                ),
                "{k:?}"
            );
            let mut shape = crate::NodeShape::new(1.0, 1 << 30);
            shape.labels = labels;
            assert!(
                matches!(
                    shape.validate(),
                    Err(crate::ProvisionerError::InvalidConfig(_))
                ),
                "{k:?}"
            );
        }
        for (k, v) in [
            ("pool", "blue"),
            ("pool", " spaced value "),
            ("wasmprov-owner-note", "x"),
            ("Name", "db 1"),
            (OWNER_LABEL, "host-a"),
            (GROUP_LABEL, "gpu"),
        ] {
            assert_eq!(label_fault(k, v), None, "{k:?}={v:?}");
        }
        assert_eq!(
            reads_as_reserved(" WASMPROV-REQUEST-DIGEST "),
            Some(REQUEST_DIGEST_LABEL)
        );
        assert_eq!(reads_as_reserved("wasmprov-owners"), None);
        // ASCII keys skip the NFKC pass: the answer is the one it would give.
        let slow = |key: &str| {
            use unicode_normalization::UnicodeNormalization;
            let folded = key.nfkc().collect::<String>().trim().to_lowercase();
            crate::canonical::RESERVED
                .iter()
                .copied()
                .find(|r| *r == folded)
        };
        for key in [
            "wasmprov-owner",
            "WASMPROV-OWNER",
            " wasmprov-journal\t",
            "\u{b}wasmprov-group\n",
            "Wasmprov-Request-Digest ",
            "wasmprov-request-",
            "wasmprov_owner",
            "",
            " ",
            "ｗａｓｍｐｒｏｖ-owner",
            "wasmprov\u{2010}owner",
            "wasmprov-owner\u{a0}",
        ] {
            assert_eq!(reads_as_reserved(key), slow(key), "{key:?}");
        }
        let mut reserved = crate::canonical::RESERVED.to_vec();
        reserved.sort_unstable();
        let mut ours = [
            OWNER_LABEL,
            JOURNAL_LABEL,
            REQUEST_LABEL,
            REQUEST_DIGEST_LABEL,
            GROUP_LABEL,
        ];
        ours.sort_unstable();
        assert_eq!(reserved, ours);
        assert!(reserved.iter().all(|k| is_reserved_label(k)));
    }

    #[test]
    fn values_round_trip_and_fit_small_tag_budgets() {
        for (seed, generation) in [
            (0, 0),
            (1, 1),
            (u64::MAX, u64::MAX),
            (0x1234_5678_9abc_def0, 1_764_000_000_000_000),
        ] {
            let p = Provenance {
                journal: journal_id_from(seed),
                generation,
            };
            assert!(is_journal_id(&p.journal), "{p:?}");
            let v = p.label_value();
            assert!(crate::ids::is_valid_id(&v), "{v}");
            assert!(v.len() <= 27, "{v}");
            assert!(JOURNAL_LABEL.len() + 1 + v.len() <= 50, "a Linode tag");
            assert_eq!(Provenance::parse(&v), Some(p));
        }
        assert_ne!(journal_id_from(1), journal_id_from(2));
    }

    #[test]
    fn foreign_and_non_canonical_values_do_not_parse() {
        let id = journal_id_from(7);
        for bad in [
            format!("{id}-"),
            format!("{id}-00"),
            format!("{id}-01"),
            format!("{id}-A"),
            format!("{id}-1-2"),
            format!("{id}x-1"),
            format!("{id}-zzzzzzzzzzzzzz"),
            format!("{}-1", id.to_uppercase()),
            "a1b2c3d4e5f6g-1".into(), // '1' is not in base 32
            "production".into(),
        ] {
            assert_eq!(Provenance::parse(&bad), None, "{bad:?}");
        }
        assert_eq!(
            Provenance::parse(&format!("{id}-0")).map(|p| p.generation),
            Some(0)
        );
    }

    #[test]
    fn ownership_is_the_owner_label_exactly() {
        let mut n = NodeHandle::new("n", crate::JoinState::Booting);
        assert!(!owned_by(&n, "a"));
        n.labels.insert(OWNER_LABEL.into(), "a".into());
        assert!(owned_by(&n, "a"));
        assert!(!owned_by(&n, "A"));
        assert!(!owned_by(&n, "a "));
        assert!(!owned_by(&n, "ab"));
    }
}
