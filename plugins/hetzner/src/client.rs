//! The provisioner operations against the Hetzner Cloud API, written over a
//! small [`Transport`] so that they run natively in unit tests with a
//! scripted API, and over `wasi:http` in the component.
//!
//! Listing, reading and deleting servers are the SDK's `rest` layer
//! ([`RestCloud`] below: the owner checked before a read or a delete, every
//! page walked, a server listed twice kept once); creating stays here, for
//! what is Hetzner's own: SSH keys registered in the project, and a second
//! server name when a stranger holds the first.

use wasmprov_guest::http::{Request, Response};
use wasmprov_guest::ids::numeric_id;
use wasmprov_guest::pages::{self, Paging};
use wasmprov_guest::rest::{self, RestCloud};
use wasmprov_guest::tags;
use wasmprov_guest::{Error, Labels, NodeHandle, ProvisionRequest, Result};

use crate::api::{
    ApiFailure, CreateServer, CreateSshKey, OneNetwork, OneServer, OneSshKey, Server, ServerList,
    SshKey, SshKeyList, UpdateLabels,
};
use crate::catalogue;
use crate::labels;
use crate::settings::{MAX_USER_DATA, Settings};

/// Most pages `describe` reads before it gives up on a server that keeps
/// announcing a next page (the SDK's bound).
pub const MAX_PAGES: u64 = pages::MAX_PAGES as u64;

/// What the operations need from the outside world: requests whose URLs
/// are paths below the endpoint (the transport adds the endpoint and the
/// bearer token), a log, a clock.
pub trait Transport: rest::Transport {
    /// Emits one `info` log record.
    fn info(&self, message: &str, fields: &[(&str, &str)]);

    /// Seconds since the Unix epoch (for `RateLimit-Reset`, and the time
    /// of a floating IP claim).
    fn now_unix(&self) -> u64;

    /// Waits `millis` milliseconds (between reads of a running action).
    fn pause(&self, millis: u64);
}

/// The operations, over a transport.
#[derive(Debug)]
pub struct Client<'a, T> {
    settings: &'a Settings,
    pub(crate) transport: T,
}

pub(crate) type Answer = std::result::Result<Response, ApiFailure>;

impl<'a, T: Transport> Client<'a, T> {
    /// A client with these settings over `transport`.
    pub fn new(settings: &'a Settings, transport: T) -> Self {
        Self {
            settings,
            transport,
        }
    }

    /// Sends `req`; `Err` for no response, `Ok(Err)` for an error status.
    pub(crate) fn call(&self, req: Request) -> Result<Answer> {
        let resp = rest::Transport::send(&self.transport, req)?;
        if resp.is_success() {
            Ok(Ok(resp))
        } else {
            Ok(Err(ApiFailure::from_response(
                &resp,
                self.transport.now_unix(),
            )))
        }
    }

    /// The server created for this request, if any (the lowest id when,
    /// against all odds, there are several).
    fn find_for_request(&self, owner_id: &str, request_id: &str) -> Result<Option<NodeHandle>> {
        let found = rest::find(self, &self.transport, owner_id, Some(request_id))?;
        Ok(found
            .into_iter()
            .min_by_key(|n| n.provider_id.parse::<u64>().unwrap_or(u64::MAX)))
    }

    /// Creates a server, or returns the one already created for the request.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for spot or impossible shapes, and the API's
    /// errors mapped by [`ApiFailure::into_error`].
    pub fn provision(&self, owner_id: &str, request: &ProvisionRequest) -> Result<NodeHandle> {
        let shape = &request.shape;
        if shape.capacity_type == wasmprov_guest::CapacityType::Spot {
            return Err(Error::Unsupported(
                "Hetzner Cloud has no spot capacity; ask for on-demand".into(),
            ));
        }
        let request_id = request.request_id.as_str();
        if let Some(existing) = self.find_for_request(owner_id, request_id)? {
            return Ok(existing);
        }
        let networks = self.network_ids(request.subnet.as_deref())?;
        let ssh_keys = self.ssh_key_ids(&request.boot.ssh_keys)?;
        // The fallback name is made only when the first is taken.
        let names = std::iter::once(labels::server_name(&self.settings.name_prefix, request_id))
            .chain(std::iter::once_with(|| {
                labels::fallback_server_name(&self.settings.name_prefix, owner_id, request_id)
            }));
        let mut tried = Vec::new();
        for name in names {
            let (create, choice) =
                self.create_request(owner_id, request, &name, &ssh_keys, &networks)?;
            match self.call(create)? {
                Ok(resp) => {
                    let created: OneServer = resp.json()?;
                    let handle = created.server.to_handle();
                    self.transport.info(
                        "created Hetzner server",
                        &[
                            ("server_id", &handle.provider_id),
                            ("name", &created.server.name),
                            ("server_type", choice.server_type.name),
                            ("cpu_type", choice.server_type.cpu_type),
                            ("architecture", choice.server_type.arch.as_str()),
                            ("location", choice.location),
                            ("owner", owner_id),
                            ("request_id", request_id),
                        ],
                    );
                    return Ok(handle);
                }
                Err(f) if f.is_uniqueness_error() => {
                    // A concurrent provision of the same request won the
                    // race: return its server.
                    if let Some(existing) = self.find_for_request(owner_id, request_id)? {
                        return Ok(existing);
                    }
                    // The label search may not list a server made a moment
                    // ago (an earlier attempt of this request whose answer
                    // was lost): ask for the name itself before taking its
                    // holder for a stranger, and never make a second server
                    // on a guess.
                    match self.server_named(&name)? {
                        Some(s) if labels::is_for_request(&s.labels(), owner_id, request_id) => {
                            return Ok(s.to_handle());
                        }
                        Some(_) => {}
                        None => {
                            return Err(Error::Transport(format!(
                                "Hetzner Cloud says server name {name} is taken, but lists no server of that name yet (a server made moments ago may not be listed); retry"
                            )));
                        }
                    }
                }
                Err(f) => return Err(f.into_error()),
            }
            tried.push(name);
        }
        Err(Error::Other(format!(
            "server names {} are already used by servers not created for request {request_id:?}",
            tried.join(" and ")
        )))
    }

