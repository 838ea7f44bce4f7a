//! What `ibscope nccl tests` and `ibscope nccl log` report: the parsed evidence joined with
//! the fabric where there is one, in the shape of their JSON.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use ibscope_topo::findings::Finding;
use ibscope_topo::hosts::Hosts;
use ibscope_topo::Fabric;

use crate::log::{NcclLog, Transport};
use crate::perf::PerfRun;
use crate::placement::{self, Placement};
use crate::predict::{self, Judgement, Prediction};

/// A fabric to join the evidence with: its hosts and the findings of its links.
pub struct Beside<'a> {
    pub fabric: &'a Fabric,
    pub hosts: &'a Hosts,
    pub findings: &'a [Finding],
    /// The fabric's counter changes over an interval (live only; empty otherwise).
    pub deltas: &'a [ibscope_topo::counters::PortDelta],
}

/// One nccl-tests run judged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    pub source: String,
    pub op: Option<String>,
    pub ranks: usize,
    /// The servers the prediction is for: the run's own (its rank lines), else --hosts.
    pub servers: Vec<String>,
    pub nccl_version: Option<String>,
    pub avg_busbw: Option<f64>,
    /// Values nccl-tests found wrong over all sizes.
    pub wrong: u64,
    pub prediction: Option<Prediction>,
    /// Why there is no prediction.
    pub prediction_missing: Option<String>,
    pub judgement: Judgement,
    pub partial: bool,
    pub problems: Vec<String>,
}

/// Judge `run`; `hosts_given` stands in for the run's servers when it names none; `hints`
/// are the job log's findings.
pub fn run_report(
    run: &PerfRun,
    beside: Option<&Beside>,
    hosts_given: &[String],
    hints: &[Finding],
) -> RunReport {
    let mut servers: Vec<String> = Vec::new();
    for r in &run.ranks {
        if !servers.contains(&r.host) {
            servers.push(r.host.clone());
        }
    }
    if servers.is_empty() {
        servers = hosts_given.to_vec();
    }
    let op = run.op.as_deref();
    let prediction = match (beside, op) {
        (None, _) => Err("no fabric (none reachable, no --topology)".to_string()),
        (Some(_), None) => Err(
            "the file does not say which collective it measured (no *_perf command line): \
             give --op"
                .to_string(),
        ),
        (Some(_), Some(_)) if servers.is_empty() => {
            Err("the file names no hosts (no rank lines): give --hosts".to_string())
        }
        (Some(b), Some(op)) => predict::predict(b.fabric, b.hosts, &servers, op),
    };
    let (prediction, prediction_missing) = match prediction {
        Ok(p) => (Some(p), None),
        Err(e) => (None, Some(e)),
    };
    RunReport {
        source: run.source.clone(),
        op: run.op.clone(),
        ranks: run.ranks.len(),
        servers,
        nccl_version: run.nccl_version.clone(),
        avg_busbw: run.avg_busbw,
        wrong: run.rows.iter().map(crate::perf::Row::wrong).sum(),
        judgement: predict::judge(run, prediction.as_ref(), hints),
        prediction,
        prediction_missing,
        partial: run.partial,
        problems: run.problems.clone(),
    }
}

impl RunReport {
    /// Something to look at: a range below the fabric's limit, values found wrong, or a run
    /// cut short.
    pub fn needs_attention(&self) -> bool {
        self.partial
            || self.wrong > 0
            || self
                .judgement
                .ranges
                .iter()
                .any(|x| x.verdict == crate::predict::Verdict::BelowFabricLimit)
    }

    /// The run's chart as SVG, titled with its collective, ranks and file.
    pub fn svg(&self) -> String {
        let title = format!(
            "{} on {} ranks: measured and predicted busbw ({})",
            self.op.as_deref().unwrap_or("collective"),
            self.ranks,
            self.source
        );
        crate::chart::svg(&self.judgement.sizes, &title)
    }
}

/// One server of a job as its log shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerSummary {
    pub host: String,
    pub ranks: Vec<u32>,
    /// HCAs its processes list (`NET/IB : Using`).
    pub hcas: Vec<String>,
    /// HCAs its network connections use.
    pub hcas_used: Vec<String>,
}

