//! `route check`: every CA port to every destination LID, without tracing pairs one by one.
//!
//! Forwarding depends only on (switch, destination LID), so for each destination the LFTs
//! form a functional graph over switches (each switch has at most one successor). One pass
//! per destination resolves every switch (delivered at distance k, broken at switch z, or
//! caught in a loop), and the sources behind each switch are accumulated along that tree:
//! O(switches) per destination instead of O(sources x hops). Link route counts, hop
//! histograms and channel dependencies all come out of the same pass.

use std::collections::HashMap;

use petgraph::graph::{DiGraph, NodeIndex};
use serde::{Deserialize, Serialize};

use super::index::{Index, Step, NONE};
use super::refs::{ChannelRef, NodeRef, Path, PortRef};
use super::trace::trace;
use crate::model::{End, Fabric, NodeId};

/// What [`check`] looks at and how much it reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CheckOptions {
    /// Also check that every CA reaches every switch LID (management traffic). Default true.
    pub switch_destinations: bool,
    /// Let routes to switch LIDs add channel dependencies. Default false: credit loops are
    /// about data traffic between CAs, which is what `ibdmchk`-style checks consider.
    pub cdg_switch_destinations: bool,
    /// Cap on each example list (unreachable destinations, loops, credit loops).
    pub max_examples: usize,
    /// Fill [`RouteBalance::ports`] with every directed link (large on big fabrics).
    pub port_details: bool,
    /// Length of [`RouteBalance::hottest`].
    pub top_links: usize,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            switch_destinations: true,
            cdg_switch_destinations: false,
            max_examples: 50,
            port_details: false,
            top_links: 10,
        }
    }
}

/// Why routes break at a given place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakKind {
    /// LFT entry unset (255) or the LID above LinearFDBTop.
    NoRoute,
    /// LFT entry points at a port that is down, unlinked or beyond the switch's ports.
    PortDown,
    /// Delivered to a port that does not own the LID.
    Misdelivered,
    LftNotRead,
    /// The source CA port itself is down.
    SourceDown,
}

/// Every destination whose routes break at one place, aggregated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BreakSummary {
    /// The switch whose LFT entry fails (the CA for `source_down`).
    pub at: NodeRef,
    pub kind: BreakKind,
    /// The egress port for `port_down` / `misdelivered`.
    pub port: Option<u8>,
    /// Destination LIDs whose route breaks here (whether or not a source reaches here).
    pub destinations: u64,
    /// (source, destination) pairs that end here.
    pub pairs: u64,
    /// A few of those LIDs.
    pub example_lids: Vec<u16>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnreachableDest {
    pub dst_lid: u16,
    pub dst: PortRef,
    /// Sources that do not reach it, of `sources` that try.
    pub sources_failed: u64,
    pub sources: u64,
}

/// LFTs that send a destination round a cycle of switches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForwardingLoop {
    pub dst_lid: u16,
    pub dst: Option<PortRef>,
    /// The switches of the cycle, in forwarding order.
    pub cycle: Vec<NodeRef>,
    /// Pairs caught in it.
    pub pairs: u64,
}

/// Where a directed switch link points relative to switch layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Towards a switch of a higher layer (further from the CAs).
    Up,
    Down,
    /// Same layer, or a layer unknown.
    Lateral,
    /// A switch port to a CA.
    ToCa,
    /// A CA port to its switch.
    FromCa,
}

/// Load of one directed link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortLoad {
    pub from: PortRef,
    pub to: PortRef,
    /// Layer of the `from` node: CAs 0, leaves 1, ...; `None` for a switch no CA reaches.
    pub layer: Option<u32>,
    pub direction: Direction,
    /// CA destination LIDs the LFT sends out of this port (`check_lft_balance`'s count).
    pub lids: u32,
    /// CA-to-CA (source port, destination LID) routes crossing this link.
    pub routes: u64,
}

/// Min/max/mean of [`PortLoad`]s sharing a layer and a direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerStats {
    pub layer: Option<u32>,
    pub direction: Direction,
    pub ports: usize,
    pub lids_min: u32,
    pub lids_max: u32,
    pub routes_min: u64,
    pub routes_max: u64,
    pub routes_mean: f64,
    /// routes_max / routes_min; `None` when the minimum is 0.
    pub imbalance: Option<f64>,
}

