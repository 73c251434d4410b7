//! `wasmprov install` and `wasmprov push`: getting a third-party plugin
//! into a plugin directory, digest-pinned and signature-checked, with a
//! manifest that grants exactly what the plugin declares it needs.
//!
//! - [`oci`]: the registry (layout, bounded and digest-checked fetches);
//! - [`signature`]: minisign signatures against the directory's trusted keys;
//! - here: the flow — fetch, verify, show, confirm, write, lock.

pub mod oci;
pub mod signature;

use std::collections::BTreeMap;
use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use wasmprov_host::lock::LockEntry;
use wasmprov_host::plugin_dir::PluginDir;
use wasmprov_host::policy::manifest::plugin_name_problem;
use wasmprov_host::policy::requests::{FILE as REQUESTS_FILE, Requests, SECTION};
use wasmprov_host::policy::trust::{
    DirSettings, FILE as SETTINGS_FILE, MAX_SIGNATURE_BYTES, SignedFacts, Verdict,
};
use wasmprov_host::policy::{Manifest, SecretSource};

use crate::output::{c, line};

/// What the install screen says: on stdout, or on stderr under `--json`
/// (stdout then holds the JSON answer alone).
macro_rules! say {
    ($json:expr, $($arg:tt)*) => {
        if $json {
            eprintln!($($arg)*);
        } else {
            println!($($arg)*);
        }
    };
}

/// How long one install may take by default, from the first byte asked of
/// the registry to the last one read (`--timeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// What `wasmprov install` was asked.
#[derive(Debug)]
pub struct InstallArgs {
    /// An OCI reference or a local `.wasm` file.
    pub reference: String,
    /// The name to install under (default: the repository's last segment,
    /// or the file's stem); never taken from the registry.
    pub name: Option<String>,
    /// Config values for the manifest.
    pub config: Vec<(String, String)>,
    /// Secrets: key → environment variable.
    pub secrets: Vec<(String, String)>,
    /// Accept without asking.
    pub yes: bool,
    /// Largest component accepted.
    pub max_bytes: u64,
    /// Install a component whose signed version or time is older than the
    /// installed one's.
    pub allow_downgrade: bool,
    /// The deadline for fetching and checking (everything but the
    /// operator's answer to the prompt).
    pub timeout: Duration,
}

/// A component got from a registry or a file, not yet trusted.
struct Candidate {
    name: String,
    /// Where it came from, as recorded in the lock.
    source: String,
    /// The name the registry's annotation gives it, if any (shown only).
    claimed: Option<String>,
    bytes: Vec<u8>,
    signature: Option<String>,
}

/// Reads a file beside (or as) a local component as untrusted input:
/// through a capability handle on its directory (no symlink out of it), a
/// regular file only (a FIFO or device is refused without blocking), at
/// most `max` bytes. `Ok(None)` when there is no such file.
fn read_local(path: &Path, max: u64) -> Result<Option<Vec<u8>>> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .with_context(|| format!("{} is not a file name", path.display()))?;
    PluginDir::open_existing(parent)?.read(name, max)
}

/// Whether `REF` is a local file rather than a registry reference. A
/// reference whose first part names a registry host (`127.0.0.1:5000/…`,
/// `ghcr.io/…`, `localhost/…`) is never a path, even when a file of that
/// name exists here, unless it is written as one: starting with `/`, `./`
/// or `../`, or ending in `.wasm`. Anything else is a path only when such
/// a file exists.
fn is_local(reference: &str) -> bool {
    if reference.ends_with(".wasm")
        || reference.starts_with('/')
        || reference.starts_with("./")
        || reference.starts_with("../")
    {
        return true;
    }
    let registry_host = reference.split_once('/').is_some_and(|(first, _)| {
        first.contains(['.', ':']) || first == "localhost" || first.starts_with('[')
    });
    !registry_host && Path::new(reference).is_file()
}

