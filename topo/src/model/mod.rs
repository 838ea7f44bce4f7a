//! The fabric model: nodes (switches, channel adapters, routers) joined by links between
//! ports, held in a petgraph graph with O(1) lookups by node GUID, port GUID, LID and name.
//!
//! The model serializes to and from JSON losslessly (see [`FabricFile`]); `schema_version`
//! lets later versions read older snapshots.

use ibscope_mad::attr::link::{Rate, Speed, SpeedSet, Width, WidthSet};
use ibscope_mad::attr::{LinearForwardingTableBlock, NodeType, PhysState, PortState};
use ibscope_mad::codes::guid;
use petgraph::graph::{EdgeIndex, NodeIndex, UnGraph};
use petgraph::visit::EdgeRef;
use serde::{Deserialize, Serialize};

pub mod refs;

/// The version of every JSON document ibscope writes: this snapshot and each command's
/// `--json` output (its `schema_version`; schemas in docs/json/). Bumped whenever one of
/// them changes incompatibly. Version 2: GUIDs are `"0x…"` strings, states, widths and
/// speeds are names, width and speed sets are lists of names. Version 3: every command's
/// JSON carries `schema_version` and has a schema; links carry a verdict (`ok`,
/// `degraded`, `below-norm`); the snapshot itself is unchanged from version 2. Version 4:
/// `fabric` has one shape everywhere, the fabric_id object (`{"name", "subnet_prefix",
/// "sm_guid"}`), in findings, counters, events and failures too, where it was a name.
/// Snapshots of versions 1 (numbers and masks), 2 and 3 are still read.
pub const SCHEMA_VERSION: u32 = 4;

pub type NodeId = NodeIndex<u32>;

/// What a node is in the fabric: its NodeInfo NodeType, and for channel adapters whether
/// it is a SHARP aggregation node (a switch's in-network reduction engine, which shows up
/// as a one-port CA behind an extra switch port and is no host).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum NodeKind {
    #[default]
    Ca,
    Switch,
    Router,
    AggregationNode,
}

/// The NodeDescription NVIDIA (Mellanox) switches give their SHARP aggregation node.
pub const AGGREGATION_NODE_DESCRIPTION: &str = "Aggregation Node";

impl NodeKind {
    /// The kind of a node with NodeType `node_type` and NodeDescription `description`;
    /// `None` for a NodeType the specification does not name.
    pub fn classify(node_type: NodeType, description: &str) -> Option<NodeKind> {
        match node_type {
            NodeType::Ca if description.contains(AGGREGATION_NODE_DESCRIPTION) => {
                Some(NodeKind::AggregationNode)
            }
            NodeType::Ca => Some(NodeKind::Ca),
            NodeType::Switch => Some(NodeKind::Switch),
            NodeType::Router => Some(NodeKind::Router),
            NodeType::Unknown(_) => None,
        }
    }
    /// NodeInfo NodeType of this kind.
    pub fn node_type(self) -> NodeType {
        match self {
            NodeKind::Ca | NodeKind::AggregationNode => NodeType::Ca,
            NodeKind::Switch => NodeType::Switch,
            NodeKind::Router => NodeType::Router,
        }
    }
    /// The name JSON, CSV and labels use: "ca", "switch", "router", "aggregation-node".
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Ca => "ca",
            NodeKind::Switch => "switch",
            NodeKind::Router => "router",
            NodeKind::AggregationNode => "aggregation-node",
        }
    }
    /// For narrow columns.
    pub fn short(self) -> &'static str {
        match self {
            NodeKind::Ca => "CA",
            NodeKind::Switch => "switch",
            NodeKind::Router => "router",
            NodeKind::AggregationNode => "aggr",
        }
    }
    /// A channel adapter of a host: not a switch, router or aggregation node.
    pub fn is_host_ca(self) -> bool {
        self == NodeKind::Ca
    }
}

impl std::fmt::Display for NodeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What is known of one port. Facts not known (e.g. from an ibnetdiscover file, which has
/// only the active width/speed) stay at their defaults: 0 / empty sets / None.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Port {
    pub number: u8,
    /// Port GUID. Switch external ports have none of their own: they carry port 0's.
    #[serde(with = "guid")]
    pub guid: u64,
    pub lid: u16,
    pub lmc: u8,
    /// `None` where it was not read (topology files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<PortState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phys_state: Option<PhysState>,
    pub width_active: Option<Width>,
    pub width_supported: WidthSet,
    pub width_enabled: WidthSet,
    pub speed_active: Option<Speed>,
    pub speed_supported: SpeedSet,
    pub speed_enabled: SpeedSet,
    /// NeighborMTU / MTUCap codes (1=256 .. 5=4096), 0 if unknown.
    pub mtu_active: u8,
    pub mtu_cap: u8,
    pub capability_mask: u32,
    /// Queries of this port that failed even after retries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

impl Port {
    pub fn new(number: u8) -> Self {
        Port {
            number,
            ..Default::default()
        }
    }
    pub fn is_active(&self) -> bool {
        self.state == Some(PortState::Active)
    }
    /// Physically up (LinkUp) whatever the logical state.
    pub fn is_phys_up(&self) -> bool {
        self.phys_state == Some(PhysState::LinkUp)
    }
    /// A state was read and it is not Active, or a physical state was read and it is
    /// not LinkUp.
    pub fn is_known_down(&self) -> bool {
        self.state.is_some_and(|s| s != PortState::Active)
            || self.phys_state.is_some_and(|s| s != PhysState::LinkUp)
    }
    /// The active rate, when both width and speed are known.
    pub fn rate_active(&self) -> Option<Rate> {
        Some(Rate::new(self.width_active?, self.speed_active?))
    }
}

/// Switch-only facts, including the linear forwarding table the SM programmed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchFacts {
    pub linear_fdb_cap: u16,
    pub linear_fdb_top: u16,
    pub enhanced_port0: bool,
    /// LFT: index = destination LID, value = egress port ([`NO_ROUTE`] = none). Empty if
    /// not read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lft: Vec<u8>,
}

