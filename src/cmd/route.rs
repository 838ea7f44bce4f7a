//! `ibscope route`: what the forwarding tables the SM programmed make traffic do.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::escape::{for_terminal, quoted_for_terminal};
use ibscope_topo::hosts::Hosts;
use ibscope_topo::namemap::display_name;
use ibscope_topo::resolve::{lid_of, Flow, NameMatch, Resolved, Resolver, Server};
use ibscope_topo::routing::{self, CheckOptions, Collective, ModelOptions, Pattern};
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
///   ibscope discover --lft --format json -o fabric.json && ibscope route check --topology fabric.json
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(subcommand)]
    pub command: RouteCommand,
    /// Print JSON.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(flatten)]
    pub fabric: crate::cli::FabricArgs,
    #[command(flatten)]
    pub saved: crate::cli::TopologyArgs,
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
    /// SRC and DST are LIDs, GUIDs, directed routes or names as ibscope prints them. Two
    /// servers (hostnames) are traced rail by rail, each HCA to its peer on the other
    /// server (JSON: {"traces": [...]}, each with its rail); a server and an HCA port, on
    /// that port's rail. Where a path breaks, the error names the switch and port, and the
    /// exit code is 1.
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
    /// A job's collectives on the actual routes: which link limits each, and the bus
    /// bandwidth the fabric allows it, as nccl-tests would report it.
    ///
    /// Job mode (no --pattern): the servers of --hosts (a Slurm hostlist such as
    /// gpu-[0001-0064], as `scontrol show hostnames` expands it, or @FILE; default every
    /// server; see `ibscope hosts`) in that order, one rank per HCA (one GPU per rail), on
    /// the rails of --rails. Collectives, NCCL style, every rail at once:
    ///   ring        on each rail, server i's HCA sends to server i+1's (wrapping)
    ///   tree        on each rail, two in-order binary trees over the servers, the second
    ///               shifted by one (NCCL's double binary tree), data up and down each edge
    ///   all-to-all  on each rail, every server's HCA to every other's
    /// All flows are placed on the forwarding tables the SM programmed and share each
    /// directed link's capacity (width x lane data rate) max-min fairly; every flow of a
    /// collective moves the same bytes, so the slowest flow sets its bandwidth and the
    /// link that fixed its rate is the limit.
    ///
    /// Model (alpha-beta), for S bytes per rank and N = servers x rails ranks:
    ///   T(S)  = steps x alpha + c x S / B
    ///   alpha = --step-latency-us + max link hops x --hop-latency-us
    ///   B     = the slowest flow's rate
    ///   algbw = S / T;  busbw = algbw x factor (nccl-tests' definitions)
    ///   ring all_reduce:  c = 2(N-1)/N / rails, 2(N-1) steps, factor 2(N-1)/N
    ///   tree all_reduce:  c = 1 / (2 rails), 2 x tree depth steps, factor 2(N-1)/N
    ///   alltoall:         c = 1 / servers, servers-1 steps, factor (N-1)/N
    /// With every flow at line rate L, the ring's busbw is rails x L. The curve runs from
    /// 8 B to 16 GiB, doubling (nccl-tests -b 8 -e 16G -f 2), in nccl-tests' columns
    /// (size B, count, type, redop, root, time us, algbw and busbw GB/s), to put beside
    /// its output (`ibscope nccl tests` does: per size, a verdict and the limiting link):
    /// far below the prediction, look at the hosts; at it, the fabric is the
    /// limit. Not modelled: NVLink inside a server, NCCL protocols, SHARP, congestion
    /// control, adaptive routing.
    ///
    /// Port mode (--pattern): flows between CA ports in the order given (LIDs, GUIDs or
    /// names in --hosts or FILE; default every CA port in LID order): ring = i -> i+1,
    /// pairs = 0->1, 2->3, ..., all-to-all = every ordered pair; the same placement, each
    /// flow's rate and the hottest links; a ring's busbw is its slowest flow.
    ///
    /// Exit code: 0; 1 when flows cannot be placed (a server lacks a rail's HCA, a route
    /// is broken); 2 when a listed server is not in the fabric.
    #[command(
        verbatim_doc_comment,
        after_help = "Examples:\n  ibscope route load --hosts gpu-[0001-0064]                # ring, tree, all-to-all on every rail\n  ibscope route load --hosts \"$SLURM_JOB_NODELIST\" --rails 0-3 --collective ring\n  ibscope route load --hosts @job-hosts.txt --json | jq '.collectives[].busbw'\n  ibscope route load --pattern ring --hosts 12,47,53,60    # CA ports by LID, in ring order"
    )]
    Load {
        /// Flows between CA ports instead of a job's collectives: ring, pairs, all-to-all.
        #[arg(long, value_parser = parse_pattern)]
        pattern: Option<Pattern>,
        /// The job's servers in order: a Slurm hostlist (gpu-[0001-0064],gpu-0100) or
        /// @FILE; with --pattern, CA ports (LIDs, GUIDs or names, `gpu-0001 mlx5_1` read
        /// whole). Repeatable.
        #[arg(long, value_name = "HOSTLIST")]
        hosts: Vec<String>,
        /// Rails to run on: all (every rail the servers' HCAs are on) or a list (0,1,4-7).
        #[arg(
            long,
            value_name = "all|LIST",
            default_value = "all",
            conflicts_with = "pattern"
        )]
        rails: String,
        /// Collectives to predict (comma-separated): ring, tree, all-to-all.
        #[arg(long, value_delimiter = ',', default_value = "ring,tree,all-to-all",
              value_parser = parse_collective, conflicts_with = "pattern")]
        collective: Vec<Collective>,
        /// Latency of one link hop (switch and cable), microseconds.
        #[arg(long, default_value_t = ModelOptions::default().hop_latency_us, value_name = "US")]
        hop_latency_us: f64,
        /// Software and NIC latency of one message step, microseconds.
        #[arg(long, default_value_t = ModelOptions::default().step_latency_us, value_name = "US")]
        step_latency_us: f64,
        /// Leave out the busbw curves (job mode).
        #[arg(long)]
        no_curve: bool,
        /// A file of servers (or, with --pattern, CA ports), one per line (# comments).
        #[arg(value_name = "FILE", value_hint = clap::ValueHint::FilePath)]
        file: Option<PathBuf>,
    },
}

