//! Write a wasmprov provisioner plugin in plain Rust.
//!
//! Implement [`Provider`] for a type, register it with [`export_provider!`],
//! and build the crate as a `cdylib` for `wasm32-wasip2`: the result is a
//! component the wasmprov host loads from its plugin directory.
//!
//! The plugin runs in a sandbox that grants nothing by default. What the
//! operator grants in the plugin's manifest is reachable through the helper
//! modules: [`http`] (JSON over `wasi:http`), [`exec`] (granted programs),
//! [`config`] (values and secrets over `wasi:config`) and [`log`]. Helpers
//! for the chores every provider has live in [`shape`] (shape → cheapest
//! instance type), [`tags`] (ownership and request-id labels) and
//! [`Error`] conversions that work with `?`; [`state`] maps a cloud's state
//! names onto the contract's join states.
//!
//! For a plain REST cloud, [`rest`] does provision (lookup before create),
//! terminate and get (owner checked first) and describe (every page) from
//! the cloud's endpoints and mappings, with [`pages`] walking any kind of
//! pagination, [`classify`] turning error answers into the contract's
//! errors and [`tags`] encoding labels into what the cloud stores.
//! With the `cloud-config` feature, `cloud_config` joins what a plugin adds
//! (a join command, SSH keys) into the caller's `#cloud-config` user data.
//!
//! A provider that can relabel a live node overrides
//! [`Provider::set_labels`]; one that also has stable addresses, load
//! balancer target groups or subnet capacity implements [`Networking`] and
//! registers with `export_provider!(MyCloud, networking)`, which exports the
//! contract's optional `networking` interface (the `networked-provider`
//! world). Without it the component exports no `networking`, and the host
//! answers those calls `unsupported` without asking it.
//!
//! ```no_run
//! use wasmprov_guest::{
//!     export_provider, CapacityType, Error, NodeHandle, NodeShape, PriceHint, Provider,
//!     ProvisionRequest, Result,
//! };
//!
//! struct Tiny;
//!
//! impl Provider for Tiny {
//!     const NAME: &'static str = "tiny";
//!
//!     fn new() -> Result<Self> {
//!         Ok(Tiny)
//!     }
//!     fn price_hint(&self, shape: &NodeShape) -> Result<Option<PriceHint>> {
//!         Ok(Some(PriceHint {
//!             hourly_usd: 0.01 * shape.cpu,
//!             capacity_type: CapacityType::OnDemand,
//!             instance_type: "tiny-1".into(),
//!         }))
//!     }
//!     fn provision(&self, _owner: &str, _req: &ProvisionRequest) -> Result<NodeHandle> {
//!         Err(Error::Unsupported("tiny cannot create nodes".into()))
//!     }
//!     fn terminate(&self, _owner: &str, id: &str) -> Result<()> {
//!         Err(Error::NotFound(id.into()))
//!     }
//!     fn describe(&self, _owner: &str) -> Result<Vec<NodeHandle>> {
//!         Ok(Vec::new())
//!     }
//! }
//!
//! export_provider!(Tiny);
//! ```
#![deny(missing_docs)]

extern crate self as wasmprov_guest;

pub mod boot;
pub mod classify;
#[cfg(feature = "cloud-config")]
pub mod cloud_config;
pub mod config;
pub mod exec;
pub mod http;
pub mod ids;
pub mod log;
pub mod pages;
pub mod random;
pub mod rest;
pub mod shape;
pub mod state;
pub mod tags;
pub mod time;

mod convert;

/// What most providers use: `use wasmprov_guest::prelude::*;`.
pub mod prelude {
    pub use crate::classify::{ErrorAt, Kind, Rule};
    pub use crate::config::{self, Secret};
    pub use crate::http::{Request, Response};
    pub use crate::pages::Paging;
    pub use crate::rest::{self, Fields, Listing, RestCloud, Settings, Wasi};
    pub use crate::shape::{self, CatalogueEntry, Criteria, Entry};
    pub use crate::state::StateTable;
    pub use crate::tags::{self, FlatTags, TagCodec};
    pub use crate::{
        AddressKind, AddressRequest, Arch, BootData, BootSupport, CapacityScope, CapacityType,
        Error, JoinState, Labels, Networking, NodeHandle, NodeShape, NodeStatus, Offering,
        PriceHint, Provider, ProvisionRequest, Result, StableAddress, SubnetCapacity, Target,
        export_provider, rest_calls,
    };
    pub use crate::{boot, random, time};
    pub use serde_json::{Value, json};
}

