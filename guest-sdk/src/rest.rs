//! A provider for a plain REST cloud from its endpoints and mappings.
//!
//! The plugin describes its cloud with [`RestCloud`]: how to ask for a list
//! of nodes (filtered by a label or tag, as narrowly as the API can), for
//! one node, to create and to delete; where the nodes are in the answers;
//! how a node's id, labels and handle are read; how the list pages; which
//! error answers mean what. This module does the rest, the same way for
//! every cloud:
//!
//! - **provision** looks for the request's node first (owner and request
//!   labels) and returns it; otherwise creates one; a create the cloud
//!   refuses as a conflict (a concurrent provision of the same request won
//!   a name) looks again and returns the winner;
//! - **terminate** and **get** read the node and check its owner label
//!   before anything else: another owner's node is `not_found`, never
//!   touched;
//! - **describe** walks every page, keeps only this owner's nodes (even if
//!   the cloud's filter let others through) and drops repeats;
//! - every error answer is classified once ([`crate::classify`]).
//!
//! A plugin's [`Provider`](crate::Provider) methods then delegate:
//! `rest::provision(self, &Wasi, owner, request)`. The transport is a
//! parameter so that a plugin's unit tests run the same code natively
//! against scripted answers.

use std::collections::BTreeSet;

use serde::de::DeserializeOwned;

use crate::classify::{self, ErrorAt, Rule};
use crate::config::Secret;
use crate::http::{Request, Response};
use crate::pages::{self, Paging};
use crate::shape::{CatalogueEntry, Criteria};
use crate::state::StateTable;
use crate::tags::{self, OWNER, Preset, REQUEST};
use crate::{Error, Labels, NodeHandle, NodeShape, ProvisionRequest, Result};

/// Sends requests: [`Wasi`] in a plugin, a script in its unit tests.
pub trait Transport {
    /// Sends `req` and reads the whole answer, whatever its status.
    ///
    /// # Errors
    /// The contract error for no answer (`transport`, or `invalid_config`
    /// for a request the host's grants refuse).
    fn send(&self, req: Request) -> Result<Response>;
}

/// The host's `wasi:http`, under the manifest's grants.
#[derive(Clone, Copy, Debug, Default)]
pub struct Wasi;

impl Transport for Wasi {
    fn send(&self, req: Request) -> Result<Response> {
        Ok(req.send()?)
    }
}

/// What this module needs to know about a cloud.
pub trait RestCloud {
    /// A node as the API returns it.
    type Node: DeserializeOwned;

    /// The cloud's name, for messages (`"DigitalOcean"`).
    const CLOUD: &'static str;
    /// How list answers page.
    const PAGING: Paging;
    /// JSON pointer to the array of nodes in a list answer (`/droplets`).
    const LIST_ITEMS: &'static str;
    /// JSON pointer to the node in a get or create answer (`/droplet`;
    /// empty when the answer is the node).
    const ONE_ITEM: &'static str;
    /// Error rules checked before the status defaults.
    const ERRORS: &'static [Rule] = &[];
    /// Where the cloud's error bodies keep the message (default: where
    /// most clouds do).
    const ERROR_AT: ErrorAt = ErrorAt::DEFAULT;
    /// What the cloud calls a node, when its ids are numbers (`"droplet"`):
    /// then the default [`check_id`](Self::check_id) refuses every spelling
    /// of an id but the canonical decimal one ([`crate::ids::numeric_id`]).
    /// `None` (the default): ids are the cloud's strings.
    const NUMERIC_IDS: Option<&'static str> = None;

    /// The nodes of `owner_id` (made for `request_id`, when given): a list
    /// request filtered as narrowly as the API allows (by both labels, by
    /// one, or not at all: the answer is filtered again here), with the page
    /// size the cloud should use. It goes through the [`Transport`], after
    /// [`RestCloud::authorize`].
    fn list(&self, owner_id: &str, request_id: Option<&str>) -> Result<Request>;

    /// The URL of node `id` (read with `GET`, deleted with `DELETE`), or
    /// `None` when `id` cannot be one of this cloud's (then it is
    /// `not_found` without a request).
    fn node_url(&self, id: &str) -> Option<String>;

    /// Refuses, before any request, a provider id this cloud never spells
    /// so, with an error that is not `not_found` (a terminate answered
    /// `not_found` tells the caller the node is gone). A cloud of numeric
    /// ids refuses every spelling but the canonical one with
    /// [`crate::ids::numeric_id`]. The default does that when
    /// [`NUMERIC_IDS`](Self::NUMERIC_IDS) names the node, else accepts
    /// every id.
    ///
    /// # Errors
    /// Any contract error but `not_found`, typically `unsupported`.
    fn check_id(&self, id: &str) -> Result<()> {
        match Self::NUMERIC_IDS {
            Some(noun) => crate::ids::numeric_id(noun, id).map(|_| ()),
            None => Ok(()),
        }
    }

    /// Creates a node for `request` with `labels` (owner, request id,
    /// request digest and the shape's labels): the plugin encodes them as
    /// its cloud stores them.
    ///
    /// # Errors
    /// Any contract error, such as `unsupported` for a shape it cannot make.
    fn create(&self, request: &ProvisionRequest, labels: &Labels) -> Result<Request>;

    /// Adds credentials to a request.
    ///
    /// # Errors
    /// `invalid_config` when they are not configured.
    fn authorize(&self, req: Request) -> Result<Request>;

    /// The node as a handle, with its id as `provider_id` and its labels
    /// decoded from however the cloud stores them.
    fn handle(&self, node: &Self::Node) -> NodeHandle;

    /// The request that replaces every label of node `id` with `labels`
    /// (the caller's, plus the reserved ones the node keeps: owner, request
    /// id, digest), encoded as the cloud stores them; its answer holds the
    /// node at [`RestCloud::ONE_ITEM`], or is empty (then the node is read
    /// again). [`set_labels`] calls it after checking the owner. The
    /// default is `unsupported`: a cloud that cannot relabel a live node.
    ///
    /// # Errors
    /// Any contract error.
    fn relabel(&self, id: &str, labels: &Labels) -> Result<Request> {
        let _ = (id, labels);
        Err(Error::Unsupported(format!(
            "{} cannot change the labels of a live node",
            Self::CLOUD
        )))
    }

