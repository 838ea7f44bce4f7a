//! One switch's LFT with every entry's destination resolved, as ibroute prints it.

use serde::{Deserialize, Serialize};

use super::index;
use crate::escape;
use crate::model::refs::{route_port, PortRef};
use crate::model::{End, Fabric, NodeId, NO_ROUTE};

/// One entry of a switch's LFT, destination resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LftEntry {
    pub lid: u16,
    pub port: u8,
    /// The port that owns the LID, when known.
    #[serde(with = "route_port::option")]
    pub dest: Option<PortRef>,
    /// What the egress port is linked to (`None` for port 0 or an unlinked port).
    #[serde(with = "route_port::option")]
    pub peer: Option<PortRef>,
}

/// The valid entries (port != [`NO_ROUTE`], LID <= LinearFDBTop) of a switch's LFT, in LID order,
/// like `ibroute`. Empty when `switch` is not a switch or its LFT was not read.
pub fn dump(fabric: &Fabric, switch: NodeId) -> Vec<LftEntry> {
    let node = fabric.node(switch);
    let Some(facts) = node.switch.as_ref().filter(|_| node.is_switch()) else {
        return Vec::new();
    };
    let top = index::effective_top(facts);
    let mut out = Vec::new();
    for (lid, &port) in facts.lft.iter().enumerate().take(top + 1) {
        if port == NO_ROUTE {
            continue;
        }
        let lid = lid as u16;
        let egress = End { node: switch, port };
        out.push(LftEntry {
            lid,
            port,
            dest: fabric.port_by_lid(lid).map(|e| PortRef::at(fabric, e)),
            peer: if port == 0 {
                None
            } else {
                fabric.peer(egress).map(|e| PortRef::at(fabric, e))
            },
        });
    }
    out
}

/// `ibroute`'s layout for a [`dump`]:
///
/// ```text
/// Unicast lids [0x0-0x5] of switch Lid 1 guid 0x0000000000000010 (L1):
///   Lid  Out   Destination
///        Port     Info
/// 0x0001 000 : (Switch portguid 0x0000000000000010: 'L1')
/// 0x0002 001 : (Channel Adapter portguid 0x0000000000000101: 'h1')
/// 2 valid lids dumped
/// ```
///
/// Names are escaped for a terminal.
pub fn format_ibroute_like(fabric: &Fabric, switch: NodeId) -> String {
    use std::fmt::Write;
    let node = fabric.node(switch);
    let entries = dump(fabric, switch);
    let top = node.switch.as_ref().map(index::effective_top).unwrap_or(0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Unicast lids [0x0-0x{:x}] of switch Lid {} guid 0x{:016x} ({}):",
        top,
        node.lid().unwrap_or(0),
        node.guid,
        escape::for_terminal(&node.description)
    );
    s.push_str("  Lid  Out   Destination\n       Port     Info \n");
    for e in &entries {
        let _ = write!(s, "0x{:04x} {:03} : ", e.lid, e.port);
        // `dest` is the port owning the LID: the same lookup again, for its node.
        match fabric.port_by_lid(e.lid).filter(|_| e.dest.is_some()) {
            Some(d) => {
                let n = fabric.node(d.node);
                let kind = n.kind.node_type().name();
                let port_guid = n.port(d.port).map(|p| p.guid).unwrap_or(0);
                let _ = writeln!(
                    s,
                    "({kind} portguid 0x{port_guid:016x}: '{}')",
                    escape::for_terminal(&n.description)
                );
            }
            None => s.push_str("(unknown node and type)\n"),
        }
    }
    let _ = writeln!(s, "{} valid lids dumped ", entries.len());
    s
}
