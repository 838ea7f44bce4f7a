//! `ibscope route`: what the forwarding tables the SM programmed make traffic do.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::escape::for_terminal;
use ibscope_topo::resolve::{lid_of, resolve, NameMatch};
use ibscope_topo::routing::{self, CheckOptions, Pattern};
use ibscope_topo::{End, Fabric};

use crate::cli::{exit, Global};
use crate::output;

/// Routing analysis from the switches' linear forwarding tables (read live, or from a JSON
/// snapshot taken with `ibscope discover --lft --format json`).
///
/// Examples:
///   ibscope route check                                  # black holes, loops, credit loops
///   ibscope route trace gpu-node-07 gpu-node-12          # the path one flow takes
///   ibscope route load --pattern ring job-hosts.txt      # the slowest link of a job's ring
///   ibscope discover --lft --format json -o fabric.json && ibscope --topology fabric.json route check
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(subcommand)]
    pub command: RouteCommand,
    /// Print JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum RouteCommand {
    /// A switch's LinearForwardingTable with named destinations (the ibroute equivalent).
    #[command(
        after_help = "Examples:\n  ibscope route dump sw-leaf-1\n  ibscope route dump 0x0002c90300a1b2c3 --json"
    )]
    Dump {
        /// Switch: LID, GUID or name.
        switch: String,
    },
    /// The hop-by-hop path from SRC to DST (the ibtracert equivalent).
    ///
    /// SRC and DST are LIDs, GUIDs or names. Where the path breaks, the error names the
    /// switch and port, and the exit code is 1.
    #[command(
        after_help = "Examples:\n  ibscope route trace gpu-node-07 gpu-node-12\n  ibscope route trace 12 47 --json"
    )]
    Trace { src: String, dst: String },
    /// Check every route: unreachable destinations, black holes, forwarding loops, hop
    /// counts, route balance per link and layer, and credit loops (cycles in the channel
    /// dependency graph, one VL). Exit 0 clean, 1 findings.
    #[command(
        after_help = "Examples:\n  ibscope route check\n  ibscope --topology fabric.json route check --json"
    )]
    Check,
    /// Place a collective's flows on the actual routes and predict its bandwidth.
    ///
    /// Flows: ring = host i -> host i+1 (in the order given, wrapping), as one NCCL ring
    /// channel; pairs = 0->1, 2->3, ...; all-to-all = every ordered pair. Each directed
    /// link's capacity is width x lane data rate of its active speed; flows sharing links get
    /// max-min fair shares (progressive filling), so each flow's rate is exact for this
    /// model. For a ring all-reduce the bus bandwidth is bounded by the slowest ring flow:
    /// `ring_allreduce_busbw_gbps`. The hottest links are the ones to fix.
    #[command(
        after_help = "Examples:\n  ibscope route load --pattern ring job-hosts.txt    # hosts in NCCL ring order\n  ibscope route load --pattern ring --hosts gpu-01,gpu-02,gpu-03,gpu-04\n  ibscope route load --pattern all-to-all --json"
    )]
    Load {
        #[arg(long, value_parser = parse_pattern)]
        pattern: Pattern,
        /// Hosts in ring order, comma-separated (LIDs, GUIDs or names); default: every CA
        /// port in LID order. May also be given in FILE.
        #[arg(long, value_delimiter = ',')]
        hosts: Vec<String>,
        /// A file of hosts, one per line (# comments).
        file: Option<PathBuf>,
    },
}

fn parse_pattern(s: &str) -> Result<Pattern, String> {
    s.parse()
}

