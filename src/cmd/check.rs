//! `ibscope check`: one health report of the whole fabric, with an exit code for scripts.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::ValueHint;
use ibscope_topo::cable_reads::{FabricModules, ModuleReadMode, ReadCounts};
use ibscope_topo::counters::{self, Thresholds};
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::findings::{self, CounterReads, Evaluation};
use ibscope_topo::health::{HealthOptions, Rate};
use ibscope_topo::hosts::planes::PlaneView;
use ibscope_topo::hosts::Hosts;
use serde::Serialize;

use ibscope_topo::escape::for_terminal;
use ibscope_topo::FabricId;

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
/// /etc/rdma/error_thresholds, when present (see `ibscope config show`). --thresholds FILE
/// takes ibqueryerrors' --threshold-file format:
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
/// Hosts and rails (GPU clusters): CAs are grouped into servers by the hostname in their
/// NodeDescription (rdma-ndd's "%h %d": `gpu-0042 mlx5_3`), each HCA's rail is its
/// device index (mlx5_3: rail 3), checked against the leaf it is cabled to (the rail of
/// most HCAs on that leaf). A server lacking a rail most servers have, or with it not
/// Active, is rail-down; a rail slower than the server's others is rail-slow; an HCA on a
/// leaf of another rail is rail-misaligned; two HCAs each cabled where the other belongs
/// are hcas-swapped; with --hosts, each listed host no CA names is host-missing. Each
/// names the host, rail, HCA and the switch port to fix. See `ibscope hosts`.
///
/// Cables (--cables, with --access-register): every port's pluggable module is read and
/// judged against its own thresholds and its link's rate (the cable-* findings, at their
/// ports), as `ibscope cables` reads them; each read is a SubnSet(AccessRegister).
///
/// With --topology FILE only the links, ports and hosts are checked (no counters, no SM).
///
/// Several fabrics (-C all, a list, see -C): each is checked in turn; in text every line
/// starts with the fabric's name, in JSON each report names its fabric and every finding
/// carries "fabric" ({"healthy", "fabrics": [...], "failed": [...]}). The exit code is
/// the worst of all: 2 if one could not be checked, else 1 if one has findings.
///
/// Planes: a host CA port GUID found in more than one of the fabrics is one multi-plane
/// HCA port seen in each of its planes. A plane whose port is not Active, is missing
/// (its link is down, so that plane's sweep never reached it) or runs slower than the
/// port's other planes is planes-disagree, on that plane's fabric, naming the host, rail,
/// HCA and the switch port to fix (printed after every fabric's own lines; --no-hosts
/// leaves planes out).
///
/// Exit code: 0 healthy, 1 findings, 2 could not run.
///
/// Examples:
///   ibscope check
///   ibscope check --thresholds /etc/ibscope/thresholds.conf --json
///   ibscope check --expect 4xHDR
///   ibscope check --hosts gpu-[0001-0064]         # and name every server that is missing
///   ibscope check --hosts @/etc/ibscope/hosts --json
///   ibscope -C all check                   # every fabric this host reaches
///   ibscope check --cables --access-register   # and every port's module judged
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Threshold file: `CounterName=value` lines, `#` comments.
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath)]
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
    /// Hosts the fabric should have: a Slurm hostlist (gpu-[0001-0064],login[1-2]) or
    /// @FILE; each one no CA names is a host-missing finding.
    #[arg(long, value_name = "HOSTLIST")]
    pub hosts: Option<String>,
    /// Leave out the host and rail findings (a fabric that is no GPU cluster).
    #[arg(long, conflicts_with = "hosts")]
    pub no_hosts: bool,
    /// Compare the fabric with a cabling plan instead: a CSV file with the header
    /// a_node,a_port,z_node,z_port and optional columns rate, part_number and length_m
    /// (nodes by NodeDescription, name-map name or GUID; `discover --format plan` writes
    /// one), or an ibnetdiscover file or JSON snapshot. Reports every cable missing,
    /// extra, on the wrong port or node, or below the planned rate, and with --cables
    /// every module of another part number or cable of another length (wrong-cable);
    /// exit 1 on any.
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub plan: Option<PathBuf>,
    /// Also report links that flap (link-flapping: down twice or more within 10 minutes,
    /// or LinkDowned up by more than 10 within 24 hours; the thresholds file's flap.downs,
    /// flap.window and flap.link-downed-per-day) from the event journal `serve --journal`
    /// writes.
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub journal: Option<PathBuf>,
    /// Also read every port's pluggable module and judge it (the cable-* findings, each
    /// at its port): needs --access-register, since each read is a SubnSet (see `ibscope
    /// cables`). About 5 MADs per 128 bytes of module memory, 10-25 per module.
    #[arg(long, requires = "access_register", conflicts_with = "topology")]
    pub cables: bool,
    /// Allow the SubnSet(AccessRegister) MADs --cables sends: register queries (PLIB,
    /// PMLP, MCIA) carried in a Set as NVIDIA's tools carry them; they write nothing.
    #[arg(long)]
    pub access_register: bool,
    #[command(flatten)]
    pub fabric: crate::cli::FabricArgs,
    #[command(flatten)]
    pub saved: crate::cli::TopologyArgs,
}