/// A job's NCCL log, checked and placed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LogReport {
    /// Ranks the log places (a comm line) and the job's size as they say it.
    pub ranks: usize,
    pub nranks: Option<u32>,
    pub servers: Vec<ServerSummary>,
    pub versions: Vec<String>,
    pub networks: Vec<String>,
    pub rings: usize,
    pub trees: usize,
    /// Network connection lines, and those with GPUDirect RDMA.
    pub net_connections: usize,
    pub gdr_connections: usize,
    pub findings: Vec<Finding>,
    pub placement: Option<Placement>,
    pub placement_missing: Option<String>,
    pub nccl_lines: usize,
    pub unread_lines: usize,
    pub warnings: Vec<String>,
    pub partial: bool,
    pub problems: Vec<String>,
}

/// Check `log` and, beside a fabric, place it.
pub fn log_report(log: &NcclLog, beside: Option<&Beside>) -> LogReport {
    let mut servers: BTreeMap<String, ServerSummary> = BTreeMap::new();
    for r in log.ranks.values() {
        server(&mut servers, &r.process.host).ranks.push(r.rank);
    }
    for (id, p) in &log.processes {
        let s = server(&mut servers, &id.host);
        for d in &p.net_devices {
            if !s.hcas.contains(&d.device) {
                s.hcas.push(d.device.clone());
            }
        }
    }
    let (mut net, mut gdr) = (0, 0);
    for c in &log.connections {
        if let Transport::Net { gdr: g, .. } = c.transport {
            net += 1;
            gdr += usize::from(g);
            if let Some(d) = log.net_device(c) {
                let s = server(&mut servers, &c.printed_by.host);
                if !s.hcas_used.contains(&d.device) {
                    s.hcas_used.push(d.device.clone());
                }
            }
        }
    }
    let mut problems = log.problems.clone();
    let placed: BTreeSet<u32> = log.ranks.keys().copied().collect();
    let unplaced: BTreeSet<u32> = log
        .connections
        .iter()
        .flat_map(|c| [c.from, c.to])
        .filter(|r| !placed.contains(r))
        .collect();
    if !unplaced.is_empty() {
        problems.push(format!(
            "{} rank(s) have connections but no \"comm ... rank R ... cudaDev D\" line (a \
             truncated log, or a file of that rank missing): their host is unknown",
            unplaced.len()
        ));
    }
    if let Some(n) = log.nranks() {
        if (placed.len() as u32) < n {
            problems.push(format!(
                "the log places {} of the job's {n} ranks",
                placed.len()
            ));
        }
    }
    if log.is_empty() {
        problems.push("no NCCL INFO line of a job: is this an NCCL_DEBUG=INFO log?".into());
    }
    let (placement, placement_missing) = match beside {
        Some(b) => (
            Some(placement::place(
                log, b.fabric, b.hosts, b.findings, b.deltas,
            )),
            None,
        ),
        None => (
            None,
            Some("no fabric (none reachable, no --topology)".to_string()),
        ),
    };
    let collect = |f: &dyn Fn(&crate::log::Process) -> Option<String>| -> Vec<String> {
        let set: BTreeSet<String> = log.processes.values().filter_map(f).collect();
        set.into_iter().collect()
    };
    LogReport {
        ranks: log.ranks.len(),
        nranks: log.nranks(),
        servers: servers.into_values().collect(),
        versions: collect(&|p| p.version.clone()),
        networks: collect(&|p| p.network.clone()),
        rings: log.rings.len(),
        trees: log.trees,
        net_connections: net,
        gdr_connections: gdr,
        findings: crate::checks::check(log, beside.map(|b| b.hosts)),
        placement,
        placement_missing,
        nccl_lines: log.nccl_lines,
        unread_lines: log.unread_lines,
        warnings: log.warnings.clone(),
        partial: !problems.is_empty(),
        problems,
    }
}

/// The summary of `host`, made on first use.
fn server<'m>(
    servers: &'m mut BTreeMap<String, ServerSummary>,
    host: &str,
) -> &'m mut ServerSummary {
    if !servers.contains_key(host) {
        servers.insert(
            host.to_string(),
            ServerSummary {
                host: host.to_string(),
                ranks: Vec::new(),
                hcas: Vec::new(),
                hcas_used: Vec::new(),
            },
        );
    }
    servers.get_mut(host).expect("inserted above")
}
