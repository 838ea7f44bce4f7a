//! The reports as text for a terminal: fabric strings escaped, one run or log after the
//! other. The JSON is the reports themselves (serde).

use std::fmt::Write;

use ibscope_topo::escape::for_terminal;
use ibscope_topo::findings::Finding;

use crate::chart;
use crate::predict::Prediction;
use crate::report::{LogReport, RunReport};

/// `writeln!` and `write!` into a `String`, which cannot fail to take it.
macro_rules! w {
    ($out:expr) => {{ let _ = writeln!($out); }};
    ($out:expr, $($arg:tt)*) => {{ let _ = writeln!($out, $($arg)*); }};
}
macro_rules! wr {
    ($out:expr, $($arg:tt)*) => {{ let _ = write!($out, $($arg)*); }};
}

/// One nccl-tests run judged: its sizes, verdict ranges and chart.
pub fn run(r: &RunReport) -> String {
    let mut text = String::new();
    let out = &mut text;
    let op = r.op.as_deref().unwrap_or("unknown collective");
    w!(
        out,
        "{}: {op}, {} ranks on {} server(s){}",
        for_terminal(&r.source),
        r.ranks,
        r.servers.len(),
        r.nccl_version
            .as_ref()
            .map_or(String::new(), |v| format!(", NCCL {}", for_terminal(v)))
    );
    match (&r.prediction, &r.prediction_missing) {
        (
            Some(
                p @ Prediction {
                    line_rate: Some(l), ..
                },
            ),
            _,
        ) => w!(
            out,
            "  {} {:.1} GB/s busbw: {}",
            p.allows(),
            p.busbw,
            for_terminal(&crate::predict::line_rate_text(l))
        ),
        (Some(p), _) => w!(
            out,
            "  {} {:.1} GB/s busbw ({} on rails {}): {}",
            p.allows(),
            p.busbw,
            p.collective,
            ibscope_topo::hosts::rail_ranges(&p.rails),
            for_terminal(&crate::predict::limit_text(p))
        ),
        (None, Some(why)) => w!(out, "  no prediction: {}", for_terminal(why)),
        (None, None) => {}
    }
    w!(
        out,
        "  {:>10}  {:>10}  {:>9}  {:>9}  {:>6}  verdict",
        "size",
        "time(us)",
        "busbw",
        "predicted",
        "ratio"
    );
    for s in &r.judgement.sizes {
        w!(
            out,
            "  {:>10}  {:>10.2}  {:>9.2}  {:>9}  {:>6}  {}{}",
            chart::human_size(s.size),
            s.time_us,
            s.busbw,
            s.predicted_busbw.map_or("-".into(), |p| format!("{p:.2}")),
            s.ratio.map_or("-".into(), |x| format!("{:.0}%", x * 100.0)),
            s.verdict.as_str(),
            if s.wrong > 0 {
                format!(" ({} wrong)", s.wrong)
            } else {
                String::new()
            }
        );
    }
    for x in &r.judgement.ranges {
        w!(
            out,
            "  {} - {}: {}",
            chart::human_size(x.from),
            chart::human_size(x.to),
            for_terminal(&x.says)
        );
    }
    wr!(out, "{}", indent(&chart::text(&r.judgement.sizes)));
    if r.wrong > 0 {
        w!(
            out,
            "  {} value(s) wrong: the collective's results are corrupt (#wrong)",
            r.wrong
        );
    }
    for p in &r.problems {
        w!(out, "  partial: {}", for_terminal(p));
    }
    w!(out);
    text
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("  {l}\n")).collect()
}

/// Findings under a heading naming where they come from, each with its fix; nothing for
/// none.
pub fn findings(what: &str, findings: &[Finding]) -> String {
    let mut text = String::new();
    if findings.is_empty() {
        return text;
    }
    let out = &mut text;
    w!(out, "{} finding(s) in {what}:", findings.len());
    for f in findings {
        w!(out, "  {}", f.text_line());
        w!(out, "      fix: {}", f.kind.facts().fix);
    }
    text
}