pub use wasmprov_api::{
    AddressKind, AddressRequest, Arch, BootData, CapacityScope, CapacityType, JoinState, Labels,
    NodeHandle, NodeShape, NodeStatus, Offering, PriceHint, ProvisionRequest,
    ProvisionerError as Error, StableAddress, SubnetCapacity, Target,
};

/// Result of provider operations; the error is the contract's error variant.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The contract version this SDK builds plugins for.
pub const CONTRACT_VERSION: &str = "0.3.0";

/// What [`export_provider!`] writes into the component's `wasmprov-contract`
/// custom section, so the host can name the version a plugin was built for.
#[doc(hidden)]
pub const CONTRACT_SECTION: &[u8] =
    concat!("wasmprov:provisioner@0.3.0;sdk=", env!("CARGO_PKG_VERSION")).as_bytes();

/// Which fields of a request's [`BootData`] a provider honours. The export
/// glue refuses a request that gives any other field with
/// [`Error::Unsupported`] before the provider sees it, so no boot data is
/// ever dropped silently.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BootSupport {
    /// The image to boot.
    pub image: bool,
    /// User data for the first boot.
    pub user_data: bool,
    /// SSH public keys to authorize.
    pub ssh_keys: bool,
}

impl BootSupport {
    /// No boot data: every request booting as configured.
    pub const NONE: Self = Self {
        image: false,
        user_data: false,
        ssh_keys: false,
    };
    /// The image and user data, not SSH keys (clouds that take only keys
    /// registered beforehand).
    pub const IMAGE_AND_USER_DATA: Self = Self {
        image: true,
        user_data: true,
        ssh_keys: false,
    };
    /// Every field.
    pub const ALL: Self = Self {
        image: true,
        user_data: true,
        ssh_keys: true,
    };

    /// The fields `boot` gives that are not supported.
    #[must_use]
    pub fn refused(self, boot: &BootData) -> Vec<&'static str> {
        boot.given()
            .into_iter()
            .filter(|f| match *f {
                "image" => !self.image,
                "user_data" => !self.user_data,
                _ => !self.ssh_keys,
            })
            .collect()
    }
}

/// A provisioner backend.
///
/// The host makes a fresh instance of the plugin for every call (an operator
/// may let one instance answer several `price_hint` calls, which do no I/O).
/// [`new`](Provider::new) runs once per instance, at its first call: read
/// configuration there, and keep no state between calls (the cloud is the
/// source of truth).
pub trait Provider: Sized {
    /// A short, stable name of the backend, such as `"hetzner"`.
    const NAME: &'static str;

    /// The boot data fields [`provision`](Provider::provision) honours
    /// (default: none; requests that give any are refused).
    const BOOT: BootSupport = BootSupport::NONE;

    /// Whether [`provision`](Provider::provision) places a node in the
    /// subnet a request names ([`ProvisionRequest::subnet`]). When false
    /// (the default) the export glue refuses a request that names one with
    /// [`Error::Unsupported`] before the provider sees it, so a node is
    /// never placed elsewhere than asked.
    const SUBNET: bool = false;

    /// The capacity types the backend really offers (default: on-demand only).
    fn capacity_types() -> Vec<CapacityType> {
        vec![CapacityType::OnDemand]
    }

    /// Builds the provider, usually from [`config`]; the instance keeps it
    /// for its later calls. A failure is not kept: the next call tries again.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when configuration is missing or wrong.
    fn new() -> Result<Self>;

    /// An estimate for `shape` naming the instance type priced, or `None`.
    /// The host refuses HTTP and exec during this call: price from tables.
    ///
    /// # Errors
    /// Any contract error, such as [`Error::Unsupported`] for an impossible shape.
    fn price_hint(&self, shape: &NodeShape) -> Result<Option<PriceHint>>;