/// A switch `check_lft_balance` would flag: among its live ports towards other switches in
/// one direction (up, down or lateral), the busiest carries more than one CA LID more than
/// the idlest. Unlinked ports carrying LIDs are not compared: they are black holes, in
/// [`RouteReport::breaks`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwitchLftBalance {
    pub switch: NodeRef,
    pub direction: Direction,
    pub min: u32,
    pub max: u32,
    /// (port, CA LIDs routed out of it) for the ports compared.
    pub ports: Vec<(u8, u32)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouteBalance {
    /// Every directed link (only with [`CheckOptions::port_details`]).
    pub ports: Vec<PortLoad>,
    /// The links carrying most routes.
    pub hottest: Vec<PortLoad>,
    pub by_layer: Vec<LayerStats>,
    pub lft_unbalanced: Vec<SwitchLftBalance>,
    /// Switches compared by the `check_lft_balance` rule.
    pub lft_switches_checked: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CdgStats {
    /// Switch-to-switch channels with at least one dependency.
    pub channels: usize,
    /// Distinct (channel -> channel) dependencies.
    pub dependencies: usize,
    /// Strongly connected components with a cycle.
    pub cyclic_components: usize,
}

/// A cycle in the channel dependency graph: with one VL, these routes can deadlock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreditLoop {
    /// Channels in the strongly connected component.
    pub channels: usize,
    /// Distinct switches those channels leave from.
    pub switches: usize,
    /// One cycle through the component, in dependency order (at most 16 channels).
    pub cycle: Vec<ChannelRef>,
    /// Length of that cycle.
    pub cycle_len: usize,
    /// Routes that create some of the cycle's dependencies.
    pub example_routes: Vec<Path>,
}

/// The result of [`check`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouteReport {
    /// CA ports that are linked (the sources).
    pub sources: usize,
    pub sources_down: usize,
    pub destinations: usize,
    pub ca_destinations: usize,
    pub switch_destinations: usize,
    pub pairs: u64,
    pub pairs_ok: u64,
    pub pairs_broken: u64,
    pub pairs_looping: u64,
    pub lft_not_read: Vec<NodeRef>,
    /// Every place routes break, most pairs first.
    pub breaks: Vec<BreakSummary>,
    pub unreachable_destinations: usize,
    pub unreachable: Vec<UnreachableDest>,
    /// (destination, cycle) forwarding loops found.
    pub loops_found: usize,
    pub loops: Vec<ForwardingLoop>,
    /// Index = links traversed; counts delivered pairs.
    pub hop_histogram: Vec<u64>,
    pub max_hops: usize,
    pub mean_hops: f64,
    pub balance: RouteBalance,
    pub cdg: CdgStats,
    pub credit_loops_found: usize,
    pub credit_loops: Vec<CreditLoop>,
    pub notes: Vec<String>,
}

impl RouteReport {
    /// No break, loop or credit loop.
    pub fn is_clean(&self) -> bool {
        self.pairs_broken == 0
            && self.pairs_looping == 0
            && self.loops_found == 0
            && self.credit_loops_found == 0
            && self.breaks.is_empty()
    }
}

const UNVISITED: u8 = 0;
const IN_PROGRESS: u8 = 1;
const DELIVERED: u8 = 2;
const BROKEN: u8 = 3;
const LOOPING: u8 = 4;

struct Event {
    kind: BreakKind,
    node: u32,
    port: Option<u8>,
    /// Switch indexes of a loop.
    cycle: Vec<u32>,
    pairs: u64,
}

#[derive(Default)]
struct BreakAgg {
    destinations: u64,
    pairs: u64,
    example_lids: Vec<u16>,
}

