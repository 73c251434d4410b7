//! Tags on instances: ownership, request id, the shape's labels and `Name`;
//! the `ClientToken` of `RunInstances`; and the filters that find them.

use wasmprov_guest::tags::{OWNER, REQUEST, id_tag};
use wasmprov_guest::{Error, Labels, Result};

use crate::api::Instance;

/// Most tags EC2 allows on one resource.
pub const MAX_TAGS: usize = 50;
/// Longest tag key EC2 allows.
pub const MAX_KEY: usize = 128;
/// Longest tag value EC2 allows.
pub const MAX_VALUE: usize = 256;
/// Prefix of the `Name` tag: `wasmprov-<request id>`.
pub const NAME_PREFIX: &str = "wasmprov-";

/// The states an instance can be in before it is terminated: what
/// `provision` and `describe` ask `DescribeInstances` for.
pub const LIVE_STATES: &[&str] = &["pending", "running", "shutting-down", "stopping", "stopped"];

/// The tags of a new instance, in a stable order: the owner and request
/// tags first (no shape label can precede them), then the shape's labels
/// (as written; EC2 accepts any characters), then `Name` unless the shape
/// sets it. The shape's own owner or request label is left out (the
/// plugin's always win).
///
/// # Errors
/// [`Error::Unsupported`] for a label EC2 would refuse: an empty key, a key
/// starting with `aws:`, a key over 128 or a value over 256 characters, or
/// more than 50 tags in all. [`Error::InvalidConfig`] for a label that is
/// not canonical (`wasmprov_api::provenance::label_fault`: a key such as
/// `" wasmprov-owner"` that reads as a reserved one, whitespace around a
/// key, a control character), which the host refuses before a plugin sees
/// it: refused here too, so that no such tag is ever written.
pub fn instance_tags(
    owner_id: &str,
    request_id: &str,
    shape_labels: &Labels,
) -> Result<Vec<(String, String)>> {
    let mut tags: Vec<(String, String)> = vec![
        (OWNER.into(), id_tag(owner_id)),
        (REQUEST.into(), id_tag(request_id)),
    ];
    for (k, v) in shape_labels {
        if k == OWNER || k == REQUEST {
            continue;
        }
        check_label(k, v)?;
        tags.push((k.clone(), v.clone()));
    }
    if !shape_labels.contains_key("Name") {
        tags.push((
            "Name".into(),
            format!("{NAME_PREFIX}{}", id_tag(request_id)),
        ));
    }
    if tags.len() > MAX_TAGS {
        return Err(Error::Unsupported(format!(
            "{} tags asked for; EC2 allows at most {MAX_TAGS} on an instance",
            tags.len()
        )));
    }
    Ok(tags)
}

/// Refuses a label that is not canonical
/// (`wasmprov_api::provenance::label_fault`), and one EC2 would refuse as a
/// tag.
fn check_label(k: &str, v: &str) -> Result<()> {
    if let Some(m) = wasmprov_api::provenance::label_fault(k, v) {
        return Err(Error::InvalidConfig(m));
    }
    if k.is_empty() || is_aws_tag(k) {
        return Err(Error::Unsupported(format!(
            "label {k:?} cannot be an EC2 tag: keys must be non-empty and not start with \"aws:\""
        )));
    }
    if k.chars().count() > MAX_KEY || v.chars().count() > MAX_VALUE {
        return Err(Error::Unsupported(format!(
            "label {k:?} cannot be an EC2 tag: keys are at most {MAX_KEY} and values at most {MAX_VALUE} characters"
        )));
    }
    Ok(())
}

/// Whether `key` is one of AWS's own tags (`aws:…`), which no caller may
/// write or delete.
#[must_use]
pub fn is_aws_tag(key: &str) -> bool {
    key.get(..4).is_some_and(|p| p.eq_ignore_ascii_case("aws:"))
}

/// Whether tag `key` stays as it is whatever labels a node is given: the
/// ownership, request and provenance tags the host and plugins set
/// (`wasmprov_api::provenance::is_reserved_label`), and AWS's own.
#[must_use]
pub fn is_kept(key: &str) -> bool {
    wasmprov_api::provenance::is_reserved_label(key) || is_aws_tag(key)
}

