//! Record a plugin's HTTP exchanges to a cassette file and replay them
//! offline.
//!
//! A cassette is JSON: the interactions in the order they happened, each a
//! request (method, URL, headers, body) and the response the plugin got.
//! Secrets never reach the file: every value of the plugin's secrets is
//! replaced by `{{secret:NAME}}` wherever it appears (URL, headers, bodies),
//! and credential headers (`Authorization`, `Cookie`, session tokens) are
//! dropped whatever they hold, so signatures made with a secret do not
//! leak it either.
//!
//! On replay a request is answered by the first unused interaction with the
//! same method, URL and body (after the same redaction; JSON bodies compare
//! as JSON, form bodies as sorted fields; headers are not compared, since
//! dates and signatures change on every run). A request the cassette does
//! not hold fails, and the replayer keeps a diff against the closest
//! recorded request for the report.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use anyhow::Context as _;
use base64::Engine as _;
use bytes::Bytes;
use wasmprov_host::intercept::OutgoingRequest;

/// Format version written to and accepted from cassette files.
pub const VERSION: u32 = 1;

/// Headers that carry credentials: never written to a cassette.
const CREDENTIAL_HEADERS: [&str; 6] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "set-cookie",
    "x-amz-security-token",
    "x-api-key",
];

/// A recorded session.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cassette {
    /// Format version ([`VERSION`]).
    pub version: u32,
    /// The plugin recorded.
    pub plugin: String,
    /// What the plugin talked to when this was recorded.
    pub recorded_against: String,
    /// The exchanges, in order.
    pub interactions: Vec<Interaction>,
}

/// One request and its response.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interaction {
    /// What the plugin sent.
    pub request: RecordedRequest,
    /// What it got back.
    pub response: RecordedResponse,
}

/// A request as recorded (redacted).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedRequest {
    /// Method.
    pub method: String,
    /// Full URL as the plugin wrote it.
    pub url: String,
    /// Headers, credential headers left out.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Body.
    #[serde(default, skip_serializing_if = "RecordedBody::is_empty")]
    pub body: RecordedBody,
}

/// A response as recorded (redacted).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedResponse {
    /// Status code.
    pub status: u16,
    /// Headers, in order (a name may repeat).
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// Body.
    #[serde(default, skip_serializing_if = "RecordedBody::is_empty")]
    pub body: RecordedBody,
}

/// A body: text when it is UTF-8, else base64.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(untagged)]
pub enum RecordedBody {
    /// No body.
    #[default]
    Empty,
    /// A UTF-8 body.
    Text(String),
    /// Anything else.
    Binary {
        /// The bytes, base64.
        base64: String,
    },
}

impl RecordedBody {
    fn is_empty(&self) -> bool {
        matches!(self, Self::Empty)
    }

    fn from_bytes(bytes: &[u8], redact: &Redactor) -> Self {
        if bytes.is_empty() {
            return Self::Empty;
        }
        match std::str::from_utf8(bytes) {
            Ok(text) => Self::Text(redact.text(text)),
            Err(_) => Self::Binary {
                base64: base64::engine::general_purpose::STANDARD.encode(bytes),
            },
        }
    }

    fn to_bytes(&self) -> anyhow::Result<Bytes> {
        Ok(match self {
            Self::Empty => Bytes::new(),
            Self::Text(t) => Bytes::from(t.clone()),
            Self::Binary { base64 } => Bytes::from(
                base64::engine::general_purpose::STANDARD
                    .decode(base64)
                    .context("cassette: a binary body is not base64")?,
            ),
        })
    }

    fn text(&self) -> String {
        match self {
            Self::Empty => String::new(),
            Self::Text(t) => t.clone(),
            Self::Binary { base64 } => format!("<binary, base64 {base64}>"),
        }
    }
}

/// Replaces secret values by `{{secret:NAME}}`.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    /// (name, value), longest value first so that one secret containing
    /// another is replaced whole.
    secrets: Vec<(String, String)>,
}

impl Redactor {
    /// A redactor for these (name, value) pairs. Values shorter than four
    /// characters are ignored: replacing them would garble everything.
    #[must_use]
    pub fn new(secrets: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut secrets: Vec<(String, String)> =
            secrets.into_iter().filter(|(_, v)| v.len() >= 4).collect();
        secrets.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
        Self { secrets }
    }

