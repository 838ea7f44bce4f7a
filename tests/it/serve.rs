//! `ibscope serve` on the simulated fabric: the exposition passes `promtool check metrics`,
//! an injected counter shows the value perfquery reads, and a real Prometheus server scrapes
//! the exporter and returns that value from its query API. The trimming options give valid
//! pages with exactly the families asked for, and SIGTERM/SIGINT stop it cleanly.

use crate::common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::net::*;
use common::*;

/// GET /metrics asking for gzip: (Content-Encoding header seen, decoded body).
fn get_gzip(port: u16) -> (bool, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept-Encoding: gzip\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("header end");
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let mut text = String::new();
    // Concatenated gzip members, as RFC 1952 allows and Prometheus reads.
    flate2::read::MultiGzDecoder::new(&raw[split + 4..])
        .read_to_string(&mut text)
        .expect("valid gzip");
    (head.contains("content-encoding: gzip"), text)
}

/// `Field:....value` of perfquery output.
fn perfquery_field(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| {
            let v = l.strip_prefix(name)?.strip_prefix(':')?;
            v.trim_start_matches('.').trim().parse().ok()
        })
        .unwrap_or_else(|| panic!("no {name} in perfquery output:\n{text}"))
}

/// Every sample line follows its family's HELP and TYPE, and no family appears twice.
fn assert_grouped(text: &str) {
    let mut seen = std::collections::HashSet::new();
    let mut current = String::new();
    let mut helped = String::new();
    for l in text.lines() {
        if let Some(rest) = l.strip_prefix("# HELP ") {
            helped = rest.split(' ').next().unwrap().to_string();
        } else if let Some(rest) = l.strip_prefix("# TYPE ") {
            let name = rest.split(' ').next().unwrap().to_string();
            assert_eq!(name, helped, "TYPE without HELP just before: {l}");
            assert!(seen.insert(name.clone()), "family {name} appears twice");
            current = name;
        } else if !l.is_empty() {
            let name = l.split(['{', ' ']).next().unwrap();
            assert_eq!(name, current, "sample outside its family: {l}");
        }
    }
}

#[test]
fn serve_refuses_a_remote_address_without_allow_remote() {
    let out = ibscope_plain(&["serve", "--listen", "0.0.0.0:0"], &[]);
    let err = stderr(&out);
    assert_exit(&out, 2);
    assert!(err.contains("--allow-remote"), "{err}");
}

