//! The engine against a simulated fabric: a private ibsim on examples/fabrics/net, no SM
//! (directed-route SMPs need no LIDs), compared with smpquery run under the same shim.
//!
//! The engine has to run with libumad2sim preloaded, so each test re-runs this test binary
//! as a child (`child_entry`, selected by IBSCOPE_ENGINE_CHILD) under LD_PRELOAD; the child
//! prints one JSON line per result.
//!
//! Fabric `net` from the client at Hca1 (SIM_HOST): 0 = Hca1, 0,1 = Switch1, 0,1,2 = Hca2,
//! 0,1,3 and 0,1,4 = Switch2; Switch1 ports 5-8 are unconnected.

use std::process::Command;
use std::time::{Duration, Instant};

use ibscope_mad::attr::NodeInfo;
use ibscope_mad::engine::{Engine, EngineConfig, MadError, Request, Response};
use ibscope_mad::smp::{DrPath, SmpFrame, SmpRoute};

const FABRIC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/fabrics/net");
const CHILD_ENV: &str = "IBSCOPE_ENGINE_CHILD";

/// A private ibsim (ibscope-sim's, the harness every simulator test uses), no SM.
struct Sim {
    sim: ibscope_sim::Sim,
}

impl Sim {
    /// A missing simulator fails the test (scripts/install-deps.sh installs it; a silently
    /// skipped transport test would hide a broken CI machine).
    fn start() -> Sim {
        let mut options = ibscope_sim::SimOptions::new(FABRIC);
        options.with_sm = false;
        match ibscope_sim::Sim::start(options) {
            Ok(sim) => Sim { sim },
            Err(e) => panic!("cannot start ibsim (run scripts/install-deps.sh): {e:#}"),
        }
    }

    /// A command run as a client of this simulator, attached at Hca1.
    fn client(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = self.sim.command(program);
        c.env("SIM_HOST", "Hca1");
        c
    }

    /// Run a client to completion, killing it if it takes longer than `limit`.
    fn run(&self, cmd: Command, limit: Duration) -> (bool, String, String) {
        let out = ibscope_sim::run_with_timeout(cmd, limit).unwrap_or_else(|e| panic!("{e:#}"));
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    }

