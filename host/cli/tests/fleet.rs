//! Crash safety of the journaled operations: `wasmprov scale` killed with
//! SIGKILL at random points, again and again, then restarted, leaves the
//! group at its size with neither a duplicate nor a leaked node, as the
//! fake cloud itself (not the plugin) shows.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use wasmprov_fake::{HetznerFake, HetznerFakeOptions};

const OWNER: &str = "crash-test";
const REQUEST_LABEL: &str = "wasmprov-request";

fn wasmprov(plugins: &Path, state: &Path, cache: &Path, token: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wasmprov"));
    cmd.arg("--plugin-dir")
        .arg(plugins)
        .arg("--owner")
        .arg(OWNER)
        .args(args)
        .arg("--state-dir")
        .arg(state)
        .env("XDG_CACHE_HOME", cache)
        .env("HCLOUD_TOKEN", token)
        .env_remove("WASMPROV_PLUGIN_DIR");
    cmd
}

fn scale_args(desired: &str) -> Vec<&str> {
    vec![
        "scale",
        "workers",
        "--desired",
        desired,
        "--cpu",
        "2",
        "--memory",
        "4GiB",
        "--max",
        "10",
    ]
}

fn ok(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {text}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

/// Runs `cmd` and kills it with SIGKILL after `after` (if still running).
/// Returns whether it was killed.
fn run_and_kill(mut cmd: Command, after: Duration) -> bool {
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn wasmprov");
    let deadline = Instant::now() + after;
    loop {
        if child.try_wait().expect("wait").is_some() {
            return false;
        }
        if Instant::now() >= deadline {
            child.kill().expect("SIGKILL");
            child.wait().expect("reap");
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The request ids of the servers on the fake; panics on a duplicate.
fn servers(fake: &HetznerFake) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for s in fake.servers() {
        let id = s.labels.get(REQUEST_LABEL).cloned().unwrap_or_default();
        assert!(seen.insert(id.clone()), "two servers for request {id:?}");
    }
    seen
}

#[tokio::test(flavor = "multi_thread")]
async fn repeated_sigkills_leave_no_duplicate_and_no_leak() {
    // Every answer comes 40 ms after the server acted: kills land between
    // a create and its answer, as well as everywhere else.
    let fake = HetznerFake::start(
        "127.0.0.1:0".parse().unwrap(),
        HetznerFakeOptions {
            response_delay: Duration::from_millis(40),
            boot_delay_polls: 0,
            ..HetznerFakeOptions::default()
        },
    )
    .await
    .unwrap();
    let token = fake.token().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let (plugins, state, cache) = (
        tmp.path().join("plugins"),
        tmp.path().join("state"),
        tmp.path().join("cache"),
    );
    let out = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .args(["bundle", "--out"])
        .arg(&plugins)
        .args(["--hetzner-endpoint", &fake.url()])
        .output()
        .unwrap();
    ok(&out);
    // Only the Hetzner plugin: the group must not spill elsewhere.
    for other in ["aws-ec2", "cloud-init", "digitalocean"] {
        std::fs::remove_file(plugins.join(format!("{other}.toml"))).unwrap();
    }
    // Warm the compile cache so that a start takes milliseconds.
    ok(&wasmprov(&plugins, &state, &cache, &token, &["reconcile"])
        .output()
        .unwrap());

    let mut rng = rand::rngs::StdRng::seed_from_u64(20261121);
    let mut kills = 0;
    // Interrupted provisions whose node was made / not made, interrupted terminations.
    let mut settled = [0usize; 3];
    for (desired, rounds) in [("6", 16), ("2", 10), ("5", 10)] {
        for _ in 0..rounds {
            let after = Duration::from_millis(rng.random_range(20..300));
            let cmd = {
                let task_state = state.clone();
                let task_token = token.clone();
                let (p, c) = (plugins.clone(), cache.clone());
                let desired = desired.to_string();
                move || wasmprov(&p, &task_state, &c, &task_token, &scale_args(&desired))
            };
            let killed = tokio::task::spawn_blocking(move || run_and_kill(cmd(), after))
                .await
                .unwrap();
            kills += usize::from(killed);
            // Never a duplicate, whatever the moment of the kill.
            let _ = servers(&fake);
            // Every other restart is a plain reconcile: count what it finds.
            if killed && kills % 2 == 0 {
                let out = wasmprov(&plugins, &state, &cache, &token, &["--json", "reconcile"])
                    .output()
                    .unwrap();
                let v: serde_json::Value = serde_json::from_str(&ok(&out)).expect("JSON");
                for (i, key) in ["confirmed", "resumed", "terminated"].iter().enumerate() {
                    settled[i] += v["report"][key].as_array().map_or(0, Vec::len);
                }
                assert_eq!(
                    v["report"]["leaks"].as_array().map(Vec::len),
                    Some(0),
                    "{v}"
                );
            }
        }
        // A run to the end settles the rest.
        let text = ok(
            &wasmprov(&plugins, &state, &cache, &token, &scale_args(desired))
                .output()
                .unwrap(),
        );
        let n: usize = desired.parse().unwrap();
        assert_eq!(
            servers(&fake).len(),
            n,
            "after scaling to {desired}: {text}"
        );
    }
    assert!(kills >= 12, "only {kills} runs were killed mid-way");
    eprintln!(
        "{kills} kills; restarts found {} provisions made but unanswered, {} asked but not made, {} terminations unfinished",
        settled[0], settled[1], settled[2]
    );
    assert!(
        settled[0] + settled[1] > 0,
        "no kill landed inside a provision"
    );

    // Reconcile finds the journal and the cloud in step: no leak, nothing pending.
    let out = wasmprov(&plugins, &state, &cache, &token, &["--json", "reconcile"])
        .output()
        .unwrap();
    let text = ok(&out);
    let v: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let report = &v["report"];
    for key in [
        "leaks",
        "errors",
        "resumed",
        "confirmed",
        "abandoned",
        "vanished",
    ] {
        assert_eq!(
            report[key].as_array().map(Vec::len),
            Some(0),
            "{key}: {text}"
        );
    }
    let wanted: BTreeSet<String> = v["intents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            assert_eq!(i["state"], "active", "{i}");
            i["request_id"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(wanted, servers(&fake));
    assert_eq!(wanted.len(), 5);

    // A node of this owner no intent wants: terminated as a leak, and
    // `wasmprov history` says what, when and why.
    let labels = [
        ("wasmprov-owner".to_string(), OWNER.to_string()),
        (REQUEST_LABEL.to_string(), "stray-7".to_string()),
    ]
    .into();
    let stray = fake.plant("stray-7", &labels).unwrap().to_string();
    ok(&wasmprov(
        &plugins,
        &state,
        &cache,
        &token,
        &["reconcile", "--terminate-leaks"],
    )
    .output()
    .unwrap());
    let out = wasmprov(&plugins, &state, &cache, &token, &["--json", "history"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&ok(&out)).expect("JSON");
    let last = v.as_array().and_then(|a| a.last()).expect("an entry");
    assert_eq!(last["kind"], "leak_terminated", "{v}");
    assert_eq!(last["provider_id"], stray.as_str(), "{v}");
    assert_eq!(last["request_id"], "stray-7", "{v}");
    let table = ok(&wasmprov(&plugins, &state, &cache, &token, &["history"])
        .output()
        .unwrap());
    assert!(
        table.contains("leak_terminated") && table.contains(&stray),
        "{table}"
    );
}

/// A second process cannot take a journal that is in use.
#[test]
fn a_journal_in_use_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let state = tmp.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let _held = wasmprov_host_journal(&state);
    let out = wasmprov(&plugins, &state, tmp.path(), "t", &["reconcile"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("in use by another process"), "{err}");
}

fn wasmprov_host_journal(state: &Path) -> wasmprov_fleet::journal::Journal {
    wasmprov_fleet::journal::Journal::open(state.join("journal.redb")).unwrap()
}
