//! The public API of every published library crate, against the record in
//! `docs/PUBLIC-API.txt`: what an embedder or a plugin author may name.
//!
//! Every crate root is read with `syn`. A line is written for each public
//! item a user can reach (through `pub mod` chains and `pub use`
//! re-exports): functions and methods with their signatures; structs with
//! their public fields (and, when a literal can build one, the list of its
//! fields: adding one breaks such literals); enums with their variants;
//! traits with their methods (and the list of the required ones: adding
//! one breaks implementors); trait impls; constants, statics, type aliases
//! and exported macros. Items marked `#[doc(hidden)]` are not the API.
//!
//! The rules, from `docs/CHANGES.md`'s head: a public item is removed or
//! changed only after one release deprecated (`#[deprecated(note = "use
//! …")]`); every change is listed there. So the test fails when
//!
//! - the surface differs from the record (rerun with
//!   `WASMPROV_BLESS_API=1` to rewrite it once the change is listed);
//! - a line the record had goes away (an item removed, or changed in a way
//!   that breaks its users) while it was not deprecated, and the item's
//!   name is not in `docs/CHANGES.md`;
//! - an item is newly deprecated and its name is not in `docs/CHANGES.md`.
//!
//! Blessing checks the last two rules before it writes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use quote::ToTokens;

/// The published library crates: (name, root file).
const CRATES: &[(&str, &str)] = &[
    ("wasmprov_api", "host/api/src/lib.rs"),
    ("wasmprov_host", "host/runtime/src/lib.rs"),
    ("wasmprov_policy", "host/policy/src/lib.rs"),
    ("wasmprov_fleet", "host/fleet/src/lib.rs"),
    ("wasmprov_testkit", "host/testkit/src/lib.rs"),
    ("wasmprov_fake", "host/fake/src/lib.rs"),
    ("wasmprov_compat_zlayer", "host/compat-zlayer/src/lib.rs"),
    ("wasmprov_guest_build", "host/guest-build/src/lib.rs"),
    ("wasmprov_autoscaler", "host/autoscaler/src/lib.rs"),
    ("wasmprov_guest", "guest-sdk/src/lib.rs"),
];

const RECORD: &str = "docs/PUBLIC-API.txt";
const DEPRECATED: &str = " #[deprecated]";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Tokens as one line of text, with the spaces `quote` puts everywhere
/// taken out where Rust never needs them.
fn text(tokens: &impl ToTokens) -> String {
    let raw = tokens.to_token_stream().to_string();
    let mut out = raw.split_whitespace().collect::<Vec<_>>().join(" ");
    for (from, to) in [
        (" :: ", "::"),
        (":: ", "::"),
        (" < ", "<"),
        (" <", "<"),
        ("< ", "<"),
        (" >", ">"),
        (" ,", ","),
        ("& ", "&"),
        ("( ", "("),
        (" )", ")"),
        ("[ ", "["),
        (" ]", "]"),
        ("' ", "'"),
        (" :", ":"),
    ] {
        out = out.replace(from, to);
    }
    out.replace("->", " -> ").replace("  ", " ")
}

fn is_pub(vis: &syn::Visibility) -> bool {
    matches!(vis, syn::Visibility::Public(_))
}

fn hidden(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("doc")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().trim() == "hidden")
    })
}

fn deprecated(attrs: &[syn::Attribute]) -> &'static str {
    if attrs.iter().any(|a| a.path().is_ident("deprecated")) {
        DEPRECATED
    } else {
        ""
    }
}

fn has_attr(attrs: &[syn::Attribute], name: &str) -> bool {
    attrs.iter().any(|a| a.path().is_ident(name))
}

/// `cfg(test)` items are no one's API.
fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta
                .require_list()
                .is_ok_and(|l| l.tokens.to_string().trim() == "test")
    })
}

fn derives(attrs: &[syn::Attribute]) -> Vec<String> {
    let mut out = Vec::new();
    for a in attrs.iter().filter(|a| a.path().is_ident("derive")) {
        if let Ok(list) = a.meta.require_list() {
            for name in list.tokens.to_string().split(',') {
                let name = name.trim().rsplit("::").next().unwrap_or("").trim();
                if !name.is_empty() {
                    out.push(name.to_string());
                }
            }
        }
    }
    out
}

/// A module's parsed file and where its submodules' files are.
struct Module {
    items: Vec<syn::Item>,
    dir: PathBuf,
}

fn load(file: &Path, is_root_or_mod_rs: bool) -> Module {
    let source =
        std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let parsed = syn::parse_file(&source).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let dir = if is_root_or_mod_rs {
        file.parent().unwrap().to_path_buf()
    } else {
        file.with_extension("")
    };
    Module {
        items: parsed.items,
        dir,
    }
}

