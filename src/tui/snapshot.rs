//! What one sweep of the fabric produces, and where sweeps come from.
//!
//! A [`Snapshot`] is immutable once made: the sweeper thread builds it and hands it to the UI
//! thread over a channel, so the UI never waits on the fabric.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ibscope_topo::health::HealthOptions;
use ibscope_topo::namemap::NameMap;
use ibscope_topo::routing::{self, RouteReport};
use ibscope_topo::Fabric;

use super::derive::{link_facts, port_key, LinkHealth};

/// One reading of one port's performance counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortCounterSample {
    pub node_guid: u64,
    pub port: u8,
    /// Counter values by their spec (perfquery) name, e.g. "SymbolErrorCounter".
    pub counters: BTreeMap<String, u64>,
    /// Data octets sent / received (PortXmitData / PortRcvData × 4), when read.
    pub xmit_data_bytes: Option<u64>,
    pub rcv_data_bytes: Option<u64>,
    pub taken_at: SystemTime,
}

/// Counters whose increase means something went wrong on the link (IBA 16.1.3.5): the
/// same list `check` and thresholds use. PortXmitWait is congestion, not an error.
pub use ibscope_topo::counters::ERROR_COUNTERS;

impl PortCounterSample {
    /// Sum of the error counters present in this sample.
    pub fn error_total(&self) -> u64 {
        self.counters
            .iter()
            .filter(|(k, _)| ERROR_COUNTERS.contains(&k.as_str()))
            .fold(0u64, |acc, (_, v)| acc.saturating_add(*v))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Info,
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warn",
            Severity::Error => "error",
        }
    }
}

/// Something a health check noticed about a node or port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub severity: Severity,
    pub node_guid: u64,
    pub port: Option<u8>,
    /// The far end (node GUID, port) when the finding is about a link.
    pub remote: Option<(u64, u8)>,
    /// Plain text; may quote fabric strings, so it is escaped before display.
    pub text: String,
}

/// One sweep's worth of fabric state.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub fabric: Arc<Fabric>,
    /// `health::assess`'s verdict on every link of `fabric` (see [`assess_links`]): what
    /// the UI counts, colours and logs as degraded.
    pub health: Arc<LinkHealth>,
    pub counters: Vec<PortCounterSample>,
    pub findings: Vec<Finding>,
    /// Route analysis, when the switches' LFTs are known.
    pub routes: Option<Arc<RouteReport>>,
    /// The master SM, as text (e.g. "LID 1 (0x0002c90300000001) priority 15").
    pub sm: Option<String>,
    pub taken_at: SystemTime,
    /// How long the sweep took.
    pub duration: Duration,
}

impl Snapshot {
    /// A snapshot of a fabric with findings computed from it and nothing else, links judged
    /// with the default health options (as `ibscope check` without `--expect`).
    pub fn from_fabric(fabric: Fabric, taken_at: SystemTime) -> Snapshot {
        let health = assess_links(&fabric, &HealthOptions::default());
        let findings = fabric_findings(&fabric, &health);
        Snapshot {
            fabric: Arc::new(fabric),
            health,
            counters: Vec::new(),
            findings,
            routes: None,
            sm: None,
            taken_at,
            duration: Duration::ZERO,
        }
    }
}

/// Where snapshots come from: the live fabric (discovery + counters) or a file.
/// `snapshot` runs on the sweeper thread and may take as long as it needs.
pub trait Source: Send {
    fn snapshot(&mut self) -> anyhow::Result<Snapshot>;
    /// Shown in the header, e.g. "file net.topo" or "mlx5_0/1".
    fn describe(&self) -> String;
    /// A token that, once cancelled, should make a running `snapshot` give up soon (a live
    /// source hands it to its MAD engine). Sources that never wait need not keep it.
    fn set_cancel(&mut self, _token: ibscope_mad::engine::CancelToken) {}
}

/// A saved topology (`--topology FILE`): re-read on every sweep so edits show up, no
/// counters. Routes are checked when the file carries LFTs (JSON snapshots can).
pub struct FileSource {
    path: PathBuf,
}

impl FileSource {
    pub fn new(path: impl Into<PathBuf>) -> FileSource {
        FileSource { path: path.into() }
    }
}

