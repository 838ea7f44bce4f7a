//! A job's collectives on the routes the SM programmed: NCCL-style rail-local rings, a
//! tree and all-to-all over a job's servers, each server's HCAs one rank each (one GPU per
//! rail), and the bus bandwidth each would get, as nccl-tests reports it.
//!
//! Flows: every rail carries its own share of every collective (NCCL gives each rail its
//! channels), and all rails run at once:
//! - ring: on each rail, server i's HCA sends to server i+1's (in job order, wrapping);
//! - tree: on each rail, two balanced binary trees over the servers in job order, the
//!   second over the order shifted by one (after NCCL's double binary tree), each edge
//!   carrying data up (reduce) and down (broadcast);
//! - all-to-all: on each rail, every server's HCA sends to every other server's.
//!
//! They are placed together on the forwarding tables and share link capacity max-min
//! fairly ([`super::load`]). Every flow of a collective moves the same number of bytes,
//! so the slowest flow finishes last: its rate, fixed by the link that saturated first on
//! its path (the collective's limit), sets the bandwidth term.
//!
//! Latency-bandwidth (alpha-beta) model, for a message of S bytes per rank and N ranks
//! (servers x rails):
//!
//! ```text
//! T(S) = steps x alpha + c x S / B
//! alpha = per-message software latency + max hops x per-hop latency
//! B     = the slowest flow's rate (bytes/s)
//! algbw = S / T(S);  busbw = algbw x factor          (nccl-tests' definitions)
//! ```
//!
//! | collective | bytes per flow (c x S) | steps | busbw factor |
//! |---|---|---|---|
//! | all_reduce, ring | 2(N-1)/N x S / rails | 2(N-1) | 2(N-1)/N |
//! | all_reduce, tree | S / (2 x rails) | 2 x tree depth | 2(N-1)/N |
//! | alltoall | S / servers | servers - 1 | (N-1)/N |
//!
//! With every flow at line rate L the ring's busbw is rails x L: the fabric allows the
//! job its full NIC bandwidth. Not modelled: NVLink inside a server, protocol choice
//! (LL/LL128/Simple), SHARP, congestion control, adaptive routing.

use serde::{Deserialize, Serialize};

use super::index::{Index, NONE};
use super::load::{channel_ref, place, Links, Routes};
use super::path::ChannelRef;
use crate::model::{End, Fabric};

/// The collectives a job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Collective {
    Ring,
    Tree,
    AllToAll,
}

impl Collective {
    pub const ALL: [Collective; 3] = [Collective::Ring, Collective::Tree, Collective::AllToAll];
    /// The name of the command line and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Collective::Ring => "ring",
            Collective::Tree => "tree",
            Collective::AllToAll => "all-to-all",
        }
    }
    /// As nccl-tests names the operation (its binary without `_perf`).
    pub fn nccl_op(self) -> &'static str {
        match self {
            Collective::Ring | Collective::Tree => "all_reduce",
            Collective::AllToAll => "alltoall",
        }
    }
    /// nccl-tests' redop column.
    fn redop(self) -> &'static str {
        match self {
            Collective::Ring | Collective::Tree => "sum",
            Collective::AllToAll => "none",
        }
    }
}

impl std::str::FromStr for Collective {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ring" => Ok(Collective::Ring),
            "tree" => Ok(Collective::Tree),
            "all-to-all" | "alltoall" | "a2a" => Ok(Collective::AllToAll),
            _ => Err(format!("unknown collective {s:?} (ring, tree, all-to-all)")),
        }
    }
}

impl std::fmt::Display for Collective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One server of a job: its name and its HCA port on each rail it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobHost {
    pub name: String,
    pub hcas: Vec<(u8, End)>,
}

impl JobHost {
    fn on(&self, rail: u8) -> Option<End> {
        self.hcas.iter().find(|(r, _)| *r == rail).map(|(_, e)| *e)
    }
}

