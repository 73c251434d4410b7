//! Secrets from credential providers the host runs (`{ file }`,
//! `{ command }`, `{ aws }`), resolved when each call's store is made.
//!
//! `probe` (a test guest) shows what a call sees: its `config` mode answers
//! the current value of a key, its `leak` and `log` modes put the `token`
//! in an error and in log records, which the host must redact. The AWS
//! chain drives the EC2 plugin against moto on 127.0.0.1 with SigV4
//! checking on (skipped, saying so, without moto): a profile of a shared
//! credentials file, a web identity token exchanged at moto's STS, and
//! `credential_process`-style credentials that expire and are replaced
//! between calls of one host. The AWS chain reads the process's
//! environment, so those tests run their host in a child process of this
//! test binary, with only the variables the case sets.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use wasmprov_api::{CloudProvisioner, NodeShape, ProvisionRequest, ProvisionerError};
use wasmprov_host::{Host, HostBuilder};
use wasmprov_tests::{PluginDir, guests};

const OWNER: &str = "cred-owner";
const REGION: &str = "us-east-1";

async fn host(dir: &PluginDir) -> Host {
    HostBuilder::new(dir.path())
        .owner_id(OWNER)
        .cache_dir(Some(std::env::temp_dir().join("wasmprov-test-cache")))
        .work_dir(dir.path().join(".work"))
        .secret_source(|_| None)
        .build()
        .await
        .expect("host builds")
}

async fn probe_with(secrets: &str) -> (PluginDir, Host, Arc<dyn CloudProvisioner>) {
    let dir = PluginDir::new();
    dir.add("probe", guests::PROBE, &format!("[secrets]\n{secrets}"));
    let host = host(&dir).await;
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let p = host.plugin("probe").expect("probe loaded");
    (dir, host, p)
}

fn request(id: &str, labels: &[(&str, &str)]) -> ProvisionRequest {
    let mut shape = NodeShape::new(2.0, 4 << 30);
    for (k, v) in labels {
        shape.labels.insert((*k).into(), (*v).into());
    }
    ProvisionRequest {
        request_id: id.into(),
        shape,
        boot: Default::default(),
        subnet: None,
    }
}

/// The value of `key` the plugin sees in one call.
async fn seen(p: &Arc<dyn CloudProvisioner>, key: &str) -> Result<String, ProvisionerError> {
    let node = p
        .provision_request(&request("c", &[("mode", "config"), ("key", key)]))
        .await?;
    Ok(node.labels["value"].clone())
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).expect("writing a test file");
}

