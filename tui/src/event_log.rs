//! The event log: what changed between two consecutive sweeps.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::SystemTime;

use ibscope_topo::namemap::NameMap;
use ibscope_topo::{Fabric, LinkKey, PortKey};

use super::derive::{node_name, port_name, LinkHealth};
use super::source::{Sweep, ERROR_COUNTERS};

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
            text: ibscope_topo::escape::for_terminal(&format!(
                "journal: {}{b}: {}",
                e.a.text(),
                e.detail
            )),
        }
    }
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

/// Every link of a sweep, with whether its health verdict calls it degraded.
fn link_keys(fabric: &Fabric, health: &LinkHealth) -> BTreeMap<LinkKey, bool> {
    fabric
        .links()
        .map(|l| (l.key(), health.is_degraded(l.key())))
        .collect()
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

    let old_links = link_keys(fo, &old.health);
    let new_links = link_keys(fnew, &new.health);
    let why_degraded = |key| degraded_text(fnew, &new.health, names, key);
    for (key, degraded) in &new_links {
        match old_links.get(key) {
            None => push(LogEntryKind::LinkUp, link_text(fnew, names, key)),
            Some(was) if *degraded && !was => push(LogEntryKind::Degraded, why_degraded(key)),
            Some(was) if !degraded && *was => {
                push(LogEntryKind::Recovered, link_text(fnew, names, key))
            }
            Some(_) => {}
        }
    }
    for key in old_links.keys() {
        if !new_links.contains_key(key) {
            push(LogEntryKind::LinkDown, link_text(fo, names, key));
        }
    }
    // A link that shows up already degraded is news too.
    for (key, degraded) in &new_links {
        if *degraded && !old_links.contains_key(key) {
            push(LogEntryKind::Degraded, why_degraded(key));
        }
    }

    // Port state changes on ports present in both (unknown states, as in files, are skipped).
    for (_, n) in fnew.nodes() {
        let Some(oid) = fo.node_by_guid(n.guid) else {
            continue;
        };
        let on = fo.node(oid);
        for p in &n.ports {
            let Some(op) = on.port(p.number) else {
                continue;
            };
            if let (Some(old), Some(new)) = (op.state, p.state) {
                if old != new {
                    push(
                        LogEntryKind::PortState,
                        format!("{}[{}] {old} -> {new}", node_name(n, names), p.number),
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
