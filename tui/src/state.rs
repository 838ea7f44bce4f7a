//! Everything the UI shows, as plain data: no terminal, no threads, no clock reads. The
//! event loop feeds it sweeps and actions and sets `now`; the renderer only reads it.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::time::{Duration, Instant, SystemTime};

use ibscope_topo::namemap::NameMap;
use ibscope_topo::resolve::{lid_of, resolve, NameMatch, NamedTarget};
use ibscope_topo::routing::{self, Hop};
use ibscope_topo::{End, Fabric, PortKey};

use super::derive::{self, FabricSummary, HostGrid, LinkRow, NodeRow};
use super::event_log::{self, LogEntry, LogEntryKind};
use super::query::FindState;
use super::source::{PortCounterSample, Sweep};
use super::table_sort::{Column, TableSort};

/// The views, in the order of their tabs: the n-th is selected by the digit n, Tab goes
/// to the next. What each shows and how it is drawn is its file's in `views/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::VariantArray)]
pub enum View {
    Overview,
    Nodes,
    Links,
    Counters,
    Routing,
    Events,
    Hosts,
}

impl View {
    /// Every view, in order (the enum's own list).
    pub const ALL: &'static [View] = <View as strum::VariantArray>::VARIANTS;

    pub fn index(self) -> usize {
        View::ALL.iter().position(|v| *v == self).unwrap_or(0)
    }
    pub fn next(self) -> View {
        View::ALL[(self.index() + 1) % View::ALL.len()]
    }
    pub fn prev(self) -> View {
        View::ALL[(self.index() + View::ALL.len() - 1) % View::ALL.len()]
    }
}

/// A selection in a scrolling list. The offset is kept by the renderer (it knows the
/// height), hence the `Cell`s: drawing takes `&AppState`.
#[derive(Debug, Default)]
pub struct ListCursor {
    pub selected: usize,
    offset: Cell<usize>,
    page: Cell<usize>,
}

impl ListCursor {
    pub fn up(&mut self, n: usize) {
        self.selected = self.selected.saturating_sub(n);
    }
    pub fn down(&mut self, n: usize, len: usize) {
        self.selected = (self.selected + n).min(len.saturating_sub(1));
    }
    pub fn clamp(&mut self, len: usize) {
        self.selected = self.selected.min(len.saturating_sub(1));
    }
    /// Rows a page key moves (the last drawn height, at least 1).
    pub fn page(&self) -> usize {
        self.page.get().max(1)
    }
    /// The rows to draw in `height` lines, scrolled so the selection stays visible.
    pub fn window(&self, len: usize, height: usize) -> Range<usize> {
        self.page.set(height.saturating_sub(1).max(1));
        if height == 0 || len == 0 {
            return 0..0;
        }
        let sel = self.selected.min(len - 1);
        let mut off = self.offset.get().min(len.saturating_sub(height));
        if sel < off {
            off = sel;
        } else if sel >= off + height {
            off = sel + 1 - height;
        }
        self.offset.set(off);
        off..(off + height).min(len)
    }
    /// [`ListCursor::window`] for rows of several lines each (`heights`, at least 1): the
    /// rows that fit in `height` lines, scrolled by whole rows so the selection shows.
    pub fn window_of(&self, heights: &[usize], height: usize) -> Range<usize> {
        let len = heights.len();
        if height == 0 || len == 0 {
            self.page.set(1);
            return 0..0;
        }
        let sel = self.selected.min(len - 1);
        let mut off = self.offset.get().min(len - 1).min(sel);
        // Fits from `off` to the selection, else start later.
        let fits = |from: usize, to: usize| heights[from..=to].iter().sum::<usize>() <= height;
        while off < sel && !fits(off, sel) {
            off += 1;
        }
        // From `off`, as many rows as fit (at least the first).
        let mut end = off + 1;
        let mut used = heights[off];
        while end < len && used + heights[end] <= height {
            used += heights[end];
            end += 1;
        }
        // Room left at the bottom: show earlier rows rather than empty lines.
        while off > 0 && used + heights[off - 1] <= height && end == len {
            off -= 1;
            used += heights[off];
        }
        self.offset.set(off);
        self.page.set((end - off).saturating_sub(1).max(1));
        off..end
    }
}

