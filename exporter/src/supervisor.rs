//! `serve`'s hold on a fabric: each fabric's sweeper runs on a thread of its own, which
//! that fabric's supervisor thread starts, reads frames from, and starts again when it
//! ends. The supervisors of several fabrics know nothing of each other but the subnets
//! they reach, so a slow or lost fabric never delays another.
//!
//! A port whose transport is gone (HCA reset, driver reload, the simulator killed) is
//! reopened by opening it again: for a local port `serve` reaches it through an
//! `ibscope agent` process (the relay), so a new agent reopens it, and a crash in the
//! transport (the simulator's shim attaches once per process, and its receiver thread
//! can fail) takes only that agent with it; the exporter keeps serving the last good
//! page, marked stale, meanwhile.
//!
//! Reopening backs off exponentially: the first new sweeper starts [`REOPEN_FIRST`] after
//! the loss, each further one twice as late, at most [`REOPEN_MAX`] apart; a sweeper that
//! delivered a good page resets the delay.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use ibscope_mad::engine::CancelToken;
use ibscope_topo::FabricId;

use crate::frames::Frame;
use crate::http::{Family, Pages, PublishedSweep, Slot};
use crate::pieces::Deflated;
use crate::sweeper::{OpenFabric, SweepSettings, Sweeper};

/// The delay before the first new sweeper after a loss.
pub const REOPEN_FIRST: Duration = Duration::from_secs(1);
/// The longest delay between two new sweepers.
pub const REOPEN_MAX: Duration = Duration::from_secs(30);
/// The family whose planes-disagree count `serve` fills in (see `planes`).
const FINDINGS: &str = "ibscope_findings";

/// What a supervisor tells the main thread, about its fabric (its slot).
pub enum Event {
    /// The first sweeper opened the port ("CA/port").
    Opened { slot: usize, port: String },
    /// The first sweeper could not open the port. With one fabric the command
    /// fails with this (and the supervisor has ended); with several the supervisor keeps
    /// trying with backoff.
    NotOpened { slot: usize, error: anyhow::Error },
}

/// The subnets the fabrics' ports reach, by slot, as their sweepers said:
/// a port on a subnet another slot already sweeps is swept once, by that slot.
pub type Subnets = Arc<Mutex<Vec<Option<FabricId>>>>;

/// The running sweeper, shared with the main thread for the stop.
#[derive(Default)]
struct Current {
    /// Cancels its sweep (the engine sends no new MAD).
    cancel: Option<CancelToken>,
    /// Dropped to wake it from its wait between sweeps.
    wake: Option<mpsc::Sender<()>>,
    /// It opened the port (and has not said it closed it).
    open: bool,
    /// It said it closed the port after a stop.
    closed: bool,
}

impl Current {
    /// Cancel its sweep and wake it from its wait: it closes the port and ends.
    fn stop_sweeper(&mut self) {
        if let Some(cancel) = &self.cancel {
            cancel.cancel();
        }
        self.wake = None;
    }
}

/// Handle of a supervisor thread, kept by the main thread.
pub struct Supervisor {
    stop: Arc<AtomicBool>,
    current: Arc<Mutex<Current>>,
    thread: JoinHandle<()>,
}

/// What one fabric's supervisor is given.
pub struct FabricPlan {
    /// Its slot in `pages`.
    pub slot: usize,
    /// How its port is opened, every time.
    pub open: OpenFabric,
    /// How it is swept.
    pub settings: SweepSettings,
    /// Several fabrics: one that cannot be opened at start is tried again, not fatal.
    pub multi: bool,
}

/// What every supervisor shares.
#[derive(Clone)]
pub struct Shared {
    pub pages: Arc<Pages>,
    /// Pages received so far, of every fabric (for the stop message).
    pub sweeps: Arc<AtomicU64>,
    pub subnets: Subnets,
    /// Every fabric's latest discovery, for the planes-disagree findings.
    pub planes: Arc<crate::plane_counts::Planes>,
    pub events: mpsc::Sender<Event>,
}

/// What the supervisor thread needs.
struct Loop {
    fabric: FabricPlan,
    shared: Shared,
    stop: Arc<AtomicBool>,
    current: Arc<Mutex<Current>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Supervisor {
    /// Start the supervisor thread of `fabric`.
    pub fn spawn(fabric: FabricPlan, shared: Shared) -> Result<Supervisor> {
        let stop = Arc::new(AtomicBool::new(false));
        let current = Arc::new(Mutex::new(Current::default()));
        let name = format!("supervisor-{}", fabric.slot);
        let l = Loop {
            fabric,
            shared,
            stop: stop.clone(),
            current: current.clone(),
        };
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || l.run())?;
        Ok(Supervisor {
            stop,
            current,
            thread,
        })
    }

