//! Section 8: what a plugin costs by the language it is written in. The same
//! plugin — the reference cloud's provisioner — in Rust (the guest SDK; the
//! `wasmprov new` template's behaviour), Python (componentize-py) and
//! JavaScript (ComponentizeJS), each measured the same way in this run, with
//! ratios against the Rust plugin.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use tokio::runtime::Runtime;
use wasmprov_api::{CloudProvisioner, ProvisionRequest};
use wasmprov_fake::refcloud::{RefCloudFake, RefCloudFakeOptions};
use wasmprov_host::{Host, HostBuilder, LockMode};

use crate::common::{OWNER, manifest, shape};
use crate::config::Config;
use crate::report::{Section, Table};
use crate::stats::{bytes, dur, median, ratio, summarize};

/// One plugin measured.
struct Plugin {
    lang: &'static str,
    name: &'static str,
    wasm: PathBuf,
}

/// Builds the three plugins (the Rust one comes from the build script).
fn plugins(root: &Path, out: &Path) -> Result<Vec<Plugin>> {
    let wit = root.join("wit");
    let python = out.join("refcloud-py.wasm");
    let js = out.join("refcloud-js.wasm");
    println!("  building the Python plugin (componentize-py) …");
    // The reference plugin is written on the Python SDK.
    wasmprov_guest_build::build_python_with(
        &wit,
        &[&root.join("guest-sdk/python")],
        &root.join("plugins/python/refcloud"),
        &python,
    )
    .map_err(anyhow::Error::msg)?;
    println!("  building the JavaScript plugin (ComponentizeJS) …");
    wasmprov_guest_build::build_js(&wit, &root.join("plugins/js/refcloud"), &js)
        .map_err(anyhow::Error::msg)?;
    Ok(vec![
        Plugin {
            lang: "Rust",
            name: "refcloud-rs",
            wasm: PathBuf::from(crate::common::guests::REFCLOUD_WASM),
        },
        Plugin {
            lang: "Python",
            name: "refcloud-py",
            wasm: python,
        },
        Plugin {
            lang: "JavaScript",
            name: "refcloud-js",
            wasm: js,
        },
    ])
}

/// A host over a directory holding `p` alone, with `memory_mib` as its limit.
async fn host(
    p: &Plugin,
    endpoint: &str,
    token: &str,
    cache: &Path,
    memory_mib: Option<u64>,
    reuse: u32,
) -> Result<(tempfile::TempDir, Host)> {
    let dir = tempfile::tempdir()?;
    std::fs::copy(&p.wasm, dir.path().join(format!("{}.wasm", p.name)))?;
    let mut m = manifest(p.name, &format!("{}.wasm", p.name), Some(endpoint), 16);
    if let Some(mib) = memory_mib {
        m.push_str(&format!("memory_mib = {mib}\n"));
    }
    std::fs::write(dir.path().join(format!("{}.toml", p.name)), m)?;
    let token = token.to_string();
    let host = HostBuilder::new(dir.path())
        .owner_id(OWNER)
        .cache_dir(Some(cache.to_path_buf()))
        .work_dir(std::env::temp_dir().join("wasmprov-bench-work"))
        .secret_source(move |name| (name == "HCLOUD_TOKEN").then(|| token.clone()))
        .lock_mode(LockMode::Off)
        .price_hint_reuse(reuse)
        .build()
        .await?;
    if let Some(e) = host.errors().first() {
        bail!("{} did not load: {e}", p.name);
    }
    Ok((dir, host))
}

struct Row {
    size: f64,
    cold: f64,
    warm: f64,
    price_p50: f64,
    reused_p50: f64,
    provision_p50: f64,
    min_memory_mib: Option<u64>,
}

