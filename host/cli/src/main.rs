//! `wasmprov`: load provisioner plugins under the sandbox and drive them.

mod args;
mod bundled;
mod conformance;
mod declare;
mod demo;
mod exit;
mod fleet;
mod help;
mod install;
mod load;
mod manual;
mod output;
mod scaffold;
mod serve;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context as _, Result, bail};
use clap::Parser;
use wasmprov_api::{ProvisionRequest, ProvisionerError};

use args::{AddressAction, Cli, Command, FakeCloud, LogFormat, TargetAction};
use exit::{CallFailed, Reported};
use load::{load, load_named, plugin, state_dir};

async fn run(cli: Cli) -> Result<()> {
    use wasmprov_api::CloudProvisioner;
    let json = cli.json;
    match &cli.command {
        Command::Plugins => {
            let host = load(&cli).await?;
            output::plugins(&host, json)?;
            if let Some(first) = host.errors().first() {
                bail!(
                    "{} plugin(s) failed to load; first: {first}",
                    host.errors().len()
                );
            }
        }
        Command::Inspect { plugin: name } => {
            let host = load_named(&cli, name).await?;
            output::inspect(plugin(&host, name)?.info(), host.owner_id(), json)?;
        }
        Command::Price {
            plugin: name,
            shape,
        } => {
            let host = load_named(&cli, name).await?;
            let p = plugin(&host, name)?;
            let shape = shape.shape(&[]);
            match p.try_price_hint(&shape).map_err(CallFailed)? {
                Some(hint) => output::price(&hint, json)?,
                None => bail!("plugin {name} cannot price this shape"),
            }
        }
        Command::Rank { shape } => {
            let host = load(&cli).await?;
            let ranking = wasmprov_fleet::rank_offerings(&host, &shape.shape(&[]), None).await;
            output::ranking(&ranking, json)?;
            if ranking.offers.is_empty() {
                bail!("no plugin can run this shape");
            }
        }
        Command::Provision {
            plugin: name,
            shape,
            request_id,
            labels,
            lease_secs,
            subnet,
            boot,
        } => {
            args::unique_labels(labels).map_err(exit::Usage)?;
            let boot = boot.boot()?;
            let host = load_named(&cli, name).await?;
            let p = plugin(&host, name)?;
            let request = ProvisionRequest {
                request_id: request_id.clone().unwrap_or_else(new_request_id),
                shape: shape.shape(labels),
                boot,
                subnet: subnet.clone(),
            };
            let lease = lease_secs.map(std::time::Duration::from_secs);
            let node = match &cli.state_dir {
                Some(state) => fleet::provision(host, state, name, request, lease).await?,
                None if lease.is_some() => {
                    return Err(exit::Usage(
                        "--lease-secs needs --state-dir: a lease lives in the journal".into(),
                    )
                    .into());
                }
                None => p.provision_request(&request).await.map_err(CallFailed)?,
            };
            output::nodes(std::slice::from_ref(&node), json, true)?;
        }
        Command::Describe { plugin: name } => {
            let host = load_named(&cli, name).await?;
            let nodes = plugin(&host, name)?.describe().await.map_err(CallFailed)?;
            output::nodes(&nodes, json, false)?;
        }
        Command::Get { plugin: name, id } => {
            let host = load_named(&cli, name).await?;
            match plugin(&host, name)?.get(id).await.map_err(CallFailed)? {
                Some(node) => output::nodes(std::slice::from_ref(&node), json, true)?,
                None => {
                    return Err(CallFailed(wasmprov_api::ProvisionerError::NotFound(format!(
                        "no node {id} of this owner on {name}"
                    )))
                    .into());
                }
            }
        }
        Command::Offerings { plugin: name } => {
            let host = load_named(&cli, name).await?;
            let list = plugin(&host, name)?.offerings().await.map_err(CallFailed)?;
            output::offerings(&list, json)?;
        }
        Command::Terminate { plugin: name, id } => {
            let host = load_named(&cli, name).await?;
            let p = plugin(&host, name)?;
            // The contract: a node already gone is `not_found`, and the
            // node is as the caller wants it, so that is success.
            let already_gone = match &cli.state_dir {
                Some(state) => fleet::terminate(host, state, name, id).await?,
                None => match p.terminate(id).await {
                    Ok(()) => false,
                    Err(ProvisionerError::NotFound(_)) => true,
                    Err(e) => return Err(CallFailed(e).into()),
                },
            };
            if json {
                println!(
                    "{}",
                    serde_json::json!({ "terminated": id, "already_gone": already_gone })
                );
            } else if already_gone {
                println!("{} was already gone; nothing to terminate", output::c(id));
            } else {
                println!("terminated {}", output::c(id));
            }
        }
        Command::Label {
            plugin: name,
            id,
            labels,
        } => {
            let labels = args::unique_labels(labels).map_err(exit::Usage)?;
            let host = load_named(&cli, name).await?;
            let node = plugin(&host, name)?
                .set_labels(id, &labels)
                .await
                .map_err(CallFailed)?;
            output::nodes(std::slice::from_ref(&node), json, true)?;
        }
        Command::Address { action } => match action {
            AddressAction::Assign {
                plugin: name,
                id,
                kind,
                address,
            } => {
                let host = load_named(&cli, name).await?;
                let request = wasmprov_api::AddressRequest {
                    kind: *kind,
                    address: address.clone(),
                };
                let a = plugin(&host, name)?
                    .assign_address(id, &request)
                    .await
                    .map_err(CallFailed)?;
                output::address(&a, json)?;
            }
            AddressAction::Release {
                plugin: name,
                id,
                address,
            } => {
                let host = load_named(&cli, name).await?;
                plugin(&host, name)?
                    .release_address(id, address)
                    .await
                    .map_err(CallFailed)?;
                output::done(
                    json,
                    serde_json::json!({ "released": address, "provider_id": id }),
                    &format!("released {} from {}", output::c(address), output::c(id)),
                );
            }
        },
        Command::Target { action } => match action {
            TargetAction::Register {
                plugin: name,
                group,
                id,
                port,
            }
            | TargetAction::Deregister {
                plugin: name,
                group,
                id,
                port,
            } => {
                let register = matches!(action, TargetAction::Register { .. });
                let host = load_named(&cli, name).await?;
                let p = plugin(&host, name)?;
                let target = wasmprov_api::Target {
                    group: group.clone(),
                    provider_id: id.clone(),
                    port: *port,
                    health: None,
                };
                if register {
                    p.register_target(&target).await.map_err(CallFailed)?;
                } else {
                    p.deregister_target(&target).await.map_err(CallFailed)?;
                }
                let verb = if register {
                    "registered"
                } else {
                    "deregistered"
                };
                output::done(
                    json,
                    serde_json::json!({ verb: id, "group": group, "port": port }),
                    &format!("{verb} {} in {}", output::c(id), output::c(group)),
                );
            }
            TargetAction::List {
                plugin: name,
                group,
            } => {
                let host = load_named(&cli, name).await?;
                let list = plugin(&host, name)?
                    .list_targets(group)
                    .await
                    .map_err(CallFailed)?;
                output::targets(&list, json)?;
            }
        },
        Command::Subnet {
            plugin: name,
            subnet,
        } => {
            let host = load_named(&cli, name).await?;
            let c = plugin(&host, name)?
                .subnet_capacity(subnet)
                .await
                .map_err(CallFailed)?;
            output::subnet(&c, json)?;
        }
        Command::Fake {
            cloud: FakeCloud::Hetzner { listen },
        } => {
            wasmprov_fake::run_standalone(*listen, wasmprov_fake::HetznerFakeOptions::default())
                .await?;
        }
        Command::Fake {
            cloud: FakeCloud::Refcloud { listen },
        } => {
            wasmprov_fake::refcloud::run_standalone(
                *listen,
                wasmprov_fake::RefCloudFakeOptions::default(),
            )
            .await?;
        }
        Command::New {
            name,
            path,
            sdk,
            crates_io,
            lang,
            template,
        } => {
            let built_from = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .ancestors()
                .nth(2)
                .map(std::path::Path::to_path_buf)
                .filter(|root| root.join("guest-sdk").join("Cargo.toml").is_file());
            let checkout = if *crates_io {
                None
            } else {
                sdk.clone().or(built_from)
            };
            let dest = path.clone().unwrap_or_else(|| PathBuf::from(name));
            let written = scaffold::scaffold(&scaffold::ScaffoldOptions {
                name: name.clone(),
                dest: dest.clone(),
                checkout: checkout.clone(),
                lang: *lang,
                template: *template,
            })?;
            if json {
                println!("{}", serde_json::json!({ "dir": dest, "files": written }));
            } else {
                println!("created plugin {name} in {}:", dest.display());
                for f in &written {
                    println!("  {}", f.display());
                }
                match lang {
                    scaffold::Lang::Rust => {
                        match &checkout {
                            Some(c) => println!(
                                "the SDK and fake kit (version {}) come from the checkout {}, through [patch.crates-io] in Cargo.toml: delete that section to build with the published crates",
                                scaffold::SDK_VERSION,
                                c.display()
                            ),
                            None => println!(
                                "the SDK and fake kit come from crates.io, version {}",
                                scaffold::SDK_VERSION
                            ),
                        }
                        println!(
                            "next: cd {} && cargo test   (builds the component and its fake, and runs `wasmprov test` on them: wasmprov must be on PATH, or set WASMPROV)",
                            dest.display()
                        );
                    }
                    scaffold::Lang::Python => println!(
                        "next: cd {} && pip install componentize-py==0.25.1 && python3 -m unittest   (builds the component and runs `wasmprov test` on it: wasmprov must be on PATH, or set WASMPROV)",
                        dest.display()
                    ),
                    scaffold::Lang::Js => println!(
                        "next: cd {} && npm install && npm test   (builds the component and runs `wasmprov test` on it: wasmprov must be on PATH, or set WASMPROV)",
                        dest.display()
                    ),
                }
            }
        }
        Command::Bundle {
            out,
            only,
            all,
            hetzner_endpoint,
        } => bundle(out, only, *all, hetzner_endpoint.as_deref(), json)?,
        Command::Renew {
            request_id,
            lease_secs,
        } => {
            fleet::renew(
                &state_dir(&cli),
                request_id,
                std::time::Duration::from_secs(*lease_secs),
                json,
            )
            .await?;
        }
        Command::Reconcile {
            terminate_leaks,
            no_resume,
            grace,
            adopt,
            confirm_orphans,
        } => {
            let host = load(&cli).await?;
            let policy = wasmprov_fleet::ReconcilePolicy {
                leaks: if *terminate_leaks {
                    wasmprov_fleet::LeakPolicy::Terminate
                } else {
                    wasmprov_fleet::LeakPolicy::Report
                },
                resume_pending: !*no_resume,
                grace: std::time::Duration::from_secs(*grace),
                adopt: *adopt,
                confirm_orphans: *confirm_orphans,
            };
            fleet::reconcile(host, &state_dir(&cli), policy, json).await?;
        }
        Command::History { limit } => {
            fleet::history(&state_dir(&cli), *limit, json)?;
        }
        Command::Scale {
            group,
            desired,
            group_file,
            shape,
            min,
            max,
            plugins,
            lease_secs,
            terminate_leaks,
            boot,
            fallback,
        } => {
            let boot = boot.boot()?;
            let group = match (group_file, group, shape) {
                (Some(file), _, _) => {
                    let text = std::fs::read_to_string(file)
                        .with_context(|| format!("reading --group-file {}", file.display()))?;
                    let mut group = wasmprov_fleet::alien::group_from_json(&text)
                        .map_err(|e| anyhow::anyhow!("--group-file {}: {e}", file.display()))?;
                    // The options given win over the file's.
                    if !plugins.is_empty() {
                        group.plugins.clone_from(plugins);
                    }
                    if let Some(secs) = lease_secs {
                        group.lease = Some(std::time::Duration::from_secs(*secs));
                    }
                    if !boot.is_empty() {
                        group.boot = boot;
                    }
                    group
                }
                (None, Some(name), Some(shape)) => wasmprov_fleet::CapacityGroup {
                    name: name.clone(),
                    shape: shape.shape(&[]),
                    min: *min,
                    max: *max,
                    plugins: plugins.clone(),
                    lease: lease_secs.map(std::time::Duration::from_secs),
                    boot,
                },
                (None, _, _) => anyhow::bail!(
                    "give the group's name and its shape (--cpu and --memory), or --group-file"
                ),
            };
            let host = load(&cli).await?;
            fleet::scale(
                host,
                &state_dir(&cli),
                &group,
                *desired,
                *terminate_leaks,
                (fallback.max_capacity_failures, fallback.price_ceiling),
                json,
            )
            .await?;
        }
        Command::Demo => demo::run(json).await?,
        Command::Serve(args) => serve::run(&cli, args).await?,
        Command::Test {
            plugin,
            component,
            manifest,
            fake,
            fake_url,
            fake_command,
            faults,
            record,
            replay,
            live,
        } => {
            conformance::run(conformance::TestArgs {
                plugin_dir: cli.plugin_dir.clone(),
                plugin: plugin.clone(),
                component: component.clone().zip(manifest.clone()),
                owner: cli.owner.clone(),
                fake: fake.clone(),
                fake_url: fake_url.clone(),
                fake_command: fake_command.clone(),
                faults: faults.clone(),
                record: record.clone(),
                replay: replay.clone(),
                live: *live,
                no_cache: cli.no_cache,
                json,
            })
            .await?;
        }
        Command::Install {
            reference,
            name,
            allow_downgrade,
            timeout,
            config,
            secrets,
            yes,
        } => {
            install::install(
                &cli.plugin_dir,
                &install::InstallArgs {
                    reference: reference.clone(),
                    name: name.clone(),
                    config: config.clone(),
                    secrets: secrets.clone(),
                    yes: *yes,
                    max_bytes: wasmprov_host::DEFAULT_MAX_COMPONENT_BYTES,
                    allow_downgrade: *allow_downgrade,
                    timeout: std::time::Duration::from_secs(*timeout),
                },
                json,
            )
            .await?;
        }
        Command::Declare {
            component,
            capabilities,
            out,
        } => {
            let changed = declare::declare(component, capabilities, out.as_deref())?;
            let target = out.as_ref().unwrap_or(component);
            if json {
                println!(
                    "{}",
                    serde_json::json!({ "component": target, "changed": changed })
                );
            } else if changed {
                println!(
                    "{} now declares {}",
                    target.display(),
                    capabilities.display()
                );
            } else {
                println!(
                    "{} already declares {}",
                    target.display(),
                    capabilities.display()
                );
            }
        }
        Command::Push {
            file,
            reference,
            name,
            sign,
            signature,
            timeout,
        } => {
            install::push(
                &install::PushArgs {
                    file: file.clone(),
                    reference: reference.clone(),
                    name: name.clone(),
                    sign: sign.clone(),
                    signature: signature.clone(),
                    max_bytes: wasmprov_host::DEFAULT_MAX_COMPONENT_BYTES,
                    timeout: std::time::Duration::from_secs(*timeout),
                },
                json,
            )
            .await?;
        }
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "wasmprov", &mut script);
            write_out(&script, "the completion script")?;
        }
        Command::Man { out } => {
            use clap::CommandFactory;
            match out {
                None => write_out(manual::page(Cli::command())?.as_bytes(), "the manual page")?,
                Some(dir) => {
                    let written = manual::write_pages(Cli::command(), dir)?;
                    if json {
                        println!("{}", serde_json::json!({ "dir": dir, "pages": written }));
                    } else {
                        println!("wrote {} manual pages to {}", written.len(), dir.display());
                    }
                }
            }
        }
        Command::Lock { check, .. } => {
            if *check {
                let drift = wasmprov_host::lock::check(&cli.plugin_dir)?;
                if json {
                    println!("{}", serde_json::json!({ "drift": drift }));
                } else {
                    for d in &drift {
                        println!("{d}");
                    }
                }
                if let Some(first) = drift.first() {
                    return Err(Reported(format!(
                        "{} difference(s) from {} or a manifest's pin; first: {first}; `wasmprov lock --update` accepts the components as they are",
                        drift.len(),
                        wasmprov_host::lock::LOCK_FILE
                    ))
                    .into());
                }
                if !json {
                    println!("every component matches {}", wasmprov_host::lock::LOCK_FILE);
                }
            } else {
                let updated = wasmprov_host::lock::update_all(&cli.plugin_dir)?;
                if json {
                    let mut value = serde_json::to_value(&updated.lock)?;
                    value["repinned"] = updated
                        .repinned
                        .iter()
                        .map(|(_, file)| file.as_str())
                        .collect();
                    println!("{value}");
                } else {
                    for (name, e) in &updated.lock.plugins {
                        println!("locked {name} {} {}", e.component, e.sha256);
                    }
                    for (name, file) in &updated.repinned {
                        println!("pinned {name} in {file} to the same digest");
                    }
                }
            }
        }
    }
    Ok(())
}

