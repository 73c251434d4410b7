//! Plugins as OCI artifacts, in the layout the WebAssembly ecosystem's own
//! tools use (wasm-pkg-tools): one `application/wasm` layer holding the
//! component, an `application/vnd.wasm.config.v0+json` config. A minisign
//! signature of the component's bytes travels beside it as its own
//! artifact, tagged `sha256-<manifest hex>.minisig` (the tag scheme cosign
//! uses for its signatures), so any registry that stores OCI artifacts
//! holds both.
//!
//! A registry is untrusted input. Every byte `install` reads from one is
//! bounded here, before it is buffered ([`Bounds`]: manifests, signature
//! manifests, signatures, token answers, error bodies, the component) and
//! checked against its digest; oci-client reads manifests, token answers
//! and error bodies whole, so wasmprov speaks the distribution API itself
//! over one HTTP client (reqwest), for pull and push, and keeps
//! oci-client's references and manifest types. Credentials go only to the
//! registry's own host ([`Session`]): oci-client, handed them, asked
//! `/v2/` again and sent them to whatever token realm the second answer
//! named. Nothing else in wasmprov talks to a registry.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use oci_client::Reference;
use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::{OciDescriptor, OciImageManifest, OciManifest};
use reqwest::header::{
    ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HeaderMap, WWW_AUTHENTICATE,
};
use sha2::{Digest as _, Sha256};

/// Media type of the component layer.
pub const WASM_LAYER: &str = "application/wasm";
/// Media type of the config of a wasm artifact.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// Media type of the layer holding a minisign signature.
pub const MINISIGN_LAYER: &str = "application/vnd.wasmprov.minisign.signature.v1";
/// Media type of an empty config (the signature artifact has none).
const EMPTY_CONFIG: &str = "application/vnd.oci.empty.v1+json";
/// Annotation naming the plugin. Written by `push` for people and other
/// tools; `install` never takes the plugin's name from it.
pub const PLUGIN_ANNOTATION: &str = "dev.wasmprov.plugin";
/// Variable listing HTTPS token realms on other hosts that may receive the
/// registry credentials (comma-separated origins, `https://auth.example.com`).
pub const TOKEN_REALMS_VAR: &str = "WASMPROV_REGISTRY_TOKEN_REALMS";

/// The largest answers `install` reads from a registry.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// An image manifest (the OCI distribution spec's own limit: 4 MiB).
    pub manifest: u64,
    /// The signature artifact's manifest.
    pub signature_manifest: u64,
    /// The signature itself.
    pub signature: u64,
    /// The token endpoint's answer.
    pub token: u64,
    /// The body of an error answer (only its start is kept).
    pub error_body: u64,
    /// The component layer.
    pub component: u64,
}

impl Bounds {
    /// The defaults, with `component` as the largest component.
    #[must_use]
    pub fn with_component(component: u64) -> Self {
        Self {
            manifest: 4 << 20,
            signature_manifest: 64 << 10,
            signature: wasmprov_host::policy::trust::MAX_SIGNATURE_BYTES,
            token: 64 << 10,
            error_body: 8 << 10,
            component,
        }
    }
}

/// An artifact fetched and checked.
#[derive(Debug)]
pub struct Fetched {
    /// The reference pinned to the manifest digest (`registry/repo@sha256:…`).
    pub pinned: String,
    /// The plugin name the artifact's annotation claims, if any (shown,
    /// never used as the name).
    pub plugin: Option<String>,
    /// The component.
    pub component: Vec<u8>,
    /// The minisign signature beside it, if one is published.
    pub signature: Option<String>,
}

/// Parses a reference, naming what is accepted when it is not one.
pub fn reference(text: &str) -> Result<Reference> {
    Reference::try_from(text).with_context(|| {
        format!(
            "{text:?} is not an OCI reference; expected registry/repository:tag or registry/repository@sha256:<digest>, such as 127.0.0.1:5000/plugins/hetzner:1.0"
        )
    })
}

