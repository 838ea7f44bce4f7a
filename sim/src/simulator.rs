//! Simulated fabric orchestration: `ibsim` (the fabric) plus, optionally, OpenSM under the
//! umad2sim shim (the SM), with the plumbing every client needs (socket name, preload).
//!
//! Used by `ibscope sim ...` and by every integration test. Facts this relies on were measured
//! on this machine (see docs / shared notes): ibsim prints `Network simulator ready.` before it
//! binds its sockets, so readiness is confirmed by a console round trip (the console is only
//! served by the select loop that also serves the sockets); ibsim echoes `#` comment lines, which
//! gives the console a way to wait for a command to be processed; OpenSM under the shim does not
//! exit on SIGTERM once ibsim is gone, so OpenSM is always stopped first.
//!
//! Processes started in-process (tests) are spawned from one long-lived thread with
//! `PR_SET_PDEATHSIG = SIGKILL`, so they die with the test binary even when it is killed and no
//! destructor runs. Detached simulators (`sim up`) run in their own session and are found again
//! through `state.json` in their state directory.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Context, Result};

use crate::process::{spawn_detached, spawn_kept, Proc};
use crate::size::{topology_size, FabricSize};
use crate::state::{
    default_name, default_state_dir, state_base_dir, validate_name, ProcRecord, SimStatus,
    StateFile,
};

/// The umad2sim shim (Debian `libumad2sim0`).
pub const SHIM_PATH: &str = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";

/// The variable that tells a client the topology file ibsim runs (its node ids name nodes).
pub const TOPOLOGY_ENV: &str = "IBSCOPE_SIM_TOPOLOGY";

/// ibsim reads console lines into a 128-byte buffer; longer lines would be split.
const CONSOLE_MAX_LINE: usize = 120;

const STATE_FILE: &str = "state.json";
const CONSOLE_FIFO: &str = "console";
const IBSIM_OUT: &str = "ibsim.out";
const IBSIM_ERR: &str = "ibsim.err";
const OPENSM_CONF: &str = "opensm.conf";
const OPENSM_LOG: &str = "opensm.log";
const OPENSM_OUT: &str = "opensm.out";
const CLIENT_DIR: &str = "client";
/// ibsim's banner once its fabric is built (printed before it binds its sockets).
const IBSIM_READY: &str = "Network simulator ready";

/// How to start a simulator.
#[derive(Debug, Clone)]
pub struct SimOptions {
    /// Topology file (ibnetdiscover format).
    pub topology: PathBuf,
    /// Name (used in the socket name and the default state directory); default `default` for
    /// detached simulators, `t` otherwise.
    pub name: Option<String>,
    /// Start OpenSM and wait for `SUBNET UP`.
    pub with_sm: bool,
    /// Extra opensm.conf lines, e.g. `routing_engine minhop`.
    pub sm_config: Vec<String>,
    /// Where to keep the FIFO, logs and state; default: a fresh temporary directory (removed
    /// on drop) or, when detached, [`default_state_dir`].
    pub state_dir: Option<PathBuf>,
    /// Leave the processes running when the `Sim` is dropped (for `ibscope sim up`); find them
    /// again with [`Sim::attach`], stop them with [`Sim::down`].
    pub detach: bool,
}

impl SimOptions {
    /// Options for an in-process simulator with OpenSM.
    pub fn new(topology: impl Into<PathBuf>) -> Self {
        SimOptions {
            topology: topology.into(),
            name: None,
            with_sm: true,
            sm_config: Vec::new(),
            state_dir: None,
            detach: false,
        }
    }
}

// ---------------------------------------------------------------------------------------------

/// A running simulated fabric. Dropping it stops every process it started (unless detached)
/// and removes its temporary state directory.
#[derive(Debug)]
pub struct Sim {
    name: String,
    state_dir: PathBuf,
    remove_state_dir: bool,
    client_dir: PathBuf,
    sockname: String,
    topology: PathBuf,
    size: FabricSize,
    ibsim: Mutex<Proc>,
    opensm: Option<Mutex<Proc>>,
    /// Write end of the console FIFO (opened lazily in attached processes).
    console: Mutex<Option<File>>,
    /// Leave processes running on drop.
    detached: bool,
    /// Start processes in their own session (they outlive `ibscope sim up`).
    detach_spawns: bool,
    stopped: bool,
}

static SIM_COUNTER: AtomicU64 = AtomicU64::new(0);

