//! What the operator's commands print, and how it becomes contract values.
//!
//! - `create` prints one node object, `list` a JSON array of them:
//!   `{"id", "address"?, "zone"?, "state"?, "status"?, "instance_type"?,
//!   "capacity_type"?, "labels"?, "private_address"?, "public_address"?,
//!   "arch"?, "gpu_model"?, "created_at"?}`. Unknown fields are ignored;
//!   `id` may be a string or a number; `null` and `""` mean "not known".
//!   `state` is the command's own word ([`STATES`] maps the common ones
//!   onto a status and a join state, and it is kept as the raw state);
//!   `status`, one of the contract's ten statuses, overrides the status the
//!   word maps to. `created_at` is RFC 3339; `arch` is `x86_64` or `arm64`.
//! - Any command may instead print `{"error": {"kind", "message",
//!   "retry_after_ms"?, "scope"?}}` on stdout; that wins over everything
//!   else, whatever the exit code.
//! - Otherwise a non-zero exit is mapped from stderr: a line containing
//!   `capacity` is a capacity error, `quota` a quota error, the word `rate`
//!   (or `ratelimit`, `throttl…`, `too many requests`) a rate limit; anything
//!   else is `other`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use wasmprov_guest::exec::Output;
use wasmprov_guest::state::StateTable;
use wasmprov_guest::{
    Arch, CapacityScope, CapacityType, Error, JoinState, Labels, NodeHandle, NodeStatus,
};

/// How much of malformed output an error message quotes.
pub const EXCERPT_BYTES: usize = 200;
/// How much of stderr an error message quotes.
pub const STDERR_BYTES: usize = 1000;

/// A node as a command reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// The backend's id of the node.
    pub id: String,
    /// Reachable address.
    pub address: Option<String>,
    /// Zone the node is in.
    pub zone: Option<String>,
    /// The command's state word (see [`STATES`]).
    pub state: Option<String>,
    /// The command's normalized status, when it gave one of the ten.
    pub status: Option<NodeStatus>,
    /// Address in the private network.
    pub private_address: Option<String>,
    /// Public address.
    pub public_address: Option<String>,
    /// CPU architecture.
    pub arch: Option<Arch>,
    /// GPU model.
    pub gpu_model: Option<String>,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at_ms: Option<u64>,
    /// Instance type.
    pub instance_type: Option<String>,
    /// Billing, when the command said (see [`capacity_type`]).
    pub capacity_type: Option<CapacityType>,
    /// Labels, when the command said.
    pub labels: Option<Labels>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Id {
    Text(String),
    Number(u64),
}

#[derive(Deserialize)]
struct WireNode {
    id: Id,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    zone: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    private_address: Option<String>,
    #[serde(default)]
    public_address: Option<String>,
    #[serde(default)]
    arch: Option<String>,
    #[serde(default)]
    gpu_model: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    instance_type: Option<String>,
    #[serde(default)]
    capacity_type: Option<String>,
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
}

