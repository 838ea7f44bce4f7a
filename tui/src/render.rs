//! Drawing: `draw(frame, &state)`, one function per view. Only the rows that fit are
//! formatted; everything sorted or counted was done when the snapshot arrived.
//! Every fabric string is escaped (`derive::node_name`, `escape::for_terminal`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ibscope_mad::attr::{PhysState, PortState, Rate};
use ibscope_topo::escape::for_terminal;
use ibscope_topo::findings::Severity;
use ibscope_topo::{End, Fabric};
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Row, Sparkline, Table, Wrap};
use ratatui::Frame;

use super::derive::{
    hop_name, link_facts, node_name, port_name, CellState, FabricSummary, Layer, LinkHealth,
    LinkVerdict, SwitchChip,
};
use super::event_log::EventKind;
use super::keymap;
use super::source::{finding_subject, ERROR_COUNTERS};
use super::state::{AppState, PortHistory, RouteField, View};

const RED: Style = Style::new().fg(Color::Red);
const BAD: Style = Style::new().fg(Color::Red).add_modifier(Modifier::BOLD);
const DIM: Style = Style::new().fg(Color::DarkGray);
const HEAD: Style = Style::new().add_modifier(Modifier::BOLD);
const SELECTED: Style = Style::new().add_modifier(Modifier::REVERSED);
const OK: Style = Style::new().fg(Color::Green);
const WARN: Style = Style::new().fg(Color::Yellow);

/// Draw the whole screen.
pub fn draw(frame: &mut Frame, state: &AppState) {
    let area = frame.area();
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(area);
    draw_header(frame, header, state);
    match state.view {
        View::Overview => draw_overview(frame, body, state),
        View::Nodes => draw_nodes(frame, body, state),
        View::Links => draw_links(frame, body, state),
        View::Counters => draw_counters(frame, body, state),
        View::Routing => draw_routing(frame, body, state),
        View::Events => draw_events(frame, body, state),
        View::Hosts => draw_hosts(frame, body, state),
    }
    draw_footer(frame, footer, state);
    if state.help {
        draw_help(frame, body, state);
    }
}

/// "3s", "4m05s", "2h03m".
pub fn format_age(d: Duration) -> String {
    let s = d.as_secs();
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    }
}

/// "HH:MM:SS" in UTC (no time zone database needed, and tests are reproducible).
pub fn format_time(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let day = secs % 86_400;
    format!("{:02}:{:02}:{:02}", day / 3600, (day % 3600) / 60, day % 60)
}

/// "1.2 GB/s" style (decimal units, as link rates are quoted).
pub fn format_rate(bytes_per_s: f64) -> String {
    const UNITS: [&str; 5] = ["B/s", "kB/s", "MB/s", "GB/s", "TB/s"];
    let mut v = bytes_per_s.max(0.0);
    let mut u = 0;
    while v >= 1000.0 && u < UNITS.len() - 1 {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 || v >= 100.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// The status text and its style: "sweeping…", "updated 3s ago", failures.
pub fn status_text(state: &AppState) -> (String, Style) {
    let age = state
        .status
        .last_update
        .map(|t| format_age(state.now.saturating_duration_since(t)));
    let stale = state
        .status
        .last_update
        .map(|t| {
            state.now.saturating_duration_since(t) > state.interval * 3 + Duration::from_secs(5)
        })
        .unwrap_or(false);
    match (&state.status.last_error, state.status.sweeping, age) {
        (_, true, None) => ("sweeping… (first sweep)".into(), WARN),
        (_, true, Some(a)) => (format!("sweeping… updated {a} ago"), WARN),
        (Some(_), false, Some(a)) => (format!("sweep failed, data {a} old"), BAD),
        (Some(_), false, None) => ("sweep failed".into(), BAD),
        (None, false, Some(a)) => (format!("updated {a} ago"), if stale { WARN } else { OK }),
        (None, false, None) => ("waiting for first sweep".into(), WARN),
    }
}

/// "fabric storage 2/3  " when the UI watches several fabrics, else nothing.
pub fn fabric_text(state: &AppState) -> String {
    state.status.fabric.as_ref().map_or_else(String::new, |f| {
        format!(
            "fabric {} {}/{}  ",
            for_terminal(&f.name),
            f.index + 1,
            f.count
        )
    })
}

fn draw_header(frame: &mut Frame, area: Rect, state: &AppState) {
    let (status, status_style) = status_text(state);
    let fabric = fabric_text(state);
    let status_w = ((fabric.chars().count() + status.chars().count()) as u16 + 1).min(area.width);
    let full: u16 = View::ALL.iter().map(|v| v.title().len() as u16 + 4).sum();
    let compact = full + status_w > area.width;
    let mut spans = Vec::new();
    for (i, v) in View::ALL.iter().enumerate() {
        let text = if compact {
            format!("{}{}", i + 1, v.title())
        } else {
            format!(" {} {} ", i + 1, v.title())
        };
        let style = if *v == state.view {
            SELECTED.add_modifier(Modifier::BOLD)
        } else {
            Style::new()
        };
        spans.push(Span::styled(text, style));
        if compact {
            spans.push(Span::raw(" "));
        }
    }
    let [tabs, right] =
        Layout::horizontal([Constraint::Min(0), Constraint::Length(status_w)]).areas(area);
    frame.render_widget(Paragraph::new(Line::from(spans)), tabs);
    let right_text = Line::from(vec![
        Span::styled(fabric, HEAD),
        Span::styled(status, status_style),
    ]);
    frame.render_widget(
        Paragraph::new(right_text).alignment(Alignment::Right),
        right,
    );
}

fn draw_footer(frame: &mut Frame, area: Rect, state: &AppState) {
    frame.render_widget(
        Paragraph::new(Span::styled(
            keymap::footer(state, usize::from(area.width)),
            DIM.add_modifier(Modifier::REVERSED),
        )),
        area,
    );
}

/// What a view shows, for its help screen (its keys come from the key map).
fn view_about(view: View) -> &'static [&'static str] {
    match view {
        View::Overview => &[
            "Overview: counts, fabric picture by layer",
            "(layer = hops from the nearest CA), findings.",
            "Red: degraded or down links.",
        ],
        View::Nodes => &[],
        View::Links => &[
            "Every link, problems first.",
            "Expect: the rate it is held to (its class's norm).",
            "Red: degraded (as ibscope check) or not Active;",
            "yellow LOW?: below the norm, capability unknown",
            "offline. The selected link's reasons show below.",
        ],
        View::Counters => &[
            "▲ bold red    error counters rose since the UI opened",
            "Sparkline: rx+tx data rate, one bar per sweep.",
        ],
        View::Routing => &[
            "Inputs: name, LID, 0xGUID, optional [port]",
            "↑↓ picks a hop: its switch's LFT shows",
        ],
        View::Events => &[
            "Changes between sweeps, newest first:",
            "links up/down, degraded, error counter jumps,",
            "port states, SM changes. Times are UTC.",
        ],
        View::Hosts => &[
            "Servers (CAs by NodeDescription hostname) x rails",
            "(device index: mlx5_3 is rail 3); each cell its rate.",
            "Red: down, missing, degraded or slower than the",
            "host's other rails. Yellow, *: on another rail's leaf.",
        ],
    }
}

fn help_lines(view: View) -> Vec<String> {
    let mut lines = keymap::help_lines(view);
    let about = view_about(view);
    if !about.is_empty() && lines.last().is_some_and(|l| !l.is_empty()) {
        lines.push(String::new());
    }
    lines.extend(about.iter().map(|l| l.to_string()));
    lines
}

fn draw_help(frame: &mut Frame, body: Rect, state: &AppState) {
    let lines = help_lines(state.view);
    let w = 60.min(body.width);
    let h = (lines.len() as u16 + 2).min(body.height);
    let area = Rect {
        x: body.x + (body.width - w) / 2,
        y: body.y + (body.height - h) / 2,
        width: w,
        height: h,
    };
    frame.render_widget(Clear, area);
    let text: Vec<Line> = lines.into_iter().map(Line::raw).collect();
    frame.render_widget(
        Paragraph::new(text).block(
            Block::default()
                .borders(Borders::ALL)
                .title(format!(" Help: {} ", state.view.title())),
        ),
        area,
    );
}

fn no_data(frame: &mut Frame, area: Rect, state: &AppState) {
    let (text, style) = status_text(state);
    let mut lines = vec![Line::styled(text, style)];
    if let Some(e) = &state.status.last_error {
        lines.push(Line::styled(e.clone(), RED));
    }
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), area);
}

