//! Routing reports as terminal text (`ibscope route check`, `route load`): fabric names
//! escaped (the reports' Display impls escape theirs).

use std::fmt::Write;

use super::check::RouteReport;
use super::collective::{CollectiveReport, JobReport, MODEL};
use super::load::{LoadReport, Pattern};
use crate::escape::for_terminal;

/// `writeln!` into a `String`, which cannot fail to take it.
macro_rules! w {
    ($out:expr) => {{ let _ = writeln!($out); }};
    ($out:expr, $($arg:tt)*) => {{ let _ = writeln!($out, $($arg)*); }};
}

/// `route check`'s report as text.
pub fn check_text(r: &RouteReport) -> String {
    let mut text = String::new();
    let out = &mut text;
    w!(
        out,
        "{} sources, {} destinations ({} CA, {} switch), {} pairs: {} ok, {} broken, {} looping",
        r.sources,
        r.destinations,
        r.ca_destinations,
        r.switch_destinations,
        r.pairs,
        r.pairs_ok,
        r.pairs_broken,
        r.pairs_looping
    );
    w!(out, "hops: max {}, mean {:.2}", r.max_hops, r.mean_hops);
    // The Display impls escape the fabric's names.
    for b in &r.breaks {
        w!(out, "black hole: {b}");
    }
    for u in &r.unreachable {
        w!(out, "unreachable: {u}");
    }
    for l in &r.loops {
        w!(out, "forwarding loop: {l}");
    }
    w!(
        out,
        "channel dependency graph: {} channels, {} dependencies; credit loops: {}",
        r.cdg.channels,
        r.cdg.dependencies,
        r.credit_loops_found
    );
    for c in &r.credit_loops {
        w!(out, "credit loop: {c}");
    }
    w!(out, "route balance by layer (routes per directed link):");
    for l in &r.balance.by_layer {
        w!(
            out,
            "  layer {:<2} {:<8} {:>5} links  routes min {:>6} max {:>6} mean {:>8.1}  lids {}-{}",
            l.layer.map(|x| x.to_string()).unwrap_or_else(|| "?".into()),
            l.direction.as_str(),
            l.ports,
            l.routes_min,
            l.routes_max,
            l.routes_mean,
            l.lids_min,
            l.lids_max
        );
    }
    w!(out, "hottest links:");
    for p in r.balance.hottest.iter().take(5) {
        w!(
            out,
            "  {:>6} routes  {} -> {}",
            p.routes,
            for_terminal(&p.from.route_text()),
            for_terminal(&p.to.route_text())
        );
    }
    for u in &r.balance.lft_unbalanced {
        w!(out, "unbalanced LFT: {u}");
    }
    for n in &r.notes {
        w!(out, "note: {}", for_terminal(n));
    }
    text
}

/// `route load --pattern`'s report as text.
pub fn load_text(r: &LoadReport) -> String {
    let mut text = String::new();
    let out = &mut text;
    w!(
        out,
        "{} pattern over {} hosts: {} flows ({} unroutable), {} links used, at most {} flows on one link",
        r.pattern, r.hosts, r.flows_total, r.flows_unroutable, r.links_used, r.max_flows_per_link
    );
    let gbps = |v: Option<f64>| {
        v.map(|x| format!("{x:.1} Gb/s"))
            .unwrap_or_else(|| "unknown".into())
    };
    w!(
        out,
        "per-flow rate: min {}, mean {}, max {}",
        gbps(r.min_flow_gbps),
        gbps(r.mean_flow_gbps),
        gbps(r.max_flow_gbps)
    );
    if r.pattern == Pattern::Ring {
        w!(
            out,
            "predicted ring all-reduce bus bandwidth: {}",
            gbps(r.ring_allreduce_busbw_gbps)
        );
    }
    w!(out, "hottest links:");
    for l in &r.hottest_links {
        w!(
            out,
            "  {:>4} flows  capacity {:>12}  {}",
            l.flows,
            gbps(l.capacity_gbps),
            for_terminal(&l.channel.to_string())
        );
    }
    w!(out, "model: {}", r.model);
    text
}

/// A job's prediction: per collective its busbw and limit, then the nccl-tests curves.
pub fn job_text(r: &JobReport, names: &[&str]) -> String {
    let mut text = String::new();
    let out = &mut text;
    w!(
        out,
        "job: {} servers ({}), rails {}, {} ranks (one per HCA)",
        r.hosts,
        for_terminal(&crate::hosts::hostlist::compress(names.iter().copied())),
        crate::hosts::rail_ranges(&r.rails),
        r.ranks
    );
    for c in &r.collectives {
        let name = format!("{} ({})", c.op, c.collective);
        match c.busbw {
            None => {
                let why = c.error.as_deref().unwrap_or("no link of known rate");
                w!(out, "{name}: no prediction: {}", for_terminal(why));
                for u in &c.unroutable {
                    w!(out, "  {}", for_terminal(u));
                }
            }
            Some(_) => {
                w!(
                    out,
                    "{name}: busbw {:.2} GB/s for large messages; {} flows, max {} link hops \
                     (mean {:.1}), alpha {:.2} us x {} steps",
                    c.busbw.unwrap_or_default(),
                    c.flows,
                    c.max_hops,
                    c.mean_hops,
                    c.alpha_us,
                    c.steps
                );
                if let Some(l) = &c.limit {
                    let capacity = l
                        .capacity_gbps
                        .map_or_else(|| "capacity unknown".into(), |g| format!("{g:.1} Gb/s"));
                    let what = if l.hca_link && !l.below_norm {
                        "the HCA links themselves (the NICs are the limit), first"
                    } else if l.below_norm {
                        "a link slower than the job's HCA links"
                    } else {
                        "a fabric link"
                    };
                    w!(
                        out,
                        "  limit: {what}: {} ({capacity}, {} flows; the slowest flow gets \
                         {:.1} Gb/s)",
                        for_terminal(&l.channel.to_string()),
                        l.flows,
                        l.share_gbps
                    );
                }
            }
        }
    }
    w!(out, "model: {}", MODEL);
    for c in r.collectives.iter().filter(|c| !c.curve.is_empty()) {
        curve_text(out, c);
    }
    text
}

/// One collective's curve as nccl-tests prints its out-of-place columns.
fn curve_text(out: &mut String, c: &CollectiveReport) {
    w!(out);
    w!(
        out,
        "# {} ({}), predicted: {} ranks, busbw factor {:.4}",
        c.op,
        c.collective,
        c.ranks,
        c.busbw_factor
    );
    w!(
        out,
        "#{:>11}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}",
        "size",
        "count",
        "type",
        "redop",
        "root",
        "time",
        "algbw",
        "busbw"
    );
    w!(
        out,
        "#{:>11}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}",
        "(B)",
        "(elements)",
        "",
        "",
        "",
        "(us)",
        "(GB/s)",
        "(GB/s)"
    );
    for p in &c.curve {
        w!(
            out,
            "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7.2}  {:>6.2}  {:>6.2}",
            p.size,
            p.count,
            p.dtype,
            p.redop,
            p.root,
            p.time_us,
            p.algbw,
            p.busbw
        );
    }
    let avg = c.curve.iter().map(|p| p.busbw).sum::<f64>() / c.curve.len() as f64;
    w!(out, "# Avg bus bandwidth    : {avg:.4}");
}