/// The default name: the file's stem, or the repository's last segment,
/// both from what the operator typed.
fn default_name(reference: &str) -> Option<String> {
    if is_local(reference) {
        return Path::new(reference)
            .file_stem()
            .and_then(|s| s.to_str())
            .map(str::to_string);
    }
    oci::reference(reference)
        .ok()?
        .repository()
        .rsplit('/')
        .next()
        .map(str::to_string)
}

async fn candidate(args: &InstallArgs) -> Result<Candidate> {
    if !is_local(&args.reference) {
        oci::reference(&args.reference)?;
    }
    let name = args
        .name
        .clone()
        .or_else(|| default_name(&args.reference))
        .context("cannot tell the plugin's name; give it with --name")?;
    if let Some(problem) = plugin_name_problem(&name) {
        bail!("{problem} (give another with --name)");
    }
    if is_local(&args.reference) {
        let path = PathBuf::from(&args.reference);
        let bytes = read_local(&path, args.max_bytes)?
            .with_context(|| format!("{}: no such file", path.display()))?;
        let sig_path = PathBuf::from(format!("{}.minisig", path.display()));
        let signature = read_local(&sig_path, MAX_SIGNATURE_BYTES)?
            .map(|b| {
                String::from_utf8(b).with_context(|| format!("{} is not text", sig_path.display()))
            })
            .transpose()?;
        let source = std::path::absolute(&path)
            .unwrap_or(path)
            .display()
            .to_string();
        return Ok(Candidate {
            name,
            source,
            claimed: None,
            bytes,
            signature,
        });
    }
    let fetched = oci::fetch(&args.reference, oci::Bounds::with_component(args.max_bytes)).await?;
    let source = if args.reference.contains('@') {
        fetched.pinned.clone()
    } else {
        format!("{} ({})", args.reference, fetched.pinned)
    };
    Ok(Candidate {
        name,
        source,
        claimed: fetched.plugin,
        bytes: fetched.component,
        signature: fetched.signature,
    })
}

fn declared(bytes: &[u8], what: &str) -> Result<Option<Requests>> {
    wasmprov_host::custom_section(bytes, SECTION)
        .map(|text| Requests::parse(&text))
        .transpose()
        .map_err(|e| anyhow::anyhow!("refused: {what} declares its capabilities malformed: {e}"))
}

fn read_settings(dir: &PluginDir) -> Result<DirSettings> {
    match dir.read(SETTINGS_FILE, wasmprov_host::MAX_TEXT_BYTES)? {
        Some(bytes) => {
            DirSettings::parse(&String::from_utf8_lossy(&bytes)).map_err(anyhow::Error::msg)
        }
        None => Ok(DirSettings::default()),
    }
}

fn confirm(question: &str, yes: bool) -> Result<()> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        bail!(
            "not confirmed: nothing was changed; review the above and re-run with --yes to accept"
        );
    }
    print!("{question} [y/N] ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    if matches!(answer.trim(), "y" | "Y" | "yes") {
        Ok(())
    } else {
        bail!("not confirmed: nothing was changed")
    }
}

fn print_requests(requests: Option<&Requests>, manifest: &Manifest, json: bool) -> Vec<String> {
    use wasmprov_host::policy::requests::Standing;
    let Some(r) = requests else {
        say!(
            json,
            "requests:  nothing declared; the manifest grants nothing (add grants by hand)"
        );
        return Vec::new();
    };
    say!(json, "requests (as the written manifest answers them):");
    let checks = r.compare(manifest);
    let mut optional = Vec::new();
    let mut dangerous = Vec::new();
    for ch in &checks {
        if ch.standing == Standing::Unset {
            optional.push(c(&ch.item));
            continue;
        }
        // A secret shows the host variable it reads.
        let standing = match (&ch.granted, ch.kind) {
            (Some(var), "secret") if ch.standing == Standing::Granted => {
                format!("granted from {}", c(var))
            }
            _ => ch.standing.label().to_string(),
        };
        say!(
            json,
            "  {:<6}  {}  [{standing}]  {}",
            ch.kind,
            c(&ch.item),
            c(&ch.why)
        );
        if let Some(from) = &ch.from {
            say!(json, "          from {}", c(from));
        }
        if let Some(danger) = &ch.danger {
            say!(json, "          DANGEROUS: {}", c(danger));
            dangerous.push(format!("{} {}: {danger}", ch.kind, ch.item));
        }
    }
    if !optional.is_empty() {
        say!(json, "  optional, not set: {}", optional.join(", "));
    }
    if !dangerous.is_empty() {
        say!(
            json,
            "{} DANGEROUS grant(s) in the manifest that would be written; read each reason above before you accept",
            dangerous.len()
        );
    }
    dangerous
}

