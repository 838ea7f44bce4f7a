//! `ibscope port disable|enable`: take one port's link down, or let it train again, with a
//! SubnSet(PortInfo) (the `ibportstate disable|enable` equivalent). This command writes to
//! the fabric.

use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use ibscope_mad::engine::Engine;
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::escape::quoted_for_terminal;
use ibscope_topo::port_apply;
use ibscope_topo::port_toggle::{self, PortAction, ToggleRoute};
use ibscope_topo::resolve::{split_name_port, NameMatch, Resolver};
use ibscope_topo::Fabric;
use ibscope_topo::PortRef;

use crate::cli::{exit, Global};

/// The ACTION argument: its values and their help, parsed into topo's [`PortAction`].
fn action_parser() -> impl TypedValueParser<Value = PortAction> {
    PossibleValuesParser::new([
        PossibleValue::new("disable")
            .help("PortPhysicalState Disabled: the link goes down and stays down until enabled"),
        PossibleValue::new("enable").help(
            "PortPhysicalState Polling: the port trains again (the link comes up once its \
             peer port is enabled too)",
        ),
    ])
    .map(|value| match value.as_str() {
        "disable" => PortAction::Disable,
        _ => PortAction::Enable,
    })
}

/// Disable or enable one port (writes to the fabric: a SubnSet(PortInfo)).
///
/// The port's PortInfo is read first; the Set writes it back with PortState NoChange,
/// PortPhysicalState Disabled (3) or Polling (2), and the enabled width/speed fields at
/// NoChange (0). The result is read back and printed.
///
/// The SMPs travel by a directed route that avoids the link being changed. Refused without
/// --force: disabling the link this host is attached by, or a link whose loss cuts nodes
/// off from this host (`port enable` could not reach them again), e.g. a CA's only link.
///
/// On a fabric whose SM sets M_Keys, a protected port silently drops a SubnSet carrying
/// the wrong M_Key: give the subnet's key with the global --m-key.
///
/// Exit code: 0 done (or nothing to do), 2 refused or not done.
///
/// Examples:
///   ibscope port disable sw-leaf-1 17
///   ibscope port enable 0x0002c90300a1b2c3 17
///   ibscope --m-key 0x1234567890abcdef port disable 12 3
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    #[arg(value_parser = action_parser())]
    pub action: PortAction,
    /// A LID, a GUID (node or port, 0x-hex), a directed route (0,1,3) or a name, as
    /// ibscope prints it (`leaf-r4-001`, `NAME[PORT]`, which then needs no PORT_NUMBER).
    pub node: String,
    /// The port number on NODE (1..N).
    #[arg(value_name = "PORT_NUMBER")]
    pub port_number: Option<u8>,
    /// Disable even the link this host is attached by, or one whose loss cuts nodes off.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub fabric: crate::cli::FabricArgs,
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    let names = crate::fabric::names(g)?;
    let mut engine = crate::fabric::open_engine(g)?;
    let fabric = crate::fabric::discover_live(&mut engine, DiscoverOptions::default())?;
    let resolver = Resolver::new(&fabric, names.as_ref());
    let named = resolver.resolve(&a.node, NameMatch::Exact)?;
    let node = named.node();
    let what = quoted_for_terminal(&a.node);
    let port = match (a.port_number, split_name_port(&a.node).1) {
        (Some(p), Some(q)) if p != q => {
            bail!("{what} names port {q}, PORT_NUMBER says {p}: give one")
        }
        (Some(p), _) | (None, Some(p)) => p,
        (None, None) => match named.named_port(&fabric) {
            Some(p) => p,
            None => bail!("which port of {what}? give PORT_NUMBER (or NAME[PORT])"),
        },
    };
    let target = resolver.port(node, port)?;
    let toggle = port_toggle::route(&fabric, names.as_ref(), target, a.action, a.force)?;
    let here = PortRef::new(fabric.node(node), port, names.as_ref());
    let code = apply(&mut engine, &fabric, &toggle, &here, a.action)?;
    Ok(ExitCode::from(code))
}

/// Print an error that ends the command with exit 2 (the message is already escaped).
fn fail(message: &str) -> u8 {
    eprintln!("ibscope: error: {message}");
    exit::ERROR
}

fn apply(
    engine: &mut Engine,
    fabric: &Fabric,
    toggle: &ToggleRoute,
    at: &PortRef,
    action: PortAction,
) -> Result<u8> {
    match port_apply::apply(engine, fabric, toggle, at, action) {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
            Ok(exit::OK)
        }
        Err(port_apply::ApplyError::Lost(e)) => Err(anyhow::Error::new(e)),
        Err(port_apply::ApplyError::Failed(message)) => Ok(fail(&message)),
    }
}