    /// Re-run this test binary as the engine client for `scenario`.
    fn engine_child(&self, scenario: &str, arg: &str) -> Vec<serde_json::Value> {
        let mut cmd = self.client(std::env::current_exe().expect("current exe"));
        cmd.args([
            "--exact",
            "engine_sim::child_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, scenario)
        .env("IBSCOPE_ENGINE_ARG", arg);
        let (ok, stdout, stderr) = self.run(cmd, Duration::from_secs(60));
        assert!(ok, "engine child failed:\n{stdout}\n{stderr}");
        stdout
            .lines()
            .filter_map(|l| l.split_once(MARK).map(|(_, json)| json))
            .map(|l| serde_json::from_str(l).expect("child JSON line"))
            .collect()
    }
}

/// NodeInfo fields the tests compare (IBA 14.2.5.3 offsets).
fn node_info(reply: &Response) -> serde_json::Value {
    let info = reply.decode::<NodeInfo>().unwrap_or_default();
    serde_json::json!({
        "node_type": info.node_type,
        "num_ports": info.num_ports,
        "node_guid": format!("{:#018x}", info.node_guid),
        "port_guid": format!("{:#018x}", info.port_guid),
        "local_port": info.local_port_num,
    })
}

fn dr(text: &str) -> SmpRoute {
    SmpRoute::Directed(DrPath::parse(text).expect("path"))
}

/// Starts each result line: the test harness writes its own text on the same stdout.
const MARK: &str = "@@result ";

fn print(v: serde_json::Value) {
    println!("{MARK}{v}");
}

/// The engine side of each scenario; only does something when run as the child.
#[test]
fn child_entry() {
    let Ok(scenario) = std::env::var(CHILD_ENV) else {
        return;
    };
    let arg = std::env::var("IBSCOPE_ENGINE_ARG").unwrap_or_default();
    let config = EngineConfig {
        max_outstanding: 16,
        timeout: Duration::from_millis(150),
        retries: 3,
    };
    let mut engine = match Engine::open(None, None, config) {
        Ok(e) => e,
        Err(e) => panic!("open: {e}"),
    };
    let local = engine.local().clone();
    print(serde_json::json!({ "local": {
        "ca_name": local.ca_name, "port_num": local.port_num, "state": local.state.to_string(),
        "port_guid": format!("{:#018x}", local.port_guid), "simulator": local.is_simulator(),
        "max_outstanding": engine.config().max_outstanding,
    }}));
    match scenario.as_str() {
        "nodeinfo" => {
            let paths: Vec<String> = arg.split(';').map(str::to_string).collect();
            let requests = paths
                .iter()
                .map(|p| (p.clone(), Request::get::<NodeInfo>(&dr(p), 0)));
            engine.run(requests, |path, result, _| match result {
                Ok(r) => print(serde_json::json!({"path": path, "info": node_info(&r)})),
                Err(e) => print(serde_json::json!({"path": path, "error": e.to_string()})),
            });
        }
        "dead" => {
            let start = Instant::now();
            let result = engine.call(Request::get::<NodeInfo>(&dr(&arg), 0));
            let attempts = match result {
                Err(MadError::Timeout { attempts }) => attempts,
                other => panic!("expected a timeout, got {other:?}"),
            };
            print(serde_json::json!({
                "attempts": attempts,
                "elapsed_ms": start.elapsed().as_millis() as u64,
                "unroutable": engine.stats().unroutable,
            }));
        }
        "silent" => {
            // DrSLID not permissive on a fully directed route: ibsim drops it without a
            // reply, so only the engine's own deadline ends it.
            let mut dropped = Request::get::<NodeInfo>(&dr("0,1"), 0);
            SmpFrame::dr_slid.write(&mut dropped.mad, &1).unwrap();
            // A deadline well above what 2,000 good MADs take even on a loaded machine
            // (about 300 ms seen with eight busy processes on two cores), so the test
            // measures whether the drop blocks them, not the machine's speed.
            engine.set_config(EngineConfig {
                max_outstanding: 16,
                timeout: Duration::from_millis(1000),
                retries: 1,
            });
            let good: usize = arg.parse().unwrap_or(500);
            let paths = ["0", "0,1", "0,1,2", "0,1,3", "0,1,4"];
            let mut batch = vec![(usize::MAX, dropped)];
            batch.extend((0..good).map(|i| (i, Request::get::<NodeInfo>(&dr(paths[i % 5]), 0))));
            let start = Instant::now();
            let mut order = Vec::new();
            let mut good_ok = 0usize;
            let mut dropped_error = String::new();
            let mut good_done_ms = 0u64;
            engine.run(batch, |i, result, _| {
                order.push(i);
                if i == usize::MAX {
                    dropped_error = format!("{:?}", result.err());
                } else if result.is_ok() {
                    good_ok += 1;
                    good_done_ms = start.elapsed().as_millis() as u64;
                }
            });
            print(serde_json::json!({
                "good_ok": good_ok,
                "dropped_last": order.last() == Some(&usize::MAX),
                "dropped_error": dropped_error,
                "good_done_ms": good_done_ms,
                "total_ms": start.elapsed().as_millis() as u64,
                "stats": engine.stats(),
            }));
        }
        "follow" => {
            // Breadth-first from the local node: each NodeInfo of a switch queues NodeInfo
            // of every neighbour port; the pushed follow-ups must run in the same batch.
            let mut seen = std::collections::BTreeMap::new();
            let root = (DrPath::local(), Request::get::<NodeInfo>(&dr("0"), 0));
            engine.run([root], |path: DrPath, result, out| {
                let Ok(r) = result else { return };
                let info = node_info(&r);
                let guid = info["node_guid"].as_str().unwrap_or_default().to_string();
                let first = !seen.contains_key(&guid);
                seen.entry(guid).or_insert(path.to_string());
                let is_switch = info["node_type"] == 2;
                if first && (is_switch || path.is_empty()) {
                    let ports = info["num_ports"].as_u64().unwrap_or(0) as u8;
                    let (lo, hi) = if is_switch { (1, ports) } else { (1, 1) };
                    for p in lo..=hi {
                        if let Ok(child) = path.child(p) {
                            let req =
                                Request::get::<NodeInfo>(&SmpRoute::Directed(child.clone()), 0);
                            out.push((child, req));
                        }
                    }
                }
            });
            print(serde_json::json!({ "nodes": seen, "stats": engine.stats() }));
        }
        other => panic!("unknown scenario {other}"),
    }
}

/// smpquery's text output, as the comparable fields.
fn smpquery_node_info(sim: &Sim, path: &str) -> serde_json::Value {
    let mut cmd = sim.client("smpquery");
    cmd.args(["-D", "nodeinfo", path]);
    let (ok, out, err) = sim.run(cmd, Duration::from_secs(20));
    assert!(ok, "smpquery -D nodeinfo {path} failed: {out}{err}");
    let field = |name: &str| {
        out.lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k == name).then(|| v.trim_start_matches('.').trim().to_string())
            })
            .unwrap_or_else(|| panic!("no {name} in smpquery output:\n{out}"))
    };
    let node_type = match field("NodeType").as_str() {
        "Channel Adapter" => 1,
        "Switch" => 2,
        "Router" => 3,
        t => panic!("unexpected node type {t}"),
    };
    serde_json::json!({
        "node_type": node_type,
        "num_ports": field("NumPorts").parse::<u8>().expect("NumPorts"),
        "node_guid": field("Guid"),
        "port_guid": field("PortGuid"),
        "local_port": field("LocalPort").parse::<u8>().expect("LocalPort"),
    })
}

