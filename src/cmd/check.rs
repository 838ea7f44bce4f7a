//! `ibscope check`: one health report of the whole fabric, with an exit code for scripts.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use ibscope_topo::counters::{self, Thresholds};
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::findings::{self, CounterReads, Evaluation};
use ibscope_topo::health::{HealthOptions, Rate};
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
/// Error counters are the 64-bit ones of PortCountersExtended where the PMA has them
/// (IsAdditionalPortCountersExtendedSupported), else PortCounters' 16- and 8-bit ones; one
/// of those at its maximum has stopped counting and reads "≥ 65535" ("saturated": true in
/// JSON). A finding about PortRcvErrors or PortXmitDiscards names the causes that counted,
/// from the port's PortRcvErrorDetails or PortXmitDiscardDetails (read for each port where
/// those counted; "details" in JSON).
///
/// Thresholds: every error counter defaults to 0 (any error is reported); PortXmitWait is
/// only checked when set. Without --thresholds the file in force is the config file's
/// `thresholds`, else /etc/infiniband-diags/error_thresholds (ibqueryerrors' default), else
/// /etc/rdma/error_thresholds, when present (see `ibscope config show`). --thresholds FILE takes ibqueryerrors'
/// --threshold-file format:
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
    findings: Vec<findings::Finding>,
    /// With --no-screen: every port's counters, as `ibscope counters --format json` has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    ports: Option<Vec<counters::PortSample>>,
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    let thresholds = crate::fabric::thresholds(g, a.thresholds.as_deref())?;
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
    let eval = evaluate(
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

/// `findings::evaluate` through an engine when there is one: the counters read as `reads`
/// says and the SM the local port names. Shared by `check`, the TUI's live source and the
/// exporter.
pub fn evaluate(
    fabric: &ibscope_topo::Fabric,
    names: Option<&ibscope_topo::namemap::NameMap>,
    health_options: &HealthOptions,
    thresholds: &Thresholds,
    engine: Option<&mut ibscope_mad::engine::Engine>,
    reads: CounterReads,
) -> Evaluation {
    let live = engine.map(|e| {
        let sm_lid = e.local().sm_lid;
        findings::Live {
            exec: e,
            reads,
            sm_lid,
        }
    });
    findings::evaluate(fabric, names, health_options, thresholds, live)
}

fn print_text(r: &Report) {
    for f in &r.findings {
        println!("{}", f.text_line());
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
