//! Attack: POST an endless body to a denied URL (`[config] url` split into
//! `authority` and `path`), hoping the host keeps reading it while it
//! decides. Reports the bytes written before the host stopped reading, and
//! the answer.

use hostile_kit::prelude::*;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{Fields, Method, OutgoingBody, OutgoingRequest, Scheme};

hostile_kit::hostile!(
    |_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
        let authority = cfg("authority")?;
        let path = cfg("path")?;
        let limit: u64 = cfg_or("limit_bytes", 1 << 30)?;
        let request = OutgoingRequest::new(Fields::new());
        let _ = request.set_method(&Method::Post);
        let _ = request.set_scheme(Some(&Scheme::Http));
        let _ = request.set_authority(Some(&authority));
        let _ = request.set_path_with_query(Some(&path));
        let body = request
            .body()
            .map_err(|()| Error::Other("no body".into()))?;
        let future = outgoing_handler::handle(request, None)
            .map_err(|e| Error::Other(format!("handle: {e:?}")))?;
        let chunk = vec![b'x'; 4096];
        let mut written: u64 = 0;
        let mut write_error = String::from("none");
        if let Ok(stream) = body.write() {
            while written < limit {
                if let Err(e) = stream.blocking_write_and_flush(&chunk) {
                    write_error = format!("{e:?}");
                    break;
                }
                written += chunk.len() as u64;
            }
        }
        let _ = OutgoingBody::finish(body, None);
        let response = loop {
            match future.get() {
                Some(r) => break r,
                None => future.subscribe().block(),
            }
        };
        let answer = match response {
            Ok(Ok(resp)) => format!("reached: status {}", resp.status()),
            Ok(Err(code)) => format!("error code: {code:?}"),
            Err(()) => "response lost".into(),
        };
        Ok(observed(
            req,
            &[
                ("written", &written.to_string()),
                ("write error", &write_error),
                ("answer", &answer),
            ],
        ))
    }
);
