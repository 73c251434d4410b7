//! Reversible encodings of labels into what a cloud can store: label
//! values with a restricted alphabet ([`TagCodec`]), and clouds whose tags
//! are flat strings rather than key/value pairs ([`FlatTags`]).
//!
//! Both are injective (two different inputs never give the same tag) and
//! reversible ([`TagCodec::decode`] gives back the input), so a plugin can
//! read its labels back from the cloud and the conformance suite can read a
//! fake's ground truth. Characters outside the alphabet, and the escape
//! character itself, are written as the escape character and two uppercase
//! hex digits per UTF-8 byte; decoding accepts only that canonical form, so
//! a tag someone else wrote that merely looks encoded is not misread.
//!
//! Ids (`crate::ids`: lowercase letters, digits, `-`, `_`) are left
//! unchanged by every codec whose alphabet holds those characters and whose
//! escape character is not among them, as for the codecs defined here: an
//! owner or request tag reads the same in the cloud's console as in
//! wasmprov's journal.
//!
//! ```
//! use wasmprov_api::tags::FlatTags;
//! let tags = FlatTags::DIGITALOCEAN;
//! let tag = tags.encode("wasmprov-owner", "team_a-1").unwrap();
//! assert_eq!(tag, "wasmprov-owner:team_a-1");
//! let odd = tags.encode("role", "web server: eu").unwrap();
//! assert_eq!(odd, "role:webX20serverX3AX20eu");
//! assert_eq!(tags.decode(&odd), Some(("role".into(), "web server: eu".into())));
//! ```

use std::collections::BTreeMap;

/// A label value (or key) that cannot be stored: too long once encoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} {text:?} is {len} characters once encoded; {codec} stores at most {max}")]
pub struct TooLong {
    /// What was encoded ("label value", "tag").
    pub what: &'static str,
    /// The input (shortened to 80 characters).
    pub text: String,
    /// Its encoded length.
    pub len: usize,
    /// The codec's limit.
    pub max: usize,
    /// The codec's name.
    pub codec: &'static str,
}

impl From<TooLong> for crate::ProvisionerError {
    /// A label the cloud cannot store: the request cannot be made as asked.
    fn from(e: TooLong) -> Self {
        Self::Unsupported(e.to_string())
    }
}

/// An encoding of strings into a cloud's restricted alphabet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TagCodec {
    /// The cloud, for messages.
    pub name: &'static str,
    /// ASCII characters stored as they are (the escape character among
    /// them is escaped all the same).
    pub alphabet: &'static str,
    /// The escape character: in the alphabet, not a hex digit.
    pub escape: u8,
    /// Longest encoded string the cloud stores.
    pub max_len: usize,
}

impl TagCodec {
    /// Label values of clouds that store `[A-Za-z0-9_.-]` (Hetzner's
    /// label syntax; empty values are stored as they are).
    pub const LABEL_VALUE: TagCodec = TagCodec {
        name: "label values ([A-Za-z0-9_.-], at most 63)",
        alphabet: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-",
        escape: b'X',
        max_len: 63,
    };

    fn stores(&self, b: u8) -> bool {
        b != self.escape && b.is_ascii() && self.alphabet.as_bytes().contains(&b)
    }

    /// `text` in the alphabet.
    ///
    /// # Errors
    /// When the encoded text is longer than [`TagCodec::max_len`].
    pub fn encode(&self, text: &str) -> Result<String, TooLong> {
        self.encode_within(text, self.max_len, "label value")
    }

    fn encode_within(&self, text: &str, max: usize, what: &'static str) -> Result<String, TooLong> {
        let mut out = String::with_capacity(text.len());
        for b in text.bytes() {
            if self.stores(b) {
                out.push(char::from(b));
            } else {
                out.push(char::from(self.escape));
                out.push_str(&format!("{b:02X}"));
            }
        }
        if out.len() > max {
            return Err(TooLong {
                what,
                text: text.chars().take(80).collect(),
                len: out.len(),
                max,
                codec: self.name,
            });
        }
        Ok(out)
    }

