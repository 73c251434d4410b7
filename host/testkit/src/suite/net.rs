//! Contract 0.3's rules: `labels.set`, `request.subnet`, `address.assign`,
//! `targets` and `subnet.capacity` (`handle.ipv6` and `handle.hostname`
//! are checked with every handle, in `check_against_record`).
//!
//! Each rule runs when the plugin declares the interface
//! ([`CloudProvisioner::interfaces`]); otherwise the calls must answer
//! `unsupported`, never succeed and never fault. The networking rules need
//! a fake that has subnets, target groups and stable addresses
//! ([`FakeCloud::network`](crate::FakeCloud::network)); without one they
//! are skipped. They run last, on nodes of their own, so a replayed
//! cassette answers every earlier step as it was recorded.

use std::collections::BTreeMap;
use std::future::Future;

use wasmprov_api::{
    AddressKind, AddressRequest, CloudProvisioner, Labels, NodeHandle, NodeShape, ProvisionRequest,
    ProvisionerError, Target,
};

use super::{CallResult, GIB, OWNER_LABEL, REQUEST_LABEL, Run};
use crate::fake::NetworkTruth;

/// A subnet id no cloud has, for `request.subnet`.
const NO_SUCH_SUBNET: &str = "conformance-no-such-subnet";

/// The nodes the rules act on.
struct Nodes {
    /// Two of this owner's, made for these rules.
    a: NodeHandle,
    b: Option<NodeHandle>,
    /// One of the foreign owner's, made through the plugin.
    foreign: Option<String>,
}

impl Run {
    /// Every contract 0.3 rule, on nodes made for them, then removed.
    pub(super) async fn step_contract_03(&mut self) {
        let interfaces = self.plugin.interfaces();
        let network = self.network_truth().await;
        let small = NodeShape::new(1.0, GIB);
        self.injector.pause(false);
        // With a label of its own, which set-labels must take away.
        let shape = NodeShape {
            labels: Labels::from([("conformance-old".to_string(), "1".to_string())]),
            ..small.clone()
        };
        let labelled = match self.provision("conformance-labels", &shape).await {
            Ok(node) => node,
            Err(e) => {
                self.injector.pause(true);
                self.checks.fail(
                    "labels.set",
                    format!("provision conformance-labels failed: {} ({e})", e.kind()),
                );
                return;
            }
        };
        let foreign = self.foreign_node().await;
        let nodes = Nodes {
            a: labelled,
            b: None,
            foreign,
        };
        self.step_set_labels(interfaces.set_labels, &nodes).await;
        self.step_subnet_refused().await;
        if !interfaces.networking {
            self.networking_unsupported(&nodes).await;
        }
        self.injector.pause(true);
        // Gone: its labels cannot be set any more.
        let id = nodes.a.provider_id.clone();
        self.discard(&id).await;
        if interfaces.set_labels {
            self.set_labels_gone(&id).await;
        }

        // What needs the fake's subnets, target groups and addresses comes
        // last: a replay has none of them and skips it, and every request
        // before is answered as it was recorded.
        match &network {
            Some(truth) => {
                self.injector.pause(false);
                self.step_subnet_placed(truth).await;
                if interfaces.networking {
                    self.step_networking(truth, nodes.foreign.clone()).await;
                }
                self.injector.pause(true);
                if let Some(id) = self.subnet_node.take() {
                    self.discard(&id).await;
                }
            }
            None => {
                for rule in ["subnet.capacity", "address.assign", "targets"] {
                    if interfaces.networking {
                        self.checks.skip(
                            rule,
                            "the fake has no subnets, target groups or stable addresses (FakeCloud::network)",
                        );
                    }
                }
            }
        }
        if let Some(id) = &nodes.foreign {
            self.calls += 1;
            if let Err(e) = self.foreign.terminate(id).await {
                tracing::warn!("terminate the foreign node {id}: {e}");
            }
        }
        self.check_no_leftovers().await;
    }

