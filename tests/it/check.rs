//! `ibscope check` and `ibscope links` on generated fabrics: clean, and with degraded links
//! (topo::gen writes the override on both ends) plus injected counters.

use crate::common;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use common::*;
use ibscope_topo::gen::{self, Degraded, FatTreeSpec};
use serde_json::Value;

/// Write a 2-level radix-8 fat tree with 8 hosts; returns the file and a map from ibsim
/// node id ("L0001") to NodeDescription (what ibscope names nodes by).
fn generate(dir: &std::path::Path, degraded: Vec<Degraded>) -> (PathBuf, HashMap<String, String>) {
    generate_hosts(dir, 8, degraded)
}

/// A 2-level radix-8 fat tree with `hosts` hosts (16: leaves L0001-L0004, spines S0001-S0002).
fn generate_hosts(
    dir: &std::path::Path,
    hosts: usize,
    degraded: Vec<Degraded>,
) -> (PathBuf, HashMap<String, String>) {
    let mut spec = FatTreeSpec::new(2, 8, hosts);
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
    assert!(
        text.contains("32 ports' counters (3 switches screened by AllPortSelect)"),
        "{text}"
    );
    assert_exit(&ibscope(&sim, &["links", "--degraded"]), 0);

    // Screening: every switch cleared by its all-ports sum. Counter MADs at most one
    // ClassPortInfo per node, one sum per switch, PortCounters + PortCountersExtended per
    // CA port. Counted without resends: the engine resends early when a reply is later
    // than the round trips measured so far foretold, which a loaded test machine causes;
    // one attempt with a long deadline counts requests only.
    let once = ["--retries", "0", "--timeout-ms", "3000"];
    let doc = check_json(&sim, &once, 0);
    let (nodes, switches, ca_ports, ports) = (11, 3, 8, 32);
    assert_eq!(doc["screening"], true);
    assert_eq!(doc["switches_screened"], switches);
    assert_eq!(doc["ports_screened"], 24);
    assert!(
        doc.get("ports").is_none(),
        "no per-port values when screening"
    );
    let screened = doc["counter_mads"].as_u64().unwrap();
    assert!(screened <= nodes + switches + 2 * ca_ports, "{doc:#}");
    let plain = check_json(&sim, &[&once[..], &["--no-screen"]].concat(), 0);
    assert_eq!(plain["screening"], false);
    assert_eq!(
        (
            plain["ports_sampled"].clone(),
            plain["ports_screened"].clone()
        ),
        (32.into(), 0.into())
    );
    let per_port = plain["counter_mads"].as_u64().unwrap();
    assert!(per_port >= nodes + 2 * ports, "{plain:#}");
    assert!(
        screened * 2 < per_port,
        "screened {screened} vs per-port {per_port}"
    );
    // --no-screen lists every port's counters.
    assert_eq!(plain["ports"].as_array().unwrap().len(), 32);
    assert!(plain["ports"][0]["counters"]["SymbolErrorCounter"].is_u64());
    // The reference agrees: no errors anywhere.
    let reference_out = assert_success(&ibqueryerrors(&sim));
    assert!(
        reference_out.contains("32 ports checked, 0 ports have errors beyond threshold"),
        "{reference_out}"
    );
}

/// The reference ibqueryerrors, always with `--skip-sl`. Without it ibqueryerrors first reads
/// a PathRecord table from the SA and stores each record's SL at `lid2sl_table[DLID]`, a table
/// of 49,152 entries, without checking the DLID. Under the shim that answer is not whole (it
/// spans several MADs, RMPP; `saquery -p` here prints 3 records, one with DLID 0), and about
/// 1 run in 1,600 a record holds a DLID of 0xC000 or more: the write past the table segfaults
/// (cores showed DLIDs 0xd156 and 0xe000) and the stdout it had buffered for the pipe is lost.
/// The SL only sets the service level of its PMA queries; what it reports does not depend on it.
fn ibqueryerrors(sim: &Sim) -> std::process::Output {
    reference(sim, "ibqueryerrors", &["--skip-sl"])
}