    /// The text `encoded` stands for; `None` when it is not what
    /// [`TagCodec::encode`] writes (a character outside the alphabet, a bad
    /// or needless escape, bytes that are not UTF-8).
    #[must_use]
    pub fn decode(&self, encoded: &str) -> Option<String> {
        let bytes = encoded.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b == self.escape {
                let hex = encoded.get(i + 1..i + 3)?;
                // Only the two uppercase hex digits `encode` writes
                // (`from_str_radix` alone would take a sign: `X+F`).
                if !hex.bytes().all(|h| matches!(h, b'0'..=b'9' | b'A'..=b'F')) {
                    return None;
                }
                let byte = u8::from_str_radix(hex, 16).ok()?;
                if self.stores(byte) {
                    return None;
                }
                out.push(byte);
                i += 3;
            } else if self.stores(b) {
                out.push(b);
                i += 1;
            } else {
                return None;
            }
        }
        String::from_utf8(out).ok()
    }
}

/// Labels as flat string tags `KEY<separator>VALUE` (DigitalOcean, Linode,
/// Vultr tags), key and value encoded with one [`TagCodec`] in which the
/// separator is escaped, so the first separator splits a tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlatTags {
    /// How keys and values are written; the separator is in its alphabet.
    pub codec: TagCodec,
    /// Between key and value.
    pub separator: u8,
}

impl FlatTags {
    /// DigitalOcean's tags: `[A-Za-z0-9:_-]`, at most 255 characters.
    pub const DIGITALOCEAN: FlatTags = FlatTags {
        codec: TagCodec {
            name: "DigitalOcean tags ([A-Za-z0-9:_-], at most 255)",
            alphabet: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-",
            escape: b'X',
            max_len: 255,
        },
        separator: b':',
    };

    /// The tag for label `key` = `value`.
    ///
    /// # Errors
    /// When the tag would be longer than the codec's `max_len`.
    pub fn encode(&self, key: &str, value: &str) -> Result<String, TooLong> {
        let key = self.codec.encode_within(key, usize::MAX, "tag")?;
        let value = self.codec.encode_within(value, usize::MAX, "tag")?;
        let tag = format!("{key}{}{value}", char::from(self.separator));
        if tag.len() > self.codec.max_len {
            return Err(TooLong {
                what: "tag",
                text: tag.chars().take(80).collect(),
                len: tag.len(),
                max: self.codec.max_len,
                codec: self.codec.name,
            });
        }
        Ok(tag)
    }

    /// The label a tag stands for; `None` for a tag this encoding did not
    /// write (no separator, or a part that does not decode).
    #[must_use]
    pub fn decode(&self, tag: &str) -> Option<(String, String)> {
        let (key, value) = tag.split_once(char::from(self.separator))?;
        Some((self.codec.decode(key)?, self.codec.decode(value)?))
    }

    /// Every label as a tag, in key order.
    ///
    /// # Errors
    /// The first label whose tag would be too long.
    pub fn encode_all(&self, labels: &BTreeMap<String, String>) -> Result<Vec<String>, TooLong> {
        labels.iter().map(|(k, v)| self.encode(k, v)).collect()
    }

    /// The labels of `tags`; tags this encoding did not write are left out,
    /// and so is a key given twice with different values (order never
    /// decides a label: two tags claiming the owner make a node nobody's).
    #[must_use]
    pub fn decode_all<S: AsRef<str>>(&self, tags: &[S]) -> BTreeMap<String, String> {
        let mut claims: BTreeMap<String, Option<String>> = BTreeMap::new();
        for (k, v) in tags.iter().filter_map(|t| self.decode(t.as_ref())) {
            claims
                .entry(k)
                .and_modify(|had| {
                    if had.as_ref() != Some(&v) {
                        *had = None;
                    }
                })
                .or_insert(Some(v.clone()));
        }
        claims
            .into_iter()
            .filter_map(|(k, v)| Some((k, v?)))
            .collect()
    }

