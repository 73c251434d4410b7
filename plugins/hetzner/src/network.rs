//! Contract 0.3's networking on Hetzner Cloud: floating IPs as stable
//! public addresses, alias IPs in a private network as stable private ones,
//! load balancer server targets as target groups, and the free addresses
//! of a private network's subnets.
//!
//! Every call that names a server first reads it and checks this owner's
//! label ([`Client::owned_server`]): another owner's server is not-found,
//! as in `get`. Floating IPs and load balancers are the project's, shared
//! by every owner; an address is never taken from another owner's server,
//! nor a floating IP labelled with another owner.

use wasmprov_guest::http::Request;
use wasmprov_guest::ids::numeric_id;
use wasmprov_guest::tags;
use wasmprov_guest::{
    AddressKind, AddressRequest, Error, Labels, Result, StableAddress, SubnetCapacity, Target,
};

use crate::api::{
    ApiFailure, AssignFloatingIp, ChangeAliasIps, CreateFloatingIp, FloatingIp, IdRef,
    LoadBalancer, Network, NetworkSubnet, OneFloatingIp, OneLoadBalancer, OneNetwork, OneServer,
    Server, ServerTarget,
};
use crate::client::{Client, Transport};

/// Addresses of a subnet no server gets: its network address, its first
/// host (the gateway) and its broadcast address.
pub const RESERVED_PER_SUBNET: u64 = 3;

/// Most pages of floating IPs read to find one by its address.
const MAX_PAGES: u32 = 50;

