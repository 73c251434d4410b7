//! What the fake keeps of Hetzner's networking: private networks with
//! their subnets and the servers attached to them, floating IPs and where
//! they are assigned, and load balancers with their server targets.
//!
//! The request handling is in `api.rs`; this module holds the state and
//! renders it the way the API reference shows it. Addresses in a subnet:
//! the network address, the first host (the subnet's gateway) and the
//! broadcast address are never handed out; a server attached to a network
//! gets the lowest free address of its network's first subnet with room.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde_json::{Value, json};

use super::catalog::Location;

/// A private network.
#[derive(Debug)]
pub(crate) struct Network {
    pub id: u64,
    pub name: String,
    pub ip_range: Ipv4Net,
    pub subnets: Vec<Subnet>,
    pub labels: BTreeMap<String, String>,
    pub created: String,
}

/// One subnet of a network (type `cloud`).
#[derive(Debug)]
pub(crate) struct Subnet {
    pub ip_range: Ipv4Net,
    pub network_zone: &'static str,
}

impl Subnet {
    /// The subnet's gateway: its first host.
    fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.ip_range.network()) + 1)
    }

    /// The addresses servers may get, lowest first.
    pub(crate) fn usable(&self) -> impl Iterator<Item = Ipv4Addr> + '_ {
        let gateway = self.gateway();
        self.ip_range
            .hosts()
            .filter(move |ip| *ip != gateway && *ip != self.ip_range.broadcast())
    }
}

/// A server's attachment to a network.
#[derive(Clone, Debug)]
pub(crate) struct Attachment {
    pub network: u64,
    pub ip: Ipv4Addr,
    pub alias_ips: Vec<Ipv4Addr>,
}

/// A floating IP of the project.
#[derive(Debug)]
pub(crate) struct FloatingIp {
    pub id: u64,
    pub name: String,
    pub description: Option<String>,
    pub ip: Ipv4Addr,
    pub home_location: &'static Location,
    pub server: Option<u64>,
    pub labels: BTreeMap<String, String>,
    pub created: String,
}

/// A load balancer with server targets.
#[derive(Debug)]
pub(crate) struct LoadBalancer {
    pub id: u64,
    pub name: String,
    pub location: &'static Location,
    pub ipv4: Ipv4Addr,
    /// Server ids, in the order they were added.
    pub targets: Vec<u64>,
    pub labels: BTreeMap<String, String>,
    pub created: String,
}

/// The port every load balancer's one service listens on.
const SERVICE_PORT: u16 = 80;

/// All networking state of one fake.
#[derive(Debug, Default)]
pub(crate) struct Networking {
    pub networks: BTreeMap<u64, Network>,
    pub floating_ips: BTreeMap<u64, FloatingIp>,
    pub load_balancers: BTreeMap<u64, LoadBalancer>,
    /// Server id → its network attachments.
    pub attachments: BTreeMap<u64, Vec<Attachment>>,
}

impl Networking {
    /// Whether `ip` is taken in any network (a server's address or alias).
    fn taken(&self, ip: Ipv4Addr) -> bool {
        self.attachments
            .values()
            .flatten()
            .any(|a| a.ip == ip || a.alias_ips.contains(&ip))
    }

    /// The addresses of `subnet` still free.
    pub(crate) fn free_in(&self, subnet: &Subnet) -> Vec<Ipv4Addr> {
        subnet.usable().filter(|ip| !self.taken(*ip)).collect()
    }

    /// Attaches `server` to `network`, at the lowest free address of its
    /// first subnet with room; `None` when no subnet has room.
    pub(crate) fn attach(&mut self, server: u64, network: u64) -> Option<Ipv4Addr> {
        let net = self.networks.get(&network)?;
        let ip = net
            .subnets
            .iter()
            .find_map(|s| self.free_in(s).into_iter().next())?;
        self.attachments
            .entry(server)
            .or_default()
            .push(Attachment {
                network,
                ip,
                alias_ips: Vec::new(),
            });
        Some(ip)
    }

    /// Forgets everything that pointed at `server` (it was deleted): its
    /// network addresses are free again, its floating IPs unassigned, and
    /// it is no load balancer's target any more.
    pub(crate) fn server_deleted(&mut self, server: u64) {
        self.attachments.remove(&server);
        for fip in self.floating_ips.values_mut() {
            if fip.server == Some(server) {
                fip.server = None;
            }
        }
        for lb in self.load_balancers.values_mut() {
            lb.targets.retain(|t| *t != server);
        }
    }

    /// A server's `private_net`.
    pub(crate) fn private_net_json(&self, server: u64) -> Value {
        let list: Vec<Value> = self
            .attachments
            .get(&server)
            .into_iter()
            .flatten()
            .map(|a| {
                json!({
                    "network": a.network,
                    "ip": a.ip.to_string(),
                    "alias_ips": a.alias_ips.iter().map(ToString::to_string).collect::<Vec<_>>(),
                    "mac_address": format!("86:00:00:{:02x}:{:02x}:{:02x}", (server >> 16) & 0xff, (server >> 8) & 0xff, server & 0xff),
                })
            })
            .collect();
        Value::Array(list)
    }

