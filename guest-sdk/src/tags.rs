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

pub use wasmprov_api::provenance::{label_fault, reads_as_reserved};
pub use wasmprov_api::tags::{FlatTags, TagCodec, TooLong};

/// Label values of Hetzner Cloud (`[A-Za-z0-9_.-]`, at most 63): ids fit
/// unchanged, so no long form is needed.
pub const HETZNER: TagCodec = TagCodec::LABEL_VALUE;

/// A cloud's flat tags with its length limits: [`FlatTags`] and a *long
/// form* for labels whose tag would be too long (or too short) for the
/// cloud, such as a 63-character request id under Linode's 50-character
/// tags. This is the one codec of labels into flat tags: a plugin writes
/// tags with it, reads them back with it, and its fake decodes them with
/// it.
///
/// A label `KEY=VALUE` whose tag `KEY:VALUE` fits is that tag, unchanged
/// (ids stay readable in the cloud's console). Otherwise it is stored as
///
/// - a **hash tag** `KEY::<16 hex digits>` (SHA-256 of key and value): the
///   stable short form [`Preset::selector`] gives, to filter a list by;
/// - **piece tags** `KEY:1:…`, `KEY:2:…`: the encoded value cut to fit,
///   so the label reads back whole.
///
/// Neither can be mistaken for a plain tag (a second `:` is never in a
/// plain one) and [`Preset::decode_all`] accepts the pieces only when they
/// hash to the hash tag, so a foreign or partial set is never misread.
///
/// ```
/// use wasmprov_guest::tags::{Preset, REQUEST};
/// use std::collections::BTreeMap;
/// let id = "r".repeat(63);
/// let labels = BTreeMap::from([(REQUEST.to_string(), id.clone())]);
/// let tags = Preset::LINODE.encode_all(&labels).unwrap();
/// assert!(tags.iter().all(|t| (3..=50).contains(&t.len())));
/// assert!(tags.contains(&Preset::LINODE.selector(REQUEST, &id).unwrap()));
/// assert_eq!(Preset::LINODE.decode_all(&tags), labels);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Preset {
    /// Keys and values, separator and `max_len` (of one tag).
    pub flat: FlatTags,
    /// Shortest tag the cloud stores.
    pub min_len: usize,
    /// Whether the cloud's tags are case-insensitive (Linode, DigitalOcean:
    /// a tag already in the account, such as `WASMPROV-OWNER:fleet-b`, gives
    /// its case to every resource tagged the same way). Then
    /// [`Preset::decode_all`] reads the tags of the SDK's own labels
    /// ([`FOLDED`]: owner, request id, journal, digest, whose values are
    /// lowercase by the contract) in lowercase, so a folded tag still names
    /// the same owner and request. Other labels read as the cloud stores
    /// them: on such a cloud a user label's key or value may come back in
    /// another case than it was written.
    pub case_insensitive: bool,
}

/// The labels whose tags a [`Preset::case_insensitive`] preset reads in
/// lowercase: the SDK writes them only in lowercase (ids, journal ids, hex).
pub const FOLDED: &[&str] = &[OWNER, REQUEST, JOURNAL, REQUEST_DIGEST];

/// `[A-Za-z0-9_-]` and `:`: DigitalOcean's tag alphabet, stored by every
/// flat-tag cloud.
const FLAT_ALPHABET: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";

/// Hex digits of a long form's hash tag.
const HASH_LEN: usize = 16;

impl Preset {
    /// DigitalOcean's tags: `[A-Za-z0-9:_-]`, 1 to 255 characters,
    /// case-insensitive.
    pub const DIGITALOCEAN: Preset = Preset {
        flat: FlatTags::DIGITALOCEAN,
        min_len: 1,
        case_insensitive: true,
    };
    /// Linode's tags: 3 to 50 characters (written in DigitalOcean's
    /// alphabet, which Linode stores as it is), case-insensitive.
    pub const LINODE: Preset = Preset {
        flat: FlatTags {
            codec: TagCodec {
                name: "Linode tags (3 to 50 characters)",
                alphabet: FLAT_ALPHABET,
                escape: b'X',
                max_len: 50,
            },
            separator: b':',
        },
        min_len: 3,
        case_insensitive: true,
    };
    /// Vultr's tags: at most 255 characters.
    pub const VULTR: Preset = Preset {
        flat: FlatTags {
            codec: TagCodec {
                name: "Vultr tags (at most 255 characters)",
                alphabet: FLAT_ALPHABET,
                escape: b'X',
                max_len: 255,
            },
            separator: b':',
        },
        min_len: 1,
        case_insensitive: false,
    };

