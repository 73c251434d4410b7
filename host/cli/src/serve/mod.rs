//! `wasmprov serve`: the provisioner contract over gRPC, and Prometheus
//! metrics over HTTP, for callers that are not Rust programs; a daemon
//! that keeps an intent journal and settles it against the clouds.
//!
//! # API
//! The service `wasmprov.v1.Provisioner` (`proto/wasmprov.proto`, served
//! over HTTP/2 without TLS) mirrors the contract and the journaled
//! operations of `wasmprov_host::Fleet`:
//! - `ListPlugins`, `PriceHint(plugin, shape)`, `Rank(shape)`,
//!   `Describe(plugin)` and `Reload()` go straight to the plugins;
//! - `Provision(plugin, request_id, shape, lease_seconds?, group?)`
//!   journals the intent before the plugin is asked (idempotent per request
//!   id, which is required; the same id with another plugin or shape is
//!   `ALREADY_EXISTS`, kind `conflict`); a lease makes reconcile terminate
//!   the node once it has run that long, and a group counts it as a member
//!   of that capacity group (and labels it `wasmprov-group`);
//! - `Terminate(plugin, provider_id)` journals the termination, then forgets
//!   the intent; a node already gone is success, so a retry is safe;
//! - `Reconcile(terminate_leaks, no_resume)` compares the journal with every
//!   plugin's nodes and settles the difference (confirms or resumes
//!   interrupted provisions, finishes terminations, ends expired leases,
//!   lists, or terminates, leaked nodes: owned, but wanted by no intent);
//! - `Scale(group, desired)` brings a capacity group (name, shape, min, max,
//!   plugins, lease) to `desired` within min..max on the cheapest plugins
//!   with room; an invalid group is `INVALID_ARGUMENT`; plugin failures are
//!   in the answer (`errors`, `converged`), not a failed call;
//! - `ListIntents(group?)` lists the journal: the nodes this server wants,
//!   pending, active or terminating;
//! - `History(limit)` lists what reconcile and the lease sweep terminated
//!   or forgot, when and why.
//!
//! The plugin directory is also watched, so plugins hot-reload without a
//! `Reload` call (`--no-watch` turns that off); SIGHUP reloads it as
//! `Reload` does, and logs what changed.
//!
//! gRPC server reflection (`grpc.reflection.v1`, and `v1alpha` that older
//! clients ask) describes every service from the compiled `.proto`, so
//! grpcurl-style tools list and call them without it. Like health, it
//! needs no token: it tells only the schema, which is public.
//!
//! # Journal and reconcile
//! The journal is `<state dir>/journal.redb` (`--state-dir`, else
//! `$WASMPROV_STATE_DIR`, else `./wasmprov-state`). One process at a time
//! may hold it: a second `serve` (or `scale`, `reconcile`, ...) on the same
//! state directory refuses to start with a one-line error saying it is in
//! use by another process. Keep one journal per owner id: a second
//! journal's nodes are orphans to this one, never terminated, and finding
//! them holds every destructive action until the operator adopts or
//! confirms them (`docs/JOURNAL.md`).
//!
//! The server listens at once. Behind the listeners it runs one reconcile,
//! so a daemon restarted after a crash settles what it left half done, and
//! reports readiness when that is done: the standard gRPC health service
//! (`grpc.health.v1.Health`, for the whole server `""` and for
//! `wasmprov.v1.Provisioner`) says `NOT_SERVING` until then and `SERVING`
//! after, and `GET /ready` on the metrics listener answers 503 until then
//! and 200 after. Calls are answered meanwhile: the fleet runs the calls of
//! one request id one after the other, a reconcile's pass over it included,
//! so a provision never races a reconcile of the same id. Then a reconcile
//! runs every `--reconcile-every` seconds (default 60, counted from the end
//! of the last; 0 turns it off), and a lease sweep every `--lease-every`
//! seconds (default 10; 0 turns it off), which terminates the journaled
//! nodes whose lease ran out without listing any cloud. A node missing from
//! its cloud's list is believed gone only when a second list `--grace`
//! seconds (default 60) later misses it too and the plugin's `get` says it
//! does not exist; a leak (a node this journal provably made that no
//! intent wants) only when two lists that far apart show it. Leaks are
//! listed only, unless `--terminate-leaks` is given (which the `Reconcile`
//! RPC decides for itself with `terminate_leaks`). Every termination
//! (written before the cloud is asked), lease renewal, orphan, hold,
//! adoption, vanished node and abandoned provision is kept in the
//! journal's history (`History` RPC, `wasmprov history`, and
//! `wasmprov_fleet_events_total` on /metrics). The daemon's health is its
//! journal's: a failed journal write turns it NOT_SERVING (health and
//! `/ready`) until the journal can be written again. The outcome is logged with
//! `tracing` (target `wasmprov::serve`; `serve` logs at info by default,
//! `WASMPROV_LOG` overrides; `--log-format json` makes every line on
//! stderr a JSON object, the daemon's own messages included): the startup
//! reconcile always, a periodic one or a sweep when it found something to
//! settle; a report with errors at `warn`.
//!
//! # Errors
//! A failed call has a gRPC code chosen for what a generic client should do
//! (see [`status_of`]), and always names the contract's error variant in
//! the metadata `wasmprov-error-kind` (`not_found`, `rate_limited`,
//! `capacity`, `quota`, `auth`, `transport`, `unsupported`,
//! `invalid_config`, `other`, `plugin`; and `unknown_plugin` for a plugin
//! that is not loaded, `conflict` for a request id journaled for another
//! plugin or shape, `journal` when the journal could not be read or
//! written), so a client in any language branches on the variant rather
//! than on a message (see [`fleet_status`]). `rate_limited` adds
//! `wasmprov-retry-after-ms` when the cloud said how long to wait;
//! `capacity` adds `wasmprov-capacity-scope`; `plugin` adds
//! `wasmprov-plugin-fault`.
//!
//! # Authentication
//! Every RPC needs the metadata `authorization: Bearer <token>`, checked in
//! constant time (the `subtle` crate) before the call reaches a plugin;
//! anything else is `UNAUTHENTICATED`. The token is read from
//! `--token-file`, else from `$WASMPROV_SERVE_TOKEN`; with neither, a random
//! 32-byte token is generated and written, hex, to `--token-out` (default
//! `./wasmprov-serve.token`, mode 0600) once the journal is held (so a
//! second server refused for the journal never replaces the first's
//! token). Its path is printed, never the token itself.
//!
//! # Binding
//! gRPC listens on `--listen` (default `127.0.0.1:50151`). An address that
//! is not loopback is refused unless `--allow-remote` is given: the bearer
//! token travels in clear text, so a remote listener belongs behind a
//! TLS-terminating proxy. The first line on stdout is machine-readable:
//! `listening grpc=ADDR metrics=ADDR` (`metrics=off` with `--no-metrics`),
//! with the ports really bound (so `:0` works); it comes as soon as both
//! listen (readiness: see above).
//!
//! # Metrics
//! `GET /metrics` on `--metrics-listen` (default `127.0.0.1:9151`, loopback
//! unless `--allow-remote`; no authentication, as Prometheus scrapes it)
//! answers the host's per-plugin metrics in the OpenMetrics text format
//! (see `wasmprov_host::metrics`). `--no-metrics` turns it off.
//!
//! SIGINT or SIGTERM turns health NOT_SERVING, stops both listeners and
//! the background reconciles, lets the calls in flight finish for up to
//! `--drain-timeout` seconds (default: the longest call deadline of the
//! loaded plugins plus 5), marks a provision still running then as cut
//! short (the next start confirms or forgets it, never makes it), and exits
//! 0. A signal during the startup reconcile stops it there (the journal is
//! made for being stopped at any point).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tonic::{Code, Request, Response, Status};
use wasmprov_api::CloudProvisioner;
use wasmprov_fleet::{
    CapacityGroup, Fleet, FleetError, LeakPolicy, ProvisionOptions, ReconcilePolicy,
    ReconcileReport,
};
use wasmprov_host::Host;