    /// The contract error for an error answer to `what`: [`RestCloud::ERRORS`]
    /// and the status defaults, the message read at [`RestCloud::ERROR_AT`]
    /// ([`classify::classify_at`]). Override it for a cloud whose errors say
    /// more than status and message.
    fn error(&self, resp: &Response, what: &str) -> Error {
        classify::classify_at(resp, what, Self::ERRORS, &Self::ERROR_AT)
    }
}

/// What most REST plugins configure, read once in `new`: the API's base
/// URL (`endpoint`), its bearer token (secret `token`), the region of new
/// nodes when a shape names none (`region`) and the image they boot when a
/// request names none (`image`).
#[derive(Clone, Debug)]
pub struct Settings {
    /// Base URL of the API, without a trailing `/`.
    pub endpoint: String,
    /// The bearer token.
    pub token: Secret,
    /// Region (zone, location) of new nodes when the shape names none.
    pub region: String,
    /// Image of new nodes when the request names none.
    pub image: String,
}

impl Settings {
    /// Reads `endpoint`, `region` and `image` (with these defaults) and the
    /// secret `token` from the plugin's configuration.
    ///
    /// # Errors
    /// `invalid_config` for a missing token or a bad value.
    pub fn read(endpoint: &str, region: &str, image: &str) -> Result<Self> {
        Ok(Self {
            endpoint: crate::config::url_or("endpoint", endpoint)?,
            token: crate::config::secret("token")?,
            region: crate::config::parse_or("region", region.to_string())?,
            image: crate::config::parse_or("image", image.to_string())?,
        })
    }

    /// `path` (starting with `/`) on the API.
    #[must_use]
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.endpoint.trim_end_matches('/'))
    }

    /// The region a node of `shape` goes to: its zone, else the configured one.
    #[must_use]
    pub fn zone<'a>(&'a self, shape: &'a NodeShape) -> &'a str {
        shape.zone.as_deref().unwrap_or(&self.region)
    }

    /// The image a node boots: the request's, else the configured one.
    #[must_use]
    pub fn image<'a>(&'a self, boot: &'a crate::BootData) -> &'a str {
        boot.image.as_deref().unwrap_or(&self.image)
    }

    /// The cheapest type of `catalogue` for `shape`, in its zone or the
    /// configured region ([`crate::shape::pick_for`]).
    ///
    /// # Errors
    /// As [`crate::shape::pick_for`].
    pub fn pick<'c, T: CatalogueEntry + 'c>(
        &self,
        shape: &NodeShape,
        catalogue: &'c [T],
    ) -> Result<crate::shape::Choice<'c, T>> {
        crate::shape::pick_for(&Criteria::of(shape).or_zone(&self.region), catalogue)
    }

    /// The on-demand price hint of [`Settings::pick`]'s choice.
    ///
    /// # Errors
    /// As [`crate::shape::pick_for`].
    pub fn price_hint<T: CatalogueEntry>(
        &self,
        shape: &NodeShape,
        catalogue: &[T],
    ) -> Result<Option<crate::PriceHint>> {
        let choice = self.pick(shape, catalogue)?;
        Ok(Some(choice.price_hint(crate::CapacityType::OnDemand)))
    }

    /// `req` with the token as its bearer.
    ///
    /// # Errors
    /// `invalid_config` when the token is not configured.
    pub fn authorize(&self, req: Request) -> Result<Request> {
        Ok(req.bearer(self.token.expose()?))
    }
}

/// Where a node's fields are in the cloud's JSON (pointers), how its tags
/// and states read: [`handle_of`] turns a node into a handle with it.
#[derive(Clone, Copy, Debug)]
pub struct Fields {
    /// The cloud's tags.
    pub tags: Preset,
    /// The cloud's state names.
    pub states: StateTable,
    /// The node's id (a string or a number).
    pub id: &'static str,
    /// Its flat tags (an array of strings).
    pub tag_list: &'static str,
    /// Its region or zone (a string).
    pub zone: &'static str,
    /// Its instance type (a string).
    pub instance_type: &'static str,
    /// When it was created: any form [`crate::time::any_ms`] reads.
    pub created: &'static str,
    /// Its state name.
    pub status: &'static str,
    /// Where its IPv4 addresses are: every string under it that is one
    /// counts, the first private one as the private address, the first
    /// other as the public one.
    pub addresses: &'static str,
    /// Its architecture, when every node of the cloud has the same.
    pub arch: Option<crate::Arch>,
}

impl Fields {
    /// Where most REST clouds put a node's parts: `/id`, `/tags`,
    /// `/region`, `/type`, `/created`, `/status`, addresses under `/ipv4`;
    /// DigitalOcean's tags, [`StateTable::COMMON`], no architecture. A
    /// plugin sets what differs: `Fields { zone: "/region/slug",
    /// ..Fields::COMMON }`.
    pub const COMMON: Fields = Fields {
        tags: Preset::DIGITALOCEAN,
        states: StateTable::COMMON,
        id: "/id",
        tag_list: "/tags",
        zone: "/region",
        instance_type: "/type",
        created: "/created",
        status: "/status",
        addresses: "/ipv4",
        arch: None,
    };
}

