//! The event log: what changed between two consecutive sweeps.

use std::collections::{BTreeSet, HashMap};
use std::time::SystemTime;

use ibscope_mad::attr::PortState;
use ibscope_topo::changes::{link_changes, LinkChange};
use ibscope_topo::namemap::NameMap;
use ibscope_topo::{End, Fabric, LinkKey, PortKey};

use super::derive::{node_name, port_name, LinkHealth};
use super::source::{Sweep, ERROR_COUNTERS};
use super::table_sort::{Column, TableSort};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LogEntryKind {
    LinkUp,
    LinkDown,
    PortState,
    Degraded,
    Recovered,
    CounterJump,
    SmChange,
    NodeAdded,
    NodeRemoved,
    SweepFailed,
    Info,
}

impl LogEntryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LogEntryKind::LinkUp => "link up",
            LogEntryKind::LinkDown => "link down",
            LogEntryKind::PortState => "port state",
            LogEntryKind::Degraded => "degraded",
            LogEntryKind::Recovered => "recovered",
            LogEntryKind::CounterJump => "errors",
            LogEntryKind::SmChange => "SM",
            LogEntryKind::NodeAdded => "node added",
            LogEntryKind::NodeRemoved => "node gone",
            LogEntryKind::SweepFailed => "sweep failed",
            LogEntryKind::Info => "info",
        }
    }
    /// Whether this is bad news (drawn in red).
    pub fn is_bad(self) -> bool {
        matches!(
            self,
            LogEntryKind::LinkDown
                | LogEntryKind::Degraded
                | LogEntryKind::CounterJump
                | LogEntryKind::NodeRemoved
                | LogEntryKind::SweepFailed
        )
    }
}

/// One log entry. `text` is already safe for a terminal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntry {
    pub at: SystemTime,
    pub kind: LogEntryKind,
    pub text: String,
}

impl LogEntry {
    /// A journal's event (`serve --journal`, `tui --journal`) as the log shows it, marked
    /// as coming from the journal and escaped for the terminal.
    pub fn from_journal(e: &ibscope_topo::journal::Event) -> LogEntry {
        use ibscope_topo::journal::EventKind as J;
        let kind = match e.kind {
            J::LinkDown => LogEntryKind::LinkDown,
            J::LinkUp => LogEntryKind::LinkUp,
            J::PortState => LogEntryKind::PortState,
            J::WidthDownshift | J::SpeedDownshift => LogEntryKind::Degraded,
            J::LinkDowned | J::LinkErrorRecovery => LogEntryKind::CounterJump,
        };
        let b =
            e.b.as_ref()
                .map_or_else(String::new, |b| format!(" <-> {}", b.text()));
        LogEntry {
            at: std::time::UNIX_EPOCH + std::time::Duration::from_secs(e.time),
            kind,
            text: format!(
                "journal: {}{b}: {}",
                e.a.text(),
                ibscope_topo::escape::for_terminal(&e.detail)
            ),
        }
    }
}

/// The Events table's columns.
pub const EVENT_COLUMNS: [Column; 3] = [
    Column::down("UTC"),
    Column::up("Event"),
    Column::up("Detail"),
];

/// Indexes into `events` (newest first) in `sort` order ([`EVENT_COLUMNS`]; ties newest
/// first).
pub fn event_order(events: &std::collections::VecDeque<LogEntry>, sort: TableSort) -> Vec<usize> {
    let natural = sort.natural(&EVENT_COLUMNS);
    let mut out: Vec<usize> = (0..events.len()).collect();
    // Stable: equal keys stay newest first.
    out.sort_by(|&x, &y| {
        let (a, b) = (&events[x], &events[y]);
        let by_column = match sort.column {
            1 => a.kind.as_str().cmp(b.kind.as_str()),
            2 => a.text.cmp(&b.text),
            _ => a.at.cmp(&b.at),
        };
        sort.apply(natural, by_column)
    });
    out
}

