//! Routing analysis over a [`Fabric`] whose switch linear forwarding tables (LFTs) were read
//! (`DiscoverOptions { read_lft: true }`) or modelled ([`compute_minhop_lfts`]).
//!
//! Everything here is a pure function of the fabric (IBA 18.2.4: a switch forwards a unicast
//! packet out of the port its LFT holds for the destination LID; LIDs above LinearFDBTop are
//! dropped):
//!
//! - [`trace`]: the path of one (source port, destination LID) pair, hop by hop, like
//!   `ibtracert`, with an error that names where the path breaks;
//! - [`dump`]: one switch's LFT with each entry's destination resolved, like `ibroute`
//!   ([`format_ibroute_like`] prints it in ibroute's layout);
//! - [`check`]: every CA port to every destination LID: unreachable destinations, black
//!   holes, forwarding loops, hop counts, route balance (per switch port and per layer, plus
//!   `check_lft_balance`'s rule) and credit loops in the channel dependency graph;
//! - [`load`]: places a traffic pattern (ring, pairs, all-to-all) on its routes and predicts
//!   each flow's rate with a max-min fair share of link capacity;
//! - [`compute_minhop_lfts`]: a modelling utility that fills LFTs the way a min-hop SM
//!   would, for what-if planning and tests.
//!
//! Conventions shared by these functions:
//! - A port is usable for forwarding when it is linked and neither end reports a known
//!   PortState other than Active (state 0 = unknown, as in topology files, counts as usable:
//!   a file has no states to judge by).
//! - Hop counts are links traversed: host to host across one leaf switch is 2.
//! - A switch's LID lives on its port 0: the owning switch must have `lft[lid] == 0`.
//! - A table with `linear_fdb_top == 0` is taken as unknown-top and bounded by its length.
//! - Node names in results are the raw NodeDescription (untrusted): escape before display
//!   ([`crate::escape::for_terminal`]); the `Display` impls here already do.

mod check;
mod index;
mod load;
mod minhop;

use serde::{Deserialize, Serialize};

use crate::escape;
use crate::model::{End, Fabric, NodeId, NodeKind, NO_ROUTE};

pub use check::{
    check, BreakKind, BreakSummary, CdgStats, CheckOptions, CreditLoop, Direction, ForwardingLoop,
    LayerStats, PortLoad, RouteBalance, RouteReport, SwitchLftBalance, UnreachableDest,
};
pub use load::{
    load, load_with, FlowResult, LinkLoad, LoadError, LoadOptions, LoadReport, Pattern,
};
pub use minhop::{compute_minhop_lfts, compute_minhop_lfts_with, MinhopOptions};

use index::{Index, Step};

/// Routes longer than this are reported as [`TraceError::TooManyHops`] (the directed-route
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

/// Where and why a route breaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum TraceError {
    /// The LFT has no entry for the LID ([`NO_ROUTE`], or above LinearFDBTop).
    #[error("no route to LID {lid} at switch {switch}")]
    NoRoute { switch: NodeRef, lid: u16 },
    /// The egress port is not linked, not active, or beyond the switch's ports.
    #[error("egress port {port} of {switch} is down or unlinked")]
    PortDown { switch: NodeRef, port: u8 },
    /// A switch reached twice: the LFTs form a forwarding loop.
    #[error("forwarding loop: {at} reached twice")]
    Loop { at: NodeRef },
    #[error("route longer than {MAX_HOPS} hops")]
    TooManyHops,
    #[error("LFT of switch {switch} was not read")]
    LftNotRead { switch: NodeRef },
    /// Delivered to a port that does not own the LID (a CA, or a switch's port 0).
    #[error("LID {lid} delivered to {at}, which does not own it")]
    Misdelivered { at: PortRef, lid: u16 },
    /// The destination port has no LID to address it by.
    #[error("{at} has no LID")]
    NoLid { at: PortRef },
    /// The source port does not exist, is not linked, or is down.
    #[error("source port {at} is down or unlinked")]
    SourceDown { at: PortRef },
}

/// A trace that may have broken: the hops walked so far and the error, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartialTrace {
    pub hops: Vec<Hop>,
    pub error: Option<TraceError>,
}

/// The route from `src` (a CA port, or a switch: any port, the walk starts at its LFT) to
/// the port owning `dst_lid`, following every switch's LFT (ibtracert's walk).
pub fn trace(fabric: &Fabric, src: End, dst_lid: u16) -> Result<Path, TraceError> {
    let partial = trace_partial(fabric, src, dst_lid);
    if let Some(e) = partial.error {
        return Err(e);
    }
    let dst = partial
        .hops
        .last()
        .map(|h| PortRef {
            node: h.node.clone(),
            port: h.in_port.unwrap_or(src.port),
        })
        .unwrap_or_else(|| PortRef::new(fabric, src));
    // A switch destination is its port 0, whatever port the packet came in on.
    let dst = match fabric.port_by_lid(dst_lid) {
        Some(owner) if owner.node == dst.node.id => PortRef::new(fabric, owner),
        _ => dst,
    };
    Ok(Path {
        src: PortRef::new(fabric, src),
        dst_lid,
        dst,
        hops: partial.hops,
    })
}