fn unique_suffix() -> String {
    let n = SIM_COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{}-{}", std::process::id(), n)
}

fn nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// A fresh temporary state directory (`ibscope-sim-<pid>-...`, see
/// [`ibscope_mad::runtime_dir`]).
fn make_temp_dir() -> Result<PathBuf> {
    Ok(ibscope_mad::runtime_dir::make("sim")?)
}

fn mkfifo(path: &Path) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| anyhow!("path with NUL: {}", path.display()))?;
    // SAFETY: valid NUL-terminated path.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(io::Error::last_os_error())
            .with_context(|| format!("mkfifo {}", path.display()));
    }
    Ok(())
}

/// Last `lines` lines of a file, for error messages.
fn tail(path: &Path, lines: usize) -> String {
    let text = match fs::read(path) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => return format!("({}: {e})", path.display()),
    };
    let all: Vec<&str> = text.lines().collect();
    let from = all.len().saturating_sub(lines);
    all[from..].join("\n")
}

fn count_in_file(path: &Path, needle: &str) -> usize {
    fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).matches(needle).count())
        .unwrap_or(0)
}

/// Whether a process we started still runs (a poisoned lock still holds a usable `Proc`).
fn alive(p: &Mutex<Proc>) -> bool {
    p.lock()
        .unwrap_or_else(|e| e.into_inner())
        .is_ours_and_alive()
}

/// What tells the waits here that the process was asked to stop (see [`interrupt_waits_when`]).
static INTERRUPTED: OnceLock<fn() -> bool> = OnceLock::new();

/// `sim up` must be able to abort a long wait and clean up: once `interrupted` says so (the
/// command's signal handler caught SIGINT), the waits here fail with "interrupted", so the
/// caller's cleanup (Drop) runs. Set once per process; without it waits run to the end.
pub fn interrupt_waits_when(interrupted: fn() -> bool) {
    let _ = INTERRUPTED.set(interrupted);
}

fn check_interrupted() -> Result<()> {
    if INTERRUPTED.get().is_some_and(|interrupted| interrupted()) {
        bail!("interrupted");
    }
    Ok(())
}

impl Sim {
    /// Start ibsim (and OpenSM unless `with_sm` is false) and wait until the fabric is usable.
    ///
    /// ibsim's stdin is the FIFO `console` in the state directory, opened read-write by ibsim
    /// itself: ibsim then always holds a writer, so it never sees EOF (which would make it spin
    /// on a readable stdin, like /dev/zero), whoever writes commands and whenever they exit.
    pub fn start(opts: SimOptions) -> Result<Sim> {
        let name = opts.name.clone().unwrap_or_else(|| {
            if opts.detach {
                default_name()
            } else {
                "t".to_string()
            }
        });
        validate_name(&name)?;
        let topology = fs::canonicalize(&opts.topology)
            .with_context(|| format!("topology {}", opts.topology.display()))?;
        let size = topology_size(&topology)?;
        if size.nodes() == 0 {
            bail!("{}: no Switch or Hca records found", topology.display());
        }
        for line in &opts.sm_config {
            if line.contains(['\n', '\r']) {
                bail!("--sm-option {line:?}: one opensm.conf line at a time");
            }
        }

        let (state_dir, remove_state_dir) = match (&opts.state_dir, opts.detach) {
            (Some(dir), _) => (dir.clone(), false),
            (None, true) => (default_state_dir(&name), false),
            (None, false) => (make_temp_dir()?, true),
        };
        if !remove_state_dir {
            prepare_state_dir(&state_dir)?;
        }
        let client_dir = state_dir.join(CLIENT_DIR);
        fs::create_dir_all(&client_dir)?;

        let sockname = format!("ibscope-{name}-{}", unique_suffix());
        let fifo = state_dir.join(CONSOLE_FIFO);
        mkfifo(&fifo)?;

        let mut sim = Sim {
            name,
            state_dir,
            remove_state_dir,
            client_dir,
            sockname,
            topology,
            size,
            ibsim: Mutex::new(Proc {
                pid: 0,
                program: "ibsim",
                start_time: None,
                child: None,
            }),
            opensm: None,
            console: Mutex::new(None),
            detached: false,
            detach_spawns: opts.detach,
            stopped: false,
        };
        // From here on, failures must stop what was started: the Sim exists, so Drop does.
        sim.start_ibsim(false)?;
        if opts.with_sm {
            let mut conf =
                String::from("# written by ibscope sim\nforce_log_flush TRUE\nsweep_interval 0\n");
            for line in &opts.sm_config {
                conf.push_str(line);
                conf.push('\n');
            }
            fs::write(sim.state_dir.join(OPENSM_CONF), conf)?;
            let osm = sim
                .spawn(sim.opensm_command(false)?)
                .context("starting opensm (package opensm)")?;
            sim.opensm = Some(Mutex::new(Proc::from_child(osm, "opensm")));
            sim.wait_subnet_up(0, sim.subnet_up_timeout())?;
        }

        if opts.detach {
            sim.write_state()?;
            sim.detached = true;
        }
        Ok(sim)
    }

