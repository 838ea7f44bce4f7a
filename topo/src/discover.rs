//! Fabric discovery: a directed-route breadth-first sweep from the local port.
//!
//! Every reply is handled as it arrives and immediately yields the follow-up queries, so
//! the transport keeps its window full. MAD budget per switch: NodeInfo, NodeDescription,
//! SwitchInfo, PortInfo for ports 0..=N and one NodeInfo probe per linked port whose peer is
//! not already known (the link end identified from the other side is never asked again).
//! Per CA port: one NodeInfo probe, NodeDescription once per node, PortInfo.
//!
//! FDR10: on the Mellanox devices libibnetdisc asks ([`MlnxExtPortInfo::answered_by`]), a
//! port up at QDR with no extended speed active is asked for the vendor attribute
//! MlnxExtPortInfo, whose LinkSpeedActive says whether it really runs FDR10 (one more SMP
//! per such port, as ibnetdiscover sends). A node that does not answer it is normal, not a
//! discovery error: the port keeps the speed PortInfo gave.
//!
//! Nothing aborts the sweep: a query that still fails after the transport's retries is
//! retried once more in a final round, and what still fails is recorded on the node or port
//! and in [`DiscoveryReport`].

// The rarer per-port bookkeeping (FDR10 ports) keyed by node and port: a fast hasher
// (foldhash, seeded per process). What every node has lives in `DiscoverySweep::nodes` instead.
type FastMap<K, V> = foldhash::HashMap<K, V>;
use std::time::Instant;

use ibscope_mad::attr::{
    LinearForwardingTableBlock, MlnxExtPortInfo, NodeDescription, NodeInfo, PhysState, PortInfo,
    PortState, SwitchInfo,
};
use ibscope_mad::engine::{DirectedGet, FollowUps, MadError, PackedRequest, Response};
use ibscope_mad::smp::DrPath;

use crate::model::{
    DiscoveryReport, End, Fabric, Node, NodeId, NodeKind, Port, PortKey, SwitchFacts,
};

/// What discovery needs from a transport: run a batch, hand each completion to a callback
/// that may queue follow-ups. `ibscope_mad::engine::Engine` implements it; tests use fakes.
/// Completion callback: the request's token, its outcome, and a queue for follow-ups.
pub type OnDone<'a, T> = dyn FnMut(T, Result<Response, MadError>, &mut FollowUps<T>) + 'a;

pub trait SmpExecutor {
    /// Run `requests` (framed, or packed where they were made), and the follow-ups their
    /// completions push.
    fn execute<T, R: Into<PackedRequest>>(
        &mut self,
        requests: impl IntoIterator<Item = (T, R)>,
        on_done: &mut OnDone<'_, T>,
    );
    /// MADs sent so far (for the report and benchmarks).
    fn mads_sent(&self) -> u64;
}

impl<P: ibscope_mad::engine::MadPort> SmpExecutor for ibscope_mad::engine::Engine<P> {
    fn execute<T, R: Into<PackedRequest>>(
        &mut self,
        requests: impl IntoIterator<Item = (T, R)>,
        on_done: &mut OnDone<'_, T>,
    ) {
        self.run(requests, |t, r, q| on_done(t, r, q));
    }
    fn mads_sent(&self) -> u64 {
        self.stats().sent
    }
}

/// Answer `requests` and the follow-ups they bring, one at a time in order, with
/// `answer`: how the unit tests' fake fabrics execute. Returns how many were answered.
#[cfg(test)]
pub(crate) fn execute_in_order<T, R: Into<PackedRequest>>(
    requests: impl IntoIterator<Item = (T, R)>,
    on_done: &mut OnDone<'_, T>,
    mut answer: impl FnMut(&ibscope_mad::engine::Request) -> Result<Response, MadError>,
) -> u64 {
    let mut queue: std::collections::VecDeque<(T, ibscope_mad::engine::Request)> = requests
        .into_iter()
        .map(|(t, r)| (t, r.into().to_request()))
        .collect();
    let mut follow_ups = FollowUps::new();
    let mut answered = 0;
    while let Some((token, request)) = queue.pop_front() {
        answered += 1;
        let result = answer(&request);
        on_done(token, result, &mut follow_ups);
        queue.extend(follow_ups.drain());
    }
    answered
}

/// The transport of code that runs without one (an offline evaluation): it cannot be
/// made, so nothing is ever sent through it.
pub enum NoTransport {}

impl SmpExecutor for NoTransport {
    fn execute<T, R: Into<PackedRequest>>(
        &mut self,
        _: impl IntoIterator<Item = (T, R)>,
        _: &mut OnDone<'_, T>,
    ) {
        match *self {}
    }
    fn mads_sent(&self) -> u64 {
        match *self {}
    }
}

#[derive(Debug, Clone, Default)]
pub struct DiscoverOptions {
    /// Also read every switch's linear forwarding table (needed by routing analysis).
    pub read_lft: bool,
}

/// Progress events, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    pub nodes: usize,
    pub pending: usize,
    pub mads: u64,
}

/// One outstanding query of the sweep.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum DiscoveryQuery {
    /// NodeInfo at the end of `path`; `from` is the port we left through (None: local node).
    Probe {
        path: DrPath,
        from: Option<End>,
    },
    Description {
        node: NodeId,
    },
    PortInfo {
        node: NodeId,
        port: u8,
    },
    SwitchInfo {
        node: NodeId,
    },
    Lft {
        node: NodeId,
        block: u32,
    },
    /// Mellanox's MlnxExtPortInfo of a port that may run FDR10, along `path` (a CA port's
    /// must enter through that port, as its PortInfo did).
    MlnxExt {
        node: NodeId,
        port: u8,
        path: DrPath,
    },
}

/// A set of port numbers (0-255), one bit each.
#[derive(Debug, Clone, Copy, Default)]
struct PortBits([u64; 4]);

impl PortBits {
    fn contains(&self, port: u8) -> bool {
        self.0[usize::from(port / 64)] & (1 << (port % 64)) != 0
    }
    /// Add `port`; whether it was not there yet.
    fn insert(&mut self, port: u8) -> bool {
        let word = &mut self.0[usize::from(port / 64)];
        let bit = 1 << (port % 64);
        let added = *word & bit == 0;
        *word |= bit;
        added
    }
}

