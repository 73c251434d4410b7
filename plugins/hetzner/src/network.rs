//! Contract 0.3's networking on Hetzner Cloud: floating IPs as stable
//! public addresses, load balancer server targets as target groups, and
//! the free addresses of a private network's subnets.
//!
//! Every call that names a server first reads it and checks this owner's
//! label ([`Client::owned_server`]): another owner's server is not-found,
//! as in `get`. Floating IPs and load balancers are the project's, shared
//! by every owner; only the server decides.

use wasmprov_guest::http::Request;
use wasmprov_guest::tags;
use wasmprov_guest::{
    AddressKind, AddressRequest, Error, Labels, Result, StableAddress, SubnetCapacity, Target,
};

use crate::api::{
    ApiFailure, AssignFloatingIp, CreateFloatingIp, FloatingIp, IdRef, LoadBalancer, NetworkSubnet,
    OneFloatingIp, OneLoadBalancer, OneNetwork, OneServer, Server, ServerTarget,
};
use crate::client::{Client, Transport};

/// Addresses of a subnet no server gets: its network address, its first
/// host (the gateway) and its broadcast address.
pub const RESERVED_PER_SUBNET: u64 = 3;

/// Most pages of floating IPs read to find one by its address.
const MAX_PAGES: u32 = 50;

impl<T: Transport> Client<'_, T> {
    /// Puts a floating IP on this owner's server `provider_id`: the one
    /// `request.address` names (an IP or a floating IP id), moved from any
    /// other server; without one, the server's first floating IP, or a
    /// new one labelled with the owner.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a private (alias IP) address;
    /// [`Error::NotFound`] for a server that is gone or another owner's,
    /// or an address the project does not have; the API's errors.
    pub fn assign_address(
        &self,
        owner_id: &str,
        provider_id: &str,
        request: &AddressRequest,
    ) -> Result<StableAddress> {
        if request.kind == AddressKind::Private {
            return Err(Error::Unsupported(
                "this plugin moves public addresses (Hetzner floating IPs) only; alias IPs in a private network are not supported".into(),
            ));
        }
        let server = self.owned_server(owner_id, provider_id)?;
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
        let address = address.trim();
        let missing = || Error::NotFound(format!("the project has no floating IP {address}"));
        if let Ok(id) = address.parse::<u64>() {
            return match self.call(Request::get(format!("/floating_ips/{id}")))? {
                Ok(resp) => Ok(resp.json::<OneFloatingIp>()?.floating_ip),
                Err(f) if f.is_not_found() => Err(missing()),
                Err(f) => Err(f.into_error()),
            };
        }
        let ip: std::net::IpAddr = address.parse().map_err(|_| {
            Error::NotFound(format!(
                "{address:?} is neither an IP address nor a floating IP id"
            ))
        })?;
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
        let id = group.trim().parse::<u64>().map_err(|_| missing())?;
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
        let missing = || Error::NotFound(format!("the project has no network {subnet:?}"));
        let id = subnet.trim().parse::<u64>().map_err(|_| missing())?;
        let network = match self.call(Request::get(format!("/networks/{id}")))? {
            Ok(resp) => resp.json::<OneNetwork>()?.network,
            Err(f) if f.is_not_found() => return Err(missing()),
            Err(f) => return Err(f.into_error()),
        };
        let ranges: Vec<(u32, u32)> = network
            .subnets
            .iter()
            .filter(|s| s.kind != "vswitch")
            .filter_map(|s| ipv4_range(&s.ip_range))
            .collect();
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
        for server in &network.servers {
            let server = match self.call(Request::get(format!("/servers/{server}")))? {
                Ok(resp) => resp.json::<OneServer>()?.server,
                // Deleted meanwhile: it holds nothing.
                Err(f) if f.is_not_found() => continue,
                Err(f) => return Err(f.into_error()),
            };
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
