//! `ibscope nccl`: nccl-tests output and NCCL logs beside the fabric (`ibscope_nccl`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::ValueHint;
use ibscope_nccl::log::NcclLog;
use ibscope_nccl::perf::{self, PerfRun};
use ibscope_nccl::rate::{self, ServerLinks};
use ibscope_nccl::report::{self, Beside, Judging, Lines, RunReport};
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::findings::{kinds_help, Scope};
use ibscope_topo::findings::{CounterReads, Finding};
use ibscope_topo::health::HealthOptions;
use ibscope_topo::hosts::Hosts;
use ibscope_topo::Fabric;

use crate::cli::{exit, Global};

/// NCCL's evidence beside the fabric: nccl-tests runs against what the routes allow, and
/// a job's NCCL_DEBUG=INFO log checked and placed on the links it crosses.
///
/// Examples:
///   ibscope nccl tests all_reduce_perf.out --log nccl-debug.log
///   ibscope nccl log nccl-debug.log
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment, after_long_help = findings_help())]
pub struct Args {
    #[command(subcommand)]
    pub command: NcclCommand,
    #[command(flatten)]
    pub fabric: crate::cli::FabricArgs,
    #[command(flatten)]
    pub saved: crate::cli::TopologyArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum NcclCommand {
    /// nccl-tests output against the fabric: per message size, whether the fabric allows
    /// more.
    ///
    /// Reads the output of any *_perf binary of nccl-tests (old and new column layouts,
    /// out-of-place and in-place, #wrong or error, Avg bus bandwidth), with NCCL INFO
    /// lines between the rows and any prefix a launcher or log shipper puts before each
    /// line (learned from the file: what repeats before its rows and NCCL lines); several
    /// runs per file, runs of processes printing at once told apart. The collective comes
    /// from the *_perf command line or "Collective test starting" line, the file's name,
    /// or --op; the servers from the run's "Rank N ... on HOST" lines, else --hosts. The
    /// NCCL lines in the files (and the logs given with --log) are checked as `nccl log`
    /// checks them.
    ///
    /// The fabric (live, or --topology FILE: an ibscope JSON snapshot taken with
    /// `discover --lft` holds the routes) gives the bus bandwidth C its routes allow the
    /// job's servers on all their rails, as `route load` predicts it (ring all_reduce for
    /// all_reduce, all_gather, reduce_scatter, broadcast and reduce; all-to-all for
    /// alltoall), and the link that caps it. Without a fabric, --rate and --nics (or the
    /// servers' `ibscope host --json` documents, --host-json) give C for the ring-shaped
    /// collectives: the HCAs' rate per server times the 94% of line rate healthy
    /// published runs reach. The start of each size L (the run's time at its smallest
    /// size, at least NCCL's ring steps between servers) completes the prediction:
    ///   predicted busbw(S) = f S / (L + f S / C)      f: nccl-tests' busbw factor
    ///
    /// Verdicts, per size, shown as ranges:
    ///   latency-bound        measured time at most 2 L, or f S at C (no fabric: at the
    ///                        run's best busbw) takes under L/4: starting costs more
    ///   at-fabric-limit      measured busbw >= 80% of the prediction: the named link caps
    ///                        it; more needs a faster path
    ///   below-fabric-limit   under 80% ("far below" under 50%): the fabric allows more;
    ///                        look at the hosts (GPUDirect RDMA, PCIe, an HCA shared by
    ///                        GPUs), and with --log at what the job's NCCL log shows
    ///   no-prediction        no fabric or a collective not modelled: the curve alone
    /// Without a fabric or a rate the measured curves and the latency-bound ranges are
    /// still reported. The output's findings: a curve that collapses between
    /// bandwidth-bound sizes, processes that ran the test alone (listed below).
    ///
    /// Exit code: 0 every bandwidth range at the fabric's limit (or no prediction) and no
    /// finding; 1 a range below it, values nccl-tests found wrong, a run cut short, or a
    /// finding of the output or its NCCL lines (a job that failed to start among them); 2
    /// nothing read.
    #[command(
        verbatim_doc_comment,
        after_help = TESTS_EXAMPLES,
        after_long_help = format!("{TESTS_EXAMPLES}\n\n{}", findings_help())
    )]
    Tests {
        /// nccl-tests output files (`-` for stdin).
        #[arg(required = true, value_name = "FILE", value_hint = ValueHint::FilePath)]
        files: Vec<PathBuf>,
        /// The job's servers when a file does not list its ranks: a Slurm hostlist or @FILE.
        #[arg(long, value_name = "HOSTLIST")]
        hosts: Option<String>,
        /// The collective when a file does not say it (all_reduce, all_gather, alltoall...).
        #[arg(long, value_parser = perf::op_named)]
        op: Option<String>,
        /// The job's NCCL_DEBUG=INFO log (repeatable: one file per rank): its findings
        /// explain a run below the fabric's limit.
        #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath)]
        log: Vec<PathBuf>,
        /// Also write the chart of measured against predicted busbw as SVG to FILE.
        #[arg(long, value_name = "FILE", value_hint = ValueHint::AnyPath)]
        plot: Option<PathBuf>,
        /// Each HCA's rate (4xHDR, 4xNDR, 400G).
        #[arg(long, value_name = "RATE", value_parser = rate::parse_rate, help_heading = WITHOUT_FABRIC)]
        rate: Option<f64>,
        /// HCAs per server the job uses (default: as its NCCL lines show, else 1).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64), help_heading = WITHOUT_FABRIC)]
        nics: Option<u16>,
        /// The servers' `ibscope host --json` documents (repeatable; concatenated or one
        /// per line): their ports' rates.
        #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath, help_heading = WITHOUT_FABRIC)]
        host_json: Vec<PathBuf>,
        /// Do not look for a fabric: report the measured curves alone.
        #[arg(long)]
        no_fabric: bool,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// A job's NCCL_DEBUG=INFO log: ranks, hosts, HCAs and channels, checked, and the links
    /// its traffic crosses.
    ///
    /// Reads one file per rank or a merged log, any order, with launcher prefixes: the
    /// NCCL version, NCCL_* settings, each process's network devices (NET/IB : Using),
    /// ranks to host and GPU (cudaDev, busId), rings and trees, and every channel's
    /// connection with its transport (NET/IB/k, PXN proxy, GDRDMA; P2P, SHM inside a
    /// server), GPU-NIC distances (any format NCCL printed), warnings and failed calls.
    /// Each finding (listed below the options, with its fix) cites the lines that show it
    /// (FILE:LINE). Rails exist where a server lists several HCAs of one link layer, one
    /// per GPU of the job there; a setting differs only where two processes print
    /// different values.
    ///
    /// With a fabric (live, or --topology with routes), each [send] between servers is
    /// placed from the sender's HCA along the forwarding tables to the receiver's, and
    /// every link crossed is listed with the ring and tree channels crossing it and the
    /// fabric's findings at its ends (live: counters too), those with findings first.
    ///
    /// Exit code: 0 nothing found; 1 findings (a job that failed to start among them), or
    /// a crossed link with findings; 2 nothing read.
    #[command(
        verbatim_doc_comment,
        after_help = LOG_EXAMPLES,
        after_long_help = format!("{LOG_EXAMPLES}\n\n{}", findings_help())
    )]
    Log {
        /// NCCL_DEBUG=INFO logs (`-` for stdin).
        #[arg(required = true, value_name = "FILE", value_hint = ValueHint::FilePath)]
        files: Vec<PathBuf>,
        /// On a live fabric: read every port's counters twice, S seconds apart, and name
        /// the error counters that rose on the links the job crosses (run it while the job
        /// runs).
        #[arg(long, value_name = "S", conflicts_with = "no_fabric")]
        interval: Option<f64>,
        /// Do not look for a fabric: the log's own checks only.
        #[arg(long)]
        no_fabric: bool,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
}