/// Sweep status, for the "updated 3s ago" / "sweeping…" line.
#[derive(Debug, Default)]
pub struct Status {
    pub sweeping: bool,
    pub last_update: Option<Instant>,
    pub last_error: Option<String>,
    pub sweeps: u64,
    /// Where sweeps come from ("file net.topo").
    pub source: String,
    /// Which fabric this is, when the UI watches several (`-C all`, a list).
    pub fabric: Option<FabricTag>,
}

/// One fabric among several the UI watches: its name and place, for the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FabricTag {
    pub name: String,
    /// 0-based.
    pub index: usize,
    pub count: usize,
}

/// Rates and history of one port's counters since the UI opened.
#[derive(Debug, Clone)]
pub struct PortHistory {
    pub last: PortCounterSample,
    /// Its node's name when last swept (untrusted: escape it), kept while the port is gone.
    pub name: String,
    /// Error total when first seen: a port is "jumped" once it rises above it.
    pub baseline_errors: u64,
    pub error_total: u64,
    /// Per second, over the last interval.
    pub error_rate: f64,
    pub rx_bytes_per_s: f64,
    pub tx_bytes_per_s: f64,
    /// rx + tx bytes/s per sample, oldest first.
    pub rate_history: VecDeque<u64>,
    pub error_history: VecDeque<u64>,
    pub jumped: bool,
}

pub const HISTORY_LEN: usize = 120;
pub const EVENT_LOG_LEN: usize = 2000;

impl PortHistory {
    fn new(sample: PortCounterSample, name: String) -> PortHistory {
        let errors = sample.error_total();
        PortHistory {
            last: sample,
            name,
            baseline_errors: errors,
            error_total: errors,
            error_rate: 0.0,
            rx_bytes_per_s: 0.0,
            tx_bytes_per_s: 0.0,
            rate_history: VecDeque::new(),
            error_history: VecDeque::new(),
            jumped: false,
        }
    }

    fn update(&mut self, sample: PortCounterSample) {
        let dt = sample
            .taken_at
            .duration_since(self.last.taken_at)
            .unwrap_or(Duration::ZERO)
            .as_secs_f64();
        // A counter below its last value was reset (or wrapped): count from zero again.
        let delta = |now: u64, before: u64| if now >= before { now - before } else { now };
        let errors = sample.error_total();
        let d_err = delta(errors, self.error_total);
        let d_rx = delta(
            sample.rcv_data_bytes.unwrap_or(0),
            self.last.rcv_data_bytes.unwrap_or(0),
        );
        let d_tx = delta(
            sample.xmit_data_bytes.unwrap_or(0),
            self.last.xmit_data_bytes.unwrap_or(0),
        );
        if dt > 0.0 {
            self.error_rate = d_err as f64 / dt;
            self.rx_bytes_per_s = d_rx as f64 / dt;
            self.tx_bytes_per_s = d_tx as f64 / dt;
        }
        if errors < self.error_total {
            self.baseline_errors = 0;
        }
        self.error_total = errors;
        self.jumped |= errors > self.baseline_errors;
        push_capped(
            &mut self.rate_history,
            (self.rx_bytes_per_s + self.tx_bytes_per_s) as u64,
        );
        push_capped(&mut self.error_history, d_err);
        self.last = sample;
    }
}

fn push_capped<T>(q: &mut VecDeque<T>, v: T) {
    if q.len() == HISTORY_LEN {
        q.pop_front();
    }
    q.push_back(v);
}

/// The Counters table's columns (after its ▲ marker).
pub const COUNTER_COLUMNS: [Column; 5] = [
    Column::up("Port"),
    Column::down("Errors"),
    Column::down("Err/s"),
    Column::down("Rx"),
    Column::down("Tx"),
];

/// The Counters table's default order: the fastest-rising errors first.
pub const COUNTER_SORT: TableSort = TableSort::by(2);