/// An LFT entry that routes nowhere.
pub const NO_ROUTE: u8 = LinearForwardingTableBlock::UNSET;

impl SwitchFacts {
    /// Egress port for a destination LID, `None` when unset or out of the table.
    pub fn route(&self, lid: u16) -> Option<u8> {
        match self.lft.get(usize::from(lid)) {
            Some(&p) if p != NO_ROUTE => Some(p),
            _ => None,
        }
    }
    /// Whether the switch's forwarding table was read.
    pub fn has_lft(&self) -> bool {
        !self.lft.is_empty()
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    #[serde(with = "guid")]
    pub guid: u64,
    #[serde(with = "guid")]
    pub system_image_guid: u64,
    pub kind: NodeKind,
    pub vendor_id: u32,
    pub device_id: u16,
    pub revision: u32,
    /// NodeDescription as read from the fabric: untrusted text, escape before display.
    pub description: String,
    pub num_ports: u8,
    /// Known ports, sorted by number (a switch's port 0 included).
    pub ports: Vec<Port>,
    /// Directed route from the discovering port, "0,1,3" notation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dr_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch: Option<SwitchFacts>,
    /// Queries of this node that failed even after retries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

impl Node {
    /// Where port `number` is in the sorted list (`Err`: where it would go). A switch lists
    /// port 0 first and a CA starts at 1, so the port is nearly always at `number` or the
    /// slot before it: looked at there first, as a binary search's scattered reads showed
    /// in every per-port pass at 100k HCAs.
    fn port_index(&self, number: u8) -> Result<usize, usize> {
        let guess = usize::from(number);
        for i in [guess, guess.wrapping_sub(1)] {
            if self.ports.get(i).is_some_and(|p| p.number == number) {
                return Ok(i);
            }
        }
        self.ports.binary_search_by_key(&number, |p| p.number)
    }
    pub fn port(&self, number: u8) -> Option<&Port> {
        self.port_index(number).ok().map(|i| &self.ports[i])
    }
    pub fn port_mut(&mut self, number: u8) -> Option<&mut Port> {
        match self.port_index(number) {
            Ok(i) => Some(&mut self.ports[i]),
            Err(_) => None,
        }
    }
    /// Port `number`, added (in order, with nothing known of it) if not there yet.
    pub fn port_entry(&mut self, number: u8) -> &mut Port {
        let i = match self.port_index(number) {
            Ok(i) => i,
            Err(i) => {
                self.ports.insert(i, Port::new(number));
                i
            }
        };
        &mut self.ports[i]
    }
    /// Insert or replace a port, keeping the list sorted.
    pub fn set_port(&mut self, port: Port) {
        match self.port_index(port.number) {
            Ok(i) => self.ports[i] = port,
            Err(i) => self.ports.insert(i, port),
        }
    }
    pub fn is_switch(&self) -> bool {
        self.kind == NodeKind::Switch
    }
    /// The node's stable reference for port `port`.
    pub fn port_key(&self, port: u8) -> PortKey {
        PortKey {
            guid: self.guid,
            port,
        }
    }
    /// The node's own LID: port 0's for a switch, else the lowest-numbered port with one.
    pub fn lid(&self) -> Option<u16> {
        if self.is_switch() {
            return self.port(0).map(|p| p.lid).filter(|&l| l != 0);
        }
        self.ports.iter().map(|p| p.lid).find(|&l| l != 0)
    }
}

/// A link's port numbers, in the order of the graph edge's (source, target) endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub source_port: u8,
    pub target_port: u8,
}

/// One end of a link inside one [`Fabric`]: a graph node and a port number. Valid only
/// for the fabric it came from; across snapshots use [`PortKey`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct End {
    pub node: NodeId,
    pub port: u8,
}

/// A port by node GUID and port number: the stable reference that survives rediscovery,
/// files and snapshots (the TUI's history, diffs, events, findings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PortKey {
    #[serde(with = "guid")]
    pub guid: u64,
    pub port: u8,
}

impl std::fmt::Display for PortKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}[{}]", guid::text(self.guid), self.port)
    }
}

/// A link by its two ends, smaller first: one key whatever the graph's edge direction,
/// and the same key in the next snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct LinkKey(pub PortKey, pub PortKey);

impl LinkKey {
    pub fn new(a: PortKey, b: PortKey) -> LinkKey {
        LinkKey(a.min(b), a.max(b))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("duplicate node GUID {0:#018x}")]
    DuplicateGuid(u64),
    #[error("port {port} of node {guid:#018x} is already linked")]
    PortInUse { guid: u64, port: u8 },
    #[error("unknown node GUID {0:#018x}")]
    UnknownGuid(u64),
    #[error(
        "snapshot schema version {0} is newer than this ibscope understands ({SCHEMA_VERSION})"
    )]
    SchemaVersion(u32),
}

