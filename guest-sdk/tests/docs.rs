//! The API reference plugin authors read: rustdoc of the SDK
//! (`wasmprov-guest`) and the fake kit (`wasmprov-fake`) builds with no
//! warning and no broken intra-doc link, into the workspace's `target/doc`
//! (`docs/AUTHORING.md` links it). Warm, this is rustdoc of two crates: the
//! dependencies' metadata is already built.

use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn the_sdk_and_fake_kit_reference_builds_without_broken_links() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| workspace.join("target"), PathBuf::from);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(&workspace)
        .args([
            "doc",
            "--no-deps",
            "-p",
            "wasmprov-guest",
            "-p",
            "wasmprov-fake",
        ])
        .env("CARGO_TARGET_DIR", &target)
        .env(
            "RUSTDOCFLAGS",
            "-D rustdoc::broken_intra_doc_links -D warnings",
        )
        .output()
        .expect("running cargo doc");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "cargo doc failed:\n{stderr}");
    for krate in ["wasmprov_guest", "wasmprov_fake"] {
        let index = target.join("doc").join(krate).join("index.html");
        assert!(index.is_file(), "{} is missing:\n{stderr}", index.display());
    }
    // The pages the authoring guide sends readers to.
    for page in [
        "wasmprov_guest/rest/index.html",
        "wasmprov_fake/kit/index.html",
    ] {
        assert!(target.join("doc").join(page).is_file(), "{page}");
    }
}
