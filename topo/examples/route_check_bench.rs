//! Times `routing::check` (and `load`) on an in-memory 3-level fat tree with min-hop LFTs.
//!
//! `cargo run --release -p ibscope-topo --example route_check_bench -- [hosts] [radix] [out.json]`
//! With `out.json` the routed fabric is also saved as a snapshot, for timing
//! `ibscope --topology out.json route check` end to end (bench/route_check.sh).
//! (defaults: 8,100 hosts, radix 36: 1,224 switches in pods of leaves and aggregation
//! switches under a core layer).

use std::time::Instant;

use ibscope_mad::attr::link::{Rate, Speed, Width};
use ibscope_topo::gen::{bring_up, fat_tree, FatTreeSpec};
use ibscope_topo::routing::{check, compute_minhop_lfts, load, CheckOptions, Pattern};
use ibscope_topo::{ibnd, End};

fn main() {
    let mut args = std::env::args().skip(1);
    let hosts: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(8100);
    let radix: u8 = args.next().and_then(|a| a.parse().ok()).unwrap_or(36);
    let snapshot: Option<String> = args.next();

    let t = Instant::now();
    let text = fat_tree(&FatTreeSpec::new(3, radix, hosts)).expect("generate");
    let mut fabric = ibnd::parse(&text).expect("parse");
    // Topology files carry no LIDs or states: number switches, then hosts; all Active.
    bring_up(&mut fabric, Rate::new(Width::X4, Speed::Hdr));
    let switches = fabric.switches().count();
    println!(
        "fabric: {} nodes, {} switches, {} links, built in {:.2?}",
        fabric.node_count(),
        switches,
        fabric.link_count(),
        t.elapsed()
    );

    let t = Instant::now();
    compute_minhop_lfts(&mut fabric);
    println!("minhop LFTs: {:.2?}", t.elapsed());
    if let Some(path) = &snapshot {
        let text = serde_json::to_string(&fabric.to_file()).expect("serialize");
        std::fs::write(path, text).expect("write snapshot");
        println!("snapshot written to {path}");
    }

    let t = Instant::now();
    let report = check(&fabric, &CheckOptions::default());
    let took = t.elapsed();
    println!(
        "check: {:.2?}: {} sources, {} destinations, {} pairs ({} ok), max hops {}, \
         {} CDG channels / {} dependencies, {} credit loops, {} LFT-unbalanced switches",
        took,
        report.sources,
        report.destinations,
        report.pairs,
        report.pairs_ok,
        report.max_hops,
        report.cdg.channels,
        report.cdg.dependencies,
        report.credit_loops_found,
        report.balance.lft_unbalanced.len()
    );
    for s in &report.balance.by_layer {
        println!(
            "  layer {:?} {:?}: {} ports, lids {}..{}, routes {}..{} (mean {:.1})",
            s.layer,
            s.direction,
            s.ports,
            s.lids_min,
            s.lids_max,
            s.routes_min,
            s.routes_max,
            s.routes_mean
        );
    }

    let hosts: Vec<End> = fabric
        .nodes()
        .filter(|(_, n)| !n.is_switch())
        .map(|(id, _)| End { node: id, port: 1 })
        .collect();
    let t = Instant::now();
    let ring = load(&fabric, Pattern::Ring, &hosts).expect("load");
    println!(
        "load ring over {} hosts: {:.2?}, max {} flows per link, busbw {:?} Gb/s",
        hosts.len(),
        t.elapsed(),
        ring.max_flows_per_link,
        ring.ring_allreduce_busbw_gbps
    );
}
