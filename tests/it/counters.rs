//! `ibscope counters` against perfquery on the simulated fabric, and `--reset`.
//!
//! Units: ibscope reports PortXmitData/PortRcvData in bytes; perfquery prints the wire
//! value, 4-octet words. The comparisons divide ibscope's value by 4.
//!
//! The simulator counts the MADs the tools themselves send (data and packet counters move
//! between two reads), so every port is read by perfquery before and after ibscope:
//! `before <= ibscope <= after`, which is equality for every counter nothing moved.

use crate::common;

use std::collections::BTreeMap;

use common::*;
use ibscope_topo::counters;
use serde_json::Value;

/// A `Field:....value` line of perfquery output.
fn field(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?.strip_prefix(':')?;
        let v = rest.trim_start_matches('.').trim();
        match v.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => v.parse().ok(),
        }
    })
}

/// The "(CapMask: 0x1300 CapMask2: 0x0000000)" of perfquery's header line.
fn perfquery_masks(text: &str) -> (u64, u64) {
    let hex = |key: &str| {
        let rest = text
            .split(key)
            .nth(1)
            .unwrap_or_else(|| panic!("no {key} in {text}"));
        let digits: String = rest
            .trim_start()
            .trim_start_matches("0x")
            .chars()
            .take_while(|c| c.is_ascii_hexdigit())
            .collect();
        u64::from_str_radix(&digits, 16).unwrap()
    };
    (hex("CapMask:"), hex("CapMask2:"))
}

/// perfquery (and perfquery -x) of one port: (counters, extended counters).
fn perfquery(sim: &Sim, lid: u64, port: u64) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let (l, p) = (lid.to_string(), port.to_string());
    let basic = assert_success(&reference(sim, "perfquery", &[&l, &p]));
    let ext = assert_success(&reference(sim, "perfquery", &["-x", &l, &p]));
    let pick = |text: &str, names: &[&str]| {
        names
            .iter()
            .map(|n| {
                let v = field(text, n).unwrap_or_else(|| panic!("no {n} in:\n{text}"));
                (n.to_string(), v)
            })
            .collect::<BTreeMap<_, _>>()
    };
    let extended = counters::EXTENDED_COUNTER_NAMES;
    (
        pick(&basic, &counters::PORT_COUNTER_NAMES),
        pick(&ext, &extended),
    )
}

fn counters_json(sim: &Sim, args: &[&str]) -> Value {
    let mut all = vec!["counters", "--format", "json", "--max-outstanding", "64"];
    all.extend_from_slice(args);
    let out = assert_success(&ibscope(sim, &all));
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
}

/// (node description, port) -> the port's JSON object.
fn by_port(doc: &Value) -> BTreeMap<(String, u64), Value> {
    doc["ports"]
        .as_array()
        .expect("ports array")
        .iter()
        .map(|p| {
            (
                (
                    p["node"].as_str().unwrap().to_string(),
                    p["port"].as_u64().unwrap(),
                ),
                p.clone(),
            )
        })
        .collect()
}

/// A counter of ibscope's JSON: a number, or `{"value": N, "saturated": true}` for one that
/// stopped at its maximum. (value, saturated).
fn reading(v: &Value) -> Option<(u64, bool)> {
    match v {
        Value::Object(o) => Some((o.get("value")?.as_u64()?, o.get("saturated")?.as_bool()?)),
        other => Some((other.as_u64()?, false)),
    }
}

fn ours(p: &Value, section: &str, name: &str) -> u64 {
    let (v, _) =
        reading(&p[section][name]).unwrap_or_else(|| panic!("{section}.{name} missing in {p}"));
    // ibscope reports bytes; perfquery prints 4-octet words.
    if counters::is_data_counter(name) {
        assert_eq!(v % 4, 0, "{name} in bytes must be a multiple of 4");
        v / 4
    } else {
        v
    }
}