fn submodule(parent: &Module, m: &syn::ItemMod) -> Option<Module> {
    if let Some((_, items)) = &m.content {
        return Some(Module {
            items: items.clone(),
            dir: parent.dir.join(m.ident.to_string()),
        });
    }
    let name = m.ident.to_string();
    let path_attr = m.attrs.iter().find_map(|a| {
        if !a.path().is_ident("path") {
            return None;
        }
        let syn::Meta::NameValue(nv) = &a.meta else {
            return None;
        };
        let syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(s),
            ..
        }) = &nv.value
        else {
            return None;
        };
        Some(s.value())
    });
    if let Some(p) = path_attr {
        return Some(load(&parent.dir.join(p), true));
    }
    let flat = parent.dir.join(format!("{name}.rs"));
    if flat.exists() {
        return Some(load(&flat, false));
    }
    let nested = parent.dir.join(&name).join("mod.rs");
    nested.exists().then(|| load(&nested, true))
}

/// Every module of a crate by its path (`crate`, `crate::a::b`), public or not.
fn modules(root: &Path) -> BTreeMap<String, (Module, bool)> {
    let mut out = BTreeMap::new();
    let mut todo = vec![("crate".to_string(), load(root, true), true)];
    while let Some((path, module, public)) = todo.pop() {
        for item in &module.items {
            if let syn::Item::Mod(m) = item {
                if test_only(&m.attrs) {
                    continue;
                }
                if let Some(sub) = submodule(&module, m) {
                    let reachable = public && is_pub(&m.vis) && !hidden(&m.attrs);
                    todo.push((format!("{path}::{}", m.ident), sub, reachable));
                }
            }
        }
        out.insert(path, (module, public));
    }
    out
}

/// The lines one item contributes, named `name` (its public path).
fn item_lines(item: &syn::Item, name: &str, out: &mut BTreeSet<String>) {
    match item {
        syn::Item::Fn(f) => {
            out.insert(format!("fn {name}{}{}", sig(&f.sig), deprecated(&f.attrs)));
        }
        syn::Item::Struct(s) => {
            let dep = deprecated(&s.attrs);
            let generics = text(&s.generics);
            let fields: Vec<&syn::Field> = s.fields.iter().collect();
            let all_pub = fields.iter().all(|f| is_pub(&f.vis));
            let exhaustive = !has_attr(&s.attrs, "non_exhaustive");
            if exhaustive && all_pub {
                let names: Vec<String> = fields
                    .iter()
                    .enumerate()
                    .map(|(i, f)| f.ident.as_ref().map_or(i.to_string(), ToString::to_string))
                    .collect();
                out.insert(format!(
                    "struct {name}{generics} {{ {} }}{dep}",
                    names.join(", ")
                ));
            } else {
                out.insert(format!("struct {name}{generics}{dep}"));
            }
            for (i, f) in fields.iter().enumerate() {
                if is_pub(&f.vis) && !hidden(&f.attrs) {
                    let field = f.ident.as_ref().map_or(i.to_string(), ToString::to_string);
                    out.insert(format!(
                        "field {name}.{field}: {}{}",
                        text(&f.ty),
                        deprecated(&f.attrs)
                    ));
                }
            }
            for d in derives(&s.attrs) {
                out.insert(format!("impl {d} for {name}"));
            }
        }
        syn::Item::Enum(e) => {
            let dep = deprecated(&e.attrs);
            let exhaustive = !has_attr(&e.attrs, "non_exhaustive");
            let variants: Vec<String> = e.variants.iter().map(|v| v.ident.to_string()).collect();
            if exhaustive {
                out.insert(format!(
                    "enum {name}{} {{ {} }}{dep}",
                    text(&e.generics),
                    variants.join(", ")
                ));
            } else {
                out.insert(format!("enum {name}{}{dep}", text(&e.generics)));
            }
            for v in &e.variants {
                if hidden(&v.attrs) {
                    continue;
                }
                let fields = match &v.fields {
                    syn::Fields::Unit => String::new(),
                    other => text(other),
                };
                out.insert(format!(
                    "variant {name}::{}{fields}{}",
                    v.ident,
                    deprecated(&v.attrs)
                ));
            }
            for d in derives(&e.attrs) {
                out.insert(format!("impl {d} for {name}"));
            }
        }
        syn::Item::Trait(t) => {
            let dep = deprecated(&t.attrs);
            let supers = if t.supertraits.is_empty() {
                String::new()
            } else {
                format!(": {}", text(&t.supertraits))
            };
            let mut required = Vec::new();
            for ti in &t.items {
                match ti {
                    syn::TraitItem::Fn(f) if !hidden(&f.attrs) => {
                        let provided = if f.default.is_some() {
                            " (provided)"
                        } else {
                            ""
                        };
                        if f.default.is_none() {
                            required.push(f.sig.ident.to_string());
                        }
                        out.insert(format!(
                            "method {name}::{}{}{provided}{}",
                            f.sig.ident,
                            sig(&f.sig),
                            deprecated(&f.attrs)
                        ));
                    }
                    syn::TraitItem::Fn(f) if f.default.is_none() => {
                        required.push(f.sig.ident.to_string());
                    }
                    syn::TraitItem::Const(c) => {
                        let provided = if c.default.is_some() {
                            " (provided)"
                        } else {
                            ""
                        };
                        if c.default.is_none() {
                            required.push(c.ident.to_string());
                        }
                        out.insert(format!(
                            "const {name}::{}: {}{provided}",
                            c.ident,
                            text(&c.ty)
                        ));
                    }
                    syn::TraitItem::Type(ty) => {
                        required.push(ty.ident.to_string());
                        out.insert(format!("type {name}::{}", ty.ident));
                    }
                    _ => {}
                }
            }
            out.insert(format!(
                "trait {name}{}{supers} required {{ {} }}{dep}",
                text(&t.generics),
                required.join(", ")
            ));
        }
        syn::Item::Const(c) => {
            out.insert(format!(
                "const {name}: {}{}",
                text(&c.ty),
                deprecated(&c.attrs)
            ));
        }
        syn::Item::Static(s) => {
            out.insert(format!(
                "static {name}: {}{}",
                text(&s.ty),
                deprecated(&s.attrs)
            ));
        }
        syn::Item::Type(t) => {
            out.insert(format!(
                "type {name}{} = {}{}",
                text(&t.generics),
                text(&t.ty),
                deprecated(&t.attrs)
            ));
        }
        _ => {}
    }
}

