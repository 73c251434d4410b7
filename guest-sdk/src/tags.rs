//! Tag conventions every provider follows, so that the cloud is the source
//! of truth: each node carries the host's owner id and the request id that
//! created it.
//!
//! - `describe` returns only nodes whose [`OWNER`] label equals the owner id;
//! - `provision` first looks for a node whose [`REQUEST`] label equals the
//!   request id and returns it instead of creating a second one.
//!
//! The owner and request ids are put on nodes **unchanged** ([`id_tag`]):
//! the host and this SDK accept only ids every common cloud stores as they
//! are (`wasmprov_api::ids`: 1–63 of `[a-z0-9_-]`, alphanumeric at both
//! ends; the SDK refuses any other before a provider sees it), so the
//! mapping from ids to tags is one-to-one by construction, and the host
//! compares nodes with its journal in the same space.
//!
//! Other label keys and values (the shape's own labels) are reduced to
//! characters every common cloud accepts with [`label_value`]. That
//! reduction is *not* one-to-one; never use it on an id.

pub use wasmprov_api::tags::{FlatTags, TagCodec, TooLong};

/// Label carrying the owner id of the host that created the node.
pub const OWNER: &str = wasmprov_api::provenance::OWNER_LABEL;
/// Label carrying the request id that created the node.
pub const REQUEST: &str = wasmprov_api::provenance::REQUEST_LABEL;
/// Label carrying the node's provenance: the identity of the host's journal
/// that recorded the request and the generation it was recorded under
/// (`wasmprov_api::provenance::Provenance`, at most 27 characters of
/// `[a-z0-9-]`). The host puts it among the shape's labels; a provider
/// keeps it on the node like any other label of the shape
/// ([`request_labels`]), and the host reads it back to tell its own nodes
/// from those of a lost or another journal.
pub const JOURNAL: &str = wasmprov_api::provenance::JOURNAL_LABEL;
/// Label carrying a digest of what the node was requested as (shape and
/// boot data, [`request_digest`]). The export glue compares it when a
/// provision finds the node of its request id: another digest is a
/// `conflict`, so reusing a request id for something else is refused even
/// without the host's journal.
pub const REQUEST_DIGEST: &str = wasmprov_api::provenance::REQUEST_DIGEST_LABEL;