/// The heading of what predicts a run where no fabric does.
const WITHOUT_FABRIC: &str = "Without a fabric (the HCAs' rate)";

const TESTS_EXAMPLES: &str = "Examples:\n  ibscope nccl tests all_reduce_perf.out\n  ibscope nccl tests slurm-1234.out --log nccl-debug.log --plot busbw.svg\n  ibscope nccl tests run.txt --rate 4xNDR --nics 8\n  ibscope nccl tests run.txt --host-json hosts.jsonl\n  ibscope --topology fabric.json nccl tests run.txt --hosts gpu-[0001-0016] --op all_reduce\n  ibscope nccl tests run.txt --json | jq '.runs[].judgement.ranges'";
const LOG_EXAMPLES: &str = "Examples:\n  ibscope nccl log nccl-debug.log\n  ibscope nccl log logs/rank-*.log --json | jq '.findings'\n  ibscope --topology fabric.json nccl log job.log";

/// The findings of `nccl tests` and `nccl log`, each with its fix.
fn findings_help() -> String {
    kinds_help("Findings (nccl-* kinds)", Scope::Job)
}

/// A file (or `-`, standard input) read whole through `ibscope_topo::input`, and the name
/// it goes by in the report; `what` names it in errors.
fn read_input(path: &Path, what: &str) -> Result<(String, String)> {
    let text = ibscope_topo::input::read_text(path, what)?;
    let name = match ibscope_topo::input::is_stdin(path) {
        true => "stdin".to_string(),
        false => path.display().to_string(),
    };
    Ok((name, text))
}

