//! The provisioner operations against the EC2 Query API, written over a
//! small [`Transport`] so that they run natively in unit tests with a
//! scripted API, and over signed `wasi:http` requests in the component.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use wasmprov_guest::cloud_config::CloudConfig;
use wasmprov_guest::http::Response;
use wasmprov_guest::tags::{self, OWNER, REQUEST, id_tag};
use wasmprov_guest::{
    CapacityType, Error, JoinState, NodeHandle, NodeShape, Offering, ProvisionRequest, Result,
};

use crate::api::{self, ApiFailure, Image, Instance, SpotPrice, TypeInfo};
use crate::catalogue;
use crate::launch::{self, BlockDevice};
use crate::pricing;
use crate::settings::{Arch, MAX_USER_DATA, Settings};
use crate::sign::API_VERSION;
use crate::tagging;

/// Most pages a listing reads before it gives up on an API that keeps
/// announcing a next page.
pub const MAX_PAGES: usize = 10_000;

/// Most `InstanceType.N` of one `DescribeInstanceTypes` call, and its
/// largest `MaxResults`.
pub const TYPES_PER_CALL: usize = 100;

/// `MaxResults` of `DescribeSpotPriceHistory` (its largest).
pub const SPOT_PAGE_SIZE: u32 = 1000;

/// Most `InstanceType.N` of one `DescribeSpotPriceHistory` call.
pub const SPOT_TYPES_PER_CALL: usize = 100;

/// Most instance types of one `pricing:GetProducts` filter.
pub const PRICE_LIST_TYPES_PER_CALL: usize = 50;

/// Error codes that say an instance id names no instance.
const NO_SUCH_INSTANCE: &[&str] = &["InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"];

/// One page of a listing and the token of the next.
type Page<P> = (Vec<P>, Option<String>);

/// The Query APIs the plugin calls: each has its endpoint, version and
/// signing name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum QueryApi {
    /// EC2 (`Version=2016-11-15`, signed for `ec2`).
    #[default]
    Ec2,
    /// Elastic Load Balancing v2, for target groups (`Version=2015-12-01`,
    /// signed for `elasticloadbalancing`, at `elb_endpoint`).
    Elb,
}

impl QueryApi {
    /// The `Version` every call of the API names.
    #[must_use]
    pub fn version(self) -> &'static str {
        match self {
            Self::Ec2 => API_VERSION,
            Self::Elb => crate::sign::ELB_API_VERSION,
        }
    }
}

/// One Query API call: the action and its parameters, not yet encoded.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiRequest {
    /// `Action`, e.g. `DescribeInstances`.
    pub action: &'static str,
    /// Parameters other than `Action` and `Version`, in order.
    pub params: Vec<(String, String)>,
    /// Which API: EC2 unless made with [`ApiRequest::elb`].
    pub api: QueryApi,
}

impl ApiRequest {
    /// An EC2 call of `action` with no parameters.
    #[must_use]
    pub fn new(action: &'static str) -> Self {
        Self {
            action,
            params: Vec::new(),
            api: QueryApi::Ec2,
        }
    }

    /// An Elastic Load Balancing v2 call of `action` with no parameters.
    #[must_use]
    pub fn elb(action: &'static str) -> Self {
        Self {
            api: QueryApi::Elb,
            ..Self::new(action)
        }
    }

    /// Adds a parameter.
    #[must_use]
    pub fn param(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.params.push((key.into(), value.into()));
        self
    }

    /// Adds `Filter.N.Name` / `Filter.N.Value.M` parameters.
    #[must_use]
    pub fn filters(mut self, filters: &[(String, Vec<String>)]) -> Self {
        for (n, (name, values)) in filters.iter().enumerate() {
            let n = n + 1;
            self = self.param(format!("Filter.{n}.Name"), name.clone());
            for (m, value) in values.iter().enumerate() {
                self = self.param(format!("Filter.{n}.Value.{}", m + 1), value.clone());
            }
        }
        self
    }

    /// The value of parameter `key`.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// Every parameter to send: `Action`, `Version`, then the others.
    #[must_use]
    pub fn form(&self) -> Vec<(String, String)> {
        let mut out = vec![
            ("Action".to_string(), self.action.to_string()),
            ("Version".to_string(), self.api.version().to_string()),
        ];
        out.extend(self.params.iter().cloned());
        out
    }
}

/// What the operations need from the outside world.
pub trait Transport {
    /// Signs and sends `req` to the endpoint and returns the whole response,
    /// whatever its status.
    ///
    /// # Errors
    /// A contract error when no response arrived.
    fn send(&self, req: &ApiRequest) -> Result<Response>;

    /// Emits one `info` log record.
    fn info(&self, message: &str, fields: &[(&str, &str)]);

    /// Seconds since the Unix epoch.
    fn now_unix(&self) -> u64;

    /// Signs and sends an AWS JSON 1.1 call (the Price List API, SSM) and
    /// returns the whole response, whatever its status.
    ///
    /// # Errors
    /// A contract error when no response arrived; by default
    /// [`Error::InvalidConfig`]: the transport cannot make such calls.
    fn send_json(&self, call: &JsonCall) -> Result<Response> {
        Err(Error::InvalidConfig(format!(
            "{} calls are not available over this transport",
            call.target
        )))
    }

    /// Milliseconds on a monotonic clock, for retry budgets.
    fn now_ms(&self) -> u64 {
        self.now_unix().saturating_mul(1000)
    }

    /// Waits `ms` milliseconds before a retry.
    fn sleep_ms(&self, _ms: u64) {}

    /// A random number in [0, 1), the jitter of retry delays.
    fn jitter(&self) -> f64 {
        0.5
    }
}

/// An AWS JSON 1.1 call to a service other than EC2.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JsonCall {
    /// Which service: decides the endpoint, signing name and region.
    pub api: JsonApi,
    /// `X-Amz-Target`, such as `AmazonSSM.GetParameter`.
    pub target: &'static str,
    /// The JSON body.
    pub body: String,
}

/// The services other than EC2 the plugin may call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonApi {
    /// The AWS Price List API (`pricing:GetProducts`), only when
    /// `price_list_endpoint` is configured.
    Pricing,
    /// Systems Manager Parameter Store (`ssm:GetParameter`), for AMI
    /// selector terms by SSM parameter or alias.
    Ssm,
}

/// Codes of answers worth retrying within a call: throttling and transient
/// service errors (the AWS SDKs' standard retry mode).
pub const RETRYABLE_CODES: &[&str] = &[
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "SlowDown",
    "EC2ThrottledException",
    "PriorRequestNotComplete",
    "BandwidthLimitExceeded",
    "Unavailable",
    "ServiceUnavailable",
    "InternalError",
    "InternalFailure",
    "RequestTimeout",
    "RequestTimeoutException",
];

/// The standard retry mode's largest delay between attempts.
pub const MAX_BACKOFF_MS: u64 = 20_000;

/// The operations, over a transport.
#[derive(Debug)]
pub struct Client<'a, T> {
    settings: &'a Settings,
    transport: T,
    /// When the call began ([`Transport::now_ms`]): retries stop once the
    /// next one could not finish within `retry_budget_ms` of it.
    started_ms: u64,
    /// Images described in this call, by id.
    images: RefCell<BTreeMap<String, Image>>,
    /// The image `ami_selector_terms` selected in this call.
    selected_image: RefCell<Option<String>>,
}

/// Codes that say the request was refused before it was carried out.
pub const THROTTLE_CODES: &[&str] = &[
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "SlowDown",
    "EC2ThrottledException",
];

/// Whether an answer or a failure to get one is worth another attempt, and
/// the wait it asks for. `ambiguous` allows retrying answers after which
/// the request may have been carried out (5xx, no answer): not for
/// `RunInstances`, which is retried on throttles only, so that a cloud that
/// ignores its client token never launches twice (the next `provision`
/// finds the instance by its tags first).
fn retryable(result: &Result<Response>, ambiguous: bool) -> Option<Option<u64>> {
    match result {
        Ok(resp) if resp.is_success() => None,
        Ok(resp) => {
            let failure = ApiFailure::from_response(resp);
            let throttled = resp.status == 429 || THROTTLE_CODES.contains(&failure.code.as_str());
            let again = throttled
                || (ambiguous
                    && (resp.status >= 500 || RETRYABLE_CODES.contains(&failure.code.as_str())));
            again.then_some(failure.retry_after_ms)
        }
        Err(e) => (ambiguous && e.kind() == "transport").then_some(None),
    }
}

impl<'a, T: Transport> Client<'a, T> {
    /// A client with these settings over `transport`.
    pub fn new(settings: &'a Settings, transport: T) -> Self {
        let started_ms = transport.now_ms();
        Self {
            settings,
            transport,
            started_ms,
            images: RefCell::new(BTreeMap::new()),
            selected_image: RefCell::new(None),
        }
    }

