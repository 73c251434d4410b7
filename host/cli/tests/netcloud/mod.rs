//! Contract 0.3 plugins for the CLI and daemon tests, built from source at
//! test time: `netcloud` (set-labels, subnets, the networking export) pointed
//! at a refcloud fake on loopback, and `older`, built for contract 0.2.0.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use wasmprov_fake::refcloud::{RefCloudFake, RefCloudFakeOptions};

/// The environment variable the netcloud manifest reads its token from.
pub const TOKEN_ENV: &str = "REFCLOUD_TOKEN";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("host/cli is two levels down")
        .to_path_buf()
}

/// The two components, built once per test binary.
fn components() -> &'static (PathBuf, PathBuf) {
    static BUILT: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    BUILT.get_or_init(|| {
        let built = wasmprov_guest_build::build_guests(
            &repo(),
            &[
                ("wasmprov-test-netcloud", "tests/guests/netcloud"),
                ("wasmprov-test-contract-0-2", "tests/guests/contract-0-2"),
            ],
        );
        (built[0].path.clone(), built[1].path.clone())
    })
}

/// A refcloud fake, and a plugin directory with `netcloud` granted exactly
/// it and `older` (a 0.2.0 plugin; it is loaded, never asked to make a node).
pub async fn setup() -> (RefCloudFake, tempfile::TempDir) {
    let fake = RefCloudFake::start(
        "127.0.0.1:0".parse().unwrap(),
        RefCloudFakeOptions::default(),
    )
    .await
    .expect("the fake starts");
    let dir = tempfile::tempdir().unwrap();
    let (netcloud, older) = components();
    std::fs::copy(netcloud, dir.path().join("netcloud.wasm")).unwrap();
    std::fs::copy(older, dir.path().join("older.wasm")).unwrap();
    std::fs::write(
        dir.path().join("netcloud.toml"),
        format!(
            "name = \"netcloud\"\ncomponent = \"netcloud.wasm\"\n[config]\nendpoint = \"{}\"\n[secrets]\ntoken = {{ env = \"{TOKEN_ENV}\" }}\n[http]\nallow = [\"http://{}\"]\n",
            fake.url(),
            fake.addr()
        ),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("older.toml"),
        "name = \"older\"\ncomponent = \"older.wasm\"\n[config]\nbin = \"/nonexistent\"\nstate = \"/nonexistent\"\n",
    )
    .unwrap();
    (fake, dir)
}
