//! Facts derived from a sweep once, when it arrives, so that drawing a frame only
//! formats the rows it shows: the health verdict on every link, the layered summary of
//! the fabric, and the sorted row lists of the tables.

use std::collections::{HashMap, VecDeque};

use ibscope_mad::attr::link::{Speed, Width};
use ibscope_mad::attr::{PhysState, PortState};
use ibscope_topo::escape;
use ibscope_topo::health::{self, HealthOptions, HealthReport, Rate};
use ibscope_topo::namemap::{display_name, NameMap};
use ibscope_topo::resolve::is_name_separator;
use ibscope_topo::{End, Fabric, LinkKey, Node, NodeId, NodeKind, NodeRef, Port, PortKey};

use crate::table_sort::{Column, Natural, TableSort};

/// A node's name, safe for a terminal.
pub fn node_name(node: &Node, names: Option<&NameMap>) -> String {
    escape::for_terminal(display_name(node, names))
}

/// A report's node under its name-map name, safe for a terminal (its reported name when
/// the node is not in `fabric`).
pub fn hop_name(fabric: &Fabric, names: Option<&NameMap>, node: &NodeRef) -> String {
    match fabric.node_by_guid(node.guid) {
        Some(id) => node_name(fabric.node(id), names),
        None => escape::for_terminal(&node.name),
    }
}

/// "name\[port\]" of a port, safe for a terminal; the GUID when the node is not in `fabric`.
pub fn port_name(fabric: &Fabric, names: Option<&NameMap>, key: PortKey) -> String {
    match fabric.node_by_guid(key.guid) {
        Some(id) => format!("{}[{}]", node_name(fabric.node(id), names), key.port),
        None => format!("{:#018x}[{}]", key.guid, key.port),
    }
}

/// What `health::assess` says of one link.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LinkAssessmentSummary {
    /// The rate the link is held to: `--expect`, else its class's most common rate.
    pub expected: Option<Rate>,
    /// The verdict `check` reports the link by.
    pub verdict: health::LinkVerdict,
    /// Why the verdict is not ok, one line per rule that fired; empty when it is.
    pub reasons: Vec<String>,
}

impl LinkAssessmentSummary {
    pub fn degraded(&self) -> bool {
        self.verdict == health::LinkVerdict::Degraded
    }
    /// Below the fabric norm, capability unknown offline (a warning, not degraded).
    pub fn below_norm(&self) -> bool {
        self.verdict == health::LinkVerdict::BelowNorm
    }
}

/// The health verdict on every link of one sweep: `ibscope check`'s and `ibscope links`'
/// (both rules: below what both ends support and enable, below the fabric norm).
/// `assess` is O(links), so it runs once when the sweep is made; every count, colour,
/// marker and event of the UI reads this.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkHealth {
    links: HashMap<LinkKey, LinkAssessmentSummary>,
    degraded: usize,
    below_norm: usize,
}

impl LinkHealth {
    pub fn assess(fabric: &Fabric, options: &HealthOptions) -> LinkHealth {
        // Names only label the report's ends, which are not kept.
        LinkHealth::from_report(&health::assess(fabric, None, options))
    }

    pub fn from_report(report: &HealthReport) -> LinkHealth {
        let links: HashMap<LinkKey, LinkAssessmentSummary> = report
            .links
            .iter()
            .map(|l| {
                let key = LinkKey::new(l.a.at.key(), l.b.at.key());
                let verdict = LinkAssessmentSummary {
                    expected: l.expected,
                    verdict: l.verdict,
                    reasons: l.reasons.clone(),
                };
                (key, verdict)
            })
            .collect();
        let degraded = links.values().filter(|v| v.degraded()).count();
        let below_norm = links.values().filter(|v| v.below_norm()).count();
        LinkHealth {
            links,
            degraded,
            below_norm,
        }
    }

    /// The verdict on one link.
    pub fn verdict(&self, link: LinkKey) -> Option<&LinkAssessmentSummary> {
        self.links.get(&link)
    }

    pub fn is_degraded(&self, link: LinkKey) -> bool {
        self.verdict(link)
            .is_some_and(LinkAssessmentSummary::degraded)
    }

    /// Degraded links in the sweep: the count `check` reports as degraded-link findings.
    pub fn degraded_count(&self) -> usize {
        self.degraded
    }

    /// Links below the norm with capability unknown: `check`'s link-below-norm findings.
    pub fn below_norm_count(&self) -> usize {
        self.below_norm
    }
}

