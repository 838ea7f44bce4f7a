//! Reading every file ibnetdiscover writes, on small texts laid out as rdma-core's
//! ibnetdiscover.c prints them (the layouts the published corpus in tests/data/real/ lacks:
//! `-g` chassis records, `-f`, XDR and the other link generations), and the errors and
//! warnings a user sees for broken ones.

use ibscope_mad::attr::link::{Rate, Speed, Width};
use ibscope_topo::diff::diff;
use ibscope_topo::findings::evaluate_offline;
use ibscope_topo::health::HealthOptions;
use ibscope_topo::{export, ibnd, End, NodeKind, PortKey};

/// What `ibnetdiscover -g` prints for a Voltaire ISR9288 chassis (one spine chip, one line
/// chip) and a host outside it: `Chassis N (guid …)`, the `# Spine Nodes`-style comments,
/// `# Chassis N (name)` after sysimgguid, the chassis slot after switchguid, `[ext N]`
/// port mappings on both sides, then `Non-Chassis Nodes`.
const GROUPED: &str = "#
# Topology file: generated on Tue Jun  5 14:15:10 2007
#
# Initiated from node 0008f10403960558 port 0008f10403960559

Chassis 1 (guid 0x8f104004050c6)

# Spine Nodes
vendid=0x8f1
devid=0x5a0d
sysimgguid=0x8f104004050c7\t\t# Chassis 1 (ISR9288)
switchguid=0x8f104004050c6(8f104004050c6)\t# ISR9288 Spine 1 Chip 1
Switch\t24 \"S-0008f104004050c6\"\t\t# \"ISR9288 Voltaire sFB-12D\" base port 0 lid 7 lmc 0
[1][ext 1]\t\"S-0008f104004050c0\"[13]\t\t# \"ISR9288/ISR9096 Voltaire sLB-24D\" lid 8 4xDDR

# Line Nodes
vendid=0x8f1
devid=0x5a0b
sysimgguid=0x8f104004050c7\t\t# Chassis 1 (ISR9288)
switchguid=0x8f104004050c0(8f104004050c0)\t# ISR9288 Line 1 Chip 1
Switch\t24 \"S-0008f104004050c0\"\t\t# \"ISR9288/ISR9096 Voltaire sLB-24D\" base port 0 lid 8 lmc 0
[13]\t\"S-0008f104004050c6\"[1][ext 1]\t\t# \"ISR9288 Voltaire sFB-12D\" lid 7 4xDDR
[1][ext 3]\t\"H-0008f10403960558\"[1](8f10403960559) \t\t# \"host1 HCA-1\" lid 9 4xDDR

# Chassis Switches

# Chassis CAs

Non-Chassis Nodes

vendid=0x2c9
devid=0x634a
sysimgguid=0x8f1040396055b
caguid=0x8f10403960558
Ca\t2 \"H-0008f10403960558\"\t\t# \"host1 HCA-1\"
[1](8f10403960559) \t\"S-0008f104004050c0\"[1][ext 3]\t\t# lid 9 lmc 0 \"ISR9288/ISR9096 Voltaire sLB-24D\" lid 8 4xDDR
";

#[test]
fn grouped_output_with_chassis_records() {
    let parsed = ibnd::parse_with_warnings(GROUPED).unwrap();
    assert!(parsed.warnings.is_empty(), "{:?}", parsed.warnings);
    let f = parsed.fabric;
    assert_eq!((f.node_count(), f.link_count()), (3, 2));
    let line = f.node(f.node_by_guid(0x8f104004050c0).unwrap());
    assert_eq!(line.system_image_guid, 0x8f104004050c7);
    assert_eq!(line.lid(), Some(8));
    assert_eq!(line.port(13).unwrap().rate_active(), Rate::parse("4xDDR"));
    assert_eq!(
        f.local,
        Some(PortKey {
            guid: 0x8f10403960558,
            port: 1
        })
    );
    let host = f.node(f.node_by_guid(0x8f10403960558).unwrap());
    assert_eq!(host.port(1).unwrap().guid, 0x8f10403960559);
}

