//! A fake cloud that runs as its own process, in any language, read through
//! the fake-control protocol (`wasmprov_fake::control`,
//! `docs/FAKE-PROTOCOL.md`): at a URL the caller gives, or started from a
//! command that prints its URL as the first line of its standard output.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use base64::Engine as _;
use bytes::Bytes;
use tokio::io::AsyncBufReadExt as _;
use wasmprov_api::tags::FlatTags;
use wasmprov_fake::control::{self, Info, NodeList, Plant, Planted, TagStyle};
use wasmprov_host::intercept::OutgoingRequest;

use super::loopback;
use crate::fake::{FakeCloud, NodeRecord, TruthNode};
use crate::faults::FaultKind;

/// How long one control request may take.
const CALL_LIMIT: Duration = Duration::from_secs(30);
/// How long a started fake may take to print its URL and answer `info`.
const START_LIMIT: Duration = Duration::from_secs(60);

/// The protocol's name of a fault kind the fake renders.
fn protocol_name(kind: FaultKind) -> Option<&'static str> {
    match kind {
        FaultKind::Capacity => Some("capacity"),
        FaultKind::Quota => Some("quota"),
        FaultKind::RateLimited => Some("rate_limited"),
        _ => None,
    }
}

/// A fake at a loopback URL, perhaps a process this value started (killed
/// when it is dropped).
pub(crate) struct Remote {
    addr: SocketAddr,
    url: String,
    info: Info,
    child: Option<tokio::process::Child>,
    /// A kit fake served in this process.
    serving: Option<wasmprov_fake::kit::Running>,
}

impl Remote {
    /// The fake at `url` (`http://127.0.0.1:PORT`, perhaps with a path,
    /// which is ignored: the control endpoints are at the root).
    pub(crate) async fn connect(url: &str) -> anyhow::Result<Self> {
        let addr = loopback_addr(url)?;
        let info = fetch_info(addr)
            .await
            .with_context(|| format!("the fake at {url} does not answer {}", control::INFO))?;
        Ok(Self {
            addr,
            url: url.to_string(),
            info,
            child: None,
            serving: None,
        })
    }

    /// A kit fake this process serves, read through the protocol like any.
    pub(crate) async fn serving(fake: wasmprov_fake::kit::Running) -> anyhow::Result<Self> {
        let mut remote = Self::connect(&fake.url()).await?;
        remote.serving = Some(fake);
        Ok(remote)
    }

    /// Runs `command` with `sh -c` and reads the fake's URL from the first
    /// line of its standard output; the process is killed when this value
    /// is dropped (its standard input closes too).
    pub(crate) async fn start(command: &str) -> anyhow::Result<Self> {
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting the fake: sh -c {command:?}"))?;
        let stdout = child.stdout.take().context("the fake's standard output")?;
        let first_line = async {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            lines.next_line().await
        };
        let line = match tokio::time::timeout(START_LIMIT, first_line).await {
            Err(_) => anyhow::bail!(
                "the fake started by {command:?} printed no URL within {} s (its first line of output must be its URL, such as http://127.0.0.1:8080)",
                START_LIMIT.as_secs()
            ),
            Ok(Err(e)) => anyhow::bail!("reading the output of {command:?}: {e}"),
            Ok(Ok(None)) => {
                let status = child.wait().await.ok();
                anyhow::bail!(
                    "the fake started by {command:?} exited ({}) before printing its URL",
                    status.map_or_else(|| "status unknown".into(), |s| s.to_string())
                )
            }
            Ok(Ok(Some(line))) => line,
        };
        let url = line.trim().to_string();
        let addr = loopback_addr(&url)
            .with_context(|| format!("the first line {command:?} printed is not the fake's URL"))?;
        let info = tokio::time::timeout(START_LIMIT, async {
            loop {
                match fetch_info(addr).await {
                    Ok(info) => return Ok(info),
                    Err(e) if is_refused(&e) => {
                        if let Ok(Some(status)) = child.try_wait() {
                            anyhow::bail!("it exited ({status}) after printing its URL");
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(e) => return Err(e),
                }
            }
        })
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {} s", START_LIMIT.as_secs()))
        .and_then(|r| r)
        .with_context(|| {
            format!(
                "the fake started by {command:?} at {url} does not answer {}",
                control::INFO
            )
        })?;
        Ok(Self {
            addr,
            url,
            info,
            child: Some(child),
            serving: None,
        })
    }

    async fn call(&self, method: &str, path: &str, body: &[u8]) -> anyhow::Result<(u16, Vec<u8>)> {
        let headers = [("content-type".to_string(), "application/json".to_string())];
        let resp = loopback::request(self.addr, method, path, &headers, body, CALL_LIMIT)
            .await
            .with_context(|| format!("{method} {path} to the fake at {}", self.url))?;
        Ok((resp.status, resp.body))
    }
}

impl Drop for Remote {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.start_kill();
        }
    }
}

