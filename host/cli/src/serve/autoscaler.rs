//! `serve --autoscaler-listen ADDR --node-groups FILE`: cluster-autoscaler's
//! `externalgrpc` CloudProvider service (`wasmprov_autoscaler::Service`)
//! on a listener of its own, over the daemon's fleet, journal and owner id.
//!
//! The autoscaler's client sends no bearer token (its cloud-config has
//! `address`, `cert`, `key`, `cacert` and `grpc_timeout` only), so this
//! listener is guarded by where it listens and by mutual TLS: loopback
//! unless `--allow-remote`, and a remote listener must have TLS with a
//! client CA (`--autoscaler-tls-cert`, `--autoscaler-tls-key`,
//! `--autoscaler-client-ca`), as the upstream example's cert-manager set-up
//! issues them. The health service and server reflection are served beside
//! it, as on the main listener.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use wasmprov_autoscaler::{NodeGroups, Service};
use wasmprov_fleet::Fleet;

use super::incoming;
use crate::args::AutoscalerArgs;

/// The name the health service reports the service under.
const SERVICE_NAME: &str = "clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider";

/// What `run` needs to serve the autoscaler's listener.
pub(super) struct Listener {
    listener: tokio::net::TcpListener,
    service: Service,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

/// Connections the autoscaler's listener keeps open at once (the autoscaler
/// holds one; the rest are closed at accept until some end).
const MAX_CONNECTIONS: usize = 128;

/// Checks the options, reads the node groups and binds the listener (so a
/// bad file or address stops `serve` before it answers anything); `None`
/// without `--autoscaler-listen`.
pub(super) async fn bind(
    args: &AutoscalerArgs,
    allow_remote: bool,
    fleet: &Arc<Fleet>,
    plugin_dir: &std::path::Path,
    mut ready: tokio::sync::watch::Receiver<Option<&'static str>>,
) -> Result<Option<Listener>> {
    let Some(addr) = args.autoscaler_listen else {
        return Ok(None);
    };
    let path = args
        .node_groups
        .as_deref()
        .context("--autoscaler-listen needs --node-groups FILE")?;
    let groups = NodeGroups::load(path)?;
    for g in groups.groups() {
        fleet.check_group_size(&g.capacity)?;
    }
    let loaded = fleet.backends().backend_names();
    for (group, plugin) in unknown_plugins(&groups, &loaded, plugin_dir) {
        // Not refused: the plugin may be compiling, or be added later.
        tracing::warn!(
            "node group {group} names plugin {plugin}, which is not loaded and has no manifest {plugin}.toml in {}; the group cannot use it until it is loaded",
            plugin_dir.display()
        );
    }
    let tls = tls_config(args)?;
    if !addr.ip().is_loopback() {
        if !allow_remote {
            bail!(
                "--autoscaler-listen {addr} is not a loopback address; give --allow-remote (with --autoscaler-tls-cert, --autoscaler-tls-key and --autoscaler-client-ca) to serve it remotely"
            );
        }
        if args.autoscaler_client_ca.is_none() {
            bail!(
                "--autoscaler-listen {addr} is remote: it needs mutual TLS (--autoscaler-tls-cert, --autoscaler-tls-key and --autoscaler-client-ca), since the autoscaler's client sends no token"
            );
        }
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the autoscaler listener to {addr}"))?;
    Ok(Some(Listener {
        listener,
        // The grower waits for the startup reconcile: a fresh or foreign
        // journal is held only once it has seen the clouds' nodes.
        service: Service::starting_after(
            fleet.clone(),
            groups,
            wasmprov_autoscaler::DEFAULT_RETRY_EVERY,
            async move {
                let _ = ready.wait_for(Option::is_none).await;
            },
        ),
        tls,
    }))
}

/// The (group, plugin) pairs where a group names a plugin neither loaded
/// nor with a manifest in `plugin_dir`.
fn unknown_plugins(
    groups: &NodeGroups,
    loaded: &[String],
    plugin_dir: &std::path::Path,
) -> Vec<(String, String)> {
    groups
        .groups()
        .iter()
        .flat_map(|g| g.capacity.plugins.iter().map(move |p| (g.id(), p)))
        .filter(|(_, p)| !loaded.contains(p) && !plugin_dir.join(format!("{p}.toml")).is_file())
        .map(|(g, p)| (g.to_owned(), p.clone()))
        .collect()
}

/// The listener's TLS acceptor, from `--autoscaler-tls-cert`,
/// `--autoscaler-tls-key` and `--autoscaler-client-ca`: HTTP/2 by ALPN, and
/// with a client CA a client certificate it signed required.
fn tls_config(args: &AutoscalerArgs) -> Result<Option<tokio_rustls::TlsAcceptor>> {
    let read =
        |p: &std::path::Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
    let (Some(cert), Some(key)) = (&args.autoscaler_tls_cert, &args.autoscaler_tls_key) else {
        return Ok(None);
    };
    let client_ca = match &args.autoscaler_client_ca {
        Some(ca) => Some(
            client_roots(&read(ca)?)
                .with_context(|| format!("--autoscaler-client-ca {}", ca.display()))?,
        ),
        None => None,
    };
    let config = server_config(&read(cert)?, &read(key)?, client_ca).with_context(|| {
        format!(
            "--autoscaler-tls-cert {} and --autoscaler-tls-key {} are not a certificate and its private key",
            cert.display(),
            key.display()
        )
    })?;
    Ok(Some(tokio_rustls::TlsAcceptor::from(Arc::new(config))))
}

/// The CA certificates of a PEM file, as the roots a client certificate
/// must chain to; none is an error.
fn client_roots(pem: &[u8]) -> Result<rustls::RootCertStore> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(pem) {
        roots
            .add(cert.context("reading the CA's PEM")?)
            .context("not a CA certificate")?;
    }
    if roots.is_empty() {
        bail!("the file has no CERTIFICATE block");
    }
    Ok(roots)
}

/// The rustls server configuration from a PEM certificate chain and key:
/// refuses an unreadable chain or key and a key that is not the
/// certificate's (rustls checks the public keys match), so a bad pair stops
/// `serve` instead of failing every handshake.
fn server_config(
    cert_pem: &[u8],
    key_pem: &[u8],
    client_ca: Option<rustls::RootCertStore>,
) -> Result<rustls::ServerConfig> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .context("reading the certificate's PEM")?;
    if chain.is_empty() {
        bail!("the certificate file has no CERTIFICATE block");
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).context("reading the key's PEM")?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("the TLS protocol versions")?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(roots) => builder.with_client_cert_verifier(
            rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .context("the client CA")?,
        ),
    };
    let mut config = builder
        .with_single_cert(chain, key)
        .context("the key does not go with the certificate")?;
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(config)
}

