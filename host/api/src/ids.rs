//! The syntax of request ids and owner ids, and the one check of it.
//!
//! Both ids end up as tag or label values on every cloud (the owner id on
//! every node a host creates, the request id on the node made for it), and a
//! node is found again by comparing those values. So an id must be a value
//! every common cloud stores *unchanged*: then the tag is the id itself, two
//! ids never share a tag, and whoever compares (a plugin looking a node up
//! before creating it, reconcile matching nodes with the journal) compares
//! in one space.
//!
//! **The syntax**: 1 to [`MAX_ID_LEN`] characters of lowercase ASCII letters,
//! digits, `-` and `_`, starting and ending with a letter or a digit
//! (`^[a-z0-9]([a-z0-9_-]{0,61}[a-z0-9])?$`). That is a valid value of a GCP
//! or Kubernetes label, a Hetzner label, a DigitalOcean tag (after
//! `wasmprov-request:`), an AWS or Azure tag. UUIDs (lowercase), Kubernetes
//! object names without dots, and `group-17` style names all pass;
//! uppercase letters are refused rather than folded, since `Web-1` and
//! `web-1` would otherwise name one node.
//!
//! Every entry point checks with [`check_request_id`] / [`check_owner_id`]:
//! the Rust API (the host's provision, the fleet, the host builder), the
//! CLI, gRPC, and the guest SDK before a plugin sees the id.
//!
//! ```
//! use wasmprov_api::ids::{check_request_id, is_valid_id};
//!
//! assert!(is_valid_id("web-17"));
//! assert!(is_valid_id("0b0c8f3e-5d5c-4f7a-9c39-1d3f7a3c2b11"));
//! for bad in ["", "Web-1", "a/b", "a.b", "-a", "a-", "x y", &"x".repeat(64)] {
//!     assert!(!is_valid_id(bad), "{bad:?}");
//! }
//! let err = check_request_id("Web 1").unwrap_err();
//! assert!(err.to_string().contains("request id \"Web 1\""), "{err}");
//! ```

use crate::ProvisionerError;

/// Longest request or owner id: the longest label value GCP and
/// Kubernetes accept.
pub const MAX_ID_LEN: usize = 63;

/// The syntax in words, for error messages and docs.
pub const ID_SYNTAX: &str = "1 to 63 characters of lowercase letters a-z, digits, '-' and '_', starting and ending with a letter or digit";

/// Whether `id` is a valid request or owner id (see the [module docs](self)).
#[must_use]
pub fn is_valid_id(id: &str) -> bool {
    let b = id.as_bytes();
    let edge = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= MAX_ID_LEN
        && edge(b[0])
        && edge(b[b.len() - 1])
        && b.iter().all(|&c| edge(c) || c == b'-' || c == b'_')
}

/// Why `id` is not valid, or `None` when it is. `what` names the id
/// (`"request id"`, `"owner id"`).
#[must_use]
pub fn id_problem(what: &str, id: &str) -> Option<String> {
    if is_valid_id(id) {
        return None;
    }
    let shown: String = id.chars().take(80).collect();
    let cut = if shown.len() < id.len() { "..." } else { "" };
    Some(format!(
        "{what} {shown:?}{cut} is not valid: use {ID_SYNTAX}"
    ))
}

/// Checks a request id; an invalid one is [`ProvisionerError::Unsupported`]
/// naming the rule.
///
/// # Errors
/// When `id` does not follow the syntax.
pub fn check_request_id(id: &str) -> Result<(), ProvisionerError> {
    match id_problem("request id", id) {
        None => Ok(()),
        Some(m) => Err(ProvisionerError::Unsupported(m)),
    }
}

/// Checks an owner id; an invalid one is
/// [`ProvisionerError::InvalidConfig`] naming the rule (the owner id is the
/// host's configuration).
///
/// # Errors
/// When `id` does not follow the syntax.
pub fn check_owner_id(id: &str) -> Result<(), ProvisionerError> {
    match id_problem("owner id", id) {
        None => Ok(()),
        Some(m) => Err(ProvisionerError::InvalidConfig(m)),
    }
}

/// Makes a valid id out of arbitrary text (a host name, a user name), for
/// *defaults* only: lowercased, other characters turned into `-`, runs of
/// separators kept, cut to [`MAX_ID_LEN`], trimmed. Distinct inputs may map
/// to one id, so never use it on ids callers chose; check those instead.
/// Returns `fallback` when nothing is left.
#[must_use]
pub fn id_from_text(text: &str, fallback: &str) -> String {
    let mapped: String = text
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .take(MAX_ID_LEN)
        .collect();
    let trimmed = mapped.trim_matches(['-', '_']);
    if trimmed.is_empty() {
        fallback.to_string()
    } else {
        trimmed.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_syntax_table() {
        let good = [
            "a",
            "0",
            "web-1",
            "web_1",
            "a-_-b",
            "auto-0123456789abcdef0123456789abcdef",
            "0b0c8f3e-5d5c-4f7a-9c39-1d3f7a3c2b11",
            &"x".repeat(63),
        ];
        for id in good {
            assert!(is_valid_id(id), "{id:?}");
            assert!(check_request_id(id).is_ok());
            assert!(check_owner_id(id).is_ok());
        }
        let bad = [
            "",
            "-",
            "_a",
            "a_",
            "-a",
            "a-",
            "A",
            "web-A",
            "a.b",
            "a/b",
            "a b",
            "a:b",
            "ñ",
            "a\u{0}",
            "a\n",
            &"x".repeat(64),
        ];
        for id in bad {
            assert!(!is_valid_id(id), "{id:?}");
            assert!(matches!(
                check_request_id(id),
                Err(ProvisionerError::Unsupported(_))
            ));
            assert!(matches!(
                check_owner_id(id),
                Err(ProvisionerError::InvalidConfig(_))
            ));
        }
    }

    #[test]
    fn errors_name_the_id_and_the_rule_and_stay_short() {
        let long = "Z".repeat(100_000);
        let m = id_problem("request id", &long).unwrap();
        assert!(m.len() < 300, "{}", m.len());
        assert!(m.contains("..."), "{m}");
        assert!(m.contains(ID_SYNTAX), "{m}");
        let m = check_owner_id("Host A").unwrap_err().to_string();
        assert!(m.contains("owner id \"Host A\""), "{m}");
    }

    #[test]
    fn defaults_from_text_are_valid() {
        for text in [
            "My.Host",
            "wasmprov-Build_Box.local",
            "---",
            "",
            "ñandú",
            &"h".repeat(200),
        ] {
            let id = id_from_text(text, "fallback");
            assert!(is_valid_id(&id), "{text:?} -> {id:?}");
        }
        assert_eq!(id_from_text("wasmprov-My.Host", "x"), "wasmprov-my-host");
        assert_eq!(id_from_text("...", "x"), "x");
    }
}
