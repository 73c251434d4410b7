//! The autoscaler example runs to the end and its output shows the group
//! converging, across the plugin replacement.

#[test]
fn the_autoscaler_converges_across_a_plugin_replacement() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wasmprov-example-autoscaler"))
        .args(["--interval-ms", "150"])
        .output()
        .expect("run the example");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exit {:?}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("plugins reloaded: replaced hetzner-eu"),
        "{text}"
    );
    assert!(text.contains("converged: target 5, 5 members in the journal, 5 servers on the clouds, no duplicate, no leak"), "{text}");
    let ticks: Vec<&str> = text.lines().filter(|l| l.starts_with("tick")).collect();
    assert_eq!(ticks.len(), 9, "{text}");
    // Before the replacement the group fills Falkenstein first; after it,
    // Ashburn is cheaper and takes the growth.
    assert!(ticks[0].contains("[hetzner-eu 2, hetzner-us 0]"), "{text}");
    assert!(ticks[6].contains("7 members"), "{text}");
    let last = ticks[8];
    assert!(last.contains("5 members"), "{text}");
    assert!(text.contains("cleaned up: 5 servers terminated"), "{text}");
}
