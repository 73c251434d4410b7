//! No import circles between the modules of a crate.
//!
//! Every crate of the workspace is read with `syn`: each module declared at
//! its root (`mod x;`, with every file under it) is a node, the root file's
//! own items another, and a path starting with `crate::` is an edge to the
//! module it names (a name the root re-exports leads to the module it comes
//! from; a name the root defines leads to the root). A module may use the
//! ones below it, never one that uses it back, directly or through others:
//! the graph must have no cycle. The root's `mod` and `pub use` lines are
//! declarations, not uses.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

const ROOT: &str = "(crate root)";

/// A crate root and the modules it declares.
struct Crate {
    name: String,
    /// Module name → files (the module's own and its submodules').
    modules: BTreeMap<String, Vec<PathBuf>>,
    /// Names the root re-exports → the module they come from.
    reexports: BTreeMap<String, String>,
    root: PathBuf,
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn parse(path: &Path) -> syn::File {
    let text = std::fs::read_to_string(path).unwrap();
    syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The first name of each path a `use` tree brings in below `crate`.
fn use_leaves(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_leaves(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut v = prefix.clone();
            v.push(n.ident.to_string());
            out.push(v);
        }
        syn::UseTree::Rename(r) => {
            let mut v = prefix.clone();
            v.push(r.ident.to_string());
            out.push(v);
        }
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_leaves(t, prefix, out);
            }
        }
    }
}

impl Crate {
    fn read(name: &str, root: &Path) -> Self {
        let file = parse(root);
        let src = root.parent().unwrap();
        let mut modules = BTreeMap::new();
        let mut reexports = BTreeMap::new();
        for item in &file.items {
            match item {
                syn::Item::Mod(m) if m.content.is_none() => {
                    let module = m.ident.to_string();
                    let mut files = Vec::new();
                    let single = src.join(format!("{module}.rs"));
                    if single.exists() {
                        files.push(single);
                    }
                    rust_files(&src.join(&module), &mut files);
                    modules.insert(module, files);
                }
                syn::Item::Use(u) => {
                    let mut leaves = Vec::new();
                    use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
                    for leaf in leaves {
                        let leaf: Vec<_> = leaf
                            .into_iter()
                            .skip_while(|s| s == "crate" || s == "self")
                            .collect();
                        if leaf.len() >= 2 {
                            reexports.insert(leaf.last().unwrap().clone(), leaf[0].clone());
                        }
                    }
                }
                _ => {}
            }
        }
        Self {
            name: name.to_string(),
            modules,
            reexports,
            root: root.to_path_buf(),
        }
    }

    /// The node a path below `crate::` leads to.
    fn node_of(&self, first: &str) -> Option<String> {
        if self.modules.contains_key(first) {
            Some(first.to_string())
        } else if let Some(m) = self.reexports.get(first) {
            self.modules.contains_key(m).then(|| m.clone())
        } else if first.chars().next().is_some_and(|c| c.is_alphabetic()) {
            Some(ROOT.to_string())
        } else {
            None
        }
    }

    /// Module → modules it uses (with one example path per edge).
    fn graph(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        let mut graph: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        let record = |from: &str, path: &[String], graph: &mut BTreeMap<_, _>| {
            let Some(first) = path.first() else { return };
            if let Some(to) = self.node_of(first)
                && to != from
            {
                let edges: &mut BTreeMap<String, String> =
                    graph.entry(from.to_string()).or_default();
                edges
                    .entry(to)
                    .or_insert_with(|| format!("crate::{}", path.join("::")));
            }
        };
        let src = self.root.parent().unwrap();
        for (module, files) in &self.modules {
            for file in files {
                let mut paths = Paths::new(depth_of(src, file), None);
                paths.visit_file(&parse(file));
                for p in &paths.found {
                    record(module, p, &mut graph);
                }
            }
        }
        // The root's own code (not its `mod` and `use` declarations).
        let mut paths = Paths::new(0, Some(&self.modules));
        for item in parse(&self.root).items {
            if !matches!(item, syn::Item::Mod(_) | syn::Item::Use(_)) {
                paths.visit_item(&item);
            }
        }
        for p in &paths.found {
            record(ROOT, p, &mut graph);
        }
        graph
    }
}

/// Every path of a file that leaves its top-level module: `crate::…`, and
/// `super::…` climbing to the root; in the root file, a path that starts
/// with a declared module too. Each is kept from the name after the root.
struct Paths<'m> {
    /// How deep the code being read is below the root: 1 in `src/m.rs`
    /// and `src/m/mod.rs`, 2 in `src/m/x.rs`, one more in each inline `mod`.
    depth: usize,
    /// The root's modules, for the root file's bare paths.
    root_modules: Option<&'m BTreeMap<String, Vec<PathBuf>>>,
    found: Vec<Vec<String>>,
}

impl<'m> Paths<'m> {
    fn new(depth: usize, root_modules: Option<&'m BTreeMap<String, Vec<PathBuf>>>) -> Self {
        Self {
            depth,
            root_modules,
            found: Vec::new(),
        }
    }

    fn path(&mut self, names: &[String]) {
        if names.len() < 2 {
            return;
        }
        if names[0] == "crate" {
            self.found.push(names[1..].to_vec());
            return;
        }
        let supers = names.iter().take_while(|n| *n == "super").count();
        if supers > 0 && supers == self.depth && names.len() > supers {
            self.found.push(names[supers..].to_vec());
        } else if self.depth == 0 && self.root_modules.is_some_and(|m| m.contains_key(&names[0])) {
            self.found.push(names.to_vec());
        }
    }
}

