//! `serve`'s hold on a fabric: each fabric's sweeper runs in a process of its own (this
//! binary, `serve --sweeper-process`), which that fabric's supervisor thread starts, reads
//! frames from, and starts again when it ends. The supervisors of several fabrics know
//! nothing of each other but the subnets they reach, so a slow or lost fabric never
//! delays another.
//!
//! Why a process: a port whose transport is gone (HCA reset, driver reload, the simulator
//! killed) is reopened by a fresh process. The simulator's shim attaches to ibsim once per
//! process and never again, and a crash in the transport (the shim's receiver thread has
//! one, see the engine's Drop) takes only the sweeper with it; the exporter keeps serving
//! the last good page, marked stale, meanwhile.
//!
//! Reopening backs off exponentially: the first new process starts [`REOPEN_FIRST`] after
//! the loss, each further one twice as late, at most [`REOPEN_MAX`] apart; a process that
//! delivered a good page resets the delay.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::BufReader;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use ibscope_topo::FabricId;

use crate::frames::{self, Frame};
use crate::http::{Family, Pages, PublishedSweep, Slot};
use crate::pieces::Deflated;

/// The delay before the first new sweeper process after a loss.
pub const REOPEN_FIRST: Duration = Duration::from_secs(1);
/// The longest delay between two new sweeper processes.
pub const REOPEN_MAX: Duration = Duration::from_secs(30);
/// The family whose planes-disagree count `serve` fills in (see `planes`).
const FINDINGS: &str = "ibscope_findings";
/// How long a sweeper process that said it closed the port gets to exit.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// What a supervisor tells the main thread, about its fabric (its slot).
pub enum Event {
    /// The first sweeper process opened the port ("CA/port").
    Opened { slot: usize, port: String },
    /// The first sweeper process could not open the port. With one fabric the command
    /// fails with this (and the supervisor has ended); with several the supervisor keeps
    /// trying with backoff.
    NotOpened { slot: usize, error: anyhow::Error },
}

/// The subnets the fabrics' ports reach, by slot, as their sweeper processes said:
/// a port on a subnet another slot already sweeps is swept once, by that slot.
pub type Subnets = Arc<Mutex<Vec<Option<FabricId>>>>;

/// The running sweeper process, shared with the main thread for the stop.
#[derive(Default)]
struct Current {
    pid: Option<u32>,
    /// It opened the port (and has not said it closed it).
    open: bool,
    /// It said it closed the port after a stop (it may still be exiting).
    closed: bool,
}

/// Handle of a supervisor thread, kept by the main thread.
pub struct Supervisor {
    stop: Arc<AtomicBool>,
    current: Arc<Mutex<Current>>,
    thread: std::thread::JoinHandle<()>,
}

/// What one fabric's supervisor is given.
pub struct SweeperCommand {
    /// Its slot in `pages`.
    pub slot: usize,
    /// The sweeper process's command line (after the program): serve's own, and which
    /// fabric it is to sweep.
    pub args: Vec<OsString>,
    /// Several fabrics: one that cannot be opened at start is tried again, not fatal.
    pub multi: bool,
}

