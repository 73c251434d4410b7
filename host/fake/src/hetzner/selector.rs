//! Parsing and matching of Hetzner `label_selector` expressions.
//!
//! The syntax (same as Kubernetes'): comma-separated requirements, all of
//! which must hold:
//! `k==v` / `k=v` (equal), `k!=v` (absent or different), `k` (present),
//! `!k` (absent), `k in (a,b)` (present and one of), `k notin (a,b)`
//! (absent or none of).

use std::collections::BTreeMap;

/// One requirement of a selector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

/// A parsed selector: the conjunction of its requirements. An empty
/// selector matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector {
    pub requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses a selector; the error says what is wrong, for the API's
    /// `invalid_input` message.
    pub(crate) fn parse(input: &str) -> Result<Self, String> {
        if input.trim().is_empty() {
            return Ok(Self::default());
        }
        let requirements = split_top_level(input)?
            .into_iter()
            .map(parse_requirement)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { requirements })
    }

    /// Whether a resource with `labels` satisfies every requirement.
    pub(crate) fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::NotExists(k) => !labels.contains_key(k),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
        })
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(input: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut depth = 0_u32;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => {
                if depth > 0 {
                    return Err("nested parentheses in label selector".into());
                }
                depth += 1;
            }
            ')' => {
                if depth == 0 {
                    return Err("unbalanced ')' in label selector".into());
                }
                depth -= 1;
            }
            ',' if depth == 0 => {
                parts.push(&input[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err("unbalanced '(' in label selector".into());
    }
    parts.push(&input[start..]);
    Ok(parts)
}

/// Characters allowed in label keys (including a `prefix/` part) and values.
fn is_label_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')
}

fn check_key(key: &str) -> Result<String, String> {
    if key.is_empty() {
        return Err("empty label key in label selector".into());
    }
    if !key.chars().all(is_label_char) {
        return Err(format!("invalid label key '{key}' in label selector"));
    }
    Ok(key.to_string())
}

fn check_value(value: &str) -> Result<String, String> {
    if !value.chars().all(|c| is_label_char(c) && c != '/') {
        return Err(format!("invalid label value '{value}' in label selector"));
    }
    Ok(value.to_string())
}

fn parse_requirement(raw: &str) -> Result<Requirement, String> {
    let req = raw.trim();
    if req.is_empty() {
        return Err("empty requirement in label selector".into());
    }
    if let Some(key) = req.strip_prefix('!') {
        return Ok(Requirement::NotExists(check_key(key.trim())?));
    }
    if let Some(open) = req.find('(') {
        // `key in (a,b)` / `key notin (a,b)`.
        let head = req[..open].trim_end();
        let (key, notin) = if let Some(k) = head.strip_suffix("notin") {
            (k, true)
        } else if let Some(k) = head.strip_suffix("in") {
            (k, false)
        } else {
            return Err(format!("expected 'in' or 'notin' in '{req}'"));
        };
        // The operator must be a separate word.
        if !key.ends_with(char::is_whitespace) {
            return Err(format!("expected 'in' or 'notin' in '{req}'"));
        }
        let key = check_key(key.trim())?;
        let rest = &req[open + 1..];
        let Some(inner) = rest.strip_suffix(')') else {
            return Err(format!("unexpected text after ')' in '{req}'"));
        };
        let values = inner
            .split(',')
            .map(|v| check_value(v.trim()))
            .collect::<Result<Vec<_>, _>>()?;
        if values.iter().any(String::is_empty) {
            return Err(format!("empty value in set of '{req}'"));
        }
        return Ok(if notin {
            Requirement::NotIn(key, values)
        } else {
            Requirement::In(key, values)
        });
    }
    if let Some((k, v)) = req.split_once("!=") {
        return Ok(Requirement::NotEquals(
            check_key(k.trim())?,
            check_value(v.trim())?,
        ));
    }
    if let Some((k, v)) = req.split_once("==") {
        return Ok(Requirement::Equals(
            check_key(k.trim())?,
            check_value(v.trim())?,
        ));
    }
    if let Some((k, v)) = req.split_once('=') {
        return Ok(Requirement::Equals(
            check_key(k.trim())?,
            check_value(v.trim())?,
        ));
    }
    if req.contains(char::is_whitespace) {
        return Err(format!("unexpected whitespace in '{req}'"));
    }
    Ok(Requirement::Exists(check_key(req)?))
}

#[cfg(test)]
mod tests {
    use super::Requirement::*;
    use super::*;

    fn s(x: &str) -> String {
        x.to_string()
    }

    #[test]
    fn parse_table() {
        let cases: Vec<(&str, Vec<Requirement>)> = vec![
            ("", vec![]),
            ("  ", vec![]),
            ("env==prod", vec![Equals(s("env"), s("prod"))]),
            ("env=prod", vec![Equals(s("env"), s("prod"))]),
            ("env = prod", vec![Equals(s("env"), s("prod"))]),
            ("env!=prod", vec![NotEquals(s("env"), s("prod"))]),
            ("env", vec![Exists(s("env"))]),
            ("!env", vec![NotExists(s("env"))]),
            ("env=", vec![Equals(s("env"), s(""))]),
            ("env in (a,b)", vec![In(s("env"), vec![s("a"), s("b")])]),
            ("env in ( a , b )", vec![In(s("env"), vec![s("a"), s("b")])]),
            ("env notin (a)", vec![NotIn(s("env"), vec![s("a")])]),
            (
                "wasmprov.io/pool==web,tier in (a,b),!gone,x!=y",
                vec![
                    Equals(s("wasmprov.io/pool"), s("web")),
                    In(s("tier"), vec![s("a"), s("b")]),
                    NotExists(s("gone")),
                    NotEquals(s("x"), s("y")),
                ],
            ),
            ("in in (in)", vec![In(s("in"), vec![s("in")])]),
        ];
        for (input, want) in cases {
            let got = LabelSelector::parse(input)
                .unwrap_or_else(|e| panic!("{input:?} failed to parse: {e}"));
            assert_eq!(got.requirements, want, "input {input:?}");
        }
    }

    #[test]
    fn parse_errors() {
        for bad in [
            "a,,b",
            "a,",
            "=v",
            "!",
            "k in a,b",
            "k in (a,b",
            "k in a,b)",
            "k within (a)",
            "kin (a)",
            "k in ()",
            "k in (a,,b)",
            "k in (a) x",
            "k==v w",
            "a b",
            "k==v/x",
            "k$==v",
        ] {
            assert!(
                LabelSelector::parse(bad).is_err(),
                "{bad:?} should not parse"
            );
        }
    }

    #[test]
    fn matching() {
        let labels: BTreeMap<String, String> = [("env", "prod"), ("tier", "web")]
            .into_iter()
            .map(|(k, v)| (s(k), s(v)))
            .collect();
        let cases = [
            ("", true),
            ("env==prod", true),
            ("env==dev", false),
            ("env!=dev", true),
            ("env!=prod", false),
            ("missing!=x", true),
            ("env", true),
            ("missing", false),
            ("!missing", true),
            ("!env", false),
            ("tier in (web,db)", true),
            ("tier in (db)", false),
            ("missing in (x)", false),
            ("tier notin (db)", true),
            ("tier notin (web)", false),
            ("missing notin (x)", true),
            ("env=prod,tier=web", true),
            ("env=prod,tier=db", false),
        ];
        for (sel, want) in cases {
            let parsed = LabelSelector::parse(sel).unwrap();
            assert_eq!(parsed.matches(&labels), want, "selector {sel:?}");
        }
    }
}