/// What the sweep keeps of one node besides the model. Kept in a vector by graph index
/// rather than in maps keyed by node: every reply looks some of it up, and at 100k nodes
/// the hashing showed in profiles (the graph only grows, so an index never moves).
#[derive(Debug, Clone, Default)]
struct NodeSweep {
    /// The node's directed route, once reached.
    path: Option<DrPath>,
    /// Ports whose peer is known: never probe them.
    known_peer: PortBits,
    /// Ports whose PortInfo was already requested, so a CA reached twice is asked once
    /// per port.
    asked_port: PortBits,
    /// Port 0 CapabilityMask and CapabilityMask2 of a switch, once its port 0 PortInfo has
    /// arrived. A switch's external ports leave both reserved, so their extended speeds
    /// are decoded with port 0's ([`PortInfo::with_capabilities_of`]).
    port0_cap: Option<(u32, u16)>,
}

/// A Get SMP of each attribute discovery asks, framed once along the empty route: a
/// request is a packed copy aimed along its own route with its modifier, which costs far
/// less than framing a million SMPs one by one.
struct GetTemplates {
    node_info: DirectedGet,
    node_description: DirectedGet,
    port_info: DirectedGet,
    switch_info: DirectedGet,
    lft: DirectedGet,
    mlnx_ext: DirectedGet,
}

impl GetTemplates {
    fn new() -> GetTemplates {
        GetTemplates {
            node_info: DirectedGet::new::<NodeInfo>(),
            node_description: DirectedGet::new::<NodeDescription>(),
            port_info: DirectedGet::new::<PortInfo>(),
            switch_info: DirectedGet::new::<SwitchInfo>(),
            lft: DirectedGet::new::<LinearForwardingTableBlock>(),
            mlnx_ext: DirectedGet::new::<MlnxExtPortInfo>(),
        }
    }

    /// The Get `q` makes, along `path`: the same request `Request::get` frames, packed.
    fn get(&self, q: &DiscoveryQuery, path: &DrPath) -> PackedRequest {
        let (template, modifier) = match q {
            DiscoveryQuery::Probe { .. } => (&self.node_info, 0),
            DiscoveryQuery::Description { .. } => (&self.node_description, 0),
            DiscoveryQuery::PortInfo { port, .. } => (&self.port_info, u32::from(*port)),
            DiscoveryQuery::SwitchInfo { .. } => (&self.switch_info, 0),
            DiscoveryQuery::Lft { block, .. } => (&self.lft, *block),
            DiscoveryQuery::MlnxExt { port, .. } => (&self.mlnx_ext, u32::from(*port)),
        };
        template.along(path, modifier)
    }
}

struct DiscoverySweep {
    fabric: Fabric,
    /// Per node, by graph index.
    nodes: Vec<NodeSweep>,
    templates: GetTemplates,
    failures: Vec<(DiscoveryQuery, MadError)>,
    options: DiscoverOptions,
    /// External-port PortInfos that arrived before their port 0's: decoded again then.
    speeds_pending: FastMap<NodeId, Vec<(u8, PortInfo)>>,
    /// The PortInfo of each port asked for MlnxExtPortInfo, to decode its speeds again
    /// with the answer.
    mlnx_asked: FastMap<End, PortInfo>,
    /// MlnxExtPortInfo answers.
    mlnx: FastMap<End, MlnxExtPortInfo>,
}

/// The speed facts of a PortInfo and the port's MlnxExtPortInfo (when answered);
/// `info.capability_mask` decides on extended speeds.
fn set_speeds(port: &mut Port, info: &PortInfo, mlnx: Option<&MlnxExtPortInfo>) {
    port.speed_active = info.speed_active_with(mlnx);
    port.speed_supported = info.speeds_supported_with(mlnx);
    port.speed_enabled = info.speeds_enabled_with(mlnx);
}

/// What a PortInfo says of a port: LID, states, widths, speeds (decoded with the reply's
/// own CapabilityMask; a switch's external ports are decoded again with port 0's), MTUs.
pub(crate) fn apply_port_info(port: &mut Port, info: &PortInfo, mlnx: Option<&MlnxExtPortInfo>) {
    port.lid = info.lid;
    port.lmc = info.lmc;
    port.state = Some(info.state());
    port.phys_state = Some(info.phys_state());
    port.width_active = info.width_active();
    port.width_supported = info.widths_supported();
    port.width_enabled = info.widths_enabled();
    set_speeds(port, info, mlnx);
    port.mtu_active = info.neighbor_mtu;
    port.mtu_cap = info.mtu_cap;
    port.capability_mask = info.capability_mask;
}

/// Rounds of retries after the sweep for queries that failed in it.
const RETRY_ROUNDS: usize = 3;

impl DiscoverySweep {
    /// The directed route of `node`, once reached.
    fn path(&self, node: NodeId) -> Option<&DrPath> {
        self.nodes.get(node.index())?.path.as_ref()
    }

    /// What the sweep keeps of `node`, made on first use.
    fn node_sweep(&mut self, node: NodeId) -> &mut NodeSweep {
        let i = node.index();
        if i >= self.nodes.len() {
            self.nodes.resize_with(i + 1, NodeSweep::default);
        }
        &mut self.nodes[i]
    }

    /// Whether the peer of `end` is known.
    fn knows_peer(&self, end: End) -> bool {
        self.nodes
            .get(end.node.index())
            .is_some_and(|n| n.known_peer.contains(end.port))
    }

    /// A switch's port 0 capability masks, as a PortInfo to decode its other ports with.
    fn port0_cap(&self, node: NodeId) -> Option<PortInfo> {
        let (capability_mask, capability_mask2) = self.nodes.get(node.index())?.port0_cap?;
        Some(PortInfo {
            capability_mask,
            capability_mask2,
            ..PortInfo::default()
        })
    }

    fn request(&self, q: &DiscoveryQuery) -> Option<PackedRequest> {
        let path = match q {
            DiscoveryQuery::Probe { path, .. } | DiscoveryQuery::MlnxExt { path, .. } => path,
            DiscoveryQuery::Description { node }
            | DiscoveryQuery::PortInfo { node, .. }
            | DiscoveryQuery::SwitchInfo { node }
            | DiscoveryQuery::Lft { node, .. } => self.path(*node)?,
        };
        Some(self.templates.get(q, path))
    }

    /// The `k`-th directed route to a switch through one of its known neighbour switches
    /// (None: no such neighbour, or not a switch).
    fn alternate_path(&self, node: NodeId, k: usize) -> Option<DrPath> {
        let n = self.fabric.node(node);
        if !n.is_switch() {
            return None;
        }
        // By the links, not the port records: a switch cut off right after its NodeInfo has
        // no PortInfo yet, but other switches' probes have found it over their links.
        let options: Vec<DrPath> = (1..=n.num_ports)
            .filter_map(|port| {
                let peer = self.fabric.peer(End { node, port })?;
                if !self.fabric.node(peer.node).is_switch() {
                    return None;
                }
                self.path(peer.node)?.child(peer.port).ok()
            })
            .collect();
        if options.is_empty() {
            return None;
        }
        options.get(k % options.len()).cloned()
    }

