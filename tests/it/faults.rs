//! Fault injection: MAD loss at a switch, ibsim killed in the middle of a sweep, the SM
//! killed, and malformed input files. ibscope must finish within its timeouts (the
//! exporter: keep serving), answer what it can, say exactly what failed, and never panic.
//!
//! (A link going down is covered by tests/it/route.rs: the black hole `route check` finds.)

use crate::common;

use common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

/// No Rust panic message in a run's stderr.
#[track_caller]
fn assert_no_panic(out: &Output) {
    let err = stderr(out);
    assert!(
        !err.contains("panicked"),
        "ibscope panicked:\n{err}\n--- stdout ---\n{}",
        stdout(out)
    );
}

fn kill9(pid: u32) {
    // SAFETY: kill(2) on a PID this test's simulator started; no memory is involved.
    let rc = unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    assert_eq!(rc, 0, "kill -9 {pid}: {}", std::io::Error::last_os_error());
}

#[track_caller]
fn wait_gone(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while pid_alive(pid) {
        assert!(Instant::now() < deadline, "process {pid} survived kill -9");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// (node GUID, port) of every port in a `counters --format json` sample.
fn counter_ports(sample: &Value) -> BTreeSet<(String, u64)> {
    sample["ports"]
        .as_array()
        .expect("ports array")
        .iter()
        .map(|p| {
            (
                p["node_guid"].to_string(),
                p["port"].as_u64().expect("port number"),
            )
        })
        .collect()
}

fn node_guids(snapshot: &Value) -> BTreeSet<String> {
    snapshot["nodes"]
        .as_array()
        .expect("nodes array")
        .iter()
        .map(|n| n["guid"].to_string())
        .collect()
}

/// 20 % of the MADs through every port of one leaf are dropped: discovery still finds the
/// whole fabric (retries), and the counter sweep answers every port or names each one it
/// could not read — in bounded time.
#[test]
fn mad_loss_at_a_switch_is_survived() {
    let sim = sim("fat-tree-2l-64.topo");
    let baseline_topo: Value = serde_json::from_str(&assert_success(&ibscope(
        &sim,
        &["discover", "--format", "json"],
    )))
    .unwrap();
    let baseline_counters: Value = serde_json::from_str(&assert_success(&ibscope(
        &sim,
        &["counters", "--format", "json"],
    )))
    .unwrap();

    for port in 1..=36 {
        sim.set_error_rate("L0002", port, 20, None).unwrap();
    }

    // 200 ms x 4 attempts per MAD at most; a lossy switch must not stretch a sweep of this
    // small fabric past a few seconds.
    let bound = Duration::from_secs(30);
    let t = Instant::now();
    let mut cmd = sim.command(ibscope_bin());
    cmd.args(["discover", "--format", "json"]);
    let out = run_with_timeout(cmd, bound);
    assert_no_panic(&out);
    let lossy_topo: Value = serde_json::from_str(&assert_success(&out)).unwrap();
    assert_eq!(
        node_guids(&lossy_topo),
        node_guids(&baseline_topo),
        "discovery through a lossy switch missed nodes"
    );
    assert_eq!(
        lossy_topo["links"].as_array().unwrap().len(),
        baseline_topo["links"].as_array().unwrap().len(),
        "discovery through a lossy switch missed links"
    );

    let mut cmd = sim.command(ibscope_bin());
    cmd.args(["counters", "--format", "json"]);
    let out = run_with_timeout(cmd, bound);
    assert_no_panic(&out);
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "counters under loss: {:?}\n{}",
        out.status,
        stderr(&out)
    );
    let lossy: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(
        counter_ports(&lossy),
        counter_ports(&baseline_counters),
        "the counter sweep under loss must list every port"
    );
    let warnings = stderr(&out)
        .lines()
        .filter(|l| l.starts_with("warning:"))
        .count();
    let mut failed = 0;
    for p in lossy["ports"].as_array().unwrap() {
        let errors = p["errors"].as_array().map_or(0, |e| e.len());
        if p["counters"].is_null() {
            assert!(
                errors > 0,
                "a port without counters and without an error: {p}"
            );
        }
        failed += errors;
    }
    eprintln!(
        "counters under 20% loss: {failed} failed queries, {:?} so far",
        t.elapsed()
    );
    // Exactly the failed ports are reported, on stderr and in the exit code.
    assert_eq!(warnings, failed, "stderr:\n{}", stderr(&out));
    assert_eq!(out.status.code(), Some(if failed > 0 { 1 } else { 0 }));
    assert!(t.elapsed() < bound * 2);
}

/// The 512-host fat tree (47 switches, 559 nodes) the ibsim-killed tests sweep.
fn ft512(dir: &Path) -> std::path::PathBuf {
    let topo = dir.join("ft512.topo");
    let spec = ibscope_topo::gen::FatTreeSpec {
        levels: 2,
        radix: 36,
        hosts: 512,
        host_ports: 1,
        options: Default::default(),
    };
    std::fs::write(&topo, ibscope_topo::gen::fat_tree(&spec).unwrap()).unwrap();
    topo
}

/// Per-MAD wait of the ibsim-killed runs: 1 s per attempt, 6 attempts, so one MAD alone
/// could take 6 s to give up, and the ~3,000 left of a sweep hours.
const KILLED_TIMEOUT_MS: u64 = 1000;
const KILLED_RETRIES: u32 = 5;

/// Bytes ibscope has written so far (/proc/PID/io wchar): the shim writes one request of
/// a little over 256 bytes per MAD to ibsim's socket.
fn bytes_written(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("wchar: ").map(|v| v.trim().parse::<u64>()))
        })
        .and_then(Result::ok)
        .unwrap_or(0)
}