/// What every supervisor shares.
#[derive(Clone)]
pub struct Shared {
    /// The sweeper processes' working directory (the simulator's shim keeps a
    /// `sys-<pid>` there).
    pub dir: PathBuf,
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
    fabric: SweeperCommand,
    shared: Shared,
    stop: Arc<AtomicBool>,
    current: Arc<Mutex<Current>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Supervisor {
    /// Start the supervisor thread of `fabric`.
    pub fn spawn(fabric: SweeperCommand, shared: Shared) -> Result<Supervisor> {
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

    /// Ask the sweeper process to stop, without waiting (see [`Supervisor::stop`]).
    pub fn ask_to_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(pid) = lock(&self.current).pid {
            signal(pid, libc::SIGTERM);
        }
    }

    /// Ask the sweeper process to stop (SIGTERM: it abandons its sweep and closes the
    /// port) and wait until it said it closed the port, or it ended, for at most `limit`;
    /// a process that did neither is killed. True when no port is left open. The process
    /// may still be exiting: [`Supervisor::join`] waits for that.
    pub fn stop(&self, limit: Duration) -> bool {
        self.ask_to_stop();
        let deadline = Instant::now() + limit;
        let settled = || self.thread.is_finished() || lock(&self.current).closed;
        while !settled() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let (pid, open) = {
            let c = lock(&self.current);
            (c.pid, c.open)
        };
        if !settled() {
            // Stuck in a sweep that ignores the stop: do not wait any longer.
            if let Some(pid) = pid {
                signal(pid, libc::SIGKILL);
            }
        }
        !open
    }

    /// Wait for the sweeper process to exit (at most [`EXIT_GRACE`] after it closed the
    /// port: the simulator's shim says goodbye to ibsim at exit and waits for its answer,
    /// forever when ibsim is frozen; then it is killed) and for the supervisor to end.
    pub fn join(self) {
        let _ = self.thread.join();
    }
}

fn signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) on the PID of our own child, which is not reaped before `current`
    // forgets it, so the PID cannot belong to another process.
    unsafe { libc::kill(pid as libc::pid_t, signal) };
}

