//! Seed 004, a Go `provider.Provider` (instance lifecycle, a stable leader
//! address, subnet capacity, load balancer groups), ported to Rust over a
//! wasmprov provisioner (test-only), and every one of its eleven methods
//! driven against the EC2 plugin on moto.
//!
//! What the Go package says, written as Rust: a provider has a kind;
//! creates an instance from a request naming its cluster, shard, group,
//! kind, type, subnet, user data and custom tags, answering its provider
//! id, status, private IPv4 and IPv6, host name, launch time and tags;
//! deletes one and reports its status (statuses normalized across clouds:
//! pending, running, stopping, stopped, suspending, suspended, deleting,
//! deleted, repairing, unknown); lists a cluster's (and shard's) instances
//! a page at a time (`Limit`, `NextToken`, `Total`); an instance that does
//! not exist is `ErrInstanceNotFound`. Its networking half assigns and
//! releases a stable leader address (`LeaderNetwork`: IP and interface),
//! says whether a subnet has room, and registers instances with, removes
//! them from and lists the instances of load balancer target groups
//! (`LoadBalancerConfig.TargetGroupArns`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use wasmprov_api::{
    AddressKind, AddressRequest, CloudProvisioner, NodeHandle, NodeShape, ProvisionRequest,
    ProvisionerError, Target,
};

use super::networking::Two;
use super::{REGION, within_limit};

/// The tags that carry a request's associations and annotations.
const CLUSTER_TAG: &str = "cluster-id";
const SHARD_TAG: &str = "shard";
const GROUP_TAG: &str = "group";
const KIND_TAG: &str = "kind";
const TEMPLATE_TAG: &str = "template";
/// The tag wasmprov keeps the caller's instance id in (the request id).
const INSTANCE_ID_TAG: &str = wasmprov_api::provenance::REQUEST_LABEL;

/// `CreateInstanceRequest`.
#[derive(Clone, Debug, Default)]
struct CreateInstanceRequest {
    cluster_id: String,
    shard: String,
    group: String,
    template: String,
    instance_kind: String,
    instance_id: String,
    instance_type: String,
    subnet_id: String,
    user_data: String,
    /// Used by the Go package's development provider only.
    #[allow(dead_code, reason = "the seed's field; EC2 has no use for it")]
    nonce: String,
    /// Used by the Go package's development provider only.
    #[allow(dead_code, reason = "the seed's field; EC2 has no use for it")]
    ca_cert_pem: Vec<u8>,
    #[allow(dead_code, reason = "the seed's field; EC2 has no use for it")]
    args: BTreeMap<String, serde_json::Value>,
    custom_tags: BTreeMap<String, String>,
}

/// `CreateInstanceResponse`.
#[derive(Clone, Debug)]
struct CreateInstanceResponse {
    instance_id: String,
    provider_instance_id: String,
    status: String,
    private_ipv4: String,
    private_ipv6: String,
    hostname: String,
    launched_at: Option<SystemTime>,
    tags: BTreeMap<String, String>,
}

/// `InstanceAnnotations`: informational only.
#[derive(Clone, Debug, PartialEq)]
struct InstanceAnnotations {
    group: String,
    kind: String,
    created_at: Option<SystemTime>,
}

/// `InstanceStatus`.
#[derive(Clone, Debug)]
struct InstanceStatus {
    instance_id: String,
    provider_instance_id: String,
    status: String,
    instance_type: String,
    private_ipv4: String,
    private_ipv6: String,
    hostname: String,
    launched_at: Option<SystemTime>,
    tags: BTreeMap<String, String>,
    region: String,
    zone: String,
    cluster_id: String,
    shard: String,
    annotations: Option<InstanceAnnotations>,
}

/// `ListInstancesRequest`.
#[derive(Clone, Debug, Default)]
struct ListInstancesRequest {
    cluster_id: String,
    shard: String,
    limit: usize,
    next_token: String,
}

/// `ListInstancesResponse`.
#[derive(Clone, Debug)]
struct ListInstancesResponse {
    instances: Vec<InstanceStatus>,
    next_token: String,
    total: usize,
}

/// `LeaderNetwork`: the stable leader IP and the interface holding it.
#[derive(Clone, Debug, Default)]
struct LeaderNetwork {
    ip: String,
    interface_id: String,
}

