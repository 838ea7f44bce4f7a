//! ibscope's own cost at scale, without a simulator: one operation on a generated fabric
//! answered in process by `ibscope_topo::responder`. Run by bench/scale.sh, which runs
//! each (fabric, size, operation) in a fresh process and tabulates the lines printed here.
//!
//!   scale --family fat-tree|rails --hosts N --op OP [--latency-us U] [--loss P] [--window W]
//!
//! Fabrics: `fat-tree` is 3-level fat trees of radix 64; `rails` is a rail-optimised
//! fabric with 8 rails, every host's 8 HCAs (mlx5_0..7) on 8 planes, each plane a 3-level
//! fat tree of radix 64. One subnet holds at most 49,151 LIDs, so a fabric of more HCAs is
//! several subnets (planes), as real ones of that size are: rails are always 8 planes, a fat
//! tree of more than 25,000 HCAs is split into planes of at most 25,000. One process handles
//! every plane through its own engine (one local HCA per plane, as on a GPU host). What
//! an operation made is kept or dropped as its command does: `discover` and `counters`
//! drop each plane's result before the next plane (as `-C all` writes each fabric, then
//! frees it), `check` and `route-check` keep them and free them all at the end, and the
//! time to free is measured with the rest (a one-shot command's destructors run before it
//! exits); `tui` and `serve` hold every plane's result, as they do until the next sweep.
//!
//! Operations (setup, not measured: generating the fabric and, for the operations that need
//! one, a first discovery):
//! - `discover`: discovery of every plane;
//! - `check`: what `ibscope check` does: discovery, links, counters screened by all-ports
//!   sums, the SM;
//! - `counters`: what `ibscope counters` does: discovery, then every port's PortCounters
//!   and PortCountersExtended, and its JSON written as `counters --format json` writes it;
//! - `route-check`: the route check of every plane (LFTs from min-hop routing);
//! - `tui`: the TUI's snapshot preparation of a second sweep (the snapshot from discovery
//!   and counters, then derived rows, summary and events against the first);
//! - `serve`: what a sweeper of `serve` does with a sweep to have the /metrics page
//!   ready: the page written (`write_fabric_page`) into the exporter's `PageWriter`, which
//!   compresses it as it comes, and held as `serve` holds it (compressed, in memory);
//! - `serve-errors`: the same with `--counters errors` (the page that scales: error
//!   counters, their breakdowns, link, node and sweep families);
//! - `serve-render`: the render alone, written to nothing.
//!
//! Printed: one line of `key=value`: cpu_s (the process's CPU time during the operation
//! less the responder's own: building replies and waiting out their latency, and the
//! clock reads timing that, which fall outside what they time: clocks_s, one read's
//! cost, calibrated at the start, per timed call), wall_s,
//! rss_mib (peak RSS during the operation), base_mib (RSS before it: the responder's
//! model and the setup), mads, out_mib (the text `counters` or `serve` produced), planes,
//! gzip_mib (the compressed bytes of `serve` and `serve-errors`), and for `discover` under
//! latency the ideal time `mads x latency / window` and the ratio to it.
//!
//! `--out FILE` also writes what the operation produced, outside the measured time (the
//! JSON of `counters` and `route-check`, serve's pages, the snapshot `discover` found),
//! every plane's after the other,
//! so that a change meant to be faster can be shown to print the same bytes (`cmp`).
//! With it, `counters` makes its JSON as one string to keep (more memory and time than
//! without, where it is written to /dev/null through a buffer as the command writes it).

// A benchmark reads as one story, step by step: the workspace's function length is
// for the crates' code.
#![allow(clippy::too_many_lines)]

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use ibscope::settings::CounterFamilies;
use ibscope_exporter::page::PageWriter;
use ibscope_mad::engine::{Engine, EngineConfig};
use ibscope_topo::counters::{self, Thresholds};
use ibscope_topo::discover::{discover, DiscoverOptions};
use ibscope_topo::export::prometheus::{
    write_fabric_page, PageLabels, PageStats, PortFilter, ScrapeErrors,
};
use ibscope_topo::findings::{self, CounterReads, Live};
use ibscope_topo::gen::{fat_tree, FatTreeSpec};
use ibscope_topo::health::HealthOptions;
use ibscope_topo::responder::{FabricModel, FabricPort, ResponderOptions, ResponderStats};
use ibscope_topo::routing::{self, CheckOptions};
use ibscope_topo::Fabric;
use ibscope_tui as tui;

