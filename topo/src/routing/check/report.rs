//! What `route check` is asked and what it reports.

use serde::{Deserialize, Serialize};

use crate::model::refs::{route_port, NodeRef, PortRef};
use crate::routing::path::{ChannelRef, Path};

/// What [`check`](super::check) looks at and how much it reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CheckOptions {
    /// Also check that every CA reaches every switch LID (management traffic). Default true.
    pub switch_destinations: bool,
    /// Let routes to switch LIDs add channel dependencies. Default false: credit loops are
    /// about data traffic between CAs, which is what `ibdmchk`-style checks consider.
    pub cdg_switch_destinations: bool,
    /// Cap on each example list (unreachable destinations, loops, credit loops).
    pub max_examples: usize,
    /// Fill [`RouteBalance::ports`] with every directed link (large on big fabrics).
    pub port_details: bool,
    /// Length of [`RouteBalance::hottest`].
    pub top_links: usize,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            switch_destinations: true,
            cdg_switch_destinations: false,
            max_examples: 50,
            port_details: false,
            top_links: 10,
        }
    }
}

/// Why routes break at a given place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakKind {
    /// LFT entry unset (255) or the LID above LinearFDBTop.
    NoRoute,
    /// LFT entry points at a port that is down, unlinked or beyond the switch's ports.
    PortDown,
    /// Delivered to a port that does not own the LID.
    Misdelivered,
    LftNotRead,
    /// The source CA port itself is down.
    SourceDown,
}

/// Every destination whose routes break at one place, aggregated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BreakSummary {
    /// The switch whose LFT entry fails (the CA for `source_down`).
    pub at: NodeRef,
    pub kind: BreakKind,
    /// The egress port for `port_down` / `misdelivered`.
    pub port: Option<u8>,
    /// Destination LIDs whose route breaks here (whether or not a source reaches here).
    pub destinations: u64,
    /// (source, destination) pairs that end here.
    pub pairs: u64,
    /// A few of those LIDs.
    pub example_lids: Vec<u16>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnreachableDest {
    pub dst_lid: u16,
    #[serde(with = "route_port")]
    pub dst: PortRef,
    /// Sources that do not reach it, of `sources` that try.
    pub sources_failed: u64,
    pub sources: u64,
}

/// LFTs that send a destination round a cycle of switches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ForwardingLoop {
    pub dst_lid: u16,
    #[serde(with = "route_port::option")]
    pub dst: Option<PortRef>,
    /// The switches of the cycle, in forwarding order.
    pub cycle: Vec<NodeRef>,
    /// Pairs caught in it.
    pub pairs: u64,
}

/// Where a directed switch link points relative to switch layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Towards a switch of a higher layer (further from the CAs).
    Up,
    Down,
    /// Same layer, or a layer unknown.
    Lateral,
    /// A switch port to a CA.
    ToCa,
    /// A CA port to its switch.
    FromCa,
}

/// Load of one directed link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PortLoad {
    #[serde(with = "route_port")]
    pub from: PortRef,
    #[serde(with = "route_port")]
    pub to: PortRef,
    /// Layer of the `from` node: CAs 0, leaves 1, ...; `None` for a switch no CA reaches.
    pub layer: Option<u32>,
    pub direction: Direction,
    /// CA destination LIDs the LFT sends out of this port (`check_lft_balance`'s count).
    pub lids: u32,
    /// CA-to-CA (source port, destination LID) routes crossing this link.
    pub routes: u64,
}

/// Min/max/mean of [`PortLoad`]s sharing a layer and a direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerStats {
    pub layer: Option<u32>,
    pub direction: Direction,
    pub ports: usize,
    pub lids_min: u32,
    pub lids_max: u32,
    pub routes_min: u64,
    pub routes_max: u64,
    pub routes_mean: f64,
    /// routes_max / routes_min; `None` when the minimum is 0.
    pub imbalance: Option<f64>,
}

/// A switch `check_lft_balance` would flag: among its live ports towards other switches in
/// one direction (up, down or lateral), the busiest carries more than one CA LID more than
/// the idlest. Unlinked ports carrying LIDs are not compared: they are black holes, in
/// [`RouteReport::breaks`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwitchLftBalance {
    pub switch: NodeRef,
    pub direction: Direction,
    pub min: u32,
    pub max: u32,
    /// (port, CA LIDs routed out of it) for the ports compared.
    pub ports: Vec<(u8, u32)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouteBalance {
    /// Every directed link (only with [`CheckOptions::port_details`]).
    pub ports: Vec<PortLoad>,
    /// The links carrying most routes.
    pub hottest: Vec<PortLoad>,
    pub by_layer: Vec<LayerStats>,
    pub lft_unbalanced: Vec<SwitchLftBalance>,
    /// Switches compared by the `check_lft_balance` rule.
    pub lft_switches_checked: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CdgStats {
    /// Switch-to-switch channels with at least one dependency.
    pub channels: usize,
    /// Distinct (channel -> channel) dependencies.
    pub dependencies: usize,
    /// Strongly connected components with a cycle.
    pub cyclic_components: usize,
}

/// A cycle in the channel dependency graph: with one VL, these routes can deadlock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreditLoop {
    /// Channels in the strongly connected component.
    pub channels: usize,
    /// Distinct switches those channels leave from.
    pub switches: usize,
    /// One cycle through the component, in dependency order (at most 16 channels).
    pub cycle: Vec<ChannelRef>,
    /// Length of that cycle.
    pub cycle_len: usize,
    /// Routes that create some of the cycle's dependencies.
    pub example_routes: Vec<Path>,
}

