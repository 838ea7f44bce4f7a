//! The event journal: what changed between two discoveries of a fabric (links down and up,
//! port state changes, width and speed downshifts), as JSON Lines appended to a file that
//! is rotated by size; read back with filters; and the `link-flapping` rule over it.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::changes::{link_changes, LinkChange};
pub use crate::counters::FlapLimits;
use crate::findings::{Finding, FindingKind};
use crate::hosts::Hosts;
use crate::model::{End, Fabric, Port};
use crate::namemap::{display_name, NameMap};

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// A link of the previous discovery is gone.
    LinkDown,
    /// A link the previous discovery did not have.
    LinkUp,
    /// A port's logical state changed (Active to Init, ...).
    PortState,
    WidthDownshift,
    SpeedDownshift,
    /// A port's LinkDownedCounter rose between two counter sweeps (`count`: by how much):
    /// the link went down and retrained, perhaps too fast for a discovery to see.
    LinkDowned,
    /// A port's LinkErrorRecoveryCounter rose (`count`): the link retrained without going
    /// down.
    LinkErrorRecovery,
}

/// One end of the link an event is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventEnd {
    pub node: String,
    pub guid: String,
    pub port: u8,
    /// The server of an HCA end (from its NodeDescription, see `ibscope hosts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Its rail, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rail: Option<u8>,
}

/// One event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Seconds since the Unix epoch.
    pub time: u64,
    /// The same, RFC 3339 UTC, for people reading the file.
    pub at: String,
    pub kind: EventKind,
    pub a: EventEnd,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub b: Option<EventEnd>,
    pub detail: String,
    /// How many times a counter event counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// The fabric it happened in, when the journal's writer watches several. Journals
    /// written before it was an object hold its name as a string, read as that name.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "fabric_or_name"
    )]
    pub fabric: Option<crate::model::FabricId>,
}

/// An event's fabric: the identity object, or a name as older journals wrote it.
fn fabric_or_name<'de, D>(d: D) -> Result<Option<crate::model::FabricId>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Written {
        Name(String),
        Id(crate::model::FabricId),
    }
    Ok(match Option::<Written>::deserialize(d)? {
        Some(Written::Name(name)) if name.is_empty() => None,
        Some(Written::Name(name)) => Some(crate::model::FabricId::named(name)),
        Some(Written::Id(id)) => Some(id),
        None => None,
    })
}

impl Event {
    /// One line as `ibscope events` prints it, escaped for a terminal.
    pub fn line(&self) -> String {
        let b = self
            .b
            .as_ref()
            .map_or_else(String::new, |b| format!(" <-> {}", b.text()));
        let kind = serde_json::to_value(self.kind).unwrap_or_default();
        format!(
            "{}  {:<19} {}{b}  {}",
            self.at,
            kind.as_str().unwrap_or("?"),
            self.a.text(),
            crate::escape::for_terminal(&self.detail)
        )
    }
}

/// `NODE[PORT]` (as events and reports print an end, quotes and all), `NODE:PORT` or
/// `NODE`; a NodeDescription may hold colons, so only a number after the last one is a
/// port.
pub fn split_link(text: &str) -> (&str, Option<u8>) {
    let (node, port) = crate::resolve::split_name_port(text);
    if port.is_some() {
        return (node, port);
    }
    match node.rsplit_once(':') {
        Some((name, port)) => match port.parse::<u8>() {
            Ok(p) => (name, Some(p)),
            Err(_) => (node, None),
        },
        None => (node, None),
    }
}

/// Keep the events of the last `since` (before `now`) and of the link `link` names
/// (`NODE[:PORT]`, see [`touches`]).
pub fn select(
    events: &mut Vec<Event>,
    since: Option<Duration>,
    link: Option<&str>,
    now: SystemTime,
) {
    if let Some(since) = since {
        let from = seconds(now).saturating_sub(since.as_secs());
        events.retain(|e| e.time >= from);
    }
    if let Some(link) = link {
        let (node, port) = split_link(link);
        events.retain(|e| touches(e, node, port));
    }
}

impl EventEnd {
    /// `"node"[port]`, with `(host, rail R)` for an HCA end, escaped for a terminal (the
    /// node quoted as every report quotes it).
    pub fn text(&self) -> String {
        let node = crate::escape::quoted_for_terminal(&self.node);
        let mut t = format!("{node}[{}]", self.port);
        if let Some(host) = &self.host {
            t.push_str(&format!(" ({}", crate::escape::for_terminal(host)));
            if let Some(r) = self.rail {
                t.push_str(&format!(", rail {r}"));
            }
            t.push(')');
        }
        t
    }
}

