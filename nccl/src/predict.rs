//! Measured against possible: each size of an nccl-tests run beside what the fabric's routes
//! allow the same servers, and a verdict per size range.
//!
//! The fabric's part is [`ibscope_topo::routing::collectives`]: the bus bandwidth `C` the
//! SM's routes leave a job's large messages (ring all_reduce for the ring-shaped
//! collectives, all-to-all for alltoall), with the link that caps it. Without a fabric, `C`
//! is what the HCAs' line rate allows a healthy run ([`crate::rate`]). The latency is the
//! run's own (`L`): its time at the smallest size measured, less the time that size's bytes
//! take at the run's best busbw (a run that starts at megabytes has a bandwidth part there).
//! For `S` bytes per rank and nccl-tests' busbw factor `f` of the run (busbw over algbw as
//! it printed them, else the collective's over its ranks):
//!
//! ```text
//! predicted busbw(S) = f S / (L + f S / C)
//! ```
//!
//! Verdicts, per size:
//! - `latency-bound`: the measured time is at most twice `L`, or moving `f S` bytes at `C`
//!   (without a fabric: at the run's best busbw) takes under a quarter of `L`, so no
//!   bandwidth explains the time (small sizes whose times jump): starting the collective
//!   costs more than moving the bytes, no bandwidth is at stake;
//! - `at-fabric-limit`: measured busbw at least 80% of the prediction: more needs a faster
//!   path (the limiting link is named);
//! - `below-fabric-limit`: under 80% (under 50%: far below): the fabric allows more, look at
//!   the hosts (GPUDirect RDMA, PCIe, GPU-NIC affinity; the NCCL log's findings when given);
//! - `no-prediction`: no fabric and no HCA rate, or the collective is not modelled
//!   (gather, scatter, sendrecv, hypercube; alltoall without a fabric): the measured curve
//!   alone.

use serde::Serialize;

use ibscope_topo::findings::Finding;
use ibscope_topo::hosts::Hosts;
use ibscope_topo::routing::{self, Collective, Limit, ModelOptions};
use ibscope_topo::Fabric;

use crate::perf::PerfRun;

/// At or above this share of the prediction a size is at the fabric's limit.
pub const AT_LIMIT: f64 = 0.8;
/// Below this share it is far below.
pub const FAR_BELOW: f64 = 0.5;

/// What one step of a ring costs a bandwidth-bound size between servers, microseconds:
/// NCCL's Simple protocol starts slower than the small-message latency a run measures. From
/// healthy published runs (tests/data/nccl/real): 2 DGX A100 over 8 x HDR each, all_reduce
/// on 16 ranks (30 ring steps), whose time less its bytes at line rate is about 247 us from
/// 8 MB up (8.2 us a step); checked on 4 DGX A100 (32 ranks, 62 steps), which the
/// prediction then follows within 20% at every size from 8 MB.
pub const STEP_US: f64 = 8.2;

/// The ring steps of the run's collective: 2(N-1) for all_reduce, N-1 for the others,
/// with N its ranks (those it lists, else what its busbw factor says).
fn steps(run: &PerfRun, factor: Option<f64>) -> f64 {
    let op = run.op.as_deref().unwrap_or("");
    let from_factor = factor.and_then(|f| match op {
        "all_reduce" if f < 2.0 => Some(2.0 / (2.0 - f)),
        "all_gather" | "reduce_scatter" | "alltoall" if f < 1.0 => Some(1.0 / (1.0 - f)),
        _ => None,
    });
    let n = match run.ranks.len() {
        0 => from_factor.unwrap_or(1.0),
        n => n as f64,
    }
    .round()
    .max(1.0);
    match op {
        "all_reduce" => 2.0 * (n - 1.0),
        _ => n - 1.0,
    }
}

/// The run's own latency: its time at the smallest size, less what moving that size's
/// bytes takes at its best busbw.
fn run_latency(run: &PerfRun, factor: Option<f64>, best: Option<f64>) -> Option<f64> {
    let (size, time) = run
        .rows
        .iter()
        .filter_map(|r| Some((r.size, r.best()?.time_us)))
        .filter(|(_, t)| *t > 0.0)
        .min_by_key(|(s, _)| *s)?;
    let moving = match (factor, best) {
        (Some(f), Some(b)) => f * size as f64 / (b * 1e9) * 1e6,
        _ => 0.0,
    };
    Some((time - moving).max(0.0))
}