/// The model's constants and the curve's sizes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelOptions {
    /// Latency of one link hop (switch traversal and cable), microseconds.
    pub hop_latency_us: f64,
    /// Software and NIC latency of one message step, microseconds.
    pub step_latency_us: f64,
    /// Curve sizes: from `min_bytes`, doubling, up to `max_bytes` (nccl-tests' -b, -e,
    /// -f 2).
    pub min_bytes: u64,
    pub max_bytes: u64,
    /// Bytes per element, for the count column (4: float).
    pub element_bytes: u64,
    /// Refuse a collective with more flows than this.
    pub max_flows: usize,
}

impl Default for ModelOptions {
    fn default() -> Self {
        ModelOptions {
            hop_latency_us: 0.15,
            step_latency_us: 1.0,
            min_bytes: 8,
            max_bytes: 16 << 30,
            element_bytes: 4,
            max_flows: 4_000_000,
        }
    }
}

/// One row of the predicted curve, in nccl-tests' columns and units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// Bytes per rank.
    pub size: u64,
    /// Elements (`size / element size`).
    pub count: u64,
    #[serde(rename = "type")]
    pub dtype: String,
    pub redop: String,
    pub root: i32,
    pub time_us: f64,
    /// GB/s (10^9 bytes).
    pub algbw: f64,
    pub busbw: f64,
}

/// The link that limits a collective.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    pub channel: ChannelRef,
    pub capacity_gbps: Option<f64>,
    /// Flows of the collective that cross it.
    pub flows: u32,
    /// The rate it leaves the slowest flow, Gb/s.
    pub share_gbps: f64,
    /// It is an HCA's link (a CA at one end).
    pub hca_link: bool,
    /// Its capacity is below the job's usual HCA link rate (the most common among the
    /// collective's source HCAs): a degraded link, not the NIC's own limit.
    pub below_norm: bool,
}

/// What one collective gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CollectiveReport {
    pub collective: Collective,
    /// nccl-tests' operation name.
    pub op: String,
    pub ranks: usize,
    pub flows: usize,
    pub flows_unroutable: usize,
    /// Why flows could not be placed (at most 20).
    pub unroutable: Vec<String>,
    /// Link hops of the longest and the mean flow.
    pub max_hops: usize,
    pub mean_hops: f64,
    pub steps: u64,
    pub alpha_us: f64,
    /// Bytes each flow moves per byte of message.
    pub bytes_per_flow: f64,
    pub busbw_factor: f64,
    /// The slowest flow's rate (the bandwidth term), Gb/s.
    pub slowest_flow_gbps: Option<f64>,
    /// Bus bandwidth for large messages, GB/s: what the fabric allows this collective.
    pub busbw: Option<f64>,
    pub limit: Option<Limit>,
    pub curve: Vec<CurvePoint>,
    /// Why nothing was predicted (too few servers, too many flows, flows unroutable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Every collective of a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JobReport {
    pub hosts: usize,
    pub rails: Vec<u8>,
    pub ranks: usize,
    pub model: ModelText,
    pub collectives: Vec<CollectiveReport>,
}

/// The model as the JSON states it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelText {
    pub description: String,
    pub constants: ModelOptions,
}

/// The model in one paragraph (`route load --help` and the JSON say the same).
pub const MODEL: &str = "alpha-beta: T(S) = steps x alpha + c x S / B; alpha = \
per-message software latency + max link hops x per-hop latency; B = the slowest flow's \
max-min fair share of width x lane data rate on the SM's routes (every rail's flows placed \
at once); algbw = S / T; busbw = algbw x factor. Ring all_reduce: c = 2(N-1)/N / rails, \
2(N-1) steps, factor 2(N-1)/N. Tree all_reduce: c = 1 / (2 rails), 2 x depth steps, factor \
2(N-1)/N. alltoall: c = 1 / servers, servers-1 steps, factor (N-1)/N. N = ranks = servers x \
rails (one GPU per rail). Not modelled: NVLink inside a server, NCCL protocols, SHARP, \
congestion control, adaptive routing.";