    /// `text` with every secret value replaced.
    #[must_use]
    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (name, value) in &self.secrets {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), &format!("{{{{secret:{name}}}}}"));
            }
        }
        out
    }

    fn request(&self, req: &OutgoingRequest) -> RecordedRequest {
        let headers = req
            .headers
            .iter()
            .filter(|(name, _)| !CREDENTIAL_HEADERS.contains(&name.as_str()))
            .map(|(name, value)| {
                (
                    name.as_str().to_string(),
                    self.text(&String::from_utf8_lossy(value.as_bytes())),
                )
            })
            .collect();
        RecordedRequest {
            method: req.method.as_str().to_string(),
            url: self.text(&req.uri.to_string()),
            headers,
            body: RecordedBody::from_bytes(&req.body, self),
        }
    }

    fn response(&self, resp: &http::Response<Bytes>) -> RecordedResponse {
        RecordedResponse {
            status: resp.status().as_u16(),
            headers: resp
                .headers()
                .iter()
                .filter(|(name, _)| !CREDENTIAL_HEADERS.contains(&name.as_str()))
                .map(|(name, value)| {
                    (
                        name.as_str().to_string(),
                        self.text(&String::from_utf8_lossy(value.as_bytes())),
                    )
                })
                .collect(),
            body: RecordedBody::from_bytes(resp.body(), self),
        }
    }
}

impl Cassette {
    /// Reads a cassette file.
    ///
    /// # Errors
    /// When it cannot be read, is not a cassette, or has another version.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading cassette {}", path.display()))?;
        let cassette: Self = serde_json::from_str(&text)
            .with_context(|| format!("cassette {} is not a cassette", path.display()))?;
        if cassette.version != VERSION {
            anyhow::bail!(
                "cassette {} has format version {}; this wasmprov reads version {VERSION}",
                path.display(),
                cassette.version
            );
        }
        Ok(cassette)
    }

    /// Writes the cassette (pretty JSON), replacing the file.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn save(&self, path: &Path) -> anyhow::Result<()> {
        let mut text = serde_json::to_string_pretty(self).context("serializing the cassette")?;
        text.push('\n');
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
    }
}

/// Records exchanges as they happen.
#[derive(Debug)]
pub struct Recorder {
    redact: Redactor,
    cassette: Mutex<Cassette>,
}

impl Recorder {
    /// A recorder for `plugin`.
    #[must_use]
    pub fn new(plugin: &str, recorded_against: &str, redact: Redactor) -> Self {
        Self {
            redact,
            cassette: Mutex::new(Cassette {
                version: VERSION,
                plugin: plugin.to_string(),
                recorded_against: recorded_against.to_string(),
                interactions: Vec::new(),
            }),
        }
    }

    /// Adds one exchange.
    pub fn record(&self, req: &OutgoingRequest, resp: &http::Response<Bytes>) {
        let interaction = Interaction {
            request: self.redact.request(req),
            response: self.redact.response(resp),
        };
        if let Ok(mut c) = self.cassette.lock() {
            c.interactions.push(interaction);
        }
    }

    /// What was recorded so far.
    #[must_use]
    pub fn cassette(&self) -> Cassette {
        self.cassette.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

/// A request the cassette could not answer.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Unrecorded {
    /// `METHOD URL` of the request.
    pub request: String,
    /// Unified diff against the closest recorded request (`-` recorded,
    /// `+` seen), or a note that nothing was close.
    pub diff: String,
}

/// Answers requests from a cassette.
#[derive(Debug)]
pub struct Replayer {
    redact: Redactor,
    cassette: Cassette,
    used: Mutex<Vec<bool>>,
    unrecorded: Mutex<Vec<Unrecorded>>,
}

impl Replayer {
    /// A replayer of `cassette`; `redact` must name the same secrets as the
    /// recording (their values may differ).
    #[must_use]
    pub fn new(cassette: Cassette, redact: Redactor) -> Self {
        Self {
            redact,
            used: Mutex::new(vec![false; cassette.interactions.len()]),
            cassette,
            unrecorded: Mutex::new(Vec::new()),
        }
    }

