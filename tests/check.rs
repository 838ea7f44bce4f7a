//! `ibscope check` and `ibscope links` on generated fabrics: clean, and with degraded links
//! (topo::gen writes the override on both ends) plus injected counters.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use common::*;
use ibscope_topo::gen::{self, Degraded, FatTreeSpec};
use serde_json::Value;

/// Write a 2-level radix-8 fat tree with 8 hosts; returns the file and a map from ibsim
/// node id ("L0001") to NodeDescription (what ibscope names nodes by).
fn generate(dir: &std::path::Path, degraded: Vec<Degraded>) -> (PathBuf, HashMap<String, String>) {
    let mut spec = FatTreeSpec::new(2, 8, 8);
    spec.options.degraded = degraded;
    let text = gen::fat_tree(&spec).unwrap();
    let mut names = HashMap::new();
    for line in text.lines() {
        if !(line.starts_with("Switch") || line.starts_with("Hca")) {
            continue;
        }
        let quoted: Vec<&str> = line.split('"').collect();
        if quoted.len() >= 4 {
            names.insert(quoted[1].to_string(), quoted[3].to_string());
        }
    }
    let path = dir.join("ft.topo");
    std::fs::write(&path, text).unwrap();
    (path, names)
}

fn check_json(sim: &Sim, args: &[&str], code: i32) -> Value {
    let mut all = vec!["check", "--json"];
    all.extend_from_slice(args);
    let out = assert_exit(&ibscope(sim, &all), code);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}):\n{out}"))
}

