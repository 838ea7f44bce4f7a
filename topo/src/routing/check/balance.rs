//! Route balance: switch layers (hops from the nearest CA), the load of every directed
//! link per layer and direction, the hottest links, and `check_lft_balance`'s rule.

use std::collections::{HashMap, VecDeque};

use crate::model::refs::PortRef;
use crate::model::{Fabric, NodeId, NodeKind};
use crate::routing::index::{Index, NONE};

use super::endpoints::Endpoints;
use super::report::{
    CheckOptions, Direction, LayerStats, PortLoad, RouteBalance, SwitchLftBalance,
};
use super::walk::{node_ref, Totals};

/// Hop distance of each switch from the nearest CA: leaves 1, spines 2, ... A SHARP
/// aggregation node (a CA on an extra port of its switch) makes no switch a leaf.
pub(super) fn switch_layers(fabric: &Fabric, idx: &Index, ends: &Endpoints) -> Vec<Option<u32>> {
    let (sw, sw_of) = (&ends.sw, &ends.sw_of);
    let mut layer: Vec<Option<u32>> = vec![None; sw.len()];
    let mut queue = VecDeque::new();
    let is_host = |node: u32| {
        let kind = fabric.node(NodeId::new(node as usize)).kind;
        kind != NodeKind::Switch && kind != NodeKind::AggregationNode
    };
    for (x, &s) in sw.iter().enumerate() {
        let i = s.index();
        let has_ca = (idx.base[i] + 1..idx.base[i + 1]).any(|ch| {
            idx.peer(ch)
                .is_some_and(|p| is_host(idx.chan_node[p as usize]))
        });
        if has_ca {
            layer[x] = Some(1);
            queue.push_back(x);
        }
    }
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

/// A directed link out of a switch or a CA: (channel, layer of its switch, direction).
type DirectedLink = (u32, Option<u32>, Direction);

/// Every directed link out of a switch, then every source's injection link.
fn directed_links(idx: &Index, ends: &Endpoints, layers: &[Option<u32>]) -> Vec<DirectedLink> {
    let mut chans = Vec::new();
    for (x, &s) in ends.sw.iter().enumerate() {
        let i = s.index();
        for ch in idx.base[i] + 1..idx.base[i + 1] {
            let Some(p) = idx.peer(ch) else { continue };
            let t = ends.sw_of[idx.chan_node[p as usize] as usize];
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
    for &c in &ends.sources {
        chans.push((c, Some(0), Direction::FromCa));
    }
    chans
}

/// Min/max/mean of the links sharing a layer and a direction.
fn by_layer(chans: &[DirectedLink], totals: &Totals) -> Vec<LayerStats> {
    let (lids, routes) = (&totals.lids_per_chan, &totals.routes_per_chan);
    let mut groups: HashMap<(Option<u32>, Direction), Vec<u32>> = HashMap::new();
    for &(ch, layer, dir) in chans {
        groups.entry((layer, dir)).or_default().push(ch);
    }
    let mut stats: Vec<LayerStats> = groups
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
    stats.sort_by_key(|s| (s.layer.is_none(), s.layer, s.direction));
    stats
}

/// check_lft_balance's rule, per direction: among a switch's live ports facing other
/// switches in one direction, the busiest may carry at most one CA LID more than the
/// idlest. (The script compares all such ports at once, which flags every middle-layer
/// switch of a 3-level tree, whose up and down ports carry different shares by design.)
/// Returns the switches flagged and how many switches were compared.
fn lft_unbalanced(
    fabric: &Fabric,
    idx: &Index,
    chans: &[DirectedLink],
    lids: &[u32],
) -> (Vec<SwitchLftBalance>, usize) {
    let mut per_switch: HashMap<(u32, Direction), Vec<(u8, u32)>> = HashMap::new();
    for &(ch, _, dir) in chans {
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
    let mut flagged = Vec::new();
    let mut checked = 0;
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
            flagged.push(SwitchLftBalance {
                switch: node_ref(fabric, key.0),
                direction: key.1,
                min,
                max,
                ports,
            });
        }
    }
    (flagged, checked)
}

pub(super) fn balance(
    fabric: &Fabric,
    idx: &Index,
    ends: &Endpoints,
    totals: &Totals,
    opts: &CheckOptions,
) -> RouteBalance {
    let layers = switch_layers(fabric, idx, ends);
    let chans = directed_links(idx, ends, &layers);
    let (lids, routes) = (&totals.lids_per_chan, &totals.routes_per_chan);
    let load = |&(ch, layer, direction): &DirectedLink| PortLoad {
        from: PortRef::at(fabric, idx.end(ch)),
        to: PortRef::at(fabric, idx.end(idx.peer[ch as usize])),
        layer,
        direction,
        lids: lids[ch as usize],
        routes: routes[ch as usize],
    };
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
    let (lft_unbalanced, lft_switches_checked) = lft_unbalanced(fabric, idx, &chans, lids);
    RouteBalance {
        ports,
        hottest,
        by_layer: by_layer(&chans, totals),
        lft_unbalanced,
        lft_switches_checked,
    }
}
