//! The secret values a plugin's calls see, from the sources its manifest
//! names (`wasmprov_policy::secrets`): environment variables read once at
//! load, and credential providers the host runs, asked again when a call's
//! store is made, through a cache that refreshes a value before it expires.
//!
//! The guest only ever reads `wasi:config` keys: it never reaches a file,
//! a program or a metadata endpoint for its credentials (no HTTP grant is
//! added for them). All keys of one provider come from the same snapshot
//! within a call, so an access key never pairs with another key's secret.
//! Every value handed out stays known for redaction (the last
//! [`KEPT_FOR_REDACTION`]), so a log line or error carrying an old or a new
//! value is cleaned either way.
//!
//! A provider is one [`CredentialProvider`]: a file, a command, the AWS
//! chain (`secrets/aws.rs`). A token provider of another cloud (GCP's
//! metadata server or workload identity, Azure's managed identity) fits as
//! one more implementation whose fields are `token` and whose snapshot
//! carries the token's expiry.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use wasmprov_api::ProvisionerError;
use wasmprov_policy::Manifest;
use wasmprov_policy::secrets::{AwsSettings, CommandSource, MAX_SECRET_BYTES, SecretSource};
use wasmtime_wasi_config::WasiConfigVariables;

mod aws;

/// Values handed out that redaction keeps looking for, per plugin.
pub(crate) const KEPT_FOR_REDACTION: usize = 64;
/// A value that expires is refreshed this long before, or at half its
/// remaining life when that is shorter.
const REFRESH_MARGIN: Duration = Duration::from_secs(300);
/// After a failed refresh, how long its failure is the answer (the cached
/// value's, while that has not expired) before the provider is asked
/// again: a failing program or endpoint is not run or asked once per call.
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);
/// A snapshot that has not expired is used for at least this long after it
/// was fetched, however close its expiry (one run per second at most).
const MIN_FRESH: Duration = Duration::from_secs(1);

/// One provider's answer: named fields (`""` is the whole trimmed value of
/// a file or a command) and when they expire, if they do.
#[derive(Debug, Default)]
pub(crate) struct Snapshot {
    fields: BTreeMap<String, String>,
    expires: Option<SystemTime>,
}

/// Why a provider gave no value. Never carries a value.
#[derive(Clone, Debug)]
pub(crate) struct ProviderError {
    /// Whether asking again later may work (a timeout, an endpoint that
    /// did not answer) rather than needing the operator (a missing file,
    /// a program that failed, no credentials configured).
    pub(crate) retryable: bool,
    pub(crate) message: String,
}

impl ProviderError {
    fn fatal(message: impl Into<String>) -> Self {
        Self {
            retryable: false,
            message: message.into(),
        }
    }
    fn retry(message: impl Into<String>) -> Self {
        Self {
            retryable: true,
            message: message.into(),
        }
    }
}

/// A source of secret values the host runs. Implementations: a file, a
/// command, the AWS chain; another cloud's token provider fits the same way.
#[async_trait::async_trait]
pub(crate) trait CredentialProvider: Send + Sync {
    /// What it is, for messages: `file /run/secrets/x`, `aws (profile p)`.
    fn describe(&self) -> String;
    /// Fresh values. `cached_for` applies when the snapshot carries no expiry.
    async fn fetch(&self) -> Result<Snapshot, ProviderError>;
    /// How long a snapshot without expiry is used (zero: ask every call).
    fn cached_for(&self) -> Duration;
    /// How long a failure is the answer before asking again: a program or
    /// an endpoint is not asked once per call while it fails.
    fn retry_after_failure(&self) -> Duration {
        RETRY_AFTER_FAILURE
    }
}

/// A provider and its last snapshot; one refresh at a time.
struct Cached {
    provider: Box<dyn CredentialProvider>,
    state: tokio::sync::Mutex<CacheState>,
}

#[derive(Default)]
struct CacheState {
    /// The last snapshot and when it was fetched.
    last: Option<(Arc<Snapshot>, Instant)>,
    /// The last failed refresh, when it is more recent than `last`.
    failed: Option<(Instant, ProviderError)>,
}

impl Cached {
    fn new(provider: Box<dyn CredentialProvider>) -> Self {
        Self {
            provider,
            state: tokio::sync::Mutex::new(CacheState::default()),
        }
    }