#[test]
fn counters_equal_perfquery_on_every_port() {
    let sim = sim("net.2sw2path4hca");
    // Injected values on several ports, PortCounters and PortCountersExtended.
    let injected: &[(&str, u8, &str, u64)] = &[
        ("Switch1", 1, "SymbolErrorCounter", 17),
        ("Switch1", 1, "PortRcvErrors", 5),
        ("Switch2", 3, "LinkDownedCounter", 3),
        ("Switch2", 3, "PortXmitDiscards", 42),
        (
            "Switch2",
            3,
            "PortCountersExtended.PortXmitData",
            123_456_789_012,
        ),
        ("Hca2", 1, "SymbolErrorCounter", 65535),
        ("Hca2", 1, "PortCountersExtended.PortRcvPkts", 9_000_000_000),
        ("Hca3", 1, "VL15Dropped", 7),
        ("Hca3", 1, "PortXmitData", 4_294_967_295),
    ];
    for (node, port, f, v) in injected {
        sim.set_counter(node, *port, f, *v).unwrap();
    }

    // The port list and LIDs first.
    let first = counters_json(&sim, &[]);
    assert_eq!(first["data_unit"], "bytes");
    let ports = by_port(&first);
    // 2 switches x ports 1..8 (no EnhancedPort0 in ibsim) + 4 single-port HCAs.
    assert_eq!(ports.len(), 20, "{:?}", ports.keys());
    let targets: Vec<((String, u64), u64)> = ports
        .iter()
        .map(|(k, p)| (k.clone(), p["lid"].as_u64().unwrap()))
        .collect();

    let before: Vec<_> = targets
        .iter()
        .map(|((_, port), lid)| perfquery(&sim, *lid, *port))
        .collect();
    let doc = counters_json(&sim, &[]);
    let after: Vec<_> = targets
        .iter()
        .map(|((_, port), lid)| perfquery(&sim, *lid, *port))
        .collect();
    let mid = by_port(&doc);
    let extended = counters::EXTENDED_COUNTER_NAMES;

    for (i, (key, lid)) in targets.iter().enumerate() {
        let p = &mid[key];
        assert!(p["errors"].as_array().unwrap().is_empty(), "{p}");
        if i < 3 {
            // Both capability masks as perfquery -x prints them. ibsim's CapabilityMask2 is
            // 0: no 64-bit error counters in PortCountersExtended, and none in ours.
            let port = key.1.to_string();
            let x = assert_success(&reference(
                &sim,
                "perfquery",
                &["-x", &lid.to_string(), &port],
            ));
            let (mask, mask2) = perfquery_masks(&x);
            assert_eq!(p["capability_mask"].as_u64(), Some(mask), "{key:?}");
            assert_eq!(p["capability_mask2"].as_u64(), Some(mask2), "{key:?}");
            assert_eq!(mask2, 0);
            assert!(p["extended"].get("SymbolErrorCounter").is_none(), "{p}");
        }
        for (section, names, b, a) in [
            (
                "counters",
                &counters::PORT_COUNTER_NAMES[..],
                &before[i].0,
                &after[i].0,
            ),
            ("extended", &extended[..], &before[i].1, &after[i].1),
        ] {
            for n in names {
                let v = ours(p, section, n);
                assert!(
                    b[*n] <= v && v <= a[*n],
                    "{key:?} {section}.{n}: perfquery {} then {}, ibscope {v}",
                    b[*n],
                    a[*n]
                );
            }
        }
    }

    // The injected values themselves, exactly.
    for (node, port, f, v) in injected {
        let p = &mid[&(node.to_string(), u64::from(*port))];
        let (section, name) = match f.strip_prefix("PortCountersExtended.") {
            Some(n) => ("extended", n),
            None => ("counters", *f),
        };
        if counters::is_data_counter(name) || name.ends_with("Pkts") {
            // Traffic counters keep counting our own MADs.
            assert!(ours(p, section, name) >= *v, "{node}[{port}] {f}");
        } else {
            assert_eq!(ours(p, section, name), *v, "{node}[{port}] {f}");
        }
    }
    // Saturated 32-bit/16-bit counters are flagged, and not given as plain numbers.
    let hca2 = &mid[&("Hca2".to_string(), 1)];
    assert_eq!(hca2["saturated"], serde_json::json!(["SymbolErrorCounter"]));
    assert_eq!(
        hca2["counters"]["SymbolErrorCounter"],
        serde_json::json!({"value": 65535, "saturated": true})
    );
    // The table says so too.
    let table = assert_success(&ibscope(&sim, &["counters", "Hca2"]));
    assert!(table.contains("SymbolErrorCounter≥65535"), "{table}");
    let hca3 = &mid[&("Hca3".to_string(), 1)];
    assert!(
        hca3["saturated"]
            .as_array()
            .unwrap()
            .contains(&Value::from("PortXmitData")),
        "{hca3}"
    );
}