impl<T: Transport> Client<'_, T> {
    /// Puts a stable address on this owner's server `provider_id`. Public:
    /// a floating IP, the one `request.address` names (an IP or a floating
    /// IP id), moved off another server of this owner; without one, the
    /// server's first floating IP, or a new one labelled with the owner.
    /// Private: an alias IP in the server's private network
    /// (`assign_alias`).
    ///
    /// # Errors
    /// [`Error::NotFound`] for a server that is gone or another owner's,
    /// or an address the project does not have; [`Error::Unsupported`] for
    /// an address labelled with another owner or on another owner's
    /// server, and for a private address of a server in no network; the
    /// API's errors.
    pub fn assign_address(
        &self,
        owner_id: &str,
        provider_id: &str,
        request: &AddressRequest,
    ) -> Result<StableAddress> {
        let server = self.owned_server(owner_id, provider_id)?;
        if request.kind == AddressKind::Private {
            return self.assign_alias(owner_id, &server, request.address.as_deref());
        }
        let held = server
            .public_net
            .as_ref()
            .map(|n| n.floating_ips.clone())
            .unwrap_or_default();
        let fip = match &request.address {
            Some(address) => self.floating_ip(address)?,
            None => match held.first() {
                Some(id) => self.floating_ip(&id.to_string())?,
                None => return self.new_floating_ip(owner_id, &server),
            },
        };
        if fip.server != Some(server.id) {
            self.may_take(owner_id, &fip)?;
            let assign = Request::post(format!("/floating_ips/{}/actions/assign", fip.id))
                .json(&AssignFloatingIp { server: server.id });
            self.call(assign)?.map_err(ApiFailure::into_error)?;
            self.transport.info(
                "assigned Hetzner floating IP",
                &[
                    ("floating_ip", &fip.ip),
                    ("server_id", &server.id.to_string()),
                    ("owner", owner_id),
                ],
            );
        }
        Ok(stable(&fip, Some(server.id)))
    }

    /// Whether this owner may move `fip`: not when it is labelled with
    /// another owner, nor off a server that is not this owner's.
    fn may_take(&self, owner_id: &str, fip: &FloatingIp) -> Result<()> {
        if let Some(other) = fip
            .labels
            .as_ref()
            .and_then(|l| l.get(tags::OWNER))
            .filter(|o| **o != tags::id_tag(owner_id))
        {
            return Err(Error::Unsupported(format!(
                "floating IP {} was made for owner {other:?}: it is never taken",
                fip.ip
            )));
        }
        if let Some(holder) = fip.server {
            match self.owned_server(owner_id, &holder.to_string()) {
                Ok(_) => {}
                Err(Error::NotFound(_)) => {
                    return Err(Error::Unsupported(format!(
                        "floating IP {} is on server {holder}, which is not this owner's: it is never taken from there",
                        fip.ip
                    )));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// A private stable address: an alias IP of the server in its first
    /// private network, the one asked for (taken off another of this
    /// owner's servers in that network) or, without one, the server's
    /// first alias IP, else the lowest free address of the network.
    fn assign_alias(
        &self,
        owner_id: &str,
        server: &Server,
        address: Option<&str>,
    ) -> Result<StableAddress> {
        let Some((network_id, current)) = server
            .private_net
            .iter()
            .find_map(|n| Some((n.network?, n.alias_ips.clone())))
        else {
            return Err(Error::Unsupported(format!(
                "server {} is in no private network, and an alias IP needs one (provision it with a subnet)",
                server.id
            )));
        };
        let answer = |ip: &str| StableAddress {
            address: ip.to_string(),
            kind: AddressKind::Private,
            resource_id: Some(network_id.to_string()),
            provider_id: Some(server.id.to_string()),
        };
        if let Some(ip) = address
            .map(str::trim)
            .filter(|ip| current.iter().any(|c| c == ip))
        {
            return Ok(answer(ip));
        }
        if address.is_none()
            && let Some(ip) = current.first()
        {
            return Ok(answer(ip));
        }
        let network = self.network(&network_id.to_string())?;
        let ranges = cloud_ranges(&network);
        let members = self.members(&network)?;
        let ip = match address {
            Some(a) => {
                let ip: std::net::Ipv4Addr = a.trim().parse().map_err(|_| {
                    Error::NotFound(format!(
                        "{a:?} is not an IPv4 address of network {network_id}"
                    ))
                })?;
                if !ranges.iter().any(|r| usable(*r, ip)) {
                    return Err(Error::NotFound(format!(
                        "{ip} is not an address servers may have in network {network_id}"
                    )));
                }
                // Taken off the server of this owner that has it; another
                // owner's is never taken from.
                for m in &members {
                    let Some(net) = m.private_net.iter().find(|n| n.network == Some(network_id))
                    else {
                        continue;
                    };
                    let ip_text = ip.to_string();
                    if net.ip.as_deref() == Some(ip_text.as_str()) {
                        return Err(Error::Unsupported(format!(
                            "{ip} is the address of server {} in network {network_id}, not an alias IP",
                            m.id
                        )));
                    }
                    if m.id != server.id && net.alias_ips.contains(&ip_text) {
                        if !crate::labels::is_owned_by(&m.labels(), owner_id) {
                            return Err(Error::Unsupported(format!(
                                "{ip} is an alias IP of server {}, which is not this owner's: it is never taken from there",
                                m.id
                            )));
                        }
                        let rest: Vec<String> = net
                            .alias_ips
                            .iter()
                            .filter(|a| **a != ip_text)
                            .cloned()
                            .collect();
                        self.change_alias_ips(m.id, network_id, &rest)?;
                    }
                }
                ip
            }
            None => {
                let used: Vec<std::net::Ipv4Addr> = members
                    .iter()
                    .flat_map(|m| m.private_net.iter())
                    .filter(|n| n.network == Some(network_id))
                    .flat_map(|n| n.ip.iter().chain(&n.alias_ips))
                    .filter_map(|ip| ip.parse().ok())
                    .collect();
                ranges
                    .iter()
                    .flat_map(|(start, size)| {
                        (0..*size).map(move |i| std::net::Ipv4Addr::from(start + i))
                    })
                    .find(|ip| ranges.iter().any(|r| usable(*r, *ip)) && !used.contains(ip))
                    .ok_or_else(|| Error::Capacity {
                        scope: wasmprov_guest::CapacityScope::Group,
                        message: format!("network {network_id} has no free address"),
                    })?
            }
        };
        let mut all = current;
        all.push(ip.to_string());
        self.change_alias_ips(server.id, network_id, &all)?;
        self.transport.info(
            "assigned Hetzner alias IP",
            &[
                ("alias_ip", &ip.to_string()),
                ("server_id", &server.id.to_string()),
                ("owner", owner_id),
            ],
        );
        Ok(answer(&ip.to_string()))
    }

    fn change_alias_ips(&self, server: u64, network: u64, alias_ips: &[String]) -> Result<()> {
        let req = Request::post(format!("/servers/{server}/actions/change_alias_ips"))
            .json(&ChangeAliasIps { network, alias_ips });
        self.call(req)?.map_err(ApiFailure::into_error)?;
        Ok(())
    }

    /// Network `id`.
    fn network(&self, id: &str) -> Result<Network> {
        let missing = || Error::NotFound(format!("the project has no network {id:?}"));
        let id = numeric_id("network", id)?;
        match self.call(Request::get(format!("/networks/{id}")))? {
            Ok(resp) => Ok(resp.json::<OneNetwork>()?.network),
            Err(f) if f.is_not_found() => Err(missing()),
            Err(f) => Err(f.into_error()),
        }
    }

    /// The servers attached to `network`, as they are now (one deleted
    /// meanwhile left out).
    fn members(&self, network: &Network) -> Result<Vec<Server>> {
        let mut out = Vec::new();
        for server in &network.servers {
            match self.call(Request::get(format!("/servers/{server}")))? {
                Ok(resp) => out.push(resp.json::<OneServer>()?.server),
                Err(f) if f.is_not_found() => {}
                Err(f) => return Err(f.into_error()),
            }
        }
        Ok(out)
    }

    /// A new IPv4 floating IP, assigned to `server` as it is made.
    fn new_floating_ip(&self, owner_id: &str, server: &Server) -> Result<StableAddress> {
        let owner = Labels::from([(tags::OWNER.to_string(), tags::id_tag(owner_id))]);
        let create = Request::post("/floating_ips").json(&CreateFloatingIp {
            kind: "ipv4",
            server: server.id,
            description: "stable address of a wasmprov node",
            labels: &owner,
        });
        let fip = self
            .call(create)?
            .map_err(ApiFailure::into_error)?
            .json::<OneFloatingIp>()?
            .floating_ip;
        self.transport.info(
            "created Hetzner floating IP",
            &[
                ("floating_ip", &fip.ip),
                ("server_id", &server.id.to_string()),
                ("owner", owner_id),
            ],
        );
        Ok(stable(&fip, Some(server.id)))
    }

    /// Takes floating IP `address` (an IP or its id) off this owner's
    /// server `provider_id`; it stays the project's.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a server that is gone or another owner's,
    /// an unknown address, or one not on that server; the API's errors.
    pub fn release_address(&self, owner_id: &str, provider_id: &str, address: &str) -> Result<()> {
        let server = self.owned_server(owner_id, provider_id)?;
        let address = address.trim();
        if let Some(net) = server
            .private_net
            .iter()
            .find(|n| n.alias_ips.iter().any(|a| a == address))
            && let Some(network) = net.network
        {
            let rest: Vec<String> = net
                .alias_ips
                .iter()
                .filter(|a| *a != address)
                .cloned()
                .collect();
            self.change_alias_ips(server.id, network, &rest)?;
            self.transport.info(
                "released Hetzner alias IP",
                &[
                    ("alias_ip", address),
                    ("server_id", &server.id.to_string()),
                    ("owner", owner_id),
                ],
            );
            return Ok(());
        }
        let fip = self.floating_ip(address)?;
        if fip.server != Some(server.id) {
            return Err(Error::NotFound(format!(
                "floating IP {} is not on server {}",
                fip.ip, server.id
            )));
        }
        let unassign = Request::post(format!("/floating_ips/{}/actions/unassign", fip.id));
        self.call(unassign)?.map_err(ApiFailure::into_error)?;
        self.transport.info(
            "unassigned Hetzner floating IP",
            &[
                ("floating_ip", &fip.ip),
                ("server_id", &server.id.to_string()),
                ("owner", owner_id),
            ],
        );
        Ok(())
    }

    /// The floating IP `address` names: a floating IP id, or its IP.
    fn floating_ip(&self, address: &str) -> Result<FloatingIp> {
        let missing = || Error::NotFound(format!("the project has no floating IP {address}"));
        // Not an IP: a floating IP id, spelt canonically (`unsupported`
        // otherwise, never `not_found`).
        let Ok(ip) = address.parse::<std::net::IpAddr>() else {
            let id = numeric_id("floating IP", address)?;
            return match self.call(Request::get(format!("/floating_ips/{id}")))? {
                Ok(resp) => Ok(resp.json::<OneFloatingIp>()?.floating_ip),
                Err(f) if f.is_not_found() => Err(missing()),
                Err(f) => Err(f.into_error()),
            };
        };
        let mut page = 1;
        while page <= MAX_PAGES {
            let req = Request::get("/floating_ips")
                .query("per_page", "50")
                .query("page", &page.to_string());
            let list: FloatingIpList = self.call(req)?.map_err(ApiFailure::into_error)?.json()?;
            if let Some(f) = list.floating_ips.into_iter().find(|f| same_ip(&f.ip, ip)) {
                return Ok(f);
            }
            match list
                .meta
                .and_then(|m| m.pagination)
                .and_then(|p| p.next_page)
            {
                Some(next) if u64::from(page) < next => {
                    page = u32::try_from(next).unwrap_or(MAX_PAGES + 1);
                }
                _ => return Err(missing()),
            }
        }
        Err(Error::Transport(format!(
            "Hetzner API: more than {MAX_PAGES} pages of floating IPs"
        )))
    }

    /// Makes this owner's server a target of load balancer `target.group`;
    /// no change when it is one already.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a port (a Hetzner load balancer sends
    /// traffic to its services' ports); [`Error::NotFound`] for a server
    /// that is gone or another owner's, or a load balancer that is not
    /// there; the API's errors.
    pub fn register_target(&self, owner_id: &str, target: &Target) -> Result<()> {
        if let Some(port) = target.port {
            return Err(Error::Unsupported(format!(
                "a Hetzner load balancer sends traffic to the destination ports of its services; a target takes no port ({port} asked)"
            )));
        }
        let server = self.owned_server(owner_id, &target.provider_id)?;
        let lb = self.load_balancer(&target.group)?;
        if lb.targets.iter().any(|t| t.server_id() == Some(server.id)) {
            return Ok(());
        }
        let add = Request::post(format!("/load_balancers/{}/actions/add_target", lb.id)).json(
            &ServerTarget {
                kind: "server",
                server: IdRef { id: server.id },
                use_private_ip: Some(false),
            },
        );
        match self.call(add)? {
            // Added by a concurrent call meanwhile: no change either.
            Ok(_) => {}
            Err(f) if f.code == "target_already_defined" => {}
            Err(f) => return Err(f.into_error()),
        }
        self.transport.info(
            "added Hetzner load balancer target",
            &[
                ("load_balancer", &lb.id.to_string()),
                ("server_id", &server.id.to_string()),
                ("owner", owner_id),
            ],
        );
        Ok(())
    }

    /// Takes this owner's server out of load balancer `target.group`.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a server that is gone, another owner's, or
    /// not a target of it, or a load balancer that is not there; the API's
    /// errors.
    pub fn deregister_target(&self, owner_id: &str, target: &Target) -> Result<()> {
        let server = self.owned_server(owner_id, &target.provider_id)?;
        let lb = self.load_balancer(&target.group)?;
        let not_in = || {
            Error::NotFound(format!(
                "server {} is not a target of load balancer {}",
                server.id, lb.id
            ))
        };
        if !lb.targets.iter().any(|t| t.server_id() == Some(server.id)) {
            return Err(not_in());
        }
        let remove = Request::post(format!("/load_balancers/{}/actions/remove_target", lb.id))
            .json(&ServerTarget {
                kind: "server",
                server: IdRef { id: server.id },
                use_private_ip: None,
            });
        match self.call(remove)? {
            Ok(_) => {}
            Err(f) if f.is_not_found() => return Err(not_in()),
            Err(f) => return Err(f.into_error()),
        }
        self.transport.info(
            "removed Hetzner load balancer target",
            &[
                ("load_balancer", &lb.id.to_string()),
                ("server_id", &server.id.to_string()),
                ("owner", owner_id),
            ],
        );
        Ok(())
    }

    /// The server targets of load balancer `group`, every owner's, with
    /// their health.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a load balancer that is not there; the
    /// API's errors.
    pub fn list_targets(&self, group: &str) -> Result<Vec<Target>> {
        let lb = self.load_balancer(group)?;
        Ok(lb
            .targets
            .iter()
            .filter_map(|t| {
                Some(Target {
                    group: group.to_string(),
                    provider_id: t.server_id()?.to_string(),
                    port: None,
                    health: t.health(),
                })
            })
            .collect())
    }

    fn load_balancer(&self, group: &str) -> Result<LoadBalancer> {
        let missing = || Error::NotFound(format!("the project has no load balancer {group:?}"));
        let id = numeric_id("load balancer", group)?;
        match self.call(Request::get(format!("/load_balancers/{id}")))? {
            Ok(resp) => Ok(resp.json::<OneLoadBalancer>()?.load_balancer),
            Err(f) if f.is_not_found() => Err(missing()),
            Err(f) => Err(f.into_error()),
        }
    }

    /// The free addresses of network `subnet` (its id): every address of
    /// its cloud subnets but [`RESERVED_PER_SUBNET`] each, less the ones
    /// its servers (their address and alias IPs) and load balancers hold.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a network that is not there; the API's
    /// errors.
    pub fn subnet_capacity(&self, subnet: &str) -> Result<SubnetCapacity> {
        let network = self.network(subnet)?;
        let ranges = cloud_ranges(&network);
        let total: u64 = ranges
            .iter()
            .map(|(_, size)| u64::from(*size).saturating_sub(RESERVED_PER_SUBNET))
            .sum();
        let inside = |ip: &str| {
            ip.parse::<std::net::Ipv4Addr>().is_ok_and(|ip| {
                let ip = u32::from(ip);
                ranges
                    .iter()
                    .any(|(start, size)| ip >= *start && ip - start < *size)
            })
        };
        let mut used = network.load_balancers.len() as u64;
        for server in self.members(&network)? {
            for net in server
                .private_net
                .iter()
                .filter(|n| n.network == Some(network.id))
            {
                used += net
                    .ip
                    .iter()
                    .chain(&net.alias_ips)
                    .filter(|ip| inside(ip))
                    .count() as u64;
            }
        }
        Ok(SubnetCapacity {
            subnet: subnet.to_string(),
            available_addresses: total.saturating_sub(used),
            total_addresses: Some(total),
            zone: one_zone(&network.subnets),
        })
    }
}

/// `GET /floating_ips`.
#[derive(Clone, Debug, serde::Deserialize)]
struct FloatingIpList {
    floating_ips: Vec<FloatingIp>,
    #[serde(default)]
    meta: Option<crate::api::Meta>,
}

/// A floating IP as the contract's stable address.
fn stable(fip: &FloatingIp, server: Option<u64>) -> StableAddress {
    StableAddress {
        address: fip.ip.clone(),
        kind: AddressKind::Public,
        resource_id: Some(fip.id.to_string()),
        provider_id: server.map(|s| s.to_string()),
    }
}

/// Whether a floating IP's `ip` (an address, or an IPv6 /64) is `want`.
fn same_ip(ip: &str, want: std::net::IpAddr) -> bool {
    let bare = ip.split('/').next().unwrap_or(ip);
    bare.parse::<std::net::IpAddr>().is_ok_and(|a| a == want)
}

/// An IPv4 CIDR range as (first address, number of addresses).
fn ipv4_range(cidr: &str) -> Option<(u32, u32)> {
    let (addr, prefix) = cidr.split_once('/')?;
    let addr: std::net::Ipv4Addr = addr.parse().ok()?;
    let prefix: u32 = prefix.parse().ok().filter(|p| *p <= 32)?;
    let size = 1u64 << (32 - prefix);
    let mask = u32::MAX.checked_shl(32 - prefix).unwrap_or(0);
    Some((
        u32::from(addr) & mask,
        u32::try_from(size).unwrap_or(u32::MAX),
    ))
}

/// The ranges of a network's subnets servers are in (not `vswitch`).
fn cloud_ranges(network: &Network) -> Vec<(u32, u32)> {
    network
        .subnets
        .iter()
        .filter(|s| s.kind != "vswitch")
        .filter_map(|s| ipv4_range(&s.ip_range))
        .collect()
}

/// Whether a server may have `ip` in range `(start, size)`: inside it,
/// and not its network address, first host (the gateway) or broadcast.
fn usable((start, size): (u32, u32), ip: std::net::Ipv4Addr) -> bool {
    let ip = u32::from(ip);
    ip >= start && ip - start < size && ip - start > 1 && ip - start < size - 1
}

/// The network zone of the subnets, when they share one.
fn one_zone(subnets: &[NetworkSubnet]) -> Option<String> {
    let mut zones = subnets.iter().filter_map(|s| s.network_zone.clone());
    let first = zones.next()?;
    zones.all(|z| z == first).then_some(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_ranges() {
        assert_eq!(ipv4_range("10.0.1.0/24"), Some((0x0a00_0100, 256)));
        assert_eq!(ipv4_range("10.0.1.7/29"), Some((0x0a00_0100, 8)));
        assert_eq!(ipv4_range("0.0.0.0/0"), Some((0, u32::MAX)));
        assert_eq!(ipv4_range("10.0.0.0/33"), None);
        assert_eq!(ipv4_range("fd00::/64"), None);
        assert_eq!(ipv4_range("10.0.0.0"), None);
    }

    #[test]
    fn usable_addresses_leave_out_network_gateway_and_broadcast() {
        let r = ipv4_range("10.0.1.0/29").unwrap();
        let ok: Vec<u8> = (0..=8)
            .filter(|i| usable(r, std::net::Ipv4Addr::new(10, 0, 1, *i)))
            .collect();
        assert_eq!(ok, [2, 3, 4, 5, 6]);
        assert!(!usable(r, std::net::Ipv4Addr::new(10, 0, 2, 3)));
    }

    #[test]
    fn addresses_compare_as_ips() {
        let want: std::net::IpAddr = "203.0.113.7".parse().unwrap();
        assert!(same_ip("203.0.113.7", want));
        assert!(!same_ip("203.0.113.70", want));
        let v6: std::net::IpAddr = "2001:db8::".parse().unwrap();
        assert!(same_ip("2001:db8::/64", v6));
    }

    #[test]
    fn the_zone_is_named_only_when_shared() {
        let s = |z: Option<&str>| NetworkSubnet {
            kind: "cloud".into(),
            ip_range: "10.0.0.0/24".into(),
            network_zone: z.map(str::to_string),
        };
        assert_eq!(
            one_zone(&[s(Some("eu-central")), s(Some("eu-central"))]).as_deref(),
            Some("eu-central")
        );
        assert_eq!(one_zone(&[s(Some("eu-central")), s(Some("us-east"))]), None);
        assert_eq!(one_zone(&[]), None);
    }
}
