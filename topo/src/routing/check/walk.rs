//! The per-destination pass of `route check`: for one destination LID, resolve every
//! switch (delivered at distance k, broken at switch z, or caught in a loop), count the
//! (source, destination) pairs behind each switch, and accumulate link route counts, hop
//! counts and channel dependencies down the destination's tree.

use std::collections::HashMap;

use crate::model::refs::{NodeRef, PortRef};
use crate::model::{Fabric, NodeId, NO_ROUTE};
use crate::routing::index::{Index, Step, NONE};

use super::endpoints::Endpoints;
use super::report::{BreakKind, CheckOptions, ForwardingLoop, UnreachableDest};

const UNVISITED: u8 = 0;
const IN_PROGRESS: u8 = 1;
const DELIVERED: u8 = 2;
const BROKEN: u8 = 3;
const LOOPING: u8 = 4;

/// `clean_dist` of a switch not reached yet, and of one on the path being followed.
const DIST_UNKNOWN: u16 = u16::MAX;
const DIST_PENDING: u16 = u16::MAX - 1;

/// Destination LIDs whose LFT entries are gathered at once (see [`Walk::lft_block`]).
const BLOCK: usize = 32;

/// What leaving a switch through one port leads to, precomputed for the pass: one read
/// instead of the index's channel arrays at every step. Eight bytes, so that the table
/// (read at a random switch and port at every step) stays half as large in cache; the
/// port's own channel is its switch's `chan_base` plus the port.
#[derive(Clone, Copy)]
struct PortExit {
    /// The channel at the far end (NONE: none; [`PEER_DOWN`]: port 0, or not usable).
    peer: u32,
    /// When the far end is a switch: its switch number `<< 8 | ` the port it enters by;
    /// NONE otherwise.
    link: u32,
}

/// The `peer` of a port that is not usable (never a channel: channels are fewer).
const PEER_DOWN: u32 = u32::MAX - 1;

/// Gathered links at or above this are no switch-to-switch link (switch numbers are below
/// 2^24, so `next << 8 | port` is below it): the step is worked out from the port.
const NOT_A_LINK: u32 = u32::MAX - 0xff;

/// Where the routes to one destination break, or the loop they are caught in.
struct RouteBreak {
    kind: BreakKind,
    node: u32,
    port: Option<u8>,
    /// Switch indexes of a loop.
    cycle: Vec<u32>,
    pairs: u64,
}

/// Every destination whose routes break at one place, so far.
#[derive(Default)]
pub(super) struct BreakAgg {
    pub destinations: u64,
    pub pairs: u64,
    pub example_lids: Vec<u16>,
}

/// What the passes add up over all destinations.
pub(super) struct Totals {
    /// CA destination LIDs each switch port's LFT entries send out of it.
    pub lids_per_chan: Vec<u32>,
    /// Delivered CA-to-CA routes crossing each directed link.
    pub routes_per_chan: Vec<u64>,
    /// Index = links traversed; counts delivered pairs.
    pub hist: Vec<u64>,
    pub pairs_ok: u64,
    pub pairs_broken: u64,
    pub pairs_looping: u64,
    /// By (node, kind, port).
    pub breaks: HashMap<(u32, BreakKind, Option<u8>), BreakAgg>,
    pub unreachable: Vec<UnreachableDest>,
    pub unreachable_count: usize,
    pub loops: Vec<ForwardingLoop>,
    pub loops_found: usize,
    /// CDG turns at a switch: `turn_base[switch] + in_port * slots + out_port` -> the first
    /// destination LID creating it (0: none).
    pub turn_base: Vec<usize>,
    pub turn_lid: Vec<u16>,
    /// One bit per turn slot: set once `turn_lid` holds its first LID. Most destinations
    /// only find turns already seen; the bits (1/16 of `turn_lid`) stay in cache.
    turn_seen: Vec<u64>,
}