/// What a link runs at and whether it is up, as its two ends report it. Whether it is
/// degraded is [`LinkHealth`]'s call, not this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkFacts {
    pub width: Option<Width>,
    pub speed: Option<Speed>,
    /// An end reports a known PortState other than Active, or a known physical state other
    /// than LinkUp.
    pub down: bool,
    pub state_a: Option<PortState>,
    pub state_b: Option<PortState>,
    pub phys_a: Option<PhysState>,
    pub phys_b: Option<PhysState>,
}

impl LinkFacts {
    pub fn active_text(&self) -> String {
        Rate::text(self.width, self.speed)
    }
    pub fn state_text(&self) -> String {
        let s = |state: Option<PortState>| state.map_or("?", PortState::name);
        if self.state_a == self.state_b {
            s(self.state_a).to_string()
        } else {
            format!("{}/{}", s(self.state_a), s(self.state_b))
        }
    }
}

/// The active rate and states of a link's two ends.
pub fn link_facts(a: Option<&Port>, b: Option<&Port>) -> LinkFacts {
    let (Some(pa), Some(pb)) = (a, b) else {
        return LinkFacts::default();
    };
    LinkFacts {
        width: pa.width_active.or(pb.width_active),
        speed: pa.speed_active.or(pb.speed_active),
        down: pa.is_known_down() || pb.is_known_down(),
        state_a: pa.state,
        state_b: pb.state,
        phys_a: pa.phys_state,
        phys_b: pb.phys_state,
    }
}

/// One switch in the fabric picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchChip {
    pub id: NodeId,
    pub name: String,
    /// The name without the prefix/suffix every switch of its layer shares (see
    /// [`Layer::common`]); the full name when nothing is shared.
    pub short: String,
    /// Links towards higher layers / lower layers (CAs included) / the same layer.
    pub up: usize,
    pub down: usize,
    pub lateral: usize,
    /// Degraded or down links touching this switch.
    pub problems: usize,
}

/// One layer of switches; layer 1 holds the switches next to CAs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Layer {
    pub layer: u32,
    pub switches: Vec<SwitchChip>,
    /// Links from this layer down to the layer below (CAs for layer 1).
    pub links_down: usize,
    pub problems_down: usize,
    /// Links between switches of this layer.
    pub links_lateral: usize,
    pub problems_lateral: usize,
    /// (prefix, suffix) stripped from the names of this layer's switches for the chips.
    pub common: Option<(String, String)>,
}

/// Counts and the layered picture of the fabric.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FabricSummary {
    pub switches: usize,
    pub cas: usize,
    pub routers: usize,
    /// SHARP aggregation nodes (not counted in `cas`).
    pub aggregation_nodes: usize,
    pub links: usize,
    pub degraded: usize,
    /// Below the norm, capability unknown offline.
    pub below_norm: usize,
    pub down: usize,
    /// Lowest layer first.
    pub layers: Vec<Layer>,
    /// Switches no CA reaches (a switch-only fabric, or an island).
    pub unlayered: Vec<SwitchChip>,
    pub ca_names_first_last: Option<(String, String)>,
}

/// BFS distance from the nearest CA or router (0) for every node it reaches. SHARP
/// aggregation nodes sit inside their switch: they are no CA to count from, and get no
/// layer.
pub fn layers_from_cas(fabric: &Fabric) -> HashMap<NodeId, u32> {
    let mut dist = HashMap::with_capacity(fabric.node_count());
    let mut queue = VecDeque::new();
    for (id, n) in fabric.nodes() {
        if matches!(n.kind, NodeKind::Ca | NodeKind::Router) {
            dist.insert(id, 0);
            queue.push_back(id);
        }
    }
    let graph = fabric.graph();
    while let Some(id) = queue.pop_front() {
        let d = dist[&id];
        for next in graph.neighbors(id) {
            if fabric.node(next).kind == NodeKind::AggregationNode {
                continue;
            }
            if let std::collections::hash_map::Entry::Vacant(slot) = dist.entry(next) {
                slot.insert(d + 1);
                queue.push_back(next);
            }
        }
    }
    dist
}