fn is_loopback(registry: &str) -> bool {
    let host = registry
        .strip_prefix('[')
        .and_then(|r| r.split_once(']'))
        .map_or_else(
            || registry.split(':').next().unwrap_or(registry),
            |(h, _)| h,
        );
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// A registry on this machine is reached over plain HTTP (as Docker does
/// for loopback registries); every other one over HTTPS.
fn scheme(registry: &str) -> &'static str {
    if is_loopback(registry) {
        "http"
    } else {
        "https"
    }
}

/// The operator's credentials for a registry: `WASMPROV_REGISTRY_USERNAME`
/// and `WASMPROV_REGISTRY_PASSWORD`, else the Docker credential file
/// (`$DOCKER_CONFIG/config.json` or `~/.docker/config.json`, its
/// `credHelpers`, `auths` and `credsStore`, in the order the
/// `docker_credential` crate reads them, as Docker, Podman and ORAS do),
/// else none.
///
/// A credential helper (`docker-credential-NAME get`) is a program that
/// may hang (a locked keychain): it runs here, asynchronously, in a
/// process group of its own, so the caller's deadline bounds it and
/// dropping this future (the deadline passing) kills the helper and
/// whatever it started.
async fn credentials(registry: &str) -> Option<(String, String)> {
    if let (Ok(user), Ok(password)) = (
        std::env::var("WASMPROV_REGISTRY_USERNAME"),
        std::env::var("WASMPROV_REGISTRY_PASSWORD"),
    ) && !user.is_empty()
    {
        return Some((user, password));
    }
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".docker")))?;
    // Read as untrusted input: a regular file, bounded, opened without blocking.
    let text = wasmprov_host::plugin_dir::PluginDir::open_existing(&dir)
        .ok()?
        .read("config.json", 1 << 20)
        .ok()??;
    let mut config: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&text).ok()?;
    let helper = |key: &str| {
        config
            .get(key)
            .and_then(serde_json::Value::as_str)
            .filter(|h| !h.is_empty())
            .map(str::to_string)
    };
    let per_registry = config
        .get("credHelpers")
        .and_then(|h| h.get(registry))
        .and_then(serde_json::Value::as_str)
        .filter(|h| !h.is_empty())
        .map(str::to_string);
    if let Some(h) = per_registry {
        return from_helper(&h, registry).await;
    }
    let store = helper("credsStore");
    // The file's own entries, read by the crate with the helpers taken out
    // (it would run them synchronously, past any deadline).
    config.remove("credHelpers");
    config.remove("credsStore");
    let stripped = serde_json::to_vec(&config).ok()?;
    match docker_credential::get_credential_from_reader(stripped.as_slice(), registry) {
        Ok(docker_credential::DockerCredential::UsernamePassword(u, p)) => Some((u, p)),
        Ok(docker_credential::DockerCredential::IdentityToken(_)) => {
            tracing::info!(
                "the Docker credential file holds an identity token for {registry}; wasmprov uses username and password only"
            );
            None
        }
        Err(docker_credential::CredentialRetrievalError::NoCredentialConfigured) => match store {
            Some(h) => from_helper(&h, registry).await,
            None => None,
        },
        Err(_) => None,
    }
}

/// Kills a credential helper's process group when dropped (the deadline
/// passed, or the helper answered and anything it left behind goes too).
struct HelperGroup(Option<u32>);

impl Drop for HelperGroup {
    fn drop(&mut self) {
        if let Some(pid) = self.0.and_then(|p| i32::try_from(p).ok()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Asks `docker-credential-HELPER get` for a registry's credentials.
async fn from_helper(helper: &str, registry: &str) -> Option<(String, String)> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    if !helper
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
    {
        tracing::warn!("ignoring the Docker credential helper {helper:?}: not a helper name");
        return None;
    }
    let program = format!("docker-credential-{helper}");
    let mut child = tokio::process::Command::new(&program)
        .arg("get")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| tracing::info!("{program}: {e}"))
        .ok()?;
    let _group = HelperGroup(child.id());
    let mut stdin = child.stdin.take()?;
    stdin.write_all(registry.as_bytes()).await.ok()?;
    drop(stdin);
    let mut out = Vec::new();
    child
        .stdout
        .take()?
        .take(64 << 10)
        .read_to_end(&mut out)
        .await
        .ok()?;
    if !child.wait().await.ok()?.success() {
        tracing::info!("{program} found no credentials for {registry}");
        return None;
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "PascalCase")]
    struct Answer {
        username: String,
        secret: String,
    }
    let answer: Answer = serde_json::from_slice(&out).ok()?;
    if answer.username == "<token>" {
        tracing::info!(
            "{program} holds an identity token for {registry}; wasmprov uses username and password only"
        );
        return None;
    }
    Some((answer.username, answer.secret))
}

