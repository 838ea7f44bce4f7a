//! Dense, Vec-indexed view of a fabric for the hot loops of routing analysis.
//!
//! A *channel* is one port of one node, numbered `base[node] + port`; the directed link
//! leaving that port is the same channel. `peer[ch]` is the channel at the far end.

use ibscope_mad::attr::PortState;

use super::path::MAX_HOPS;
use crate::model::{End, Fabric, NodeId, SwitchFacts, NO_ROUTE};

pub(crate) const NONE: u32 = u32::MAX;

/// The highest LID a table forwards: LinearFDBTop, or the table's length when the top is 0
/// (unknown, e.g. a hand-built or modelled table).
pub(crate) fn effective_top(facts: &SwitchFacts) -> usize {
    if facts.linear_fdb_top == 0 {
        facts.lft.len().saturating_sub(1)
    } else {
        usize::from(facts.linear_fdb_top)
    }
}

/// The switches numbered 0.. in node order: (number -> node, node index -> number, or
/// [`NONE`] for a node that is no switch).
pub(crate) fn number_switches(fabric: &Fabric) -> (Vec<NodeId>, Vec<u32>) {
    let mut sw: Vec<NodeId> = Vec::new();
    let mut sw_of = vec![NONE; fabric.node_count()];
    for (id, node) in fabric.nodes() {
        if node.is_switch() {
            sw_of[id.index()] = sw.len() as u32;
            sw.push(id);
        }
    }
    (sw, sw_of)
}

/// What one switch does with a packet for one destination LID.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// The switch owns the LID (port 0) and its LFT says 0.
    DeliverSelf,
    /// Out of `port` to the CA port `peer` that owns the LID.
    DeliverCa {
        port: u8,
        peer: u32,
    },
    /// Out of `port` to another switch, arriving on channel `peer`.
    Forward {
        port: u8,
        peer: u32,
    },
    /// Out of `port` to a port that does not own the LID (`peer` None: port 0).
    Misdelivered {
        port: u8,
        peer: Option<u32>,
    },
    PortDown {
        port: u8,
    },
    NoRoute,
    LftNotRead,
}

pub(crate) struct Index<'a> {
    /// First channel of each node; `base[n + 1] - base[n]` is the node's port slots.
    pub base: Vec<u32>,
    pub peer: Vec<u32>,
    usable: Vec<bool>,
    pub chan_node: Vec<u32>,
    pub chan_port: Vec<u8>,
    switch: Vec<bool>,
    /// Per node: the LFT cut at its effective top; `None` when not read.
    lft: Vec<Option<&'a [u8]>>,
}

fn state_blocks(fabric: &Fabric, end: End) -> bool {
    match fabric.node(end.node).port(end.port) {
        Some(p) => p.state.is_some_and(|s| s != PortState::Active),
        None => false,
    }
}