/// The generated messages, server and client of `proto/wasmprov.proto`.
#[allow(
    clippy::all,
    clippy::pedantic,
    missing_debug_implementations,
    reason = "generated code"
)]
pub(crate) mod pb {
    tonic::include_proto!("wasmprov.v1");

    /// `proto/wasmprov.proto` compiled, for server reflection.
    pub(crate) const FILE_DESCRIPTOR_SET: &[u8] =
        tonic::include_file_descriptor_set!("wasmprov_descriptor");
}

mod autoscaler;
mod convert;
mod incoming;
mod metrics;

use crate::args::{Cli, ServeArgs};
use convert::*;
use pb::provisioner_server::{Provisioner, ProvisionerServer};

/// The environment variable a token can come from.
const TOKEN_ENV: &str = "WASMPROV_SERVE_TOKEN";
/// The least time calls in flight may run on after a shutdown signal.
const GRACE: Duration = Duration::from_secs(10);

/// Connections the main gRPC listener keeps open at once; more are closed at
/// accept until some end, so that stalled ones cannot use up the
/// descriptors the plugins' HTTP and the journal need.
const MAX_CONNECTIONS: usize = 512;
/// Metadata naming the contract's error variant of a failed call.
const KIND_KEY: &str = "wasmprov-error-kind";
/// The `tracing` target of what the server logs.
const LOG_TARGET: &str = "wasmprov::serve";
/// The gRPC service's full name, as the health service reports it.
const SERVICE_NAME: &str = "wasmprov.v1.Provisioner";