fn basic(user: &str, password: &str) -> String {
    use base64::Engine as _;
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    )
}

/// What a registry is asked to allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Read.
    Pull,
    /// Read and write.
    Push,
}

/// An authorized conversation with one registry about one repository.
///
/// The token flow is wasmprov's: `GET /v2/`, and on a `Bearer` challenge a
/// token from its realm. The operator's credentials go to the realm only
/// when it is the registry's own host and port (over HTTPS, or the
/// registry's own scheme), or an HTTPS origin the operator listed in
/// `WASMPROV_REGISTRY_TOKEN_REALMS`; any other realm is asked for an
/// anonymous token. A `Basic` challenge gets them from the registry
/// itself. Redirects keep no `Authorization` across hosts (reqwest drops
/// it), so a blob served from storage elsewhere never sees them.
pub struct Session {
    http: reqwest::Client,
    base: String,
    reference: Reference,
    authorization: Option<String>,
    bounds: Bounds,
    /// Set when the registry asked for credentials at a realm they were not sent to.
    withheld: Option<String>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("base", &self.base)
            .field("authorized", &self.authorization.is_some())
            .finish_non_exhaustive()
    }
}

/// Reads at most `max` bytes of a response: refused from its
/// `Content-Length` before any byte when that is larger, cut as soon as
/// the body passes `max` otherwise.
async fn read_capped(
    mut response: reqwest::Response,
    max: u64,
    what: &str,
) -> Result<(Vec<u8>, bool)> {
    if let Some(len) = response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        && len > max
    {
        return Ok((Vec::new(), true));
    }
    let mut out = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .with_context(|| format!("reading {what}"))?
    {
        if (out.len() + chunk.len()) as u64 > max {
            let room = usize::try_from(max).unwrap_or(usize::MAX) - out.len();
            out.extend_from_slice(&chunk[..room.min(chunk.len())]);
            return Ok((out, true));
        }
        out.extend_from_slice(&chunk);
    }
    Ok((out, false))
}

/// Reads a body that must fit in `max`, or says it did not.
async fn read_bounded(response: reqwest::Response, max: u64, what: &str) -> Result<Vec<u8>> {
    let (bytes, over) = read_capped(response, max, what).await?;
    if over {
        bail!("{what}: the registry sent more than {max} bytes; at most {max} are accepted");
    }
    Ok(bytes)
}

/// A refusal from the registry, with the start of its message, shown
/// escaped.
async fn status_error(response: reqwest::Response, max: u64, what: &str) -> anyhow::Error {
    let status = response.status();
    let body = read_capped(response, max, what)
        .await
        .map(|(b, _)| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let message = format!(
        "{what}: the registry answered {status}: {}",
        crate::output::line(body.trim())
    );
    // Overloaded or down for now: the same command may work later.
    if status == reqwest::StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        crate::exit::Temporary(message).into()
    } else {
        anyhow::anyhow!(message)
    }
}

fn unreachable(registry: &str, what: &str, e: &reqwest::Error) -> anyhow::Error {
    if e.is_connect() || e.is_timeout() || e.is_request() {
        crate::exit::Temporary(format!(
            "cannot reach the registry {registry} ({what}): {e:#}; nothing was changed"
        ))
        .into()
    } else {
        anyhow::anyhow!("{what}: {e:#}")
    }
}