#[derive(Debug, Serialize)]
struct Report {
    /// The fabric checked (absent with --topology).
    #[serde(skip_serializing_if = "Option::is_none")]
    fabric: Option<FabricId>,
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
    /// With --journal: lines of the journal that were not events (skipped).
    #[serde(skip_serializing_if = "Option::is_none")]
    journal_skipped_lines: Option<usize>,
    /// Hosts found (CAs grouped by NodeDescription; see `ibscope hosts`), 0 with --no-hosts.
    hosts: usize,
    /// Rails their HCAs are on.
    rails: Vec<u8>,
    findings: Vec<findings::Finding>,
    /// With --cables: how the ports' module reads went.
    #[serde(skip_serializing_if = "Option::is_none")]
    cables: Option<CableReads>,
    /// With --no-screen: every port's counters, as `ibscope counters --format json` has them.
    #[serde(skip_serializing_if = "Option::is_none")]
    ports: Option<Vec<counters::PortSample>>,
}

/// How the ports' module reads of `check --cables` went: the ports asked for, read, with
/// empty cages, not read, and the SubnSet(AccessRegister) MADs sent.
#[derive(Debug, Serialize)]
struct CableReads {
    #[serde(flatten)]
    counts: ReadCounts,
    mads: u64,
}

impl CableReads {
    fn of(m: &FabricModules) -> CableReads {
        CableReads {
            counts: m.counts(),
            mads: m.mads_sent,
        }
    }
}

/// `check -C all --json`: every fabric's report, and those that could not be checked.
#[derive(Debug, Serialize)]
struct MultiReport {
    healthy: bool,
    fabrics: Vec<Report>,
    /// Fabrics that could not be opened or checked: name and error.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    failed: Vec<crate::fabric_set::Failed>,
}

/// What `check` reads before it looks at a fabric: every input it was given, so that one
/// that cannot be read stops it before the fabric is touched.
struct Inputs {
    names: Option<ibscope_topo::namemap::NameMap>,
    health: HealthOptions,
    thresholds: Thresholds,
    /// The events of --journal and how many of its lines were not events.
    journal: Option<(Vec<ibscope_topo::journal::Event>, usize)>,
}

impl Inputs {
    fn read(g: &Global, a: &Args) -> Result<Inputs> {
        let thresholds = crate::fabric::thresholds(g, a.thresholds.as_deref())?;
        let names = crate::fabric::names(g)?;
        let expected_hosts = a
            .hosts
            .as_deref()
            .map(crate::fabric::host_list)
            .transpose()?;
        let journal = match &a.journal {
            Some(path) => {
                let (events, skipped) = ibscope_topo::journal::read(path)?;
                if let Some(warning) = ibscope_topo::journal::skipped_warning(path, skipped) {
                    eprintln!("{warning}");
                }
                Some((events, skipped))
            }
            None => None,
        };
        Ok(Inputs {
            names,
            health: HealthOptions {
                expect: a.expect,
                expected_hosts,
                skip_hosts: a.no_hosts,
            },
            thresholds,
            journal,
        })
    }
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    if let Some(plan) = &a.plan {
        return super::check_plan::run(g, plan, a.json, a.cables);
    }
    let inputs = Inputs::read(g, a)?;
    let names = inputs.names.as_ref();
    if let Some(path) = &g.topology {
        let fabric = crate::fabric::load_file(path)?;
        let (out, _) = check_one(&fabric, None, &inputs, a, fabric.id.as_ref())?;
        let code = exit_of(&out);
        print_one(a, &out, None)?;
        return Ok(code);
    }
    let mut reports = Vec::new();
    let mut swept = Vec::new();
    let mut ran = crate::fabric_set::each(g, |opened, multi| {
        let mut fabric =
            crate::fabric::discover_live(&mut opened.engine, DiscoverOptions::default())?;
        fabric.id = Some(opened.id.clone());
        let (mut out, hosts) = check_one(
            &fabric,
            Some(&mut opened.engine),
            &inputs,
            a,
            Some(&opened.id),
        )?;
        if multi {
            for f in &mut out.findings {
                f.fabric = Some(opened.id.clone());
            }
        }
        let code = exit_of_code(&out);
        if !(multi && a.json) {
            print_one(a, &out, multi.then_some(&opened.id))?;
        }
        reports.push(out);
        if multi {
            swept.push((opened.id.name.clone(), fabric, hosts));
        }
        Ok(code)
    })?;
    // Planes are host ports: --no-hosts leaves them out with the other host checks.
    let planes = if a.no_hosts {
        Vec::new()
    } else {
        plane_findings(&swept, names)
    };
    if !planes.is_empty() {
        ran.worst = ran.worst.max(crate::output::verdict(exit::FINDINGS));
    }
    for f in planes {
        if !a.json {
            let name = f.fabric_name().unwrap_or_default();
            println!("{}: {}", for_terminal(name), f.text_line());
        }
        let of = |r: &&mut Report| r.fabric.as_ref().map(|i| i.name.as_str()) == f.fabric_name();
        if let Some(r) = reports.iter_mut().find(|r| of(r)) {
            r.healthy = false;
            r.findings.push(f);
        }
    }
    if crate::fabric_set::is_multi(g.ca.as_deref()) && a.json {
        let failed = ran.failed.clone();
        let doc = MultiReport {
            healthy: failed.is_empty() && reports.iter().all(|r| r.healthy),
            fabrics: reports,
            failed,
        };
        crate::output::print_json(&doc)?;
    }
    Ok(ran.exit_code())
}

