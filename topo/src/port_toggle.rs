//! Taking one port's link down or letting it train again (`ibscope port disable|enable`):
//! whether the request is safe on this fabric, the directed route the SMPs take so they
//! avoid the link being changed, and the SubnSet(PortInfo) payload.

use std::collections::{HashMap, HashSet, VecDeque};

use ibscope_mad::attr::{PhysState, PortInfo, PortState};
use ibscope_mad::smp::{DrPath, PathError};

use crate::escape::quoted_for_terminal;
use crate::namemap::{display_name, NameMap};
use crate::{End, Fabric, NodeId, PortKey};

/// What is done to the port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortAction {
    /// PortPhysicalState Disabled: the link goes down and stays down until enabled.
    Disable,
    /// PortPhysicalState Polling: the port trains again.
    Enable,
}

impl PortAction {
    /// A port in PortPhysicalState `state` is where the action puts it: before the Set,
    /// nothing to do; after it, the action took.
    pub fn is_in_effect(self, state: PhysState) -> bool {
        match self {
            PortAction::Disable => state == PhysState::Disabled,
            PortAction::Enable => state != PhysState::Disabled,
        }
    }
}

/// How the SMPs reach the port, and whose M_Key guards it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToggleRoute {
    pub target: End,
    /// Directed route to the target node (entering a CA through the target port).
    pub route: DrPath,
    /// The port whose PortInfo holds the M_Key checked for the node: a switch's port 0,
    /// a CA's port itself.
    pub m_key_port: u8,
    /// With force: the route crosses the link being disabled, so no reply is expected.
    pub through_target: bool,
}

/// Why a port change is refused or cannot be routed. `what` names the node (escaped).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToggleRefused {
    #[error("port 0 of switch {what} is its management port: it has no link to change")]
    ManagementPort { what: String },
    #[error("{what} has ports 1-{num_ports}; there is no port {port}")]
    NoSuchPort {
        what: String,
        num_ports: u8,
        port: u8,
    },
    #[error("discovery did not record the local port")]
    NoLocalPort,
    #[error(
        "port {port} of {what} is on the link this host is attached by: disabling it cuts \
         this host off the fabric (and nothing could enable it again from here); add \
         --force to do it anyway"
    )]
    OwnLink { what: String, port: u8 },
    #[error(
        "disabling port {port} of {what} cuts {count} node(s) off from this host: {shown}; \
         `port enable` could not reach them again from here; add --force to do it anyway"
    )]
    CutsOff {
        what: String,
        port: u8,
        count: usize,
        /// The first few nodes cut off, and how many more.
        shown: String,
    },
    #[error("no directed route from this host to {what}")]
    NoRoute { what: String },
    #[error("route to {what}: {error}")]
    Route { what: String, error: PathError },
    #[error(
        "port {port} of {what} has no link in the discovered fabric: a CA port is reached \
         only through its own link"
    )]
    Unlinked { what: String, port: u8 },
}

/// The local port's end in the fabric, if discovery recorded one.
fn local_end(fabric: &Fabric) -> Option<End> {
    let PortKey { guid, port } = fabric.local?;
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

/// Check the request against the fabric and pick the route. Refused without `force`:
/// disabling the link this host is attached by, or a link whose loss cuts nodes off from
/// this host (enabling could not reach them again), e.g. a CA's only link.
pub fn route(
    fabric: &Fabric,
    names: Option<&NameMap>,
    target: End,
    action: PortAction,
    force: bool,
) -> Result<ToggleRoute, ToggleRefused> {
    let node = fabric.node(target.node);
    let what = node_text(fabric, names, target.node);
    if target.port == 0 && node.is_switch() {
        return Err(ToggleRefused::ManagementPort { what });
    }
    if target.port == 0 || target.port > node.num_ports {
        return Err(ToggleRefused::NoSuchPort {
            what,
            num_ports: node.num_ports,
            port: target.port,
        });
    }
    let local = local_end(fabric).ok_or(ToggleRefused::NoLocalPort)?;
    let peer = fabric.peer(target);
    let disable = action == PortAction::Disable;
    let own_link = local == target || peer == Some(local);
    if disable && own_link && !force {
        return Err(ToggleRefused::OwnLink {
            what,
            port: target.port,
        });
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
            return Err(ToggleRefused::CutsOff {
                what,
                port: target.port,
                count: cut.len(),
                shown: format!("{}{more}", shown.join(", ")),
            });
        }
    }
    let (route, through_target) = if node.is_switch() {
        match without.get(&target.node) {
            Some(r) => (r.clone(), false),
            None => match all.get(&target.node) {
                Some(r) => (r.clone(), true),
                None => return Err(ToggleRefused::NoRoute { what }),
            },
        }
    } else {
        // A CA port is set through itself: the route enters by the target port.
        let entry = match (peer, local == target) {
            (_, true) => DrPath::local(),
            (Some(p), false) => {
                let Some(to_peer) = all.get(&p.node) else {
                    return Err(ToggleRefused::NoRoute { what });
                };
                to_peer
                    .child(p.port)
                    .map_err(|error| ToggleRefused::Route { what, error })?
            }
            (None, false) => {
                return Err(ToggleRefused::Unlinked {
                    what,
                    port: target.port,
                })
            }
        };
        (entry, disable && local != target)
    };
    Ok(ToggleRoute {
        target,
        route,
        m_key_port: if node.is_switch() { 0 } else { target.port },
        through_target,
    })
}

/// The SubnSet(PortInfo) payload: the port's PortInfo as read, PortState NoChange, the
/// new PortPhysicalState, and the enabled width/speed fields at NoChange so nothing else
/// moves (a simulator re-derives the active rate from them).
pub fn set_payload(read: &PortInfo, action: PortAction) -> [u8; 64] {
    let info = PortInfo {
        port_state: PortState::NoChange.code(),
        port_phys_state: match action {
            PortAction::Disable => PhysState::Disabled.code(),
            PortAction::Enable => PhysState::Polling.code(),
        },
        link_width_enabled: 0,
        link_speed_enabled: 0,
        link_speed_ext_enabled: 0,
        ..read.clone()
    };
    info.to_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let down = PortInfo::decode(&set_payload(&read, PortAction::Disable)).unwrap();
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
        let up = PortInfo::decode(&set_payload(&read, PortAction::Enable)).unwrap();
        assert_eq!(up.port_phys_state, 2);
        assert_eq!(up.m_key, 0x77);
    }
}
