//! The DigitalOcean plugin (written on the SDK's rest layer) against its
//! own fake (written with the fake kit), through the real host: the whole
//! conformance suite, plain and under faults, and what is particular to
//! DigitalOcean (flat tags, `links.pages.next`, sizes as offerings, 422
//! answers by message, `ratelimit-reset`).

use wasmprov_testkit::{Fake, FaultKind, FaultSpec, Suite};
use wasmprov_tests::{guests, run_suite as run};

/// The manifest the bundled plugin comes with (the test's grants).
const MANIFEST: &str = r#"
name = "digitalocean"
component = "digitalocean.wasm"

[config]
region = "nyc3"

[secrets]
token = { env = "DIGITALOCEAN_TOKEN" }

[http]
allow = ["https://api.digitalocean.com"]
"#;

fn suite() -> Suite {
    Suite::from_component("digitalocean", guests::DIGITALOCEAN.as_ref(), MANIFEST)
        .fake(Fake::DigitalOcean)
}

#[tokio::test(flavor = "multi_thread")]
async fn digitalocean_passes_the_suite_plain() {
    let report = run(suite()).await;
    report.assert_passed();
}

#[tokio::test(flavor = "multi_thread")]
async fn digitalocean_passes_the_suite_under_faults() {
    for seed in [1, 7] {
        let spec = FaultSpec::parse(&format!("default,seed={seed}")).unwrap();
        let report = run(suite().faults(spec)).await;
        report.assert_passed();
        assert!(!report.injected.is_empty());
    }
    let report =
        run(suite().faults(FaultSpec::parse("429=0.3,capacity=0.2,quota=0.2,seed=3").unwrap()))
            .await;
    report.assert_passed();
    for kind in [
        FaultKind::RateLimited,
        FaultKind::Capacity,
        FaultKind::Quota,
    ] {
        assert!(
            report.injected.iter().any(|f| f.kind == kind),
            "no {kind}: {report}"
        );
    }
}
