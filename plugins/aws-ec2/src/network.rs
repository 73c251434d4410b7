//! Contract 0.3's networking calls on EC2: stable addresses (a secondary
//! private IP on an instance's primary network interface, or an Elastic
//! IP), ELBv2 target group membership, and subnet capacity.
//!
//! Every call that names a node acts only on an instance carrying this
//! owner's tag ([`Client::owned_instance`]), and never takes an address
//! away from an instance that does not.

use std::net::Ipv4Addr;

use wasmprov_api::{AddressKind, AddressRequest, StableAddress, SubnetCapacity, Target};
use wasmprov_guest::tags::{OWNER, id_tag};
use wasmprov_guest::{Error, Result};

use crate::api::{self, ElasticIp, Instance, Interface, TargetHealth};
use crate::client::{ApiRequest, Client, Transport};
use crate::tagging;

/// The `TargetHealth/State` of a target on its way out: it is no longer
/// in the group as far as the contract is concerned.
const DRAINING: &str = "draining";

/// The tag, beside the owner's, on an Elastic IP this plugin allocates:
/// the instance it was allocated for. Set in the `AllocateAddress` call
/// itself, so an allocation whose association was lost (a timeout, a
/// crash) is found and used by the retry instead of leaking.
pub(crate) const NODE_TAG: &str = "wasmprov-node";

