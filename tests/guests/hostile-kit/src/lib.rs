//! The boilerplate shared by the hostile test guests (`tests/guests/hostile-*`).
//!
//! A hostile guest is a provider whose `provision` runs one attack and
//! whose other exports behave normally: `price_hint` returns a fixed hint,
//! `describe` returns `[]`, `terminate` succeeds. An attack on another export
//! overrides that export. Every guest also has a normal path: a `provision`
//! with request id [`NORMAL`] returns a plain node without attacking, so a
//! test can prove the plugin still works after the attack.
//!
//! ```ignore
//! use hostile_kit::prelude::*;
//!
//! hostile_kit::hostile!(|_owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> {
//!     let url = cfg("url")?;
//!     let resp = Request::get(&url).send()?;
//!     Ok(observed(req, &[("status", &resp.status.to_string())]))
//! });
//! ```
//!
//! Attack parameters come from the manifest's `[config]` (see [`cfg`]); what
//! the attack saw goes back in the node's labels (see [`observed`]) or as an
//! error.

use std::marker::PhantomData;

pub use wasmprov_guest as guest;
use wasmprov_guest::{
    CapacityType, JoinState, Labels, NodeHandle, NodeShape, PriceHint, Provider, ProvisionRequest,
    Result,
};

/// Request id that takes the normal path of every hostile guest.
pub const NORMAL: &str = "normal";

/// What hostile guests usually need in scope.
pub mod prelude {
    pub use super::{Attack, NORMAL, cfg, cfg_or, node, observed};
    pub use wasmprov_guest::exec::Command;
    pub use wasmprov_guest::http::{HttpError, Request};
    pub use wasmprov_guest::{
        Error, Labels, NodeHandle, NodeShape, PriceHint, ProvisionRequest, Result, config, log,
    };
}

/// One attack. Only `provision` is required; the other exports behave
/// normally unless the attack overrides them.
pub trait Attack {
    /// The backend name the guest reports (the crate's package name).
    const NAME: &'static str;

    /// The attack, run by `provision` for every request id but [`NORMAL`].
    ///
    /// # Errors
    /// Whatever the sandbox answered the attack with.
    fn provision(owner_id: &str, request: &ProvisionRequest) -> Result<NodeHandle>;

    /// A fixed hint.
    ///
    /// # Errors
    /// Never, unless overridden.
    fn price_hint(shape: &NodeShape) -> Result<Option<PriceHint>> {
        Ok(Some(PriceHint {
            hourly_usd: 0.5,
            capacity_type: shape.capacity_type,
            instance_type: "hostile-1".into(),
        }))
    }

    /// Succeeds.
    ///
    /// # Errors
    /// Never, unless overridden.
    fn terminate(_owner_id: &str, _provider_id: &str) -> Result<()> {
        Ok(())
    }

    /// No nodes.
    ///
    /// # Errors
    /// Never, unless overridden.
    fn describe(_owner_id: &str) -> Result<Vec<NodeHandle>> {
        Ok(Vec::new())
    }

    /// Unsupported, as the guest SDK's default.
    ///
    /// # Errors
    /// `Unsupported`, unless overridden.
    fn set_labels(_owner_id: &str, provider_id: &str, _labels: &Labels) -> Result<NodeHandle> {
        Err(wasmprov_guest::Error::Unsupported(format!(
            "{} cannot change the labels of {provider_id}",
            Self::NAME
        )))
    }
}

/// The provider that runs an [`Attack`]; see [`hostile!`].
#[derive(Debug)]
pub struct Hostile<A>(PhantomData<A>);

impl<A: Attack> Provider for Hostile<A> {
    const NAME: &'static str = A::NAME;

    fn new() -> Result<Self> {
        Ok(Self(PhantomData))
    }

    fn price_hint(&self, shape: &NodeShape) -> Result<Option<PriceHint>> {
        A::price_hint(shape)
    }

    fn provision(&self, owner_id: &str, request: &ProvisionRequest) -> Result<NodeHandle> {
        if request.request_id == NORMAL {
            let mut labels = Labels::new();
            labels.insert("path".into(), NORMAL.into());
            return Ok(node(request, labels));
        }
        A::provision(owner_id, request)
    }

    fn terminate(&self, owner_id: &str, provider_id: &str) -> Result<()> {
        A::terminate(owner_id, provider_id)
    }

    fn describe(&self, owner_id: &str) -> Result<Vec<NodeHandle>> {
        A::describe(owner_id)
    }

    fn set_labels(&self, owner_id: &str, provider_id: &str, labels: &Labels) -> Result<NodeHandle> {
        A::set_labels(owner_id, provider_id, labels)
    }
}

/// A node for `request` carrying `labels`.
#[must_use]
pub fn node(request: &ProvisionRequest, labels: Labels) -> NodeHandle {
    NodeHandle {
        provider_id: request.request_id.clone(),
        address: None,
        zone: request.shape.zone.clone(),
        capacity_type: CapacityType::OnDemand,
        join_state: JoinState::Provisioning,
        instance_type: Some("hostile-1".into()),
        labels,
        ..Default::default()
    }
}

/// A node for `request` whose labels report what the attack observed.
#[must_use]
pub fn observed(request: &ProvisionRequest, what: &[(&str, &str)]) -> NodeHandle {
    node(
        request,
        what.iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
    )
}

/// The `[config]` value `key`, which the test must set.
///
/// # Errors
/// `InvalidConfig` naming the key when it is unset.
pub fn cfg(key: &str) -> Result<String> {
    wasmprov_guest::config::require(key)
}

/// The `[config]` value `key` parsed as `T`, or `default`.
///
/// # Errors
/// `InvalidConfig` naming the key when the value does not parse.
pub fn cfg_or<T: std::str::FromStr>(key: &str, default: T) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    wasmprov_guest::config::parse_or(key, default)
}

/// Defines the guest's provider from an attack and exports it, named after
/// the crate (`CARGO_PKG_NAME`).
///
/// Two forms:
/// - a closure-like `provision`:
///   `hostile!(|owner: &str, req: &ProvisionRequest| -> Result<NodeHandle> { ... })`;
/// - the items of an [`Attack`] impl, to override other exports too:
///   `hostile! { fn provision(..) -> Result<NodeHandle> { .. } fn describe(..) -> .. { .. } }`.
///
/// Bring [`prelude`] into scope first: the types are named in the caller's scope.
#[macro_export]
macro_rules! hostile {
    (|$owner:ident : &str, $req:ident : &ProvisionRequest| -> Result<NodeHandle> $body:block) => {
        $crate::hostile! {
            fn provision($owner: &str, $req: &ProvisionRequest) -> Result<NodeHandle> $body
        }
    };
    ($($items:tt)*) => {
        /// The attack of this guest.
        #[derive(Debug)]
        pub struct HostileAttack;

        impl $crate::Attack for HostileAttack {
            const NAME: &'static str = env!("CARGO_PKG_NAME");
            $($items)*
        }

        $crate::guest::export_provider!($crate::Hostile<HostileAttack>);
    };
}
