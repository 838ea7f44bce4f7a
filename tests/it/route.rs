//! `ibscope route` against the reference tools and against routes OpenSM really programmed.
//!
//! - trace: `ibscope route trace SRC DST --json` hop for hop against `ibtracert SRC DST` on
//!   every CA-port pair of the small example fabrics, a sample on the fat trees. ibscope reads
//!   a snapshot (`discover --lft --format json`) taken once per fabric, so the comparison
//!   costs one ibtracert per pair; a few pairs are also traced live to show the snapshot and
//!   the live fabric agree.
//! - dump: `ibscope route dump SW` byte for byte against `ibroute SW` on every switch.
//! - check: no credit loop on a fat tree (OpenSM default engine), credit loops on a ring
//!   under minhop, a black hole after an unlink without resweep.
//! - load: per-link flow counts of a ring on a small fat tree, checked by hand, and a hot
//!   link made by a host order that sends two ring flows through one uplink.
//!
//! One client at a time per simulator (the shim routes replies to the last registered
//! process); fabrics run in parallel.

use crate::common;

use common::*;
use serde_json::Value;
use std::path::Path;

/// A CA port with a LID, from an ibscope JSON snapshot.
#[derive(Debug, Clone)]
struct CaPort {
    lid: u16,
}

fn snapshot(sim: &Sim, dir: &Path) -> (std::path::PathBuf, Value) {
    let path = dir.join("snap.json");
    let p = path.to_str().unwrap();
    assert_success(&ibscope(
        sim,
        &["discover", "--lft", "--format", "json", "-o", p],
    ));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (path, v)
}

fn ca_ports(snap: &Value) -> Vec<CaPort> {
    let mut out = Vec::new();
    for n in snap["nodes"].as_array().unwrap() {
        if n["kind"] != "ca" {
            continue;
        }
        for p in n["ports"].as_array().unwrap() {
            let lid = p["lid"].as_u64().unwrap_or(0) as u16;
            if lid != 0 && p["state"] == "Active" {
                out.push(CaPort { lid });
            }
        }
    }
    out.sort_by_key(|c| c.lid);
    out
}

fn switch_lids(snap: &Value) -> Vec<u16> {
    let mut out: Vec<u16> = snap["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["kind"] == "switch")
        .filter_map(|n| {
            n["ports"]
                .as_array()?
                .iter()
                .find(|p| p["number"] == 0)
                .and_then(|p| p["lid"].as_u64())
        })
        .map(|l| l as u16)
        .collect();
    out.sort();
    out
}

/// What ibtracert printed: source, each hop `[out] -> kind {guid}[in]`, destination.
#[derive(Debug, PartialEq)]
struct Tracert {
    src_guid: u64,
    src_port: u8,
    /// (egress port, kind, guid shown, ingress port)
    hops: Vec<(u8, String, u64, u8)>,
    dst_guid: u64,
    dst_port: u8,
}

fn hex_in_braces(s: &str) -> u64 {
    let a = s.find("{0x").unwrap() + 3;
    let b = s[a..].find('}').unwrap() + a;
    u64::from_str_radix(&s[a..b], 16).unwrap()
}

fn word_after<'a>(s: &'a str, key: &str) -> &'a str {
    let i = s.find(key).unwrap() + key.len();
    s[i..].split_whitespace().next().unwrap()
}

fn parse_ibtracert(text: &str) -> Tracert {
    let mut t = Tracert {
        src_guid: 0,
        src_port: 0,
        hops: Vec::new(),
        dst_guid: 0,
        dst_port: 0,
    };
    for line in text.lines() {
        if line.starts_with("From ") {
            t.src_guid = hex_in_braces(line);
            t.src_port = word_after(line, "portnum ").parse().unwrap();
        } else if line.starts_with("To ") {
            t.dst_guid = hex_in_braces(line);
            t.dst_port = word_after(line, "portnum ").parse().unwrap();
        } else if line.starts_with('[') {
            // [1] -> switch port {0x0000000000200000}[1] lid 1-1 "Switch1"
            let out: u8 = line[1..line.find(']').unwrap()].parse().unwrap();
            let kind = word_after(line, "-> ").to_string();
            let guid = hex_in_braces(line);
            let after = &line[line.find("}[").unwrap() + 2..];
            let inp: u8 = after[..after.find(']').unwrap()].parse().unwrap();
            t.hops.push((out, kind, guid, inp));
        }
    }
    t
}