pub fn summarize(fabric: &Fabric, health: &LinkHealth, names: Option<&NameMap>) -> FabricSummary {
    let layer_of = layers_from_cas(fabric);
    let mut s = FabricSummary::default();
    let mut chips: HashMap<NodeId, SwitchChip> = HashMap::new();
    let mut first_last: Option<(String, String)> = None;
    for (id, n) in fabric.nodes() {
        match n.kind {
            NodeKind::Switch => {
                s.switches += 1;
                chips.insert(
                    id,
                    SwitchChip {
                        id,
                        name: node_name(n, names),
                        short: String::new(),
                        up: 0,
                        down: 0,
                        lateral: 0,
                        problems: 0,
                    },
                );
            }
            NodeKind::Ca => s.cas += 1,
            NodeKind::Router => s.routers += 1,
            NodeKind::AggregationNode => s.aggregation_nodes += 1,
        }
        if matches!(n.kind, NodeKind::Ca | NodeKind::Router) {
            let name = node_name(n, names);
            first_last = Some(match first_last {
                None => (name.clone(), name),
                Some((f, l)) => (f.min(name.clone()), l.max(name)),
            });
        }
    }
    s.ca_names_first_last = first_last;
    let mut layers: HashMap<u32, Layer> = HashMap::new();
    for link in fabric.links() {
        s.links += 1;
        let down = link_facts(link.a_port(), link.b_port()).down;
        let verdict = health.verdict(link.key());
        let degraded = verdict.is_some_and(LinkAssessmentSummary::degraded);
        let problem = degraded || down;
        s.degraded += usize::from(degraded);
        s.below_norm += usize::from(verdict.is_some_and(LinkAssessmentSummary::below_norm));
        s.down += usize::from(down);
        let aggregation = |n: &Node| n.kind == NodeKind::AggregationNode;
        if aggregation(link.a_node) || aggregation(link.b_node) {
            // A switch's own in-network computing port: not a link between layers.
            continue;
        }
        let la = layer_of.get(&link.a.node).copied();
        let lb = layer_of.get(&link.b.node).copied();
        for (me, mine, theirs) in [(link.a.node, la, lb), (link.b.node, lb, la)] {
            if let Some(chip) = chips.get_mut(&me) {
                match (mine, theirs) {
                    (Some(x), Some(y)) if y > x => chip.up += 1,
                    (Some(x), Some(y)) if y < x => chip.down += 1,
                    _ => chip.lateral += 1,
                }
                chip.problems += usize::from(problem);
            }
        }
        if let (Some(x), Some(y)) = (la, lb) {
            let top = x.max(y);
            let entry = layers.entry(top).or_insert_with(|| Layer {
                layer: top,
                ..Default::default()
            });
            if x == y {
                entry.links_lateral += 1;
                entry.problems_lateral += usize::from(problem);
            } else {
                entry.links_down += 1;
                entry.problems_down += usize::from(problem);
            }
        }
    }
    let mut chips: Vec<SwitchChip> = chips.into_values().collect();
    chips.sort_by(|a, b| a.name.cmp(&b.name).then(a.id.cmp(&b.id)));
    for chip in chips {
        match layer_of.get(&chip.id) {
            Some(&l) => layers
                .entry(l)
                .or_insert_with(|| Layer {
                    layer: l,
                    ..Default::default()
                })
                .switches
                .push(chip),
            None => s.unlayered.push(chip),
        }
    }
    let mut layers: Vec<Layer> = layers.into_values().filter(|l| l.layer > 0).collect();
    layers.sort_by_key(|l| l.layer);
    for layer in &mut layers {
        shorten_names(layer);
    }
    for chip in &mut s.unlayered {
        chip.short = chip.name.clone();
    }
    s.layers = layers;
    s
}

/// Long switch names in one layer often differ only in the middle
/// ("MF0;spine-0001:MQM8790/U1", "MF0;spine-0002:MQM8790/U1"): strip the shared prefix
/// and suffix at separators (keeping dashes and underscores, which join a name), so the
/// chips show "spine-0001". Names of 14 characters or fewer are left alone.
fn shorten_names(layer: &mut Layer) {
    let long = layer.switches.iter().any(|c| c.name.chars().count() > 14);
    if layer.switches.len() < 2 || !long {
        for c in &mut layer.switches {
            c.short = c.name.clone();
        }
        return;
    }
    let first = layer.switches[0].name.clone();
    let mut prefix = first.len();
    let mut suffix = first.len();
    for c in &layer.switches[1..] {
        let common_pre = first
            .char_indices()
            .zip(c.name.chars())
            .find(|((_, a), b)| a != b)
            .map(|((i, _), _)| i)
            .unwrap_or_else(|| first.len().min(c.name.len()));
        prefix = prefix.min(common_pre);
        let common_suf = first
            .chars()
            .rev()
            .zip(c.name.chars().rev())
            .take_while(|(a, b)| a == b)
            .map(|(a, _)| a.len_utf8())
            .sum::<usize>();
        suffix = suffix.min(common_suf);
    }
    // Cut the prefix after its last separator and the suffix at its first one.
    let pre = first[..prefix]
        .rfind(is_name_separator)
        .map(|i| i + first[i..].chars().next().map_or(1, char::len_utf8))
        .unwrap_or(0);
    let tail = &first[first.len() - suffix..];
    let suf = tail
        .find(is_name_separator)
        .map(|i| tail.len() - i)
        .unwrap_or(0);
    let ok = layer.switches.iter().all(|c| {
        c.name.len() > pre + suf
            && c.name.is_char_boundary(pre)
            && c.name.is_char_boundary(c.name.len() - suf)
    });
    if !ok || (pre == 0 && suf == 0) {
        for c in &mut layer.switches {
            c.short = c.name.clone();
        }
        return;
    }
    for c in &mut layer.switches {
        c.short = c.name[pre..c.name.len() - suf].to_string();
    }
    layer.common = Some((
        first[..pre].to_string(),
        first[first.len() - suf..].to_string(),
    ));
}

