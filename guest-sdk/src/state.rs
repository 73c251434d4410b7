//! Mapping a cloud's own state names onto the contract's [`NodeStatus`]
//! (what the machine is doing) and [`JoinState`] (where the node is on its
//! way into a cluster).
//!
//! Every cloud names its lifecycle differently; each plugin writes its
//! mapping once as a [`StateTable`] constant, and unknown names (a cloud
//! adding a state) fall to a stated default instead of failing. The
//! cloud's own name is kept too, as the handle's `raw_state`.
//!
//! ```
//! use wasmprov_guest::{JoinState, NodeHandle, NodeStatus};
//! use wasmprov_guest::state::StateTable;
//!
//! const STATES: StateTable = StateTable::new(
//!     &[
//!         ("running", NodeStatus::Running, JoinState::Joining),
//!         ("stopped", NodeStatus::Stopped, JoinState::Failed),
//!     ],
//!     (NodeStatus::Unknown, JoinState::Provisioning),
//! );
//! assert_eq!(STATES.get("Running "), JoinState::Joining);
//! assert_eq!(STATES.status("stopped"), NodeStatus::Stopped);
//! assert_eq!(STATES.get("something-new"), JoinState::Provisioning);
//! let mut node = NodeHandle::new("i-1", JoinState::Provisioning);
//! STATES.apply("stopped", &mut node);
//! assert_eq!(node.status, NodeStatus::Stopped);
//! assert_eq!(node.raw_state.as_deref(), Some("stopped"));
//! ```

use crate::{JoinState, NodeHandle, NodeStatus};

/// A cloud's state names, and the status and join state each means.
#[derive(Clone, Copy, Debug)]
pub struct StateTable {
    entries: &'static [(&'static str, NodeStatus, JoinState)],
    otherwise: (NodeStatus, JoinState),
}

impl StateTable {
    /// The state names most REST clouds use (DigitalOcean's, Linode's,
    /// Vultr's, Hetzner's): `new`, `pending`, `provisioning`, `creating`,
    /// `initializing`, `migrating`, `rebuilding` are pending and
    /// provisioning; `booting`, `starting`, `rebooting` pending and
    /// booting; `active` and `running` running and joining; `off`,
    /// `offline`, `stopped` stopped, `stopping` and `shutting_down` stopping,
    /// `deleting` deleting, `archive`, `deleted`, `terminated` deleted (all
    /// failed as nodes);
    /// anything else unknown and provisioning.
    pub const COMMON: StateTable = StateTable::new(
        &[
            ("new", NodeStatus::Pending, JoinState::Provisioning),
            ("pending", NodeStatus::Pending, JoinState::Provisioning),
            ("provisioning", NodeStatus::Pending, JoinState::Provisioning),
            ("creating", NodeStatus::Pending, JoinState::Provisioning),
            ("initializing", NodeStatus::Pending, JoinState::Provisioning),
            ("migrating", NodeStatus::Pending, JoinState::Provisioning),
            ("rebuilding", NodeStatus::Pending, JoinState::Provisioning),
            ("booting", NodeStatus::Pending, JoinState::Booting),
            ("starting", NodeStatus::Pending, JoinState::Booting),
            ("rebooting", NodeStatus::Pending, JoinState::Booting),
            ("active", NodeStatus::Running, JoinState::Joining),
            ("running", NodeStatus::Running, JoinState::Joining),
            ("off", NodeStatus::Stopped, JoinState::Failed),
            ("offline", NodeStatus::Stopped, JoinState::Failed),
            ("stopped", NodeStatus::Stopped, JoinState::Failed),
            ("stopping", NodeStatus::Stopping, JoinState::Failed),
            ("shutting_down", NodeStatus::Stopping, JoinState::Failed),
            ("archive", NodeStatus::Deleted, JoinState::Failed),
            ("deleting", NodeStatus::Deleting, JoinState::Failed),
            ("deleted", NodeStatus::Deleted, JoinState::Failed),
            ("terminated", NodeStatus::Deleted, JoinState::Failed),
        ],
        (NodeStatus::Unknown, JoinState::Provisioning),
    );

    /// A table; `otherwise` is what names not in it mean.
    #[must_use]
    pub const fn new(
        entries: &'static [(&'static str, NodeStatus, JoinState)],
        otherwise: (NodeStatus, JoinState),
    ) -> Self {
        Self { entries, otherwise }
    }

    /// The status and join state of `name`, compared without surrounding
    /// blanks and ignoring ASCII case.
    #[must_use]
    pub fn lookup(&self, name: &str) -> (NodeStatus, JoinState) {
        let name = name.trim();
        self.entries
            .iter()
            .find(|(n, _, _)| n.eq_ignore_ascii_case(name))
            .map_or(self.otherwise, |(_, s, j)| (*s, *j))
    }

    /// The join state of `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> JoinState {
        self.lookup(name).1
    }

    /// The status of `name`.
    #[must_use]
    pub fn status(&self, name: &str) -> NodeStatus {
        self.lookup(name).0
    }

    /// Sets `node`'s status, join state and raw state from the cloud's `name`.
    pub fn apply(&self, name: &str, node: &mut NodeHandle) {
        let (status, join) = self.lookup(name);
        node.status = status;
        node.join_state = join;
        node.raw_state = Some(name.trim().to_string());
    }
}
