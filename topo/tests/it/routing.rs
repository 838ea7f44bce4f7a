//! Routing analysis on hand-built fabrics whose routes, counts and rates are worked out by
//! hand in the comments.

use ibscope_mad::attr::link::{Rate, Speed, Width};
use ibscope_mad::attr::PortState;
use ibscope_topo::model::{Node, NodeKind, Port, SwitchFacts, NO_ROUTE};
use ibscope_topo::routing::{
    self, check, compute_minhop_lfts, compute_minhop_lfts_with, dump, load, trace, BreakKind,
    CheckOptions, Direction, MinhopOptions, Pattern, TraceError,
};
use ibscope_topo::{End, Fabric, NodeId};

/// Builds fabrics: every node gets the next GUID and LID, every port is Active 4xHDR.
struct Builder {
    fabric: Fabric,
    next_guid: u64,
    next_lid: u16,
}

fn port(number: u8, guid: u64, lid: u16) -> Port {
    Port {
        number,
        guid,
        lid,
        state: Some(PortState::Active),
        width_active: Some(Width::X4),
        speed_active: Some(Speed::Hdr),
        ..Default::default()
    }
}

impl Builder {
    fn new() -> Self {
        Builder {
            fabric: Fabric::new(),
            next_guid: 0x1000,
            next_lid: 1,
        }
    }
    fn switch(&mut self, name: &str, ports: u8) -> NodeId {
        let guid = self.next_guid;
        self.next_guid += 0x10;
        let lid = self.next_lid;
        self.next_lid += 1;
        let node = Node {
            guid,
            kind: NodeKind::Switch,
            description: name.into(),
            num_ports: ports,
            ports: (0..=ports).map(|p| port(p, guid, lid)).collect(),
            switch: Some(SwitchFacts::default()),
            ..Default::default()
        };
        self.fabric.add_node(node).unwrap()
    }
    fn host_lmc(&mut self, name: &str, lmc: u8) -> NodeId {
        let guid = self.next_guid;
        self.next_guid += 0x10;
        let lid = self.next_lid;
        self.next_lid += 1 << lmc;
        let mut p = port(1, guid + 1, lid);
        p.lmc = lmc;
        let node = Node {
            guid,
            kind: NodeKind::Ca,
            description: name.into(),
            num_ports: 1,
            ports: vec![p],
            ..Default::default()
        };
        self.fabric.add_node(node).unwrap()
    }
    fn host(&mut self, name: &str) -> NodeId {
        self.host_lmc(name, 0)
    }
    fn link(&mut self, a: NodeId, pa: u8, b: NodeId, pb: u8) {
        self.fabric
            .connect(End { node: a, port: pa }, End { node: b, port: pb })
            .unwrap();
    }
}

fn end(node: NodeId, port: u8) -> End {
    End { node, port }
}

fn lid(f: &Fabric, n: NodeId) -> u16 {
    f.node(n).lid().unwrap()
}

fn set_lft(f: &mut Fabric, sw: NodeId, lid: u16, port: u8) {
    f.node_mut(sw).switch.as_mut().unwrap().lft[usize::from(lid)] = port;
}

/// Two leaves with two hosts each under one spine:
///
/// ```text
///            S (1: L1, 2: L2)
///          /   \
///   L1 (3: S)   L2 (3: S)
///   1:h1 2:h2   1:h3 2:h4
/// ```
struct Small {
    f: Fabric,
    s: NodeId,
    l1: NodeId,
    l2: NodeId,
    h: [NodeId; 4],
}

fn small_fabric(with_l2_uplink: bool) -> Small {
    let mut b = Builder::new();
    let s = b.switch("S", 4);
    let l1 = b.switch("L1", 4);
    let l2 = b.switch("L2", 4);
    let h = [b.host("h1"), b.host("h2"), b.host("h3"), b.host("h4")];
    b.link(h[0], 1, l1, 1);
    b.link(h[1], 1, l1, 2);
    b.link(h[2], 1, l2, 1);
    b.link(h[3], 1, l2, 2);
    b.link(l1, 3, s, 1);
    if with_l2_uplink {
        b.link(l2, 3, s, 2);
    }
    Small {
        f: b.fabric,
        s,
        l1,
        l2,
        h,
    }
}

fn small() -> Small {
    let mut t = small_fabric(true);
    compute_minhop_lfts(&mut t.f);
    t
}

#[test]
fn minhop_tables_of_the_small_fabric() {
    let t = small();
    let f = &t.f;
    // LIDs: S 1, L1 2, L2 3, h1..h4 4..7.
    let lft = |sw: NodeId| f.node(sw).switch.as_ref().unwrap().lft.clone();
    assert_eq!(lft(t.l1), vec![NO_ROUTE, 3, 0, 3, 1, 2, 3, 3]);
    assert_eq!(lft(t.s), vec![NO_ROUTE, 0, 1, 2, 1, 1, 2, 2]);
    assert_eq!(lft(t.l2), vec![NO_ROUTE, 3, 3, 0, 3, 3, 1, 2]);
    assert_eq!(f.node(t.s).switch.as_ref().unwrap().linear_fdb_top, 7);
}

#[test]
fn trace_host_to_host_across_the_spine() {
    let t = small();
    let p = trace(&t.f, end(t.h[0], 1), lid(&t.f, t.h[2])).unwrap();
    let names: Vec<_> = p.hops.iter().map(|h| h.node.name.as_ref()).collect();
    assert_eq!(names, ["h1", "L1", "S", "L2", "h3"]);
    let ports: Vec<_> = p.hops.iter().map(|h| (h.in_port, h.out_port)).collect();
    assert_eq!(
        ports,
        [
            (None, Some(1)),
            (Some(1), Some(3)),
            (Some(1), Some(2)),
            (Some(3), Some(1)),
            (Some(1), None)
        ]
    );
    assert_eq!(p.link_hops(), 4);
    assert_eq!(&*p.dst.node.name, "h3");
    assert_eq!(p.dst.port, 1);
    // Same leaf: two links.
    let p = trace(&t.f, end(t.h[0], 1), lid(&t.f, t.h[1])).unwrap();
    assert_eq!(p.link_hops(), 2);
}

