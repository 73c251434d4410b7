//! The Kubernetes quantity notation: parsing (a table of accepted and
//! refused inputs, with the values Kubernetes' own `Value()` and
//! `MilliValue()` give for them) and the canonical forms written into
//! template nodes, read back.

use wasmprov_autoscaler::k8s::{
    QuantityError, format_bytes, format_count, format_millis, parse_quantity,
};

/// Input, whole units (rounded up), thousandths (rounded up).
const ACCEPTED: &[(&str, u64, u64)] = &[
    ("0", 0, 0),
    ("000", 0, 0),
    ("1", 1, 1_000),
    ("+1", 1, 1_000),
    ("2", 2, 2_000),
    ("100m", 1, 100),
    ("1500m", 2, 1_500),
    ("0.5", 1, 500),
    ("1.5", 2, 1_500),
    (".5", 1, 500),
    ("1.", 1, 1_000),
    ("007.250", 8, 7_250),
    ("0.0001", 1, 1),
    ("1n", 1, 1),
    ("1u", 1, 1),
    ("1000n", 1, 1),
    ("1k", 1_000, 1_000_000),
    ("500M", 500_000_000, 500_000_000_000),
    ("2G", 2_000_000_000, 2_000_000_000_000),
    ("1T", 1_000_000_000_000, 1_000_000_000_000_000),
    ("1P", 1_000_000_000_000_000, 1_000_000_000_000_000_000),
    ("1E", 1_000_000_000_000_000_000, u64::MAX), // milli overflows: see TOO_LARGE_MILLI
    ("1Ki", 1_024, 1_024_000),
    ("2Gi", 2 << 30, (2 << 30) * 1_000),
    ("1.5Gi", 1_610_612_736, 1_610_612_736_000),
    ("7933Mi", 7_933 << 20, (7_933 << 20) * 1_000),
    ("1Ti", 1 << 40, (1 << 40) * 1_000),
    ("1Pi", 1 << 50, (1 << 50) * 1_000),
    ("1Ei", 1 << 60, u64::MAX),
    ("0.5Ki", 512, 512_000),
    ("1e3", 1_000, 1_000_000),
    ("1E3", 1_000, 1_000_000),
    ("1e+3", 1_000, 1_000_000),
    ("1.5e3", 1_500, 1_500_000),
    ("5e-1", 1, 500),
    ("1e-3", 1, 1),
    ("1e-9", 1, 1),
    ("1e-100", 1, 1),
    ("0e5", 0, 0),
    ("18446744073709551615", u64::MAX, u64::MAX),
];

#[test]
fn accepted_quantities_have_kubernetes_values() {
    for &(text, value, milli) in ACCEPTED {
        let q = parse_quantity(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(q.text(), text);
        assert!(!q.is_negative(), "{text}");
        assert_eq!(q.value(), Ok(value), "value of {text}");
        if milli == u64::MAX {
            assert!(
                matches!(q.milli_value(), Err(QuantityError::TooLarge { .. })),
                "milli value of {text} is beyond u64"
            );
        } else {
            assert_eq!(q.milli_value(), Ok(milli), "milli value of {text}");
        }
    }
}

#[test]
fn malformed_quantities_are_refused_with_the_reason() {
    let table: &[(&str, &str)] = &[
        ("", "empty"),
        (" 1", "no digits"),
        ("1 ", "unknown suffix"),
        ("2 Gi", "unknown suffix"),
        ("+", "no digits"),
        ("-", "no digits"),
        (".", "no digits"),
        ("m", "no digits"),
        ("Gi", "no digits"),
        ("1..5", "unknown suffix"),
        ("1.5.", "unknown suffix"),
        ("--1", "no digits"),
        ("1gb", "unknown suffix"),
        ("1GB", "unknown suffix"),
        ("1KiB", "unknown suffix"),
        ("1ki", "unknown suffix"),
        ("1K", "unknown suffix"),
        ("1mi", "unknown suffix"),
        ("1Mm", "unknown suffix"),
        ("1e", "exponent needs digits"),
        ("1e+", "exponent needs digits"),
        ("1e1.5", "exponent needs digits"),
        ("1e3m", "exponent needs digits"),
        ("1e99999", "beyond"),
        ("1e-99999", "beyond"),
        ("0x10", "unknown suffix"),
        ("½", "no digits"),
        ("１", "no digits"),
        ("1\u{0}", "unknown suffix"),
        (
            "123456789012345678901234567890123456789",
            "38 significant digits",
        ),
    ];
    for &(text, why) in table {
        match parse_quantity(text) {
            Err(e @ QuantityError::Malformed { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains(why), "{text:?}: {msg}");
                assert!(
                    msg.contains("e.g. \"2\""),
                    "the error shows the notation: {msg}"
                );
            }
            other => panic!("{text:?} should be malformed, got {other:?}"),
        }
    }
}

#[test]
fn negative_and_too_large_quantities_are_errors_not_zero() {
    for text in ["-1", "-100m", "-0.5Gi", "-1e3"] {
        let q = parse_quantity(text).unwrap();
        assert!(q.is_negative(), "{text}");
        assert!(
            matches!(q.value(), Err(QuantityError::Negative { .. })),
            "{text}"
        );
        assert!(matches!(
            q.milli_value(),
            Err(QuantityError::Negative { .. })
        ));
    }
    // Minus zero is zero.
    assert_eq!(parse_quantity("-0").unwrap().value(), Ok(0));
    for text in [
        "18446744073709551616",
        "16Ei",
        "1e20",
        "99999999999999999999999999999999999999Ei",
    ] {
        let q = parse_quantity(text).unwrap();
        assert!(
            matches!(q.value(), Err(QuantityError::TooLarge { .. })),
            "{text}"
        );
    }
    // Leading zeros are not significant digits.
    let padded = format!("{}1", "0".repeat(60));
    assert_eq!(parse_quantity(&padded).unwrap().value(), Ok(1));
}

#[test]
fn canonical_forms_read_back_to_the_same_amount() {
    let millis: &[(u64, &str)] = &[
        (0, "0"),
        (1, "1m"),
        (500, "500m"),
        (1_000, "1"),
        (1_500, "1500m"),
        (96_000, "96"),
        (u64::MAX, "18446744073709551615m"),
    ];
    for &(m, text) in millis {
        assert_eq!(format_millis(m), text);
        assert_eq!(parse_quantity(text).unwrap().milli_value(), Ok(m));
    }
    let bytes: &[(u64, &str)] = &[
        (0, "0"),
        (1, "1"),
        (1_000, "1000"),
        (1_023, "1023"),
        (1_024, "1Ki"),
        (1_536, "1536"),
        (1_000_000_000, "1000000000"),
        (1_610_612_736, "1536Mi"),
        (7_933 << 20, "7933Mi"),
        (16 << 30, "16Gi"),
        (3 << 40, "3Ti"),
        (1 << 60, "1Ei"),
        (15 << 60, "15Ei"),
        (u64::MAX, "18446744073709551615"),
    ];
    for &(b, text) in bytes {
        assert_eq!(format_bytes(b), text);
        assert_eq!(parse_quantity(text).unwrap().value(), Ok(b));
    }
    assert_eq!(format_count(110), "110");
    assert_eq!(parse_quantity(&format_count(110)).unwrap().value(), Ok(110));
}
