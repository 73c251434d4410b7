//! A caller's `#cloud-config` user data with the plugin's own entries
//! joined in (feature `cloud-config`).
//!
//! Contract 0.2 lets a request bring its own user data; a plugin that must
//! add to it — a join command, the request's SSH keys — makes one document
//! of both rather than dropping either. [`CloudConfig`] parses the caller's
//! document, keeps every key of it, appends the plugin's entries to the
//! lists cloud-init runs or installs (`write_files`, `runcmd`,
//! `ssh_authorized_keys`, …: theirs first, then the plugin's) and writes
//! one `#cloud-config` again.
//!
//! cloud-init reads YAML 1.1 (PyYAML), where `1_000` is an integer,
//! `2001-12-14` a date and `on` a boolean; a YAML 1.2 parser reads all
//! three as strings. So the document is not re-typed on the way through:
//! `yaml-rust2` parses it into events, every plain scalar is kept exactly
//! as written (cloud-init types it as it would have), every quoted one
//! stays a string and is written quoted unless it could not be read as
//! anything else, and the plugin's own entries are strings, quoted the
//! same way.
//!
//! ```
//! # #[cfg(feature = "cloud-config")] {
//! use wasmprov_guest::cloud_config::CloudConfig;
//!
//! let mut doc = CloudConfig::parse(b"#cloud-config\npackages: [htop]\n").unwrap();
//! doc.append("ssh_authorized_keys", &["ssh-ed25519 AAAA… ops".to_string()]).unwrap();
//! let text = doc.render("# keys added by my-plugin").unwrap();
//! assert!(text.starts_with("#cloud-config\n# keys added by my-plugin\n"));
//! # }
//! ```

use yaml_rust2::parser::{Event, MarkedEventReceiver, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

/// The first line of every document this module reads or writes.
pub const HEADER: &str = "#cloud-config";

/// One node of a document, kept as cloud-init will read it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Node {
    /// A plain scalar, exactly as written (`42`, `1_000`, `on`, `2001-12-14`, `htop`).
    Plain(String),
    /// A string: quoted in the source, or added by the plugin.
    Str(String),
    /// A scalar or collection with an explicit tag other than `!!str`.
    Tagged(String, Box<Node>),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// The scalar's text, for finding a key.
    fn text(&self) -> Option<&str> {
        match self {
            Self::Plain(s) | Self::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// Builds [`Node`]s from the parser's events (the loader of `yaml-rust2`
/// types scalars by YAML 1.2 and forgets their quoting).
#[derive(Default)]
struct Loader {
    stack: Vec<(Node, usize)>,
    keys: Vec<Option<Node>>,
    anchors: std::collections::HashMap<usize, Node>,
    docs: Vec<Node>,
    error: Option<String>,
}

fn tag_text(tag: &Tag) -> String {
    format!("{}{}", tag.handle, tag.suffix)
}

impl Loader {
    fn insert(&mut self, node: Node, anchor: usize) {
        if anchor > 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.docs.push(node),
            Some((Node::Seq(items), _)) => items.push(node),
            Some((Node::Map(entries), _)) => {
                let pending = self.keys.last_mut().expect("a key slot per mapping");
                match pending.take() {
                    None => *pending = Some(node),
                    Some(key) => entries.push((key, node)),
                }
            }
            Some(_) => self.error = Some("a scalar cannot hold children".into()),
        }
    }
}

impl MarkedEventReceiver for Loader {
    fn on_event(&mut self, ev: Event, _mark: Marker) {
        match ev {
            Event::Scalar(value, style, anchor, tag) => {
                let node = match (style, tag) {
                    (_, Some(t)) if t.handle == "tag:yaml.org,2002:" && t.suffix == "str" => {
                        Node::Str(value)
                    }
                    (TScalarStyle::Plain, None) => Node::Plain(value),
                    (_, None) => Node::Str(value),
                    (TScalarStyle::Plain, Some(t)) => {
                        Node::Tagged(tag_text(&t), Box::new(Node::Plain(value)))
                    }
                    (_, Some(t)) => Node::Tagged(tag_text(&t), Box::new(Node::Str(value))),
                };
                self.insert(node, anchor);
            }
            Event::SequenceStart(anchor, _) => self.stack.push((Node::Seq(Vec::new()), anchor)),
            Event::MappingStart(anchor, _) => {
                self.stack.push((Node::Map(Vec::new()), anchor));
                self.keys.push(None);
            }
            Event::SequenceEnd | Event::MappingEnd => {
                if matches!(ev, Event::MappingEnd) {
                    self.keys.pop();
                }
                if let Some((node, anchor)) = self.stack.pop() {
                    self.insert(node, anchor);
                }
            }
            Event::Alias(id) => match self.anchors.get(&id).cloned() {
                Some(node) => self.insert(node, 0),
                None => self.error = Some(format!("alias to an unknown anchor ({id})")),
            },
            Event::Nothing
            | Event::StreamStart
            | Event::StreamEnd
            | Event::DocumentStart
            | Event::DocumentEnd => {}
        }
    }
}

/// Whether YAML 1.1 (or 1.2) could read `s`, written plain, as anything
/// but this string: booleans and nulls of either version, and anything
/// that starts like a number, a date or a sexagesimal (`1_000`, `0b101`,
/// `0o17`, `1:20`, `2001-12-14`, `.5`, `+.inf`). Generous on purpose: a
/// string quoted that need not be loses nothing.
fn could_be_other(s: &str) -> bool {
    const WORDS: &[&str] = &[
        "y", "Y", "n", "N", "yes", "Yes", "YES", "no", "No", "NO", "true", "True", "TRUE", "false",
        "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF", "null", "Null", "NULL", "~", "<<",
        "=",
    ];
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    WORDS.contains(&s)
        || unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.')
        || unsigned.eq_ignore_ascii_case(".inf")
        || s.eq_ignore_ascii_case(".nan")
}

/// A string as a scalar cloud-init reads back as that string: plain when
/// it is a plain word or phrase nothing could mistake, else double-quoted
/// (JSON's escapes are YAML's).
fn string_scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '/')
        && !s.ends_with(' ')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-' | ' ' | '='))
        && !could_be_other(s);
    if plain {
        s.to_string()
    } else {
        serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
    }
}