/// ibscope's trace JSON in ibtracert's terms. ibtracert shows a CA hop by its port GUID
/// and the final "To" line by node GUID; ibscope's hops carry node GUIDs, so a CA hop's GUID
/// is compared through the "To" line (the only CA hop is the destination).
fn compare_trace(ours: &Value, theirs: &Tracert, what: &str) {
    let hops = ours["hops"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: {ours}"));
    assert!(ours.get("error").is_none(), "{what}: ibscope says {ours}");
    assert_eq!(
        json_guid(&hops[0]["node"]["guid"]),
        Some(theirs.src_guid),
        "{what}: source"
    );
    assert_eq!(
        hops[0]["out_port"].as_u64(),
        Some(u64::from(theirs.src_port)),
        "{what}"
    );
    assert_eq!(
        hops.len(),
        theirs.hops.len() + 1,
        "{what}: hop count\n{ours}\n{theirs:?}"
    );
    for (k, (out, kind, guid, inp)) in theirs.hops.iter().enumerate() {
        assert_eq!(
            hops[k]["out_port"].as_u64(),
            Some(u64::from(*out)),
            "{what}: hop {k} egress"
        );
        let next = &hops[k + 1];
        assert_eq!(
            next["in_port"].as_u64(),
            Some(u64::from(*inp)),
            "{what}: hop {k} ingress"
        );
        assert_eq!(
            next["node"]["kind"].as_str(),
            Some(kind.as_str()),
            "{what}: hop {k} kind"
        );
        if kind == "switch" {
            assert_eq!(
                json_guid(&next["node"]["guid"]),
                Some(*guid),
                "{what}: hop {k} switch"
            );
        }
    }
    let last = hops.last().unwrap();
    assert_eq!(
        json_guid(&last["node"]["guid"]),
        Some(theirs.dst_guid),
        "{what}: destination"
    );
    assert_eq!(
        last["in_port"].as_u64(),
        Some(u64::from(theirs.dst_port)),
        "{what}"
    );
    assert!(last["out_port"].is_null(), "{what}");
}

/// Trace `pairs` with ibtracert (live) and ibscope (snapshot); a few also live.
fn trace_pairs(sim: &Sim, snap_path: &Path, pairs: &[(u16, u16)], live: usize) {
    let snap = snap_path.to_str().unwrap();
    for (i, &(s, d)) in pairs.iter().enumerate() {
        let (ss, ds) = (s.to_string(), d.to_string());
        let what = format!("{} {s} -> {d}", sim.topology().display());
        let theirs = parse_ibtracert(&assert_success(&reference(sim, "ibtracert", &[&ss, &ds])));
        let ours: Value = serde_json::from_str(&assert_success(&ibscope_plain(
            &["--topology", snap, "route", "trace", &ss, &ds, "--json"],
            &[],
        )))
        .unwrap();
        compare_trace(&ours, &theirs, &what);
        if i < live {
            let live_out: Value = serde_json::from_str(&assert_success(&ibscope(
                sim,
                &["route", "trace", &ss, &ds, "--json"],
            )))
            .unwrap();
            assert_eq!(live_out, ours, "{what}: live and snapshot traces differ");
        }
    }
}

/// Every ordered pair of distinct CA ports, or an even sample of at most `max` of them.
fn pairs_of(cas: &[CaPort], max: usize) -> Vec<(u16, u16)> {
    let all: Vec<(u16, u16)> = cas
        .iter()
        .flat_map(|a| {
            cas.iter()
                .filter(move |b| b.lid != a.lid)
                .map(move |b| (a.lid, b.lid))
        })
        .collect();
    if all.len() <= max {
        return all;
    }
    // A stride coprime-ish with the host count so sources and destinations both vary.
    let step = all.len() / max + 1;
    all.into_iter().step_by(step).take(max).collect()
}

fn trace_and_dump_fabric(topology: &str, max_pairs: usize) {
    let sim = sim(topology);
    let dir = temp_dir();
    let (snap_path, snap) = snapshot(&sim, dir.path());
    let cas = ca_ports(&snap);
    assert!(cas.len() >= 2, "{topology}: {} CA ports", cas.len());
    let pairs = pairs_of(&cas, max_pairs);
    trace_pairs(&sim, &snap_path, &pairs, 3);
    for lid in switch_lids(&snap) {
        let l = lid.to_string();
        let theirs = assert_success(&reference(&sim, "ibroute", &[&l]));
        let ours = assert_success(&ibscope(&sim, &["route", "dump", &l]));
        assert_eq!(ours, theirs, "{topology}: route dump of switch LID {lid}");
    }
}

/// One test per fabric: `name: topology, pairs at most`.
macro_rules! trace_and_dump_tests {
    ($($name:ident: $topology:expr, $max_pairs:expr;)*) => {
        $(
            #[test]
            fn $name() {
                trace_and_dump_fabric($topology, $max_pairs);
            }
        )*
    };
}

trace_and_dump_tests! {
    trace_and_dump_net: "net", usize::MAX;
    trace_and_dump_net_1: "net.1", usize::MAX;
    trace_and_dump_2sw2path: "net.2sw2path", usize::MAX;
    trace_and_dump_2sw2path4hca: "net.2sw2path4hca", usize::MAX;
    trace_and_dump_2sw2path4hca2port: "net.2sw2path4hca2port", usize::MAX;
    trace_and_dump_demo: "demo.topo", usize::MAX;
    trace_and_dump_fat_tree_64: "fat-tree-2l-64.topo", 60;
}

/// `route load --pattern ring --hosts HOSTS --json`, parsed.
fn load_ring(sim: &Sim, hosts: &str) -> Value {
    let args = [
        "route",
        "load",
        "--pattern",
        "ring",
        "--hosts",
        hosts,
        "--json",
    ];
    serde_json::from_str(&assert_success(&ibscope(sim, &args))).unwrap()
}

fn check_json(sim: &Sim, code: i32) -> Value {
    serde_json::from_str(&assert_exit(
        &ibscope(sim, &["route", "check", "--json"]),
        code,
    ))
    .unwrap()
}

/// The generated 2-level fat tree: traces and dumps as above (sampled), no credit loop with
/// OpenSM's default engine.
#[test]
fn fat_tree_32_trace_dump_check() {
    let dir = temp_dir();
    let topo = sim_gen(
        dir.path(),
        "ft32.topo",
        &["fat-tree", "--levels", "2", "--radix", "8", "--hosts", "32"],
    );
    let sim = sim(&topo);
    let (snap_path, snap) = snapshot(&sim, dir.path());
    let cas = ca_ports(&snap);
    assert_eq!(cas.len(), 32);
    trace_pairs(&sim, &snap_path, &pairs_of(&cas, 80), 2);
    for lid in switch_lids(&snap) {
        let l = lid.to_string();
        let theirs = assert_success(&reference(&sim, "ibroute", &[&l]));
        let ours = assert_success(&ibscope(&sim, &["route", "dump", &l]));
        assert_eq!(ours, theirs, "fat tree: route dump of switch LID {lid}");
    }
    let clean = check_json(&sim, 0);
    assert_eq!(clean["credit_loops_found"], 0, "{:#}", clean["cdg"]);
    assert_eq!(clean["pairs_broken"], 0);
    assert!(clean["cdg"]["dependencies"].as_u64().unwrap() > 0);
}

/// A black hole: an uplink unlinked while the LFTs still use it. ibsim reports the port
/// change to the SM (trap 128, measured: OpenSM then sweeps and reroutes within ~50 ms even
/// with sweep_interval 0), so OpenSM runs with `sweep_on_trap FALSE` here to keep the stale
/// routes until the explicit resweep.
#[test]
fn black_hole_after_unlink_without_resweep() {
    let dir = temp_dir();
    let topo = sim_gen(
        dir.path(),
        "ft32.topo",
        &["fat-tree", "--levels", "2", "--radix", "8", "--hosts", "32"],
    );
    let sim = sim_with_sm_config(&topo, &["sweep_on_trap FALSE"]);
    assert_eq!(check_json(&sim, 0)["pairs_broken"], 0);
    let dump: Value = serde_json::from_str(&assert_success(&ibscope(
        &sim,
        &["route", "dump", "MF0;leaf-0001:MQM8790/U1", "--json"],
    )))
    .unwrap();
    let via_port5 = dump["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["port"] == 5)
        .count() as u64;
    assert!(via_port5 > 0);
    // L0001 port 5 goes to S0001 port 1.
    sim.unlink("L0001", 5).unwrap();
    // The text names the place and the reason in words, no Debug structures.
    let text = assert_exit(&ibscope(&sim, &["route", "check"]), 1);
    assert!(
        text.lines().any(|l| l
            .starts_with("black hole: port_down at \"MF0;leaf-0001:MQM8790/U1\" (0x")
            && l.contains("egress port 5 is down or unlinked")),
        "{text}"
    );
    assert!(!text.contains('{') && !text.contains("NodeRef"), "{text}");
    let broken = check_json(&sim, 1);
    let breaks = broken["breaks"].as_array().unwrap();
    let at_leaf = breaks
        .iter()
        .find(|b| {
            b["kind"] == "port_down"
                && b["port"] == 5
                && b["at"]["name"].as_str().unwrap_or("").contains("leaf-0001")
        })
        .unwrap_or_else(|| panic!("no black hole at leaf-0001 port 5: {breaks:#?}"));
    // Every LID the leaf's LFT sends out of the dead port.
    assert_eq!(
        at_leaf["destinations"].as_u64(),
        Some(via_port5),
        "{at_leaf:#}"
    );
    // The spine's side of the link is a black hole too (towards leaf-0001's hosts).
    assert!(
        breaks.iter().any(|b| b["kind"] == "port_down"
            && b["port"] == 1
            && b["at"]["name"]
                .as_str()
                .unwrap_or("")
                .contains("spine-0001")),
        "{breaks:#?}"
    );
    assert!(broken["pairs_broken"].as_u64().unwrap() > 0);

    sim.resweep().unwrap();
    let healed = check_json(&sim, 0);
    assert_eq!(healed["pairs_broken"], 0, "{:#}", healed["breaks"]);
}

/// OpenSM's minhop on a ring: on 4 switches its balancing happens to send the four 2-hop
/// CA routes two each way, so the CA-to-CA channel dependencies are acyclic (checked
/// by hand from ibroute: report is clean); on 5 switches every 2-hop route is the unique
/// shortest one, both directions of the ring close a cycle, and ibscope finds both.
#[test]
fn ring_minhop_credit_loops() {
    let dir = temp_dir();
    let ring4 = sim_gen(
        dir.path(),
        "ring4.topo",
        &["ring", "--switches", "4", "--hosts-per-switch", "1"],
    );
    {
        let sim = sim_with_sm_config(&ring4, &["routing_engine minhop"]);
        let r = check_json(&sim, 0);
        assert_eq!(r["credit_loops_found"], 0);
        assert_eq!(r["cdg"]["dependencies"], 4, "{:#}", r["cdg"]);
    }
    let ring5 = sim_gen(
        dir.path(),
        "ring5.topo",
        &["ring", "--switches", "5", "--hosts-per-switch", "1"],
    );
    let sim = sim_with_sm_config(&ring5, &["routing_engine minhop"]);
    let log = std::fs::read_to_string(sim.opensm_log()).unwrap();
    assert!(
        log.contains("minhop tables configured"),
        "OpenSM did not use minhop"
    );
    let r = check_json(&sim, 1);
    assert_eq!(r["credit_loops_found"], 2, "{:#}", r["cdg"]);
    for l in r["credit_loops"].as_array().unwrap() {
        assert_eq!(l["cycle_len"], 5);
        assert_eq!(l["switches"], 5);
        // The cycle goes round the ring one way: every channel leaves by the same port.
        let cycle = l["cycle"].as_array().unwrap();
        let port = &cycle[0]["from"]["port"];
        assert!(
            cycle.iter().all(|c| &c["from"]["port"] == port),
            "{cycle:#?}"
        );
    }
}

fn channel_key(c: &Value) -> (String, u64, String, u64) {
    (
        c["from"]["node"]["name"].as_str().unwrap().to_string(),
        c["from"]["port"].as_u64().unwrap(),
        c["to"]["node"]["name"].as_str().unwrap().to_string(),
        c["to"]["port"].as_u64().unwrap(),
    )
}

/// Ring H1 -> H2 -> H3 -> H4 -> H1 on two leaves under one spine (two cables per leaf):
/// H1->H2 and H3->H4 stay in their leaf (2 links each), H2->H3 and H4->H1 cross the spine
/// (4 links each, the uplink/downlink cable chosen by the LFTs). Every directed link carries
/// exactly one flow: 12 links, each named here from the LFTs.
#[test]
fn load_ring_small_fat_tree_by_hand() {
    let dir = temp_dir();
    let topo = sim_gen(
        dir.path(),
        "ft4.topo",
        &["fat-tree", "--levels", "2", "--radix", "4", "--hosts", "4"],
    );
    let sim = sim(&topo);
    let (snap_path, snap) = snapshot(&sim, dir.path());
    let snap_s = snap_path.to_str().unwrap();
    let cas = ca_ports(&snap);
    assert_eq!(cas.len(), 4);
    let lid_of = |name: &str| -> u16 {
        let n = snap["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["description"].as_str().unwrap().starts_with(name))
            .unwrap();
        n["ports"][0]["lid"].as_u64().unwrap() as u16
    };
    let h: Vec<u16> = (1..=4)
        .map(|i| lid_of(&format!("gpu-node-000{i}")))
        .collect();
    // Egress port of a switch (by name) for a LID, from `route dump --json`.
    let lft = |sw: &str, lid: u16| -> u64 {
        let dump: Value = serde_json::from_str(&assert_success(&ibscope_plain(
            &["--topology", snap_s, "route", "dump", sw, "--json"],
            &[],
        )))
        .unwrap();
        dump["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["lid"] == lid)
            .unwrap()["port"]
            .as_u64()
            .unwrap()
    };
    let (leaf1, leaf2, spine) = (
        "MF0;leaf-0001:MQM8790/U1",
        "MF0;leaf-0002:MQM8790/U1",
        "MF0;spine-0001:MQM8790/U1",
    );
    let host = |i: usize| format!("gpu-node-000{i} mlx5_0");
    let l1_up = lft(leaf1, h[2]); // H2 -> H3 leaves L1 here (3 or 4): S1 port = same number - 2
    let s_down_l2 = lft(spine, h[2]); // 3 or 4 -> L2 port 3 or 4
    let l2_up = lft(leaf2, h[0]);
    let s_down_l1 = lft(spine, h[0]);
    let mut expected = vec![
        (host(1), 1, leaf1.to_string(), 1),
        (leaf1.to_string(), 2, host(2), 1),
        (host(2), 1, leaf1.to_string(), 2),
        (leaf1.to_string(), l1_up, spine.to_string(), l1_up - 2),
        (spine.to_string(), s_down_l2, leaf2.to_string(), s_down_l2),
        (leaf2.to_string(), 1, host(3), 1),
        (host(3), 1, leaf2.to_string(), 1),
        (leaf2.to_string(), 2, host(4), 1),
        (host(4), 1, leaf2.to_string(), 2),
        (leaf2.to_string(), l2_up, spine.to_string(), l2_up),
        (
            spine.to_string(),
            s_down_l1,
            leaf1.to_string(),
            s_down_l1 + 2,
        ),
        (leaf1.to_string(), 1, host(1), 1),
    ];
    expected.sort();
    let hosts = h
        .iter()
        .map(|l| l.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let r = load_ring(&sim, &hosts);
    assert_eq!(r["flows_total"], 4);
    assert_eq!(r["flows_unroutable"], 0);
    assert_eq!(r["links_used"], 12);
    assert_eq!(r["max_flows_per_link"], 1);
    let links = r["hottest_links"].as_array().unwrap();
    assert!(links.iter().all(|l| l["flows"] == 1));
    let mut got: Vec<_> = links.iter().map(|l| channel_key(&l["channel"])).collect();
    got.sort();
    assert_eq!(got, expected);
    // All links run at the same rate and carry one flow: every flow gets the full link.
    let (min, max) = (
        r["min_flow_gbps"].as_f64().unwrap(),
        r["max_flow_gbps"].as_f64().unwrap(),
    );
    assert!((min - max).abs() < 1e-9 && min > 0.0, "{min} {max}");
    assert_eq!(r["ring_allreduce_busbw_gbps"].as_f64(), Some(min));
}

/// On the 32-host fat tree, pick two remote hosts that leaf-0001's LFT sends out of the same
/// uplink, and a ring order A -> X -> B -> Y -> A with A, B on leaf-0001: the flows A->X and
/// B->Y share that uplink. It must come out as the hottest link, with two flows and each at
/// half its capacity.
#[test]
fn load_ring_hot_uplink() {
    let dir = temp_dir();
    let topo = sim_gen(
        dir.path(),
        "ft32.topo",
        &["fat-tree", "--levels", "2", "--radix", "8", "--hosts", "32"],
    );
    let sim = sim(&topo);
    let (snap_path, _) = snapshot(&sim, dir.path());
    let snap_s = snap_path.to_str().unwrap();
    let leaf1 = "MF0;leaf-0001:MQM8790/U1";
    let dump: Value = serde_json::from_str(&assert_success(&ibscope_plain(
        &["--topology", snap_s, "route", "dump", leaf1, "--json"],
        &[],
    )))
    .unwrap();
    // Remote CA LIDs by uplink port (5-8).
    let mut by_port: std::collections::BTreeMap<u64, Vec<u16>> = Default::default();
    let mut local = Vec::new();
    for e in dump["entries"].as_array().unwrap() {
        if e["dest"]["node"]["kind"] != "ca" {
            continue;
        }
        let port = e["port"].as_u64().unwrap();
        let lid = e["lid"].as_u64().unwrap() as u16;
        if port >= 5 {
            by_port.entry(port).or_default().push(lid);
        } else {
            local.push(lid);
        }
    }
    let (&port, remote) = by_port
        .iter()
        .find(|(_, v)| v.len() >= 2)
        .expect("28 LIDs on 4 uplinks");
    let (a, b, x, y) = (local[0], local[1], remote[0], remote[1]);
    let hosts = format!("{a},{x},{b},{y}");
    let r = load_ring(&sim, &hosts);
    assert_eq!(r["max_flows_per_link"], 2);
    let hot = &r["hottest_links"][0];
    assert_eq!(hot["flows"], 2);
    assert_eq!(hot["channel"]["from"]["node"]["name"], leaf1);
    assert_eq!(hot["channel"]["from"]["port"], port);
    let cap = hot["capacity_gbps"].as_f64().unwrap();
    let min = r["min_flow_gbps"].as_f64().unwrap();
    assert!(
        (min - cap / 2.0).abs() < 1e-6,
        "min flow {min}, hot link capacity {cap}"
    );
    assert!((r["ring_allreduce_busbw_gbps"].as_f64().unwrap() - min).abs() < 1e-6);
}

/// Routing needs the switches' forwarding tables: on a topology file (or a snapshot taken
/// without --lft) every route command says so and exits 2, instead of calling every pair
/// broken.
#[test]
fn route_commands_on_a_topology_without_forwarding_tables_exit_2() {
    let file = repo_root().join("tests/data/real/nvidia-topograph-ndr-superpod.ibnd");
    let file = file.to_str().unwrap();
    let dir = temp_dir();
    let snap = dir.path().join("no-lft.json");
    let snap = snap.to_str().unwrap();
    assert_success(&ibscope_plain(
        &[
            "--topology",
            file,
            "discover",
            "--format",
            "json",
            "-o",
            snap,
        ],
        &[],
    ));
    let spine = "MF0;A10-P1-IBSPINE-04:MQM9701/U1";
    for topology in [file, snap] {
        for args in [
            vec!["route", "check"],
            vec!["route", "check", "--json"],
            vec!["route", "dump", spine],
            vec![
                "route",
                "trace",
                "a07-p1-dgx-03-c12 HCA-1",
                "a06-p1-dgx-02-c16 HCA-6",
            ],
            vec!["route", "load", "--pattern", "ring"],
        ] {
            let mut full = vec!["--topology", topology];
            full.extend(&args);
            let out = ibscope_plain(&full, &[]);
            assert_exit(&out, 2);
            assert_eq!(
                stderr(&out).trim_end(),
                "ibscope: error: this topology has no forwarding tables (discover with --lft)",
                "{args:?} on {topology}"
            );
            assert!(stdout(&out).is_empty(), "{args:?}");
        }
    }
}