    /// Spawn in the way this simulator's processes run: in their own session when detached,
    /// else tied to this process (see [`spawn_kept`]).
    fn spawn(&self, cmd: Command) -> io::Result<Child> {
        if self.detach_spawns {
            spawn_detached(cmd)
        } else {
            spawn_kept(cmd)
        }
    }

    /// ibsim on this simulator's topology and socket name, its console the FIFO (opened
    /// read-write by ibsim itself: it then always holds a writer and never sees EOF), its
    /// output in the state directory (appended to when `append`).
    fn ibsim_command(&self, append: bool) -> Result<Command> {
        let fifo = self.state_dir.join(CONSOLE_FIFO);
        let console_read = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .with_context(|| format!("opening {}", fifo.display()))?;
        let log = |name: &str| -> Result<File> {
            let path = self.state_dir.join(name);
            OpenOptions::new()
                .create(true)
                .write(true)
                .append(append)
                .truncate(!append)
                .open(&path)
                .with_context(|| format!("opening {}", path.display()))
        };
        let mut cmd = Command::new("ibsim");
        cmd.arg("-s")
            .args(self.size.ibsim_limit_args())
            .arg(&self.topology)
            .current_dir(self.topology.parent().unwrap_or(Path::new("/")))
            .env("IBSIM_SOCKNAME", &self.sockname)
            .env_remove("LD_PRELOAD")
            .stdin(Stdio::from(console_read))
            .stdout(log(IBSIM_OUT)?)
            .stderr(log(IBSIM_ERR)?);
        Ok(cmd)
    }

    /// Start ibsim and wait until it serves its sockets.
    fn start_ibsim(&self, append: bool) -> Result<()> {
        let banners = count_in_file(&self.state_dir.join(IBSIM_OUT), IBSIM_READY);
        let child = self
            .spawn(self.ibsim_command(append)?)
            .context("starting ibsim (package ibsim-utils)")?;
        *self.ibsim.lock().unwrap_or_else(|e| e.into_inner()) = Proc::from_child(child, "ibsim");
        self.wait_ibsim_ready(if append { banners } else { 0 })
    }

    /// OpenSM under the shim, attached to this simulator, its files in the state directory
    /// (opensm.conf written by [`Sim::start`]; the output appended to when `append`).
    fn opensm_command(&self, append: bool) -> Result<Command> {
        let out = OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(self.state_dir.join(OPENSM_OUT))?;
        let mut cmd = Command::new("opensm");
        cmd.args(["-F", OPENSM_CONF, "-f", OPENSM_LOG, "-s", "0"])
            .current_dir(&self.state_dir)
            .envs(self.env())
            .env("OSM_TMP_DIR", &self.state_dir)
            .env("OSM_CACHE_DIR", &self.state_dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out);
        Ok(cmd)
    }

    fn subnet_up_timeout(&self) -> Duration {
        Duration::from_secs(20) + Duration::from_millis(10 * self.size.nodes() as u64)
    }

    /// Kill ibsim at once (SIGKILL), as a crash would, and reap it. Its clients lose the
    /// fabric; OpenSM, one of them, stays (it hangs once ibsim is gone): [`Sim::restart`]
    /// brings both back.
    pub fn kill_ibsim(&self) -> Result<()> {
        let mut p = self.ibsim.lock().unwrap_or_else(|e| e.into_inner());
        if p.is_ours_and_alive() {
            // SAFETY: kill(2) on a PID just verified to be our ibsim.
            unsafe { libc::kill(p.pid as libc::pid_t, libc::SIGKILL) };
        }
        p.terminate(Duration::from_secs(2))
    }

