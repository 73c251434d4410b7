//! Stateful, in-process stand-ins for the cloud-init plugin's `create`,
//! `list` and `destroy` commands, speaking the plugin's command protocol
//! (plugins/cloud-init/README.md, "Command protocol"; the shell fixtures in
//! tests/fixtures/cloud-init do the same with files).
//!
//! No process ever runs: the suite's exec interceptor hands every program
//! run of the plugin to [`FakeCloud::exec`], which recognises the three
//! commands by the program path and fixed arguments of the plugin's
//! `[config]` (`create_command` + `create_args`, …) and answers as a
//! backend would; any other run is refused.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard, PoisonError};

use bytes::Bytes;
use serde::Serialize;
use wasmprov_host::intercept::{ExecFailure, ExecOutput, ExecRequest, OutgoingRequest};

use crate::fake::{FakeCloud, TruthNode, json_response};
use crate::faults::FaultKind;

/// Every variable the protocol sets for `create`.
const CREATE_ENV: [&str; 7] = [
    "WASMPROV_OWNER",
    "WASMPROV_REQUEST_ID",
    "WASMPROV_INSTANCE_TYPE",
    "WASMPROV_ZONE",
    "WASMPROV_CAPACITY_TYPE",
    "WASMPROV_LABELS",
    "WASMPROV_LABELS_JSON",
];
/// The state word every node reports (the fixtures' too): still being made.
const NODE_STATE: &str = "creating";
/// The `retry_after_ms` of an injected rate limit.
const RETRY_AFTER_MS: u64 = 1000;
/// What a malformed answer prints: a proxy's error page, exit 0.
const GARBAGE: &str = "<html><body><h1>502 Bad Gateway</h1></body></html>\n";

/// One of the plugin's three commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Which {
    Create,
    List,
    Destroy,
}

impl Which {
    fn name(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::List => "list",
            Self::Destroy => "destroy",
        }
    }

    /// How many arguments the plugin adds after the fixed ones: the request
    /// id (create), the node id (destroy), none (list).
    fn added_args(self) -> usize {
        match self {
            Self::Create | Self::Destroy => 1,
            Self::List => 0,
        }
    }
}

/// A command as the manifest's `[config]` names it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Spec {
    program: String,
    args: Vec<String>,
}

impl Spec {
    /// Reads `<which>_command` and `<which>_args` as the plugin does
    /// (trimmed; blank is unset; arguments split on blanks).
    fn from_config(config: &BTreeMap<String, String>, which: Which) -> anyhow::Result<Self> {
        let key = format!("{}_command", which.name());
        let program = config
            .get(&key)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "cloud-init stubs: the plugin's [config] has no {key:?}; the stubs answer the create, list and destroy commands it names"
                )
            })?;
        if !program.starts_with('/') || program.contains(char::is_whitespace) {
            anyhow::bail!(
                "cloud-init stubs: config key {key:?} is {program:?}, not the absolute path of a program (arguments go in {}_args)",
                which.name()
            );
        }
        let args = config
            .get(&format!("{}_args", which.name()))
            .map(|a| a.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        Ok(Self { program, args })
    }

    /// Whether `req` runs this command with `added` arguments after the
    /// fixed ones.
    fn fits(&self, req: &ExecRequest, added: usize) -> bool {
        req.program == self.program
            && req.args.len() == self.args.len() + added
            && req.args.starts_with(&self.args)
    }
}

impl std::fmt::Display for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.program)?;
        for a in &self.args {
            write!(f, " {a}")?;
        }
        Ok(())
    }
}