/// A report's exit code, recorded as the command's verdict before it is printed.
fn exit_of_code(r: &Report) -> u8 {
    crate::output::verdict(if r.healthy { exit::OK } else { exit::FINDINGS })
}

fn exit_of(r: &Report) -> ExitCode {
    ExitCode::from(exit_of_code(r))
}

/// Evaluate one fabric (through `engine` when live) into its report.
fn check_one(
    fabric: &ibscope_topo::Fabric,
    engine: Option<&mut ibscope_mad::engine::Engine>,
    inputs: &Inputs,
    a: &Args,
    id: Option<&FabricId>,
) -> Result<(Report, Hosts)> {
    let reads = if a.no_screen {
        CounterReads::PerPort
    } else {
        CounterReads::Screened
    };
    let live = engine.is_some();
    let mut engine = engine;
    let mut eval = evaluate_with_modules(
        fabric,
        inputs.names.as_ref(),
        &inputs.health,
        &inputs.thresholds,
        engine.as_deref_mut(),
        reads,
        module_read_mode(a.cables),
    );
    if let Some(e) = &engine {
        // Lost mid-sweep: one message, not a finding per unreadable port.
        e.ensure_connected()?;
    }
    if let Some((events, _)) = &inputs.journal {
        let limits = inputs.thresholds.flap;
        eval.findings.extend(ibscope_topo::journal::flapping(
            events,
            limits,
            Some(fabric),
        ));
    }
    let links_without_rate = eval
        .health
        .links
        .iter()
        .filter(|l| l.active.is_none())
        .count();
    let started = std::time::Instant::now();
    let mut sample = eval.sample;
    if let Some(s) = sample.as_mut() {
        eval.hosts.annotate_sample(s);
    }
    // What the host and rail checks cost (bench/hosts.sh reads this line).
    tracing::debug!(
        hosts = eval.hosts.len(),
        ms = format!(
            "{:.3}",
            (eval.hosts_duration + started.elapsed()).as_secs_f64() * 1e3
        ),
        "hosts grouped and rails checked"
    );
    let counters_checked = sample.is_some() && live;
    let ports_screened: usize = eval.screened.iter().map(|s| s.ports.len()).sum();
    let ports_sampled = sample.as_ref().map_or(0, |s| s.ports.len()) + ports_screened;
    for d in &eval.drilled {
        tracing::debug!(switch = %d.at.report_text(), reason = %d.reason, "all-ports sum: ports read one by one");
    }
    let report = Report {
        fabric: id.cloned(),
        healthy: eval.findings.is_empty(),
        nodes: fabric.node_count(),
        links: fabric.link_count(),
        ports_sampled,
        counters_checked,
        sm_checked: counters_checked,
        screening: counters_checked && reads == CounterReads::Screened,
        switches_screened: eval.screened.len(),
        ports_screened,
        counter_mads: sample.as_ref().map_or(0, |s| s.mads_sent),
        links_without_rate,
        journal_skipped_lines: inputs.journal.as_ref().map(|(_, skipped)| *skipped),
        hosts: eval.hosts.len(),
        rails: eval.hosts.rails(),
        findings: eval.findings,
        cables: eval.modules.as_ref().map(CableReads::of),
        ports: match (reads, sample) {
            (CounterReads::PerPort, Some(sample)) => Some(sample.ports),
            _ => None,
        },
    };
    Ok((report, eval.hosts))
}