impl Totals {
    /// Record that a route to `lid` makes the turn in `slot`, if no route made it before.
    #[inline]
    fn note_turn(&mut self, slot: usize, lid: u16) {
        let (word, bit) = (slot / 64, 1u64 << (slot % 64));
        if self.turn_seen[word] & bit == 0 {
            self.turn_seen[word] |= bit;
            self.turn_lid[slot] = lid;
        }
    }
}

/// The pass, with its working arrays (indexed by switch number) reused between
/// destinations.
pub(super) struct Walk<'a> {
    fabric: &'a Fabric,
    idx: &'a Index<'a>,
    ends: &'a Endpoints,
    opts: &'a CheckOptions,
    status: Vec<u8>,
    next: Vec<u32>,
    next_in_port: Vec<u8>,
    egress: Vec<u8>,
    dist: Vec<u16>,
    ev: Vec<u32>,
    /// Sources accumulated at each switch of the current tree.
    w: Vec<u64>,
    stack: Vec<u32>,
    events: Vec<RouteBreak>,
    /// The switches delivering the current destination, each after its successor (as
    /// they were resolved): backwards, every switch comes before the one it forwards to.
    order: Vec<u32>,
    /// Per switch: its LFT was read.
    has_lft: Vec<bool>,
    /// Per switch number `s`: its ports' exits at `exit_base[s]..exit_base[s + 1]`.
    exits: Vec<PortExit>,
    exit_base: Vec<usize>,
    /// Per switch number: the channel of its port 0.
    chan_base: Vec<u32>,
    /// Per switch and port: its exit's `link` when the port leads to a switch, else
    /// [`NOT_A_LINK`]; at `exit_base`, like `exits`.
    links: Vec<u32>,
    /// The LFT entries of every switch for the destination LIDs `block_lo..block_lo +
    /// BLOCK`, destination by destination ([`NO_ROUTE`] past a table's end), and the
    /// link each leaves by. One destination reads one entry of every switch's table:
    /// gathered a block at a time, the tables are read in order, and each destination's
    /// pass reads contiguous memory instead of a cache line per switch.
    block_ports: Vec<u8>,
    block_links: Vec<u32>,
    /// The block's LFT entries switch by switch, as copied from the tables.
    staged: Vec<u8>,
    /// Per switch number: its port slots.
    slots: Vec<u32>,
    /// Per switch: links to the current clean destination ([`DIST_UNKNOWN`] between
    /// destinations).
    clean_dist: Vec<u16>,
    /// The last clean destination's `order` and its delivering switch ([`NONE`] when
    /// `order` holds anything else): the next destination on the same switch is nearly
    /// always resolved in the same order (see [`Walk::follow_last_order`]).
    clean_order_own: u32,
    /// CA destinations that every switch delivered (counted here, not per switch).
    clean_ca_dests: u64,
    block_lo: usize,
    /// Per switch: CA destinations delivered; per source: its own LID delivered to its
    /// switch (it does not send to itself).
    delivered_dests: Vec<u64>,
    self_delivered: Vec<u64>,
    usable_sources: u64,
    totals: Totals,
}

/// One destination: its LID, the channel owning it, whether a CA (or router) owns it.
#[derive(Clone, Copy)]
struct Dest {
    lid: u16,
    owner: u32,
    is_ca: bool,
    /// The owner is a switch port with a link: a switch-to-switch link may deliver.
    owner_linked_switch: bool,
}

