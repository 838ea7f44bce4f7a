//! One fabric's sweeps, on a thread of `serve`'s process: it opens the fabric's management
//! port (through its relay agent), discovers the fabric, sweeps the counters every
//! interval, renders and compresses the page into the fabric's slot, and rediscovers when
//! the fabric changed under it ([`changes`]). When the transport is lost the slot keeps its
//! last good page, marked stale, and the port is opened again (a new agent): the first
//! time [`REOPEN_FIRST`] after the loss, then twice as late each time, at most
//! [`REOPEN_MAX`] apart; a sweep that made a good page resets the delay.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{anyhow, Result};
use ibscope_mad::engine::{CancelToken, Engine};
use ibscope_topo::changes;
use ibscope_topo::counters::{self, CounterTarget, Sample, Thresholds};
use ibscope_topo::discover::{self, DiscoverOptions};
use ibscope_topo::export::prometheus::{self, PageLabels, PageStats, PortFilter, ScrapeErrors};
use ibscope_topo::findings::{self, Finding};
use ibscope_topo::health::{self, HealthOptions, HealthReport};
use ibscope_topo::hosts::Hosts;
use ibscope_topo::journal::{FlapHistory, JournalFile};
use ibscope_topo::namemap::NameMap;
use ibscope_topo::{Fabric, FabricId};

use crate::page::PageWriter;
use crate::slots::{FabricSlot, Pages};

/// The delay before the first reopening after a loss.
pub const REOPEN_FIRST: Duration = Duration::from_secs(1);
/// The longest delay between two reopenings.
pub const REOPEN_MAX: Duration = Duration::from_secs(30);

/// Opens the fabric's management port (or relay), giving up when the function it is given
/// says stop: the fabric's identity and its engine. Called again for every reopening.
pub type OpenFabric = Arc<dyn Fn(&dyn Fn() -> bool) -> Result<(FabricId, Engine)> + Send + Sync>;

/// How a fabric is swept and its page made.
#[derive(Clone)]
pub struct SweepSettings {
    /// The fabric's planned name, its slot's until the port is open (then the slot has
    /// the name opening it gives).
    pub name: String,
    pub names: Option<NameMap>,
    /// `check`'s thresholds in force, for the findings family.
    pub thresholds: Thresholds,
    pub filter: PortFilter,
    pub counters: Vec<&'static str>,
    pub interval: Duration,
    /// Rediscover every so many sweeps even without a sign of change (0: never).
    pub rediscover_every: u64,
    /// Where what changed (links down and up, state changes, downshifts, LinkDowned
    /// rises) is appended, if anywhere.
    pub journal: Option<JournalFile>,
}

/// What a fabric's thread tells the main thread.
pub enum PortOpening {
    /// The port was opened the first time.
    Opened,
    /// The port could not be opened the first time. With one fabric `serve` fails with
    /// this (and the thread has ended); with several the thread keeps trying.
    NotOpened { slot: usize, error: anyhow::Error },
}

/// One fabric to serve: how its port is opened (every time), how it is swept.
pub struct FabricToServe {
    pub open: OpenFabric,
    pub settings: SweepSettings,
}

/// Sweep `fabric` into slot `slot` of `pages` on a thread of its own until `stop`, telling
/// `events` how its first opening went (`multi`: several fabrics, where one that cannot be
/// opened at start is tried again, not fatal). The thread is not joined: one stuck opening
/// a port inside the simulator's shim (which waits for a lost ibsim for ever) is left to
/// the process's exit; a stop waits for the slot's port to close.
pub fn spawn(
    slot: usize,
    multi: bool,
    fabric: FabricToServe,
    pages: Arc<Pages>,
    events: mpsc::Sender<PortOpening>,
    stop: CancelToken,
) -> Result<()> {
    let sweeper = Sweeper {
        slot,
        multi,
        open: fabric.open,
        settings: fabric.settings,
        pages,
        events,
        stop,
        scrape_errors: HashMap::new(),
        sweeps: 0,
        discoveries: 0,
    };
    std::thread::Builder::new()
        .name(format!("sweeper-{slot}"))
        .spawn(move || sweeper.run())?;
    Ok(())
}

/// The discovered fabric and what is derived from it once per discovery.
struct Discovered {
    fabric: Arc<Fabric>,
    targets: Vec<CounterTarget>,
    health: HealthReport,
    hosts: Arc<Hosts>,
    /// Its ports' labels on the page, made once for every page until the next discovery.
    labels: PageLabels,
    duration: Duration,
}

/// Where a port's sweeps are between two of them.
#[derive(Default)]
struct SweepState {
    current: Option<Discovered>,
    previous: Option<Sample>,
    /// A day of what changed between sweeps: link-flapping on the page, and the journal.
    history: FlapHistory,
    since_discovery: u64,
}

