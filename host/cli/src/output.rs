//! Tables for people, JSON (the API types' serde names) for programs.
//!
//! Every text a plugin (or a file of the plugin directory) supplied goes
//! through [`c`] before it reaches a table or a line: control characters
//! and escape sequences are shown escaped, long values cut with a marker
//! (`wasmprov_host::policy::text`). Tables of more than [`MAX_ROWS`] rows show
//! the first ones and say how many more `--json` has. JSON is exact.

use anyhow::Result;
use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};
use wasmprov_api::{NodeHandle, PriceHint};
use wasmprov_host::{Host, PluginInfo};

/// Rows a table shows; the rest are counted below it.
pub const MAX_ROWS: usize = 1000;

/// A terminal narrower than this is taken for one that did not say its
/// width (a pseudo-terminal of 0 columns, as some CI runners and
/// `docker exec` give): tables are laid out for [`FALLBACK_WIDTH`] (or
/// `$COLUMNS`) instead of collapsing to one character per column.
const MIN_WIDTH: u16 = 20;
/// The width tables take when the terminal's is not believable.
const FALLBACK_WIDTH: u16 = 80;

fn table(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header(header.iter().copied());
    // On a terminal, `width` is the terminal's; elsewhere `None` (no wrapping).
    if t.width().is_some_and(|w| w < MIN_WIDTH) {
        t.set_width(fallback_width(std::env::var("COLUMNS").ok().as_deref()));
    }
    t
}

/// `$COLUMNS` when it is a believable width, else [`FALLBACK_WIDTH`].
fn fallback_width(columns: Option<&str>) -> u16 {
    columns
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|w| *w >= MIN_WIDTH)
        .unwrap_or(FALLBACK_WIDTH)
}

