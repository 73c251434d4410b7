//! Prices for the autoscaler's price expander: PricingNodePrice (a node's
//! offering price over a period) and PricingPodPrice (a pod's share of the
//! cheapest node that fits it).
//!
//! PricingPodPrice is implemented, not answered Unimplemented: the offerings
//! already say what every machine has and costs, so the "theoretical minimum
//! price of running the pod on a perfectly matching machine" the upstream
//! definition asks for can be computed, and the price expander compares it
//! with node prices to judge how well a node would be used.
//!
//! The pod's requests are its effective requests as the Kubernetes scheduler
//! counts them ([`pod_requests`]). Its price is its share of the machine,
//! the largest of its CPU, memory and GPU fractions of the machine's
//! allocatable (a pod that needs half the memory of a machine keeps the
//! other half from being sold even if it uses little CPU), times the
//! machine's on-demand hourly price, times the period in hours; the machine
//! is the offering where that product is lowest.
//!
//! ```
//! use prost_types::Timestamp;
//! use wasmprov_autoscaler::pricing::node_price;
//! let start = Timestamp { seconds: 1_700_000_000, nanos: 0 };
//! let end = Timestamp { seconds: 1_700_000_000 + 90 * 60, nanos: 0 };
//! let usd = node_price(0.40, Some(&start), Some(&end)).unwrap();
//! assert!((usd - 0.60).abs() < 1e-9);
//! assert!(node_price(0.40, Some(&end), Some(&start)).is_err());
//! ```

use std::collections::BTreeMap;

use prost::Message;
use prost_types::Timestamp;
use wasmprov_api::fit::{Have, Want};
use wasmprov_api::{Arch, Offering};

use crate::k8s::{self, QuantityError, core_v1};
use crate::template::{GPU_LABEL, Kubelet};

/// The longest period priced: a year and a day. The autoscaler asks about
/// the coming hour or so; a longer one is a caller's mistake.
pub const MAX_PERIOD_SECONDS: i64 = 366 * 24 * 3600;

/// The disk assumed for an offering that lists none (its volume is chosen
/// when a node is made): the largest block volume the clouds make, 64 TiB,
/// so that only ephemeral storage no node could have fails to fit.
pub const UNLISTED_DISK_BYTES: u64 = 64 << 40;

/// The earliest and latest instants a protobuf `Timestamp` may hold
/// (0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z).
const TIMESTAMP_SECONDS: std::ops::RangeInclusive<i64> = -62_135_596_800..=253_402_300_799;

/// A price that cannot be given.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PriceError {
    /// The request has no start or end.
    #[error("the request has no {which} timestamp")]
    MissingTimestamp {
        /// `start` or `end`.
        which: &'static str,
    },
    /// A timestamp outside what protobuf allows.
    #[error("the {which} timestamp {seconds}s + {nanos}ns is not a valid time")]
    BadTimestamp {
        /// `start` or `end`.
        which: &'static str,
        /// Its seconds.
        seconds: i64,
        /// Its nanoseconds.
        nanos: i32,
    },
    /// The end comes before the start.
    #[error("the period ends {by_seconds}s before it starts")]
    EndBeforeStart {
        /// By how much, in seconds.
        by_seconds: f64,
    },
    /// The period is longer than [`MAX_PERIOD_SECONDS`].
    #[error("a period of {hours:.0} hours is longer than the year wasmprov prices")]
    PeriodTooLong {
        /// Its length.
        hours: f64,
    },
    /// An hourly price that is negative or not a number.
    #[error("hourly price {hourly_usd} is not a price")]
    BadPrice {
        /// What was given.
        hourly_usd: f64,
    },
    /// The pod bytes are not a protobuf `v1.Pod`.
    #[error("the pod is not a protobuf v1.Pod: {why}")]
    PodDecode {
        /// The decoder's message.
        why: String,
    },
    /// A request or limit that is not an amount.
    #[error("{container}: {resource}: {error}")]
    Quantity {
        /// Which container (or `overhead`, `pod`).
        container: String,
        /// The resource name.
        resource: String,
        /// What is wrong.
        error: QuantityError,
    },
    /// An extended resource (a device plugin's, `vendor.example/thing`)
    /// asked for in a fraction: Kubernetes allows only whole ones.
    #[error(
        "{container}: {resource}: {quantity:?} is not a whole number; an extended resource is asked for in whole units"
    )]
    Fractional {
        /// Which container (or `overhead`, `pod`).
        container: String,
        /// The resource name.
        resource: String,
        /// The amount given.
        quantity: String,
    },
    /// No priced offering can run the pod.
    #[error("no priced offering fits a pod asking for {asks}")]
    NoFit {
        /// The requests, for the message.
        asks: String,
    },
}

