//! What an nccl-tests output says of itself, as findings of the one table:
//!
//! - `nccl-curve-collapse`: busbw falls below half of what the run reached at a smaller
//!   bandwidth-bound size and stays there for at least two sizes (a protocol switch, memory
//!   registration, a link failing under load), with the range named;
//! - `nccl-tests-without-mpi`: processes that each ran the test alone where one job was
//!   meant (nccl-tests built without MPI, or launched without it): runs of one process
//!   each whose lines interleave, a job of one rank (busbw 0 at every size, `nranks 1`)
//!   printed by several processes.

use std::collections::BTreeSet;

use ibscope_topo::findings::{Evidence, Finding, FindingKind};

use crate::chart::human_size;
use crate::log::NcclLog;
use crate::perf::PerfRun;
use crate::predict::{Judgement, Verdict};

/// Below this share of an earlier size's busbw, a size has collapsed.
const COLLAPSED: f64 = 0.5;
/// An earlier size counts as a peak from this share of the run's best busbw on (noise at
/// a run's small sizes is no peak).
const PEAK_SHARE: f64 = 0.25;

fn at(run: &PerfRun, line: usize) -> Evidence {
    Evidence {
        file: run.source.clone(),
        line,
    }
}

/// A collapse of `run`'s curve, judged in `j`.
pub fn collapse(run: &PerfRun, j: &Judgement) -> Option<Finding> {
    // The rows judged, in order, with their lines: (size, busbw, line).
    let rows: Vec<(u64, f64, usize)> = run
        .rows
        .iter()
        .filter(|r| r.best().is_some())
        .zip(&j.sizes)
        .filter(|(_, s)| s.verdict != Verdict::LatencyBound)
        .map(|(r, s)| (s.size, s.busbw, r.line))
        .collect();
    if rows.windows(2).any(|w| w[1].0 <= w[0].0) {
        // Interleaved or repeated tables: no one curve to follow.
        return None;
    }
    let best = rows.iter().map(|r| r.1).fold(0.0, f64::max);
    let mut peak: Option<(u64, f64, usize)> = None;
    let mut i = 0;
    while i < rows.len() {
        if let Some(p) = peak.filter(|p| p.1 >= PEAK_SHARE * best && p.1 > 0.0) {
            let low = |r: &(u64, f64, usize)| r.1 < COLLAPSED * p.1;
            if low(&rows[i]) {
                let mut k = i;
                while k + 1 < rows.len() && low(&rows[k + 1]) {
                    k += 1;
                }
                if k > i {
                    return Some(collapse_finding(run, p, &rows[i..=k], rows.get(k + 1)));
                }
                i = k + 1;
                continue;
            }
        }
        if peak.map_or(true, |p| rows[i].1 > p.1) {
            peak = Some(rows[i]);
        }
        i += 1;
    }
    None
}

fn collapse_finding(
    run: &PerfRun,
    peak: (u64, f64, usize),
    down: &[(u64, f64, usize)],
    after: Option<&(u64, f64, usize)>,
) -> Finding {
    let lowest = down
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .expect("a collapse has sizes");
    let back = match after {
        Some(a) => format!(", back to {:.2} GB/s at {}", a.1, human_size(a.0)),
        None => ", to the largest size measured".to_string(),
    };
    let mut f = Finding::new(
        FindingKind::NcclCurveCollapse,
        format!(
            "busbw falls from {:.2} GB/s at {} to {:.2} GB/s at {} and stays below half of it \
             from {} to {}{back}",
            peak.1,
            human_size(peak.0),
            lowest.1,
            human_size(lowest.0),
            human_size(down[0].0),
            human_size(down[down.len() - 1].0),
        ),
    );
    let mut lines = vec![peak.2, down[0].2, lowest.2];
    lines.extend(after.map(|a| a.2));
    lines.sort_unstable();
    lines.dedup();
    f.evidence = lines.into_iter().map(|l| at(run, l)).collect();
    f
}

