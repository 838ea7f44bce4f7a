//! `serve`'s hold on the fabric: the sweeper runs in a process of its own (this binary,
//! `serve --sweeper-process`), which the supervisor starts, reads frames from, and starts
//! again when it ends.
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

use std::ffi::OsString;
use std::io::BufReader;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};

use super::frames::{self, Frame};
use super::http::{Cache, Snapshot};

/// The delay before the first new sweeper process after a loss.
pub const REOPEN_FIRST: Duration = Duration::from_secs(1);
/// The longest delay between two new sweeper processes.
pub const REOPEN_MAX: Duration = Duration::from_secs(30);
/// How long a sweeper process that said it closed the port gets to exit.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// What the supervisor tells the main thread.
pub enum Event {
    /// The first sweeper process opened the port ("CA/port").
    Opened(String),
    /// The first sweeper process could not open the port: the command fails with this.
    Fatal(anyhow::Error),
}

/// The running sweeper process, shared with the main thread for the stop.
#[derive(Default)]
struct Current {
    pid: Option<u32>,
    /// It opened the port (and has not said it closed it).
    open: bool,
    /// It said it closed the port after a stop (it may still be exiting).
    closed: bool,
}

/// Handle of the supervisor thread, kept by the main thread.
pub struct Supervisor {
    stop: Arc<AtomicBool>,
    current: Arc<Mutex<Current>>,
    pages: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<()>,
}

/// What the supervisor thread needs.
struct Loop {
    /// The sweeper process's command line (after the program).
    args: Vec<OsString>,
    /// Its working directory (the simulator's shim keeps a `sys-<pid>` there).
    dir: PathBuf,
    cache: Arc<Cache>,
    stop: Arc<AtomicBool>,
    current: Arc<Mutex<Current>>,
    pages: Arc<AtomicU64>,
    events: mpsc::Sender<Event>,
}

fn lock(m: &Mutex<Current>) -> std::sync::MutexGuard<'_, Current> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Supervisor {
    /// Start the supervisor thread; `args` are the sweeper process's arguments.
    pub fn spawn(
        args: Vec<OsString>,
        dir: PathBuf,
        cache: Arc<Cache>,
        events: mpsc::Sender<Event>,
    ) -> Result<Supervisor> {
        let stop = Arc::new(AtomicBool::new(false));
        let current = Arc::new(Mutex::new(Current::default()));
        let pages = Arc::new(AtomicU64::new(0));
        let l = Loop {
            args,
            dir,
            cache,
            stop: stop.clone(),
            current: current.clone(),
            pages: pages.clone(),
            events,
        };
        let thread = std::thread::Builder::new()
            .name("supervisor".into())
            .spawn(move || l.run())?;
        Ok(Supervisor {
            stop,
            current,
            pages,
            thread,
        })
    }

    /// Pages received so far (the sweeps of every sweeper process).
    pub fn pages(&self) -> u64 {
        self.pages.load(Ordering::SeqCst)
    }

    /// Ask the sweeper process to stop (SIGTERM: it abandons its sweep and closes the
    /// port) and wait until it said it closed the port, or it ended, for at most `limit`;
    /// a process that did neither is killed. True when no port is left open. The process
    /// may still be exiting: [`Supervisor::join`] waits for that.
    pub fn stop(&self, limit: Duration) -> bool {
        self.stop.store(true, Ordering::SeqCst);
        let pid = lock(&self.current).pid;
        if let Some(pid) = pid {
            signal(pid, libc::SIGTERM);
        }
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
struct Ended {
    /// It delivered a good page.
    good: bool,
    /// Why it ended, as it said (a lost transport) or as its exit status says.
    why: String,
}

impl Loop {
    fn stopping(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    fn run(self) {
        let mut delay = REOPEN_FIRST;
        let mut ever_opened = false;
        while !self.stopping() {
            let ended = match self.spawn() {
                Ok(child) => self.follow(child, &mut ever_opened),
                Err(e) if !ever_opened => {
                    let _ = self.events.send(Event::Fatal(e));
                    return;
                }
                Err(e) => Ok(Ended {
                    good: false,
                    why: format!("{e:#}"),
                }),
            };
            let ended = match ended {
                Ok(ended) => ended,
                Err(fatal) => {
                    let _ = self.events.send(Event::Fatal(fatal));
                    return;
                }
            };
            if self.stopping() {
                return;
            }
            self.cache.set_down(ended.why, false);
            if ended.good {
                delay = REOPEN_FIRST;
            }
            tracing::info!(
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
        cmd.args(&self.args)
            .arg("--sweeper-process")
            .current_dir(&self.dir)
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

    /// Read one sweeper process's frames until it ends; an error when the first process
    /// could not open the port (the command then fails).
    fn follow(&self, mut child: Child, ever_opened: &mut bool) -> Result<Ended> {
        let mut good = false;
        let mut said: Option<String> = None;
        let mut closed = false;
        if let Some(out) = child.stdout.take() {
            let mut out = BufReader::new(out);
            loop {
                match frames::read(&mut out) {
                    Ok(Some(Frame::Opened { port })) => {
                        lock(&self.current).open = true;
                        if *ever_opened {
                            self.cache.count_reopen();
                        } else {
                            let _ = self.events.send(Event::Opened(port));
                        }
                        *ever_opened = true;
                    }
                    Ok(Some(Frame::Page {
                        text,
                        gzip,
                        failure,
                    })) => {
                        self.pages.fetch_add(1, Ordering::SeqCst);
                        good |= failure.is_none();
                        self.publish(text, gzip, failure);
                    }
                    Ok(Some(Frame::Lost { error })) => {
                        self.cache.set_down(error.clone(), true);
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
        lock(&self.current).pid = None;
        if !*ever_opened && !self.stopping() {
            return Err(match said {
                Some(error) => anyhow!("{error}"),
                None => anyhow!(
                    "the sweeper process ended before opening the port ({})",
                    describe(status)
                ),
            });
        }
        let why =
            said.unwrap_or_else(|| format!("the sweeper process ended ({})", describe(status)));
        Ok(Ended { good, why })
    }

    /// A page the sweeper process rendered: a page of a sweep that reached no port does
    /// not replace a good one (that stays, marked stale).
    fn publish(&self, text: String, gzip: Vec<u8>, failure: Option<String>) {
        let snap = Snapshot {
            text,
            gzip,
            finished: Instant::now(),
            failure: failure.clone(),
        };
        match failure {
            None => {
                drop(self.cache.store(Arc::new(snap)));
                self.cache.set_up();
            }
            Some(why) => {
                let have_good = self.cache.load().is_some_and(|s| s.failure.is_none());
                if !have_good {
                    drop(self.cache.store(Arc::new(snap)));
                }
                self.cache
                    .set_down(format!("the last sweep reached no port: {why}"), true);
            }
        }
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