    /// Creates a node for `request`, tagged with `owner_id` and the request id,
    /// or returns the node an earlier call with the same request id created.
    ///
    /// # Errors
    /// Any contract error.
    fn provision(&self, owner_id: &str, request: &ProvisionRequest) -> Result<NodeHandle>;

    /// Terminates a node carrying `owner_id`. A node already gone, or not
    /// owned, is [`Error::NotFound`].
    ///
    /// # Errors
    /// Any contract error.
    fn terminate(&self, owner_id: &str, provider_id: &str) -> Result<()>;

    /// Every node tagged with `owner_id`, and no other.
    ///
    /// # Errors
    /// Any contract error.
    fn describe(&self, owner_id: &str) -> Result<Vec<NodeHandle>>;

    /// The node `provider_id` when it exists and carries `owner_id`, else
    /// `None`. The default looks for it in [`describe`](Provider::describe);
    /// override it to ask the cloud for the one node.
    ///
    /// # Errors
    /// Any contract error.
    fn get(&self, owner_id: &str, provider_id: &str) -> Result<Option<NodeHandle>> {
        Ok(self
            .describe(owner_id)?
            .into_iter()
            .find(|n| n.provider_id == provider_id))
    }

    /// Every instance type the provider can create ([`shape::offerings`]
    /// makes this from a catalogue). May do I/O. Must agree with
    /// [`price_hint`](Provider::price_hint). The default is
    /// [`Error::Unsupported`].
    ///
    /// # Errors
    /// Any contract error.
    fn offerings(&self) -> Result<Vec<Offering>> {
        Err(Error::Unsupported(format!(
            "{} lists no offerings",
            Self::NAME
        )))
    }

    /// Replaces the labels of node `provider_id`, which must carry
    /// `owner_id` (another owner's node, or one gone, is
    /// [`Error::NotFound`]), with `labels`, keeping its ownership and
    /// request labels ([`tags::OWNER`], [`tags::REQUEST`], ...), and
    /// answers the node as it is now. `labels` never holds a reserved key
    /// (the host and the export glue refuse one). The default is
    /// [`Error::Unsupported`], for clouds that cannot relabel a live node.
    ///
    /// # Errors
    /// Any contract error.
    fn set_labels(&self, owner_id: &str, provider_id: &str, labels: &Labels) -> Result<NodeHandle> {
        let _ = (owner_id, provider_id, labels);
        Err(Error::Unsupported(format!(
            "{} cannot change the labels of a live node",
            Self::NAME
        )))
    }
}

/// What a provider with the contract's optional `networking` interface
/// also does: addresses that outlive a node, load balancer target groups
/// and subnet capacity. Register it with `export_provider!(MyCloud,
/// networking)`. Every call that names a node acts only on a node carrying
/// `owner_id` (another owner's node is [`Error::NotFound`], as in
/// [`Provider::get`]). Each call defaults to [`Error::Unsupported`], so a
/// provider implements what its cloud has.
///
/// ```no_run
/// use wasmprov_guest::prelude::*;
///
/// struct Tiny;
///
/// impl Provider for Tiny {
///     const NAME: &'static str = "tiny";
///     fn new() -> Result<Self> {
///         Ok(Tiny)
///     }
///     fn price_hint(&self, _shape: &NodeShape) -> Result<Option<PriceHint>> {
///         Ok(None)
///     }
///     fn provision(&self, _owner: &str, _req: &ProvisionRequest) -> Result<NodeHandle> {
///         Err(Error::Unsupported("tiny cannot create nodes".into()))
///     }
///     fn terminate(&self, _owner: &str, id: &str) -> Result<()> {
///         Err(Error::NotFound(id.into()))
///     }
///     fn describe(&self, _owner: &str) -> Result<Vec<NodeHandle>> {
///         Ok(Vec::new())
///     }
/// }
///
/// impl Networking for Tiny {
///     fn subnet_capacity(&self, subnet: &str) -> Result<SubnetCapacity> {
///         Ok(SubnetCapacity {
///             subnet: subnet.to_string(),
///             available_addresses: 250,
///             total_addresses: Some(251),
///             zone: None,
///         })
///     }
/// }
///
/// export_provider!(Tiny, networking);
/// ```
pub trait Networking: Provider {
    /// Puts a stable address on node `provider_id` (moving it from any
    /// other node), and answers where it is now. Doing it again is no
    /// change.
    ///
    /// # Errors
    /// Any contract error.
    fn assign_address(
        &self,
        owner_id: &str,
        provider_id: &str,
        request: &AddressRequest,
    ) -> Result<StableAddress> {
        let _ = (owner_id, provider_id, request);
        Err(lacks::<Self>("stable addresses"))
    }

