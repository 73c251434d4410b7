//! The reference cloud's error dialect, rendered outside any server.
//!
//! Every error is `{"error":{"code":"...","message":"..."}}` with
//! `Content-Type: application/json`; a 429 also carries `Retry-After`. The
//! fake renders its own errors through these functions, so a fault injector
//! that answers a request without reaching the fake (such as a proxy in
//! front of it) produces byte-for-byte the responses the fake would.

use http::header::{HeaderName, HeaderValue};
use serde_json::json;

/// The `error.code` values and the HTTP status each comes with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// 400 `invalid_request`: bad JSON, unknown type or zone, bad labels,
    /// bad query parameters.
    InvalidRequest,
    /// 401 `unauthorized`: the bearer token is missing or wrong.
    Unauthorized,
    /// 403 `quota_exceeded`: the account's node quota is used up.
    QuotaExceeded,
    /// 404 `not_found`: no such node (or no such route).
    NotFound,
    /// 409 `idempotency_conflict`: an `Idempotency-Key` reused with another body.
    IdempotencyConflict,
    /// 422 `insufficient_capacity`: the type cannot be had in that zone now.
    InsufficientCapacity,
    /// 429 `rate_limited`, with `Retry-After`.
    RateLimited,
    /// 500 `internal`.
    Internal,
}

impl ErrorCode {
    /// The `error.code` string.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidRequest => "invalid_request",
            Self::Unauthorized => "unauthorized",
            Self::QuotaExceeded => "quota_exceeded",
            Self::NotFound => "not_found",
            Self::IdempotencyConflict => "idempotency_conflict",
            Self::InsufficientCapacity => "insufficient_capacity",
            Self::RateLimited => "rate_limited",
            Self::Internal => "internal",
        }
    }

    /// The HTTP status that comes with the code.
    #[must_use]
    pub fn status(self) -> u16 {
        match self {
            Self::InvalidRequest => 400,
            Self::Unauthorized => 401,
            Self::QuotaExceeded => 403,
            Self::NotFound => 404,
            Self::IdempotencyConflict => 409,
            Self::InsufficientCapacity => 422,
            Self::RateLimited => 429,
            Self::Internal => 500,
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A whole error response: status, headers (lowercase names) and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorResponse {
    /// HTTP status.
    pub status: u16,
    /// Headers: always `content-type`, plus `retry-after` for a 429.
    pub headers: Vec<(String, String)>,
    /// The JSON body, `{"error":{"code":...,"message":...}}`.
    pub body: String,
}

impl ErrorResponse {
    /// `(status, headers, body)`.
    #[must_use]
    pub fn into_parts(self) -> (u16, Vec<(String, String)>, String) {
        (self.status, self.headers, self.body)
    }

    /// The first header called `name` (case-insensitive).
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// As an [`http::Response`].
    #[must_use]
    pub fn to_http(&self) -> http::Response<String> {
        let mut resp = http::Response::new(self.body.clone());
        *resp.status_mut() = http::StatusCode::from_u16(self.status)
            .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
        for (name, value) in &self.headers {
            // Every header this module makes is valid; skipping is only a
            // guard for hand-built values.
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                resp.headers_mut().append(name, value);
            }
        }
        resp
    }
}

/// The error response for `code` with `message`.
#[must_use]
pub fn render_error(code: ErrorCode, message: &str) -> ErrorResponse {
    let body = json!({ "error": { "code": code.as_str(), "message": message } });
    ErrorResponse {
        status: code.status(),
        headers: vec![("content-type".to_string(), "application/json".to_string())],
        body: body.to_string(),
    }
}

/// 429 `rate_limited` with `Retry-After: retry_after_s`.
#[must_use]
pub fn rate_limited_error(retry_after_s: u64) -> ErrorResponse {
    let mut resp = render_error(
        ErrorCode::RateLimited,
        &format!("too many requests; retry after {retry_after_s} s"),
    );
    resp.headers
        .push(("retry-after".to_string(), retry_after_s.to_string()));
    resp
}

/// 422 `insufficient_capacity` for `node_type` in `zone` (the message names both).
#[must_use]
pub fn capacity_error(zone: &str, node_type: &str) -> ErrorResponse {
    render_error(
        ErrorCode::InsufficientCapacity,
        &format!("insufficient capacity for node type {node_type} in zone {zone}"),
    )
}

/// 403 `quota_exceeded` for an account allowed `max_nodes` nodes.
#[must_use]
pub fn quota_error(max_nodes: usize) -> ErrorResponse {
    render_error(
        ErrorCode::QuotaExceeded,
        &format!("node quota of {max_nodes} reached; delete nodes or raise the quota"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_errors() {
        let r = rate_limited_error(3);
        assert_eq!(r.status, 429);
        assert_eq!(r.header("Retry-After"), Some("3"));
        assert_eq!(r.header("content-type"), Some("application/json"));
        let body: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        assert_eq!(body["error"]["code"], "rate_limited");

        let r = capacity_error("zone-b", "gpu");
        assert_eq!(r.status, 422);
        let msg = serde_json::from_str::<serde_json::Value>(&r.body).unwrap()["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(msg.contains("zone-b") && msg.contains("gpu"), "{msg}");
        assert_eq!(r.header("retry-after"), None);

        let (status, headers, body) = quota_error(5).into_parts();
        assert_eq!(status, 403);
        assert_eq!(headers.len(), 1);
        assert!(body.contains("\"quota_exceeded\"") && body.contains('5'));

        let http = rate_limited_error(9).to_http();
        assert_eq!(http.status(), http::StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(http.headers()["retry-after"], "9");
        assert_eq!(http.body(), &rate_limited_error(9).body);
    }

    #[test]
    fn codes_and_statuses() {
        for (code, status, name) in [
            (ErrorCode::InvalidRequest, 400, "invalid_request"),
            (ErrorCode::Unauthorized, 401, "unauthorized"),
            (ErrorCode::QuotaExceeded, 403, "quota_exceeded"),
            (ErrorCode::NotFound, 404, "not_found"),
            (ErrorCode::IdempotencyConflict, 409, "idempotency_conflict"),
            (
                ErrorCode::InsufficientCapacity,
                422,
                "insufficient_capacity",
            ),
            (ErrorCode::RateLimited, 429, "rate_limited"),
            (ErrorCode::Internal, 500, "internal"),
        ] {
            assert_eq!((code.status(), code.as_str()), (status, name));
            assert_eq!(render_error(code, "m").status, status);
        }
    }
}
