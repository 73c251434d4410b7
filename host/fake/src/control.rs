//! The fake-control protocol: how the conformance suite (`wasmprov test
//! --fake-url`, `--fake-command`) reads the ground truth of a fake cloud
//! that runs as its own process, in any language. The full description,
//! with examples, is `docs/FAKE-PROTOCOL.md`; these are its messages.
//!
//! A fake serves its cloud's API and, on the same loopback address, three
//! control endpoints under [`PREFIX`]:
//!
//! | request | answer |
//! | --- | --- |
//! | `GET /_wasmprov/info` | 200 [`Info`]: name, credentials, how this cloud says capacity / quota / rate-limited, which requests create a node |
//! | `GET /_wasmprov/nodes` | 200 [`NodeList`]: every node that exists, with its labels or tags |
//! | `POST /_wasmprov/plant` with [`Plant`] | 200 [`Planted`]: a node made behind the plugin's back; 501 when this fake cannot |
//!
//! Every plugin request the suite lets through goes to the fake's address
//! (whatever host the plugin addressed), so the cloud's paths are served
//! at the root as the plugin writes them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where the control endpoints are.
pub const PREFIX: &str = "/_wasmprov";
/// `GET`: [`Info`].
pub const INFO: &str = "/_wasmprov/info";
/// `GET`: [`NodeList`].
pub const NODES: &str = "/_wasmprov/nodes";
/// `POST` [`Plant`]: [`Planted`].
pub const PLANT: &str = "/_wasmprov/plant";
/// The key of [`Info::secrets`] whose value answers every secret.
pub const ANY_SECRET: &str = "*";

/// What a fake tells the suite about itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Info {
    /// What the fake is ("digitalocean fake").
    pub name: String,
    /// Secret values the fake accepts, by the environment variable the
    /// plugin's manifest reads them from; [`ANY_SECRET`] for every one.
    #[serde(default)]
    pub secrets: BTreeMap<String, String>,
    /// Configuration the suite adds to the plugin's manifest (an image id
    /// the fake knows, say).
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// How nodes carry labels in this cloud.
    #[serde(default)]
    pub tags: TagStyle,
    /// The requests that create a node: capacity and quota faults hit only
    /// these.
    #[serde(default)]
    pub creates: Vec<Route>,
    /// This cloud's answer to a create when it has no capacity
    /// (`capacity`), is over quota (`quota`), and to any request it
    /// throttles (`rate_limited`). Faults of a kind missing here cannot be
    /// injected.
    #[serde(default)]
    pub faults: BTreeMap<String, Canned>,
    /// The most nodes one page of this cloud's node list holds, whatever
    /// the plugin asks: the suite plants one more than this of the run's
    /// own nodes (and as many of another owner's) before `describe`, so a
    /// plugin that reads only the first page fails `describe.pages`.
    /// Absent: the rule is skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_size: Option<usize>,
    /// An image this cloud boots that is not the plugin's default, for the
    /// suite to ask for (`boot.image`). Absent: the rule is skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_image: Option<String>,
}

/// How a cloud stores labels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TagStyle {
    /// Key/value labels: [`Node::labels`].
    #[default]
    Labels,
    /// Flat string tags, `key:value` as `wasmprov_api::tags::FlatTags::DIGITALOCEAN`
    /// writes them: [`Node::tags`], decoded by the suite.
    Flat,
}

/// A request, by method and path (without the query string; a `*`
/// segment matches any one segment).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    /// `POST`, `PUT`, ...
    pub method: String,
    /// `/v2/droplets`.
    pub path: String,
}

impl Route {
    /// A route.
    #[must_use]
    pub fn new(method: &str, path: &str) -> Self {
        Self {
            method: method.to_string(),
            path: path.to_string(),
        }
    }

    /// Whether a request with this method and path is this route.
    #[must_use]
    pub fn matches(&self, method: &str, path: &str) -> bool {
        if !self.method.eq_ignore_ascii_case(method) {
            return false;
        }
        let want: Vec<&str> = self.path.trim_end_matches('/').split('/').collect();
        let got: Vec<&str> = path.trim_end_matches('/').split('/').collect();
        want.len() == got.len() && want.iter().zip(&got).all(|(w, g)| *w == "*" || w == g)
    }
}

