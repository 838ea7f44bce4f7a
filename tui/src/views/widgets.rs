//! What the views share: the colours, ages, times and rates as text, the screen shown
//! before the first sweep, a link's verdict in words, and [`ViewParts`], what each view
//! gives the rest of the UI.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ibscope_topo::escape::for_terminal;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Wrap};
use ratatui::Frame;

use crate::derive::LinkAssessmentSummary;
use crate::query::Query;
use crate::state::{AppState, ListCursor};

pub const RED: Style = Style::new().fg(Color::Red);
pub const BAD: Style = Style::new().fg(Color::Red).add_modifier(Modifier::BOLD);
pub const DIM: Style = Style::new().fg(Color::DarkGray);
pub const HEAD: Style = Style::new().add_modifier(Modifier::BOLD);
pub const SELECTED: Style = Style::new().add_modifier(Modifier::REVERSED);
pub const OK: Style = Style::new().fg(Color::Green);
pub const WARN: Style = Style::new().fg(Color::Yellow);

/// What a view gives the rest of the UI: each view's file has one, and
/// [`parts`](super::parts) finds it by [`View`](crate::state::View).
pub struct ViewParts {
    /// Its tab in the header and the title of its help.
    pub title: &'static str,
    /// What it shows, for its help screen (its keys come from the key map).
    pub about: &'static [&'static str],
    /// Draws it into the body of the screen.
    pub draw: fn(&mut Frame, Rect, &AppState),
    /// The list its arrow keys move, and that list's length.
    pub list: fn(&mut AppState) -> (&mut ListCursor, usize),
    /// What that list holds, for the footer's hint ("↑↓ nodes").
    pub list_noun: fn(&AppState) -> &'static str,
    /// Whether row `i` of that list shows what `/` looks for (`None`: the view has no
    /// find, its `/` is its own).
    pub matches: Option<fn(&AppState, usize, &Query) -> bool>,
    /// What else a found row selects (the Hosts grid: the found HCA's rail).
    pub found: Option<fn(&mut AppState, &Query)>,
}

/// `text` in at most `width` columns: a long one loses its middle (its head kept longer
/// than its tail: a switch's name is at its start, its model at its end), so both ends
/// stay readable. Every table cuts names with this.
pub fn fit(text: &str, width: usize) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= width {
        return text.to_string();
    }
    let keep = width.saturating_sub(1);
    let tail = keep / 4;
    let head = keep - tail;
    let mut out: String = chars[..head].iter().collect();
    out.push('…');
    out.extend(&chars[chars.len() - tail..]);
    out
}

/// `name[port]` in at most `width` columns: the name [`fit`] to what the port leaves,
/// never the port cut, so both ends of a link stay identifiable at 80 columns.
pub fn name_and_port(name: &str, port: u8, width: usize) -> String {
    let port = format!("[{port}]");
    fit(name, width.saturating_sub(port.chars().count())) + &port
}

/// The width a table's one `Fill` column gets in `total` columns beside columns of
/// `fixed` widths, one space between each two (ratatui's `Table` spacing).
pub fn fill_width(total: u16, fixed: &[u16]) -> usize {
    let gaps = fixed.len() as u16;
    usize::from(total.saturating_sub(fixed.iter().sum::<u16>() + gaps))
}

/// `text` in lines of at most `width` characters, broken at spaces where it can be (a word
/// longer than a line is cut), so that all of it shows: the first line is `width` wide,
/// the others `width - indent` (the caller indents them).
pub fn wrap(text: &str, width: usize, indent: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    let limit = |lines: &Vec<String>| {
        if lines.is_empty() {
            width.max(1)
        } else {
            width.saturating_sub(indent).max(1)
        }
    };
    for word in text.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        loop {
            let room = limit(&lines);
            let used = line.chars().count();
            let sep = usize::from(used > 0);
            if used + sep + word.len() <= room {
                if sep == 1 {
                    line.push(' ');
                }
                line.extend(&word);
                break;
            }
            if used > 0 {
                lines.push(std::mem::take(&mut line));
                continue;
            }
            // A word longer than a whole line: cut it.
            let rest = word.split_off(room);
            lines.push(word.iter().collect());
            word = rest;
        }
    }
    if !line.is_empty() || lines.is_empty() {
        lines.push(line);
    }
    lines
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

pub fn no_data(frame: &mut Frame, area: Rect, state: &AppState) {
    let (text, style) = status_text(state);
    let mut lines = vec![Line::styled(text, style)];
    if let Some(e) = &state.status.last_error {
        lines.push(Line::styled(e.clone(), RED));
    }
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), area);
}

/// A link's verdict as the Links view and the Hosts detail word it.
pub fn verdict_text(v: &LinkAssessmentSummary) -> (String, Style) {
    let why = for_terminal(&v.reasons.join("; "));
    if v.degraded() {
        (format!("degraded: {why}"), RED)
    } else if v.below_norm() {
        (format!("below norm: {why}"), WARN)
    } else {
        ("not degraded".to_string(), DIM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapping_keeps_every_character() {
        let text = "[rail-down] gpu-0006 rail 2: \"MF0;leaf-r2-001:MQM9700/U1\" port 6: Down";
        let lines = wrap(text, 40, 2);
        assert!(lines.len() > 1 && lines[0].chars().count() <= 40);
        assert!(
            lines[1..].iter().all(|l| l.chars().count() <= 38),
            "{lines:?}"
        );
        assert_eq!(lines.join(" "), text);
        // A word longer than the line is cut, not lost.
        assert_eq!(wrap("abcdefghij", 4, 0), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("", 10, 0), [""]);
    }

    #[test]
    fn a_long_name_loses_its_middle_never_its_port() {
        assert_eq!(name_and_port("leaf-1", 4, 20), "leaf-1[4]");
        let short = name_and_port("MF0;leaf-r6-001:MQM9700/U1", 17, 20);
        assert_eq!(short, "MF0;leaf-r6-…/U1[17]");
        assert_eq!(short.chars().count(), 20);
        // No room at all: the port alone.
        assert_eq!(name_and_port("gpu-0003 mlx5_5", 1, 3), "…[1]");
    }
}