/// The node table's columns.
pub const NODE_COLUMNS: [Column; 5] = [
    Column::up("Name"),
    Column::up("Kind"),
    Column::up("GUID"),
    Column::up("LID"),
    Column::down("Linked"),
];

/// A row of the node table, with its sort and filter keys precomputed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeRow {
    pub id: NodeId,
    pub name: String,
    /// Lowercase name + GUID + LID, for the filter.
    pub search: String,
    pub kind: NodeKind,
    pub guid: u64,
    pub lid: Option<u16>,
    pub ports: u8,
    pub linked: usize,
}

pub fn node_rows(fabric: &Fabric, names: Option<&NameMap>) -> Vec<NodeRow> {
    fabric
        .nodes()
        .map(|(id, n)| {
            let name = node_name(n, names);
            let lid = n.lid();
            let search = format!(
                "{} {:#018x} {:016x} {}",
                name.to_lowercase(),
                n.guid,
                n.guid,
                lid.map(|l| l.to_string()).unwrap_or_default()
            );
            let linked = n
                .ports
                .iter()
                .filter(|p| {
                    fabric
                        .peer(End {
                            node: id,
                            port: p.number,
                        })
                        .is_some()
                })
                .count();
            NodeRow {
                id,
                name,
                search,
                kind: n.kind,
                guid: n.guid,
                lid,
                ports: n.num_ports,
                linked,
            }
        })
        .collect()
}

/// Indexes into `rows` that match `filter` (case-insensitive substring of name, GUID, LID),
/// in `sort` order ([`NODE_COLUMNS`]; ties by name, then GUID).
pub fn filter_sort_nodes(rows: &[NodeRow], filter: &str, sort: TableSort) -> Vec<usize> {
    let needle = filter.trim().to_lowercase();
    let mut out: Vec<usize> = rows
        .iter()
        .enumerate()
        .filter(|(_, r)| needle.is_empty() || r.search.contains(&needle))
        .map(|(i, _)| i)
        .collect();
    let natural = sort.natural(&NODE_COLUMNS);
    out.sort_by(|&x, &y| {
        let (a, b) = (&rows[x], &rows[y]);
        let by_name = a.name.cmp(&b.name).then(a.guid.cmp(&b.guid));
        let by_column = match sort.column {
            // Switches first.
            1 => b.kind.cmp(&a.kind),
            2 => a.guid.cmp(&b.guid),
            // Nodes without a LID last.
            3 => a.lid.unwrap_or(u16::MAX).cmp(&b.lid.unwrap_or(u16::MAX)),
            4 => (a.linked, a.ports).cmp(&(b.linked, b.ports)),
            _ => by_name,
        };
        sort.apply(natural, by_column).then(by_name)
    });
    out
}

/// A row of the link table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkRow {
    pub a: End,
    pub b: End,
    /// The ends' node names (name-map name or NodeDescription; untrusted), to sort by.
    pub name_a: String,
    pub name_b: String,
    pub facts: LinkFacts,
    pub verdict: LinkAssessmentSummary,
}

impl LinkRow {
    pub fn is_problem(&self) -> bool {
        self.facts.down || self.verdict.degraded()
    }
    /// How bad the link is: down, degraded, below the norm, fine.
    pub fn trouble(&self) -> u8 {
        if self.facts.down {
            3
        } else if self.verdict.degraded() {
            2
        } else {
            u8::from(self.verdict.below_norm())
        }
    }
}

/// The link table's columns; the last, its DOWN/DEGR/LOW? flag, sorts it first.
pub const LINK_COLUMNS: [Column; 6] = [
    Column::up("End A"),
    Column::up("End B"),
    Column::down("Active"),
    Column::down("Expect"),
    Column::up("State"),
    Column::down("Flag"),
];

/// The link table's default order: problems first.
pub const LINK_SORT: TableSort = TableSort::by(5);