/// What a discovery (or a file load) could not settle: reported, never fatal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiscoveryReport {
    /// True when every node and port answered.
    pub complete: bool,
    #[serde(default)]
    pub errors: Vec<String>,
    /// GUIDs reached with conflicting facts (two different nodes claiming one GUID).
    #[serde(default, with = "guid::list")]
    pub duplicate_guids: Vec<u64>,
    /// LIDs claimed by more than one port.
    #[serde(default)]
    pub duplicate_lids: Vec<u16>,
    /// Links seen in a state that changed while the sweep ran.
    #[serde(default)]
    pub inconsistencies: Vec<String>,
    #[serde(default)]
    pub mads_sent: u64,
    #[serde(default)]
    pub duration_ms: u64,
}

impl DiscoveryReport {
    /// Nothing to warn of: no errors, no inconsistencies, no duplicate GUIDs or LIDs.
    pub fn is_clean(&self) -> bool {
        self.errors.is_empty()
            && self.inconsistencies.is_empty()
            && self.duplicate_guids.is_empty()
            && self.duplicate_lids.is_empty()
    }

    /// What discovery ran into, a line each, escaped for a terminal: the summary, then at
    /// most 20 errors and inconsistencies (the rest counted), duplicate GUIDs and LIDs.
    pub fn warning_lines(&self, fabric: &Fabric) -> Vec<String> {
        // A dead transport fails every remaining query: list a screenful, count the rest
        // (all of them are in the JSON report).
        const SHOWN: usize = 20;
        let mut out = vec![format!(
            "discovered {} nodes ({} switches), {} links with {} MADs in {} ms",
            fabric.node_count(),
            fabric.switches().count(),
            fabric.link_count(),
            self.mads_sent,
            self.duration_ms
        )];
        let problems: Vec<&String> = self.errors.iter().chain(&self.inconsistencies).collect();
        for e in problems.iter().take(SHOWN) {
            out.push(format!("warning: {}", crate::escape::for_terminal(e)));
        }
        if problems.len() > SHOWN {
            out.push(format!(
                "warning: ... and {} more (see `--format json`, field report)",
                problems.len() - SHOWN
            ));
        }
        for guid in &self.duplicate_guids {
            out.push(format!("warning: duplicate node GUID {guid:#018x}"));
        }
        for lid in &self.duplicate_lids {
            out.push(format!(
                "warning: LID {lid} is claimed by more than one port"
            ));
        }
        out
    }
}

/// Which fabric (subnet) a model is of, when a host reaches several: the name it goes by
/// (the config file's, else the local CA and port) and, where read, its identity: the
/// subnet prefix (the local port's GidPrefix) and the master SM's GUID (its SMInfo).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FabricId {
    pub name: String,
    #[serde(
        default,
        with = "guid::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub subnet_prefix: Option<u64>,
    #[serde(
        default,
        with = "guid::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub sm_guid: Option<u64>,
}

impl FabricId {
    /// A fabric known by name only (a topology file, a port whose SM did not answer).
    pub fn named(name: impl Into<String>) -> FabricId {
        FabricId {
            name: name.into(),
            ..FabricId::default()
        }
    }

    /// The identity of `fabric` known as `name` (empty: it goes by none): the one its
    /// discovery recorded when that has this name, else the name alone.
    pub fn of(fabric: &Fabric, name: &str) -> Option<FabricId> {
        if name.is_empty() {
            return None;
        }
        Some(match &fabric.id {
            Some(id) if id.name == name => id.clone(),
            _ => FabricId::named(name),
        })
    }

    /// Whether two ports reach the same subnet: same prefix and same master SM. Unknown
    /// identities are never the same.
    pub fn same_subnet(&self, other: &FabricId) -> bool {
        match (
            self.subnet_prefix,
            self.sm_guid,
            other.subnet_prefix,
            other.sm_guid,
        ) {
            (Some(p), Some(g), Some(q), Some(h)) => p == q && g == h,
            _ => false,
        }
    }

    /// "subnet 0xfe80000000000000, SM 0x0002c90300000001" (empty when not read).
    pub fn identity_text(&self) -> String {
        match (self.subnet_prefix, self.sm_guid) {
            (Some(p), Some(g)) => format!("subnet {}, SM {}", guid::text(p), guid::text(g)),
            (Some(p), None) => format!("subnet {}, no master SM", guid::text(p)),
            _ => String::new(),
        }
    }
}

/// The fabric graph plus indexes.
#[derive(Debug, Clone, Default)]
pub struct Fabric {
    graph: UnGraph<Node, Link>,
    by_guid: foldhash::HashMap<u64, NodeId>,
    by_port_guid: foldhash::HashMap<u64, End>,
    by_lid: foldhash::HashMap<u16, End>,
    /// Built on the first lookup by description (few commands look one up, and a copy of
    /// every node's description was 5% of a discovery at 100k HCAs); reset by every change
    /// that indexes nodes.
    by_name: std::sync::OnceLock<foldhash::HashMap<String, Vec<NodeId>>>,
    /// Per node index, per port number: the link at that port (`EdgeIndex::end()` when
    /// none). Vectors, not a map keyed by port: sweeps ask for every port's peer node after
    /// node, and a map scatters a node's ports over memory.
    links_at: Vec<Vec<EdgeIndex>>,
    /// The port discovery started from.
    pub local: Option<PortKey>,
    pub report: DiscoveryReport,
    /// Which fabric this is, when known.
    pub id: Option<FabricId>,
}