const RADIX: u8 = 64;
const MAX_PLANE_HOSTS: usize = 25_000;
const RAILS: usize = 8;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn usage() -> ! {
    eprintln!("usage: scale --family fat-tree|rails --hosts N --op discover|check|counters|route-check|tui|serve|serve-errors|serve-render [--latency-us U] [--loss P] [--window W] [--out FILE]");
    std::process::exit(2)
}

/// One plane: its generated fabric (kept only for the route check) and its engine.
struct Plane {
    fabric: Option<Fabric>,
    engine: Engine<FabricPort>,
}

/// LIDs as an SM would give them: one per switch, one per CA port, in node order.
fn assign_lids(fabric: &mut Fabric) {
    let ids: Vec<_> = fabric.nodes().map(|(id, _)| id).collect();
    let mut next = 1u16;
    for id in ids {
        let node = fabric.node_mut(id);
        if node.is_switch() {
            for p in &mut node.ports {
                p.lid = next;
            }
            next += 1;
        } else {
            for p in &mut node.ports {
                p.lid = next;
                next += 1;
            }
        }
    }
    fabric.reindex();
}

fn plane_fabric(hosts: usize, rail: Option<usize>) -> Fabric {
    let text = fat_tree(&FatTreeSpec::new(3, RADIX, hosts)).unwrap_or_else(|e| {
        eprintln!("scale: cannot generate {hosts} hosts: {e}");
        std::process::exit(2)
    });
    let mut fabric = ibscope_topo::ibnd::parse(&text).expect("generated text parses");
    if let Some(r) = rail {
        // Rail r: every host's HCA r ("gpu-node-0001 mlx5_3").
        let ids: Vec<_> = fabric
            .nodes()
            .filter(|(_, n)| !n.is_switch())
            .map(|(id, _)| id)
            .collect();
        for id in ids {
            let n = fabric.node_mut(id);
            n.description = n.description.replace("mlx5_0", &format!("mlx5_{r}"));
        }
    }
    assign_lids(&mut fabric);
    fabric
}

fn planes(
    family: &str,
    hosts: usize,
    keep_fabric: bool,
    options: ResponderOptions,
    config: EngineConfig,
) -> Vec<Plane> {
    let layout: Vec<(usize, Option<usize>)> = match family {
        "fat-tree" => {
            let n = hosts.div_ceil(MAX_PLANE_HOSTS);
            (0..n)
                .map(|i| (hosts / n + usize::from(i < hosts % n), None))
                .collect()
        }
        "rails" => (0..RAILS)
            .map(|r| (hosts / RAILS + usize::from(r < hosts % RAILS), Some(r)))
            .collect(),
        _ => usage(),
    };
    layout
        .into_iter()
        .enumerate()
        .map(|(i, (h, rail))| {
            let mut fabric = plane_fabric(h, rail);
            if keep_fabric {
                routing::compute_minhop_lfts(&mut fabric);
            }
            let model = FabricModel::from_fabric(&fabric, (i as u64) << 40).unwrap_or_else(|e| {
                eprintln!("scale: {e}");
                std::process::exit(2)
            });
            let port = FabricPort::new(Arc::new(model), options);
            let engine = Engine::with_port(port, config, 1 + i as u32);
            Plane {
                fabric: keep_fabric.then_some(fabric),
                engine,
            }
        })
        .collect()
}

/// The sample's JSON written to /dev/null by the writer `counters --format json` uses (64
/// KiB at a time); the bytes written.
fn write_to_null(sample: &counters::Sample) -> usize {
    struct Counted(std::fs::File, usize);
    impl std::io::Write for Counted {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let n = self.0.write(buf)?;
            self.1 += n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            self.0.flush()
        }
    }
    let null = std::fs::File::create("/dev/null").expect("/dev/null opens");
    let mut w = Counted(null, 0);
    counters::json::write_sample(&mut w, &[], sample, false).expect("/dev/null takes it");
    w.1
}

