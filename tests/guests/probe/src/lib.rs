//! A provider for tests. The shape's `mode` label picks what a call does:
//! normal answers, HTTP or exec through the sandbox, or misbehaviour
//! (panic, trap, endless loop, memory bomb, deep recursion). `price_hint`
//! also has `count` (the answer's type names how many price hints this
//! instance has answered), `grow` (the same after growing the memory) and
//! `price` (answers the price the `usd` label spells, valid or not).
//! `provision` also has `text` (a node whose provider id, instance type
//! and zone are the configured `text`) and `text-error` (an error saying
//! it): text from a plugin for the terminal-output tests.

use wasmprov_guest::exec::Command;
use wasmprov_guest::http::Request;
use wasmprov_guest::{
    CapacityType, Error, JoinState, Labels, NodeHandle, NodeShape, PriceHint, Provider,
    ProvisionRequest, Result, config, export_provider, log,
};

struct Probe;

/// Price hints this instance has answered (state a reused instance keeps).
static PRICE_CALLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn label<'a>(shape: &'a NodeShape, key: &str) -> &'a str {
    shape.labels.get(key).map_or("", String::as_str)
}

/// Misbehaviours shared by every export.
fn misbehave(mode: &str) {
    match mode {
        "panic" => panic!("probe was asked to panic"),
        "noisy" => {
            for i in 0..20_000 {
                eprintln!("diagnostic line {i} of a chatty plugin");
            }
            panic!("noisy probe gave up");
        }
        "trap" => std::process::abort(),
        "loop" => {
            let mut x: u64 = 0;
            loop {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        "membomb" => {
            let mut hoard: Vec<Vec<u8>> = Vec::new();
            loop {
                hoard.push(vec![7u8; 4 << 20]);
                std::hint::black_box(&hoard);
            }
        }
        "recurse" => {
            fn down(n: u64) -> u64 {
                if std::hint::black_box(n) == u64::MAX {
                    return 0;
                }
                std::hint::black_box(down(n + 1) + 1)
            }
            std::hint::black_box(down(0));
        }
        _ => {}
    }
}

fn node(id: String, shape: &NodeShape, labels: Labels) -> NodeHandle {
    NodeHandle {
        provider_id: id,
        address: Some("192.0.2.10".into()),
        zone: shape.zone.clone(),
        capacity_type: shape.capacity_type,
        join_state: JoinState::Provisioning,
        instance_type: Some("probe-1".into()),
        labels,
        ..Default::default()
    }
}

impl Provider for Probe {
    const NAME: &'static str = "probe";

    fn capacity_types() -> Vec<CapacityType> {
        vec![CapacityType::OnDemand, CapacityType::Spot]
    }

    fn new() -> Result<Self> {
        Ok(Probe)
    }

    fn price_hint(&self, shape: &NodeShape) -> Result<Option<PriceHint>> {
        let mode = label(shape, "mode");
        misbehave(mode);
        let calls = PRICE_CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        match mode {
            "count" | "grow" => {
                if mode == "grow" {
                    // Past the 2 MiB the guest starts with.
                    std::hint::black_box(vec![1u8; 6 << 20]);
                }
                return Ok(Some(PriceHint {
                    hourly_usd: 0.01,
                    capacity_type: shape.capacity_type,
                    instance_type: format!("probe-call-{calls}"),
                }));
            }
            "http" => {
                Request::get(label(shape, "url")).send()?;
            }
            "exec" => {
                Command::new(label(shape, "program")).run()?;
            }
            "none" => return Ok(None),
            "config" => {
                // The value of the config key the `key` label names.
                return Ok(Some(PriceHint {
                    hourly_usd: 0.01,
                    capacity_type: shape.capacity_type,
                    instance_type: config::get(label(shape, "key"))?
                        .unwrap_or_else(|| "<unset>".into()),
                }));
            }
            "price" => {
                // Any price the `usd` label spells (NaN, inf, -1, -0 ...).
                return Ok(Some(PriceHint {
                    hourly_usd: label(shape, "usd").parse().unwrap_or(f64::NAN),
                    capacity_type: shape.capacity_type,
                    instance_type: "probe-priced".into(),
                }));
            }
            "unsupported" => return Err(Error::Unsupported("probe cannot price this".into())),
            _ => {}
        }
        Ok(Some(PriceHint {
            hourly_usd: 0.01 * shape.cpu,
            capacity_type: shape.capacity_type,
            instance_type: "probe-1".into(),
        }))
    }

    fn provision(&self, owner_id: &str, request: &ProvisionRequest) -> Result<NodeHandle> {
        let shape = &request.shape;
        let mode = label(shape, "mode");
        misbehave(mode);
        let mut labels = Labels::new();
        labels.insert("owner".into(), owner_id.into());
        match mode {
            "http" => {
                let resp = Request::get(label(shape, "url"))
                    .header("x-probe", "1")
                    .send()?;
                labels.insert("status".into(), resp.status.to_string());
                labels.insert("body".into(), resp.text());
            }
            "exec" => {
                let args: Vec<&str> = label(shape, "args").split_whitespace().collect();
                let mut cmd = Command::new(label(shape, "program")).args(args);
                if let Some(stdin) = shape.labels.get("stdin") {
                    cmd = cmd.stdin(stdin.as_bytes().to_vec());
                }
                if let Some(env) = shape.labels.get("env") {
                    let (k, v) = env.split_once('=').unwrap_or((env, ""));
                    cmd = cmd.env(k, v);
                }
                let out = cmd.run()?;
                labels.insert("exit".into(), format!("{:?}", out.exit_code));
                labels.insert("stdout".into(), out.stdout_text());
                labels.insert("stderr".into(), out.stderr_text());
            }
            "config" => {
                let key = label(shape, "key");
                labels.insert(
                    "value".into(),
                    config::get(key)?.unwrap_or_else(|| "<unset>".into()),
                );
            }
            "env" => {
                labels.insert("env_count".into(), std::env::vars().count().to_string());
                labels.insert(
                    "home".into(),
                    std::env::var("HOME").unwrap_or_else(|_| "<unset>".into()),
                );
            }
            "file" => {
                let read = std::fs::read_to_string(label(shape, "path"));
                labels.insert(
                    "file".into(),
                    match read {
                        Ok(text) => format!("read {} bytes", text.len()),
                        Err(e) => format!("error: {e}"),
                    },
                );
            }
            "log" => {
                let secret = config::get("token")?.unwrap_or_default();
                log::info_with("probe log record", &[("token", secret.as_str())]);
                log::warn(&format!("token is {secret}"));
            }
            "leak" => {
                let secret = config::get("token")?.unwrap_or_default();
                eprintln!("leaking {secret} to stderr");
                if label(shape, "how") == "panic" {
                    panic!("panicking with {secret}");
                }
                return Err(Error::Auth(format!("the token {secret} was refused")));
            }
            "depth" => {
                // Recursion of a bounded depth on the wasm stack (scalars
                // only: arrays would live in linear memory's shadow stack).
                fn down(n: u64, a: u64, b: u64, c: u64) -> u64 {
                    if n == 0 {
                        return a ^ b ^ c;
                    }
                    let r = std::hint::black_box(down(n - 1, a + 1, b ^ n, c.wrapping_mul(3)));
                    r.wrapping_add(a).wrapping_add(b).wrapping_add(c)
                }
                let depth: u64 = label(shape, "depth").parse().unwrap_or(0);
                labels.insert("sum".into(), down(depth, 1, 2, 3).to_string());
            }
            "text" => {
                let text = config::get("text")?.unwrap_or_default();
                let mut n = node(text.clone(), shape, labels);
                n.instance_type = Some(text.clone());
                n.zone = Some(text);
                return Ok(n);
            }
            "text-error" => {
                let text = config::get("text")?.unwrap_or_default();
                return Err(Error::Unsupported(format!("the probe says: {text}")));
            }
            "error" => {
                return Err(Error::Capacity {
                    scope: wasmprov_guest::CapacityScope::Zone,
                    message: "probe zone is full".into(),
                });
            }
            _ => {}
        }
        Ok(node(request.request_id.clone(), shape, labels))
    }

    fn terminate(&self, _owner_id: &str, provider_id: &str) -> Result<()> {
        misbehave(provider_id);
        if provider_id == "missing" {
            return Err(Error::NotFound(format!("{provider_id} is gone")));
        }
        Ok(())
    }

    fn describe(&self, owner_id: &str) -> Result<Vec<NodeHandle>> {
        let shape = NodeShape::default();
        let mut labels = Labels::new();
        labels.insert("owner".into(), owner_id.into());
        labels.insert(wasmprov_guest::tags::OWNER.into(), owner_id.into());
        Ok(vec![
            node("probe-a".into(), &shape, labels.clone()),
            node("probe-b".into(), &shape, labels),
        ])
    }
}

export_provider!(Probe);
