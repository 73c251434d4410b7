//! The `wasmprov` binary driven as a user would, against the fake cloud.

use std::process::{Command, Output};

use wasmprov_fake::{HetznerFake, HetznerFakeOptions};

mod probe;

fn wasmprov(dir: &std::path::Path, token: Option<&str>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_wasmprov"));
    cmd.arg("--plugin-dir")
        .arg(dir)
        .arg("--owner")
        .arg("cli-test")
        .arg("--no-cache");
    cmd.args(args)
        .env_remove("HCLOUD_TOKEN")
        .env_remove("WASMPROV_PLUGIN_DIR");
    if let Some(t) = token {
        cmd.env("HCLOUD_TOKEN", t);
    }
    cmd.output().expect("run wasmprov")
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

#[tokio::test(flavor = "multi_thread")]
async fn provision_describe_terminate_through_the_cli() {
    let fake = HetznerFake::start(
        "127.0.0.1:0".parse().unwrap(),
        HetznerFakeOptions::default(),
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let url = fake.url();
    let out = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .args(["bundle", "--all", "--out"])
        .arg(d)
        .args(["--hetzner-endpoint", &url])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let token = Some(fake.token());

    let plugins = json(&wasmprov(d, token, &["--json", "plugins"]));
    let names: Vec<&str> = plugins["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["aws-ec2", "cloud-init", "digitalocean", "hetzner"]);
    assert_eq!(plugins["errors"].as_array().unwrap().len(), 0);

    let info = json(&wasmprov(d, token, &["--json", "inspect", "hetzner"]));
    let text = info.to_string();
    assert!(
        !text.contains(fake.token()),
        "inspect must not show the secret: {text}"
    );
    assert_eq!(info["plugin"]["http_allow"][0], url.trim_end_matches("/v1"));

    let price = json(&wasmprov(
        d,
        None,
        &[
            "--json", "price", "hetzner", "--cpu", "4", "--memory", "16GiB",
        ],
    ));
    assert!(price["hourly_usd"].as_f64().unwrap() > 0.0);
    assert!(price["instance_type"].is_string());

    let node = json(&wasmprov(
        d,
        token,
        &[
            "--json",
            "provision",
            "hetzner",
            "--cpu",
            "2",
            "--memory",
            "4GiB",
            "--zone",
            "nbg1",
            "--request-id",
            "cli-1",
            "--label",
            "role=worker",
        ],
    ));
    let id = node["provider_id"].as_str().unwrap().to_string();
    assert_eq!(node["zone"], "nbg1");
    assert_eq!(node["labels"]["role"], "worker");
    assert_eq!(node["capacity_type"], "on_demand");
    let again = json(&wasmprov(
        d,
        token,
        &[
            "--json",
            "provision",
            "hetzner",
            "--cpu",
            "2",
            "--memory",
            "4GiB",
            "--zone",
            "nbg1",
            "--request-id",
            "cli-1",
            "--label",
            "role=worker",
        ],
    ));
    assert_eq!(
        again["provider_id"],
        id.as_str(),
        "same request id, same node"
    );
    assert_eq!(fake.servers().len(), 1);
    // The same id for another shape is refused, without any journal.
    let reused = wasmprov(
        d,
        token,
        &[
            "--json",
            "provision",
            "hetzner",
            "--cpu",
            "4",
            "--memory",
            "8GiB",
            "--zone",
            "nbg1",
            "--request-id",
            "cli-1",
            "--label",
            "role=worker",
        ],
    );
    assert!(!reused.status.success());
    let err: serde_json::Value = serde_json::from_slice(&reused.stdout).unwrap();
    assert_eq!(err["error"]["kind"], "conflict", "{err}");
    assert_eq!(fake.servers().len(), 1);

    let nodes = json(&wasmprov(d, token, &["--json", "describe", "hetzner"]));
    assert_eq!(nodes.as_array().unwrap().len(), 1);
    assert_eq!(nodes[0]["provider_id"], id.as_str());

    let human = wasmprov(d, token, &["describe", "hetzner"]);
    assert!(String::from_utf8_lossy(&human.stdout).contains(&id));

    // Contract 0.2 through the CLI: one node, the catalogue, the new shape
    // fields and boot data.
    let got = json(&wasmprov(d, token, &["--json", "get", "hetzner", &id]));
    assert_eq!(got["provider_id"], id.as_str());
    assert!(got["raw_state"].is_string(), "{got}");
    assert!(
        ["pending", "running"].contains(&got["status"].as_str().unwrap()),
        "{got}"
    );
    let missing = wasmprov(d, token, &["--json", "get", "hetzner", "424242"]);
    assert!(!missing.status.success());
    let err: serde_json::Value = serde_json::from_slice(&missing.stdout).unwrap();
    assert_eq!(err["error"]["kind"], "not_found");
    let offerings = json(&wasmprov(d, None, &["--json", "offerings", "hetzner"]));
    let find = |t: &str| {
        offerings
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["instance_type"] == t)
            .cloned()
            .unwrap_or_else(|| panic!("{t} in {offerings}"))
    };
    assert_eq!(find("cx22")["arch"], "x86_64");
    assert_eq!(find("cx22")["disk_bytes"], 40u64 << 30);
    assert_eq!(find("cax11")["arch"], "arm64");
    let table = wasmprov(d, None, &["offerings", "hetzner"]);
    assert!(String::from_utf8_lossy(&table.stdout).contains("cax11"));
    // 2 vCPU / 4 GiB: ARM is as cheap and sorts first; --arch x86_64 never lands there.
    let cheapest = json(&wasmprov(
        d,
        None,
        &[
            "--json", "price", "hetzner", "--cpu", "2", "--memory", "4GiB",
        ],
    ));
    assert_eq!(cheapest["instance_type"], "cax11");
    let user_data = d.join("user-data.yaml");
    std::fs::write(
        &user_data,
        "#cloud-config\nruncmd: [[join, --token, tok-cli-x86]]\n",
    )
    .unwrap();
    let x86 = json(&wasmprov(
        d,
        token,
        &[
            "--json",
            "provision",
            "hetzner",
            "--cpu",
            "2",
            "--memory",
            "4GiB",
            "--arch",
            "x86_64",
            "--image",
            "debian-12",
            "--user-data",
            user_data.to_str().unwrap(),
            "--request-id",
            "cli-x86",
        ],
    ));
    assert_eq!(x86["instance_type"], "cx22");
    assert_eq!(x86["arch"], "x86_64");
    let made = fake
        .servers()
        .into_iter()
        .find(|s| s.id.to_string() == x86["provider_id"].as_str().unwrap())
        .unwrap();
    assert!(
        made.user_data
            .as_deref()
            .is_some_and(|u| u.contains("tok-cli-x86")),
        "{made:?}"
    );
    // SSH keys: registered in the project once, put on the server.
    let key_line = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGw8 ops@example";
    let keyed = json(&wasmprov(
        d,
        token,
        &[
            "--json",
            "provision",
            "hetzner",
            "--cpu",
            "2",
            "--memory",
            "4GiB",
            "--ssh-key",
            key_line,
            "--request-id",
            "cli-key",
        ],
    ));
    let made = fake
        .servers()
        .into_iter()
        .find(|s| s.id.to_string() == keyed["provider_id"].as_str().unwrap())
        .unwrap();
    assert_eq!(made.ssh_keys, [key_line]);
    let not_a_key = wasmprov(
        d,
        token,
        &[
            "provision",
            "hetzner",
            "--cpu",
            "2",
            "--memory",
            "4GiB",
            "--ssh-key",
            "ssh-rsa !!",
        ],
    );
    assert!(!not_a_key.status.success());
    assert!(String::from_utf8_lossy(&not_a_key.stderr).contains("ssh_keys"));
    json(&wasmprov(
        d,
        token,
        &[
            "--json",
            "terminate",
            "hetzner",
            keyed["provider_id"].as_str().unwrap(),
        ],
    ));
    let bad_arch = wasmprov(
        d,
        None,
        &[
            "price", "hetzner", "--cpu", "2", "--memory", "4GiB", "--arch", "sparc",
        ],
    );
    assert!(!bad_arch.status.success());
    assert!(String::from_utf8_lossy(&bad_arch.stderr).contains("architecture"));
    json(&wasmprov(
        d,
        token,
        &[
            "--json",
            "terminate",
            "hetzner",
            x86["provider_id"].as_str().unwrap(),
        ],
    ));

    let done = json(&wasmprov(
        d,
        token,
        &["--json", "terminate", "hetzner", &id],
    ));
    assert_eq!(done["terminated"], id.as_str());
    // A node already gone is success (the contract's not_found), with a note.
    let gone = json(&wasmprov(
        d,
        token,
        &["--json", "terminate", "hetzner", &id],
    ));
    assert_eq!(gone["already_gone"], true, "{gone}");
    // A node that is not there is exit 66, with the one-line error.
    let missing = wasmprov(d, token, &["--json", "get", "hetzner", &id]);
    assert_eq!(missing.status.code(), Some(66));
    let err: serde_json::Value = serde_json::from_slice(&missing.stdout).unwrap();
    assert_eq!(err["error"]["kind"], "not_found");
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: not found"), "{stderr}");

    let nodes = json(&wasmprov(d, token, &["--json", "describe", "hetzner"]));
    assert_eq!(nodes.as_array().unwrap().len(), 0);

    // Without the token the plugin says what is missing.
    let out = wasmprov(d, None, &["describe", "hetzner"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("token"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The lock recorded the bundled component; any drift is reported.
    let ok = wasmprov(d, None, &["lock", "--check"]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let mut bytes = std::fs::read(d.join("hetzner.wasm")).unwrap();
    bytes.extend_from_slice(b"\0\x0atampered");
    std::fs::write(d.join("hetzner.wasm"), &bytes).unwrap();
    let drift = wasmprov(d, None, &["--json", "lock", "--check"]);
    assert!(!drift.status.success());
    let report: serde_json::Value = serde_json::from_slice(&drift.stdout).unwrap();
    assert_eq!(report["drift"][0]["drift"], "changed");
    assert_eq!(report["drift"][0]["plugin"], "hetzner");
    // The manifest's pin is stale too, and said so.
    assert_eq!(report["drift"][1]["drift"], "pinned");
    assert_eq!(report["drift"][1]["file"], "hetzner.toml");
}

#[test]
fn errors_are_one_line_and_non_zero() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    for args in [vec!["plugins"], vec!["describe", "hetzner"]] {
        let out = wasmprov(&missing, None, &args);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains("does not exist"), "{stderr}");
    }
    std::fs::write(
        dir.path().join("bad.toml"),
        "name = \"bad\"\ncomponent = \"bad.wasm\"\nextra = 1\n",
    )
    .unwrap();
    let out = wasmprov(dir.path(), None, &["plugins"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.toml") && stderr.contains("extra"),
        "{stderr}"
    );
    let out = wasmprov(
        dir.path(),
        None,
        &["price", "ghost", "--cpu", "1", "--memory", "1GiB"],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no plugin \"ghost\""));
    let out = wasmprov(
        dir.path(),
        None,
        &["price", "ghost", "--cpu", "1", "--memory", "lots"],
    );
    assert!(!out.status.success());
    // Ids follow one syntax: an empty or rewritten-looking one is refused
    // before any plugin loads, naming the rule.
    for (args, what) in [
        (
            vec!["provision", "ghost", "--request-id", ""],
            "request id \"\"",
        ),
        (
            vec!["provision", "ghost", "--request-id", "Web/1"],
            "request id \"Web/1\"",
        ),
    ] {
        let out = wasmprov(dir.path(), None, &args);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(what) && stderr.contains("a-z"), "{stderr}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .args(["--owner", "Team A", "plugins"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("owner id \"Team A\""), "{stderr}");
}

#[test]
fn demo_runs_to_the_end() {
    let out = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .arg("demo")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("demo finished"), "{stdout}");
    assert!(stdout.contains("demo-1 -> server"), "{stdout}");
    assert!(stdout.contains("not found, as it should be"), "{stdout}");
}

fn moto_available() -> bool {
    Command::new("python3")
        .args(["-c", "import moto, moto.server"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `wasmprov test` against each bundled plugin, with and without faults:
/// the acceptance bar for a plugin, as CI runs it.
#[test]
fn every_bundled_plugin_passes_wasmprov_test_with_and_without_faults() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .args(["bundle", "--all", "--out"])
        .arg(d)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut plugins = vec!["hetzner", "cloud-init", "digitalocean"];
    if moto_available() {
        // Its retries within a call wait a share of 50 ms, 100 ms … rather
        // than of 1 s, 2 s …: the same retries, without minutes of sleeping
        // under injected faults.
        let manifest = d.join("aws-ec2.toml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        assert!(text.contains("[config]\n"), "{text}");
        std::fs::write(
            &manifest,
            text.replacen("[config]\n", "[config]\nretry_base_ms = \"50\"\n", 1),
        )
        .unwrap();
        plugins.push("aws-ec2");
    } else {
        eprintln!("moto is not installed (pip install 'moto[server]'): aws-ec2 is not tested here");
    }
    // Every case in a thread of its own: the runs are mostly waiting on
    // fakes and injected faults, so side by side they take about as long
    // as the slowest case, not the sum.
    let cases: Vec<(&str, Option<&str>)> = plugins
        .iter()
        .flat_map(|plugin| {
            [
                None,
                Some("default"),
                Some("429=0.2,reset=0.2,capacity=0.1,quota=0.1,seed=11"),
            ]
            .map(|faults| (*plugin, faults))
        })
        .collect();
    let failures: Vec<String> = std::thread::scope(|scope| {
        let runs: Vec<_> = cases
            .iter()
            .map(|&(plugin, faults)| {
                scope.spawn(move || {
                    let mut args = vec!["test", plugin];
                    if let Some(f) = faults {
                        args.extend(["--faults", f]);
                    }
                    let out = wasmprov(d, None, &args);
                    let stdout = String::from_utf8_lossy(&out.stdout);
                    let ok = out.status.success()
                        && stdout.contains("PASSED")
                        && (faults.is_none() || stdout.contains("faults injected:"));
                    (!ok).then(|| {
                        format!(
                            "wasmprov test {plugin} (faults {faults:?}) failed\nstdout: {stdout}\nstderr: {}",
                            String::from_utf8_lossy(&out.stderr)
                        )
                    })
                })
            })
            .collect();
        runs.into_iter()
            .filter_map(|r| r.join().expect("a case panicked"))
            .collect()
    });
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // Every bundled plugin's fitting offerings for one shape, cheapest
    // first; each plugin's cheapest is its own price hint.
    let ranking = json(&wasmprov(
        d,
        None,
        &["--json", "rank", "--cpu", "2", "--memory", "4GiB"],
    ));
    let offers = ranking["offers"].as_array().unwrap();
    let prices: Vec<f64> = offers
        .iter()
        .map(|o| o["hint"]["hourly_usd"].as_f64().unwrap())
        .collect();
    assert!(prices.windows(2).all(|w| w[0] <= w[1]), "{prices:?}");
    for plugin in ["aws-ec2", "cloud-init", "digitalocean", "hetzner"] {
        let first = offers
            .iter()
            .find(|o| o["plugin"] == plugin)
            .unwrap_or_else(|| panic!("{plugin} offers nothing: {ranking}"));
        let hint = json(&wasmprov(
            d,
            None,
            &["--json", "price", plugin, "--cpu", "2", "--memory", "4GiB"],
        ));
        assert_eq!(first["hint"], hint, "{plugin}");
    }
    let x86 = json(&wasmprov(
        d,
        None,
        &[
            "--json", "rank", "--cpu", "2", "--memory", "4GiB", "--arch", "x86_64",
        ],
    ));
    assert!(
        x86["offers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| !["cax11", "cax21"].contains(&o["hint"]["instance_type"].as_str().unwrap())),
        "{x86}"
    );
    // Warm instances answering the price hints give the same ranking.
    let reused = json(&wasmprov(
        d,
        None,
        &[
            "--json",
            "--price-hint-reuse",
            "100",
            "rank",
            "--cpu",
            "2",
            "--memory",
            "4GiB",
        ],
    ));
    assert_eq!(reused["offers"], ranking["offers"]);
    // The JSON report names every rule.
    let report = json(&wasmprov(d, None, &["--json", "test", "hetzner"]));
    assert_eq!(report["passed"], true);
    let rules: Vec<&str> = report["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["rule"].as_str())
        .collect();
    for rule in [
        "provision.idempotent",
        "describe.no-foreign",
        "leak.none",
        "grants.inside",
    ] {
        assert!(rules.contains(&rule), "{rules:?}");
    }
}

#[test]
fn wasmprov_test_names_what_is_wrong_with_its_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .args(["bundle", "--out"])
        .arg(d)
        .output()
        .unwrap();
    assert!(out.status.success());
    for (args, says) in [
        (vec!["test", "nope"], "no plugin \"nope\""),
        (
            vec!["test", "hetzner", "--fake", "azure"],
            "unknown fake \"azure\"",
        ),
        (
            vec!["test", "hetzner", "--faults", "teapot=1"],
            "unknown fault \"teapot\"",
        ),
        (
            vec!["test", "hetzner", "--replay", "/nonexistent/c.json"],
            "reading cassette",
        ),
        (
            vec!["test", "--component", "hetzner.wasm"],
            "--manifest <MANIFEST>",
        ),
        (
            vec![
                "test",
                "--component",
                "nope.wasm",
                "--manifest",
                "hetzner.toml",
            ],
            "no component file nope.wasm",
        ),
        (
            vec![
                "test",
                "ec2",
                "--component",
                "hetzner.wasm",
                "--manifest",
                "hetzner.toml",
            ],
            "names plugin \"hetzner\", not \"ec2\"",
        ),
        (
            vec!["test", "hetzner", "--fake-url", "http://192.0.2.1:80"],
            "must listen on loopback",
        ),
        (vec!["test", "hetzner", "--fake-command", "true"], "exited"),
    ] {
        let out = wasmprov_in(d, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    // A component file and its manifest, outside any plugin directory.
    let out = wasmprov_in(
        d,
        &[
            "test",
            "--component",
            "hetzner.wasm",
            "--manifest",
            "hetzner.toml",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("PASSED"));
}

/// `wasmprov --plugin-dir DIR` run in `dir` (relative paths are taken
/// from there).
fn wasmprov_in(dir: &std::path::Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .current_dir(dir)
        .args(["--plugin-dir", ".", "--no-cache"])
        .args(args)
        .env_remove("WASMPROV_PLUGIN_DIR")
        .output()
        .unwrap()
}

/// `wasmprov new` makes a crate, outside any workspace, that builds (also
/// once moved elsewhere) and passes its own test unchanged: the component
/// and its fake are built, and this `wasmprov` binary runs the suite against
/// the fake it starts by command, plainly and under faults. The crate does
/// not compile the host. It shares this workspace's target directory, so
/// that only the new crate, its fake and its component compile here.
#[test]
fn a_scaffolded_plugin_builds_and_passes_its_test_unchanged() {
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf();
    let dir = tempfile::tempdir().unwrap();
    let made = dir.path().join("made-here");
    let out = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .args(["new", "acme-cloud", "--path"])
        .arg(&made)
        .arg("--sdk")
        .arg(&workspace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Moved after it was made: nothing in it depends on where it was made.
    let crate_dir = dir.path().join("moved").join("acme-cloud");
    std::fs::create_dir_all(crate_dir.parent().unwrap()).unwrap();
    std::fs::rename(&made, &crate_dir).unwrap();
    let manifest = std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
    assert!(!manifest.contains("testkit") && !manifest.contains("wasmprov-host"));
    // Versions, and the checkout only in the [patch.crates-io] section.
    let (deps, patch) = manifest.split_once("[patch.crates-io]").unwrap();
    let deps: String = deps.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(deps.contains("wasmprov-guest = \"") && deps.contains("wasmprov-fake = \""));
    assert!(!deps.contains(workspace.to_str().unwrap()), "{manifest}");
    assert!(patch.contains(workspace.join("guest-sdk").to_str().unwrap()));

    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace.join("target"), std::path::PathBuf::from);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .arg("test")
        .current_dir(&crate_dir)
        .env("CARGO_TARGET_DIR", &target)
        .env("WASMPROV", env!("CARGO_BIN_EXE_wasmprov"))
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cargo test of the new crate failed\nstdout: {stdout}\nstderr: {stderr}"
    );
    for test in ["passes_the_conformance_suite", "passes_under_faults"] {
        assert!(stdout.contains(&format!("{test} ... ok")), "{stdout}");
    }
    // The host was not compiled for it: no wasmtime in what cargo built.
    assert!(!stderr.contains("Compiling wasmtime"), "{stderr}");
    assert!(!stderr.contains("Compiling wasmprov-host"), "{stderr}");

    // Without the binary, the test says what to do.
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args([
            "test",
            "--test",
            "conformance",
            "passes_the_conformance_suite",
        ])
        .current_dir(&crate_dir)
        .env("CARGO_TARGET_DIR", &target)
        .env("WASMPROV", dir.path().join("no-such-wasmprov"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success());
    assert!(stdout.contains("no `wasmprov` binary"), "{stdout}");
}

/// `wasmprov new NAME --template rest` makes a REST cloud's plugin (on the
/// SDK's REST layer, in at most 80 counted lines) and its fake, which build
/// and pass their conformance test unchanged, plainly and under faults,
/// without compiling the host.
#[test]
fn a_scaffolded_rest_plugin_builds_and_passes_its_test_unchanged() {
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf();
    let dir = tempfile::tempdir().unwrap();
    let crate_dir = dir.path().join("rest-cloud");
    let out = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .args(["new", "rest-cloud", "--template", "rest", "--path"])
        .arg(&crate_dir)
        .arg("--sdk")
        .arg(&workspace)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Counted as docs/BENCHMARKS.md section 7 counts: no blank or comment
    // lines, the type table's rows apart.
    let lib = std::fs::read_to_string(crate_dir.join("src/lib.rs")).unwrap();
    let (mut counted, mut in_table) = (0, false);
    for line in lib.lines().map(str::trim) {
        if line.is_empty() || line.starts_with("//") {
            continue;
        }
        if in_table && line != "];" {
            continue;
        }
        in_table = line.ends_with(": &[Entry] = &[");
        counted += 1;
    }
    assert!(
        counted <= 80,
        "the REST template is {counted} counted lines"
    );
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace.join("target"), std::path::PathBuf::from);
    let out = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .arg("test")
        .current_dir(&crate_dir)
        .env("CARGO_TARGET_DIR", &target)
        .env("WASMPROV", env!("CARGO_BIN_EXE_wasmprov"))
        .env("XDG_CACHE_HOME", dir.path().join("cache"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "cargo test of the REST crate failed\nstdout: {stdout}\nstderr: {stderr}"
    );
    for test in ["passes_the_conformance_suite", "passes_under_faults"] {
        assert!(stdout.contains(&format!("{test} ... ok")), "{stdout}");
    }
    assert!(!stderr.contains("Compiling wasmtime"), "{stderr}");
}

/// Hardening: text a plugin answers reaches the terminal escaped. The
/// probe guest (built by this test) answers a node whose provider id,
/// instance type and zone are its configured text — a screen clear, an
/// OSC 52 clipboard write, a carriage return and a bidi override — and an
/// error saying the same. Tables and the `error:` line show them escaped;
/// `--json` keeps them exact.
#[test]
fn escape_sequences_from_a_plugin_never_reach_the_terminal_raw() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = "\u{1b}[2J\u{1b}]52;c;ZWNobyBwd25lZA==\u{7}over\rwrite\u{202e}txt";
    probe::install(
        d,
        "[config]\ntext = \"\\u001b[2J\\u001b]52;c;ZWNobyBwd25lZA==\\u0007over\\rwrite\\u202etxt\"\n",
    );
    let raw = |b: &[u8]| {
        let s = String::from_utf8_lossy(b);
        s.contains('\u{1b}') || s.contains('\u{7}') || s.contains('\r') || s.contains('\u{202e}')
    };
    let provision = |mode: &str, json: bool| {
        let mut args = vec![
            "provision",
            "probe",
            "--cpu",
            "1",
            "--memory",
            "1GiB",
            "--label",
        ];
        let label = format!("mode={mode}");
        args.push(&label);
        if json {
            args.push("--json");
        }
        wasmprov(d, None, &args)
    };

    let out = provision("text", false);
    assert!(out.status.success(), "{out:?}");
    assert!(!raw(&out.stdout) && !raw(&out.stderr), "{out:?}");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("\\x1b[2J"), "{shown}");
    assert!(shown.contains("\\x07over\\x0dwrite"), "{shown}");
    assert!(shown.contains("\\u{202e}"), "{shown}");

    // JSON is exact: the same bytes the plugin answered.
    let node = json(&provision("text", true));
    for field in ["provider_id", "instance_type", "zone"] {
        assert_eq!(node[field], text, "{field}");
    }

    let out = provision("text-error", false);
    assert!(!out.status.success());
    assert!(!raw(&out.stdout) && !raw(&out.stderr), "{out:?}");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("error:") && said.contains("the probe says: \\x1b[2J\\x1b]52;c;"),
        "{said}"
    );
}

/// `bundle` writes hetzner unless told otherwise (the one plugin that
/// works with a token alone, against `wasmprov fake hetzner`), so
/// `scale` and `reconcile` succeed right after it; `--only` and `--all`
/// write others, each with what it still needs; the others cannot list
/// their nodes here, and a reconcile over them says so and fails.
#[tokio::test(flavor = "multi_thread")]
async fn bundle_writes_what_works_unless_told_and_scale_and_reconcile_succeed() {
    let fake = HetznerFake::start(
        "127.0.0.1:0".parse().unwrap(),
        HetznerFakeOptions {
            boot_delay_polls: 0,
            ..HetznerFakeOptions::default()
        },
    )
    .await
    .unwrap();
    let url = fake.url();
    let token = Some(fake.token());
    let tmp = tempfile::tempdir().unwrap();
    let bundle = |dir: &std::path::Path, extra: &[&str]| {
        let mut args = vec!["--json", "bundle", "--out", dir.to_str().unwrap()];
        args.extend(extra);
        wasmprov(dir, None, &args)
    };

    let d = tmp.path().join("default");
    let written = json(&bundle(&d, &["--hetzner-endpoint", &url]));
    assert_eq!(written["plugins"], serde_json::json!(["hetzner"]));
    assert_eq!(
        written["not_written"],
        serde_json::json!(["aws-ec2", "cloud-init", "digitalocean"])
    );
    assert_eq!(
        written["needs"]["hetzner"],
        serde_json::json!([{ "need": "$HCLOUD_TOKEN", "met": false }])
    );
    let mut files: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| !f.starts_with('.'))
        .collect();
    files.sort();
    assert_eq!(files, ["hetzner.toml", "hetzner.wasm", "wasmprov.lock"]);
    // All of them: the three without their credentials or program make a
    // reconcile fail, each named (the cloud is still empty here).
    let all = tmp.path().join("all");
    let written = json(&bundle(&all, &["--all", "--hetzner-endpoint", &url]));
    assert_eq!(written["plugins"].as_array().unwrap().len(), 4);
    let all_state = tmp.path().join("all-state");
    let out = wasmprov(
        &all,
        token,
        &["--state-dir", all_state.to_str().unwrap(), "reconcile"],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(said.contains("3 thing(s) could not be settled"), "{said}");
    for name in ["aws-ec2", "cloud-init", "digitalocean"] {
        assert!(said.contains(&format!("{name}: describe failed")), "{said}");
    }

    let state = tmp.path().join("state");
    let state_arg = ["--state-dir", state.to_str().unwrap()];
    let scaled = json(&wasmprov(
        &d,
        token,
        &[
            &state_arg[..],
            &[
                "--json",
                "scale",
                "web",
                "--desired",
                "1",
                "--cpu",
                "1",
                "--memory",
                "1GiB",
            ],
        ]
        .concat(),
    ));
    assert_eq!(fake.servers().len(), 1, "{scaled}");
    json(&wasmprov(
        &d,
        token,
        &[&state_arg[..], &["--json", "reconcile"]].concat(),
    ));

    // Named ones, in the order of the list, and what each still needs.
    let some = tmp.path().join("some");
    let written = json(&bundle(&some, &["--only", "digitalocean", "aws-ec2"]));
    assert_eq!(
        written["plugins"],
        serde_json::json!(["aws-ec2", "digitalocean"])
    );
    let ec2_needs = written["needs"]["aws-ec2"].to_string();
    for need in ["$AWS_ACCESS_KEY_ID", "$AWS_SECRET_ACCESS_KEY", "image_id"] {
        assert!(ec2_needs.contains(need), "{ec2_needs}");
    }
    let text = wasmprov(
        &some,
        None,
        &[
            "bundle",
            "--out",
            some.to_str().unwrap(),
            "--only",
            "cloud-init",
        ],
    );
    let said = String::from_utf8_lossy(&text.stdout);
    assert!(
        said.contains("cloud-init needs the program /usr/local/bin/wasmprov-nodes")
            && said.contains("not written: hetzner, aws-ec2, digitalocean"),
        "{said}"
    );

    // Usage errors, nothing written.
    let none = tmp.path().join("none");
    for extra in [
        &["--only", "azure"][..],
        &["--only", "aws-ec2", "--hetzner-endpoint", &url],
        &["--only", "hetzner", "--all"],
    ] {
        let out = bundle(&none, extra);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {out:?}");
        assert!(!none.exists(), "{extra:?}");
    }
}

/// A command about one plugin reads and compiles that plugin alone: with
/// every bundled plugin and a broken manifest beside it, `price hetzner`
/// succeeds and its log shows one plugin loaded, while `plugins` loads
/// them all and reports the broken one.
#[test]
fn a_command_about_one_plugin_loads_that_plugin_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    json(&wasmprov(
        d,
        None,
        &["--json", "bundle", "--all", "--out", d.to_str().unwrap()],
    ));
    std::fs::write(
        d.join("broken.toml"),
        "name = \"broken\"\ncomponent = \"missing.wasm\"\n",
    )
    .unwrap();
    let logged = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_wasmprov"))
            .arg("--plugin-dir")
            .arg(d)
            .arg("--no-cache")
            .args(args)
            .env("WASMPROV_LOG", "wasmprov_host=info")
            .env_remove("WASMPROV_LOG_FORMAT")
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    let loaded = |out: &Output| -> Vec<String> {
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.contains("plugin loaded"))
            .map(str::to_string)
            .collect()
    };
    let out = logged(&["price", "hetzner", "--cpu", "2", "--memory", "4GiB"]);
    assert!(out.status.success(), "{out:?}");
    let one = loaded(&out);
    assert_eq!(one.len(), 1, "{one:?}");
    assert!(one[0].contains("plugin=hetzner"), "{one:?}");
    let log = String::from_utf8_lossy(&out.stderr);
    for other in ["aws-ec2", "cloud-init", "digitalocean", "broken"] {
        assert!(!log.contains(other), "{other} in {log}");
    }
    let out = logged(&["plugins"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(loaded(&out).len(), 4, "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("broken.toml"));
}

/// A replay runs no programs: a cassette holds HTTP only, so a plugin's
/// exec in a replay is refused instead of reaching the operator's real
/// create/list/destroy program (and through it the real cloud).
#[test]
fn a_replay_runs_none_of_the_plugins_programs() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = wasmprov(
        d,
        None,
        &[
            "bundle",
            "--only",
            "cloud-init",
            "--out",
            d.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{out:?}");
    // The operator's program: it notes every run.
    let ran = d.join("ran.log");
    let program = d.join("nodes.sh");
    std::fs::write(
        &program,
        format!("#!/bin/sh\necho \"$@\" >> {}\necho '[]'\n", ran.display()),
    )
    .unwrap();
    std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
    let manifest = d.join("cloud-init.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    assert!(text.contains("/usr/local/bin/wasmprov-nodes"), "{text}");
    std::fs::write(
        &manifest,
        text.replace("/usr/local/bin/wasmprov-nodes", program.to_str().unwrap()),
    )
    .unwrap();

    let cassette = d.join("c.json");
    let out = wasmprov(
        d,
        None,
        &["test", "cloud-init", "--record", cassette.to_str().unwrap()],
    );
    assert!(out.status.success(), "recorded against the stubs: {out:?}");
    assert!(!ran.exists(), "recording runs the stubs, not the program");

    let out = wasmprov(
        d,
        None,
        &["test", "cloud-init", "--replay", cassette.to_str().unwrap()],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!ran.exists(), "the program ran in a replay: {stdout}");
    assert!(!out.status.success(), "{stdout}");
    assert!(stdout.contains("a replay runs no programs"), "{stdout}");
}

/// Issue 26, finding 6: what gRPC refuses is a usage error here too (exit
/// 2), before any plugin is loaded: port 0, an empty subnet or address, and
/// a label key given twice (not last-wins).
#[test]
fn empty_values_port_zero_and_repeated_labels_are_usage_errors() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        &["target", "register", "p", "tg", "i-1", "--port", "0"][..],
        &["target", "deregister", "p", "tg", "i-1", "--port", "0"],
        &["subnet", "p", ""],
        &[
            "address",
            "assign",
            "p",
            "i-1",
            "--kind",
            "private",
            "--address",
            "",
        ],
        &["address", "release", "p", "i-1", ""],
        &[
            "provision",
            "p",
            "--cpu",
            "1",
            "--memory",
            "1GiB",
            "--subnet",
            "",
        ],
        &["label", "p", "i-1", "a=1", "a=2"],
        &[
            "provision",
            "p",
            "--cpu",
            "1",
            "--memory",
            "1GiB",
            "--label",
            "a=1",
            "--label",
            "a=2",
        ],
    ] {
        let out = wasmprov(tmp.path(), None, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
}