struct Sweeper {
    /// Its slot in the pages.
    slot: usize,
    multi: bool,
    open: OpenFabric,
    settings: SweepSettings,
    pages: Arc<Pages>,
    events: mpsc::Sender<PortOpening>,
    /// Every sweeper's: a stop ends them all.
    stop: CancelToken,
    /// By node GUID, since `serve` started.
    scrape_errors: HashMap<u64, ScrapeErrors>,
    sweeps: u64,
    discoveries: u64,
}

fn micros(since: Instant) -> u64 {
    since.elapsed().as_micros() as u64
}

impl Sweeper {
    fn stopped(&self) -> bool {
        self.stop.is_cancelled()
    }

    fn slot(&self) -> &FabricSlot {
        &self.pages.slots[self.slot]
    }

    /// Sleep `limit`, or less when asked to stop; false when asked.
    fn wait(&self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while !self.stopped() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
        !self.stopped()
    }

    fn run(mut self) {
        let (mut delay, mut ever_opened, mut first) = (REOPEN_FIRST, false, true);
        while !self.stopped() {
            let stop = self.stop.clone();
            let (why, good) = match (self.open)(&|| stop.is_cancelled()) {
                Ok((id, engine)) => {
                    if let Some(other) = self.pages.claim_subnet(self.slot, &id) {
                        eprintln!(
                            "note: {} reaches the same subnet as {other} ({}): swept once, as {other}",
                            id.name,
                            id.identity_text()
                        );
                        self.slot().set_merged();
                        return;
                    }
                    let (ca, port) = (&engine.local().ca_name, engine.local().port_num);
                    tracing::info!(slot = self.slot, "management port {ca}/{port} open");
                    self.slot().set_opened(&id.name, ever_opened);
                    if !ever_opened {
                        let _ = self.events.send(PortOpening::Opened);
                    }
                    ever_opened = true;
                    self.slot().port_open.store(true, Ordering::SeqCst);
                    let ended = self.sweep_port(engine);
                    self.slot().port_open.store(false, Ordering::SeqCst);
                    ended
                }
                Err(e) => (format!("{e:#}"), false),
            };
            if self.stopped() {
                return;
            }
            if first && !ever_opened {
                let (slot, error) = (self.slot, anyhow!("{why}"));
                let _ = self.events.send(PortOpening::NotOpened { slot, error });
                if !self.multi {
                    return;
                }
            }
            first = false;
            self.slot().set_down(why, false);
            if good {
                delay = REOPEN_FIRST;
            }
            tracing::info!(slot = self.slot, "reopening in {delay:?}");
            if !self.wait(delay) {
                return;
            }
            delay = next_delay(delay);
        }
    }

    /// Sweep every interval until stopped or the transport is lost: why it ended, and
    /// whether a sweep made a good page. The port is closed (agents unregistered after a
    /// drain) on the way out.
    fn sweep_port(&mut self, mut engine: Engine) -> (String, bool) {
        engine.set_cancel(Some(self.stop.clone()));
        let mut progress = SweepState::default();
        let mut good = false;
        let lost = loop {
            let started = Instant::now();
            match self.sweep_once(&mut engine, &mut progress) {
                Ok(Some(made_good)) => good |= made_good,
                Ok(None) => break None,
                Err(e) => break Some(format!("{e:#}")),
            }
            if !self.wait(self.settings.interval.saturating_sub(started.elapsed())) {
                break None;
            }
        };
        drop(engine);
        match lost {
            Some(why) => {
                self.slot().set_down(why.clone(), true);
                (why, good)
            }
            None => ("the sweeper stopped".to_string(), good),
        }
    }