fn known(v: Option<String>) -> Option<String> {
    v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

impl TryFrom<WireNode> for Node {
    type Error = String;

    fn try_from(w: WireNode) -> Result<Self, String> {
        let id = match w.id {
            Id::Text(s) => s.trim().to_string(),
            Id::Number(n) => n.to_string(),
        };
        if id.is_empty() {
            return Err("a node has an empty \"id\"".to_string());
        }
        let status = match known(w.status) {
            None => None,
            Some(word) => Some(
                NodeStatus::ALL
                    .into_iter()
                    .find(|s| s.as_str().eq_ignore_ascii_case(&word))
                    .ok_or_else(|| {
                        format!(
                            "node {id:?} has status {word:?}; the statuses are {}",
                            NodeStatus::ALL.map(NodeStatus::as_str).join(", ")
                        )
                    })?,
            ),
        };
        let arch = match known(w.arch) {
            None => None,
            Some(word) => Some(
                word.parse::<Arch>()
                    .map_err(|e| format!("node {id:?}: {e}"))?,
            ),
        };
        let created_at_ms = match known(w.created_at) {
            None => None,
            Some(t) => Some(wasmprov_guest::time::rfc3339_ms(&t).ok_or_else(|| {
                format!("node {id:?} has created_at {t:?}, not an RFC 3339 time")
            })?),
        };
        Ok(Self {
            id,
            address: known(w.address),
            zone: known(w.zone),
            state: known(w.state),
            status,
            private_address: known(w.private_address),
            public_address: known(w.public_address),
            arch,
            gpu_model: known(w.gpu_model),
            created_at_ms,
            instance_type: known(w.instance_type),
            capacity_type: known(w.capacity_type).and_then(|c| capacity_type(&c)),
            labels: w.labels,
        })
    }
}

impl Node {
    /// The node's labels (empty when the command reported none).
    #[must_use]
    pub fn labels(&self) -> Labels {
        self.labels.clone().unwrap_or_default()
    }

    /// Whether the node carries `label` = `value`.
    #[must_use]
    pub fn has_label(&self, label: &str, value: &str) -> bool {
        self.labels
            .as_ref()
            .and_then(|l| l.get(label))
            .is_some_and(|v| v == value)
    }

    /// The contract's handle; `default_capacity` when the command gave none.
    #[must_use]
    pub fn to_handle(&self, default_capacity: CapacityType) -> NodeHandle {
        let mut node = NodeHandle {
            provider_id: self.id.clone(),
            address: self
                .address
                .clone()
                .or_else(|| self.private_address.clone())
                .or_else(|| self.public_address.clone()),
            private_address: self.private_address.clone(),
            public_address: self.public_address.clone(),
            arch: self.arch,
            gpu_model: self.gpu_model.clone(),
            created_at_ms: self.created_at_ms,
            zone: self.zone.clone(),
            capacity_type: self.capacity_type.unwrap_or(default_capacity),
            instance_type: self.instance_type.clone(),
            labels: self.labels(),
            ..NodeHandle::default()
        };
        match &self.state {
            Some(word) => STATES.apply(word, &mut node),
            None => {
                node.status = NodeStatus::Pending;
                node.join_state = JoinState::Provisioning;
            }
        }
        if let Some(status) = self.status {
            node.status = status;
        }
        node
    }
}

/// A command's state word → join state. Case and surrounding blanks are
/// ignored; an unknown word is `provisioning` (the node is not usable yet,
/// and not known to have failed).
#[must_use]
pub fn join_state(state: &str) -> JoinState {
    STATES.get(state)
}

/// The protocol's state words: status and join state. A word not listed
/// is `unknown`, taken to be still on its way (the word is kept as the raw
/// state); a command that knows better prints `status` too.
pub const STATES: StateTable = StateTable::new(
    &[
        ("creating", NodeStatus::Pending, JoinState::Provisioning),
        ("pending", NodeStatus::Pending, JoinState::Provisioning),
        ("provisioning", NodeStatus::Pending, JoinState::Provisioning),
        ("booting", NodeStatus::Running, JoinState::Booting),
        ("joining", NodeStatus::Running, JoinState::Joining),
        ("ready", NodeStatus::Running, JoinState::Joined),
        ("running", NodeStatus::Running, JoinState::Joined),
        ("joined", NodeStatus::Running, JoinState::Joined),
        ("failed", NodeStatus::Unknown, JoinState::Failed),
        ("error", NodeStatus::Unknown, JoinState::Failed),
        ("stopping", NodeStatus::Stopping, JoinState::Failed),
        ("stopped", NodeStatus::Stopped, JoinState::Failed),
        ("off", NodeStatus::Stopped, JoinState::Failed),
        ("suspending", NodeStatus::Suspending, JoinState::Failed),
        ("suspended", NodeStatus::Suspended, JoinState::Failed),
        ("paused", NodeStatus::Suspended, JoinState::Failed),
        ("deleting", NodeStatus::Deleting, JoinState::Failed),
        ("terminating", NodeStatus::Deleting, JoinState::Failed),
        ("deleted", NodeStatus::Deleted, JoinState::Failed),
        ("terminated", NodeStatus::Deleted, JoinState::Failed),
        ("destroyed", NodeStatus::Deleted, JoinState::Failed),
        ("repairing", NodeStatus::Repairing, JoinState::Booting),
        ("migrating", NodeStatus::Repairing, JoinState::Booting),
    ],
    (NodeStatus::Unknown, JoinState::Provisioning),
);

/// A capacity type word: `on-demand` (also `on_demand`, `ondemand`) or `spot`.
#[must_use]
pub fn capacity_type(word: &str) -> Option<CapacityType> {
    match word.trim().to_ascii_lowercase().as_str() {
        "on-demand" | "on_demand" | "ondemand" => Some(CapacityType::OnDemand),
        "spot" => Some(CapacityType::Spot),
        _ => None,
    }
}

/// The name of a capacity type in `WASMPROV_CAPACITY_TYPE` and the docs.
#[must_use]
pub fn capacity_word(c: CapacityType) -> &'static str {
    match c {
        CapacityType::OnDemand => "on-demand",
        CapacityType::Spot => "spot",
    }
}

