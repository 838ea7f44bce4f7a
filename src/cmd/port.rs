//! `ibscope port disable|enable`: take one port's link down, or let it train again, with a
//! SubnSet(PortInfo) (the `ibportstate disable|enable` equivalent). This command writes to
//! the fabric.

use std::collections::{HashMap, HashSet, VecDeque};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use ibscope_mad::attr::PortInfo;
use ibscope_mad::attr::{PhysState, PortState};
use ibscope_mad::engine::{Engine, MadError, Request};
use ibscope_mad::header::method;
use ibscope_mad::smp::{DrPath, SmpRoute};
use ibscope_topo::discover::DiscoverOptions;
use ibscope_topo::escape::quoted_for_terminal;
use ibscope_topo::namemap::{display_name, NameMap};
use ibscope_topo::resolve::{resolve, NameMatch};
use ibscope_topo::PortRef;
use ibscope_topo::{End, Fabric, NodeId};

use crate::cli::{exit, Global};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Action {
    /// PortPhysicalState Disabled: the link goes down and stays down until enabled.
    Disable,
    /// PortPhysicalState Polling: the port trains again (the link comes up once its peer
    /// port is enabled too).
    Enable,
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
    #[arg(value_enum)]
    pub action: Action,
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
    let plan = plan(&fabric, names.as_ref(), target, a.action, a.force)?;
    let here = PortRef::new(fabric.node(node), a.port_number, names.as_ref());
    let code = apply(&mut engine, &fabric, &plan, &here, a.action)?;
    Ok(ExitCode::from(code))
}

/// How the SMPs reach the port, and whose M_Key guards it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub target: End,
    /// Directed route to the target node (entering a CA through the target port).
    pub route: DrPath,
    /// The port whose PortInfo holds the M_Key checked for the node: a switch's port 0,
    /// a CA's port itself.
    pub m_key_port: u8,
    /// With --force: the route crosses the link being disabled, so no reply is expected.
    pub through_target: bool,
}

/// The local port's end in the fabric, if discovery recorded one.
fn local_end(fabric: &Fabric) -> Option<End> {
    let ibscope_topo::PortKey { guid, port } = fabric.local?;
    Some(End {
        node: fabric.node_by_guid(guid)?,
        port,
    })
}

/// Directed routes from the local node to every node it reaches, the link `avoid` (either
/// end) left out. CAs do not forward: only the local node's own port leads out of a CA.
fn routes_from(fabric: &Fabric, avoid: Option<End>) -> HashMap<NodeId, DrPath> {
    let mut routes = HashMap::new();
    let Some(local) = local_end(fabric) else {
        return routes;
    };
    let avoided: HashSet<End> = avoid
        .into_iter()
        .flat_map(|e| [Some(e), fabric.peer(e)])
        .flatten()
        .collect();
    routes.insert(local.node, DrPath::local());
    let mut queue = VecDeque::from([local.node]);
    while let Some(at) = queue.pop_front() {
        let node = fabric.node(at);
        let exits: Vec<u8> = if node.is_switch() {
            node.ports
                .iter()
                .map(|p| p.number)
                .filter(|&p| p != 0)
                .collect()
        } else if at == local.node {
            vec![local.port]
        } else {
            Vec::new()
        };
        let here = routes[&at].clone();
        for port in exits {
            let end = End { node: at, port };
            if avoided.contains(&end) {
                continue;
            }
            let Some(peer) = fabric.peer(end) else {
                continue;
            };
            if routes.contains_key(&peer.node) {
                continue;
            }
            let Ok(path) = here.child(port) else {
                continue;
            };
            routes.insert(peer.node, path);
            queue.push_back(peer.node);
        }
    }
    routes
}

fn node_text(fabric: &Fabric, names: Option<&NameMap>, id: NodeId) -> String {
    let n = fabric.node(id);
    format!(
        "{} ({:#018x})",
        quoted_for_terminal(display_name(n, names)),
        n.guid
    )
}

