//! Clearing counters: the one write of the counters module (`counters --reset`).

use ibscope_mad::attr::{
    pma_capability, ClassPortInfo, PmaCapabilities, PortCounters, PortCountersExtended,
};
use ibscope_mad::engine::Request;
use serde::Serialize;

use super::pma::{class_port_info_request, group, not_implemented, BreakdownKind, PmaQuery};
use super::targets::CounterTarget;
use crate::discover::SmpExecutor;
use crate::model::refs::PortRef;
use crate::model::Fabric;
use crate::namemap::NameMap;

/// Outcome of resetting one port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResetResult {
    #[serde(flatten)]
    pub at: PortRef,
    /// PortCountersExtended was cleared too.
    pub extended: bool,
    pub errors: Vec<String>,
}

/// Clear every counter of `targets`: a PortCounters Set with CounterSelect 0xFFFF and
/// CounterSelect2 0xFF; where the PMA implements it, a PortCountersExtended Set with
/// CounterSelect 0xFFFF (the 64-bit counters are separate registers) and, with the
/// additional counters, CounterSelect2 for them as ibqueryerrors sets it; and Sets of
/// PortRcvErrorDetails and PortXmitDiscardDetails (a PMA without them is passed over).
pub fn reset<E: SmpExecutor>(
    exec: &mut E,
    fabric: &Fabric,
    targets: &[CounterTarget],
    names: Option<&NameMap>,
) -> Vec<ResetResult> {
    let mut results: Vec<ResetResult> = targets
        .iter()
        .map(|t| ResetResult {
            at: PortRef::with_lid(fabric.node(t.node), t.port, t.lid, names),
            extended: false,
            errors: Vec::new(),
        })
        .collect();
    let groups = group(targets);
    let mut batch = Vec::new();
    for (g, (lid, members)) in groups.iter().enumerate() {
        batch.push((PmaQuery::ClassPortInfo(g), class_port_info_request(*lid)));
        for &i in members {
            let t = targets[i];
            let clear = PortCounters {
                port_select: t.port,
                counter_select: 0xffff,
                counter_select2: 0xff,
                ..Default::default()
            };
            batch.push((PmaQuery::Counters(i), Request::set(&t.lid, 0, &clear)));
        }
    }
    exec.execute(batch, &mut |q, result, out| match q {
        PmaQuery::ClassPortInfo(g) => {
            let caps = result
                .ok()
                .and_then(|r| r.decode::<ClassPortInfo>().ok())
                .map(|c| c.capabilities());
            for &i in &groups[g].1 {
                let t = targets[i];
                for b in BreakdownKind::ALL {
                    out.push((PmaQuery::Breakdown(i, b), b.clear(&t)));
                }
                if let Some(caps) = caps.filter(|c| pma_capability::has_extended_counters(c.mask)) {
                    out.push((PmaQuery::Extended(i), clear_extended(&t, caps)));
                }
            }
        }
        PmaQuery::Counters(i) => {
            if let Err(e) = result {
                results[i].errors.push(format!("PortCounters Set: {e}"));
            }
        }
        PmaQuery::Extended(i) => match result {
            Ok(_) => results[i].extended = true,
            Err(e) => results[i]
                .errors
                .push(format!("PortCountersExtended Set: {e}")),
        },
        PmaQuery::Breakdown(i, b) => {
            if result.is_err() && !not_implemented(&result) {
                let e = result.err().map(|e| e.to_string()).unwrap_or_default();
                results[i]
                    .errors
                    .push(format!("{} Set: {e}", b.facts().attribute));
            }
        }
        // Never sent by reset.
        PmaQuery::AllPorts(_)
        | PmaQuery::AllPortsExtended(_)
        | PmaQuery::FecPortInfo(_)
        | PmaQuery::FecMode(_)
        | PmaQuery::ExtendedSpeeds(..) => {}
    });
    results
}

/// The PortCountersExtended Set clearing every counter a PMA with `caps` has: CounterSelect
/// all ones, and CounterSelect2 for the twelve error counters and PortXmitWait (its bit 12)
/// with the additional counters, as ibqueryerrors clears them.
fn clear_extended(t: &CounterTarget, caps: PmaCapabilities) -> Request {
    let mut counter_select2 = 0;
    if caps.covers(ibscope_mad::attr::perf_attrs::ADDITIONAL_EXTENDED) {
        counter_select2 = 0x0fff;
        if caps.mask & pma_capability::IS_PORT_XMIT_WAIT_SUPPORTED != 0 {
            counter_select2 |= 1 << 12;
        }
    }
    let clear = PortCountersExtended {
        port_select: t.port,
        counter_select: 0xffff,
        counter_select2,
        ..Default::default()
    };
    Request::set(&t.lid, 0, &clear)
}
