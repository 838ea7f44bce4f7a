//! `ibscope discover` against `ibnetdiscover` on the simulated fabric: same nodes, port
//! GUIDs, links, LIDs and active link rates; the ibnetdiscover export loads back into ibsim;
//! lossy ports, cut links and duplicate LIDs are reported; fewer MADs than ibnetdiscover.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::*;
use ibscope_topo::diff::diff;
use ibscope_topo::gen::{fat_tree, FatTreeSpec};
use ibscope_topo::ibnd;
use ibscope_topo::model::{Fabric, FabricFile};

/// ibscope's discovery as JSON, loaded back; also the process output (exit code, stderr).
fn ours(sim: &Sim) -> (Fabric, std::process::Output) {
    let out = ibscope(sim, &["discover", "--format", "json"]);
    let file: FabricFile = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "discover JSON: {e}\nstderr:\n{}\nstdout:\n{}",
            stderr(&out),
            stdout(&out)
        )
    });
    let fabric = Fabric::from_file(file).expect("a consistent snapshot");
    (fabric, out)
}

fn ours_clean(sim: &Sim) -> Fabric {
    let (f, out) = ours(sim);
    assert_success(&out);
    assert!(f.report.complete, "{:?}", f.report);
    f
}

fn theirs(sim: &Sim) -> Fabric {
    let text = assert_success(&reference(sim, "ibnetdiscover", &[]));
    ibnd::parse(&text).unwrap_or_else(|e| panic!("parsing ibnetdiscover output: {e}\n{text}"))
}

/// The differences `diff` finds, one line each (none when the fabrics are the same).
fn differences(a: &Fabric, b: &Fabric) -> Vec<String> {
    let d = diff(a, b);
    if d.is_empty() {
        return Vec::new();
    }
    d.to_string().lines().map(String::from).collect()
}

/// Graph equality plus what `diff` leaves out: LIDs (a switch's on port 0, a CA's per
/// port) and the active width and speed of every port ibnetdiscover prints a link for.
fn assert_same(label: &str, a: &Fabric, reference: &Fabric) {
    let mut diffs = differences(a, reference);
    for (_, theirs) in reference.nodes() {
        let Some(id) = a.node_by_guid(theirs.guid) else {
            continue;
        };
        let mine = a.node(id);
        if mine.lid() != theirs.lid() {
            diffs.push(format!(
                "{:#x} {:?}: LID {:?} vs {:?}",
                theirs.guid,
                theirs.description,
                mine.lid(),
                theirs.lid()
            ));
        }
        for q in &theirs.ports {
            let Some(p) = mine.port(q.number) else {
                if q.lid != 0 || q.width_active.is_some() {
                    diffs.push(format!("{:#x} port {}: missing", theirs.guid, q.number));
                }
                continue;
            };
            if !theirs.is_switch() && q.lid != 0 && p.lid != q.lid {
                diffs.push(format!(
                    "{:#x} port {}: LID {} vs {}",
                    theirs.guid, q.number, p.lid, q.lid
                ));
            }
            if q.width_active.is_some()
                && (p.width_active, p.speed_active) != (q.width_active, q.speed_active)
            {
                diffs.push(format!(
                    "{:#x} port {}: {:?} {:?} vs {:?} {:?}",
                    theirs.guid,
                    q.number,
                    p.width_active,
                    p.speed_active,
                    q.width_active,
                    q.speed_active
                ));
            }
        }
    }
    assert!(
        diffs.is_empty(),
        "{label}: {} differences:\n{}",
        diffs.len(),
        diffs.join("\n")
    );
    assert_eq!(a.node_count(), reference.node_count(), "{label}");
    assert_eq!(a.link_count(), reference.link_count(), "{label}");
}