/// `LoadBalancerConfig`.
#[derive(Clone, Debug, Default)]
struct LoadBalancerConfig {
    provider: String,
    target_group_arns: Vec<String>,
    /// GCP's, unused on AWS.
    backend_service_name: Option<String>,
    /// GCP's, unused on AWS.
    instance_group_name: Option<String>,
}

/// `RegisterLBRequest`.
#[derive(Clone, Debug)]
struct RegisterLbRequest {
    provider_instance_id: String,
    lb_config: LoadBalancerConfig,
    #[allow(dead_code, reason = "the seed's field; target groups span zones")]
    zone: String,
}

/// `DeregisterLBRequest`.
type DeregisterLbRequest = RegisterLbRequest;

/// `ListLBInstancesRequest`.
#[derive(Clone, Debug)]
struct ListLbInstancesRequest {
    lb_config: LoadBalancerConfig,
    #[allow(dead_code, reason = "the seed's field; target groups span zones")]
    zone: String,
}

/// The package's errors: `ErrInstanceNotFound`, or what the cloud said.
#[derive(Debug)]
enum Error {
    InstanceNotFound,
    Cloud(ProvisionerError),
}

impl From<ProvisionerError> for Error {
    fn from(e: ProvisionerError) -> Self {
        match e {
            ProvisionerError::NotFound(_) => Self::InstanceNotFound,
            other => Self::Cloud(other),
        }
    }
}

type Result<T> = std::result::Result<T, Error>;

/// `Provider` over one wasmprov provisioner.
struct Provider {
    cloud: Arc<dyn CloudProvisioner>,
    region: String,
}

fn time_of(ms: Option<u64>) -> Option<SystemTime> {
    ms.map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
}

fn status_of(h: &NodeHandle, region: &str) -> InstanceStatus {
    let tag = |k: &str| h.labels.get(k).cloned().unwrap_or_default();
    let group = tag(GROUP_TAG);
    let kind = tag(KIND_TAG);
    InstanceStatus {
        instance_id: tag(INSTANCE_ID_TAG),
        provider_instance_id: h.provider_id.clone(),
        status: h.status.as_str().to_string(),
        instance_type: h.instance_type.clone().unwrap_or_default(),
        private_ipv4: h.private_address.clone().unwrap_or_default(),
        private_ipv6: h.ipv6_address.clone().unwrap_or_default(),
        hostname: h.hostname.clone().unwrap_or_default(),
        launched_at: time_of(h.created_at_ms),
        tags: h.labels.clone(),
        region: region.to_string(),
        zone: h.zone.clone().unwrap_or_default(),
        cluster_id: tag(CLUSTER_TAG),
        shard: tag(SHARD_TAG),
        annotations: (!group.is_empty() || !kind.is_empty()).then(|| InstanceAnnotations {
            group,
            kind,
            created_at: time_of(h.created_at_ms),
        }),
    }
}

impl Provider {
    /// `Kind()`.
    fn kind(&self) -> String {
        self.cloud.name().to_string()
    }

    /// `CreateInstance`: the instance id is the request id, so creating
    /// it twice makes one instance.
    async fn create_instance(&self, req: &CreateInstanceRequest) -> Result<CreateInstanceResponse> {
        let mut labels = req.custom_tags.clone();
        for (k, v) in [
            (CLUSTER_TAG, &req.cluster_id),
            (SHARD_TAG, &req.shard),
            (GROUP_TAG, &req.group),
            (KIND_TAG, &req.instance_kind),
            (TEMPLATE_TAG, &req.template),
        ] {
            if !v.is_empty() {
                labels.insert(k.to_string(), v.clone());
            }
        }
        let mut request = ProvisionRequest::new(
            req.instance_id.clone(),
            NodeShape {
                instance_type: Some(req.instance_type.clone()),
                labels,
                ..NodeShape::default()
            },
        );
        request.boot.user_data =
            (!req.user_data.is_empty()).then(|| req.user_data.clone().into_bytes());
        request.subnet = (!req.subnet_id.is_empty()).then(|| req.subnet_id.clone());
        let h = self.cloud.provision_request(&request).await?;
        Ok(CreateInstanceResponse {
            instance_id: req.instance_id.clone(),
            provider_instance_id: h.provider_id.clone(),
            status: h.status.as_str().to_string(),
            private_ipv4: h.private_address.clone().unwrap_or_default(),
            private_ipv6: h.ipv6_address.clone().unwrap_or_default(),
            hostname: h.hostname.clone().unwrap_or_default(),
            launched_at: time_of(h.created_at_ms),
            tags: h.labels,
        })
    }