/// The trusted comment of the signature kept beside an installed
/// component, if any.
fn installed_facts(dir: &PluginDir, component_file: &str) -> Option<SignedFacts> {
    let sig = dir
        .read(&format!("{component_file}.minisig"), MAX_SIGNATURE_BYTES)
        .ok()??;
    let sig = minisign::SignatureBox::from_string(&String::from_utf8(sig).ok()?).ok()?;
    Some(SignedFacts::parse(&sig.trusted_comment().ok()?))
}

/// `wasmprov install REF`.
///
/// # Errors
/// Every refusal, with what to do about it; nothing in the directory
/// changes unless the whole install succeeds.
pub async fn install(dir_path: &Path, args: &InstallArgs, json: bool) -> Result<()> {
    let cand = tokio::time::timeout(args.timeout, candidate(args))
        .await
        .map_err(|_| {
            crate::exit::Temporary(format!(
                "{}: gave up after {} s (the install deadline; --timeout SECONDS sets it); nothing was changed",
                args.reference,
                args.timeout.as_secs()
            ))
        })??;
    let dir = PluginDir::open(dir_path)?;
    let what = cand.source.clone();
    let digest = wasmprov_host::lock::sha256_hex(&cand.bytes);
    let settings = read_settings(&dir)?;
    let verdict = signature::check(
        &cand.bytes,
        cand.signature.as_deref(),
        &settings,
        dir_path,
        &cand.name,
        &what,
        Some(&cand.source),
    )?;
    let requests = declared(&cand.bytes, &what)?;

    let component_file = format!("{}.wasm", cand.name);
    let manifest_file = format!("{}.toml", cand.name);
    let signature_file = format!("{component_file}.minisig");
    let lock = wasmprov_host::lock::read(dir_path)?;
    let locked = lock.plugins.get(&cand.name);
    let installed_bytes = dir.read(&component_file, args.max_bytes).ok().flatten();
    let same = matches!((locked, &installed_bytes), (Some(entry), Some(old))
        if entry.sha256 == digest && wasmprov_host::lock::sha256_hex(old) == digest);
    if same && args.config.is_empty() && args.secrets.is_empty() {
        if json {
            return crate::output::print_json(&serde_json::json!({
                "plugin": cand.name,
                "sha256": digest,
                "unchanged": true,
            }));
        }
        say!(
            json,
            "{} is already installed at sha256:{digest}; nothing to do",
            c(&cand.name)
        );
        return Ok(());
    }
    // A signed version or signing time older than the installed one's is a
    // downgrade, said as such and refused unless asked for.
    let downgrade = match (&verdict, installed_facts(&dir, &component_file)) {
        (Verdict::Signed { facts, .. }, Some(old)) if !same => facts.older_than(&old),
        _ => None,
    };

    // What the operator already set is kept for the keys still declared.
    let old_text = dir
        .read(&manifest_file, wasmprov_host::MAX_TEXT_BYTES)
        .ok()
        .flatten()
        .and_then(|b| String::from_utf8(b).ok());
    let old_manifest = old_text
        .as_deref()
        .and_then(|t| Manifest::parse(&manifest_file, t).ok());
    let mut config: BTreeMap<String, String> = BTreeMap::new();
    let mut secrets: BTreeMap<String, String> = BTreeMap::new();
    if let (Some(m), Some(r)) = (&old_manifest, &requests) {
        config.extend(
            m.config
                .iter()
                .filter(|(k, _)| r.config.contains_key(*k))
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        // Only `{ env = … }` secrets are carried over: the written manifest
        // names variables (another source shows in the grant diff).
        secrets.extend(
            m.secret_sources
                .iter()
                .filter(|(k, _)| r.secrets.contains_key(*k))
                .filter_map(|(k, s)| match s {
                    SecretSource::Env(env) => Some((k.clone(), env.clone())),
                    _ => None,
                }),
        );
    }
    config.extend(args.config.iter().cloned());
    secrets.extend(args.secrets.iter().cloned());
    let manifest_text = match &requests {
        Some(r) => r
            .manifest_text(&cand.name, &component_file, &digest, &config, &secrets)
            .map_err(|e| anyhow::anyhow!("{e}"))?,
        None => {
            if !config.is_empty() || !secrets.is_empty() {
                bail!(
                    "{what} declares no config keys or secrets; --config and --secret cannot be checked against it"
                );
            }
            format!(
                "# Written by `wasmprov install`: {name} declares nothing it needs, so nothing is granted.\nname = \"{name}\"\ncomponent = \"{component_file}\"\nsha256 = \"{digest}\"\n",
                name = cand.name
            )
        }
    };
    // The operator's limits stay as they were.
    let limits = old_text
        .as_deref()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .and_then(|t| t.get("limits").cloned());
    let manifest_text = match limits {
        Some(toml::Value::Table(l)) if !l.is_empty() => {
            let mut section = toml::Table::new();
            section.insert("limits".into(), toml::Value::Table(l));
            format!("{manifest_text}\n{}", toml::to_string(&section)?)
        }
        _ => manifest_text,
    };
    // Grants the operator gave beyond the old request are not carried over.
    let dropped: Vec<String> = match (&old_manifest, &requests) {
        (Some(m), Some(r)) => r
            .compare(m)
            .into_iter()
            .filter(|ch| {
                ch.standing == wasmprov_host::policy::requests::Standing::WiderThanRequested
            })
            .map(|ch| format!("{} {}", ch.kind, ch.item))
            .collect(),
        _ => Vec::new(),
    };
    let manifest = Manifest::parse(&manifest_file, &manifest_text)
        .map_err(|e| anyhow::anyhow!("the manifest written for {what} does not parse: {e}"))?;
    let grants_moved = old_manifest
        .as_ref()
        .map(|old| old.grant_diff(&manifest))
        .unwrap_or_default();

    say!(json, "plugin:    {}", c(&cand.name));
    say!(json, "source:    {}", c(&cand.source));
    if let Some(claimed) = cand.claimed.as_deref().filter(|p| *p != cand.name) {
        say!(
            json,
            "           (the artifact calls itself {}; it is installed as {}, the name you gave or the repository's)",
            c(claimed),
            c(&cand.name)
        );
    }
    say!(
        json,
        "component: sha256:{digest} ({} bytes)",
        cand.bytes.len()
    );
    say!(json, "signer:    {}", c(&verdict.label()));
    if let Verdict::Signed { facts, .. } = &verdict {
        let mut signed = Vec::new();
        if let Some(v) = &facts.version {
            signed.push(format!("version {}", c(v)));
        }
        if let Some(t) = facts
            .timestamp
            .and_then(|t| chrono::DateTime::from_timestamp(t, 0))
        {
            signed.push(format!("signed {}", t.to_rfc3339()));
        }
        if !signed.is_empty() {
            say!(json, "           {}", signed.join(", "));
        }
    }
    let dangerous = print_requests(requests.as_ref(), &manifest, json);
    for d in &dropped {
        say!(
            json,
            "  dropped from the old manifest (not requested): {}",
            line(d)
        );
    }
    let update = locked.is_some() || installed_bytes.is_some();
    if same {
        say!(
            json,
            "the installed component is this one; only its manifest is rewritten"
        );
    } else if update {
        let was = locked.map_or_else(
            || {
                installed_bytes
                    .as_deref()
                    .map(wasmprov_host::lock::sha256_hex)
                    .unwrap_or_default()
            },
            |e| e.sha256.clone(),
        );
        if let Some(why) = &downgrade {
            say!(json, "DOWNGRADE of the installed {}: {why}", c(&cand.name));
        } else {
            say!(json, "UPDATE of the installed {}:", c(&cand.name));
        }
        say!(json, "  component sha256:{was} -> sha256:{digest}");
        if let Some(source) = locked.and_then(|e| e.source.as_deref()) {
            say!(json, "  was installed from {}", c(source));
        }
        let old_requests = installed_bytes
            .as_deref()
            .and_then(|b| declared(b, "the installed component").ok().flatten())
            .unwrap_or_default();
        let diff = old_requests.diff(&requests.clone().unwrap_or_default());
        if diff.is_empty() {
            say!(json, "  capabilities requested: unchanged");
        } else {
            say!(json, "  capabilities requested:");
            for d in diff {
                say!(json, "    {}", line(&d));
            }
        }
        // What the plugin can really reach: the grants in effect, filled
        // from templates, old manifest against new (a changed default
        // moves a grant while the declaration's text stays the same).
        if old_manifest.is_some() {
            if grants_moved.is_empty() {
                say!(json, "  grants in effect: unchanged");
            } else {
                say!(json, "  grants in effect (installed -> this one):");
                for d in &grants_moved {
                    say!(json, "    {}", line(d));
                }
            }
        }
    }
    if let Some(why) = &downgrade
        && !args.allow_downgrade
    {
        bail!(
            "refused: {what} is a downgrade of the installed {} ({why}); nothing was changed; re-run with --allow-downgrade to install it anyway",
            cand.name
        );
    }
    let missing: Vec<String> = requests
        .as_ref()
        .map(|r| {
            r.compare(&manifest)
                .into_iter()
                .filter(|ch| ch.standing == wasmprov_host::policy::requests::Standing::NotGranted)
                .map(|ch| format!("{} {}: {}", ch.kind, ch.item, ch.why))
                .collect()
        })
        .unwrap_or_default();
    confirm(
        &format!(
            "{} {} with these grants?",
            if downgrade.is_some() {
                "Downgrade"
            } else if update {
                "Update"
            } else {
                "Install"
            },
            cand.name
        ),
        args.yes,
    )?;

    // Every write goes through the directory's one writer (no symlink
    // followed, unpredictable temporary names, renamed into place), under
    // its writer lock (another install or a host recording a first use
    // waits), all or nothing: component, signature, manifest and the lock
    // entry, every target checked before the first byte is written.
    let _writer = dir.lock()?;
    let mut lock_now = wasmprov_host::lock::read(dir_path)?;
    lock_now.plugins.insert(
        cand.name.clone(),
        LockEntry {
            component: component_file.clone(),
            sha256: digest.clone(),
            source: Some(cand.source.clone()),
            signer: Some(verdict.label()),
        },
    );
    let lock_text = lock_now.text()?;
    let signature_bytes = match (&verdict, &cand.signature) {
        (Verdict::Signed { .. }, Some(sig)) => Some(sig.as_bytes()),
        _ => None,
    };
    dir.replace_all(&[
        (component_file.as_str(), Some(cand.bytes.as_slice())),
        (signature_file.as_str(), signature_bytes),
        (manifest_file.as_str(), Some(manifest_text.as_bytes())),
        (wasmprov_host::lock::LOCK_FILE, Some(lock_text.as_bytes())),
    ])?;
    if json {
        return crate::output::print_json(&serde_json::json!({
            "plugin": cand.name,
            "sha256": digest,
            "source": cand.source,
            "signer": verdict.label(),
            "updated": update,
            "downgrade": downgrade,
            "dangerous": dangerous,
            "grants_moved": grants_moved,
            "to_set": missing,
        }));
    }
    say!(
        json,
        "{} {} -> {}, {}",
        if update { "updated" } else { "installed" },
        c(&cand.name),
        dir_path.join(&component_file).display(),
        dir_path.join(&manifest_file).display()
    );
    for m in &missing {
        say!(json, "to set in {manifest_file}: {}", line(m));
    }
    Ok(())
}

/// What `wasmprov push` was asked.
#[derive(Debug)]
pub struct PushArgs {
    /// The built component.
    pub file: PathBuf,
    /// Where to publish it (`registry/repository:tag`).
    pub reference: String,
    /// The plugin's name (default: the repository's last segment).
    pub name: Option<String>,
    /// A minisign secret key to sign with.
    pub sign: Option<PathBuf>,
    /// A signature already made (`minisign -Sm FILE`).
    pub signature: Option<PathBuf>,
    /// Largest component accepted.
    pub max_bytes: u64,
    /// The deadline for the whole push.
    pub timeout: Duration,
}

/// The version a tag names, when it reads as one (`1.2.0`, `v2`): signed
/// into the trusted comment so a later install can tell a downgrade.
fn tag_version(reference: &str) -> Option<String> {
    let tag = oci::reference(reference).ok()?.tag()?.to_string();
    let core = tag.strip_prefix('v').unwrap_or(&tag);
    core.starts_with(|c: char| c.is_ascii_digit())
        .then_some(tag)
}

/// `wasmprov push FILE REF`.
///
/// # Errors
/// An unreadable file or key, or a registry that refuses.
pub async fn push(args: &PushArgs, json: bool) -> Result<()> {
    tokio::time::timeout(args.timeout, push_inner(args, json))
        .await
        .map_err(|_| {
            crate::exit::Temporary(format!(
                "{}: gave up after {} s (--timeout SECONDS sets it)",
                args.reference,
                args.timeout.as_secs()
            ))
        })?
}

async fn push_inner(args: &PushArgs, json: bool) -> Result<()> {
    let bytes = read_local(&args.file, args.max_bytes)?
        .with_context(|| format!("{}: no such file", args.file.display()))?;
    // The name a signature is made for is the one `install` uses by
    // default: the repository's last segment.
    let name = args
        .name
        .clone()
        .or_else(|| default_name(&args.reference))
        .context("give the plugin's name with --name")?;
    if let Some(problem) = plugin_name_problem(&name) {
        bail!("{problem} (give another with --name)");
    }
    declared(&bytes, &args.file.display().to_string())?;
    let digest = wasmprov_host::lock::sha256_hex(&bytes);
    let signature = match (&args.sign, &args.signature) {
        (Some(_), Some(_)) => bail!("give --sign or --signature, not both"),
        (Some(key), None) => Some(signature::sign(
            &bytes,
            key,
            &name,
            tag_version(&args.reference).as_deref(),
        )?),
        (None, Some(file)) => {
            let text = read_local(file, MAX_SIGNATURE_BYTES)?
                .with_context(|| format!("{}: no such file", file.display()))?;
            let text = String::from_utf8(text)
                .with_context(|| format!("{} is not text", file.display()))?;
            minisign::SignatureBox::from_string(&text)
                .with_context(|| format!("{} is not a minisign signature", file.display()))?;
            Some(text)
        }
        (None, None) => None,
    };
    let manifest_digest = oci::push(&bytes, &name, &args.reference, signature.as_deref()).await?;
    if json {
        return crate::output::print_json(&serde_json::json!({
            "reference": args.reference,
            "manifest_digest": manifest_digest,
            "sha256": digest,
            "signed": signature.is_some(),
        }));
    }
    println!(
        "pushed {} ({name}, component sha256:{digest}) as {manifest_digest}{}",
        c(&args.reference),
        if signature.is_some() {
            ", signed"
        } else {
            "; UNSIGNED: installs refuse it unless the operator lets it in (--sign KEY signs it)"
        }
    );
    if wasmprov_host::custom_section(&bytes, SECTION).is_none() {
        println!(
            "note: the component declares nothing it needs; add {REQUESTS_FILE} and `export_provider!(T, capabilities = \"{REQUESTS_FILE}\")`"
        );
    }
    Ok(())
}
