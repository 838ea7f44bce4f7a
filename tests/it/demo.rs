//! The README's demo, non-interactively: `ibscope demo --once --json` must report exactly
//! the faults the demo plants, and leave no simulator process behind.

use crate::common;

use common::*;

#[test]
fn demo_once_reports_the_planted_faults() {
    let out = ibscope_plain(&["demo", "--once", "--json"], &[]);
    let text = assert_exit(&out, 1);
    // Nothing but the report on stdout (progress goes to stderr), valid against check's
    // schema: `demo --once --json | jq` works.
    let report =
        common::schema::assert_valid("check", "demo --once --json", &text, false).remove(0);
    assert_eq!(report["healthy"], false);
    let findings = report["findings"].as_array().expect("findings");
    let found: Vec<(String, String, u64)> = findings
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap_or("").to_string(),
                f["at"]["node"].as_str().unwrap_or("").to_string(),
                f["at"]["port"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let expect = [
        // R1L001 port 9 to spine 1, named from the spine end.
        ("degraded-link", "spine-0001", 2),
        ("counter-above-threshold", "leaf-r4-001", 4),
        ("counter-above-threshold", "leaf-r7-001", 2),
        // gpu-0003's rail-5 HCA, cabled to rail 6's leaf.
        ("rail-misaligned", "gpu-0003 mlx5_5", 1),
        // gpu-0006 has no rail-2 HCA: named at the leaf port where it belongs.
        ("rail-down", "leaf-r2-001", 6),
    ];
    for (kind, node, port) in expect {
        assert!(
            found
                .iter()
                .any(|(k, n, p)| k == kind && n.contains(node) && *p == port),
            "missing {kind} at {node}[{port}] in {found:?}"
        );
    }
    assert_eq!(found.len(), 5, "only the planted faults: {found:?}");
    let symbol = findings
        .iter()
        .find(|f| f["counter"] == "SymbolErrorCounter")
        .expect("symbol error finding");
    assert_eq!(symbol["value"], 1234);
    // The degraded link names its far end: rail 1's leaf, port 9.
    let degraded = &findings
        .iter()
        .find(|f| f["kind"] == "degraded-link")
        .expect("degraded link")["remote"];
    assert!(degraded["node"]
        .as_str()
        .unwrap_or("")
        .contains("leaf-r1-001"));
    assert_eq!(degraded["port"], 9);
    let rail_down = findings
        .iter()
        .find(|f| f["kind"] == "rail-down")
        .expect("rail down");
    assert!(
        rail_down["message"]
            .as_str()
            .unwrap_or("")
            .contains("gpu-0006: rail 2"),
        "{rail_down}"
    );
}

/// The interactive demo: the link it flaps shows in the Events view as it goes down and up,
/// and after its second bounce as link-flapping among the overview's findings.
#[test]
fn the_demo_shows_its_flapping_link_as_link_flapping() {
    let scratch = temp_dir();
    let script = format!(
        "cd {dir} && TMPDIR={dir} {bin} demo; sleep 60",
        dir = scratch.path().display(),
        bin = ibscope_bin().display()
    );
    let tmux = common::tmux::Tmux::start("ibscope-demo-flap", &script);
    let long = std::time::Duration::from_secs(90);
    let screen = tmux.wait_for(&["went down 2 times within 10m"], long);
    assert!(screen.contains("leaf-r7-001"), "{screen}");
    tmux.keys("6");
    tmux.wait_for(&["link down", "leaf-r7-001:MQM9700/U1[2]"], long);
    tmux.keys("q");
}
