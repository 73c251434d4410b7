//! Mutation test of the conformance suite: one-line mutants of the
//! DigitalOcean plugin (each a bug real plugins shipped or nearly shipped),
//! applied by this test to copies of the plugin's source, built to
//! components in one cargo invocation, and run through the suite against
//! the plugin's fake. The suite must fail every mutant, by the rule meant to
//! catch it; the unmutated copy must pass. The shipped plugin is never
//! changed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use wasmprov_testkit::{Fake, Suite};
use wasmprov_tests::run_suite as run;

/// The manifest the plugin's own test uses.
const MANIFEST: &str = r#"
name = "digitalocean"
component = "digitalocean.wasm"

[config]
region = "nyc3"

[secrets]
token = { env = "DIGITALOCEAN_TOKEN" }

[http]
allow = ["https://api.digitalocean.com"]
"#;

/// One mutant: a line of `src/lib.rs` replaced, and the rule that must
/// catch it.
struct Mutant {
    name: &'static str,
    from: &'static str,
    to: &'static str,
    rule: &'static str,
}

const MUTANTS: &[Mutant] = &[
    Mutant {
        name: "no-paging",
        from: r#"const PAGING: Paging = Paging::next_url("/links/pages/next");"#,
        to: "const PAGING: Paging = Paging::Single;",
        rule: "describe.pages",
    },
    Mutant {
        name: "user-data-dropped",
        from: r#""user_data": boot.user_data_text()?,"#,
        to: r#""user_data": None::<&str>,"#,
        rule: "boot.user-data",
    },
    Mutant {
        name: "ssh-keys-dropped",
        from: "const BOOT: BootSupport = BootSupport::IMAGE_AND_USER_DATA;",
        to: "const BOOT: BootSupport = BootSupport::ALL;",
        rule: "boot.ssh-keys",
    },
    Mutant {
        name: "image-ignored",
        from: r#""image": self.0.image(boot),"#,
        to: r#""image": self.0.image.as_str(),"#,
        rule: "boot.image",
    },
    Mutant {
        name: "zone-ignored",
        from: r#""region": self.0.zone(shape),"#,
        to: r#""region": self.0.region.as_str(),"#,
        rule: "shape.zone",
    },
    Mutant {
        name: "created-at-dropped",
        from: r#"created: "/created_at","#,
        to: r#"created: "/no_such_field","#,
        rule: "handle.created-at",
    },
    Mutant {
        name: "raw-id-in-hostname",
        from: r#""name": tags::hostname("wasmprov", id, id.as_bytes()),"#,
        to: r#""name": format!("wasmprov-{id}"),"#,
        rule: "ids.awkward",
    },
    Mutant {
        name: "request-tag-truncated",
        from: "list_selector(owner_id, request_id)?;",
        to: "list_selector(owner_id, request_id.map(|r| &r[..r.len().min(32)]))?;",
        rule: "ids.awkward",
    },
    Mutant {
        name: "addresses-dropped",
        from: r#"addresses: "/networks/v4","#,
        to: r#"addresses: "/networks/v6","#,
        rule: "handle.truth",
    },
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// The plugin's `[dependencies]`, with the workspace's resolved: the SDK
/// by path, serde as the workspace gives it.
fn dependencies(root: &Path) -> String {
    let manifest = std::fs::read_to_string(root.join("plugins/digitalocean/Cargo.toml")).unwrap();
    let listed = manifest
        .split("[dependencies]")
        .nth(1)
        .and_then(|rest| rest.split("\n[").next())
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            l.split([' ', '.', '='])
                .next()
                .unwrap_or_default()
                .to_string()
        })
        .collect::<Vec<_>>();
    // The SDK re-exports serde_json: a plugin may list it or not.
    let listed: Vec<String> = listed
        .into_iter()
        .filter(|d| d != "serde" && d != "serde_json")
        .collect();
    assert_eq!(
        listed,
        ["wasmprov-guest"],
        "the plugin's dependencies changed; update the mutants' manifest"
    );
    format!(
        "wasmprov-guest = {{ path = {:?} }}\nserde = {{ version = \"1\", features = [\"derive\"] }}\nserde_json = \"1\"\n",
        root.join("guest-sdk").display().to_string()
    )
}