// ----- Overview -----

fn chip_text(chip: &SwitchChip, top: bool) -> String {
    let name: String = if chip.short.chars().count() > 14 {
        let mut n: String = chip.short.chars().take(13).collect();
        n.push('…');
        n
    } else {
        chip.short.clone()
    };
    if top || chip.up == 0 {
        format!("[{name} ↓{}]", chip.down)
    } else {
        format!("[{name} ↑{} ↓{}]", chip.up, chip.down)
    }
}

/// Lines of the layered fabric picture for `width` columns, top layer first. A layer whose
/// switches do not fit in `max_rows` rows is drawn as one summary line.
pub fn picture_lines(summary: &FabricSummary, width: u16, max_rows: usize) -> Vec<Line<'static>> {
    let width = usize::from(width);
    let mut lines: Vec<Line> = Vec::new();
    let top_layer = summary.layers.last().map(|l| l.layer).unwrap_or(0);
    for layer in summary.layers.iter().rev() {
        let (layer_text, aggregated) =
            layer_lines(layer, layer.layer == top_layer, width, max_rows);
        lines.extend(layer_text);
        if aggregated {
            // The summary line already counts the links down.
            continue;
        }
        let style = if layer.problems_down > 0 { RED } else { DIM };
        let mut text = format!("   │ {} links", layer.links_down);
        if layer.problems_down > 0 {
            text.push_str(&format!(", {} degraded/down", layer.problems_down));
        }
        lines.push(Line::styled(text, style));
    }
    let hosts = summary.cas + summary.routers;
    let mut ca = format!(" CA  {hosts} hosts");
    if let Some((first, last)) = &summary.ca_names_first_last {
        if hosts > 1 {
            ca.push_str(&format!(" ({first} … {last})"));
        } else {
            ca.push_str(&format!(" ({first})"));
        }
    }
    lines.push(Line::raw(ca));
    if !summary.unlayered.is_empty() {
        lines.push(Line::styled(
            format!(" {} switches no CA reaches", summary.unlayered.len()),
            WARN,
        ));
    }
    lines
}

/// The lines of one layer, and whether it was summarised rather than drawn.
fn layer_lines(
    layer: &Layer,
    top: bool,
    width: usize,
    max_rows: usize,
) -> (Vec<Line<'static>>, bool) {
    let label = format!(" L{:<2} ", layer.layer);
    let avail = width.saturating_sub(label.len());
    // Cheap bound first: chips are at least 6 columns wide.
    let fits_bound = layer.switches.len() * 6 <= avail * max_rows;
    let mut rows: Vec<Vec<Span<'static>>> = vec![Vec::new()];
    let mut used = 0;
    let mut fits = fits_bound;
    if fits_bound {
        for chip in &layer.switches {
            let text = chip_text(chip, top);
            let w = text.chars().count() + 1;
            if used + w > avail {
                if rows.len() == max_rows {
                    fits = false;
                    break;
                }
                rows.push(Vec::new());
                used = 0;
            }
            used += w;
            let style = if chip.problems > 0 {
                BAD
            } else {
                Style::new().fg(Color::Cyan)
            };
            if let Some(row) = rows.last_mut() {
                row.push(Span::styled(text, style));
                row.push(Span::raw(" "));
            }
        }
    }
    if !fits || layer.switches.is_empty() {
        let problems = layer.problems_down + layer.problems_lateral;
        let mut text = format!(
            "{label}layer {}: {} switches, {} links down",
            layer.layer,
            layer.switches.len(),
            layer.links_down,
        );
        if layer.links_lateral > 0 {
            text.push_str(&format!(", {} within", layer.links_lateral));
        }
        text.push_str(&format!(", {problems} degraded/down"));
        let style = if problems > 0 { RED } else { Style::new() };
        return (vec![Line::styled(text, style)], true);
    }
    let mut out = Vec::new();
    for (i, row) in rows.into_iter().enumerate() {
        let lead = if i == 0 {
            label.clone()
        } else {
            " ".repeat(label.len())
        };
        let mut spans = vec![Span::styled(lead, HEAD)];
        spans.extend(row);
        out.push(Line::from(spans));
    }
    if let Some((pre, suf)) = &layer.common {
        out.push(Line::styled(format!("     names: \"{pre}…{suf}\""), DIM));
    }
    if layer.links_lateral > 0 {
        out.push(Line::styled(
            format!("     ↔ {} links within layer", layer.links_lateral),
            if layer.problems_lateral > 0 { RED } else { DIM },
        ));
    }
    (out, false)
}

