//! Topology files that other people published (tests/data/real/, sources and licences in
//! its README): each loads with the node and link counts of an independent count made
//! here without the parser, every link keeps the rate the file gives each end, SHARP
//! aggregation nodes are recognised, the ibnetdiscover re-export reads back as the same
//! fabric, and `check --topology` gives the verdicts written out below.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use ibscope_mad::attr::link::Rate;
use ibscope_topo::diff::diff;
use ibscope_topo::findings::evaluate_offline;
use ibscope_topo::health::HealthOptions;
use ibscope_topo::{export, ibnd, Fabric, NodeKind, PortKey};

fn corpus_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/data/real"))
}

fn read(name: &str) -> String {
    std::fs::read_to_string(corpus_dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// (node GUID, port) of an end.
type End = (u64, u8);

/// What a file says, counted by a plain scan of its text (not by the parser): nodes,
/// links as unordered pairs of ends, each end's rate token, aggregation nodes.
#[derive(Debug, Default)]
struct Scan {
    nodes: BTreeSet<u64>,
    aggregation_nodes: usize,
    links: BTreeSet<(End, End)>,
    /// "4xEDR" as the file prints it for the end's own port.
    rates: BTreeMap<End, String>,
}

impl Scan {
    fn link(&mut self, a: End, b: End) {
        self.links.insert((a.min(b), a.max(b)));
    }
}

/// `"S-0002c903007b78b0"`: the GUID in an ibnetdiscover node id.
fn id_guid(id: &str) -> u64 {
    u64::from_str_radix(&id[2..], 16).unwrap_or_else(|_| panic!("node id {id}"))
}

/// A rate token such as `4xFDR10` among the words of a line.
fn rate_token(line: &str) -> Option<String> {
    line.split_whitespace()
        .rev()
        .find(|w| {
            let Some((lanes, speed)) = w.split_once('x') else {
                return false;
            };
            !lanes.is_empty()
                && lanes.bytes().all(|b| b.is_ascii_digit())
                && speed.len() >= 3
                && speed
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
        })
        .map(str::to_string)
}

/// Scan an ibnetdiscover topology file: node header lines, and port lines
/// `[p]… "id"[q]…` under them.
fn scan_topology(text: &str) -> Scan {
    let mut scan = Scan::default();
    let mut owner: Option<u64> = None;
    for line in text.lines().map(str::trim) {
        let first = line.split_whitespace().next().unwrap_or("");
        if matches!(first, "Switch" | "Ca" | "Hca" | "Rt") {
            let id = line.split('"').nth(1).expect("quoted id");
            scan.nodes.insert(id_guid(id));
            if first != "Switch" && line.contains("\"Mellanox Technologies Aggregation Node\"") {
                scan.aggregation_nodes += 1;
            }
            owner = Some(id_guid(id));
        } else if let (Some(guid), Some(rest)) = (owner, line.strip_prefix('[')) {
            let port: u8 = rest[..rest.find(']').unwrap()].parse().unwrap();
            let mut parts = line.splitn(3, '"');
            let remote = parts.nth(1).expect("remote id");
            let after = parts.next().unwrap();
            let remote_port: u8 = after[1..after.find(']').unwrap()].parse().unwrap();
            scan.link((guid, port), (id_guid(remote), remote_port));
            if let Some(rate) = rate_token(line) {
                scan.rates.insert((guid, port), rate);
            }
        }
    }
    scan
}

/// Scan an `ibnetdiscover -p` report by columns: type lid port guid width speed
/// [- type lid port guid ( 'a' - 'b' )]. Port GUIDs name the nodes (see ibnd_ports).
fn scan_ports_report(text: &str) -> Scan {
    let mut scan = Scan::default();
    for line in text.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() < 6 {
            continue;
        }
        let guid = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
        let own = (guid(cols[3]), cols[2].parse::<u8>().unwrap());
        scan.nodes.insert(own.0);
        if cols.get(6) == Some(&"-") {
            let remote = (guid(cols[10]), cols[9].parse::<u8>().unwrap());
            scan.nodes.insert(remote.0);
            scan.link(own, remote);
            scan.rates.insert(own, format!("{}{}", cols[4], cols[5]));
            if line.contains("'Mellanox Technologies Aggregation Node'") {
                scan.aggregation_nodes += 1;
            }
        }
    }
    scan
}

/// The fabric's links as (node GUID, port) pairs, smaller end first.
fn fabric_links(f: &Fabric) -> BTreeSet<(End, End)> {
    f.link_keys()
        .into_iter()
        .map(|k| ((k.0.guid, k.0.port), (k.1.guid, k.1.port)))
        .collect()
}

fn rate_of(f: &Fabric, (guid, port): End) -> String {
    let node = f.node(f.node_by_guid(guid).expect("node"));
    let p = node.port(port).expect("port");
    Rate::text(p.width_active, p.speed_active)
}

/// Counts, links, rates and aggregation nodes against the scan; the re-export reads
/// back the same; the offline verdict is `expected` (`check`'s lines).
fn check_file(name: &str, scan: Scan, expected: &[&str]) -> Fabric {
    let parsed = ibnd::parse_with_warnings(&read(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    let f = parsed.fabric;
    assert_eq!(f.node_count(), scan.nodes.len(), "{name}: nodes");
    assert_eq!(f.link_count(), scan.links.len(), "{name}: links");
    assert_eq!(fabric_links(&f), scan.links, "{name}: the same links");
    let aggregation = f
        .nodes()
        .filter(|(_, n)| n.kind == NodeKind::AggregationNode)
        .count();
    assert_eq!(
        aggregation, scan.aggregation_nodes,
        "{name}: aggregation nodes"
    );
    // Each end's own rate as the file prints it; ends the file gives no line of their
    // own take the far end's (one link, one rate).
    for (end, rate) in &scan.rates {
        assert_eq!(&rate_of(&f, *end), rate, "{name}: rate of {end:x?}");
    }
    for (a, b) in &scan.links {
        for (end, other) in [(a, b), (b, a)] {
            if !scan.rates.contains_key(end) {
                if let Some(rate) = scan.rates.get(other) {
                    assert_eq!(&rate_of(&f, *end), rate, "{name}: rate of {end:x?}");
                }
            }
        }
    }
    // Re-export: what ibscope writes reads back as the same fabric, rates included.
    let back = ibnd::parse(&export::ibnd::write(&f, None)).unwrap();
    let d = diff(&f, &back);
    assert!(d.is_empty(), "{name}: {d}");
    for (id, n) in f.nodes() {
        let m = back.node(back.node_by_guid(n.guid).unwrap());
        assert_eq!(n.kind, m.kind);
        for p in &n.ports {
            // The format lists linked ports only (a ports report also has unlinked ones).
            let Some(q) = m.port(p.number) else {
                let end = ibscope_topo::End {
                    node: id,
                    port: p.number,
                };
                assert!(f.peer(end).is_none(), "{name}: linked port lost");
                continue;
            };
            assert_eq!(
                (p.lid, p.width_active, p.speed_active),
                (q.lid, q.width_active, q.speed_active),
                "{name}: {:#x} port {}",
                n.guid,
                p.number
            );
        }
    }
    let eval = evaluate_offline(&f, None, &HealthOptions::default());
    let lines: Vec<String> = eval.findings.iter().map(|x| x.text_line()).collect();
    assert_eq!(lines, expected, "{name}: verdict");
    f
}

/// The host findings of the SuperPOD file, each checked against the file by hand:
/// - A09-P1-IBLEAF-03-01 is not in the file: the eleven DGX of group 01 that have HCA-1,
///   HCA-2 and HCA-6 on port N of leaves 01-01, 02-01 and 04-01 (and the one that calls
///   itself "localhost") have no rail 5;
/// - b08-p1-dgx-08-c01's HCA-5 is on port 1 of the rail 6 leaf 04-08 and its HCA-6 on
///   port 1 of the rail 5 leaf 03-08;
/// - b06-p1-dgx-06-c07 and -c08 have their other HCAs on ports 7 and 8 of their leaves,
///   but c07's HCA-2 is on port 8 of 02-06 and c08's on port 7;
/// - two management servers (UFM: "ubuntu", "B11-P1-CUFM-02") have their mlx5_0 and
///   mlx5_1 on the leaves of rails 5 and 6: by their device numbering, misaligned.
fn superpod_host_findings() -> Vec<String> {
    let leaf = |n: &str| format!("\"MF0;B09-P1-IBLEAF-{n}:MQM9701/U1\"");
    let misaligned = |host: &str, guid: &str, lid: u16, dev: u8, leaf_n: &str, port: u8| {
        format!(
            "[rail-misaligned] {host} rail {dev}: \"{host} mlx5_{dev}\" ({guid}) port 1 (lid \
             {lid}) <-> {} ({}) port {port} (lid {}): cabled to a leaf of rail {}",
            leaf(leaf_n),
            if leaf_n == "03-08" {
                "0x2c5eab0300c26400"
            } else {
                "0x2c5eab0300c26540"
            },
            if leaf_n == "03-08" { 32 } else { 71 },
            if leaf_n == "03-08" { 5 } else { 6 }
        )
    };
    let down = |host: &str| {
        format!(
            "[rail-down] {host} rail 5: Down: its HCA (HCA-5) is not in the fabric (3 of 4 \
             rails up); none of the 10 other hosts on its leaves has rail 5 up either: is \
             their rail 5 leaf in the fabric?"
        )
    };
    let mut out = vec![
        misaligned("B11-P1-CUFM-02", "0x1070fd0300478cf8", 1, 0, "03-08", 22),
        misaligned("B11-P1-CUFM-02", "0x5c25730300d765c8", 681, 1, "04-08", 22),
    ];
    for c in [1, 3, 4, 9, 12, 13, 14, 15, 17, 18] {
        out.push(down(&format!("a05-p1-dgx-01-c{c:02}")));
    }
    out.push(format!(
        "[hcas-swapped] b06-p1-dgx-06-c07 rail 2: \"b06-p1-dgx-06-c07 HCA-2\" \
         (0xe09d730300af11ae) port 1 (lid 293) <-> {} (0x2c5eab0300c25fc0) port 8 (lid 152): \
         swapped with b06-p1-dgx-06-c08 HCA-2 (rail 2), which is at {} port 7: swap their \
         cables",
        leaf("02-06"),
        leaf("02-06")
    ));
    out.push(format!(
        "[hcas-swapped] b08-p1-dgx-08-c01 rail 5: \"b08-p1-dgx-08-c01 HCA-5\" \
         (0xe09d730300859464) port 1 (lid 429) <-> {} (0x2c5eab0300c26540) port 1 (lid 71): \
         swapped with HCA-6 (rail 6), which is at {} port 1: swap their cables",
        leaf("04-08"),
        leaf("03-08")
    ));
    out.push(down("localhost"));
    out.push(misaligned(
        "ubuntu",
        "0xc470bd0300a49432",
        679,
        0,
        "03-08",
        21,
    ));
    out.push(misaligned(
        "ubuntu",
        "0xc470bd0300a4943e",
        680,
        1,
        "04-08",
        21,
    ));
    out
}

/// An NVIDIA DGX SuperPOD (NDR, Quantum-2 MQM9701): 40 switches, 542 host ports and 40
/// SHARP aggregation nodes (one behind port 65 of every switch), every link 4xNDR; its
/// hosts and rails as [`superpod_host_findings`] says.
#[test]
fn ndr_superpod_with_aggregation_nodes() {
    let name = "nvidia-topograph-ndr-superpod.ibnd";
    let expected = superpod_host_findings();
    let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
    let f = check_file(name, scan_topology(&read(name)), &expected);
    let hosts = ibscope_topo::hosts::Hosts::group(&f, None);
    // 122 servers named by rdma-ndd; 69 CAs with the firmware's description, one host
    // each (their SystemImageGUIDs differ); the aggregation nodes are no hosts.
    let named = hosts
        .hosts()
        .iter()
        .filter(|h| h.grouped_by == ibscope_topo::hosts::Grouping::NodeDescription)
        .count();
    assert_eq!((named, hosts.len()), (122, 122 + 69));
    assert_eq!(hosts.rails(), [0, 1, 2, 4, 5, 6]);
    assert_eq!(f.switches().count(), 40);
    let aggregation: Vec<_> = f
        .nodes()
        .filter(|(_, n)| n.kind == NodeKind::AggregationNode)
        .collect();
    assert_eq!(aggregation.len(), 40);
    // Each hangs off port 65 of its switch, and is no host.
    for (id, n) in aggregation {
        let peer = f
            .peer(ibscope_topo::End { node: id, port: 1 })
            .expect("linked");
        assert!(f.node(peer.node).is_switch(), "{}", n.description);
        assert_eq!(peer.port, 65);
        assert!(!n.kind.is_host_ca());
    }
    let hosts = f.nodes().filter(|(_, n)| n.kind.is_host_ca()).count();
    assert_eq!(hosts, 542);
    let switch_links = f
        .links()
        .filter(|l| l.a_node.is_switch() && l.b_node.is_switch())
        .count();
    assert_eq!(
        switch_links, 532,
        "1,064 leaf-spine port lines, two per cable"
    );
    assert_eq!(
        f.local,
        Some(PortKey {
            guid: 0xe09d730300156ff6,
            port: 1
        })
    );
}

/// A single GB200 CA with no link (topograph's "bad" example): one node, healthy.
#[test]
fn lone_ca() {
    let name = "nvidia-topograph-lone-ca.ibnd";
    let f = check_file(name, scan_topology(&read(name)), &[]);
    assert_eq!(f.node_count(), 1);
}

/// FDR10 between SX6036 switches, QDR to ConnectX-3 hosts, a host with both ports on one
/// switch: FDR10 decodes (4xFDR10 is its own speed, not FDR and not "?") and the fabric is
/// healthy (each link class runs at one rate).
#[test]
fn fdr10_and_qdr_cluster() {
    let name = "loginoff-fdr10-qdr.ibnd";
    let scan = scan_topology(&read(name));
    let fdr10 = scan.rates.values().filter(|r| *r == "4xFDR10").count();
    assert!(fdr10 > 0);
    let f = check_file(name, scan, &[]);
    let counted = f
        .nodes()
        .flat_map(|(_, n)| n.ports.iter())
        .filter(|p| p.rate_active().map(|r| r.to_string()).as_deref() == Some("4xFDR10"))
        .count();
    assert_eq!(counted, fdr10);
}

/// The ibnetdiscover man page's example (`-g` output: a "Non-Chassis Nodes" line). Its
/// two 1xSDR ends sit on links whose other end reports 4x: the file itself shows the two
/// ends disagreeing (a link trained at 1x reported differently by each side), which
/// `check` flags whatever the capabilities. Such a link runs at the lower rate, 1xSDR,
/// below the 4xSDR every other link of both ends runs at: degraded on that count too.
#[test]
fn man_page_example() {
    let name = "ibtopotool-man-page.ibnd";
    let f = check_file(
        name,
        scan_topology(&read(name)),
        &[
            "[degraded-link] \"ISR9024 Voltaire\" (0x005442ba00003080) port 10 (lid 6) <-> \
             \"SW-6IB4 Voltaire\" (0x0008f10400410015) port 1 (lid 3): the ends report different \
             widths (4x and 1x): the link runs at 1x; 1xSDR below fabric norm 4xSDR; both \
             ends run other links at 4x",
            "[degraded-link] \"ISR9024 Voltaire\" (0x005442ba00003080) port 12 (lid 6) <-> \
             \"MT23108 InfiniHost Mellanox Technologies\" (0x0008f10403960558) port 1 (lid 10): the \
             ends report different widths (4x and 1x): the link runs at 1x; 1xSDR below \
             fabric norm 4xSDR; both ends run other links at 4x",
        ],
    );
    // lmc 1 on the CAs, and the file was discovered from a CA port.
    let ca = f.node(f.node_by_guid(0x0008f10403960558).unwrap());
    assert_eq!(ca.port(1).unwrap().lmc, 1);
    assert_eq!(
        f.local,
        Some(PortKey {
            guid: 0x0008f10403960558,
            port: 1
        })
    );
}

/// A captured stderr line before the topology, and three loopback cables on one
/// SwitchIB (ports 1-2, 19-21, 29-30). The verdicts: each loopback is a finding of its
/// own, and sets no norm, so the one switch-switch link (SwitchIB to the FDR SX6012, at
/// 4xFDR) is the switch-switch norm and fine. The QDR and SDR hosts run below the CA norm
/// 4xFDR; each is a one-port record whose card runs nothing else, so a file cannot tell
/// an older card from a fault (the SDR one is a ConnectX-4 GUID range, so likely a
/// fault): "capability unknown offline", a warning, not "degraded".
#[test]
fn stderr_line_and_loopback_cables() {
    let name = "ibtopotool-nvidia-stderr-loopbacks.ibnd";
    let text = read(name);
    // The scan skips the first line itself: it is not part of the topology.
    let f = check_file(
        name,
        scan_topology(&text),
        &[
            "[link-below-norm] r-ufm101 rail 1: \"MF0;switch-de779e:SX6012/U1\" \
             (0xf4521403005764b0) port 2 (lid 174) <-> \"r-ufm101 HCA-1\" (0x0002c9030004e938) \
             port 1 (lid 27): 4xQDR below fabric norm 4xFDR (capability unknown offline)",
            "[link-below-norm] r-ufm101 rail 2: \"MF0;switch-de779e:SX6012/U1\" \
             (0xf4521403005764b0) port 3 (lid 174) <-> \"r-ufm101 HCA-2\" (0x0002c9030006ba5a) \
             port 1 (lid 30): 4xQDR below fabric norm 4xFDR (capability unknown offline)",
            "[link-below-norm] r-ufm96 rail 1: \"MF0;switch-de779e:SX6012/U1\" \
             (0xf4521403005764b0) port 8 (lid 174) <-> \"r-ufm96 HCA-1\" (0xe41d2d03005cf1f8) \
             port 1 (lid 1): 4xSDR below fabric norm 4xFDR (capability unknown offline)",
            "[loopback-cable] \"SwitchIB Mellanox Technologies\" (0xe41d2d030003e470) port 1 \
             (lid 268) <-> \"SwitchIB Mellanox Technologies\" (0xe41d2d030003e470) port 2 \
             (lid 268): both ends are ports of the same switch",
            "[loopback-cable] \"SwitchIB Mellanox Technologies\" (0xe41d2d030003e470) port 19 \
             (lid 268) <-> \"SwitchIB Mellanox Technologies\" (0xe41d2d030003e470) port 21 \
             (lid 268): both ends are ports of the same switch",
            "[loopback-cable] \"SwitchIB Mellanox Technologies\" (0xe41d2d030003e470) port 29 \
             (lid 268) <-> \"SwitchIB Mellanox Technologies\" (0xe41d2d030003e470) port 30 \
             (lid 268): both ends are ports of the same switch",
        ],
    );
    let health = ibscope_topo::health::assess(&f, None, &HealthOptions::default());
    assert_eq!(health.norms.switch_switch, Rate::parse("4xFDR"));
    assert_eq!(health.norms.ca_switch, Rate::parse("4xFDR"));
    let warnings = ibnd::parse_with_warnings(&text).unwrap().warnings;
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].line, 1);
    assert!(warnings[0]
        .message
        .contains("\"src/query_smp.c:195; umad (DR path slid 0;"));
    let loops = f.links().filter(|l| l.a.node == l.b.node).count();
    assert_eq!(loops, 3);
    let switch = f.node_by_guid(0xe41d2d030003e470).unwrap();
    let peer = f.peer(ibscope_topo::End {
        node: switch,
        port: 21,
    });
    assert_eq!(
        peer,
        Some(ibscope_topo::End {
            node: switch,
            port: 19
        })
    );
}

/// IBM's and Oracle's documentation examples: SDR and QDR, a line of blanks between
/// records.
#[test]
fn vendor_documentation_examples() {
    for name in ["ibtopotool-ibm-sdr.ibnd", "ibtopotool-oracle-qdr.ibnd"] {
        check_file(name, scan_topology(&read(name)), &[]);
    }
}

/// `ibnetdiscover -p`: read into a fabric (a switch-switch link whose far switch has no
/// lines of its own included), unconnected ports known but without links, a warning that
/// says what the report cannot tell.
#[test]
fn ports_report() {
    let name = "treydock-ports-report.txt";
    let f = check_file(name, scan_ports_report(&read(name)), &[]);
    let sw = f.node(f.node_by_guid(0x08c0eb0300add20e).unwrap());
    assert!(sw.is_switch());
    assert_eq!(sw.num_ports, 80);
    assert_eq!(sw.lid(), Some(1781));
    let warnings = ibnd::parse_with_warnings(&read(name)).unwrap().warnings;
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0]
        .to_string()
        .contains("`ibnetdiscover -p` ports report"));

    // One unconnected port in a hand-trimmed fixture (its name unquoted).
    let name = "treydock-ports-report-one-line.txt";
    let f = check_file(name, scan_ports_report(&read(name)), &[]);
    assert_eq!(f.node_count(), 1);
}

