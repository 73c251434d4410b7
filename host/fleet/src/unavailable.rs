//! Offerings that ran out of capacity recently. When a provision fails with
//! `capacity`, what ran out (the error's scope says: the instance type, the
//! zone, or the plugin's whole pool) is marked for a while, and scaling
//! tries the next offering instead of asking again for what just ran out.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use wasmprov_api::CapacityScope;

/// How long a mark lasts by default.
pub const DEFAULT_UNAVAILABLE_FOR: Duration = Duration::from_secs(180);

/// What a mark covers: `None` is every type, or every zone.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    plugin: String,
    instance_type: Option<String>,
    zone: Option<String>,
}

/// Marks of plugin / instance type / zone that ran out, each until a deadline.
#[derive(Debug)]
pub struct Unavailable {
    ttl: Duration,
    marks: Mutex<HashMap<Key, Instant>>,
}

impl Default for Unavailable {
    fn default() -> Self {
        Self::new(DEFAULT_UNAVAILABLE_FOR)
    }
}

impl Unavailable {
    /// Marks last `ttl`; a zero `ttl` marks nothing.
    #[must_use]
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            marks: Mutex::new(HashMap::new()),
        }
    }

    /// How long marks last.
    #[must_use]
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Records that `plugin` had no capacity for `instance_type` in `zone`
    /// (`None`: the zone the plugin chose), as wide as `scope` says: the
    /// type everywhere, the type in that zone, or the whole plugin.
    pub fn mark(
        &self,
        plugin: &str,
        instance_type: &str,
        zone: Option<&str>,
        scope: CapacityScope,
    ) {
        if self.ttl.is_zero() {
            return;
        }
        let key = match scope {
            CapacityScope::InstanceType => Key {
                plugin: plugin.into(),
                instance_type: Some(instance_type.into()),
                zone: None,
            },
            CapacityScope::Zone => Key {
                plugin: plugin.into(),
                instance_type: Some(instance_type.into()),
                zone: zone.map(str::to_string),
            },
            CapacityScope::Group => Key {
                plugin: plugin.into(),
                instance_type: None,
                zone: None,
            },
        };
        tracing::info!(
            plugin,
            instance_type,
            zone = zone.unwrap_or(""),
            %scope,
            secs = self.ttl.as_secs(),
            "capacity ran out; trying other offerings for a while"
        );
        if let Ok(mut marks) = self.marks.lock() {
            marks.insert(key, Instant::now() + self.ttl);
        }
    }

    /// Until when `plugin`'s `instance_type` in `zone` is marked, if it is.
    #[must_use]
    pub fn until(&self, plugin: &str, instance_type: &str, zone: Option<&str>) -> Option<Instant> {
        let now = Instant::now();
        let mut marks = self.marks.lock().ok()?;
        marks.retain(|_, until| *until > now);
        let covering = |k: &Key| {
            k.plugin == plugin
                && k.instance_type
                    .as_deref()
                    .is_none_or(|t| t == instance_type)
                && k.zone.as_deref().is_none_or(|z| zone == Some(z))
        };
        marks
            .iter()
            .filter(|(k, _)| covering(k))
            .map(|(_, until)| *until)
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_cover_what_ran_out() {
        let u = Unavailable::new(Duration::from_secs(60));
        u.mark("a", "big", Some("z1"), CapacityScope::Zone);
        assert!(u.until("a", "big", Some("z1")).is_some());
        assert!(u.until("a", "big", Some("z2")).is_none());
        assert!(u.until("a", "small", Some("z1")).is_none());
        u.mark("a", "small", None, CapacityScope::InstanceType);
        assert!(u.until("a", "small", Some("z9")).is_some());
        assert!(u.until("b", "small", None).is_none());
        u.mark("b", "x", None, CapacityScope::Group);
        assert!(u.until("b", "anything", Some("z")).is_some());
        let off = Unavailable::new(Duration::ZERO);
        off.mark("a", "big", None, CapacityScope::Group);
        assert!(off.until("a", "big", None).is_none());
    }

    #[test]
    fn marks_expire() {
        let u = Unavailable::new(Duration::from_millis(20));
        u.mark("a", "t", None, CapacityScope::InstanceType);
        assert!(u.until("a", "t", None).is_some());
        std::thread::sleep(Duration::from_millis(40));
        assert!(u.until("a", "t", None).is_none());
    }
}