/// At most the first `max` bytes of `bytes` as text, cut at a character
/// boundary, with `…` when something was cut.
#[must_use]
pub fn excerpt(bytes: &[u8], max: usize) -> String {
    if bytes.len() <= max {
        return String::from_utf8_lossy(bytes).into_owned();
    }
    let mut end = max;
    while end > 0 && bytes[end] & 0xC0 == 0x80 {
        end -= 1;
    }
    let mut s = String::from_utf8_lossy(&bytes[..end]).into_owned();
    s.push('…');
    s
}

fn malformed(what: &str, expected: &str, why: &str, stdout: &[u8]) -> Error {
    Error::Transport(format!(
        "{what} command printed output that is not {expected} ({why}); it begins {:?}",
        excerpt(stdout, EXCERPT_BYTES)
    ))
}

/// Parses `create`'s output: one node object.
///
/// # Errors
/// [`Error::Transport`] quoting the start of the output when it is not one.
pub fn parse_node(what: &str, stdout: &[u8]) -> Result<Node, Error> {
    let expected = "one JSON node object";
    let wire: WireNode = serde_json::from_slice(stdout)
        .map_err(|e| malformed(what, expected, &e.to_string(), stdout))?;
    Node::try_from(wire).map_err(|e| malformed(what, expected, &e, stdout))
}

/// Parses `list`'s output: a JSON array of node objects (`[]` when none).
///
/// # Errors
/// [`Error::Transport`] quoting the start of the output when it is not one.
pub fn parse_list(what: &str, stdout: &[u8]) -> Result<Vec<Node>, Error> {
    let expected = "a JSON array of node objects";
    let wire: Vec<WireNode> = serde_json::from_slice(stdout)
        .map_err(|e| malformed(what, expected, &e.to_string(), stdout))?;
    wire.into_iter()
        .map(|w| Node::try_from(w).map_err(|e| malformed(what, expected, &e, stdout)))
        .collect()
}

