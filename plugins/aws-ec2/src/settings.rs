//! The plugin's configuration, read from the manifest's `[config]`, and its
//! credentials, read from `[secrets]`, both through `wasi:config/store`.
//!
//! Only `region` is required to price; `image_id` is required to provision.
//! The credentials are not part of [`Settings`]: they are read only by the
//! calls that talk to the API, and never printed.

use wasmprov_guest::{Error, Result};

/// Default (and largest) `MaxResults` of `DescribeInstances`.
pub const DEFAULT_PAGE_SIZE: u32 = 1000;
/// Smallest `MaxResults` EC2 accepts for `DescribeInstances`.
pub const MIN_PAGE_SIZE: u32 = 5;
/// Default spot price estimate, as a fraction of the on-demand price.
pub const DEFAULT_SPOT_DISCOUNT: f64 = 0.35;
/// Default attempts of one API call (the AWS standard retry mode's).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// Default time a call may spend before it stops retrying, in milliseconds:
/// under the host's default call timeout (30 s).
pub const DEFAULT_RETRY_BUDGET_MS: u64 = 20_000;
/// Default bound of the first retry's jittered delay, in milliseconds (the
/// AWS standard retry mode's base of one second; each retry doubles it).
pub const DEFAULT_RETRY_BASE_MS: u64 = 1_000;
/// Largest `user_data` EC2 accepts: 16 KiB before base64 encoding.
pub const MAX_USER_DATA: usize = 16 * 1024;

/// CPU architecture of an instance type (and of the AMI it must match).
pub use wasmprov_guest::Arch;

/// Parses an architecture as EC2 and operators write it: `x86_64`, `arm64`
/// (also `x86`, `amd64`, `arm`, `aarch64`).
#[must_use]
pub fn parse_arch(s: &str) -> Option<Arch> {
    match s.trim().to_ascii_lowercase().as_str() {
        "x86" => Some(Arch::X86_64),
        "arm" => Some(Arch::Arm64),
        other => other.parse().ok(),
    }
}

/// Configuration of one call.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// The AWS region, e.g. `us-east-1`.
    pub region: String,
    /// EC2 endpoint without a trailing slash.
    pub endpoint: String,
    /// AMI instances are created from (required by `provision` unless the
    /// request names an image).
    pub image_id: Option<String>,
    /// Subnet to launch into; the default VPC's default subnet when unset.
    pub subnet_id: Option<String>,
    /// Security groups of new instances.
    pub security_group_ids: Vec<String>,
    /// EC2 key pair name for SSH.
    pub key_name: Option<String>,
    /// User data, as written (the plugin base64-encodes it when sending),
    /// for requests that carry none.
    pub user_data: Option<String>,
    /// When set, only these instance types are used (by size or explicitly).
    pub instance_types: Option<Vec<String>>,
    /// Architecture types are picked by size from; `None` allows both.
    /// An explicit instance type in a shape is always honoured.
    pub architecture: Option<Arch>,
    /// Spot price estimate as a fraction of on-demand.
    pub spot_discount: f64,
    /// `MaxResults` of `DescribeInstances`.
    pub page_size: u32,
    /// The AWS Price List API to price types the table does not, when set
    /// (its host must be granted too).
    pub price_list_endpoint: Option<String>,
    /// Systems Manager, for AMI selector terms by SSM parameter or alias.
    pub ssm_endpoint: String,
    /// Elastic Load Balancing v2, for target group membership.
    pub elb_endpoint: String,
    /// Attempts of one API call (1 = no retries).
    pub max_attempts: u32,
    /// How long a call may run before it stops retrying, in milliseconds.
    pub retry_budget_ms: u64,
    /// Bound of the first retry's jittered delay, in milliseconds; each
    /// further retry doubles it (a `Retry-After` the cloud asks for wins).
    pub retry_base_ms: u64,
    /// Launch settings with the meaning of Karpenter's `EC2NodeClass`.
    pub launch: crate::launch::Launch,
}

impl Settings {
    /// Defaults for `region`.
    #[must_use]
    pub fn for_region(region: &str) -> Self {
        Self {
            region: region.to_string(),
            endpoint: default_endpoint(region),
            image_id: None,
            subnet_id: None,
            security_group_ids: Vec::new(),
            key_name: None,
            user_data: None,
            instance_types: None,
            architecture: Some(Arch::X86_64),
            spot_discount: DEFAULT_SPOT_DISCOUNT,
            page_size: DEFAULT_PAGE_SIZE,
            price_list_endpoint: None,
            ssm_endpoint: default_ssm_endpoint(region),
            elb_endpoint: default_elb_endpoint(region),
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            retry_budget_ms: DEFAULT_RETRY_BUDGET_MS,
            retry_base_ms: DEFAULT_RETRY_BASE_MS,
            launch: crate::launch::Launch::default(),
        }
    }

