//! Where contract versions are decided: which versions a component may be
//! built for, and how each one's calls and types map onto the Rust trait.
//! The current version (`v03`) maps field for field; older ones (`v02`,
//! `v01`) are adapted here, so nothing else in the host knows there is more
//! than one. Which interfaces beyond the core a component has (0.3's
//! `set-labels` and optional `networking` export) is read from its exports
//! at load ([`interfaces`]); a call to one it lacks never gets this far.
//!
//! Every call returns the plugin's answer converted but not yet checked:
//! `answers` checks it, once, for every version alike.

use wasmprov_api::{
    AddressRequest, CapacityType, Interfaces, Labels, NodeHandle, NodeShape, Offering, PriceHint,
    ProvisionRequest, ProvisionerError, StableAddress, SubnetCapacity, Target,
};
use wasmtime::Store;
use wasmtime::component::InstancePre;

use crate::bindings::{v01 as b01, v02 as b02, v03 as b03, v03_net::networking as b03n};
use crate::state::CallState;

pub(crate) mod v01;
pub(crate) mod v02;
pub(crate) mod v03;

/// The current version: what the SDK builds and what every feature needs.
pub const CURRENT: &str = wasmprov_api::CONTRACT_VERSION;

/// Every version this host loads, newest first.
pub const SUPPORTED: [&str; 3] = [CURRENT, v02::VERSION, v01::VERSION];

/// The name of the optional `networking` export of the current version.
pub(crate) const NETWORKING_EXPORT: &str = "wasmprov:provisioner/networking@0.3.0";

/// How `SUPPORTED` reads in a message.
pub(crate) fn supported_text() -> String {
    let all: Vec<String> = SUPPORTED
        .iter()
        .map(|v| format!("wasmprov:provisioner@{v}"))
        .collect();
    match all.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => all.join(""),
    }
}

/// The interfaces a component built for `version` has, given the names of
/// its exports: `set-labels` from 0.3 on, `networking` when a 0.3
/// component exports it.
pub(crate) fn interfaces(version: &str, exports: &[String]) -> Interfaces {
    let current = version == CURRENT;
    Interfaces {
        set_labels: current,
        networking: current && exports.iter().any(|e| e == NETWORKING_EXPORT),
    }
}

/// A plugin's answer: the host could not run the call (`Err`), or the
/// plugin answered with a value or its own error.
pub(crate) type Answer<T> = wasmtime::Result<Result<T, ProvisionerError>>;

/// A component pre-linked for the version it was built for.
pub(crate) enum Pre {
    V03 {
        pre: InstancePre<CallState>,
        provider: b03::ProviderIndices,
        /// Where the `networking` export is, when the component has one.
        networking: Option<b03n::GuestIndices>,
    },
    V02(b02::ProviderPre<CallState>),
    V01(b01::ProviderPre<CallState>),
}

/// One instance of a plugin.
pub(crate) enum Instance {
    V03 {
        provider: b03::Provider,
        networking: Option<b03n::Guest>,
    },
    V02(b02::Provider),
    V01(b01::Provider),
}

impl Pre {
    /// Pre-links `pre` as `version`, which must be one of [`SUPPORTED`],
    /// with the interfaces read from its exports.
    pub(crate) fn new(
        version: &str,
        interfaces: Interfaces,
        pre: InstancePre<CallState>,
    ) -> wasmtime::Result<Self> {
        Ok(if version == v01::VERSION {
            Self::V01(b01::ProviderPre::new(pre)?)
        } else if version == v02::VERSION {
            Self::V02(b02::ProviderPre::new(pre)?)
        } else {
            let provider = b03::ProviderIndices::new(&pre)?;
            let networking = if interfaces.networking {
                Some(b03n::GuestIndices::new(&pre)?)
            } else {
                None
            };
            Self::V03 {
                pre,
                provider,
                networking,
            }
        })
    }