fn check_timestamp(which: &'static str, t: Option<&Timestamp>) -> Result<i128, PriceError> {
    let t = t.ok_or(PriceError::MissingTimestamp { which })?;
    if !TIMESTAMP_SECONDS.contains(&t.seconds) || !(0..1_000_000_000).contains(&t.nanos) {
        return Err(PriceError::BadTimestamp {
            which,
            seconds: t.seconds,
            nanos: t.nanos,
        });
    }
    // In nanoseconds, exactly: a float would lose them at today's seconds.
    Ok(i128::from(t.seconds) * 1_000_000_000 + i128::from(t.nanos))
}

/// The length of `[start, end)` in hours.
///
/// # Errors
/// A missing or invalid timestamp, an end before the start, or a period
/// longer than [`MAX_PERIOD_SECONDS`].
pub fn period_hours(start: Option<&Timestamp>, end: Option<&Timestamp>) -> Result<f64, PriceError> {
    let start = check_timestamp("start", start)?;
    let end = check_timestamp("end", end)?;
    let nanos = end - start;
    if nanos < 0 {
        return Err(PriceError::EndBeforeStart {
            by_seconds: -nanos as f64 / 1e9,
        });
    }
    if nanos > i128::from(MAX_PERIOD_SECONDS) * 1_000_000_000 {
        return Err(PriceError::PeriodTooLong {
            hours: nanos as f64 / 3.6e12,
        });
    }
    Ok(nanos as f64 / 3.6e12)
}

fn check_price(hourly_usd: f64) -> Result<f64, PriceError> {
    if hourly_usd.is_finite() && hourly_usd >= 0.0 {
        Ok(hourly_usd)
    } else {
        Err(PriceError::BadPrice { hourly_usd })
    }
}

/// PricingNodePrice: `hourly_usd` over `[start, end)`.
///
/// # Errors
/// As [`period_hours`], and [`PriceError::BadPrice`].
pub fn node_price(
    hourly_usd: f64,
    start: Option<&Timestamp>,
    end: Option<&Timestamp>,
) -> Result<f64, PriceError> {
    let hourly = check_price(hourly_usd)?;
    Ok(hourly * period_hours(start, end)?)
}

/// What a pod asks of a node: its effective requests and its node selector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Requests {
    /// CPU in millicores.
    pub cpu_millis: u64,
    /// Memory in bytes.
    pub memory_bytes: u64,
    /// Ephemeral storage in bytes.
    pub ephemeral_storage_bytes: u64,
    /// Every other resource (GPUs, hugepages, devices) in whole units, by
    /// name; zero amounts left out.
    pub other: BTreeMap<String, u64>,
    /// The pod's `nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
}

/// GPU resource names and their vendors, as [`crate::template`] names them.
const GPU_RESOURCES: [(&str, &str); 3] = [
    ("nvidia.com/gpu", "nvidia"),
    ("amd.com/gpu", "amd"),
    ("gpu.intel.com/i915", "intel"),
];

impl Requests {
    /// The GPUs asked for, by vendor: empty when none.
    #[must_use]
    pub fn gpus(&self) -> Vec<(&'static str, u64)> {
        GPU_RESOURCES
            .iter()
            .filter_map(|(name, vendor)| self.other.get(*name).map(|n| (*vendor, *n)))
            .filter(|(_, n)| *n > 0)
            .collect()
    }

    fn describe(&self) -> String {
        let mut parts = vec![
            format!("cpu {}", k8s::format_millis(self.cpu_millis)),
            format!("memory {}", k8s::format_bytes(self.memory_bytes)),
        ];
        if self.ephemeral_storage_bytes > 0 {
            parts.push(format!(
                "ephemeral-storage {}",
                k8s::format_bytes(self.ephemeral_storage_bytes)
            ));
        }
        parts.extend(self.other.iter().map(|(k, v)| format!("{k} {v}")));
        parts.extend(
            self.node_selector
                .iter()
                .map(|(k, v)| format!("node selector {k}={v}")),
        );
        parts.join(", ")
    }
}