    /// The request creating `request`'s server under `name`, with the
    /// project's ids of its SSH keys; and the type and location chosen.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a shape no type fits, user data that is
    /// not UTF-8 or too long; [`Error::Capacity`] for a location without it.
    fn create_request(
        &self,
        owner_id: &str,
        request: &ProvisionRequest,
        name: &str,
        ssh_keys: &[u64],
        networks: &[u64],
    ) -> Result<(Request, catalogue::Choice)> {
        let choice = catalogue::choose(
            &request.shape,
            &self.settings.location,
            self.settings.architecture,
        )?;
        // Boot data of the request wins over the configured image and user data.
        let image = request
            .boot
            .image
            .as_deref()
            .unwrap_or(&self.settings.image);
        let user_data = match request.boot.user_data_text()? {
            Some(text) => Some(text),
            None => self.settings.user_data.as_deref(),
        };
        if let Some(data) = user_data
            && data.len() > MAX_USER_DATA
        {
            return Err(Error::Unsupported(format!(
                "user data is {} bytes; Hetzner Cloud takes at most {MAX_USER_DATA}",
                data.len()
            )));
        }
        let server_labels = labels::server_labels(
            owner_id,
            &request.request_id,
            &tags::request_labels(request),
        );
        let body = CreateServer {
            name,
            server_type: choice.server_type.name,
            image,
            location: choice.location,
            labels: &server_labels,
            user_data,
            ssh_keys,
            start_after_create: true,
            networks,
        };
        Ok((Request::post("/servers").json(&body), choice))
    }

    /// The networks a server for a request with `subnet` is attached to:
    /// none without one, else the network it names, which must exist.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a subnet that is not a network id, or a
    /// network the project does not have: the server is never made
    /// elsewhere. The API's errors otherwise.
    fn network_ids(&self, subnet: Option<&str>) -> Result<Vec<u64>> {
        let Some(subnet) = subnet else {
            return Ok(Vec::new());
        };
        let Ok(id) = numeric_id("network", subnet) else {
            return Err(Error::Unsupported(format!(
                "Hetzner Cloud places a server in a network by the network's numeric id (decimal digits, no sign, no leading zero); {subnet:?} is not one"
            )));
        };
        match self.call(Request::get(format!("/networks/{id}")))? {
            Ok(resp) => Ok(vec![resp.json::<OneNetwork>()?.network.id]),
            Err(f) if f.is_not_found() => Err(Error::Unsupported(format!(
                "Hetzner network {id} does not exist in this project; the server was not created"
            ))),
            Err(f) => Err(f.into_error()),
        }
    }

    /// Server `provider_id` as the API has it, when it carries this
    /// owner's label.
    ///
    /// # Errors
    /// [`Error::NotFound`] when it is gone or is another owner's;
    /// [`Error::Unsupported`] for an id that is not a canonical server id
    /// ([`numeric_id`]); the API's errors otherwise.
    pub(crate) fn owned_server(&self, owner_id: &str, provider_id: &str) -> Result<Server> {
        let not_found = || {
            Error::NotFound(format!(
                "Hetzner server {provider_id:?} does not exist or is not owned by this host"
            ))
        };
        rest::RestCloud::check_id(self, provider_id)?;
        let url = rest::RestCloud::node_url(self, provider_id).ok_or_else(not_found)?;
        let server = match self.call(Request::get(url))? {
            Ok(resp) => resp.json::<OneServer>()?.server,
            Err(f) if f.is_not_found() => return Err(not_found()),
            Err(f) => return Err(f.into_error()),
        };
        if labels::is_owned_by(&server.labels(), owner_id) {
            Ok(server)
        } else {
            Err(not_found())
        }
    }