/// `ibnetdiscover -f` appends `s=N w=N v=N` (LinkSpeedActive, LinkWidthActive, VLCap) to
/// each port comment: what the port runs at. ibsim's `w=`/`s=` options (before the
/// comment, or in it without `v=`) are enabled masks. The two are told apart and
/// recorded where they belong.
#[test]
fn full_output_suffix_is_active_values_not_enabled_masks() {
    let full = "switchguid=0x10(10)
Switch\t8 \"S-0000000000000010\"\t\t# \"sw\" base port 0 lid 1 lmc 0
[1]\t\"H-0000000000000020\"[1](21) \t\t# \"h1\" lid 2 4xQDR s=4 w=2 v=4
[2]\t\"H-0000000000000030\"[1](31) \t\t# \"h2\" lid 3 ??? s=2 w=1 v=4

caguid=0x20
Ca\t1 \"H-0000000000000020\"\t\t# \"h1\"
[1](21) \t\"S-0000000000000010\"[1]\t\t# lid 2 lmc 0 \"sw\" lid 1 4xQDR s=4 w=2 v=4

caguid=0x30
Ca\t1 \"H-0000000000000030\"\t\t# \"h2\"
[1](31) \t\"S-0000000000000010\"[2]\t\t# lid 3 lmc 0 \"sw\" lid 1 1xDDR s=2 w=1 v=4
";
    let f = ibnd::parse(full).unwrap();
    let sw = f.node(f.node_by_guid(0x10).unwrap());
    let p1 = sw.port(1).unwrap();
    assert_eq!(p1.rate_active(), Rate::parse("4xQDR"));
    assert!(p1.width_enabled.is_empty() && p1.speed_enabled.is_empty());
    // No rate token on port 2's line: the codes give it (LinkWidthActive 1 = 1x,
    // LinkSpeedActive 2 = DDR).
    let p2 = sw.port(2).unwrap();
    assert_eq!(p2.rate_active(), Rate::parse("1xDDR"));
    assert!(p2.width_enabled.is_empty() && p2.speed_enabled.is_empty());

    // ibsim's own options are enabled masks, before the comment or in it.
    let sim =
        "Switch 8 \"sw\"\n[1] \"h\"[1] w=3 # \"h\" lid 2 4xQDR s=7\n\nHca 1 \"h\"\n[1] \"sw\"[1]\n";
    let f = ibnd::parse(sim).unwrap();
    let p = f
        .node(f.node_by_guid(0x200000).unwrap())
        .port(1)
        .unwrap()
        .clone();
    assert_eq!(p.width_enabled.0, 3);
    assert!(p.speed_enabled.contains(Speed::Qdr) && p.speed_enabled.contains(Speed::Sdr));
    assert_eq!(p.rate_active(), Rate::parse("4xQDR"));
}

