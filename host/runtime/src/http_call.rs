//! The contract's one-call HTTP import, `wasmprov:provisioner/http.send`.
//!
//! The guest's request is turned here into the same `http::Request` a
//! `wasi:http` request of the call becomes (method, URI from scheme,
//! authority and path, a `host` header from the authority, the guest's
//! headers under wasi-http's rule for forbidden ones, a `content-length`
//! from the body) and handed to the plugin's HTTP gate (`http.rs`), which
//! decides and sends it like any other: the grants, the in-flight limit,
//! the deadline, the response size limit and the interceptors are the
//! gate's. The response is read whole within those limits and returned.
//!
//! Why it exists: a `wasi:http` request crosses the component boundary
//! twenty-odd times (fields, request, body stream, future, pollable,
//! response, body) and wasmtime's outgoing handler runs every request in
//! two tasks of its own; here a request is one crossing, awaited in the
//! call's own task.

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, HOST, HeaderName, HeaderValue};
use http_body_util::BodyExt;
use wasmtime_wasi_http::WasiHttpHooks;
use wasmtime_wasi_http::p2::bindings::http::types::{
    DnsErrorPayload, ErrorCode, FieldSizePayload, Method, Scheme, TlsAlertReceivedPayload,
};

use crate::bindings::v03::http::{Host, Request, Response, SendError};
use crate::state::CallState;

impl Host for CallState {
    async fn send(&mut self, request: Request) -> wasmtime::Result<Result<Response, SendError>> {
        let limit = crate::state::field_size_limit(self.plugin.manifest.limits.memory_bytes);
        let req = match build(request, limit, |name| self.hooks.is_forbidden_header(name)) {
            Ok(req) => req,
            Err(why) => return Ok(Err(SendError::BadRequest(why))),
        };
        let plugin = self.plugin.clone();
        let (open, reached) = self.hooks.flags();
        let response = match plugin
            .http
            .send(&plugin.manifest.name, self.kind, &open, &reached, req)
            .await
        {
            Ok(response) => response,
            Err(e) => return Ok(Err(SendError::Failed(error_code(&mut self.hooks, e)))),
        };
        let (parts, mut body) = response.into_parts();
        // The gate's body stops at the response size limit and the deadline.
        // Read whole here, a body must also fit the guest's memory, where it
        // goes next: past the plugin's memory limit it is refused as too
        // large, so the host never holds more for a guest than the guest
        // could take.
        let fits = plugin.manifest.limits.memory_bytes;
        let mut read = bytes::BytesMut::new();
        while let Some(frame) = body.frame().await {
            let frame = match frame {
                Ok(frame) => frame,
                Err(e) => {
                    return Ok(Err(SendError::BodyFailed(error_code(&mut self.hooks, e))));
                }
            };
            if let Some(data) = frame.data_ref() {
                if (read.len() + data.len()) as u64 > fits {
                    return Ok(Err(SendError::BodyFailed(ErrorCode::HttpResponseBodySize(
                        Some(fits),
                    ))));
                }
                read.extend_from_slice(data);
            }
        }
        let headers = parts
            .headers
            .iter()
            .map(|(name, value)| (name.as_str().to_string(), value.as_bytes().to_vec()))
            .collect();
        Ok(Ok(Response {
            status: parts.status.as_u16(),
            headers,
            body: Vec::from(read),
        }))
    }
}

/// Why a request with more distinct header names than a header map holds
/// is refused.
const TOO_MANY: &str = "too many headers";

