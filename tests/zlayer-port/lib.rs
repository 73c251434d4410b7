//! ZLayer orchestration code, compiled against ZLayer's real crate, with
//! wasmprov provisioners behind it.

use std::sync::Arc;

/// The ZLayer user's code: placement, scaling, census and reaping written
/// against `zlayer_provisioner`, not changed for wasmprov.
#[path = "../seed/zlayer_orchestrator.rs"]
pub mod orchestrator;

/// The one line a ZLayer user adds: a wasmprov provisioner (a wasm plugin
/// from `wasmprov-host`, or a native backend) as ZLayer's trait object.
pub fn backend(
    provisioner: Arc<dyn wasmprov_api::CloudProvisioner>,
) -> Arc<dyn zlayer_provisioner::CloudProvisioner> {
    wasmprov_compat_zlayer::zlayer(provisioner)
}