/// Every width and every speed reads, both ends carry it, and it survives a re-export.
#[test]
fn every_width_and_speed() {
    // Every width with every speed: 45 links on one switch.
    let rates: Vec<String> = Width::KNOWN
        .iter()
        .flat_map(|w| {
            Speed::ALL
                .iter()
                .map(move |s| format!("{}x{}", w.lanes(), s.name()))
        })
        .collect();
    assert_eq!(rates.len(), 45);
    let mut text = String::from("switchguid=0x10(10)\nSwitch\t64 \"S-0000000000000010\"\t\t# \"sw\" base port 0 lid 1 lmc 0\n");
    for (i, rate) in rates.iter().enumerate() {
        let n = i + 1;
        text.push_str(&format!(
            "[{n}]\t\"H-00000000000001{n:02x}\"[1](1{n:02x}) \t\t# \"h{n}\" lid {} {rate}\n",
            n + 1
        ));
    }
    for (i, _) in rates.iter().enumerate() {
        let n = i + 1;
        // The CA blocks omit the rate: the switch side's is both ends'.
        text.push_str(&format!(
            "\ncaguid=0x1{n:02x}\nCa\t1 \"H-00000000000001{n:02x}\"\t\t# \"h{n}\"\n\
             [1](1{n:02x}) \t\"S-0000000000000010\"[{n}]\t\t# lid {} lmc 0 \"sw\" lid 1\n",
            n + 1
        ));
    }
    let f = ibnd::parse(&text).unwrap();
    // Written back out as ibnetdiscover text and as a JSON snapshot, read again.
    let back = ibnd::parse(&export::ibnd::write(&f, None)).unwrap();
    let mut json = Vec::new();
    export::json::write_to(&mut json, &f).unwrap();
    let from_json = export::json::read(std::str::from_utf8(&json).unwrap()).unwrap();
    // DOT labels every link with its rate.
    let health = ibscope_topo::health::assess(&f, None, &HealthOptions::default());
    let dot = export::dot::write(&f, None, &health);
    for rate in &rates {
        let edges = dot
            .lines()
            .filter(|l| l.contains(&format!("label=\"{rate}\"")))
            .count();
        assert_eq!(edges, 1, "{rate} in DOT");
    }
    for fabric in [&f, &back, &from_json] {
        let sw = fabric.node(fabric.node_by_guid(0x10).unwrap());
        for (i, rate) in rates.iter().enumerate() {
            let n = i as u8 + 1;
            let expected = Rate::parse(rate);
            assert!(expected.is_some(), "{rate}");
            assert_eq!(sw.port(n).unwrap().rate_active(), expected, "{rate}");
            let host = fabric.node(fabric.node_by_guid(0x100 + u64::from(n)).unwrap());
            assert_eq!(
                host.port(1).unwrap().rate_active(),
                expected,
                "{rate} far end"
            );
        }
    }
    // Width and speed codes ibnetdiscover cannot name print as "??" / "???".
    assert_eq!(ibnd::parse_width_speed("??x???"), (None, None));
    assert_eq!(
        ibnd::parse_width_speed("2xXDR"),
        (Some(Width::X2), Some(Speed::Xdr))
    );
}

/// Without a `switchguid=`/`caguid=` line, a node id of ibnetdiscover's form holds the
/// node's real GUID; with one, the line wins (ibsim's rule).
#[test]
fn node_ids_hold_guids_when_no_guid_line_does() {
    let text = "Switch\t36 \"S-0008f10500200134\"\t\t# \"sw\" base port 0 lid 1 lmc 0
[1]\t\"H-0008f10500200140\"[1](8f10500200141) \t\t# \"h\" lid 2 4xHDR

Ca\t1 \"H-0008f10500200140\"\t\t# \"h\"
[1](8f10500200141) \t\"S-0008f10500200134\"[1]\t\t# lid 2 lmc 0 \"sw\" lid 1 4xHDR

caguid=0x77
Ca\t1 \"H-0008f10500200150\"\t\t# \"lined\"
";
    let f = ibnd::parse(text).unwrap();
    assert!(f
        .node(f.node_by_guid(0x0008f10500200134).unwrap())
        .is_switch());
    assert!(f.node_by_guid(0x0008f10500200140).is_some());
    assert_eq!(f.node(f.node_by_guid(0x77).unwrap()).description, "lined");
    // ibsim-style ids still take ibsim's counters.
    let f = ibnd::parse("Switch 8 \"S-leaf\"\n").unwrap();
    assert!(f.node_by_guid(0x200000).is_some());
}

