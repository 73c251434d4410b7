//! `wasmprov new NAME`: writes a new plugin crate for the reference cloud,
//! from the templates in `templates/new/` (compiled into the binary).
//!
//! The generated crate is a complete plugin on the SDK's `rest` layer, with
//! a fake of its cloud written with the fake kit, its manifest, a README
//! and a conformance test that runs the installed `wasmprov` binary (so the
//! crate never compiles the host). It builds on its own, outside any
//! workspace, and from anywhere it is moved to: its dependencies are by
//! version, and it comes with a lock file (the versions wasmprov itself is
//! tested with). Made with a wasmprov checkout, it also gets a
//! `[patch.crates-io]` section pointing at the checkout's SDK and fake kit;
//! deleting that section leaves a crate that builds with the published
//! crates. Templates use `{{placeholder}}`s, replaced here: `name`,
//! `crate_name` (with `_` for `-`), `type_name` (the provider type),
//! `sdk_version` (of the SDK and fake kit) and `patch` (the section).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};

/// What to generate, and where.
#[derive(Clone, Debug)]
pub struct ScaffoldOptions {
    /// The plugin's name: lowercase letters, digits and `-`, starting with
    /// a letter, at most [`MAX_NAME_LEN`] characters. It names the package,
    /// the manifest (`NAME.toml`) and the component (`NAME.wasm`).
    pub name: String,
    /// The directory of the new crate. Created when missing; an existing
    /// directory must be empty.
    pub dest: PathBuf,
    /// A wasmprov checkout whose `guest-sdk` and `host/fake` the crate
    /// uses instead of the published crates of the same version, through a
    /// `[patch.crates-io]` section (a relative path is taken from the
    /// current directory; the section gets the absolute path). `None`: the
    /// published crates.
    pub checkout: Option<PathBuf>,
    /// The language of the plugin.
    pub lang: Lang,
    /// What a Rust plugin starts as.
    pub template: RustTemplate,
}

/// What a new Rust plugin starts as.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum RustTemplate {
    /// A plugin and fake of the reference cloud, a small generic node API
    /// (the default).
    #[default]
    Refcloud,
    /// A plugin for a REST cloud on the SDK's REST layer (tag presets,
    /// page counts, error pointers, a `const` type table; under 80 lines)
    /// and its fake, to fill in.
    Rest,
}

/// The language a new plugin is written in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// A crate on the guest SDK, with a fake of its cloud (the default).
    #[default]
    Rust,
    /// `app.py`, built with componentize-py.
    Python,
    /// `app.js`, built with ComponentizeJS (`jco componentize`).
    Js,
}

/// The contract and the WASI it uses, copied into a Python or JavaScript
/// plugin (their tools read WIT from a directory). Those plugins are built
/// for contract 0.2.0, kept frozen in `deps/`.
const WIT: &[(&str, &str)] = &[
    (
        "wit/provisioner.wit",
        include_str!("../templates/wit/provisioner.wit"),
    ),
    (
        "wit/deps/provisioner-0.2.0/provisioner.wit",
        include_str!("../templates/wit/deps/provisioner-0.2.0/provisioner.wit"),
    ),
    (
        "wit/deps/cli.wit",
        include_str!("../templates/wit/deps/cli.wit"),
    ),
    (
        "wit/deps/clocks.wit",
        include_str!("../templates/wit/deps/clocks.wit"),
    ),
    (
        "wit/deps/config/store.wit",
        include_str!("../templates/wit/deps/config/store.wit"),
    ),
    (
        "wit/deps/config/world.wit",
        include_str!("../templates/wit/deps/config/world.wit"),
    ),
    (
        "wit/deps/filesystem.wit",
        include_str!("../templates/wit/deps/filesystem.wit"),
    ),
    (
        "wit/deps/http.wit",
        include_str!("../templates/wit/deps/http.wit"),
    ),
    (
        "wit/deps/io.wit",
        include_str!("../templates/wit/deps/io.wit"),
    ),
    (
        "wit/deps/random.wit",
        include_str!("../templates/wit/deps/random.wit"),
    ),
    (
        "wit/deps/sockets.wit",
        include_str!("../templates/wit/deps/sockets.wit"),
    ),
];