    /// Takes `address` (an IP or the cloud's id of it) off node
    /// `provider_id`; the address stays the account's. An address not on
    /// the node is [`Error::NotFound`].
    ///
    /// # Errors
    /// Any contract error.
    fn release_address(&self, owner_id: &str, provider_id: &str, address: &str) -> Result<()> {
        let _ = (owner_id, provider_id, address);
        Err(lacks::<Self>("stable addresses"))
    }

    /// Adds a node to a target group; adding it again is no change.
    ///
    /// # Errors
    /// Any contract error.
    fn register_target(&self, owner_id: &str, target: &Target) -> Result<()> {
        let _ = (owner_id, target);
        Err(lacks::<Self>("target groups"))
    }

    /// Takes a node out of a target group; a node not in it is
    /// [`Error::NotFound`].
    ///
    /// # Errors
    /// Any contract error.
    fn deregister_target(&self, owner_id: &str, target: &Target) -> Result<()> {
        let _ = (owner_id, target);
        Err(lacks::<Self>("target groups"))
    }

    /// Every target of `group`, the owner's nodes and any other.
    ///
    /// # Errors
    /// Any contract error.
    fn list_targets(&self, owner_id: &str, group: &str) -> Result<Vec<Target>> {
        let _ = (owner_id, group);
        Err(lacks::<Self>("target groups"))
    }

    /// How many addresses `subnet` has free.
    ///
    /// # Errors
    /// Any contract error.
    fn subnet_capacity(&self, subnet: &str) -> Result<SubnetCapacity> {
        let _ = subnet;
        Err(lacks::<Self>("subnet capacity"))
    }
}

fn lacks<P: Provider>(what: &str) -> Error {
    Error::Unsupported(format!("{} has no {what}", P::NAME))
}

/// Registers a [`Provider`] as the component's export.
///
/// Use it once, at the crate root of a `cdylib` built for `wasm32-wasip2`.
/// With `capabilities = "capabilities.toml"` it also embeds that file (a
/// path relative to the crate's `Cargo.toml`) in the component's
/// `wasmprov-capabilities` section: the plugin's declaration of the HTTP
/// destinations, programs, config keys and secrets it needs, which
/// `wasmprov install` turns into a manifest and `wasmprov inspect` compares
/// with the grants (format: `wasmprov_policy::requests`).
///
/// With `networking` (first) it exports the contract's optional
/// `networking` interface too, served by the provider's [`Networking`]
/// implementation.
///
/// ```ignore
/// wasmprov_guest::export_provider!(MyCloud, capabilities = "capabilities.toml");
/// wasmprov_guest::export_provider!(MyCloud, networking);
/// wasmprov_guest::export_provider!(MyCloud, networking, capabilities = "capabilities.toml");
/// ```
#[macro_export]
macro_rules! export_provider {
    ($provider:ty, networking, capabilities = $file:literal) => {
        $crate::export_provider!($provider, networking);
        $crate::__capabilities_section!($file);
    };
    ($provider:ty, networking) => {
        #[doc(hidden)]
        #[cfg(target_arch = "wasm32")]
        type __WasmprovExport = $crate::Export<$provider>;
        #[cfg(target_arch = "wasm32")]
        $crate::wit::__export_provider_world!(__WasmprovExport with_types_in $crate::wit);
        #[cfg(target_arch = "wasm32")]
        $crate::wit_net::__export_networked_provider_world!(__WasmprovExport with_types_in $crate::wit_net);
        #[cfg(not(target_arch = "wasm32"))]
        const _: () = {
            let _ = $crate::__use_provider::<$provider>;
            let _ = $crate::__use_networking::<$provider>;
        };
        $crate::__contract_section!();
    };
    ($provider:ty, capabilities = $file:literal) => {
        $crate::export_provider!($provider);
        $crate::__capabilities_section!($file);
    };
    ($provider:ty) => {
        // The export glue only links on wasm; native builds (unit tests of a
        // plugin's `rlib`) leave it out.
        #[doc(hidden)]
        #[cfg(target_arch = "wasm32")]
        type __WasmprovExport = $crate::Export<$provider>;
        #[cfg(target_arch = "wasm32")]
        $crate::wit::__export_provider_world!(__WasmprovExport with_types_in $crate::wit);
        // Natively, still mark the provider as used.
        #[cfg(not(target_arch = "wasm32"))]
        const _: () = {
            let _ = $crate::__use_provider::<$provider>;
        };
        $crate::__contract_section!();
    };
}

