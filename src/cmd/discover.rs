//! `ibscope discover`: sweep the fabric (the ibnetdiscover equivalent) and export it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::builder::ArgPredicate;
use clap::ValueEnum;
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::escape::for_terminal;
use ibscope_topo::export;

use crate::cli::{exit, Global};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DiscoverFormat {
    /// ibnetdiscover's text format; ibsim and other tools read it back.
    Ibnetdiscover,
    /// The ibscope model (schema_version'd); `--topology` reads it back losslessly.
    Json,
    /// Graphviz: switches as boxes, CAs as ellipses, degraded links in red.
    Dot,
    /// A cabling plan (CSV: a_node,a_port,z_node,z_port,rate), as `check --plan` reads it.
    Plan,
}

/// Discover the fabric from the local port by directed route and export it.
///
/// Every node's NodeInfo, NodeDescription and PortInfo (switch port 0 too) and SwitchInfo
/// are read, many MADs in flight. Queries that fail after retries are reported at the end
/// (and in JSON under `report`); the exit code is then 1. Duplicate GUIDs and LIDs are
/// reported too.
///
/// With several fabrics (-C all, a list): each is discovered and written in turn, the
/// ibnetdiscover text and DOT after a `fabric NAME` comment, JSON as {"schema_version",
/// "fabrics": [...], "failed": [{"fabric", "error"}]}.
/// Every JSON snapshot names its fabric ("fabric": its name; with several, also the
/// subnet prefix and master SM GUID that tell them apart).
///
/// Examples:
///   ibscope discover                          # ibnetdiscover-style text on stdout
///   ibscope discover --format json -o fabric.json
///   ibscope discover --format dot | dot -Tsvg > fabric.svg
///   ibscope --topology fabric.json discover --format dot   # convert a saved snapshot
///   ibscope -C all discover --format json     # every fabric this host reaches
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[arg(
        long,
        value_enum,
        default_value = "ibnetdiscover",
        default_value_if("json", ArgPredicate::IsPresent, Some("json"))
    )]
    pub format: DiscoverFormat,
    /// The JSON snapshot: --format json.
    #[arg(long, conflicts_with = "format")]
    pub json: bool,
    /// Write to FILE instead of stdout.
    #[arg(short, long, value_name = "FILE", value_hint = clap::ValueHint::AnyPath)]
    pub output: Option<PathBuf>,
    /// Also read every switch's linear forwarding table (for offline routing analysis).
    #[arg(long)]
    pub lft: bool,
    #[command(flatten)]
    pub fabric: crate::cli::FabricArgs,
    #[command(flatten)]
    pub saved: crate::cli::TopologyArgs,
}

/// Stream the export to `out`, buffered: the text of a large fabric is never held whole.
fn export(
    format: DiscoverFormat,
    fabric: &ibscope_topo::Fabric,
    names: Option<&ibscope_topo::namemap::NameMap>,
    out: &mut dyn Write,
) -> Result<()> {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, out);
    match format {
        DiscoverFormat::Ibnetdiscover => export::ibnd::write_to(&mut out, fabric, names)?,
        DiscoverFormat::Json => export::json::write_to(&mut out, fabric)?,
        DiscoverFormat::Dot => {
            let health = ibscope_topo::health::assess(fabric, names, &Default::default());
            out.write_all(export::dot::write(fabric, names, &health).as_bytes())?
        }
        DiscoverFormat::Plan => ibscope_topo::plan::write_csv(
            &ibscope_topo::plan::from_fabric(fabric, names),
            &mut out,
        )?,
    }
    out.flush()?;
    Ok(())
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    let names = crate::fabric::names(g)?;
    let options = DiscoverOptions { read_lft: a.lft };
    let mut out: Box<dyn Write> = match &a.output {
        Some(path) => Box::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot write {}", path.display()))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let write_err = |e: anyhow::Error| match &a.output {
        Some(path) => e.context(format!("cannot write {}", path.display())),
        None => e,
    };
    if let Some(path) = &g.topology {
        let fabric = crate::fabric::load_file(path)?;
        export(a.format, &fabric, names.as_ref(), &mut out).map_err(write_err)?;
        return Ok(ExitCode::from(exit::OK));
    }
    let multi = crate::fabric_set::is_multi(g.ca.as_deref());
    let mut written = 0usize;
    if multi && a.format == DiscoverFormat::Json {
        // One document, streamed: each snapshot is written as it is swept. Its head is
        // what `output::print_json` puts first in every other document.
        writeln!(
            out,
            "{{\"schema_version\": {}, \"fabrics\": [",
            ibscope_topo::model::SCHEMA_VERSION
        )?;
    }
    let ran = crate::fabric_set::each(g, |opened, multi| {
        let mut fabric = crate::fabric::discover_live(&mut opened.engine, options.clone())?;
        fabric.id = Some(opened.id.clone());
        if multi {
            match a.format {
                DiscoverFormat::Json if written > 0 => out.write_all(b",\n")?,
                DiscoverFormat::Json => {}
                DiscoverFormat::Ibnetdiscover | DiscoverFormat::Plan => writeln!(
                    out,
                    "#\n# fabric {}: {}\n#",
                    for_terminal(&opened.id.name),
                    opened.id.identity_text()
                )?,
                DiscoverFormat::Dot => writeln!(
                    out,
                    "// fabric {}: {}",
                    for_terminal(&opened.id.name),
                    opened.id.identity_text()
                )?,
            }
        }
        // Said (and recorded as the verdict) before the export: a reader that stops
        // early still gets the code.
        let code = report(&fabric, multi.then_some(opened.id.name.as_str()));
        export(a.format, &fabric, names.as_ref(), &mut out).map_err(write_err)?;
        written += 1;
        Ok(code)
    })?;
    if multi && a.format == DiscoverFormat::Json {
        let failed = serde_json::to_string(&ran.failed)?;
        writeln!(out, "], \"failed\": {failed}}}")?;
    }
    out.flush()?;
    Ok(ran.exit_code())
}

/// What discovery ran into, on stderr (`fabric` names it when there are several); the
/// exit code it calls for.
fn report(fabric: &ibscope_topo::Fabric, name: Option<&str>) -> u8 {
    let prefix = name.map_or(String::new(), |n| format!("fabric {}: ", for_terminal(n)));
    for line in fabric.report.warning_lines(fabric) {
        eprintln!("{prefix}{line}");
    }
    crate::output::verdict(if fabric.report.is_clean() {
        exit::OK
    } else {
        exit::FINDINGS
    })
}