fn sig(s: &syn::Signature) -> String {
    let asyncness = if s.asyncness.is_some() { "async " } else { "" };
    let unsafety = if s.unsafety.is_some() { "unsafe " } else { "" };
    let output = match &s.output {
        syn::ReturnType::Default => String::new(),
        syn::ReturnType::Type(_, ty) => format!(" -> {}", text(ty)),
    };
    // Parameter names are not the API; their types are.
    let inputs: Vec<String> = s
        .inputs
        .iter()
        .map(|arg| match arg {
            syn::FnArg::Receiver(r) => text(r),
            syn::FnArg::Typed(p) => text(&p.ty),
        })
        .collect();
    let where_clause = s
        .generics
        .where_clause
        .as_ref()
        .map(|w| format!(" {}", text(w)))
        .unwrap_or_default();
    format!(
        "{}({}){output}{where_clause} [{asyncness}{unsafety}]",
        text(&s.generics),
        inputs.join(", ")
    )
    .replace(" []", "")
    .replace(" [async ]", " [async]")
}

/// The name an item declares, when it declares one.
fn declared(item: &syn::Item) -> Option<(String, &[syn::Attribute], bool)> {
    Some(match item {
        syn::Item::Fn(f) => (f.sig.ident.to_string(), &f.attrs, is_pub(&f.vis)),
        syn::Item::Struct(s) => (s.ident.to_string(), &s.attrs, is_pub(&s.vis)),
        syn::Item::Enum(e) => (e.ident.to_string(), &e.attrs, is_pub(&e.vis)),
        syn::Item::Trait(t) => (t.ident.to_string(), &t.attrs, is_pub(&t.vis)),
        syn::Item::Const(c) => (c.ident.to_string(), &c.attrs, is_pub(&c.vis)),
        syn::Item::Static(s) => (s.ident.to_string(), &s.attrs, is_pub(&s.vis)),
        syn::Item::Type(t) => (t.ident.to_string(), &t.attrs, is_pub(&t.vis)),
        _ => return None,
    })
}

/// The last segment of a type's path (`Foo` of `crate::a::Foo<T>`).
fn type_name(ty: &syn::Type) -> Option<String> {
    match ty {
        syn::Type::Path(p) => p.path.segments.last().map(|s| s.ident.to_string()),
        _ => None,
    }
}