    /// The version the component was built for.
    pub(crate) fn version(&self) -> &'static str {
        match self {
            Self::V03 { .. } => CURRENT,
            Self::V02(_) => v02::VERSION,
            Self::V01(_) => v01::VERSION,
        }
    }

    pub(crate) async fn instantiate(
        &self,
        store: &mut Store<CallState>,
    ) -> wasmtime::Result<Instance> {
        Ok(match self {
            Self::V03 {
                pre,
                provider,
                networking,
            } => {
                let instance = pre.instantiate_async(&mut *store).await?;
                let provider = provider.load(&mut *store, &instance)?;
                let networking = match networking {
                    Some(n) => Some(n.load(&mut *store, &instance)?),
                    None => None,
                };
                Instance::V03 {
                    provider,
                    networking,
                }
            }
            Self::V02(p) => Instance::V02(p.instantiate_async(store).await?),
            Self::V01(p) => Instance::V01(p.instantiate_async(store).await?),
        })
    }
}

impl Instance {
    pub(crate) async fn name(&self, store: &mut Store<CallState>) -> wasmtime::Result<String> {
        match self {
            Self::V03 { provider: p, .. } => {
                p.wasmprov_provisioner0_3_0_provisioner()
                    .call_name(store)
                    .await
            }
            Self::V02(p) => {
                p.wasmprov_provisioner0_2_0_provisioner()
                    .call_name(store)
                    .await
            }
            Self::V01(p) => {
                p.wasmprov_provisioner0_1_0_provisioner()
                    .call_name(store)
                    .await
            }
        }
    }

    pub(crate) async fn capacity_types(
        &self,
        store: &mut Store<CallState>,
    ) -> wasmtime::Result<Vec<CapacityType>> {
        Ok(match self {
            Self::V03 { provider: p, .. } => p
                .wasmprov_provisioner0_3_0_provisioner()
                .call_capacity_types(store)
                .await?
                .into_iter()
                .map(v03::capacity)
                .collect(),
            Self::V02(p) => p
                .wasmprov_provisioner0_2_0_provisioner()
                .call_capacity_types(store)
                .await?
                .into_iter()
                .map(v02::capacity)
                .collect(),
            Self::V01(p) => p
                .wasmprov_provisioner0_1_0_provisioner()
                .call_capacity_types(store)
                .await?
                .into_iter()
                .map(v01::capacity)
                .collect(),
        })
    }

    pub(crate) async fn price_hint(
        &self,
        store: &mut Store<CallState>,
        shape: &NodeShape,
    ) -> Answer<Option<PriceHint>> {
        Ok(match self {
            Self::V03 { provider: p, .. } => p
                .wasmprov_provisioner0_3_0_provisioner()
                .call_price_hint(store, &v03::shape_to_wit(shape))
                .await?
                .map(|h| h.map(v03::price))
                .map_err(v03::error),
            Self::V02(p) => p
                .wasmprov_provisioner0_2_0_provisioner()
                .call_price_hint(store, &v02::shape_to_wit(shape))
                .await?
                .map(|h| h.map(v02::price))
                .map_err(v02::error),
            Self::V01(p) => {
                if let Some(refused) = v01::refuse_shape(shape) {
                    return Ok(Err(refused));
                }
                p.wasmprov_provisioner0_1_0_provisioner()
                    .call_price_hint(store, &v01::shape_to_wit(shape))
                    .await?
                    .map(|h| h.map(v01::price))
                    .map_err(v01::error)
            }
        })
    }

    pub(crate) async fn provision(
        &self,
        store: &mut Store<CallState>,
        owner_id: &str,
        request: &ProvisionRequest,
    ) -> Answer<NodeHandle> {
        Ok(match self {
            Self::V03 { provider: p, .. } => p
                .wasmprov_provisioner0_3_0_provisioner()
                .call_provision(store, &v03::request_to_wit(owner_id, request))
                .await?
                .map(v03::handle)
                .map_err(v03::error),
            Self::V02(p) => {
                if let Some(refused) = v02::refuse_request(request) {
                    return Ok(Err(refused));
                }
                p.wasmprov_provisioner0_2_0_provisioner()
                    .call_provision(store, &v02::request_to_wit(owner_id, request))
                    .await?
                    .map(v02::handle)
                    .map_err(v02::error)
            }
            Self::V01(p) => {
                if let Some(refused) = v01::refuse_request(request) {
                    return Ok(Err(refused));
                }
                p.wasmprov_provisioner0_1_0_provisioner()
                    .call_provision(store, &v01::request_to_wit(owner_id, request))
                    .await?
                    .map(v01::handle)
                    .map_err(v01::error)
            }
        })
    }