async fn measure(cfg: &Config, p: &Plugin, fake: &RefCloudFake) -> Result<Row> {
    let size = std::fs::metadata(&p.wasm)?.len() as f64;
    let (cold_reps, warm_reps, calls, provisions) = if cfg.quick {
        (1, 3, 50, 10)
    } else {
        (3, 10, 500, 100)
    };
    let url = fake.url();
    let token = fake.token();

    println!("  {}: cold and warm loads …", p.lang);
    let mut colds = Vec::new();
    for _ in 0..cold_reps {
        let cache = tempfile::tempdir()?;
        let t = Instant::now();
        let (_d, h) = host(p, &url, token, cache.path(), None, 1).await?;
        colds.push(t.elapsed().as_nanos() as f64);
        drop(h);
    }
    let warm_cache = tempfile::tempdir()?;
    drop(host(p, &url, token, warm_cache.path(), None, 1).await?);
    let mut warms = Vec::new();
    for _ in 0..warm_reps {
        let t = Instant::now();
        let (_d, h) = host(p, &url, token, warm_cache.path(), None, 1).await?;
        warms.push(t.elapsed().as_nanos() as f64);
        drop(h);
    }

    let (_dir, h) = host(p, &url, token, warm_cache.path(), None, 1).await?;
    let plugin = h.wasm_plugin(p.name).context("loaded")?;
    println!("  {}: {calls} price hints, a fresh instance each …", p.lang);
    let s = shape();
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        plugin.try_price_hint(&s)?.context("no price")?;
        samples.push(t.elapsed().as_nanos() as f64);
    }
    let price_p50 = summarize(&mut samples).p50;
    drop(h);

    println!(
        "  {}: {calls} price hints, one instance answering up to 100 …",
        p.lang
    );
    let (_reusing_dir, reusing) = host(p, &url, token, warm_cache.path(), None, 100).await?;
    let reused_plugin = reusing.wasm_plugin(p.name).context("loaded")?;
    let mut samples = Vec::with_capacity(calls);
    for _ in 0..calls {
        let t = Instant::now();
        reused_plugin.try_price_hint(&s)?.context("no price")?;
        samples.push(t.elapsed().as_nanos() as f64);
    }
    let reused_p50 = summarize(&mut samples).p50;
    drop(reusing);
    let (_dir, h) = host(p, &url, token, warm_cache.path(), None, 1).await?;

    println!("  {}: {provisions} provisions over loopback …", p.lang);
    let provisioner: std::sync::Arc<dyn CloudProvisioner> = h.plugin(p.name).context("loaded")?;
    let mut samples = Vec::with_capacity(provisions);
    for i in 0..provisions {
        let request = ProvisionRequest {
            request_id: format!("bench-{}-{i}", p.lang.to_ascii_lowercase()),
            shape: s.clone(),
            boot: Default::default(),
            subnet: None,
        };
        let t = Instant::now();
        let node = provisioner.provision_request(&request).await?;
        samples.push(t.elapsed().as_nanos() as f64);
        provisioner.terminate(&node.provider_id).await?;
    }
    let provision_p50 = summarize(&mut samples).p50;
    drop(h);

    println!("  {}: smallest memory limit that provisions …", p.lang);
    let mut min_memory_mib = None;
    for mib in [4, 8, 12, 16, 24, 32, 48, 64, 96, 128] {
        let Ok((_d, h)) = host(p, &url, token, warm_cache.path(), Some(mib), 1).await else {
            continue;
        };
        let Some(provisioner) = h.plugin(p.name) else {
            continue;
        };
        let request = ProvisionRequest {
            request_id: format!("bench-memory-{}-{mib}", p.lang.to_ascii_lowercase()),
            shape: s.clone(),
            boot: Default::default(),
            subnet: None,
        };
        if let Ok(node) = provisioner.provision_request(&request).await {
            provisioner.terminate(&node.provider_id).await?;
            min_memory_mib = Some(mib);
            break;
        }
    }
    Ok(Row {
        size,
        cold: median(&colds),
        warm: median(&warms),
        price_p50,
        reused_p50,
        provision_p50,
        min_memory_mib,
    })
}

pub fn run(cfg: &Config, rt: &Runtime, root: &Path) -> Result<Section> {
    let mut sec = Section::new(
        "8. Plugins by language: Rust, Python, JavaScript",
        "The reference cloud's provisioner written three times: in Rust on the guest SDK (the `wasmprov new` \
         template's behaviour; `tests/guests/buggy-refcloud` with no bug), in Python (`plugins/python/refcloud`, \
         componentize-py 0.25.1) and in JavaScript (`plugins/js/refcloud`, ComponentizeJS 0.23.0), run by the \
         same host under the same limits. Cold load: `HostBuilder::build` with an empty compile cache (read, \
         hash, compile, pre-link, probe call); warm: the cache holds the component. `price_hint`: a fresh \
         instance per call, as the host runs every call by default. Provision: one node on the reference \
         cloud's fake over loopback HTTP (the plugin lists the owner's nodes, then creates one). Memory: the \
         smallest `limits.memory_mib` under which the plugin loads and provisions (the default is 64).",
    );
    let out = tempfile::tempdir()?;
    let plugins = plugins(root, out.path())?;
    let fake = rt.block_on(RefCloudFake::start(
        "127.0.0.1:0".parse()?,
        RefCloudFakeOptions::default(),
    ))?;
    let mut rows = Vec::new();
    for p in &plugins {
        rows.push(rt.block_on(measure(cfg, p, &fake))?);
    }
    let base = &rows[0];
    let mut t = Table::new(&[
        "plugin",
        "component",
        "cold load",
        "warm load",
        "`price_hint`, fresh instance (p50)",
        "`price_hint`, reused instance (p50)",
        "provision round trip (p50)",
        "smallest memory limit",
    ]);
    for (p, r) in plugins.iter().zip(&rows) {
        t.row(vec![
            p.lang.to_string(),
            format!("{} ({})", bytes(r.size), ratio(r.size, base.size)),
            format!("{} ({})", dur(r.cold), ratio(r.cold, base.cold)),
            format!("{} ({})", dur(r.warm), ratio(r.warm, base.warm)),
            format!(
                "{} ({})",
                dur(r.price_p50),
                ratio(r.price_p50, base.price_p50)
            ),
            format!(
                "{} ({})",
                dur(r.reused_p50),
                ratio(r.reused_p50, base.reused_p50)
            ),
            format!(
                "{} ({})",
                dur(r.provision_p50),
                ratio(r.provision_p50, base.provision_p50)
            ),
            r.min_memory_mib
                .map_or_else(|| "over 128 MiB".into(), |m| format!("{m} MiB")),
        ]);
    }
    sec.table("Ratios are against the Rust plugin in this run.", t);
    let py = &rows[1];
    sec.note(format!(
        "Both interpreted plugins are already pre-initialized snapshots: componentize-py and ComponentizeJS run \
         the interpreter and the module's top level at build time (Wizer) and ship the resulting memory, so a \
         fresh instance starts from an initialized interpreter. What remains per call is instantiating a \
         {} component: the Python plugin's fresh `price_hint` is {} against {} when one instance answers \
         up to 100 (`--price-hint-reuse 100`, the host's reuse path for I/O-free calls). Calls that can do I/O \
         (provision, describe, terminate, get, offerings) always get a fresh instance; there the network \
         dominates and the interpreted plugins add {} per provision.",
        bytes(py.size),
        dur(py.price_p50),
        dur(py.reused_p50),
        dur(py.provision_p50 - base.provision_p50),
    ));
    Ok(sec)
}
