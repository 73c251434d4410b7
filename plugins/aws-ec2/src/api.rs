//! The EC2 Query API wire format: the XML this plugin reads, instance state
//! → join state, and API errors → contract errors.

use roxmltree::{Document, Node};
use wasmprov_guest::http::Response;
use wasmprov_guest::state::StateTable;
use wasmprov_guest::{
    CapacityScope, CapacityType, Error, JoinState, Labels, NodeHandle, NodeStatus, Result,
};

/// An instance as `DescribeInstances` and `RunInstances` return it (only
/// the fields used here).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Instance {
    /// `instanceId`, e.g. `i-0abc…`.
    pub id: String,
    /// `instanceState/name`: `pending`, `running`, `shutting-down`,
    /// `terminated`, `stopping` or `stopped`.
    pub state: String,
    /// `instanceType`.
    pub instance_type: Option<String>,
    /// `placement/availabilityZone`.
    pub zone: Option<String>,
    /// `ipAddress` (public IPv4).
    pub public_ip: Option<String>,
    /// `privateIpAddress`.
    pub private_ip: Option<String>,
    /// `launchTime` (RFC 3339).
    pub launch_time: Option<String>,
    /// `architecture`: `x86_64`, `arm64`, ...
    pub architecture: Option<String>,
    /// `instanceLifecycle`: `spot` or `scheduled`; absent for on-demand.
    pub lifecycle: Option<String>,
    /// `tagSet`, in the order sent.
    pub tags: Vec<(String, String)>,
}

/// EC2 instance state → join state.
///
/// `running` maps to [`JoinState::Joining`]: the machine is up, but whether
/// its node agent joined the cluster is not something EC2 knows, so this
/// plugin never reports [`JoinState::Joined`]. An instance that is
/// `shutting-down`, `terminated`, `stopping` or `stopped` will not become a
/// usable node and is [`JoinState::Failed`]; its status says which
/// ([`STATES`]). `pending` (and any state this plugin does not know) is
/// still being created.
#[must_use]
pub fn join_state(state: &str) -> JoinState {
    STATES.get(state)
}

/// EC2 instance states: status and join state. `pending` is being created;
/// a state this plugin does not know is `unknown` (its name is kept as the
/// raw state).
pub const STATES: StateTable = StateTable::new(
    &[
        ("pending", NodeStatus::Pending, JoinState::Provisioning),
        ("running", NodeStatus::Running, JoinState::Joining),
        ("shutting-down", NodeStatus::Deleting, JoinState::Failed),
        ("terminated", NodeStatus::Deleted, JoinState::Failed),
        ("stopping", NodeStatus::Stopping, JoinState::Failed),
        ("stopped", NodeStatus::Stopped, JoinState::Failed),
    ],
    (NodeStatus::Unknown, JoinState::Provisioning),
);

