//! A sweeper thread of `serve`, one per fabric: it owns the fabric's management port,
//! discovers the fabric, sweeps the counters every interval, renders the page
//! ([`prometheus::fabric_page`]) and publishes it to its [`Slot`] of the pages the HTTP
//! threads read; it rediscovers when the fabric changed under it. With several fabrics,
//! a port that cannot be opened or whose connection is lost marks its slot down and is
//! opened again every interval, while the other sweepers go on.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use ibscope_mad::engine::{CancelToken, Engine, Request};
use ibscope_topo::counters::{self, CounterTarget, Sample, Thresholds};
use ibscope_topo::discover::{self, DiscoverOptions, SmpExecutor};
use ibscope_topo::export::prometheus::{self, PageStats, PortFilter, ScrapeErrors};
use ibscope_topo::findings::{self, Finding};
use ibscope_topo::health::{self, HealthOptions, HealthReport};
use ibscope_topo::hosts::Hosts;
use ibscope_topo::namemap::NameMap;
use ibscope_topo::{Fabric, PortKey};

use super::http::{Pages, Snapshot};
use crate::cli::Global;
use crate::fabrics::Planned;

pub struct Sweeper {
    pub g: Global,
    /// Which fabric: its slot in `pages`, and how to open it again.
    pub slot: usize,
    pub planned: Planned,
    /// The engine opened at start (`None`: it did not open; try again).
    pub engine: Option<Engine>,
    /// Several fabrics: a lost one is opened again; with one, its loss ends `serve`.
    pub multi: bool,
    pub names: Option<NameMap>,
    /// `check`'s thresholds in force, for the findings family.
    pub thresholds: Thresholds,
    pub filter: PortFilter,
    pub counters: Vec<&'static str>,
    pub interval: Duration,
    pub rediscover_every: u64,
    pub pages: Arc<Pages>,
    /// The sweeper engine's cancel token, set by the main thread to stop.
    pub stop: CancelToken,
    /// Sweeps of every fabric, for the stop message.
    pub sweeps: Arc<AtomicU64>,
    /// Sweeps of this fabric, for its page.
    pub own_sweeps: u64,
    /// By node GUID, kept across rediscoveries.
    pub scrape_errors: HashMap<u64, ScrapeErrors>,
    pub discoveries: u64,
}

/// The discovered fabric and what is derived from it once per discovery.
struct Discovered {
    fabric: Fabric,
    targets: Vec<CounterTarget>,
    /// The links' health (degraded or not): it changes only with the fabric.
    health: HealthReport,
    /// Its hosts and rails (the host and rail labels of HCA ports).
    hosts: Hosts,
    duration: Duration,
}

/// Where the sweeper is between sweeps.
#[derive(Default)]
struct Progress {
    current: Option<Discovered>,
    previous: Option<Sample>,
    since_discovery: u64,
    /// Kept one sweep longer than the cache does, so the sweeper (not a scrape) usually
    /// frees a page.
    retired: Option<Arc<Snapshot>>,
}

fn micros(since: Instant) -> u64 {
    since.elapsed().as_micros() as u64
}

