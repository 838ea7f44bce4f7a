//! `ibscope links`: every link with both ends' width, speed and state (the iblinkinfo
//! equivalent), what the link could run at, and whether it is degraded.

use std::process::ExitCode;

use anyhow::Result;
use ibscope_mad::attr::link::{Speed, Width};
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::escape::for_terminal;
use ibscope_topo::health::{self, HealthOptions, LinkAssessment, Rate};
use ibscope_topo::hosts::Hosts;
use ibscope_topo::FabricId;

use crate::cli::{exit, Global};

/// List links with both ends, their active rate, the rate both ends could run at, and
/// whether the link is degraded.
///
/// A link runs at the lower of what its two ends report. It is DEGRADED when its ends
/// disagree, when its active width or speed is below the best both ends support and
/// enable, or when it runs below the expected rate: --expect, else the most common rate
/// among links of its class (switch-switch, CA-switch; loopback cables do not count) while
/// its hardware can do better: both ends support that rate (live), or both ends' nodes run
/// other links at it (a topology file). Below that most common rate with hardware that
/// can do no better, it is fine (a note says so). From a topology file, which says what
/// ports run at but not what they support, a link below the norm whose ends run nothing
/// faster is BELOW NORM (capability unknown offline), a warning: older hardware may do no
/// better. Loopback cables (two ports of one node cabled together) are marked LOOPBACK.
/// Ports physically up but not Active, and down/polling/disabled ports, are listed after
/// the links.
///
/// Several fabrics (-C all, a list): each fabric's list under a `## fabric NAME` heading;
/// JSON {"fabrics": [...]}, each report naming its fabric ("fabric").
///
/// Exit code: 0; with --degraded, 1 when a link `check` reports (degraded, below the norm,
/// loopback) or an up-but-not-Active port was found.
///
/// Examples:
///   ibscope links
///   ibscope links --degraded --expect 4xHDR
///   ibscope --topology fabric.json links --json
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Show only the links `check` reports (degraded, below the norm with capability
    /// unknown offline, loopback cables) and ports up but not Active.
    #[arg(long)]
    pub degraded: bool,
    /// JSON output (the health report: norms, links, port states; each HCA end with its
    /// host and rail where known).
    #[arg(long)]
    pub json: bool,
    /// Expected rate of every link, e.g. 4xHDR (default: the most common rate per class).
    #[arg(long, value_name = "WIDTHxSPEED", value_parser = parse_rate)]
    pub expect: Option<Rate>,
    #[command(flatten)]
    pub fabric: crate::cli::FabricArgs,
    #[command(flatten)]
    pub saved: crate::cli::TopologyArgs,
}

pub fn parse_rate(text: &str) -> std::result::Result<Rate, String> {
    Rate::parse(text).ok_or_else(|| {
        let widths: Vec<String> = Width::KNOWN.iter().map(|w| w.lanes().to_string()).collect();
        let speeds: Vec<&str> = Speed::ALL.iter().map(|s| s.name()).collect();
        format!(
            "{text:?} is not WIDTHxSPEED, e.g. 4xHDR (widths {}; speeds {})",
            widths.join(" "),
            speeds.join(" ")
        )
    })
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    let names = crate::fabric::names(g)?;
    if let Some(path) = &g.topology {
        let fabric = crate::fabric::load_file(path)?;
        let (code, doc) = one(&fabric, names.as_ref(), a, None)?;
        if let Some(doc) = doc {
            crate::output::print_json(&doc)?;
        }
        return Ok(ExitCode::from(code));
    }
    let mut docs = Vec::new();
    let ran = crate::fabric_set::each(g, |opened, multi| {
        let mut fabric =
            crate::fabric::discover_live(&mut opened.engine, DiscoverOptions::default())?;
        fabric.id = Some(opened.id.clone());
        let (code, doc) = one(&fabric, names.as_ref(), a, multi.then_some(&opened.id))?;
        match doc {
            Some(doc) if multi => docs.push(doc),
            Some(doc) => crate::output::print_json(&doc)?,
            None => {}
        }
        Ok(code)
    })?;
    if a.json && crate::fabric_set::is_multi(g.ca.as_deref()) {
        let doc = serde_json::json!({"fabrics": docs, "failed": ran.failed});
        crate::output::print_json(&doc)?;
    }
    Ok(ran.exit_code())
}

/// One fabric's links: printed as text (under a heading naming `heading`'s fabric when
/// there are several), or returned as its JSON document (which names its fabric).
fn one(
    fabric: &ibscope_topo::Fabric,
    names: Option<&ibscope_topo::namemap::NameMap>,
    a: &Args,
    heading: Option<&FabricId>,
) -> Result<(u8, Option<serde_json::Value>)> {
    let mut report = health::assess(
        fabric,
        names,
        &HealthOptions {
            expect: a.expect,
            ..Default::default()
        },
    );
    Hosts::group(fabric, names).annotate_health(&mut report);
    let reported = |l: &LinkAssessment| l.verdict.is_finding() || l.loopback;
    let findings = report.links.iter().filter(|l| reported(l)).count() + report.up_not_active.len();
    if a.degraded {
        report.links.retain(reported);
        report.down.clear();
    }
    let code = crate::output::verdict(if a.degraded && findings > 0 {
        exit::FINDINGS
    } else {
        exit::OK
    });
    if a.json {
        let mut doc = serde_json::Map::new();
        if let Some(id) = &fabric.id {
            doc.insert("fabric".into(), serde_json::to_value(id)?);
        }
        if let serde_json::Value::Object(rest) = serde_json::to_value(&report)? {
            doc.extend(rest);
        }
        return Ok((code, Some(serde_json::Value::Object(doc))));
    }
    if let Some(id) = heading {
        println!(
            "## fabric {}: {}",
            for_terminal(&id.name),
            id.identity_text()
        );
    }
    print!("{}", ibscope_topo::health_text::report_text(&report));
    Ok((code, None))
}