/// A Python plugin: the reference-cloud plugin of `plugins/python/refcloud`
/// under the new name, its manifest and declaration, and a test.
const PYTHON: &[(&str, &str)] = &[
    (
        "app.py",
        include_str!("../templates/new-python/refcloud/app.py"),
    ),
    (
        "{{name}}.toml",
        include_str!("../templates/new-python/refcloud/refcloud-py.toml"),
    ),
    (
        "capabilities.toml",
        include_str!("../templates/new-python/refcloud/capabilities.toml"),
    ),
    (
        ".gitignore",
        include_str!("../templates/new-python/refcloud/.gitignore"),
    ),
    (
        "test_plugin.py",
        include_str!("../templates/new-python/refcloud/test_plugin.py"),
    ),
    (
        "README.md",
        include_str!("../templates/new-python/README.md.tmpl"),
    ),
];

/// The Python SDK (`guest-sdk/python/wasmprov_sdk`), copied beside a
/// Python plugin's `app.py` (componentize-py builds it into the component).
const PYTHON_SDK: &[(&str, &str)] = &[
    (
        "wasmprov_sdk/__init__.py",
        include_str!("../templates/python-sdk/__init__.py"),
    ),
    (
        "wasmprov_sdk/_wit.py",
        include_str!("../templates/python-sdk/_wit.py"),
    ),
    (
        "wasmprov_sdk/boot.py",
        include_str!("../templates/python-sdk/boot.py"),
    ),
    (
        "wasmprov_sdk/classify.py",
        include_str!("../templates/python-sdk/classify.py"),
    ),
    (
        "wasmprov_sdk/config.py",
        include_str!("../templates/python-sdk/config.py"),
    ),
    (
        "wasmprov_sdk/errors.py",
        include_str!("../templates/python-sdk/errors.py"),
    ),
    (
        "wasmprov_sdk/http.py",
        include_str!("../templates/python-sdk/http.py"),
    ),
    (
        "wasmprov_sdk/model.py",
        include_str!("../templates/python-sdk/model.py"),
    ),
    (
        "wasmprov_sdk/pages.py",
        include_str!("../templates/python-sdk/pages.py"),
    ),
    (
        "wasmprov_sdk/pointer.py",
        include_str!("../templates/python-sdk/pointer.py"),
    ),
    (
        "wasmprov_sdk/provider.py",
        include_str!("../templates/python-sdk/provider.py"),
    ),
    (
        "wasmprov_sdk/rest.py",
        include_str!("../templates/python-sdk/rest.py"),
    ),
    (
        "wasmprov_sdk/shape.py",
        include_str!("../templates/python-sdk/shape.py"),
    ),
    (
        "wasmprov_sdk/tags.py",
        include_str!("../templates/python-sdk/tags.py"),
    ),
    (
        "wasmprov_sdk/time.py",
        include_str!("../templates/python-sdk/time.py"),
    ),
    (
        "wasmprov_sdk/log.py",
        include_str!("../templates/python-sdk/log.py"),
    ),
    (
        "wasmprov_sdk/random.py",
        include_str!("../templates/python-sdk/random.py"),
    ),
];

/// A JavaScript plugin, from `plugins/js/refcloud` the same way.
const JS: &[(&str, &str)] = &[
    (
        "app.js",
        include_str!("../templates/new-js/refcloud/app.js"),
    ),
    (
        "{{name}}.toml",
        include_str!("../templates/new-js/refcloud/refcloud-js.toml"),
    ),
    (
        "capabilities.toml",
        include_str!("../templates/new-js/refcloud/capabilities.toml"),
    ),
    (
        ".gitignore",
        include_str!("../templates/new-js/refcloud/.gitignore"),
    ),
    (
        "package.json",
        include_str!("../templates/new-js/refcloud/package.json"),
    ),
    (
        "package-lock.json",
        include_str!("../templates/new-js/refcloud/package-lock.json"),
    ),
    (
        "test.mjs",
        include_str!("../templates/new-js/refcloud/test.mjs"),
    ),
    (
        "README.md",
        include_str!("../templates/new-js/README.md.tmpl"),
    ),
];