    /// `q` by an alternate route (see [`DiscoverySweep::alternate_path`]), if there is one.
    fn alternate_request(&self, q: &DiscoveryQuery, k: usize) -> Option<PackedRequest> {
        let path = match q {
            DiscoveryQuery::Probe {
                from: Some(end), ..
            } => self.alternate_path(end.node, k)?.child(end.port).ok()?,
            DiscoveryQuery::Probe { from: None, .. } | DiscoveryQuery::MlnxExt { .. } => {
                return None
            }
            DiscoveryQuery::Description { node }
            | DiscoveryQuery::SwitchInfo { node }
            | DiscoveryQuery::Lft { node, .. } => self.alternate_path(*node, k)?,
            DiscoveryQuery::PortInfo { node, .. } if self.fabric.node(*node).is_switch() => {
                self.alternate_path(*node, k)?
            }
            DiscoveryQuery::PortInfo { node, port } => {
                // A CA port's PortInfo must enter through that port: vary the route to the
                // switch in front of it.
                let peer = self.fabric.peer(End {
                    node: *node,
                    port: *port,
                })?;
                self.alternate_path(peer.node, k)?.child(peer.port).ok()?
            }
        };
        Some(self.templates.get(q, &path))
    }

    fn push(&self, q: DiscoveryQuery, out: &mut FollowUps<DiscoveryQuery>) {
        if let Some(r) = self.request(&q) {
            out.push_packed(q, r);
        }
    }

    fn handle(
        &mut self,
        q: DiscoveryQuery,
        result: Result<Response, MadError>,
        out: &mut FollowUps<DiscoveryQuery>,
    ) {
        let resp = match result {
            Ok(r) => r,
            // Not answering the vendor attribute is normal (libibnetdisc goes on likewise).
            Err(e) if matches!(q, DiscoveryQuery::MlnxExt { .. }) => {
                tracing::debug!("{}: {e}", self.describe(&q));
                return;
            }
            Err(e) => {
                self.failures.push((q, e));
                return;
            }
        };
        match q {
            DiscoveryQuery::Probe { path, from } => match resp.decode::<NodeInfo>() {
                Ok(info) => self.on_node_info(path, from, info, out),
                Err(e) => self.record_decode(&DiscoveryQuery::Probe { path, from }, &e.to_string()),
            },
            DiscoveryQuery::Description { node } => match resp.decode::<NodeDescription>() {
                Ok(d) => {
                    let n = self.fabric.node_mut(node);
                    n.description = d.text();
                    // The description tells a SHARP aggregation node from a host's CA.
                    if let Some(kind) = NodeKind::classify(n.kind.node_type(), &n.description) {
                        n.kind = kind;
                    }
                }
                Err(e) => self.record_decode(&q, &e.to_string()),
            },
            DiscoveryQuery::PortInfo { node, port } => match resp.decode::<PortInfo>() {
                Ok(info) => self.on_port_info(node, port, &info, out),
                Err(e) => self.record_decode(&q, &e.to_string()),
            },
            DiscoveryQuery::SwitchInfo { node } => match resp.decode::<SwitchInfo>() {
                Ok(info) => self.on_switch_info(node, &info, out),
                Err(e) => self.record_decode(&q, &e.to_string()),
            },
            DiscoveryQuery::Lft { node, block } => {
                match resp.decode::<LinearForwardingTableBlock>() {
                    Ok(lft) => {
                        if let Some(sw) = self.fabric.node_mut(node).switch.as_mut() {
                            let start = block as usize * 64;
                            for (i, &port) in lft.ports.iter().enumerate() {
                                if let Some(slot) = sw.lft.get_mut(start + i) {
                                    *slot = port;
                                }
                            }
                        }
                    }
                    Err(e) => self.record_decode(&q, &e.to_string()),
                }
            }
            DiscoveryQuery::MlnxExt { node, port, .. } => match resp.decode::<MlnxExtPortInfo>() {
                Ok(m) => self.on_mlnx_ext(node, port, m),
                Err(e) => tracing::debug!("{}: malformed reply: {e}", self.describe(&q)),
            },
        }
    }

    fn record_decode(&mut self, q: &DiscoveryQuery, msg: &str) {
        let text = format!("{}: malformed reply: {msg}", self.describe(q));
        self.fabric.report.errors.push(text);
    }

    fn on_node_info(
        &mut self,
        path: DrPath,
        from: Option<End>,
        info: NodeInfo,
        out: &mut FollowUps<DiscoveryQuery>,
    ) {
        let kind = NodeKind::classify(info.kind(), "").unwrap_or(NodeKind::Ca);
        let entered = info.local_port_num;
        let existing = self.fabric.node_by_guid(info.node_guid);
        let id = match existing {
            Some(id) => {
                let n = self.fabric.node(id);
                if n.kind.node_type() != kind.node_type() || n.num_ports != info.num_ports {
                    self.duplicate_guid(info.node_guid, &path);
                    return;
                }
                id
            }
            None => {
                let node = Node {
                    guid: info.node_guid,
                    system_image_guid: info.system_image_guid,
                    kind,
                    vendor_id: info.vendor_id,
                    device_id: info.device_id,
                    revision: info.revision,
                    description: String::new(),
                    num_ports: info.num_ports,
                    // A switch has one port GUID, port 0's; external ports share it.
                    ports: if kind == NodeKind::Switch {
                        // Every port's PortInfo is asked: room for all of them at once.
                        let mut ports = Vec::with_capacity(usize::from(info.num_ports) + 1);
                        ports.push(Port {
                            guid: info.port_guid,
                            ..Port::new(0)
                        });
                        ports
                    } else {
                        // The port entered by; a CA's other ports only when reached too.
                        Vec::with_capacity(1)
                    },
                    dr_path: Some(path.to_string()),
                    switch: None,
                    errors: Vec::new(),
                };
                // Indexed by node GUID only: `finish` indexes the rest once ports, LIDs
                // and descriptions are known.
                let id = match self.fabric.add_node_guid_indexed(node) {
                    Ok(id) => id,
                    Err(_) => return,
                };
                self.node_sweep(id).path = Some(path.clone());
                self.push(DiscoveryQuery::Description { node: id }, out);
                if kind == NodeKind::Switch {
                    self.fabric.node_mut(id).switch = Some(SwitchFacts::default());
                    self.push(DiscoveryQuery::SwitchInfo { node: id }, out);
                    for p in 0..=info.num_ports {
                        self.ask_port(id, p, out);
                    }
                }
                if self.fabric.local.is_none() && from.is_none() {
                    let port = if kind == NodeKind::Switch { 0 } else { entered };
                    self.fabric.local = Some(PortKey {
                        guid: info.node_guid,
                        port,
                    });
                }
                id
            }
        };
        if kind != NodeKind::Switch {
            // A CA's port GUID comes with the NodeInfo of the port it was entered through.
            self.fabric.node_mut(id).port_entry(entered).guid = info.port_guid;
            if existing.is_some() && self.path(id).is_none() {
                self.node_sweep(id).path = Some(path.clone());
            }
            // The PortInfo of a CA port must travel the path that enters through it.
            self.ask_port_via(id, entered, path.clone(), out);
        }
        if let Some(from) = from {
            let here = End {
                node: id,
                port: entered,
            };
            self.link(from, here, &path);
        }
    }

