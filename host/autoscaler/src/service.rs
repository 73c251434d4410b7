//! The `CloudProvider` gRPC service: every RPC of cluster-autoscaler's
//! `externalgrpc` provider, answered from the node groups ([`Scaler`]),
//! the template and the prices.
//!
//! Requests are checked here, once; the node groups, template and prices
//! below see only checked values. Errors become codes in `status.rs`.

use std::sync::Arc;
use std::time::Duration;

use tonic::{Request, Response, Status};
use wasmprov_fleet::Fleet;

use crate::config::{GroupOptions, NodeGroup, NodeGroups};
use crate::proto;
use crate::proto::cloud_provider_server::{CloudProvider, CloudProviderServer};
use crate::scaler::{MemberState, Scaler};
use crate::status::AutoscalerError;

/// How long NodeGroupIncreaseSize waits, by default, for the first members
/// to be asked of the clouds before it answers (the target is durable
/// before that): under the autoscaler's default call timeout of 5 s.
pub const DEFAULT_INCREASE_WAIT: Duration = Duration::from_secs(3);

/// How often, at least, the grower passes over the groups by default
/// (members that failed to be made are asked for again then).
pub const DEFAULT_RETRY_EVERY: Duration = Duration::from_secs(10);

/// The `clusterautoscaler.cloudprovider.v1.externalgrpc.CloudProvider`
/// service over a fleet and its node groups.
///
/// ```no_run
/// # async fn demo(fleet: std::sync::Arc<wasmprov_fleet::Fleet>) -> anyhow::Result<()> {
/// use wasmprov_autoscaler::{NodeGroups, Service};
///
/// let groups = NodeGroups::load("node-groups.toml".as_ref())?;
/// // Hand it to a tonic server (`Server::builder().add_service(...)`).
/// let _server = Service::new(fleet, groups).server();
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Service {
    scaler: Arc<Scaler>,
    increase_wait: Duration,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("groups", &self.scaler.groups)
            .field("increase_wait", &self.increase_wait)
            .finish_non_exhaustive()
    }
}

impl Service {
    /// The service over `fleet` (its journal keeps the groups' targets and
    /// members) and `groups`. Starts the task that brings each group to its
    /// target, so a host restarted after a crash resumes an increase: call
    /// it inside a Tokio runtime. The task ends when the last clone of the
    /// service is dropped.
    #[must_use]
    pub fn new(fleet: Arc<Fleet>, groups: NodeGroups) -> Self {
        Self::with_retry(fleet, groups, DEFAULT_RETRY_EVERY)
    }

    /// As [`new`](Self::new), with the grower passing over the groups at
    /// least every `retry_every` (members that failed to be made are asked
    /// for again then).
    #[must_use]
    pub fn with_retry(fleet: Arc<Fleet>, groups: NodeGroups, retry_every: Duration) -> Self {
        Self::build(fleet, groups, retry_every, None)
    }

    /// As [`with_retry`](Self::with_retry), with the grower's first pass
    /// only once `ready` completes: `wasmprov serve` passes the end of its
    /// startup reconcile, so that nothing is created to reach a group's
    /// target or min before the journal has been compared with the clouds
    /// (an emptied, older or foreign journal is held only once a reconcile
    /// has seen the nodes it does not know). The calls are answered
    /// meanwhile.
    #[must_use]
    pub fn starting_after(
        fleet: Arc<Fleet>,
        groups: NodeGroups,
        retry_every: Duration,
        ready: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Self {
        Self::build(fleet, groups, retry_every, Some(Box::pin(ready)))
    }

    fn build(
        fleet: Arc<Fleet>,
        groups: NodeGroups,
        retry_every: Duration,
        gate: Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>,
    ) -> Self {
        let mut scaler = Scaler::new(fleet, groups);
        scaler.retry_every = retry_every;
        let scaler = Arc::new(scaler);
        scaler.start(gate);
        Self {
            scaler,
            increase_wait: DEFAULT_INCREASE_WAIT,
        }
    }

    /// How long NodeGroupIncreaseSize waits for the first members to be
    /// asked for ([`DEFAULT_INCREASE_WAIT`]).
    #[must_use]
    pub fn increase_wait(mut self, wait: Duration) -> Self {
        self.increase_wait = wait;
        self
    }

    /// The service, ready for a tonic server.
    #[must_use]
    pub fn server(self) -> CloudProviderServer<Self> {
        CloudProviderServer::new(self)
    }

    /// The node groups served.
    #[must_use]
    pub fn groups(&self) -> &NodeGroups {
        &self.scaler.groups
    }

    fn group(&self, id: &str) -> Result<&NodeGroup, AutoscalerError> {
        self.scaler.group(id)
    }
}

impl Service {
    /// Every offering of the plugins `g` may use (every loaded plugin when
    /// `g` is `None`), with its plugin.
    async fn offerings(&self, g: Option<&NodeGroup>) -> Vec<(String, wasmprov_api::Offering)> {
        let backends = self.scaler.fleet.backends();
        let mut out = Vec::new();
        for name in backends.backend_names() {
            if let Some(g) = g
                && !g.capacity.plugins.is_empty()
                && !g.capacity.plugins.contains(&name)
            {
                continue;
            }
            let Some(backend) = backends.backend(&name) else {
                continue;
            };
            match backend.offerings().await {
                Ok(list) => out.extend(list.into_iter().map(|o| (name.clone(), o))),
                Err(e) => tracing::warn!(plugin = name, "offerings: {e}"),
            }
        }
        out
    }

