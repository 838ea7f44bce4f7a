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
//! - `serve`: what `serve` does with its first sweep to have the /metrics page ready: the
//!   render handed out family by family (`write_fabric_page`) to the sweeper's own
//!   compressor (`PageDeflater::reusing` with its cache empty: each family's samples
//!   compressed as they come, and hashed for the next page), every family held
//!   compressed, with its head, as `serve` holds it (the pipe between the two processes
//!   left out);
//! - `serve-stream`: the same render to a sink that only counts the pieces: the render's
//!   own cost, without holding the page;
//! - `serve-gzip`: `serve-stream` with every family compressed as it comes (fast deflate
//!   and CRC-32, as `serve` compresses each family of a page), the compressed bytes kept.
//! - `serve-steady`: `serve`'s second sweep of a busy fabric, as its sweeper renders it
//!   (`PageDeflater::reusing`: a family of ports made of the same labels and values as on
//!   the last page is taken from there, not rendered; every other family's text is
//!   hashed and compressed only when it differs from the last page's). Setup: a first
//!   page rendered through the same cache. Between the two, what moves on a busy fabric
//!   with no errors moves: every data and packet counter (PortXmitData, PortRcvData,
//!   PortXmitPkts, PortRcvPkts, the unicast and multicast packets; the counters `serve
//!   --counters data` names) of every port that answered grows by a different amount per
//!   port, and the sweep count goes up. Error counters, link states, widths and speeds
//!   stay as they were, as they do on a healthy fabric: the families of those are
//!   reused. The cost is the render of the families whose values moved and of those not
//!   of ports, hashing the latter and compressing the changed ones. The cache (one page
//!   compressed, held as the sweeper holds it), the ports' labels made with the first
//!   page (kept, as the sweeper keeps them until it rediscovers) and the first page as
//!   `serve` holds it are in base_mib. Families the sweeper finds as before are the first
//!   page's (the sweeper sends only their names); the others are copied, as `serve` reads
//!   them from the pipe; the first page is let go of at the end, as `serve` does when it
//!   publishes the second. The data counters moving makes their families less
//!   compressible than the responder's (the unicast and multicast counters it leaves at 0
//!   become numbers): compare with `serve-cold`, not `serve`. `reused` and `compressed`
//!   count families;
//! - `serve-cold`: the same second sweep with an empty cache, every family compressed:
//!   the worst case (every family changed, or the first sweep after a start), `serve`
//!   plus the hashing.
//!
//! Printed: one line of `key=value`: cpu_s (the process's CPU time during the operation
//! less the responder's own: building replies and waiting out their latency, and the
//! clock reads timing that, which fall outside what they time: clocks_s, one read's
//! cost, calibrated at the start, per timed call), wall_s,
//! rss_mib (peak RSS during the operation), base_mib (RSS before it: the responder's
//! model and the setup), mads, out_mib (the text `counters` or `serve` produced), planes,
//! gzip_mib (the compressed bytes of `serve` and `serve-gzip`), and for `discover` under
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

