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

use anyhow::{Context as _, Result, bail};
use wasmprov_host::lock::LockEntry;
use wasmprov_host::policy::manifest::valid_plugin_name;
use wasmprov_host::policy::requests::{FILE as REQUESTS_FILE, Requests, SECTION};
use wasmprov_host::policy::trust::{DirSettings, FILE as SETTINGS_FILE};
use wasmprov_host::policy::{Manifest, SecretSpec};

use crate::output::{c, line};

/// What `wasmprov install` was asked.
#[derive(Debug)]
pub struct InstallArgs {
    /// An OCI reference or a local `.wasm` file.
    pub reference: String,
    /// The plugin's name, when the artifact's should not be used.
    pub name: Option<String>,
    /// Config values for the manifest.
    pub config: Vec<(String, String)>,
    /// Secrets: key → environment variable.
    pub secrets: Vec<(String, String)>,
    /// Accept without asking.
    pub yes: bool,
    /// Largest component accepted.
    pub max_bytes: u64,
}

/// A component got from a registry or a file, not yet trusted.
struct Candidate {
    name: String,
    /// Where it came from, as recorded in the lock.
    source: String,
    bytes: Vec<u8>,
    signature: Option<String>,
}

/// Reads a local component: a regular file of at most `max` bytes.
fn read_local(path: &Path, max: u64) -> Result<Vec<u8>> {
    let meta = std::fs::metadata(path).with_context(|| format!("reading {}", path.display()))?;
    if !meta.is_file() {
        bail!("{} is not a regular file", path.display());
    }
    if meta.len() > max {
        bail!(
            "{} is {} bytes; at most {max} are accepted",
            path.display(),
            meta.len()
        );
    }
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() as u64 > max {
        bail!("{} grew past {max} bytes while being read", path.display());
    }
    Ok(bytes)
}

fn is_local(reference: &str) -> bool {
    let p = Path::new(reference);
    reference.ends_with(".wasm") || p.is_absolute() || reference.starts_with('.') || p.is_file()
}

async fn candidate(args: &InstallArgs) -> Result<Candidate> {
    let (default_name, source, bytes, signature) = if is_local(&args.reference) {
        let path = PathBuf::from(&args.reference);
        let bytes = read_local(&path, args.max_bytes)?;
        let sig_path = PathBuf::from(format!("{}.minisig", path.display()));
        let signature = match std::fs::read_to_string(&sig_path) {
            Ok(s) => Some(s),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => bail!("reading {}: {e}", sig_path.display()),
        };
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        let source = std::path::absolute(&path)
            .unwrap_or(path)
            .display()
            .to_string();
        (Some(stem), source, bytes, signature)
    } else {
        let fetched = oci::fetch(&args.reference, args.max_bytes).await?;
        let repo_tail = oci::reference(&args.reference)?
            .repository()
            .rsplit('/')
            .next()
            .map(str::to_string);
        let source = if args.reference.contains('@') {
            fetched.pinned.clone()
        } else {
            format!("{} ({})", args.reference, fetched.pinned)
        };
        (
            fetched.plugin.or(repo_tail),
            source,
            fetched.component,
            fetched.signature,
        )
    };
    let name = args
        .name
        .clone()
        .or(default_name)
        .context("cannot tell the plugin's name; give it with --name")?;
    if !valid_plugin_name(&name) {
        bail!(
            "{name:?} is not a valid plugin name; use lowercase letters, digits, `-` and `_` (give one with --name)"
        );
    }
    Ok(Candidate {
        name,
        source,
        bytes,
        signature,
    })
}

fn declared(bytes: &[u8], what: &str) -> Result<Option<Requests>> {
    wasmprov_host::custom_section(bytes, SECTION)
        .map(|text| Requests::parse(&text))
        .transpose()
        .map_err(|e| anyhow::anyhow!("refused: {what} declares its capabilities malformed: {e}"))
}

fn read_settings(dir: &Path) -> Result<DirSettings> {
    match std::fs::read_to_string(dir.join(SETTINGS_FILE)) {
        Ok(text) => DirSettings::parse(&text).map_err(anyhow::Error::msg),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(DirSettings::default()),
        Err(e) => bail!("reading {}: {e}", dir.join(SETTINGS_FILE).display()),
    }
}

/// Writes `bytes` to `dir/name` through a temporary file renamed over it.
fn replace_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let tmp = dir.join(format!(".{name}.installing"));
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, dir.join(name))
        .with_context(|| format!("replacing {}", dir.join(name).display()))
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

fn print_requests(requests: Option<&Requests>, manifest: &Manifest) {
    use wasmprov_host::policy::requests::Standing;
    let Some(r) = requests else {
        println!("requests:  nothing declared; the manifest grants nothing (add grants by hand)");
        return;
    };
    println!("requests (as the written manifest answers them):");
    let checks = r.compare(manifest);
    let mut optional = Vec::new();
    for ch in &checks {
        if ch.standing == Standing::Unset {
            optional.push(c(&ch.item));
            continue;
        }
        println!(
            "  {:<6}  {}  [{}]  {}",
            ch.kind,
            c(&ch.item),
            ch.standing.label(),
            c(&ch.why)
        );
    }
    if !optional.is_empty() {
        println!("  optional, not set: {}", optional.join(", "));
    }
}

