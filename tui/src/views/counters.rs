//! The Counters view: each port's errors and rates since the UI opened, and its history;
//! the selected port's counters, those that count errors first, and Enter for all of them.

use ibscope_mad::attr::perf_attrs::counter_kind;
use ibscope_mad::attr::CounterKind;
use ibscope_topo::escape::for_terminal;
use ibscope_topo::findings::counter_value_text;
use ibscope_topo::PortKey;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Sparkline, Table};
use ratatui::Frame;

use super::widgets::{
    fill_width, format_rate, name_and_port, no_data, ViewParts, BAD, DIM, HEAD, RED, WARN,
};
use crate::query::{port_names, Query};
use crate::state::{AppState, ListCursor, PortHistory, COUNTER_COLUMNS};

/// What this view gives the screen, the keys and the help.
pub const PARTS: ViewParts = ViewParts {
    title: "Counters",
    about: &[
        "▲ bold red    error counters rose since the UI opened",
        "Sparkline: rx+tx data rate, one bar per sweep.",
        "Below: the selected port's counters, those that",
        "count errors first (non-zero first), then",
        "PortXmitWait (congestion), data and packets.",
        "A port gone from the fabric keeps its last name",
        "and values, dimmed.",
    ],
    draw: draw_counters,
    list,
    list_noun,
    matches: Some(matches),
    found: None,
};

/// A port shows what `/` looks for when it is the node or port it names, or is shown
/// under a name that holds it (its last name when it is gone).
fn matches(state: &AppState, i: usize, q: &Query) -> bool {
    if state.counters.detail {
        return false;
    }
    let Some(&key) = state.counters.rows.get(i) else {
        return false;
    };
    let shown = match state.fabric() {
        Some(f) if f.node_by_guid(key.guid).is_some() => port_names(f, state.names.as_ref(), key),
        _ => format!("{}[{}]", state.history[&key].name, key.port),
    };
    q.names_port(key) || q.in_text(&shown)
}

fn list(state: &mut AppState) -> (&mut ListCursor, usize) {
    if state.counters.detail {
        let len = selected(state).map_or(0, |h| h.last.counters.len());
        return (&mut state.counters.detail_list, len);
    }
    let len = state.counters.rows.len();
    (&mut state.counters.list, len)
}

fn list_noun(state: &AppState) -> &'static str {
    if state.counters.detail {
        "counters"
    } else {
        "ports"
    }
}

/// The port the cursor is on.
fn selected(state: &AppState) -> Option<&PortHistory> {
    let v = &state.counters;
    v.rows.get(v.list.selected).map(|k| &state.history[k])
}

/// Whether a port is in the sweep shown (a gone one keeps its row, dimmed).
fn present(state: &AppState, key: PortKey) -> bool {
    state
        .fabric()
        .and_then(|f| f.node_by_guid(key.guid))
        .is_some()
}

fn draw_counters(frame: &mut Frame, area: Rect, state: &AppState) {
    if state.sweep.is_none() {
        return no_data(frame, area, state);
    }
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
    if v.detail {
        return draw_all_counters(frame, area, state);
    }
    let jumped = v.rows.iter().filter(|k| state.history[*k].jumped).count();
    let detail_h = if area.height >= 16 { 7 } else { 0 };
    let [table_area, detail_area] =
        Layout::vertical([Constraint::Min(3), Constraint::Length(detail_h)]).areas(area);
    let block = Block::default().borders(Borders::TOP).title(Span::styled(
        format!(
            " Counters: {} ports, {} with new errors, {} ",
            v.rows.len(),
            jumped,
            v.sort.title(&COUNTER_COLUMNS)
        ),
        if jumped > 0 { BAD } else { HEAD },
    ));
    let inner = block.inner(table_area);
    frame.render_widget(block, table_area);
    draw_counter_rows(frame, inner, state);
    if detail_h == 0 {
        return;
    }
    if let Some(key) = v.rows.get(v.list.selected) {
        draw_selected_port(frame, detail_area, state, *key);
    }
}