    /// Reads the settings through `lookup` (the config store in the
    /// component, a map in tests). Unset and empty keys take their defaults.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the key that is missing or wrong, or
    /// the error `lookup` returned.
    pub fn from_lookup(lookup: impl Fn(&str) -> Result<Option<String>>) -> Result<Self> {
        let get = |key: &str| -> Result<Option<String>> {
            Ok(lookup(key)?
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()))
        };
        let region = get("region")?.ok_or_else(|| {
            Error::InvalidConfig(
                "config key \"region\" is required; set it in the plugin's manifest (e.g. region = \"us-east-1\")"
                    .into(),
            )
        })?;
        if !is_region_name(&region) {
            return Err(invalid(
                "region",
                &region,
                "not an AWS region name like us-east-1",
            ));
        }
        let mut s = Self::for_region(&region);

        if let Some(v) = get("endpoint")? {
            s.endpoint = endpoint("endpoint", &v)?;
        }
        if let Some(v) = get("price_list_endpoint")? {
            s.price_list_endpoint = Some(endpoint("price_list_endpoint", &v)?);
        }
        if let Some(v) = get("ssm_endpoint")? {
            s.ssm_endpoint = endpoint("ssm_endpoint", &v)?;
        }
        if let Some(v) = get("elb_endpoint")? {
            s.elb_endpoint = endpoint("elb_endpoint", &v)?;
        }
        if let Some(v) = get("max_attempts")? {
            match v.parse::<u32>() {
                Ok(n) if (1..=10).contains(&n) => s.max_attempts = n,
                _ => {
                    return Err(invalid(
                        "max_attempts",
                        &v,
                        "must be a whole number from 1 (no retries) to 10",
                    ));
                }
            }
        }
        if let Some(v) = get("retry_budget_ms")? {
            match v.parse::<u64>() {
                Ok(n) if n <= 600_000 => s.retry_budget_ms = n,
                _ => {
                    return Err(invalid(
                        "retry_budget_ms",
                        &v,
                        "must be milliseconds from 0 (no retries) to 600000",
                    ));
                }
            }
        }
        if let Some(v) = get("retry_base_ms")? {
            match v.parse::<u64>() {
                Ok(n) if (1..=20_000).contains(&n) => s.retry_base_ms = n,
                _ => {
                    return Err(invalid(
                        "retry_base_ms",
                        &v,
                        "must be milliseconds from 1 to 20000",
                    ));
                }
            }
        }
        s.image_id = get("image_id")?;
        s.launch = crate::launch::Launch::from_lookup(get)?;
        s.subnet_id = get("subnet_id")?;
        s.key_name = get("key_name")?;
        if let Some(v) = get("security_group_ids")? {
            s.security_group_ids = split_list(&v);
        }
        if let Some(v) = get("instance_types")? {
            let list = split_list(&v);
            if list.is_empty() {
                return Err(invalid(
                    "instance_types",
                    &v,
                    "must name at least one instance type",
                ));
            }
            s.instance_types = Some(list);
        }
        if let Some(v) = get("architecture")? {
            s.architecture =
                if v.eq_ignore_ascii_case("any") {
                    None
                } else {
                    Some(parse_arch(&v).ok_or_else(|| {
                        invalid("architecture", &v, "must be x86_64, arm64 or any")
                    })?)
                };
        }
        // user_data is passed as written (only surrounding whitespace is
        // ignored when deciding whether it is set).
        if let Some(raw) = lookup("user_data")?
            && !raw.trim().is_empty()
        {
            if raw.len() > MAX_USER_DATA {
                return Err(Error::InvalidConfig(format!(
                    "config key \"user_data\" is {} bytes; EC2 accepts at most {MAX_USER_DATA} before base64",
                    raw.len()
                )));
            }
            s.user_data = Some(raw);
        }
        if let Some(v) = get("spot_discount")? {
            match v.parse::<f64>() {
                Ok(d) if d.is_finite() && d > 0.0 && d <= 1.0 => s.spot_discount = d,
                _ => {
                    return Err(invalid(
                        "spot_discount",
                        &v,
                        "must be a number in (0, 1], like 0.35 (35 % of on-demand)",
                    ));
                }
            }
        }
        if let Some(v) = get("page_size")? {
            match v.parse::<u32>() {
                Ok(n) if (MIN_PAGE_SIZE..=DEFAULT_PAGE_SIZE).contains(&n) => s.page_size = n,
                _ => {
                    return Err(invalid(
                        "page_size",
                        &v,
                        "must be an integer from 5 to 1000",
                    ));
                }
            }
        }
        Ok(s)
    }

    /// The AMI, which `provision` needs.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when `image_id` is not set.
    pub fn require_image(&self) -> Result<&str> {
        self.image_id.as_deref().ok_or_else(|| {
            Error::InvalidConfig(
                "config key \"image_id\" (or \"ami_selector_terms\") is required to provision; set it to an AMI id of the region"
                    .into(),
            )
        })
    }
}