impl<'a> Index<'a> {
    pub fn new(fabric: &'a Fabric) -> Index<'a> {
        let n = fabric.node_count();
        let mut slots = vec![0u32; n];
        for (id, node) in fabric.nodes() {
            let mut top = u32::from(node.num_ports);
            if let Some(p) = node.ports.last() {
                top = top.max(u32::from(p.number));
            }
            slots[id.index()] = top + 1;
        }
        for l in fabric.links() {
            for e in [l.a, l.b] {
                let s = &mut slots[e.node.index()];
                *s = (*s).max(u32::from(e.port) + 1);
            }
        }
        let mut base = Vec::with_capacity(n + 1);
        let mut acc = 0u32;
        for s in &slots {
            base.push(acc);
            acc += s;
        }
        base.push(acc);
        let total = acc as usize;
        let mut chan_node = vec![0u32; total];
        let mut chan_port = vec![0u8; total];
        for node in 0..n {
            for (k, ch) in (base[node]..base[node + 1]).enumerate() {
                chan_node[ch as usize] = node as u32;
                chan_port[ch as usize] = k as u8;
            }
        }
        let mut peer = vec![NONE; total];
        let mut usable = vec![false; total];
        for l in fabric.links() {
            let a = (base[l.a.node.index()] + u32::from(l.a.port)) as usize;
            let b = (base[l.b.node.index()] + u32::from(l.b.port)) as usize;
            peer[a] = b as u32;
            peer[b] = a as u32;
            let ok = !state_blocks(fabric, l.a) && !state_blocks(fabric, l.b);
            usable[a] = ok;
            usable[b] = ok;
        }
        let mut switch = vec![false; n];
        let mut lft = vec![None; n];
        for (id, node) in fabric.nodes() {
            if node.is_switch() {
                switch[id.index()] = true;
                if let Some(f) = node.switch.as_ref().filter(|f| !f.lft.is_empty()) {
                    let len = (effective_top(f) + 1).min(f.lft.len());
                    lft[id.index()] = Some(&f.lft[..len]);
                }
            }
        }
        Index {
            base,
            peer,
            usable,
            chan_node,
            chan_port,
            switch,
            lft,
        }
    }

    pub fn channels(&self) -> usize {
        self.peer.len()
    }
    /// The channel of a port, `None` beyond the node's ports.
    pub fn channel(&self, end: End) -> Option<u32> {
        let n = end.node.index();
        let ch = self.base.get(n)? + u32::from(end.port);
        (ch < *self.base.get(n + 1)?).then_some(ch)
    }
    pub fn end(&self, ch: u32) -> End {
        End {
            node: NodeId::new(self.chan_node[ch as usize] as usize),
            port: self.chan_port[ch as usize],
        }
    }
    pub fn peer(&self, ch: u32) -> Option<u32> {
        let p = self.peer[ch as usize];
        (p != NONE).then_some(p)
    }
    pub fn usable(&self, ch: u32) -> bool {
        self.usable[ch as usize]
    }
    pub fn is_switch(&self, node: NodeId) -> bool {
        self.switch[node.index()]
    }
    pub fn is_switch_index(&self, node: u32) -> bool {
        self.switch[node as usize]
    }
    pub fn has_lft(&self, node: NodeId) -> bool {
        self.lft[node.index()].is_some()
    }
    /// The node's port slots (ports 0..slots).
    pub fn slots(&self, node: usize) -> u32 {
        self.base[node + 1] - self.base[node]
    }
    /// The node's LFT, cut at its effective top; `None` when not read.
    pub fn table(&self, node: usize) -> Option<&'a [u8]> {
        self.lft[node]
    }

    /// One forwarding decision of switch `at` for `lid`, whose owning port is `owner`.
    #[inline]
    pub fn step(&self, at: NodeId, lid: u16, owner: Option<u32>) -> Step {
        let node = at.index();
        let Some(table) = self.lft[node] else {
            return Step::LftNotRead;
        };
        let port = table.get(usize::from(lid)).copied().unwrap_or(NO_ROUTE);
        self.step_out(node, port, owner)
    }

    /// The decision of switch `node` whose LFT (read) says `port` ([`NO_ROUTE`]: none)
    /// for a LID owned by `owner`.
    #[inline]
    pub fn step_out(&self, node: usize, port: u8, owner: Option<u32>) -> Step {
        if port == NO_ROUTE {
            return Step::NoRoute;
        }
        let ch = self.base[node] + u32::from(port);
        if port == 0 {
            return if owner == Some(ch) {
                Step::DeliverSelf
            } else {
                Step::Misdelivered { port, peer: None }
            };
        }
        if ch >= self.base[node + 1] || !self.usable[ch as usize] {
            return Step::PortDown { port };
        }
        let peer = self.peer[ch as usize];
        if owner == Some(peer) {
            Step::DeliverCa { port, peer }
        } else if self.switch[self.chan_node[peer as usize] as usize] {
            Step::Forward { port, peer }
        } else {
            Step::Misdelivered {
                port,
                peer: Some(peer),
            }
        }
    }

    /// Walk from a CA source channel (or a switch) to `lid`, pushing every channel the
    /// packet leaves through (the source's own first). `false` when the walk breaks.
    pub fn walk(&self, src: End, lid: u16, owner: Option<u32>, out: &mut Vec<u32>) -> bool {
        let mut at = src.node;
        if !self.is_switch(at) {
            let Some(ch) = self.channel(src) else {
                return false;
            };
            if Some(ch) == owner {
                return true;
            }
            if !self.usable(ch) {
                return false;
            }
            out.push(ch);
            let peer = self.peer[ch as usize];
            if Some(peer) == owner {
                return true;
            }
            at = self.end(peer).node;
            if !self.is_switch(at) {
                return false;
            }
        }
        for _ in 0..=MAX_HOPS {
            match self.step(at, lid, owner) {
                Step::DeliverSelf => return true,
                Step::DeliverCa { port, .. } => {
                    out.push(self.base[at.index()] + u32::from(port));
                    return true;
                }
                Step::Forward { port, peer } => {
                    out.push(self.base[at.index()] + u32::from(port));
                    at = self.end(peer).node;
                }
                _ => return false,
            }
        }
        false
    }
}
