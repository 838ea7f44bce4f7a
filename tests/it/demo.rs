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
        ("degraded-link", "leaf-0001", 5),
        ("counter-above-threshold", "leaf-0002", 3),
        ("counter-above-threshold", "leaf-0003", 7),
    ];
    for (kind, node, port) in expect {
        assert!(
            found
                .iter()
                .any(|(k, n, p)| k == kind && n.contains(node) && *p == port),
            "missing {kind} at {node}[{port}] in {found:?}"
        );
    }
    assert_eq!(found.len(), 3, "only the planted faults: {found:?}");
    let symbol = findings
        .iter()
        .find(|f| f["counter"] == "SymbolErrorCounter")
        .expect("symbol error finding");
    assert_eq!(symbol["value"], 1234);
    // The degraded link names its far end: the spine.
    let degraded = &findings
        .iter()
        .find(|f| f["kind"] == "degraded-link")
        .expect("degraded link")["remote"];
    assert!(degraded["node"]
        .as_str()
        .unwrap_or("")
        .contains("spine-0001"));
}
