//! The simulator harness itself: start, drive, fault injection, and that nothing is left behind.

use crate::common;

use std::path::Path;

use common::*;

/// `Switch`/`Ca` header lines of ibnetdiscover's output.
fn node_lines(topology: &str) -> (usize, usize) {
    let switches = topology.lines().filter(|l| l.starts_with("Switch")).count();
    let cas = topology.lines().filter(|l| l.starts_with("Ca")).count();
    (switches, cas)
}

/// A `Field:....value` line of smpquery/perfquery output.
fn field(text: &str, name: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?.strip_prefix(':')?;
        Some(rest.trim_start_matches('.').trim().to_string())
    })
}

#[test]
fn discovers_the_fabric_injects_unlink_and_cleans_up() {
    let sim = sim("net");
    let state_dir = sim.state_dir().to_path_buf();
    let pids = sim.pids();
    assert_eq!(pids.len(), 2, "ibsim and opensm");
    assert!(pids.iter().all(|p| pid_alive(*p)));

    let topo = assert_success(&reference(&sim, "ibnetdiscover", &[]));
    assert_eq!(node_lines(&topo), (2, 2), "ibnetdiscover saw:\n{topo}");

    // Switch1 port 1 (to Hca1), by directed route from the SM's node Switch1.
    let before = assert_success(&reference(&sim, "smpquery", &["-D", "portinfo", "0", "1"]));
    assert_eq!(
        field(&before, "LinkState").as_deref(),
        Some("Active"),
        "{before}"
    );

    sim.unlink("Switch1", 1).unwrap();
    let after = assert_success(&reference(&sim, "smpquery", &["-D", "portinfo", "0", "1"]));
    assert_eq!(
        field(&after, "LinkState").as_deref(),
        Some("Down"),
        "{after}"
    );
    assert_eq!(
        field(&after, "PhysLinkState").as_deref(),
        Some("Polling"),
        "{after}"
    );
    let topo = assert_success(&reference(&sim, "ibnetdiscover", &[]));
    assert_eq!(node_lines(&topo), (2, 1), "Hca1 is cut off:\n{topo}");

    sim.relink("Switch1", 1).unwrap();
    let relinked = assert_success(&reference(&sim, "smpquery", &["-D", "portinfo", "0", "1"]));
    assert_eq!(
        field(&relinked, "PhysLinkState").as_deref(),
        Some("LinkUp"),
        "{relinked}"
    );
    // The SM is not told of the change until it sweeps again.
    sim.resweep().unwrap();
    let swept = assert_success(&reference(&sim, "smpquery", &["-D", "portinfo", "0", "1"]));
    assert_eq!(
        field(&swept, "LinkState").as_deref(),
        Some("Active"),
        "{swept}"
    );

    drop(sim);
    assert_all_gone(&pids);
    assert!(
        !state_dir.exists(),
        "temporary state dir {} left",
        state_dir.display()
    );
}

#[test]
fn console_reports_errors_and_output() {
    let sim = sim_no_sm("net");
    let err = sim.console("Unlink \"NoSuchNode\"[1]").unwrap_err();
    assert!(format!("{err}").contains("not found"), "{err}");
    assert!(sim.console("Bogus command").is_err());
    let dump = sim.console_output("Dump \"Switch2\"").unwrap();
    assert!(dump.contains("\"Switch2\""), "{dump}");
    assert!(dump.contains("dumped 1 nodes"), "{dump}");
    // Console commands are processed in order and before console() returns.
    sim.unlink("Switch2", 3).unwrap();
    let dump = sim.console_output("Dump \"Switch2\"").unwrap();
    let port3 = dump
        .lines()
        .find(|l| l.contains("\t[3]\t"))
        .unwrap_or_default();
    assert!(port3.contains("Down/Polling"), "{dump}");
    assert!(
        sim.console(&"x".repeat(200)).is_err(),
        "over-long lines are refused"
    );
}

#[test]
fn set_counter_shows_in_perfquery() {
    let sim = sim("net");
    // Switch1's LID, as OpenSM assigned it (port 0 of a switch carries it).
    let port0 = assert_success(&reference(&sim, "smpquery", &["-D", "portinfo", "0", "0"]));
    let lid = field(&port0, "Lid").expect("Lid in portinfo");
    sim.set_counter("Switch1", 3, "SymbolErrorCounter", 17)
        .unwrap();
    let counters = assert_success(&reference(&sim, "perfquery", &[&lid, "3"]));
    assert_eq!(
        field(&counters, "SymbolErrorCounter").as_deref(),
        Some("17"),
        "{counters}"
    );
}

