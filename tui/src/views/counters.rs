//! The Counters view: each port's errors and rates since the UI opened, and its history.

use ibscope_topo::escape::for_terminal;
use ibscope_topo::Fabric;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Sparkline, Table, Wrap};
use ratatui::Frame;

use super::widgets::{format_rate, no_data, ViewParts, BAD, HEAD, RED, WARN};
use crate::derive::port_name;
use crate::source::ERROR_COUNTERS;
use crate::state::{AppState, ListCursor, PortHistory};

/// What this view gives the screen, the keys and the help.
pub const PARTS: ViewParts = ViewParts {
    title: "Counters",
    about: &[
        "▲ bold red    error counters rose since the UI opened",
        "Sparkline: rx+tx data rate, one bar per sweep.",
    ],
    draw: draw_counters,
    list,
    list_noun,
};

fn list(state: &mut AppState) -> (&mut ListCursor, usize) {
    let len = state.counters.rows.len();
    (&mut state.counters.list, len)
}

fn list_noun(_: &AppState) -> &'static str {
    "ports"
}

fn draw_counters(frame: &mut Frame, area: Rect, state: &AppState) {
    let Some(sweep) = &state.sweep else {
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
    draw_counter_rows(frame, inner, state, &sweep.fabric);
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
