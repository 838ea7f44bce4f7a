//! `route load`: put a traffic pattern on the fabric's actual routes and predict rates.
//!
//! Model: every directed link has a capacity of active width (lanes) x the lane's data rate
//! ([`Speed::lane_data_gbps`], encoding overhead removed), the lower of both ends when both
//! are known. Flows are long-lived and greedy; they share links max-min fairly, computed
//! exactly by progressive filling: all flows grow together, a link saturates when its
//! capacity is used up, the flows through it freeze at that rate, the rest keep growing.
//! This is what an ideal fair arbiter with perfect credit flow would give; it ignores VL
//! arbitration weights, congestion control, head-of-line blocking and message sizes.
//!
//! A link whose width or speed is unknown does not constrain (it is counted in
//! [`LoadReport::unknown_capacity_links`]); a flow crossing only such links has no rate.
//!
//! Ring all-reduce: NCCL's bus bandwidth for a ring all-reduce is algbw x 2(n-1)/n, and each
//! rank moves 2(n-1)/n of the buffer over its ring hop, so busbw equals the rate of the ring
//! hop that finishes last: the slowest flow of the ring pattern
//! ([`LoadReport::ring_allreduce_busbw_gbps`]).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use ibscope_mad::attr::link::Speed;
use serde::{Deserialize, Serialize};

use super::index::{Index, NONE};
use super::path::ChannelRef;
use super::trace::{trace_with_index, TraceError};
use crate::model::refs::{route_port, PortRef};
use crate::model::{End, Fabric};

/// Which flows a pattern makes from an ordered host list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pattern {
    /// Host i sends to host i+1 (mod n): one direction, as an NCCL ring.
    Ring,
    /// 0 -> 1, 2 -> 3, ...; an odd last host sends nothing.
    Pairs,
    /// Every ordered pair of distinct hosts.
    AllToAll,
}

impl std::str::FromStr for Pattern {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ring" => Ok(Pattern::Ring),
            "pairs" => Ok(Pattern::Pairs),
            "all-to-all" | "alltoall" | "a2a" => Ok(Pattern::AllToAll),
            _ => Err(format!("unknown pattern {s:?} (ring, pairs, all-to-all)")),
        }
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Pattern::Ring => "ring",
            Pattern::Pairs => "pairs",
            Pattern::AllToAll => "all-to-all",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadOptions {
    /// Refuse patterns with more flows than this (all-to-all grows as n^2).
    pub max_flows: usize,
    /// Per-flow results are listed only up to this many flows.
    pub flow_details_limit: usize,
    /// Length of [`LoadReport::hottest_links`].
    pub top_links: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            max_flows: 4_000_000,
            flow_details_limit: 10_000,
            top_links: 20,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    #[error("pattern needs at least 2 hosts, got {0}")]
    TooFewHosts(usize),
    #[error("pattern makes {flows} flows, more than the limit of {max}")]
    TooManyFlows { flows: usize, max: usize },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowResult {
    #[serde(with = "route_port")]
    pub src: PortRef,
    #[serde(with = "route_port")]
    pub dst: PortRef,
    pub dst_lid: u16,
    pub link_hops: usize,
    /// Max-min fair rate; `None` when unroutable or crossing only links of unknown capacity.
    pub rate_gbps: Option<f64>,
    /// The saturated link that fixed the rate.
    pub bottleneck: Option<ChannelRef>,
    pub error: Option<TraceError>,
}

/// One directed link carrying flows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkLoad {
    pub channel: ChannelRef,
    pub flows: u32,
    pub capacity_gbps: Option<f64>,
    /// Capacity divided equally among the link's flows (the naive estimate).
    pub equal_share_gbps: Option<f64>,
    /// Sum of the max-min rates of its flows.
    pub used_gbps: f64,
    /// Some flow's rate is fixed by this link.
    pub saturated: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    pub pattern: Pattern,
    pub hosts: usize,
    pub flows_total: usize,
    pub flows_routed: usize,
    pub flows_unroutable: usize,
    pub links_used: usize,
    pub max_flows_per_link: u32,
    pub unknown_capacity_links: usize,
    /// Most flows first, then lowest equal share.
    pub hottest_links: Vec<LinkLoad>,
    pub min_flow_gbps: Option<f64>,
    pub max_flow_gbps: Option<f64>,
    pub mean_flow_gbps: Option<f64>,
    /// Ring pattern only, all flows routed: the slowest ring hop's rate.
    pub ring_allreduce_busbw_gbps: Option<f64>,
    /// Every flow, in pattern order, when there are at most `flow_details_limit`.
    pub flows: Vec<FlowResult>,
    pub flows_omitted: bool,
    /// Unroutable flows (at most 50), listed even when `flows` is omitted.
    pub unroutable: Vec<FlowResult>,
    pub model: String,
}

