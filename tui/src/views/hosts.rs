//! The Hosts view: servers by rails, each cell an HCA's link, and a cell's detail.

use ibscope_mad::attr::Rate;
use ibscope_topo::escape::for_terminal;
use ibscope_topo::findings::Severity;
use ibscope_topo::{End, Fabric};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use super::widgets::{
    fit, format_rate, no_data, verdict_text, ViewParts, BAD, DIM, HEAD, RED, SELECTED, WARN,
};
use crate::derive::{host_natural, link_facts, node_name, CellState, LinkHealth};
use crate::query::{port_names, Query};
use crate::source::ERROR_COUNTERS;
use crate::state::{AppState, ListCursor};
use crate::table_sort::TableSort;

/// What this view gives the screen, the keys and the help.
pub const PARTS: ViewParts = ViewParts {
    title: "Hosts",
    about: &[
        "Servers (CAs by NodeDescription hostname) x rails",
        "(device index: mlx5_3 is rail 3); each cell its rate.",
        "Red: down, missing, degraded or slower than the",
        "host's other rails. Yellow, *: on another rail's leaf.",
    ],
    draw: draw_hosts,
    list,
    list_noun,
    matches: Some(matches),
    found: Some(found),
};

/// The rails of grid row `i` (in the order shown) whose HCA shows what `/` looks for.
fn matching_rails(state: &AppState, i: usize, q: &Query) -> Vec<usize> {
    let grid = &state.derived.host_grid;
    let (Some(fabric), Some(row)) = (
        state.fabric(),
        state.hosts.order.get(i).and_then(|&r| grid.rows.get(r)),
    ) else {
        return Vec::new();
    };
    let names = state.names.as_ref();
    row.cells
        .iter()
        .enumerate()
        .filter_map(|(rail, c)| Some((rail, c.as_ref()?.key?)))
        .filter(|(_, key)| q.names_port(*key) || q.in_text(&port_names(fabric, names, *key)))
        .map(|(rail, _)| rail)
        .collect()
}

/// A host shows what `/` looks for when its name holds it, or one of its HCAs does.
fn matches(state: &AppState, i: usize, q: &Query) -> bool {
    let grid = &state.derived.host_grid;
    let named = state
        .hosts
        .order
        .get(i)
        .and_then(|&r| grid.rows.get(r))
        .is_some_and(|row| q.in_text(&row.name));
    named || !matching_rails(state, i, q).is_empty()
}

/// The found host's rail whose HCA it is.
fn found(state: &mut AppState, q: &Query) {
    if let Some(&rail) = matching_rails(state, state.hosts.list.selected, q).first() {
        state.hosts.rail = rail;
    }
}

/// "sort: rail 3▼ (s S)": the grid's sorted column (the host's name, or a rail's cells).
fn sort_title(state: &AppState) -> String {
    let sort = state.hosts.sort;
    let rails = &state.derived.host_grid.rails;
    let header = match sort.column.checked_sub(1).and_then(|r| rails.get(r)) {
        Some(rail) => format!("rail {rail}"),
        None => "Host".to_string(),
    };
    TableSort::title_of(&header, sort.arrow(host_natural(sort.column)))
}

fn list(state: &mut AppState) -> (&mut ListCursor, usize) {
    let len = state.derived.host_grid.rows.len();
    (&mut state.hosts.list, len)
}

fn list_noun(_: &AppState) -> &'static str {
    "hosts"
}

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
    let Some(sweep) = &state.sweep else {
        return no_data(frame, area, state);
    };
    let grid = &state.derived.host_grid;
    let title = if grid.rails.is_empty() {
        " Hosts: none with a known rail ".to_string()
    } else {
        format!(
            " Hosts: {} with rails, {} with rail problems; rails {}; {} ",
            grid.rows.len(),
            grid.with_problems,
            ibscope_topo::hosts::rail_ranges(&grid.rails),
            sort_title(state)
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
        draw_host_detail(frame, detail_area, state, &sweep.fabric, &sweep.health);
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
    let fitting = usize::from((area.width.saturating_sub(name_w + 1) / (CELL + 1)).max(1));
    let first = (v.rail + 1).saturating_sub(fitting);
    let cols: Vec<usize> = (first..grid.rails.len()).take(fitting).collect();
    let height = usize::from(area.height.saturating_sub(1));
    let window = v.list.window(v.order.len(), height);
    let rows: Vec<Row> = window
        .map(|i| {
            let r = &grid.rows[v.order[i]];
            let on_row = i == v.list.selected;
            let mut cells =
                vec![
                    ratatui::widgets::Cell::from(fit(&r.shown, usize::from(name_w)))
                        .style(if on_row { SELECTED } else { Style::new() }),
                ];
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
    let arrow = |column: usize| {
        if v.sort.column == column {
            v.sort.arrow(host_natural(column))
        } else {
            ""
        }
    };
    let mut header = vec![format!("Host{}", arrow(0))];
    header.extend(
        cols.iter()
            .map(|&c| format!("rail {}{}", grid.rails[c], arrow(c + 1))),
    );
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
        state.hosts.selected_row(grid),
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
        .sweep
        .as_ref()
        .map(|s| s.findings.as_slice())
        .unwrap_or(&[]);
    for f in findings
        .iter()
        .filter(|f| f.host.as_deref() == Some(row.name.as_str()) && f.rail == Some(rail))
    {
        lines.push(Line::styled(
            f.text(ibscope_topo::findings::PortNaming::Short),
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
