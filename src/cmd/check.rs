//! `ibscope check`: one health report of the whole fabric, with an exit code for scripts.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use ibscope_mad::attr::SmInfo;
use ibscope_mad::engine::Request;
use ibscope_mad::header::attr;
use ibscope_mad::smp::SmpRoute;
use ibscope_topo::counters::{self, Thresholds};
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::escape::for_terminal;
use ibscope_topo::health::{self, HealthOptions, PortRef, Rate};
use serde::Serialize;

use crate::cli::{exit, Global};

/// Check the fabric's health in one run.
///
/// Findings: degraded links (see `ibscope links`), ports physically up but not Active,
/// error counters above their thresholds, saturated counters (no 64-bit replacement),
/// counters that could not be read, duplicate GUIDs and LIDs, discovery errors, and no
/// master SM (SMInfo of the SM the local port names). Every finding names the node
/// (display name and GUID), the port and the far end.
///
/// Thresholds: every error counter defaults to 0 (any error is reported); PortXmitWait is
/// only checked when set. --thresholds FILE takes ibqueryerrors' --threshold-file format:
///   # comment
///   SymbolErrorCounter=10
///   LinkErrorRecoveryCounter=5
///
/// Counters are screened as ibqueryerrors does: a switch whose PMA has AllPortSelect is
/// read as one all-ports sum (PortCounters with PortSelect 0xFF) and its ports one by one
/// only when the sum leaves room for a finding: a counter above its threshold, or one
/// saturated (32-bit data counters only without PortCountersExtended). A sum that cannot
/// be read means per-port reads. CA ports are always read one by one. --no-screen reads
/// every port one by one, as `ibscope counters` does: use it to see every port's values
/// in --json ("ports", absent otherwise), or to catch a port whose own counters do not
/// answer on a switch whose sum is clean.
///
/// With --topology FILE only the links and ports are checked (no counters, no SM).
///
/// Exit code: 0 healthy, 1 findings, 2 could not run.
///
/// Examples:
///   ibscope check
///   ibscope check --thresholds /etc/ibscope/thresholds.conf --json
///   ibscope check --expect 4xHDR
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Threshold file: `CounterName=value` lines, `#` comments.
    #[arg(long, value_name = "FILE")]
    pub thresholds: Option<PathBuf>,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
    /// Expected rate of every link, e.g. 4xHDR (default: the most common rate per class).
    #[arg(long, value_name = "WIDTHxSPEED", value_parser = super::links::parse_rate)]
    pub expect: Option<Rate>,
    /// Read every port's counters one by one instead of screening switches by their
    /// all-ports sum; --json then lists every port's counters ("ports").
    #[arg(long)]
    pub no_screen: bool,
}

/// One finding.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// degraded-link, port-not-active, counter-above-threshold, counter-saturated,
    /// counters-unreadable, duplicate-guid, duplicate-lid, discovery-error, no-master-sm.
    pub kind: &'static str,
    /// The port concerned (absent for fabric-wide findings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at: Option<PortRef>,
    /// The far end of its link.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<PortRef>,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counter: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<u64>,
}

impl Finding {
    fn new(kind: &'static str, message: String) -> Finding {
        Finding {
            kind,
            at: None,
            remote: None,
            message,
            counter: None,
            value: None,
            threshold: None,
        }
    }
    fn at(mut self, at: PortRef, remote: Option<PortRef>) -> Finding {
        self.at = Some(at);
        self.remote = remote;
        self
    }
}