    fn sep(&self) -> char {
        char::from(self.flat.separator)
    }

    fn fits(&self, tag: &str) -> bool {
        (self.min_len..=self.flat.codec.max_len).contains(&tag.len())
    }

    fn too_long(&self, text: &str) -> TooLong {
        TooLong {
            what: "tag",
            text: text.chars().take(80).collect(),
            len: text.len(),
            max: self.flat.codec.max_len,
            codec: self.flat.codec.name,
        }
    }

    fn hash_tag(&self, key: &str, encoded_key: &str, value: &str) -> Result<String, TooLong> {
        use sha2::Digest as _;
        let mut h = sha2::Sha256::new();
        h.update(key.as_bytes());
        h.update([0]);
        h.update(value.as_bytes());
        let digest = hex::encode(h.finalize());
        let sep = self.sep();
        let tag = format!("{encoded_key}{sep}{sep}{}", &digest[..HASH_LEN]);
        if tag.len() > self.flat.codec.max_len {
            return Err(self.too_long(&tag));
        }
        Ok(tag)
    }

    /// The tags of label `key` = `value`: one plain tag, or the long form.
    ///
    /// # Errors
    /// When even the long form does not fit (a key too long for a tag).
    pub fn encode(&self, key: &str, value: &str) -> Result<Vec<String>, TooLong> {
        let plain = FlatTags {
            codec: TagCodec {
                max_len: usize::MAX,
                ..self.flat.codec
            },
            ..self.flat
        }
        .encode(key, value)?;
        if self.fits(&plain) {
            return Ok(vec![plain]);
        }
        let sep = self.sep();
        let (encoded_key, encoded_value) = plain.split_once(sep).unwrap_or((&plain, ""));
        let mut tags = vec![self.hash_tag(key, encoded_key, value)?];
        let mut rest = encoded_value;
        while !rest.is_empty() {
            let head = format!("{encoded_key}{sep}{}{sep}", tags.len());
            let room = self
                .flat
                .codec
                .max_len
                .saturating_sub(head.len())
                .min(rest.len());
            if room == 0 {
                return Err(self.too_long(&plain));
            }
            tags.push(format!("{head}{}", &rest[..room]));
            rest = &rest[room..];
        }
        Ok(tags)
    }

    /// Every label as tags, in key order.
    ///
    /// # Errors
    /// The first label that cannot be stored.
    pub fn encode_all(&self, labels: &crate::Labels) -> Result<Vec<String>, TooLong> {
        let mut tags = Vec::new();
        for (k, v) in labels {
            tags.extend(self.encode(k, v)?);
        }
        Ok(tags)
    }

    /// The one tag that selects nodes labelled `key` = `value` in a list
    /// call: the plain tag, or the long form's hash tag.
    ///
    /// # Errors
    /// As [`Preset::encode`].
    pub fn selector(&self, key: &str, value: &str) -> Result<String, TooLong> {
        self.encode(key, value).map(|mut tags| tags.swap_remove(0))
    }

    /// The tag a list of `owner_id`'s nodes filters by: the request's tag
    /// when `request_id` is given (the narrower), else the owner's
    /// ([`Preset::selector`]).
    ///
    /// # Errors
    /// As [`Preset::encode`].
    pub fn list_selector(
        &self,
        owner_id: &str,
        request_id: Option<&str>,
    ) -> Result<String, TooLong> {
        match request_id {
            Some(r) => self.selector(REQUEST, r),
            None => self.selector(OWNER, owner_id),
        }
    }

