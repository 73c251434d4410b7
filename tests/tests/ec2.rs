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

use base64::Engine as _;
use wasmprov_api::{
    Arch, BootData, CapacityType, CloudProvisioner, JoinState, NodeShape, NodeStatus,
    ProvisionRequest, ProvisionerError,
};
use wasmprov_host::{Host, HostBuilder};
use wasmprov_plugin_aws_ec2::settings::Credentials;
use wasmprov_plugin_aws_ec2::{catalogue, sign};
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
        if !crate::moto_available() {
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
        let child = wasmprov_testkit::fake::moto_command(port)
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
        // Ready means answering HTTP, not only accepting connections: a
        // request that arrives while the server is still starting can be
        // reset. The probe is moto's own `reset-auth`, which also sets the
        // unsigned-request budget and zeroes its count (it is not counted).
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok((200, _)) = exchange(
                port,
                "/moto-api/reset-auth",
                &[],
                &BOOTSTRAP_CALLS.to_string(),
            )
            .await
            {
                return moto;
            }
            if let Ok(Some(status)) = moto.child.try_wait() {
                panic!("moto exited early ({status}):\n{}", moto.log_text());
            }
            assert!(
                Instant::now() < deadline,
                "moto did not answer within 30 s:\n{}",
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
    let body: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect();
    let headers = [
        (
            "content-type".to_string(),
            "application/x-www-form-urlencoded; charset=utf-8".to_string(),
        ),
        (
            "authorization".to_string(),
            format!(
                "AWS4-HMAC-SHA256 Credential=AKIDBOOTSTRAP/20250101/{REGION}/{service}/aws4_request, SignedHeaders=host, Signature=00"
            ),
        ),
    ];
    post(port, &headers, &body.join("&")).await
}

/// An EC2 Query API call to moto signed with `creds` by the plugin's own
/// signer, so that moto checks it like the plugin's calls. Returns the body
/// of a 200 answer.
async fn signed(moto: &Moto, creds: &Creds, params: &[(&str, &str)]) -> String {
    let mut form = vec![("Version".to_string(), sign::API_VERSION.to_string())];
    form.extend(
        params
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string())),
    );
    let creds = Credentials {
        access_key_id: creds.key.clone(),
        secret_access_key: creds.secret.clone(),
        session_token: creds.token.clone(),
    };
    let req = sign::sign_post(
        &moto.url(),
        REGION,
        &creds,
        sign::form_encode(&form),
        std::time::SystemTime::now(),
    )
    .expect("signing");
    let (status, body) = post(moto.port, &req.headers, &req.body).await;
    assert_eq!(status, 200, "{params:?}: {body}");
    body
}

/// `POST /` to moto with `headers` (and `host`, `connection`,
/// `content-length`); the status and body of the answer.
async fn post(port: u16, headers: &[(String, String)], body: &str) -> (u16, String) {
    exchange(port, "/", headers, body)
        .await
        .unwrap_or_else(|e| panic!("POST / to moto: {e}"))
}

/// One `POST path` on a fresh connection; the status and body of the answer.
async fn exchange(
    port: u16,
    path: &str,
    headers: &[(String, String)],
    body: &str,
) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut head =
        format!("POST {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nconnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    let mut sock = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(body.as_bytes()).await?;
    let mut raw = Vec::new();
    sock.read_to_end(&mut raw).await?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let bad = || std::io::Error::other(format!("not an HTTP response: {text:?}"));
    let (head, body) = text.split_once("\r\n\r\n").ok_or_else(bad)?;
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad)?;
    Ok((status, body.to_string()))
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

/// EC2, the IAM and SSM the launch-settings test sets up and reads, and
/// the ELBv2 target groups of the networking tests.
const EC2_ALL: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["ec2:*","iam:*","ssm:*","elasticloadbalancing:*"],"Resource":"*"}]}"#;
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
            "[config]\nregion = \"{REGION}\"\nendpoint = \"{url}\"\nelb_endpoint = \"{url}\"\nimage_id = \"{image_id}\"\n{extra}\n\
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
        subnet: None,
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

/// The text of every `<tag>…</tag>` in `xml`, in order.
fn all_between(xml: &str, tag: &str) -> Vec<String> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(start) = rest.find(&open) {
        rest = &rest[start + open.len()..];
        let end = rest.find(&close).unwrap_or_else(|| panic!("no {close}"));
        out.push(rest[..end].to_string());
        rest = &rest[end..];
    }
    out
}

/// Amazon's AMIs for `arch` that moto knows (a signed call).
async fn images(moto: &Moto, creds: &Creds, arch: &str) -> Vec<String> {
    let xml = signed(
        moto,
        creds,
        &[
            ("Action", "DescribeImages"),
            ("Owner.1", "amazon"),
            ("Filter.1.Name", "architecture"),
            ("Filter.1.Value.1", arch),
        ],
    )
    .await;
    let ids = all_between(&xml, "imageId");
    assert!(!ids.is_empty(), "moto has no {arch} AMI: {xml}");
    ids
}

/// `DescribeInstances` of one instance (a signed call).
async fn instance_xml(moto: &Moto, creds: &Creds, id: &str) -> String {
    signed(
        moto,
        creds,
        &[("Action", "DescribeInstances"), ("InstanceId.1", id)],
    )
    .await
}

fn booting(id: &str, shape: NodeShape, boot: BootData) -> ProvisionRequest {
    ProvisionRequest {
        request_id: id.into(),
        shape,
        boot,
        subnet: None,
    }
}