/// Run `ibscope ARGS` (one MAD in flight, the timeouts above) on the 512-host fabric and
/// kill -9 ibsim once ibscope has sent about `kill_after_mads` MADs. Returns the run and
/// how long ibscope took to end after the kill.
///
/// (Killing on the shim's `attached` line is too early: the shim's own setup then fails
/// and it exits 255 itself.)
fn run_and_kill_ibsim(args: &[&str], kill_after_mads: u64) -> (Output, Duration) {
    use std::io::BufRead;
    let dir = temp_dir();
    let sim = sim_with(SimOptions::new(ft512(dir.path())));
    let ibsim = sim.ibsim_pid();

    let timeout = KILLED_TIMEOUT_MS.to_string();
    let retries = KILLED_RETRIES.to_string();
    let mut cmd = sim.command(ibscope_bin());
    cmd.args([
        "--max-outstanding",
        "1",
        "--timeout-ms",
        &timeout,
        "--retries",
        &retries,
    ])
    .args(args)
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawning ibscope");
    let mut out_pipe = child.stdout.take().unwrap();
    let out_thread = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = std::io::Read::read_to_end(&mut out_pipe, &mut v);
        v
    });
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let err_pipe = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(err_pipe).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    let mut err_lines = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        while let Ok(line) = rx.try_recv() {
            err_lines.push(line);
        }
        let written = bytes_written(child.id());
        if written > kill_after_mads * 256 {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "ibscope {args:?} ended ({status:?}, {written} bytes written) before ibsim \
                 could be killed mid-sweep; stderr:\n{}",
                err_lines.join("\n")
            );
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "ibscope {args:?} never got that far; stderr:\n{}",
                err_lines.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    kill9(ibsim);
    let killed_at = Instant::now();
    wait_gone(ibsim);

    let bound = Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if killed_at.elapsed() > bound {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "ibscope {args:?} hung for {bound:?} after ibsim died; stderr so far:\n{}",
                err_lines.join("\n")
            );
        }
        while let Ok(line) = rx.try_recv() {
            err_lines.push(line);
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    let ended_after = killed_at.elapsed();
    // The pipe closes when the process is gone: collect the rest of stderr.
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) {
        err_lines.push(line);
    }
    let out = Output {
        status,
        stdout: out_thread.join().unwrap(),
        stderr: err_lines.join("\n").into_bytes(),
    };
    eprintln!(
        "ibscope {args:?} after ibsim died: {:?}, {ended_after:?} after the kill; stderr:\n{}",
        out.status,
        stderr(&out)
    );
    (out, ended_after)
}