/// Every `pub use` leaf of a tree: (the name it is known by, the path it names).
fn use_leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<(String, Vec<String>)>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut path = prefix.clone();
            path.push(n.ident.to_string());
            out.push((n.ident.to_string(), path));
        }
        syn::UseTree::Rename(r) => {
            let mut path = prefix.clone();
            path.push(r.ident.to_string());
            out.push((r.rename.to_string(), path));
        }
        syn::UseTree::Glob(_) => {
            let mut path = prefix.clone();
            path.push("*".into());
            out.push(("*".into(), path));
        }
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix, out);
            }
        }
    }
}

/// A use path as an absolute module path of this crate, when it is one.
fn resolve(module: &str, path: &[String]) -> Option<String> {
    let mut parts: Vec<String> = module.split("::").map(String::from).collect();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            parts = vec!["crate".into()];
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                parts.pop();
                rest = &rest[1..];
            }
        }
        _ => {}
    }
    parts.extend(rest.iter().cloned());
    Some(parts.join("::"))
}

fn surface(krate: &str, root: &Path) -> BTreeSet<String> {
    let modules = modules(root);
    // Every public item of every module, by absolute path, with its lines
    // and the methods of its inherent impls.
    let mut items: BTreeMap<String, &syn::Item> = BTreeMap::new();
    let mut impls: BTreeMap<String, Vec<&syn::ItemImpl>> = BTreeMap::new();
    for (path, (module, _)) in &modules {
        for item in &module.items {
            if let Some((name, attrs, public)) = declared(item)
                && public
                && !hidden(attrs)
                && !test_only(attrs)
            {
                items.insert(format!("{path}::{name}"), item);
            }
            if let syn::Item::Impl(i) = item
                && let Some(ty) = type_name(&i.self_ty)
            {
                impls.entry(ty).or_default().push(i);
            }
        }
    }
    // What a user can name: items of reachable modules, and re-exports.
    let mut named: Vec<(String, String)> = Vec::new(); // (public name, absolute path)
    let mut lines = BTreeSet::new();
    for (path, (module, public)) in &modules {
        if !public {
            continue;
        }
        let shown = path.replacen("crate", krate, 1);
        for item in &module.items {
            if let Some((name, attrs, is_public)) = declared(item)
                && is_public
                && !hidden(attrs)
                && !test_only(attrs)
            {
                named.push((format!("{shown}::{name}"), format!("{path}::{name}")));
            }
            if let syn::Item::Macro(m) = item
                && has_attr(&m.attrs, "macro_export")
                && !hidden(&m.attrs)
                && let Some(ident) = &m.ident
            {
                lines.insert(format!("macro {krate}::{ident}!"));
            }
            if let syn::Item::Use(u) = item {
                if !is_pub(&u.vis) || hidden(&u.attrs) {
                    continue;
                }
                let mut leaves = Vec::new();
                use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
                for (alias, target) in leaves {
                    let local = matches!(
                        target.first().map(String::as_str),
                        Some("crate" | "self" | "super")
                    ) || modules.contains_key(&format!("{path}::{}", target[0]))
                        || modules.contains_key(&format!("crate::{}", target[0]));
                    if alias == "*" {
                        lines.insert(format!("use {shown}::* = {}", target.join("::")));
                        continue;
                    }
                    if local {
                        let abs = resolve(path, &target).unwrap();
                        if items.contains_key(&abs) {
                            named.push((format!("{shown}::{alias}"), abs));
                        } else if modules.contains_key(&abs) {
                            lines.insert(format!(
                                "use {shown}::{alias} = module {}",
                                abs.replacen("crate", krate, 1)
                            ));
                        } else {
                            lines.insert(format!("use {shown}::{alias} = {}", target.join("::")));
                        }
                    } else {
                        lines.insert(format!("use {shown}::{alias} = {}", target.join("::")));
                    }
                }
            }
        }
    }
    for (public_name, abs) in &named {
        let item = items[abs];
        item_lines(item, public_name, &mut lines);
        let Some((name, _, _)) = declared(item) else {
            continue;
        };
        if !matches!(
            item,
            syn::Item::Struct(_) | syn::Item::Enum(_) | syn::Item::Trait(_)
        ) {
            continue;
        }
        for i in impls.get(&name).into_iter().flatten() {
            if test_only(&i.attrs) {
                continue;
            }
            match &i.trait_ {
                Some((_, trait_path, _)) => {
                    let t = text(trait_path);
                    lines.insert(format!("impl {t} for {public_name}"));
                }
                None => {
                    for ii in &i.items {
                        if let syn::ImplItem::Fn(f) = ii
                            && is_pub(&f.vis)
                            && !hidden(&f.attrs)
                        {
                            lines.insert(format!(
                                "fn {public_name}::{}{}{}",
                                f.sig.ident,
                                sig(&f.sig),
                                deprecated(&f.attrs)
                            ));
                        }
                        if let syn::ImplItem::Const(c) = ii
                            && is_pub(&c.vis)
                            && !hidden(&c.attrs)
                        {
                            lines.insert(format!(
                                "const {public_name}::{}: {}{}",
                                c.ident,
                                text(&c.ty),
                                deprecated(&c.attrs)
                            ));
                        }
                    }
                }
            }
        }
    }
    lines
}