/// Whether `name` is an extended resource as Kubernetes defines it: a
/// domain-prefixed name outside `kubernetes.io` (and not a quota's
/// `requests.` name), which must be asked for in whole units.
fn is_extended(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// Resource amounts by name: millicores for `cpu`, whole units otherwise.
type Amounts = BTreeMap<String, u64>;

fn amounts(container: &str, list: &BTreeMap<String, k8s::Quantity>) -> Result<Amounts, PriceError> {
    let mut out = Amounts::new();
    for (name, q) in list {
        let text = q.string.as_deref().unwrap_or("0");
        let err = |error| PriceError::Quantity {
            container: container.to_owned(),
            resource: name.clone(),
            error,
        };
        let parsed = k8s::parse_quantity(text).map_err(err)?;
        // Whole units: a thousandth part left over is a fraction (an
        // amount too large for thousandths has no fraction to speak of).
        if is_extended(name) && parsed.milli_value().is_ok_and(|m| m % 1000 != 0) {
            return Err(PriceError::Fractional {
                container: container.to_owned(),
                resource: name.clone(),
                quantity: text.to_owned(),
            });
        }
        let amount = if name == "cpu" {
            parsed.milli_value()
        } else {
            parsed.value()
        }
        .map_err(err)?;
        out.insert(name.clone(), amount);
    }
    Ok(out)
}

/// A container's (or a pod's) requests, a limit standing in for a request
/// not given, as the API server defaults them.
fn requests_of(
    container: &str,
    resources: Option<&core_v1::ResourceRequirements>,
) -> Result<Amounts, PriceError> {
    let Some(r) = resources else {
        return Ok(Amounts::new());
    };
    let mut requests = amounts(container, &r.limits)?;
    requests.extend(amounts(container, &r.requests)?);
    Ok(requests)
}

fn add(into: &mut Amounts, from: &Amounts) {
    for (k, v) in from {
        let e = into.entry(k.clone()).or_insert(0);
        *e = e.saturating_add(*v);
    }
}

fn max(into: &mut Amounts, from: &Amounts) {
    for (k, v) in from {
        let e = into.entry(k.clone()).or_insert(0);
        *e = (*e).max(*v);
    }
}

/// The resources that pod-level requests replace (Kubernetes' pod-level
/// resources support CPU and memory).
const POD_LEVEL: [&str; 2] = ["cpu", "memory"];

/// A pod's effective requests, as the Kubernetes scheduler counts them:
/// - the sum of the app containers' requests and the sidecars' (init
///   containers with `restartPolicy: Always`);
/// - or, when larger, resource by resource, the largest init container's
///   request plus the sidecars started before it;
/// - replaced, for CPU and memory, by the pod-level request when given;
/// - plus the pod's overhead.
///
/// A request not given is its limit, as the API server defaults it.
///
/// # Errors
/// [`PriceError::Quantity`] for a negative or malformed amount (never a
/// silent zero).
pub fn effective_requests(pod: &core_v1::Pod) -> Result<Requests, PriceError> {
    let spec = pod.spec.clone().unwrap_or_default();
    let name = |c: &core_v1::Container, kind: &str, i: usize| {
        c.name
            .clone()
            .unwrap_or_else(|| format!("{kind} container {i}"))
    };
    let mut total = Amounts::new();
    for (i, c) in spec.containers.iter().enumerate() {
        add(
            &mut total,
            &requests_of(&name(c, "app", i), c.resources.as_ref())?,
        );
    }
    let mut sidecars = Amounts::new();
    let mut init = Amounts::new();
    for (i, c) in spec.init_containers.iter().enumerate() {
        let own = requests_of(&name(c, "init", i), c.resources.as_ref())?;
        if c.restart_policy.as_deref() == Some("Always") {
            add(&mut total, &own);
            add(&mut sidecars, &own);
            max(&mut init, &sidecars);
        } else {
            let mut running = own;
            add(&mut running, &sidecars);
            max(&mut init, &running);
        }
    }
    max(&mut total, &init);
    let pod_level = requests_of("pod", spec.resources.as_ref())?;
    for (k, v) in pod_level {
        if POD_LEVEL.contains(&k.as_str()) {
            total.insert(k, v);
        }
    }
    add(&mut total, &amounts("overhead", &spec.overhead)?);

    let mut requests = Requests {
        node_selector: spec.node_selector.into_iter().collect(),
        ..Requests::default()
    };
    for (k, v) in total {
        match k.as_str() {
            "cpu" => requests.cpu_millis = v,
            "memory" => requests.memory_bytes = v,
            "ephemeral-storage" => requests.ephemeral_storage_bytes = v,
            _ if v > 0 => {
                requests.other.insert(k, v);
            }
            _ => {}
        }
    }
    Ok(requests)
}

/// PricingPodPrice's first step: the effective requests ([`effective_requests`])
/// of a pod given as the protobuf bytes of a `v1.Pod` (Go's `Marshal`).
/// Fields this subset does not know are skipped.
///
/// # Errors
/// [`PriceError::PodDecode`] for bytes that are not a pod, and as
/// [`effective_requests`].
pub fn pod_requests(pod_bytes: &[u8]) -> Result<Requests, PriceError> {
    let pod = core_v1::Pod::decode(pod_bytes)
        .map_err(|e| PriceError::PodDecode { why: e.to_string() })?;
    effective_requests(&pod)
}

/// The price of a pod and the machine it was priced on.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct PodPrice {
    /// US dollars over the period.
    pub usd: f64,
    /// The offering the pod was priced on.
    pub instance_type: String,
    /// The pod's share of it, 0 to 1.
    pub share: f64,
}

