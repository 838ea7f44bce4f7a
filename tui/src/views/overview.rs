//! The Overview: the counts, the fabric picture by layer (hops from the nearest CA), the
//! findings.

use ibscope_topo::escape::for_terminal;
use ibscope_topo::findings::{PortNaming, Severity};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;

use super::widgets::{format_time, no_data, wrap, ViewParts, BAD, DIM, HEAD, OK, RED, WARN};
use crate::derive::{FabricSummary, Layer, SwitchChip};
use crate::query::Query;
use crate::source::{Finding, Sweep};
use crate::state::{AppState, ListCursor};

/// What this view gives the screen, the keys and the help.
pub const PARTS: ViewParts = ViewParts {
    title: "Overview",
    about: &[
        "Overview: counts, fabric picture by layer",
        "(layer = hops from the nearest CA), findings.",
        "Red: degraded or down links.",
        "Each finding whole: [kind] host rail: port <->",
        "far end: what is wrong. Enter adds GUIDs, LIDs",
        "and what to do; l and c jump to its link and port.",
    ],
    draw: draw_overview,
    list,
    list_noun,
    matches: Some(matches),
    found: None,
};

/// A finding shows what `/` looks for when it names the port, or its text holds it.
fn matches(state: &AppState, i: usize, q: &Query) -> bool {
    let Some(f) = state.sweep.as_ref().and_then(|s| s.findings.get(i)) else {
        return false;
    };
    f.at.iter().chain(&f.remote).any(|p| q.names_port(p.key())) || q.in_text(&f.text_line())
}

fn list(state: &mut AppState) -> (&mut ListCursor, usize) {
    let len = state.sweep.as_ref().map(|s| s.findings.len()).unwrap_or(0);
    (&mut state.overview_findings, len)
}

fn list_noun(_: &AppState) -> &'static str {
    "findings"
}

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

/// "62 HCAs on 8 servers" (and the fabric's routers): what the CAs are, counted as
/// operators count them.
pub fn hca_count(summary: &FabricSummary, servers: usize) -> String {
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut text = format!(
        "{} on {}",
        plural(summary.cas, "HCA", "HCAs"),
        plural(servers, "server", "servers")
    );
    if summary.routers > 0 {
        text.push_str(&format!(
            ", {}",
            plural(summary.routers, "router", "routers")
        ));
    }
    text
}

/// Lines of the layered fabric picture for `width` columns, top layer first. A layer whose
/// switches do not fit in `max_rows` rows is drawn as one summary line. `servers`: the
/// hosts the CAs make up.
pub fn picture_lines(
    summary: &FabricSummary,
    servers: usize,
    width: u16,
    max_rows: usize,
) -> Vec<Line<'static>> {
    let width = usize::from(width);
    let mut lines: Vec<Line> = Vec::new();
    let top_layer = summary.layers.last().map(|l| l.layer).unwrap_or(0);
    for layer in summary.layers.iter().rev() {
        let (layer_text, aggregated) =
            layer_lines(layer, layer.layer == top_layer, width, max_rows);
        lines.extend(layer_text);
        if aggregated {
            // The summary line already counts the links to the layer below.
            continue;
        }
        let style = if layer.problems_down > 0 { RED } else { DIM };
        let mut text = format!("   │ {} links", layer.links_down);
        if layer.problems_down > 0 {
            text.push_str(&format!(", {} degraded/down", layer.problems_down));
        }
        lines.push(Line::styled(text, style));
    }
    let cas = summary.cas + summary.routers;
    let mut ca = format!(" CA  {}", hca_count(summary, servers));
    if let Some((first, last)) = &summary.ca_names_first_last {
        if cas > 1 {
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
        // Links to the layer below ("down" would read as links that are Down).
        let below = match layer.layer {
            1 => "the CAs".to_string(),
            l => format!("layer {}", l - 1),
        };
        let mut text = format!(
            "{label}layer {}: {} switches, {} links to {below}",
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

/// The two lines above the picture: what the fabric holds and how many links are bad; the
/// SM and where the sweep came from.
fn count_lines(state: &AppState, sweep: &Sweep) -> Vec<Line<'static>> {
    let s = &state.derived.summary;
    let sm = sweep
        .sm
        .as_deref()
        .map(for_terminal)
        .unwrap_or_else(|| "unknown".into());
    let problems = s.degraded + s.down;
    let grid = &state.derived.host_grid;
    // A rail down is a finding (rail-down) whether or not its link is in the fabric: it
    // is counted beside the links down so the two tell the same story.
    let rails_down = match grid.rails_down {
        0 => String::new(),
        1 => ", 1 rail down".to_string(),
        n => format!(", {n} rails down"),
    };
    vec![
        Line::from(vec![
            Span::styled(format!("{} switches", s.switches), HEAD),
            Span::raw(format!(", {}", hca_count(s, grid.servers))),
            Span::raw(if s.aggregation_nodes > 0 {
                format!(", {} aggregation nodes", s.aggregation_nodes)
            } else {
                String::new()
            }),
            Span::raw(format!(", {} links  ", s.links)),
            Span::styled(
                format!("{} degraded, {} down{rails_down}", s.degraded, s.down),
                if problems + grid.rails_down > 0 {
                    BAD
                } else {
                    OK
                },
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
                    format_time(sweep.taken_at),
                    sweep.duration.as_millis()
                ),
                DIM,
            ),
        ]),
    ]
}

/// A finding as the list shows it: its severity, then its whole text (ports named short)
/// wrapped to `width` columns, the lines after the first indented under the text.
pub fn finding_lines(f: &Finding, width: usize) -> Vec<String> {
    const LEAD: usize = 6;
    let text = f.text(PortNaming::Short);
    wrap(&text, width.saturating_sub(LEAD), 0)
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            if i == 0 {
                format!("{:<5} {l}", f.severity.short())
            } else {
                format!("{:LEAD$}{l}", "")
            }
        })
        .collect()
}

