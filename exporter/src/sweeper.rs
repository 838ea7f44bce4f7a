//! The sweeper of one fabric of `serve`, on a thread of its own: it opens the fabric's
//! management port (through its relay agent), discovers the fabric, sweeps the counters
//! every interval, renders the page ([`prometheus::write_fabric_page`]), compressing each
//! family as it is rendered, and hands it to its supervisor as [`Frame`]s, a family at a
//! time (one that is as on the last page by its name only); it rediscovers when the
//! fabric changed under it. When the transport is lost it says so and ends: the
//! supervisor starts another one.

use std::collections::HashMap;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

use anyhow::Result;
use ibscope_mad::engine::{CancelToken, Engine};
use ibscope_topo::changes;
use ibscope_topo::counters::{self, CounterTarget, Sample, Thresholds};
use ibscope_topo::discover::{self, DiscoverOptions};
use ibscope_topo::export::prometheus::{self, PageLabels, PageStats, PortFilter, ScrapeErrors};
use ibscope_topo::findings::{self, Finding};
use ibscope_topo::health::{self, HealthOptions, HealthReport};
use ibscope_topo::hosts::Hosts;
use ibscope_topo::journal::JournalFile;
use ibscope_topo::namemap::NameMap;
use ibscope_topo::{Fabric, FabricId};

use crate::frames::Frame;
use crate::pieces::{Deflated, PageDeflater, PieceCache};

/// Opens the fabric's management port (or relay), giving up when the function it is given
/// says stop: the fabric's identity and its engine. Called again for every reopening.
pub type OpenFabric = Arc<dyn Fn(&dyn Fn() -> bool) -> Result<(FabricId, Engine)> + Send + Sync>;

/// How a fabric is swept and its page made: the same for every sweeper of the fabric.
#[derive(Clone)]
pub struct SweepSettings {
    /// The fabric's name (the `fabric` label) until it is opened.
    pub name: String,
    pub names: Option<NameMap>,
    /// `check`'s thresholds in force, for the findings family.
    pub thresholds: Thresholds,
    pub filter: PortFilter,
    pub counters: Vec<&'static str>,
    pub interval: Duration,
    pub rediscover_every: u64,
    /// Send the fabric after each discovery (`serve` compares several fabrics' planes).
    pub send_fabric: bool,
    /// Where what changed between two discoveries (links down and up, state changes,
    /// downshifts) is appended, if anywhere.
    pub journal: Option<JournalFile>,
}

/// One fabric's sweeps, on a thread of `serve`: from opening the port until it is lost
/// or the sweeper is asked to stop.
pub struct Sweeper {
    /// How it sweeps; its `name` becomes the fabric's real one once opened.
    settings: SweepSettings,
    /// The engine's cancel token, set when the sweeper is asked to stop.
    stop: CancelToken,
    /// Where the frames go (the fabric's supervisor).
    out: mpsc::Sender<Frame>,
    /// By node GUID, kept across rediscoveries.
    scrape_errors: HashMap<u64, ScrapeErrors>,
    sweeps: u64,
    discoveries: u64,
    /// Last page's compressed families: the fabric's families that did not change are
    /// sent again without being compressed again.
    pieces: PieceCache,
}

/// The discovered fabric and what is derived from it once per discovery.
struct Discovered {
    fabric: Fabric,
    targets: Vec<CounterTarget>,
    /// The links' health (degraded or not): it changes only with the fabric.
    health: HealthReport,
    /// Its hosts and rails (the host and rail labels of HCA ports).
    hosts: Hosts,
    /// Its ports' labels on the page, made once for every page until the next discovery.
    labels: PageLabels,
    duration: Duration,
}

/// Where the sweeper is between sweeps.
#[derive(Default)]
struct Progress {
    current: Option<Discovered>,
    /// The fabric of the discovery before `current` was dropped for a new one: what the
    /// journal compares the new one with.
    last_fabric: Option<Fabric>,
    previous: Option<Sample>,
    /// The last sample before a rediscovery: what the first sample after it is compared
    /// with for the journal's counter events.
    before_discovery: Option<Sample>,
    /// A day of what changed between discoveries and sweeps: link-flapping on the page.
    history: ibscope_topo::journal::FlapHistory,
    since_discovery: u64,
}