    /// The template node of `g`, from its cheapest fitting offering.
    async fn template(&self, g: &NodeGroup) -> Result<Vec<u8>, AutoscalerError> {
        let fleet = &self.scaler.fleet;
        let plugins = g.capacity.plugins.clone();
        let ranking = fleet
            .catalogues()
            .rank(fleet.backends().as_ref(), &g.capacity.shape, None, |p| {
                plugins.is_empty() || plugins.iter().any(|q| q == p)
            })
            .await;
        let Some(offer) = ranking.offers.first() else {
            let why: Vec<String> = ranking
                .none
                .iter()
                .map(|n| format!("{}: {}", n.plugin, n.reason))
                .collect();
            return Err(AutoscalerError::FailedPrecondition(format!(
                "group {}: no plugin offers its shape ({})",
                g.id(),
                why.join("; ")
            )));
        };
        let offering = self
            .offerings(Some(g))
            .await
            .into_iter()
            .find(|(p, o)| *p == offer.plugin && o.instance_type == offer.hint.instance_type)
            .map(|(_, o)| o)
            .ok_or_else(|| {
                AutoscalerError::FailedPrecondition(format!(
                    "group {}: the offering {} of {} is no longer listed",
                    g.id(),
                    offer.hint.instance_type,
                    offer.plugin
                ))
            })?;
        let bad = |e: crate::template::TemplateError| {
            AutoscalerError::FailedPrecondition(format!("group {}: {e}", g.id()))
        };
        template_of(g, &offer.plugin, offering)
            .node_bytes()
            .map_err(bad)
    }
}

impl Service {
    /// The hourly price of a node without a provider id: a template node,
    /// named by its `wasmprov.io/plugin` and `wasmprov.io/instance-type`
    /// annotations, priced as its offering lists it (spot for a group,
    /// named by `wasmprov.io/node-group`, of spot capacity; else on demand).
    async fn template_hourly(
        &self,
        node: &proto::ExternalGrpcNode,
    ) -> Result<f64, AutoscalerError> {
        let annotation = |key: &str| {
            node.annotations
                .get(key)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| {
                    AutoscalerError::InvalidArgument(format!(
                        "node {:?} has no provider id and no {key} annotation: neither a wasmprov node (wasmprov://PLUGIN/PROVIDER-ID) nor a template node",
                        node.name
                    ))
                })
        };
        let plugin = annotation(crate::template::PLUGIN_ANNOTATION)?;
        let instance_type = annotation(crate::template::INSTANCE_TYPE_ANNOTATION)?;
        let capacity = node
            .annotations
            .get(crate::template::GROUP_ANNOTATION)
            .and_then(|id| self.scaler.group(id).ok())
            .map(|g| g.capacity.shape.capacity_type)
            .unwrap_or_default();
        let offering = self
            .offerings(None)
            .await
            .into_iter()
            .find(|(p, o)| p == plugin && o.instance_type == *instance_type)
            .map(|(_, o)| o)
            .ok_or_else(|| {
                AutoscalerError::Unimplemented(format!(
                    "template node {:?}: {plugin} lists no offering {instance_type}: no price known",
                    node.name
                ))
            })?;
        offering.price(capacity).ok_or_else(|| {
            AutoscalerError::Unimplemented(format!(
                "template node {:?}: {plugin} lists no {} price for {instance_type}",
                node.name,
                capacity.as_str()
            ))
        })
    }
}

