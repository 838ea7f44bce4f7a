//! `ibscope tui` driven in tmux against the simulated fabric: every view by key, known names
//! on screen, the degraded-link count `ibscope check` reports, an injected error counter on
//! the right port, an Unlink showing up in Events, and a clean quit.

use crate::common;

use std::time::{Duration, Instant};

use common::tmux::Tmux;
use common::*;

/// N of "… links  N degraded, M down" on the overview.
fn header_degraded_count(screen: &str) -> usize {
    let line = screen
        .lines()
        .find(|l| l.contains(" links  ") && l.contains(" degraded, "))
        .unwrap_or_else(|| panic!("no count line:\n{screen}"));
    let before = &line[..line.find(" degraded, ").unwrap()];
    before
        .split_whitespace()
        .last()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no degraded count in {line:?}"))
}

#[test]
fn tui_shows_every_view_counters_and_unlink_events() {
    let sim = sim("demo.topo");
    sim.set_counter("L0002", 3, "SymbolErrorCounter", 1234)
        .expect("inject counter");
    let env: String = sim.env().iter().map(|(k, v)| format!("{k}={v} ")).collect();
    let marker = sim.client_dir().join("tui-exit");
    let script = format!(
        // The exit code goes to a side file first: the test must not read the marker between
        // the shell creating it and writing the code into it.
        "cd {dir} && env {env} {bin} tui --interval 1; echo $? > {marker}.part; \
         mv {marker}.part {marker}; sleep 60",
        dir = sim.client_dir().display(),
        bin = ibscope_bin().display(),
        marker = marker.display()
    );
    let tmux = Tmux::start("ibscope-tui", &script);
    let long = Duration::from_secs(20);
    // Overview: summary, layers and the planted findings.
    let overview = tmux.wait_for(
        &[
            "6 switches, 16 HCAs on 16 servers",
            "leaf-0001",
            "SymbolErrorCounter = 1234",
        ],
        long,
    );
    // The header counts the degraded links `ibscope check` reports on the same fabric: the
    // planted uplink, which ibsim narrows on both ends so only the fabric norm sees it.
    let shown = header_degraded_count(&overview);
    let check = ibscope(&sim, &["check", "--json"]);
    let text = assert_exit(&check, 1);
    let report: serde_json::Value =
        serde_json::from_str(&text[text.find('{').expect("JSON report")..]).expect("JSON");
    let degraded_findings = report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["kind"] == "degraded-link")
        .count();
    assert_eq!(
        shown, degraded_findings,
        "TUI header vs check --json:\n{overview}\n{text}"
    );
    assert_eq!(shown, 1, "the planted uplink:\n{overview}");
    tmux.keys("2");
    tmux.wait_for(&["Linked", "gpu-node-0001 mlx5_0"], long);
    tmux.keys("3");
    // The degraded uplink sorts first, so it is selected and its reason shows.
    tmux.wait_for(
        &[
            " Links: ",
            "1 degraded",
            "1xHDR",
            "DEGR",
            "degraded: 1xHDR below fabric norm 4xHDR",
        ],
        long,
    );
    tmux.keys("4");
    // Wait for the Counters view itself (the Links view shows the same port names).
    let deadline = Instant::now() + long;
    loop {
        let screen = tmux.screen();
        let row = screen
            .lines()
            .find(|l| l.contains("leaf-0002:MQM8790/U1[3]"))
            .map(str::to_string);
        if screen.contains("Counters:") && row.as_deref().is_some_and(|r| r.contains("1234")) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "Counters view never showed 1234 errors on leaf-0002[3]:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    tmux.keys("5");
    tmux.wait_for(&[" Path "], long);
    tmux.keys("6");
    tmux.wait_for(&["Events (", "first snapshot"], long);
    sim.unlink("L0003", 7).expect("unlink");
    tmux.wait_for(&["link down", "leaf-0003:MQM8790/U1[7]"], long);
    tmux.keys("?");
    std::thread::sleep(Duration::from_millis(300));
    tmux.keys("Escape");
    tmux.keys("q");
    let deadline = Instant::now() + long;
    while !marker.exists() {
        assert!(
            Instant::now() < deadline,
            "tui did not quit:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(std::fs::read_to_string(&marker).unwrap().trim(), "0");
    // The terminal is restored: the shell's screen is back, no alternate-screen leftovers.
    let after = tmux.screen();
    assert!(
        !after.contains("1 Overview"),
        "UI still drawn after quit:\n{after}"
    );
}

/// A link taken down and up twice while the UI watches: link-flapping among the overview's
/// findings, and every change in the journal `tui --journal` writes.
#[test]
fn tui_finds_a_flapping_link_and_journals_it() {
    let sim = sim("demo.topo");
    let env: String = sim.env().iter().map(|(k, v)| format!("{k}={v} ")).collect();
    let journal = sim.client_dir().join("events.jsonl");
    let script = format!(
        "cd {dir} && env {env} {bin} tui --interval 0.5 --journal {journal}; sleep 60",
        dir = sim.client_dir().display(),
        bin = ibscope_bin().display(),
        journal = journal.display()
    );
    let tmux = Tmux::start("ibscope-tui-flap", &script);
    let long = Duration::from_secs(30);
    tmux.wait_for(&["6 switches, 16 HCAs on 16 servers"], long);
    let wait_for = |kind: &str, n: usize| {
        wait_for_journal(&journal, kind, n, long, || tmux.screen());
    };
    for bounce in 1..=2 {
        sim.unlink("L0003", 7).expect("unlink");
        sim.resweep().unwrap();
        wait_for("link-down", bounce);
        sim.relink("L0003", 7).expect("relink");
        sim.resweep().unwrap();
        wait_for("link-up", bounce);
    }
    // The overview lists findings by severity and message (the kind is the message's).
    let screen = tmux.wait_for(&["went down 2 times within 10m"], long);
    assert!(screen.contains("leaf-0003"), "{screen}");
    tmux.keys("q");
    // A later session starts its Events view with the journal's events.
    let again = Tmux::start("ibscope-tui-journal", &script);
    again.wait_for(&["6 switches, 16 HCAs on 16 servers"], long);
    again.keys("6");
    let events = again.wait_for(&["journal: ", "link down"], long);
    assert!(events.contains("leaf-0003:MQM8790/U1\"[7]"), "{events}");
    again.keys("q");
}