fn cpu_time() -> Duration {
    // SAFETY: getrusage fills the struct it is given; RUSAGE_SELF always exists.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// A field of /proc/self/status in KiB (VmRSS, VmHWM).
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

/// Reset the peak RSS to the current RSS (Linux: clear_refs 5).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Time the responders spent building replies and waiting out their latency.
fn responder_time(planes: &[Plane]) -> Duration {
    planes
        .iter()
        .map(|p| {
            let s: ResponderStats = p.engine.port().stats;
            s.busy + s.waited
        })
        .sum()
}

/// The responders' timed calls (see [`ResponderStats::timed`]).
fn responder_timed(planes: &[Plane]) -> u64 {
    planes.iter().map(|p| p.engine.port().stats.timed).sum()
}

/// What one clock read costs here (the median of 5 runs of 200,000): the responders'
/// clock reads outside their timed intervals, one per interval, are theirs, not
/// ibscope's. Measured apart, an interval's two reads leave one read's cost outside it
/// (48.6 ns per interval, 23.4 inside, 25.1 outside, one read 23.3 ns).
fn clock_read_cost() -> Duration {
    const READS: u32 = 200_000;
    let mut runs: Vec<Duration> = (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..READS {
                std::hint::black_box(Instant::now());
            }
            t.elapsed() / READS
        })
        .collect();
    runs.sort();
    runs[2]
}

fn mads(planes: &[Plane]) -> u64 {
    planes.iter().map(|p| p.engine.stats().sent).sum()
}

fn evaluate(plane: &mut Plane, fabric: &Fabric, thresholds: &Thresholds) -> findings::Evaluation {
    let sm_lid = plane.engine.local().sm_lid;
    findings::evaluate(
        fabric,
        None,
        &HealthOptions::default(),
        thresholds,
        Some(Live {
            exec: &mut plane.engine,
            reads: CounterReads::Screened,
            sm_lid,
        }),
    )
}

fn sweep_all(plane: &mut Plane, fabric: &Fabric) -> counters::Sample {
    let targets = counters::targets(fabric, None, None);
    counters::sweep(&mut plane.engine, fabric, &targets, None)
}

fn discover_plane(plane: &mut Plane) -> Fabric {
    discover(&mut plane.engine, DiscoverOptions::default(), |_| {})
}

