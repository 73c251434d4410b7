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

use std::sync::Arc;
use wasmprov_api::{
    AddressRequest, CapacityType, Interfaces, Labels, NodeHandle, NodeShape, Offering, PriceHint,
    ProvisionRequest, ProvisionerError, StableAddress, SubnetCapacity, Target,
};

use wasmtime::Store;
use wasmtime::component::{ComponentExportIndex, InstancePre, Lift, Lower, TypedFunc};

use crate::bindings::{v01 as b01, v02 as b02, v03_net::networking as b03n};
use crate::state::CallState;

use crate::bindings::v03::types as w;

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
        /// Where each export is, found once per plugin.
        exports: Arc<Exports03>,
    },
    V02(b02::ProviderPre<CallState>),
    V01(b01::ProviderPre<CallState>),
}

/// Where the functions of a 0.3 component's exports are. A call looks up
/// and type-checks only the function it calls: the generated bindings'
/// `load` type-checks every export of every instance, which was an eighth
/// of a fresh `price_hint` (every export is type-checked once, at load, by
/// [`Instance::check_types`]).
pub(crate) struct Exports03 {
    name: ComponentExportIndex,
    capacity_types: ComponentExportIndex,
    price_hint: ComponentExportIndex,
    provision: ComponentExportIndex,
    terminate: ComponentExportIndex,
    describe: ComponentExportIndex,
    get: ComponentExportIndex,
    offerings: ComponentExportIndex,
    set_labels: ComponentExportIndex,
    /// The `networking` export's functions, when the component has it.
    networking: Option<Networking03>,
}

struct Networking03 {
    assign_address: ComponentExportIndex,
    release_address: ComponentExportIndex,
    register_target: ComponentExportIndex,
    deregister_target: ComponentExportIndex,
    list_targets: ComponentExportIndex,
    subnet_capacity: ComponentExportIndex,
}

/// The export index of `func` in the exported interface `interface`.
fn export_index(
    pre: &InstancePre<CallState>,
    interface: &str,
    func: &str,
) -> wasmtime::Result<ComponentExportIndex> {
    let component = pre.component();
    let iface = component
        .get_export_index(None, interface)
        .ok_or_else(|| wasmtime::format_err!("no exported instance named `{interface}`"))?;
    component
        .get_export_index(Some(&iface), func)
        .ok_or_else(|| wasmtime::format_err!("`{interface}` does not export `{func}`"))
}

impl Exports03 {
    fn new(pre: &InstancePre<CallState>, networking: bool) -> wasmtime::Result<Self> {
        const P: &str = "wasmprov:provisioner/provisioner@0.3.0";
        let f = |name: &str| export_index(pre, P, name);
        let networking = if networking {
            let n = |name: &str| export_index(pre, NETWORKING_EXPORT, name);
            Some(Networking03 {
                assign_address: n("assign-address")?,
                release_address: n("release-address")?,
                register_target: n("register-target")?,
                deregister_target: n("deregister-target")?,
                list_targets: n("list-targets")?,
                subnet_capacity: n("subnet-capacity")?,
            })
        } else {
            None
        };
        Ok(Self {
            name: f("name")?,
            capacity_types: f("capacity-types")?,
            price_hint: f("price-hint")?,
            provision: f("provision")?,
            terminate: f("terminate")?,
            describe: f("describe")?,
            get: f("get")?,
            offerings: f("offerings")?,
            set_labels: f("set-labels")?,
            networking,
        })
    }
}

/// One instance of a plugin.
pub(crate) enum Instance {
    V03 {
        instance: wasmtime::component::Instance,
        exports: Arc<Exports03>,
    },
    V02(b02::Provider),
    V01(b01::Provider),
}

/// Calls the function at `index` of `instance` with `params`, type-checked
/// as `P -> R` (one function, not the whole interface).
async fn call<P, R>(
    store: &mut Store<CallState>,
    instance: &wasmtime::component::Instance,
    index: &ComponentExportIndex,
    params: P,
) -> wasmtime::Result<R>
where
    P: wasmtime::component::ComponentNamedList + Lower + Send + Sync,
    R: wasmtime::component::ComponentNamedList + Lift + Send + Sync + 'static,
{
    let func: TypedFunc<P, R> = instance.get_typed_func(&mut *store, index)?;
    func.call_async(&mut *store, params).await
}

/// A 0.3 call's answer: the plugin's value or its error.
type Wit<T> = Result<T, w::ProvisionError>;