/// The fabric to put the evidence beside, with its hosts and findings; `None` (said on
/// stderr) when none is reachable. A --topology that cannot be read is an error.
struct FabricContext {
    fabric: Fabric,
    hosts: Hosts,
    findings: Vec<Finding>,
    deltas: Vec<ibscope_topo::counters::PortDelta>,
}

impl FabricContext {
    /// The fabric as the reports take it.
    fn beside(&self) -> Beside<'_> {
        Beside {
            fabric: &self.fabric,
            hosts: &self.hosts,
            findings: &self.findings,
            deltas: &self.deltas,
        }
    }
}

fn fabric(
    g: &Global,
    no_fabric: bool,
    with_findings: bool,
    interval: Option<Duration>,
) -> Result<Option<FabricContext>> {
    if no_fabric {
        return Ok(None);
    }
    let names = crate::fabric::names(g)?;
    let (fabric, mut engine) = if let Some(path) = &g.topology {
        (crate::fabric::load_file(path)?, None)
    } else {
        match crate::fabric::open_engine(g) {
            Ok(mut e) => (
                crate::fabric::discover_live(&mut e, DiscoverOptions { read_lft: true })?,
                Some(e),
            ),
            Err(e) => {
                eprintln!("ibscope: no fabric ({e:#}): the evidence alone, without routes");
                return Ok(None);
            }
        }
    };
    let hosts = Hosts::group(&fabric, names.as_ref());
    let findings = if with_findings {
        let thresholds = crate::fabric::thresholds(g, None)?;
        super::check::evaluate(
            &fabric,
            names.as_ref(),
            &HealthOptions::default(),
            &thresholds,
            engine.as_mut(),
            CounterReads::Screened,
        )
        .findings
    } else {
        Vec::new()
    };
    let deltas = match (interval, engine.as_mut()) {
        (Some(i), Some(e)) => {
            let deltas = ibscope_topo::counters::changes_over(e, &fabric, names.as_ref(), i);
            e.ensure_connected()?;
            deltas
        }
        (Some(_), None) => bail!("--interval reads counters of the live fabric, not of --topology"),
        _ => Vec::new(),
    };
    Ok(Some(FabricContext {
        fabric,
        hosts,
        findings,
        deltas,
    }))
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    match &a.command {
        NcclCommand::Tests { .. } => tests(g, &a.command),
        NcclCommand::Log {
            files,
            interval,
            no_fabric,
            json,
        } => {
            let interval = match interval {
                Some(s) if !(s.is_finite() && *s > 0.0 && *s <= 3600.0) => {
                    bail!("--interval must be a number of seconds above 0 (at most 3600)")
                }
                Some(s) => Some(Duration::from_secs_f64(*s)),
                None => None,
            };
            let log = read_logs(files)?;
            let ctx = fabric(g, *no_fabric, true, interval)?;
            let beside = ctx.as_ref().map(FabricContext::beside);
            let r = report::log_report(&log, beside.as_ref());
            let crossed_faults = r.placement.as_ref().is_some_and(|p| {
                p.links
                    .iter()
                    .any(|l| !l.findings.is_empty() || !l.counter_rises.is_empty())
            });
            let code = crate::output::verdict(if r.findings.is_empty() && !crossed_faults {
                exit::OK
            } else {
                exit::FINDINGS
            });
            if *json {
                crate::output::print_json(&r)?;
            } else {
                print!("{}", ibscope_nccl::text::log(&r));
            }
            Ok(ExitCode::from(code))
        }
    }
}