/// A hand-edited ports report in which one aggregation node's port 1 is cabled to two
/// different switch ports: refused, naming the line, both claims, and the format.
#[test]
fn contradictory_ports_report_is_refused() {
    let e = ibnd::parse(&read("treydock-ports-report-conflicting.txt")).unwrap_err();
    assert_eq!(e.line, 5);
    assert_eq!(
        e.to_string(),
        "line 5: 0x946dae0300630bfe port 1 is cabled to 0x946dae030053ec1a port 81 here and \
         to 0x946dae0300630bf6 port 81 on line 1 (in this `ibnetdiscover -p` ports report; \
         plain `ibnetdiscover` output describes the fabric without the report's gaps)"
    );
}

/// Every file of the corpus is in one of the tests above.
#[test]
fn every_corpus_file_is_tested() {
    let source = include_str!("real_files.rs");
    for entry in std::fs::read_dir(corpus_dir()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name == "README.md" || name == "LICENSES" {
            continue;
        }
        assert!(
            source.contains(&format!("\"{name}\"")),
            "{name} has no test in real_files.rs"
        );
    }
}

/// Cut and garbled versions of every file never panic the parser, and whatever still
/// parses writes back out and reads again.
#[test]
fn truncated_and_garbled_files_never_panic() {
    let mut files: Vec<(String, String)> = std::fs::read_dir(corpus_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x != "md"))
        .filter(|p| p.is_file())
        .map(|p| {
            (
                p.display().to_string(),
                std::fs::read_to_string(&p).unwrap(),
            )
        })
        .collect();
    files.sort();
    assert!(files.len() >= 10);
    let try_text = |text: &str| {
        if let Ok(parsed) = ibnd::parse_with_warnings(text) {
            let _ = evaluate_offline(&parsed.fabric, None, &HealthOptions::default());
            let back = ibnd::parse(&export::ibnd::write(&parsed.fabric, None));
            assert!(back.is_ok(), "own output must parse: {:?}", back.err());
        }
    };
    for (_, text) in &files {
        // Small files at many points, larger ones at fewer (a debug build parses the
        // 300 kB file in tens of milliseconds).
        let points = match text.len() {
            0..=5_000 => 80,
            5_001..=100_000 => 12,
            _ => 4,
        };
        let stride = (text.len() / points).max(1);
        let cuts = (0..text.len())
            .step_by(stride)
            .filter(|&i| text.is_char_boundary(i));
        for cut in cuts {
            try_text(&text[..cut]);
            for garble in ["\"", "[", "]", "(", "#", "\n", "x", "0", "=", " "] {
                let mut g = String::with_capacity(text.len() + 1);
                g.push_str(&text[..cut]);
                g.push_str(garble);
                g.push_str(text[cut..].get(1..).unwrap_or(""));
                try_text(&g);
            }
        }
        // Lines dropped, doubled and swapped.
        let lines: Vec<&str> = text.lines().collect();
        for i in (0..lines.len()).step_by((lines.len() / points).max(1)) {
            let mut v = lines.clone();
            v.remove(i);
            try_text(&v.join("\n"));
            let mut v = lines.clone();
            v.insert(i, lines[i]);
            try_text(&v.join("\n"));
            if i + 1 < lines.len() {
                let mut v = lines.clone();
                v.swap(i, i + 1);
                try_text(&v.join("\n"));
            }
        }
    }
}
