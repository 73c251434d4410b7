//! Fault injection: a `--faults` spec of rates, and the decisions taken for
//! each request a plugin makes, logged so the suite can tell which fault a
//! plugin's error answers.
//!
//! Spec syntax: comma-separated `kind=rate` pairs, rates in 0..=1, plus an
//! optional `seed=N`; `default` stands for [`FaultSpec::default_mix`]:
//!
//! ```text
//! 429=0.1,5xx=0.1,timeout=0.05,reset=0.05,malformed=0.05,slow=0.1,capacity=0.05,quota=0.05,seed=7
//! ```

use std::sync::Mutex;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use wasmprov_api::ProvisionerError;

/// One kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// `429 Too Many Requests` with `Retry-After` (for exec: the cloud's
    /// rate-limit answer).
    RateLimited,
    /// `503 Service Unavailable` (exec: the command fails with an
    /// internal error).
    ServerError,
    /// No response before the deadline; the request never reached the cloud.
    Timeout,
    /// The connection breaks after the cloud processed the request: the
    /// plugin never sees the answer of a request that took effect.
    Reset,
    /// A success status with a body that is not what the API returns.
    Malformed,
    /// The answer comes late (but in time).
    Slow,
    /// The cloud has no capacity for a create request.
    Capacity,
    /// The account is over quota for a create request.
    Quota,
}

impl FaultKind {
    /// Every kind, with its spec name.
    pub const ALL: [(&'static str, FaultKind); 8] = [
        ("429", FaultKind::RateLimited),
        ("5xx", FaultKind::ServerError),
        ("timeout", FaultKind::Timeout),
        ("reset", FaultKind::Reset),
        ("malformed", FaultKind::Malformed),
        ("slow", FaultKind::Slow),
        ("capacity", FaultKind::Capacity),
        ("quota", FaultKind::Quota),
    ];

    /// The spec name.
    #[must_use]
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("?", |(n, _)| n)
    }

    /// Whether it applies only to requests that create a node.
    #[must_use]
    pub fn create_only(self) -> bool {
        matches!(self, Self::Capacity | Self::Quota)
    }

    /// The error kinds (`ProvisionerError::kind`) a plugin may answer this
    /// fault with. `None`: any answer is right (the fault is not an error).
    #[must_use]
    pub fn expected_kinds(self) -> Option<&'static [&'static str]> {
        match self {
            Self::RateLimited => Some(&["rate_limited"]),
            Self::ServerError | Self::Timeout | Self::Reset => Some(&["transport"]),
            Self::Malformed => Some(&["transport", "other"]),
            Self::Capacity => Some(&["capacity"]),
            Self::Quota => Some(&["quota"]),
            Self::Slow => None,
        }
    }

    /// Whether `err` is a right answer to this fault.
    #[must_use]
    pub fn accepts(self, err: &ProvisionerError) -> bool {
        self.expected_kinds()
            .is_none_or(|kinds| kinds.contains(&err.kind()))
    }
}

impl std::fmt::Display for FaultKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Rates of each fault, and the seed that makes a run repeatable.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct FaultSpec {
    /// Probability of each kind per request, in spec order.
    pub rates: Vec<(FaultKind, f64)>,
    /// Seed of the random choices.
    pub seed: u64,
    /// How long a slow answer is held back.
    pub slow: Duration,
    /// `Retry-After` of injected rate limits, in seconds.
    pub retry_after_s: u32,
}

impl Default for FaultSpec {
    fn default() -> Self {
        Self::none()
    }
}

impl FaultSpec {
    /// No faults.
    #[must_use]
    pub fn none() -> Self {
        Self {
            rates: Vec::new(),
            seed: 1,
            slow: Duration::from_millis(150),
            retry_after_s: 1,
        }
    }