    /// Sends with the AWS standard retry mode: up to `max_attempts` attempts
    /// while the answer is a throttle, a 5xx or no answer at all, each retry
    /// after a jittered exponential delay (`rand × base × 2^n`, base
    /// `retry_base_ms` (1 s by default), at most 20 s, or
    /// the `Retry-After` asked for), and only while the retry can still end
    /// within `retry_budget_ms` of the call's start (counting the next
    /// attempt as long as the last one took). `RunInstances` is
    /// retried on throttles only ([`retryable`]).
    fn with_retries(&self, what: &str, send: impl Fn() -> Result<Response>) -> Result<Response> {
        let mut attempt: u32 = 1;
        loop {
            let sent_at = self.transport.now_ms();
            let result = send();
            // The next attempt may take as long as this one did (a request
            // that waited for its timeout will likely wait again).
            let took = self.transport.now_ms().saturating_sub(sent_at);
            let Some(asked) = retryable(&result, what != "RunInstances") else {
                return result;
            };
            if attempt >= self.settings.max_attempts {
                return result;
            }
            let exp = self
                .settings
                .retry_base_ms
                .saturating_mul(1 << (attempt - 1).min(16));
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss,
                reason = "a delay of at most 20 s in milliseconds"
            )]
            let jittered = (self.transport.jitter() * exp as f64) as u64;
            let delay = asked.unwrap_or(jittered).min(MAX_BACKOFF_MS);
            let spent = self.transport.now_ms().saturating_sub(self.started_ms);
            if spent.saturating_add(delay).saturating_add(took) >= self.settings.retry_budget_ms {
                return result;
            }
            let why = match &result {
                Ok(resp) => {
                    let f = ApiFailure::from_response(resp);
                    format!("HTTP {} {}", resp.status, f.code)
                }
                Err(e) => e.to_string(),
            };
            self.transport.info(
                "retrying",
                &[
                    ("call", what),
                    ("attempt", &(attempt + 1).to_string()),
                    ("delay_ms", &delay.to_string()),
                    ("after", &why),
                ],
            );
            self.transport.sleep_ms(delay);
            attempt += 1;
        }
    }

    /// Sends `req`; an error status is the API's failure, not yet a
    /// contract error.
    pub(crate) fn try_call(
        &self,
        req: &ApiRequest,
    ) -> Result<std::result::Result<Response, ApiFailure>> {
        let resp = self.with_retries(req.action, || self.transport.send(req))?;
        Ok(if resp.is_success() {
            Ok(resp)
        } else {
            Err(ApiFailure::from_response(&resp))
        })
    }

    /// Sends a JSON call, with retries; an error status is the API's failure.
    fn try_json(&self, call: &JsonCall) -> Result<std::result::Result<Response, ApiFailure>> {
        let resp = self.with_retries(call.target, || self.transport.send_json(call))?;
        Ok(if resp.is_success() {
            Ok(resp)
        } else {
            Err(ApiFailure::from_json_response(&resp))
        })
    }

    /// The image `id` as `DescribeImages` describes it, asked once per call.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for an image EC2 does not describe; the
    /// API's errors.
    pub fn image(&self, id: &str) -> Result<Image> {
        if let Some(image) = self.images.borrow().get(id) {
            return Ok(image.clone());
        }
        let req = ApiRequest::new("DescribeImages").param("ImageId.1", id);
        let resp = self.call(&req, false)?;
        let image = api::parse_images(&resp.text())?
            .0
            .into_iter()
            .find(|i| i.id == id)
            .ok_or_else(|| Error::InvalidConfig(format!("EC2 does not describe image {id:?}")))?;
        self.images
            .borrow_mut()
            .insert(id.to_string(), image.clone());
        Ok(image)
    }

    /// Sends `req`; an error status becomes the contract error.
    pub(crate) fn call(&self, req: &ApiRequest, zone_asked: bool) -> Result<Response> {
        self.try_call(req)?
            .map_err(|failure| failure.into_error(zone_asked))
    }

    /// Every item of a listing that starts with `req`, following
    /// `nextToken`; a failure of any page is the API's.
    pub(crate) fn pages<P>(
        &self,
        req: &ApiRequest,
        parse: fn(&str) -> Result<Page<P>>,
    ) -> Result<std::result::Result<Vec<P>, ApiFailure>> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        let mut seen = BTreeSet::new();
        for _ in 0..MAX_PAGES {
            let mut req = req.clone();
            if let Some(t) = &token {
                req = req.param("NextToken", t.clone());
            }
            let resp = match self.try_call(&req)? {
                Ok(resp) => resp,
                Err(failure) => return Ok(Err(failure)),
            };
            let (page, next) = parse(&resp.text())?;
            out.extend(page);
            match next {
                None => return Ok(Ok(out)),
                Some(next) => {
                    if !seen.insert(next.clone()) {
                        return Err(Error::Transport(format!(
                            "EC2 {} repeated nextToken {next:?}",
                            req.action
                        )));
                    }
                    token = Some(next);
                }
            }
        }
        Err(Error::Transport(format!(
            "EC2 {} announced more than {MAX_PAGES} pages",
            req.action
        )))
    }

    /// Every instance matching `filters`, following `nextToken`.
    pub(crate) fn describe_filtered(
        &self,
        filters: &[(String, Vec<String>)],
    ) -> Result<Vec<Instance>> {
        let req = ApiRequest::new("DescribeInstances")
            .filters(filters)
            .param("MaxResults", self.settings.page_size.to_string());
        self.pages(&req, api::parse_describe_instances)?
            .map_err(|failure| failure.into_error(false))
    }

    /// The instance `id`, whatever its owner or state; `None` when EC2 does
    /// not know it.
    pub(crate) fn lookup(&self, id: &str) -> Result<Option<Instance>> {
        let req = ApiRequest::new("DescribeInstances").param("InstanceId.1", id);
        match self.try_call(&req)? {
            Ok(resp) => Ok(api::parse_describe_instances(&resp.text())?
                .0
                .into_iter()
                .find(|i| i.id == id)),
            Err(failure) if NO_SUCH_INSTANCE.contains(&failure.code.as_str()) => Ok(None),
            Err(failure) => Err(failure.into_error(false)),
        }
    }

    fn live_states() -> (String, Vec<String>) {
        (
            "instance-state-name".into(),
            tagging::LIVE_STATES
                .iter()
                .map(|s| (*s).to_string())
                .collect(),
        )
    }

    /// The live instance created for this request, if any (when, against
    /// all odds, there are several: one that has not failed, lowest id).
    fn find_for_request(&self, owner_id: &str, request_id: &str) -> Result<Option<Instance>> {
        let filters = [
            (format!("tag:{OWNER}"), vec![id_tag(owner_id)]),
            (format!("tag:{REQUEST}"), vec![id_tag(request_id)]),
            Self::live_states(),
        ];
        Ok(self
            .describe_filtered(&filters)?
            .into_iter()
            .filter(|i| !i.is_terminated() && tagging::is_for_request(i, owner_id, request_id))
            .min_by(|a, b| {
                let failed = |i: &Instance| api::join_state(&i.state) == JoinState::Failed;
                failed(a).cmp(&failed(b)).then_with(|| a.id.cmp(&b.id))
            }))
    }

    /// What `DescribeInstanceTypes` says of `names` in the region, in
    /// calls of [`TYPES_PER_CALL`] types. Types EC2 does not offer there
    /// are left out: a call naming one fails as a whole
    /// (`InvalidInstanceType`), so it is asked again without the types the
    /// error message names, or, when it names none of them, in halves,
    /// until the types EC2 does offer are described.
    ///
    /// # Errors
    /// The API's other errors.
    pub fn describe_types(&self, names: &[String]) -> Result<Vec<TypeInfo>> {
        let mut out = Vec::new();
        for chunk in names.chunks(TYPES_PER_CALL) {
            self.describe_types_into(chunk, &mut out)?;
        }
        Ok(out)
    }

    fn describe_types_into(&self, names: &[String], out: &mut Vec<TypeInfo>) -> Result<()> {
        if names.is_empty() {
            return Ok(());
        }
        let mut req = ApiRequest::new("DescribeInstanceTypes");
        for (n, name) in names.iter().enumerate() {
            req = req.param(format!("InstanceType.{}", n + 1), name.clone());
        }
        req = req.param("MaxResults", TYPES_PER_CALL.to_string());
        match self.pages(&req, api::parse_instance_types)? {
            Ok(types) => out.extend(types),
            Err(failure) if failure.code == "InvalidInstanceType" => {
                let (named, rest): (Vec<String>, Vec<String>) = names
                    .iter()
                    .cloned()
                    .partition(|n| names_type(&failure.message, n));
                if !named.is_empty() {
                    self.describe_types_into(&rest, out)?;
                } else if names.len() > 1 {
                    let (a, b) = names.split_at(names.len() / 2);
                    self.describe_types_into(a, out)?;
                    self.describe_types_into(b, out)?;
                }
            }
            Err(failure) => return Err(failure.into_error(false)),
        }
        Ok(())
    }

    /// What `DescribeInstanceTypes` says of `name`, checked against the
    /// architecture and GPU model `shape` asks for.
    ///
    /// # Errors
    /// [`Error::Unsupported`] when EC2 does not offer `name` in the region,
    /// or it has another architecture or GPU model.
    fn check_instance_type(&self, name: &str, shape: &NodeShape) -> Result<TypeInfo> {
        let info = self
            .describe_types(&[name.to_string()])?
            .into_iter()
            .find(|t| t.name == name)
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "instance type {name:?} is not offered in {}",
                    self.settings.region
                ))
            })?;
        catalogue::check_described(shape, &info)?;
        Ok(info)
    }

    /// The current spot prices of `names` (in `zone`, else in every zone):
    /// `DescribeSpotPriceHistory` for Linux/UNIX from now on, which
    /// answers the price in effect now.
    fn spot_prices(&self, names: &[&str], zone: Option<&str>) -> Result<Vec<SpotPrice>> {
        let mut req = ApiRequest::new("DescribeSpotPriceHistory");
        for (n, name) in names.iter().enumerate() {
            req = req.param(format!("InstanceType.{}", n + 1), *name);
        }
        req = req
            .param("ProductDescription.1", "Linux/UNIX")
            .param("StartTime", iso8601(self.transport.now_unix()))
            .param("MaxResults", SPOT_PAGE_SIZE.to_string());
        if let Some(z) = zone {
            req = req.param("AvailabilityZone", z);
        }
        self.pages(&req, api::parse_spot_prices)?
            .map_err(|failure| failure.into_error(false))
    }

    /// Logs the current spot price of `instance_type` (best effort: a
    /// failure is logged, not returned).
    fn log_spot_price(&self, instance_type: &str, zone: Option<&str>, on_demand: Option<f64>) {
        let on_demand = on_demand.map_or_else(|| "unknown".to_string(), |p| p.to_string());
        match self.spot_prices(&[instance_type], zone) {
            Ok(prices) => match prices.iter().min_by(|a, b| a.usd.total_cmp(&b.usd)) {
                Some(p) => self.transport.info(
                    "current spot price",
                    &[
                        ("instance_type", instance_type),
                        ("zone", &p.zone),
                        ("spot_usd", &p.usd.to_string()),
                        ("on_demand_usd", &on_demand),
                    ],
                ),
                None => self.transport.info(
                    "no spot price published",
                    &[("instance_type", instance_type)],
                ),
            },
            Err(e) => self.transport.info(
                "spot price unavailable",
                &[("instance_type", instance_type), ("error", &e.to_string())],
            ),
        }
    }

    /// The root volume for a disk of at least `disk_bytes` booting `image`:
    /// its device name (`DescribeImages`) and size in GiB, the size asked
    /// for rounded up, or the image's snapshot when that is larger.
    ///
    /// # Errors
    /// [`Error::Unsupported`] over 16 TiB or for an image whose root device
    /// is not EBS; [`Error::InvalidConfig`] for an image EC2 does not
    /// describe; the API's errors.
    fn root_volume(&self, image: &str, disk_bytes: u64) -> Result<(String, u64)> {
        let gib = catalogue::root_volume_gib(disk_bytes)?;
        let root = self.image(image)?.root.ok_or_else(|| {
            Error::InvalidConfig(format!(
                "EC2 does not describe image {image:?} or its root device"
            ))
        })?;
        if root.kind != "ebs" {
            return Err(Error::Unsupported(format!(
                "image {image:?} boots from {}, not EBS: its root disk cannot be sized",
                root.kind
            )));
        }
        Ok((root.name, gib.max(root.snapshot_gib.unwrap_or(0))))
    }

    /// The architecture this plugin's offerings and picks may have: the
    /// configured one narrowed by the configured image's (read once per
    /// call with `DescribeImages`). Without an image configured, the
    /// configured architecture alone.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when the image is of another architecture
    /// than the configured one; the errors of `DescribeImages`.
    pub fn offered_arch(&self) -> Result<Option<Arch>> {
        let image = match self.configured_image()? {
            Some(id) => {
                let image = self.image(&id)?;
                image.arch.map(|a| (id, a))
            }
            None => None,
        };
        catalogue::arch_for(
            self.settings,
            image.as_ref().map(|(id, a)| (id.as_str(), *a)),
        )
    }

    /// Every current-generation type EC2 offers in the region of
    /// architecture `arch` (any when `None`): `DescribeInstanceTypes` with
    /// the filters `current-generation=true` and
    /// `processor-info.supported-architecture`, 100 a page, following
    /// `NextToken`.
    ///
    /// # Errors
    /// The API's errors.
    pub fn describe_current_types(&self, arch: Option<Arch>) -> Result<Vec<TypeInfo>> {
        let mut filters = vec![("current-generation".to_string(), vec!["true".to_string()])];
        if let Some(a) = arch {
            filters.push((
                "processor-info.supported-architecture".to_string(),
                vec![a.to_string()],
            ));
        }
        let req = ApiRequest::new("DescribeInstanceTypes")
            .filters(&filters)
            .param("MaxResults", TYPES_PER_CALL.to_string());
        self.pages(&req, api::parse_instance_types)?
            .map_err(|failure| failure.into_error(false))
    }

    /// Every type EC2 offers in the region that this plugin may launch:
    /// `instance_types` when set (asked for by name), else every current
    /// generation type; of the configured architecture and the configured
    /// image's ([`Client::offered_arch`]); as `DescribeInstanceTypes`
    /// describes them (GPU count, vendor, model). On-demand prices come
    /// from the table, else from the Price List API when
    /// `price_list_endpoint` is set, else are unknown (the type is still
    /// offered); spot prices are the lowest current one across zones
    /// (`DescribeSpotPriceHistory`; none when EC2 publishes none or the
    /// look-up fails: that is logged). Disks are root volumes sized per
    /// request: each offering says the largest one.
    ///
    /// # Errors
    /// The errors of `DescribeInstanceTypes` and `DescribeImages`;
    /// [`Error::InvalidConfig`] for an image of another architecture than
    /// the configured one.
    pub fn offerings(&self) -> Result<Vec<Offering>> {
        let arch = self.offered_arch()?;
        let mut types = match catalogue::allowed_names(self.settings) {
            Some(names) => self.describe_types(&names)?,
            None => self.describe_current_types(arch)?,
        };
        // Launchable types only: of the architecture (when one is set) and
        // of one this plugin launches (not the Mac ones), each once.
        types.retain(|t| t.arch.is_some() && arch.is_none_or(|a| t.arch == Some(a)));
        types.sort_by(|a, b| a.name.cmp(&b.name));
        types.dedup_by(|a, b| a.name == b.name);
        let names: Vec<&str> = types.iter().map(|t| t.name.as_str()).collect();
        let mut on_demand: BTreeMap<String, f64> = names
            .iter()
            .filter_map(|n| {
                Some((
                    (*n).to_string(),
                    catalogue::price(&self.settings.region, n)?,
                ))
            })
            .collect();
        if self.settings.price_list_endpoint.is_some() {
            let missing: Vec<&str> = names
                .iter()
                .copied()
                .filter(|n| !on_demand.contains_key(*n))
                .collect();
            match self.price_list(&missing) {
                Ok(found) => on_demand.extend(found),
                Err(e) => self
                    .transport
                    .info("Price List API unavailable", &[("error", &e.to_string())]),
            }
        }
        let mut spot = BTreeMap::new();
        for chunk in names.chunks(SPOT_TYPES_PER_CALL) {
            match self.spot_prices(chunk, None) {
                Ok(prices) => spot.extend(api::lowest_spot_prices(&prices)),
                Err(e) => {
                    self.transport
                        .info("spot prices unavailable", &[("error", &e.to_string())]);
                    break;
                }
            }
        }
        Ok(types
            .iter()
            .map(|t| {
                catalogue::offering(
                    t,
                    on_demand.get(&t.name).copied(),
                    spot.get(&t.name).copied(),
                )
            })
            .collect())
    }

    /// The on-demand Linux prices of `names` in the region from the AWS
    /// Price List API (`pricing:GetProducts`, `ANY_OF` the names, 100 a
    /// page): shared tenancy, no pre-installed software, used capacity.
    ///
    /// # Errors
    /// The API's errors; [`Error::Transport`] for an answer that is not
    /// the JSON expected.
    pub fn price_list(&self, names: &[&str]) -> Result<BTreeMap<String, f64>> {
        let mut out = BTreeMap::new();
        for chunk in names.chunks(PRICE_LIST_TYPES_PER_CALL) {
            let mut token: Option<String> = None;
            for _ in 0..MAX_PAGES {
                let body = pricing::get_products(&self.settings.region, chunk, token.as_deref());
                let call = JsonCall {
                    api: JsonApi::Pricing,
                    target: pricing::TARGET,
                    body,
                };
                let resp = self
                    .try_json(&call)?
                    .map_err(|failure| failure.into_error(false))?;
                let (prices, next) = pricing::parse_products(&resp.body)?;
                out.extend(prices);
                match next {
                    Some(n) if Some(&n) != token.as_ref() => token = Some(n),
                    _ => break,
                }
            }
        }
        Ok(out)
    }

    /// Creates an instance, or returns the one already created for the
    /// request (found by its owner and request tags).
    ///
    /// # Errors
    /// [`Error::Unsupported`] for impossible shapes, zones of other regions
    /// and instance types EC2 does not offer; [`Error::InvalidConfig`]
    /// without `image_id`; the API's errors mapped by [`ApiFailure::into_error`].
    pub fn provision(&self, owner_id: &str, request: &ProvisionRequest) -> Result<NodeHandle> {
        let shape = &request.shape;
        let request_id = request.request_id.as_str();
        if let Some(existing) = self.find_for_request(owner_id, request_id)? {
            return Ok(existing.to_handle());
        }
        // Boot data of the request wins over the configured image.
        let configured;
        let image = match &request.boot.image {
            Some(image) => image.as_str(),
            None => {
                configured = self.configured_image()?;
                match &configured {
                    Some(id) => id.as_str(),
                    None => self.settings.require_image()?,
                }
            }
        };
        let arch = self.image_arch(image, request.boot.image.is_some())?;
        let choice = catalogue::choose_for(shape, self.settings, arch, Some(image))?;
        let tags = tagging::instance_tags(
            owner_id,
            request_id,
            &wasmprov_guest::tags::request_labels(request),
        )?;
        let user_data: Option<&[u8]> = match &request.boot.user_data {
            Some(data) => Some(data),
            None => self.settings.user_data.as_deref().map(str::as_bytes),
        };
        let keys = ssh_keys(&request.boot.ssh_keys, self.settings.key_name.is_some());
        let merged;
        let user_data = match &keys {
            SshKeys::InUserData(keys) => {
                merged = keys_in_user_data(user_data, keys)?;
                Some(merged.as_bytes())
            }
            SshKeys::None | SshKeys::KeyPair(_) => user_data,
        };
        if let Some(data) = user_data
            && data.len() > MAX_USER_DATA
        {
            return Err(Error::Unsupported(format!(
                "user data is {} bytes; EC2 takes at most {MAX_USER_DATA}",
                data.len()
            )));
        }
        let zone = shape.zone.as_deref();
        let spot = shape.capacity_type == CapacityType::Spot;
        let described = self.check_instance_type(&choice.instance_type, shape)?;
        // A type the table does not know: its architecture from EC2's answer.
        if let (Some(want), Some(has)) = (arch, described.arch)
            && want != has
        {
            return Err(catalogue::wrong_arch(
                &choice.instance_type,
                has,
                want,
                Some(image),
            ));
        }
        let root = match shape.disk_bytes {
            Some(disk) => Some(self.root_volume(image, disk)?),
            None => None,
        };
        let subnet = match &request.subnet {
            Some(id) => Some(self.request_subnet(id, zone)?),
            None => self.select_subnet(zone)?,
        };
        let groups = self.select_security_groups()?;
        if spot {
            self.log_spot_price(&choice.instance_type, zone, choice.on_demand_usd);
        }
        let key_name = match &keys {
            SshKeys::KeyPair(key) => Some(self.key_pair(key)?),
            SshKeys::None | SshKeys::InUserData(_) => self.settings.key_name.clone(),
        };

        let mut req = ApiRequest::new("RunInstances")
            .param("ImageId", image)
            .param("InstanceType", choice.instance_type.clone())
            .param("MinCount", "1")
            .param("MaxCount", "1")
            .param("ClientToken", tagging::client_token(owner_id, request_id));
        if let Some(z) = zone {
            req = req.param("Placement.AvailabilityZone", z);
        }
        let launch = &self.settings.launch;
        match launch.associate_public_ip_address {
            // A public IP choice is a network interface's: the subnet and
            // groups go with it.
            Some(public) => {
                req = req
                    .param("NetworkInterface.1.DeviceIndex", "0")
                    .param(
                        "NetworkInterface.1.AssociatePublicIpAddress",
                        public.to_string(),
                    )
                    .param("NetworkInterface.1.DeleteOnTermination", "true");
                if let Some(subnet) = &subnet {
                    req = req.param("NetworkInterface.1.SubnetId", subnet.clone());
                }
                for (n, sg) in groups.iter().enumerate() {
                    req = req.param(
                        format!("NetworkInterface.1.SecurityGroupId.{}", n + 1),
                        sg.clone(),
                    );
                }
            }
            None => {
                if let Some(subnet) = &subnet {
                    req = req.param("SubnetId", subnet.clone());
                }
                for (n, sg) in groups.iter().enumerate() {
                    req = req.param(format!("SecurityGroupId.{}", n + 1), sg.clone());
                }
            }
        }
        if let Some(profile) = &launch.instance_profile {
            let field = if profile.starts_with("arn:") {
                "Arn"
            } else {
                "Name"
            };
            req = req.param(format!("IamInstanceProfile.{field}"), profile.clone());
        }
        let m = &launch.metadata_options;
        req = req
            .param("MetadataOptions.HttpTokens", m.http_tokens.clone())
            .param(
                "MetadataOptions.HttpPutResponseHopLimit",
                m.http_put_response_hop_limit.to_string(),
            )
            .param("MetadataOptions.HttpEndpoint", m.http_endpoint.clone())
            .param(
                "MetadataOptions.HttpProtocolIpv6",
                m.http_protocol_ipv6.clone(),
            );
        if launch.detailed_monitoring {
            req = req.param("Monitoring.Enabled", "true");
        }
        if let Some(key) = key_name {
            req = req.param("KeyName", key);
        }
        for (n, (device, ebs)) in block_devices(&launch.block_device_mappings, root)?
            .into_iter()
            .enumerate()
        {
            let p = |f: &str| format!("BlockDeviceMapping.{}.{f}", n + 1);
            req = req.param(p("DeviceName"), device);
            for (k, v) in ebs {
                req = req.param(p(&format!("Ebs.{k}")), v);
            }
        }
        if let Some(data) = user_data {
            req = req.param(
                "UserData",
                base64::engine::general_purpose::STANDARD.encode(data),
            );
        }
        if spot {
            req = req
                .param("InstanceMarketOptions.MarketType", "spot")
                .param(
                    "InstanceMarketOptions.SpotOptions.SpotInstanceType",
                    "one-time",
                )
                .param(
                    "InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior",
                    "terminate",
                );
        }
        // The instance gets the operator's tags and every tag of its own
        // (which win); its volumes the operator's, owner and request tags.
        let operator: Vec<(String, String)> = launch
            .tags
            .iter()
            .filter(|(k, _)| !tags.iter().any(|(t, _)| t == *k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if operator.len() + tags.len() > tagging::MAX_TAGS {
            return Err(Error::Unsupported(format!(
                "{} tags asked for (config key \"tags\" and the shape's labels); EC2 allows at most {} on an instance",
                operator.len() + tags.len(),
                tagging::MAX_TAGS
            )));
        }
        let instance_tags: Vec<(String, String)> =
            operator.iter().chain(tags.iter()).cloned().collect();
        req = req.param("TagSpecification.1.ResourceType", "instance");
        for (n, (k, v)) in instance_tags.iter().enumerate() {
            req = req
                .param(format!("TagSpecification.1.Tag.{}.Key", n + 1), k.clone())
                .param(format!("TagSpecification.1.Tag.{}.Value", n + 1), v.clone());
        }
        req = req.param("TagSpecification.2.ResourceType", "volume");
        for (n, (k, v)) in launch
            .tags
            .iter()
            .chain(
                tags.iter()
                    .filter(|(k, _)| k == OWNER || k == REQUEST)
                    .map(|(k, v)| (k, v)),
            )
            .enumerate()
        {
            req = req
                .param(format!("TagSpecification.2.Tag.{}.Key", n + 1), k.clone())
                .param(format!("TagSpecification.2.Tag.{}.Value", n + 1), v.clone());
        }

        let resp = self.call(&req, zone.is_some())?;
        let mut instance = api::parse_run_instances(&resp.text())?
            .into_iter()
            .next()
            .ok_or_else(|| Error::Transport("EC2 RunInstances returned no instance".into()))?;
        if instance.tags.is_empty() {
            instance.tags = tags;
        }
        let mut handle = instance.to_handle();
        // What EC2 said of the type, for one the table does not know.
        if handle.arch.is_none() {
            handle.arch = described.arch;
        }
        if handle.gpu_model.is_none() {
            handle.gpu_model = described.gpu_model;
        }
        self.transport.info(
            "instance created",
            &[
                ("instance_id", &handle.provider_id),
                ("instance_type", &choice.instance_type),
                ("capacity_type", handle.capacity_type.as_str()),
                ("zone", handle.zone.as_deref().unwrap_or("")),
                ("owner", &id_tag(owner_id)),
                ("request_id", request_id),
            ],
        );
        Ok(handle)
    }

    /// The image launched when a request names none: `image_id`, else the
    /// newest image of the configured architecture `ami_selector_terms`
    /// select (selected once per call); `None` when neither is set.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when the terms select no image; the API's
    /// errors.
    pub fn configured_image(&self) -> Result<Option<String>> {
        if let Some(id) = &self.settings.image_id {
            return Ok(Some(id.clone()));
        }
        let terms = &self.settings.launch.ami_selector_terms;
        if terms.is_empty() {
            return Ok(None);
        }
        if let Some(id) = self.selected_image.borrow().clone() {
            return Ok(Some(id));
        }
        let want = self.settings.architecture;
        let mut found: Vec<Image> = Vec::new();
        for term in terms {
            if let Some(id) = &term.id {
                found.push(self.image(id)?);
            } else if let Some(name) = &term.ssm_parameter {
                let id = self.ssm_parameter(name)?;
                found.push(self.image(&id)?);
            } else if let Some(alias) = &term.alias {
                let arches = match want {
                    Some(a) => vec![a],
                    None => vec![Arch::X86_64, Arch::Arm64],
                };
                for arch in arches {
                    let name = launch::alias_parameter(alias, arch).map_err(|e| {
                        Error::InvalidConfig(format!("config key \"ami_selector_terms\": {e}"))
                    })?;
                    let id = self.ssm_parameter(&name)?;
                    found.push(self.image(&id)?);
                }
            } else {
                let (filters, owner) = launch::image_filters(term);
                let mut req = ApiRequest::new("DescribeImages").filters(&filters);
                if let Some(o) = owner {
                    req = req.param("Owner.1", o);
                }
                let images = self
                    .pages(&req, api::parse_images)?
                    .map_err(|failure| failure.into_error(false))?;
                for i in &images {
                    self.images.borrow_mut().insert(i.id.clone(), i.clone());
                }
                found.extend(images);
            }
        }
        let chosen = found
            .into_iter()
            .filter(|i| i.arch.is_some() && want.is_none_or(|a| i.arch == Some(a)))
            .max_by(|a, b| a.created.cmp(&b.created).then_with(|| b.id.cmp(&a.id)))
            .ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "config key \"ami_selector_terms\" selects no image{}",
                    want.map(|a| format!(" of architecture {a}"))
                        .unwrap_or_default()
                ))
            })?;
        self.transport.info(
            "image selected",
            &[
                ("image_id", &chosen.id),
                ("name", chosen.name.as_deref().unwrap_or("")),
            ],
        );
        *self.selected_image.borrow_mut() = Some(chosen.id.clone());
        Ok(Some(chosen.id))
    }

    /// The value of SSM parameter `name` (`ssm:GetParameter`).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a parameter SSM does not have; the
    /// API's errors.
    fn ssm_parameter(&self, name: &str) -> Result<String> {
        let call = JsonCall {
            api: JsonApi::Ssm,
            target: "AmazonSSM.GetParameter",
            body: serde_json::json!({ "Name": name }).to_string(),
        };
        let resp = self
            .try_json(&call)?
            .map_err(|failure| failure.into_error(false))?;
        let answer: serde_json::Value = serde_json::from_slice(&resp.body)
            .map_err(|e| Error::Transport(format!("SSM sent bad JSON: {e}")))?;
        answer
            .pointer("/Parameter/Value")
            .and_then(serde_json::Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| Error::Transport(format!("SSM sent no value for {name:?}")))
    }

    /// The subnet a request names, once `DescribeSubnets` shows it exists
    /// (in `zone`, when one is asked for).
    ///
    /// # Errors
    /// [`Error::Unsupported`] naming the subnet when EC2 does not know it or
    /// it is in another zone: the node is never placed elsewhere.
    fn request_subnet(&self, id: &str, zone: Option<&str>) -> Result<String> {
        let unknown = |why: &str| {
            Error::Unsupported(format!(
                "the request's subnet {id:?} cannot take the node: {why}"
            ))
        };
        let subnet = self
            .subnet(id)?
            .ok_or_else(|| unknown("EC2 does not know it"))?;
        if let Some(z) = zone
            && subnet.zone != z
        {
            return Err(unknown(&format!(
                "it is in zone {}, the shape asks for {z}",
                subnet.zone
            )));
        }
        Ok(subnet.id)
    }

    /// The subnet `id` as `DescribeSubnets` describes it; `None` when EC2
    /// does not know it (`InvalidSubnetID.NotFound`, `.Malformed`).
    ///
    /// # Errors
    /// The API's other errors.
    pub(crate) fn subnet(&self, id: &str) -> Result<Option<api::Subnet>> {
        let req = ApiRequest::new("DescribeSubnets").param("SubnetId.1", id);
        match self.try_call(&req)? {
            Ok(resp) => Ok(api::parse_subnets(&resp.text())?
                .0
                .into_iter()
                .find(|s| s.id == id)),
            Err(f) if f.code.starts_with("InvalidSubnetID.") => Ok(None),
            Err(f) => Err(f.into_error(false)),
        }
    }

    /// The subnet to launch into: `subnet_id`, else the subnet
    /// `subnet_selector_terms` select (in `zone`, when one is asked for)
    /// with the most free addresses; `None` leaves it to EC2.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when the terms select no subnet;
    /// [`Error::Unsupported`] when none is in `zone`; the API's errors.
    fn select_subnet(&self, zone: Option<&str>) -> Result<Option<String>> {
        let terms = &self.settings.launch.subnet_selector_terms;
        if terms.is_empty() {
            return Ok(self.settings.subnet_id.clone());
        }
        let mut subnets: Vec<api::Subnet> = Vec::new();
        for term in terms {
            let mut filters = launch::tag_filters(&term.tags);
            if let Some(id) = &term.id {
                filters.push(("subnet-id".to_string(), vec![id.clone()]));
            }
            let req = ApiRequest::new("DescribeSubnets").filters(&filters);
            subnets.extend(
                self.pages(&req, api::parse_subnets)?
                    .map_err(|failure| failure.into_error(false))?,
            );
        }
        if subnets.is_empty() {
            return Err(Error::InvalidConfig(
                "config key \"subnet_selector_terms\" selects no subnet".into(),
            ));
        }
        let best = subnets
            .into_iter()
            .filter(|s| zone.is_none_or(|z| s.zone == z))
            .max_by(|a, b| a.free.cmp(&b.free).then_with(|| b.id.cmp(&a.id)))
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "no subnet subnet_selector_terms select is in zone {}",
                    zone.unwrap_or_default()
                ))
            })?;
        Ok(Some(best.id))
    }

    /// The security groups of new instances: `security_group_ids`, and
    /// every group `security_group_selector_terms` select.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when the terms select no group; the API's
    /// errors.
    fn select_security_groups(&self) -> Result<Vec<String>> {
        let mut out = self.settings.security_group_ids.clone();
        let terms = &self.settings.launch.security_group_selector_terms;
        if terms.is_empty() {
            return Ok(out);
        }
        let before = out.len();
        for term in terms {
            let mut filters = launch::tag_filters(&term.tags);
            if let Some(id) = &term.id {
                filters.push(("group-id".to_string(), vec![id.clone()]));
            }
            if let Some(name) = &term.name {
                filters.push(("group-name".to_string(), vec![name.clone()]));
            }
            let req = ApiRequest::new("DescribeSecurityGroups").filters(&filters);
            for id in self
                .pages(&req, api::parse_security_groups)?
                .map_err(|failure| failure.into_error(false))?
            {
                if !out.contains(&id) {
                    out.push(id);
                }
            }
        }
        if out.len() == before {
            return Err(Error::InvalidConfig(
                "config key \"security_group_selector_terms\" selects no security group".into(),
            ));
        }
        Ok(out)
    }

    /// The architecture types launched with `image` must have: the image's
    /// (`DescribeImages`, once per call), which must agree with the
    /// configured `architecture`.
    ///
    /// # Errors
    /// For the configured image, [`Error::InvalidConfig`] when it is of
    /// another architecture than configured; for a request's image,
    /// [`Error::Unsupported`]; the errors of `DescribeImages`.
    fn image_arch(&self, image: &str, requested: bool) -> Result<Option<Arch>> {
        let found = self.image(image)?.arch.map(|a| (image, a));
        match catalogue::arch_for(self.settings, found) {
            Err(Error::InvalidConfig(m)) if requested => {
                Err(Error::Unsupported(format!("the request's image: {m}")))
            }
            other => other,
        }
    }

    /// The key pair holding `key`, imported under
    /// [`tags::ssh_key_name`] when EC2 does not have it yet. Key pairs are
    /// shared by every instance that asks for the same key and are not
    /// deleted with an instance.
    ///
    /// # Errors
    /// A key EC2 refuses is unsupported; the API's other errors.
    fn key_pair(&self, key: &str) -> Result<String> {
        let name = tags::ssh_key_name(key);
        let import = ApiRequest::new("ImportKeyPair")
            .param("KeyName", name.clone())
            .param(
                "PublicKeyMaterial",
                base64::engine::general_purpose::STANDARD.encode(tags::ssh_key_identity(key)),
            );
        match self.try_call(&import)? {
            Ok(_) => {
                self.transport
                    .info("key pair imported", &[("key_name", &name)]);
                Ok(name)
            }
            // Imported before, by this plugin or a concurrent call: the name
            // is the key's digest, so it holds the same key.
            Err(f) if f.code == "InvalidKeyPair.Duplicate" => Ok(name),
            Err(f)
                if matches!(
                    f.code.as_str(),
                    "InvalidKey.Format" | "InvalidKeyPair.Format" | "InvalidParameterValue"
                ) =>
            {
                Err(Error::Unsupported(format!(
                    "EC2 refused the SSH key as a key pair: {}",
                    f.message
                )))
            }
            Err(f) => Err(f.into_error(false)),
        }
    }

    /// Terminates an instance carrying this owner's tag.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an id that is not an instance id, an instance
    /// that does not exist, is already terminated, or is not tagged with
    /// this owner (it is never terminated); the API's other errors.
    pub fn terminate(&self, owner_id: &str, provider_id: &str) -> Result<()> {
        self.owned_instance(owner_id, provider_id)?;
        let req = ApiRequest::new("TerminateInstances").param("InstanceId.1", provider_id);
        self.call(&req, false)?;
        self.transport.info(
            "instance terminated",
            &[("instance_id", provider_id), ("owner", &id_tag(owner_id))],
        );
        Ok(())
    }

    /// The live instance `provider_id`, checked to carry this owner's tag:
    /// what every call that changes a node acts on.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an id that is not an instance id (nothing is
    /// sent), an instance that does not exist, is terminated, or is not
    /// tagged with this owner; the API's other errors.
    pub fn owned_instance(&self, owner_id: &str, provider_id: &str) -> Result<Instance> {
        if !tagging::is_instance_id(provider_id) {
            return Err(Error::NotFound(format!(
                "{provider_id:?} is not an EC2 instance id"
            )));
        }
        let instance = self
            .lookup(provider_id)?
            .ok_or_else(|| Error::NotFound(format!("instance {provider_id} does not exist")))?;
        if !tagging::is_owned(&instance, owner_id) {
            return Err(Error::NotFound(format!(
                "instance {provider_id} is not owned by this host (no {OWNER}={} tag)",
                id_tag(owner_id)
            )));
        }
        if instance.is_terminated() {
            return Err(Error::NotFound(format!(
                "instance {provider_id} is already terminated"
            )));
        }
        Ok(instance)
    }

    /// Replaces the labels of an instance of this owner: `DeleteTags` for
    /// the tags that go, then `CreateTags` for those that come or change
    /// ([`tagging::relabel`]: the ownership, request and provenance tags,
    /// and AWS's own, are never touched), then answers the instance as
    /// `DescribeInstances` now shows it. Labels already as asked send
    /// nothing.
    ///
    /// # Errors
    /// [`Error::NotFound`] as [`Client::owned_instance`]; [`Error::Unsupported`]
    /// for labels EC2 would refuse (nothing is changed); the API's errors.
    pub fn set_labels(
        &self,
        owner_id: &str,
        provider_id: &str,
        labels: &wasmprov_guest::Labels,
    ) -> Result<NodeHandle> {
        let instance = self.owned_instance(owner_id, provider_id)?;
        let change = tagging::relabel(&instance, labels)?;
        if change.is_empty() {
            return Ok(instance.to_handle());
        }
        if !change.delete.is_empty() {
            let mut req = ApiRequest::new("DeleteTags").param("ResourceId.1", provider_id);
            for (n, k) in change.delete.iter().enumerate() {
                req = req.param(format!("Tag.{}.Key", n + 1), k.clone());
            }
            self.call(&req, false)?;
        }
        if !change.create.is_empty() {
            let mut req = ApiRequest::new("CreateTags").param("ResourceId.1", provider_id);
            for (n, (k, v)) in change.create.iter().enumerate() {
                req = req
                    .param(format!("Tag.{}.Key", n + 1), k.clone())
                    .param(format!("Tag.{}.Value", n + 1), v.clone());
            }
            self.call(&req, false)?;
        }
        self.transport.info(
            "labels set",
            &[
                ("instance_id", provider_id),
                ("deleted", &change.delete.len().to_string()),
                ("written", &change.create.len().to_string()),
            ],
        );
        self.lookup(provider_id)?
            .filter(|i| tagging::is_owned(i, owner_id))
            .map(|i| i.to_handle())
            .ok_or_else(|| Error::NotFound(format!("instance {provider_id} is gone")))
    }

    /// Emits one `info` log record.
    pub(crate) fn info(&self, message: &str, fields: &[(&str, &str)]) {
        self.transport.info(message, fields);
    }

    /// The instance `provider_id` when it carries this owner's tag, in
    /// whatever state (a terminated one is `deleted`), from
    /// `DescribeInstances` for that one id.
    ///
    /// # Errors
    /// The API's errors; an id that is not an instance id, or one EC2 does
    /// not know (`InvalidInstanceID.NotFound`, `.Malformed`), is `None`.
    pub fn get(&self, owner_id: &str, provider_id: &str) -> Result<Option<NodeHandle>> {
        if !tagging::is_instance_id(provider_id) {
            return Ok(None);
        }
        Ok(self
            .lookup(provider_id)?
            .filter(|i| tagging::is_owned(i, owner_id))
            .map(|i| i.to_handle()))
    }

    /// Every live instance tagged with this owner.
    ///
    /// # Errors
    /// The API's errors; [`Error::Transport`] when pagination does not end.
    pub fn describe(&self, owner_id: &str) -> Result<Vec<NodeHandle>> {
        let filters = [
            (format!("tag:{OWNER}"), vec![id_tag(owner_id)]),
            Self::live_states(),
        ];
        let mut seen = BTreeSet::new();
        Ok(self
            .describe_filtered(&filters)?
            .into_iter()
            .filter(|i| !i.is_terminated() && tagging::is_owned(i, owner_id))
            .filter(|i| seen.insert(i.id.clone()))
            .map(|i| i.to_handle())
            .collect())
    }
}