    /// The tag that selects nodes labelled `key` = `value` in a list call
    /// (the same as [`FlatTags::encode`]).
    ///
    /// # Errors
    /// As [`FlatTags::encode`].
    pub fn selector(&self, key: &str, value: &str) -> Result<String, TooLong> {
        self.encode(key, value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_tagged_twice_with_two_values_is_left_out_whatever_the_order() {
        let f = FlatTags::DIGITALOCEAN;
        let a = f.encode("wasmprov-owner", "host-a").unwrap();
        let b = f.encode("wasmprov-owner", "host-b").unwrap();
        let r = f.encode("wasmprov-request", "r1").unwrap();
        for tags in [
            vec![a.clone(), b.clone(), r.clone()],
            vec![b.clone(), r.clone(), a.clone()],
        ] {
            let got = f.decode_all(&tags);
            assert!(!got.contains_key("wasmprov-owner"), "{tags:?}");
            assert_eq!(got["wasmprov-request"], "r1");
        }
        let twice = f.decode_all(&[a.clone(), a]);
        assert_eq!(twice["wasmprov-owner"], "host-a");
    }

    const SAMPLES: &[&str] = &[
        "",
        "a",
        "X",
        "XX",
        "X41",
        "x41",
        ":",
        "a:b",
        "wasmprov-owner",
        "team_a-1",
        "web server",
        "ünïcödé ✓",
        "%41",
        "a.b/c",
        "\u{1b}[2J",
        "X3A",
        "--",
    ];

    #[test]
    fn codecs_round_trip_and_never_collide() {
        for codec in [TagCodec::LABEL_VALUE, FlatTags::DIGITALOCEAN.codec] {
            let mut seen = BTreeMap::new();
            for s in SAMPLES {
                let e = codec.encode(s).unwrap();
                assert!(
                    e.bytes().all(|b| codec.alphabet.as_bytes().contains(&b)),
                    "{e:?}"
                );
                assert_eq!(codec.decode(&e).as_deref(), Some(*s), "{codec:?} {s:?}");
                if let Some(other) = seen.insert(e.clone(), *s) {
                    panic!("{s:?} and {other:?} both encode to {e:?}");
                }
            }
        }
    }

    #[test]
    fn flat_tags_round_trip_and_split_at_the_first_separator() {
        let tags = FlatTags::DIGITALOCEAN;
        let mut seen = BTreeMap::new();
        for k in SAMPLES {
            for v in SAMPLES {
                let t = tags.encode(k, v).unwrap();
                assert_eq!(tags.decode(&t), Some(((*k).into(), (*v).into())));
                if let Some(other) = seen.insert(t.clone(), (*k, *v)) {
                    panic!("{k:?}={v:?} and {other:?} both give {t:?}");
                }
            }
        }
        let labels = BTreeMap::from([("a:b".to_string(), "c".to_string())]);
        let all = tags.encode_all(&labels).unwrap();
        assert_eq!(all, vec!["aX3Ab:c".to_string()]);
        assert_eq!(tags.decode_all(&all), labels);
    }

    #[test]
    fn ids_are_stored_unchanged() {
        for id in ["owner-1", "req_2", "a", "0-9_z"] {
            assert!(crate::ids::is_valid_id(id));
            assert_eq!(TagCodec::LABEL_VALUE.encode(id).unwrap(), id);
            assert_eq!(
                FlatTags::DIGITALOCEAN
                    .encode("wasmprov-request", id)
                    .unwrap(),
                format!("wasmprov-request:{id}")
            );
        }
    }

    #[test]
    fn foreign_and_non_canonical_tags_do_not_decode() {
        let tags = FlatTags::DIGITALOCEAN;
        for t in [
            "production",
            "k:Xz1",
            "k:X4",
            "k:X61",
            "k:X3a",
            "k:a b",
            "k:XFF",
            "k:X+F",
            "k:X-F",
            "k:a:b",
        ] {
            assert_eq!(tags.decode(t), None, "{t:?}");
        }
        assert_eq!(tags.decode("k:"), Some(("k".into(), String::new())));
    }

    #[test]
    fn too_long_is_an_error_not_a_truncation() {
        let long = "a".repeat(64);
        let e = TagCodec::LABEL_VALUE.encode(&long).unwrap_err();
        assert_eq!((e.len, e.max), (64, 63));
        assert!(FlatTags::DIGITALOCEAN.encode("k", &"é".repeat(50)).is_err());
        assert!(FlatTags::DIGITALOCEAN.encode("k", &"a".repeat(253)).is_ok());
    }
}
