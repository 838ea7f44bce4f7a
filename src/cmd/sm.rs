//! `ibscope sm`: the master subnet manager, the sminfo equivalent.

use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use ibscope_mad::attr::{NodeDescription, SmInfo};
use ibscope_mad::engine::{Engine, MadError, Request};
use ibscope_mad::sa::{comp_mask, SmInfoRecord};
use ibscope_mad::smp::SmpRoute;
use ibscope_topo::escape::for_terminal;
use serde_json::{json, Value};

use crate::cli::Global;

/// Show the master SM the local port knows of: its LID, GUID, priority, state and
/// activity count (SMInfo read from the SM's port by LID, as sminfo does), the SM node's
/// NodeDescription, and the SA's SMInfoRecord for the same LID.
///
/// A growing activity count between two runs means the SM is alive and sweeping.
///
/// Examples:
///   ibscope sm
///   ibscope sm --json | jq .act_count     # grows while the SM sweeps
///   ibscope -C mlx5_1 -P 1 sm --no-sa      # through another CA port, SMPs only
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Skip the SA query (SMP only).
    #[arg(long)]
    pub no_sa: bool,
}

pub const NO_SM: &str = "no subnet manager: the local port's SM LID is 0 — is opensm running?";

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    if g.topology.is_some() {
        bail!("`ibscope sm` asks the live SM; it does not work on a saved topology");
    }
    let mut engine = crate::fabric::open_engine(g)?;
    let report = query(&mut engine, !a.no_sa)?;
    if a.json {
        crate::output::print_json(&report)?;
    } else {
        print_text(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// SMInfo and NodeDescription by SMP, plus the SA's SMInfoRecord when `with_sa`.
pub fn query(engine: &mut Engine, with_sa: bool) -> Result<Value> {
    let sm_lid = engine.local().sm_lid;
    if sm_lid == 0 {
        bail!(NO_SM);
    }
    let route = SmpRoute::Lid(sm_lid);
    let info = engine
        .get::<SmInfo>(&route, 0)
        .with_context(|| format!("SMInfo query to the SM at LID {sm_lid}"))?;
    // The description is a nicety: an SM whose node does not answer it is still the SM.
    let description = engine
        .get::<NodeDescription>(&route, 0)
        .ok()
        .map(|d| d.text());
    let mut report = json!({
        "lid": sm_lid,
        "guid": format!("{:#018x}", info.guid),
        "priority": info.priority,
        "state": info.state_name(),
        "state_code": info.sm_state,
        "act_count": info.act_count,
        "node_description": description,
    });
    if with_sa {
        let sa = match sa_sm_info_record(engine, sm_lid) {
            Ok(rec) => {
                let s = &rec.sm_info;
                json!({
                    "lid": rec.lid,
                    "guid": format!("{:#018x}", s.guid),
                    "priority": s.priority,
                    "state": s.state_name(),
                    "state_code": s.sm_state,
                    "act_count": s.act_count,
                })
            }
            Err(e) => json!({ "error": format!("{e:#}") }),
        };
        report["sa_record"] = sa;
    }
    Ok(report)
}

/// SubnAdmGet(SMInfoRecord) for the SM at `sm_lid`.
pub fn sa_sm_info_record(engine: &mut Engine, sm_lid: u16) -> Result<SmInfoRecord> {
    let template = SmInfoRecord {
        lid: sm_lid,
        ..Default::default()
    };
    let reply = engine
        .call(Request::sa_get(
            sm_lid,
            comp_mask::sm_info_record::LID,
            &template,
        ))
        .map_err(sa_error)
        .context("SA SMInfoRecord query")?;
    Ok(reply.decode::<SmInfoRecord>()?)
}

/// Turn an SA status into words; other errors pass through.
pub fn sa_error(e: MadError) -> anyhow::Error {
    anyhow::anyhow!(ibscope_topo::sa_tables::sa_error(e))
}

fn print_text(r: &Value) {
    let s = |k: &str| r[k].to_string();
    println!(
        "master SM: LID {}, GUID {}, priority {}, state {} ({}), activity count {}",
        s("lid"),
        r["guid"].as_str().unwrap_or("?"),
        s("priority"),
        r["state"].as_str().unwrap_or("?"),
        s("state_code"),
        s("act_count"),
    );
    match r["node_description"].as_str() {
        Some(d) => println!("SM node: {}", for_terminal(d)),
        None => println!("SM node: (NodeDescription not answered)"),
    }
    match r.get("sa_record") {
        Some(sa) if sa.get("error").is_some() => println!(
            "SA SMInfoRecord: {}",
            for_terminal(sa["error"].as_str().unwrap_or("?"))
        ),
        Some(sa) => println!(
            "SA SMInfoRecord: LID {}, GUID {}, priority {}, state {}, activity count {}",
            sa["lid"],
            sa["guid"].as_str().unwrap_or("?"),
            sa["priority"],
            sa["state"].as_str().unwrap_or("?"),
            sa["act_count"]
        ),
        None => {}
    }
}