    fn duplicate_guid(&mut self, guid: u64, path: &DrPath) {
        if !self.fabric.report.duplicate_guids.contains(&guid) {
            self.fabric.report.duplicate_guids.push(guid);
        }
        self.fabric.report.errors.push(format!(
            "node GUID {guid:#018x} reached at {path} with conflicting NodeInfo (duplicate GUID)"
        ));
    }

    fn link(&mut self, a: End, b: End, path: &DrPath) {
        match (self.fabric.peer(a), self.fabric.peer(b)) {
            (Some(pa), _) if pa == b => {}
            (None, None) => {
                let _ = self.fabric.connect(a, b);
            }
            _ => {
                // One GUID seen behind two different ports: two nodes share a GUID.
                let guid = self.fabric.node(b.node).guid;
                self.duplicate_guid(guid, path);
            }
        }
        self.node_sweep(a.node).known_peer.insert(a.port);
        self.node_sweep(b.node).known_peer.insert(b.port);
    }

    /// Probe the node beyond `from`, along `path`.
    fn push_probe(&self, path: DrPath, from: End, out: &mut FollowUps<DiscoveryQuery>) {
        let from = Some(from);
        self.push(DiscoveryQuery::Probe { path, from }, out);
    }

    fn ask_port(&mut self, node: NodeId, port: u8, out: &mut FollowUps<DiscoveryQuery>) {
        if self.node_sweep(node).asked_port.insert(port) {
            self.push(DiscoveryQuery::PortInfo { node, port }, out);
        }
    }

    fn ask_port_via(
        &mut self,
        node: NodeId,
        port: u8,
        path: DrPath,
        out: &mut FollowUps<DiscoveryQuery>,
    ) {
        if self.node_sweep(node).asked_port.insert(port) {
            let q = DiscoveryQuery::PortInfo { node, port };
            let request = self.templates.get(&q, &path);
            out.push_packed(q, request);
        }
    }

    fn on_port_info(
        &mut self,
        node: NodeId,
        number: u8,
        info: &PortInfo,
        out: &mut FollowUps<DiscoveryQuery>,
    ) {
        let is_switch = self.fabric.node(node).is_switch();
        let external = is_switch && number != 0;
        // External switch ports report the switch's LID in PortInfo.LID only on port 0.
        let port0 = if external {
            self.fabric.node(node).port(0).map(|p| (p.guid, p.lid))
        } else {
            None
        };
        let port0_cap = if external { self.port0_cap(node) } else { None };
        if external && port0_cap.is_none() {
            self.speeds_pending
                .entry(node)
                .or_default()
                .push((number, info.clone()));
        }
        self.ask_mlnx_ext(node, number, info, out);
        let mlnx = self.mlnx.get(&End { node, port: number });
        let port = self.fabric.node_mut(node).port_entry(number);
        apply_port_info(port, info, mlnx);
        if let Some(port0) = &port0_cap {
            set_speeds(port, &info.with_capabilities_of(port0), mlnx);
        }
        if let Some((guid, lid)) = port0 {
            port.guid = guid;
            port.lid = lid;
        }
        if is_switch && number == 0 {
            self.node_sweep(node).port0_cap = Some((info.capability_mask, info.capability_mask2));
            let n = self.fabric.node_mut(node);
            for (p, early) in self.speeds_pending.remove(&node).unwrap_or_default() {
                if let Some(port) = n.port_mut(p) {
                    let early = early.with_capabilities_of(info);
                    set_speeds(port, &early, self.mlnx.get(&End { node, port: p }));
                }
            }
            // Port 0's LID is the switch's: index it now, and copy it to the other ports.
            let (guid, lid) = (n.port(0).map(|p| p.guid).unwrap_or(0), info.lid);
            for p in n.ports.iter_mut().filter(|p| p.number != 0) {
                p.lid = lid;
                p.guid = guid;
            }
        }
        if is_switch && number != 0 {
            let end = End { node, port: number };
            let linked = info.phys_state() == PhysState::LinkUp
                || matches!(
                    info.state(),
                    PortState::Init | PortState::Armed | PortState::Active | PortState::ActiveDefer
                );
            if linked && !self.knows_peer(end) {
                if let Some(path) = self.path(node).and_then(|p| p.child(number).ok()) {
                    self.push_probe(path, end, out);
                }
            }
        }
        if !is_switch && self.fabric.local.map(|l| l.guid) == Some(self.fabric.node(node).guid) {
            // The local CA: leave through its own port.
            let end = End { node, port: number };
            let linked = info.phys_state() == PhysState::LinkUp;
            if linked && !self.knows_peer(end) && self.path(node).is_some_and(|p| p.is_empty()) {
                if let Ok(path) = DrPath::local().child(number) {
                    self.push_probe(path, end, out);
                }
            }
        }
    }

    /// Ask MlnxExtPortInfo of a port that may run FDR10, on a device that answers it.
    fn ask_mlnx_ext(
        &mut self,
        node: NodeId,
        port: u8,
        info: &PortInfo,
        out: &mut FollowUps<DiscoveryQuery>,
    ) {
        let n = self.fabric.node(node);
        if port == 0
            || !info.may_run_fdr10()
            || !MlnxExtPortInfo::answered_by(n.vendor_id, n.device_id)
        {
            return;
        }
        let end = End { node, port };
        if self.mlnx_asked.insert(end, info.clone()).is_some() {
            return;
        }
        if let Some(path) = self.port_path(end) {
            self.push(DiscoveryQuery::MlnxExt { node, port, path }, out);
        }
    }