/// How one sweeper process ended.
struct ProcessEnd {
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
                Ok(child) => self.follow(child, &mut ever_opened),
                Err(e) => ProcessEnd {
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
                "the sweeper process ended; a new one in {:.1} s",
                delay.as_secs_f64()
            );
            let until = Instant::now() + delay;
            while Instant::now() < until && !self.stopping() {
                std::thread::sleep(Duration::from_millis(50));
            }
            delay = next_delay(delay);
        }
    }

    fn spawn(&self) -> Result<Child> {
        let exe = std::env::current_exe().map_err(|e| anyhow!("locating ibscope: {e}"))?;
        let mut cmd = Command::new(exe);
        cmd.args(&self.fabric.args)
            .current_dir(&self.shared.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: sigemptyset, sigprocmask, setpgid, prctl, getppid and raise are
        // async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                // This thread was started with the stop signals blocked (they are the main
                // thread's to take); the mask survives exec, and the sweeper needs them.
                let mut none: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut none);
                libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
                // Its own process group: a Ctrl-C at the terminal reaches `serve`, which
                // stops it in order, not both at once.
                libc::setpgid(0, 0);
                // Ends with the supervisor thread (and so with `serve`, however it ends).
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    libc::raise(libc::SIGTERM);
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .map_err(|e| anyhow!("starting the sweeper process: {e}"))?;
        let mut c = lock(&self.current);
        c.pid = Some(child.id());
        c.open = false;
        c.closed = false;
        // A stop that came while it started found no process to signal.
        if self.stopping() {
            signal(child.id(), libc::SIGTERM);
        }
        Ok(child)
    }

    /// Read one sweeper process's frames until it ends.
    fn follow(&self, mut child: Child, ever_opened: &mut bool) -> ProcessEnd {
        let mut good = false;
        let mut said: Option<String> = None;
        let mut closed = false;
        let mut merged = false;
        let mut receiving = Receiving::default();
        if let Some(out) = child.stdout.take() {
            let mut out = BufReader::new(out);
            loop {
                match frames::read(&mut out) {
                    Ok(Some(Frame::Opened { port, id })) => {
                        if let Some(sweeper) = self.claim_subnet(&id) {
                            self.merge_into(&id, &sweeper, child.id());
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
                    Ok(Some(Frame::Family {
                        name,
                        head,
                        samples,
                    })) => receiving.family(Family::new(name, head, samples)),
                    Ok(Some(Frame::Unchanged { name })) => {
                        if let Err(e) = receiving.unchanged(&name) {
                            tracing::warn!("reading the sweeper process: {e}");
                            break;
                        }
                    }
                    Ok(Some(Frame::Page { failure })) => {
                        self.shared.sweeps.fetch_add(1, Ordering::SeqCst);
                        good |= failure.is_none();
                        let mut families = receiving.page();
                        if let Err(e) = self.patch_planes(&mut families) {
                            tracing::warn!("reading the sweeper process: {e}");
                            break;
                        }
                        self.publish(families, failure);
                    }
                    // A port merged into another slot's subnet is no plane of its own.
                    Ok(Some(Frame::Fabric { .. })) if merged => {}
                    Ok(Some(Frame::Fabric { snapshot })) => {
                        let name = self.slot().name();
                        if let Err(e) =
                            self.shared
                                .planes
                                .update(self.fabric.slot, &name, &snapshot)
                        {
                            tracing::warn!(slot = self.fabric.slot, "planes: {e:#}");
                        }
                    }
                    Ok(Some(Frame::Lost { error })) => {
                        self.slot().set_down(error.clone(), true);
                        said = Some(error);
                    }
                    Ok(Some(Frame::Failed { error })) => said = Some(error),
                    // It will not write again; a shim waiting on a frozen ibsim at exit
                    // would keep the pipe open: do not wait for its end.
                    Ok(Some(Frame::Closed)) => {
                        closed = true;
                        let mut c = lock(&self.current);
                        c.open = false;
                        c.closed = true;
                        break;
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!("reading the sweeper process: {e}");
                        break;
                    }
                }
            }
        }
        let status = wait(&mut child, closed.then_some(EXIT_GRACE));
        {
            let mut c = lock(&self.current);
            c.pid = None;
            c.open = false;
        }
        let why = said.unwrap_or_else(|| {
            if *ever_opened {
                format!("the sweeper process ended ({})", describe(status))
            } else {
                format!(
                    "the sweeper process ended before opening the port ({})",
                    describe(status)
                )
            }
        });
        ProcessEnd { good, why, merged }
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
    /// stop the sweeper process (the supervisor then ends).
    fn merge_into(&self, id: &FabricId, sweeper: &str, pid: u32) {
        eprintln!(
            "note: {} reaches the same subnet as {sweeper} ({}): swept once, as {sweeper}",
            id.name,
            id.identity_text()
        );
        self.slot().set_merged();
        self.stop.store(true, Ordering::SeqCst);
        signal(pid, libc::SIGTERM);
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

    /// A page the sweeper process rendered: a page of a sweep that reached no port does
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

/// The families of the page a sweeper process is sending, and those of the last page it
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
    /// (not what a sweeper process sends).
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

/// The delay before the next new sweeper process when this one also ends without a good
/// page: twice as long, at most [`REOPEN_MAX`].
fn next_delay(delay: Duration) -> Duration {
    (delay * 2).min(REOPEN_MAX)
}

/// Wait for the child; with a grace, kill it when it has not exited by then.
fn wait(child: &mut Child, grace: Option<Duration>) -> Option<ExitStatus> {
    let Some(grace) = grace else {
        return child.wait().ok();
    };
    let deadline = Instant::now() + grace;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            _ => {
                tracing::warn!("the sweeper process did not exit after closing the port");
                let _ = child.kill();
                return child.wait().ok();
            }
        }
    }
}

fn describe(status: Option<ExitStatus>) -> String {
    use std::os::unix::process::ExitStatusExt;
    match status {
        Some(s) => match (s.code(), s.signal()) {
            (Some(c), _) => format!("exit code {c}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            (None, None) => "unknown status".into(),
        },
        None => "status unknown".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages as a sweeper process sends them, through its own cache, read back: a family
    /// sent as unchanged is the last page's (shared, not copied), and one the last page
    /// lacks is an error.
    #[test]
    fn unchanged_families_are_the_last_pages() {
        use crate::pieces::{PageDeflater, PieceCache};
        use ibscope_topo::export::prometheus::PageSink;
        let mut cache = PieceCache::default();
        let mut receiving = Receiving::default();
        let mut send = |page: &[(&str, &str)]| {
            let mut wire = Vec::new();
            let mut sink = PageDeflater::reusing(
                &mut cache,
                |name: &str, head: &str, body: &Deflated, same| {
                    frames::write_page_family(&mut wire, name, head, body, same).unwrap();
                },
            );
            for (name, samples) in page {
                sink.family(name, &format!("# HELP {name} X.\n"));
                sink.samples(samples);
            }
            sink.finish();
            let mut r = std::io::Cursor::new(wire);
            let mut unchanged = 0;
            while let Some(frame) = frames::read(&mut r).unwrap() {
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