/// Writes a Python or JavaScript plugin: the reference-cloud plugin renamed
/// (its name, manifest, package), the WIT it builds against, and a test.
fn scaffold_other(opts: &ScaffoldOptions) -> anyhow::Result<Vec<PathBuf>> {
    let (files, sdk, old) = match opts.lang {
        Lang::Python => (PYTHON, PYTHON_SDK, "refcloud-py"),
        Lang::Js => (JS, &[][..], "refcloud-js"),
        Lang::Rust => unreachable!("Rust plugins are crates"),
    };
    let rename = |text: &str| {
        text.replace(old, &opts.name)
            .replace("wasmprov-refcloud-js", &opts.name)
            .replace("--wit ../../../wit", "--wit wit")
            .replace("{{name}}", &opts.name)
    };
    std::fs::create_dir_all(&opts.dest)
        .with_context(|| format!("creating {}", opts.dest.display()))?;
    let mut written = Vec::new();
    for (path, text) in files.iter().chain(WIT).chain(sdk) {
        let path = opts.dest.join(rename(path));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        let text = if path.starts_with(opts.dest.join("wit"))
            || path.starts_with(opts.dest.join("wasmprov_sdk"))
        {
            (*text).to_string()
        } else {
            rename(text)
        };
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// The version of the SDK and fake kit crates the generated crate asks for.
pub const SDK_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The lock file wasmprov is built and tested with: the generated crate
/// starts from these versions (cargo drops what it does not use).
const LOCK: &str = include_str!("../templates/new/Cargo.lock.tmpl");

/// Longest plugin name accepted.
pub const MAX_NAME_LEN: usize = 40;

/// Names that cannot be a crate's: Rust keywords, the standard crates, the
/// generated crate's own dependencies, and names Windows reserves for devices.
const RESERVED_NAMES: &[&str] = &[
    "abstract",
    "as",
    "async",
    "await",
    "become",
    "box",
    "break",
    "const",
    "continue",
    "crate",
    "do",
    "dyn",
    "else",
    "enum",
    "extern",
    "false",
    "final",
    "fn",
    "for",
    "gen",
    "if",
    "impl",
    "in",
    "let",
    "loop",
    "macro",
    "match",
    "mod",
    "move",
    "mut",
    "override",
    "priv",
    "pub",
    "ref",
    "return",
    "self",
    "static",
    "struct",
    "super",
    "trait",
    "true",
    "try",
    "type",
    "typeof",
    "unsafe",
    "unsized",
    "use",
    "virtual",
    "where",
    "while",
    "yield",
    "alloc",
    "core",
    "std",
    "test",
    "serde",
    "tokio",
    "wasmprov-guest",
    "wasmprov-fake",
    "axum",
    "anyhow",
    "aux",
    "con",
    "nul",
    "prn",
];

/// One generated file: its path in the crate (placeholders allowed) and
/// its template.
struct Template {
    path: &'static str,
    text: &'static str,
}

const TEMPLATES: &[Template] = &[
    Template {
        path: "Cargo.toml",
        text: include_str!("../templates/new/Cargo.toml.tmpl"),
    },
    Template {
        path: "src/lib.rs",
        text: include_str!("../templates/new/lib.rs.tmpl"),
    },
    Template {
        path: "{{name}}.toml",
        text: include_str!("../templates/new/manifest.toml.tmpl"),
    },
    Template {
        path: "capabilities.toml",
        text: include_str!("../templates/new/capabilities.toml.tmpl"),
    },
    Template {
        path: "README.md",
        text: include_str!("../templates/new/README.md.tmpl"),
    },
    Template {
        path: ".gitignore",
        text: include_str!("../templates/new/gitignore.tmpl"),
    },
    Template {
        path: ".cargo/config.toml",
        text: include_str!("../templates/new/cargo-config.toml.tmpl"),
    },
    Template {
        path: "tests/conformance.rs",
        text: include_str!("../templates/new/conformance.rs.tmpl"),
    },
    Template {
        path: "fake/main.rs",
        text: include_str!("../templates/new/fake.rs.tmpl"),
    },
    Template {
        path: "Cargo.lock",
        text: LOCK,
    },
];

/// The files of `--template rest` that differ from the reference cloud's:
/// (path, template).
const REST: &[(&str, &str)] = &[
    (
        "src/lib.rs",
        include_str!("../templates/new-rest/lib.rs.tmpl"),
    ),
    (
        "fake/main.rs",
        include_str!("../templates/new-rest/fake.rs.tmpl"),
    ),
    (
        "{{name}}.toml",
        include_str!("../templates/new-rest/manifest.toml.tmpl"),
    ),
    (
        "capabilities.toml",
        include_str!("../templates/new-rest/capabilities.toml.tmpl"),
    ),
    (
        "README.md",
        include_str!("../templates/new-rest/README.md.tmpl"),
    ),
];

/// Writes the new plugin crate described by `opts` and returns the paths of
/// the files written, in the order written.
///
/// # Errors
/// An invalid name (saying what is accepted), a `dest` that exists and is
/// not an empty directory, a checkout without the SDK and fake kit crates,
/// a path that is not UTF-8, or an I/O error naming the file.
pub fn scaffold(opts: &ScaffoldOptions) -> anyhow::Result<Vec<PathBuf>> {
    validate_name(&opts.name)?;
    if opts.lang != Lang::Rust && opts.template == RustTemplate::Rest {
        bail!(
            "--template rest is a Rust template; a {} plugin starts as the reference cloud's: drop --template, or use --lang rust",
            format!("{:?}", opts.lang).to_lowercase()
        );
    }
    check_dest(&opts.dest)?;
    if opts.lang != Lang::Rust {
        return scaffold_other(opts);
    }
    let patch = match &opts.checkout {
        None => String::new(),
        Some(checkout) => {
            let root = absolute(checkout, "the wasmprov checkout")?;
            let (guest, fake) = (root.join("guest-sdk"), root.join("host").join("fake"));
            for crate_dir in [&guest, &fake] {
                if !crate_dir.join("Cargo.toml").is_file() {
                    bail!(
                        "no wasmprov checkout at {}: expected {} (with its Cargo.toml)",
                        root.display(),
                        crate_dir.display()
                    );
                }
            }
            format!(
                "\n# The SDK and fake kit of the wasmprov checkout at {root}, instead of\n\
                 # the published crates of the same version. Delete this section to build\n\
                 # with the published crates (on another machine, in CI).\n\
                 [patch.crates-io]\n\
                 wasmprov-guest = {{ path = \"{guest}\" }}\n\
                 wasmprov-fake = {{ path = \"{fake}\" }}\n",
                root = toml_escape(&utf8(&root)?),
                guest = toml_escape(&utf8(&guest)?),
                fake = toml_escape(&utf8(&fake)?),
            )
        }
    };

    let vars = [
        (
            "{{fake_deps}}",
            match opts.template {
                RustTemplate::Refcloud => String::new(),
                RustTemplate::Rest => REST_FAKE_DEPS.to_string(),
            },
        ),
        ("{{name}}", opts.name.clone()),
        ("{{crate_name}}", opts.name.replace('-', "_")),
        ("{{type_name}}", type_name(&opts.name)),
        ("{{sdk_version}}", SDK_VERSION.to_string()),
        ("{{patch}}", patch),
    ];
    let render = |text: &str| {
        vars.iter().fold(text.to_string(), |text, (key, value)| {
            text.replace(key, value)
        })
    };

    std::fs::create_dir_all(&opts.dest)
        .with_context(|| format!("creating {}", opts.dest.display()))?;
    let mut written = Vec::with_capacity(TEMPLATES.len());
    for template in TEMPLATES {
        let text = match opts.template {
            RustTemplate::Refcloud => template.text,
            RustTemplate::Rest => REST
                .iter()
                .find(|(path, _)| *path == template.path)
                .map_or(template.text, |(_, text)| text),
        };
        let path = opts.dest.join(render(template.path));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        // The lock file is written as it is: it may hold `{{`.
        let text = if template.path == "Cargo.lock" {
            LOCK.to_string()
        } else {
            render(text)
        };
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// What the rest template's fake depends on besides the reference
/// cloud's (`{{fake_deps}}` of `Cargo.toml`).
const REST_FAKE_DEPS: &str = "base64 = \"0.22\"\n";

/// The crates a scaffolded plugin depends on, as a plugin name would spell
/// them (`serde_json` is `serde-json`: Cargo takes both for one crate):
/// read from the templates' `Cargo.toml`, so a dependency added there is
/// refused as a name without another list to keep.
fn dependency_names() -> Vec<String> {
    let manifest =
        include_str!("../templates/new/Cargo.toml.tmpl").replace("{{fake_deps}}", REST_FAKE_DEPS);
    let mut in_deps = false;
    let mut names = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line.ends_with("dependencies]");
        } else if in_deps
            && !line.starts_with('#')
            && let Some((name, _)) = line.split_once('=')
        {
            names.push(name.trim().replace('_', "-"));
        }
    }
    names
}

/// Checks a plugin name: lowercase letters, digits and `-`, starting with a
/// letter, at most [`MAX_NAME_LEN`] characters, not reserved.
fn validate_name(name: &str) -> anyhow::Result<()> {
    let why = if name.is_empty() {
        Some("it is empty".to_string())
    } else if name.len() > MAX_NAME_LEN {
        Some(format!(
            "it is {} characters long; at most {MAX_NAME_LEN} are accepted",
            name.len()
        ))
    } else if !name.starts_with(|c: char| c.is_ascii_lowercase()) {
        Some("it must start with a lowercase letter".to_string())
    } else if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        Some(format!(
            "{c:?} is not accepted; use lowercase letters, digits and `-`"
        ))
    } else if name.ends_with('-') || name.contains("--") {
        Some("`-` must separate words: not at the end, not doubled".to_string())
    } else if name == "wasmprov" {
        Some(
            "it is reserved (the manifest `wasmprov.toml` would be the plugin directory's trust file)"
                .to_string(),
        )
    } else if dependency_names().iter().any(|d| d == name) {
        Some(format!(
            "it is reserved: the plugin depends on the crate {name} (a package cannot depend on its own name)"
        ))
    } else if RESERVED_NAMES.contains(&name) {
        Some("it is reserved (a Rust keyword or a crate the plugin depends on)".to_string())
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(why) => bail!(
            "{name:?} is not a valid plugin name: {why}; use lowercase letters, digits and `-`, starting with a letter, such as \"acme-cloud\""
        ),
    }
}

/// Refuses a `dest` that exists and is anything but an empty directory.
fn check_dest(dest: &Path) -> anyhow::Result<()> {
    match std::fs::symlink_metadata(dest) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("looking at {}", dest.display())),
        Ok(meta) if meta.is_dir() => {
            let mut entries = std::fs::read_dir(dest)
                .with_context(|| format!("reading directory {}", dest.display()))?;
            if entries.next().is_some() {
                bail!(
                    "refusing to write into {}: it exists and is not empty; choose a new directory",
                    dest.display()
                );
            }
            Ok(())
        }
        Ok(_) => bail!(
            "refusing to write into {}: it exists and is not a directory",
            dest.display()
        ),
    }
}