/// Which of the routes model's collectives bounds `op`.
fn modelled_by(op: &str) -> Option<Collective> {
    match op {
        "all_reduce" | "all_gather" | "reduce_scatter" | "broadcast" | "reduce" => {
            Some(Collective::Ring)
        }
        "alltoall" => Some(Collective::AllToAll),
        _ => None,
    }
}

/// What a prediction stands on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Basis {
    /// The fabric's routes (`route load`'s model).
    Routes,
    /// The HCA rate given (`--rate`, `--nics`).
    Rate,
    /// The servers' `ibscope host --json` documents.
    HostDocuments,
}

/// The HCAs a line-rate prediction counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineRate {
    /// HCAs per server, and the slowest server's sum of their rates (Gb/s).
    pub hcas_per_server: usize,
    pub server_gbps: f64,
    /// That server, where the rates are per server.
    pub slowest_server: Option<String>,
    /// The share of line rate a healthy run reaches ([`crate::rate::EFFICIENCY`]).
    pub efficiency: f64,
}

/// What the fabric (or, without one, the HCAs' rate) allows a job.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    pub basis: Basis,
    /// The routes model's collective it comes from.
    pub collective: Collective,
    pub servers: Vec<String>,
    pub rails: Vec<u8>,
    /// Large-message bus bandwidth the routes allow, GB/s.
    pub busbw: f64,
    /// The link that caps it.
    pub limit: Option<Limit>,
    /// Without a fabric: the HCAs it counts.
    pub line_rate: Option<LineRate>,
}

impl Prediction {
    /// What it is, in words: `the routes allow` / `the HCAs' rate allows`.
    pub fn allows(&self) -> &'static str {
        match self.basis {
            Basis::Routes => "the routes allow",
            Basis::Rate | Basis::HostDocuments => "the HCAs' rate allows",
        }
    }
}

/// Without a fabric: what `servers`' HCAs allow `op`, each server given as (name, HCAs,
/// their Gb/s added up).
pub fn predict_line(
    op: &str,
    basis: Basis,
    servers: &[(String, usize, f64)],
) -> Result<Prediction, String> {
    match modelled_by(op) {
        Some(Collective::Ring) => {}
        Some(_) => {
            return Err(format!(
                "{op} is bounded by its all-to-all pattern across the fabric: give a fabric \
                 (live, or --topology) to predict it"
            ))
        }
        None => {
            return Err(format!(
            "{op} is not modelled (all_reduce, all_gather, reduce_scatter, broadcast, reduce are)"
        ))
        }
    }
    let (name, hcas, gbps) = servers
        .iter()
        .min_by(|a, b| a.2.total_cmp(&b.2))
        .ok_or("no server's HCAs are known")?;
    if *gbps <= 0.0 {
        return Err(format!("{name}'s HCAs have no known rate"));
    }
    Ok(Prediction {
        basis,
        collective: Collective::Ring,
        servers: servers.iter().map(|s| s.0.clone()).collect(),
        rails: Vec::new(),
        busbw: gbps / 8.0 * crate::rate::EFFICIENCY,
        limit: None,
        line_rate: Some(LineRate {
            hcas_per_server: *hcas,
            server_gbps: *gbps,
            slowest_server: (!name.is_empty()).then(|| name.clone()),
            efficiency: crate::rate::EFFICIENCY,
        }),
    })
}

/// The fabric's prediction for `op` over `servers` (in the fabric's host names).
pub fn predict(
    fabric: &Fabric,
    hosts: &Hosts,
    servers: &[String],
    op: &str,
) -> Result<Prediction, String> {
    let collective = modelled_by(op).ok_or_else(|| {
        format!("{op} is not modelled on the routes (all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall are)")
    })?;
    let job = routing::job_servers(hosts, servers).map_err(|e| e.to_string())?;
    let opts = ModelOptions {
        max_bytes: 0,
        ..ModelOptions::default()
    };
    let report = routing::collectives(fabric, &job.hosts, &job.rails, &[collective], &opts);
    let c = report
        .collectives
        .into_iter()
        .next()
        .ok_or("no collective predicted")?;
    if let Some(e) = c.error {
        return Err(e);
    }
    Ok(Prediction {
        basis: Basis::Routes,
        collective,
        servers: job.hosts.iter().map(|h| h.name.clone()).collect(),
        rails: job.rails,
        busbw: c.busbw.ok_or("no link on the routes has a known rate")?,
        limit: c.limit,
        line_rate: None,
    })
}

