//! Sets of backends: wasm plugins and native provisioners side by side.

use std::collections::BTreeMap;
use std::sync::Arc;

use wasmprov_api::{Backends, CloudProvisioner};

/// Backends from several places under one set of names: named native
/// backends, and whole sources (a wasm host's plugins, which change on
/// reload). A name given to a native backend hides a source's backend of
/// that name; among sources, the first added wins.
#[derive(Default)]
pub struct BackendSet {
    native: BTreeMap<String, Arc<dyn CloudProvisioner>>,
    sources: Vec<Arc<dyn Backends>>,
    owner: Option<String>,
}

impl std::fmt::Debug for BackendSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendSet")
            .field("names", &self.backend_names())
            .finish()
    }
}

impl BackendSet {
    /// An empty set.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a native backend under `name`.
    #[must_use]
    pub fn with(mut self, name: impl Into<String>, backend: Arc<dyn CloudProvisioner>) -> Self {
        self.native.insert(name.into(), backend);
        self
    }

    /// Adds every backend of `source` (asked anew on each lookup, so a
    /// host's reloads show).
    #[must_use]
    pub fn with_source(mut self, source: Arc<dyn Backends>) -> Self {
        self.sources.push(source);
        self
    }

    /// The owner id of the set (default: the first source's that names
    /// one): a fleet over the set asks every backend, native ones included,
    /// to tag nodes with it, and believes only nodes that carry it.
    #[must_use]
    pub fn with_owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    fn source_of(&self, name: &str) -> Option<&Arc<dyn Backends>> {
        self.sources.iter().find(|s| s.backend(name).is_some())
    }
}

impl Backends for BackendSet {
    fn backend_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.native.keys().cloned().collect();
        for s in &self.sources {
            names.extend(s.backend_names());
        }
        names.sort();
        names.dedup();
        names
    }

    fn backend(&self, name: &str) -> Option<Arc<dyn CloudProvisioner>> {
        if let Some(b) = self.native.get(name) {
            return Some(b.clone());
        }
        self.sources.iter().find_map(|s| s.backend(name))
    }

    fn owner_id(&self) -> Option<String> {
        self.owner
            .clone()
            .or_else(|| self.sources.iter().find_map(|s| s.owner_id()))
    }

    fn nodes_listed(&self, name: &str, count: usize) {
        if !self.native.contains_key(name)
            && let Some(s) = self.source_of(name)
        {
            s.nodes_listed(name, count);
        }
    }

    fn orphans_found(&self, name: &str, count: usize) {
        if !self.native.contains_key(name)
            && let Some(s) = self.source_of(name)
        {
            s.orphans_found(name, count);
        }
    }

    fn fleet_event(&self, name: &str, event: &str) {
        if !self.native.contains_key(name)
            && let Some(s) = self.source_of(name)
        {
            s.fleet_event(name, event);
        }
    }
}