/// A node as the stub backend stores it and the commands print it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
struct Node {
    id: String,
    address: String,
    zone: Option<String>,
    state: &'static str,
    instance_type: Option<String>,
    capacity_type: String,
    labels: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
struct State {
    /// Nodes made so far (the next id is one more).
    made: u32,
    nodes: BTreeMap<String, Node>,
}

/// Where the stub places a node whose create named no zone.
const DEFAULT_ZONE: &str = "zone-1";

impl State {
    /// A new node with the next id (`node-0001`, …) and address.
    fn add(
        &mut self,
        zone: Option<String>,
        instance_type: Option<String>,
        capacity_type: String,
        labels: BTreeMap<String, String>,
    ) -> Node {
        self.made += 1;
        let n = self.made;
        let node = Node {
            id: format!("node-{n:04}"),
            address: format!("10.{}.{}.{}", (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff),
            zone,
            state: NODE_STATE,
            instance_type,
            capacity_type,
            labels,
        };
        self.nodes.insert(node.id.clone(), node.clone());
        node
    }
}

/// The create, list and destroy commands of one plugin, answered in
/// process over an in-memory set of nodes.
#[derive(Debug)]
pub(crate) struct CloudInitStub {
    create: Spec,
    list: Spec,
    destroy: Spec,
    state: Mutex<State>,
}

impl CloudInitStub {
    /// Stubs for the commands `manifest_config` (the plugin's `[config]`)
    /// names.
    ///
    /// # Errors
    /// Naming the key when one of `create_command`, `list_command` and
    /// `destroy_command` is unset or not an absolute path.
    pub(crate) fn new(manifest_config: &BTreeMap<String, String>) -> anyhow::Result<Self> {
        Ok(Self {
            create: Spec::from_config(manifest_config, Which::Create)?,
            list: Spec::from_config(manifest_config, Which::List)?,
            destroy: Spec::from_config(manifest_config, Which::Destroy)?,
            state: Mutex::new(State::default()),
        })
    }

