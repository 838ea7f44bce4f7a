//! How routing results name directed links and paths, from the model's one node and port
//! reference ([`NodeRef`], [`PortRef`] in their routing JSON shape).

use serde::{Deserialize, Serialize};

use crate::model::refs::{route_port, NodeRef, PortRef};

/// Routes longer than this are reported as [`TraceError::TooManyHops`](super::TraceError::TooManyHops) (the directed-route
/// limit of IBA 14.2.2 bounds any sane subnet's diameter).
pub const MAX_HOPS: usize = 64;

/// A directed channel: the link leaving `from` towards `to`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ChannelRef {
    #[serde(with = "route_port")]
    pub from: PortRef,
    #[serde(with = "route_port")]
    pub to: PortRef,
}

impl std::fmt::Display for ChannelRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} -> {}", self.from.route_text(), self.to.route_text())
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
    #[serde(with = "route_port")]
    pub src: PortRef,
    pub dst_lid: u16,
    /// The port that owns `dst_lid` (a switch's port 0 for a switch LID).
    #[serde(with = "route_port")]
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
