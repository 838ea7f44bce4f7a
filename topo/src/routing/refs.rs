//! How routing results name nodes, ports, directed links and paths: for people (GUID,
//! description) and for code (the fabric's node ids, not serialized).

use serde::{Deserialize, Serialize};

use crate::escape;
use crate::model::{End, Fabric, NodeId, NodeKind};

/// Routes longer than this are reported as [`TraceError::TooManyHops`](super::TraceError::TooManyHops) (the directed-route
/// limit of IBA 14.2.2 bounds any sane subnet's diameter).
pub const MAX_HOPS: usize = 64;

/// A node, identified for people (GUID, description) and for code (`id`, not serialized).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeRef {
    #[serde(skip)]
    pub id: NodeId,
    #[serde(with = "ibscope_mad::codes::guid")]
    pub guid: u64,
    pub kind: NodeKind,
    /// Raw NodeDescription: untrusted text.
    pub name: String,
}

impl NodeRef {
    pub fn new(fabric: &Fabric, id: NodeId) -> NodeRef {
        let node = fabric.node(id);
        NodeRef {
            id,
            guid: node.guid,
            kind: node.kind,
            name: node.description.clone(),
        }
    }
}

impl std::fmt::Display for NodeRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "\"{}\" ({:#018x})",
            escape::for_terminal(&self.name),
            self.guid
        )
    }
}

/// A port of a node.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PortRef {
    pub node: NodeRef,
    pub port: u8,
}

impl PortRef {
    pub fn new(fabric: &Fabric, end: End) -> PortRef {
        PortRef {
            node: NodeRef::new(fabric, end.node),
            port: end.port,
        }
    }
    pub fn end(&self) -> End {
        End {
            node: self.node.id,
            port: self.port,
        }
    }
}

impl std::fmt::Display for PortRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}[{}]", self.node, self.port)
    }
}

/// A directed channel: the link leaving `from` towards `to`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChannelRef {
    pub from: PortRef,
    pub to: PortRef,
}

impl std::fmt::Display for ChannelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} -> {}", self.from, self.to)
    }
}

/// One node on a path. The source has no `in_port`; the destination has no `out_port`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hop {
    pub node: NodeRef,
    pub in_port: Option<u8>,
    pub out_port: Option<u8>,
}

/// A complete route from a source port to the port owning the destination LID.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Path {
    pub src: PortRef,
    pub dst_lid: u16,
    /// The port that owns `dst_lid` (a switch's port 0 for a switch LID).
    pub dst: PortRef,
    /// Source first, destination last.
    pub hops: Vec<Hop>,
}

impl Path {
    /// Links traversed.
    pub fn link_hops(&self) -> usize {
        self.hops.len().saturating_sub(1)
    }
}