/// Runs of one file that were separate one-process jobs where one job was meant; `log`
/// holds the NCCL lines of the same files.
pub fn without_mpi(runs: &[&PerfRun], log: &NcclLog) -> Option<Finding> {
    let first = runs.first()?;
    let one_process: Vec<&&PerfRun> = runs
        .iter()
        .filter(|r| match r.processes().len() {
            0 => r.busbw_factor() == Some(0.0),
            n => n == 1,
        })
        .collect();
    let one_rank: Vec<&&PerfRun> = runs
        .iter()
        .filter(|r| r.busbw_factor() == Some(0.0))
        .collect();
    let single_comms: Vec<_> = log
        .processes
        .values()
        .filter_map(|p| p.nranks.as_ref())
        .filter(|n| n.value == 1)
        .collect();
    let repeated: Vec<usize> = runs
        .iter()
        .flat_map(|r| {
            r.rows
                .windows(2)
                .filter(|w| w[1].size <= w[0].size)
                .map(|w| w[1].line)
        })
        .collect();
    let interleaved = runs.iter().any(|r| r.interleaved) || repeated.len() >= 2;
    let concurrent = interleaved || single_comms.len() >= 2;
    let fires = (!one_rank.is_empty() || single_comms.len() >= 2)
        && (concurrent || one_process.len() >= 2)
        || one_process.len() >= 2 && concurrent;
    if !fires {
        return None;
    }
    let mut signs: Vec<String> = Vec::new();
    let mut evidence: BTreeSet<Evidence> = BTreeSet::new();
    if one_process.len() >= 2 {
        signs.push(format!(
            "{} runs of one process each, each with its own header",
            one_process.len()
        ));
        evidence.extend(one_process.iter().take(3).map(|r| at(r, r.first_line)));
    }
    if !one_rank.is_empty() {
        signs.push("busbw 0 at every size with algbw above 0: a job of one rank".into());
        evidence.extend(
            one_rank
                .iter()
                .filter_map(|r| r.rows.last())
                .map(|x| at(first, x.line)),
        );
    }
    if interleaved {
        signs.push("their lines interleave (processes printing at once)".into());
        evidence.extend(repeated.iter().take(2).map(|l| at(first, *l)));
    }
    if single_comms.len() >= 2 {
        signs.push(format!(
            "{} processes built a communicator of 1 rank (nranks 1)",
            single_comms.len()
        ));
        evidence.extend(single_comms.iter().take(2).map(|n| log.evidence(n.at)));
    }
    let mut f = Finding::new(
        FindingKind::NcclTestsWithoutMpi,
        format!(
            "nccl-tests ran as separate one-process jobs, not as one job: {}",
            signs.join("; ")
        ),
    );
    f.evidence = evidence.into_iter().take(8).collect();
    Some(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{self, Job};

    /// A run of `busbw(size)` from 8 B to 8 GiB, judged alone.
    fn judged(busbw: impl Fn(u64) -> f64) -> (PerfRun, Judgement) {
        let sizes: Vec<(u64, f64)> = (3..=33).map(|p| 1u64 << p).map(|s| (s, busbw(s))).collect();
        let text = synthetic::perf_text(&Job::new(2, 8), "all_reduce", &sizes);
        let run = crate::perf::parse(&text, "run.txt").remove(0);
        let j = crate::predict::judge(&run, None, &[]);
        (run, j)
    }

    fn healthy(s: u64) -> f64 {
        let bus = 1.875 * s as f64;
        bus / (30e-6 + bus / 40e9) / 1e9
    }

    /// The curve: 30 GB/s at 8 MB, 0.8 GB/s at 64 MB, back only at 4 GB.
    #[test]
    fn a_curve_that_collapses_mid_size_and_stays_down() {
        let (run, j) = judged(|s| match s {
            s if s <= 8 << 20 => healthy(s) * 30.0 / healthy(8 << 20),
            s if s < 4 << 30 => 0.8,
            _ => 36.0,
        });
        let f = collapse(&run, &j).expect("a collapse");
        assert!(
            f.message.contains("from 30.00 GB/s at 8MiB to 0.80 GB/s")
                && f.message
                    .contains("from 16MiB to 2GiB, back to 36.00 GB/s at 4GiB"),
            "{}",
            f.message
        );
        assert_eq!(f.evidence.len(), 3);
        // A healthy curve, and one size that dips and recovers, are no collapse.
        assert!(collapse(&judged(healthy).0, &judged(healthy).1).is_none());
        let (run, j) = judged(|s| if s == 64 << 20 { 1.0 } else { healthy(s) });
        assert!(collapse(&run, &j).is_none());
    }
}