/// Predict `which` collectives of a job over `hosts` (in job order) on `rails`.
pub fn collectives(
    fabric: &Fabric,
    hosts: &[JobHost],
    rails: &[u8],
    which: &[Collective],
    opts: &ModelOptions,
) -> JobReport {
    let idx = Index::new(fabric);
    let ranks = hosts.len() * rails.len();
    JobReport {
        hosts: hosts.len(),
        rails: rails.to_vec(),
        ranks,
        model: ModelText {
            description: MODEL.into(),
            constants: opts.clone(),
        },
        collectives: which
            .iter()
            .map(|&c| one(fabric, &idx, hosts, rails, c, opts))
            .collect(),
    }
}

/// The flows of one collective: (source, destination) per flow, `None` where a server
/// lacks the rail's HCA (named in the string).
type Flow = Result<(End, End), String>;

fn flows(hosts: &[JobHost], rails: &[u8], c: Collective) -> (Vec<Flow>, u64) {
    let n = hosts.len();
    let edge = |i: usize, j: usize, rail: u8| -> Flow {
        let end = |h: usize| {
            hosts[h]
                .on(rail)
                .ok_or_else(|| format!("{} has no HCA on rail {rail}", hosts[h].name))
        };
        Ok((end(i)?, end(j)?))
    };
    let mut out = Vec::new();
    let steps = match c {
        Collective::Ring => {
            for &r in rails {
                out.extend((0..n).map(|i| edge(i, (i + 1) % n, r)));
            }
            2 * (n * rails.len()).saturating_sub(1) as u64
        }
        Collective::Tree => {
            let trees = [tree(n, 0), tree(n, 1)];
            for &r in rails {
                for t in &trees {
                    for (child, parent) in t.parent.iter().enumerate() {
                        if let Some(p) = *parent {
                            out.push(edge(child, p, r));
                            out.push(edge(p, child, r));
                        }
                    }
                }
            }
            2 * trees.iter().map(|t| t.depth).max().unwrap_or(0) as u64
        }
        Collective::AllToAll => {
            for &r in rails {
                for i in 0..n {
                    out.extend((0..n).filter(|&j| j != i).map(|j| edge(i, j, r)));
                }
            }
            n.saturating_sub(1) as u64
        }
    };
    (out, steps)
}

/// An in-order binary tree over positions 1..=n, ranks at position p being
/// `(p - 1 + shift) % n`: a position's level is its number of trailing zero bits, so odd
/// positions are the leaves and the root is the largest power of two up to n. With a
/// shift of one, every rank but one that is a leaf in one tree is inner in the other, so
/// no HCA carries two trees' inner traffic (NCCL's double binary tree has this property).
struct Tree {
    /// By rank: its parent's rank.
    parent: Vec<Option<usize>>,
    /// Edges from the root to the deepest leaf.
    depth: usize,
}

fn tree(n: usize, shift: usize) -> Tree {
    let rank = |p: usize| (p - 1 + shift) % n;
    let mut t = Tree {
        parent: vec![None; n],
        depth: 0,
    };
    if n == 0 {
        return t;
    }
    let root_level = usize::BITS - 1 - n.leading_zeros();
    for p in 1..=n {
        // Climb until a real position: a parent past n is skipped for its own parent.
        let mut q = p;
        let parent = loop {
            let bit = q & q.wrapping_neg();
            if bit.trailing_zeros() >= root_level {
                break None;
            }
            // q = (2k + 1) x bit: the parent is the neighbour multiple of 2 x bit that is
            // an odd multiple of it.
            let up = if (q / (2 * bit)) % 2 == 1 {
                q - bit
            } else {
                q + bit
            };
            if up <= n {
                break Some(up);
            }
            q = up;
        };
        t.parent[rank(p)] = parent.map(rank);
        // Depth of p: its level below the root, whatever the skipped positions.
        let level = root_level - p.trailing_zeros().min(root_level);
        t.depth = t.depth.max(level as usize);
    }
    t
}