/// Check every route from every CA port to every destination LID (CA port LIDs with their
/// LMC range, and switch LIDs unless disabled). See [`RouteReport`]; one VL is assumed.
pub fn check(fabric: &Fabric, opts: &CheckOptions) -> RouteReport {
    let idx = Index::new(fabric);
    let n = fabric.node_count();

    // Switch numbering.
    let mut sw: Vec<NodeId> = Vec::new();
    let mut sw_of = vec![NONE; n];
    for (id, node) in fabric.nodes() {
        if node.is_switch() {
            sw_of[id.index()] = sw.len() as u32;
            sw.push(id);
        }
    }
    let s_count = sw.len();

    // Sources: linked ports of non-switch nodes.
    let mut sources: Vec<u32> = Vec::new();
    let mut source_of_chan = vec![NONE; idx.channels()];
    let mut down_sources: Vec<u32> = Vec::new();
    let mut attach_count = vec![0u64; s_count];
    let mut attached: Vec<Vec<u32>> = vec![Vec::new(); s_count];
    let mut direct: Vec<u32> = Vec::new();
    for (id, node) in fabric.nodes() {
        if node.is_switch() {
            continue;
        }
        let i = id.index();
        for ch in idx.base[i]..idx.base[i + 1] {
            if idx.chan_port[ch as usize] == 0 {
                continue;
            }
            let Some(peer) = idx.peer(ch) else { continue };
            source_of_chan[ch as usize] = sources.len() as u32;
            sources.push(ch);
            if !idx.usable(ch) {
                down_sources.push(ch);
                continue;
            }
            let pn = idx.chan_node[peer as usize];
            if idx.is_switch_index(pn) {
                let s = sw_of[pn as usize] as usize;
                attach_count[s] += 1;
                attached[s].push(ch);
            } else {
                direct.push(ch);
            }
        }
    }

    // Destinations: (lid, owner channel, owner is a CA/router).
    let mut dests: Vec<(u16, u32, bool)> = Vec::new();
    for (id, node) in fabric.nodes() {
        for p in &node.ports {
            if p.lid == 0 || (node.is_switch() && p.number != 0) {
                continue;
            }
            let span = 1u32 << p.lmc.min(7);
            for off in 0..span {
                let lid = u32::from(p.lid) + off;
                if lid >= 0xc000 {
                    break;
                }
                let lid = lid as u16;
                let end = End {
                    node: id,
                    port: p.number,
                };
                // Only the port the fabric's index agrees owns it (duplicates: first wins).
                if fabric.port_by_lid(lid) != Some(end) {
                    continue;
                }
                if let Some(ch) = idx.channel(end) {
                    dests.push((lid, ch, !node.is_switch()));
                }
            }
        }
    }
    dests.sort_unstable();
    dests.dedup_by_key(|d| d.0);
    let ca_destinations = dests.iter().filter(|d| d.2).count();
    let switch_destinations = dests.len() - ca_destinations;
    if !opts.switch_destinations {
        dests.retain(|d| d.2);
    }

    // Per-destination working arrays, indexed by switch.
    let mut status = vec![UNVISITED; s_count];
    let mut next = vec![NONE; s_count];
    let mut next_in_port = vec![0u8; s_count];
    let mut egress = vec![0u8; s_count];
    let mut dist = vec![0u16; s_count];
    let mut ev = vec![NONE; s_count];
    let mut w = vec![0u64; s_count];
    let mut stack: Vec<u32> = Vec::new();
    let mut events: Vec<Event> = Vec::new();
    let mut buckets: Vec<Vec<u32>> = Vec::new();

    // Accumulated results.
    let mut lids_per_chan = vec![0u32; idx.channels()];
    let mut routes_per_chan = vec![0u64; idx.channels()];
    let mut delivered_dests = vec![0u64; s_count];
    let mut self_delivered = vec![0u64; sources.len()];
    let mut hist: Vec<u64> = Vec::new();
    let mut pairs_ok = 0u64;
    let mut pairs_broken = 0u64;
    let mut pairs_looping = 0u64;
    let mut breaks: HashMap<(u32, BreakKind, Option<u8>), BreakAgg> = HashMap::new();
    let mut unreachable = Vec::new();
    let mut unreachable_count = 0usize;
    let mut loops = Vec::new();
    let mut loops_found = 0usize;
    // CDG turns at a switch: (in port, out port) -> first destination LID creating it.
    let mut turn_base = Vec::with_capacity(s_count + 1);
    let mut acc = 0usize;
    for &s in &sw {
        turn_base.push(acc);
        let p = idx.slots(s.index()) as usize;
        acc += p * p;
    }
    turn_base.push(acc);
    let mut turn_lid = vec![0u16; acc];

    let usable_sources = (sources.len() - down_sources.len()) as u64;

    for &(lid, owner, is_ca) in &dests {
        status.fill(UNVISITED);
        events.clear();
        let owner_src = source_of_chan[owner as usize];
        // Where the destination itself sits as a source (it does not send to itself).
        let self_at = if owner_src != NONE && idx.usable(owner) {
            let pn = idx.chan_node[idx.peer[owner as usize] as usize];
            sw_of[pn as usize]
        } else {
            NONE
        };

        for start in 0..s_count {
            if status[start] != UNVISITED {
                continue;
            }
            stack.clear();
            let mut cur = start;
            let (st, base_dist, e) = loop {
                match status[cur] {
                    UNVISITED => {}
                    IN_PROGRESS => {
                        let pos = stack.iter().rposition(|&x| x as usize == cur).unwrap_or(0);
                        events.push(Event {
                            kind: BreakKind::NoRoute,
                            node: sw[cur].index() as u32,
                            port: None,
                            cycle: stack[pos..].to_vec(),
                            pairs: 0,
                        });
                        break (LOOPING, 0, (events.len() - 1) as u32);
                    }
                    s => break (s, dist[cur], ev[cur]),
                }
                status[cur] = IN_PROGRESS;
                stack.push(cur as u32);
                let at = sw[cur];
                let step = idx.step(at, lid, Some(owner));
                if is_ca {
                    if let Some(p) = idx.lft_entry(at.index(), lid) {
                        if p != 0 && u32::from(p) < idx.slots(at.index()) {
                            lids_per_chan[(idx.base[at.index()] + u32::from(p)) as usize] += 1;
                        }
                    }
                }
                let broken = |kind, port| Event {
                    kind,
                    node: at.index() as u32,
                    port,
                    cycle: Vec::new(),
                    pairs: 0,
                };
                match step {
                    Step::DeliverSelf => {
                        stack.pop();
                        status[cur] = DELIVERED;
                        dist[cur] = 0;
                        next[cur] = NONE;
                        egress[cur] = 0;
                        break (DELIVERED, 0, NONE);
                    }
                    Step::DeliverCa { port, .. } => {
                        stack.pop();
                        status[cur] = DELIVERED;
                        dist[cur] = 1;
                        next[cur] = NONE;
                        egress[cur] = port;
                        break (DELIVERED, 1, NONE);
                    }
                    Step::Forward { port, peer } => {
                        egress[cur] = port;
                        next[cur] = sw_of[idx.chan_node[peer as usize] as usize];
                        next_in_port[cur] = idx.chan_port[peer as usize];
                        cur = next[cur] as usize;
                        continue;
                    }
                    Step::Misdelivered { port, .. } => {
                        events.push(broken(BreakKind::Misdelivered, Some(port)))
                    }
                    Step::PortDown { port } => events.push(broken(BreakKind::PortDown, Some(port))),
                    Step::NoRoute => events.push(broken(BreakKind::NoRoute, None)),
                    Step::LftNotRead => events.push(broken(BreakKind::LftNotRead, None)),
                }
                stack.pop();
                status[cur] = BROKEN;
                ev[cur] = (events.len() - 1) as u32;
                break (BROKEN, 0, ev[cur]);
            };
            let mut d = base_dist;
            while let Some(x) = stack.pop() {
                let x = x as usize;
                status[x] = st;
                ev[x] = e;
                if st == DELIVERED {
                    d += 1;
                    dist[x] = d;
                }
            }
        }

        // Pairs: the sources attached to each switch share its fate.
        let mut failed = 0u64;
        let mut max_dist = 0usize;
        for x in 0..s_count {
            let mut k = attach_count[x];
            if self_at == x as u32 {
                k -= 1;
            }
            match status[x] {
                DELIVERED => {
                    let dd = usize::from(dist[x]);
                    max_dist = max_dist.max(dd);
                    if k > 0 {
                        pairs_ok += k;
                        let h = dd + 1;
                        if hist.len() <= h {
                            hist.resize(h + 1, 0);
                        }
                        hist[h] += k;
                        w[x] = k;
                    }
                    if is_ca {
                        delivered_dests[x] += 1;
                        if self_at == x as u32 {
                            self_delivered[owner_src as usize] += 1;
                        }
                    }
                }
                BROKEN => {
                    pairs_broken += k;
                    failed += k;
                    events[ev[x] as usize].pairs += k;
                }
                _ => {
                    pairs_looping += k;
                    failed += k;
                    events[ev[x] as usize].pairs += k;
                }
            }
        }
        for &c in &direct {
            if c == owner {
                continue;
            }
            let peer = idx.peer[c as usize];
            if peer == owner {
                pairs_ok += 1;
                if hist.len() < 2 {
                    hist.resize(2, 0);
                }
                hist[1] += 1;
                if is_ca {
                    routes_per_chan[c as usize] += 1;
                }
            } else {
                pairs_broken += 1;
                failed += 1;
                events.push(Event {
                    kind: BreakKind::Misdelivered,
                    node: idx.chan_node[c as usize],
                    port: Some(idx.chan_port[c as usize]),
                    cycle: Vec::new(),
                    pairs: 1,
                });
            }
        }

        // Accumulate sources down each destination tree, farthest switches first.
        let cdg = is_ca || opts.cdg_switch_destinations;
        if buckets.len() <= max_dist {
            buckets.resize(max_dist + 1, Vec::new());
        }
        for b in buckets.iter_mut() {
            b.clear();
        }
        for x in 0..s_count {
            if status[x] == DELIVERED {
                buckets[usize::from(dist[x])].push(x as u32);
            }
        }
        for b in buckets.iter().rev() {
            for &x in b {
                let x = x as usize;
                let wx = w[x];
                if wx == 0 {
                    continue;
                }
                let at = sw[x].index();
                if is_ca && egress[x] != 0 {
                    routes_per_chan[(idx.base[at] + u32::from(egress[x])) as usize] += wx;
                }
                let t = next[x];
                if t == NONE {
                    continue;
                }
                let t = t as usize;
                w[t] += wx;
                // Dependency (x -> t) then (t -> next[t]): both switch-to-switch channels.
                if cdg && next[t] != NONE {
                    let p = idx.slots(sw[t].index()) as usize;
                    let slot =
                        turn_base[t] + usize::from(next_in_port[x]) * p + usize::from(egress[t]);
                    if turn_lid[slot] == 0 {
                        turn_lid[slot] = lid;
                    }
                }
            }
        }
        w.fill(0);

        // Fold this destination's events into the totals.
        for e in &events {
            if !e.cycle.is_empty() {
                loops_found += 1;
                if loops.len() < opts.max_examples {
                    loops.push(ForwardingLoop {
                        dst_lid: lid,
                        dst: Some(PortRef::new(fabric, idx.end(owner))),
                        cycle: e
                            .cycle
                            .iter()
                            .map(|&s| NodeRef::new(fabric, sw[s as usize]))
                            .collect(),
                        pairs: e.pairs,
                    });
                }
                continue;
            }
            let agg = breaks.entry((e.node, e.kind, e.port)).or_default();
            agg.destinations += 1;
            agg.pairs += e.pairs;
            if agg.example_lids.len() < 5 {
                agg.example_lids.push(lid);
            }
        }
        let tried = usable_sources - u64::from(self_at != NONE);
        if failed > 0 {
            unreachable_count += 1;
            if unreachable.len() < opts.max_examples {
                unreachable.push(UnreachableDest {
                    dst_lid: lid,
                    dst: PortRef::new(fabric, idx.end(owner)),
                    sources_failed: failed,
                    sources: tried,
                });
            }
        }
    }

    // Down sources: every destination fails at the source.
    for &c in &down_sources {
        let own = dests.iter().filter(|d| d.1 == c).count() as u64;
        let k = dests.len() as u64 - own;
        pairs_broken += k;
        let agg = breaks
            .entry((
                idx.chan_node[c as usize],
                BreakKind::SourceDown,
                Some(idx.chan_port[c as usize]),
            ))
            .or_default();
        agg.destinations += k;
        agg.pairs += k;
    }
    // Injection links: a source's routes are its switch's delivered CA destinations.
    for (x, list) in attached.iter().enumerate() {
        for &c in list {
            let si = source_of_chan[c as usize] as usize;
            routes_per_chan[c as usize] += delivered_dests[x] - self_delivered[si];
        }
    }

    let pairs = pairs_ok + pairs_broken + pairs_looping;
    let mut breaks: Vec<BreakSummary> = breaks
        .into_iter()
        .map(|((node, kind, port), a)| BreakSummary {
            at: NodeRef::new(fabric, NodeId::new(node as usize)),
            kind,
            port,
            destinations: a.destinations,
            pairs: a.pairs,
            example_lids: a.example_lids,
        })
        .collect();
    breaks.sort_by(|a, b| {
        b.pairs
            .cmp(&a.pairs)
            .then(b.destinations.cmp(&a.destinations))
            .then(a.at.guid.cmp(&b.at.guid))
            .then(a.port.cmp(&b.port))
    });
    let delivered: u64 = hist.iter().sum();
    let mean_hops = if delivered == 0 {
        0.0
    } else {
        hist.iter()
            .enumerate()
            .map(|(h, &c)| h as f64 * c as f64)
            .sum::<f64>()
            / delivered as f64
    };
    let max_hops = hist.iter().rposition(|&c| c > 0).unwrap_or(0);

    let layers = switch_layers(fabric, &idx, &sw, &sw_of);
    let balance = balance(
        fabric,
        &idx,
        &sw,
        &sw_of,
        &layers,
        &lids_per_chan,
        &routes_per_chan,
        &sources,
        opts,
    );
    let (cdg, credit_loops_found, credit_loops) =
        credit_loops(fabric, &idx, &sw, &turn_base, &turn_lid, &sources, opts);

    let lft_not_read = sw
        .iter()
        .filter(|&&s| !idx.has_lft(s))
        .map(|&s| NodeRef::new(fabric, s))
        .collect();
    RouteReport {
        sources: sources.len(),
        sources_down: down_sources.len(),
        destinations: dests.len(),
        ca_destinations,
        switch_destinations,
        pairs,
        pairs_ok,
        pairs_broken,
        pairs_looping,
        lft_not_read,
        breaks,
        unreachable_destinations: unreachable_count,
        unreachable,
        loops_found,
        loops,
        hop_histogram: hist,
        max_hops,
        mean_hops,
        balance,
        cdg,
        credit_loops_found,
        credit_loops,
        notes: vec![
            "one VL assumed: SL-to-VL mapping is not modelled, so a credit loop is a deadlock risk \
             only if its routes share a VL"
                .into(),
            "link route counts include delivered CA-to-CA routes only".into(),
        ],
    }
}

