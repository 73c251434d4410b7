//! Attack: reach another virtual host through a granted address
//! (`[config] authority`, such as `127.0.0.1:PORT`): a forged `Host` header
//! through the SDK and through the raw bindings, a CRLF-injected header, and
//! an absolute-form request target, through `wasi:http` and through the
//! contract's one-call `http.send` (raw, past the SDK's own URL split), plus
//! a smuggled length or transfer coding. Each outcome is a label.

use hostile_kit::prelude::*;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{Fields, Method, OutgoingBody, OutgoingRequest, Scheme};
use wasmprov_guest::wit::wasmprov::provisioner0_3_0::http as one_call;

/// One one-call case: label, path, headers, body.
type Case = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static [u8],
);

/// Sends a raw `http.send` GET with these headers, path and body; says what
/// happened.
fn one(authority: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> String {
    let request = one_call::Request {
        method: Method::Get,
        scheme: Scheme::Http,
        authority: authority.to_string(),
        path_with_query: path.to_string(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
            .collect(),
        body: body.to_vec(),
    };
    match one_call::send(&request) {
        Ok(resp) => format!("reached: status {}", resp.status),
        Err(one_call::SendError::BadRequest(why)) => format!("refused: {why}"),
        Err(one_call::SendError::Failed(code)) => format!("error code: {code:?}"),
        Err(one_call::SendError::BodyFailed(code)) => format!("body error code: {code:?}"),
    }
}

/// Sends a raw GET with these headers and this path; says what happened.
fn raw(authority: &str, path: &str, headers: &[(&str, &str)]) -> String {
    let fields = Fields::new();
    for (k, v) in headers {
        if let Err(e) = fields.append(k, v.as_bytes()) {
            return format!("header refused: {e:?}");
        }
    }
    let req = OutgoingRequest::new(fields);
    let _ = req.set_method(&Method::Get);
    let _ = req.set_scheme(Some(&Scheme::Http));
    if req.set_authority(Some(authority)).is_err() {
        return "authority refused".into();
    }
    if req.set_path_with_query(Some(path)).is_err() {
        return "path refused".into();
    }
    let Ok(body) = req.body() else {
        return "no body".into();
    };
    let future = match outgoing_handler::handle(req, None) {
        Ok(f) => f,
        Err(e) => return format!("handle refused: {e:?}"),
    };
    let _ = OutgoingBody::finish(body, None);
    let response = loop {
        match future.get() {
            Some(r) => break r,
            None => future.subscribe().block(),
        }
    };
    match response {
        Ok(Ok(resp)) => format!("reached: status {}", resp.status()),
        Ok(Err(code)) => format!("error code: {code:?}"),
        Err(()) => "response lost".into(),
    }
}

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let authority = cfg("authority")?;
        let url = format!("http://{authority}/");
        let mut labels = Labels::new();
        let sdk = match Request::get(&url).header("Host", "evil.example").send() {
            Ok(resp) => format!("reached: status {}", resp.status),
            Err(e) => format!("{:?}", Error::from(e)),
        };
        labels.insert("sdk host header".into(), sdk);
        labels.insert(
            "raw host header".into(),
            raw(&authority, "/", &[("host", "evil.example")]),
        );
        labels.insert(
            "raw HOST header".into(),
            raw(&authority, "/", &[("HOST", "evil.example")]),
        );
        labels.insert(
            "crlf injection".into(),
            raw(&authority, "/", &[("x-probe", "1\r\nHost: evil.example")]),
        );
        labels.insert(
            "absolute-form target".into(),
            raw(&authority, "http://evil.example/", &[]),
        );
        labels.insert(
            "authority-form target".into(),
            raw(&authority, "evil.example:80", &[]),
        );
        let cases: [Case; 8] = [
            (
                "one-call host header",
                "/",
                &[("host", "evil.example")],
                b"",
            ),
            (
                "one-call HOST header",
                "/",
                &[("HOST", "evil.example")],
                b"",
            ),
            (
                "one-call crlf injection",
                "/",
                &[("x-probe", "1\r\nHost: evil.example")],
                b"",
            ),
            (
                "one-call absolute-form target",
                "http://evil.example/",
                &[],
                b"",
            ),
            (
                "one-call authority-form target",
                "evil.example:80",
                &[],
                b"",
            ),
            (
                "one-call chunked",
                "/",
                &[("transfer-encoding", "chunked")],
                b"0\r\n\r\nGET / HTTP/1.1\r\nHost: evil.example\r\n\r\n",
            ),
            (
                "one-call short length",
                "/",
                &[("content-length", "0")],
                b"GET / HTTP/1.1\r\nHost: evil.example\r\n\r\n",
            ),
            ("one-call plain", "/", &[], b""),
        ];
        for (key, path, headers, body) in cases {
            labels.insert(key.into(), one(&authority, path, headers, body));
        }
        Ok(node(req, labels))
    }
);
