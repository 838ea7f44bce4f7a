//! `ibscope tui`: the interactive terminal UI over the live fabric or a saved topology.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;

use crate::cli::{exit, Global};
use ibscope_tui as tui;

/// Interactive terminal UI: the fabric in views, one per tab.
///
/// A live fabric's links are watched from sweep to sweep: one down twice within 10
/// minutes, or whose LinkDowned rose by more than 10 in a day, is link-flapping among the
/// findings (limits: the thresholds file's flap.* keys).
///
/// Keys: a digit or Tab switches views (the footer names them), / filters, s sorts, Enter
/// opens details, r sweeps now, ? shows the help of the current view, q quits. Sweeps run
/// in the background; the header shows how old the data is.
///
/// Several fabrics (-C all, a list, [[fabric]] tables of the config file): each is swept on
/// its own, f shows the next one (F the previous) and the header names the one shown. A
/// fabric that cannot be opened is one error line on stderr; the others are shown.
///
/// Examples:
///   ibscope tui
///   ibscope tui --interval 2 --node-name-map /etc/rdma/ib-node-name-map
///   ibscope --topology fabric.json tui      # browse a saved snapshot
///   ibscope -C all tui                      # every fabric this host reaches; f switches
#[derive(Debug, Clone, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Seconds between the end of one sweep and the start of the next.
    #[arg(long, default_value_t = 5.0, value_name = "S")]
    pub interval: f64,
    /// Also append what changes between sweeps (links down and up, state changes,
    /// downshifts, LinkDowned and LinkErrorRecovery rises) to this journal, as `serve
    /// --journal` does (`ibscope events` reads it); the Events view starts with the
    /// journal's last events (serve's, an earlier session's).
    #[arg(long, value_name = "FILE", value_hint = clap::ValueHint::AnyPath)]
    pub journal: Option<std::path::PathBuf>,
    /// The `[tui]` keys' flags; what is in force is `g.tui`.
    #[command(flatten)]
    pub settings: crate::settings::TuiSettings,
    #[command(flatten)]
    pub fabric: crate::cli::FabricArgs,
    #[command(flatten)]
    pub saved: crate::cli::TopologyArgs,
}

pub fn run(g: &Global, a: &Args) -> anyhow::Result<ExitCode> {
    if !(a.interval.is_finite() && a.interval >= 0.1) {
        bail!("--interval must be at least 0.1 seconds");
    }
    let names = crate::fabric::names(g)?;
    let fabrics = match &g.topology {
        Some(path) => {
            // Read once before the screen is taken, so that a file that is no topology
            // is one line on the terminal, not an error inside the UI.
            read_topology(path)?;
            vec![tui::FabricSource {
                name: None,
                source: Box::new(tui::FileSource::new(path, read_topology)),
            }]
        }
        None if crate::fabric_set::is_multi(g.ca.as_deref()) => live_fabrics(g, a)?,
        None => vec![tui::FabricSource {
            name: None,
            source: Box::new(LiveSource::new(g, a, crate::fabric::open_engine(g)?, "")?),
        }],
    };
    // A signal only asks the UI to leave (within one tick), so the terminal is restored and
    // the sweep threads' ports closed; a second one changes nothing.
    crate::signals::install(crate::signals::STOP_SIGNALS, crate::signals::Second::Wait);
    tui::run(
        fabrics,
        tui::Options {
            interval: Duration::from_secs_f64(a.interval),
            names,
            stop_requested: || crate::signals::received().is_some(),
            history: tui::event_log::journal_history(
                a.journal.as_deref(),
                tui::state::EVENT_LOG_LEN,
            ),
        },
    )?;
    Ok(ExitCode::from(exit::OK))
}

/// A topology file as the UI reads it: the screen is the UI's, so the file's warnings are
/// not printed over it.
fn read_topology(path: &std::path::Path) -> anyhow::Result<ibscope_topo::Fabric> {
    crate::fabric::read_file(path).map(|(fabric, _warnings)| fabric)
}

