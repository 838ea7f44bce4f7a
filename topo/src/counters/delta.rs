//! What changed between two sweeps: per counter the delta and the rate, with resets and
//! saturation marked rather than turned into nonsense rates.

use std::collections::HashMap;
use std::time::Duration;

use serde::Serialize;

use super::sample::{PortSample, Sample};
use crate::model::refs::PortRef;
use crate::model::PortKey;

/// One counter's change between two samples.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CounterDelta {
    pub name: &'static str,
    pub previous: u64,
    pub current: u64,
    /// `current - previous`; `None` when the counter was reset or is saturated.
    pub delta: Option<u64>,
    /// Per second (bytes/s for data counters); `None` as for `delta`.
    pub per_second: Option<f64>,
    /// The counter went backwards: it was cleared (or wrapped) in between.
    pub reset: bool,
    /// It sits at its maximum (no extended counterpart): it no longer counts.
    pub saturated: bool,
}

/// One port's changes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PortDelta {
    #[serde(flatten)]
    pub at: PortRef,
    pub remote: Option<PortRef>,
    pub interval_s: f64,
    pub counters: Vec<CounterDelta>,
}

/// Changes from `prev` to `cur`, `dt` apart. Ports are matched by node GUID and port;
/// a port missing from either sample is left out.
pub fn diff(prev: &Sample, cur: &Sample, dt: Duration) -> Vec<PortDelta> {
    let secs = dt.as_secs_f64();
    let before: HashMap<PortKey, &PortSample> =
        prev.ports.iter().map(|p| (p.at.key(), p)).collect();
    let mut out = Vec::new();
    for c in &cur.ports {
        let Some(p) = before.get(&c.at.key()) else {
            continue;
        };
        let mut counters = Vec::new();
        for (name, now) in c.effective() {
            let Some(then) = p.value(name) else { continue };
            let saturated = c.is_saturated(name) || p.is_saturated(name);
            let reset = now < then;
            let delta = (!reset && !saturated).then(|| now - then);
            let per_second = delta.and_then(|d| (secs > 0.0).then(|| d as f64 / secs));
            counters.push(CounterDelta {
                name,
                previous: then,
                current: now,
                delta,
                per_second,
                reset,
                saturated,
            });
        }
        out.push(PortDelta {
            at: c.at.clone(),
            remote: c.remote.clone(),
            interval_s: secs,
            counters,
        });
    }
    out
}

/// Every port's counters read twice, `interval` apart, and their changes.
pub fn changes_over<E: crate::discover::SmpExecutor>(
    exec: &mut E,
    fabric: &crate::Fabric,
    names: Option<&crate::namemap::NameMap>,
    interval: Duration,
) -> Vec<PortDelta> {
    let targets = super::targets(fabric, None, None);
    let before = super::sweep(exec, fabric, &targets, names);
    let started = std::time::Instant::now();
    std::thread::sleep(interval);
    let after = super::sweep(exec, fabric, &targets, names);
    diff(&before, &after, started.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::sample::test_support::{port_sample as sample, wrap};

    #[test]
    fn diff_gives_rates_and_marks_resets_and_saturation() {
        let a = wrap(sample(
            &[
                ("SymbolErrorCounter", 5),
                ("PortRcvErrors", 1),
                ("VL15Dropped", 65535),
            ],
            Some(&[("PortXmitData", 1000)]),
            &["VL15Dropped"],
        ));
        let b = wrap(sample(
            &[
                ("SymbolErrorCounter", 2),
                ("PortRcvErrors", 11),
                ("VL15Dropped", 65535),
            ],
            Some(&[("PortXmitData", 3000)]),
            &["VL15Dropped"],
        ));
        let d = diff(&a, &b, Duration::from_secs(2));
        assert_eq!(d.len(), 1);
        let get = |n: &str| d[0].counters.iter().find(|c| c.name == n).unwrap().clone();
        let sym = get("SymbolErrorCounter");
        assert!(sym.reset);
        assert_eq!((sym.delta, sym.per_second), (None, None));
        let rcv = get("PortRcvErrors");
        assert_eq!((rcv.delta, rcv.per_second), (Some(10), Some(5.0)));
        let data = get("PortXmitData");
        assert_eq!(data.per_second, Some(1000.0));
        let vl = get("VL15Dropped");
        assert!(vl.saturated && vl.delta.is_none() && !vl.reset);
    }
}