/// ibqueryerrors' per-port error lines as (node description, port, counter): the lines
/// `   GUID 0x... port N: [Counter == V] ...` under `Errors for [0xGUID] "description"`
/// (its `port ALL` lines, the switch sums, are left out).
fn ibqueryerrors_errors(text: &str) -> BTreeSet<(String, String, u64, String)> {
    let mut out = BTreeSet::new();
    let mut node = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("Errors for ") {
            node = rest.split('"').nth(1).unwrap_or("").to_string();
            continue;
        }
        let Some((head, counters)) = line.trim_start().split_once(": [") else {
            continue;
        };
        let Some(port) = head.rsplit(' ').next().and_then(|p| p.parse::<u64>().ok()) else {
            continue;
        };
        for item in format!("[{counters}").split('[').skip(1) {
            if let Some((counter, _)) = item.split_once(" == ") {
                out.insert((
                    "counter-above-threshold".to_string(),
                    node.clone(),
                    port,
                    counter.to_string(),
                ));
            }
        }
    }
    out
}

/// Every finding, whole (kind, ends, message, counter, value, threshold), in order.
fn findings(doc: &Value) -> Vec<Value> {
    doc["findings"].as_array().unwrap().clone()
}

#[test]
fn screening_flags_exactly_the_injected_ports_as_per_port_reads_do() {
    let dir = temp_dir();
    let (path, names) = generate_hosts(dir.path(), 16, Vec::new());
    let sim = sim_with(SimOptions::new(&path));
    let name = |id: &str| names[id].clone();
    let injected: &[(&str, u8, &str, u64)] = &[
        ("L0001", 1, "SymbolErrorCounter", 17),
        ("L0003", 6, "LinkErrorRecoveryCounter", 3),
        ("S0002", 2, "PortRcvRemotePhysicalErrors", 9),
        ("S0002", 7, "VL15Dropped", 65535),
        ("H00003", 1, "PortRcvErrors", 65535),
        ("H00010", 1, "ExcessiveBufferOverrunErrors", 2),
    ];
    for (node, port, counter, value) in injected {
        sim.set_counter(node, *port, counter, *value).unwrap();
    }
    // Data counters are no errors, saturated 32-bit ones neither (PortCountersExtended):
    // L0002's sum saturates its data counters and still clears it.
    sim.set_counter("L0002", 5, "PortXmitData", u64::from(u32::MAX))
        .unwrap();
    sim.set_counter("L0002", 6, "PortRcvPkts", u64::from(u32::MAX))
        .unwrap();
    sim.set_counter("L0002", 5, "PortCountersExtended.PortXmitData", 1 << 40)
        .unwrap();

    let screened = check_json(&sim, &[], 1);
    let plain = check_json(&sim, &["--no-screen"], 1);
    assert_eq!(
        findings(&screened),
        findings(&plain),
        "{screened:#}\n{plain:#}"
    );

    let s = |x: &str| x.to_string();
    let mut want = BTreeSet::new();
    for (node, port, counter, _) in injected {
        want.insert((
            s("counter-above-threshold"),
            name(node),
            u64::from(*port),
            s(counter),
        ));
    }
    for (node, port, counter) in [("S0002", 7, "VL15Dropped"), ("H00003", 1, "PortRcvErrors")] {
        want.insert((s("counter-saturated"), name(node), port, s(counter)));
    }
    assert_eq!(finding_set(&screened), want, "{screened:#}");
    // ibqueryerrors names the same ports and counters above threshold.
    // It exits 1 when it found errors; assert_exit shows its output if it did not run through.
    let reference_out = assert_exit(&ibqueryerrors(&sim), 1);
    let above: BTreeSet<_> = want
        .iter()
        .filter(|f| f.0 == "counter-above-threshold")
        .cloned()
        .collect();
    assert_eq!(
        ibqueryerrors_errors(&reference_out),
        above,
        "{reference_out}"
    );

    // L0002, L0004 and S0001 were cleared by their sums; the other three were read port by
    // port. Every port is counted either way: 6 switches x 8 + 16 hosts.
    assert_eq!(screened["switches_screened"], 3, "{screened:#}");
    assert_eq!(screened["ports_screened"], 24);
    assert_eq!(screened["ports_sampled"], 64);
    assert_eq!(plain["ports_sampled"], 64);
    assert!(screened["counter_mads"].as_u64() < plain["counter_mads"].as_u64());
}

