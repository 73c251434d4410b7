//! Attack: panic in every export (`price_hint`, `provision`, `terminate`,
//! `describe`), to take the host down with it. `provision` with the normal
//! request id still works, and so does `terminate` of the node "normal".

use hostile_kit::prelude::*;

hostile_kit::hostile! {
    fn provision(_owner: &str, req: &ProvisionRequest) -> Result<NodeHandle> {
        panic!("hostile panic in provision of {}", req.request_id);
    }

    fn price_hint(_shape: &NodeShape) -> Result<Option<PriceHint>> {
        panic!("hostile panic in price_hint");
    }

    fn terminate(_owner: &str, provider_id: &str) -> Result<()> {
        if provider_id == NORMAL {
            return Ok(());
        }
        panic!("hostile panic in terminate of {provider_id}");
    }

    fn describe(_owner: &str) -> Result<Vec<NodeHandle>> {
        panic!("hostile panic in describe");
    }
}
