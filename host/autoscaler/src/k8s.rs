//! The Kubernetes side of the wire: the `v1.Node` / `v1.Pod` protobuf subset
//! (generated from `proto/k8s*.proto`, names and numbers as upstream), the
//! quantity notation (`"500m"`, `"7933Mi"`, `"1e3"`) and the rules for label
//! keys and values.
//!
//! The generated modules sit at the paths of their protobuf packages, so
//! `k8s.io.api.core.v1.Node` is [`io::api::core::v1::Node`]; the aliases
//! [`core_v1`], [`meta_v1`] and [`Quantity`] save the walk.
//!
//! Quantities are parsed and written here by hand: the Rust crates that parse
//! them all build on `k8s-openapi` (a large crate whose Kubernetes version
//! must be chosen by a feature), and the grammar is small. The parser follows
//! the grammar in apimachinery's `Quantity` documentation and is stricter
//! than Go's in one way: a number needs a digit (Go reads `"."`, `"+"` and
//! `"-"` as zero; an API server never writes them).
//!
//! ```
//! use wasmprov_autoscaler::k8s::{format_bytes, format_millis, parse_quantity};
//! let q = parse_quantity("1.5Gi").unwrap();
//! assert_eq!(q.value().unwrap(), 1_610_612_736);
//! assert_eq!(format_bytes(1_610_612_736), "1536Mi");
//! assert_eq!(parse_quantity("250m").unwrap().milli_value().unwrap(), 250);
//! assert_eq!(format_millis(2_500), "2500m");
//! assert!(parse_quantity("2 Gi").is_err());
//! ```

/// The generated protobuf packages, nested as their names are
/// (`k8s.io.api.core.v1` is `io::api::core::v1`).
#[allow(missing_docs, clippy::all, reason = "generated code")]
pub mod io {
    /// `k8s.io.api`.
    pub mod api {
        /// `k8s.io.api.core`.
        pub mod core {
            /// `k8s.io.api.core.v1`: Node, Pod and what they hold.
            pub mod v1 {
                include!(concat!(env!("OUT_DIR"), "/k8s.io.api.core.v1.rs"));
            }
        }
    }
    /// `k8s.io.apimachinery`.
    pub mod apimachinery {
        /// `k8s.io.apimachinery.pkg`.
        pub mod pkg {
            /// `k8s.io.apimachinery.pkg.api`.
            pub mod api {
                /// `k8s.io.apimachinery.pkg.api.resource`: Quantity.
                pub mod resource {
                    include!(concat!(
                        env!("OUT_DIR"),
                        "/k8s.io.apimachinery.pkg.api.resource.rs"
                    ));
                }
            }
            /// `k8s.io.apimachinery.pkg.apis`.
            pub mod apis {
                /// `k8s.io.apimachinery.pkg.apis.meta`.
                pub mod meta {
                    /// `k8s.io.apimachinery.pkg.apis.meta.v1`: ObjectMeta.
                    pub mod v1 {
                        include!(concat!(
                            env!("OUT_DIR"),
                            "/k8s.io.apimachinery.pkg.apis.meta.v1.rs"
                        ));
                    }
                }
            }
        }
    }
}

pub use io::api::core::v1 as core_v1;
pub use io::apimachinery::pkg::api::resource::Quantity;
pub use io::apimachinery::pkg::apis::meta::v1 as meta_v1;

/// A string that is not a Kubernetes quantity, or one too large to use.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuantityError {
    /// Not in the notation.
    #[error(
        "{text:?} is not a Kubernetes quantity ({why}); write a number with an optional \
         suffix, e.g. \"2\", \"500m\", \"1.5Gi\", \"512M\" or \"1e3\""
    )]
    Malformed {
        /// The input, shortened to 80 characters.
        text: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// Well formed, but beyond what wasmprov counts (2^64 - 1 units).
    #[error("{text:?} is too large")]
    TooLarge {
        /// The input, shortened to 80 characters.
        text: String,
    },
    /// Negative where an amount is expected.
    #[error("{text:?} is negative; resource amounts are zero or more")]
    Negative {
        /// The input, shortened to 80 characters.
        text: String,
    },
}