/// Every link joins two known nodes, a port is in at most one link, every port a link
/// uses exists on its node.
fn assert_consistent(label: &str, f: &Fabric) {
    let mut used = std::collections::HashSet::new();
    for l in f.links() {
        for (node, end) in [(l.a_node, l.a), (l.b_node, l.b)] {
            assert!(
                used.insert((node.guid, end.port)),
                "{label}: port {} of {:#x} in two links",
                end.port,
                node.guid
            );
            assert!(
                end.port <= node.num_ports,
                "{label}: link at port {} of a {}-port node",
                end.port,
                node.num_ports
            );
        }
    }
}

fn check_against_ibnetdiscover(topology: &str) {
    let sim = sim(topology);
    let mine = ours_clean(&sim);
    let reference = theirs(&sim);
    assert_same(topology, &mine, &reference);
}

#[test]
fn matches_ibnetdiscover_on_net() {
    check_against_ibnetdiscover("net");
}

#[test]
fn matches_ibnetdiscover_on_net_1() {
    check_against_ibnetdiscover("net.1");
}

#[test]
fn matches_ibnetdiscover_on_net_2sw2path() {
    check_against_ibnetdiscover("net.2sw2path");
}

#[test]
fn matches_ibnetdiscover_on_net_2sw2path4hca() {
    check_against_ibnetdiscover("net.2sw2path4hca");
}

#[test]
fn matches_ibnetdiscover_on_net_2sw2path4hca2port() {
    check_against_ibnetdiscover("net.2sw2path4hca2port");
}

#[test]
fn matches_ibnetdiscover_on_fat_tree_2l_64() {
    check_against_ibnetdiscover("fat-tree-2l-64.topo");
}

#[test]
fn matches_ibnetdiscover_on_demo() {
    check_against_ibnetdiscover("demo.topo");
}

/// The ports of `f` that run FDR10, as (node description, port), sorted.
fn fdr10_ports(f: &Fabric) -> Vec<(String, u8)> {
    let mut ports: Vec<(String, u8)> = f
        .nodes()
        .flat_map(|(_, n)| {
            n.ports
                .iter()
                .filter(|p| p.speed_active == Some(ibscope_mad::attr::Speed::Fdr10))
                .map(|p| (n.description.clone(), p.number))
        })
        .collect();
    ports.sort();
    ports
}

/// FDR10 comes from Mellanox's vendor attribute, which ibsim answers: the same ports run
/// FDR10 for ibscope as in ibnetdiscover's output (both sides of Mellanox-to-Mellanox
/// links; only the switch side of the link to another vendor's HCA, which is not asked).
#[test]
fn matches_ibnetdiscover_on_fdr10() {
    let sim = sim("fdr10.topo");
    let mine = ours_clean(&sim);
    let reference = theirs(&sim);
    assert_same("fdr10", &mine, &reference);
    let expected: Vec<(String, u8)> = [
        ("hca-1", 1),
        ("hca-5", 1),
        ("sw-fdr10-1", 1),
        ("sw-fdr10-1", 3),
        ("sw-fdr10-1", 5),
        ("sw-fdr10-1", 6),
        ("sw-fdr10-2", 2),
        ("sw-fdr10-2", 5),
        ("sw-fdr10-2", 6),
    ]
    .iter()
    .map(|(n, p)| (n.to_string(), *p))
    .collect();
    assert_eq!(fdr10_ports(&mine), expected);
    assert_eq!(fdr10_ports(&reference), expected);
    // The ibnetdiscover text ibscope writes says 4xFDR10 where ibnetdiscover does.
    let text = assert_success(&ibscope(&sim, &["discover", "--format", "ibnetdiscover"]));
    let reread = ibnd::parse(&text).unwrap();
    assert_eq!(fdr10_ports(&reread), expected);
}