    /// The provider id of `instance_id` when the caller has none.
    async fn resolve(&self, instance_id: &str, provider_instance_id: &str) -> Result<String> {
        if !provider_instance_id.is_empty() {
            return Ok(provider_instance_id.to_string());
        }
        self.cloud
            .describe()
            .await?
            .into_iter()
            .find(|h| h.labels.get(INSTANCE_ID_TAG).map(String::as_str) == Some(instance_id))
            .map(|h| h.provider_id)
            .ok_or(Error::InstanceNotFound)
    }

    /// `DeleteInstance`.
    async fn delete_instance(&self, instance_id: &str, provider_instance_id: &str) -> Result<()> {
        let id = self.resolve(instance_id, provider_instance_id).await?;
        Ok(self.cloud.terminate(&id).await?)
    }

    /// `GetInstanceStatus`.
    async fn get_instance_status(
        &self,
        instance_id: &str,
        provider_instance_id: &str,
    ) -> Result<InstanceStatus> {
        let id = self.resolve(instance_id, provider_instance_id).await?;
        let h = self.cloud.get(&id).await?.ok_or(Error::InstanceNotFound)?;
        Ok(status_of(&h, &self.region))
    }

    /// `ListInstances`: the cluster's (and shard's, when given) instances
    /// in provider id order, `limit` a page (0: all), `next_token` the
    /// offset of the next page.
    async fn list_instances(&self, req: &ListInstancesRequest) -> Result<ListInstancesResponse> {
        let mut all: Vec<InstanceStatus> = self
            .cloud
            .describe()
            .await?
            .iter()
            .map(|h| status_of(h, &self.region))
            .filter(|s| s.cluster_id == req.cluster_id)
            .filter(|s| req.shard.is_empty() || s.shard == req.shard)
            .collect();
        all.sort_by(|a, b| a.provider_instance_id.cmp(&b.provider_instance_id));
        let total = all.len();
        let start: usize = if req.next_token.is_empty() {
            0
        } else {
            req.next_token.parse().map_err(|_| {
                Error::Cloud(ProvisionerError::Other(format!(
                    "bad next token {:?}",
                    req.next_token
                )))
            })?
        };
        let end = if req.limit == 0 {
            total
        } else {
            (start + req.limit).min(total)
        };
        Ok(ListInstancesResponse {
            instances: all.get(start..end).unwrap_or_default().to_vec(),
            next_token: if end < total {
                end.to_string()
            } else {
                String::new()
            },
            total,
        })
    }

    /// `AssignLeaderNetwork`: the leader IP as a secondary private address
    /// of the instance (moved from the previous leader).
    async fn assign_leader_network(
        &self,
        provider_instance_id: &str,
        ln: &mut LeaderNetwork,
    ) -> Result<()> {
        let got = self
            .cloud
            .assign_address(
                &provider_instance_id.to_string(),
                &AddressRequest {
                    kind: AddressKind::Private,
                    address: (!ln.ip.is_empty()).then(|| ln.ip.clone()),
                },
            )
            .await?;
        ln.ip = got.address;
        ln.interface_id = got.resource_id.unwrap_or_default();
        Ok(())
    }

    /// `ReleaseLeaderNetwork`.
    async fn release_leader_network(
        &self,
        provider_instance_id: &str,
        ln: &LeaderNetwork,
    ) -> Result<()> {
        Ok(self
            .cloud
            .release_address(&provider_instance_id.to_string(), &ln.ip)
            .await?)
    }

    /// `CheckSubnetCapacity`: whether the subnet has an address free.
    async fn check_subnet_capacity(&self, subnet_id: &str) -> Result<bool> {
        Ok(self
            .cloud
            .subnet_capacity(subnet_id)
            .await?
            .available_addresses
            > 0)
    }

    /// `RegisterWithLB`: into every target group of the config.
    async fn register_with_lb(&self, req: &RegisterLbRequest) -> Result<()> {
        for group in &req.lb_config.target_group_arns {
            self.cloud
                .register_target(&Target {
                    group: group.clone(),
                    provider_id: req.provider_instance_id.clone(),
                    port: None,
                    health: None,
                })
                .await?;
        }
        Ok(())
    }