/// The one outcome of a lost transport: exit 2, a single "lost the connection" message and
/// no per-MAD failures, well within one MAD's own retry budget after the kill.
#[track_caller]
fn assert_transport_lost(out: &Output, ended_after: Duration) {
    assert_no_panic(out);
    assert_exit(out, 2);
    let err = stderr(out);
    let ours: Vec<&str> = err
        .lines()
        .filter(|l| {
            l.starts_with("ibscope:") || l.starts_with("warning:") || l.starts_with("error:")
        })
        .collect();
    assert_eq!(
        ours.len(),
        1,
        "exactly one message from ibscope expected:\n{err}"
    );
    let line = ours[0];
    assert!(
        line.starts_with("ibscope: error: ")
            && line.contains("lost the connection to the fabric (umad ")
            && line.ends_with("is the simulator or the ib_umad device still there?"),
        "not the transport-lost message: {line}"
    );
    assert!(
        !err.contains("sending a MAD failed") && !err.contains("receiving a MAD failed"),
        "per-MAD transport errors printed:\n{err}"
    );
    // The shim logs each failed write itself: one means ibscope sent once after the loss.
    assert!(
        err.matches("umad2sim_write: cannot write").count() <= 1,
        "ibscope kept sending after the transport was gone:\n{err}"
    );
    // The MAD in flight at the kill waits out its one deadline; its resend fails and ends
    // everything. A MAD's own budget is 6 x 1 s.
    let per_mad_budget = Duration::from_millis(KILLED_TIMEOUT_MS) * (KILLED_RETRIES + 1);
    let bound = Duration::from_millis(KILLED_TIMEOUT_MS) * 5 / 2;
    assert!(bound < per_mad_budget / 2);
    assert!(
        ended_after < bound,
        "ended {ended_after:?} after the kill; expected under {bound:?} (one MAD's own \
         budget is {per_mad_budget:?})"
    );
}

/// ibsim dies (kill -9) while `ibscope discover` sweeps a 512-host fat tree (about 3,900
/// MADs; the kill comes after about 500).
#[test]
fn ibsim_killed_mid_sweep() {
    let (out, ended_after) = run_and_kill_ibsim(&["discover", "--format", "json"], 500);
    assert_transport_lost(&out, ended_after);
    // No half a fabric passed off as the result.
    assert!(
        out.stdout.is_empty(),
        "discover printed a topology after losing the fabric:\n{}",
        stdout(&out)
    );
}

/// ibsim dies during the counter sweep of `ibscope counters` (discovery is about 3,900
/// MADs, the sweep about 3,000 more).
#[test]
fn ibsim_killed_mid_counter_sweep() {
    let (out, ended_after) = run_and_kill_ibsim(&["counters", "--format", "json"], 5_200);
    assert_transport_lost(&out, ended_after);
}

/// ibsim dies while `ibscope check` reads the counters: one message, not a finding per
/// unreadable port.
#[test]
fn ibsim_killed_mid_check() {
    let (out, ended_after) = run_and_kill_ibsim(&["check"], 5_200);
    assert_transport_lost(&out, ended_after);
    assert!(
        !stdout(&out).contains("counters-unreadable"),
        "check listed the ports it could not read:\n{}",
        stdout(&out)
    );
}

/// The PID of the one child process of `pid` (the agent of serve's port), once it runs.
fn only_child(pid: u32) -> Option<u32> {
    // Any of its threads may have forked it: look at every task's children.
    let mut children = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let list = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        children.extend(
            list.split_whitespace()
                .filter_map(|c| c.parse::<u32>().ok()),
        );
    }
    (children.len() == 1).then(|| children[0])
}

