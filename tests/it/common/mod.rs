//! Harness shared by the integration tests: a private simulated fabric per test, and runners
//! for `ibscope` and the reference tools (infiniband-diags) under the umad2sim shim.
//!
//! Every `Sim` has its own socket name, state directory and client directory, so tests run in
//! parallel. Dropping the `Sim` (also on panic) stops ibsim and OpenSM. ibsim serves at most 10
//! clients at once (OpenSM is one of them): don't run more than 9 clients at once on one sim.
//!
//! Every client run has a deadline (default 120 s, `IBSCOPE_TEST_TIMEOUT=<secs>`): a client of a
//! dead or missing ibsim blocks forever inside the shim.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

pub use ibscope_sim::{Sim, SimOptions};

pub mod net;
pub mod schema;
pub mod tmux;

/// Repository root (the ibscope package).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Resolve a topology: an existing path (absolute, or relative to the repo root), else a name
/// under `examples/fabrics/`.
pub fn fabric(topology: &str) -> PathBuf {
    let direct = Path::new(topology);
    if direct.is_absolute() && direct.exists() {
        return direct.to_path_buf();
    }
    let in_repo = repo_root().join(topology);
    if in_repo.exists() {
        return in_repo;
    }
    let example = repo_root().join("examples/fabrics").join(topology);
    if example.exists() {
        return example;
    }
    panic!("topology {topology:?}: not a path and not in examples/fabrics/");
}

/// A fabric with OpenSM, up (`SUBNET UP`) when this returns.
#[track_caller]
pub fn sim(topology: &str) -> Sim {
    sim_with(SimOptions::new(fabric(topology)))
}

/// A fabric without an SM: ports stay Init, no LIDs; only directed routes work.
#[track_caller]
pub fn sim_no_sm(topology: &str) -> Sim {
    let mut opts = SimOptions::new(fabric(topology));
    opts.with_sm = false;
    sim_with(opts)
}

/// A fabric with OpenSM and extra opensm.conf lines (e.g. `routing_engine minhop`).
#[track_caller]
pub fn sim_with_sm_config(topology: &str, lines: &[&str]) -> Sim {
    let mut opts = SimOptions::new(fabric(topology));
    opts.sm_config = lines.iter().map(|l| l.to_string()).collect();
    sim_with(opts)
}

#[track_caller]
pub fn sim_with(opts: SimOptions) -> Sim {
    match Sim::start(opts.clone()) {
        Ok(s) => s,
        Err(e) => panic!(
            "starting the simulator on {}: {e:#}",
            opts.topology.display()
        ),
    }
}

/// Deadline for one client run.
pub fn client_timeout() -> Duration {
    let secs = std::env::var("IBSCOPE_TEST_TIMEOUT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(120);
    Duration::from_secs(secs)
}

/// Run a command to completion with a deadline; panics (after killing it) on timeout.
#[track_caller]
pub fn run_with_timeout(cmd: Command, timeout: Duration) -> Output {
    ibscope_sim::run_with_timeout(cmd, timeout).unwrap_or_else(|e| panic!("{e:#}"))
}

/// Path of the ibscope binary built for these tests.
pub fn ibscope_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ibscope"))
}

/// Run `ibscope ARGS` under the shim against `sim`.
#[track_caller]
pub fn ibscope(sim: &Sim, args: &[&str]) -> Output {
    let mut cmd = sim.command(ibscope_bin());
    cmd.args(args);
    run_with_timeout(cmd, client_timeout())
}

/// Run `ibscope ARGS` under the shim, attached at node `host` (SIM_HOST).
#[track_caller]
pub fn ibscope_at(sim: &Sim, host: &str, args: &[&str]) -> Output {
    let mut cmd = sim.command(ibscope_bin());
    cmd.args(args).env("SIM_HOST", host);
    run_with_timeout(cmd, client_timeout())
}

/// Run `ibscope ARGS` without the simulator (e.g. `--topology FILE`, `sim up`).
#[track_caller]
pub fn ibscope_plain(args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(ibscope_bin());
    cmd.args(args)
        .env_remove("LD_PRELOAD")
        .env_remove("IBSIM_SOCKNAME");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    run_with_timeout(cmd, client_timeout())
}

/// Run a reference tool (ibnetdiscover, smpquery, perfquery, ...) under the shim.
#[track_caller]
pub fn reference(sim: &Sim, tool: &str, args: &[&str]) -> Output {
    let mut cmd = sim.command(tool);
    cmd.args(args);
    run_with_timeout(cmd, client_timeout())
}