#[test]
fn trace_to_a_switch_ends_on_its_port_0() {
    let t = small();
    let p = trace(&t.f, end(t.h[0], 1), lid(&t.f, t.s)).unwrap();
    let names: Vec<_> = p.hops.iter().map(|h| h.node.name.as_ref()).collect();
    assert_eq!(names, ["h1", "L1", "S"]);
    assert_eq!(p.dst.port, 0);
    assert_eq!(p.hops[2].in_port, Some(1));
    assert_eq!(p.hops[2].out_port, None);
    // From a switch: the walk starts at its own LFT.
    let p = trace(&t.f, end(t.l2, 0), lid(&t.f, t.h[0])).unwrap();
    let names: Vec<_> = p.hops.iter().map(|h| h.node.name.as_ref()).collect();
    assert_eq!(names, ["L2", "S", "L1", "h1"]);
    // To itself.
    let p = trace(&t.f, end(t.h[0], 1), lid(&t.f, t.h[0])).unwrap();
    assert_eq!(p.link_hops(), 0);
}

#[test]
fn trace_errors_name_the_break() {
    // Unset entry.
    let mut t = small();
    let h3 = lid(&t.f, t.h[2]);
    set_lft(&mut t.f, t.l1, h3, NO_ROUTE);
    match trace(&t.f, end(t.h[0], 1), h3) {
        Err(TraceError::NoRoute { switch, lid }) => {
            assert_eq!(&*switch.name, "L1");
            assert_eq!(lid, h3);
        }
        other => panic!("{other:?}"),
    }
    // Above LinearFDBTop.
    let mut t = small();
    t.f.node_mut(t.s).switch.as_mut().unwrap().linear_fdb_top = 5;
    match trace(&t.f, end(t.h[0], 1), lid(&t.f, t.h[2])) {
        Err(TraceError::NoRoute { switch, .. }) => assert_eq!(&*switch.name, "S"),
        other => panic!("{other:?}"),
    }
    // Egress port down.
    let mut t = small();
    t.f.node_mut(t.s).port_mut(2).unwrap().state = Some(PortState::Down);
    let partial = routing::trace_partial(&t.f, end(t.h[0], 1), lid(&t.f, t.h[2]));
    assert_eq!(
        partial.hops.len(),
        3,
        "h1, L1 and S walked before the break"
    );
    match partial.error {
        Some(TraceError::PortDown { switch, port }) => {
            assert_eq!(&*switch.name, "S");
            assert_eq!(port, 2);
        }
        other => panic!("{other:?}"),
    }
    // Loop: S sends h3 back down to L1, which sends it up again.
    let mut t = small();
    set_lft(&mut t.f, t.s, h3, 1);
    let e = trace(&t.f, end(t.h[0], 1), h3).unwrap_err();
    assert!(
        matches!(&e, TraceError::Loop { at } if &*at.name == "L1"),
        "{e}"
    );
    assert!(e.to_string().contains("\"L1\""));
    // Misdelivered: L1 sends h3's LID to h1.
    let mut t = small();
    set_lft(&mut t.f, t.l1, h3, 1);
    match trace(&t.f, end(t.h[1], 1), h3) {
        Err(TraceError::Misdelivered { at, lid }) => {
            assert_eq!(&*at.node.name, "h1");
            assert_eq!(lid, h3);
        }
        other => panic!("{other:?}"),
    }
    // LFT not read.
    let mut t = small();
    t.f.node_mut(t.l2).switch.as_mut().unwrap().lft.clear();
    match trace(&t.f, end(t.h[0], 1), h3) {
        Err(TraceError::LftNotRead { switch }) => assert_eq!(&*switch.name, "L2"),
        other => panic!("{other:?}"),
    }
    // Source down.
    let mut t = small();
    t.f.node_mut(t.h[0]).port_mut(1).unwrap().state = Some(PortState::Down);
    assert!(matches!(
        trace(&t.f, end(t.h[0], 1), h3),
        Err(TraceError::SourceDown { .. })
    ));
}

#[test]
fn lmc_lids_are_each_routed() {
    let mut b = Builder::new();
    let l = b.switch("L", 4);
    let s1 = b.switch("S1", 4);
    let s2 = b.switch("S2", 4);
    let l2 = b.switch("L2", 4);
    let a = b.host_lmc("a", 1); // LIDs 5 and 6
    let z = b.host("z");
    b.link(a, 1, l, 1);
    b.link(z, 1, l2, 1);
    b.link(l, 2, s1, 1);
    b.link(l, 3, s2, 1);
    b.link(l2, 2, s1, 2);
    b.link(l2, 3, s2, 2);
    let mut f = b.fabric;
    compute_minhop_lfts(&mut f);
    let base = lid(&f, a);
    let p0 = trace(&f, end(z, 1), base).unwrap();
    let p1 = trace(&f, end(z, 1), base + 1).unwrap();
    assert_eq!(&*p0.dst.node.name, "a");
    assert_eq!(&*p1.dst.node.name, "a");
    // Balancing spreads the two LIDs of `a` over both spines.
    assert_ne!(p0.hops[2].node.name, p1.hops[2].node.name);
    let r = check(&f, &CheckOptions::default());
    assert_eq!(r.ca_destinations, 3);
    assert!(r.is_clean(), "{r:#?}");
}