/// An executable script in `dir`.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    write(&path, &format!("#!/bin/sh\n{body}\n"));
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn rfc3339_in(secs: u64) -> String {
    let t = SystemTime::now() + Duration::from_secs(secs);
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs();
    // Civil date from days since the epoch (Howard Hinnant's algorithm).
    let (days, rem) = ((d / 86400) as i64, d % 86400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[tokio::test]
async fn a_file_is_read_at_every_call_so_a_rotated_value_is_seen_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("token");
    write(&file, "  first-3c1d\n");
    let (_dir, _host, p) =
        probe_with(&format!("token = {{ file = \"{}\" }}\n", file.display())).await;
    assert_eq!(seen(&p, "token").await.unwrap(), "first-3c1d");
    write(&file, "second-77ab");
    assert_eq!(seen(&p, "token").await.unwrap(), "second-77ab");

    // Gone: the call fails (no trap), naming the key and the file, and the
    // plugin's next call works once the file is back.
    std::fs::remove_file(&file).unwrap();
    let err = seen(&p, "token").await.unwrap_err();
    let ProvisionerError::Auth(m) = &err else {
        panic!("a missing file is not retryable: {err:?}")
    };
    assert!(m.contains("secret `token`"), "{m}");
    assert!(m.contains(&format!("file {}", file.display())), "{m}");
    assert!(m.contains("No such file"), "{m}");
    write(&file, "third-0e0e");
    assert_eq!(seen(&p, "token").await.unwrap(), "third-0e0e");

    // A directory, an oversize file and an empty one are refused.
    for (setup, says) in [
        (0, "not a regular file"),
        (1, "larger than 64 KiB"),
        (2, "empty"),
    ] {
        std::fs::remove_file(&file).ok();
        std::fs::remove_dir(&file).ok();
        match setup {
            0 => std::fs::create_dir(&file).unwrap(),
            1 => write(&file, &"x".repeat(70_000)),
            _ => write(&file, " \n"),
        }
        let err = seen(&p, "token").await.unwrap_err();
        assert!(err.to_string().contains(says), "{says}: {err}");
    }
}

#[tokio::test]
async fn refusals_of_the_manifest_name_the_field() {
    let dir = PluginDir::new();
    dir.add(
        "probe",
        guests::PROBE,
        "[secrets]\ntoken = { file = \"relative/token\" }\n",
    );
    dir.add(
        "other",
        guests::PROBE,
        "[secrets]\ntoken = { command = [\"get-token\"] }\n",
    );
    let host = host(&dir).await;
    let errors: Vec<String> = host.errors().iter().map(ToString::to_string).collect();
    let all = errors.join("\n");
    assert!(
        all.contains("secrets.token.file") && all.contains("must be an absolute path"),
        "{all}"
    );
    assert!(
        all.contains("secrets.token.command") && all.contains("no relative path or PATH lookup"),
        "{all}"
    );
}

/// One probe per secret line, named `p0`, `p1`, … in one host.
async fn probes(lines: &[String]) -> (PluginDir, Host, Vec<Arc<dyn CloudProvisioner>>) {
    let dir = PluginDir::new();
    for (i, line) in lines.iter().enumerate() {
        dir.add(
            &format!("p{i}"),
            guests::PROBE,
            &format!("[secrets]\n{line}\n"),
        );
    }
    let host = host(&dir).await;
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let ps = (0..lines.len())
        .map(|i| host.plugin(&format!("p{i}")).expect("loaded"))
        .collect();
    (dir, host, ps)
}

#[tokio::test]
async fn a_command_is_bounded_in_time_and_output_and_its_failure_is_clear() {
    let tmp = tempfile::tempdir().unwrap();
    let slow = script(tmp.path(), "slow", "sleep 30; echo late");
    let flood = script(tmp.path(), "flood", "head -c 200000 /dev/zero | tr '\\0' x");
    let fails = script(tmp.path(), "fails", "echo 'vault is sealed' >&2; exit 3");
    let env = script(tmp.path(), "env", "env | sort | tr '\\n' ' '");
    let quiet = script(tmp.path(), "quiet", "exit 0");
    let lines: Vec<String> = [
        (&slow, ", timeout_seconds = 1"),
        (&flood, ""),
        (&fails, ""),
        (&env, ""),
        (&quiet, ""),
    ]
    .iter()
    .map(|(path, extra)| format!("token = {{ command = [\"{}\"]{extra} }}", path.display()))
    .collect();
    let (_dir, _host, p) = probes(&lines).await;

    let started = Instant::now();
    let err = seen(&p[0], "token").await.unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "killed at its timeout"
    );
    // A timeout may pass: retryable (a transport error, which a provision
    // that sent nothing reports as not sent).
    assert!(
        matches!(&err, ProvisionerError::NotSent(m)
            if m.contains("did not finish within 1 s") && m.contains("secret `token`")
                && m.contains(&format!("command {}", slow.display()))),
        "{err:?}"
    );
    let err = seen(&p[1], "token").await.unwrap_err();
    assert!(
        matches!(&err, ProvisionerError::Auth(m) if m.contains("printed more than 64 KiB")),
        "{err:?}"
    );
    // Its standard error is not shown (it may hold a secret), only counted.
    let err = seen(&p[2], "token").await.unwrap_err();
    assert!(
        matches!(&err, ProvisionerError::Auth(m)
            if m.contains("failed (exit status: 3)") && m.contains("(16 bytes) is not shown")
                && !m.contains("sealed")),
        "{err:?}"
    );
    // The environment is cleared but PATH and HOME.
    let shown = seen(&p[3], "token").await.unwrap();
    assert!(
        shown.contains("PATH=/usr/local/bin:/usr/bin:/bin"),
        "{shown}"
    );
    assert!(
        !shown.contains("CARGO"),
        "the test's environment leaked: {shown}"
    );
    let err = seen(&p[4], "token").await.unwrap_err();
    assert!(err.to_string().contains("the value is empty"), "{err}");
}

