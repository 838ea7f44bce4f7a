//! One route, hop by hop, as ibtracert walks it: every switch's LFT followed from a
//! source port to the port owning a destination LID, with the place it breaks.

use serde::{Deserialize, Serialize};

use super::index::{Index, Step};
use super::path::{Hop, Path, MAX_HOPS};
use crate::model::refs::{route_port, NodeRef, PortRef};
use crate::model::{End, Fabric, NodeId};

/// Where and why a route breaks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "error", rename_all = "snake_case")]
pub enum TraceError {
    /// The LFT has no entry for the LID ([`NO_ROUTE`](crate::model::NO_ROUTE), or above LinearFDBTop).
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
    #[error("LID {lid} delivered to {}, which does not own it", .at.route_text())]
    Misdelivered {
        #[serde(with = "route_port")]
        at: PortRef,
        lid: u16,
    },
    /// The destination port has no LID to address it by.
    #[error("{} has no LID", .at.route_text())]
    NoLid {
        #[serde(with = "route_port")]
        at: PortRef,
    },
    /// The source port does not exist, is not linked, or is down.
    #[error("source port {} is down or unlinked", .at.route_text())]
    SourceDown {
        #[serde(with = "route_port")]
        at: PortRef,
    },
}

/// A trace that may have broken: the hops walked so far and the error, if any.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartialTrace {
    pub hops: Vec<Hop>,
    pub error: Option<TraceError>,
    /// The node of the last hop, for code (not serialized).
    #[serde(skip)]
    pub last: Option<NodeId>,
}

/// The route from `src` (a CA port, or a switch: any port, the walk starts at its LFT) to
/// the port owning `dst_lid`, following every switch's LFT (ibtracert's walk).
pub fn trace(fabric: &Fabric, src: End, dst_lid: u16) -> Result<Path, TraceError> {
    Tracer::new(fabric).trace(src, dst_lid)
}

/// Many traces over one fabric: the channel index [`trace`] builds each time, built once.
pub struct Tracer<'a> {
    fabric: &'a Fabric,
    index: Index<'a>,
}