impl<'a> Walk<'a> {
    pub fn new(
        fabric: &'a Fabric,
        idx: &'a Index<'a>,
        ends: &'a Endpoints,
        opts: &'a CheckOptions,
    ) -> Walk<'a> {
        let s_count = ends.sw.len();
        let mut turn_base = Vec::with_capacity(s_count + 1);
        let mut acc = 0usize;
        for &s in &ends.sw {
            turn_base.push(acc);
            let p = idx.slots(s.index()) as usize;
            acc += p * p;
        }
        turn_base.push(acc);
        // Switch numbers are packed with a port in a PortExit's 32-bit link.
        assert!(s_count < 1 << 24, "too many switches for the route check");
        let (exits, exit_base) = port_exits(idx, ends);
        let links = exits
            .iter()
            .map(|h| if h.link == NONE { NOT_A_LINK } else { h.link })
            .collect();
        Walk {
            fabric,
            idx,
            ends,
            opts,
            status: vec![UNVISITED; s_count],
            next: vec![NONE; s_count],
            next_in_port: vec![0; s_count],
            egress: vec![0; s_count],
            dist: vec![0; s_count],
            ev: vec![NONE; s_count],
            w: vec![0; s_count],
            stack: Vec::new(),
            events: Vec::new(),
            order: Vec::new(),
            has_lft: ends.sw.iter().map(|&s| idx.has_lft(s)).collect(),
            exits,
            exit_base,
            links,
            chan_base: ends.sw.iter().map(|&s| idx.base[s.index()]).collect(),
            block_ports: vec![NO_ROUTE; s_count * BLOCK],
            block_links: vec![NOT_A_LINK; s_count * BLOCK],
            staged: vec![NO_ROUTE; s_count * BLOCK],
            slots: ends.sw.iter().map(|&s| idx.slots(s.index())).collect(),
            clean_dist: vec![DIST_UNKNOWN; s_count],
            clean_order_own: NONE,
            clean_ca_dests: 0,
            block_lo: usize::MAX,
            delivered_dests: vec![0; s_count],
            self_delivered: vec![0; ends.sources.len()],
            usable_sources: (ends.sources.len() - ends.down_sources.len()) as u64,
            totals: Totals {
                lids_per_chan: lids_per_chan(idx, ends),
                routes_per_chan: vec![0; idx.channels()],
                hist: Vec::new(),
                pairs_ok: 0,
                pairs_broken: 0,
                pairs_looping: 0,
                breaks: HashMap::new(),
                unreachable: Vec::new(),
                unreachable_count: 0,
                loops: Vec::new(),
                loops_found: 0,
                turn_base,
                turn_lid: vec![0; acc],
                turn_seen: vec![0; acc.div_ceil(64)],
            },
        }
    }

    /// Every route to one destination LID, owned by channel `owner`.
    pub fn destination(&mut self, lid: u16, owner: u32, is_ca: bool) {
        let idx = self.idx;
        let d = Dest {
            lid,
            owner,
            is_ca,
            owner_linked_switch: idx.is_switch_index(idx.chan_node[owner as usize])
                && idx.peer(owner).is_some(),
        };
        self.lft_block(lid);
        self.events.clear();
        let owner_src = self.ends.source_of_chan[owner as usize];
        // Where the destination itself sits as a source (it does not send to itself).
        let self_at = if owner_src != NONE && self.idx.usable(owner) {
            let pn = self.idx.chan_node[self.idx.peer[owner as usize] as usize];
            self.ends.sw_of[pn as usize]
        } else {
            NONE
        };
        if self.clean_destination(d, self_at, owner_src) {
            let failed = self.count_direct(d);
            self.fold_events(d, failed, self_at);
            return;
        }
        self.status.fill(UNVISITED);
        self.order.clear();
        self.clean_order_own = NONE;
        for start in 0..self.ends.sw.len() {
            if self.status[start] == UNVISITED {
                self.resolve_from(start, d);
            }
        }
        let failed = self.count_pairs(d, self_at, owner_src);
        self.accumulate(d);
        self.fold_events(d, failed, self_at);
    }

    /// Gather the LFT entries of the block holding `lid`, unless already there: first
    /// every table's slice (short copies, whose cache misses overlap), then turned
    /// destination by destination.
    fn lft_block(&mut self, lid: u16) {
        let lo = usize::from(lid) / BLOCK * BLOCK;
        if lo == self.block_lo {
            return;
        }
        self.block_lo = lo;
        for (s, row) in self.staged.chunks_exact_mut(BLOCK).enumerate() {
            let table = self.idx.table(self.ends.sw[s].index()).unwrap_or_default();
            let have = table.get(lo..).unwrap_or_default();
            let have = &have[..have.len().min(BLOCK)];
            row[..have.len()].copy_from_slice(have);
            row[have.len()..].fill(NO_ROUTE);
        }
        let s_count = self.ends.sw.len();
        for (s, row) in self.staged.chunks_exact(BLOCK).enumerate() {
            let links = &self.links[self.exit_base[s]..self.exit_base[s + 1]];
            for (off, &port) in row.iter().enumerate() {
                self.block_ports[off * s_count + s] = port;
                self.block_links[off * s_count + s] =
                    links.get(usize::from(port)).copied().unwrap_or(NOT_A_LINK);
            }
        }
    }

    /// What switch number `cur` does with a packet for `d` whose LFT entry is `port`
    /// (as [`Index::step`]).
    fn step(&self, cur: usize, port: u8, d: Dest) -> Step {
        if !self.has_lft[cur] {
            return Step::LftNotRead;
        }
        let (lo, hi) = (self.exit_base[cur], self.exit_base[cur + 1]);
        if port == NO_ROUTE {
            return Step::NoRoute;
        }
        if usize::from(port) >= hi - lo {
            return Step::PortDown { port };
        }
        if port == 0 {
            return if self.chan_base[cur] == d.owner {
                Step::DeliverSelf
            } else {
                Step::Misdelivered { port, peer: None }
            };
        }
        let exit = self.exits[lo + usize::from(port)];
        if exit.peer == PEER_DOWN {
            Step::PortDown { port }
        } else if exit.peer == d.owner {
            Step::DeliverCa {
                port,
                peer: exit.peer,
            }
        } else if exit.link != NONE {
            Step::Forward {
                port,
                peer: exit.peer,
            }
        } else {
            Step::Misdelivered {
                port,
                peer: Some(exit.peer),
            }
        }
    }

    /// Follow the LFTs from switch `start` until a switch already resolved, a delivery,
    /// a break or a loop; every switch on the way shares that outcome.
    fn resolve_from(&mut self, start: usize, d: Dest) {
        let ends = self.ends;
        self.stack.clear();
        let mut cur = start;
        let (st, base_dist, e) = loop {
            match self.status[cur] {
                UNVISITED => {}
                IN_PROGRESS => {
                    let pos = self
                        .stack
                        .iter()
                        .rposition(|&x| x as usize == cur)
                        .unwrap_or(0);
                    self.events.push(RouteBreak {
                        kind: BreakKind::NoRoute,
                        node: ends.sw[cur].index() as u32,
                        port: None,
                        cycle: self.stack[pos..].to_vec(),
                        pairs: 0,
                    });
                    break (LOOPING, 0, (self.events.len() - 1) as u32);
                }
                s => break (s, self.dist[cur], self.ev[cur]),
            }
            self.status[cur] = IN_PROGRESS;
            self.stack.push(cur as u32);
            let at = ends.sw[cur];
            let i = (usize::from(d.lid) - self.block_lo) * ends.sw.len() + cur;
            let (port, link) = (self.block_ports[i], self.block_links[i]);
            if link < NOT_A_LINK && !d.owner_linked_switch {
                self.egress[cur] = port;
                self.next[cur] = link >> 8;
                self.next_in_port[cur] = link as u8;
                cur = (link >> 8) as usize;
                continue;
            }
            let step = self.step(cur, port, d);
            let (kind, port) = match step {
                Step::DeliverSelf | Step::DeliverCa { .. } => {
                    let (dist, port) = match step {
                        Step::DeliverCa { port, .. } => (1, port),
                        _ => (0, 0),
                    };
                    self.stack.pop();
                    self.status[cur] = DELIVERED;
                    self.dist[cur] = dist;
                    self.next[cur] = NONE;
                    self.egress[cur] = port;
                    self.order.push(cur as u32);
                    break (DELIVERED, dist, NONE);
                }
                Step::Forward { port, .. } => {
                    let exit = self.exits[self.exit_base[cur] + usize::from(port)];
                    let next = exit.link >> 8;
                    self.egress[cur] = port;
                    self.next[cur] = next;
                    self.next_in_port[cur] = exit.link as u8;
                    cur = next as usize;
                    continue;
                }
                Step::Misdelivered { port, .. } => (BreakKind::Misdelivered, Some(port)),
                Step::PortDown { port } => (BreakKind::PortDown, Some(port)),
                Step::NoRoute => (BreakKind::NoRoute, None),
                Step::LftNotRead => (BreakKind::LftNotRead, None),
            };
            self.events.push(RouteBreak {
                kind,
                node: at.index() as u32,
                port,
                cycle: Vec::new(),
                pairs: 0,
            });
            self.stack.pop();
            self.status[cur] = BROKEN;
            self.ev[cur] = (self.events.len() - 1) as u32;
            break (BROKEN, 0, self.ev[cur]);
        };
        let mut dist = base_dist;
        while let Some(x) = self.stack.pop() {
            let x = x as usize;
            self.status[x] = st;
            self.ev[x] = e;
            if st == DELIVERED {
                dist += 1;
                self.dist[x] = dist;
                self.order.push(x as u32);
            }
        }
    }

    /// Pairs: the sources attached to each switch share its fate; sources linked back to
    /// back reach only their peer. Returns the pairs that failed.
    fn count_pairs(&mut self, d: Dest, self_at: u32, owner_src: u32) -> u64 {
        let t = &mut self.totals;
        let mut failed = 0u64;
        for x in 0..self.ends.sw.len() {
            let mut k = self.ends.attach_count[x];
            if self_at == x as u32 {
                k -= 1;
            }
            match self.status[x] {
                DELIVERED => {
                    let dd = usize::from(self.dist[x]);
                    if k > 0 {
                        t.pairs_ok += k;
                        add_hops(&mut t.hist, dd + 1, k);
                        self.w[x] = k;
                    }
                    if d.is_ca {
                        self.delivered_dests[x] += 1;
                        if self_at == x as u32 {
                            self.self_delivered[owner_src as usize] += 1;
                        }
                    }
                }
                BROKEN => {
                    t.pairs_broken += k;
                    failed += k;
                    self.events[self.ev[x] as usize].pairs += k;
                }
                _ => {
                    t.pairs_looping += k;
                    failed += k;
                    self.events[self.ev[x] as usize].pairs += k;
                }
            }
        }
        failed + self.count_direct(d)
    }

    /// Pairs from the sources linked back to back, which reach only their peer. Returns
    /// the pairs that failed.
    fn count_direct(&mut self, d: Dest) -> u64 {
        let t = &mut self.totals;
        let mut failed = 0u64;
        for &c in &self.ends.direct {
            if c == d.owner {
                continue;
            }
            if self.idx.peer[c as usize] == d.owner {
                t.pairs_ok += 1;
                add_hops(&mut t.hist, 1, 1);
                if d.is_ca {
                    t.routes_per_chan[c as usize] += 1;
                }
            } else {
                t.pairs_broken += 1;
                failed += 1;
                self.events.push(RouteBreak {
                    kind: BreakKind::Misdelivered,
                    node: self.idx.chan_node[c as usize],
                    port: Some(self.idx.chan_port[c as usize]),
                    cycle: Vec::new(),
                    pairs: 1,
                });
            }
        }
        failed
    }

    /// The switch that should deliver `d` (the owner's, or the owner's peer's), and at
    /// how many links from the destination it is, when its LFT does deliver.
    fn delivering_switch(&self, d: Dest) -> Option<(usize, u16)> {
        let idx = self.idx;
        let owner_node = idx.chan_node[d.owner as usize];
        let node = if idx.is_switch_index(owner_node) {
            owner_node
        } else {
            idx.chan_node[idx.peer(d.owner)? as usize]
        };
        let sw = self.ends.sw_of[node as usize];
        if sw == NONE {
            return None;
        }
        let sw = sw as usize;
        let i = (usize::from(d.lid) - self.block_lo) * self.ends.sw.len() + sw;
        match self.step(sw, self.block_ports[i], d) {
            Step::DeliverSelf => Some((sw, 0)),
            Step::DeliverCa { .. } => Some((sw, 1)),
            _ => None,
        }
    }

    /// The pass for a destination that every switch but the one delivering it forwards
    /// over a switch-to-switch link, without loops: nothing breaks, so the general pass's
    /// bookkeeping is not needed. `false`, with nothing counted, for any other.
    fn clean_destination(&mut self, d: Dest, self_at: u32, owner_src: u32) -> bool {
        let s_count = self.ends.sw.len();
        if d.owner_linked_switch || s_count >= usize::from(DIST_PENDING) {
            return false;
        }
        let Some((own, own_dist)) = self.delivering_switch(d) else {
            return false;
        };
        let col = (usize::from(d.lid) - self.block_lo) * s_count;
        let links = &self.block_links[col..col + s_count];
        // The delivering switch's entry is no link; any other such entry breaks a route.
        if links.iter().filter(|&&l| l >= NOT_A_LINK).count() != 1 {
            return false;
        }
        if !self.clean_distances(col, own, own_dist) {
            return false;
        }
        let t = &mut self.totals;
        for (x, &attached) in self.ends.attach_count.iter().enumerate() {
            let k = attached - u64::from(self_at == x as u32);
            if k > 0 {
                t.pairs_ok += k;
                add_hops(&mut t.hist, usize::from(self.clean_dist[x]) + 1, k);
                self.w[x] = k;
            }
        }
        if d.is_ca {
            self.clean_ca_dests += 1;
            if self_at != NONE {
                self.self_delivered[owner_src as usize] += 1;
            }
        }
        self.clean_dist.fill(DIST_UNKNOWN);
        self.clean_accumulate(d, col, own);
        true
    }

    /// Every switch's links to the destination into `clean_dist`, and `order` (each
    /// switch after the one it forwards to). `false`, with `clean_dist` reset, on a loop.
    fn clean_distances(&mut self, col: usize, own: usize, own_dist: u16) -> bool {
        if self.clean_order_own == own as u32 && self.follow_last_order(col, own_dist) {
            return true;
        }
        self.clean_order_own = NONE;
        let s_count = self.ends.sw.len();
        let links = &self.block_links[col..col + s_count];
        let dist = &mut self.clean_dist;
        dist[own] = own_dist;
        self.order.clear();
        self.order.push(own as u32);
        for start in 0..s_count {
            if dist[start] != DIST_UNKNOWN {
                continue;
            }
            self.stack.clear();
            let mut cur = start;
            while dist[cur] == DIST_UNKNOWN {
                dist[cur] = DIST_PENDING;
                self.stack.push(cur as u32);
                cur = (links[cur] >> 8) as usize;
            }
            if dist[cur] == DIST_PENDING {
                dist.fill(DIST_UNKNOWN);
                return false;
            }
            let mut k = dist[cur];
            for &x in self.stack.iter().rev() {
                k += 1;
                dist[x as usize] = k;
                self.order.push(x);
            }
        }
        // Sorted by distance, the order stays valid for every column that forwards
        // between the same layers, which the next destination's may do.
        let dist = &self.clean_dist;
        self.order.sort_unstable_by_key(|&x| dist[x as usize]);
        self.clean_order_own = own as u32;
        true
    }

    /// [`Walk::clean_distances`] in the last clean destination's order (`order`, which
    /// starts at the delivering switch): each switch's distance from the one it forwards
    /// to, which that order has already given whenever the new column forwards between the
    /// same layers (destinations behind one leaf of a fat tree do). One read of each
    /// switch in sequence instead of following every chain: `false`, with `clean_dist`
    /// reset, as soon as a switch forwards to one not given yet.
    fn follow_last_order(&mut self, col: usize, own_dist: u16) -> bool {
        let s_count = self.ends.sw.len();
        let links = &self.block_links[col..col + s_count];
        let dist = &mut self.clean_dist;
        let Some((&own, rest)) = self.order.split_first() else {
            return false;
        };
        dist[own as usize] = own_dist;
        for &x in rest {
            let k = dist[(links[x as usize] >> 8) as usize];
            if k >= DIST_PENDING {
                dist.fill(DIST_UNKNOWN);
                return false;
            }
            dist[x as usize] = k + 1;
        }
        true
    }

    /// [`Walk::accumulate`] for a clean destination, reading the gathered column.
    fn clean_accumulate(&mut self, d: Dest, col: usize, own: usize) {
        let cdg = d.is_ca || self.opts.cdg_switch_destinations;
        let s_count = self.ends.sw.len();
        let links = &self.block_links[col..col + s_count];
        let ports = &self.block_ports[col..col + s_count];
        let t = &mut self.totals;
        for &x in self.order.iter().rev() {
            let x = x as usize;
            let wx = self.w[x];
            if wx == 0 {
                continue;
            }
            if d.is_ca && ports[x] != 0 {
                t.routes_per_chan[(self.chan_base[x] + u32::from(ports[x])) as usize] += wx;
            }
            if x == own {
                continue;
            }
            let next = (links[x] >> 8) as usize;
            self.w[next] += wx;
            // Dependency (x -> next) then (next -> its next): both switch-to-switch.
            if cdg && next != own {
                let slot = t.turn_base[next]
                    + usize::from(links[x] as u8) * self.slots[next] as usize
                    + usize::from(ports[next]);
                t.note_turn(slot, d.lid);
            }
        }
        for &x in &self.order {
            self.w[x as usize] = 0;
        }
    }

    /// Accumulate sources down the destination's tree, each switch before its successor: link
    /// route counts and the channel dependencies (turns) the routes create.
    fn accumulate(&mut self, d: Dest) {
        let cdg = d.is_ca || self.opts.cdg_switch_destinations;
        let t = &mut self.totals;
        for &x in self.order.iter().rev() {
            let x = x as usize;
            let wx = self.w[x];
            if wx == 0 {
                continue;
            }
            if d.is_ca && self.egress[x] != 0 {
                t.routes_per_chan[(self.chan_base[x] + u32::from(self.egress[x])) as usize] += wx;
            }
            let next = self.next[x];
            if next == NONE {
                continue;
            }
            let next = next as usize;
            self.w[next] += wx;
            // Dependency (x -> next) then (next -> its next): both switch-to-switch.
            if cdg && self.next[next] != NONE {
                let p = self.slots[next] as usize;
                let slot = t.turn_base[next]
                    + usize::from(self.next_in_port[x]) * p
                    + usize::from(self.egress[next]);
                t.note_turn(slot, d.lid);
            }
        }
        for &x in &self.order {
            self.w[x as usize] = 0;
        }
    }

    /// Fold this destination's events into the totals.
    fn fold_events(&mut self, d: Dest, failed: u64, self_at: u32) {
        let (fabric, idx, ends) = (self.fabric, self.idx, self.ends);
        let t = &mut self.totals;
        for e in &self.events {
            if !e.cycle.is_empty() {
                t.loops_found += 1;
                if t.loops.len() < self.opts.max_examples {
                    t.loops.push(ForwardingLoop {
                        dst_lid: d.lid,
                        dst: Some(PortRef::at(fabric, idx.end(d.owner))),
                        cycle: e
                            .cycle
                            .iter()
                            .map(|&s| NodeRef::new(fabric, ends.sw[s as usize]))
                            .collect(),
                        pairs: e.pairs,
                    });
                }
                continue;
            }
            let agg = t.breaks.entry((e.node, e.kind, e.port)).or_default();
            agg.destinations += 1;
            agg.pairs += e.pairs;
            if agg.example_lids.len() < 5 {
                agg.example_lids.push(d.lid);
            }
        }
        let tried = self.usable_sources - u64::from(self_at != NONE);
        if failed > 0 {
            t.unreachable_count += 1;
            if t.unreachable.len() < self.opts.max_examples {
                t.unreachable.push(UnreachableDest {
                    dst_lid: d.lid,
                    dst: PortRef::at(fabric, idx.end(d.owner)),
                    sources_failed: failed,
                    sources: tried,
                });
            }
        }
    }

    /// The totals, with what only the whole pass knows: sources that are down fail every
    /// destination; a source's injection link carries its switch's delivered CA
    /// destinations.
    pub fn finish(mut self) -> Totals {
        let (idx, ends) = (self.idx, self.ends);
        let t = &mut self.totals;
        for &c in &ends.down_sources {
            let own = ends.dests.iter().filter(|d| d.1 == c).count() as u64;
            let k = ends.dests.len() as u64 - own;
            t.pairs_broken += k;
            let node = idx.chan_node[c as usize];
            let port = Some(idx.chan_port[c as usize]);
            let agg = t
                .breaks
                .entry((node, BreakKind::SourceDown, port))
                .or_default();
            agg.destinations += k;
            agg.pairs += k;
        }
        for (x, list) in ends.attached.iter().enumerate() {
            for &c in list {
                let si = ends.source_of_chan[c as usize] as usize;
                t.routes_per_chan[c as usize] +=
                    self.delivered_dests[x] + self.clean_ca_dests - self.self_delivered[si];
            }
        }
        self.totals
    }
}