/// Borrowed view of one link with both ends resolved.
#[derive(Debug, Clone, Copy)]
pub struct LinkRef<'a> {
    pub a: End,
    pub b: End,
    pub a_node: &'a Node,
    pub b_node: &'a Node,
}

impl<'a> LinkRef<'a> {
    pub fn a_port(&self) -> Option<&'a Port> {
        self.a_node.port(self.a.port)
    }
    pub fn b_port(&self) -> Option<&'a Port> {
        self.b_node.port(self.b.port)
    }
    /// The link's stable key.
    pub fn key(&self) -> LinkKey {
        LinkKey::new(
            self.a_node.port_key(self.a.port),
            self.b_node.port_key(self.b.port),
        )
    }
}

impl Fabric {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn graph(&self) -> &UnGraph<Node, Link> {
        &self.graph
    }

    pub fn node_count(&self) -> usize {
        self.graph.node_count()
    }
    pub fn link_count(&self) -> usize {
        self.graph.edge_count()
    }

    /// Add a node; its ports' GUIDs and LIDs are indexed. A GUID already present is an error.
    pub fn add_node(&mut self, node: Node) -> Result<NodeId, ModelError> {
        if self.by_guid.contains_key(&node.guid) {
            return Err(ModelError::DuplicateGuid(node.guid));
        }
        let guid = node.guid;
        let id = self.graph.add_node(node);
        self.by_guid.insert(guid, id);
        self.index_node(id);
        Ok(id)
    }

    /// [`Fabric::add_node`] indexed by node GUID alone: lookups by port GUID or LID do not
    /// find the node until [`Fabric::reindex`] (by description, only if none was made since
    /// the last indexing change). For discovery, which adds a node
    /// before its ports, LIDs and description are read and reindexes once at the end.
    pub(crate) fn add_node_guid_indexed(&mut self, node: Node) -> Result<NodeId, ModelError> {
        if self.by_guid.contains_key(&node.guid) {
            return Err(ModelError::DuplicateGuid(node.guid));
        }
        let guid = node.guid;
        let id = self.graph.add_node(node);
        self.by_guid.insert(guid, id);
        Ok(id)
    }

    fn index_node(&mut self, id: NodeId) {
        let node = &self.graph[id];
        self.by_name = std::sync::OnceLock::new();
        let mut entries = Vec::new();
        for p in &node.ports {
            if p.guid != 0 && (!node.is_switch() || p.number == 0) {
                self.by_port_guid.insert(
                    p.guid,
                    End {
                        node: id,
                        port: p.number,
                    },
                );
            }
            // A switch's LID is port 0's; external switch ports repeat it and are not indexed.
            if p.lid != 0 && (!node.is_switch() || p.number == 0) {
                entries.push((p.lid, p.lmc, p.number));
            }
        }
        for (lid, lmc, port) in entries {
            let span = 1u32 << lmc.min(7);
            for off in 0..span {
                let l = u32::from(lid) + off;
                if l < 0xc000 {
                    self.by_lid.insert(l as u16, End { node: id, port });
                }
            }
        }
    }

    /// Rebuild every index (after changing ports, LIDs or descriptions in place).
    pub fn reindex(&mut self) {
        self.by_guid.clear();
        self.by_port_guid.clear();
        self.by_lid.clear();
        self.by_name = std::sync::OnceLock::new();
        self.by_guid.reserve(self.graph.node_count());
        let ids: Vec<NodeId> = self.graph.node_indices().collect();
        for id in ids {
            self.by_guid.insert(self.graph[id].guid, id);
            self.index_node(id);
        }
    }

