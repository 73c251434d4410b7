//! The AWS EC2 plugin, loaded by the real host, against moto's EC2, IAM and
//! STS with SigV4 checking on.
//!
//! Each test starts its own moto server on 127.0.0.1 with
//! `INITIAL_NO_AUTH_ACTION_COUNT` set to the number of bootstrap calls: the
//! test creates an IAM user with an access key and an inline `ec2:*`
//! policy, a role it assumes through STS for temporary credentials, and
//! looks up an AMI; every request after those is verified against the IAM
//! keys (signature and policy), which the test checks before it starts.
//!
//! Without moto (`pip install 'moto[server]'`) the tests say so and pass.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmprov_api::{
    CapacityType, CloudProvisioner, JoinState, NodeShape, ProvisionRequest, ProvisionerError,
};
use wasmprov_host::{Host, HostBuilder};
use wasmprov_tests::{PluginDir, guests};

const OWNER: &str = "test-owner";
const REGION: &str = "us-east-1";
/// Every test is over well within this.
const TEST_LIMIT: Duration = Duration::from_secs(60);

/// Requests moto serves without checking signatures: the bootstrap below.
const BOOTSTRAP_CALLS: u32 = 7;

fn moto_available() -> bool {
    Command::new("python3")
        .args(["-c", "import moto, moto.server"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

macro_rules! require_moto {
    () => {
        if !moto_available() {
            eprintln!("skipping: moto is not installed (pip install 'moto[server]')");
            return;
        }
    };
}

/// A moto server this test started; killed when dropped.
struct Moto {
    child: Child,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Moto {
    /// Starts moto on a free loopback port and waits until it accepts
    /// connections.
    async fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("moto.log");
        let out = std::fs::File::create(&log).expect("moto log");
        let child = Command::new("python3")
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .env("INITIAL_NO_AUTH_ACTION_COUNT", BOOTSTRAP_CALLS.to_string())
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log handle"))
            .stderr(out)
            .spawn()
            .expect("starting python3 -m moto.server");
        let mut moto = Self {
            child,
            port,
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return moto;
            }
            if let Ok(Some(status)) = moto.child.try_wait() {
                panic!("moto exited early ({status}):\n{}", moto.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "moto did not listen within 30 s:\n{}",
                moto.log_text()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = self.log_text();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!(
                "moto log (last lines):\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
    }
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A form-encoded Query API `POST /` to moto, unsigned: the `Authorization`
/// header only names the service so that moto routes the request. Moto
/// accepts it for the first [`BOOTSTRAP_CALLS`] requests only.
async fn unsigned(port: u16, service: &str, params: &[(&str, &str)]) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    let body = body.join("&");
    let head = format!(
        "POST / HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\n\
         content-type: application/x-www-form-urlencoded; charset=utf-8\r\n\
         authorization: AWS4-HMAC-SHA256 Credential=AKIDBOOTSTRAP/20250101/{REGION}/{service}/aws4_request, SignedHeaders=host, Signature=00\r\n\
         content-length: {}\r\n\r\n",
        body.len()
    );
    let mut sock = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to moto");
    sock.write_all(head.as_bytes()).await.expect("write");
    sock.write_all(body.as_bytes()).await.expect("write");
    let mut raw = Vec::new();
    sock.read_to_end(&mut raw).await.expect("read");
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    (status, body.to_string())
}

/// The text of the first `<tag>…</tag>` in `xml`.
fn between(xml: &str, tag: &str) -> String {
    let open = format!("<{tag}>");
    let start = xml
        .find(&open)
        .unwrap_or_else(|| panic!("no <{tag}> in {xml}"))
        + open.len();
    let end = xml[start..]
        .find(&format!("</{tag}>"))
        .unwrap_or_else(|| panic!("no </{tag}> in {xml}"));
    xml[start..start + end].to_string()
}

/// AWS credentials as the plugin's secrets.
#[derive(Clone, Debug)]
struct Creds {
    key: String,
    secret: String,
    token: Option<String>,
}

/// What the bootstrap made.
struct Account {
    /// The IAM user's long-term key, allowed `ec2:*`.
    user: Creds,
    /// Temporary credentials of a role allowed `ec2:*`.
    role: Creds,
    /// An AMI moto knows.
    image_id: String,
}

const EC2_ALL: &str =
    r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ec2:*","Resource":"*"}]}"#;
const TRUST_ANYONE: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":"sts:AssumeRole"}]}"#;

/// Exactly [`BOOTSTRAP_CALLS`] unsigned calls, then a check that moto now
/// refuses unsigned requests.
async fn bootstrap(moto: &Moto) -> Account {
    let port = moto.port;
    let iam = |params: Vec<(&'static str, &'static str)>| async move {
        let mut all = vec![("Version", "2010-05-08")];
        all.extend(params);
        let (status, body) = unsigned(port, "iam", &all).await;
        assert_eq!(status, 200, "{body}");
        body
    };
    iam(vec![("Action", "CreateUser"), ("UserName", "wasmprov")]).await;
    let key = iam(vec![
        ("Action", "CreateAccessKey"),
        ("UserName", "wasmprov"),
    ])
    .await;
    iam(vec![
        ("Action", "PutUserPolicy"),
        ("UserName", "wasmprov"),
        ("PolicyName", "ec2-all"),
        ("PolicyDocument", EC2_ALL),
    ])
    .await;
    let role = iam(vec![
        ("Action", "CreateRole"),
        ("RoleName", "wasmprov-nodes"),
        ("AssumeRolePolicyDocument", TRUST_ANYONE),
    ])
    .await;
    iam(vec![
        ("Action", "PutRolePolicy"),
        ("RoleName", "wasmprov-nodes"),
        ("PolicyName", "ec2-all"),
        ("PolicyDocument", EC2_ALL),
    ])
    .await;
    let role_arn = between(&role, "Arn");
    let (status, session) = unsigned(
        port,
        "sts",
        &[
            ("Action", "AssumeRole"),
            ("Version", "2011-06-15"),
            ("RoleArn", &role_arn),
            ("RoleSessionName", "wasmprov-test"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{session}");
    let (status, images) = unsigned(
        port,
        "ec2",
        &[
            ("Action", "DescribeImages"),
            ("Version", "2016-11-15"),
            ("Owner.1", "amazon"),
        ],
    )
    .await;
    assert_eq!(status, 200, "{images}");

    // From here on moto checks every request: an unsigned one is refused.
    let (status, refused) = unsigned(
        port,
        "ec2",
        &[("Action", "DescribeInstances"), ("Version", "2016-11-15")],
    )
    .await;
    assert_eq!(status, 401, "moto must check signatures now: {refused}");
    assert!(refused.contains("AuthFailure"), "{refused}");

    Account {
        user: Creds {
            key: between(&key, "AccessKeyId"),
            secret: between(&key, "SecretAccessKey"),
            token: None,
        },
        role: Creds {
            key: between(&session, "AccessKeyId"),
            secret: between(&session, "SecretAccessKey"),
            token: Some(between(&session, "SessionToken")),
        },
        image_id: between(&images, "imageId"),
    }
}

/// Adds the plugin as `name` to `dir`, with `extra` `[config]` lines.
fn add_plugin(dir: &PluginDir, name: &str, moto: &Moto, image_id: &str, extra: &str) {
    let upper = name.to_ascii_uppercase().replace('-', "_");
    dir.add(
        name,
        guests::AWS_EC2,
        &format!(
            "[config]\nregion = \"{REGION}\"\nendpoint = \"{url}\"\nimage_id = \"{image_id}\"\n{extra}\n\
             [secrets]\naccess_key_id = {{ env = \"{upper}_KEY\" }}\n\
             secret_access_key = {{ env = \"{upper}_SECRET\" }}\n\
             session_token = {{ env = \"{upper}_TOKEN\" }}\n\
             [http]\nallow = [\"{url}\"]\n",
            url = moto.url()
        ),
    );
}

/// A host of `owner` over `dir`, with `creds[i]` for the plugin named
/// `creds[i].0`.
async fn host(dir: &PluginDir, owner: &str, creds: &[(&str, Creds)]) -> Host {
    let table: Vec<(String, String)> = creds
        .iter()
        .flat_map(|(name, c)| {
            let upper = name.to_ascii_uppercase().replace('-', "_");
            let mut v = vec![
                (format!("{upper}_KEY"), c.key.clone()),
                (format!("{upper}_SECRET"), c.secret.clone()),
            ];
            if let Some(t) = &c.token {
                v.push((format!("{upper}_TOKEN"), t.clone()));
            }
            v
        })
        .collect();
    // One build at a time: the first compiles the component into the
    // cache, the others load it from there instead of all compiling at once.
    static BUILDING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one_at_a_time = BUILDING.lock().await;
    let host = HostBuilder::new(dir.path())
        .owner_id(owner)
        .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
        .work_dir(dir.path().join(".work"))
        .secret_source(move |name| {
            table
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        })
        .build()
        .await
        .expect("host builds");
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    host
}

fn plugin(host: &Host, name: &str) -> Arc<dyn CloudProvisioner> {
    host.plugin(name).unwrap_or_else(|| panic!("{name} loaded"))
}

fn req(id: &str, shape: NodeShape) -> ProvisionRequest {
    ProvisionRequest {
        request_id: id.into(),
        shape,
        boot: Default::default(),
    }
}

fn small() -> NodeShape {
    NodeShape::new(2.0, 4 << 30)
}

async fn within_limit(test: impl Future<Output = ()>) {
    let start = Instant::now();
    tokio::time::timeout(TEST_LIMIT, test)
        .await
        .expect("the test finishes within 60 s");
    eprintln!("finished in {:.1} s", start.elapsed().as_secs_f64());
}

#[tokio::test]
async fn lifecycle_with_signed_requests() {
    require_moto!();
    within_limit(async {
        let moto = Moto::start().await;
        let account = bootstrap(&moto).await;
        let dir = PluginDir::new();
        add_plugin(&dir, "ec2", &moto, &account.image_id, "");
        let host = host(&dir, OWNER, &[("ec2", account.user.clone())]).await;
        let p = plugin(&host, "ec2");

        assert_eq!(
            p.capacity_types(),
            &[CapacityType::OnDemand, CapacityType::Spot]
        );
        let hint = p.price_hint(&small()).expect("a price");
        assert_eq!(hint.instance_type, "t3a.medium");
        assert!((hint.hourly_usd - 0.0376).abs() < 1e-9, "{hint:?}");
        let spot_hint = p
            .price_hint(&NodeShape {
                capacity_type: CapacityType::Spot,
                ..small()
            })
            .expect("a spot price");
        assert_eq!(spot_hint.capacity_type, CapacityType::Spot);
        assert!((spot_hint.hourly_usd - 0.0376 * 0.35).abs() < 1e-9);

        // On demand, in a zone, with a label.
        let mut shape = small();
        shape.zone = Some("us-east-1b".into());
        shape.labels.insert("pool".into(), "blue".into());
        let node = p
            .provision_request(&req("life-1", shape.clone()))
            .await
            .unwrap();
        assert!(node.provider_id.starts_with("i-"), "{node:?}");
        assert_eq!(node.zone.as_deref(), Some("us-east-1b"));
        assert_eq!(node.capacity_type, CapacityType::OnDemand);
        assert_eq!(node.instance_type.as_deref(), Some("t3a.medium"));
        assert!(node.address.is_some());
        assert_eq!(node.labels["wasmprov-owner"], OWNER);
        assert_eq!(node.labels["wasmprov-request"], "life-1");

        let nodes = p.describe().await.unwrap();
        assert_eq!(nodes.len(), 1);
        let seen = &nodes[0];
        assert_eq!(seen.provider_id, node.provider_id);
        assert_eq!(
            seen.join_state,
            JoinState::Joining,
            "moto runs instances at once"
        );
        assert_eq!(seen.labels["wasmprov-owner"], OWNER);
        assert_eq!(seen.labels["wasmprov-request"], "life-1");
        assert_eq!(seen.labels["pool"], "blue");
        assert_eq!(seen.labels["Name"], "wasmprov-life-1");

        // Idempotent by request id.
        let again = p.provision_request(&req("life-1", shape)).await.unwrap();
        assert_eq!(again.provider_id, node.provider_id);
        assert_eq!(p.describe().await.unwrap().len(), 1);

        // Spot: moto honours InstanceMarketOptions and reports the lifecycle.
        let spot = p
            .provision_request(&req(
                "spot-1",
                NodeShape {
                    capacity_type: CapacityType::Spot,
                    ..small()
                },
            ))
            .await
            .unwrap();
        assert_eq!(spot.capacity_type, CapacityType::Spot);
        let nodes = p.describe().await.unwrap();
        assert_eq!(nodes.len(), 2);
        let described_spot = nodes
            .iter()
            .find(|n| n.provider_id == spot.provider_id)
            .expect("spot node described");
        assert_eq!(described_spot.capacity_type, CapacityType::Spot);

        // What EC2 does not offer is refused before anything is launched.
        let err = p
            .provision_request(&req(
                "nope-1",
                NodeShape {
                    instance_type: Some("x9.nonexistent".into()),
                    ..small()
                },
            ))
            .await
            .unwrap_err();
        assert!(matches!(err, ProvisionerError::Unsupported(_)), "{err:?}");
        let err = p
            .provision_request(&req(
                "nope-2",
                NodeShape {
                    zone: Some("eu-west-1a".into()),
                    ..small()
                },
            ))
            .await
            .unwrap_err();
        assert!(matches!(err, ProvisionerError::Unsupported(_)), "{err:?}");
        assert_eq!(p.describe().await.unwrap().len(), 2);

        // Terminate, terminate again, and an id EC2 never had.
        p.terminate(&node.provider_id).await.unwrap();
        let err = p.terminate(&node.provider_id).await.unwrap_err();
        assert!(matches!(err, ProvisionerError::NotFound(_)), "{err:?}");
        let err = p
            .terminate(&"i-0123456789abcdef0".to_string())
            .await
            .unwrap_err();
        assert!(matches!(err, ProvisionerError::NotFound(_)), "{err:?}");
        let nodes = p.describe().await.unwrap();
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].provider_id, spot.provider_id);
        p.terminate(&spot.provider_id).await.unwrap();
        assert!(p.describe().await.unwrap().is_empty());
        drop(moto);
    })
    .await;
}

#[tokio::test]
async fn wrong_credentials_are_auth_errors() {
    require_moto!();
    within_limit(async {
        let moto = Moto::start().await;
        let account = bootstrap(&moto).await;
        let dir = PluginDir::new();
        for name in ["good", "wrong-secret", "unknown-key"] {
            add_plugin(&dir, name, &moto, &account.image_id, "");
        }
        let wrong_secret = Creds {
            secret: format!("{}x", account.user.secret),
            ..account.user.clone()
        };
        let unknown_key = Creds {
            key: "AKIAIOSFODNN7EXAMPLE".into(),
            ..account.user.clone()
        };
        let host = host(
            &dir,
            OWNER,
            &[
                ("good", account.user.clone()),
                ("wrong-secret", wrong_secret),
                ("unknown-key", unknown_key),
            ],
        )
        .await;
        // The same requests pass with the right key and fail with a wrong
        // one: moto checks the signature.
        let good = plugin(&host, "good");
        good.provision_request(&req("auth-1", small()))
            .await
            .unwrap();
        assert_eq!(good.describe().await.unwrap().len(), 1);
        for name in ["wrong-secret", "unknown-key"] {
            let p = plugin(&host, name);
            let err = p.describe().await.unwrap_err();
            assert!(matches!(err, ProvisionerError::Auth(_)), "{name}: {err:?}");
            let err = p
                .provision_request(&req("auth-2", small()))
                .await
                .unwrap_err();
            assert!(matches!(err, ProvisionerError::Auth(_)), "{name}: {err:?}");
            let err = p
                .terminate(&"i-0123456789abcdef0".to_string())
                .await
                .unwrap_err();
            assert!(matches!(err, ProvisionerError::Auth(_)), "{name}: {err:?}");
        }
        assert_eq!(
            good.describe().await.unwrap().len(),
            1,
            "nothing was launched"
        );
        drop(moto);
    })
    .await;
}

#[tokio::test]
async fn describe_follows_next_token() {
    require_moto!();
    within_limit(async {
        let moto = Moto::start().await;
        let account = bootstrap(&moto).await;
        let dir = PluginDir::new();
        add_plugin(&dir, "ec2", &moto, &account.image_id, "page_size = 5");
        let host = host(&dir, OWNER, &[("ec2", account.user.clone())]).await;
        let p = plugin(&host, "ec2");
        let mut ids = Vec::new();
        for i in 0..12 {
            let node = p
                .provision_request(&req(&format!("page-{i}"), small()))
                .await
                .unwrap();
            ids.push(node.provider_id);
        }
        let mut described: Vec<String> = p
            .describe()
            .await
            .unwrap()
            .into_iter()
            .map(|n| n.provider_id)
            .collect();
        described.sort();
        ids.sort();
        assert_eq!(described, ids, "three pages of five, all read");
        p.terminate(&ids[0]).await.unwrap();
        p.terminate(&ids[7]).await.unwrap();
        assert_eq!(
            p.describe().await.unwrap().len(),
            10,
            "terminated ones are left out"
        );
        drop(moto);
    })
    .await;
}

#[tokio::test]
async fn other_owners_instances_are_invisible_and_untouchable() {
    require_moto!();
    within_limit(async {
        let moto = Moto::start().await;
        let account = bootstrap(&moto).await;
        let dir = PluginDir::new();
        add_plugin(&dir, "ec2", &moto, &account.image_id, "");
        let ours = host(&dir, OWNER, &[("ec2", account.user.clone())]).await;
        let theirs = host(&dir, "someone-else", &[("ec2", account.user.clone())]).await;
        let p = plugin(&ours, "ec2");
        let foreign = plugin(&theirs, "ec2");

        // The same request id on both hosts: two instances.
        let mine = p
            .provision_request(&req("shared-1", small()))
            .await
            .unwrap();
        let other = foreign
            .provision_request(&req("shared-1", small()))
            .await
            .unwrap();
        assert_ne!(mine.provider_id, other.provider_id);
        assert_eq!(other.labels["wasmprov-owner"], "someone-else");

        let nodes = p.describe().await.unwrap();
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].provider_id, mine.provider_id);
        let err = p.terminate(&other.provider_id).await.unwrap_err();
        assert!(
            matches!(&err, ProvisionerError::NotFound(m) if m.contains("not owned")),
            "{err:?}"
        );
        let theirs_now = foreign.describe().await.unwrap();
        assert_eq!(theirs_now.len(), 1);
        assert_eq!(
            theirs_now[0].join_state,
            JoinState::Joining,
            "still running"
        );
        drop(moto);
    })
    .await;
}

#[tokio::test]
async fn session_token_is_sent_signed_and_checked() {
    require_moto!();
    within_limit(async {
        let moto = Moto::start().await;
        let account = bootstrap(&moto).await;
        assert!(
            account.role.key.starts_with("ASIA"),
            "{:?}",
            account.role.key
        );
        let dir = PluginDir::new();
        for name in ["role", "bad-token", "no-token"] {
            add_plugin(&dir, name, &moto, &account.image_id, "");
        }
        let bad_token = Creds {
            token: account.role.token.as_ref().map(|t| format!("{t}x")),
            ..account.role.clone()
        };
        let no_token = Creds {
            token: None,
            ..account.role.clone()
        };
        let host = host(
            &dir,
            OWNER,
            &[
                ("role", account.role.clone()),
                ("bad-token", bad_token),
                ("no-token", no_token),
            ],
        )
        .await;
        let p = plugin(&host, "role");
        let node = p.provision_request(&req("role-1", small())).await.unwrap();
        assert_eq!(p.describe().await.unwrap().len(), 1);
        for name in ["bad-token", "no-token"] {
            let err = plugin(&host, name).describe().await.unwrap_err();
            assert!(matches!(err, ProvisionerError::Auth(_)), "{name}: {err:?}");
        }
        p.terminate(&node.provider_id).await.unwrap();
        assert!(p.describe().await.unwrap().is_empty());
        drop(moto);
    })
    .await;
}