#[derive(Debug, Default)]
pub struct NodesView {
    pub filter: String,
    pub editing: bool,
    pub sort: TableSort,
    /// Indexes into `Derived::node_rows`, filtered and sorted.
    pub visible: Vec<usize>,
    pub list: ListCursor,
    /// GUID of the node whose detail pane is open (a GUID survives a new sweep).
    pub detail: Option<u64>,
    pub detail_ports: ListCursor,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteField {
    From,
    To,
}

/// A traced route, resolved against the sweep it was traced in.
#[derive(Debug, Clone)]
pub struct RouteResult {
    pub src: End,
    pub dst_lid: u16,
    pub hops: Vec<Hop>,
    /// Why the walk stopped early, already displayable.
    pub error: Option<String>,
}

#[derive(Debug, Default)]
pub struct RoutingView {
    pub from: String,
    pub to: String,
    pub editing: Option<RouteField>,
    /// The last trace, or why the inputs could not be resolved.
    pub result: Option<Result<RouteResult, String>>,
    /// Selected hop: its switch's LFT is shown.
    pub hops: ListCursor,
}

/// The Links view: its rows in the order shown, and the cursor on them.
#[derive(Debug)]
pub struct LinksView {
    pub list: ListCursor,
    pub sort: TableSort,
    /// Indexes into `Derived::link_rows`, sorted.
    pub order: Vec<usize>,
}

impl Default for LinksView {
    fn default() -> LinksView {
        LinksView {
            list: ListCursor::default(),
            sort: derive::LINK_SORT,
            order: Vec::new(),
        }
    }
}

/// The Hosts view: a cursor on the hosts x rails grid, and whether the selected cell's
/// detail (its HCA's link and counters) is open.
#[derive(Debug, Default)]
pub struct HostsView {
    pub list: ListCursor,
    /// Column 0 the host's name, column r + 1 rail r's cells (the worst first).
    pub sort: TableSort,
    /// Indexes into `HostGrid::rows`, sorted.
    pub order: Vec<usize>,
    /// The selected rail: a column of the grid.
    pub rail: usize,
    pub detail: bool,
}

impl HostsView {
    /// The grid sorted again, the selected row and column kept inside it.
    pub fn refresh(&mut self, grid: &super::derive::HostGrid) {
        self.order = derive::sort_hosts(grid, self.sort);
        self.list.clamp(grid.rows.len());
        self.rail = self.rail.min(grid.rails.len().saturating_sub(1));
        self.sort.column = self.sort.column.min(grid.rails.len());
    }
    /// The grid row the cursor is on.
    pub fn selected_row<'g>(&self, grid: &'g HostGrid) -> Option<&'g super::derive::HostRow> {
        self.order
            .get(self.list.selected)
            .and_then(|&i| grid.rows.get(i))
    }
}

#[derive(Debug)]
pub struct CountersView {
    pub sort: TableSort,
    /// Keys into `AppState::history`, sorted.
    pub rows: Vec<PortKey>,
    pub list: ListCursor,
    /// The selected port's every counter is open (Enter), scrolled by `detail_list`.
    pub detail: bool,
    pub detail_list: ListCursor,
}

impl Default for CountersView {
    fn default() -> CountersView {
        CountersView {
            sort: COUNTER_SORT,
            rows: Vec::new(),
            list: ListCursor::default(),
            detail: false,
            detail_list: ListCursor::default(),
        }
    }
}

/// What is computed once per sweep.
#[derive(Debug, Default)]
pub struct Derived {
    pub summary: FabricSummary,
    pub node_rows: Vec<NodeRow>,
    pub link_rows: Vec<LinkRow>,
    pub host_grid: HostGrid,
}

/// A sweep with everything derived from it, built off the UI thread.
#[derive(Debug)]
pub struct Prepared {
    pub sweep: Sweep,
    pub derived: Derived,
    /// What changed since the previous sweep (or a note on the first sweep).
    pub events: Vec<LogEntry>,
}

/// Derive rows, the layered summary and the events of `sweep` (relative to `previous`).
/// O(nodes + links) with sorting; runs on the sweep thread. Degraded links are those of
/// `sweep.health`, judged once when the sweep was made.
pub fn prepare(previous: Option<&Sweep>, sweep: Sweep, names: Option<&NameMap>) -> Prepared {
    let events = match previous {
        Some(old) => event_log::diff(old, &sweep, names),
        None => vec![LogEntry {
            at: sweep.taken_at,
            kind: LogEntryKind::Info,
            text: format!(
                "first snapshot: {} nodes, {} links",
                sweep.fabric.node_count(),
                sweep.fabric.link_count()
            ),
        }],
    };
    let derived = Derived {
        summary: derive::summarize(&sweep.fabric, &sweep.health, names),
        node_rows: derive::node_rows(&sweep.fabric, names),
        link_rows: derive::link_rows(&sweep.fabric, &sweep.health, names),
        host_grid: derive::host_grid(&sweep.fabric, &sweep.health, names),
    };
    Prepared {
        sweep,
        derived,
        events,
    }
}

