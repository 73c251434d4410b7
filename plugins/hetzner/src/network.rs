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
//!
//! Hetzner's assign action moves a floating IP from whatever server has
//! it, unconditionally, and its label update has no precondition either:
//! two owners moving one floating IP at once cannot be made to exclude
//! each other in the cloud. A move is therefore claimed first (labels
//! [`CLAIM_OWNER`], [`CLAIM_SERVER`], [`CLAIM_AT`] written, read back, a
//! live claim of another caller refused) and checked after the action has
//! finished (on this server, claim still ours, else `conflict`); what is
//! left open is written in CONTRACT-0.3.

use wasmprov_guest::http::Request;
use wasmprov_guest::ids::numeric_id;
use wasmprov_guest::tags;
use wasmprov_guest::{
    AddressKind, AddressRequest, Error, Labels, Result, StableAddress, SubnetCapacity, Target,
};

use crate::api::{
    Action, ApiFailure, AssignFloatingIp, ChangeAliasIps, CreateFloatingIp, FloatingIp, IdRef,
    LoadBalancer, Network, NetworkSubnet, OneAction, OneFloatingIp, OneLoadBalancer, OneNetwork,
    OneServer, Server, ServerTarget, UpdateLabels,
};
use crate::client::{Client, Transport};

/// Addresses of a subnet no server gets: its network address, its first
/// host (the gateway) and its broadcast address.
pub const RESERVED_PER_SUBNET: u64 = 3;

/// Most pages of floating IPs read to find one by its address.
const MAX_PAGES: u32 = 50;

/// Label of a floating IP's claim: the owner moving it (its owner tag).
pub const CLAIM_OWNER: &str = "wasmprov-claim-owner";
/// Label of a floating IP's claim: the server it is being moved to.
pub const CLAIM_SERVER: &str = "wasmprov-claim-server";
/// Label of a floating IP's claim: when it was made (Unix seconds, the
/// claiming host's clock).
pub const CLAIM_AT: &str = "wasmprov-claim-at";
/// How long a claim holds other callers off: well over the time a move
/// takes, so that one left by a caller that stopped half-way (a crash, a
/// lost connection) frees the floating IP two minutes later.
pub const CLAIM_SECS: u64 = 120;