/// The last `n` rx+tx rates of a port, oldest first.
fn recent_rates(h: &PortHistory, n: u16) -> Vec<u64> {
    let skip = h.rate_history.len().saturating_sub(usize::from(n));
    h.rate_history.iter().skip(skip).copied().collect()
}

/// The fixed columns of the port table: marker, errors, errors/s, rx, tx.
const FIXED: [u16; 5] = [1, 8, 7, 10, 10];

/// One row per port (errors, rates) with its rate history as a sparkline beside it.
fn draw_counter_rows(frame: &mut Frame, inner: Rect, state: &AppState) {
    let v = &state.counters;
    let spark_w: u16 = if inner.width >= 120 { 32 } else { 16 };
    // One blank column between the table and the sparklines.
    let [text_area, _, spark_area] = Layout::horizontal([
        Constraint::Min(10),
        Constraint::Length(1),
        Constraint::Length(spark_w),
    ])
    .areas(inner);
    let port_w = fill_width(text_area.width, &FIXED);
    let height = usize::from(text_area.height.saturating_sub(1));
    let window = v.list.window(v.rows.len(), height);
    let mut rows = Vec::new();
    for (line, i) in window.clone().enumerate() {
        let key = v.rows[i];
        let h = &state.history[&key];
        let mut style = if !present(state, key) {
            DIM
        } else if h.jumped {
            BAD
        } else {
            Style::new()
        };
        if i == v.list.selected {
            style = style.add_modifier(Modifier::REVERSED);
        }
        rows.push(
            Row::new(vec![
                if h.jumped { "▲" } else { " " }.to_string(),
                name_and_port(&for_terminal(&h.name), key.port, port_w),
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
        Paragraph::new(Span::styled("rx+tx history", HEAD)),
        Rect {
            height: 1,
            ..spark_area
        },
    );
    let mut widths = vec![
        Constraint::Length(FIXED[0]),
        Constraint::Length(port_w as u16),
    ];
    widths.extend(FIXED[1..].iter().map(|w| Constraint::Length(*w)));
    let mut headers = vec![String::new()];
    headers.extend(v.sort.headers(&COUNTER_COLUMNS));
    let table = Table::new(rows, widths).header(Row::new(headers).style(HEAD));
    frame.render_widget(table, text_area);
}

/// Where a counter goes among a port's: those that count errors (their causes and the
/// physical layer's too), the ones that counted first; then PortXmitWait; then the error
/// counters at 0; then data, packets and the rest.
fn rank(name: &str, value: u64) -> u8 {
    let kind = counter_kind(name);
    let errors = matches!(
        kind,
        Some(CounterKind::Error | CounterKind::Detail | CounterKind::Physical)
    );
    match (errors, value > 0, kind) {
        (true, true, _) => 0,
        (_, _, Some(CounterKind::Congestion)) => 1,
        (true, false, _) => 2,
        (_, _, Some(CounterKind::Data)) => 3,
        (_, _, Some(CounterKind::Packets)) => 4,
        _ => 5,
    }
}

/// A port's counters in the order [`rank`] gives, each as `name = value` (a saturated one
/// `name ≥ value`, as findings say it), and whether it counted errors.
fn ordered_counters(h: &PortHistory) -> Vec<(String, bool)> {
    let mut all: Vec<(u8, &String, u64)> = h
        .last
        .counters
        .iter()
        .map(|(k, v)| (rank(k, *v), k, *v))
        .collect();
    // Errors that counted: the most first; the others in name order.
    all.sort_by(|a, b| {
        let most = if a.0 == 0 {
            b.2.cmp(&a.2)
        } else {
            std::cmp::Ordering::Equal
        };
        a.0.cmp(&b.0).then(most).then(a.1.cmp(b.1))
    });
    all.into_iter()
        .map(|(rank, k, v)| {
            let value = counter_value_text(v, h.last.saturated.contains(k));
            (format!("{} {value}", for_terminal(k)), rank == 0)
        })
        .collect()
}

/// `name[port]`, rx and tx: the first line about a port.
fn port_heading(state: &AppState, key: PortKey, h: &PortHistory, width: usize) -> Line<'static> {
    let gone = if present(state, key) {
        ""
    } else {
        " (not in the last sweep)"
    };
    let rates = format!(
        "  rx {}  tx {}{gone}",
        format_rate(h.rx_bytes_per_s),
        format_rate(h.tx_bytes_per_s)
    );
    let name = name_and_port(
        &for_terminal(&h.name),
        key.port,
        width.saturating_sub(rates.chars().count()),
    );
    Line::from(vec![Span::styled(name, HEAD), Span::raw(rates)])
}

/// The selected port's counters in columns, as many as fit, and how many more Enter shows.
fn draw_selected_port(frame: &mut Frame, area: Rect, state: &AppState, key: PortKey) {
    let h = &state.history[&key];
    let block = Block::default()
        .borders(Borders::TOP)
        .title(" Selected port ");
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let [head, body] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(inner);
    frame.render_widget(
        Paragraph::new(port_heading(state, key, h, usize::from(head.width))),
        head,
    );
    let counters = ordered_counters(h);
    let cell = counters
        .iter()
        .map(|(t, _)| t.chars().count() + 2)
        .max()
        .unwrap_or(1);
    let columns = (usize::from(body.width) / cell).max(1);
    let slots = columns * usize::from(body.height);
    let (shown, more) = if counters.len() > slots {
        (
            slots.saturating_sub(1),
            counters.len() - slots.saturating_sub(1),
        )
    } else {
        (counters.len(), 0)
    };
    let mut lines: Vec<Line> = Vec::new();
    for row in 0..usize::from(body.height) {
        let mut spans = Vec::new();
        for col in 0..columns {
            let i = row * columns + col;
            if i < shown {
                let (text, counted) = &counters[i];
                let style = if *counted { RED } else { Style::new() };
                spans.push(Span::styled(format!("{text:<cell$}"), style));
            } else if i == shown && more > 0 {
                spans.push(Span::styled(format!("+{more} more: Enter"), DIM));
            }
        }
        lines.push(Line::from(spans));
    }
    frame.render_widget(Paragraph::new(lines), body);
}

/// Every counter of the selected port, one a line, scrolled by the arrow keys.
fn draw_all_counters(frame: &mut Frame, area: Rect, state: &AppState) {
    let v = &state.counters;
    let Some(&key) = v.rows.get(v.list.selected) else {
        return;
    };
    let h = &state.history[&key];
    let counters = ordered_counters(h);
    let block = Block::default().borders(Borders::TOP);
    let inner = block.inner(area);
    let [head, body] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(inner);
    let window = v
        .detail_list
        .window(counters.len(), usize::from(body.height));
    let marks = match (window.start > 0, window.end < counters.len()) {
        (true, true) => " ▲▼",
        (true, false) => " ▲",
        (false, true) => " ▼",
        (false, false) => "",
    };
    frame.render_widget(
        block.title(format!(
            " Counters of the port: {}-{} of {}{marks} ",
            window.start + 1,
            window.end,
            counters.len()
        )),
        area,
    );
    frame.render_widget(
        Paragraph::new(port_heading(state, key, h, usize::from(head.width))),
        head,
    );
    let lines: Vec<Line> = window
        .map(|i| {
            let (text, counted) = &counters[i];
            let mut style = if *counted { RED } else { Style::new() };
            if i == v.detail_list.selected {
                style = style.add_modifier(Modifier::REVERSED);
            }
            Line::styled(text.clone(), style)
        })
        .collect();
    frame.render_widget(Paragraph::new(lines), body);
}