pub struct AppState {
    pub view: View,
    pub help: bool,
    /// The help's first line shown (its arrow keys scroll it).
    pub help_scroll: usize,
    pub quit: bool,
    /// Set by an action asking for an immediate sweep; the event loop takes it.
    pub sweep_requested: bool,
    /// Set by an action asking for another fabric (+1 next, -1 previous); the event loop
    /// takes it.
    pub fabric_step: isize,
    pub now: Instant,
    pub interval: Duration,
    pub status: Status,
    pub sweep: Option<Sweep>,
    pub names: Option<NameMap>,
    pub derived: Derived,
    pub history: HashMap<PortKey, PortHistory>,
    pub events: VecDeque<LogEntry>,
    pub nodes: NodesView,
    pub links: LinksView,
    pub counters: CountersView,
    pub routing: RoutingView,
    pub event_list: ListCursor,
    /// The Events table's order (newest first unless sorted otherwise).
    pub events_sort: TableSort,
    pub overview_findings: ListCursor,
    /// The selected finding is open whole (Enter in the Overview).
    pub finding_detail: bool,
    pub hosts: HostsView,
    /// A line for the footer until the next key: what a key could not do ("that port has
    /// no link").
    pub notice: Option<String>,
    /// The find prompt (`/` in a view that finds).
    pub find: FindState,
}

impl AppState {
    pub fn new(names: Option<NameMap>, interval: Duration, now: Instant) -> AppState {
        AppState {
            view: View::Overview,
            help: false,
            help_scroll: 0,
            quit: false,
            sweep_requested: false,
            fabric_step: 0,
            now,
            interval,
            status: Status::default(),
            sweep: None,
            names,
            derived: Derived::default(),
            history: HashMap::new(),
            events: VecDeque::new(),
            nodes: NodesView::default(),
            links: LinksView::default(),
            counters: CountersView::default(),
            routing: RoutingView::default(),
            event_list: ListCursor::default(),
            events_sort: TableSort::default(),
            overview_findings: ListCursor::default(),
            finding_detail: false,
            hosts: HostsView::default(),
            notice: None,
            find: FindState::default(),
        }
    }

    pub fn fabric(&self) -> Option<&Fabric> {
        self.sweep.as_ref().map(|s| &*s.fabric)
    }

    /// The sweep thread started a sweep.
    pub fn sweep_started(&mut self) {
        self.status.sweeping = true;
    }

    /// A sweep failed: keep showing the last sweep, log the failure.
    pub fn sweep_failed(&mut self, error: String, at: SystemTime) {
        self.status.sweeping = false;
        let text = ibscope_topo::escape::for_terminal(&error);
        self.log(LogEntry {
            at,
            kind: LogEntryKind::SweepFailed,
            text: text.clone(),
        });
        self.status.last_error = Some(text);
    }

    /// Add an event to the log (newest first; the oldest go beyond [`EVENT_LOG_LEN`]).
    pub fn log(&mut self, e: LogEntry) {
        if self.events.len() == EVENT_LOG_LEN {
            self.events.pop_back();
        }
        // Newest first.
        self.events.push_front(e);
    }

    /// A new sweep arrived (at `now`): derive rows and events here. The event loop
    /// uses [`AppState::apply_prepared`] with the work done on the sweep thread instead.
    pub fn apply_sweep(&mut self, sweep: Sweep, now: Instant) {
        let prepared = prepare(self.sweep.as_ref(), sweep, self.names.as_ref());
        self.apply_prepared(prepared, now);
    }

