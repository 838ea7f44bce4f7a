//! Pacing under packet loss on the simulated fabric: a lossy switch (ibsim's console
//! `Error "node"[port] <percent>`: that share of the MADs through the port is dropped) must
//! make ibscope slow down (its window is cut, as the engine's trace shows), finish complete
//! (the same fabric as without loss), and not hammer (MADs sent per MAD answered stays near
//! what the loss itself costs).

use crate::common;

use common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The `# engine key value ...` line of a MAD trace, as numbers by key.
fn engine_totals(trace: &str) -> std::collections::HashMap<String, u64> {
    let line = trace
        .lines()
        .find_map(|l| l.strip_prefix("# engine "))
        .expect("the trace has the engine's totals");
    let words: Vec<&str> = line.split_whitespace().collect();
    words
        .chunks(2)
        .filter_map(|kv| Some((kv[0].to_string(), kv.get(1)?.parse().ok()?)))
        .collect()
}

/// In-flight counts of the trace's samples.
fn in_flight_samples(trace: &str) -> Vec<u64> {
    trace
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse().ok())
        .collect()
}

fn fabric_of(json: &Value) -> (BTreeSet<String>, usize) {
    let nodes = json["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|n| n["guid"].to_string())
        .collect();
    (nodes, json["links"].as_array().expect("links").len())
}

/// Discover with a trace; (snapshot, trace text, wall time).
fn traced_discovery(sim: &Sim, dir: &std::path::Path, label: &str) -> (Value, String, Duration) {
    let trace = dir.join(format!("{label}.trace"));
    let mut cmd = sim.command(ibscope_bin());
    cmd.args(["discover", "--format", "json"])
        .env("IBSCOPE_MAD_TRACE", &trace);
    let t = Instant::now();
    let out = run_with_timeout(cmd, Duration::from_secs(60));
    let took = t.elapsed();
    let json = serde_json::from_str(&assert_success(&out)).unwrap();
    let text = std::fs::read_to_string(&trace).expect("trace written at exit");
    (json, text, took)
}

#[test]
fn loss_slows_ibscope_down_and_it_finishes_complete_without_hammering() {
    let sim = sim("fat-tree-2l-64.topo");
    let dir = temp_dir();
    let (clean, clean_trace, clean_took) = traced_discovery(&sim, dir.path(), "clean");
    let clean_totals = engine_totals(&clean_trace);
    // Without loss a cut comes only from a reply later than its deadline (on a loaded
    // machine a reply can come after its resend went out), and the late reply takes the
    // last cut back. The undo has one level: of two such cuts in a row the first stands
    // (CI saw 2 cuts, 1 undone, 72 late replies, on a clean fabric under the test suite's
    // load). So: no late reply, no cut; late replies and cuts, some cut taken back.
    if clean_totals["late_replies"] == 0 {
        assert_eq!(clean_totals["window_cuts"], 0, "{clean_trace}");
    } else if clean_totals["window_cuts"] > 0 {
        assert!(clean_totals["window_cuts_undone"] > 0, "{clean_trace}");
    }
    assert_eq!(clean_totals["timeouts"], 0);

    // A fifth of the MADs through every port of one leaf are dropped.
    for port in 1..=36 {
        sim.set_error_rate("L0002", port, 20, None).unwrap();
    }
    let (lossy, trace, took) = traced_discovery(&sim, dir.path(), "lossy");
    let t = engine_totals(&trace);
    eprintln!("clean: {clean_took:?}, {clean_totals:?}\nlossy: {took:?}, {t:?}");

    // Complete: the same nodes and links as without loss.
    assert_eq!(
        fabric_of(&lossy),
        fabric_of(&clean),
        "discovery under loss missed something"
    );
    assert_eq!(lossy["report"]["complete"], true, "{}", lossy["report"]);

    // Slowed down: losses were seen, the window was cut below where it had been.
    assert!(t["retries"] > 0, "the loss did not reach ibscope: {t:?}");
    assert!(
        t["window_cuts"] > t["window_cuts_undone"],
        "no cut stood: {t:?}"
    );
    assert!(t["window_low"] < t["window_high"], "{t:?}");
    // And it shows in the samples: fewer in flight at the lowest than at the highest.
    let flight = in_flight_samples(&trace);
    assert!(flight.iter().max() > flight.iter().filter(|&&f| f > 0).min());

    // Not hammered: every MAD sent beyond the clean run's is a resend, a resend per loss
    // at most, and 20% loss (on the way there or back) costs at most 1 / (1 - 0.36) = 1.56
    // attempts per MAD through that leaf; the whole sweep stays well under that.
    let sent = t["sent"] as f64;
    let answered = (t["received"] - t["unroutable"]) as f64;
    assert!(
        sent / answered < 1.56,
        "{sent} sent for {answered} answered"
    );
    assert!(sent < clean_totals["sent"] as f64 * 1.56, "{t:?}");
    // Resends are counted against this run's own first attempts: under loss discovery
    // may reach a node by another path, so the clean run's count of first sends is no
    // baseline (it differed by 10 in one CI run and the comparison failed).
    let first_attempts = t["sent"].saturating_sub(t["retries"]);
    assert!(
        t["retries"] as f64 <= first_attempts as f64 * 0.56 + t["late_replies"] as f64,
        "{t:?}"
    );
    // Bounded in time: a resend waits the measured round trip (doubled per resend), not
    // the 200 ms timeout; only a request's last attempt waits that long.
    assert!(took < Duration::from_secs(30), "{took:?}");
}