/// ibsim dies (kill -9) while `ibscope serve` discovers the 512-host fat tree (one MAD in
/// flight, 1 s per attempt, 6 attempts; the kill comes after about 500 MADs): the exporter
/// does not end. Within one MAD's deadline of the kill /healthz says the fabric was lost,
/// with the one "lost the connection" message; nothing is printed per MAD.
#[test]
fn ibsim_killed_under_serve() {
    use common::net::{free_port, http_get, KillOnDrop};
    let dir = temp_dir();
    let sim = sim_with(SimOptions::new(ft512(dir.path())));
    let port = free_port();
    let log = dir.path().join("serve.log");
    let timeout = KILLED_TIMEOUT_MS.to_string();
    let retries = KILLED_RETRIES.to_string();
    let listen = format!("127.0.0.1:{port}");
    let mut cmd = sim.command(ibscope_bin());
    cmd.args([
        "--max-outstanding",
        "1",
        "--timeout-ms",
        &timeout,
        "--retries",
        &retries,
    ])
    .args(["serve", "--listen", &listen, "--interval", "0.2"])
    .stdout(std::process::Stdio::null())
    .stderr(std::fs::File::create(&log).unwrap());
    let mut serve = KillOnDrop::spawn(cmd, "ibscope serve");
    let deadline = Instant::now() + Duration::from_secs(30);
    let sweeper = loop {
        serve.assert_running(&log);
        if let Some(child) = only_child(serve.pid()) {
            if bytes_written(child) > 500 * 256 {
                break child;
            }
        }
        assert!(Instant::now() < deadline, "the sweeper never got that far");
        std::thread::sleep(Duration::from_millis(1));
    };
    kill9(sim.ibsim_pid());
    let killed_at = Instant::now();
    let bound = Duration::from_millis(KILLED_TIMEOUT_MS) * 5 / 2;
    let why = loop {
        serve.assert_running(&log);
        if let Ok((503, body)) = http_get(port, "/healthz") {
            if body.contains("lost the connection to the fabric") {
                break body;
            }
        }
        assert!(
            killed_at.elapsed() < bound,
            "/healthz did not report the loss within {bound:?} of the kill"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    eprintln!("{:?} after the kill: {why}", killed_at.elapsed());
    assert!(why.starts_with("fabric unreachable for "), "{why}");
    // No page yet (the first discovery was cut short): /metrics says why, and serve stays.
    let (code, body) = http_get(port, "/metrics").unwrap();
    assert_eq!(code, 503, "{body}");
    assert!(body.contains("lost the connection to the fabric"), "{body}");
    std::thread::sleep(Duration::from_millis(1500));
    serve.assert_running(&log);
    assert!(
        !pid_alive(sweeper),
        "the sweeper that lost the fabric ended"
    );
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        !err.contains("sending a MAD failed") && !err.contains("receiving a MAD failed"),
        "per-MAD transport errors printed:\n{err}"
    );
    assert!(
        err.matches("umad2sim_write: cannot write").count() <= 1,
        "the sweeper kept sending after the transport was gone:\n{err}"
    );
    // serve killed now: the agent started after the loss, waiting inside the
    // shim for an ibsim that will not come back, ends by itself once serve's stop would
    // have given up on it (the engine's timeout x attempts + 4 s), not never.
    let reopening = wait_for_child(serve.pid());
    drop(serve);
    let limit =
        Duration::from_millis(KILLED_TIMEOUT_MS) * (KILLED_RETRIES + 1) + Duration::from_secs(4);
    let deadline = Instant::now() + limit * 2;
    while pid_alive(reopening) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        !pid_alive(reopening),
        "the agent outlived the serve that was killed"
    );
}

/// The child process of `pid` (a new agent), waiting until there is one.
fn wait_for_child(pid: u32) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(child) = only_child(pid) {
            return child;
        }
        assert!(Instant::now() < deadline, "no new agent");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// OpenSM dies: `ibscope sm` cannot reach it (exit 2, says so) and `ibscope check` reports
/// the missing master SM (exit 1).
#[test]
fn sm_stopped_is_reported() {
    let sim = sim("net.2sw2path4hca");
    let sm = sim.opensm_pid().expect("OpenSM runs");
    kill9(sm);
    wait_gone(sm);

    let out = ibscope(&sim, &["--timeout-ms", "100", "--retries", "1", "sm"]);
    assert_no_panic(&out);
    assert_exit(&out, 2);
    let err = stderr(&out);
    eprintln!("`ibscope sm` with OpenSM dead: {err}");
    assert!(err.contains("SM"), "`sm` does not name the SM:\n{err}");

    let out = ibscope(&sim, &["--timeout-ms", "100", "--retries", "1", "check"]);
    assert_no_panic(&out);
    let text = assert_exit(&out, 1);
    assert!(
        text.contains("no-master-sm") && text.contains("SM"),
        "`check` does not report the missing SM:\n{text}"
    );
}

/// Run ibscope offline with `args`, expecting exit 2, no panic, and every `needles` in stderr.
#[track_caller]
fn assert_input_error(args: &[&str], needles: &[&str]) -> String {
    let out = ibscope_plain(args, &[]);
    assert_no_panic(&out);
    assert_exit(&out, 2);
    let err = stderr(&out);
    for n in needles {
        assert!(err.contains(n), "stderr lacks {n:?}:\n{err}");
    }
    err
}

/// The message names `file` and `line`, as `file:line` or `file: line N`.
#[track_caller]
fn assert_file_line(err: &str, file: &str, line: usize) {
    assert!(
        err.contains(&format!("{file}:{line}")) || err.contains(&format!("{file}: line {line}")),
        "stderr does not name {file} line {line}:\n{err}"
    );
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_str().unwrap().to_string()
}

