//! NodeInfo rate of the request engine at several window sizes, against smpquery.
//!
//! Sends `--count` (10,000) directed-route NodeInfo SMPs spread over every node reachable
//! from the local port, with 1, 16 and 64 in flight (1 in flight is the sequential,
//! smpquery-like baseline), then times `--smpquery` (200) runs of the real
//! `smpquery -D nodeinfo 0,1` process.
//!
//! With `--by-depth`: the rate at each directed-route depth instead (every node at that
//! many hops, shortest routes), with `--windows` (default 64,128) in flight and no cap per
//! destination, so what is measured is the transport's cost per hop. `--count` MADs per
//! depth and window.
//!
//! Under the simulator (from a scratch directory: the shim creates ./sys-<pid>):
//!
//! ```text
//! cargo build --release -p ibscope-mad --example nodeinfo_rate
//! REPO=$PWD; cd "$(mktemp -d)"
//! IBSIM_SOCKNAME=bench ibsim -s -n "$REPO/examples/fabrics/net" > ibsim.log 2>&1 & SIM=$!
//! LD_PRELOAD=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so IBSIM_SOCKNAME=bench \
//!   SIM_HOST=Hca1 "$REPO/target/release/examples/nodeinfo_rate" [--count N] [--smpquery N]
//! kill $SIM
//! ```
//!
//! On real hardware drop the environment variables (root, or the umad group, is needed).

// An example reads as one story, step by step: the workspace's function length is
// for the crates' code.
#![allow(clippy::too_many_lines)]

use std::collections::HashSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ibscope_mad::attr::{NodeInfo, NodeType};
use ibscope_mad::engine::{Engine, EngineConfig, Request};
use ibscope_mad::smp::{DrPath, SmpRoute};

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn has_flag(name: &str) -> bool {
    std::env::args().any(|a| a == name)
}

fn list_arg(name: &str, default: &[usize]) -> Vec<usize> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| default.to_vec())
}

fn node_info_request(path: &DrPath) -> Request {
    Request::get::<NodeInfo>(&SmpRoute::Directed(path.clone()), 0)
}

/// One directed route per node reachable from here, a shortest one (breadth-first, one
/// batch per depth, at most `limit` nodes).
fn reachable_nodes(engine: &mut Engine, limit: usize) -> Vec<DrPath> {
    let mut guids = HashSet::new();
    let mut paths = Vec::new();
    let mut frontier = vec![DrPath::local()];
    while !frontier.is_empty() && paths.len() < limit {
        let mut next = Vec::new();
        let batch: Vec<(DrPath, Request)> = frontier
            .drain(..)
            .map(|p| {
                let r = node_info_request(&p);
                (p, r)
            })
            .collect();
        engine.run(batch, |path, result, _| {
            let Ok(Ok(info)) = result.map(|reply| reply.decode::<NodeInfo>()) else {
                return;
            };
            if !guids.insert(info.node_guid) || paths.len() >= limit {
                return;
            }
            let is_switch = info.kind() == NodeType::Switch;
            if is_switch || path.is_empty() {
                let last = if is_switch { info.num_ports } else { 1 };
                for port in 1..=last {
                    // Not back out the way we came in.
                    if !path.is_empty() && port == info.local_port_num {
                        continue;
                    }
                    if let Ok(child) = path.child(port) {
                        next.push(child);
                    }
                }
            }
            paths.push(path);
        });
        frontier = next;
    }
    paths
}

struct Row {
    mode: String,
    in_flight: String,
    mads: usize,
    failed: usize,
    elapsed: Duration,
}

impl Row {
    fn rate(&self) -> f64 {
        self.mads as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

fn main() {
    let count = arg("--count", 10_000);
    let smpquery_runs = arg("--smpquery", 200);
    let config = EngineConfig::default();
    let mut engine = match Engine::open(None, None, config) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("nodeinfo_rate: {e}");
            std::process::exit(2);
        }
    };
    let local = engine.local().clone();
    println!(
        "local port: {} port {} ({}, guid {:#018x}{})",
        local.ca_name,
        local.port_num,
        local.state,
        local.port_guid,
        if local.is_simulator() {
            ", simulator"
        } else {
            ""
        }
    );
    // Measure fixed windows: the full window from the first MAD, no cap per destination.
    engine.set_per_destination(usize::MAX);
    let limit = if has_flag("--by-depth") {
        1 << 20
    } else {
        4096
    };
    let targets = reachable_nodes(&mut engine, limit);
    if targets.is_empty() {
        eprintln!("nodeinfo_rate: not even the local node answers NodeInfo");
        std::process::exit(1);
    }
    println!(
        "{} reachable nodes; {count} NodeInfo per window size",
        targets.len()
    );