fn seconds(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

fn end_of(fabric: &Fabric, names: Option<&NameMap>, hosts: &Hosts, end: End) -> EventEnd {
    let node = fabric.node(end.node);
    let label = hosts.label(crate::model::PortKey {
        guid: node.guid,
        port: end.port,
    });
    EventEnd {
        node: display_name(node, names).to_string(),
        guid: ibscope_mad::codes::guid::text(node.guid),
        port: end.port,
        host: label.map(|(h, _)| h.to_string()),
        rail: label.and_then(|(_, r)| r),
    }
}

fn port_of(fabric: &Fabric, end: End) -> Option<&Port> {
    fabric.node(end.node).port(end.port)
}

/// The events between two discoveries of one fabric, at `now`.
pub fn changes(old: &Fabric, new: &Fabric, names: Option<&NameMap>, now: SystemTime) -> Vec<Event> {
    let time = seconds(now);
    let at = humantime::format_rfc3339_seconds(now).to_string();
    let (old_hosts, new_hosts) = (Hosts::group(old, names), Hosts::group(new, names));
    let event = |kind, fabric: &Fabric, (a, b): (End, End), detail: String| {
        let hosts = if std::ptr::eq(fabric, old) {
            &old_hosts
        } else {
            &new_hosts
        };
        Event {
            time,
            at: at.clone(),
            kind,
            a: end_of(fabric, names, hosts, a),
            b: Some(end_of(fabric, names, hosts, b)),
            detail,
            count: None,
            fabric: None,
        }
    };
    let mut out = Vec::new();
    for (_, change) in link_changes(old, new) {
        match change {
            LinkChange::Gone { old: ends } => {
                out.push(event(EventKind::LinkDown, old, ends, "link down".into()))
            }
            LinkChange::New { new: ends } => {
                out.push(event(EventKind::LinkUp, new, ends, "link up".into()))
            }
            LinkChange::Kept { old: o, new: n } => {
                for (oe, ne) in [(o.0, n.0), (o.1, n.1)] {
                    let (Some(op), Some(np)) = (port_of(old, oe), port_of(new, ne)) else {
                        continue;
                    };
                    let pair = if ne == n.0 { n } else { (n.1, n.0) };
                    if let (Some(ow), Some(nw)) = (op.width_active, np.width_active) {
                        if nw.lanes() < ow.lanes() {
                            out.push(event(
                                EventKind::WidthDownshift,
                                new,
                                pair,
                                format!("width {ow} -> {nw}"),
                            ));
                        }
                    }
                    if let (Some(os), Some(ns)) = (op.speed_active, np.speed_active) {
                        if ns < os {
                            out.push(event(
                                EventKind::SpeedDownshift,
                                new,
                                pair,
                                format!("speed {os} -> {ns}"),
                            ));
                        }
                    }
                    if let (Some(os), Some(ns)) = (op.state, np.state) {
                        if os != ns {
                            out.push(event(
                                EventKind::PortState,
                                new,
                                pair,
                                format!("state {os} -> {ns}"),
                            ));
                        }
                    }
                }
            }
        }
    }
    out
}

/// Where the journal is written and when it is rotated: at `max_bytes` the file becomes
/// `PATH.1` (the one before is dropped) and a new one starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalFile {
    pub path: PathBuf,
    pub max_bytes: u64,
}

/// The journal's default size before rotation.
pub const DEFAULT_MAX_BYTES: u64 = 16 << 20;

fn rotated(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".1");
    PathBuf::from(p)
}