/// The template of group `g` on `offering` of `plugin`: the group's labels,
/// taints, zone, disk size (the shape's `disk_bytes`, which is also what
/// its nodes are made with), GPU resource and kubelet settings.
fn template_of(
    g: &NodeGroup,
    plugin: &str,
    offering: wasmprov_api::Offering,
) -> crate::template::NodeTemplate {
    let mut template = crate::template::NodeTemplate::new(g.id(), plugin, offering);
    template.labels = g.labels.clone();
    template.taints = g.taints.clone();
    template.zone = g.capacity.shape.zone.clone();
    template.ephemeral_storage_bytes = g.capacity.shape.disk_bytes;
    template.gpu_resource = g.gpu_resource.clone();
    template.kubelet = g.kubelet.clone();
    template
}

fn price_error(e: crate::pricing::PriceError) -> AutoscalerError {
    AutoscalerError::InvalidArgument(e.to_string())
}

/// The encoded descriptors of `proto/externalgrpc.proto`, for server
/// reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/externalgrpc_descriptor.bin"));

type Rpc<T> = std::result::Result<Response<T>, Status>;

fn ok<T>(t: T) -> Rpc<T> {
    Ok(Response::new(t))
}

fn pb_group(g: &NodeGroup) -> proto::NodeGroup {
    let shape = &g.capacity.shape;
    let what = match &shape.instance_type {
        Some(t) => format!("instance type {t}"),
        None => format!(
            "{} cpu, {} MiB{}",
            shape.cpu,
            shape.memory_bytes >> 20,
            if shape.gpu > 0 {
                format!(", {} gpu", shape.gpu)
            } else {
                String::new()
            }
        ),
    };
    let plugins = if g.capacity.plugins.is_empty() {
        "any plugin".to_string()
    } else {
        g.capacity.plugins.join(", ")
    };
    proto::NodeGroup {
        id: g.id().to_string(),
        min_size: i32::try_from(g.capacity.min).unwrap_or(i32::MAX),
        max_size: i32::try_from(g.capacity.max).unwrap_or(i32::MAX),
        debug: format!("wasmprov group {}: {what} on {plugins}", g.id()),
    }
}

fn duration(secs: Option<u64>) -> Option<prost_types::Duration> {
    crate::config::secs(secs).map(|d| prost_types::Duration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: 0,
    })
}

/// The autoscaler's defaults with the group's own options over them.
fn options(
    defaults: Option<proto::NodeGroupAutoscalingOptions>,
    own: &GroupOptions,
) -> proto::NodeGroupAutoscalingOptions {
    let mut o = defaults.unwrap_or_default();
    if let Some(v) = own.scale_down_utilization_threshold {
        o.scale_down_utilization_threshold = v;
    }
    if let Some(v) = own.scale_down_gpu_utilization_threshold {
        o.scale_down_gpu_utilization_threshold = v;
    }
    if let Some(v) = own.zero_or_max_node_scaling {
        o.zero_or_max_node_scaling = v;
    }
    if let Some(v) = own.ignore_daemonsets_utilization {
        o.ignore_daemon_sets_utilization = v;
    }
    if let Some(v) = own.allow_non_atomic_scale_up_to_max {
        o.allow_non_atomic_scale_up_to_max = v;
    }
    if let Some(d) = duration(own.scale_down_unneeded_secs) {
        o.scale_down_unneeded_duration = Some(d);
    }
    if let Some(d) = duration(own.scale_down_unready_secs) {
        o.scale_down_unready_duration = Some(d);
    }
    if let Some(d) = duration(own.max_node_provision_secs) {
        o.max_node_provision_duration = Some(d);
    }
    if let Some(d) = duration(own.max_node_startup_secs) {
        o.max_node_startup_duration = Some(d);
    }
    o
}

#[tonic::async_trait]
impl CloudProvider for Service {
    async fn node_groups(
        &self,
        _: Request<proto::NodeGroupsRequest>,
    ) -> Rpc<proto::NodeGroupsResponse> {
        ok(proto::NodeGroupsResponse {
            node_groups: self.scaler.groups.groups().iter().map(pb_group).collect(),
        })
    }