/// `https://ec2.<region>.amazonaws.com` (`.amazonaws.com.cn` in China).
#[must_use]
pub fn default_endpoint(region: &str) -> String {
    if region.starts_with("cn-") {
        format!("https://ec2.{region}.amazonaws.com.cn")
    } else {
        format!("https://ec2.{region}.amazonaws.com")
    }
}

/// `https://ssm.<region>.amazonaws.com` (`.amazonaws.com.cn` in China).
#[must_use]
pub fn default_ssm_endpoint(region: &str) -> String {
    default_endpoint(region).replacen("https://ec2.", "https://ssm.", 1)
}

/// `https://elasticloadbalancing.<region>.amazonaws.com` (`.amazonaws.com.cn`
/// in China).
#[must_use]
pub fn default_elb_endpoint(region: &str) -> String {
    default_endpoint(region).replacen("https://ec2.", "https://elasticloadbalancing.", 1)
}

/// An endpoint as configured under `key`: `http(s)://`, no query or
/// fragment, without a trailing `/`.
fn endpoint(key: &str, v: &str) -> Result<String> {
    let lower = v.to_ascii_lowercase();
    if !(lower.starts_with("https://") || lower.starts_with("http://")) {
        return Err(invalid(key, v, "must start with https:// or http://"));
    }
    if v.contains(['?', '#']) {
        return Err(invalid(key, v, "must not contain a query or fragment"));
    }
    Ok(v.trim_end_matches('/').to_string())
}

/// Whether `s` looks like a region name: lowercase words joined by `-`,
/// ending in a number (`us-east-1`, `us-gov-west-1`, `ap-southeast-5`).
#[must_use]
pub fn is_region_name(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() >= 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        })
        && parts[0].chars().all(|c| c.is_ascii_lowercase())
        && parts
            .last()
            .is_some_and(|p| p.chars().all(|c| c.is_ascii_digit()))
}

fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(str::to_string)
        .collect()
}

fn invalid(key: &str, value: &str, why: &str) -> Error {
    Error::InvalidConfig(format!("config key {key:?} has value {value:?}: {why}"))
}