    /// The cassette's response to `req`, or `None` (and a diff kept) when it
    /// holds none.
    pub fn answer(&self, req: &OutgoingRequest) -> Option<http::Response<Bytes>> {
        let seen = self.redact.request(req);
        let mut used = self.used.lock().ok()?;
        let found = self
            .cassette
            .interactions
            .iter()
            .enumerate()
            .find(|(i, it)| !used[*i] && same_request(&it.request, &seen));
        let Some((index, interaction)) = found else {
            drop(used);
            let diff = self.closest_diff(&seen);
            if let Ok(mut u) = self.unrecorded.lock() {
                u.push(Unrecorded {
                    request: format!("{} {}", seen.method, seen.url),
                    diff,
                });
            }
            return None;
        };
        used[index] = true;
        let recorded = &interaction.response;
        let mut builder = http::Response::builder().status(recorded.status);
        for (name, value) in &recorded.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        builder.body(recorded.body.to_bytes().ok()?).ok()
    }

    fn closest_diff(&self, seen: &RecordedRequest) -> String {
        let path = |url: &str| url.split('?').next().unwrap_or_default().to_string();
        let used = self.used.lock().map(|u| u.clone()).unwrap_or_default();
        let candidates = || {
            self.cassette
                .interactions
                .iter()
                .enumerate()
                .filter(|(i, _)| !used.get(*i).copied().unwrap_or(true))
                .map(|(_, it)| &it.request)
        };
        let closest = candidates()
            .find(|r| r.method == seen.method && path(&r.url) == path(&seen.url))
            .or_else(|| candidates().find(|r| r.method == seen.method))
            .or_else(|| candidates().next());
        match closest {
            None => "the cassette has no unused interaction left".into(),
            Some(recorded) => {
                let a = describe_request(recorded);
                let b = describe_request(seen);
                similar::TextDiff::from_lines(&a, &b)
                    .unified_diff()
                    .header("recorded", "seen")
                    .to_string()
            }
        }
    }

    /// Requests the cassette could not answer.
    #[must_use]
    pub fn unrecorded(&self) -> Vec<Unrecorded> {
        self.unrecorded
            .lock()
            .map(|u| u.clone())
            .unwrap_or_default()
    }