    /// `tag` as [`Preset::decode_all`] reads it: in lowercase when the
    /// cloud's tags are case-insensitive and it is the tag of a [`FOLDED`]
    /// label, else as it is.
    fn folded<'t>(&self, tag: &'t str) -> std::borrow::Cow<'t, str> {
        if self.case_insensitive {
            let lower = tag.to_ascii_lowercase();
            let key = lower.split(self.sep()).next().unwrap_or_default();
            if lower != tag && FOLDED.contains(&key) {
                return std::borrow::Cow::Owned(lower);
            }
        }
        std::borrow::Cow::Borrowed(tag)
    }

    /// The labels `tags` stand for: plain tags, and long forms whose pieces
    /// are all there and hash to their hash tag. Other tags are left out.
    ///
    /// A key claimed with two different values (two plain tags, a plain tag
    /// and a long form, two long forms, or two pieces of one number) is
    /// left out too, whatever the key: which value a node "has" is never
    /// decided by the order of its tags, so a node carrying two owners is
    /// nobody's, and one carrying two request ids answers neither.
    #[must_use]
    pub fn decode_all<S: AsRef<str>>(&self, tags: &[S]) -> crate::Labels {
        use std::collections::{BTreeMap, BTreeSet};
        let sep = self.sep();
        let tags: Vec<std::borrow::Cow<'_, str>> =
            tags.iter().map(|t| self.folded(t.as_ref())).collect();
        let mut claims: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut conflicted: BTreeSet<String> = BTreeSet::new();
        for (k, v) in tags.iter().filter_map(|t| self.flat.decode(t)) {
            claims.entry(k).or_default().insert(v);
        }
        let mut hashes: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        let mut pieces: BTreeMap<&str, BTreeMap<usize, BTreeSet<&str>>> = BTreeMap::new();
        for tag in &tags {
            let Some((key, rest)) = tag.split_once(sep) else {
                continue;
            };
            if let Some(hash) = rest.strip_prefix(sep) {
                hashes.entry(key).or_default().insert(hash);
            } else if let Some((digits, piece)) = rest.split_once(sep)
                && let Ok(n) = digits.parse::<usize>()
                && digits == n.to_string()
            {
                pieces
                    .entry(key)
                    .or_default()
                    .entry(n)
                    .or_default()
                    .insert(piece);
            }
        }
        for (encoded_key, hash) in hashes {
            let Some(key) = self.flat.codec.decode(encoded_key) else {
                continue;
            };
            let parts = pieces.remove(encoded_key).unwrap_or_default();
            // The pieces 1, 2, ... in a row; a stray piece past them (a tag
            // someone else added) does not hide the label.
            let run = (1..=parts.len())
                .take_while(|n| parts.contains_key(n))
                .count();
            if hash.len() > 1 || (1..=run).any(|n| parts[&n].len() > 1) {
                conflicted.insert(key);
                continue;
            }
            let hash = hash.first().copied().unwrap_or_default();
            let piece = |n: usize| parts[&n].first().copied().unwrap_or_default();
            let joined: String = (1..=run).map(piece).collect();
            let Some(value) = self.flat.codec.decode(&joined) else {
                continue;
            };
            // Only the long form `encode` writes for that label, whole.
            let Ok(expected) = self.encode(&key, &value) else {
                continue;
            };
            let given = std::iter::once(format!("{encoded_key}{sep}{sep}{hash}"))
                .chain((1..=run).map(|n| format!("{encoded_key}{sep}{n}{sep}{}", piece(n))));
            if given.eq(expected) {
                claims.entry(key).or_default().insert(value);
            }
        }
        claims
            .into_iter()
            .filter(|(k, values)| values.len() == 1 && !conflicted.contains(k))
            .filter_map(|(k, values)| Some((k, values.into_iter().next()?)))
            .collect()
    }

    /// Whether `tags` carry label `key` = `value`.
    #[must_use]
    pub fn matches<S: AsRef<str>>(&self, tags: &[S], key: &str, value: &str) -> bool {
        self.decode_all(tags).get(key).map(String::as_str) == Some(value)
    }
}

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

/// A digest of `request`'s shape, boot data and subnet: 16 hex digits of
/// SHA-256 over their JSON (labels sorted, so the same request always gives
/// the same digest). Fits every common cloud's label values. The labels the
/// host sets ([`OWNER`], [`JOURNAL`]) are left out: a request is the same
/// request whichever journal of whichever host asks for it. The subnet is
/// hashed only when given (`[shape, boot, subnet]`), so a request without
/// one keeps the digest it always had (`[shape, boot]`, the Python SDK's),
/// and the same request id asked again with another subnet is another
/// request (a conflict), not the node in the first subnet.
///
/// A provision asks for its request's digest twice (the labels of the node
/// it creates, then the export glue's check), so the last one is kept.
#[must_use]
pub fn request_digest(request: &crate::ProvisionRequest) -> String {
    thread_local! {
        static LAST: std::cell::RefCell<Option<(crate::ProvisionRequest, String)>> =
            const { std::cell::RefCell::new(None) };
    }
    LAST.with_borrow_mut(|last| match last {
        Some((r, digest)) if r == request => digest.clone(),
        _ => {
            let digest = digest_of(request);
            *last = Some((request.clone(), digest.clone()));
            digest
        }
    })
}