    if has_flag("--by-depth") {
        by_depth(
            &mut engine,
            &targets,
            count,
            &list_arg("--windows", &[64, 128]),
        );
        return;
    }

    let mut rows = Vec::new();
    for window in [1usize, 16, 64] {
        engine.set_config(EngineConfig {
            max_outstanding: window,
            ..config
        });
        engine.reset_window(window);
        let requests = (0..count).map(|i| {
            let path = &targets[i % targets.len()];
            ((), node_info_request(path))
        });
        let mut failed = 0usize;
        let start = Instant::now();
        engine.run(requests, |(), result, _| {
            failed += usize::from(result.is_err())
        });
        rows.push(Row {
            mode: "engine".into(),
            in_flight: engine.config().max_outstanding.to_string(),
            mads: count,
            failed,
            elapsed: start.elapsed(),
        });
    }
    let stats = engine.stats();
    // The shim routes replies to the process that registered a class last: close this
    // port before smpquery registers its own agents.
    drop(engine);

    if smpquery_runs > 0 {
        let mut failed = 0usize;
        let start = Instant::now();
        for _ in 0..smpquery_runs {
            let ok = Command::new("smpquery")
                .args(["-D", "nodeinfo", "0,1"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .map(|s| s.success())
                .unwrap_or(false);
            failed += usize::from(!ok);
        }
        rows.push(Row {
            mode: "smpquery process".into(),
            in_flight: "1".into(),
            mads: smpquery_runs,
            failed,
            elapsed: start.elapsed(),
        });
    }

    let sequential = rows[0].rate();
    println!();
    println!(
        "{:<18} {:>9} {:>7} {:>7} {:>10} {:>12} {:>13}",
        "mode", "in flight", "MADs", "failed", "seconds", "MADs/s", "vs window 1"
    );
    for r in &rows {
        println!(
            "{:<18} {:>9} {:>7} {:>7} {:>10.3} {:>12.0} {:>12.2}x",
            r.mode,
            r.in_flight,
            r.mads,
            r.failed,
            r.elapsed.as_secs_f64(),
            r.rate(),
            r.rate() / sequential
        );
    }
    if let Some(sq) = rows.iter().find(|r| r.mode.starts_with("smpquery")) {
        let best = rows
            .iter()
            .filter(|r| r.mode == "engine")
            .map(Row::rate)
            .fold(0.0, f64::max);
        println!();
        println!(
            "smpquery: {:.2} ms per query; best engine window is {:.0}x faster per MAD",
            sq.elapsed.as_secs_f64() * 1000.0 / sq.mads.max(1) as f64,
            best / sq.rate()
        );
    }
    println!(
        "engine totals: sent {} received {} retries {} timeouts {} unmatched {} unroutable {}",
        stats.sent,
        stats.received,
        stats.retries,
        stats.timeouts,
        stats.unmatched,
        stats.unroutable
    );
}

/// NodeInfo rate per directed-route depth: `count` MADs to the nodes at each depth (round
/// robin), at each window size.
fn by_depth(engine: &mut Engine, targets: &[DrPath], count: usize, windows: &[usize]) {
    let deepest = targets.iter().map(DrPath::len).max().unwrap_or(0);
    print!("{:>5} {:>7}", "depth", "nodes");
    for w in windows {
        print!(" {:>12}", format!("MADs/s @{w}"));
    }
    println!();
    let config = engine.config();
    for depth in 1..=deepest {
        let at: Vec<&DrPath> = targets.iter().filter(|p| p.len() == depth).collect();
        if at.is_empty() {
            continue;
        }
        print!("{depth:>5} {:>7}", at.len());
        for &window in windows {
            engine.set_config(EngineConfig {
                max_outstanding: window,
                ..config
            });
            engine.reset_window(window);
            let requests = (0..count).map(|i| ((), node_info_request(at[i % at.len()])));
            let mut failed = 0usize;
            let start = Instant::now();
            engine.run(requests, |(), result, _| {
                failed += usize::from(result.is_err())
            });
            let rate = count as f64 / start.elapsed().as_secs_f64().max(1e-9);
            let mark = if failed > 0 { "*" } else { " " };
            print!(" {rate:>11.0}{mark}");
        }
        println!();
    }
    println!("(* some MADs failed)");
}
