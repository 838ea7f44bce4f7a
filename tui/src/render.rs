//! The screen: the header (a tab per view, the fabric, the sweep's status), the body the
//! view shown draws, the footer's key hints and the help. Only the rows that fit are
//! formatted; everything sorted or counted was done when the sweep arrived. Every fabric
//! string is escaped (`derive::node_name`, `escape::for_terminal`).

use ibscope_topo::escape::for_terminal;
use ratatui::layout::{Alignment, Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;

use crate::keymap;
use crate::state::{AppState, View};
use crate::views;
use crate::views::widgets::{status_text, wrap, DIM, HEAD, SELECTED};

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
    (views::parts(state.view).draw)(frame, body, state);
    draw_footer(frame, footer, state);
    if state.help {
        draw_help(frame, body, state);
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
    let full: u16 = View::ALL
        .iter()
        .map(|v| views::parts(*v).title.len() as u16 + 4)
        .sum();
    let compact = full + status_w > area.width;
    let mut spans = Vec::new();
    for (i, v) in View::ALL.iter().enumerate() {
        let text = if compact {
            format!("{}{}", i + 1, views::parts(*v).title)
        } else {
            format!(" {} {} ", i + 1, views::parts(*v).title)
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

fn help_lines(view: View) -> Vec<String> {
    let mut lines = keymap::help_lines(view);
    let about = views::parts(view).about;
    if !about.is_empty() && lines.last().is_some_and(|l| !l.is_empty()) {
        lines.push(String::new());
    }
    lines.extend(about.iter().map(|l| l.to_string()));
    lines
}

/// The help over the body: every key of the view and what it shows, each line wrapped
/// under its text (a key's description under the description); the arrow keys scroll it
/// when it is taller than the screen, with ▲ ▼ in its title.
fn draw_help(frame: &mut Frame, body: Rect, state: &AppState) {
    let w = 78.min(body.width);
    let text_w = usize::from(w.saturating_sub(2));
    let mut lines: Vec<String> = Vec::new();
    for line in help_lines(state.view) {
        // A key's line: its keys in 14 columns, its description wrapped beside them.
        let indent = if line.chars().nth(13).is_some_and(|c| c == ' ') && !line.starts_with(' ') {
            14
        } else {
            0
        };
        let mut wrapped = wrap(&line, text_w, indent).into_iter();
        lines.extend(wrapped.next());
        lines.extend(wrapped.map(|l| format!("{:indent$}{l}", "")));
    }
    let h = (lines.len() as u16 + 2).min(body.height);
    let inner_h = usize::from(h.saturating_sub(2));
    let top = state.help_scroll.min(lines.len().saturating_sub(inner_h));
    let marks = match (top > 0, top + inner_h < lines.len()) {
        (true, true) => " ▲▼",
        (true, false) => " ▲",
        (false, true) => " ▼",
        (false, false) => "",
    };
    let area = Rect {
        x: body.x + (body.width - w) / 2,
        y: body.y + (body.height - h) / 2,
        width: w,
        height: h,
    };
    frame.render_widget(Clear, area);
    let text: Vec<Line> = lines
        .into_iter()
        .skip(top)
        .take(inner_h)
        .map(Line::raw)
        .collect();
    frame.render_widget(
        Paragraph::new(text).block(
            Block::default()
                .borders(Borders::ALL)
                .title(format!(" Help: {}{marks} ", views::parts(state.view).title)),
        ),
        area,
    );
}