#[derive(Debug, Serialize)]
struct Report {
    healthy: bool,
    nodes: usize,
    links: usize,
    /// Ports whose counters were checked, one by one or through their switch's
    /// all-ports sum (0 with --topology).
    ports_sampled: usize,
    counters_checked: bool,
    sm_checked: bool,
    /// Switches were screened by their all-ports sum (false with --no-screen).
    screening: bool,
    /// Switches whose all-ports sum cleared their ports, and those ports (in ports_sampled).
    switches_screened: usize,
    ports_screened: usize,
    /// MADs the counter phase sent: ClassPortInfo, sums, per-port reads, retries.
    counter_mads: u64,
    /// Links whose active rate is unknown (topology files often give none): the fabric-norm
    /// rule cannot judge them, only --expect can.
    links_without_rate: usize,
    findings: Vec<Finding>,
    /// With --no-screen: every port's counters, as `ibscope counters --format json` has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    ports: Option<Vec<counters::PortSample>>,
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    let thresholds = match &a.thresholds {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read threshold file {}", path.display()))?;
            Thresholds::parse(&text, &path.display().to_string())?
        }
        None => Thresholds::default(),
    };
    let names = crate::fabric::names(g)?;
    let mut engine = None;
    let fabric = match &g.topology {
        Some(path) => crate::fabric::load_file(path)?,
        None => {
            let e = engine.insert(crate::fabric::open_engine(g)?);
            crate::fabric::discover_live(e, DiscoverOptions::default())?
        }
    };
    let reads = if a.no_screen {
        CounterReads::PerPort
    } else {
        CounterReads::Screened
    };
    let eval = evaluate_with(
        &fabric,
        names.as_ref(),
        &HealthOptions { expect: a.expect },
        &thresholds,
        engine.as_mut(),
        reads,
    );
    if let Some(e) = &engine {
        // Lost mid-sweep: one message, not a finding per unreadable port.
        crate::fabric::ensure_connected(e)?;
    }
    let links_without_rate = eval
        .health
        .links
        .iter()
        .filter(|l| l.active.is_none())
        .count();
    let counters_checked = eval.sample.is_some();
    let ports_screened: usize = eval.screened.iter().map(|s| s.ports.len()).sum();
    let ports_sampled = eval.sample.as_ref().map_or(0, |s| s.ports.len()) + ports_screened;
    for d in &eval.drilled {
        tracing::debug!(switch = %d.at, reason = %d.reason, "all-ports sum: ports read one by one");
    }

    let out = Report {
        healthy: eval.findings.is_empty(),
        nodes: fabric.node_count(),
        links: fabric.link_count(),
        ports_sampled,
        counters_checked,
        sm_checked: counters_checked,
        screening: counters_checked && reads == CounterReads::Screened,
        switches_screened: eval.screened.len(),
        ports_screened,
        counter_mads: eval.sample.as_ref().map_or(0, |s| s.mads_sent),
        links_without_rate,
        findings: eval.findings,
        ports: match (reads, eval.sample) {
            (CounterReads::PerPort, Some(sample)) => Some(sample.ports),
            _ => None,
        },
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        print_text(&out);
        if out.links_without_rate > 0 && a.expect.is_none() {
            // "healthy" must not read as "no degraded link" when most rates are unknown.
            println!(
                "note: {} of {} links carry no active width/speed, so they could not be \
                 compared with the fabric norm; give the rate they should run at with \
                 --expect (e.g. --expect 4xHDR)",
                out.links_without_rate, out.links
            );
        }
    }
    Ok(ExitCode::from(if out.healthy {
        exit::OK
    } else {
        exit::FINDINGS
    }))
}

/// What `check` found, and the counter sample it read (live only).
pub struct Evaluation {
    pub findings: Vec<Finding>,
    /// The ports read one by one: every port with [`CounterReads::PerPort`]; `mads_sent`
    /// covers the whole counter phase.
    pub sample: Option<counters::Sample>,
    /// Switches cleared by their all-ports sum ([`CounterReads::Screened`] only): their
    /// ports are not in `sample`.
    pub screened: Vec<counters::ScreenedSwitch>,
    /// Switches with AllPortSelect whose ports were read one by one, and why.
    pub drilled: Vec<counters::DrilledSwitch>,
    /// The link and port assessment the findings came from (callers reuse it rather than
    /// assessing the fabric again).
    pub health: health::HealthReport,
}

/// How [`evaluate_with`] reads the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterReads {
    /// Every port one by one: the sample has every port's values.
    PerPort,
    /// Switches with AllPortSelect through their all-ports sum first, as ibqueryerrors
    /// does (see [`counters::sweep_screened`]): the same findings, fewer MADs.
    Screened,
}

/// Every health finding of a fabric; with an engine also the counters (every port read
/// one by one) and the SM. Shared by `check --no-screen`, the TUI's live source and the
/// exporter.
pub fn evaluate(
    fabric: &ibscope_topo::Fabric,
    names: Option<&ibscope_topo::namemap::NameMap>,
    health_options: &HealthOptions,
    thresholds: &Thresholds,
    engine: Option<&mut ibscope_mad::engine::Engine>,
) -> Evaluation {
    evaluate_with(
        fabric,
        names,
        health_options,
        thresholds,
        engine,
        CounterReads::PerPort,
    )
}

