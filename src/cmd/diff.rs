//! `ibscope diff`: what changed between two topologies.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;

use crate::cli::{exit, Global};

/// Compare two topologies (ibnetdiscover text or ibscope JSON, in any mix): nodes and
/// links added and removed, and link width/speed/state changes.
///
/// Exit code 0 when they are equal, 1 when they differ, 2 when a file cannot be read.
///
/// Examples:
///   ibscope discover --format json -o fabric-$(date +%F).json    # a snapshot, e.g. daily
///   ibscope diff fabric-2026-11-24.json fabric-2026-12-01.json   # what changed in a week
///   ibscope diff old.topo fabric.json --json | jq '.links_removed'
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The earlier topology: ibnetdiscover text or an ibscope JSON snapshot.
    #[arg(value_name = "OLD", value_hint = clap::ValueHint::FilePath)]
    pub old: PathBuf,
    /// The later topology, in either format.
    #[arg(value_name = "NEW", value_hint = clap::ValueHint::FilePath)]
    pub new: PathBuf,
    /// Print the differences as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(_g: &Global, a: &Args) -> Result<ExitCode> {
    let old = crate::fabric::load_file(&a.old)?;
    let new = crate::fabric::load_file(&a.new)?;
    let d = ibscope_topo::diff::diff(&old, &new);
    let code = crate::output::verdict(if d.is_empty() {
        exit::OK
    } else {
        exit::FINDINGS
    });
    if a.json {
        crate::output::print_json(&d)?;
    } else if d.is_empty() {
        println!("no differences");
    } else {
        print!("{}", d);
    }
    Ok(ExitCode::from(code))
}