impl<T: Transport> Client<'_, T> {
    /// Puts a stable address on an instance of this owner and answers where
    /// it is. Private: a secondary private IP of its primary network
    /// interface, the one asked for (taken off any other instance of this
    /// owner first) or, without one, the secondary address it already has,
    /// else a new one (`AssignPrivateIpAddresses`). Public: an Elastic IP,
    /// the one asked for (allocation id or IP) or, without one, the one it
    /// holds, else the one allocated for it earlier and left unassociated,
    /// else a new one allocated with the owner's and the node's tags
    /// ([`NODE_TAG`]); associated without `AllowReassociation`, after
    /// taking it off this owner's other instance by that association's id
    /// (`DisassociateAddress`). So assigning without an address is the same
    /// address every time, and a concurrent taker of the same address makes
    /// this call fail (`conflict`) instead of both being told it is theirs.
    /// An address already on the instance sends nothing.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an instance that is not this owner's, gone,
    /// or an Elastic IP EC2 does not have; [`Error::Unsupported`] for an
    /// address held by an instance or interface that is not this owner's,
    /// or an Elastic IP tagged with another owner (it is never taken), a
    /// primary address, or one that is not an IPv4 address;
    /// [`Error::Conflict`] when another caller moved the address meanwhile;
    /// the API's errors.
    pub fn assign_address(
        &self,
        owner_id: &str,
        provider_id: &str,
        request: &AddressRequest,
    ) -> Result<StableAddress> {
        let instance = self.owned_instance(owner_id, provider_id)?;
        let address = request.address.as_deref().map(str::trim);
        match request.kind {
            AddressKind::Private => self.assign_private(owner_id, &instance, address),
            AddressKind::Public => self.assign_public(owner_id, &instance, address),
        }
    }

    fn assign_private(
        &self,
        owner_id: &str,
        instance: &Instance,
        address: Option<&str>,
    ) -> Result<StableAddress> {
        let eni = instance.primary_interface().ok_or_else(|| {
            Error::Unsupported(format!(
                "instance {} has no network interface to put an address on",
                instance.id
            ))
        })?;
        let stable = |ip: String| StableAddress {
            address: ip,
            kind: AddressKind::Private,
            resource_id: Some(eni.id.clone()),
            provider_id: Some(instance.id.clone()),
        };
        let req = ApiRequest::new("AssignPrivateIpAddresses").param("NetworkInterfaceId", &eni.id);
        let Some(ip) = address else {
            // The one it has: asked again (a retry after a lost answer
            // included), it is the same address, not one more.
            if let Some((held, _)) = eni.private_ips.iter().find(|(_, primary)| !primary) {
                return Ok(stable(held.clone()));
            }
            let resp = self.call(&req.param("SecondaryPrivateIpAddressCount", "1"), false)?;
            // EC2 lists the new address; an emulator may list them all.
            let new = api::parse_assigned_private_ips(&resp.text())?
                .into_iter()
                .find(|a| !eni.private_ips.iter().any(|(had, _)| had == a))
                .ok_or_else(|| {
                    Error::Transport("EC2 AssignPrivateIpAddresses named no new address".into())
                })?;
            self.info(
                "address assigned",
                &[("instance_id", &instance.id), ("address", &new)],
            );
            return Ok(stable(new));
        };
        ipv4(ip)?;
        if eni.has_secondary(ip) {
            return Ok(stable(ip.to_string()));
        }
        if eni.has_primary(ip) {
            return Err(Error::Unsupported(format!(
                "{ip} is the primary address of instance {}, not a movable one",
                instance.id
            )));
        }
        self.take_private_ip(owner_id, ip, instance)?;
        // Never `AllowReassignment`: the address was taken off this owner's
        // own instances above, so EC2 refusing it means someone else holds
        // it, and it stays theirs.
        self.call(&req.param("PrivateIpAddress.1", ip), false)?;
        self.info(
            "address assigned",
            &[("instance_id", &instance.id), ("address", ip)],
        );
        Ok(stable(ip.to_string()))
    }

    /// Takes private address `ip` off every other instance of this owner
    /// that has it as a secondary address (`UnassignPrivateIpAddresses`),
    /// after checking no interface of anyone else holds it. The check
    /// reads every interface of the instance's subnet (of the region when
    /// the subnet is not known) and looks for `ip` among all their
    /// addresses itself, primary and secondary: a filter by address is
    /// applied by some emulators to primary addresses only, and a check
    /// that misses a holder would fail open.
    ///
    /// # Errors
    /// [`Error::Unsupported`] when an interface that is not this owner's
    /// instance's holds it, or it is an instance's primary address;
    /// nothing is changed then.
    fn take_private_ip(&self, owner_id: &str, ip: &str, to: &Instance) -> Result<()> {
        let own = self.describe_filtered(&[
            (format!("tag:{OWNER}"), vec![id_tag(owner_id)]),
            (
                "instance-state-name".into(),
                tagging::LIVE_STATES
                    .iter()
                    .map(|s| (*s).to_string())
                    .collect(),
            ),
        ])?;
        let own: Vec<&Instance> = own
            .iter()
            .filter(|i| tagging::is_owned(i, owner_id) && i.id != to.id)
            .collect();
        let own_eni = |id: &str| {
            to.interfaces.iter().any(|e| e.id == id)
                || own.iter().any(|i| i.interfaces.iter().any(|e| e.id == id))
        };
        let scope: Vec<(String, Vec<String>)> = to
            .subnet_id
            .iter()
            .map(|s| ("subnet-id".to_string(), vec![s.clone()]))
            .collect();
        let req = ApiRequest::new("DescribeNetworkInterfaces").filters(&scope);
        let holders: Vec<Interface> = self
            .pages(&req, api::parse_network_interfaces)?
            .map_err(|failure| failure.into_error(false))?;
        for h in &holders {
            let on_it = h.private_ips.iter().any(|(a, _)| a == ip);
            if on_it && !own_eni(&h.id) {
                return Err(Error::Unsupported(format!(
                    "{ip} is on network interface {}{}, which is not this owner's: it is never taken from there",
                    h.id,
                    h.instance_id
                        .as_deref()
                        .map(|i| format!(" (instance {i})"))
                        .unwrap_or_default()
                )));
            }
        }
        for i in &own {
            for eni in &i.interfaces {
                if eni.has_primary(ip) {
                    return Err(Error::Unsupported(format!(
                        "{ip} is the primary address of instance {}, not a movable one",
                        i.id
                    )));
                }
                if eni.has_secondary(ip) {
                    let req = ApiRequest::new("UnassignPrivateIpAddresses")
                        .param("NetworkInterfaceId", &eni.id)
                        .param("PrivateIpAddress.1", ip);
                    self.call(&req, false)?;
                    self.info(
                        "address taken off",
                        &[("instance_id", &i.id), ("address", ip)],
                    );
                }
            }
        }
        Ok(())
    }

    fn assign_public(
        &self,
        owner_id: &str,
        instance: &Instance,
        address: Option<&str>,
    ) -> Result<StableAddress> {
        let eip = match address {
            Some(a) => self
                .elastic_ip(a)?
                .ok_or_else(|| Error::NotFound(format!("EC2 has no Elastic IP {a:?}")))?,
            None => match self.held_elastic_ip(owner_id, instance)? {
                Some(held) => held,
                None => self.allocate_address(owner_id, &instance.id)?,
            },
        };
        let allocation = eip.allocation_id.clone().ok_or_else(|| {
            Error::Unsupported(format!(
                "Elastic IP {} has no allocation id (EC2-Classic): it cannot be moved",
                eip.public_ip
            ))
        })?;
        let stable = StableAddress {
            address: eip.public_ip.clone(),
            kind: AddressKind::Public,
            resource_id: Some(allocation.clone()),
            provider_id: Some(instance.id.clone()),
        };
        if eip.instance_id.as_deref() == Some(instance.id.as_str()) {
            return Ok(stable);
        }
        // One allocated for another owner stays theirs, on a node or not;
        // an untagged one (the operator's) may be moved.
        if let Some((_, other)) = eip
            .tags
            .iter()
            .find(|(k, v)| k == OWNER && *v != id_tag(owner_id))
        {
            return Err(Error::Unsupported(format!(
                "Elastic IP {} was allocated for owner {other:?}, not this owner's: it is never taken",
                eip.public_ip
            )));
        }
        match (&eip.instance_id, &eip.interface_id) {
            (Some(other), _) => {
                let theirs = self
                    .lookup(other)?
                    .is_none_or(|i| !tagging::is_owned(&i, owner_id));
                if theirs {
                    return Err(Error::Unsupported(format!(
                        "Elastic IP {} is on instance {other}, which is not this owner's: it is never taken from there",
                        eip.public_ip
                    )));
                }
                // Off our instance by that association only: if it moved
                // since it was read, EC2 refuses, and nothing else is taken.
                let association = eip.association_id.as_deref().ok_or_else(|| {
                    Error::Transport(format!(
                        "EC2 described Elastic IP {} on instance {other} without an association id",
                        eip.public_ip
                    ))
                })?;
                let req =
                    ApiRequest::new("DisassociateAddress").param("AssociationId", association);
                match self.try_call(&req)? {
                    Ok(_) => {}
                    Err(f) if f.code.starts_with("InvalidAssociationID") => {
                        return Err(moved_meanwhile(&eip.public_ip));
                    }
                    Err(f) => return Err(f.into_error(false)),
                }
            }
            (None, Some(eni)) => {
                return Err(Error::Unsupported(format!(
                    "Elastic IP {} is on network interface {eni}, which is no instance of this owner's: it is never taken from there",
                    eip.public_ip
                )));
            }
            (None, None) => {}
        }
        // Never `AllowReassociation`: an address someone associated since it
        // was read stays where it is, and this call is the one that fails.
        let req = ApiRequest::new("AssociateAddress")
            .param("AllocationId", allocation)
            .param("InstanceId", &instance.id);
        match self.try_call(&req)? {
            Ok(_) => {}
            Err(f) if f.code == "Resource.AlreadyAssociated" => {
                return Err(moved_meanwhile(&eip.public_ip));
            }
            Err(f) => return Err(f.into_error(false)),
        }
        self.info(
            "address assigned",
            &[
                ("instance_id", &instance.id),
                ("address", &eip.public_ip),
                ("from", eip.instance_id.as_deref().unwrap_or("")),
            ],
        );
        Ok(stable)
    }

    /// The Elastic IP of this owner's that `instance` should have when
    /// none is named: one associated with it (any: associating another
    /// would push it off), else one allocated for it ([`NODE_TAG`]) and
    /// left unassociated (an earlier call whose association was lost).
    ///
    /// # Errors
    /// The API's errors.
    fn held_elastic_ip(&self, owner_id: &str, instance: &Instance) -> Result<Option<ElasticIp>> {
        let describe = |filters: &[(String, Vec<String>)]| -> Result<Vec<ElasticIp>> {
            let resp = self.call(
                &ApiRequest::new("DescribeAddresses").filters(filters),
                false,
            )?;
            api::parse_addresses(&resp.text())
        };
        let on_it = describe(&[("instance-id".into(), vec![instance.id.clone()])])?;
        if let Some(eip) = on_it
            .into_iter()
            .find(|e| e.instance_id.as_deref() == Some(instance.id.as_str()))
        {
            return Ok(Some(eip));
        }
        let mine = describe(&[
            (format!("tag:{OWNER}"), vec![id_tag(owner_id)]),
            (format!("tag:{NODE_TAG}"), vec![instance.id.clone()]),
        ])?;
        Ok(mine.into_iter().find(|e| {
            e.instance_id.is_none()
                && e.interface_id.is_none()
                && e.tags
                    .iter()
                    .any(|(k, v)| k == OWNER && *v == id_tag(owner_id))
                && e.tags
                    .iter()
                    .any(|(k, v)| k == NODE_TAG && *v == instance.id)
        }))
    }

    /// A new Elastic IP for the VPC, tagged with this owner and the
    /// instance it is for, in the allocation itself.
    fn allocate_address(&self, owner_id: &str, instance_id: &str) -> Result<ElasticIp> {
        let req = ApiRequest::new("AllocateAddress")
            .param("Domain", "vpc")
            .param("TagSpecification.1.ResourceType", "elastic-ip")
            .param("TagSpecification.1.Tag.1.Key", OWNER)
            .param("TagSpecification.1.Tag.1.Value", id_tag(owner_id))
            .param("TagSpecification.1.Tag.2.Key", NODE_TAG)
            .param("TagSpecification.1.Tag.2.Value", instance_id);
        let resp = self.call(&req, false)?;
        let (ip, allocation) = api::parse_allocate_address(&resp.text())?;
        self.info(
            "address allocated",
            &[("address", &ip), ("allocation_id", &allocation)],
        );
        Ok(ElasticIp {
            public_ip: ip,
            allocation_id: Some(allocation),
            tags: vec![
                (OWNER.into(), id_tag(owner_id)),
                (NODE_TAG.into(), instance_id.to_string()),
            ],
            ..ElasticIp::default()
        })
    }

    /// The Elastic IP `a` (an allocation id or an IPv4 address) as
    /// `DescribeAddresses` describes it; `None` when EC2 has no such one.
    ///
    /// # Errors
    /// [`Error::NotFound`] for something that is neither; the API's errors.
    fn elastic_ip(&self, a: &str) -> Result<Option<ElasticIp>> {
        let req = if a.starts_with("eipalloc-") {
            ApiRequest::new("DescribeAddresses").param("AllocationId.1", a)
        } else {
            ipv4(a).map_err(|_| {
                Error::NotFound(format!(
                    "{a:?} is neither an IPv4 address nor an Elastic IP allocation id"
                ))
            })?;
            ApiRequest::new("DescribeAddresses").param("PublicIp.1", a)
        };
        match self.try_call(&req)? {
            Ok(resp) => Ok(api::parse_addresses(&resp.text())?
                .into_iter()
                .find(|e| e.public_ip == a || e.allocation_id.as_deref() == Some(a))),
            Err(f)
                if matches!(
                    f.code.as_str(),
                    "InvalidAddress.NotFound"
                        | "InvalidAllocationID.NotFound"
                        | "InvalidAllocationID.Malformed"
                ) =>
            {
                Ok(None)
            }
            Err(f) => Err(f.into_error(false)),
        }
    }

    /// Takes `address` off an instance of this owner: a secondary private
    /// IP of one of its interfaces (`UnassignPrivateIpAddresses`), or an
    /// Elastic IP associated with it, by IP or allocation id
    /// (`DisassociateAddress`). An Elastic IP this plugin allocated for
    /// this owner (tagged with it) is then released (`ReleaseAddress`): it
    /// was made for the node and would otherwise be paid for unused; any
    /// other (the operator's) stays the account's.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an instance that is not this owner's, or an
    /// address that is not on it; [`Error::Unsupported`] for its primary
    /// private address; the API's errors.
    pub fn release_address(&self, owner_id: &str, provider_id: &str, address: &str) -> Result<()> {
        let instance = self.owned_instance(owner_id, provider_id)?;
        let address = address.trim();
        if let Some(eni) = instance
            .interfaces
            .iter()
            .find(|e| e.has_secondary(address))
        {
            let req = ApiRequest::new("UnassignPrivateIpAddresses")
                .param("NetworkInterfaceId", &eni.id)
                .param("PrivateIpAddress.1", address);
            self.call(&req, false)?;
            self.info(
                "address released",
                &[("instance_id", provider_id), ("address", address)],
            );
            return Ok(());
        }
        if instance.interfaces.iter().any(|e| e.has_primary(address)) {
            return Err(Error::Unsupported(format!(
                "{address} is the primary address of instance {provider_id}: it cannot be released"
            )));
        }
        let not_on_it = || Error::NotFound(format!("{address} is not on instance {provider_id}"));
        if !(address.starts_with("eipalloc-") || ipv4(address).is_ok()) {
            return Err(not_on_it());
        }
        let eip = self
            .elastic_ip(address)?
            .filter(|e| e.instance_id.as_deref() == Some(provider_id))
            .ok_or_else(not_on_it)?;
        let association = eip.association_id.clone().ok_or_else(not_on_it)?;
        let req = ApiRequest::new("DisassociateAddress").param("AssociationId", association);
        match self.try_call(&req)? {
            Ok(_) => {}
            Err(f) if f.code.starts_with("InvalidAssociationID") => return Err(not_on_it()),
            Err(f) => return Err(f.into_error(false)),
        }
        self.info(
            "address released",
            &[("instance_id", provider_id), ("address", &eip.public_ip)],
        );
        let ours = eip
            .tags
            .iter()
            .any(|(k, v)| k == OWNER && *v == id_tag(owner_id));
        if let (true, Some(allocation)) = (ours, eip.allocation_id.as_deref()) {
            let req = ApiRequest::new("ReleaseAddress").param("AllocationId", allocation);
            self.call(&req, false)?;
            self.info(
                "address deallocated",
                &[("address", &eip.public_ip), ("allocation_id", allocation)],
            );
        }
        Ok(())
    }

    /// Adds an instance of this owner to an ELBv2 target group
    /// (`RegisterTargets`, with the port when given); adding it again is no
    /// change.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an instance that is not this owner's, or a
    /// group that is not a target group ARN or does not exist;
    /// [`Error::Unsupported`] when ELBv2 refuses the instance as a target
    /// (`InvalidTarget`: another VPC, or a group of IP targets); the API's
    /// errors.
    pub fn register_target(&self, owner_id: &str, target: &Target) -> Result<()> {
        let group = target_group(&target.group)?;
        let instance = self.owned_instance(owner_id, &target.provider_id)?;
        let mut req = ApiRequest::elb("RegisterTargets")
            .param("TargetGroupArn", group)
            .param("Targets.member.1.Id", &instance.id);
        if let Some(port) = target.port {
            req = req.param("Targets.member.1.Port", port.to_string());
        }
        match self.try_call(&req)? {
            Ok(resp) => api::expect_response(&resp.text(), "RegisterTargets")?,
            Err(f) if f.code == "InvalidTarget" => {
                return Err(Error::Unsupported(format!(
                    "target group {group} refuses instance {}: {}",
                    instance.id, f.message
                )));
            }
            Err(f) => return Err(f.into_error(false)),
        }
        self.info(
            "target registered",
            &[("instance_id", &instance.id), ("group", group)],
        );
        Ok(())
    }

    /// Takes an instance of this owner (terminated ones too) out of an
    /// ELBv2 target group (`DeregisterTargets`): on the port given, else on
    /// every port it is registered on.
    ///
    /// # Errors
    /// [`Error::NotFound`] for an instance EC2 does not know or that is not
    /// this owner's, a group that is not a target group or does not exist,
    /// and an instance not in the group (a draining one is no longer in
    /// it); the API's errors.
    pub fn deregister_target(&self, owner_id: &str, target: &Target) -> Result<()> {
        let group = target_group(&target.group)?;
        let id = target.provider_id.as_str();
        if !tagging::is_instance_id(id)
            || !self
                .lookup(id)?
                .is_some_and(|i| tagging::is_owned(&i, owner_id))
        {
            return Err(Error::NotFound(format!(
                "instance {id} does not exist or is not owned by this host"
            )));
        }
        let registered: Vec<TargetHealth> = self
            .target_health(group)?
            .into_iter()
            .filter(|t| {
                t.id == id
                    && target.port.is_none_or(|p| t.port == Some(p))
                    && t.state.as_deref() != Some(DRAINING)
            })
            .collect();
        if registered.is_empty() {
            return Err(Error::NotFound(format!(
                "instance {id} is not in target group {group}"
            )));
        }
        let mut req = ApiRequest::elb("DeregisterTargets").param("TargetGroupArn", group);
        for (n, t) in registered.iter().enumerate() {
            req = req.param(format!("Targets.member.{}.Id", n + 1), id);
            if let Some(port) = t.port {
                req = req.param(format!("Targets.member.{}.Port", n + 1), port.to_string());
            }
        }
        let resp = self.call(&req, false)?;
        api::expect_response(&resp.text(), "DeregisterTargets")?;
        self.info(
            "target deregistered",
            &[("instance_id", id), ("group", group)],
        );
        Ok(())
    }

    /// Every target of an ELBv2 target group, whoever's
    /// (`DescribeTargetHealth`), with its port and health state.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a group that is not a target group ARN or
    /// does not exist; the API's errors.
    pub fn list_targets(&self, group: &str) -> Result<Vec<Target>> {
        let group = target_group(group)?;
        Ok(self
            .target_health(group)?
            .into_iter()
            .map(|t| Target {
                group: group.to_string(),
                provider_id: t.id,
                port: t.port,
                health: t.state,
            })
            .collect())
    }

    fn target_health(&self, group: &str) -> Result<Vec<TargetHealth>> {
        let req = ApiRequest::elb("DescribeTargetHealth").param("TargetGroupArn", group);
        let resp = self.call(&req, false)?;
        api::parse_target_health(&resp.text())
    }

    /// How many addresses a subnet has free (`DescribeSubnets`:
    /// `availableIpAddressCount`), of how many its IPv4 block has for
    /// nodes (all but the five AWS reserves).
    ///
    /// # Errors
    /// [`Error::NotFound`] naming a subnet EC2 does not know; the API's
    /// errors.
    pub fn subnet_capacity(&self, subnet: &str) -> Result<SubnetCapacity> {
        let s = self
            .subnet(subnet)?
            .ok_or_else(|| Error::NotFound(format!("subnet {subnet:?} does not exist")))?;
        Ok(SubnetCapacity {
            total_addresses: s.total_addresses(),
            subnet: s.id,
            available_addresses: s.free,
            zone: Some(s.zone).filter(|z| !z.is_empty()),
        })
    }
}