    /// The directed route to ask a port's own attributes along: the switch's, or for a CA
    /// port the route that enters the CA through that port.
    fn port_path(&self, end: End) -> Option<DrPath> {
        if !self.fabric.node(end.node).is_switch() {
            if let Some(peer) = self.fabric.peer(end) {
                if self.fabric.node(peer.node).is_switch() {
                    if let Some(path) = self.path(peer.node) {
                        return path.child(peer.port).ok();
                    }
                }
            }
        }
        self.path(end.node).cloned()
    }

    /// An MlnxExtPortInfo answer: the port's speeds decoded again with it.
    fn on_mlnx_ext(&mut self, node: NodeId, number: u8, m: MlnxExtPortInfo) {
        let end = End { node, port: number };
        let Some(mut info) = self.mlnx_asked.get(&end).cloned() else {
            return;
        };
        if self.fabric.node(node).is_switch() && number != 0 {
            // External ports decode extended speeds with port 0's capabilities, once known.
            if let Some(port0) = self.port0_cap(node) {
                info = info.with_capabilities_of(&port0);
            }
        }
        if let Some(port) = self.fabric.node_mut(node).port_mut(number) {
            set_speeds(port, &info, Some(&m));
        }
        self.mlnx.insert(end, m);
    }

    fn on_switch_info(
        &mut self,
        node: NodeId,
        info: &SwitchInfo,
        out: &mut FollowUps<DiscoveryQuery>,
    ) {
        let read_lft = self.options.read_lft;
        let n = self.fabric.node_mut(node);
        let sw = n.switch.get_or_insert_with(SwitchFacts::default);
        sw.linear_fdb_cap = info.linear_fdb_cap;
        sw.linear_fdb_top = info.linear_fdb_top;
        sw.enhanced_port0 = info.enhanced_port0;
        if read_lft && info.linear_fdb_top > 0 {
            let top = usize::from(info.linear_fdb_top.min(0xbfff));
            sw.lft = vec![crate::model::NO_ROUTE; top + 1];
            for block in 0..=(top / 64) as u32 {
                self.push(DiscoveryQuery::Lft { node, block }, out);
            }
        }
    }

    fn describe(&self, q: &DiscoveryQuery) -> String {
        let name = |id: &NodeId| {
            let n = self.fabric.node(*id);
            format!("{} ({:#018x})", n.description, n.guid)
        };
        match q {
            DiscoveryQuery::Probe { path, from } => match from {
                Some(end) => format!(
                    "NodeInfo beyond port {} of {} (path {path})",
                    end.port,
                    name(&end.node)
                ),
                None => format!("NodeInfo of the local node (path {path})"),
            },
            DiscoveryQuery::Description { node } => format!("NodeDescription of {}", name(node)),
            DiscoveryQuery::PortInfo { node, port } => {
                format!("PortInfo of port {port} of {}", name(node))
            }
            DiscoveryQuery::SwitchInfo { node } => format!("SwitchInfo of {}", name(node)),
            DiscoveryQuery::Lft { node, block } => {
                format!("LinearForwardingTable block {block} of {}", name(node))
            }
            DiscoveryQuery::MlnxExt { node, port, .. } => {
                format!("MlnxExtPortInfo of port {port} of {}", name(node))
            }
        }
    }
}

/// Discover the fabric reachable from the executor's local port.
pub fn discover<E: SmpExecutor>(
    exec: &mut E,
    options: DiscoverOptions,
    mut progress: impl FnMut(Progress),
) -> Fabric {
    let started = Instant::now();
    let sent_before = exec.mads_sent();
    let mut sweep = DiscoverySweep {
        fabric: Fabric::new(),
        nodes: Vec::new(),
        templates: GetTemplates::new(),
        failures: Vec::new(),
        options,
        speeds_pending: FastMap::default(),
        mlnx_asked: FastMap::default(),
        mlnx: FastMap::default(),
    };
    let root = DiscoveryQuery::Probe {
        path: DrPath::local(),
        from: None,
    };
    let mut initial = FollowUps::new();
    sweep.push(root, &mut initial);
    run_round(exec, &mut sweep, initial, &mut progress);

    // Retry rounds: everything that failed gets more full sets of retries, each round by
    // another directed route where there is one (through a different neighbour switch), so
    // a lossy port or switch on the discovery path does not cost a node. Unroutable
    // requests fail at once under ibsim; on hardware a dead link costs one timeout series
    // per round.
    for round in 0..RETRY_ROUNDS {
        let retry: Vec<DiscoveryQuery> = std::mem::take(&mut sweep.failures)
            .into_iter()
            .map(|(q, _)| q)
            .collect();
        if retry.is_empty() {
            break;
        }
        let mut batch = FollowUps::new();
        for q in retry {
            match sweep.alternate_request(&q, round) {
                Some(r) => batch.push_packed(q, r),
                None => sweep.push(q, &mut batch),
            }
        }
        run_round(exec, &mut sweep, batch, &mut progress);
    }
    let failures = std::mem::take(&mut sweep.failures);
    for (q, e) in &failures {
        let text = format!("{}: {e}", sweep.describe(q));
        match failure_target(q) {
            Some((node, Some(port))) => {
                let n = sweep.fabric.node_mut(node);
                match n.port_mut(port) {
                    Some(p) => p.errors.push(text.clone()),
                    None => n.errors.push(text.clone()),
                }
            }
            Some((node, None)) => sweep.fabric.node_mut(node).errors.push(text.clone()),
            None => {}
        }
        sweep.fabric.report.errors.push(text);
    }
    // A port that PortInfo calls up whose probe failed: say so, the link is left out rather
    // than half-drawn.
    for (q, _) in &failures {
        if let DiscoveryQuery::Probe {
            from: Some(end), ..
        } = q
        {
            let n = sweep.fabric.node(end.node);
            if n.port(end.port).is_some_and(|p| p.is_phys_up()) {
                sweep.fabric.report.inconsistencies.push(format!(
                    "port {} of {:?} ({:#018x}) reported LinkUp but nothing answered beyond it (link changed during the sweep?)",
                    end.port, n.description, n.guid
                ));
            }
        }
    }
    finish(&mut sweep.fabric);
    sweep.fabric.report.complete = sweep.fabric.report.errors.is_empty();
    sweep.fabric.report.mads_sent = exec.mads_sent() - sent_before;
    sweep.fabric.report.duration_ms = started.elapsed().as_millis() as u64;
    sweep.fabric
}