/// `wasmprov bundle`: writes the plugins asked for (hetzner when none
/// is named), then says what each needs before it can reach its cloud,
/// and which were left out.
fn bundle(
    out: &std::path::Path,
    only: &[String],
    all: bool,
    hetzner_endpoint: Option<&str>,
    json: bool,
) -> Result<()> {
    let names: Vec<&str> = if all {
        bundled::NAMES.to_vec()
    } else if only.is_empty() {
        bundled::DEFAULT.to_vec()
    } else {
        only.iter().map(String::as_str).collect()
    };
    if hetzner_endpoint.is_some() && !names.contains(&"hetzner") {
        return Err(exit::Usage(
            "--hetzner-endpoint configures the hetzner plugin, which this bundle does not write (add it to --only)"
                .into(),
        )
        .into());
    }
    let written = bundled::write(out, &names, hetzner_endpoint)?;
    let left_out: Vec<&str> = bundled::NAMES
        .into_iter()
        .filter(|n| !written.iter().any(|w| w == n))
        .collect();
    if json {
        let needs: serde_json::Map<String, serde_json::Value> = written
            .iter()
            .map(|name| {
                let list = bundled::needs(name)
                    .iter()
                    .map(|n| serde_json::json!({ "need": n.to_string(), "met": n.met() }))
                    .collect();
                (name.clone(), serde_json::Value::Array(list))
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({ "dir": out, "plugins": written, "needs": needs, "not_written": left_out })
        );
        return Ok(());
    }
    println!("wrote {} to {}", written.join(", "), out.display());
    for name in &written {
        let needs: Vec<String> = bundled::needs(name)
            .iter()
            .map(|n| match n {
                bundled::Need::Env(_) if n.met() => format!("{n} (set)"),
                bundled::Need::Env(_) => format!("{n} (unset)"),
                bundled::Need::Program(_) if n.met() => n.to_string(),
                bundled::Need::Program(_) => format!("{n} (missing)"),
                bundled::Need::Config(..) => format!("{n} of {name}.toml"),
            })
            .collect();
        println!("  {name} needs {}", needs.join(", "));
    }
    if !left_out.is_empty() {
        println!(
            "not written: {} (name them with --only, or --all)",
            left_out.join(", ")
        );
    }
    Ok(())
}

/// Writes `bytes` to stdout; a reader that stopped reading (`| head`) is
/// not an error.
fn write_out(bytes: &[u8], what: &str) -> Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other.with_context(|| format!("writing {what}")),
    }
}

