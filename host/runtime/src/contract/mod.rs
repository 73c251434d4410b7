//! Where contract versions are decided: which versions a component may be
//! built for, and how each one's calls and types map onto the Rust trait.
//! The current version (`v02`) maps field for field; older ones (`v01`) are
//! adapted here, so nothing else in the host knows there is more than one.
//!
//! Every call returns the plugin's answer converted but not yet checked:
//! `answers` checks it, once, for every version alike.

use wasmprov_api::{
    CapacityType, NodeHandle, NodeShape, Offering, PriceHint, ProvisionRequest, ProvisionerError,
};
use wasmtime::Store;
use wasmtime::component::InstancePre;

use crate::bindings::{v01 as b01, v02 as b02};
use crate::state::CallState;

pub(crate) mod v01;
pub(crate) mod v02;

/// The current version: what the SDK builds and what every feature needs.
pub const CURRENT: &str = wasmprov_api::CONTRACT_VERSION;

/// Every version this host loads, newest first.
pub const SUPPORTED: [&str; 2] = [CURRENT, v01::VERSION];

/// How `SUPPORTED` reads in a message.
pub(crate) fn supported_text() -> String {
    SUPPORTED
        .iter()
        .map(|v| format!("wasmprov:provisioner@{v}"))
        .collect::<Vec<_>>()
        .join(" and ")
}

/// A plugin's answer: the host could not run the call (`Err`), or the
/// plugin answered with a value or its own error.
pub(crate) type Answer<T> = wasmtime::Result<Result<T, ProvisionerError>>;

/// A component pre-linked for the version it was built for.
pub(crate) enum Pre {
    V02(b02::ProviderPre<CallState>),
    V01(b01::ProviderPre<CallState>),
}

/// One instance of a plugin.
pub(crate) enum Instance {
    V02(b02::Provider),
    V01(b01::Provider),
}

impl Pre {
    /// Pre-links `pre` as `version`, which must be one of [`SUPPORTED`].
    pub(crate) fn new(version: &str, pre: InstancePre<CallState>) -> wasmtime::Result<Self> {
        Ok(if version == v01::VERSION {
            Self::V01(b01::ProviderPre::new(pre)?)
        } else {
            Self::V02(b02::ProviderPre::new(pre)?)
        })
    }

    /// The version the component was built for.
    pub(crate) fn version(&self) -> &'static str {
        match self {
            Self::V02(_) => CURRENT,
            Self::V01(_) => v01::VERSION,
        }
    }

    pub(crate) async fn instantiate(
        &self,
        store: &mut Store<CallState>,
    ) -> wasmtime::Result<Instance> {
        Ok(match self {
            Self::V02(p) => Instance::V02(p.instantiate_async(store).await?),
            Self::V01(p) => Instance::V01(p.instantiate_async(store).await?),
        })
    }
}

impl Instance {
    pub(crate) async fn name(&self, store: &mut Store<CallState>) -> wasmtime::Result<String> {
        match self {
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
            Self::V02(p) => p
                .wasmprov_provisioner0_2_0_provisioner()
                .call_provision(store, &v02::request_to_wit(owner_id, request))
                .await?
                .map(v02::handle)
                .map_err(v02::error),
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
}