    /// A mix of every kind, about one request in two faulted.
    #[must_use]
    pub fn default_mix() -> Self {
        Self {
            rates: vec![
                (FaultKind::RateLimited, 0.08),
                (FaultKind::ServerError, 0.08),
                (FaultKind::Timeout, 0.05),
                (FaultKind::Reset, 0.08),
                (FaultKind::Malformed, 0.05),
                (FaultKind::Slow, 0.08),
                (FaultKind::Capacity, 0.08),
                (FaultKind::Quota, 0.05),
            ],
            ..Self::none()
        }
    }

    /// Parses a spec (see the module docs).
    ///
    /// # Errors
    /// Naming the part that is wrong and what is accepted.
    pub fn parse(spec: &str) -> anyhow::Result<Self> {
        let spec = spec.trim();
        if spec == "default" {
            return Ok(Self::default_mix());
        }
        if spec == "none" {
            return Ok(Self::none());
        }
        let mut out = Self::none();
        for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if part == "default" {
                out.rates = Self::default_mix().rates;
                continue;
            }
            let (key, value) = part.split_once('=').ok_or_else(|| {
                anyhow::anyhow!("fault spec: {part:?} is not key=value (e.g. 429=0.1)")
            })?;
            let (key, value) = (key.trim(), value.trim());
            if key == "seed" {
                out.seed = value
                    .parse()
                    .map_err(|_| anyhow::anyhow!("fault spec: seed {value:?} is not a number"))?;
                continue;
            }
            let kind = FaultKind::ALL
                .iter()
                .find(|(n, _)| *n == key)
                .map(|(_, k)| *k)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "fault spec: unknown fault {key:?}; known: {}, seed, default",
                        FaultKind::ALL.map(|(n, _)| n).join(", ")
                    )
                })?;
            let rate: f64 = value.parse().map_err(|_| {
                anyhow::anyhow!("fault spec: rate of {key} {value:?} is not a number")
            })?;
            if !(0.0..=1.0).contains(&rate) {
                anyhow::bail!("fault spec: rate of {key} is {rate}; rates are between 0 and 1");
            }
            out.rates.retain(|(k, _)| *k != kind);
            out.rates.push((kind, rate));
        }
        let total: f64 = out.rates.iter().map(|(_, r)| r).sum();
        if total > 0.9 {
            anyhow::bail!(
                "fault spec: rates add up to {total:.2}; keep them at most 0.9 so that requests can succeed"
            );
        }
        Ok(out)
    }

    /// Whether any fault can happen.
    #[must_use]
    pub fn is_active(&self) -> bool {
        self.rates.iter().any(|(_, r)| *r > 0.0)
    }
}

impl std::fmt::Display for FaultSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.is_active() {
            return f.write_str("none");
        }
        for (kind, rate) in &self.rates {
            write!(f, "{kind}={rate},")?;
        }
        write!(f, "seed={}", self.seed)
    }
}

/// One injected fault.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Injected {
    /// Sequence number of the request it hit (all requests counted).
    pub request: u64,
    /// What was injected.
    pub kind: FaultKind,
    /// The request, as `METHOD URL` or `program args`.
    pub target: String,
}

/// Draws faults for requests and logs what it injected.
#[derive(Debug)]
pub struct Injector {
    spec: FaultSpec,
    state: Mutex<InjectorState>,
}

#[derive(Debug)]
struct InjectorState {
    rng: StdRng,
    requests: u64,
    log: Vec<Injected>,
    paused: bool,
}

impl Injector {
    /// An injector for `spec`.
    #[must_use]
    pub fn new(spec: FaultSpec) -> Self {
        Self {
            state: Mutex::new(InjectorState {
                rng: StdRng::seed_from_u64(spec.seed),
                requests: 0,
                log: Vec::new(),
                paused: false,
            }),
            spec,
        }
    }

    /// The spec.
    #[must_use]
    pub fn spec(&self) -> &FaultSpec {
        &self.spec
    }