    /// Take a prepared sweep: log its events, update counter histories, keep
    /// selections in range. Cost: O(counters + nodes log nodes), no per-link work.
    pub fn apply_prepared(&mut self, prepared: Prepared, now: Instant) {
        let Prepared {
            sweep,
            derived,
            events: new_events,
        } = prepared;
        for e in new_events {
            self.log(e);
        }
        let names = self.names.as_ref();
        for c in &sweep.counters {
            let name = sweep.fabric.node_by_guid(c.at.guid).map(|id| {
                ibscope_topo::namemap::display_name(sweep.fabric.node(id), names).to_string()
            });
            match self.history.get_mut(&c.at) {
                Some(h) => {
                    h.update(c.clone());
                    if let Some(name) = name {
                        h.name = name;
                    }
                }
                None => {
                    let name = name.unwrap_or_else(|| format!("{:#018x}", c.at.guid));
                    self.history.insert(c.at, PortHistory::new(c.clone(), name));
                }
            }
        }
        self.derived = derived;
        self.sweep = Some(sweep);
        self.status.sweeping = false;
        self.status.last_error = None;
        self.status.last_update = Some(now);
        self.status.sweeps += 1;
        self.refresh_nodes();
        self.refresh_counters();
        self.refresh_links();
        self.hosts.refresh(&self.derived.host_grid);
        self.event_list.clamp(self.events.len());
        if self.routing.result.is_some() {
            self.run_trace();
        }
    }

    /// Re-filter and re-sort the node list (after a filter/sort change or a new sweep).
    pub fn refresh_nodes(&mut self) {
        self.nodes.visible =
            derive::filter_sort_nodes(&self.derived.node_rows, &self.nodes.filter, self.nodes.sort);
        self.nodes.list.clamp(self.nodes.visible.len());
    }

    /// `s` (the table's next column) or `S` (the other way round) in the view shown; the
    /// row the cursor is on stays under it.
    pub fn change_sort(&mut self, reverse: bool) {
        let step = |sort: &mut TableSort, columns: usize| {
            if reverse {
                sort.reverse();
            } else {
                sort.next(columns);
            }
        };
        match self.view {
            View::Nodes => {
                let kept = self.selected_node_row().map(|r| r.id);
                step(&mut self.nodes.sort, derive::NODE_COLUMNS.len());
                self.refresh_nodes();
                let rows = &self.derived.node_rows;
                if let Some(i) =
                    kept.and_then(|id| self.nodes.visible.iter().position(|&v| rows[v].id == id))
                {
                    self.nodes.list.selected = i;
                }
            }
            View::Links => {
                let kept = self.links.order.get(self.links.list.selected).copied();
                step(&mut self.links.sort, derive::LINK_COLUMNS.len());
                self.refresh_links();
                if let Some(i) = kept.and_then(|k| self.links.order.iter().position(|&o| o == k)) {
                    self.links.list.selected = i;
                }
            }
            View::Counters => {
                let kept = self.counters.rows.get(self.counters.list.selected).copied();
                step(&mut self.counters.sort, COUNTER_COLUMNS.len());
                self.refresh_counters();
                if let Some(i) = kept.and_then(|k| self.counters.rows.iter().position(|r| *r == k))
                {
                    self.counters.list.selected = i;
                }
            }
            View::Events => step(&mut self.events_sort, event_log::EVENT_COLUMNS.len()),
            View::Hosts => {
                let grid = &self.derived.host_grid;
                let kept = self.hosts.order.get(self.hosts.list.selected).copied();
                step(&mut self.hosts.sort, grid.rails.len() + 1);
                self.hosts.refresh(grid);
                if let Some(i) = kept.and_then(|k| self.hosts.order.iter().position(|&o| o == k)) {
                    self.hosts.list.selected = i;
                }
            }
            View::Overview | View::Routing => {}
        }
    }

    /// Sort the link rows again (after a sort change or a new sweep).
    pub fn refresh_links(&mut self) {
        self.links.order = derive::sort_links(&self.derived.link_rows, self.links.sort);
        self.links.list.clamp(self.links.order.len());
    }

    /// The link row the Links view's cursor is on.
    pub fn selected_link(&self) -> Option<&LinkRow> {
        let i = *self.links.order.get(self.links.list.selected)?;
        self.derived.link_rows.get(i)
    }