fn main() {
    let family = arg("--family").unwrap_or_else(|| usage());
    let hosts: usize = arg("--hosts")
        .and_then(|h| h.parse().ok())
        .unwrap_or_else(|| usage());
    let op = arg("--op").unwrap_or_else(|| usage());
    // As the binary does: the one-shot commands keep freed memory, the TUI and serve give
    // it back.
    let one_shot = matches!(
        op.as_str(),
        "discover" | "check" | "counters" | "route-check"
    );
    ibscope::memory::tune_for(one_shot);
    let latency = Duration::from_micros(
        arg("--latency-us")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    );
    let out_file = arg("--out");
    let loss: f64 = arg("--loss").and_then(|v| v.parse().ok()).unwrap_or(0.0);
    let options = ResponderOptions {
        latency,
        loss,
        seed: 1,
    };
    let config = EngineConfig {
        max_outstanding: arg("--window")
            .and_then(|w| w.parse().ok())
            .unwrap_or(EngineConfig::default().max_outstanding),
        ..EngineConfig::default()
    };
    let mut planes = planes(
        &family,
        hosts,
        op == "route-check",
        ResponderOptions::default(),
        config,
    );
    let thresholds = Thresholds::default();

    // Setup of the operations that start from a discovered fabric.
    let prior: Vec<Fabric> = match op.as_str() {
        "tui" | "serve" | "serve-errors" | "serve-render" => {
            planes.iter_mut().map(discover_plane).collect()
        }
        _ => Vec::new(),
    };
    let mut first_snapshots = Vec::new();
    let mut sweeps = Vec::new();
    match op.as_str() {
        "tui" => {
            for (plane, fabric) in planes.iter_mut().zip(&prior) {
                let eval = evaluate(plane, fabric, &thresholds);
                let snap = tui::Sweep::from_evaluation(fabric.clone(), eval, SystemTime::now());
                first_snapshots.push(tui::state::prepare(None, snap, None).sweep);
                let eval = evaluate(plane, fabric, &thresholds);
                sweeps.push(eval);
            }
        }
        "serve" | "serve-errors" | "serve-render" => {
            for (plane, fabric) in planes.iter_mut().zip(&prior) {
                sweeps.push(findings::Evaluation {
                    sample: Some(sweep_all(plane, fabric)),
                    ..evaluate_offline(fabric)
                });
            }
        }
        _ => {}
    }
    for p in &mut planes {
        p.engine.port_mut().set_options(options);
    }

    let mads_before = mads(&planes);
    let responder_before = responder_time(&planes);
    let timed_before = responder_timed(&planes);
    let clock_read = clock_read_cost();
    let base_kib = status_kib("VmRSS:");
    reset_peak();
    let cpu0 = cpu_time();
    let t0 = Instant::now();
    let mut keep: Vec<Box<dyn std::any::Any>> = Vec::new();
    let mut complete = true;
    // Bytes of text the operation produced (counters' JSON, serve's page), for scale.
    let mut out_bytes = 0usize;
    // Bytes of gzip (`serve`, `serve-errors`).
    let mut gzip_bytes = 0usize;
    // What the operation produced, kept only for --out (which then adds to the peak RSS).
    let mut produced: Vec<String> = Vec::new();
    let mut reports = Vec::new();
    let mut snapshots: Vec<Fabric> = Vec::new();
    // `serve`'s pages, compressed.
    let mut held_pages = Vec::new();
    match op.as_str() {
        "discover" => {
            for p in &mut planes {
                let f = discover_plane(p);
                complete &= f.report.complete;
                if out_file.is_some() {
                    // Serialized only to be written out, after the clock has stopped.
                    snapshots.push(f);
                } else {
                    // As `discover -C all` does: each fabric written, then dropped before
                    // the next is discovered.
                    drop(f);
                }
            }
        }
        "check" => {
            for p in &mut planes {
                let f = discover_plane(p);
                complete &= f.report.complete;
                let eval = evaluate(p, &f, &thresholds);
                keep.push(Box::new((f, eval.findings, eval.sample)));
            }
        }
        "counters" => {
            for p in &mut planes {
                let f = discover_plane(p);
                complete &= f.report.complete;
                let sample = sweep_all(p, &f);
                // What `counters --format json` prints, written as it writes it: for
                // several fabrics (planes) one compact document each, 64 KiB at a time
                // (to /dev/null here), not into one string of it.
                if out_file.is_some() {
                    let mut text = Vec::new();
                    counters::json::write_sample(&mut text, &[], &sample, false)
                        .expect("in memory");
                    let text = String::from_utf8(text).expect("JSON is UTF-8");
                    out_bytes += text.len();
                    produced.push(text);
                    keep.push(Box::new((f, sample)));
                } else {
                    // As `counters -C all` does: each fabric's sample written, then it
                    // and the fabric dropped before the next fabric is swept (their
                    // memory kept for reuse, as the one-shot commands keep it).
                    out_bytes += write_to_null(&sample);
                    drop((f, sample));
                }
            }
        }
        "route-check" => {
            for p in &planes {
                let fabric = p.fabric.as_ref().expect("kept for the route check");
                let report = routing::check(fabric, &CheckOptions::default());
                complete &= report.is_clean();
                if out_file.is_some() {
                    // Serialized only to be written out, after the clock has stopped.
                    reports.push(report);
                } else {
                    keep.push(Box::new(report));
                }
            }
        }
        "tui" => {
            let now = SystemTime::now();
            for ((fabric, eval), previous) in prior.iter().zip(sweeps).zip(&first_snapshots) {
                let snap = tui::Sweep::from_evaluation(fabric.clone(), eval, now);
                keep.push(Box::new(tui::state::prepare(Some(previous), snap, None)));
            }
        }
        "serve" | "serve-errors" | "serve-render" => {
            let families = match op.as_str() {
                "serve-errors" => CounterFamilies::Errors,
                _ => CounterFamilies::All,
            }
            .names();
            let errors = HashMap::new();
            let stats = page_stats(&families, &errors, &thresholds, 1);
            for (fabric, eval) in prior.iter().zip(&sweeps) {
                let sample = eval.sample.as_ref().expect("swept");
                let (health, hosts) = (&eval.health, &eval.hosts);
                let mut labels =
                    PageLabels::new(fabric, None, hosts, "scale", PortFilter::default());
                let labels = &mut labels;
                if op == "serve-render" {
                    let mut counted = Counted(0);
                    write_fabric_page(
                        &mut counted,
                        fabric,
                        health,
                        hosts,
                        None,
                        sample,
                        &stats,
                        labels,
                    )
                    .expect("counting cannot fail");
                    out_bytes += counted.0;
                    continue;
                }
                let mut page = PageWriter::default();
                write_fabric_page(
                    &mut page, fabric, health, hosts, None, sample, &stats, labels,
                )
                .expect("compressing into memory");
                let page = page.finish(None);
                let (text, gzip) = page.sizes();
                out_bytes += text as usize;
                gzip_bytes += gzip;
                held_pages.push(std::sync::Arc::new(page));
            }
        }
        _ => usage(),
    }
    if one_shot {
        // A one-shot command frees what it made before it exits (its destructors run as
        // `main` returns): counted. The TUI and serve hold theirs until the next sweep.
        keep.clear();
    }
    let wall = t0.elapsed();
    let cpu = cpu_time().saturating_sub(cpu0);
    let peak_kib = status_kib("VmHWM:");
    let responder = responder_time(&planes).saturating_sub(responder_before);
    // The responders' clock reads outside their timed calls: one read per call.
    let clocks =
        clock_read * u32::try_from(responder_timed(&planes) - timed_before).unwrap_or(u32::MAX);
    let own = cpu.saturating_sub(responder).saturating_sub(clocks);
    let sent = mads(&planes) - mads_before;
    let window = config.max_outstanding as f64;
    let ideal = sent as f64 * latency.as_secs_f64() / window;
    let nodes: usize = planes
        .iter()
        .map(|p| p.engine.port().model().node_count())
        .sum();
    print!(
        "family={family} hosts={hosts} op={op} planes={} nodes={nodes} cpu_s={:.3} wall_s={:.3} rss_mib={:.0} base_mib={:.0} mads={sent} out_mib={:.0} responder_s={:.3} clocks_s={:.3} complete={complete}",
        planes.len(),
        own.as_secs_f64(),
        wall.as_secs_f64(),
        peak_kib as f64 / 1024.0,
        base_kib as f64 / 1024.0,
        out_bytes as f64 / (1024.0 * 1024.0),
        responder.as_secs_f64(),
        clocks.as_secs_f64(),
    );
    if gzip_bytes > 0 {
        print!(" gzip_mib={:.0}", gzip_bytes as f64 / (1024.0 * 1024.0));
    }
    if !latency.is_zero() || loss > 0.0 {
        let cuts: u64 = planes.iter().map(|p| p.engine.stats().window_cuts).sum();
        let retries: u64 = planes.iter().map(|p| p.engine.stats().retries).sum();
        print!(
            " latency_us={} loss={loss} window={window} ideal_s={ideal:.3} ratio={:.2} retries={retries} window_cuts={cuts}",
            latency.as_micros(),
            wall.as_secs_f64() / ideal.max(1e-9)
        );
    }
    println!();
    if out_file.is_some() {
        // The text a scrape without gzip gets: heads, samples inflated.
        for held in &held_pages {
            produced.push(held.text().expect("the page's own bytes inflate"));
        }
    }
    drop(held_pages);
    if let Some(path) = out_file {
        let mut text = produced.concat();
        for report in &reports {
            text.push_str(&serde_json::to_string(report).expect("serializable"));
        }
        for fabric in &snapshots {
            text.push_str(&serde_json::to_string(&fabric.to_file()).expect("serializable"));
        }
        std::fs::write(&path, text).unwrap_or_else(|e| {
            eprintln!("scale: cannot write {path}: {e}");
            std::process::exit(1)
        });
    }
    drop(keep);
    drop(produced);
}

/// Where `serve-render` writes the page: its bytes counted.
struct Counted(usize);

impl std::io::Write for Counted {
    fn write(&mut self, text: &[u8]) -> std::io::Result<usize> {
        self.0 += text.len();
        Ok(text.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn page_stats<'a>(
    counters: &'a [&'static str],
    scrape_errors: &'a HashMap<u64, ScrapeErrors>,
    thresholds: &'a Thresholds,
    sweeps: u64,
) -> PageStats<'a> {
    PageStats {
        counters,
        sweeps,
        discoveries: 1,
        discovery_seconds: 0.0,
        scrape_errors,
        thresholds,
        sm: None,
        extra: &[],
    }
}

fn evaluate_offline(fabric: &Fabric) -> findings::Evaluation {
    findings::evaluate_offline(fabric, None, &HealthOptions::default())
}