#[test]
fn screening_below_threshold_saturated_and_a_sum_that_stopped_early() {
    let dir = temp_dir();
    let (path, names) = generate(dir.path(), Vec::new());
    let sim = sim_with(SimOptions::new(&path));
    let name = |id: &str| names[id].clone();
    let conf = dir.path().join("thresholds.conf");
    std::fs::write(
        &conf,
        "SymbolErrorCounter=20\nLinkDownedCounter=255\nPortXmitDiscards=500\n",
    )
    .unwrap();
    let conf = conf.to_str().unwrap();
    // Below its threshold: no finding, and L0001 stays screened.
    sim.set_counter("L0001", 2, "SymbolErrorCounter", 17)
        .unwrap();
    // At its maximum: not above the threshold (255), but saturated, so a finding.
    sim.set_counter("S0001", 3, "LinkDownedCounter", 255)
        .unwrap();
    // Above its threshold. ibsim 0.10 stops the all-ports PortXmitDiscards sum at 255, so
    // the sum looks below 500: screening must not trust a sum at such a limit.
    // (ibqueryerrors trusts it and misses this port.)
    sim.set_counter("L0002", 4, "PortXmitDiscards", 1000)
        .unwrap();

    let screened = check_json(&sim, &["--thresholds", conf], 1);
    let plain = check_json(&sim, &["--thresholds", conf, "--no-screen"], 1);
    assert_eq!(
        findings(&screened),
        findings(&plain),
        "{screened:#}\n{plain:#}"
    );
    let s = |x: &str| x.to_string();
    let want = BTreeSet::from([
        (
            s("counter-saturated"),
            name("S0001"),
            3,
            s("LinkDownedCounter"),
        ),
        (
            s("counter-above-threshold"),
            name("L0002"),
            4,
            s("PortXmitDiscards"),
        ),
    ]);
    assert_eq!(finding_set(&screened), want, "{screened:#}");
    let discards = findings(&screened)
        .into_iter()
        .find(|f| f["counter"] == "PortXmitDiscards")
        .unwrap();
    assert_eq!(
        (discards["value"].clone(), discards["threshold"].clone()),
        (1000.into(), 500.into())
    );
    assert_eq!(screened["switches_screened"], 1, "{screened:#}");
    assert_eq!(screened["ports_screened"], 8);
    let text = assert_exit(&ibscope(&sim, &["check", "--thresholds", conf]), 1);
    assert!(
        text.contains("(1 switches screened by AllPortSelect)"),
        "{text}"
    );
}

#[test]
fn screening_falls_back_to_port_reads_when_the_sum_is_lost() {
    let dir = temp_dir();
    let (path, names) = generate(dir.path(), Vec::new());
    let sim = sim_with(SimOptions::new(&path));
    // Every PortCounters MAD to L0001 (attribute 0x12, at its port 0) is dropped: the sum
    // and the per-port reads alike. Screening must then report every port unreadable.
    sim.set_error_rate("L0001", 0, 100, Some(0x12)).unwrap();
    let fast = ["--timeout-ms", "50", "--retries", "1"];
    let mut args = fast.to_vec();
    let screened = check_json(&sim, &args, 1);
    args.push("--no-screen");
    let plain = check_json(&sim, &args, 1);
    // The same findings, except how many attempts each message counts: once one request to
    // L0001 has failed for good, the engine gives its other requests a single attempt, and
    // which ones were already in flight then depends on timing.
    let without_attempts = |doc: &Value| -> Vec<Value> {
        findings(doc)
            .into_iter()
            .map(|mut f| {
                let message = f["message"].as_str().unwrap_or("").to_string();
                assert!(
                    !message.contains("attempt")
                        || message.starts_with("PortCounters: no reply after "),
                    "{message}"
                );
                f["message"] = Value::from(
                    message
                        .replace("after 1 attempt(s)", "after N attempt(s)")
                        .replace("after 2 attempt(s)", "after N attempt(s)"),
                );
                f
            })
            .collect()
    };
    assert_eq!(
        without_attempts(&screened),
        without_attempts(&plain),
        "{screened:#}\n{plain:#}"
    );
    let unreadable: BTreeSet<(String, u64)> = finding_set(&screened)
        .into_iter()
        .filter(|f| f.0 == "counters-unreadable")
        .map(|f| (f.1, f.2))
        .collect();
    let want: BTreeSet<(String, u64)> = (1..=8).map(|p| (names["L0001"].clone(), p)).collect();
    assert_eq!(unreadable, want, "{screened:#}");
    assert_eq!(finding_set(&screened).len(), 8, "{screened:#}");
    // The other two switches were still screened.
    assert_eq!(screened["switches_screened"], 2);
    assert_eq!(screened["ports_sampled"], 32);
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
    sim.set_counter("L0001", 1, "SymbolErrorCounter", 17)
        .unwrap();
    sim.set_counter("S0001", 6, "LinkDownedCounter", 2).unwrap();
    sim.set_counter("H00003", 1, "PortRcvErrors", 65535)
        .unwrap();
    // Data counters are not errors: not a finding.
    sim.set_counter("L0002", 7, "PortCountersExtended.PortXmitData", 1 << 40)
        .unwrap();

    let doc = check_json(&sim, &[], 1);
    assert_counter_findings_are_the_injected(&doc, &names);
    assert_degraded_links_are_the_generated(&doc, &names);
    // Every finding names a GUID.
    for f in doc["findings"].as_array().unwrap() {
        assert!(json_guid(&f["at"]["node_guid"]).is_some(), "{f}");
    }
    thresholds_file_moves_the_limit(&sim, dir.path());
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
    assert_eq!(kinds, BTreeSet::from(["degraded-link".to_string()]));
    assert_eq!(doc["findings"].as_array().unwrap().len(), 2);
}

