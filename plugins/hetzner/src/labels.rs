//! Server names, server labels and label selectors.
//!
//! Every server carries the SDK's ownership and request-id labels
//! ([`tags::OWNER`], [`tags::REQUEST`]) with values reduced by
//! [`tags::label_value`], so the same reduction is used when selecting.

use wasmprov_guest::Labels;
use wasmprov_guest::tags::{self, OWNER, REQUEST, id_tag, label_value};

/// Longest server name produced: one DNS label.
pub const MAX_NAME: usize = tags::MAX_HOSTNAME;

/// Whether `name` is a valid single-label hostname.
#[must_use]
pub fn is_valid_hostname_label(name: &str) -> bool {
    tags::is_hostname_label(name)
}

/// The name of the server created for `request_id`:
/// `<prefix>-<id_tag(request_id)>`, a valid hostname of at most 63
/// characters. When the label value is not hostname-safe (it has `_` or
/// `.`) or too long, the offending characters become `-` and a hash of the
/// request id is appended, so distinct request ids give distinct names.
/// `prefix` must itself be hostname-safe (the settings check it).
#[must_use]
pub fn server_name(prefix: &str, request_id: &str) -> String {
    tags::hostname(prefix, &id_tag(request_id), request_id.as_bytes())
}

/// A second name for `request_id`, used when [`server_name`] is taken by a
/// server that is not this request's (another owner with the same request
/// id, or a server created by hand): the hash covers owner and request.
#[must_use]
pub fn fallback_server_name(prefix: &str, owner_id: &str, request_id: &str) -> String {
    let mut key = owner_id.as_bytes().to_vec();
    key.push(0);
    key.extend_from_slice(request_id.as_bytes());
    tags::hostname_with_hash(prefix, &id_tag(request_id), &key)
}

/// A label value segment as Hetzner accepts it: at most 63 characters of
/// letters, digits, `-`, `_`, `.`, starting and ending alphanumeric.
fn is_valid_segment(s: &str) -> bool {
    s.len() <= 63
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && s.starts_with(|c: char| c.is_ascii_alphanumeric())
        && s.ends_with(|c: char| c.is_ascii_alphanumeric())
}

/// A DNS subdomain (a label key's optional prefix).
fn is_valid_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_valid_hostname_label)
}

/// Whether `key` is a valid Hetzner label key: `name` or `prefix/name`.
#[must_use]
pub fn is_valid_label_key(key: &str) -> bool {
    match key.split_once('/') {
        None => is_valid_segment(key),
        Some((prefix, name)) => is_valid_dns_subdomain(prefix) && is_valid_segment(name),
    }
}

/// Whether `value` is a valid Hetzner label value (empty is allowed).
#[must_use]
pub fn is_valid_label_value(value: &str) -> bool {
    value.is_empty() || is_valid_segment(value)
}

/// The labels for a new server: the shape's labels (each key or value that
/// Hetzner would refuse passed through [`label_value`]) plus the owner and
/// request tags, which always win.
#[must_use]
pub fn server_labels(owner_id: &str, request_id: &str, shape_labels: &Labels) -> Labels {
    let cleaned: Labels = shape_labels
        .iter()
        .map(|(k, v)| {
            // A key that reads as a reserved label without being it
            // (`WASMPROV-OWNER`) is rewritten as an invalid one is, so no
            // reader that folds case or trims could take it for the owner's.
            let lookalike = tags::reads_as_reserved(k).is_some_and(|r| r != k);
            let k = if is_valid_label_key(k) && !lookalike {
                k.clone()
            } else {
                label_value(k)
            };
            let v = if is_valid_label_value(v) {
                v.clone()
            } else {
                label_value(v)
            };
            (k, v)
        })
        .collect();
    tags::node_labels(owner_id, request_id, &cleaned)
}

/// `wasmprov-owner==<owner>`: every server of this owner.
#[must_use]
pub fn owner_selector(owner_id: &str) -> String {
    format!("{OWNER}=={}", id_tag(owner_id))
}

/// `wasmprov-owner==<owner>,wasmprov-request==<request>`: the server created
/// for this request.
#[must_use]
pub fn request_selector(owner_id: &str, request_id: &str) -> String {
    format!(
        "{OWNER}=={},{REQUEST}=={}",
        id_tag(owner_id),
        id_tag(request_id)
    )
}

/// Whether `labels` carry this owner's tag.
#[must_use]
pub fn is_owned_by(labels: &Labels, owner_id: &str) -> bool {
    labels.get(OWNER).is_some_and(|v| *v == id_tag(owner_id))
}

