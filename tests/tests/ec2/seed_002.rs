//! Seed 002, Arvados' cloud `InstanceSet`, ported to Rust over a wasmprov
//! provisioner (test-only), and driven against the EC2 plugin on moto.
//!
//! What the Go interface says, written as Rust: an instance set creates
//! instances of an instance type from an image, with tags, an init command
//! and an SSH public key; lists its instances, optionally only those that
//! carry given tags; each instance has a stable id, its provider type,
//! tags it can replace (`SetTags`), an address, and can be destroyed. The
//! set only sees instances tagged with its own id (here: the host's owner
//! id) and ignores everyone else's. Errors say when to retry
//! (`RateLimitError::EarliestRetry`) and when the account is full
//! (`QuotaError::IsQuotaError`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use wasmprov_api::{
    BootData, CapacityType, CloudProvisioner, NodeHandle, NodeShape, ProvisionRequest,
    ProvisionerError, provenance,
};

use super::networking::Two;
use super::{SSH_KEY, within_limit};

/// `InstanceTags`.
type InstanceTags = BTreeMap<String, String>;

/// What `arvados.InstanceType` says that matters to a driver.
#[derive(Clone, Debug)]
struct InstanceType {
    /// The cluster's name of the type.
    name: String,
    /// The cloud's name (`ProviderType`).
    provider_type: String,
    /// Spot, when the cluster allows interruption.
    preemptible: bool,
}

/// A driver error: the Go interfaces' `RateLimitError` and `QuotaError`
/// facts, and the wasmprov error behind them.
#[derive(Debug)]
struct CloudError(ProvisionerError);

impl CloudError {
    /// `EarliestRetry()`: when a rate-limited caller may try again.
    fn earliest_retry(&self) -> Option<SystemTime> {
        match &self.0 {
            ProvisionerError::RateLimited { retry_after_ms, .. } => {
                Some(SystemTime::now() + Duration::from_millis(retry_after_ms.unwrap_or(1000)))
            }
            _ => None,
        }
    }

    /// `IsQuotaError()`: create nothing more until some instance is gone.
    fn is_quota_error(&self) -> bool {
        matches!(self.0, ProvisionerError::Quota(_))
    }
}

impl From<ProvisionerError> for CloudError {
    fn from(e: ProvisionerError) -> Self {
        Self(e)
    }
}

type Result<T> = std::result::Result<T, CloudError>;

/// `InstanceSet`, over one wasmprov provisioner whose host's owner id is
/// the instance set id.
struct InstanceSet {
    cloud: Arc<dyn CloudProvisioner>,
    /// Makes each `Create` a new request id (Arvados' `Create` is not
    /// idempotent: each call is a new instance).
    created: AtomicU64,
    /// Distinguishes this set's request ids from an earlier run's.
    epoch: u128,
}

impl InstanceSet {
    fn new(cloud: Arc<dyn CloudProvisioner>) -> Self {
        Self {
            cloud,
            created: AtomicU64::new(0),
            epoch: SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
                .as_nanos(),
        }
    }

    /// `Create(InstanceType, ImageID, InstanceTags, initCommand, PublicKey)`.
    async fn create(
        &self,
        instance_type: &InstanceType,
        image: &str,
        tags: &InstanceTags,
        init_command: &str,
        public_key: Option<&str>,
    ) -> Result<Instance> {
        let n = self.created.fetch_add(1, Ordering::SeqCst);
        let shape = NodeShape {
            instance_type: Some(instance_type.provider_type.clone()),
            capacity_type: if instance_type.preemptible {
                CapacityType::Spot
            } else {
                CapacityType::OnDemand
            },
            labels: tags.clone(),
            ..NodeShape::default()
        };
        let request = ProvisionRequest {
            request_id: format!("arv-{:x}-{n}", self.epoch % (1 << 40)),
            shape,
            boot: BootData {
                image: Some(image.to_string()),
                user_data: Some(format!("#!/bin/sh\n{init_command}\n").into_bytes()),
                ssh_keys: public_key.map(str::to_string).into_iter().collect(),
            },
            subnet: None,
        };
        let handle = self.cloud.provision_request(&request).await?;
        Ok(Instance {
            cloud: self.cloud.clone(),
            handle,
        })
    }