/// perfquery -E / -D of one port: every field of PortRcvErrorDetails then
/// PortXmitDiscardDetails, by perfquery's names.
fn perfquery_details(sim: &Sim, lid: u64, port: u64) -> BTreeMap<String, u64> {
    use ibscope_mad::attr::perf_attrs::{RCV_ERROR_DETAIL_COUNTERS, XMIT_DISCARD_DETAIL_COUNTERS};
    let (l, p) = (lid.to_string(), port.to_string());
    let mut out = BTreeMap::new();
    for (flag, names) in [
        ("-E", &RCV_ERROR_DETAIL_COUNTERS[..]),
        ("-D", &XMIT_DISCARD_DETAIL_COUNTERS[..]),
    ] {
        let text = assert_success(&reference(sim, "perfquery", &[flag, &l, &p]));
        for n in names {
            let v = field(&text, n).unwrap_or_else(|| panic!("no {n} in:\n{text}"));
            out.insert(n.to_string(), v);
        }
    }
    out
}

/// `counters --details`: PortRcvErrorDetails and PortXmitDiscardDetails of every port equal
/// perfquery -E and -D on the same port, field by field; a 16-bit one at 65535 is marked
/// saturated. ibsim implements no PortExtendedSpeedsCounters: none is asked (a request
/// would reach OpenSM, attached at Switch1, which would not survive it).
#[test]
fn details_equal_perfquery_on_every_port() {
    let sim = sim("net.2sw2path4hca");
    let injected: &[(&str, u8, &str, u64)] = &[
        (
            "Switch1",
            1,
            "PortRcvErrorDetails.PortMalformedPacketErrors",
            5,
        ),
        ("Switch1", 1, "PortRcvErrorDetails.PortVLMappingErrors", 6),
        (
            "Switch2",
            3,
            "PortXmitDiscardDetails.PortInactiveDiscards",
            9,
        ),
        (
            "Switch2",
            3,
            "PortXmitDiscardDetails.PortSwHOQLifetimeLimitDiscards",
            11,
        ),
        ("Hca2", 1, "PortRcvErrorDetails.PortLoopingErrors", 65535),
        (
            "Hca3",
            1,
            "PortXmitDiscardDetails.PortNeighborMTUDiscards",
            13,
        ),
    ];
    for (node, port, f, v) in injected {
        sim.set_counter(node, *port, f, *v).unwrap();
    }
    let out = ibscope(
        &sim,
        &[
            "counters",
            "--details",
            "--format",
            "json",
            "--max-outstanding",
            "64",
        ],
    );
    let doc: Value = serde_json::from_str(&assert_success(&out)).unwrap();
    assert!(stderr(&out).contains("PortExtendedSpeedsCounters not read"));
    let ports = by_port(&doc);
    assert_eq!(ports.len(), 20);
    let mut nonzero = 0;
    for ((node, port), p) in &ports {
        let lid = p["lid"].as_u64().unwrap();
        let theirs = perfquery_details(&sim, lid, *port);
        let details = &p["details"];
        assert_eq!(
            details
                .as_object()
                .map(|d| d.keys().cloned().collect::<Vec<_>>()),
            Some(vec![
                "PortRcvErrorDetails".to_string(),
                "PortXmitDiscardDetails".to_string()
            ]),
            "{node}[{port}]: {p}"
        );
        for (name, value) in &theirs {
            let section = if details["PortRcvErrorDetails"].get(name).is_some() {
                "PortRcvErrorDetails"
            } else {
                "PortXmitDiscardDetails"
            };
            let (v, saturated) = reading(&details[section][name])
                .unwrap_or_else(|| panic!("{node}[{port}] {section}.{name}: {p}"));
            assert_eq!(v, *value, "{node}[{port}] {name}");
            assert_eq!(saturated, *value == 65535, "{node}[{port}] {name}");
            nonzero += usize::from(*value > 0);
        }
    }
    assert_eq!(nonzero, injected.len());
    // The table lists each port's breakdowns under it.
    let table = assert_success(&ibscope(&sim, &["counters", "Hca2", "--details"]));
    assert!(
        table.contains("    PortRcvErrorDetails: PortLoopingErrors≥65535"),
        "{table}"
    );
    assert!(
        table.contains("    PortXmitDiscardDetails: all 0"),
        "{table}"
    );
    // CSV: a column per detail counter.
    let csv = assert_success(&ibscope(
        &sim,
        &["counters", "Hca3", "--details", "--format", "csv"],
    ));
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = header
        .iter()
        .position(|c| *c == "PortXmitDiscardDetails.PortNeighborMTUDiscards")
        .unwrap();
    assert_eq!(row[col], "13");
    // Prometheus: the breakdown families, valid for promtool.
    let prom = assert_success(&ibscope(
        &sim,
        &["counters", "--details", "--format", "prom"],
    ));
    // Every series starts with its fabric's label, then the node.
    assert!(
        prom.lines().any(
            |l| l.starts_with("ibscope_port_malformed_pkt_errors_total{fabric=")
                && l.contains(",node=\"Switch1\",")
        ),
        "{prom}"
    );
    let checked = promtool_check(&prom);
    assert!(checked.passed(), "promtool: {}", checked.report);
    // OpenSM is still there: a discovery still finds a master SM.
    assert_success(&ibscope(&sim, &["sm"]));
}

