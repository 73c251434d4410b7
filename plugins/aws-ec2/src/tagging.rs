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

/// The tags of a new instance, in a stable order: the shape's labels (as
/// written; EC2 accepts any characters), `Name` unless the shape sets it,
/// then the owner and request tags (reduced with [`label_value`]), which
/// always win.
///
/// # Errors
/// [`Error::Unsupported`] for a label EC2 would refuse: an empty key, a key
/// starting with `aws:`, a key over 128 or a value over 256 characters, or
/// more than 50 tags in all.
pub fn instance_tags(
    owner_id: &str,
    request_id: &str,
    shape_labels: &Labels,
) -> Result<Vec<(String, String)>> {
    let mut tags: Vec<(String, String)> = Vec::new();
    for (k, v) in shape_labels {
        if k == OWNER || k == REQUEST {
            continue;
        }
        if k.is_empty() || k.to_ascii_lowercase().starts_with("aws:") {
            return Err(Error::Unsupported(format!(
                "label {k:?} cannot be an EC2 tag: keys must be non-empty and not start with \"aws:\""
            )));
        }
        if k.chars().count() > MAX_KEY || v.chars().count() > MAX_VALUE {
            return Err(Error::Unsupported(format!(
                "label {k:?} cannot be an EC2 tag: keys are at most {MAX_KEY} and values at most {MAX_VALUE} characters"
            )));
        }
        tags.push((k.clone(), v.clone()));
    }
    if !shape_labels.contains_key("Name") {
        tags.push((
            "Name".into(),
            format!("{NAME_PREFIX}{}", id_tag(request_id)),
        ));
    }
    tags.push((OWNER.into(), id_tag(owner_id)));
    tags.push((REQUEST.into(), id_tag(request_id)));
    if tags.len() > MAX_TAGS {
        return Err(Error::Unsupported(format!(
            "{} tags asked for; EC2 allows at most {MAX_TAGS} on an instance",
            tags.len()
        )));
    }
    Ok(tags)
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
                ("pool".into(), "gpu a/b".into()),
                ("Name".into(), "wasmprov-req-1".into()),
                (OWNER.into(), "host-a".to_string()),
                (REQUEST.into(), "req-1".into()),
            ]
        );
        let named = Labels::from([("Name".to_string(), "db-1".to_string())]);
        let tags = instance_tags("o", "r", &named).unwrap();
        assert_eq!(tags[0], ("Name".into(), "db-1".into()));
        assert_eq!(tags.len(), 3);
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