fn draw_overview(frame: &mut Frame, area: Rect, state: &AppState) {
    let Some(snap) = &state.snapshot else {
        return no_data(frame, area, state);
    };
    let s = &state.derived.summary;
    let sm = snap
        .sm
        .as_deref()
        .map(for_terminal)
        .unwrap_or_else(|| "unknown".into());
    let problems = s.degraded + s.down;
    let counts = vec![
        Line::from(vec![
            Span::styled(format!("{} switches", s.switches), HEAD),
            Span::raw(format!(", {} CAs", s.cas)),
            Span::raw(if s.routers > 0 {
                format!(", {} routers", s.routers)
            } else {
                String::new()
            }),
            Span::raw(if s.aggregation_nodes > 0 {
                format!(", {} aggregation nodes", s.aggregation_nodes)
            } else {
                String::new()
            }),
            Span::raw(format!(", {} links  ", s.links)),
            Span::styled(
                format!("{} degraded, {} down", s.degraded, s.down),
                if problems > 0 { BAD } else { OK },
            ),
            Span::styled(
                if s.below_norm > 0 {
                    format!(", {} below norm (capability unknown)", s.below_norm)
                } else {
                    String::new()
                },
                WARN,
            ),
        ]),
        Line::from(vec![
            Span::raw(format!("SM: {sm}  ")),
            Span::styled(
                format!(
                    "{}, swept at {} UTC in {} ms",
                    for_terminal(&state.status.source),
                    format_time(snap.taken_at),
                    snap.duration.as_millis()
                ),
                DIM,
            ),
        ]),
    ];
    let findings_min = 4u16;
    let inner_w = area.width.saturating_sub(2);
    let max_pic = area.height.saturating_sub(2 + findings_min + 2);
    // Rows of chips a layer may take: what the picture's height leaves after one label
    // and one connector line per layer and the CA line.
    let layers = s.layers.len().max(1);
    let spare = usize::from(max_pic).saturating_sub(2 * layers + 2);
    let max_rows = (spare / layers).clamp(1, 6);
    let pic = picture_lines(s, inner_w, max_rows);
    let pic_h = (pic.len() as u16).min(max_pic);
    let [counts_area, pic_area, findings_area] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(pic_h + 2),
        Constraint::Min(findings_min),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(counts), counts_area);
    frame.render_widget(
        Paragraph::new(pic).block(Block::default().borders(Borders::ALL).title(" Fabric ")),
        pic_area,
    );
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" Findings ({}) ", snap.findings.len()));
    let inner = block.inner(findings_area);
    frame.render_widget(block, findings_area);
    if snap.findings.is_empty() {
        frame.render_widget(Paragraph::new(Span::styled("no findings", OK)), inner);
        return;
    }
    let window = state
        .overview_findings
        .window(snap.findings.len(), usize::from(inner.height));
    let lines: Vec<Line> = window
        .clone()
        .map(|i| {
            let f = &snap.findings[i];
            let style = match f.severity {
                Severity::Error => BAD,
                Severity::Warning => RED,
                Severity::Info => Style::new(),
            };
            let subject = finding_subject(f);
            let mut line = Line::from(vec![
                Span::styled(format!("{:<5} ", f.severity.short()), style),
                Span::raw(if subject.is_empty() {
                    String::new()
                } else {
                    format!("{}: ", for_terminal(&subject))
                }),
                Span::styled(for_terminal(&f.message), style),
            ]);
            if i == state.overview_findings.selected {
                line = line.patch_style(Modifier::REVERSED);
            }
            line
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

// ----- Nodes -----

fn draw_nodes(frame: &mut Frame, area: Rect, state: &AppState) {
    let Some(snap) = &state.snapshot else {
        return no_data(frame, area, state);
    };
    let detail = state.nodes.detail.and_then(|g| snap.fabric.node_by_guid(g));
    let (list_area, detail_area) = match detail {
        None => (Some(area), None),
        Some(_) if area.width >= 140 => {
            let [l, r] =
                Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)])
                    .areas(area);
            (Some(l), Some(r))
        }
        Some(_) => (None, Some(area)),
    };
    if let Some(area) = list_area {
        draw_node_list(frame, area, state);
    }
    if let (Some(area), Some(id)) = (detail_area, detail) {
        draw_node_detail(frame, area, state, &snap.fabric, &snap.health, id);
    }
}

fn draw_node_list(frame: &mut Frame, area: Rect, state: &AppState) {
    let v = &state.nodes;
    let [filter_area, table_area] =
        Layout::vertical([Constraint::Length(1), Constraint::Min(1)]).areas(area);
    let cursor = if v.editing { "_" } else { "" };
    let filter = Line::from(vec![
        Span::styled("Filter: ", HEAD),
        Span::styled(
            format!("{}{cursor}", for_terminal(&v.filter)),
            if v.editing { SELECTED } else { Style::new() },
        ),
        Span::styled(
            format!(
                "  sort: {}  ({} of {})",
                v.sort.as_str(),
                v.visible.len(),
                state.derived.node_rows.len()
            ),
            DIM,
        ),
    ]);
    frame.render_widget(Paragraph::new(filter), filter_area);
    let height = usize::from(table_area.height.saturating_sub(1));
    let window = v.list.window(v.visible.len(), height);
    let rows: Vec<Row> = window
        .map(|i| {
            let r = &state.derived.node_rows[v.visible[i]];
            let row = Row::new(vec![
                r.name.clone(),
                r.kind.short().to_string(),
                format!("{:#018x}", r.guid),
                r.lid.map(|l| l.to_string()).unwrap_or_else(|| "-".into()),
                format!("{}/{}", r.linked, r.ports),
            ]);
            if i == v.list.selected {
                row.style(SELECTED)
            } else {
                row
            }
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Min(12),
            Constraint::Length(6),
            Constraint::Length(18),
            Constraint::Length(5),
            Constraint::Length(7),
        ],
    )
    .header(Row::new(vec!["Name", "Kind", "GUID", "LID", "Linked"]).style(HEAD));
    frame.render_widget(table, table_area);
}