impl Listener {
    /// The address really bound.
    pub(super) fn local_addr(&self) -> Result<SocketAddr> {
        Ok(self.listener.local_addr()?)
    }

    /// Serves until `stop` resolves.
    pub(super) async fn serve(self, stop: impl std::future::Future<Output = ()>) -> Result<()> {
        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_service_status(SERVICE_NAME, tonic_health::ServingStatus::Serving)
            .await;
        let reflection = tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(wasmprov_autoscaler::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            .build_v1()
            .context("building the autoscaler listener's reflection service")?;
        tonic::transport::Server::builder()
            .http2_keepalive_interval(Some(incoming::KEEPALIVE))
            .http2_keepalive_timeout(Some(incoming::KEEPALIVE))
            .add_service(health_service)
            .add_service(reflection)
            .add_service(self.service.server())
            .serve_with_incoming_shutdown(
                incoming::incoming(
                    self.listener,
                    self.tls,
                    MAX_CONNECTIONS,
                    incoming::SETUP,
                    "autoscaler",
                ),
                stop,
            )
            .await
            .context("serving the autoscaler listener")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugins_neither_loaded_nor_in_the_directory_are_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("compiling.toml"), "").unwrap();
        let groups = NodeGroups::parse(
            "[[group]]\nid = \"a\"\nmin = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\nplugins = [\"hetzner\", \"nosuch\", \"compiling\"]\n\
             [[group]]\nid = \"b\"\nmin = 0\nmax = 1\ncpu = 1\nmemory_gib = 1\n",
        )
        .unwrap();
        assert_eq!(
            unknown_plugins(&groups, &["hetzner".to_owned()], dir.path()),
            [("a".to_owned(), "nosuch".to_owned())]
        );
    }
}
