//! Alien's capacity groups, read from their JSON form, as wasmprov groups.
//!
//! Alien (a deployment platform) describes a container cluster's machine
//! pools as capacity groups: an id, an instance type or a machine profile
//! (CPU as a decimal string, memory and ephemeral storage in bytes, an
//! optional GPU type and count), and a minimum and maximum size. Its JSON
//! is camelCase:
//!
//! ```json
//! {"groupId": "gpu", "instanceType": "g5.xlarge",
//!  "profile": {"cpu": "4.0", "memoryBytes": 17179869184,
//!              "ephemeralStorageBytes": 214748364800,
//!              "gpu": {"type": "nvidia-a10g", "count": 1}},
//!  "minSize": 0, "maxSize": 2}
//! ```
//!
//! [`AlienGroup`] reads that form (nothing of Alien's code is used: its
//! crate is under a license this project does not take in), and
//! `CapacityGroup::try_from` makes the wasmprov group:
//!
//! | Alien | wasmprov | note |
//! | --- | --- | --- |
//! | `groupId` | `name` | the id syntax of both is lowercase letters, digits and `-` |
//! | `instanceType` | `shape.instance_type` | a pin: only that type is asked for |
//! | `profile.cpu` (string) | `shape.cpu` | must be a finite number above 0 |
//! | `profile.memoryBytes` | `shape.memory_bytes` | above 0 |
//! | `profile.ephemeralStorageBytes` | `shape.disk_bytes` | at least this much disk; 0 is none asked |
//! | `profile.gpu.type` | `shape.gpu_model`, and `shape.gpu_vendor` from its first word (`nvidia-a10g` → `nvidia`) | compared ignoring case against offerings' models |
//! | `profile.gpu.count` | `shape.gpu` | at least 1 when a GPU is given |
//! | `minSize`, `maxSize` | `min`, `max` | `minSize` ≤ `maxSize` |
//!
//! A group with an instance type and no profile asks for the type alone
//! (CPU and memory 0: the type says). A group with neither is refused:
//! Alien would pick a type from its own catalogue, and wasmprov has nothing
//! to match. Alien's own cap of 10 machines is Alien's; wasmprov's is the
//! fleet's `max_group_size`.
//!
//! ```
//! use wasmprov_fleet::{CapacityGroup, alien::AlienGroup};
//!
//! let alien: AlienGroup = serde_json::from_str(
//!     r#"{"groupId": "general", "instanceType": "m7g.xlarge", "minSize": 1, "maxSize": 5}"#,
//! ).unwrap();
//! let group = CapacityGroup::try_from(alien).unwrap();
//! assert_eq!(group.name, "general");
//! assert_eq!(group.shape.instance_type.as_deref(), Some("m7g.xlarge"));
//! assert_eq!((group.min, group.max), (1, 5));
//! ```

use serde::{Deserialize, Serialize};
use wasmprov_api::NodeShape;

use crate::group::CapacityGroup;

/// A GPU specification in Alien's form.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlienGpu {
    /// The GPU type (`nvidia-a100`, `nvidia-t4`).
    #[serde(rename = "type")]
    pub gpu_type: String,
    /// GPUs per machine.
    pub count: u32,
}

/// A machine profile in Alien's form: hardware totals per machine.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlienProfile {
    /// vCPUs, as a decimal string (`"8.0"`, `"4.5"`).
    pub cpu: String,
    /// Memory in bytes.
    pub memory_bytes: u64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage_bytes: u64,
    /// The GPUs, when the machines have any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<AlienGpu>,
}

/// A capacity group in Alien's JSON form; see the [module docs](self) for
/// how it becomes a [`CapacityGroup`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AlienGroup {
    /// The group's id.
    pub group_id: String,
    /// The instance type, when pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// The machine profile, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<AlienProfile>,
    /// Fewest machines (0 scales to zero).
    pub min_size: u32,
    /// Most machines.
    pub max_size: u32,
}

/// Why an Alien group cannot be a wasmprov group.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AlienGroupError {
    /// The text is not a group in either form.
    #[error(
        "not a capacity group: {0} (give Alien's form, such as {{\"groupId\": \"web\", \"instanceType\": \"cx22\", \"minSize\": 0, \"maxSize\": 3}}, or wasmprov's, with name, shape, min and max)"
    )]
    Json(String),
    /// `profile.cpu` is not a number above 0.
    #[error(
        "group {group}: profile.cpu {value:?} is not a number of vCPUs above 0 (write it as Alien does, such as \"4.0\")"
    )]
    Cpu {
        /// The group's id.
        group: String,
        /// What was given.
        value: String,
    },
    /// A GPU was given with a count of 0.
    #[error(
        "group {group}: profile.gpu.count is 0; give at least 1, or leave gpu out for machines without GPUs"
    )]
    GpuCount {
        /// The group's id.
        group: String,
    },
    /// A GPU with an empty type.
    #[error("group {group}: profile.gpu.type is empty; name the GPU, such as \"nvidia-t4\"")]
    GpuType {
        /// The group's id.
        group: String,
    },
    /// Neither an instance type nor a profile.
    #[error(
        "group {group}: give instanceType or profile; wasmprov cannot choose a machine for a group that describes none"
    )]
    NoMachine {
        /// The group's id.
        group: String,
    },
    /// The group breaks a rule of wasmprov's groups (its name, its bounds,
    /// a memory of 0).
    #[error("{0}")]
    Invalid(String),
}