/// A response given as it is.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Canned {
    /// HTTP status.
    pub status: u16,
    /// Headers (`Retry-After`, `ratelimit-reset`, ...); `content-type`
    /// defaults to `application/json`.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The body.
    #[serde(default)]
    pub body: String,
}

impl Canned {
    /// The response (`content-type: application/json` unless a header says
    /// otherwise).
    #[must_use]
    pub fn to_http(&self) -> http::Response<Vec<u8>> {
        let mut builder = http::Response::builder().status(self.status);
        if !self
            .headers
            .keys()
            .any(|k| k.eq_ignore_ascii_case("content-type"))
        {
            builder = builder.header(http::header::CONTENT_TYPE, "application/json");
        }
        for (k, v) in &self.headers {
            builder = builder.header(k.as_str(), v.as_str());
        }
        builder
            .body(self.body.clone().into_bytes())
            .unwrap_or_else(|_| {
                let mut r =
                    http::Response::new(b"a canned response with a bad status or header".to_vec());
                *r.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
                r
            })
    }
}

/// `GET /_wasmprov/nodes`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeList {
    /// Every node that exists, including ones the plugin did not make.
    pub nodes: Vec<Node>,
}

/// One node as the fake holds it. Other fields are ignored, so a fake may
/// list its nodes as its API shows them plus these.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// The id the plugin should report as its provider id.
    pub id: String,
    /// Labels ([`TagStyle::Labels`]).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Flat tags ([`TagStyle::Flat`]).
    #[serde(default)]
    pub tags: Vec<String>,
    /// False for a node deleted but still listed by the cloud.
    #[serde(default = "yes")]
    pub alive: bool,
    /// The user data it was created with, base64; absent when none was
    /// given or the fake does not keep it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data_base64: Option<String>,
    /// What reached the cloud when the node was made and what the cloud
    /// holds of it now, for the suite to check the plugin against; absent
    /// when the fake records nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<Record>,
}

/// What a fake records of a node. Every field is optional: an absent one
/// is something this fake cannot tell, and the suite skips the rules that
/// need it (rather than passing them).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The image the create asked for (`""`: none was named).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The user data the create carried, base64 (`""`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data_base64: Option<String>,
    /// The SSH public keys the create carried (`[]`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_keys: Option<Vec<String>>,
    /// The zone (region, location) the node is in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Its instance type (size, server type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// When the cloud created it, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_at: Option<String>,
    /// The cloud's own name of its state now (`active`, `running`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Its address in the cloud's private network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_address: Option<String>,
    /// Its public address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_address: Option<String>,
    /// Its IPv6 address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_address: Option<String>,
    /// The host name the cloud gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// The subnet (network, VPC) it is in, by the id a provision request
    /// names it with (`""`: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<String>,
}

fn yes() -> bool {
    true
}

/// `POST /_wasmprov/plant`: a node with these labels (and the same as flat
/// tags, for a fake of a cloud with flat tags).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Plant {
    /// The labels.
    pub labels: BTreeMap<String, String>,
    /// The same labels as flat tags.
    #[serde(default)]
    pub tags: Vec<String>,
}

/// The answer to [`Plant`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Planted {
    /// The new node's id.
    pub id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_match_by_method_and_segments() {
        let r = Route::new("POST", "/v2/droplets");
        assert!(r.matches("post", "/v2/droplets/"));
        assert!(!r.matches("GET", "/v2/droplets"));
        assert!(!r.matches("POST", "/v2/droplets/1"));
        let r = Route::new("POST", "/v1/projects/*/nodes");
        assert!(r.matches("POST", "/v1/projects/p1/nodes"));
        assert!(!r.matches("POST", "/v1/projects/nodes"));
    }

    #[test]
    fn a_minimal_info_parses_and_unknown_fields_are_refused() {
        let info: Info = serde_json::from_str(r#"{"name":"x"}"#).unwrap();
        assert_eq!(info.tags, TagStyle::Labels);
        assert!(serde_json::from_str::<Info>(r#"{"name":"x","fault":{}}"#).is_err());
        let node: Node = serde_json::from_str(r#"{"id":"1","tags":["a:b"],"size":"s"}"#).unwrap();
        assert!(node.alive);
    }
}
