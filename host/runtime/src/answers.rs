//! Where a plugin's answers are checked: once, at the host boundary, after
//! `contract` converted them from the WIT types of the plugin's version, so
//! that the trait, the CLI, gRPC and ranking all see only answers that keep
//! the contract. A violation is a `contract` fault naming the field; nothing
//! of the bad answer is used.
//!
//! | answer | rule |
//! | --- | --- |
//! | price | `hourly_usd` finite and ≥ 0 (−0.0 becomes 0.0); instance type 1–[`MAX_NAME`] bytes |
//! | node handle | provider id 1–[`MAX_PROVIDER_ID`] bytes; addresses, zone, instance type, raw state, GPU model at most [`MAX_NAME`]; `ipv6_address` an IPv6 address without a zone; `hostname` an RFC 1123 host name (at most [`MAX_HOSTNAME`] bytes, labels of 1–63 letters, digits and inner hyphens); at most [`MAX_LABELS`] labels, keys 1–[`MAX_LABEL_KEY`] and values at most [`MAX_LABEL_VALUE`] bytes |
//! | describe | at most [`MAX_NODES`] handles, provider ids distinct; a node that does not carry the host's owner id (`wasmprov_api::provenance::owned_by`) is dropped from the answer, counted as a contract fault and logged |
//! | get | none, or the node asked for (same provider id), carrying the host's owner id |
//! | offerings | at most [`MAX_OFFERINGS`], instance types 1–[`MAX_NAME`] bytes and distinct, cpu finite and ≥ 0, prices finite and ≥ 0, at most [`MAX_ZONES`] zones of at most [`MAX_NAME`] bytes |
//! | set-labels | a node handle: the node asked about (read first with `get`: not-found, and set-labels not called, unless it exists and is the owner's), carrying the host's owner id, with exactly the labels asked plus the reserved ones (`wasmprov_api::provenance::is_reserved_label`) it had, each unchanged (other labels than asked: `conflict`, "the node's labels changed while this call ran", not a contract fault) |
//! | stable address | `address` parses as an IP address the rule of `wasmprov_api::network::address_refusal` allows for its kind (the rule a caller's address meets too); `kind` is the kind asked; an IP asked for is the one answered; the node it is on, when said, is the node asked about |
//! | targets | at most [`MAX_NODES`]; each names the group asked, a provider id of 1–[`MAX_PROVIDER_ID`] bytes, a port that is not 0; health at most [`MAX_NAME`] |
//! | subnet capacity | names the subnet asked; `available_addresses` ≤ `total_addresses` when the total is said, both at most [`MAX_SUBNET_ADDRESSES`] (an IPv4 /8); zone at most [`MAX_NAME`] |
//! | backend name | 1–[`MAX_BACKEND_NAME`] bytes |
//! | capacity types | duplicates dropped |

use wasmprov_api::{
    AddressRequest, CapacityType, Labels, NodeHandle, Offering, PluginFault, PriceHint,
    ProvisionerError, StableAddress, SubnetCapacity, Target,
};

/// Longest provider id.
pub const MAX_PROVIDER_ID: usize = wasmprov_api::network::MAX_NAME_BYTES;
/// Longest address, zone or instance type.
pub const MAX_NAME: usize = 256;
/// Most labels on one node.
pub const MAX_LABELS: usize = wasmprov_api::MAX_HANDLE_LABELS;
/// Longest label key.
pub const MAX_LABEL_KEY: usize = wasmprov_api::MAX_HANDLE_LABEL_KEY;
/// Longest label value.
pub const MAX_LABEL_VALUE: usize = wasmprov_api::MAX_HANDLE_LABEL_VALUE;
/// Most nodes one `describe` may return.
pub const MAX_NODES: usize = 1_000_000;
/// Longest backend name.
pub const MAX_BACKEND_NAME: usize = 64;
/// Most offerings one plugin may list.
pub const MAX_OFFERINGS: usize = 100_000;
/// Most zones one offering may name.
pub const MAX_ZONES: usize = 1024;

/// The fault for an answer that breaks the contract.
pub(crate) fn broken(plugin: &str, field: &str, why: String) -> ProvisionerError {
    tracing::warn!(plugin, field, why = %wasmprov_policy::text::line(&why), "plugin answer refused");
    ProvisionerError::Plugin {
        plugin: plugin.to_string(),
        fault: PluginFault::Contract,
        message: format!("its answer's {field} {why}"),
    }
}

fn sized(
    plugin: &str,
    field: &str,
    v: &str,
    min: usize,
    max: usize,
) -> Result<(), ProvisionerError> {
    if v.len() < min || v.len() > max {
        return Err(broken(
            plugin,
            field,
            format!("is {} bytes; {min} to {max} are allowed", v.len()),
        ));
    }
    Ok(())
}

