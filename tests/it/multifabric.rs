//! Several fabrics from one host: two simulated fabrics, each with its own OpenSM and a
//! fault planted on each, watched by one ibscope (`-C all`).
//!
//! How the one ibscope reaches both, and why: the umad2sim shim fakes exactly one CA
//! ("ibsim0") with one port per process and talks to exactly one ibsim (IBSIM_SOCKNAME)
//! per process (umad2sim.c creates devices[0] only; ibsim attaches a client at one node's
//! first port), and ibsim allows one SM per node. So one process can reach two simulated
//! subnets neither through two CA ports nor through two sockets. Each fabric is reached
//! instead through `ibscope agent`, a second process under the shim with that fabric's
//! socket, which relays raw MADs over its stdin and stdout; the config file's
//! `[[fabric]] command = ...` starts it. This is the same path a real management node
//! uses for a fabric only another host is cabled to (`ssh host ibscope agent`), and it
//! keeps the ibscope under test out of the shim entirely. Several local umad ports in one
//! process (what a multi-port host does) are the other path: its port selection and
//! subnet de-duplication are unit-tested (src/fabric_set.rs, topo/src/subnet.rs).
//!
//! The two fabrics get different subnet prefixes (opensm.conf `subnet_prefix`): ibsim
//! numbers GUIDs the same way in every fabric, so the first switch of both, which is
//! where OpenSM runs, has the same GUID, and only the prefix tells these two subnets apart
//! (real GUIDs are unique, so real subnets differ by their SM's GUID too).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::net::*;
use common::*;
use serde_json::Value;

const PREFIX_B: &str = "0xfe80000000000002";

/// Fabric A: net.2sw2path4hca with a symbol error on Switch1 port 1. Fabric B: net with
/// receive errors on Switch2 port 1 and its own subnet prefix.
fn two_fabrics() -> (Sim, Sim) {
    let a = sim("net.2sw2path4hca");
    a.set_counter("Switch1", 1, "SymbolErrorCounter", 17)
        .unwrap();
    let mut opts = SimOptions::new(fabric("net"));
    opts.sm_config = vec![format!("subnet_prefix {PREFIX_B}")];
    let b = sim_with(opts);
    b.set_counter("Switch2", 1, "PortRcvErrors", 5).unwrap();
    (a, b)
}

/// The command that runs `ibscope agent` attached to `sim` at `host` (in the sim's
/// client directory, where the shim keeps its fake sysfs).
fn agent_command(sim: &Sim, host: Option<&str>) -> String {
    let mut env: Vec<String> = sim
        .env()
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if let Some(h) = host {
        env.push(format!("SIM_HOST={h}"));
    }
    format!(
        "cd '{}' && exec env {} '{}' agent",
        sim.client_dir().display(),
        env.join(" "),
        ibscope_bin().display()
    )
}

