//! A modelling utility: fill every switch's LFT the way a min-hop subnet manager would.
//!
//! For each destination LID (ascending, CA port LIDs with their LMC range and switch LIDs),
//! every switch picks, among its ports on a shortest path over usable switch links, the one
//! that so far carries the fewest CA destination LIDs, lowest port number on a tie (OpenSM's
//! minhop balances the same way, though its exact counts differ). With `balance: false` the
//! lowest-numbered shortest-path port always wins. Switch LIDs are routed the same way but do
//! not count towards the balance (they carry no data traffic). Unreachable LIDs get [`NO_ROUTE`].
//!
//! Use it for what-if planning ("what would the SM do without this link?") and for tests;
//! it does not replace reading the real tables.

use std::collections::VecDeque;

use super::index::{number_switches, Index, NONE};
use crate::model::{End, Fabric, NodeId, SwitchFacts, NO_ROUTE};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MinhopOptions {
    /// Balance LIDs over equal-cost ports (default true).
    pub balance: bool,
}

impl Default for MinhopOptions {
    fn default() -> Self {
        MinhopOptions { balance: true }
    }
}

/// [`compute_minhop_lfts_with`] with default options.
pub fn compute_minhop_lfts(fabric: &mut Fabric) {
    compute_minhop_lfts_with(fabric, &MinhopOptions::default());
}

/// Replace every switch's LFT with min-hop routes (see the module docs). Sets
/// `linear_fdb_top` to the highest LID and raises `linear_fdb_cap` to fit.
pub fn compute_minhop_lfts_with(fabric: &mut Fabric, opts: &MinhopOptions) {
    let (tables, top) = {
        let idx = Index::new(fabric);
        compute(fabric, &idx, opts)
    };
    for (id, lft) in tables {
        let node = fabric.node_mut(id);
        let facts = node.switch.get_or_insert_with(SwitchFacts::default);
        facts.linear_fdb_cap = facts.linear_fdb_cap.max(lft.len().min(0xffff) as u16);
        facts.linear_fdb_top = top;
        facts.lft = lft;
    }
}

fn compute(fabric: &Fabric, idx: &Index, opts: &MinhopOptions) -> (Vec<(NodeId, Vec<u8>)>, u16) {
    let (sw, sw_of) = number_switches(fabric);
    let dests = destinations(fabric, idx, &sw_of);
    let top = dests.last().map(|d| d.lid).unwrap_or(0);
    let mut tables: Vec<Vec<u8>> = vec![vec![NO_ROUTE; usize::from(top) + 1]; sw.len()];
    let neighbours = neighbours(idx, &sw, &sw_of);
    // Per target switch, lazily: each switch's shortest-path ports towards it.
    let mut candidates: Vec<Option<Candidates>> = vec![None; sw.len()];
    let mut used = vec![0u32; idx.channels()];
    for d in &dests {
        let t = d.switch as usize;
        let cand = candidates[t].get_or_insert_with(|| Candidates::towards(t, &neighbours));
        let l = usize::from(d.lid);
        for x in 0..sw.len() {
            let base = idx.base[sw[x].index()];
            let chosen = if x == t {
                d.port
            } else {
                let ports = cand.of(x);
                let pick = if opts.balance {
                    ports
                        .iter()
                        .copied()
                        .min_by_key(|&p| (used[(base + u32::from(p)) as usize], p))
                } else {
                    ports.iter().copied().min()
                };
                match pick {
                    Some(p) => p,
                    None => continue,
                }
            };
            tables[x][l] = chosen;
            if d.is_ca && chosen != 0 {
                used[(base + u32::from(chosen)) as usize] += 1;
            }
        }
    }
    (sw.into_iter().zip(tables).collect(), top)
}

/// A destination LID, the switch that delivers it and its egress port there.
struct Dest {
    lid: u16,
    switch: u32,
    port: u8,
    is_ca: bool,
}

/// Every destination LID (LMC ranges included) with the switch it hangs off, by LID.
fn destinations(fabric: &Fabric, idx: &Index, sw_of: &[u32]) -> Vec<Dest> {
    let mut dests: Vec<Dest> = Vec::new();
    for (id, node) in fabric.nodes() {
        for p in &node.ports {
            if p.lid == 0 || (node.is_switch() && p.number != 0) {
                continue;
            }
            let end = End {
                node: id,
                port: p.number,
            };
            let target = if node.is_switch() {
                Some((sw_of[id.index()], 0u8))
            } else {
                idx.channel(end)
                    .filter(|&ch| idx.usable(ch))
                    .and_then(|ch| idx.peer(ch))
                    .map(|peer| idx.end(peer))
                    .filter(|e| idx.is_switch(e.node))
                    .map(|e| (sw_of[e.node.index()], e.port))
            };
            let Some((switch, port)) = target else {
                continue;
            };
            for off in 0..(1u32 << p.lmc.min(7)) {
                let lid = u32::from(p.lid) + off;
                if lid < 0xc000 && fabric.port_by_lid(lid as u16) == Some(end) {
                    dests.push(Dest {
                        lid: lid as u16,
                        switch,
                        port,
                        is_ca: !node.is_switch(),
                    });
                }
            }
        }
    }
    dests.sort_unstable_by_key(|d| (d.lid, d.switch, d.port, d.is_ca));
    dests.dedup_by_key(|d| d.lid);
    dests
}

/// Switch-to-switch neighbours over usable links: (port, neighbour switch number).
fn neighbours(idx: &Index, sw: &[NodeId], sw_of: &[u32]) -> Vec<Vec<(u8, u32)>> {
    sw.iter()
        .map(|&s| {
            let i = s.index();
            (idx.base[i] + 1..idx.base[i + 1])
                .filter(|&ch| idx.usable(ch))
                .filter_map(|ch| {
                    let peer = idx.peer(ch)?;
                    let t = sw_of[idx.chan_node[peer as usize] as usize];
                    (t != NONE).then_some((idx.chan_port[ch as usize], t))
                })
                .collect()
        })
        .collect()
}

/// Each switch's ports on a shortest path towards one target switch (compressed rows).
#[derive(Clone)]
struct Candidates {
    offsets: Vec<u32>,
    ports: Vec<u8>,
}

impl Candidates {
    fn towards(t: usize, neighbours: &[Vec<(u8, u32)>]) -> Candidates {
        let n = neighbours.len();
        let mut dist = vec![u32::MAX; n];
        let mut queue = VecDeque::from([t]);
        dist[t] = 0;
        while let Some(x) = queue.pop_front() {
            for &(_, y) in &neighbours[x] {
                let y = y as usize;
                if dist[y] == u32::MAX {
                    dist[y] = dist[x] + 1;
                    queue.push_back(y);
                }
            }
        }
        let mut offsets = Vec::with_capacity(n + 1);
        let mut ports = Vec::new();
        for x in 0..n {
            offsets.push(ports.len() as u32);
            if dist[x] == u32::MAX || x == t {
                continue;
            }
            for &(p, y) in &neighbours[x] {
                if dist[y as usize] + 1 == dist[x] {
                    ports.push(p);
                }
            }
        }
        offsets.push(ports.len() as u32);
        Candidates { offsets, ports }
    }

    fn of(&self, x: usize) -> &[u8] {
        &self.ports[self.offsets[x] as usize..self.offsets[x + 1] as usize]
    }
}