/// A price estimate.
pub(crate) fn price(plugin: &str, h: PriceHint) -> Result<PriceHint, ProvisionerError> {
    let hourly_usd = usd(plugin, "hourly_usd", h.hourly_usd)?;
    sized(plugin, "instance_type", &h.instance_type, 1, MAX_NAME)?;
    Ok(PriceHint { hourly_usd, ..h })
}

/// A price: finite and at least 0; -0.0 is 0.0, so that it does not sort
/// before a real 0.0.
fn usd(plugin: &str, field: &str, v: f64) -> Result<f64, ProvisionerError> {
    if !v.is_finite() || v < 0.0 {
        return Err(broken(
            plugin,
            field,
            format!("is {v}, not a price (finite and at least 0)"),
        ));
    }
    Ok(v + 0.0)
}

/// A node handle.
pub(crate) fn handle(plugin: &str, h: NodeHandle) -> Result<NodeHandle, ProvisionerError> {
    sized(plugin, "provider_id", &h.provider_id, 1, MAX_PROVIDER_ID)?;
    for (field, v) in [
        ("address", &h.address),
        ("private_address", &h.private_address),
        ("public_address", &h.public_address),
        ("zone", &h.zone),
        ("instance_type", &h.instance_type),
        ("raw_state", &h.raw_state),
        ("gpu_model", &h.gpu_model),
        ("ipv6_address", &h.ipv6_address),
        ("hostname", &h.hostname),
    ] {
        if let Some(v) = v {
            sized(plugin, field, v, 0, MAX_NAME)?;
        }
    }
    // These two are printed, labelled and handed on (a template's
    // hostname, an operator's ssh): a shape, not just a length.
    if let Some(v6) = &h.ipv6_address
        && v6.parse::<std::net::Ipv6Addr>().is_err()
    {
        return Err(broken(
            plugin,
            "ipv6_address",
            format!("{:?} is not an IPv6 address (without a zone)", cut(v6)),
        ));
    }
    if let Some(name) = &h.hostname
        && let Some(why) = hostname_fault(name)
    {
        return Err(broken(
            plugin,
            "hostname",
            format!("{:?} is not an RFC 1123 host name: {why}", cut(name)),
        ));
    }
    if h.labels.len() > MAX_LABELS {
        return Err(broken(
            plugin,
            "labels",
            format!(
                "has {} entries; at most {MAX_LABELS} are allowed",
                h.labels.len()
            ),
        ));
    }
    for (k, v) in &h.labels {
        sized(plugin, "label key", k, 1, MAX_LABEL_KEY)?;
        sized(plugin, "label value", v, 0, MAX_LABEL_VALUE)?;
    }
    Ok(h)
}

/// Longest host name (RFC 1123, as DNS carries it).
pub const MAX_HOSTNAME: usize = 253;

/// Why `name` is not an RFC 1123 host name, if it is not: at most
/// [`MAX_HOSTNAME`] bytes of dot-separated labels, each 1 to 63 ASCII
/// letters, digits and hyphens, not starting or ending with a hyphen.
fn hostname_fault(name: &str) -> Option<String> {
    if name.is_empty() || name.len() > MAX_HOSTNAME {
        return Some(format!(
            "{} bytes; 1 to {MAX_HOSTNAME} are allowed",
            name.len()
        ));
    }
    for label in name.split('.') {
        if label.is_empty() || label.len() > 63 {
            return Some(format!(
                "a label of {} bytes; 1 to 63 are allowed",
                label.len()
            ));
        }
        if !label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            return Some("only ASCII letters, digits, hyphens and dots are allowed".into());
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Some("a label starts or ends with a hyphen".into());
        }
    }
    None
}

/// The answer of `get` for `asked`: none, or that node, which must be
/// `owner`'s (a node of another owner is no answer at all: a contract
/// fault, never "not found").
pub(crate) fn got(
    plugin: &str,
    owner: &str,
    asked: &str,
    node: Option<NodeHandle>,
) -> Result<Option<NodeHandle>, ProvisionerError> {
    let Some(node) = node else { return Ok(None) };
    let node = handle(plugin, node)?;
    if !wasmprov_api::provenance::owned_by(&node, owner) {
        return Err(broken(
            plugin,
            "node",
            format!(
                "{:?} does not carry this host's owner id {owner:?} (label {:?} is {:?})",
                cut(&node.provider_id),
                wasmprov_api::provenance::OWNER_LABEL,
                node.labels
                    .get(wasmprov_api::provenance::OWNER_LABEL)
                    .map(|v| cut(v))
            ),
        ));
    }
    if node.provider_id != asked {
        return Err(broken(
            plugin,
            "provider_id",
            format!(
                "is {:?}, but {:?} was asked for",
                cut(&node.provider_id),
                cut(asked)
            ),
        ));
    }
    Ok(Some(node))
}