/// (bytes per flow per message byte, busbw factor) of a collective.
fn coefficients(c: Collective, servers: usize, rails: usize) -> (f64, f64) {
    let ranks = (servers * rails) as f64;
    let all_reduce = 2.0 * (ranks - 1.0) / ranks;
    match c {
        Collective::Ring => (all_reduce / rails as f64, all_reduce),
        Collective::Tree => (1.0 / (2.0 * rails as f64), all_reduce),
        Collective::AllToAll => (1.0 / servers as f64, (ranks - 1.0) / ranks),
    }
}

fn one(
    fabric: &Fabric,
    idx: &Index,
    hosts: &[JobHost],
    rails: &[u8],
    c: Collective,
    opts: &ModelOptions,
) -> CollectiveReport {
    let (bytes_per_flow, busbw_factor) = coefficients(c, hosts.len(), rails.len().max(1));
    let mut report = CollectiveReport {
        collective: c,
        op: c.nccl_op().into(),
        ranks: hosts.len() * rails.len(),
        flows: 0,
        flows_unroutable: 0,
        unroutable: Vec::new(),
        max_hops: 0,
        mean_hops: 0.0,
        steps: 0,
        alpha_us: 0.0,
        bytes_per_flow,
        busbw_factor,
        slowest_flow_gbps: None,
        busbw: None,
        limit: None,
        curve: Vec::new(),
        error: None,
    };
    if hosts.len() < 2 || rails.is_empty() {
        report.error = Some(format!(
            "needs at least 2 servers and a rail, got {} and {}",
            hosts.len(),
            rails.len()
        ));
        return report;
    }
    let (planned, steps) = flows(hosts, rails, c);
    report.flows = planned.len();
    report.steps = steps;
    if planned.len() > opts.max_flows {
        report.error = Some(format!(
            "{} flows, more than the limit of {}",
            planned.len(),
            opts.max_flows
        ));
        return report;
    }
    // The ends as one list, flows as index pairs; flows with a missing HCA stay out.
    let mut ends: Vec<End> = Vec::new();
    let mut pairs = Vec::with_capacity(planned.len());
    for f in &planned {
        match f {
            Ok((a, b)) => {
                pairs.push((ends.len(), ends.len() + 1));
                ends.extend([*a, *b]);
            }
            Err(why) => note_unroutable(&mut report, why.clone()),
        }
    }
    let (routes, links) = place(fabric, idx, &ends, &pairs);
    let mut hops_total = 0usize;
    let mut slowest: Option<(f64, usize)> = None;
    for f in 0..pairs.len() {
        if let Some(e) = &routes.errors[f] {
            note_unroutable(&mut report, e.to_string());
            continue;
        }
        let hops = routes.path(f).len();
        hops_total += hops;
        report.max_hops = report.max_hops.max(hops);
        if let Some(rate) = links.shares.rate[f] {
            if slowest.map_or(true, |(r, _)| rate < r) {
                slowest = Some((rate, f));
            }
        }
    }
    let routed = pairs.len() - routes.errors.iter().filter(|e| e.is_some()).count();
    report.mean_hops = if routed > 0 {
        hops_total as f64 / routed as f64
    } else {
        0.0
    };
    report.alpha_us = opts.step_latency_us + report.max_hops as f64 * opts.hop_latency_us;
    if report.flows_unroutable > 0 {
        report.error = Some(format!(
            "{} of {} flows cannot be placed",
            report.flows_unroutable, report.flows
        ));
        return report;
    }
    let Some((rate, f)) = slowest else {
        report.error = Some("no link on the routes has a known rate".into());
        return report;
    };
    report.slowest_flow_gbps = Some(rate);
    let bytes_per_s = rate * 1e9 / 8.0;
    report.busbw = Some(busbw_factor * bytes_per_s / bytes_per_flow / 1e9);
    let b = links.shares.bottleneck[f];
    if b != NONE {
        report.limit = Some(limit(fabric, idx, &routes, &links, pairs.len(), b, rate));
    }
    report.curve = curve(c, &report, bytes_per_s, opts);
    report
}