/// Reads of a running action before the move is given up as unfinished.
const ACTION_READS: u32 = 20;
/// Pause between two reads of a running action.
const ACTION_PAUSE_MS: u64 = 500;

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
        let asked = request.address.as_deref();
        let fip = match asked {
            Some(address) => self.floating_ip(address)?,
            None => match held.first() {
                Some(id) => self.floating_ip(&id.to_string())?,
                None => return self.new_floating_ip(owner_id, &server),
            },
        };
        if fip.server != Some(server.id) {
            self.may_take(owner_id, &fip)?;
            let fip = self.claim(owner_id, server.id, &fip)?;
            let assign = Request::post(format!("/floating_ips/{}/actions/assign", fip.id))
                .json(&AssignFloatingIp { server: server.id });
            let action = self
                .call(assign)?
                .map_err(ApiFailure::into_error)?
                .json::<OneAction>()?
                .action;
            self.finished(action, &fip.ip)?;
            // Hetzner's assign is unconditional: a caller that moved the
            // floating IP meanwhile (or claimed it, and is about to) wins,
            // and this one says so instead of ok.
            let now = self.floating_ip(&fip.id.to_string())?;
            let mine = Claim::new(owner_id, server.id, 0);
            if now.server != Some(server.id) || !Claim::on(&now).is_some_and(|c| c.same(&mine)) {
                let place = now
                    .server
                    .map_or_else(|| "no server".to_string(), |s| format!("server {s}"));
                return Err(Error::Conflict(format!(
                    "floating IP {} was moved or claimed by another caller while it was assigned to server {}: it is on {place} now (ask again to see where it stays)",
                    fip.ip, server.id
                )));
            }
            self.transport.info(
                "assigned Hetzner floating IP",
                &[
                    ("floating_ip", &fip.ip),
                    ("server_id", &server.id.to_string()),
                    ("owner", owner_id),
                ],
            );
            return Ok(stable(&now, Some(server.id), asked));
        }
        Ok(stable(&fip, Some(server.id), asked))
    }

    /// Claims `fip` for this owner's server `server` before it is moved:
    /// refused with `conflict` while another caller's claim is live; the
    /// claim labels written next to the floating IP's other labels, and
    /// read back (another caller's written meanwhile wins: `conflict`).
    /// Answers the floating IP as read back, checked again with
    /// `may_take` (it may have moved meanwhile).
    fn claim(&self, owner_id: &str, server: u64, fip: &FloatingIp) -> Result<FloatingIp> {
        let now = self.transport.now_unix();
        let mine = Claim::new(owner_id, server, now);
        let busy = |c: &Claim| {
            Error::Conflict(format!(
                "floating IP {} is being moved to server {} by another caller (claimed at {}, Unix time): ask again after it is done",
                fip.ip, c.server, c.at
            ))
        };
        if let Some(other) = Claim::on(fip).filter(|c| c.live(now) && !c.same(&mine)) {
            return Err(busy(&other));
        }
        // A live claim of ours for this server, read just now, is the claim
        // an earlier attempt of this call wrote (its answer lost): moving
        // on from it rather than writing it again lets a retried move make
        // progress when requests keep failing.
        if Claim::on(fip).is_some_and(|c| c.live(now) && c.same(&mine)) {
            return Ok(fip.clone());
        }
        let mut labels = fip.labels.clone().unwrap_or_default();
        labels.extend(mine.labels());
        let put = Request::put(format!("/floating_ips/{}", fip.id))
            .json(&UpdateLabels { labels: &labels });
        self.call(put)?.map_err(ApiFailure::into_error)?;
        let back = self.floating_ip(&fip.id.to_string())?;
        match Claim::on(&back) {
            Some(c) if c.same(&mine) => {}
            Some(other) => return Err(busy(&other)),
            None => {
                return Err(Error::Conflict(format!(
                    "the labels of floating IP {} were rewritten by another caller while this one claimed it: ask again",
                    fip.ip
                )));
            }
        }
        self.may_take(owner_id, &back)?;
        Ok(back)
    }

    /// Waits until `action` on floating IP `ip` is no longer running.
    ///
    /// # Errors
    /// The action's own error; [`Error::Transport`] when it still runs
    /// after [`ACTION_READS`] reads (asking again finds the floating IP
    /// where it went).
    fn finished(&self, mut action: Action, ip: &str) -> Result<()> {
        for read in 0..=ACTION_READS {
            match action.status.as_str() {
                "running" => {}
                "error" => {
                    let e = action.error.unwrap_or_else(|| crate::api::ActionError {
                        code: String::new(),
                        message: "no reason given".into(),
                    });
                    return Err(Error::Other(format!(
                        "Hetzner could not assign floating IP {ip}: {} ({})",
                        e.message, e.code
                    )));
                }
                _ => return Ok(()),
            }
            if read == ACTION_READS {
                break;
            }
            if read > 0 {
                self.transport.pause(ACTION_PAUSE_MS);
            }
            action = self
                .call(Request::get(format!("/actions/{}", action.id)))?
                .map_err(ApiFailure::into_error)?
                .json::<OneAction>()?
                .action;
        }
        Err(Error::Transport(format!(
            "Hetzner's assignment of floating IP {ip} (action {}) was still running after {ACTION_READS} reads",
            action.id
        )))
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
        Ok(stable(&fip, Some(server.id), None))
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
        // This owner's claim goes with it, so that another owner may take
        // the floating IP at once rather than after the claim's time.
        if Claim::on(&fip).is_some_and(|c| c.owner == tags::id_tag(owner_id))
            && let Some(labels) = &fip.labels
        {
            let rest: Labels = labels
                .iter()
                .filter(|(k, _)| ![CLAIM_OWNER, CLAIM_SERVER, CLAIM_AT].contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let put = Request::put(format!("/floating_ips/{}", fip.id))
                .json(&UpdateLabels { labels: &rest });
            self.call(put)?.map_err(ApiFailure::into_error)?;
        }
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

/// A floating IP as the contract's stable address, for a caller that
/// asked for `asked` (an IP or the floating IP's id), if anything.
fn stable(fip: &FloatingIp, server: Option<u64>, asked: Option<&str>) -> StableAddress {
    StableAddress {
        address: host_address(&fip.ip, asked),
        kind: AddressKind::Public,
        resource_id: Some(fip.id.to_string()),
        provider_id: server.map(|s| s.to_string()),
    }
}

/// The address a floating IP's `ip` is answered as. An IPv4 floating IP
/// is its address. An IPv6 one is a /64 network (`2001:db8:1::/64`)
/// Hetzner routes whole to the server, which is not an address: the
/// answer is the address asked for when it is in that network (the
/// contract answers the IP asked), else the network's `::1`, the address
/// a server conventionally configures for it.
fn host_address(ip: &str, asked: Option<&str>) -> String {
    let Some((net, _)) = prefix(ip) else {
        return ip.to_string();
    };
    let std::net::IpAddr::V6(net) = net else {
        return ip.to_string();
    };
    if let Some(a) = asked
        .and_then(|a| a.trim().parse::<std::net::IpAddr>().ok())
        .filter(|a| same_ip(ip, *a))
    {
        return a.to_string();
    }
    std::net::Ipv6Addr::from(u128::from(net) | 1).to_string()
}

/// A floating IP's `ip` as a network and prefix length: a bare address is
/// its own network (/32, /128); `None` when it does not parse.
fn prefix(ip: &str) -> Option<(std::net::IpAddr, u8)> {
    let (addr, len) = match ip.split_once('/') {
        Some((a, l)) => (a, Some(l.parse::<u8>().ok()?)),
        None => (ip, None),
    };
    let addr: std::net::IpAddr = addr.parse().ok()?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = len.unwrap_or(max);
    (len <= max).then_some((addr, len))
}

/// Whether a floating IP's `ip` (an address, or an IPv6 /64) is `want`:
/// the address itself, or for a network any address in it (each is
/// routed to the server, `::1` the one answered).
fn same_ip(ip: &str, want: std::net::IpAddr) -> bool {
    let Some((net, len)) = prefix(ip) else {
        return false;
    };
    match (net, want) {
        (std::net::IpAddr::V4(n), std::net::IpAddr::V4(w)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            u32::from(n) & mask == u32::from(w) & mask
        }
        (std::net::IpAddr::V6(n), std::net::IpAddr::V6(w)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            u128::from(n) & mask == u128::from(w) & mask
        }
        _ => false,
    }
}

/// A floating IP's claim: the owner (its tag) and the server it is being
/// moved to, and when (Unix seconds).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Claim {
    owner: String,
    server: u64,
    at: u64,
}

impl Claim {
    fn new(owner_id: &str, server: u64, at: u64) -> Self {
        Self {
            owner: tags::id_tag(owner_id),
            server,
            at,
        }
    }

    /// The claim on `fip`, when its labels carry a whole one.
    fn on(fip: &FloatingIp) -> Option<Self> {
        let labels = fip.labels.as_ref()?;
        Some(Self {
            owner: labels.get(CLAIM_OWNER)?.clone(),
            server: labels.get(CLAIM_SERVER)?.parse().ok()?,
            at: labels.get(CLAIM_AT)?.parse().ok()?,
        })
    }

    /// Whether it was made less than [`CLAIM_SECS`] ago (a time further
    /// ahead than that is another host's broken clock: not live).
    fn live(&self, now: u64) -> bool {
        now.saturating_sub(self.at) < CLAIM_SECS && self.at.saturating_sub(now) < CLAIM_SECS
    }

    /// Whether it is for the same owner and server as `other`.
    fn same(&self, other: &Self) -> bool {
        self.owner == other.owner && self.server == other.server
    }

    /// Its labels.
    fn labels(&self) -> [(String, String); 3] {
        [
            (CLAIM_OWNER.to_string(), self.owner.clone()),
            (CLAIM_SERVER.to_string(), self.server.to_string()),
            (CLAIM_AT.to_string(), self.at.to_string()),
        ]
    }
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
        let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
        assert!(same_ip("203.0.113.7", ip("203.0.113.7")));
        assert!(!same_ip("203.0.113.70", ip("203.0.113.7")));
        assert!(same_ip("2001:db8::/64", ip("2001:db8::")));
        // Every address of an IPv6 floating IP's /64 is routed to the
        // server: each names it.
        assert!(same_ip("2001:db8::/64", ip("2001:db8::1")));
        assert!(same_ip("2001:db8::/64", ip("2001:db8::ffff:1")));
        assert!(!same_ip("2001:db8::/64", ip("2001:db8:0:1::1")));
        assert!(!same_ip("2001:db8::/64", ip("203.0.113.7")));
        assert!(!same_ip("not an ip", ip("203.0.113.7")));
    }

    #[test]
    fn an_ipv6_floating_ip_is_answered_as_an_address_of_its_network() {
        assert_eq!(host_address("203.0.113.7", None), "203.0.113.7");
        assert_eq!(host_address("2001:db8:1::/64", None), "2001:db8:1::1");
        assert_eq!(host_address("2001:db8:1::/64", Some("17")), "2001:db8:1::1");
        assert_eq!(
            host_address("2001:db8:1::/64", Some("2001:DB8:1::5")),
            "2001:db8:1::5"
        );
        // An address outside the network is not answered.
        assert_eq!(
            host_address("2001:db8:1::/64", Some("2001:db8:2::5")),
            "2001:db8:1::1"
        );
    }

    #[test]
    fn claims_are_live_for_their_time_only() {
        let c = Claim::new("host-a", 7, 1000);
        assert!(c.live(1000) && c.live(1000 + CLAIM_SECS - 1));
        assert!(!c.live(1000 + CLAIM_SECS));
        assert!(c.live(1000 - CLAIM_SECS + 1) && !c.live(1000 - CLAIM_SECS));
        assert!(c.same(&Claim::new("host-a", 7, 5)));
        assert!(!c.same(&Claim::new("host-a", 8, 1000)));
        assert!(!c.same(&Claim::new("host-b", 7, 1000)));
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

    mod scripted {
        use serde_json::{Value, json};
        use wasmprov_guest::tags::{OWNER, id_tag};
        use wasmprov_guest::{AddressKind, AddressRequest, Error};

        use crate::client::Client;
        use crate::client::tests::{Method, Script, owned, resp, server};
        use crate::network::{CLAIM_AT, CLAIM_OWNER, CLAIM_SECS, CLAIM_SERVER};
        use crate::settings::Settings;

        /// The scripted clock (`Script::now_unix`).
        const NOW: u64 = 1_700_000_000;

        fn our_server(floating_ips: &[u64]) -> Value {
            let mut s = server(7, "running", owned("host-a", "r"));
            s["public_net"]["floating_ips"] = json!(floating_ips);
            json!({ "server": s })
        }

        fn claim(owner: &str, server: u64, at: u64) -> Value {
            json!({CLAIM_OWNER: id_tag(owner), CLAIM_SERVER: server.to_string(), CLAIM_AT: at.to_string()})
        }

        fn fip(ip: &str, on: Option<u64>, labels: Value) -> Value {
            json!({"floating_ip": {"id": 40, "ip": ip, "server": on, "labels": labels}})
        }

        fn action(status: &str) -> Value {
            json!({"action": {"id": 5, "command": "assign_floating_ip", "status": status}})
        }

        fn public(address: &str) -> AddressRequest {
            AddressRequest {
                kind: AddressKind::Public,
                address: Some(address.into()),
            }
        }

        /// A move of floating IP 40 (on no server) to server 7 of
        /// host-a, up to the read after the assign action, which answers
        /// `after`.
        fn moved(after: Value) -> Script {
            Script::new(vec![
                resp(200, our_server(&[])),
                resp(200, fip("203.0.113.40", None, json!({"team": "x"}))),
                resp(200, fip("203.0.113.40", None, json!({}))),
                resp(200, fip("203.0.113.40", None, claim("host-a", 7, NOW))),
                resp(201, action("running")),
                resp(200, action("running")),
                resp(200, action("success")),
                resp(200, after),
            ])
        }

        #[test]
        fn a_move_another_caller_overtook_is_a_conflict() {
            let settings = Settings::default();
            let script = moved(fip("203.0.113.40", Some(8), claim("host-b", 8, NOW)));
            let client = Client::new(&settings, &script);
            let e = client
                .assign_address("host-a", "7", &public("40"))
                .unwrap_err();
            assert!(
                matches!(&e, Error::Conflict(m) if m.contains("another caller") && m.contains("server 8")),
                "{e:?}"
            );
            assert!(script.logs.borrow().is_empty());

            // On this server still, but claimed by another caller since:
            // it is about to move it, so not ok either.
            let script = moved(fip("203.0.113.40", Some(7), claim("host-b", 8, NOW)));
            let client = Client::new(&settings, &script);
            assert!(matches!(
                client.assign_address("host-a", "7", &public("40")),
                Err(Error::Conflict(_))
            ));
        }

        #[test]
        fn a_move_still_ours_after_the_action_is_ok() {
            let settings = Settings::default();
            let script = moved(fip("203.0.113.40", Some(7), claim("host-a", 7, NOW)));
            let client = Client::new(&settings, &script);
            let a = client.assign_address("host-a", "7", &public("40")).unwrap();
            assert_eq!(a.address, "203.0.113.40");
            assert_eq!(a.provider_id.as_deref(), Some("7"));
            let reqs = script.requests();
            let calls: Vec<_> = reqs.iter().map(|r| (r.method, r.path.as_str())).collect();
            assert_eq!(
                calls,
                [
                    (Method::Get, "/servers/7"),
                    (Method::Get, "/floating_ips/40"),
                    (Method::Put, "/floating_ips/40"),
                    (Method::Get, "/floating_ips/40"),
                    (Method::Post, "/floating_ips/40/actions/assign"),
                    (Method::Get, "/actions/5"),
                    (Method::Get, "/actions/5"),
                    (Method::Get, "/floating_ips/40"),
                ]
            );
            // The claim is written next to the labels it had.
            let mut labels = claim("host-a", 7, NOW);
            labels["team"] = json!("x");
            assert_eq!(reqs[2].body.as_ref().unwrap()["labels"], labels);
            assert_eq!(script.logs.borrow().len(), 1);
        }

        #[test]
        fn another_callers_claim_holds_a_move_off_while_it_is_live() {
            let settings = Settings::default();
            // Live: refused before anything is written.
            let script = Script::new(vec![
                resp(200, our_server(&[])),
                resp(200, fip("203.0.113.40", None, claim("host-b", 8, NOW - 5))),
            ]);
            let client = Client::new(&settings, &script);
            let e = client
                .assign_address("host-a", "7", &public("40"))
                .unwrap_err();
            assert!(
                matches!(&e, Error::Conflict(m) if m.contains("server 8")),
                "{e:?}"
            );
            assert_eq!(script.requests().len(), 2);

            // Written over by another caller before it was read back: no
            // assign.
            let script = Script::new(vec![
                resp(200, our_server(&[])),
                resp(200, fip("203.0.113.40", None, json!({}))),
                resp(200, fip("203.0.113.40", None, json!({}))),
                resp(200, fip("203.0.113.40", None, claim("host-b", 8, NOW))),
            ]);
            let client = Client::new(&settings, &script);
            assert!(matches!(
                client.assign_address("host-a", "7", &public("40")),
                Err(Error::Conflict(_))
            ));
            assert_eq!(script.requests().len(), 4);

            // Stale (a caller that stopped half-way): taken over.
            let stale = claim("host-b", 8, NOW - CLAIM_SECS);
            let script = Script::new(vec![
                resp(200, our_server(&[])),
                resp(200, fip("203.0.113.40", None, stale)),
                resp(200, fip("203.0.113.40", None, json!({}))),
                resp(200, fip("203.0.113.40", None, claim("host-a", 7, NOW))),
                resp(201, action("success")),
                resp(200, fip("203.0.113.40", Some(7), claim("host-a", 7, NOW))),
            ]);
            let client = Client::new(&settings, &script);
            client.assign_address("host-a", "7", &public("40")).unwrap();
        }

        /// A retried move finds the claim its earlier attempt wrote (that
        /// attempt's answer lost) and goes on to the assign without writing
        /// it again: under faults every retry makes progress.
        #[test]
        fn a_retried_move_goes_on_from_its_own_live_claim() {
            let settings = Settings::default();
            let script = Script::new(vec![
                resp(200, our_server(&[])),
                resp(200, fip("203.0.113.40", None, claim("host-a", 7, NOW - 3))),
                resp(201, action("success")),
                resp(
                    200,
                    fip("203.0.113.40", Some(7), claim("host-a", 7, NOW - 3)),
                ),
            ]);
            let client = Client::new(&settings, &script);
            client.assign_address("host-a", "7", &public("40")).unwrap();
            let requests = script.requests();
            assert_eq!(requests.len(), 4);
            assert!(
                requests.iter().all(|r| r.method != Method::Put),
                "{requests:?}"
            );
        }

        #[test]
        fn a_floating_ip_made_for_another_owner_is_never_claimed() {
            let settings = Settings::default();
            let script = Script::new(vec![
                resp(200, our_server(&[])),
                resp(200, fip("203.0.113.40", None, json!({OWNER: "host-b"}))),
            ]);
            let client = Client::new(&settings, &script);
            assert!(matches!(
                client.assign_address("host-a", "7", &public("40")),
                Err(Error::Unsupported(_))
            ));
            assert_eq!(script.requests().len(), 2);
        }

        #[test]
        fn releasing_takes_this_owners_claim_off() {
            let settings = Settings::default();
            let mut labels = claim("host-a", 7, NOW);
            labels["team"] = json!("x");
            let script = Script::new(vec![
                resp(200, our_server(&[40])),
                resp(200, fip("203.0.113.40", Some(7), labels)),
                resp(201, action("running")),
                resp(200, fip("203.0.113.40", None, json!({"team": "x"}))),
            ]);
            let client = Client::new(&settings, &script);
            client.release_address("host-a", "7", "40").unwrap();
            let reqs = script.requests();
            assert_eq!(
                (reqs[3].method, reqs[3].path.as_str()),
                (Method::Put, "/floating_ips/40")
            );
            assert_eq!(
                reqs[3].body.as_ref().unwrap()["labels"],
                json!({"team": "x"})
            );
        }

        #[test]
        fn an_ipv6_floating_ip_is_answered_as_an_address() {
            let settings = Settings::default();
            // Already on the server, none asked: the network's ::1.
            let script = Script::new(vec![
                resp(200, our_server(&[40])),
                resp(200, fip("2001:db8:1::/64", Some(7), json!({}))),
            ]);
            let client = Client::new(&settings, &script);
            let a = client
                .assign_address(
                    "host-a",
                    "7",
                    &AddressRequest {
                        kind: AddressKind::Public,
                        address: None,
                    },
                )
                .unwrap();
            assert_eq!(a.address, "2001:db8:1::1");
            assert_eq!(a.resource_id.as_deref(), Some("40"));

            // Asked by an address of its network: that address, found in
            // the project's list.
            let list = json!({
                "floating_ips": [
                    {"id": 39, "ip": "203.0.113.39", "server": null},
                    {"id": 40, "ip": "2001:db8:1::/64", "server": 7}
                ],
                "meta": {"pagination": {"next_page": null}}
            });
            let script = Script::new(vec![resp(200, our_server(&[40])), resp(200, list)]);
            let client = Client::new(&settings, &script);
            let a = client
                .assign_address("host-a", "7", &public("2001:db8:1::5"))
                .unwrap();
            assert_eq!(a.address, "2001:db8:1::5");
            assert_eq!(a.resource_id.as_deref(), Some("40"));
        }
    }
}