fn parse_collective(s: &str) -> Result<Collective, String> {
    s.parse()
}

/// `all`, or rails as a list with ranges: `0,1,4-7`.
fn parse_rails(text: &str, known: &[u8]) -> Result<Vec<u8>> {
    if text == "all" {
        return Ok(known.to_vec());
    }
    let mut rails = Vec::new();
    for part in text.split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let num = |t: &str| -> Result<u8> {
            t.trim()
                .parse()
                .with_context(|| format!("--rails {text:?}: {t:?} is not a rail number"))
        };
        let (lo, hi) = (num(lo)?, num(hi)?);
        if lo > hi {
            bail!("--rails {text:?}: {lo}-{hi} runs backwards");
        }
        rails.extend(lo..=hi);
    }
    rails.sort_unstable();
    rails.dedup();
    Ok(rails)
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
    let resolver = Resolver::new(&fabric, names);
    match &a.command {
        RouteCommand::Dump { switch } => {
            let id = resolver.resolve(switch, NameMatch::Exact)?.node();
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
                output::print_fabric_json(
                    fabric.id.as_ref(),
                    &serde_json::json!({
                        "switch": routing::NodeRef::new(&fabric, id),
                        "lid": node.lid(),
                        "entries": routing::dump(&fabric, id),
                    }),
                )?;
            } else {
                print!(
                    "{}",
                    for_terminal_lines(&routing::format_ibroute_like(&fabric, id))
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        RouteCommand::Trace { src, dst } => {
            let from = resolver.resolve_any(src, NameMatch::Exact)?;
            let to = resolver.resolve_any(dst, NameMatch::Exact)?;
            let flows = resolver.flows(&from, &to)?;
            if let (Resolved::Server(a), Resolved::Server(b)) = (&from, &to) {
                for (rail, lacking) in unpaired_rails(a, b) {
                    eprintln!(
                        "rail {rail} not traced: {} has no HCA port on it (see `ibscope hosts`)",
                        quoted_for_terminal(lacking)
                    );
                }
            }
            trace_flows(&fabric, names, &flows, a.json)
        }
        RouteCommand::Check => {
            let report = routing::check(&fabric, &CheckOptions::default());
            let code = output::verdict(if report.is_clean() {
                exit::OK
            } else {
                exit::FINDINGS
            });
            if a.json {
                output::print_fabric_json(fabric.id.as_ref(), &report)?;
            } else {
                print!("{}", routing::check_text(&report));
            }
            Ok(ExitCode::from(code))
        }
        RouteCommand::Load {
            pattern,
            hosts,
            rails,
            collective,
            hop_latency_us,
            step_latency_us,
            no_curve,
            file,
        } => {
            let list = load_list(&resolver, hosts, file.as_deref())?;
            match pattern {
                Some(p) => load_pattern(&fabric, &resolver, *p, &list, a.json),
                None => {
                    let opts = ModelOptions {
                        hop_latency_us: *hop_latency_us,
                        step_latency_us: *step_latency_us,
                        ..ModelOptions::default()
                    };
                    let job = Job {
                        hosts: &list,
                        rails,
                        collectives: collective,
                        opts,
                        curve: !no_curve,
                    };
                    servers_only(&resolver, &list)?;
                    load_job(&fabric, names, &job, a.json)
                }
            }
        }
    }
}

/// The names of --hosts (each a list or @FILE) and FILE (one or more per line), read as
/// the resolver reads lists: a name with a space in it (`gpu-0001 mlx5_1`) stays whole.
fn load_list(
    resolver: &Resolver,
    hosts: &[String],
    file: Option<&std::path::Path>,
) -> Result<Vec<String>> {
    let file = file.map(|f| format!("@{}", f.display()));
    let mut list = Vec::new();
    for arg in hosts.iter().chain(file.as_ref()) {
        let (text, source) = crate::fabric::list_text(arg)?;
        let names = resolver
            .name_list(&text)
            .with_context(|| format!("{source}: not a list of names"))?;
        if names.is_empty() {
            bail!("{source}: no names");
        }
        list.extend(names);
    }
    Ok(list)
}

/// Job mode takes servers: a name of one HCA is refused with what to give instead.
fn servers_only(resolver: &Resolver, list: &[String]) -> Result<()> {
    for name in list {
        if let Ok(Resolved::Target(_)) = resolver.resolve_any(name, NameMatch::Exact) {
            bail!(
                "{}: a job runs on servers (`ibscope hosts` lists them); for flows between \
                 single HCA ports use --pattern",
                quoted_for_terminal(name)
            );
        }
    }
    Ok(())
}

/// Flows between CA ports (`--pattern`).
fn load_pattern(
    fabric: &Fabric,
    resolver: &Resolver,
    pattern: Pattern,
    list: &[String],
    json: bool,
) -> Result<ExitCode> {
    let ends: Vec<End> = if list.is_empty() {
        routing::default_hosts(fabric)
    } else {
        list.iter()
            .map(|h| Ok(resolver.resolve(h, NameMatch::Exact)?.end(fabric)))
            .collect::<Result<_>>()?
    };
    let report = routing::load(fabric, pattern, &ends)?;
    let code = output::verdict(if report.flows_unroutable == 0 {
        exit::OK
    } else {
        exit::FINDINGS
    });
    if json {
        output::print_fabric_json(fabric.id.as_ref(), &report)?;
    } else {
        print!("{}", routing::load_text(&report));
    }
    Ok(ExitCode::from(code))
}

/// What `route load` without --pattern predicts.
struct Job<'a> {
    hosts: &'a [String],
    rails: &'a str,
    collectives: &'a [Collective],
    opts: ModelOptions,
    curve: bool,
}