    pub fn refresh_counters(&mut self) {
        let mut rows: Vec<PortKey> = self.history.keys().copied().collect();
        let h = &self.history;
        let sort = self.counters.sort;
        let natural = sort.natural(&COUNTER_COLUMNS);
        let by_name = |a: &PortKey, b: &PortKey| h[a].name.cmp(&h[b].name).then(a.cmp(b));
        rows.sort_by(|a, b| {
            let (x, y) = (&h[a], &h[b]);
            let by_column = match sort.column {
                1 => x.error_total.cmp(&y.error_total),
                // Ties of rate by the errors counted.
                2 => x
                    .error_rate
                    .total_cmp(&y.error_rate)
                    .then(x.error_total.cmp(&y.error_total)),
                3 => x.rx_bytes_per_s.total_cmp(&y.rx_bytes_per_s),
                4 => x.tx_bytes_per_s.total_cmp(&y.tx_bytes_per_s),
                _ => by_name(a, b),
            };
            sort.apply(natural, by_column).then_with(|| by_name(a, b))
        });
        self.counters.rows = rows;
        self.counters.list.clamp(self.counters.rows.len());
    }

    /// The finding the Overview's cursor is on.
    pub fn selected_finding(&self) -> Option<&super::source::Finding> {
        let findings = &self.sweep.as_ref()?.findings;
        findings.get(self.overview_findings.selected)
    }

    /// Links: the row of the selected finding's link (its port's, else its far end's).
    pub fn jump_to_link(&mut self) {
        let Some((fabric, keys)) = self.finding_ports() else {
            return;
        };
        let key = |e: End| fabric.node(e.node).port_key(e.port);
        let row = keys.iter().find_map(|k| {
            self.derived
                .link_rows
                .iter()
                .position(|r| key(r.a) == *k || key(r.b) == *k)
        });
        match row.and_then(|i| self.links.order.iter().position(|&o| o == i)) {
            Some(i) => {
                self.links.list.selected = i;
                self.view = View::Links;
            }
            None => self.notice = Some("the finding's ports have no link in this sweep".into()),
        }
    }

    /// Counters: the row of the selected finding's port (else its far end's).
    pub fn jump_to_counters(&mut self) {
        let Some((_, keys)) = self.finding_ports() else {
            return;
        };
        let row = keys
            .iter()
            .find_map(|k| self.counters.rows.iter().position(|r| r == k));
        match row {
            Some(i) => {
                self.counters.list.selected = i;
                self.counters.detail = false;
                self.view = View::Counters;
            }
            None => {
                self.notice = Some("no counters were read of the finding's ports".into());
            }
        }
    }

    /// The selected finding's ports (its own, then its far end), with the fabric; a notice
    /// when it names none.
    fn finding_ports(&mut self) -> Option<(std::sync::Arc<Fabric>, Vec<PortKey>)> {
        let fabric = self.sweep.as_ref()?.fabric.clone();
        let keys: Vec<PortKey> = match self.selected_finding() {
            Some(f) => f.at.iter().chain(&f.remote).map(|p| p.key()).collect(),
            None => return None,
        };
        if keys.is_empty() {
            self.notice = Some("the finding names no port".into());
            return None;
        }
        Some((fabric, keys))
    }

    /// The node the nodes-view cursor is on.
    pub fn selected_node_row(&self) -> Option<&NodeRow> {
        self.nodes
            .visible
            .get(self.nodes.list.selected)
            .and_then(|&i| self.derived.node_rows.get(i))
    }

    /// Resolve the routing inputs and trace the route in the current sweep.
    pub fn run_trace(&mut self) {
        let Some(fabric) = self.sweep.as_ref().map(|s| s.fabric.clone()) else {
            self.routing.result = Some(Err("no snapshot yet".into()));
            return;
        };
        let names = self.names.as_ref();
        let result = (|| {
            let input = |text: &str| resolve(&fabric, names, text, NameMatch::ExactOrPart);
            let src = input(&self.routing.from).map_err(|e| format!("from: {e}"))?;
            // Where a trace starts: a port, a switch's port 0, a CA's first linked port.
            let src_end = src.end(&fabric);
            let dst = input(&self.routing.to).map_err(|e| format!("to: {e}"))?;
            let dst_lid = destination_lid(&fabric, dst)?;
            let partial = routing::trace_partial(&fabric, src_end, dst_lid);
            Ok(RouteResult {
                src: src_end,
                dst_lid,
                hops: partial.hops,
                error: partial.error.map(|e| e.to_string()),
            })
        })();
        if let Ok(r) = &result {
            self.routing.hops.clamp(r.hops.len());
        }
        self.routing.result = Some(result);
    }
}