/// A size's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    LatencyBound,
    AtFabricLimit,
    BelowFabricLimit,
    NoPrediction,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::LatencyBound => "latency-bound",
            Verdict::AtFabricLimit => "at-fabric-limit",
            Verdict::BelowFabricLimit => "below-fabric-limit",
            Verdict::NoPrediction => "no-prediction",
        }
    }
}

/// One size judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judged {
    pub size: u64,
    pub time_us: f64,
    pub busbw: f64,
    pub predicted_busbw: Option<f64>,
    /// Measured over predicted.
    pub ratio: Option<f64>,
    pub verdict: Verdict,
    /// Values nccl-tests found wrong at this size.
    pub wrong: u64,
}

/// Consecutive sizes of one verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Range {
    pub from: u64,
    pub to: u64,
    pub verdict: Verdict,
    /// The lowest measured/predicted ratio in it.
    pub worst_ratio: Option<f64>,
    /// What the verdict means for this run, in one sentence.
    pub says: String,
}

/// A run judged against a prediction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judgement {
    /// The run's own latency: its time at the smallest size less moving that size's
    /// bytes at its best busbw, microseconds.
    pub latency_us: Option<f64>,
    pub sizes: Vec<Judged>,
    pub ranges: Vec<Range>,
}

/// Judge every row of `run` against `prediction`; `hints` are findings of the job's log
/// that name host causes.
pub fn judge(run: &PerfRun, prediction: Option<&Prediction>, hints: &[Finding]) -> Judgement {
    let factor = run.busbw_factor();
    // The bandwidth a size's bytes are measured against: the routes', else the run's best.
    let best = run
        .rows
        .iter()
        .filter_map(|r| r.best().map(|m| m.busbw))
        .reduce(f64::max)
        .filter(|b| *b > 0.0);
    let reference = prediction.map(|p| p.busbw).or(best);
    let latency_us = run_latency(run, factor, best);
    // What starting a bandwidth-bound size costs: the run's own latency, or NCCL's
    // bandwidth protocol's steps between servers, whichever is more.
    let steps = steps(run, factor);
    let start_us = latency_us.map(|l| l.max(steps * STEP_US));
    let mut sizes = Vec::new();
    for row in &run.rows {
        let Some(m) = row.best() else { continue };
        let predicted = match (prediction, factor, start_us) {
            (Some(p), Some(f), Some(l)) if p.busbw > 0.0 && f > 0.0 => {
                let bus_bytes = f * row.size as f64;
                Some(bus_bytes / (l * 1e-6 + bus_bytes / (p.busbw * 1e9)) / 1e9)
            }
            _ => None,
        };
        let ratio = predicted.filter(|p| *p > 0.0).map(|p| m.busbw / p);
        let latency_bound = latency_us.is_some_and(|l| {
            // Moving the bytes at the reference bandwidth is a small part of starting: what
            // the size takes beyond that is latency (jitter), not bandwidth.
            let moving_us = factor.zip(reference).map_or(f64::INFINITY, |(f, b)| {
                f * row.size as f64 / (b * 1e9) * 1e6
            });
            l > 0.0 && (m.time_us <= 2.0 * l || moving_us <= l / 4.0)
        });
        let verdict = if latency_bound {
            Verdict::LatencyBound
        } else {
            match ratio {
                Some(r) if r >= AT_LIMIT => Verdict::AtFabricLimit,
                Some(_) => Verdict::BelowFabricLimit,
                None => Verdict::NoPrediction,
            }
        };
        sizes.push(Judged {
            size: row.size,
            time_us: m.time_us,
            busbw: m.busbw,
            predicted_busbw: predicted,
            ratio,
            verdict,
            wrong: row.wrong(),
        });
    }
    let ranges = ranges(&sizes, prediction, hints);
    Judgement {
        latency_us,
        sizes,
        ranges,
    }
}

