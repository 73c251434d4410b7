//! EC2 Query API requests: the form-encoded body, and its Signature
//! Version 4 signature made by the maintained `aws-sigv4` crate.
//!
//! Every call is `POST /` with a `application/x-www-form-urlencoded` body
//! (`Action=…&Version=2016-11-15&…`). The signer adds `X-Amz-Date`,
//! `Authorization` and, for temporary credentials, `X-Amz-Security-Token`
//! (which is part of the signed headers). The `Host` header is signed from
//! the endpoint's authority, which is what the HTTP client sends.

use std::time::SystemTime;

use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use wasmprov_guest::{Error, Result};

use crate::settings::Credentials;

/// The EC2 API version every request names.
pub const API_VERSION: &str = "2016-11-15";
/// The signing name of EC2.
pub const SERVICE: &str = "ec2";
/// The Elastic Load Balancing v2 API version every target group call names.
pub const ELB_API_VERSION: &str = "2015-12-01";
/// The signing name of Elastic Load Balancing (v1 and v2).
pub const ELB_SERVICE: &str = "elasticloadbalancing";
/// The content type of every request body.
pub const CONTENT_TYPE: &str = "application/x-www-form-urlencoded; charset=utf-8";

/// A request ready to send.
#[derive(Clone, PartialEq, Eq)]
pub struct SignedRequest {
    /// `<endpoint>/`.
    pub url: String,
    /// Headers to send, names lowercase: `content-type` and the signer's.
    pub headers: Vec<(String, String)>,
    /// The form-encoded body.
    pub body: String,
}

impl std::fmt::Debug for SignedRequest {
    /// Shows header names only: the values carry the session token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedRequest")
            .field("url", &self.url)
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("body", &self.body)
            .finish()
    }
}

