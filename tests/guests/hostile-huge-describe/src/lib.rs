//! Attack: `describe` returns `[config] count` (default 2 000 000) node
//! handles, to make the host allocate without bound when it reads them.
//! The guest's memory limit bounds the list; the host must stay up.

use hostile_kit::prelude::*;
use wasmprov_guest::{CapacityType, JoinState};

hostile_kit::hostile! {
    fn provision(_owner: &str, req: &ProvisionRequest) -> Result<NodeHandle> {
        Ok(node(req, Labels::new()))
    }

    fn describe(owner: &str) -> Result<Vec<NodeHandle>> {
        let count: usize = cfg_or("count", 2_000_000)?;
        // `owned = true`: every node carries the owner id, so that the host
        // keeps the list it reads (nodes of no owner are dropped).
        let owned: bool = cfg_or("owned", false)?;
        let mut nodes = Vec::with_capacity(count);
        for i in 0..count {
            let mut labels = Labels::new();
            if owned {
                labels.insert(
                    wasmprov_guest::tags::OWNER.to_string(),
                    owner.to_string(),
                );
            }
            nodes.push(NodeHandle {
                // Short and distinct: the answer is a well-formed list.
                provider_id: format!("{i:x}"),
                address: None,
                zone: None,
                capacity_type: CapacityType::Spot,
                join_state: JoinState::Failed,
                instance_type: None,
                labels,
                ..Default::default()
            });
        }
        Ok(nodes)
    }
}