/// A digest of `request`'s shape and boot data: 16 hex digits of SHA-256
/// over their JSON (labels sorted, so the same request always gives the
/// same digest). Fits every common cloud's label values. The labels the
/// host sets ([`OWNER`], [`JOURNAL`]) are left out: a request is the same
/// request whichever journal of whichever host asks for it.
#[must_use]
pub fn request_digest(request: &crate::ProvisionRequest) -> String {
    use sha2::Digest as _;
    let mut shape = request.shape.clone();
    shape
        .labels
        .retain(|k, _| !wasmprov_api::provenance::is_host_label(k));
    // Serializing these plain types cannot fail.
    let json = serde_json::to_vec(&(&shape, &request.boot)).unwrap_or_default();
    sha2::Sha256::digest(&json)[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The labels a provider puts on a node it creates for `request`, besides
/// the owner and request tags: the shape's labels and
/// [`REQUEST_DIGEST`].
#[must_use]
pub fn request_labels(request: &crate::ProvisionRequest) -> crate::Labels {
    let mut labels = request.shape.labels.clone();
    labels.insert(REQUEST_DIGEST.to_string(), request_digest(request));
    labels
}

/// An OpenSSH public key line without its comment: type and data, which
/// are what identify a key (`ssh-ed25519 AAAA… ops@laptop` →
/// `ssh-ed25519 AAAA…`).
#[must_use]
pub fn ssh_key_identity(key: &str) -> String {
    key.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
}

/// The name a plugin registers an SSH public key under in a cloud that
/// keeps keys by name (Hetzner's SSH keys, EC2's key pairs):
/// `wasmprov-` and 16 hex digits of SHA-256 over [`ssh_key_identity`], so
/// one key always gets one name, whatever its comment, and the name fits
/// every such cloud.
#[must_use]
pub fn ssh_key_name(key: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(ssh_key_identity(key).as_bytes());
    format!("wasmprov-{}", hex_lower(&digest[..8]))
}

/// The tag value of a request or owner id: the id itself. Ids reach a
/// provider only once checked against `wasmprov_api::ids` (the SDK's
/// export glue does it), so the value is safe on every common cloud and no
/// two ids share one.
#[must_use]
pub fn id_tag(id: &str) -> String {
    debug_assert!(
        wasmprov_api::ids::is_valid_id(id),
        "id {id:?} reached a provider unchecked"
    );
    id.to_string()
}

/// One token for an (owner, request) pair, of at most `max_len` ASCII
/// characters (at least 64), distinct for distinct pairs: `owner/request`
/// when it fits (ids hold no `/`), else the SHA-256 of both, hex. For
/// idempotency tokens such as EC2's `ClientToken`.
#[must_use]
pub fn pair_token(owner_id: &str, request_id: &str, max_len: usize) -> String {
    use sha2::Digest;
    let plain = format!("{owner_id}/{request_id}");
    if plain.len() <= max_len {
        return plain;
    }
    let mut h = sha2::Sha256::new();
    h.update(owner_id.as_bytes());
    h.update([0]);
    h.update(request_id.as_bytes());
    hex_lower(&h.finalize())
}

fn hex_lower(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Makes a string safe as a label value on common clouds: lowercase
/// `[a-z0-9_.-]`, at most 63 characters, starting and ending alphanumeric.
/// Distinct inputs longer than the limit stay distinct (a hash suffix).
#[must_use]
pub fn label_value(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if out.len() > 63 || out != s {
        // Keep distinct inputs distinct after the rewrite.
        let hash = fnv1a(s.as_bytes());
        out.truncate(63 - 9);
        out = format!("{}-{hash:08x}", out.trim_end_matches(['-', '_', '.']));
    }
    let trimmed = out.trim_matches(['-', '_', '.']);
    if trimmed.is_empty() {
        format!("x{:08x}", fnv1a(s.as_bytes()))
    } else {
        trimmed.to_string()
    }
}

/// A short, stable hash (FNV-1a, 32 bits) for name suffixes that keep
/// distinct inputs distinct. Not for anything secret.
#[must_use]
pub fn short_hash(bytes: &[u8]) -> u32 {
    fnv1a(bytes)
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// Longest host name label.
pub const MAX_HOSTNAME: usize = 63;

/// Whether `name` is one valid host name label: 1–63 ASCII letters, digits
/// and `-`, not starting or ending with `-`.
#[must_use]
pub fn is_hostname_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_HOSTNAME
        && !name.starts_with('-')
        && !name.ends_with('-')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

/// `<prefix>-<text>` as one valid host name label (most clouds name
/// machines that way). When `text` is not host-name-safe or too long, the
/// offending characters become `-`, it is cut to fit, and `-<hash of key>` is
/// appended, so distinct keys keep distinct names. `prefix` must itself be
/// host-name-safe and short.
#[must_use]
pub fn hostname(prefix: &str, text: &str, key: &[u8]) -> String {
    let room = MAX_HOSTNAME.saturating_sub(prefix.len() + 1);
    if is_hostname_label(text) && text.len() <= room {
        return format!("{prefix}-{text}");
    }
    hostname_with_hash(prefix, text, key)
}

/// Like [`hostname`], but always with the `-<hash of key>` suffix: a second
/// name for when the first is taken by something else.
#[must_use]
pub fn hostname_with_hash(prefix: &str, text: &str, key: &[u8]) -> String {
    let room = MAX_HOSTNAME.saturating_sub(prefix.len() + 1 + 9);
    let head: String = text
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() { c } else { '-' }
        })
        .take(room)
        .collect();
    let head = head.trim_matches('-');
    let hash = fnv1a(key);
    if head.is_empty() {
        format!("{prefix}-{hash:08x}")
    } else {
        format!("{prefix}-{head}-{hash:08x}")
    }
}

/// The labels to put on a node: the shape's labels plus owner and request tags.
#[must_use]
pub fn node_labels(
    owner_id: &str,
    request_id: &str,
    shape_labels: &crate::Labels,
) -> crate::Labels {
    let mut labels = shape_labels.clone();
    labels.insert(OWNER.to_string(), id_tag(owner_id));
    labels.insert(REQUEST.to_string(), id_tag(request_id));
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provenance_is_kept_on_the_node_but_not_in_the_digest() {
        use wasmprov_api::provenance::{Provenance, journal_id_from};
        let p = Provenance {
            journal: journal_id_from(u64::MAX),
            generation: u64::MAX,
        };
        let mut request = crate::ProvisionRequest::new("r-1", crate::NodeShape::new(1.0, 1 << 30));
        let plain = request_digest(&request);
        request.shape.labels.insert(JOURNAL.into(), p.label_value());
        request.shape.labels.insert(OWNER.into(), "o".into());
        assert_eq!(
            request_digest(&request),
            plain,
            "host labels are not the request"
        );
        let labels = node_labels("o", "r-1", &request_labels(&request));
        assert_eq!(
            labels.get(JOURNAL).and_then(|v| Provenance::parse(v)),
            Some(p.clone())
        );
        // The longest provenance fits the smallest common tag budget
        // (Linode: 50 characters) as a flat tag, unchanged.
        let tag = FlatTags::DIGITALOCEAN
            .encode(JOURNAL, &p.label_value())
            .unwrap();
        assert!(tag.len() <= 50, "{tag}");
        assert_eq!(tag, format!("{JOURNAL}:{}", p.label_value()));
        assert_eq!(
            TagCodec::LABEL_VALUE.encode(&p.label_value()).unwrap(),
            p.label_value()
        );
        // A caller's own label is part of the request.
        request.shape.labels.insert("role".into(), "web".into());
        assert_ne!(request_digest(&request), plain);
    }

    #[test]
    fn hostnames_are_valid_and_distinct() {
        assert_eq!(hostname("wp", "req-1", b"req-1"), "wp-req-1");
        let a = hostname("wp", "req_1", b"req_1");
        let b = hostname("wp", "req.1", b"req.1");
        assert_ne!(a, b);
        let long = hostname("wp", &"x".repeat(100), b"long");
        for n in [
            &a,
            &b,
            &long,
            &hostname("wp", "___", b"u"),
            &hostname_with_hash("wp", "req-1", b"o\0req-1"),
        ] {
            assert!(is_hostname_label(n), "{n}");
        }
        assert_ne!(
            hostname_with_hash("wp", "r", b"a"),
            hostname_with_hash("wp", "r", b"b")
        );
        assert!(!is_hostname_label("-x") && !is_hostname_label("a_b") && !is_hostname_label(""));
    }

    #[test]
    fn id_tags_are_the_ids_and_pair_tokens_are_distinct() {
        // Adversarial pairs: an id equal to another's reduced form, ids
        // differing in a separator, in length only, or by a hash suffix.
        let ids = [
            "req-1",
            "req_1",
            "req-1-6c4bf8d1",
            &label_value("Req/1"),
            "a",
            "a-b",
            "a_b",
            "ab",
            &"x".repeat(63),
            &"x".repeat(62),
        ];
        let mut tags = std::collections::BTreeSet::new();
        for id in ids {
            assert!(wasmprov_api::ids::is_valid_id(id), "{id}");
            assert_eq!(id_tag(id), id);
            assert!(tags.insert(id_tag(id)), "two ids share the tag {id}");
        }
        let mut tokens = std::collections::BTreeSet::new();
        for owner in ids {
            for request in ids {
                let t = pair_token(owner, request, 64);
                assert!(t.len() <= 64 && t.is_ascii(), "{t}");
                assert!(tokens.insert(t.clone()), "{owner} {request} -> {t}");
            }
        }
        assert_eq!(pair_token("o", "r", 64), "o/r");
        assert_eq!(pair_token(&"o".repeat(63), "r", 64).len(), 64);
    }

    #[test]
    fn label_values_are_safe_and_distinct() {
        assert_eq!(label_value("owner-1"), "owner-1");
        let a = label_value("Req/1");
        let b = label_value("req-1");
        assert_ne!(a, b);
        assert!(a.len() <= 63);
        let long = "x".repeat(100);
        let v = label_value(&long);
        assert!(v.len() <= 63, "{v}");
        assert_ne!(v, label_value(&"x".repeat(101)));
        assert!(!label_value("---").is_empty());
        for v in [a, v, label_value("..a..")] {
            assert!(
                v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            );
            assert!(v.starts_with(|c: char| c.is_ascii_alphanumeric()));
        }
    }
}