/// The error a command reported on stdout as `{"error": {...}}`, if it did.
///
/// `kind` is one of `capacity`, `quota`, `rate_limited`, `auth`,
/// `not_found`, `transport`, `unsupported`, `invalid_config`, `other`
/// (`-` may stand for `_`; an unknown kind is `other`). `scope` (for
/// capacity) is `zone` (the default), `instance_type` or `group`.
#[must_use]
pub fn structured_error(what: &str, stdout: &[u8]) -> Option<Error> {
    let value: Value = serde_json::from_slice(stdout).ok()?;
    let err = value.as_object()?.get("error")?;
    let (kind, message, retry_after_ms, scope) = match err {
        Value::String(m) => ("other".to_string(), m.clone(), None, None),
        Value::Object(o) => {
            let text = |k: &str| o.get(k).and_then(Value::as_str).map(str::to_string);
            (
                text("kind")
                    .unwrap_or_default()
                    .trim()
                    .to_ascii_lowercase()
                    .replace('-', "_"),
                text("message").unwrap_or_default(),
                o.get("retry_after_ms").and_then(Value::as_u64),
                text("scope"),
            )
        }
        _ => return None,
    };
    let message = if message.trim().is_empty() {
        format!("{what} command reported {kind}")
    } else {
        format!("{what} command: {}", message.trim())
    };
    Some(match kind.as_str() {
        "capacity" => Error::Capacity {
            scope: scope
                .as_deref()
                .map_or(CapacityScope::Zone, capacity_scope_word),
            message,
        },
        "quota" => Error::Quota(message),
        "rate_limited" | "rate_limit" | "rate" => Error::RateLimited {
            retry_after_ms,
            message,
        },
        "auth" => Error::Auth(message),
        "not_found" => Error::NotFound(message),
        "transport" => Error::Transport(message),
        "unsupported" => Error::Unsupported(message),
        "invalid_config" => Error::InvalidConfig(message),
        _ => Error::Other(message),
    })
}

fn capacity_scope_word(word: &str) -> CapacityScope {
    let w = word.trim().to_ascii_lowercase().replace(['-', ' '], "_");
    if w.contains("instance") || w == "type" {
        CapacityScope::InstanceType
    } else if w.contains("group") || w.contains("pool") {
        CapacityScope::Group
    } else {
        CapacityScope::Zone
    }
}

/// Which contract error one stderr line suggests, if any.
fn classify_line(line: &str, message: &str) -> Option<Error> {
    let l = line.to_ascii_lowercase();
    // "capacity type" names the billing kind, not a shortage.
    let shortage = ["capacity type", "capacity_type", "capacity-type"]
        .iter()
        .fold(l.clone(), |acc, phrase| acc.replace(phrase, ""));
    if shortage.contains("capacity") {
        let scope = if l.contains("instance type")
            || l.contains("instance_type")
            || l.contains("instance-type")
        {
            CapacityScope::InstanceType
        } else if l.contains("group") || l.contains("pool") {
            CapacityScope::Group
        } else {
            CapacityScope::Zone
        };
        return Some(Error::Capacity {
            scope,
            message: message.to_string(),
        });
    }
    if l.contains("quota") {
        return Some(Error::Quota(message.to_string()));
    }
    // `rate` as a word, so that "generate" or "separate" do not count.
    let rate_word = l
        .split(|c: char| !c.is_ascii_alphabetic())
        .any(|w| w == "rate");
    if rate_word
        || l.contains("ratelimit")
        || l.contains("throttl")
        || l.contains("too many requests")
    {
        return Some(Error::RateLimited {
            retry_after_ms: None,
            message: message.to_string(),
        });
    }
    None
}

/// The error for a command that failed: the structured form on stdout when
/// there is one, else a non-zero exit mapped from stderr.
#[must_use]
pub fn failure(what: &str, out: &Output) -> Error {
    if let Some(e) = structured_error(what, &out.stdout) {
        return e;
    }
    let stderr = excerpt(out.stderr.trim_ascii(), STDERR_BYTES);
    let status = match out.exit_code {
        Some(code) => format!("exited with code {code}"),
        None => "was killed by a signal".to_string(),
    };
    let message = if stderr.is_empty() {
        format!("{what} command {status}")
    } else {
        format!("{what} command {status}: {stderr}")
    };
    let classified = stderr
        .lines()
        .find_map(|line| classify_line(line, &message));
    match classified {
        Some(e) => e,
        // A command killed before it could say anything finished nothing
        // we know of: like a dropped connection, worth trying again (list
        // finds a node a killed create made).
        None if out.exit_code.is_none() => Error::Transport(message),
        None => Error::Other(message),
    }
}

