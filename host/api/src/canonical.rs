//! Which labels a caller may give: the one rule for a shape's labels and
//! `set_labels` alike ([`label_fault`]). A key that is not canonical (a
//! reserved key padded with whitespace or written in capitals) is a label
//! of its own to a cloud that keeps keys exactly, and the reserved label
//! itself to one that trims or folds case: two readers would disagree on
//! who owns a node. This module depends on nothing else in the crate.

/// The reserved label keys (`wasmprov_api::provenance`'s `OWNER_LABEL`,
/// `JOURNAL_LABEL`, `REQUEST_LABEL`, `REQUEST_DIGEST_LABEL`, `GROUP_LABEL`;
/// a test there checks they agree).
pub(crate) const RESERVED: &[&str] = &[
    "wasmprov-owner",
    "wasmprov-journal",
    "wasmprov-request",
    "wasmprov-request-digest",
    "wasmprov-group",
];

/// The reserved label (`wasmprov_api::provenance::is_reserved_label`) `key` reads as once
/// put in Unicode compatibility form (NFKC), trimmed and lowercased, when it
/// does: `" wasmprov-owner"`, `"WASMPROV-OWNER"` and the full-width
/// `"ｗａｓｍｐｒｏｖ-owner"` read as `provenance::OWNER_LABEL`. A cloud, a
/// plugin or a person reading a console that trims, folds case or
/// normalizes would take such a key for the reserved one.
#[must_use]
pub fn reads_as_reserved(key: &str) -> Option<&'static str> {
    use unicode_normalization::UnicodeNormalization;
    if key.is_ascii() {
        // NFKC leaves ASCII as it is: the common case needs no copy.
        let key = key.trim();
        return RESERVED
            .iter()
            .copied()
            .find(|r| r.eq_ignore_ascii_case(key));
    }
    let folded = key.nfkc().collect::<String>().trim().to_lowercase();
    RESERVED.iter().copied().find(|r| *r == folded)
}

/// Why a label a caller asks for is not canonical, or `None` when it is:
/// the one rule for shape labels (`NodeShape::validate`)
/// and `set_labels` (`provenance::check_new_labels`) alike. Refused: a key with
/// leading or trailing whitespace, a control character anywhere in the key
/// or the value (a NUL or a newline breaks the clouds' XML and JSON), and a
/// key that is not a reserved label but reads as one
/// ([`reads_as_reserved`]): a cloud that trims keys, or a plugin that
/// reads them trimmed, would take it for the reserved label and so for
/// another owner's or another journal's. Whether the reserved keys
/// themselves may be set is the caller's rule (a fleet sets them on shapes;
/// `set_labels` never may).
#[must_use]
pub fn label_fault(key: &str, value: &str) -> Option<String> {
    if key.trim() != key {
        return Some(format!(
            "label key {key:?} has leading or trailing whitespace"
        ));
    }
    if key.chars().any(char::is_control) {
        return Some(format!("label key {key:?} has a control character"));
    }
    if value.chars().any(char::is_control) {
        return Some(format!(
            "the value of label {key:?} has a control character"
        ));
    }
    if let Some(r) = reads_as_reserved(key)
        && r != key
    {
        return Some(format!(
            "label key {key:?} reads as the reserved label {r:?} (the ownership and request labels are set by the host and its plugins)"
        ));
    }
    None
}