    fn fresh(&self, snapshot: &Snapshot, fetched: Instant) -> bool {
        match snapshot.expires {
            Some(expires) => {
                let now = SystemTime::now();
                if expires <= now {
                    return false;
                }
                if fetched.elapsed() < MIN_FRESH {
                    return true;
                }
                let left = expires.duration_since(now).unwrap_or_default();
                let margin = REFRESH_MARGIN.min(
                    expires
                        .duration_since(now - fetched.elapsed())
                        .unwrap_or_default()
                        / 2,
                );
                left > margin
            }
            None => fetched.elapsed() < self.provider.cached_for(),
        }
    }

    /// The current snapshot: the cached one while fresh, else a new one. A
    /// failed refresh falls back on the cached one while it has not
    /// expired, and is the answer for [`RETRY_AFTER_FAILURE`] before the
    /// provider is asked again. An answer that has already expired is a
    /// failure.
    async fn get(&self) -> Result<Arc<Snapshot>, ProviderError> {
        let mut state = self.state.lock().await;
        if let Some((s, at)) = &state.last
            && self.fresh(s, *at)
        {
            return Ok(s.clone());
        }
        let unexpired = |state: &CacheState| {
            state
                .last
                .as_ref()
                .filter(|(s, _)| s.expires.is_some_and(|x| x > SystemTime::now()))
                .map(|(s, _)| s.clone())
        };
        if let Some((when, e)) = &state.failed
            && when.elapsed() < self.provider.retry_after_failure()
        {
            return unexpired(&state).ok_or_else(|| e.clone());
        }
        let fetched = self.provider.fetch().await.and_then(|s| match s.expires {
            Some(x) if x <= SystemTime::now() => Err(ProviderError::fatal(format!(
                "it answered credentials that had already expired ({} s ago)",
                SystemTime::now()
                    .duration_since(x)
                    .unwrap_or_default()
                    .as_secs()
            ))),
            _ => Ok(s),
        });
        match fetched {
            Ok(s) => {
                let s = Arc::new(s);
                state.last = Some((s.clone(), Instant::now()));
                state.failed = None;
                Ok(s)
            }
            Err(e) => {
                state.failed = Some((Instant::now(), e.clone()));
                match unexpired(&state) {
                    Some(s) => {
                        tracing::warn!(provider = %self.provider.describe(), error = %e.message, "refreshing credentials failed; the current ones are used until they expire");
                        Ok(s)
                    }
                    None => Err(e),
                }
            }
        }
    }
}

/// Where one key's value comes from at a call.
enum Entry {
    /// Read at load (an environment variable); `None` when it was unset.
    Fixed(Option<String>),
    /// Field `field` of provider `provider`; `optional` keys (an AWS
    /// session token) are left out when the snapshot lacks them.
    Provided {
        provider: usize,
        field: String,
        optional: bool,
    },
}

/// What one call's store gets: its `wasi:config` variables and the values
/// to redact from its logs and errors.
pub(crate) struct CallSecrets {
    pub(crate) config: WasiConfigVariables,
    pub(crate) redact: Arc<Vec<String>>,
}

impl std::fmt::Debug for CallSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallSecrets").finish_non_exhaustive()
    }
}

/// A plugin's config and secrets, resolved per call.
pub(crate) struct PluginSecrets {
    plugin: String,
    config: BTreeMap<String, String>,
    entries: BTreeMap<String, Entry>,
    providers: Vec<(String, Cached)>,
    /// Every value handed out (the newest last), for redaction.
    known: Mutex<Arc<Vec<String>>>,
    /// What the last call got: what a call that must not wait (a price
    /// hint) is given; read without a lock.
    last: arc_swap::ArcSwap<CallSecrets>,
}