fn digest_of(request: &crate::ProvisionRequest) -> String {
    use sha2::Digest as _;
    let mut shape = request.shape.clone();
    shape
        .labels
        .retain(|k, _| !wasmprov_api::provenance::is_host_label(k));
    // Serializing these plain types cannot fail.
    let json = match &request.subnet {
        None => serde_json::to_vec(&(&shape, &request.boot)),
        Some(subnet) => serde_json::to_vec(&(&shape, &request.boot, subnet)),
    }
    .unwrap_or_default();
    hex::encode(&sha2::Sha256::digest(&json)[..8])
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
    format!("wasmprov-{}", hex::encode(&digest[..8]))
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
    hex::encode(h.finalize())
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
/// machines that way). When `text` is not host-name-safe, too long, or
/// holds `--` (which Linode's labels refuse), the offending characters
/// become `-`, runs of `-` become one, it is cut to fit, and `-<hash of
/// key>` ([`hostname_with_hash`]) is appended, so distinct keys keep distinct names. `prefix` must
/// itself be host-name-safe, short, and free of `--`; the name then never
/// holds `--`, `_` or `.`.
#[must_use]
pub fn hostname(prefix: &str, text: &str, key: &[u8]) -> String {
    let room = MAX_HOSTNAME.saturating_sub(prefix.len() + 1);
    if is_hostname_label(text) && text.len() <= room && !text.contains("--") {
        return format!("{prefix}-{text}");
    }
    hostname_with_hash(prefix, text, key)
}

/// Hex digits of the hash a host name ends with: 64 bits of SHA-256, so
/// names cut to the same head (long request ids of one owner) do not
/// collide in any number of tries a fleet makes.
pub const HOSTNAME_HASH_LEN: usize = 16;

/// Like [`hostname`], but always with the `-<hash of key>` suffix
/// ([`HOSTNAME_HASH_LEN`] hex digits of SHA-256): a name for clouds whose
/// names are unique per account (Linode's labels), or a second name for
/// when the first is taken by something else.
#[must_use]
pub fn hostname_with_hash(prefix: &str, text: &str, key: &[u8]) -> String {
    use sha2::Digest as _;
    let room = MAX_HOSTNAME.saturating_sub(prefix.len() + 1 + 1 + HOSTNAME_HASH_LEN);
    let mut head = String::with_capacity(room);
    for c in text.chars().map(|c| c.to_ascii_lowercase()) {
        let c = if c.is_ascii_alphanumeric() { c } else { '-' };
        if head.len() == room {
            break;
        }
        if !(c == '-' && head.ends_with('-')) {
            head.push(c);
        }
    }
    let head = head.trim_matches('-');
    let hash = &hex::encode(sha2::Sha256::digest(key))[..HOSTNAME_HASH_LEN];
    if head.is_empty() {
        format!("{prefix}-{hash}")
    } else {
        format!("{prefix}-{head}-{hash}")
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
    fn a_subnet_is_part_of_the_request_and_no_subnet_keeps_the_old_digest() {
        use sha2::Digest as _;
        let request = crate::ProvisionRequest::new("r-1", crate::NodeShape::new(1.0, 1 << 30));
        // Without a subnet: SHA-256 over `[shape, boot]`, as always (and as
        // the Python SDK writes it).
        let old: String =
            sha2::Sha256::digest(serde_json::to_vec(&(&request.shape, &request.boot)).unwrap())
                [..8]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
        assert_eq!(request_digest(&request), old);
        let mut a = request.clone();
        a.subnet = Some("subnet-a".into());
        let mut b = request.clone();
        b.subnet = Some("subnet-b".into());
        assert_ne!(
            request_digest(&a),
            old,
            "the same id in a subnet is another request"
        );
        assert_ne!(request_digest(&a), request_digest(&b));
        assert_eq!(request_digest(&a), request_digest(&a.clone()));

        // The kept digest is never another request's: every part of a
        // request that is hashed, changed alone between two calls, changes
        // the answer, and going back gives the first one again.
        let base = request_digest(&request);
        let mut changed = Vec::new();
        let mut r = request.clone();
        r.shape.cpu += 1.0;
        changed.push(r);
        let mut r = request.clone();
        r.boot.user_data = Some("#cloud-config\n".into());
        changed.push(r);
        let mut r = request.clone();
        r.boot.ssh_keys.push("ssh-ed25519 AAAA k".into());
        changed.push(r);
        let mut r = request.clone();
        r.shape.labels.insert("team".into(), "b".into());
        changed.push(r);
        for r in &changed {
            let d = request_digest(r);
            assert_ne!(d, base, "{r:?}");
            assert_eq!(d, digest_of(r));
            assert_eq!(request_digest(&request), base);
        }
        // The request id is not hashed: the same request under another id
        // has the same digest.
        let mut r = request.clone();
        r.request_id = "another".into();
        assert_eq!(request_digest(&r), base);
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
        // Linode's labels refuse `--`: awkward ids never put one in a name.
        for id in ["a--b", "a_b__c", "a-_-b", "x--", &"y-".repeat(40)] {
            for n in [
                hostname("wasmprov", id, id.as_bytes()),
                hostname_with_hash("wasmprov", id, id.as_bytes()),
            ] {
                assert!(is_hostname_label(&n) && !n.contains("--"), "{id} -> {n}");
            }
        }
        assert_ne!(
            hostname("wp", "a--b", b"a--b"),
            hostname("wp", "a-b", b"a-b")
        );
        // Two request ids of one owner whose 32-bit FNV-1a names collided
        // (found in 300k tries): Linode's key for them, as its plugin makes it.
        let ids = [
            "batch-2026-11-24-pool-gpu-workers-eu-central-u8kbtbz92n",
            "batch-2026-11-24-pool-gpu-workers-eu-central-y8y41oq3cl",
        ];
        let keys = ids.map(|id| format!("{:?}/{id}", Some("fleet-a")));
        assert_eq!(fnv1a(keys[0].as_bytes()), fnv1a(keys[1].as_bytes()));
        let names = [0, 1].map(|i| hostname_with_hash("wasmprov", ids[i], keys[i].as_bytes()));
        assert_ne!(names[0], names[1]);
        for n in &names {
            assert!(
                is_hostname_label(n) && !n.contains("--") && n.len() <= 64,
                "{n}"
            );
        }
    }

    #[test]
    fn presets_keep_short_labels_plain_and_long_ones_whole() {
        let p = Preset::LINODE;
        let long_id = "a".repeat(63);
        let cases: Vec<(String, String)> = vec![
            (REQUEST.into(), "req-1".into()),
            (REQUEST.into(), long_id.clone()),
            (REQUEST.into(), format!("{}b", "a".repeat(62))),
            (OWNER.into(), "x".into()),
            ("k".into(), String::new()),
            (String::new(), String::new()),
            ("role".into(), "web server: eu ✓".repeat(5)),
            (REQUEST_DIGEST.into(), "0123456789abcdef".into()),
        ];
        let mut seen = std::collections::BTreeMap::new();
        for (k, v) in &cases {
            let tags = p.encode(k, v).unwrap();
            for t in &tags {
                assert!((3..=50).contains(&t.len()), "{k}={v} -> {t}");
                assert!(
                    t.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"_-:".contains(&b)),
                    "{t}"
                );
            }
            let labels = crate::Labels::from([(k.clone(), v.clone())]);
            assert_eq!(p.decode_all(&tags), labels, "{tags:?}");
            assert!(p.matches(&tags, k, v));
            let sel = p.selector(k, v).unwrap();
            assert!(tags.contains(&sel));
            if let Some(other) = seen.insert(sel.clone(), (k, v)) {
                panic!("{k}={v} and {other:?} share the selector {sel}");
            }
        }
        // Short ids read the same in the console; long ones take the hash.
        assert_eq!(
            p.selector(REQUEST, "req-1").unwrap(),
            "wasmprov-request:req-1"
        );
        let sel = p.selector(REQUEST, &long_id).unwrap();
        assert!(
            sel.starts_with("wasmprov-request::") && sel.len() == 18 + 16,
            "{sel}"
        );
        // Every label together, and foreign or partial tags, decode as they should.
        let all: crate::Labels = cases.iter().cloned().collect();
        let mut tags = p.encode_all(&all).unwrap();
        tags.push("production".into());
        tags.push("wasmprov-request:9:zz".into());
        assert_eq!(p.decode_all(&tags), all);
        let whole = p.encode(REQUEST, &long_id).unwrap();
        let partial: Vec<&String> = whole
            .iter()
            .filter(|t| !t.ends_with(":1:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"))
            .collect();
        assert!(!p.decode_all(&partial).contains_key(REQUEST), "{partial:?}");
        let forged = vec![
            format!("{REQUEST}::0000000000000000"),
            format!("{REQUEST}:1:abc"),
        ];
        assert!(p.decode_all(&forged).is_empty());
        // DigitalOcean's limit holds every id plainly; a key too long for a
        // tag is refused, never cut.
        assert_eq!(
            Preset::DIGITALOCEAN.encode(REQUEST, &long_id).unwrap(),
            vec![format!("{REQUEST}:{long_id}")]
        );
        assert!(p.encode(&"k".repeat(48), "vvvv").is_err());
        assert_eq!(HETZNER.encode(&long_id).unwrap(), long_id);
    }

    #[test]
    fn two_claims_for_one_key_are_nobodys_whatever_their_order() {
        let long_a = "a".repeat(63);
        let long_b = format!("{}b", "a".repeat(62));
        for p in [Preset::LINODE, Preset::DIGITALOCEAN, Preset::VULTR] {
            for key in [OWNER, REQUEST, "role"] {
                let plain_a = p.encode(key, "a").unwrap();
                let plain_b = p.encode(key, "b").unwrap();
                let form_a = p.encode(key, &long_a).unwrap();
                let form_b = p.encode(key, &long_b).unwrap();
                let other = p.encode(JOURNAL, "k7m2q4x6b3c5d-1").unwrap();
                for (x, y) in [
                    (&plain_a, &plain_b),
                    (&plain_a, &form_b),
                    (&form_a, &plain_b),
                    (&form_a, &form_b),
                ] {
                    let mut tags: Vec<String> = x.iter().chain(y).cloned().collect();
                    tags.extend(other.iter().cloned());
                    for _ in 0..2 {
                        let labels = p.decode_all(&tags);
                        assert!(!labels.contains_key(key), "{tags:?} -> {labels:?}");
                        assert!(labels.contains_key(JOURNAL), "{labels:?}");
                        tags.reverse();
                    }
                }
                // The same claim twice is one claim.
                let twice: Vec<String> = plain_a.iter().chain(&plain_a).cloned().collect();
                assert_eq!(p.decode_all(&twice).get(key).map(String::as_str), Some("a"));
            }
        }
        // A long form with two pieces of one number is no claim at all.
        let p = Preset::LINODE;
        let mut tags = p.encode(OWNER, &long_a).unwrap();
        tags.push(tags[1].replace(":1:a", ":1:b"));
        for _ in 0..2 {
            assert!(!p.decode_all(&tags).contains_key(OWNER), "{tags:?}");
            tags.reverse();
        }
    }

    #[test]
    fn case_folded_tags_still_name_the_owner_and_request() {
        let long = "r".repeat(63);
        let labels = crate::Labels::from([
            (OWNER.to_string(), "fleet-b".to_string()),
            (REQUEST.to_string(), long.clone()),
            (REQUEST_DIGEST.to_string(), "0123456789abcdef".to_string()),
            ("role".to_string(), "web".to_string()),
        ]);
        for p in [Preset::LINODE, Preset::DIGITALOCEAN] {
            assert!(p.case_insensitive);
            let tags = p.encode_all(&labels).unwrap();
            for fold in [str::to_ascii_uppercase, str::to_ascii_lowercase] {
                let folded: Vec<String> = tags.iter().map(|t| fold(t)).collect();
                let got = p.decode_all(&folded);
                assert_eq!(got.get(OWNER), labels.get(OWNER), "{folded:?}");
                assert_eq!(got.get(REQUEST), labels.get(REQUEST), "{folded:?}");
                assert_eq!(got.get(REQUEST_DIGEST), labels.get(REQUEST_DIGEST));
                assert!(p.matches(&folded, OWNER, "fleet-b"));
            }
            // Folded and plain spellings of one owner are one claim.
            let both = vec!["WASMPROV-OWNER:FLEET-B", "wasmprov-owner:fleet-b"];
            assert_eq!(p.decode_all(&both).get(OWNER).unwrap(), "fleet-b");
            // User labels read as stored.
            assert_eq!(p.decode_all(&["ROLE:WEB"]).get("ROLE").unwrap(), "WEB");
        }
        // A case-sensitive cloud's tags are read as they are.
        let upper = ["WASMPROV-OWNER:FLEET-B"];
        assert!(!Preset::VULTR.decode_all(&upper).contains_key(OWNER));
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