/// The wire request for a guest's request; `Err` names what is not valid
/// HTTP or refused (nothing is sent then). `field_limit` caps the header
/// bytes as wasi-http's field maps are capped for this plugin.
fn build(
    request: Request,
    field_limit: usize,
    mut forbidden: impl FnMut(&HeaderName) -> bool,
) -> Result<http::Request<wasmtime_wasi_http::WasiBody>, String> {
    let method = match &request.method {
        Method::Get => http::Method::GET,
        Method::Head => http::Method::HEAD,
        Method::Post => http::Method::POST,
        Method::Put => http::Method::PUT,
        Method::Delete => http::Method::DELETE,
        Method::Connect => http::Method::CONNECT,
        Method::Options => http::Method::OPTIONS,
        Method::Trace => http::Method::TRACE,
        Method::Patch => http::Method::PATCH,
        Method::Other(m) => http::Method::from_bytes(m.as_bytes())
            .map_err(|_| format!("invalid method {:?}", shown(m)))?,
    };
    let scheme = match &request.scheme {
        Scheme::Http => http::uri::Scheme::HTTP,
        Scheme::Https => http::uri::Scheme::HTTPS,
        Scheme::Other(s) => return Err(format!("unsupported scheme {:?}", shown(s))),
    };
    // As wasi-http's `set-path-with-query`: an origin-form target only, so
    // that neither an absolute-form nor an authority-form target can name
    // another host than the authority the gate checks.
    let path = request.path_with_query.as_str();
    if !(path.is_empty() || path.starts_with('/') || path.starts_with('?')) {
        return Err(format!(
            "invalid path {:?}: it must start with / or ?",
            shown(path)
        ));
    }
    let authority = http::uri::Authority::try_from(request.authority.as_str())
        .map_err(|_| format!("invalid authority {:?}", shown(&request.authority)))?;
    let uri = http::Uri::builder()
        .scheme(scheme)
        .authority(authority.clone())
        .path_and_query(path)
        .build()
        .map_err(|_| format!("invalid path {:?}", shown(&request.path_with_query)))?;

    let mut headers = http::HeaderMap::new();
    let mut size = 0usize;
    let mut stated_length = None;
    for (name, value) in &request.headers {
        size = size.saturating_add(name.len()).saturating_add(value.len());
        if size > field_limit {
            return Err(format!("headers larger than {field_limit} bytes"));
        }
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("invalid header name {:?}", shown(name)))?;
        let value = HeaderValue::from_bytes(value)
            .map_err(|_| format!("invalid value of header {name}"))?;
        if name == CONTENT_LENGTH {
            // The host sets it from the body; a guest's own must agree.
            let n = value
                .to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok());
            if n != Some(request.body.len() as u64) || stated_length.is_some() {
                return Err(format!(
                    "content-length {:?} does not match the body of {} bytes",
                    String::from_utf8_lossy(value.as_bytes()),
                    request.body.len()
                ));
            }
            stated_length = n;
            continue;
        }
        if forbidden(&name) {
            return Err(format!("header {name} is not allowed"));
        }
        // A header map holds at most 32 768 distinct names; a guest's list
        // may be longer within the byte limit, so never `append`, which
        // would panic.
        headers
            .try_append(name, value)
            .map_err(|_| TOO_MANY.to_string())?;
    }
    let host = HeaderValue::from_str(authority.as_str())
        .map_err(|_| format!("invalid authority {:?}", shown(&request.authority)))?;
    headers
        .try_insert(HOST, host)
        .map_err(|_| TOO_MANY.to_string())?;
    let bodyless = request.body.is_empty()
        && matches!(
            method,
            http::Method::GET | http::Method::HEAD | http::Method::DELETE | http::Method::OPTIONS
        );
    if !bodyless {
        headers
            .try_insert(CONTENT_LENGTH, HeaderValue::from(request.body.len()))
            .map_err(|_| TOO_MANY.to_string())?;
    }
    let body = http_body_util::Full::new(Bytes::from(request.body))
        .map_err(|never| match never {})
        .boxed_unsync();
    let mut req = http::Request::new(body);
    *req.method_mut() = method;
    *req.uri_mut() = uri;
    *req.headers_mut() = headers;
    Ok(req)
}

/// A guest's string in an error message: control characters escaped, capped.
fn shown(s: &str) -> String {
    wasmprov_policy::text::cell(s).into_owned()
}