#[tokio::test]
async fn gpu_model_and_architecture_choose_the_type() {
    require_moto!();
    within_limit(async {
        let moto = Moto::start().await;
        let account = bootstrap(&moto).await;
        let arm_image = images(&moto, &account.user, "arm64").await.remove(0);
        let dir = PluginDir::new();
        add_plugin(&dir, "ec2", &moto, &account.image_id, "");
        add_plugin(
            &dir,
            "any",
            &moto,
            &account.image_id,
            "architecture = \"any\"",
        );
        let host = host(
            &dir,
            OWNER,
            &[("ec2", account.user.clone()), ("any", account.user.clone())],
        )
        .await;
        let p = plugin(&host, "ec2");

        // 4 vCPU, 16 GiB and one NVIDIA GPU: the model picks the type.
        let gpu = |model: Option<&str>| NodeShape {
            gpu: 1,
            gpu_vendor: Some("nvidia".into()),
            gpu_model: model.map(Into::into),
            ..NodeShape::new(4.0, 16 << 30)
        };
        let cases = [
            ("gpu-a10g", Some("nvidia-a10g"), "g5.xlarge", "nvidia-a10g"),
            ("gpu-t4", Some("nvidia-t4"), "g4dn.xlarge", "nvidia-t4"),
            // Without a model, the cheapest: a T4.
            ("gpu-any", None, "g4dn.xlarge", "nvidia-t4"),
            // A100s come eight to an instance: the cheaper p4d, not a p4de.
            (
                "gpu-a100",
                Some("NVIDIA-A100"),
                "p4d.24xlarge",
                "nvidia-a100",
            ),
        ];
        for (id, model, want, want_model) in cases {
            let hint = p.price_hint(&gpu(model)).expect("a price");
            assert_eq!(hint.instance_type, want, "{model:?}");
            let node = p.provision_request(&req(id, gpu(model))).await.unwrap();
            assert_eq!(node.instance_type.as_deref(), Some(want), "{model:?}");
            assert_eq!(node.gpu_model.as_deref(), Some(want_model), "{model:?}");
            let got = p.get(&node.provider_id).await.unwrap().expect("get");
            assert_eq!(got.gpu_model.as_deref(), Some(want_model));
            // EC2 itself says which type it launched.
            let xml = instance_xml(&moto, &account.user, &node.provider_id).await;
            assert_eq!(between(&xml, "instanceType"), want, "{model:?}");
        }
        // A model no type of the table has is refused, and nothing is
        // launched.
        let err = p
            .provision_request(&req("gpu-mi300x", gpu(Some("amd-mi300x"))))
            .await
            .unwrap_err();
        assert!(matches!(err, ProvisionerError::Unsupported(_)), "{err:?}");
        assert!(p.price_hint(&gpu(Some("amd-mi300x"))).is_none());
        assert_eq!(p.describe().await.unwrap().len(), 4);

        // Any architecture allowed: Graviton is cheapest for 2 vCPU, 4 GiB,
        // but x86_64 asked for never lands on it, and arm64 does.
        let any = plugin(&host, "any");
        let hint = any.price_hint(&small()).expect("a price");
        assert_eq!(hint.instance_type, "t4g.medium");
        let x86 = NodeShape {
            arch: Some(Arch::X86_64),
            ..small()
        };
        assert_eq!(
            any.price_hint(&x86).expect("a price").instance_type,
            "t3a.medium"
        );
        let node = any.provision_request(&req("arch-x86", x86)).await.unwrap();
        assert_eq!(node.instance_type.as_deref(), Some("t3a.medium"));
        assert_eq!(node.arch, Some(Arch::X86_64));
        let arm = NodeShape {
            arch: Some(Arch::Arm64),
            ..small()
        };
        // An arm64 node boots an arm64 image.
        let boot = BootData {
            image: Some(arm_image.clone()),
            ..BootData::default()
        };
        let node = any
            .provision_request(&booting("arch-arm", arm.clone(), boot))
            .await
            .unwrap();
        assert_eq!(node.instance_type.as_deref(), Some("t4g.medium"));
        assert_eq!(node.arch, Some(Arch::Arm64));
        // An explicit ARM type under an x86_64 shape is refused.
        let err = any
            .provision_request(&req(
                "arch-mismatch",
                NodeShape {
                    instance_type: Some("t4g.medium".into()),
                    arch: Some(Arch::X86_64),
                    ..small()
                },
            ))
            .await
            .unwrap_err();
        assert!(matches!(err, ProvisionerError::Unsupported(_)), "{err:?}");
        // The x86_64 default configuration has no ARM type to pick.
        assert!(p.price_hint(&arm).is_none());
        drop(moto);
    })
    .await;
}