/// Whether a token realm may receive the registry's credentials.
fn realm_trusted(realm: &reqwest::Url, registry: &str, registry_scheme: &str) -> bool {
    let same_host = reqwest::Url::parse(&format!("{registry_scheme}://{registry}/"))
        .ok()
        .is_some_and(|r| {
            r.host_str() == realm.host_str()
                && r.port_or_known_default() == realm.port_or_known_default()
        });
    if same_host && (realm.scheme() == "https" || realm.scheme() == registry_scheme) {
        return true;
    }
    realm.scheme() == "https"
        && std::env::var(TOKEN_REALMS_VAR).is_ok_and(|list| {
            list.split(',')
                .filter_map(|o| reqwest::Url::parse(o.trim()).ok())
                .any(|o| {
                    o.scheme() == "https"
                        && o.host_str() == realm.host_str()
                        && o.port_or_known_default() == realm.port_or_known_default()
                })
        })
}

impl Session {
    /// Opens a session with the registry of `reference` for `access`.
    ///
    /// # Errors
    /// An unreachable registry, a refused or oversized token answer.
    pub async fn open(reference: &Reference, access: Access, bounds: Bounds) -> Result<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let registry = reference.resolve_registry().to_string();
        let scheme = scheme(&registry);
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .read_timeout(Duration::from_secs(60))
            .user_agent(concat!("wasmprov/", env!("CARGO_PKG_VERSION")))
            .build()
            .context("setting up the HTTP client")?;
        let mut session = Self {
            base: format!("{scheme}://{registry}"),
            http,
            reference: reference.clone(),
            authorization: None,
            bounds,
            withheld: None,
        };
        let ping = session
            .http
            .get(format!("{}/v2/", session.base))
            .send()
            .await
            .map_err(|e| unreachable(&registry, "fetching the manifest of", &e))?;
        if ping.status() != reqwest::StatusCode::UNAUTHORIZED {
            // Open to all (or an error the first real request will show).
            let _ = read_capped(ping, bounds.error_body, "the registry's answer").await;
            return Ok(session);
        }
        let challenges: Vec<String> = ping
            .headers()
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_string))
            .collect();
        let _ = read_capped(ping, bounds.error_body, "the registry's answer").await;
        let creds = credentials(&registry).await;
        let mut bearer = None;
        let mut basic_ok = false;
        for text in &challenges {
            for challenge in http_auth::parser::ChallengeParser::new(text).flatten() {
                if challenge.scheme.eq_ignore_ascii_case("basic") {
                    basic_ok = true;
                } else if challenge.scheme.eq_ignore_ascii_case("bearer") {
                    let param = |name: &str| {
                        challenge
                            .params
                            .iter()
                            .find(|(k, _)| k.eq_ignore_ascii_case(name))
                            .map(|(_, v)| v.to_unescaped())
                    };
                    if bearer.is_none() {
                        bearer = param("realm").map(|realm| (realm, param("service")));
                    }
                }
            }
        }
        if let Some((realm, service)) = bearer {
            let mut url = reqwest::Url::parse(&realm)
                .with_context(|| format!("the registry's token realm {realm:?} is not a URL"))?;
            if !matches!(url.scheme(), "http" | "https") {
                bail!("the registry's token realm {realm:?} is not HTTP(S)");
            }
            let scope = match access {
                Access::Pull => format!("repository:{}:pull", reference.repository()),
                Access::Push => format!("repository:{}:pull,push", reference.repository()),
            };
            url.query_pairs_mut().append_pair("scope", &scope);
            if let Some(service) = service {
                url.query_pairs_mut().append_pair("service", &service);
            }
            let mut request = session.http.get(url.clone());
            match &creds {
                Some((user, password)) if realm_trusted(&url, &registry, scheme) => {
                    request = request.header(AUTHORIZATION, basic(user, password));
                }
                Some(_) => {
                    session.withheld = Some(format!(
                        "the registry asked for credentials at {}://{}, another host than {registry}; they were not sent (an HTTPS realm can be allowed with {TOKEN_REALMS_VAR})",
                        url.scheme(),
                        url.host_str().unwrap_or_default()
                    ));
                }
                None => {}
            }
            let response = request
                .send()
                .await
                .map_err(|e| unreachable(&registry, "asking for a token", &e))?;
            if !response.status().is_success() {
                let e = status_error(response, bounds.error_body, "asking for a token").await;
                return Err(match &session.withheld {
                    Some(w) => e.context(w.clone()),
                    None => e,
                });
            }
            let body = read_bounded(response, bounds.token, "the token answer").await?;
            #[derive(serde::Deserialize)]
            struct Token {
                token: Option<String>,
                access_token: Option<String>,
            }
            let token: Token =
                serde_json::from_slice(&body).context("the token answer is not a token")?;
            let token = token
                .token
                .or(token.access_token)
                .filter(|t| !t.is_empty())
                .context("the token answer holds no token")?;
            session.authorization = Some(format!("Bearer {token}"));
        } else if basic_ok && let Some((user, password)) = &creds {
            session.authorization = Some(basic(user, password));
        }
        Ok(session)
    }

    /// A URL below the repository (`blobs/…`, `manifests/…`).
    fn repo_url(&self, path: &str) -> Result<reqwest::Url> {
        let text = format!("{}/v2/{}/{path}", self.base, self.reference.repository());
        reqwest::Url::parse(&text).with_context(|| format!("{text:?} is not a URL"))
    }

    /// `request` with the session's `Authorization` when `url` is on the
    /// registry's own origin (scheme, host and port), without it anywhere
    /// else (an upload location on blob storage elsewhere, say).
    fn authorized(
        &self,
        request: reqwest::RequestBuilder,
        url: &reqwest::Url,
    ) -> reqwest::RequestBuilder {
        let own = reqwest::Url::parse(&self.base).is_ok_and(|b| {
            b.scheme() == url.scheme()
                && b.host_str() == url.host_str()
                && b.port_or_known_default() == url.port_or_known_default()
        });
        match &self.authorization {
            Some(a) if own => request.header(AUTHORIZATION, a),
            _ => request,
        }
    }

    /// A refusal, with the note that credentials were withheld if they were.
    async fn refusal(&self, response: reqwest::Response, what: &str) -> anyhow::Error {
        let e = status_error(response, self.bounds.error_body, what).await;
        match &self.withheld {
            Some(w) => e.context(w.clone()),
            None => e,
        }
    }

    /// Uploads a blob unless the registry has it: `POST` an upload, then
    /// one `PUT` of the whole blob to the location it answers (the
    /// distribution spec's monolithic upload).
    async fn upload_blob(&self, bytes: &[u8], what: &str) -> Result<()> {
        let registry = self.reference.resolve_registry().to_string();
        let sent = |e: reqwest::Error| unreachable(&registry, what, &e);
        let digest = sha256_digest(bytes);
        let url = self.repo_url(&format!("blobs/{digest}"))?;
        let head = self
            .authorized(self.http.head(url.clone()), &url)
            .send()
            .await
            .map_err(sent)?;
        if head.status().is_success() {
            return Ok(());
        }
        let start = self.repo_url("blobs/uploads/")?;
        let response = self
            .authorized(self.http.post(start.clone()), &start)
            .header(CONTENT_LENGTH, "0")
            .send()
            .await
            .map_err(sent)?;
        if !response.status().is_success() {
            return Err(self.refusal(response, what).await);
        }
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .with_context(|| format!("{what}: the registry gave no upload location"))?;
        let _ = read_capped(response, self.bounds.error_body, what).await;
        let mut put = start
            .join(&location)
            .with_context(|| format!("{what}: the upload location {location:?} is not a URL"))?;
        if !matches!(put.scheme(), "http" | "https") {
            bail!("{what}: the upload location {location:?} is not HTTP(S)");
        }
        put.query_pairs_mut().append_pair("digest", &digest);
        let response = self
            .authorized(self.http.put(put.clone()), &put)
            .header(CONTENT_TYPE, "application/octet-stream")
            .body(bytes.to_vec())
            .send()
            .await
            .map_err(sent)?;
        if !response.status().is_success() {
            return Err(self.refusal(response, what).await);
        }
        let _ = read_capped(response, self.bounds.error_body, what).await;
        Ok(())
    }

    /// Puts an image manifest under `tag`; returns its digest (of the
    /// bytes sent, checked against the registry's word when it gives one).
    async fn put_manifest(
        &self,
        tag: &str,
        manifest: &OciImageManifest,
        what: &str,
    ) -> Result<String> {
        let registry = self.reference.resolve_registry().to_string();
        let body = serde_json::to_vec(manifest)?;
        let digest = sha256_digest(&body);
        let url = self.repo_url(&format!("manifests/{tag}"))?;
        let response = self
            .authorized(self.http.put(url.clone()), &url)
            .header(CONTENT_TYPE, oci_client::manifest::OCI_IMAGE_MEDIA_TYPE)
            .body(body)
            .send()
            .await
            .map_err(|e| unreachable(&registry, what, &e))?;
        if !response.status().is_success() {
            return Err(self.refusal(response, what).await);
        }
        if let Some(claimed) = response
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            && claimed.starts_with("sha256:")
            && claimed != digest
        {
            bail!(
                "{what}: the registry says the manifest is {claimed}, but its bytes are {digest}"
            );
        }
        let _ = read_capped(response, self.bounds.error_body, what).await;
        Ok(digest)
    }

    async fn get(
        &self,
        path: &str,
        accept: Option<&str>,
    ) -> Result<reqwest::Response, reqwest::Error> {
        let mut request = self.http.get(format!(
            "{}/v2/{}/{path}",
            self.base,
            self.reference.repository()
        ));
        if let Some(a) = accept {
            request = request.header(ACCEPT, a);
        }
        if let Some(auth) = &self.authorization {
            request = request.header(AUTHORIZATION, auth);
        }
        request.send().await
    }

    /// Fetches a manifest by tag or digest, at most `max` bytes; `None`
    /// when the registry does not know it.
    async fn manifest(
        &self,
        tag_or_digest: &str,
        max: u64,
        what: &str,
    ) -> Result<Option<(OciManifest, String)>> {
        let registry = self.reference.resolve_registry();
        let accept = [
            oci_client::manifest::OCI_IMAGE_MEDIA_TYPE,
            oci_client::manifest::IMAGE_MANIFEST_MEDIA_TYPE,
            oci_client::manifest::OCI_IMAGE_INDEX_MEDIA_TYPE,
            oci_client::manifest::IMAGE_MANIFEST_LIST_MEDIA_TYPE,
        ]
        .join(", ");
        let response = self
            .get(&format!("manifests/{tag_or_digest}"), Some(&accept))
            .await
            .map_err(|e| unreachable(registry, what, &e))?;
        if response.status() == reqwest::StatusCode::NOT_FOUND {
            let _ = read_capped(response, self.bounds.error_body, what).await;
            return Ok(None);
        }
        if !response.status().is_success() {
            let e = status_error(response, self.bounds.error_body, what).await;
            return Err(match &self.withheld {
                Some(w) => e.context(w.clone()),
                None => e,
            });
        }
        let headers: HeaderMap = response.headers().clone();
        let body = read_bounded(response, max, what).await?;
        let digest = sha256_digest(&body);
        if let Some(claimed) = headers
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            && claimed.starts_with("sha256:")
            && claimed != digest
        {
            bail!(
                "{what}: the registry says the manifest is {claimed}, but its bytes are {digest}; refusing it"
            );
        }
        let manifest: OciManifest = serde_json::from_slice(&body)
            .with_context(|| format!("{what}: the manifest does not parse"))?;
        Ok(Some((manifest, digest)))
    }

    /// Reads a blob whole, refusing more than `max` bytes and any byte
    /// that does not hash to the descriptor's digest.
    async fn blob(&self, layer: &OciDescriptor, max: u64, what: &str) -> Result<Vec<u8>> {
        let reference = &self.reference;
        let Ok(size) = u64::try_from(layer.size) else {
            bail!(
                "{reference}: the layer's size is {}, not a size",
                layer.size
            );
        };
        if size > max {
            bail!("{reference}: the layer is {size} bytes; at most {max} are accepted");
        }
        let response = self
            .get(&format!("blobs/{}", layer.digest), None)
            .await
            .map_err(|e| unreachable(reference.resolve_registry(), what, &e))?;
        if !response.status().is_success() {
            return Err(status_error(response, self.bounds.error_body, what).await);
        }
        // The descriptor says how large the blob is: nothing past that is read.
        let (out, over) = read_capped(response, size, what).await?;
        if over {
            bail!(
                "{reference}: the registry sent more than {size} bytes for a layer its manifest says is {size} bytes"
            );
        }
        let actual = sha256_digest(&out);
        if actual != layer.digest {
            bail!(
                "{reference}: digest mismatch: the registry served bytes that do not hash to the manifest's layer {} (their digest is {actual}); refusing it",
                layer.digest
            );
        }
        Ok(out)
    }
}