#[tokio::test]
async fn credential_process_answers_are_refreshed_at_their_expiration_and_redacted() {
    let tmp = tempfile::tempdir().unwrap();
    let answer = tmp.path().join("answer.json");
    let runs = tmp.path().join("runs");
    // credential_process style: one run serves both keys (same snapshot).
    let helper = script(
        tmp.path(),
        "creds",
        &format!("echo run >> {}; cat {}", runs.display(), answer.display()),
    );
    let give = |key: &str, secret: &str, life: u64| {
        write(
            &answer,
            &format!(
                r#"{{"Version": 1, "AccessKeyId": "{key}", "SecretAccessKey": "{secret}", "Expiration": "{}"}}"#,
                rfc3339_in(life)
            ),
        );
    };
    give("AKIDFIRST", "secret-first-91c2", 2);
    let (_dir, _host, p) = probe_with(&format!(
        "key = {{ command = [\"{0}\"], json = \"AccessKeyId\" }}\n\
         token = {{ command = [\"{0}\"], json = \"SecretAccessKey\" }}\n",
        helper.display()
    ))
    .await;
    let runs_so_far = || {
        std::fs::read_to_string(&runs)
            .unwrap_or_default()
            .lines()
            .count()
    };
    assert_eq!(seen(&p, "token").await.unwrap(), "secret-first-91c2");
    assert_eq!(seen(&p, "key").await.unwrap(), "AKIDFIRST");
    assert_eq!(runs_so_far(), 1, "one run for both keys and both calls");

    // Rotated at the source; the cached answer holds until half its life
    // is left, then the next call runs the helper again.
    give("AKIDSECOND", "secret-second-5d7e", 3600);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert_eq!(seen(&p, "token").await.unwrap(), "secret-second-5d7e");
    assert_eq!(seen(&p, "key").await.unwrap(), "AKIDSECOND");
    assert_eq!(runs_so_far(), 2);

    // Redaction covers the new value and the old one.
    let err = p
        .provision_request(&request("l", &[("mode", "leak")]))
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("the token [redacted] was refused"), "{text}");
    assert!(!text.contains("secret-second-5d7e"), "{text}");
}

// ---- The AWS chain and rotating credentials, against moto ----

