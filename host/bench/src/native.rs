//! The native baseline: the Hetzner plugin's provision and describe, written
//! as plain async Rust over a hyper-util client, with the plugin crate's own
//! label, catalogue and wire-format code, so both sides send the same
//! requests and parse the same answers.

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use wasmprov_api::{NodeHandle, ProvisionRequest};
use wasmprov_plugin_hetzner::api::{CreateServer, OneServer, ServerList};
use wasmprov_plugin_hetzner::settings::Settings;
use wasmprov_plugin_hetzner::{catalogue, labels};

const USER_AGENT: &str = "wasmprov-bench-native/0.1";

/// A native Hetzner client against `endpoint` (e.g. the fake's URL).
#[derive(Clone, Debug)]
pub struct NativeHetzner {
    client: Client<HttpConnector, Full<Bytes>>,
    endpoint: String,
    auth: String,
    owner: String,
    settings: Settings,
}

impl NativeHetzner {
    /// With `pooled`, connections are kept alive and reused (hyper-util's
    /// default pool); without, every request opens a new connection.
    pub fn new(endpoint: &str, token: &str, owner: &str, pooled: bool) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let mut builder = Client::builder(TokioExecutor::new());
        if !pooled {
            builder.pool_max_idle_per_host(0);
        }
        Self {
            client: builder.build(connector),
            endpoint: endpoint.trim_end_matches('/').to_string(),
            auth: format!("Bearer {token}"),
            owner: owner.to_string(),
            settings: Settings::default(),
        }
    }

    async fn send(&self, method: http::Method, path: &str, body: Option<Vec<u8>>) -> Result<Bytes> {
        let mut req = http::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.endpoint))
            .header(http::header::AUTHORIZATION, &self.auth)
            .header(http::header::ACCEPT, "application/json")
            .header(http::header::USER_AGENT, USER_AGENT);
        if body.is_some() {
            req = req.header(http::header::CONTENT_TYPE, "application/json");
        }
        let req = req
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .context("building the request")?;
        let resp = self.client.request(req).await.context("sending")?;
        let status = resp.status();
        let body = resp
            .into_body()
            .collect()
            .await
            .context("reading the body")?
            .to_bytes();
        if !status.is_success() {
            bail!(
                "{status} for {path}: {}",
                String::from_utf8_lossy(&body[..body.len().min(300)])
            );
        }
        Ok(body)
    }

    async fn list_page(&self, selector: &str, page: u64) -> Result<ServerList> {
        let path = format!(
            "/servers?label_selector={}&per_page={}&page={page}",
            encode(selector),
            self.settings.page_size
        );
        let body = self.send(http::Method::GET, &path, None).await?;
        serde_json::from_slice(&body).context("parsing the server list")
    }

    /// What the plugin's `provision` does for a new request: look the
    /// request up by label (`GET /servers?label_selector=…`), then create the
    /// server (`POST /servers`).
    pub async fn provision(&self, request: &ProvisionRequest) -> Result<NodeHandle> {
        let rid = request.request_id.as_str();
        let selector = labels::request_selector(&self.owner, rid);
        let list = self.list_page(&selector, 1).await?;
        if let Some(existing) = list
            .servers
            .into_iter()
            .filter(|s| labels::is_for_request(&s.labels(), &self.owner, rid))
            .min_by_key(|s| s.id)
        {
            return Ok(existing.to_handle());
        }
        let shape = &request.shape;
        let choice = catalogue::choose(shape, &self.settings.location, self.settings.architecture)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let server_labels = labels::server_labels(&self.owner, rid, &shape.labels);
        let name = labels::server_name(&self.settings.name_prefix, rid);
        let body = CreateServer {
            name: &name,
            server_type: choice.server_type.name,
            image: &self.settings.image,
            location: choice.location,
            labels: &server_labels,
            user_data: None,
            ssh_keys: &[],
            start_after_create: true,
            networks: &[],
        };
        let body = serde_json::to_vec(&body).context("encoding")?;
        let created = self
            .send(http::Method::POST, "/servers", Some(body))
            .await?;
        let created: OneServer = serde_json::from_slice(&created).context("parsing")?;
        Ok(created.server.to_handle())
    }

    /// Only the create (`POST /servers`) of a provision: seeds the fake.
    pub async fn create(&self, request_id: &str) -> Result<()> {
        let shape = crate::common::shape();
        let choice = catalogue::choose(&shape, &self.settings.location, self.settings.architecture)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let server_labels = labels::server_labels(&self.owner, request_id, &shape.labels);
        let name = labels::server_name(&self.settings.name_prefix, request_id);
        let body = CreateServer {
            name: &name,
            server_type: choice.server_type.name,
            image: &self.settings.image,
            location: choice.location,
            labels: &server_labels,
            user_data: None,
            ssh_keys: &[],
            start_after_create: true,
            networks: &[],
        };
        let body = serde_json::to_vec(&body).context("encoding")?;
        self.send(http::Method::POST, "/servers", Some(body))
            .await?;
        Ok(())
    }

    /// What the plugin's `describe` does: every page of this owner's servers.
    pub async fn describe(&self) -> Result<Vec<NodeHandle>> {
        let selector = labels::owner_selector(&self.owner);
        let mut out = Vec::new();
        let mut page = 1;
        loop {
            let list = self.list_page(&selector, page).await?;
            let next = list.next_page();
            out.extend(
                list.servers
                    .iter()
                    .filter(|s| labels::is_owned_by(&s.labels(), &self.owner))
                    .map(|s| s.to_handle()),
            );
            match next {
                Some(n) if n > page => page = n,
                _ => return Ok(out),
            }
        }
    }
}

/// Percent-encodes everything but unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn encodes_selectors() {
        assert_eq!(super::encode("a==b,c"), "a%3D%3Db%2Cc");
    }
}