pub fn severity_style(s: Severity) -> Style {
    match s {
        Severity::Error => BAD,
        Severity::Warning => RED,
        Severity::Info => Style::new(),
    }
}

/// " Findings (7) ", or which of them show and where the others are when they do not all
/// fit: " Findings 3-5 of 7 ▲▼ ".
fn findings_title(shown: &std::ops::Range<usize>, len: usize) -> String {
    if shown.start == 0 && shown.end == len {
        return format!(" Findings ({len}) ");
    }
    let marks = match (shown.start > 0, shown.end < len) {
        (true, true) => "▲▼",
        (true, false) => "▲",
        _ => "▼",
    };
    format!(
        " Findings {}-{} of {len} {marks} ",
        shown.start + 1,
        shown.end
    )
}

fn draw_overview(frame: &mut Frame, area: Rect, state: &AppState) {
    let Some(sweep) = &state.sweep else {
        return no_data(frame, area, state);
    };
    let s = &state.derived.summary;
    let counts = count_lines(state, sweep);
    let inner_w = area.width.saturating_sub(2);
    let wrapped: Vec<Vec<String>> = sweep
        .findings
        .iter()
        .map(|f| finding_lines(f, usize::from(inner_w)))
        .collect();
    let need = wrapped.iter().map(Vec::len).sum::<usize>().max(1) as u16 + 2;
    // The findings first (what is wrong, and where); the fabric picture gets what they
    // leave when that is enough to draw it.
    let body = area.height.saturating_sub(2);
    let max_pic = body.saturating_sub(need);
    let pic = if max_pic >= 5 {
        // Rows of chips a layer may take: what the picture's height leaves after one
        // label and one connector line per layer and the CA line.
        let layers = s.layers.len().max(1);
        let spare = usize::from(max_pic - 2).saturating_sub(2 * layers + 2);
        let max_rows = (spare / layers).clamp(1, 6);
        picture_lines(s, state.derived.host_grid.servers, inner_w, max_rows)
    } else {
        Vec::new()
    };
    let pic_h = if pic.is_empty() {
        0
    } else {
        (pic.len() as u16).min(max_pic - 2) + 2
    };
    let [counts_area, pic_area, findings_area] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(pic_h),
        Constraint::Min(3),
    ])
    .areas(area);
    frame.render_widget(Paragraph::new(counts), counts_area);
    if pic_h > 0 {
        frame.render_widget(
            Paragraph::new(pic).block(Block::default().borders(Borders::ALL).title(" Fabric ")),
            pic_area,
        );
    }
    let inner = Block::default().borders(Borders::ALL).inner(findings_area);
    let heights: Vec<usize> = wrapped.iter().map(Vec::len).collect();
    let window = state
        .overview_findings
        .window_of(&heights, usize::from(inner.height));
    let block = Block::default()
        .borders(Borders::ALL)
        .title(findings_title(&window, sweep.findings.len()));
    frame.render_widget(block, findings_area);
    if sweep.findings.is_empty() {
        frame.render_widget(Paragraph::new(Span::styled("no findings", OK)), inner);
        return;
    }
    let mut lines: Vec<Line> = Vec::new();
    for i in window {
        let mut style = severity_style(sweep.findings[i].severity);
        if i == state.overview_findings.selected {
            style = style.add_modifier(Modifier::REVERSED);
        }
        lines.extend(wrapped[i].iter().map(|l| Line::styled(l.clone(), style)));
    }
    frame.render_widget(Paragraph::new(lines), inner);
    if state.finding_detail {
        draw_finding_detail(frame, area, state, &sweep.findings);
    }
}

/// The selected finding whole, over the Overview: its text with every port in full (GUID,
/// LID), what its kind means and what to do about it.
fn draw_finding_detail(frame: &mut Frame, body: Rect, state: &AppState, findings: &[Finding]) {
    let i = state.overview_findings.selected;
    let Some(f) = findings.get(i) else {
        return;
    };
    let width = body.width.min(100);
    let text_w = usize::from(width.saturating_sub(2));
    let facts = f.kind.facts();
    let mut lines: Vec<Line> = wrap(&f.text_line(), text_w, 0)
        .into_iter()
        .map(|l| Line::styled(l, severity_style(f.severity)))
        .collect();
    for (label, text) in [
        ("what it means: ", facts.meaning),
        ("what to do: ", facts.fix),
    ] {
        lines.push(Line::raw(""));
        let mut wrapped = wrap(&format!("{label}{text}"), text_w, 0).into_iter();
        if let Some(first) = wrapped.next() {
            let rest = first.strip_prefix(label).unwrap_or(&first).to_string();
            lines.push(Line::from(vec![Span::styled(label, HEAD), Span::raw(rest)]));
        }
        lines.extend(wrapped.map(Line::raw));
    }
    let height = (lines.len() as u16 + 2).min(body.height);
    let area = Rect {
        x: body.x + (body.width - width) / 2,
        y: body.y + (body.height - height) / 2,
        width,
        height,
    };
    frame.render_widget(Clear, area);
    frame.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(format!(
            " Finding {} of {} ({}) ",
            i + 1,
            findings.len(),
            f.severity.as_str()
        ))),
        area,
    );
}
