//! The Extism peer plugin: `price_hint` takes a `NodeShape` as JSON and
//! answers the `PriceHint` as JSON, computed by the Hetzner plugin's own
//! pricing code.
//!
//! The plugin's `catalogue` (server types and prices) and `settings` modules
//! are compiled in from `plugins/hetzner/src`, the same files the wasmprov
//! component is built from. The plugin crate itself cannot be a dependency
//! here: it registers its component exports (`export_provider!`) on every
//! wasm32 target, and a `cdylib` exports its dependencies' exported symbols,
//! so the module would export the whole provider and import `wasi:http`,
//! `wasi:config` and `wasmprov:provisioner/log`, which an Extism host does
//! not provide.

use extism_pdk::{FnResult, Json, WithReturnCode, plugin_fn};
use wasmprov_guest::{CapacityType, NodeShape, PriceHint};

#[allow(
    dead_code,
    reason = "the plugin's module; the peer uses its pricing only"
)]
#[path = "../../../../../plugins/hetzner/src/catalogue.rs"]
mod catalogue;
#[allow(
    dead_code,
    reason = "the plugin's module; the peer uses its defaults only"
)]
#[path = "../../../../../plugins/hetzner/src/settings.rs"]
mod settings;

use settings::Settings;

/// The price hint for one shape; an error (code 1) when the plugin has no
/// price for it.
#[plugin_fn]
pub fn price_hint(Json(shape): Json<NodeShape>) -> FnResult<Json<PriceHint>> {
    // `Hetzner::estimate` with default settings (no config), as the
    // component's `price_hint` computes it.
    let settings = Settings::default();
    let choice = catalogue::choose(&shape, &settings.location, settings.architecture)
        .map_err(|e| WithReturnCode::new(extism_pdk::Error::msg(e.to_string()), 1))?;
    Ok(Json(PriceHint {
        hourly_usd: choice.hourly_eur * settings.eur_usd,
        capacity_type: CapacityType::OnDemand,
        instance_type: choice.server_type.name.to_string(),
    }))
}