/// A parsed quantity, exact: `digits × 10^exp10 × 2^exp2`, with a sign.
///
/// Kept exact rather than as a float so that `"0.1"` and `"100m"` are the
/// same number and rounding happens once, upwards, as Kubernetes rounds
/// (`Value()` and `MilliValue()` round up: asking for a sliver of a resource
/// asks for one whole unit of it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedQuantity {
    text: String,
    negative: bool,
    digits: u128,
    exp10: i32,
    exp2: u32,
}

/// The most significant digits a quantity may have (u128 holds 38).
const MAX_DIGITS: usize = 38;
/// Exponents beyond this are refused (no resource amount needs them).
const MAX_EXP10: i32 = 1_000;

fn shorten(text: &str) -> String {
    text.chars().take(80).collect()
}

/// Parses `text` as a Kubernetes quantity.
///
/// # Errors
/// [`QuantityError::Malformed`] for anything outside the notation: empty,
/// spaces, no digits, an unknown suffix (`"2gb"`, `"1KiB"`), an exponent
/// without digits (`"1e"`), more than 38 significant digits or an exponent
/// beyond ±1000.
pub fn parse_quantity(text: &str) -> Result<ParsedQuantity, QuantityError> {
    let bad = |why| QuantityError::Malformed {
        text: shorten(text),
        why,
    };
    if text.is_empty() {
        return Err(bad("it is empty"));
    }
    let bytes = text.as_bytes();
    let mut pos = 0;
    let negative = match bytes.first() {
        Some(b'-') => {
            pos = 1;
            true
        }
        Some(b'+') => {
            pos = 1;
            false
        }
        _ => false,
    };
    let int_start = pos;
    while pos < bytes.len() && bytes[pos].is_ascii_digit() {
        pos += 1;
    }
    let int_part = &text[int_start..pos];
    let mut frac_part = "";
    if pos < bytes.len() && bytes[pos] == b'.' {
        pos += 1;
        let frac_start = pos;
        while pos < bytes.len() && bytes[pos].is_ascii_digit() {
            pos += 1;
        }
        frac_part = &text[frac_start..pos];
    }
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(bad("it has no digits"));
    }
    let (exp10_suffix, exp2) = match &text[pos..] {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        suffix if suffix.starts_with(['e', 'E']) => (parse_exponent(&suffix[1..], &bad)?, 0),
        _ => return Err(bad("unknown suffix")),
    };
    // The significant digits, leading zeros dropped.
    let all = format!("{int_part}{frac_part}");
    let significant = all.trim_start_matches('0');
    if significant.len() > MAX_DIGITS {
        return Err(bad("more than 38 significant digits"));
    }
    let digits = if significant.is_empty() {
        0
    } else {
        significant
            .parse::<u128>()
            .map_err(|_| bad("more than 38 significant digits"))?
    };
    let frac_len = i32::try_from(frac_part.len()).map_err(|_| bad("too many digits"))?;
    Ok(ParsedQuantity {
        text: text.to_owned(),
        negative: negative && digits != 0,
        digits,
        exp10: exp10_suffix - frac_len,
        exp2,
    })
}

fn parse_exponent(
    text: &str,
    bad: &impl Fn(&'static str) -> QuantityError,
) -> Result<i32, QuantityError> {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad("an exponent needs digits, e.g. \"1e3\""));
    }
    match text.parse::<i32>() {
        Ok(e) if (-MAX_EXP10..=MAX_EXP10).contains(&e) => Ok(e),
        _ => Err(bad("exponent beyond ±1000")),
    }
}

impl ParsedQuantity {
    /// The text it was parsed from.
    #[must_use]
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether it is below zero.
    #[must_use]
    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// The amount in whole units, rounded up (`"1.2"` is 2, `"100m"` is 1):
    /// bytes for memory and storage, a count for GPUs and pods.
    ///
    /// # Errors
    /// [`QuantityError::Negative`] below zero, [`QuantityError::TooLarge`]
    /// beyond `u64::MAX`.
    pub fn value(&self) -> Result<u64, QuantityError> {
        self.scaled(0)
    }

