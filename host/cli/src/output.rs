//! Tables for people, JSON (the API types' serde names) for programs.

use anyhow::Result;
use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};
use wasmprov_api::{NodeHandle, PriceHint};
use wasmprov_host::{Host, PluginInfo};

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.iter().copied());
    t
}

pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

pub fn plugins(host: &Host, json: bool) -> Result<()> {
    if json {
        let loaded = host.plugins();
        let plugins: Vec<&PluginInfo> = loaded.iter().map(|p| p.info()).collect();
        let errors: Vec<String> = host.errors().iter().map(ToString::to_string).collect();
        return print_json(&serde_json::json!({ "plugins": plugins, "errors": errors }));
    }
    let mut t = table(&[
        "plugin",
        "backend",
        "capacity",
        "http grants",
        "exec grants",
        "sha256",
    ]);
    for p in host.plugins() {
        let i = p.info();
        t.add_row(vec![
            i.name.clone(),
            i.backend_name.clone(),
            i.capacity_types
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            if i.http_allow.is_empty() {
                "none".into()
            } else {
                i.http_allow.join("\n")
            },
            if i.exec_allow.is_empty() {
                "none".into()
            } else {
                i.exec_allow.join("\n")
            },
            format!(
                "{}{}",
                &i.sha256[..12],
                if i.pinned { " (pinned)" } else { "" }
            ),
        ]);
    }
    println!("{t}");
    for e in host.errors() {
        println!("not loaded: {e}");
    }
    Ok(())
}

pub fn inspect(info: &PluginInfo, owner: &str, json: bool) -> Result<()> {
    if json {
        return print_json(&serde_json::json!({ "owner_id": owner, "plugin": info }));
    }
    let mut t = table(&["", ""]);
    let l = &info.limits;
    let rows: Vec<(&str, String)> = vec![
        ("plugin", info.name.clone()),
        ("backend", info.backend_name.clone()),
        ("owner id", owner.to_string()),
        ("component", info.component.clone()),
        (
            "sha256",
            format!(
                "{}{}",
                info.sha256,
                if info.pinned { " (pinned)" } else { "" }
            ),
        ),
        (
            "built for",
            info.built_for
                .clone()
                .unwrap_or_else(|| "(not recorded)".into()),
        ),
        (
            "capacity types",
            info.capacity_types
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        ),
        (
            "config",
            info.config
                .iter()
                .map(|(k, v)| format!("{k} = {v}"))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        (
            "secrets",
            info.secrets
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        (
            "http allow",
            if info.http_allow.is_empty() {
                "none".into()
            } else {
                info.http_allow.join("\n")
            },
        ),
        (
            "exec allow",
            if info.exec_allow.is_empty() {
                "none".into()
            } else {
                info.exec_allow.join("\n")
            },
        ),
        (
            "limits",
            format!(
                "memory {} MiB, call {} ms, cpu {} ms, http {} in flight / {} ms / {} bytes, exec {} at once",
                l.memory_mib,
                l.call_timeout_ms,
                l.cpu_time_ms,
                l.http_max_in_flight,
                l.http_timeout_ms,
                l.http_max_response_bytes,
                l.exec_max_concurrent
            ),
        ),
        ("warnings", info.warnings.join("\n")),
    ];
    for (k, v) in rows {
        t.add_row(vec![k.to_string(), v]);
    }
    println!("{t}");
    Ok(())
}

pub fn price(hint: &PriceHint, json: bool) -> Result<()> {
    if json {
        return print_json(hint);
    }
    println!(
        "{} ({}): ${:.4}/hour",
        hint.instance_type, hint.capacity_type, hint.hourly_usd
    );
    Ok(())
}

/// Every plugin's offer for a shape, cheapest first, then those without one.
pub fn ranking(r: &wasmprov_fleet::Ranking, json: bool) -> Result<()> {
    if json {
        return print_json(r);
    }
    let mut t = table(&["rank", "plugin", "instance type", "capacity", "$/hour"]);
    for (i, o) in r.offers.iter().enumerate() {
        t.add_row(vec![
            (i + 1).to_string(),
            o.plugin.clone(),
            o.hint.instance_type.clone(),
            o.hint.capacity_type.to_string(),
            format!("{:.4}", o.hint.hourly_usd),
        ]);
    }
    for n in &r.none {
        t.add_row(vec![
            "-".to_string(),
            n.plugin.clone(),
            n.reason.clone(),
            String::new(),
            String::new(),
        ]);
    }
    println!("{t}");
    Ok(())
}

pub fn node_table(nodes: &[NodeHandle]) -> Table {
    let mut t = table(&[
        "provider id",
        "state",
        "instance type",
        "zone",
        "capacity",
        "address",
        "request",
    ]);
    for n in nodes {
        t.add_row(vec![
            n.provider_id.clone(),
            n.join_state.to_string(),
            n.instance_type.clone().unwrap_or_default(),
            n.zone.clone().unwrap_or_default(),
            n.capacity_type.to_string(),
            n.address.clone().unwrap_or_default(),
            n.labels
                .get("wasmprov-request")
                .cloned()
                .unwrap_or_default(),
        ]);
    }
    t
}

pub fn nodes(nodes: &[NodeHandle], json: bool, single: bool) -> Result<()> {
    if json {
        return if single {
            print_json(&nodes[0])
        } else {
            print_json(&nodes)
        };
    }
    if nodes.is_empty() {
        println!("no nodes");
    } else {
        println!("{}", node_table(nodes));
    }
    Ok(())
}

/// The journal's history, oldest first.
pub fn history(events: &[wasmprov_fleet::journal::Event]) {
    if events.is_empty() {
        println!("no history");
        return;
    }
    let mut t = table(&[
        "#",
        "when (UTC)",
        "event",
        "plugin",
        "request",
        "node",
        "why",
    ]);
    for e in events {
        let when = httpdate::fmt_http_date(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(e.at_ms),
        );
        t.add_row(vec![
            e.seq.to_string(),
            when,
            e.kind.to_string(),
            e.plugin.clone(),
            e.request_id.clone().unwrap_or_default(),
            e.provider_id.clone().unwrap_or_default(),
            e.reason.clone(),
        ]);
    }
    println!("{t}");
}