/// A flow that cannot be placed: counted, and its reason kept (at most 20 distinct ones).
fn note_unroutable(report: &mut CollectiveReport, why: String) {
    report.flows_unroutable += 1;
    if report.unroutable.len() < 20 && !report.unroutable.contains(&why) {
        report.unroutable.push(why);
    }
}

/// The link `b` that limits the slowest flow (at `rate`), and whether it is an HCA's link
/// below the job's usual HCA link rate (the most common capacity of the flows' first
/// links).
fn limit(
    fabric: &Fabric,
    idx: &Index,
    routes: &Routes,
    links: &Links,
    flows: usize,
    b: u32,
    rate: f64,
) -> Limit {
    let channel = channel_ref(fabric, idx, b);
    let capacity = links.capacity[b as usize];
    let mut first: Vec<u64> = (0..flows)
        .filter_map(|f| links.capacity[*routes.path(f).first()? as usize])
        .map(|c| (c * 1000.0) as u64)
        .collect();
    first.sort_unstable();
    let usual = first
        .chunk_by(|a, b| a == b)
        .max_by_key(|run| run.len())
        .map(|run| run[0] as f64 / 1000.0);
    let is_ca = |p: &crate::model::refs::PortRef| p.node.kind != crate::NodeKind::Switch;
    Limit {
        hca_link: is_ca(&channel.from) || is_ca(&channel.to),
        below_norm: matches!((capacity, usual), (Some(c), Some(u)) if c < u - 1e-9),
        channel,
        capacity_gbps: capacity,
        flows: links.count[b as usize],
        share_gbps: rate,
    }
}