    /// The amount in thousandths, rounded up (`"0.5"` is 500, `"1u"` is 1):
    /// millicores for CPU.
    ///
    /// # Errors
    /// As [`ParsedQuantity::value`].
    pub fn milli_value(&self) -> Result<u64, QuantityError> {
        self.scaled(3)
    }

    /// `self × 10^shift`, rounded up, as a u64.
    fn scaled(&self, shift: i32) -> Result<u64, QuantityError> {
        if self.negative {
            return Err(QuantityError::Negative {
                text: shorten(&self.text),
            });
        }
        let too_large = || QuantityError::TooLarge {
            text: shorten(&self.text),
        };
        if self.digits == 0 {
            return Ok(0);
        }
        // 2^exp2 first: exp2 ≤ 60 and the digits < 10^38 may still overflow
        // u128 (2^128 ≈ 3.4e38), which is then too large for u64 anyway.
        let mantissa = self
            .digits
            .checked_mul(1u128 << self.exp2)
            .ok_or_else(too_large)?;
        let exp = self.exp10 + shift;
        let value = if exp >= 0 {
            let factor = 10u128
                .checked_pow(exp.unsigned_abs())
                .ok_or_else(too_large)?;
            mantissa.checked_mul(factor).ok_or_else(too_large)?
        } else {
            match 10u128.checked_pow(exp.unsigned_abs()) {
                // Rounds up: any positive amount is at least one unit.
                Some(divisor) => mantissa.div_ceil(divisor),
                // 10^39 and beyond exceed every u128 mantissa: a positive
                // sliver, one unit.
                None => 1,
            }
        };
        u64::try_from(value).map_err(|_| too_large())
    }
}

impl std::str::FromStr for ParsedQuantity {
    type Err = QuantityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_quantity(s)
    }
}

/// Millicores (or any thousandths) in Kubernetes' canonical form: whole
/// numbers plain (`"2"`), others in milli (`"500m"`, `"1500m"`).
#[must_use]
pub fn format_millis(millis: u64) -> String {
    if millis.is_multiple_of(1000) {
        (millis / 1000).to_string()
    } else {
        format!("{millis}m")
    }
}

/// Bytes in Kubernetes' canonical binary form: the largest binary suffix
/// that divides them exactly (`"7933Mi"`, `"16Gi"`), else plain bytes
/// (`"1000000000"`).
#[must_use]
pub fn format_bytes(bytes: u64) -> String {
    const SUFFIXES: [&str; 6] = ["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];
    if bytes == 0 {
        return "0".into();
    }
    let mut value = bytes;
    let mut suffix = "";
    for s in SUFFIXES {
        if !value.is_multiple_of(1024) {
            break;
        }
        value /= 1024;
        suffix = s;
    }
    format!("{value}{suffix}")
}

/// A count (pods, GPUs) as a quantity: plain digits.
#[must_use]
pub fn format_count(count: u64) -> String {
    count.to_string()
}

/// A quantity message holding `text`.
#[must_use]
pub fn quantity(text: String) -> Quantity {
    Quantity { string: Some(text) }
}

/// A label key, label value or taint that Kubernetes would refuse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LabelError {
    /// The key is not a qualified name.
    #[error(
        "label or taint key {key:?}: {why}; a key is an optional DNS subdomain prefix and \
         \"/\" followed by a name of at most 63 letters, digits, '-', '_' or '.', starting \
         and ending with a letter or digit (e.g. \"example.com/pool\" or \"pool\")"
    )]
    Key {
        /// The key, shortened to 80 characters.
        key: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The value is not a label value.
    #[error(
        "value {value:?} of {key:?}: {why}; a value is empty or at most 63 letters, digits, \
         '-', '_' or '.', starting and ending with a letter or digit"
    )]
    Value {
        /// The key it belongs to.
        key: String,
        /// The value, shortened to 80 characters.
        value: String,
        /// What is wrong with it.
        why: &'static str,
    },
}