impl TryFrom<AlienGroup> for CapacityGroup {
    type Error = AlienGroupError;

    fn try_from(alien: AlienGroup) -> Result<Self, Self::Error> {
        let group = alien.group_id;
        let mut shape = NodeShape::new(0.0, 0);
        shape.instance_type = alien.instance_type;
        match alien.profile {
            Some(p) => {
                let cpu = p.cpu.trim().parse::<f64>().ok();
                shape.cpu = match cpu {
                    Some(c) if c.is_finite() && c > 0.0 => c,
                    _ => {
                        return Err(AlienGroupError::Cpu {
                            group,
                            value: p.cpu.chars().take(40).collect(),
                        });
                    }
                };
                shape.memory_bytes = p.memory_bytes;
                shape.disk_bytes =
                    (p.ephemeral_storage_bytes > 0).then_some(p.ephemeral_storage_bytes);
                if let Some(gpu) = p.gpu {
                    if gpu.count == 0 {
                        return Err(AlienGroupError::GpuCount { group });
                    }
                    let model = gpu.gpu_type.trim().to_ascii_lowercase();
                    if model.is_empty() {
                        return Err(AlienGroupError::GpuType { group });
                    }
                    shape.gpu = gpu.count;
                    shape.gpu_vendor = model.split_once('-').map(|(vendor, _)| vendor.to_string());
                    shape.gpu_model = Some(model);
                }
            }
            None if shape.instance_type.is_none() => {
                return Err(AlienGroupError::NoMachine { group });
            }
            None => {}
        }
        let out = CapacityGroup::new(group, shape, alien.min_size, alien.max_size);
        out.validate()
            .map_err(|e| AlienGroupError::Invalid(format!("{e:#}")))?;
        Ok(out)
    }
}