/// The tag a component's signature is published under.
fn signature_tag(manifest_digest: &str) -> String {
    format!("{}.minisig", manifest_digest.replace(':', "-"))
}

fn sha256_digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// Fetches a plugin: resolves the reference to a manifest digest, checks
/// the layout, reads the component (digest-checked) and its signature if
/// one is published, each within `bounds`. The caller bounds the time.
///
/// # Errors
/// Every refusal, naming what was wrong.
pub async fn fetch(reference_text: &str, bounds: Bounds) -> Result<Fetched> {
    let reference = reference(reference_text)?;
    let session = Session::open(&reference, Access::Pull, bounds).await?;
    let asked = reference
        .digest()
        .or(reference.tag())
        .unwrap_or("latest")
        .to_string();
    let what = format!("fetching the manifest of {reference}");
    let (manifest, manifest_digest) = session
        .manifest(&asked, bounds.manifest, &what)
        .await?
        .with_context(|| format!("{reference}: the registry has no such manifest"))?;
    if let Some(want) = reference.digest()
        && want != manifest_digest
    {
        bail!(
            "{reference}: the registry answered manifest {manifest_digest}, not the {want} asked for"
        );
    }
    let OciManifest::Image(image) = manifest else {
        bail!("{reference} is an image index, not a wasm component artifact");
    };
    if image.config.media_type != WASM_CONFIG {
        bail!(
            "{reference} is not a wasm component artifact: its config is {:?}, expected {WASM_CONFIG:?}",
            image.config.media_type
        );
    }
    let layers: Vec<&OciDescriptor> = image
        .layers
        .iter()
        .filter(|l| l.media_type == WASM_LAYER)
        .collect();
    let [layer] = layers.as_slice() else {
        bail!(
            "{reference} must hold exactly one {WASM_LAYER:?} layer; it holds {}",
            layers.len()
        );
    };
    let component = session
        .blob(
            layer,
            bounds.component,
            &format!("fetching the layer of {reference}"),
        )
        .await?;
    let plugin = image
        .annotations
        .as_ref()
        .and_then(|a| a.get(PLUGIN_ANNOTATION))
        .cloned();

    let sig_tag = signature_tag(&manifest_digest);
    let sig_what = format!(
        "fetching the signature of {}/{}:{sig_tag}",
        reference.registry(),
        reference.repository()
    );
    let signature = match session
        .manifest(&sig_tag, bounds.signature_manifest, &sig_what)
        .await?
    {
        None => None,
        Some((OciManifest::Image(sig), _)) => {
            let layer = sig
                .layers
                .iter()
                .find(|l| l.media_type == MINISIGN_LAYER)
                .with_context(|| format!("{sig_what}: it holds no {MINISIGN_LAYER:?} layer"))?;
            let bytes = session.blob(layer, bounds.signature, &sig_what).await?;
            Some(String::from_utf8(bytes).with_context(|| format!("{sig_what}: not text"))?)
        }
        Some(_) => bail!("{sig_what}: an image index, not a signature"),
    };
    Ok(Fetched {
        pinned: format!(
            "{}/{}@{manifest_digest}",
            reference.registry(),
            reference.repository()
        ),
        plugin,
        component,
        signature,
    })
}