/// Per channel: the CA destination LIDs its switch's LFT sends out of it (port 0, ports
/// beyond the switch's and unset entries aside). Table by table, in order.
fn lids_per_chan(idx: &Index, ends: &Endpoints) -> Vec<u32> {
    let mut lids_per_chan = vec![0u32; idx.channels()];
    let ca_lids: Vec<usize> = ends
        .dests
        .iter()
        .filter(|d| d.2)
        .map(|d| usize::from(d.0))
        .collect();
    let mut count = [0u32; 256];
    for &s in &ends.sw {
        let Some(table) = idx.table(s.index()) else {
            continue;
        };
        count.fill(0);
        for &lid in &ca_lids {
            if let Some(&port) = table.get(lid) {
                count[usize::from(port)] += 1;
            }
        }
        let slots = idx.slots(s.index()) as usize;
        let base = idx.base[s.index()] as usize;
        for port in 1..slots.min(usize::from(NO_ROUTE)) {
            lids_per_chan[base + port] += count[port];
        }
    }
    lids_per_chan
}

/// Every switch's port exits, port by port, with each switch's first at its number in the
/// second.
fn port_exits(idx: &Index, ends: &Endpoints) -> (Vec<PortExit>, Vec<usize>) {
    let mut exits = Vec::new();
    let mut base = Vec::with_capacity(ends.sw.len() + 1);
    for &s in &ends.sw {
        base.push(exits.len());
        let node = s.index();
        for port in 0..idx.slots(node) {
            let chan = idx.base[node] + port;
            let peer = idx.peer[chan as usize];
            let mut exit = PortExit { peer, link: NONE };
            if port == 0 || !idx.usable(chan) {
                exit.peer = PEER_DOWN;
            } else if idx.is_switch_index(idx.chan_node[peer as usize]) {
                let next = ends.sw_of[idx.chan_node[peer as usize] as usize];
                exit.link = next << 8 | u32::from(idx.chan_port[peer as usize]);
            }
            exits.push(exit);
        }
    }
    base.push(exits.len());
    (exits, base)
}

/// Count `pairs` delivered over `hops` links.
fn add_hops(hist: &mut Vec<u64>, hops: usize, pairs: u64) {
    if hist.len() <= hops {
        hist.resize(hops + 1, 0);
    }
    hist[hops] += pairs;
}

/// A node of the fabric by its index in the [`Index`].
pub(super) fn node_ref(fabric: &Fabric, node: u32) -> NodeRef {
    NodeRef::new(fabric, NodeId::new(node as usize))
}
