//! Credit loops: the channel dependency graph of the routes (one VL assumed) and its
//! cycles, each with a shortest cycle and routes that create it.

use std::collections::HashMap;

use petgraph::graph::{DiGraph, NodeIndex};

use crate::model::refs::PortRef;
use crate::model::Fabric;
use crate::routing::index::Index;
use crate::routing::path::{ChannelRef, Path};
use crate::routing::trace::trace;

use super::endpoints::Endpoints;
use super::report::{CdgStats, CheckOptions, CreditLoop};
use super::walk::Totals;

type CreditLoops = (CdgStats, usize, Vec<CreditLoop>);

/// Cycles in the channel dependency graph the routes' turns make: the CDG's size, the
/// cyclic components found, and up to `max_examples` of them with a cycle and routes.
pub(super) fn credit_loops(
    fabric: &Fabric,
    idx: &Index,
    ends: &Endpoints,
    totals: &Totals,
    opts: &CheckOptions,
) -> CreditLoops {
    let (sw, sources) = (&ends.sw, &ends.sources);
    let (turn_base, turn_lid) = (&totals.turn_base, &totals.turn_lid);
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
                    from: PortRef::at(fabric, idx.end(c)),
                    to: PortRef::at(fabric, idx.end(idx.peer[c as usize])),
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