fn draw_node_detail(
    frame: &mut Frame,
    area: Rect,
    state: &AppState,
    fabric: &Fabric,
    health: &LinkHealth,
    id: ibscope_topo::NodeId,
) {
    let names = state.names.as_ref();
    let node = fabric.node(id);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(format!(" {} ", node_name(node, names)));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let facts = node_facts(fabric, health, id);
    let facts_h = (facts.len() as u16).min(inner.height / 2);
    let [facts_area, ports_area] =
        Layout::vertical([Constraint::Length(facts_h), Constraint::Min(1)]).areas(inner);
    frame.render_widget(Paragraph::new(facts), facts_area);
    let height = usize::from(ports_area.height.saturating_sub(1));
    let cursor = &state.nodes.detail_ports;
    let rows: Vec<Row> = cursor
        .window(node.ports.len(), height)
        .map(|i| {
            let row = port_row(
                fabric,
                health,
                End {
                    node: id,
                    port: node.ports[i].number,
                },
                names,
            );
            if i == cursor.selected {
                row.selected()
            } else {
                row.row
            }
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Length(4),
            Constraint::Length(6),
            Constraint::Length(8),
            Constraint::Length(6),
            Constraint::Length(6),
            Constraint::Length(6),
            Constraint::Length(5),
            Constraint::Min(8),
        ],
    )
    .header(
        Row::new(vec![
            "Port", "State", "Phys", "Active", "Supp", "Enab", "LID", "Peer",
        ])
        .style(HEAD),
    );
    frame.render_widget(table, ports_area);
}

/// A node's facts, its query errors, and why each of its degraded links is degraded.
fn node_facts(
    fabric: &Fabric,
    health: &LinkHealth,
    id: ibscope_topo::NodeId,
) -> Vec<Line<'static>> {
    let node = fabric.node(id);
    let mut facts = vec![
        Line::raw(format!(
            "{}  GUID {:#018x}  sysimg {:#018x}",
            node.kind.short(),
            node.guid,
            node.system_image_guid
        )),
        Line::raw(format!(
            "vendor {:#08x} device {:#06x} rev {:#x}  ports {}  LID {}",
            node.vendor_id,
            node.device_id,
            node.revision,
            node.num_ports,
            node.lid()
                .map(|l| l.to_string())
                .unwrap_or_else(|| "-".into())
        )),
        Line::raw(format!(
            "description \"{}\"  DR path {}",
            for_terminal(&node.description),
            node.dr_path
                .as_deref()
                .map(for_terminal)
                .unwrap_or_else(|| "-".into())
        )),
    ];
    if let Some(sw) = &node.switch {
        facts.push(Line::raw(format!(
            "LFT cap {} top {} ({} entries read)  enhanced port 0: {}",
            sw.linear_fdb_cap,
            sw.linear_fdb_top,
            sw.lft.len(),
            if sw.enhanced_port0 { "yes" } else { "no" }
        )));
    }
    for e in &node.errors {
        facts.push(Line::styled(format!("error: {}", for_terminal(e)), RED));
    }
    // Why a port's link is degraded or below the norm (the table only colours it).
    for p in &node.ports {
        let verdict = fabric
            .link_at(End {
                node: id,
                port: p.number,
            })
            .and_then(|link| health.verdict(link))
            .filter(|v| v.degraded() || v.below_norm());
        if let Some(v) = verdict {
            let (what, style) = if v.degraded() {
                ("degraded", RED)
            } else {
                ("below norm", WARN)
            };
            facts.push(Line::styled(
                format!(
                    "port {} {what}: {}",
                    p.number,
                    for_terminal(&v.reasons.join("; "))
                ),
                style,
            ));
        }
    }
    facts
}

/// A row of the port table, and whether its link is down or degraded (then it is red).
struct PortRow {
    row: Row<'static>,
    problem: bool,
}

impl PortRow {
    fn selected(self) -> Row<'static> {
        self.row.style(if self.problem {
            RED.add_modifier(Modifier::REVERSED)
        } else {
            SELECTED
        })
    }
}

fn port_row(
    fabric: &Fabric,
    health: &LinkHealth,
    end: End,
    names: Option<&ibscope_topo::namemap::NameMap>,
) -> PortRow {
    let Some(p) = fabric.node(end.node).port(end.port) else {
        return PortRow {
            row: Row::new(vec![end.port.to_string()]),
            problem: false,
        };
    };
    let peer = fabric.peer(end);
    let peer_text = match peer {
        Some(e) => format!("{}[{}]", node_name(fabric.node(e.node), names), e.port),
        None => "-".into(),
    };
    let peer_port = peer.and_then(|e| fabric.node(e.node).port(e.port));
    let problem = link_facts(Some(p), peer_port).down
        || fabric
            .link_at(end)
            .is_some_and(|link| health.is_degraded(link));
    let row = Row::new(vec![
        p.number.to_string(),
        p.state.map_or("?", PortState::short).to_string(),
        p.phys_state.map_or("?", PhysState::short).to_string(),
        Rate::text(p.width_active, p.speed_active),
        Rate::text(p.width_supported.best(), p.speed_supported.best()),
        Rate::text(p.width_enabled.best(), p.speed_enabled.best()),
        if p.lid == 0 {
            "-".into()
        } else {
            p.lid.to_string()
        },
        peer_text,
    ]);
    let row = if problem { row.style(RED) } else { row };
    PortRow { row, problem }
}

// ----- Links -----