/// Indexes into `rows` in `sort` order ([`LINK_COLUMNS`]; ties by the first end's name
/// and port).
pub fn sort_links(rows: &[LinkRow], sort: TableSort) -> Vec<usize> {
    let rate = |r: &LinkRow| {
        let (Some(w), Some(s)) = (r.facts.width, r.facts.speed) else {
            return 0.0;
        };
        Rate::new(w, s).data_gbps()
    };
    let expect = |r: &LinkRow| r.verdict.expected.map_or(0.0, Rate::data_gbps);
    let natural = sort.natural(&LINK_COLUMNS);
    let mut out: Vec<usize> = (0..rows.len()).collect();
    out.sort_by(|&x, &y| {
        let (a, b) = (&rows[x], &rows[y]);
        let by_a = a.name_a.cmp(&b.name_a).then(a.a.port.cmp(&b.a.port));
        let by_column = match sort.column {
            1 => a.name_b.cmp(&b.name_b).then(a.b.port.cmp(&b.b.port)),
            2 => rate(a).total_cmp(&rate(b)),
            3 => expect(a).total_cmp(&expect(b)),
            4 => a.facts.state_text().cmp(&b.facts.state_text()),
            5 => a.trouble().cmp(&b.trouble()),
            _ => by_a,
        };
        sort.apply(natural, by_column).then(by_a)
    });
    out
}

/// Every link, problems first (down, then degraded), then by the names of the ends. The
/// end listed first is the switch-side / lower-GUID one so rows read consistently.
pub fn link_rows(fabric: &Fabric, health: &LinkHealth, names: Option<&NameMap>) -> Vec<LinkRow> {
    let mut rows: Vec<(String, LinkRow)> = fabric
        .links()
        .map(|l| {
            let (mut a, mut b) = (l.a, l.b);
            let (na, nb) = (l.a_node, l.b_node);
            let swap = match (na.is_switch(), nb.is_switch()) {
                (false, true) => true,
                (true, false) => false,
                _ => na.guid > nb.guid,
            };
            if swap {
                std::mem::swap(&mut a, &mut b);
            }
            let (node_a, node_b) = (fabric.node(a.node), fabric.node(b.node));
            let facts = link_facts(node_a.port(a.port), node_b.port(b.port));
            let key = LinkKey::new(node_a.port_key(a.port), node_b.port_key(b.port));
            let verdict = health.verdict(key).cloned().unwrap_or_default();
            let key = format!("{}\u{0}{:03}", display_name(node_a, names), a.port);
            (
                key,
                LinkRow {
                    a,
                    b,
                    name_a: display_name(node_a, names).to_string(),
                    name_b: display_name(node_b, names).to_string(),
                    facts,
                    verdict,
                },
            )
        })
        .collect();
    rows.sort_by(|(ka, a), (kb, b)| {
        b.facts
            .down
            .cmp(&a.facts.down)
            .then(b.verdict.degraded().cmp(&a.verdict.degraded()))
            .then(ka.cmp(kb))
    });
    rows.into_iter().map(|(_, r)| r).collect()
}

/// What one rail of one host looks like in the Hosts grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CellState {
    /// Active at the host's rate, on a leaf of its rail.
    Up,
    /// Up, but its link is degraded or slower than the host's other rails.
    Degraded,
    /// Up, but cabled to another rail's leaf (misaligned, or swapped with another HCA).
    Misplaced,
    /// In the fabric, not Active.
    Down,
    /// A rail the host should have, with no HCA in the fabric.
    Missing,
}

impl CellState {
    /// Red in the grid.
    pub fn is_bad(self) -> bool {
        matches!(
            self,
            CellState::Degraded | CellState::Down | CellState::Missing
        )
    }
}

/// One cell of the Hosts grid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCell {
    pub state: CellState,
    /// Its rate, state or "missing" (safe for a terminal).
    pub text: String,
    /// The HCA port (none for a missing one).
    pub key: Option<PortKey>,
}

/// A host's row: one cell per rail of the grid (`None`: the host has no HCA there and
/// none is expected).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRow {
    /// Raw name (untrusted), for matching findings; [`HostRow::shown`] for the screen.
    pub name: String,
    pub shown: String,
    pub cells: Vec<Option<HostCell>>,
}

/// The hosts x rails grid of a sweep.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HostGrid {
    pub rails: Vec<u8>,
    /// Hosts with at least one HCA of known rail, in name order.
    pub rows: Vec<HostRow>,
    /// Hosts with a cell that is not Up.
    pub with_problems: usize,
    /// Hosts whose HCAs have no known rail (not in the grid).
    pub without_rails: usize,
    /// Every host (server) the fabric's CAs make up, in the grid or not.
    pub servers: usize,
    /// Rails down (not Active, or their HCA not in the fabric): `check`'s rail-down findings.
    pub rails_down: usize,
}

