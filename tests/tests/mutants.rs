//! Mutation test of the conformance suite: one-line mutants of the
//! DigitalOcean and Hetzner plugins (each a bug real plugins shipped or
//! nearly shipped), applied by this test to copies of the plugins' source,
//! built to components in one cargo invocation, and run through the suite
//! against each plugin's fake. The suite must fail every mutant, by the rule
//! meant to catch it; each unmutated copy must pass. The shipped plugins are
//! never changed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use wasmprov_testkit::{Fake, Suite};
use wasmprov_tests::run_suite as run;

/// The manifest the DigitalOcean plugin's own test uses.
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

/// The manifest the Hetzner plugin's conformance test uses.
const HETZNER_MANIFEST: &str = r#"
name = "hetzner"
component = "hetzner.wasm"

[secrets]
token = { env = "HCLOUD_TOKEN" }

[http]
allow = ["https://api.hetzner.cloud"]
"#;

/// One mutant: a line of `src/lib.rs` replaced, and the rule that must
/// catch it.
struct Mutant {
    name: &'static str,
    from: &'static str,
    to: &'static str,
    rule: &'static str,
}

/// A plugin whose copies are mutated.
struct Plugin {
    /// The plugin's directory in the workspace.
    dir: &'static str,
    /// Prefix of the copies' package names and directories.
    prefix: &'static str,
    /// The plugin's name, as its manifest says.
    name: &'static str,
    manifest: &'static str,
    fake: Fake,
    /// What a copy takes besides `Cargo.toml` (a directory is copied whole).
    files: &'static [&'static str],
    /// The file the mutants change.
    mutated: &'static str,
    mutants: &'static [Mutant],
}

/// One-line mutants of the Hetzner plugin, for contract 0.3's rules.
const HETZNER_MUTANTS: &[Mutant] = &[
    Mutant {
        name: "set-labels-drops-owner",
        from: "Ok(Request::put(url).json(&UpdateLabels { labels }))",
        to: "Ok(Request::put(url).json(&UpdateLabels { labels: &labels.iter().filter(|(k, _)| k.as_str() != tags::OWNER).map(|(k, v)| (k.clone(), v.clone())).collect() }))",
        rule: "labels.set",
    },
    Mutant {
        name: "subnet-ignored",
        from: "            start_after_create: true,\n            networks,\n",
        to: "            start_after_create: true,\n            networks: &[],\n",
        rule: "request.subnet",
    },
    Mutant {
        name: "release-not-checked",
        from: "        if fip.server != Some(server.id) {\n            return Err(Error::NotFound(format!(\n                \"floating IP {} is not on server {}\",",
        to: "        if fip.server.is_none() && fip.server.is_some() {\n            return Err(Error::NotFound(format!(\n                \"floating IP {} is not on server {}\",",
        rule: "address.assign",
    },
    Mutant {
        name: "ipv6-dropped",
        from: ".and_then(Ipv6::address),",
        to: ".and(None::<String>),",
        rule: "handle.ipv6",
    },
    Mutant {
        name: "hostname-dropped",
        from: "hostname: Some(self.name.clone()).filter(|n| !n.is_empty()),",
        to: "hostname: None,",
        rule: "handle.hostname",
    },
];

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

/// The plugins whose mutants the suite must kill.
fn plugins() -> [Plugin; 2] {
    [
        Plugin {
            dir: "plugins/digitalocean",
            prefix: "do",
            name: "digitalocean",
            manifest: MANIFEST,
            fake: Fake::DigitalOcean,
            files: &["capabilities.toml", "src/sizes.rs"],
            mutated: "src/lib.rs",
            mutants: MUTANTS,
        },
        Plugin {
            dir: "plugins/hetzner",
            prefix: "hz",
            name: "hetzner",
            manifest: HETZNER_MANIFEST,
            fake: Fake::Hetzner,
            files: &["capabilities.toml", "src"],
            mutated: "",
            mutants: HETZNER_MUTANTS,
        },
    ]
}

/// The plugin's `[dependencies]`, with the workspace's resolved: the SDK
/// by path, serde as the workspace gives it.
fn dependencies(root: &Path, plugin: &Plugin) -> String {
    let manifest = std::fs::read_to_string(root.join(plugin.dir).join("Cargo.toml")).unwrap();
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
        "the dependencies of {} changed; update the mutants' manifest",
        plugin.dir
    );
    format!(
        "wasmprov-guest = {{ path = {:?} }}\nserde = {{ version = \"1\", features = [\"derive\"] }}\nserde_json = \"1\"\n",
        root.join("guest-sdk").display().to_string()
    )
}

/// Copies `from` (a file, or a directory with everything in it) to `to`.
fn copy(from: &Path, to: &Path) {
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            copy(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        write_if_changed(to, &std::fs::read_to_string(from).unwrap());
    }
}

/// The copy of `plugin` named `name`: its directory and package name.
fn copy_name(plugin: &Plugin, name: &str) -> String {
    format!("{}-{name}", plugin.prefix)
}