/// A node that drops the vendor attribute (ibsim's `Error` on MlnxExtPortInfo) is not a
/// discovery error: its port reads QDR, as in ibnetdiscover's output, and the run exits 0.
#[test]
fn a_node_not_answering_the_vendor_attribute_is_no_error() {
    let sim = sim("fdr10.topo");
    sim.set_error_rate("hca-1", 1, 100, Some(0xff90)).unwrap();
    let mine = ours_clean(&sim);
    assert!(mine.report.errors.is_empty(), "{:?}", mine.report);
    let reference = theirs(&sim);
    assert_same("fdr10, hca-1 silent", &mine, &reference);
    let hca1 = mine.node(mine.node_by_guid(0x0002_c903_00b0_0000).unwrap());
    assert_eq!(
        hca1.port(1).unwrap().speed_active,
        Some(ibscope_mad::attr::Speed::Qdr)
    );
    // Its switch still answers for its own end.
    assert!(fdr10_ports(&mine).contains(&("sw-fdr10-1".to_string(), 1)));
}

/// A generated fat tree, written to a file that lives as long as the returned directory.
fn generated(levels: u8, radix: u8, hosts: usize) -> (tempfile::TempDir, PathBuf) {
    let dir = temp_dir();
    let path = dir.path().join(format!("ft-{levels}l-{hosts}.topo"));
    let text = fat_tree(&FatTreeSpec::new(levels, radix, hosts)).expect("generating a fat tree");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

#[test]
fn matches_ibnetdiscover_on_2_level_fat_tree_512_hosts() {
    let (_dir, topo) = generated(2, 36, 512);
    let sim = sim(path_str(&topo));
    let mine = ours_clean(&sim);
    assert_eq!(mine.nodes().filter(|(_, n)| !n.is_switch()).count(), 512);
    assert_same("2-level 512", &mine, &theirs(&sim));
}

/// 2,048 hosts, 3 levels: about 4 s for OpenSM, well under a second per discovery.
#[test]
fn matches_ibnetdiscover_on_3_level_fat_tree_2048_hosts() {
    let started = Instant::now();
    let (_dir, topo) = generated(3, 36, 2048);
    let sim = sim(path_str(&topo));
    let mine = ours_clean(&sim);
    assert_eq!(mine.nodes().filter(|(_, n)| !n.is_switch()).count(), 2048);
    assert_same("3-level 2048", &mine, &theirs(&sim));
    eprintln!("3-level 2048-host check took {:?}", started.elapsed());
}

/// ibscope's ibnetdiscover-format export, loaded into a fresh ibsim, discovers to the same
/// graph (GUIDs, ports, links, rates).
#[test]
fn ibnetdiscover_export_round_trips_through_ibsim() {
    for topology in ["net.2sw2path4hca2port", "fat-tree-2l-64.topo"] {
        let first_sim = sim(topology);
        let first = ours_clean(&first_sim);
        let dir = temp_dir();
        let export = dir.path().join("export.topo");
        assert_success(&ibscope(
            &first_sim,
            &[
                "discover",
                "--format",
                "ibnetdiscover",
                "-o",
                path_str(&export),
            ],
        ));
        drop(first_sim);
        let second_sim = sim(path_str(&export));
        let second = ours_clean(&second_sim);
        let diffs = differences(&second, &first);
        assert!(diffs.is_empty(), "{topology}:\n{}", diffs.join("\n"));
        assert_same(topology, &second, &theirs(&second_sim));
        // Reloaded offline the export is the same graph too.
        let text = std::fs::read_to_string(&export).unwrap();
        let offline = ibnd::parse(&text).unwrap();
        assert_eq!(differences(&offline, &first), Vec::<String>::new());
    }
}

/// Every external port of one switch drops 20 % of the MADs through it: retries still get
/// every answer.
#[test]
fn lossy_switch_still_gives_the_complete_fabric() {
    let sim = sim("fat-tree-2l-64.topo");
    let clean = ours_clean(&sim);
    // A clean sweep's count: the fewest of two, since a loaded machine can cost even a
    // clean sweep a retry, and the lossy one must cost more than no loss at all.
    let clean_mads = clean
        .report
        .mads_sent
        .min(ours_clean(&sim).report.mads_sent);
    // A spine: every leaf's route to some hosts crosses it.
    for port in 1..=36 {
        sim.set_error_rate("S0001", port, 20, None).unwrap();
    }
    let (lossy, out) = ours(&sim);
    assert_success(&out);
    assert!(lossy.report.complete, "{:?}", lossy.report);
    assert!(
        lossy.report.mads_sent > clean_mads,
        "drops must have cost retries: {} vs {} MADs",
        lossy.report.mads_sent,
        clean_mads
    );
    assert_eq!(differences(&lossy, &clean), Vec::<String>::new());
    assert_same("lossy", &lossy, &clean);
}

/// A link cut before the sweep (SM not told): the node behind it is simply absent, no error.
#[test]
fn link_cut_before_the_sweep_leaves_the_node_out() {
    let sim = sim("net");
    sim.unlink("Switch1", 1).unwrap();
    let (f, out) = ours(&sim);
    assert_success(&out);
    assert_consistent("unlinked", &f);
    assert!(f.nodes().all(|(_, n)| n.description != "Hca1"));
    assert_eq!(f.node_count(), 3);
    assert_same("unlinked", &f, &theirs(&sim));
}

/// PortInfo says LinkUp but nothing answers beyond (NodeInfo dropped on the link): the
/// failure is an error and an inconsistency, the half-known link is left out, exit code 1.
#[test]
fn link_up_without_an_answer_is_an_inconsistency() {
    let sim = sim("net");
    sim.set_error_rate("Hca1", 1, 100, Some(0x11)).unwrap();
    let (f, out) = ours(&sim);
    assert_exit(&out, 1);
    assert_consistent("silent port", &f);
    assert!(!f.report.complete);
    assert!(!f.report.errors.is_empty());
    assert_eq!(f.report.inconsistencies.len(), 1, "{:?}", f.report);
    assert!(
        f.report.inconsistencies[0].contains("port 1 of \"Switch1\""),
        "{:?}",
        f.report.inconsistencies
    );
    assert!(stderr(&out).contains("reported LinkUp but nothing answered"));
    assert_eq!(f.node_count(), 3);
}

/// Best effort: a spine link cut while a 512-host sweep runs. Whenever the cut lands, the
/// result is consistent and either complete or says what failed.
#[test]
fn link_cut_during_the_sweep_gives_a_consistent_result() {
    let (_dir, topo) = generated(2, 36, 512);
    let sim = sim(path_str(&topo));
    let full = ours_clean(&sim);
    let (f, out) = std::thread::scope(|s| {
        let sweep = s.spawn(|| ours(&sim));
        std::thread::sleep(Duration::from_millis(30));
        // The first spine's link to the last leaf, and that leaf's first host.
        sim.unlink("S0001", 29).unwrap();
        sim.unlink("L0029", 1).unwrap();
        sweep.join().unwrap()
    });
    assert_consistent("cut mid-sweep", &f);
    let code = out.status.code();
    assert!(code == Some(0) || code == Some(1), "{}", stderr(&out));
    if code == Some(1) {
        assert!(!f.report.errors.is_empty() || !f.report.inconsistencies.is_empty());
    }
    // Everything found is in the fabric; at most the cut-off host is missing.
    assert!(f.link_keys().is_subset(&full.link_keys()));
    assert!(
        f.node_count() + 1 >= full.node_count(),
        "{} of {} nodes; {:?}",
        f.node_count(),
        full.node_count(),
        f.report
    );
}

/// Two routes to switch D (through B, and through E and C). D is found through B first, but
/// nothing but NodeInfo gets through that way (PortInfo entering D by its port 1 is
/// dropped), so D is known with no port facts yet. The retry goes through C, which found
/// D over its own link: discovery is complete, H2 behind D included.
const TWO_ROUTES: &str = "\
Hca\t1 \"H1\"
[1]\t\"A\"[1]

Switch\t3 \"A\"
[1]\t\"H1\"[1]
[2]\t\"B\"[1]
[3]\t\"E\"[1]

Switch\t2 \"B\"
[1]\t\"A\"[2]
[2]\t\"D\"[1]

Switch\t2 \"E\"
[1]\t\"A\"[3]
[2]\t\"C\"[1]

Switch\t2 \"C\"
[1]\t\"E\"[2]
[2]\t\"D\"[2]

Switch\t3 \"D\"
[1]\t\"B\"[2]
[2]\t\"C\"[2]
[3]\t\"H2\"[1]

Hca\t1 \"H2\"
[1]\t\"D\"[3]
";

#[test]
fn a_switch_cut_off_after_its_node_info_is_reached_another_way() {
    let dir = temp_dir();
    let topo = dir.path().join("two-routes.topo");
    std::fs::write(&topo, TWO_ROUTES).unwrap();
    let sim = sim(path_str(&topo));
    let clean = ours_clean(&sim);
    assert_eq!(clean.node_count(), 7);
    // PortInfo (0x15) entering D through port 1 (from B) is dropped, all of it.
    sim.set_error_rate("D", 1, 100, Some(0x15)).unwrap();
    let (f, out) = ours(&sim);
    assert_success(&out);
    assert_consistent("two routes", &f);
    let d = f.node(f.nodes_by_description("D")[0]);
    // The case under test: D was first reached through B (A port 2, then B port 2). The
    // other way, through E and C, is two switches longer, so with replies in any order
    // B's way arrives first.
    assert_eq!(
        d.dr_path.as_deref(),
        Some("0,1,2,2"),
        "D reached another way first"
    );
    assert!(f.report.complete, "{:?}", f.report);
    assert_eq!(f.link_keys(), clean.link_keys());
    assert_eq!(f.node_count(), 7);
    // The dropped PortInfos were retried: more MADs than the clean run.
    assert!(
        f.report.mads_sent > clean.report.mads_sent,
        "{:?}",
        f.report
    );
}

/// Two ports with one LID (ibsim's `Baselid`): reported, exit code 1.
#[test]
fn duplicate_lids_are_reported() {
    let sim = sim("net");
    let before = ours_clean(&sim);
    let hca1 = before.nodes_by_description("Hca1")[0];
    let lid = before.node(hca1).lid().unwrap();
    sim.console(&format!("Baselid \"Hca2\"[2] {lid}")).unwrap();
    let (f, out) = ours(&sim);
    assert_exit(&out, 1);
    assert_eq!(f.report.duplicate_lids, vec![lid], "{:?}", f.report);
    assert!(stderr(&out).contains(&format!("LID {lid} is claimed by more than one port")));
}

/// MADs ibsim handled: it logs one `process_packet` line per request at verbosity 1.
fn mads_handled(sim: &Sim, run: impl FnOnce()) -> usize {
    let log = sim.state_dir().join("ibsim.err");
    let count = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .matches("process_packet:")
            .count()
    };
    let before = count();
    run();
    count() - before
}

/// On 512 hosts ibscope needs fewer MADs than ibnetdiscover, counted by ibsim itself.
#[test]
fn fewer_mads_than_ibnetdiscover() {
    let (_dir, topo) = generated(2, 36, 512);
    let sim = sim(path_str(&topo));
    sim.console("Verbose 1").unwrap();
    let mut reported = 0;
    let ours_count = mads_handled(&sim, || {
        let f = ours_clean(&sim);
        reported = f.report.mads_sent;
    });
    let theirs_count = mads_handled(&sim, || {
        theirs(&sim);
    });
    sim.console("Verbose 0").unwrap();
    eprintln!(
        "MADs on 512 hosts: ibscope {ours_count} (reports {reported}), ibnetdiscover {theirs_count}"
    );
    assert_eq!(ours_count as u64, reported, "ibscope's own count is exact");
    assert!(
        ours_count < theirs_count,
        "ibscope {ours_count} vs ibnetdiscover {theirs_count}"
    );
}