    /// Stop ibsim and OpenSM, however they are (running, frozen, killed), and start them
    /// again on the same topology, socket name and state directory: a client that attaches
    /// again finds the same fabric, brought up anew by OpenSM. Waits for `SUBNET UP`.
    pub fn restart(&self) -> Result<()> {
        if let Some(osm) = self.opensm.as_ref() {
            osm.lock()
                .unwrap_or_else(|e| e.into_inner())
                .terminate(Duration::from_secs(2))?;
        }
        self.ibsim
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .terminate(Duration::from_secs(2))?;
        *self.console.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.start_ibsim(true)?;
        if let Some(osm) = self.opensm.as_ref() {
            let before = count_in_file(&self.state_dir.join(OPENSM_LOG), "SUBNET UP");
            let child = self
                .spawn(self.opensm_command(true)?)
                .context("starting opensm (package opensm)")?;
            *osm.lock().unwrap_or_else(|e| e.into_inner()) = Proc::from_child(child, "opensm");
            self.wait_subnet_up(before, self.subnet_up_timeout())?;
        }
        if self.detached {
            self.write_state()?;
        }
        Ok(())
    }

    /// Find the detached simulator `name` (under [`state_base_dir`]).
    pub fn attach(name: &str) -> Result<Sim> {
        validate_name(name)?;
        Sim::attach_dir(&default_state_dir(name))
    }

    /// Find the detached simulator whose state directory is `dir`. The returned `Sim` does not
    /// stop the simulator when dropped; call [`Sim::stop`] for that.
    pub fn attach_dir(dir: &Path) -> Result<Sim> {
        let path = dir.join(STATE_FILE);
        let text = fs::read_to_string(&path).with_context(|| {
            format!(
                "no simulator state at {} (is it up? `ibscope sim up FILE`)",
                path.display()
            )
        })?;
        let state: StateFile =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let size = topology_size(&state.topology).unwrap_or_default();
        // The directory `sim up` made for it (its name's, under the state base) is
        // ibscope's to remove when the simulator stops; one a caller gave is the caller's.
        let remove_state_dir = state.state_dir == default_state_dir(&state.name);
        Ok(Sim {
            name: state.name,
            state_dir: state.state_dir,
            remove_state_dir,
            client_dir: state.client_dir,
            sockname: state.sockname,
            topology: state.topology,
            size,
            ibsim: Mutex::new(Proc {
                pid: state.ibsim.pid,
                program: "ibsim",
                start_time: state.ibsim.start_time,
                child: None,
            }),
            opensm: state.opensm.map(|r| {
                Mutex::new(Proc {
                    pid: r.pid,
                    program: "opensm",
                    start_time: r.start_time,
                    child: None,
                })
            }),
            console: Mutex::new(None),
            detached: true,
            detach_spawns: true,
            stopped: false,
        })
    }

    /// Stop the detached simulator `name` and remove its state.
    pub fn down(name: &str) -> Result<()> {
        validate_name(name)?;
        Sim::down_dir(&default_state_dir(name))
    }

    /// Stop the detached simulator whose state directory is `dir`.
    pub fn down_dir(dir: &Path) -> Result<()> {
        let mut sim = Sim::attach_dir(dir)?;
        sim.stop()
    }