/// Check the request against the fabric and pick the route (see [`Args`] for the rules).
pub fn plan(
    fabric: &Fabric,
    names: Option<&NameMap>,
    target: End,
    action: Action,
    force: bool,
) -> Result<Plan> {
    let node = fabric.node(target.node);
    let what = node_text(fabric, names, target.node);
    if target.port == 0 && node.is_switch() {
        bail!("port 0 of switch {what} is its management port: it has no link to change");
    }
    if target.port == 0 || target.port > node.num_ports {
        bail!(
            "{what} has ports 1-{}; there is no port {}",
            node.num_ports,
            target.port
        );
    }
    let local = local_end(fabric).context("discovery did not record the local port")?;
    let peer = fabric.peer(target);
    let disable = action == Action::Disable;
    let own_link = local == target || peer == Some(local);
    if disable && own_link && !force {
        bail!(
            "port {} of {what} is on the link this host is attached by: disabling it cuts \
             this host off the fabric (and nothing could enable it again from here); add \
             --force to do it anyway",
            target.port
        );
    }
    let all = routes_from(fabric, None);
    let without = routes_from(fabric, Some(target));
    if disable && !force {
        let mut cut: Vec<NodeId> = all
            .keys()
            .filter(|id| !without.contains_key(id))
            .copied()
            .collect();
        if !cut.is_empty() {
            cut.sort_by_key(|id| fabric.node(*id).guid);
            let shown: Vec<String> = cut
                .iter()
                .take(5)
                .map(|id| node_text(fabric, names, *id))
                .collect();
            let more = if cut.len() > 5 {
                format!(" and {} more", cut.len() - 5)
            } else {
                String::new()
            };
            bail!(
                "disabling port {} of {what} cuts {} node(s) off from this host: {}{more}; \
                 `port enable` could not reach them again from here; add --force to do it \
                 anyway",
                target.port,
                cut.len(),
                shown.join(", ")
            );
        }
    }
    let (route, through_target) = if node.is_switch() {
        match without.get(&target.node) {
            Some(r) => (r.clone(), false),
            None => match all.get(&target.node) {
                Some(r) => (r.clone(), true),
                None => bail!("no directed route from this host to {what}"),
            },
        }
    } else {
        // A CA port is set through itself: the route enters by the target port.
        let entry = match (peer, local == target) {
            (_, true) => DrPath::local(),
            (Some(p), false) => {
                let to_peer = all
                    .get(&p.node)
                    .with_context(|| format!("no directed route from this host to {what}"))?;
                to_peer
                    .child(p.port)
                    .map_err(|e| anyhow::anyhow!("route to {what}: {e}"))?
            }
            (None, false) => bail!(
                "port {} of {what} has no link in the discovered fabric: a CA port is \
                 reached only through its own link",
                target.port
            ),
        };
        (entry, disable && local != target)
    };
    Ok(Plan {
        target,
        route,
        m_key_port: if node.is_switch() { 0 } else { target.port },
        through_target,
    })
}

/// The SubnSet(PortInfo) payload: the port's PortInfo as read, PortState NoChange, the
/// new PortPhysicalState, and the enabled width/speed fields at NoChange so nothing else
/// moves (a simulator re-derives the active rate from them).
pub fn set_payload(read: &PortInfo, action: Action) -> [u8; 64] {
    let info = PortInfo {
        port_state: PortState::NoChange.code(),
        port_phys_state: match action {
            Action::Disable => PhysState::Disabled.code(),
            Action::Enable => PhysState::Polling.code(),
        },
        link_width_enabled: 0,
        link_speed_enabled: 0,
        link_speed_ext_enabled: 0,
        ..read.clone()
    };
    info.to_bytes()
}

/// SubnGet or SubnSet, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmpMethod {
    Get,
    Set,
}

impl std::fmt::Display for SmpMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SmpMethod::Get => "SubnGet",
            SmpMethod::Set => "SubnSet",
        })
    }
}