#[test]
fn node_selection_by_name_lid_and_guid() {
    let sim = sim("net.2sw2path4hca");
    let all = by_port(&counters_json(&sim, &[]));
    let sw2 = &all[&("Switch2".to_string(), 3)];
    let lid = sw2["lid"].as_u64().unwrap().to_string();
    let guid = format!("{:#x}", json_guid(&sw2["node_guid"]).unwrap());
    for sel in [&["Switch2", "3"][..], &[&lid, "3"][..], &[&guid, "3"][..]] {
        let one = by_port(&counters_json(&sim, sel));
        assert_eq!(
            one.keys().cloned().collect::<Vec<_>>(),
            vec![("Switch2".to_string(), 3)],
            "{sel:?}"
        );
    }
    let whole = by_port(&counters_json(&sim, &["Switch2"]));
    assert_eq!(whole.len(), 8);
    // A CA's LID names its port.
    let hca = &all[&("Hca4".to_string(), 1)];
    let hca_lid = hca["lid"].as_u64().unwrap().to_string();
    assert_eq!(by_port(&counters_json(&sim, &[&hca_lid])).len(), 1);
    let bad = ibscope(&sim, &["counters", "NoSuchNode"]);
    assert_exit(&bad, 2);
    assert!(stderr(&bad).contains("no node"), "{}", stderr(&bad));
}

#[test]
fn reset_clears_only_the_named_port() {
    let sim = sim("net.2sw2path4hca");
    for (node, port) in [("Switch2", 3), ("Switch1", 3), ("Switch2", 1)] {
        sim.set_counter(node, port, "SymbolErrorCounter", 17)
            .unwrap();
        sim.set_counter(node, port, "PortCountersExtended.PortXmitData", 1 << 40)
            .unwrap();
        sim.set_counter(node, port, "PortRcvErrorDetails.PortVLMappingErrors", 5)
            .unwrap();
        sim.set_counter(node, port, "PortXmitDiscardDetails.PortInactiveDiscards", 6)
            .unwrap();
    }
    let all = by_port(&counters_json(&sim, &[]));
    let lid = |n: &str| all[&(n.to_string(), 1)]["lid"].as_u64().unwrap();
    let (sw1, sw2) = (lid("Switch1"), lid("Switch2"));

    let out = ibscope(&sim, &["counters", "Switch2", "3", "--reset"]);
    assert_success(&out);
    assert!(
        stderr(&out).contains("1 of 1 ports reset"),
        "{}",
        stderr(&out)
    );

    let (pc, ext) = perfquery(&sim, sw2, 3);
    assert_eq!(pc["SymbolErrorCounter"], 0);
    assert!(ext["PortXmitData"] < 1 << 40, "extended cleared too");
    // The breakdowns too, as perfquery -E / -D read them.
    let details = perfquery_details(&sim, sw2, 3);
    assert!(details.values().all(|v| *v == 0), "{details:?}");
    // The neighbour on the same link and another port of the same switch keep theirs.
    for (lid, port) in [(sw1, 3), (sw2, 1)] {
        let (pc, ext) = perfquery(&sim, lid, port);
        assert_eq!(pc["SymbolErrorCounter"], 17, "lid {lid} port {port}");
        assert!(ext["PortXmitData"] >= 1 << 40, "lid {lid} port {port}");
        let details = perfquery_details(&sim, lid, port);
        assert_eq!(details["PortVLMappingErrors"], 5, "lid {lid} port {port}");
        assert_eq!(details["PortInactiveDiscards"], 6, "lid {lid} port {port}");
    }
    // Without a port (on a switch) --reset refuses; --all clears the whole switch.
    assert_exit(&ibscope(&sim, &["counters", "Switch2", "--reset"]), 2);
    assert_success(&ibscope(&sim, &["counters", "Switch2", "--reset", "--all"]));
    let (pc, _) = perfquery(&sim, sw2, 1);
    assert_eq!(pc["SymbolErrorCounter"], 0);
    let (pc, _) = perfquery(&sim, sw1, 3);
    assert_eq!(pc["SymbolErrorCounter"], 17);
}

