//! A health report as `ibscope links` prints it: a line per link with both ends, its rate
//! and state, what it could run at and why it is a finding; fabric names escaped.

use std::fmt::Write;

use ibscope_mad::attr::link::Rate;
use ibscope_mad::codes::guid;

use crate::escape::{for_terminal, quoted_for_terminal};
use crate::health::{HealthReport, LinkAssessment, LinkEnd};

/// `writeln!` into a `String`, which cannot fail to take it.
macro_rules! w {
    ($out:expr, $($arg:tt)*) => {{ let _ = writeln!($out, $($arg)*); }};
}

fn end_text(e: &LinkEnd) -> String {
    format!(
        "{} {} ({}) lid {} port {}",
        e.at.node.kind.as_str(),
        quoted_for_terminal(&e.at.node.name),
        guid::text(e.at.node.guid),
        e.at.lid,
        e.at.port
    )
}

/// One line per link: `A <=> B  4xHDR Active/LinkUp  (could be 4xHDR)  [DEGRADED: ...]`.
pub fn link_line(l: &LinkAssessment) -> String {
    let state = if l.a.state == l.b.state && l.a.phys_state == l.b.phys_state {
        l.a.state_text()
    } else {
        format!("{} : {}", l.a.state_text(), l.b.state_text())
    };
    let mut line = format!(
        "{}  <=>  {}  {} {}",
        end_text(&l.a),
        end_text(&l.b),
        Rate::text_of(l.active),
        state
    );
    if let Some(c) = l.could_be {
        if Some(c) != l.active {
            line.push_str(&format!("  (could be {c})"));
        }
    }
    if l.loopback {
        line.push_str("  LOOPBACK");
    }
    if l.verdict.is_finding() {
        // BELOW NORM: a topology file, below the norm, but maybe all the hardware can do.
        line.push_str(&format!(
            "  {}: {}",
            l.verdict.label(),
            for_terminal(&l.reasons.join("; "))
        ));
    }
    if !l.notes.is_empty() {
        line.push_str(&format!("  (note: {})", for_terminal(&l.notes.join("; "))));
    }
    line
}

/// `links`' text: the norms, a line per link, then the ports up but not Active or down.
pub fn report_text(report: &HealthReport) -> String {
    let mut text = String::new();
    let out = &mut text;
    let norm = Rate::text_of;
    w!(
        out,
        "# {} {}: switch-switch {}, ca-switch {}",
        report.links.len(),
        if report.norms.given {
            "links; expected rate"
        } else {
            "links; fabric norm"
        },
        norm(report.norms.switch_switch),
        norm(report.norms.ca_switch)
    );
    for l in &report.links {
        w!(out, "{}", link_line(l));
    }
    let ports = report.up_not_active.iter().chain(report.down.iter());
    for p in ports {
        let remote = p.remote.as_ref().map_or_else(
            || "no link".to_string(),
            |r| format!("to {}", r.report_text()),
        );
        w!(
            out,
            "{} {} ({}), {}",
            p.at.report_text(),
            p.state_text(),
            p.condition.as_str(),
            remote
        );
    }
    text
}