fn ranges(sizes: &[Judged], prediction: Option<&Prediction>, hints: &[Finding]) -> Vec<Range> {
    let mut out: Vec<Range> = Vec::new();
    for s in sizes {
        match out.last_mut() {
            Some(r) if r.verdict == s.verdict => {
                r.to = s.size;
                r.worst_ratio = min_option(r.worst_ratio, s.ratio);
            }
            _ => out.push(Range {
                from: s.size,
                to: s.size,
                verdict: s.verdict,
                worst_ratio: s.ratio,
                says: String::new(),
            }),
        }
    }
    for r in &mut out {
        r.says = says(r, prediction, hints);
    }
    out
}

fn min_option(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The sentence of a range.
fn says(r: &Range, prediction: Option<&Prediction>, hints: &[Finding]) -> String {
    let pct = |x: Option<f64>| x.map_or(String::new(), |x| format!("{:.0}%", x * 100.0));
    match r.verdict {
        Verdict::LatencyBound => {
            "latency-bound: the time is mostly starting the collective; neither fabric nor \
             host bandwidth is at stake"
                .into()
        }
        Verdict::AtFabricLimit => {
            let p = prediction.expect("a verdict against a prediction has one");
            // Well above what the HCAs counted carry: more of them than counted.
            let more = match &p.line_rate {
                Some(l) if r.worst_ratio.is_some_and(|x| x > 1.5) => format!(
                    "; the run moves more than {} HCA(s) per server carry: give --nics",
                    l.hcas_per_server
                ),
                _ => String::new(),
            };
            format!(
                "at the fabric's limit ({} of {:.1} GB/s): {}{more}",
                pct(r.worst_ratio),
                p.busbw,
                limit_text(p)
            )
        }
        Verdict::BelowFabricLimit => {
            let p = prediction.expect("a verdict against a prediction has one");
            let how = if r.worst_ratio.is_some_and(|x| x < FAR_BELOW) {
                "far below"
            } else {
                "below"
            };
            let look = if hints.is_empty() {
                "look at the hosts: GPUDirect RDMA (nvidia-peermem), PCIe links, an HCA \
                 shared by GPUs (`ibscope host --check` on each; give the job's \
                 NCCL_DEBUG=INFO log with --log)"
                    .to_string()
            } else {
                let kinds: std::collections::BTreeSet<&str> =
                    hints.iter().map(|f| f.kind.name()).collect();
                format!(
                    "look at the hosts: the log shows {} ({} finding(s), see below)",
                    kinds.into_iter().collect::<Vec<_>>().join(", "),
                    hints.len()
                )
            };
            format!(
                "{how} the fabric's limit (down to {} of what {}, {:.1} GB/s): {look}",
                pct(r.worst_ratio),
                p.allows(),
                p.busbw
            )
        }
        Verdict::NoPrediction => {
            "bandwidth-bound; no prediction to compare with (no fabric and no --rate, or the \
             collective is not modelled)"
                .into()
        }
    }
}

/// The HCAs a line-rate prediction counts, in words.
pub fn line_rate_text(l: &LineRate) -> String {
    format!(
        "{} HCA(s) per server, {:.0} Gb/s together{}, at {:.0}% of line rate as healthy \
         published runs reach",
        l.hcas_per_server,
        l.server_gbps,
        l.slowest_server
            .as_ref()
            .map_or(String::new(), |s| format!(" (slowest: {s})")),
        l.efficiency * 100.0
    )
}

/// The limiting link in words (without a fabric: the HCAs' rate).
pub fn limit_text(p: &Prediction) -> String {
    if let Some(l) = &p.line_rate {
        return format!("the HCAs' line rate caps it: {}", line_rate_text(l));
    }
    match &p.limit {
        Some(l) => {
            let what = if l.below_norm {
                "a link below the job's HCA rate caps it"
            } else if l.hca_link {
                "the HCAs' own links cap it (line rate)"
            } else {
                "a switch link shared by the job's flows caps it"
            };
            let capacity = l
                .capacity_gbps
                .map_or(String::new(), |c| format!(", {c:.0} Gb/s"));
            format!("{what}: {} ({} flows{capacity})", l.channel, l.flows)
        }
        None => "no single link caps it".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf;
    use crate::synthetic::{self, Job};
    use ibscope_topo::routing::ChannelRef;

    fn prediction(busbw: f64) -> Prediction {
        let port = ibscope_topo::PortRef {
            node: ibscope_topo::NodeRef {
                guid: 0x1,
                kind: ibscope_topo::NodeKind::Ca,
                name: "gpu-0001 mlx5_0".into(),
            },
            port: 1,
            lid: 1,
            host: None,
            rail: None,
        };
        Prediction {
            basis: Basis::Routes,
            line_rate: None,
            collective: Collective::Ring,
            servers: vec!["gpu-0001".into(), "gpu-0002".into()],
            rails: vec![0],
            busbw,
            limit: Some(Limit {
                channel: ChannelRef {
                    from: port.clone(),
                    to: port,
                },
                capacity_gbps: Some(200.0),
                flows: 2,
                share_gbps: 200.0,
                hca_link: true,
                below_norm: false,
            }),
        }
    }

    /// A run whose sizes measure `busbw(size)`.
    fn run(busbw: impl Fn(u64) -> f64) -> PerfRun {
        let sizes: Vec<(u64, f64)> = (3..=33).map(|p| 1u64 << p).map(|s| (s, busbw(s))).collect();
        let text = synthetic::perf_text(&Job::new(2, 1), "all_reduce", &sizes);
        perf::parse(&text, "t").remove(0)
    }

    fn verdicts(j: &Judgement) -> Vec<Verdict> {
        j.ranges.iter().map(|r| r.verdict).collect()
    }

    /// busbw of a collective with latency `l` us and bandwidth `c` GB/s (factor 1 for 2 ranks).
    fn model(l: f64, c: f64) -> impl Fn(u64) -> f64 {
        move |s| s as f64 / (l * 1e-6 + s as f64 / (c * 1e9)) / 1e9
    }

    #[test]
    fn a_run_at_the_routes_limit() {
        let j = judge(&run(model(20.0, 24.0)), Some(&prediction(25.0)), &[]);
        assert_eq!(
            verdicts(&j),
            [Verdict::LatencyBound, Verdict::AtFabricLimit]
        );
        assert!(
            j.ranges[1].says.contains("the HCAs' own links cap it"),
            "{}",
            j.ranges[1].says
        );
        let last = j.sizes.last().unwrap();
        assert!((last.ratio.unwrap() - 0.96).abs() < 0.01, "{last:?}");
    }

    #[test]
    fn a_run_far_below_the_routes_limit_points_at_the_hosts() {
        let j = judge(&run(model(20.0, 8.0)), Some(&prediction(25.0)), &[]);
        assert_eq!(
            verdicts(&j),
            [Verdict::LatencyBound, Verdict::BelowFabricLimit]
        );
        assert!(
            j.ranges[1].says.starts_with("far below"),
            "{}",
            j.ranges[1].says
        );
        assert!(j.ranges[1].says.contains("GPUDirect RDMA"));
        let hint = Finding::new(ibscope_topo::findings::FindingKind::NcclGdrOff, "x".into());
        let j = judge(&run(model(20.0, 8.0)), Some(&prediction(25.0)), &[hint]);
        assert!(
            j.ranges[1].says.contains("the log shows nccl-gdr-off"),
            "{}",
            j.ranges[1].says
        );
    }

    #[test]
    fn without_a_fabric_the_curve_is_still_judged_by_time() {
        let j = judge(&run(model(20.0, 24.0)), None, &[]);
        assert_eq!(verdicts(&j), [Verdict::LatencyBound, Verdict::NoPrediction]);
        assert!(j.sizes.iter().all(|s| s.predicted_busbw.is_none()));
        assert_eq!(j.latency_us.map(f64::round), Some(20.0));
    }

    #[test]
    fn factors_are_nccl_tests() {
        use crate::perf::busbw_factor;
        assert_eq!(busbw_factor("all_reduce", 8), Some(1.75));
        assert_eq!(busbw_factor("all_gather", 8), Some(0.875));
        assert_eq!(busbw_factor("sendrecv", 8), Some(1.0));
        assert_eq!(busbw_factor("nonsense", 8), None);
    }
}