/// Runs `wasmprov serve` until SIGINT or SIGTERM.
pub(crate) async fn run(cli: &Cli, args: &ServeArgs) -> Result<()> {
    check_local(args.listen, args.allow_remote, "--listen")?;
    if !args.no_metrics {
        check_local(args.metrics_listen, args.allow_remote, "--metrics-listen")?;
    }
    let configured = configured_token(args)?;

    let host = Arc::new(
        crate::load::load_waiting(cli, Some(Duration::from_secs(args.compile_wait)), None).await?,
    );
    // The journal is this process's alone from here on; a second server on
    // the same state directory stops here, before it writes anything.
    let journal = crate::load::state_dir(cli).join(crate::fleet::JOURNAL_FILE);
    let fleet = Arc::new(
        Fleet::open(host.clone(), &journal)?
            .unavailable_for(Duration::from_secs(args.unavailable_for))
            .max_group_size(args.max_group_size)
            .catalogue_cache(
                Duration::from_secs(args.catalogue_ttl),
                Duration::from_secs(args.catalogue_deadline),
            )
            .fallback_limits(
                args.fallback.max_capacity_failures,
                args.fallback.price_ceiling,
            )?,
    );
    for err in host.errors() {
        tracing::warn!(target: LOG_TARGET, "not loaded: {err}");
    }
    let token = match configured {
        Some(token) => token,
        None => generate_token(args)?,
    };
    let _watcher = if args.no_watch {
        None
    } else {
        match host.watch(wasmprov_host::DEFAULT_DEBOUNCE) {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::warn!(
                    target: LOG_TARGET,
                    "plugins will not hot-reload (send SIGHUP or use the Reload RPC): {e:#}"
                );
                None
            }
        }
    };
    // A plugin still compiling when a SIGHUP's reload stops waiting is
    // loaded by the watcher once compiled; without one, the reload waits
    // for the compile (which its budget bounds).
    let hangup_wait = if _watcher.is_some() {
        Duration::from_secs(args.compile_wait)
    } else {
        wasmprov_host::DEFAULT_COMPILE_BUDGET + Duration::from_secs(5)
    };

    let grpc_listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding the gRPC listener to {}", args.listen))?;
    let grpc_addr = grpc_listener.local_addr()?;
    let metrics_listener = if args.no_metrics {
        None
    } else {
        let l = tokio::net::TcpListener::bind(args.metrics_listen)
            .await
            .with_context(|| format!("binding the metrics listener to {}", args.metrics_listen))?;
        Some(l)
    };
    // Not ready until the startup reconcile settled what an earlier run left
    // half done; calls are answered meanwhile (the fleet keeps each request
    // id's calls in order, a reconcile included).
    let (ready_tx, ready_rx) = tokio::sync::watch::channel(Some(STARTING));
    let autoscaler = autoscaler::bind(
        &args.autoscaler,
        args.allow_remote,
        &fleet,
        host.plugin_dir(),
        ready_rx.clone(),
    )
    .await?;
    let autoscaler_addr = match &autoscaler {
        Some(a) => format!(" autoscaler={}", a.local_addr()?),
        None => String::new(),
    };
    let metrics_addr = match &metrics_listener {
        Some(l) => l.local_addr()?.to_string(),
        None => "off".to_string(),
    };

    let mut signals = Signals::new()?;
    // Handled from here on (SIGHUP's default would end the process).
    let hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("handling SIGHUP")?;
    let policy = ReconcilePolicy {
        leaks: if args.terminate_leaks {
            LeakPolicy::Terminate
        } else {
            LeakPolicy::Report
        },
        resume_pending: true,
        grace: Duration::from_secs(args.grace),
        ..ReconcilePolicy::default()
    };
    // How long calls in flight may run on after a stop signal: the longest
    // call deadline of any plugin (a call cannot outlive it), plus a margin.
    let drain_for = match args.drain_timeout {
        Some(secs) => Duration::from_secs(secs),
        None => {
            host.plugins()
                .iter()
                .map(|p| Duration::from_millis(p.info().limits.call_timeout_ms))
                .max()
                .unwrap_or(GRACE)
                .max(GRACE)
                + Duration::from_secs(5)
        }
    };

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopped = move |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let (health, health_service) = tonic_health::server::health_reporter();
    for name in ["", SERVICE_NAME] {
        health
            .set_service_status(name, tonic_health::ServingStatus::NotServing)
            .await;
    }

    let daemon_metrics = metrics::DaemonMetrics::new(host.clone(), fleet.clone());
    let service = ProvisionerServer::with_interceptor(
        Service {
            host: host.clone(),
            fleet: fleet.clone(),
            compile_wait: Duration::from_secs(args.compile_wait),
        },
        bearer_check(token.into_bytes(), daemon_metrics.auth_failures()),
    );
    let (reflection_v1, reflection_v1alpha) = reflection()?;
    let mut grpc = tokio::spawn(
        tonic::transport::Server::builder()
            .http2_keepalive_interval(Some(incoming::KEEPALIVE))
            .http2_keepalive_timeout(Some(incoming::KEEPALIVE))
            .layer(daemon_metrics.grpc_layer())
            .add_service(health_service)
            .add_service(reflection_v1)
            .add_service(reflection_v1alpha)
            .add_service(service)
            .serve_with_incoming_shutdown(
                incoming::incoming(
                    grpc_listener,
                    None,
                    MAX_CONNECTIONS,
                    incoming::SETUP,
                    "gRPC",
                ),
                stopped(stop_rx.clone()),
            ),
    );
    let mut metrics = match metrics_listener {
        Some(listener) => {
            let app = axum::Router::new()
                .route("/metrics", axum::routing::get(metrics_text))
                .with_state(daemon_metrics.clone())
                .merge(
                    axum::Router::new()
                        .route("/ready", axum::routing::get(ready_text))
                        .with_state(ready_rx.clone()),
                );
            let stop = stopped(stop_rx.clone());
            tokio::spawn(async move {
                axum::serve(listener, app)
                    .with_graceful_shutdown(stop)
                    .await
                    .context("serving /metrics")
            })
        }
        None => {
            let stop = stopped(stop_rx.clone());
            tokio::spawn(async move {
                stop.await;
                Ok(())
            })
        }
    };

    if let Some(listener) = autoscaler {
        let stop = stopped(stop_rx.clone());
        tokio::spawn(async move {
            if let Err(e) = listener.serve(stop).await {
                tracing::error!(target: LOG_TARGET, "{e:#}");
            }
        });
    }

    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        writeln!(
            out,
            "listening grpc={grpc_addr} metrics={metrics_addr}{autoscaler_addr}"
        )?;
        out.flush()?;
    }

    // Settle what an earlier run left half done, behind the listeners; then
    // reconcile periodically.
    let background = tokio::spawn(background_work(
        fleet.clone(),
        daemon_metrics.clone(),
        policy,
        Duration::from_secs(args.reconcile_every),
        Duration::from_secs(args.lease_every),
        ready_tx,
        health,
        stop_rx.clone(),
    ));

    tokio::spawn(reload_on_hangup(
        host.clone(),
        hangup,
        hangup_wait,
        stop_rx.clone(),
    ));

    let early = tokio::select! {
        signal = signals.recv() => {
            tracing::info!(
                target: LOG_TARGET,
                "{signal}, draining calls in flight (up to {} s), then stopping",
                drain_for.as_secs()
            );
            None
        }
        r = &mut grpc => Some(flatten(r.map(|r| r.context("serving gRPC")))),
        r = &mut metrics => Some(flatten(r)),
    };
    // No new calls from here on: the listeners close (calls in flight go
    // on), health turns NOT_SERVING, the fleet refuses new work.
    fleet.close();
    let _ = stop_tx.send(true);
    if let Some(result) = early {
        result?;
        bail!("a listener stopped by itself");
    }
    let started = tokio::time::Instant::now();
    let drained = fleet.drain(drain_for).await;
    match &drained {
        Ok(r) if !r.drained => tracing::warn!(
            target: LOG_TARGET,
            "{} call(s) still running after {} s; {} provision(s) marked as cut short ({}), which reconcile settles without asking the cloud again",
            r.still_running,
            drain_for.as_secs(),
            r.cut_short.len(),
            r.cut_short.join(", ")
        ),
        Ok(_) => {}
        Err(e) => tracing::error!(target: LOG_TARGET, "marking calls cut short failed: {e:#}"),
    }
    let left = drain_for
        .saturating_sub(started.elapsed())
        .max(Duration::from_secs(1));
    let stopped = tokio::time::timeout(left, async {
        let grpc = flatten(grpc.await.map(|r| r.context("serving gRPC")));
        let metrics = flatten(metrics.await);
        // It only ends once told to; a panic in it is worth saying.
        if let Err(e) = background.await {
            tracing::error!(target: LOG_TARGET, "the background reconcile failed: {e}");
        }
        grpc.and(metrics)
    })
    .await;
    match stopped {
        Ok(result) => result,
        Err(_) => {
            tracing::warn!(
                target: LOG_TARGET,
                "calls still running after {drain_for:?}; exiting anyway"
            );
            Ok(())
        }
    }
}

/// SIGHUP reloads the plugin directory (as the Reload RPC does), and logs
/// what changed, until `stop` turns true.
async fn reload_on_hangup(
    host: Arc<Host>,
    mut hangup: tokio::signal::unix::Signal,
    compile_wait: Duration,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            () = wait_stop(&mut stop) => return,
            got = hangup.recv() => if got.is_none() { return },
        }
        tracing::info!(target: LOG_TARGET, "SIGHUP: reloading the plugin directory");
        match host.reload_within(compile_wait).await {
            Ok(report) if report.failed.is_empty() => {
                tracing::info!(target: LOG_TARGET, "SIGHUP reload: {report}");
            }
            Ok(report) => tracing::warn!(target: LOG_TARGET, "SIGHUP reload: {report}"),
            Err(e) => tracing::warn!(target: LOG_TARGET, "SIGHUP reload failed: {e:#}"),
        }
    }
}

/// The gRPC server reflection services (`grpc.reflection.v1` and the
/// older `v1alpha` many clients still ask first), describing the health
/// service and `wasmprov.v1.Provisioner`, so grpcurl-style tools need no
/// `.proto`. Like health, they need no token: the schema is public.
fn reflection() -> Result<(
    tonic_reflection::server::v1::ServerReflectionServer<
        impl tonic_reflection::server::v1::ServerReflection,
    >,
    tonic_reflection::server::v1alpha::ServerReflectionServer<
        impl tonic_reflection::server::v1alpha::ServerReflection,
    >,
)> {
    let v1 = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()
        .context("building the gRPC reflection service")?;
    let v1alpha = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1alpha()
        .context("building the gRPC reflection service (v1alpha)")?;
    Ok((v1, v1alpha))
}

