//! The Links view: every link, problems first, and the selected link's verdict.

use ibscope_topo::End;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use super::widgets::{name_and_port, no_data, verdict_text, ViewParts, BAD, HEAD, RED, WARN};
use crate::derive::{node_name, LINK_COLUMNS};
use crate::query::{port_names, Query};
use crate::state::{AppState, ListCursor};

/// What this view gives the screen, the keys and the help.
pub const PARTS: ViewParts = ViewParts {
    title: "Links",
    about: &[
        "Every link, problems first.",
        "Expect: the rate it is held to (its class's norm).",
        "Red: degraded (as ibscope check) or not Active;",
        "yellow LOW?: below the norm, capability unknown",
        "offline. The selected link's reasons show below.",
    ],
    draw: draw_links,
    list,
    list_noun,
    matches: Some(matches),
    found: None,
};

/// A link shows what `/` looks for when either end is the node or port it names, or is
/// shown under a name that holds it.
fn matches(state: &AppState, i: usize, q: &Query) -> bool {
    let (Some(fabric), Some(&row)) = (state.fabric(), state.links.order.get(i)) else {
        return false;
    };
    let r = &state.derived.link_rows[row];
    let names = state.names.as_ref();
    [r.a, r.b].into_iter().any(|e| {
        let key = fabric.node(e.node).port_key(e.port);
        q.names_port(key) || q.in_text(&port_names(fabric, names, key))
    })
}

fn list(state: &mut AppState) -> (&mut ListCursor, usize) {
    let len = state.links.order.len();
    (&mut state.links.list, len)
}

fn list_noun(_: &AppState) -> &'static str {
    "links"
}

fn draw_links(frame: &mut Frame, area: Rect, state: &AppState) {
    let Some(sweep) = &state.sweep else {
        return no_data(frame, area, state);
    };
    let fabric = &sweep.fabric;
    let names = state.names.as_ref();
    let rows_all = &state.derived.link_rows;
    let s = &state.derived.summary;
    let block = Block::default().borders(Borders::TOP).title(Span::styled(
        format!(
            " Links: {}, {} degraded, {} down, {} ",
            rows_all.len(),
            s.degraded,
            s.down,
            state.links.sort.title(&LINK_COLUMNS)
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
    let order = &state.links.order;
    let window = state.links.list.window(order.len(), height);
    let end_text = |e: End| format!("{}[{}]", node_name(fabric.node(e.node), names), e.port);
    // The end columns share what the fixed columns (and the gaps between all six) leave.
    let end_width = usize::from(table_area.width.saturating_sub(6 + 7 + 7 + 4 + 5) / 2);
    let end_cell =
        |e: End| name_and_port(&node_name(fabric.node(e.node), names), e.port, end_width);
    let rate =
        |r: Option<ibscope_topo::health::Rate>| r.map_or_else(|| "?".into(), |r| r.to_string());
    let rows: Vec<Row> = window
        .map(|i| {
            let r = &rows_all[order[i]];
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
                end_cell(r.a),
                end_cell(r.b),
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
            let style = if i == state.links.list.selected {
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
    .header(Row::new(state.links.sort.headers(&LINK_COLUMNS)).style(HEAD));
    frame.render_widget(table, table_area);

    let Some(r) = state.selected_link().filter(|_| detail_h > 0) else {
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