/// Why an SMP to a port got no reply, when M_Key protection (IBA 14.2.4) explains it.
///
/// `guard` is the PortInfo of the port whose M_Key is checked (a switch's port 0, a CA's
/// own port) as read, or None when it could not be read; `sent` is the M_Key the SMP
/// carried. A port discards a SubnSet with the wrong M_Key whenever it has a non-zero
/// M_Key; with protect bits 1 it answers a SubnGet but shows M_Key 0, with 2 or 3 it
/// discards SubnGets too. Only a timeout is explained; other errors have their own words.
pub fn explain_no_reply(
    method: SmpMethod,
    at: &PortRef,
    guard: Option<&PortInfo>,
    sent: u64,
    node_answered: bool,
    error: &MadError,
) -> Option<String> {
    let at_text = at.report_text();
    if !matches!(error, MadError::Timeout { .. }) {
        return None;
    }
    let head = format!("{method} PortInfo to {at_text} got no reply");
    match guard {
        // Shown as 0 means hidden (a wrong key); shown equal to ours means ours is right.
        Some(info) if info.m_key_protect_bits > 0 && (info.m_key == 0 || info.m_key != sent) => {
            Some(format!(
                "{head}: the port is M_Key protected (protect bits {}); pass the subnet's \
                 M_Key with --m-key",
                info.m_key_protect_bits
            ))
        }
        Some(info) if method == SmpMethod::Set && info.m_key != 0 && info.m_key != sent => {
            Some(format!(
                "{head}: the port has an M_Key (protect bits 0) and the SubnSet carried \
                 another; pass the subnet's M_Key with --m-key"
            ))
        }
        Some(_) => None,
        None if node_answered => Some(format!(
            "{head}, although the node answered during discovery: a port with M_Key protect \
             bits 2 or 3 discards SubnGets carrying the wrong M_Key; if the SM sets M_Keys, \
             pass the subnet's M_Key with --m-key"
        )),
        None => None,
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
    action: Action,
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
    match action {
        Action::Disable if was == PhysState::Disabled => {
            println!("{at_text} is already disabled: nothing to do");
            return Ok(exit::OK);
        }
        Action::Enable if was != PhysState::Disabled => {
            println!(
                "{at_text} is not disabled (PortPhysicalState {}): nothing to do",
                was.name()
            );
            return Ok(exit::OK);
        }
        _ => {}
    }
    let payload = set_payload(&before, action);
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
    let took = match action {
        Action::Disable => now == PhysState::Disabled,
        Action::Enable => now != PhysState::Disabled,
    };
    if !took {
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
        Action::Disable => "disabled",
        Action::Enable => "enabled",
    };
    println!(
        "{verb} {at_text}{peer}: PortPhysicalState {} -> {}",
        was.name(),
        now.name()
    );
    if action == Action::Enable && now != PhysState::LinkUp {
        println!("the link comes up once the port at its other end is enabled and trains");
    }
    Ok(exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibscope_topo::{NodeKind, NodeRef};

    fn at() -> PortRef {
        PortRef {
            node: NodeRef {
                guid: 0x20,
                kind: NodeKind::Switch,
                name: "sw\x1b[2J1".into(),
            },
            port: 5,
            lid: 3,
            host: None,
            rail: None,
        }
    }

    fn guard(protect_bits: u8, m_key: u64) -> PortInfo {
        PortInfo {
            m_key_protect_bits: protect_bits,
            m_key,
            ..Default::default()
        }
    }

    const TIMEOUT: MadError = MadError::Timeout { attempts: 4 };

    #[test]
    fn protected_port_that_hides_its_key_explains_a_lost_set() {
        // Protect bits 1: a Get with the wrong key answers with M_Key shown as 0.
        let msg =
            explain_no_reply(SmpMethod::Set, &at(), Some(&guard(1, 0)), 0, true, &TIMEOUT).unwrap();
        assert_eq!(
            msg,
            "SubnSet PortInfo to \"sw\\x1b[2J1\" (0x0000000000000020) port 5 got no reply: \
             the port is M_Key protected (protect bits 1); pass the subnet's M_Key with --m-key"
        );
        // The wrong key sent explicitly: same.
        assert!(explain_no_reply(
            SmpMethod::Set,
            &at(),
            Some(&guard(3, 0)),
            0x99,
            true,
            &TIMEOUT
        )
        .unwrap()
        .contains("protect bits 3"));
    }

    #[test]
    fn right_key_or_no_protection_is_not_blamed() {
        // We sent the key the port shows: something else lost the reply.
        let right = guard(2, 0xabc);
        assert_eq!(
            explain_no_reply(SmpMethod::Set, &at(), Some(&right), 0xabc, true, &TIMEOUT),
            None
        );
        // No M_Key at all.
        assert_eq!(
            explain_no_reply(SmpMethod::Set, &at(), Some(&guard(0, 0)), 0, true, &TIMEOUT),
            None
        );
        // Not a timeout: the port answered, M_Key passed.
        let status = MadError::Status(ibscope_mad::header::MadStatus(0x1c));
        assert_eq!(
            explain_no_reply(SmpMethod::Set, &at(), Some(&guard(1, 0)), 0, true, &status),
            None
        );
    }

    #[test]
    fn unprotected_key_mismatch_explains_a_set_only() {
        let shown = guard(0, 0x1234);
        let msg = explain_no_reply(SmpMethod::Set, &at(), Some(&shown), 0, true, &TIMEOUT).unwrap();
        assert!(msg.contains("has an M_Key (protect bits 0)"), "{msg}");
        assert!(msg.ends_with("--m-key"));
        // A Get at protect bits 0 always succeeds: its timeout is not the key's fault.
        assert_eq!(
            explain_no_reply(SmpMethod::Get, &at(), Some(&shown), 0, true, &TIMEOUT),
            None
        );
    }

    #[test]
    fn unreadable_port_info_of_a_node_that_answers_suggests_the_key() {
        let msg = explain_no_reply(SmpMethod::Get, &at(), None, 0, true, &TIMEOUT).unwrap();
        assert!(
            msg.starts_with("SubnGet PortInfo to \"sw\\x1b[2J1\""),
            "{msg}"
        );
        assert!(msg.contains("protect bits 2 or 3"));
        assert!(!msg.contains('\x1b'), "fabric text escaped");
        assert_eq!(
            explain_no_reply(SmpMethod::Get, &at(), None, 0, false, &TIMEOUT),
            None
        );
    }

    #[test]
    fn set_payload_changes_only_the_physical_state() {
        let read = PortInfo {
            m_key: 0x77,
            gid_prefix: 0xfe80_0000_0000_0000,
            lid: 3,
            master_sm_lid: 1,
            m_key_lease_period: 60,
            m_key_protect_bits: 1,
            link_width_enabled: 3,
            link_speed_enabled: 7,
            link_speed_ext_enabled: 30,
            port_state: 4,
            port_phys_state: 5,
            link_down_default_state: 2,
            operational_vls: 4,
            vl_cap: 4,
            hoq_life: 16,
            ..Default::default()
        };
        let down = PortInfo::decode(&set_payload(&read, Action::Disable)).unwrap();
        assert_eq!((down.port_state, down.port_phys_state), (0, 3));
        assert_eq!(
            (
                down.link_width_enabled,
                down.link_speed_enabled,
                down.link_speed_ext_enabled
            ),
            (0, 0, 0)
        );
        let expect = PortInfo {
            port_state: 0,
            port_phys_state: 3,
            link_width_enabled: 0,
            link_speed_enabled: 0,
            link_speed_ext_enabled: 0,
            ..read.clone()
        };
        assert_eq!(
            down, expect,
            "everything else as read (M_Key, LID, VLs ...)"
        );
        let up = PortInfo::decode(&set_payload(&read, Action::Enable)).unwrap();
        assert_eq!(up.port_phys_state, 2);
        assert_eq!(up.m_key, 0x77);
    }
}