    /// Decides the fault, if any, for the next request. `create` says
    /// whether the request creates a node. Call [`Self::applied`] once the
    /// fault took effect (a malformed body only replaces a success).
    pub fn draw(&self, create: bool) -> Option<FaultKind> {
        let mut state = self.state.lock().ok()?;
        state.requests += 1;
        if state.paused || !self.spec.is_active() {
            return None;
        }
        let roll: f64 = state.rng.random();
        let mut acc = 0.0;
        let mut chosen = None;
        for (kind, rate) in &self.spec.rates {
            acc += rate;
            if roll < acc {
                chosen = Some(*kind);
                break;
            }
        }
        chosen.filter(|k| create || !k.create_only())
    }

    /// Logs that `kind` was injected into the request `target`.
    pub fn applied(&self, kind: FaultKind, target: String) {
        if let Ok(mut state) = self.state.lock() {
            let request = state.requests;
            state.log.push(Injected {
                request,
                kind,
                target,
            });
        }
    }

    /// How many requests it has seen (faulted or not).
    #[must_use]
    pub fn requests(&self) -> u64 {
        self.state.lock().map_or(0, |s| s.requests)
    }

    /// How many faults were injected so far (a mark for [`Self::since`]).
    #[must_use]
    pub fn mark(&self) -> usize {
        self.state.lock().map_or(0, |s| s.log.len())
    }

    /// Faults injected since `mark`.
    #[must_use]
    pub fn since(&self, mark: usize) -> Vec<Injected> {
        self.state
            .lock()
            .map(|s| s.log.get(mark..).unwrap_or_default().to_vec())
            .unwrap_or_default()
    }

    /// Every fault injected.
    #[must_use]
    pub fn log(&self) -> Vec<Injected> {
        self.since(0)
    }

    /// Stops (or resumes) injecting, for the suite's own clean-up.
    pub fn pause(&self, paused: bool) {
        if let Ok(mut s) = self.state.lock() {
            s.paused = paused;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_specs_and_names_mistakes() {
        let spec = FaultSpec::parse("429=0.1, 5xx=0.2,seed=9").unwrap();
        assert_eq!(
            spec.rates,
            vec![(FaultKind::RateLimited, 0.1), (FaultKind::ServerError, 0.2)]
        );
        assert_eq!(spec.seed, 9);
        assert_eq!(
            FaultSpec::parse("default").unwrap(),
            FaultSpec::default_mix()
        );
        assert!(!FaultSpec::parse("").unwrap().is_active());
        for (bad, says) in [
            ("429", "not key=value"),
            ("teapot=0.1", "unknown fault \"teapot\""),
            ("429=x", "not a number"),
            ("429=1.5", "between 0 and 1"),
            ("429=0.5,5xx=0.5", "add up to"),
            ("seed=abc", "seed"),
        ] {
            let err = FaultSpec::parse(bad).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn draws_are_repeatable_and_near_their_rates() {
        let spec = FaultSpec::parse("429=0.2,capacity=0.2,seed=3").unwrap();
        let run = || {
            let inj = Injector::new(spec.clone());
            (0..2000).map(|i| inj.draw(i % 2 == 0)).collect::<Vec<_>>()
        };
        let a = run();
        assert_eq!(a, run());
        let rate = a
            .iter()
            .filter(|f| **f == Some(FaultKind::RateLimited))
            .count();
        assert!((300..500).contains(&rate), "{rate}");
        // Capacity only on create requests (the even ones).
        for (i, f) in a.iter().enumerate() {
            if *f == Some(FaultKind::Capacity) {
                assert_eq!(i % 2, 0);
            }
        }
    }

    #[test]
    fn expected_kinds() {
        let transport = ProvisionerError::Transport("x".into());
        assert!(FaultKind::ServerError.accepts(&transport));
        assert!(!FaultKind::RateLimited.accepts(&transport));
        assert!(FaultKind::Slow.accepts(&transport));
    }
}