/// The hosts a pattern runs over when none are named: every port of a host channel
/// adapter that has a LID, in LID order. Switches, routers and SHARP aggregation nodes
/// (a switch's in-network reduction engine, which shows up as a CA) run no ranks.
pub fn default_hosts(fabric: &Fabric) -> Vec<End> {
    let mut v: Vec<(u16, End)> = fabric
        .nodes()
        .filter(|(_, n)| n.kind.is_host_ca())
        .flat_map(|(id, n)| {
            n.ports.iter().filter(|p| p.lid != 0).map(move |p| {
                (
                    p.lid,
                    End {
                        node: id,
                        port: p.number,
                    },
                )
            })
        })
        .collect();
    v.sort();
    v.into_iter().map(|(_, e)| e).collect()
}

/// [`load_with`] and default options.
pub fn load(fabric: &Fabric, pattern: Pattern, hosts: &[End]) -> Result<LoadReport, LoadError> {
    load_with(fabric, pattern, hosts, &LoadOptions::default())
}

/// Route every flow of `pattern` over `hosts` (CA ports, in order) and share link capacity
/// max-min fairly among them. A host port without a LID, or unlinked, gives unroutable flows.
pub fn load_with(
    fabric: &Fabric,
    pattern: Pattern,
    hosts: &[End],
    opts: &LoadOptions,
) -> Result<LoadReport, LoadError> {
    let plan = PatternFlows {
        pattern,
        hosts,
        pairs: flows(pattern, hosts.len(), opts)?,
    };
    let idx = Index::new(fabric);
    let (routes, links) = place(fabric, &idx, hosts, &plan.pairs);
    Ok(report(fabric, &idx, &plan, &routes, &links, opts))
}

/// Route the flows `pairs` (indexes into `ends`) on the fabric's forwarding tables and
/// share link capacity among them max-min fairly: what a pattern and a collective are
/// both built on.
pub(super) fn place(
    fabric: &Fabric,
    idx: &Index,
    ends: &[End],
    pairs: &[(usize, usize)],
) -> (Routes, Links) {
    let routes = Routes::new(fabric, idx, ends, pairs);
    let capacity = capacities(fabric, idx);
    let on_links = FlowsPerLink::new(&routes, idx.channels());
    let shares = fill(&routes, &on_links, &capacity);
    (
        routes,
        Links {
            capacity,
            count: on_links.count,
            shares,
        },
    )
}

/// A pattern on a host list: its flows as (source, destination) host indexes.
struct PatternFlows<'a> {
    pattern: Pattern,
    hosts: &'a [End],
    pairs: Vec<(usize, usize)>,
}