/// `wasmprov install REF`.
///
/// # Errors
/// Every refusal, with what to do about it; nothing in the directory
/// changes unless the whole install succeeds.
pub async fn install(dir: &Path, args: &InstallArgs, json: bool) -> Result<()> {
    let cand = candidate(args).await?;
    let what = cand.source.clone();
    let digest = wasmprov_host::lock::sha256_hex(&cand.bytes);
    let settings = read_settings(dir)?;
    let signer = signature::check(
        &cand.bytes,
        cand.signature.as_deref(),
        &settings,
        dir,
        &cand.name,
        &what,
    )?;
    let requests = declared(&cand.bytes, &what)?;

    let component_file = format!("{}.wasm", cand.name);
    let manifest_file = format!("{}.toml", cand.name);
    let lock = wasmprov_host::lock::read(dir)?;
    let locked = lock.plugins.get(&cand.name);
    let installed_bytes = std::fs::read(dir.join(&component_file)).ok();
    let same = matches!((locked, &installed_bytes), (Some(entry), Some(old))
        if entry.sha256 == digest && wasmprov_host::lock::sha256_hex(old) == digest);
    if same && args.config.is_empty() && args.secrets.is_empty() {
        println!(
            "{} is already installed at sha256:{digest}; nothing to do",
            c(&cand.name)
        );
        return Ok(());
    }

    // What the operator already set is kept for the keys still declared.
    let old_text = std::fs::read_to_string(dir.join(&manifest_file)).ok();
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
        secrets.extend(
            m.secrets
                .iter()
                .filter(|(k, _)| r.secrets.contains_key(*k))
                .map(|(k, SecretSpec { env })| (k.clone(), env.clone())),
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

    println!("plugin:    {}", c(&cand.name));
    println!("source:    {}", c(&cand.source));
    println!("component: sha256:{digest} ({} bytes)", cand.bytes.len());
    println!("signer:    {}", c(&signer.label()));
    print_requests(requests.as_ref(), &manifest);
    for d in &dropped {
        println!(
            "  dropped from the old manifest (not requested): {}",
            line(d)
        );
    }
    let update = locked.is_some() || installed_bytes.is_some();
    if same {
        println!("the installed component is this one; only its manifest is rewritten");
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
        println!("UPDATE of the installed {}:", c(&cand.name));
        println!("  component sha256:{was} -> sha256:{digest}");
        if let Some(source) = locked.and_then(|e| e.source.as_deref()) {
            println!("  was installed from {}", c(source));
        }
        let old_requests = installed_bytes
            .as_deref()
            .and_then(|b| declared(b, "the installed component").ok().flatten())
            .unwrap_or_default();
        let diff = old_requests.diff(&requests.clone().unwrap_or_default());
        if diff.is_empty() {
            println!("  capabilities requested: unchanged");
        } else {
            println!("  capabilities requested:");
            for d in diff {
                println!("    {}", line(&d));
            }
        }
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
            if update { "Update" } else { "Install" },
            cand.name
        ),
        args.yes,
    )?;

    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    replace_file(dir, &component_file, &cand.bytes)?;
    replace_file(dir, &manifest_file, manifest_text.as_bytes())?;
    wasmprov_host::lock::record_entry(
        dir,
        &cand.name,
        LockEntry {
            component: component_file.clone(),
            sha256: digest.clone(),
            source: Some(cand.source.clone()),
            signer: Some(signer.label()),
        },
    )?;
    if json {
        return crate::output::print_json(&serde_json::json!({
            "plugin": cand.name,
            "sha256": digest,
            "source": cand.source,
            "signer": signer.label(),
            "updated": update,
            "to_set": missing,
        }));
    }
    println!(
        "{} {} -> {}, {}",
        if update { "updated" } else { "installed" },
        c(&cand.name),
        dir.join(&component_file).display(),
        dir.join(&manifest_file).display()
    );
    for m in &missing {
        println!("to set in {manifest_file}: {}", line(m));
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
    /// The plugin's name (default: the file's stem).
    pub name: Option<String>,
    /// A minisign secret key to sign with.
    pub sign: Option<PathBuf>,
    /// A signature already made (`minisign -Sm FILE`).
    pub signature: Option<PathBuf>,
    /// Largest component accepted.
    pub max_bytes: u64,
}

/// `wasmprov push FILE REF`.
///
/// # Errors
/// An unreadable file or key, or a registry that refuses.
pub async fn push(args: &PushArgs, json: bool) -> Result<()> {
    let bytes = read_local(&args.file, args.max_bytes)?;
    let name = args
        .name
        .clone()
        .or_else(|| {
            args.file
                .file_stem()
                .and_then(|s| s.to_str())
                .map(str::to_string)
        })
        .context("give the plugin's name with --name")?;
    if !valid_plugin_name(&name) {
        bail!("{name:?} is not a valid plugin name (give one with --name)");
    }
    declared(&bytes, &args.file.display().to_string())?;
    let digest = wasmprov_host::lock::sha256_hex(&bytes);
    let signature = match (&args.sign, &args.signature) {
        (Some(_), Some(_)) => bail!("give --sign or --signature, not both"),
        (Some(key), None) => Some(signature::sign(
            &bytes,
            key,
            &format!("wasmprov plugin {name} sha256:{digest}"),
        )?),
        (None, Some(file)) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
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