/// The planes-disagree findings of the fabrics swept together (name, fabric, hosts):
/// none with fewer than two.
fn plane_findings(
    swept: &[(String, ibscope_topo::Fabric, Hosts)],
    names: Option<&ibscope_topo::namemap::NameMap>,
) -> Vec<findings::Finding> {
    let views: Vec<PlaneView> = swept.iter().map(PlaneView::from).collect();
    findings::planes_disagree(&views, names).findings
}

/// One fabric's report on stdout; `fabric` names it when the command checks several (a
/// heading in JSON lines, a column in text).
fn print_one(a: &Args, out: &Report, fabric: Option<&FabricId>) -> Result<()> {
    if a.json {
        crate::output::print_json(out)?;
        return Ok(());
    }
    print_text(out, fabric);
    if out.links_without_rate > 0 && a.expect.is_none() {
        // "healthy" must not read as "no degraded link" when most rates are unknown.
        let prefix = fabric.map_or(String::new(), |f| format!("{}: ", for_terminal(&f.name)));
        println!(
            "{prefix}note: {} of {} links carry no active width/speed, so they could not be \
             compared with the fabric norm; give the rate they should run at with \
             --expect (e.g. --expect 4xHDR)",
            out.links_without_rate, out.links
        );
    }
    Ok(())
}

/// `findings::evaluate` through an engine when there is one: the counters read as `reads`
/// says and the SM the local port names. Shared by `check`, `nccl` and the TUI's live
/// source; the exporter's sweeper reads the counters and the SM itself, between its
/// checks for a stop.
pub fn evaluate(
    fabric: &ibscope_topo::Fabric,
    names: Option<&ibscope_topo::namemap::NameMap>,
    health_options: &HealthOptions,
    thresholds: &Thresholds,
    engine: Option<&mut ibscope_mad::engine::Engine>,
    reads: CounterReads,
) -> Evaluation {
    evaluate_with_modules(
        fabric,
        names,
        health_options,
        thresholds,
        engine,
        reads,
        ModuleReadMode::NotAllowed,
    )
}

/// [`evaluate`], and with a live fabric its ports' modules read as `modules` allows and
/// judged (the cable findings).
pub fn evaluate_with_modules(
    fabric: &ibscope_topo::Fabric,
    names: Option<&ibscope_topo::namemap::NameMap>,
    health_options: &HealthOptions,
    thresholds: &Thresholds,
    engine: Option<&mut ibscope_mad::engine::Engine>,
    reads: CounterReads,
    modules: ModuleReadMode,
) -> Evaluation {
    let live = engine.map(|e| {
        let sm_lid = e.local().sm_lid;
        findings::Live {
            exec: e,
            reads,
            sm_lid,
            modules,
        }
    });
    findings::evaluate(fabric, names, health_options, thresholds, live)
}

/// Whether `--cables` was given, as the mode of module reads: it requires
/// `--access-register` (clap refuses it alone).
pub fn module_read_mode(cables: bool) -> ModuleReadMode {
    if cables {
        ModuleReadMode::AccessRegister
    } else {
        ModuleReadMode::NotAllowed
    }
}

fn print_text(r: &Report, fabric: Option<&FabricId>) {
    let prefix = fabric.map_or(String::new(), |f| format!("{}: ", for_terminal(&f.name)));
    if let Some(f) = fabric {
        let identity = f.identity_text();
        if !identity.is_empty() {
            println!("{prefix}{identity}");
        }
    }
    for f in &r.findings {
        println!("{prefix}{}", f.text_line());
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
    let scope = match &r.cables {
        Some(CableReads { counts: c, .. }) => format!(
            "{scope}, {} of {} ports' modules ({} empty, {} not read: see `ibscope cables`)",
            c.read, c.ports, c.empty, c.not_read
        ),
        None => scope,
    };
    if r.healthy {
        println!(
            "{prefix}healthy: {} nodes, {} links, {scope} checked",
            r.nodes, r.links
        );
    } else {
        println!(
            "{prefix}{} finding(s): {} nodes, {} links, {scope} checked",
            r.findings.len(),
            r.nodes,
            r.links
        );
    }
}
