//! Which ports are read, and at which LID their PMA answers.

use crate::model::{Fabric, NodeId};

/// A port whose PMA is to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CounterTarget {
    pub node: NodeId,
    pub port: u8,
    /// Where the PMA answers: the switch's LID, or the CA port's own.
    pub lid: u16,
}

/// The ports to read: every node, or one node (and one port of it).
pub fn targets(fabric: &Fabric, only: Option<NodeId>, port: Option<u8>) -> Vec<CounterTarget> {
    let mut out = Vec::new();
    for (id, node) in fabric.nodes() {
        if only.is_some_and(|o| o != id) {
            continue;
        }
        if node.is_switch() {
            let Some(lid) = node.lid() else { continue };
            let enhanced = node.switch.as_ref().is_some_and(|s| s.enhanced_port0);
            let first = if enhanced || port == Some(0) { 0 } else { 1 };
            for p in first..=node.num_ports {
                if port.map_or(true, |want| want == p) {
                    out.push(CounterTarget {
                        node: id,
                        port: p,
                        lid,
                    });
                }
            }
        } else {
            for p in &node.ports {
                if p.lid != 0 && port.map_or(true, |want| want == p.number) {
                    out.push(CounterTarget {
                        node: id,
                        port: p.number,
                        lid: p.lid,
                    });
                }
            }
        }
    }
    out
}