    /// Ask the sweeper to stop, without waiting (see [`Supervisor::stop`]).
    pub fn ask_to_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        lock(&self.current).stop_sweeper();
    }

    /// Ask the sweeper to stop (it abandons its sweep and closes the port) and wait until
    /// it said it closed the port, or it ended, for at most `limit`. True when no port is
    /// left open.
    pub fn stop(&self, limit: Duration) -> bool {
        self.ask_to_stop();
        let deadline = Instant::now() + limit;
        let settled = || self.thread.is_finished() || lock(&self.current).closed;
        while !settled() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        !lock(&self.current).open
    }

    /// Wait for the supervisor to end, unless it is stuck (a port opening inside the
    /// simulator's shim waits for a lost ibsim forever): then it is left to the
    /// process's exit.
    pub fn join(self) {
        if self.thread.is_finished() {
            let _ = self.thread.join();
        }
    }
}

/// How one sweeper ended.
struct SweeperEnd {
    /// It delivered a good page.
    good: bool,
    /// Why it ended, as it said (a lost transport) or as its exit status says.
    why: String,
    /// Its port reaches a subnet another slot sweeps: not started again.
    merged: bool,
}

impl Loop {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn slot(&self) -> &Slot {
        &self.shared.pages.slots[self.fabric.slot]
    }

    fn run(self) {
        let mut delay = REOPEN_FIRST;
        let mut ever_opened = false;
        let mut attempts = 0u64;
        while !self.stopping() {
            attempts += 1;
            let ended = match self.spawn() {
                Ok((thread, frames)) => self.follow(thread, frames, &mut ever_opened),
                Err(e) => SweeperEnd {
                    good: false,
                    why: format!("{e:#}"),
                    merged: false,
                },
            };
            if self.stopping() || ended.merged {
                return;
            }
            if !ever_opened && attempts == 1 {
                let error = anyhow!("{}", ended.why);
                let _ = self.shared.events.send(Event::NotOpened {
                    slot: self.fabric.slot,
                    error,
                });
                if !self.fabric.multi {
                    return;
                }
            }
            self.slot().set_down(ended.why, false);
            if ended.good {
                delay = REOPEN_FIRST;
            }
            tracing::info!(
                slot = self.fabric.slot,
                "the sweeper ended; a new one in {:.1} s",
                delay.as_secs_f64()
            );
            let until = Instant::now() + delay;
            while Instant::now() < until && !self.stopping() {
                std::thread::sleep(Duration::from_millis(50));
            }
            delay = next_delay(delay);
        }
    }

    /// Start a sweeper on a thread of its own; its frames come over the channel.
    fn spawn(&self) -> Result<(JoinHandle<bool>, mpsc::Receiver<Frame>)> {
        let (out, frames) = mpsc::channel();
        let (wake, sleeper) = mpsc::channel::<()>();
        let cancel = CancelToken::new();
        let sweeper = Sweeper::new(self.fabric.settings.clone(), cancel.clone(), out);
        let open = self.fabric.open.clone();
        {
            let mut c = lock(&self.current);
            c.cancel = Some(cancel.clone());
            c.wake = Some(wake);
            c.open = false;
            c.closed = false;
        }
        // A stop that came while it started found no sweeper to stop.
        if self.stopping() {
            lock(&self.current).stop_sweeper();
        }
        let thread = std::thread::Builder::new()
            .name(format!("sweeper-{}", self.fabric.slot))
            .spawn(move || sweeper.run(&open, sleeper))
            .map_err(|e| anyhow!("starting the sweeper: {e}"))?;
        Ok((thread, frames))
    }