/// `group` when it is an ELBv2 target group ARN
/// (`arn:<partition>:elasticloadbalancing:<region>:<account>:targetgroup/<name>/<id>`).
///
/// # Errors
/// [`Error::NotFound`] otherwise: it names no target group.
pub fn target_group(group: &str) -> Result<&str> {
    let parts: Vec<&str> = group.splitn(6, ':').collect();
    let ok = parts.len() == 6
        && parts[0] == "arn"
        && parts[2] == "elasticloadbalancing"
        && parts[5].starts_with("targetgroup/")
        && !group.contains(char::is_whitespace);
    if ok {
        Ok(group)
    } else {
        Err(Error::NotFound(format!(
            "{group:?} is not an ELBv2 target group ARN (arn:aws:elasticloadbalancing:REGION:ACCOUNT:targetgroup/NAME/ID)"
        )))
    }
}

/// Refuses what is not an IPv4 address.
fn ipv4(ip: &str) -> Result<Ipv4Addr> {
    ip.parse()
        .map_err(|_| Error::Unsupported(format!("{ip:?} is not an IPv4 address")))
}

/// The error of an assign whose address another caller moved between this
/// call reading it and moving it: retry to see where it is now.
fn moved_meanwhile(ip: &str) -> Error {
    Error::Conflict(format!(
        "Elastic IP {ip} was moved by another caller while this call ran; it was not assigned (ask again to see where it is)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_groups_are_arns() {
        let arn = "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/leaders/55cd945abaf6ea50";
        assert_eq!(target_group(arn).unwrap(), arn);
        for bad in [
            "",
            "leaders",
            "arn:aws:ec2:us-east-1:123456789012:targetgroup/x/1",
            "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/net/x/1",
            "arn:aws:elasticloadbalancing:us-east-1:123456789012:targetgroup/x /1",
        ] {
            assert!(
                matches!(target_group(bad), Err(Error::NotFound(_))),
                "{bad}"
            );
        }
    }
}
