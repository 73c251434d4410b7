//! The fakes' own HTTP/1.1 client for servers on loopback (moto, a fake
//! started by command): one connection per request, closed by the server,
//! the whole answer read, bounded in time. The plugin's requests never go
//! through here; they take the host's path.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// Largest answer read (a fake's node list included).
const MAX_ANSWER: u64 = 64 << 20;

/// An HTTP answer.
#[derive(Debug)]
pub(crate) struct RawResponse {
    pub(crate) status: u16,
    /// Header names lowercase.
    #[cfg_attr(
        not(test),
        expect(dead_code, reason = "the tests hand moto's headers to the plugin")
    )]
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

/// `METHOD path` to `addr` with these headers (a `host` header is added
/// unless given) and `body`, answered within `limit`.
pub(crate) async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
    limit: Duration,
) -> anyhow::Result<RawResponse> {
    let exchange = async {
        let mut head = format!("{method} {path} HTTP/1.1\r\n");
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("host: {addr}\r\n"));
        }
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str(&format!(
            "connection: close\r\ncontent-length: {}\r\n\r\n",
            body.len()
        ));
        let mut sock = tokio::net::TcpStream::connect(addr)
            .await
            .context("connecting")?;
        sock.write_all(head.as_bytes())
            .await
            .context("sending the request")?;
        sock.write_all(body).await.context("sending the request")?;
        let mut raw = Vec::new();
        (&mut sock)
            .take(MAX_ANSWER)
            .read_to_end(&mut raw)
            .await
            .context("reading the response")?;
        parse_response(&raw)
    };
    tokio::time::timeout(limit, exchange)
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {} s", limit.as_secs()))?
}

/// Parses a whole HTTP/1.1 response (the server closed the connection).
pub(crate) fn parse_response(raw: &[u8]) -> anyhow::Result<RawResponse> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("the answer is not HTTP: {raw:?}"))?;
    let head = String::from_utf8_lossy(raw.get(..split).unwrap_or_default());
    let rest = raw.get(split + 4..).unwrap_or_default();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no status in {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let body = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        dechunk(rest)?
    } else if let Some(len) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        rest.get(..len)
            .ok_or_else(|| {
                anyhow::anyhow!("the answer ended after {} of {len} body bytes", rest.len())
            })?
            .to_vec()
    } else {
        rest.to_vec()
    };
    Ok(RawResponse {
        status,
        headers,
        body,
    })
}

/// Decodes a chunked body.
fn dechunk(mut rest: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or_else(|| anyhow::anyhow!("a chunked body ended early"))?;
        let size_text = String::from_utf8_lossy(rest.get(..line_end).unwrap_or_default());
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| anyhow::anyhow!("bad chunk size {size_text:?}"))?;
        rest = rest.get(line_end + 2..).unwrap_or_default();
        if size == 0 {
            return Ok(out);
        }
        out.extend_from_slice(
            rest.get(..size)
                .ok_or_else(|| anyhow::anyhow!("a chunk ended early"))?,
        );
        rest = rest.get(size + 2..).unwrap_or_default();
    }
}