fn is_refused(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
    })
}

/// The loopback address of an `http://` URL; anything else is refused (a
/// fake must never be on the network: the suite sends it credentials).
fn loopback_addr(url: &str) -> anyhow::Result<SocketAddr> {
    let uri: http::Uri = url
        .parse()
        .with_context(|| format!("{url:?} is not a URL"))?;
    if uri.scheme_str() != Some("http") {
        anyhow::bail!("a fake's URL must be http://127.0.0.1:PORT (or [::1]), not {url:?}");
    }
    let host = uri.host().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let ip: std::net::IpAddr = if host == "localhost" {
        std::net::Ipv4Addr::LOCALHOST.into()
    } else {
        host.parse().with_context(|| {
            format!("the host of a fake's URL must be a loopback address, not {host:?}")
        })?
    };
    if !ip.is_loopback() {
        anyhow::bail!("a fake must listen on loopback; {url:?} is not");
    }
    let port = uri
        .port_u16()
        .with_context(|| format!("the fake's URL {url:?} has no port"))?;
    Ok(SocketAddr::new(ip, port))
}

async fn fetch_info(addr: SocketAddr) -> anyhow::Result<Info> {
    let resp = loopback::request(addr, "GET", control::INFO, &[], b"", CALL_LIMIT).await?;
    if resp.status != 200 {
        anyhow::bail!(
            "HTTP {}: {}",
            resp.status,
            String::from_utf8_lossy(&resp.body)
                .chars()
                .take(300)
                .collect::<String>()
        );
    }
    let info: Info =
        serde_json::from_slice(&resp.body).context("its answer is not the protocol's info")?;
    if let Some(bad) = info
        .faults
        .keys()
        .find(|k| !["capacity", "quota", "rate_limited"].contains(&k.as_str()))
    {
        anyhow::bail!(
            "its info names fault {bad:?}; the kinds are capacity, quota and rate_limited"
        );
    }
    Ok(info)
}

#[async_trait::async_trait]
impl FakeCloud for Remote {
    fn describe(&self) -> String {
        format!("{} at {}", self.info.name, self.url)
    }

    fn http_target(&self) -> Option<SocketAddr> {
        Some(self.addr)
    }

    fn secret(&self, env: &str) -> Option<String> {
        self.info
            .secrets
            .get(env)
            .or_else(|| self.info.secrets.get(control::ANY_SECRET))
            .cloned()
    }

    fn config(&self) -> BTreeMap<String, String> {
        self.info.config.clone()
    }

    async fn nodes(&self) -> anyhow::Result<Vec<TruthNode>> {
        let (status, body) = self.call("GET", control::NODES, b"").await?;
        if status != 200 {
            anyhow::bail!("{} answered HTTP {status}", control::NODES);
        }
        let list: NodeList = serde_json::from_slice(&body).with_context(|| {
            format!(
                "{} of {} is not the protocol's node list",
                control::NODES,
                self.url
            )
        })?;
        list.nodes
            .into_iter()
            .map(|n| {
                let mut labels = n.labels;
                if self.info.tags == TagStyle::Flat || !n.tags.is_empty() {
                    labels.extend(FlatTags::DIGITALOCEAN.decode_all(&n.tags));
                }
                let user_data = match n.user_data_base64 {
                    None => None,
                    Some(b) => Some(
                        base64::engine::general_purpose::STANDARD
                            .decode(b)
                            .with_context(|| {
                                format!("node {}: user_data_base64 is not base64", n.id)
                            })?,
                    ),
                };
                Ok(TruthNode {
                    id: n.id,
                    labels,
                    alive: n.alive,
                    user_data,
                })
            })
            .collect()
    }

