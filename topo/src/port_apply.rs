//! Taking one port's link down or letting it train again (`ibscope port disable|enable`):
//! the PortInfo read, the SubnSet written ([`port_toggle::set_payload`]), the state read
//! back; a port that does not answer explained by its M_Key protection where that is why.

use ibscope_mad::attr::{PhysState, PortInfo};
use ibscope_mad::engine::{Engine, MadError, Request};
use ibscope_mad::header::method;
use ibscope_mad::smp::SmpRoute;

use crate::escape::quoted_for_terminal;
use crate::m_key::{explain_no_reply, SmpMethod};
use crate::port_toggle::{self, PortAction, ToggleRoute};
use crate::{Fabric, PortRef};

/// Why a port could not be toggled.
#[derive(Debug)]
pub enum ApplyError {
    /// The transport went away: nothing more can be asked.
    Lost(MadError),
    /// What went wrong, escaped for a terminal.
    Failed(String),
}

/// The transport's loss, once a request failed.
fn lost(engine: &Engine) -> Result<(), ApplyError> {
    match engine.transport_lost() {
        Some(e) => Err(ApplyError::Lost(e.clone())),
        None => Ok(()),
    }
}

fn get_port_info(engine: &mut Engine, route: &SmpRoute, port: u8) -> Result<PortInfo, MadError> {
    engine.get::<PortInfo>(route, u32::from(port))
}

/// The PortInfo holding the node's M_Key: the target port's own (`target`, when read) or
/// port 0's for a switch; None when it cannot be read.
fn guard_info(
    engine: &mut Engine,
    route: &SmpRoute,
    toggle: &ToggleRoute,
    target: Option<&PortInfo>,
) -> Option<PortInfo> {
    if toggle.m_key_port == toggle.target.port {
        return target.cloned();
    }
    get_port_info(engine, route, toggle.m_key_port).ok()
}

/// Disable or enable the port `toggle` targets: read PortInfo, set it (unless already in
/// effect), read it back. `Ok` holds what to print; a failure explains itself (M_Key
/// protection where it explains no reply).
pub fn apply(
    engine: &mut Engine,
    fabric: &Fabric,
    toggle: &ToggleRoute,
    at: &PortRef,
    action: PortAction,
) -> Result<Vec<String>, ApplyError> {
    let at_text = at.report_text();
    let route = SmpRoute::Directed(toggle.route.clone());
    let port = toggle.target.port;
    let before = match get_port_info(engine, &route, port) {
        Ok(info) => info,
        Err(e) => {
            lost(engine)?;
            let guard = guard_info(engine, &route, toggle, None);
            let msg =
                explain_no_reply(SmpMethod::Get, at, guard.as_ref(), engine.m_key(), true, &e)
                    .unwrap_or_else(|| format!("SubnGet PortInfo to {at_text}: {e}"));
            return Err(ApplyError::Failed(msg));
        }
    };
    let was = before.phys_state();
    if action.is_in_effect(was) {
        return Ok(vec![match action {
            PortAction::Disable => format!("{at_text} is already disabled: nothing to do"),
            PortAction::Enable => format!(
                "{at_text} is not disabled (PortPhysicalState {}): nothing to do",
                was.name()
            ),
        }]);
    }
    let payload = port_toggle::set_payload(&before, action);
    let set = Request::new::<PortInfo>(&route, method::SET, u32::from(port), &payload);
    if let Err(e) = engine.call(set) {
        lost(engine)?;
        if toggle.through_target && matches!(e, MadError::Timeout { .. }) {
            return Err(ApplyError::Failed(format!(
                "SubnSet PortInfo to {at_text} got no reply, as expected: it travelled the link it \
                 disables; the result cannot be read back from here"
            )));
        }
        let guard = guard_info(engine, &route, toggle, Some(&before));
        let msg = explain_no_reply(SmpMethod::Set, at, guard.as_ref(), engine.m_key(), true, &e)
            .unwrap_or_else(|| format!("SubnSet PortInfo to {at_text}: {e}"));
        return Err(ApplyError::Failed(msg));
    }
    let after = match get_port_info(engine, &route, port) {
        Ok(info) => info,
        Err(e) => {
            lost(engine)?;
            return Err(ApplyError::Failed(format!(
                "SubnSet PortInfo to {at_text} was answered, but reading it back failed: {e}"
            )));
        }
    };
    let now = after.phys_state();
    if !action.is_in_effect(now) {
        return Err(ApplyError::Failed(format!(
            "SubnSet PortInfo to {at_text} was answered, but PortPhysicalState is still {}",
            now.name()
        )));
    }
    let peer = fabric
        .peer(toggle.target)
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
    let mut lines = vec![format!(
        "{verb} {at_text}{peer}: PortPhysicalState {} -> {}",
        was.name(),
        now.name()
    )];
    if action == PortAction::Enable && now != PhysState::LinkUp {
        lines.push("the link comes up once the port at its other end is enabled and trains".into());
    }
    Ok(lines)
}