    /// Replaces the labels of server `provider_id` of this owner with
    /// `new`, keeping the labels that say who made it and what for; the
    /// SDK's `rest::set_labels` checks the owner and keeps them, through
    /// [`RestCloud::relabel`] below. Answers the server as it is now.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a server that is gone or another owner's;
    /// [`Error::Unsupported`] for a key or value Hetzner cannot store
    /// (nothing is sent).
    pub fn set_labels(
        &self,
        owner_id: &str,
        provider_id: &str,
        new: &Labels,
    ) -> Result<NodeHandle> {
        if let Some((k, v)) = new
            .iter()
            .find(|(k, v)| !labels::is_valid_label_key(k) || !labels::is_valid_label_value(v))
        {
            return Err(Error::Unsupported(format!(
                "Hetzner Cloud cannot store label {k}={v}: keys and values are up to 63 letters, digits, '-', '_' and '.' (a key may have a DNS prefix and '/')"
            )));
        }
        let node = rest::set_labels(self, &self.transport, owner_id, provider_id, new)?;
        self.transport.info(
            "relabelled Hetzner server",
            &[("server_id", &node.provider_id), ("owner", owner_id)],
        );
        Ok(node)
    }

    /// The project's ids of `keys`, registering the ones it does not have.
    ///
    /// The API takes only keys registered in the project. Each key is
    /// registered once, under a name made from its digest
    /// (`wasmprov-<16 hex>`), labelled as this plugin's; a key the operator
    /// registered already, under any name, is used as it is. Keys are shared
    /// by every server that asks for them and are not removed with a server.
    ///
    /// # Errors
    /// The API's errors; a key the API refuses is unsupported.
    fn ssh_key_ids(&self, keys: &[String]) -> Result<Vec<u64>> {
        let mut ids = Vec::with_capacity(keys.len());
        for key in keys {
            // Type and data identify a key; the comment does not.
            let bare = tags::ssh_key_identity(key);
            let name = tags::ssh_key_name(key);
            let same = |k: &SshKey| tags::ssh_key_identity(&k.public_key) == bare;
            let named = Request::get("/ssh_keys").query("name", &name);
            let found: SshKeyList = self.call(named)?.map_err(ApiFailure::into_error)?.json()?;
            if let Some(k) = found.ssh_keys.iter().find(|k| same(k)) {
                ids.push(k.id);
                continue;
            }
            let managed = Labels::from([("wasmprov-managed".to_string(), "true".to_string())]);
            let create = Request::post("/ssh_keys").json(&CreateSshKey {
                name: &name,
                public_key: key,
                labels: &managed,
            });
            match self.call(create)? {
                Ok(resp) => ids.push(resp.json::<OneSshKey>()?.ssh_key.id),
                // Registered already (by the operator, or by a concurrent
                // call): find it by its key.
                Err(f) if f.is_uniqueness_error() => ids.push(self.find_ssh_key(&same, &name)?),
                Err(f) if f.status == 400 || f.status == 422 => {
                    return Err(Error::Unsupported(format!(
                        "Hetzner Cloud refused an SSH key: {}",
                        f.message
                    )));
                }
                Err(f) => return Err(f.into_error()),
            }
        }
        Ok(ids)
    }

    /// The id of the registered key `same` picks, looking through every page.
    fn find_ssh_key(&self, same: &dyn Fn(&SshKey) -> bool, name: &str) -> Result<u64> {
        let mut page = 1;
        loop {
            let req = Request::get("/ssh_keys")
                .query("per_page", "50")
                .query("page", &page.to_string());
            let list: SshKeyList = self.call(req)?.map_err(ApiFailure::into_error)?.json()?;
            if let Some(k) = list.ssh_keys.iter().find(|k| same(k)) {
                return Ok(k.id);
            }
            match list
                .meta
                .and_then(|m| m.pagination)
                .and_then(|p| p.next_page)
            {
                Some(next) if next > page => page = next,
                _ => {
                    return Err(Error::Other(format!(
                        "Hetzner Cloud says SSH key {name} exists, but no registered key has its data"
                    )));
                }
            }
        }
    }

    /// The server named exactly `name`, if the API lists one
    /// (`GET /servers?name=`).
    fn server_named(&self, name: &str) -> Result<Option<Server>> {
        let req = Request::get("/servers").query("name", name);
        let list: ServerList = self.call(req)?.map_err(ApiFailure::into_error)?.json()?;
        Ok(list.servers.into_iter().find(|s| s.name == name))
    }

    /// Deletes server `provider_id` if it carries this owner's label.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the server is gone, was never a server id,
    /// or is not owned by `owner_id`; the API's errors otherwise.
    pub fn terminate(&self, owner_id: &str, provider_id: &str) -> Result<()> {
        rest::terminate(self, &self.transport, owner_id, provider_id)?;
        self.transport.info(
            "deleted Hetzner server",
            &[("server_id", provider_id.trim()), ("owner", owner_id)],
        );
        Ok(())
    }

    /// Server `provider_id` when it exists and carries this owner's label.
    ///
    /// # Errors
    /// The API's errors (not a 404, which is `None`).
    pub fn get(&self, owner_id: &str, provider_id: &str) -> Result<Option<NodeHandle>> {
        rest::get(self, &self.transport, owner_id, provider_id)
    }

    /// Every server labelled with this owner, across all pages.
    ///
    /// # Errors
    /// [`Error::Transport`] when the API keeps paginating (more than
    /// [`MAX_PAGES`] pages, or a next page already read); the API's errors
    /// otherwise.
    pub fn describe(&self, owner_id: &str) -> Result<Vec<NodeHandle>> {
        rest::describe(self, &self.transport, owner_id)
    }
}