    /// Detached simulators under [`state_base_dir`].
    pub fn list() -> Result<Vec<SimStatus>> {
        let base = state_base_dir();
        let mut out = Vec::new();
        let entries = match fs::read_dir(&base) {
            Ok(e) => e,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e).with_context(|| format!("reading {}", base.display())),
        };
        for entry in entries.flatten() {
            let dir = entry.path();
            if !dir.join(STATE_FILE).exists() {
                continue;
            }
            let Ok(sim) = Sim::attach_dir(&dir) else {
                continue;
            };
            out.push(SimStatus {
                name: sim.name.clone(),
                state_dir: sim.state_dir.clone(),
                topology: sim.topology.clone(),
                sockname: sim.sockname.clone(),
                ibsim_pid: sim.ibsim_pid(),
                opensm_pid: sim.opensm_pid(),
                running: sim.is_running(),
            });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn write_state(&self) -> Result<()> {
        let record = |p: &Mutex<Proc>| {
            let p = p.lock().unwrap_or_else(|e| e.into_inner());
            ProcRecord {
                pid: p.pid,
                start_time: p.start_time,
            }
        };
        let state = StateFile {
            version: 1,
            name: self.name.clone(),
            sockname: self.sockname.clone(),
            topology: self.topology.clone(),
            state_dir: self.state_dir.clone(),
            client_dir: self.client_dir.clone(),
            ibsim: record(&self.ibsim),
            opensm: self.opensm.as_ref().map(record),
            console: self.state_dir.join(CONSOLE_FIFO),
            holder: None,
            env: self.env(),
        };
        let tmp = self.state_dir.join(format!("{STATE_FILE}.tmp"));
        fs::write(&tmp, serde_json::to_string_pretty(&state)?)?;
        fs::rename(&tmp, self.state_dir.join(STATE_FILE))?;
        Ok(())
    }

    /// Wait for one more "ready" banner than `banners_before` in ibsim's output, then for a
    /// console round trip.
    fn wait_ibsim_ready(&self, banners_before: usize) -> Result<()> {
        let out = self.state_dir.join(IBSIM_OUT);
        let timeout = Duration::from_secs(10) + Duration::from_millis(self.size.nodes() as u64);
        let deadline = Instant::now() + timeout;
        loop {
            check_interrupted()?;
            if !alive(&self.ibsim) {
                bail!(
                    "ibsim exited during startup; its stderr:\n{}\nstdout:\n{}",
                    tail(&self.state_dir.join(IBSIM_ERR), 20),
                    tail(&out, 10)
                );
            }
            if count_in_file(&out, IBSIM_READY) > banners_before {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "ibsim not ready after {} s; stdout:\n{}",
                    timeout.as_secs_f64(),
                    tail(&out, 10)
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // The banner is printed before the sockets are bound; the console is served by the
        // same select loop as the sockets, so a console round trip proves they are.
        self.console_output_timeout("# ibscope: ready?", Duration::from_secs(10))?;
        Ok(())
    }

    fn wait_subnet_up(&self, seen_before: usize, timeout: Duration) -> Result<()> {
        let log = self.state_dir.join(OPENSM_LOG);
        let deadline = Instant::now() + timeout;
        let Some(osm) = self.opensm.as_ref() else {
            bail!("this simulator runs without OpenSM");
        };
        loop {
            check_interrupted()?;
            if count_in_file(&log, "SUBNET UP") > seen_before {
                return Ok(());
            }
            if !alive(osm) {
                bail!(
                    "opensm exited before SUBNET UP; opensm.log:\n{}\nopensm output:\n{}",
                    tail(&log, 30),
                    tail(&self.state_dir.join(OPENSM_OUT), 10)
                );
            }
            if !alive(&self.ibsim) {
                bail!(
                    "ibsim exited; stderr:\n{}",
                    tail(&self.state_dir.join(IBSIM_ERR), 20)
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "no SUBNET UP from opensm after {} s; opensm.log:\n{}",
                    timeout.as_secs_f64(),
                    tail(&log, 30)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Environment a client needs: the shim preloaded and the private socket name; and the
    /// topology file ibsim runs, so that ibscope under the shim takes ibsim's node ids as
    /// names ([`TOPOLOGY_ENV`]).
    pub fn env(&self) -> Vec<(String, String)> {
        vec![
            ("LD_PRELOAD".to_string(), SHIM_PATH.to_string()),
            ("IBSIM_SOCKNAME".to_string(), self.sockname.clone()),
            (
                TOPOLOGY_ENV.to_string(),
                self.topology.to_string_lossy().into_owned(),
            ),
        ]
    }

    /// A command running under the shim, attached to this fabric, with cwd = the sim's client
    /// directory (the shim keeps a fake sysfs `./sys-<pid>` there). `SIM_HOST` picks the node
    /// it attaches at (set it with `.env("SIM_HOST", node)`).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.envs(self.env()).current_dir(&self.client_dir);
        cmd
    }

    /// Send one console command to ibsim and wait until ibsim processed it. Fails if ibsim's
    /// answer looks like an error (`# nodeid "x" not found`, `command '...' unknown`, ...).
    pub fn console(&self, line: &str) -> Result<()> {
        let out = self.console_output(line)?;
        if let Some(err) = console_error(&out) {
            bail!("ibsim rejected {line:?}: {err}");
        }
        Ok(())
    }

    /// Send one console command and return what ibsim printed for it (prompts removed).
    ///
    /// Synchronisation: the command is written between two unique `#` comment lines, which
    /// ibsim echoes; ibsim handles console lines one at a time in order, so when the second
    /// marker shows in its output the command is done, and its output is what lies between.
    pub fn console_output(&self, line: &str) -> Result<String> {
        let timeout = Duration::from_secs(10) + Duration::from_millis(self.size.nodes() as u64);
        self.console_output_timeout(line, timeout)
    }

    fn console_output_timeout(&self, line: &str, timeout: Duration) -> Result<String> {
        if line.contains(['\n', '\r']) {
            bail!("console: one line at a time");
        }
        if line.len() > CONSOLE_MAX_LINE {
            bail!("console line longer than {CONSOLE_MAX_LINE} bytes (ibsim truncates): {line:?}");
        }
        static MARKER: AtomicU64 = AtomicU64::new(0);
        let nonce = format!(
            "{}.{}.{:x}",
            std::process::id(),
            MARKER.fetch_add(1, Ordering::Relaxed),
            nanos() & 0xffff_ffff
        );
        let begin = format!("# ibscope:{nonce}:begin");
        let end = format!("# ibscope:{nonce}:end");
        let out_path = self.state_dir.join(IBSIM_OUT);

        let mut console = self.console.lock().unwrap_or_else(|e| e.into_inner());
        let start = fs::metadata(&out_path).map(|m| m.len()).unwrap_or(0);
        if console.is_none() {
            let fifo = self.state_dir.join(CONSOLE_FIFO);
            // O_NONBLOCK: fails with ENXIO instead of blocking when no ibsim reads the FIFO.
            let f = OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&fifo)
                .with_context(|| {
                    format!(
                        "opening ibsim console {} (is ibsim running?)",
                        fifo.display()
                    )
                })?;
            *console = Some(f);
        }
        let writer = console.as_mut().expect("console opened above");
        let message = format!("{begin}\n{line}\n{end}\n");
        let deadline = Instant::now() + timeout;
        // One write below PIPE_BUF is atomic: commands from concurrent writers do not interleave.
        loop {
            match writer.write(message.as_bytes()) {
                Ok(n) if n == message.len() => break,
                Ok(n) => bail!("short write to ibsim console ({n} of {})", message.len()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => {
                    *console = None;
                    return Err(e).context("writing to ibsim console");
                }
            }
        }
        drop(console);

        let mut file = File::open(&out_path)?;
        let mut seen = Vec::new();
        loop {
            file.seek(SeekFrom::Start(start + seen.len() as u64))?;
            file.read_to_end(&mut seen)?;
            let text = String::from_utf8_lossy(&seen);
            if let Some(e) = text.find(&end) {
                let body = match text.find(&begin) {
                    Some(b) if b < e => &text[b + begin.len()..e],
                    _ => &text[..e],
                };
                return Ok(strip_prompts(body));
            }
            if !alive(&self.ibsim) {
                bail!(
                    "ibsim exited while handling {line:?}; stderr:\n{}",
                    tail(&self.state_dir.join(IBSIM_ERR), 20)
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "ibsim did not process console command {line:?} within {} s",
                    timeout.as_secs_f64()
                );
            }
            check_interrupted()?;
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Take a port's link down (`Unlink`). The SM is not told: call [`Sim::resweep`] if needed.
    pub fn unlink(&self, node: &str, port: u8) -> Result<()> {
        self.console(&format!("Unlink {}[{port}]", quote_node(node)?))
    }

    /// Restore a link taken down with [`Sim::unlink`] (`ReLink`).
    pub fn relink(&self, node: &str, port: u8) -> Result<()> {
        self.console(&format!("ReLink {}[{port}]", quote_node(node)?))
    }

    /// Drop `percent` % of the MADs through a port (`Error`), optionally only for one attribute.
    pub fn set_error_rate(
        &self,
        node: &str,
        port: u8,
        percent: u8,
        attribute: Option<u16>,
    ) -> Result<()> {
        if percent > 100 {
            bail!("error rate is a percentage, 0-100 (got {percent})");
        }
        let mut line = format!("Error {}[{port}] {percent}", quote_node(node)?);
        if let Some(attr) = attribute {
            line.push_str(&format!(" {attr}"));
        }
        self.console(&line)
    }

    /// Set a PMA counter (`PerformanceSet`). `field` as perfquery names it, e.g.
    /// `SymbolErrorCounter` (PortCounters assumed) or `PortCountersExtended.PortXmitData`.
    pub fn set_counter(&self, node: &str, port: u8, field: &str, value: u64) -> Result<()> {
        if field.is_empty()
            || !field
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_')
        {
            bail!("counter field {field:?}: letters, digits and '.' only");
        }
        let field = if field.contains('.') {
            field.to_string()
        } else {
            format!("PortCounters.{field}")
        };
        self.console(&format!(
            "PerformanceSet {}[{port}] {field}={value}",
            quote_node(node)?
        ))
    }

    /// Ask OpenSM for a heavy sweep (SIGHUP) and wait for the next `SUBNET UP`.
    pub fn resweep(&self) -> Result<()> {
        let Some(osm) = self.opensm.as_ref() else {
            bail!("this simulator runs without OpenSM: nothing to resweep");
        };
        let log = self.state_dir.join(OPENSM_LOG);
        let before = count_in_file(&log, "SUBNET UP");
        {
            let mut p = osm.lock().unwrap_or_else(|e| e.into_inner());
            if !p.is_ours_and_alive() {
                bail!("opensm (pid {}) is not running", p.pid);
            }
            // SAFETY: kill(2) on a PID just verified to be our opensm.
            unsafe { libc::kill(p.pid as libc::pid_t, libc::SIGHUP) };
        }
        let timeout =
            Duration::from_secs(20) + Duration::from_millis(10 * self.size.nodes() as u64);
        self.wait_subnet_up(before, timeout)
    }

    /// True while ibsim (and OpenSM, if started) run.
    pub fn is_running(&self) -> bool {
        alive(&self.ibsim) && self.opensm.as_ref().map_or(true, alive)
    }

    /// Stop OpenSM, then ibsim (SIGTERM, SIGKILL after a grace period), reap them, and remove
    /// the state directory (temporary) or the state file (named directory).
    pub fn stop(&mut self) -> Result<()> {
        if self.stopped {
            return Ok(());
        }
        self.stopped = true;
        let mut errors = Vec::new();
        // OpenSM first: under the shim it hangs on SIGTERM once ibsim is gone.
        if let Some(osm) = self.opensm.as_ref() {
            let mut p = osm.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = p.terminate(Duration::from_secs(2)) {
                errors.push(e);
            }
        }
        {
            let mut p = self.ibsim.lock().unwrap_or_else(|e| e.into_inner());
            if let Err(e) = p.terminate(Duration::from_secs(2)) {
                errors.push(e);
            }
        }
        *self.console.lock().unwrap_or_else(|e| e.into_inner()) = None;
        if self.remove_state_dir {
            let _ = fs::remove_dir_all(&self.state_dir);
        } else {
            for f in [STATE_FILE, CONSOLE_FIFO] {
                let _ = fs::remove_file(self.state_dir.join(f));
            }
            let _ = fs::remove_dir_all(&self.client_dir);
        }
        match errors.pop() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn sockname(&self) -> &str {
        &self.sockname
    }
    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }
    pub fn client_dir(&self) -> &Path {
        &self.client_dir
    }
    pub fn topology(&self) -> &Path {
        &self.topology
    }
    pub fn size(&self) -> FabricSize {
        self.size
    }
    pub fn has_sm(&self) -> bool {
        self.opensm.is_some()
    }
    pub fn ibsim_pid(&self) -> u32 {
        self.ibsim.lock().unwrap_or_else(|e| e.into_inner()).pid
    }
    pub fn opensm_pid(&self) -> Option<u32> {
        self.opensm
            .as_ref()
            .map(|p| p.lock().unwrap_or_else(|e| e.into_inner()).pid)
    }
    /// Every PID this simulator runs (ibsim, OpenSM).
    pub fn pids(&self) -> Vec<u32> {
        let mut v = vec![self.ibsim_pid()];
        v.extend(self.opensm_pid());
        v
    }
    /// ibsim's console output (prompts, command echoes and answers).
    pub fn ibsim_log(&self) -> PathBuf {
        self.state_dir.join(IBSIM_OUT)
    }
    /// OpenSM's log file.
    pub fn opensm_log(&self) -> PathBuf {
        self.state_dir.join(OPENSM_LOG)
    }
    /// The shell lines that make a client run against this fabric.
    pub fn export_lines(&self) -> String {
        let mut s = String::new();
        for (k, v) in self.env() {
            s.push_str(&format!("export {k}={}\n", shell_quote(&v)));
        }
        s.push_str(&format!("export IBSCOPE_SIM={}\n", shell_quote(&self.name)));
        s
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        if !self.detached {
            let _ = self.stop();
        }
    }
}

/// A named state directory may hold a previous run: refuse if it still runs, else clear it.
fn prepare_state_dir(dir: &Path) -> Result<()> {
    if dir.join(STATE_FILE).exists() {
        let sim = Sim::attach_dir(dir)?;
        if sim.is_running() {
            bail!(
                "simulator {:?} is already running (state in {}); `ibscope sim down --name {}` first",
                sim.name(),
                dir.display(),
                sim.name()
            );
        }
        // A stale state: make sure nothing of it is left, then reuse the directory.
        let mut sim = sim;
        let _ = sim.stop();
    }
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    for f in [
        CONSOLE_FIFO,
        IBSIM_OUT,
        IBSIM_ERR,
        OPENSM_LOG,
        OPENSM_OUT,
        STATE_FILE,
    ] {
        let _ = fs::remove_file(dir.join(f));
    }
    Ok(())
}

fn quote_node(node: &str) -> Result<String> {
    if node.is_empty() || node.contains(['"', '\n', '\r']) {
        bail!("node name {node:?}: must be non-empty, without quotes or newlines");
    }
    Ok(format!("\"{node}\""))
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// ibsim prompts are `sim> ` (or `sim (inactive)> `) printed after each console line.
fn strip_prompts(text: &str) -> String {
    text.replace("sim (inactive)> ", "")
        .replace("sim> ", "")
        .trim()
        .to_string()
}

/// ibsim reports console errors as text only; recognise the messages its commands print.
fn console_error(output: &str) -> Option<String> {
    const PATTERNS: [&str; 12] = [
        "not found",
        "unknown - skipped",
        "bad param",
        "bad port",
        "bad lid",
        "can't",
        "cannot",
        "missing",
        "must be in",
        "is not linked",
        "no local port",
        "no remote port",
    ];
    let lower = output.to_ascii_lowercase();
    PATTERNS
        .iter()
        .any(|p| lower.contains(p))
        .then(|| output.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_a_topology_and_only_raises_needed_limits() {
        let dir = make_temp_dir().unwrap();
        let path = dir.join("t.topo");
        let mut text = String::new();
        for s in 0..200 {
            text.push_str(&format!("Switch 36 \"S{s}\"\n\n"));
        }
        text.push_str("Hca 2 \"H1\"\n[1] \"S0\"[1]\n\nCa 1 \"H2\"\n");
        fs::write(&path, text).unwrap();
        let size = topology_size(&path);
        fs::remove_dir_all(dir).unwrap();
        let size = size.unwrap();
        assert_eq!(size.switches, 200);
        assert_eq!(size.hcas, 2);
        assert_eq!(size.ports, 200 * 37 + 3);
        assert_eq!(size.lids, 200 + 3);
        let args = size.ibsim_limit_args();
        assert_eq!(args, vec!["-S".to_string(), (200 + 50 + 16).to_string()]);
    }

    #[test]
    fn small_fabric_needs_no_limit_args() {
        let size = FabricSize {
            switches: 2,
            hcas: 2,
            routers: 0,
            ports: 22,
            lids: 6,
        };
        assert!(size.ibsim_limit_args().is_empty());
    }

    #[test]
    fn recognises_ibsim_console_errors() {
        assert!(console_error("# nodeid \"Nope\" (Nope) not found").is_some());
        assert!(console_error("command 'Foo bar' unknown - skipped").is_some());
        assert!(console_error("# can't unlink port 99 at nodeid \"Switch1\"").is_some());
        assert!(console_error("").is_none());
        assert!(
            console_error("Switch1[1] PortCounters.SymbolErrorCounter has been set to 17")
                .is_none()
        );
        assert!(console_error("# Net status - Wed\n200000\t[1]\t\"Hca1\"[1]\t  4x  2.5G Init/LinkUp\n#  dumped 1 nodes").is_none());
    }

    #[test]
    fn strips_prompts() {
        assert_eq!(
            strip_prompts("sim> # nodeid \"x\" not found\nsim> "),
            "# nodeid \"x\" not found"
        );
    }

    #[test]
    fn shell_quotes() {
        assert_eq!(shell_quote("abc-1"), "abc-1");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }

    #[test]
    fn names_are_checked() {
        assert!(validate_name("net-1_a.b").is_ok());
        assert!(validate_name("").is_err());
        assert!(validate_name("../x").is_err());
        assert!(validate_name("a/b").is_err());
    }
}