impl<'a> Visit<'a> for Paths<'_> {
    fn visit_path(&mut self, path: &'a syn::Path) {
        let names: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.path(&names);
        syn::visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, u: &'a syn::ItemUse) {
        let mut leaves = Vec::new();
        use_leaves(&u.tree, &mut Vec::new(), &mut leaves);
        for leaf in leaves {
            self.path(&leaf);
        }
    }

    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        self.depth += 1;
        syn::visit::visit_item_mod(self, m);
        self.depth -= 1;
    }
}

/// How deep a module file is below the crate's source directory.
fn depth_of(src: &Path, file: &Path) -> usize {
    let rel = file.strip_prefix(src).unwrap();
    let parts = rel.components().count();
    if rel.file_name().is_some_and(|n| n == "mod.rs") {
        parts - 1
    } else {
        parts
    }
}

/// The strongly connected components of more than one node (Tarjan).
fn cycles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    struct State<'g> {
        graph: &'g BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: BTreeSet<&'g str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn connect<'g>(s: &mut State<'g>, v: &'g str) {
        s.index.insert(v, s.next);
        s.low.insert(v, s.next);
        s.next += 1;
        s.stack.push(v);
        s.on_stack.insert(v);
        if let Some(edges) = s.graph.get(v) {
            for w in edges.keys() {
                let w = w.as_str();
                if !s.index.contains_key(w) {
                    connect(s, w);
                    let l = s.low[v].min(s.low[w]);
                    s.low.insert(v, l);
                } else if s.on_stack.contains(w) {
                    let l = s.low[v].min(s.index[w]);
                    s.low.insert(v, l);
                }
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            connect(&mut s, v);
        }
    }
    s.out
}

/// Every crate root of the workspace: `src/lib.rs` and `src/main.rs` of each
/// member with a manifest.
fn crates() -> Vec<Crate> {
    let ws = workspace();
    let mut dirs = vec![ws.join("guest-sdk"), ws.join("tests")];
    for group in ["host", "plugins", "tests/guests", "examples"] {
        for entry in std::fs::read_dir(ws.join(group)).unwrap().flatten() {
            dirs.push(entry.path());
        }
    }
    dirs.push(ws.join("plugins/digitalocean/fake"));
    dirs.push(ws.join("plugins/linode/fake"));
    let mut out = Vec::new();
    for dir in dirs {
        if !dir.join("Cargo.toml").exists() {
            continue;
        }
        let name = dir.strip_prefix(&ws).unwrap().display().to_string();
        for root in ["src/lib.rs", "src/main.rs", "lib.rs"] {
            let path = dir.join(root);
            if path.exists() {
                out.push(Crate::read(&format!("{name}/{root}"), &path));
            }
        }
    }
    out
}

fn describe(
    c: &Crate,
    graph: &BTreeMap<String, BTreeMap<String, String>>,
    cycle: &[String],
) -> String {
    let mut lines = vec![format!("{}: {}", c.name, cycle.join(", "))];
    for from in cycle {
        for (to, example) in graph.get(from).into_iter().flatten() {
            if cycle.contains(to) {
                lines.push(format!("  {from} uses {to} ({example})"));
            }
        }
    }
    lines.join("\n")
}

/// Crates whose circle is being taken apart by work in progress, with why.
/// Empty is the goal; nothing is added here to make the test pass.
const IN_PROGRESS: &[(&str, &str)] = &[];

#[test]
fn no_module_of_any_crate_imports_one_that_imports_it_back() {
    let crates = crates();
    assert!(
        crates.iter().any(|c| c.name == "host/runtime/src/lib.rs")
            && crates.iter().any(|c| c.name == "host/cli/src/main.rs"),
        "the runtime and the CLI are read"
    );
    let mut found = Vec::new();
    for c in &crates {
        if IN_PROGRESS.iter().any(|(name, _)| *name == c.name) {
            continue;
        }
        let graph = c.graph();
        for cycle in cycles(&graph) {
            found.push(describe(c, &graph, &cycle));
        }
    }
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

#[test]
fn the_checker_sees_a_circle_through_a_reexport_and_the_root() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("b")).unwrap();
    std::fs::write(
        src.join("lib.rs"),
        "mod a; mod b; mod c; pub use a::Thing;\nfn helper() { c::go() }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("a.rs"),
        "pub struct Thing; fn f() { crate::b::deep::g(); }",
    )
    .unwrap();
    std::fs::write(src.join("b/mod.rs"), "pub mod deep;").unwrap();
    // A re-exported name leads to its module: b → a → b.
    std::fs::write(src.join("b/deep.rs"), "use crate::Thing; pub fn g() {}").unwrap();
    // A root item: c → root → c. A doc link is not a use.
    std::fs::write(
        src.join("c.rs"),
        "/// See [`crate::a::Thing`].\npub fn go() { crate::helper() }",
    )
    .unwrap();
    let c = Crate::read("sample", &src.join("lib.rs"));
    let graph = c.graph();
    let mut found = cycles(&graph);
    found.sort();
    assert_eq!(
        found,
        vec![
            vec![ROOT.to_string(), "c".to_string()],
            vec!["a".to_string(), "b".to_string()],
        ]
    );
    assert!(!graph["c"].contains_key("a"), "{graph:?}");
}