    /// `subnet.capacity`, `address.assign` and `targets` on two nodes of
    /// their own, removed after.
    async fn step_networking(&mut self, truth: &NetworkTruth, foreign: Option<String>) {
        let small = NodeShape::new(1.0, GIB);
        let a = match self.provision("conformance-net-a", &small).await {
            Ok(a) => a,
            Err(e) => {
                for rule in ["address.assign", "targets"] {
                    self.checks.fail(
                        rule,
                        format!("provision conformance-net-a failed: {} ({e})", e.kind()),
                    );
                }
                return;
            }
        };
        let b = self.provision("conformance-net-b", &small).await.ok();
        let nodes = Nodes { a, b, foreign };
        self.step_subnet_capacity(truth).await;
        self.step_addresses(&nodes).await;
        self.step_targets(truth, &nodes).await;
        self.discard(&nodes.a.provider_id.clone()).await;
        if let Some(b) = &nodes.b {
            self.discard(&b.provider_id.clone()).await;
        }
    }

    /// A node of the foreign owner, made through the plugin.
    async fn foreign_node(&mut self) -> Option<String> {
        let foreign = self.foreign.clone();
        let req = ProvisionRequest {
            request_id: "conformance-net-foreign".into(),
            shape: NodeShape::new(1.0, GIB),
            boot: Default::default(),
            subnet: None,
        };
        let made = self
            .call("provision conformance-net-foreign (another owner)", || {
                let foreign = foreign.clone();
                let req = req.clone();
                async move { foreign.provision_request(&req).await }
            })
            .await;
        match made {
            Ok(h) => Some(h.provider_id),
            Err(e) => {
                tracing::warn!("a node of another owner: {e}");
                None
            }
        }
    }

    /// A call that removes something: a `not-found` after an injected
    /// fault is the first try having taken effect.
    async fn call_removing<F, Fut>(&mut self, what: &str, call: F) -> CallResult<()>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = CallResult<()>>,
    {
        let mark = self.injector.mark();
        let result = self.call(what, call).await;
        match result {
            Err(ProvisionerError::NotFound(_)) if !self.injector.since(mark).is_empty() => Ok(()),
            other => other,
        }
    }