/// Trailing junk after a GUID is an error naming the line, not a GUID cut short.
#[test]
fn guid_with_trailing_junk_is_rejected_with_its_line() {
    for (text, line) in [
        ("\nswitchguid=0x9c05<redacted>(9c05)\nSwitch 8 \"s\"\n", 2),
        ("caguid=0x9c05zz\nCa 1 \"h\"\n", 1),
        ("sysimgguid=0x12345678901234567\nSwitch 8 \"s\"\n", 1),
        ("switchguid=0x10(10zz)\nSwitch 8 \"s\"\n", 1),
        (
            "Switch 8 \"s\"\n[1] \"h\"[1](9c05<redacted>) # \"h\" lid 2 4xHDR\n\nCa 1 \"h\"\n",
            2,
        ),
        (
            "Switch 8 \"s\"\n[1] \"h\"[1]\n\nCa 1 \"h\"\n[1](12g) \"s\"[1]\n",
            5,
        ),
    ] {
        let e = ibnd::parse(text).unwrap_err();
        assert_eq!(e.line, line, "{text:?}: {e}");
        assert!(e.to_string().contains("GUID"), "{e}");
    }
}

/// A link to a node the file does not have: one sentence naming both ends and the line.
#[test]
fn link_to_a_node_not_in_the_file() {
    let text = "Switch\t8 \"S-0000000000000010\"\t\t# \"sw\"\n\
[1]\t\"S-0000000000000010\"[2]\t\t# \"sw\" lid 1 4xHDR\n\
[2]\t\"S-0000000000000010\"[1]\t\t# \"sw\" lid 1 4xHDR\n\
[3]\t\"H-0000000000000099\"[1](99) \t\t# \"gone\" lid 5 4xHDR\n";
    let e = ibnd::parse(text).unwrap_err();
    assert_eq!(
        e.to_string(),
        "line 4: \"S-0000000000000010\"[3] is cabled to \"H-0000000000000099\"[1], but no \
         node \"H-0000000000000099\" is in this file"
    );
}

/// A cable between two ports of one switch loads (once, from either side or both); a port
/// cabled to itself does not.
#[test]
fn loopback_cables_load() {
    for text in [
        "Switch 8 \"s\"\n[1] \"s\"[2] # \"s\" lid 1 4xEDR\n[2] \"s\"[1] # \"s\" lid 1 4xEDR\n[3] \"h\"[1]\n\nHca 1 \"h\"\n[1] \"s\"[3]\n",
        "Switch 8 \"s\"\n[2] \"s\"[1] # \"s\" lid 1 4xEDR\n[3] \"h\"[1]\n\nHca 1 \"h\"\n[1] \"s\"[3]\n",
    ] {
        let f = ibnd::parse(text).unwrap();
        assert_eq!(f.link_count(), 2);
        let s = f.node_by_guid(0x200000).unwrap();
        assert_eq!(
            f.peer(End { node: s, port: 1 }),
            Some(End { node: s, port: 2 })
        );
        assert_eq!(
            f.peer(End { node: s, port: 2 }),
            Some(End { node: s, port: 1 })
        );
        assert_eq!(
            f.node(s).port(1).unwrap().rate_active(),
            Rate::parse("4xEDR")
        );
        let back = ibnd::parse(&export::ibnd::write(&f, None)).unwrap();
        let d = diff(&f, &back);
        assert!(d.is_empty(), "{d}");
        // A loopback is one link with both ends on one node: check runs over it.
        let eval = evaluate_offline(&f, None, &HealthOptions::default());
        assert_eq!(eval.health.links.len(), 2);
    }
    let e = ibnd::parse("Switch 8 \"s\"\n[1] \"s\"[1]\n").unwrap_err();
    assert_eq!(e.to_string(), "line 2: \"s\"[1] is cabled to itself");
}