/// `nccl tests`: the runs judged, the output's findings and its NCCL lines'.
fn tests(g: &Global, command: &NcclCommand) -> Result<ExitCode> {
    let NcclCommand::Tests {
        files,
        hosts,
        op,
        log,
        plot,
        rate,
        nics,
        host_json,
        no_fabric,
        json,
    } = command
    else {
        unreachable!("called for nccl tests")
    };
    let hosts = hosts.as_deref().map(crate::fabric::host_list).transpose()?;
    let mut runs: Vec<PerfRun> = Vec::new();
    let mut nccl = NcclLog::default();
    for f in files {
        let (name, text) = read_input(f, "nccl-tests output")?;
        runs.extend(perf::parse(&text, &name));
        nccl.read(&text, &name);
    }
    for f in log {
        let (name, text) = read_input(f, "NCCL log")?;
        let before = (
            nccl.nccl_lines,
            nccl.bare_versions.len(),
            nccl.job_errors.len(),
        );
        nccl.read(&text, &name);
        if (
            nccl.nccl_lines,
            nccl.bare_versions.len(),
            nccl.job_errors.len(),
        ) == before
        {
            bail!(
                "no NCCL INFO line of a job in {}: is it an NCCL_DEBUG=INFO log?",
                ibscope_topo::input::display_name(f)
            );
        }
    }
    if runs.is_empty() && nccl.is_empty() {
        bail!(
            "no nccl-tests run and no NCCL line in {}: no row of measurements",
            shown(files)
        );
    }
    if runs.is_empty() && ibscope_nccl::checks::check(&nccl, None).is_empty() {
        bail!(
            "no nccl-tests run in {}, and its NCCL lines show nothing (`ibscope nccl log` \
             reads them whole)",
            shown(files)
        );
    }
    for r in &mut runs {
        if op.is_some() {
            r.op.clone_from(op);
        }
    }
    let lines = Lines {
        rate_gbps: *rate,
        nics: nics.map(usize::from),
        documents: host_documents(host_json)?,
        used: Default::default(),
    };
    let ctx = fabric(g, *no_fabric, false, None)?;
    let beside = ctx.as_ref().map(FabricContext::beside);
    let with = Judging {
        beside: beside.as_ref(),
        hosts_given: hosts.as_deref().unwrap_or(&[]),
        hints: &[],
        lines,
    };
    let r = report::tests_report(&runs, &nccl, with);
    if let Some(path) = plot {
        write_plot(path, &r.runs)?;
    }
    let code = crate::output::verdict(if r.needs_attention() {
        exit::FINDINGS
    } else {
        exit::OK
    });
    if *json {
        crate::output::print_json(&r)?;
    } else {
        for run in &r.runs {
            print!("{}", ibscope_nccl::text::run(run));
        }
        print!(
            "{}",
            ibscope_nccl::text::findings("the nccl-tests output", &r.findings)
        );
        print!(
            "{}",
            ibscope_nccl::text::findings("the job's NCCL lines", &r.log_findings)
        );
    }
    Ok(ExitCode::from(code))
}

/// NCCL_DEBUG=INFO logs; files without one NCCL INFO line of a job are refused.
fn read_logs(files: &[PathBuf]) -> Result<NcclLog> {
    let mut log = NcclLog::default();
    for f in files {
        let (name, text) = read_input(f, "NCCL log")?;
        log.read(&text, &name);
    }
    if log.is_empty() {
        bail!(
            "no NCCL INFO line of a job in {}: is it an NCCL_DEBUG=INFO log?",
            shown(files)
        );
    }
    Ok(log)
}

/// Files as messages name them.
fn shown(files: &[PathBuf]) -> String {
    let names: Vec<String> = files
        .iter()
        .map(|f| ibscope_topo::input::display_name(f))
        .collect();
    names.join(", ")
}

/// The servers' HCA ports from their `ibscope host --json` documents.
fn host_documents(files: &[PathBuf]) -> Result<Vec<ServerLinks>> {
    let mut out = Vec::new();
    for f in files {
        let text = ibscope_topo::input::read_text(f, "host document file")?;
        let name = ibscope_topo::input::display_name(f);
        let docs = ibscope_host::compare::read_documents(&name, &text)?;
        if docs.is_empty() {
            bail!("host document file {name} holds no `ibscope host --json` document");
        }
        for (i, doc) in docs.iter().enumerate() {
            out.push(rate::server_links(doc).with_context(|| {
                format!(
                    "host document file {name}: document {} names no hostname",
                    i + 1
                )
            })?);
        }
    }
    Ok(out)
}

fn write_plot(path: &Path, reports: &[RunReport]) -> Result<()> {
    let r = reports
        .iter()
        .find(|r| !r.judgement.sizes.is_empty())
        .context("no run has sizes to plot")?;
    std::fs::write(path, r.svg()).with_context(|| format!("cannot write {}", path.display()))
}
