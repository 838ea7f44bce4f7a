//! `ibscope sa`: ask the Subnet Administrator (the SM's database) for records, as saquery
//! does: whole tables (one SubnAdmGetTable each, RMPP-reassembled by the kernel) or single
//! records.

mod table;

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use ibscope_mad::engine::{Engine, Request};
use ibscope_mad::sa::{comp_mask, LinkRecord, NodeRecord, PathRecord, PortInfoRecord};
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::escape::quoted_for_terminal;
use ibscope_topo::namemap::{display_name, NameMap};
use ibscope_topo::resolve::{lid_of, resolve, NameMatch};
use ibscope_topo::{Fabric, FabricId};
use serde_json::json;

use crate::cli::{exit, Global};
use crate::cmd::sm::sa_error;
use crate::output;
use ibscope_topo::master_sm::NO_SM;
use ibscope_topo::sa_records::Record;
use ibscope_topo::sa_tables::{self, node_request, path_request, Completeness, Countable, Query};

/// Query the SA (Subnet Administration, the SM's database), as saquery does.
///
/// Without a key each query asks for the whole table in one SubnAdmGetTable; the kernel
/// reassembles the reply (RMPP) however many MADs it takes, and every record is listed.
/// When only part of a table arrives (a transport without RMPP, as under the simulator,
/// cuts the reply to one MAD), the records that came are listed, stderr says "partial: N
/// records of a table the SA says holds M" and the exit code is 1. M is the SA's own
/// count: its RMPP header, or, for a reply cut to one MAD, the records it confirms when
/// asked for each one alone (the keys come from a discovery of the fabric).
///
/// A table query waits at least 1 s per attempt (--timeout-ms when longer): the SA builds
/// the whole table before it sends the first MAD.
///
/// Exit codes: 0 every record listed, 1 partial table, 2 the query failed.
///
/// Examples:
///   ibscope sa nodes                     # every NodeRecord (saquery)
///   ibscope sa nodes --lid 12            # one (saquery NR 12)
///   ibscope sa paths                     # every PathRecord (saquery -p)
///   ibscope sa paths --src 1 --dst 12 --json
///   ibscope sa links                     # every LinkRecord (saquery LR)
///   ibscope sa ports --lid 1             # the PortInfoRecords of LID 1 (saquery PIR 1)
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[command(subcommand)]
    pub command: SaCommand,
    /// Print JSON: {"records": [...], "complete": bool, "received": N, "table_size": M}
    /// for a table (table_size null when unknown), the record itself for a single query.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(flatten)]
    pub fabric: crate::cli::FabricArgs,
}

#[derive(Debug, clap::Subcommand)]
pub enum SaCommand {
    /// NodeRecords: every node port with a LID (`saquery`), or the one behind --lid
    /// (`saquery NR LID`).
    #[command(after_help = "Examples:\n  ibscope sa nodes\n  ibscope sa nodes --lid 0x0c --json")]
    Nodes {
        /// A LID (decimal or 0x-hex), or a node by GUID or name (found by a discovery).
        #[arg(long, value_parser = parse_lid, value_name = "LID|NAME")]
        lid: Option<LidArg>,
    },
    /// PathRecords: between every pair of end ports (`saquery -p`), or the one for
    /// --src -> --dst (`saquery -p --slid SRC --dlid DST`).
    #[command(
        after_help = "Examples:\n  ibscope sa paths\n  ibscope sa paths --src 1 --dst 12\n  ibscope sa paths --src 1 --dst 12 --json"
    )]
    Paths {
        /// Source: a LID, or a port by GUID or name (found by a discovery).
        #[arg(long, value_parser = parse_lid, requires = "dst", value_name = "LID|NAME")]
        src: Option<LidArg>,
        /// Destination: a LID, or a port by GUID or name.
        #[arg(long, value_parser = parse_lid, requires = "src", value_name = "LID|NAME")]
        dst: Option<LidArg>,
    },
    /// LinkRecords: both directions of every link (`saquery LR`), or those from --lid.
    #[command(after_help = "Examples:\n  ibscope sa links\n  ibscope sa links --lid 1 --json")]
    Links {
        /// Only links leaving this LID (or the node a GUID or name gives).
        #[arg(long, value_parser = parse_lid, value_name = "LID|NAME")]
        lid: Option<LidArg>,
    },
    /// PortInfoRecords: every port the SA knows (`saquery PIR`), or those of --lid.
    #[command(after_help = "Examples:\n  ibscope sa ports\n  ibscope sa ports --lid 1")]
    Ports {
        /// Only the ports of this LID (a switch's LID names all its ports), or of the node
        /// a GUID or name gives.
        #[arg(long, value_parser = parse_lid, value_name = "LID|NAME")]
        lid: Option<LidArg>,
    },
}

/// A LID as given, or a name to find one for.
#[derive(Debug, Clone)]
pub enum LidArg {
    Lid(u16),
    Name(String),
}

fn parse_lid(s: &str) -> Result<LidArg, String> {
    match output::parse_lid(s) {
        Ok(lid) => Ok(LidArg::Lid(lid)),
        Err(_) if !s.trim().is_empty() => Ok(LidArg::Name(s.to_string())),
        Err(e) => Err(e.to_string()),
    }
}

/// LIDs for the names given, from one discovery of the fabric.
struct Lids<'a> {
    g: &'a Global,
    found: Option<(Fabric, Option<NameMap>)>,
}