#[test]
fn dump_resolves_destinations() {
    let t = small();
    let d = dump(&t.f, t.l1);
    let rows: Vec<_> = d
        .iter()
        .map(|e| {
            (
                e.lid,
                e.port,
                e.dest.as_ref().unwrap().node.name.to_string(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (1, 3, "S".to_string()),
            (2, 0, "L1".into()),
            (3, 3, "L2".into()),
            (4, 1, "h1".into()),
            (5, 2, "h2".into()),
            (6, 3, "h3".into()),
            (7, 3, "h4".into())
        ]
    );
    assert_eq!(&*d[3].peer.as_ref().unwrap().node.name, "h1");
    assert!(d[1].peer.is_none());
    assert!(dump(&t.f, t.h[0]).is_empty());
    let text = routing::format_ibroute_like(&t.f, t.l1);
    assert!(
        text.starts_with("Unicast lids [0x0-0x7] of switch Lid 2 guid 0x0000000000001010 (L1):\n")
    );
    assert!(text.contains("\n0x0004 001 : (Channel Adapter portguid 0x0000000000001031: 'h1')\n"));
    assert!(text.contains("\n0x0002 000 : (Switch portguid 0x0000000000001010: 'L1')\n"));
    assert!(text.ends_with("7 valid lids dumped \n"));
}

#[test]
fn check_small_fabric_counts() {
    let t = small();
    let r = check(
        &t.f,
        &CheckOptions {
            port_details: true,
            ..Default::default()
        },
    );
    assert_eq!(r.sources, 4);
    assert_eq!(r.ca_destinations, 4);
    assert_eq!(r.switch_destinations, 3);
    // 4 sources x (3 other hosts + 3 switches).
    assert_eq!(r.pairs, 24);
    assert_eq!(r.pairs_ok, 24);
    assert!(r.is_clean());
    // Hosts: 4 same-leaf pairs at 2 links, 8 cross pairs at 4. Switches: own leaf 1 link,
    // spine 2, other leaf 3, 4 pairs each.
    assert_eq!(r.hop_histogram, vec![0, 4, 8, 4, 8]);
    assert_eq!(r.max_hops, 4);
    let port = |from: &str, p: u8| {
        r.balance
            .ports
            .iter()
            .find(|l| &*l.from.node.name == from && l.from.port == p)
            .unwrap()
            .clone()
    };
    // L1 -> S: h1, h2 to h3, h4. LIDs out of it: h3, h4.
    let up = port("L1", 3);
    assert_eq!(
        (up.routes, up.lids, up.direction, up.layer),
        (4, 2, Direction::Up, Some(1))
    );
    let down = port("S", 2);
    assert_eq!(
        (down.routes, down.lids, down.direction, down.layer),
        (4, 2, Direction::Down, Some(2))
    );
    // L2 -> h3: from h1, h2, h4.
    let to_h3 = port("L2", 1);
    assert_eq!(
        (to_h3.routes, to_h3.lids, to_h3.direction),
        (3, 1, Direction::ToCa)
    );
    // h1 -> L1: to h2, h3, h4.
    let inject = port("h1", 1);
    assert_eq!((inject.routes, inject.direction), (3, Direction::FromCa));
    assert_eq!(r.balance.hottest[0].routes, 4);
    let leaf_up = r
        .balance
        .by_layer
        .iter()
        .find(|s| s.layer == Some(1) && s.direction == Direction::Up)
        .unwrap();
    assert_eq!(
        (leaf_up.ports, leaf_up.routes_min, leaf_up.routes_max),
        (2, 4, 4)
    );
    assert_eq!(leaf_up.imbalance, Some(1.0));
    assert!(r.balance.lft_unbalanced.is_empty());
    assert_eq!(r.credit_loops_found, 0);
    let json = serde_json::to_value(&r).unwrap();
    assert_eq!(json["pairs_ok"], 24);
    assert_eq!(json["balance"]["hottest"][0]["routes"], 4);
    assert_eq!(json["balance"]["by_layer"][0]["direction"], "from_ca");
}

#[test]
fn black_hole_from_a_missing_link_with_the_lft_entry_kept() {
    // LFTs computed with the L2-S link, then the same fabric without it.
    let full = small();
    let mut t = small_fabric(false);
    for sw in [t.s, t.l1, t.l2] {
        t.f.node_mut(sw).switch = full.f.node(sw).switch.clone();
    }
    let r = check(&t.f, &CheckOptions::default());
    assert!(!r.is_clean());
    let at = |name: &str| {
        r.breaks
            .iter()
            .find(|b| &*b.at.name == name)
            .unwrap_or_else(|| panic!("no break at {name}: {:#?}", r.breaks))
    };
    // S port 2: h3, h4 and L2's LID; pairs from h1, h2 to those 3.
    let s = at("S");
    assert_eq!(
        (s.kind, s.port, s.destinations, s.pairs),
        (BreakKind::PortDown, Some(2), 3, 6)
    );
    // L2 port 3: h1, h2, S and L1; pairs from h3, h4 to those 4.
    let l2 = at("L2");
    assert_eq!(
        (l2.kind, l2.port, l2.destinations, l2.pairs),
        (BreakKind::PortDown, Some(3), 4, 8)
    );
    assert_eq!(r.breaks.len(), 2);
    assert_eq!(r.pairs_broken, 14);
    assert_eq!(r.pairs_ok, 24 - 14);
    // Every destination misses some source.
    assert_eq!(r.unreachable_destinations, 7);
    match trace(&t.f, end(t.h[0], 1), lid(&t.f, t.h[2])) {
        Err(TraceError::PortDown { switch, port }) => {
            assert_eq!((&*switch.name, port), ("S", 2))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn black_hole_from_an_unset_entry() {
    let mut t = small();
    let h3 = lid(&t.f, t.h[2]);
    set_lft(&mut t.f, t.l1, h3, NO_ROUTE);
    let r = check(&t.f, &CheckOptions::default());
    assert_eq!(r.breaks.len(), 1);
    let b = &r.breaks[0];
    assert_eq!(
        (&*b.at.name, b.kind, b.destinations, b.pairs),
        ("L1", BreakKind::NoRoute, 1, 2)
    );
    assert_eq!(b.example_lids, vec![h3]);
    assert_eq!(r.unreachable_destinations, 1);
    assert_eq!(r.unreachable[0].dst_lid, h3);
    assert_eq!(
        (r.unreachable[0].sources_failed, r.unreachable[0].sources),
        (2, 3)
    );
    // check_lft_balance sees L1 uplink with one LID less.
    assert_eq!(r.balance.lft_switches_checked, 3);
}

#[test]
fn forwarding_loop_in_lfts() {
    let mut t = small();
    let h3 = lid(&t.f, t.h[2]);
    set_lft(&mut t.f, t.s, h3, 1);
    let r = check(&t.f, &CheckOptions::default());
    assert_eq!(r.loops_found, 1);
    let l = &r.loops[0];
    assert_eq!(l.dst_lid, h3);
    let mut names: Vec<_> = l.cycle.iter().map(|n| &*n.name).collect();
    names.sort();
    assert_eq!(names, ["L1", "S"]);
    // h1 and h2 go round; h4 (same leaf as h3) is fine.
    assert_eq!(l.pairs, 2);
    assert_eq!(r.pairs_looping, 2);
    assert_eq!(r.pairs_broken, 0);
    assert!(!r.is_clean());
}

#[test]
fn lft_not_read_is_reported() {
    let mut t = small();
    t.f.node_mut(t.l2).switch.as_mut().unwrap().lft.clear();
    let r = check(&t.f, &CheckOptions::default());
    assert_eq!(r.lft_not_read.len(), 1);
    assert_eq!(&*r.lft_not_read[0].name, "L2");
    let b = r
        .breaks
        .iter()
        .find(|b| b.kind == BreakKind::LftNotRead)
        .unwrap();
    // Every destination breaks at L2 for its own hosts, plus h1/h2 to h3, h4, L2.
    assert_eq!(b.destinations, 7);
    assert_eq!(b.pairs, 2 * 6 + 2 * 3);
}

/// Ring of switches X0..X(n-1): port 1 to the next switch's port 2, port 3 to a host.
fn ring(n: usize) -> (Fabric, Vec<NodeId>, Vec<NodeId>) {
    let mut b = Builder::new();
    let xs: Vec<NodeId> = (0..n).map(|i| b.switch(&format!("X{i}"), 3)).collect();
    let hs: Vec<NodeId> = (0..n).map(|i| b.host(&format!("h{i}"))).collect();
    for i in 0..n {
        b.link(xs[i], 1, xs[(i + 1) % n], 2);
        b.link(xs[i], 3, hs[i], 1);
    }
    (b.fabric, xs, hs)
}

#[test]
fn ring_of_four_lowest_port_minhop_has_a_credit_loop() {
    // Ties (distance 2) go to port 1: every switch sends the opposite host clockwise, so
    // X0->X1 waits on X1->X2, which waits on X2->X3, on X3->X0, on X0->X1.
    let (mut f, xs, hs) = ring(4);
    compute_minhop_lfts_with(&mut f, &MinhopOptions { balance: false });
    let p = trace(&f, end(hs[0], 1), lid(&f, hs[2])).unwrap();
    let names: Vec<_> = p.hops.iter().map(|h| h.node.name.as_ref()).collect();
    assert_eq!(names, ["h0", "X0", "X1", "X2", "h2"]);
    let r = check(&f, &CheckOptions::default());
    assert!(r.pairs_broken == 0 && r.pairs_looping == 0);
    assert_eq!(r.credit_loops_found, 1);
    let c = &r.credit_loops[0];
    assert_eq!((c.channels, c.switches, c.cycle_len), (4, 4, 4));
    for ch in &c.cycle {
        assert_eq!(ch.from.port, 1, "clockwise channels: {ch}");
        assert_eq!(ch.to.port, 2);
    }
    let froms: std::collections::BTreeSet<_> = c
        .cycle
        .iter()
        .map(|ch| f.node_by_guid(ch.from.node.guid).unwrap())
        .collect();
    assert_eq!(froms, xs.iter().copied().collect());
    // The routes behind it: distance-2 routes, 3 links... 4 links host to host.
    assert!(!c.example_routes.is_empty());
    for p in &c.example_routes {
        assert_eq!(p.link_hops(), 4, "{p:?}");
    }
    assert_eq!(r.cdg.cyclic_components, 1);
}

#[test]
fn ring_of_four_balanced_minhop_avoids_the_loop() {
    // With balancing, ties alternate by LID order (hosts h0..h3 are LIDs 5..8):
    // X0 sends h2 counter-clockwise (its port 1 already carries h1), X1 sends h3
    // clockwise, X2 sends h0 clockwise, X3 sends h1 counter-clockwise. Dependencies:
    // X0X3->X3X2, X3X2->X2X1, X1X2->X2X3, X2X3->X3X0: two chains, no cycle.
    let (mut f, _, hs) = ring(4);
    compute_minhop_lfts(&mut f);
    let names = |src: usize, dst: usize| -> Vec<String> {
        let p = trace(&f, end(hs[src], 1), lid(&f, hs[dst])).unwrap();
        p.hops.iter().map(|h| h.node.name.to_string()).collect()
    };
    assert_eq!(names(0, 2), ["h0", "X0", "X3", "X2", "h2"]);
    assert_eq!(names(1, 3), ["h1", "X1", "X2", "X3", "h3"]);
    assert_eq!(names(2, 0), ["h2", "X2", "X3", "X0", "h0"]);
    assert_eq!(names(3, 1), ["h3", "X3", "X2", "X1", "h1"]);
    let r = check(&f, &CheckOptions::default());
    assert_eq!(r.cdg.dependencies, 4);
    assert_eq!(r.credit_loops_found, 0);
}

#[test]
fn ring_of_five_minhop_always_has_credit_loops() {
    // Shortest paths are unique: every switch reaches i+2 through i+1 and i-2 through i-1,
    // a cycle each way round.
    let (mut f, _, _) = ring(5);
    compute_minhop_lfts(&mut f);
    let r = check(&f, &CheckOptions::default());
    assert_eq!(r.credit_loops_found, 2);
    for c in &r.credit_loops {
        assert_eq!((c.channels, c.cycle_len), (5, 5));
        let port = c.cycle[0].from.port;
        assert!(c.cycle.iter().all(|ch| ch.from.port == port));
    }
}

/// Two-level fat tree: 4 leaves x 2 hosts, 2 spines; leaf ports 1-2 hosts, 3-4 spines.
fn fat_tree() -> Fabric {
    let mut b = Builder::new();
    let spines: Vec<NodeId> = (0..2).map(|i| b.switch(&format!("S{i}"), 4)).collect();
    let leaves: Vec<NodeId> = (0..4).map(|i| b.switch(&format!("L{i}"), 4)).collect();
    for (i, &l) in leaves.iter().enumerate() {
        for k in 0..2 {
            let h = b.host(&format!("h{}", 2 * i + k));
            b.link(h, 1, l, k as u8 + 1);
        }
        for (j, &s) in spines.iter().enumerate() {
            b.link(l, 3 + j as u8, s, i as u8 + 1);
        }
    }
    let mut f = b.fabric;
    compute_minhop_lfts(&mut f);
    f
}

#[test]
fn fat_tree_minhop_is_deadlock_free_and_balanced() {
    let f = fat_tree();
    let r = check(&f, &CheckOptions::default());
    assert!(r.is_clean(), "{r:#?}");
    assert_eq!(r.credit_loops_found, 0);
    assert!(r.cdg.dependencies > 0);
    // 8 hosts: 8 x 7 host pairs, 8 x 6 switch pairs.
    assert_eq!(r.pairs, 8 * 7 + 8 * 6);
    // Each leaf: 6 remote host LIDs over 2 uplinks = 3 each; 2 sources x 3 = 6 routes.
    let up = r
        .balance
        .by_layer
        .iter()
        .find(|s| s.layer == Some(1) && s.direction == Direction::Up)
        .unwrap();
    assert_eq!(up.ports, 8);
    assert_eq!((up.lids_min, up.lids_max), (3, 3));
    assert_eq!((up.routes_min, up.routes_max), (6, 6));
    // Spine down ports: each spine routes all 8 host LIDs, 2 per leaf; the 48 cross-leaf
    // routes split evenly over the 8 spine down ports.
    let down = r
        .balance
        .by_layer
        .iter()
        .find(|s| s.layer == Some(2) && s.direction == Direction::Down)
        .unwrap();
    assert_eq!(down.ports, 8);
    assert_eq!((down.lids_min, down.lids_max), (2, 2));
    assert_eq!((down.routes_min, down.routes_max), (6, 6), "{down:?}");
    assert!(r.balance.lft_unbalanced.is_empty());
    assert_eq!(r.balance.lft_switches_checked, 6);
}

#[test]
fn lft_balance_flags_a_skewed_leaf() {
    let mut f = fat_tree();
    let l0 = f.nodes_by_description("L0")[0];
    // Send every remote host LID of L0 up port 3: 6 LIDs vs 0.
    for h in 2..8 {
        let n = f.nodes_by_description(&format!("h{h}"))[0];
        let l = lid(&f, n);
        set_lft(&mut f, l0, l, 3);
    }
    let r = check(&f, &CheckOptions::default());
    assert!(r.breaks.is_empty());
    let u = &r.balance.lft_unbalanced;
    assert_eq!(u.len(), 1, "{u:?}");
    assert_eq!(&*u[0].switch.name, "L0");
    assert_eq!(u[0].direction, Direction::Up);
    assert_eq!((u[0].min, u[0].max), (0, 6));
    assert_eq!(u[0].ports, vec![(3, 6), (4, 0)]);
}

#[test]
fn load_ring_in_host_order_fits_at_line_rate() {
    // h1->h2 and h3->h4 stay in their leaf; h2->h3 and h4->h1 cross the spine once each way.
    let t = small();
    let hosts: Vec<End> = t.h.iter().map(|&h| end(h, 1)).collect();
    let r = load(&t.f, Pattern::Ring, &hosts).unwrap();
    assert_eq!(r.flows_total, 4);
    assert_eq!(r.flows_unroutable, 0);
    assert_eq!(r.max_flows_per_link, 1);
    for fl in &r.flows {
        assert_eq!(fl.rate_gbps, Some(200.0));
    }
    assert_eq!(r.ring_allreduce_busbw_gbps, Some(200.0));
    assert_eq!(r.flows[1].link_hops, 4);
}

#[test]
fn load_ring_in_a_bad_order_halves_the_bus_bandwidth() {
    // Order h1 h3 h2 h4: every ring hop crosses the spine; L1->S carries h1->h3 and h2->h4.
    let t = small();
    let order = [t.h[0], t.h[2], t.h[1], t.h[3]];
    let hosts: Vec<End> = order.iter().map(|&h| end(h, 1)).collect();
    let r = load(&t.f, Pattern::Ring, &hosts).unwrap();
    assert_eq!(r.max_flows_per_link, 2);
    let hot = &r.hottest_links[0];
    assert_eq!(hot.flows, 2);
    assert_eq!(hot.equal_share_gbps, Some(100.0));
    assert!(hot.saturated);
    assert_eq!(r.min_flow_gbps, Some(100.0));
    assert_eq!(r.ring_allreduce_busbw_gbps, Some(100.0));
}

#[test]
fn load_degraded_uplink_is_the_hot_link() {
    // S-L2 at 1xHDR (50 Gb/s) both ways: ring hops h2->h3 (S->L2) and h4->h1 (L2->S)
    // cross it.
    let mut t = small();
    for (n, p) in [(t.s, 2), (t.l2, 3)] {
        t.f.node_mut(n).port_mut(p).unwrap().width_active = Some(Width::X1);
    }
    let hosts: Vec<End> = t.h.iter().map(|&h| end(h, 1)).collect();
    let r = load(&t.f, Pattern::Ring, &hosts).unwrap();
    assert_eq!(r.ring_allreduce_busbw_gbps, Some(50.0));
    let slow = r.flows.iter().find(|f| f.rate_gbps == Some(50.0)).unwrap();
    assert_eq!(&*slow.src.node.name, "h2");
    let b = slow.bottleneck.as_ref().unwrap();
    assert_eq!((b.from.node.name.as_ref(), b.from.port), ("S", 2));
    let back = r.flows.iter().find(|f| &*f.src.node.name == "h4").unwrap();
    assert_eq!(back.rate_gbps, Some(50.0));
    let b = back.bottleneck.as_ref().unwrap();
    assert_eq!((b.from.node.name.as_ref(), b.from.port), ("L2", 3));
    // The two leaf-local flows are unaffected.
    assert_eq!(
        r.flows
            .iter()
            .filter(|f| f.rate_gbps == Some(200.0))
            .count(),
        2
    );
}

#[test]
fn load_all_to_all_is_max_min_fair_not_equal_share() {
    // 12 flows. The 8 cross-leaf flows share each 200 Gb/s uplink four ways: 50 each.
    // A local flow such as h1->h2 shares h1's injection link (3 flows) and L1->h2 (3 flows):
    // equal share would give 66.7, but the two cross flows on each stop at 50, leaving 100.
    let t = small();
    let hosts: Vec<End> = t.h.iter().map(|&h| end(h, 1)).collect();
    let r = load(&t.f, Pattern::AllToAll, &hosts).unwrap();
    assert_eq!(r.flows_total, 12);
    assert_eq!(r.max_flows_per_link, 4);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    for fl in &r.flows {
        let same_leaf = (fl.src.node.name < "h3".into()) == (fl.dst.node.name < "h3".into());
        let want = if same_leaf { 100.0 } else { 50.0 };
        assert!(
            close(fl.rate_gbps.unwrap(), want),
            "{} -> {}: {:?}",
            fl.src.route_text(),
            fl.dst.route_text(),
            fl.rate_gbps
        );
    }
    assert!(close(
        r.mean_flow_gbps.unwrap(),
        (8.0 * 50.0 + 4.0 * 100.0) / 12.0
    ));
    assert_eq!(r.ring_allreduce_busbw_gbps, None);
    // Pairs: h1->h2 and h3->h4, both local.
    let p = load(&t.f, Pattern::Pairs, &hosts).unwrap();
    assert_eq!(p.flows_total, 2);
    assert_eq!(p.min_flow_gbps, Some(200.0));
}

#[test]
fn load_reports_unroutable_flows_and_bad_input() {
    let mut t = small();
    let h3 = lid(&t.f, t.h[2]);
    set_lft(&mut t.f, t.l1, h3, NO_ROUTE);
    let hosts: Vec<End> = t.h.iter().map(|&h| end(h, 1)).collect();
    let r = load(&t.f, Pattern::Ring, &hosts).unwrap();
    assert_eq!(r.flows_unroutable, 1);
    assert!(matches!(
        r.unroutable[0].error,
        Some(TraceError::NoRoute { .. })
    ));
    assert_eq!(r.ring_allreduce_busbw_gbps, None);
    assert!(load(&t.f, Pattern::Ring, &hosts[..1]).is_err());
    assert_eq!("all-to-all".parse::<Pattern>(), Ok(Pattern::AllToAll));
    // Unknown capacities: no rate, but counted.
    let mut t = small();
    for &h in &t.h {
        t.f.node_mut(h).port_mut(1).unwrap().speed_active = None;
    }
    for sw in [t.s, t.l1, t.l2] {
        for p in t.f.node_mut(sw).ports.iter_mut() {
            p.speed_active = None;
        }
    }
    let r = load(&t.f, Pattern::Ring, &hosts).unwrap();
    assert_eq!(r.min_flow_gbps, None);
    assert!(r.unknown_capacity_links > 0);
}

/// A generated 3-level fat tree (pods of leaves and aggregation switches under a core),
/// with LIDs numbered switches first and every port Active 4xHDR.
fn generated_fat_tree(radix: u8, hosts: usize) -> Fabric {
    use ibscope_topo::gen::{fat_tree, FatTreeSpec};
    let text = fat_tree(&FatTreeSpec::new(3, radix, hosts)).unwrap();
    let mut f = ibscope_topo::ibnd::parse(&text).unwrap();
    ibscope_topo::gen::bring_up(&mut f, Rate::new(Width::X4, Speed::Hdr));
    compute_minhop_lfts(&mut f);
    f
}

#[test]
fn check_matches_brute_force_tracing_on_a_three_level_tree() {
    let f = generated_fat_tree(8, 100);
    let r = assert_check_matches_tracing(&f);
    assert_eq!(r.credit_loops_found, 0);
}

/// Destinations behind one switch whose routes climb different layers: the check's pass
/// for a destination starts from the order the last one on that switch was resolved in,
/// and must notice when that order no longer fits.
#[test]
fn check_matches_brute_force_tracing_when_one_switch_s_destinations_route_differently() {
    // A ring X0..X3 (port 1 to the next switch, port 2 to the one before), hosts a, b, c
    // on X0 and one host on each other switch. Minhop sends X3's packets for X0 straight
    // on; for b, X3, X2 and X1 go the long way round instead (b's column puts X2 after
    // X3, unlike a's and c's).
    let mut b = Builder::new();
    let xs: Vec<NodeId> = (0..4).map(|i| b.switch(&format!("X{i}"), 5)).collect();
    let hs = [b.host("a"), b.host("b"), b.host("c")];
    for i in 0..4 {
        b.link(xs[i], 1, xs[(i + 1) % 4], 2);
    }
    for (port, &h) in (3..).zip(&hs) {
        b.link(xs[0], port, h, 1);
    }
    for (i, &x) in xs.iter().enumerate().skip(1) {
        let h = b.host(&format!("h{i}"));
        b.link(x, 3, h, 1);
    }
    let mut f = b.fabric;
    compute_minhop_lfts(&mut f);
    let long_way = lid(&f, hs[1]);
    for &x in &xs[1..] {
        set_lft(&mut f, x, long_way, 2);
    }
    let p = trace(&f, end(hs[0], 1), long_way).unwrap();
    assert_eq!(p.link_hops(), 2);
    let x3 = f.node(xs[3]).guid;
    let from_x3 = |d: u16| {
        let p = trace(&f, end(xs[3], 0), d).unwrap();
        p.hops.iter().skip_while(|h| h.node.guid != x3).count()
    };
    assert!(from_x3(long_way) > from_x3(lid(&f, hs[0])) + 1);
    assert_check_matches_tracing(&f);
}

/// The route check of every host to every host against tracing each route: hop counts,
/// routes per port, switch-to-switch dependencies. Returns the check's report.
fn assert_check_matches_tracing(f: &Fabric) -> ibscope_topo::routing::RouteReport {
    use std::collections::{BTreeSet, HashMap};
    let r = check(
        f,
        &CheckOptions {
            port_details: true,
            switch_destinations: false,
            ..Default::default()
        },
    );
    assert!(r.is_clean(), "{:#?}", r.breaks);
    let hosts: Vec<End> = f
        .nodes()
        .filter(|(_, n)| !n.is_switch())
        .map(|(id, _)| end(id, 1))
        .collect();
    let mut routes: HashMap<(NodeId, u8), u64> = HashMap::new();
    let mut hist = vec![0u64; 8];
    let mut turns: BTreeSet<((NodeId, u8), (NodeId, u8))> = BTreeSet::new();
    for &s in &hosts {
        for &d in &hosts {
            if s == d {
                continue;
            }
            let p = trace(f, s, lid(f, d.node)).unwrap();
            hist[p.link_hops()] += 1;
            let out: Vec<(NodeId, u8)> = p
                .hops
                .iter()
                .filter_map(|h| {
                    h.out_port
                        .map(|o| (f.node_by_guid(h.node.guid).unwrap(), o))
                })
                .collect();
            for &c in &out {
                *routes.entry(c).or_default() += 1;
            }
            let sw_out: Vec<(NodeId, u8)> = out
                .iter()
                .copied()
                .filter(|&(n, o)| {
                    f.node(n).is_switch()
                        && f.peer(end(n, o))
                            .is_some_and(|e| f.node(e.node).is_switch())
                })
                .collect();
            for w in sw_out.windows(2) {
                turns.insert((w[0], w[1]));
            }
        }
    }
    hist.truncate(r.hop_histogram.len());
    assert_eq!(r.hop_histogram, hist);
    let n = hosts.len() as u64;
    assert_eq!(r.pairs_ok, n * (n - 1));
    for pl in &r.balance.ports {
        let want = routes
            .get(&(f.node_by_guid(pl.from.node.guid).unwrap(), pl.from.port))
            .copied()
            .unwrap_or(0);
        assert_eq!(
            pl.routes,
            want,
            "{} -> {}",
            pl.from.route_text(),
            pl.to.route_text()
        );
    }
    assert_eq!(r.cdg.dependencies, turns.len());
    r
}

// Captured under ibsim 0.10 with examples/fabrics/net.2sw2path4hca, OpenSM
// 3.3.23 (minhop), then `ibnetdiscover`, `ibroute 1`, `ibroute 3`, `ibtracert 2 6`,
// `ibtracert 5 4` under the umad2sim shim.
const SIM_IBND: &str = r#"#
# Topology file: generated on Wed Dec  2 13:59:10 2026
#
# Initiated from node 0000000000200000 port 0000000000200000

vendid=0x0
devid=0x0
sysimgguid=0x200001
switchguid=0x200001(200001)
Switch	8 "S-0000000000200001"		# "Switch2" base port 0 lid 3 lmc 0
[1]	"H-0000000000100003"[1](100004) 		# "Hca2" lid 4 4xSDR
[2]	"H-0000000000100009"[1](10000a) 		# "Hca4" lid 6 4xSDR
[3]	"S-0000000000200000"[3]		# "Switch1" lid 1 4xSDR
[5]	"S-0000000000200000"[5]		# "Switch1" lid 1 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x200000
switchguid=0x200000(200000)
Switch	8 "S-0000000000200000"		# "Switch1" base port 0 lid 1 lmc 0
[1]	"H-0000000000100000"[1](100001) 		# "Hca1" lid 2 4xSDR
[2]	"H-0000000000100006"[1](100007) 		# "Hca3" lid 5 4xSDR
[3]	"S-0000000000200001"[3]		# "Switch2" lid 3 4xSDR
[5]	"S-0000000000200001"[5]		# "Switch2" lid 3 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x100009
caguid=0x100009
Ca	2 "H-0000000000100009"		# "Hca4"
[1](10000a) 	"S-0000000000200001"[2]		# lid 6 lmc 0 "Switch2" lid 3 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x100003
caguid=0x100003
Ca	2 "H-0000000000100003"		# "Hca2"
[1](100004) 	"S-0000000000200001"[1]		# lid 4 lmc 0 "Switch2" lid 3 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x100006
caguid=0x100006
Ca	2 "H-0000000000100006"		# "Hca3"
[1](100007) 	"S-0000000000200000"[2]		# lid 5 lmc 0 "Switch1" lid 1 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x100000
caguid=0x100000
Ca	2 "H-0000000000100000"		# "Hca1"
[1](100001) 	"S-0000000000200000"[1]		# lid 2 lmc 0 "Switch1" lid 1 4xSDR
"#;
const SIM_IBROUTE_1: &str = r#"Unicast lids [0x0-0x6] of switch Lid 1 guid 0x0000000000200000 (Switch1):
  Lid  Out   Destination
       Port     Info 
0x0001 000 : (Switch portguid 0x0000000000200000: 'Switch1')
0x0002 001 : (Channel Adapter portguid 0x0000000000100001: 'Hca1')
0x0003 003 : (Switch portguid 0x0000000000200001: 'Switch2')
0x0004 003 : (Channel Adapter portguid 0x0000000000100004: 'Hca2')
0x0005 002 : (Channel Adapter portguid 0x0000000000100007: 'Hca3')
0x0006 005 : (Channel Adapter portguid 0x000000000010000a: 'Hca4')
6 valid lids dumped 
"#;
const SIM_IBROUTE_3: &str = r#"Unicast lids [0x0-0x6] of switch Lid 3 guid 0x0000000000200001 (Switch2):
  Lid  Out   Destination
       Port     Info 
0x0001 003 : (Switch portguid 0x0000000000200000: 'Switch1')
0x0002 003 : (Channel Adapter portguid 0x0000000000100001: 'Hca1')
0x0003 000 : (Switch portguid 0x0000000000200001: 'Switch2')
0x0004 001 : (Channel Adapter portguid 0x0000000000100004: 'Hca2')
0x0005 005 : (Channel Adapter portguid 0x0000000000100007: 'Hca3')
0x0006 002 : (Channel Adapter portguid 0x000000000010000a: 'Hca4')
6 valid lids dumped 
"#;

/// The simulator's fabric with the LFTs OpenSM programmed, read back from ibroute's lines.
fn simulated_fabric() -> Fabric {
    let mut f = ibscope_topo::ibnd::parse(SIM_IBND).unwrap();
    for text in [SIM_IBROUTE_1, SIM_IBROUTE_3] {
        let header = text.lines().next().unwrap();
        let guid = header.split("guid 0x").nth(1).unwrap();
        let guid = u64::from_str_radix(&guid[..16], 16).unwrap();
        let sw = f.node_by_guid(guid).unwrap();
        let mut lft = vec![NO_ROUTE; 7];
        for line in text.lines().filter(|l| l.starts_with("0x")) {
            let lid = usize::from_str_radix(&line[2..6], 16).unwrap();
            lft[lid] = line[7..10].parse().unwrap();
        }
        let facts = f
            .node_mut(sw)
            .switch
            .get_or_insert_with(SwitchFacts::default);
        facts.lft = lft;
        facts.linear_fdb_top = 6;
    }
    f
}

#[test]
fn format_ibroute_like_matches_ibroute_byte_for_byte() {
    let f = simulated_fabric();
    for (lid, want) in [(1, SIM_IBROUTE_1), (3, SIM_IBROUTE_3)] {
        let sw = f.port_by_lid(lid).unwrap().node;
        assert_eq!(routing::format_ibroute_like(&f, sw), want);
    }
}

#[test]
fn trace_matches_ibtracert() {
    // ibtracert 2 6: Hca1 [1] -> Switch1 [1], out [5] -> Switch2 [5], out [2] -> Hca4 [1].
    // ibtracert 5 4: Hca3 [1] -> Switch1 [2], out [3] -> Switch2 [3], out [1] -> Hca2 [1].
    let f = simulated_fabric();
    let cases = [
        (
            2,
            6,
            [
                ("Hca1", None, Some(1)),
                ("Switch1", Some(1), Some(5)),
                ("Switch2", Some(5), Some(2)),
                ("Hca4", Some(1), None),
            ],
        ),
        (
            5,
            4,
            [
                ("Hca3", None, Some(1)),
                ("Switch1", Some(2), Some(3)),
                ("Switch2", Some(3), Some(1)),
                ("Hca2", Some(1), None),
            ],
        ),
    ];
    for (src, dst, want) in cases {
        let p = trace(&f, f.port_by_lid(src).unwrap(), dst).unwrap();
        let got: Vec<_> = p
            .hops
            .iter()
            .map(|h| (h.node.name.as_ref(), h.in_port, h.out_port))
            .collect();
        assert_eq!(got, want);
    }
}

#[test]
fn minhop_model_reproduces_opensm_minhop_on_the_simulated_fabric() {
    let sim = simulated_fabric();
    let mut f = simulated_fabric();
    let ids: Vec<NodeId> = f.switches().map(|(id, _)| id).collect();
    for &id in &ids {
        f.node_mut(id).switch.as_mut().unwrap().lft.clear();
    }
    compute_minhop_lfts(&mut f);
    for &id in &ids {
        assert_eq!(
            f.node(id).switch.as_ref().unwrap().lft,
            sim.node(id).switch.as_ref().unwrap().lft,
            "{}",
            f.node(id).description
        );
    }
    let r = check(&sim, &CheckOptions::default());
    assert!(r.is_clean());
    // Two parallel links, balanced: each carries one remote host LID per direction.
    assert!(r.balance.lft_unbalanced.is_empty());
}

/// Every switch-to-switch directed link of `route check`: leaves (switches with a host
/// below) at layer 1 pointing up, spines at layer 2 pointing down, nothing lateral. A
/// SHARP aggregation node on every switch must not make every switch a leaf.
fn assert_leaf_spine_layers(f: &Fabric, leaves: usize, spines: usize, links: usize) {
    let r = check(
        f,
        &CheckOptions {
            port_details: true,
            ..Default::default()
        },
    );
    // Every pair delivered. (Credit loops may remain: the min-hop model routes an
    // aggregation node on a spine to one on another spine down and up again.)
    assert_eq!((r.pairs_broken, r.pairs_looping), (0, 0));
    assert!(r.breaks.is_empty());
    let is_switch = |k: NodeKind| k == NodeKind::Switch;
    let switch_links: Vec<_> = r
        .balance
        .ports
        .iter()
        .filter(|p| is_switch(p.from.node.kind) && is_switch(p.to.node.kind))
        .collect();
    assert_eq!(switch_links.len(), 2 * links);
    let lateral = switch_links
        .iter()
        .filter(|p| p.direction == Direction::Lateral)
        .count();
    assert_eq!(lateral, 0, "leaf-spine links called lateral");
    let mut layer_of = std::collections::HashMap::new();
    for p in &switch_links {
        match p.direction {
            Direction::Up => assert_eq!(p.layer, Some(1)),
            Direction::Down => assert_eq!(p.layer, Some(2)),
            other => panic!("{other} between switches"),
        }
        layer_of.insert(p.from.node.guid, p.layer);
    }
    let count = |l| layer_of.values().filter(|&&x| x == Some(l)).count();
    assert_eq!((count(1), count(2)), (leaves, spines));
    // The ring's default hosts: host adapters only.
    let hosts = routing::default_hosts(f);
    assert!(hosts.iter().all(|e| f.node(e.node).kind == NodeKind::Ca));
    let aggregation = f
        .nodes()
        .filter(|(_, n)| n.kind == NodeKind::AggregationNode)
        .count();
    assert_eq!(aggregation, leaves + spines);
    let report = load(f, Pattern::Ring, &hosts).unwrap();
    assert_eq!(report.hosts, hosts.len());
    assert_eq!(report.flows_unroutable, 0);
}

/// The NDR SuperPOD of tests/data/real (40 Quantum-2 switches, each with its SHARP
/// aggregation node behind port 65; 542 host ports) routed by the min-hop model.
#[test]
fn aggregation_nodes_stay_out_of_layers_and_rings_on_the_superpod() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/real/nvidia-topograph-ndr-superpod.ibnd"
    );
    let mut f = ibscope_topo::ibnd::parse(&std::fs::read_to_string(path).unwrap()).unwrap();
    compute_minhop_lfts(&mut f);
    let leaves = f
        .switches()
        .filter(|(id, _)| {
            f.graph()
                .neighbors(*id)
                .any(|n| f.node(n).kind == NodeKind::Ca)
        })
        .count();
    assert_eq!(routing::default_hosts(&f).len(), 542);
    assert_leaf_spine_layers(&f, leaves, 40 - leaves, 532);
}

/// A generated 2-level fat tree with one aggregation node per switch.
#[test]
fn aggregation_nodes_stay_out_of_layers_and_rings_on_a_generated_tree() {
    use ibscope_topo::gen::{fat_tree, FatTreeSpec};
    let mut spec = FatTreeSpec::new(2, 8, 16);
    spec.options.aggregation_nodes = true;
    let mut f = ibscope_topo::ibnd::parse(&fat_tree(&spec).unwrap()).unwrap();
    ibscope_topo::gen::bring_up(&mut f, Rate::new(Width::X4, Speed::Hdr));
    compute_minhop_lfts(&mut f);
    assert_eq!(routing::default_hosts(&f).len(), 16);
    // 4 leaves, 2 spines, 4 uplinks per leaf.
    assert_leaf_spine_layers(&f, 4, 2, 16);
}
