//! Percentiles and human-readable formatting.

/// Order statistics of a sample of durations (in nanoseconds).
#[derive(Clone, Copy, Debug, Default)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// Sorts the samples and takes nearest-rank percentiles.
pub fn summarize(samples: &mut [f64]) -> Summary {
    if samples.is_empty() {
        return Summary::default();
    }
    samples.sort_by(f64::total_cmp);
    Summary {
        n: samples.len(),
        p50: percentile(samples, 50.0),
        p90: percentile(samples, 90.0),
        p99: percentile(samples, 99.0),
    }
}

/// Nearest-rank percentile of sorted samples.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The median of unsorted values.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    percentile(&v, 50.0)
}

/// `45 ns`, `12.3 µs`, `1.20 ms`, `2.05 s`.
pub fn dur(ns: f64) -> String {
    if !ns.is_finite() {
        return "n/a".into();
    }
    if ns < 1_000.0 {
        format!("{ns:.0} ns")
    } else if ns < 10_000.0 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns < 1_000_000.0 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 10_000_000.0 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns < 1_000_000_000.0 {
        format!("{:.1} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// `12.3 MiB`, `512 KiB`, `100 B`.
pub fn bytes(b: f64) -> String {
    let a = b.abs();
    if a >= (1u64 << 40) as f64 {
        format!("{:.1} TiB", b / (1u64 << 40) as f64)
    } else if a >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else if a >= (1u64 << 20) as f64 {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    } else if a >= 10.0 * 1024.0 {
        format!("{:.0} KiB", b / 1024.0)
    } else if a >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{b:.0} B")
    }
}

/// `×1.23` (how many times `base` the value is).
pub fn ratio(value: f64, base: f64) -> String {
    if !value.is_finite() || !base.is_finite() || base == 0.0 {
        return "n/a".into();
    }
    let r = value / base;
    if r >= 100.0 {
        format!("×{r:.0}")
    } else if r >= 10.0 {
        format!("×{r:.1}")
    } else {
        format!("×{r:.2}")
    }
}

/// `12 345/s`.
pub fn rate(per_sec: f64) -> String {
    if !per_sec.is_finite() {
        return "n/a".into();
    }
    let n = per_sec.round() as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    format!("{out}/s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_by_nearest_rank() {
        let mut v: Vec<f64> = (1..=100).map(f64::from).collect();
        let s = summarize(&mut v);
        assert_eq!(s.p50, 50.0);
        assert_eq!(s.p90, 90.0);
        assert_eq!(s.p99, 99.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    }

    #[test]
    fn formats() {
        assert_eq!(dur(45.0), "45 ns");
        assert_eq!(dur(12_345.0), "12.3 µs");
        assert_eq!(ratio(3.0, 2.0), "×1.50");
        assert_eq!(rate(12345.4), "12 345/s");
        assert_eq!(bytes(3.0 * 1048576.0), "3.0 MiB");
    }
}