/// Runs `script` (Python, with `ec2` a boto3 EC2 client of `region` signed
/// with `creds` against moto, and `out(value)` printing the answer as JSON):
/// an independent reader of what the plugin made.
fn boto3(moto: &Moto, creds: &Creds, region: &str, script: &str) -> serde_json::Value {
    let prelude = format!(
        "import boto3, json, os, sys\n\
         session = boto3.session.Session(aws_access_key_id=os.environ['K'], aws_secret_access_key=os.environ['S'], aws_session_token=os.environ.get('T') or None, region_name='{region}')\n\
         ec2 = session.client('ec2', endpoint_url='{url}')\n\
         iam = session.client('iam', endpoint_url='{url}')\n\
         ssm = session.client('ssm', endpoint_url='{url}')\n\
         elbv2 = session.client('elbv2', endpoint_url='{url}')\n\
         def out(v):\n    print(json.dumps(v, default=str))\n",
        url = moto.url()
    );
    let mut cmd = Command::new("python3");
    cmd.args(["-c", &format!("{prelude}{script}")])
        .env("K", &creds.key)
        .env("S", &creds.secret)
        .env_remove("AWS_PROFILE")
        .env_remove("AWS_CONFIG_FILE");
    match &creds.token {
        Some(t) => cmd.env("T", t),
        None => cmd.env_remove("T"),
    };
    let out = cmd.output().expect("python3 runs");
    assert!(
        out.status.success(),
        "boto3 script failed:\n{script}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The instance `id` as boto3 reads it from moto.
fn read_instance(moto: &Moto, creds: &Creds, id: &str) -> serde_json::Value {
    boto3(
        moto,
        creds,
        REGION,
        &format!(
            "out(ec2.describe_instances(InstanceIds=['{id}'])['Reservations'][0]['Instances'][0])"
        ),
    )
}

/// The architecture EC2 (moto) says instance type `name` has.
fn type_arch(moto: &Moto, creds: &Creds, name: &str) -> String {
    boto3(
        moto,
        creds,
        REGION,
        &format!(
            "out(ec2.describe_instance_types(InstanceTypes=['{name}'])['InstanceTypes'][0]['ProcessorInfo']['SupportedArchitectures'])"
        ),
    )[0]
    .as_str()
    .unwrap()
    .to_string()
}

#[tokio::test]
async fn offerings_are_every_current_type_ec2_has_for_the_image() {
    require_moto!();
    within_limit(async {
        let moto = Moto::start().await;
        let account = bootstrap(&moto).await;
        let arm_image = images(&moto, &account.user, "arm64").await.remove(0);
        let dir = PluginDir::new();
        add_plugin(&dir, "ec2", &moto, &account.image_id, "");
        add_plugin(&dir, "arm", &moto, &arm_image, "architecture = \"any\"");
        add_plugin(
            &dir,
            "only",
            &moto,
            &account.image_id,
            "instance_types = \"m6i.large,g5.xlarge,m7g.large,x9.nonexistent\"",
        );
        let host = host(
            &dir,
            OWNER,
            &[
                ("ec2", account.user.clone()),
                ("arm", account.user.clone()),
                ("only", account.user.clone()),
            ],
        )
        .await;
        let started = Instant::now();
        let offered = plugin(&host, "ec2").offerings().await.unwrap();
        eprintln!(
            "offerings: {} types in {:.2} s",
            offered.len(),
            started.elapsed().as_secs_f64()
        );
        let find = |list: &[wasmprov_api::Offering], name: &str| {
            list.iter()
                .find(|o| o.instance_type == name)
                .unwrap_or_else(|| panic!("{name} offered"))
                .clone()
        };
        // Every current x86_64 type EC2 (moto) has, not a table of 50.
        assert!(offered.len() > 300, "{}", offered.len());
        assert!(offered.iter().all(|o| o.arch == Some(Arch::X86_64)));
        let g5 = find(&offered, "g5.2xlarge");
        assert_eq!((g5.gpu, g5.gpu_model.as_deref()), (1, Some("nvidia-a10g")));
        assert_eq!(g5.on_demand_usd, Some(1.212));
        let m7i = find(&offered, "m7i.2xlarge");
        assert_eq!((m7i.cpu, m7i.memory_bytes), (8.0, 32 << 30));
        assert_eq!(m7i.on_demand_usd, Some(0.4032));
        // The disk is a root volume sized per request: up to EBS's limit.
        assert_eq!(m7i.disk_bytes, Some(catalogue::MAX_ROOT_VOLUME_BYTES));
        // Types the table does not price are offered, their price unknown.
        assert!(offered.iter().any(|o| o.on_demand_usd.is_none()));
        // The plugin's sizes agree with EC2's for every type it knows.
        for o in &offered {
            if let Some(t) = catalogue::find(&o.instance_type) {
                assert_eq!(
                    (f64::from(t.vcpu), u64::from(t.memory_mib) << 20, t.gpu),
                    (o.cpu, o.memory_bytes, o.gpu),
                    "{}",
                    o.instance_type
                );
            }
        }
        // On-demand prices agree with price_hint.
        let p = plugin(&host, "ec2");
        for shape in [small(), NodeShape::new(16.0, 64 << 30)] {
            let hint = p.price_hint(&shape).expect("a price");
            assert_eq!(
                find(&offered, &hint.instance_type).on_demand_usd,
                Some(hint.hourly_usd)
            );
        }

        // An arm64 image: Graviton only, m7g and c7g among them.
        let arm = plugin(&host, "arm").offerings().await.unwrap();
        assert!(arm.iter().all(|o| o.arch == Some(Arch::Arm64)));
        assert_eq!(find(&arm, "m7g.xlarge").on_demand_usd, Some(0.1632));
        assert_eq!(find(&arm, "c7g.large").on_demand_usd, Some(0.0725));

        // Restricted to `instance_types`, and to the image's architecture;
        // a type EC2 does not know is left out.
        let only = plugin(&host, "only").offerings().await.unwrap();
        let names: Vec<&str> = only.iter().map(|o| o.instance_type.as_str()).collect();
        assert_eq!(names, ["g5.xlarge", "m6i.large"]);
        drop(moto);
    })
    .await;
}

#[tokio::test]
async fn the_a100_is_offered_in_eu_west_1() {
    require_moto!();
    within_limit(async {
        let moto = Moto::start().await;
        let account = bootstrap(&moto).await;
        let dir = PluginDir::new();
        dir.add(
            "eu",
            guests::AWS_EC2,
            &format!(
                "[config]\nregion = \"eu-west-1\"\nendpoint = \"{url}\"\n\
                 [secrets]\naccess_key_id = {{ env = \"EU_KEY\" }}\nsecret_access_key = {{ env = \"EU_SECRET\" }}\n\
                 [http]\nallow = [\"{url}\"]\n",
                url = moto.url()
            ),
        );
        let host = host(&dir, OWNER, &[("eu", account.user.clone())]).await;
        let offered = plugin(&host, "eu").offerings().await.unwrap();
        let a100 = offered
            .iter()
            .find(|o| o.instance_type == "p4d.24xlarge")
            .expect("p4d.24xlarge offered");
        assert_eq!((a100.gpu, a100.gpu_model.as_deref()), (8, Some("nvidia-a100")));
        assert_eq!(a100.on_demand_usd, Some(23.71569));
        let ranking = wasmprov_fleet::rank_offerings(
            &host,
            &NodeShape {
                gpu: 8,
                gpu_model: Some("nvidia-a100".into()),
                ..NodeShape::new(8.0, 64 << 30)
            },
            None,
        )
        .await;
        assert_eq!(
            ranking.best().map(|o| o.hint.instance_type.as_str()),
            Some("p4d.24xlarge"),
            "{ranking:?}"
        );
        drop(moto);
    })
    .await;
}

#[tokio::test]
async fn an_x86_image_never_launches_on_arm64() {
    require_moto!();
    within_limit(async {
        let moto = Moto::start().await;
        let account = bootstrap(&moto).await;
        let arm_image = images(&moto, &account.user, "arm64").await.remove(0);
        let dir = PluginDir::new();
        // Any architecture allowed: Graviton is the cheapest by size, but
        // the image is x86_64.
        add_plugin(
            &dir,
            "any",
            &moto,
            &account.image_id,
            "architecture = \"any\"",
        );
        add_plugin(&dir, "arm", &moto, &arm_image, "architecture = \"arm64\"");
        let host = Arc::new(
            host(
                &dir,
                OWNER,
                &[("any", account.user.clone()), ("arm", account.user.clone())],
            )
            .await,
        );
        let p = plugin(&host, "any");
        // provision: the image decides among the types.
        let node = p.provision_request(&req("x86-1", small())).await.unwrap();
        let read = read_instance(&moto, &account.user, &node.provider_id);
        let launched = read["InstanceType"].as_str().unwrap();
        assert_eq!(
            type_arch(&moto, &account.user, launched),
            "x86_64",
            "{read}"
        );
        // A named arm64 type: refused, nothing launched.
        for name in ["t4g.micro", "m7g.large"] {
            let err = p
                .provision_request(&req(
                    &format!("named-{}", name.replace('.', "-")),
                    NodeShape {
                        instance_type: Some(name.into()),
                        ..small()
                    },
                ))
                .await
                .unwrap_err();
            assert!(
                matches!(&err, ProvisionerError::Unsupported(m) if m.contains("x86_64")),
                "{err:?}"
            );
        }
        // rank: no arm64 type of this plugin, with or without a disk; a
        // disk keeps EC2's types.
        for disk in [None, Some(8u64 << 30)] {
            let shape = NodeShape {
                disk_bytes: disk,
                ..NodeShape::new(4.0, 16 << 30)
            };
            let ranking = wasmprov_fleet::rank_offerings(&*host, &shape, None).await;
            let any: Vec<&str> = ranking
                .offers
                .iter()
                .filter(|o| o.plugin == "any")
                .map(|o| o.hint.instance_type.as_str())
                .collect();
            assert!(!any.is_empty(), "{disk:?}: {ranking:?}");
            for t in &any {
                assert!(
                    catalogue::find(t).is_none_or(|t| t.arch == Arch::X86_64),
                    "{t}"
                );
            }
            // The arm plugin's image is arm64: its offers are Graviton.
            let arm_best = ranking
                .offers
                .iter()
                .find(|o| o.plugin == "arm")
                .expect("an arm offer");
            assert_eq!(
                catalogue::find(&arm_best.hint.instance_type).map(|t| t.arch),
                Some(Arch::Arm64)
            );
        }

        // scale: a group on the x86 image, with a disk, stays on x86_64 EC2
        // types.
        let state = tempfile::tempdir().unwrap();
        let fleet = wasmprov_fleet::Fleet::open(host.clone(), state.path().join("journal.redb"))
            .expect("a fleet");
        let mut group = wasmprov_fleet::CapacityGroup::new(
            "web",
            NodeShape {
                disk_bytes: Some(8 << 30),
                ..NodeShape::new(2.0, 8 << 30)
            },
            0,
            3,
        );
        group.plugins = vec!["any".into()];
        let report = fleet.scale(&group, 2).await.unwrap();
        assert!(report.converged(), "{report}");
        assert_eq!(report.added.len(), 2, "{report}");
        for m in &report.added {
            let read = read_instance(&moto, &account.user, &m.provider_id);
            let t = read["InstanceType"].as_str().unwrap();
            assert_eq!(type_arch(&moto, &account.user, t), "x86_64", "{t}");
        }

        // m7g, c7g and m7i launch on their own images.
        let arm = plugin(&host, "arm");
        for name in ["m7g.xlarge", "c7g.large"] {
            let node = arm
                .provision_request(&req(
                    &format!("g3-{}", name.replace('.', "-")),
                    NodeShape {
                        instance_type: Some(name.into()),
                        ..small()
                    },
                ))
                .await
                .unwrap();
            let read = read_instance(&moto, &account.user, &node.provider_id);
            assert_eq!(read["InstanceType"], name);
            assert_eq!(read["ImageId"], arm_image.as_str());
        }
        let node = p
            .provision_request(&req(
                "m7i-1",
                NodeShape {
                    instance_type: Some("m7i.2xlarge".into()),
                    ..small()
                },
            ))
            .await
            .unwrap();
        assert_eq!(
            read_instance(&moto, &account.user, &node.provider_id)["InstanceType"],
            "m7i.2xlarge"
        );
        drop(moto);
    })
    .await;
}

/// The user data EC2 (here moto) holds for instance `id`, read back with
/// a signed `DescribeInstanceAttribute`.
async fn user_data_of(moto: &Moto, creds: &Creds, id: &str) -> String {
    let attr = signed(
        moto,
        creds,
        &[
            ("Action", "DescribeInstanceAttribute"),
            ("InstanceId", id),
            ("Attribute", "userData"),
        ],
    )
    .await;
    let data = base64::engine::general_purpose::STANDARD
        .decode(between(&between(&attr, "userData"), "value"))
        .expect("base64 user data");
    String::from_utf8(data).expect("UTF-8 user data")
}

/// Public keys made with `ssh-keygen -t ed25519` for these tests (EC2,
/// here moto, parses a key it imports).
const SSH_KEY: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAII0a3p4gtNfgnJK0Li2JgkCuKOT2+ZDwMw3scMb18znq ops@example";
const SSH_KEY_RECOMMENTED: &str =
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAII0a3p4gtNfgnJK0Li2JgkCuKOT2+ZDwMw3scMb18znq ops@laptop";
const SSH_KEY_2: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIC/3hbUGuhc2htqGQ9gTCpP9Go9gcYUu8O/bJTrTnAVi second@example";

#[tokio::test]
async fn boot_data_reaches_each_instance() {
    require_moto!();
    within_limit(async {
        let moto = Moto::start().await;
        let account = bootstrap(&moto).await;
        let other_image = images(&moto, &account.user, "x86_64")
            .await
            .into_iter()
            .find(|i| *i != account.image_id)
            .expect("a second x86_64 AMI");
        let dir = PluginDir::new();
        add_plugin(&dir, "ec2", &moto, &account.image_id, "");
        let host = host(&dir, OWNER, &[("ec2", account.user.clone())]).await;
        let p = plugin(&host, "ec2");

        let cloud_config =
            |token: &str| format!("#cloud-config\nruncmd:\n  - [join-cluster, --token, {token}]\n");
        let a = p
            .provision_request(&booting(
                "boot-a",
                small(),
                BootData {
                    image: Some(other_image.clone()),
                    user_data: Some(cloud_config("token-aaaa").into_bytes()),
                    ..BootData::default()
                },
            ))
            .await
            .unwrap();
        let b = p
            .provision_request(&booting(
                "boot-b",
                small(),
                BootData {
                    user_data: Some(cloud_config("token-bbbb").into_bytes()),
                    ..BootData::default()
                },
            ))
            .await
            .unwrap();
        for (node, token, image) in [
            (&a, "token-aaaa", &other_image),
            (&b, "token-bbbb", &account.image_id),
        ] {
            assert_eq!(
                user_data_of(&moto, &account.user, &node.provider_id).await,
                cloud_config(token)
            );
            let xml = instance_xml(&moto, &account.user, &node.provider_id).await;
            assert_eq!(&between(&xml, "imageId"), image, "{}", node.provider_id);
        }

        // One SSH key: imported once as a key pair named by its digest and
        // launched with it; a second node with the same key (another
        // comment) reuses the pair.
        let ssh = |keys: &[&str]| BootData {
            ssh_keys: keys.iter().map(ToString::to_string).collect(),
            ..BootData::default()
        };
        // The name: `wasmprov-` and 16 hex digits of SHA-256 over the key's
        // type and data (its comment left out).
        let identity = SSH_KEY.rsplit_once(' ').unwrap().0;
        let digest = <sha2::Sha256 as sha2::Digest>::digest(identity.as_bytes());
        let pair = format!("wasmprov-{}", hex::encode(&digest[..8]));
        let mut paired = Vec::new();
        for (id, key) in [
            ("boot-key", SSH_KEY),
            ("boot-key-again", SSH_KEY_RECOMMENTED),
        ] {
            let node = p
                .provision_request(&booting(id, small(), ssh(&[key])))
                .await
                .unwrap();
            let xml = instance_xml(&moto, &account.user, &node.provider_id).await;
            assert_eq!(between(&xml, "keyName"), pair, "{id}");
            paired.push(node.provider_id);
        }
        let pairs = signed(&moto, &account.user, &[("Action", "DescribeKeyPairs")]).await;
        assert_eq!(all_between(&pairs, "keyName"), [pair], "{pairs}");

        // Two keys: both in the user data's ssh_authorized_keys, merged
        // with the caller's #cloud-config; no key pair.
        let keys = [SSH_KEY, SSH_KEY_2];
        let node = p
            .provision_request(&booting(
                "boot-keys",
                small(),
                BootData {
                    user_data: Some(cloud_config("token-cccc").into_bytes()),
                    ..ssh(&keys)
                },
            ))
            .await
            .unwrap();
        let doc = user_data_of(&moto, &account.user, &node.provider_id).await;
        assert!(doc.starts_with("#cloud-config\n"), "{doc}");
        for key in keys {
            assert!(doc.contains(key), "{key} in {doc}");
        }
        assert!(
            doc.contains("token-cccc"),
            "the caller's runcmd kept: {doc}"
        );
        let xml = instance_xml(&moto, &account.user, &node.provider_id).await;
        assert!(!xml.contains("<keyName>"), "no key pair: {xml}");

        // Keys beside a shell script cannot be added: refused, not dropped,
        // and nothing is launched.
        let err = p
            .provision_request(&booting(
                "boot-script",
                small(),
                BootData {
                    user_data: Some(b"#!/bin/sh\necho hi\n".to_vec()),
                    ..ssh(&keys)
                },
            ))
            .await
            .unwrap_err();
        assert!(matches!(err, ProvisionerError::Unsupported(_)), "{err:?}");
        assert_eq!(p.describe().await.unwrap().len(), 5);
        drop(moto);
    })
    .await;
}

#[tokio::test]
async fn get_reports_stopped_and_terminated_nodes() {
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

        let node = p.provision_request(&req("stop-1", small())).await.unwrap();
        let id = node.provider_id.clone();
        let got = p.get(&id).await.unwrap().expect("the node");
        assert_eq!(
            got.status,
            NodeStatus::Running,
            "moto runs instances at once"
        );
        assert_eq!(got.raw_state.as_deref(), Some("running"));
        assert_eq!(got.labels["wasmprov-request"], "stop-1");
        assert_eq!(foreign.get(&id).await.unwrap(), None, "another owner's");
        assert_eq!(
            p.get(&"i-0123456789abcdef0".to_string()).await.unwrap(),
            None
        );
        assert_eq!(p.get(&"not-an-instance".to_string()).await.unwrap(), None);

        signed(
            &moto,
            &account.user,
            &[("Action", "StopInstances"), ("InstanceId.1", &id)],
        )
        .await;
        let got = p.get(&id).await.unwrap().expect("the stopped node");
        assert_eq!(got.status, NodeStatus::Stopped);
        assert_eq!(got.raw_state.as_deref(), Some("stopped"));
        assert_eq!(got.join_state, JoinState::Failed);
        let described = p.describe().await.unwrap();
        assert_eq!(described.len(), 1);
        assert_eq!(described[0].status, NodeStatus::Stopped);

        p.terminate(&id).await.unwrap();
        match p.get(&id).await.unwrap() {
            None => {}
            Some(n) => assert!(
                matches!(n.status, NodeStatus::Deleting | NodeStatus::Deleted),
                "{n:?}"
            ),
        }
        assert!(p.describe().await.unwrap().is_empty());
        drop(moto);
    })
    .await;
}

