//! Attack: amplification through the canonical ABI. `describe` returns
//! `[config] count` node handles whose provider ids all point at the same
//! `[config] mib` MiB buffer. The guest spends that buffer once; a host that
//! copies every string out of guest memory allocates `count` times as much.
//!
//! The aliasing needs `unsafe`: `String::from_raw_parts` on one buffer, and
//! an allocator that never frees so that the bindings' clean-up after the
//! call (one free per string) does no harm.

#![allow(unsafe_code, reason = "the attack aliases guest memory on purpose")]

use hostile_kit::prelude::*;
use wasmprov_guest::{CapacityType, JoinState};

/// An allocator that never frees: freeing the aliased strings is a no-op.
#[derive(Debug)]
pub struct NeverFree;

// SAFETY: allocation is the system allocator's; deallocation leaks, which is
// always sound.
unsafe impl std::alloc::GlobalAlloc for NeverFree {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        // SAFETY: same contract as ours.
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: std::alloc::Layout) {}
}

#[cfg(target_arch = "wasm32")]
#[global_allocator]
static NEVER_FREE: NeverFree = NeverFree;

hostile_kit::hostile! {
    fn provision(_owner: &str, req: &ProvisionRequest) -> Result<NodeHandle> {
        Ok(node(req, Labels::new()))
    }

    fn describe(_owner: &str) -> Result<Vec<NodeHandle>> {
        let size = cfg_or::<usize>("mib", 1)? << 20;
        let count: usize = cfg_or("count", 1024)?;
        let buffer: &'static mut [u8] = Vec::leak(vec![b'x'; size]);
        let ptr = buffer.as_mut_ptr();
        let mut nodes = Vec::with_capacity(count);
        for _ in 0..count {
            // SAFETY (as far as the guest goes): the buffer is leaked and
            // never written again, and nothing is ever freed (see
            // `NeverFree`); the strings only carry (ptr, len) to the host.
            let provider_id = unsafe { String::from_raw_parts(ptr, size, size) };
            nodes.push(NodeHandle {
                provider_id,
                address: None,
                zone: None,
                capacity_type: CapacityType::OnDemand,
                join_state: JoinState::Failed,
                instance_type: None,
                labels: Labels::new(),
                ..Default::default()
            });
        }
        Ok(nodes)
    }
}