    /// How many recorded interactions were never asked for.
    #[must_use]
    pub fn unused(&self) -> usize {
        self.used
            .lock()
            .map(|u| u.iter().filter(|x| !**x).count())
            .unwrap_or(0)
    }
}

/// Whether two (redacted) requests are the same for replay.
fn same_request(a: &RecordedRequest, b: &RecordedRequest) -> bool {
    a.method == b.method && a.url == b.url && same_body(&a.body.text(), &b.body.text())
}

fn same_body(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    if let (Ok(x), Ok(y)) = (
        serde_json::from_str::<serde_json::Value>(a),
        serde_json::from_str::<serde_json::Value>(b),
    ) {
        return x == y;
    }
    a.contains('=') && form_fields(a) == form_fields(b)
}

fn form_fields(s: &str) -> Vec<&str> {
    let mut fields: Vec<&str> = s.split('&').collect();
    fields.sort_unstable();
    fields
}

/// A request as text for diffs: the request line, then the body (pretty
/// JSON, or one form field per line).
fn describe_request(r: &RecordedRequest) -> String {
    let body = r.body.text();
    let body = match serde_json::from_str::<serde_json::Value>(&body) {
        Ok(v) => serde_json::to_string_pretty(&v).unwrap_or(body),
        Err(_) if body.contains('=') && !body.contains(char::is_whitespace) => {
            let mut fields: Vec<&str> = body.split('&').collect();
            fields.sort_unstable();
            fields.join("\n")
        }
        Err(_) => body,
    };
    format!("{} {}\n\n{body}\n", r.method, r.url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(method: &str, url: &str, body: &str, token: &str) -> OutgoingRequest {
        let mut headers = http::HeaderMap::new();
        headers.insert(
            http::header::AUTHORIZATION,
            format!("Bearer {token}").parse().unwrap(),
        );
        headers.insert("x-note", format!("key {token}").parse().unwrap());
        OutgoingRequest {
            plugin: "p".into(),
            method: method.parse().unwrap(),
            uri: url.parse().unwrap(),
            headers,
            body: Bytes::from(body.to_string()),
        }
    }

    fn resp(status: u16, body: &str) -> http::Response<Bytes> {
        http::Response::builder()
            .status(status)
            .body(Bytes::from(body.to_string()))
            .unwrap()
    }

    #[test]
    fn records_without_secrets_and_replays_in_order() {
        let secret = "s3cr3t-token-value";
        let recorder = Recorder::new(
            "p",
            "test",
            Redactor::new([("token".to_string(), secret.to_string())]),
        );
        let list = req("GET", "https://api.example/v1/nodes?owner=o", "", secret);
        recorder.record(&list, &resp(200, r#"{"nodes":[]}"#));
        let create = req(
            "POST",
            "https://api.example/v1/nodes",
            &format!(r#"{{"name":"a","key":"{secret}"}}"#),
            secret,
        );
        recorder.record(&create, &resp(201, r#"{"node":{"id":"n1"}}"#));
        recorder.record(&list, &resp(200, r#"{"nodes":[{"id":"n1"}]}"#));
        let cassette = recorder.cassette();
        let text = serde_json::to_string(&cassette).unwrap();
        assert!(!text.contains(secret), "{text}");
        assert!(text.contains("{{secret:token}}"));
        assert!(!text.to_lowercase().contains("authorization"));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        cassette.save(&path).unwrap();
        let loaded = Cassette::load(&path).unwrap();
        assert_eq!(loaded, cassette);

        // Replayed with another secret value: same redaction, same answers.
        let other = "another-secret-value";
        let replay = Replayer::new(
            loaded,
            Redactor::new([("token".to_string(), other.to_string())]),
        );
        let list = req("GET", "https://api.example/v1/nodes?owner=o", "", other);
        assert_eq!(replay.answer(&list).unwrap().body(), r#"{"nodes":[]}"#);
        let create = req(
            "POST",
            "https://api.example/v1/nodes",
            &format!(r#"{{ "key": "{other}", "name": "a" }}"#),
            other,
        );
        assert_eq!(replay.answer(&create).unwrap().status(), 201);
        assert_eq!(
            replay.answer(&list).unwrap().body(),
            r#"{"nodes":[{"id":"n1"}]}"#
        );
        assert_eq!(replay.unused(), 0);
        assert!(replay.unrecorded().is_empty());
    }

    #[test]
    fn an_unrecorded_request_fails_with_a_diff() {
        let recorder = Recorder::new("p", "test", Redactor::default());
        recorder.record(
            &req(
                "POST",
                "https://api.example/v1/nodes",
                r#"{"type":"small"}"#,
                "t",
            ),
            &resp(201, "{}"),
        );
        let replay = Replayer::new(recorder.cassette(), Redactor::default());
        let seen = req(
            "POST",
            "https://api.example/v1/nodes",
            r#"{"type":"large"}"#,
            "t",
        );
        assert!(replay.answer(&seen).is_none());
        let unrecorded = replay.unrecorded();
        assert_eq!(unrecorded.len(), 1);
        assert_eq!(unrecorded[0].request, "POST https://api.example/v1/nodes");
        let diff = &unrecorded[0].diff;
        assert!(diff.contains("-  \"type\": \"small\""), "{diff}");
        assert!(diff.contains("+  \"type\": \"large\""), "{diff}");
    }

    #[test]
    fn form_bodies_match_in_any_order() {
        assert!(same_body("Action=Run&B=2", "B=2&Action=Run"));
        assert!(!same_body("Action=Run&B=2", "B=3&Action=Run"));
    }

    #[test]
    fn refuses_other_versions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.json");
        std::fs::write(
            &path,
            r#"{"version":9,"plugin":"p","recorded_against":"x","interactions":[]}"#,
        )
        .unwrap();
        let err = Cassette::load(&path).unwrap_err().to_string();
        assert!(err.contains("version 9"), "{err}");
    }
}