/// Like [`trace`] but keeps the hops walked before a break (ibtracert prints them too).
pub fn trace_partial(fabric: &Fabric, src: End, dst_lid: u16) -> PartialTrace {
    let index = Index::new(fabric);
    trace_with_index(fabric, &index, src, dst_lid)
}

pub(crate) fn trace_with_index(
    fabric: &Fabric,
    index: &Index,
    src: End,
    dst_lid: u16,
) -> PartialTrace {
    let owner = fabric.port_by_lid(dst_lid).and_then(|e| index.channel(e));
    let mut hops: Vec<Hop> = Vec::new();
    let node_ref = |id: NodeId| NodeRef::new(fabric, id);
    let fail = |hops: Vec<Hop>, e: TraceError| PartialTrace {
        hops,
        error: Some(e),
    };
    // (current switch, port it came in on)
    let (mut at, mut in_port) = if fabric.node(src.node).is_switch() {
        (src.node, None)
    } else {
        let src_ref = PortRef::new(fabric, src);
        let Some(ch) = index.channel(src) else {
            return fail(hops, TraceError::SourceDown { at: src_ref });
        };
        if Some(ch) == owner {
            hops.push(Hop {
                node: node_ref(src.node),
                in_port: None,
                out_port: None,
            });
            return PartialTrace { hops, error: None };
        }
        hops.push(Hop {
            node: node_ref(src.node),
            in_port: None,
            out_port: Some(src.port),
        });
        if !index.usable(ch) {
            return fail(hops, TraceError::SourceDown { at: src_ref });
        }
        let peer = index.peer(ch).expect("usable channel is linked");
        let peer_end = index.end(peer);
        if Some(peer) == owner {
            hops.push(Hop {
                node: node_ref(peer_end.node),
                in_port: Some(peer_end.port),
                out_port: None,
            });
            return PartialTrace { hops, error: None };
        }
        if !index.is_switch(peer_end.node) {
            hops.push(Hop {
                node: node_ref(peer_end.node),
                in_port: Some(peer_end.port),
                out_port: None,
            });
            let at = PortRef::new(fabric, peer_end);
            return fail(hops, TraceError::Misdelivered { at, lid: dst_lid });
        }
        (peer_end.node, Some(peer_end.port))
    };
    let mut visited = vec![false; fabric.node_count()];
    loop {
        if visited[at.index()] {
            hops.push(Hop {
                node: node_ref(at),
                in_port,
                out_port: None,
            });
            return fail(hops, TraceError::Loop { at: node_ref(at) });
        }
        visited[at.index()] = true;
        if hops.len() > MAX_HOPS {
            return fail(hops, TraceError::TooManyHops);
        }
        let step = index.step(at, dst_lid, owner);
        let out_port = match step {
            Step::Forward { port, .. } | Step::DeliverCa { port, .. } => Some(port),
            Step::Misdelivered { port, .. } | Step::PortDown { port } => Some(port),
            Step::DeliverSelf | Step::NoRoute | Step::LftNotRead => None,
        };
        hops.push(Hop {
            node: node_ref(at),
            in_port,
            out_port,
        });
        match step {
            Step::DeliverSelf => return PartialTrace { hops, error: None },
            Step::DeliverCa { peer, .. } => {
                let e = index.end(peer);
                hops.push(Hop {
                    node: node_ref(e.node),
                    in_port: Some(e.port),
                    out_port: None,
                });
                return PartialTrace { hops, error: None };
            }
            Step::Forward { peer, .. } => {
                let e = index.end(peer);
                at = e.node;
                in_port = Some(e.port);
            }
            Step::Misdelivered { peer, port } => {
                let end = match peer {
                    Some(p) => {
                        let e = index.end(p);
                        hops.push(Hop {
                            node: node_ref(e.node),
                            in_port: Some(e.port),
                            out_port: None,
                        });
                        e
                    }
                    // Port 0: the switch's own management port.
                    None => End { node: at, port },
                };
                let at = PortRef::new(fabric, end);
                return fail(hops, TraceError::Misdelivered { at, lid: dst_lid });
            }
            Step::PortDown { port } => {
                return fail(
                    hops,
                    TraceError::PortDown {
                        switch: node_ref(at),
                        port,
                    },
                )
            }
            Step::NoRoute => {
                return fail(
                    hops,
                    TraceError::NoRoute {
                        switch: node_ref(at),
                        lid: dst_lid,
                    },
                )
            }
            Step::LftNotRead => {
                return fail(
                    hops,
                    TraceError::LftNotRead {
                        switch: node_ref(at),
                    },
                )
            }
        }
    }
}

/// One entry of a switch's LFT, destination resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LftEntry {
    pub lid: u16,
    pub port: u8,
    /// The port that owns the LID, when known.
    pub dest: Option<PortRef>,
    /// What the egress port is linked to (`None` for port 0 or an unlinked port).
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
            dest: fabric.port_by_lid(lid).map(|e| PortRef::new(fabric, e)),
            peer: if port == 0 {
                None
            } else {
                fabric.peer(egress).map(|e| PortRef::new(fabric, e))
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
        match &e.dest {
            Some(d) => {
                let n = fabric.node(d.node.id);
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
