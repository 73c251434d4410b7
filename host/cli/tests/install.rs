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
        .args(["bundle", "--all", "--out"])
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

    // A secret read from another provider's credential chain is flagged
    // DANGEROUS by inspect and among the load warnings.
    let aws = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("env = \"HCLOUD_TOKEN\"", "env = \"AWS_SECRET_ACCESS_KEY\"");
    std::fs::write(&manifest, &aws).unwrap();
    let table = ok(&wasmprov(&plugins, &["inspect", "hetzner"]));
    assert!(
        table.contains("DANGEROUS: $AWS_SECRET_ACCESS_KEY belongs to AWS's"),
        "{table}"
    );
    let list = json(&wasmprov(&plugins, &["--json", "plugins"]));
    assert!(
        list.to_string()
            .contains("DANGEROUS secret token: $AWS_SECRET_ACCESS_KEY"),
        "{list}"
    );
    std::fs::write(
        &manifest,
        aws.replace("env = \"AWS_SECRET_ACCESS_KEY\"", "env = \"HCLOUD_TOKEN\""),
    )
    .unwrap();

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
    assert_eq!(out.status.code(), Some(75), "retryable (EX_TEMPFAIL)");
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
    let reference = format!("{}/plugins/digitalocean:1", registry.addr);
    ok(&wasmprov(
        w,
        &[
            "push",
            component.to_str().unwrap(),
            &reference,
            "--signature",
            &sig,
        ],
    ));
    let fresh = w.join("fresh.d");
    trust(&fresh, &[("tool-key", &public)], &[]);
    let out = ok(&wasmprov(&fresh, &["install", &reference, "--yes"]));
    assert!(out.contains("signer:    tool-key"), "{out}");
    // The tool's signature names the file it signed (digitalocean.wasm):
    // it does not let the same bytes in under another name.
    refused(
        &wasmprov(&plugins, &["install", &reference, "--name", "do", "--yes"]),
        &["signed by tool-key for plugin \"digitalocean\", not for \"do\""],
    );
    assert!(!plugins.join("do.wasm").exists());
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

/// Attacks on `install` from the registry's side and beside a local file
/// (tests/HOSTILE.md, "Install"). A malicious registry is served here, on
/// 127.0.0.1, by an axum app whose answers go wrong on purpose; every run
/// of `wasmprov` is bounded in time and its peak memory is measured.
mod hostile {
    use super::*;
    use std::sync::{Arc, Mutex};

    use axum::body::{Body, Bytes};
    use axum::http::{HeaderMap, HeaderValue, Request, Response, StatusCode};