impl JournalFile {
    /// The journal at `path`, rotated at [`DEFAULT_MAX_BYTES`].
    pub fn new(path: PathBuf) -> JournalFile {
        JournalFile {
            path,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
    /// Append `events`, one JSON object a line, rotating first when the file is full.
    pub fn append(&self, events: &[Event]) -> std::io::Result<()> {
        if events.is_empty() {
            return Ok(());
        }
        let mut text = Vec::new();
        for e in events {
            serde_json::to_writer(&mut text, e)?;
            text.push(b'\n');
        }
        let size = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        if size > 0 && size + text.len() as u64 > self.max_bytes {
            std::fs::rename(&self.path, rotated(&self.path))?;
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        f.write_all(&text)
    }
}

/// Why a journal could not be read: the file (through [`crate::input`]), or nothing in it.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error(transparent)]
    Input(#[from] crate::input::InputError),
    #[error("journal {0}: no such file (nor its rotated FILE.1)")]
    Missing(String),
    #[error("journal {name} holds no event{}", skipped_text(*.skipped))]
    Empty { name: String, skipped: usize },
}

fn skipped_text(skipped: usize) -> String {
    match skipped {
        0 => String::new(),
        n => format!(" ({n} line(s) that are not events)"),
    }
}

/// The journal's events, the rotated file's first; with the count of lines that were not
/// events (a line cut short by a crash, garbage), which are skipped. Each file is read
/// through [`crate::input`]; a journal with no event at all is an error, so that nothing
/// is judged on it.
pub fn read(path: &Path) -> Result<(Vec<Event>, usize), JournalError> {
    use crate::input::InputError;
    let mut events = Vec::new();
    let mut skipped = 0;
    let mut any = false;
    let files = if crate::input::is_stdin(path) {
        vec![path.to_path_buf()]
    } else {
        vec![rotated(path), path.to_path_buf()]
    };
    for p in files {
        let text = match crate::input::read_text(&p, "journal") {
            Ok(t) => t,
            Err(InputError::Missing { .. }) => continue,
            Err(e) => return Err(e.into()),
        };
        any = true;
        for line in text.lines() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Event>(line) {
                Ok(e) => events.push(e),
                Err(_) => skipped += 1,
            }
        }
    }
    let name = crate::input::display_name(path);
    if !any {
        return Err(JournalError::Missing(name));
    }
    if events.is_empty() {
        return Err(JournalError::Empty { name, skipped });
    }
    Ok((events, skipped))
}

/// The warning a reader of the journal at `path` gives for the lines it skipped (none
/// when it skipped none).
pub fn skipped_warning(path: &Path, skipped: usize) -> Option<String> {
    (skipped > 0).then(|| {
        format!(
            "warning: {skipped} line(s) of the journal {} are not events (skipped)",
            crate::escape::for_terminal(&crate::input::display_name(path))
        )
    })
}

/// A duration as people write it: `30m`, `1h`, `2d 4h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("{text:?} is not a duration such as 30m or 1h: {e}"))
}

/// Whether an event is about `node` (a name or NodeDescription, whole or short, elided as
/// the TUI draws it, its server's hostname, or a GUID) and, when given, `port`.
pub fn touches(e: &Event, node: &str, port: Option<u8>) -> bool {
    use crate::resolve::{fits_elided, is_short_name_of};
    let node = node.trim();
    let guid = node
        .strip_prefix("0x")
        .and_then(|h| u64::from_str_radix(h, 16).ok());
    let same = |end: &EventEnd| {
        let named = end.node == node
            || end.host.as_deref() == Some(node)
            || is_short_name_of(node, &end.node)
            || fits_elided(node, &end.node)
            || guid.is_some_and(|g| ibscope_mad::codes::guid::text(g) == end.guid);
        named && port.map_or(true, |p| p == end.port)
    };
    same(&e.a) || e.b.as_ref().is_some_and(same)
}

/// The counters whose rise is an event.
const COUNTER_EVENTS: [(&str, EventKind, &str); 2] = [
    ("LinkDownedCounter", EventKind::LinkDowned, "LinkDowned"),
    (
        "LinkErrorRecoveryCounter",
        EventKind::LinkErrorRecovery,
        "LinkErrorRecovery",
    ),
];

fn end_of_ref(p: &crate::model::refs::PortRef) -> EventEnd {
    EventEnd {
        node: p.node.name.to_string(),
        guid: ibscope_mad::codes::guid::text(p.node.guid),
        port: p.port,
        host: p.host.clone(),
        rail: p.rail,
    }
}

/// The LinkDowned and LinkErrorRecovery rises between two counter sweeps of one fabric,
/// one event a port (a counter that went back was reset: no event).
pub fn counter_changes(
    before: &crate::counters::Sample,
    after: &crate::counters::Sample,
    now: SystemTime,
) -> Vec<Event> {
    let old: HashMap<crate::model::PortKey, &crate::counters::PortSample> =
        before.ports.iter().map(|p| (p.at.key(), p)).collect();
    let at = humantime::format_rfc3339_seconds(now).to_string();
    let mut out = Vec::new();
    for port in &after.ports {
        let Some(prev) = old.get(&port.at.key()) else {
            continue;
        };
        for (counter, kind, short) in COUNTER_EVENTS {
            let (Some(was), Some(is)) = (prev.reading(counter), port.reading(counter)) else {
                continue;
            };
            if is.value <= was.value {
                continue;
            }
            let rise = is.value - was.value;
            out.push(Event {
                time: seconds(now),
                at: at.clone(),
                kind,
                a: end_of_ref(&port.at),
                b: port.remote.as_ref().map(end_of_ref),
                detail: format!("{short} rose by {rise} (to {})", is.value),
                count: Some(rise),
                fabric: None,
            });
        }
    }
    out
}

/// A link by its two ends' (GUID text, port), in one order.
type LinkEndTexts = (String, u8, String, u8);

/// Fill in the host and rail of event ends that are HCA ports of `hosts` (counter events
/// name ports as the sample did, which may not carry them).
pub fn label_ends(events: &mut [Event], hosts: &Hosts) {
    for e in events {
        for end in std::iter::once(&mut e.a).chain(e.b.as_mut()) {
            if end.host.is_some() {
                continue;
            }
            let Some(guid) = ibscope_mad::codes::guid::parse(&end.guid) else {
                continue;
            };
            if let Some((host, rail)) = hosts.label(crate::model::PortKey {
                guid,
                port: end.port,
            }) {
                end.host = Some(host.to_string());
                end.rail = rail;
            }
        }
    }
}

/// The two ends of an event's link, in one order whichever end it names first.
fn link_key(e: &Event) -> Option<LinkEndTexts> {
    let b = e.b.as_ref()?;
    let (x, y) = ((e.a.guid.clone(), e.a.port), (b.guid.clone(), b.port));
    Some(if x <= y {
        (x.0, x.1, y.0, y.1)
    } else {
        (y.0, y.1, x.0, x.1)
    })
}

/// Links whose LinkDowned rose by more than `limits.link_downed_per_day` within 24 hours
/// (as either end counted it: both ends count the same downs).
fn downed_per_day(events: &[Event], limits: FlapLimits, fabric: Option<&Fabric>) -> Vec<Finding> {
    const DAY: u64 = 24 * 3600;
    let mut rises: BTreeMap<LinkEndTexts, BTreeMap<(String, u8), Vec<&Event>>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.kind == EventKind::LinkDowned) {
        let Some(key) = link_key(e) else { continue };
        rises
            .entry(key)
            .or_default()
            .entry((e.a.guid.clone(), e.a.port))
            .or_default()
            .push(e);
    }
    let mut found = Vec::new();
    for by_end in rises.values() {
        let mut worst: Option<(u64, &Event)> = None;
        for list in by_end.values() {
            let mut list = list.clone();
            list.sort_by_key(|e| e.time);
            for i in 0..list.len() {
                let in_day = list[i..]
                    .iter()
                    .take_while(|e| e.time - list[i].time <= DAY);
                let sum: u64 = in_day.clone().filter_map(|e| e.count).sum();
                let last = in_day.last().expect("the first is in its own day");
                if worst.map_or(true, |(w, _)| sum > w) {
                    worst = Some((sum, last));
                }
            }
        }
        let Some((sum, e)) = worst.filter(|(sum, _)| *sum > limits.link_downed_per_day) else {
            continue;
        };
        let mut f = flap_finding(
            e,
            format!(
                "LinkDowned rose by {sum} within 24h (limit {} a day); last at {}",
                limits.link_downed_per_day, e.at
            ),
            fabric,
        );
        f.counter = Some("LinkDownedCounter".into());
        f.value = Some(sum);
        f.threshold = Some(limits.link_downed_per_day);
        found.push(f);
    }
    found
}