/// Whether to colour what goes to `stream`: only a terminal, and only
/// without `NO_COLOR` (set to anything but the empty string, as
/// no-color.org has it).
pub(crate) fn colour(stream: &impl std::io::IsTerminal) -> bool {
    stream.is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// A value shown in a table cell or a line: escaped and cut.
pub(crate) fn c(s: &str) -> String {
    wasmprov_host::policy::text::cell(s).into_owned()
}

/// A whole line (an error, a report) shown on a terminal.
pub(crate) fn line(s: &str) -> String {
    wasmprov_host::policy::text::line(s).into_owned()
}

/// A text of several lines (a report), each line shown as [`line`] does.
pub(crate) fn block(s: &str) -> String {
    s.lines().map(line).collect::<Vec<_>>().join("\n")
}

/// Several values, one per line of a cell.
fn lines(items: &[String]) -> String {
    items.iter().map(|s| c(s)).collect::<Vec<_>>().join("\n")
}

/// Prints `t` and, when rows were left out, how many.
fn print_table(t: &Table, left_out: usize) {
    println!("{t}");
    if left_out > 0 {
        println!("… and {left_out} more rows not shown (--json shows every one)");
    }
}

pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// The interfaces a plugin has beyond the core calls, as a table cell.
fn interfaces(i: &PluginInfo) -> String {
    let mut out = Vec::new();
    if i.interfaces.set_labels {
        out.push("set-labels");
    }
    if i.interfaces.networking {
        out.push("networking");
    }
    if out.is_empty() {
        "none".into()
    } else {
        out.join(", ")
    }
}

/// What a command that changes something and answers nothing did: the
/// JSON `value`, or the `text` line.
pub(crate) fn done(json: bool, value: serde_json::Value, text: &str) {
    if json {
        println!("{value}");
    } else {
        println!("{text}");
    }
}

/// A stable address and where it is.
pub fn address(a: &wasmprov_api::StableAddress, json: bool) -> Result<()> {
    if json {
        return print_json(a);
    }
    let mut t = table(&["address", "kind", "id", "node"]);
    t.add_row(vec![
        c(&a.address),
        a.kind.to_string(),
        a.resource_id.as_deref().map_or_else(|| "-".into(), c),
        a.provider_id.as_deref().map_or_else(|| "-".into(), c),
    ]);
    print_table(&t, 0);
    Ok(())
}

/// A target group's targets.
pub fn targets(list: &[wasmprov_api::Target], json: bool) -> Result<()> {
    if json {
        return print_json(&list);
    }
    if list.is_empty() {
        println!("no targets");
        return Ok(());
    }
    let mut t = table(&["group", "node", "port", "health"]);
    for x in list.iter().take(MAX_ROWS) {
        t.add_row(vec![
            c(&x.group),
            c(&x.provider_id),
            x.port.map_or_else(|| "-".into(), |p| p.to_string()),
            x.health.as_deref().map_or_else(|| "-".into(), c),
        ]);
    }
    print_table(&t, list.len().saturating_sub(MAX_ROWS));
    Ok(())
}

/// A subnet's free addresses.
pub fn subnet(s: &wasmprov_api::SubnetCapacity, json: bool) -> Result<()> {
    if json {
        return print_json(s);
    }
    let mut t = table(&["subnet", "available", "total", "zone"]);
    t.add_row(vec![
        c(&s.subnet),
        s.available_addresses.to_string(),
        s.total_addresses
            .map_or_else(|| "unknown".into(), |n| n.to_string()),
        s.zone.as_deref().map_or_else(|| "-".into(), c),
    ]);
    print_table(&t, 0);
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
        "contract",
        "capacity",
        "http grants",
        "exec grants",
        "sha256",
        "signer",
    ]);
    let plugins = host.plugins();
    for p in plugins.iter().take(MAX_ROWS) {
        let i = p.info();
        t.add_row(vec![
            c(&i.name),
            c(&i.backend_name),
            format!("{} ({})", i.contract, interfaces(i)),
            i.capacity_types
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            if i.http_allow.is_empty() {
                "none".into()
            } else {
                lines(&i.http_allow)
            },
            if i.exec_allow.is_empty() {
                "none".into()
            } else {
                lines(&i.exec_allow)
            },
            format!(
                "{}{}",
                &i.sha256[..12],
                if i.pinned { " (pinned)" } else { "" }
            ),
            i.signer.as_deref().map_or_else(|| "-".into(), c),
        ]);
    }
    print_table(&t, plugins.len().saturating_sub(MAX_ROWS));
    for e in host.errors() {
        println!("not loaded: {}", line(&e.to_string()));
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
        ("plugin", c(&info.name)),
        ("backend", c(&info.backend_name)),
        ("owner id", c(owner)),
        ("component", c(&info.component)),
        (
            "sha256",
            format!(
                "{}{}",
                info.sha256,
                if info.pinned { " (pinned)" } else { "" }
            ),
        ),
        (
            "source",
            info.source
                .as_deref()
                .map_or_else(|| "(not installed)".into(), c),
        ),
        (
            "signer",
            info.signer
                .as_deref()
                .map_or_else(|| "(not recorded)".into(), c),
        ),
        (
            "built for",
            info.built_for
                .as_deref()
                .map_or_else(|| "(not recorded)".into(), c),
        ),
        ("contract", c(&info.contract)),
        ("interfaces", interfaces(info)),
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
            lines(
                &info
                    .config
                    .iter()
                    .map(|(k, v)| format!("{k} = {v}"))
                    .collect::<Vec<_>>(),
            ),
        ),
        (
            "secrets",
            lines(
                &info
                    .secrets
                    .iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>(),
            ),
        ),
        (
            "http allow",
            if info.http_allow.is_empty() {
                "none".into()
            } else {
                lines(&info.http_allow)
            },
        ),
        (
            "exec allow",
            if info.exec_allow.is_empty() {
                "none".into()
            } else {
                lines(&info.exec_allow)
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
        ("warnings", lines(&info.warnings)),
    ];
    for (k, v) in rows {
        t.add_row(vec![k.to_string(), v]);
    }
    println!("{t}");
    match &info.requested {
        None => println!("requested: the component declares nothing it needs"),
        Some(checks) => {
            let mut r = table(&["kind", "requested", "why", "granted", "standing"]);
            for ch in checks {
                let mut item = c(&ch.item);
                if let Some(from) = &ch.from {
                    item.push_str(&format!("\n(from {})", c(from)));
                }
                let mut standing = ch.standing.label().to_string();
                if let Some(danger) = &ch.danger {
                    standing.push_str(&format!("\nDANGEROUS: {}", c(danger)));
                }
                r.add_row(vec![
                    ch.kind.to_string(),
                    item,
                    c(&ch.why),
                    ch.granted.as_deref().map_or_else(|| "-".into(), c),
                    standing,
                ]);
            }
            println!("requested by the plugin beside what its manifest grants:\n{r}");
        }
    }
    Ok(())
}