/// Type-checks the function at `index` as `P -> R`, the types its call
/// uses, naming the export when it does not fit.
fn check<P, R>(
    store: &mut Store<CallState>,
    instance: &wasmtime::component::Instance,
    index: &ComponentExportIndex,
    export: &str,
) -> wasmtime::Result<()>
where
    P: wasmtime::component::ComponentNamedList + Lower,
    R: wasmtime::component::ComponentNamedList + Lift,
{
    instance
        .get_typed_func::<P, R>(&mut *store, index)
        .map(drop)
        .map_err(|e| e.context(format!("the export `{export}` has the wrong type")))
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
            let exports = Arc::new(Exports03::new(&pre, interfaces.networking)?);
            Self::V03 { pre, exports }
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
            Self::V03 { pre, exports } => Instance::V03 {
                instance: pre.instantiate_async(&mut *store).await?,
                exports: exports.clone(),
            },
            Self::V02(p) => Instance::V02(p.instantiate_async(store).await?),
            Self::V01(p) => Instance::V01(p.instantiate_async(store).await?),
        })
    }
}

impl Instance {
    /// Type-checks every export of the instance against the types the
    /// calls below use, once per plugin at load (a 0.3 call checks only its
    /// own function; 0.2 and 0.1 instances are checked whole when made).
    pub(crate) fn check_types(&self, store: &mut Store<CallState>) -> wasmtime::Result<()> {
        let Self::V03 {
            instance,
            exports: e,
        } = self
        else {
            return Ok(());
        };
        let (s, i) = (&mut *store, instance);
        check::<(), (String,)>(s, i, &e.name, "name")?;
        check::<(), (Vec<w::CapacityType>,)>(s, i, &e.capacity_types, "capacity-types")?;
        check::<(&w::NodeShape,), (Wit<Option<w::PriceEstimate>>,)>(
            s,
            i,
            &e.price_hint,
            "price-hint",
        )?;
        check::<(&w::ProvisionRequest,), (Wit<w::NodeHandle>,)>(s, i, &e.provision, "provision")?;
        check::<(&str, &str), (Wit<()>,)>(s, i, &e.terminate, "terminate")?;
        check::<(&str,), (Wit<Vec<w::NodeHandle>>,)>(s, i, &e.describe, "describe")?;
        check::<(&str, &str), (Wit<Option<w::NodeHandle>>,)>(s, i, &e.get, "get")?;
        check::<(), (Wit<Vec<w::Offering>>,)>(s, i, &e.offerings, "offerings")?;
        check::<(&str, &str, &w::Labels), (Wit<w::NodeHandle>,)>(
            s,
            i,
            &e.set_labels,
            "set-labels",
        )?;
        if let Some(n) = &e.networking {
            type Req = b03n::AddressRequest;
            check::<(&str, &str, &Req), (Wit<b03n::StableAddress>,)>(
                s,
                i,
                &n.assign_address,
                "assign-address",
            )?;
            check::<(&str, &str, &str), (Wit<()>,)>(s, i, &n.release_address, "release-address")?;
            check::<(&str, &b03n::Target), (Wit<()>,)>(
                s,
                i,
                &n.register_target,
                "register-target",
            )?;
            check::<(&str, &b03n::Target), (Wit<()>,)>(
                s,
                i,
                &n.deregister_target,
                "deregister-target",
            )?;
            check::<(&str, &str), (Wit<Vec<b03n::Target>>,)>(
                s,
                i,
                &n.list_targets,
                "list-targets",
            )?;
            check::<(&str,), (Wit<b03n::SubnetAddresses>,)>(
                s,
                i,
                &n.subnet_capacity,
                "subnet-capacity",
            )?;
        }
        Ok(())
    }