/// Hop distance of each switch from the nearest CA: leaves 1, spines 2, ...
fn switch_layers(fabric: &Fabric, idx: &Index, sw: &[NodeId], sw_of: &[u32]) -> Vec<Option<u32>> {
    let mut layer: Vec<Option<u32>> = vec![None; sw.len()];
    let mut queue = std::collections::VecDeque::new();
    for (x, &s) in sw.iter().enumerate() {
        let i = s.index();
        let has_ca = (idx.base[i] + 1..idx.base[i + 1]).any(|ch| {
            idx.peer(ch)
                .is_some_and(|p| !idx.is_switch_index(idx.chan_node[p as usize]))
        });
        if has_ca {
            layer[x] = Some(1);
            queue.push_back(x);
        }
    }
    let _ = fabric;
    while let Some(x) = queue.pop_front() {
        let l = layer[x].unwrap_or(1);
        let i = sw[x].index();
        for ch in idx.base[i] + 1..idx.base[i + 1] {
            let Some(p) = idx.peer(ch) else { continue };
            let t = sw_of[idx.chan_node[p as usize] as usize];
            if t != NONE && layer[t as usize].is_none() {
                layer[t as usize] = Some(l + 1);
                queue.push_back(t as usize);
            }
        }
    }
    layer
}

