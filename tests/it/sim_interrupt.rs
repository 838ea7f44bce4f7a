//! Every way out of the long-running commands: SIGINT, SIGTERM and SIGHUP sent to `sim up`
//! (while OpenSM is still bringing a large fabric up), `serve`, `tui` and `demo` stop every
//! process the command started, remove every state directory it made (each runs with a
//! private TMPDIR that must be empty afterwards), leave no `sys-<pid>` fake sysfs of the
//! simulator's shim in the working directory, and restore the terminal.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::tmux::Tmux;
use common::*;

/// PIDs of live processes whose working directory or command line lies under `dir`.
fn processes_under(dir: &Path) -> Vec<u32> {
    let dir = dir.to_string_lossy().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cwd = std::fs::read_link(entry.path().join("cwd"))
            .map(|p| p.to_string_lossy().to_string())
            .unwrap_or_default();
        let cmdline = std::fs::read(entry.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        if (cwd.starts_with(&dir) || cmdline.contains(&dir)) && pid_alive(pid) {
            found.push(pid);
        }
    }
    found
}

const STOP_SIGNALS: [(i32, &str); 3] = [
    (libc::SIGINT, "SIGINT"),
    (libc::SIGTERM, "SIGTERM"),
    (libc::SIGHUP, "SIGHUP"),
];

/// A private TMPDIR and working directory for one command run.
struct Scratch {
    root: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Scratch {
        let root = temp_dir();
        std::fs::create_dir(root.path().join("tmp")).unwrap();
        std::fs::create_dir(root.path().join("cwd")).unwrap();
        Scratch { root }
    }
    fn tmp(&self) -> std::path::PathBuf {
        self.root.path().join("tmp")
    }
    fn cwd(&self) -> std::path::PathBuf {
        self.root.path().join("cwd")
    }
    /// Nothing left: no process runs there, TMPDIR is empty, no `sys-*` in the cwd.
    #[track_caller]
    fn assert_clean(&self, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !processes_under(&self.tmp()).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            processes_under(&self.tmp()),
            Vec::<u32>::new(),
            "{what}: processes left"
        );
        assert_eq!(entries(&self.tmp()), Vec::<String>::new(), "{what}: TMPDIR");
        let sysfs: Vec<String> = entries(&self.cwd())
            .into_iter()
            .filter(|e| e.starts_with("sys-"))
            .collect();
        assert_eq!(
            sysfs,
            Vec::<String>::new(),
            "{what}: the shim's sysfs in the cwd"
        );
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .collect();
    names.sort();
    names
}

/// Wait for `child` to end, at most `limit`.
#[track_caller]
fn wait_exit(
    child: &mut std::process::Child,
    limit: Duration,
    what: &str,
) -> std::process::ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "{what} did not stop within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn send(pid: u32, signal: i32) {
    // SAFETY: signalling a process this test started.
    assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0);
}

