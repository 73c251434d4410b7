//! What contract 0.3's optional `networking` interface speaks of: addresses
//! that outlive a node, load balancer target groups and subnet capacity.
//! The calls are on [`CloudProvisioner`](crate::CloudProvisioner); a backend
//! that has none of them says so in [`Interfaces`].

use serde::{Deserialize, Serialize};

use crate::ProviderNodeId;

/// The most bytes of a name a caller gives a call about a node or the
/// cloud's network (a provider id, target group, subnet or address), and of
/// a provider id a plugin answers.
pub const MAX_NAME_BYTES: usize = 1024;

/// Why `value`, given by a caller as the `what` of a call (`"provider id"`,
/// `"target group"`, `"subnet"`, `"address"`), is refused before any plugin
/// is asked, or `None`: the one rule for the CLI, the gRPC service and
/// embedders alike. Refused: empty or blank, over [`MAX_NAME_BYTES`],
/// leading or trailing whitespace (no cloud's id has it, and a plugin that
/// trims would act on a node the caller did not name exactly), a control
/// character.
#[must_use]
pub fn name_fault(what: &str, value: &str) -> Option<String> {
    if value.trim().is_empty() {
        return Some(format!("the {what} is empty"));
    }
    if value.len() > MAX_NAME_BYTES {
        return Some(format!(
            "the {what} is {} bytes; 1 to {MAX_NAME_BYTES} are allowed",
            value.len()
        ));
    }
    if value.trim() != value {
        return Some(format!(
            "the {what} {:?} has leading or trailing whitespace",
            shown(value)
        ));
    }
    if value.chars().any(char::is_control) {
        return Some(format!(
            "the {what} {:?} has a control character",
            shown(value)
        ));
    }
    None
}

/// Why an address a caller gives `assign-address` (of `kind`) or
/// `release-address` (no kind) is refused before the plugin is asked, or
/// `None`: a name ([`name_fault`]) that is an IP [`address_refusal`]
/// allows (the rule the plugin's answer meets too), or the cloud's id of
/// one (an Elastic IP allocation id, a floating IP id: ASCII letters,
/// digits, `-_.:/`), never something shaped like an IP that is not one in
/// standard notation (`127.1`, `0x7f.0.0.1`, `fe80::1%eth0`).
#[must_use]
pub fn asked_address_fault(kind: Option<AddressKind>, value: &str) -> Option<String> {
    if let Some(why) = name_fault("address", value) {
        return Some(why);
    }
    let refused = |why: &str| Some(format!("the address {:?} {why}", shown(value)));
    if let Ok(ip) = value.parse::<std::net::IpAddr>() {
        return address_refusal(kind, ip).and_then(|why| refused(&format!("is refused: {why}")));
    }
    let ip_like = value
        .chars()
        .all(|c| c.is_ascii_hexdigit() || matches!(c, '.' | ':' | 'x' | 'X'))
        && value.contains(['.', ':']);
    if ip_like {
        return refused(
            "is neither an IP address in standard notation (a.b.c.d, or IPv6 without a zone) nor an id",
        );
    }
    if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '/'))
    {
        return refused(
            "is neither an IP address nor a cloud's id of one (ASCII letters, digits, -_.:/)",
        );
    }
    None
}

/// At most 64 characters of `value`, for a message.
fn shown(value: &str) -> String {
    let mut out: String = value.chars().take(64).collect();
    if out.len() < value.len() {
        out.push('…');
    }
    out
}

/// Why `ip` cannot be a stable address of `kind` (`None`: of either kind,
/// as a `release-address` names it), if it cannot: the one rule for the
/// addresses a caller gives `assign-address` and `release-address`
/// (checked before a plugin is called, [`asked_address_fault`]) and the address a plugin
/// answers.
///
/// - No kind: unspecified (`0.0.0.0/8`, `::`), loopback (`127.0.0.0/8`,
///   `::1`), multicast, the broadcast address, link-local
///   (`169.254.0.0/16`, the clouds' metadata address among them;
///   `fe80::/10`): no node's address.
/// - Public: besides, no private range (`10/8`, `172.16/12`, `192.168/16`,
///   the shared `100.64/10`, `fc00::/7`): a public address is reachable
///   from outside the cloud's network.
/// - An IPv4 address written in IPv6 form (mapped `::ffff:a.b.c.d`,
///   compatible `::a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`) is refused,
///   whatever the IPv4 address: it has one spelling, `a.b.c.d`, which is
///   the one clouds compare (the message says whether that one is refused
///   too).
#[must_use]
pub fn address_refusal(kind: Option<AddressKind>, ip: std::net::IpAddr) -> Option<String> {
    use std::net::{IpAddr, Ipv4Addr};
    if let IpAddr::V6(v6) = ip {
        let seg = v6.segments();
        let o = v6.octets();
        let embedded = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
        let form = if v6.to_ipv4_mapped().is_some() {
            Some("IPv4-mapped")
        } else if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
            Some("NAT64")
        } else if seg[..6].iter().all(|s| *s == 0) && !(seg[6] == 0 && seg[7] <= 1) {
            Some("IPv4-compatible")
        } else {
            None
        };
        if let Some(form) = form {
            let also = address_refusal(kind, IpAddr::V4(embedded))
                .map(|why| format!(" ({embedded} itself: {why})"))
                .unwrap_or_default();
            return Some(format!(
                "an {form} IPv6 spelling of the IPv4 address {embedded}; give it as {embedded}{also}"
            ));
        }
    }
    let (never, private) = match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            (
                v4.is_unspecified()
                    || o[0] == 0
                    || v4.is_loopback()
                    || v4.is_multicast()
                    || v4.is_broadcast()
                    || v4.is_link_local(),
                v4.is_private() || (o[0] == 100 && (o[1] & 0xc0) == 64),
            )
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            (
                v6.is_unspecified()
                    || v6.is_loopback()
                    || v6.is_multicast()
                    || (first & 0xffc0) == 0xfe80,
                (first & 0xfe00) == 0xfc00,
            )
        }
    };
    if never {
        return Some(
            "an unspecified, loopback, multicast, broadcast or link-local address is no node's address"
                .into(),
        );
    }
    if private && kind == Some(AddressKind::Public) {
        return Some(
            "a private-range address (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7) is no public address"
                .into(),
        );
    }
    None
}