#[allow(clippy::too_many_arguments)]
fn balance(
    fabric: &Fabric,
    idx: &Index,
    sw: &[NodeId],
    sw_of: &[u32],
    layers: &[Option<u32>],
    lids: &[u32],
    routes: &[u64],
    sources: &[u32],
    opts: &CheckOptions,
) -> RouteBalance {
    // (channel, layer, direction) for every directed link out of a switch or CA.
    let mut chans: Vec<(u32, Option<u32>, Direction)> = Vec::new();
    for (x, &s) in sw.iter().enumerate() {
        let i = s.index();
        for ch in idx.base[i] + 1..idx.base[i + 1] {
            let Some(p) = idx.peer(ch) else { continue };
            let t = sw_of[idx.chan_node[p as usize] as usize];
            let dir = if t == NONE {
                Direction::ToCa
            } else {
                match (layers[x], layers[t as usize]) {
                    (Some(a), Some(b)) if b > a => Direction::Up,
                    (Some(a), Some(b)) if b < a => Direction::Down,
                    _ => Direction::Lateral,
                }
            };
            chans.push((ch, layers[x], dir));
        }
    }
    for &c in sources {
        chans.push((c, Some(0), Direction::FromCa));
    }
    let load = |&(ch, layer, direction): &(u32, Option<u32>, Direction)| PortLoad {
        from: PortRef::new(fabric, idx.end(ch)),
        to: PortRef::new(fabric, idx.end(idx.peer[ch as usize])),
        layer,
        direction,
        lids: lids[ch as usize],
        routes: routes[ch as usize],
    };

    let mut groups: HashMap<(Option<u32>, Direction), Vec<u32>> = HashMap::new();
    for &(ch, layer, dir) in &chans {
        groups.entry((layer, dir)).or_default().push(ch);
    }
    let mut by_layer: Vec<LayerStats> = groups
        .into_iter()
        .map(|((layer, direction), list)| {
            let r = list.iter().map(|&c| routes[c as usize]);
            let l = list.iter().map(|&c| lids[c as usize]);
            let routes_min = r.clone().min().unwrap_or(0);
            let routes_max = r.clone().max().unwrap_or(0);
            LayerStats {
                layer,
                direction,
                ports: list.len(),
                lids_min: l.clone().min().unwrap_or(0),
                lids_max: l.max().unwrap_or(0),
                routes_min,
                routes_max,
                routes_mean: r.sum::<u64>() as f64 / list.len().max(1) as f64,
                imbalance: (routes_min > 0).then(|| routes_max as f64 / routes_min as f64),
            }
        })
        .collect();
    by_layer.sort_by_key(|s| (s.layer.is_none(), s.layer, s.direction));

    let mut order: Vec<usize> = (0..chans.len()).collect();
    order.sort_by(|&a, &b| {
        routes[chans[b].0 as usize]
            .cmp(&routes[chans[a].0 as usize])
            .then(chans[a].0.cmp(&chans[b].0))
    });
    let hottest = order
        .iter()
        .take(opts.top_links)
        .map(|&k| load(&chans[k]))
        .collect();
    let ports = if opts.port_details {
        chans.iter().map(load).collect()
    } else {
        Vec::new()
    };

    // check_lft_balance's rule, per direction: among a switch's live ports facing other
    // switches in one direction, the busiest may carry at most one CA LID more than the
    // idlest. (The script compares all such ports at once, which flags every middle-layer
    // switch of a 3-level tree, whose up and down ports carry different shares by design.)
    let mut lft_unbalanced = Vec::new();
    let mut checked = 0;
    let mut per_switch: HashMap<(u32, Direction), Vec<(u8, u32)>> = HashMap::new();
    for &(ch, _, dir) in &chans {
        if dir == Direction::ToCa || dir == Direction::FromCa || !idx.usable(ch) {
            continue;
        }
        let node = idx.chan_node[ch as usize];
        if !idx.has_lft(NodeId::new(node as usize)) {
            continue;
        }
        per_switch
            .entry((node, dir))
            .or_default()
            .push((idx.chan_port[ch as usize], lids[ch as usize]));
    }
    let mut keys: Vec<(u32, Direction)> = per_switch.keys().copied().collect();
    keys.sort_unstable();
    let mut seen = NONE;
    for key in keys {
        if key.0 != seen {
            checked += 1;
            seen = key.0;
        }
        let ports = per_switch.remove(&key).unwrap_or_default();
        let min = ports.iter().map(|p| p.1).min().unwrap_or(0);
        let max = ports.iter().map(|p| p.1).max().unwrap_or(0);
        if max > min + 1 {
            lft_unbalanced.push(SwitchLftBalance {
                switch: NodeRef::new(fabric, NodeId::new(key.0 as usize)),
                direction: key.1,
                min,
                max,
                ports,
            });
        }
    }
    RouteBalance {
        ports,
        hottest,
        by_layer,
        lft_unbalanced,
        lft_switches_checked: checked,
    }
}

