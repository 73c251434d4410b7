//! The contract is language-neutral: plugins for the reference cloud written
//! in Python (componentize-py) and JavaScript (ComponentizeJS, the engine of
//! `jco componentize`) are built from source here and pass `wasmprov test`
//! under the same sandbox, grants and limits as Rust plugins, plain and
//! under faults. `tests/setup.sh` installs the pinned tools.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn out_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lang-plugins");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The Python plugin, built with componentize-py from `plugins/python/refcloud`
/// on the Python SDK of `guest-sdk/python`.
fn python_plugin() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = out_dir().join("refcloud-py.wasm");
        let src = repo().join("plugins/python/refcloud");
        let sdk = repo().join("guest-sdk/python");
        wasmprov_guest_build::build_python_with(&repo().join("wit"), &[&sdk], &src, &out).unwrap();
        out
    })
}

/// The JavaScript plugin, built with ComponentizeJS from `plugins/js/refcloud`.
fn js_plugin() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let out = out_dir().join("refcloud-js.wasm");
        let src = repo().join("plugins/js/refcloud");
        wasmprov_guest_build::build_js(&repo().join("wit"), &src, &out).unwrap();
        out
    })
}

fn wasmprov(cache: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .args(args)
        .env("XDG_CACHE_HOME", cache)
        .env_remove("WASMPROV_PLUGIN_DIR")
        .output()
        .expect("run wasmprov")
}

fn declares(component: &Path) -> bool {
    let bytes = std::fs::read(component).unwrap();
    wasmprov_host::custom_section(&bytes, wasmprov_host::policy::requests::SECTION).is_some()
}

fn passes_the_suite(component: &Path, manifest: &Path) {
    assert!(
        declares(component),
        "{} declares no capabilities",
        component.display()
    );
    let cache = tempfile::tempdir().unwrap();
    for faults in [None, Some("default")] {
        let mut args = vec![
            "test",
            "--component",
            component.to_str().unwrap(),
            "--manifest",
            manifest.to_str().unwrap(),
            "--fake",
            "refcloud",
        ];
        if let Some(f) = faults {
            args.extend(["--faults", f]);
        }
        let out = wasmprov(cache.path(), &args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("PASSED"),
            "wasmprov test {} (faults {faults:?}) failed\nstdout: {stdout}\nstderr: {}",
            component.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        if faults.is_some() {
            assert!(stdout.contains("faults injected:"), "{stdout}");
        }
    }
}

#[test]
fn a_python_plugin_passes_the_conformance_suite_plain_and_under_faults() {
    passes_the_suite(
        python_plugin(),
        &repo().join("plugins/python/refcloud/refcloud-py.toml"),
    );
}

#[test]
fn a_javascript_plugin_passes_the_conformance_suite_plain_and_under_faults() {
    passes_the_suite(
        js_plugin(),
        &repo().join("plugins/js/refcloud/refcloud-js.toml"),
    );
}

fn scaffolded(lang: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join(format!("acme-{lang}"));
    let out = Command::new(env!("CARGO_BIN_EXE_wasmprov"))
        .args(["new", &format!("acme-{lang}"), "--lang", lang, "--path"])
        .arg(&dest)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, dest)
}

fn assert_ran(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn wasmprov_new_lang_python_scaffolds_a_plugin_whose_test_passes_unchanged() {
    let (_dir, dest) = scaffolded("python");
    let out = Command::new("python3")
        .args(["-m", "unittest", "-v"])
        .current_dir(&dest)
        .env("WASMPROV", env!("CARGO_BIN_EXE_wasmprov"))
        .output()
        .unwrap();
    assert_ran("python3 -m unittest", &out);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("Ran 2 tests") && log.contains("OK"), "{log}");
    assert!(declares(&dest.join("acme-python.wasm")));
}

#[test]
fn wasmprov_new_lang_js_scaffolds_a_plugin_whose_test_passes_unchanged() {
    let (_dir, dest) = scaffolded("js");
    let install = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&dest)
        .output()
        .unwrap();
    assert_ran("npm install", &install);
    let out = Command::new("npm")
        .arg("test")
        .current_dir(&dest)
        .env("WASMPROV", env!("CARGO_BIN_EXE_wasmprov"))
        .output()
        .unwrap();
    assert_ran("npm test", &out);
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        log.contains("# pass 2") && log.contains("# fail 0"),
        "{log}"
    );
    assert!(declares(&dest.join("acme-js.wasm")));
}

#[test]
fn a_declared_python_plugin_installs_with_exactly_what_it_needs() {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins.d");
    std::fs::create_dir_all(&plugins).unwrap();
    // A local build, let in unsigned by the operator.
    std::fs::write(
        plugins.join("wasmprov.toml"),
        "[signatures]\nunsigned = [\"refcloud-py\"]\n",
    )
    .unwrap();
    let cache = tempfile::tempdir().unwrap();
    let dir_arg = plugins.to_str().unwrap();
    let out = wasmprov(
        cache.path(),
        &[
            "--plugin-dir",
            dir_arg,
            "install",
            python_plugin().to_str().unwrap(),
            "--name",
            "refcloud-py",
            "--yes",
        ],
    );
    assert_ran("wasmprov install", &out);
    let manifest = std::fs::read_to_string(plugins.join("refcloud-py.toml")).unwrap();
    assert!(
        manifest.contains("\"https://api.refcloud.example\""),
        "{manifest}"
    );
    assert!(
        manifest.contains("token = { env = \"REFCLOUD_TOKEN\" }"),
        "{manifest}"
    );
    let out = wasmprov(
        cache.path(),
        &["--plugin-dir", dir_arg, "--json", "inspect", "refcloud-py"],
    );
    assert_ran("wasmprov inspect", &out);
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let checks = info["plugin"]["requested"]
        .as_array()
        .expect("a declaration");
    assert!(
        checks
            .iter()
            .all(|c| c["standing"] == "granted" || c["standing"] == "unset"),
        "{checks:?}"
    );
}
