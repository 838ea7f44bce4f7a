//! `ibscope query`: one attribute of one node or port, the smpquery equivalent.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::ValueEnum;
use ibscope_mad::attr::{NodeDescription, NodeInfo, PortInfo, SwitchInfo};
use ibscope_mad::attribute::Attribute as _;
use ibscope_mad::smp::{DrPath, SmpRoute};
use serde_json::{json, Value};

use ibscope_topo::query_json;

use crate::cli::Global;
use crate::output;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum QueriedAttribute {
    /// NodeInfo: type, port count, GUIDs, vendor and device.
    Nodeinfo,
    /// NodeDescription: the node's name string.
    Nodedesc,
    /// PortInfo of PORT (default: 0 on a switch, the entered port on a CA).
    Portinfo,
    /// SwitchInfo: forwarding table sizes and switch capabilities.
    Switchinfo,
}

/// Query one SMP attribute by LID or directed route.
///
/// Examples:
///   ibscope query nodeinfo 1            # LID 1
///   ibscope query portinfo 0,1 1        # directed route out of local port 1, port 1 there
///   ibscope query -D nodedesc 0         # the local node itself
///   ibscope query --json switchinfo 0x3
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Attribute to read.
    #[arg(value_enum)]
    pub attribute: QueriedAttribute,
    /// A LID (decimal or 0x-hex), or a directed route such as `0,1,3` (egress ports).
    pub target: String,
    /// Port number for portinfo.
    #[arg(value_name = "PORT")]
    pub port_number: Option<u8>,
    /// Treat TARGET as a directed route even without commas (`-D 0` is the local node).
    #[arg(short = 'D', long = "direct")]
    pub direct: bool,
    /// Print JSON: field names as in the IB specification, snake_case; GUIDs "0x" + 16 hex
    /// digits; coded fields (node type, states, MTUs, VLs, active width) by name, their
    /// codes under "raw"; bit masks as numbers, named under "decoded".
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub fabric: crate::cli::FabricArgs,
}

/// Parse TARGET the way infiniband-diags does: a directed route when it has commas or -D,
/// else a LID.
pub fn parse_target(text: &str, direct: bool) -> Result<SmpRoute> {
    if direct || text.contains(',') {
        let path = DrPath::parse(text).with_context(|| format!("bad directed route {text:?}"))?;
        return Ok(SmpRoute::Directed(path));
    }
    let lid = output::parse_lid(text)?;
    Ok(SmpRoute::Lid(lid))
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    let route = parse_target(&a.target, a.direct)?;
    let mut engine = crate::fabric::open_engine(g)?;
    let title = match a.attribute {
        QueriedAttribute::Nodeinfo => NodeInfo::NAME,
        QueriedAttribute::Nodedesc => NodeDescription::NAME,
        QueriedAttribute::Portinfo => PortInfo::NAME,
        QueriedAttribute::Switchinfo => SwitchInfo::NAME,
    };
    let context = || format!("{title} query to {}", describe(&route));
    let value: Value = match a.attribute {
        QueriedAttribute::Nodeinfo => {
            serde_json::to_value(engine.get::<NodeInfo>(&route, 0).with_context(context)?)?
        }
        QueriedAttribute::Nodedesc => {
            let d = engine
                .get::<NodeDescription>(&route, 0)
                .with_context(context)?;
            json!({ "node_description": d.text() })
        }
        QueriedAttribute::Portinfo => {
            let port = a.port_number.unwrap_or(0);
            let p = engine
                .get::<PortInfo>(&route, u32::from(port))
                .with_context(context)?;
            let mut v = serde_json::to_value(&p)?;
            // A switch's external ports leave CapabilityMask reserved (0): whether extended
            // speeds apply is port 0's to say (ibnetdiscover decodes them the same way).
            // CA and router ports always set some capability bit.
            let mut for_decoding = p.clone();
            if p.capability_mask == 0 && port != 0 {
                if let Ok(p0) = engine.get::<PortInfo>(&route, 0) {
                    for_decoding.capability_mask = p0.capability_mask;
                }
            }
            if let Value::Object(m) = &mut v {
                m.shift_remove("m_key");
                m.insert(
                    "decoded".into(),
                    query_json::decoded_port_info(&for_decoding),
                );
            }
            v
        }
        QueriedAttribute::Switchinfo => {
            serde_json::to_value(engine.get::<SwitchInfo>(&route, 0).with_context(context)?)?
        }
    };
    let value = query_json::name_coded_fields(value);
    if a.json {
        output::print_json(&value)?;
    } else {
        println!(
            "# {title} of {}{}",
            describe(&route),
            match (a.attribute, a.port_number) {
                (QueriedAttribute::Portinfo, Some(p)) => format!(" port {p}"),
                _ => String::new(),
            }
        );
        // As smpquery: names only (the codes are for scripts).
        let mut shown = value.clone();
        if let Value::Object(m) = &mut shown {
            m.shift_remove(query_json::RAW);
        }
        output::print_fields(&shown, 0);
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(route: &SmpRoute) -> String {
    match route {
        SmpRoute::Lid(l) => format!("LID {l}"),
        SmpRoute::Directed(p) => format!("DR path {p}"),
    }
}
