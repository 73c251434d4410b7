//! What an error answer of a cloud's API means for the caller: the
//! contract's error kind from the status and the error body, with rules a
//! plugin adds for its cloud checked first.
//!
//! The defaults: 401 and 403 are `auth`; 404 and 410 `not_found`; 409
//! `conflict`; 429 `rate_limited` (waiting as the rate-limit headers say,
//! [`crate::http::wait_ms`]); 500 and above `transport` (retryable); other
//! 4xx `unsupported` (the request cannot succeed as asked). Clouds bend these
//! (a 422 that says "limit reached" is a quota, a 403 that says "rate
//! exceeded" is throttling), so a plugin lists [`Rule`]s matching the
//! status and words of the message:
//!
//! ```
//! use wasmprov_guest::classify::{classify, Kind, Rule};
//! use wasmprov_guest::http::Response;
//!
//! const RULES: &[Rule] = &[
//!     Rule::new(Some(422), "limit", Kind::Quota),
//!     Rule::new(Some(422), "not available", Kind::Capacity),
//! ];
//! let resp = Response {
//!     status: 422,
//!     headers: vec![],
//!     body: br#"{"id":"unprocessable_entity","message":"Droplet limit reached"}"#.to_vec(),
//!     url: "https://api.example/v2/droplets".into(),
//! };
//! let err = classify(&resp, "POST /v2/droplets", RULES);
//! assert_eq!(err.kind(), "quota");
//! assert!(err.to_string().contains("Droplet limit reached"));
//! ```

use crate::http::Response;
use crate::{CapacityScope, Error};

/// The kind of error a [`Rule`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// No capacity for this type (retry with another).
    Capacity,
    /// No capacity in this zone (retry elsewhere).
    CapacityInZone,
    /// An account limit.
    Quota,
    /// Throttled.
    RateLimited,
    /// No such node.
    NotFound,
    /// Credentials missing or not allowed.
    Auth,
    /// The plugin's configuration is wrong (an unknown region or image).
    InvalidConfig,
    /// The request cannot be done as asked.
    Unsupported,
    /// Conflicts with existing state.
    Conflict,
    /// The cloud failed; retry.
    Transport,
    /// Anything else.
    Other,
}

/// One classification rule: an answer with this status (any when `None`)
/// whose message contains `contains` (case-insensitive; empty matches any)
/// is `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The status, or any.
    pub status: Option<u16>,
    /// Words of the error message or code.
    pub contains: &'static str,
    /// What it is.
    pub kind: Kind,
}

impl Rule {
    /// A rule.
    #[must_use]
    pub const fn new(status: Option<u16>, contains: &'static str, kind: Kind) -> Self {
        Self {
            status,
            contains,
            kind,
        }
    }

    fn matches(&self, status: u16, text: &str) -> bool {
        self.status.is_none_or(|s| s == status)
            && (self.contains.is_empty()
                || text
                    .to_ascii_lowercase()
                    .contains(&self.contains.to_ascii_lowercase()))
    }
}

/// The kind of an error answer with no rule matching.
#[must_use]
pub fn default_kind(status: u16) -> Kind {
    match status {
        401 | 403 => Kind::Auth,
        404 | 410 => Kind::NotFound,
        409 => Kind::Conflict,
        429 => Kind::RateLimited,
        500.. => Kind::Transport,
        _ => Kind::Unsupported,
    }
}

/// Where a cloud's error bodies keep the message and the code (or field)
/// that goes in front of it: JSON pointers, the first that holds a string
/// wins.
///
/// ```
/// use wasmprov_guest::classify::{error_message_at, ErrorAt};
/// const LINODE: ErrorAt = ErrorAt::new(&["/errors/0/reason"], &["/errors/0/field"]);
/// let body = br#"{"errors":[{"reason":"A valid plan type by that ID was not found","field":"type"}]}"#;
/// assert_eq!(error_message_at(body, &LINODE), "type: A valid plan type by that ID was not found");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorAt {
    /// Pointers to the message.
    pub message: &'static [&'static str],
    /// Pointers to a code, id or field named in front of the message.
    pub code: &'static [&'static str],
}

impl ErrorAt {
    /// Where most clouds put them: the message at `message`,
    /// `error.message`, `error_description`, `error` or `errors[0].message`;
    /// the code at `error.code`, `code`, `id` or `errors[0].code`.
    pub const DEFAULT: ErrorAt = ErrorAt {
        message: &[
            "/message",
            "/error/message",
            "/error_description",
            "/error",
            "/errors/0/message",
        ],
        code: &["/error/code", "/code", "/id", "/errors/0/code"],
    };

    /// Pointers of a cloud's own.
    #[must_use]
    pub const fn new(message: &'static [&'static str], code: &'static [&'static str]) -> Self {
        Self { message, code }
    }
}

/// The message of an error body, where [`ErrorAt::DEFAULT`] looks.
#[must_use]
pub fn error_message(body: &[u8]) -> String {
    error_message_at(body, &ErrorAt::DEFAULT)
}

