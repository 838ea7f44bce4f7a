//! `route check`: every CA port to every destination LID, without tracing pairs one by one.
//!
//! Forwarding depends only on (switch, destination LID), so for each destination the LFTs
//! form a functional graph over switches (each switch has at most one successor). One pass
//! per destination resolves every switch (delivered at distance k, broken at switch z, or
//! caught in a loop), and the sources behind each switch are accumulated along that tree:
//! O(switches) per destination instead of O(sources x hops). Link route counts, hop
//! histograms and channel dependencies all come out of the same pass.
//!
//! The rooms: [`report`] (options and results), [`endpoints`] (sources and
//! destinations), [`walk`] (the per-destination pass), [`balance`] (layers and link
//! loads), [`credit`] (the channel dependency graph).

mod balance;
mod credit;
mod endpoints;
mod report;
mod walk;

pub use report::{
    BreakKind, BreakSummary, CdgStats, CheckOptions, CreditLoop, Direction, ForwardingLoop,
    LayerStats, PortLoad, RouteBalance, RouteReport, SwitchLftBalance, UnreachableDest,
};

use crate::model::refs::NodeRef;
use crate::model::Fabric;
use crate::routing::index::Index;

use endpoints::Endpoints;
use walk::{node_ref, Totals, Walk};

/// Check every route from every CA port to every destination LID (CA port LIDs with their
/// LMC range, and switch LIDs unless disabled). See [`RouteReport`]; one VL is assumed.
pub fn check(fabric: &Fabric, opts: &CheckOptions) -> RouteReport {
    let idx = Index::new(fabric);
    let ends = Endpoints::new(fabric, &idx, opts);
    let mut walk = Walk::new(fabric, &idx, &ends, opts);
    for &(lid, owner, is_ca) in &ends.dests {
        walk.destination(lid, owner, is_ca);
    }
    let totals = walk.finish();
    report(fabric, &idx, &ends, totals, opts)
}

/// Every place routes break, most pairs first.
fn break_summaries(fabric: &Fabric, totals: &mut Totals) -> Vec<BreakSummary> {
    let mut breaks: Vec<BreakSummary> = totals
        .breaks
        .drain()
        .map(|((node, kind, port), a)| BreakSummary {
            at: node_ref(fabric, node),
            kind,
            port,
            destinations: a.destinations,
            pairs: a.pairs,
            example_lids: a.example_lids,
        })
        .collect();
    breaks.sort_by(|a, b| {
        b.pairs
            .cmp(&a.pairs)
            .then(b.destinations.cmp(&a.destinations))
            .then(a.at.guid.cmp(&b.at.guid))
            .then(a.port.cmp(&b.port))
    });
    breaks
}

fn report(
    fabric: &Fabric,
    idx: &Index,
    ends: &Endpoints,
    mut totals: Totals,
    opts: &CheckOptions,
) -> RouteReport {
    let breaks = break_summaries(fabric, &mut totals);
    let hist = std::mem::take(&mut totals.hist);
    let delivered: u64 = hist.iter().sum();
    let mean_hops = if delivered == 0 {
        0.0
    } else {
        hist.iter()
            .enumerate()
            .map(|(h, &c)| h as f64 * c as f64)
            .sum::<f64>()
            / delivered as f64
    };
    let max_hops = hist.iter().rposition(|&c| c > 0).unwrap_or(0);
    let balance = balance::balance(fabric, idx, ends, &totals, opts);
    let (cdg, credit_loops_found, credit_loops) =
        credit::credit_loops(fabric, idx, ends, &totals, opts);
    let lft_not_read = ends
        .sw
        .iter()
        .filter(|&&s| !idx.has_lft(s))
        .map(|&s| NodeRef::new(fabric, s))
        .collect();
    let (pairs_ok, pairs_broken, pairs_looping) =
        (totals.pairs_ok, totals.pairs_broken, totals.pairs_looping);
    RouteReport {
        sources: ends.sources.len(),
        sources_down: ends.down_sources.len(),
        destinations: ends.dests.len(),
        ca_destinations: ends.ca_destinations,
        switch_destinations: ends.switch_destinations,
        pairs: pairs_ok + pairs_broken + pairs_looping,
        pairs_ok,
        pairs_broken,
        pairs_looping,
        lft_not_read,
        breaks,
        unreachable_destinations: totals.unreachable_count,
        unreachable: totals.unreachable,
        loops_found: totals.loops_found,
        loops: totals.loops,
        hop_histogram: hist,
        max_hops,
        mean_hops,
        balance,
        cdg,
        credit_loops_found,
        credit_loops,
        notes: vec![
            "one VL assumed: SL-to-VL mapping is not modelled, so a credit loop is a deadlock risk \
             only if its routes share a VL"
                .into(),
            "link route counts include delivered CA-to-CA routes only".into(),
        ],
    }
}