#[test]
fn two_sims_run_side_by_side() {
    let a = sim_no_sm("net");
    let b = sim_no_sm("net.2sw2path4hca");
    assert_ne!(a.sockname(), b.sockname());
    let ta = assert_success(&reference(&a, "ibnetdiscover", &[]));
    let tb = assert_success(&reference(&b, "ibnetdiscover", &[]));
    assert_eq!(node_lines(&ta), (2, 2));
    assert_eq!(node_lines(&tb), (2, 4));
}

#[test]
fn a_panicking_test_leaves_nothing_behind() {
    let (tx, rx) = std::sync::mpsc::channel();
    let result = std::thread::spawn(move || {
        let sim = sim("net.1");
        tx.send((sim.pids(), sim.state_dir().to_path_buf()))
            .unwrap();
        panic!("test failure while the sim runs");
    })
    .join();
    assert!(result.is_err());
    let (pids, dir) = rx.recv().unwrap();
    assert_all_gone(&pids);
    assert!(!dir.exists());
}

fn state_pids(dir: &Path) -> Vec<u32> {
    let text = std::fs::read_to_string(dir.join("state.json")).expect("state.json");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut pids = vec![v["ibsim"]["pid"].as_u64().unwrap() as u32];
    if let Some(p) = v["opensm"]["pid"].as_u64() {
        pids.push(p as u32);
    }
    pids
}

#[test]
fn detached_sim_outlives_its_handle_and_goes_down_by_state() {
    let base = temp_dir();
    let dir = base.path().join("sim");
    let mut opts = SimOptions::new(fabric("net"));
    opts.name = Some(unique_name("lib"));
    opts.state_dir = Some(dir.clone());
    opts.detach = true;
    let _guard = DownOnDrop(dir.clone());
    let sim = sim_with(opts);
    let pids = sim.pids();
    drop(sim);
    assert!(
        pids.iter().all(|p| pid_alive(*p)),
        "detached processes must survive the handle"
    );
    assert_eq!(state_pids(&dir), pids);

    // A later "process": attach through state.json, use the fabric, then take it down.
    let attached = Sim::attach_dir(&dir).unwrap();
    assert!(attached.is_running());
    let topo = assert_success(&reference(&attached, "ibnetdiscover", &[]));
    assert_eq!(node_lines(&topo), (2, 2));
    attached.unlink("Switch1", 2).unwrap();
    drop(attached);
    assert!(
        pids.iter().all(|p| pid_alive(*p)),
        "dropping an attached handle stops nothing"
    );

    Sim::down_dir(&dir).unwrap();
    assert_all_gone(&pids);
    assert!(!dir.join("state.json").exists());
    assert!(Sim::attach_dir(&dir).is_err());
}

#[test]
fn cli_up_exec_fault_status_down() {
    let base = temp_dir();
    let base_str = base.path().to_str().unwrap();
    let env = [("IBSCOPE_SIM_DIR", base_str)];
    let name = unique_name("cli");
    let topo = fabric("net");
    let topo = topo.to_str().unwrap();

    let _guard = DownOnDrop(base.path().join(&name));
    let up = ibscope_plain(&["sim", "up", topo, "--name", &name], &env);
    let exports = assert_success(&up);
    assert!(exports.contains("export LD_PRELOAD="), "{exports}");
    assert!(exports.contains("export IBSIM_SOCKNAME="), "{exports}");
    assert!(
        exports.contains("export IBSCOPE_SIM_TOPOLOGY="),
        "{exports}"
    );
    assert!(
        exports.lines().all(|l| l.starts_with("export ")),
        "stdout must be eval-able: {exports}"
    );
    let dir = base.path().join(&name);
    let pids = state_pids(&dir);
    assert!(pids.iter().all(|p| pid_alive(*p)));

    // Only IBSCOPE_SIM copied into a shell: the error says what the rest of the exports do.
    let partial = ibscope_plain(&["sm"], &[("IBSCOPE_SIM", name.as_str())]);
    assert_exit(&partial, 2);
    let why = stderr(&partial);
    assert_eq!(why.lines().count(), 1, "{why}");
    for part in ["IBSCOPE_SIM", "shim", "sim up", "sim exec"] {
        assert!(why.contains(part), "{part:?} not in: {why}");
    }

    let status = assert_success(&ibscope_plain(&["sim", "status"], &env));
    assert!(
        status
            .lines()
            .any(|l| l.starts_with(&name) && l.contains("running")),
        "{status}"
    );

    let disc = ibscope_plain(
        &["sim", "exec", "--name", &name, "--", "ibnetdiscover"],
        &env,
    );
    assert_eq!(node_lines(&assert_success(&disc)), (2, 2));
    // exec passes the command's exit code through.
    assert_exit(
        &ibscope_plain(
            &["sim", "exec", "--name", &name, "--", "sh", "-c", "exit 7"],
            &env,
        ),
        7,
    );

    // The local switch's port 1, as smpquery reads it.
    let link_state = || {
        let pi = ibscope_plain(
            &[
                "sim", "exec", "--name", &name, "--", "smpquery", "-D", "portinfo", "0", "1",
            ],
            &env,
        );
        field(&assert_success(&pi), "LinkState")
    };
    assert_success(&ibscope_plain(
        &["sim", "fault", "--name", &name, "unlink", "Switch1", "1"],
        &env,
    ));
    assert_eq!(link_state().as_deref(), Some("Down"));
    // A node as ibscope prints it, NAME[PORT], names ibsim's node and port too.
    assert_success(&ibscope_plain(
        &["sim", "fault", "--name", &name, "relink", "Switch1[1]"],
        &env,
    ));
    assert_ne!(link_state().as_deref(), Some("Down"));
    let bad = ibscope_plain(
        &["sim", "fault", "--name", &name, "unlink", "NoSuchNode", "1"],
        &env,
    );
    assert_exit(&bad, 2);
    assert!(
        stderr(&bad).contains("nothing matches \"NoSuchNode\""),
        "{}",
        stderr(&bad)
    );
    let raw = ibscope_plain(
        &["sim", "fault", "--name", &name, "raw", "Dump \"Hca1\""],
        &env,
    );
    assert!(assert_success(&raw).contains("\"Hca1\""));

    // A second `up` with the same name refuses while the first runs.
    assert_exit(
        &ibscope_plain(&["sim", "up", topo, "--name", &name], &env),
        2,
    );

    assert_success(&ibscope_plain(&["sim", "down", "--name", &name], &env));
    assert_all_gone(&pids);
    assert!(!dir.exists(), "`sim down` left {}", dir.display());
    assert_exit(&ibscope_plain(&["sim", "down", "--name", &name], &env), 2);
}

