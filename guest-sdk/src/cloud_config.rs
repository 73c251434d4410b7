//! A caller's `#cloud-config` user data with the plugin's own entries
//! joined in (feature `cloud-config`).
//!
//! Contract 0.2 lets a request bring its own user data; a plugin that must
//! add to it — a join command, the request's SSH keys — makes one document
//! of both rather than dropping either. [`CloudConfig`] parses the caller's
//! document, keeps every key of it, appends the plugin's entries to the
//! lists cloud-init runs or installs (`write_files`, `runcmd`,
//! `ssh_authorized_keys`, …: theirs first, then the plugin's) and writes
//! one `#cloud-config` again. Parsing and writing are `yaml-rust2`'s; its
//! emitter quotes every string a YAML 1.1 reader (cloud-init's PyYAML)
//! would read as something else.
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

use yaml_rust2::yaml::Hash;
use yaml_rust2::{Yaml, YamlEmitter, YamlLoader};

/// The first line of every document this module reads or writes.
pub const HEADER: &str = "#cloud-config";

/// A `#cloud-config` mapping being added to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CloudConfig {
    doc: Hash,
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
        let mut docs = YamlLoader::load_from_str(text)
            .map_err(|e| format!("the user data is not valid YAML: {e}"))?;
        let doc = match docs.len() {
            0 => Hash::new(),
            1 => match docs.remove(0) {
                Yaml::Hash(h) => h,
                Yaml::Null => Hash::new(),
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
        self.append_yaml(key, items.iter().cloned().map(Yaml::String).collect())
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
            let name = key.as_str().unwrap_or("?").to_string();
            let Yaml::Array(items) = value else {
                return Err(format!(
                    "the plugin's own document: {name} is not a list, so it cannot be joined"
                ));
            };
            self.append_yaml(&name, items)?;
        }
        Ok(())
    }

    fn append_yaml(&mut self, key: &str, items: Vec<Yaml>) -> Result<(), String> {
        if items.is_empty() {
            return Ok(());
        }
        let k = Yaml::String(key.into());
        match self.doc.get_mut(&k) {
            Some(Yaml::Array(list)) => list.extend(items),
            None | Some(Yaml::Null) => {
                self.doc.insert(k, Yaml::Array(items));
            }
            Some(_) => return Err(format!("the user data's {key} is not a list")),
        }
        Ok(())
    }

    /// The keys of the document, in order.
    #[must_use]
    pub fn keys(&self) -> Vec<String> {
        self.doc
            .keys()
            .map(|k| k.as_str().map_or_else(|| format!("{k:?}"), str::to_string))
            .collect()
    }

    /// The document as user data: `#cloud-config`, then `comment` (lines
    /// that must each start with `#`; empty for none), then the mapping.
    ///
    /// # Errors
    /// A comment line not starting with `#`, or the emitter's error.
    pub fn render(&self, comment: &str) -> Result<String, String> {
        if let Some(bad) = comment.lines().find(|l| !l.starts_with('#')) {
            return Err(format!("a comment line must start with '#': {bad:?}"));
        }
        let mut body = String::new();
        YamlEmitter::new(&mut body)
            .dump(&Yaml::Hash(self.doc.clone()))
            .map_err(|e| format!("writing the merged document: {e}"))?;
        let body = body
            .strip_prefix("---")
            .unwrap_or(&body)
            .trim_start_matches('\n');
        let mut doc = format!("{HEADER}\n");
        for line in comment.lines() {
            doc.push_str(line);
            doc.push('\n');
        }
        if !self.doc.is_empty() {
            doc.push_str(body);
            doc.push('\n');
        }
        Ok(doc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