/// The answer of `set-labels` for node `asked` and `labels`: that node,
/// still `owner`'s, now labelled exactly `labels` beside the reserved
/// labels (owner, request id, journal, digest, group) it had `before`,
/// each kept exactly (none changed, none added, none removed).
pub(crate) fn relabelled(
    plugin: &str,
    owner: &str,
    asked: &str,
    labels: &Labels,
    before: &NodeHandle,
    node: NodeHandle,
) -> Result<NodeHandle, ProvisionerError> {
    let Some(node) = got(plugin, owner, asked, Some(node))? else {
        unreachable!("got answers the node it was given")
    };
    let reserved = |n: &NodeHandle| -> Labels {
        n.labels
            .iter()
            .filter(|(k, _)| wasmprov_api::provenance::is_reserved_label(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let (had, has) = (reserved(before), reserved(&node));
    if had != has {
        let differ: Vec<String> = had
            .keys()
            .chain(has.keys())
            .filter(|k| had.get(*k) != has.get(*k))
            .map(|k| cut(k))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        return Err(broken(
            plugin,
            "labels",
            format!(
                "changed the reserved labels {}: a relabel keeps them as they were",
                differ.join(", ")
            ),
        ));
    }
    let kept: Labels = node
        .labels
        .iter()
        .filter(|(k, _)| !wasmprov_api::provenance::is_reserved_label(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if kept != *labels {
        let differ: Vec<String> = kept
            .keys()
            .chain(labels.keys())
            .filter(|k| kept.get(*k) != labels.get(*k))
            .map(|k| cut(k))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        // Not necessarily the plugin's fault: another caller (another
        // process; this host runs one change of a node at a time) may have
        // relabelled the node between the plugin's write and its read.
        // The host cannot tell the two apart, so it says what it saw and
        // that asking again settles it.
        return Err(ProvisionerError::Conflict(format!(
            "plugin {plugin}: the node's labels changed while this call ran (another caller \
             relabelled it, or the plugin did not set them); they differ from the labels asked \
             in {}: ask again",
            differ.join(", ")
        )));
    }
    Ok(node)
}

/// The answer of `assign-address` on node `asked` for `request`.
pub(crate) fn stable_address(
    plugin: &str,
    asked: &str,
    request: &AddressRequest,
    a: StableAddress,
) -> Result<StableAddress, ProvisionerError> {
    let ip: std::net::IpAddr = a.address.parse().map_err(|_| {
        broken(
            plugin,
            "address",
            format!("{:?} is not an IP address", cut(&a.address)),
        )
    })?;
    if let Some(why) = wasmprov_api::network::address_refusal(Some(a.kind), ip) {
        return Err(broken(plugin, "address", format!("is {ip}: {why}")));
    }
    if a.kind != request.kind {
        return Err(broken(
            plugin,
            "kind",
            format!(
                "is {}, but a {} address was asked for",
                a.kind, request.kind
            ),
        ));
    }
    if let Some(wanted) = request
        .address
        .as_deref()
        .and_then(|w| w.parse::<std::net::IpAddr>().ok())
        && wanted != ip
    {
        return Err(broken(
            plugin,
            "address",
            format!("is {ip}, but {wanted} was asked for"),
        ));
    }
    match &a.provider_id {
        None => {
            return Err(broken(
                plugin,
                "provider_id",
                format!(
                    "is missing: the answer must say the address is on {:?}",
                    cut(asked)
                ),
            ));
        }
        Some(on) if on != asked => {
            return Err(broken(
                plugin,
                "provider_id",
                format!(
                    "is {:?}, but the address was put on {:?}",
                    cut(on),
                    cut(asked)
                ),
            ));
        }
        Some(_) => {}
    }
    if let Some(r) = &a.resource_id {
        sized(plugin, "resource_id", r, 1, MAX_PROVIDER_ID)?;
    }
    Ok(a)
}

/// The answer of `list-targets` for `group`.
pub(crate) fn targets(
    plugin: &str,
    group: &str,
    list: Vec<Target>,
) -> Result<Vec<Target>, ProvisionerError> {
    if list.len() > MAX_NODES {
        return Err(broken(
            plugin,
            "targets",
            format!(
                "has {} entries; at most {MAX_NODES} are allowed",
                list.len()
            ),
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    for t in &list {
        if t.group != group {
            return Err(broken(
                plugin,
                "target group",
                format!("is {:?}, but {:?} was asked for", cut(&t.group), cut(group)),
            ));
        }
        // A node listed twice on one port is refused, not merged: the
        // answer is not what the cloud holds.
        if !seen.insert((t.provider_id.as_str(), t.port)) {
            return Err(broken(
                plugin,
                "targets",
                format!("list {:?} port {:?} twice", cut(&t.provider_id), t.port),
            ));
        }
        sized(
            plugin,
            "target provider_id",
            &t.provider_id,
            1,
            MAX_PROVIDER_ID,
        )?;
        if t.port == Some(0) {
            return Err(broken(
                plugin,
                "target port",
                format!(
                    "of {:?} is 0, which no traffic goes to (1 to 65535, or none)",
                    cut(&t.provider_id)
                ),
            ));
        }
        if let Some(h) = &t.health {
            sized(plugin, "target health", h, 0, MAX_NAME)?;
        }
    }
    Ok(list)
}

/// Most addresses a subnet may count, free or in all: an IPv4 /8 (the
/// largest private block a cloud network is cut from, `10.0.0.0/8`). The
/// counts are of IPv4 addresses for nodes (EC2's
/// `AvailableIpAddressCount`, a Hetzner network's range); no subnet has
/// more, and a count of an IPv6 range (2^64 in a /64) would mean nothing.
pub const MAX_SUBNET_ADDRESSES: u64 = 1 << 24;

/// The answer of `subnet-capacity` for `subnet`.
pub(crate) fn subnet_capacity(
    plugin: &str,
    subnet: &str,
    c: SubnetCapacity,
) -> Result<SubnetCapacity, ProvisionerError> {
    if c.subnet != subnet {
        return Err(broken(
            plugin,
            "subnet",
            format!(
                "is {:?}, but {:?} was asked for",
                cut(&c.subnet),
                cut(subnet)
            ),
        ));
    }
    if let Some(total) = c.total_addresses
        && c.available_addresses > total
    {
        return Err(broken(
            plugin,
            "available_addresses",
            format!(
                "is {}, more than the subnet's {total} addresses",
                c.available_addresses
            ),
        ));
    }
    for (field, n) in [
        ("available_addresses", Some(c.available_addresses)),
        ("total_addresses", c.total_addresses),
    ] {
        if let Some(n) = n
            && n > MAX_SUBNET_ADDRESSES
        {
            return Err(broken(
                plugin,
                field,
                format!(
                    "is {n}, more than a /8 holds ({MAX_SUBNET_ADDRESSES}); no subnet has that many"
                ),
            ));
        }
    }
    if let Some(z) = &c.zone {
        sized(plugin, "zone", z, 0, MAX_NAME)?;
    }
    Ok(c)
}

/// The answer of `offerings`.
pub(crate) fn offerings(
    plugin: &str,
    list: Vec<Offering>,
) -> Result<Vec<Offering>, ProvisionerError> {
    if list.len() > MAX_OFFERINGS {
        return Err(broken(
            plugin,
            "offerings",
            format!(
                "has {} entries; at most {MAX_OFFERINGS} are allowed",
                list.len()
            ),
        ));
    }
    let mut seen = std::collections::HashSet::with_capacity(list.len());
    let mut out = Vec::with_capacity(list.len());
    for o in list {
        sized(
            plugin,
            "offering instance_type",
            &o.instance_type,
            1,
            MAX_NAME,
        )?;
        if !seen.insert(o.instance_type.clone()) {
            return Err(broken(
                plugin,
                "offerings",
                format!("name instance type {:?} twice", cut(&o.instance_type)),
            ));
        }
        if !o.cpu.is_finite() || o.cpu < 0.0 {
            return Err(broken(
                plugin,
                "offering cpu",
                format!("is {}, not a count of vCPUs", o.cpu),
            ));
        }
        for (field, v) in [("gpu_vendor", &o.gpu_vendor), ("gpu_model", &o.gpu_model)] {
            if let Some(v) = v {
                sized(plugin, field, v, 1, MAX_NAME)?;
            }
        }
        if o.zones.len() > MAX_ZONES {
            return Err(broken(
                plugin,
                "offering zones",
                format!(
                    "has {} entries; at most {MAX_ZONES} are allowed",
                    o.zones.len()
                ),
            ));
        }
        for z in &o.zones {
            sized(plugin, "offering zone", z, 1, MAX_NAME)?;
        }
        let on_demand_usd = o
            .on_demand_usd
            .map(|v| usd(plugin, "on_demand_usd", v))
            .transpose()?;
        let spot_usd = o.spot_usd.map(|v| usd(plugin, "spot_usd", v)).transpose()?;
        out.push(Offering {
            on_demand_usd,
            spot_usd,
            ..o
        });
    }
    Ok(out)
}

/// The answer of `describe`: the nodes that carry `owner`, and how many
/// did not (dropped, and logged here).
pub(crate) fn handles(
    plugin: &str,
    owner: &str,
    nodes: Vec<NodeHandle>,
) -> Result<(Vec<NodeHandle>, usize), ProvisionerError> {
    let mut out = checked_handles(plugin, nodes)?;
    let listed = out.len();
    out.retain(|n| wasmprov_api::provenance::owned_by(n, owner));
    let foreign = listed - out.len();
    if foreign > 0 {
        tracing::warn!(
            plugin,
            owner,
            foreign,
            "plugin answer refused in part: describe listed nodes that do not carry this host's owner id; they were dropped"
        );
    }
    Ok((out, foreign))
}

/// A list of handles, each checked, provider ids distinct; owners not
/// looked at.
pub(crate) fn checked_handles(
    plugin: &str,
    nodes: Vec<NodeHandle>,
) -> Result<Vec<NodeHandle>, ProvisionerError> {
    if nodes.len() > MAX_NODES {
        return Err(broken(
            plugin,
            "node list",
            format!("has {} nodes; at most {MAX_NODES} are allowed", nodes.len()),
        ));
    }
    let mut seen = std::collections::HashSet::with_capacity(nodes.len());
    let mut out = Vec::with_capacity(nodes.len());
    for n in nodes {
        let n = handle(plugin, n)?;
        if !seen.insert(n.provider_id.clone()) {
            return Err(broken(
                plugin,
                "node list",
                format!(
                    "names provider id {:?} twice",
                    crate::answers::cut(&n.provider_id)
                ),
            ));
        }
        out.push(n);
    }
    Ok(out)
}

/// The backend's name and capacity types, asked once at load.
pub(crate) fn identity(
    plugin: &str,
    name: String,
    types: Vec<CapacityType>,
) -> Result<(String, Vec<CapacityType>), ProvisionerError> {
    sized(plugin, "backend name", &name, 1, MAX_BACKEND_NAME)?;
    let mut out: Vec<CapacityType> = Vec::new();
    for t in types {
        if !out.contains(&t) {
            out.push(t);
        }
    }
    Ok((name, out))
}

/// `s` cut to 64 characters for a message.
pub(crate) fn cut(s: &str) -> String {
    let mut out: String = s.chars().take(64).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn faulted<T: std::fmt::Debug>(r: Result<T, ProvisionerError>, word: &str) {
        match r {
            Err(ProvisionerError::Plugin {
                fault: PluginFault::Contract,
                message,
                ..
            }) => assert!(message.contains(word), "{word:?} not in {message}"),
            other => panic!("expected a contract fault naming {word}, got {other:?}"),
        }
    }

    /// An answer whose labels are not the ones asked: the labels changed
    /// while the call ran (or the plugin did not set them); a conflict
    /// saying to ask again, not a plugin fault.
    fn changed_meanwhile<T: std::fmt::Debug>(r: Result<T, ProvisionerError>, word: &str) {
        match r {
            Err(ProvisionerError::Conflict(message)) => {
                assert!(message.contains(word), "{word:?} not in {message}");
                assert!(
                    message.contains("changed while this call ran")
                        && message.contains("ask again"),
                    "{message}"
                );
            }
            other => panic!("expected a conflict naming {word}, got {other:?}"),
        }
    }

    #[test]
    fn a_relabelled_node_is_the_one_asked_owned_and_labelled_as_asked() {
        let asked: Labels = [("role".to_string(), "db".to_string())].into();
        let node = |id: &str, owner: &str, extra: &[(&str, &str)]| {
            let mut labels: Labels = [
                ("wasmprov-owner".to_string(), owner.to_string()),
                ("wasmprov-request".to_string(), "r1".to_string()),
            ]
            .into();
            labels.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            NodeHandle {
                provider_id: id.into(),
                labels,
                ..NodeHandle::default()
            }
        };
        let before = node("n1", "me", &[("role", "old")]);
        let ok = relabelled(
            "p",
            "me",
            "n1",
            &asked,
            &before,
            node("n1", "me", &[("role", "db")]),
        );
        assert!(ok.is_ok(), "{ok:?}");
        faulted(
            relabelled(
                "p",
                "me",
                "n1",
                &asked,
                &before,
                node("n2", "me", &[("role", "db")]),
            ),
            "provider_id",
        );
        faulted(
            relabelled(
                "p",
                "me",
                "n1",
                &asked,
                &before,
                node("n1", "you", &[("role", "db")]),
            ),
            "owner",
        );
        changed_meanwhile(
            relabelled(
                "p",
                "me",
                "n1",
                &asked,
                &before,
                node("n1", "me", &[("role", "web")]),
            ),
            "role",
        );
        changed_meanwhile(
            relabelled(
                "p",
                "me",
                "n1",
                &asked,
                &before,
                node("n1", "me", &[("role", "db"), ("Name", "x")]),
            ),
            "Name",
        );
        changed_meanwhile(
            relabelled("p", "me", "n1", &asked, &before, node("n1", "me", &[])),
            "role",
        );
        // The reserved labels stay exactly as they were: none changed,
        // added or removed.
        let mut changed = node("n1", "me", &[("role", "db")]);
        changed
            .labels
            .insert("wasmprov-request".into(), "r2".into());
        faulted(
            relabelled("p", "me", "n1", &asked, &before, changed),
            "wasmprov-request",
        );
        let mut dropped = node("n1", "me", &[("role", "db")]);
        dropped.labels.remove("wasmprov-request");
        faulted(
            relabelled("p", "me", "n1", &asked, &before, dropped),
            "wasmprov-request",
        );
        for key in [
            "wasmprov-journal",
            "wasmprov-group",
            "wasmprov-request-digest",
        ] {
            faulted(
                relabelled(
                    "p",
                    "me",
                    "n1",
                    &asked,
                    &before,
                    node("n1", "me", &[("role", "db"), (key, "forged")]),
                ),
                key,
            );
        }
    }

    #[test]
    fn networking_answers_say_what_was_asked() {
        let private = AddressRequest {
            kind: wasmprov_api::AddressKind::Private,
            address: None,
        };
        let addr = |a: &str, kind, on: Option<&str>| StableAddress {
            address: a.into(),
            kind,
            resource_id: None,
            provider_id: on.map(str::to_string),
        };
        use wasmprov_api::AddressKind::{Private, Public};
        assert!(stable_address("p", "n1", &private, addr("10.0.0.5", Private, Some("n1"))).is_ok());
        assert!(stable_address("p", "n1", &private, addr("fd00::5", Private, Some("n1"))).is_ok());
        // Issue 26, finding 6: no node named, or a loopback, unspecified or
        // multicast address (an IPv4-mapped one read as its IPv4).
        faulted(
            stable_address("p", "n1", &private, addr("10.0.0.5", Private, None)),
            "provider_id",
        );
        for bad in [
            "127.0.0.1",
            "0.0.0.0",
            "0.1.2.3",
            "::1",
            "::",
            "224.0.0.1",
            "ff02::1",
            "255.255.255.255",
            "169.254.169.254",
            "169.254.0.1",
            "fe80::1",
            "febf::1",
        ] {
            faulted(
                stable_address("p", "n1", &private, addr(bad, Private, Some("n1"))),
                "loopback",
            );
        }
        // Issue 26 (second attack), finding 6: IPv4 in IPv6 form is
        // refused, whatever the IPv4 (one spelling), saying so when the
        // IPv4 is refused too.
        for (bad, also) in [
            ("::ffff:127.0.0.1", true),
            ("::ffff:169.254.169.254", true),
            ("::127.0.0.1", true),
            ("64:ff9b::a9fe:a9fe", true),
            ("64:ff9b::127.0.0.1", true),
            ("::ffff:10.0.0.5", false),
            ("::10.0.0.5", false),
            ("64:ff9b::10.0.0.5", false),
        ] {
            let r = stable_address("p", "n1", &private, addr(bad, Private, Some("n1")));
            faulted(r.clone(), "IPv6 spelling");
            if also {
                faulted(r, "itself");
            }
        }
        let public = AddressRequest {
            kind: Public,
            address: None,
        };
        assert!(
            stable_address("p", "n1", &public, addr("203.0.113.7", Public, Some("n1"))).is_ok()
        );
        assert!(
            stable_address("p", "n1", &public, addr("2001:db8::7", Public, Some("n1"))).is_ok()
        );
        for bad in [
            "127.4.17.88",
            "169.254.169.254",
            "255.255.255.255",
            "0.0.0.0",
            "224.0.0.1",
            "fe80::1",
        ] {
            faulted(
                stable_address("p", "n1", &public, addr(bad, Public, Some("n1"))),
                "loopback",
            );
        }
        for bad in [
            "10.0.0.5",
            "172.16.0.1",
            "192.168.1.1",
            "100.64.0.1",
            "fd00::5",
        ] {
            faulted(
                stable_address("p", "n1", &public, addr(bad, Public, Some("n1"))),
                "private-range",
            );
        }
        faulted(
            stable_address("p", "n1", &private, addr("ten.0.0.5", Private, None)),
            "IP",
        );
        faulted(
            stable_address("p", "n1", &private, addr("203.0.113.5", Public, None)),
            "kind",
        );
        faulted(
            stable_address("p", "n1", &private, addr("10.0.0.5", Private, Some("n2"))),
            "provider_id",
        );
        let by_ip = AddressRequest {
            kind: Private,
            address: Some("10.0.0.7".into()),
        };
        faulted(
            stable_address("p", "n1", &by_ip, addr("10.0.0.5", Private, None)),
            "10.0.0.7",
        );
        let by_id = AddressRequest {
            kind: Private,
            address: Some("eipalloc-1".into()),
        };
        assert!(stable_address("p", "n1", &by_id, addr("10.0.0.5", Private, Some("n1"))).is_ok());

        let t = |g: &str| Target {
            group: g.into(),
            provider_id: "n1".into(),
            port: None,
            health: None,
        };
        assert!(targets("p", "tg", vec![t("tg")]).is_ok());
        faulted(targets("p", "tg", vec![t("tg"), t("other")]), "other");
        faulted(targets("p", "tg", vec![t("tg"), t("tg")]), "twice");
        let mut on_port = t("tg");
        on_port.port = Some(80);
        assert!(targets("p", "tg", vec![t("tg"), on_port.clone()]).is_ok());
        on_port.port = Some(0);
        faulted(targets("p", "tg", vec![on_port]), "port");

        let cap = |s: &str, avail, total| SubnetCapacity {
            subnet: s.into(),
            available_addresses: avail,
            total_addresses: total,
            zone: None,
        };
        assert!(subnet_capacity("p", "s1", cap("s1", 3, Some(3))).is_ok());
        assert!(subnet_capacity("p", "s1", cap("s1", 3, None)).is_ok());
        faulted(subnet_capacity("p", "s1", cap("s2", 3, None)), "subnet");
        assert!(subnet_capacity("p", "s1", cap("s1", 1 << 24, None)).is_ok());
        faulted(subnet_capacity("p", "s1", cap("s1", u64::MAX, None)), "/8");
        assert!(subnet_capacity("p", "s1", cap("s1", 1 << 24, Some(1 << 24))).is_ok());
        // Issue 26 (second attack), finding 7: a total no subnet can have
        // (u64::MAX bypassed the cap on free addresses), or free addresses
        // beyond it, is refused.
        faulted(
            subnet_capacity("p", "s1", cap("s1", 1, Some(u64::MAX))),
            "total_addresses",
        );
        faulted(
            subnet_capacity("p", "s1", cap("s1", (1 << 24) + 1, Some(u64::MAX))),
            "/8",
        );
        faulted(
            subnet_capacity("p", "s1", cap("s1", 0, Some((1 << 24) + 1))),
            "total_addresses",
        );
        faulted(
            subnet_capacity("p", "s1", cap("s1", 4, Some(3))),
            "available",
        );
    }

    fn est(usd: f64) -> PriceHint {
        PriceHint {
            hourly_usd: usd,
            capacity_type: CapacityType::OnDemand,
            instance_type: "t".into(),
        }
    }

    fn node(id: &str) -> NodeHandle {
        let mut n = NodeHandle::new(id, wasmprov_api::JoinState::Joined);
        n.labels
            .insert(wasmprov_api::provenance::OWNER_LABEL.into(), "me".into());
        n
    }

    fn of(owner: Option<&str>, id: &str) -> NodeHandle {
        let mut n = node(id);
        match owner {
            Some(o) => n
                .labels
                .insert(wasmprov_api::provenance::OWNER_LABEL.into(), o.into()),
            None => n.labels.remove(wasmprov_api::provenance::OWNER_LABEL),
        };
        n
    }

    fn contract(r: Result<impl std::fmt::Debug, ProvisionerError>, field: &str) {
        match r {
            Err(ProvisionerError::Plugin {
                fault: PluginFault::Contract,
                message,
                ..
            }) => assert!(message.contains(field), "{field}: {message}"),
            other => panic!("{field}: {other:?}"),
        }
    }

    #[test]
    fn prices_are_finite_non_negative_and_zero_is_positive() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1.0, -1e-300] {
            contract(price("p", est(bad)), "hourly_usd");
        }
        let zero = price("p", est(-0.0)).unwrap();
        assert!(zero.hourly_usd.is_sign_positive());
        assert_eq!(zero.hourly_usd.total_cmp(&0.0), std::cmp::Ordering::Equal);
        let mut e = est(1.0);
        e.instance_type = String::new();
        contract(price("p", e), "instance_type");
    }

    #[test]
    fn handles_are_well_formed_and_distinct() {
        contract(handle("p", node("")), "provider_id");
        contract(
            handle("p", node(&"x".repeat(MAX_PROVIDER_ID + 1))),
            "provider_id",
        );
        let mut n = node("a");
        n.labels = (0..=MAX_LABELS)
            .map(|i| (i.to_string(), String::new()))
            .collect();
        contract(handle("p", n), "labels");
        let mut n = node("a");
        n.zone = Some("z".repeat(MAX_NAME + 1));
        contract(handle("p", n), "zone");
        let mut n = node("a");
        n.raw_state = Some("s".repeat(MAX_NAME + 1));
        contract(handle("p", n), "raw_state");
        contract(handles("p", "me", vec![node("a"), node("a")]), "twice");
        // Issue 26 (second attack), finding 7: an IPv6 address parses,
        // without a zone; a host name is an RFC 1123 one.
        for ok in ["2001:db8::1", "fe80::1"] {
            let mut n = node("a");
            n.ipv6_address = Some(ok.into());
            assert!(handle("p", n).is_ok(), "{ok}");
        }
        for bad in [
            "fe80::1%eth0; rm -rf /",
            "fe80::1%eth0",
            "10.0.0.1",
            "",
            "2001:db8::1/64",
        ] {
            let mut n = node("a");
            n.ipv6_address = Some(bad.into());
            contract(handle("p", n), "ipv6_address");
        }
        let long_ok = vec!["a".repeat(63); 3].join(".") + "." + &"b".repeat(61);
        assert_eq!(long_ok.len(), MAX_HOSTNAME);
        for ok in [
            "ip-10-0-0-5.ec2.internal",
            "web-1",
            "A1",
            "1",
            long_ok.as_str(),
        ] {
            let mut n = node("a");
            n.hostname = Some(ok.into());
            assert!(handle("p", n).is_ok(), "{ok}");
        }
        let too_long = long_ok.clone() + "b";
        let label_64 = "a".repeat(64);
        for bad in [
            "",
            "web_1",
            "-web",
            "web-",
            "a..b",
            "web.",
            ".web",
            "web 1",
            "web;rm -rf /",
            "wéb",
            label_64.as_str(),
            too_long.as_str(),
        ] {
            let mut n = node("a");
            n.hostname = Some(bad.into());
            contract(handle("p", n), "hostname");
        }
        assert_eq!(
            handles("p", "me", vec![node("a"), node("b")])
                .unwrap()
                .0
                .len(),
            2
        );
    }

    /// A node of another owner, or of none, is dropped from a list and
    /// counted; from `get` it is no answer at all (never "not found").
    #[test]
    fn answers_carry_this_owner() {
        let (kept, foreign) = handles(
            "p",
            "me",
            vec![
                node("a"),
                of(Some("other"), "b"),
                of(None, "c"),
                of(Some("me "), "d"),
                of(Some("ME"), "e"),
            ],
        )
        .unwrap();
        assert_eq!(kept, vec![node("a")]);
        assert_eq!(foreign, 4);
        contract(got("p", "me", "b", Some(of(Some("other"), "b"))), "owner");
        contract(got("p", "me", "c", Some(of(None, "c"))), "owner");
    }

    #[test]
    fn get_answers_the_node_asked_for() {
        assert_eq!(got("p", "me", "a", None).unwrap(), None);
        assert_eq!(
            got("p", "me", "a", Some(node("a"))).unwrap(),
            Some(node("a"))
        );
        contract(got("p", "me", "a", Some(node("b"))), "asked for");
    }

    #[test]
    fn offerings_are_distinct_and_priced_sanely() {
        let o = |t: &str, usd: f64| Offering {
            instance_type: t.into(),
            cpu: 2.0,
            memory_bytes: 4 << 30,
            on_demand_usd: Some(usd),
            spot_usd: Some(-0.0),
            ..Offering::default()
        };
        let ok = offerings("p", vec![o("a", 0.1), o("b", 0.2)]).unwrap();
        assert!(ok[0].spot_usd.unwrap().is_sign_positive());
        contract(offerings("p", vec![o("a", 0.1), o("a", 0.2)]), "twice");
        contract(offerings("p", vec![o("a", f64::NAN)]), "on_demand_usd");
        contract(offerings("p", vec![o("", 0.1)]), "instance_type");
        let mut bad = o("a", 0.1);
        bad.cpu = f64::INFINITY;
        contract(offerings("p", vec![bad]), "cpu");
        let mut bad = o("a", 0.1);
        bad.zones = vec![String::new()];
        contract(offerings("p", vec![bad]), "zone");
    }

    #[test]
    fn identity_dedups_capacity_types() {
        let (_, types) = identity(
            "p",
            "b".into(),
            vec![
                CapacityType::Spot,
                CapacityType::Spot,
                CapacityType::OnDemand,
            ],
        )
        .unwrap();
        assert_eq!(types, [CapacityType::Spot, CapacityType::OnDemand]);
        contract(
            identity("p", String::new(), vec![CapacityType::Spot]),
            "backend name",
        );
    }
}