fn run_round<E: SmpExecutor>(
    exec: &mut E,
    sweep: &mut DiscoverySweep,
    mut batch: FollowUps<DiscoveryQuery>,
    progress: &mut impl FnMut(Progress),
) {
    let mut done = 0u64;
    exec.execute(batch.drain_packed(), &mut |q, result, out| {
        sweep.handle(q, result, out);
        done += 1;
        if done % 256 == 0 {
            progress(Progress {
                nodes: sweep.fabric.node_count(),
                pending: out.len(),
                mads: done,
            });
        }
    });
}

/// Where a failed query is recorded: a node, or one of its ports.
fn failure_target(q: &DiscoveryQuery) -> Option<(NodeId, Option<u8>)> {
    match q {
        DiscoveryQuery::Probe {
            from: Some(end), ..
        } => Some((end.node, Some(end.port))),
        DiscoveryQuery::Probe { from: None, .. } => None,
        DiscoveryQuery::PortInfo { node, port } | DiscoveryQuery::MlnxExt { node, port, .. } => {
            Some((*node, Some(*port)))
        }
        DiscoveryQuery::Description { node }
        | DiscoveryQuery::SwitchInfo { node }
        | DiscoveryQuery::Lft { node, .. } => Some((*node, None)),
    }
}

/// Post-sweep bookkeeping: the fabric's own order, indexes, duplicate LIDs.
fn finish(fabric: &mut Fabric) {
    // Replies came in whatever order the window let them: number the nodes as the fabric
    // is laid out, so that two discoveries of one fabric list it alike.
    fabric.put_in_canonical_order();
    // Every (LID, port) claim once, sorted: a LID claimed by two ports appears twice in a
    // row. Sorting beats a map of sets by far at 100k ports.
    let mut claims: Vec<(u16, PortKey)> = fabric
        .nodes()
        .flat_map(|(_, n)| {
            n.ports
                .iter()
                .filter(move |p| p.lid != 0 && !(n.is_switch() && p.number != 0))
                .map(move |p| (p.lid, n.port_key(p.number)))
        })
        .collect();
    claims.sort_unstable();
    claims.dedup();
    let mut dups: Vec<u16> = claims
        .windows(2)
        .filter(|pair| pair[0].0 == pair[1].0)
        .map(|pair| pair[0].0)
        .collect();
    dups.dedup();
    fabric.report.duplicate_lids = dups;
}