fn micros(since: Instant) -> u64 {
    since.elapsed().as_micros() as u64
}

/// Why a sweep ended the loop.
enum LoopEnd {
    /// Asked to stop (or `serve` stopped reading).
    Stopped,
    /// The transport is gone: the error to report.
    Lost(anyhow::Error),
}

impl Sweeper {
    pub fn new(settings: SweepSettings, stop: CancelToken, out: mpsc::Sender<Frame>) -> Sweeper {
        Sweeper {
            settings,
            stop,
            out,
            scrape_errors: HashMap::new(),
            sweeps: 0,
            discoveries: 0,
            pieces: PieceCache::default(),
        }
    }

    fn stopped(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Hand the supervisor a frame; a supervisor that stopped reading stops us.
    fn send(&mut self, frame: Frame) {
        if self.out.send(frame).is_err() {
            self.stop.cancel();
        }
    }

    /// Until stopped (the stop token, or `sleeper`'s sender gone) or the transport is
    /// lost; true when it stopped as asked. The engine is closed (agents unregistered
    /// after a drain) before the last frame goes out.
    pub fn run(mut self, open: &OpenFabric, sleeper: mpsc::Receiver<()>) -> bool {
        lower_own_priority();
        let stop = self.stop.clone();
        let mut engine = match open(&|| stop.is_cancelled()) {
            Ok((id, engine)) => {
                let local = engine.local();
                let port = format!("{}/{}", local.ca_name, local.port_num);
                self.settings.name = id.name.clone();
                self.send(Frame::Opened { port, id });
                engine
            }
            Err(e) => {
                self.send(Frame::Failed {
                    error: format!("{e:#}"),
                });
                return false;
            }
        };
        // A stop then abandons the running sweep within about one MAD timeout.
        engine.set_cancel(Some(self.stop.clone()));
        let mut progress = Progress::default();
        let ended = loop {
            let started = Instant::now();
            match self.sweep_once(&mut engine, &mut progress) {
                Ok(true) => {}
                Ok(false) => break LoopEnd::Stopped,
                Err(e) => break LoopEnd::Lost(e),
            }
            match sleeper.recv_timeout(self.settings.interval.saturating_sub(started.elapsed())) {
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                // Woken (or the sender gone): asked to stop.
                _ => break LoopEnd::Stopped,
            }
        };
        // Late replies drained, agents unregistered (see Engine's Drop).
        drop(engine);
        match ended {
            LoopEnd::Stopped => {
                self.send(Frame::Closed);
                true
            }
            LoopEnd::Lost(e) => {
                self.send(Frame::Lost {
                    error: format!("{e:#}"),
                });
                false
            }
        }
    }

    /// Discover if needed, sweep, publish the page, and decide whether to rediscover.
    /// `Ok(false)` when asked to stop, an error when the transport is lost.
    fn sweep_once(&mut self, engine: &mut Engine, progress: &mut Progress) -> Result<bool> {
        let go_on = |this: &Self, engine: &Engine| -> Result<bool> {
            ensure_connected(engine)?;
            Ok(!this.stopped())
        };
        if progress.current.is_none() {
            let d = self.discover(engine);
            if ensure_connected(engine).is_ok() {
                if let Some(last) = progress.last_fabric.take() {
                    let events = ibscope_topo::journal::changes(
                        &last,
                        &d.fabric,
                        self.settings.names.as_ref(),
                        SystemTime::now(),
                    );
                    self.record(&mut progress.history, events);
                }
            }
            // Not a discovery the transport was lost in the middle of.
            if self.settings.send_fabric && ensure_connected(engine).is_ok() {
                let fabric = Box::new(d.fabric.clone());
                self.send(Frame::Fabric { fabric });
            }
            progress.current = Some(d);
            progress.before_discovery = progress.previous.take();
            progress.since_discovery = 0;
        }
        if !go_on(self, engine)? {
            return Ok(false);
        }
        let d = progress.current.as_mut().expect("discovered above");
        let t = Instant::now();
        // The breakdown of errors that counted: the page's breakdown families, and the
        // findings' causes.
        let options = counters::SweepOptions {
            details: counters::DetailReads::Explaining,
        };
        let sample = counters::sweep_with(
            engine,
            &d.fabric,
            &d.targets,
            self.settings.names.as_ref(),
            options,
        );
        let sweep_us = micros(t);
        if !go_on(self, engine)? {
            return Ok(false);
        }
        // The SM check `check` makes, against the SM the local port names now.
        let local = engine.local().clone();
        let sm_lid = findings::local_master_sm_lid(engine, local.port_num).unwrap_or(local.sm_lid);
        let sm = findings::sm_finding(&findings::read_sm(engine, sm_lid));
        if !go_on(self, engine)? {
            return Ok(false);
        }
        self.sweeps += 1;
        progress.since_discovery += 1;
        let before = progress
            .previous
            .as_ref()
            .or(progress.before_discovery.as_ref());
        if let Some(before) = before {
            let mut events =
                ibscope_topo::journal::counter_changes(before, &sample, SystemTime::now());
            ibscope_topo::journal::label_ends(&mut events, &d.hosts);
            self.record(&mut progress.history, events);
        }
        progress.before_discovery = None;
        let watched = progress.history.flapping(self.settings.thresholds.flap);
        if !self.send_page(d, &sample, sweep_us, sm.as_ref(), &watched) {
            return Ok(false);
        }
        let t = Instant::now();
        let states_moved = changes::port_states_changed(engine, &d.fabric);
        tracing::debug!(us = micros(t), "port states checked");
        ensure_connected(engine)?;
        let changed = states_moved
            || progress
                .previous
                .as_ref()
                .is_some_and(|p| changes::topology_changed(p, &sample));
        let empty = d.targets.is_empty();
        let due = self.settings.rediscover_every > 0
            && progress.since_discovery >= self.settings.rediscover_every;
        if changed || empty || due {
            tracing::info!("rediscovering (change seen: {changed})");
            progress.last_fabric = progress.current.take().map(|d| d.fabric);
        }
        progress.previous = Some(sample);
        Ok(!self.stopped())
    }

    /// Render the page of this sweep and send it, family by family, each compressed as
    /// it is rendered; false when stopped meanwhile (then the page is not ended: `serve`
    /// drops the families it got).
    fn send_page(
        &mut self,
        d: &mut Discovered,
        sample: &Sample,
        sweep_us: u64,
        sm: Option<&Finding>,
        watched: &[Finding],
    ) -> bool {
        let failure = self.account(sample, d);
        let t = Instant::now();
        let stats = PageStats {
            fabric: &self.settings.name,
            filter: self.settings.filter,
            counters: &self.settings.counters,
            sweeps: self.sweeps,
            discoveries: self.discoveries,
            discovery_seconds: d.duration.as_secs_f64(),
            scrape_errors: &self.scrape_errors,
            thresholds: &self.settings.thresholds,
            sm,
            watched,
        };
        let (mut text, mut gzip) = (0u64, 0usize);
        let mut written = true;
        let out = &mut self.out;
        let done = |name: &str, head: &str, samples: &Deflated, as_before: bool| {
            text += head.len() as u64 + samples.text_len();
            gzip += samples.bytes().len();
            let name = name.to_string();
            let frame = match as_before {
                true => Frame::Unchanged { name },
                false => Frame::Family {
                    name,
                    head: head.to_string(),
                    samples: samples.clone(),
                },
            };
            written = written && out.send(frame).is_ok();
        };
        let mut sink = PageDeflater::reusing(&mut self.pieces, done);
        prometheus::write_fabric_page(
            &d.fabric,
            &d.health,
            &d.hosts,
            self.settings.names.as_ref(),
            sample,
            &stats,
            Some(&mut d.labels),
            &mut sink,
        );
        sink.finish();
        if !written {
            // The supervisor stopped reading: stop too.
            self.stop.cancel();
        }
        if self.stopped() {
            return false;
        }
        tracing::debug!(
            fabric = %self.settings.name,
            sweep_us,
            render_us = micros(t),
            text,
            gzip,
            compressed = self.pieces.compressed,
            reused = self.pieces.reused,
            "swept"
        );
        self.send(Frame::Page { failure });
        !self.stopped()
    }

    /// What changed: remembered for link-flapping, and appended to the journal if any.
    fn record(
        &self,
        history: &mut ibscope_topo::journal::FlapHistory,
        events: Vec<ibscope_topo::journal::Event>,
    ) {
        history.add(&events, SystemTime::now());
        self.append(events);
    }

    fn append(&self, mut events: Vec<ibscope_topo::journal::Event>) {
        let Some(journal) = &self.settings.journal else {
            return;
        };
        if events.is_empty() {
            return;
        }
        for e in &mut events {
            e.fabric.clone_from(&self.settings.name);
        }
        if let Err(e) = journal.append(&events) {
            tracing::warn!("cannot write the journal {}: {e}", journal.path.display());
        }
    }

    fn discover(&mut self, exec: &mut Engine) -> Discovered {
        let t = Instant::now();
        let fabric = discover::discover(exec, DiscoverOptions::default(), |_| {});
        self.discoveries += 1;
        let mut targets = counters::targets(&fabric, None, None);
        targets.retain(|t| self.settings.filter.keeps(fabric.node(t.node), t.port));
        tracing::debug!(
            us = micros(t),
            nodes = fabric.node_count(),
            targets = targets.len(),
            "discovered"
        );
        let health = health::assess(
            &fabric,
            self.settings.names.as_ref(),
            &HealthOptions::default(),
        );
        let hosts = Hosts::group(&fabric, self.settings.names.as_ref());
        let duration = t.elapsed();
        let names = self.settings.names.as_ref();
        let labels = PageLabels::new(
            &fabric,
            names,
            &hosts,
            &self.settings.name,
            self.settings.filter,
        );
        Discovered {
            fabric,
            targets,
            health,
            hosts,
            labels,
            duration,
        }
    }

    /// Count this sweep's failures per node; the sweep failed when no port answered.
    fn account(&mut self, sample: &Sample, d: &Discovered) -> Option<String> {
        for (_, node) in d.fabric.nodes() {
            self.scrape_errors.entry(node.guid).or_default();
        }
        let mut answered = 0usize;
        for p in &sample.ports {
            if p.counters.is_some() {
                answered += 1;
            }
            let e = self.scrape_errors.entry(p.at.node.guid).or_default();
            for msg in &p.errors {
                e.errors += 1;
                if msg.contains("no reply after") {
                    e.timeouts += 1;
                }
            }
        }
        if d.targets.is_empty() {
            Some(format!(
                "no port with a LID to read ({} nodes discovered; is an SM running?)",
                d.fabric.node_count()
            ))
        } else if answered == 0 {
            Some(format!(
                "none of {} ports answered PortCounters",
                sample.ports.len()
            ))
        } else {
            None
        }
    }
}

/// Give the calling thread (the sweeper) a lower CPU priority than the HTTP threads, so a
/// scrape is not queued behind rendering and compressing the page on a busy machine. Only
/// ever lowers it (nice + 10, at most 19); threads it starts (the umad transport's) inherit
/// the value.
fn lower_own_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain syscalls on this thread's own id; errno is read right after.
    unsafe {
        let tid = libc::gettid() as libc::id_t;
        *libc::__errno_location() = 0;
        let current = libc::getpriority(libc::PRIO_PROCESS, tid);
        if current == -1 && *libc::__errno_location() != 0 {
            return;
        }
        let lower = (current + SWEEPER_NICE).min(19);
        if libc::setpriority(libc::PRIO_PROCESS, tid, lower) != 0 {
            tracing::debug!("could not lower the sweeper's priority");
        }
    }
}

/// How much nicer the sweeper is than the HTTP threads.
const SWEEPER_NICE: i32 = 10;

/// The engine's "lost the connection to the fabric" error once its transport is gone, so
/// the sweep ends with that one error instead of one failure per query.
fn ensure_connected(engine: &Engine) -> Result<()> {
    match engine.transport_lost() {
        Some(e) => Err(anyhow::Error::new(e.clone())),
        None => Ok(()),
    }
}
