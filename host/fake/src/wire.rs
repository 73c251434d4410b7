//! Wire-level helpers shared by the fakes: query strings, bearer-token
//! checks, timestamps and the state lock.

use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use http::HeaderMap;

/// Locks a fake's state, shrugging off poisoning (a panicking test thread
/// must not take the fake down with it).
pub(crate) fn lock<T>(state: &Mutex<T>) -> MutexGuard<'_, T> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A parsed query string (`%XX` and `+` decoded), keeping repeated keys.
#[derive(Clone, Debug, Default)]
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Parses the query of a URI (`uri.query()`).
    #[must_use]
    pub fn parse(raw: Option<&str>) -> Self {
        let pairs = raw
            .unwrap_or("")
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (percent_decode(k), percent_decode(v))
            })
            .collect();
        Query(pairs)
    }
    /// Every value of `key`, in order.
    pub fn all<'a>(&'a self, key: &str) -> impl Iterator<Item = &'a str> {
        self.0
            .iter()
            .filter(move |(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
    /// The pairs with `key` set to `value` (replacing every earlier one),
    /// encoded as a query string.
    #[must_use]
    pub fn with(&self, key: &str, value: &str) -> String {
        // Everything but RFC 3986's unreserved characters is escaped.
        const ESCAPED: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
            .remove(b'-')
            .remove(b'_')
            .remove(b'.')
            .remove(b'~');
        let encode = |s: &str| percent_encoding::utf8_percent_encode(s, ESCAPED).to_string();
        self.0
            .iter()
            .filter(|(k, _)| k != key)
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain([(key, value)])
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect::<Vec<_>>()
            .join("&")
    }

    /// The last value of `key`.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&str> {
        self.all(key).last()
    }
}

/// Decodes `%XX` escapes and `+` (form encoding); malformed escapes are kept
/// literally and invalid UTF-8 is replaced.
pub(crate) fn percent_decode(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        (b as char).to_digit(16).map(|d| d as u8)
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'+' {
            out.push(b' ');
        } else if b == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(hi * 16 + lo);
            i += 2;
        } else {
            out.push(b);
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether the request carries `Authorization: Bearer <token>`.
pub(crate) fn authorized(headers: &HeaderMap, token: &str) -> bool {
    let Some(value) = headers
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    match value.trim().split_once(' ') {
        Some((scheme, given)) => scheme.eq_ignore_ascii_case("bearer") && given.trim() == token,
        None => false,
    }
}

pub(crate) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

pub(crate) fn rfc3339_now() -> String {
    rfc3339(unix_now())
}

/// Formats a Unix timestamp as `YYYY-MM-DDTHH:MM:SS+00:00`, like the API.
pub(crate) fn rfc3339(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil-from-days (proleptic Gregorian), after Howard Hinnant.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}+00:00",
        rem / 3_600,
        rem % 3_600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use http::header::HeaderValue;

    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00+00:00");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00+00:00");
        assert_eq!(rfc3339(1_735_689_599), "2024-12-31T23:59:59+00:00");
    }

    #[test]
    fn query_decoding() {
        let q = Query::parse(Some(
            "label_selector=env%3D%3Dprod%2Ctier+in+(a%2Cb)&status=running&status=off&bad=%zz",
        ));
        assert_eq!(q.get("label_selector"), Some("env==prod,tier in (a,b)"));
        assert_eq!(q.all("status").collect::<Vec<_>>(), ["running", "off"]);
        assert_eq!(q.get("bad"), Some("%zz"));
        assert_eq!(q.get("missing"), None);
    }

    #[test]
    fn auth_header_parsing() {
        let mut h = HeaderMap::new();
        assert!(!authorized(&h, "t"));
        h.insert(
            http::header::AUTHORIZATION,
            HeaderValue::from_static("Bearer t"),
        );
        assert!(authorized(&h, "t"));
        h.insert(
            http::header::AUTHORIZATION,
            HeaderValue::from_static("bearer  t"),
        );
        assert!(authorized(&h, "t"));
        h.insert(
            http::header::AUTHORIZATION,
            HeaderValue::from_static("Basic t"),
        );
        assert!(!authorized(&h, "t"));
        h.insert(
            http::header::AUTHORIZATION,
            HeaderValue::from_static("Bearer tt"),
        );
        assert!(!authorized(&h, "t"));
    }
}

/// A fake's HTTP server task on a loopback address: started by
/// [`Server::start`], stopped gracefully by [`Server::shutdown`] or at once
/// when dropped, so a fake never outlives its test.
#[derive(Debug)]
pub(crate) struct Server {
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Server {
    /// Binds `addr` (loopback only: a fake must never be reachable from the
    /// network) and serves `router` on it; `name` is for messages.
    pub(crate) async fn start(
        name: &str,
        addr: std::net::SocketAddr,
        router: axum::Router,
    ) -> anyhow::Result<Self> {
        use anyhow::Context as _;
        if !addr.ip().is_loopback() {
            anyhow::bail!("fake {name}: refusing to listen on non-loopback address {addr}");
        }
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("fake {name}: binding {addr}"))?;
        let addr = listener
            .local_addr()
            .with_context(|| format!("fake {name}: local address"))?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let label = name.to_string();
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, router).with_graceful_shutdown(async move {
                // Either an explicit stop or the sender being dropped.
                let _ = stopped.await;
            });
            if let Err(err) = serve.await {
                tracing::warn!(%err, "fake {label} server failed");
            }
        });
        tracing::debug!(%addr, "fake {name} started");
        Ok(Self {
            addr,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// The address actually bound.
    pub(crate) fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Stops accepting connections, lets in-flight requests finish (for at
    /// most 5 seconds) and waits for the task to end.
    pub(crate) async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(std::time::Duration::from_secs(5), &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