/// Copies the plugin into `dir/<prefix>-<name>` as package
/// `<prefix>-mutant-<name>`, with `mutant` applied (its line must occur
/// exactly once in the plugin's source, so a mutant that no longer fits
/// the plugin fails here, not silently).
fn write_copy(
    root: &Path,
    dir: &Path,
    plugin: &Plugin,
    name: &str,
    deps: &str,
    mutant: Option<&Mutant>,
) {
    let from = root.join(plugin.dir);
    let to = dir.join(copy_name(plugin, name));
    std::fs::create_dir_all(to.join("src")).unwrap();
    for file in plugin.files {
        copy(&from.join(file), &to.join(file));
    }
    // The mutated file: the one named, or the one source file of the
    // plugin that holds the line.
    let candidates: Vec<PathBuf> = if plugin.mutated.is_empty() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(from.join("src"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "rs"))
            .collect();
        files.sort();
        files
    } else {
        vec![from.join(plugin.mutated)]
    };
    let Some(m) = mutant else {
        for file in &candidates {
            let rel = file.strip_prefix(&from).unwrap();
            copy(file, &to.join(rel));
        }
        write_manifest(&to, plugin, name, deps);
        return;
    };
    let holding: Vec<(&PathBuf, String)> = candidates
        .iter()
        .map(|f| (f, std::fs::read_to_string(f).unwrap()))
        .filter(|(_, text)| text.contains(m.from))
        .collect();
    let [(file, text)] = holding.as_slice() else {
        panic!(
            "mutant {}: {:?} is not in exactly one source file of {}; update the mutant",
            m.name, m.from, plugin.dir
        );
    };
    assert_eq!(
        text.matches(m.from).count(),
        1,
        "mutant {}: {:?} is not once in {}; update the mutant",
        m.name,
        m.from,
        file.display()
    );
    for other in &candidates {
        let rel = other.strip_prefix(&from).unwrap();
        if other == *file {
            write_if_changed(&to.join(rel), &text.replace(m.from, m.to));
        } else {
            copy(other, &to.join(rel));
        }
    }
    write_manifest(&to, plugin, name, deps);
}

fn write_manifest(to: &Path, plugin: &Plugin, name: &str, deps: &str) {
    write_if_changed(
        &to.join("Cargo.toml"),
        &format!(
            "[package]\nname = \"{}-mutant-{name}\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n[lib]\ncrate-type = [\"cdylib\"]\n\n[dependencies]\n{deps}",
            plugin.prefix
        ),
    );
}

/// Writes only what changed, so that a warm rebuild rebuilds nothing.
fn write_if_changed(path: &Path, text: &str) {
    if std::fs::read_to_string(path).ok().as_deref() != Some(text) {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(path, text).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_suite_kills_every_mutant_of_the_digitalocean_and_hetzner_plugins() {
    let root = root();
    // Under target/, so the workspace's `.cargo/config.toml` applies; built
    // into the guests' target directory, whose SDK and serde it reuses.
    let dir = root.join("target").join("plugin-mutants");
    let plugins = plugins();
    let mut members = Vec::new();
    for plugin in &plugins {
        let deps = dependencies(&root, plugin);
        write_copy(&root, &dir, plugin, "unmutated", &deps, None);
        members.push(copy_name(plugin, "unmutated"));
        for m in plugin.mutants {
            write_copy(&root, &dir, plugin, m.name, &deps, Some(m));
            members.push(copy_name(plugin, m.name));
        }
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
    // Built as the plugins they copy are, in the same target directory.
    wasmprov_guest_build::without_outer_build(&mut cmd);
    wasmprov_guest_build::guest_profile(&mut cmd);
    let status = cmd.status().expect("running cargo");
    assert!(status.success(), "building the mutants failed");
    eprintln!(
        "built {} copies of the plugins in {:.1} s",
        members.len(),
        started.elapsed().as_secs_f64()
    );
    let wasm = |plugin: &Plugin, name: &str| {
        target_dir.join("wasm32-wasip2/release").join(format!(
            "{}_mutant_{}.wasm",
            plugin.prefix,
            name.replace('-', "_")
        ))
    };

    let mut killed = Vec::new();
    let mut survived = Vec::new();
    for plugin in &plugins {
        let suite = |name: &str| {
            Suite::from_component(plugin.name, &wasm(plugin, name), plugin.manifest)
                .fake(plugin.fake.clone())
        };
        let clean = run(suite("unmutated")).await;
        assert!(
            clean.passed(),
            "the unmutated copy of {} must pass, or the kills mean nothing: {clean}",
            plugin.dir
        );
        for m in plugin.mutants {
            let report = run(suite(m.name)).await;
            let failed: Vec<&str> = report.failures().map(|r| r.rule).collect();
            let line = format!(
                "{} {} {} {} (failed: {})",
                plugin.name,
                m.name,
                if failed.contains(&m.rule) {
                    "killed by"
                } else {
                    "survived"
                },
                m.rule,
                if failed.is_empty() {
                    "nothing".to_string()
                } else {
                    failed.join(", ")
                }
            );
            if failed.contains(&m.rule) {
                killed.push(line);
            } else {
                survived.push(line);
            }
        }
    }
    let total: usize = plugins.iter().map(|p| p.mutants.len()).sum();
    println!("killed {} of {total} mutants", killed.len());
    for plugin in &plugins {
        let n = killed
            .iter()
            .filter(|k| k.starts_with(&format!("{} ", plugin.name)))
            .count();
        println!("  {}: killed {n} of {}", plugin.name, plugin.mutants.len());
    }
    for k in &killed {
        println!("  {k}");
    }
    for s in &survived {
        println!("  {s}");
    }
    assert!(survived.is_empty(), "mutants survived: {survived:#?}");
}