    pub(crate) async fn terminate(
        &self,
        store: &mut Store<CallState>,
        owner_id: &str,
        provider_id: &str,
    ) -> Answer<()> {
        Ok(match self {
            Self::V03 { provider: p, .. } => p
                .wasmprov_provisioner0_3_0_provisioner()
                .call_terminate(store, owner_id, provider_id)
                .await?
                .map_err(v03::error),
            Self::V02(p) => p
                .wasmprov_provisioner0_2_0_provisioner()
                .call_terminate(store, owner_id, provider_id)
                .await?
                .map_err(v02::error),
            Self::V01(p) => p
                .wasmprov_provisioner0_1_0_provisioner()
                .call_terminate(store, owner_id, provider_id)
                .await?
                .map_err(v01::error),
        })
    }

    pub(crate) async fn describe(
        &self,
        store: &mut Store<CallState>,
        owner_id: &str,
    ) -> Answer<Vec<NodeHandle>> {
        Ok(match self {
            Self::V03 { provider: p, .. } => p
                .wasmprov_provisioner0_3_0_provisioner()
                .call_describe(store, owner_id)
                .await?
                .map(|nodes| nodes.into_iter().map(v03::handle).collect())
                .map_err(v03::error),
            Self::V02(p) => p
                .wasmprov_provisioner0_2_0_provisioner()
                .call_describe(store, owner_id)
                .await?
                .map(|nodes| nodes.into_iter().map(v02::handle).collect())
                .map_err(v02::error),
            Self::V01(p) => p
                .wasmprov_provisioner0_1_0_provisioner()
                .call_describe(store, owner_id)
                .await?
                .map(|nodes| nodes.into_iter().map(v01::handle).collect())
                .map_err(v01::error),
        })
    }

    /// One node. A 0.1 plugin has no `get`: its `describe` answers, and
    /// that answer is checked like any describe before the node is picked.
    pub(crate) async fn get(
        &self,
        store: &mut Store<CallState>,
        owner_id: &str,
        provider_id: &str,
        plugin: &str,
    ) -> Answer<Option<NodeHandle>> {
        Ok(match self {
            Self::V03 { provider: p, .. } => p
                .wasmprov_provisioner0_3_0_provisioner()
                .call_get(store, owner_id, provider_id)
                .await?
                .map(|n| n.map(v03::handle))
                .map_err(v03::error),
            Self::V02(p) => p
                .wasmprov_provisioner0_2_0_provisioner()
                .call_get(store, owner_id, provider_id)
                .await?
                .map(|n| n.map(v02::handle))
                .map_err(v02::error),
            Self::V01(_) => self.describe(store, owner_id).await?.and_then(|nodes| {
                Ok(crate::answers::checked_handles(plugin, nodes)?
                    .into_iter()
                    .find(|n| n.provider_id == provider_id))
            }),
        })
    }

    pub(crate) async fn offerings(
        &self,
        store: &mut Store<CallState>,
        plugin: &str,
    ) -> Answer<Vec<Offering>> {
        Ok(match self {
            Self::V03 { provider: p, .. } => p
                .wasmprov_provisioner0_3_0_provisioner()
                .call_offerings(store)
                .await?
                .map(|list| list.into_iter().map(v03::offering).collect())
                .map_err(v03::error),
            Self::V02(p) => p
                .wasmprov_provisioner0_2_0_provisioner()
                .call_offerings(store)
                .await?
                .map(|list| list.into_iter().map(v02::offering).collect())
                .map_err(v02::error),
            Self::V01(_) => Err(ProvisionerError::Unsupported(format!(
                "plugin {plugin} is built for contract {}, which has no offerings",
                v01::VERSION
            ))),
        })
    }