/// What `set-labels` changes on an instance: the tags to delete (by key)
/// and the tags to create or overwrite.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Relabel {
    /// Keys to remove (`DeleteTags`).
    pub delete: Vec<String>,
    /// Tags to write (`CreateTags` overwrites a key's value).
    pub create: Vec<(String, String)>,
}

impl Relabel {
    /// Whether nothing changes.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.delete.is_empty() && self.create.is_empty()
    }
}

/// The tag changes that make `instance`'s tags exactly its kept ones
/// ([`is_kept`]) plus `labels`, as the contract's `set-labels` says: every
/// other tag goes, `Name` and the operator's `tags` (config) included
/// unless `labels` names them. A label that names a reserved tag is left
/// out (the host refuses such labels before the plugin sees them); one
/// named `aws:…` is refused.
///
/// # Errors
/// [`Error::Unsupported`] for a label EC2 would refuse, or more than 50
/// tags in all, before anything is changed.
pub fn relabel(instance: &Instance, labels: &Labels) -> Result<Relabel> {
    let mut want: Vec<(String, String)> = Vec::new();
    for (k, v) in labels {
        check_label(k, v)?;
        if wasmprov_api::provenance::is_reserved_label(k) {
            continue;
        }
        want.push((k.clone(), v.clone()));
    }
    let kept = instance.tags.iter().filter(|(k, _)| is_kept(k)).count();
    if kept + want.len() > MAX_TAGS {
        return Err(Error::Unsupported(format!(
            "{} tags asked for besides the {kept} the node keeps; EC2 allows at most {MAX_TAGS} on an instance",
            want.len()
        )));
    }
    let delete = instance
        .tags
        .iter()
        .map(|(k, _)| k)
        .filter(|k| !is_kept(k) && !want.iter().any(|(w, _)| w == *k))
        .cloned()
        .collect();
    let create = want
        .into_iter()
        .filter(|(k, v)| instance.tag(k) != Some(v.as_str()))
        .collect();
    Ok(Relabel { delete, create })
}

/// The `ClientToken` of `RunInstances` for this owner and request: at most
/// 64 ASCII characters, distinct for distinct (owner, request) pairs, so
/// that two hosts using the same request id never get each other's
/// instance back.
#[must_use]
pub fn client_token(owner_id: &str, request_id: &str) -> String {
    wasmprov_guest::tags::pair_token(owner_id, request_id, 64)
}

/// Whether `instance` carries this owner's tag.
#[must_use]
pub fn is_owned(instance: &Instance, owner_id: &str) -> bool {
    instance.tag(OWNER) == Some(id_tag(owner_id).as_str())
}

/// Whether `instance` was created for this owner and request.
#[must_use]
pub fn is_for_request(instance: &Instance, owner_id: &str, request_id: &str) -> bool {
    is_owned(instance, owner_id) && instance.tag(REQUEST) == Some(id_tag(request_id).as_str())
}