/// The startup reconcile (then ready), the periodic reconciles every
/// `every` (from the end of one pass to the start of the next; 0: none)
/// and the lease sweep every `leases` (0: none), until `stop` turns true;
/// a pass under way when it does is let finish.
#[allow(
    clippy::too_many_arguments,
    reason = "one call site, each argument named there"
)]
async fn background_work(
    fleet: Arc<Fleet>,
    metrics: Arc<metrics::DaemonMetrics>,
    policy: ReconcilePolicy,
    every: Duration,
    leases: Duration,
    ready: Readiness,
    health: tonic_health::server::HealthReporter,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    loop {
        let started = std::time::Instant::now();
        let pass = tokio::select! {
            () = wait_stop(&mut stop) => return,
            r = fleet.reconcile(&policy) => r,
        };
        metrics.ran(metrics::Run::Reconcile, started, &pass);
        match pass {
            Ok(report) => {
                log_reconcile("startup", &report, true);
                break;
            }
            Err(e) => {
                tracing::warn!(target: LOG_TARGET, "startup reconcile failed (retried in 5 s): {e:#}");
                tokio::select! {
                    () = wait_stop(&mut stop) => return,
                    () = tokio::time::sleep(Duration::from_secs(5)) => {}
                }
            }
        }
    }
    tracing::info!(target: LOG_TARGET, "ready");
    tokio::spawn(health_watch(fleet.clone(), ready, health, stop.clone()));
    let far = Duration::from_secs(u64::from(u32::MAX));
    let every = if every.is_zero() { far } else { every };
    let leases = if leases.is_zero() { far } else { leases };
    let mut next_reconcile = tokio::time::Instant::now() + every;
    let mut next_sweep = tokio::time::Instant::now() + leases;
    loop {
        tokio::select! {
            () = wait_stop(&mut stop) => return,
            () = tokio::time::sleep_until(next_sweep) => {
                let started = std::time::Instant::now();
                let pass = fleet.expire_leases().await;
                metrics.ran(metrics::Run::LeaseSweep, started, &pass);
                match pass {
                    Ok(report) if !report.is_clean() => log_reconcile("lease sweep", &report, false),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(target: LOG_TARGET, "lease sweep failed (retried in {leases:?}): {e:#}"),
                }
                next_sweep = tokio::time::Instant::now() + leases;
            }
            () = tokio::time::sleep_until(next_reconcile) => {
                let started = std::time::Instant::now();
                let pass = fleet.reconcile(&policy).await;
                metrics.ran(metrics::Run::Reconcile, started, &pass);
                match pass {
                    Ok(report) => log_reconcile("periodic", &report, false),
                    Err(e) => tracing::warn!(
                        target: LOG_TARGET,
                        "periodic reconcile failed (retried in {every:?}): {e:#}"
                    ),
                }
                next_reconcile = tokio::time::Instant::now() + every;
            }
        }
    }
}

/// Once the startup reconcile is done: the daemon serves exactly while its
/// journal takes writes and it is not stopping. A failed journal write turns
/// health (`grpc.health.v1`, both names) and `GET /ready` to NOT_SERVING at
/// once; the journal is reopened and written again every half second, and
/// serving resumes when that works. A stop turns it NOT_SERVING for good.
async fn health_watch(
    fleet: Arc<Fleet>,
    ready: Readiness,
    health: tonic_health::server::HealthReporter,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut serving: Option<bool> = None;
    let mut failures = fleet.journal().failures();
    loop {
        let stopping = *stop.borrow() || fleet.is_closed();
        // A write failed since the last look: not serving for at least one
        // round, whatever the journal says now.
        let failed_since = fleet.journal().failures() != failures;
        failures = fleet.journal().failures();
        let ok = !stopping && !failed_since && (fleet.healthy() || fleet.check_journal().is_ok());
        if serving != Some(ok) {
            if ok {
                tracing::info!(target: LOG_TARGET, "serving");
            } else if !stopping {
                tracing::error!(
                    target: LOG_TARGET,
                    "NOT_SERVING: the journal cannot be written ({}); no call that needs it is taken until it can",
                    fleet.journal().path().display()
                );
            }
            let _ = ready.send(if ok {
                None
            } else if stopping {
                Some("stopping: draining the calls in flight\n")
            } else {
                Some("not serving: the journal cannot be written (it is retried every half second)\n")
            });
            let status = if ok {
                tonic_health::ServingStatus::Serving
            } else {
                tonic_health::ServingStatus::NotServing
            };
            for name in ["", SERVICE_NAME] {
                health.set_service_status(name, status).await;
            }
            serving = Some(ok);
        }
        if stopping {
            return;
        }
        tokio::select! {
            () = wait_stop(&mut stop) => {}
            () = tokio::time::sleep(Duration::from_millis(500)) => {}
        }
    }
}

/// Waits until `stop` turns true (or its sender is gone).
async fn wait_stop(stop: &mut tokio::sync::watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Logs a reconcile's outcome: at `warn` when something could not be
/// done, else at `info` when it settled something (or `always`).
fn log_reconcile(when: &str, report: &ReconcileReport, always: bool) {
    if !report.errors.is_empty() {
        tracing::warn!(target: LOG_TARGET, "{when} reconcile: {report}");
    } else if always || !report.is_clean() {
        tracing::info!(target: LOG_TARGET, "{when} reconcile: {report}");
    }
}

fn flatten(r: std::result::Result<Result<()>, tokio::task::JoinError>) -> Result<()> {
    r.context("listener task failed")?
}

/// Refuses a listener outside loopback unless remote access was asked for.
fn check_local(addr: SocketAddr, allow_remote: bool, flag: &str) -> Result<()> {
    if addr.ip().is_loopback() || allow_remote {
        return Ok(());
    }
    bail!(
        "{flag} {addr} is not a loopback address; pass --allow-remote to listen there (the bearer token is sent in clear text: put TLS in front)"
    )
}

/// The token clients must present, when one is configured: from
/// `--token-file`, else the environment.
fn configured_token(args: &ServeArgs) -> Result<Option<String>> {
    let (token, source) = if let Some(path) = &args.token_file {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading --token-file {}", path.display()))?;
        (
            text.trim().to_string(),
            format!("--token-file {}", path.display()),
        )
    } else if let Ok(value) = std::env::var(TOKEN_ENV) {
        (value.trim().to_string(), format!("${TOKEN_ENV}"))
    } else {
        return Ok(None);
    };
    if token.is_empty() {
        bail!("the token from {source} is empty; refusing to serve without authentication");
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        bail!(
            "the token from {source} has spaces or characters outside printable ASCII; clients could not send it in an authorization header"
        );
    }
    Ok(Some(token))
}

/// A new random token, written to `--token-out`.
fn generate_token(args: &ServeArgs) -> Result<String> {
    let token = hex::encode(rand::random::<[u8; 32]>());
    write_private(&args.token_out, &token)?;
    tracing::info!(
        target: LOG_TARGET,
        "generated a bearer token in {} (mode 0600)",
        args.token_out.display()
    );
    Ok(token)
}

/// Writes `text` to `path`, readable by the owner only. The file is made
/// beside the target with mode 0600 from the start, then renamed over it,
/// so the token is never readable by others, not even briefly.
fn write_private(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .with_context(|| format!("--token-out {} names no file", path.display()))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::anyhow!("writing the token to {}: {e}", path.display())
    })
}