/// A job's collectives.
fn load_job(
    fabric: &Fabric,
    names: Option<&ibscope_topo::namemap::NameMap>,
    job: &Job,
    json: bool,
) -> Result<ExitCode> {
    let servers = routing::job_servers(&Hosts::group(fabric, names), job.hosts)?;
    let rails = parse_rails(job.rails, &servers.rails)?;
    let job_hosts = servers.hosts;
    let mut report = routing::collectives(fabric, &job_hosts, &rails, job.collectives, &job.opts);
    if !job.curve {
        for c in &mut report.collectives {
            c.curve.clear();
        }
    }
    let complete = report.collectives.iter().all(|c| c.flows_unroutable == 0);
    let code = output::verdict(if complete { exit::OK } else { exit::FINDINGS });
    if json {
        let mut value = serde_json::to_value(&report)?;
        value["host_names"] =
            serde_json::json!(job_hosts.iter().map(|h| &h.name).collect::<Vec<_>>());
        output::print_fabric_json(fabric.id.as_ref(), &value)?;
    } else {
        let names: Vec<&str> = job_hosts.iter().map(|h| h.name.as_str()).collect();
        print!("{}", routing::job_text(&report, &names));
    }
    Ok(ExitCode::from(code))
}

fn for_terminal_lines(text: &str) -> String {
    text.lines().map(|l| for_terminal(l) + "\n").collect()
}