fn new_request_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("cli-{nanos:x}-{}", std::process::id())
}

/// Output into a pipe whose reader has gone (`wasmprov describe hetzner |
/// head -1`) ends the command quietly with status 0, as `man` and
/// `completions` do. Rust's `println!` panics on a closed pipe (the runtime
/// ignores SIGPIPE, so that a peer that goes away is an error on a socket
/// or a program's stdin rather than the death of the process, which must
/// stay so); this hook turns exactly that panic into the exit, and leaves
/// every other panic to the default hook.
fn closed_pipe_ends_quietly() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or("");
        let printing = message.starts_with("failed printing to stdout")
            || message.starts_with("failed printing to stderr");
        if printing && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

#[tokio::main]
async fn main() -> ExitCode {
    closed_pipe_ends_quietly();
    // Usage errors exit 2 (clap's code, `exit::USAGE`), --help and
    // --version 0.
    let cli = Cli::parse();
    let log_format = cli.log_format;
    init_logging(&cli);
    let json = cli.json;
    let daemon = matches!(cli.command, Command::Serve(_));
    let code = match run(cli).await {
        Ok(()) => exit::SUCCESS,
        Err(e) => {
            let failure = exit::classify(&e);
            if json && !exit::already_reported(&e) {
                println!("{}", exit::json_error(&e, &failure));
            }
            // One line, whatever a plugin put in its message.
            let line = output::line(&format!("{e:#}").replace('\n', " "));
            match log_format {
                LogFormat::Text => eprintln!("error: {line}"),
                // A log collector reading stderr sees only JSON lines.
                LogFormat::Json => tracing::error!(
                    target: "wasmprov",
                    kind = failure.kind,
                    retryable = failure.retryable,
                    retry_after_ms = failure.retry_after_ms,
                    exit_code = failure.code,
                    "{line}"
                ),
            }
            failure.code
        }
    };
    if daemon {
        // Shutdown is never held up by work on blocking threads (a reload
        // pass stuck on a file, say): the runtime would wait for it on drop.
        use std::io::Write;
        let _ = std::io::stdout().flush();
        std::process::exit(i32::from(code));
    }
    ExitCode::from(code)
}

/// Log records go to stderr, as text or JSON (`--log-format`), filtered
/// by `WASMPROV_LOG`; colour only on a terminal and without `NO_COLOR`.
fn init_logging(cli: &Cli) {
    // A daemon reports what it does (reloads, reconciles) by default; a
    // one-shot command only its errors.
    let default = if matches!(cli.command, Command::Serve(_)) {
        "error,wasmprov=info,wasmprov_host=info"
    } else {
        "error"
    };
    let mut filter = std::env::var("WASMPROV_LOG").unwrap_or_else(|_| default.into());
    // The runtime's own debug output echoes raw guest I/O (secrets
    // included), so it stays at info unless the operator names those
    // targets explicitly.
    if !filter.contains("wasmtime") {
        filter.push_str(
            ",wasmtime=info,wasmtime_wasi=info,wasmtime_wasi_io=info,wasmtime_wasi_http=info",
        );
    }
    let builder = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => builder.with_ansi(output::colour(&std::io::stderr())).init(),
        LogFormat::Json => builder.json().with_ansi(false).init(),
    }
}
