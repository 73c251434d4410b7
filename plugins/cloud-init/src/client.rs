//! The operations, over a [`Runner`] that runs the operator's commands:
//! the host's `exec` in the component, a fake in the unit tests.
//!
//! The plugin keeps no state: every call asks the list command first, and
//! ownership and idempotency come from the labels the commands report.

use wasmprov_guest::exec::{ExecError, Output};
use wasmprov_guest::tags::{self, OWNER, REQUEST};
use wasmprov_guest::{Error, Labels, NodeHandle, ProvisionRequest, Result};

use crate::cloud_config::{self, NodeInfo};
use crate::protocol::{self, Node};
use crate::settings::{Settings, Which};
use crate::template::Values;

/// `WASMPROV_OWNER`: the owner id.
pub const ENV_OWNER: &str = "WASMPROV_OWNER";
/// `WASMPROV_REQUEST_ID`: the request id.
pub const ENV_REQUEST_ID: &str = "WASMPROV_REQUEST_ID";
/// `WASMPROV_INSTANCE_TYPE`: the instance type, or empty.
pub const ENV_INSTANCE_TYPE: &str = "WASMPROV_INSTANCE_TYPE";
/// `WASMPROV_ZONE`: the zone, or empty.
pub const ENV_ZONE: &str = "WASMPROV_ZONE";
/// `WASMPROV_CAPACITY_TYPE`: `on-demand` or `spot`.
pub const ENV_CAPACITY_TYPE: &str = "WASMPROV_CAPACITY_TYPE";
/// `WASMPROV_LABELS`: the node's labels as `k=v,k=v`.
pub const ENV_LABELS: &str = "WASMPROV_LABELS";
/// `WASMPROV_LABELS_JSON`: the node's labels as a JSON object.
pub const ENV_LABELS_JSON: &str = "WASMPROV_LABELS_JSON";
/// Every variable the create command gets; its grant must name them all.
pub const CREATE_ENV: [&str; 7] = [
    ENV_OWNER,
    ENV_REQUEST_ID,
    ENV_INSTANCE_TYPE,
    ENV_ZONE,
    ENV_CAPACITY_TYPE,
    ENV_LABELS,
    ENV_LABELS_JSON,
];

/// One run of a command.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Invocation {
    /// Absolute path of the program.
    pub program: String,
    /// Arguments.
    pub args: Vec<String>,
    /// Environment variables.
    pub env: Vec<(String, String)>,
    /// Standard input.
    pub stdin: Option<Vec<u8>>,
}

/// Runs commands and takes log records.
pub trait Runner {
    /// Runs one command to completion.
    ///
    /// # Errors
    /// Why it did not run to completion.
    fn run(&self, invocation: &Invocation) -> std::result::Result<Output, ExecError>;

    /// An `info` record with fields.
    fn info(&self, message: &str, fields: &[(&str, &str)]);
}

/// Labels as `k=v,k=v`, sorted by key: `{labels}` and `WASMPROV_LABELS`.
#[must_use]
pub fn labels_csv(labels: &Labels) -> String {
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn exec_error(which: Which, e: ExecError) -> Error {
    let what = format!("{} command", which.name());
    match Error::from(e) {
        Error::InvalidConfig(m) => Error::InvalidConfig(format!("{what}: {m}")),
        Error::Transport(m) => Error::Transport(format!("{what}: {m}")),
        Error::Other(m) => Error::Other(format!("{what}: {m}")),
        other => other,
    }
}

/// The operations of one call.
#[derive(Debug)]
pub struct Client<'a, R> {
    settings: &'a Settings,
    runner: R,
}

impl<'a, R: Runner> Client<'a, R> {
    /// A client with these settings and this runner.
    pub fn new(settings: &'a Settings, runner: R) -> Self {
        Self { settings, runner }
    }

    fn exec(
        &self,
        which: Which,
        last_arg: Option<&str>,
        env: Vec<(String, String)>,
        stdin: Option<Vec<u8>>,
    ) -> Result<Output> {
        let spec = self.settings.command(which)?;
        let mut args = spec.args.clone();
        args.extend(last_arg.map(str::to_string));
        let invocation = Invocation {
            program: spec.program.clone(),
            args,
            env,
            stdin,
        };
        let out = self
            .runner
            .run(&invocation)
            .map_err(|e| exec_error(which, e))?;
        protocol::check(which.name(), &out)?;
        Ok(out)
    }

