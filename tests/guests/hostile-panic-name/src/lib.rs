//! Attack: panic in `name()`, which the host calls when it loads the
//! plugin. The plugin must be refused with a clear load error while the
//! other plugins of the directory load. Written on the raw contract
//! bindings, since the SDK's `name()` cannot fail.

use wasmprov_guest::wit::exports::wasmprov::provisioner0_3_0::provisioner::Guest;
use wasmprov_guest::wit::wasmprov::provisioner0_3_0::types as w;

/// The provider whose `name()` panics.
#[derive(Debug)]
#[cfg_attr(not(target_arch = "wasm32"), allow(dead_code))]
pub struct PanicName;

impl Guest for PanicName {
    fn name() -> String {
        panic!("hostile panic in name()");
    }

    fn capacity_types() -> Vec<w::CapacityType> {
        vec![w::CapacityType::OnDemand]
    }

    fn price_hint(_shape: w::NodeShape) -> Result<Option<w::PriceEstimate>, w::ProvisionError> {
        Ok(None)
    }

    fn provision(request: w::ProvisionRequest) -> Result<w::NodeHandle, w::ProvisionError> {
        Err(w::ProvisionError::Unsupported(request.request_id))
    }

    fn terminate(_owner_id: String, _provider_id: String) -> Result<(), w::ProvisionError> {
        Ok(())
    }

    fn describe(_owner_id: String) -> Result<Vec<w::NodeHandle>, w::ProvisionError> {
        Ok(Vec::new())
    }

    fn get(
        _owner_id: String,
        _provider_id: String,
    ) -> Result<Option<w::NodeHandle>, w::ProvisionError> {
        Ok(None)
    }

    fn offerings() -> Result<Vec<w::Offering>, w::ProvisionError> {
        Ok(Vec::new())
    }

    fn set_labels(
        _owner_id: String,
        provider_id: String,
        _labels: w::Labels,
    ) -> Result<w::NodeHandle, w::ProvisionError> {
        Err(w::ProvisionError::NotFound(provider_id))
    }
}

#[cfg(target_arch = "wasm32")]
wasmprov_guest::wit::__export_provider_world!(PanicName with_types_in wasmprov_guest::wit);
