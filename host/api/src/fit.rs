//! The one rule for whether an instance type can run a shape, used by the
//! guest SDK when a plugin picks a type (`wasmprov_guest::shape`) and by the
//! host when it ranks every plugin's offerings (`wasmprov-fleet`).
//!
//! - CPU, memory and GPU count: at least what is asked (an explicit
//!   instance type in the shape overrides these, see [`Want::sized`]);
//! - GPU vendor: the same, ignoring case, when GPUs are asked for;
//! - architecture, GPU model and disk: **bind always**. A type that does not
//!   say it has them does not fit, so nothing is guessed.
//! - disk: a type's `disk_bytes` is the most disk a node of it can have:
//!   the disk that comes with it, or, when the disk is a volume sized per
//!   request (EC2's EBS root volume), the largest volume a request may ask
//!   for. Either way, any disk up to it fits.

use crate::{Arch, NodeShape, Offering};

/// What a shape asks of a type, borrowed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Want<'a> {
    /// vCPUs at least.
    pub cpu: f64,
    /// Memory in bytes at least.
    pub memory_bytes: u64,
    /// GPUs at least.
    pub gpu: u32,
    /// GPU vendor, compared ignoring case, when GPUs are asked for.
    pub gpu_vendor: Option<&'a str>,
    /// GPU model, compared ignoring case.
    pub gpu_model: Option<&'a str>,
    /// Architecture.
    pub arch: Option<Arch>,
    /// Disk in bytes at least.
    pub disk_bytes: Option<u64>,
}

/// What a type has, borrowed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Have<'a> {
    /// vCPUs.
    pub cpu: f64,
    /// Memory in bytes.
    pub memory_bytes: u64,
    /// GPUs.
    pub gpu: u32,
    /// GPU vendor.
    pub gpu_vendor: Option<&'a str>,
    /// GPU model.
    pub gpu_model: Option<&'a str>,
    /// Architecture, when known.
    pub arch: Option<Arch>,
    /// Disk, when fixed.
    pub disk_bytes: Option<u64>,
}

impl<'a> Want<'a> {
    /// What `shape` asks, as written.
    #[must_use]
    pub fn of(shape: &'a NodeShape) -> Self {
        Self {
            cpu: shape.cpu,
            memory_bytes: shape.memory_bytes,
            gpu: shape.gpu,
            gpu_vendor: shape.gpu_vendor.as_deref(),
            gpu_model: shape.gpu_model.as_deref(),
            arch: shape.arch,
            disk_bytes: shape.disk_bytes,
        }
    }

    /// Whether `have` has the architecture, GPU model and disk asked for:
    /// what binds even a type the shape names.
    #[must_use]
    pub fn bound(&self, have: &Have<'_>) -> bool {
        self.arch.is_none_or(|a| have.arch == Some(a))
            && self
                .gpu_model
                .is_none_or(|m| have.gpu_model.is_some_and(|h| h.eq_ignore_ascii_case(m)))
            && self
                .disk_bytes
                .is_none_or(|d| have.disk_bytes.is_some_and(|h| h >= d))
    }

    /// Whether `have` is big enough: CPU, memory, GPU count and vendor.
    #[must_use]
    pub fn sized(&self, have: &Have<'_>) -> bool {
        have.cpu + 1e-9 >= self.cpu
            && have.memory_bytes >= self.memory_bytes
            && have.gpu >= self.gpu
            && (self.gpu == 0
                || self
                    .gpu_vendor
                    .is_none_or(|v| have.gpu_vendor.is_some_and(|h| h.eq_ignore_ascii_case(v))))
    }

    /// Whether `have` can run what is asked: sized and bound.
    #[must_use]
    pub fn fits(&self, have: &Have<'_>) -> bool {
        self.sized(have) && self.bound(have)
    }
}

impl Offering {
    /// This offering as a [`Have`].
    #[must_use]
    pub fn have(&self) -> Have<'_> {
        Have {
            cpu: self.cpu,
            memory_bytes: self.memory_bytes,
            gpu: self.gpu,
            gpu_vendor: self.gpu_vendor.as_deref(),
            gpu_model: self.gpu_model.as_deref(),
            arch: self.arch,
            disk_bytes: self.disk_bytes,
        }
    }

    /// Whether this type can run `shape`: the type it names, or (when it
    /// names none) one big enough; either way with the architecture, GPU
    /// model and disk asked for, and offered in the zone asked for.
    #[must_use]
    pub fn fits(&self, shape: &NodeShape) -> bool {
        let want = Want::of(shape);
        let have = self.have();
        let sized = match &shape.instance_type {
            Some(t) => *t == self.instance_type,
            None => want.sized(&have),
        };
        let zoned = shape
            .zone
            .as_ref()
            .is_none_or(|z| self.zones.is_empty() || self.zones.contains(z));
        sized && want.bound(&have) && zoned
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offering(t: &str, arch: Arch) -> Offering {
        Offering {
            instance_type: t.into(),
            cpu: 4.0,
            memory_bytes: 16 << 30,
            arch: Some(arch),
            zones: vec!["a".into()],
            ..Offering::default()
        }
    }

    #[test]
    fn the_rule() {
        let x86 = offering("x", Arch::X86_64);
        let any = NodeShape::new(2.0, 4 << 30);
        assert!(x86.fits(&any));
        let arm = NodeShape {
            arch: Some(Arch::Arm64),
            ..any.clone()
        };
        assert!(!x86.fits(&arm));
        assert!(
            !x86.fits(&NodeShape {
                instance_type: Some("x".into()),
                ..arm.clone()
            }),
            "a named type still binds the architecture"
        );
        assert!(x86.fits(&NodeShape {
            instance_type: Some("x".into()),
            ..NodeShape::new(64.0, 1 << 40)
        }));
        assert!(!x86.fits(&NodeShape {
            zone: Some("b".into()),
            ..any.clone()
        }));
        let mut gpu = offering("g", Arch::X86_64);
        gpu.gpu = 1;
        gpu.gpu_vendor = Some("nvidia".into());
        gpu.gpu_model = Some("nvidia-a10g".into());
        let want = |m: &str| NodeShape {
            gpu: 1,
            gpu_vendor: Some("NVIDIA".into()),
            gpu_model: Some(m.into()),
            ..any.clone()
        };
        assert!(gpu.fits(&want("NVIDIA-A10G")));
        assert!(!gpu.fits(&want("nvidia-t4")));
        let disk = NodeShape {
            disk_bytes: Some(1),
            ..any
        };
        assert!(
            !x86.fits(&disk),
            "a type that does not say its disk does not fit"
        );
        // A disk sized per request says the largest volume: any disk up to
        // it fits, a larger one does not.
        let per_request = Offering {
            disk_bytes: Some(16 << 40),
            ..offering("m", Arch::X86_64)
        };
        for (bytes, fits) in [(8 << 30, true), (16 << 40, true), ((16 << 40) + 1, false)] {
            let shape = NodeShape {
                disk_bytes: Some(bytes),
                ..disk.clone()
            };
            assert_eq!(per_request.fits(&shape), fits, "{bytes}");
        }
    }
}