/// The last `keep` events of the journal at `path`, for the Events view; none when it
/// does not exist yet or cannot be read (the UI starts all the same).
pub fn journal_history(path: Option<&std::path::Path>, keep: usize) -> Vec<LogEntry> {
    let Some(Ok((events, _))) = path.map(ibscope_topo::journal::read) else {
        return Vec::new();
    };
    let from = events.len().saturating_sub(keep);
    events[from..].iter().map(LogEntry::from_journal).collect()
}

/// A port's logical state, where known.
fn port_state(fabric: &Fabric, end: End) -> Option<PortState> {
    fabric.node(end.node).port(end.port).and_then(|p| p.state)
}

/// "a[1] <-> b[2]: why", for a link that became (or showed up) degraded.
fn degraded_text(
    fabric: &Fabric,
    health: &LinkHealth,
    names: Option<&NameMap>,
    key: &LinkKey,
) -> String {
    let why = health
        .verdict(*key)
        .map(|v| v.reasons.join("; "))
        .unwrap_or_default();
    format!("{}: {why}", link_text(fabric, names, key))
}

fn link_text(fabric: &Fabric, names: Option<&NameMap>, key: &LinkKey) -> String {
    format!(
        "{} <-> {}",
        port_name(fabric, names, key.0),
        port_name(fabric, names, key.1)
    )
}