/// The handle of `node` as `fields` say where its parts are. The address
/// is the private one, else the public one.
#[must_use]
pub fn handle_of(node: &serde_json::Value, fields: &Fields) -> NodeHandle {
    let text = |p: &str| node.pointer(p).and_then(|v| v.as_str()).map(str::to_string);
    let mut ips = Vec::new();
    if let Some(v) = node.pointer(fields.addresses) {
        ipv4_in(v, &mut ips);
    }
    let ip = |private: bool| {
        ips.iter()
            .find(|ip| ip.is_private() == private)
            .map(ToString::to_string)
    };
    let tags: Vec<String> = node
        .pointer(fields.tag_list)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    let mut handle = NodeHandle {
        provider_id: match node.pointer(fields.id) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(v) => v.to_string(),
            None => String::new(),
        },
        labels: fields.tags.decode_all(&tags),
        zone: text(fields.zone),
        instance_type: text(fields.instance_type),
        address: ip(true).or_else(|| ip(false)),
        private_address: ip(true),
        public_address: ip(false),
        created_at_ms: text(fields.created).and_then(|t| crate::time::any_ms(&t)),
        arch: fields.arch,
        ..NodeHandle::default()
    };
    fields
        .states
        .apply(&text(fields.status).unwrap_or_default(), &mut handle);
    handle
}

fn ipv4_in(v: &serde_json::Value, out: &mut Vec<std::net::Ipv4Addr>) {
    match v {
        serde_json::Value::String(s) => out.extend(s.parse::<std::net::Ipv4Addr>()),
        serde_json::Value::Array(a) => a.iter().for_each(|v| ipv4_in(v, out)),
        serde_json::Value::Object(o) => o.values().for_each(|v| ipv4_in(v, out)),
        _ => {}
    }
}

/// Where a cloud's list of instance types (sizes, plans) keeps what
/// [`offerings`] needs, as pointers into each item.
#[derive(Clone, Copy, Debug)]
pub struct Listing {
    /// The array of types in a page of the list.
    pub items: &'static str,
    /// A type's name, as the catalogue names it.
    pub name: &'static str,
    /// Its price per hour.
    pub hourly_usd: &'static str,
    /// The zones it is sold in (an array of strings).
    pub zones: &'static str,
    /// Whether it can be bought now (a boolean); `None`: every listed one.
    pub available: Option<&'static str>,
}

impl Listing {
    /// A listing: the array of types at `items`, in each its `name`, price
    /// per hour (`hourly_usd`) and `zones`; every listed type sold.
    #[must_use]
    pub const fn new(
        items: &'static str,
        name: &'static str,
        hourly_usd: &'static str,
        zones: &'static str,
    ) -> Self {
        Self {
            items,
            name,
            hourly_usd,
            zones,
            available: None,
        }
    }

    /// Only the types whose boolean at `pointer` is true are sold.
    #[must_use]
    pub const fn available(mut self, pointer: &'static str) -> Self {
        self.available = Some(pointer);
        self
    }
}

/// The catalogue's types that the cloud's list (from `first`, every page)
/// sells now, each with the list's price and zones.
///
/// # Errors
/// The classified error of a failed page; `transport` for a malformed one.
pub fn offerings<C: RestCloud + ?Sized, T: CatalogueEntry>(
    cloud: &C,
    transport: &impl Transport,
    first: Request,
    listing: &Listing,
    catalogue: &[T],
) -> Result<Vec<crate::Offering>> {
    let sold: Vec<serde_json::Value> = collect(cloud, transport, first, listing.items)?;
    let offering = |entry: &T| {
        let api = sold.iter().find(|s| {
            s.pointer(listing.name).and_then(|v| v.as_str()) == Some(entry.name())
                && listing
                    .available
                    .is_none_or(|p| s.pointer(p) == Some(&serde_json::Value::Bool(true)))
        })?;
        let zones = api
            .pointer(listing.zones)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default();
        let on_demand_usd = api
            .pointer(listing.hourly_usd)
            .and_then(serde_json::Value::as_f64);
        Some(crate::Offering {
            on_demand_usd,
            zones,
            ..entry.offering()
        })
    };
    Ok(catalogue.iter().filter_map(offering).collect())
}

/// The node calls of a [`Provider`](crate::Provider) whose type is a
/// [`RestCloud`], answered by this module over [`Wasi`]: `provision`,
/// `terminate`, `describe` and `get`. Write `rest_calls!();` inside the
/// `impl Provider` block, beside `new`, `price_hint` and `offerings`.
#[macro_export]
macro_rules! rest_calls {
    () => {
        fn provision(
            &self,
            owner_id: &str,
            request: &$crate::ProvisionRequest,
        ) -> $crate::Result<$crate::NodeHandle> {
            $crate::rest::provision(self, &$crate::rest::Wasi, owner_id, request)
        }
        fn terminate(&self, owner_id: &str, provider_id: &str) -> $crate::Result<()> {
            $crate::rest::terminate(self, &$crate::rest::Wasi, owner_id, provider_id)
        }
        fn describe(&self, owner_id: &str) -> $crate::Result<Vec<$crate::NodeHandle>> {
            $crate::rest::describe(self, &$crate::rest::Wasi, owner_id)
        }
        fn get(
            &self,
            owner_id: &str,
            provider_id: &str,
        ) -> $crate::Result<Option<$crate::NodeHandle>> {
            $crate::rest::get(self, &$crate::rest::Wasi, owner_id, provider_id)
        }
    };
}

/// Sends `req` (authorized) and returns the answer when it is 2xx.
///
/// # Errors
/// The classified error of any other answer, or the transport's.
pub fn send<C: RestCloud + ?Sized>(
    cloud: &C,
    transport: &impl Transport,
    req: Request,
) -> Result<Response> {
    let what = format!("{} {}", req.method(), path_of(req.url()));
    let resp = transport.send(cloud.authorize(req)?)?;
    if resp.is_success() {
        Ok(resp)
    } else {
        Err(cloud.error(&resp, &format!("{} {what}", C::CLOUD)))
    }
}

fn path_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let path = rest.find('/').map_or("/", |i| &rest[i..]);
    path.split_once('?').map_or(path, |(p, _)| p)
}