#[tokio::test]
async fn disk_sizes_the_root_volume() {
    require_moto!();
    within_limit(async {
        let moto = Moto::start().await;
        let account = bootstrap(&moto).await;
        let dir = PluginDir::new();
        add_plugin(&dir, "ec2", &moto, &account.image_id, "");
        let host = host(&dir, OWNER, &[("ec2", account.user.clone())]).await;
        let p = plugin(&host, "ec2");
        let disk = |gib: u64| NodeShape {
            disk_bytes: Some(gib << 30),
            ..small()
        };
        // Any type gets such a volume: the disk does not change the type.
        let hint = p.price_hint(&disk(100)).expect("a price");
        assert_eq!(hint.instance_type, "t3a.medium");

        let node = p
            .provision_request(&req("disk-1", disk(100)))
            .await
            .unwrap();
        let images = signed(
            &moto,
            &account.user,
            &[
                ("Action", "DescribeImages"),
                ("ImageId.1", &account.image_id),
            ],
        )
        .await;
        let root = between(&images, "rootDeviceName");
        let xml = instance_xml(&moto, &account.user, &node.provider_id).await;
        let mapping = between(&xml, "blockDeviceMapping");
        assert_eq!(between(&mapping, "deviceName"), root);
        assert_eq!(between(&mapping, "deleteOnTermination"), "true");
        let volumes = signed(
            &moto,
            &account.user,
            &[
                ("Action", "DescribeVolumes"),
                ("Filter.1.Name", "attachment.instance-id"),
                ("Filter.1.Value.1", &node.provider_id),
            ],
        )
        .await;
        assert_eq!(all_between(&volumes, "size"), ["100"], "{volumes}");
        assert_eq!(between(&volumes, "volumeType"), "gp3");
        assert_eq!(between(&volumes, "device"), root);

        // Over EBS's 16 TiB: unsupported, priced as nothing, not launched.
        let huge = disk(16 * 1024 + 1);
        assert!(p.price_hint(&huge).is_none());
        let err = p
            .provision_request(&req("disk-huge", huge))
            .await
            .unwrap_err();
        assert!(matches!(err, ProvisionerError::Unsupported(_)), "{err:?}");
        assert_eq!(p.describe().await.unwrap().len(), 1);
        drop(moto);
    })
    .await;
}

