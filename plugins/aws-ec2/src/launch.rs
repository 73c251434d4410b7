//! Launch settings with the meaning of Karpenter's `EC2NodeClass` fields,
//! read from the manifest's `[config]` (lists and maps as JSON, with the
//! NodeClass's field names): which image, subnet and security groups
//! (selector terms), the instance profile, the operator's tags, block
//! devices, instance metadata options, detailed monitoring and public IP.
//!
//! Each config value is checked when the plugin starts; an error names the
//! config key and the field.

use std::collections::BTreeMap;

use serde::Deserialize;
use wasmprov_guest::{Error, Result};

use wasmprov_guest::Arch;

/// One AMI selector term (`amiSelectorTerms`): an image matches a term when
/// it matches every field given; an image matching any term is a candidate,
/// and the newest candidate of the right architecture is launched.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AmiTerm {
    /// `ami-…`.
    pub id: Option<String>,
    /// The image name (`DescribeImages` filter `name`, wildcards allowed).
    pub name: Option<String>,
    /// An account id, `self` or `amazon`.
    pub owner: Option<String>,
    /// Tags the image has (`*` matches any value).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
    /// `family@version`: `al2023@latest` is AWS's public SSM parameter for
    /// Amazon Linux 2023 of the architecture launched.
    pub alias: Option<String>,
    /// An SSM parameter whose value is an AMI id.
    pub ssm_parameter: Option<String>,
}

/// A subnet selector term (`subnetSelectorTerms`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SubnetTerm {
    /// `subnet-…`.
    pub id: Option<String>,
    /// Tags the subnet has (`*` matches any value).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

/// A security group selector term (`securityGroupSelectorTerms`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SecurityGroupTerm {
    /// `sg-…`.
    pub id: Option<String>,
    /// The group name.
    pub name: Option<String>,
    /// Tags the group has (`*` matches any value).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

/// The EBS part of a block device mapping.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Ebs {
    /// Size: a number of GiB, or a quantity such as `"100Gi"` or `"1Ti"`.
    pub volume_size: Option<Quantity>,
    /// `gp3` (default), `gp2`, `io1`, `io2`, `st1`, `sc1`, `standard`.
    pub volume_type: Option<String>,
    /// Provisioned IOPS (`gp3`, `io1`, `io2`).
    pub iops: Option<u32>,
    /// Throughput in MiB/s (`gp3`).
    pub throughput: Option<u32>,
    /// Encrypted.
    pub encrypted: Option<bool>,
    /// The KMS key of an encrypted volume (id, ARN or alias).
    #[serde(rename = "kmsKeyID", alias = "kmsKeyId")]
    pub kms_key_id: Option<String>,
    /// Deleted with the instance (default true).
    pub delete_on_termination: Option<bool>,
    /// A snapshot to create it from.
    #[serde(rename = "snapshotID", alias = "snapshotId")]
    pub snapshot_id: Option<String>,
}

/// A size in GiB: a number, or a string with a binary (`Gi`, `Ti`) suffix.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum Quantity {
    /// GiB.
    Gib(u64),
    /// `"100Gi"`, `"1Ti"`.
    Text(String),
}

impl Quantity {
    /// The size in GiB.
    ///
    /// # Errors
    /// A message for a size that is not `N`, `NGi` or `NTi`.
    pub fn gib(&self) -> std::result::Result<u64, String> {
        match self {
            Self::Gib(n) => Ok(*n),
            Self::Text(t) => {
                let t = t.trim();
                let (num, mult) = if let Some(n) = t.strip_suffix("Ti") {
                    (n, 1024)
                } else if let Some(n) = t.strip_suffix("Gi") {
                    (n, 1)
                } else {
                    (t, 1)
                };
                num.trim()
                    .parse::<u64>()
                    .map(|n| n * mult)
                    .map_err(|_| format!("{t:?} is not a size like 100Gi or 1Ti"))
            }
        }
    }
}

/// One block device mapping (`blockDeviceMappings`).
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct BlockDevice {
    /// `/dev/xvda`, `/dev/xvdb`, …
    pub device_name: String,
    /// The volume.
    pub ebs: Ebs,
    /// Whether this is the root volume: a shape's disk sizes it (at least).
    #[serde(default)]
    pub root_volume: bool,
}