fn node_at<C: RestCloud + ?Sized>(resp: &Response, pointer: &str) -> Result<C::Node> {
    let body: serde_json::Value = resp.json()?;
    let value = if pointer.is_empty() {
        Some(&body)
    } else {
        body.pointer(pointer)
    };
    let value = value.ok_or_else(|| {
        Error::Transport(format!(
            "{}: the answer from {} has no node at {pointer}",
            C::CLOUD,
            resp.url
        ))
    })?;
    serde_json::from_value(value.clone()).map_err(|e| {
        Error::Transport(format!(
            "{}: the node in the answer from {} is malformed: {e}",
            C::CLOUD,
            resp.url
        ))
    })
}

/// [`RestCloud::handle`], with the labels the host would refuse left out
/// ([`within_host_limits`]).
fn handle<C: RestCloud + ?Sized>(cloud: &C, node: &C::Node) -> NodeHandle {
    let mut handle = cloud.handle(node);
    for dropped in within_host_limits(&mut handle.labels) {
        crate::log::warn(&format!(
            "{}: node {:?} carries label {dropped}, more than the host takes; left out",
            C::CLOUD,
            handle.provider_id
        ));
    }
    handle
}

/// Leaves out of `labels` those a node the host is answered with may not
/// carry: an empty key, a key over [`wasmprov_api::MAX_HANDLE_LABEL_KEY`]
/// bytes, a value over [`wasmprov_api::MAX_HANDLE_LABEL_VALUE`], and past
/// [`wasmprov_api::MAX_HANDLE_LABELS`] labels the last in key order. The
/// reserved labels (owner, request id, ...) are always kept. The host
/// refuses a whole answer holding one such node, so one node tagged by hand
/// would otherwise deny its owner's `describe`. Returns what was left out,
/// described for a log.
pub fn within_host_limits(labels: &mut Labels) -> Vec<String> {
    use wasmprov_api::provenance::is_reserved_label;
    use wasmprov_api::{MAX_HANDLE_LABEL_KEY, MAX_HANDLE_LABEL_VALUE, MAX_HANDLE_LABELS};
    let shown = |k: &str, v: &str| {
        format!(
            "{:?} ({} bytes of key, {} of value)",
            k.chars().take(40).collect::<String>(),
            k.len(),
            v.len()
        )
    };
    let mut dropped = Vec::new();
    labels.retain(|k, v| {
        let fits =
            !k.is_empty() && k.len() <= MAX_HANDLE_LABEL_KEY && v.len() <= MAX_HANDLE_LABEL_VALUE;
        if !fits && !is_reserved_label(k) {
            dropped.push(shown(k, v));
            return false;
        }
        true
    });
    let reserved = labels.keys().filter(|k| is_reserved_label(k)).count();
    let mut room = MAX_HANDLE_LABELS.saturating_sub(reserved);
    labels.retain(|k, v| {
        if is_reserved_label(k) {
            return true;
        }
        if room == 0 {
            dropped.push(shown(k, v));
            return false;
        }
        room -= 1;
        true
    });
    dropped
}

fn owned_by(labels: &Labels, owner_id: &str) -> bool {
    labels.get(OWNER).map(String::as_str) == Some(owner_id)
}

/// Every item of a list, across all pages: the array at JSON pointer
/// `items` of each page (a page without it adds nothing), each item read as
/// `T`. For lists other than nodes, such as a catalogue.
///
/// # Errors
/// The classified error of a failed page; `transport` for a malformed one.
pub fn collect<C: RestCloud + ?Sized, T: DeserializeOwned>(
    cloud: &C,
    transport: &impl Transport,
    first: Request,
    items: &str,
) -> Result<Vec<T>> {
    let mut all = Vec::new();
    pages::walk(
        first,
        &C::PAGING,
        |req| send(cloud, transport, req),
        |page| {
            let list = match page.pointer(items) {
                None | Some(serde_json::Value::Null) => return Ok(()),
                Some(v) => v.as_array().ok_or_else(|| {
                    Error::Transport(format!("{}: the list's {items} is not an array", C::CLOUD))
                })?,
            };
            for item in list {
                all.push(serde_json::from_value(item.clone()).map_err(|e| {
                    Error::Transport(format!(
                        "{}: an item of {items} is malformed: {e}",
                        C::CLOUD
                    ))
                })?);
            }
            Ok(())
        },
    )?;
    Ok(all)
}

/// Every node owned by `owner_id` (and made for `request_id`, when given),
/// across all pages, each once, in the cloud's order, as handles.
///
/// # Errors
/// The classified error of a failed page; `transport` for a malformed one.
pub fn find<C: RestCloud + ?Sized>(
    cloud: &C,
    transport: &impl Transport,
    owner_id: &str,
    request_id: Option<&str>,
) -> Result<Vec<NodeHandle>> {
    let mut seen = BTreeSet::new();
    let first = cloud.list(owner_id, request_id)?;
    let listed: Vec<C::Node> = collect(cloud, transport, first, C::LIST_ITEMS)?;
    Ok(listed
        .iter()
        .map(|node| handle(cloud, node))
        .filter(|node| {
            // The cloud filters already; checking again guarantees no
            // foreign node is ever returned. Pages shift while nodes come
            // and go, so repeats are dropped.
            owned_by(&node.labels, owner_id)
                && request_id
                    .is_none_or(|r| node.labels.get(REQUEST).map(String::as_str) == Some(r))
                && seen.insert(node.provider_id.clone())
        })
        .collect())
}