    async fn node_group_for_node(
        &self,
        req: Request<proto::NodeGroupForNodeRequest>,
    ) -> Rpc<proto::NodeGroupForNodeResponse> {
        let node = req.into_inner().node.unwrap_or_default();
        let group = self.scaler.group_of(&node.provider_id)?;
        ok(proto::NodeGroupForNodeResponse {
            node_group: Some(group.map(pb_group).unwrap_or_default()),
        })
    }

    async fn pricing_node_price(
        &self,
        req: Request<proto::PricingNodePriceRequest>,
    ) -> Rpc<proto::PricingNodePriceResponse> {
        let req = req.into_inner();
        let node = req.node.unwrap_or_default();
        if node.provider_id.is_empty() {
            // The template node (NodeGroupTemplateNodeInfo), which the price
            // expander prices for a group without nodes: named by its
            // annotations.
            let hourly = self.template_hourly(&node).await?;
            let price = crate::pricing::node_price(
                hourly,
                req.start_timestamp.as_ref(),
                req.end_timestamp.as_ref(),
            )
            .map_err(price_error)?;
            return ok(proto::PricingNodePriceResponse { price });
        }
        let Some(crate::NodeRef::Node {
            plugin,
            provider_id,
        }) = crate::NodeRef::decode(&node.provider_id)
        else {
            return Err(AutoscalerError::InvalidArgument(format!(
                "{:?} is not a wasmprov node id (wasmprov://PLUGIN/PROVIDER-ID)",
                node.provider_id
            ))
            .into());
        };
        let intent = self
            .scaler
            .fleet
            .intents()
            .map_err(AutoscalerError::Journal)?
            .into_iter()
            .find(|i| i.plugin == plugin && i.provider_id() == Some(provider_id.as_str()))
            .ok_or_else(|| {
                AutoscalerError::Unimplemented(format!(
                    "{} is not a node of this host's journal: no price known",
                    node.provider_id
                ))
            })?;
        let Some(hourly) = intent.hourly_usd else {
            return Err(AutoscalerError::Unimplemented(format!(
                "no price was quoted for {}",
                node.provider_id
            ))
            .into());
        };
        let price = crate::pricing::node_price(
            hourly,
            req.start_timestamp.as_ref(),
            req.end_timestamp.as_ref(),
        )
        .map_err(price_error)?;
        ok(proto::PricingNodePriceResponse { price })
    }

    async fn pricing_pod_price(
        &self,
        req: Request<proto::PricingPodPriceRequest>,
    ) -> Rpc<proto::PricingPodPriceResponse> {
        let req = req.into_inner();
        // Older autoscalers sent the pod at field 1.
        let pod = if req.pod_bytes.is_empty() {
            &req.legacy_pod
        } else {
            &req.pod_bytes
        };
        let requests = crate::pricing::pod_requests(pod).map_err(price_error)?;
        let hours =
            crate::pricing::period_hours(req.start_timestamp.as_ref(), req.end_timestamp.as_ref())
                .map_err(price_error)?;
        let offerings: Vec<wasmprov_api::Offering> = self
            .offerings(None)
            .await
            .into_iter()
            .map(|(_, o)| o)
            .collect();
        let price = crate::pricing::pod_price(
            &requests,
            &offerings,
            &crate::template::Kubelet::default(),
            hours,
        )
        .map_err(|e| AutoscalerError::FailedPrecondition(e.to_string()))?;
        ok(proto::PricingPodPriceResponse { price: price.usd })
    }

    async fn gpu_label(&self, _: Request<proto::GpuLabelRequest>) -> Rpc<proto::GpuLabelResponse> {
        ok(proto::GpuLabelResponse {
            label: crate::template::GPU_LABEL.to_string(),
        })
    }

    async fn get_available_gpu_types(
        &self,
        _: Request<proto::GetAvailableGpuTypesRequest>,
    ) -> Rpc<proto::GetAvailableGpuTypesResponse> {
        let offerings = self.offerings(None).await;
        ok(proto::GetAvailableGpuTypesResponse {
            gpu_types: crate::template::gpu_types(offerings.iter().map(|(_, o)| o)),
        })
    }

    async fn cleanup(&self, _: Request<proto::CleanupRequest>) -> Rpc<proto::CleanupResponse> {
        // The service outlives one autoscaler: nothing to release.
        ok(proto::CleanupResponse {})
    }

