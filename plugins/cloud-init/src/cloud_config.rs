//! The `#cloud-config` document each node boots with.
//!
//! It is written by hand, and kept simple enough to be obviously right:
//! every string is a YAML double-quoted scalar made of printable ASCII only
//! (everything else is escaped as `\n`, `\t`, `\uXXXX` or `\UXXXXXXXX`), so
//! no value can end a scalar, start a new key, or be read differently by
//! YAML 1.1 (cloud-init's PyYAML) and YAML 1.2 parsers.
//!
//! ```yaml
//! #cloud-config
//! # wasmprov-plugin-cloud-init: owner "o1", request "r1"
//! write_files:
//!   - path: "/etc/wasmprov/node.json"
//!     owner: "root:root"
//!     permissions: "0644"
//!     content: "{\"owner\":\"o1\",…}\n"
//! runcmd:
//!   - ["node-agent", "join", "--token", "…", "--labels", "…", "--node", "r1"]
//! ```
//!
//! When a request brings its own user data (contract 0.2 boot data), it
//! must be a `#cloud-config` document too, and [`merge`] makes one document
//! of both: the caller's keys kept, our `write_files` entries added to
//! theirs, our join command run after their `runcmd`, the request's SSH keys
//! added to `ssh_authorized_keys`. The SDK's `cloud_config` does the
//! joining, the same way for every plugin that adds to user data.

use std::fmt::Write as _;

use serde::Serialize;
use wasmprov_guest::cloud_config::CloudConfig;
use wasmprov_guest::{CapacityType, Labels};

/// Where the node's description is written on the node.
pub const NODE_FILE: &str = "/etc/wasmprov/node.json";

/// What the node is, as written to [`NODE_FILE`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeInfo<'a> {
    /// The host's owner id.
    pub owner: &'a str,
    /// The request id.
    pub request_id: &'a str,
    /// The instance type asked for, when known.
    pub instance_type: Option<&'a str>,
    /// The zone asked for, when known.
    pub zone: Option<&'a str>,
    /// The billing asked for (`on-demand` or `spot`).
    #[serde(serialize_with = "capacity_word")]
    pub capacity_type: CapacityType,
    /// The node's labels, including the owner and request tags.
    pub labels: &'a Labels,
}

fn capacity_word<S: serde::Serializer>(
    c: &CapacityType,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(crate::protocol::capacity_word(*c))
}

/// `s` as a YAML double-quoted scalar of printable ASCII.
#[must_use]
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            ' '..='~' => out.push(c),
            c if u32::from(c) <= 0xFFFF => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\U{:08X}", u32::from(c));
            }
        }
    }
    out.push('"');
    out
}

/// The document for a node whose agent runs `join` (program and arguments).
#[must_use]
pub fn render(node: &NodeInfo<'_>, join: &[String]) -> String {
    // serde_json cannot fail on these types (string keys, no floats).
    let info = serde_json::to_string(node).unwrap_or_default();
    let join: Vec<String> = join.iter().map(|a| quote(a)).collect();
    let mut doc = String::new();
    doc.push_str("#cloud-config\n");
    // Label values are [a-z0-9_.-] only, so this comment stays one line.
    let _ = writeln!(
        doc,
        "# wasmprov-plugin-cloud-init: owner {}, request {}",
        quote(node.owner),
        quote(node.request_id)
    );
    doc.push_str("write_files:\n");
    let _ = writeln!(doc, "  - path: {}", quote(NODE_FILE));
    doc.push_str("    owner: \"root:root\"\n");
    doc.push_str("    permissions: \"0644\"\n");
    let _ = writeln!(doc, "    content: {}", quote(&format!("{info}\n")));
    doc.push_str("runcmd:\n");
    let _ = writeln!(doc, "  - [{}]", join.join(", "));
    doc
}