/// Of `sample`, each port with only the counters whose rise is an event.
fn event_counts(sample: &crate::counters::Sample) -> crate::counters::Sample {
    let ports = sample
        .ports
        .iter()
        .map(|p| {
            let readings = COUNTER_EVENTS
                .iter()
                .filter_map(|(name, _, _)| p.reading(name).cloned())
                .collect();
            crate::counters::PortSample {
                counters: Some(crate::counters::CounterSet::from_readings(readings)),
                ..crate::counters::PortSample::new(p.at.clone(), p.remote.clone())
            }
        })
        .collect();
    crate::counters::Sample {
        ports,
        data_unit: sample.data_unit.clone(),
        ..*sample
    }
}

/// What a watcher that sweeps again and again (the TUI) has seen of the links: the events
/// of the last 24 hours between its sweeps, from which it finds the flapping links itself.
#[derive(Debug, Default)]
pub struct FlapHistory {
    events: Vec<Event>,
    /// The last sweep's fabric, shared with whoever shows it (not a copy).
    last_fabric: Option<std::sync::Arc<Fabric>>,
    /// Of the last sweep's counters, only those whose rise is an event.
    last_counts: Option<crate::counters::Sample>,
}

impl FlapHistory {
    /// The events between the last sweep and this one of the fabric called `name`
    /// (`sample`: its counters, when read); kept for a day, and returned for a journal.
    pub fn record(
        &mut self,
        fabric: &std::sync::Arc<Fabric>,
        name: &str,
        sample: Option<&crate::counters::Sample>,
        names: Option<&NameMap>,
        now: SystemTime,
    ) -> Vec<Event> {
        let mut new = Vec::new();
        // The same discovery again (a sweeper that did not rediscover): nothing changed.
        let last = self
            .last_fabric
            .as_ref()
            .filter(|l| !std::sync::Arc::ptr_eq(l, fabric));
        if let Some(last) = last {
            new.extend(changes(last, fabric, names, now));
        }
        if let (Some(before), Some(after)) = (&self.last_counts, sample) {
            let mut rises = counter_changes(before, after, now);
            if !rises.is_empty() {
                label_ends(&mut rises, &Hosts::group(fabric, names));
            }
            new.extend(rises);
        }
        self.last_fabric = Some(std::sync::Arc::clone(fabric));
        if let Some(s) = sample {
            self.last_counts = Some(event_counts(s));
        }
        for e in &mut new {
            e.fabric = crate::model::FabricId::of(fabric, name);
        }
        self.add(&new, now);
        new
    }
    /// Remember `events` seen elsewhere; what is older than a day is forgotten.
    pub fn add(&mut self, events: &[Event], now: SystemTime) {
        let oldest = seconds(now).saturating_sub(24 * 3600);
        self.events.retain(|e| e.time >= oldest);
        self.events.extend(events.iter().cloned());
    }
    /// [`flapping`] over what was seen, the links' ends named as ports of the last sweep.
    pub fn flapping(&self, limits: FlapLimits) -> Vec<Finding> {
        flapping(&self.events, limits, self.last_fabric.as_deref())
    }
}