/// A switch's SHARP aggregation node (a CA named "Mellanox Technologies Aggregation
/// Node") is its own kind, through a re-export too.
#[test]
fn aggregation_nodes_are_their_own_kind() {
    let text = "switchguid=0xb8599f0300fc6de4(b8599f0300fc6de4)
Switch\t41 \"S-b8599f0300fc6de4\"\t\t# \"MF0;sw:MQM8700/U1\" enhanced port 0 lid 13 lmc 0
[41]\t\"H-b8599f0300fc6dec\"[1](b8599f0300fc6dec) \t\t# \"Mellanox Technologies Aggregation Node\" lid 14 4xHDR

caguid=0xb8599f0300fc6dec
Ca\t1 \"H-b8599f0300fc6dec\"\t\t# \"Mellanox Technologies Aggregation Node\"
[1](b8599f0300fc6dec) \t\"S-b8599f0300fc6de4\"[41]\t\t# lid 14 lmc 0 \"MF0;sw:MQM8700/U1\" lid 13 4xHDR
";
    let f = ibnd::parse(text).unwrap();
    let an = f.node(f.node_by_guid(0xb8599f0300fc6dec).unwrap());
    assert_eq!(an.kind, NodeKind::AggregationNode);
    let back = ibnd::parse(&export::ibnd::write(&f, None)).unwrap();
    let an = back.node(back.node_by_guid(0xb8599f0300fc6dec).unwrap());
    assert_eq!(an.kind, NodeKind::AggregationNode);
}

/// Lines before the topology that are not part of it (a captured stderr) are skipped with
/// a warning quoting each; a file of nothing but such lines, or such a line later on, is
/// an error.
#[test]
fn leading_diagnostic_lines() {
    let text = "ibwarn: [1234] mad_rpc: _do_madrpc failed; dport (DR path slid 0; dlid 0; 0,1)\n\
src/query_smp.c:195; umad (DR path slid 0; dlid 0; 0,1,1,31 Attr 0x11:0) bad status 110\n\
#\n# Topology file\n#\nSwitch 8 \"s\"\n[1] \"h\"[1]\n\nHca 1 \"h\"\n[1] \"s\"[1]\n";
    let parsed = ibnd::parse_with_warnings(text).unwrap();
    assert_eq!(parsed.fabric.node_count(), 2);
    let lines: Vec<String> = parsed.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines,
        [
            "line 1: skipped a line before the topology that is not part of it: \"ibwarn: \
             [1234] mad_rpc: _do_madrpc failed; dport (DR path slid 0; dlid 0; 0,1)\"",
            "line 2: skipped a line before the topology that is not part of it: \
             \"src/query_smp.c:195; umad (DR path slid 0; dlid 0; 0,1,1,31 Attr 0x11:0) bad \
             status 110\""
        ]
    );
    // Terminal escapes in a skipped line are made visible.
    let parsed = ibnd::parse_with_warnings("\x1b]0;x\x07 oops\nSwitch 8 \"s\"\n").unwrap();
    assert!(!parsed.warnings[0].message.contains('\x1b'));

    let e = ibnd::parse("hello world\nstill not a topology\n").unwrap_err();
    assert_eq!(e.line, 1);
    let e = ibnd::parse("Switch 8 \"s\"\n\nhello world\n").unwrap_err();
    assert_eq!(e.line, 3);
}

/// A ports report that cannot be read names the format and the command to use instead.
#[test]
fn ports_report_errors_name_the_format() {
    let text =
        "SW     3  1 0x0000000000200001 4x SDR - CA     5  1 0x0000000000100004 ( 'sw' - 'h' )\n\
SW     3  1 0x0000000000200001 4x SDR - CA     6  1 0x0000000000100005 ( 'sw' - 'h2' )\n";
    let e = ibnd::parse(text).unwrap_err();
    assert_eq!(e.line, 2);
    let msg = e.to_string();
    assert!(msg.contains("`ibnetdiscover -p` ports report"), "{msg}");
    assert!(msg.contains("plain `ibnetdiscover`"), "{msg}");
    let e = ibnd::parse(
        "SW     3  1 0x0000000000200001 4x SDR - CA     5  1 0x0000000000100004 ( 'sw' - 'h' )\n\
         garbage\n",
    )
    .unwrap_err();
    assert_eq!(e.line, 2);
}