    /// Renumber nodes and links in an order that depends on the fabric alone: breadth first
    /// from the local node, each node's links by its port number, passing only through the
    /// local node and switches (the ways a directed-route SMP can go); nodes no such path
    /// reaches follow by GUID. A discovery adds nodes as replies arrive, and with many
    /// requests in flight that order changes from run to run; every listing that walks the
    /// fabric (counters, findings, exports) would change with it. Then every index is rebuilt.
    pub fn put_in_canonical_order(&mut self) {
        let count = self.graph.node_count();
        let mut order: Vec<NodeId> = Vec::with_capacity(count);
        let mut seen = vec![false; count];
        let start = self.local.and_then(|k| self.by_guid.get(&k.guid).copied());
        if let Some(start) = start {
            seen[start.index()] = true;
            order.push(start);
        }
        let mut next = 0;
        let mut peers: Vec<(u8, NodeId)> = Vec::new();
        while let Some(&id) = order.get(next) {
            next += 1;
            if next > 1 && !self.graph[id].is_switch() {
                continue;
            }
            peers.clear();
            for edge in self.graph.edges(id) {
                let link = edge.weight();
                // Undirected, `edges` reports `id` as the source whichever end it is: the
                // ports follow the link as it was stored.
                let Some((s, t)) = self.graph.edge_endpoints(edge.id()) else {
                    continue;
                };
                let (port, other) = if s == id {
                    (link.source_port, t)
                } else {
                    (link.target_port, s)
                };
                peers.push((port, other));
            }
            peers.sort_unstable();
            for &(_, other) in &peers {
                if !std::mem::replace(&mut seen[other.index()], true) {
                    order.push(other);
                }
            }
        }
        let mut unreached: Vec<NodeId> = self
            .graph
            .node_indices()
            .filter(|id| !seen[id.index()])
            .collect();
        unreached.sort_by_key(|&id| self.graph[id].guid);
        order.extend(unreached);

        let mut renumbered = vec![NodeIndex::end(); count];
        for (new, old) in order.iter().enumerate() {
            renumbered[old.index()] = NodeIndex::new(new);
        }
        // Each link once, from its lower end (new index, port) to its higher one, sorted.
        let mut links: Vec<(End, End)> = self
            .graph
            .edge_references()
            .map(|e| {
                let w = e.weight();
                let a = End {
                    node: renumbered[e.source().index()],
                    port: w.source_port,
                };
                let b = End {
                    node: renumbered[e.target().index()],
                    port: w.target_port,
                };
                if a <= b {
                    (a, b)
                } else {
                    (b, a)
                }
            })
            .collect();
        links.sort_unstable();
        let (nodes, _) = std::mem::take(&mut self.graph).into_nodes_edges();
        let mut slots: Vec<Option<Node>> = nodes.into_iter().map(|n| Some(n.weight)).collect();
        let mut graph = UnGraph::with_capacity(count, links.len());
        for old in &order {
            if let Some(node) = slots[old.index()].take() {
                graph.add_node(node);
            }
        }
        self.graph = graph;
        self.links_at.clear();
        for (a, b) in links {
            // Each port was on one link before: connecting them again cannot clash.
            let _ = self.connect(a, b);
        }
        self.reindex();
    }

    /// Connect two ports. Either port already linked is an error (the graph stays unchanged).
    pub fn connect(&mut self, a: End, b: End) -> Result<EdgeIndex, ModelError> {
        for end in [a, b] {
            if self.edge_at(end).is_some() {
                return Err(ModelError::PortInUse {
                    guid: self.graph[end.node].guid,
                    port: end.port,
                });
            }
        }
        let e = self.graph.add_edge(
            a.node,
            b.node,
            Link {
                source_port: a.port,
                target_port: b.port,
            },
        );
        for end in [a, b] {
            let node = end.node.index();
            if self.links_at.len() <= node {
                self.links_at.resize_with(node + 1, Vec::new);
            }
            let ports = &mut self.links_at[node];
            let port = usize::from(end.port);
            if ports.len() <= port {
                ports.resize(port + 1, EdgeIndex::end());
            }
            ports[port] = e;
        }
        Ok(e)
    }

    /// The link at a port, if any.
    fn edge_at(&self, end: End) -> Option<EdgeIndex> {
        let e = *self
            .links_at
            .get(end.node.index())?
            .get(usize::from(end.port))?;
        (e != EdgeIndex::end()).then_some(e)
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.graph[id]
    }
    /// Mutable access. Call [`Fabric::reindex`] after changing GUIDs, LIDs or descriptions.
    pub fn node_mut(&mut self, id: NodeId) -> &mut Node {
        &mut self.graph[id]
    }
    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, &Node)> {
        self.graph.node_indices().map(move |i| (i, &self.graph[i]))
    }
    pub fn switches(&self) -> impl Iterator<Item = (NodeId, &Node)> {
        self.nodes().filter(|(_, n)| n.is_switch())
    }
    /// Whether routing analysis has tables to follow: some switch's forwarding table was
    /// read, or there is no switch. A topology file, or a discovery without `--lft`, has
    /// none.
    pub fn has_forwarding_tables(&self) -> bool {
        let mut switches = self.switches().peekable();
        switches.peek().is_none()
            || switches.any(|(_, n)| n.switch.as_ref().is_some_and(SwitchFacts::has_lft))
    }

    pub fn node_by_guid(&self, guid: u64) -> Option<NodeId> {
        self.by_guid.get(&guid).copied()
    }
    pub fn port_by_guid(&self, port_guid: u64) -> Option<End> {
        self.by_port_guid.get(&port_guid).copied()
    }
    /// The port that owns a LID (LMC ranges included).
    pub fn port_by_lid(&self, lid: u16) -> Option<End> {
        self.by_lid.get(&lid).copied()
    }
    /// Nodes whose NodeDescription is exactly `name`.
    pub fn nodes_by_description(&self, name: &str) -> &[NodeId] {
        let by_name = self.by_name.get_or_init(|| {
            let mut by_name = foldhash::HashMap::<String, Vec<NodeId>>::default();
            for id in self.graph.node_indices() {
                let description = &self.graph[id].description;
                match by_name.get_mut(description.as_str()) {
                    Some(ids) => ids.push(id),
                    None => {
                        by_name.insert(description.clone(), vec![id]);
                    }
                }
            }
            by_name
        });
        by_name.get(name).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The far end of a node's port, if linked.
    pub fn peer(&self, end: End) -> Option<End> {
        let e = self.edge_at(end)?;
        let (s, t) = self.graph.edge_endpoints(e)?;
        let link = self.graph[e];
        if s == end.node && link.source_port == end.port {
            Some(End {
                node: t,
                port: link.target_port,
            })
        } else {
            Some(End {
                node: s,
                port: link.source_port,
            })
        }
    }

    /// The key of the link at a port, if it is linked.
    pub fn link_at(&self, end: End) -> Option<LinkKey> {
        let peer = self.peer(end)?;
        Some(LinkKey::new(
            self.graph[end.node].port_key(end.port),
            self.graph[peer.node].port_key(peer.port),
        ))
    }

    /// Every link once, ends in graph order.
    pub fn links(&self) -> impl Iterator<Item = LinkRef<'_>> {
        self.graph.edge_references().map(move |e| {
            let w = e.weight();
            let a = End {
                node: e.source(),
                port: w.source_port,
            };
            let b = End {
                node: e.target(),
                port: w.target_port,
            };
            LinkRef {
                a,
                b,
                a_node: &self.graph[a.node],
                b_node: &self.graph[b.node],
            }
        })
    }

    /// The key of every link: the fabric's links as a set, comparable across snapshots.
    pub fn link_keys(&self) -> std::collections::BTreeSet<LinkKey> {
        self.links().map(|l| l.key()).collect()
    }

    /// Serializable form.
    pub fn to_file(&self) -> FabricFile {
        FabricFile {
            schema_version: SCHEMA_VERSION,
            local: self.local,
            nodes: self.graph.node_weights().cloned().collect(),
            links: self
                .links()
                .map(|l| FileLink {
                    a_guid: l.a_node.guid,
                    a_port: l.a.port,
                    b_guid: l.b_node.guid,
                    b_port: l.b.port,
                })
                .collect(),
            report: self.report.clone(),
            fabric: self.id.clone(),
        }
    }

    pub fn from_file(file: FabricFile) -> Result<Fabric, ModelError> {
        if file.schema_version > SCHEMA_VERSION {
            return Err(ModelError::SchemaVersion(file.schema_version));
        }
        let mut fabric = Fabric::new();
        for node in file.nodes {
            fabric.add_node(node)?;
        }
        for l in file.links {
            let a = fabric
                .node_by_guid(l.a_guid)
                .ok_or(ModelError::UnknownGuid(l.a_guid))?;
            let b = fabric
                .node_by_guid(l.b_guid)
                .ok_or(ModelError::UnknownGuid(l.b_guid))?;
            fabric.connect(
                End {
                    node: a,
                    port: l.a_port,
                },
                End {
                    node: b,
                    port: l.b_port,
                },
            )?;
        }
        fabric.local = file.local;
        fabric.report = file.report;
        fabric.id = file.fabric;
        Ok(fabric)
    }
}