fn draw_links(frame: &mut Frame, area: Rect, state: &AppState) {
    let Some(snap) = &state.snapshot else {
        return no_data(frame, area, state);
    };
    let fabric = &snap.fabric;
    let names = state.names.as_ref();
    let rows_all = &state.derived.link_rows;
    let s = &state.derived.summary;
    let block = Block::default().borders(Borders::TOP).title(Span::styled(
        format!(
            " Links: {}, {} degraded, {} down ",
            rows_all.len(),
            s.degraded,
            s.down
        ),
        if s.degraded + s.down > 0 { BAD } else { HEAD },
    ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    // The selected link's verdict below the table, when there is room for it.
    let detail_h = if inner.height >= 8 { 3 } else { 0 };
    let [table_area, detail_area] =
        Layout::vertical([Constraint::Min(1), Constraint::Length(detail_h)]).areas(inner);
    let height = usize::from(table_area.height.saturating_sub(1));
    let window = state.links.window(rows_all.len(), height);
    let end_text = |e: End| format!("{}[{}]", node_name(fabric.node(e.node), names), e.port);
    let rate =
        |r: Option<ibscope_topo::health::Rate>| r.map_or_else(|| "?".into(), |r| r.to_string());
    let rows: Vec<Row> = window
        .map(|i| {
            let r = &rows_all[i];
            let flag = if r.facts.down {
                "DOWN"
            } else if r.verdict.degraded() {
                "DEGR"
            } else if r.verdict.below_norm() {
                "LOW?"
            } else {
                ""
            };
            let row = Row::new(vec![
                end_text(r.a),
                end_text(r.b),
                r.facts.active_text(),
                rate(r.verdict.expected),
                r.facts.state_text(),
                flag.to_string(),
            ]);
            let style = if r.is_problem() {
                RED
            } else if r.verdict.below_norm() {
                WARN
            } else {
                Style::new()
            };
            let style = if i == state.links.selected {
                style.add_modifier(Modifier::REVERSED)
            } else {
                style
            };
            row.style(style)
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Fill(1),
            Constraint::Fill(1),
            Constraint::Length(6),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Length(4),
        ],
    )
    .header(Row::new(vec!["End A", "End B", "Active", "Expect", "State", ""]).style(HEAD));
    frame.render_widget(table, table_area);

    let Some(r) = rows_all.get(state.links.selected).filter(|_| detail_h > 0) else {
        return;
    };
    let block = Block::default()
        .borders(Borders::TOP)
        .title(" Selected link ");
    let inner = block.inner(detail_area);
    frame.render_widget(block, detail_area);
    let (verdict, style) = verdict_text(&r.verdict);
    let mut spans = vec![
        Span::raw(format!("{} <-> {}  ", end_text(r.a), end_text(r.b))),
        Span::styled(verdict, style),
    ];
    if r.facts.down {
        spans.push(Span::styled(
            format!("; not Active ({})", r.facts.state_text()),
            RED,
        ));
    }
    frame.render_widget(
        Paragraph::new(Line::from(spans)).wrap(Wrap { trim: true }),
        inner,
    );
}

// ----- Counters -----

fn draw_counters(frame: &mut Frame, area: Rect, state: &AppState) {
    let Some(snap) = &state.snapshot else {
        return no_data(frame, area, state);
    };
    let v = &state.counters;
    if v.rows.is_empty() {
        frame.render_widget(
            Paragraph::new(vec![
                Line::styled("No counter data in this snapshot.", WARN),
                Line::raw("An offline topology file has no counters; the live source reads"),
                Line::raw("PortCounters / PortCountersExtended on every sweep."),
            ])
            .block(Block::default().borders(Borders::TOP).title(" Counters ")),
            area,
        );
        return;
    }
    let jumped = v.rows.iter().filter(|k| state.history[*k].jumped).count();
    let detail_h = if area.height >= 16 { 7 } else { 0 };
    let [table_area, detail_area] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(detail_h)]).areas(area);
    let block = Block::default().borders(Borders::TOP).title(Span::styled(
        format!(
            " Counters: {} ports, {} with new errors, sort: {} ",
            v.rows.len(),
            jumped,
            v.sort.as_str()
        ),
        if jumped > 0 { BAD } else { HEAD },
    ));
    let inner = block.inner(table_area);
    frame.render_widget(block, table_area);
    draw_counter_rows(frame, inner, state, &snap.fabric);
    if detail_h == 0 {
        return;
    }
    if let Some(h) = v.rows.get(v.list.selected).map(|k| &state.history[k]) {
        draw_selected_port(frame, detail_area, h);
    }
}

/// The last `n` rx+tx rates of a port, oldest first.
fn recent_rates(h: &PortHistory, n: u16) -> Vec<u64> {
    let skip = h.rate_history.len().saturating_sub(usize::from(n));
    h.rate_history.iter().skip(skip).copied().collect()
}

/// One row per port (errors, rates) with its rate history as a sparkline beside it.
fn draw_counter_rows(frame: &mut Frame, inner: Rect, state: &AppState, fabric: &Fabric) {
    let v = &state.counters;
    let names = state.names.as_ref();
    let spark_w: u16 = if inner.width >= 120 { 32 } else { 16 };
    let [text_area, spark_area] =
        Layout::horizontal([Constraint::Min(10), Constraint::Length(spark_w)]).areas(inner);
    let height = usize::from(text_area.height.saturating_sub(1));
    let window = v.list.window(v.rows.len(), height);
    let mut rows = Vec::new();
    for (line, i) in window.clone().enumerate() {
        let key = v.rows[i];
        let h = &state.history[&key];
        let mut style = if h.jumped { BAD } else { Style::new() };
        if i == v.list.selected {
            style = style.add_modifier(Modifier::REVERSED);
        }
        rows.push(
            Row::new(vec![
                if h.jumped { "▲" } else { " " }.to_string(),
                port_name(fabric, names, key),
                h.error_total.to_string(),
                format!("{:.1}", h.error_rate),
                format_rate(h.rx_bytes_per_s),
                format_rate(h.tx_bytes_per_s),
            ])
            .style(style),
        );
        let r = Rect {
            x: spark_area.x,
            y: spark_area.y + 1 + line as u16,
            width: spark_area.width,
            height: 1,
        };
        if r.y < spark_area.y + spark_area.height {
            let colour = if h.jumped {
                RED
            } else {
                Style::new().fg(Color::Cyan)
            };
            let data = recent_rates(h, spark_w);
            frame.render_widget(Sparkline::default().data(&data).style(colour), r);
        }
    }
    frame.render_widget(
        Paragraph::new(Span::styled(" rx+tx history", HEAD)),
        Rect {
            height: 1,
            ..spark_area
        },
    );
    let table = Table::new(
        rows,
        [
            Constraint::Length(1),
            Constraint::Min(10),
            Constraint::Length(8),
            Constraint::Length(7),
            Constraint::Length(9),
            Constraint::Length(9),
        ],
    )
    .header(Row::new(vec!["", "Port", "Errors", "Err/s", "Rx", "Tx"]).style(HEAD));
    frame.render_widget(table, text_area);
}