#[test]
fn stop_signals_during_sim_up_leave_nothing() {
    let dir = temp_dir();
    let fat_tree = ["fat-tree", "--levels", "3", "--hosts", "2048"];
    let topo = sim_gen(dir.path(), "big.topo", &fat_tree);
    for (signal, name) in STOP_SIGNALS {
        let scratch = Scratch::new();
        let state = scratch.root.path().join("state");
        let mut child = Command::new(ibscope_bin())
            .args(["sim", "up", &topo, "--name", "interrupt"])
            .env("IBSCOPE_SIM_DIR", &state)
            .env("TMPDIR", scratch.tmp())
            .current_dir(scratch.cwd())
            .env_remove("LD_PRELOAD")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("ibscope sim up starts");
        // Wait until OpenSM runs (its log exists) but the subnet is not up yet.
        let log = state.join("interrupt").join("opensm.log");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !log.exists() {
            assert!(Instant::now() < deadline, "OpenSM never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        let before = processes_under(scratch.root.path());
        assert!(before.len() >= 2, "ibsim and opensm run: {before:?}");
        send(child.id(), signal);
        let status = wait_exit(&mut child, Duration::from_secs(30), "sim up");
        let mut err = String::new();
        use std::io::Read;
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(
            !status.success(),
            "{name}: interrupted sim up must fail: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        assert_all_gone(&before);
        assert!(processes_under(scratch.root.path()).is_empty());
        // The named state directory keeps its logs (as after `sim down`), nothing else.
        assert!(!state.join("interrupt").join("state.json").exists());
        scratch.assert_clean(&format!("sim up, {name}"));
    }
}

#[test]
fn stop_signals_under_serve_leave_nothing() {
    let sim = sim("net");
    for (signal, name) in STOP_SIGNALS {
        let scratch = Scratch::new();
        let log = scratch.root.path().join("serve.log");
        let port = common::net::free_port();
        let mut cmd = sim.command(ibscope_bin());
        cmd.args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--interval",
            "0.2",
        ])
        .env("TMPDIR", scratch.tmp())
        .current_dir(scratch.cwd())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
        let mut serve = common::net::KillOnDrop::spawn(cmd, "ibscope serve");
        common::net::wait_healthy(&mut serve, port, &log);
        let before = processes_under(&scratch.tmp());
        assert_eq!(before.len(), 1, "{name}: the agent: {before:?}");
        send(serve.pid(), signal);
        let status = wait_exit(&mut serve.child, Duration::from_secs(10), "serve");
        let err = std::fs::read_to_string(&log).unwrap();
        assert_eq!(status.code(), Some(0), "{name}: {err}");
        assert!(
            err.contains(&format!("{name} received; stopped after")),
            "{err}"
        );
        assert!(
            !err.contains("ibwarn"),
            "the shim's lines reached stderr:\n{err}"
        );
        assert_all_gone(&before);
        scratch.assert_clean(&format!("serve, {name}"));
    }
}

/// The ibscope process the shell in the terminal runs.
fn ibscope_in(tmux: &Tmux) -> u32 {
    let shell: u32 = tmux
        .run(&["display", "-p", "-t", "ui", "#{pane_pid}"])
        .trim()
        .parse()
        .unwrap();
    let ibscope = children_of(shell);
    assert_eq!(ibscope.len(), 1, "{ibscope:?}");
    ibscope[0]
}

/// Run `command` (a shell line) in a terminal, wait until the TUI shows `ready`, send
/// `signal` to the ibscope process, and check the exit code, the terminal after it (cooked
/// mode, main screen) and that nothing is left.
fn assert_tui_stops(command: &str, env: &str, ready: &str, signal: i32, name: &str) {
    let scratch = Scratch::new();
    let done = scratch.root.path().join("done");
    let stty = scratch.root.path().join("stty");
    let script = format!(
        "cd {cwd} && env {env} TMPDIR={tmp} {bin} {command}; code=$?; stty -a > {stty}; \
         echo $code > {done}; sleep 60",
        cwd = scratch.cwd().display(),
        tmp = scratch.tmp().display(),
        bin = ibscope_bin().display(),
        stty = stty.display(),
        done = done.display(),
    );
    let tmux = Tmux::start("ibscope-stop", &script);
    let deadline = Instant::now() + Duration::from_secs(40);
    while !tmux.screen().contains(ready) {
        assert!(
            Instant::now() < deadline,
            "{command}: the TUI never showed {ready:?}:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        tmux.run(&["display", "-p", "-t", "ui", "#{alternate_on}"])
            .trim(),
        "1"
    );
    send(ibscope_in(&tmux), signal);
    let deadline = Instant::now() + Duration::from_secs(15);
    while !done.exists() {
        assert!(
            Instant::now() < deadline,
            "{command}: still running 15 s after {name}:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(50));
    let code = std::fs::read_to_string(&done).unwrap();
    assert_eq!(code.trim(), "0", "{command}, {name}:\n{}", tmux.screen());
    let modes = std::fs::read_to_string(&stty).unwrap();
    let words: Vec<&str> = modes.split_whitespace().collect();
    assert!(
        words.contains(&"icanon") && words.contains(&"echo"),
        "{command}, {name}: the terminal stayed raw: {modes}"
    );
    assert_eq!(
        tmux.run(&["display", "-p", "-t", "ui", "#{alternate_on}"])
            .trim(),
        "0",
        "{command}, {name}: still on the alternate screen"
    );
    // The shell waiting in the pane names the scratch directory too.
    drop(tmux);
    scratch.assert_clean(&format!("{command}, {name}"));
}

#[test]
fn stop_signals_under_tui_restore_the_terminal_and_leave_nothing() {
    let sim = sim("demo.topo");
    let env: String = sim.env().iter().map(|(k, v)| format!("{k}={v} ")).collect();
    for (signal, name) in STOP_SIGNALS {
        assert_tui_stops(
            "tui --interval 1",
            &env,
            "6 switches, 16 HCAs on 16 servers",
            signal,
            name,
        );
    }
}

#[test]
fn stop_signals_under_demo_restore_the_terminal_and_leave_nothing() {
    for (signal, name) in STOP_SIGNALS {
        assert_tui_stops(
            "demo",
            "",
            "16 switches, 63 HCAs on 8 servers",
            signal,
            name,
        );
    }
}

/// The terminal closing under the UI (its window closed, its tmux session killed): the
/// UI ends as for `q` and leaves nothing, instead of spinning on a terminal that reads
/// end of file (crossterm retries such reads without end).
#[test]
fn a_closed_terminal_ends_tui_and_demo() {
    let sim = sim("demo.topo");
    let env: String = sim.env().iter().map(|(k, v)| format!("{k}={v} ")).collect();
    for (command, env, ready) in [
        (
            "tui --interval 1",
            env.as_str(),
            "6 switches, 16 HCAs on 16 servers",
        ),
        ("demo", "", "16 switches, 63 HCAs on 8 servers"),
    ] {
        let scratch = Scratch::new();
        let script = format!(
            "cd {cwd} && env {env} TMPDIR={tmp} {bin} {command}; true",
            cwd = scratch.cwd().display(),
            tmp = scratch.tmp().display(),
            bin = ibscope_bin().display(),
        );
        let tmux = Tmux::start("ibscope-hangup", &script);
        tmux.wait_for(&[ready], Duration::from_secs(40));
        let ibscope = ibscope_in(&tmux);
        drop(tmux);
        assert_all_gone(&[ibscope]);
        scratch.assert_clean(&format!("{command}, terminal closed"));
    }
}