    async fn refresh(&self, _: Request<proto::RefreshRequest>) -> Rpc<proto::RefreshResponse> {
        // Membership is read from the journal on every call; a refresh only
        // checks that the journal answers (no cloud is asked).
        self.scaler
            .fleet
            .intents()
            .map_err(AutoscalerError::Journal)?;
        ok(proto::RefreshResponse {})
    }

    async fn node_group_target_size(
        &self,
        req: Request<proto::NodeGroupTargetSizeRequest>,
    ) -> Rpc<proto::NodeGroupTargetSizeResponse> {
        let target = self.scaler.target(&req.into_inner().id)?;
        ok(proto::NodeGroupTargetSizeResponse {
            target_size: i32::try_from(target).unwrap_or(i32::MAX),
        })
    }

    async fn node_group_increase_size(
        &self,
        req: Request<proto::NodeGroupIncreaseSizeRequest>,
    ) -> Rpc<proto::NodeGroupIncreaseSizeResponse> {
        let req = req.into_inner();
        self.scaler
            .increase(&req.id, req.delta, self.increase_wait)
            .await?;
        ok(proto::NodeGroupIncreaseSizeResponse {})
    }

    async fn node_group_delete_nodes(
        &self,
        req: Request<proto::NodeGroupDeleteNodesRequest>,
    ) -> Rpc<proto::NodeGroupDeleteNodesResponse> {
        let req = req.into_inner();
        self.group(&req.id)?;
        let mut ids = Vec::with_capacity(req.nodes.len());
        for node in req.nodes {
            if node.provider_id.is_empty() {
                return Err(AutoscalerError::InvalidArgument(format!(
                    "deleting nothing: node {:?} has no providerID",
                    node.name
                ))
                .into());
            }
            ids.push(node.provider_id);
        }
        self.scaler.delete(&req.id, &ids).await?;
        ok(proto::NodeGroupDeleteNodesResponse {})
    }

    async fn node_group_decrease_target_size(
        &self,
        req: Request<proto::NodeGroupDecreaseTargetSizeRequest>,
    ) -> Rpc<proto::NodeGroupDecreaseTargetSizeResponse> {
        let req = req.into_inner();
        self.scaler.decrease(&req.id, req.delta).await?;
        ok(proto::NodeGroupDecreaseTargetSizeResponse {})
    }

    async fn node_group_nodes(
        &self,
        req: Request<proto::NodeGroupNodesRequest>,
    ) -> Rpc<proto::NodeGroupNodesResponse> {
        use proto::instance_status::InstanceState;
        let instances = self.scaler.instances(&req.into_inner().id)?;
        ok(proto::NodeGroupNodesResponse {
            instances: instances
                .into_iter()
                .map(|i| proto::Instance {
                    id: i.id,
                    status: Some(proto::InstanceStatus {
                        instance_state: match i.state {
                            MemberState::Running => InstanceState::InstanceRunning,
                            MemberState::Creating => InstanceState::InstanceCreating,
                            MemberState::Deleting => InstanceState::InstanceDeleting,
                        }
                        .into(),
                        error_info: i.error.map(|e| proto::InstanceErrorInfo {
                            error_code: e.code,
                            error_message: e.message,
                            instance_error_class: e.class,
                        }),
                    }),
                })
                .collect(),
        })
    }

    async fn node_group_template_node_info(
        &self,
        req: Request<proto::NodeGroupTemplateNodeInfoRequest>,
    ) -> Rpc<proto::NodeGroupTemplateNodeInfoResponse> {
        let g = self.group(&req.into_inner().id)?;
        let bytes = self.template(g).await?;
        ok(proto::NodeGroupTemplateNodeInfoResponse {
            // Older autoscalers read the node as a message at field 1: the
            // same bytes on the wire.
            legacy_node_info: bytes.clone(),
            node_bytes: bytes,
            resource_slice_bytes: Vec::new(),
        })
    }

    async fn node_group_get_options(
        &self,
        req: Request<proto::NodeGroupAutoscalingOptionsRequest>,
    ) -> Rpc<proto::NodeGroupAutoscalingOptionsResponse> {
        let req = req.into_inner();
        let g = self.group(&req.id)?;
        if g.options.is_empty() {
            // The autoscaler then keeps its defaults for the group.
            return Err(AutoscalerError::Unimplemented(format!(
                "group {} sets no options of its own",
                g.id()
            ))
            .into());
        }
        ok(proto::NodeGroupAutoscalingOptionsResponse {
            node_group_autoscaling_options: Some(options(req.defaults, &g.options)),
        })
    }
}
