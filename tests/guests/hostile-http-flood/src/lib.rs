//! Attack: start `[config] count` (default 10 000) requests to
//! `[config] authority` + `[config] path` through the raw `wasi:http`
//! bindings before waiting for any, to get past the in-flight cap. Reports
//! how many got a response, how many hit the connection limit, and anything else.

use hostile_kit::prelude::*;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, FutureIncomingResponse, Method, OutgoingBody, OutgoingRequest, Scheme,
};

fn start(authority: &str, path: &str) -> Result<FutureIncomingResponse, String> {
    let req = OutgoingRequest::new(Fields::new());
    let _ = req.set_method(&Method::Get);
    let _ = req.set_scheme(Some(&Scheme::Http));
    req.set_authority(Some(authority))
        .map_err(|()| "authority refused".to_string())?;
    req.set_path_with_query(Some(path))
        .map_err(|()| "path refused".to_string())?;
    let body = req.body().map_err(|()| "no body".to_string())?;
    let future = outgoing_handler::handle(req, None).map_err(|e| format!("{e:?}"))?;
    let _ = OutgoingBody::finish(body, None);
    Ok(future)
}

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let authority = cfg("authority")?;
        let path = cfg("path")?;
        let count: usize = cfg_or("count", 10_000)?;
        let mut futures = Vec::with_capacity(count);
        let mut refused_at_start = 0usize;
        let mut first_other = String::new();
        for _ in 0..count {
            match start(&authority, &path) {
                Ok(f) => futures.push(f),
                Err(e) => {
                    refused_at_start += 1;
                    if first_other.is_empty() {
                        first_other = e;
                    }
                }
            }
        }
        let (mut ok, mut limited, mut other) = (0usize, 0usize, 0usize);
        for future in futures {
            let response = loop {
                match future.get() {
                    Some(r) => break r,
                    None => future.subscribe().block(),
                }
            };
            match response {
                Ok(Ok(_resp)) => ok += 1,
                Ok(Err(ErrorCode::ConnectionLimitReached)) => limited += 1,
                Ok(Err(code)) => {
                    other += 1;
                    if first_other.is_empty() {
                        first_other = format!("{code:?}");
                    }
                }
                Err(()) => other += 1,
            }
        }
        Ok(observed(
            req,
            &[
                ("ok", &ok.to_string()),
                ("limited", &limited.to_string()),
                ("other", &other.to_string()),
                ("refused at start", &refused_at_start.to_string()),
                ("first other", &first_other),
            ],
        ))
    }
);