/// Why routing analysis cannot run on a fabric whose switches' tables were not read.
pub const NO_FORWARDING_TABLES: &str =
    "this topology has no forwarding tables (discover with --lft)";

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    let names = crate::fabric::names(g)?;
    let fabric = crate::fabric::load(g, DiscoverOptions { read_lft: true })?;
    if !fabric.has_forwarding_tables() {
        // A topology file (ibnetdiscover text, or a snapshot taken without --lft): every
        // route would "break" at the first switch.
        bail!(NO_FORWARDING_TABLES);
    }
    let names = names.as_ref();
    match &a.command {
        RouteCommand::Dump { switch } => {
            let id = resolve(&fabric, names, switch, NameMatch::Exact)?.node();
            let node = fabric.node(id);
            if !node.is_switch() {
                bail!("{switch:?} is not a switch");
            }
            if !node.switch.as_ref().is_some_and(|s| s.has_lft()) {
                bail!(
                    "the forwarding table of {switch:?} ({}) was not read",
                    ibscope_mad::codes::guid::text(node.guid)
                );
            }
            if a.json {
                output::print_json(&serde_json::json!({
                    "switch": routing::NodeRef::new(&fabric, id),
                    "lid": node.lid(),
                    "entries": routing::dump(&fabric, id),
                }))?;
            } else {
                print!(
                    "{}",
                    for_terminal_lines(&routing::format_ibroute_like(&fabric, id))
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        RouteCommand::Trace { src, dst } => {
            let src_end = resolve(&fabric, names, src, NameMatch::Exact)?.end(&fabric);
            let dst_end = resolve(&fabric, names, dst, NameMatch::Exact)?.end(&fabric);
            let dst_lid =
                lid_of(&fabric, dst_end).with_context(|| format!("{dst:?} has no LID"))?;
            trace(&fabric, src_end, dst_lid, a.json)
        }
        RouteCommand::Check => {
            let report = routing::check(&fabric, &CheckOptions::default());
            if a.json {
                output::print_json(&report)?;
            } else {
                print_check(&report);
            }
            Ok(ExitCode::from(if report.is_clean() {
                exit::OK
            } else {
                exit::FINDINGS
            }))
        }
        RouteCommand::Load {
            pattern,
            hosts,
            file,
        } => {
            let mut list = hosts.clone();
            if let Some(f) = file {
                let text = std::fs::read_to_string(f)
                    .with_context(|| format!("cannot read host list {}", f.display()))?;
                list.extend(
                    text.lines()
                        .map(|l| l.split('#').next().unwrap_or("").trim())
                        .filter(|l| !l.is_empty())
                        .map(str::to_string),
                );
            }
            let ends: Vec<End> = if list.is_empty() {
                routing::default_hosts(&fabric)
            } else {
                list.iter()
                    .map(|h| Ok(resolve(&fabric, names, h, NameMatch::Exact)?.end(&fabric)))
                    .collect::<Result<_>>()?
            };
            let report = routing::load(&fabric, *pattern, &ends)?;
            if a.json {
                output::print_json(&report)?;
            } else {
                print_load(&report);
            }
            Ok(ExitCode::from(if report.flows_unroutable == 0 {
                exit::OK
            } else {
                exit::FINDINGS
            }))
        }
    }
}

fn for_terminal_lines(text: &str) -> String {
    text.lines().map(|l| for_terminal(l) + "\n").collect()
}

fn trace(fabric: &Fabric, src: End, dst_lid: u16, json: bool) -> Result<ExitCode> {
    let partial = routing::trace_partial(fabric, src, dst_lid);
    if json {
        let result = routing::trace(fabric, src, dst_lid);
        let value = match &result {
            Ok(path) => serde_json::to_value(path)?,
            Err(e) => serde_json::json!({
                "dst_lid": dst_lid,
                "hops": partial.hops,
                "error": e,
                "message": e.to_string(),
            }),
        };
        output::print_json(&value)?;
    } else {
        for (i, hop) in partial.hops.iter().enumerate() {
            let inp = hop
                .in_port
                .map(|p| format!("in {p:>3}"))
                .unwrap_or_else(|| "      ".into());
            let out = hop
                .out_port
                .map(|p| format!("out {p:>3}"))
                .unwrap_or_else(|| "       ".into());
            println!(
                "{i:>3}  {inp}  {out}  {} {:#018x} {}",
                hop.node.kind.as_str(),
                hop.node.guid,
                for_terminal(&hop.node.name)
            );
        }
        if let Some(e) = &partial.error {
            println!(
                "route to LID {dst_lid} breaks: {}",
                for_terminal(&e.to_string())
            );
        }
    }
    Ok(ExitCode::from(if partial.error.is_none() {
        exit::OK
    } else {
        exit::FINDINGS
    }))
}

fn print_check(r: &routing::RouteReport) {
    println!(
        "{} sources, {} destinations ({} CA, {} switch), {} pairs: {} ok, {} broken, {} looping",
        r.sources,
        r.destinations,
        r.ca_destinations,
        r.switch_destinations,
        r.pairs,
        r.pairs_ok,
        r.pairs_broken,
        r.pairs_looping
    );
    println!("hops: max {}, mean {:.2}", r.max_hops, r.mean_hops);
    // The Display impls escape the fabric's names.
    for b in &r.breaks {
        println!("black hole: {b}");
    }
    for u in &r.unreachable {
        println!("unreachable: {u}");
    }
    for l in &r.loops {
        println!("forwarding loop: {l}");
    }
    println!(
        "channel dependency graph: {} channels, {} dependencies; credit loops: {}",
        r.cdg.channels, r.cdg.dependencies, r.credit_loops_found
    );
    for c in &r.credit_loops {
        println!("credit loop: {c}");
    }
    println!("route balance by layer (routes per directed link):");
    for l in &r.balance.by_layer {
        println!(
            "  layer {:<2} {:<8} {:>5} links  routes min {:>6} max {:>6} mean {:>8.1}  lids {}-{}",
            l.layer.map(|x| x.to_string()).unwrap_or_else(|| "?".into()),
            l.direction.as_str(),
            l.ports,
            l.routes_min,
            l.routes_max,
            l.routes_mean,
            l.lids_min,
            l.lids_max
        );
    }
    println!("hottest links:");
    for p in r.balance.hottest.iter().take(5) {
        println!(
            "  {:>6} routes  {} -> {}",
            p.routes,
            for_terminal(&p.from.to_string()),
            for_terminal(&p.to.to_string())
        );
    }
    for u in &r.balance.lft_unbalanced {
        println!("unbalanced LFT: {u}");
    }
    for n in &r.notes {
        println!("note: {}", for_terminal(n));
    }
}

fn print_load(r: &routing::LoadReport) {
    println!(
        "{} pattern over {} hosts: {} flows ({} unroutable), {} links used, at most {} flows on one link",
        r.pattern, r.hosts, r.flows_total, r.flows_unroutable, r.links_used, r.max_flows_per_link
    );
    let gbps = |v: Option<f64>| {
        v.map(|x| format!("{x:.1} Gb/s"))
            .unwrap_or_else(|| "unknown".into())
    };
    println!(
        "per-flow rate: min {}, mean {}, max {}",
        gbps(r.min_flow_gbps),
        gbps(r.mean_flow_gbps),
        gbps(r.max_flow_gbps)
    );
    if r.pattern == Pattern::Ring {
        println!(
            "predicted ring all-reduce bus bandwidth: {}",
            gbps(r.ring_allreduce_busbw_gbps)
        );
    }
    println!("hottest links:");
    for l in &r.hottest_links {
        println!(
            "  {:>4} flows  capacity {:>12}  {}",
            l.flows,
            gbps(l.capacity_gbps),
            for_terminal(&l.channel.to_string())
        );
    }
    println!("model: {}", r.model);
}