/// Copies the plugin into `dir/<name>` as package `do-mutant-<name>`, with
/// `mutant` applied to `src/lib.rs` (the line must occur exactly once, so a
/// mutant that no longer fits the plugin fails here, not silently).
fn write_copy(root: &Path, dir: &Path, name: &str, deps: &str, mutant: Option<&Mutant>) {
    let plugin = root.join("plugins/digitalocean");
    let to = dir.join(name);
    std::fs::create_dir_all(to.join("src")).unwrap();
    for file in ["capabilities.toml", "src/sizes.rs"] {
        std::fs::copy(plugin.join(file), to.join(file)).unwrap();
    }
    let mut lib = std::fs::read_to_string(plugin.join("src/lib.rs")).unwrap();
    if let Some(m) = mutant {
        assert_eq!(
            lib.matches(m.from).count(),
            1,
            "mutant {}: {:?} is not once in plugins/digitalocean/src/lib.rs; update the mutant",
            m.name,
            m.from
        );
        lib = lib.replace(m.from, m.to);
    }
    write_if_changed(&to.join("src/lib.rs"), &lib);
    write_if_changed(
        &to.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"do-mutant-{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n[lib]\ncrate-type = [\"cdylib\"]\n\n[dependencies]\n{deps}"
        ),
    );
}

/// Writes only what changed, so that a warm rebuild rebuilds nothing.
fn write_if_changed(path: &Path, text: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        std::fs::write(path, text).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_suite_kills_every_mutant_of_the_digitalocean_plugin() {
    let root = root();
    // Under target/, so the workspace's `.cargo/config.toml` applies; built
    // into the guests' target directory, whose SDK and serde it reuses.
    let dir = root.join("target").join("do-mutants");
    let deps = dependencies(&root);
    let mut members = vec!["unmutated".to_string()];
    write_copy(&root, &dir, "unmutated", &deps, None);
    for m in MUTANTS {
        write_copy(&root, &dir, m.name, &deps, Some(m));
        members.push(m.name.to_string());
    }
    write_if_changed(
        &dir.join("Cargo.toml"),
        &format!(
            "# Written by tests/tests/mutants.rs.\n[workspace]\nresolver = \"3\"\nmembers = {members:?}\n"
        ),
    );
    if !dir.join("Cargo.lock").exists() {
        // The workspace's versions, so nothing is resolved anew.
        std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    }
    let started = Instant::now();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target_dir = root.join("target").join("wasm-guests");
    let mut cmd = Command::new(cargo);
    cmd.current_dir(&dir)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--workspace",
        ])
        .arg("--manifest-path")
        .arg(dir.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target_dir);
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cmd.env_remove(var);
    }
    let status = cmd.status().expect("running cargo");
    assert!(status.success(), "building the mutants failed");
    eprintln!(
        "built {} copies of the plugin in {:.1} s",
        members.len(),
        started.elapsed().as_secs_f64()
    );
    let wasm = |name: &str| {
        target_dir
            .join("wasm32-wasip2/release")
            .join(format!("do_mutant_{}.wasm", name.replace('-', "_")))
    };

    let suite = |name: &str| {
        Suite::from_component("digitalocean", &wasm(name), MANIFEST).fake(Fake::DigitalOcean)
    };
    let clean = run(suite("unmutated")).await;
    assert!(
        clean.passed(),
        "the unmutated copy must pass, or the kills mean nothing: {clean}"
    );

    let mut killed = Vec::new();
    let mut survived = Vec::new();
    for m in MUTANTS {
        let report = run(suite(m.name)).await;
        let failed: Vec<&str> = report.failures().map(|r| r.rule).collect();
        if failed.contains(&m.rule) {
            killed.push(format!(
                "{} killed by {} (failed: {})",
                m.name,
                m.rule,
                failed.join(", ")
            ));
        } else {
            survived.push(format!(
                "{} survived {} (failed: {})",
                m.name,
                m.rule,
                if failed.is_empty() {
                    "nothing".to_string()
                } else {
                    failed.join(", ")
                }
            ));
        }
    }
    println!("killed {} of {} mutants", killed.len(), MUTANTS.len());
    for k in &killed {
        println!("  {k}");
    }
    for s in &survived {
        println!("  {s}");
    }
    assert!(survived.is_empty(), "mutants survived: {survived:#?}");
}
