//! Contract 0.3 through the `wasmprov` binary: `provision --subnet`,
//! `label`, `address`, `target`, `subnet`, and what `plugins` and `inspect`
//! say of each plugin's contract and interfaces; a 0.2.0 plugin beside it
//! answers the new commands `unsupported` (exit 1). Against the refcloud
//! fake, through the `netcloud` test guest.

use std::process::{Command, Output};

mod netcloud;

const NOT_FOUND: i32 = 66;

fn wasmprov(dir: &std::path::Path, token: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .arg("--plugin-dir")
        .arg(dir)
        .args(["--owner", "net-cli", "--no-cache"])
        .args(args)
        .env(netcloud::TOKEN_ENV, token)
        .env_remove("WASMPROV_PLUGIN_DIR")
        .env_remove("WASMPROV_STATE_DIR")
        .output()
        .expect("run wasmprov")
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

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited")
}

#[tokio::test(flavor = "multi_thread")]
async fn the_contract_0_3_commands_drive_a_networked_plugin_and_refuse_an_older_one() {
    let (fake, dir) = netcloud::setup().await;
    let d = dir.path();
    let t = fake.token().to_string();
    let run = |args: &[&str]| wasmprov(d, &t, args);

    // What each plugin speaks.
    let plugins = json(&run(&["--json", "plugins"]));
    let by_name = |n: &str| {
        plugins["plugins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == n)
            .cloned()
            .unwrap()
    };
    assert_eq!(by_name("netcloud")["contract"], "0.3.0");
    assert_eq!(
        by_name("netcloud")["interfaces"],
        serde_json::json!({"set_labels": true, "networking": true})
    );
    assert_eq!(by_name("older")["contract"], "0.2.0");
    assert_eq!(
        by_name("older")["interfaces"],
        serde_json::json!({"set_labels": false, "networking": false})
    );
    let text = String::from_utf8(run(&["inspect", "older"]).stdout).unwrap();
    assert!(text.contains("0.2.0"), "{text}");
    let text = String::from_utf8(run(&["inspect", "netcloud"]).stdout).unwrap();
    assert!(text.contains("set-labels, networking"), "{text}");
    let text = String::from_utf8(run(&["plugins"]).stdout).unwrap();
    assert!(text.contains("0.2.0 (none)"), "{text}");

    // A node in a subnet, relabelled.
    let node = json(&run(&[
        "--json",
        "provision",
        "netcloud",
        "--cpu",
        "2",
        "--memory",
        "4GiB",
        "--subnet",
        "subnet-a",
        "--request-id",
        "cli-1",
        "--label",
        "tier=web",
    ]));
    let id = node["provider_id"].as_str().unwrap().to_string();
    assert_eq!(fake.nodes()[0].subnet.as_deref(), Some("subnet-a"));
    let relabelled = json(&run(&["--json", "label", "netcloud", &id, "role=db"]));
    assert_eq!(relabelled["labels"]["role"], "db");
    assert!(relabelled["labels"].get("tier").is_none());
    assert_eq!(
        fake.nodes()[0].labels.get("role").map(String::as_str),
        Some("db")
    );
    // A reserved key is refused by the command line itself.
    assert_eq!(
        code(&run(&["label", "netcloud", &id, "wasmprov-owner=x"])),
        2
    );
    assert_eq!(
        code(&run(&["label", "netcloud", "n-999999", "role=db"])),
        NOT_FOUND
    );

    // Addresses, targets, subnet capacity.
    let a = json(&run(&[
        "--json", "address", "assign", "netcloud", &id, "--kind", "public",
    ]));
    assert_eq!(a["address"], "203.0.113.1");
    assert_eq!(a["kind"], "public");
    assert_eq!(fake.addresses()[0].node_id.as_deref(), Some(id.as_str()));
    json(&run(&[
        "--json",
        "address",
        "release",
        "netcloud",
        &id,
        "203.0.113.1",
    ]));
    assert_eq!(fake.addresses()[0].node_id, None);
    assert_eq!(
        code(&run(&[
            "address",
            "release",
            "netcloud",
            &id,
            "203.0.113.1"
        ])),
        NOT_FOUND
    );
    json(&run(&[
        "--json", "target", "register", "netcloud", "tg-web", &id, "--port", "80",
    ]));
    let listed = json(&run(&["--json", "target", "list", "netcloud", "tg-web"]));
    assert_eq!(listed[0]["provider_id"], id.as_str());
    assert_eq!(listed[0]["port"], 80);
    json(&run(&[
        "--json",
        "target",
        "deregister",
        "netcloud",
        "tg-web",
        &id,
    ]));
    assert_eq!(fake.targets("tg-web").unwrap(), vec![]);
    let s = json(&run(&["--json", "subnet", "netcloud", "subnet-a"]));
    assert_eq!(
        (
            s["available_addresses"].as_u64(),
            s["total_addresses"].as_u64()
        ),
        (Some(7), Some(8))
    );
    let text = String::from_utf8(run(&["subnet", "netcloud", "subnet-a"]).stdout).unwrap();
    assert!(text.contains("subnet-a") && text.contains('7'), "{text}");

    // The 0.2.0 plugin: every new command exits 1, unsupported, and says so.
    for args in [
        vec!["--json", "label", "older", "n-1", "role=db"],
        vec![
            "--json", "address", "assign", "older", "n-1", "--kind", "private",
        ],
        vec!["--json", "target", "list", "older", "tg-web"],
        vec!["--json", "subnet", "older", "subnet-a"],
        vec![
            "--json",
            "provision",
            "older",
            "--cpu",
            "1",
            "--memory",
            "1GiB",
            "--subnet",
            "subnet-a",
        ],
    ] {
        let out = run(&args);
        assert_eq!(code(&out), 1, "{args:?}: {out:?}");
        let err: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(err["error"]["kind"], "unsupported", "{args:?}: {err}");
    }
}

/// Issue 26 (second attack), finding 6: an address no node can hold
/// (loopback, unspecified, multicast, broadcast, link-local with the
/// metadata address, IPv4 in IPv6 form, a private range asked as public,
/// an IP in another notation) is refused by the host before the plugin
/// is called: the fake sees no request.
#[tokio::test(flavor = "multi_thread")]
async fn addresses_no_node_can_hold_are_refused_before_the_plugin_is_called() {
    let (fake, dir) = netcloud::setup().await;
    let d = dir.path();
    let t = fake.token().to_string();
    let run = |args: &[&str]| wasmprov(d, &t, args);
    let node = json(&run(&[
        "--json",
        "provision",
        "netcloud",
        "--cpu",
        "1",
        "--memory",
        "1GiB",
        "--request-id",
        "cli-addr",
    ]));
    let id = node["provider_id"].as_str().unwrap().to_string();
    for (kind, address) in [
        ("private", "127.0.0.1"),
        ("private", "0.0.0.0"),
        ("private", "224.0.0.5"),
        ("private", "255.255.255.255"),
        ("private", "169.254.169.254"),
        ("private", "fe80::1"),
        ("private", "::ffff:169.254.169.254"),
        ("private", "64:ff9b::a9fe:a9fe"),
        ("private", "::ffff:10.9.0.1"),
        ("private", "127.1"),
        ("private", "fe80::1%eth0; rm -rf /"),
        ("public", "10.9.0.1"),
        ("public", "127.4.17.88"),
    ] {
        let before = fake.request_count();
        let out = run(&[
            "--json",
            "address",
            "assign",
            "netcloud",
            &id,
            "--kind",
            kind,
            "--address",
            address,
        ]);
        assert_eq!(code(&out), 1, "{kind} {address}: {out:?}");
        let err: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(err["error"]["kind"], "unsupported", "{address}: {err}");
        assert_eq!(
            fake.request_count(),
            before,
            "assign {kind} {address}: the plugin was called"
        );
        // Release has no kind: a private-range address may be a node's,
        // and is asked of the plugin.
        if address == "10.9.0.1" {
            continue;
        }
        let out = run(&["--json", "address", "release", "netcloud", &id, address]);
        assert_eq!(code(&out), 1, "release {address}: {out:?}");
        assert_eq!(
            fake.request_count(),
            before,
            "release {address}: the plugin was called"
        );
    }
    assert!(fake.addresses().is_empty(), "{:?}", fake.addresses());
}