impl Instance {
    /// The value of tag `key`.
    #[must_use]
    pub fn tag(&self, key: &str) -> Option<&str> {
        self.tags
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Whether EC2 has terminated the instance.
    #[must_use]
    pub fn is_terminated(&self) -> bool {
        self.state == "terminated"
    }

    /// The instance's tags as labels, without AWS's reserved `aws:` tags.
    #[must_use]
    pub fn labels(&self) -> Labels {
        self.tags
            .iter()
            .filter(|(k, _)| !k.to_ascii_lowercase().starts_with("aws:"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The node handle for this instance. Architecture and GPU model come
    /// from the instance type's catalogue entry when it has one.
    #[must_use]
    pub fn to_handle(&self) -> NodeHandle {
        let known = self
            .instance_type
            .as_deref()
            .and_then(crate::catalogue::find);
        let mut node = NodeHandle {
            provider_id: self.id.clone(),
            created_at_ms: self
                .launch_time
                .as_deref()
                .and_then(wasmprov_guest::time::rfc3339_ms),
            address: self.public_ip.clone().or_else(|| self.private_ip.clone()),
            private_address: self.private_ip.clone(),
            public_address: self.public_ip.clone(),
            arch: self
                .architecture
                .as_deref()
                .and_then(|a| a.parse().ok())
                .or(known.map(|t| t.arch)),
            gpu_model: known.and_then(|t| t.gpu_model).map(str::to_string),
            zone: self.zone.clone(),
            capacity_type: if self.lifecycle.as_deref() == Some("spot") {
                CapacityType::Spot
            } else {
                CapacityType::OnDemand
            },
            instance_type: self.instance_type.clone(),
            labels: self.labels(),
            ..NodeHandle::default()
        };
        STATES.apply(&self.state, &mut node);
        node
    }
}

fn parse(xml: &str) -> Result<Document<'_>> {
    Document::parse(xml).map_err(|e| Error::Transport(format!("EC2 sent malformed XML: {e}")))
}

fn child<'a, 'i>(node: Node<'a, 'i>, name: &str) -> Option<Node<'a, 'i>> {
    node.children()
        .find(|c| c.is_element() && c.tag_name().name() == name)
}

fn children<'a, 'i: 'a>(node: Node<'a, 'i>, name: &'a str) -> impl Iterator<Item = Node<'a, 'i>> {
    node.children()
        .filter(move |c| c.is_element() && c.tag_name().name() == name)
}

fn text(node: Node<'_, '_>, name: &str) -> Option<String> {
    child(node, name)
        .and_then(|c| c.text())
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

fn expect_root<'a, 'i>(doc: &'a Document<'i>, name: &str) -> Result<Node<'a, 'i>> {
    let root = doc.root_element();
    if root.tag_name().name() == name {
        Ok(root)
    } else {
        Err(Error::Transport(format!(
            "EC2 answered with <{}> where <{name}> was expected",
            root.tag_name().name()
        )))
    }
}

fn instance(item: Node<'_, '_>) -> Result<Instance> {
    let id = text(item, "instanceId")
        .ok_or_else(|| Error::Transport("EC2 sent an instance without instanceId".into()))?;
    let tags = child(item, "tagSet")
        .map(|set| {
            children(set, "item")
                .filter_map(|t| Some((text(t, "key")?, text(t, "value").unwrap_or_default())))
                .collect()
        })
        .unwrap_or_default();
    Ok(Instance {
        id,
        state: child(item, "instanceState")
            .and_then(|s| text(s, "name"))
            .unwrap_or_default(),
        instance_type: text(item, "instanceType"),
        zone: child(item, "placement").and_then(|p| text(p, "availabilityZone")),
        public_ip: text(item, "ipAddress"),
        private_ip: text(item, "privateIpAddress"),
        launch_time: text(item, "launchTime"),
        architecture: text(item, "architecture"),
        lifecycle: text(item, "instanceLifecycle"),
        tags,
    })
}

fn instances_in(set: Node<'_, '_>) -> Result<Vec<Instance>> {
    children(set, "item").map(instance).collect()
}

/// One page of `DescribeInstances`: the instances of every reservation, and
/// the `nextToken` when there are more.
///
/// # Errors
/// [`Error::Transport`] when the body is not a `DescribeInstancesResponse`.
pub fn parse_describe_instances(xml: &str) -> Result<(Vec<Instance>, Option<String>)> {
    let doc = parse(xml)?;
    let root = expect_root(&doc, "DescribeInstancesResponse")?;
    let mut out = Vec::new();
    if let Some(reservations) = child(root, "reservationSet") {
        for reservation in children(reservations, "item") {
            if let Some(set) = child(reservation, "instancesSet") {
                out.extend(instances_in(set)?);
            }
        }
    }
    Ok((out, text(root, "nextToken")))
}

/// The instances `RunInstances` created.
///
/// # Errors
/// [`Error::Transport`] when the body is not a `RunInstancesResponse`.
pub fn parse_run_instances(xml: &str) -> Result<Vec<Instance>> {
    let doc = parse(xml)?;
    let root = expect_root(&doc, "RunInstancesResponse")?;
    match child(root, "instancesSet") {
        Some(set) => instances_in(set),
        None => Ok(Vec::new()),
    }
}

/// The instance type names `DescribeInstanceTypes` returned.
///
/// # Errors
/// [`Error::Transport`] when the body is not a `DescribeInstanceTypesResponse`.
pub fn parse_instance_types(xml: &str) -> Result<Vec<String>> {
    let doc = parse(xml)?;
    let root = expect_root(&doc, "DescribeInstanceTypesResponse")?;
    Ok(child(root, "instanceTypeSet")
        .map(|set| {
            children(set, "item")
                .filter_map(|i| text(i, "instanceType"))
                .collect()
        })
        .unwrap_or_default())
}

/// One spot price: zone, instance type and hourly USD.
#[derive(Clone, Debug, PartialEq)]
pub struct SpotPrice {
    /// Availability zone.
    pub zone: String,
    /// Instance type.
    pub instance_type: String,
    /// Hourly price in USD.
    pub usd: f64,
}

/// The prices `DescribeSpotPriceHistory` returned.
///
/// # Errors
/// [`Error::Transport`] when the body is not a `DescribeSpotPriceHistoryResponse`.
pub fn parse_spot_prices(xml: &str) -> Result<Vec<SpotPrice>> {
    let doc = parse(xml)?;
    let root = expect_root(&doc, "DescribeSpotPriceHistoryResponse")?;
    Ok(child(root, "spotPriceHistorySet")
        .map(|set| {
            children(set, "item")
                .filter_map(|i| {
                    Some(SpotPrice {
                        zone: text(i, "availabilityZone").unwrap_or_default(),
                        instance_type: text(i, "instanceType").unwrap_or_default(),
                        usd: text(i, "spotPrice")?.parse().ok()?,
                    })
                })
                .collect()
        })
        .unwrap_or_default())
}

/// An error response of the API, before it becomes a contract error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiFailure {
    /// HTTP status.
    pub status: u16,
    /// `<Error><Code>`, empty when the body had none.
    pub code: String,
    /// `<Error><Message>`, or a snippet of the body.
    pub message: String,
    /// `Retry-After`, in milliseconds, when sent.
    pub retry_after_ms: Option<u64>,
    /// The URL, for messages.
    pub url: String,
}

/// The longest piece of an unparsable error body kept in a message.
const SNIPPET: usize = 200;

/// Codes that say the credentials are missing, wrong or not allowed.
const AUTH_CODES: &[&str] = &[
    "AuthFailure",
    "UnauthorizedOperation",
    "SignatureDoesNotMatch",
    "InvalidClientTokenId",
    "IncompleteSignature",
    "MissingAuthenticationToken",
    "AccessDenied",
    "RequestExpired",
    "ExpiredToken",
    "OptInRequired",
    "Blocked",
];

/// Codes for configuration values EC2 refused (AMI, subnet, groups, key…).
const CONFIG_CODES: &[&str] = &[
    "InvalidGroup.NotFound",
    "InvalidGroupId.Malformed",
    "InvalidKeyPair.NotFound",
    "InvalidSubnet",
    "InvalidParameterValue",
    "InvalidParameterCombination",
    "InvalidParameter",
    "InvalidUserData.Malformed",
];

impl ApiFailure {
    /// Reads an error response: `<Response><Errors><Error>` (EC2) or
    /// `<ErrorResponse><Error>` (other AWS front ends).
    #[must_use]
    pub fn from_response(resp: &Response) -> Self {
        let text = resp.text();
        let parsed = Document::parse(&text).ok().and_then(|doc| {
            let err = doc
                .descendants()
                .find(|n| n.is_element() && n.tag_name().name() == "Error")?;
            Some((
                self::text(err, "Code").unwrap_or_default(),
                self::text(err, "Message").unwrap_or_default(),
            ))
        });
        let (code, message) = parsed.unwrap_or_else(|| {
            (
                String::new(),
                text.trim().chars().take(SNIPPET).collect::<String>(),
            )
        });
        Self {
            status: resp.status,
            code,
            message,
            retry_after_ms: resp.retry_after_ms(),
            url: resp.url.clone(),
        }
    }

    fn describe(&self) -> String {
        let what = if self.message.is_empty() {
            "no message"
        } else {
            self.message.as_str()
        };
        if self.code.is_empty() {
            format!("EC2 {} (HTTP {}): {what}", self.url, self.status)
        } else {
            format!(
                "EC2 {} (HTTP {}, {}): {what}",
                self.url, self.status, self.code
            )
        }
    }

    /// The contract error for this failure. The error code decides; the
    /// HTTP status is the fallback for codes this plugin does not know.
    /// `zone_asked` says whether the request named an availability zone:
    /// capacity errors then name the zone as what ran out.
    #[must_use]
    pub fn into_error(self, zone_asked: bool) -> Error {
        let message = self.describe();
        let where_ = if zone_asked {
            CapacityScope::Zone
        } else {
            CapacityScope::InstanceType
        };
        let code = self.code.as_str();
        match code {
            "InsufficientInstanceCapacity"
            | "InsufficientCapacityOnHost"
            | "InsufficientHostCapacity"
            | "InsufficientReservedInstanceCapacity" => Error::Capacity {
                scope: where_,
                message,
            },
            // The type is not offered in the zone asked for.
            "Unsupported" if zone_asked => Error::Capacity {
                scope: CapacityScope::Zone,
                message,
            },
            "Unsupported" | "InvalidInstanceType" | "UnsupportedOperation" => {
                Error::Unsupported(message)
            }
            "SpotMaxPriceTooLow" => Error::Capacity {
                scope: CapacityScope::Group,
                message,
            },
            "MaxSpotInstanceCountExceeded" | "InstanceLimitExceeded" | "VcpuLimitExceeded" => {
                Error::Quota(message)
            }
            "RequestLimitExceeded"
            | "Throttling"
            | "ThrottlingException"
            | "Unavailable"
            | "ServiceUnavailable" => Error::RateLimited {
                retry_after_ms: self.retry_after_ms,
                message,
            },
            c if AUTH_CODES.contains(&c) => Error::Auth(message),
            "InvalidInstanceID.NotFound" | "InvalidInstanceID.Malformed" => {
                Error::NotFound(message)
            }
            c if c.starts_with("InvalidAMIID.")
                || c.starts_with("InvalidSubnetID.")
                || CONFIG_CODES.contains(&c) =>
            {
                Error::InvalidConfig(message)
            }
            "InternalError" | "InternalFailure" => Error::Transport(message),
            _ => match self.status {
                401 | 403 => Error::Auth(message),
                429 | 503 => Error::RateLimited {
                    retry_after_ms: self.retry_after_ms,
                    message,
                },
                s if s >= 500 => Error::Transport(message),
                _ => Error::Other(message),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `RunInstances` as EC2 returns it (abridged from the API reference,
    /// with a spot instance and tags).
    const RUN: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<RunInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>d3253568-edcb-4db0-95e8-7b1e4a0e2a9d</requestId>
  <reservationId>r-0a1b2c3d4e5f67890</reservationId>
  <ownerId>111122223333</ownerId>
  <groupSet/>
  <instancesSet>
    <item>
      <instanceId>i-0598c7d356eba48d7</instanceId>
      <imageId>ami-0abcdef1234567890</imageId>
      <instanceState><code>0</code><name>pending</name></instanceState>
      <privateDnsName>ip-10-0-0-157.ec2.internal</privateDnsName>
      <instanceType>g4dn.xlarge</instanceType>
      <placement><availabilityZone>us-east-1b</availabilityZone><groupName/><tenancy>default</tenancy></placement>
      <subnetId>subnet-04a636d18e83cfacb</subnetId>
      <privateIpAddress>10.0.0.157</privateIpAddress>
      <groupSet><item><groupId>sg-1</groupId><groupName>default</groupName></item></groupSet>
      <instanceLifecycle>spot</instanceLifecycle>
      <networkInterfaceSet><item><tagSet><item><key>nested</key><value>no</value></item></tagSet></item></networkInterfaceSet>
      <tagSet>
        <item><key>wasmprov-owner</key><value>host-a</value></item>
        <item><key>wasmprov-request</key><value>req-1</value></item>
        <item><key>Name</key><value>wasmprov-req-1</value></item>
        <item><key>aws:ec2spot:fleet-request-id</key><value>sfr-1</value></item>
        <item><key>empty</key><value/></item>
      </tagSet>
    </item>
  </instancesSet>
</RunInstancesResponse>"#;

    /// Two reservations, a terminated instance and a next page.
    const DESCRIBE: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>8f7724cf-496f-496e-8fe3-example</requestId>
  <reservationSet>
    <item>
      <reservationId>r-1</reservationId>
      <instancesSet>
        <item>
          <instanceId>i-1111</instanceId>
          <instanceState><code>16</code><name>running</name></instanceState>
          <instanceType>t3.micro</instanceType>
          <placement><availabilityZone>eu-west-1a</availabilityZone></placement>
          <privateIpAddress>10.0.1.5</privateIpAddress>
          <ipAddress>203.0.113.7</ipAddress>
          <tagSet><item><key>wasmprov-owner</key><value>host-a</value></item></tagSet>
        </item>
        <item>
          <instanceId>i-2222</instanceId>
          <instanceState><code>48</code><name>terminated</name></instanceState>
          <instanceType>t3.micro</instanceType>
        </item>
      </instancesSet>
    </item>
    <item>
      <reservationId>r-2</reservationId>
      <instancesSet>
        <item>
          <instanceId>i-3333</instanceId>
          <instanceState><code>80</code><name>stopped</name></instanceState>
        </item>
      </instancesSet>
    </item>
  </reservationSet>
  <nextToken>eyJ2IjoiMiIsImMiOiJ0b2tlbiJ9</nextToken>
</DescribeInstancesResponse>"#;

    fn response(status: u16, headers: &[(&str, &str)], body: &str) -> Response {
        Response {
            status,
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), (*v).to_string()))
                .collect(),
            body: body.as_bytes().to_vec(),
            url: "https://ec2.us-east-1.amazonaws.com/".into(),
        }
    }

    fn ec2_error(code: &str) -> String {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{code} happened</Message></Error></Errors><RequestID>ea966190-f9aa-478e-9ede-example</RequestID></Response>"
        )
    }

    #[test]
    fn run_instances_maps_to_a_node_handle() {
        let got = parse_run_instances(RUN).unwrap();
        assert_eq!(got.len(), 1);
        let i = &got[0];
        assert_eq!(i.id, "i-0598c7d356eba48d7");
        assert_eq!(i.state, "pending");
        assert_eq!(i.tags.len(), 5, "only the instance's own tags");
        assert_eq!(i.tag("empty"), Some(""));
        let h = i.to_handle();
        assert_eq!(h.provider_id, "i-0598c7d356eba48d7");
        assert_eq!(
            h.address.as_deref(),
            Some("10.0.0.157"),
            "private IP without a public one"
        );
        assert_eq!(h.zone.as_deref(), Some("us-east-1b"));
        assert_eq!(h.capacity_type, CapacityType::Spot);
        assert_eq!(h.join_state, JoinState::Provisioning);
        assert_eq!(h.instance_type.as_deref(), Some("g4dn.xlarge"));
        assert_eq!(h.labels.len(), 4, "aws: tags are left out: {:?}", h.labels);
        assert_eq!(h.labels["wasmprov-owner"], "host-a");
        assert_eq!(h.labels["Name"], "wasmprov-req-1");
    }

    #[test]
    fn describe_instances_reads_every_reservation_and_the_next_token() {
        let (got, next) = parse_describe_instances(DESCRIBE).unwrap();
        let ids: Vec<&str> = got.iter().map(|i| i.id.as_str()).collect();
        assert_eq!(ids, ["i-1111", "i-2222", "i-3333"]);
        assert_eq!(next.as_deref(), Some("eyJ2IjoiMiIsImMiOiJ0b2tlbiJ9"));
        let h = got[0].to_handle();
        assert_eq!(h.address.as_deref(), Some("203.0.113.7"), "public IP first");
        assert_eq!(h.capacity_type, CapacityType::OnDemand);
        assert_eq!(h.join_state, JoinState::Joining);
        assert!(got[1].is_terminated());
        assert_eq!(got[2].to_handle().join_state, JoinState::Failed);
        assert_eq!(got[2].to_handle().address, None);

        let empty = r#"<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>x</requestId><reservationSet/></DescribeInstancesResponse>"#;
        assert_eq!(parse_describe_instances(empty).unwrap(), (vec![], None));
    }

    #[test]
    fn wrong_or_broken_bodies_are_transport_errors() {
        for body in ["", "not xml", "<a><b></a>", RUN] {
            assert!(
                matches!(parse_describe_instances(body), Err(Error::Transport(_))),
                "{body}"
            );
        }
        assert!(matches!(
            parse_run_instances(DESCRIBE),
            Err(Error::Transport(_))
        ));
        let no_id = "<RunInstancesResponse><instancesSet><item><instanceType>t3.micro</instanceType></item></instancesSet></RunInstancesResponse>";
        assert!(matches!(
            parse_run_instances(no_id),
            Err(Error::Transport(_))
        ));
    }

    #[test]
    fn instance_types_and_spot_prices_are_read() {
        let types = r#"<DescribeInstanceTypesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>x</requestId><instanceTypeSet><item><instanceType>t3.micro</instanceType><vCpuInfo><defaultVCpus>2</defaultVCpus></vCpuInfo></item></instanceTypeSet></DescribeInstanceTypesResponse>"#;
        assert_eq!(parse_instance_types(types).unwrap(), ["t3.micro"]);
        let none =
            r#"<DescribeInstanceTypesResponse><instanceTypeSet/></DescribeInstanceTypesResponse>"#;
        assert!(parse_instance_types(none).unwrap().is_empty());
        let spot = r#"<DescribeSpotPriceHistoryResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><spotPriceHistorySet><item><instanceType>g5.xlarge</instanceType><productDescription>Linux/UNIX</productDescription><spotPrice>0.412300</spotPrice><timestamp>2025-06-01T10:00:00.000Z</timestamp><availabilityZone>us-east-1a</availabilityZone></item><item><spotPrice>oops</spotPrice></item></spotPriceHistorySet><nextToken/></DescribeSpotPriceHistoryResponse>"#;
        assert_eq!(
            parse_spot_prices(spot).unwrap(),
            [SpotPrice {
                zone: "us-east-1a".into(),
                instance_type: "g5.xlarge".into(),
                usd: 0.4123
            }]
        );
    }

    #[test]
    fn state_table() {
        let table = [
            ("pending", JoinState::Provisioning),
            ("running", JoinState::Joining),
            ("shutting-down", JoinState::Failed),
            ("terminated", JoinState::Failed),
            ("stopping", JoinState::Failed),
            ("stopped", JoinState::Failed),
            ("", JoinState::Provisioning),
            ("something-new", JoinState::Provisioning),
        ];
        for (state, want) in table {
            assert_eq!(join_state(state), want, "{state}");
        }
    }

    #[test]
    fn error_table() {
        let cases: &[(u16, &str, bool, &str)] = &[
            (500, "InsufficientInstanceCapacity", false, "capacity"),
            (500, "InsufficientCapacityOnHost", false, "capacity"),
            (400, "InsufficientHostCapacity", false, "capacity"),
            (400, "SpotMaxPriceTooLow", false, "capacity"),
            (400, "MaxSpotInstanceCountExceeded", false, "quota"),
            (400, "InstanceLimitExceeded", false, "quota"),
            (400, "VcpuLimitExceeded", false, "quota"),
            (503, "RequestLimitExceeded", false, "rate_limited"),
            (400, "Throttling", false, "rate_limited"),
            (503, "Unavailable", false, "rate_limited"),
            (401, "AuthFailure", false, "auth"),
            (403, "UnauthorizedOperation", false, "auth"),
            (403, "SignatureDoesNotMatch", false, "auth"),
            (403, "InvalidClientTokenId", false, "auth"),
            (403, "IncompleteSignature", false, "auth"),
            (400, "RequestExpired", false, "auth"),
            (400, "OptInRequired", false, "auth"),
            (400, "InvalidInstanceID.NotFound", false, "not_found"),
            (400, "InvalidInstanceID.Malformed", false, "not_found"),
            (400, "InvalidAMIID.NotFound", false, "invalid_config"),
            (400, "InvalidAMIID.Malformed", false, "invalid_config"),
            (400, "InvalidSubnetID.NotFound", false, "invalid_config"),
            (400, "InvalidGroup.NotFound", false, "invalid_config"),
            (400, "InvalidKeyPair.NotFound", false, "invalid_config"),
            (400, "InvalidParameterValue", false, "invalid_config"),
            (400, "InvalidInstanceType", false, "unsupported"),
            (400, "Unsupported", false, "unsupported"),
            (400, "Unsupported", true, "capacity"),
            (500, "InternalError", false, "transport"),
            (503, "SomethingNew", false, "rate_limited"),
            (502, "SomethingNew", false, "transport"),
            (403, "SomethingNew", false, "auth"),
            (429, "SomethingNew", false, "rate_limited"),
            (400, "SomethingNew", false, "other"),
        ];
        for (status, code, zone, kind) in cases {
            let f = ApiFailure::from_response(&response(*status, &[], &ec2_error(code)));
            assert_eq!(f.code, *code);
            assert_eq!(f.message, format!("{code} happened"));
            let e = f.into_error(*zone);
            assert_eq!(e.kind(), *kind, "{status} {code}: {e}");
            assert!(e.to_string().contains(&format!("{code} happened")), "{e}");
        }
    }

    #[test]
    fn capacity_scopes() {
        let scope = |code: &str, zone: bool| match ApiFailure::from_response(&response(
            500,
            &[],
            &ec2_error(code),
        ))
        .into_error(zone)
        {
            Error::Capacity { scope, .. } => scope,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            scope("InsufficientInstanceCapacity", false),
            CapacityScope::InstanceType
        );
        assert_eq!(
            scope("InsufficientInstanceCapacity", true),
            CapacityScope::Zone
        );
        assert_eq!(scope("InsufficientHostCapacity", true), CapacityScope::Zone);
        assert_eq!(scope("SpotMaxPriceTooLow", true), CapacityScope::Group);
        assert_eq!(scope("Unsupported", true), CapacityScope::Zone);
    }

    #[test]
    fn other_error_envelopes_and_plain_bodies() {
        let sts = r#"<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>InvalidClientTokenId</Code><Message>The security token included in the request is invalid.</Message></Error><RequestId>x</RequestId></ErrorResponse>"#;
        let f = ApiFailure::from_response(&response(403, &[], sts));
        assert_eq!(f.code, "InvalidClientTokenId");
        assert!(matches!(f.into_error(false), Error::Auth(_)));

        let cases: &[(u16, &str, &str)] = &[
            (401, "", "auth"),
            (403, "<html>Forbidden</html>", "auth"),
            (429, "slow down", "rate_limited"),
            (503, "", "rate_limited"),
            (500, "", "transport"),
            (502, "<html>Bad Gateway</html>", "transport"),
            (400, "nope", "other"),
        ];
        for (status, body, kind) in cases {
            let f = ApiFailure::from_response(&response(*status, &[], body));
            assert_eq!(f.code, "");
            assert_eq!(f.into_error(false).kind(), *kind, "{status} {body}");
        }
        let long = "x".repeat(10_000);
        assert!(
            ApiFailure::from_response(&response(502, &[], &long))
                .message
                .len()
                <= SNIPPET
        );
    }

    #[test]
    fn rate_limits_carry_retry_after() {
        let retry =
            |status: u16, headers: &[(&str, &str)], body: &str| match ApiFailure::from_response(
                &response(status, headers, body),
            )
            .into_error(false)
            {
                Error::RateLimited { retry_after_ms, .. } => retry_after_ms,
                other => panic!("{other:?}"),
            };
        let throttled = ec2_error("RequestLimitExceeded");
        assert_eq!(retry(503, &[("Retry-After", "3")], &throttled), Some(3_000));
        assert_eq!(retry(503, &[], &throttled), None);
        assert_eq!(retry(429, &[("retry-after", "1")], ""), Some(1_000));
    }
}