type CreditLoops = (CdgStats, usize, Vec<CreditLoop>);

fn credit_loops(
    fabric: &Fabric,
    idx: &Index,
    sw: &[NodeId],
    turn_base: &[usize],
    turn_lid: &[u16],
    sources: &[u32],
    opts: &CheckOptions,
) -> CreditLoops {
    // Vertices: channels with a dependency; edges: turns.
    let mut vertex = vec![u32::MAX; idx.channels()];
    let mut graph: DiGraph<u32, u16, u32> = DiGraph::new();
    let vertex_of = |vertex: &mut [u32], g: &mut DiGraph<u32, u16, u32>, ch: u32| {
        let v = &mut vertex[ch as usize];
        if *v == u32::MAX {
            *v = g.add_node(ch).index() as u32;
        }
        NodeIndex::<u32>::new(*v as usize)
    };
    for (x, &s) in sw.iter().enumerate() {
        let p = idx.slots(s.index()) as usize;
        let base = idx.base[s.index()];
        for in_port in 0..p {
            for out_port in 0..p {
                let lid = turn_lid[turn_base[x] + in_port * p + out_port];
                if lid == 0 {
                    continue;
                }
                let from = idx.peer[(base + in_port as u32) as usize];
                let to = base + out_port as u32;
                let a = vertex_of(&mut vertex, &mut graph, from);
                let b = vertex_of(&mut vertex, &mut graph, to);
                graph.add_edge(a, b, lid);
            }
        }
    }
    // Kosaraju rather than petgraph 0.6's recursive Tarjan: CDGs of rings and tori have long
    // dependency chains and recursion that deep could overflow a thread's stack.
    let sccs = petgraph::algo::kosaraju_scc(&graph);
    let mut cyclic: Vec<Vec<NodeIndex<u32>>> = sccs
        .into_iter()
        .filter(|c| c.len() > 1 || graph.contains_edge(c[0], c[0]))
        .collect();
    cyclic.sort_by_key(|c| std::cmp::Reverse(c.len()));
    let stats = CdgStats {
        channels: graph.node_count(),
        dependencies: graph.edge_count(),
        cyclic_components: cyclic.len(),
    };
    let found = cyclic.len();
    let mut out = Vec::new();
    let mut in_scc = vec![false; graph.node_count()];
    for comp in cyclic.iter().take(opts.max_examples) {
        for v in comp {
            in_scc[v.index()] = true;
        }
        let cycle = find_cycle(&graph, comp[0], &in_scc);
        for v in comp {
            in_scc[v.index()] = false;
        }
        let chans: Vec<u32> = cycle.iter().map(|v| graph[*v]).collect();
        let mut switches: Vec<u32> = comp
            .iter()
            .map(|v| idx.chan_node[graph[*v] as usize])
            .collect();
        switches.sort_unstable();
        switches.dedup();
        let mut example_routes = Vec::new();
        for k in 0..chans.len().min(4) {
            let a = chans[k];
            let b = chans[(k + 1) % chans.len()];
            let va = NodeIndex::new(vertex[a as usize] as usize);
            let vb = NodeIndex::new(vertex[b as usize] as usize);
            let Some(e) = graph.find_edge(va, vb) else {
                continue;
            };
            let lid = graph[e];
            if let Some(path) = route_using(fabric, idx, sources, lid, a, b) {
                if !example_routes.contains(&path) {
                    example_routes.push(path);
                }
            }
        }
        out.push(CreditLoop {
            channels: comp.len(),
            switches: switches.len(),
            cycle: chans
                .iter()
                .take(16)
                .map(|&c| ChannelRef {
                    from: PortRef::new(fabric, idx.end(c)),
                    to: PortRef::new(fabric, idx.end(idx.peer[c as usize])),
                })
                .collect(),
            cycle_len: chans.len(),
            example_routes,
        });
    }
    (stats, found, out)
}