/// One `link-flapping` finding for each link that went down at least `limits.downs` times
/// within a window of `limits.window` (links down between discoveries), and for each
/// whose LinkDowned rose by more than `limits.link_downed_per_day` within 24 hours. The
/// link's ends are named as ports of `fabric` where they are in it.
pub fn flapping(events: &[Event], limits: FlapLimits, fabric: Option<&Fabric>) -> Vec<Finding> {
    let mut found = downs_in_window(events, limits, fabric);
    found.extend(downed_per_day(events, limits, fabric));
    found
}

/// The `link-flapping` finding about the link of event `e`: each end found in `fabric`
/// named as every finding names a port (a switch's first), with the host and rail of its
/// HCA end; an end that is not there (gone since, or no fabric given) named in the message.
fn flap_finding(e: &Event, message: String, fabric: Option<&Fabric>) -> Finding {
    let mut ends: Vec<crate::model::refs::PortRef> = Vec::new();
    let mut gone: Vec<String> = Vec::new();
    for end in std::iter::once(&e.a).chain(e.b.as_ref()) {
        match fabric.and_then(|f| port_ref_of(f, end)) {
            Some(r) => ends.push(r),
            None => gone.push(format!("\"{}\" ({}) port {}", end.node, end.guid, end.port)),
        }
    }
    ends.sort_by_key(|r| r.node.kind != crate::model::NodeKind::Switch);
    let mut message = message;
    if !gone.is_empty() {
        message.push_str(&format!("; not in the fabric now: {}", gone.join(" <-> ")));
    }
    let mut f = Finding::new(FindingKind::LinkFlapping, message);
    let mut ends = ends.into_iter();
    if let Some(at) = ends.next() {
        f = f.at(at, ends.next());
    }
    if let Some(hca) = std::iter::once(&e.a)
        .chain(e.b.as_ref())
        .find(|end| end.host.is_some())
    {
        f.host = hca.host.clone();
        f.rail = hca.rail;
    }
    f
}

