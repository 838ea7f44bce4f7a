//! `ibscope discover`: sweep the fabric (the ibnetdiscover equivalent) and export it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::ValueEnum;
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::export;

use crate::cli::{exit, Global};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// ibnetdiscover's text format; ibsim and other tools read it back.
    Ibnetdiscover,
    /// The ibscope model (schema_version'd); `--topology` reads it back losslessly.
    Json,
    /// Graphviz: switches as boxes, CAs as ellipses, degraded links in red.
    Dot,
}

/// Discover the fabric from the local port by directed route and export it.
///
/// Every node's NodeInfo, NodeDescription and PortInfo (switch port 0 too) and SwitchInfo
/// are read, many MADs in flight. Queries that fail after retries are reported at the end
/// (and in JSON under `report`); the exit code is then 1. Duplicate GUIDs and LIDs are
/// reported too.
///
/// Examples:
///   ibscope discover                          # ibnetdiscover-style text on stdout
///   ibscope discover --format json -o fabric.json
///   ibscope discover --format dot | dot -Tsvg > fabric.svg
///   ibscope --topology fabric.json discover --format dot   # convert a saved snapshot
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[arg(long, value_enum, default_value = "ibnetdiscover")]
    pub format: Format,
    /// Write to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Also read every switch's linear forwarding table (for offline routing analysis).
    #[arg(long)]
    pub lft: bool,
}

/// Stream the export to `out`, buffered: the text of a large fabric is never held whole.
fn export(
    format: Format,
    fabric: &ibscope_topo::Fabric,
    names: Option<&ibscope_topo::namemap::NameMap>,
    out: impl Write,
) -> Result<()> {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, out);
    match format {
        Format::Ibnetdiscover => export::ibnd::write_to(&mut out, fabric, names)?,
        Format::Json => export::json::write_to(&mut out, fabric)?,
        Format::Dot => {
            let health = ibscope_topo::health::assess(fabric, names, &Default::default());
            out.write_all(export::dot::write(fabric, names, &health).as_bytes())?
        }
    }
    out.flush()?;
    Ok(())
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    let names = crate::fabric::names(g)?;
    let fabric = crate::fabric::load(g, DiscoverOptions { read_lft: a.lft })?;
    match &a.output {
        Some(path) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            export(a.format, &fabric, names.as_ref(), file)
                .with_context(|| format!("cannot write {}", path.display()))?
        }
        None => export(a.format, &fabric, names.as_ref(), std::io::stdout().lock())?,
    }
    let report = &fabric.report;
    if g.topology.is_none() {
        eprintln!(
            "discovered {} nodes ({} switches), {} links with {} MADs in {} ms",
            fabric.node_count(),
            fabric.switches().count(),
            fabric.link_count(),
            report.mads_sent,
            report.duration_ms
        );
    }
    // A dead transport fails every remaining query: list a screenful, count the rest
    // (all of them are in the JSON report).
    const SHOWN: usize = 20;
    let problems: Vec<&String> = report
        .errors
        .iter()
        .chain(&report.inconsistencies)
        .collect();
    for e in problems.iter().take(SHOWN) {
        eprintln!("warning: {}", ibscope_topo::escape::for_terminal(e));
    }
    if problems.len() > SHOWN {
        eprintln!(
            "warning: ... and {} more (see `--format json`, field report)",
            problems.len() - SHOWN
        );
    }
    for guid in &report.duplicate_guids {
        eprintln!("warning: duplicate node GUID {guid:#018x}");
    }
    for lid in &report.duplicate_lids {
        eprintln!("warning: LID {lid} is claimed by more than one port");
    }
    let clean = report.errors.is_empty()
        && report.inconsistencies.is_empty()
        && report.duplicate_guids.is_empty()
        && report.duplicate_lids.is_empty();
    Ok(ExitCode::from(if clean || g.topology.is_some() {
        exit::OK
    } else {
        exit::FINDINGS
    }))
}
