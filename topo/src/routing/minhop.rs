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

use super::index::{Index, NONE};
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
    let n = fabric.node_count();
    let mut sw: Vec<NodeId> = Vec::new();
    let mut sw_of = vec![NONE; n];
    for (id, node) in fabric.nodes() {
        if node.is_switch() {
            sw_of[id.index()] = sw.len() as u32;
            sw.push(id);
        }
    }
    // Destinations: (lid, target switch index, egress port at the target, is a CA).
    let mut dests: Vec<(u16, u32, u8, bool)> = Vec::new();
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
            let Some((t, port)) = target else { continue };
            for off in 0..(1u32 << p.lmc.min(7)) {
                let lid = u32::from(p.lid) + off;
                if lid < 0xc000 && fabric.port_by_lid(lid as u16) == Some(end) {
                    dests.push((lid as u16, t, port, !node.is_switch()));
                }
            }
        }
    }
    dests.sort_unstable();
    dests.dedup_by_key(|d| d.0);
    let top = dests.last().map(|d| d.0).unwrap_or(0);
    let mut tables: Vec<Vec<u8>> = vec![vec![NO_ROUTE; usize::from(top) + 1]; sw.len()];

    // Switch-to-switch neighbours over usable links: (port, neighbour switch index).
    let neighbours: Vec<Vec<(u8, u32)>> = sw
        .iter()
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
        .collect();

    // Per target switch, lazily: each switch's shortest-path ports towards it.
    let mut candidates: Vec<Option<(Vec<u32>, Vec<u8>)>> = vec![None; sw.len()];
    let mut used = vec![0u32; idx.channels()];
    let mut dist = vec![u32::MAX; sw.len()];
    let mut queue = VecDeque::new();
    for &(lid, target, target_port, is_ca) in &dests {
        let t = target as usize;
        if candidates[t].is_none() {
            dist.fill(u32::MAX);
            dist[t] = 0;
            queue.push_back(t);
            while let Some(x) = queue.pop_front() {
                for &(_, y) in &neighbours[x] {
                    let y = y as usize;
                    if dist[y] == u32::MAX {
                        dist[y] = dist[x] + 1;
                        queue.push_back(y);
                    }
                }
            }
            let mut offsets = Vec::with_capacity(sw.len() + 1);
            let mut ports = Vec::new();
            for x in 0..sw.len() {
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
            candidates[t] = Some((offsets, ports));
        }
        let Some((offsets, ports)) = candidates[t].as_ref() else {
            continue;
        };
        let l = usize::from(lid);
        for x in 0..sw.len() {
            let base = idx.base[sw[x].index()];
            let chosen = if x == t {
                target_port
            } else {
                let cand = &ports[offsets[x] as usize..offsets[x + 1] as usize];
                let pick = if opts.balance {
                    cand.iter()
                        .copied()
                        .min_by_key(|&p| (used[(base + u32::from(p)) as usize], p))
                } else {
                    cand.iter().copied().min()
                };
                match pick {
                    Some(p) => p,
                    None => continue,
                }
            };
            tables[x][l] = chosen;
            if is_ca && chosen != 0 {
                used[(base + u32::from(chosen)) as usize] += 1;
            }
        }
    }
    (sw.into_iter().zip(tables).collect(), top)
}