impl Sweeper {
    fn stopped(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Until stopped. The engine is closed (agents unregistered after a drain) when this
    /// returns. With one fabric, the loss of its transport is sent on `lost` (the main
    /// thread ends the command with it); with several, the fabric is marked down and its
    /// port opened again every interval.
    pub fn run(mut self, lost: mpsc::Sender<anyhow::Error>, sleeper: mpsc::Receiver<()>) {
        lower_own_priority();
        let mut engine = self.engine.take();
        while !self.stopped() {
            let mut e = match engine.take() {
                Some(e) => e,
                None => match crate::fabrics::open_one_until(&self.g, &self.planned, &|| {
                    self.stop.is_cancelled()
                }) {
                    Ok(opened) => {
                        tracing::info!(fabric = %self.planned.name, "opened again");
                        self.pages.slots[self.slot].set_up();
                        opened.engine
                    }
                    Err(e) => {
                        self.pages.slots[self.slot].set_down(format!("{e:#}"));
                        if !self.sleep(&sleeper, Instant::now()) {
                            return;
                        }
                        continue;
                    }
                },
            };
            // A stop then abandons the running sweep within about one MAD timeout.
            e.set_cancel(Some(self.stop.clone()));
            let Some(error) = self.sweep_until_lost(&mut e, &sleeper) else {
                return;
            };
            // The transport is gone: every MAD would fail at once.
            drop(e);
            if !self.multi {
                let _ = lost.send(error);
                return;
            }
            tracing::warn!(fabric = %self.planned.name, error = %format!("{error:#}"), "lost");
            self.pages.slots[self.slot].set_down(format!("{error:#}"));
            if !self.sleep(&sleeper, Instant::now()) {
                return;
            }
        }
    }

    /// Wait out the interval from `started`; false when the main thread wants us to stop.
    fn sleep(&self, sleeper: &mpsc::Receiver<()>, started: Instant) -> bool {
        match sleeper.recv_timeout(self.interval.saturating_sub(started.elapsed())) {
            Err(mpsc::RecvTimeoutError::Timeout) => !self.stopped(),
            // Woken (or the sender gone): the main thread wants us to stop.
            _ => false,
        }
    }

    /// Sweep every interval until stopped (`None`) or the transport is lost (its error).
    fn sweep_until_lost(
        &mut self,
        engine: &mut Engine,
        sleeper: &mpsc::Receiver<()>,
    ) -> Option<anyhow::Error> {
        let gone = std::cell::RefCell::new(None);
        let lost = |engine: &Engine| match crate::fabric::ensure_connected(engine) {
            Ok(()) => false,
            Err(e) => {
                *gone.borrow_mut() = Some(e);
                true
            }
        };
        let mut progress = Progress::default();
        while !self.stopped() {
            let started = Instant::now();
            if !self.sweep_once(engine, &mut progress, &lost) {
                break;
            }
            if !self.sleep(sleeper, started) {
                break;
            }
        }
        gone.into_inner()
    }

    /// Discover if needed, sweep, publish the page, and decide whether to rediscover.
    /// False when the sweeper must stop (asked to, or the transport is lost).
    fn sweep_once(
        &mut self,
        engine: &mut Engine,
        progress: &mut Progress,
        lost: &dyn Fn(&Engine) -> bool,
    ) -> bool {
        if progress.current.is_none() {
            progress.current = Some(self.discover(engine));
            progress.previous = None;
            progress.since_discovery = 0;
        }
        if lost(engine) || self.stopped() {
            return false;
        }
        let d = progress.current.as_ref().expect("discovered above");
        let t = Instant::now();
        // The breakdown of errors that counted: the page's breakdown families, and the
        // findings' causes.
        let options = counters::SweepOptions {
            details: counters::DetailReads::Explaining,
        };
        let sample =
            counters::sweep_with(engine, &d.fabric, &d.targets, self.names.as_ref(), options);
        let sweep_us = micros(t);
        if lost(engine) || self.stopped() {
            return false;
        }
        // The SM check `check` makes, against the SM the local port names now.
        let local = engine.local().clone();
        let sm_lid = findings::local_master_sm_lid(engine, local.port_num).unwrap_or(local.sm_lid);
        let sm = findings::sm_finding(&findings::read_sm(engine, sm_lid));
        if lost(engine) || self.stopped() {
            return false;
        }
        self.sweeps.fetch_add(1, Ordering::SeqCst);
        self.own_sweeps += 1;
        let sweeps = self.own_sweeps;
        progress.since_discovery += 1;
        let Some(snap) = self.snapshot(d, &sample, sweeps, sweep_us, sm.as_ref()) else {
            return false;
        };
        drop(progress.retired.take());
        progress.retired = self.pages.slots[self.slot].page.store(Arc::new(snap));
        let t = Instant::now();
        let states_moved = port_states_changed(engine, &d.fabric);
        tracing::debug!(us = micros(t), "port states checked");
        if lost(engine) {
            return false;
        }
        let changed = states_moved
            || progress
                .previous
                .as_ref()
                .is_some_and(|p| topology_changed(p, &sample));
        let empty = d.targets.is_empty();
        let due = self.rediscover_every > 0 && progress.since_discovery >= self.rediscover_every;
        if changed || empty || due {
            tracing::info!("rediscovering (change seen: {changed})");
            progress.current = None;
        }
        progress.previous = Some(sample);
        true
    }

    /// The page of this sweep, rendered and compressed; `None` when stopped meanwhile.
    fn snapshot(
        &mut self,
        d: &Discovered,
        sample: &Sample,
        sweeps: u64,
        sweep_us: u64,
        sm: Option<&Finding>,
    ) -> Option<Snapshot> {
        let failure = self.account(sample, d);
        let t = Instant::now();
        let text = self.render(d, sample, sweeps, sm);
        let render_us = micros(t);
        if self.stopped() {
            return None;
        }
        let t = Instant::now();
        let snap = Snapshot::new(&text, failure);
        let (text_len, gzip_len) = snap.sizes();
        tracing::debug!(
            fabric = %self.planned.name,
            sweep_us,
            render_us,
            gzip_us = micros(t),
            text = text_len,
            gzip = gzip_len,
            "swept"
        );
        Some(snap)
    }

    fn discover(&mut self, exec: &mut Engine) -> Discovered {
        let t = Instant::now();
        let fabric = discover::discover(exec, DiscoverOptions::default(), |_| {});
        self.discoveries += 1;
        let mut targets = counters::targets(&fabric, None, None);
        targets.retain(|t| self.filter.keeps(fabric.node(t.node), t.port));
        tracing::debug!(
            us = micros(t),
            nodes = fabric.node_count(),
            targets = targets.len(),
            "discovered"
        );
        let health = health::assess(&fabric, self.names.as_ref(), &HealthOptions::default());
        let hosts = Hosts::group(&fabric, self.names.as_ref());
        Discovered {
            fabric,
            targets,
            health,
            hosts,
            duration: t.elapsed(),
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
            let e = self.scrape_errors.entry(p.at.node_guid).or_default();
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

    fn render(&self, d: &Discovered, sample: &Sample, sweeps: u64, sm: Option<&Finding>) -> String {
        prometheus::fabric_page(
            &d.fabric,
            &d.health,
            &d.hosts,
            self.names.as_ref(),
            sample,
            &PageStats {
                fabric: &self.pages.slots[self.slot].name,
                filter: self.filter,
                counters: &self.counters,
                sweeps,
                discoveries: self.discoveries,
                discovery_seconds: d.duration.as_secs_f64(),
                scrape_errors: &self.scrape_errors,
                thresholds: &self.thresholds,
                sm,
            },
        )
    }
}

/// Whether any switch port's logical state differs from the one discovery recorded: one
/// PortInfo per switch port (1..N) per sweep, over the discovery's directed routes. Covers
/// links going down and coming up; a back-to-back CA link is seen only through its
/// counters. (ibsim changes neither SwitchInfo.PortStateChange nor LinkDownedCounter on
/// Unlink, so this is the signal that works everywhere.) With --active-only this is also
/// what brings a port that came up onto the page.
fn port_states_changed<E: SmpExecutor>(exec: &mut E, fabric: &Fabric) -> bool {
    use ibscope_mad::attr::PortInfo;
    use ibscope_mad::smp::{DrPath, SmpRoute};
    let mut batch = Vec::new();
    for (_, node) in fabric.switches() {
        let route = match node.dr_path.as_deref().map(DrPath::parse) {
            Some(Ok(path)) => SmpRoute::Directed(path),
            _ => match node.lid() {
                Some(lid) => SmpRoute::Lid(lid),
                None => continue,
            },
        };
        for p in &node.ports {
            if p.number == 0 {
                continue;
            }
            batch.push((
                p.state,
                Request::get::<PortInfo>(&route, u32::from(p.number)),
            ));
        }
    }
    let mut changed = false;
    exec.execute(batch, &mut |known, result, _| {
        if let Ok(Ok(info)) = result.map(|r| r.decode::<PortInfo>()) {
            if Some(info.state()) != known {
                changed = true;
            }
        }
    });
    changed
}

/// A sign that the fabric changed under us: a port's LinkDownedCounter moved, or its PMA
/// started or stopped answering.
fn topology_changed(prev: &Sample, cur: &Sample) -> bool {
    let before: HashMap<PortKey, (bool, Option<u64>)> = prev
        .ports
        .iter()
        .map(|p| {
            (
                p.at.key(),
                (p.counters.is_some(), p.value("LinkDownedCounter")),
            )
        })
        .collect();
    cur.ports.iter().any(|p| match before.get(&p.at.key()) {
        Some(&(answered, downed)) => {
            answered != p.counters.is_some()
                || (downed.is_some()
                    && p.counters.is_some()
                    && downed != p.value("LinkDownedCounter"))
        }
        None => true,
    })
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