/// A capacity group from JSON in either form: Alien's (it has `groupId`)
/// or wasmprov's own ([`CapacityGroup`]'s serde form, with `name`). The
/// group is validated.
///
/// # Errors
/// Text that is neither form, or a group either form cannot make.
pub fn group_from_json(text: &str) -> Result<CapacityGroup, AlienGroupError> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| AlienGroupError::Json(e.to_string()))?;
    if value.get("groupId").is_some() {
        let alien: AlienGroup =
            serde_json::from_value(value).map_err(|e| AlienGroupError::Json(e.to_string()))?;
        return CapacityGroup::try_from(alien);
    }
    let group: CapacityGroup =
        serde_json::from_value(value).map_err(|e| AlienGroupError::Json(e.to_string()))?;
    group
        .validate()
        .map_err(|e| AlienGroupError::Invalid(format!("{e:#}")))?;
    Ok(group)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    /// Alien's own examples (its container cluster's test cases), in its
    /// JSON form, with the wasmprov group each must become:
    /// `(json, name, instance type, cpu, memory, disk, gpu, model, vendor, min, max)`.
    #[allow(clippy::type_complexity, reason = "a table of expectations")]
    fn alien_examples() -> Vec<(
        &'static str,
        &'static str,
        Option<&'static str>,
        f64,
        u64,
        Option<u64>,
        u32,
        Option<&'static str>,
        Option<&'static str>,
        u32,
        u32,
    )> {
        vec![
            // The general pool of the creation and serialization cases.
            (
                r#"{"groupId":"general","instanceType":"m7g.xlarge","minSize":1,"maxSize":5}"#,
                "general",
                Some("m7g.xlarge"),
                0.0,
                0,
                None,
                0,
                None,
                None,
                1,
                5,
            ),
            // The multi-pool case: a general pool ...
            (
                r#"{"groupId":"general","instanceType":"m7g.xlarge","minSize":1,"maxSize":3}"#,
                "general",
                Some("m7g.xlarge"),
                0.0,
                0,
                None,
                0,
                None,
                None,
                1,
                3,
            ),
            // ... and a GPU pool with a full profile.
            (
                r#"{"groupId":"gpu","instanceType":"g5.xlarge","profile":{"cpu":"4.0","memoryBytes":17179869184,"ephemeralStorageBytes":214748364800,"gpu":{"type":"nvidia-a10g","count":1}},"minSize":0,"maxSize":2}"#,
                "gpu",
                Some("g5.xlarge"),
                4.0,
                16 * GIB,
                Some(200 * GIB),
                1,
                Some("nvidia-a10g"),
                Some("nvidia"),
                0,
                2,
            ),
            // The scale-change case: the same pool grown to 2..10.
            (
                r#"{"groupId":"general","instanceType":"m7g.xlarge","minSize":2,"maxSize":10}"#,
                "general",
                Some("m7g.xlarge"),
                0.0,
                0,
                None,
                0,
                None,
                None,
                2,
                10,
            ),
            // A profile without a pinned type: matched against offerings.
            (
                r#"{"groupId":"batch","profile":{"cpu":"4.5","memoryBytes":8589934592,"ephemeralStorageBytes":0},"minSize":0,"maxSize":4}"#,
                "batch",
                None,
                4.5,
                8 * GIB,
                None,
                0,
                None,
                None,
                0,
                4,
            ),
        ]
    }

    #[test]
    fn alien_examples_become_wasmprov_groups() {
        for (json, name, itype, cpu, memory, disk, gpu, model, vendor, min, max) in alien_examples()
        {
            let alien: AlienGroup = serde_json::from_str(json).unwrap();
            // Alien's JSON reads back as written.
            assert_eq!(
                serde_json::to_value(&alien).unwrap(),
                serde_json::from_str::<serde_json::Value>(json).unwrap(),
                "{json}"
            );
            let g = CapacityGroup::try_from(alien).unwrap();
            assert_eq!(g.name, name, "{json}");
            assert_eq!(g.shape.instance_type.as_deref(), itype, "{json}");
            assert!((g.shape.cpu - cpu).abs() < 1e-12, "{json}");
            assert_eq!(g.shape.memory_bytes, memory, "{json}");
            assert_eq!(g.shape.disk_bytes, disk, "{json}");
            assert_eq!(g.shape.gpu, gpu, "{json}");
            assert_eq!(g.shape.gpu_model.as_deref(), model, "{json}");
            assert_eq!(g.shape.gpu_vendor.as_deref(), vendor, "{json}");
            assert_eq!((g.min, g.max), (min, max), "{json}");
            assert!(g.plugins.is_empty() && g.lease.is_none() && g.boot.is_empty());
            // Either form reads the same.
            let same = group_from_json(json).unwrap();
            assert_eq!(same, g, "{json}");
            let own = serde_json::to_string(&g).unwrap();
            assert_eq!(group_from_json(&own).unwrap(), g, "{own}");
        }
    }

    #[test]
    fn invalid_alien_groups_are_refused_with_what_to_fix() {
        for (json, want) in [
            // Alien's custom-CIDR case: no type, no profile.
            (
                r#"{"groupId":"general","minSize":1,"maxSize":5}"#,
                "group general: give instanceType or profile",
            ),
            (
                r#"{"groupId":"g","profile":{"cpu":"four","memoryBytes":1,"ephemeralStorageBytes":0},"minSize":0,"maxSize":1}"#,
                "group g: profile.cpu \"four\" is not a number of vCPUs above 0",
            ),
            (
                r#"{"groupId":"g","profile":{"cpu":"0","memoryBytes":1,"ephemeralStorageBytes":0},"minSize":0,"maxSize":1}"#,
                "profile.cpu \"0\" is not a number",
            ),
            (
                r#"{"groupId":"g","profile":{"cpu":"NaN","memoryBytes":1,"ephemeralStorageBytes":0},"minSize":0,"maxSize":1}"#,
                "profile.cpu \"NaN\" is not a number",
            ),
            (
                r#"{"groupId":"g","profile":{"cpu":"2","memoryBytes":1,"ephemeralStorageBytes":0,"gpu":{"type":"nvidia-t4","count":0}},"minSize":0,"maxSize":1}"#,
                "group g: profile.gpu.count is 0",
            ),
            (
                r#"{"groupId":"g","profile":{"cpu":"2","memoryBytes":0,"ephemeralStorageBytes":0},"minSize":0,"maxSize":1}"#,
                "give an instance type, or cpu and memory above zero",
            ),
            (
                r#"{"groupId":"g","instanceType":"cx22","minSize":3,"maxSize":1}"#,
                "group g: min 3 is above max 1",
            ),
            (
                r#"{"groupId":"Web Pool","instanceType":"cx22","minSize":0,"maxSize":1}"#,
                "group name",
            ),
            (
                r#"{"groupId":"g","profile":{"cpu":2,"memoryBytes":1,"ephemeralStorageBytes":0},"minSize":0,"maxSize":1}"#,
                "not a capacity group: invalid type: integer `2`, expected a string",
            ),
            (r#"{"groupId":"g","minSize":0}"#, "missing field `maxSize`"),
            ("[1, 2]", "not a capacity group"),
        ] {
            let err = group_from_json(json).unwrap_err().to_string();
            assert!(err.contains(want), "{json}: {err}");
        }
    }
}