    /// The ids of the floating IPs assigned to `server`.
    pub(crate) fn floating_ips_of(&self, server: u64) -> Vec<u64> {
        self.floating_ips
            .values()
            .filter(|f| f.server == Some(server))
            .map(|f| f.id)
            .collect()
    }

    /// The ids of the load balancers `server` is a target of.
    pub(crate) fn load_balancers_of(&self, server: u64) -> Vec<u64> {
        self.load_balancers
            .values()
            .filter(|lb| lb.targets.contains(&server))
            .map(|lb| lb.id)
            .collect()
    }

    /// `GET /networks/{id}`'s `network`.
    pub(crate) fn network_json(&self, net: &Network) -> Value {
        let servers: Vec<u64> = self
            .attachments
            .iter()
            .filter(|(_, atts)| atts.iter().any(|a| a.network == net.id))
            .map(|(id, _)| *id)
            .collect();
        json!({
            "id": net.id,
            "name": net.name,
            "ip_range": net.ip_range.to_string(),
            "subnets": net.subnets.iter().map(|s| json!({
                "type": "cloud",
                "ip_range": s.ip_range.to_string(),
                "network_zone": s.network_zone,
                "gateway": s.gateway().to_string(),
                "vswitch_id": null,
            })).collect::<Vec<_>>(),
            "routes": [],
            "servers": servers,
            "load_balancers": [],
            "protection": { "delete": false },
            "labels": net.labels,
            "created": net.created,
            "expose_routes_to_vswitch": false,
        })
    }
}

impl FloatingIp {
    /// `GET /floating_ips/{id}`'s `floating_ip`.
    pub(crate) fn to_json(&self) -> Value {
        json!({
            "id": self.id,
            "name": self.name,
            "description": self.description,
            "ip": self.ip.to_string(),
            "type": "ipv4",
            "server": self.server,
            "dns_ptr": [{ "ip": self.ip.to_string(), "dns_ptr": format!("static.{}.clients.your-server.de", self.ip) }],
            "home_location": self.home_location.to_json(),
            "blocked": false,
            "protection": { "delete": false },
            "labels": self.labels,
            "created": self.created,
        })
    }
}

impl LoadBalancer {
    /// `GET /load_balancers/{id}`'s `load_balancer`. A target's health is
    /// `healthy` once its server is `running`, `unknown` before.
    pub(crate) fn to_json(&self, running: &dyn Fn(u64) -> bool) -> Value {
        let targets: Vec<Value> = self
            .targets
            .iter()
            .map(|id| {
                json!({
                    "type": "server",
                    "server": { "id": id },
                    "health_status": [{
                        "listen_port": SERVICE_PORT,
                        "status": if running(*id) { "healthy" } else { "unknown" },
                    }],
                    "use_private_ip": false,
                })
            })
            .collect();
        json!({
            "id": self.id,
            "name": self.name,
            "public_net": {
                "enabled": true,
                "ipv4": { "ip": self.ipv4.to_string(), "dns_ptr": null },
                "ipv6": { "ip": null, "dns_ptr": null },
            },
            "private_net": [],
            "location": self.location.to_json(),
            "load_balancer_type": {
                "id": 1, "name": "lb11", "description": "LB11",
                "max_connections": 10000, "max_services": 5, "max_targets": 25,
                "max_assigned_certificates": 10, "deprecated": null, "prices": [],
            },
            "protection": { "delete": false },
            "labels": self.labels,
            "targets": targets,
            "services": [{
                "protocol": "tcp",
                "listen_port": SERVICE_PORT,
                "destination_port": SERVICE_PORT,
                "proxyprotocol": false,
                "health_check": {
                    "protocol": "tcp", "port": SERVICE_PORT, "interval": 15,
                    "timeout": 10, "retries": 3, "http": null,
                },
                "http": null,
            }],
            "algorithm": { "type": "round_robin" },
            "created": self.created,
            "outgoing_traffic": 0,
            "ingoing_traffic": 0,
            "included_traffic": 21_990_232_555_520_u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subnet_keeps_its_network_gateway_and_broadcast_addresses() {
        let s = Subnet {
            ip_range: "10.0.1.0/29".parse().unwrap(),
            network_zone: "eu-central",
        };
        let usable: Vec<String> = s.usable().map(|ip| ip.to_string()).collect();
        assert_eq!(
            usable,
            ["10.0.1.2", "10.0.1.3", "10.0.1.4", "10.0.1.5", "10.0.1.6"]
        );
    }

    #[test]
    fn attaching_takes_the_lowest_free_address_and_deleting_frees_it() {
        let mut n = Networking::default();
        n.networks.insert(
            1,
            Network {
                id: 1,
                name: "n".into(),
                ip_range: "10.0.0.0/16".parse().unwrap(),
                subnets: vec![Subnet {
                    ip_range: "10.0.1.0/30".parse().unwrap(),
                    network_zone: "eu-central",
                }],
                labels: BTreeMap::new(),
                created: String::new(),
            },
        );
        // A /30 has two hosts: the gateway and one address for a server.
        assert_eq!(n.attach(7, 1), Some(Ipv4Addr::new(10, 0, 1, 2)));
        assert_eq!(n.attach(8, 1), None);
        assert_eq!(n.attach(8, 2), None);
        n.server_deleted(7);
        assert_eq!(n.attach(8, 1), Some(Ipv4Addr::new(10, 0, 1, 2)));
    }
}