/// The `wasi:http` error code of a failure, as wasi-http reports the same
/// failure to a guest (the SDK classifies both alike).
fn error_code(hooks: &mut impl WasiHttpHooks, e: wasmtime_wasi_http::Error) -> ErrorCode {
    use wasmtime_wasi_http::Error as E;
    match e {
        // The three choices wasi-http leaves to its hooks are asked of ours,
        // so both paths answer alike.
        E::Hyper(err) => {
            match std::error::Error::source(&err).and_then(|c| c.downcast_ref::<ErrorCode>()) {
                Some(code) => code.clone(),
                None => hooks.p2_error_from_hyper(&err),
            }
        }
        E::Connect(err)
            if err.kind() == std::io::ErrorKind::AddrNotAvailable
                || err
                    .to_string()
                    .starts_with("failed to lookup address information") =>
        {
            ErrorCode::DnsError(DnsErrorPayload {
                rcode: Some("address not available".to_string()),
                info_code: None,
            })
        }
        E::Connect(err) => hooks.p2_error_from_connect(&err),
        E::Tls(err) => hooks.p2_error_from_tls(&err),
        E::HttpRequestBodySize(n) => ErrorCode::HttpRequestBodySize(n),
        E::DnsTimeout => ErrorCode::DnsTimeout,
        E::DnsError { rcode, info_code } => {
            ErrorCode::DnsError(DnsErrorPayload { rcode, info_code })
        }
        E::DestinationNotFound => ErrorCode::DestinationNotFound,
        E::DestinationUnavailable => ErrorCode::DestinationUnavailable,
        E::DestinationIpProhibited => ErrorCode::DestinationIpProhibited,
        E::DestinationIpUnroutable => ErrorCode::DestinationIpUnroutable,
        E::ConnectionRefused => ErrorCode::ConnectionRefused,
        E::ConnectionTerminated => ErrorCode::ConnectionTerminated,
        E::ConnectionTimeout => ErrorCode::ConnectionTimeout,
        E::ConnectionReadTimeout => ErrorCode::ConnectionReadTimeout,
        E::ConnectionWriteTimeout => ErrorCode::ConnectionWriteTimeout,
        E::ConnectionLimitReached => ErrorCode::ConnectionLimitReached,
        E::TlsProtocolError => ErrorCode::TlsProtocolError,
        E::TlsCertificateError => ErrorCode::TlsCertificateError,
        E::TlsAlertReceived {
            alert_id,
            alert_message,
        } => ErrorCode::TlsAlertReceived(TlsAlertReceivedPayload {
            alert_id,
            alert_message,
        }),
        E::HttpRequestDenied => ErrorCode::HttpRequestDenied,
        E::HttpRequestLengthRequired => ErrorCode::HttpRequestLengthRequired,
        E::HttpRequestMethodInvalid => ErrorCode::HttpRequestMethodInvalid,
        E::HttpRequestUriInvalid => ErrorCode::HttpRequestUriInvalid,
        E::HttpRequestUriTooLong => ErrorCode::HttpRequestUriTooLong,
        E::HttpRequestHeaderSectionSize(n) => ErrorCode::HttpRequestHeaderSectionSize(n),
        E::HttpRequestHeaderSize {
            field_name,
            field_size,
        } => ErrorCode::HttpRequestHeaderSize(Some(FieldSizePayload {
            field_name,
            field_size,
        })),
        E::HttpRequestTrailerSectionSize(n) => ErrorCode::HttpRequestTrailerSectionSize(n),
        E::HttpRequestTrailerSize {
            field_name,
            field_size,
        } => ErrorCode::HttpRequestTrailerSize(FieldSizePayload {
            field_name,
            field_size,
        }),
        E::HttpResponseIncomplete => ErrorCode::HttpResponseIncomplete,
        E::HttpResponseHeaderSectionSize(n) => ErrorCode::HttpResponseHeaderSectionSize(n),
        E::HttpResponseHeaderSize {
            field_name,
            field_size,
        } => ErrorCode::HttpResponseHeaderSize(FieldSizePayload {
            field_name,
            field_size,
        }),
        E::HttpResponseBodySize(n) => ErrorCode::HttpResponseBodySize(n),
        E::HttpResponseTrailerSectionSize(n) => ErrorCode::HttpResponseTrailerSectionSize(n),
        E::HttpResponseTrailerSize {
            field_name,
            field_size,
        } => ErrorCode::HttpResponseTrailerSize(FieldSizePayload {
            field_name,
            field_size,
        }),
        E::HttpResponseTransferCoding(c) => ErrorCode::HttpResponseTransferCoding(c),
        E::HttpResponseContentCoding(c) => ErrorCode::HttpResponseContentCoding(c),
        E::HttpResponseTimeout => ErrorCode::HttpResponseTimeout,
        E::HttpUpgradeFailed => ErrorCode::HttpUpgradeFailed,
        E::HttpProtocolError => ErrorCode::HttpProtocolError,
        E::LoopDetected => ErrorCode::LoopDetected,
        E::ConfigurationError => ErrorCode::ConfigurationError,
        E::InternalError(m) => ErrorCode::InternalError(m),
        other => ErrorCode::InternalError(Some(format!("{other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(path: &str, headers: &[(&str, &[u8])], body: &[u8]) -> Request {
        Request {
            method: Method::Post,
            scheme: Scheme::Http,
            authority: "api.example:8080".into(),
            path_with_query: path.into(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_vec()))
                .collect(),
            body: body.to_vec(),
        }
    }

    fn built(r: Request) -> Result<http::Request<wasmtime_wasi_http::WasiBody>, String> {
        build(r, 16 << 10, |name| {
            wasmtime_wasi_http::DEFAULT_FORBIDDEN_HEADERS.contains(name)
        })
    }

    #[test]
    fn the_wire_request_has_the_host_and_length_the_host_sets() {
        let req = built(request(
            "/v1/servers?x=1",
            &[
                ("content-type", b"application/json"),
                ("x-a", b"1"),
                ("x-a", b"2"),
            ],
            b"{}",
        ))
        .unwrap();
        assert_eq!(req.method(), http::Method::POST);
        assert_eq!(
            req.uri().to_string(),
            "http://api.example:8080/v1/servers?x=1"
        );
        assert_eq!(req.headers()[HOST], "api.example:8080");
        assert_eq!(req.headers()[CONTENT_LENGTH], "2");
        assert_eq!(req.headers().get_all("x-a").iter().count(), 2);
        // A bodyless GET says no length, as a browser's would.
        let mut get = request("", &[], b"");
        get.method = Method::Get;
        let get = built(get).unwrap();
        assert!(get.headers().get(CONTENT_LENGTH).is_none());
        assert_eq!(get.uri().path(), "/");
        // A guest's length that agrees with the body is kept (once).
        let same = built(request("/", &[("content-length", b"2")], b"{}")).unwrap();
        assert_eq!(same.headers().get_all(CONTENT_LENGTH).iter().count(), 1);
    }

    #[test]
    fn what_could_reach_another_host_or_split_a_request_is_refused() {
        let refused = [
            request("/", &[("host", b"evil.example")], b""),
            request("/", &[("HOST", b"evil.example")], b""),
            request("/", &[("transfer-encoding", b"chunked")], b"{}"),
            request("/", &[("connection", b"close")], b""),
            request("/", &[("upgrade", b"h2c")], b""),
            request("/", &[("x-probe", b"1\r\nHost: evil.example")], b""),
            request("/", &[("x probe", b"1")], b""),
            request("/", &[("content-length", b"5")], b"{}"),
            request(
                "/",
                &[("content-length", b"2"), ("content-length", b"2")],
                b"{}",
            ),
            request("http://evil.example/", &[], b""),
            request("evil.example:80", &[], b""),
            request("*", &[], b""),
            request("/a b", &[], b""),
        ];
        for r in refused {
            let what = format!("{:?} {:?}", r.path_with_query, r.headers);
            assert!(built(r).is_err(), "{what}");
        }
        let mut bad_authority = request("/", &[], b"");
        bad_authority.authority = "evil.example/x".into();
        assert!(built(bad_authority).is_err());
        let mut bad_method = request("/", &[], b"");
        bad_method.method = Method::Other("GET /x HTTP/1.1\r\n".into());
        assert!(built(bad_method).is_err());
        let mut other_scheme = request("/", &[], b"");
        other_scheme.scheme = Scheme::Other("file".into());
        assert!(built(other_scheme).is_err());
    }

    #[test]
    fn more_header_names_than_a_header_map_holds_are_refused_not_a_panic() {
        // 33 000 distinct names, about 100 KB: within a 128 KiB field limit
        // (a plugin with 512 MiB of memory) but over the 32 768 names an
        // `http::HeaderMap` holds.
        const DIGITS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        let name = |i: usize| -> String {
            [i / (36 * 36), (i / 36) % 36, i % 36]
                .iter()
                .map(|&d| DIGITS[d] as char)
                .collect()
        };
        let mut r = request("/", &[], b"");
        r.headers = (0..33_000).map(|i| (name(i), Vec::new())).collect();
        let err = build(r, 128 << 10, |_| false).unwrap_err();
        assert_eq!(err, TOO_MANY);
        // Just under: the host's own `host` header is the one too many.
        let mut r = request("/", &[], b"");
        r.headers = (0..32_768).map(|i| (name(i), Vec::new())).collect();
        let err = build(r, 128 << 10, |_| false).unwrap_err();
        assert_eq!(err, TOO_MANY);
    }

    #[test]
    fn headers_over_the_field_limit_are_refused() {
        let big = vec![b'a'; 9 << 10];
        let r = request("/", &[("x-a", &big), ("x-b", &big)], b"");
        let err = built(r).unwrap_err();
        assert!(err.contains("headers larger than"), "{err}");
    }
}