/// Which interfaces of the contract a backend has beyond the core calls.
/// A call to one it lacks is [`Unsupported`](crate::ProvisionerError::Unsupported)
/// without the backend being asked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default)]
pub struct Interfaces {
    /// `set-labels` (contract 0.3 and later; the backend may still answer
    /// that its cloud cannot relabel a live node).
    pub set_labels: bool,
    /// The `networking` interface: stable addresses, target groups, subnet capacity.
    pub networking: bool,
}

/// Which kind of stable address.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AddressKind {
    /// An address in the cloud's private network that moves between nodes
    /// (EC2 secondary private IP, Hetzner alias IP).
    Private,
    /// A public address that moves between nodes (EC2 Elastic IP, Hetzner
    /// floating IP).
    Public,
}

impl AddressKind {
    /// The name used in JSON, on the command line and in the protocol.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Private => "private",
            Self::Public => "public",
        }
    }
}

impl std::fmt::Display for AddressKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for AddressKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "private" => Ok(Self::Private),
            "public" => Ok(Self::Public),
            other => Err(format!(
                "unknown address kind {other:?} (expected private or public)"
            )),
        }
    }
}

/// The address to put on a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressRequest {
    /// Which kind.
    pub kind: AddressKind,
    /// The address (an IP, or the cloud's id of it) to move to the node;
    /// `None` takes a new one from the cloud.
    #[serde(default)]
    pub address: Option<String>,
}

/// A stable address and where it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StableAddress {
    /// The IP address.
    pub address: String,
    /// Which kind.
    pub kind: AddressKind,
    /// The cloud's id of the address or of what holds it (Elastic IP
    /// allocation id, floating IP id, network interface id).
    #[serde(default)]
    pub resource_id: Option<String>,
    /// The node it is on, if any.
    #[serde(default)]
    pub provider_id: Option<ProviderNodeId>,
}

/// A node in a load balancer's target group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Target {
    /// The cloud's id of the target group or load balancer.
    pub group: String,
    /// The node.
    pub provider_id: ProviderNodeId,
    /// The port traffic goes to, when the group takes one per target.
    #[serde(default)]
    pub port: Option<u16>,
    /// The cloud's word for the target's health, when it says.
    #[serde(default)]
    pub health: Option<String>,
}

/// Free room in a subnet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubnetCapacity {
    /// The subnet asked about.
    pub subnet: String,
    /// Addresses still free for new nodes.
    pub available_addresses: u64,
    /// Every address the subnet has for nodes, when the cloud says.
    #[serde(default)]
    pub total_addresses: Option<u64>,
    /// Its zone, when it has one.
    #[serde(default)]
    pub zone: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one rule for a caller's names: what every entrance (CLI, gRPC,
    /// the host) refuses before a plugin is asked.
    #[test]
    fn names_callers_give_are_refused_when_blank_padded_long_or_controlled() {
        for bad in [
            String::new(),
            " ".into(),
            "\t".into(),
            " 1000007".into(),
            "1000007 ".into(),
            "1000007\n".into(),
            "i-0\u{1b}[2J".into(),
            "x".repeat(MAX_NAME_BYTES + 1),
        ] {
            assert!(name_fault("provider id", &bad).is_some(), "{bad:?}");
        }
        for good in [
            "1000007",
            "i-0123456789abcdef0",
            "subnet-0a1b",
            "my network",
            &"x".repeat(MAX_NAME_BYTES),
        ] {
            assert_eq!(name_fault("provider id", good), None, "{good:?}");
        }
        let why = name_fault("subnet", &"s".repeat(2000)).unwrap();
        assert!(why.contains("subnet") && why.contains("2000"), "{why}");
    }

    #[test]
    fn addresses_callers_give_meet_the_answer_rule() {
        let public = Some(AddressKind::Public);
        let private = Some(AddressKind::Private);
        for (kind, bad) in [
            (private, "127.0.0.1"),
            (private, "0.0.0.0"),
            (private, "224.0.0.5"),
            (private, "169.254.169.254"),
            (private, "255.255.255.255"),
            (private, "fe80::1"),
            (private, "::ffff:10.0.0.5"),
            (private, "64:ff9b::a00:5"),
            (private, "127.1"),
            (private, "0x7f.0.0.1"),
            (private, "fe80::1%eth0"),
            (public, "10.0.0.5"),
            (public, "100.64.0.1"),
            (None, " 203.0.113.7"),
            (None, ""),
            (None, "eipalloc-1;rm"),
        ] {
            assert!(asked_address_fault(kind, bad).is_some(), "{kind:?} {bad:?}");
        }
        for (kind, good) in [
            (private, "10.0.1.100"),
            (public, "203.0.113.7"),
            (public, "2001:db8::7"),
            (None, "eipalloc-0123456789abcdef0"),
            (None, "4711"),
        ] {
            assert_eq!(asked_address_fault(kind, good), None, "{kind:?} {good:?}");
        }
    }
}
