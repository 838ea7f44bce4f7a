//! The Routing view: a route traced hop by hop, the LFT of a hop's switch, the route balance.

use ibscope_topo::escape::for_terminal;
use ibscope_topo::routing::Hop;
use ibscope_topo::{End, Fabric};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};
use ratatui::Frame;

use super::widgets::{
    fill_width, fit, name_and_port, no_data, ViewParts, BAD, DIM, HEAD, OK, RED, SELECTED, WARN,
};
use crate::derive::{hop_name, node_name};
use crate::state::{AppState, ListCursor, RouteField};

/// What this view gives the screen, the keys and the help.
pub const PARTS: ViewParts = ViewParts {
    title: "Routing",
    about: &[
        "Inputs: name, LID, 0xGUID, optional [port]",
        "↑↓ picks a hop: its switch's LFT shows",
    ],
    draw: draw_routing,
    list,
    list_noun,
    // Its `/` is its own: the route's ends, found by name.
    matches: None,
    found: None,
};

fn list(state: &mut AppState) -> (&mut ListCursor, usize) {
    let len = match &state.routing.result {
        Some(Ok(r)) => r.hops.len(),
        _ => 0,
    };
    (&mut state.routing.hops, len)
}

fn list_noun(_: &AppState) -> &'static str {
    "hops"
}

fn draw_routing(frame: &mut Frame, area: Rect, state: &AppState) {
    let Some(sweep) = &state.sweep else {
        return no_data(frame, area, state);
    };
    let fabric = &sweep.fabric;
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

    let hops: &[Hop] = match &r.result {
        Some(Ok(res)) => &res.hops,
        _ => &[],
    };
    draw_path(frame, hops_area, state, fabric, hops);

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

/// The traced route's hops, one row each, the selected one marked.
fn draw_path(frame: &mut Frame, area: Rect, state: &AppState, fabric: &Fabric, hops: &[Hop]) {
    let names = state.names.as_ref();
    let r = &state.routing;
    let block = Block::default().borders(Borders::TOP).title(" Path ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let height = usize::from(inner.height.saturating_sub(1));
    let window = r.hops.window(hops.len(), height);
    let name_w = fill_width(inner.width, &[3, 6, 4, 4]);
    let rows: Vec<Row> = window
        .map(|i| {
            let h = &hops[i];
            let port = |p: Option<u8>| p.map(|p| p.to_string()).unwrap_or_else(|| "-".into());
            let row = Row::new(vec![
                i.to_string(),
                fit(&hop_name(fabric, names, &h.node), name_w),
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
                Constraint::Length(name_w as u16),
                Constraint::Length(6),
                Constraint::Length(4),
                Constraint::Length(4),
            ],
        )
        .header(Row::new(vec!["#", "Node", "Kind", "In", "Out"]).style(HEAD)),
        inner,
    );
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
            let peer = fit(&peer, 15);
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
    let Some(report) = state.sweep.as_ref().and_then(|s| s.routes.as_deref()) else {
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
        let head = format!("{:<8} {:>6} ", "█".repeat(bar_len), p.routes);
        // The port's end keeps its [port]; each name gives up its middle to fit.
        let room = usize::from(inner.width).saturating_sub(head.chars().count() + 2);
        lines.push(Line::styled(
            format!(
                "{head}{}->{}",
                name_and_port(&for_terminal(&p.from.node.name), p.from.port, room / 2),
                fit(&for_terminal(&p.to.node.name), room - room / 2)
            ),
            style,
        ));
    }
    frame.render_widget(Paragraph::new(lines), inner);
}