    /// `set-labels`: only a 0.3 instance has it (the plugin refuses the
    /// call for older ones before instantiating; this answer is the
    /// backstop).
    pub(crate) async fn set_labels(
        &self,
        store: &mut Store<CallState>,
        owner_id: &str,
        provider_id: &str,
        labels: &Labels,
    ) -> Answer<NodeHandle> {
        match self {
            Self::V03 { provider: p, .. } => Ok(p
                .wasmprov_provisioner0_3_0_provisioner()
                .call_set_labels(store, owner_id, provider_id, &v03::labels_to_wit(labels))
                .await?
                .map(v03::handle)
                .map_err(v03::error)),
            _ => Ok(Err(self.lacks("set-labels"))),
        }
    }

    /// The `networking` export, when this instance has it.
    fn networking(&self) -> Option<&b03n::Guest> {
        match self {
            Self::V03 { networking, .. } => networking.as_ref(),
            _ => None,
        }
    }

    fn lacks(&self, call: &str) -> ProvisionerError {
        let version = match self {
            Self::V03 { .. } => CURRENT,
            Self::V02(_) => v02::VERSION,
            Self::V01(_) => v01::VERSION,
        };
        ProvisionerError::Unsupported(format!(
            "the plugin (contract {version}) does not export {call}"
        ))
    }

    pub(crate) async fn assign_address(
        &self,
        store: &mut Store<CallState>,
        owner_id: &str,
        provider_id: &str,
        request: &AddressRequest,
    ) -> Answer<StableAddress> {
        let Some(n) = self.networking() else {
            return Ok(Err(self.lacks("networking")));
        };
        Ok(n.call_assign_address(
            store,
            owner_id,
            provider_id,
            &v03::address_request_to_wit(request),
        )
        .await?
        .map(v03::stable_address)
        .map_err(v03::error))
    }

    pub(crate) async fn release_address(
        &self,
        store: &mut Store<CallState>,
        owner_id: &str,
        provider_id: &str,
        address: &str,
    ) -> Answer<()> {
        let Some(n) = self.networking() else {
            return Ok(Err(self.lacks("networking")));
        };
        Ok(
            n.call_release_address(store, owner_id, provider_id, address)
                .await?
                .map_err(v03::error),
        )
    }

    pub(crate) async fn register_target(
        &self,
        store: &mut Store<CallState>,
        owner_id: &str,
        target: &Target,
    ) -> Answer<()> {
        let Some(n) = self.networking() else {
            return Ok(Err(self.lacks("networking")));
        };
        Ok(
            n.call_register_target(store, owner_id, &v03::target_to_wit(target))
                .await?
                .map_err(v03::error),
        )
    }

    pub(crate) async fn deregister_target(
        &self,
        store: &mut Store<CallState>,
        owner_id: &str,
        target: &Target,
    ) -> Answer<()> {
        let Some(n) = self.networking() else {
            return Ok(Err(self.lacks("networking")));
        };
        Ok(
            n.call_deregister_target(store, owner_id, &v03::target_to_wit(target))
                .await?
                .map_err(v03::error),
        )
    }

    pub(crate) async fn list_targets(
        &self,
        store: &mut Store<CallState>,
        owner_id: &str,
        group: &str,
    ) -> Answer<Vec<Target>> {
        let Some(n) = self.networking() else {
            return Ok(Err(self.lacks("networking")));
        };
        Ok(n.call_list_targets(store, owner_id, group)
            .await?
            .map(|list| list.into_iter().map(v03::target).collect())
            .map_err(v03::error))
    }

    pub(crate) async fn subnet_capacity(
        &self,
        store: &mut Store<CallState>,
        subnet: &str,
    ) -> Answer<SubnetCapacity> {
        let Some(n) = self.networking() else {
            return Ok(Err(self.lacks("networking")));
        };
        Ok(n.call_subnet_capacity(store, subnet)
            .await?
            .map(v03::subnet)
            .map_err(v03::error))
    }
}