/// A shortest cycle through `start` inside its component (BFS back to `start`).
fn find_cycle(
    graph: &DiGraph<u32, u16, u32>,
    start: NodeIndex<u32>,
    in_scc: &[bool],
) -> Vec<NodeIndex<u32>> {
    let mut parent: HashMap<NodeIndex<u32>, NodeIndex<u32>> = HashMap::new();
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for u in graph.neighbors(v) {
            if !in_scc[u.index()] {
                continue;
            }
            if u == start {
                let mut cycle = vec![v];
                let mut c = v;
                while c != start {
                    c = parent[&c];
                    cycle.push(c);
                }
                cycle.reverse();
                return cycle;
            }
            if let std::collections::hash_map::Entry::Vacant(e) = parent.entry(u) {
                e.insert(v);
                queue.push_back(u);
            }
        }
    }
    vec![start]
}

/// A source whose route to `lid` leaves through channel `a` and then `b`, traced in full.
fn route_using(
    fabric: &Fabric,
    idx: &Index,
    sources: &[u32],
    lid: u16,
    a: u32,
    b: u32,
) -> Option<Path> {
    let owner = fabric.port_by_lid(lid).and_then(|e| idx.channel(e));
    let mut chans = Vec::new();
    for &c in sources {
        chans.clear();
        let src = idx.end(c);
        if !idx.walk(src, lid, owner, &mut chans) {
            continue;
        }
        if chans.windows(2).any(|w| w[0] == a && w[1] == b) {
            return trace(fabric, src, lid).ok();
        }
    }
    None
}
