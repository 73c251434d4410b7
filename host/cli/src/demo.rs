//! `wasmprov demo`: the whole path on the embedded fake cloud, printed step
//! by step. No account, no credentials, nothing leaves 127.0.0.1.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use wasmprov_api::{CloudProvisioner, NodeShape, ProvisionRequest, ProvisionerError};
use wasmprov_fake::{HetznerFake, HetznerFakeOptions};
use wasmprov_host::HostBuilder;

use crate::{bundled, output};

fn step(json: bool, text: &str) {
    if !json {
        println!("\n==> {text}");
    }
}

fn emit(json: bool, value: serde_json::Value) {
    if json {
        println!("{value}");
    }
}

pub async fn run(json: bool) -> Result<()> {
    step(
        json,
        "starting the embedded fake Hetzner Cloud API on 127.0.0.1",
    );
    let fake = HetznerFake::start("127.0.0.1:0".parse()?, HetznerFakeOptions::default()).await?;
    let token = fake.token().to_string();
    if !json {
        println!("    {}", fake.url());
    }

    step(json, "writing the bundled plugins into a plugin directory");
    let dir = tempfile::tempdir().context("creating a plugin directory")?;
    let written = bundled::write(dir.path(), &bundled::NAMES, Some(&fake.url()))?;
    if !json {
        println!("    {} -> {}", written.join(", "), dir.path().display());
        let manifest = std::fs::read_to_string(dir.path().join("hetzner.toml"))?;
        for line in manifest
            .lines()
            .filter(|l| l.starts_with("allow") || l.starts_with("token"))
        {
            println!("    manifest: {line}");
        }
    }

    step(json, "loading the plugins under the sandbox");
    let host = HostBuilder::new(dir.path())
        .owner_id("wasmprov-demo")
        .work_dir(dir.path().join(".work"))
        .secret_source(move |name| (name == "HCLOUD_TOKEN").then(|| token.clone()))
        .build()
        .await?;
    if let Some(err) = host.errors().first() {
        bail!("a bundled plugin failed to load: {err}");
    }
    if !json {
        output::plugins(&host, false)?;
    }
    let hetzner: Arc<dyn CloudProvisioner> = host.plugin("hetzner").context("hetzner plugin")?;

    step(
        json,
        "pricing shapes (no I/O: price hints come from the plugin's table)",
    );
    for (cpu, gib) in [(2.0, 4u64), (4.0, 16), (16.0, 64)] {
        let shape = NodeShape::new(cpu, gib << 30);
        let hint = hetzner
            .price_hint(&shape)
            .context("the plugin priced nothing")?;
        if json {
            emit(
                json,
                serde_json::json!({ "step": "price", "cpu": cpu, "memory_gib": gib, "hint": hint }),
            );
        } else {
            println!(
                "    {cpu} vCPU / {gib} GiB -> {} at ${:.4}/hour",
                hint.instance_type, hint.hourly_usd
            );
        }
    }

    step(
        json,
        "provisioning three nodes, each with its own request id",
    );
    let mut ids = Vec::new();
    for (i, (cpu, gib, zone)) in [(2.0, 4u64, "fsn1"), (4.0, 8, "nbg1"), (8.0, 32, "hel1")]
        .iter()
        .enumerate()
    {
        let request = ProvisionRequest {
            request_id: format!("demo-{}", i + 1),
            shape: NodeShape {
                zone: Some((*zone).to_string()),
                ..NodeShape::new(*cpu, gib << 30)
            },
            boot: Default::default(),
            subnet: None,
        };
        let node = hetzner.provision_request(&request).await?;
        emit(
            json,
            serde_json::json!({ "step": "provision", "node": node }),
        );
        if !json {
            println!(
                "    {} -> server {} ({}, {}, {})",
                request.request_id,
                node.provider_id,
                node.instance_type.as_deref().unwrap_or("?"),
                node.zone.as_deref().unwrap_or("?"),
                node.join_state
            );
        }
        ids.push(node.provider_id);
    }

    step(
        json,
        "provisioning demo-1 again: the same request id yields the same node",
    );
    let again = hetzner
        .provision_request(&ProvisionRequest {
            request_id: "demo-1".into(),
            shape: NodeShape {
                zone: Some("fsn1".into()),
                ..NodeShape::new(2.0, 4 << 30)
            },
            boot: Default::default(),
            subnet: None,
        })
        .await?;
    if again.provider_id != ids[0] {
        bail!(
            "re-provision created a second node ({} != {})",
            again.provider_id,
            ids[0]
        );
    }
    emit(
        json,
        serde_json::json!({ "step": "reprovision", "node": again }),
    );
    if !json {
        println!(
            "    demo-1 -> server {} again; the cloud holds {} servers",
            again.provider_id,
            fake.servers().len()
        );
    }

    step(json, "describing the nodes this owner holds");
    let nodes = hetzner.describe().await?;
    emit(
        json,
        serde_json::json!({ "step": "describe", "nodes": nodes }),
    );
    if !json {
        println!("{}", output::node_table(&nodes));
    }

    step(json, "terminating every node");
    for id in &ids {
        hetzner.terminate(id).await?;
        emit(json, serde_json::json!({ "step": "terminate", "id": id }));
        if !json {
            println!("    terminated {id}");
        }
    }
    match hetzner.terminate(&ids[0]).await {
        Err(ProvisionerError::NotFound(_)) => {
            if !json {
                println!(
                    "    terminating {} again: not found, as it should be",
                    ids[0]
                );
            }
        }
        other => bail!("a second terminate should be not-found, got {other:?}"),
    }

    step(json, "describing again");
    let left = hetzner.describe().await?;
    emit(
        json,
        serde_json::json!({ "step": "describe", "nodes": left }),
    );
    if !left.is_empty() {
        bail!("{} nodes left after terminating all", left.len());
    }
    if !json {
        println!(
            "    no nodes left; the fake served {} API requests",
            fake.request_count()
        );
        println!(
            "\ndemo finished: priced, provisioned, described and terminated through the sandbox"
        );
    }
    fake.shutdown().await;
    Ok(())
}