/// Kept for symmetry with `DiscoveryReport` users that only want the count.
pub fn summary(report: &DiscoveryReport) -> String {
    format!(
        "{} errors, {} duplicate GUIDs, {} duplicate LIDs, {} MADs in {} ms",
        report.errors.len(),
        report.duplicate_guids.len(),
        report.duplicate_lids.len(),
        report.mads_sent,
        report.duration_ms
    )
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, VecDeque};

    use ibscope_mad::attr::Speed;
    use ibscope_mad::attribute::{Attribute, Class, SubnMgt};
    use ibscope_mad::header::MadHeader;
    use ibscope_mad::smp::SmpRoute;
    use ibscope_mad::umad::Dest;

    use super::*;
    use crate::health::{self, HealthOptions};
    use ibscope_mad::engine::Request;

    /// How a node answers MlnxExtPortInfo of one port.
    #[derive(Clone, Copy)]
    enum Mlnx {
        /// LinkSpeedSupported/Enabled/Active masks.
        Answers(u8, u8, u8),
        /// No reply after every retry.
        Silent,
    }

    struct FakeNode {
        info: NodeInfo,
        description: &'static str,
        /// PortInfo by port number (a CA's index 0 unused).
        ports: Vec<PortInfo>,
        /// Port -> (node index, port) at the far end.
        links: HashMap<u8, (usize, u8)>,
        mlnx: HashMap<u8, Mlnx>,
    }

    /// A fabric in memory answering directed-route SMPs, one request after another.
    struct FakeSmp {
        nodes: Vec<FakeNode>,
        /// (node index, attribute ID, modifier) of every request answered.
        log: Vec<(usize, u16, u32)>,
        sent: u64,
    }

    /// A port up and Active at 4x QDR, SDR..QDR supported and enabled.
    fn qdr_port(number: u8) -> PortInfo {
        PortInfo {
            local_port_num: number,
            link_width_active: 2,
            link_width_supported: 3,
            link_width_enabled: 3,
            link_speed_supported: 7,
            link_speed_enabled: 7,
            link_speed_active: 4,
            port_state: PortState::Active.code(),
            port_phys_state: PhysState::LinkUp.code(),
            lid: u16::from(number) + 1,
            ..Default::default()
        }
    }

    fn node(guid: u64, kind: u8, ports: u8, vendor: u32, device: u16, d: &'static str) -> FakeNode {
        FakeNode {
            info: NodeInfo {
                base_version: 1,
                class_version: 1,
                node_type: kind,
                num_ports: ports,
                system_image_guid: guid,
                node_guid: guid,
                port_guid: guid,
                vendor_id: vendor,
                device_id: device,
                ..Default::default()
            },
            description: d,
            ports: (0..=ports).map(qdr_port).collect(),
            links: HashMap::new(),
            mlnx: HashMap::new(),
        }
    }

    impl FakeSmp {
        fn connect(&mut self, a: (usize, u8), b: (usize, u8)) {
            self.nodes[a.0].links.insert(a.1, b);
            self.nodes[b.0].links.insert(b.1, a);
        }

        /// The node at the end of `hops` from node 0, and the port the SMP entered it by.
        fn walk(&self, hops: &[u8]) -> Option<(usize, u8)> {
            let mut at = (0, 0);
            for hop in hops {
                at = *self.nodes[at.0].links.get(hop)?;
            }
            Some(at)
        }

        fn answer(&mut self, r: &Request) -> Result<Response, MadError> {
            let Dest::Smp(SmpRoute::Directed(path)) = &r.dest else {
                panic!("discovery sends directed-route SMPs only")
            };
            let (n, entered) = self
                .walk(path.hops())
                .ok_or(MadError::Timeout { attempts: 4 })?;
            let header = r.header().unwrap();
            let modifier = header.attribute_modifier;
            self.log.push((n, header.attribute_id, modifier));
            let node = &self.nodes[n];
            let port = |m: u32| {
                let is_ca = node.info.node_type != 2;
                if is_ca && m == 0 {
                    entered
                } else {
                    m as u8
                }
            };
            let data: Vec<u8> = match header.attribute_id {
                NodeInfo::ID => NodeInfo {
                    local_port_num: entered,
                    ..node.info.clone()
                }
                .to_bytes()
                .to_vec(),
                NodeDescription::ID => NodeDescription::from_text(node.description)
                    .to_bytes()
                    .to_vec(),
                PortInfo::ID => node.ports[usize::from(port(modifier))].to_bytes().to_vec(),
                SwitchInfo::ID => SwitchInfo::default().to_bytes().to_vec(),
                MlnxExtPortInfo::ID => match node.mlnx.get(&port(modifier)) {
                    Some(Mlnx::Answers(supported, enabled, active)) => MlnxExtPortInfo {
                        link_speed_supported: *supported,
                        link_speed_enabled: *enabled,
                        link_speed_active: *active,
                        ..Default::default()
                    }
                    .to_bytes()
                    .to_vec(),
                    Some(Mlnx::Silent) => return Err(MadError::Timeout { attempts: 4 }),
                    None => panic!("MlnxExtPortInfo asked of node {n} port {modifier}"),
                },
                other => panic!("unexpected attribute {other:#x}"),
            };
            let mut mad = r.mad;
            MadHeader::response.write(&mut mad, &true).unwrap();
            SubnMgt::PAYLOAD.bytes_mut(&mut mad).unwrap()[..data.len()].copy_from_slice(&data);
            Ok(Response::from_mad(mad))
        }
    }

    impl SmpExecutor for FakeSmp {
        fn execute<T, R: Into<PackedRequest>>(
            &mut self,
            requests: impl IntoIterator<Item = (T, R)>,
            on_done: &mut OnDone<'_, T>,
        ) {
            self.sent += super::execute_in_order(requests, on_done, |r| self.answer(r));
        }
        fn mads_sent(&self) -> u64 {
            self.sent
        }
    }

    const MELLANOX: u32 = 0x02c9;
    const SWITCHX: u16 = 0xc738;
    const CONNECTX3: u16 = 0x1003;
    const FDR10: u8 = 1;

    /// A SwitchX (the local node) with, on port 1, a ConnectX-3 at FDR10; on port 2 a CA of
    /// another vendor on an FDR10 link (asked on the switch side only); on port 3 a
    /// ConnectX-3 that never answers the vendor attribute; on port 4 a ConnectX-3 that
    /// could run FDR10 but trained QDR; on port 5 a ConnectX-3 at FDR by PortInfo's
    /// extended field (never asked).
    fn fdr10_fabric() -> FakeSmp {
        let mut f = FakeSmp {
            nodes: vec![
                node(0x10, 2, 5, MELLANOX, SWITCHX, "sw"),
                node(0x20, 1, 1, MELLANOX, CONNECTX3, "fdr10"),
                node(0x30, 1, 1, 0x1234, 0x5678, "other-vendor"),
                node(0x40, 1, 1, MELLANOX, CONNECTX3, "silent"),
                node(0x50, 1, 1, MELLANOX, CONNECTX3, "trained-qdr"),
                node(0x60, 1, 1, MELLANOX, CONNECTX3, "fdr"),
            ],
            log: Vec::new(),
            sent: 0,
        };
        for (port, ca) in [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5)] {
            f.connect((0, port), (ca, 1));
        }
        let sw = &mut f.nodes[0];
        sw.ports[0].capability_mask = ibscope_mad::attr::capability::IS_EXTENDED_SPEEDS_SUPPORTED;
        sw.mlnx.insert(1, Mlnx::Answers(FDR10, FDR10, FDR10));
        sw.mlnx.insert(2, Mlnx::Answers(FDR10, FDR10, FDR10));
        sw.mlnx.insert(3, Mlnx::Answers(FDR10, FDR10, FDR10));
        sw.mlnx.insert(4, Mlnx::Answers(FDR10, FDR10, 0));
        f.nodes[1]
            .mlnx
            .insert(1, Mlnx::Answers(FDR10, FDR10, FDR10));
        f.nodes[3].mlnx.insert(1, Mlnx::Silent);
        f.nodes[4].mlnx.insert(1, Mlnx::Answers(FDR10, FDR10, 0));
        for (n, p) in [(0, 5), (5, 1)] {
            let fdr = &mut f.nodes[n].ports[p];
            fdr.capability_mask = ibscope_mad::attr::capability::IS_EXTENDED_SPEEDS_SUPPORTED;
            fdr.link_speed_ext_supported = 1;
            fdr.link_speed_ext_enabled = 1;
            fdr.link_speed_ext_active = 1;
        }
        f
    }

    /// A request from the templates is the one `Request::get` frames, for every query.
    #[test]
    fn templates_frame_what_request_get_frames() {
        let templates = GetTemplates::new();
        let node = NodeId::new(7);
        for hops in [&[][..], &[1], &[3, 17], &[40, 1, 255, 9, 2, 36]] {
            let path = DrPath::from_hops(hops).unwrap();
            let route = SmpRoute::Directed(path.clone());
            let cases = [
                (
                    DiscoveryQuery::Probe {
                        path: path.clone(),
                        from: None,
                    },
                    Request::get::<NodeInfo>(&route, 0),
                ),
                (
                    DiscoveryQuery::Description { node },
                    Request::get::<NodeDescription>(&route, 0),
                ),
                (
                    DiscoveryQuery::PortInfo { node, port: 33 },
                    Request::get::<PortInfo>(&route, 33),
                ),
                (
                    DiscoveryQuery::SwitchInfo { node },
                    Request::get::<SwitchInfo>(&route, 0),
                ),
                (
                    DiscoveryQuery::Lft { node, block: 767 },
                    Request::get::<LinearForwardingTableBlock>(&route, 767),
                ),
                (
                    DiscoveryQuery::MlnxExt {
                        node,
                        port: 2,
                        path: path.clone(),
                    },
                    Request::get::<MlnxExtPortInfo>(&route, 2),
                ),
            ];
            for (q, framed) in cases {
                let r = templates.get(&q, &path).to_request();
                assert_eq!(r.mad, framed.mad, "{q:?}");
                assert_eq!(r.dest, framed.dest, "{q:?}");
            }
        }
    }

    /// A LID claimed by two ports is reported once, a switch's external ports repeating
    /// port 0's LID are no claim, and one port claiming a LID is no duplicate.
    #[test]
    fn duplicate_lids_are_the_lids_of_two_ports() {
        let mut f = Fabric::new();
        let port = |number, lid| Port {
            number,
            lid,
            ..Port::new(number)
        };
        let switch = Node {
            guid: 1,
            kind: NodeKind::Switch,
            ports: vec![port(0, 5), port(1, 5), port(2, 5)],
            ..Node::default()
        };
        let ca = |guid, ports| Node {
            guid,
            kind: NodeKind::Ca,
            ports,
            ..Node::default()
        };
        f.add_node(switch).unwrap();
        f.add_node(ca(2, vec![port(1, 9), port(2, 7)])).unwrap();
        f.add_node(ca(3, vec![port(1, 9)])).unwrap();
        f.add_node(ca(4, vec![port(1, 7), port(2, 0)])).unwrap();
        f.add_node(ca(5, vec![port(1, 9), port(2, 3)])).unwrap();
        finish(&mut f);
        assert_eq!(f.report.duplicate_lids, vec![7, 9]);
    }

    fn speed(fabric: &Fabric, guid: u64, port: u8) -> Option<Speed> {
        let id = fabric.node_by_guid(guid).unwrap();
        fabric.node(id).port(port).unwrap().speed_active
    }

    #[test]
    fn fdr10_comes_from_the_vendor_attribute_where_the_device_answers_it() {
        let mut exec = fdr10_fabric();
        let fabric = discover(&mut exec, DiscoverOptions::default(), |_| {});
        assert_eq!(fabric.node_count(), 6);
        assert_eq!(fabric.link_count(), 5);
        // Both ends of the ConnectX-3 link: FDR10, and FDR10 in what they support.
        assert_eq!(speed(&fabric, 0x10, 1), Some(Speed::Fdr10));
        assert_eq!(speed(&fabric, 0x20, 1), Some(Speed::Fdr10));
        let ca = fabric.node(fabric.node_by_guid(0x20).unwrap());
        assert!(ca.port(1).unwrap().speed_supported.contains(Speed::Fdr10));
        assert!(ca.port(1).unwrap().speed_enabled.contains(Speed::Fdr10));
        // Another vendor's CA is not asked: its end reads QDR, the switch's FDR10, as
        // ibnetdiscover prints the two sides.
        assert_eq!(speed(&fabric, 0x10, 2), Some(Speed::Fdr10));
        assert_eq!(speed(&fabric, 0x30, 1), Some(Speed::Qdr));
        // A node that does not answer keeps PortInfo's speed, and that is no error.
        assert_eq!(speed(&fabric, 0x40, 1), Some(Speed::Qdr));
        assert!(fabric.report.complete, "{:?}", fabric.report.errors);
        assert!(fabric.report.errors.is_empty());
        // An extended speed is never asked about.
        assert_eq!(speed(&fabric, 0x10, 5), Some(Speed::Fdr));
        assert_eq!(speed(&fabric, 0x60, 1), Some(Speed::Fdr));

        // Who was asked: every Mellanox QDR port, once; nobody else.
        let mut asked: Vec<(usize, u32)> = exec
            .log
            .iter()
            .filter(|(_, attr, _)| *attr == MlnxExtPortInfo::ID)
            .map(|(n, _, m)| (*n, *m))
            .collect();
        asked.sort_unstable();
        assert_eq!(
            asked,
            vec![(0, 1), (0, 2), (0, 3), (0, 4), (1, 1), (3, 1), (4, 1)]
        );
        assert_eq!(fabric.report.mads_sent, exec.sent);
    }

    #[test]
    fn fdr10_capable_link_at_qdr_is_degraded() {
        let mut exec = fdr10_fabric();
        let fabric = discover(&mut exec, DiscoverOptions::default(), |_| {});
        let report = health::assess(&fabric, None, &HealthOptions::default());
        let trained_qdr = report
            .links
            .iter()
            .find(|l| l.a.at.node.guid == 0x50 || l.b.at.node.guid == 0x50)
            .unwrap();
        assert!(trained_qdr.degraded, "{trained_qdr:?}");
        assert_eq!(
            trained_qdr.could_be.map(|r| r.to_string()),
            Some("4xFDR10".to_string())
        );
        let fdr10 = report
            .links
            .iter()
            .find(|l| l.a.at.node.guid == 0x20 || l.b.at.node.guid == 0x20)
            .unwrap();
        assert_eq!(fdr10.active.map(|r| r.to_string()), Some("4xFDR10".into()));
    }

    /// A switch whose external port's PortInfo (and its vendor answer) arrive before port
    /// 0's: the speeds decoded again with port 0's capabilities keep FDR10.
    #[test]
    fn fdr10_survives_port_0_arriving_last() {
        let mut exec = fdr10_fabric();
        // Reorder by answering port 0's PortInfo last: run the sweep with a queue that
        // defers it once.
        struct Deferring(FakeSmp);
        impl SmpExecutor for Deferring {
            fn execute<T, R: Into<PackedRequest>>(
                &mut self,
                requests: impl IntoIterator<Item = (T, R)>,
                on_done: &mut OnDone<'_, T>,
            ) {
                let mut queue: VecDeque<(T, Request)> = requests
                    .into_iter()
                    .map(|(t, r)| (t, r.into().to_request()))
                    .collect();
                let mut deferred = Vec::new();
                let mut follow_ups = FollowUps::new();
                loop {
                    let Some((token, request)) = queue.pop_front().or_else(|| deferred.pop())
                    else {
                        break;
                    };
                    let h = request.header().unwrap();
                    let is_port0 = h.attribute_id == PortInfo::ID
                        && h.attribute_modifier == 0
                        && matches!(&request.dest, Dest::Smp(SmpRoute::Directed(p)) if p.is_empty());
                    if is_port0 && !queue.is_empty() && deferred.is_empty() {
                        deferred.push((token, request));
                        continue;
                    }
                    self.0.sent += 1;
                    let result = self.0.answer(&request);
                    on_done(token, result, &mut follow_ups);
                    queue.extend(follow_ups.drain());
                }
            }
            fn mads_sent(&self) -> u64 {
                self.0.sent
            }
        }
        exec.log.clear();
        let mut deferring = Deferring(exec);
        let fabric = discover(&mut deferring, DiscoverOptions::default(), |_| {});
        let log = &deferring.0.log;
        let port0 = log.iter().position(|e| *e == (0, PortInfo::ID, 0)).unwrap();
        let first_mlnx = log.iter().position(|e| e.1 == MlnxExtPortInfo::ID).unwrap();
        assert!(first_mlnx < port0, "the test must answer port 0 last");
        assert_eq!(speed(&fabric, 0x10, 1), Some(Speed::Fdr10));
        assert_eq!(speed(&fabric, 0x10, 5), Some(Speed::Fdr));
    }
}
