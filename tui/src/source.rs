//! What one sweep of the fabric produces, and where sweeps come from.
//!
//! A [`Sweep`] is immutable once made: the sweep thread builds it and hands it to the UI
//! thread over a channel, so the UI never waits on the fabric.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ibscope_topo::counters::PortSample;
use ibscope_topo::findings;
pub use ibscope_topo::findings::Finding;
use ibscope_topo::health::HealthOptions;
use ibscope_topo::routing::{self, RouteReport};
use ibscope_topo::{Fabric, PortKey};

use super::derive::LinkHealth;

/// One reading of one port's performance counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortCounterSample {
    pub at: PortKey,
    /// Counter values by their spec (perfquery) name, e.g. "SymbolErrorCounter": the best
    /// of each (64-bit where the PMA has it), and the breakdown counters read.
    pub counters: BTreeMap<String, u64>,
    /// Counters that stopped at their maximum: their value is a lower bound ("≥").
    pub saturated: BTreeSet<String>,
    /// Data octets sent / received (PortXmitData / PortRcvData × 4), when read.
    pub xmit_data_bytes: Option<u64>,
    pub rcv_data_bytes: Option<u64>,
    pub taken_at: SystemTime,
}

/// Counters whose increase means something went wrong on the link (IBA 16.1.3.5): the
/// same list `check` and thresholds use. PortXmitWait is congestion, not an error.
pub use ibscope_topo::counters::ERROR_COUNTERS;

impl PortCounterSample {
    /// One port of a sweep as the TUI keeps it: the best reading of each counter (64-bit
    /// where the PMA has it), the breakdown counters read, and which of those are saturated.
    pub fn from_port_sample(p: &PortSample, taken_at: SystemTime) -> PortCounterSample {
        let breakdowns = p.details.0.iter().flat_map(|(_, set)| set.iter());
        let readings: Vec<(&str, u64)> = p.effective().into_iter().chain(breakdowns).collect();
        PortCounterSample {
            at: p.at.key(),
            saturated: readings
                .iter()
                .filter(|(k, _)| p.is_saturated(k))
                .map(|(k, _)| k.to_string())
                .collect(),
            counters: readings
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            xmit_data_bytes: p.value("PortXmitData"),
            rcv_data_bytes: p.value("PortRcvData"),
            taken_at,
        }
    }

    /// Sum of the error counters present in this sample.
    pub fn error_total(&self) -> u64 {
        self.counters
            .iter()
            .filter(|(k, _)| ERROR_COUNTERS.contains(&k.as_str()))
            .fold(0u64, |acc, (_, v)| acc.saturating_add(*v))
    }
}

/// One sweep's worth of fabric state.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub fabric: Arc<Fabric>,
    /// `health::assess`'s verdict on every link of `fabric` (see [`LinkHealth::from_report`]): what
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