    /// `labels.set`.
    async fn step_set_labels(&mut self, declared: bool, nodes: &Nodes) {
        let rule = "labels.set";
        let plugin = self.plugin.clone();
        let id = nodes.a.provider_id.clone();
        let wanted = Labels::from([
            ("conformance-set".to_string(), "yes".to_string()),
            ("tier".to_string(), "blue".to_string()),
        ]);
        let set = |id: String, labels: Labels| {
            let plugin = plugin.clone();
            move || {
                let plugin = plugin.clone();
                let id = id.clone();
                let labels = labels.clone();
                async move { plugin.set_labels(&id, &labels).await }
            }
        };
        if !declared {
            let result = self
                .call(&format!("set-labels {id}"), set(id.clone(), wanted))
                .await;
            self.checks
                .check(rule, unsupported("set-labels", result.map(|_| ())));
            return;
        }
        let result = self
            .call(&format!("set-labels {id}"), set(id.clone(), wanted.clone()))
            .await;
        let handle = match result {
            Ok(h) => h,
            Err(ProvisionerError::Unsupported(m)) => {
                self.checks.skip(
                    rule,
                    format!("the plugin says its cloud cannot relabel a live node: {m}"),
                );
                return;
            }
            Err(e) => {
                self.checks
                    .fail(rule, format!("set-labels {id}: {} ({e})", e.kind()));
                return;
            }
        };
        let owner = self.owner.clone();
        let request = nodes
            .a
            .labels
            .get(REQUEST_LABEL)
            .cloned()
            .unwrap_or_default();
        let expect = |what: &str, labels: &Labels| -> Vec<String> {
            let mut problems = Vec::new();
            for (k, v) in &wanted {
                if labels.get(k) != Some(v) {
                    problems.push(format!("{what} has {k}={:?}, not {v}", labels.get(k)));
                }
            }
            for (k, v) in [(OWNER_LABEL, &owner), (REQUEST_LABEL, &request)] {
                if labels.get(k) != Some(v) {
                    problems.push(format!("{what} has {k}={:?}, not {v}", labels.get(k)));
                }
            }
            for k in nodes.a.labels.keys() {
                if ![OWNER_LABEL, REQUEST_LABEL].contains(&k.as_str())
                    && !k.starts_with("wasmprov-")
                    && !wanted.contains_key(k)
                    && labels.contains_key(k)
                {
                    problems.push(format!("{what} still has {k}, which was replaced"));
                }
            }
            problems
        };
        let mut problems = expect("the answer", &handle.labels);
        let got = self
            .call(&format!("get {id}"), || {
                let plugin = plugin.clone();
                let id = id.clone();
                async move { plugin.get(&id).await }
            })
            .await;
        match got {
            Ok(Some(n)) => problems.extend(expect("get", &n.labels)),
            Ok(None) => problems.push("get no longer finds the node".into()),
            Err(e) => problems.push(format!("get failed: {e}")),
        }
        match self.describe().await {
            Ok(list) => match list.iter().find(|n| n.provider_id == id) {
                Some(n) => problems.extend(expect("describe", &n.labels)),
                None => problems.push("describe no longer lists the node".into()),
            },
            Err(e) => problems.push(format!("describe failed: {e}")),
        }
        if let Some(truth) = self.truth().await
            && let Some(n) = truth.iter().find(|n| n.id == id)
        {
            problems.extend(expect("the node in the cloud", &n.labels));
        }
        self.checks.check(
            rule,
            if problems.is_empty() {
                Ok(())
            } else {
                Err(format!("set-labels {id}: {}", problems.join("; ")))
            },
        );

        // A reserved key is refused, and the node keeps its owner.
        let stolen = Labels::from([(OWNER_LABEL.to_string(), "someone-else".to_string())]);
        self.calls += 1;
        let outcome = match self.plugin.set_labels(&id, &stolen).await {
            Ok(_) => Err(format!(
                "set-labels {id} with {OWNER_LABEL}=someone-else succeeded"
            )),
            Err(ProvisionerError::InvalidConfig(_)) => Ok(()),
            Err(e) => Err(format!(
                "set-labels {id} with {OWNER_LABEL}=someone-else answered {} ({e}); expected invalid_config",
                e.kind()
            )),
        };
        self.checks.check(rule, outcome);
        if let Some(truth) = self.truth().await
            && let Some(n) = truth.iter().find(|n| n.id == id)
        {
            self.checks.check(
                rule,
                if n.labels.get(OWNER_LABEL) == Some(&self.owner) {
                    Ok(())
                } else {
                    Err(format!(
                        "after a refused set-labels, {id} in the cloud has {OWNER_LABEL}={:?}",
                        n.labels.get(OWNER_LABEL)
                    ))
                },
            );
        }

        // Another owner's node: not-found, and untouched.
        if let Some(foreign) = nodes.foreign.clone() {
            let before = self
                .truth()
                .await
                .and_then(|t| t.into_iter().find(|n| n.id == foreign).map(|n| n.labels));
            let result = self
                .call(
                    &format!("set-labels {foreign}"),
                    set(foreign.clone(), wanted.clone()),
                )
                .await;
            let after = self
                .truth()
                .await
                .and_then(|t| t.into_iter().find(|n| n.id == foreign).map(|n| n.labels));
            let outcome = match result {
                Err(ProvisionerError::NotFound(_)) if before == after => Ok(()),
                Err(ProvisionerError::NotFound(_)) => Err(format!(
                    "set-labels of another owner's node {foreign} said not-found but changed its labels from {before:?} to {after:?}"
                )),
                Ok(_) => Err(format!(
                    "set-labels of another owner's node {foreign} succeeded"
                )),
                Err(e) => Err(format!(
                    "set-labels of another owner's node {foreign} answered {} ({e}); expected not_found",
                    e.kind()
                )),
            };
            self.checks.check(rule, outcome);
        }
    }

    /// `labels.set` on a node that is gone: not-found.
    async fn set_labels_gone(&mut self, id: &str) {
        let labels = Labels::from([("conformance-set".to_string(), "late".to_string())]);
        self.calls += 1;
        let outcome = match self.plugin.set_labels(&id.to_string(), &labels).await {
            Err(ProvisionerError::NotFound(_) | ProvisionerError::Unsupported(_)) => Ok(()),
            Err(e) if self.injector.spec().is_active() && e.is_retryable() => Ok(()),
            Ok(_) => Err(format!("set-labels of terminated node {id} succeeded")),
            Err(e) => Err(format!(
                "set-labels of terminated node {id} answered {} ({e}); expected not_found",
                e.kind()
            )),
        };
        self.checks.check("labels.set", outcome);
    }

