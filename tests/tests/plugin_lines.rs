//! The size of the REST plugins written on the guest SDK (issue 28: a
//! Linode-sized plugin in at most 80 lines): lines of each plugin's
//! `src/`, counted as `docs/BENCHMARKS.md` section 7 reports them:
//! non-blank lines that are not comments, with the rows of a `const`
//! catalogue table (`&[Entry] = &[` ... `];`, the price data) and the
//! `#[cfg(test)]` part of a file counted apart. Fakes are counted the same
//! way and reported, with no limit.

use std::path::Path;

/// Most counted lines a REST plugin on the SDK may take.
const LIMIT: usize = 80;

/// Lines of one crate's `src/`: (logic, catalogue rows, tests).
fn count(dir: &Path) -> (usize, usize, usize) {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "rs"))
        .collect();
    files.sort();
    let (mut logic, mut rows, mut tests) = (0, 0, 0);
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let (mut in_tests, mut in_table) = (false, false);
        for line in text.lines().map(str::trim) {
            in_tests |= line.starts_with("#[cfg(test)]");
            if line.is_empty() || line.starts_with("//") {
                continue;
            }
            if in_tests {
                tests += 1;
            } else if in_table && line != "];" {
                rows += 1;
            } else {
                in_table = line.ends_with(": &[Entry] = &[");
                logic += 1;
            }
        }
    }
    (logic, rows, tests)
}

#[test]
fn rest_plugins_on_the_sdk_fit_in_80_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    println!("| crate | counted lines | catalogue rows | test lines |");
    println!("| --- | ---: | ---: | ---: |");
    let mut over = Vec::new();
    for (name, dir, limited) in [
        ("digitalocean plugin", "plugins/digitalocean/src", true),
        ("linode plugin", "plugins/linode/src", true),
        ("digitalocean fake", "plugins/digitalocean/fake/src", false),
        ("linode fake", "plugins/linode/fake/src", false),
    ] {
        let (logic, rows, tests) = count(&root.join(dir));
        println!("| {name} | {logic} | {rows} | {tests} |");
        assert!(
            logic > 20,
            "{name}: {logic} lines is not a plugin; is the counter right?"
        );
        if limited && logic > LIMIT {
            over.push(format!("{name}: {logic} lines"));
        }
    }
    assert!(over.is_empty(), "over {LIMIT} counted lines: {over:?}");
}

#[test]
fn the_counter_counts_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lib.rs"),
        "//! doc\n\nuse x;\n/// item\nconst T: &[Entry] = &[\n    Entry::new(1),\n    Entry::new(2),\n];\nfn f() {}\n#[cfg(test)]\nmod tests {\n    // c\n    fn t() {}\n}\n",
    )
    .unwrap();
    assert_eq!(count(dir.path()), (4, 2, 4));
}