/// A link as the JSON snapshot holds it: both ends by node GUID and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileLink {
    #[serde(with = "guid")]
    pub a_guid: u64,
    pub a_port: u8,
    #[serde(with = "guid")]
    pub b_guid: u64,
    pub b_port: u8,
}

/// The JSON snapshot: `ibscope discover --format json` writes it, `--topology` reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FabricFile {
    pub schema_version: u32,
    #[serde(default)]
    pub local: Option<PortKey>,
    pub nodes: Vec<Node>,
    pub links: Vec<FileLink>,
    #[serde(default)]
    pub report: DiscoveryReport,
    /// Which fabric the snapshot is of (absent when unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fabric: Option<FabricId>,
}

impl FabricFile {
    /// Read a JSON snapshot of this or an earlier schema version.
    pub fn from_json(text: &str) -> Result<FabricFile, serde_json::Error> {
        /// The version alone: the rest is skipped without being kept.
        #[derive(Deserialize)]
        struct Version {
            schema_version: Option<u64>,
        }
        // Only version 1 goes through a `Value` tree: for a large snapshot that tree takes
        // about 20 times the text's size (1 GB for 49 MB at 8,100 hosts).
        let version: Version = serde_json::from_str(text)?;
        if version.schema_version != Some(1) {
            return serde_json::from_str(text);
        }
        let mut value: serde_json::Value = serde_json::from_str(text)?;
        upgrade_v1(&mut value);
        serde_json::from_value(value)
    }
}