/// Creates a node for `request`, or returns the one created for it
/// already. The node created must read back with `owner_id` and the
/// request's id (as [`find`] would find it).
///
/// # Errors
/// The cloud's classified errors, and [`RestCloud::create`]'s; `other` (not
/// an error that says nothing was made) when the created node reads back
/// with another owner or request id.
pub fn provision<C: RestCloud + ?Sized>(
    cloud: &C,
    transport: &impl Transport,
    owner_id: &str,
    request: &ProvisionRequest,
) -> Result<NodeHandle> {
    let request_id = request.request_id.as_str();
    let existing = |cloud: &C| -> Result<Option<NodeHandle>> {
        Ok(find(cloud, transport, owner_id, Some(request_id))?
            .into_iter()
            .next())
    };
    if let Some(node) = existing(cloud)? {
        return Ok(node);
    }
    let labels = tags::node_labels(owner_id, request_id, &tags::request_labels(request));
    let create = cloud.create(request, &labels)?;
    match send(cloud, transport, create) {
        Ok(resp) => {
            let node = handle(cloud, &node_at::<C>(&resp, C::ONE_ITEM)?);
            // A node that does not read back as this owner's, for this
            // request (a cloud that changed its tags), would never be found
            // again: a second provision would make a second node. Not an
            // error that says nothing was made: the caller keeps the intent
            // and reconciles.
            if !owned_by(&node.labels, owner_id)
                || node.labels.get(REQUEST).map(String::as_str) != Some(request_id)
            {
                return Err(Error::Other(format!(
                    "{}: node {:?} was made for request {request_id:?} but reads back with \
                     owner {:?} and request {:?}; it is not found by its labels",
                    C::CLOUD,
                    node.provider_id,
                    node.labels.get(OWNER),
                    node.labels.get(REQUEST)
                )));
            }
            Ok(node)
        }
        // A concurrent provision of the same request may have won.
        Err(Error::Conflict(m)) => existing(cloud)?.ok_or(Error::Conflict(m)),
        Err(e) => Err(e),
    }
}