/// A generated XDR fabric with SHARP aggregation nodes: the file keeps 4xXDR for offline
/// use, `sim up` says on stderr that ibsim runs it at HDR, and it does: the live links
/// come up 4xHDR, as ibnetdiscover sees them too. An FDR10 file comes up 4xQDR.
#[test]
fn rates_ibsim_cannot_run_come_up_at_the_nearest_it_knows_and_say_so() {
    let base = temp_dir();
    let base_str = base.path().to_str().unwrap();
    let env = [("IBSCOPE_SIM_DIR", base_str)];
    for (rate, under_ibsim) in [("4xXDR", "4xHDR"), ("4xFDR10", "4xQDR")] {
        let topo = sim_gen(
            base.path(),
            &format!("{rate}.topo"),
            &[
                "fat-tree",
                "--radix",
                "8",
                "--hosts",
                "8",
                "--rate",
                rate,
                "--aggregation-nodes",
            ],
        );
        let offline = assert_success(&ibscope_plain(
            &["--topology", &topo, "links", "--json"],
            &[],
        ));
        let report: serde_json::Value = serde_json::from_str(&offline).unwrap();
        let links = report["links"].as_array().unwrap();
        assert_eq!(links.len(), 8 + 8 + 3, "hosts, uplinks, aggregation nodes");
        assert!(links.iter().all(|l| l["active"] == rate), "{offline}");

        let name = unique_name("rate");
        let _guard = DownOnDrop(base.path().join(&name));
        let up = ibscope_plain(&["sim", "up", &topo, "--name", &name], &env);
        assert_success(&up);
        let note = stderr(&up);
        let speed = |r: &str| r[2..].to_string();
        assert!(
            note.contains(&format!(
                "38 ports the file gives at {} run at {}",
                speed(rate),
                speed(under_ibsim)
            )),
            "{note}"
        );
        let live = assert_success(&ibscope_plain(
            &["sim", "exec", "--name", &name, "--", "ibnetdiscover"],
            &env,
        ));
        let rates: Vec<&str> = live
            .lines()
            .filter(|l| l.starts_with('['))
            .filter_map(|l| l.split_whitespace().last())
            .collect();
        assert_eq!(rates.len(), 38, "{live}");
        assert!(rates.iter().all(|r| *r == under_ibsim), "{live}");
        let ours = assert_success(&ibscope_plain(
            &[
                "sim",
                "exec",
                "--name",
                &name,
                "--",
                &ibscope_bin_str(),
                "links",
                "--json",
            ],
            &env,
        ));
        let report: serde_json::Value = serde_json::from_str(&ours).unwrap();
        let aggregation = report["links"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|l| {
                l["b"]["kind"] == "aggregation-node" || l["a"]["kind"] == "aggregation-node"
            })
            .count();
        assert_eq!(aggregation, 3, "{ours}");
        assert!(
            report["links"]
                .as_array()
                .unwrap()
                .iter()
                .all(|l| l["active"] == under_ibsim),
            "{ours}"
        );
        assert_success(&ibscope_plain(&["sim", "down", "--name", &name], &env));
    }
}

fn ibscope_bin_str() -> String {
    ibscope_bin().to_str().unwrap().to_string()
}
