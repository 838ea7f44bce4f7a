//! `ibscope tui`: the interactive terminal UI over the live fabric or a saved topology.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;

use crate::cli::{exit, Global};
use crate::tui;

/// Interactive terminal UI: overview, nodes, links, counters, routing, events.
///
/// Keys: 1-6 or Tab switch views, / filters, s sorts, Enter opens details, r sweeps now,
/// ? shows the help of the current view, q quits. Sweeps run in the background; the header
/// shows how old the data is.
///
/// Examples:
///   ibscope tui
///   ibscope tui --interval 2 --node-name-map /etc/rdma/ib-node-name-map
///   ibscope --topology fabric.json tui      # browse a saved snapshot
#[derive(Debug, Clone, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Seconds between the end of one sweep and the start of the next.
    #[arg(long, default_value_t = 5.0, value_name = "S")]
    pub interval: f64,
}

pub fn run(g: &Global, a: &Args) -> anyhow::Result<ExitCode> {
    if !(a.interval.is_finite() && a.interval >= 0.1) {
        bail!("--interval must be at least 0.1 seconds");
    }
    let names = crate::fabric::names(g)?;
    let source: Box<dyn tui::Source> = match &g.topology {
        Some(path) => Box::new(tui::FileSource::new(path)),
        None => Box::new(LiveSource::open(g)?),
    };
    tui::run(
        source,
        tui::Options {
            interval: Duration::from_secs_f64(a.interval),
            names,
        },
    )?;
    Ok(ExitCode::from(exit::OK))
}

/// The live fabric: rediscovery (with LFTs) and a counter sweep each time, and the
/// findings `ibscope check` would report.
struct LiveSource {
    engine: ibscope_mad::engine::Engine,
    names: Option<ibscope_topo::namemap::NameMap>,
    thresholds: ibscope_topo::counters::Thresholds,
}

impl LiveSource {
    fn open(g: &Global) -> anyhow::Result<LiveSource> {
        Ok(LiveSource {
            engine: crate::fabric::open_engine(g)?,
            names: crate::fabric::names(g)?,
            thresholds: crate::fabric::thresholds(g, None)?,
        })
    }
}

impl tui::Source for LiveSource {
    fn snapshot(&mut self) -> anyhow::Result<tui::Snapshot> {
        use ibscope_topo::discover::{discover, DiscoverOptions};
        let started = std::time::Instant::now();
        let taken_at = std::time::SystemTime::now();
        let fabric = discover(&mut self.engine, DiscoverOptions { read_lft: true }, |_| {});
        crate::fabric::ensure_connected(&self.engine)?;
        if fabric.node_count() == 0 {
            bail!("discovery found no node: is the local port up?");
        }
        let eval = crate::cmd::check::evaluate(
            &fabric,
            self.names.as_ref(),
            &ibscope_topo::health::HealthOptions::default(),
            &self.thresholds,
            Some(&mut self.engine),
            ibscope_topo::findings::CounterReads::PerPort,
        );
        crate::fabric::ensure_connected(&self.engine)?;
        let findings = eval.findings;
        let counters = eval
            .sample
            .map(|sample| {
                sample
                    .ports
                    .iter()
                    .filter(|p| p.counters.is_some())
                    .map(|p| tui::PortCounterSample::from_sweep(p, taken_at))
                    .collect()
            })
            .unwrap_or_default();
        let local = self.engine.local();
        let sm = (local.sm_lid != 0).then(|| format!("LID {}", local.sm_lid));
        let routes = tui::snapshot::check_routes(&fabric);
        // The same assessment check's findings came from (HealthOptions::default() above).
        let health = std::sync::Arc::new(tui::derive::LinkHealth::from_report(&eval.health));
        Ok(tui::Snapshot {
            fabric: std::sync::Arc::new(fabric),
            health,
            counters,
            findings,
            routes,
            sm,
            taken_at,
            duration: started.elapsed(),
        })
    }

    fn set_cancel(&mut self, token: ibscope_mad::engine::CancelToken) {
        self.engine.set_cancel(Some(token));
    }

    fn describe(&self) -> String {
        let l = self.engine.local();
        format!("{}/{}", l.ca_name, l.port_num)
    }
}