    /// `Instances(InstanceTags)`: every instance of this set, booting and
    /// shutting down ones included, that carries all of `filter`.
    async fn instances(&self, filter: &InstanceTags) -> Result<Vec<Instance>> {
        Ok(self
            .cloud
            .describe()
            .await?
            .into_iter()
            .filter(|h| filter.iter().all(|(k, v)| h.labels.get(k) == Some(v)))
            .map(|handle| Instance {
                cloud: self.cloud.clone(),
                handle,
            })
            .collect())
    }

    /// `Stop()`: nothing runs in the background.
    fn stop(&self) {}
}

/// `Instance`.
struct Instance {
    cloud: Arc<dyn CloudProvisioner>,
    handle: NodeHandle,
}

impl Instance {
    /// `ID()`: stable for the life of the instance.
    fn id(&self) -> &str {
        &self.handle.provider_id
    }

    /// `String()`: the cloud's id.
    fn string(&self) -> String {
        self.handle.provider_id.clone()
    }

    /// `ProviderType()`.
    fn provider_type(&self) -> &str {
        self.handle.instance_type.as_deref().unwrap_or_default()
    }

    /// `Address()`: empty while unknown.
    fn address(&self) -> &str {
        self.handle
            .private_address
            .as_deref()
            .or(self.handle.address.as_deref())
            .unwrap_or_default()
    }