fn scalar(node: &Node) -> Option<String> {
    match node {
        Node::Plain(s) => Some(if s.is_empty() {
            "\"\"".into()
        } else {
            s.clone()
        }),
        Node::Str(s) => Some(string_scalar(s)),
        Node::Tagged(tag, inner) => scalar(inner).map(|v| format!("!<{tag}> {v}")),
        Node::Seq(v) if v.is_empty() => Some("[]".into()),
        Node::Map(m) if m.is_empty() => Some("{}".into()),
        _ => None,
    }
}

/// Writes a collection in block style at `indent` spaces.
fn emit(node: &Node, indent: usize, out: &mut String) -> Result<(), String> {
    let pad = " ".repeat(indent);
    match node {
        Node::Map(entries) => {
            for (key, value) in entries {
                let key = scalar(key)
                    .filter(|_| key.text().is_some())
                    .ok_or("a mapping key that is not a plain value")?;
                match scalar(value) {
                    Some(v) => out.push_str(&format!("{pad}{key}: {v}\n")),
                    None => {
                        out.push_str(&format!("{pad}{key}:\n"));
                        emit(value, indent + 2, out)?;
                    }
                }
            }
        }
        Node::Seq(items) => {
            for item in items {
                match scalar(item) {
                    Some(v) => out.push_str(&format!("{pad}- {v}\n")),
                    None => {
                        let mut inner = String::new();
                        emit(item, indent + 2, &mut inner)?;
                        out.push_str(&format!("{pad}- {}", &inner[indent + 2..]));
                    }
                }
            }
        }
        Node::Tagged(tag, inner) => {
            out.push_str(&format!("{pad}!<{tag}>\n"));
            emit(inner, indent, out)?;
        }
        Node::Plain(_) | Node::Str(_) => {
            return Err("a document must be a mapping".into());
        }
    }
    Ok(())
}

/// A `#cloud-config` mapping being added to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CloudConfig {
    doc: Vec<(Node, Node)>,
}

