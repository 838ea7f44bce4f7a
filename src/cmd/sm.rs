//! `ibscope sm`: the master subnet manager, the sminfo equivalent.

use std::process::ExitCode;

use anyhow::Result;
use ibscope_mad::engine::MadError;
use ibscope_topo::escape::for_terminal;
use ibscope_topo::master_sm::{self, MasterSm, SaSmRecord};

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
    #[command(flatten)]
    pub fabric: crate::cli::FabricArgs,
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    // The name map is read first, as by every command that takes it: one that cannot be
    // read is said before the fabric is touched.
    crate::fabric::names(g)?;
    let mut engine = crate::fabric::open_engine(g)?;
    let report = master_sm::query(&mut engine, !a.no_sa)?;
    if a.json {
        crate::output::print_fabric_json(Some(&crate::fabric::id_of(g, &engine)), &report)?;
    } else {
        print_text(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// Turn an SA status into words; other errors pass through.
pub fn sa_error(e: MadError) -> anyhow::Error {
    anyhow::anyhow!(ibscope_topo::sa_tables::sa_error(e))
}

fn print_text(r: &MasterSm) {
    println!(
        "master SM: LID {}, GUID {}, priority {}, state {} ({}), activity count {}",
        r.lid, r.guid, r.priority, r.state, r.state_code, r.act_count,
    );
    match &r.node_description {
        Some(d) => println!("SM node: {}", for_terminal(d)),
        None => println!("SM node: (NodeDescription not answered)"),
    }
    match &r.sa_record {
        Some(SaSmRecord::Failed { error }) => {
            println!("SA SMInfoRecord: {}", for_terminal(error))
        }
        Some(SaSmRecord::Found {
            lid,
            guid,
            priority,
            state,
            act_count,
            ..
        }) => println!(
            "SA SMInfoRecord: LID {lid}, GUID {guid}, priority {priority}, state {state}, \
             activity count {act_count}"
        ),
        None => {}
    }
}