/// The interceptor that admits a call only with `authorization: Bearer <token>`.
fn bearer_check(
    token: Vec<u8>,
    failures: metrics::AuthFailures,
) -> impl FnMut(Request<()>) -> std::result::Result<Request<()>, Status> + Clone {
    let token: Arc<[u8]> = token.into();
    move |req: Request<()>| {
        use subtle::ConstantTimeEq;
        let presented = req
            .metadata()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                let (scheme, rest) = v.split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
            });
        match presented {
            // `ct_eq` compares every byte whatever the first difference;
            // only the length can be learned, and it says nothing here.
            Some(given) if bool::from(given.as_bytes().ct_eq(&token)) => Ok(req),
            Some(_) => {
                failures.wrong();
                Err(Status::unauthenticated("wrong bearer token"))
            }
            None => {
                failures.missing();
                Err(Status::unauthenticated(
                    "missing `authorization: Bearer <token>` metadata",
                ))
            }
        }
    }
}

/// SIGINT and SIGTERM, handled from the moment this is made (before the
/// first line is printed, so a supervisor's signal is never missed).
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            int: signal(SignalKind::interrupt()).context("handling SIGINT")?,
            term: signal(SignalKind::terminate()).context("handling SIGTERM")?,
        })
    }

    /// Waits for either, and says which.
    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "interrupted",
            _ = self.term.recv() => "terminated",
        }
    }
}

/// `GET /ready`: 200 once the startup reconcile is done, 503 before.
/// Whether the daemon serves: `None`, or why not (the body of `/ready`).
type Readiness = tokio::sync::watch::Sender<Option<&'static str>>;

/// Why the daemon is not ready before its startup reconcile ends.
const STARTING: &str = "starting: reconciling the journal\n";

