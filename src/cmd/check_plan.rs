//! `ibscope check --plan FILE`: the fabric against the cabling plan.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Result;
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::escape::for_terminal;
use ibscope_topo::plan::{self, PlanDifference, PlannedCable};
use serde::Serialize;

use crate::cli::{exit, Global};

/// The plan's cables: a CSV plan, or the cables of a topology file or snapshot.
fn read_plan(
    path: &Path,
    names: Option<&ibscope_topo::namemap::NameMap>,
) -> Result<Vec<PlannedCable>> {
    let text = ibscope_topo::input::read_text(path, "plan")?;
    let first = text
        .lines()
        .find(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .unwrap_or("");
    let name = ibscope_topo::input::display_name(path);
    let cables = if first
        .to_ascii_lowercase()
        .replace(' ', "")
        .starts_with("a_node,")
    {
        plan::parse_csv(&text, &name)?
    } else {
        // The text read above is the topology: not read a second time.
        let (fabric, warnings) = crate::fabric::parse_topology(&text, path, "plan")?;
        for w in warnings {
            eprintln!("warning: {name}: {w}");
        }
        plan::from_fabric(&fabric, names)
    };
    if cables.is_empty() {
        // "As planned" on a plan of nothing would be a verdict from nothing.
        anyhow::bail!("plan {name} lists no cable");
    }
    Ok(cables)
}

#[derive(Serialize)]
struct Report<'a> {
    plan: String,
    cables: usize,
    as_planned: bool,
    differences: &'a [PlanDifference],
}

pub fn run(g: &Global, path: &Path, json: bool) -> Result<ExitCode> {
    let names = crate::fabric::names(g)?;
    let cables = read_plan(path, names.as_ref())?;
    let fabric = crate::fabric::load(g, DiscoverOptions::default())?;
    let differences = plan::compare(&cables, &fabric, names.as_ref());
    let code = crate::output::verdict(if differences.is_empty() {
        exit::OK
    } else {
        exit::FINDINGS
    });
    let mut out = std::io::stdout().lock();
    if json {
        let report = Report {
            plan: path.display().to_string(),
            cables: cables.len(),
            as_planned: differences.is_empty(),
            differences: &differences,
        };
        crate::output::print_fabric_json(fabric.id.as_ref(), &report)?;
    } else {
        for d in &differences {
            let kind = serde_json::to_value(d.kind)?;
            writeln!(
                out,
                "[{}] {}",
                kind.as_str().unwrap_or("?"),
                for_terminal(&d.message)
            )?;
        }
        if differences.is_empty() {
            writeln!(out, "as planned: {} cables", cables.len())?;
        } else {
            writeln!(
                out,
                "{} difference(s) from the plan of {} cables",
                differences.len(),
                cables.len()
            )?;
        }
    }
    out.flush()?;
    Ok(ExitCode::from(code))
}