fn arch_named(name: &str) -> Option<Arch> {
    match name {
        "amd64" => Some(Arch::X86_64),
        "arm64" => Some(Arch::Arm64),
        _ => None,
    }
}

/// PricingPodPrice: the pod's share of the offering where that share costs
/// least over `hours`, among the offerings with an on-demand price that fit
/// it: its CPU and memory within the machine's allocatable (capacity less
/// `kubelet`'s reservation), its ephemeral storage within the disk's (less
/// the eviction threshold; [`UNLISTED_DISK_BYTES`] when the offering lists
/// no disk), its GPUs of the vendor and count asked for, its `pods` within
/// `maxPods`, and the architecture, GPU model ([`GPU_LABEL`]), instance
/// type and zone its node selector names, if any. Any other resource
/// (hugepages, a device plugin's) is one no offering provides.
///
/// # Errors
/// [`PriceError::NoFit`] when no offering fits (or none has a price), and
/// [`PriceError::PeriodTooLong`] for a negative or non-finite `hours`.
pub fn pod_price(
    requests: &Requests,
    offerings: &[Offering],
    kubelet: &Kubelet,
    hours: f64,
) -> Result<PodPrice, PriceError> {
    if !hours.is_finite() || hours < 0.0 {
        return Err(PriceError::PeriodTooLong { hours });
    }
    let no_fit = || PriceError::NoFit {
        asks: requests.describe(),
    };
    // What no offering provides: anything but the GPUs of the vendors
    // offerings name, and more pods than the kubelet's maxPods.
    for (name, n) in &requests.other {
        let provided = match name.as_str() {
            "pods" => *n <= u64::from(kubelet.max_pods),
            _ => GPU_RESOURCES.iter().any(|(gpu, _)| gpu == name),
        };
        if !provided {
            return Err(no_fit());
        }
    }
    let gpus = requests.gpus();
    let (gpu_vendor, gpu_count) = match gpus.as_slice() {
        [] => (None, 0),
        [(vendor, n)] => (Some(*vendor), *n),
        _ => return Err(no_fit()),
    };
    let selector = |key: &str| requests.node_selector.get(key).map(String::as_str);
    let arch = match selector("kubernetes.io/arch") {
        Some(name) => Some(arch_named(name).ok_or_else(no_fit)?),
        None => None,
    };
    let want = Want {
        cpu: requests.cpu_millis as f64 / 1000.0,
        memory_bytes: requests.memory_bytes,
        gpu: u32::try_from(gpu_count).map_err(|_| no_fit())?,
        gpu_vendor,
        gpu_model: selector(GPU_LABEL),
        arch,
        disk_bytes: None,
    };
    let mut best: Option<PodPrice> = None;
    let mut best_hourly = f64::INFINITY;
    for o in offerings {
        let Some(hourly) = o.on_demand_usd.filter(|p| p.is_finite() && *p >= 0.0) else {
            continue;
        };
        if selector("node.kubernetes.io/instance-type").is_some_and(|t| t != o.instance_type)
            || selector("topology.kubernetes.io/zone")
                .is_some_and(|z| !o.zones.is_empty() && !o.zones.iter().any(|oz| oz == z))
        {
            continue;
        }
        if !(o.cpu.is_finite() && o.cpu > 0.0) || o.memory_bytes == 0 {
            continue;
        }
        let cpu_millis = (o.cpu.min(1e6) * 1000.0).round() as u64;
        let cpu = cpu_millis.saturating_sub(kubelet.reserved_cpu(cpu_millis));
        let memory = o
            .memory_bytes
            .saturating_sub(kubelet.reserved_memory(o.memory_bytes));
        if cpu == 0 || memory == 0 {
            continue;
        }
        let disk = o.disk_bytes.unwrap_or(UNLISTED_DISK_BYTES);
        if requests.ephemeral_storage_bytes > disk.saturating_sub(kubelet.reserved_disk(disk)) {
            continue;
        }
        let have = Have {
            cpu: cpu as f64 / 1000.0,
            memory_bytes: memory,
            ..o.have()
        };
        if !want.fits(&have) {
            continue;
        }
        let mut share = (requests.cpu_millis as f64 / cpu as f64)
            .max(requests.memory_bytes as f64 / memory as f64);
        if gpu_count > 0 {
            share = share.max(gpu_count as f64 / f64::from(o.gpu));
        }
        let share = share.min(1.0);
        let usd = share * hourly * hours;
        let better = match &best {
            None => true,
            Some(b) => {
                usd < b.usd
                    || (usd == b.usd
                        && (hourly, &o.instance_type) < (best_hourly, &b.instance_type))
            }
        };
        if better {
            best_hourly = hourly;
            best = Some(PodPrice {
                usd,
                instance_type: o.instance_type.clone(),
                share,
            });
        }
    }
    best.ok_or_else(no_fit)
}
