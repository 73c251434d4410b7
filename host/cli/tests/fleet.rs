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
    // Only the Hetzner plugin: the group must not spill elsewhere.
    let out = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .args(["bundle", "--only", "hetzner", "--out"])
        .arg(&plugins)
        .args(["--hetzner-endpoint", &fake.url()])
        .output()
        .unwrap();
    ok(&out);
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

    // A node this journal made that no intent wants (what a provision whose
    // caller was told it failed leaves when its node shows up later): a
    // leak, terminated once a second list shows it, and `wasmprov history`
    // says what, when and why. Beside it, a node of this owner the journal
    // cannot prove it made: an orphan, left alone.
    // A generation the journal issued for no intent it has now (what an
    // intent since forgotten leaves on its node).
    let provenance = {
        let j = wasmprov_host_journal(&state);
        let born: BTreeSet<u64> = j.all().unwrap().iter().map(|i| i.born).collect();
        let generation = (0..=j.high_water().unwrap())
            .rev()
            .find(|g| !born.contains(g) && j.issued(*g).unwrap())
            .expect("an issued generation");
        wasmprov_api::provenance::Provenance {
            journal: j.identity().to_string(),
            generation,
        }
    };
    let labels = [
        ("wasmprov-owner".to_string(), OWNER.to_string()),
        (REQUEST_LABEL.to_string(), "stray-7".to_string()),
        ("wasmprov-journal".to_string(), provenance.label_value()),
    ]
    .into();
    let stray = fake.plant("stray-7", &labels).unwrap().to_string();
    let labels = [
        ("wasmprov-owner".to_string(), OWNER.to_string()),
        (REQUEST_LABEL.to_string(), "outside-8".to_string()),
    ]
    .into();
    let outside = fake.plant("outside-8", &labels).unwrap().to_string();
    let reconcile = || {
        wasmprov(
            &plugins,
            &state,
            &cache,
            &token,
            &["--json", "reconcile", "--terminate-leaks", "--grace", "0"],
        )
        .output()
        .unwrap()
    };
    let first = reconcile();
    assert!(!first.status.success(), "an orphan is left");
    let v: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    assert_eq!(
        v["report"]["suspected"][0]["node"]["provider_id"],
        stray.as_str(),
        "{v}"
    );
    assert_eq!(
        v["report"]["orphans"][0]["node"]["provider_id"],
        outside.as_str(),
        "{v}"
    );
    let second = reconcile();
    let v: serde_json::Value = serde_json::from_slice(&second.stdout).unwrap();
    assert_eq!(v["report"]["leaks"][0]["terminated"], true, "{v}");
    assert!(fake.servers().iter().any(|s| s.id.to_string() == outside));
    ok(&wasmprov(
        &plugins,
        &state,
        &cache,
        &token,
        &[
            "reconcile",
            "--confirm-orphans",
            "--terminate-leaks",
            "--grace",
            "0",
        ],
    )
    .output()
    .unwrap());
    let out = wasmprov(&plugins, &state, &cache, &token, &["--json", "history"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_str(&ok(&out)).expect("JSON");
    let last = v
        .as_array()
        .and_then(|a| a.iter().rev().find(|e| e["kind"] == "leak_terminated"))
        .expect("an entry");
    assert_eq!(last["status"], "done", "{v}");
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

/// Plugins (Hetzner only, at `endpoint`) and state and cache directories.
fn bundle_hetzner(
    tmp: &Path,
    endpoint: &str,
) -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let (plugins, state, cache) = (tmp.join("plugins"), tmp.join("state"), tmp.join("cache"));
    ok(&Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .args(["bundle", "--only", "hetzner", "--out"])
        .arg(&plugins)
        .args(["--hetzner-endpoint", endpoint])
        .output()
        .unwrap());
    (plugins, state, cache)
}

fn json_of(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The report's repro from the CLI alone: provision, empty the journal,
/// reconcile with --terminate-leaks. The node is an orphan of another
/// journal, never terminated; reconcile says the journal holds and exits
/// non-zero until the operator adopts it.
#[tokio::test(flavor = "multi_thread")]
async fn an_emptied_journal_terminates_nothing() {
    let fake = HetznerFake::start(
        "127.0.0.1:0".parse().unwrap(),
        HetznerFakeOptions {
            boot_delay_polls: 0,
            ..HetznerFakeOptions::default()
        },
    )
    .await
    .unwrap();
    let token = fake.token().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let (plugins, state, cache) = bundle_hetzner(tmp.path(), &fake.url());
    let run = |args: &[&str]| {
        wasmprov(&plugins, &state, &cache, &token, args)
            .output()
            .unwrap()
    };
    let node = json_of(&ok_out(run(&[
        "--json",
        "provision",
        "hetzner",
        "--cpu",
        "2",
        "--memory",
        "4GiB",
        "--request-id",
        "a1",
        "--lease-secs",
        "3600",
    ])));
    let node = node.get(0).unwrap_or(&node);
    let id = node["provider_id"].as_str().unwrap().to_string();
    assert_eq!(servers(&fake), BTreeSet::from(["a1".to_string()]));

    std::fs::File::create(state.join("journal.redb")).unwrap();
    for _ in 0..3 {
        let out = run(&["--json", "reconcile", "--terminate-leaks", "--grace", "0"]);
        assert!(!out.status.success(), "a held journal is not in step");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("foreign journal"), "{err}");
        let v = json_of(&out);
        let orphans = v["report"]["orphans"].as_array().unwrap();
        assert_eq!(orphans.len(), 1, "{v}");
        assert_eq!(orphans[0]["node"]["provider_id"], id.as_str());
        assert_eq!(orphans[0]["kind"], "foreign");
        assert!(v["report"]["leaks"].as_array().unwrap().is_empty(), "{v}");
    }
    assert_eq!(servers(&fake), BTreeSet::from(["a1".to_string()]));
    let history = json_of(&ok_out(run(&["--json", "history"])));
    let kinds: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["orphaned", "held"], "{history}");

    let adopted = json_of(&ok_out(run(&[
        "--json",
        "reconcile",
        "--adopt",
        "--grace",
        "0",
    ])));
    assert_eq!(adopted["report"]["adopted"][0][1], id.as_str(), "{adopted}");
    ok_out(run(&["reconcile", "--terminate-leaks", "--grace", "0"]));
    // Adopted, it is this journal's: renewed and terminated like any other.
    let renewed = json_of(&ok_out(run(&[
        "--json",
        "renew",
        "a1",
        "--lease-secs",
        "60",
    ])));
    assert_eq!(renewed["request_id"], "a1");
    ok_out(run(&["terminate", "hetzner", &id]));
    assert!(servers(&fake).is_empty());
    let history = json_of(&ok_out(run(&["--json", "history"])));
    let last: Vec<(&str, &str)> = history
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .take(2)
        .map(|e| (e["kind"].as_str().unwrap(), e["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        last,
        [("terminated", "done"), ("lease_renewed", "done")],
        "{history}"
    );
}

/// A scale against a cloud that refuses connections made nothing: it
/// exits non-zero with the group short, and nothing is counted as a
/// member that may exist.
#[test]
fn a_scale_against_a_refused_connection_is_short_and_says_so() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let tmp = tempfile::tempdir().unwrap();
    let endpoint = format!("http://127.0.0.1:{closed}/v1");
    let (plugins, state, cache) = bundle_hetzner(tmp.path(), &endpoint);
    let mut args = scale_args("1");
    args.insert(0, "--json");
    let out = wasmprov(&plugins, &state, &cache, "t", &args)
        .output()
        .unwrap();
    assert!(!out.status.success(), "a short group is a failure");
    let v = json_of(&out);
    assert_eq!(v["scale"]["after"], 0, "{v}");
    assert!(
        v["scale"]["errors"][0]
            .as_str()
            .unwrap()
            .contains("not sent"),
        "{v}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("0 of 1 members"), "{err}");
    let intents = wasmprov_host_journal(&state).all().unwrap();
    assert!(intents.is_empty(), "{intents:?}");
}

fn ok_out(out: Output) -> Output {
    ok(&out);
    out
}

/// `wasmprov test --live` against the cloud a fleet uses, with the fleet's
/// owner id in the environment: it runs under an owner id of its own and
/// terminates none of the fleet's nodes.
#[tokio::test(flavor = "multi_thread")]
async fn a_live_conformance_run_leaves_the_fleets_nodes_alone() {
    let fake = HetznerFake::start(
        "127.0.0.1:0".parse().unwrap(),
        HetznerFakeOptions {
            boot_delay_polls: 0,
            ..HetznerFakeOptions::default()
        },
    )
    .await
    .unwrap();
    let token = fake.token().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let (plugins, state, cache) = bundle_hetzner(tmp.path(), &fake.url());
    let run = |args: &[&str]| {
        wasmprov(&plugins, &state, &cache, &token, args)
            .output()
            .unwrap()
    };
    for id in ["keep-1", "keep-2"] {
        ok_out(run(&[
            "provision",
            "hetzner",
            "--cpu",
            "2",
            "--memory",
            "4GiB",
            "--request-id",
            id,
        ]));
    }
    let out = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .arg("--plugin-dir")
        .arg(&plugins)
        .args(["--owner", OWNER, "test", "hetzner", "--live"])
        .env("XDG_CACHE_HOME", &cache)
        .env("HCLOUD_TOKEN", &token)
        .env("WASMPROV_OWNER", OWNER)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("under owner id wasmprov-test-"), "{err}");
    assert_eq!(
        servers(&fake),
        BTreeSet::from(["keep-1".to_string(), "keep-2".to_string()]),
        "stdout: {}\nstderr: {err}",
        String::from_utf8_lossy(&out.stdout)
    );
}

/// `wasmprov scale --group-file`: capacity groups in Alien's JSON form
/// (camelCase, CPU as a string, storage and GPUs in the profile) scaled
/// against the Hetzner fake; the fake's servers show what was asked for.
#[tokio::test(flavor = "multi_thread")]
async fn scale_takes_a_group_in_aliens_json_form() {
    let fake = HetznerFake::start(
        "127.0.0.1:0".parse().unwrap(),
        HetznerFakeOptions {
            boot_delay_polls: 0,
            ..HetznerFakeOptions::default()
        },
    )
    .await
    .unwrap();
    let token = fake.token().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let (plugins, state, cache) = bundle_hetzner(tmp.path(), &fake.url());
    let run = |args: &[&str]| {
        wasmprov(&plugins, &state, &cache, &token, args)
            .output()
            .unwrap()
    };
    let file = |name: &str, json: &str| {
        let path = tmp.path().join(name);
        std::fs::write(&path, json).unwrap();
        path.to_string_lossy().to_string()
    };

    // A machine profile: 2 vCPUs, 4 GiB, 30 GiB of ephemeral storage.
    let web = file(
        "web.json",
        r#"{"groupId": "web",
            "profile": {"cpu": "2.0", "memoryBytes": 4294967296, "ephemeralStorageBytes": 32212254720},
            "minSize": 1, "maxSize": 3}"#,
    );
    let v = json_of(&ok_out(run(&[
        "--json",
        "scale",
        "--desired",
        "2",
        "--group-file",
        &web,
    ])));
    assert_eq!(v["scale"]["after"], 2, "{v}");
    let servers = fake.servers();
    assert_eq!(servers.len(), 2);
    for s in &servers {
        assert_eq!(s.labels["wasmprov-group"], "web", "{s:?}");
        // Hetzner's types with at least 2 vCPUs, 4 GiB and 30 GiB of disk.
        assert!(
            ["cx22", "cax11", "cpx21", "cx32", "cax21"].contains(&s.server_type.as_str()),
            "{s:?}"
        );
    }
    // Alien's minSize holds: desired 0 keeps one.
    let v = json_of(&ok_out(run(&[
        "--json",
        "scale",
        "--desired",
        "0",
        "--group-file",
        &web,
    ])));
    assert_eq!(v["scale"]["after"], 1, "{v}");
    assert_eq!(fake.servers().len(), 1);

    // An instance type pinned: only that type is asked for.
    let pinned = file(
        "pinned.json",
        r#"{"groupId": "pinned", "instanceType": "cpx31", "minSize": 0, "maxSize": 2}"#,
    );
    let v = json_of(&ok_out(run(&[
        "--json",
        "scale",
        "--desired",
        "1",
        "--group-file",
        &pinned,
    ])));
    assert_eq!(v["scale"]["added"][0]["plugin"], "hetzner", "{v}");
    let made: Vec<_> = fake
        .servers()
        .into_iter()
        .filter(|s| s.labels.get("wasmprov-group").map(String::as_str) == Some("pinned"))
        .collect();
    assert_eq!(made.len(), 1);
    assert_eq!(made[0].server_type, "cpx31");

    // Alien's GPU pool: no Hetzner type has an nvidia-a10g; nothing made.
    let gpu = file(
        "gpu.json",
        r#"{"groupId": "gpu", "profile": {"cpu": "4.0", "memoryBytes": 17179869184,
            "ephemeralStorageBytes": 214748364800, "gpu": {"type": "nvidia-a10g", "count": 1}},
            "minSize": 0, "maxSize": 2}"#,
    );
    let out = run(&["--json", "scale", "--desired", "1", "--group-file", &gpu]);
    assert!(!out.status.success(), "nothing offers the GPU");
    let v = json_of(&out);
    assert_eq!(v["scale"]["after"], 0, "{v}");
    assert!(
        v["scale"]["errors"]
            .to_string()
            .contains("no plugin offers"),
        "{v}"
    );

    // An invalid value is refused before any plugin is asked, saying what to fix.
    let bad = file(
        "bad.json",
        r#"{"groupId": "bad", "profile": {"cpu": "two", "memoryBytes": 1, "ephemeralStorageBytes": 0},
            "minSize": 0, "maxSize": 1}"#,
    );
    let out = run(&["scale", "--desired", "1", "--group-file", &bad]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("profile.cpu \"two\" is not a number"), "{err}");
    // The file describes the machines: shape options beside it are a usage error.
    let out = run(&[
        "scale",
        "--desired",
        "1",
        "--group-file",
        &web,
        "--cpu",
        "2",
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fake.servers().len(), 2, "nothing else was made");
}