/// An event's end as a port of `fabric`, under the name the event recorded.
fn port_ref_of(fabric: &Fabric, end: &EventEnd) -> Option<crate::model::refs::PortRef> {
    let id = fabric.node_by_guid(ibscope_mad::codes::guid::parse(&end.guid)?)?;
    let node = fabric.node(id);
    node.port(end.port)?;
    let name = crate::model::refs::NodeRef::sharing(node, end.node.as_str().into());
    let mut r = crate::model::refs::PortRef::on(
        name,
        end.port,
        crate::model::refs::PortRef::lid_of(node, end.port),
    );
    r.host = end.host.clone();
    r.rail = end.rail;
    Some(r)
}

/// Links down at least `limits.downs` times within `limits.window`.
fn downs_in_window(events: &[Event], limits: FlapLimits, fabric: Option<&Fabric>) -> Vec<Finding> {
    let mut downs: BTreeMap<LinkEndTexts, Vec<&Event>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.kind == EventKind::LinkDown) {
        let Some(key) = link_key(e) else { continue };
        downs.entry(key).or_default().push(e);
    }
    let window = limits.window.as_secs();
    let mut found = Vec::new();
    for list in downs.values_mut() {
        list.sort_by_key(|e| e.time);
        let need = limits.downs.max(1) as usize;
        let most = (0..list.len())
            .map(|i| {
                list[i..]
                    .iter()
                    .take_while(|e| e.time - list[i].time <= window)
                    .count()
            })
            .max()
            .unwrap_or(0);
        if most >= need {
            let e = list[list.len() - 1];
            found.push(flap_finding(
                e,
                format!(
                    "went down {most} times within {} (limit {} in {}); last at {}",
                    humantime::format_duration(limits.window),
                    limits.downs,
                    humantime::format_duration(limits.window),
                    e.at
                ),
                fabric,
            ));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ibnd;

    #[test]
    fn counter_rises_are_events_and_resets_are_not() {
        use crate::counters::sample::test_support::{port_ref, port_sample, wrap};
        let sample = |downed: u64, recovered: u64| {
            let mut p = port_sample(
                &[
                    ("LinkDownedCounter", downed),
                    ("LinkErrorRecoveryCounter", recovered),
                ],
                None,
                &[],
            );
            p.remote = Some(port_ref(2, 7));
            wrap(p)
        };
        let t = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let events = counter_changes(&sample(3, 0), &sample(5, 1), t);
        assert_eq!(events.len(), 2, "{events:#?}");
        assert_eq!(events[0].kind, EventKind::LinkDowned);
        assert_eq!(events[0].count, Some(2));
        assert_eq!(events[0].detail, "LinkDowned rose by 2 (to 5)");
        assert_eq!(events[0].b.as_ref().unwrap().port, 7);
        assert_eq!(events[1].kind, EventKind::LinkErrorRecovery);
        assert!(
            counter_changes(&sample(5, 1), &sample(0, 0), t).is_empty(),
            "a reset"
        );
        assert!(counter_changes(&sample(5, 1), &sample(5, 1), t).is_empty());
        let line = serde_json::to_string(&events[0]).unwrap();
        assert!(line.contains("\"kind\":\"link-downed\"") && line.contains("\"count\":2"));
    }

    #[test]
    fn more_than_ten_link_downed_in_a_day_is_flapping() {
        let rise = |time: u64, end: (&str, u8), far: (&str, u8), count: u64| Event {
            time,
            at: format!("t{time}"),
            kind: EventKind::LinkDowned,
            a: EventEnd {
                node: end.0.into(),
                guid: end.0.into(),
                port: end.1,
                host: None,
                rail: None,
            },
            b: Some(EventEnd {
                node: far.0.into(),
                guid: far.0.into(),
                port: far.1,
                host: None,
                rail: None,
            }),
            detail: String::new(),
            count: Some(count),
            fabric: None,
        };
        let (leaf, host) = (("leaf", 3), ("gpu", 1));
        let limits = FlapLimits::default();
        // 6 + 5 within a day, counted by both ends: 11 > 10, one finding.
        let events = [
            rise(0, leaf, host, 6),
            rise(0, host, leaf, 6),
            rise(3600, leaf, host, 5),
            rise(3600, host, leaf, 5),
        ];
        let found = flapping(&events, limits, None);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].value, Some(11));
        assert!(found[0]
            .message
            .contains("LinkDowned rose by 11 within 24h (limit 10 a day)"));
        // The same rises a day and more apart: no day has more than 6.
        let apart = [rise(0, leaf, host, 6), rise(90_000, leaf, host, 5)];
        assert!(flapping(&apart, limits, None).is_empty());
    }

    const TWO: &str = r#"