/// The result of [`check`](super::check).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RouteReport {
    /// CA ports that are linked (the sources).
    pub sources: usize,
    pub sources_down: usize,
    pub destinations: usize,
    pub ca_destinations: usize,
    pub switch_destinations: usize,
    pub pairs: u64,
    pub pairs_ok: u64,
    pub pairs_broken: u64,
    pub pairs_looping: u64,
    pub lft_not_read: Vec<NodeRef>,
    /// Every place routes break, most pairs first.
    pub breaks: Vec<BreakSummary>,
    pub unreachable_destinations: usize,
    pub unreachable: Vec<UnreachableDest>,
    /// (destination, cycle) forwarding loops found.
    pub loops_found: usize,
    pub loops: Vec<ForwardingLoop>,
    /// Index = links traversed; counts delivered pairs.
    pub hop_histogram: Vec<u64>,
    pub max_hops: usize,
    pub mean_hops: f64,
    pub balance: RouteBalance,
    pub cdg: CdgStats,
    pub credit_loops_found: usize,
    pub credit_loops: Vec<CreditLoop>,
    pub notes: Vec<String>,
}

impl RouteReport {
    /// No break, loop or credit loop.
    pub fn is_clean(&self) -> bool {
        self.pairs_broken == 0
            && self.pairs_looping == 0
            && self.loops_found == 0
            && self.credit_loops_found == 0
            && self.breaks.is_empty()
    }
}

impl BreakKind {
    /// The name JSON uses.
    pub fn as_str(self) -> &'static str {
        match self {
            BreakKind::NoRoute => "no_route",
            BreakKind::PortDown => "port_down",
            BreakKind::Misdelivered => "misdelivered",
            BreakKind::LftNotRead => "lft_not_read",
            BreakKind::SourceDown => "source_down",
        }
    }
}

impl Direction {
    /// The name JSON uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Up => "up",
            Direction::Down => "down",
            Direction::Lateral => "lateral",
            Direction::ToCa => "to_ca",
            Direction::FromCa => "from_ca",
        }
    }
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// LIDs, comma-separated.
fn lid_list(lids: &[u16]) -> String {
    lids.iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `a -> b -> c` of anything that displays.
fn chain<T: std::fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(T::to_string)
        .collect::<Vec<_>>()
        .join(" -> ")
}

impl std::fmt::Display for BreakSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let port = self.port.map(|p| format!(" port {p}")).unwrap_or_default();
        let why = match self.kind {
            BreakKind::NoRoute => "its forwarding table has no entry".to_string(),
            BreakKind::PortDown => format!("egress{port} is down or unlinked"),
            BreakKind::Misdelivered => {
                format!("egress{port} leads to a port that does not own the LID")
            }
            BreakKind::LftNotRead => "its forwarding table was not read".to_string(),
            BreakKind::SourceDown => "the source port is down".to_string(),
        };
        write!(
            f,
            "{} at {}: {why}; {} pairs, {} destinations",
            self.kind.as_str(),
            self.at,
            self.pairs,
            self.destinations
        )?;
        if !self.example_lids.is_empty() {
            write!(f, " (LIDs {})", lid_list(&self.example_lids))?;
        }
        Ok(())
    }
}

impl std::fmt::Display for UnreachableDest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "LID {} ({}): {} of {} sources do not reach it",
            self.dst_lid,
            self.dst.route_text(),
            self.sources_failed,
            self.sources
        )
    }
}

impl std::fmt::Display for ForwardingLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LID {}", self.dst_lid)?;
        if let Some(dst) = &self.dst {
            write!(f, " ({})", dst.route_text())?;
        }
        write!(f, ": {} pairs go round {}", self.pairs, chain(&self.cycle))
    }
}

impl std::fmt::Display for CreditLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} channels over {} switches; a cycle of {}: {}",
            self.channels,
            self.switches,
            self.cycle_len,
            chain(&self.cycle)
        )
    }
}

impl std::fmt::Display for SwitchLftBalance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ports: Vec<String> = self
            .ports
            .iter()
            .map(|(p, n)| format!("port {p}: {n}"))
            .collect();
        write!(
            f,
            "{} {} ports carry {} to {} CA LIDs ({})",
            self.switch,
            self.direction,
            self.min,
            self.max,
            ports.join(", ")
        )
    }
}