/// The predicted nccl-tests rows from `min_bytes` to `max_bytes`, doubling.
fn curve(
    c: Collective,
    r: &CollectiveReport,
    bytes_per_s: f64,
    opts: &ModelOptions,
) -> Vec<CurvePoint> {
    let mut out = Vec::new();
    let mut size = opts.min_bytes.max(1);
    while size <= opts.max_bytes {
        let seconds =
            r.steps as f64 * r.alpha_us * 1e-6 + r.bytes_per_flow * size as f64 / bytes_per_s;
        let algbw = size as f64 / seconds / 1e9;
        out.push(CurvePoint {
            size,
            count: size / opts.element_bytes.max(1),
            dtype: "float".into(),
            redop: c.redop().into(),
            root: -1,
            time_us: seconds * 1e6,
            algbw,
            busbw: algbw * r.busbw_factor,
        });
        size = match size.checked_mul(2) {
            Some(s) => s,
            None => break,
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trees_are_balanced_and_shifted() {
        let a = tree(7, 0);
        // Positions 1..7 hold ranks 0..6: root 4 (rank 3), inner 2 and 6 (ranks 1, 5),
        // leaves at odd positions.
        assert_eq!(
            a.parent,
            [Some(1), Some(3), Some(1), None, Some(5), Some(3), Some(5)]
        );
        assert_eq!(a.depth, 2);
        // 6 positions: 5's parent would be 6, which holds rank 5; 6 hangs off the root 4.
        let six = tree(6, 0);
        assert_eq!(
            six.parent,
            [Some(1), Some(3), Some(1), None, Some(5), Some(3)]
        );
        // 5 positions: 5's parent 6 is past the end: it hangs off 4.
        assert_eq!(tree(5, 0).parent[4], Some(3));
        for n in 2..40 {
            let (a, b) = (tree(n, 0), tree(n, 1));
            for t in [&a, &b] {
                assert_eq!(t.parent.iter().filter(|p| p.is_none()).count(), 1, "{n}");
                let children = |r: usize| t.parent.iter().filter(|&&p| p == Some(r)).count();
                assert!((0..n).all(|r| children(r) <= 2), "{n}");
                assert!(t.depth <= (usize::BITS - n.leading_zeros()) as usize, "{n}");
            }
            // Inner in both trees: no rank (so no HCA carries more than 4 flows a way).
            let inner = |t: &Tree, r: usize| t.parent.contains(&Some(r));
            let both = (0..n).filter(|&r| inner(&a, r) && inner(&b, r)).count();
            assert_eq!(both, 0, "{n}");
        }
        assert_eq!(tree(1, 0).parent, [None]);
    }

    #[test]
    fn coefficients_give_line_rate_busbw() {
        // 16 servers x 8 rails at L: the ring's busbw is 8 L; the tree's close to it;
        // all-to-all's about one NIC's L.
        let (c, f) = coefficients(Collective::Ring, 16, 8);
        assert!((f / c - 8.0).abs() < 1e-9);
        let (c, f) = coefficients(Collective::Tree, 16, 8);
        // Each tree flow at L/4 (an inner server's HCA carries 4 flows each way).
        assert!((f * 0.25 / c - 8.0 * 127.0 / 128.0).abs() < 1e-9);
        let (c, f) = coefficients(Collective::AllToAll, 16, 8);
        // Each all-to-all flow at L/15.
        assert!((f / 15.0 / c - 16.0 / 15.0 * 127.0 / 128.0).abs() < 1e-9);
    }

    /// A rail fabric brought up at 4xHDR with min-hop routes; `slow` runs one HCA's link
    /// at 1xHDR. Its job: every server, every rail.
    fn rail_job(servers: usize, rails: u8, slow: Option<&str>) -> (Fabric, Vec<JobHost>) {
        use crate::gen::{self, Degraded, RailsSpec};
        let mut spec = RailsSpec {
            hosts_per_leaf: 4,
            ..RailsSpec::new(servers, rails, 64)
        };
        if let Some(node) = slow {
            spec.options.degraded.push(Degraded {
                node: node.into(),
                port: 1,
                rate: "1xHDR".into(),
            });
        }
        let mut f = crate::ibnd::parse(&gen::rails(&spec).unwrap()).unwrap();
        gen::bring_up(
            &mut f,
            ibscope_mad::attr::link::Rate::parse("4xHDR").unwrap(),
        );
        if let Some(node) = slow {
            // bring_up ran every port at 4xHDR: narrow the planted link's two ends again.
            let (h, r) = (&node[1..5], &node[6..]);
            let name = format!("gpu-{h} mlx5_{r}");
            let hca = f.nodes_by_description(&name)[0];
            let end = End { node: hca, port: 1 };
            let peer = f.peer(end).unwrap();
            for e in [end, peer] {
                let p = f.node_mut(e.node).port_mut(e.port).unwrap();
                p.width_active = Some(ibscope_mad::attr::link::Width::X1);
            }
        }
        super::super::compute_minhop_lfts(&mut f);
        let hosts = crate::hosts::Hosts::group(&f, None);
        let job = hosts
            .hosts()
            .iter()
            .map(|h| JobHost {
                name: h.name.clone(),
                hcas: h.hcas.iter().map(|c| (c.rail.unwrap(), c.end())).collect(),
            })
            .collect();
        (f, job)
    }

    #[test]
    fn a_healthy_rail_fabric_gives_line_rate() {
        let (f, job) = rail_job(8, 4, None);
        let r = collectives(
            &f,
            &job,
            &[0, 1, 2, 3],
            &Collective::ALL,
            &ModelOptions::default(),
        );
        assert_eq!(r.ranks, 32);
        let ring = &r.collectives[0];
        assert_eq!((ring.flows, ring.flows_unroutable), (32, 0));
        // 4 rails x 4xHDR (200 Gb/s = 25 GB/s).
        assert_eq!(ring.slowest_flow_gbps, Some(200.0));
        assert!((ring.busbw.unwrap() - 100.0).abs() < 1e-9);
        // Leaf, spine, leaf: 4 links between groups.
        assert_eq!(ring.max_hops, 4);
        let limit = ring.limit.as_ref().unwrap();
        assert!(limit.hca_link && !limit.below_norm, "{limit:?}");
        assert_eq!(ring.curve.len(), 32);
        assert_eq!(ring.curve[0].size, 8);
        assert_eq!(ring.curve[31].size, 16 << 30);
        assert_eq!(ring.curve[31].count, 4 << 30);
        // The largest message comes within 1% of the limit; the smallest is latency.
        assert!(ring.curve[31].busbw > 99.0 && ring.curve[31].busbw < 100.0);
        let alpha = ring.steps as f64 * ring.alpha_us;
        assert!((ring.curve[0].time_us - alpha).abs() / alpha < 1e-3);
        let tree = &r.collectives[1];
        assert!(tree.busbw.unwrap() > 90.0, "{:?}", tree.busbw);
        // All-to-all: at best one NIC's rate (7 flows share each HCA link); here the
        // min-hop tables send a leaf's traffic to the other group's servers of a rail
        // through fewer uplinks than it has, and an uplink is the limit.
        let a2a = &r.collectives[2];
        assert_eq!(a2a.flows, 8 * 7 * 4);
        let best = 25.0 * 8.0 / 7.0 * 31.0 / 32.0;
        assert!(a2a.busbw.unwrap() <= best + 1e-9, "{:?}", a2a.busbw);
        let limit = &a2a.limit.as_ref().unwrap().channel;
        if a2a.busbw.unwrap() < best - 1e-9 {
            assert!(limit.from.node.kind == crate::NodeKind::Switch);
            assert!(limit.to.node.kind == crate::NodeKind::Switch);
        }
    }

    #[test]
    fn a_slow_hca_link_limits_every_collective() {
        let (f, job) = rail_job(8, 4, Some("G0003R2"));
        let r = collectives(
            &f,
            &job,
            &[0, 1, 2, 3],
            &Collective::ALL,
            &ModelOptions::default(),
        );
        for c in &r.collectives {
            let limit = c.limit.as_ref().expect("a limit");
            let ends = [&limit.channel.from.node.name, &limit.channel.to.node.name];
            assert!(
                ends.iter().any(|e| &***e == "gpu-0003 mlx5_2"),
                "{}: {}",
                c.collective,
                limit.channel
            );
            assert_eq!(limit.capacity_gbps, Some(50.0));
            assert!(limit.hca_link && limit.below_norm);
        }
        // The ring: every rail waits for rail 2's 50 Gb/s: 4 x 6.25 GB/s.
        assert!((r.collectives[0].busbw.unwrap() - 25.0).abs() < 1e-9);
    }

    #[test]
    fn a_missing_hca_leaves_its_rail_without_a_prediction() {
        let (f, mut job) = rail_job(8, 4, None);
        job[5].hcas.retain(|(r, _)| *r != 1);
        let r = collectives(
            &f,
            &job,
            &[0, 1, 2, 3],
            &[Collective::Ring],
            &ModelOptions::default(),
        );
        let ring = &r.collectives[0];
        assert_eq!(ring.flows_unroutable, 2);
        assert_eq!(ring.unroutable, ["gpu-0006 has no HCA on rail 1"]);
        assert_eq!(ring.busbw, None);
        assert!(ring.error.as_deref().unwrap().contains("2 of 32 flows"));
    }

    #[test]
    fn collective_names() {
        for c in Collective::ALL {
            assert_eq!(c.as_str().parse::<Collective>(), Ok(c));
        }
        assert!("mesh".parse::<Collective>().is_err());
        assert_eq!(Collective::AllToAll.nccl_op(), "alltoall");
    }
}
