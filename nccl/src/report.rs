//! What `ibscope nccl tests` and `ibscope nccl log` report: the parsed evidence joined with
//! the fabric where there is one, in the shape of their JSON.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use ibscope_topo::findings::Finding;
use ibscope_topo::hosts::Hosts;
use ibscope_topo::Fabric;

use crate::checks::common::Index;
use crate::log::{NcclLog, Transport};
use crate::perf::PerfRun;
use crate::placement::{self, Placement};
use crate::predict::{self, Basis, Judgement, Prediction};
use crate::rate::{self, ServerLinks};

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

/// What runs are judged with besides their own lines.
#[derive(Default)]
pub struct Judging<'a> {
    /// The fabric, where there is one.
    pub beside: Option<&'a Beside<'a>>,
    /// The servers when a run names none (`--hosts`).
    pub hosts_given: &'a [String],
    /// The job log's findings: they explain a run below the limit.
    pub hints: &'a [Finding],
    /// Without a fabric: the HCAs' rates.
    pub lines: Lines,
}

/// Without a fabric: the HCA rates a prediction may stand on.
#[derive(Debug, Clone, Default)]
pub struct Lines {
    /// `--rate` (Gb/s per HCA) and `--nics` (HCAs per server).
    pub rate_gbps: Option<f64>,
    pub nics: Option<usize>,
    /// The servers' `ibscope host --json` documents.
    pub documents: Vec<ServerLinks>,
    /// The HCAs the job's NCCL lines show each server using.
    pub used: BTreeMap<String, Vec<String>>,
}

impl Lines {
    /// HCAs per server where `--nics` does not say: the number the job's NCCL lines show
    /// most servers using, else 1.
    fn nics_or_default(&self) -> usize {
        if let Some(n) = self.nics {
            return n;
        }
        let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
        for used in self.used.values().filter(|u| !u.is_empty()) {
            *counts.entry(used.len()).or_default() += 1;
        }
        counts
            .into_iter()
            .max_by_key(|(n, c)| (*c, *n))
            .map_or(1, |(n, _)| n)
    }

    /// What the HCAs allow `op` on `servers` (every document's host when none is named).
    fn predict(&self, op: &str, servers: &[String]) -> Result<Prediction, String> {
        if let [only] = servers {
            return Err(format!(
                "the run's ranks are all on {only}: its HCAs carry none of it (NVLink or PCIe \
                 inside the server bound it)"
            ));
        }
        if !self.documents.is_empty() {
            let names: Vec<String> = if servers.is_empty() {
                self.documents.iter().map(|d| d.host.clone()).collect()
            } else {
                servers.to_vec()
            };
            let mut per_server = Vec::new();
            for name in &names {
                let doc = self
                    .documents
                    .iter()
                    .find(|d| rate::same_host(&d.host, name));
                let used = self.used.get(name).map_or(&[][..], Vec::as_slice);
                let counted = match (doc, self.rate_gbps) {
                    (Some(d), _) => d.gbps(used, self.nics),
                    (None, Some(r)) => {
                        let n = self.nics_or_default();
                        Some((n, n as f64 * r))
                    }
                    (None, None) => {
                        return Err(format!("no host document names {name} (and no --rate)"))
                    }
                };
                let (n, gbps) =
                    counted.ok_or_else(|| format!("{name}'s host document has no active port"))?;
                per_server.push((name.clone(), n, gbps));
            }
            return predict::predict_line(op, Basis::HostDocuments, &per_server);
        }
        let Some(rate) = self.rate_gbps else {
            return Err(
                "no fabric (none reachable, no --topology) and no HCA rate (--rate, or \
                        the servers' host documents)"
                    .into(),
            );
        };
        let n = self.nics_or_default();
        let per_server: Vec<(String, usize, f64)> = if servers.is_empty() {
            vec![(String::new(), n, n as f64 * rate)]
        } else {
            servers
                .iter()
                .map(|s| (s.clone(), n, n as f64 * rate))
                .collect()
        };
        let mut p = predict::predict_line(op, Basis::Rate, &per_server)?;
        if let Some(l) = &mut p.line_rate {
            l.slowest_server = None;
        }
        Ok(p)
    }
}

