//! What a suite run found: each contract rule passed, failed (with what was
//! seen) or skipped (with why), for people and as JSON.

use std::fmt;

use crate::cassette::Unrecorded;
use crate::faults::Injected;
use wasmprov_host::intercept::Denial;

/// The contract rules the suite checks, with what each asks.
pub const RULES: &[(&str, &str)] = &[
    (
        "identity.stable",
        "name and capacity types are the same on every call, and not empty",
    ),
    (
        "price.valid",
        "a price hint is positive, names an instance type, and has the shape's capacity type",
    ),
    (
        "price.explicit-type",
        "a shape naming an instance type is priced as that type",
    ),
    (
        "price.monotonic",
        "a larger shape is never cheaper than a smaller one",
    ),
    (
        "price.unsatisfiable",
        "a shape no type can hold gets no price, or an unsupported/capacity error",
    ),
    (
        "provision.handle",
        "provision returns a node id, a live state, a zone (the shape's when it names one) and the shape's capacity type",
    ),
    (
        "provision.tags",
        "the handle carries this host's owner tag and the request id tag",
    ),
    (
        "describe.lists-own",
        "describe lists a provisioned node with this host's owner tag",
    ),
    (
        "provision.idempotent",
        "provisioning again with the same request id returns the same node",
    ),
    (
        "provision.single-node",
        "one request id never makes more than one node in the cloud, retries included",
    ),
    (
        "provision.unsatisfiable",
        "an impossible shape is refused as unsupported or capacity, and creates nothing",
    ),
    (
        "describe.no-foreign",
        "describe never returns a node another owner made, or one without this host's owner tag",
    ),
    (
        "terminate.foreign-refused",
        "terminating another owner's node is not-found, and the node stays",
    ),
    (
        "terminate.removes",
        "after terminate the node is gone from describe and from the cloud",
    ),
    (
        "terminate.repeat",
        "terminating a node again succeeds or is not-found",
    ),
    (
        "offerings.agree",
        "offerings name distinct types, and every type price-hint names is an offering at the same on-demand price (a spot hint is an estimate: only its type is checked)",
    ),
    (
        "shape.binds",
        "a shape asking for an architecture, GPU model or disk is priced only as a type that has it, or refused",
    ),
    (
        "status.live",
        "a node just provisioned is pending, running or unknown, never stopping, stopped, suspended or deleted",
    ),
    (
        "get.agrees",
        "get returns the node describe lists, and none for another owner's node",
    ),
    (
        "boot.honoured",
        "a request with boot data (user data, an image, an SSH key, each alone) is refused as unsupported, or makes a node",
    ),
    (
        "boot.user-data",
        "user data is refused as unsupported, or reaches the cloud byte for byte (where the fake records it)",
    ),
    (
        "boot.image",
        "an image asked for is refused as unsupported, or is the one the cloud is asked to boot (where the fake records it)",
    ),
    (
        "boot.ssh-keys",
        "an SSH key is refused as unsupported, or reaches the cloud (where the fake records it)",
    ),
    (
        "shape.zone",
        "a shape naming a zone the offerings list (not the default one) makes the node in that zone, by the handle and by the cloud",
    ),
    (
        "handle.truth",
        "a handle's zone, instance type, addresses and state are what the cloud holds (where the fake records them)",
    ),
    (
        "handle.created-at",
        "a handle says when the node was created: the cloud's time (where the fake records it), or a time during the run",
    ),
    (
        "describe.pages",
        "describe lists every node of this owner when they span more than one page of the cloud's list (the suite plants them)",
    ),
    (
        "ids.awkward",
        "valid but awkward request ids (a--b, a_b__c, 63 characters) round-trip: labels in the cloud, handle, retry, describe, get, terminate",
    ),
    (
        "handle.ipv6",
        "a handle's IPv6 address is the one the cloud gave the node (where the fake records it)",
    ),
    (
        "handle.hostname",
        "a handle's hostname is the one the cloud gave the node (where the fake records it)",
    ),
    (
        "labels.set",
        "set-labels replaces a node's labels (the answer, get, describe and the cloud show them), keeps the owner and request tags, refuses a reserved key, and is not-found for another owner's node or one gone; without the call, unsupported",
    ),
    (
        "request.subnet",
        "a subnet no cloud has is refused and makes nothing; a node asked in the fake's subnet is made there (as the fake records it) or refused as unsupported, never placed elsewhere",
    ),
    (
        "address.assign",
        "a stable address is assigned (the cloud has it on the node), assigned again (no change), moved to a second node, released, released again (not-found); another owner's node is not-found; without networking, unsupported",
    ),
    (
        "targets",
        "a node is registered in the fake's target group (the cloud and list-targets show it once, again no change), deregistered, deregistered again (not-found); another owner's node is not-found; without networking, unsupported",
    ),
    (
        "subnet.capacity",
        "the free (and total) addresses subnet-capacity says a subnet has are the cloud's; without networking, unsupported",
    ),
    (
        "errors.classified",
        "every error is the contract variant that fits what the cloud did (rate-limited for 429, transport for 5xx and lost connections, capacity, quota, not-found)",
    ),
    (
        "errors.no-fault",
        "the plugin never traps, runs out of time or memory, or breaks the contract's types",
    ),
    (
        "grants.inside",
        "the plugin stays inside its grants: the host denied nothing",
    ),
    (
        "leak.none",
        "after the suite terminates what describe lists, no node of this owner is left in the cloud",
    ),
    (
        "replay.recorded",
        "in replay, every request the plugin makes is in the cassette",
    ),
];

/// How a rule fared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every check held.
    Pass,
    /// At least one check failed.
    Fail,
    /// Not checked (the reason is in `notes`).
    Skip,
}