/// `GET /ready`: 200 while the daemon serves (its startup reconcile done,
/// its journal writable), 503 with the reason otherwise.
async fn ready_text(
    axum::extract::State(ready): axum::extract::State<
        tokio::sync::watch::Receiver<Option<&'static str>>,
    >,
) -> impl axum::response::IntoResponse {
    match *ready.borrow() {
        None => (axum::http::StatusCode::OK, "ready\n"),
        Some(why) => (axum::http::StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

/// `GET /metrics`: every series, in the format the `Accept` header ranks
/// first (see `metrics.rs`).
async fn metrics_text(
    axum::extract::State(metrics): axum::extract::State<Arc<metrics::DaemonMetrics>>,
    headers: axum::http::HeaderMap,
) -> impl axum::response::IntoResponse {
    let accept = headers
        .get_all(axum::http::header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(",");
    let format = metrics::negotiate((!accept.is_empty()).then_some(accept.as_str()));
    (
        [
            (axum::http::header::CONTENT_TYPE, format.content_type()),
            (axum::http::header::VARY, "Accept"),
        ],
        metrics.render(format),
    )
}

/// The gRPC service over one host and its journal. The fleet keeps the
/// calls of one request id in order (a reconcile's pass over it included)
/// and runs scales one at a time.
struct Service {
    host: Arc<Host>,
    fleet: Arc<Fleet>,
    /// How long a Reload waits for compiles before answering.
    compile_wait: Duration,
}

impl Service {
    fn plugin(&self, name: &str) -> std::result::Result<Arc<wasmprov_host::WasmPlugin>, Status> {
        if name.is_empty() {
            return Err(Status::invalid_argument(format!(
                "plugin is required; loaded: {}",
                self.host.plugin_names().join(", ")
            )));
        }
        crate::load::plugin(&self.host, name).map_err(|e| {
            compiling_status(&self.host.errors(), name)
                .unwrap_or_else(|| with_kind(Code::NotFound, format!("{e:#}"), "unknown_plugin"))
        })
    }

    /// [`fleet_status`], with the loaded plugins named for an unknown one.
    fn fleet_status(&self, err: &FleetError) -> Status {
        if let FleetError::UnknownPlugin(name) = err
            && let Err(status) = self.plugin(name)
        {
            return status;
        }
        fleet_status(err)
    }
}

type RpcResult<T> = std::result::Result<Response<T>, Status>;

#[tonic::async_trait]
impl Provisioner for Service {
    async fn list_plugins(
        &self,
        _req: Request<pb::ListPluginsRequest>,
    ) -> RpcResult<pb::ListPluginsResponse> {
        let plugins = self
            .host
            .plugins()
            .iter()
            .map(|p| {
                let info = p.info();
                pb::Plugin {
                    name: info.name.clone(),
                    backend: info.backend_name.clone(),
                    capacity_types: info
                        .capacity_types
                        .iter()
                        .map(|c| capacity_to_pb(*c).into())
                        .collect(),
                    sha256: info.sha256.clone(),
                    signer: info.signer.clone().unwrap_or_default(),
                    source: info.source.clone().unwrap_or_default(),
                    contract: info.contract.clone(),
                    interfaces: Some(pb::Interfaces {
                        set_labels: info.interfaces.set_labels,
                        networking: info.interfaces.networking,
                    }),
                }
            })
            .collect();
        let load_errors = self.host.errors().iter().map(ToString::to_string).collect();
        Ok(Response::new(pb::ListPluginsResponse {
            plugins,
            load_errors,
        }))
    }

    async fn price_hint(
        &self,
        req: Request<pb::PriceHintRequest>,
    ) -> RpcResult<pb::PriceHintResponse> {
        let req = req.into_inner();
        let shape = shape_from_pb(req.shape)?;
        let plugin = self.plugin(&req.plugin)?;
        // Price hints run on the calling thread (they must not do I/O, and
        // are cut at a small CPU budget); keep them off the async workers.
        let hint = tokio::task::spawn_blocking(move || plugin.try_price_hint(&shape))
            .await
            .map_err(|e| Status::internal(format!("price hint task failed: {e}")))?
            .map_err(|e| status_of(&e))?;
        Ok(Response::new(pb::PriceHintResponse {
            hint: hint.map(hint_to_pb),
        }))
    }

    async fn rank(&self, req: Request<pb::RankRequest>) -> RpcResult<pb::RankResponse> {
        let shape = shape_from_pb(req.into_inner().shape)?;
        // Through the fleet's catalogues: each plugin's read within its
        // deadline and kept for a TTL, so no plugin holds the others up.
        let ranking = self
            .fleet
            .catalogues()
            .rank(
                self.fleet.backends().as_ref(),
                &shape,
                Some(self.fleet.unavailable()),
                |_| true,
            )
            .await;
        Ok(Response::new(pb::RankResponse {
            offers: ranking
                .offers
                .into_iter()
                .map(|o| pb::Offer {
                    plugin: o.plugin,
                    hint: Some(hint_to_pb(o.hint)),
                })
                .collect(),
            none: ranking
                .none
                .into_iter()
                .map(|n| pb::NoOffer {
                    plugin: n.plugin,
                    reason: n.reason,
                })
                .collect(),
            unpriced: ranking
                .unpriced
                .into_iter()
                .map(|u| pb::Unpriced {
                    plugin: u.plugin,
                    instance_type: u.instance_type,
                    capacity_type: capacity_to_pb(u.capacity_type).into(),
                })
                .collect(),
        }))
    }

    async fn provision(
        &self,
        req: Request<pb::ProvisionRequest>,
    ) -> RpcResult<pb::ProvisionResponse> {
        let req = req.into_inner();
        if req.request_id.is_empty() {
            return Err(with_kind(
                Code::InvalidArgument,
                "request_id is required: it makes provisioning idempotent (a retry with the same id returns the same node)".into(),
                "unsupported",
            ));
        }
        wasmprov_api::ids::check_request_id(&req.request_id).map_err(|e| status_of(&e))?;
        let shape = shape_from_pb(req.shape)?;
        if let Some(subnet) = &req.subnet {
            convert::named("subnet", subnet)?;
        }
        self.plugin(&req.plugin)?;
        let lease = lease_from_pb(req.lease_seconds, "lease_seconds")?;
        if let Some(group) = &req.group {
            // The group's own rules for its name (the rest is a placeholder).
            CapacityGroup::new(group.clone(), wasmprov_api::NodeShape::default(), 0, 0)
                .validate()
                .map_err(|e| Status::invalid_argument(format!("{e:#}")))?;
        }
        let options = ProvisionOptions {
            request_id: Some(req.request_id),
            lease,
            group: req.group,
            hourly_usd: None,
            boot: boot_from_pb(req.boot)?,
            subnet: req.subnet,
        };
        let node = self
            .fleet
            .provision(&req.plugin, &shape, options)
            .await
            .map_err(|e| self.fleet_status(&e))?;
        Ok(Response::new(pb::ProvisionResponse {
            node: Some(node_to_pb(node)),
        }))
    }

    async fn describe(&self, req: Request<pb::DescribeRequest>) -> RpcResult<pb::DescribeResponse> {
        let plugin = self.plugin(&req.into_inner().plugin)?;
        let nodes = plugin.describe().await.map_err(|e| status_of(&e))?;
        Ok(Response::new(pb::DescribeResponse {
            nodes: nodes.into_iter().map(node_to_pb).collect(),
        }))
    }

    async fn get(&self, req: Request<pb::GetRequest>) -> RpcResult<pb::GetResponse> {
        let req = req.into_inner();
        convert::named("provider id", &req.provider_id)?;
        let plugin = self.plugin(&req.plugin)?;
        match plugin
            .get(&req.provider_id)
            .await
            .map_err(|e| status_of(&e))?
        {
            Some(node) => Ok(Response::new(pb::GetResponse {
                node: Some(node_to_pb(node)),
            })),
            None => Err(status_of(&wasmprov_api::ProvisionerError::NotFound(
                format!(
                    "no node {:?} of this owner on {}",
                    req.provider_id, req.plugin
                ),
            ))),
        }
    }

    async fn offerings(
        &self,
        req: Request<pb::OfferingsRequest>,
    ) -> RpcResult<pb::OfferingsResponse> {
        let plugin = self.plugin(&req.into_inner().plugin)?;
        let list = plugin.offerings().await.map_err(|e| match e {
            // No catalogue is a missing feature of that plugin, not a bad argument.
            wasmprov_api::ProvisionerError::Unsupported(m) => {
                with_kind(Code::Unimplemented, m, "unsupported")
            }
            other => status_of(&other),
        })?;
        Ok(Response::new(pb::OfferingsResponse {
            offerings: list.into_iter().map(offering_to_pb).collect(),
        }))
    }

    async fn terminate(
        &self,
        req: Request<pb::TerminateRequest>,
    ) -> RpcResult<pb::TerminateResponse> {
        let req = req.into_inner();
        convert::named("provider id", &req.provider_id)?;
        self.plugin(&req.plugin)?;
        self.fleet
            .terminate(&req.plugin, &req.provider_id)
            .await
            .map_err(|e| self.fleet_status(&e))?;
        Ok(Response::new(pb::TerminateResponse {}))
    }

    async fn reload(&self, _req: Request<pb::ReloadRequest>) -> RpcResult<pb::ReloadResponse> {
        let report = self
            .host
            .reload_within(self.compile_wait)
            .await
            .map_err(|e| Status::failed_precondition(format!("reloading plugins: {e:#}")))?;
        Ok(Response::new(pb::ReloadResponse {
            added: report.added,
            replaced: report.replaced,
            removed: report.removed,
            kept_old: report.kept_old,
            failed: report.failed,
            compiling: report.compiling,
        }))
    }

    async fn reconcile(
        &self,
        req: Request<pb::ReconcileRequest>,
    ) -> RpcResult<pb::ReconcileResponse> {
        let req = req.into_inner();
        let policy = ReconcilePolicy {
            leaks: if req.terminate_leaks {
                LeakPolicy::Terminate
            } else {
                LeakPolicy::Report
            },
            resume_pending: !req.no_resume,
            grace: req
                .grace_seconds
                .map_or(wasmprov_fleet::DEFAULT_GRACE, Duration::from_secs),
            adopt: req.adopt,
            confirm_orphans: req.confirm_orphans,
        };
        let report = self
            .fleet
            .reconcile(&policy)
            .await
            .map_err(|e| journal_status(&e))?;
        log_reconcile("requested", &report, false);
        Ok(Response::new(reconcile_to_pb(report)))
    }

    async fn scale(&self, req: Request<pb::ScaleRequest>) -> RpcResult<pb::ScaleResponse> {
        let req = req.into_inner();
        let group = match (req.alien_group_json, req.group) {
            (Some(_), Some(_)) => {
                return Err(Status::invalid_argument(
                    "give group or alien_group_json, not both",
                ));
            }
            (Some(json), None) => alien_group_from_json(&json)?,
            (None, group) => group_from_pb(group)?,
        };
        self.fleet
            .check_group_size(&group)
            .map_err(|e| Status::invalid_argument(format!("{e:#}")))?;
        // The group was validated: what is left to fail is the journal.
        let report = self
            .fleet
            .scale(&group, req.desired)
            .await
            .map_err(|e| journal_status(&e))?;
        Ok(Response::new(pb::ScaleResponse {
            converged: report.converged(),
            retryable: report.retryable,
            target: report.target,
            before: report.before,
            after: report.after,
            added: report.added.into_iter().map(member_to_pb).collect(),
            removed: report.removed.into_iter().map(member_to_pb).collect(),
            errors: report.errors,
        }))
    }

    async fn history(&self, req: Request<pb::HistoryRequest>) -> RpcResult<pb::HistoryResponse> {
        let limit = match req.into_inner().limit {
            0 => 100,
            n => n as usize,
        };
        let events = self.fleet.history(limit).map_err(|e| journal_status(&e))?;
        Ok(Response::new(pb::HistoryResponse {
            events: events.into_iter().map(event_to_pb).collect(),
        }))
    }

    async fn list_intents(
        &self,
        req: Request<pb::ListIntentsRequest>,
    ) -> RpcResult<pb::ListIntentsResponse> {
        let intents = match req.into_inner().group {
            Some(group) => self.fleet.members(&group),
            None => self.fleet.intents(),
        }
        .map_err(|e| journal_status(&e))?;
        let journal = self.fleet.journal().identity();
        Ok(Response::new(pb::ListIntentsResponse {
            intents: intents
                .into_iter()
                .map(|i| intent_to_pb(i, journal))
                .collect(),
        }))
    }

    async fn set_labels(
        &self,
        req: Request<pb::SetLabelsRequest>,
    ) -> RpcResult<pb::SetLabelsResponse> {
        let req = req.into_inner();
        convert::named("provider id", &req.provider_id)?;
        let plugin = self.plugin(&req.plugin)?;
        let labels: wasmprov_api::Labels = req.labels.into_iter().collect();
        let node = plugin
            .set_labels(&req.provider_id, &labels)
            .await
            .map_err(|e| feature_status(&e))?;
        Ok(Response::new(pb::SetLabelsResponse {
            node: Some(node_to_pb(node)),
        }))
    }

    async fn assign_address(
        &self,
        req: Request<pb::AssignAddressRequest>,
    ) -> RpcResult<pb::AssignAddressResponse> {
        let req = req.into_inner();
        convert::named("provider id", &req.provider_id)?;
        let kind = kind_from_pb(req.kind)?;
        if let Some(address) = &req.address {
            // Leave it out for a new address.
            convert::asked_address(Some(kind), address)?;
        }
        let request = wasmprov_api::AddressRequest {
            kind,
            address: req.address,
        };
        let plugin = self.plugin(&req.plugin)?;
        let a = plugin
            .assign_address(&req.provider_id, &request)
            .await
            .map_err(|e| feature_status(&e))?;
        Ok(Response::new(pb::AssignAddressResponse {
            address: Some(address_to_pb(a)),
        }))
    }

    async fn release_address(
        &self,
        req: Request<pb::ReleaseAddressRequest>,
    ) -> RpcResult<pb::ReleaseAddressResponse> {
        let req = req.into_inner();
        convert::named("provider id", &req.provider_id)?;
        convert::asked_address(None, &req.address)?;
        let plugin = self.plugin(&req.plugin)?;
        plugin
            .release_address(&req.provider_id, &req.address)
            .await
            .map_err(|e| feature_status(&e))?;
        Ok(Response::new(pb::ReleaseAddressResponse {}))
    }

    async fn register_target(
        &self,
        req: Request<pb::RegisterTargetRequest>,
    ) -> RpcResult<pb::RegisterTargetResponse> {
        let req = req.into_inner();
        let target = target_from_pb(req.target)?;
        let plugin = self.plugin(&req.plugin)?;
        plugin
            .register_target(&target)
            .await
            .map_err(|e| feature_status(&e))?;
        Ok(Response::new(pb::RegisterTargetResponse {}))
    }

    async fn deregister_target(
        &self,
        req: Request<pb::DeregisterTargetRequest>,
    ) -> RpcResult<pb::DeregisterTargetResponse> {
        let req = req.into_inner();
        let target = target_from_pb(req.target)?;
        let plugin = self.plugin(&req.plugin)?;
        plugin
            .deregister_target(&target)
            .await
            .map_err(|e| feature_status(&e))?;
        Ok(Response::new(pb::DeregisterTargetResponse {}))
    }

    async fn list_targets(
        &self,
        req: Request<pb::ListTargetsRequest>,
    ) -> RpcResult<pb::ListTargetsResponse> {
        let req = req.into_inner();
        convert::named("target group", &req.group)?;
        let plugin = self.plugin(&req.plugin)?;
        let list = plugin
            .list_targets(&req.group)
            .await
            .map_err(|e| feature_status(&e))?;
        Ok(Response::new(pb::ListTargetsResponse {
            targets: list.into_iter().map(target_to_pb).collect(),
        }))
    }

    async fn subnet_capacity(
        &self,
        req: Request<pb::SubnetCapacityRequest>,
    ) -> RpcResult<pb::SubnetCapacityResponse> {
        let req = req.into_inner();
        convert::named("subnet", &req.subnet)?;
        let plugin = self.plugin(&req.plugin)?;
        let c = plugin
            .subnet_capacity(&req.subnet)
            .await
            .map_err(|e| feature_status(&e))?;
        Ok(Response::new(pb::SubnetCapacityResponse {
            subnet: c.subnet,
            available_addresses: c.available_addresses,
            total_addresses: c.total_addresses,
            zone: c.zone,
        }))
    }

    async fn renew_lease(
        &self,
        req: Request<pb::RenewLeaseRequest>,
    ) -> RpcResult<pb::RenewLeaseResponse> {
        let req = req.into_inner();
        if req.lease_seconds == 0 {
            return Err(Status::invalid_argument("lease_seconds must be at least 1"));
        }
        let intent = self
            .fleet
            .renew(&req.request_id, Duration::from_secs(req.lease_seconds))
            .await
            .map_err(|e| self.fleet_status(&e))?;
        Ok(Response::new(pb::RenewLeaseResponse {
            intent: Some(intent_to_pb(intent, self.fleet.journal().identity())),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmprov_api::{PluginFault, ProvisionerError};

    fn kind(s: &Status) -> &str {
        s.metadata().get(KIND_KEY).unwrap().to_str().unwrap()
    }

    #[test]
    fn errors_map_to_codes_and_keep_their_kind() {
        let s = status_of(&ProvisionerError::NotFound("gone".into()));
        assert_eq!(s.code(), Code::NotFound);
        assert_eq!(kind(&s), "not_found");

        let s = status_of(&ProvisionerError::RateLimited {
            retry_after_ms: Some(1500),
            message: "slow".into(),
        });
        assert_eq!(s.code(), Code::ResourceExhausted);
        assert_eq!(kind(&s), "rate_limited");
        assert_eq!(s.metadata().get("wasmprov-retry-after-ms").unwrap(), "1500");

        let s = status_of(&ProvisionerError::Auth("bad key".into()));
        assert_eq!(s.code(), Code::FailedPrecondition);
        assert_eq!(kind(&s), "auth");

        let s = status_of(&ProvisionerError::Plugin {
            plugin: "p".into(),
            fault: PluginFault::Timeout,
            message: "slow".into(),
        });
        assert_eq!(s.code(), Code::DeadlineExceeded);
        assert_eq!(
            s.metadata().get("wasmprov-plugin-fault").unwrap(),
            "timeout"
        );
        let s = status_of(&ProvisionerError::Plugin {
            plugin: "p".into(),
            fault: PluginFault::Trap,
            message: "boom".into(),
        });
        assert_eq!(s.code(), Code::Internal);
        assert_eq!(kind(&s), "plugin");
    }

    #[test]
    fn a_plugin_still_compiling_is_unavailable_not_unknown() {
        let errors = [
            wasmprov_host::LoadError::Compiling {
                plugin: "hetzner".into(),
                running_ms: 2004,
            },
            wasmprov_host::LoadError::Compiling {
                plugin: "hetzner-eu".into(),
                running_ms: 10,
            },
        ];
        let s = compiling_status(&errors, "hetzner").unwrap();
        assert_eq!(s.code(), Code::Unavailable);
        assert_eq!(kind(&s), "compiling");
        assert!(s.message().contains("2004 ms"), "{s:?}");
        // Exactly the name: neither a prefix nor a plugin that is not compiling.
        assert!(compiling_status(&errors, "hetz").is_none());
        assert!(compiling_status(&errors, "aws-ec2").is_none());
        assert!(compiling_status(&[], "hetzner").is_none());
    }

    #[test]
    fn fleet_errors_map_to_codes_and_kinds() {
        let s = fleet_status(&FleetError::UnknownPlugin("nosuch".into()));
        assert_eq!(s.code(), Code::NotFound);
        assert_eq!(kind(&s), "unknown_plugin");

        let s = fleet_status(&FleetError::Conflict {
            request_id: "r-1".into(),
            plugin: "hetzner".into(),
        });
        assert_eq!(s.code(), Code::AlreadyExists);
        assert_eq!(kind(&s), "conflict");
        assert!(s.message().contains("r-1"), "{s:?}");

        let s = fleet_status(&FleetError::Provisioner(ProvisionerError::Quota(
            "full".into(),
        )));
        assert_eq!(s.code(), Code::ResourceExhausted);
        assert_eq!(kind(&s), "quota");

        let s = fleet_status(&FleetError::Journal(anyhow::anyhow!("disk full")));
        assert_eq!(s.code(), Code::Internal);
        assert_eq!(kind(&s), "journal");
        assert!(s.message().contains("disk full"), "{s:?}");
    }

    #[test]
    fn groups_and_leases_are_checked() {
        let group = |name: &str, min, max| pb::CapacityGroup {
            name: name.into(),
            shape: Some(pb::NodeShape {
                cpu: 2.0,
                memory_bytes: 4 << 30,
                ..Default::default()
            }),
            min,
            max,
            plugins: vec![],
            lease_seconds: None,
            boot: None,
        };
        let g = group_from_pb(Some(group("grp", 0, 3))).unwrap();
        assert_eq!((g.name.as_str(), g.min, g.max), ("grp", 0, 3));
        for bad in [
            None,
            Some(group("", 0, 3)),
            Some(group("a b", 0, 3)),
            Some(group("grp", 4, 3)),
            Some(pb::CapacityGroup {
                shape: None,
                ..group("grp", 0, 3)
            }),
            Some(pb::CapacityGroup {
                lease_seconds: Some(0),
                ..group("grp", 0, 3)
            }),
        ] {
            let err = group_from_pb(bad.clone()).unwrap_err();
            assert_eq!(err.code(), Code::InvalidArgument, "{bad:?}");
        }
        assert_eq!(
            lease_from_pb(Some(90), "x").unwrap(),
            Some(Duration::from_secs(90))
        );
        assert_eq!(lease_from_pb(None, "x").unwrap(), None);
    }

    #[test]
    fn only_the_right_bearer_token_passes() {
        let failures = metrics::AuthFailures::default();
        let mut check = bearer_check(b"s3cret".to_vec(), failures.clone());
        let with = |value: Option<&str>| {
            let mut req = Request::new(());
            if let Some(v) = value {
                req.metadata_mut()
                    .insert("authorization", v.parse().unwrap());
            }
            req
        };
        assert!(check(with(Some("Bearer s3cret"))).is_ok());
        assert!(check(with(Some("bearer s3cret"))).is_ok());
        for bad in [
            None,
            Some("Bearer s3cre"),
            Some("Bearer s3cret2"),
            Some("Basic s3cret"),
            Some("s3cret"),
        ] {
            let err = check(with(bad)).unwrap_err();
            assert_eq!(err.code(), Code::Unauthenticated, "{bad:?}");
        }
        // "Basic …" and a bare token present no bearer token at all.
        assert_eq!((failures.count("missing"), failures.count("wrong")), (3, 2));
    }

    #[test]
    fn remote_listeners_need_the_flag() {
        assert!(check_local("127.0.0.1:1".parse().unwrap(), false, "--listen").is_ok());
        assert!(check_local("[::1]:1".parse().unwrap(), false, "--listen").is_ok());
        let err = check_local("0.0.0.0:1".parse().unwrap(), false, "--listen").unwrap_err();
        assert!(err.to_string().contains("--allow-remote"), "{err}");
        assert!(check_local("0.0.0.0:1".parse().unwrap(), true, "--listen").is_ok());
    }

    #[test]
    fn a_generated_token_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        std::fs::write(&path, "old").unwrap();
        write_private(&path, "abc").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "abc\n");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "no temporary left"
        );
    }
}