/// The rails one of two servers has and the other lacks, with the name of the one that
/// lacks it.
fn unpaired_rails<'a>(a: &'a Server, b: &'a Server) -> Vec<(u8, &'a str)> {
    let rails = |s: &Server| -> Vec<u8> { s.hcas.iter().filter_map(|h| h.rail).collect() };
    let (ra, rb) = (rails(a), rails(b));
    let mut out: Vec<(u8, &str)> = ra
        .iter()
        .filter(|r| !rb.contains(r))
        .map(|&r| (r, b.name.as_str()))
        .chain(
            rb.iter()
                .filter(|r| !ra.contains(r))
                .map(|&r| (r, a.name.as_str())),
        )
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Trace each flow two names stand for: one, or one per rail between two servers (each
/// under a `# rail R` line; in JSON `{"traces": [...]}`, each with its rail).
fn trace_flows(
    fabric: &Fabric,
    names: Option<&ibscope_topo::namemap::NameMap>,
    flows: &[Flow],
    json: bool,
) -> Result<ExitCode> {
    let mut docs = Vec::new();
    let mut broken = false;
    for flow in flows {
        let dst_lid = lid_of(fabric, flow.dst).with_context(|| {
            format!(
                "port {} of {} has no LID",
                flow.dst.port,
                quoted_for_terminal(display_name(fabric.node(flow.dst.node), names))
            )
        })?;
        if let (Some(rail), false) = (flow.rail, json) {
            let name = |e: End| for_terminal(display_name(fabric.node(e.node), names));
            println!("# rail {rail}: {} -> {}", name(flow.src), name(flow.dst));
        }
        let (doc, ok) = trace(fabric, flow.src, dst_lid, json)?;
        broken |= !ok;
        if let Some(mut doc) = doc {
            if let (Some(rail), serde_json::Value::Object(m)) = (flow.rail, &mut doc) {
                m.insert("rail".into(), rail.into());
            }
            docs.push(doc);
        }
    }
    let code = output::verdict(if broken { exit::FINDINGS } else { exit::OK });
    if json {
        let fabric_id = fabric.id.as_ref();
        match docs.as_slice() {
            [one] => output::print_fabric_json(fabric_id, one)?,
            _ => output::print_fabric_json(fabric_id, &serde_json::json!({ "traces": docs }))?,
        }
    }
    Ok(ExitCode::from(code))
}

/// One trace: printed as text, or its JSON document; and whether it reached the LID.
fn trace(
    fabric: &Fabric,
    src: End,
    dst_lid: u16,
    json: bool,
) -> Result<(Option<serde_json::Value>, bool)> {
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
        return Ok((Some(value), partial.error.is_none()));
    }
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
    Ok((None, partial.error.is_none()))
}