impl<'a> Tracer<'a> {
    pub fn new(fabric: &'a Fabric) -> Tracer<'a> {
        Tracer {
            fabric,
            index: Index::new(fabric),
        }
    }
    /// As [`trace`].
    pub fn trace(&self, src: End, dst_lid: u16) -> Result<Path, TraceError> {
        path(
            self.fabric,
            src,
            dst_lid,
            trace_with_index(self.fabric, &self.index, src, dst_lid),
        )
    }
}

/// The complete path of a trace that did not break.
fn path(
    fabric: &Fabric,
    src: End,
    dst_lid: u16,
    partial: PartialTrace,
) -> Result<Path, TraceError> {
    if let Some(e) = partial.error {
        return Err(e);
    }
    let dst = match (partial.last, partial.hops.last()) {
        (Some(node), Some(h)) => End {
            node,
            port: h.in_port.unwrap_or(src.port),
        },
        _ => src,
    };
    // A switch destination is its port 0, whatever port the packet came in on.
    let dst = match fabric.port_by_lid(dst_lid) {
        Some(owner) if owner.node == dst.node => PortRef::at(fabric, owner),
        _ => PortRef::at(fabric, dst),
    };
    Ok(Path {
        src: PortRef::at(fabric, src),
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
    let mut walk = Walk {
        fabric,
        index,
        dst_lid,
        owner: fabric.port_by_lid(dst_lid).and_then(|e| index.channel(e)),
        hops: Vec::new(),
        last: None,
    };
    // (current switch, port it came in on)
    let (at, in_port) = if fabric.node(src.node).is_switch() {
        (src.node, None)
    } else {
        match walk.leave_source(src) {
            Ok(first_switch) => first_switch,
            Err(error) => return walk.end(error),
        }
    };
    let error = walk.through_switches(at, in_port);
    walk.end(error)
}

/// A trace under way: the hops so far.
struct Walk<'a> {
    fabric: &'a Fabric,
    index: &'a Index<'a>,
    dst_lid: u16,
    /// The channel of the port owning `dst_lid`.
    owner: Option<u32>,
    hops: Vec<Hop>,
    last: Option<NodeId>,
}

impl Walk<'_> {
    fn end(self, error: Option<TraceError>) -> PartialTrace {
        PartialTrace {
            hops: self.hops,
            error,
            last: self.last,
        }
    }

    fn hop(&mut self, node: NodeId, in_port: Option<u8>, out_port: Option<u8>) {
        self.last = Some(node);
        self.hops.push(Hop {
            node: NodeRef::new(self.fabric, node),
            in_port,
            out_port,
        });
    }

    /// From a CA (or router) port to the first switch: `Ok` with that switch and the port
    /// it is entered by, `Err` when the trace ends here (delivered: `None`, or broken).
    fn leave_source(&mut self, src: End) -> Result<(NodeId, Option<u8>), Option<TraceError>> {
        let (fabric, index) = (self.fabric, self.index);
        let src_ref = PortRef::at(fabric, src);
        let Some(ch) = index.channel(src) else {
            return Err(Some(TraceError::SourceDown { at: src_ref }));
        };
        if Some(ch) == self.owner {
            self.hop(src.node, None, None);
            return Err(None);
        }
        self.hop(src.node, None, Some(src.port));
        if !index.usable(ch) {
            return Err(Some(TraceError::SourceDown { at: src_ref }));
        }
        let peer = index.peer(ch).expect("usable channel is linked");
        let peer_end = index.end(peer);
        if Some(peer) == self.owner {
            self.hop(peer_end.node, Some(peer_end.port), None);
            return Err(None);
        }
        if !index.is_switch(peer_end.node) {
            self.hop(peer_end.node, Some(peer_end.port), None);
            let at = PortRef::at(fabric, peer_end);
            let lid = self.dst_lid;
            return Err(Some(TraceError::Misdelivered { at, lid }));
        }
        Ok((peer_end.node, Some(peer_end.port)))
    }

    /// From switch `at` on, LFT by LFT, until delivered (`None`) or broken.
    fn through_switches(&mut self, mut at: NodeId, mut in_port: Option<u8>) -> Option<TraceError> {
        let (fabric, index, lid) = (self.fabric, self.index, self.dst_lid);
        let node_ref = |id: NodeId| NodeRef::new(fabric, id);
        let mut visited = vec![false; fabric.node_count()];
        loop {
            if visited[at.index()] {
                self.hop(at, in_port, None);
                return Some(TraceError::Loop { at: node_ref(at) });
            }
            visited[at.index()] = true;
            if self.hops.len() > MAX_HOPS {
                return Some(TraceError::TooManyHops);
            }
            let step = index.step(at, lid, self.owner);
            let out_port = match step {
                Step::Forward { port, .. } | Step::DeliverCa { port, .. } => Some(port),
                Step::Misdelivered { port, .. } | Step::PortDown { port } => Some(port),
                Step::DeliverSelf | Step::NoRoute | Step::LftNotRead => None,
            };
            self.hop(at, in_port, out_port);
            let switch = || node_ref(at);
            return match step {
                Step::DeliverSelf => None,
                Step::DeliverCa { peer, .. } => {
                    let e = index.end(peer);
                    self.hop(e.node, Some(e.port), None);
                    None
                }
                Step::Forward { peer, .. } => {
                    let e = index.end(peer);
                    at = e.node;
                    in_port = Some(e.port);
                    continue;
                }
                Step::Misdelivered { peer, port } => {
                    let end = match peer {
                        Some(p) => {
                            let e = index.end(p);
                            self.hop(e.node, Some(e.port), None);
                            e
                        }
                        // Port 0: the switch's own management port.
                        None => End { node: at, port },
                    };
                    let at = PortRef::at(fabric, end);
                    Some(TraceError::Misdelivered { at, lid })
                }
                Step::PortDown { port } => Some(TraceError::PortDown {
                    switch: switch(),
                    port,
                }),
                Step::NoRoute => Some(TraceError::NoRoute {
                    switch: switch(),
                    lid,
                }),
                Step::LftNotRead => Some(TraceError::LftNotRead { switch: switch() }),
            };
        }
    }
}