/// Whether `message` names instance type `name` as a word of its own
/// (EC2 says "The following supplied instance types do not exist:
/// [p3.2xlarge]").
/// A block device mapping to send: its device name and `Ebs.*` parameters.
type Mapping = (String, Vec<(&'static str, String)>);

/// The block device mappings of a launch: the configured ones, with the
/// shape's disk `root` (the image's root device and size in GiB) sizing the
/// root volume (at least), or added as a `gp3` root volume when none is
/// configured. Each as its device name and `Ebs.*` parameters.
///
/// # Errors
/// [`Error::InvalidConfig`] for a size that cannot be read (checked when
/// the settings were read, so never in practice).
fn block_devices(configured: &[BlockDevice], root: Option<(String, u64)>) -> Result<Vec<Mapping>> {
    let mut out = Vec::new();
    let mut root_done = false;
    for d in configured {
        let mut size = match &d.ebs.volume_size {
            Some(q) => Some(q.gib().map_err(|e| {
                Error::InvalidConfig(format!("config key \"block_device_mappings\": {e}"))
            })?),
            None => None,
        };
        let is_root = d.root_volume || root.as_ref().is_some_and(|(dev, _)| *dev == d.device_name);
        if is_root && let Some((_, gib)) = &root {
            size = Some(size.unwrap_or(0).max(*gib));
            root_done = true;
        }
        let e = &d.ebs;
        let mut ebs: Vec<(&'static str, String)> = Vec::new();
        if let Some(s) = size {
            ebs.push(("VolumeSize", s.to_string()));
        }
        ebs.push((
            "VolumeType",
            e.volume_type.clone().unwrap_or_else(|| "gp3".into()),
        ));
        if let Some(i) = e.iops {
            ebs.push(("Iops", i.to_string()));
        }
        if let Some(t) = e.throughput {
            ebs.push(("Throughput", t.to_string()));
        }
        if let Some(x) = e.encrypted {
            ebs.push(("Encrypted", x.to_string()));
        }
        if let Some(k) = &e.kms_key_id {
            ebs.push(("KmsKeyId", k.clone()));
        }
        if let Some(s) = &e.snapshot_id {
            ebs.push(("SnapshotId", s.clone()));
        }
        ebs.push((
            "DeleteOnTermination",
            e.delete_on_termination.unwrap_or(true).to_string(),
        ));
        out.push((d.device_name.clone(), ebs));
    }
    if !root_done && let Some((device, gib)) = root {
        out.insert(
            0,
            (
                device,
                vec![
                    ("VolumeSize", gib.to_string()),
                    ("VolumeType", "gp3".to_string()),
                    ("DeleteOnTermination", "true".to_string()),
                ],
            ),
        );
    }
    Ok(out)
}

/// How a request's SSH keys reach the instance.
#[derive(Clone, Debug, PartialEq, Eq)]
enum SshKeys<'r> {
    /// None asked for.
    None,
    /// One key and no configured `key_name`: EC2's own way, a key pair.
    KeyPair(&'r str),
    /// Several keys, or a configured `key_name` that takes the key-pair
    /// slot: in the user data's `ssh_authorized_keys`.
    InUserData(&'r [String]),
}

fn ssh_keys(keys: &[String], key_name_configured: bool) -> SshKeys<'_> {
    match keys {
        [] => SshKeys::None,
        [one] if !key_name_configured => SshKeys::KeyPair(one),
        _ => SshKeys::InUserData(keys),
    }
}

/// `user_data` (none, or a `#cloud-config`) with `keys` added to its
/// `ssh_authorized_keys`.
///
/// # Errors
/// Unsupported for user data that is not a `#cloud-config` document: the
/// keys cannot be added to a script, and are never dropped.
fn keys_in_user_data(user_data: Option<&[u8]>, keys: &[String]) -> Result<String> {
    let unsupported = |why: String| {
        Error::Unsupported(format!(
            "{} SSH keys asked for: EC2 takes one key pair per instance, so they go into the user data's ssh_authorized_keys, and {why}",
            keys.len()
        ))
    };
    let mut doc = CloudConfig::parse_or_empty(user_data).map_err(unsupported)?;
    doc.append("ssh_authorized_keys", keys)
        .map_err(unsupported)?;
    doc.render("# ssh_authorized_keys: the request's SSH keys, added by wasmprov-plugin-aws-ec2")
        .map_err(unsupported)
}

fn names_type(message: &str, name: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    message
        .split(|c: char| !part(c))
        .any(|word| word == name || word.strip_suffix('.') == Some(name))
}

/// `YYYY-MM-DDTHH:MM:SSZ` for seconds since the Unix epoch.
#[must_use]
pub fn iso8601(unix: u64) -> String {
    let days = unix / 86_400;
    let secs = unix % 86_400;
    // Civil from days (Howard Hinnant's algorithm), for dates after 1970.
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use wasmprov_guest::{Arch, CapacityScope, Labels, NodeShape, NodeStatus};

    type Responder = Box<dyn Fn(&ApiRequest) -> Response>;

    /// A scripted API: answers requests in order, records requests and logs.
    #[derive(Default)]
    struct Script {
        answers: RefCell<VecDeque<Response>>,
        requests: RefCell<Vec<ApiRequest>>,
        json: RefCell<Vec<JsonCall>>,
        logs: RefCell<Vec<String>>,
        slept: RefCell<Vec<u64>>,
        dynamic: Option<Responder>,
        /// How long each request takes on the script's clock.
        request_ms: u64,
    }

    impl Script {
        fn new(answers: Vec<Response>) -> Self {
            Self {
                answers: RefCell::new(answers.into()),
                ..Self::default()
            }
        }
        fn requests(&self) -> Vec<ApiRequest> {
            self.requests.borrow().clone()
        }
        fn actions(&self) -> Vec<&'static str> {
            self.requests.borrow().iter().map(|r| r.action).collect()
        }
    }

    impl Transport for &Script {
        fn send(&self, req: &ApiRequest) -> Result<Response> {
            // An image look-up the script has no answer for: an x86_64 EBS
            // image, not recorded (most tests are not about images; those
            // that are queue their answer, and see their request).
            let queued_image = self.answers.borrow().front().is_some_and(|a| {
                let t = a.text();
                t.contains("DescribeImagesResponse") || t.contains("InvalidAMIID")
            });
            if req.action == "DescribeImages" && !queued_image && self.dynamic.is_none() {
                let id = req.get("ImageId.1").unwrap_or("ami-0abc");
                return Ok(image_of(id, "x86_64"));
            }
            self.requests.borrow_mut().push(req.clone());
            if let Some(f) = &self.dynamic {
                return Ok(f(req));
            }
            self.answers
                .borrow_mut()
                .pop_front()
                .ok_or_else(|| Error::Transport(format!("unexpected request {req:?}")))
        }
        fn info(&self, message: &str, fields: &[(&str, &str)]) {
            let fields: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
            self.logs
                .borrow_mut()
                .push(format!("{message} {}", fields.join(" ")));
        }
        fn now_unix(&self) -> u64 {
            1_700_000_000
        }
        fn send_json(&self, call: &JsonCall) -> Result<Response> {
            self.json.borrow_mut().push(call.clone());
            self.answers
                .borrow_mut()
                .pop_front()
                .ok_or_else(|| Error::Transport(format!("unexpected call {call:?}")))
        }
        fn now_ms(&self) -> u64 {
            self.slept.borrow().iter().sum::<u64>()
                + self.request_ms * self.requests.borrow().len() as u64
        }
        fn sleep_ms(&self, ms: u64) {
            self.slept.borrow_mut().push(ms);
        }
    }

    fn resp(status: u16, body: &str) -> Response {
        Response {
            status,
            headers: vec![("content-type".into(), "text/xml".into())],
            body: body.as_bytes().to_vec(),
            url: "https://ec2.us-east-1.amazonaws.com/".into(),
        }
    }

    fn resp_with(status: u16, headers: &[(&str, &str)], code: &str) -> Response {
        let mut r = err(status, code);
        r.headers.extend(
            headers
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string())),
        );
        r
    }

    fn err(status: u16, code: &str) -> Response {
        resp(
            status,
            &format!(
                "<Response><Errors><Error><Code>{code}</Code><Message>{code}!</Message></Error></Errors></Response>"
            ),
        )
    }

    fn item(id: &str, state: &str, tags: &[(&str, &str)], spot: bool) -> String {
        let tags: String = tags
            .iter()
            .map(|(k, v)| format!("<item><key>{k}</key><value>{v}</value></item>"))
            .collect();
        format!(
            "<item><instanceId>{id}</instanceId><instanceState><name>{state}</name></instanceState>\
             <instanceType>t3a.micro</instanceType><placement><availabilityZone>us-east-1a</availabilityZone></placement>\
             <privateIpAddress>10.0.0.1</privateIpAddress>{}<tagSet>{tags}</tagSet></item>",
            if spot {
                "<instanceLifecycle>spot</instanceLifecycle>"
            } else {
                ""
            }
        )
    }

    fn page(items: &[String], next: Option<&str>) -> Response {
        resp(
            200,
            &format!(
                "<DescribeInstancesResponse><reservationSet><item><instancesSet>{}</instancesSet></item></reservationSet>{}</DescribeInstancesResponse>",
                items.concat(),
                next.map(|n| format!("<nextToken>{n}</nextToken>"))
                    .unwrap_or_default()
            ),
        )
    }

    fn types(name: &str) -> Response {
        resp(
            200,
            &format!(
                "<DescribeInstanceTypesResponse><instanceTypeSet><item><instanceType>{name}</instanceType></item></instanceTypeSet></DescribeInstanceTypesResponse>"
            ),
        )
    }

    fn run(item: &str) -> Response {
        resp(
            200,
            &format!(
                "<RunInstancesResponse><instancesSet>{item}</instancesSet></RunInstancesResponse>"
            ),
        )
    }

    const OWNED: &[(&str, &str)] = &[(OWNER, "host-a"), (REQUEST, "req-1")];

    fn request(id: &str, shape: NodeShape) -> ProvisionRequest {
        ProvisionRequest {
            request_id: id.into(),
            shape,
            boot: Default::default(),
            subnet: None,
        }
    }

    /// One attempt per call: the answer each test scripts is the one
    /// mapped (retries have their own test).
    fn settings() -> Settings {
        Settings {
            image_id: Some("ami-0abc".into()),
            max_attempts: 1,
            ..Settings::for_region("us-east-1")
        }
    }

    #[test]
    fn launch_settings_reach_run_instances() {
        let pairs: BTreeMap<&str, &str> = BTreeMap::from([
            ("region", "us-east-1"),
            ("image_id", "ami-0abc"),
            ("max_attempts", "1"),
            (
                "instance_profile",
                "arn:aws:iam::123456789012:instance-profile/nodes",
            ),
            (
                "tags",
                r#"{"team": "platform", "Name": "from-the-operator"}"#,
            ),
            (
                "block_device_mappings",
                r#"[{"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {"volumeSize": "20Gi", "volumeType": "io2", "iops": 4000, "encrypted": true, "kmsKeyID": "alias/nodes"}},
                    {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": 50, "throughput": 250, "deleteOnTermination": false}}]"#,
            ),
            ("metadata_options", r#"{"httpPutResponseHopLimit": 2}"#),
            ("detailed_monitoring", "true"),
            ("associate_public_ip_address", "false"),
            ("subnet_id", "subnet-1"),
            ("security_group_ids", "sg-1"),
        ]);
        let settings =
            Settings::from_lookup(|k| Ok(pairs.get(k).map(|v| (*v).to_string()))).unwrap();
        let script = Script::new(vec![
            page(&[], None),
            image("ami-0abc", "/dev/xvda", "ebs", 8),
            types("t3a.medium"),
            run(&item("i-0123456789abcdef0", "pending", OWNED, false)),
        ]);
        let client = Client::new(&settings, &script);
        let shape = NodeShape {
            disk_bytes: Some(100 << 30),
            ..NodeShape::new(2.0, 4 << 30)
        };
        client
            .provision("host-a", &request("req-1", shape))
            .unwrap();
        let r = &script.requests()[3];
        assert_eq!(r.action, "RunInstances");
        let want = [
            (
                "IamInstanceProfile.Arn",
                "arn:aws:iam::123456789012:instance-profile/nodes",
            ),
            ("MetadataOptions.HttpTokens", "required"),
            ("MetadataOptions.HttpPutResponseHopLimit", "2"),
            ("MetadataOptions.HttpEndpoint", "enabled"),
            ("Monitoring.Enabled", "true"),
            ("NetworkInterface.1.DeviceIndex", "0"),
            ("NetworkInterface.1.AssociatePublicIpAddress", "false"),
            ("NetworkInterface.1.SubnetId", "subnet-1"),
            ("NetworkInterface.1.SecurityGroupId.1", "sg-1"),
            // The root: the shape's 100 GiB over the configured 20.
            ("BlockDeviceMapping.1.DeviceName", "/dev/xvda"),
            ("BlockDeviceMapping.1.Ebs.VolumeSize", "100"),
            ("BlockDeviceMapping.1.Ebs.VolumeType", "io2"),
            ("BlockDeviceMapping.1.Ebs.Iops", "4000"),
            ("BlockDeviceMapping.1.Ebs.Encrypted", "true"),
            ("BlockDeviceMapping.1.Ebs.KmsKeyId", "alias/nodes"),
            ("BlockDeviceMapping.1.Ebs.DeleteOnTermination", "true"),
            ("BlockDeviceMapping.2.DeviceName", "/dev/xvdb"),
            ("BlockDeviceMapping.2.Ebs.VolumeSize", "50"),
            ("BlockDeviceMapping.2.Ebs.VolumeType", "gp3"),
            ("BlockDeviceMapping.2.Ebs.Throughput", "250"),
            ("BlockDeviceMapping.2.Ebs.DeleteOnTermination", "false"),
        ];
        for (k, v) in want {
            assert_eq!(r.get(k), Some(v), "{k}");
        }
        assert_eq!(r.get("SubnetId"), None, "with the network interface");
        assert_eq!(r.get("SecurityGroupId.1"), None);
        assert_eq!(r.get("BlockDeviceMapping.3.DeviceName"), None);
        // The operator's tags on instance and volumes; the plugin's win.
        let tags = |spec: u32| -> Vec<(String, String)> {
            (1..)
                .map_while(|n| {
                    Some((
                        r.get(&format!("TagSpecification.{spec}.Tag.{n}.Key"))?
                            .to_string(),
                        r.get(&format!("TagSpecification.{spec}.Tag.{n}.Value"))?
                            .to_string(),
                    ))
                })
                .collect()
        };
        let instance = tags(1);
        assert!(instance.contains(&("team".into(), "platform".into())));
        assert!(instance.contains(&("Name".into(), "wasmprov-req-1".into())));
        assert!(!instance.iter().any(|(_, v)| v == "from-the-operator"));
        let volume = tags(2);
        assert!(volume.contains(&("team".into(), "platform".into())));
        assert!(volume.contains(&(OWNER.into(), "host-a".into())));
    }

    #[test]
    fn throttles_and_5xx_are_retried_within_the_call() {
        let settings = Settings {
            max_attempts: 3,
            ..settings()
        };
        // Throttled, then a 500, then the answer: three attempts, waits of
        // jitter x 1 s and jitter x 2 s (the scripted jitter is 0.5).
        let script = Script::new(vec![
            err(503, "RequestLimitExceeded"),
            err(500, "InternalError"),
            page(&[], None),
        ]);
        let client = Client::new(&settings, &script);
        assert!(client.describe("o").unwrap().is_empty());
        assert_eq!(script.requests().len(), 3);
        assert_eq!(*script.slept.borrow(), [500, 1000]);
        // A smaller base (`retry_base_ms`) scales every wait.
        let quick = Settings {
            retry_base_ms: 40,
            ..settings.clone()
        };
        let script = Script::new(vec![
            err(503, "RequestLimitExceeded"),
            err(500, "InternalError"),
            page(&[], None),
        ]);
        assert!(
            Client::new(&quick, &script)
                .describe("o")
                .unwrap()
                .is_empty()
        );
        assert_eq!(*script.slept.borrow(), [20, 40]);
        // Retry-After wins over the backoff; the third failure is returned.
        let script = Script::new(vec![
            resp_with(503, &[("retry-after", "3")], "RequestLimitExceeded"),
            err(400, "Throttling"),
            err(400, "ThrottlingException"),
        ]);
        let client = Client::new(&settings, &script);
        assert!(matches!(
            client.describe("o"),
            Err(Error::RateLimited { .. })
        ));
        assert_eq!(*script.slept.borrow(), [3000, 1000]);
        // Errors that are not transient are not retried.
        for code in [
            "AuthFailure",
            "InvalidParameterValue",
            "IdempotentParameterMismatch",
        ] {
            let script = Script::new(vec![err(400, code)]);
            let client = Client::new(&settings, &script);
            assert!(client.describe("o").is_err());
            assert_eq!(script.requests().len(), 1, "{code}");
        }
        // A retry that could not end within the budget is not made.
        let tight = Settings {
            retry_budget_ms: 900,
            ..settings.clone()
        };
        let script = Script::new(vec![
            err(503, "RequestLimitExceeded"),
            err(503, "Unavailable"),
        ]);
        let client = Client::new(&tight, &script);
        assert!(client.describe("o").is_err());
        assert_eq!(
            script.requests().len(),
            2,
            "the 500 ms wait fits, the 1 s one does not"
        );
        // Nor one whose request would run past the budget: the next attempt
        // is counted as long as the last one took (a hang of 15 s with a
        // 20 s budget is not tried again).
        let slow = Script {
            request_ms: 15_000,
            ..Script::new(vec![err(503, "Unavailable"), err(503, "Unavailable")])
        };
        let client = Client::new(&settings, &slow);
        assert!(client.describe("o").is_err());
        assert_eq!(
            slow.requests().len(),
            1,
            "a second 15 s attempt would end past 20 s"
        );
        // No answer at all is retried too; RunInstances keeps its token.
        let script = Script {
            dynamic: Some(Box::new({
                let n = RefCell::new(0);
                move |_req: &ApiRequest| {
                    *n.borrow_mut() += 1;
                    if *n.borrow() == 1 {
                        err(503, "ServiceUnavailable")
                    } else {
                        page(&[], None)
                    }
                }
            })),
            ..Script::default()
        };
        let client = Client::new(&settings, &script);
        assert!(client.describe("o").unwrap().is_empty());
        assert_eq!(script.requests().len(), 2);
        assert!(
            script.logs.borrow()[0].contains("attempt=2"),
            "{:?}",
            script.logs.borrow()
        );
        // RunInstances: a throttle is retried, a 5xx is not (it may have
        // launched; the next provision finds the instance by its tags).
        for (answer, attempts, ok) in [
            (err(503, "RequestLimitExceeded"), 2, true),
            (err(500, "InternalError"), 1, false),
        ] {
            let script = Script::new(vec![
                page(&[], None),
                types("t3a.micro"),
                answer,
                run(&item("i-0123456789abcdef0", "pending", OWNED, false)),
            ]);
            let client = Client::new(&settings, &script);
            let got = client.provision("host-a", &request("req-1", NodeShape::new(1.0, 1 << 30)));
            assert_eq!(got.is_ok(), ok, "{got:?}");
            let runs = script
                .actions()
                .iter()
                .filter(|a| **a == "RunInstances")
                .count();
            assert_eq!(runs, attempts);
        }
    }

    #[test]
    fn provision_runs_one_tagged_instance() {
        let settings = Settings {
            subnet_id: Some("subnet-1".into()),
            security_group_ids: vec!["sg-1".into(), "sg-2".into()],
            key_name: Some("ops".into()),
            user_data: Some("#cloud-config\n".into()),
            ..settings()
        };
        let script = Script::new(vec![
            page(&[], None),
            types("t3a.micro"),
            run(&item("i-0123456789abcdef0", "pending", &[], false)),
        ]);
        let client = Client::new(&settings, &script);
        let mut shape = NodeShape::new(1.0, 1 << 30);
        shape.labels = Labels::from([("pool".to_string(), "a b".to_string())]);
        shape.zone = Some("us-east-1a".into());
        let req = request("req-1", shape);
        let h = client.provision("host-a", &req).unwrap();
        assert_eq!(h.provider_id, "i-0123456789abcdef0");
        assert_eq!(h.join_state, JoinState::Provisioning);
        assert_eq!(h.capacity_type, CapacityType::OnDemand);
        assert_eq!(h.address.as_deref(), Some("10.0.0.1"));
        // RunInstances sent no tags back: the handle has the ones asked for.
        assert_eq!(h.labels[OWNER], "host-a");
        assert_eq!(h.labels["pool"], "a b");

        assert_eq!(
            script.actions(),
            ["DescribeInstances", "DescribeInstanceTypes", "RunInstances"]
        );
        let reqs = script.requests();
        let lookup = &reqs[0];
        assert_eq!(lookup.get("Filter.1.Name"), Some("tag:wasmprov-owner"));
        assert_eq!(lookup.get("Filter.1.Value.1"), Some("host-a"));
        assert_eq!(lookup.get("Filter.2.Name"), Some("tag:wasmprov-request"));
        assert_eq!(lookup.get("Filter.2.Value.1"), Some("req-1"));
        assert_eq!(lookup.get("Filter.3.Name"), Some("instance-state-name"));
        assert_eq!(lookup.get("Filter.3.Value.1"), Some("pending"));
        assert_eq!(lookup.get("Filter.3.Value.5"), Some("stopped"));
        assert_eq!(lookup.get("Filter.3.Value.6"), None, "never terminated");
        assert_eq!(lookup.get("MaxResults"), Some("1000"));
        assert_eq!(reqs[1].get("InstanceType.1"), Some("t3a.micro"));
        let r = &reqs[2];
        assert_eq!(r.get("ImageId"), Some("ami-0abc"));
        assert_eq!(r.get("InstanceType"), Some("t3a.micro"));
        assert_eq!(r.get("MinCount"), Some("1"));
        assert_eq!(r.get("MaxCount"), Some("1"));
        assert_eq!(
            r.get("ClientToken"),
            Some(tagging::client_token("host-a", "req-1").as_str())
        );
        assert_eq!(r.get("Placement.AvailabilityZone"), Some("us-east-1a"));
        assert_eq!(r.get("SubnetId"), Some("subnet-1"));
        assert_eq!(r.get("SecurityGroupId.1"), Some("sg-1"));
        assert_eq!(r.get("SecurityGroupId.2"), Some("sg-2"));
        assert_eq!(r.get("KeyName"), Some("ops"));
        assert_eq!(r.get("UserData"), Some("I2Nsb3VkLWNvbmZpZwo="));
        assert_eq!(r.get("InstanceMarketOptions.MarketType"), None);
        assert_eq!(r.get("TagSpecification.1.ResourceType"), Some("instance"));
        let tag = |spec: u32, n: u32| {
            (
                r.get(&format!("TagSpecification.{spec}.Tag.{n}.Key")),
                r.get(&format!("TagSpecification.{spec}.Tag.{n}.Value")),
            )
        };
        assert_eq!(tag(1, 1), (Some(OWNER), Some("host-a")));
        assert_eq!(tag(1, 2), (Some(REQUEST), Some("req-1")));
        assert_eq!(tag(1, 3), (Some("pool"), Some("a b")));
        let digest = wasmprov_guest::tags::request_digest(&req);
        assert_eq!(
            tag(1, 4),
            (
                Some(wasmprov_guest::tags::REQUEST_DIGEST),
                Some(digest.as_str())
            )
        );
        assert_eq!(tag(1, 5), (Some("Name"), Some("wasmprov-req-1")));
        assert_eq!(tag(1, 6), (None, None));
        assert_eq!(r.get("TagSpecification.2.ResourceType"), Some("volume"));
        assert_eq!(tag(2, 1), (Some(OWNER), Some("host-a")));
        assert_eq!(tag(2, 2), (Some(REQUEST), Some("req-1")));
        assert_eq!(tag(2, 3), (None, None));
        let logs = script.logs.borrow();
        assert_eq!(logs.len(), 1);
        assert!(
            logs[0].contains("instance_id=i-0123456789abcdef0"),
            "{logs:?}"
        );
    }

    #[test]
    fn ssh_keys_become_a_key_pair_or_join_the_cloud_config() {
        use yaml_rust2::YamlLoader;
        const KEY: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPrq ops@laptop";
        const KEY2: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQAB second";
        let booting = |id: &str, keys: &[&str], user_data: Option<&str>| {
            let mut req = request(id, NodeShape::new(1.0, 1 << 30));
            req.boot.ssh_keys = keys.iter().map(ToString::to_string).collect();
            req.boot.user_data = user_data.map(|d| d.as_bytes().to_vec());
            req
        };
        let decoded = |r: &ApiRequest| {
            let b = base64::engine::general_purpose::STANDARD
                .decode(r.get("UserData").expect("user data"))
                .unwrap();
            String::from_utf8(b).unwrap()
        };
        let launched = || run(&item("i-0123456789abcdef0", "pending", &[], false));

        // One key: imported as a key pair named by its digest, and used.
        let settings = settings();
        let script = Script::new(vec![
            page(&[], None),
            types("t3a.micro"),
            resp(200, "<ImportKeyPairResponse/>"),
            launched(),
        ]);
        Client::new(&settings, &script)
            .provision("host-a", &booting("k1", &[KEY], None))
            .unwrap();
        let reqs = script.requests();
        let import = &reqs[2];
        assert_eq!(import.action, "ImportKeyPair");
        let name = tags::ssh_key_name(KEY);
        assert!(name.starts_with("wasmprov-") && name.len() == 25, "{name}");
        assert_eq!(import.get("KeyName"), Some(name.as_str()));
        let material = base64::engine::general_purpose::STANDARD
            .decode(import.get("PublicKeyMaterial").unwrap())
            .unwrap();
        assert_eq!(
            material, b"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPrq",
            "without the comment"
        );
        assert_eq!(reqs[3].get("KeyName"), Some(name.as_str()));
        assert_eq!(reqs[3].get("UserData"), None);

        // Imported before: the duplicate is the same key.
        let script = Script::new(vec![
            page(&[], None),
            types("t3a.micro"),
            err(400, "InvalidKeyPair.Duplicate"),
            launched(),
        ]);
        Client::new(&settings, &script)
            .provision("host-a", &booting("k2", &[KEY], None))
            .unwrap();
        assert_eq!(script.requests()[3].get("KeyName"), Some(name.as_str()));

        // Two keys, into the caller's #cloud-config; no key pair.
        let script = Script::new(vec![page(&[], None), types("t3a.micro"), launched()]);
        let theirs =
            "#cloud-config\npackages: [htop]\nssh_authorized_keys:\n  - ssh-ed25519 AAAA theirs\n";
        Client::new(&settings, &script)
            .provision("host-a", &booting("k3", &[KEY, KEY2], Some(theirs)))
            .unwrap();
        assert_eq!(
            script.actions(),
            ["DescribeInstances", "DescribeInstanceTypes", "RunInstances"]
        );
        let r = &script.requests()[2];
        assert_eq!(r.get("KeyName"), None);
        let doc = decoded(r);
        assert!(doc.starts_with("#cloud-config\n"), "{doc}");
        let y = &YamlLoader::load_from_str(&doc).unwrap()[0];
        assert_eq!(y["packages"][0].as_str(), Some("htop"));
        let keys: Vec<&str> = y["ssh_authorized_keys"]
            .as_vec()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        assert_eq!(keys, ["ssh-ed25519 AAAA theirs", KEY, KEY2]);

        // A configured key_name keeps the key-pair slot: the one key goes
        // into the configured user data.
        let with_pair = Settings {
            key_name: Some("ops".into()),
            user_data: Some("#cloud-config\nruncmd: [echo hi]\n".into()),
            ..settings.clone()
        };
        let script = Script::new(vec![page(&[], None), types("t3a.micro"), launched()]);
        Client::new(&with_pair, &script)
            .provision("host-a", &booting("k4", &[KEY], None))
            .unwrap();
        let r = &script.requests()[2];
        assert_eq!(r.get("KeyName"), Some("ops"));
        let y = &YamlLoader::load_from_str(&decoded(r)).unwrap()[0];
        assert_eq!(y["runcmd"][0].as_str(), Some("echo hi"));
        assert_eq!(y["ssh_authorized_keys"][0].as_str(), Some(KEY));

        // Keys beside a shell script cannot be added: refused, and nothing
        // is imported or launched.
        let script = Script::new(vec![page(&[], None)]);
        let e = Client::new(&settings, &script)
            .provision(
                "host-a",
                &booting("k5", &[KEY, KEY2], Some("#!/bin/sh\necho\n")),
            )
            .unwrap_err();
        match e {
            Error::Unsupported(m) => {
                assert!(
                    m.contains("2 SSH keys") && m.contains("#cloud-config"),
                    "{m}"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(script.actions(), ["DescribeInstances"]);

        // A key EC2 refuses is unsupported, and nothing is launched.
        let script = Script::new(vec![
            page(&[], None),
            types("t3a.micro"),
            err(400, "InvalidKey.Format"),
        ]);
        let e = Client::new(&settings, &script)
            .provision("host-a", &booting("k6", &[KEY], None))
            .unwrap_err();
        assert!(matches!(e, Error::Unsupported(_)), "{e:?}");
        assert_eq!(
            script.actions(),
            [
                "DescribeInstances",
                "DescribeInstanceTypes",
                "ImportKeyPair"
            ]
        );
    }

    #[test]
    fn spot_provision_asks_for_the_spot_market_and_logs_the_price() {
        let settings = settings();
        let spot_prices = resp(
            200,
            "<DescribeSpotPriceHistoryResponse><spotPriceHistorySet>\
             <item><availabilityZone>us-east-1a</availabilityZone><instanceType>g4dn.xlarge</instanceType><spotPrice>0.2000</spotPrice></item>\
             <item><availabilityZone>us-east-1b</availabilityZone><instanceType>g4dn.xlarge</instanceType><spotPrice>0.1800</spotPrice></item>\
             </spotPriceHistorySet></DescribeSpotPriceHistoryResponse>",
        );
        let script = Script::new(vec![
            page(&[], None),
            types("g4dn.xlarge"),
            spot_prices,
            run(&item("i-0123456789abcdef0", "pending", OWNED, true)),
        ]);
        let client = Client::new(&settings, &script);
        let shape = NodeShape {
            gpu: 1,
            gpu_vendor: Some("nvidia".into()),
            capacity_type: CapacityType::Spot,
            ..NodeShape::default()
        };
        let h = client
            .provision("host-a", &request("req-1", shape))
            .unwrap();
        assert_eq!(h.capacity_type, CapacityType::Spot);
        assert_eq!(h.labels.len(), 2, "tags from the response win");
        let reqs = script.requests();
        assert_eq!(reqs[2].action, "DescribeSpotPriceHistory");
        assert_eq!(reqs[2].get("InstanceType.1"), Some("g4dn.xlarge"));
        assert_eq!(reqs[2].get("StartTime"), Some("2023-11-14T22:13:20Z"));
        let r = &reqs[3];
        assert_eq!(r.get("InstanceType"), Some("g4dn.xlarge"));
        assert_eq!(r.get("InstanceMarketOptions.MarketType"), Some("spot"));
        assert_eq!(
            r.get("InstanceMarketOptions.SpotOptions.SpotInstanceType"),
            Some("one-time")
        );
        assert_eq!(r.get("Placement.AvailabilityZone"), None);
        let logs = script.logs.borrow();
        assert!(
            logs[0].contains("spot_usd=0.18") && logs[0].contains("zone=us-east-1b"),
            "{logs:?}"
        );

        // A failing price look-up does not stop the launch.
        let script = Script::new(vec![
            page(&[], None),
            types("t3a.micro"),
            err(403, "UnauthorizedOperation"),
            run(&item("i-0123456789abcdef0", "pending", OWNED, true)),
        ]);
        let client = Client::new(&settings, &script);
        let shape = NodeShape {
            capacity_type: CapacityType::Spot,
            ..NodeShape::default()
        };
        client
            .provision("host-a", &request("req-1", shape))
            .unwrap();
        assert!(script.logs.borrow()[0].starts_with("spot price unavailable"));
    }

    #[test]
    fn provision_returns_the_existing_instance() {
        let settings = settings();
        let script = Script::new(vec![page(
            &[
                item("i-00000000000000002", "stopped", OWNED, false),
                item("i-00000000000000009", "running", OWNED, false),
                item("i-00000000000000003", "running", OWNED, false),
                item("i-00000000000000001", "terminated", OWNED, false),
                item(
                    "i-00000000000000000",
                    "running",
                    &[(OWNER, "host-a")],
                    false,
                ),
            ],
            None,
        )]);
        let client = Client::new(&settings, &script);
        let h = client
            .provision("host-a", &request("req-1", NodeShape::default()))
            .unwrap();
        assert_eq!(h.provider_id, "i-00000000000000003");
        assert_eq!(h.join_state, JoinState::Joining);
        assert_eq!(script.requests().len(), 1);
        assert!(script.logs.borrow().is_empty());
    }

    #[test]
    fn provision_checks_before_it_launches() {
        // No image: nothing is launched.
        let no_image = Settings::for_region("us-east-1");
        let script = Script::new(vec![page(&[], None)]);
        let client = Client::new(&no_image, &script);
        assert!(matches!(
            client.provision("o", &request("r", NodeShape::default())),
            Err(Error::InvalidConfig(m)) if m.contains("image_id")
        ));
        assert_eq!(script.actions(), ["DescribeInstances"]);

        // A type EC2 does not know in the region.
        let settings = settings();
        let explicit = NodeShape {
            instance_type: Some("p3.2xlarge".into()),
            ..NodeShape::default()
        };
        for answer in [
            err(400, "InvalidInstanceType"),
            resp(
                200,
                "<DescribeInstanceTypesResponse><instanceTypeSet/></DescribeInstanceTypesResponse>",
            ),
        ] {
            let script = Script::new(vec![page(&[], None), answer]);
            let client = Client::new(&settings, &script);
            assert!(matches!(
                client.provision("o", &request("r", explicit.clone())),
                Err(Error::Unsupported(_))
            ));
            assert_eq!(script.requests().len(), 2);
        }

        // Shapes and labels refused without asking EC2 to launch anything.
        let bad_shapes = [
            NodeShape {
                gpu: 9,
                ..NodeShape::default()
            },
            NodeShape {
                zone: Some("eu-west-1a".into()),
                ..NodeShape::default()
            },
            NodeShape {
                labels: Labels::from([("aws:x".to_string(), "y".to_string())]),
                ..NodeShape::default()
            },
        ];
        for shape in bad_shapes {
            let script = Script::new(vec![page(&[], None)]);
            let client = Client::new(&settings, &script);
            assert!(matches!(
                client.provision("o", &request("r", shape)),
                Err(Error::Unsupported(_))
            ));
            assert_eq!(script.requests().len(), 1);
        }
    }

    #[test]
    fn provision_maps_run_instances_errors() {
        let settings = settings();
        let cases: Vec<(Response, bool, &str)> = vec![
            (err(500, "InsufficientInstanceCapacity"), false, "capacity"),
            (err(500, "InsufficientInstanceCapacity"), true, "capacity"),
            (err(400, "VcpuLimitExceeded"), false, "quota"),
            (err(400, "InvalidAMIID.NotFound"), false, "invalid_config"),
            (
                err(400, "InvalidSubnetID.NotFound"),
                false,
                "invalid_config",
            ),
            (err(503, "RequestLimitExceeded"), false, "rate_limited"),
            (err(401, "AuthFailure"), false, "auth"),
            (err(500, "InternalError"), false, "transport"),
            (resp(200, "<RunInstancesResponse/>"), false, "transport"),
            (resp(200, "garbage"), false, "transport"),
        ];
        for (answer, zoned, kind) in cases {
            let script = Script::new(vec![page(&[], None), types("t3a.micro"), answer]);
            let client = Client::new(&settings, &script);
            let shape = NodeShape {
                zone: zoned.then(|| "us-east-1c".to_string()),
                ..NodeShape::default()
            };
            let e = client.provision("o", &request("r", shape)).unwrap_err();
            assert_eq!(e.kind(), kind, "{e}");
            if let Error::Capacity { scope, .. } = e {
                let want = if zoned {
                    CapacityScope::Zone
                } else {
                    CapacityScope::InstanceType
                };
                assert_eq!(scope, want);
            }
        }
        // Errors of the idempotency look-up pass through before anything else.
        let script = Script::new(vec![err(401, "AuthFailure")]);
        let client = Client::new(&settings, &script);
        assert!(matches!(
            client.provision("o", &request("r", NodeShape::default())),
            Err(Error::Auth(_))
        ));
        assert_eq!(script.requests().len(), 1);
    }

    #[test]
    fn terminate_only_own_live_instances() {
        let settings = settings();
        let id = "i-0123456789abcdef0";
        let one = |state: &str, tags: &[(&str, &str)]| page(&[item(id, state, tags, false)], None);
        let terminated = resp(
            200,
            "<TerminateInstancesResponse><instancesSet><item><instanceId>i-0123456789abcdef0</instanceId></item></instancesSet></TerminateInstancesResponse>",
        );
        let script = Script::new(vec![one("running", OWNED), terminated]);
        let client = Client::new(&settings, &script);
        client.terminate("host-a", id).unwrap();
        assert_eq!(
            script.actions(),
            ["DescribeInstances", "TerminateInstances"]
        );
        let reqs = script.requests();
        assert_eq!(reqs[0].get("InstanceId.1"), Some(id));
        assert_eq!(reqs[0].get("MaxResults"), None, "not allowed with ids");
        assert_eq!(reqs[1].get("InstanceId.1"), Some(id));
        assert_eq!(script.logs.borrow().len(), 1);

        // Someone else's, untagged, already terminated, gone: not found, never terminated.
        let not_found = [
            (one("running", &[(OWNER, "host-b")]), "not owned"),
            (one("running", &[]), "not owned"),
            (one("terminated", OWNED), "already terminated"),
            (page(&[], None), "does not exist"),
            (err(400, "InvalidInstanceID.NotFound"), "does not exist"),
        ];
        for (answer, says) in not_found {
            let script = Script::new(vec![answer]);
            let client = Client::new(&settings, &script);
            match client.terminate("host-a", id) {
                Err(Error::NotFound(m)) => assert!(m.contains(says), "{m}"),
                other => panic!("{other:?}"),
            }
            assert_eq!(script.requests().len(), 1);
        }

        // Not an instance id at all: no request.
        let script = Script::new(vec![]);
        let client = Client::new(&settings, &script);
        for bad in [
            "",
            "abc",
            "i-xyz",
            "i-0123abcd&Action=RunInstances",
            "vol-0123abcd",
        ] {
            assert!(
                matches!(client.terminate("host-a", bad), Err(Error::NotFound(_))),
                "{bad}"
            );
        }
        assert!(script.requests().is_empty());

        // Other errors pass through; gone between the two calls is not found.
        let script = Script::new(vec![err(503, "RequestLimitExceeded")]);
        let client = Client::new(&settings, &script);
        assert!(matches!(
            client.terminate("host-a", id),
            Err(Error::RateLimited { .. })
        ));
        let script = Script::new(vec![
            one("running", OWNED),
            err(400, "InvalidInstanceID.NotFound"),
        ]);
        let client = Client::new(&settings, &script);
        assert!(matches!(
            client.terminate("host-a", id),
            Err(Error::NotFound(_))
        ));
        assert!(script.logs.borrow().is_empty());
    }

    #[test]
    fn describe_follows_next_token_and_filters() {
        let settings = Settings {
            page_size: 5,
            ..settings()
        };
        let mine = |id: &str, state: &str| item(id, state, &[(OWNER, "host-a")], false);
        let script = Script::new(vec![
            page(
                &[mine("i-00000001", "running"), mine("i-00000002", "pending")],
                Some("t1"),
            ),
            page(
                &[
                    mine("i-00000002", "pending"),
                    item("i-00000003", "running", &[(OWNER, "host-b")], false),
                    mine("i-00000004", "terminated"),
                    mine("i-00000005", "stopped"),
                ],
                Some("t2"),
            ),
            page(&[], None),
        ]);
        let client = Client::new(&settings, &script);
        let nodes = client.describe("host-a").unwrap();
        let ids: Vec<&str> = nodes.iter().map(|n| n.provider_id.as_str()).collect();
        assert_eq!(ids, ["i-00000001", "i-00000002", "i-00000005"]);
        assert_eq!(nodes[2].join_state, JoinState::Failed);
        let reqs = script.requests();
        assert_eq!(reqs.len(), 3);
        let tokens: Vec<Option<&str>> = reqs.iter().map(|r| r.get("NextToken")).collect();
        assert_eq!(tokens, [None, Some("t1"), Some("t2")]);
        for r in &reqs {
            assert_eq!(r.get("MaxResults"), Some("5"));
            assert_eq!(r.get("Filter.1.Name"), Some("tag:wasmprov-owner"));
            assert_eq!(r.get("Filter.1.Value.1"), Some("host-a"));
            assert_eq!(r.get("Filter.2.Name"), Some("instance-state-name"));
        }
    }

    #[test]
    fn describe_gives_up_on_endless_or_stuck_pagination() {
        let settings = settings();
        let endless = Script {
            dynamic: Some(Box::new(|req: &ApiRequest| {
                let n: u64 = req.get("NextToken").map_or(0, |t| t.parse().unwrap());
                page(&[], Some(&(n + 1).to_string()))
            })),
            ..Script::default()
        };
        let client = Client::new(&settings, &endless);
        assert!(matches!(client.describe("o"), Err(Error::Transport(_))));
        assert_eq!(endless.requests().len(), MAX_PAGES);

        let stuck = Script::new(vec![page(&[], Some("same")), page(&[], Some("same"))]);
        let client = Client::new(&settings, &stuck);
        assert!(matches!(client.describe("o"), Err(Error::Transport(_))));
        assert_eq!(stuck.requests().len(), 2);

        let wrong = Script::new(vec![run("")]);
        let client = Client::new(&settings, &wrong);
        assert!(matches!(client.describe("o"), Err(Error::Transport(_))));
        let auth = Script::new(vec![err(403, "UnauthorizedOperation")]);
        let client = Client::new(&settings, &auth);
        assert!(matches!(client.describe("o"), Err(Error::Auth(_))));
    }

    #[test]
    fn form_starts_with_action_and_version() {
        let r = ApiRequest::new("DescribeInstances")
            .filters(&[("a".into(), vec!["1".into(), "2".into()])])
            .param("MaxResults", "5");
        assert_eq!(
            r.form(),
            [
                ("Action".to_string(), "DescribeInstances".to_string()),
                ("Version".into(), "2016-11-15".into()),
                ("Filter.1.Name".into(), "a".into()),
                ("Filter.1.Value.1".into(), "1".into()),
                ("Filter.1.Value.2".into(), "2".into()),
                ("MaxResults".into(), "5".into()),
            ]
        );
    }

    /// A `DescribeInstanceTypes` item: name, architecture, GPU (vendor, name).
    fn type_item(name: &str, arch: &str, gpu: Option<(&str, &str)>) -> String {
        let gpu = gpu
            .map(|(vendor, model)| {
                format!(
                    "<gpuInfo><gpus><item><name>{model}</name><manufacturer>{vendor}</manufacturer><count>1</count></item></gpus></gpuInfo>"
                )
            })
            .unwrap_or_default();
        format!(
            "<item><instanceType>{name}</instanceType><processorInfo><supportedArchitectures><item>{arch}</item></supportedArchitectures></processorInfo>\
             <vCpuInfo><defaultVCpus>4</defaultVCpus></vCpuInfo><memoryInfo><sizeInMiB>16384</sizeInMiB></memoryInfo>{gpu}</item>"
        )
    }

    fn type_page(items: &[String], next: Option<&str>) -> Response {
        resp(
            200,
            &format!(
                "<DescribeInstanceTypesResponse><instanceTypeSet>{}</instanceTypeSet>{}</DescribeInstanceTypesResponse>",
                items.concat(),
                next.map(|n| format!("<nextToken>{n}</nextToken>"))
                    .unwrap_or_default()
            ),
        )
    }

    fn spot_page(prices: &[(&str, &str, &str)]) -> Response {
        let items: String = prices
            .iter()
            .map(|(t, z, p)| {
                format!(
                    "<item><instanceType>{t}</instanceType><availabilityZone>{z}</availabilityZone><productDescription>Linux/UNIX</productDescription><spotPrice>{p}</spotPrice></item>"
                )
            })
            .collect();
        resp(
            200,
            &format!(
                "<DescribeSpotPriceHistoryResponse><spotPriceHistorySet>{items}</spotPriceHistorySet></DescribeSpotPriceHistoryResponse>"
            ),
        )
    }

    fn image_of(id: &str, arch: &str) -> Response {
        resp(
            200,
            &format!(
                "<DescribeImagesResponse><imagesSet><item><imageId>{id}</imageId><architecture>{arch}</architecture><rootDeviceName>/dev/xvda</rootDeviceName><rootDeviceType>ebs</rootDeviceType></item></imagesSet></DescribeImagesResponse>"
            ),
        )
    }

    fn json_resp(status: u16, body: &str) -> Response {
        Response {
            status,
            headers: vec![("content-type".into(), "application/x-amz-json-1.1".into())],
            body: body.as_bytes().to_vec(),
            url: "https://api.pricing.us-east-1.amazonaws.com/".into(),
        }
    }

    fn image(id: &str, root: &str, kind: &str, snapshot_gib: u64) -> Response {
        resp(
            200,
            &format!(
                "<DescribeImagesResponse><imagesSet><item><imageId>{id}</imageId><rootDeviceName>{root}</rootDeviceName><rootDeviceType>{kind}</rootDeviceType>\
                 <blockDeviceMapping><item><deviceName>{root}</deviceName><ebs><volumeSize>{snapshot_gib}</volumeSize></ebs></item></blockDeviceMapping></item></imagesSet></DescribeImagesResponse>"
            ),
        )
    }

    #[test]
    fn disk_sizes_the_root_volume() {
        let settings = settings();
        let disk = |bytes: u64| NodeShape {
            disk_bytes: Some(bytes),
            ..NodeShape::new(2.0, 4 << 30)
        };
        // 100 GiB and a byte: 101 GiB, on the image's root device. The
        // image is described once, for its architecture and root device.
        let script = Script::new(vec![
            page(&[], None),
            image("ami-0abc", "/dev/xvda", "ebs", 8),
            types("t3a.medium"),
            run(&item("i-0123456789abcdef0", "pending", OWNED, false)),
        ]);
        let client = Client::new(&settings, &script);
        client
            .provision("host-a", &request("req-1", disk((100 << 30) + 1)))
            .unwrap();
        assert_eq!(
            script.actions(),
            [
                "DescribeInstances",
                "DescribeImages",
                "DescribeInstanceTypes",
                "RunInstances"
            ]
        );
        let reqs = script.requests();
        assert_eq!(reqs[1].get("ImageId.1"), Some("ami-0abc"));
        assert_eq!(
            reqs[2].get("InstanceType.1"),
            Some("t3a.medium"),
            "disk does not pick the type"
        );
        let r = &reqs[3];
        assert_eq!(r.get("BlockDeviceMapping.1.DeviceName"), Some("/dev/xvda"));
        assert_eq!(r.get("BlockDeviceMapping.1.Ebs.VolumeSize"), Some("101"));
        assert_eq!(r.get("BlockDeviceMapping.1.Ebs.VolumeType"), Some("gp3"));
        assert_eq!(
            r.get("BlockDeviceMapping.1.Ebs.DeleteOnTermination"),
            Some("true")
        );

        // A snapshot larger than the disk asked for sets the size.
        let script = Script::new(vec![
            page(&[], None),
            image("ami-0abc", "/dev/sda1", "ebs", 30),
            types("t3a.medium"),
            run(&item("i-0123456789abcdef0", "pending", OWNED, false)),
        ]);
        let client = Client::new(&settings, &script);
        client
            .provision("host-a", &request("req-1", disk(1)))
            .unwrap();
        let r = &script.requests()[3];
        assert_eq!(r.get("BlockDeviceMapping.1.DeviceName"), Some("/dev/sda1"));
        assert_eq!(r.get("BlockDeviceMapping.1.Ebs.VolumeSize"), Some("30"));

        // No disk: no mapping.
        let script = Script::new(vec![
            page(&[], None),
            types("t3a.medium"),
            run(&item("i-0123456789abcdef0", "pending", OWNED, false)),
        ]);
        let client = Client::new(&settings, &script);
        client
            .provision("host-a", &request("req-1", NodeShape::new(2.0, 4 << 30)))
            .unwrap();
        assert_eq!(
            script.requests()[1].get("BlockDeviceMapping.1.DeviceName"),
            None
        );

        // Over 16 TiB: refused before anything but the idempotency look-up.
        let script = Script::new(vec![page(&[], None)]);
        let client = Client::new(&settings, &script);
        match client.provision("o", &request("r", disk((16 << 40) + 1))) {
            Err(Error::Unsupported(m)) => assert!(m.contains("16 TiB"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(script.actions(), ["DescribeInstances"]);

        // An instance-store image cannot be sized; an image EC2 does not
        // describe is a configuration error; its errors pass through.
        let cases: Vec<(Response, &str)> = vec![
            (
                image("ami-0abc", "/dev/sda1", "instance-store", 10),
                "unsupported",
            ),
            (
                image("ami-0other", "/dev/sda1", "ebs", 10),
                "invalid_config",
            ),
            (err(400, "InvalidAMIID.NotFound"), "invalid_config"),
        ];
        for (answer, kind) in cases {
            let script = Script::new(vec![page(&[], None), answer, types("t3a.medium")]);
            let client = Client::new(&settings, &script);
            let e = client
                .provision("o", &request("r", disk(10 << 30)))
                .unwrap_err();
            assert_eq!(e.kind(), kind, "{e}");
            let actions = script.actions();
            assert!(!actions.contains(&"RunInstances"), "nothing launched");
            assert_eq!(actions[1], "DescribeImages");
        }
    }

    #[test]
    fn explicit_types_bind_architecture_and_gpu_model_by_ec2s_answer() {
        let settings = settings();
        let explicit = |name: &str, arch: Option<Arch>, model: Option<&str>| NodeShape {
            instance_type: Some(name.into()),
            arch,
            gpu: u32::from(model.is_some()),
            gpu_model: model.map(Into::into),
            ..NodeShape::default()
        };
        // A type the table does not know, checked against EC2's answer.
        let g6 = type_item("g6.xlarge", "x86_64", Some(("NVIDIA", "L4")));
        let script = Script::new(vec![
            page(&[], None),
            type_page(std::slice::from_ref(&g6), None),
            run(&item("i-0123456789abcdef0", "pending", OWNED, false)),
        ]);
        let client = Client::new(&settings, &script);
        let h = client
            .provision(
                "host-a",
                &request(
                    "req-1",
                    explicit("g6.xlarge", Some(Arch::X86_64), Some("NVIDIA-L4")),
                ),
            )
            .unwrap();
        assert_eq!(
            h.gpu_model.as_deref(),
            Some("nvidia-l4"),
            "from EC2's answer"
        );
        assert_eq!(script.actions().last(), Some(&"RunInstances"));
        assert_eq!(script.requests()[2].get("InstanceType"), Some("g6.xlarge"));

        let refused: Vec<(NodeShape, String)> = vec![
            (explicit("g6.xlarge", None, Some("nvidia-a100")), g6.clone()),
            (explicit("g6.xlarge", Some(Arch::Arm64), None), g6.clone()),
            (
                explicit("a1.large", Some(Arch::X86_64), None),
                type_item("a1.large", "arm64", None),
            ),
            (
                explicit("m8i.large", None, Some("nvidia-t4")),
                type_item("m8i.large", "x86_64", None),
            ),
        ];
        for (shape, answer) in refused {
            let script = Script::new(vec![page(&[], None), type_page(&[answer], None)]);
            let client = Client::new(&settings, &script);
            match client.provision("o", &request("r", shape.clone())) {
                Err(Error::Unsupported(m)) => {
                    assert!(m.contains("the shape asks for"), "{m}");
                }
                other => panic!("{shape:?}: {other:?}"),
            }
            // Table types are refused by the table, others by EC2's answer.
            assert!(
                !script.actions().contains(&"RunInstances"),
                "nothing launched"
            );
        }
        // A type the table does not know, of another architecture than the
        // image: refused by EC2's answer, before RunInstances.
        let script = Script::new(vec![
            page(&[], None),
            type_page(&[type_item("a1.large", "arm64", None)], None),
        ]);
        let client = Client::new(&settings, &script);
        match client.provision("o", &request("r", explicit("a1.large", None, None))) {
            Err(Error::Unsupported(m)) => {
                assert!(m.contains("image \"ami-0abc\" is x86_64"), "{m}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(script.requests().len(), 2, "nothing launched");

        // A table type that does not match is refused without asking EC2.
        let script = Script::new(vec![page(&[], None)]);
        let client = Client::new(&settings, &script);
        assert!(matches!(
            client.provision(
                "o",
                &request("r", explicit("t4g.micro", Some(Arch::X86_64), None))
            ),
            Err(Error::Unsupported(_))
        ));
        assert_eq!(script.requests().len(), 1);
    }

    #[test]
    fn get_asks_for_the_one_instance() {
        let settings = settings();
        let id = "i-0123456789abcdef0";
        let one = |state: &str, tags: &[(&str, &str)]| page(&[item(id, state, tags, false)], None);

        let script = Script::new(vec![one("stopped", OWNED)]);
        let client = Client::new(&settings, &script);
        let h = client.get("host-a", id).unwrap().unwrap();
        assert_eq!(h.provider_id, id);
        assert_eq!(h.status, NodeStatus::Stopped);
        assert_eq!(h.raw_state.as_deref(), Some("stopped"));
        assert_eq!(h.join_state, JoinState::Failed);
        let reqs = script.requests();
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].action, "DescribeInstances");
        assert_eq!(reqs[0].get("InstanceId.1"), Some(id));
        assert_eq!(reqs[0].get("Filter.1.Name"), None);

        // A terminated instance is still this owner's, deleted.
        let script = Script::new(vec![one("terminated", OWNED)]);
        let client = Client::new(&settings, &script);
        assert_eq!(
            client.get("host-a", id).unwrap().unwrap().status,
            NodeStatus::Deleted
        );

        // Another owner's, untagged, unknown or malformed ids: none.
        for answer in [
            one("running", &[(OWNER, "host-b")]),
            one("running", &[]),
            page(&[], None),
            err(400, "InvalidInstanceID.NotFound"),
            err(400, "InvalidInstanceID.Malformed"),
        ] {
            let script = Script::new(vec![answer]);
            let client = Client::new(&settings, &script);
            assert_eq!(client.get("host-a", id).unwrap(), None);
        }
        // Not an instance id: no request.
        let script = Script::new(vec![]);
        let client = Client::new(&settings, &script);
        assert_eq!(client.get("host-a", "vol-0123abcd").unwrap(), None);
        assert!(script.requests().is_empty());
        // Other errors pass through.
        let script = Script::new(vec![err(401, "AuthFailure")]);
        let client = Client::new(&settings, &script);
        assert!(matches!(client.get("host-a", id), Err(Error::Auth(_))));
    }

    #[test]
    fn offerings_are_every_current_type_of_the_image_architecture() {
        // architecture = any: the image (x86_64) decides.
        let settings = Settings {
            architecture: None,
            ..settings()
        };
        let script = Script::new(vec![
            image_of("ami-0abc", "x86_64"),
            type_page(
                &[
                    type_item("g5.xlarge", "x86_64", Some(("NVIDIA", "A10G"))),
                    type_item("m7i.large", "x86_64", None),
                    // Not what was asked for: left out all the same.
                    type_item("t4g.medium", "arm64", None),
                ],
                Some("p2"),
            ),
            type_page(
                &[
                    type_item("t3a.medium", "x86_64", None),
                    type_item("x9.new", "x86_64", None),
                ],
                None,
            ),
            spot_page(&[
                ("g5.xlarge", "us-east-1a", "0.45"),
                ("g5.xlarge", "us-east-1b", "0.41"),
                ("t3a.medium", "us-east-1a", "0.012"),
            ]),
        ]);
        let client = Client::new(&settings, &script);
        let offered = client.offerings().unwrap();
        assert_eq!(
            script.actions(),
            [
                "DescribeImages",
                "DescribeInstanceTypes",
                "DescribeInstanceTypes",
                "DescribeSpotPriceHistory"
            ]
        );
        let reqs = script.requests();
        assert_eq!(reqs[0].get("ImageId.1"), Some("ami-0abc"));
        // Every current type of the architecture, not names.
        let types = &reqs[1];
        assert_eq!(types.get("InstanceType.1"), None);
        assert_eq!(types.get("Filter.1.Name"), Some("current-generation"));
        assert_eq!(types.get("Filter.1.Value.1"), Some("true"));
        assert_eq!(
            types.get("Filter.2.Name"),
            Some("processor-info.supported-architecture")
        );
        assert_eq!(types.get("Filter.2.Value.1"), Some("x86_64"));
        assert_eq!(types.get("MaxResults"), Some("100"));
        assert_eq!(types.get("NextToken"), None);
        assert_eq!(reqs[2].get("NextToken"), Some("p2"));
        let spot = &reqs[3];
        assert_eq!(spot.get("ProductDescription.1"), Some("Linux/UNIX"));
        assert_eq!(spot.get("StartTime"), Some("2023-11-14T22:13:20Z"));
        assert_eq!(spot.get("InstanceType.1"), Some("g5.xlarge"));
        assert_eq!(spot.get("InstanceType.5"), None);

        let names: Vec<&str> = offered.iter().map(|o| o.instance_type.as_str()).collect();
        assert_eq!(names, ["g5.xlarge", "m7i.large", "t3a.medium", "x9.new"]);
        let g5 = &offered[0];
        assert_eq!(g5.gpu, 1);
        assert_eq!(g5.gpu_vendor.as_deref(), Some("nvidia"));
        assert_eq!(g5.gpu_model.as_deref(), Some("nvidia-a10g"));
        assert_eq!(g5.arch, Some(Arch::X86_64));
        assert_eq!((g5.cpu, g5.memory_bytes), (4.0, 16 << 30));
        assert_eq!(g5.on_demand_usd, Some(1.006));
        assert_eq!(g5.spot_usd, Some(0.41), "the lowest zone's");
        assert_eq!(
            g5.disk_bytes,
            Some(catalogue::MAX_ROOT_VOLUME_BYTES),
            "sized per request"
        );
        assert_eq!(offered[1].on_demand_usd, Some(0.1008));
        assert_eq!(offered[1].spot_usd, None, "none published");
        assert_eq!(offered[2].spot_usd, Some(0.012));
        // A type the table does not price is offered, its price unknown.
        assert_eq!(offered[3].on_demand_usd, None);

        // An image of another architecture than configured: a clear error.
        let script = Script::new(vec![image_of("ami-0abc", "arm64")]);
        let settings = self::settings();
        let client = Client::new(&settings, &script);
        match client.offerings() {
            Err(Error::InvalidConfig(m)) => {
                assert!(m.contains("ami-0abc") && m.contains("arm64"), "{m}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(script.requests().len(), 1);
    }

    #[test]
    fn the_price_list_prices_what_the_table_does_not() {
        let settings = Settings {
            price_list_endpoint: Some("https://api.pricing.us-east-1.amazonaws.com".into()),
            instance_types: Some(vec!["m7g.large".into(), "x9.new".into()]),
            architecture: None,
            image_id: None,
            ..Settings::for_region("eu-central-1")
        };
        let product = |name: &str, usd: &str| {
            serde_json::json!({
                "product": {"attributes": {"instanceType": name}},
                "terms": {"OnDemand": {"T": {"priceDimensions": {"D": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}}
            })
            .to_string()
        };
        let script = Script::new(vec![
            type_page(
                &[
                    type_item("m7g.large", "arm64", None),
                    type_item("x9.new", "x86_64", None),
                ],
                None,
            ),
            json_resp(429, r#"{"__type": "ThrottlingException", "message": "slow down"}"#),
            json_resp(
                200,
                &serde_json::json!({"PriceList": [product("m7g.large", "0.0956")], "NextToken": "n2"}).to_string(),
            ),
            json_resp(
                200,
                &serde_json::json!({"PriceList": [product("x9.new", "1.5")]}).to_string(),
            ),
            spot_page(&[]),
        ]);
        let client = Client::new(&settings, &script);
        let offered = client.offerings().unwrap();
        let prices: Vec<Option<f64>> = offered.iter().map(|o| o.on_demand_usd).collect();
        assert_eq!(prices, [Some(0.0956), Some(1.5)]);
        let calls = script.json.borrow();
        assert_eq!(
            calls.len(),
            3,
            "one retry after the throttle, then two pages"
        );
        assert!(
            calls
                .iter()
                .all(|c| c.api == JsonApi::Pricing && c.target == pricing::TARGET)
        );
        assert!(
            calls[0].body.contains("m7g.large,x9.new"),
            "{}",
            calls[0].body
        );
        assert!(
            calls[2].body.contains("\"NextToken\":\"n2\""),
            "{}",
            calls[2].body
        );
        assert!(
            script
                .logs
                .borrow()
                .iter()
                .any(|l| l.starts_with("retrying"))
        );
    }

    #[test]
    fn offerings_leave_out_types_ec2_does_not_offer_and_survive_spot_failures() {
        // Only the allowed types are asked for; a type EC2 does not know
        // fails its call as a whole, which is split until it is found.
        let settings = Settings {
            instance_types: Some(vec![
                "t3a.medium".into(),
                "x9.huge".into(),
                "m7i.large".into(),
                "t3a.medium".into(),
            ]),
            ..Settings::for_region("ap-south-1")
        };
        let dynamic: Responder = Box::new(|req: &ApiRequest| {
            let names: Vec<&str> = (1..)
                .map_while(|n| req.get(&format!("InstanceType.{n}")))
                .collect();
            match req.action {
                "DescribeInstanceTypes" if names.contains(&"x9.huge") => {
                    err(400, "InvalidInstanceType")
                }
                "DescribeInstanceTypes" => type_page(
                    &names
                        .iter()
                        .map(|n| type_item(n, "x86_64", None))
                        .collect::<Vec<_>>(),
                    None,
                ),
                _ => err(403, "UnauthorizedOperation"),
            }
        });
        let script = Script {
            dynamic: Some(dynamic),
            ..Script::default()
        };
        let client = Client::new(&settings, &script);
        let offered = client.offerings().unwrap();
        let names: Vec<&str> = offered.iter().map(|o| o.instance_type.as_str()).collect();
        assert_eq!(names, ["m7i.large", "t3a.medium"], "by name");
        // Unpriced region: no on-demand price, as price_hint answers none.
        assert!(offered.iter().all(|o| o.on_demand_usd.is_none()));
        assert!(offered.iter().all(|o| o.spot_usd.is_none()));
        let asked: Vec<usize> = script
            .requests()
            .iter()
            .filter(|r| r.action == "DescribeInstanceTypes")
            .map(|r| {
                (1..)
                    .map_while(|n| r.get(&format!("InstanceType.{n}")))
                    .count()
            })
            .collect();
        assert_eq!(
            asked,
            [3, 1, 2, 1, 1],
            "halves until the unknown type is alone"
        );
        assert_eq!(client.describe_types(&[]).unwrap(), []);
        assert!(
            script.logs.borrow()[0].starts_with("spot prices unavailable"),
            "{:?}",
            script.logs.borrow()
        );

        // When EC2's message names the unknown types, they are left out at once.
        let settings = Settings {
            instance_types: Some(vec![
                "t3a.medium".into(),
                "x9.huge".into(),
                "m7i.large".into(),
                "x9.huger".into(),
            ]),
            ..self::settings()
        };
        let script = Script::new(vec![
            resp(
                400,
                "<Response><Errors><Error><Code>InvalidInstanceType</Code><Message>The following supplied instance types do not exist: [x9.huge, x9.huger]</Message></Error></Errors></Response>",
            ),
            type_page(
                &[
                    type_item("t3a.medium", "x86_64", None),
                    type_item("m7i.large", "x86_64", None),
                ],
                None,
            ),
            spot_page(&[]),
        ]);
        let client = Client::new(&settings, &script);
        assert_eq!(client.offerings().unwrap().len(), 2);
        let reqs = script.requests();
        assert_eq!(reqs.len(), 3);
        assert_eq!(reqs[1].get("InstanceType.1"), Some("t3a.medium"));
        assert_eq!(reqs[1].get("InstanceType.2"), Some("m7i.large"));
        assert_eq!(reqs[1].get("InstanceType.3"), None);
        for (message, name, named) in [
            ("do not exist: [p3.2xlarge]", "p3.2xlarge", true),
            ("do not exist: [p3.2xlarge, g5.xlarge]", "g5.xlarge", true),
            ("Type t3.micro.", "t3.micro", true),
            ("do not exist: [g5.xlarge2]", "g5.xlarge", false),
            ("do not exist: [xg5.xlarge]", "g5.xlarge", false),
        ] {
            assert_eq!(names_type(message, name), named, "{message} {name}");
        }

        // More types than one call takes: calls of 100.
        let many: Vec<String> = (0..150).map(|n| format!("z{n}.large")).collect();
        let settings = Settings {
            instance_types: Some(many),
            image_id: None,
            ..self::settings()
        };
        let script = Script {
            dynamic: Some(Box::new(|req: &ApiRequest| match req.action {
                "DescribeInstanceTypes" => type_page(&[], None),
                _ => spot_page(&[]),
            })),
            ..Script::default()
        };
        let client = Client::new(&settings, &script);
        assert!(client.offerings().unwrap().is_empty());
        let reqs = script.requests();
        assert_eq!(reqs.len(), 2, "no spot call for no types");
        assert_eq!(reqs[0].get("InstanceType.100"), Some("z99.large"));
        assert_eq!(reqs[0].get("InstanceType.101"), None);
        assert_eq!(reqs[1].get("InstanceType.1"), Some("z100.large"));
        assert_eq!(reqs[1].get("InstanceType.50"), Some("z149.large"));

        // Errors other than an unknown type pass through.
        let script = Script::new(vec![err(401, "AuthFailure")]);
        let settings = self::settings();
        let client = Client::new(&settings, &script);
        assert!(matches!(client.offerings(), Err(Error::Auth(_))));
    }

    #[test]
    fn iso8601_dates() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(1_440_938_160), "2015-08-30T12:36:00Z");
        assert_eq!(iso8601(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso8601(1_709_251_199), "2024-02-29T23:59:59Z");
    }
}