/// The item a line is about: the last path segment of its name.
fn item_name(line: &str) -> String {
    let mut words = line.split_whitespace();
    let kind = words.next().unwrap_or("");
    let name = words.next().unwrap_or("");
    let name = if kind == "impl" {
        line.rsplit(" for ").next().unwrap_or(name)
    } else {
        name
    };
    let name = name.split(['<', '(', '{', '!']).next().unwrap_or(name);
    let name = name.trim_end_matches(':');
    let name = name.rsplit('.').next().unwrap_or(name);
    name.rsplit("::").next().unwrap_or(name).trim().to_string()
}

#[test]
fn the_public_api_changes_only_as_docs_changes_md_says() {
    let ws = workspace();
    let mut current = BTreeSet::new();
    for (krate, root) in CRATES {
        current.extend(surface(krate, &ws.join(root)));
    }
    let record_path = ws.join(RECORD);
    let recorded: BTreeSet<String> = std::fs::read_to_string(&record_path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with("//"))
        .map(String::from)
        .collect();
    let changes = std::fs::read_to_string(ws.join("docs/CHANGES.md")).unwrap();
    let mentioned = |name: &str| {
        changes.contains(&format!("`{name}`"))
            || changes.contains(&format!("{name}`"))
            || changes.contains(&format!("::{name}"))
    };

    let removed: Vec<&String> = recorded.difference(&current).collect();
    let added: Vec<&String> = current.difference(&recorded).collect();
    let mut errors = Vec::new();
    for line in &removed {
        let name = item_name(line);
        if !line.ends_with(DEPRECATED) && !mentioned(&name) {
            errors.push(format!(
                "removed or changed without deprecation, and `{name}` is not in docs/CHANGES.md:\n    {line}"
            ));
        }
    }
    for line in &added {
        if line.ends_with(DEPRECATED) && !recorded.contains(line.trim_end_matches(DEPRECATED)) {
            continue;
        }
        if line.ends_with(DEPRECATED) {
            let name = item_name(line);
            if !mentioned(&name) {
                errors.push(format!(
                    "newly deprecated, and `{name}` is not in docs/CHANGES.md:\n    {line}"
                ));
            }
        }
    }
    assert!(
        errors.is_empty(),
        "public API rules broken:\n{}",
        errors.join("\n")
    );

    if std::env::var_os("WASMPROV_BLESS_API").is_some() {
        let mut out = String::from(
            "// The public API of wasmprov's library crates, one line per item a user can\n\
             // name (tests/tests/api_surface.rs writes it with WASMPROV_BLESS_API=1).\n\
             // Change it only with the change listed in docs/CHANGES.md.\n",
        );
        for line in &current {
            out.push_str(line);
            out.push('\n');
        }
        std::fs::write(&record_path, out).unwrap();
        return;
    }
    assert!(
        removed.is_empty() && added.is_empty(),
        "the public API differs from {RECORD} ({} lines gone, {} new). List the change in \
         docs/CHANGES.md (removals only after a release deprecated), then run \
         `WASMPROV_BLESS_API=1 cargo test -p wasmprov-tests --test api_surface`.\n\
         gone:\n{}\nnew:\n{}",
        removed.len(),
        added.len(),
        removed
            .iter()
            .map(|l| format!("  - {l}"))
            .collect::<Vec<_>>()
            .join("\n"),
        added
            .iter()
            .map(|l| format!("  + {l}"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
}

#[test]
fn line_names_are_the_items() {
    assert_eq!(
        item_name("fn wasmprov_api::fit::fits(a: &B) -> bool"),
        "fits"
    );
    assert_eq!(
        item_name("field wasmprov_api::NodeHandle.zone: Option<String>"),
        "zone"
    );
    assert_eq!(
        item_name("impl Clone for wasmprov_api::NodeHandle"),
        "NodeHandle"
    );
    assert_eq!(
        item_name("struct wasmprov_api::Offering { a, b }"),
        "Offering"
    );
    assert_eq!(
        item_name("method wasmprov_api::CloudProvisioner::get(&self) (provided)"),
        "get"
    );
    assert_eq!(
        item_name("macro wasmprov_guest::export_provider!"),
        "export_provider"
    );
}