Switch 4 "S1" # "leaf-1" base port 0 lid 1 lmc 0
[1] "H1"[1] # "gpu-01 mlx5_0" lid 2 4xHDR
[2] "H2"[1] # "gpu-02 mlx5_0" lid 3 4xHDR

Hca 1 "H1" # "gpu-01 mlx5_0"
[1] "S1"[1] # lid 2 lmc 0 "leaf-1" lid 1 4xHDR

Hca 1 "H2" # "gpu-02 mlx5_0"
[1] "S1"[2] # lid 3 lmc 0 "leaf-1" lid 1 4xHDR
"#;

    fn at(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    fn without_h2() -> Fabric {
        let text: String = TWO
            .lines()
            .filter(|l| !l.starts_with("[2] \"H2\"") && !l.starts_with("[1] \"S1\"[2]"))
            .collect::<Vec<_>>()
            .join("\n");
        ibnd::parse(&text).unwrap()
    }

    /// A watcher sweeping again and again sees a link go twice and finds it flapping.
    #[test]
    fn a_flap_history_finds_a_link_down_twice() {
        let (full, cut) = (ibnd::parse(TWO).unwrap(), without_h2());
        let mut h = FlapHistory::default();
        let mut seen = 0;
        let (full, cut) = (std::sync::Arc::new(full), std::sync::Arc::new(cut));
        for (i, f) in [&full, &cut, &full, &cut, &full].into_iter().enumerate() {
            seen += h.record(f, "", None, None, at(60 * i as u64)).len();
        }
        assert_eq!(seen, 4, "down, up, down, up");
        let found = h.flapping(FlapLimits::default());
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].message.contains("went down 2 times"));
        // A day later the old downs are forgotten.
        h.record(&full, "", None, None, at(2 * 86_400));
        assert!(h.flapping(FlapLimits::default()).is_empty());
    }

    /// The history keeps only the counters whose rise is an event, and finds the rise.
    #[test]
    fn a_flap_history_sees_link_downed_rise_between_sweeps() {
        use crate::counters::sample::test_support::{port_ref, port_sample, wrap};
        let sample = |downed: u64| {
            let mut p = port_sample(
                &[("LinkDownedCounter", downed), ("SymbolErrorCounter", 9)],
                None,
                &[],
            );
            p.remote = Some(port_ref(2, 7));
            wrap(p)
        };
        let fabric = std::sync::Arc::new(ibnd::parse(TWO).unwrap());
        let mut h = FlapHistory::default();
        assert!(h
            .record(&fabric, "", Some(&sample(2)), None, at(0))
            .is_empty());
        let kept = h.last_counts.as_ref().unwrap().ports[0]
            .counters
            .as_ref()
            .unwrap();
        assert_eq!(kept.readings().len(), 1, "only LinkDowned of the two");
        let events = h.record(&fabric, "plane-a", Some(&sample(14)), None, at(60));
        assert_eq!(events.len(), 1, "{events:#?}");
        assert_eq!(
            (
                events[0].kind,
                events[0].count,
                events[0].fabric.as_ref().map(|f| f.name.as_str())
            ),
            (EventKind::LinkDowned, Some(12), Some("plane-a"))
        );
        assert_eq!(h.flapping(FlapLimits::default()).len(), 1, "12 in a day");
    }

    #[test]
    fn a_link_that_goes_and_comes_back_is_two_events() {
        let full = ibnd::parse(TWO).unwrap();
        let down = changes(&full, &without_h2(), None, at(0));
        assert_eq!(down.len(), 1, "{down:#?}");
        assert_eq!(down[0].kind, EventKind::LinkDown);
        let ends = [
            down[0].a.node.as_str(),
            down[0].b.as_ref().unwrap().node.as_str(),
        ];
        let hca = [&down[0].a, down[0].b.as_ref().unwrap()]
            .into_iter()
            .find(|e| e.node == "gpu-02 mlx5_0")
            .unwrap();
        assert_eq!((hca.host.as_deref(), hca.rail), (Some("gpu-02"), Some(0)));
        assert!(
            ends.contains(&"leaf-1") && ends.contains(&"gpu-02 mlx5_0"),
            "{ends:?}"
        );
        assert!(down[0].at.ends_with('Z'));
        let up = changes(&without_h2(), &full, None, at(5));
        assert_eq!(up[0].kind, EventKind::LinkUp);
        assert!(changes(&full, &full, None, at(9)).is_empty());
        let narrow = ibnd::parse(
            &TWO.replace("lid 3 4xHDR", "lid 3 1xHDR")
                .replace("lid 1 4xHDR\n\"#", ""),
        )
        .unwrap();
        let shifted = changes(&full, &narrow, None, at(9));
        assert!(
            shifted
                .iter()
                .any(|e| e.kind == EventKind::WidthDownshift && e.detail == "width 4x -> 1x"),
            "{shifted:#?}"
        );
    }

    #[test]
    fn the_journal_rotates_and_survives_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let file = JournalFile {
            path: dir.path().join("events.jsonl"),
            max_bytes: 600,
        };
        let full = ibnd::parse(TWO).unwrap();
        for i in 0..6 {
            let (a, b) = if i % 2 == 0 {
                (&full, &without_h2())
            } else {
                (&without_h2(), &full)
            };
            file.append(&changes(a, b, None, at(i * 60))).unwrap();
        }
        assert!(rotated(&file.path).exists(), "rotated at 600 bytes");
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file.path)
            .unwrap();
        f.write_all(b"{\"time\": 1, \"truncat\n\x1b[2J garbage\n")
            .unwrap();
        let (events, skipped) = read(&file.path).unwrap();
        assert_eq!(skipped, 2);
        assert!(events.len() >= 3 && events.len() <= 6, "{}", events.len());
        assert!(
            events.windows(2).all(|w| w[0].time <= w[1].time),
            "oldest first"
        );
        assert!(read(&dir.path().join("none")).is_err());
        assert!(touches(&events[0], "gpu-02 mlx5_0", Some(1)));
        assert!(touches(&events[0], "gpu-02", None), "its server");
        let (node, port) = split_link("\"gpu-02 mlx5_0\"[1]");
        assert!(touches(&events[0], node, port), "as events prints an end");
        assert_eq!(
            split_link("MF0;leaf-1:MQM9700/U1:17"),
            ("MF0;leaf-1:MQM9700/U1", Some(17))
        );
        assert_eq!(split_link("leaf-1[17]"), ("leaf-1", Some(17)));
        assert!(!touches(&events[0], "gpu-02 mlx5_0", Some(2)));
        assert!(touches(&events[0], &events[0].a.guid.clone(), None));
    }

    #[test]
    fn two_downs_in_ten_minutes_flap_one_does_not() {
        let full = ibnd::parse(TWO).unwrap();
        let down = |s| changes(&full, &without_h2(), None, at(s));
        let once = down(0);
        assert!(flapping(&once, FlapLimits::default(), None).is_empty());
        let twice: Vec<Event> = down(0).into_iter().chain(down(300)).collect();
        let found = flapping(&twice, FlapLimits::default(), Some(&full));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].kind, FindingKind::LinkFlapping);
        // Both ends are in the fabric given: named as ports (the switch's first), with the
        // HCA end's host and rail; the file gives leaf-1 LID 1 and gpu-02's port LID 3.
        let guid = |d: &str| {
            let id = full.nodes_by_description(d)[0];
            ibscope_mad::codes::guid::text(full.node(id).guid)
        };
        assert_eq!(
            found[0].text_line(),
            format!(
                "[link-flapping] gpu-02 rail 0: \"leaf-1\" ({}) port 2 (lid 1) <-> \
                 \"gpu-02 mlx5_0\" ({}) port 1 (lid 3): went down 2 times within 10m (limit 2 \
                 in 10m); last at {}",
                guid("leaf-1"),
                guid("gpu-02 mlx5_0"),
                twice[1].at
            )
        );
        // Without the fabric (or once an end is gone from it) the ends are named in words.
        let words = flapping(&twice, FlapLimits::default(), None);
        assert!(words[0].at.is_none());
        assert!(
            words[0].message.contains("; not in the fabric now: \""),
            "{}",
            words[0].message
        );
        let apart: Vec<Event> = down(0).into_iter().chain(down(3600)).collect();
        assert!(
            flapping(&apart, FlapLimits::default(), None).is_empty(),
            "an hour apart"
        );
    }
}