impl Lids<'_> {
    fn get(&mut self, engine: &mut Engine, arg: &LidArg) -> Result<u16> {
        let name = match arg {
            LidArg::Lid(lid) => return Ok(*lid),
            LidArg::Name(name) => name,
        };
        if self.found.is_none() {
            let names = crate::fabric::names(self.g)?;
            let fabric = crate::fabric::discover_live(engine, DiscoverOptions::default())?;
            self.found = Some((fabric, names));
        }
        let Some((fabric, names)) = &self.found else {
            bail!("no fabric discovered");
        };
        let end = resolve(fabric, names.as_ref(), name, NameMatch::Exact)?.end(fabric);
        lid_of(fabric, end).with_context(|| {
            format!(
                "{} has no LID",
                quoted_for_terminal(display_name(fabric.node(end.node), names.as_ref()))
            )
        })
    }
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    // The name map is read first, as by every command that takes it: one that cannot be
    // read is said before the fabric is touched.
    crate::fabric::names(g)?;
    let mut engine = crate::fabric::open_engine(g)?;
    let sm_lid = engine.local().sm_lid;
    if sm_lid == 0 {
        bail!(NO_SM);
    }
    let mut lids = Lids { g, found: None };
    let id = crate::fabric::id_of(g, &engine);
    let json = a.json.then_some(&id);
    match &a.command {
        SaCommand::Nodes { lid: Some(lid) } => {
            let lid = lids.get(&mut engine, lid)?;
            let reply = engine
                .call(node_request(sm_lid, lid))
                .map_err(sa_error)
                .with_context(|| format!("SA NodeRecord query for LID {lid}"))?;
            print_one(&reply.decode::<NodeRecord>()?, json)
        }
        SaCommand::Nodes { lid: None } => {
            print_table(&mut engine, sm_lid, &Query::<NodeRecord>::whole(), json)
        }
        SaCommand::Paths {
            src: Some(src),
            dst: Some(dst),
        } => {
            let (src, dst) = (lids.get(&mut engine, src)?, lids.get(&mut engine, dst)?);
            let reply = engine
                .call(path_request(sm_lid, src, dst))
                .map_err(sa_error)
                .with_context(|| format!("SA PathRecord query for LID {src} -> LID {dst}"))?;
            let rec = reply.decode::<PathRecord>()?;
            if a.json {
                output::print_fabric_json(Some(&id), &rec.to_json())?;
            } else {
                output::print_fields(&rec.to_json(), 0);
            }
            Ok(ExitCode::SUCCESS)
        }
        SaCommand::Paths { .. } => {
            print_table(&mut engine, sm_lid, &Query::<PathRecord>::whole(), json)
        }
        SaCommand::Links { lid } => {
            let lid = lid.as_ref().map(|l| lids.get(&mut engine, l)).transpose()?;
            let query = Query {
                mask: lid.map_or(0, |_| comp_mask::link_record::FROM_LID),
                template: LinkRecord {
                    from_lid: lid.unwrap_or(0),
                    ..Default::default()
                },
                lid,
            };
            print_table(&mut engine, sm_lid, &query, json)
        }
        SaCommand::Ports { lid } => {
            let lid = lid.as_ref().map(|l| lids.get(&mut engine, l)).transpose()?;
            let query = Query {
                mask: lid.map_or(0, |_| comp_mask::port_info_record::ENDPORT_LID),
                template: PortInfoRecord {
                    endport_lid: lid.unwrap_or(0),
                    ..Default::default()
                },
                lid,
            };
            print_table(&mut engine, sm_lid, &query, json)
        }
    }
}

/// `json`: the fabric of the JSON document, when JSON is asked for.
fn print_one<R: Record>(rec: &R, json: Option<&FabricId>) -> Result<ExitCode> {
    if let Some(fabric) = json {
        output::print_fabric_json(Some(fabric), &rec.to_json())?;
    } else {
        println!("{}", rec.line());
    }
    Ok(ExitCode::SUCCESS)
}

/// List a table; exit 1 (and say so on stderr) when only part of it arrived. `json`: the
/// fabric of the JSON document, when JSON is asked for.
fn print_table<R: Record + Countable>(
    engine: &mut Engine,
    sm_lid: u16,
    query: &Query<R>,
    json: Option<&FabricId>,
) -> Result<ExitCode> {
    let listing = sa_tables::list(engine, sm_lid, query, |engine| {
        crate::fabric::discover_live(engine, DiscoverOptions { read_lft: false })
            .map_err(|e| format!("{e:#}"))
    })?;
    // What the records need to be read right (a switch's port 0 for its other ports'
    // speeds): asked for one by one; one the SA does not have is left out.
    let context: Vec<R> = R::context_wanted(&listing.records)
        .into_iter()
        .filter_map(|(mask, template)| {
            let reply = engine.call(Request::sa_get(sm_lid, mask, &template)).ok()?;
            reply.decode::<R>().ok()
        })
        .collect();
    engine.ensure_connected()?;
    let received = listing.records.len();
    let (complete, table_size) = match &listing.completeness {
        Completeness::Complete => (true, Some(received)),
        Completeness::Partial { table_size, .. } => (false, Some(*table_size)),
        Completeness::Unknown { .. } => (false, None),
    };
    let view = R::table_view(&listing.records, &context);
    let code = output::verdict(if complete { exit::OK } else { exit::FINDINGS });
    if let Some(fabric) = json {
        let v = json!({
            "records": view.iter().map(|(v, _)| v).collect::<Vec<_>>(),
            "complete": complete,
            "received": received,
            "table_size": table_size,
        });
        output::print_fabric_json(Some(fabric), &v)?;
    } else {
        for (_, line) in &view {
            println!("{line}");
        }
    }
    if let Some(line) = table::partial_message(received, &listing.completeness) {
        eprintln!("{line}");
    }
    Ok(ExitCode::from(code))
}