/// The selected port's last counters (errors that counted in red) and its rate history.
fn draw_selected_port(frame: &mut Frame, area: Rect, h: &PortHistory) {
    let block = Block::default()
        .borders(Borders::TOP)
        .title(" Selected port ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let [text, spark] = Layout::vertical([Constraint::Length(3), Constraint::Min(1)]).areas(inner);
    let mut spans = Vec::new();
    for (k, val) in &h.last.counters {
        let is_err = ERROR_COUNTERS.contains(&k.as_str());
        let style = if is_err && *val > 0 {
            RED
        } else {
            Style::new()
        };
        // A counter at its maximum is a lower bound, not a count.
        let sign = if h.last.saturated.contains(k) {
            "≥"
        } else {
            "="
        };
        spans.push(Span::styled(
            format!("{}{sign}{val}  ", for_terminal(k)),
            style,
        ));
    }
    frame.render_widget(
        Paragraph::new(Line::from(spans)).wrap(Wrap { trim: true }),
        text,
    );
    let data = recent_rates(h, spark.width);
    frame.render_widget(
        Sparkline::default()
            .data(&data)
            .style(Style::new().fg(Color::Cyan)),
        spark,
    );
}

// ----- Routing -----

fn draw_routing(frame: &mut Frame, area: Rect, state: &AppState) {
    let Some(snap) = &state.snapshot else {
        return no_data(frame, area, state);
    };
    let fabric = &snap.fabric;
    let names = state.names.as_ref();
    let r = &state.routing;
    let field = |label: &str, text: &str, which: RouteField| -> Vec<Span<'static>> {
        let editing = r.editing == Some(which);
        vec![
            Span::styled(format!("{label}: "), HEAD),
            Span::styled(
                format!("{}{}", for_terminal(text), if editing { "_" } else { "" }),
                if editing {
                    SELECTED
                } else {
                    Style::new().add_modifier(Modifier::UNDERLINED)
                },
            ),
            Span::raw("  "),
        ]
    };
    let mut input = field("From", &r.from, RouteField::From);
    input.extend(field("To", &r.to, RouteField::To));
    let summary: Line = match &r.result {
        None => Line::styled("type / to enter a source and a destination", DIM),
        Some(Err(e)) => Line::styled(for_terminal(e), BAD),
        Some(Ok(res)) => {
            let src = format!(
                "{}[{}]",
                node_name(fabric.node(res.src.node), names),
                res.src.port
            );
            let dst = fabric
                .port_by_lid(res.dst_lid)
                .map(|e| format!("{}[{}]", node_name(fabric.node(e.node), names), e.port))
                .unwrap_or_else(|| "?".into());
            match &res.error {
                None => Line::styled(
                    format!(
                        "{src} -> LID {} {dst}: {} links",
                        res.dst_lid,
                        res.hops.len().saturating_sub(1)
                    ),
                    OK,
                ),
                Some(e) => Line::styled(format!("{src} -> LID {}: {}", res.dst_lid, e), BAD),
            }
        }
    };
    let [input_area, summary_area, rest] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(1),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(Line::from(input)), input_area);
    frame.render_widget(Paragraph::new(summary), summary_area);
    let [hops_area, bottom] =
        Layout::vertical([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(rest);
    let [lft_area, balance_area] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(bottom);

    // Hops.
    let block = Block::default().borders(Borders::TOP).title(" Path ");
    let inner = block.inner(hops_area);
    frame.render_widget(block, hops_area);
    let hops: &[ibscope_topo::routing::Hop] = match &r.result {
        Some(Ok(res)) => &res.hops,
        _ => &[],
    };
    let height = usize::from(inner.height.saturating_sub(1));
    let window = r.hops.window(hops.len(), height);
    let rows: Vec<Row> = window
        .map(|i| {
            let h = &hops[i];
            let port = |p: Option<u8>| p.map(|p| p.to_string()).unwrap_or_else(|| "-".into());
            let row = Row::new(vec![
                i.to_string(),
                hop_name(fabric, names, &h.node),
                h.node.kind.short().to_string(),
                port(h.in_port),
                port(h.out_port),
            ]);
            if i == r.hops.selected {
                row.style(SELECTED)
            } else {
                row
            }
        })
        .collect();
    frame.render_widget(
        Table::new(
            rows,
            [
                Constraint::Length(3),
                Constraint::Min(10),
                Constraint::Length(6),
                Constraint::Length(4),
                Constraint::Length(4),
            ],
        )
        .header(Row::new(vec!["#", "Node", "Kind", "In", "Out"]).style(HEAD)),
        inner,
    );

    // LFT of the selected hop's switch, around the destination LID.
    let selected_switch = hops
        .get(r.hops.selected)
        .and_then(|h| fabric.node_by_guid(h.node.guid))
        .filter(|id| fabric.node(*id).is_switch());
    let dst_lid = match &r.result {
        Some(Ok(res)) => Some(res.dst_lid),
        _ => None,
    };
    draw_lft(frame, lft_area, state, fabric, selected_switch, dst_lid);
    draw_balance(frame, balance_area, state);
}

fn draw_lft(
    frame: &mut Frame,
    area: Rect,
    state: &AppState,
    fabric: &Fabric,
    switch: Option<ibscope_topo::NodeId>,
    dst_lid: Option<u16>,
) {
    let names = state.names.as_ref();
    let Some(id) = switch else {
        let block = Block::default().borders(Borders::TOP).title(" LFT ");
        let inner = block.inner(area);
        frame.render_widget(block, area);
        frame.render_widget(
            Paragraph::new(Span::styled("select a switch hop to see its LFT", DIM)),
            inner,
        );
        return;
    };
    let node = fabric.node(id);
    let facts = node.switch.as_ref();
    let lft_len = facts.map(|f| f.lft.len()).unwrap_or(0);
    let block = Block::default().borders(Borders::TOP).title(format!(
        " LFT of {} ({} LIDs) ",
        node_name(node, names),
        lft_len
    ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(facts) = facts.filter(|f| !f.lft.is_empty()) else {
        frame.render_widget(Paragraph::new(Span::styled("LFT not read", WARN)), inner);
        return;
    };
    let [head, inner] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(inner);
    frame.render_widget(
        Paragraph::new(Span::styled("  LID out next hop        destination", HEAD)),
        head,
    );
    // A window of LIDs centred on the destination: O(rows), not O(table).
    let height = usize::from(inner.height);
    // LinearFDBTop 0 means unknown: the table's length bounds it (as in routing).
    let last = facts.lft.len() - 1;
    let top = match usize::from(facts.linear_fdb_top) {
        0 => last,
        t => t.min(last),
    };
    let centre = usize::from(dst_lid.unwrap_or(1));
    let start = centre
        .saturating_sub(height / 2)
        .max(1)
        .min(top.saturating_sub(height.saturating_sub(1)).max(1));
    let lines: Vec<Line> = (start..=top)
        .take(height)
        .map(|lid| {
            let lid16 = lid as u16;
            let (port_text, peer) = match facts.route(lid16) {
                Some(p) => (
                    format!("{p:>3}"),
                    if p == 0 {
                        "(self)".to_string()
                    } else {
                        fabric
                            .peer(End { node: id, port: p })
                            .map(|e| node_name(fabric.node(e.node), names))
                            .unwrap_or_else(|| "unlinked".into())
                    },
                ),
                None => ("  -".to_string(), String::new()),
            };
            let dest = fabric
                .port_by_lid(lid16)
                .map(|e| node_name(fabric.node(e.node), names))
                .unwrap_or_default();
            let peer: String = peer.chars().take(15).collect();
            let text = format!("{lid:>5} {port_text} {peer:<15} {dest}");
            if Some(lid16) == dst_lid {
                Line::styled(text, SELECTED)
            } else {
                Line::raw(text)
            }
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), inner);
}

fn draw_balance(frame: &mut Frame, area: Rect, state: &AppState) {
    let block = Block::default()
        .borders(Borders::TOP)
        .title(" Route balance ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let Some(report) = state.snapshot.as_ref().and_then(|s| s.routes.as_deref()) else {
        frame.render_widget(
            Paragraph::new(vec![
                Line::styled("no route analysis:", DIM),
                Line::styled("the LFTs are not in this snapshot", DIM),
            ]),
            inner,
        );
        return;
    };
    let mut lines = Vec::new();
    let broken = report.pairs_broken + report.pairs_looping;
    lines.push(Line::styled(
        format!(
            "{} pairs, {} broken, max {} hops",
            report.pairs, broken, report.max_hops
        ),
        if broken > 0 { BAD } else { OK },
    ));
    let height = usize::from(inner.height);
    for l in &report.balance.by_layer {
        if lines.len() >= height / 2 {
            break;
        }
        let imb = l.imbalance.unwrap_or(f64::INFINITY);
        let style = if imb > 1.5 {
            RED
        } else if imb > 1.2 {
            WARN
        } else {
            Style::new()
        };
        lines.push(Line::styled(
            format!(
                "L{} {}: {} ports {}..{} routes{}",
                l.layer.map(|x| x.to_string()).unwrap_or_else(|| "?".into()),
                l.direction.as_str(),
                l.ports,
                l.routes_min,
                l.routes_max,
                l.imbalance.map(|x| format!(" x{x:.2}")).unwrap_or_default()
            ),
            style,
        ));
    }
    let max = report
        .balance
        .hottest
        .first()
        .map(|p| p.routes)
        .unwrap_or(0)
        .max(1);
    let remaining = height.saturating_sub(lines.len());
    for p in report.balance.hottest.iter().take(remaining) {
        let heat = p.routes as f64 / max as f64;
        let style = if heat > 0.9 {
            RED
        } else if heat > 0.6 {
            WARN
        } else {
            Style::new()
        };
        let bar_len = (heat * 8.0).round() as usize;
        lines.push(Line::styled(
            format!(
                "{:<8} {:>6} {}[{}]->{}",
                "█".repeat(bar_len),
                p.routes,
                for_terminal(&p.from.node.name),
                p.from.port,
                for_terminal(&p.to.node.name)
            ),
            style,
        ));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}

// ----- Events -----

fn draw_events(frame: &mut Frame, area: Rect, state: &AppState) {
    let block = Block::default()
        .borders(Borders::TOP)
        .title(format!(" Events ({}), newest first ", state.events.len()));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if state.events.is_empty() {
        return no_data(frame, inner, state);
    }
    let height = usize::from(inner.height.saturating_sub(1));
    let window = state.event_list.window(state.events.len(), height);
    let rows: Vec<Row> = window
        .map(|i| {
            let e = &state.events[i];
            let style = if e.kind.is_bad() {
                RED
            } else if e.kind == EventKind::Info {
                DIM
            } else {
                Style::new()
            };
            let style = if i == state.event_list.selected {
                style.add_modifier(Modifier::REVERSED)
            } else {
                style
            };
            Row::new(vec![
                format_time(e.at),
                e.kind.as_str().to_string(),
                for_terminal(&e.text),
            ])
            .style(style)
        })
        .collect();
    frame.render_widget(
        Table::new(
            rows,
            [
                Constraint::Length(8),
                Constraint::Length(12),
                Constraint::Min(10),
            ],
        )
        .header(Row::new(vec!["UTC", "Event", "Detail"]).style(HEAD)),
        inner,
    );
}

// ----- Hosts -----

/// A grid cell's style: red when down, missing or degraded, yellow when misplaced.
fn cell_style(state: CellState) -> Style {
    match state {
        CellState::Up => Style::new(),
        CellState::Misplaced => WARN,
        CellState::Missing => BAD,
        CellState::Degraded | CellState::Down => RED,
    }
}

fn draw_hosts(frame: &mut Frame, area: Rect, state: &AppState) {
    let Some(snap) = &state.snapshot else {
        return no_data(frame, area, state);
    };
    let grid = &state.derived.host_grid;
    let title = if grid.rails.is_empty() {
        " Hosts: none with a known rail ".to_string()
    } else {
        format!(
            " Hosts: {} with rails, {} with rail problems; rails {} ",
            grid.rows.len(),
            grid.with_problems,
            ibscope_topo::hosts::rail_ranges(&grid.rails)
        )
    };
    let block = Block::default().borders(Borders::TOP).title(Span::styled(
        title,
        if grid.with_problems > 0 { BAD } else { HEAD },
    ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if grid.rows.is_empty() {
        frame.render_widget(
            Paragraph::new(vec![
                Line::styled("No host with a known rail.", WARN),
                Line::raw("Hosts are CAs grouped by the hostname in their NodeDescription"),
                Line::raw("(rdma-ndd writes \"%h %d\": gpu-0042 mlx5_3); the device index"),
                Line::raw("is the rail."),
            ])
            .wrap(Wrap { trim: false }),
            inner,
        );
        return;
    }
    let detail_h = if state.hosts.detail && inner.height >= 14 {
        10
    } else {
        0
    };
    let [table_area, detail_area] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(detail_h)]).areas(inner);
    draw_host_grid(frame, table_area, state);
    if detail_h > 0 {
        draw_host_detail(frame, detail_area, state, &snap.fabric, &snap.health);
    }
}

/// The grid: one row per host, one column per rail, as many columns as fit around the
/// selected one.
fn draw_host_grid(frame: &mut Frame, area: Rect, state: &AppState) {
    let grid = &state.derived.host_grid;
    let v = &state.hosts;
    let name_w = grid
        .rows
        .iter()
        .map(|r| r.shown.chars().count())
        .max()
        .unwrap_or(4)
        .clamp(4, 24) as u16;
    const CELL: u16 = 7;
    let fit = usize::from((area.width.saturating_sub(name_w + 1) / (CELL + 1)).max(1));
    let first = (v.rail + 1).saturating_sub(fit);
    let cols: Vec<usize> = (first..grid.rails.len()).take(fit).collect();
    let height = usize::from(area.height.saturating_sub(1));
    let window = v.list.window(grid.rows.len(), height);
    let rows: Vec<Row> =
        window
            .map(|i| {
                let r = &grid.rows[i];
                let on_row = i == v.list.selected;
                let mut cells = vec![ratatui::widgets::Cell::from(r.shown.clone())
                    .style(if on_row { SELECTED } else { Style::new() })];
                for &c in &cols {
                    let (text, style) = match &r.cells[c] {
                        Some(cell) => (cell.text.clone(), cell_style(cell.state)),
                        None => ("·".to_string(), DIM),
                    };
                    let style = if on_row && c == v.rail {
                        style.add_modifier(Modifier::REVERSED | Modifier::BOLD)
                    } else {
                        style
                    };
                    cells.push(ratatui::widgets::Cell::from(text).style(style));
                }
                Row::new(cells)
            })
            .collect();
    let mut widths = vec![Constraint::Length(name_w)];
    widths.extend(cols.iter().map(|_| Constraint::Length(CELL)));
    let mut header = vec!["Host".to_string()];
    header.extend(cols.iter().map(|&c| format!("rail {}", grid.rails[c])));
    frame.render_widget(
        Table::new(rows, widths).header(Row::new(header).style(HEAD)),
        area,
    );
}

/// The selected cell's HCA: its link, why it is marked, its counters.
fn draw_host_detail(
    frame: &mut Frame,
    area: Rect,
    state: &AppState,
    fabric: &Fabric,
    health: &LinkHealth,
) {
    let grid = &state.derived.host_grid;
    let names = state.names.as_ref();
    let (Some(row), Some(&rail)) = (
        grid.rows.get(state.hosts.list.selected),
        grid.rails.get(state.hosts.rail),
    ) else {
        return;
    };
    let block = Block::default()
        .borders(Borders::TOP)
        .title(format!(" {} rail {rail} ", row.shown));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let mut lines: Vec<Line> = Vec::new();
    let cell = row.cells.get(state.hosts.rail).cloned().flatten();
    match cell.as_ref().and_then(|c| c.key) {
        Some(key) => {
            if let Some(id) = fabric.node_by_guid(key.guid) {
                let end = End {
                    node: id,
                    port: key.port,
                };
                lines.extend(hca_link_lines(fabric, health, end, names));
            }
            match state.history.get(&key) {
                Some(h) => {
                    lines.push(Line::styled(
                        format!(
                            "counters: errors {} ({:.1}/s)  rx {}  tx {}",
                            h.error_total,
                            h.error_rate,
                            format_rate(h.rx_bytes_per_s),
                            format_rate(h.tx_bytes_per_s)
                        ),
                        if h.jumped { BAD } else { Style::new() },
                    ));
                    let values: Vec<Span> = h
                        .last
                        .counters
                        .iter()
                        .map(|(k, val)| {
                            let bad = ERROR_COUNTERS.contains(&k.as_str()) && *val > 0;
                            Span::styled(
                                format!("{}={val}  ", for_terminal(k)),
                                if bad { RED } else { DIM },
                            )
                        })
                        .collect();
                    lines.push(Line::from(values));
                }
                None => lines.push(Line::styled("counters: not read in this snapshot", DIM)),
            }
        }
        None if cell.is_some() => {
            lines.push(Line::styled("no HCA of this rail in the fabric", BAD));
        }
        None => lines.push(Line::styled("this host has no HCA on this rail", DIM)),
    }
    let findings = state
        .snapshot
        .as_ref()
        .map(|s| s.findings.as_slice())
        .unwrap_or(&[]);
    for f in findings
        .iter()
        .filter(|f| f.host.as_deref() == Some(row.name.as_str()) && f.rail == Some(rail))
    {
        lines.push(Line::styled(
            format!("[{}] {}", f.kind, for_terminal(&f.message)),
            if f.severity == Severity::Error {
                BAD
            } else {
                WARN
            },
        ));
    }
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: true }), inner);
}

/// An HCA port's facts and its link: rate, states, the far end, why it is degraded.
fn hca_link_lines(
    fabric: &Fabric,
    health: &LinkHealth,
    end: End,
    names: Option<&ibscope_topo::namemap::NameMap>,
) -> Vec<Line<'static>> {
    let node = fabric.node(end.node);
    let Some(p) = node.port(end.port) else {
        return Vec::new();
    };
    let mut lines = vec![Line::raw(format!(
        "{}[{}]  GUID {:#018x}  LID {}",
        node_name(node, names),
        end.port,
        node.guid,
        if p.lid == 0 {
            "-".into()
        } else {
            p.lid.to_string()
        }
    ))];
    let peer = fabric.peer(end);
    let peer_text = peer.map_or_else(
        || "no link".to_string(),
        |e| format!("{}[{}]", node_name(fabric.node(e.node), names), e.port),
    );
    let facts = link_facts(Some(p), peer.and_then(|e| fabric.node(e.node).port(e.port)));
    lines.push(Line::styled(
        format!(
            "link: {} {}  <->  {peer_text}",
            Rate::text(p.width_active, p.speed_active),
            ibscope_topo::health::state_text(p.state, p.phys_state)
        ),
        if facts.down { RED } else { Style::new() },
    ));
    if let Some(v) = fabric
        .link_at(end)
        .and_then(|l| health.verdict(l))
        .filter(|v| v.degraded() || v.below_norm())
    {
        let (text, style) = verdict_text(v);
        lines.push(Line::styled(text, style));
    }
    lines
}

/// A link's verdict as the Links view and the Hosts detail word it.
fn verdict_text(v: &LinkVerdict) -> (String, Style) {
    let why = for_terminal(&v.reasons.join("; "));
    if v.degraded() {
        (format!("degraded: {why}"), RED)
    } else if v.below_norm() {
        (format!("below norm: {why}"), WARN)
    } else {
        ("not degraded".to_string(), DIM)
    }
}