/// The `wasmprov-capabilities` section of [`export_provider!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __capabilities_section {
    ($file:literal) => {
        #[doc(hidden)]
        #[cfg(target_arch = "wasm32")]
        #[allow(unsafe_code, reason = "a custom section must be placed by the linker")]
        #[unsafe(link_section = "wasmprov-capabilities")]
        #[used]
        static __WASMPROV_CAPABILITIES: [u8; include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/",
            $file
        ))
        .len()] = *include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $file));
    };
}

/// The `wasmprov-contract` section of [`export_provider!`].
#[doc(hidden)]
#[macro_export]
macro_rules! __contract_section {
    () => {
        #[doc(hidden)]
        #[cfg(target_arch = "wasm32")]
        #[allow(unsafe_code, reason = "a custom section must be placed by the linker")]
        #[unsafe(link_section = "wasmprov-contract")]
        #[used]
        static __WASMPROV_CONTRACT: [u8; $crate::CONTRACT_SECTION.len()] =
            $crate::__section::<{ $crate::CONTRACT_SECTION.len() }>();
    };
}

#[doc(hidden)]
pub fn __use_provider<P: Provider + 'static>() {
    use wit::exports::wasmprov::provisioner0_3_0::provisioner::Guest;
    let _ = <Export<P> as Guest>::name;
    let _ = <Export<P> as Guest>::provision;
    let _ = <Export<P> as Guest>::describe;
    let _ = <Export<P> as Guest>::terminate;
    let _ = <Export<P> as Guest>::price_hint;
    let _ = <Export<P> as Guest>::capacity_types;
    let _ = <Export<P> as Guest>::get;
    let _ = <Export<P> as Guest>::offerings;
    let _ = <Export<P> as Guest>::set_labels;
}

#[doc(hidden)]
pub fn __use_networking<P: Networking + 'static>() {
    use wit_net::exports::wasmprov::provisioner0_3_0::networking::Guest;
    let _ = <Export<P> as Guest>::assign_address;
    let _ = <Export<P> as Guest>::release_address;
    let _ = <Export<P> as Guest>::register_target;
    let _ = <Export<P> as Guest>::deregister_target;
    let _ = <Export<P> as Guest>::list_targets;
    let _ = <Export<P> as Guest>::subnet_capacity;
}

#[doc(hidden)]
#[must_use]
pub const fn __section<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = CONTRACT_SECTION[i];
        i += 1;
    }
    out
}

/// Glue between a [`Provider`] and the generated export; not for direct use.
#[doc(hidden)]
#[derive(Debug)]
pub struct Export<T>(std::marker::PhantomData<T>);