/// Whether a finished command succeeded: it exited 0 and did not print the
/// structured error.
///
/// # Errors
/// The structured error, or what [`failure`] makes of a non-zero exit.
pub fn check(what: &str, out: &Output) -> Result<(), Error> {
    if !out.success() {
        return Err(failure(what, out));
    }
    match structured_error(what, &out.stdout) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out(code: Option<i32>, stdout: &str, stderr: &str) -> Output {
        Output {
            exit_code: code,
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
        }
    }

    #[test]
    fn state_table() {
        let cases = [
            ("creating", JoinState::Provisioning),
            ("pending", JoinState::Provisioning),
            ("provisioning", JoinState::Provisioning),
            ("booting", JoinState::Booting),
            ("joining", JoinState::Joining),
            ("ready", JoinState::Joined),
            ("running", JoinState::Joined),
            ("joined", JoinState::Joined),
            ("failed", JoinState::Failed),
            ("error", JoinState::Failed),
            ("  RUNNING\n", JoinState::Joined),
            ("Failed", JoinState::Failed),
            ("rebooting", JoinState::Provisioning),
            ("", JoinState::Provisioning),
            ("stopped", JoinState::Failed),
        ];
        for (word, want) in cases {
            assert_eq!(join_state(word), want, "{word:?}");
        }
        // The statuses 0.1 lost: stopped, deleted and suspended nodes are
        // no longer "provisioning".
        for (word, want) in [
            ("creating", NodeStatus::Pending),
            ("running", NodeStatus::Running),
            ("stopping", NodeStatus::Stopping),
            ("stopped", NodeStatus::Stopped),
            ("off", NodeStatus::Stopped),
            ("suspending", NodeStatus::Suspending),
            ("suspended", NodeStatus::Suspended),
            ("deleting", NodeStatus::Deleting),
            ("deleted", NodeStatus::Deleted),
            ("repairing", NodeStatus::Repairing),
            ("rebooting", NodeStatus::Unknown),
        ] {
            assert_eq!(STATES.status(word), want, "{word:?}");
        }
    }

    #[test]
    fn nodes_parse_leniently_where_harmless() {
        let n = parse_node(
            "create",
            br#"{"id": "i-1", "address": "10.0.0.1", "zone": "z1", "state": "running",
                "instance_type": "small", "capacity_type": "spot",
                "labels": {"wasmprov-owner": "o1"}, "extra": [1, 2]}"#,
        )
        .unwrap();
        assert_eq!(n.id, "i-1");
        assert!(n.has_label("wasmprov-owner", "o1"));
        assert!(!n.has_label("wasmprov-owner", "o2"));
        let h = n.to_handle(CapacityType::OnDemand);
        assert_eq!(h.provider_id, "i-1");
        assert_eq!(h.address.as_deref(), Some("10.0.0.1"));
        assert_eq!(h.zone.as_deref(), Some("z1"));
        assert_eq!(h.join_state, JoinState::Joined);
        assert_eq!(h.instance_type.as_deref(), Some("small"));
        assert_eq!(h.capacity_type, CapacityType::Spot);
        assert_eq!(h.labels["wasmprov-owner"], "o1");

        let n = parse_node(
            "create",
            br#"{"id": 42, "address": null, "zone": "", "capacity_type": "weird"}"#,
        )
        .unwrap();
        assert_eq!(n.id, "42");
        assert_eq!(n.labels, None);
        let h = n.to_handle(CapacityType::Spot);
        assert_eq!(h.address, None);
        assert_eq!(h.zone, None);
        assert_eq!(h.join_state, JoinState::Provisioning);
        assert_eq!(h.capacity_type, CapacityType::Spot);
        assert!(h.labels.is_empty());

        assert_eq!(parse_list("list", b" [ ]\n").unwrap(), []);
        let nodes = parse_list("list", br#"[{"id":"a"},{"id":"b","state":"joining"}]"#).unwrap();
        assert_eq!(nodes.len(), 2);
        assert_eq!(
            nodes[1].to_handle(CapacityType::OnDemand).join_state,
            JoinState::Joining
        );
    }

    #[test]
    fn malformed_output_is_transport_quoting_its_start() {
        let long = format!("not json {}", "x".repeat(500));
        let cases: &[(&str, &[u8])] = &[
            ("create", long.as_bytes()),
            ("create", b""),
            ("create", br#"{"address": "no id"}"#),
            ("create", br#"{"id": ""}"#),
            ("create", br#"{"id": true}"#),
            ("create", br#"[{"id": "a"}]"#),
            ("create", br#"{"id": "a", "labels": {"k": 1}}"#),
            ("list", b"\n"),
            ("list", br#"{"id": "a"}"#),
            ("list", br#"[{"id": "a"}, {"name": "b"}]"#),
        ];
        for (what, stdout) in cases {
            let err = if *what == "list" {
                parse_list(what, stdout).unwrap_err()
            } else {
                parse_node(what, stdout).map(|_| ()).unwrap_err()
            };
            let Error::Transport(m) = &err else {
                panic!("{stdout:?}: {err:?}")
            };
            assert!(m.starts_with(&format!("{what} command")), "{m}");
            let start = excerpt(stdout, EXCERPT_BYTES);
            assert!(m.contains(&format!("{start:?}")), "{m}");
        }
        let Error::Transport(m) = parse_node("create", long.as_bytes()).unwrap_err() else {
            unreachable!()
        };
        assert!(m.contains(&"x".repeat(EXCERPT_BYTES - 9)), "{m}");
        assert!(!m.contains(&"x".repeat(EXCERPT_BYTES - 8)), "{m}");
    }

    #[test]
    fn excerpts_cut_at_character_boundaries() {
        assert_eq!(excerpt(b"short", 200), "short");
        assert_eq!(excerpt(b"abcdef", 3), "abc…");
        let s = "ééé".as_bytes();
        assert_eq!(excerpt(s, 3), "é…");
        assert_eq!(excerpt(s, 4), "éé…");
    }

    #[test]
    fn structured_errors_win_and_map_by_kind() {
        let cases: &[(&str, Error)] = &[
            (
                r#"{"error": {"kind": "capacity", "message": "z1 is full"}}"#,
                Error::Capacity {
                    scope: CapacityScope::Zone,
                    message: "create command: z1 is full".into(),
                },
            ),
            (
                r#"{"error": {"kind": "capacity", "message": "m", "scope": "instance_type"}}"#,
                Error::Capacity {
                    scope: CapacityScope::InstanceType,
                    message: "create command: m".into(),
                },
            ),
            (
                r#"{"error": {"kind": "capacity", "message": "m", "scope": "group"}}"#,
                Error::Capacity {
                    scope: CapacityScope::Group,
                    message: "create command: m".into(),
                },
            ),
            (
                r#"{"error": {"kind": "quota", "message": "20 nodes"}}"#,
                Error::Quota("create command: 20 nodes".into()),
            ),
            (
                r#"{"error": {"kind": "rate_limited", "message": "slow", "retry_after_ms": 1500}}"#,
                Error::RateLimited {
                    retry_after_ms: Some(1500),
                    message: "create command: slow".into(),
                },
            ),
            (
                r#"{"error": {"kind": "rate-limited"}}"#,
                Error::RateLimited {
                    retry_after_ms: None,
                    message: "create command reported rate_limited".into(),
                },
            ),
            (
                r#"{"error": {"kind": "auth", "message": "bad key"}}"#,
                Error::Auth("create command: bad key".into()),
            ),
            (
                r#"{"error": {"kind": "not_found", "message": "gone"}}"#,
                Error::NotFound("create command: gone".into()),
            ),
            (
                r#"{"error": {"kind": "transport", "message": "api down"}}"#,
                Error::Transport("create command: api down".into()),
            ),
            (
                r#"{"error": {"kind": "unsupported", "message": "gpu"}}"#,
                Error::Unsupported("create command: gpu".into()),
            ),
            (
                r#"{"error": {"kind": "invalid_config", "message": "no image"}}"#,
                Error::InvalidConfig("create command: no image".into()),
            ),
            (
                r#"{"error": {"kind": "martian", "message": "??"}}"#,
                Error::Other("create command: ??".into()),
            ),
            (
                r#"{"error": "just text"}"#,
                Error::Other("create command: just text".into()),
            ),
        ];
        for (stdout, want) in cases {
            // Non-zero exit, with stderr that would suggest something else.
            let o = out(Some(1), stdout, "quota exceeded");
            assert_eq!(&failure("create", &o), want, "{stdout}");
            // Exit 0 with the error object is still an error.
            let o = out(Some(0), stdout, "");
            assert_eq!(check("create", &o).as_ref(), Err(want), "{stdout}");
        }
        // Not an error object: a node, an array, error null.
        for stdout in [r#"{"id": "a"}"#, "[]", r#"{"error": null}"#, "garbage"] {
            assert_eq!(structured_error("create", stdout.as_bytes()), None);
            assert_eq!(check("create", &out(Some(0), stdout, "")), Ok(()));
        }
    }

    #[test]
    fn stderr_heuristics_for_commands_without_the_structured_form() {
        let cases: &[(&str, &str)] = &[
            ("error: insufficient capacity in z1", "capacity:zone"),
            (
                "InsufficientInstanceCapacity: instance type m5 unavailable",
                "capacity:instance_type",
            ),
            ("no capacity left in pool gpu", "capacity:group"),
            ("Quota exceeded: 20 of 20 nodes", "quota"),
            ("QUOTA", "quota"),
            ("rate limit exceeded", "rate"),
            ("Rate exceeded", "rate"),
            ("error: rate-limited, try later", "rate"),
            ("RateLimitExceeded", "rate"),
            ("request was throttled", "rate"),
            ("429 Too Many Requests", "rate"),
            ("first line\nsecond: quota hit", "quota"),
            ("failed to generate key", "other"),
            ("invalid capacity type: spot", "other"),
            ("capacity_type=spot is not offered", "other"),
            ("separate failure", "other"),
            ("disk on fire", "other"),
            ("", "other"),
        ];
        for (stderr, want) in cases {
            let err = failure("create", &out(Some(3), "not json", stderr));
            let got = match &err {
                Error::Capacity { scope, .. } => match scope {
                    CapacityScope::Zone => "capacity:zone",
                    CapacityScope::InstanceType => "capacity:instance_type",
                    CapacityScope::Group => "capacity:group",
                },
                Error::Quota(_) => "quota",
                Error::RateLimited {
                    retry_after_ms: None,
                    ..
                } => "rate",
                Error::Other(_) => "other",
                e => panic!("{stderr:?}: {e:?}"),
            };
            assert_eq!(got, *want, "{stderr:?}");
            let text = err.to_string();
            assert!(text.contains("create command exited with code 3"), "{text}");
            assert!(text.contains(stderr.trim()), "{text}");
        }
        let err = failure("destroy", &out(None, "", "Killed"));
        assert_eq!(
            err,
            Error::Transport("destroy command was killed by a signal: Killed".into())
        );
        let err = failure("create", &out(None, "", "quota exceeded"));
        assert!(matches!(err, Error::Quota(_)), "{err:?}");
        let long = "e".repeat(5000);
        let err = failure("list", &out(Some(1), "", &long));
        assert!(err.to_string().len() < STDERR_BYTES + 100, "{err}");
    }

    #[test]
    fn capacity_words() {
        for (w, c) in [
            ("on-demand", Some(CapacityType::OnDemand)),
            ("On_Demand", Some(CapacityType::OnDemand)),
            ("ondemand", Some(CapacityType::OnDemand)),
            (" spot ", Some(CapacityType::Spot)),
            ("reserved", None),
        ] {
            assert_eq!(capacity_type(w), c, "{w}");
        }
        assert_eq!(capacity_word(CapacityType::OnDemand), "on-demand");
        assert_eq!(capacity_word(CapacityType::Spot), "spot");
    }
}