/// Publishes a component under `reference_text`, and its signature beside
/// it when one is given. Returns the manifest digest.
///
/// The push speaks the distribution API itself, over the session's one
/// token flow ([`Session`]): blobs by monolithic upload, then the
/// manifest. Credentials go to the registry's own origin only (a token
/// realm elsewhere gets none unless listed; an upload location elsewhere
/// gets no `Authorization`), and every answer is bounded as for install.
///
/// # Errors
/// A bad reference, or a registry that refuses.
pub async fn push(
    component: &[u8],
    plugin: &str,
    reference_text: &str,
    signature: Option<&str>,
) -> Result<String> {
    let reference = reference(reference_text)?;
    if reference.digest().is_some() {
        bail!("push to a tag (registry/repository:tag), not to a digest");
    }
    let tag = reference.tag().unwrap_or("latest").to_string();
    let session = Session::open(
        &reference,
        Access::Push,
        Bounds::with_component(component.len() as u64),
    )
    .await?;
    let what = format!("pushing {reference}");
    let layer_digest = sha256_digest(component);
    let config = serde_json::json!({
        "created": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
    });
    let layers = [ImageLayer::new(
        component.to_vec(),
        WASM_LAYER.to_string(),
        None,
    )];
    let config = Config::new(serde_json::to_vec(&config)?, WASM_CONFIG.to_string(), None);
    let annotations = BTreeMap::from([
        (PLUGIN_ANNOTATION.to_string(), plugin.to_string()),
        (
            "org.opencontainers.image.title".to_string(),
            format!("{plugin}.wasm"),
        ),
    ]);
    let mut manifest = OciImageManifest::build(&layers, &config, Some(annotations));
    manifest.media_type = Some(oci_client::manifest::OCI_IMAGE_MEDIA_TYPE.to_string());
    session.upload_blob(&config.data, &what).await?;
    session.upload_blob(component, &what).await?;
    let digest = session.put_manifest(&tag, &manifest, &what).await?;
    if let Some(sig) = signature {
        let what = format!("pushing the signature of {reference}");
        let layers = [ImageLayer::new(
            sig.as_bytes().to_vec(),
            MINISIGN_LAYER.to_string(),
            None,
        )];
        let config = Config::new(b"{}".to_vec(), EMPTY_CONFIG.to_string(), None);
        let mut manifest = OciImageManifest::build(&layers, &config, None);
        manifest.media_type = Some(oci_client::manifest::OCI_IMAGE_MEDIA_TYPE.to_string());
        session.upload_blob(&config.data, &what).await?;
        session.upload_blob(sig.as_bytes(), &what).await?;
        session
            .put_manifest(&signature_tag(&digest), &manifest, &what)
            .await?;
    }
    Ok(digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_registries_are_recognized() {
        for r in [
            "127.0.0.1:5000",
            "localhost:5000",
            "[::1]:5000",
            "127.0.0.2",
        ] {
            assert!(is_loopback(r), "{r}");
        }
        for r in ["ghcr.io", "registry.example.com:5000", "10.0.0.1:5000"] {
            assert!(!is_loopback(r), "{r}");
        }
    }

    #[test]
    fn signature_tags_follow_the_digest() {
        assert_eq!(signature_tag("sha256:ab12"), "sha256-ab12.minisig");
    }

    #[test]
    fn credentials_go_only_to_the_registrys_own_host() {
        let url = |u: &str| reqwest::Url::parse(u).unwrap();
        // Same host and port: over HTTPS, or the registry's own scheme.
        assert!(realm_trusted(
            &url("https://ghcr.io/token"),
            "ghcr.io",
            "https"
        ));
        assert!(realm_trusted(
            &url("http://127.0.0.1:5000/auth"),
            "127.0.0.1:5000",
            "http"
        ));
        // Another host, another port, a plain-HTTP realm for an HTTPS registry.
        assert!(!realm_trusted(
            &url("https://evil.example/token"),
            "ghcr.io",
            "https"
        ));
        assert!(!realm_trusted(
            &url("http://127.0.0.1:5001/auth"),
            "127.0.0.1:5000",
            "http"
        ));
        assert!(!realm_trusted(
            &url("http://ghcr.io/token"),
            "ghcr.io",
            "https"
        ));
    }
}