impl SignedRequest {
    /// The first header named `name` (lowercase).
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Percent-encodes `s` as AWS does: every byte but `A-Z a-z 0-9 - _ . ~`.
#[must_use]
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `k1=v1&k2=v2…`, each part [`encode`]d, in the order given.
#[must_use]
pub fn form_encode(params: &[(String, String)]) -> String {
    params
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Signs a `POST <endpoint>/` with `body` for `region` at `time`.
///
/// # Errors
/// [`Error::InvalidConfig`] when the endpoint or the credentials cannot be
/// put in a request (such as a secret with a line break in it).
pub fn sign_post(
    endpoint: &str,
    region: &str,
    creds: &Credentials,
    body: String,
    time: SystemTime,
) -> Result<SignedRequest> {
    sign_form(endpoint, region, SERVICE, creds, body, time)
}

/// Signs a form-encoded Query API `POST <endpoint>/` for `service` (its
/// signing name: [`SERVICE`], [`ELB_SERVICE`]) in `region` at `time`.
///
/// # Errors
/// As [`sign_post`].
pub fn sign_form(
    endpoint: &str,
    region: &str,
    service: &str,
    creds: &Credentials,
    body: String,
    time: SystemTime,
) -> Result<SignedRequest> {
    sign_with(
        endpoint,
        region,
        service,
        &[("content-type", CONTENT_TYPE)],
        creds,
        body,
        time,
    )
}

/// The content type of AWS JSON 1.1 requests (the Price List API, SSM).
pub const JSON_CONTENT_TYPE: &str = "application/x-amz-json-1.1";

/// Signs an AWS JSON 1.1 `POST <endpoint>/` of `target` (`X-Amz-Target`,
/// such as `AmazonSSM.GetParameter`) for `service` (its signing name,
/// such as `ssm` or `pricing`) in `region`.
///
/// # Errors
/// As [`sign_post`].
pub fn sign_json(
    endpoint: &str,
    region: &str,
    service: &str,
    target: &str,
    creds: &Credentials,
    body: String,
    time: SystemTime,
) -> Result<SignedRequest> {
    sign_with(
        endpoint,
        region,
        service,
        &[
            ("content-type", JSON_CONTENT_TYPE),
            ("x-amz-target", target),
        ],
        creds,
        body,
        time,
    )
}

fn sign_with(
    endpoint: &str,
    region: &str,
    service: &str,
    headers: &[(&str, &str)],
    creds: &Credentials,
    body: String,
    time: SystemTime,
) -> Result<SignedRequest> {
    let url = format!("{}/", endpoint.trim_end_matches('/'));
    let identity: Identity = aws_credential_types::Credentials::new(
        creds.access_key_id.clone(),
        creds.secret_access_key.clone(),
        creds.session_token.clone(),
        None,
        "wasmprov-secrets",
    )
    .into();
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(region)
        .name(service)
        .time(time)
        .settings(SigningSettings::default())
        .build()
        .map_err(|e| Error::InvalidConfig(format!("cannot sign {service} requests: {e}")))?
        .into();
    let signable = SignableRequest::new(
        "POST",
        url.as_str(),
        headers.iter().copied(),
        SignableBody::Bytes(body.as_bytes()),
    )
    .map_err(|e| Error::InvalidConfig(format!("cannot sign a request to {url}: {e}")))?;
    let (instructions, _signature) = sign(signable, &params)
        .map_err(|e| Error::InvalidConfig(format!("cannot sign a request to {url}: {e}")))?
        .into_parts();
    let mut out: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    out.extend(
        instructions
            .headers()
            .map(|(k, v)| (k.to_ascii_lowercase(), v.to_string())),
    );
    Ok(SignedRequest {
        url,
        headers: out,
        body,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    /// 2015-08-30T12:36:00Z, the time of the AWS documentation's examples.
    fn doc_time() -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_440_938_160)
    }

    fn doc_creds(token: Option<&str>) -> Credentials {
        Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: token.map(Into::into),
        }
    }

    /// Splits `AWS4-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…`.
    fn auth_parts(auth: &str) -> (String, String, String) {
        let rest = auth.strip_prefix("AWS4-HMAC-SHA256 ").expect(auth);
        let mut cred = String::new();
        let mut signed = String::new();
        let mut sig = String::new();
        for part in rest.split(", ") {
            let (k, v) = part.split_once('=').unwrap();
            match k {
                "Credential" => cred = v.into(),
                "SignedHeaders" => signed = v.into(),
                "Signature" => sig = v.into(),
                other => panic!("{other}"),
            }
        }
        (cred, signed, sig)
    }

    #[test]
    fn encoding_matches_aws_rules() {
        assert_eq!(encode("a b+c/é~_.-*"), "a%20b%2Bc%2F%C3%A9~_.-%2A");
        let body = form_encode(&[
            ("Action".into(), "DescribeInstances".into()),
            ("Filter.1.Name".into(), "tag:wasmprov-owner".into()),
        ]);
        assert_eq!(
            body,
            "Action=DescribeInstances&Filter.1.Name=tag%3Awasmprov-owner"
        );
    }

    #[test]
    fn signature_has_the_credential_scope_and_signed_headers() {
        let body = form_encode(&[
            ("Action".into(), "DescribeInstances".into()),
            ("Version".into(), API_VERSION.into()),
        ]);
        let r = sign_post(
            "https://ec2.eu-west-1.amazonaws.com/",
            "eu-west-1",
            &doc_creds(None),
            body.clone(),
            doc_time(),
        )
        .unwrap();
        assert_eq!(r.url, "https://ec2.eu-west-1.amazonaws.com/");
        assert_eq!(r.body, body);
        assert_eq!(r.header("content-type"), Some(CONTENT_TYPE));
        assert_eq!(r.header("x-amz-date"), Some("20150830T123600Z"));
        assert_eq!(r.header("x-amz-security-token"), None);
        let (cred, signed, sig) = auth_parts(r.header("authorization").unwrap());
        assert_eq!(cred, "AKIDEXAMPLE/20150830/eu-west-1/ec2/aws4_request");
        assert_eq!(signed, "content-type;host;x-amz-date");
        assert_eq!(sig.len(), 64);
        assert!(sig.chars().all(|c| c.is_ascii_hexdigit()));

        // Deterministic, and the body is covered by the signature.
        let again = sign_post(
            "https://ec2.eu-west-1.amazonaws.com",
            "eu-west-1",
            &doc_creds(None),
            body,
            doc_time(),
        )
        .unwrap();
        assert_eq!(again, r);
        let other = sign_post(
            "https://ec2.eu-west-1.amazonaws.com",
            "eu-west-1",
            &doc_creds(None),
            "Action=RunInstances".into(),
            doc_time(),
        )
        .unwrap();
        assert_ne!(other.header("authorization"), r.header("authorization"));
    }

    /// The known-good example of the AWS General Reference ("Create a signed
    /// AWS API request", IAM `ListUsers`), signed here through `aws-sigv4`.
    #[test]
    fn known_good_vector_from_the_aws_documentation() {
        let identity: Identity = aws_credential_types::Credentials::new(
            "AKIDEXAMPLE",
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            None,
            None,
            "test",
        )
        .into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region("us-east-1")
            .name("iam")
            .time(doc_time())
            .settings(SigningSettings::default())
            .build()
            .unwrap()
            .into();
        let headers = [(
            "content-type",
            "application/x-www-form-urlencoded; charset=utf-8",
        )];
        let signable = SignableRequest::new(
            "GET",
            "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08",
            headers.iter().copied(),
            SignableBody::Bytes(b""),
        )
        .unwrap();
        let (instructions, signature) = sign(signable, &params).unwrap().into_parts();
        assert_eq!(
            signature,
            "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
        );
        let auth = instructions
            .headers()
            .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            .unwrap()
            .1
            .to_string();
        assert_eq!(
            auth,
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, \
             SignedHeaders=content-type;host;x-amz-date, \
             Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
        );
    }

    #[test]
    fn session_token_is_sent_and_signed() {
        let r = sign_post(
            "http://127.0.0.1:5000",
            "us-east-1",
            &doc_creds(Some("FQoGZXIvYXdzEXAMPLE/token+=")),
            "Action=DescribeInstances&Version=2016-11-15".into(),
            doc_time(),
        )
        .unwrap();
        assert_eq!(r.url, "http://127.0.0.1:5000/");
        assert_eq!(
            r.header("x-amz-security-token"),
            Some("FQoGZXIvYXdzEXAMPLE/token+=")
        );
        let (cred, signed, _) = auth_parts(r.header("authorization").unwrap());
        assert_eq!(cred, "AKIDEXAMPLE/20150830/us-east-1/ec2/aws4_request");
        assert_eq!(signed, "content-type;host;x-amz-date;x-amz-security-token");
        // A different token gives a different signature.
        let other = sign_post(
            "http://127.0.0.1:5000",
            "us-east-1",
            &doc_creds(Some("another")),
            "Action=DescribeInstances&Version=2016-11-15".into(),
            doc_time(),
        )
        .unwrap();
        assert_ne!(other.header("authorization"), r.header("authorization"));
        assert!(!format!("{r:?}").contains("token+="));
    }

    #[test]
    fn unusable_credentials_are_config_errors() {
        let bad = Credentials {
            access_key_id: "AKID".into(),
            secret_access_key: "s".into(),
            session_token: Some("line\nbreak".into()),
        };
        let e = sign_post("https://x", "us-east-1", &bad, String::new(), doc_time());
        assert!(matches!(e, Err(Error::InvalidConfig(_))), "{e:?}");
    }
}