impl Sweep {
    /// A sweep of a fabric with findings computed from it and nothing else, links judged
    /// with the default health options (as `ibscope check --topology` without `--expect`).
    pub fn from_fabric(fabric: Fabric, taken_at: SystemTime) -> Sweep {
        let eval = findings::evaluate_offline(&fabric, None, &HealthOptions::default());
        let health = Arc::new(LinkHealth::from_report(&eval.health));
        let findings = eval.findings;
        Sweep {
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

impl Sweep {
    /// A live sweep as `ibscope check` evaluated it: its findings, the health of its links
    /// and the counters it read. Routes, the master SM and how long it took are the
    /// source's to add.
    pub fn from_evaluation(
        fabric: impl Into<Arc<Fabric>>,
        evaluation: findings::Evaluation,
        taken_at: SystemTime,
    ) -> Sweep {
        let counters = evaluation
            .sample
            .map(|sample| {
                sample
                    .ports
                    .iter()
                    .filter(|p| p.counters.is_some())
                    .map(|p| PortCounterSample::from_port_sample(p, taken_at))
                    .collect()
            })
            .unwrap_or_default();
        Sweep {
            fabric: fabric.into(),
            health: Arc::new(LinkHealth::from_report(&evaluation.health)),
            counters,
            findings: evaluation.findings,
            routes: None,
            sm: None,
            taken_at,
            duration: Duration::ZERO,
        }
    }
}

/// Where sweeps come from: the live fabric (discovery + counters) or a file.
/// `sweep` runs on the sweep thread and may take as long as it needs.
pub trait Source: Send {
    fn sweep(&mut self) -> anyhow::Result<Sweep>;
    /// Shown in the header, e.g. "file net.topo" or "mlx5_0/1".
    fn describe(&self) -> String;
    /// A token that, once cancelled, should make a running `sweep` give up soon (a live
    /// source hands it to its MAD engine). Sources that never wait need not keep it.
    fn set_cancel(&mut self, _token: ibscope_mad::engine::CancelToken) {}
    /// Asked after a failed `sweep`: whether the connection to the fabric is gone, so
    /// that no later sweep can work (a live source whose transport was lost). The UI then
    /// ends with that error.
    fn connection_lost(&self) -> bool {
        false
    }
}

/// A saved topology (`--topology FILE`): re-read on every sweep so edits show up, no
/// counters. Routes are checked when the file carries LFTs (JSON snapshots can).
pub struct FileSource {
    path: PathBuf,
    read: ReadTopology,
}

/// Reads a topology file (the ibnetdiscover text or a JSON snapshot) into a fabric.
pub type ReadTopology = fn(&Path) -> anyhow::Result<Fabric>;

impl FileSource {
    pub fn new(path: impl Into<PathBuf>, read: ReadTopology) -> FileSource {
        FileSource {
            path: path.into(),
            read,
        }
    }
}

impl Source for FileSource {
    fn sweep(&mut self) -> anyhow::Result<Sweep> {
        let started = Instant::now();
        let fabric = (self.read)(&self.path)?;
        let mut sweep = Sweep::from_fabric(fabric, SystemTime::now());
        sweep.routes = check_routes(&sweep.fabric);
        sweep.duration = started.elapsed();
        Ok(sweep)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A swept port as `counters --format json` writes it: SymbolErrorCounter replaced by
    /// its 64-bit form, LinkDownedCounter stopped at 255, one breakdown counted.
    const SWEPT: &str = r#"{
      "node": "sw", "node_guid": "0x0000000000000010", "kind": "switch", "port": 2, "lid": 1,
      "capability_mask": 4608, "capability_mask2": 2,
      "counters": {"SymbolErrorCounter": {"value": 65535, "saturated": true},
                   "LinkDownedCounter": {"value": 255, "saturated": true},
                   "PortRcvErrors": 7, "PortXmitData": 400},
      "extended": {"PortXmitData": 4000, "SymbolErrorCounter": 123456},
      "saturated": ["SymbolErrorCounter", "LinkDownedCounter"],
      "details": {"PortRcvErrorDetails": {"PortLoopingErrors": 7, "PortVLMappingErrors": 0}},
      "errors": []
    }"#;

    #[test]
    fn a_swept_port_keeps_its_best_readings_breakdowns_and_saturation() {
        let port: PortSample = serde_json::from_str(SWEPT).unwrap();
        let s = PortCounterSample::from_port_sample(&port, std::time::UNIX_EPOCH);
        assert_eq!(
            s.at,
            PortKey {
                guid: 0x10,
                port: 2
            }
        );
        assert_eq!(s.counters["SymbolErrorCounter"], 123_456);
        assert_eq!(s.counters["LinkDownedCounter"], 255);
        assert_eq!(s.counters["PortLoopingErrors"], 7);
        assert_eq!(s.counters["PortVLMappingErrors"], 0);
        // The 64-bit SymbolErrorCounter still counts; the 8-bit LinkDownedCounter does not.
        assert_eq!(
            s.saturated.iter().map(String::as_str).collect::<Vec<_>>(),
            ["LinkDownedCounter"]
        );
        assert_eq!(s.xmit_data_bytes, Some(4000));
    }
}