#[test]
fn dr_nodeinfo_matches_smpquery() {
    let sim = Sim::start();
    let paths = ["0", "0,1", "0,1,2", "0,1,3", "0,1,4", "0,1,3,4"];
    // Reference first: under the shim, replies go to the process that registered a class
    // last, so the two clients must not overlap.
    let expected: Vec<_> = paths.iter().map(|p| smpquery_node_info(&sim, p)).collect();
    let lines = sim.engine_child("nodeinfo", &paths.join(";"));
    let local = &lines[0]["local"];
    assert_eq!(local["ca_name"], "ibsim0");
    assert_eq!(local["port_num"], 1);
    assert_eq!(local["port_guid"], expected[0]["port_guid"]);
    // No SM runs: the link is up but not configured.
    assert_eq!(local["state"], "Initialize");
    assert_eq!(local["simulator"], true);
    assert_eq!(local["max_outstanding"], 16);
    let mut got = std::collections::HashMap::new();
    for l in &lines[1..] {
        let path = l["path"].as_str().expect("path").to_string();
        assert!(l.get("error").is_none(), "{path}: {l}");
        got.insert(path, l["info"].clone());
    }
    for (p, want) in paths.iter().zip(&expected) {
        assert_eq!(got.get(*p), Some(want), "NodeInfo of {p}");
    }
    // Sanity on the fabric itself, so a silently empty comparison cannot pass.
    assert_eq!(expected[1]["node_type"], 2);
    assert_eq!(expected[2]["node_type"], 1);
    assert_ne!(expected[0]["node_guid"], expected[2]["node_guid"]);
}

#[test]
fn dead_port_times_out_quickly() {
    let sim = Sim::start();
    // Switch1 port 5 has no link: the shim hands the request back at once (status 110),
    // and every attempt is resent immediately rather than after the 150 ms deadline.
    let lines = sim.engine_child("dead", "0,1,5");
    let r = &lines[1];
    assert_eq!(r["attempts"], 4, "{r}");
    assert_eq!(r["unroutable"], 4, "{r}");
    assert!(r["elapsed_ms"].as_u64().unwrap() < 150, "{r}");
}

#[test]
fn silent_drop_waits_its_deadline_without_blocking_others() {
    let sim = Sim::start();
    let lines = sim.engine_child("silent", "2000");
    let r = &lines[1];
    assert_eq!(r["good_ok"], 2000, "{r}");
    assert_eq!(r["dropped_last"], true, "{r}");
    assert_eq!(r["dropped_error"], "Some(Timeout { attempts: 2 })", "{r}");
    // Two attempts of 1 s each: it went first, before any round trip was measured, and a
    // last attempt always waits the whole timeout. The good ones were done well within it.
    let total = r["total_ms"].as_u64().unwrap();
    assert!((1995..6000).contains(&total), "{r}");
    assert!(r["good_done_ms"].as_u64().unwrap() < 1000, "{r}");
    assert_eq!(r["stats"]["timeouts"], 1, "{r}");
    // One resend of the dropped request; on a busy host a good request may be resent too
    // when its reply is later than the measured round trips foretold. Each such resend
    // that went out is one more MAD sent and one more reply, which matches nothing.
    let stat = |k: &str| r["stats"][k].as_u64().unwrap();
    assert!(stat("retries") >= 1, "{r}");
    assert_eq!(stat("sent"), 2002 + stat("unmatched"), "{r}");
    assert_eq!(stat("received"), 2000 + stat("unmatched"), "{r}");
}

#[test]
fn follow_ups_from_callback_discover_whole_fabric() {
    let sim = Sim::start();
    let lines = sim.engine_child("follow", "");
    let r = &lines[1];
    let nodes = r["nodes"].as_object().expect("nodes");
    // Hca1, Switch1, Hca2, Switch2.
    assert_eq!(nodes.len(), 4, "{r}");
    let paths: Vec<&str> = nodes.values().filter_map(|v| v.as_str()).collect();
    for p in ["0", "0,1", "0,1,2"] {
        assert!(paths.contains(&p), "{p} missing in {r}");
    }
    // Switch2 hangs off two parallel links; whichever reply came first names it.
    assert!(paths.contains(&"0,1,3") || paths.contains(&"0,1,4"), "{r}");
    // Ports 5-8 of Switch1 and the unlinked ones of Switch2 came back unroutable.
    assert!(r["stats"]["unroutable"].as_u64().unwrap() > 0, "{r}");
}
