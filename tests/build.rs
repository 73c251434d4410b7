//! Builds every guest the tests use from source, and names each artifact in
//! a generated constant. Every directory under `guests/` must be classified
//! here, as a guest (built, and named) or as support (a library the guests
//! share, not a component); an unclassified directory fails the build, so no
//! test program goes unbuilt.

use std::path::Path;

/// Guests: (constant, package, directory).
const GUESTS: &[(&str, &str, &str)] = &[
    ("PROBE", "wasmprov-test-probe", "tests/guests/probe"),
    (
        "CONTRACT_0_1",
        "wasmprov-test-contract-0-1",
        "tests/guests/contract-0-1",
    ),
    (
        "CONTRACT_0_2",
        "wasmprov-test-contract-0-2",
        "tests/guests/contract-0-2",
    ),
    (
        "FUTURE_CONTRACT",
        "wasmprov-test-future-contract",
        "tests/guests/future-contract",
    ),
    (
        "MISTYPED_CONTRACT",
        "wasmprov-test-mistyped-contract",
        "tests/guests/mistyped-contract",
    ),
    ("HETZNER", "wasmprov-plugin-hetzner", "plugins/hetzner"),
    (
        "CLOUD_INIT",
        "wasmprov-plugin-cloud-init",
        "plugins/cloud-init",
    ),
    ("AWS_EC2", "wasmprov-plugin-aws-ec2", "plugins/aws-ec2"),
    (
        "DIGITALOCEAN",
        "wasmprov-plugin-digitalocean",
        "plugins/digitalocean",
    ),
    ("LINODE", "wasmprov-plugin-linode", "plugins/linode"),
    (
        "NETCLOUD",
        "wasmprov-test-netcloud",
        "tests/guests/netcloud",
    ),
    (
        "BUGGY_REFCLOUD",
        "wasmprov-test-buggy-refcloud",
        "tests/guests/buggy-refcloud",
    ),
];

/// Hostile guests (`tests/guests/hostile-ATTACK`, package
/// `wasmprov-hostile-ATTACK`, constant `HOSTILE_ATTACK`), one attack each;
/// see `tests/tests/hostile.rs` and `tests/HOSTILE.md`.
const HOSTILE: &[&str] = &[
    "http-ungranted",
    "http-localhost-name",
    "http-metadata",
    "http-ip-spellings",
    "http-userinfo",
    "http-header-smuggle",
    "http-redirect",
    "http-flood",
    "http-endless-body",
    "http-slow-drip",
    "http-upload-flood",
    "exec-ungranted",
    "exec-path-alias",
    "exec-args",
    "exec-shell-meta",
    "exec-env",
    "exec-fork-bomb",
    "exec-output-flood",
    "fs-read",
    "config-snoop",
    "raw-socket",
    "env-snoop",
    "log-flood",
    "stderr-flood",
    "cpu-loop",
    "memory-bomb",
    "stack-overflow",
    "panic-everywhere",
    "panic-name",
    "huge-describe",
    "alias-describe",
    "fields-hoard",
    "sleep-forever",
    "host-limits",
    "relabel-reserved",
];

/// Guests that also export `networking` (`export_provider!(P, networking)`),
/// checked against the `networked-provider` world.
const NETWORKED: &[&str] = &["wasmprov-test-netcloud"];

/// Support crates under `guests/`: libraries the guests link, not components.
const SUPPORT: &[&str] = &["tests/guests/hostile-kit"];

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo");
    let root = Path::new(&manifest_dir)
        .parent()
        .expect("tests/ is inside the workspace");
    let mut guests: Vec<(String, String, String)> = GUESTS
        .iter()
        .map(|(k, p, d)| ((*k).to_string(), (*p).to_string(), (*d).to_string()))
        .collect();
    for attack in HOSTILE {
        guests.push((
            format!("HOSTILE_{}", attack.to_ascii_uppercase().replace('-', "_")),
            format!("wasmprov-hostile-{attack}"),
            format!("tests/guests/hostile-{attack}"),
        ));
    }

    let guests_dir = Path::new(&manifest_dir).join("guests");
    for entry in std::fs::read_dir(&guests_dir).expect("tests/guests exists") {
        let entry = entry.expect("readable");
        let rel = format!("tests/guests/{}", entry.file_name().to_string_lossy());
        let is_guest = guests.iter().any(|(_, _, dir)| *dir == rel);
        let is_support = SUPPORT.contains(&rel.as_str());
        assert!(
            is_guest || is_support,
            "{rel} is not listed in tests/build.rs; every directory under tests/guests must be classified as a guest (built and named) or as support"
        );
        assert!(
            !(is_guest && is_support),
            "{rel} is listed both as a guest and as support in tests/build.rs"
        );
    }
    println!("cargo:rerun-if-changed={}", guests_dir.display());
    for dir in SUPPORT {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    let packages: Vec<(&str, &str)> = guests
        .iter()
        .map(|(_, p, d)| (p.as_str(), d.as_str()))
        .collect();
    let built = wasmprov_guest_build::build_guests(root, &packages);
    let mut code = String::new();
    for ((konst, _, _), b) in guests.iter().zip(&built) {
        code.push_str(&format!(
            "/// Component of `{}`, built from source.\npub const {konst}: &str = {:?};\n",
            b.package,
            b.path.display().to_string()
        ));
    }
    code.push_str(
        "/// `wasm-tools component targets wit/ COMPONENT --world WORLD` of every guest,\n\
         /// as `wit_component::targets` (the function behind the command) answered\n\
         /// here: (package, world, `None` when the component fits the world, else why\n\
         /// not). Each guest against its contract's world; the future contract's\n\
         /// and the mistyped contract's guests, and the Hetzner plugin against 0.1,\n\
         /// are there to fail.\n\
         pub const TARGETS: &[(&str, &str, Option<&str>)] = &[\n",
    );
    let wit = root.join("wit");
    for ((_, package, _), b) in guests.iter().zip(&built) {
        let mut worlds = vec![match package.as_str() {
            "wasmprov-test-contract-0-1" => "wasmprov:provisioner/provider@0.1.0",
            "wasmprov-test-contract-0-2" => "wasmprov:provisioner/provider@0.2.0",
            p if NETWORKED.contains(&p) => wasmprov_guest_build::NETWORKED_WORLD,
            _ => wasmprov_guest_build::WORLD,
        }];
        if package == "wasmprov-plugin-hetzner" {
            worlds.push("wasmprov:provisioner/provider@0.1.0");
        }
        for world in worlds {
            let fits = targets(&wit, world, &b.path)
                .err()
                .map(|e| format!("{e:#}"));
            code.push_str(&format!("    ({package:?}, {world:?}, {fits:?}),\n"));
        }
    }
    code.push_str("];\n");
    let out = Path::new(&std::env::var("OUT_DIR").expect("set by cargo")).join("guests.rs");
    std::fs::write(out, code).expect("writing guests.rs");
}

/// What `wasm-tools component targets WIT COMPONENT --world WORLD` checks.
fn targets(wit: &Path, world: &str, component: &Path) -> anyhow::Result<()> {
    let mut resolve = wit_parser::Resolve::default();
    let (package, _) = resolve.push_path(wit)?;
    let world = resolve.select_world(&[package], Some(world))?;
    wit_component::targets(&resolve, world, &std::fs::read(component)?)
}
