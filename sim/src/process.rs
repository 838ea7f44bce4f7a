//! The simulator's processes: spawned so they die with the test binary (or, detached, outlive
//! `ibscope sim up`), and found again by PID without ever signalling someone else's process;
//! and its clients, run to completion with a deadline.

use std::fs;
use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

type SpawnJob = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawn from a thread that lives as long as the process, with PDEATHSIG: the death signal is
/// tied to the thread that forked, so forking from a short-lived test thread would kill the
/// child when that test's thread ends.
pub(crate) fn spawn_kept(mut cmd: Command) -> io::Result<Child> {
    static KEEPER: OnceLock<Mutex<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    let sender = KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("ibscope-sim-keeper".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("spawning the simulator keeper thread");
        Mutex::new(tx)
    });
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: prctl, getppid and raise are async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl.
            if libc::getppid() != parent {
                libc::raise(libc::SIGKILL);
            }
            Ok(())
        });
    }
    let (tx, rx) = mpsc::channel();
    sender
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((cmd, tx))
        .map_err(|_| io::Error::other("simulator keeper thread is gone"))?;
    rx.recv()
        .map_err(|_| io::Error::other("simulator keeper thread is gone"))?
}

/// Spawn in a new session: survives the end of `ibscope sim up` and the terminal's Ctrl-C.
pub(crate) fn spawn_detached(mut cmd: Command) -> io::Result<Child> {
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
}

// ---------------------------------------------------------------------------------------------
// Processes by PID.

/// Start time (clock ticks since boot) of a process, from /proc/<pid>/stat; None if gone.
pub(crate) fn proc_start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may contain anything.
    let rest = &stat[stat.rfind(')')? + 1..];
    // rest starts with field 3 (state); starttime is field 22.
    rest.split_whitespace().nth(19)?.parse().ok()
}

pub(crate) fn proc_state(pid: u32) -> Option<char> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().next()?.chars().next()
}

pub(crate) fn proc_program(pid: u32) -> Option<String> {
    let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let argv0 = cmdline.split(|b| *b == 0).next()?;
    let argv0 = String::from_utf8_lossy(argv0);
    Some(argv0.rsplit('/').next().unwrap_or(&argv0).to_string())
}

/// True if the process exists and is not a zombie. (PID 1 here does not reap orphans, so a
/// dead detached process can linger as a zombie.)
pub fn process_alive(pid: u32) -> bool {
    matches!(proc_state(pid), Some(s) if s != 'Z' && s != 'X')
}

/// A process this module started, or found again through state.json.
#[derive(Debug)]
pub(crate) struct Proc {
    pub(crate) pid: u32,
    /// argv[0] basename it must have, checked before any signal is sent.
    pub(crate) program: &'static str,
    pub(crate) start_time: Option<u64>,
    pub(crate) child: Option<Child>,
}

impl Proc {
    pub(crate) fn from_child(child: Child, program: &'static str) -> Proc {
        let pid = child.id();
        Proc {
            pid,
            program,
            start_time: proc_start_time(pid),
            child: Some(child),
        }
    }

    /// Still our process (same program, same start time) and not dead.
    pub(crate) fn is_ours_and_alive(&mut self) -> bool {
        if let Some(child) = self.child.as_mut() {
            return matches!(child.try_wait(), Ok(None));
        }
        if !process_alive(self.pid) {
            return false;
        }
        if proc_program(self.pid).as_deref() != Some(self.program) {
            return false;
        }
        match (self.start_time, proc_start_time(self.pid)) {
            (Some(want), Some(have)) => want == have,
            _ => true,
        }
    }

    /// Reap if it is our child (also a child from a detached start in this process).
    pub(crate) fn reap(&mut self) -> bool {
        // No process yet (a start that failed before its spawn): waitpid(0) would reap
        // any child of ours.
        if self.pid == 0 {
            return true;
        }
        if let Some(child) = self.child.as_mut() {
            return !matches!(child.try_wait(), Ok(None));
        }
        // SAFETY: waitpid with WNOHANG on a PID; ECHILD when not our child is fine.
        unsafe {
            let mut status = 0;
            libc::waitpid(self.pid as libc::pid_t, &mut status, libc::WNOHANG);
        }
        !process_alive(self.pid)
    }

    /// SIGTERM, then SIGKILL after `grace`; waits until it is gone. Never signals a PID that
    /// no longer belongs to the program we started.
    pub(crate) fn terminate(&mut self, grace: Duration) -> Result<()> {
        if self.pid == 0 || !self.is_ours_and_alive() {
            self.reap();
            return Ok(());
        }
        let pid = self.pid as libc::pid_t;
        // SAFETY: plain kill(2) on a PID just verified to be ours.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.reap() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if self.is_ours_and_alive() {
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if self.reap() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        bail!(
            "{} (pid {}) did not exit after SIGKILL",
            self.program,
            self.pid
        )
    }
}

/// Everything `pipe` yields, read on a thread of its own.
fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_end(&mut bytes);
        }
        bytes
    })
}

/// Run `cmd` to completion with its output captured; killed after `timeout`, which is an
/// error quoting what it wrote on stderr. Both pipes are drained as it runs, so a chatty
/// client never blocks on a full pipe.
pub fn run_with_timeout(mut cmd: Command, timeout: Duration) -> Result<Output> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let what = format!("{cmd:?}");
    let mut child = cmd.spawn().with_context(|| format!("spawning {what}"))?;
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child
            .try_wait()
            .with_context(|| format!("waiting for {what}"))?
        {
            Some(status) => break status,
            None if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = stderr.join().unwrap_or_default();
                return Err(anyhow!(
                    "{what} did not finish within {timeout:?}; stderr:\n{}",
                    String::from_utf8_lossy(&stderr)
                ));
            }
        }
    };
    Ok(Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}