fn moto_available() -> bool {
    Command::new("python3")
        .args(["-c", "import moto, moto.server, boto3"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Requests moto serves unsigned: [`bootstrap`]'s.
const BOOTSTRAP_CALLS: u32 = 7;

/// A moto server on 127.0.0.1 checking SigV4 after the bootstrap; killed on drop.
struct Moto {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    /// Moto serving the first `unsigned` requests without checking them.
    fn start(unsigned: u32) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(dir.path().join("moto.log")).unwrap();
        let child = Command::new("python3")
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .env("INITIAL_NO_AUTH_ACTION_COUNT", unsigned.to_string())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("starting moto");
        let moto = Self {
            child,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto did not listen within 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        moto
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Runs `code` in Python with `boto3` and `url` defined; its stdout.
    fn python(&self, code: &str) -> String {
        let out = Command::new("python3")
            .args([
                "-c",
                &format!("import boto3, json\nurl = {:?}\n{code}", self.url()),
            ])
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .output()
            .expect("python3");
        assert!(
            out.status.success(),
            "python: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

/// What the bootstrap made: two keys of a user allowed `ec2:*`, a role
/// allowed `ec2:*` that anyone may assume, and an AMI.
struct Account {
    keys: Vec<(String, String)>,
    role_arn: String,
    image_id: String,
}

/// Exactly [`BOOTSTRAP_CALLS`] unsigned calls (boto3 with dummy keys:
/// moto does not check them yet), then a check that moto now refuses a
/// bogus key.
fn bootstrap(moto: &Moto) -> Account {
    let account = bootstrap_only(moto);
    assert_signatures_checked(moto);
    account
}

/// [`bootstrap`] without the check.
fn bootstrap_only(moto: &Moto) -> Account {
    let out = moto.python(&format!(
        r#"
kw = dict(endpoint_url=url, region_name="{REGION}", aws_access_key_id="AKIDBOOT", aws_secret_access_key="boot")
iam = boto3.client("iam", **kw)
iam.create_user(UserName="wasmprov")
keys = [iam.create_access_key(UserName="wasmprov")["AccessKey"] for _ in range(2)]
ec2 = '{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Action":"ec2:*","Resource":"*"}}]}}'
iam.put_user_policy(UserName="wasmprov", PolicyName="ec2", PolicyDocument=ec2)
trust = '{{"Version":"2012-10-17","Statement":[{{"Effect":"Allow","Principal":{{"AWS":"*"}},"Action":["sts:AssumeRole","sts:AssumeRoleWithWebIdentity"]}}]}}'
role = iam.create_role(RoleName="wasmprov-nodes", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
iam.put_role_policy(RoleName="wasmprov-nodes", PolicyName="ec2", PolicyDocument=ec2)
image = boto3.client("ec2", **kw).describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
print(json.dumps(dict(keys=[[k["AccessKeyId"], k["SecretAccessKey"]] for k in keys], role=role, image=image)))
"#
    ));
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("bootstrap output");
    let keys = v["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| (k[0].as_str().unwrap().into(), k[1].as_str().unwrap().into()))
        .collect();
    Account {
        keys,
        role_arn: v["role"].as_str().unwrap().into(),
        image_id: v["image"].as_str().unwrap().into(),
    }
}

/// Moto refuses a request signed with a bogus key (it checks signatures).
fn assert_signatures_checked(moto: &Moto) {
    let refused = Command::new("python3")
        .args([
            "-c",
            &format!(
                "import boto3\nboto3.client('ec2', endpoint_url={:?}, region_name='{REGION}', aws_access_key_id='AKIDBOGUS', aws_secret_access_key='x').describe_instances()",
                moto.url()
            ),
        ])
        .output()
        .unwrap();
    assert!(!refused.status.success(), "moto must check signatures now");
}

/// boto3, signed with the user's key, reads back instance `id`: its state.
fn instance_state(moto: &Moto, account: &Account, id: &str) -> String {
    let (key, secret) = &account.keys[0];
    moto.python(&format!(
        r#"
ec2 = boto3.client("ec2", endpoint_url=url, region_name="{REGION}", aws_access_key_id="{key}", aws_secret_access_key="{secret}")
r = ec2.describe_instances(InstanceIds=["{id}"])["Reservations"][0]["Instances"][0]
print(r["State"]["Name"], r["ImageId"])
"#
    ))
    .trim()
    .to_string()
}

/// The EC2 plugin's manifest with its credentials from `secrets`.
fn ec2_manifest(url: &str, image_id: &str, secrets: &str) -> String {
    format!(
        "[config]\nregion = \"{REGION}\"\nendpoint = \"{url}\"\nimage_id = \"{image_id}\"\n\
         [secrets]\n{secrets}\n[http]\nallow = [\"{url}\"]\n"
    )
}

const AWS_SECRETS: &str = "access_key_id = { aws = \"access_key_id\" }\n\
     secret_access_key = { aws = \"secret_access_key\" }\n\
     session_token = { aws = \"session_token\" }\n";

/// In the child process (`CRED_CHILD` set): loads the EC2 plugin with the
/// manifest in `CRED_MANIFEST` and provisions one node; prints its id.
async fn child_provisions() {
    let dir = PluginDir::new();
    dir.add(
        "aws-ec2",
        guests::AWS_EC2,
        &std::env::var("CRED_MANIFEST").unwrap(),
    );
    let host = host(&dir).await;
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let p = host.plugin("aws-ec2").unwrap();
    let node = p
        .provision_request(&request("cred-1", &[]))
        .await
        .expect("provisioned with credentials from the AWS chain");
    println!("INSTANCE={}", node.provider_id);
}

/// Runs test `name` of this binary in a child process whose environment is
/// only `env` (and a private HOME, so no real `~/.aws` is read); the
/// instance id it printed.
fn in_child(name: &str, home: &Path, env: &[(&str, String)]) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("TMPDIR", std::env::temp_dir())
        .env("CRED_CHILD", name)
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child {name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .find_map(|l| l.split("INSTANCE=").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no instance id in:\n{stdout}"))
        .to_string()
}

/// `Some(true)` in this test's child, `Some(false)` in another test's
/// child (nothing to do), `None` in the parent.
fn child_of(name: &str) -> Option<bool> {
    std::env::var("CRED_CHILD").ok().map(|c| c == name)
}

#[tokio::test]
async fn aws_profile_from_a_shared_credentials_file_drives_ec2() {
    const NAME: &str = "aws_profile_from_a_shared_credentials_file_drives_ec2";
    match child_of(NAME) {
        Some(true) => return child_provisions().await,
        Some(false) => return,
        None => {}
    }
    if !moto_available() {
        eprintln!("skipping: moto or boto3 is not installed");
        return;
    }
    let moto = Moto::start(BOOTSTRAP_CALLS);
    let account = bootstrap(&moto);
    let home = tempfile::tempdir().unwrap();
    let files = tempfile::tempdir().unwrap();
    let (key, secret) = &account.keys[1];
    let credentials = files.path().join("credentials");
    write(
        &credentials,
        &format!(
            "[default]\naws_access_key_id = AKIDNOTTHISONE\naws_secret_access_key = wrong\n\n\
             [wasmprov-test]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n"
        ),
    );
    let config = files.path().join("config");
    write(&config, "[profile wasmprov-test]\nregion = us-east-1\n");
    let manifest = format!(
        "{}[credentials.aws]\nprofile = \"wasmprov-test\"\n",
        ec2_manifest(&moto.url(), &account.image_id, AWS_SECRETS)
    );
    let id = in_child(
        NAME,
        home.path(),
        &[
            (
                "AWS_SHARED_CREDENTIALS_FILE",
                credentials.display().to_string(),
            ),
            ("AWS_CONFIG_FILE", config.display().to_string()),
            ("CRED_MANIFEST", manifest),
        ],
    );
    assert_eq!(
        instance_state(&moto, &account, &id),
        format!("running {}", account.image_id)
    );
}

#[tokio::test]
async fn aws_web_identity_token_file_is_exchanged_at_sts_and_drives_ec2() {
    const NAME: &str = "aws_web_identity_token_file_is_exchanged_at_sts_and_drives_ec2";
    match child_of(NAME) {
        Some(true) => return child_provisions().await,
        Some(false) => return,
        None => {}
    }
    if !moto_available() {
        eprintln!("skipping: moto or boto3 is not installed");
        return;
    }
    // AssumeRoleWithWebIdentity is unsigned (the token is the proof), and
    // moto's signature check cannot take an unsigned request: moto serves
    // exactly one more request unchecked, that exchange; the EC2 calls
    // after it are checked (a bogus key is refused afterwards).
    let moto = Moto::start(BOOTSTRAP_CALLS + 1);
    let account = bootstrap_only(&moto);
    let home = tempfile::tempdir().unwrap();
    let token = home.path().join("token");
    // As EKS projects it for IRSA (moto does not verify the JWT).
    write(
        &token,
        "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2ln",
    );
    let id = in_child(
        NAME,
        home.path(),
        &[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", token.display().to_string()),
            ("AWS_ROLE_ARN", account.role_arn.clone()),
            ("AWS_ROLE_SESSION_NAME", "wasmprov-irsa".into()),
            ("AWS_REGION", REGION.into()),
            ("AWS_ENDPOINT_URL_STS", moto.url()),
            (
                "CRED_MANIFEST",
                ec2_manifest(&moto.url(), &account.image_id, AWS_SECRETS),
            ),
        ],
    );
    assert_eq!(
        instance_state(&moto, &account, &id),
        format!("running {}", account.image_id)
    );
    assert_signatures_checked(&moto);
}

#[tokio::test]
async fn expiring_credentials_are_replaced_between_calls_without_a_restart() {
    if child_of("").is_some() {
        return;
    }
    if !moto_available() {
        eprintln!("skipping: moto or boto3 is not installed");
        return;
    }
    let moto = Moto::start(BOOTSTRAP_CALLS);
    let account = bootstrap(&moto);
    let tmp = tempfile::tempdir().unwrap();
    let answer = tmp.path().join("answer.json");
    let give = |key: &str, secret: &str| {
        write(
            &answer,
            &format!(
                r#"{{"Version": 1, "AccessKeyId": "{key}", "SecretAccessKey": "{secret}", "Expiration": "{}"}}"#,
                rfc3339_in(4)
            ),
        );
    };
    let secrets = format!(
        "access_key_id = {{ command = [\"/bin/cat\", \"{0}\"], json = \"AccessKeyId\" }}\n\
         secret_access_key = {{ command = [\"/bin/cat\", \"{0}\"], json = \"SecretAccessKey\" }}\n",
        answer.display()
    );
    let dir = PluginDir::new();
    dir.add(
        "aws-ec2",
        guests::AWS_EC2,
        &ec2_manifest(&moto.url(), &account.image_id, &secrets),
    );
    let (k1, s1) = account.keys[0].clone();
    let (k2, s2) = account.keys[1].clone();
    give(&k1, &s1);
    let host = host(&dir).await;
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let p = host.plugin("aws-ec2").unwrap();
    let first = p.provision_request(&request("rot-1", &[])).await.unwrap();

    // The credentials near their expiry (4 s, in whole seconds; refreshed
    // at half their life) and the source now gives a key moto refuses:
    // the next call uses it (and fails as AWS refuses it), no restart.
    give("AKIDREVOKED000000000", "revoked");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let err = p
        .provision_request(&request("rot-2", &[]))
        .await
        .unwrap_err();
    assert!(matches!(err, ProvisionerError::Auth(_)), "{err:?}");
    assert!(!err.to_string().contains("revoked\""), "{err}");

    // Then the second valid key: calls work again, in the same host.
    give(&k2, &s2);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let third = p.provision_request(&request("rot-3", &[])).await.unwrap();
    for node in [&first, &third] {
        assert_eq!(
            instance_state(&moto, &account, &node.provider_id),
            format!("running {}", account.image_id)
        );
    }
}

/// The container credentials endpoint (ECS task roles, EKS Pod Identity):
/// `AWS_CONTAINER_CREDENTIALS_FULL_URI` on loopback with its authorization
/// token. The host asks it (the plugin has no grant to it and never does),
/// sends the token, and the credentials it answers drive EC2.
#[tokio::test]
async fn aws_container_credentials_endpoint_drives_ec2() {
    const NAME: &str = "aws_container_credentials_endpoint_drives_ec2";
    match child_of(NAME) {
        Some(true) => return child_provisions().await,
        Some(false) => return,
        None => {}
    }
    if !moto_available() {
        eprintln!("skipping: moto or boto3 is not installed");
        return;
    }
    use std::io::{BufRead as _, Write as _};
    // One call more than the bootstrap before moto checks signatures: the
    // task role's credentials (an AssumeRole, as the container agent makes
    // it), with a session token, as the endpoint hands them out.
    let moto = Moto::start(BOOTSTRAP_CALLS + 1);
    let account = bootstrap_only(&moto);
    let role = &account.role_arn;
    let creds = moto.python(&format!(
        r#"
sts = boto3.client("sts", endpoint_url=url, region_name="{REGION}", aws_access_key_id="AKIDBOOT", aws_secret_access_key="boot")
c = sts.assume_role(RoleArn="{role}", RoleSessionName="task")["Credentials"]
print(json.dumps([c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"]]))
"#
    ));
    assert_signatures_checked(&moto);
    let creds: Vec<String> = serde_json::from_str(creds.trim()).unwrap();
    let (key, secret, token) = (creds[0].clone(), creds[1].clone(), creds[2].clone());
    // The endpoint: answers the task's credentials to a request carrying
    // the authorization token, 401 to any other; counts what it served.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (s, r) = (served.clone(), refused.clone());
    let expiration = rfc3339_in(3600);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
            let mut authorized = false;
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                if line == "\r\n" {
                    break;
                }
                if line.to_ascii_lowercase().starts_with("authorization:")
                    && line.trim_end().ends_with(" task-token-7f3a")
                {
                    authorized = true;
                }
                line.clear();
            }
            let (status, body) = if authorized {
                s.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                (
                    "200 OK",
                    format!(
                        r#"{{"AccessKeyId": "{key}", "SecretAccessKey": "{secret}", "Token": "{token}", "Expiration": "{expiration}"}}"#
                    ),
                )
            } else {
                r.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                ("401 Unauthorized", "{}".to_string())
            };
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    let home = tempfile::tempdir().unwrap();
    let id = in_child(
        NAME,
        home.path(),
        &[
            (
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                format!("http://127.0.0.1:{port}/v2/credentials/task"),
            ),
            (
                "AWS_CONTAINER_AUTHORIZATION_TOKEN",
                "task-token-7f3a".to_string(),
            ),
            (
                "CRED_MANIFEST",
                ec2_manifest(&moto.url(), &account.image_id, AWS_SECRETS),
            ),
        ],
    );
    assert_eq!(
        instance_state(&moto, &account, &id),
        format!("running {}", account.image_id)
    );
    assert!(
        served.load(std::sync::atomic::Ordering::SeqCst) >= 1,
        "the endpoint was asked"
    );
    assert_eq!(refused.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert_signatures_checked(&moto);
}

/// A failing or expired credential program is not run once per call: its
/// failure is the answer for a few seconds; an answer that has already
/// expired is refused; what a program prints on standard error (its last
/// secret, say) never reaches an error; a program that leaves something
/// running past its time limit has all of it killed.
#[tokio::test]
async fn failing_and_expired_credential_programs_are_contained() {
    let tmp = tempfile::tempdir().unwrap();
    let runs = tmp.path().join("runs");
    let count = format!("echo run >> {}", runs.display());
    let leaky = script(
        tmp.path(),
        "leaky",
        &format!(
            "{count}; echo 'refresh failed; previous secret was s3cr3t-V4LUE-0042' >&2; exit 2"
        ),
    );
    let expired = script(
        tmp.path(),
        "expired",
        &format!(
            "{count}; echo '{{\"Version\": 1, \"Token\": \"old-token-99\", \"Expiration\": \"2001-01-01T00:00:00Z\"}}'"
        ),
    );
    let pid_file = tmp.path().join("grandchild.pid");
    let forks = script(
        tmp.path(),
        "forks",
        &format!("sleep 60 & echo $! > {}; sleep 60", pid_file.display()),
    );
    let lines = vec![
        format!("token = {{ command = [\"{}\"] }}", leaky.display()),
        format!(
            "token = {{ command = [\"{}\"], json = \"Token\" }}",
            expired.display()
        ),
        format!(
            "token = {{ command = [\"{}\"], timeout_seconds = 1 }}",
            forks.display()
        ),
    ];
    let (_dir, _host, p) = probes(&lines).await;
    let runs_so_far = || {
        std::fs::read_to_string(&runs)
            .unwrap_or_default()
            .lines()
            .count()
    };

    for _ in 0..10 {
        let err = seen(&p[0], "token").await.unwrap_err();
        let text = format!("{err:?}");
        assert!(!text.contains("s3cr3t-V4LUE-0042"), "{text}");
        assert!(text.contains("is not shown"), "{text}");
    }
    assert_eq!(runs_so_far(), 1, "ten calls within seconds: one run");

    for _ in 0..10 {
        let err = seen(&p[1], "token").await.unwrap_err();
        assert!(
            matches!(&err, ProvisionerError::Auth(m) if m.contains("already expired")),
            "{err:?}"
        );
    }
    assert_eq!(
        runs_so_far(),
        2,
        "an expired answer is not asked again at once"
    );

    let started = Instant::now();
    let err = seen(&p[2], "token").await.unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(10), "{err:?}");
    assert!(
        err.to_string()
            .contains("everything it started were killed"),
        "{err}"
    );
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // Killed with its group (give the kernel a moment to reap it).
    let deadline = Instant::now() + Duration::from_secs(5);
    while std::path::Path::new(&format!("/proc/{pid}")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| !s.contains(") Z "))
            .unwrap_or(false)
    {
        assert!(
            Instant::now() < deadline,
            "the program's child {pid} outlived it"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn values_a_plugin_does_not_read_cost_it_nothing() {
    // A plugin reads the keys it asks for, one by one: a large value it
    // never reads (here 900 KB, with 2 MiB of memory for the whole plugin)
    // must not be copied into it (found by an outside attack on a read of
    // all values at once, which made every call a memory fault).
    let dir = PluginDir::new();
    dir.add(
        "probe",
        guests::PROBE,
        &format!(
            "[config]\ntext = \"small\"\nunused_note = \"{}\"\n[limits]\nmemory_mib = 2\n",
            "x".repeat(900_000)
        ),
    );
    let host = host(&dir).await;
    assert!(host.errors().is_empty(), "{:?}", host.errors());
    let p = host.plugin("probe").expect("probe loaded");
    assert_eq!(seen(&p, "text").await.unwrap(), "small");
    let mut shape = NodeShape::new(2.0, 4 << 30);
    shape.labels.insert("mode".into(), "config".into());
    shape.labels.insert("key".into(), "text".into());
    let hint = host
        .wasm_plugin("probe")
        .unwrap()
        .try_price_hint(&shape)
        .expect("the hint answers")
        .expect("with a price");
    assert_eq!(hint.instance_type, "small");
}
