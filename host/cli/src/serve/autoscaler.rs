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

use crate::args::AutoscalerArgs;

/// The name the health service reports the service under.
const SERVICE_NAME: &str = "clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider";

/// What `run` needs to serve the autoscaler's listener.
pub(super) struct Listener {
    listener: tokio::net::TcpListener,
    service: Service,
    tls: Option<tonic::transport::ServerTlsConfig>,
}

/// Checks the options, reads the node groups and binds the listener (so a
/// bad file or address stops `serve` before it answers anything); `None`
/// without `--autoscaler-listen`.
pub(super) async fn bind(
    args: &AutoscalerArgs,
    allow_remote: bool,
    fleet: &Arc<Fleet>,
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
        service: Service::new(fleet.clone(), groups),
        tls,
    }))
}

fn tls_config(args: &AutoscalerArgs) -> Result<Option<tonic::transport::ServerTlsConfig>> {
    use tonic::transport::{Certificate, Identity, ServerTlsConfig};
    let read =
        |p: &std::path::Path| std::fs::read(p).with_context(|| format!("reading {}", p.display()));
    let (Some(cert), Some(key)) = (&args.autoscaler_tls_cert, &args.autoscaler_tls_key) else {
        return Ok(None);
    };
    let (cert_pem, key_pem) = (read(cert)?, read(key)?);
    check_pair(&cert_pem, &key_pem).with_context(|| {
        format!(
            "--autoscaler-tls-cert {} and --autoscaler-tls-key {} are not a certificate and its private key",
            cert.display(),
            key.display()
        )
    })?;
    let mut config = ServerTlsConfig::new().identity(Identity::from_pem(cert_pem, key_pem));
    if let Some(ca) = &args.autoscaler_client_ca {
        config = config.client_ca_root(Certificate::from_pem(read(ca)?));
    }
    Ok(Some(config))
}

/// Builds the rustls server configuration from a PEM certificate chain and
/// key, as the listener will: refuses an unreadable chain or key and a key
/// that is not the certificate's (rustls checks the public keys match), so
/// a bad pair stops `serve` instead of failing every handshake.
fn check_pair(cert_pem: &[u8], key_pem: &[u8]) -> Result<()> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .context("reading the certificate's PEM")?;
    if chain.is_empty() {
        bail!("the certificate file has no CERTIFICATE block");
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).context("reading the key's PEM")?;
    rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .context("the TLS protocol versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the key does not go with the certificate")?;
    Ok(())
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
        let mut builder = tonic::transport::Server::builder();
        if let Some(tls) = self.tls {
            builder = builder
                .tls_config(tls)
                .context("the autoscaler listener's TLS configuration")?;
        }
        builder
            .add_service(health_service)
            .add_service(reflection)
            .add_service(self.service.server())
            .serve_with_incoming_shutdown(
                tonic::transport::server::TcpIncoming::from(self.listener),
                stop,
            )
            .await
            .context("serving the autoscaler listener")
    }
}