/// A job's log: its servers, the log's findings, the links crossed with findings.
pub fn log(r: &LogReport) -> String {
    let mut text = String::new();
    let out = &mut text;
    w!(
        out,
        "job: {} of {} ranks on {} server(s), NCCL {}, network {}",
        r.ranks,
        r.nranks.map_or("?".into(), |n| n.to_string()),
        r.servers.len(),
        for_terminal(&list_or_unknown(&r.versions)),
        for_terminal(&list_or_unknown(&r.networks))
    );
    w!(
        out,
        "channels: {} rings, {} tree lines; {} network connections, {} with GPUDirect RDMA",
        r.rings,
        r.trees,
        r.net_connections,
        r.gdr_connections
    );
    for s in &r.servers {
        let used = if s.hcas_used.is_empty() {
            String::new()
        } else {
            format!(" ({})", for_terminal(&s.hcas_used.join(" ")))
        };
        w!(
            out,
            "  {}: ranks {}, HCAs used {}/{}{used}",
            for_terminal(&s.host),
            ranks_text(&s.ranks),
            s.hcas_used.len(),
            s.hcas.len(),
        );
    }
    wr!(out, "{}", findings("the log", &r.findings));
    if r.findings.is_empty() {
        w!(out, "the log's checks found nothing");
    }
    match (&r.placement, &r.placement_missing) {
        (Some(p), _) => {
            w!(
                out,
                "routes: {} network connection(s) placed, {} not placed; {} link(s) crossed",
                p.placed,
                p.unplaced,
                p.links.len()
            );
            for why in &p.unplaced_reasons {
                w!(out, "  not placed: {}", for_terminal(why));
            }
            let noted = |l: &&crate::placement::CrossedLink| {
                !l.findings.is_empty() || !l.counter_rises.is_empty()
            };
            for l in p.links.iter().filter(noted) {
                w!(
                    out,
                    "  {} carries {} connection(s) (ring channels {}; tree channels {}), e.g. {}",
                    l.link,
                    l.connections,
                    ranks_text(&l.rings.iter().copied().collect::<Vec<_>>()),
                    ranks_text(&l.trees.iter().copied().collect::<Vec<_>>()),
                    for_terminal(&l.example)
                );
                for f in &l.findings {
                    w!(out, "    {}", f.text_line());
                }
                for r in &l.counter_rises {
                    w!(out, "    rose while the log was read: {}", for_terminal(r));
                }
            }
            if !p.links.iter().any(|l| noted(&l)) && p.placed > 0 {
                w!(out, "  no link the job crosses has a finding");
            }
        }
        (None, Some(why)) => w!(out, "routes: not placed, {}", for_terminal(why)),
        (None, None) => {}
    }
    // The same WARN from every process of a node is one line with its count.
    let mut warnings: Vec<(&str, usize)> = Vec::new();
    for w in &r.warnings {
        match warnings.iter_mut().find(|(seen, _)| *seen == w.as_str()) {
            Some((_, n)) => *n += 1,
            None => warnings.push((w, 1)),
        }
    }
    for (w, n) in warnings.iter().take(5) {
        let times = if *n > 1 {
            format!(" ({n} times)")
        } else {
            String::new()
        };
        w!(out, "NCCL WARN: {}{times}", for_terminal(w));
    }
    for p in &r.problems {
        w!(out, "partial: {}", for_terminal(p));
    }
    text
}

fn list_or_unknown(items: &[String]) -> String {
    if items.is_empty() {
        "unknown".into()
    } else {
        items.join(" and ")
    }
}

/// `0-7, 9` for a sorted list of numbers; `-` for none.
fn ranks_text(numbers: &[u32]) -> String {
    if numbers.is_empty() {
        return "-".into();
    }
    let mut sorted = numbers.to_vec();
    sorted.sort_unstable();
    let mut out: Vec<String> = Vec::new();
    let mut start = sorted[0];
    let mut prev = start;
    for &n in &sorted[1..] {
        if n != prev + 1 {
            out.push(span(start, prev));
            start = n;
        }
        prev = n;
    }
    out.push(span(start, prev));
    out.join(", ")
}

fn span(a: u32, b: u32) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a}-{b}")
    }
}