    /// `request.subnet`: a subnet that does not exist is refused, and
    /// makes nothing.
    async fn step_subnet_refused(&mut self) {
        let rule = "request.subnet";
        let small = NodeShape::new(1.0, GIB);
        let request = "conformance-subnet-none";
        let result = self.provision_in(request, &small, NO_SUCH_SUBNET).await;
        let mut outcome = match &result {
            Ok(h) => Err(format!(
                "provision {request} in subnet {NO_SUCH_SUBNET:?}, which no cloud has, made node {}: the subnet was dropped",
                h.provider_id
            )),
            Err(e) if matches!(e, ProvisionerError::Plugin { .. }) => Err(format!(
                "provision {request} in subnet {NO_SUCH_SUBNET:?}: {e}"
            )),
            Err(_) => Ok(()),
        };
        if let Some(truth) = self.truth().await
            && outcome.is_ok()
        {
            let made = self.made_for(&truth, request);
            if !made.is_empty() {
                outcome = Err(format!(
                    "the refused provision in subnet {NO_SUCH_SUBNET:?} made {} in the cloud",
                    made.iter()
                        .map(|n| n.id.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
        }
        self.checks.check(rule, outcome);
        if let Ok(h) = result {
            self.discard(&h.provider_id).await;
        }
    }

    /// `request.subnet`: a node asked in the fake's subnet is made there,
    /// as the fake records it, or refused as unsupported.
    async fn step_subnet_placed(&mut self, network: &NetworkTruth) {
        let rule = "request.subnet";
        let small = NodeShape::new(1.0, GIB);
        let Some(subnet) = network.subnets.first().map(|s| s.id.clone()) else {
            return;
        };
        let request = "conformance-subnet";
        match self.provision_in(request, &small, &subnet).await {
            Err(ProvisionerError::Unsupported(_)) => self.checks.pass(rule),
            Err(e) => self.checks.fail(
                rule,
                format!("provision {request} in subnet {subnet}: {} ({e})", e.kind()),
            ),
            Ok(h) => {
                let outcome = match self.record(&h.provider_id).await.and_then(|r| r.subnet) {
                    Some(s) if s == subnet => Ok(()),
                    Some(s) if s.is_empty() => Err(format!(
                        "provision {request} asked for subnet {subnet}; the cloud made {} in none",
                        h.provider_id
                    )),
                    Some(s) => Err(format!(
                        "provision {request} asked for subnet {subnet}; the cloud made {} in {s}",
                        h.provider_id
                    )),
                    None => Err(format!(
                        "the fake has subnet {subnet} but does not record where {} went",
                        h.provider_id
                    )),
                };
                self.checks.check(rule, outcome);
                // Kept until the capacity is asked, so that a node holds
                // one of the subnet's addresses then.
                self.subnet_node = Some(h.provider_id);
            }
        }
    }

    async fn provision_in(
        &mut self,
        request_id: &str,
        shape: &NodeShape,
        subnet: &str,
    ) -> CallResult<NodeHandle> {
        let plugin = self.plugin.clone();
        let req = ProvisionRequest {
            request_id: request_id.to_string(),
            shape: shape.clone(),
            boot: Default::default(),
            subnet: Some(subnet.to_string()),
        };
        if !self.requests.iter().any(|r| r == request_id) {
            self.requests.push(request_id.to_string());
        }
        let made = self
            .call(
                &format!("provision {request_id} in subnet {subnet}"),
                || {
                    let plugin = plugin.clone();
                    let req = req.clone();
                    async move { plugin.provision_request(&req).await }
                },
            )
            .await;
        if let Ok(node) = &made {
            self.made
                .insert(request_id.to_string(), node.provider_id.clone());
        }
        made
    }

    /// `subnet.capacity`: what the plugin says a subnet has free is what
    /// the fake holds.
    async fn step_subnet_capacity(&mut self, truth: &NetworkTruth) {
        let rule = "subnet.capacity";
        let plugin = self.plugin.clone();
        for subnet in truth.subnets.iter().map(|s| s.id.clone()) {
            let got = self
                .call(&format!("subnet-capacity {subnet}"), || {
                    let plugin = plugin.clone();
                    let subnet = subnet.clone();
                    async move { plugin.subnet_capacity(&subnet).await }
                })
                .await;
            let now = self.network_truth().await;
            let want = now
                .as_ref()
                .and_then(|t| t.subnets.iter().find(|s| s.id == subnet).cloned());
            let outcome = match (got, want) {
                (Err(ProvisionerError::Unsupported(m)), _) => {
                    self.checks
                        .skip(rule, format!("the plugin does not count addresses: {m}"));
                    continue;
                }
                (Err(e), _) => Err(format!("subnet-capacity {subnet}: {} ({e})", e.kind())),
                (Ok(_), None) => continue,
                (Ok(c), Some(w)) => {
                    let mut problems = Vec::new();
                    if c.available_addresses != w.available {
                        problems.push(format!(
                            "{} addresses free, the cloud has {}",
                            c.available_addresses, w.available
                        ));
                    }
                    if let (Some(got), Some(want)) = (c.total_addresses, w.total)
                        && got != want
                    {
                        problems.push(format!("{got} addresses in all, the cloud has {want}"));
                    }
                    if problems.is_empty() {
                        Ok(())
                    } else {
                        Err(format!("subnet-capacity {subnet}: {}", problems.join("; ")))
                    }
                }
            };
            self.checks.check(rule, outcome);
        }
    }

    async fn network_truth(&self) -> Option<NetworkTruth> {
        match self.fake.as_ref()?.network().await {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!("reading the fake's networking: {e:#}");
                None
            }
        }
    }

    /// `address.assign`: a new public address on node a, the same again
    /// (no change), moved to node b, released (on no node; or gone from the
    /// account when the plugin allocated it), released again (not-found),
    /// and refused for another owner's node.
    async fn step_addresses(&mut self, nodes: &Nodes) {
        let rule = "address.assign";
        let plugin = self.plugin.clone();
        let assign = |id: String, address: Option<String>| {
            let plugin = plugin.clone();
            move || {
                let plugin = plugin.clone();
                let id = id.clone();
                let request = AddressRequest {
                    kind: AddressKind::Public,
                    address: address.clone(),
                };
                async move { plugin.assign_address(&id, &request).await }
            }
        };
        let release = |id: String, address: String| {
            let plugin = plugin.clone();
            move || {
                let plugin = plugin.clone();
                let id = id.clone();
                let address = address.clone();
                async move { plugin.release_address(&id, &address).await }
            }
        };
        let a = nodes.a.provider_id.clone();
        let before = self.network_truth().await;
        let first = match self
            .call(&format!("assign-address {a}"), assign(a.clone(), None))
            .await
        {
            Ok(s) => s,
            Err(ProvisionerError::Unsupported(m)) => {
                self.checks.skip(
                    rule,
                    format!("the plugin has no public stable addresses: {m}"),
                );
                return;
            }
            Err(e) => {
                self.checks
                    .fail(rule, format!("assign-address {a}: {} ({e})", e.kind()));
                return;
            }
        };
        let ip = first.address.clone();
        // Not in the account before: the plugin allocated it for the node,
        // and may free it on release (CONTRACT-0.3: EC2 releases an Elastic
        // IP it allocated). One that was there stays the account's.
        let allocated = before.is_some_and(|t| t.address_node(&ip).is_err());
        self.expect_address(&format!("assign-address {a}"), &first, &ip, Some(&a))
            .await;
        let count = self.network_truth().await.map_or(0, |t| t.addresses.len());

        // Again: no change.
        match self
            .call(
                &format!("assign-address {a} {ip}"),
                assign(a.clone(), Some(ip.clone())),
            )
            .await
        {
            Ok(s) => {
                self.expect_address(&format!("assign-address {a} {ip} again"), &s, &ip, Some(&a))
                    .await;
                let now = self.network_truth().await.map_or(0, |t| t.addresses.len());
                self.checks.check(
                    rule,
                    if now == count {
                        Ok(())
                    } else {
                        Err(format!(
                            "assigning {ip} to {a} again made the account's addresses {count} → {now}"
                        ))
                    },
                );
            }
            Err(e) => self.checks.fail(
                rule,
                format!("assign-address {a} {ip} again: {} ({e})", e.kind()),
            ),
        }

        // Moved to b.
        let holder = match &nodes.b {
            Some(b) => {
                let b = b.provider_id.clone();
                match self
                    .call(
                        &format!("assign-address {b} {ip}"),
                        assign(b.clone(), Some(ip.clone())),
                    )
                    .await
                {
                    Ok(s) => {
                        self.expect_address(&format!("moving {ip} to {b}"), &s, &ip, Some(&b))
                            .await;
                        b
                    }
                    Err(e) => {
                        self.checks.fail(
                            rule,
                            format!("assign-address {b} {ip} (from {a}): {} ({e})", e.kind()),
                        );
                        a.clone()
                    }
                }
            }
            None => a.clone(),
        };

        // Another owner's node: refused, and the address stays.
        if let Some(foreign) = nodes.foreign.clone() {
            let result = self
                .call(
                    &format!("assign-address {foreign} {ip}"),
                    assign(foreign.clone(), Some(ip.clone())),
                )
                .await;
            let outcome = match result {
                Err(ProvisionerError::NotFound(_)) => Ok(()),
                Ok(_) => Err(format!(
                    "assign-address of {ip} to another owner's node {foreign} succeeded"
                )),
                Err(e) => Err(format!(
                    "assign-address to another owner's node {foreign} answered {} ({e}); expected not_found",
                    e.kind()
                )),
            };
            self.checks.check(rule, outcome);
            self.expect_on(&ip, Some(&holder), "after a refused assign")
                .await;
        }

        // Released, then released again.
        match self
            .call_removing(
                &format!("release-address {holder} {ip}"),
                release(holder.clone(), ip.clone()),
            )
            .await
        {
            Ok(()) => self.expect_released(&ip, allocated).await,
            Err(e) => self.checks.fail(
                rule,
                format!("release-address {holder} {ip}: {} ({e})", e.kind()),
            ),
        }
        let again = self
            .call(
                &format!("release-address {holder} {ip} again"),
                release(holder.clone(), ip.clone()),
            )
            .await;
        self.checks.check(
            rule,
            match again {
                Err(ProvisionerError::NotFound(_)) => Ok(()),
                Ok(()) => Err(format!(
                    "release-address of {ip}, no longer on {holder}, succeeded; expected not_found"
                )),
                Err(e) => Err(format!(
                    "release-address of {ip}, no longer on {holder}, answered {} ({e}); expected not_found",
                    e.kind()
                )),
            },
        );
    }

    /// The answer names `ip` on `node`, and the fake has it there.
    async fn expect_address(
        &mut self,
        what: &str,
        got: &wasmprov_api::StableAddress,
        ip: &str,
        node: Option<&str>,
    ) {
        let mut problems = Vec::new();
        if got.address != ip {
            problems.push(format!("answered address {}, not {ip}", got.address));
        }
        if got.kind != AddressKind::Public {
            problems.push(format!("answered a {} address", got.kind));
        }
        if got.provider_id.as_deref() != node {
            problems.push(format!(
                "answered it on {:?}, not {node:?}",
                got.provider_id
            ));
        }
        self.checks.check(
            "address.assign",
            if problems.is_empty() {
                Ok(())
            } else {
                Err(format!("{what}: {}", problems.join("; ")))
            },
        );
        self.expect_on(&got.address, node, what).await;
    }

    /// The fake has address `ip` on `node` (`None`: on none).
    async fn expect_on(&mut self, ip: &str, node: Option<&str>, what: &str) {
        let Some(truth) = self.network_truth().await else {
            return;
        };
        self.checks.check(
            "address.assign",
            match truth.address_node(ip) {
                Ok(on) if on == node => Ok(()),
                Ok(on) => Err(format!(
                    "{what}: the cloud has {ip} on {on:?}, not {node:?}"
                )),
                Err(e) => Err(format!("{what}: {e}")),
            },
        );
    }

    /// After `release-address` of `ip`: the fake has it on no node, or,
    /// when the plugin `allocated` it for the node, no longer has it (the
    /// plugin freed it). An address left on a node fails, and so does one
    /// the account had before the plugin was asked and has no more.
    async fn expect_released(&mut self, ip: &str, allocated: bool) {
        let Some(truth) = self.network_truth().await else {
            return;
        };
        let what = "after release-address";
        self.checks.check(
            "address.assign",
            match truth.address_node(ip) {
                Ok(None) => Ok(()),
                Ok(Some(on)) => Err(format!("{what}: the cloud has {ip} still on {on}")),
                Err(_) if allocated => Ok(()),
                Err(e) => Err(format!(
                    "{what}: {e}; it was the account's before the plugin assigned it, so releasing must not free it"
                )),
            },
        );
    }

    /// `targets`: node a registered in the fake's first group, listed,
    /// registered again (no change), deregistered, deregistered again
    /// (not-found); another owner's node refused.
    async fn step_targets(&mut self, truth: &NetworkTruth, nodes: &Nodes) {
        let rule = "targets";
        let Some(group) = truth.groups.first().map(|g| g.id.clone()) else {
            self.checks
                .skip(rule, "the fake has no target group (FakeCloud::network)");
            return;
        };
        let plugin = self.plugin.clone();
        let target = |id: &str| Target {
            group: group.clone(),
            provider_id: id.to_string(),
            port: None,
            health: None,
        };
        let register = |t: Target, add: bool| {
            let plugin = plugin.clone();
            move || {
                let plugin = plugin.clone();
                let t = t.clone();
                async move {
                    if add {
                        plugin.register_target(&t).await
                    } else {
                        plugin.deregister_target(&t).await
                    }
                }
            }
        };
        let a = nodes.a.provider_id.clone();
        match self
            .call(
                &format!("register-target {group} {a}"),
                register(target(&a), true),
            )
            .await
        {
            Ok(()) => {}
            Err(ProvisionerError::Unsupported(m)) => {
                self.checks
                    .skip(rule, format!("the plugin has no target groups: {m}"));
                return;
            }
            Err(e) => {
                self.checks.fail(
                    rule,
                    format!("register-target {group} {a}: {} ({e})", e.kind()),
                );
                return;
            }
        }
        self.expect_targets(&group, &a, 1, "after register-target")
            .await;
        self.expect_listed(&group, &a, true).await;
        match self
            .call(
                &format!("register-target {group} {a} again"),
                register(target(&a), true),
            )
            .await
        {
            Ok(()) => {
                self.expect_targets(&group, &a, 1, "after registering it again")
                    .await
            }
            Err(e) => self.checks.fail(
                rule,
                format!("register-target {group} {a} again: {} ({e})", e.kind()),
            ),
        }
        if let Some(foreign) = nodes.foreign.clone() {
            let result = self
                .call(
                    &format!("register-target {group} {foreign}"),
                    register(target(&foreign), true),
                )
                .await;
            self.checks.check(
                rule,
                match result {
                    Err(ProvisionerError::NotFound(_)) => Ok(()),
                    Ok(()) => Err(format!(
                        "register-target of another owner's node {foreign} succeeded"
                    )),
                    Err(e) => Err(format!(
                        "register-target of another owner's node {foreign} answered {} ({e}); expected not_found",
                        e.kind()
                    )),
                },
            );
            self.expect_targets(&group, &foreign, 0, "after a refused register-target")
                .await;
        }
        match self
            .call_removing(
                &format!("deregister-target {group} {a}"),
                register(target(&a), false),
            )
            .await
        {
            Ok(()) => {
                self.expect_targets(&group, &a, 0, "after deregister-target")
                    .await;
                self.expect_listed(&group, &a, false).await;
            }
            Err(e) => self.checks.fail(
                rule,
                format!("deregister-target {group} {a}: {} ({e})", e.kind()),
            ),
        }
        let again = self
            .call(
                &format!("deregister-target {group} {a} again"),
                register(target(&a), false),
            )
            .await;
        self.checks.check(
            rule,
            match again {
                Err(ProvisionerError::NotFound(_)) => Ok(()),
                Ok(()) => Err(format!(
                    "deregister-target of {a}, no longer in {group}, succeeded; expected not_found"
                )),
                Err(e) => Err(format!(
                    "deregister-target of {a}, no longer in {group}, answered {} ({e}); expected not_found",
                    e.kind()
                )),
            },
        );
    }

    /// The fake has `node` in `group` `times` times.
    async fn expect_targets(&mut self, group: &str, node: &str, times: usize, what: &str) {
        let Some(truth) = self.network_truth().await else {
            return;
        };
        let n = truth.targets(group).iter().filter(|t| **t == node).count();
        self.checks.check(
            "targets",
            if n == times {
                Ok(())
            } else {
                Err(format!(
                    "{what}: the cloud has {node} in {group} {n} times, not {times}"
                ))
            },
        );
    }

    /// `list-targets` shows `node` in `group`, or not.
    async fn expect_listed(&mut self, group: &str, node: &str, listed: bool) {
        let plugin = self.plugin.clone();
        let g = group.to_string();
        let got = self
            .call(&format!("list-targets {group}"), || {
                let plugin = plugin.clone();
                let g = g.clone();
                async move { plugin.list_targets(&g).await }
            })
            .await;
        let truth = self.network_truth().await;
        self.checks.check(
            "targets",
            match got {
                Ok(list) => {
                    let ids: Vec<&str> = list.iter().map(|t| t.provider_id.as_str()).collect();
                    let wrong_group = list.iter().find(|t| t.group != group);
                    if let Some(t) = wrong_group {
                        Err(format!(
                            "list-targets {group} answered a target of group {}",
                            t.group
                        ))
                    } else if ids.contains(&node) != listed {
                        Err(format!(
                            "list-targets {group} answered {ids:?}; {node} should {}be there",
                            if listed { "" } else { "not " }
                        ))
                    } else if let Some(t) = &truth {
                        let mut want = t.targets(group);
                        let mut got = ids.clone();
                        want.sort_unstable();
                        got.sort_unstable();
                        if want == got {
                            Ok(())
                        } else {
                            Err(format!(
                                "list-targets {group} answered {got:?}; the cloud has {want:?}"
                            ))
                        }
                    } else {
                        Ok(())
                    }
                }
                Err(e) => Err(format!("list-targets {group}: {} ({e})", e.kind())),
            },
        );
    }

    /// Without the networking interface, every networking call answers
    /// `unsupported`: never a success, never a fault.
    async fn networking_unsupported(&mut self, nodes: &Nodes) {
        let plugin = self.plugin.clone();
        let id = nodes.a.provider_id.clone();
        let target = Target {
            group: "conformance-group".into(),
            provider_id: id.clone(),
            port: None,
            health: None,
        };
        let request = AddressRequest {
            kind: AddressKind::Public,
            address: None,
        };
        self.calls += 6;
        let results = [
            (
                "address.assign",
                "assign-address",
                plugin.assign_address(&id, &request).await.map(|_| ()),
            ),
            (
                "address.assign",
                "release-address",
                plugin.release_address(&id, "192.0.2.1").await,
            ),
            (
                "targets",
                "register-target",
                plugin.register_target(&target).await,
            ),
            (
                "targets",
                "deregister-target",
                plugin.deregister_target(&target).await,
            ),
            (
                "targets",
                "list-targets",
                plugin.list_targets(&target.group).await.map(|_| ()),
            ),
            (
                "subnet.capacity",
                "subnet-capacity",
                plugin.subnet_capacity(NO_SUCH_SUBNET).await.map(|_| ()),
            ),
        ];
        for (rule, call, result) in results {
            self.checks.check(rule, unsupported(call, result));
        }
    }

    /// Every node these rules made is gone again (`leak.none`).
    async fn check_no_leftovers(&mut self) {
        let Some(truth) = self.truth().await else {
            return;
        };
        let ours: BTreeMap<&str, &str> = truth
            .iter()
            .filter(|n| n.alive)
            .filter(|n| n.labels.get(OWNER_LABEL) == Some(&self.owner))
            .filter_map(|n| {
                let r = n.labels.get(REQUEST_LABEL)?;
                (r.starts_with("conformance-net")
                    || r.starts_with("conformance-subnet")
                    || r == "conformance-labels")
                    .then_some((n.id.as_str(), r.as_str()))
            })
            .collect();
        for (id, request) in ours {
            self.checks.fail(
                "leak.none",
                format!(
                    "node {id} (request {request}) of the networking rules is still in the cloud"
                ),
            );
        }
    }
}

/// A call of an interface the plugin does not declare: `unsupported`
/// passes; a success or another error fails.
fn unsupported(call: &str, result: CallResult<()>) -> Result<(), String> {
    match result {
        Err(ProvisionerError::Unsupported(_)) => Ok(()),
        Ok(()) => Err(format!(
            "{call} succeeded, but the plugin does not declare it"
        )),
        Err(e) => Err(format!(
            "{call}, which the plugin does not declare, answered {} ({e}); expected unsupported",
            e.kind()
        )),
    }
}