/// One rule's outcome.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RuleResult {
    /// The rule's id (`describe.no-foreign`).
    pub rule: &'static str,
    /// What the rule asks.
    pub asks: &'static str,
    /// Outcome.
    pub status: Status,
    /// How many checks of the rule ran.
    pub checks: u32,
    /// What was seen, for each failed check.
    pub failures: Vec<String>,
    /// Why the rule was skipped.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// The outcome of one suite run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Report {
    /// The plugin tested.
    pub plugin: String,
    /// What its requests went to.
    pub target: String,
    /// The fault spec.
    pub faults: String,
    /// Whether every rule that ran passed.
    pub passed: bool,
    /// Each rule.
    pub rules: Vec<RuleResult>,
    /// Faults injected, in order.
    pub injected: Vec<Injected>,
    /// Requests the host refused.
    pub denials: Vec<Denial>,
    /// Requests a replayed cassette did not hold.
    pub unrecorded: Vec<Unrecorded>,
    /// Plugin calls made.
    pub calls: u32,
    /// Wall time of the run, in milliseconds.
    pub duration_ms: u64,
    /// Anything else worth saying (a cassette written, unused interactions).
    pub notes: Vec<String>,
}

impl Report {
    /// Whether every rule that ran passed.
    #[must_use]
    pub fn passed(&self) -> bool {
        self.passed
    }

    /// The rules that failed.
    pub fn failures(&self) -> impl Iterator<Item = &RuleResult> {
        self.rules.iter().filter(|r| r.status == Status::Fail)
    }

    /// The result of `rule`.
    #[must_use]
    pub fn rule(&self, rule: &str) -> Option<&RuleResult> {
        self.rules.iter().find(|r| r.rule == rule)
    }

    /// Panics with the whole report when a rule failed: for `cargo test`.
    ///
    /// # Panics
    /// When the run did not pass.
    #[track_caller]
    pub fn assert_passed(&self) {
        assert!(self.passed, "the conformance suite failed:\n{self}");
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "wasmprov test: plugin {} against {}; faults: {}",
            self.plugin, self.target, self.faults
        )?;
        let width = self.rules.iter().map(|r| r.rule.len()).max().unwrap_or(0);
        for r in &self.rules {
            let tag = match r.status {
                Status::Pass => "PASS",
                Status::Fail => "FAIL",
                Status::Skip => "SKIP",
            };
            writeln!(f, "  {tag} {:width$}  {}", r.rule, r.asks)?;
            for failure in &r.failures {
                let mut lines = failure.lines();
                if let Some(first) = lines.next() {
                    writeln!(f, "       - {first}")?;
                }
                for line in lines {
                    writeln!(f, "         {line}")?;
                }
            }
            if let Some(why) = &r.skipped {
                writeln!(f, "       ({why})")?;
            }
        }
        if !self.injected.is_empty() {
            let mut counts = std::collections::BTreeMap::new();
            for i in &self.injected {
                *counts.entry(i.kind).or_insert(0u32) += 1;
            }
            let list: Vec<String> = counts.iter().map(|(k, n)| format!("{k} ×{n}")).collect();
            writeln!(f, "  faults injected: {}", list.join(", "))?;
        }
        for note in &self.notes {
            writeln!(f, "  note: {note}")?;
        }
        let count = |s| self.rules.iter().filter(|r| r.status == s).count();
        write!(
            f,
            "{}: {} rules passed, {} failed, {} skipped; {} plugin calls in {} ms",
            if self.passed { "PASSED" } else { "FAILED" },
            count(Status::Pass),
            count(Status::Fail),
            count(Status::Skip),
            self.calls,
            self.duration_ms
        )
    }
}

/// Collects checks while the suite runs.
#[derive(Debug, Default)]
pub(crate) struct Checks {
    results: Vec<RuleResult>,
}

impl Checks {
    pub(crate) fn new() -> Self {
        Self {
            results: RULES
                .iter()
                .map(|(rule, asks)| RuleResult {
                    rule,
                    asks,
                    status: Status::Skip,
                    checks: 0,
                    failures: Vec::new(),
                    skipped: None,
                })
                .collect(),
        }
    }

    fn get(&mut self, rule: &str) -> &mut RuleResult {
        let index = self
            .results
            .iter()
            .position(|r| r.rule == rule)
            .unwrap_or_else(|| panic!("unknown rule {rule}"));
        &mut self.results[index]
    }

    /// Records one check of `rule`: `Ok(())` or what was seen.
    pub(crate) fn check(&mut self, rule: &str, outcome: Result<(), String>) {
        let r = self.get(rule);
        r.checks += 1;
        r.skipped = None;
        match outcome {
            Ok(()) => {
                if r.status == Status::Skip {
                    r.status = Status::Pass;
                }
            }
            Err(seen) => {
                r.status = Status::Fail;
                r.failures.push(seen);
            }
        }
    }

    /// A passing check of `rule`.
    pub(crate) fn pass(&mut self, rule: &str) {
        self.check(rule, Ok(()));
    }

    /// A failed check of `rule`.
    pub(crate) fn fail(&mut self, rule: &str, seen: impl Into<String>) {
        self.check(rule, Err(seen.into()));
    }

    /// Says why `rule` did not run (if nothing checked it).
    pub(crate) fn skip(&mut self, rule: &str, why: impl Into<String>) {
        let r = self.get(rule);
        if r.checks == 0 {
            r.skipped = Some(why.into());
        }
    }

    pub(crate) fn finish(mut self) -> Vec<RuleResult> {
        for r in &mut self.results {
            if r.status == Status::Skip && r.skipped.is_none() {
                r.skipped = Some("nothing in this run exercised it".into());
            }
        }
        self.results
    }
}