impl CellState {
    /// How bad a cell is, for sorting a rail's column worst first.
    fn badness(cell: Option<&HostCell>) -> u8 {
        match cell.map(|c| c.state) {
            None => 0,
            Some(CellState::Up) => 1,
            Some(CellState::Misplaced) => 2,
            Some(CellState::Degraded) => 3,
            Some(CellState::Down) => 4,
            Some(CellState::Missing) => 5,
        }
    }
}

/// The natural direction of the grid's column `column`: the host's name A to Z, a rail
/// (column r + 1) its worst cells first.
pub fn host_natural(column: usize) -> Natural {
    if column == 0 {
        Natural::Ascending
    } else {
        Natural::Descending
    }
}

/// Indexes into the grid's rows in `sort` order (ties by the host's name).
pub fn sort_hosts(grid: &HostGrid, sort: TableSort) -> Vec<usize> {
    let natural = host_natural(sort.column);
    let mut out: Vec<usize> = (0..grid.rows.len()).collect();
    out.sort_by(|&x, &y| {
        let (a, b) = (&grid.rows[x], &grid.rows[y]);
        let by_name = a.name.cmp(&b.name);
        let by_column = match sort.column.checked_sub(1) {
            Some(r) => {
                let bad =
                    |row: &HostRow| CellState::badness(row.cells.get(r).and_then(Option::as_ref));
                bad(a).cmp(&bad(b))
            }
            None => by_name,
        };
        sort.apply(natural, by_column).then(by_name)
    });
    out
}