impl std::fmt::Debug for PluginSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginSecrets")
            .field("plugin", &self.plugin)
            .field("keys", &self.entries.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// What loading a plugin's secrets says for `inspect`: key → where from.
pub(crate) struct Loaded {
    pub(crate) secrets: PluginSecrets,
    pub(crate) shown: BTreeMap<String, String>,
    pub(crate) warnings: Vec<String>,
}

impl PluginSecrets {
    /// The sources of `manifest`, environment variables read through `env`.
    pub(crate) fn load(
        manifest: &Manifest,
        env: &(dyn Fn(&str) -> Option<String> + Send + Sync),
    ) -> Loaded {
        let mut shown = BTreeMap::new();
        let mut warnings = Vec::new();
        let mut entries = BTreeMap::new();
        let mut providers: Vec<(String, Cached)> = Vec::new();
        // One provider per distinct source: two keys naming the same
        // command (or the AWS chain) share one run, one snapshot.
        let mut index: BTreeMap<String, usize> = BTreeMap::new();
        let mut provider = |id: String, make: &dyn Fn() -> Box<dyn CredentialProvider>| {
            *index.entry(id.clone()).or_insert_with(|| {
                let p = make();
                providers.push((p.describe(), Cached::new(p)));
                providers.len() - 1
            })
        };
        let aws_settings = manifest.credentials.aws.clone().unwrap_or_default();
        for (key, source) in &manifest.secret_sources {
            let entry = match source {
                SecretSource::Env(name) => {
                    let value = env(name);
                    match &value {
                        Some(_) => {
                            shown.insert(key.clone(), format!("from ${name} (set, redacted)"))
                        }
                        None => {
                            warnings.push(format!(
                                "secrets.{key}: environment variable {name} is not set; the plugin will not see this key"
                            ));
                            shown.insert(key.clone(), format!("from ${name} (NOT SET)"))
                        }
                    };
                    Entry::Fixed(value)
                }
                SecretSource::File { path, json } => {
                    if let Err(e) = std::fs::metadata(path) {
                        warnings.push(format!(
                            "secrets.{key}: file {path} cannot be read now ({e}); calls fail until it can"
                        ));
                    }
                    shown.insert(
                        key.clone(),
                        format!("from {} (read at each call, redacted)", source.describe()),
                    );
                    let path = path.clone();
                    Entry::Provided {
                        provider: provider(format!("file {path}"), &|| {
                            Box::new(FileProvider { path: path.clone() })
                        }),
                        field: json.clone().unwrap_or_default(),
                        optional: false,
                    }
                }
                SecretSource::Command(c) => {
                    if std::fs::metadata(&c.program).is_err() {
                        warnings.push(format!(
                            "secrets.{key}: program {} does not exist; calls fail until it does",
                            c.program
                        ));
                    }
                    shown.insert(
                        key.clone(),
                        format!(
                            "from {} (run on the host, its answer kept until its Expiration or {} s, redacted)",
                            source.describe(),
                            c.refresh_seconds
                        ),
                    );
                    let id = format!(
                        "command {:?} {:?} {} {}",
                        c.program, c.args, c.refresh_seconds, c.timeout_seconds
                    );
                    Entry::Provided {
                        provider: provider(id, &|| Box::new(CommandProvider(c.clone()))),
                        field: c.json.clone().unwrap_or_default(),
                        optional: false,
                    }
                }
                SecretSource::Aws(field) => {
                    shown.insert(
                        key.clone(),
                        format!(
                            "from {} ({}, refreshed before expiry, redacted)",
                            source.describe(),
                            aws::describe(&aws_settings)
                        ),
                    );
                    let settings: AwsSettings = aws_settings.clone();
                    let plugin = manifest.name.clone();
                    Entry::Provided {
                        provider: provider("aws".into(), &|| {
                            Box::new(aws::AwsProvider::new(&plugin, settings.clone()))
                        }),
                        field: field.as_str().to_string(),
                        optional: field.as_str() == "session_token",
                    }
                }
                other => {
                    warnings.push(format!(
                        "secrets.{key}: this host does not know the source {}; the plugin will not see this key",
                        other.describe()
                    ));
                    Entry::Fixed(None)
                }
            };
            entries.insert(key.clone(), entry);
        }
        let fixed: Vec<String> = entries
            .values()
            .filter_map(|e| match e {
                Entry::Fixed(Some(v)) if !v.is_empty() => Some(v.clone()),
                _ => None,
            })
            .collect();
        let known = Arc::new(fixed);
        let mut first = WasiConfigVariables::new();
        for (k, v) in &manifest.config {
            first.insert(k, v);
        }
        for (k, e) in &entries {
            if let Entry::Fixed(Some(v)) = e {
                first.insert(k, v);
            }
        }
        let last = Arc::new(CallSecrets {
            config: first,
            redact: known.clone(),
        });
        Loaded {
            secrets: Self {
                plugin: manifest.name.clone(),
                config: manifest.config.clone(),
                entries,
                providers,
                known: Mutex::new(known),
                last: arc_swap::ArcSwap::new(last),
            },
            shown,
            warnings,
        }
    }

    /// Every value handed out so far, for redaction.
    pub(crate) fn known(&self) -> Arc<Vec<String>> {
        self.known.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// What the last call got, without asking any provider: for a call
    /// that must not wait.
    pub(crate) fn last(&self) -> Arc<CallSecrets> {
        self.last.load_full()
    }

    /// The last values when they are not `held` (what a kept instance
    /// has), `None` when `held` is still the last.
    pub(crate) fn newer_than(&self, held: &Arc<CallSecrets>) -> Option<Arc<CallSecrets>> {
        let last = self.last.load();
        (!Arc::ptr_eq(&last, held)).then(|| arc_swap::Guard::into_inner(last))
    }

    /// The values current for one call: each provider asked (through its
    /// cache) once. A provider's failure is the call's error, naming the
    /// key and the provider, never a value.
    pub(crate) async fn for_call(&self) -> Result<Arc<CallSecrets>, ProvisionerError> {
        if self.providers.is_empty() {
            return Ok(self.last());
        }
        let mut snapshots: BTreeMap<usize, Arc<Snapshot>> = BTreeMap::new();
        let mut config = WasiConfigVariables::new();
        for (k, v) in &self.config {
            config.insert(k, v);
        }
        let mut values = Vec::new();
        for (key, entry) in &self.entries {
            match entry {
                Entry::Fixed(Some(v)) => {
                    config.insert(key, v);
                }
                Entry::Fixed(None) => {}
                Entry::Provided {
                    provider,
                    field,
                    optional,
                } => {
                    let (name, cached) = &self.providers[*provider];
                    let snapshot = match snapshots.get(provider) {
                        Some(s) => s.clone(),
                        None => {
                            let s = cached.get().await.map_err(|e| self.error(key, name, e))?;
                            snapshots.insert(*provider, s.clone());
                            s
                        }
                    };
                    match snapshot.fields.get(field) {
                        Some(v) => {
                            values.push(v.clone());
                            config.insert(key, v);
                        }
                        None if *optional => {}
                        None => {
                            return Err(self.error(
                                key,
                                name,
                                ProviderError::fatal(if field.is_empty() {
                                    "gave no value".to_string()
                                } else {
                                    format!("gave no string field {field:?}")
                                }),
                            ));
                        }
                    }
                }
            }
        }
        let redact = self.remember(values);
        let call = Arc::new(CallSecrets { config, redact });
        self.last.store(call.clone());
        Ok(call)
    }

    /// Adds `values` to the known ones (newest last, at most
    /// [`KEPT_FOR_REDACTION`]); the list to redact.
    fn remember(&self, values: Vec<String>) -> Arc<Vec<String>> {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        let new: Vec<String> = values
            .into_iter()
            .filter(|v| !v.is_empty() && !known.contains(v))
            .collect();
        if !new.is_empty() {
            let mut list: Vec<String> = known.iter().cloned().collect();
            list.extend(new);
            let excess = list.len().saturating_sub(KEPT_FOR_REDACTION);
            list.drain(..excess);
            *known = Arc::new(list);
        }
        known.clone()
    }

    fn error(&self, key: &str, provider: &str, e: ProviderError) -> ProvisionerError {
        // Providers' messages never carry a value (`ProviderError`).
        let message = format!(
            "secret `{key}` of plugin {} from {provider}: {}",
            self.plugin, e.message
        );
        tracing::warn!(plugin = %self.plugin, key, provider, retryable = e.retryable, error = %wasmprov_policy::text::line(&message), "a secret could not be resolved for a call");
        if e.retryable {
            ProvisionerError::Transport(message)
        } else {
            ProvisionerError::Auth(message)
        }
    }
}

/// The value of a file or command: the trimmed text, and when it is a JSON
/// object its string fields (an `Expiration` in RFC 3339 sets the expiry).
fn parse_value(text: &[u8], want_json: bool) -> Result<Snapshot, ProviderError> {
    let text = std::str::from_utf8(text)
        .map_err(|_| ProviderError::fatal("the value is not UTF-8 text"))?
        .trim();
    if text.is_empty() {
        return Err(ProviderError::fatal("the value is empty"));
    }
    let mut snapshot = Snapshot::default();
    snapshot.fields.insert(String::new(), text.to_string());
    if want_json {
        let object: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text)
            .map_err(|e| {
                // serde_json's message names a line and column, never the text.
                ProviderError::fatal(format!("the value is not a JSON object ({e})"))
            })?;
        for (k, v) in object {
            if let serde_json::Value::String(s) = v {
                snapshot.fields.insert(k, s);
            }
        }
        if let Some(expiration) = snapshot.fields.get("Expiration") {
            let at = aws_smithy_types::DateTime::from_str(
                expiration,
                aws_smithy_types::date_time::Format::DateTime,
            )
            .ok()
            .and_then(|t| SystemTime::try_from(t).ok())
            .ok_or_else(|| {
                ProviderError::fatal(format!(
                    "its Expiration {expiration:?} is not an RFC 3339 time such as \"2030-01-01T00:00:00Z\""
                ))
            })?;
            snapshot.expires = Some(at);
        }
    }
    Ok(snapshot)
}

/// `{ file = … }`: read at every call.
struct FileProvider {
    path: String,
}

#[async_trait::async_trait]
impl CredentialProvider for FileProvider {
    fn describe(&self) -> String {
        format!("file {}", self.path)
    }

    fn cached_for(&self) -> Duration {
        Duration::ZERO
    }

    /// A file is cheap to read and local: read at every call, failed or not.
    fn retry_after_failure(&self) -> Duration {
        Duration::ZERO
    }

    async fn fetch(&self) -> Result<Snapshot, ProviderError> {
        use tokio::io::AsyncReadExt;
        let path = &self.path;
        let meta = tokio::fs::metadata(path)
            .await
            .map_err(|e| ProviderError::fatal(format!("cannot read {path}: {e}")))?;
        if !meta.is_file() {
            return Err(ProviderError::fatal(format!(
                "{path} is not a regular file"
            )));
        }
        let file = tokio::fs::File::open(path)
            .await
            .map_err(|e| ProviderError::fatal(format!("cannot read {path}: {e}")))?;
        let mut bytes = Vec::new();
        file.take(MAX_SECRET_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .await
            .map_err(|e| ProviderError::fatal(format!("cannot read {path}: {e}")))?;
        if bytes.len() > MAX_SECRET_BYTES {
            return Err(ProviderError::fatal(format!(
                "{path} is larger than {} KiB",
                MAX_SECRET_BYTES >> 10
            )));
        }
        // Any JSON field may be asked for: parse when it looks like JSON.
        let json = bytes.trim_ascii_start().starts_with(b"{");
        parse_value(&bytes, json)
    }
}

/// `{ command = […] }`: run on the host, its answer cached.
struct CommandProvider(CommandSource);

#[async_trait::async_trait]
impl CredentialProvider for CommandProvider {
    fn describe(&self) -> String {
        format!("command {}", self.0.command_line())
    }

    fn cached_for(&self) -> Duration {
        Duration::from_secs(self.0.refresh_seconds)
    }

    async fn fetch(&self) -> Result<Snapshot, ProviderError> {
        use tokio::io::AsyncReadExt;
        let c = &self.0;
        let limit = Duration::from_secs(c.timeout_seconds);
        let mut cmd = tokio::process::Command::new(&c.program);
        cmd.args(&c.args)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        // A credential helper finds its own configuration under $HOME.
        if let Some(home) = std::env::var_os("HOME") {
            cmd.env("HOME", home);
        }
        // In a process group of its own, killed whole when the run ends
        // (whatever the outcome): nothing it started outlives it.
        cmd.process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| ProviderError::fatal(format!("cannot start {}: {e}", c.program)))?;
        let _group = crate::exec::GroupGuard(
            child
                .id()
                .and_then(|p| i32::try_from(p).ok())
                .map(nix::unistd::Pid::from_raw),
        );
        let mut stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        // Standard error is drained on the side (only counted), so that a
        // chatty program never blocks on it; it ends with the program.
        let err_task = tokio::spawn(async move {
            let mut seen = 0usize;
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                seen += n;
            }
            seen
        });
        let run = async {
            let mut out = Vec::new();
            let ended = {
                let mut limited = (&mut stdout).take(MAX_SECRET_BYTES as u64 + 1);
                let read = limited.read_to_end(&mut out);
                tokio::pin!(read);
                let ended = tokio::select! {
                    r = &mut read => { r?; None }
                    s = child.wait() => Some(s?),
                };
                if ended.is_some() {
                    // The program ended, and something it started may hold
                    // its standard output open: what it wrote is read for a
                    // moment more, not until that one ends.
                    let _ = tokio::time::timeout(Duration::from_millis(200), &mut read).await;
                }
                ended
            };
            if out.len() > MAX_SECRET_BYTES {
                return Ok((None, out));
            }
            let status = match ended {
                Some(s) => s,
                None => child.wait().await?,
            };
            Ok::<_, std::io::Error>((Some(status), out))
        };
        let (status, out) = match tokio::time::timeout(limit, run).await {
            Err(_) => {
                return Err(ProviderError::retry(format!(
                    "{} did not finish within {} s; it and everything it started were killed",
                    c.program, c.timeout_seconds
                )));
            }
            Ok(Err(e)) => {
                return Err(ProviderError::retry(format!("running {}: {e}", c.program)));
            }
            Ok(Ok(r)) => r,
        };
        let Some(status) = status else {
            return Err(ProviderError::fatal(format!(
                "{} printed more than {} KiB and was killed",
                c.program,
                MAX_SECRET_BYTES >> 10
            )));
        };
        if !status.success() {
            // Its standard error is not shown: a credential helper may
            // print a secret there (its last answer, a token it read).
            let err = err_task.await.unwrap_or_default();
            return Err(ProviderError::fatal(format!(
                "{} failed ({status}); its standard error ({} bytes) is not shown, as it may hold secrets: run it by hand to see it",
                c.program, err
            )));
        }
        parse_value(&out, c.json.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_trimmed_and_json_fields_carry_their_expiration() {
        let s = parse_value(b"  tok\n", false).unwrap();
        assert_eq!(s.fields[""], "tok");
        assert_eq!(s.expires, None);
        let s = parse_value(
            br#"{"Version":1,"AccessKeyId":"AKID","SecretAccessKey":"s","Expiration":"2030-01-01T00:00:00Z"}"#,
            true,
        )
        .unwrap();
        assert_eq!(s.fields["AccessKeyId"], "AKID");
        assert_eq!(
            s.expires,
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_893_456_000))
        );
        for (text, says) in [
            (&b""[..], "empty"),
            (b"\xff", "UTF-8"),
            (b"[1]", "not a JSON object"),
            (br#"{"Expiration":"soon"}"#, "RFC 3339"),
        ] {
            let e = parse_value(text, true).unwrap_err();
            assert!(e.message.contains(says), "{e:?}");
        }
    }

    struct Counting {
        calls: std::sync::atomic::AtomicUsize,
        life: Option<Duration>,
    }

    #[async_trait::async_trait]
    impl CredentialProvider for Counting {
        fn describe(&self) -> String {
            "counting".into()
        }
        fn cached_for(&self) -> Duration {
            Duration::from_secs(60)
        }
        async fn fetch(&self) -> Result<Snapshot, ProviderError> {
            let n = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut s = Snapshot::default();
            s.fields.insert(String::new(), format!("value-{n}"));
            s.expires = self.life.map(|l| SystemTime::now() + l);
            Ok(s)
        }
    }

    #[tokio::test]
    async fn the_cache_refreshes_before_expiry_and_not_before() {
        // Long-lived: one fetch serves many calls.
        let c = Cached::new(Box::new(Counting {
            calls: 0.into(),
            life: Some(Duration::from_secs(3600)),
        }));
        for _ in 0..3 {
            assert_eq!(c.get().await.unwrap().fields[""], "value-0");
        }
        // Two seconds of life: refreshed within its last second (half its life).
        let c = Cached::new(Box::new(Counting {
            calls: 0.into(),
            life: Some(Duration::from_secs(2)),
        }));
        assert_eq!(c.get().await.unwrap().fields[""], "value-0");
        assert_eq!(c.get().await.unwrap().fields[""], "value-0");
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert_eq!(c.get().await.unwrap().fields[""], "value-1");
    }
}
