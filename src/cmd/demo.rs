//! `ibscope demo`: a bundled simulated fabric with realistic faults, ibscope attached.

use std::process::{Command, ExitCode, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::cli::Global;
use ibscope_mad::runtime_dir::RuntimeDir;
use ibscope_sim::{Sim, SimOptions};

/// The demo fabric: a GPU cluster of 8 servers with 8 HCAs each on 8 rails (a leaf per
/// rail, 8 spines), named as rdma-ndd names them ("gpu-0001 mlx5_0").
pub const DEMO_TOPOLOGY: &str = include_str!("../../examples/fabrics/gpu-cluster.topo");

/// The faults the demo plants, so tests and the README can name them.
pub mod faults {
    /// An inter-switch link at 1xHDR instead of 4xHDR (set in the topology file, both ends).
    pub const DEGRADED_UPLINK: (&str, u8) = ("R1L001", 9);
    /// A port with symbol errors (a marginal cable).
    pub const SYMBOL_ERRORS: (&str, u8, u64) = ("R4L001", 4, 1234);
    /// A flapping link: its LinkDowned counter is raised, and in interactive mode the link
    /// really goes down and up every few seconds.
    pub const FLAPPING: (&str, u8, u64) = ("R7L001", 2, 7);
    /// A server's HCA cabled to another rail's leaf (in the topology file): gpu-0003's
    /// rail-5 HCA on rail 6's leaf.
    pub const CROSS_RAIL: (&str, u8) = ("gpu-0003", 5);
    /// A rail with no cable on one server (in the topology file): gpu-0006's rail 2.
    pub const RAIL_DOWN: (&str, u8) = ("gpu-0006", 2);
}

/// Run ibscope against a bundled simulated GPU cluster (ibsim + OpenSM): 8 servers with 8
/// HCAs each on 8 rails, with the faults operators meet: gpu-0003's rail-5 HCA cabled to
/// rail 6's leaf, rail 2 of gpu-0006 down, an inter-switch link at 1x (R1L001 port 9),
/// symbol errors on R4L001 port 4, and a link that flaps while the demo runs (R7L001 port
/// 2). Opens the TUI (the Hosts view shows the rail grid); everything stops on exit.
///
/// With --once: run `ibscope check` on it once, print the report and exit with its code.
///
/// Examples:
///   ibscope demo                  # the TUI on the faulty fabric; q quits
///   ibscope demo --once           # one health report, exit 1 (the planted findings)
///   ibscope demo --once --json | jq '.findings[].kind'
#[derive(Debug, clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Print one health report and exit instead of opening the TUI.
    #[arg(long)]
    pub once: bool,
    /// With --once: the report as JSON.
    #[arg(long, requires = "once")]
    pub json: bool,
}

pub fn run(_g: &Global, a: &Args) -> Result<ExitCode> {
    // A stop signal: the waits for the simulator fail, or the child is told (see
    // `run_child`); either way Drop stops ibsim and OpenSM and removes the directories.
    crate::signals::install(crate::signals::STOP_SIGNALS, crate::signals::Second::Wait);
    ibscope_sim::interrupt_waits_when(|| crate::signals::received().is_some());
    let dir = RuntimeDir::create("demo")?;
    let topo = dir.path().join("demo.topo");
    std::fs::write(&topo, DEMO_TOPOLOGY)?;
    eprintln!(
        "starting the demo fabric (ibsim + OpenSM): 8 GPU servers x 8 rails, 16 switches ..."
    );
    let sim = Arc::new(Sim::start(SimOptions::new(topo)).context("starting the simulator")?);
    plant_counters(&sim)?;
    eprintln!(
        "planted: {} rail {} on another rail's leaf, {} rail {} down, degraded uplink {}[{}], \
         symbol errors on {}[{}], flapping link {}[{}]",
        faults::CROSS_RAIL.0,
        faults::CROSS_RAIL.1,
        faults::RAIL_DOWN.0,
        faults::RAIL_DOWN.1,
        faults::DEGRADED_UPLINK.0,
        faults::DEGRADED_UPLINK.1,
        faults::SYMBOL_ERRORS.0,
        faults::SYMBOL_ERRORS.1,
        faults::FLAPPING.0,
        faults::FLAPPING.1
    );
    let exe = std::env::current_exe().context("locating the ibscope binary")?;
    // The children run in the simulator's client directory (its state directory), where
    // the shim keeps their fake sysfs.
    let status = if a.once {
        let mut cmd = sim.command(&exe);
        cmd.arg("check");
        if a.json {
            cmd.arg("--json");
        }
        run_child(cmd).context("running ibscope check")?
    } else {
        let stop = Arc::new(AtomicBool::new(false));
        let flapper = {
            let (sim, stop) = (Arc::clone(&sim), Arc::clone(&stop));
            std::thread::spawn(move || flap(&sim, &stop))
        };
        let mut cmd = sim.command(&exe);
        cmd.args(["tui", "--interval", "2"]);
        let status = run_child(cmd).context("running ibscope tui");
        stop.store(true, Ordering::SeqCst);
        let _ = flapper.join();
        status?
    };
    drop(sim);
    drop(dir);
    Ok(ExitCode::from(
        status.code().unwrap_or(2).clamp(0, 255) as u8
    ))
}

/// Set the counters the demo plants on its fabric: the symbol errors and the flapping
/// link's LinkDowned count (the other faults are in the topology file).
pub fn plant_counters(sim: &Sim) -> Result<()> {
    let (node, port, value) = faults::SYMBOL_ERRORS;
    sim.set_counter(node, port, "SymbolErrorCounter", value)?;
    let (node, port, value) = faults::FLAPPING;
    sim.set_counter(node, port, "LinkDownedCounter", value)?;
    Ok(())
}

/// How long a child told of a stop signal gets before it is killed.
const CHILD_GRACE: Duration = Duration::from_secs(5);

/// Run `cmd` to its end; a stop signal that reaches this process (`kill`, the terminal
/// closing) is passed on to it, which then stops as it would on its own.
fn run_child(mut cmd: Command) -> std::io::Result<ExitStatus> {
    let mut child = cmd.spawn()?;
    let mut told: Option<Instant> = None;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        match (told, crate::signals::received()) {
            (None, Some(signal)) => {
                // SAFETY: kill(2) on our own child, not yet reaped.
                unsafe { libc::kill(child.id() as libc::pid_t, signal) };
                told = Some(Instant::now());
            }
            (Some(at), _) if at.elapsed() > CHILD_GRACE => {
                let _ = child.kill();
                return child.wait();
            }
            _ => {}
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Take the flapping link down and up, with the SM told each time, until asked to stop.
fn flap(sim: &Sim, stop: &AtomicBool) {
    let (node, port, _) = faults::FLAPPING;
    let mut down = false;
    while !stop.load(Ordering::SeqCst) {
        for _ in 0..80 {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let r = if down {
            sim.relink(node, port)
        } else {
            sim.unlink(node, port)
        };
        if r.is_err() {
            return;
        }
        down = !down;
        let _ = sim.resweep();
    }
    if down {
        let _ = sim.relink(node, port);
    }
}