/// Instance metadata options (`metadataOptions`).
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct MetadataOptions {
    /// `enabled` (default) or `disabled`.
    #[serde(default = "enabled")]
    pub http_endpoint: String,
    /// `disabled` (default) or `enabled`.
    #[serde(rename = "httpProtocolIPv6", default = "disabled")]
    pub http_protocol_ipv6: String,
    /// Hops a metadata answer may travel (default 1: the instance only).
    #[serde(default = "one")]
    pub http_put_response_hop_limit: u32,
    /// `required` (IMDSv2 only, the default) or `optional`.
    #[serde(default = "required")]
    pub http_tokens: String,
}

fn enabled() -> String {
    "enabled".into()
}
fn disabled() -> String {
    "disabled".into()
}
fn one() -> u32 {
    1
}
fn required() -> String {
    "required".into()
}

impl Default for MetadataOptions {
    /// IMDSv2 required, one hop, IPv4 endpoint enabled.
    fn default() -> Self {
        Self {
            http_endpoint: enabled(),
            http_protocol_ipv6: disabled(),
            http_put_response_hop_limit: one(),
            http_tokens: required(),
        }
    }
}

/// Every launch setting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Launch {
    /// `ami_selector_terms`: used when neither the request nor `image_id`
    /// names an image.
    pub ami_selector_terms: Vec<AmiTerm>,
    /// `subnet_selector_terms`.
    pub subnet_selector_terms: Vec<SubnetTerm>,
    /// `security_group_selector_terms`.
    pub security_group_selector_terms: Vec<SecurityGroupTerm>,
    /// `instance_profile`: a name or an ARN.
    pub instance_profile: Option<String>,
    /// `tags`: on every instance and volume (the plugin's own tags win).
    pub tags: BTreeMap<String, String>,
    /// `block_device_mappings`.
    pub block_device_mappings: Vec<BlockDevice>,
    /// `metadata_options`.
    pub metadata_options: MetadataOptions,
    /// `detailed_monitoring`.
    pub detailed_monitoring: bool,
    /// `associate_public_ip_address`: unset leaves it to the subnet.
    pub associate_public_ip_address: Option<bool>,
}

fn bad(key: &str, why: impl std::fmt::Display) -> Error {
    Error::InvalidConfig(format!("config key {key:?}: {why}"))
}

fn json<T: serde::de::DeserializeOwned>(key: &str, value: &str, example: &str) -> Result<T> {
    let de = &mut serde_json::Deserializer::from_str(value);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let at = e.path().to_string();
        let field = if at == "." {
            String::new()
        } else {
            format!("at {at}: ")
        };
        bad(
            key,
            format!("{field}{}; for example {key} = '{example}'", e.inner()),
        )
    })
}

fn boolean(key: &str, value: &str) -> Result<bool> {
    match value.trim() {
        "true" => Ok(true),
        "false" => Ok(false),
        other => Err(bad(key, format!("{other:?} is not true or false"))),
    }
}