/// Events from `old` to `new`, stamped with `new.taken_at`.
pub fn diff(old: &Sweep, new: &Sweep, names: Option<&NameMap>) -> Vec<LogEntry> {
    let at = new.taken_at;
    let mut out = Vec::new();
    let mut push = |kind, text| out.push(LogEntry { at, kind, text });
    let (fo, fnew) = (&*old.fabric, &*new.fabric);

    let old_nodes: BTreeSet<u64> = fo.nodes().map(|(_, n)| n.guid).collect();
    let new_nodes: BTreeSet<u64> = fnew.nodes().map(|(_, n)| n.guid).collect();
    for g in new_nodes.difference(&old_nodes) {
        if let Some(id) = fnew.node_by_guid(*g) {
            push(
                LogEntryKind::NodeAdded,
                format!("{} ({g:#018x})", node_name(fnew.node(id), names)),
            );
        }
    }
    for g in old_nodes.difference(&new_nodes) {
        if let Some(id) = fo.node_by_guid(*g) {
            push(
                LogEntryKind::NodeRemoved,
                format!("{} ({g:#018x})", node_name(fo.node(id), names)),
            );
        }
    }

    let links = link_changes(fo, fnew);
    let degraded = |key: &LinkKey| new.health.is_degraded(*key);
    let why_degraded = |key| degraded_text(fnew, &new.health, names, key);
    for (key, change) in &links {
        match change {
            LinkChange::New { .. } => push(LogEntryKind::LinkUp, link_text(fnew, names, key)),
            LinkChange::Kept { .. } => match (old.health.is_degraded(*key), degraded(key)) {
                (false, true) => push(LogEntryKind::Degraded, why_degraded(key)),
                (true, false) => push(LogEntryKind::Recovered, link_text(fnew, names, key)),
                _ => {}
            },
            LinkChange::Gone { .. } => {}
        }
    }
    for (key, change) in &links {
        if let LinkChange::Gone { .. } = change {
            push(LogEntryKind::LinkDown, link_text(fo, names, key));
        }
    }
    // A link that shows up already degraded is news too.
    for (key, change) in &links {
        if matches!(change, LinkChange::New { .. }) && degraded(key) {
            push(LogEntryKind::Degraded, why_degraded(key));
        }
    }

    // The logical state of the ends of links in both sweeps (unknown states, as in files,
    // are skipped); a link that went or came is news enough about its ports.
    for (_, change) in &links {
        let LinkChange::Kept { old: o, new: n } = change else {
            continue;
        };
        for (oe, ne) in [(o.0, n.0), (o.1, n.1)] {
            if let (Some(was), Some(now)) = (port_state(fo, oe), port_state(fnew, ne)) {
                if was != now {
                    let node = node_name(fnew.node(ne.node), names);
                    push(
                        LogEntryKind::PortState,
                        format!("{node}[{}] {was} -> {now}", ne.port),
                    );
                }
            }
        }
    }

    // Error counters that went up.
    let old_counters: HashMap<PortKey, &super::source::PortCounterSample> =
        old.counters.iter().map(|c| (c.at, c)).collect();
    for c in &new.counters {
        let Some(prev) = old_counters.get(&c.at) else {
            continue;
        };
        let mut rises = Vec::new();
        for name in ERROR_COUNTERS {
            if let (Some(&now), Some(&before)) = (c.counters.get(*name), prev.counters.get(*name)) {
                if now > before {
                    rises.push(format!("{name} +{}", now - before));
                }
            }
        }
        if !rises.is_empty() {
            push(
                LogEntryKind::CounterJump,
                format!("{}: {}", port_name(fnew, names, c.at), rises.join(", ")),
            );
        }
    }

    if old.sm != new.sm {
        let show = |s: &Option<String>| {
            s.as_deref()
                .map(ibscope_topo::escape::for_terminal)
                .unwrap_or_else(|| "none".into())
        };
        push(
            LogEntryKind::SmChange,
            format!("master SM {} -> {}", show(&old.sm), show(&new.sm)),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibscope_topo::ibnd;

    const NET: &str = "Switch 8 \"Switch1\"\n[1] \"Hca1\"[1]\n[2] \"Hca2\"[2]\n\n\
                       Hca 2 \"Hca1\"\n[1] \"Switch1\"[1]\n\nHca 2 \"Hca2\"\n[2] \"Switch1\"[2]\n";

    /// `text` with every port in `state`.
    fn sweep(text: &str, state: PortState, at: SystemTime) -> Sweep {
        let mut fabric = ibnd::parse(text).unwrap();
        let ids: Vec<_> = fabric.nodes().map(|(id, _)| id).collect();
        for id in ids {
            for p in &mut fabric.node_mut(id).ports {
                p.state = Some(state);
            }
        }
        Sweep::from_fabric(fabric, at)
    }

    #[test]
    fn a_link_that_went_is_one_entry_and_a_kept_links_port_state_another() {
        let t0 = SystemTime::UNIX_EPOCH;
        let t1 = t0 + std::time::Duration::from_secs(5);
        let before = sweep(NET, PortState::Active, t0);
        let without_hca2 = NET
            .replace("[2] \"Hca2\"[2]\n", "")
            .replace("[2] \"Switch1\"[2]\n", "");
        let after = sweep(&without_hca2, PortState::Armed, t1);
        let entries = diff(&before, &after, None);
        let texts: Vec<(LogEntryKind, &str)> =
            entries.iter().map(|e| (e.kind, e.text.as_str())).collect();
        assert!(
            texts.contains(&(LogEntryKind::LinkDown, "Switch1[2] <-> Hca2[2]"))
                || texts.contains(&(LogEntryKind::LinkDown, "Hca2[2] <-> Switch1[2]")),
            "{texts:?}"
        );
        // Both ends of the link that stayed changed state; the link that went says enough
        // about its own ports.
        let states: Vec<&str> = texts
            .iter()
            .filter(|(k, _)| *k == LogEntryKind::PortState)
            .map(|(_, t)| *t)
            .collect();
        assert_eq!(states.len(), 2, "{texts:?}");
        assert!(
            states.iter().all(|t| t.ends_with("Active -> Armed")),
            "{states:?}"
        );
        assert!(
            states.iter().any(|t| t.starts_with("Switch1[1]")),
            "{states:?}"
        );
        assert!(
            states.iter().any(|t| t.starts_with("Hca1[1]")),
            "{states:?}"
        );
        assert!(entries.iter().all(|e| e.at == t1));
    }
}