    /// `Tags()`: the instance's tags, less those wasmprov keeps for itself.
    fn tags(&self) -> InstanceTags {
        self.handle
            .labels
            .iter()
            .filter(|(k, _)| !provenance::is_reserved_label(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// `SetTags(InstanceTags)`: replaces the tags.
    async fn set_tags(&mut self, tags: &InstanceTags) -> Result<()> {
        self.handle = self
            .cloud
            .set_labels(&self.handle.provider_id, tags)
            .await?;
        Ok(())
    }

    /// `Destroy()`.
    async fn destroy(&self) -> Result<()> {
        Ok(self.cloud.terminate(&self.handle.provider_id).await?)
    }
}

fn tags(pairs: &[(&str, &str)]) -> InstanceTags {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

#[tokio::test]
async fn arvados_instance_set_on_ec2() {
    require_moto!();
    within_limit(async {
        let t = Two::start().await;
        let set = InstanceSet::new(t.ours.clone());
        let other_set = InstanceSet::new(t.theirs.clone());
        let small = InstanceType {
            name: "m5large".into(),
            provider_type: "m5.large".into(),
            preemptible: false,
        };
        let spot = InstanceType {
            name: "t3medium-spot".into(),
            provider_type: "t3.medium".into(),
            preemptible: true,
        };
        let image = t.account.image_id.clone();

        // Create: type, image, tags, init command, key.
        let a = set
            .create(
                &small,
                &image,
                &tags(&[
                    ("arvados-instance-type", &small.name),
                    ("arvados-idle-behavior", "run"),
                ]),
                "systemctl start crunch-run",
                Some(SSH_KEY),
            )
            .await
            .unwrap();
        let b = set
            .create(
                &spot,
                &image,
                &tags(&[
                    ("arvados-instance-type", &spot.name),
                    ("arvados-idle-behavior", "run"),
                ]),
                "echo ready",
                None,
            )
            .await
            .unwrap();
        let foreign = other_set
            .create(
                &small,
                &image,
                &tags(&[("arvados-idle-behavior", "run")]),
                "true",
                None,
            )
            .await
            .unwrap();
        assert_ne!(a.id(), b.id());
        assert_eq!(a.string(), a.id());
        assert_eq!(a.provider_type(), "m5.large");
        assert_eq!(b.provider_type(), "t3.medium");
        assert!(!a.address().is_empty());
        assert_eq!(a.tags()["arvados-idle-behavior"], "run");

        // moto's record of each: type, image, key pair, user data, tags,
        // spot lifecycle.
        let seen = t.instance(a.id());
        assert_eq!(seen["InstanceType"], "m5.large");
        assert_eq!(seen["ImageId"], image.as_str());
        assert!(
            seen["KeyName"].as_str().unwrap().starts_with("wasmprov-"),
            "{seen}"
        );
        let user_data = super::user_data_of(&t.moto, &t.account.user, a.id()).await;
        assert_eq!(user_data, "#!/bin/sh\nsystemctl start crunch-run\n");
        assert_eq!(t.tags(a.id())["arvados-instance-type"], "m5large");
        assert_eq!(t.instance(b.id())["InstanceLifecycle"], "spot");
        assert_eq!(t.instance(b.id())["InstanceType"], "t3.medium");

        // Instances: all of this set's, by tags, never another set's.
        let ids = |v: Vec<Instance>| {
            let mut ids: Vec<String> = v.iter().map(|i| i.id().to_string()).collect();
            ids.sort();
            ids
        };
        let mut both = vec![a.id().to_string(), b.id().to_string()];
        both.sort();
        assert_eq!(
            ids(set.instances(&InstanceTags::new()).await.unwrap()),
            both
        );
        assert_eq!(
            ids(set
                .instances(&tags(&[("arvados-idle-behavior", "run")]))
                .await
                .unwrap()),
            both
        );
        assert_eq!(
            ids(set
                .instances(&tags(&[("arvados-instance-type", "m5large")]))
                .await
                .unwrap()),
            [a.id().to_string()]
        );
        assert_eq!(
            ids(other_set.instances(&InstanceTags::new()).await.unwrap()),
            [foreign.id().to_string()]
        );

        // SetTags replaces the tags; Instances sees the new ones.
        let mut a = a;
        let hold = tags(&[
            ("arvados-instance-type", "m5large"),
            ("arvados-idle-behavior", "hold"),
        ]);
        a.set_tags(&hold).await.unwrap();
        let mut shown = a.tags();
        shown.remove("Name");
        assert_eq!(shown, hold);
        let in_cloud = t.tags(a.id());
        assert_eq!(in_cloud["arvados-idle-behavior"], "hold");
        assert_eq!(in_cloud["wasmprov-owner"], super::OWNER);
        assert_eq!(
            ids(set
                .instances(&tags(&[("arvados-idle-behavior", "run")]))
                .await
                .unwrap()),
            [b.id().to_string()]
        );
        let listed = set
            .instances(&tags(&[("arvados-idle-behavior", "hold")]))
            .await
            .unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].tags(), a.tags());
        // Another set's instance cannot be retagged or destroyed through this one.
        let mut stolen = Instance {
            cloud: t.ours.clone(),
            handle: foreign.handle.clone(),
        };
        let err = stolen.set_tags(&hold).await.unwrap_err();
        assert!(matches!(err.0, ProvisionerError::NotFound(_)), "{err:?}");
        let err = stolen.destroy().await.unwrap_err();
        assert!(matches!(err.0, ProvisionerError::NotFound(_)), "{err:?}");
        assert_eq!(t.tags(foreign.id())["arvados-idle-behavior"], "run");

        // Destroy: moto shuts it down; the set no longer lists it.
        a.destroy().await.unwrap();
        let state = t.instance(a.id())["State"]["Name"].clone();
        assert!(state == "terminated" || state == "shutting-down", "{state}");
        assert_eq!(
            ids(set.instances(&InstanceTags::new()).await.unwrap()),
            [b.id().to_string()]
        );
        let err = a.destroy().await.unwrap_err();
        assert!(matches!(err.0, ProvisionerError::NotFound(_)), "{err:?}");
        b.destroy().await.unwrap();
        assert!(
            set.instances(&InstanceTags::new())
                .await
                .unwrap()
                .is_empty()
        );
        set.stop();

        // The error facts: a throttle says when to retry, a quota is a
        // quota error, nothing else is either.
        let throttled = CloudError(ProvisionerError::RateLimited {
            retry_after_ms: Some(5_000),
            message: "RequestLimitExceeded".into(),
        });
        let at = throttled.earliest_retry().unwrap();
        assert!(at > SystemTime::now() + Duration::from_secs(3));
        assert!(!throttled.is_quota_error());
        let full = CloudError(ProvisionerError::Quota("InstanceLimitExceeded".into()));
        assert!(full.is_quota_error() && full.earliest_retry().is_none());
    })
    .await;
}