/// The counter findings: exactly the three injected errors, one of them saturated.
fn assert_counter_findings_are_the_injected(doc: &Value, names: &HashMap<String, String>) {
    let got = finding_set(doc);
    let name = |id: &str| names[id].clone();
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
}

/// The degraded-link findings: the two links generated at 1xHDR, either end first.
fn assert_degraded_links_are_the_generated(doc: &Value, names: &HashMap<String, String>) {
    let name = |id: &str| names[id].clone();
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
        assert!(json_guid(&f["at"]["node_guid"]).is_some(), "{f}");
    }
}

/// A threshold file above 17 drops the SymbolErrorCounter finding; a bad one is exit 2.
fn thresholds_file_moves_the_limit(sim: &Sim, dir: &Path) {
    let conf = dir.join("thresholds.conf");
    std::fs::write(&conf, "# ibqueryerrors style\nSymbolErrorCounter=20\n").unwrap();
    let doc = check_json(sim, &["--thresholds", conf.to_str().unwrap()], 1);
    assert!(!finding_set(&doc)
        .iter()
        .any(|f| f.3 == "SymbolErrorCounter"));
    // A bad file: exit 2 naming file and line.
    std::fs::write(&conf, "SymbolErrorCounter=20\nNoSuchCounter=1\n").unwrap();
    let out = ibscope(sim, &["check", "--thresholds", conf.to_str().unwrap()]);
    assert_exit(&out, 2);
    assert!(
        stderr(&out).contains(&format!("{}:2:", conf.display())),
        "{}",
        stderr(&out)
    );
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

#[test]
fn offline_file_without_rates_says_so_and_expect_judges_it() {
    // The demo topology gives a rate only for its planted 1xHDR uplink: the fabric norm
    // cannot judge the other 31 links (a note says so); the build rule of inter-switch
    // links (4x) still flags the uplink, and --expect finds it as degraded instead.
    let topo = repo_root().join("examples/fabrics/demo.topo");
    let topo = topo.to_str().unwrap();
    let text = assert_exit(&ibscope_plain(&["--topology", topo, "check"], &[]), 1);
    assert!(
        text.contains("note: 31 of 32 links carry no active width/speed"),
        "{text}"
    );
    let doc: Value = serde_json::from_str(&assert_exit(
        &ibscope_plain(&["--topology", topo, "check", "--json"], &[]),
        1,
    ))
    .unwrap();
    assert_eq!(doc["links_without_rate"], 31);
    let findings = doc["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{doc}");
    assert_eq!(findings[0]["kind"], "inter-switch-link-narrow");
    let out = assert_exit(
        &ibscope_plain(
            &["--topology", topo, "check", "--json", "--expect", "4xHDR"],
            &[],
        ),
        1,
    );
    let doc: Value = serde_json::from_str(&out).unwrap();
    let findings = doc["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{out}");
    assert_eq!(findings[0]["kind"], "degraded-link");
    assert!(
        findings[0]["message"].as_str().unwrap().contains("1xHDR"),
        "{out}"
    );
}

/// The value of `name:....N` in perfquery's output.
fn perfquery_value(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(|v| v.trim_start_matches('.').trim().parse().unwrap())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// A finding about PortRcvErrors or PortXmitDiscards names the causes that counted, from the
/// port's PortRcvErrorDetails / PortXmitDiscardDetails as perfquery -E / -D read them (with
/// screening and without); a 16-bit counter at its maximum reads "≥ 65535".
#[test]
fn error_findings_name_their_causes() {
    let sim = sim("net.2sw2path4hca");
    sim.set_counter("Switch2", 3, "PortRcvErrors", 12).unwrap();
    for (f, v) in [
        ("PortRcvErrorDetails.PortMalformedPacketErrors", 8),
        ("PortRcvErrorDetails.PortDLIDMappingErrors", 4),
    ] {
        sim.set_counter("Switch2", 3, f, v).unwrap();
    }
    sim.set_counter("Hca1", 1, "PortXmitDiscards", 65535)
        .unwrap();
    for screening in [&[][..], &["--no-screen"][..]] {
        let doc = check_json(&sim, screening, 1);
        let by_counter = |counter: &str| {
            doc["findings"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["kind"] == "counter-above-threshold" && f["counter"] == counter)
                .unwrap_or_else(|| panic!("no finding on {counter}: {doc}"))
                .clone()
        };
        let rcv = by_counter("PortRcvErrors");
        assert_eq!(rcv["at"]["node"], "Switch2");
        assert_eq!(
            rcv["message"],
            "PortRcvErrors = 12 (threshold 0); PortRcvErrorDetails: \
             PortMalformedPktErrors 8, PortDLIDMappingErrors 4"
        );
        let lid = rcv["at"]["lid"].as_u64().unwrap().to_string();
        let pq = assert_success(&reference(&sim, "perfquery", &["-E", &lid, "3"]));
        let details = rcv["details"]["PortRcvErrorDetails"].as_object().unwrap();
        assert_eq!(details.len(), 6);
        for (name, v) in details {
            assert_eq!(v.as_u64(), Some(perfquery_value(&pq, name)), "{name}");
        }
        let discards = by_counter("PortXmitDiscards");
        assert_eq!(discards["at"]["node"], "Hca1");
        assert_eq!(discards["saturated"], true);
        assert_eq!(
            discards["message"],
            "PortXmitDiscards ≥ 65535 (threshold 0); PortXmitDiscardDetails: no cause counted"
        );
        // The saturation finding of the same counter carries the breakdown too.
        let saturated = doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["kind"] == "counter-saturated")
            .unwrap();
        assert_eq!(saturated["counter"], "PortXmitDiscards");
        assert!(saturated["details"]["PortXmitDiscardDetails"].is_object());
    }
    let text = assert_exit(&ibscope(&sim, &["check"]), 1);
    assert!(
        text.contains("PortXmitDiscards ≥ 65535: at its maximum, it no longer counts"),
        "{text}"
    );
}

/// The real FDR10 cluster (tests/data/real/loginoff-fdr10-qdr.ibnd) with every one of its
/// 47 switch-to-switch links cut to 1x: the fabric's norm becomes 1x and sees nothing, the
/// build rule flags each link once (the file gives no supported widths: "built 4x").
#[test]
fn uniformly_narrowed_inter_switch_links_are_flagged() {
    let original =
        std::fs::read_to_string(repo_root().join("tests/data/real/loginoff-fdr10-qdr.ibnd"))
            .unwrap();
    let mut in_switch = false;
    let cut: Vec<String> = original
        .lines()
        .map(|l| {
            if l.starts_with("Switch") {
                in_switch = true;
            } else if l.starts_with("Ca") || l.starts_with("Hca") {
                in_switch = false;
            }
            let to_switch = l.starts_with('[') && l.contains("]\t\"S-");
            if in_switch && to_switch {
                l.replace("4xFDR10", "1xFDR10")
            } else {
                l.to_string()
            }
        })
        .collect();
    let dir = temp_dir();
    let path = dir.path().join("fdr10-cut.ibnd");
    std::fs::write(&path, cut.join("\n")).unwrap();
    let out = assert_exit(
        &ibscope_plain(
            &["--topology", path.to_str().unwrap(), "check", "--json"],
            &[],
        ),
        1,
    );
    let doc: Value = serde_json::from_str(&out).unwrap();
    let findings = doc["findings"].as_array().unwrap();
    let narrow: Vec<&Value> = findings
        .iter()
        .filter(|f| f["kind"] == "inter-switch-link-narrow")
        .collect();
    assert_eq!(narrow.len(), 47, "{out}");
    assert_eq!(findings.len(), 47, "no other rule fires: {out}");
    assert!(narrow[0]["message"]
        .as_str()
        .unwrap()
        .contains("runs 1xFDR10, narrower than 4x: inter-switch links are built 4x"));
    // The file as published: every inter-switch link at 4x, healthy.
    let original_path = repo_root().join("tests/data/real/loginoff-fdr10-qdr.ibnd");
    assert_success(&ibscope_plain(
        &["--topology", original_path.to_str().unwrap(), "check"],
        &[],
    ));
}