/// AWS credentials, from the manifest's `[secrets]`.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// `AKIA…` or, with a session token, `ASIA…`.
    pub access_key_id: String,
    /// The secret key.
    pub secret_access_key: String,
    /// Session token of temporary credentials (`X-Amz-Security-Token`).
    pub session_token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    /// Shows the key id only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl Credentials {
    /// Reads `access_key_id`, `secret_access_key` and the optional
    /// `session_token` through `lookup`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming a missing key.
    pub fn from_lookup(lookup: impl Fn(&str) -> Result<Option<String>>) -> Result<Self> {
        let get = |key: &str| -> Result<Option<String>> {
            Ok(lookup(key)?
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty()))
        };
        let need = |key: &str| -> Result<String> {
            get(key)?.ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "secret {key:?} is required; add it to the manifest's [secrets] (e.g. {key} = {{ env = \"AWS_{}\" }}) and set the variable",
                    key.to_ascii_uppercase()
                ))
            })
        };
        Ok(Self {
            access_key_id: need("access_key_id")?,
            secret_access_key: need("secret_access_key")?,
            session_token: get("session_token")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn lookup(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Result<Option<String>> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        move |k| Ok(map.get(k).cloned())
    }

    fn load(pairs: &[(&str, &str)]) -> Result<Settings> {
        Settings::from_lookup(lookup(pairs))
    }

    #[test]
    fn region_is_required_and_sets_the_endpoint() {
        assert!(matches!(load(&[]), Err(Error::InvalidConfig(m)) if m.contains("region")));
        let s = load(&[("region", "eu-west-1")]).unwrap();
        assert_eq!(s, Settings::for_region("eu-west-1"));
        assert_eq!(s.endpoint, "https://ec2.eu-west-1.amazonaws.com");
        assert_eq!(s.page_size, 1000);
        assert!((s.spot_discount - 0.35).abs() < 1e-12);
        assert_eq!(s.architecture, Some(Arch::X86_64));
        assert_eq!(
            load(&[("region", "cn-north-1")]).unwrap().endpoint,
            "https://ec2.cn-north-1.amazonaws.com.cn"
        );
        assert_eq!(
            s.elb_endpoint,
            "https://elasticloadbalancing.eu-west-1.amazonaws.com"
        );
        assert_eq!(
            load(&[
                ("region", "cn-north-1"),
                ("elb_endpoint", "http://127.0.0.1:9/")
            ])
            .unwrap()
            .elb_endpoint,
            "http://127.0.0.1:9"
        );
        for ok in [
            "us-east-1",
            "us-gov-west-1",
            "ap-southeast-5",
            "il-central-1",
        ] {
            assert!(is_region_name(ok), "{ok}");
        }
        for bad in [
            "us-east",
            "US-EAST-1",
            "us_east_1",
            "1-east-1",
            "us--1",
            "ec2",
        ] {
            assert!(!is_region_name(bad), "{bad}");
        }
        assert!(s.require_image().is_err());
    }

    #[test]
    fn values_are_read_and_normalised() {
        let s = load(&[
            ("region", "us-east-1"),
            ("endpoint", "http://127.0.0.1:5000/"),
            ("image_id", "ami-0123"),
            ("subnet_id", "subnet-1"),
            ("security_group_ids", " sg-1, sg-2 ,,"),
            ("key_name", "ops"),
            ("user_data", "#cloud-config\n"),
            ("instance_types", "t3.micro,g4dn.xlarge"),
            ("architecture", "any"),
            ("spot_discount", "0.5"),
            ("page_size", "5"),
        ])
        .unwrap();
        assert_eq!(s.endpoint, "http://127.0.0.1:5000");
        assert_eq!(s.require_image().unwrap(), "ami-0123");
        assert_eq!(s.subnet_id.as_deref(), Some("subnet-1"));
        assert_eq!(s.security_group_ids, ["sg-1", "sg-2"]);
        assert_eq!(s.key_name.as_deref(), Some("ops"));
        assert_eq!(s.user_data.as_deref(), Some("#cloud-config\n"));
        assert_eq!(
            s.instance_types.as_deref(),
            Some(&["t3.micro".to_string(), "g4dn.xlarge".to_string()][..])
        );
        assert_eq!(s.architecture, None);
        assert!((s.spot_discount - 0.5).abs() < 1e-12);
        assert_eq!(s.page_size, 5);
        assert_eq!(
            load(&[("region", "us-east-1"), ("architecture", "ARM64")])
                .unwrap()
                .architecture,
            Some(Arch::Arm64)
        );
    }

    #[test]
    fn bad_values_name_the_key() {
        let cases = [
            ("region", "nowhere"),
            ("endpoint", "ec2.us-east-1.amazonaws.com"),
            ("endpoint", "https://x/?a=b"),
            ("instance_types", " , "),
            ("architecture", "riscv"),
            ("spot_discount", "0"),
            ("spot_discount", "1.5"),
            ("spot_discount", "NaN"),
            ("page_size", "4"),
            ("page_size", "1001"),
            ("page_size", "many"),
            ("price_list_endpoint", "pricing.example"),
            ("ssm_endpoint", "https://x/#f"),
            (
                "elb_endpoint",
                "elasticloadbalancing.us-east-1.amazonaws.com",
            ),
            ("max_attempts", "0"),
            ("max_attempts", "11"),
            ("retry_budget_ms", "-1"),
            ("retry_base_ms", "0"),
            ("retry_base_ms", "20001"),
        ];
        for (key, value) in cases {
            let mut pairs = vec![(key, value)];
            if key != "region" {
                pairs.push(("region", "us-east-1"));
            }
            match load(&pairs) {
                Err(Error::InvalidConfig(m)) => assert!(m.contains(key), "{m}"),
                other => panic!("{key}={value:?}: {other:?}"),
            }
        }
        let big = "x".repeat(MAX_USER_DATA + 1);
        assert!(matches!(
            load(&[("region", "us-east-1"), ("user_data", &big)]),
            Err(Error::InvalidConfig(_))
        ));
    }

    #[test]
    fn credentials_are_required_and_never_printed() {
        let c = Credentials::from_lookup(lookup(&[
            ("access_key_id", "AKIDEXAMPLE"),
            (
                "secret_access_key",
                "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            ),
            ("session_token", " tok "),
        ]))
        .unwrap();
        assert_eq!(c.session_token.as_deref(), Some("tok"));
        let shown = format!("{c:?}");
        assert!(shown.contains("AKIDEXAMPLE"));
        assert!(
            !shown.contains("EXAMPLEKEY") && !shown.contains("tok\""),
            "{shown}"
        );
        let c = Credentials::from_lookup(lookup(&[
            ("access_key_id", "AKID"),
            ("secret_access_key", "s"),
        ]))
        .unwrap();
        assert_eq!(c.session_token, None);
        match Credentials::from_lookup(lookup(&[("access_key_id", "AKID")])) {
            Err(Error::InvalidConfig(m)) => assert!(m.contains("secret_access_key"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}