pub fn price(hint: &PriceHint, json: bool) -> Result<()> {
    if json {
        return print_json(hint);
    }
    println!(
        "{} ({}): ${:.4}/hour",
        c(&hint.instance_type),
        hint.capacity_type,
        hint.hourly_usd
    );
    Ok(())
}

/// Every plugin's offer for a shape, cheapest first, then those without one.
pub fn ranking(r: &wasmprov_fleet::Ranking, json: bool) -> Result<()> {
    if json {
        return print_json(r);
    }
    let mut t = table(&["rank", "plugin", "instance type", "capacity", "$/hour"]);
    for (i, o) in r.offers.iter().enumerate().take(MAX_ROWS) {
        t.add_row(vec![
            (i + 1).to_string(),
            c(&o.plugin),
            c(&o.hint.instance_type),
            o.hint.capacity_type.to_string(),
            format!("{:.4}", o.hint.hourly_usd),
        ]);
    }
    let mut room = MAX_ROWS.saturating_sub(r.offers.len());
    for u in r.unpriced.iter().take(room) {
        t.add_row(vec![
            "-".to_string(),
            c(&u.plugin),
            c(&u.instance_type),
            u.capacity_type.to_string(),
            "unknown".to_string(),
        ]);
    }
    room = room.saturating_sub(r.unpriced.len());
    for n in r.none.iter().take(room) {
        t.add_row(vec![
            "-".to_string(),
            c(&n.plugin),
            c(&n.reason),
            String::new(),
            String::new(),
        ]);
    }
    print_table(
        &t,
        (r.offers.len() + r.unpriced.len() + r.none.len()).saturating_sub(MAX_ROWS),
    );
    Ok(())
}