impl Launch {
    /// Reads the launch settings through `get` (trimmed, empty as unset).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the key and the field that is wrong.
    pub fn from_lookup(get: impl Fn(&str) -> Result<Option<String>>) -> Result<Self> {
        let mut l = Self::default();
        if let Some(v) = get("ami_selector_terms")? {
            l.ami_selector_terms = json(
                "ami_selector_terms",
                &v,
                r#"[{"alias": "al2023@latest"}, {"tags": {"team": "nodes"}, "owner": "self"}]"#,
            )?;
            for (n, t) in l.ami_selector_terms.iter().enumerate() {
                let set = [
                    t.id.is_some(),
                    t.name.is_some() || t.owner.is_some() || !t.tags.is_empty(),
                    t.alias.is_some(),
                    t.ssm_parameter.is_some(),
                ];
                if set.iter().filter(|s| **s).count() != 1 {
                    return Err(bad(
                        "ami_selector_terms",
                        format!(
                            "term {n} must have exactly one of id, alias, ssmParameter, or name/owner/tags"
                        ),
                    ));
                }
                if let Some(a) = &t.alias {
                    alias_parameter(a, Arch::X86_64).map_err(|e| bad("ami_selector_terms", e))?;
                }
            }
        }
        if let Some(v) = get("subnet_selector_terms")? {
            l.subnet_selector_terms = json(
                "subnet_selector_terms",
                &v,
                r#"[{"tags": {"karpenter.sh/discovery": "my-cluster"}}]"#,
            )?;
            for (n, t) in l.subnet_selector_terms.iter().enumerate() {
                if t.id.is_none() == t.tags.is_empty() {
                    return Err(bad(
                        "subnet_selector_terms",
                        format!("term {n} must have either id or tags"),
                    ));
                }
            }
        }
        if let Some(v) = get("security_group_selector_terms")? {
            l.security_group_selector_terms = json(
                "security_group_selector_terms",
                &v,
                r#"[{"tags": {"karpenter.sh/discovery": "my-cluster"}}, {"name": "nodes"}]"#,
            )?;
            for (n, t) in l.security_group_selector_terms.iter().enumerate() {
                let set = [t.id.is_some(), t.name.is_some(), !t.tags.is_empty()];
                if set.iter().filter(|s| **s).count() != 1 {
                    return Err(bad(
                        "security_group_selector_terms",
                        format!("term {n} must have exactly one of id, name or tags"),
                    ));
                }
            }
        }
        l.instance_profile = get("instance_profile")?;
        if let Some(v) = get("tags")? {
            l.tags = json("tags", &v, r#"{"team": "platform", "cost-center": "42"}"#)?;
            for k in l.tags.keys() {
                if k.is_empty()
                    || k.to_ascii_lowercase().starts_with("aws:")
                    || k.starts_with("wasmprov-")
                {
                    return Err(bad(
                        "tags",
                        format!(
                            "tag {k:?}: keys must be non-empty and not start with aws: or wasmprov-"
                        ),
                    ));
                }
            }
        }
        if let Some(v) = get("block_device_mappings")? {
            l.block_device_mappings = json(
                "block_device_mappings",
                &v,
                r#"[{"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {"volumeSize": "100Gi", "volumeType": "gp3", "encrypted": true}}]"#,
            )?;
            let mut roots = 0;
            for (n, d) in l.block_device_mappings.iter().enumerate() {
                let field = |f: &str, why: String| {
                    bad(
                        "block_device_mappings",
                        format!("mapping {n} ({}) {f}: {why}", d.device_name),
                    )
                };
                if !d.device_name.starts_with("/dev/") {
                    return Err(field("deviceName", "must start with /dev/".into()));
                }
                if let Some(q) = &d.ebs.volume_size {
                    let gib = q.gib().map_err(|e| field("ebs.volumeSize", e))?;
                    if gib == 0 || gib > 16 * 1024 {
                        return Err(field(
                            "ebs.volumeSize",
                            format!("{gib} GiB is not within 1 GiB to 16 TiB"),
                        ));
                    }
                }
                if let Some(t) = &d.ebs.volume_type
                    && !["gp3", "gp2", "io1", "io2", "st1", "sc1", "standard"].contains(&t.as_str())
                {
                    return Err(field(
                        "ebs.volumeType",
                        format!("{t:?} is not gp3, gp2, io1, io2, st1, sc1 or standard"),
                    ));
                }
                if d.ebs.kms_key_id.is_some() && d.ebs.encrypted == Some(false) {
                    return Err(field("ebs.kmsKeyID", "needs encrypted: true".into()));
                }
                roots += usize::from(d.root_volume);
            }
            if roots > 1 {
                return Err(bad(
                    "block_device_mappings",
                    "at most one mapping may be the rootVolume",
                ));
            }
        }
        if let Some(v) = get("metadata_options")? {
            l.metadata_options = json(
                "metadata_options",
                &v,
                r#"{"httpTokens": "required", "httpPutResponseHopLimit": 2}"#,
            )?;
            let m = &l.metadata_options;
            if !["required", "optional"].contains(&m.http_tokens.as_str()) {
                return Err(bad(
                    "metadata_options",
                    format!("httpTokens {:?} is not required or optional", m.http_tokens),
                ));
            }
            for (f, v) in [
                ("httpEndpoint", &m.http_endpoint),
                ("httpProtocolIPv6", &m.http_protocol_ipv6),
            ] {
                if !["enabled", "disabled"].contains(&v.as_str()) {
                    return Err(bad(
                        "metadata_options",
                        format!("{f} {v:?} is not enabled or disabled"),
                    ));
                }
            }
            if !(1..=64).contains(&m.http_put_response_hop_limit) {
                return Err(bad(
                    "metadata_options",
                    "httpPutResponseHopLimit must be 1 to 64",
                ));
            }
        }
        if let Some(v) = get("detailed_monitoring")? {
            l.detailed_monitoring = boolean("detailed_monitoring", &v)?;
        }
        if let Some(v) = get("associate_public_ip_address")? {
            l.associate_public_ip_address = Some(boolean("associate_public_ip_address", &v)?);
        }
        Ok(l)
    }
}

/// The SSM parameter of an AMI alias for `arch`: `al2023@latest` (the only
/// family and version supported so far) is
/// `/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-<arch>`.
///
/// # Errors
/// A message for another family or version.
pub fn alias_parameter(alias: &str, arch: Arch) -> std::result::Result<String, String> {
    match alias.split_once('@') {
        Some(("al2023", "latest")) => Ok(format!(
            "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-{arch}"
        )),
        _ => Err(format!(
            "alias {alias:?} is not supported; use al2023@latest, or an ssmParameter"
        )),
    }
}

/// `DescribeImages` parameters for a name/owner/tags term.
#[must_use]
pub fn image_filters(term: &AmiTerm) -> (Vec<(String, Vec<String>)>, Option<String>) {
    let mut filters = Vec::new();
    if let Some(n) = &term.name {
        filters.push(("name".to_string(), vec![n.clone()]));
    }
    for (k, v) in &term.tags {
        if v == "*" {
            filters.push(("tag-key".to_string(), vec![k.clone()]));
        } else {
            filters.push((format!("tag:{k}"), vec![v.clone()]));
        }
    }
    (filters, term.owner.clone())
}

/// `Filter.N` of a tag map (`*`: any value).
#[must_use]
pub fn tag_filters(tags: &BTreeMap<String, String>) -> Vec<(String, Vec<String>)> {
    tags.iter()
        .map(|(k, v)| {
            if v == "*" {
                ("tag-key".to_string(), vec![k.clone()])
            } else {
                (format!("tag:{k}"), vec![v.clone()])
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(pairs: &[(&str, &str)]) -> Result<Launch> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect();
        Launch::from_lookup(move |k| Ok(map.get(k).cloned()))
    }

    #[test]
    fn defaults_require_imdsv2() {
        let l = load(&[]).unwrap();
        assert_eq!(l.metadata_options.http_tokens, "required");
        assert_eq!(l.metadata_options.http_put_response_hop_limit, 1);
        assert!(!l.detailed_monitoring);
        assert_eq!(l.associate_public_ip_address, None);
        assert!(l.tags.is_empty() && l.block_device_mappings.is_empty());
    }

    #[test]
    fn every_setting_is_read() {
        let l = load(&[
            ("ami_selector_terms", r#"[{"alias": "al2023@latest"}, {"name": "ubuntu-*", "owner": "amazon"}, {"tags": {"team": "*"}}, {"id": "ami-1"}, {"ssmParameter": "/my/ami"}]"#),
            ("subnet_selector_terms", r#"[{"tags": {"tier": "private"}}, {"id": "subnet-1"}]"#),
            ("security_group_selector_terms", r#"[{"name": "nodes"}, {"tags": {"k": "v"}}]"#),
            ("instance_profile", "nodes"),
            ("tags", r#"{"team": "platform"}"#),
            ("block_device_mappings", r#"[{"deviceName": "/dev/xvda", "rootVolume": true, "ebs": {"volumeSize": "1Ti", "volumeType": "io2", "iops": 5000, "encrypted": true, "kmsKeyID": "alias/k"}}, {"deviceName": "/dev/xvdb", "ebs": {"volumeSize": 20, "throughput": 250}}]"#),
            ("metadata_options", r#"{"httpPutResponseHopLimit": 2}"#),
            ("detailed_monitoring", "true"),
            ("associate_public_ip_address", "false"),
        ])
        .unwrap();
        assert_eq!(l.ami_selector_terms.len(), 5);
        assert_eq!(
            l.ami_selector_terms[4].ssm_parameter.as_deref(),
            Some("/my/ami")
        );
        assert_eq!(l.subnet_selector_terms[1].id.as_deref(), Some("subnet-1"));
        assert_eq!(
            l.security_group_selector_terms[0].name.as_deref(),
            Some("nodes")
        );
        assert_eq!(l.instance_profile.as_deref(), Some("nodes"));
        assert_eq!(l.tags["team"], "platform");
        let root = &l.block_device_mappings[0];
        assert!(root.root_volume);
        assert_eq!(root.ebs.volume_size.as_ref().unwrap().gib(), Ok(1024));
        assert_eq!(root.ebs.kms_key_id.as_deref(), Some("alias/k"));
        assert_eq!(
            l.block_device_mappings[1]
                .ebs
                .volume_size
                .as_ref()
                .unwrap()
                .gib(),
            Ok(20)
        );
        assert_eq!(l.metadata_options.http_put_response_hop_limit, 2);
        assert_eq!(
            l.metadata_options.http_tokens, "required",
            "still the default"
        );
        assert!(l.detailed_monitoring);
        assert_eq!(l.associate_public_ip_address, Some(false));
        assert_eq!(
            alias_parameter("al2023@latest", Arch::Arm64).unwrap(),
            "/aws/service/ami-amazon-linux-latest/al2023-ami-kernel-default-arm64"
        );
    }

    #[test]
    fn invalid_settings_name_the_key_and_field() {
        let cases: &[(&str, &str, &str)] = &[
            ("ami_selector_terms", "{}", "ami_selector_terms"),
            ("ami_selector_terms", r#"[{"idd": "ami-1"}]"#, "idd"),
            (
                "ami_selector_terms",
                r#"[{"id": "ami-1", "alias": "al2023@latest"}]"#,
                "exactly one",
            ),
            (
                "ami_selector_terms",
                r#"[{"alias": "bottlerocket@1.2"}]"#,
                "bottlerocket",
            ),
            ("subnet_selector_terms", r#"[{}]"#, "either id or tags"),
            (
                "security_group_selector_terms",
                r#"[{"id": "sg-1", "name": "x"}]"#,
                "exactly one",
            ),
            ("tags", r#"{"aws:x": "1"}"#, "aws:"),
            ("tags", r#"["a"]"#, "tags"),
            (
                "block_device_mappings",
                r#"[{"deviceName": "xvda", "ebs": {}}]"#,
                "deviceName",
            ),
            (
                "block_device_mappings",
                r#"[{"deviceName": "/dev/xvda", "ebs": {"volumeSize": "10GB"}}]"#,
                "ebs.volumeSize",
            ),
            (
                "block_device_mappings",
                r#"[{"deviceName": "/dev/xvda", "ebs": {"volumeSize": 0}}]"#,
                "ebs.volumeSize",
            ),
            (
                "block_device_mappings",
                r#"[{"deviceName": "/dev/xvda", "ebs": {"volumeType": "ssd"}}]"#,
                "ebs.volumeType",
            ),
            (
                "block_device_mappings",
                r#"[{"deviceName": "/dev/xvda", "ebs": {"encrypted": false, "kmsKeyID": "k"}}]"#,
                "ebs.kmsKeyID",
            ),
            (
                "block_device_mappings",
                r#"[{"deviceName": "/dev/a", "rootVolume": true, "ebs": {}}, {"deviceName": "/dev/b", "rootVolume": true, "ebs": {}}]"#,
                "rootVolume",
            ),
            (
                "block_device_mappings",
                r#"[{"deviceName": "/dev/a", "ebs": {"iops": "many"}}]"#,
                "iops",
            ),
            (
                "metadata_options",
                r#"{"httpTokens": "sometimes"}"#,
                "httpTokens",
            ),
            (
                "metadata_options",
                r#"{"httpPutResponseHopLimit": 0}"#,
                "httpPutResponseHopLimit",
            ),
            (
                "metadata_options",
                r#"{"httpEndpoint": "on"}"#,
                "httpEndpoint",
            ),
            ("detailed_monitoring", "yes", "detailed_monitoring"),
            (
                "associate_public_ip_address",
                "1",
                "associate_public_ip_address",
            ),
        ];
        for (key, value, names) in cases {
            match load(&[(key, value)]) {
                Err(Error::InvalidConfig(m)) => {
                    assert!(m.contains(key) && m.contains(names), "{key}={value}: {m}");
                }
                other => panic!("{key}={value}: {other:?}"),
            }
        }
    }
}
