//! The input of bench/nccl_log.sh: a rail-optimised fabric of SERVERS x GPUS HCAs with
//! min-hop LFTs, saved as a JSON snapshot, and a generated NCCL_DEBUG=INFO log of a job on
//! every GPU of it (CHANNELS channels).
//!
//!   cargo run --release -p ibscope-nccl --example nccl_log_bench -- SERVERS GPUS CHANNELS FABRIC.json JOB.log

use std::time::Instant;

use ibscope_mad::attr::link::{Rate, Speed, Width};
use ibscope_nccl::synthetic::{self, Job};
use ibscope_topo::gen::{bring_up, rails, RailsSpec};
use ibscope_topo::routing::compute_minhop_lfts;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number =
        |i: usize, default: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (servers, gpus, channels) = (number(0, 512), number(1, 8), number(2, 32));
    let (Some(fabric_path), Some(log_path)) = (args.get(3), args.get(4)) else {
        eprintln!("usage: nccl_log_bench SERVERS GPUS CHANNELS FABRIC.json JOB.log");
        std::process::exit(2);
    };
    let t = Instant::now();
    let text = rails(&RailsSpec::new(servers, gpus as u8, 128)).expect("generate");
    let mut fabric = ibscope_topo::ibnd::parse(&text).expect("parse");
    bring_up(&mut fabric, Rate::new(Width::X4, Speed::Ndr));
    compute_minhop_lfts(&mut fabric);
    std::fs::write(
        fabric_path,
        serde_json::to_string(&fabric.to_file()).expect("serialize"),
    )
    .expect("write the snapshot");
    println!(
        "fabric: {} nodes, {} links, routed in {:.2?}",
        fabric.node_count(),
        fabric.link_count(),
        t.elapsed()
    );
    let mut job = Job::new(servers, gpus as u32);
    job.channels = channels as u32;
    let log = synthetic::log_text(&job);
    std::fs::write(log_path, &log).expect("write the log");
    println!(
        "log: {} ranks, {} channels, {} lines, {:.1} MB",
        servers * gpus,
        channels,
        log.lines().count(),
        log.len() as f64 / 1e6
    );
}