fn destination_lid(fabric: &Fabric, t: NamedTarget) -> Result<u16, String> {
    match t {
        NamedTarget::Lid { lid, .. } => Ok(lid),
        NamedTarget::Port(e) => lid_of(fabric, e).ok_or_else(|| "that port has no LID".into()),
        NamedTarget::Node(id) => fabric
            .node(id)
            .lid()
            .ok_or_else(|| "that node has no LID".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn rows_of_several_lines_scroll_by_whole_rows() {
        let mut c = ListCursor::default();
        let heights = [2, 3, 1, 2, 2];
        assert_eq!(c.window_of(&heights, 6), 0..3);
        c.down(3, 5);
        assert_eq!(c.window_of(&heights, 6), 1..4, "row 3 shows, row 0 goes");
        c.down(1, 5);
        assert_eq!(c.window_of(&heights, 6), 2..5);
        c.up(4);
        assert_eq!(c.window_of(&heights, 6), 0..3);
        // A row taller than the screen still shows (cut), alone.
        c.selected = 1;
        assert_eq!(c.window_of(&heights, 2), 1..2);
        assert_eq!(c.window_of(&[], 6), 0..0);
    }

    #[test]
    fn cursor_window_keeps_selection_visible() {
        let mut c = ListCursor::default();
        assert_eq!(c.window(100, 10), 0..10);
        c.down(15, 100);
        assert_eq!(c.window(100, 10), 6..16);
        c.up(3);
        assert_eq!(
            c.window(100, 10),
            6..16,
            "no scroll while inside the window"
        );
        c.up(10);
        assert_eq!(c.window(100, 10), 2..12);
        c.down(1000, 100);
        assert_eq!(c.selected, 99);
        assert_eq!(c.window(100, 10), 90..100);
        // The list shrank under the cursor.
        c.clamp(5);
        assert_eq!(c.window(5, 10), 0..5);
        assert_eq!(c.window(0, 10), 0..0);
        assert_eq!(c.page(), 9);
    }

    fn sample(at: u64, errors: u64, bytes: u64) -> PortCounterSample {
        let mut counters = BTreeMap::new();
        counters.insert("SymbolErrorCounter".to_string(), errors);
        counters.insert("PortXmitWait".to_string(), 1_000_000);
        PortCounterSample {
            at: PortKey { guid: 1, port: 1 },
            counters,
            saturated: Default::default(),
            xmit_data_bytes: Some(bytes),
            rcv_data_bytes: Some(bytes),
            taken_at: std::time::UNIX_EPOCH + Duration::from_secs(at),
        }
    }

    #[test]
    fn history_rates_jumps_and_resets() {
        let mut h = PortHistory::new(sample(0, 5, 0), "sw".into());
        assert!(!h.jumped, "errors before the UI opened do not count");
        h.update(sample(10, 5, 1000));
        assert_eq!(h.rx_bytes_per_s, 100.0);
        assert_eq!(h.error_rate, 0.0);
        assert!(!h.jumped, "PortXmitWait is not an error counter");
        h.update(sample(20, 25, 2000));
        assert_eq!(h.error_rate, 2.0);
        assert!(h.jumped);
        // Counters cleared by someone: the new value is the delta, not a negative one.
        h.update(sample(30, 3, 500));
        assert_eq!(h.error_rate, 0.3);
        assert_eq!(h.rx_bytes_per_s, 50.0);
        assert_eq!(h.rate_history.len(), 3);
        assert_eq!(h.rate_history.back(), Some(&100));
    }

    #[test]
    fn destination_lids() {
        let f = ibscope_topo::ibnd::parse(
            "Switch 4 \"S\" # \"sw\" base port 0 lid 1 lmc 0\n[1] \"H1\"[1]\n\n\
             Hca 1 \"H1\" # \"node-a\"\n[1] \"S\"[1] # lid 2 lmc 0 \"sw\" lid 1 4xHDR\n",
        )
        .unwrap();
        let sw = f.nodes_by_description("sw")[0];
        let a = f.nodes_by_description("node-a")[0];
        assert_eq!(destination_lid(&f, NamedTarget::Node(sw)), Ok(1));
        assert_eq!(
            destination_lid(&f, NamedTarget::Port(End { node: a, port: 1 })),
            Ok(2)
        );
    }
}