/// The grid: every host with rails, each rail's cell judged by the link health and the
/// host and rail checks of `check` ([`ibscope_topo::hosts::check`]).
pub fn host_grid(fabric: &Fabric, health: &LinkHealth, names: Option<&NameMap>) -> HostGrid {
    use ibscope_topo::hosts::{self, Hosts, RailIssue};
    let all = Hosts::group(fabric, names);
    let rails = all.rails();
    let mut marks: HashMap<(usize, usize), CellState> = HashMap::new();
    let mut missing: HashMap<usize, Vec<u8>> = HashMap::new();
    let issues = hosts::check(fabric, &all);
    let rails_down = issues
        .iter()
        .filter(|i| matches!(i, RailIssue::Down(_)))
        .count();
    for issue in issues {
        match issue {
            RailIssue::Down(d) if d.hca.is_none() => {
                missing.entry(d.host).or_default().push(d.rail)
            }
            RailIssue::Slow { hca, .. } => {
                marks.insert(hca, CellState::Degraded);
            }
            RailIssue::Misaligned { hca } => {
                marks.insert(hca, CellState::Misplaced);
            }
            RailIssue::Swapped { a, b } => {
                marks.insert(a, CellState::Misplaced);
                marks.insert(b, CellState::Misplaced);
            }
            RailIssue::Down(_) => {}
        }
    }
    let mut grid = HostGrid {
        rails: rails.clone(),
        servers: all.len(),
        rails_down,
        ..Default::default()
    };
    for (h, host) in all.hosts().iter().enumerate() {
        if host.rails().next().is_none() {
            grid.without_rails += 1;
            continue;
        }
        let mut cells: Vec<Option<HostCell>> = vec![None; rails.len()];
        for (i, c) in host.hcas.iter().enumerate() {
            let Some(col) = c.rail.and_then(|r| rails.iter().position(|&x| x == r)) else {
                continue;
            };
            if cells[col].is_some() {
                continue;
            }
            let degraded = fabric
                .link_at(c.end())
                .is_some_and(|link| health.is_degraded(link));
            let state = if !c.is_up() {
                CellState::Down
            } else if degraded {
                CellState::Degraded
            } else {
                marks.get(&(h, i)).copied().unwrap_or(CellState::Up)
            };
            let rate = Rate::text_of(c.rate);
            let text = match state {
                CellState::Down => c.state.map_or("?", PortState::short).to_string(),
                // Marked in text too, for screens without colour.
                CellState::Misplaced => format!("{rate}*"),
                _ => rate,
            };
            cells[col] = Some(HostCell {
                state,
                text,
                key: Some(c.key()),
            });
        }
        for r in missing.get(&h).into_iter().flatten() {
            if let Some(col) = rails.iter().position(|x| x == r) {
                cells[col] = Some(HostCell {
                    state: CellState::Missing,
                    text: "missing".into(),
                    key: None,
                });
            }
        }
        if cells.iter().flatten().any(|c| c.state != CellState::Up) {
            grid.with_problems += 1;
        }
        grid.rows.push(HostRow {
            name: host.name.clone(),
            shown: escape::for_terminal(&host.name),
            cells,
        });
    }
    grid
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chip(name: &str) -> SwitchChip {
        SwitchChip {
            id: NodeId::new(0),
            name: name.into(),
            short: String::new(),
            up: 0,
            down: 0,
            lateral: 0,
            problems: 0,
        }
    }

    fn shortened(names: &[&str]) -> (Vec<String>, Option<(String, String)>) {
        let mut layer = Layer {
            switches: names.iter().map(|n| chip(n)).collect(),
            ..Default::default()
        };
        shorten_names(&mut layer);
        (
            layer.switches.into_iter().map(|c| c.short).collect(),
            layer.common,
        )
    }

    #[test]
    fn shared_affixes_are_stripped_at_separators() {
        let (short, common) =
            shortened(&["MF0;spine-0001:MQM8790/U1", "MF0;spine-0012:MQM8790/U1"]);
        assert_eq!(short, ["spine-0001", "spine-0012"]);
        assert_eq!(common, Some(("MF0;".into(), ":MQM8790/U1".into())));
        // Short names stay whole.
        let (short, common) = shortened(&["leaf-1", "leaf-2"]);
        assert_eq!(short, ["leaf-1", "leaf-2"]);
        assert_eq!(common, None);
        // Nothing shared at a separator: unchanged.
        let (short, _) = shortened(&["switch-number-one-a", "switch-number-one-b"]);
        assert_eq!(short, ["switch-number-one-a", "switch-number-one-b"]);
        // Multi-byte text does not split a character.
        let (short, _) = shortened(&["ä;ünïcode-long-name-1 x", "ä;ünïcode-long-name-2 x"]);
        assert_eq!(short, ["ünïcode-long-name-1", "ünïcode-long-name-2"]);
    }

    #[test]
    fn facts_report_down_only_for_known_bad_states() {
        let mut a = Port::new(1);
        a.width_active = Some(Width::X4);
        let mut b = a.clone();
        let f = link_facts(Some(&a), Some(&b));
        assert_eq!(f.active_text(), "4x?");
        assert!(!f.down);
        // A known non-Active state is down; unknown (0) is not.
        b.state = Some(PortState::Down);
        assert!(link_facts(Some(&a), Some(&b)).down);
        b.state = None;
        assert!(!link_facts(Some(&a), Some(&b)).down);
        // No far end: no facts.
        assert_eq!(link_facts(Some(&a), None), LinkFacts::default());
    }

    /// A switch with three hosts at 4xHDR and one narrowed to 1xHDR the way ibsim does it:
    /// both ends enable only 1x, so active equals the best both ends enable and only the
    /// fabric-norm rule sees it.
    fn norm_only_fabric() -> Fabric {
        use ibscope_mad::attr::link::{SpeedSet, WidthSet};
        let port = |number: u8, width: Width, enabled: u8| Port {
            state: Some(PortState::Active),
            phys_state: Some(PhysState::LinkUp),
            width_active: Some(width),
            width_supported: WidthSet(0x1f),
            width_enabled: WidthSet(enabled),
            speed_active: Some(Speed::Hdr),
            speed_supported: SpeedSet::from_masks(7, 0, 7, 0),
            speed_enabled: SpeedSet::from_masks(7, 0, 7, 0),
            ..Port::new(number)
        };
        let node = |guid: u64, kind: NodeKind, name: &str, ports: Vec<Port>| Node {
            guid,
            kind,
            description: name.into(),
            num_ports: ports.iter().map(|p| p.number).max().unwrap_or(0),
            ports,
            ..Default::default()
        };
        let mut f = Fabric::new();
        let mut sw_ports = vec![Port::new(0)];
        for n in 1..=4u8 {
            let narrowed = n == 4;
            sw_ports.push(if narrowed {
                port(n, Width::X1, 1)
            } else {
                port(n, Width::X4, 3)
            });
        }
        let sw = f
            .add_node(node(0x10, NodeKind::Switch, "sw", sw_ports))
            .unwrap();
        for n in 1..=4u8 {
            let p = if n == 4 {
                port(1, Width::X1, 1)
            } else {
                port(1, Width::X4, 3)
            };
            let h = f
                .add_node(node(
                    0x20 + u64::from(n),
                    NodeKind::Ca,
                    &format!("h{n}"),
                    vec![p],
                ))
                .unwrap();
            f.connect(End { node: sw, port: n }, End { node: h, port: 1 })
                .unwrap();
        }
        f
    }

    #[test]
    fn fabric_norm_degraded_link_is_counted_marked_and_explained() {
        let f = norm_only_fabric();
        let health = LinkHealth::assess(&f, &HealthOptions::default());
        assert_eq!(health.degraded_count(), 1);
        let key = |a: (u64, u8), b: (u64, u8)| {
            let end = |(guid, port)| PortKey { guid, port };
            LinkKey::new(end(a), end(b))
        };
        assert!(
            health.is_degraded(key((0x24, 1), (0x10, 4))),
            "either order"
        );
        assert!(health.is_degraded(key((0x10, 4), (0x24, 1))));
        assert!(!health.is_degraded(key((0x10, 1), (0x21, 1))));
        let s = summarize(&f, &health, None);
        assert_eq!((s.links, s.degraded, s.down), (4, 1, 0));
        assert_eq!(s.layers[0].switches[0].problems, 1);
        assert_eq!(s.layers[0].problems_down, 1);
        let rows = link_rows(&f, &health, None);
        assert_eq!(rows[0].b.port, 1);
        assert_eq!(f.node(rows[0].b.node).guid, 0x24, "degraded first");
        assert!(rows[0].is_problem());
        assert_eq!(rows[0].verdict.reasons, ["1xHDR below fabric norm 4xHDR"]);
        assert_eq!(rows[0].verdict.expected, Rate::parse("4xHDR"));
        assert!(rows[1..].iter().all(|r| !r.is_problem()));
        // --expect moves the bar: every link below 4xNDR.
        let opts = HealthOptions {
            expect: Rate::parse("4xNDR"),
            ..Default::default()
        };
        assert_eq!(LinkHealth::assess(&f, &opts).degraded_count(), 4);
    }

    /// A leaf-spine pair whose switches each have a SHARP aggregation node on an extra
    /// port, and a host whose topology-file rate is below the norm with nothing to say
    /// whether its card can do better.
    #[test]
    fn aggregation_nodes_stay_out_of_layers_and_below_norm_is_counted_apart() {
        let text = "Switch 8 \"leaf\"\n[1] \"h1\"[1] # lid 0 4xNDR\n[2] \"h2\"[1] # lid 0 4xNDR\n\
[3] \"h3\"[1] # lid 0 4xHDR\n[5] \"spine\"[1] # lid 0 4xNDR\n[7] \"agg1\"[1] # lid 0 4xNDR\n\n\
Switch 8 \"spine\"\n[1] \"leaf\"[5] # lid 0 4xNDR\n[7] \"agg2\"[1] # lid 0 4xNDR\n\n\
Hca 1 \"h1\"\n[1] \"leaf\"[1]\n\nHca 1 \"h2\"\n[1] \"leaf\"[2]\n\nHca 1 \"h3\"\n[1] \"leaf\"[3]\n\n\
Hca 1 \"agg1\" # \"Mellanox Technologies Aggregation Node\"\n[1] \"leaf\"[7]\n\n\
Hca 1 \"agg2\" # \"Mellanox Technologies Aggregation Node\"\n[1] \"spine\"[7]\n";
        let f = ibscope_topo::ibnd::parse(text).unwrap();
        let health = LinkHealth::assess(&f, &HealthOptions::default());
        assert_eq!((health.degraded_count(), health.below_norm_count()), (0, 1));
        let s = summarize(&f, &health, None);
        assert_eq!((s.cas, s.aggregation_nodes, s.switches), (3, 2, 2));
        assert_eq!((s.degraded, s.below_norm, s.down), (0, 1, 0));
        // The spine is layer 2 (its aggregation node does not make it a leaf), the leaf
        // link points down from it, and the aggregation links are no layer's links.
        let layers: Vec<(u32, usize, usize, usize)> = s
            .layers
            .iter()
            .map(|l| (l.layer, l.switches.len(), l.links_down, l.links_lateral))
            .collect();
        assert_eq!(layers, [(1, 1, 3, 0), (2, 1, 1, 0)]);
        assert!(s
            .layers
            .iter()
            .flat_map(|l| &l.switches)
            .all(|c| c.lateral == 0));
        let rows = link_rows(&f, &health, None);
        let low: Vec<&LinkRow> = rows.iter().filter(|r| r.verdict.below_norm()).collect();
        assert_eq!(low.len(), 1);
        assert!(!low[0].is_problem());
        assert_eq!(
            low[0].verdict.reasons,
            ["4xHDR below fabric norm 4xNDR (capability unknown offline)"]
        );
    }
}
