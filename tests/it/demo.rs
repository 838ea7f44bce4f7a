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
    assert_eq!(
        (&rail_down["host"], &rail_down["rail"]),
        (&"gpu-0006".into(), &2.into())
    );
    // The flapping link's LinkDowned finding says what the count is: its flaps.
    let downed = findings
        .iter()
        .find(|f| f["counter"] == "LinkDownedCounter")
        .expect("LinkDowned finding");
    assert!(
        downed["message"]
            .as_str()
            .unwrap_or("")
            .contains("flapped 7 times"),
        "{downed}"
    );
}

/// Each planted fault's node as the fabric names it: the NodeDescription the demo's
/// topology file gives its ibsim node id (`Switch 18 "R1L001" # "MF0;leaf-r1-001:..."`).
fn description_of(id: &str) -> String {
    let head = format!("\"{id}\"");
    let line = ibscope::cmd::demo::DEMO_TOPOLOGY
        .lines()
        .find(|l| (l.starts_with("Switch") || l.starts_with("Hca")) && l.contains(&head))
        .unwrap_or_else(|| panic!("{id} is not a node of the demo fabric"));
    line.split('"').nth(3).expect("a description").to_string()
}

/// `demo --once` names every fault the demo plants, as the README says: a line per fault,
/// with the words that say what is wrong and where.
#[test]
fn demo_once_names_every_planted_fault() {
    use ibscope::cmd::demo::faults;
    let out = ibscope_plain(&["demo", "--once"], &[]);
    let text = assert_exit(&out, 1);
    // A port as the finding names it: its node's name, a GUID, its number.
    let port = |(id, port): (&str, u8)| {
        vec![
            format!("\"{}\" (0x", description_of(id)),
            format!(") port {port} (lid "),
        ]
    };
    let with = |mut needles: Vec<String>, what: String| {
        needles.push(what);
        needles
    };
    let wanted = [
        (
            "degraded uplink",
            with(
                port(faults::DEGRADED_UPLINK),
                "1xHDR below fabric norm 4xHDR".into(),
            ),
        ),
        (
            "symbol errors",
            with(
                port((faults::SYMBOL_ERRORS.0, faults::SYMBOL_ERRORS.1)),
                format!("SymbolErrorCounter = {}", faults::SYMBOL_ERRORS.2),
            ),
        ),
        (
            "flapping link",
            with(
                port((faults::FLAPPING.0, faults::FLAPPING.1)),
                format!("the link flapped {} times", faults::FLAPPING.2),
            ),
        ),
        (
            "HCA on another rail's leaf",
            vec![
                format!(
                    "[rail-misaligned] {} rail {}: ",
                    faults::CROSS_RAIL.0,
                    faults::CROSS_RAIL.1
                ),
                "cabled to a leaf of rail 6".into(),
            ],
        ),
        (
            "rail down",
            vec![
                format!(
                    "[rail-down] {} rail {}: ",
                    faults::RAIL_DOWN.0,
                    faults::RAIL_DOWN.1
                ),
                "is not in the fabric".into(),
            ],
        ),
    ];
    for (fault, needles) in &wanted {
        assert!(
            text.lines()
                .any(|l| needles.iter().all(|n| l.contains(n.as_str()))),
            "{fault}: no line with all of {needles:?} in\n{text}"
        );
    }
    assert!(text.contains("5 finding(s)"), "{text}");
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

/// What ibnetdiscover reads of each node: its GUID (as ibscope writes one) and LID, by
/// NodeDescription (a switch's LID on its header line, a CA's on its port's line).
fn node_facts(ibnetdiscover: &str) -> std::collections::HashMap<String, (String, u16)> {
    let lid_after = |text: &str| -> Option<u16> {
        let rest = &text[text.find("lid ")? + 4..];
        rest.split_whitespace().next()?.parse().ok()
    };
    let mut facts = std::collections::HashMap::new();
    let mut lines = ibnetdiscover.lines().peekable();
    while let Some(line) = lines.next() {
        let (is_switch, is_ca) = (line.starts_with("Switch"), line.starts_with("Ca"));
        if !(is_switch || is_ca) {
            continue;
        }
        let quoted: Vec<&str> = line.split('"').collect();
        let (id, desc) = (quoted[1], quoted[3]);
        let guid = u64::from_str_radix(&id[2..], 16).expect("S-/H- and a hex GUID");
        let lid = if is_switch {
            lid_after(line)
        } else {
            lines
                .peek()
                .and_then(|port| lid_after(port.split('#').nth(1)?))
        };
        facts.insert(
            desc.to_string(),
            (format!("{guid:#018x}"), lid.expect("a LID")),
        );
    }
    facts
}

/// The one finding format on the demo fabric's real findings (its planted faults): each
/// line `check` prints written out from the fabric's facts, the names and cabling of its
/// topology file, the GUIDs and LIDs ibnetdiscover reads on the same simulated fabric, the
/// planted rates and counters; JSON's `message` is the same words.
#[test]
fn check_words_the_demo_fabrics_findings_in_the_one_format() {
    let sim = sim("gpu-cluster.topo");
    ibscope::cmd::demo::plant_counters(&sim).unwrap();
    let facts = node_facts(&assert_success(&reference(&sim, "ibnetdiscover", &[])));
    let port = |desc: &str, port: u8| {
        let (guid, lid) = &facts[desc];
        format!("\"{desc}\" ({guid}) port {port} (lid {lid})")
    };
    let leaf = |rail: u8| format!("MF0;leaf-r{rail}-001:MQM9700/U1");
    let mut expected = vec![
        // R1L001 port 9 to S0001 port 2, both ends at 1xHDR (the file's rate comments).
        format!(
            "[degraded-link] {} <-> {}: 1xHDR below fabric norm 4xHDR",
            port("MF0;spine-0001:MQM8790/U1", 2),
            port(&leaf(1), 9)
        ),
        // G0003R5 on R6L001 port 17.
        format!(
            "[rail-misaligned] gpu-0003 rail 5: {} <-> {}: cabled to a leaf of rail 6",
            port("gpu-0003 mlx5_5", 1),
            port(&leaf(6), 17)
        ),
        // No G0006R2: its leaf-mates G000nR2 are on R2L001 port n.
        format!(
            "[rail-down] gpu-0006 rail 2: {}: Down: its HCA (mlx5_2) is not in the fabric (7 \
             of 8 rails up); this port, where its leaf-mates put it, has no link",
            port(&leaf(2), 6)
        ),
        format!(
            "[counter-above-threshold] gpu-0004 rail 4: {} <-> {}: SymbolErrorCounter = 1234 \
             (threshold 0)",
            port(&leaf(4), 4),
            port("gpu-0004 mlx5_4", 1)
        ),
        format!(
            "[counter-above-threshold] gpu-0002 rail 7: {} <-> {}: LinkDownedCounter = 7 \
             (threshold 0): the link flapped 7 times since its counters were cleared",
            port(&leaf(7), 2),
            port("gpu-0002 mlx5_7", 1)
        ),
    ];
    let text = assert_exit(&ibscope(&sim, &["check"]), 1);
    let mut lines: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with('['))
        .map(str::to_string)
        .collect();
    lines.sort();
    expected.sort();
    assert_eq!(lines, expected, "{text}");
    // JSON's message: the words after where the finding is.
    let json = assert_exit(&ibscope(&sim, &["check", "--json"]), 1);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    for f in doc["findings"].as_array().unwrap() {
        let message = f["message"].as_str().unwrap();
        assert!(
            lines.iter().any(|l| l.ends_with(&format!(": {message}"))),
            "{message:?} is not the words of a line of\n{text}"
        );
    }
}