impl Source for FileSource {
    fn snapshot(&mut self) -> anyhow::Result<Snapshot> {
        let started = Instant::now();
        let fabric = crate::fabric::load_file(&self.path)?;
        let mut snap = Snapshot::from_fabric(fabric, SystemTime::now());
        snap.routes = check_routes(&snap.fabric);
        snap.duration = started.elapsed();
        Ok(snap)
    }
    fn describe(&self) -> String {
        format!(
            "file {}",
            self.path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| self.path.display().to_string())
        )
    }
}

/// The route check, when at least one switch's LFT is known (otherwise it only says so).
pub fn check_routes(fabric: &Fabric) -> Option<Arc<RouteReport>> {
    let any_lft = fabric
        .switches()
        .any(|(_, n)| n.switch.as_ref().is_some_and(|s| !s.lft.is_empty()));
    if !any_lft {
        return None;
    }
    let opts = routing::CheckOptions {
        top_links: 50,
        ..Default::default()
    };
    Some(Arc::new(routing::check(fabric, &opts)))
}

/// Judge every link of `fabric` as `ibscope check` does: once per snapshot, by the source
/// that makes it (`health::assess` is O(links)).
pub fn assess_links(fabric: &Fabric, options: &HealthOptions) -> Arc<LinkHealth> {
    Arc::new(LinkHealth::assess(fabric, options))
}

/// Findings that need only the fabric and its link verdicts: degraded and down links,
/// query errors, duplicate LIDs/GUIDs. Live sources use `check`'s findings instead.
pub fn fabric_findings(fabric: &Fabric, health: &LinkHealth) -> Vec<Finding> {
    let mut out = Vec::new();
    for link in fabric.links() {
        let q = link_facts(link.a_port(), link.b_port());
        let (a, b) = (
            (link.a_node.guid, link.a.port),
            (link.b_node.guid, link.b.port),
        );
        let remote = Some(b);
        if let Some(v) = health.verdict(a, b).filter(|v| v.degraded()) {
            out.push(Finding {
                severity: Severity::Warning,
                node_guid: link.a_node.guid,
                port: Some(link.a.port),
                remote,
                text: format!(
                    "degraded link to {}: {}",
                    port_key(link.b_node, link.b.port),
                    v.reasons.join("; ")
                ),
            });
        }
        if q.down {
            out.push(Finding {
                severity: Severity::Error,
                node_guid: link.a_node.guid,
                port: Some(link.a.port),
                remote,
                text: format!(
                    "link to {} not active ({})",
                    port_key(link.b_node, link.b.port),
                    q.state_text()
                ),
            });
        }
    }
    for (_, node) in fabric.nodes() {
        for e in &node.errors {
            out.push(Finding {
                severity: Severity::Warning,
                node_guid: node.guid,
                port: None,
                remote: None,
                text: format!("query failed: {e}"),
            });
        }
        for p in &node.ports {
            for e in &p.errors {
                out.push(Finding {
                    severity: Severity::Warning,
                    node_guid: node.guid,
                    port: Some(p.number),
                    remote: None,
                    text: format!("port query failed: {e}"),
                });
            }
        }
    }
    for lid in &fabric.report.duplicate_lids {
        out.push(Finding {
            severity: Severity::Error,
            node_guid: 0,
            port: None,
            remote: None,
            text: format!("LID {lid} is claimed by more than one port"),
        });
    }
    for guid in &fabric.report.duplicate_guids {
        out.push(Finding {
            severity: Severity::Error,
            node_guid: *guid,
            port: None,
            remote: None,
            text: format!("GUID {guid:#018x} is claimed by more than one node"),
        });
    }
    out.sort_by_key(|f| std::cmp::Reverse(f.severity));
    out
}

/// A name for a finding's node: the map's name, else its description, else the GUID.
pub fn finding_subject(fabric: &Fabric, names: Option<&NameMap>, f: &Finding) -> String {
    match fabric.node_by_guid(f.node_guid) {
        Some(id) => {
            let node = fabric.node(id);
            let name = ibscope_topo::namemap::display_name(node, names);
            match f.port {
                Some(p) => format!("{name}[{p}]"),
                None => name.to_string(),
            }
        }
        None if f.node_guid == 0 => String::new(),
        None => format!("{:#018x}", f.node_guid),
    }
}