    /// Read one sweeper's frames until it ends.
    fn follow(
        &self,
        thread: JoinHandle<bool>,
        frames: mpsc::Receiver<Frame>,
        ever_opened: &mut bool,
    ) -> SweeperEnd {
        let mut good = false;
        let mut said: Option<String> = None;
        let mut merged = false;
        let mut receiving = Receiving::default();
        while let Ok(frame) = frames.recv() {
            match frame {
                Frame::Opened { port, id } => {
                    if let Some(sweeper) = self.claim_subnet(&id) {
                        self.merge_into(&id, &sweeper);
                        merged = true;
                        continue;
                    }
                    lock(&self.current).open = true;
                    self.slot().set_name(id.name);
                    if *ever_opened {
                        self.slot().count_reopen();
                    } else {
                        let _ = self.shared.events.send(Event::Opened {
                            slot: self.fabric.slot,
                            port,
                        });
                    }
                    *ever_opened = true;
                }
                Frame::Family {
                    name,
                    head,
                    samples,
                } => receiving.family(Family::new(name, head, samples)),
                Frame::Unchanged { name } => {
                    if let Err(e) = receiving.unchanged(&name) {
                        tracing::warn!("reading the sweeper: {e}");
                        break;
                    }
                }
                Frame::Page { failure } => {
                    self.shared.sweeps.fetch_add(1, Ordering::SeqCst);
                    good |= failure.is_none();
                    let mut families = receiving.page();
                    if let Err(e) = self.patch_planes(&mut families) {
                        tracing::warn!("reading the sweeper: {e}");
                        break;
                    }
                    self.publish(families, failure);
                }
                // A port merged into another slot's subnet is no plane of its own.
                Frame::Fabric { .. } if merged => {}
                Frame::Fabric { fabric } => {
                    let name = self.slot().name();
                    self.shared.planes.update(self.fabric.slot, &name, *fabric);
                }
                Frame::Lost { error } => {
                    self.slot().set_down(error.clone(), true);
                    said = Some(error);
                }
                Frame::Failed { error } => said = Some(error),
                // It will not send again.
                Frame::Closed => {
                    let mut c = lock(&self.current);
                    c.open = false;
                    c.closed = true;
                    break;
                }
            }
        }
        // Whatever ended the reading, the sweeper stops too (one that ended already is
        // not affected), and its frames are no longer read.
        lock(&self.current).stop_sweeper();
        drop(frames);
        let ended_well = thread.join().unwrap_or(false);
        {
            let mut c = lock(&self.current);
            c.cancel = None;
            c.open = false;
        }
        let why = said.unwrap_or_else(|| {
            let how = if ended_well { "stopped" } else { "ended" };
            if *ever_opened {
                format!("the sweeper {how}")
            } else {
                format!("the sweeper {how} before opening the port")
            }
        });
        SweeperEnd { good, why, merged }
    }

    /// Record the subnet this slot's port reaches; the name of the slot that already
    /// sweeps it, if another does.
    fn claim_subnet(&self, id: &FabricId) -> Option<String> {
        let mut subnets = lock(&self.shared.subnets);
        let other = subnets.iter().enumerate().find_map(|(i, s)| {
            s.as_ref()
                .filter(|s| i != self.fabric.slot && s.same_subnet(id))
                .map(|s| s.name.clone())
        });
        if other.is_none() {
            subnets[self.fabric.slot] = Some(id.clone());
        }
        other
    }

    /// This slot's port reaches a subnet another slot sweeps: say so, leave the page and
    /// stop the sweeper (the supervisor then ends).
    fn merge_into(&self, id: &FabricId, sweeper: &str) {
        eprintln!(
            "note: {} reaches the same subnet as {sweeper} ({}): swept once, as {sweeper}",
            id.name,
            id.identity_text()
        );
        self.slot().set_merged();
        self.stop.store(true, Ordering::SeqCst);
        lock(&self.current).stop_sweeper();
    }

    /// The page's count of planes-disagree findings, in place of the 0 its sweeper
    /// wrote: the findings family's samples inflated, patched and compressed again (a
    /// few lines). An error when they do not inflate.
    fn patch_planes(&self, families: &mut [Family]) -> std::io::Result<()> {
        let planes = &self.shared.planes;
        if planes.disagreeing(self.fabric.slot) == 0 {
            return Ok(());
        }
        for f in families.iter_mut().filter(|f| f.name == FINDINGS) {
            let text = planes.patch(self.fabric.slot, f.body.inflate()?);
            f.body = Arc::new(Deflated::new(text.as_bytes()));
        }
        Ok(())
    }

    /// A page the sweeper rendered: a page of a sweep that reached no port does
    /// not replace a good one (that stays, marked stale).
    fn publish(&self, families: Vec<Family>, failure: Option<String>) {
        let slot = self.slot();
        match failure {
            None => {
                let snap = PublishedSweep::new(families, None);
                let (text_len, gzip_len) = snap.sizes();
                tracing::debug!(
                    slot = self.fabric.slot,
                    text = text_len,
                    gzip = gzip_len,
                    "page cached"
                );
                drop(slot.page.store(Arc::new(snap)));
                slot.set_up();
            }
            Some(why) => {
                let have_good = slot.page.load().is_some_and(|s| s.failure.is_none());
                if !have_good {
                    let snap = PublishedSweep::new(families, Some(why.clone()));
                    drop(slot.page.store(Arc::new(snap)));
                }
                slot.set_down(format!("the last sweep reached no port: {why}"), true);
            }
        }
    }
}