    fn spec(&self, which: Which) -> &Spec {
        match which {
            Which::Create => &self.create,
            Which::List => &self.list,
            Which::Destroy => &self.destroy,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Which command `req` runs, if any. Commands may share a program; a
    /// run that fits two of them is create when it has a standard input
    /// (the protocol gives only create one), else list, else destroy.
    fn which(&self, req: &ExecRequest) -> Option<Which> {
        let fits = |w: Which| self.spec(w).fits(req, w.added_args());
        if fits(Which::Create) && req.stdin.is_some() {
            Some(Which::Create)
        } else {
            [Which::List, Which::Destroy, Which::Create]
                .into_iter()
                .find(|w| fits(*w))
        }
    }

    /// The answer to one program run: the command's output, or a denial
    /// of a run that is none of the three commands.
    fn answer(&self, req: &ExecRequest) -> Result<ExecOutput, ExecFailure> {
        let Some(which) = self.which(req) else {
            return Err(ExecFailure::Denied(format!(
                "cloud-init stubs: unexpected run of {:?} with arguments {:?}; expected create ({} <request-id>), list ({}) or destroy ({} <node-id>)",
                req.program, req.args, self.create, self.list, self.destroy
            )));
        };
        let last = req.args.last().map(String::as_str).unwrap_or_default();
        Ok(match which {
            Which::Create => self.run_create(req, last),
            Which::List => self.run_list(),
            Which::Destroy => self.run_destroy(last),
        })
    }

    fn run_create(&self, req: &ExecRequest, request_id: &str) -> ExecOutput {
        if let Some(missing) = CREATE_ENV.iter().find(|v| req.var(v).is_none()) {
            return usage(&format!(
                "create: {missing} is not set (the protocol sets all of {})",
                CREATE_ENV.join(", ")
            ));
        }
        let var = |name: &str| req.var(name).unwrap_or_default().trim().to_string();
        let known = |name: &str| Some(var(name)).filter(|v| !v.is_empty());
        if var("WASMPROV_REQUEST_ID") != request_id {
            return usage(&format!(
                "create: WASMPROV_REQUEST_ID is {:?} but the last argument is {request_id:?}",
                var("WASMPROV_REQUEST_ID")
            ));
        }
        let capacity_type = var("WASMPROV_CAPACITY_TYPE");
        if !matches!(capacity_type.as_str(), "on-demand" | "spot") {
            return usage(&format!(
                "create: WASMPROV_CAPACITY_TYPE is {capacity_type:?}, not on-demand or spot"
            ));
        }
        let labels: BTreeMap<String, String> =
            match serde_json::from_str(req.var("WASMPROV_LABELS_JSON").unwrap_or_default()) {
                Ok(l) => l,
                Err(e) => {
                    return usage(&format!(
                        "create: WASMPROV_LABELS_JSON is not a JSON object of strings: {e}"
                    ));
                }
            };
        let stdin = req.stdin.as_deref().unwrap_or_default();
        if !stdin.starts_with(b"#cloud-config") {
            return usage("create: standard input is not a #cloud-config document");
        }
        // Like a real backend, the stub places a node that asked for no
        // zone in its default one.
        let node = self.state().add(
            Some(known("WASMPROV_ZONE").unwrap_or_else(|| DEFAULT_ZONE.to_string())),
            known("WASMPROV_INSTANCE_TYPE"),
            capacity_type,
            labels,
        );
        printed(&node)
    }

    fn run_list(&self) -> ExecOutput {
        let nodes: Vec<Node> = self.state().nodes.values().cloned().collect();
        printed(&nodes)
    }

    fn run_destroy(&self, id: &str) -> ExecOutput {
        match self.state().nodes.remove(id) {
            Some(_) => ExecOutput {
                exit_code: Some(0),
                ..ExecOutput::default()
            },
            None => error_output(
                1,
                &serde_json::json!({"kind": "not_found", "message": format!("no node {id}")}),
            ),
        }
    }
}

/// Exit 0 with `value` as one line of JSON.
fn printed(value: &impl Serialize) -> ExecOutput {
    match serde_json::to_vec(value) {
        Ok(mut stdout) => {
            stdout.push(b'\n');
            ExecOutput {
                exit_code: Some(0),
                stdout,
                stderr: Vec::new(),
            }
        }
        Err(e) => usage(&format!("cannot print the answer: {e}")),
    }
}

/// The protocol's structured error on stdout, with exit code `code`.
fn error_output(code: i32, error: &serde_json::Value) -> ExecOutput {
    let mut stdout = serde_json::json!({ "error": error })
        .to_string()
        .into_bytes();
    stdout.push(b'\n');
    ExecOutput {
        exit_code: Some(code),
        stdout,
        stderr: Vec::new(),
    }
}

/// A run the command refuses (exit 64, the reason on stderr): what a real
/// command does when the plugin breaks the protocol. The plugin makes it
/// `other`.
fn usage(why: &str) -> ExecOutput {
    ExecOutput {
        exit_code: Some(64),
        stdout: Vec::new(),
        stderr: format!("{why}\n").into_bytes(),
    }
}

#[async_trait::async_trait]
impl FakeCloud for CloudInitStub {
    fn describe(&self) -> String {
        format!(
            "cloud-init stubs (in process) for create `{} <request-id>`, list `{}`, destroy `{} <node-id>`",
            self.create, self.list, self.destroy
        )
    }

    fn http_target(&self) -> Option<SocketAddr> {
        None
    }

    async fn exec(&self, req: &ExecRequest) -> Option<Result<ExecOutput, ExecFailure>> {
        Some(self.answer(req))
    }

    /// Any secret: the join token is only copied into the `#cloud-config`.
    fn secret(&self, _env: &str) -> Option<String> {
        Some("fake-join-token".to_string())
    }

    async fn nodes(&self) -> anyhow::Result<Vec<TruthNode>> {
        Ok(self
            .state()
            .nodes
            .values()
            .map(|n| TruthNode {
                id: n.id.clone(),
                labels: n.labels.clone(),
                alive: true,
                user_data: None,
            })
            .collect())
    }

    async fn plant(&self, labels: BTreeMap<String, String>) -> anyhow::Result<Option<String>> {
        let node = self
            .state()
            .add(None, None, "on-demand".to_string(), labels);
        Ok(Some(node.id))
    }

    /// The plugin reaches this cloud by exec only.
    fn is_create(&self, _req: &OutgoingRequest) -> bool {
        false
    }

    /// Never used: the plugin sends no HTTP to this cloud.
    fn fault_response(&self, _kind: FaultKind, _req: &OutgoingRequest) -> http::Response<Bytes> {
        json_response(
            500,
            &[],
            r#"{"error": {"kind": "transport", "message": "the cloud-init stubs answer no HTTP"}}"#,
        )
    }

    /// `kind` in the protocol's words: the structured error on stdout
    /// (rate limit with `retry_after_ms` 1000, `transport` for a server
    /// error, capacity in the zone, quota), exit 0 with an HTML error page
    /// for a malformed answer, a killed run for a timeout. `None` for reset
    /// and slow (the suite runs the command and loses or delays its answer).
    ///
    /// A malformed answer to destroy comes after the node was removed:
    /// the plugin does not read destroy's output, so to it the run
    /// succeeded, and the truth agrees.
    fn exec_fault(
        &self,
        kind: FaultKind,
        req: &ExecRequest,
    ) -> Option<Result<ExecOutput, ExecFailure>> {
        let which = self.which(req);
        let what = which.map_or("command", Which::name);
        let injected = |m: &str| format!("{m} (injected by the test suite)");
        let structured = |error: serde_json::Value| Some(Ok(error_output(1, &error)));
        match kind {
            FaultKind::RateLimited => structured(serde_json::json!({
                "kind": "rate_limited",
                "message": injected("API rate limit exceeded, slow down"),
                "retry_after_ms": RETRY_AFTER_MS,
            })),
            FaultKind::ServerError => structured(serde_json::json!({
                "kind": "transport",
                "message": injected("the backend API answered 503 Service Unavailable"),
            })),
            FaultKind::Capacity => structured(serde_json::json!({
                "kind": "capacity",
                "message": injected("no capacity left in the zone"),
                "scope": "zone",
            })),
            FaultKind::Quota => structured(serde_json::json!({
                "kind": "quota",
                "message": injected("node quota exceeded"),
            })),
            FaultKind::Malformed => {
                if which == Some(Which::Destroy)
                    && let Some(id) = req.args.last()
                {
                    self.state().nodes.remove(id);
                }
                Some(Ok(ExecOutput {
                    exit_code: Some(0),
                    stdout: GARBAGE.as_bytes().to_vec(),
                    stderr: Vec::new(),
                }))
            }
            FaultKind::Timeout => Some(Err(ExecFailure::Timeout(injected(&format!(
                "{what} ran past its time limit and was killed"
            ))))),
            FaultKind::Reset | FaultKind::Slow => None,
        }
    }

    fn exec_is_create(&self, req: &ExecRequest) -> bool {
        self.which(req) == Some(Which::Create)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use wasmprov_api::{NodeShape, ProvisionRequest, ProvisionerError};
    use wasmprov_guest::exec::{ExecError, Output};
    use wasmprov_plugin_cloud_init::client::{Client, Invocation, Runner};
    use wasmprov_plugin_cloud_init::protocol;
    use wasmprov_plugin_cloud_init::settings::Settings;

    const OWNER: &str = "suite-owner";

    /// Which runs a fault is injected into.
    type Pick = fn(&CloudInitStub, &ExecRequest) -> bool;
    /// A way to break a create run.
    type Breaks = fn(&mut ExecRequest);

    /// The README's example: one program, the command as first argument.
    fn config() -> BTreeMap<String, String> {
        [
            ("create_command", "/usr/local/bin/nodes"),
            ("create_args", " create  --pool workers "),
            ("list_command", "/usr/local/bin/nodes"),
            ("list_args", "list --pool workers"),
            ("destroy_command", "/usr/local/bin/nodes"),
            ("destroy_args", "destroy --pool workers"),
            (
                "join_command",
                "node-agent join --token {token} --labels {labels} --node {request_id}",
            ),
            ("capacity_types", "on-demand, spot"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn stub() -> CloudInitStub {
        CloudInitStub::new(&config()).unwrap()
    }

    fn run(program: &str, args: &[&str]) -> ExecRequest {
        ExecRequest {
            plugin: "cloud-init".into(),
            program: program.into(),
            args: args.iter().map(|a| (*a).to_string()).collect(),
            env: Vec::new(),
            stdin: None,
        }
    }

    /// The plugin's own operations, natively, with every command answered
    /// by the stub and `fault` injected into the runs it picks.
    struct Plugin<'a> {
        stub: &'a CloudInitStub,
        fault: RefCell<Option<(FaultKind, Pick)>>,
        runs: RefCell<Vec<ExecRequest>>,
    }

    impl<'a> Plugin<'a> {
        fn new(stub: &'a CloudInitStub) -> Self {
            Self {
                stub,
                fault: RefCell::new(None),
                runs: RefCell::new(Vec::new()),
            }
        }

        /// The plugin's settings from [`config`], with the secret the
        /// stub hands out.
        fn settings(stub: &CloudInitStub) -> Settings {
            let c = config();
            Settings::from_lookup(|k| {
                Ok(match k {
                    "join_token" => stub.secret("CLUSTER_JOIN_TOKEN"),
                    _ => c.get(k).cloned(),
                })
            })
            .unwrap()
        }
    }

    impl Runner for &Plugin<'_> {
        fn run(&self, inv: &Invocation) -> Result<Output, ExecError> {
            let req = ExecRequest {
                plugin: "cloud-init".into(),
                program: inv.program.clone(),
                args: inv.args.clone(),
                env: inv.env.clone(),
                stdin: inv.stdin.clone(),
            };
            self.runs.borrow_mut().push(req.clone());
            let fault = (*self.fault.borrow()).filter(|(_, pick)| pick(self.stub, &req));
            let answer = match fault {
                Some((kind, _)) => self
                    .stub
                    .exec_fault(kind, &req)
                    .unwrap_or_else(|| self.stub.answer(&req)),
                None => self.stub.answer(&req),
            };
            match answer {
                Ok(o) => Ok(Output {
                    exit_code: o.exit_code,
                    stdout: o.stdout,
                    stderr: o.stderr,
                }),
                Err(ExecFailure::Denied(m)) => Err(ExecError::Denied(m)),
                Err(ExecFailure::SpawnFailed(m)) => Err(ExecError::SpawnFailed(m)),
                Err(ExecFailure::Timeout(m)) => Err(ExecError::Timeout(m)),
                Err(ExecFailure::OutputTooLarge(m)) => Err(ExecError::OutputTooLarge(m)),
                Err(other) => Err(ExecError::Other(other.to_string())),
            }
        }

        fn info(&self, _message: &str, _fields: &[(&str, &str)]) {}
    }

    fn request(id: &str) -> ProvisionRequest {
        let mut shape = NodeShape::new(2.0, 4 << 30);
        shape.labels.insert("role".into(), "worker".into());
        shape.zone = Some("z1".into());
        shape.instance_type = Some("small".into());
        ProvisionRequest {
            request_id: id.into(),
            shape,
            boot: Default::default(),
            subnet: None,
        }
    }

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(f)
    }

    #[test]
    fn new_names_the_missing_or_wrong_key() {
        for (key, value, says) in [
            ("create_command", "", "\"create_command\""),
            ("list_command", "   ", "\"list_command\""),
            ("destroy_command", "nodes", "\"destroy_command\""),
            ("create_command", "/bin/nodes create", "\"create_command\""),
        ] {
            let mut c = config();
            c.insert(key.into(), value.into());
            let err = CloudInitStub::new(&c).unwrap_err().to_string();
            assert!(err.contains(says), "{key}={value:?}: {err}");
        }
        let mut c = config();
        c.remove("destroy_command");
        let err = CloudInitStub::new(&c).unwrap_err().to_string();
        assert!(err.contains("destroy_command"), "{err}");
        // Args are optional.
        let mut c = config();
        c.remove("list_args");
        assert!(CloudInitStub::new(&c).is_ok());
    }

    #[test]
    fn runs_are_matched_by_program_and_fixed_args() {
        let s = stub();
        let nodes = "/usr/local/bin/nodes";
        let mut create = run(nodes, &["create", "--pool", "workers", "r1"]);
        create.stdin = Some(b"#cloud-config\n".to_vec());
        assert_eq!(s.which(&create), Some(Which::Create));
        assert!(s.exec_is_create(&create));
        let list = run(nodes, &["list", "--pool", "workers"]);
        assert_eq!(s.which(&list), Some(Which::List));
        assert!(!s.exec_is_create(&list));
        let destroy = run(nodes, &["destroy", "--pool", "workers", "node-0001"]);
        assert_eq!(s.which(&destroy), Some(Which::Destroy));
        for unexpected in [
            run("/usr/bin/nodes", &["list", "--pool", "workers"]),
            run(nodes, &["list", "--pool", "other"]),
            run(nodes, &["list", "--pool", "workers", "extra"]),
            run(nodes, &["destroy", "--pool", "workers"]),
            run(nodes, &["destroy", "--pool", "workers", "a", "b"]),
            run(nodes, &["create", "--pool", "workers"]),
            run("/bin/sh", &["-c", "rm -rf /"]),
        ] {
            assert_eq!(s.which(&unexpected), None, "{unexpected:?}");
            let Some(Err(ExecFailure::Denied(m))) = block_on(s.exec(&unexpected)) else {
                panic!("{unexpected:?} not denied");
            };
            assert!(m.contains(&unexpected.program), "{m}");
            assert!(m.contains("unexpected run"), "{m}");
        }

        // Commands that share program and fixed arguments: stdin decides.
        let mut c = config();
        c.insert("destroy_args".into(), "create --pool workers".into());
        c.insert("list_args".into(), "create --pool workers x".into());
        let s = CloudInitStub::new(&c).unwrap();
        assert_eq!(s.which(&create), Some(Which::Create));
        let mut bare = create.clone();
        bare.stdin = None;
        assert_eq!(s.which(&bare), Some(Which::Destroy));
        let mut as_list = create.clone();
        as_list.args[3] = "x".into();
        assert_eq!(s.which(&as_list), Some(Which::Create));
        as_list.stdin = None;
        assert_eq!(s.which(&as_list), Some(Which::List));
    }

    /// The plugin's provision, describe and terminate against the stubs,
    /// checked against the ground truth.
    #[test]
    fn plugin_round_trip() {
        let s = stub();
        let settings = Plugin::settings(&s);
        let p = Plugin::new(&s);
        let client = Client::new(&settings, &p);

        let planted = block_on(s.plant(BTreeMap::from([(
            "wasmprov-owner".to_string(),
            "someone-else".to_string(),
        )])))
        .unwrap()
        .unwrap();
        assert_eq!(planted, "node-0001");

        let node = client.provision(OWNER, &request("r-1")).unwrap();
        assert_eq!(node.provider_id, "node-0002");
        assert_eq!(node.zone.as_deref(), Some("z1"));
        assert_eq!(node.instance_type.as_deref(), Some("small"));
        assert_eq!(node.address.as_deref(), Some("10.0.0.2"));
        assert_eq!(node.labels["wasmprov-owner"], OWNER);
        assert_eq!(node.labels["wasmprov-request"], "r-1");
        assert_eq!(node.labels["role"], "worker");

        // What create got.
        let runs = p.runs.borrow().clone();
        let create = runs.iter().find(|r| s.exec_is_create(r)).unwrap();
        assert_eq!(create.args, ["create", "--pool", "workers", "r-1"]);
        assert_eq!(create.var("WASMPROV_REQUEST_ID"), Some("r-1"));
        let doc = String::from_utf8(create.stdin.clone().unwrap()).unwrap();
        assert!(doc.contains("fake-join-token"), "{doc}");

        // Idempotent by request id: no second create.
        let again = client.provision(OWNER, &request("r-1")).unwrap();
        assert_eq!(again.provider_id, node.provider_id);
        assert_eq!(
            p.runs
                .borrow()
                .iter()
                .filter(|r| s.exec_is_create(r))
                .count(),
            1
        );

        let described = client.describe(OWNER).unwrap();
        assert_eq!(described.len(), 1);
        assert_eq!(described[0].provider_id, node.provider_id);
        assert_eq!(described[0].labels, node.labels);

        let truth = block_on(s.nodes()).unwrap();
        let ids: Vec<&str> = truth.iter().map(|n| n.id.as_str()).collect();
        assert_eq!(ids, ["node-0001", "node-0002"]);
        assert_eq!(truth[1].labels, node.labels);
        assert!(truth.iter().all(|n| n.alive));

        // The planted node is not this owner's: never destroyed.
        let err = client.terminate(OWNER, &planted).unwrap_err();
        assert_eq!(err.kind(), "not_found", "{err:?}");
        client.terminate(OWNER, &node.provider_id).unwrap();
        let err = client.terminate(OWNER, &node.provider_id).unwrap_err();
        assert_eq!(err.kind(), "not_found", "{err:?}");
        assert!(client.describe(OWNER).unwrap().is_empty());
        let truth = block_on(s.nodes()).unwrap();
        assert_eq!(truth.len(), 1);
        assert_eq!(truth[0].id, planted);

        // Destroy of a node that is gone: the protocol's not_found.
        let gone = block_on(s.exec(&run(
            "/usr/local/bin/nodes",
            &["destroy", "--pool", "workers", "node-0002"],
        )))
        .unwrap()
        .unwrap();
        assert_eq!(gone.exit_code, Some(1));
        let err = protocol::failure("destroy", &as_output(&gone));
        assert!(matches!(err, ProvisionerError::NotFound(_)), "{err:?}");
    }

    fn as_output(o: &ExecOutput) -> Output {
        Output {
            exit_code: o.exit_code,
            stdout: o.stdout.clone(),
            stderr: o.stderr.clone(),
        }
    }

    #[test]
    fn create_holds_the_plugin_to_the_protocol() {
        let s = stub();
        let full = || {
            let mut r = run(
                "/usr/local/bin/nodes",
                &["create", "--pool", "workers", "r1"],
            );
            r.env = CREATE_ENV
                .iter()
                .map(|k| ((*k).to_string(), String::new()))
                .collect();
            for (k, v) in [
                ("WASMPROV_REQUEST_ID", "r1"),
                ("WASMPROV_CAPACITY_TYPE", "spot"),
                ("WASMPROV_LABELS_JSON", r#"{"a":"b"}"#),
            ] {
                set(&mut r, k, v);
            }
            r.stdin = Some(b"#cloud-config\nruncmd: []\n".to_vec());
            r
        };
        let ok = s.answer(&full()).unwrap();
        assert_eq!(ok.exit_code, Some(0));
        let node = protocol::parse_node("create", &ok.stdout).unwrap();
        assert_eq!(node.id, "node-0001");
        assert_eq!(node.zone.as_deref(), Some(DEFAULT_ZONE));
        assert_eq!(node.instance_type, None);
        assert_eq!(node.labels.unwrap()["a"], "b");

        fn set(r: &mut ExecRequest, name: &str, value: &str) {
            r.env.retain(|(k, _)| k != name);
            r.env.push((name.into(), value.into()));
        }
        let broken: [(&str, Breaks); 5] = [
            ("WASMPROV_ZONE is not set", |r| {
                r.env.retain(|(k, _)| k != "WASMPROV_ZONE");
            }),
            ("last argument", |r| r.args[3] = "r2".into()),
            ("WASMPROV_CAPACITY_TYPE", |r| {
                set(r, "WASMPROV_CAPACITY_TYPE", "reserved");
            }),
            ("WASMPROV_LABELS_JSON", |r| {
                set(r, "WASMPROV_LABELS_JSON", "[1]");
            }),
            ("#cloud-config", |r| r.stdin = Some(b"#!/bin/sh\n".to_vec())),
        ];
        for (says, breaks) in broken {
            let mut r = full();
            breaks(&mut r);
            let out = s.answer(&r).unwrap();
            assert_eq!(out.exit_code, Some(64), "{says}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains(says), "{says}: {stderr}");
            let err = protocol::failure("create", &as_output(&out));
            assert_eq!(err.kind(), "other", "{says}: {err:?}");
        }
        assert_eq!(block_on(s.nodes()).unwrap().len(), 1);
    }

    /// Every fault on every command, through the plugin's own handling:
    /// the error is one the fault accepts.
    #[test]
    fn faults_map_to_the_plugins_error_kinds() {
        let picks: [(&str, Pick); 2] = [
            ("create", |s, r| s.exec_is_create(r)),
            ("list", |s, r| s.which(r) == Some(Which::List)),
        ];
        for (kind_name, kind) in FaultKind::ALL {
            for (command, pick) in picks {
                if kind.create_only() && command != "create" {
                    continue;
                }
                let s = stub();
                let settings = Plugin::settings(&s);
                let p = Plugin::new(&s);
                *p.fault.borrow_mut() = Some((kind, pick));
                let client = Client::new(&settings, &p);
                let got = client.provision(OWNER, &request("r-1"));
                match kind {
                    FaultKind::Reset | FaultKind::Slow => {
                        assert!(s.exec_fault(kind, &p.runs.borrow()[0]).is_none());
                        assert!(got.is_ok(), "{kind_name} on {command}: {got:?}");
                    }
                    _ => {
                        let err = got.unwrap_err();
                        assert!(
                            kind.accepts(&err),
                            "{kind_name} on {command}: {err:?} not in {:?}",
                            kind.expected_kinds()
                        );
                        if kind == FaultKind::RateLimited {
                            assert!(matches!(
                                err,
                                ProvisionerError::RateLimited {
                                    retry_after_ms: Some(1000),
                                    ..
                                }
                            ));
                        }
                        // Nothing was made.
                        assert!(block_on(s.nodes()).unwrap().is_empty(), "{kind_name}");
                    }
                }
            }
        }
    }

    #[test]
    fn fault_renders_are_the_protocols_dialect() {
        let s = stub();
        let list = run("/usr/local/bin/nodes", &["list", "--pool", "workers"]);
        let error = |kind: FaultKind| {
            let Some(Ok(out)) = s.exec_fault(kind, &list) else {
                panic!("{kind}");
            };
            assert_eq!(out.exit_code, Some(1));
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            v["error"].clone()
        };
        assert_eq!(error(FaultKind::RateLimited)["kind"], "rate_limited");
        assert_eq!(error(FaultKind::RateLimited)["retry_after_ms"], 1000);
        assert_eq!(error(FaultKind::ServerError)["kind"], "transport");
        assert_eq!(error(FaultKind::Capacity)["kind"], "capacity");
        assert_eq!(error(FaultKind::Capacity)["scope"], "zone");
        assert_eq!(error(FaultKind::Quota)["kind"], "quota");
        let Some(Ok(garbage)) = s.exec_fault(FaultKind::Malformed, &list) else {
            panic!("malformed");
        };
        assert_eq!(garbage.exit_code, Some(0));
        assert!(protocol::parse_list("list", &garbage.stdout).is_err());
        assert!(matches!(
            s.exec_fault(FaultKind::Timeout, &list),
            Some(Err(ExecFailure::Timeout(m))) if m.contains("list")
        ));
        assert!(s.exec_fault(FaultKind::Reset, &list).is_none());
        assert!(s.exec_fault(FaultKind::Slow, &list).is_none());

        // A malformed answer to destroy: the node is gone, as the plugin
        // (which reads no destroy output) believes.
        let id = block_on(s.plant(BTreeMap::new())).unwrap().unwrap();
        let destroy = run(
            "/usr/local/bin/nodes",
            &["destroy", "--pool", "workers", &id],
        );
        let Some(Ok(out)) = s.exec_fault(FaultKind::Malformed, &destroy) else {
            panic!("malformed destroy");
        };
        assert_eq!(protocol::check("destroy", &as_output(&out)), Ok(()));
        assert!(block_on(s.nodes()).unwrap().is_empty());

        // HTTP is not this cloud's.
        let req = OutgoingRequest {
            plugin: "cloud-init".into(),
            method: http::Method::POST,
            uri: "http://example.invalid/".parse().unwrap(),
            headers: http::HeaderMap::new(),
            body: Bytes::new(),
        };
        assert!(!s.is_create(&req));
        assert_eq!(s.fault_response(FaultKind::Capacity, &req).status(), 500);
        assert_eq!(s.http_target(), None);
        assert_eq!(s.secret("ANYTHING").as_deref(), Some("fake-join-token"));
        assert!(
            s.describe()
                .contains("/usr/local/bin/nodes create --pool workers")
        );
    }
}