#[doc(hidden)]
#[allow(missing_docs, unsafe_code, reason = "generated bindings")]
#[allow(clippy::all, reason = "generated bindings")]
pub mod wit {
    wit_bindgen::generate!({
        // `wit` links to the repository's top-level `wit/`, so the
        // packaged crate carries the contract it was built for.
        path: "wit",
        world: "wasmprov:provisioner/provider@0.3.0",
        // Every standard WASI interface the world declares is the wasip2
        // crate's; only what the SDK or a plugin calls is imported.
        with: {
            "wasi:http/types@0.2.12": wasip2::http::types,
            "wasi:http/outgoing-handler@0.2.12": wasip2::http::outgoing_handler,
            "wasi:io/poll@0.2.12": wasip2::io::poll,
            "wasi:io/streams@0.2.12": wasip2::io::streams,
            "wasi:io/error@0.2.12": wasip2::io::error,
            "wasi:clocks/monotonic-clock@0.2.12": wasip2::clocks::monotonic_clock,
            "wasi:clocks/wall-clock@0.2.12": wasip2::clocks::wall_clock,
            "wasi:cli/environment@0.2.12": wasip2::cli::environment,
            "wasi:cli/exit@0.2.12": wasip2::cli::exit,
            "wasi:cli/stdin@0.2.12": wasip2::cli::stdin,
            "wasi:cli/stdout@0.2.12": wasip2::cli::stdout,
            "wasi:cli/stderr@0.2.12": wasip2::cli::stderr,
            "wasi:cli/terminal-input@0.2.12": wasip2::cli::terminal_input,
            "wasi:cli/terminal-output@0.2.12": wasip2::cli::terminal_output,
            "wasi:cli/terminal-stdin@0.2.12": wasip2::cli::terminal_stdin,
            "wasi:cli/terminal-stdout@0.2.12": wasip2::cli::terminal_stdout,
            "wasi:cli/terminal-stderr@0.2.12": wasip2::cli::terminal_stderr,
            "wasi:filesystem/types@0.2.12": wasip2::filesystem::types,
            "wasi:filesystem/preopens@0.2.12": wasip2::filesystem::preopens,
            "wasi:sockets/network@0.2.12": wasip2::sockets::network,
            "wasi:sockets/instance-network@0.2.12": wasip2::sockets::instance_network,
            "wasi:sockets/udp@0.2.12": wasip2::sockets::udp,
            "wasi:sockets/udp-create-socket@0.2.12": wasip2::sockets::udp_create_socket,
            "wasi:sockets/tcp@0.2.12": wasip2::sockets::tcp,
            "wasi:sockets/tcp-create-socket@0.2.12": wasip2::sockets::tcp_create_socket,
            "wasi:sockets/ip-name-lookup@0.2.12": wasip2::sockets::ip_name_lookup,
            "wasi:random/random@0.2.12": wasip2::random::random,
            "wasi:random/insecure@0.2.12": wasip2::random::insecure,
            "wasi:random/insecure-seed@0.2.12": wasip2::random::insecure_seed,
            "wasi:config/store@0.2.0-rc.1": generate,
            "wasmprov:provisioner/types@0.3.0": generate,
            "wasmprov:provisioner/exec@0.3.0": generate,
            "wasmprov:provisioner/log@0.3.0": generate,
            "wasmprov:provisioner/http@0.3.0": generate,
        },
        pub_export_macro: true,
        export_macro_name: "__export_provider_world",
        default_bindings_module: "wasmprov_guest::wit",
    });
}

/// The contract's optional `networking` export, on the types of [`wit`]
/// (reused through `with`). Its export macro is used only by
/// `export_provider!(P, networking)`, beside `wit`'s: together they export
/// the `networked-provider` world. Its sections carry no exports otherwise.
#[doc(hidden)]
#[allow(missing_docs, unsafe_code, reason = "generated bindings")]
#[allow(clippy::all, reason = "generated bindings")]
pub mod wit_net {
    wit_bindgen::generate!({
        // Only the `networking` export: the provisioner export (and every
        // import) is `wit`'s, so that the two modules' export macros do not
        // collide. The component built with both targets
        // `wasmprov:provisioner/networked-provider@0.3.0`.
        inline: "
            package wasmprov:guest-sdk;

            world networking-export {
                export wasmprov:provisioner/networking@0.3.0;
            }
        ",
        path: "wit",
        world: "wasmprov:guest-sdk/networking-export",
        with: {
            "wasmprov:provisioner/types@0.3.0": wasmprov_guest::wit::wasmprov::provisioner0_3_0::types,
        },
        pub_export_macro: true,
        export_macro_name: "__export_networked_provider_world",
        default_bindings_module: "wasmprov_guest::wit_net",
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn contract_version_matches_the_api_crate() {
        assert_eq!(super::CONTRACT_VERSION, wasmprov_api::CONTRACT_VERSION);
        let section = std::str::from_utf8(super::CONTRACT_SECTION).unwrap();
        assert!(section.starts_with(&format!(
            "wasmprov:provisioner@{};",
            super::CONTRACT_VERSION
        )));
        assert_eq!(&super::__section::<5>(), b"wasmp");
    }
}