/// The message of an error body: the first string at one of `at`'s message
/// pointers (with the first code found in front, `code: message`), else the
/// body's text; cut to 300 characters.
#[must_use]
pub fn error_message_at(body: &[u8], at: &ErrorAt) -> String {
    let text = String::from_utf8_lossy(body);
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) else {
        return cut(text.trim());
    };
    let string = |p: &str| json.pointer(p).and_then(|v| v.as_str()).map(str::to_string);
    let message = at.message.iter().find_map(|p| string(p));
    let code = at.code.iter().find_map(|p| string(p));
    cut(&match (code, message) {
        (Some(c), Some(m)) => format!("{c}: {m}"),
        (None, Some(m)) => m,
        (Some(c), None) => c,
        (None, None) => text.trim().to_string(),
    })
}

fn cut(s: &str) -> String {
    const MAX: usize = 300;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(MAX).collect::<String>())
    }
}

/// The contract error for an error answer to `what` (`"POST /v2/droplets"`):
/// the first of `rules` that matches, else [`default_kind`]. The message
/// names `what`, the status and the cloud's message.
#[must_use]
pub fn classify(resp: &Response, what: &str, rules: &[Rule]) -> Error {
    classify_at(resp, what, rules, &ErrorAt::DEFAULT)
}

/// [`classify`] with the message read where `at` says.
#[must_use]
pub fn classify_at(resp: &Response, what: &str, rules: &[Rule], at: &ErrorAt) -> Error {
    let message = error_message_at(&resp.body, at);
    let kind = rules
        .iter()
        .find(|r| r.matches(resp.status, &message))
        .map_or_else(|| default_kind(resp.status), |r| r.kind);
    let text = format!("{what} (HTTP {}): {message}", resp.status);
    match kind {
        Kind::Capacity => Error::Capacity {
            scope: CapacityScope::InstanceType,
            message: text,
        },
        Kind::CapacityInZone => Error::Capacity {
            scope: CapacityScope::Zone,
            message: text,
        },
        Kind::Quota => Error::Quota(text),
        Kind::RateLimited => Error::RateLimited {
            retry_after_ms: resp.retry_after_ms(),
            message: text,
        },
        Kind::NotFound => Error::NotFound(text),
        Kind::Auth => Error::Auth(text),
        Kind::InvalidConfig => Error::InvalidConfig(text),
        Kind::Unsupported => Error::Unsupported(text),
        Kind::Conflict => Error::Conflict(text),
        Kind::Transport => Error::Transport(text),
        Kind::Other => Error::Other(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(status: u16, headers: &[(&str, &str)], body: &str) -> Response {
        Response {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                .collect(),
            body: body.as_bytes().to_vec(),
            url: "https://x/".into(),
        }
    }

    #[test]
    fn statuses_have_defaults_and_rules_come_first() {
        let kind = |status, body: &str, rules: &[Rule]| {
            classify(&resp(status, &[], body), "GET /", rules).kind()
        };
        assert_eq!(kind(401, "", &[]), "auth");
        assert_eq!(kind(404, "", &[]), "not_found");
        assert_eq!(kind(409, "", &[]), "conflict");
        assert_eq!(kind(422, "", &[]), "unsupported");
        assert_eq!(kind(503, "", &[]), "transport");
        let rules = [
            Rule::new(Some(403), "rate", Kind::RateLimited),
            Rule::new(None, "insufficient capacity", Kind::CapacityInZone),
        ];
        assert_eq!(
            kind(403, r#"{"message":"Rate exceeded"}"#, &rules),
            "rate_limited"
        );
        assert_eq!(kind(403, r#"{"message":"forbidden"}"#, &rules), "auth");
        assert_eq!(
            kind(
                400,
                r#"{"error":{"code":"x","message":"Insufficient capacity"}}"#,
                &rules
            ),
            "capacity"
        );
    }

    #[test]
    fn rate_limits_carry_the_wait_and_messages_are_found() {
        let err = classify(
            &resp(
                429,
                &[("retry-after", "7")],
                r#"{"id":"too_many_requests","message":"slow"}"#,
            ),
            "GET /v2/droplets",
            &[],
        );
        assert!(
            matches!(
                err,
                Error::RateLimited {
                    retry_after_ms: Some(7000),
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .contains("GET /v2/droplets (HTTP 429): too_many_requests: slow"),
            "{err}"
        );
        assert_eq!(
            error_message(br#"{"errors":[{"code":"E1","message":"bad"}]}"#),
            "E1: bad"
        );
        assert_eq!(error_message(b"<html>oops</html>"), "<html>oops</html>");
        // A cloud's own pointers: its message, not its raw JSON, and rules
        // match on it.
        const LINODE: ErrorAt = ErrorAt::new(&["/errors/0/reason"], &["/errors/0/field"]);
        let body = r#"{"errors":[{"reason":"Linode limit reached for this account"}]}"#;
        let err = classify_at(
            &resp(400, &[], body),
            "POST /v4/linode/instances",
            &[Rule::new(Some(400), "limit", Kind::Quota)],
            &LINODE,
        );
        assert_eq!(err.kind(), "quota");
        assert!(
            err.to_string()
                .ends_with("(HTTP 400): Linode limit reached for this account"),
            "{err}"
        );
        assert!(
            error_message(body.as_bytes()).contains("errors"),
            "the default reads raw JSON"
        );
        assert_eq!(error_message(&[b'x'; 400]).chars().count(), 301);
    }
}