const GOOD_TOPO: &str = "Switch 4 \"S1\"\n[1] \"H1\"[1]\n\nHca 1 \"H1\"\n[1] \"S1\"[1]\n";

#[test]
fn bad_topology_file_names_file_and_line() {
    let dir = temp_dir();
    let bad = write(
        dir.path(),
        "bad.topo",
        "Switch 4 \"S1\"\n[1] \"H1\"[1]\n[x] nonsense\n\nHca 1 \"H1\"\n[1] \"S1\"[1]\n",
    );
    let err = assert_input_error(&["--topology", &bad, "discover"], &["bad.topo"]);
    assert_file_line(&err, "bad.topo", 3);

    // Binary garbage and an empty file: refused, not a crash.
    let garbage = dir.path().join("garbage.topo");
    std::fs::write(&garbage, [0xffu8, 0xfe, 0, 1, 2, 0x1b, b'[', b'2', b'J']).unwrap();
    let out = ibscope_plain(&["--topology", garbage.to_str().unwrap(), "links"], &[]);
    assert_no_panic(&out);
    assert_exit(&out, 2);
    assert!(
        !out.stderr.contains(&0x1b),
        "raw ESC echoed to the terminal"
    );
    let empty = write(dir.path(), "empty.topo", "");
    let out = ibscope_plain(&["--topology", &empty, "check"], &[]);
    assert_no_panic(&out);
    assert!(matches!(out.status.code(), Some(0..=2)));
    let missing = dir.path().join("missing.topo");
    assert_input_error(
        &["--topology", missing.to_str().unwrap(), "links"],
        &["missing.topo"],
    );
}

#[test]
fn bad_node_name_map_names_file_and_line() {
    let dir = temp_dir();
    let topo = write(dir.path(), "good.topo", GOOD_TOPO);
    let map = write(
        dir.path(),
        "names.map",
        "# comment\n0x1 \"ok\"\nnot-a-guid \"x\"\n",
    );
    let err = assert_input_error(
        &["--topology", &topo, "--node-name-map", &map, "links"],
        &["names.map"],
    );
    assert_file_line(&err, "names.map", 3);
}

#[test]
fn bad_threshold_file_names_file_and_line() {
    let dir = temp_dir();
    let topo = write(dir.path(), "good.topo", GOOD_TOPO);
    let thr = write(
        dir.path(),
        "limits.conf",
        "SymbolErrorCounter=10\nNoSuchCounter=3\n",
    );
    let err = assert_input_error(
        &["--topology", &topo, "check", "--thresholds", &thr],
        &["limits.conf"],
    );
    assert_file_line(&err, "limits.conf", 2);
    let thr = write(dir.path(), "limits2.conf", "SymbolErrorCounter=ten\n");
    let err = assert_input_error(
        &["--topology", &topo, "check", "--thresholds", &thr],
        &["limits2.conf"],
    );
    assert_file_line(&err, "limits2.conf", 1);
}

#[test]
fn json_snapshot_with_wrong_schema_is_refused_clearly() {
    let dir = temp_dir();
    let cases = [
        ("not-json.json", "{ this is not json"),
        ("wrong-shape.json", r#"{"hello": "world"}"#),
        (
            "wrong-types.json",
            r#"{"schema_version": "one", "nodes": {}, "links": 3}"#,
        ),
        (
            "future.json",
            r#"{"schema_version": 999, "nodes": [], "links": []}"#,
        ),
        (
            "dangling.json",
            r#"{"schema_version": 1, "nodes": [], "links": [{"a_guid": 1, "a_port": 1, "b_guid": 2, "b_port": 1}]}"#,
        ),
    ];
    for (name, text) in cases {
        let path = write(dir.path(), name, text);
        let err = assert_input_error(&["--topology", &path, "links"], &[name]);
        assert!(
            err.lines().count() <= 5,
            "{name}: a clear message, not a dump:\n{err}"
        );
    }
}

/// An endless binary stream as the topology ends at once with a clear error instead of
/// reading until memory runs out.
#[test]
fn topology_from_dev_zero_is_refused_at_once() {
    for command in ["links", "check"] {
        let err = assert_input_error(
            &["--topology", "/dev/zero", command],
            &["/dev/zero", "is binary data"],
        );
        assert!(err.lines().count() <= 3, "{err}");
    }
}