impl CloudConfig {
    /// The caller's user data as a document to add to.
    ///
    /// # Errors
    /// What is wrong with it, in words for the caller: not UTF-8, its first
    /// line not `#cloud-config`, not valid YAML, more than one document, or
    /// not a mapping.
    pub fn parse(user_data: &[u8]) -> Result<Self, String> {
        let text = std::str::from_utf8(user_data)
            .map_err(|_| "the user data is not UTF-8 text".to_string())?;
        if text.lines().next().map(str::trim_end) != Some(HEADER) {
            return Err(format!(
                "the user data must be a #cloud-config document (its first line \"{HEADER}\") to be merged with what the plugin adds"
            ));
        }
        let mut loader = Loader::default();
        Parser::new(text.chars())
            .load(&mut loader, true)
            .map_err(|e| format!("the user data is not valid YAML: {e}"))?;
        if let Some(e) = loader.error {
            return Err(format!("the user data is not valid YAML: {e}"));
        }
        let doc = match loader.docs.len() {
            0 => Vec::new(),
            1 => match loader.docs.remove(0) {
                Node::Map(m) => m,
                Node::Plain(p) if matches!(p.as_str(), "" | "~" | "null" | "Null" | "NULL") => {
                    Vec::new()
                }
                _ => return Err("the user data's #cloud-config is not a mapping".into()),
            },
            n => return Err(format!("the user data holds {n} YAML documents, not one")),
        };
        Ok(Self { doc })
    }

    /// The caller's user data when there is some, else an empty document.
    ///
    /// # Errors
    /// As [`CloudConfig::parse`].
    pub fn parse_or_empty(user_data: Option<&[u8]>) -> Result<Self, String> {
        user_data.map_or_else(|| Ok(Self::default()), Self::parse)
    }

    /// Appends `items` to the list under `key`, creating it when absent.
    ///
    /// # Errors
    /// When the document's `key` holds something other than a list.
    pub fn append(&mut self, key: &str, items: &[String]) -> Result<(), String> {
        self.append_nodes(key, items.iter().cloned().map(Node::Str).collect())
    }

    /// Appends every list of `ours`, a `#cloud-config` document of the
    /// plugin's own (say, its `write_files` and `runcmd`), to the same key
    /// of this one.
    ///
    /// # Errors
    /// When `ours` does not parse, holds a key whose value is not a list, or
    /// this document's value under one of its keys is not a list.
    pub fn join(&mut self, ours: &str) -> Result<(), String> {
        let ours =
            Self::parse(ours.as_bytes()).map_err(|e| format!("the plugin's own document: {e}"))?;
        for (key, value) in ours.doc {
            let name = key.text().unwrap_or("?").to_string();
            let Node::Seq(items) = value else {
                return Err(format!(
                    "the plugin's own document: {name} is not a list, so it cannot be joined"
                ));
            };
            self.append_nodes(&name, items)?;
        }
        Ok(())
    }

    fn append_nodes(&mut self, key: &str, items: Vec<Node>) -> Result<(), String> {
        if items.is_empty() {
            return Ok(());
        }
        match self.doc.iter_mut().find(|(k, _)| k.text() == Some(key)) {
            Some((_, Node::Seq(list))) => list.extend(items),
            Some((_, value @ Node::Plain(_)))
                if matches!(value.text(), Some("" | "~" | "null" | "Null" | "NULL")) =>
            {
                *value = Node::Seq(items);
            }
            None => self.doc.push((Node::Str(key.into()), Node::Seq(items))),
            Some(_) => return Err(format!("the user data's {key} is not a list")),
        }
        Ok(())
    }

    /// The keys of the document, in order.
    #[must_use]
    pub fn keys(&self) -> Vec<String> {
        self.doc
            .iter()
            .map(|(k, _)| k.text().map_or_else(|| format!("{k:?}"), str::to_string))
            .collect()
    }