use ibscope::cmd::serve::{CounterFamilies, Deflated, Family, PageDeflater, PieceCache};
use ibscope_mad::engine::{Engine, EngineConfig};
use ibscope_topo::counters::{self, Thresholds};
use ibscope_topo::discover::{discover, DiscoverOptions};
use ibscope_topo::export::prometheus::{
    write_fabric_page, PageLabels, PageSink, PageStats, ScrapeErrors,
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
    eprintln!("usage: scale --family fat-tree|rails --hosts N --op discover|check|counters|route-check|tui|serve|serve-stream|serve-gzip|serve-steady|serve-cold [--latency-us U] [--loss P] [--window W] [--out FILE]");
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
    // As the binary does: the one-shot commands keep freed memory, the TUI and serve do not.
    let one_shot = matches!(
        op.as_str(),
        "discover" | "check" | "counters" | "route-check"
    );
    if one_shot {
        ibscope::memory::keep_freed_memory();
    }
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
        "tui" | "serve" | "serve-stream" | "serve-gzip" | "serve-steady" | "serve-cold" => {
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
        "serve" | "serve-stream" | "serve-gzip" | "serve-steady" | "serve-cold" => {
            for (plane, fabric) in planes.iter_mut().zip(&prior) {
                sweeps.push(findings::Evaluation {
                    sample: Some(sweep_all(plane, fabric)),
                    ..evaluate_offline(fabric)
                });
            }
        }
        _ => {}
    }
    // The sweepers' caches, one per plane, and the first page through them, as `serve`
    // holds it (by family name) until the next page replaces it.
    let mut caches: Vec<PieceCache> = Vec::new();
    let mut last_pages: Vec<HashMap<String, Family>> = Vec::new();
    // The sweepers' port labels, made with the first page and kept until a rediscovery.
    let mut kept_labels: Vec<PageLabels> = Vec::new();
    if op == "serve-steady" || op == "serve-cold" {
        let families = CounterFamilies::All.names();
        let errors = HashMap::new();
        let stats = page_stats(&families, &errors, &thresholds, 1);
        for (fabric, eval) in prior.iter().zip(&mut sweeps) {
            let mut cache = PieceCache::default();
            let mut last_page = HashMap::new();
            if op == "serve-steady" {
                let sample = eval.sample.as_ref().expect("swept");
                let keep = |name: &str, head: &str, body: &Deflated, _| {
                    // As `serve` reads it from the sweeper's pipe: a copy of its piece.
                    let family = Family::new(name.into(), head.into(), body.clone());
                    last_page.insert(name.to_string(), family);
                };
                let mut sink = PageDeflater::reusing(&mut cache, keep);
                let (health, hosts) = (&eval.health, &eval.hosts);
                let mut labels = PageLabels::new(fabric, None, hosts, stats.fabric, stats.filter);
                let kept = Some(&mut labels);
                write_fabric_page(fabric, health, hosts, None, sample, &stats, kept, &mut sink);
                sink.finish();
                kept_labels.push(labels);
            }
            caches.push(cache);
            last_pages.push(last_page);
            if let Some(sample) = eval.sample.as_mut() {
                advance_data_counters(sample);
            }
        }
    }
    if op == "serve" {
        // A sweeper's first page goes through its cache too, empty then: the families
        // are hashed (and digested) for the next page.
        caches.extend(prior.iter().map(|_| PieceCache::default()));
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
    // Bytes of deflate (`serve-gzip`).
    let mut gzip_bytes = 0usize;
    // What the operation produced, kept only for --out (which then adds to the peak RSS).
    let mut produced: Vec<String> = Vec::new();
    let mut reports = Vec::new();
    let mut snapshots: Vec<Fabric> = Vec::new();
    // `serve`'s pages, family by family, compressed.
    let mut held_pages = Vec::new();
    // Families of `serve-steady` and `serve-cold` taken from the last page, and compressed.
    let (mut reused, mut compressed) = (0u64, 0u64);
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
        "serve" | "serve-stream" | "serve-gzip" | "serve-steady" | "serve-cold" => {
            let families = CounterFamilies::All.names();
            let errors = HashMap::new();
            let second = op == "serve-steady" || op == "serve-cold";
            let stats = page_stats(&families, &errors, &thresholds, 1 + u64::from(second));
            for (i, (fabric, eval)) in prior.iter().zip(&sweeps).enumerate() {
                let sample = eval.sample.as_ref().expect("swept");
                if second || op == "serve" {
                    // Each family as `serve` holds it: name, head and compressed head,
                    // samples as the sweeper compressed them (from the pipe), or, when
                    // the sweeper says it is as before, the last page's (shared).
                    let mut held: Vec<Family> = Vec::new();
                    let last_page = last_pages.get(i);
                    let keep = |name: &str, head: &str, body: &Deflated, as_before: bool| {
                        let last = last_page.and_then(|l| l.get(name)).filter(|_| as_before);
                        held.push(match last {
                            Some(last) => last.clone(),
                            None => Family::new(name.into(), head.into(), body.clone()),
                        });
                    };
                    let (health, hosts) = (&eval.health, &eval.hosts);
                    // Every one has a cache (`serve`'s empty), only serve-steady the
                    // first page's labels.
                    let cache = caches.get_mut(i).expect("a sweeper's cache per plane");
                    let mut sink = PageDeflater::reusing(cache, keep);
                    let kept = kept_labels.get_mut(i);
                    write_fabric_page(fabric, health, hosts, None, sample, &stats, kept, &mut sink);
                    sink.finish();
                    if let Some(cache) = caches.get(i) {
                        reused += cache.reused;
                        compressed += cache.compressed;
                    }
                    for f in &held {
                        out_bytes += f.head.len() + f.body.text_len() as usize;
                        gzip_bytes += f.head_z.bytes().len() + f.body.bytes().len();
                    }
                    held_pages.push(held);
                    continue;
                }
                let mut sink = StreamSink {
                    bytes: 0,
                    text: out_file.as_ref().map(|_| String::new()),
                    deflate: (op == "serve-gzip").then(Deflating::default),
                };
                let (health, hosts) = (&eval.health, &eval.hosts);
                write_fabric_page(fabric, health, hosts, None, sample, &stats, None, &mut sink);
                out_bytes += sink.bytes;
                if let Some(d) = sink.deflate {
                    gzip_bytes += d.finish();
                }
                produced.extend(sink.text);
            }
        }
        _ => usage(),
    }
    if one_shot {
        // A one-shot command frees what it made before it exits (its destructors run as
        // `main` returns): counted. The TUI and serve hold theirs until the next sweep.
        keep.clear();
    }
    // `serve` lets go of the last page as it publishes the new one: counted.
    last_pages.clear();
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
    if reused + compressed > 0 {
        print!(" reused={reused} compressed={compressed}");
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
            let mut page = Vec::new();
            for f in held {
                page.extend_from_slice(f.head.as_bytes());
                let text = f.body.inflate().expect("the page's own pieces inflate");
                page.extend_from_slice(text.as_bytes());
            }
            produced.push(String::from_utf8(page).expect("the page is text"));
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

/// Where `serve-stream` and `serve-gzip` hand the page: counted, compressed for
/// `serve-gzip`, kept as text only for --out.
struct StreamSink {
    bytes: usize,
    text: Option<String>,
    deflate: Option<Deflating>,
}

impl PageSink for StreamSink {
    fn family(&mut self, _name: &str, head: &str) {
        // The samples before are a piece, the head another.
        if let Some(d) = &mut self.deflate {
            d.end_piece();
        }
        self.samples(head);
        if let Some(d) = &mut self.deflate {
            d.end_piece();
        }
    }

    fn samples(&mut self, lines: &str) {
        self.bytes += lines.len();
        if let Some(text) = &mut self.text {
            text.push_str(lines);
        }
        if let Some(d) = &mut self.deflate {
            d.put(lines.as_bytes(), flate2::FlushCompress::None);
        }
    }
}

/// A page compressed as `serve` compresses it: fast deflate, each family's head and its
/// samples a piece of their own ended by a sync flush, with the CRC-32 of the text.
struct Deflating {
    compress: flate2::Compress,
    crc: flate2::Crc,
    out: Vec<u8>,
}

impl Default for Deflating {
    fn default() -> Self {
        Deflating {
            compress: flate2::Compress::new(flate2::Compression::fast(), false),
            crc: flate2::Crc::new(),
            out: Vec::new(),
        }
    }
}

impl Deflating {
    fn put(&mut self, mut input: &[u8], flush: flate2::FlushCompress) {
        self.crc.update(input);
        loop {
            if self.out.capacity() - self.out.len() < 4096 {
                self.out.reserve(self.out.len().max(1 << 16));
            }
            let before = self.compress.total_in();
            // Compressing into a Vec with room cannot fail.
            let _ = self.compress.compress_vec(input, &mut self.out, flush);
            input = &input[(self.compress.total_in() - before) as usize..];
            if input.is_empty() && self.out.len() < self.out.capacity() {
                break;
            }
        }
    }

    /// Ends a piece (a head, or a family's samples) as `serve` does.
    fn end_piece(&mut self) {
        self.put(&[], flate2::FlushCompress::Sync);
    }

    /// Bytes of deflate written.
    fn finish(mut self) -> usize {
        self.end_piece();
        self.out.len()
    }
}

fn page_stats<'a>(
    counters: &'a [&'static str],
    scrape_errors: &'a HashMap<u64, ScrapeErrors>,
    thresholds: &'a Thresholds,
    sweeps: u64,
) -> PageStats<'a> {
    PageStats {
        sweeps,
        discoveries: 1,
        ..PageStats::new("scale", counters, scrape_errors, thresholds)
    }
}

/// What moves between two sweeps of a busy, healthy fabric: every data and packet counter
/// of every port that answered, by a different amount per port (a few MB to a few GB of
/// traffic); error counters stay as they were.
fn advance_data_counters(sample: &mut counters::Sample) {
    let data = CounterFamilies::Data.names();
    for (i, port) in sample.ports.iter_mut().enumerate() {
        let step = 1 + (i as u64 % 997) * 4_099_997;
        for set in [&mut port.counters, &mut port.extended] {
            let Some(read) = set.as_ref() else {
                continue;
            };
            let mut readings = read.readings().to_vec();
            for r in readings.iter_mut().filter(|r| data.contains(&&*r.name)) {
                r.value += step;
            }
            *set = Some(counters::CounterSet::from_readings(readings));
        }
    }
}

fn evaluate_offline(fabric: &Fabric) -> findings::Evaluation {
    findings::evaluate_offline(fabric, None, &HealthOptions::default())
}