/// A plugin `name` with `config` lines and no `image_id`.
fn add_plugin_without_image(dir: &PluginDir, name: &str, moto: &Moto, config: &str) {
    let upper = name.to_ascii_uppercase().replace('-', "_");
    dir.add(
        name,
        guests::AWS_EC2,
        &format!(
            "[config]\nregion = \"{REGION}\"\nendpoint = \"{url}\"\nssm_endpoint = \"{url}\"\n{config}\n\
             [secrets]\naccess_key_id = {{ env = \"{upper}_KEY\" }}\n\
             secret_access_key = {{ env = \"{upper}_SECRET\" }}\n\
             [http]\nallow = [\"{url}\"]\n",
            url = moto.url()
        ),
    );
}

#[tokio::test]
async fn launch_settings_read_back_with_boto3() {
    require_moto!();
    within_limit(async {
        let moto = Moto::start().await;
        let account = bootstrap(&moto).await;
        let user = &account.user;
        // What an operator made: subnets and a group tagged for the nodes,
        // an instance profile, an image tagged for them, an SSM parameter.
        let setup = boto3(
            &moto,
            user,
            REGION,
            &format!(
                "vpc = ec2.describe_vpcs(Filters=[{{'Name': 'is-default', 'Values': ['true']}}])['Vpcs'][0]['VpcId']\n\
                 small = ec2.create_subnet(VpcId=vpc, CidrBlock='172.31.96.0/24', AvailabilityZone='us-east-1a')['Subnet']['SubnetId']\n\
                 big = ec2.create_subnet(VpcId=vpc, CidrBlock='172.31.100.0/22', AvailabilityZone='us-east-1b')['Subnet']['SubnetId']\n\
                 other = ec2.create_subnet(VpcId=vpc, CidrBlock='172.31.112.0/20', AvailabilityZone='us-east-1b')['Subnet']['SubnetId']\n\
                 ec2.create_tags(Resources=[small, big], Tags=[{{'Key': 'tier', 'Value': 'nodes'}}])\n\
                 sg = ec2.create_security_group(GroupName='nodes', Description='nodes', VpcId=vpc)['GroupId']\n\
                 ec2.create_tags(Resources=[sg], Tags=[{{'Key': 'role', 'Value': 'nodes'}}])\n\
                 iam.create_role(RoleName='node', AssumeRolePolicyDocument='{{}}')\n\
                 profile = iam.create_instance_profile(InstanceProfileName='nodes')['InstanceProfile']['Arn']\n\
                 iam.add_role_to_instance_profile(InstanceProfileName='nodes', RoleName='node')\n\
                 ec2.create_tags(Resources=['{image}'], Tags=[{{'Key': 'team', 'Value': 'nodes'}}])\n\
                 x86 = [i['ImageId'] for i in ec2.describe_images(Owners=['amazon'], Filters=[{{'Name': 'architecture', 'Values': ['x86_64']}}])['Images'] if i['ImageId'] != '{image}']\n\
                 ssm.put_parameter(Name='/wasmprov/test/ami', Value=x86[0], Type='String')\n\
                 al2023 = ssm.get_parameter(Name='/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-x86_64')['Parameter']['Value']\n\
                 out({{'small': small, 'big': big, 'other': other, 'sg': sg, 'profile': profile, 'param_image': x86[0], 'al2023': al2023}})",
                image = account.image_id
            ),
        );
        let dir = PluginDir::new();
        add_plugin_without_image(
            &dir,
            "nodes",
            &moto,
            r#"ami_selector_terms = '[{"tags": {"team": "nodes"}}]'
subnet_selector_terms = '[{"tags": {"tier": "nodes"}}]'
security_group_selector_terms = '[{"tags": {"role": "nodes"}}]'
instance_profile = "nodes"
tags = '{"team": "platform", "cost-center": "42"}'
block_device_mappings = '[{"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {"volumeSize": "30Gi", "encrypted": true, "kmsKeyID": "alias/nodes"}}, {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": 12, "volumeType": "gp2"}}]'
metadata_options = '{"httpPutResponseHopLimit": 2}'
detailed_monitoring = true
associate_public_ip_address = true"#,
        );
        add_plugin_without_image(
            &dir,
            "by-ssm",
            &moto,
            "ami_selector_terms = '[{\"ssmParameter\": \"/wasmprov/test/ami\"}]'\nassociate_public_ip_address = false",
        );
        add_plugin_without_image(
            &dir,
            "by-alias",
            &moto,
            "ami_selector_terms = '[{\"alias\": \"al2023@latest\"}]'",
        );
        add_plugin_without_image(
            &dir,
            "bad",
            &moto,
            r#"block_device_mappings = '[{"deviceName": "/dev/xvda", "ebs": {"volumeType": "ssd"}}]'"#,
        );
        let host = host(
            &dir,
            OWNER,
            &[
                ("nodes", user.clone()),
                ("by-ssm", user.clone()),
                ("by-alias", user.clone()),
                ("bad", user.clone()),
            ],
        )
        .await;

        // Every setting, read back with boto3.
        let p = plugin(&host, "nodes");
        let node = p.provision_request(&req("nc-1", small())).await.unwrap();
        let i = read_instance(&moto, user, &node.provider_id);
        assert_eq!(i["ImageId"], account.image_id.as_str(), "selected by its tag");
        assert_eq!(i["SubnetId"], setup["big"], "the tagged subnet with the most free addresses");
        // On the network interface the public IP choice needs (moto lists
        // them there only).
        let groups: Vec<&str> = i["NetworkInterfaces"][0]["Groups"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|g| g["GroupId"].as_str())
            .collect();
        assert_eq!(groups, [setup["sg"].as_str().unwrap()], "{i}");
        assert_eq!(i["IamInstanceProfile"]["Arn"], setup["profile"]);
        assert_eq!(i["MetadataOptions"]["HttpTokens"], "required", "IMDSv2 by default");
        assert_eq!(i["MetadataOptions"]["HttpPutResponseHopLimit"], 2);
        assert_eq!(i["Monitoring"]["State"], "enabled");
        assert!(i["PublicIpAddress"].is_string(), "{i}");
        let tag = |v: &serde_json::Value, k: &str| {
            v["Tags"]
                .as_array()
                .and_then(|t| t.iter().find(|t| t["Key"] == k))
                .map(|t| t["Value"].as_str().unwrap().to_string())
        };
        assert_eq!(tag(&i, "team").as_deref(), Some("platform"));
        assert_eq!(tag(&i, "cost-center").as_deref(), Some("42"));
        assert_eq!(tag(&i, "wasmprov-owner").as_deref(), Some(OWNER));
        let volumes = boto3(
            &moto,
            user,
            REGION,
            &format!(
                "out(ec2.describe_volumes(Filters=[{{'Name': 'attachment.instance-id', 'Values': ['{}']}}])['Volumes'])",
                node.provider_id
            ),
        );
        let volume = |device: &str| {
            volumes
                .as_array()
                .unwrap()
                .iter()
                .find(|v| v["Attachments"][0]["Device"] == device)
                .unwrap_or_else(|| panic!("{device} in {volumes}"))
                .clone()
        };
        let root = volume("/dev/xvda");
        assert_eq!(root["Size"], 30);
        assert_eq!(root["VolumeType"], "gp3");
        assert_eq!(root["Encrypted"], true);
        assert_eq!(root["KmsKeyId"], "alias/nodes");
        assert_eq!(tag(&root, "team").as_deref(), Some("platform"));
        assert_eq!(tag(&root, "wasmprov-owner").as_deref(), Some(OWNER));
        let data = volume("/dev/xvdb");
        assert_eq!((data["Size"].as_u64(), data["VolumeType"].as_str()), (Some(12), Some("gp2")));

        // A zone picks the tagged subnet there; a disk sizes the root.
        let node = p
            .provision_request(&req(
                "nc-2",
                NodeShape {
                    zone: Some("us-east-1a".into()),
                    disk_bytes: Some(64 << 30),
                    ..small()
                },
            ))
            .await
            .unwrap();
        let i = read_instance(&moto, user, &node.provider_id);
        assert_eq!(i["SubnetId"], setup["small"]);
        let volumes = boto3(
            &moto,
            user,
            REGION,
            &format!(
                "out([v['Size'] for v in ec2.describe_volumes(Filters=[{{'Name': 'attachment.instance-id', 'Values': ['{}']}}, {{'Name': 'attachment.device', 'Values': ['/dev/xvda']}}])['Volumes']])",
                node.provider_id
            ),
        );
        assert_eq!(volumes, serde_json::json!([64]));
        // No tagged subnet in the zone asked for.
        let err = p
            .provision_request(&req(
                "nc-3",
                NodeShape {
                    zone: Some("us-east-1c".into()),
                    ..small()
                },
            ))
            .await
            .unwrap_err();
        assert!(matches!(&err, ProvisionerError::Unsupported(m) if m.contains("us-east-1c")), "{err:?}");

        // An image from an SSM parameter; no public IP asked for.
        let node = plugin(&host, "by-ssm")
            .provision_request(&req("ssm-1", small()))
            .await
            .unwrap();
        let i = read_instance(&moto, user, &node.provider_id);
        assert_eq!(i["ImageId"], setup["param_image"]);
        assert!(i.get("PublicIpAddress").is_none_or(serde_json::Value::is_null), "{i}");
        assert_eq!(i["MetadataOptions"]["HttpTokens"], "required");
        // An alias: AWS's public parameter for the architecture.
        let node = plugin(&host, "by-alias")
            .provision_request(&req("alias-1", small()))
            .await
            .unwrap();
        let i = read_instance(&moto, user, &node.provider_id);
        assert_eq!(i["ImageId"], setup["al2023"]);

        // Invalid settings: an error that names the key and the field.
        let err = plugin(&host, "bad")
            .provision_request(&req("bad-1", small()))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, ProvisionerError::InvalidConfig(m) if m.contains("block_device_mappings") && m.contains("ebs.volumeType")),
            "{err:?}"
        );
        drop(moto);
    })
    .await;
}