/// `path` made absolute against the current directory (without touching
/// the file system), so the generated crate does not depend on where
/// `wasmprov new` ran.
fn absolute(path: &Path, what: &str) -> anyhow::Result<PathBuf> {
    std::path::absolute(path).with_context(|| format!("making {what} {} absolute", path.display()))
}

fn utf8(path: &Path) -> anyhow::Result<String> {
    path.to_str().map(str::to_string).with_context(|| {
        format!(
            "{} is not valid UTF-8, which Cargo.toml cannot hold",
            path.display()
        )
    })
}

/// `s` escaped for the inside of a TOML basic string (`"..."`).
fn toml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// The provider's type name: the name in CamelCase plus `Provider`
/// (`acme-cloud` → `AcmeCloudProvider`), which cannot clash with the SDK's
/// names the template imports.
fn type_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 8);
    for word in name.split('-') {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    out.push_str("Provider");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An options value writing into `dir/name`, with a stand-in checkout.
    fn options(dir: &Path, name: &str) -> ScaffoldOptions {
        let checkout = dir.join("checkout \"quoted\"");
        for krate in ["guest-sdk", "host/fake"] {
            std::fs::create_dir_all(checkout.join(krate)).unwrap();
            std::fs::write(checkout.join(krate).join("Cargo.toml"), "[package]\n").unwrap();
        }
        ScaffoldOptions {
            name: name.to_string(),
            dest: dir.join(name),
            checkout: Some(checkout),
            lang: Lang::Rust,
            template: RustTemplate::Refcloud,
        }
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn the_rest_template_writes_a_rest_plugin_and_its_fake() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = ScaffoldOptions {
            template: RustTemplate::Rest,
            ..options(tmp.path(), "acme-cloud")
        };
        let written = scaffold(&opts).unwrap();
        assert_eq!(written.len(), TEMPLATES.len());
        for path in written.iter().filter(|p| !p.ends_with("Cargo.lock")) {
            assert!(
                !read(path).contains("{{"),
                "{} has a placeholder left",
                path.display()
            );
        }
        let lib = read(&opts.dest.join("src/lib.rs"));
        assert!(
            lib.contains("impl RestCloud for AcmeCloudProvider"),
            "{lib}"
        );
        assert!(lib.contains("tags::Preset::LINODE") && lib.contains("Paging::pages("));
        let fake = read(&opts.dest.join("fake/main.rs"));
        assert!(fake.contains("use acme_cloud::{INSTANCE, TYPES};"));
        let cargo: toml::Table = toml::from_str(&read(&opts.dest.join("Cargo.toml"))).unwrap();
        let native = &cargo["target"]["cfg(not(target_family = \"wasm\"))"]["dependencies"];
        assert_eq!(native["base64"].as_str(), Some("0.22"));
        assert!(read(&opts.dest.join("acme-cloud.toml")).contains("CLOUD_TOKEN"));
        // The reference cloud's crate has no base64.
        let plain = options(&tmp.path().join("plain"), "acme-cloud");
        scaffold(&plain).unwrap();
        assert!(!read(&plain.dest.join("Cargo.toml")).contains("base64"));
    }

    #[test]
    fn writes_a_complete_crate() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = options(tmp.path(), "acme-cloud");
        let written = scaffold(&opts).unwrap();
        let dest = &opts.dest;
        let rel: Vec<String> = written
            .iter()
            .map(|p| {
                p.strip_prefix(dest)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/")
            })
            .collect();
        assert_eq!(
            rel,
            [
                "Cargo.toml",
                "src/lib.rs",
                "acme-cloud.toml",
                "capabilities.toml",
                "README.md",
                ".gitignore",
                ".cargo/config.toml",
                "tests/conformance.rs",
                "fake/main.rs",
                "Cargo.lock",
            ]
        );
        for path in written.iter().filter(|p| !p.ends_with("Cargo.lock")) {
            let text = read(path);
            assert!(
                !text.contains("{{"),
                "{} has a placeholder left",
                path.display()
            );
            assert!(!text.is_empty());
        }
        assert_eq!(read(&dest.join("Cargo.lock")), LOCK);

        // Cargo.toml: versions, the checkout's crates patched in, the fake
        // native only, no debug info, its own workspace.
        let text = read(&dest.join("Cargo.toml"));
        let cargo: toml::Table = toml::from_str(&text).unwrap();
        assert_eq!(cargo["package"]["name"].as_str(), Some("acme-cloud"));
        assert_eq!(
            cargo["lib"]["crate-type"],
            toml::Value::from(vec!["cdylib", "rlib"])
        );
        let checkout = std::path::absolute(opts.checkout.as_ref().unwrap()).unwrap();
        assert_eq!(
            cargo["dependencies"]["wasmprov-guest"].as_str(),
            Some(SDK_VERSION)
        );
        let native = &cargo["target"]["cfg(not(target_family = \"wasm\"))"]["dependencies"];
        assert_eq!(native["wasmprov-fake"].as_str(), Some(SDK_VERSION));
        let patch = cargo["patch"]["crates-io"].as_table().unwrap();
        assert_eq!(
            patch["wasmprov-guest"]["path"].as_str(),
            Some(checkout.join("guest-sdk").to_str().unwrap())
        );
        assert_eq!(
            patch["wasmprov-fake"]["path"].as_str(),
            Some(checkout.join("host/fake").to_str().unwrap())
        );
        assert_eq!(patch.len(), 2);
        // A path appears only in the section, so deleting it leaves versions.
        let (before, section) = text.split_once("[patch.crates-io]").unwrap();
        let before: String = before.lines().filter(|l| !l.starts_with('#')).collect();
        assert!(!before.contains("checkout"), "{before}");
        assert!(!section.contains('['), "the section is the last: {section}");
        assert_eq!(cargo["bin"][0]["name"].as_str(), Some("acme-cloud-fake"));
        assert_eq!(cargo["profile"]["dev"]["debug"].as_bool(), Some(false));
        assert!(cargo["workspace"].as_table().unwrap().is_empty());
        assert!(!read(&dest.join("Cargo.toml")).contains("testkit"));
        assert_eq!(cargo["profile"]["release"]["opt-level"].as_str(), Some("s"));

        // Without a checkout: the published crates, by version.
        let published = ScaffoldOptions {
            dest: tmp.path().join("published"),
            checkout: None,
            ..opts.clone()
        };
        scaffold(&published).unwrap();
        let cargo: toml::Table = toml::from_str(&read(&published.dest.join("Cargo.toml"))).unwrap();
        assert_eq!(
            cargo["dependencies"]["wasmprov-guest"].as_str(),
            Some(SDK_VERSION)
        );
        assert!(!cargo.contains_key("patch"));
        let text = read(&published.dest.join("Cargo.toml"));
        assert!(!text.contains("guest-sdk") && !text.contains("host/fake"));

        // The manifest is one the host accepts, with minimal grants.
        let manifest = wasmprov_policy::Manifest::parse(
            "acme-cloud.toml",
            &read(&dest.join("acme-cloud.toml")),
        )
        .unwrap();
        assert_eq!(manifest.name, "acme-cloud");
        assert_eq!(manifest.component, "acme-cloud.wasm");
        assert!(manifest.config.is_empty());
        assert_eq!(
            manifest.secret_sources["token"],
            wasmprov_policy::SecretSource::Env("REFCLOUD_TOKEN".into())
        );
        assert!(manifest.exec.grants().is_empty());
        assert_eq!(manifest.http.grants().len(), 1);
        let to = |scheme: &str, authority: &str| {
            wasmprov_policy::Destination::from_parts(scheme, authority).unwrap()
        };
        assert!(
            manifest
                .http
                .check(&to("https", "api.refcloud.example"))
                .is_ok()
        );
        assert!(
            manifest
                .http
                .check(&to("http", "api.refcloud.example"))
                .is_err()
        );

        let lib = read(&dest.join("src/lib.rs"));
        assert!(lib.contains("pub struct AcmeCloudProvider {"));
        assert!(lib.contains("const NAME: &'static str = \"acme-cloud\";"));
        assert!(lib.contains("impl RestCloud for AcmeCloudProvider {"));
        assert!(lib.contains(
            "export_provider!(AcmeCloudProvider, capabilities = \"capabilities.toml\");"
        ));
        // What it declares is exactly what its manifest grants.
        let requests =
            wasmprov_policy::requests::Requests::parse(&read(&dest.join("capabilities.toml")))
                .unwrap();
        assert!(
            requests.compare(&manifest).iter().all(|c| c.standing
                != wasmprov_policy::requests::Standing::NotGranted
                && c.standing != wasmprov_policy::requests::Standing::WiderThanRequested),
            "{:?}",
            requests.compare(&manifest)
        );

        let conformance = read(&dest.join("tests/conformance.rs"));
        assert!(conformance.contains(r#"env!("CARGO_BIN_EXE_acme-cloud-fake")"#));
        assert!(conformance.contains("wasm32-wasip2/debug/acme_cloud.wasm"));
        assert!(conformance.contains(r#"suite(&["--faults", "default"]);"#));
        let fake = read(&dest.join("fake/main.rs"));
        assert!(fake.contains(r#"Fake::new("acme-cloud fake")"#));

        let readme = read(&dest.join("README.md"));
        assert!(readme.contains("target/wasm32-wasip2/release/acme_cloud.wasm"));
        assert_eq!(read(&dest.join(".gitignore")), "target/\n");
    }

    #[test]
    fn template_catalogue_matches_the_fake() {
        let lib = TEMPLATES
            .iter()
            .find(|t| t.path == "src/lib.rs")
            .unwrap()
            .text;
        for t in &wasmprov_fake::refcloud::NODE_TYPES {
            let spot = t
                .spot_hourly_usd
                .map_or_else(|| "None".to_string(), |p| format!("Some({p:.3})"));
            let row = format!(
                "({:?}, {:.1}, {}, {}, {:.3}, {spot},",
                t.name,
                f64::from(t.vcpu),
                t.memory_gib,
                t.gpu,
                t.hourly_usd
            );
            assert!(lib.contains(&row), "{row} missing");
        }
        assert!(lib.contains(r#"pub const ZONES: [&str; 2] = ["zone-a", "zone-b"];"#));
    }

    #[test]
    fn refuses_a_non_empty_destination() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = options(tmp.path(), "acme");
        std::fs::create_dir_all(&opts.dest).unwrap();
        std::fs::write(opts.dest.join("keep.txt"), "mine").unwrap();
        let err = scaffold(&opts).unwrap_err().to_string();
        assert!(err.contains("not empty"), "{err}");
        assert_eq!(read(&opts.dest.join("keep.txt")), "mine");
        assert_eq!(std::fs::read_dir(&opts.dest).unwrap().count(), 1);

        // A file in the way is refused too; an empty directory is fine.
        let file = ScaffoldOptions {
            dest: opts.dest.join("keep.txt"),
            ..opts.clone()
        };
        assert!(
            scaffold(&file)
                .unwrap_err()
                .to_string()
                .contains("not a directory")
        );
        let empty = ScaffoldOptions {
            dest: tmp.path().join("empty"),
            ..opts.clone()
        };
        std::fs::create_dir(&empty.dest).unwrap();
        assert_eq!(scaffold(&empty).unwrap().len(), TEMPLATES.len());
    }

    #[test]
    fn refuses_a_checkout_without_the_crates() {
        let tmp = tempfile::tempdir().unwrap();
        let opts = ScaffoldOptions {
            checkout: Some(tmp.path().join("nowhere")),
            ..options(tmp.path(), "acme")
        };
        let err = scaffold(&opts).unwrap_err().to_string();
        assert!(err.contains("no wasmprov checkout"), "{err}");
        assert!(!opts.dest.exists());
    }

    #[test]
    fn names() {
        for ok in [
            "a",
            "acme",
            "acme-cloud",
            "x9",
            "cloud-2-go",
            &"a".repeat(40),
        ] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("", "empty"),
            (&"a".repeat(41) as &str, "at most 40"),
            ("9cloud", "start with a lowercase letter"),
            ("-cloud", "start with a lowercase letter"),
            ("Acme", "start with a lowercase letter"),
            ("acme_cloud", "'_' is not accepted"),
            ("acme.cloud", "'.' is not accepted"),
            ("acme cloud", "' ' is not accepted"),
            ("acmé", "'é' is not accepted"),
            ("acme-", "not at the end"),
            ("acme--cloud", "not doubled"),
            ("fn", "reserved"),
            ("std", "reserved"),
            ("wasmprov-guest", "reserved"),
            ("axum", "reserved"),
            ("wasmprov", "trust file"),
            ("serde-json", "depends on the crate serde-json"),
            ("base64", "depends on the crate base64"),
            ("wasmprov-fake", "reserved"),
        ] {
            let err = validate_name(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad:?}: {err}");
            assert!(err.contains("such as \"acme-cloud\""), "{err}");
        }
        // Every dependency of either template is refused, read from the
        // templates themselves.
        let deps = dependency_names();
        for dep in [
            "wasmprov-guest",
            "serde",
            "serde-json",
            "wasmprov-fake",
            "axum",
            "tokio",
            "anyhow",
            "base64",
        ] {
            assert!(deps.iter().any(|d| d == dep), "{dep} not in {deps:?}");
        }
        assert_eq!(type_name("acme-cloud"), "AcmeCloudProvider");
        assert_eq!(type_name("x9-2"), "X92Provider");
        assert_eq!(toml_escape(r#"C:\a "b""#), r#"C:\\a \"b\""#);
    }

    #[test]
    fn the_rest_template_is_for_rust_only() {
        for lang in [Lang::Python, Lang::Js] {
            let dir = tempfile::tempdir().unwrap();
            let dest = dir.path().join("acme");
            let err = scaffold(&ScaffoldOptions {
                name: "acme".into(),
                dest: dest.clone(),
                checkout: None,
                lang,
                template: RustTemplate::Rest,
            })
            .unwrap_err()
            .to_string();
            assert!(err.contains("--template rest is a Rust template"), "{err}");
            assert!(!dest.exists(), "nothing written");
        }
    }

    #[test]
    fn every_python_sdk_module_is_carried() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("templates/python-sdk");
        for entry in std::fs::read_dir(&dir).unwrap() {
            let name = entry.unwrap().file_name().to_string_lossy().to_string();
            if name.ends_with(".py") {
                let path = format!("wasmprov_sdk/{name}");
                assert!(
                    PYTHON_SDK.iter().any(|(p, _)| *p == path),
                    "{path} is not carried"
                );
            }
        }
    }

    #[test]
    fn python_and_js_plugins_are_the_reference_plugins_renamed() {
        for (lang, main) in [(Lang::Python, "app.py"), (Lang::Js, "app.js")] {
            let dir = tempfile::tempdir().unwrap();
            let dest = dir.path().join("acme");
            let written = scaffold(&ScaffoldOptions {
                name: "acme".into(),
                dest: dest.clone(),
                checkout: None,
                lang,
                template: RustTemplate::Refcloud,
            })
            .unwrap();
            assert!(written.iter().any(|p| p.ends_with("wit/provisioner.wit")));
            // A Python plugin carries the SDK it imports, unchanged.
            assert_eq!(
                dest.join("wasmprov_sdk/rest.py").is_file(),
                lang == Lang::Python
            );
            let app = std::fs::read_to_string(dest.join(main)).unwrap();
            assert!(app.contains("\"acme\""), "{main} keeps the plugin's name");
            assert!(!app.contains("refcloud-py") && !app.contains("refcloud-js"));
            let manifest = wasmprov_policy::Manifest::parse(
                "acme.toml",
                &std::fs::read_to_string(dest.join("acme.toml")).unwrap(),
            )
            .unwrap();
            assert_eq!(manifest.component, "acme.wasm");
            let requests = wasmprov_policy::requests::Requests::parse(
                &std::fs::read_to_string(dest.join("capabilities.toml")).unwrap(),
            )
            .unwrap();
            assert!(requests.compare(&manifest).iter().all(|c| matches!(
                c.standing,
                wasmprov_policy::requests::Standing::Granted
                    | wasmprov_policy::requests::Standing::Unset
            )));
        }
        let dir = tempfile::tempdir().unwrap();
        scaffold(&ScaffoldOptions {
            name: "acme".into(),
            dest: dir.path().join("acme"),
            checkout: None,
            lang: Lang::Js,
            template: RustTemplate::Refcloud,
        })
        .unwrap();
        let package = std::fs::read_to_string(dir.path().join("acme/package.json")).unwrap();
        assert!(
            package.contains("--wit wit ") && package.contains("-o acme.wasm"),
            "{package}"
        );
    }
}
