//! `wasmprov push` / `install` against a real OCI registry (the CNCF
//! distribution registry, Debian's `docker-registry`) that the tests start
//! on 127.0.0.1: push → install → load → call; a moved tag, a tampered
//! blob, a wrong or missing signature refused; a registry that is down
//! leaves the installed plugin working. Signing keys are made here.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use minisign::KeyPair;
use wasmprov_fake::{HetznerFake, HetznerFakeOptions};

/// A distribution registry on a free loopback port, storing in a temporary
/// directory; stopped when dropped.
struct Registry {
    child: Child,
    addr: String,
    storage: PathBuf,
    _dir: tempfile::TempDir,
}

impl Registry {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let addr = format!("127.0.0.1:{port}");
        let storage = dir.path().join("data");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
                storage.display()
            ),
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect(
                "the `docker-registry` program (Debian package docker-registry; .ci/run installs it)",
            );
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let up = Command::new("curl")
                .args(["-sf", "-o", "/dev/null", &format!("http://{addr}/v2/")])
                .status()
                .is_ok_and(|s| s.success());
            if up {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the registry did not start on {addr}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Self {
            child,
            addr,
            storage,
            _dir: dir,
        }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The file holding a blob.
    fn blob(&self, digest_hex: &str) -> PathBuf {
        self.storage.join(format!(
            "docker/registry/v2/blobs/sha256/{}/{digest_hex}/data",
            &digest_hex[..2]
        ))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

fn wasmprov(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .arg("--plugin-dir")
        .arg(dir)
        .args(["--owner", "install-test", "--no-cache"])
        .args(args)
        .env_remove("WASMPROV_PLUGIN_DIR")
        .env_remove("WASMPROV_REGISTRY_USERNAME")
        .env("HCLOUD_TOKEN", "fake-hetzner-token")
        .stdin(Stdio::null())
        .output()
        .expect("run wasmprov")
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "{}", text(out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn refused(out: &Output, wants: &[&str]) {
    assert!(!out.status.success(), "should be refused: {}", text(out));
    let all = text(out);
    for w in wants {
        assert!(all.contains(w), "missing {w:?} in {all}");
    }
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_str(&ok(out)).expect("JSON on stdout")
}

/// The bundled components, written to a directory of their own.
fn bundled() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .args(["bundle", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    dir
}

/// A minisign key pair: the secret key file and the public key line.
fn keys(dir: &Path, name: &str) -> (PathBuf, String) {
    let kp = KeyPair::generate_unencrypted_keypair().unwrap();
    let file = dir.join(format!("{name}.key"));
    std::fs::write(&file, kp.sk.to_box(None).unwrap().to_string()).unwrap();
    (file, kp.pk.to_base64())
}

fn trust(dir: &Path, keys: &[(&str, &str)], unsigned: &[&str]) {
    std::fs::create_dir_all(dir).unwrap();
    let mut t = format!(
        "[signatures]\nunsigned = [{}]\n",
        unsigned
            .iter()
            .map(|u| format!("\"{u}\""))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (name, key) in keys {
        t.push_str(&format!(
            "\n[[signatures.keys]]\nname = \"{name}\"\nminisign = \"{key}\"\n"
        ));
    }
    std::fs::write(dir.join("wasmprov.toml"), t).unwrap();
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[tokio::test(flavor = "multi_thread")]
async fn push_install_list_and_provision_through_a_registry() {
    let registry = Registry::start();
    let fake = HetznerFake::start(
        "127.0.0.1:0".parse().unwrap(),
        HetznerFakeOptions::default(),
    )
    .await
    .unwrap();
    let work = tempfile::tempdir().unwrap();
    let built = bundled();
    let (key, public) = keys(work.path(), "release");
    let reference = format!("{}/plugins/hetzner:1.0", registry.addr);

    // The author publishes, signed.
    let pushed = ok(&wasmprov(
        work.path(),
        &[
            "push",
            built.path().join("hetzner.wasm").to_str().unwrap(),
            &reference,
            "--sign",
            key.to_str().unwrap(),
        ],
    ));
    assert!(pushed.contains("signed"), "{pushed}");

    // The operator installs into an empty directory that trusts the key.
    let plugins = work.path().join("plugins.d");
    trust(&plugins, &[("release-key", &public)], &[]);
    let endpoint = format!("endpoint={}", fake.url());
    let installed = ok(&wasmprov(
        &plugins,
        &["install", &reference, "--yes", "--config", &endpoint],
    ));
    assert!(installed.contains("signer:    release-key"), "{installed}");
    let grant = fake.url().trim_end_matches("/v1").to_string();
    assert!(
        installed.contains(&format!("http    {grant}  [granted]")),
        "{installed}"
    );

    // Listed with its signer, and the lock says where it came from.
    let list = json(&wasmprov(&plugins, &["--json", "plugins"]));
    let p = &list["plugins"][0];
    assert_eq!(p["name"], "hetzner", "{list}");
    assert_eq!(p["signer"], "release-key");
    assert!(p["source"].as_str().unwrap().starts_with(&reference), "{p}");
    let table = ok(&wasmprov(&plugins, &["plugins"]));
    assert!(table.contains("release-key"), "{table}");
    let lock = std::fs::read_to_string(plugins.join("wasmprov.lock")).unwrap();
    let component = std::fs::read(built.path().join("hetzner.wasm")).unwrap();
    assert!(lock.contains(&sha256_hex(&component)), "{lock}");
    assert!(lock.contains("signer = \"release-key\""), "{lock}");

    // What it asked for is exactly what it got.
    let inspect = json(&wasmprov(&plugins, &["--json", "inspect", "hetzner"]));
    let checks = inspect["plugin"]["requested"].as_array().unwrap();
    assert!(
        checks
            .iter()
            .all(|c| c["standing"] == "granted" || c["standing"] == "unset"),
        "{checks:?}"
    );

    // A provision through it reaches the fake.
    let node = json(&wasmprov(
        &plugins,
        &[
            "--json",
            "provision",
            "hetzner",
            "--cpu",
            "2",
            "--memory",
            "4GiB",
            "--request-id",
            "from-registry",
        ],
    ));
    let id = node["provider_id"].as_str().unwrap();
    let described = json(&wasmprov(&plugins, &["--json", "describe", "hetzner"]));
    assert!(described.to_string().contains(id), "{described}");

    // A grant the operator widens by hand is flagged.
    let manifest = plugins.join("hetzner.toml");
    let widened = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("allow = [", "allow = [\"http://127.0.0.1:*\", ");
    std::fs::write(&manifest, widened).unwrap();
    let inspect = json(&wasmprov(&plugins, &["--json", "inspect", "hetzner"]));
    let wider: Vec<&serde_json::Value> = inspect["plugin"]["requested"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["standing"] == "wider_than_requested")
        .collect();
    assert_eq!(wider.len(), 1, "{inspect}");
    assert_eq!(wider[0]["item"], "http://127.0.0.1:*");
    let table = ok(&wasmprov(&plugins, &["inspect", "hetzner"]));
    assert!(table.contains("WIDER THAN REQUESTED"), "{table}");

    // Installing again keeps the operator's limits and drops (and names)
    // the grant nobody requested.
    let with_limits = std::fs::read_to_string(&manifest).unwrap() + "\n[limits]\nmemory_mib = 96\n";
    std::fs::write(&manifest, with_limits).unwrap();
    let again = ok(&wasmprov(
        &plugins,
        &["install", &reference, "--yes", "--config", &endpoint],
    ));
    assert!(
        again.contains("dropped from the old manifest (not requested): http http://127.0.0.1:*"),
        "{again}"
    );
    let rewritten = std::fs::read_to_string(&manifest).unwrap();
    assert!(rewritten.contains("memory_mib = 96"), "{rewritten}");
    assert!(!rewritten.contains("127.0.0.1:*"), "{rewritten}");
}

#[test]
fn moved_tags_tampered_blobs_and_bad_signatures_are_refused() {
    let mut registry = Registry::start();
    let work = tempfile::tempdir().unwrap();
    let built = bundled();
    let (key, public) = keys(work.path(), "release");
    let (stranger, _) = keys(work.path(), "stranger");
    let plugins = work.path().join("plugins.d");
    trust(&plugins, &[("release-key", &public)], &[]);
    let file = |name: &str| built.path().join(name).to_str().unwrap().to_string();
    let addr = registry.addr.clone();
    let at = |repo: &str| format!("{addr}/plugins/{repo}");
    let push = |file: &str, reference: &str, extra: &[&str]| {
        let mut args = vec!["--json", "push", file, reference];
        args.extend_from_slice(extra);
        json(&wasmprov(work.path(), &args))["manifest_digest"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let sign = ["--sign", key.to_str().unwrap()];

    // Version 1 installed by tag.
    let v1 = push(
        &file("hetzner.wasm"),
        &format!("{}:stable", at("hetzner")),
        &sign,
    );
    ok(&wasmprov(
        &plugins,
        &["install", &format!("{}:stable", at("hetzner")), "--yes"],
    ));
    let installed = std::fs::read(plugins.join("hetzner.wasm")).unwrap();
    let lock_before = std::fs::read_to_string(plugins.join("wasmprov.lock")).unwrap();

    // The tag moves to another component: shown, and refused until accepted.
    let v2 = push(
        &file("digitalocean.wasm"),
        &format!("{}:stable", at("hetzner")),
        &["--name", "hetzner", "--sign", key.to_str().unwrap()],
    );
    assert_ne!(v1, v2);
    let out = wasmprov(&plugins, &["install", &format!("{}:stable", at("hetzner"))]);
    refused(
        &out,
        &[
            "UPDATE of the installed hetzner",
            &format!("component sha256:{}", sha256_hex(&installed)),
            "capabilities requested:",
            "+ config region",
            "- config location",
            "not confirmed: nothing was changed",
        ],
    );
    assert_eq!(
        std::fs::read(plugins.join("hetzner.wasm")).unwrap(),
        installed
    );
    assert_eq!(
        std::fs::read_to_string(plugins.join("wasmprov.lock")).unwrap(),
        lock_before
    );
    // By digest, the old version is still what it was; accepting moves on.
    let same = ok(&wasmprov(
        &plugins,
        &["install", &format!("{}@{v1}", at("hetzner")), "--yes"],
    ));
    assert!(same.contains("already installed"), "{same}");
    ok(&wasmprov(
        &plugins,
        &["install", &format!("{}:stable", at("hetzner")), "--yes"],
    ));
    let lock = std::fs::read_to_string(plugins.join("wasmprov.lock")).unwrap();
    assert!(lock.contains(&v2), "{lock}");

    // A blob changed in the registry's storage after it was pushed.
    let component = std::fs::read(file("cloud-init.wasm")).unwrap();
    push(
        &file("cloud-init.wasm"),
        &format!("{}:1", at("cloud-init")),
        &sign,
    );
    let blob = registry.blob(&sha256_hex(&component));
    let mut tampered = component.clone();
    let mid = tampered.len() / 2;
    tampered[mid] ^= 0xff;
    std::fs::write(&blob, &tampered).unwrap();
    let out = wasmprov(
        &plugins,
        &["install", &format!("{}:1", at("cloud-init")), "--yes"],
    );
    refused(&out, &["digest mismatch", &sha256_hex(&component)]);
    assert!(!plugins.join("cloud-init.wasm").exists());

    // Signed by a key the directory does not trust; not signed at all.
    push(
        &file("aws-ec2.wasm"),
        &format!("{}:1", at("aws-ec2")),
        &["--sign", stranger.to_str().unwrap()],
    );
    let out = wasmprov(
        &plugins,
        &["install", &format!("{}:1", at("aws-ec2")), "--yes"],
    );
    let ec2 = sha256_hex(&std::fs::read(file("aws-ec2.wasm")).unwrap());
    refused(
        &out,
        &[
            "does not verify with any trusted key",
            &format!("sha256:{ec2}"),
            "keys tried: release-key (key id",
        ],
    );
    push(
        &file("aws-ec2.wasm"),
        &format!("{}:unsigned", at("ec2-unsigned")),
        &["--name", "ec2-unsigned"],
    );
    let out = wasmprov(
        &plugins,
        &[
            "install",
            &format!("{}:unsigned", at("ec2-unsigned")),
            "--yes",
        ],
    );
    refused(
        &out,
        &[
            "is not signed",
            &format!("sha256:{ec2}"),
            "unsigned = [\"ec2-unsigned\"]",
        ],
    );
    assert!(!plugins.join("ec2-unsigned.wasm").exists());
    // The operator's per-plugin opt-out lets that one in, and says so.
    trust(&plugins, &[("release-key", &public)], &["ec2-unsigned"]);
    let out = ok(&wasmprov(
        &plugins,
        &[
            "install",
            &format!("{}:unsigned", at("ec2-unsigned")),
            "--yes",
        ],
    ));
    assert!(out.contains("unsigned (allowed in wasmprov.toml)"), "{out}");

    // The registry goes down: a clear error, and what is installed still works.
    registry.stop();
    let out = wasmprov(
        &plugins,
        &["install", &format!("{}:stable", at("hetzner")), "--yes"],
    );
    refused(&out, &["cannot reach the registry", "nothing was changed"]);
    let list = json(&wasmprov(&plugins, &["--json", "plugins"]));
    assert_eq!(list["errors"].as_array().unwrap().len(), 0, "{list}");
    let price = json(&wasmprov(
        &plugins,
        &[
            "--json", "price", "hetzner", "--cpu", "2", "--memory", "4GiB",
        ],
    ));
    assert!(price["hourly_usd"].as_f64().unwrap() > 0.0, "{price}");
}

#[test]
fn signatures_made_by_the_minisign_tool_verify_and_local_files_install() {
    let registry = Registry::start();
    let work = tempfile::tempdir().unwrap();
    let built = bundled();
    let w = work.path();
    // A password-protected key pair made by the minisign program itself.
    let mut keygen = Command::new("minisign")
        .args(["-G", "-p"])
        .arg(w.join("tool.pub"))
        .arg("-s")
        .arg(w.join("tool.key"))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the `minisign` program (Debian package minisign; .ci/run installs it)");
    use std::io::Write as _;
    keygen.stdin.take().unwrap().write_all(b"pw\npw\n").unwrap();
    assert!(keygen.wait().unwrap().success());
    let component = w.join("digitalocean.wasm");
    std::fs::copy(built.path().join("digitalocean.wasm"), &component).unwrap();
    let mut sign = Command::new("minisign")
        .args(["-S", "-s"])
        .arg(w.join("tool.key"))
        .arg("-m")
        .arg(&component)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    sign.stdin.take().unwrap().write_all(b"pw\n").unwrap();
    assert!(sign.wait().unwrap().success());
    let public = std::fs::read_to_string(w.join("tool.pub")).unwrap();
    let public = public.lines().last().unwrap().to_string();
    let plugins = w.join("plugins.d");
    trust(&plugins, &[("tool-key", &public)], &[]);

    // A local file with its .minisig beside it.
    let out = ok(&wasmprov(
        &plugins,
        &["install", component.to_str().unwrap(), "--yes"],
    ));
    assert!(out.contains("signer:    tool-key"), "{out}");

    // The same signature published with --signature, and a key file the
    // tool made, used by push with its password.
    let sig = format!("{}.minisig", component.display());
    let reference = format!("{}/plugins/do:1", registry.addr);
    ok(&wasmprov(
        w,
        &[
            "push",
            component.to_str().unwrap(),
            &reference,
            "--name",
            "do",
            "--signature",
            &sig,
        ],
    ));
    let out = ok(&wasmprov(&plugins, &["install", &reference, "--yes"]));
    assert!(out.contains("signer:    tool-key"), "{out}");
    let out = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .args([
            "push",
            component.to_str().unwrap(),
            &format!("{}/plugins/do:2", registry.addr),
        ])
        .arg("--sign")
        .arg(w.join("tool.key"))
        .env("WASMPROV_SIGNING_PASSWORD", "pw")
        .output()
        .unwrap();
    assert!(ok(&out).contains("signed"));
    let no_password = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .args([
            "push",
            component.to_str().unwrap(),
            &format!("{}/plugins/do:3", registry.addr),
        ])
        .arg("--sign")
        .arg(w.join("tool.key"))
        .env_remove("WASMPROV_SIGNING_PASSWORD")
        .output()
        .unwrap();
    refused(
        &no_password,
        &["password-protected", "WASMPROV_SIGNING_PASSWORD"],
    );
    // A bad reference says what a reference looks like.
    refused(
        &wasmprov(&plugins, &["install", "not a reference!", "--yes"]),
        &["is not an OCI reference"],
    );
}