impl<T: Transport> RestCloud for Client<'_, T> {
    type Node = Server;
    const CLOUD: &'static str = "Hetzner API";
    const PAGING: Paging = Paging::Numbers {
        page: "page",
        size: 50,
        next: Some("/meta/pagination/next_page"),
        items: "/servers",
    };
    const LIST_ITEMS: &'static str = "/servers";
    const ONE_ITEM: &'static str = "/server";

    fn list(&self, owner_id: &str, request_id: Option<&str>) -> Result<Request> {
        let selector = match request_id {
            Some(r) => labels::request_selector(owner_id, r),
            None => labels::owner_selector(owner_id),
        };
        Ok(Request::get("/servers")
            .query("label_selector", &selector)
            .query("per_page", &self.settings.page_size.to_string()))
    }

    fn node_url(&self, id: &str) -> Option<String> {
        let id = numeric_id("server", id).ok()?;
        Some(format!("/servers/{id}"))
    }

    fn check_id(&self, id: &str) -> Result<()> {
        numeric_id("server", id).map(|_| ())
    }

    /// The create under the request's first server name. (`Client::provision`
    /// also tries a second name when a stranger holds the first.)
    fn create(&self, request: &ProvisionRequest, labels: &Labels) -> Result<Request> {
        let owner_id = labels.get(tags::OWNER).map_or("", String::as_str);
        let name = labels::server_name(&self.settings.name_prefix, &request.request_id);
        let networks = self.network_ids(request.subnet.as_deref())?;
        let ssh_keys = self.ssh_key_ids(&request.boot.ssh_keys)?;
        Ok(self
            .create_request(owner_id, request, &name, &ssh_keys, &networks)?
            .0)
    }

    /// `PUT /servers/{id}` with every label the server is to have; the
    /// answer holds the server.
    fn relabel(&self, id: &str, labels: &Labels) -> Result<Request> {
        let url = self
            .node_url(id)
            .ok_or_else(|| Error::NotFound(format!("{id:?} is not a Hetzner server id")))?;
        Ok(Request::put(url).json(&UpdateLabels { labels }))
    }

    fn authorize(&self, req: Request) -> Result<Request> {
        // The transport adds the token.
        Ok(req)
    }

    fn handle(&self, server: &Server) -> NodeHandle {
        server.to_handle()
    }

    /// Hetzner's error envelope says more than status and message
    /// ([`ApiFailure`]).
    fn error(&self, resp: &Response, _what: &str) -> Error {
        ApiFailure::from_response(resp, self.transport.now_unix()).into_error()
    }
}

/// The scripted API, shared with the networking tests.
#[cfg(test)]
pub(crate) mod tests {
    use std::cell::RefCell;
    use std::collections::VecDeque;

    use serde_json::{Value, json};
    use wasmprov_guest::tags::{OWNER, REQUEST, id_tag, label_value};
    use wasmprov_guest::{CapacityType, JoinState, Labels, NodeShape};

    use super::*;