    /// The document as user data: `#cloud-config`, then `comment` (lines
    /// that must each start with `#`; empty for none), then the mapping.
    ///
    /// # Errors
    /// A comment line not starting with `#`, or a key that is not a
    /// plain value.
    pub fn render(&self, comment: &str) -> Result<String, String> {
        if let Some(bad) = comment.lines().find(|l| !l.starts_with('#')) {
            return Err(format!("a comment line must start with '#': {bad:?}"));
        }
        let mut doc = format!("{HEADER}\n");
        for line in comment.lines() {
            doc.push_str(line);
            doc.push('\n');
        }
        emit(&Node::Map(self.doc.clone()), 0, &mut doc)
            .map_err(|e| format!("writing the merged document: {e}"))?;
        Ok(doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use yaml_rust2::{Yaml, YamlLoader};

    fn parse(doc: &str) -> Yaml {
        let mut docs = YamlLoader::load_from_str(doc).expect("valid YAML");
        assert_eq!(docs.len(), 1);
        docs.remove(0)
    }

    #[test]
    fn lists_are_joined_theirs_first_and_everything_else_is_kept() {
        let theirs = b"#cloud-config\npackages: [htop]\nruncmd:\n  - echo first\nusers:\n  - name: ops\n    sudo: 'ALL=(ALL) NOPASSWD:ALL'\nssh_authorized_keys:\n  - ssh-ed25519 AAAA theirs\n";
        let mut doc = CloudConfig::parse(theirs).unwrap();
        doc.join("#cloud-config\nruncmd:\n  - [agent, join]\nwrite_files:\n  - path: /x\n    permissions: \"0644\"\n")
            .unwrap();
        doc.append("ssh_authorized_keys", &["ssh-ed25519 BBBB ours".into()])
            .unwrap();
        let text = doc.render("# added: a join\n# and a key").unwrap();
        assert!(
            text.starts_with("#cloud-config\n# added: a join\n# and a key\n"),
            "{text}"
        );
        let y = parse(&text);
        assert_eq!(y["packages"][0].as_str(), Some("htop"));
        assert_eq!(
            y["users"][0]["sudo"].as_str(),
            Some("ALL=(ALL) NOPASSWD:ALL")
        );
        assert_eq!(y["runcmd"][0].as_str(), Some("echo first"));
        assert_eq!(y["runcmd"][1][1].as_str(), Some("join"));
        assert_eq!(
            y["write_files"][0]["permissions"].as_str(),
            Some("0644"),
            "still a string"
        );
        let keys: Vec<&str> = y["ssh_authorized_keys"]
            .as_vec()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        assert_eq!(keys, ["ssh-ed25519 AAAA theirs", "ssh-ed25519 BBBB ours"]);
        assert_eq!(
            doc.keys(),
            [
                "packages",
                "runcmd",
                "users",
                "ssh_authorized_keys",
                "write_files"
            ]
        );
    }

    #[test]
    fn no_user_data_is_an_empty_document_and_bad_documents_say_why() {
        let mut doc = CloudConfig::parse_or_empty(None).unwrap();
        assert_eq!(doc.render("").unwrap(), "#cloud-config\n");
        doc.append("ssh_authorized_keys", &["k1".into(), "k2".into()])
            .unwrap();
        let y = parse(&doc.render("").unwrap());
        assert_eq!(y["ssh_authorized_keys"][1].as_str(), Some("k2"));
        // An empty or null document is an empty mapping.
        for empty in [&b"#cloud-config\n"[..], b"#cloud-config\n~\n"] {
            assert_eq!(CloudConfig::parse(empty).unwrap(), CloudConfig::default());
        }
        for (bad, why) in [
            (&b"#!/bin/sh\necho hi\n"[..], "#cloud-config"),
            (b"#cloud-config\n- a\n- b\n", "mapping"),
            (b"#cloud-config\nkey: [unclosed\n", "YAML"),
            (b"#cloud-config\na: 1\n---\nb: 2\n", "2 YAML documents"),
            (b"\xff\xfe", "UTF-8"),
        ] {
            let e = CloudConfig::parse(bad).unwrap_err();
            assert!(e.contains(why), "{why}: {e}");
        }
        let mut doc = CloudConfig::parse(b"#cloud-config\nruncmd: echo\n").unwrap();
        let e = doc.append("runcmd", &["x".into()]).unwrap_err();
        assert!(e.contains("runcmd is not a list"), "{e}");
        let e = doc.join("#cloud-config\nhostname: x\n").unwrap_err();
        assert!(e.contains("hostname is not a list"), "{e}");
        let e = doc.render("not a comment").unwrap_err();
        assert!(e.contains("must start with '#'"), "{e}");
    }

    #[test]
    fn hostile_keys_stay_inside_their_scalars() {
        let nasty = [
            "ssh-ed25519 AAAA a\nruncmd: [rm, -rf, /]",
            "yes",
            "~",
            "#not a comment",
            "key: value",
            "&anchor *alias !tag",
        ];
        let mut doc = CloudConfig::default();
        let items: Vec<String> = nasty.iter().map(ToString::to_string).collect();
        doc.append("ssh_authorized_keys", &items).unwrap();
        let y = parse(&doc.render("").unwrap());
        assert_eq!(y.as_hash().unwrap().len(), 1, "one key only");
        let back: Vec<&str> = y["ssh_authorized_keys"]
            .as_vec()
            .unwrap()
            .iter()
            .map(|k| k.as_str().unwrap())
            .collect();
        assert_eq!(back, nasty);
    }

    /// What cloud-init's YAML reader (PyYAML's `safe_load`, YAML 1.1) makes
    /// of a document: each top-level key's value as `[type, text]`.
    fn as_cloud_init_reads_it(doc: &str) -> serde_json::Value {
        use std::io::Write as _;
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import json, sys, yaml\nd = yaml.safe_load(sys.stdin)\nprint(json.dumps({k: [type(v).__name__, str(v)] for k, v in d.items()}))",
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 with PyYAML (cloud-init's YAML reader; tests/setup.sh installs it with moto)");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(doc.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "PyYAML could not read {doc}");
        serde_json::from_slice(&out.stdout).unwrap()
    }

    #[test]
    fn quoting_survives_the_merge_as_cloud_init_reads_it() {
        let theirs = "#cloud-config\n\
            quoted_underscore: \"1_000\"\n\
            quoted_date: \"2001-12-14\"\n\
            quoted_on: 'on'\n\
            quoted_octal: \"0777\"\n\
            quoted_sexagesimal: \"1:20\"\n\
            quoted_float: '1.5'\n\
            plain_underscore: 1_000\n\
            plain_date: 2001-12-14\n\
            plain_on: on\n\
            plain_octal: 0777\n\
            plain_hex: 0x1F\n\
            plain_o17: 0o17\n\
            plain_word: htop\n\
            runcmd: [echo first]\n";
        let mut doc = CloudConfig::parse(theirs.as_bytes()).unwrap();
        doc.append(
            "runcmd",
            &["2001-12-14".into(), "on".into(), "1_000".into()],
        )
        .unwrap();
        let merged = doc.render("# merged").unwrap();
        let before = as_cloud_init_reads_it(theirs);
        let after = as_cloud_init_reads_it(&merged);
        // Every key cloud-init reads the same before and after the merge.
        for (key, value) in before.as_object().unwrap() {
            if key != "runcmd" {
                assert_eq!(&after[key], value, "{key} in\n{merged}");
            }
        }
        // The strings stayed strings; the plain scalars kept YAML 1.1's types.
        assert_eq!(
            after["quoted_underscore"],
            serde_json::json!(["str", "1_000"])
        );
        assert_eq!(
            after["quoted_date"],
            serde_json::json!(["str", "2001-12-14"])
        );
        assert_eq!(after["quoted_on"], serde_json::json!(["str", "on"]));
        assert_eq!(
            after["plain_underscore"],
            serde_json::json!(["int", "1000"])
        );
        assert_eq!(
            after["plain_date"],
            serde_json::json!(["date", "2001-12-14"])
        );
        assert_eq!(after["plain_on"], serde_json::json!(["bool", "True"]));
        assert_eq!(after["plain_octal"], serde_json::json!(["int", "511"]));
        assert_eq!(after["plain_o17"], serde_json::json!(["str", "0o17"]));
        // The plugin's entries are strings too.
        assert_eq!(
            after["runcmd"],
            serde_json::json!(["list", "['echo first', '2001-12-14', 'on', '1_000']"])
        );
    }
}