    async fn record(&self, id: &str) -> anyhow::Result<Option<NodeRecord>> {
        let (status, body) = self.call("GET", control::NODES, b"").await?;
        if status != 200 {
            anyhow::bail!("{} answered HTTP {status}", control::NODES);
        }
        let list: NodeList = serde_json::from_slice(&body)
            .with_context(|| format!("{} is not the protocol's node list", control::NODES))?;
        let Some(r) = list
            .nodes
            .into_iter()
            .find(|n| n.id == id)
            .and_then(|n| n.record)
        else {
            return Ok(None);
        };
        let user_data = r
            .user_data_base64
            .map(|b| base64::engine::general_purpose::STANDARD.decode(b))
            .transpose()
            .with_context(|| format!("node {id}: record.user_data_base64 is not base64"))?;
        let created_at_ms = match r.created_at {
            None => None,
            Some(t) => Some(crate::fake::rfc3339_ms(&t).with_context(|| {
                format!("node {id}: record.created_at {t:?} is not an RFC 3339 time")
            })?),
        };
        Ok(Some(NodeRecord {
            image: r.image,
            user_data,
            ssh_keys: r.ssh_keys,
            zone: r.zone,
            instance_type: r.instance_type,
            created_at_ms,
            state: r.state,
            private_address: r.private_address,
            public_address: r.public_address,
            ipv6_address: r.ipv6_address,
            hostname: r.hostname,
            subnet: r.subnet,
        }))
    }

    fn page_size(&self) -> Option<usize> {
        self.info.page_size
    }

    fn boot_image(&self) -> Option<String> {
        self.info.boot_image.clone()
    }

    async fn plant(&self, labels: BTreeMap<String, String>) -> anyhow::Result<Option<String>> {
        let tags = FlatTags::DIGITALOCEAN
            .encode_all(&labels)
            .context("the labels to plant do not fit flat tags")?;
        let body = serde_json::to_vec(&Plant { labels, tags })?;
        let (status, answer) = self.call("POST", control::PLANT, &body).await?;
        match status {
            200 | 201 => {
                let planted: Planted = serde_json::from_slice(&answer)
                    .with_context(|| format!("{} answered no id", control::PLANT))?;
                Ok(Some(planted.id))
            }
            404 | 405 | 501 => Ok(None),
            s => anyhow::bail!(
                "{} answered HTTP {s}: {}",
                control::PLANT,
                String::from_utf8_lossy(&answer)
                    .chars()
                    .take(300)
                    .collect::<String>()
            ),
        }
    }

    fn is_create(&self, req: &OutgoingRequest) -> bool {
        self.info
            .creates
            .iter()
            .any(|r| r.matches(req.method.as_str(), req.uri.path()))
    }

    fn renders(&self, kind: FaultKind) -> bool {
        protocol_name(kind).is_none_or(|name| self.info.faults.contains_key(name))
    }

    fn fault_response(&self, kind: FaultKind, _req: &OutgoingRequest) -> http::Response<Bytes> {
        let canned = protocol_name(kind).and_then(|n| self.info.faults.get(n));
        let Some(c) = canned else {
            return crate::fake::json_response(
                500,
                &[],
                r#"{"error":"the fake renders no such fault"}"#,
            );
        };
        c.to_http().map(Bytes::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_http_urls_are_fakes() {
        assert_eq!(
            loopback_addr("http://127.0.0.1:8080/v1").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert!(loopback_addr("http://[::1]:9/").is_ok());
        assert!(loopback_addr("http://localhost:9").is_ok());
        for bad in [
            "https://127.0.0.1:1",
            "http://10.0.0.1:80",
            "http://example.com:80",
            "127.0.0.1:80",
            "http://127.0.0.1",
        ] {
            assert!(loopback_addr(bad).is_err(), "{bad}");
        }
    }
}