#[test]
fn serve_metrics_pass_promtool_and_prometheus_scrapes_them() {
    let sim = sim("net");
    sim.set_counter("Switch1", 1, "SymbolErrorCounter", 17)
        .unwrap();
    sim.set_counter("Hca1", 1, "PortXmitDiscards", 42).unwrap();
    let scratch = temp_dir();
    let log = scratch.path().join("serve.log");
    let (mut serve, port) = start_serve(&sim, &log, &["--interval", "1"]);
    let serve_pid = serve.pid();
    wait_healthy(&mut serve, port, &log);
    let (code, metrics) = get(port, "/metrics");
    assert_eq!(code, 200, "{metrics}");
    // The gzip page says the same, apart from the per-scrape age and a newer sweep.
    let (encoded, unzipped) = get_gzip(port);
    assert!(encoded, "Content-Encoding: gzip expected");
    let type_lines = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("# TYPE"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(type_lines(&unzipped), type_lines(&metrics));
    assert!(unzipped.contains("ibscope_sweep_age_seconds "));
    assert_eq!(get(port, "/nothing").0, 404);
    assert_eq!(http(port, "POST", "/metrics").unwrap().0, 405);

    // promtool reads the exposition on stdin; lint problems fail it too.
    assert_promtool_ok(&metrics, "default page");
    assert_injected_counters_are_perfqueries(&sim, &metrics);
    // Healthy ports are there too, with their link facts and remote end.
    assert_eq!(
        sample_value(
            &metrics,
            "ibscope_port_degraded",
            &[
                ("node_name", "Switch1"),
                ("port", "1"),
                ("remote_name", "Hca1")
            ]
        ),
        Some(0.0)
    );
    assert_eq!(
        sample_value(
            &metrics,
            "ibscope_port_state",
            &[("node_name", "Switch1"), ("port", "1")]
        ),
        Some(4.0)
    );
    // One fabric: its name (the shim's CA and port; attached at a switch: port 0)
    // labels every series.
    assert!(metrics.contains("\nibscope_sweep_timestamp_seconds{fabric=\"ibsim0:0\"} "));
    assert!(metrics.contains("\nibscope_sweep_duration_seconds{fabric=\"ibsim0:0\"} "));
    assert!(metrics.contains("\nibscope_up{fabric=\"ibsim0:0\"} 1\n"));
    let unlabelled: Vec<&str> = metrics
        .lines()
        .filter(|l| !l.starts_with('#') && !l.contains("{fabric=\"ibsim0:0\""))
        .collect();
    assert!(
        unlabelled.is_empty(),
        "series without the fabric label: {unlabelled:?}"
    );

    assert_findings_are_checks(&sim, &metrics);
    let prom_pid = prometheus_scrapes_it(&sim, port, scratch.path());
    counter_moved_is_seen(&sim, port);
    link_down_is_seen(&sim, port);
    drop(serve);
    assert_all_gone(&[serve_pid, prom_pid]);
}

/// The LID `ibscope_node_info` gives the node named `name`.
fn node_lid(page: &str, name: &str) -> String {
    let line = page
        .lines()
        .find(|l| {
            l.starts_with("ibscope_node_info{") && l.contains(&format!("node_name=\"{name}\""))
        })
        .unwrap_or_else(|| panic!("no node_info for {name}"));
    let lid = line.split("lid=\"").nth(1).unwrap();
    lid[..lid.find('"').unwrap()].to_string()
}

/// The counters the test injected equal what perfquery reads at the same port.
fn assert_injected_counters_are_perfqueries(sim: &Sim, metrics: &str) {
    let checks = [
        (
            "Switch1",
            "1",
            "SymbolErrorCounter",
            "ibscope_port_symbol_error_total",
            17,
        ),
        (
            "Hca1",
            "1",
            "PortXmitDiscards",
            "ibscope_port_xmit_discards_total",
            42,
        ),
    ];
    for (node, p, field, metric, injected) in checks {
        let lid = node_lid(metrics, node);
        let pq = assert_success(&reference(sim, "perfquery", &[&lid, p]));
        let theirs = perfquery_field(&pq, field);
        assert_eq!(theirs, injected, "perfquery {node}[{p}] {field}");
        let ours = sample_value(metrics, metric, &[("node_name", node), ("port", p)])
            .unwrap_or_else(|| panic!("no {metric} for {node}[{p}]"));
        assert_eq!(ours, theirs as f64, "{metric} of {node}[{p}]");
    }
}

/// The findings by kind are `check`'s, the SM check included.
fn assert_findings_are_checks(sim: &Sim, metrics: &str) {
    let check: serde_json::Value =
        serde_json::from_str(&assert_exit(&ibscope(sim, &["check", "--json"]), 1)).unwrap();
    let findings = check["findings"].as_array().unwrap();
    for kind in [
        "counter-above-threshold",
        "degraded-link",
        "port-not-active",
        "no-master-sm",
    ] {
        let theirs = findings.iter().filter(|f| f["kind"] == kind).count();
        let ours = sample_value(metrics, "ibscope_findings", &[("kind", kind)]);
        assert_eq!(ours, Some(theirs as f64), "{kind}");
    }
    assert_eq!(
        sample_value(
            metrics,
            "ibscope_findings",
            &[("kind", "counter-above-threshold"), ("severity", "error")]
        ),
        Some(2.0),
        "the two injected counters"
    );
}

/// A real Prometheus scrapes the exporter on `port`; its query API returns the value
/// perfquery reads. Returns Prometheus' PID (it is stopped when this returns).
fn prometheus_scrapes_it(sim: &Sim, port: u16, scratch: &Path) -> u32 {
    let mut prom = Prometheus::start(scratch, "ibscope", &[port]);
    let prom_pid = prom.process.pid();
    let query = "ibscope_port_symbol_error_total{node_name=\"Switch1\",port=\"1\"}";
    let value: f64 = wait_for(
        Duration::from_secs(25),
        "Prometheus to have the sample",
        || {
            let (code, doc) = prom.try_query(query)?;
            if code != 200 {
                return None;
            }
            let result = doc["data"]["result"].as_array()?;
            let first = result.first()?;
            assert_eq!(result.len(), 1, "{doc}");
            first["value"][1].as_str()?.parse().ok()
        },
    );
    let lid = node_lid(&get(port, "/metrics").1, "Switch1");
    let pq = assert_success(&reference(sim, "perfquery", &[&lid, "1"]));
    assert_eq!(value, perfquery_field(&pq, "SymbolErrorCounter") as f64);

    // The target is up in Prometheus' own view.
    let (_, up) = prom.query("up");
    let targets = up["data"]["result"].as_array().cloned().unwrap_or_default();
    assert!(
        targets
            .iter()
            .any(|t| t["metric"]["job"] == "ibscope" && t["value"][1] == "1"),
        "target not up: {up}"
    );
    prom_pid
}

/// A link goes down: a sweep sees its LinkDownedCounter move, the exporter rediscovers,
/// and the port's state follows without waiting for the periodic rediscovery.
/// A counter that moves after many sweeps of an unchanged fabric (its families taken from
/// the page before, sweep after sweep) shows on the next page, the other families still
/// there.
fn counter_moved_is_seen(sim: &Sim, port: u16) {
    let before = get(port, "/metrics").1;
    let metric = "ibscope_port_symbol_error_total";
    let at = [("node_name", "Hca1"), ("port", "1")];
    assert_eq!(sample_value(&before, metric, &at), Some(0.0));
    sim.set_counter("Hca1", 1, "SymbolErrorCounter", 5).unwrap();
    let after = wait_for(Duration::from_secs(8), "the counter to move", || {
        let (_, m) = get(port, "/metrics");
        (sample_value(&m, metric, &at)? == 5.0).then_some(m)
    });
    assert_eq!(family_names(&after), family_names(&before));
    let switch = [("node_name", "Switch1"), ("port", "1")];
    assert_eq!(sample_value(&after, metric, &switch), Some(17.0));
    sim.set_counter("Hca1", 1, "SymbolErrorCounter", 0).unwrap();
}

fn link_down_is_seen(sim: &Sim, port: u16) {
    let before = sample_value(&get(port, "/metrics").1, "ibscope_discoveries_total", &[]);
    sim.unlink("Switch1", 3).unwrap();
    let state = wait_for(Duration::from_secs(8), "the port state to change", || {
        let (_, m) = get(port, "/metrics");
        let s = sample_value(
            &m,
            "ibscope_port_state",
            &[("node_name", "Switch1"), ("port", "3")],
        )?;
        (s != 4.0).then_some((s, m))
    });
    assert_eq!(state.0, 1.0, "Switch1[3] should be Down");
    let after = sample_value(&state.1, "ibscope_discoveries_total", &[]);
    assert!(after > before, "discoveries {before:?} -> {after:?}");
}

/// Start `ibscope serve ARGS` on `sim` with stderr in `log`; returns it and its port.
fn start_serve(sim: &Sim, log: &Path, args: &[&str]) -> (KillOnDrop, u16) {
    let port = free_port();
    let mut cmd = sim.command(ibscope_bin());
    cmd.args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    (KillOnDrop::spawn(cmd, "ibscope serve"), port)
}

/// Stop a running `serve` with `signal`, after one scrape and `prepare(port)` (what that
/// returns is dropped once serve said it stopped); it must exit 0 within 5 s with one line
/// saying so, free its port, and leave nothing behind. Returns how long it took from the
/// signal to that line (the sweeper finished, the management port closed).
fn assert_clean_stop<G>(
    sim: &Sim,
    args: &[&str],
    signal: i32,
    name: &str,
    prepare: impl FnOnce(u16) -> G,
) -> Duration {
    let scratch = temp_dir();
    let log = scratch.path().join("serve.log");
    let (mut serve, port) = start_serve(sim, &log, args);
    let pid = serve.pid();
    wait_healthy(&mut serve, port, &log);
    let (code, page) = get(port, "/metrics");
    assert_eq!(code, 200, "{page}");
    let threads = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .count();
    assert!(
        threads > 3,
        "sweeper and HTTP threads expected, saw {threads}"
    );
    // One child: the agent that owns the port for the sweeper thread, in serve's state
    // directory.
    let children = children_of(pid);
    assert_eq!(children.len(), 1, "one agent: {children:?}");
    let sweeper = children[0];
    let cmdline = std::fs::read(format!("/proc/{sweeper}/cmdline")).unwrap();
    // The port of -C/-P: none given, the agent's default.
    let cmdline = String::from_utf8_lossy(&cmdline);
    assert!(cmdline.ends_with("\0agent\0"), "{cmdline:?}");
    let state = std::fs::read_link(format!("/proc/{sweeper}/cwd")).unwrap();
    let state_name = state.file_name().unwrap().to_string_lossy().to_string();
    assert!(
        state_name.starts_with(&format!("ibscope-serve-{pid}-")),
        "{}",
        state.display()
    );
    let fake_sysfs = state.join(format!("sys-{sweeper}"));
    assert!(
        fake_sysfs.exists(),
        "the shim's {} while running",
        fake_sysfs.display()
    );
    assert!(
        !sim.client_dir().join(format!("sys-{sweeper}")).exists(),
        "the sweeper's fake sysfs in the client's directory"
    );
    let guard = prepare(port);
    serve.assert_running(&log);

    let sent = Instant::now();
    // SAFETY: signalling our own child by its PID.
    assert_eq!(unsafe { libc::kill(pid as i32, signal) }, 0);
    // Until it says it stopped (the sweeper is done and the port closed)...
    let said = format!("ibscope serve: {name} received; stopped after ");
    let took = loop {
        if std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains(&said)
        {
            break sent.elapsed();
        }
        assert!(
            sent.elapsed() < Duration::from_secs(5),
            "serve did not stop within 5 s after {name}; log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    drop(guard);
    // ...and until the process is gone.
    let status = loop {
        if let Some(s) = serve.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(5),
            "serve still running 5 s after {name}; log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let exited = sent.elapsed();
    let err = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        status.code(),
        Some(0),
        "exit after {name}: {status}; log:\n{err}"
    );

    // Our lines (the shim adds "ibwarn:" ones): the start, then exactly one for the stop.
    let ours: Vec<&str> = err.lines().filter(|l| !l.starts_with("ibwarn:")).collect();
    assert_eq!(ours.len(), 2, "{err}");
    assert!(ours[0].contains("listening on"), "{err}");
    assert!(
        ours[1].starts_with(&format!("ibscope serve: {name} received; stopped after "))
            && ours[1].ends_with("management port closed"),
        "{err}"
    );
    eprintln!(
        "{name}: stopped after {took:?}, exit 0 after {exited:?}: {}",
        ours[1]
    );

    // The port can be bound again at once, and nothing of the process is left.
    TcpListener::bind(("127.0.0.1", port))
        .unwrap_or_else(|e| panic!("port {port} still taken after exit: {e}"));
    assert!(!pid_alive(pid));
    assert!(!pid_alive(sweeper), "the agent outlived serve");
    assert!(
        !state.exists(),
        "{} left behind: serve did not exit through its normal path",
        state.display()
    );
    // The simulator still serves other clients (the shim's agents were closed cleanly).
    assert_success(&reference(sim, "perfquery", &[]));
    took
}

/// Each stop signal stops serve, its port closed, within 2 s.
#[test]
fn serve_stops_cleanly_on_sigterm_sigint_and_sighup() {
    let sim = sim("net");
    for (signal, name) in [
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGINT, "SIGINT"),
        (libc::SIGHUP, "SIGHUP"),
    ] {
        let took = assert_clean_stop(&sim, &["--interval", "1"], signal, name, |_| ());
        assert!(took < Duration::from_secs(2), "{name}: {took:?}");
    }
}

#[test]
fn serve_stops_cleanly_in_the_middle_of_a_sweep() {
    // 512 hosts: a sweep (about 7,000 MADs) and the port-state check take long enough, and
    // with --interval 0.05 the exporter is nearly always between MADs when the signal comes.
    let dir = temp_dir();
    let fat_tree = ["fat-tree", "--levels", "2", "--hosts", "512"];
    let topo = sim_gen(dir.path(), "ft-512.topo", &fat_tree);
    let sim = sim(&topo);
    let args = ["--interval", "0.05", "--max-outstanding", "64"];
    let took = assert_clean_stop(&sim, &args, libc::SIGTERM, "SIGTERM", |_| ());
    assert!(took < Duration::from_secs(2), "{took:?}");
}

/// Sends SIGCONT to a stopped process when dropped (also when the test panics).
struct ContinueOnDrop(u32);

impl Drop for ContinueOnDrop {
    fn drop(&mut self) {
        // SAFETY: signalling the test's own simulator by its PID.
        unsafe { libc::kill(self.0 as i32, libc::SIGCONT) };
    }
}

/// A sweep stuck on MADs that get no answer (ibsim stopped; 1 s per attempt, 4 attempts):
/// the stop waits for the attempt in flight, not for its retries. (ibsim's `Error` fault
/// is no use here: under the shim a dropped MAD comes back at once as unroutable.)
#[test]
fn serve_stop_waits_for_one_mad_timeout_not_for_the_retries() {
    let sim = sim("net");
    let args = [
        "--interval",
        "0.1",
        "--timeout-ms",
        "1000",
        "--retries",
        "3",
    ];
    let took = assert_clean_stop(&sim, &args, libc::SIGTERM, "SIGTERM", |_| {
        // SAFETY: signalling the test's own simulator by its PID.
        assert_eq!(
            unsafe { libc::kill(sim.ibsim_pid() as i32, libc::SIGSTOP) },
            0
        );
        let frozen = ContinueOnDrop(sim.ibsim_pid());
        // Into the second attempt of whatever the sweeper was sending.
        std::thread::sleep(Duration::from_millis(1500));
        frozen
    });
    // Left: the attempt in flight (at most 1 s) and the engine's drain of late replies
    // before it unregisters (1 s here); the retries would add 2 s more.
    assert!(
        took < Duration::from_millis(2600),
        "stopping took {took:?}: more than one MAD timeout and the drain"
    );
}

/// Metric families of a page (`# TYPE` lines), sorted.
fn family_names(page: &str) -> Vec<String> {
    let mut names: Vec<String> = page
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    names.sort();
    names
}

#[track_caller]
fn assert_promtool_ok(page: &str, what: &str) {
    let checked = promtool_check(page);
    assert!(
        checked.passed(),
        "promtool check metrics ({what}): {}",
        checked.report
    );
    assert_grouped(page);
}

/// Samples of port families (name starts with ibscope_port_) for node `node`, port `port`.
fn port_series(page: &str, node: &str, port: &str) -> usize {
    let me = format!("node_name=\"{node}\",kind=");
    let p = format!(",port=\"{port}\",");
    page.lines()
        .filter(|l| l.starts_with("ibscope_port_") && l.contains(&me) && l.contains(&p))
        .count()
}

const ERROR_FAMILIES: [&str; 12] = [
    "ibscope_port_symbol_error_total",
    "ibscope_port_link_error_recovery_total",
    "ibscope_port_link_downed_total",
    "ibscope_port_rcv_errors_total",
    "ibscope_port_rcv_remote_physical_errors_total",
    "ibscope_port_rcv_switch_relay_errors_total",
    "ibscope_port_xmit_discards_total",
    "ibscope_port_xmit_constraint_errors_total",
    "ibscope_port_rcv_constraint_errors_total",
    "ibscope_port_local_link_integrity_errors_total",
    "ibscope_port_excessive_buffer_overrun_errors_total",
    "ibscope_port_vl15_dropped_total",
];

/// The breakdowns of PortRcvErrors and PortXmitDiscards (series only for ports where those
/// counted).
const DETAIL_FAMILIES: [&str; 10] = [
    "ibscope_port_local_physical_errors_total",
    "ibscope_port_malformed_pkt_errors_total",
    "ibscope_port_buffer_overrun_errors_total",
    "ibscope_port_dlid_mapping_errors_total",
    "ibscope_port_vl_mapping_errors_total",
    "ibscope_port_looping_errors_total",
    "ibscope_port_inactive_discards_total",
    "ibscope_port_neighbor_mtu_discards_total",
    "ibscope_port_sw_lifetime_limit_discards_total",
    "ibscope_port_sw_hoq_lifetime_limit_discards_total",
];

const DATA_FAMILIES: [&str; 9] = [
    "ibscope_port_xmit_data_bytes_total",
    "ibscope_port_rcv_data_bytes_total",
    "ibscope_port_xmit_pkts_total",
    "ibscope_port_rcv_pkts_total",
    "ibscope_port_xmit_wait_total",
    "ibscope_port_unicast_xmit_pkts_total",
    "ibscope_port_unicast_rcv_pkts_total",
    "ibscope_port_multicast_xmit_pkts_total",
    "ibscope_port_multicast_rcv_pkts_total",
];

/// Families on every page whatever the options.
const OTHER_FAMILIES: [&str; 26] = [
    "ibscope_findings",
    "ibscope_port_saturated_counters",
    "ibscope_port_state",
    "ibscope_port_phys_state",
    "ibscope_port_active",
    "ibscope_port_link_up",
    "ibscope_port_width_lanes",
    "ibscope_port_speed_gbps_per_lane",
    "ibscope_port_data_rate_gbps",
    "ibscope_port_degraded",
    "ibscope_node_info",
    "ibscope_node_scrape_errors_total",
    "ibscope_node_scrape_timeouts_total",
    "ibscope_fabric_nodes",
    "ibscope_fabric_links",
    "ibscope_sweep_ports",
    "ibscope_sweep_mads",
    "ibscope_sweep_timestamp_seconds",
    "ibscope_sweep_duration_seconds",
    "ibscope_sweeps_total",
    "ibscope_discoveries_total",
    "ibscope_discovery_duration_seconds",
    "ibscope_sweep_age_seconds",
    "ibscope_up",
    "ibscope_sample_stale",
    "ibscope_port_reopens_total",
];

fn expected_families(counter_families: &[&[&str]]) -> Vec<String> {
    let mut v: Vec<String> = counter_families
        .iter()
        .flat_map(|f| f.iter())
        .chain(OTHER_FAMILIES.iter())
        .map(|s| s.to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn serve_trimming_options_keep_the_page_valid_and_only_what_was_asked() {
    let sim = sim("net");
    // An error counter, and a data-family counter that MAD traffic does not move.
    sim.set_counter("Switch1", 1, "SymbolErrorCounter", 17)
        .unwrap();
    sim.set_counter("Hca1", 1, "PortXmitDiscards", 42).unwrap();
    sim.set_counter(
        "Hca1",
        1,
        "PortXmitDiscardDetails.PortNeighborMTUDiscards",
        40,
    )
    .unwrap();
    sim.set_counter(
        "Switch1",
        2,
        "PortCountersExtended.PortMulticastXmitPkts",
        55,
    )
    .unwrap();
    let scratch = temp_dir();
    let variants: [(&str, &[&str]); 5] = [
        ("all", &[]),
        ("errors", &["--counters", "errors"]),
        ("data", &["--counters", "data"]),
        ("active-only", &["--active-only"]),
        ("switches-only", &["--switches-only"]),
    ];
    // All at once on one simulator (5 clients and OpenSM: within ibsim's 10).
    let mut running = Vec::new();
    for (name, args) in variants {
        let log = scratch.path().join(format!("{name}.log"));
        let mut full = vec!["--interval", "1"];
        full.extend_from_slice(args);
        let (serve, port) = start_serve(&sim, &log, &full);
        running.push((name, serve, port, log));
    }
    let mut pages = HashMap::new();
    for (name, serve, port, log) in &mut running {
        wait_healthy(serve, *port, log);
        let (code, page) = get(*port, "/metrics");
        assert_eq!(code, 200, "{name}: {page}");
        assert_promtool_ok(&page, name);
        pages.insert(*name, page);
    }
    assert_default_page(&sim, &pages["all"]);
    assert_counter_options_trim_families(&pages);
    assert_active_only(&pages["all"], &pages["active-only"]);
    assert_switches_only(&pages["all"], &pages["switches-only"]);
    let series = |page: &str| page.lines().filter(|l| !l.starts_with('#')).count();
    for (name, page) in &pages {
        eprintln!("{name}: {} series", series(page));
        if *name != "all" {
            assert!(series(page) < series(&pages["all"]), "{name} trims nothing");
        }
    }

    let pids: Vec<u32> = running.iter().map(|(_, s, _, _)| s.pid()).collect();
    drop(running);
    assert_all_gone(&pids);
}

/// The injected Switch1[1] SymbolErrorCounter on a page.
fn symbol(page: &str) -> Option<f64> {
    sample_value(
        page,
        "ibscope_port_symbol_error_total",
        &[("node_name", "Switch1"), ("port", "1")],
    )
}

/// The injected Hca1[1] PortXmitDiscards on a page.
fn discards(page: &str) -> Option<f64> {
    sample_value(
        page,
        "ibscope_port_xmit_discards_total",
        &[("node_name", "Hca1"), ("port", "1")],
    )
}

/// The injected Switch1[2] PortMulticastXmitPkts on a page.
fn multicast(page: &str) -> Option<f64> {
    sample_value(
        page,
        "ibscope_port_multicast_xmit_pkts_total",
        &[("node_name", "Switch1"), ("port", "2")],
    )
}

fn ports_read(page: &str) -> f64 {
    sample_value(page, "ibscope_sweep_ports", &[]).unwrap()
}

/// Default: every family; the injected values as perfquery reads them.
fn assert_default_page(sim: &Sim, all: &str) {
    assert_eq!(
        family_names(all),
        expected_families(&[&ERROR_FAMILIES, &DETAIL_FAMILIES, &DATA_FAMILIES])
    );
    assert_eq!(symbol(all), Some(17.0));
    assert_eq!(discards(all), Some(42.0));
    assert_eq!(multicast(all), Some(55.0));
    // Hca1's PortXmitDiscards counted: its PortXmitDiscardDetails are on the page, as
    // perfquery -D reads them; no port has a PortRcvErrorDetails series (none counted).
    let pq = assert_success(&reference(
        sim,
        "perfquery",
        &["-D", &node_lid(all, "Hca1"), "1"],
    ));
    for (field, family) in [
        (
            "PortInactiveDiscards",
            "ibscope_port_inactive_discards_total",
        ),
        (
            "PortNeighborMTUDiscards",
            "ibscope_port_neighbor_mtu_discards_total",
        ),
        (
            "PortSwLifetimeLimitDiscards",
            "ibscope_port_sw_lifetime_limit_discards_total",
        ),
        (
            "PortSwHOQLifetimeLimitDiscards",
            "ibscope_port_sw_hoq_lifetime_limit_discards_total",
        ),
    ] {
        let ours = sample_value(all, family, &[("node_name", "Hca1"), ("port", "1")]);
        assert_eq!(ours, Some(perfquery_field(&pq, field) as f64), "{family}");
    }
    assert_eq!(
        sample_value(
            all,
            "ibscope_port_neighbor_mtu_discards_total",
            &[("node_name", "Hca1"), ("port", "1")]
        ),
        Some(40.0)
    );
    for family in DETAIL_FAMILIES {
        let series = all
            .lines()
            .filter(|l| l.starts_with(&format!("{family}{{")))
            .count();
        let expected = usize::from(family.contains("discards"));
        assert_eq!(series, expected, "{family}: only Hca1[1] has a breakdown");
    }
    let pq = assert_success(&reference(
        sim,
        "perfquery",
        &["-x", &node_lid(all, "Switch1"), "2"],
    ));
    assert_eq!(perfquery_field(&pq, "PortMulticastXmitPkts"), 55);
    // An unconnected port (Switch1 has links on 1-4 only) is on the default page, Down.
    assert_eq!(
        sample_value(
            all,
            "ibscope_port_state",
            &[("node_name", "Switch1"), ("port", "5")]
        ),
        Some(1.0)
    );
}

/// --counters errors and data: their families only, the same ports read.
fn assert_counter_options_trim_families(pages: &HashMap<&str, String>) {
    let all = &pages["all"];
    // --counters errors: the 12 error families, the breakdowns and none of the data ones.
    let errors = &pages["errors"];
    assert_eq!(
        family_names(errors),
        expected_families(&[&ERROR_FAMILIES, &DETAIL_FAMILIES])
    );
    assert_eq!(symbol(errors), Some(17.0));
    assert_eq!(discards(errors), Some(42.0));
    assert!(!errors.contains("ibscope_port_xmit_data_bytes_total"));

    // --counters data: the 9 traffic families and none of the error ones.
    let data = &pages["data"];
    assert_eq!(family_names(data), expected_families(&[&DATA_FAMILIES]));
    assert_eq!(multicast(data), Some(55.0));
    assert!(!data.contains("ibscope_port_symbol_error_total"));
    // The counter options trim the page, not what is read.
    assert_eq!(ports_read(errors), ports_read(all));
    assert_eq!(ports_read(data), ports_read(all));
}

/// --active-only: every family, but only the ports the default page calls Active.
fn assert_active_only(all: &str, active: &str) {
    assert_eq!(
        family_names(active),
        expected_families(&[&ERROR_FAMILIES, &DETAIL_FAMILIES, &DATA_FAMILIES])
    );
    assert_eq!(symbol(active), Some(17.0));
    assert_eq!(discards(active), Some(42.0));
    assert_eq!(multicast(active), Some(55.0));
    let active_ports: Vec<&str> = all
        .lines()
        .filter(|l| l.starts_with("ibscope_port_active{") && l.ends_with(" 1"))
        .collect();
    let inactive_ports = all
        .lines()
        .filter(|l| l.starts_with("ibscope_port_active{") && l.ends_with(" 0"))
        .count();
    assert!(inactive_ports > 0, "net has unconnected ports");
    assert_eq!(
        active
            .lines()
            .filter(|l| l.starts_with("ibscope_port_active{"))
            .count(),
        active_ports.len()
    );
    assert!(active
        .lines()
        .all(|l| !l.starts_with("ibscope_port_active{") || l.ends_with(" 1")));
    assert_eq!(ports_read(active), active_ports.len() as f64);
    assert!(ports_read(active) < ports_read(all));
    assert_eq!(
        port_series(active, "Switch1", "5"),
        0,
        "a Down port has no series"
    );
    assert_eq!(
        port_series(active, "Hca1", "2"),
        0,
        "a Down CA port has no series"
    );
    assert!(port_series(all, "Switch1", "5") > 0);
    assert!(port_series(active, "Switch1", "1") > 20);
}

/// --switches-only: no CA port series; the CA nodes are still described.
fn assert_switches_only(all: &str, switches: &str) {
    assert_eq!(
        family_names(switches),
        expected_families(&[&ERROR_FAMILIES, &DETAIL_FAMILIES, &DATA_FAMILIES])
    );
    assert_eq!(symbol(switches), Some(17.0));
    assert_eq!(discards(switches), None, "Hca1[1] is a CA port");
    assert_eq!(port_series(switches, "Hca1", "1"), 0);
    assert!(port_series(all, "Hca1", "1") > 20);
    assert!(
        switches.contains("ibscope_node_info{fabric=\"ibsim0:0\",node_guid=")
            && switches.contains("node_name=\"Hca1\"")
    );
}

/// What a scraper thread saw: (status, ibscope_up, ibscope_sample_stale) per GET /metrics.
type Scrapes = std::sync::Arc<std::sync::Mutex<Vec<(u16, Option<f64>, Option<f64>)>>>;

/// GET /metrics every 20 ms until `stop`, recording each answer.
fn scrape_continuously(
    port: u16,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (Scrapes, std::thread::JoinHandle<()>) {
    let seen: Scrapes = Default::default();
    let record = seen.clone();
    let thread = std::thread::spawn(move || {
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let (code, page) = http_get(port, "/metrics").unwrap_or((0, String::new()));
            let up = sample_value(&page, "ibscope_up", &[]);
            let stale = sample_value(&page, "ibscope_sample_stale", &[]);
            record.lock().unwrap().push((code, up, stale));
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    (seen, thread)
}

/// The fabric goes away under a running exporter and comes back: ibsim killed (as a crash
/// or a driver reload would take the port), then started again on the same socket with a
/// new OpenSM. The exporter never fails a scrape, ibscope_up goes 1 -> 0 -> 1, /healthz
/// says why meanwhile, and the page holds fresh data again once the fabric is back.
#[test]
fn serve_stays_up_while_the_fabric_is_gone_and_recovers() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let sim = sim("net");
    let scratch = temp_dir();
    let log = scratch.path().join("serve.log");
    let (mut serve, port) = start_serve(&sim, &log, &["--interval", "0.3"]);
    wait_healthy(&mut serve, port, &log);
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let (seen, scraper) = scrape_continuously(port, stop.clone());
    let up_now = || sample_value(&get(port, "/metrics").1, "ibscope_up", &[]);
    wait_for(Duration::from_secs(5), "ibscope_up 1", || {
        (up_now() == Some(1.0)).then_some(())
    });

    sim.kill_ibsim().unwrap();
    wait_for(Duration::from_secs(20), "ibscope_up 0", || {
        serve.assert_running(&log);
        (up_now() == Some(0.0)).then_some(())
    });
    let (code, page) = get(port, "/metrics");
    assert_eq!(code, 200, "the last good page is still served");
    assert_eq!(sample_value(&page, "ibscope_sample_stale", &[]), Some(1.0));
    assert!(
        page.contains("ibscope_port_state{"),
        "the page kept its ports"
    );
    let (code, why) = get(port, "/healthz");
    assert_eq!(code, 503, "{why}");
    assert!(
        why.starts_with("fabric unreachable for ")
            && why.contains("lost the connection to the fabric")
            && why.contains("serving the last good sample"),
        "{why}"
    );

    sim.restart().unwrap();
    // Data only the new fabric has: the counter is set after the restart.
    sim.set_counter("Switch1", 1, "SymbolErrorCounter", 4242)
        .unwrap();
    wait_for(
        Duration::from_secs(30),
        "fresh data after the restart",
        || {
            serve.assert_running(&log);
            let (_, page) = get(port, "/metrics");
            let symbol = sample_value(
                &page,
                "ibscope_port_symbol_error_total",
                &[("node_name", "Switch1"), ("port", "1")],
            );
            (sample_value(&page, "ibscope_up", &[]) == Some(1.0) && symbol == Some(4242.0))
                .then_some(page)
        },
    );
    let (code, body) = get(port, "/healthz");
    assert_eq!((code, body.as_str()), (200, "ok\n"));
    let page = get(port, "/metrics").1;
    assert_eq!(sample_value(&page, "ibscope_sample_stale", &[]), Some(0.0));
    assert_eq!(
        sample_value(&page, "ibscope_port_reopens_total", &[]),
        Some(1.0)
    );
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::SeqCst);
    scraper.join().unwrap();

    let seen = seen.lock().unwrap();
    let failed: Vec<_> = seen.iter().filter(|(code, ..)| *code != 200).collect();
    assert!(
        failed.is_empty(),
        "scrapes failed: {failed:?} of {}",
        seen.len()
    );
    let mut ups: Vec<f64> = seen.iter().filter_map(|(_, up, _)| *up).collect();
    ups.dedup();
    assert_eq!(
        ups,
        [1.0, 0.0, 1.0],
        "ibscope_up over {} scrapes",
        seen.len()
    );
    // Stale exactly while down.
    assert!(seen
        .iter()
        .all(|(_, up, stale)| (*up == Some(0.0)) == (*stale == Some(1.0))));
    eprintln!("{} scrapes, none failed", seen.len());
}

/// A management port that cannot be opened at start fails the command at once (exit 2, the
/// reason on stderr), rather than serving 503s while it retries forever; its state
/// directory goes too.
#[test]
fn serve_fails_at_once_when_the_port_cannot_be_opened() {
    let sim = sim("net");
    let scratch = temp_dir();
    let port = free_port();
    let mut cmd = sim.command(ibscope_bin());
    cmd.args([
        "-C",
        "nosuch0",
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
    ])
    .env("TMPDIR", scratch.path());
    let out = run_with_timeout(cmd, Duration::from_secs(20));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("nosuch0"), "{err}");
    assert!(!err.contains("listening on"), "{err}");
    let left: Vec<_> = std::fs::read_dir(scratch.path())
        .unwrap()
        .flatten()
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The fabric lost (ibsim killed), serve keeps answering and reopening; a SIGTERM then
/// stops it within 2 s, whatever its sweeper was doing (an agent waiting for the lost
/// simulator, or the wait before the next reopening).
#[test]
fn serve_stops_within_two_seconds_with_its_fabric_lost() {
    let mut sim = sim("net");
    let scratch = temp_dir();
    let log = scratch.path().join("serve.log");
    let (mut serve, port) = start_serve(&sim, &log, &["--interval", "0.2"]);
    wait_healthy(&mut serve, port, &log);
    sim.stop().unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        serve.assert_running(&log);
        if let Ok((503, _)) = http_get(port, "/healthz") {
            break;
        }
        assert!(Instant::now() < deadline, "the loss was never reported");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Into the reopening.
    std::thread::sleep(Duration::from_millis(1500));
    serve.assert_running(&log);
    let sent = Instant::now();
    // SAFETY: signalling our own child by its PID.
    assert_eq!(unsafe { libc::kill(serve.pid() as i32, libc::SIGTERM) }, 0);
    let status = loop {
        if let Some(status) = serve.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            sent.elapsed() < Duration::from_secs(2),
            "serve did not stop within 2 s of SIGTERM with its fabric lost; log:\n{}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    eprintln!("stopped {:?} after SIGTERM: {status}", sent.elapsed());
    assert!(
        status.code().is_some(),
        "killed rather than stopped: {status}"
    );
}

/// The series of a page: each sample line's metric name and labels, values left out,
/// sorted.
fn series_of(page: &str) -> Vec<String> {
    let mut series: Vec<String> = page
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            l.rsplit_once(' ')
                .map_or(l, |(series, _)| series)
                .to_string()
        })
        .collect();
    series.sort();
    series
}

/// On the same fabric with the same planted faults, the page carries exactly the series
/// (names and labels) of tests/data/serve/series_net.txt, first captured from the exporter
/// before it was rebuilt as its own crate.
#[test]
fn serve_page_keeps_the_series_it_always_had() {
    let sim = sim("examples/fabrics/net");
    sim.set_counter("Switch1", 1, "SymbolErrorCounter", 17)
        .unwrap();
    sim.set_counter("Hca1", 1, "PortXmitDiscards", 42).unwrap();
    let scratch = temp_dir();
    let log = scratch.path().join("serve.log");
    let (mut serve, port) = start_serve(&sim, &log, &["--interval", "0.5"]);
    wait_healthy(&mut serve, port, &log);
    let (code, page) = get(port, "/metrics");
    assert_eq!(code, 200, "{page}");
    let expected: Vec<String> =
        std::fs::read_to_string(repo_root().join("tests/data/serve/series_net.txt"))
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(str::to_string)
            .collect();
    let mut tidy = expected.clone();
    tidy.sort();
    tidy.dedup();
    assert_eq!(
        expected, tidy,
        "series_net.txt: one line per series, sorted"
    );
    let series = series_of(&page);
    let mut once = series.clone();
    once.dedup();
    assert_eq!(series, once, "a series appears twice on the page");
    let missing: Vec<&String> = expected.iter().filter(|s| !series.contains(s)).collect();
    let extra: Vec<&String> = series.iter().filter(|s| !expected.contains(s)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing: {missing:#?}\nextra: {extra:#?}"
    );
}

/// `serve --journal FILE` on the net fabric, sweeping every 0.3 s, healthy.
/// Fields drop in order: serve first, then the simulator, then its files.
struct Journaling {
    _serve: KillOnDrop,
    sim: Sim,
    _scratch: tempfile::TempDir,
    log: PathBuf,
    journal: PathBuf,
    port: u16,
}

impl Journaling {
    fn start() -> Journaling {
        let sim = sim("examples/fabrics/net");
        let scratch = temp_dir();
        let log = scratch.path().join("serve.log");
        let journal = scratch.path().join("events.jsonl");
        let (mut serve, port) = start_serve(
            &sim,
            &log,
            &["--interval", "0.3", "--journal", journal.to_str().unwrap()],
        );
        wait_healthy(&mut serve, port, &log);
        Journaling {
            _serve: serve,
            sim,
            _scratch: scratch,
            log,
            journal,
            port,
        }
    }
}

/// `serve --journal` records a link going down and coming back at each rediscovery;
/// `events` reads them back, and `check --journal` reports the link as flapping once it
/// went down twice within ten minutes.
#[test]
fn serve_journals_link_bounces_and_check_finds_the_flapping_link() {
    let j = Journaling::start();
    let (sim, log, journal) = (&j.sim, j.log.as_path(), j.journal.as_path());
    let journal_arg = journal.to_str().unwrap();
    let wait_for = |kind: &str, n: usize| {
        wait_for_journal(journal, kind, n, Duration::from_secs(30), || {
            std::fs::read_to_string(log).unwrap_or_default()
        });
    };
    for bounce in 1..=2 {
        sim.unlink("Switch1", 2).unwrap();
        sim.resweep().unwrap();
        wait_for("link-down", bounce);
        sim.relink("Switch1", 2).unwrap();
        sim.resweep().unwrap();
        wait_for("link-up", bounce);
    }
    let out = ibscope_plain(
        &[
            "events",
            "--journal",
            journal_arg,
            "--json",
            "--link",
            "Switch1:2",
        ],
        &[],
    );
    let doc: serde_json::Value = serde_json::from_str(&assert_success(&out)).unwrap();
    let kinds: Vec<&str> = doc["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["kind"].as_str())
        .filter(|k| *k == "link-down" || *k == "link-up")
        .collect();
    assert_eq!(
        kinds,
        ["link-down", "link-up", "link-down", "link-up"],
        "{doc}"
    );
    let text = assert_success(&ibscope_plain(
        &["events", "--journal", journal_arg, "--since", "1h"],
        &[],
    ));
    assert!(
        text.contains("link-down") && text.contains("Switch1"),
        "{text}"
    );
    let out = ibscope(sim, &["check", "--journal", journal_arg, "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&assert_exit(&out, 1)).unwrap();
    let flapping = link_flapping(&doc);
    assert_eq!(flapping.len(), 1, "{doc}");
    assert!(
        flapping[0]["message"]
            .as_str()
            .unwrap()
            .contains("went down 2 times"),
        "{doc}"
    );
}

/// The link-flapping findings of a `check --json` document.
fn link_flapping(doc: &serde_json::Value) -> Vec<&serde_json::Value> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "link-flapping")
        .collect()
}

/// A link that goes down and retrains between two sweeps leaves no trace in discovery, only
/// in its LinkDowned counter: serve journals each rise (with how much), and more than 10 in
/// a day is link-flapping in `check --journal` (the thresholds file's
/// flap.link-downed-per-day, here 10 by default).
#[test]
fn serve_journals_link_downed_rises_and_a_day_of_them_is_flapping() {
    let j = Journaling::start();
    let (sim, log, journal, port) = (&j.sim, j.log.as_path(), j.journal.as_path(), j.port);
    let journal_arg = journal.to_str().unwrap();
    // Two sweeps' worth of time for a baseline, then rises of 4 and 8.
    std::thread::sleep(Duration::from_millis(800));
    let downed = |text: &str| {
        text.lines()
            .filter(|l| l.contains("\"kind\":\"link-downed\""))
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .collect::<Vec<_>>()
    };
    for (value, events) in [(4, 1), (12, 2)] {
        sim.set_counter("Switch1", 2, "LinkDownedCounter", value)
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while downed(&std::fs::read_to_string(journal).unwrap_or_default()).len() < events {
            assert!(
                Instant::now() < deadline,
                "no LinkDowned rise journaled:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let text = std::fs::read_to_string(journal).unwrap();
    let rises = downed(&text);
    let counts: Vec<u64> = rises.iter().map(|e| e["count"].as_u64().unwrap()).collect();
    assert_eq!(counts, [4, 8], "{text}");
    assert_eq!(rises[1]["detail"], "LinkDowned rose by 8 (to 12)");
    assert_eq!(rises[1]["a"]["port"], 2);
    let out = ibscope(sim, &["check", "--journal", journal_arg, "--json"]);
    let doc: serde_json::Value = serde_json::from_str(&assert_exit(&out, 1)).unwrap();
    let flapping = link_flapping(&doc);
    assert_eq!(flapping.len(), 1, "{doc}");
    assert!(
        flapping[0]["message"]
            .as_str()
            .unwrap()
            .contains("LinkDowned rose by 12 within 24h (limit 10 a day)"),
        "{doc}"
    );
    // serve finds it too: the findings family counts it (what the alert rules read).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, page) = get_gzip(port);
        if page.lines().any(|l| {
            l.starts_with("ibscope_findings{")
                && l.contains("kind=\"link-flapping\"")
                && l.ends_with(" 1")
        }) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no link-flapping on the page:\n{page}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `serve --host` on a compute node: the host's own families (what `host --prometheus`
/// writes) on the page of every fabric together, valid for promtool, and not on a single
/// fabric's page.
#[test]
fn serve_host_puts_the_hosts_families_on_the_page() {
    let sim = sim("examples/fabrics/net");
    let scratch = temp_dir();
    let log = scratch.path().join("serve.log");
    let port = free_port();
    let mut cmd = sim.command(ibscope_bin());
    cmd.args([
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--interval",
        "0.5",
        "--host",
    ])
    .env(
        "IBSCOPE_SYSFS_ROOT",
        repo_root().join("tests/data/sysfs/roce-cx6dx"),
    )
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(&log).unwrap());
    let mut serve = KillOnDrop::spawn(cmd, "ibscope serve");
    wait_healthy(&mut serve, port, &log);
    let deadline = Instant::now() + Duration::from_secs(30);
    let page = loop {
        let (_, page) = get_gzip(port);
        if page.contains("ibscope_host_ready") {
            break page;
        }
        assert!(Instant::now() < deadline, "no host families:\n{page}");
        std::thread::sleep(Duration::from_millis(200));
    };
    for line in [
        "ibscope_host_ready 0",
        "ibscope_host_findings{kind=\"hca-port-not-active\",severity=\"error\"} 1",
        "ibscope_host_statistic_total{device=\"mlx5_0\",port=\"1\",netdev=\"enp65s0f0np0\",priority=\"3\",group=\"congestion\",source=\"ethtool\",name=\"tx_prio3_pause\"} 311",
    ] {
        assert!(page.lines().any(|l| l == line), "{line}\n{page}");
    }
    assert!(
        page.contains("ibscope_fabric_nodes"),
        "the fabric's families stay"
    );
    let checked = promtool_check(&page);
    assert!(checked.passed(), "promtool: {}", checked.report);
}

/// `serve --host --no-fabric ARGS` on the RoCE fixture (a node without an InfiniBand
/// port), its stderr into `log`.
fn serve_host_alone(args: &[&str], log: &Path) -> KillOnDrop {
    let mut cmd = std::process::Command::new(ibscope_bin());
    cmd.args(["serve", "--host", "--no-fabric"])
        .args(args)
        .env_remove("LD_PRELOAD")
        .env_remove("IBSIM_SOCKNAME")
        .env(
            "IBSCOPE_SYSFS_ROOT",
            repo_root().join("tests/data/sysfs/roce-cx6dx"),
        )
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    KillOnDrop::spawn(cmd, "ibscope serve")
}

/// `serve --host --no-fabric` on a RoCE compute node (no InfiniBand port): the host's page
/// alone, healthy once read, valid for promtool; it stops cleanly on SIGTERM.
#[test]
fn serve_host_alone_on_a_node_without_a_fabric() {
    let scratch = temp_dir();
    let log = scratch.path().join("serve.log");
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut serve = serve_host_alone(&["--listen", &listen, "--interval", "0.5"], &log);
    let body = healthz_until(
        &mut serve,
        port,
        &log,
        Duration::from_secs(20),
        "/healthz to say ok",
        |code, body| code == 200 && body.trim() == "ok (this host only)",
    );
    assert_eq!(body.trim(), "ok (this host only)");
    let (_, page) = get_gzip(port);
    assert!(page.lines().any(|l| l == "ibscope_host_ready 0"), "{page}");
    assert!(!page.contains("ibscope_fabric_nodes"), "{page}");
    let checked = promtool_check(&page);
    assert!(checked.passed(), "promtool: {}\n{page}", checked.report);
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(serve.pid() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(status) = serve.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "still running 5 s after SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(
        status.success(),
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );
}

/// `--listen 127.0.0.1:0`: the system picks the port, and the line that says where serve
/// listens gives that port (it said port 0), where serve then answers.
#[test]
fn serve_on_port_0_says_the_port_it_got() {
    let scratch = temp_dir();
    let log = scratch.path().join("serve.log");
    let _serve = serve_host_alone(&["--listen", "127.0.0.1:0"], &log);
    let deadline = Instant::now() + Duration::from_secs(20);
    let prefix = "ibscope serve: listening on http://127.0.0.1:";
    let port: u16 = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(rest) = text.lines().find_map(|l| l.strip_prefix(prefix)) {
            break rest.split('/').next().unwrap().parse().unwrap();
        }
        assert!(Instant::now() < deadline, "no listening line: {text}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_ne!(port, 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    while http_get(port, "/healthz").is_err() {
        assert!(Instant::now() < deadline, "no answer on port {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