/// Whether `s` looks like an instance id (`i-` and 8 or 17 hex digits), so
/// that nothing else is ever sent to `TerminateInstances`.
#[must_use]
pub fn is_instance_id(s: &str) -> bool {
    s.strip_prefix("i-").is_some_and(|hex| {
        (8..=17).contains(&hex.len()) && hex.chars().all(|c| c.is_ascii_hexdigit())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_carry_owner_request_name_and_labels() {
        let labels = Labels::from([
            ("pool".to_string(), "gpu a/b".to_string()),
            (OWNER.to_string(), "forged".to_string()),
        ]);
        let tags = instance_tags("host-a", "req-1", &labels).unwrap();
        assert_eq!(
            tags,
            [
                (OWNER.into(), "host-a".to_string()),
                (REQUEST.into(), "req-1".into()),
                ("pool".into(), "gpu a/b".into()),
                ("Name".into(), "wasmprov-req-1".into()),
            ]
        );
        let named = Labels::from([("Name".to_string(), "db-1".to_string())]);
        let tags = instance_tags("o", "r", &named).unwrap();
        assert_eq!(tags[2], ("Name".into(), "db-1".into()));
        assert_eq!(tags.len(), 3);
    }

    #[test]
    fn labels_that_read_as_reserved_tags_are_never_written() {
        let node = tagged(&[(OWNER, "o"), (REQUEST, "r")]);
        for (k, v) in [
            (" wasmprov-owner", "host-b"),
            ("wasmprov-owner ", "host-b"),
            ("WASMPROV-OWNER", "host-b"),
            ("wasmprov-journal ", "k7m2q4x6b3c5d-1"),
            ("wasmprov-request\t", "r2"),
            ("pool", "a\0b"),
        ] {
            let labels = Labels::from([(k.to_string(), v.to_string())]);
            assert!(
                matches!(
                    instance_tags("o", "r", &labels),
                    Err(Error::InvalidConfig(_))
                ),
                "{k:?}"
            );
            assert!(
                matches!(relabel(&node, &labels), Err(Error::InvalidConfig(_))),
                "{k:?}"
            );
        }
    }

    #[test]
    fn an_instance_two_owner_tags_claim_is_nobodys() {
        // EC2 keeps " wasmprov-owner" and "wasmprov-owner" as two tags;
        // whichever comes first, neither owner gets the instance.
        for tags in [
            &[
                (" wasmprov-owner", "host-b"),
                (OWNER, "host-a"),
                (REQUEST, "r"),
            ][..],
            &[
                (OWNER, "host-a"),
                ("WASMPROV-OWNER", "host-b"),
                (REQUEST, "r"),
            ][..],
        ] {
            let i = tagged(tags);
            assert!(
                !is_owned(&i, "host-a") && !is_owned(&i, "host-b"),
                "{tags:?}"
            );
            assert!(!i.labels().contains_key(OWNER), "{tags:?}");
            assert!(
                i.labels()
                    .keys()
                    .all(|k| !k.eq_ignore_ascii_case(OWNER) && k.trim() == k)
            );
        }
        let forged_journal = tagged(&[
            (OWNER, "host-a"),
            ("wasmprov-journal", "k7m2q4x6b3c5d-1"),
            ("wasmprov-journal ", "aaaaaaaaaaaaa-1"),
        ]);
        assert_eq!(forged_journal.tag("wasmprov-journal"), None);
        assert!(!forged_journal.labels().contains_key("wasmprov-journal"));
        assert!(is_owned(&forged_journal, "host-a"));
        // The same value twice is no contradiction.
        let twice = tagged(&[(OWNER, "host-a"), (" wasmprov-owner", "host-a")]);
        assert!(is_owned(&twice, "host-a"));
    }

    #[test]
    fn labels_ec2_would_refuse_are_unsupported() {
        let bad = [
            ("aws:foo".to_string(), "x".to_string()),
            ("AWS:foo".to_string(), "x".to_string()),
            (String::new(), "x".to_string()),
            ("k".repeat(129), "x".to_string()),
            ("k".to_string(), "v".repeat(257)),
        ];
        for (k, v) in bad {
            let labels = Labels::from([(k.clone(), v)]);
            assert!(
                matches!(instance_tags("o", "r", &labels), Err(Error::Unsupported(_))),
                "{k}"
            );
        }
        let many: Labels = (0..47)
            .map(|i| (format!("k{i}"), "v".to_string()))
            .collect();
        assert_eq!(instance_tags("o", "r", &many).unwrap().len(), MAX_TAGS);
        let too_many: Labels = (0..48).map(|i| (format!("k{i}"), String::new())).collect();
        assert!(matches!(
            instance_tags("o", "r", &too_many),
            Err(Error::Unsupported(_))
        ));
    }

    fn tagged(tags: &[(&str, &str)]) -> Instance {
        Instance {
            id: "i-0123abcd".into(),
            tags: tags
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            ..Instance::default()
        }
    }

    #[test]
    fn relabel_replaces_user_tags_and_keeps_the_reserved_ones() {
        let node = tagged(&[
            (OWNER, "host-a"),
            (REQUEST, "r1"),
            ("wasmprov-journal", "k7m2q4x6b3c5d-1"),
            ("wasmprov-request-digest", "00aa"),
            ("wasmprov-group", "gpu"),
            ("aws:ec2spot:fleet-request-id", "sfr-1"),
            ("Name", "wasmprov-r1"),
            ("pool", "blue"),
            ("stale", "x"),
            ("team", "platform"),
        ]);
        let labels = Labels::from([
            ("pool".to_string(), "green".to_string()),
            ("fresh".to_string(), String::new()),
            ("team".to_string(), "platform".to_string()),
            (OWNER.to_string(), "forged".to_string()),
            ("wasmprov-group".to_string(), "forged".to_string()),
        ]);
        let change = relabel(&node, &labels).unwrap();
        assert_eq!(change.delete, ["Name", "stale"]);
        assert_eq!(
            change.create,
            [
                ("fresh".to_string(), String::new()),
                ("pool".into(), "green".into()),
            ]
        );
        // Asked again of the node as it now is: nothing to do.
        let mut now = node.clone();
        now.tags.retain(|(k, _)| k != "stale" && k != "Name");
        now.tags.push(("fresh".into(), String::new()));
        now.tags
            .iter_mut()
            .filter(|(k, _)| k == "pool")
            .for_each(|(_, v)| *v = "green".into());
        assert!(relabel(&now, &labels).unwrap().is_empty());
        // No labels: every tag but the kept ones goes.
        let bare = relabel(&node, &Labels::new()).unwrap();
        assert_eq!(bare.delete, ["Name", "pool", "stale", "team"]);
        assert!(bare.create.is_empty());
    }

    #[test]
    fn relabel_refuses_what_ec2_would_refuse_before_changing_anything() {
        let node = tagged(&[(OWNER, "o"), (REQUEST, "r")]);
        let bad = Labels::from([("aws:x".to_string(), "1".to_string())]);
        assert!(matches!(relabel(&node, &bad), Err(Error::Unsupported(_))));
        // 2 kept + 48 labels = 50: allowed; one more is not.
        let fits: Labels = (0..48).map(|i| (format!("k{i}"), String::new())).collect();
        assert_eq!(relabel(&node, &fits).unwrap().create.len(), 48);
        let over: Labels = (0..49).map(|i| (format!("k{i}"), String::new())).collect();
        assert!(matches!(
            relabel(&node, &over),
            Err(Error::Unsupported(m)) if m.contains("50")
        ));
        assert!(is_kept("AWS:cloudformation:stack-id") && is_kept(OWNER) && !is_kept("Name"));
    }

    #[test]
    fn client_tokens_are_short_and_distinct() {
        let a = client_token("host-a", "req-1");
        let b = client_token("host-b", "req-1");
        assert_ne!(a, b);
        assert!(a.len() <= 64 && a.is_ascii());
        let long = client_token(&"o".repeat(200), &"r".repeat(200));
        assert!(long.len() <= 64);
        assert_eq!(a, client_token("host-a", "req-1"));
    }

    #[test]
    fn ownership_and_ids() {
        let i = Instance {
            id: "i-1".into(),
            tags: vec![
                (OWNER.into(), "host-a".to_string()),
                (REQUEST.into(), "r1".into()),
            ],
            ..Instance::default()
        };
        assert!(is_owned(&i, "host-a"));
        assert!(!is_owned(&i, "host-b"));
        assert!(is_for_request(&i, "host-a", "r1"));
        assert!(!is_for_request(&i, "host-a", "r2"));
        assert!(!is_owned(&Instance::default(), "o"));
        for ok in ["i-0123abcd", "i-0598c7d356eba48d7", "i-73f0cd0aac24fd380"] {
            assert!(is_instance_id(ok), "{ok}");
        }
        for bad in [
            "",
            "i-",
            "i-123",
            "i-xyz45678",
            "0598c7d356eba48d7",
            "i-0598c7d356eba48d71",
            "vol-0123abcd",
            "i-0123abcd&Action=x",
        ] {
            assert!(!is_instance_id(bad), "{bad}");
        }
    }
}