/// Schema version 1 wrote states as codes (0 = not read), widths as `"X4"`: rewrite them
/// in version 2's terms (numbers for GUIDs and masks for sets are still accepted as such).
fn upgrade_v1(value: &mut serde_json::Value) {
    use serde_json::Value;
    let ports = value
        .get_mut("nodes")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(|n| n.get_mut("ports").and_then(Value::as_array_mut))
        .flatten()
        .filter_map(Value::as_object_mut);
    for port in ports {
        for key in ["state", "phys_state"] {
            if port.get(key).and_then(Value::as_u64) == Some(0) {
                port.remove(key);
            }
        }
        if let Some(Value::String(w)) = port.get_mut("width_active") {
            if let Some(lanes) = w.strip_prefix('X') {
                *w = format!("{lanes}x");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(guid: u64, kind: NodeKind, ports: &[(u8, u16)]) -> Node {
        Node {
            guid,
            kind,
            description: format!("n{guid}"),
            num_ports: ports.len() as u8,
            ports: ports
                .iter()
                .map(|&(n, lid)| Port {
                    number: n,
                    guid: guid + u64::from(n),
                    lid,
                    state: Some(PortState::Active),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    /// Port lookups look where a port usually is first; whatever the list's gaps, they
    /// find what a search finds, and `port_entry` and `set_port` keep the list sorted.
    #[test]
    fn port_lookups_agree_with_a_search_whatever_the_gaps() {
        let lists: [&[u8]; 5] = [&[0, 1, 2, 3], &[1, 2, 3], &[0, 2, 5, 6, 200], &[3], &[]];
        for numbers in lists {
            let ports: Vec<(u8, u16)> = numbers.iter().map(|&n| (n, 0)).collect();
            let mut n = node(1, NodeKind::Switch, &ports);
            for number in 0..=255u8 {
                let found = n.port(number).map(|p| p.number);
                assert_eq!(found, numbers.contains(&number).then_some(number));
                assert_eq!(n.port_mut(number).is_some(), found.is_some());
            }
            n.port_entry(4);
            n.set_port(Port::new(1));
            n.port_entry(255);
            let after: Vec<u8> = n.ports.iter().map(|p| p.number).collect();
            let mut expected: Vec<u8> = numbers.iter().copied().chain([1, 4, 255]).collect();
            expected.sort_unstable();
            expected.dedup();
            assert_eq!(after, expected, "from {numbers:?}");
        }
    }

    /// A small fabric added in the order given: local CA 0x10 on leaf 0x100 port 3,
    /// leaves 0x100 and 0x101 both on spine 0x200 (ports 1, 2) and to each other by port
    /// 4 (a cross link), CA 0x11 on leaf 0x101 port 3, CA 0x12 on leaf 0x101 port 1, CA
    /// 0x13 on CA 0x12's second port (reached only through a CA), and 0x300 alone.
    fn fabric_added_in(order: &[u64]) -> Fabric {
        let mut f = Fabric::new();
        for &guid in order {
            let (kind, ports): (NodeKind, &[(u8, u16)]) = match guid {
                0x100 | 0x101 => (NodeKind::Switch, &[(0, 0), (1, 0), (2, 0), (3, 0), (4, 0)]),
                0x200 | 0x300 => (NodeKind::Switch, &[(0, 0), (1, 0), (2, 0)]),
                0x12 => (NodeKind::Ca, &[(1, 0), (2, 0)]),
                _ => (NodeKind::Ca, &[(1, 0)]),
            };
            f.add_node(node(guid, kind, ports)).unwrap();
        }
        let end = |f: &Fabric, guid: u64, port: u8| End {
            node: f.node_by_guid(guid).unwrap(),
            port,
        };
        // (node GUID, port) at either end.
        type Ends = ((u64, u8), (u64, u8));
        let links: &[Ends] = &[
            ((0x101, 2), (0x200, 2)),
            ((0x10, 1), (0x100, 3)),
            ((0x13, 1), (0x12, 2)),
            ((0x100, 1), (0x200, 1)),
            ((0x101, 4), (0x100, 4)),
            ((0x11, 1), (0x101, 3)),
            ((0x101, 1), (0x12, 1)),
        ];
        for &((ga, pa), (gb, pb)) in links {
            let (a, b) = (end(&f, ga, pa), end(&f, gb, pb));
            f.connect(a, b).unwrap();
        }
        f.local = Some(PortKey {
            guid: 0x10,
            port: 1,
        });
        f
    }

    #[test]
    fn canonical_order_is_the_fabrics_not_the_order_nodes_came_in() {
        let orders: [&[u64]; 3] = [
            &[0x10, 0x100, 0x200, 0x101, 0x11, 0x12, 0x13, 0x300],
            &[0x300, 0x13, 0x12, 0x11, 0x101, 0x200, 0x100, 0x10],
            &[0x101, 0x11, 0x300, 0x10, 0x13, 0x200, 0x12, 0x100],
        ];
        let listing = |f: &Fabric| {
            let nodes: Vec<u64> = f.nodes().map(|(_, n)| n.guid).collect();
            let links: Vec<(u64, u8, u64, u8)> = f
                .links()
                .map(|l| (l.a_node.guid, l.a.port, l.b_node.guid, l.b.port))
                .collect();
            (nodes, links)
        };
        for order in orders {
            let mut f = fabric_added_in(order);
            f.put_in_canonical_order();
            let (nodes, links) = listing(&f);
            // Breadth first from the local CA, each switch's ports in order; CA 0x13 hangs
            // off a CA (no SMP passes a CA) and comes by GUID with the unconnected switch.
            assert_eq!(
                nodes,
                [0x10, 0x100, 0x200, 0x101, 0x12, 0x11, 0x13, 0x300],
                "added in {order:x?}"
            );
            assert_eq!(
                links,
                [
                    (0x10, 1, 0x100, 3),
                    (0x100, 1, 0x200, 1),
                    (0x100, 4, 0x101, 4),
                    (0x200, 2, 0x101, 2),
                    (0x101, 1, 0x12, 1),
                    (0x101, 3, 0x11, 1),
                    (0x12, 2, 0x13, 1),
                ],
                "added in {order:x?}"
            );
            // Indexes and peers follow the new numbering.
            for (id, n) in f.nodes() {
                assert_eq!(f.node_by_guid(n.guid), Some(id));
            }
            let ca = f.node_by_guid(0x11).unwrap();
            let leaf = f.node_by_guid(0x101).unwrap();
            assert_eq!(
                f.peer(End { node: ca, port: 1 }),
                Some(End {
                    node: leaf,
                    port: 3
                })
            );
            assert_eq!(
                f.peer(End {
                    node: leaf,
                    port: 3
                }),
                Some(End { node: ca, port: 1 })
            );
        }
    }

    #[test]
    fn lookups_and_peers() {
        let mut f = Fabric::new();
        let sw = f
            .add_node(node(0x100, NodeKind::Switch, &[(0, 1), (1, 1), (2, 1)]))
            .unwrap();
        let ca = f.add_node(node(0x200, NodeKind::Ca, &[(1, 2)])).unwrap();
        f.connect(End { node: sw, port: 1 }, End { node: ca, port: 1 })
            .unwrap();
        assert!(f
            .connect(End { node: sw, port: 1 }, End { node: ca, port: 1 })
            .is_err());
        assert_eq!(f.port_by_lid(1), Some(End { node: sw, port: 0 }));
        assert_eq!(f.port_by_lid(2), Some(End { node: ca, port: 1 }));
        assert_eq!(
            f.peer(End { node: ca, port: 1 }),
            Some(End { node: sw, port: 1 })
        );
        assert_eq!(
            f.peer(End { node: sw, port: 1 }),
            Some(End { node: ca, port: 1 })
        );
        assert_eq!(f.peer(End { node: sw, port: 2 }), None);
        assert_eq!(f.port_by_guid(0x201), Some(End { node: ca, port: 1 }));
        assert_eq!(f.nodes_by_description("n512"), &[ca]);
        assert!(f.add_node(node(0x100, NodeKind::Ca, &[])).is_err());
        // The lookup by description is built when first asked; a node added after it
        // is found too, after the first, in the order nodes were added.
        let twin = f
            .add_node(Node {
                description: "n512".into(),
                ..node(0x300, NodeKind::Ca, &[(1, 3)])
            })
            .unwrap();
        assert_eq!(f.nodes_by_description("n512"), &[ca, twin]);
        f.node_mut(twin).description = "renamed".into();
        f.reindex();
        assert_eq!(f.nodes_by_description("n512"), &[ca]);
        assert_eq!(f.nodes_by_description("renamed"), &[twin]);
    }

    #[test]
    fn json_round_trip() {
        let mut f = Fabric::new();
        let a = f
            .add_node(node(1, NodeKind::Switch, &[(0, 1), (3, 1)]))
            .unwrap();
        let b = f
            .add_node(node(2, NodeKind::Switch, &[(0, 2), (4, 2)]))
            .unwrap();
        f.connect(End { node: a, port: 3 }, End { node: b, port: 4 })
            .unwrap();
        f.local = Some(PortKey { guid: 1, port: 0 });
        let text = serde_json::to_string(&f.to_file()).unwrap();
        let back = Fabric::from_file(serde_json::from_str(&text).unwrap()).unwrap();
        assert_eq!(back.to_file(), f.to_file());
        assert_eq!(
            back.peer(End { node: b, port: 4 }),
            Some(End { node: a, port: 3 })
        );
    }

    #[test]
    fn version_1_snapshots_are_read() {
        let v1 = r#"{"schema_version":1,"nodes":[{"guid":16185219092569541592,
            "system_image_guid":0,"kind":"ca","vendor_id":0,"device_id":0,"revision":0,
            "description":"h","num_ports":1,"ports":[{"number":1,"guid":2,"lid":3,"lmc":0,
            "state":4,"phys_state":0,"width_active":"X4","width_supported":3,
            "width_enabled":3,"speed_active":"Hdr","speed_supported":{"base":7,"ext":4},
            "speed_enabled":{"base":7,"ext":4},"mtu_active":5,"mtu_cap":5,
            "capability_mask":0}]}],"links":[]}"#;
        let f = Fabric::from_file(FabricFile::from_json(v1).unwrap()).unwrap();
        let node = f.node(f.node_by_guid(0xe09d7303007a4bd8).unwrap());
        let p = node.port(1).unwrap();
        assert_eq!(p.state, Some(PortState::Active));
        assert_eq!(p.phys_state, None);
        assert_eq!(p.rate_active(), Rate::parse("4xHDR"));
        assert_eq!(p.speed_supported.best(), Some(Speed::Hdr));
        let v2 = serde_json::to_value(f.to_file()).unwrap();
        assert_eq!(v2["nodes"][0]["guid"], "0xe09d7303007a4bd8");
        assert_eq!(v2["nodes"][0]["ports"][0]["state"], "Active");
        assert_eq!(v2["nodes"][0]["ports"][0]["width_supported"][1], "4x");
    }

    #[test]
    fn aggregation_nodes_are_their_own_kind() {
        let kind = |t, d| NodeKind::classify(t, d);
        assert_eq!(
            kind(NodeType::Ca, "Mellanox Technologies Aggregation Node"),
            Some(NodeKind::AggregationNode)
        );
        assert_eq!(kind(NodeType::Ca, "gpu-0001 mlx5_0"), Some(NodeKind::Ca));
        assert_eq!(kind(NodeType::Unknown(9), "x"), None);
        assert_eq!(NodeKind::AggregationNode.node_type(), NodeType::Ca);
        assert!(!NodeKind::AggregationNode.is_host_ca());
    }

    #[test]
    fn newer_schema_rejected() {
        let mut file = Fabric::new().to_file();
        file.schema_version = SCHEMA_VERSION + 1;
        assert!(Fabric::from_file(file).is_err());
    }
}