    /// `DeregisterFromLB`: out of every target group of the config; one it
    /// is not in already is left as it is.
    async fn deregister_from_lb(&self, req: &DeregisterLbRequest) -> Result<()> {
        for group in &req.lb_config.target_group_arns {
            match self
                .cloud
                .deregister_target(&Target {
                    group: group.clone(),
                    provider_id: req.provider_instance_id.clone(),
                    port: None,
                    health: None,
                })
                .await
            {
                Ok(()) | Err(ProvisionerError::NotFound(_)) => {}
                Err(e) => return Err(Error::Cloud(e)),
            }
        }
        Ok(())
    }

    /// `ListLBInstances`: the provider ids in any of the config's groups.
    async fn list_lb_instances(&self, req: &ListLbInstancesRequest) -> Result<Vec<String>> {
        let mut out = BTreeSet::new();
        for group in &req.lb_config.target_group_arns {
            for t in self.cloud.list_targets(group).await.map_err(Error::Cloud)? {
                out.insert(t.provider_id);
            }
        }
        Ok(out.into_iter().collect())
    }
}

fn create(instance_id: &str, shard: &str, subnet: &str) -> CreateInstanceRequest {
    CreateInstanceRequest {
        cluster_id: "c1".into(),
        shard: shard.into(),
        group: "storage".into(),
        template: "db-v1".into(),
        instance_kind: "db".into(),
        instance_id: instance_id.into(),
        instance_type: "m5.large".into(),
        subnet_id: subnet.into(),
        user_data: "#cloud-config\nruncmd: [[echo, joined]]\n".into(),
        nonce: "dev-only".into(),
        ca_cert_pem: Vec::new(),
        args: BTreeMap::new(),
        custom_tags: BTreeMap::from([("team".to_string(), "db".to_string())]),
    }
}