/// Run a reference tool under the shim, attached at node `host` (SIM_HOST).
#[track_caller]
pub fn reference_at(sim: &Sim, host: &str, tool: &str, args: &[&str]) -> Output {
    let mut cmd = sim.command(tool);
    cmd.args(args).env("SIM_HOST", host);
    run_with_timeout(cmd, client_timeout())
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Assert exit code 0; returns stdout. The panic message carries stdout and stderr.
#[track_caller]
pub fn assert_success(out: &Output) -> String {
    assert_exit(out, 0)
}

/// Assert a given exit code; returns stdout.
#[track_caller]
pub fn assert_exit(out: &Output, code: i32) -> String {
    if out.status.code() != Some(code) {
        panic!(
            "expected exit code {code}, got {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            out.status,
            stdout(out),
            stderr(out)
        );
    }
    stdout(out)
}

/// PIDs of the live processes whose parent is `pid`.
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(pid) && pid_alive(child) {
            found.push(child);
        }
    }
    found
}

/// True if a process with this PID exists and is not a zombie.
pub fn pid_alive(pid: u32) -> bool {
    ibscope_sim::process_alive(pid)
}

/// Assert none of `pids` is left (waits briefly: reaping is asynchronous for orphans).
#[track_caller]
pub fn assert_all_gone(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|p| pid_alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<u32> = pids.iter().copied().filter(|p| pid_alive(*p)).collect();
    assert!(left.is_empty(), "processes still running: {left:?}");
}

/// A fresh private directory, removed on drop (for detached-sim state and scratch files).
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("ibscope-test-")
        .tempdir()
        .expect("creating a temporary directory")
}

/// Stops a detached simulator (by its state directory) when dropped, so a failing test does
/// not leave it running. Harmless after a successful `down`.
pub struct DownOnDrop(pub PathBuf);

impl Drop for DownOnDrop {
    fn drop(&mut self) {
        if self.0.join("state.json").exists() {
            let _ = Sim::down_dir(&self.0);
        }
    }
}

/// A name unique to this test process and call, for detached simulators.
pub fn unique_name(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// A GUID as ibscope's JSON writes it (`"0x" + 16 hex digits`); `None` for anything else,
/// a bare number included (JSON numbers above 2^53 lose digits in common tools).
pub fn json_guid(v: &serde_json::Value) -> Option<u64> {
    let text = v.as_str()?;
    let hex = text.strip_prefix("0x")?;
    (hex.len() == 16).then(|| u64::from_str_radix(hex, 16).ok())?
}

/// What `promtool check metrics` (the Prometheus project's own checker, Debian package
/// prometheus) says of an exposition: its exit code (0 clean, 1 a parse error, 3 lints
/// only) and its output.
pub struct PromtoolReport {
    pub code: Option<i32>,
    pub report: String,
}

impl PromtoolReport {
    pub fn passed(&self) -> bool {
        self.code == Some(0)
    }
}

/// Run `promtool check metrics` on `text` (read from stdin).
pub fn promtool_check(text: &str) -> PromtoolReport {
    use std::io::Write;
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus) runs");
    child
        .stdin
        .take()
        .expect("promtool's stdin")
        .write_all(text.as_bytes())
        .expect("writing to promtool");
    let out = child.wait_with_output().expect("promtool exits");
    PromtoolReport {
        code: out.status.code(),
        report: String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr),
    }
}

/// `ibscope sim gen ARGS -o DIR/NAME` (e.g. `["fat-tree", "--levels", "2", "--hosts",
/// "512"]`): the path of the topology written.
pub fn sim_gen(dir: &Path, name: &str, args: &[&str]) -> String {
    let path = dir.join(name);
    let p = path.to_str().expect("a UTF-8 path").to_string();
    let mut full = vec!["sim", "gen"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["-o", &p]);
    assert_success(&ibscope_plain(&full, &[]));
    p
}

/// How many events of `kind` the journal at `path` holds (none while it does not exist).
pub fn journal_count(path: &Path, kind: &str) -> usize {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&format!("\"kind\":\"{kind}\"")))
        .count()
}

/// Wait until the journal at `path` holds `n` events of `kind`; past `within`, fail with
/// what `context` says (a log, a screen).
#[track_caller]
pub fn wait_for_journal(
    path: &Path,
    kind: &str,
    n: usize,
    within: Duration,
    context: impl Fn() -> String,
) {
    let deadline = std::time::Instant::now() + within;
    while journal_count(path, kind) < n {
        assert!(
            std::time::Instant::now() < deadline,
            "no {n} {kind} in the journal {}:\n{}",
            path.display(),
            context()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}