/// The (source, destination) host indexes of a pattern's flows.
fn flows(pattern: Pattern, n: usize, opts: &LoadOptions) -> Result<Vec<(usize, usize)>, LoadError> {
    if n < 2 {
        return Err(LoadError::TooFewHosts(n));
    }
    let total = match pattern {
        Pattern::Ring => n,
        Pattern::Pairs => n / 2,
        Pattern::AllToAll => n * (n - 1),
    };
    if total > opts.max_flows {
        return Err(LoadError::TooManyFlows {
            flows: total,
            max: opts.max_flows,
        });
    }
    Ok(match pattern {
        Pattern::Ring => (0..n).map(|i| (i, (i + 1) % n)).collect(),
        Pattern::Pairs => (0..n / 2).map(|i| (2 * i, 2 * i + 1)).collect(),
        Pattern::AllToAll => (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .collect(),
    })
}

/// Every flow routed: its channels in one flat array, or why it has none.
pub(super) struct Routes {
    path_start: Vec<u32>,
    path_chans: Vec<u32>,
    pub errors: Vec<Option<TraceError>>,
    lids: Vec<u16>,
}

impl Routes {
    fn new(fabric: &Fabric, idx: &Index, hosts: &[End], pairs: &[(usize, usize)]) -> Routes {
        let lid_of = |e: End| {
            fabric
                .node(e.node)
                .port(e.port)
                .map(|p| p.lid)
                .filter(|&l| l != 0)
        };
        let mut r = Routes {
            path_start: Vec::with_capacity(pairs.len() + 1),
            path_chans: Vec::new(),
            errors: vec![None; pairs.len()],
            lids: vec![0; pairs.len()],
        };
        let mut scratch = Vec::new();
        for (f, &(i, j)) in pairs.iter().enumerate() {
            r.path_start.push(r.path_chans.len() as u32);
            let Some(lid) = lid_of(hosts[j]) else {
                r.errors[f] = Some(TraceError::NoLid {
                    at: PortRef::at(fabric, hosts[j]),
                });
                continue;
            };
            r.lids[f] = lid;
            let owner = fabric.port_by_lid(lid).and_then(|e| idx.channel(e));
            scratch.clear();
            if idx.walk(hosts[i], lid, owner, &mut scratch) {
                r.path_chans.extend_from_slice(&scratch);
            } else {
                let t = trace_with_index(fabric, idx, hosts[i], lid);
                r.errors[f] = Some(t.error.unwrap_or(TraceError::TooManyHops));
            }
        }
        r.path_start.push(r.path_chans.len() as u32);
        r
    }

    fn flows(&self) -> usize {
        self.errors.len()
    }

    /// Flow `f`'s channels, source first.
    pub fn path(&self, f: usize) -> &[u32] {
        &self.path_chans[self.path_start[f] as usize..self.path_start[f + 1] as usize]
    }
}

/// Capacity per channel: lanes x lane data rate, the lower of both ends when both known.
fn capacities(fabric: &Fabric, idx: &Index) -> Vec<Option<f64>> {
    (0..idx.channels() as u32)
        .map(|ch| {
            let peer = idx.peer(ch)?;
            let rate = |c: u32| {
                let e = idx.end(c);
                let p = fabric.node(e.node).port(e.port)?;
                Some(f64::from(p.width_active?.lanes()) * Speed::lane_data_gbps(p.speed_active?))
            };
            match (rate(ch), rate(peer)) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        })
        .collect()
}

/// The flows on each channel (compressed rows: `on_chan[start[c]..start[c + 1]]`).
struct FlowsPerLink {
    count: Vec<u32>,
    start: Vec<u32>,
    on_chan: Vec<u32>,
}

impl FlowsPerLink {
    fn new(routes: &Routes, chans: usize) -> FlowsPerLink {
        let mut count = vec![0u32; chans];
        for &c in &routes.path_chans {
            count[c as usize] += 1;
        }
        let mut start = vec![0u32; chans + 1];
        for c in 0..chans {
            start[c + 1] = start[c] + count[c];
        }
        let mut fill = start.clone();
        let mut on_chan = vec![0u32; routes.path_chans.len()];
        for f in 0..routes.flows() {
            for &c in routes.path(f) {
                on_chan[fill[c as usize] as usize] = f as u32;
                fill[c as usize] += 1;
            }
        }
        FlowsPerLink {
            count,
            start,
            on_chan,
        }
    }
}

/// The max-min fair shares: per flow its rate and the link that fixed it ([`NONE`]: no
/// link did), per link whether it saturated.
pub(super) struct Shares {
    pub rate: Vec<Option<f64>>,
    pub bottleneck: Vec<u32>,
    saturated: Vec<bool>,
}

/// Progressive filling with a lazy heap of link saturation levels.
fn fill(routes: &Routes, links: &FlowsPerLink, capacity: &[Option<f64>]) -> Shares {
    let chans = capacity.len();
    let mut active = links.count.clone();
    let mut fixed = vec![0f64; chans];
    let mut version = vec![0u32; chans];
    let mut shares = Shares {
        rate: vec![None; routes.flows()],
        bottleneck: vec![NONE; routes.flows()],
        saturated: vec![false; chans],
    };
    let mut heap = BinaryHeap::new();
    let level = |cap: f64, fixed: f64, active: u32| (cap - fixed).max(0.0) / f64::from(active);
    for c in 0..chans {
        if let (Some(cap), a) = (capacity[c], active[c]) {
            if a > 0 {
                heap.push(Entry(level(cap, 0.0, a), c as u32, 0));
            }
        }
    }
    while let Some(Entry(lvl, c, ver)) = heap.pop() {
        let c = c as usize;
        if ver != version[c] || active[c] == 0 {
            continue;
        }
        shares.saturated[c] = true;
        for k in links.start[c]..links.start[c + 1] {
            let f = links.on_chan[k as usize] as usize;
            if shares.rate[f].is_some() {
                continue;
            }
            shares.rate[f] = Some(lvl);
            shares.bottleneck[f] = c as u32;
            for &m in routes.path(f) {
                let m = m as usize;
                active[m] -= 1;
                if m == c {
                    continue;
                }
                fixed[m] += lvl;
                version[m] += 1;
                if let (Some(cap), true) = (capacity[m], active[m] > 0) {
                    heap.push(Entry(level(cap, fixed[m], active[m]), m as u32, version[m]));
                }
            }
        }
        active[c] = 0;
    }
    shares
}

/// Per channel: capacity, flows crossing it, and the shares the filling gave.
pub(super) struct Links {
    pub capacity: Vec<Option<f64>>,
    pub count: Vec<u32>,
    pub shares: Shares,
}

/// The links carrying most flows, then lowest equal share.
fn hottest_links(
    fabric: &Fabric,
    idx: &Index,
    routes: &Routes,
    links: &Links,
    used_chans: &[usize],
    top: usize,
) -> Vec<LinkLoad> {
    let (capacity, count) = (&links.capacity, &links.count);
    let mut used = vec![0f64; capacity.len()];
    for (f, r) in links.shares.rate.iter().enumerate() {
        if let Some(r) = *r {
            for &c in routes.path(f) {
                used[c as usize] += r;
            }
        }
    }
    let share = |c: usize| capacity[c].map(|cap| cap / f64::from(count[c]));
    let mut hot = used_chans.to_vec();
    hot.sort_by(|&a, &b| {
        count[b].cmp(&count[a]).then(
            share(a)
                .unwrap_or(f64::INFINITY)
                .total_cmp(&share(b).unwrap_or(f64::INFINITY)),
        )
    });
    hot.iter()
        .take(top)
        .map(|&c| LinkLoad {
            channel: channel_ref(fabric, idx, c as u32),
            flows: count[c],
            capacity_gbps: capacity[c],
            equal_share_gbps: share(c),
            used_gbps: used[c],
            saturated: links.shares.saturated[c],
        })
        .collect()
}

pub(super) fn channel_ref(fabric: &Fabric, idx: &Index, c: u32) -> ChannelRef {
    ChannelRef {
        from: PortRef::at(fabric, idx.end(c)),
        to: PortRef::at(fabric, idx.end(idx.peer[c as usize])),
    }
}

fn report(
    fabric: &Fabric,
    idx: &Index,
    plan: &PatternFlows,
    routes: &Routes,
    links: &Links,
    opts: &LoadOptions,
) -> LoadReport {
    let (pattern, hosts, pairs) = (plan.pattern, plan.hosts, &plan.pairs);
    let (rate, bottleneck) = (&links.shares.rate, &links.shares.bottleneck);
    let used_chans: Vec<usize> = (0..links.count.len())
        .filter(|&c| links.count[c] > 0)
        .collect();
    let flow_result = |f: usize| {
        let (i, j) = pairs[f];
        FlowResult {
            src: PortRef::at(fabric, hosts[i]),
            dst: PortRef::at(fabric, hosts[j]),
            dst_lid: routes.lids[f],
            link_hops: routes.path(f).len(),
            rate_gbps: rate[f],
            bottleneck: (bottleneck[f] != NONE).then(|| channel_ref(fabric, idx, bottleneck[f])),
            error: routes.errors[f].clone(),
        }
    };
    let flows_omitted = pairs.len() > opts.flow_details_limit;
    let flows = if flows_omitted {
        Vec::new()
    } else {
        (0..pairs.len()).map(flow_result).collect()
    };
    let unroutable: Vec<FlowResult> = (0..pairs.len())
        .filter(|&f| routes.errors[f].is_some())
        .take(50)
        .map(flow_result)
        .collect();
    let flows_unroutable = routes.errors.iter().filter(|e| e.is_some()).count();
    let rates: Vec<f64> = rate.iter().flatten().copied().collect();
    let min_flow_gbps = rates.iter().copied().reduce(f64::min);
    let ring_allreduce_busbw_gbps =
        if pattern == Pattern::Ring && flows_unroutable == 0 && rates.len() == pairs.len() {
            min_flow_gbps
        } else {
            None
        };
    LoadReport {
        pattern,
        hosts: hosts.len(),
        flows_total: pairs.len(),
        flows_routed: pairs.len() - flows_unroutable,
        flows_unroutable,
        links_used: used_chans.len(),
        max_flows_per_link: used_chans
            .iter()
            .map(|&c| links.count[c])
            .max()
            .unwrap_or(0),
        unknown_capacity_links: used_chans
            .iter()
            .filter(|&&c| links.capacity[c].is_none())
            .count(),
        hottest_links: hottest_links(fabric, idx, routes, links, &used_chans, opts.top_links),
        min_flow_gbps,
        max_flow_gbps: rates.iter().copied().reduce(f64::max),
        mean_flow_gbps: (!rates.is_empty()).then(|| rates.iter().sum::<f64>() / rates.len() as f64),
        ring_allreduce_busbw_gbps,
        flows,
        flows_omitted,
        unroutable,
        model: "max-min fair share (progressive filling) of width x lane data rate per \
                directed link; single VL, no congestion control"
            .into(),
    }
}

/// Heap entry: (saturation level, channel, version), smallest level first.
struct Entry(f64, u32, u32);

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.total_cmp(&self.0).then(other.1.cmp(&self.1))
    }
}
