//! The Events view: what changed between sweeps, newest first.

use ibscope_topo::escape::for_terminal;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Block, Borders, Row, Table};
use ratatui::Frame;

use super::widgets::{format_time, no_data, ViewParts, DIM, HEAD, RED};
use crate::derive::node_name;
use crate::event_log::{event_order, LogEntryKind, EVENT_COLUMNS};
use crate::query::Query;
use crate::state::{AppState, ListCursor};

/// What this view gives the screen, the keys and the help.
pub const PARTS: ViewParts = ViewParts {
    title: "Events",
    about: &[
        "Changes between sweeps, newest first (s sorts):",
        "links up/down, degraded, error counter jumps,",
        "port states, SM changes. Times are UTC.",
    ],
    draw: draw_events,
    list,
    list_noun,
    matches: Some(matches),
    found: None,
};

/// An event shows what `/` looks for when its text holds it, or the name of the node it
/// names.
fn matches(state: &AppState, i: usize, q: &Query) -> bool {
    let order = event_order(&state.events, state.events_sort);
    let Some(e) = order.get(i).map(|&o| &state.events[o]) else {
        return false;
    };
    let named = q.node.zip(state.fabric()).and_then(|(guid, f)| {
        let id = f.node_by_guid(guid)?;
        Some(node_name(f.node(id), state.names.as_ref()))
    });
    q.in_text(&e.text) || named.is_some_and(|n| e.text.contains(&n))
}

fn list(state: &mut AppState) -> (&mut ListCursor, usize) {
    let len = state.events.len();
    (&mut state.event_list, len)
}

fn list_noun(_: &AppState) -> &'static str {
    "events"
}

fn draw_events(frame: &mut Frame, area: Rect, state: &AppState) {
    let block = Block::default().borders(Borders::TOP).title(format!(
        " Events ({}), {} ",
        state.events.len(),
        state.events_sort.title(&EVENT_COLUMNS)
    ));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    if state.events.is_empty() {
        return no_data(frame, inner, state);
    }
    let height = usize::from(inner.height.saturating_sub(1));
    let order = event_order(&state.events, state.events_sort);
    let window = state.event_list.window(order.len(), height);
    let rows: Vec<Row> = window
        .map(|i| {
            let e = &state.events[order[i]];
            let style = if e.kind.is_bad() {
                RED
            } else if e.kind == LogEntryKind::Info {
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
        .header(Row::new(state.events_sort.headers(&EVENT_COLUMNS)).style(HEAD)),
        inner,
    );
}