/// The node `provider_id` if it exists, is owned by `owner_id`, and the
/// answer is that node (its id is `provider_id`: an answer naming another
/// node is `None`, so no caller acts on one id after checking another's
/// owner).
///
/// # Errors
/// The cloud's classified errors (not `not_found`, which is `None`), and
/// [`RestCloud::check_id`]'s refusal of a misspelt id.
pub fn get<C: RestCloud + ?Sized>(
    cloud: &C,
    transport: &impl Transport,
    owner_id: &str,
    provider_id: &str,
) -> Result<Option<NodeHandle>> {
    cloud.check_id(provider_id)?;
    let Some(url) = cloud.node_url(provider_id) else {
        return Ok(None);
    };
    let node = match send(cloud, transport, Request::get(url)) {
        Ok(resp) => handle(cloud, &node_at::<C>(&resp, C::ONE_ITEM)?),
        Err(Error::NotFound(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    // The answer must be the node asked for: a cloud (or anything between)
    // answering with another node must not make the caller act on `provider_id`
    // after checking the owner of someone else's node.
    if node.provider_id != provider_id {
        crate::log::warn(&format!(
            "{}: asked for node {provider_id:?}, the answer is node {:?}; treated as not found",
            C::CLOUD,
            node.provider_id
        ));
        return Ok(None);
    }
    Ok(owned_by(&node.labels, owner_id).then_some(node))
}

/// Deletes node `provider_id` if `owner_id` owns it.
///
/// # Errors
/// `not_found` when it is gone, never was, or is another owner's; the
/// cloud's classified errors otherwise.
pub fn terminate<C: RestCloud + ?Sized>(
    cloud: &C,
    transport: &impl Transport,
    owner_id: &str,
    provider_id: &str,
) -> Result<()> {
    let url = cloud.node_url(provider_id);
    let (Some(url), Some(_)) = (url, get(cloud, transport, owner_id, provider_id)?) else {
        return Err(Error::NotFound(format!(
            "{} node {provider_id:?} does not exist or is not owned by this host",
            C::CLOUD
        )));
    };
    send(cloud, transport, Request::delete(url)).map(|_| ())
}

/// Every node owned by `owner_id`.
///
/// # Errors
/// The cloud's classified errors.
pub fn describe<C: RestCloud + ?Sized>(
    cloud: &C,
    transport: &impl Transport,
    owner_id: &str,
) -> Result<Vec<NodeHandle>> {
    find(cloud, transport, owner_id, None)
}

/// Replaces the labels of node `provider_id`, if `owner_id` owns it, with
/// `labels`, keeping its reserved labels (owner, request id, digest,
/// journal, group: [`wasmprov_api::provenance::is_reserved_label`]), through
/// [`RestCloud::relabel`]; answers the node as it is now.
///
/// # Errors
/// `not_found` when it is gone, never was, or is another owner's; the
/// cloud's classified errors otherwise.
pub fn set_labels<C: RestCloud + ?Sized>(
    cloud: &C,
    transport: &impl Transport,
    owner_id: &str,
    provider_id: &str,
    labels: &Labels,
) -> Result<NodeHandle> {
    let Some(node) = get(cloud, transport, owner_id, provider_id)? else {
        return Err(Error::NotFound(format!(
            "{} node {provider_id:?} does not exist or is not owned by this host",
            C::CLOUD
        )));
    };
    let mut all = labels.clone();
    all.extend(
        node.labels
            .into_iter()
            .filter(|(k, _)| wasmprov_api::provenance::is_reserved_label(k)),
    );
    let resp = send(cloud, transport, cloud.relabel(provider_id, &all)?)?;
    let answered = if C::ONE_ITEM.is_empty() {
        resp.json::<serde_json::Value>()
            .ok()
            .filter(|v| !v.is_null())
    } else {
        resp.json::<serde_json::Value>()
            .ok()
            .and_then(|v| v.pointer(C::ONE_ITEM).cloned())
    };
    match answered
        .and_then(|v| serde_json::from_value::<C::Node>(v).ok())
        .map(|n| handle(cloud, &n))
        .filter(|n| n.provider_id == provider_id && owned_by(&n.labels, owner_id))
    {
        Some(n) => Ok(n),
        None => get(cloud, transport, owner_id, provider_id)?.ok_or_else(|| {
            Error::NotFound(format!(
                "{} node {provider_id:?} went away while its labels were set",
                C::CLOUD
            ))
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    use serde::Deserialize;

    use super::*;
    use crate::classify::Kind;
    use crate::tags::FlatTags;
    use crate::{NodeShape, NodeStatus};

    /// A cloud with flat tags, numeric ids, `?tag=` filtering and
    /// page numbers; answered by a script over an in-memory list.
    struct Tiny;

    #[derive(Deserialize)]
    struct TinyNode {
        id: u64,
        tags: Vec<String>,
    }

    impl RestCloud for Tiny {
        type Node = TinyNode;
        const CLOUD: &'static str = "Tiny";
        const PAGING: Paging = Paging::Numbers {
            page: "page",
            size: 2,
            next: None,
            items: "/nodes",
        };
        const LIST_ITEMS: &'static str = "/nodes";
        const ONE_ITEM: &'static str = "/node";
        const ERRORS: &'static [Rule] = &[Rule::new(Some(422), "name", Kind::Conflict)];

        fn list(&self, owner_id: &str, request_id: Option<&str>) -> Result<Request> {
            let tag = match request_id {
                Some(r) => FlatTags::DIGITALOCEAN.encode(REQUEST, r)?,
                None => FlatTags::DIGITALOCEAN.encode(OWNER, owner_id)?,
            };
            Ok(Request::get("https://tiny/nodes")
                .query("tag", &tag)
                .query("per_page", "2"))
        }
        fn node_url(&self, id: &str) -> Option<String> {
            id.parse::<u64>()
                .ok()
                .map(|id| format!("https://tiny/nodes/{id}"))
        }
        fn create(&self, _request: &ProvisionRequest, labels: &Labels) -> Result<Request> {
            let tags = FlatTags::DIGITALOCEAN
                .encode_all(labels)
                .map_err(|e| Error::Unsupported(e.to_string()))?;
            Ok(Request::post("https://tiny/nodes").json(&serde_json::json!({ "tags": tags })))
        }
        fn authorize(&self, req: Request) -> Result<Request> {
            Ok(req.bearer("t"))
        }
        fn handle(&self, node: &TinyNode) -> NodeHandle {
            NodeHandle {
                provider_id: node.id.to_string(),
                labels: Preset::DIGITALOCEAN.decode_all(&node.tags),
                status: NodeStatus::Running,
                ..NodeHandle::default()
            }
        }
    }

    /// How a cloud rewrites the tags it stores.
    type Fold = fn(&str) -> String;

    /// The cloud: nodes by id; a create conflicts once when `race` is set
    /// (another provision made the node meanwhile).
    #[derive(Default)]
    struct Script {
        nodes: RefCell<BTreeMap<u64, Vec<String>>>,
        asked: RefCell<Vec<String>>,
        race: RefCell<bool>,
        /// Stores the tags of created nodes this way (a cloud that folds
        /// them to the case of a tag the account has already).
        fold: RefCell<Option<Fold>>,
        /// Answers every `GET /nodes/{id}` with this node instead (a cloud,
        /// or something between, answering with the wrong node).
        answer_as: RefCell<Option<u64>>,
    }

    fn answer(status: u16, body: serde_json::Value) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: body.to_string().into_bytes(),
            url: "https://tiny/".into(),
        }
    }

    impl Transport for Script {
        fn send(&self, req: Request) -> Result<Response> {
            assert!(
                req.headers()
                    .iter()
                    .any(|(k, v)| k == "authorization" && v == "Bearer t")
            );
            self.asked
                .borrow_mut()
                .push(format!("{} {}", req.method(), req.url()));
            let mut nodes = self.nodes.borrow_mut();
            let node = |id: u64, tags: &Vec<String>| serde_json::json!({"id": id, "tags": tags});
            let path = path_of(req.url()).to_string();
            Ok(match (req.method(), path.as_str()) {
                ("GET", "/nodes") => {
                    let tag = req.query_value("tag").unwrap();
                    let page: usize = req.query_value("page").unwrap().parse().unwrap();
                    let all: Vec<_> = nodes
                        .iter()
                        .filter(|(_, t)| t.iter().any(|t| t.eq_ignore_ascii_case(&tag)))
                        .map(|(id, t)| node(*id, t))
                        .collect();
                    answer(
                        200,
                        serde_json::json!({"nodes": all.iter().skip((page - 1) * 2).take(2).collect::<Vec<_>>()}),
                    )
                }
                ("POST", "/nodes") => {
                    let body: serde_json::Value = serde_json::from_slice(req.body_bytes()).unwrap();
                    let mut tags: Vec<String> =
                        serde_json::from_value(body["tags"].clone()).unwrap();
                    if let Some(fold) = *self.fold.borrow() {
                        tags = tags.iter().map(|t| fold(t)).collect();
                    }
                    let id = 100 + nodes.len() as u64;
                    nodes.insert(id, tags.clone());
                    if self.race.replace(false) {
                        answer(422, serde_json::json!({"message": "name already in use"}))
                    } else {
                        answer(201, serde_json::json!({"node": node(id, &tags)}))
                    }
                }
                (m, p) => {
                    let mut id: u64 = p.trim_start_matches("/nodes/").parse().unwrap();
                    if m == "GET" {
                        id = self.answer_as.borrow().unwrap_or(id);
                    }
                    match (m, nodes.get(&id).cloned()) {
                        (_, None) => answer(404, serde_json::json!({"message": "not found"})),
                        ("GET", Some(t)) => answer(200, serde_json::json!({"node": node(id, &t)})),
                        ("DELETE", Some(_)) => {
                            nodes.remove(&id);
                            answer(204, serde_json::Value::Null)
                        }
                        _ => unreachable!(),
                    }
                }
            })
        }
    }

    fn request(id: &str) -> ProvisionRequest {
        ProvisionRequest::new(id, NodeShape::new(1.0, 1 << 30))
    }

    #[test]
    fn provision_is_idempotent_and_a_lost_race_returns_the_winner() {
        let cloud = Script::default();
        let a = provision(&Tiny, &cloud, "o1", &request("r1")).unwrap();
        assert_eq!(a.labels.get(OWNER).map(String::as_str), Some("o1"));
        assert_eq!(a.labels.get(REQUEST).map(String::as_str), Some("r1"));
        assert!(a.labels.contains_key(tags::REQUEST_DIGEST));
        let again = provision(&Tiny, &cloud, "o1", &request("r1")).unwrap();
        assert_eq!(again.provider_id, a.provider_id);
        // Another owner's request of the same id is its own node.
        let b = provision(&Tiny, &cloud, "o2", &request("r1")).unwrap();
        assert_ne!(b.provider_id, a.provider_id);
        *cloud.race.borrow_mut() = true;
        let c = provision(&Tiny, &cloud, "o1", &request("r2")).unwrap();
        assert_eq!(cloud.nodes.borrow().len(), 3, "the race made one node");
        assert_eq!(c.labels.get(REQUEST).map(String::as_str), Some("r2"));
    }

    #[test]
    fn describe_walks_pages_and_keeps_only_the_owners_nodes() {
        let cloud = Script::default();
        for i in 0..5 {
            provision(&Tiny, &cloud, "o1", &request(&format!("r{i}"))).unwrap();
        }
        provision(&Tiny, &cloud, "o2", &request("x")).unwrap();
        let listed = describe(&Tiny, &cloud, "o1").unwrap();
        assert_eq!(listed.len(), 5);
        let pages = cloud
            .asked
            .borrow()
            .iter()
            .filter(|a| a.contains("tag=wasmprov-owner%3Ao1"))
            .count();
        assert_eq!(pages, 3, "{:?}", cloud.asked.borrow());
    }

    #[test]
    fn handles_are_read_where_the_fields_say() {
        const DROPLET: Fields = Fields {
            zone: "/region/slug",
            created: "/created_at",
            addresses: "/networks/v4",
            ..Fields::COMMON
        };
        let tags = FlatTags::DIGITALOCEAN
            .encode_all(&Labels::from([(OWNER.to_string(), "o".to_string())]))
            .unwrap();
        let droplet = serde_json::json!({
            "id": 7, "status": "active", "region": {"slug": "nyc3"}, "type": "s-1",
            "created_at": "2020-01-01T00:00:00Z", "tags": tags,
            "networks": {"v4": [{"ip_address": "203.0.113.1", "type": "public"},
                                {"ip_address": "10.0.0.2", "type": "private"}]},
        });
        let h = handle_of(&droplet, &DROPLET);
        assert_eq!(h.provider_id, "7");
        assert_eq!(h.labels.get(OWNER).map(String::as_str), Some("o"));
        assert_eq!(h.zone.as_deref(), Some("nyc3"));
        assert_eq!(h.instance_type.as_deref(), Some("s-1"));
        assert_eq!(h.created_at_ms, Some(1_577_836_800_000));
        assert_eq!(h.status, NodeStatus::Running);
        assert_eq!(
            (
                h.private_address.as_deref(),
                h.public_address.as_deref(),
                h.address.as_deref()
            ),
            (Some("10.0.0.2"), Some("203.0.113.1"), Some("10.0.0.2"))
        );
        // Linode's names are the common ones; its time is naive UTC.
        let linode = serde_json::json!({"id": "9", "status": "provisioning", "region": "us-east",
            "created": "2020-01-01T00:00:00", "ipv4": ["192.168.1.2"]});
        let h = handle_of(&linode, &Fields::COMMON);
        assert_eq!(
            (h.provider_id.as_str(), h.status),
            ("9", NodeStatus::Pending)
        );
        assert_eq!(h.created_at_ms, Some(1_577_836_800_000));
        assert_eq!(
            (h.public_address, h.private_address.as_deref()),
            (None, Some("192.168.1.2"))
        );
    }

    #[test]
    fn offerings_are_the_catalogue_as_the_cloud_sells_it() {
        struct Sizes;
        impl Transport for Sizes {
            fn send(&self, req: Request) -> Result<Response> {
                Ok(answer(
                    200,
                    serde_json::json!({"sizes": [
                    {"slug": "a", "price_hourly": 0.5, "regions": ["r1"], "available": true},
                    {"slug": "b", "price_hourly": 0.7, "regions": ["r1"], "available": false},
                ], "url": req.url()}),
                ))
            }
        }
        const TYPES: &[crate::shape::Entry] = &[
            crate::shape::Entry::new("a", 1, 1024, 10, 0.4),
            crate::shape::Entry::new("b", 1, 1024, 10, 0.6),
            crate::shape::Entry::new("c", 1, 1024, 10, 0.6),
        ];
        struct Sold;
        impl RestCloud for Sold {
            type Node = serde_json::Value;
            const CLOUD: &'static str = "Sold";
            const PAGING: Paging = Paging::Single;
            const LIST_ITEMS: &'static str = "/sizes";
            const ONE_ITEM: &'static str = "";
            fn list(&self, _: &str, _: Option<&str>) -> Result<Request> {
                unreachable!()
            }
            fn node_url(&self, _: &str) -> Option<String> {
                None
            }
            fn create(&self, _: &ProvisionRequest, _: &Labels) -> Result<Request> {
                unreachable!()
            }
            fn authorize(&self, req: Request) -> Result<Request> {
                Ok(req.bearer("t"))
            }
            fn handle(&self, node: &serde_json::Value) -> NodeHandle {
                handle_of(node, &Fields::COMMON)
            }
        }
        let listing =
            Listing::new("/sizes", "/slug", "/price_hourly", "/regions").available("/available");
        let got = offerings(
            &Sold,
            &Sizes,
            Request::get("https://x/sizes"),
            &listing,
            TYPES,
        )
        .unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(
            (got[0].instance_type.as_str(), got[0].on_demand_usd),
            ("a", Some(0.5))
        );
        assert_eq!(got[0].zones, ["r1"]);
    }

    #[test]
    fn a_node_that_reads_back_as_anothers_is_an_error_not_made_nothing() {
        let cloud = Script::default();
        // The cloud writes `wasmprov-owner:o1` as `wasmprov-owner:o2`.
        *cloud.fold.borrow_mut() = Some(|t| t.replace(":o1", ":o2"));
        let e = provision(&Tiny, &cloud, "o1", &request("r1")).unwrap_err();
        assert!(matches!(e, Error::Other(_)) && !e.made_nothing(), "{e:?}");
        assert_eq!(cloud.nodes.borrow().len(), 1);
        // A cloud that folds case (Tiny's tags are DigitalOcean's) still
        // gives back the owner and request: the retry finds the node.
        let cloud = Script::default();
        *cloud.fold.borrow_mut() = Some(|t| t.to_ascii_uppercase());
        let a = provision(&Tiny, &cloud, "o1", &request("r1")).unwrap();
        let b = provision(&Tiny, &cloud, "o1", &request("r1")).unwrap();
        assert_eq!(
            (a.provider_id, cloud.nodes.borrow().len()),
            (b.provider_id, 1)
        );
    }

    #[test]
    fn one_oversized_node_does_not_deny_the_owners_listing() {
        use wasmprov_api::{MAX_HANDLE_LABEL_KEY, MAX_HANDLE_LABEL_VALUE, MAX_HANDLE_LABELS};
        let cloud = Script::default();
        let a = provision(&Tiny, &cloud, "o1", &request("r1")).unwrap();
        let b = provision(&Tiny, &cloud, "o1", &request("r2")).unwrap();
        // Tagged by hand: a value over the host's limit, an empty key, a
        // key over it, and more labels than a node may carry.
        // A value over the limit fits a tag only in the long form.
        let id: u64 = a.provider_id.parse().unwrap();
        let mut extra = Preset::DIGITALOCEAN
            .encode("big", &"v".repeat(MAX_HANDLE_LABEL_VALUE + 1))
            .unwrap();
        assert!(extra.len() > 1, "{extra:?}");
        extra.push(":v".to_string());
        extra.push(format!("{}:v", "k".repeat(MAX_HANDLE_LABEL_KEY + 1)));
        extra.extend((0..MAX_HANDLE_LABELS).map(|i| format!("user-{i:03}:x")));
        cloud.nodes.borrow_mut().get_mut(&id).unwrap().extend(extra);
        let listed = describe(&Tiny, &cloud, "o1").unwrap();
        assert_eq!(listed.len(), 2);
        for n in &listed {
            assert!(n.labels.len() <= MAX_HANDLE_LABELS, "{}", n.labels.len());
            assert!(n.labels.iter().all(|(k, v)| !k.is_empty()
                && k.len() <= MAX_HANDLE_LABEL_KEY
                && v.len() <= MAX_HANDLE_LABEL_VALUE));
        }
        let tagged = listed
            .iter()
            .find(|n| n.provider_id == a.provider_id)
            .unwrap();
        assert_eq!(tagged.labels.get(OWNER).map(String::as_str), Some("o1"));
        assert_eq!(tagged.labels.get(REQUEST).map(String::as_str), Some("r1"));
        assert!(tagged.labels.contains_key(tags::REQUEST_DIGEST));
        assert!(tagged.labels.contains_key("user-000") && !tagged.labels.contains_key("big"));
        assert_eq!(
            listed
                .iter()
                .find(|n| n.provider_id == b.provider_id)
                .unwrap()
                .labels
                .len(),
            3
        );
        assert_eq!(
            get(&Tiny, &cloud, "o1", &a.provider_id)
                .unwrap()
                .unwrap()
                .labels
                .len(),
            MAX_HANDLE_LABELS
        );
    }

    #[test]
    fn an_answer_naming_another_node_is_not_the_node_asked_for() {
        let cloud = Script::default();
        let mine = provision(&Tiny, &cloud, "o1", &request("r1")).unwrap();
        let theirs = provision(&Tiny, &cloud, "o2", &request("r1")).unwrap();
        // GET /nodes/<theirs> answers with o1's node.
        let mine_id: u64 = mine.provider_id.parse().unwrap();
        *cloud.answer_as.borrow_mut() = Some(mine_id);
        assert!(
            get(&Tiny, &cloud, "o1", &theirs.provider_id)
                .unwrap()
                .is_none()
        );
        assert!(matches!(
            terminate(&Tiny, &cloud, "o1", &theirs.provider_id),
            Err(Error::NotFound(_))
        ));
        assert!(matches!(
            set_labels(&Tiny, &cloud, "o1", &theirs.provider_id, &Labels::new()),
            Err(Error::NotFound(_))
        ));
        assert!(
            !cloud
                .asked
                .borrow()
                .iter()
                .any(|r| r.starts_with("DELETE") || r.starts_with("PUT")),
            "{:?}",
            cloud.asked.borrow()
        );
        assert_eq!(cloud.nodes.borrow().len(), 2, "nothing was deleted");
        // Asked for itself, the node is found and deleted.
        terminate(&Tiny, &cloud, "o1", &mine.provider_id).unwrap();
        assert_eq!(cloud.nodes.borrow().len(), 1);
    }

    #[test]
    fn terminate_and_get_check_the_owner_first() {
        let cloud = Script::default();
        let a = provision(&Tiny, &cloud, "o1", &request("r1")).unwrap();
        assert!(get(&Tiny, &cloud, "o2", &a.provider_id).unwrap().is_none());
        assert!(matches!(
            terminate(&Tiny, &cloud, "o2", &a.provider_id),
            Err(Error::NotFound(_))
        ));
        assert!(!cloud.asked.borrow().iter().any(|r| r.starts_with("DELETE")));
        assert_eq!(
            get(&Tiny, &cloud, "o1", &a.provider_id)
                .unwrap()
                .unwrap()
                .provider_id,
            a.provider_id
        );
        terminate(&Tiny, &cloud, "o1", &a.provider_id).unwrap();
        assert!(matches!(
            terminate(&Tiny, &cloud, "o1", &a.provider_id),
            Err(Error::NotFound(_))
        ));
        assert!(matches!(
            terminate(&Tiny, &cloud, "o1", "not-a-number"),
            Err(Error::NotFound(_))
        ));
        assert!(get(&Tiny, &cloud, "o1", "nope").unwrap().is_none());
    }
}