    /// Discover if needed, sweep, publish the page, and decide whether to rediscover.
    /// `Ok(Some(good))` after a page (good: its sweep reached a port), `Ok(None)` when
    /// asked to stop, an error when the transport is lost.
    fn sweep_once(
        &mut self,
        engine: &mut Engine,
        progress: &mut SweepState,
    ) -> Result<Option<bool>> {
        let go_on = |this: &Self, engine: &Engine| -> Result<bool> {
            engine.ensure_connected()?;
            Ok(!this.stopped())
        };
        if progress.current.is_none() {
            let d = self.discover(engine);
            if self.multi && engine.ensure_connected().is_ok() {
                self.slot().set_discovery(d.fabric.clone(), d.hosts.clone());
            }
            progress.current = Some(d);
            progress.since_discovery = 0;
        }
        if !go_on(self, engine)? {
            return Ok(None);
        }
        let d = progress.current.as_mut().expect("discovered above");
        let t = Instant::now();
        let options = counters::SweepOptions {
            details: counters::DetailReads::Explaining,
        };
        let names = self.settings.names.as_ref();
        let sample = counters::sweep_with(engine, &d.fabric, &d.targets, names, options);
        let sweep_us = micros(t);
        if !go_on(self, engine)? {
            return Ok(None);
        }
        let local = engine.local().clone();
        let sm_lid = findings::local_master_sm_lid(engine, local.port_num).unwrap_or(local.sm_lid);
        let sm = findings::sm_finding(&findings::read_sm(engine, sm_lid));
        if !go_on(self, engine)? {
            return Ok(None);
        }
        self.sweeps += 1;
        progress.since_discovery += 1;
        let (name, now) = (&self.slot().name(), SystemTime::now());
        let events = (progress.history).record(&d.fabric, name, Some(&sample), names, now);
        if let Some(file) = &self.settings.journal {
            if let Err(e) = file.append(&events) {
                tracing::warn!("cannot write the journal {}: {e}", file.path.display());
            }
        }
        let mut extra = progress.history.flapping(self.settings.thresholds.flap);
        if self.multi {
            extra.extend(self.pages.planes_disagree(name, names));
        }
        let good = self.publish(d, &sample, sweep_us, sm.as_ref(), &extra)?;
        if self.stopped() {
            return Ok(None);
        }
        let t = Instant::now();
        let states_moved = changes::port_states_changed(engine, &d.fabric);
        tracing::debug!(us = micros(t), "port states checked");
        engine.ensure_connected()?;
        let changed = states_moved
            || progress
                .previous
                .as_ref()
                .is_some_and(|p| changes::topology_changed(p, &sample));
        let every = self.settings.rediscover_every;
        let due = every > 0 && progress.since_discovery >= every;
        if changed || d.targets.is_empty() || due {
            tracing::info!("rediscovering (change seen: {changed})");
            progress.current = None;
        }
        progress.previous = Some(sample);
        Ok(Some(good))
    }

    /// Render and compress the page of this sweep into the slot; whether its sweep
    /// reached a port.
    fn publish(
        &mut self,
        d: &mut Discovered,
        sample: &Sample,
        sweep_us: u64,
        sm: Option<&Finding>,
        extra: &[Finding],
    ) -> Result<bool> {
        let failure = self.account(sample, d);
        let t = Instant::now();
        let settings = &self.settings;
        let stats = PageStats {
            counters: &settings.counters,
            sweeps: self.sweeps,
            discoveries: self.discoveries,
            discovery_seconds: d.duration.as_secs_f64(),
            scrape_errors: &self.scrape_errors,
            thresholds: &settings.thresholds,
            sm,
            extra,
        };
        let mut page = PageWriter::default();
        let names = settings.names.as_ref();
        let labels = &mut d.labels;
        let (fabric, health, hosts) = (&d.fabric, &d.health, &d.hosts);
        prometheus::write_fabric_page(
            &mut page, fabric, health, hosts, names, sample, &stats, labels,
        )?;
        let good = failure.is_none();
        let page = page.finish(failure);
        let (text, gzip) = page.sizes();
        let fabric = self.slot().name();
        tracing::debug!(fabric, sweep_us, render_us = micros(t), text, gzip, "swept");
        self.slot().publish(page);
        self.pages.sweeps.fetch_add(1, Ordering::SeqCst);
        Ok(good)
    }

    fn discover(&mut self, engine: &mut Engine) -> Discovered {
        let t = Instant::now();
        let settings = &self.settings;
        let fabric = discover::discover(engine, DiscoverOptions::default(), |_| {});
        self.discoveries += 1;
        let mut targets = counters::targets(&fabric, None, None);
        targets.retain(|t| settings.filter.keeps(fabric.node(t.node), t.port));
        let names = settings.names.as_ref();
        let health = health::assess(&fabric, names, &HealthOptions::default());
        let hosts = Hosts::group(&fabric, names);
        let name = self.slot().name();
        let labels = PageLabels::new(&fabric, names, &hosts, &name, settings.filter);
        let duration = t.elapsed();
        tracing::debug!(
            us = micros(t),
            nodes = fabric.node_count(),
            targets = targets.len(),
            "discovered"
        );
        Discovered {
            fabric: Arc::new(fabric),
            targets,
            health,
            hosts: Arc::new(hosts),
            labels,
            duration,
        }
    }

    /// Count this sweep's failures per node; why the sweep failed, when no port answered.
    fn account(&mut self, sample: &Sample, d: &Discovered) -> Option<String> {
        let mut answered = 0usize;
        for p in &sample.ports {
            answered += usize::from(p.counters.is_some());
            let e = self.scrape_errors.entry(p.at.node.guid).or_default();
            for msg in &p.errors {
                e.errors += 1;
                e.timeouts += u64::from(msg.contains("no reply after"));
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

/// The delay before the next reopening when this one also made no good page: twice as
/// long, at most [`REOPEN_MAX`].
fn next_delay(delay: Duration) -> Duration {
    (delay * 2).min(REOPEN_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reopening_backs_off_from_one_second_to_thirty() {
        let mut delay = REOPEN_FIRST;
        let mut seen = Vec::new();
        for _ in 0..8 {
            seen.push(delay.as_secs());
            delay = next_delay(delay);
        }
        assert_eq!(seen, [1, 2, 4, 8, 16, 30, 30, 30]);
    }
}