    /// Every node the list command reports, whoever owns it.
    ///
    /// # Errors
    /// The list command's failure, or [`Error::Transport`] for output that
    /// is not a JSON array of nodes.
    pub fn list(&self) -> Result<Vec<Node>> {
        let out = self.exec(Which::List, None, Vec::new(), None)?;
        protocol::parse_list("list", &out.stdout)
    }

    /// Returns the node made for this request, or creates it.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a capacity type not offered or a shape the
    /// catalogue cannot fit; [`Error::InvalidConfig`] for missing keys or
    /// grants; the commands' errors.
    pub fn provision(&self, owner_id: &str, request: &ProvisionRequest) -> Result<NodeHandle> {
        let shape = &request.shape;
        if !self.settings.capacity_types.contains(&shape.capacity_type) {
            return Err(Error::Unsupported(format!(
                "capacity type {} is not offered here (config key \"capacity_types\" allows {})",
                protocol::capacity_word(shape.capacity_type),
                self.settings
                    .capacity_types
                    .iter()
                    .map(|c| protocol::capacity_word(*c))
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        // Everything this call needs is checked before any command runs.
        self.settings.command(Which::List)?;
        self.settings.command(Which::Create)?;
        let (template, token) = self.settings.join()?;
        let instance_type = match &self.settings.catalogue {
            Some(c) => Some(c.choose(shape)?.instance_type),
            None if shape.arch.is_some()
                || shape.gpu_model.is_some()
                || shape.disk_bytes.is_some() =>
            {
                return Err(Error::Unsupported(
                    "the shape asks for an architecture, GPU model or disk, which only an instance_types catalogue can honour; configure one".into(),
                ));
            }
            None => shape.instance_type.clone(),
        };

        let owner = tags::id_tag(owner_id);
        let request_id = tags::id_tag(&request.request_id);
        if let Some(node) = self
            .list()?
            .into_iter()
            .find(|n| n.has_label(OWNER, &owner) && n.has_label(REQUEST, &request_id))
        {
            return Ok(node.to_handle(shape.capacity_type));
        }

        let labels = tags::node_labels(
            owner_id,
            &request.request_id,
            &tags::request_labels(request),
        );
        let csv = labels_csv(&labels);
        // The node agent gets the node's labels for the cluster; the
        // request digest is bookkeeping of this plugin, kept off them.
        let mut cluster_labels = labels.clone();
        cluster_labels.remove(tags::REQUEST_DIGEST);
        let join_csv = labels_csv(&cluster_labels);
        let zone = shape.zone.as_deref();
        let join = template.render(&Values {
            token,
            labels: &join_csv,
            request_id: &request_id,
            owner: &owner,
            instance_type: instance_type.as_deref().unwrap_or(""),
            zone: zone.unwrap_or(""),
        });
        let document = cloud_config::merge(
            &NodeInfo {
                owner: &owner,
                request_id: &request_id,
                instance_type: instance_type.as_deref(),
                zone,
                capacity_type: shape.capacity_type,
                labels: &labels,
            },
            &join,
            request.boot.user_data.as_deref(),
            &request.boot.ssh_keys,
        )
        .map_err(Error::Unsupported)?;
        let env = vec![
            (ENV_OWNER, owner.clone()),
            (ENV_REQUEST_ID, request_id.clone()),
            (ENV_INSTANCE_TYPE, instance_type.clone().unwrap_or_default()),
            (ENV_ZONE, zone.unwrap_or("").to_string()),
            (
                ENV_CAPACITY_TYPE,
                protocol::capacity_word(shape.capacity_type).to_string(),
            ),
            (ENV_LABELS, csv.clone()),
            (
                ENV_LABELS_JSON,
                serde_json::to_string(&labels).unwrap_or_default(),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let out = self.exec(
            Which::Create,
            Some(&request_id),
            env,
            Some(document.into_bytes()),
        )?;
        let node = protocol::parse_node("create", &out.stdout)?;
        if node.labels.is_some()
            && !(node.has_label(OWNER, &owner) && node.has_label(REQUEST, &request_id))
        {
            return Err(Error::Other(format!(
                "create command made node {:?} but reported labels without {OWNER}={owner} and {REQUEST}={request_id}; \
                 the list command would not show it as this host's, so it is not managed: fix the command \
                 (it gets the labels in {ENV_LABELS} and {ENV_LABELS_JSON}) and remove that node by hand",
                node.id
            )));
        }
        let mut handle = node.to_handle(shape.capacity_type);
        if node.labels.is_none() {
            handle.labels = labels;
        }
        if handle.zone.is_none() {
            handle.zone = shape.zone.clone();
        }
        if handle.instance_type.is_none() {
            handle.instance_type = instance_type;
        }
        self.runner.info(
            "node created",
            &[
                ("id", &handle.provider_id),
                ("owner", &owner),
                ("request_id", &request_id),
                (
                    "instance_type",
                    handle.instance_type.as_deref().unwrap_or(""),
                ),
                ("zone", handle.zone.as_deref().unwrap_or("")),
            ],
        );
        Ok(handle)
    }

    /// Every node carrying this owner's label.
    ///
    /// # Errors
    /// The list command's errors.
    pub fn describe(&self, owner_id: &str) -> Result<Vec<NodeHandle>> {
        let owner = tags::id_tag(owner_id);
        Ok(self
            .list()?
            .into_iter()
            .filter(|n| n.has_label(OWNER, &owner))
            .map(|n| n.to_handle(wasmprov_guest::CapacityType::OnDemand))
            .collect())
    }

    /// Destroys the node `id` if it carries this owner's label.
    ///
    /// # Errors
    /// [`Error::NotFound`] when the list command does not report the node
    /// as this owner's, or the destroy command says `not_found`; the
    /// commands' other errors.
    pub fn terminate(&self, owner_id: &str, id: &str) -> Result<()> {
        self.settings.command(Which::List)?;
        self.settings.command(Which::Destroy)?;
        let owner = tags::id_tag(owner_id);
        let ours = self
            .list()?
            .into_iter()
            .any(|n| n.id == id && n.has_label(OWNER, &owner));
        if !ours {
            return Err(Error::NotFound(format!(
                "node {id:?} does not exist or does not carry {OWNER}={owner}"
            )));
        }
        self.exec(Which::Destroy, Some(id), Vec::new(), None)?;
        self.runner
            .info("node destroyed", &[("id", id), ("owner", &owner)]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use wasmprov_guest::{CapacityScope, CapacityType, JoinState, NodeShape};

    /// An in-memory backend speaking the command protocol.
    #[derive(Default)]
    struct Fake {
        nodes: RefCell<BTreeMap<String, serde_json::Value>>,
        calls: RefCell<Vec<Invocation>>,
        /// Replies that replace the next run of a command: (exit, stdout, stderr).
        script: RefCell<BTreeMap<&'static str, (i32, String, String)>>,
        deny: RefCell<Option<&'static str>>,
        logs: RefCell<Vec<String>>,
    }

    impl Fake {
        fn which(program: &str) -> &'static str {
            match program {
                "/bin/create" => "create",
                "/bin/destroy" => "destroy",
                "/bin/list" => "list",
                other => panic!("unexpected program {other}"),
            }
        }

        fn runs(&self, which: &str) -> usize {
            self.calls
                .borrow()
                .iter()
                .filter(|c| Self::which(&c.program) == which)
                .count()
        }

        fn next(&self, which: &'static str, exit: i32, stdout: &str, stderr: &str) {
            self.script
                .borrow_mut()
                .insert(which, (exit, stdout.into(), stderr.into()));
        }
    }

    impl Runner for &Fake {
        fn run(&self, inv: &Invocation) -> std::result::Result<Output, ExecError> {
            let which = Fake::which(&inv.program);
            self.calls.borrow_mut().push(inv.clone());
            if *self.deny.borrow() == Some(which) {
                return Err(ExecError::Denied(format!(
                    "program {:?} is not granted",
                    inv.program
                )));
            }
            let reply = |code: i32, stdout: String, stderr: &str| Output {
                exit_code: Some(code),
                stdout: stdout.into_bytes(),
                stderr: stderr.as_bytes().to_vec(),
            };
            if let Some((code, stdout, stderr)) = self.script.borrow_mut().remove(which) {
                return Ok(reply(code, stdout, &stderr));
            }
            let mut nodes = self.nodes.borrow_mut();
            Ok(match which {
                "list" => {
                    let all: Vec<&serde_json::Value> = nodes.values().collect();
                    reply(0, serde_json::to_string(&all).unwrap(), "")
                }
                "create" => {
                    let env: BTreeMap<&str, &str> = inv
                        .env
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()))
                        .collect();
                    let id = format!("i-{}", nodes.len() + 1);
                    let labels: serde_json::Value =
                        serde_json::from_str(env[ENV_LABELS_JSON]).unwrap();
                    let node = serde_json::json!({
                        "id": id, "address": "10.0.0.1", "state": "creating",
                        "labels": labels,
                    });
                    nodes.insert(id, node.clone());
                    reply(0, node.to_string(), "")
                }
                _ => {
                    let id = inv.args.last().unwrap();
                    if nodes.remove(id).is_some() {
                        reply(0, String::new(), "")
                    } else {
                        reply(
                            1,
                            r#"{"error": {"kind": "not_found", "message": "no such node"}}"#.into(),
                            "",
                        )
                    }
                }
            })
        }

        fn info(&self, message: &str, fields: &[(&str, &str)]) {
            self.logs.borrow_mut().push(format!("{message} {fields:?}"));
        }
    }

    fn settings(extra: &[(&str, &str)]) -> Settings {
        let mut map: BTreeMap<String, String> = [
            ("create_command", "/bin/create"),
            ("create_args", "--state /s"),
            ("destroy_command", "/bin/destroy"),
            ("destroy_args", "--state /s"),
            ("list_command", "/bin/list"),
            ("list_args", "--state /s"),
            (
                "join_command",
                "node-agent join --token {token} --labels {labels} --node {request_id}",
            ),
            ("join_token", "tok-1"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
        for (k, v) in extra {
            map.insert((*k).to_string(), (*v).to_string());
        }
        Settings::from_lookup(|k| Ok(map.get(k).cloned())).unwrap()
    }

    fn request(id: &str) -> ProvisionRequest {
        let mut shape = NodeShape::new(2.0, 4 << 30);
        shape.labels.insert("role".into(), "worker".into());
        shape.zone = Some("z1".into());
        ProvisionRequest {
            request_id: id.into(),
            shape,
            boot: Default::default(),
            subnet: None,
        }
    }

    #[test]
    fn lifecycle_is_idempotent_and_owner_scoped() {
        let s = settings(&[]);
        let fake = Fake::default();
        let c = Client::new(&s, &fake);

        let node = c.provision("owner-1", &request("req-1")).unwrap();
        assert_eq!(node.provider_id, "i-1");
        assert_eq!(node.join_state, JoinState::Provisioning);
        assert_eq!(node.zone.as_deref(), Some("z1"), "filled in from the shape");
        assert_eq!(node.labels["wasmprov-owner"], "owner-1");
        assert_eq!(node.labels["wasmprov-request"], "req-1");
        assert_eq!(node.labels["role"], "worker");

        let create = fake.calls.borrow()[1].clone();
        assert_eq!(create.args, ["--state", "/s", "req-1"]);
        let env: BTreeMap<&str, &str> = create
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(env.len(), 7);
        assert!(CREATE_ENV.iter().all(|k| env.contains_key(k)));
        assert_eq!(env[ENV_OWNER], "owner-1");
        assert_eq!(env[ENV_REQUEST_ID], "req-1");
        assert_eq!(env[ENV_INSTANCE_TYPE], "");
        assert_eq!(env[ENV_ZONE], "z1");
        assert_eq!(env[ENV_CAPACITY_TYPE], "on-demand");
        // The node's labels carry the request digest (the SDK's conflict
        // check); the join command's do not.
        assert_eq!(
            env[ENV_LABELS],
            format!(
                "role=worker,wasmprov-owner=owner-1,wasmprov-request=req-1,wasmprov-request-digest={}",
                tags::request_digest(&request("req-1"))
            )
        );
        let doc = String::from_utf8(create.stdin.unwrap()).unwrap();
        assert!(doc.starts_with("#cloud-config\n"), "{doc}");
        assert!(
            doc.contains(r#"  - ["node-agent", "join", "--token", "tok-1", "--labels", "role=worker,wasmprov-owner=owner-1,wasmprov-request=req-1", "--node", "req-1"]"#),
            "{doc}"
        );
        assert!(fake.logs.borrow()[0].starts_with("node created"));
        assert!(!fake.logs.borrow()[0].contains("tok-1"));

        let again = c.provision("owner-1", &request("req-1")).unwrap();
        assert_eq!(again.provider_id, "i-1");
        assert_eq!(fake.runs("create"), 1, "one request id, one create");
        // The same request id of another owner is another node.
        let theirs = c.provision("owner-2", &request("req-1")).unwrap();
        assert_eq!(theirs.provider_id, "i-2");

        let mine = c.describe("owner-1").unwrap();
        assert_eq!(mine.len(), 1);
        assert_eq!(mine[0].provider_id, "i-1");

        assert!(matches!(
            c.terminate("owner-1", "i-2"),
            Err(Error::NotFound(_))
        ));
        assert_eq!(fake.runs("destroy"), 0, "never destroys a foreign node");
        c.terminate("owner-1", "i-1").unwrap();
        assert_eq!(
            fake.calls.borrow().last().unwrap().args,
            ["--state", "/s", "i-1"]
        );
        assert!(matches!(
            c.terminate("owner-1", "i-1"),
            Err(Error::NotFound(_))
        ));
        assert!(c.describe("owner-1").unwrap().is_empty());
        assert_eq!(c.describe("owner-2").unwrap().len(), 1);
    }

    #[test]
    fn request_and_owner_ids_are_passed_unchanged() {
        // Ids reach a provider checked (`wasmprov_api::ids`): they never
        // start with `-`, so as arguments they are never taken for options.
        let s = settings(&[]);
        let fake = Fake::default();
        let c = Client::new(&s, &fake);
        let id = "rm_rf-1";
        let node = c.provision("owner-one", &request(id)).unwrap();
        assert_eq!(node.labels["wasmprov-request"], id);
        assert_eq!(fake.calls.borrow()[1].args.last().unwrap(), id);
        // And found again by the same value.
        c.provision("owner-one", &request(id)).unwrap();
        assert_eq!(fake.runs("create"), 1);
    }

    #[test]
    fn states_and_fields_come_from_the_list() {
        let s = settings(&[]);
        let fake = Fake::default();
        let c = Client::new(&s, &fake);
        c.provision("o", &request("r")).unwrap();
        fake.nodes.borrow_mut().get_mut("i-1").unwrap()["state"] = "running".into();
        fake.nodes.borrow_mut().get_mut("i-1").unwrap()["capacity_type"] = "spot".into();
        let nodes = c.describe("o").unwrap();
        assert_eq!(nodes[0].join_state, JoinState::Joined);
        assert_eq!(nodes[0].capacity_type, CapacityType::Spot);
        assert_eq!(nodes[0].address.as_deref(), Some("10.0.0.1"));
    }

    #[test]
    fn catalogue_chooses_the_type_and_capacity_types_are_enforced() {
        let s = settings(&[
            (
                "instance_types",
                r#"[{"name": "small", "cpu": 2, "memory_gib": 4, "hourly_usd": 0.02},
                    {"name": "big", "cpu": 8, "memory_gib": 32, "hourly_usd": 0.2}]"#,
            ),
            ("join_command", "agent --type {instance_type} --zone={zone}"),
        ]);
        let fake = Fake::default();
        let c = Client::new(&s, &fake);
        let node = c.provision("o", &request("r")).unwrap();
        assert_eq!(node.instance_type.as_deref(), Some("small"));
        let create = fake.calls.borrow()[1].clone();
        assert!(
            create
                .env
                .contains(&(ENV_INSTANCE_TYPE.into(), "small".into()))
        );
        let doc = String::from_utf8(create.stdin.unwrap()).unwrap();
        assert!(
            doc.contains(r#"["agent", "--type", "small", "--zone=z1"]"#),
            "{doc}"
        );

        let mut huge = request("h");
        huge.shape.cpu = 64.0;
        assert!(matches!(
            c.provision("o", &huge),
            Err(Error::Unsupported(_))
        ));
        let mut spot = request("s");
        spot.shape.capacity_type = CapacityType::Spot;
        assert!(
            matches!(c.provision("o", &spot), Err(Error::Unsupported(m)) if m.contains("spot"))
        );
        assert_eq!(fake.runs("create"), 1, "refused before any command");
    }

    #[test]
    fn command_errors_map_to_contract_errors() {
        let s = settings(&[]);
        let fake = Fake::default();
        let c = Client::new(&s, &fake);
        fake.next(
            "create",
            1,
            r#"{"error": {"kind": "rate_limited", "message": "later", "retry_after_ms": 2000}}"#,
            "capacity",
        );
        assert!(matches!(
            c.provision("o", &request("r")),
            Err(Error::RateLimited {
                retry_after_ms: Some(2000),
                ..
            })
        ));
        fake.next("create", 2, "", "ERROR: zone z1 has no capacity\n");
        assert!(matches!(
            c.provision("o", &request("r")),
            Err(Error::Capacity {
                scope: CapacityScope::Zone,
                ..
            })
        ));
        fake.next("create", 0, "created it!", "");
        assert!(
            matches!(c.provision("o", &request("r")), Err(Error::Transport(m)) if m.contains("\"created it!\""))
        );
        fake.next("list", 0, "<html>", "");
        assert!(matches!(c.describe("o"), Err(Error::Transport(m)) if m.contains("<html>")));
        fake.next(
            "list",
            1,
            r#"{"error": {"kind": "auth", "message": "expired"}}"#,
            "",
        );
        assert!(matches!(c.describe("o"), Err(Error::Auth(m)) if m.contains("expired")));

        // A node made without our labels is reported, not silently leaked.
        fake.next(
            "create",
            0,
            r#"{"id": "i-9", "labels": {"role": "worker"}}"#,
            "",
        );
        assert!(
            matches!(c.provision("o", &request("r")), Err(Error::Other(m)) if m.contains("i-9") && m.contains("wasmprov-owner=o"))
        );

        // The destroy command's not_found is NotFound even when the list had it.
        c.provision("o", &request("r")).unwrap();
        fake.next(
            "destroy",
            1,
            r#"{"error": {"kind": "not_found", "message": "already gone"}}"#,
            "",
        );
        assert!(
            matches!(c.terminate("o", "i-1"), Err(Error::NotFound(m)) if m.contains("already gone"))
        );
        fake.next("destroy", 1, "", "destroy: quota of deletions reached");
        assert!(matches!(c.terminate("o", "i-1"), Err(Error::Quota(_))));
        fake.next("destroy", 1, "", "node not found");
        assert!(
            matches!(c.terminate("o", "i-1"), Err(Error::Other(_))),
            "stderr never means not-found: a misread would leak the node"
        );
    }

    #[test]
    fn denied_exec_is_invalid_config_and_missing_keys_stop_before_any_command() {
        let s = settings(&[]);
        let fake = Fake::default();
        let c = Client::new(&s, &fake);
        *fake.deny.borrow_mut() = Some("create");
        let err = c.provision("o", &request("r")).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidConfig(m) if m.starts_with("create command: exec denied")),
            "{err:?}"
        );
        *fake.deny.borrow_mut() = Some("list");
        assert!(
            matches!(c.describe("o"), Err(Error::InvalidConfig(m)) if m.contains("exec denied"))
        );

        let before = fake.calls.borrow().len();
        let mut s = settings(&[]);
        s.join_token = None;
        let c = Client::new(&s, &fake);
        assert!(
            matches!(c.provision("o", &request("r")), Err(Error::InvalidConfig(m)) if m.contains("join_token"))
        );
        s.destroy = None;
        let c = Client::new(&s, &fake);
        assert!(
            matches!(c.terminate("o", "x"), Err(Error::InvalidConfig(m)) if m.contains("destroy_command"))
        );
        assert_eq!(fake.calls.borrow().len(), before);
    }

    #[test]
    fn exec_failures_keep_their_kind() {
        assert!(matches!(
            exec_error(Which::List, ExecError::Timeout("30 s".into())),
            Error::Transport(m) if m == "list command: exec timed out: 30 s"
        ));
        assert!(matches!(
            exec_error(Which::Create, ExecError::OutputTooLarge("1 MiB".into())),
            Error::Other(m) if m.starts_with("create command: exec output too large")
        ));
        assert!(matches!(
            exec_error(Which::Destroy, ExecError::SpawnFailed("ENOENT".into())),
            Error::Other(m) if m.contains("failed to start")
        ));
    }
}