/// A config file naming the fabrics: (name, sim, SIM_HOST).
fn config(dir: &Path, fabrics: &[(&str, &Sim, Option<&str>)]) -> PathBuf {
    let mut text = String::new();
    for (name, sim, host) in fabrics {
        text.push_str(&format!(
            "[[fabric]]\nname = \"{name}\"\ncommand = \"{}\"\n\n",
            agent_command(sim, *host)
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
        ));
    }
    let path = dir.join("config.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn run(config: &Path, args: &[&str]) -> std::process::Output {
    let c = config.to_str().unwrap();
    ibscope_plain(args, &[("IBSCOPE_CONFIG", c)])
}

#[test]
fn check_names_each_fabrics_fault_and_exits_with_the_worst() {
    let (a, b) = two_fabrics();
    let dir = temp_dir();
    let cfg = config(dir.path(), &[("alpha", &a, None), ("beta", &b, None)]);

    let out = run(&cfg, &["-C", "all", "check"]);
    let text = assert_exit(&out, 1);
    let lines: Vec<&str> = text.lines().collect();
    let of = |name: &str| -> Vec<&str> {
        let prefix = format!("{name}: ");
        lines
            .iter()
            .filter_map(|l| l.strip_prefix(prefix.as_str()))
            .collect()
    };
    let (alpha, beta) = (of("alpha"), of("beta"));
    assert_eq!(
        alpha.len() + beta.len(),
        lines.len(),
        "a line of no fabric:\n{text}"
    );
    let finding = |ls: &[&str], counter: &str, node: &str| {
        ls.iter().any(|l| {
            l.starts_with("[counter-above-threshold]")
                && l.contains(counter)
                && l.contains(&format!("\"{node}\""))
        })
    };
    assert!(finding(&alpha, "SymbolErrorCounter", "Switch1"), "{text}");
    assert!(finding(&beta, "PortRcvErrors", "Switch2"), "{text}");
    // Each fault on its own fabric only.
    assert!(!finding(&alpha, "PortRcvErrors", "Switch2"), "{text}");
    assert!(!finding(&beta, "SymbolErrorCounter", "Switch1"), "{text}");
    assert!(
        alpha[0].starts_with("subnet 0xfe80000000000000, SM "),
        "{text}"
    );
    assert!(
        beta[0].starts_with(&format!("subnet {PREFIX_B}, SM ")),
        "{text}"
    );
    assert!(alpha.last().unwrap().contains("6 nodes"), "{text}");
    assert!(beta.last().unwrap().contains("4 nodes"), "{text}");

    // JSON: a report per fabric, each naming it; every finding carries its fabric.
    let out = run(&cfg, &["-C", "all", "check", "--json"]);
    let doc = schema::assert_valid("check", "-C all check", &assert_exit(&out, 1), false).remove(0);
    assert_eq!(doc["healthy"], false);
    let reports = doc["fabrics"].as_array().unwrap();
    assert_eq!(reports.len(), 2);
    for (report, name, prefix) in [
        (&reports[0], "alpha", "0xfe80000000000000"),
        (&reports[1], "beta", PREFIX_B),
    ] {
        assert_eq!(report["fabric"]["name"], name);
        assert_eq!(report["fabric"]["subnet_prefix"], prefix);
        assert!(json_guid(&report["fabric"]["sm_guid"]).is_some());
        let findings = report["findings"].as_array().unwrap();
        assert!(!findings.is_empty());
        assert!(
            findings.iter().all(|f| f["fabric"] == report["fabric"]),
            "{report}"
        );
    }

    // One fabric by name: only its fault.
    let out = run(&cfg, &["-C", "beta", "check"]);
    let text = assert_exit(&out, 1);
    assert!(text.contains("PortRcvErrors") && !text.contains("SymbolErrorCounter"));

    // A fabric that cannot be reached: one error line, the others still checked, exit 2
    // (the worst).
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("[[fabric]]\nname = \"gamma\"\ncommand = \"exit 3\"\n");
    std::fs::write(&cfg, text).unwrap();
    let out = run(&cfg, &["-C", "all", "check"]);
    let text = assert_exit(&out, 2);
    assert!(text.contains("alpha: [counter-above-threshold]"), "{text}");
    assert!(text.contains("beta: [counter-above-threshold]"), "{text}");
    let err = stderr(&out);
    assert!(
        err.lines().any(|l| l
            == "ibscope: error: fabric gamma: fabric command `exit 3`: it ended before \
                answering (exit code 3); is it `ibscope agent`?"),
        "{err}"
    );
    drop((a, b));
}

#[test]
fn ports_on_one_subnet_are_swept_once_and_records_are_labelled() {
    let (a, b) = two_fabrics();
    let dir = temp_dir();
    // alpha2 reaches fabric A again, from another host's port: the same subnet.
    let cfg = config(
        dir.path(),
        &[
            ("alpha", &a, None),
            ("alpha2", &a, Some("Hca2")),
            ("beta", &b, None),
        ],
    );
    let out = run(&cfg, &["-C", "all", "discover", "--format", "json"]);
    let doc =
        schema::assert_valid("discover", "-C all discover", &assert_success(&out), false).remove(0);
    let names: Vec<&str> = doc["fabrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["fabric"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["alpha", "beta"]);
    let err = stderr(&out);
    assert!(
        err.contains(
            "note: alpha2 reaches the same subnet as alpha (subnet 0xfe80000000000000, SM"
        ),
        "{err}"
    );
    // The snapshots are each fabric's: 6 and 4 nodes, and each reads back.
    assert_eq!(doc["fabrics"][0]["nodes"].as_array().unwrap().len(), 6);
    assert_eq!(doc["fabrics"][1]["nodes"].as_array().unwrap().len(), 4);
    let one = dir.path().join("beta.json");
    std::fs::write(&one, doc["fabrics"][1].to_string()).unwrap();
    let back = run(
        &cfg,
        &["--topology", one.to_str().unwrap(), "links", "--json"],
    );
    let links = schema::assert_valid(
        "links",
        "links of a saved fabric",
        &assert_success(&back),
        false,
    )
    .remove(0);
    assert_eq!(links["fabric"]["name"], "beta");
    // Several fabrics' JSON: one links document naming each; a counters document each.
    let out = run(&cfg, &["-C", "all", "links", "--json"]);
    let links = schema::assert_valid("links", "-C all links", &assert_success(&out), false);
    let named: Vec<&Value> = links[0]["fabrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| &f["fabric"]["name"])
        .collect();
    assert_eq!(named, ["alpha", "beta"], "{:#}", links[0]);
    let out = run(&cfg, &["-C", "all", "counters", "--format", "json"]);
    let docs = schema::assert_valid("counters", "-C all counters", &assert_success(&out), true);
    let named: Vec<&Value> = docs.iter().map(|d| &d["fabric"]["name"]).collect();
    assert_eq!(named, ["alpha", "beta"]);

    // links: a heading per fabric; counters: a fabric column, a fabric label.
    let out = run(&cfg, &["-C", "alpha,beta", "links"]);
    let text = assert_success(&out);
    let headings: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("## fabric "))
        .collect();
    assert_eq!(headings.len(), 2, "{text}");
    assert!(headings[1].starts_with(&format!("## fabric beta: subnet {PREFIX_B}")));
    let out = run(&cfg, &["-C", "all", "counters", "--format", "csv"]);
    let csv = assert_success(&out);
    assert!(csv.starts_with("fabric,time_ms,node,"), "{csv}");
    let rows = |f: &str| {
        csv.lines()
            .filter(|l| l.starts_with(&format!("{f},")))
            .count()
    };
    assert!(
        rows("alpha") > 0 && rows("beta") > 0 && rows("alpha2") == 0,
        "{csv}"
    );
    // A reader that goes away (`| head`) ends the command quietly, as with one fabric:
    // not a failure of each fabric, and with the exit code of the run.
    for args in [&["-C", "all", "counters"][..], &["-C", "all", "check"]] {
        let code = run(&cfg, args).status.code();
        let mut child = Command::new(ibscope_bin())
            .args(args)
            .env_remove("LD_PRELOAD")
            .env("IBSCOPE_CONFIG", &cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), code, "{args:?}: {err}");
        assert!(!err.contains("ibscope: error"), "{args:?}: {err}");
    }
    // JSON: one document per fabric, one per line (as --interval writes its samples).
    let out = run(&cfg, &["-C", "all", "counters", "--format", "json"]);
    let json = assert_success(&out);
    let docs: Vec<Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let named: Vec<&str> = docs
        .iter()
        .map(|d| d["fabric"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(named, ["alpha", "beta"], "{json}");
    assert!(docs
        .iter()
        .all(|d| d["ports"].as_array().is_some_and(|p| !p.is_empty())));
    let out = run(&cfg, &["-C", "all", "counters", "--format", "prom"]);
    let page = assert_success(&out);
    let report = promtool_check(&page);
    assert!(report.passed(), "{}", report.report);
    assert_eq!(
        sample_value(
            &page,
            "ibscope_port_rcv_errors_total",
            &[("fabric", "beta"), ("node", "Switch2"), ("port", "1")]
        ),
        Some(5.0)
    );
    assert_eq!(
        sample_value(
            &page,
            "ibscope_port_symbol_error_total",
            &[("fabric", "alpha"), ("node", "Switch1"), ("port", "1")]
        ),
        Some(17.0)
    );
    // --details on every fabric: the breakdowns on one page, each series of its fabric;
    // CSV's detail columns after the fabric column.
    let out = run(
        &cfg,
        &["-C", "all", "counters", "--details", "--format", "prom"],
    );
    let page = assert_success(&out);
    let report = promtool_check(&page);
    assert!(report.passed(), "{}", report.report);
    for fabric in ["alpha", "beta"] {
        assert!(
            page.lines().any(|l| l.starts_with(&format!(
                "ibscope_port_malformed_pkt_errors_total{{fabric=\"{fabric}\","
            ))),
            "{page}"
        );
    }
    let out = run(
        &cfg,
        &["-C", "all", "counters", "--details", "--format", "csv"],
    );
    let csv = assert_success(&out);
    let header = csv.lines().next().unwrap();
    assert!(
        header.starts_with("fabric,time_ms,")
            && header.contains(",PortXmitDiscardDetails.PortNeighborMTUDiscards,"),
        "{header}"
    );
}

#[test]
fn serve_exports_both_fabrics_and_a_lost_one_leaves_the_other_fresh() {
    let (a, b) = two_fabrics();
    let dir = temp_dir();
    let cfg = config(dir.path(), &[("alpha", &a, None), ("beta", &b, None)]);
    let log = dir.path().join("serve.log");
    let port = free_port();
    let mut serve = start_serve_all(&cfg, &log, port);
    wait_every_fabric_healthy(&mut serve, port, &log, "both fabrics healthy");
    let (code, page) = get(port, "/metrics");
    assert_eq!(code, 200);
    let report = promtool_check(&page);
    assert!(report.passed(), "{}", report.report);
    let value =
        |page: &str, metric: &str, fabric: &str| sample_value(page, metric, &[("fabric", fabric)]);
    assert_eq!(value(&page, "ibscope_fabric_nodes", "alpha"), Some(6.0));
    assert_eq!(value(&page, "ibscope_fabric_nodes", "beta"), Some(4.0));
    assert_eq!(value(&page, "ibscope_up", "alpha"), Some(1.0));
    assert_eq!(value(&page, "ibscope_up", "beta"), Some(1.0));
    // Every series names its fabric, one of the two.
    for l in page.lines().filter(|l| !l.starts_with('#')) {
        assert!(
            l.contains("{fabric=\"alpha\"") || l.contains("{fabric=\"beta\""),
            "unlabelled: {l}"
        );
    }
    assert_eq!(
        sample_value(
            &page,
            "ibscope_findings",
            &[("fabric", "beta"), ("kind", "counter-above-threshold")]
        ),
        Some(1.0)
    );
    // One fabric's page (the multi-target pattern): exactly that fabric's lines of the
    // whole page, the same families and values.
    let (code, beta) = get(port, "/metrics?fabric=beta");
    assert_eq!(code, 200, "{beta}");
    let report = promtool_check(&beta);
    assert!(report.passed(), "{}", report.report);
    assert_eq!(value(&beta, "ibscope_fabric_nodes", "beta"), Some(4.0));
    assert_eq!(value(&beta, "ibscope_fabric_nodes", "alpha"), None);
    for l in beta.lines().filter(|l| !l.starts_with('#')) {
        assert!(l.contains("{fabric=\"beta\""), "not beta's: {l}");
    }
    let (code, missing) = get(port, "/metrics?fabric=gamma");
    assert_eq!(code, 404, "{missing}");
    assert!(missing.contains("alpha, beta"), "{missing}");
    // The landing page names both fabrics and links to each one's page.
    let (code, landing) = get(port, "/");
    assert_eq!(code, 200, "{landing}");
    for name in ["alpha", "beta"] {
        assert!(
            landing.contains(&format!("<a href=\"/metrics?fabric={name}\">{name}</a>")),
            "{landing}"
        );
    }

    // Fabric B's simulator dies: its last good series stay, marked stale, ibscope_up
    // says 0, A keeps sweeping.
    let mut b = b;
    b.stop().unwrap();
    let down = wait_for(Duration::from_secs(30), "beta reported down", || {
        serve.assert_running(&log);
        let (_, page) = http_get(port, "/metrics").ok()?;
        (value(&page, "ibscope_up", "beta") == Some(0.0)).then_some(page)
    });
    assert_eq!(
        value(&down, "ibscope_fabric_nodes", "beta"),
        Some(4.0),
        "beta's last good series left the page"
    );
    assert_eq!(value(&down, "ibscope_sample_stale", "beta"), Some(1.0));
    assert_eq!(value(&down, "ibscope_sample_stale", "alpha"), Some(0.0));
    let t0 = value(&down, "ibscope_sweep_timestamp_seconds", "alpha").unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let (_, later) = get(port, "/metrics");
    let t1 = value(&later, "ibscope_sweep_timestamp_seconds", "alpha").unwrap();
    assert!(t1 > t0 + 1.0, "alpha's sweeps stopped: {t0} then {t1}");
    assert_eq!(value(&later, "ibscope_up", "alpha"), Some(1.0));
    let (code, health) = get(port, "/healthz");
    assert_eq!(code, 503, "{health}");
    assert!(health.contains("alpha: ok\n"), "{health}");
    assert!(health.contains("beta: fabric unreachable for "), "{health}");
    assert!(health.contains("serving the last good sample"), "{health}");
    let report = promtool_check(&later);
    assert!(report.passed(), "{}", report.report);
    let pid = serve.pid();
    drop(serve);
    assert_all_gone(&[pid]);
    drop(a);
}

/// A fabric that never answers delays no other: its agent command is started but says
/// nothing (the 30 s wait for an agent's first answer runs), and meanwhile the fabric
/// listed after it is swept again and again. The silent fabric comes first in the config
/// file, so serve working through its fabrics in turn would sweep nothing until that wait
/// ran out.
#[test]
fn serve_keeps_sweeping_a_fabric_while_another_never_answers() {
    let a = sim("net");
    let dir = temp_dir();
    let port = free_port();
    // The silent agent: a sleep only this test starts (its length is the port number).
    let silent = format!("exec sleep {port}");
    let cfg = dir.path().join("config.toml");
    let mut text = format!("[[fabric]]\nname = \"silent\"\ncommand = \"{silent}\"\n\n");
    text.push_str(&std::fs::read_to_string(config(dir.path(), &[("alpha", &a, None)])).unwrap());
    std::fs::write(&cfg, text).unwrap();
    let log = dir.path().join("serve.log");
    let mut serve = start_serve_all(&cfg, &log, port);
    let stamp = |page: &str| {
        sample_value(
            page,
            "ibscope_sweep_timestamp_seconds",
            &[("fabric", "alpha")],
        )
    };
    let silent_waits = |health: &str| health.contains("silent: no sweep finished yet\n");
    let first = wait_for(Duration::from_secs(30), "alpha swept", || {
        serve.assert_running(&log);
        let (_, page) = http_get(port, "/metrics").ok()?;
        stamp(&page)
    });
    // Three more of alpha's sweeps (--interval 1), all while silent is still being waited
    // for: /healthz says so before and after each look at the page.
    wait_for(
        Duration::from_secs(25),
        "three more sweeps of alpha",
        || {
            serve.assert_running(&log);
            let (code, health) = http_get(port, "/healthz").ok()?;
            assert_eq!(code, 503, "{health}");
            assert!(
                silent_waits(&health),
                "silent was given up on first: {health}"
            );
            assert!(health.contains("alpha: ok\n"), "{health}");
            let (_, page) = http_get(port, "/metrics").ok()?;
            let now = stamp(&page)?;
            assert_eq!(
                sample_value(&page, "ibscope_up", &[("fabric", "silent")]),
                Some(0.0),
                "{page}"
            );
            (now >= first + 3.0).then_some(())
        },
    );
    let (_, health) = get(port, "/healthz");
    assert!(silent_waits(&health), "{health}");
    // Its own page does not exist yet: 503 with what /healthz says of it.
    let (code, why) = get(port, "/metrics?fabric=silent");
    assert_eq!((code, why.as_str()), (503, "no sweep finished yet\n"));
    let sleeper = processes_running(&["sleep", &port.to_string()]);
    assert_eq!(sleeper.len(), 1, "the silent agent runs: {sleeper:?}");
    // SIGTERM stops serve cleanly, and with it the agent it was still waiting for.
    // SAFETY: signalling the process this test started.
    assert_eq!(unsafe { libc::kill(serve.pid() as i32, libc::SIGTERM) }, 0);
    let status = wait_for(Duration::from_secs(30), "serve to stop", || {
        serve.child.try_wait().unwrap()
    });
    assert_eq!(
        status.code(),
        Some(0),
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );
    assert_all_gone(&sleeper);
    drop(a);
}

/// PIDs of the processes whose command line is `argv`.
fn processes_running(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            (cmdline == want && pid_alive(pid)).then_some(pid)
        })
        .collect()
}

/// Two ports on one subnet under `serve -C all`: the fabric is swept by one sweeper
/// process, the other port is noted and leaves the page and /healthz. Which of the two
/// stays is whichever opened first (their sweepers start together).
#[test]
fn serve_sweeps_ports_on_one_subnet_once() {
    let (a, b) = two_fabrics();
    let dir = temp_dir();
    let cfg = config(
        dir.path(),
        &[
            ("alpha", &a, None),
            ("alpha2", &a, Some("Hca2")),
            ("beta", &b, None),
        ],
    );
    let log = dir.path().join("serve.log");
    let port = free_port();
    let mut serve = start_serve_all(&cfg, &log, port);
    let health = wait_every_fabric_healthy(&mut serve, port, &log, "healthy");
    let err = std::fs::read_to_string(&log).unwrap();
    let (kept, merged) = if err.contains("note: alpha2 reaches the same subnet as alpha (") {
        ("alpha", "alpha2")
    } else {
        ("alpha2", "alpha")
    };
    assert!(
        err.contains(&format!(
            "note: {merged} reaches the same subnet as {kept} (subnet 0xfe80000000000000, SM"
        )),
        "{err}"
    );
    assert_eq!(health, format!("{kept}: ok\nbeta: ok\n"));
    let (code, page) = get(port, "/metrics");
    assert_eq!(code, 200);
    let value = |metric: &str, fabric: &str| sample_value(&page, metric, &[("fabric", fabric)]);
    assert_eq!(value("ibscope_fabric_nodes", kept), Some(6.0));
    assert_eq!(value("ibscope_fabric_nodes", "beta"), Some(4.0));
    assert!(
        !page.contains(&format!("fabric=\"{merged}\"")),
        "{merged} is on the page"
    );
    let report = promtool_check(&page);
    assert!(report.passed(), "{}", report.report);
    let pid = serve.pid();
    drop(serve);
    assert_all_gone(&[pid]);
    drop((a, b));
}

/// `ibscope -C all tui` in a real terminal (tmux): the header names the fabric shown and
/// its planted fault is on the overview; f shows the other fabric with its own fault, F
/// goes back; q quits cleanly (exit 0).
#[test]
fn tui_switches_fabric_with_f_and_names_it_in_the_header() {
    use common::tmux::Tmux;
    let (a, b) = two_fabrics();
    let dir = temp_dir();
    let cfg = config(dir.path(), &[("alpha", &a, None), ("beta", &b, None)]);
    let marker = dir.path().join("tui-exit");
    let script = format!(
        "env -u LD_PRELOAD -u IBSIM_SOCKNAME IBSCOPE_CONFIG='{cfg}' '{bin}' -C all tui \
         --interval 1; echo $? > '{marker}.part'; mv '{marker}.part' '{marker}'; sleep 60",
        cfg = cfg.display(),
        bin = ibscope_bin().display(),
        marker = marker.display()
    );
    let tmux = Tmux::start("ibscope-tui-fabrics", &script);
    let long = Duration::from_secs(30);
    let alpha = tmux.wait_for(
        &["fabric alpha 1/2", "SymbolErrorCounter = 17", "updated"],
        long,
    );
    assert!(!alpha.contains("PortRcvErrors"), "{alpha}");
    tmux.keys("f");
    let beta = tmux.wait_for(&["fabric beta 2/2", "PortRcvErrors = 5"], long);
    assert!(!beta.contains("SymbolErrorCounter = 17"), "{beta}");
    assert!(beta.contains("2 switches, 2 HCAs on "), "{beta}");
    tmux.keys("F");
    tmux.wait_for(&["fabric alpha 1/2", "SymbolErrorCounter = 17"], long);
    tmux.keys("q");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !marker.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "tui did not quit:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(std::fs::read_to_string(&marker).unwrap().trim(), "0");
    drop((a, b));
}