/// Whether `labels` carry this owner's and this request's tags.
#[must_use]
pub fn is_for_request(labels: &Labels, owner_id: &str, request_id: &str) -> bool {
    is_owned_by(labels, owner_id)
        && labels
            .get(REQUEST)
            .is_some_and(|v| *v == id_tag(request_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_that_read_as_reserved_never_become_them() {
        // A JSON map holds one value a key, and a key Hetzner would refuse
        // is rewritten with a hash: a lookalike of the owner or journal
        // label can never land on the real one, whatever the order.
        for k in [
            " wasmprov-owner",
            "wasmprov-owner ",
            "WASMPROV-OWNER",
            "wasmprov-journal\t",
            "Wasmprov-Request",
        ] {
            let shape = Labels::from([(k.to_string(), "host-b".to_string())]);
            let labels = server_labels("host-a", "req-1", &shape);
            assert!(is_owned_by(&labels, "host-a") && !is_owned_by(&labels, "host-b"));
            assert!(is_for_request(&labels, "host-a", "req-1"));
            assert!(
                labels
                    .keys()
                    .filter(|key| *key != OWNER && *key != REQUEST)
                    .all(|key| ![
                        "wasmprov-owner",
                        "wasmprov-request",
                        "wasmprov-journal",
                        "wasmprov-request-digest",
                        "wasmprov-group",
                    ]
                    .contains(&key.to_lowercase().trim())),
                "{k:?}: {labels:?}"
            );
        }
    }

    #[test]
    fn simple_request_ids_keep_the_documented_name() {
        assert_eq!(server_name("wp", "req-1"), "wp-req-1");
        assert_eq!(
            server_name("wp", "0b0c8f3e-5d5c-4f7a-9c39-1d3f7a3c2b11"),
            "wp-0b0c8f3e-5d5c-4f7a-9c39-1d3f7a3c2b11"
        );
        // Not hostname-safe: cut and hashed.
        assert!(server_name("wp", "req_1").starts_with("wp-req-1-"));
    }

    #[test]
    fn server_names_are_valid_hostnames_and_distinct() {
        let ids = [
            "req-1",
            "req_1",
            "x__x",
            "a_b_c-d",
            "a-b-c-d",
            &"x".repeat(63),
            &"x".repeat(62),
            &format!("{}y", "y_".repeat(31)),
        ];
        let mut seen = std::collections::BTreeSet::new();
        for prefix in ["wp", "k8s-pool-eu", &"p".repeat(30)] {
            seen.clear();
            for id in ids {
                let name = server_name(prefix, id);
                assert!(is_valid_hostname_label(&name), "{prefix} {id:?} -> {name}");
                assert!(name.starts_with(&format!("{prefix}-")), "{name}");
                assert!(seen.insert(name.clone()), "duplicate {name} for {id:?}");
                let alt = fallback_server_name(prefix, "owner-1", id);
                assert!(is_valid_hostname_label(&alt), "{alt}");
                assert_ne!(alt, name);
                assert_ne!(alt, fallback_server_name(prefix, "owner-2", id));
            }
        }
    }

    #[test]
    fn hostname_validity() {
        for ok in ["wp-a", "a", "A1-b2", &"x".repeat(63)] {
            assert!(is_valid_hostname_label(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "a_b", "a.b", "a b", &"x".repeat(64)] {
            assert!(!is_valid_hostname_label(bad), "{bad}");
        }
    }

    #[test]
    fn labels_are_made_valid_and_tags_win() {
        let shape: Labels = [
            ("env", "prod"),
            ("wasmprov.io/pool", "gpu-less"),
            ("bad key", "x"),
            ("tier", "front end"),
            ("empty", ""),
            ("wasmprov-owner", "someone-else"),
            ("a/b/c", "v"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let labels = server_labels("owner-1", "req-1", &shape);
        assert_eq!(labels["env"], "prod");
        assert_eq!(labels["wasmprov.io/pool"], "gpu-less");
        assert_eq!(labels["empty"], "");
        assert_eq!(labels[OWNER], "owner-1");
        assert_eq!(labels[REQUEST], "req-1");
        assert_eq!(labels[&label_value("bad key")], "x");
        assert_eq!(labels["tier"], label_value("front end"));
        assert!(!labels.contains_key("bad key"));
        assert!(!labels.contains_key("a/b/c"));
        for (k, v) in &labels {
            assert!(is_valid_label_key(k), "{k}");
            assert!(is_valid_label_value(v), "{v}");
        }
        assert!(is_for_request(&labels, "owner-1", "req-1"));
        assert!(!is_for_request(&labels, "owner-1", "req-2"));
        assert!(!is_owned_by(&labels, "owner-2"));
        assert!(!is_owned_by(&labels, "owner_1"));
    }

    #[test]
    fn selectors() {
        assert_eq!(owner_selector("host-a"), "wasmprov-owner==host-a");
        assert_eq!(
            request_selector("host-a", "req-1"),
            "wasmprov-owner==host-a,wasmprov-request==req-1"
        );
    }
}
