//! Mapping a cloud's own state names onto the contract's [`JoinState`].
//!
//! Every cloud names its lifecycle differently; each plugin writes its
//! mapping once as a [`StateTable`] constant, and unknown names (a cloud
//! adding a state) fall to a stated default instead of failing.
//!
//! ```
//! use wasmprov_guest::JoinState;
//! use wasmprov_guest::state::StateTable;
//!
//! const STATES: StateTable = StateTable::new(
//!     &[("running", JoinState::Joining), ("terminated", JoinState::Failed)],
//!     JoinState::Provisioning,
//! );
//! assert_eq!(STATES.get("Running "), JoinState::Joining);
//! assert_eq!(STATES.get("something-new"), JoinState::Provisioning);
//! ```

use crate::JoinState;

/// A cloud's state names and the join state each means.
#[derive(Clone, Copy, Debug)]
pub struct StateTable {
    entries: &'static [(&'static str, JoinState)],
    otherwise: JoinState,
}

impl StateTable {
    /// A table; `otherwise` is the state of names not in it.
    #[must_use]
    pub const fn new(entries: &'static [(&'static str, JoinState)], otherwise: JoinState) -> Self {
        Self { entries, otherwise }
    }

    /// The join state of `name`, compared without surrounding blanks and
    /// ignoring ASCII case.
    #[must_use]
    pub fn get(&self, name: &str) -> JoinState {
        let name = name.trim();
        self.entries
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map_or(self.otherwise, |(_, s)| *s)
    }
}
