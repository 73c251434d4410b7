//! Tag conventions every provider follows, so that the cloud is the source
//! of truth: each node carries the host's owner id and the request id that
//! created it.
//!
//! - `describe` returns only nodes whose [`OWNER`] label equals the owner id;
//! - `provision` first looks for a node whose [`REQUEST`] label equals the
//!   request id and returns it instead of creating a second one.
//!
//! Values are reduced to characters every common cloud accepts in labels
//! (`[a-z0-9_.-]`, at most 63), with [`label_value`].

/// Label carrying the owner id of the host that created the node.
pub const OWNER: &str = "wasmprov-owner";
/// Label carrying the request id that created the node.
pub const REQUEST: &str = "wasmprov-request";

/// Makes a string safe as a label value on common clouds: lowercase
/// `[a-z0-9_.-]`, at most 63 characters, starting and ending alphanumeric.
/// Distinct inputs longer than the limit stay distinct (a hash suffix).
#[must_use]
pub fn label_value(s: &str) -> String {
    let mut out: String = s
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if out.len() > 63 || out != s {
        // Keep distinct inputs distinct after the rewrite.
        let hash = fnv1a(s.as_bytes());
        out.truncate(63 - 9);
        out = format!("{}-{hash:08x}", out.trim_end_matches(['-', '_', '.']));
    }
    let trimmed = out.trim_matches(['-', '_', '.']);
    if trimmed.is_empty() {
        format!("x{:08x}", fnv1a(s.as_bytes()))
    } else {
        trimmed.to_string()
    }
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// The labels to put on a node: the shape's labels plus owner and request tags.
#[must_use]
pub fn node_labels(
    owner_id: &str,
    request_id: &str,
    shape_labels: &crate::Labels,
) -> crate::Labels {
    let mut labels = shape_labels.clone();
    labels.insert(OWNER.to_string(), label_value(owner_id));
    labels.insert(REQUEST.to_string(), label_value(request_id));
    labels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_safe_and_distinct() {
        assert_eq!(label_value("owner-1"), "owner-1");
        let a = label_value("Req/1");
        let b = label_value("req-1");
        assert_ne!(a, b);
        assert!(a.len() <= 63);
        let long = "x".repeat(100);
        let v = label_value(&long);
        assert!(v.len() <= 63, "{v}");
        assert_ne!(v, label_value(&"x".repeat(101)));
        assert!(!label_value("---").is_empty());
        for v in [a, v, label_value("..a..")] {
            assert!(
                v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            );
            assert!(v.starts_with(|c: char| c.is_ascii_alphanumeric()));
        }
    }
}