/// The nodes as a table (at most [`MAX_ROWS`] of them).
pub fn node_table(nodes: &[NodeHandle]) -> Table {
    let mut t = table(&[
        "provider id",
        "status",
        "join",
        "instance type",
        "zone",
        "capacity",
        "address",
        "request",
    ]);
    let opt = |v: &Option<String>| v.as_deref().map(c).unwrap_or_default();
    for n in nodes.iter().take(MAX_ROWS) {
        t.add_row(vec![
            c(&n.provider_id),
            n.status.to_string(),
            n.join_state.to_string(),
            opt(&n.instance_type),
            opt(&n.zone),
            n.capacity_type.to_string(),
            opt(&n.address),
            n.labels
                .get("wasmprov-request")
                .map(|r| c(r))
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
        print_table(&node_table(nodes), nodes.len().saturating_sub(MAX_ROWS));
    }
    Ok(())
}

/// A plugin's offerings, as listed.
pub fn offerings(list: &[wasmprov_api::Offering], json: bool) -> Result<()> {
    if json {
        return print_json(&list);
    }
    if list.is_empty() {
        println!("no offerings");
        return Ok(());
    }
    let mut t = table(&[
        "instance type",
        "cpu",
        "memory",
        "gpu",
        "arch",
        "disk",
        "zones",
        "on-demand $/h",
        "spot $/h",
    ]);
    let gib = |b: u64| format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30));
    let usd = |p: Option<f64>| p.map_or_else(|| "unknown".to_string(), |p| format!("{p:.4}"));
    for o in list.iter().take(MAX_ROWS) {
        let gpu = if o.gpu == 0 {
            String::new()
        } else {
            format!(
                "{} {}",
                o.gpu,
                c(o.gpu_model
                    .as_deref()
                    .or(o.gpu_vendor.as_deref())
                    .unwrap_or(""))
            )
        };
        t.add_row(vec![
            c(&o.instance_type),
            o.cpu.to_string(),
            gib(o.memory_bytes),
            gpu,
            o.arch.map(|a| a.to_string()).unwrap_or_default(),
            o.disk_bytes.map(gib).unwrap_or_default(),
            if o.zones.is_empty() {
                "any".into()
            } else {
                c(&o.zones.join(","))
            },
            usd(o.on_demand_usd),
            usd(o.spot_usd),
        ]);
    }
    print_table(&t, list.len().saturating_sub(MAX_ROWS));
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
        "status",
        "plugin",
        "request",
        "node",
        "why",
    ]);
    let left_out = events.len().saturating_sub(MAX_ROWS);
    for e in &events[left_out..] {
        let when = httpdate::fmt_http_date(
            std::time::UNIX_EPOCH + std::time::Duration::from_millis(e.at_ms),
        );
        t.add_row(vec![
            e.seq.to_string(),
            when,
            e.kind.to_string(),
            match &e.error {
                Some(err) => format!("{}: {}", e.status.as_str(), c(err)),
                None => e.status.as_str().to_string(),
            },
            c(&e.plugin),
            e.request_id.as_deref().map(c).unwrap_or_default(),
            e.provider_id.as_deref().map(c).unwrap_or_default(),
            c(&e.reason),
        ]);
    }
    if left_out > 0 {
        println!("({left_out} older entries not shown; --json shows every one)");
    }
    println!("{t}");
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmprov_api::{CapacityType, JoinState};

    fn node(i: usize, id: String) -> NodeHandle {
        NodeHandle {
            provider_id: id,
            address: Some(format!("\x1b]52;c;{i}\x07")),
            zone: Some("fsn1\rEVIL".into()),
            capacity_type: CapacityType::OnDemand,
            join_state: JoinState::Joined,
            instance_type: Some("\x1b[2Jcx22".into()),
            labels: Default::default(),
            ..Default::default()
        }
    }

    #[test]
    fn plugin_text_reaches_a_table_escaped_and_cut() {
        let table = node_table(&[node(1, "x".repeat(72 << 10))]).to_string();
        assert!(!table.contains('\x1b') && !table.contains('\r') && !table.contains('\x07'));
        assert!(
            table.contains("\\x1b[2Jcx22") && table.contains("fsn1\\x0dEVIL"),
            "{table}"
        );
        assert!(table.contains("…[+"), "a 72 KiB id is cut");
        assert!(table.len() < 4 << 10, "{}", table.len());
        assert_eq!(
            block("line one\x1b[A\nline two\r"),
            "line one\\x1b[A\nline two\\x0d"
        );
    }

    /// 100 000 nodes, or one cell of 100 000 values: the work is bounded
    /// by what is shown (rows and cells are capped), not by what came in.
    #[test]
    fn huge_answers_render_in_bounded_time() {
        let nodes: Vec<NodeHandle> = (0..100_000).map(|i| node(i, format!("n-{i}"))).collect();
        let started = std::time::Instant::now();
        let table = node_table(&nodes).to_string();
        assert_eq!(table.matches("n-").count(), MAX_ROWS);
        let many: Vec<String> = (0..100_000).map(|i| format!("type-{i}")).collect();
        let mut t = table_for_test();
        t.add_row(vec![c(&many.join(", "))]);
        let one = t.to_string();
        assert!(one.len() < 8 << 10, "{}", one.len());
        // Generous for a debug build on a busy machine: quadratic rendering
        // of the same input took tens of seconds.
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    }

    fn table_for_test() -> Table {
        table(&["value"])
    }

    #[test]
    fn an_unbelievable_terminal_width_falls_back() {
        assert_eq!(fallback_width(None), FALLBACK_WIDTH);
        assert_eq!(fallback_width(Some("0")), FALLBACK_WIDTH);
        assert_eq!(fallback_width(Some("wide")), FALLBACK_WIDTH);
        assert_eq!(fallback_width(Some("132")), 132);
    }
}