/// The families of the page a sweeper is sending, and those of the last page it
/// sent, which it names instead of sending again when they did not change.
#[derive(Default)]
struct Receiving {
    families: Vec<Family>,
    last: HashMap<String, Family>,
}

impl Receiving {
    fn family(&mut self, family: Family) {
        self.families.push(family);
    }

    /// A family as on the last page: an error when the last page has none of that name
    /// (not what a sweeper sends).
    fn unchanged(&mut self, name: &str) -> std::io::Result<()> {
        let family = self.last.get(name).ok_or_else(|| {
            std::io::Error::other(format!(
                "family {name:?} sent as unchanged, but the last page has none"
            ))
        })?;
        self.families.push(family.clone());
        Ok(())
    }

    /// The page is complete: its families as received (the next page's unchanged ones
    /// are these).
    fn page(&mut self) -> Vec<Family> {
        let families = std::mem::take(&mut self.families);
        self.last = families
            .iter()
            .map(|f| (f.name.clone(), f.clone()))
            .collect();
        families
    }
}

/// The delay before the next new sweeper when this one also ends without a good
/// page: twice as long, at most [`REOPEN_MAX`].
fn next_delay(delay: Duration) -> Duration {
    (delay * 2).min(REOPEN_MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages as a sweeper sends them, through its own cache, read back: a family
    /// sent as unchanged is the last page's (shared, not copied), and one the last page
    /// lacks is an error.
    #[test]
    fn unchanged_families_are_the_last_pages() {
        use crate::pieces::{PageDeflater, PieceCache};
        use ibscope_topo::export::prometheus::PageSink;
        let mut cache = PieceCache::default();
        let mut receiving = Receiving::default();
        let mut send = |page: &[(&str, &str)]| {
            let mut sent = Vec::new();
            let mut sink = PageDeflater::reusing(
                &mut cache,
                |name: &str, head: &str, body: &Deflated, same: bool| {
                    let name = name.to_string();
                    sent.push(match same {
                        true => Frame::Unchanged { name },
                        false => Frame::Family {
                            name,
                            head: head.to_string(),
                            samples: body.clone(),
                        },
                    });
                },
            );
            for (name, samples) in page {
                sink.family(name, &format!("# HELP {name} X.\n"));
                sink.samples(samples);
            }
            sink.finish();
            let mut unchanged = 0;
            for frame in sent {
                match frame {
                    Frame::Family {
                        name,
                        head,
                        samples,
                    } => receiving.family(Family::new(name, head, samples)),
                    Frame::Unchanged { name } => {
                        unchanged += 1;
                        receiving.unchanged(&name).unwrap();
                    }
                    other => panic!("{other:?}"),
                }
            }
            (receiving.page(), unchanged)
        };
        let text = |page: &[Family]| -> String {
            page.iter()
                .map(|f| format!("{}{}", f.head, f.body.inflate().unwrap()))
                .collect()
        };
        let (first, unchanged) = send(&[("a", "a 1\n"), ("b", "b 1\n")]);
        assert_eq!(unchanged, 0);
        assert_eq!(text(&first), "# HELP a X.\na 1\n# HELP b X.\nb 1\n");
        let (second, unchanged) = send(&[("a", "a 1\n"), ("b", "b 2\n")]);
        assert_eq!(unchanged, 1);
        assert_eq!(text(&second), "# HELP a X.\na 1\n# HELP b X.\nb 2\n");
        assert!(Arc::ptr_eq(&first[0].body, &second[0].body), "shared");
        // `b` changed last time: compressed again as it comes, then known unchanged.
        let (third, unchanged) = send(&[("a", "a 1\n"), ("b", "b 2\n")]);
        assert_eq!(unchanged, 1);
        assert_eq!(text(&third), text(&second));
        let (fourth, unchanged) = send(&[("a", "a 1\n"), ("b", "b 2\n")]);
        assert_eq!(unchanged, 2);
        assert_eq!(text(&fourth), text(&second));
        // A sweeper that names a family its last page did not have.
        let mut fresh = Receiving::default();
        assert!(fresh.unchanged("a").is_err());
        assert!(fresh.page().is_empty());
    }

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