    /// HTTP method of an API call.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum Method {
        /// `GET`.
        Get,
        /// `POST`.
        Post,
        /// `PUT`.
        Put,
        /// `DELETE`.
        Delete,
    }

    /// What a test sees of a request: one API call, relative to the
    /// configured endpoint.
    #[derive(Clone, Debug, PartialEq)]
    pub(crate) struct ApiRequest {
        /// Method.
        pub method: Method,
        /// Path below the endpoint, e.g. `/servers/42`.
        pub path: String,
        /// Query parameters, not yet encoded.
        pub query: Vec<(String, String)>,
        /// JSON body.
        pub body: Option<serde_json::Value>,
    }

    impl ApiRequest {
        /// The call a request of the `rest` layer stands for: its URL is a
        /// path below the endpoint, with a query.
        ///
        /// # Errors
        /// [`Error::Other`] for a method this API is not called with, or a body
        /// that is not JSON.
        fn of(req: &Request) -> Result<Self> {
            let method = match req.method() {
                "GET" => Method::Get,
                "POST" => Method::Post,
                "PUT" => Method::Put,
                "DELETE" => Method::Delete,
                m => return Err(Error::Other(format!("the Hetzner client sends no {m}"))),
            };
            let path = req.url().split_once('?').map_or(req.url(), |(p, _)| p);
            let query = req.query_pairs();
            let body =
                match req.body_bytes() {
                    [] => None,
                    bytes => Some(serde_json::from_slice(bytes).map_err(|e| {
                        Error::Other(format!("a request body that is not JSON: {e}"))
                    })?),
                };
            Ok(Self {
                method,
                path: path.to_string(),
                query,
                body,
            })
        }

        /// The value of query parameter `key`.
        #[must_use]
        fn param(&self, key: &str) -> Option<&str> {
            self.query
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        }
    }

    type LogRecord = (String, Vec<(String, String)>);
    type Responder = Box<dyn Fn(&ApiRequest) -> Response>;

    /// A scripted API: answers in order, records requests and log records.
    #[derive(Default)]
    pub(crate) struct Script {
        answers: RefCell<VecDeque<Response>>,
        requests: RefCell<Vec<ApiRequest>>,
        pub(crate) logs: RefCell<Vec<LogRecord>>,
        /// When set, answers every request with this closure instead.
        dynamic: Option<Responder>,
    }

    impl Script {
        pub(crate) fn new(answers: Vec<Response>) -> Self {
            Self {
                answers: RefCell::new(answers.into()),
                ..Self::default()
            }
        }
        pub(crate) fn requests(&self) -> Vec<ApiRequest> {
            self.requests.borrow().clone()
        }
    }

    impl rest::Transport for &Script {
        fn send(&self, req: Request) -> Result<Response> {
            let req = ApiRequest::of(&req)?;
            self.requests.borrow_mut().push(req.clone());
            if let Some(f) = &self.dynamic {
                return Ok(f(&req));
            }
            self.answers
                .borrow_mut()
                .pop_front()
                .ok_or_else(|| Error::Transport(format!("unexpected request {req:?}")))
        }
    }

    impl Transport for &Script {
        fn info(&self, message: &str, fields: &[(&str, &str)]) {
            self.logs.borrow_mut().push((
                message.to_string(),
                fields
                    .iter()
                    .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
                    .collect(),
            ));
        }
        fn now_unix(&self) -> u64 {
            1_700_000_000
        }
        fn pause(&self, _millis: u64) {}
    }

    pub(crate) fn resp(status: u16, body: Value) -> Response {
        Response {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string().into_bytes(),
            url: "http://fake/v1/servers".into(),
        }
    }

    fn err(status: u16, code: &str) -> Response {
        resp(
            status,
            json!({"error": {"code": code, "message": code, "details": {}}}),
        )
    }

    pub(crate) fn server(id: u64, status: &str, labels: Value) -> Value {
        json!({
            "id": id, "name": format!("wp-{id}"), "status": status,
            "public_net": {"ipv4": {"ip": format!("203.0.113.{}", id % 250)}, "ipv6": null},
            "server_type": {"name": "cx22"},
            "datacenter": {"name": "fsn1-dc14", "location": {"name": "fsn1"}},
            "labels": labels
        })
    }

    pub(crate) fn owned(owner: &str, request: &str) -> Value {
        json!({OWNER: id_tag(owner), REQUEST: id_tag(request)})
    }

    fn page(servers: Vec<Value>, next: Option<u64>) -> Response {
        resp(
            200,
            json!({"servers": servers, "meta": {"pagination": {"next_page": next}}}),
        )
    }

    fn request(id: &str, shape: NodeShape) -> ProvisionRequest {
        ProvisionRequest {
            request_id: id.into(),
            shape,
            boot: Default::default(),
            subnet: None,
        }
    }

    #[test]
    fn provision_creates_one_labelled_server() {
        let settings = Settings {
            user_data: Some("#cloud-config\n".into()),
            ..Settings::default()
        };
        let script = Script::new(vec![
            page(vec![], None),
            resp(
                201,
                json!({"server": server(9, "initializing", owned("host-a", "req-1")),
                       "action": {"id": 1}}),
            ),
        ]);
        let client = Client::new(&settings, &script);
        let mut shape = NodeShape::new(2.0, 4 << 30);
        shape.labels = Labels::from([("pool".to_string(), "a b".to_string())]);
        let h = client
            .provision("host-a", &request("req-1", shape))
            .unwrap();
        assert_eq!(h.provider_id, "9");
        assert_eq!(h.join_state, JoinState::Provisioning);
        assert_eq!(h.capacity_type, CapacityType::OnDemand);
        assert_eq!(h.zone.as_deref(), Some("fsn1"));

        let reqs = script.requests();
        assert_eq!(reqs.len(), 2);
        assert_eq!(reqs[0].method, Method::Get);
        assert_eq!(reqs[0].path, "/servers");
        assert_eq!(
            reqs[0].param("label_selector"),
            Some("wasmprov-owner==host-a,wasmprov-request==req-1")
        );
        assert_eq!(reqs[1].method, Method::Post);
        let body = reqs[1].body.as_ref().unwrap();
        assert_eq!(body["name"], "wp-req-1");
        assert_eq!(body["server_type"], "cax11");
        assert_eq!(body["image"], "ubuntu-24.04");
        assert_eq!(body["location"], "fsn1");
        assert_eq!(body["user_data"], "#cloud-config\n");
        assert_eq!(body["labels"][OWNER], "host-a");
        assert_eq!(body["labels"][REQUEST], "req-1");
        assert_eq!(body["labels"]["pool"], label_value("a b"));

        let logs = script.logs.borrow();
        assert_eq!(logs.len(), 1);
        assert!(logs[0].1.iter().any(|(k, v)| k == "server_id" && v == "9"));
    }

    #[test]
    fn the_rest_layer_provisions_with_the_same_create() {
        let settings = Settings::default();
        let script = Script::new(vec![
            page(vec![], None),
            resp(
                201,
                json!({"server": server(9, "initializing", owned("host-a", "req-1"))}),
            ),
        ]);
        let client = Client::new(&settings, &script);
        let h = rest::provision(
            &client,
            &&script,
            "host-a",
            &request("req-1", NodeShape::new(2.0, 4 << 30)),
        )
        .unwrap();
        assert_eq!(h.provider_id, "9");
        let reqs = script.requests();
        assert_eq!(
            reqs[0].param("label_selector"),
            Some("wasmprov-owner==host-a,wasmprov-request==req-1")
        );
        let body = reqs[1].body.as_ref().unwrap();
        assert_eq!(
            (reqs[1].method, reqs[1].path.as_str()),
            (Method::Post, "/servers")
        );
        assert_eq!(body["name"], "wp-req-1");
        assert_eq!(body["server_type"], "cax11");
        assert_eq!(body["labels"][OWNER], "host-a");
        // And `get` reads the one server, owner checked.
        let script = Script::new(vec![resp(
            200,
            json!({"server": server(9, "running", owned("host-b", "req-1"))}),
        )]);
        let client = Client::new(&settings, &script);
        assert_eq!(client.get("host-a", "9").unwrap(), None);
    }

    #[test]
    fn provision_returns_the_existing_server() {
        let settings = Settings::default();
        let script = Script::new(vec![page(
            vec![
                server(12, "running", owned("host-a", "req-1")),
                server(11, "running", owned("host-a", "req-1")),
            ],
            None,
        )]);
        let client = Client::new(&settings, &script);
        let h = client
            .provision("host-a", &request("req-1", NodeShape::default()))
            .unwrap();
        assert_eq!(h.provider_id, "11");
        assert_eq!(h.join_state, JoinState::Joining);
        assert_eq!(script.requests().len(), 1);
    }

    #[test]
    fn provision_race_returns_the_winner() {
        let settings = Settings::default();
        let script = Script::new(vec![
            page(vec![], None),
            err(409, "uniqueness_error"),
            page(
                vec![server(5, "initializing", owned("host-a", "req-1"))],
                None,
            ),
        ]);
        let client = Client::new(&settings, &script);
        let h = client
            .provision("host-a", &request("req-1", NodeShape::default()))
            .unwrap();
        assert_eq!(h.provider_id, "5");
        assert!(script.logs.borrow().is_empty());
    }

    #[test]
    fn provision_uses_the_fallback_name_when_a_stranger_has_the_name() {
        let settings = Settings::default();
        let named = |name: &str, labels: Value| {
            let mut s = server(9, "running", labels);
            s["name"] = json!(name);
            s
        };
        let fallback = labels::fallback_server_name("wp", "host-b", "req-1");
        let script = Script::new(vec![
            page(vec![], None),
            err(409, "uniqueness_error"),
            page(vec![], None),
            page(vec![named("wp-req-1", owned("host-a", "req-1"))], None),
            resp(
                201,
                json!({"server": server(6, "initializing", owned("host-b", "req-1"))}),
            ),
        ]);
        let client = Client::new(&settings, &script);
        let h = client
            .provision("host-b", &request("req-1", NodeShape::default()))
            .unwrap();
        assert_eq!(h.provider_id, "6");
        let reqs = script.requests();
        assert_eq!(reqs[3].param("name"), Some("wp-req-1"));
        let first = reqs[1].body.as_ref().unwrap()["name"].clone();
        let second = reqs[4].body.as_ref().unwrap()["name"].clone();
        assert_eq!(first, "wp-req-1");
        assert_eq!(second, json!(fallback));

        // Both names taken by strangers: a clear error, no third attempt.
        let script = Script::new(vec![
            page(vec![], None),
            err(409, "uniqueness_error"),
            page(vec![], None),
            page(vec![named("wp-req-1", json!({}))], None),
            err(409, "uniqueness_error"),
            page(vec![], None),
            page(vec![named(&fallback, owned("host-b", "req-2"))], None),
        ]);
        let client = Client::new(&settings, &script);
        let e = client
            .provision("host-b", &request("req-1", NodeShape::default()))
            .unwrap_err();
        assert!(matches!(e, Error::Other(_)), "{e:?}");
        assert_eq!(script.requests().len(), 7);
        let msg = e.to_string();
        assert!(msg.contains(&format!("wp-req-1 and {fallback}")), "{msg}");
    }

    /// The label search does not list a server made a moment ago (an
    /// earlier attempt of the same request, whose answer was lost): a 409
    /// on the request's own name is never taken for a stranger's on that
    /// evidence alone, so no second server is made for one request.
    #[test]
    fn a_taken_name_the_lists_do_not_show_yet_makes_no_second_server() {
        let settings = Settings::default();
        // The name lookup finds this request's own server: it is the answer.
        let mut mine = server(7, "initializing", owned("host-a", "req-1"));
        mine["name"] = json!("wp-req-1");
        let script = Script::new(vec![
            page(vec![], None),
            err(409, "uniqueness_error"),
            page(vec![], None),
            page(vec![mine], None),
        ]);
        let client = Client::new(&settings, &script);
        let h = client
            .provision("host-a", &request("req-1", NodeShape::default()))
            .unwrap();
        assert_eq!(h.provider_id, "7");
        let posts = |s: &Script| {
            s.requests()
                .iter()
                .filter(|r| r.method == Method::Post)
                .count()
        };
        assert_eq!(posts(&script), 1);

        // Neither list shows the name yet: a retryable error, nothing made.
        let script = Script::new(vec![
            page(vec![], None),
            err(409, "uniqueness_error"),
            page(vec![], None),
            page(vec![], None),
        ]);
        let client = Client::new(&settings, &script);
        let e = client
            .provision("host-a", &request("req-1", NodeShape::default()))
            .unwrap_err();
        assert!(matches!(e, Error::Transport(_)), "{e:?}");
        assert_eq!(e.kind(), "transport", "{e}");
        assert_eq!(posts(&script), 1);
        assert_eq!(script.requests().len(), 4);

        // The name lookup itself fails: its error, nothing made.
        let script = Script::new(vec![
            page(vec![], None),
            err(409, "uniqueness_error"),
            page(vec![], None),
            err(503, "unavailable"),
        ]);
        let client = Client::new(&settings, &script);
        let e = client
            .provision("host-a", &request("req-1", NodeShape::default()))
            .unwrap_err();
        assert_eq!(posts(&script), 1, "{e:?}");
    }

    #[test]
    fn provision_maps_errors_and_refuses_spot_without_io() {
        let settings = Settings::default();
        let spot = NodeShape {
            capacity_type: CapacityType::Spot,
            ..NodeShape::default()
        };
        let script = Script::new(vec![]);
        let client = Client::new(&settings, &script);
        assert!(matches!(
            client.provision("o", &request("r", spot)),
            Err(Error::Unsupported(_))
        ));
        assert!(script.requests().is_empty());

        let cases: Vec<(Response, &str)> = vec![
            (err(403, "resource_limit_exceeded"), "quota"),
            (err(412, "resource_unavailable"), "capacity"),
            (err(401, "unauthorized"), "auth"),
            (err(500, "server_error"), "transport"),
            (resp(201, json!({"not": "a server"})), "transport"),
        ];
        for (answer, kind) in cases {
            let script = Script::new(vec![page(vec![], None), answer]);
            let client = Client::new(&settings, &script);
            let e = client
                .provision("o", &request("r", NodeShape::default()))
                .unwrap_err();
            assert_eq!(e.kind(), kind, "{e}");
        }
        // A GPU shape is refused after the idempotency lookup, before any create.
        let script = Script::new(vec![page(vec![], None)]);
        let client = Client::new(&settings, &script);
        let gpu = NodeShape {
            gpu: 1,
            ..NodeShape::default()
        };
        assert!(matches!(
            client.provision("o", &request("r", gpu)),
            Err(Error::Unsupported(_))
        ));
        assert_eq!(script.requests().len(), 1);
    }

    #[test]
    fn terminate_deletes_only_own_servers() {
        let settings = Settings::default();
        let script = Script::new(vec![
            resp(
                200,
                json!({"server": server(3, "running", owned("host-a", "r"))}),
            ),
            resp(
                200,
                json!({"action": {"id": 1, "command": "delete_server"}}),
            ),
        ]);
        let client = Client::new(&settings, &script);
        client.terminate("host-a", "3").unwrap();
        let reqs = script.requests();
        assert_eq!(
            reqs.iter()
                .map(|r| (r.method, r.path.as_str()))
                .collect::<Vec<_>>(),
            [(Method::Get, "/servers/3"), (Method::Delete, "/servers/3")]
        );
        assert_eq!(script.logs.borrow().len(), 1);

        // Someone else's server: not found, and never deleted.
        let script = Script::new(vec![resp(
            200,
            json!({"server": server(4, "running", owned("host-b", "r"))}),
        )]);
        let client = Client::new(&settings, &script);
        let e = client.terminate("host-a", "4").unwrap_err();
        assert!(
            matches!(&e, Error::NotFound(m) if m.contains("not owned")),
            "{e:?}"
        );
        assert_eq!(script.requests().len(), 1);

        // Unlabelled server: same.
        let script = Script::new(vec![resp(
            200,
            json!({"server": server(4, "running", json!({}))}),
        )]);
        let client = Client::new(&settings, &script);
        assert!(matches!(
            client.terminate("host-a", "4"),
            Err(Error::NotFound(_))
        ));
        assert_eq!(script.requests().len(), 1);

        // Gone before or during the call.
        let script = Script::new(vec![err(404, "not_found")]);
        let client = Client::new(&settings, &script);
        assert!(matches!(
            client.terminate("host-a", "5"),
            Err(Error::NotFound(_))
        ));
        let script = Script::new(vec![
            resp(
                200,
                json!({"server": server(5, "running", owned("host-a", "r"))}),
            ),
            err(404, "not_found"),
        ]);
        let client = Client::new(&settings, &script);
        assert!(matches!(
            client.terminate("host-a", "5"),
            Err(Error::NotFound(_))
        ));
        assert!(script.logs.borrow().is_empty());

        // Not a server id at all, or not spelt as one: no request, and
        // refused as unsupported, never not-found (which reads "already
        // gone" to the caller).
        let script = Script::new(vec![]);
        let client = Client::new(&settings, &script);
        for bad in [
            "",
            "abc",
            "../actions/1",
            "1/2",
            "-1",
            "+5",
            "05",
            " 5",
            "5 ",
        ] {
            assert!(
                matches!(client.terminate("host-a", bad), Err(Error::Unsupported(_))),
                "{bad}"
            );
        }
        assert!(script.requests().is_empty());

        // Other errors pass through.
        let script = Script::new(vec![err(429, "rate_limit_exceeded")]);
        let client = Client::new(&settings, &script);
        assert!(matches!(
            client.terminate("host-a", "5"),
            Err(Error::RateLimited { .. })
        ));
    }

    #[test]
    fn set_labels_keeps_who_made_the_server_and_refuses_what_hetzner_cannot_store() {
        let settings = Settings::default();
        let labelled = |extra: Value| {
            let mut labels = owned("host-a", "r");
            for (k, v) in extra.as_object().unwrap() {
                labels[k] = v.clone();
            }
            resp(200, json!({"server": server(3, "running", labels)}))
        };
        let script = Script::new(vec![
            labelled(json!({"old": "1"})),
            labelled(json!({"new": "2"})),
        ]);
        let client = Client::new(&settings, &script);
        let new = Labels::from([("new".to_string(), "2".to_string())]);
        let h = client.set_labels("host-a", "3", &new).unwrap();
        assert_eq!(h.labels["new"], "2");
        assert!(!h.labels.contains_key("old"));
        let reqs = script.requests();
        assert_eq!(
            (reqs[1].method, reqs[1].path.as_str()),
            (Method::Put, "/servers/3")
        );
        assert_eq!(
            reqs[1].body.as_ref().unwrap()["labels"],
            json!({OWNER: "host-a", REQUEST: "r", "new": "2"})
        );
        assert_eq!(script.logs.borrow().len(), 1);

        // Another owner's server: not found, nothing written.
        let script = Script::new(vec![resp(
            200,
            json!({"server": server(4, "running", owned("host-b", "r"))}),
        )]);
        let client = Client::new(&settings, &script);
        assert!(matches!(
            client.set_labels("host-a", "4", &new),
            Err(Error::NotFound(_))
        ));
        assert_eq!(script.requests().len(), 1);

        // A label Hetzner cannot store: unsupported, nothing sent.
        let script = Script::new(vec![]);
        let client = Client::new(&settings, &script);
        let bad = Labels::from([("tier".to_string(), "front end".to_string())]);
        assert!(matches!(
            client.set_labels("host-a", "3", &bad),
            Err(Error::Unsupported(_))
        ));
        assert!(script.requests().is_empty());
    }

    #[test]
    fn describe_follows_pages_and_filters() {
        let settings = Settings {
            page_size: 2,
            ..Settings::default()
        };
        let script = Script::new(vec![
            page(
                vec![
                    server(1, "running", owned("host-a", "r1")),
                    server(2, "starting", owned("host-a", "r2")),
                ],
                Some(2),
            ),
            page(
                vec![
                    server(2, "running", owned("host-a", "r2")),
                    server(3, "off", owned("host-b", "r3")),
                    server(4, "initializing", owned("host-a", "r4")),
                ],
                Some(3),
            ),
            page(vec![], None),
        ]);
        let client = Client::new(&settings, &script);
        let nodes = client.describe("host-a").unwrap();
        let ids: Vec<&str> = nodes.iter().map(|n| n.provider_id.as_str()).collect();
        assert_eq!(ids, ["1", "2", "4"]);
        assert_eq!(nodes[1].join_state, JoinState::Booting);
        let reqs = script.requests();
        assert_eq!(reqs.len(), 3);
        for (i, r) in reqs.iter().enumerate() {
            assert_eq!(r.param("label_selector"), Some("wasmprov-owner==host-a"));
            assert_eq!(r.param("per_page"), Some("2"));
            assert_eq!(r.param("page"), Some((i + 1).to_string().as_str()));
        }
    }

    #[test]
    fn describe_gives_up_on_endless_pagination() {
        let settings = Settings::default();
        let endless = Script {
            dynamic: Some(Box::new(|req: &ApiRequest| {
                let n: u64 = req.param("page").unwrap().parse().unwrap();
                page(vec![], Some(n + 1))
            })),
            ..Script::default()
        };
        let client = Client::new(&settings, &endless);
        assert!(matches!(client.describe("o"), Err(Error::Transport(_))));
        assert_eq!(
            endless.requests().len(),
            usize::try_from(MAX_PAGES).unwrap()
        );

        let stuck = Script::new(vec![page(vec![], Some(2)), page(vec![], Some(2))]);
        let client = Client::new(&settings, &stuck);
        assert!(matches!(client.describe("o"), Err(Error::Transport(_))));
        assert_eq!(stuck.requests().len(), 2);

        let garbage = Script::new(vec![resp(200, json!({"servers": "nope"}))]);
        let client = Client::new(&settings, &garbage);
        assert!(matches!(client.describe("o"), Err(Error::Transport(_))));
    }
}