/// The live fabric: rediscovery (with LFTs) and a counter sweep each time, and the
/// findings `ibscope check` would report.
struct LiveSource {
    engine: ibscope_mad::engine::Engine,
    /// The fabric's name in the journal (`-C all`: each fabric's).
    name: String,
    names: Option<ibscope_topo::namemap::NameMap>,
    thresholds: ibscope_topo::counters::Thresholds,
    /// What changed from sweep to sweep: link-flapping, and the journal's lines.
    history: ibscope_topo::journal::FlapHistory,
    journal: Option<ibscope_topo::journal::JournalFile>,
}

impl LiveSource {
    fn new(
        g: &Global,
        a: &Args,
        engine: ibscope_mad::engine::Engine,
        name: &str,
    ) -> anyhow::Result<LiveSource> {
        Ok(LiveSource {
            engine,
            name: name.to_string(),
            names: crate::fabric::names(g)?,
            thresholds: crate::fabric::thresholds(g, None)?,
            history: ibscope_topo::journal::FlapHistory::default(),
            journal: a
                .journal
                .clone()
                .map(ibscope_topo::journal::JournalFile::new),
        })
    }
}

/// The fabrics `-C` names (one per subnet), each a live source under its name; those that
/// cannot be opened are one line each on stderr, and none at all is the error.
fn live_fabrics(g: &Global, a: &Args) -> anyhow::Result<Vec<tui::FabricSource>> {
    let mut out = Vec::new();
    let mut failed = Vec::new();
    for fabric in crate::fabric_set::open(g)? {
        match fabric {
            Ok(o) => out.push(tui::FabricSource {
                name: Some(o.id.name.clone()),
                source: Box::new(LiveSource::new(g, a, o.engine, &o.id.name)?),
            }),
            Err(u) => {
                let line = crate::fabric_set::failure_line(&u.name, &u.error);
                eprintln!("ibscope: error: {line}");
                failed.push(line);
            }
        }
    }
    if out.is_empty() {
        bail!(
            "no fabric could be opened{}",
            if failed.is_empty() {
                ""
            } else {
                " (see above)"
            }
        );
    }
    Ok(out)
}

impl tui::Source for LiveSource {
    fn sweep(&mut self) -> anyhow::Result<tui::Sweep> {
        use ibscope_topo::discover::{discover, DiscoverOptions};
        let started = std::time::Instant::now();
        let taken_at = std::time::SystemTime::now();
        let fabric = discover(&mut self.engine, DiscoverOptions { read_lft: true }, |_| {});
        self.engine.ensure_connected()?;
        if fabric.node_count() == 0 {
            bail!("discovery found no node: is the local port up?");
        }
        let mut eval = crate::cmd::check::evaluate(
            &fabric,
            self.names.as_ref(),
            &ibscope_topo::health::HealthOptions::default(),
            &self.thresholds,
            Some(&mut self.engine),
            ibscope_topo::findings::CounterReads::PerPort,
        );
        self.engine.ensure_connected()?;
        let fabric = std::sync::Arc::new(fabric);
        let (sample, names) = (eval.sample.as_ref(), self.names.as_ref());
        let events = (self.history).record(&fabric, &self.name, sample, names, taken_at);
        if let Some(journal) = &self.journal {
            // The screen is the UI's: a journal that cannot be written is not printed on it.
            let _ = journal.append(&events);
        }
        eval.findings
            .extend(self.history.flapping(self.thresholds.flap));
        // Its links judged as check's findings were (HealthOptions::default() above).
        let mut sweep = tui::Sweep::from_evaluation(fabric, eval, taken_at);
        let sm_lid = self.engine.local().sm_lid;
        sweep.sm = (sm_lid != 0).then(|| format!("LID {sm_lid}"));
        sweep.routes = tui::source::check_routes(&sweep.fabric);
        sweep.duration = started.elapsed();
        Ok(sweep)
    }

    fn set_cancel(&mut self, token: ibscope_mad::engine::CancelToken) {
        self.engine.set_cancel(Some(token));
    }

    fn describe(&self) -> String {
        let l = self.engine.local();
        format!("{}/{}", l.ca_name, l.port_num)
    }

    fn connection_lost(&self) -> bool {
        self.engine.transport_lost().is_some()
    }
}
