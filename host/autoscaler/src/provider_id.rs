//! The one place node ids are written in the Kubernetes `spec.providerID`
//! form and read back.
//!
//! - A node wasmprov made: `wasmprov://PLUGIN/PROVIDER-ID`.
//! - A member being created (journaled, no node known yet):
//!   `wasmprov-creating://GROUP/REQUEST-ID`.
//! - A member wanted by the target and not yet asked of any cloud:
//!   `wasmprov-wanted://GROUP/N` (N counts from 1).
//!
//! Every part is percent-encoded except the unreserved characters of RFC
//! 3986 (`A-Z a-z 0-9 - . _ ~`), with upper-case hex digits; reading
//! accepts exactly that canonical form, so an id reads back to one node and
//! one node is written one way (a round-trip property test checks both).

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

/// The scheme of a node's provider id.
pub const SCHEME: &str = "wasmprov://";
/// The scheme of a member being created.
pub const CREATING_SCHEME: &str = "wasmprov-creating://";
/// The scheme of a wanted member no cloud was asked for yet.
pub const WANTED_SCHEME: &str = "wasmprov-wanted://";

/// Everything but RFC 3986's unreserved characters is encoded.
const ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// What a provider id names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeRef {
    /// A node a plugin made.
    Node {
        /// The plugin (backend) name.
        plugin: String,
        /// The plugin's id of the node.
        provider_id: String,
    },
    /// A member of `group` journaled under `request_id`, not yet made.
    Creating {
        /// The group.
        group: String,
        /// The member's request id.
        request_id: String,
    },
    /// The `n`th wanted member of `group` no cloud was asked for yet.
    Wanted {
        /// The group.
        group: String,
        /// Its slot number in the group (from 1, stable, never reused).
        n: u32,
    },
}

fn enc(part: &str) -> String {
    utf8_percent_encode(part, ENCODE).to_string()
}

/// `part` decoded, if it is non-empty and in the canonical encoding.
fn dec(part: &str) -> Option<String> {
    let text = percent_decode_str(part).decode_utf8().ok()?.into_owned();
    (!text.is_empty() && enc(&text) == part).then_some(text)
}

/// `SCHEME` + `a` + `/` + `b`, each encoded.
fn two(scheme: &str, a: &str, b: &str) -> String {
    format!("{scheme}{}/{}", enc(a), enc(b))
}

impl NodeRef {
    /// The provider id of a node of `plugin`.
    #[must_use]
    pub fn node(plugin: &str, provider_id: &str) -> String {
        two(SCHEME, plugin, provider_id)
    }

    /// This reference as a provider id.
    #[must_use]
    pub fn encode(&self) -> String {
        match self {
            Self::Node {
                plugin,
                provider_id,
            } => two(SCHEME, plugin, provider_id),
            Self::Creating { group, request_id } => two(CREATING_SCHEME, group, request_id),
            Self::Wanted { group, n } => two(WANTED_SCHEME, group, &n.to_string()),
        }
    }

    /// Reads a provider id written by [`encode`](Self::encode); `None` for
    /// anything else (another cloud's node, a malformed or non-canonical
    /// id).
    #[must_use]
    pub fn decode(id: &str) -> Option<Self> {
        let split = |rest: &str| -> Option<(String, String)> {
            let (a, b) = rest.split_once('/')?;
            Some((dec(a)?, dec(b)?))
        };
        if let Some(rest) = id.strip_prefix(SCHEME) {
            let (plugin, provider_id) = split(rest)?;
            Some(Self::Node {
                plugin,
                provider_id,
            })
        } else if let Some(rest) = id.strip_prefix(CREATING_SCHEME) {
            let (group, request_id) = split(rest)?;
            Some(Self::Creating { group, request_id })
        } else if let Some(rest) = id.strip_prefix(WANTED_SCHEME) {
            let (group, n) = split(rest)?;
            let parsed: u32 = n.parse().ok()?;
            (parsed >= 1 && parsed.to_string() == n).then_some(Self::Wanted { group, n: parsed })
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples() {
        let cases = [
            ("hetzner", "12345", "wasmprov://hetzner/12345"),
            ("aws-ec2", "i-0abc", "wasmprov://aws-ec2/i-0abc"),
            ("p", "a/b c%", "wasmprov://p/a%2Fb%20c%25"),
            ("p", "zone-1:ß", "wasmprov://p/zone-1%3A%C3%9F"),
        ];
        for (plugin, pid, want) in cases {
            assert_eq!(NodeRef::node(plugin, pid), want);
            assert_eq!(
                NodeRef::decode(want),
                Some(NodeRef::Node {
                    plugin: plugin.into(),
                    provider_id: pid.into()
                })
            );
        }
    }

    #[test]
    fn refused() {
        for bad in [
            "",
            "hcloud://123",
            "wasmprov://",
            "wasmprov://hetzner",
            "wasmprov://hetzner/",
            "wasmprov:///123",
            "wasmprov://p/a%2fb", // lower-case hex: not canonical
            "wasmprov://p/a%41",  // an encoded unreserved character
            "wasmprov://p/a/b",   // a raw slash in the id
            "wasmprov://p/%FF",   // not UTF-8
            "wasmprov-wanted://g/0",
            "wasmprov-wanted://g/01",
            "wasmprov-wanted://g/x",
            "WASMPROV://p/1",
        ] {
            assert_eq!(NodeRef::decode(bad), None, "{bad:?}");
        }
    }

    /// Every plugin name and provider id round-trips, and two different
    /// pairs never share an id (a seeded sample of awkward strings).
    #[test]
    fn round_trip_property() {
        use std::collections::BTreeMap;
        let alphabet: Vec<char> = "aZ09-._~/%: ?#@!$&'()*+,;=\u{0}\u{7f}éß中😀\\\"[]"
            .chars()
            .collect();
        // A small xorshift: reproducible, no dependency.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut seen: BTreeMap<String, NodeRef> = BTreeMap::new();
        let word = |max: u64, next: &mut dyn FnMut() -> u64| -> String {
            let len = 1 + next() % max;
            (0..len)
                .map(|_| alphabet[usize::try_from(next()).unwrap_or(0) % alphabet.len()])
                .collect()
        };
        for _ in 0..5000 {
            let r = match next() % 3 {
                0 => NodeRef::Node {
                    plugin: word(6, &mut next),
                    provider_id: word(12, &mut next),
                },
                1 => NodeRef::Creating {
                    group: word(6, &mut next),
                    request_id: word(12, &mut next),
                },
                _ => NodeRef::Wanted {
                    group: word(6, &mut next),
                    n: u32::try_from(next() % 1000 + 1).unwrap_or(1),
                },
            };
            let id = r.encode();
            assert_eq!(NodeRef::decode(&id).as_ref(), Some(&r), "{id}");
            if let Some(other) = seen.insert(id.clone(), r.clone()) {
                assert_eq!(other, r, "{id} names two nodes");
            }
        }
    }
}
