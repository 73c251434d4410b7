//! `{ aws = … }`: the AWS SDK's standard credential chain, run by the host
//! with `aws-config` (environment variables, the shared config and
//! credentials files and their profiles, `credential_process`, a web
//! identity token file as EKS IRSA sets it, the ECS or EKS Pod Identity
//! container endpoint, the instance's role through IMDSv2), with a role
//! assumed on top when `[credentials.aws] role_arn` says so. SSO profiles
//! are left out (the `sso` feature pulls two more SDK clients).
//!
//! The chain is built at the first call that needs it (it reads the
//! host's environment and files then) and asked again whenever the
//! plugin's cache finds its credentials near their expiry.

use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use wasmprov_policy::secrets::AwsSettings;

use super::{CredentialProvider, ProviderError, Snapshot};

/// How long one refresh may take (a chain that tries IMDS off EC2 gives up
/// well within it).
const FETCH_LIMIT: Duration = Duration::from_secs(30);
/// How long credentials without an expiry (long-term keys from a file or
/// the environment) are used before the chain is asked again.
const STATIC_FOR: Duration = Duration::from_secs(300);
/// STS's region when neither the manifest nor the chain names one.
const STS_FALLBACK_REGION: &str = "us-east-1";

/// `(profile P, role R, region X)`, or `the host's default chain`.
pub(super) fn describe(s: &AwsSettings) -> String {
    let mut parts = vec!["the host's AWS chain".to_string()];
    for (name, v) in [
        ("profile", &s.profile),
        ("role", &s.role_arn),
        ("region", &s.region),
    ] {
        if let Some(v) = v {
            parts.push(format!("{name} {v}"));
        }
    }
    parts.join(", ")
}

pub(super) struct AwsProvider {
    plugin: String,
    settings: AwsSettings,
    chain: tokio::sync::OnceCell<SharedCredentialsProvider>,
}

impl AwsProvider {
    pub(super) fn new(plugin: &str, settings: AwsSettings) -> Self {
        Self {
            plugin: plugin.to_string(),
            settings,
            chain: tokio::sync::OnceCell::new(),
        }
    }

    async fn build(&self) -> SharedCredentialsProvider {
        let s = &self.settings;
        // The SDK's HTTPS client on rustls with ring, as the rest of the host.
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
                aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
            ))
            .build_https();
        let mut loader = aws_config::defaults(BehaviorVersion::latest()).http_client(http);
        if let Some(profile) = &s.profile {
            loader = loader.profile_name(profile);
        }
        if let Some(region) = &s.region {
            loader = loader.region(aws_config::Region::new(region.clone()));
        }
        let mut sdk = loader.load().await;
        if sdk.region().is_none() {
            sdk = sdk
                .into_builder()
                .region(aws_config::Region::from_static(STS_FALLBACK_REGION))
                .build();
        }
        let base = match sdk.credentials_provider() {
            Some(chain) => chain,
            None => SharedCredentialsProvider::new(
                aws_config::default_provider::credentials::DefaultCredentialsChain::builder()
                    .build()
                    .await,
            ),
        };
        let Some(role) = &s.role_arn else {
            return base;
        };
        let mut builder = aws_config::sts::AssumeRoleProvider::builder(role)
            .session_name(
                s.role_session_name
                    .clone()
                    .unwrap_or_else(|| format!("wasmprov-{}", self.plugin)),
            )
            .configure(&sdk);
        if let Some(id) = &s.external_id {
            builder = builder.external_id(id);
        }
        SharedCredentialsProvider::new(builder.build_from_provider(base).await)
    }
}

#[async_trait::async_trait]
impl CredentialProvider for AwsProvider {
    fn describe(&self) -> String {
        format!("aws ({})", describe(&self.settings))
    }

    fn cached_for(&self) -> Duration {
        STATIC_FOR
    }

    async fn fetch(&self) -> Result<Snapshot, ProviderError> {
        // The SDK reads a web identity token file whole: bounded here first
        // (a regular file, at most 64 KiB), as the host's own file secrets.
        if let Some(path) = std::env::var_os("AWS_WEB_IDENTITY_TOKEN_FILE") {
            let meta = tokio::fs::metadata(&path).await.map_err(|e| {
                ProviderError::fatal(format!(
                    "AWS_WEB_IDENTITY_TOKEN_FILE {}: {e}",
                    std::path::Path::new(&path).display()
                ))
            })?;
            if !meta.is_file() || meta.len() > super::MAX_SECRET_BYTES as u64 {
                return Err(ProviderError::fatal(format!(
                    "AWS_WEB_IDENTITY_TOKEN_FILE {} is not a regular file of at most {} KiB",
                    std::path::Path::new(&path).display(),
                    super::MAX_SECRET_BYTES >> 10
                )));
            }
        }
        let work = async {
            let chain = self.chain.get_or_init(|| self.build()).await;
            chain.provide_credentials().await
        };
        let creds = match tokio::time::timeout(FETCH_LIMIT, work).await {
            Err(_) => {
                return Err(ProviderError::retry(format!(
                    "the chain gave no credentials within {} s",
                    FETCH_LIMIT.as_secs()
                )));
            }
            Ok(Err(e)) => {
                use aws_credential_types::provider::error::CredentialsError as E;
                let message = chain_message(&e);
                // Worth asking again: a timeout, an endpoint that could not
                // be reached. Not: no credentials configured, a program that
                // failed, an answer refused (IMDS's 403 without a role).
                let retryable = match &e {
                    E::ProviderTimedOut(_) => true,
                    E::ProviderError(_) => {
                        let m = message.to_ascii_lowercase();
                        [
                            "timed out",
                            "timeout",
                            "dispatch failure",
                            "connection",
                            "io error",
                        ]
                        .iter()
                        .any(|w| m.contains(w))
                    }
                    _ => false,
                };
                return Err(ProviderError { retryable, message });
            }
            Ok(Ok(c)) => c,
        };
        let mut snapshot = Snapshot {
            expires: creds.expiry(),
            ..Snapshot::default()
        };
        snapshot
            .fields
            .insert("access_key_id".into(), creds.access_key_id().to_string());
        snapshot.fields.insert(
            "secret_access_key".into(),
            creds.secret_access_key().to_string(),
        );
        if let Some(token) = creds.session_token() {
            snapshot
                .fields
                .insert("session_token".into(), token.to_string());
        }
        Ok(snapshot)
    }
}

/// A credentials error as one short line: each error of its chain by its
/// `Display` (not the SDK's `Debug` dump), whatever follows "stderr" in
/// one cut off (a `credential_process` program's standard error may hold a
/// secret), at most 400 characters.
fn chain_message(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = next {
        let mut text = err.to_string();
        if let Some(at) = text.to_ascii_lowercase().find("stderr") {
            text.truncate(at);
            text.push_str("(standard error not shown)");
        }
        let text = text.trim().to_string();
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        next = err.source();
    }
    let joined = parts.join(": ");
    let line = wasmprov_policy::text::line(&joined);
    line.chars().take(400).collect()
}