/// The node's document merged with the caller's `#cloud-config` user data
/// and SSH keys: one `#cloud-config` (see the module docs), joined by the
/// SDK's [`CloudConfig`].
///
/// # Errors
/// What is wrong with the caller's document: not UTF-8, not starting with
/// `#cloud-config`, not one YAML mapping, or a joined key that is not a list.
pub fn merge(
    node: &NodeInfo<'_>,
    join: &[String],
    user_data: Option<&[u8]>,
    ssh_keys: &[String],
) -> Result<String, String> {
    let ours = render(node, join);
    if user_data.is_none() && ssh_keys.is_empty() {
        return Ok(ours);
    }
    let mut doc = CloudConfig::parse_or_empty(user_data)?;
    doc.join(&ours)?;
    doc.append("ssh_authorized_keys", ssh_keys)?;
    doc.render(&format!(
        "# wasmprov-plugin-cloud-init: owner {}, request {}, merged with the request's user data",
        quote(node.owner),
        quote(node.request_id)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use yaml_rust2::{Yaml, YamlLoader};

    fn labels() -> Labels {
        [
            ("role", "worker"),
            ("wasmprov-owner", "o1"),
            ("wasmprov-request", "r1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
    }

    fn parse(doc: &str) -> Yaml {
        let mut docs = YamlLoader::load_from_str(doc).expect("valid YAML");
        assert_eq!(docs.len(), 1);
        docs.remove(0)
    }

    #[test]
    fn the_document_is_exactly_this() {
        let labels = labels();
        let node = NodeInfo {
            owner: "o1",
            request_id: "r1",
            instance_type: Some("m.large"),
            zone: None,
            capacity_type: CapacityType::Spot,
            labels: &labels,
        };
        let join: Vec<String> = ["node-agent", "join", "--token", "s3cret", "--node", "r1"]
            .iter()
            .map(ToString::to_string)
            .collect();
        let doc = render(&node, &join);
        assert_eq!(
            doc,
            r#"#cloud-config
# wasmprov-plugin-cloud-init: owner "o1", request "r1"
write_files:
  - path: "/etc/wasmprov/node.json"
    owner: "root:root"
    permissions: "0644"
    content: "{\"owner\":\"o1\",\"request_id\":\"r1\",\"instance_type\":\"m.large\",\"zone\":null,\"capacity_type\":\"spot\",\"labels\":{\"role\":\"worker\",\"wasmprov-owner\":\"o1\",\"wasmprov-request\":\"r1\"}}\n"
runcmd:
  - ["node-agent", "join", "--token", "s3cret", "--node", "r1"]
"#
        );
        let y = parse(&doc);
        let runcmd = y["runcmd"][0].as_vec().unwrap();
        let argv: Vec<&str> = runcmd.iter().map(|a| a.as_str().unwrap()).collect();
        assert_eq!(argv, join);
        let file = &y["write_files"][0];
        assert_eq!(file["path"].as_str(), Some(NODE_FILE));
        assert_eq!(file["permissions"].as_str(), Some("0644"));
        let info: serde_json::Value =
            serde_json::from_str(file["content"].as_str().unwrap()).unwrap();
        assert_eq!(info["labels"]["role"], "worker");
        assert_eq!(info["capacity_type"], "spot");
    }

    #[test]
    fn hostile_values_stay_inside_their_scalars() {
        let nasty = [
            "plain",
            "",
            "\"quoted\" and \\back\\slashed",
            "new\nline: injected\n- item",
            "tab\there, cr\r, nul\0, bell\u{7}, del\u{7f}",
            "yes",
            "~",
            "0644",
            "#not a comment",
            "key: value",
            "[flow, seq]",
            "{flow: map}",
            "&anchor *alias !tag |block >folded %directive @at `tick",
            "ünïcödé ✓ and 🚀",
            "line\u{2028}sep\u{85}nel\u{2029}para\u{feff}bom",
            "--- \n...\n",
        ];
        for s in nasty {
            let q = quote(s);
            assert!(q.bytes().all(|b| (b' '..=b'~').contains(&b)), "{q}");
            let y = parse(&format!("v: {q}\n"));
            assert_eq!(y["v"].as_str(), Some(s), "{q}");
        }
        let mut labels = labels();
        labels.insert("evil\nkey".into(), "v: \"x\"\n- y".into());
        let node = NodeInfo {
            owner: "o1",
            request_id: "r1",
            instance_type: None,
            zone: Some("zone\n# comment"),
            capacity_type: CapacityType::OnDemand,
            labels: &labels,
        };
        let join: Vec<String> = nasty.iter().map(ToString::to_string).collect();
        let y = parse(&render(&node, &join));
        let argv: Vec<&str> = y["runcmd"][0]
            .as_vec()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(argv, nasty);
        let info: serde_json::Value =
            serde_json::from_str(y["write_files"][0]["content"].as_str().unwrap()).unwrap();
        assert_eq!(info["zone"], "zone\n# comment");
        assert_eq!(info["labels"]["evil\nkey"], "v: \"x\"\n- y");
        assert_eq!(y.as_hash().unwrap().len(), 2, "only write_files and runcmd");
    }

    #[test]
    fn user_data_and_keys_merge_into_one_document() {
        let labels = labels();
        let node = NodeInfo {
            owner: "o1",
            request_id: "r1",
            instance_type: Some("small"),
            zone: None,
            capacity_type: CapacityType::OnDemand,
            labels: &labels,
        };
        let join = vec!["node-agent".to_string(), "join".to_string()];
        let theirs = b"#cloud-config\npackages: [htop]\nruncmd:\n  - echo first\nwrite_files:\n  - path: /etc/motd\n    content: hi\nusers:\n  - name: ops\n    sudo: 'ALL=(ALL) NOPASSWD:ALL'\n";
        let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGw8 ops@example".to_string();
        let doc = merge(&node, &join, Some(theirs), std::slice::from_ref(&key)).unwrap();
        assert!(doc.starts_with("#cloud-config\n"), "{doc}");
        let y = parse(&doc);
        assert_eq!(y["packages"][0].as_str(), Some("htop"));
        assert_eq!(
            y["users"][0]["sudo"].as_str(),
            Some("ALL=(ALL) NOPASSWD:ALL")
        );
        let runcmd = y["runcmd"].as_vec().unwrap();
        assert_eq!(runcmd[0].as_str(), Some("echo first"), "theirs first");
        assert_eq!(runcmd[1][0].as_str(), Some("node-agent"), "then the join");
        let files = y["write_files"].as_vec().unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[1]["path"].as_str(), Some(NODE_FILE));
        assert_eq!(
            files[1]["permissions"].as_str(),
            Some("0644"),
            "still a string"
        );
        assert_eq!(y["ssh_authorized_keys"][0].as_str(), Some(key.as_str()));

        // Nothing given: the plain document, unchanged.
        assert_eq!(
            merge(&node, &join, None, &[]).unwrap(),
            render(&node, &join)
        );
        // Keys alone.
        let keys_only = parse(&merge(&node, &join, None, &[key]).unwrap());
        assert_eq!(keys_only["runcmd"][0][0].as_str(), Some("node-agent"));
        for (bad, why) in [
            (&b"#!/bin/sh\necho hi\n"[..], "#cloud-config"),
            (&b"#cloud-config\n- a\n- b\n"[..], "mapping"),
            (&b"#cloud-config\nruncmd: echo\n"[..], "runcmd"),
            (&b"#cloud-config\nkey: [unclosed\n"[..], "YAML"),
            (&b"\xff\xfe"[..], "UTF-8"),
        ] {
            let e = merge(&node, &join, Some(bad), &[]).unwrap_err();
            assert!(e.contains(why), "{why}: {e}");
        }
    }
}