/// Judge `run`.
pub fn run_report(run: &PerfRun, with: &Judging) -> RunReport {
    let mut servers: Vec<String> = Vec::new();
    for r in &run.ranks {
        if !servers.contains(&r.host) {
            servers.push(r.host.clone());
        }
    }
    if servers.is_empty() {
        servers = with.hosts_given.to_vec();
    }
    let op = run.op.as_deref();
    let no_op = || {
        "the file does not say which collective it measured (no *_perf command line): give --op"
            .to_string()
    };
    let prediction = match (with.beside, op) {
        (_, None) => Err(no_op()),
        (Some(_), Some(_)) if servers.is_empty() => {
            Err("the file names no hosts (no rank lines): give --hosts".to_string())
        }
        (Some(b), Some(op)) => predict::predict(b.fabric, b.hosts, &servers, op).or_else(|e| {
            let lines_given = with.lines.rate_gbps.is_some() || !with.lines.documents.is_empty();
            if lines_given {
                with.lines.predict(op, &servers)
            } else {
                Err(e)
            }
        }),
        (None, Some(op)) => with.lines.predict(op, &servers),
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
        judgement: predict::judge(run, prediction.as_ref(), with.hints),
        prediction,
        prediction_missing,
        partial: run.partial,
        problems: run.problems.clone(),
    }
}

/// What `ibscope nccl tests` reports: each run judged, the findings of the output itself,
/// and those of the job's NCCL lines (in the output and the logs given).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TestsReport {
    pub runs: Vec<RunReport>,
    /// Of the nccl-tests output: nccl-curve-collapse, nccl-tests-without-mpi.
    pub findings: Vec<Finding>,
    /// Of the NCCL lines: the log's checks.
    pub log_findings: Vec<Finding>,
}

impl TestsReport {
    /// A run to look at, or any finding: exit code 1.
    pub fn needs_attention(&self) -> bool {
        self.runs.iter().any(RunReport::needs_attention)
            || !self.findings.is_empty()
            || !self.log_findings.is_empty()
    }
}

/// Judge every run; `log` holds the job's NCCL lines (the outputs' own and the logs
/// given), its findings explain a run below the limit.
pub fn tests_report(runs: &[PerfRun], log: &NcclLog, with: Judging) -> TestsReport {
    let log_findings = if log.is_empty() {
        Vec::new()
    } else {
        crate::checks::check(log, with.beside.map(|b| b.hosts))
    };
    let mut lines = with.lines;
    for (host, s) in server_summaries(log, &Index::new(log)) {
        lines.used.entry(host).or_insert(s.hcas_used);
    }
    let with = Judging {
        hints: &log_findings,
        lines,
        ..with
    };
    let reports: Vec<RunReport> = runs.iter().map(|r| run_report(r, &with)).collect();
    let mut findings: Vec<Finding> = runs
        .iter()
        .zip(&reports)
        .filter_map(|(r, x)| crate::curve::collapse(r, &x.judgement))
        .collect();
    let sources: BTreeSet<&str> = runs.iter().map(|r| r.source.as_str()).collect();
    for source in sources {
        let of: Vec<&PerfRun> = runs.iter().filter(|r| r.source == source).collect();
        findings.extend(crate::curve::without_mpi(&of, log));
    }
    TestsReport {
        runs: reports,
        findings,
        log_findings,
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

/// Each server of the log: its ranks, the HCAs its processes list and those they use.
fn server_summaries(log: &NcclLog, index: &Index) -> BTreeMap<String, ServerSummary> {
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
    let mut used: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (_, host, d) in index.net_ends() {
        let u = used.entry(host).or_default();
        if !u.contains(&d.device.as_str()) {
            u.push(&d.device);
        }
    }
    for (host, devices) in used {
        server(&mut servers, host).hcas_used = devices.into_iter().map(str::to_string).collect();
    }
    servers
}

/// Check `log` and, beside a fabric, place it.
pub fn log_report(log: &NcclLog, beside: Option<&Beside>) -> LogReport {
    let by = Index::new(log);
    let servers = server_summaries(log, &by);
    let (mut net, mut gdr) = (0, 0);
    for c in &log.connections {
        if let Transport::Net { gdr: g, .. } = c.transport {
            net += 1;
            gdr += usize::from(g);
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
    let versions: BTreeSet<String> = log
        .processes
        .values()
        .filter_map(|p| p.version.as_ref())
        .chain(&log.bare_versions)
        .map(|v| v.value.clone())
        .collect();
    let findings = crate::checks::check_indexed(log, &by, beside.map(|b| b.hosts));
    let networks: BTreeSet<String> = log
        .processes
        .keys()
        .filter_map(|id| crate::checks::network_of(log, id, by.of(id)))
        .map(|n| n.value)
        .collect();
    LogReport {
        ranks: log.ranks.len(),
        nranks: log.nranks(),
        servers: servers.into_values().collect(),
        versions: versions.into_iter().collect(),
        networks: networks.into_iter().collect(),
        rings: log.rings.len(),
        trees: log.trees,
        net_connections: net,
        gdr_connections: gdr,
        findings,
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
