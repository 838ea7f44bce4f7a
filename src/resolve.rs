//! Naming nodes on the command line: a LID, a node or port GUID, or a name (node-name-map
//! name or NodeDescription).

use anyhow::{bail, Result};
use ibscope_topo::namemap::{display_name, NameMap};
use ibscope_topo::{End, Fabric, NodeId};

use crate::output::{parse_guid, parse_lid};

/// The port a target names. A node (GUID or name) resolves to a switch's port 0 or a CA's
/// first port that is linked (else its first port).
pub fn resolve_port(fabric: &Fabric, names: Option<&NameMap>, text: &str) -> Result<End> {
    let (node, port) = resolve_named(fabric, names, text)?;
    Ok(match port {
        Some(port) => End { node, port },
        None => default_port(fabric, node),
    })
}

/// The node a target names, and the port when the target names one: a CA port's GUID or
/// LID. Switch ports are never named this way (a switch's LID is the whole switch's).
pub fn resolve_named(
    fabric: &Fabric,
    names: Option<&NameMap>,
    text: &str,
) -> Result<(NodeId, Option<u8>)> {
    let port_of = |end: End| {
        let ca_port = !fabric.node(end.node).is_switch();
        (end.node, ca_port.then_some(end.port))
    };
    let t = text.trim();
    if t.starts_with("0x") || t.starts_with("0X") {
        if let Some(guid) = parse_guid(t) {
            if let Some(id) = fabric.node_by_guid(guid) {
                return Ok((id, None));
            }
            if let Some(end) = fabric.port_by_guid(guid) {
                return Ok(port_of(end));
            }
            // A 0x number that is no GUID may still be a hex LID.
            if guid > 0xbfff {
                bail!("no node or port with GUID {guid:#018x} in the fabric");
            }
        }
    }
    if t.chars().all(|c| c.is_ascii_digit()) || t.starts_with("0x") || t.starts_with("0X") {
        let lid = parse_lid(t)?;
        return fabric
            .port_by_lid(lid)
            .map(port_of)
            .ok_or_else(|| anyhow::anyhow!("no port has LID {lid}"));
    }
    Ok((resolve_node_by_name(fabric, names, t)?, None))
}

/// A node by GUID or name (or the node owning a LID).
pub fn resolve_node(fabric: &Fabric, names: Option<&NameMap>, text: &str) -> Result<NodeId> {
    Ok(resolve_port(fabric, names, text)?.node)
}

fn resolve_node_by_name(fabric: &Fabric, names: Option<&NameMap>, name: &str) -> Result<NodeId> {
    let mut hits: Vec<NodeId> = fabric
        .nodes()
        .filter(|(_, n)| display_name(n, names) == name || n.description == name)
        .map(|(id, _)| id)
        .collect();
    hits.dedup();
    match hits.len() {
        1 => Ok(hits[0]),
        0 => bail!(
            "no node named {:?} (give a LID, a 0x GUID, a NodeDescription or a node-name-map name)",
            ibscope_topo::escape::for_terminal(name)
        ),
        n => {
            let guids: Vec<String> = hits
                .iter()
                .take(5)
                .map(|id| format!("{:#018x}", fabric.node(*id).guid))
                .collect();
            bail!(
                "{n} nodes are named {:?} ({}); name one by GUID",
                ibscope_topo::escape::for_terminal(name),
                guids.join(", ")
            )
        }
    }
}

fn default_port(fabric: &Fabric, id: NodeId) -> End {
    let node = fabric.node(id);
    if node.is_switch() {
        return End { node: id, port: 0 };
    }
    let linked = node.ports.iter().find(|p| {
        fabric
            .peer(End {
                node: id,
                port: p.number,
            })
            .is_some()
    });
    let port = linked
        .or_else(|| node.ports.first())
        .map(|p| p.number)
        .unwrap_or(1);
    End { node: id, port }
}

/// The LID a target is addressed by.
pub fn lid_of(fabric: &Fabric, end: End) -> Option<u16> {
    let node = fabric.node(end.node);
    if node.is_switch() {
        return node.lid();
    }
    node.port(end.port).map(|p| p.lid).filter(|&l| l != 0)
}