/// Requests moto has logged so far (its access log), leaving out its own
/// control API.
fn moto_requests(moto: &Moto) -> usize {
    moto.log_text()
        .lines()
        .filter(|l| l.contains("\"POST ") || l.contains("\"GET "))
        .filter(|l| !l.contains("/moto-api/"))
        .count()
}

/// Figures for `docs/BENCHMARKS.md` section 9 (host/bench/EC2.md): what the
/// EC2 catalogue costs, cold (every `offerings` call reads EC2) and through
/// the fleet's catalogue cache (what `rank` and `scale` use), next to a
/// `describe` of no instances (one `DescribeInstances`) as the baseline.
/// Run with `cargo test -p wasmprov-tests --test ec2 ec2_offerings_figures
/// -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "figures for the benchmark report; prints a table"]
async fn ec2_offerings_figures() {
    require_moto!();
    const RUNS: usize = 7;
    let moto = Moto::start().await;
    let account = bootstrap(&moto).await;
    let dir = PluginDir::new();
    add_plugin(&dir, "ec2", &moto, &account.image_id, "");
    let host = host(&dir, OWNER, &[("ec2", account.user.clone())]).await;
    let p = plugin(&host, "ec2");
    let median = |mut v: Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    // One warm-up of each, then RUNS timed; requests counted per call.
    p.describe().await.unwrap();
    let offered = p.offerings().await.unwrap().len();
    let mut rows = Vec::new();
    for (what, calls) in [("describe (baseline)", 0), ("offerings, cold", 1)] {
        let mut times = Vec::new();
        let before = moto_requests(&moto);
        for _ in 0..RUNS {
            let started = Instant::now();
            if calls == 0 {
                p.describe().await.unwrap();
            } else {
                p.offerings().await.unwrap();
            }
            times.push(started.elapsed());
        }
        let requests = (moto_requests(&moto) - before) as f64 / RUNS as f64;
        rows.push((what, median(times), requests));
    }
    let catalogues = wasmprov_fleet::Catalogues::default();
    let shape = NodeShape::new(2.0, 4 << 30);
    catalogues.rank(&host, &shape, None, |_| true).await;
    let before = moto_requests(&moto);
    let mut times = Vec::new();
    for _ in 0..RUNS {
        let started = Instant::now();
        let ranking = catalogues.rank(&host, &shape, None, |_| true).await;
        times.push(started.elapsed());
        assert!(!ranking.offers.is_empty());
    }
    let requests = (moto_requests(&moto) - before) as f64 / RUNS as f64;
    rows.push(("rank through the catalogue cache", median(times), requests));
    let base = rows[0].1.as_secs_f64();
    println!("| call | median of {RUNS} (ms) | × baseline | requests to EC2 per call |");
    println!("|---|---:|---:|---:|");
    for (what, t, requests) in &rows {
        println!(
            "| {what} | {:.1} | ×{:.1} | {requests:.0} |",
            t.as_secs_f64() * 1e3,
            t.as_secs_f64() / base
        );
    }
    println!("({offered} types offered for the image's architecture)");
    assert!(rows[1].2 >= 2.0, "a cold read asks EC2: {rows:?}");
    assert_eq!(rows[2].2, 0.0, "a cached catalogue asks nothing: {rows:?}");
}

// Contract 0.3 on EC2, and the seed systems ported onto it; each module
// uses this file's moto helpers.
#[path = "ec2/networking.rs"]
mod networking;
#[path = "ec2/seed_002.rs"]
mod seed_002;
#[path = "ec2/seed_004.rs"]
mod seed_004;