/// The longest name part of a key, and the longest value.
const MAX_NAME: usize = 63;
/// The longest prefix of a key.
const MAX_PREFIX: usize = 253;

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, at most 63 characters;
/// `None` when it fits, else why not.
fn name_fault(name: &str) -> Option<&'static str> {
    let b = name.as_bytes();
    if b.len() > MAX_NAME {
        return Some("longer than 63 characters");
    }
    let (Some(first), Some(last)) = (b.first(), b.last()) else {
        return Some("empty");
    };
    if !first.is_ascii_alphanumeric() || !last.is_ascii_alphanumeric() {
        return Some("must start and end with a letter or digit");
    }
    if !b
        .iter()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
    {
        return Some("only letters, digits, '-', '_' and '.' are allowed");
    }
    None
}

/// A DNS-1123 subdomain: lowercase labels of `[a-z0-9-]`, dot-separated,
/// each starting and ending alphanumeric, at most 253 characters in all.
fn subdomain_fault(prefix: &str) -> Option<&'static str> {
    if prefix.len() > MAX_PREFIX {
        return Some("prefix longer than 253 characters");
    }
    for part in prefix.split('.') {
        let b = part.as_bytes();
        let (Some(first), Some(last)) = (b.first(), b.last()) else {
            return Some("prefix has an empty DNS label");
        };
        let alnum = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        if !alnum(first) || !alnum(last) || !b.iter().all(|c| alnum(c) || *c == b'-') {
            return Some("prefix must be a lowercase DNS subdomain");
        }
    }
    None
}

/// Checks a label (or taint) key: `[prefix/]name`.
///
/// # Errors
/// [`LabelError::Key`] naming what is wrong.
pub fn check_key(key: &str) -> Result<(), LabelError> {
    let fault = match key.split_once('/') {
        Some((prefix, name)) => {
            if prefix.is_empty() {
                Some("empty prefix before '/'")
            } else {
                subdomain_fault(prefix).or_else(|| name_fault(name))
            }
        }
        None => name_fault(key),
    };
    match fault {
        None => Ok(()),
        Some(why) => Err(LabelError::Key {
            key: shorten(key),
            why,
        }),
    }
}

/// Checks a label (or taint) value: empty, or a name.
///
/// # Errors
/// [`LabelError::Value`] naming what is wrong.
pub fn check_value(key: &str, value: &str) -> Result<(), LabelError> {
    if value.is_empty() {
        return Ok(());
    }
    match name_fault(value) {
        None => Ok(()),
        Some(why) => Err(LabelError::Value {
            key: shorten(key),
            value: shorten(value),
            why,
        }),
    }
}

/// Whether `value` may be a label value.
#[must_use]
pub fn is_label_value(value: &str) -> bool {
    check_value("", value).is_ok()
}

/// The prefix of a key (`"example.com"` of `"example.com/pool"`), if any.
#[must_use]
pub fn key_prefix(key: &str) -> Option<&str> {
    key.split_once('/').map(|(p, _)| p)
}

/// Whether a kubelet may set `key` on its own node (`--node-labels`, under
/// the NodeRestriction admission plugin): any key outside the
/// `kubernetes.io` and `k8s.io` namespaces, the `kubelet.kubernetes.io` and
/// `node.kubernetes.io` namespaces, and a fixed list of well-known keys.
/// A template label the node's kubelet cannot set would make the template
/// promise a node that never appears.
#[must_use]
pub fn kubelet_may_set(key: &str) -> bool {
    const WELL_KNOWN: [&str; 11] = [
        "kubernetes.io/hostname",
        "kubernetes.io/arch",
        "kubernetes.io/os",
        "beta.kubernetes.io/arch",
        "beta.kubernetes.io/os",
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
        "failure-domain.beta.kubernetes.io/region",
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/region",
        "topology.kubernetes.io/zone",
    ];
    let Some(prefix) = key_prefix(key) else {
        return true;
    };
    let within = |ns: &str| prefix == ns || prefix.ends_with(&format!(".{ns}"));
    if within("node-restriction.kubernetes.io") {
        return false;
    }
    if within("kubelet.kubernetes.io") || within("node.kubernetes.io") {
        return true;
    }
    if within("kubernetes.io") || within("k8s.io") {
        return WELL_KNOWN.contains(&key);
    }
    true
}
