//! EC2 as [moto](https://github.com/getmoto/moto) serves it
//! (`python3 -m moto.server`), as the suite uses it.
//!
//! Each fake starts its own moto on a free loopback port, with its log in a
//! temporary directory, and kills it when dropped. Moto runs without
//! signature checking (no `INITIAL_NO_AUTH_ACTION_COUNT`), so the fake
//! credentials of [`FakeCloud::secret`] work.
//!
//! The plugin keeps its default endpoint (`https://ec2.us-east-1.amazonaws.com`;
//! the suite sets no `endpoint`) and the host sends its requests to moto
//! instead, with the `Host` header it wrote. Moto's server does not route by
//! that header: it picks the service from the SigV4 credential scope of the
//! `Authorization` header (`…/us-east-1/ec2/aws4_request`), which the
//! plugin's signed requests carry. The fake's own requests (ground truth,
//! planting, the AMI lookup) are unsigned and carry a dummy `Authorization`
//! header naming that scope for the same reason.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use bytes::Bytes;
use wasmprov_host::intercept::OutgoingRequest;

use super::loopback;
use crate::Unavailable;
use crate::fake::{
    FakeCloud, NetworkTruth, NodeRecord, TruthAddress, TruthGroup, TruthNode, TruthSubnet,
};
use crate::faults::FaultKind;

/// The region the plugin is pointed at.
const REGION: &str = "us-east-1";
/// The authority of the plugin's default endpoint in [`REGION`].
const HOST: &str = "ec2.us-east-1.amazonaws.com";
/// `Version` of every Query API call.
const API_VERSION: &str = "2016-11-15";
/// The access key id the plugin gets (moto checks none).
const ACCESS_KEY_ID: &str = "AKIAFAKEWASMPROVTEST";
/// The secret access key the plugin gets.
const SECRET_ACCESS_KEY: &str = "wasmprov-fake-secret-access-key";
/// The AMI of moto's own examples, used when moto lists it.
const PREFERRED_IMAGE: &str = "ami-12c6146b";
/// `Version` of every Elastic Load Balancing v2 call.
const ELB_API_VERSION: &str = "2015-12-01";
/// The zone whose default subnet the networking rules use.
const SUBNET_ZONE: &str = "us-east-1a";
/// The name of the target group the fake makes.
const TARGET_GROUP: &str = "conformance-tg";
/// The type of planted instances.
const PLANT_TYPE: &str = "t3.micro";
/// How long moto may take to listen.
const START_LIMIT: Duration = Duration::from_secs(30);
/// How long one request of the fake to moto may take.
const CALL_LIMIT: Duration = Duration::from_secs(30);
/// Most `DescribeInstances` pages read for the ground truth.
const MAX_PAGES: usize = 1000;
/// `MaxResults` of those pages (EC2 allows 5 to 1000); small in the unit
/// tests, so that following `nextToken` is exercised.
const PAGE_SIZE: &str = if cfg!(test) { "5" } else { "1000" };
/// How much of an unexpected answer an error message quotes.
const SNIPPET: usize = 300;

/// EC2 through a moto server this fake started; moto is killed on drop.
pub(crate) struct Ec2 {
    child: Child,
    addr: SocketAddr,
    image_id: String,
    /// The ARN of the ELBv2 target group made at start, for `targets`.
    group: String,
    /// The subnet the networking rules use: the default subnet of
    /// [`SUBNET_ZONE`].
    subnet: String,
    log: PathBuf,
    faults: AtomicU64,
    _dir: tempfile::TempDir,
}

impl std::fmt::Debug for Ec2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ec2")
            .field("addr", &self.addr)
            .field("image_id", &self.image_id)
            .finish_non_exhaustive()
    }
}