/// [`evaluate`], with the counters read as `reads` says.
pub fn evaluate_with(
    fabric: &ibscope_topo::Fabric,
    names: Option<&ibscope_topo::namemap::NameMap>,
    health_options: &HealthOptions,
    thresholds: &Thresholds,
    engine: Option<&mut ibscope_mad::engine::Engine>,
    reads: CounterReads,
) -> Evaluation {
    let mut findings = Vec::new();

    let report = health::assess(fabric, names, health_options);
    for l in report.degraded() {
        let f = Finding::new(
            "degraded-link",
            format!(
                "link runs at {}: {}",
                l.active.map_or("?".into(), |r| r.to_string()),
                l.reasons.join("; ")
            ),
        )
        .at(l.a.at.clone(), Some(l.b.at.clone()));
        findings.push(f);
    }
    for p in &report.up_not_active {
        findings.push(
            Finding::new(
                "port-not-active",
                format!("physically {} but {}", p.phys_state, p.state),
            )
            .at(p.at.clone(), p.remote.clone()),
        );
    }
    for guid in &fabric.report.duplicate_guids {
        findings.push(Finding::new(
            "duplicate-guid",
            format!("node GUID {guid:#018x} is used by more than one node"),
        ));
    }
    for lid in &fabric.report.duplicate_lids {
        let mut f = Finding::new(
            "duplicate-lid",
            format!("LID {lid} is claimed by more than one port"),
        );
        if let Some(end) = fabric.port_by_lid(*lid) {
            f.at = Some(PortRef::new(fabric.node(end.node), end.port, names));
        }
        findings.push(f);
    }
    for e in fabric
        .report
        .errors
        .iter()
        .chain(&fabric.report.inconsistencies)
    {
        findings.push(Finding::new("discovery-error", e.clone()));
    }

    let mut sample_out = None;
    let mut screened = Vec::new();
    let mut drilled = Vec::new();
    if let Some(engine) = engine {
        let targets = counters::targets(fabric, None, None);
        let sample = match reads {
            CounterReads::PerPort => counters::sweep(engine, fabric, &targets, names),
            CounterReads::Screened => {
                let s = counters::sweep_screened(engine, fabric, &targets, names, thresholds);
                screened = s.screened;
                drilled = s.drilled;
                s.sample
            }
        };
        for p in &sample.ports {
            if p.counters.is_none() {
                findings.push(
                    Finding::new("counters-unreadable", p.errors.join("; "))
                        .at(p.at.clone(), p.remote.clone()),
                );
                continue;
            }
            for (name, value, limit) in thresholds.exceeded(p) {
                let mut f = Finding::new(
                    "counter-above-threshold",
                    format!("{name} = {value} (threshold {limit})"),
                )
                .at(p.at.clone(), p.remote.clone());
                f.counter = Some(name);
                f.value = Some(value);
                f.threshold = Some(limit);
                findings.push(f);
            }
            for name in &p.saturated {
                if !p.is_saturated(name) {
                    continue;
                }
                let mut f = Finding::new(
                    "counter-saturated",
                    format!("{name} is at its maximum and no longer counts"),
                )
                .at(p.at.clone(), p.remote.clone());
                f.counter = Some(name.clone());
                f.value = p.value(name);
                findings.push(f);
            }
        }
        if let Some(f) = check_sm(engine) {
            findings.push(f);
        }
        sample_out = Some(sample);
    }
    Evaluation {
        findings,
        sample: sample_out,
        screened,
        drilled,
        health: report,
    }
}

/// The master SM: the local port's SMLID must answer SMInfo in state Master.
fn check_sm(engine: &mut ibscope_mad::engine::Engine) -> Option<Finding> {
    let sm_lid = engine.local().sm_lid;
    if sm_lid == 0 {
        return Some(Finding::new(
            "no-master-sm",
            "the local port knows no SM (its SMLID is 0)".into(),
        ));
    }
    let request = Request::smp_get(&SmpRoute::Lid(sm_lid), attr::SM_INFO, 0);
    match engine.call(request) {
        Err(e) => Some(Finding::new(
            "no-master-sm",
            format!("the SM at LID {sm_lid} does not answer SMInfo: {e}"),
        )),
        Ok(r) => match SmInfo::decode(r.smp_data()) {
            Err(e) => Some(Finding::new(
                "no-master-sm",
                format!("the SM at LID {sm_lid} sent a malformed SMInfo: {e}"),
            )),
            Ok(info) if info.sm_state == 3 => None,
            Ok(info) => Some(Finding::new(
                "no-master-sm",
                format!(
                    "the SM at LID {sm_lid} (GUID {:#018x}) is {}, not Master",
                    info.guid,
                    info.state_name()
                ),
            )),
        },
    }
}

fn print_text(r: &Report) {
    for f in &r.findings {
        let mut line = format!("[{}]", f.kind);
        if let Some(at) = &f.at {
            line.push_str(&format!(" {at}"));
            if at.lid != 0 {
                line.push_str(&format!(" (lid {})", at.lid));
            }
        }
        if let Some(remote) = &f.remote {
            line.push_str(&format!(" <-> {remote}"));
        }
        line.push_str(&format!(": {}", for_terminal(&f.message)));
        println!("{line}");
    }
    let scope = if r.counters_checked && r.screening {
        format!(
            "{} ports' counters ({} switches screened by AllPortSelect), SM",
            r.ports_sampled, r.switches_screened
        )
    } else if r.counters_checked {
        format!("{} ports' counters, SM", r.ports_sampled)
    } else {
        "links and ports only (--topology)".to_string()
    };
    if r.healthy {
        println!(
            "healthy: {} nodes, {} links, {scope} checked",
            r.nodes, r.links
        );
    } else {
        println!(
            "{} finding(s): {} nodes, {} links, {scope} checked",
            r.findings.len(),
            r.nodes,
            r.links
        );
    }
}
