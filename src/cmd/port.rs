//! `ibscope port disable|enable`: take one port's link down, or let it train again, with a
//! SubnSet(PortInfo) (the `ibportstate disable|enable` equivalent). This command writes to
//! the fabric.

use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use ibscope_mad::attr::{PhysState, PortInfo};
use ibscope_mad::engine::{Engine, MadError, Request};
use ibscope_mad::header::method;
use ibscope_mad::smp::SmpRoute;
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::escape::quoted_for_terminal;
use ibscope_topo::m_key::{explain_no_reply, SmpMethod};
use ibscope_topo::port_toggle::{self, Plan, PortAction};
use ibscope_topo::resolve::{resolve, NameMatch};
use ibscope_topo::PortRef;
use ibscope_topo::{End, Fabric};

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
    /// A LID, a GUID (node or port, 0x-hex) or a node name.
    pub node: String,
    /// The port number on NODE (1..N).
    #[arg(value_name = "PORT_NUMBER")]
    pub port_number: u8,
    /// Disable even the link this host is attached by, or one whose loss cuts nodes off.
    #[arg(long)]
    pub force: bool,
}

pub fn run(g: &Global, a: &Args) -> Result<ExitCode> {
    if g.topology.is_some() {
        bail!("`ibscope port` changes the live fabric: --topology cannot be used here");
    }
    let names = crate::fabric::names(g)?;
    let mut engine = crate::fabric::open_engine(g)?;
    let fabric = crate::fabric::discover_live(&mut engine, DiscoverOptions::default())?;
    let node = resolve(&fabric, names.as_ref(), &a.node, NameMatch::Exact)?.node();
    let target = End {
        node,
        port: a.port_number,
    };
    let plan = port_toggle::plan(&fabric, names.as_ref(), target, a.action, a.force)?;
    let here = PortRef::new(fabric.node(node), a.port_number, names.as_ref());
    let code = apply(&mut engine, &fabric, &plan, &here, a.action)?;
    Ok(ExitCode::from(code))
}

fn get_port_info(engine: &mut Engine, route: &SmpRoute, port: u8) -> Result<PortInfo, MadError> {
    engine.get::<PortInfo>(route, u32::from(port))
}

/// The PortInfo holding the node's M_Key: the target port's own (`target`, when read) or
/// port 0's for a switch; None when it cannot be read.
fn guard_info(
    engine: &mut Engine,
    route: &SmpRoute,
    plan: &Plan,
    target: Option<&PortInfo>,
) -> Option<PortInfo> {
    if plan.m_key_port == plan.target.port {
        return target.cloned();
    }
    get_port_info(engine, route, plan.m_key_port).ok()
}

/// Print an error that ends the command with exit 2 (the message is already escaped).
fn fail(message: &str) -> u8 {
    eprintln!("ibscope: error: {message}");
    exit::ERROR
}

fn apply(
    engine: &mut Engine,
    fabric: &Fabric,
    plan: &Plan,
    at: &PortRef,
    action: PortAction,
) -> Result<u8> {
    let at_text = at.report_text();
    let route = SmpRoute::Directed(plan.route.clone());
    let port = plan.target.port;
    let before = match get_port_info(engine, &route, port) {
        Ok(info) => info,
        Err(e) => {
            crate::fabric::ensure_connected(engine)?;
            let guard = guard_info(engine, &route, plan, None);
            let msg =
                explain_no_reply(SmpMethod::Get, at, guard.as_ref(), engine.m_key(), true, &e)
                    .unwrap_or_else(|| format!("SubnGet PortInfo to {at_text}: {e}"));
            return Ok(fail(&msg));
        }
    };
    let was = before.phys_state();
    if action.is_in_effect(was) {
        match action {
            PortAction::Disable => println!("{at_text} is already disabled: nothing to do"),
            PortAction::Enable => println!(
                "{at_text} is not disabled (PortPhysicalState {}): nothing to do",
                was.name()
            ),
        }
        return Ok(exit::OK);
    }
    let payload = port_toggle::set_payload(&before, action);
    let set = Request::new::<PortInfo>(&route, method::SET, u32::from(port), &payload);
    if let Err(e) = engine.call(set) {
        crate::fabric::ensure_connected(engine)?;
        if plan.through_target && matches!(e, MadError::Timeout { .. }) {
            return Ok(fail(&format!(
                "SubnSet PortInfo to {at_text} got no reply, as expected: it travelled the link it \
                 disables; the result cannot be read back from here"
            )));
        }
        let guard = guard_info(engine, &route, plan, Some(&before));
        let msg = explain_no_reply(SmpMethod::Set, at, guard.as_ref(), engine.m_key(), true, &e)
            .unwrap_or_else(|| format!("SubnSet PortInfo to {at_text}: {e}"));
        return Ok(fail(&msg));
    }
    let after = match get_port_info(engine, &route, port) {
        Ok(info) => info,
        Err(e) => {
            crate::fabric::ensure_connected(engine)?;
            return Ok(fail(&format!(
                "SubnSet PortInfo to {at_text} was answered, but reading it back failed: {e}"
            )));
        }
    };
    let now = after.phys_state();
    if !action.is_in_effect(now) {
        return Ok(fail(&format!(
            "SubnSet PortInfo to {at_text} was answered, but PortPhysicalState is still {}",
            now.name()
        )));
    }
    let peer = fabric
        .peer(plan.target)
        .map(|p| {
            let n = fabric.node(p.node);
            format!(
                " (link to {} ({:#018x}) port {})",
                quoted_for_terminal(&n.description),
                n.guid,
                p.port
            )
        })
        .unwrap_or_default();
    let verb = match action {
        PortAction::Disable => "disabled",
        PortAction::Enable => "enabled",
    };
    println!(
        "{verb} {at_text}{peer}: PortPhysicalState {} -> {}",
        was.name(),
        now.name()
    );
    if action == PortAction::Enable && now != PhysState::LinkUp {
        println!("the link comes up once the port at its other end is enabled and trains");
    }
    Ok(exit::OK)
}