impl Ec2 {
    /// Starts moto, waits until it accepts connections and picks an AMI it
    /// knows in [`REGION`].
    ///
    /// # Errors
    /// [`Unavailable`] when moto is not installed; moto failing to start
    /// (quoting its log) or to answer EC2.
    pub(crate) async fn start() -> anyhow::Result<Self> {
        if !moto_installed().await {
            return Err(anyhow::Error::new(Unavailable(
                "moto is not installed (pip install 'moto[server]'): the EC2 fake needs it".into(),
            )));
        }
        let port = std::net::TcpListener::bind(("127.0.0.1", 0))
            .and_then(|l| l.local_addr())
            .context("finding a free loopback port for moto")?
            .port();
        let dir = tempfile::tempdir().context("creating a directory for moto's log")?;
        let log = dir.path().join("moto.log");
        let out = std::fs::File::create(&log)
            .with_context(|| format!("creating moto's log {}", log.display()))?;
        let err = out
            .try_clone()
            .with_context(|| format!("opening moto's log {}", log.display()))?;
        let child = crate::fake::moto_command(port)
            // Signature checking stays off: any credentials work.
            .env_remove("INITIAL_NO_AUTH_ACTION_COUNT")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .context("starting python3 -m moto.server")?;
        // From here on, dropping `fake` kills moto.
        let mut fake = Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            image_id: String::new(),
            group: String::new(),
            subnet: String::new(),
            log,
            faults: AtomicU64::new(0),
            _dir: dir,
        };
        fake.image_id = fake.wait_ready().await?;
        fake.subnet = fake.default_subnet().await?;
        fake.group = fake.make_target_group().await?;
        Ok(fake)
    }

    /// The default subnet of [`SUBNET_ZONE`].
    async fn default_subnet(&self) -> anyhow::Result<String> {
        let xml = self
            .query(&[
                ("Action", "DescribeSubnets"),
                ("Filter.1.Name", "availability-zone"),
                ("Filter.1.Value.1", SUBNET_ZONE),
                ("Filter.2.Name", "default-for-az"),
                ("Filter.2.Value.1", "true"),
            ])
            .await?;
        first_text(&xml, "subnetId").ok_or_else(|| {
            anyhow::anyhow!(
                "moto has no default subnet in {SUBNET_ZONE}: {}",
                snippet(&xml)
            )
        })
    }

    /// A TCP target group of instances in the default VPC, for the
    /// `targets` rule; its ARN.
    async fn make_target_group(&self) -> anyhow::Result<String> {
        let xml = self
            .query(&[
                ("Action", "DescribeVpcs"),
                ("Filter.1.Name", "is-default"),
                ("Filter.1.Value.1", "true"),
            ])
            .await?;
        let vpc = first_text(&xml, "vpcId")
            .ok_or_else(|| anyhow::anyhow!("moto has no default VPC: {}", snippet(&xml)))?;
        let xml = self
            .elb_query(&[
                ("Action", "CreateTargetGroup"),
                ("Name", TARGET_GROUP),
                ("Protocol", "TCP"),
                ("Port", "6443"),
                ("VpcId", &vpc),
                ("TargetType", "instance"),
            ])
            .await?;
        first_text(&xml, "TargetGroupArn")
            .ok_or_else(|| anyhow::anyhow!("CreateTargetGroup answered no ARN: {}", snippet(&xml)))
    }

    /// Waits until moto answers EC2 (not only accepts connections: a
    /// request that arrives while it is still starting can be reset) and
    /// returns the AMI the fake launches.
    async fn wait_ready(&mut self) -> anyhow::Result<String> {
        let deadline = Instant::now() + START_LIMIT;
        loop {
            let error = match self.find_image().await {
                Ok(image) => return Ok(image),
                Err(e) => e,
            };
            if let Ok(Some(status)) = self.child.try_wait() {
                anyhow::bail!("moto exited early ({status}):\n{}", self.log_tail());
            }
            if Instant::now() >= deadline {
                return Err(error.context(format!(
                    "moto at {} did not answer EC2 within {} s:\n{}",
                    self.addr,
                    START_LIMIT.as_secs(),
                    self.log_tail()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The last lines of moto's log, for error messages.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(30).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// An AMI moto knows: [`PREFERRED_IMAGE`] when listed, else the first
    /// of Amazon's.
    async fn find_image(&self) -> anyhow::Result<String> {
        let xml = self
            .query(&[("Action", "DescribeImages"), ("Owner.1", "amazon")])
            .await?;
        let doc = roxmltree::Document::parse(&xml)
            .with_context(|| format!("DescribeImages answered malformed XML: {}", snippet(&xml)))?;
        let ids: Vec<&str> = doc
            .descendants()
            .filter(|n| n.is_element() && n.tag_name().name() == "imageId")
            .filter_map(|n| n.text())
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect();
        ids.iter()
            .find(|id| **id == PREFERRED_IMAGE)
            .or_else(|| ids.first())
            .map(|id| (*id).to_string())
            .ok_or_else(|| anyhow::anyhow!("moto lists no AMI in {REGION}: {}", snippet(&xml)))
    }

    /// One Query API call to moto, unsigned (moto checks no signatures):
    /// the `Authorization` header only names EC2's credential scope, which
    /// is how moto picks the service. Returns the body of a 200 answer.
    async fn query(&self, params: &[(&str, &str)]) -> anyhow::Result<String> {
        self.query_of("ec2", API_VERSION, params).await
    }

    /// One Elastic Load Balancing v2 call to moto, unsigned like [`Ec2::query`].
    async fn elb_query(&self, params: &[(&str, &str)]) -> anyhow::Result<String> {
        self.query_of("elasticloadbalancing", ELB_API_VERSION, params)
            .await
    }

    async fn query_of(
        &self,
        service: &str,
        version: &str,
        params: &[(&str, &str)],
    ) -> anyhow::Result<String> {
        let action = params
            .iter()
            .find(|(k, _)| *k == "Action")
            .map_or("?", |(_, v)| *v);
        let mut all = vec![("Version", version)];
        all.extend_from_slice(params);
        let body = all
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect::<Vec<_>>()
            .join("&");
        let headers = [
            ("host".to_string(), HOST.to_string()),
            (
                "content-type".to_string(),
                "application/x-www-form-urlencoded; charset=utf-8".to_string(),
            ),
            (
                "authorization".to_string(),
                format!(
                    "AWS4-HMAC-SHA256 Credential={ACCESS_KEY_ID}/20250101/{REGION}/{service}/aws4_request, SignedHeaders=host, Signature=00"
                ),
            ),
        ];
        let resp = loopback::request(
            self.addr,
            "POST",
            "/",
            &headers,
            body.as_bytes(),
            CALL_LIMIT,
        )
        .await
        .with_context(|| format!("{action} to moto at {}", self.addr))?;
        let text = String::from_utf8_lossy(&resp.body).into_owned();
        if resp.status != 200 {
            anyhow::bail!(
                "{action} to moto at {} answered HTTP {}: {}",
                self.addr,
                resp.status,
                snippet(&text)
            );
        }
        Ok(text)
    }
}

impl Drop for Ec2 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `python3` can import moto's server.
async fn moto_installed() -> bool {
    tokio::process::Command::new("python3")
        .args(["-c", "import moto, moto.server"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success())
}

#[async_trait::async_trait]
impl FakeCloud for Ec2 {
    fn describe(&self) -> String {
        format!(
            "EC2 fake (moto) at http://{}, region {REGION}, AMI {}",
            self.addr, self.image_id
        )
    }

    fn http_target(&self) -> Option<SocketAddr> {
        Some(self.addr)
    }

    /// The fake key pair for the manifest's usual variables; no session
    /// token (the plugin then signs without `X-Amz-Security-Token`).
    fn secret(&self, env: &str) -> Option<String> {
        match env {
            "AWS_ACCESS_KEY_ID" => Some(ACCESS_KEY_ID.to_string()),
            "AWS_SECRET_ACCESS_KEY" => Some(SECRET_ACCESS_KEY.to_string()),
            _ => None,
        }
    }

    /// The region and an AMI moto knows there; no `endpoint`, so the
    /// plugin uses its default and the host redirects it.
    ///
    /// Target groups (`elb_endpoint`) go to EC2's endpoint too: the host
    /// sends them to moto, which routes them by their credential scope
    /// (`elasticloadbalancing`), so a manifest that grants EC2 alone serves.
    fn config(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("region".to_string(), REGION.to_string()),
            ("image_id".to_string(), self.image_id.clone()),
            ("elb_endpoint".to_string(), format!("https://{HOST}")),
        ])
    }

    /// What moto holds of instance `id` now: zone, type, state, addresses,
    /// host name and subnet.
    async fn record(&self, id: &str) -> anyhow::Result<Option<NodeRecord>> {
        let xml = self
            .query(&[("Action", "DescribeInstances"), ("InstanceId.1", id)])
            .await?;
        record_of(&xml, id)
    }

    /// The default subnet of [`SUBNET_ZONE`] (free addresses, and the
    /// block's size less AWS's five reserved), the target group made at
    /// start with its targets, and every Elastic IP with the instance it
    /// is on.
    async fn network(&self) -> anyhow::Result<Option<NetworkTruth>> {
        let xml = self
            .query(&[("Action", "DescribeSubnets"), ("SubnetId.1", &self.subnet)])
            .await?;
        let available = first_text(&xml, "availableIpAddressCount")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| anyhow::anyhow!("DescribeSubnets: no free count: {}", snippet(&xml)))?;
        let total = first_text(&xml, "cidrBlock")
            .and_then(|c| c.split_once('/').and_then(|(_, p)| p.parse::<u32>().ok()))
            .and_then(|p| 1u64.checked_shl(32u32.checked_sub(p)?))
            .map(|n| n.saturating_sub(5));
        let xml = self
            .elb_query(&[
                ("Action", "DescribeTargetHealth"),
                ("TargetGroupArn", &self.group),
            ])
            .await?;
        let doc = roxmltree::Document::parse(&xml).with_context(|| {
            format!(
                "DescribeTargetHealth answered malformed XML: {}",
                snippet(&xml)
            )
        })?;
        let targets = doc
            .descendants()
            .filter(|n| n.is_element() && n.tag_name().name() == "Target")
            .filter_map(|t| text(t, "Id"))
            .collect();
        let xml = self.query(&[("Action", "DescribeAddresses")]).await?;
        let doc = roxmltree::Document::parse(&xml).with_context(|| {
            format!(
                "DescribeAddresses answered malformed XML: {}",
                snippet(&xml)
            )
        })?;
        let addresses = child(doc.root_element(), "addressesSet")
            .into_iter()
            .flat_map(|set| children(set, "item"))
            .filter_map(|a| {
                Some(TruthAddress {
                    address: text(a, "publicIp")?,
                    resource_id: text(a, "allocationId"),
                    node: text(a, "instanceId"),
                })
            })
            .collect();
        let mut truth = NetworkTruth::default();
        truth.subnets.push(TruthSubnet {
            id: self.subnet.clone(),
            available,
            total,
        });
        truth.groups.push(TruthGroup {
            id: self.group.clone(),
            targets,
        });
        truth.addresses = addresses;
        Ok(Some(truth))
    }

    /// Every instance moto has, terminated ones included (not alive).
    async fn nodes(&self) -> anyhow::Result<Vec<TruthNode>> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        let mut seen = BTreeSet::new();
        for _ in 0..MAX_PAGES {
            let mut params = vec![("Action", "DescribeInstances"), ("MaxResults", PAGE_SIZE)];
            if let Some(t) = &token {
                params.push(("NextToken", t.as_str()));
            }
            let xml = self.query(&params).await?;
            let (page, next) = parse_instances(&xml)?;
            out.extend(page);
            match next {
                None => return Ok(out),
                Some(next) => {
                    if !seen.insert(next.clone()) {
                        anyhow::bail!("moto repeated the DescribeInstances nextToken {next:?}");
                    }
                    token = Some(next);
                }
            }
        }
        anyhow::bail!("moto announced more than {MAX_PAGES} pages of instances")
    }

    async fn plant(&self, labels: BTreeMap<String, String>) -> anyhow::Result<Option<String>> {
        let mut params: Vec<(String, String)> = [
            ("Action", "RunInstances"),
            ("ImageId", self.image_id.as_str()),
            ("InstanceType", PLANT_TYPE),
            ("MinCount", "1"),
            ("MaxCount", "1"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
        if !labels.is_empty() {
            params.push(("TagSpecification.1.ResourceType".into(), "instance".into()));
            for (n, (k, v)) in labels.iter().enumerate() {
                params.push((format!("TagSpecification.1.Tag.{}.Key", n + 1), k.clone()));
                params.push((format!("TagSpecification.1.Tag.{}.Value", n + 1), v.clone()));
            }
        }
        let refs: Vec<(&str, &str)> = params
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let xml = self.query(&refs).await?;
        let doc = roxmltree::Document::parse(&xml)
            .with_context(|| format!("RunInstances answered malformed XML: {}", snippet(&xml)))?;
        let id = child(doc.root_element(), "instancesSet")
            .and_then(|set| child(set, "item"))
            .and_then(|item| text(item, "instanceId"))
            .ok_or_else(|| {
                anyhow::anyhow!("RunInstances answered no instance id: {}", snippet(&xml))
            })?;
        Ok(Some(id))
    }

    /// A `POST` whose form says `Action=RunInstances`.
    fn is_create(&self, req: &OutgoingRequest) -> bool {
        is_run_instances(req)
    }

    /// EC2's XML error: `InsufficientInstanceCapacity` (500) for capacity,
    /// `InstanceLimitExceeded` (400) for quota, else `RequestLimitExceeded`
    /// (503, no `Retry-After`, as EC2 answers).
    fn fault_response(&self, kind: FaultKind, _req: &OutgoingRequest) -> http::Response<Bytes> {
        fault(kind, self.faults.fetch_add(1, Ordering::Relaxed))
    }
}

/// Whether `req` is a `POST` whose form (or query) says `Action=RunInstances`.
fn is_run_instances(req: &OutgoingRequest) -> bool {
    let action = form_value(&req.body, "Action").or_else(|| {
        req.uri
            .query()
            .and_then(|q| form_value(q.as_bytes(), "Action"))
    });
    req.method == http::Method::POST && action.as_deref() == Some("RunInstances")
}

/// The `n`th injected fault of `kind`, in EC2's words.
fn fault(kind: FaultKind, n: u64) -> http::Response<Bytes> {
    let request_id = format!("00000000-0000-4000-8000-{n:012x}");
    match kind {
        FaultKind::Capacity => ec2_error(
            500,
            &[],
            "InsufficientInstanceCapacity",
            "We currently do not have sufficient capacity in the Availability Zone you requested (injected by the test suite).",
            &request_id,
        ),
        FaultKind::Quota => ec2_error(
            400,
            &[],
            "InstanceLimitExceeded",
            "You have requested more instances than your current instance limit allows for the specified instance type (injected by the test suite).",
            &request_id,
        ),
        // EC2 says nothing of when to ask again: the client's own backoff
        // decides (AWS standard retry mode).
        _ => ec2_error(
            503,
            &[],
            "RequestLimitExceeded",
            "Request limit exceeded (injected by the test suite).",
            &request_id,
        ),
    }
}

/// An error in EC2's dialect:
/// `<Response><Errors><Error><Code>…</Code><Message>…</Message></Error></Errors><RequestID>…</RequestID></Response>`.
fn ec2_error(
    status: u16,
    headers: &[(&str, &str)],
    code: &str,
    message: &str,
    request_id: &str,
) -> http::Response<Bytes> {
    let body = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{}</Message></Error></Errors><RequestID>{request_id}</RequestID></Response>",
        xml_escape(message)
    );
    let mut builder = http::Response::builder()
        .status(status)
        .header(http::header::CONTENT_TYPE, "text/xml;charset=UTF-8");
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    builder
        .body(Bytes::from(body))
        .unwrap_or_else(|_| http::Response::new(Bytes::new()))
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn child<'a, 'i>(node: roxmltree::Node<'a, 'i>, name: &str) -> Option<roxmltree::Node<'a, 'i>> {
    node.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
}

fn children<'a, 'i: 'a>(
    node: roxmltree::Node<'a, 'i>,
    name: &'a str,
) -> impl Iterator<Item = roxmltree::Node<'a, 'i>> {
    node.children()
        .filter(move |c| c.is_element() && c.tag_name().name() == name)
}

fn text(node: roxmltree::Node<'_, '_>, name: &str) -> Option<String> {
    child(node, name)
        .and_then(|c| c.text())
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

/// One page of `DescribeInstances` as ground truth, and its `nextToken`.
fn parse_instances(xml: &str) -> anyhow::Result<(Vec<TruthNode>, Option<String>)> {
    let doc = roxmltree::Document::parse(xml)
        .with_context(|| format!("DescribeInstances answered malformed XML: {}", snippet(xml)))?;
    let root = doc.root_element();
    if root.tag_name().name() != "DescribeInstancesResponse" {
        anyhow::bail!(
            "DescribeInstances answered <{}>: {}",
            root.tag_name().name(),
            snippet(xml)
        );
    }
    let mut out = Vec::new();
    let items = child(root, "reservationSet")
        .into_iter()
        .flat_map(|set| children(set, "item"))
        .filter_map(|reservation| child(reservation, "instancesSet"))
        .flat_map(|set| children(set, "item"));
    for item in items {
        let id = text(item, "instanceId").ok_or_else(|| {
            anyhow::anyhow!("DescribeInstances listed an instance without instanceId")
        })?;
        let state = child(item, "instanceState")
            .and_then(|s| text(s, "name"))
            .unwrap_or_default();
        let labels = child(item, "tagSet")
            .into_iter()
            .flat_map(|set| children(set, "item"))
            .filter_map(|t| Some((text(t, "key")?, text(t, "value").unwrap_or_default())))
            .collect();
        out.push(TruthNode {
            id,
            labels,
            alive: !matches!(state.as_str(), "shutting-down" | "terminated"),
            // Moto keeps it, but only DescribeInstanceAttribute shows it.
            user_data: None,
        });
    }
    Ok((out, text(root, "nextToken")))
}

/// The text of the first element named `name` in `xml`.
fn first_text(xml: &str, name: &str) -> Option<String> {
    let doc = roxmltree::Document::parse(xml).ok()?;
    doc.descendants()
        .find(|n| n.is_element() && n.tag_name().name() == name)
        .and_then(|n| n.text())
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

/// What a `DescribeInstances` answer says of instance `id`; `None` when
/// it does not list it.
fn record_of(xml: &str, id: &str) -> anyhow::Result<Option<NodeRecord>> {
    let doc = roxmltree::Document::parse(xml)
        .with_context(|| format!("DescribeInstances answered malformed XML: {}", snippet(xml)))?;
    let Some(item) = doc
        .descendants()
        .filter(|n| n.is_element() && n.tag_name().name() == "item")
        .find(|n| text(*n, "instanceId").as_deref() == Some(id))
    else {
        return Ok(None);
    };
    let primary = child(item, "networkInterfaceSet")
        .into_iter()
        .flat_map(|set| children(set, "item"))
        .find(|e| {
            child(*e, "attachment")
                .and_then(|a| text(a, "deviceIndex"))
                .as_deref()
                == Some("0")
        });
    let ipv6 = text(item, "ipv6Address").or_else(|| {
        primary
            .and_then(|e| child(e, "ipv6AddressesSet"))
            .and_then(|set| children(set, "item").next())
            .and_then(|a| text(a, "ipv6Address"))
    });
    let record = NodeRecord {
        zone: child(item, "placement").and_then(|p| text(p, "availabilityZone")),
        instance_type: text(item, "instanceType"),
        state: child(item, "instanceState").and_then(|s| text(s, "name")),
        private_address: text(item, "privateIpAddress"),
        public_address: text(item, "ipAddress"),
        ipv6_address: ipv6,
        hostname: text(item, "privateDnsName"),
        subnet: Some(text(item, "subnetId").unwrap_or_default()),
        ..NodeRecord::default()
    };
    Ok(Some(record))
}

/// Percent-encodes as AWS does: every byte but `A-Z a-z 0-9 - _ . ~`.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes one part of a form (`+` is a blank, `%XX` a byte).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                if let Some(v) = hex {
                    out.push(v);
                    i += 2;
                } else {
                    out.push(b'%');
                }
            }
            _ => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The value of `key` in a form-encoded body or query string.
fn form_value(form: &[u8], key: &str) -> Option<String> {
    let form = std::str::from_utf8(form).ok()?;
    form.split('&').find_map(|part| {
        let (k, v) = part.split_once('=').unwrap_or((part, ""));
        (decode(k) == key).then(|| decode(v))
    })
}

/// The start of `s`, for error messages.
fn snippet(s: &str) -> String {
    let s = s.trim();
    match s.char_indices().nth(SNIPPET) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmprov_api::{NodeShape, ProvisionRequest, ProvisionerError};
    use wasmprov_guest::http::Response;
    use wasmprov_plugin_aws_ec2::api::ApiFailure;
    use wasmprov_plugin_aws_ec2::client::{ApiRequest, Client, Transport};
    use wasmprov_plugin_aws_ec2::settings::{Credentials, Settings, default_endpoint};
    use wasmprov_plugin_aws_ec2::sign;

    fn outgoing(body: &str) -> OutgoingRequest {
        OutgoingRequest {
            plugin: "aws-ec2".into(),
            method: http::Method::POST,
            uri: "https://ec2.us-east-1.amazonaws.com/".parse().unwrap(),
            headers: http::HeaderMap::new(),
            body: Bytes::from(body.to_string()),
        }
    }

    /// A fault response as the plugin sees it.
    fn as_guest(resp: &http::Response<Bytes>) -> Response {
        Response {
            status: resp.status().as_u16(),
            headers: resp
                .headers()
                .iter()
                .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap().to_string()))
                .collect(),
            body: resp.body().to_vec(),
            url: "https://ec2.us-east-1.amazonaws.com/".into(),
        }
    }

    #[test]
    fn forms_and_responses_parse() {
        assert_eq!(
            form_value(b"Action=RunInstances&Version=2016-11-15", "Action").as_deref(),
            Some("RunInstances")
        );
        assert_eq!(
            form_value(
                b"Version=1&TagSpecification.1.Tag.1.Value=a%20b+c",
                "TagSpecification.1.Tag.1.Value"
            )
            .as_deref(),
            Some("a b c")
        );
        assert_eq!(form_value(b"Action", "Action").as_deref(), Some(""));
        assert_eq!(form_value(b"Actionx=RunInstances", "Action"), None);
        assert_eq!(decode("%zz%4"), "%zz%4");

        let r = loopback::parse_response(
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nX-A: b\r\n\r\nabcdef",
        )
        .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (200, &b"abc"[..]));
        assert_eq!(r.headers[1], ("x-a".to_string(), "b".to_string()));
        let r = loopback::parse_response(
            b"HTTP/1.1 503 Slow Down\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!((r.status, r.body.as_slice()), (503, &b"abcde"[..]));
        assert!(loopback::parse_response(b"garbage").is_err());
        assert!(
            loopback::parse_response(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc").is_err()
        );
    }

    #[test]
    fn records_read_what_moto_holds() {
        let xml = r#"<DescribeInstancesResponse><reservationSet><item><instancesSet><item>
          <instanceId>i-1</instanceId><instanceState><name>running</name></instanceState>
          <instanceType>t3a.medium</instanceType><placement><availabilityZone>us-east-1a</availabilityZone></placement>
          <privateDnsName>ip-172-31-0-4.ec2.internal</privateDnsName><subnetId>subnet-1</subnetId>
          <privateIpAddress>172.31.0.4</privateIpAddress><ipAddress>54.1.2.3</ipAddress>
          <networkInterfaceSet><item><attachment><deviceIndex>0</deviceIndex></attachment>
            <ipv6AddressesSet><item><ipv6Address>2600:1f18::10</ipv6Address></item></ipv6AddressesSet></item></networkInterfaceSet>
        </item></instancesSet></item></reservationSet></DescribeInstancesResponse>"#;
        let r = record_of(xml, "i-1").unwrap().unwrap();
        assert_eq!(r.zone.as_deref(), Some("us-east-1a"));
        assert_eq!(r.instance_type.as_deref(), Some("t3a.medium"));
        assert_eq!(r.state.as_deref(), Some("running"));
        assert_eq!(r.private_address.as_deref(), Some("172.31.0.4"));
        assert_eq!(r.public_address.as_deref(), Some("54.1.2.3"));
        assert_eq!(r.ipv6_address.as_deref(), Some("2600:1f18::10"));
        assert_eq!(r.hostname.as_deref(), Some("ip-172-31-0-4.ec2.internal"));
        assert_eq!(r.subnet.as_deref(), Some("subnet-1"));
        assert_eq!(record_of(xml, "i-2").unwrap(), None);
        assert_eq!(first_text(xml, "subnetId").as_deref(), Some("subnet-1"));
    }

    #[test]
    fn truth_pages_parse() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <reservationSet>
    <item><instancesSet>
      <item><instanceId>i-1</instanceId><instanceState><name>running</name></instanceState>
        <networkInterfaceSet><item><tagSet><item><key>nested</key><value>no</value></item></tagSet></item></networkInterfaceSet>
        <tagSet><item><key>a</key><value>1</value></item><item><key>empty</key><value/></item></tagSet></item>
      <item><instanceId>i-2</instanceId><instanceState><name>terminated</name></instanceState></item>
    </instancesSet></item>
    <item><instancesSet>
      <item><instanceId>i-3</instanceId><instanceState><name>shutting-down</name></instanceState></item>
      <item><instanceId>i-4</instanceId><instanceState><name>stopped</name></instanceState></item>
    </instancesSet></item>
  </reservationSet>
  <nextToken>tok</nextToken>
</DescribeInstancesResponse>"#;
        let (nodes, next) = parse_instances(xml).unwrap();
        assert_eq!(next.as_deref(), Some("tok"));
        let summary: Vec<(&str, bool)> = nodes.iter().map(|n| (n.id.as_str(), n.alive)).collect();
        assert_eq!(
            summary,
            [("i-1", true), ("i-2", false), ("i-3", false), ("i-4", true)]
        );
        assert_eq!(
            nodes[0].labels,
            BTreeMap::from([("a".into(), "1".into()), ("empty".into(), String::new())])
        );
        assert!(parse_instances("<Response/>").is_err());
        assert!(parse_instances("not xml").is_err());
    }

    /// Each fault response, read by the plugin's own error mapping, is an
    /// error the fault accepts.
    #[test]
    fn faults_map_to_the_plugins_error_kinds() {
        for (kind, status, code, want) in [
            (
                FaultKind::Capacity,
                500,
                "InsufficientInstanceCapacity",
                "capacity",
            ),
            (FaultKind::Quota, 400, "InstanceLimitExceeded", "quota"),
            (
                FaultKind::RateLimited,
                503,
                "RequestLimitExceeded",
                "rate_limited",
            ),
        ] {
            let resp = fault(kind, 7);
            assert_eq!(resp.status().as_u16(), status, "{kind}");
            let guest = as_guest(&resp);
            let failure = ApiFailure::from_response(&guest);
            assert_eq!(failure.code, code, "{kind}");
            for zone_asked in [false, true] {
                let err = failure.clone().into_error(zone_asked);
                assert_eq!(err.kind(), want, "{kind}: {err:?}");
                assert!(kind.accepts(&err), "{kind}: {err:?}");
            }
            if kind == FaultKind::RateLimited {
                assert!(matches!(
                    failure.into_error(false),
                    ProvisionerError::RateLimited {
                        retry_after_ms: None,
                        ..
                    }
                ));
            }
        }
    }

    /// The plugin's own operations, natively, signed as the component signs
    /// them for its default endpoint, sent to moto with `Host` kept as the
    /// host's redirect keeps it; `fault` answers create requests instead.
    struct Redirected<'a> {
        fake: &'a Ec2,
        rt: tokio::runtime::Handle,
        creds: Credentials,
        fault: Option<FaultKind>,
    }

    impl Transport for &Redirected<'_> {
        fn send(&self, req: &ApiRequest) -> Result<Response, ProvisionerError> {
            let body = sign::form_encode(&req.form());
            let signed = sign::sign_post(
                &default_endpoint(REGION),
                REGION,
                &self.creds,
                body,
                std::time::SystemTime::now(),
            )?;
            let url = signed.url.clone();
            let uri: http::Uri = url.parse().unwrap();
            let mut headers = vec![("host".to_string(), uri.authority().unwrap().to_string())];
            headers.extend(signed.headers.clone());
            let out = OutgoingRequest {
                plugin: "aws-ec2".into(),
                method: http::Method::POST,
                uri,
                headers: http::HeaderMap::new(),
                body: Bytes::from(signed.body.clone()),
            };
            if let Some(kind) = self.fault.filter(|_| self.fake.is_create(&out)) {
                return Ok(as_guest(&self.fake.fault_response(kind, &out)));
            }
            let raw = self
                .rt
                .block_on(loopback::request(
                    self.fake.addr,
                    "POST",
                    "/",
                    &headers,
                    signed.body.as_bytes(),
                    CALL_LIMIT,
                ))
                .map_err(|e| ProvisionerError::Transport(format!("{e:#}")))?;
            Ok(Response {
                status: raw.status,
                headers: raw.headers,
                body: raw.body,
                url,
            })
        }

        fn info(&self, _message: &str, _fields: &[(&str, &str)]) {}

        fn now_unix(&self) -> u64 {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
        }
    }

    #[test]
    fn is_create_reads_the_form() {
        let is_create = |body: &str| is_run_instances(&outgoing(body));
        assert!(is_create("Action=RunInstances&Version=2016-11-15"));
        assert!(is_create("Version=2016-11-15&Action=RunInstances"));
        assert!(!is_create("Action=DescribeInstances&Version=2016-11-15"));
        assert!(!is_create("Version=2016-11-15&X=Action%3DRunInstances"));
        let mut get = outgoing("");
        get.method = http::Method::GET;
        get.uri = "https://ec2.us-east-1.amazonaws.com/?Action=RunInstances"
            .parse()
            .unwrap();
        assert!(!is_run_instances(&get));
        get.method = http::Method::POST;
        assert!(is_run_instances(&get));
    }

    /// Against a real moto (skipped without it): the AMI lookup, planting,
    /// the ground truth, and the plugin's own operations through the
    /// redirect, with the fake's credentials and no session token.
    #[test]
    fn moto_serves_the_plugin_through_the_redirect() {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let fake = match rt.block_on(Ec2::start()) {
            Ok(f) => f,
            Err(e) if e.downcast_ref::<Unavailable>().is_some() => {
                eprintln!("skipping: {e}");
                return;
            }
            Err(e) => panic!("{e:#}"),
        };
        eprintln!("{}", fake.describe());
        let config = fake.config();
        assert_eq!(config["region"], REGION);
        assert!(config["image_id"].starts_with("ami-"), "{config:?}");
        assert!(!config.contains_key("endpoint"));
        assert!(fake.http_target().is_some());
        assert_eq!(fake.secret("AWS_SESSION_TOKEN"), None);
        assert_eq!(fake.secret("HCLOUD_TOKEN"), None);

        // Exactly what the host gives the plugin.
        let settings = Settings::from_lookup(|k| Ok(config.get(k).cloned())).unwrap();
        assert_eq!(settings.endpoint, "https://ec2.us-east-1.amazonaws.com");
        let manifest_env = BTreeMap::from([
            ("access_key_id", "AWS_ACCESS_KEY_ID"),
            ("secret_access_key", "AWS_SECRET_ACCESS_KEY"),
            ("session_token", "AWS_SESSION_TOKEN"),
        ]);
        let creds =
            Credentials::from_lookup(|k| Ok(manifest_env.get(k).and_then(|env| fake.secret(env))))
                .unwrap();
        assert_eq!(creds.session_token, None);

        let planted = rt
            .block_on(fake.plant(BTreeMap::from([
                ("wasmprov-owner".to_string(), "someone-else".to_string()),
                ("role".to_string(), "planted".to_string()),
            ])))
            .unwrap()
            .unwrap();
        assert!(planted.starts_with("i-"), "{planted}");
        // More than a page of truth (pages of 5 in tests).
        let mut more = Vec::new();
        for n in 0..5 {
            let labels = BTreeMap::from([("n".to_string(), n.to_string())]);
            more.push(rt.block_on(fake.plant(labels)).unwrap().unwrap());
        }
        let unlabelled = rt.block_on(fake.plant(BTreeMap::new())).unwrap().unwrap();

        let mut transport = Redirected {
            fake: &fake,
            rt: rt.handle().clone(),
            creds,
            fault: None,
        };
        let owner = "suite-owner";
        let node = {
            let client = Client::new(&settings, &transport);
            let mut shape = NodeShape::new(2.0, 4 << 30);
            shape.labels.insert("pool".into(), "blue".into());
            let node = client
                .provision(
                    owner,
                    &ProvisionRequest {
                        request_id: "r-1".into(),
                        shape,
                        boot: Default::default(),
                        subnet: None,
                    },
                )
                .unwrap();
            let described = client.describe(owner).unwrap();
            assert_eq!(described.len(), 1, "{described:?}");
            assert_eq!(described[0].provider_id, node.provider_id);
            node
        };

        let truth = rt.block_on(fake.nodes()).unwrap();
        assert_eq!(truth.len(), 8, "{truth:?}");
        for (n, id) in more.iter().enumerate() {
            let t = truth.iter().find(|t| t.id == *id).unwrap();
            assert_eq!(t.labels, BTreeMap::from([("n".to_string(), n.to_string())]));
        }
        let t = truth.iter().find(|t| t.id == unlabelled).unwrap();
        assert!(t.labels.is_empty() && t.alive, "{t:?}");
        let mine = truth.iter().find(|n| n.id == node.provider_id).unwrap();
        assert!(mine.alive);
        assert_eq!(mine.labels["wasmprov-owner"], owner);
        assert_eq!(mine.labels["wasmprov-request"], "r-1");
        assert_eq!(mine.labels["pool"], "blue");
        let other = truth.iter().find(|n| n.id == planted).unwrap();
        assert!(other.alive);
        assert_eq!(other.labels["role"], "planted");

        // Faults on the create request, through the plugin's mapping.
        for kind in [
            FaultKind::Capacity,
            FaultKind::Quota,
            FaultKind::RateLimited,
        ] {
            transport.fault = Some(kind);
            let client = Client::new(&settings, &transport);
            let err = client
                .provision(
                    owner,
                    &ProvisionRequest {
                        request_id: format!("fault-{kind}"),
                        shape: NodeShape::new(2.0, 4 << 30),
                        boot: Default::default(),
                        subnet: None,
                    },
                )
                .unwrap_err();
            eprintln!("{kind}: {err}");
            assert!(kind.accepts(&err), "{kind}: {err:?}");
        }
        transport.fault = None;

        let client = Client::new(&settings, &transport);
        client.terminate(owner, &node.provider_id).unwrap();
        assert!(client.describe(owner).unwrap().is_empty());
        let truth = rt.block_on(fake.nodes()).unwrap();
        let mine = truth.iter().find(|n| n.id == node.provider_id).unwrap();
        assert!(!mine.alive, "{mine:?}");
        assert_eq!(truth.len(), 8, "no instance made by a faulted create");
        drop(fake);
    }
}