/// (kind, node, port, counter) of every finding.
fn finding_set(doc: &Value) -> BTreeSet<(String, String, u64, String)> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_string(),
                f["at"]["node"].as_str().unwrap_or("").to_string(),
                f["at"]["port"].as_u64().unwrap_or(0),
                f["counter"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

#[test]
fn clean_fabric_is_healthy() {
    let dir = temp_dir();
    let (path, _) = generate(dir.path(), Vec::new());
    let sim = sim_with(SimOptions::new(&path));
    let doc = check_json(&sim, &[], 0);
    assert_eq!(doc["healthy"], true, "{doc}");
    assert_eq!(doc["findings"], serde_json::json!([]));
    assert_eq!(doc["nodes"], 11);
    // 3 switches x 8 ports + 8 hosts.
    assert_eq!(doc["ports_sampled"], 32);
    let text = assert_success(&ibscope(&sim, &["check"]));
    assert!(text.starts_with("healthy:"), "{text}");
    assert_exit(&ibscope(&sim, &["links", "--degraded"]), 0);
}

#[test]
fn flags_exactly_the_degraded_links_and_injected_ports() {
    let dir = temp_dir();
    let degraded = vec![
        Degraded {
            node: "L0001".into(),
            port: 5,
            rate: "1xHDR".into(),
        },
        Degraded {
            node: "L0002".into(),
            port: 2,
            rate: "1xHDR".into(),
        },
    ];
    let (path, names) = generate(dir.path(), degraded);
    let sim = sim_with(SimOptions::new(&path));
    let name = |id: &str| names[id].clone();
    sim.set_counter("L0001", 1, "SymbolErrorCounter", 17)
        .unwrap();
    sim.set_counter("S0001", 6, "LinkDownedCounter", 2).unwrap();
    sim.set_counter("H00003", 1, "PortRcvErrors", 65535)
        .unwrap();
    // Data counters are not errors: not a finding.
    sim.set_counter("L0002", 7, "PortCountersExtended.PortXmitData", 1 << 40)
        .unwrap();

    let doc = check_json(&sim, &[], 1);
    let got = finding_set(&doc);
    let s = |x: &str| x.to_string();
    // A degraded link is named from its graph-order end: accept either end.
    let mut want_counters = BTreeSet::new();
    want_counters.insert((
        s("counter-above-threshold"),
        name("L0001"),
        1,
        s("SymbolErrorCounter"),
    ));
    want_counters.insert((
        s("counter-above-threshold"),
        name("S0001"),
        6,
        s("LinkDownedCounter"),
    ));
    want_counters.insert((
        s("counter-above-threshold"),
        name("H00003"),
        1,
        s("PortRcvErrors"),
    ));
    want_counters.insert((
        s("counter-saturated"),
        name("H00003"),
        1,
        s("PortRcvErrors"),
    ));
    let counters: BTreeSet<_> = got
        .iter()
        .filter(|f| f.0 != "degraded-link")
        .cloned()
        .collect();
    assert_eq!(counters, want_counters, "{doc:#}");

    let links: Vec<&Value> = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "degraded-link")
        .collect();
    assert_eq!(links.len(), 2, "{doc:#}");
    let ends = |f: &Value| {
        let mut v = vec![
            (
                f["at"]["node"].as_str().unwrap().to_string(),
                f["at"]["port"].as_u64().unwrap(),
            ),
            (
                f["remote"]["node"].as_str().unwrap().to_string(),
                f["remote"]["port"].as_u64().unwrap(),
            ),
        ];
        v.sort();
        v
    };
    let mut got_links: Vec<_> = links.iter().map(|f| ends(f)).collect();
    got_links.sort();
    let mut want_links = vec![
        {
            let mut v = vec![(name("L0001"), 5), (name("S0001"), 1)];
            v.sort();
            v
        },
        {
            let mut v = vec![(name("L0002"), 2), (name("H00006"), 1)];
            v.sort();
            v
        },
    ];
    want_links.sort();
    assert_eq!(got_links, want_links);
    for f in &links {
        let m = f["message"].as_str().unwrap();
        assert!(m.contains("1xHDR below fabric norm 4xHDR"), "{m}");
    }
    // Every finding names a GUID.
    for f in doc["findings"].as_array().unwrap() {
        assert!(f["at"]["node_guid"].as_u64().is_some(), "{f}");
    }

    // A threshold file above 17 drops the SymbolErrorCounter finding.
    let conf = dir.path().join("thresholds.conf");
    std::fs::write(&conf, "# ibqueryerrors style\nSymbolErrorCounter=20\n").unwrap();
    let doc = check_json(&sim, &["--thresholds", conf.to_str().unwrap()], 1);
    assert!(!finding_set(&doc)
        .iter()
        .any(|f| f.3 == "SymbolErrorCounter"));
    // A bad file: exit 2 naming file and line.
    std::fs::write(&conf, "SymbolErrorCounter=20\nNoSuchCounter=1\n").unwrap();
    let out = ibscope(&sim, &["check", "--thresholds", conf.to_str().unwrap()]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains(&format!("{}:2:", conf.display())),
        "{}",
        stderr(&out)
    );

    // links --degraded lists the same two links.
    let out = assert_exit(&ibscope(&sim, &["links", "--degraded", "--json"]), 1);
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["links"].as_array().unwrap().len(), 2);
    assert_eq!(report["norms"]["ca_switch"], "4xHDR");

    // Offline: the same degraded links from a saved snapshot, no counters.
    let snap = dir.path().join("fabric.json");
    assert_success(&ibscope(
        &sim,
        &["discover", "--format", "json", "-o", snap.to_str().unwrap()],
    ));
    let out = assert_exit(
        &ibscope_plain(
            &["--topology", snap.to_str().unwrap(), "check", "--json"],
            &[],
        ),
        1,
    );
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["counters_checked"], false);
    let kinds: BTreeSet<String> = finding_set(&doc).into_iter().map(|f| f.0).collect();
    assert_eq!(kinds, BTreeSet::from([s("degraded-link")]));
    assert_eq!(doc["findings"].as_array().unwrap().len(), 2);
}

#[test]
fn no_sm_means_no_master_and_ports_not_active() {
    // Without an SM every linked port trains (LinkUp) but stays Init, and nothing has a LID.
    // (ReLink after Unlink restores Active in ibsim 0.10, so this is the way to get Init.)
    let sim = sim_no_sm("net.2sw2path4hca");
    let doc = check_json(&sim, &[], 1);
    let got = finding_set(&doc);
    let not_active: BTreeSet<(String, u64)> = got
        .iter()
        .filter(|f| f.0 == "port-not-active")
        .map(|f| (f.1.clone(), f.2))
        .collect();
    // 6 links, both ends.
    assert_eq!(not_active.len(), 12, "{doc:#}");
    assert!(not_active.contains(&("Switch2".to_string(), 2)));
    assert!(not_active.contains(&("Hca4".to_string(), 1)));
    assert!(got.iter().any(|f| f.0 == "no-master-sm"), "{doc:#}");
    let remote = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "port-not-active" && f["at"]["node"] == "Hca4")
        .unwrap();
    assert_eq!(remote["remote"]["node"], "Switch2");
    assert_eq!(remote["remote"]["port"], 2);
}