    /// What the malicious registry does wrong.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Mode {
        /// The image manifest never ends.
        EndlessManifest,
        /// The signature artifact's manifest never ends.
        EndlessSignatureManifest,
        /// The token endpoint (on the registry's own host) never ends.
        EndlessToken,
        /// The layer comes one byte every 5 s.
        DripLayer,
        /// The token realm is another port of this machine.
        ForeignRealm,
        /// The token realm is the registry itself.
        OwnRealm,
        /// Push: the first `GET /v2/` asks for Basic credentials, every
        /// later one names a token realm on another port.
        PushLeak,
        /// Push: the upload location is on another port.
        PushForeignUpload,
        /// The layer never ends, past the 8 bytes its descriptor declares.
        EndlessLayer,
    }

    /// An empty component: install does not run it.
    const COMPONENT: &[u8] = b"\0asm\x0d\x00\x01\x00";

    #[derive(Clone)]
    struct Evil {
        mode: Mode,
        /// The realm's base URL.
        realm: String,
        /// Authorization headers the token endpoint received.
        token_auth: Arc<Mutex<Vec<Option<String>>>>,
        /// Every request either server received: method, path, Authorization.
        seen: Arc<Mutex<Vec<Seen>>>,
        /// How many times `/v2/` was asked.
        pings: Arc<std::sync::atomic::AtomicUsize>,
        /// The manifests pushed, by tag.
        pushed: Arc<Mutex<Vec<Pushed>>>,
    }

    /// A request seen: method, path, Authorization.
    type Seen = (String, String, Option<String>);
    /// A manifest pushed: tag, bytes.
    type Pushed = (String, Vec<u8>);

    const OPERATOR_BASIC: &str = "Basic b3BlcmF0b3I6aHVudGVyMg==";

    fn digest(bytes: &[u8]) -> String {
        format!("sha256:{}", sha256_hex(bytes))
    }

    fn manifest() -> Vec<u8> {
        let config = b"{}";
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {
                "mediaType": "application/vnd.wasm.config.v0+json",
                "digest": digest(config),
                "size": config.len(),
            },
            "layers": [{
                "mediaType": "application/wasm",
                "digest": digest(COMPONENT),
                "size": COMPONENT.len(),
            }],
        }))
        .unwrap()
    }

    fn endless() -> Body {
        Body::from_stream(futures::stream::repeat_with(|| {
            Ok::<_, std::io::Error>(Bytes::from(vec![b' '; 64 << 10]))
        }))
    }

    fn drip() -> Body {
        Body::from_stream(futures::stream::unfold(0usize, |i| async move {
            if i > 0 {
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            (i < COMPONENT.len()).then(|| {
                (
                    Ok::<_, std::io::Error>(Bytes::from(vec![COMPONENT[i]])),
                    i + 1,
                )
            })
        }))
    }

    async fn answer(evil: Evil, req: Request<Body>) -> Response<Body> {
        let path = req.uri().path().to_string();
        let auth = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let reply = |status: StatusCode, body: Body| {
            let mut r = Response::new(body);
            *r.status_mut() = status;
            r
        };
        let method = req.method().to_string();
        evil.seen
            .lock()
            .unwrap()
            .push((method.clone(), path.clone(), auth.clone()));
        if matches!(evil.mode, Mode::PushLeak | Mode::PushForeignUpload) {
            return push_answer(&evil, req, &method, &path, auth.as_deref()).await;
        }
        let bearer_mode = matches!(
            evil.mode,
            Mode::EndlessToken | Mode::ForeignRealm | Mode::OwnRealm
        );
        if path == "/token" {
            evil.token_auth.lock().unwrap().push(auth);
            if evil.mode == Mode::EndlessToken {
                return reply(StatusCode::OK, endless());
            }
            return reply(StatusCode::OK, Body::from("{\"token\":\"t0ken\"}"));
        }
        if bearer_mode && auth.as_deref() != Some("Bearer t0ken") {
            let mut r = reply(StatusCode::UNAUTHORIZED, Body::from("{}"));
            r.headers_mut().insert(
                "www-authenticate",
                HeaderValue::from_str(&format!(
                    "Bearer realm=\"{}/token\",service=\"evil\"",
                    evil.realm
                ))
                .unwrap(),
            );
            return r;
        }
        if path == "/v2/" {
            return reply(StatusCode::OK, Body::from("{}"));
        }
        if let Some(reference) = path.strip_prefix("/v2/plugins/x/manifests/") {
            if reference.ends_with(".minisig") {
                return match evil.mode {
                    Mode::EndlessSignatureManifest => reply(StatusCode::OK, endless()),
                    _ => reply(StatusCode::NOT_FOUND, Body::from("{\"errors\":[]}")),
                };
            }
            if evil.mode == Mode::EndlessManifest {
                return reply(StatusCode::OK, endless());
            }
            let m = manifest();
            let mut r = reply(StatusCode::OK, Body::from(m.clone()));
            let h: &mut HeaderMap = r.headers_mut();
            h.insert(
                "content-type",
                HeaderValue::from_static("application/vnd.oci.image.manifest.v1+json"),
            );
            h.insert(
                "docker-content-digest",
                HeaderValue::from_str(&digest(&m)).unwrap(),
            );
            return r;
        }
        if path.starts_with("/v2/plugins/x/blobs/") {
            if evil.mode == Mode::DripLayer {
                return reply(StatusCode::OK, drip());
            }
            if evil.mode == Mode::EndlessLayer {
                return reply(StatusCode::OK, endless());
            }
            return reply(StatusCode::OK, Body::from(COMPONENT));
        }
        reply(StatusCode::NOT_FOUND, Body::empty())
    }

    /// A registry that takes pushes, for the operator's Basic credentials
    /// only, and (by its mode) names a token realm or an upload location on
    /// another port: what arrives there is recorded.
    async fn push_answer(
        evil: &Evil,
        req: Request<Body>,
        method: &str,
        path: &str,
        auth: Option<&str>,
    ) -> Response<Body> {
        use std::sync::atomic::Ordering;
        let reply = |status: StatusCode, body: Body| {
            let mut r = Response::new(body);
            *r.status_mut() = status;
            r
        };
        if path == "/token" {
            evil.token_auth
                .lock()
                .unwrap()
                .push(auth.map(str::to_string));
            return reply(StatusCode::OK, Body::from("{\"token\":\"t0ken\"}"));
        }
        if path.starts_with("/upload/") {
            // The other port, as an upload location.
            return reply(StatusCode::CREATED, Body::empty());
        }
        let challenge = |value: String| {
            let mut r = reply(StatusCode::UNAUTHORIZED, Body::from("{}"));
            r.headers_mut()
                .insert("www-authenticate", HeaderValue::from_str(&value).unwrap());
            r
        };
        if path == "/v2/" {
            let n = evil.pings.fetch_add(1, Ordering::SeqCst);
            if auth == Some(OPERATOR_BASIC) {
                return reply(StatusCode::OK, Body::from("{}"));
            }
            if n == 0 || evil.mode == Mode::PushForeignUpload {
                return challenge("Basic realm=\"registry\"".to_string());
            }
            return challenge(format!(
                "Bearer realm=\"{}/token\",service=\"evil\"",
                evil.realm
            ));
        }
        if auth != Some(OPERATOR_BASIC) {
            return challenge("Basic realm=\"registry\"".to_string());
        }
        if path.contains("/blobs/uploads/") && method == "POST" {
            let location = if evil.mode == Mode::PushForeignUpload {
                format!("{}/upload/1", evil.realm)
            } else {
                "/v2/plugins/x/blobs/uploads/1?_state=s".to_string()
            };
            let mut r = reply(StatusCode::ACCEPTED, Body::empty());
            r.headers_mut()
                .insert("location", HeaderValue::from_str(&location).unwrap());
            return r;
        }
        if path.contains("/blobs/uploads/") && method == "PUT" {
            return reply(StatusCode::CREATED, Body::empty());
        }
        if path.contains("/blobs/") {
            return reply(StatusCode::NOT_FOUND, Body::empty());
        }
        if let Some(tag) = path.strip_prefix("/v2/plugins/x/manifests/")
            && method == "PUT"
        {
            let body = axum::body::to_bytes(req.into_body(), 1 << 20)
                .await
                .unwrap()
                .to_vec();
            let d = digest(&body);
            evil.pushed.lock().unwrap().push((tag.to_string(), body));
            let mut r = reply(StatusCode::CREATED, Body::empty());
            r.headers_mut()
                .insert("docker-content-digest", HeaderValue::from_str(&d).unwrap());
            return r;
        }
        reply(StatusCode::NOT_FOUND, Body::empty())
    }

    /// Serves the malicious registry (and, for the modes that need one, a
    /// token endpoint or upload location on another port) until the test
    /// ends.
    async fn serve(mode: Mode) -> (String, Evil) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
        let token_auth = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let pings = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let pushed = Arc::new(Mutex::new(Vec::new()));
        let realm = if matches!(
            mode,
            Mode::ForeignRealm | Mode::PushLeak | Mode::PushForeignUpload
        ) {
            let other = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let realm = format!("http://127.0.0.1:{}", other.local_addr().unwrap().port());
            let evil = Evil {
                mode,
                realm: realm.clone(),
                token_auth: token_auth.clone(),
                seen: seen.clone(),
                pings: pings.clone(),
                pushed: pushed.clone(),
            };
            let app =
                axum::Router::new().fallback(move |req: Request<Body>| answer(evil.clone(), req));
            tokio::spawn(async move { axum::serve(other, app).await });
            realm
        } else {
            format!("http://{addr}")
        };
        let evil = Evil {
            mode,
            realm,
            token_auth,
            seen,
            pings,
            pushed,
        };
        let state = evil.clone();
        let app =
            axum::Router::new().fallback(move |req: Request<Body>| answer(state.clone(), req));
        tokio::spawn(async move { axum::serve(listener, app).await });
        (addr, evil)
    }

    /// What a bounded run of `wasmprov` did.
    struct Run {
        out: Output,
        /// Its peak resident memory, from /proc (KiB).
        peak_kib: u64,
        took: Duration,
    }

    fn peak_kib(pid: u32) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
    }

    /// Runs `wasmprov` on `dir`, killing it after `limit` (a failure of the
    /// test) and watching its peak memory while it runs.
    async fn run(dir: &Path, args: &[&str], env: &[(&str, &str)], limit: Duration) -> Run {
        run_in(None, dir, args, env, limit).await
    }

    /// [`run`] in the working directory `cwd`.
    async fn run_in(
        cwd: Option<&Path>,
        dir: &Path,
        args: &[&str],
        env: &[(&str, &str)],
        limit: Duration,
    ) -> Run {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_wasmprov"));
        if let Some(cwd) = cwd {
            cmd.current_dir(cwd);
        }
        cmd.arg("--plugin-dir")
            .arg(dir)
            .args(["--owner", "install-test"])
            .args(args)
            .env_remove("WASMPROV_REGISTRY_USERNAME")
            .env_remove("WASMPROV_REGISTRY_PASSWORD")
            .env("DOCKER_CONFIG", dir.join("no-docker-config"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        tokio::task::spawn_blocking(move || {
            let start = Instant::now();
            let mut child = cmd.spawn().expect("run wasmprov");
            let pid = child.id();
            let mut peak = 0;
            loop {
                if let Some(p) = peak_kib(pid) {
                    peak = peak.max(p);
                }
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                if start.elapsed() > limit || peak > 1 << 20 {
                    let _ = child.kill();
                    let out = child.wait_with_output().unwrap();
                    panic!(
                        "wasmprov ran {:?} and reached {peak} KiB before it was killed: {}",
                        start.elapsed(),
                        text(&out)
                    );
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let took = start.elapsed();
            let out = child.wait_with_output().unwrap();
            Run {
                out,
                peak_kib: peak,
                took,
            }
        })
        .await
        .unwrap()
    }

    /// The registry's endless answers are cut at their bounds: install
    /// fails at once, in a few MiB, saying which answer was too large.
    #[tokio::test(flavor = "multi_thread")]
    async fn endless_manifests_and_token_answers_are_cut_at_their_bounds() {
        for (mode, wants) in [
            (Mode::EndlessManifest, "fetching the manifest of 127.0.0.1"),
            (
                Mode::EndlessSignatureManifest,
                "fetching the signature of 127.0.0.1",
            ),
            (Mode::EndlessToken, "the token answer"),
        ] {
            let (addr, _evil) = serve(mode).await;
            let plugins = tempfile::tempdir().unwrap();
            let r = run(
                plugins.path(),
                &["install", &format!("{addr}/plugins/x:1"), "--yes"],
                &[
                    ("WASMPROV_REGISTRY_USERNAME", "operator"),
                    ("WASMPROV_REGISTRY_PASSWORD", "hunter2"),
                ],
                Duration::from_secs(30),
            )
            .await;
            refused(&r.out, &[wants, "more than"]);
            eprintln!("{mode:?}: refused in {:?}, peak {} KiB", r.took, r.peak_kib);
            assert!(r.peak_kib < 200 << 10, "{mode:?}: {} KiB", r.peak_kib);
            assert!(r.took < Duration::from_secs(15), "{mode:?}: {:?}", r.took);
            assert!(!plugins.path().join("x.wasm").exists());
        }
    }

    /// A layer dripped one byte every 5 s meets the install deadline.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_dripped_layer_meets_the_install_deadline() {
        let (addr, _evil) = serve(Mode::DripLayer).await;
        let plugins = tempfile::tempdir().unwrap();
        let r = run(
            plugins.path(),
            &[
                "install",
                &format!("{addr}/plugins/x:1"),
                "--yes",
                "--timeout",
                "3",
            ],
            &[],
            Duration::from_secs(30),
        )
        .await;
        refused(
            &r.out,
            &["gave up after 3 s", "--timeout", "nothing was changed"],
        );
        assert_eq!(r.out.status.code(), Some(75), "retryable (EX_TEMPFAIL)");
        eprintln!("dripped layer: refused in {:?}", r.took);
        assert!(
            r.took >= Duration::from_secs(3) && r.took < Duration::from_secs(10),
            "{:?}",
            r.took
        );
    }

    /// The operator's registry credentials go to a token realm on the
    /// registry's own host, never to one elsewhere.
    #[tokio::test(flavor = "multi_thread")]
    async fn credentials_go_only_to_the_registrys_own_host() {
        let creds = [
            ("WASMPROV_REGISTRY_USERNAME", "operator"),
            ("WASMPROV_REGISTRY_PASSWORD", "hunter2"),
        ];
        let basic = format!("Basic {}", {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode("operator:hunter2")
        });
        for (mode, sent) in [(Mode::ForeignRealm, false), (Mode::OwnRealm, true)] {
            let (addr, evil) = serve(mode).await;
            let plugins = tempfile::tempdir().unwrap();
            let r = run(
                plugins.path(),
                &["install", &format!("{addr}/plugins/x:1"), "--yes"],
                &creds,
                Duration::from_secs(30),
            )
            .await;
            // The artifact is unsigned, so it is refused either way.
            refused(&r.out, &["is not signed"]);
            let seen = evil.token_auth.lock().unwrap().clone();
            assert!(
                !seen.is_empty(),
                "{mode:?}: the realm was asked for a token"
            );
            assert_eq!(
                seen.iter().any(|a| a.as_deref() == Some(basic.as_str())),
                sent,
                "{mode:?}: {seen:?}"
            );
        }
        // The Docker credential file is read as other OCI clients read it.
        let (addr, evil) = serve(Mode::OwnRealm).await;
        let plugins = tempfile::tempdir().unwrap();
        let docker = plugins.path().join("docker");
        std::fs::create_dir_all(&docker).unwrap();
        let encoded = {
            use base64::Engine as _;
            base64::engine::general_purpose::STANDARD.encode("operator:hunter2")
        };
        let mut auths = serde_json::Map::new();
        auths.insert(addr.clone(), serde_json::json!({ "auth": encoded }));
        std::fs::write(
            docker.join("config.json"),
            serde_json::json!({ "auths": auths }).to_string(),
        )
        .unwrap();
        let r = run(
            plugins.path(),
            &["install", &format!("{addr}/plugins/x:1"), "--yes"],
            &[("DOCKER_CONFIG", docker.to_str().unwrap())],
            Duration::from_secs(30),
        )
        .await;
        refused(&r.out, &["is not signed"]);
        let seen = evil.token_auth.lock().unwrap().clone();
        assert!(
            seen.iter().any(|a| a.as_deref() == Some(basic.as_str())),
            "{seen:?}"
        );
    }

    /// A signature beside a local component is read as untrusted input: a
    /// symlink to /dev/zero and a FIFO are refused at once.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_local_signature_that_is_a_device_or_a_fifo_is_refused_at_once() {
        let work = tempfile::tempdir().unwrap();
        let plugins = work.path().join("plugins.d");
        let component = work.path().join("x.wasm");
        std::fs::write(&component, COMPONENT).unwrap();
        let sig = work.path().join("x.wasm.minisig");
        std::os::unix::fs::symlink("/dev/zero", &sig).unwrap();
        let r = run(
            &plugins,
            &["install", component.to_str().unwrap(), "--yes"],
            &[],
            Duration::from_secs(20),
        )
        .await;
        refused(&r.out, &["x.wasm.minisig"]);
        assert!(r.took < Duration::from_secs(5), "{:?}", r.took);
        assert!(r.peak_kib < 200 << 10, "{} KiB", r.peak_kib);
        std::fs::remove_file(&sig).unwrap();
        nix::unistd::mkfifo(&sig, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let r = run(
            &plugins,
            &["install", component.to_str().unwrap(), "--yes"],
            &[],
            Duration::from_secs(20),
        )
        .await;
        refused(&r.out, &["FIFO"]);
        assert!(r.took < Duration::from_secs(5), "{:?}", r.took);
    }

    /// Pre-planted symlinks at the names install used to write through
    /// (and at the targets) are replaced, never followed.
    #[tokio::test(flavor = "multi_thread")]
    async fn install_writes_never_follow_planted_symlinks() {
        let work = tempfile::tempdir().unwrap();
        let plugins = work.path().join("plugins.d");
        let (key, public) = keys(work.path(), "release");
        trust(&plugins, &[("release", &public)], &[]);
        let outside = work.path().join("precious.txt");
        std::fs::write(&outside, "precious").unwrap();
        for name in [
            ".x.wasm.installing",
            ".x.toml.installing",
            "x.toml",
            "x.wasm.minisig",
            ".wasmprov.lock.tmp",
        ] {
            std::os::unix::fs::symlink(&outside, plugins.join(name)).unwrap();
        }
        let component = work.path().join("x.wasm");
        std::fs::write(&component, COMPONENT).unwrap();
        let sig = sign_for(&key, COMPONENT, "x");
        std::fs::write(work.path().join("x.wasm.minisig"), sig).unwrap();
        let r = run(
            &plugins,
            &["install", component.to_str().unwrap(), "--yes"],
            &[],
            Duration::from_secs(20),
        )
        .await;
        assert!(r.out.status.success(), "{}", text(&r.out));
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "precious");
        for name in ["x.wasm", "x.toml", "x.wasm.minisig", "wasmprov.lock"] {
            let meta = std::fs::symlink_metadata(plugins.join(name)).unwrap();
            assert!(meta.is_file(), "{name} is a regular file");
        }
    }

    /// `push` sends the registry's credentials to the registry's own host
    /// only: not to a token realm on another port that a second `/v2/`
    /// names (oci-client used to ask again and send them there), nor to an
    /// upload location on another port.
    #[tokio::test(flavor = "multi_thread")]
    async fn push_sends_credentials_only_to_the_registrys_own_host() {
        let creds = [
            ("WASMPROV_REGISTRY_USERNAME", "operator"),
            ("WASMPROV_REGISTRY_PASSWORD", "hunter2"),
        ];
        let work = tempfile::tempdir().unwrap();
        let component = work.path().join("x.wasm");
        std::fs::write(&component, COMPONENT).unwrap();
        for mode in [Mode::PushLeak, Mode::PushForeignUpload] {
            let (addr, evil) = serve(mode).await;
            let r = run(
                work.path(),
                &[
                    "push",
                    component.to_str().unwrap(),
                    &format!("{addr}/plugins/x:1"),
                ],
                &creds,
                Duration::from_secs(30),
            )
            .await;
            let seen = evil.seen.lock().unwrap().clone();
            let elsewhere: Vec<_> = seen
                .iter()
                .filter(|(_, path, auth)| {
                    (path == "/token" || path.starts_with("/upload/")) && auth.is_some()
                })
                .collect();
            assert!(
                elsewhere.is_empty(),
                "{mode:?}: credentials left for another host: {elsewhere:?}\n{}",
                text(&r.out)
            );
            assert!(r.out.status.success(), "{mode:?}: {}", text(&r.out));
            // The manifest reached the registry, with the operator's credentials.
            let pushed = evil.pushed.lock().unwrap().clone();
            assert_eq!(pushed.len(), 1, "{mode:?}: {seen:?}");
            assert_eq!(pushed[0].0, "1");
            let m: serde_json::Value = serde_json::from_slice(&pushed[0].1).unwrap();
            assert_eq!(m["layers"][0]["mediaType"], "application/wasm", "{m}");
            assert_eq!(m["layers"][0]["digest"], digest(COMPONENT), "{m}");
            assert_eq!(m["annotations"]["dev.wasmprov.plugin"], "x", "{m}");
            if mode == Mode::PushForeignUpload {
                assert!(
                    seen.iter().any(|(_, p, _)| p.starts_with("/upload/")),
                    "{seen:?}"
                );
            }
        }
    }

    /// A Docker credential helper that hangs is bounded by the install
    /// deadline and killed with everything it started.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_hanging_credential_helper_meets_the_deadline_and_is_killed() {
        let (addr, _evil) = serve(Mode::OwnRealm).await;
        let work = tempfile::tempdir().unwrap();
        let bin = work.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        let helper = bin.join("docker-credential-hang");
        std::fs::write(
            &helper,
            format!(
                "#!/bin/sh\necho $$ > {dir}/helper.pid\nsleep 30 &\necho $! > {dir}/sleep.pid\nwait\necho '{{\"Username\":\"u\",\"Secret\":\"p\"}}'\n",
                dir = work.path().display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
        let docker = work.path().join("docker");
        std::fs::create_dir_all(&docker).unwrap();
        std::fs::write(docker.join("config.json"), r#"{"credsStore":"hang"}"#).unwrap();
        let path = format!(
            "{}:{}",
            bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let plugins = work.path().join("plugins.d");
        let r = run(
            &plugins,
            &[
                "install",
                &format!("{addr}/plugins/x:1"),
                "--yes",
                "--timeout",
                "3",
            ],
            &[("DOCKER_CONFIG", docker.to_str().unwrap()), ("PATH", &path)],
            Duration::from_secs(20),
        )
        .await;
        refused(&r.out, &["gave up after 3 s", "nothing was changed"]);
        eprintln!("hanging credential helper: refused in {:?}", r.took);
        assert!(r.took < Duration::from_secs(8), "{:?}", r.took);
        // The helper ran, and neither it nor its child outlives the install.
        let alive = |file: &str| {
            let pid = std::fs::read_to_string(work.path().join(file)).unwrap();
            let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
            stat.is_ok_and(|s| !s.contains(") Z "))
        };
        std::thread::sleep(Duration::from_millis(300));
        assert!(!alive("helper.pid"), "the helper still runs");
        assert!(!alive("sleep.pid"), "the helper's child still runs");
    }

    /// An extra custom section: another component with the same meaning.
    fn variant(tag: u8) -> Vec<u8> {
        let mut bytes = COMPONENT.to_vec();
        bytes.extend_from_slice(&[0, 2, 1, tag]);
        bytes
    }

    fn lock_text(plugins: &Path) -> String {
        std::fs::read_to_string(plugins.join("wasmprov.lock")).unwrap_or_default()
    }

    /// A directory planted at a file install replaces makes the install
    /// fail before anything is written: the component, its signature, its
    /// manifest and the lock stay as they were.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_failed_install_changes_nothing() {
        for planted in ["x.toml", "x.wasm.minisig"] {
            let work = tempfile::tempdir().unwrap();
            let plugins = work.path().join("plugins.d");
            trust(&plugins, &[], &["x"]);
            let component = work.path().join("x.wasm");
            std::fs::write(&component, variant(1)).unwrap();
            let r = run(
                &plugins,
                &["install", component.to_str().unwrap(), "--yes"],
                &[],
                Duration::from_secs(20),
            )
            .await;
            assert!(r.out.status.success(), "{}", text(&r.out));
            let before_lock = lock_text(&plugins);
            let _ = std::fs::remove_file(plugins.join(planted));
            std::fs::create_dir(plugins.join(planted)).unwrap();
            std::fs::write(plugins.join(planted).join("keep"), "x").unwrap();
            let manifest_before = std::fs::read(plugins.join("x.toml")).ok();
            std::fs::write(&component, variant(2)).unwrap();
            let r = run(
                &plugins,
                &["install", component.to_str().unwrap(), "--yes"],
                &[],
                Duration::from_secs(20),
            )
            .await;
            refused(&r.out, &[planted, "nothing was changed"]);
            assert_eq!(
                std::fs::read(plugins.join("x.wasm")).unwrap(),
                variant(1),
                "{planted}: the component was replaced"
            );
            assert_eq!(lock_text(&plugins), before_lock, "{planted}");
            assert_eq!(std::fs::read(plugins.join("x.toml")).ok(), manifest_before);
            assert!(plugins.join(planted).join("keep").is_file());
        }
    }

    /// Installs running at once into one directory keep every lock entry.
    #[tokio::test(flavor = "multi_thread")]
    async fn concurrent_installs_keep_every_lock_entry() {
        let names = ["a", "b", "c", "d", "e", "f"];
        let work = tempfile::tempdir().unwrap();
        for name in names {
            std::fs::write(work.path().join(format!("{name}.wasm")), COMPONENT).unwrap();
        }
        let mut lost = Vec::new();
        for round in 0..5 {
            let plugins = work.path().join(format!("plugins-{round}.d"));
            trust(&plugins, &[], &names);
            let children: Vec<Child> = names
                .iter()
                .map(|name| {
                    Command::new(env!("CARGO_BIN_EXE_wasmprov"))
                        .arg("--plugin-dir")
                        .arg(&plugins)
                        .args(["install", "--yes"])
                        .arg(work.path().join(format!("{name}.wasm")))
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::piped())
                        .spawn()
                        .unwrap()
                })
                .collect();
            for child in children {
                let out = child.wait_with_output().unwrap();
                assert!(out.status.success(), "{}", text(&out));
            }
            let lock = lock_text(&plugins);
            let entries = lock.matches("[plugins.").count();
            if entries != names.len() {
                lost.push(format!("round {round}: {entries} entries"));
            }
        }
        assert!(lost.is_empty(), "lock entries lost: {lost:?}");
    }

    /// An update that moves an effective grant (a config default feeding a
    /// template) says so, even when the declaration's text is unchanged.
    #[tokio::test(flavor = "multi_thread")]
    async fn an_update_shows_a_grant_a_default_moved() {
        let work = tempfile::tempdir().unwrap();
        let plugins = work.path().join("plugins.d");
        trust(&plugins, &[], &["x"]);
        let declared = |dir: &str, endpoint: &str| {
            let d = work.path().join(dir);
            std::fs::create_dir_all(&d).unwrap();
            let component = d.join("x.wasm");
            std::fs::write(&component, COMPONENT).unwrap();
            let caps = d.join("capabilities.toml");
            std::fs::write(
                &caps,
                format!(
                    "[[http]]\nurl = \"{{endpoint}}\"\nwhy = \"the API\"\n[config.endpoint]\nwhy = \"base URL\"\ndefault = \"{endpoint}\"\n"
                ),
            )
            .unwrap();
            ok(&wasmprov(
                work.path(),
                &[
                    "declare",
                    component.to_str().unwrap(),
                    "--capabilities",
                    caps.to_str().unwrap(),
                ],
            ));
            component
        };
        let v1 = declared("v1", "https://api.example.com/v1");
        let v2 = declared("v2", "https://collector.evil.example/v1");
        ok(&wasmprov(
            &plugins,
            &["install", v1.to_str().unwrap(), "--yes"],
        ));
        let out = wasmprov(&plugins, &["install", v2.to_str().unwrap()]);
        refused(
            &out,
            &[
                "UPDATE of the installed x",
                "- http https://api.example.com",
                "+ http https://collector.evil.example",
                "not confirmed",
            ],
        );
        let all = text(&out);
        assert!(!all.contains("grants in effect: unchanged"), "{all}");
    }

    /// A plugin may not be named after the directory's own files
    /// (`wasmprov` → `wasmprov.toml`): refused at install, `--name`, push.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_plugin_named_like_the_directorys_own_files_is_refused() {
        let work = tempfile::tempdir().unwrap();
        let plugins = work.path().join("plugins.d");
        trust(&plugins, &[], &["wasmprov", "x"]);
        let settings = std::fs::read(plugins.join("wasmprov.toml")).unwrap();
        let component = work.path().join("wasmprov.wasm");
        std::fs::write(&component, COMPONENT).unwrap();
        let other = work.path().join("x.wasm");
        std::fs::write(&other, COMPONENT).unwrap();
        for args in [
            vec!["install", component.to_str().unwrap(), "--yes"],
            vec![
                "install",
                other.to_str().unwrap(),
                "--name",
                "wasmprov",
                "--yes",
            ],
            vec![
                "push",
                other.to_str().unwrap(),
                "127.0.0.1:9/plugins/x:1",
                "--name",
                "wasmprov",
            ],
            vec![
                "push",
                other.to_str().unwrap(),
                "127.0.0.1:9/plugins/wasmprov:1",
            ],
        ] {
            let r = run(&plugins, &args, &[], Duration::from_secs(20)).await;
            refused(&r.out, &["\"wasmprov\"", "reserved"]);
            assert_eq!(
                std::fs::read(plugins.join("wasmprov.toml")).unwrap(),
                settings,
                "{args:?}"
            );
            assert!(!plugins.join("wasmprov.wasm").exists(), "{args:?}");
        }
    }

    /// A reference naming a registry host is fetched from the registry,
    /// even when the same text is also a relative path to a file here.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_registry_reference_is_never_read_as_a_local_path() {
        let (addr, _evil) = serve(Mode::OwnRealm).await;
        let work = tempfile::tempdir().unwrap();
        let plugins = work.path().join("plugins.d");
        trust(&plugins, &[], &["x"]);
        let reference = format!("{addr}/plugins/x:1");
        let planted = work.path().join(&reference);
        std::fs::create_dir_all(planted.parent().unwrap()).unwrap();
        std::fs::write(&planted, variant(9)).unwrap();
        let r = run_in(
            Some(work.path()),
            &plugins,
            &["install", &reference, "--yes"],
            &[],
            Duration::from_secs(20),
        )
        .await;
        assert!(r.out.status.success(), "{}", text(&r.out));
        assert_eq!(std::fs::read(plugins.join("x.wasm")).unwrap(), COMPONENT);
        assert!(
            lock_text(&plugins).contains("@sha256:"),
            "{}",
            lock_text(&plugins)
        );
        // `./` makes the same text a path.
        let r = run_in(
            Some(work.path()),
            &plugins,
            &["install", &format!("./{reference}"), "--name", "x", "--yes"],
            &[],
            Duration::from_secs(20),
        )
        .await;
        assert!(r.out.status.success(), "{}", text(&r.out));
        assert_eq!(std::fs::read(plugins.join("x.wasm")).unwrap(), variant(9));
    }

    /// The layer is read up to the size its descriptor declares, not up
    /// to the largest component accepted.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_layer_is_read_only_up_to_its_declared_size() {
        let (addr, _evil) = serve(Mode::EndlessLayer).await;
        let plugins = tempfile::tempdir().unwrap();
        let r = run(
            plugins.path(),
            &["install", &format!("{addr}/plugins/x:1"), "--yes"],
            &[],
            Duration::from_secs(30),
        )
        .await;
        refused(&r.out, &[&format!("more than {} bytes", COMPONENT.len())]);
        eprintln!(
            "endless layer: refused in {:?}, peak {} KiB",
            r.took, r.peak_kib
        );
        assert!(!plugins.path().join("x.wasm").exists());
    }

    /// The registry no longer decides trust: the name is the operator's
    /// (an annotation cannot pick an opted-out name), a signature binds the
    /// name it was made for, and an older signed version re-tagged is
    /// called a downgrade and refused unless asked for.
    #[test]
    fn the_registry_cannot_pick_the_name_the_signer_or_a_downgrade() {
        let registry = Registry::start();
        let work = tempfile::tempdir().unwrap();
        let built = bundled();
        let file = |name: &str| built.path().join(name).to_str().unwrap().to_string();
        let (key, public) = keys(work.path(), "acme");
        let plugins = work.path().join("plugins.d");
        trust(&plugins, &[("acme", &public)], &["my-local-build"]);
        let at = |repo: &str| format!("{}/plugins/{repo}", registry.addr);

        // An unsigned artifact annotated with the opted-out name.
        ok(&wasmprov(
            work.path(),
            &[
                "push",
                &file("hetzner.wasm"),
                &format!("{}:1", at("evil")),
                "--name",
                "my-local-build",
            ],
        ));
        let out = wasmprov(
            &plugins,
            &["install", &format!("{}:1", at("evil")), "--yes"],
        );
        refused(&out, &["is not signed", "unsigned = [\"evil\"]"]);
        assert!(!plugins.join("my-local-build.wasm").exists());
        assert!(!plugins.join("evil.wasm").exists());

        // A vendor-signed component for `normal`, offered as `victim`.
        ok(&wasmprov(
            work.path(),
            &[
                "push",
                &file("hetzner.wasm"),
                &format!("{}:1", at("victim")),
                "--sign",
                key.to_str().unwrap(),
            ],
        ));
        ok(&wasmprov(
            &plugins,
            &["install", &format!("{}:1", at("victim")), "--yes"],
        ));
        let victim = std::fs::read(plugins.join("victim.wasm")).unwrap();
        ok(&wasmprov(
            work.path(),
            &[
                "push",
                &file("digitalocean.wasm"),
                &format!("{}:1", at("normal")),
                "--sign",
                key.to_str().unwrap(),
            ],
        ));
        let out = wasmprov(
            &plugins,
            &[
                "install",
                &format!("{}:1", at("normal")),
                "--name",
                "victim",
                "--yes",
            ],
        );
        refused(
            &out,
            &["signed by acme for plugin \"normal\", not for \"victim\""],
        );
        assert_eq!(std::fs::read(plugins.join("victim.wasm")).unwrap(), victim);
        // Installed under its own name it is fine, and its signature is kept beside it.
        ok(&wasmprov(
            &plugins,
            &["install", &format!("{}:1", at("normal")), "--yes"],
        ));
        assert!(plugins.join("normal.wasm.minisig").is_file());

        // Version 1.0, then 2.0; the 1.0 artifact re-tagged `latest`.
        let v1 = json(&wasmprov(
            work.path(),
            &[
                "--json",
                "push",
                &file("hetzner.wasm"),
                &format!("{}:1.0", at("app")),
                "--sign",
                key.to_str().unwrap(),
            ],
        ))["manifest_digest"]
            .as_str()
            .unwrap()
            .to_string();
        ok(&wasmprov(
            work.path(),
            &[
                "push",
                &file("cloud-init.wasm"),
                &format!("{}:2.0", at("app")),
                "--sign",
                key.to_str().unwrap(),
            ],
        ));
        let installed = ok(&wasmprov(
            &plugins,
            &["install", &format!("{}:2.0", at("app")), "--yes"],
        ));
        assert!(installed.contains("version 2.0"), "{installed}");
        let retag = Command::new("curl")
            .args(["-sf", "-o"])
            .arg(work.path().join("m.json"))
            .args([
                "-H",
                "Accept: application/vnd.oci.image.manifest.v1+json",
                &format!("http://{}/v2/plugins/app/manifests/{v1}", registry.addr),
            ])
            .status()
            .unwrap();
        assert!(retag.success());
        let put = Command::new("curl")
            .args([
                "-sf",
                "-X",
                "PUT",
                "-H",
                "Content-Type: application/vnd.oci.image.manifest.v1+json",
                "--data-binary",
            ])
            .arg(format!("@{}", work.path().join("m.json").display()))
            .arg(format!(
                "http://{}/v2/plugins/app/manifests/latest",
                registry.addr
            ))
            .status()
            .unwrap();
        assert!(put.success());
        let app = std::fs::read(plugins.join("app.wasm")).unwrap();
        let out = wasmprov(
            &plugins,
            &["install", &format!("{}:latest", at("app")), "--yes"],
        );
        refused(
            &out,
            &[
                "DOWNGRADE of the installed app: version 1.0 is older than the installed 2.0",
                "--allow-downgrade",
            ],
        );
        assert_eq!(std::fs::read(plugins.join("app.wasm")).unwrap(), app);
        let out = ok(&wasmprov(
            &plugins,
            &[
                "install",
                &format!("{}:latest", at("app")),
                "--yes",
                "--allow-downgrade",
            ],
        ));
        assert!(out.contains("DOWNGRADE"), "{out}");
    }

    /// The screen shows each secret's host variable and marks what is
    /// DANGEROUS, with the values that filled a template; `inspect` and
    /// the load warnings say the same.
    #[test]
    fn the_confirmation_screen_and_inspect_flag_dangerous_requests() {
        let work = tempfile::tempdir().unwrap();
        let plugins = work.path().join("plugins.d");
        let (key, public) = keys(work.path(), "acme");
        trust(&plugins, &[("acme", &public)], &[]);
        let component = work.path().join("victim.wasm");
        std::fs::write(&component, COMPONENT).unwrap();
        let caps = work.path().join("capabilities.toml");
        std::fs::write(
            &caps,
            r#"
[[http]]
url = "https://{region}.api.example.com"
why = "the API"
[[http]]
url = "https://*.com"
why = "everything"
[[http]]
url = "http://127.0.0.1:*"
why = "local"
[[exec]]
program = "/bin/sh"
args = ["-c", "*"]
env = ["LD_PRELOAD"]
why = "a shell"
[config.region]
why = "where"
default = "evil.example/#"
[secrets.token]
why = "a read/write API token"
env = "AWS_SECRET_ACCESS_KEY"
[secrets.daemon]
why = "the daemon"
env = "WASMPROV_SERVE_TOKEN"
"#,
        )
        .unwrap();
        ok(&wasmprov(
            work.path(),
            &[
                "declare",
                component.to_str().unwrap(),
                "--capabilities",
                caps.to_str().unwrap(),
            ],
        ));
        let bytes = std::fs::read(&component).unwrap();
        std::fs::write(
            work.path().join("victim.wasm.minisig"),
            sign_for(&key, &bytes, "victim"),
        )
        .unwrap();
        let out = wasmprov(&plugins, &["install", component.to_str().unwrap()]);
        refused(
            &out,
            &[
                "secret  token  [granted from $AWS_SECRET_ACCESS_KEY]",
                "DANGEROUS: $AWS_SECRET_ACCESS_KEY belongs to AWS's credential chain",
                "DANGEROUS: $WASMPROV_SERVE_TOKEN is a variable of the host itself",
                "from https://{region}.api.example.com with region = \"evil.example/#\" (the plugin's default)",
                "is not a plain host name part",
                "DANGEROUS: *.com is wider than one registrable domain",
                "any port: every service on that host",
                "DANGEROUS: 127.0.0.1 is a loopback address",
                "DANGEROUS: /bin/sh is a shell",
                "not confirmed",
            ],
        );
        let installed = json(&wasmprov(
            &plugins,
            &["--json", "install", component.to_str().unwrap(), "--yes"],
        ));
        let dangerous = installed["dangerous"].as_array().unwrap();
        assert_eq!(dangerous.len(), 6, "{installed}");
    }

    /// Grants that meet loopback, link-local or metadata addresses inside a
    /// network, wildcards over shared cloud domains, a template in the
    /// scheme, runners and loader variables the lists missed, a cloud's
    /// credentials whatever the plugin's name, and line separators in the
    /// plugin's text: flagged (and escaped) at install, by `inspect`, and
    /// among the load warnings; never written raw into the manifest.
    #[test]
    fn wider_dangers_are_flagged_at_install_inspect_and_load() {
        let work = tempfile::tempdir().unwrap();
        let plugins = work.path().join("plugins.d");
        trust(&plugins, &[], &["aws-cost", "probe"]);
        let component = work.path().join("aws-cost.wasm");
        std::fs::write(&component, COMPONENT).unwrap();
        let caps = work.path().join("capabilities.toml");
        std::fs::write(
            &caps,
            r#"
[[http]]
url = "{scheme}://api.example.com/v1"
why = "the API"
[[http]]
url = "https://*.amazonaws.com"
why = "buckets\u2028allow = [\"https://*.com\"]"
[[http]]
url = "https://[fd00:ec2::254]"
why = "metadata"
[[exec]]
program = "/usr/bin/flock"
args = ["*"]
env = ["GIT_CONFIG_COUNT"]
why = "locks"
[config.scheme]
why = "scheme"
default = "https"
[config.zone]
why = "zone"
default = "eu\u202e1"
[secrets.key]
why = "a key"
env = "AWS_SECRET_ACCESS_KEY"
"#,
        )
        .unwrap();
        ok(&wasmprov(
            work.path(),
            &[
                "declare",
                component.to_str().unwrap(),
                "--capabilities",
                caps.to_str().unwrap(),
            ],
        ));
        let out = wasmprov(&plugins, &["install", component.to_str().unwrap()]);
        refused(
            &out,
            &[
                "takes its scheme from a config value",
                "DANGEROUS: *.amazonaws.com is wider than one registrable domain",
                "buckets\\u{2028}allow",
                "fd00:ec2::254 is a cloud metadata (AWS) address",
                "DANGEROUS: /usr/bin/flock is a shell, interpreter or program runner",
                "the plugin may set GIT_CONFIG_COUNT",
                "DANGEROUS: $AWS_SECRET_ACCESS_KEY belongs to AWS's credential chain",
                "not confirmed",
            ],
        );
        assert!(!text(&out).contains('\u{2028}'), "{}", text(&out));
        let installed = json(&wasmprov(
            &plugins,
            &["--json", "install", component.to_str().unwrap(), "--yes"],
        ));
        assert_eq!(
            installed["dangerous"].as_array().unwrap().len(),
            5,
            "{installed}"
        );
        let written = std::fs::read_to_string(plugins.join("aws-cost.toml")).unwrap();
        assert!(
            !written.contains(['\u{2028}', '\u{202e}']),
            "raw in the manifest: {written}"
        );
        assert!(written.contains("buckets\\u{2028}allow"), "{written}");
        assert_eq!(written.matches("https://*.com").count(), 1, "{written}");

        // A real component under a manifest the operator wrote: inspect
        // and the load warnings say the same.
        let built = bundled();
        std::fs::copy(
            built.path().join("hetzner.wasm"),
            plugins.join("probe.wasm"),
        )
        .unwrap();
        std::fs::write(
            plugins.join("probe.toml"),
            "name = \"probe\"\ncomponent = \"probe.wasm\"\n[secrets]\ntoken = { env = \"HCLOUD_TOKEN\" }\n[http]\nallow = [\"https://[127.128.0.0/9]:8080\", \"https://[169.254.170.0/24]\", \"https://[fe80::1:0/112]\", \"https://100.100.100.200\", \"https://*.windows.net\"]\n",
        )
        .unwrap();
        let table = ok(&wasmprov(&plugins, &["inspect", "probe"]));
        for wants in [
            "the network 127.128.0.0/9 contains loopback addresses",
            "the network 169.254.170.0/24 contains link-local",
            "the network fe80::1:0/112 contains link-local",
            "100.100.100.200 is a cloud metadata (Alibaba Cloud) address",
            "*.windows.net is wider than one registrable domain",
            "$HCLOUD_TOKEN belongs to Hetzner's credential chain",
        ] {
            assert!(table.contains(wants), "inspect lacks {wants:?}: {table}");
        }
        let list = wasmprov(&plugins, &["--json", "plugins"]);
        let all = text(&list);
        for wants in [
            "DANGEROUS http https://[127.128.0.0/9]:8080: the network 127.128.0.0/9 contains loopback",
            "DANGEROUS http https://[fe80::1:0/112]",
            "DANGEROUS http https://100.100.100.200",
            "DANGEROUS http https://*.windows.net",
        ] {
            assert!(all.contains(wants), "load warnings lack {wants:?}: {all}");
        }
    }

    /// A key made with `minisign -G -W` (no password, the usual CI key)
    /// signs with `push --sign`, whatever WASMPROV_SIGNING_PASSWORD says;
    /// a legacy signature (`minisign -S -l`) by a trusted key is refused
    /// as legacy, not with advice to trust a key that is trusted.
    #[test]
    fn password_less_keys_sign_and_legacy_signatures_say_what_they_are() {
        let registry = Registry::start();
        let work = tempfile::tempdir().unwrap();
        let w = work.path();
        let built = bundled();
        let keygen = Command::new("minisign")
            .args(["-G", "-W", "-p"])
            .arg(w.join("ci.pub"))
            .arg("-s")
            .arg(w.join("ci.key"))
            .stdin(Stdio::null())
            .output()
            .expect("the `minisign` program");
        assert!(keygen.status.success(), "{}", text(&keygen));
        let public = std::fs::read_to_string(w.join("ci.pub")).unwrap();
        let public = public.lines().last().unwrap().to_string();
        let plugins = w.join("plugins.d");
        trust(&plugins, &[("ci", &public)], &[]);
        let component = built.path().join("hetzner.wasm");
        for password in [None, Some("irrelevant")] {
            let mut push = Command::new(env!("CARGO_BIN_EXE_wasmprov"));
            push.arg("push")
                .arg(&component)
                .arg(format!("{}/plugins/hetzner:1", registry.addr))
                .arg("--sign")
                .arg(w.join("ci.key"))
                .env_remove("WASMPROV_SIGNING_PASSWORD");
            if let Some(p) = password {
                push.env("WASMPROV_SIGNING_PASSWORD", p);
            }
            let out = push.output().unwrap();
            assert!(ok(&out).contains("signed"), "{}", text(&out));
        }
        let out = ok(&wasmprov(
            &plugins,
            &[
                "install",
                &format!("{}/plugins/hetzner:1", registry.addr),
                "--yes",
            ],
        ));
        assert!(out.contains("signer:    ci"), "{out}");

        // A legacy signature by the trusted key.
        let local = w.join("legacy").join("hetzner.wasm");
        std::fs::create_dir_all(local.parent().unwrap()).unwrap();
        std::fs::copy(&component, &local).unwrap();
        let sign = Command::new("minisign")
            .args(["-S", "-l", "-s"])
            .arg(w.join("ci.key"))
            .arg("-m")
            .arg(&local)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(sign.status.success(), "{}", text(&sign));
        let fresh = w.join("fresh.d");
        trust(&fresh, &[("ci", &public)], &[]);
        let out = wasmprov(&fresh, &["install", local.to_str().unwrap(), "--yes"]);
        refused(
            &out,
            &["legacy minisign signature", "by the trusted key ci"],
        );
        assert!(
            !text(&out).contains("trust the signer's key"),
            "{}",
            text(&out)
        );
    }

    /// A minisign signature with `wasmprov push`'s trusted comment.
    fn sign_for(key_file: &Path, bytes: &[u8], plugin: &str) -> String {
        let text = std::fs::read_to_string(key_file).unwrap();
        let sk = minisign::SecretKey::from_unencrypted_box(
            minisign::SecretKeyBox::from_string(&text).unwrap(),
        )
        .unwrap();
        minisign::sign(
            None,
            &sk,
            std::io::Cursor::new(bytes),
            Some(&format!(
                "wasmprov plugin {plugin} sha256:{} timestamp:1",
                sha256_hex(bytes)
            )),
            None,
        )
        .unwrap()
        .into_string()
    }
}
