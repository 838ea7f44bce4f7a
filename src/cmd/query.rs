//! `ibscope query`: one attribute of one node or port, the smpquery equivalent.

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::ValueEnum;
use ibscope_mad::attr::{NodeDescription, NodeInfo, PortInfo, SwitchInfo};
use ibscope_mad::attribute::Attribute as _;
use ibscope_mad::smp::{DrPath, SmpRoute};
use serde_json::{json, Value};

use ibscope_mad::engine::Engine;
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::escape::quoted_for_terminal;
use ibscope_topo::namemap::{display_name, NameMap};
use ibscope_topo::query_json;
use ibscope_topo::resolve::{lid_of, resolve, NameMatch};

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

/// Query one SMP attribute by LID, directed route or name.
///
/// A LID or a directed route is asked at once; a GUID or a name (as ibscope prints it:
/// NodeDescription, short name, node-name-map name, `NAME[PORT]`) is found by a discovery
/// first, then asked by its LID (by its directed route when it has none). Reads the live
/// fabric only: a topology file holds no attribute replies.
///
/// Examples:
///   ibscope query nodeinfo 1            # LID 1
///   ibscope query portinfo 0,1 1        # directed route out of local port 1, port 1 there
///   ibscope query -D nodedesc 0         # the local node itself
///   ibscope query portinfo 'leaf-r4-001[4]'
///   ibscope query --json switchinfo 0x3
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Attribute to read.
    #[arg(value_enum)]
    pub attribute: QueriedAttribute,
    /// A LID (decimal or 0x-hex), a directed route such as `0,1,3` (egress ports), a GUID
    /// or a name as ibscope prints it.
    pub target: String,
    /// Port number for portinfo (default: the port TARGET names, else 0 on a switch, the
    /// entered port on a CA).
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

/// The route to TARGET and the port it names: a LID or a directed route as it is, else a
/// name resolved in a discovery of the fabric.
fn target_route(
    names: Option<&NameMap>,
    engine: &mut Engine,
    a: &Args,
) -> Result<(SmpRoute, Option<u8>)> {
    if a.direct || a.target.contains(',') || output::parse_lid(&a.target).is_ok() {
        return Ok((parse_target(&a.target, a.direct)?, None));
    }
    let fabric = crate::fabric::discover_live(engine, DiscoverOptions::default())?;
    let target = resolve(&fabric, names, &a.target, NameMatch::Exact)?;
    let end = target.end(&fabric);
    let node = fabric.node(end.node);
    let route = match lid_of(&fabric, end) {
        Some(lid) => SmpRoute::Lid(lid),
        None => {
            let path = node.dr_path.as_deref().unwrap_or_default();
            SmpRoute::Directed(DrPath::parse(path).with_context(|| {
                format!(
                    "{} has no LID and no directed route",
                    quoted_for_terminal(display_name(node, names))
                )
            })?)
        }
    };
    Ok((route, target.named_port(&fabric)))
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    // The name map is read first, as by every command that takes it: one that cannot be
    // read is said before the fabric is touched.
    let names = crate::fabric::names(g)?;
    let mut engine = crate::fabric::open_engine(g)?;
    let (route, named_port) = target_route(names.as_ref(), &mut engine, a)?;
    let port_number = a.port_number.or(named_port);
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
            let port = port_number.unwrap_or(0);
            let p = engine
                .get::<PortInfo>(&route, u32::from(port))
                .with_context(context)?;
            let mut v = serde_json::to_value(&p)?;
            // A switch's external ports leave the capability masks reserved (0): whether
            // extended speeds apply is port 0's to say. CA and router ports always set
            // some capability bit.
            let mut for_decoding = p.clone();
            if p.capability_mask == 0 && port != 0 {
                if let Ok(p0) = engine.get::<PortInfo>(&route, 0) {
                    for_decoding = p.with_capabilities_of(&p0);
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
            match (a.attribute, port_number) {
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