    pub(crate) async fn name(&self, store: &mut Store<CallState>) -> wasmtime::Result<String> {
        match self {
            Self::V03 { instance, exports } => {
                let (name,): (String,) = call(store, instance, &exports.name, ()).await?;
                Ok(name)
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
            Self::V03 { instance, exports } => {
                call::<(), (Vec<w::CapacityType>,)>(store, instance, &exports.capacity_types, ())
                    .await?
                    .0
                    .into_iter()
                    .map(v03::capacity)
                    .collect()
            }
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
            Self::V03 { instance, exports } => {
                let shape = v03::shape_to_wit(shape);
                call::<(&w::NodeShape,), (Wit<Option<w::PriceEstimate>>,)>(
                    store,
                    instance,
                    &exports.price_hint,
                    (&shape,),
                )
                .await?
                .0
                .map(|h| h.map(v03::price))
                .map_err(v03::error)
            }
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
            Self::V03 { instance, exports } => {
                let request = v03::request_to_wit(owner_id, request);
                call::<(&w::ProvisionRequest,), (Wit<w::NodeHandle>,)>(
                    store,
                    instance,
                    &exports.provision,
                    (&request,),
                )
                .await?
                .0
                .map(v03::handle)
                .map_err(v03::error)
            }
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
            Self::V03 { instance, exports } => call::<(&str, &str), (Wit<()>,)>(
                store,
                instance,
                &exports.terminate,
                (owner_id, provider_id),
            )
            .await?
            .0
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
            Self::V03 { instance, exports } => call::<(&str,), (Wit<Vec<w::NodeHandle>>,)>(
                store,
                instance,
                &exports.describe,
                (owner_id,),
            )
            .await?
            .0
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
            Self::V03 { instance, exports } => call::<(&str, &str), (Wit<Option<w::NodeHandle>>,)>(
                store,
                instance,
                &exports.get,
                (owner_id, provider_id),
            )
            .await?
            .0
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
            Self::V03 { instance, exports } => {
                call::<(), (Wit<Vec<w::Offering>>,)>(store, instance, &exports.offerings, ())
                    .await?
                    .0
                    .map(|list| list.into_iter().map(v03::offering).collect())
                    .map_err(v03::error)
            }
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
            Self::V03 { instance, exports } => {
                let labels = v03::labels_to_wit(labels);
                Ok(call::<(&str, &str, &w::Labels), (Wit<w::NodeHandle>,)>(
                    store,
                    instance,
                    &exports.set_labels,
                    (owner_id, provider_id, &labels),
                )
                .await?
                .0
                .map(v03::handle)
                .map_err(v03::error))
            }
            _ => Ok(Err(self.lacks("set-labels"))),
        }
    }

    /// The instance and its `networking` export, when it has one.
    fn networking(&self) -> Option<(&wasmtime::component::Instance, &Networking03)> {
        match self {
            Self::V03 { instance, exports } => exports.networking.as_ref().map(|n| (instance, n)),
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
        let Some((instance, n)) = self.networking() else {
            return Ok(Err(self.lacks("networking")));
        };
        let request = v03::address_request_to_wit(request);
        Ok(
            call::<(&str, &str, &b03n::AddressRequest), (Wit<b03n::StableAddress>,)>(
                store,
                instance,
                &n.assign_address,
                (owner_id, provider_id, &request),
            )
            .await?
            .0
            .map(v03::stable_address)
            .map_err(v03::error),
        )
    }

    pub(crate) async fn release_address(
        &self,
        store: &mut Store<CallState>,
        owner_id: &str,
        provider_id: &str,
        address: &str,
    ) -> Answer<()> {
        let Some((instance, n)) = self.networking() else {
            return Ok(Err(self.lacks("networking")));
        };
        Ok(call::<(&str, &str, &str), (Wit<()>,)>(
            store,
            instance,
            &n.release_address,
            (owner_id, provider_id, address),
        )
        .await?
        .0
        .map_err(v03::error))
    }

    pub(crate) async fn register_target(
        &self,
        store: &mut Store<CallState>,
        owner_id: &str,
        target: &Target,
    ) -> Answer<()> {
        let Some((instance, n)) = self.networking() else {
            return Ok(Err(self.lacks("networking")));
        };
        let target = v03::target_to_wit(target);
        Ok(call::<(&str, &b03n::Target), (Wit<()>,)>(
            store,
            instance,
            &n.register_target,
            (owner_id, &target),
        )
        .await?
        .0
        .map_err(v03::error))
    }

    pub(crate) async fn deregister_target(
        &self,
        store: &mut Store<CallState>,
        owner_id: &str,
        target: &Target,
    ) -> Answer<()> {
        let Some((instance, n)) = self.networking() else {
            return Ok(Err(self.lacks("networking")));
        };
        let target = v03::target_to_wit(target);
        Ok(call::<(&str, &b03n::Target), (Wit<()>,)>(
            store,
            instance,
            &n.deregister_target,
            (owner_id, &target),
        )
        .await?
        .0
        .map_err(v03::error))
    }

    pub(crate) async fn list_targets(
        &self,
        store: &mut Store<CallState>,
        owner_id: &str,
        group: &str,
    ) -> Answer<Vec<Target>> {
        let Some((instance, n)) = self.networking() else {
            return Ok(Err(self.lacks("networking")));
        };
        Ok(call::<(&str, &str), (Wit<Vec<b03n::Target>>,)>(
            store,
            instance,
            &n.list_targets,
            (owner_id, group),
        )
        .await?
        .0
        .map(|list| list.into_iter().map(v03::target).collect())
        .map_err(v03::error))
    }

    pub(crate) async fn subnet_capacity(
        &self,
        store: &mut Store<CallState>,
        subnet: &str,
    ) -> Answer<SubnetCapacity> {
        let Some((instance, n)) = self.networking() else {
            return Ok(Err(self.lacks("networking")));
        };
        Ok(call::<(&str,), (Wit<b03n::SubnetAddresses>,)>(
            store,
            instance,
            &n.subnet_capacity,
            (subnet,),
        )
        .await?
        .0
        .map(v03::subnet)
        .map_err(v03::error))
    }
}