#[test]
fn interval_reports_rates_and_resets() {
    let sim = sim("net.2sw2path4hca");
    sim.set_counter("Switch1", 1, "SymbolErrorCounter", 100)
        .unwrap();
    // Samples at about t0, t0+2 s and t0+4 s (t0: after discovery, well under 1 s here);
    // the counter is lowered at about t0+3 s: the second interval sees it go backwards.
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(3200));
            sim.set_counter("Switch1", 1, "SymbolErrorCounter", 1)
                .unwrap();
        });
        assert_success(&ibscope(
            &sim,
            &[
                "counters",
                "Switch1",
                "1",
                "--format",
                "json",
                "--interval",
                "2",
                "--count",
                "2",
            ],
        ))
    });
    let docs: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(docs.len(), 2, "{out}");
    // Each interval line says how long its own sweep took and what it sent (benchmarks
    // read this, not the gap between lines).
    for doc in &docs {
        assert!(doc["duration_ms"].is_u64(), "{doc}");
        assert!(doc["mads_sent"].as_u64().unwrap() > 0, "{doc}");
    }
    let sym = |doc: &Value| {
        doc["ports"][0]["counters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "SymbolErrorCounter")
            .unwrap()
            .clone()
    };
    let first = sym(&docs[0]);
    assert_eq!(
        (first["delta"].clone(), first["reset"].clone()),
        (0.into(), false.into())
    );
    assert_eq!(first["per_second"], 0.0);
    let second = sym(&docs[1]);
    assert_eq!(second["reset"], true, "{second}");
    assert!(second["delta"].is_null() && second["per_second"].is_null());
    // Data counters move (our own MADs cross the port): a positive byte rate.
    let data = docs[0]["ports"][0]["counters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "PortRcvData")
        .unwrap()
        .clone();
    assert!(data["per_second"].as_f64().unwrap() >= 0.0);
    let csv = assert_success(&ibscope(&sim, &["counters", "--format", "csv"]));
    assert_eq!(csv.lines().count(), 21, "{csv}");
    let prom = assert_success(&ibscope(&sim, &["counters", "--format", "prom"]));
    assert!(
        prom.contains("ibscope_port_symbol_error_total{fabric=\"ibsim0:0\",node=\"Switch1\""),
        "{prom}"
    );
    // The exposition is valid for promtool, the Prometheus project's own checker.
    let checked = promtool_check(&prom);
    assert!(
        checked.passed(),
        "promtool check metrics failed: {}",
        checked.report
    );
}

/// `counters --interval --journal FILE` records every LinkDowned rise it sees between two
/// samples, as serve does: `ibscope events` reads it back.
#[test]
fn interval_journals_link_downed_rises() {
    let sim = sim("net.2sw2path4hca");
    let dir = temp_dir();
    let journal = dir.path().join("events.jsonl");
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(1500));
            sim.set_counter("Switch1", 1, "LinkDownedCounter", 3)
                .unwrap();
        });
        assert_success(&ibscope(
            &sim,
            &[
                "counters",
                "Switch1",
                "1",
                "--interval",
                "1",
                "--count",
                "3",
                "--journal",
                journal.to_str().unwrap(),
            ],
        ));
    });
    let out = assert_success(&ibscope_plain(
        &["events", "--journal", journal.to_str().unwrap(), "--json"],
        &[],
    ));
    let doc: Value = serde_json::from_str(&out).unwrap();
    let events = doc["events"].as_array().unwrap();
    assert_eq!(events.len(), 1, "{doc}");
    assert_eq!(events[0]["kind"], "link-downed");
    assert_eq!(events[0]["count"], 3);
    assert_eq!(events[0]["a"]["port"], 1);
}