#[tokio::test]
#[allow(clippy::too_many_lines, reason = "one walk through the eleven methods")]
async fn go_provider_on_ec2_every_method() {
    require_moto!();
    within_limit(async {
        let t = Two::start().await;
        let p = Provider {
            cloud: t.ours.clone(),
            region: REGION.into(),
        };
        let theirs = Provider {
            cloud: t.theirs.clone(),
            region: REGION.into(),
        };

        // Kind: the plugin's name in the host (its directory entry).
        assert_eq!(p.kind(), "ec2");

        // CreateInstance, in the subnet asked for; twice is one instance.
        let (subnet, free) = t.subnet("us-east-1b");
        let a = p
            .create_instance(&create("db-0", "s0", &subnet))
            .await
            .unwrap();
        let again = p
            .create_instance(&create("db-0", "s0", &subnet))
            .await
            .unwrap();
        assert_eq!(again.provider_instance_id, a.provider_instance_id);
        let b = p
            .create_instance(&create("db-1", "s1", &subnet))
            .await
            .unwrap();
        let c = p.create_instance(&create("db-2", "s1", "")).await.unwrap();
        let foreign = theirs
            .create_instance(&create("db-9", "s0", &subnet))
            .await
            .unwrap();
        assert_eq!(a.instance_id, "db-0");
        assert!(a.provider_instance_id.starts_with("i-"));
        assert!(["pending", "running"].contains(&a.status.as_str()), "{a:?}");
        assert!(a.launched_at.is_some());
        assert_eq!(a.tags["team"], "db");
        assert_eq!(a.tags[CLUSTER_TAG], "c1");
        assert!(a.private_ipv6.is_empty());
        let seen = t.instance(&a.provider_instance_id);
        assert_eq!(seen["SubnetId"], subnet.as_str());
        assert_eq!(seen["InstanceType"], "m5.large");
        assert_eq!(seen["PrivateIpAddress"], a.private_ipv4.as_str());
        assert_eq!(seen["PrivateDnsName"], a.hostname.as_str());
        assert_eq!(
            super::user_data_of(&t.moto, &t.account.user, &a.provider_instance_id).await,
            "#cloud-config\nruncmd: [[echo, joined]]\n"
        );
        assert_eq!(t.tags(&a.provider_instance_id)[SHARD_TAG], "s0");

        // GetInstanceStatus, by provider id and by instance id alone.
        let s = p
            .get_instance_status("db-0", &a.provider_instance_id)
            .await
            .unwrap();
        assert_eq!(s.status, "running");
        assert_eq!(s.instance_id, "db-0");
        assert_eq!(s.instance_type, "m5.large");
        assert_eq!(s.region, REGION);
        assert_eq!(s.zone, "us-east-1b");
        assert_eq!((s.cluster_id.as_str(), s.shard.as_str()), ("c1", "s0"));
        assert_eq!(s.private_ipv4, a.private_ipv4);
        assert_eq!(s.hostname, a.hostname);
        assert!(s.private_ipv6.is_empty(), "moto gives no IPv6 address here");
        assert_eq!(s.launched_at, a.launched_at);
        assert_eq!(s.tags["template"], "db-v1");
        let ann = s.annotations.clone().unwrap();
        assert_eq!((ann.group.as_str(), ann.kind.as_str()), ("storage", "db"));
        assert_eq!(ann.created_at, a.launched_at);
        let by_name = p.get_instance_status("db-1", "").await.unwrap();
        assert_eq!(by_name.provider_instance_id, b.provider_instance_id);
        assert!(matches!(
            p.get_instance_status("", &foreign.provider_instance_id)
                .await,
            Err(Error::InstanceNotFound)
        ));
        assert!(matches!(
            p.get_instance_status("db-404", "").await,
            Err(Error::InstanceNotFound)
        ));

        // ListInstances: pages of two, the total, the shard filter, never
        // another owner's instance.
        let first = p
            .list_instances(&ListInstancesRequest {
                cluster_id: "c1".into(),
                limit: 2,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!((first.instances.len(), first.total), (2, 3));
        assert!(!first.next_token.is_empty());
        let second = p
            .list_instances(&ListInstancesRequest {
                cluster_id: "c1".into(),
                limit: 2,
                next_token: first.next_token.clone(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!((second.instances.len(), second.total), (1, 3));
        assert!(second.next_token.is_empty());
        let mut listed: Vec<String> = first
            .instances
            .iter()
            .chain(&second.instances)
            .map(|s| s.provider_instance_id.clone())
            .collect();
        listed.sort();
        let mut ours = vec![
            a.provider_instance_id.clone(),
            b.provider_instance_id.clone(),
            c.provider_instance_id.clone(),
        ];
        ours.sort();
        assert_eq!(listed, ours);
        let s1 = p
            .list_instances(&ListInstancesRequest {
                cluster_id: "c1".into(),
                shard: "s1".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(s1.total, 2);
        assert!(s1.instances.iter().all(|s| s.shard == "s1"));
        assert_eq!(
            p.list_instances(&ListInstancesRequest {
                cluster_id: "c2".into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .total,
            0
        );

        let bad_token = p
            .list_instances(&ListInstancesRequest {
                cluster_id: "c1".into(),
                next_token: "page-two".into(),
                ..Default::default()
            })
            .await;
        assert!(
            matches!(&bad_token, Err(Error::Cloud(e)) if e.kind() == "other"),
            "{bad_token:?}"
        );

        // AssignLeaderNetwork / ReleaseLeaderNetwork: a stable private IP
        // on the leader's interface, moved to the next leader.
        let cidr = t.boto3(&format!(
            "out(ec2.describe_subnets(SubnetIds=['{subnet}'])['Subnets'][0]['CidrBlock'])"
        ));
        let base: std::net::Ipv4Addr = cidr
            .as_str()
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let leader_ip = std::net::Ipv4Addr::from(u32::from(base) + 200).to_string();
        let mut ln = LeaderNetwork {
            ip: leader_ip.clone(),
            interface_id: String::new(),
        };
        p.assign_leader_network(&a.provider_instance_id, &mut ln)
            .await
            .unwrap();
        assert!(ln.interface_id.starts_with("eni-"), "{ln:?}");
        assert!(
            t.private_ips(&a.provider_instance_id)
                .contains(&(leader_ip.clone(), false))
        );
        p.assign_leader_network(&b.provider_instance_id, &mut ln)
            .await
            .unwrap();
        assert!(
            t.private_ips(&b.provider_instance_id)
                .contains(&(leader_ip.clone(), false))
        );
        assert!(
            !t.private_ips(&a.provider_instance_id)
                .iter()
                .any(|(ip, _)| *ip == leader_ip)
        );
        assert!(matches!(
            p.release_leader_network(&a.provider_instance_id, &ln).await,
            Err(Error::InstanceNotFound)
        ));
        p.release_leader_network(&b.provider_instance_id, &ln)
            .await
            .unwrap();
        assert!(
            !t.private_ips(&b.provider_instance_id)
                .iter()
                .any(|(ip, _)| *ip == leader_ip)
        );
        assert!(matches!(
            p.assign_leader_network(&foreign.provider_instance_id, &mut ln)
                .await,
            Err(Error::InstanceNotFound)
        ));

        // CheckSubnetCapacity.
        assert!(p.check_subnet_capacity(&subnet).await.unwrap());
        assert_eq!(
            t.ours
                .subnet_capacity(&subnet)
                .await
                .unwrap()
                .available_addresses,
            t.subnet("us-east-1b").1
        );
        assert!(
            t.subnet("us-east-1b").1 < free,
            "the new instances took addresses"
        );
        assert!(
            p.check_subnet_capacity("subnet-0123456789abcdef0")
                .await
                .is_err()
        );

        // RegisterWithLB / ListLBInstances / DeregisterFromLB over two
        // target groups (a multi-port NLB).
        let api = t.target_group("api");
        let peers = t.target_group("peers");
        let lb = LoadBalancerConfig {
            provider: "aws".into(),
            target_group_arns: vec![api.clone(), peers.clone()],
            backend_service_name: None,
            instance_group_name: None,
        };
        assert!(lb.backend_service_name.is_none() && lb.instance_group_name.is_none());
        assert_eq!(lb.provider, "aws");
        let reg = |id: &str| RegisterLbRequest {
            provider_instance_id: id.to_string(),
            lb_config: lb.clone(),
            zone: "us-east-1b".into(),
        };
        let list = ListLbInstancesRequest {
            lb_config: lb.clone(),
            zone: "us-east-1b".into(),
        };
        p.register_with_lb(&reg(&a.provider_instance_id))
            .await
            .unwrap();
        p.register_with_lb(&reg(&b.provider_instance_id))
            .await
            .unwrap();
        let mut ab = vec![
            a.provider_instance_id.clone(),
            b.provider_instance_id.clone(),
        ];
        ab.sort();
        assert_eq!(p.list_lb_instances(&list).await.unwrap(), ab);
        for group in [&api, &peers] {
            let ids: Vec<String> = t.targets(group).into_iter().map(|(id, _)| id).collect();
            assert_eq!(ids, ab, "{group}");
        }
        assert!(
            p.register_with_lb(&reg(&foreign.provider_instance_id))
                .await
                .is_err()
        );
        p.deregister_from_lb(&reg(&a.provider_instance_id))
            .await
            .unwrap();
        p.deregister_from_lb(&reg(&a.provider_instance_id))
            .await
            .unwrap();
        assert_eq!(
            p.list_lb_instances(&list).await.unwrap(),
            std::slice::from_ref(&b.provider_instance_id)
        );
        for group in [&api, &peers] {
            assert_eq!(
                t.targets(group),
                [(b.provider_instance_id.clone(), 6443)],
                "{group}"
            );
        }

        // DeleteInstance, by provider id and by instance id; gone is
        // ErrInstanceNotFound; another owner's is never deleted.
        p.delete_instance("db-0", &a.provider_instance_id)
            .await
            .unwrap();
        let state = t.instance(&a.provider_instance_id)["State"]["Name"].clone();
        assert!(state == "terminated" || state == "shutting-down", "{state}");
        match p.get_instance_status("db-0", &a.provider_instance_id).await {
            Ok(s) => assert!(
                ["deleting", "deleted"].contains(&s.status.as_str()),
                "{s:?}"
            ),
            Err(e) => assert!(matches!(e, Error::InstanceNotFound), "{e:?}"),
        }
        assert!(matches!(
            p.delete_instance("db-0", &a.provider_instance_id).await,
            Err(Error::InstanceNotFound)
        ));
        p.delete_instance("db-2", "").await.unwrap();
        assert!(matches!(
            p.delete_instance("", &foreign.provider_instance_id).await,
            Err(Error::InstanceNotFound)
        ));
        assert_eq!(
            t.instance(&foreign.provider_instance_id)["State"]["Name"],
            "running"
        );
        assert_eq!(
            p.list_instances(&ListInstancesRequest {
                cluster_id: "c1".into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .total,
            1
        );
    })
    .await;
}
