//! Clearing counters: the one write of the counters module (`counters --reset`).

use ibscope_mad::attr::{pma_capability, ClassPortInfo, PortCounters, PortCountersExtended};
use ibscope_mad::engine::Request;
use ibscope_mad::header::method;
use serde::Serialize;

use super::pma::{class_port_info_request, group, port_request, Query};
use super::targets::CounterTarget;
use crate::discover::SmpExecutor;
use crate::health::PortRef;
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
/// CounterSelect2 0xFF, and, where the PMA implements it, a PortCountersExtended Set with
/// CounterSelect 0xFF (the 64-bit counters are separate registers).
pub fn reset<E: SmpExecutor>(
    exec: &mut E,
    fabric: &Fabric,
    targets: &[CounterTarget],
    names: Option<&NameMap>,
) -> Vec<ResetResult> {
    let mut results: Vec<ResetResult> = targets
        .iter()
        .map(|t| ResetResult {
            at: PortRef {
                lid: t.lid,
                ..PortRef::new(fabric.node(t.node), t.port, names)
            },
            extended: false,
            errors: Vec::new(),
        })
        .collect();
    let groups = group(targets);
    let mut batch = Vec::new();
    for (g, (lid, members)) in groups.iter().enumerate() {
        batch.push((Query::ClassPortInfo(g), class_port_info_request(*lid)));
        for &i in members {
            let t = targets[i];
            let clear = PortCounters {
                port_select: t.port,
                counter_select: 0xffff,
                counter_select2: 0xff,
                ..Default::default()
            };
            batch.push((Query::Counters(i), Request::set(&t.lid, 0, &clear)));
        }
    }
    exec.execute(batch, &mut |q, result, out| match q {
        Query::ClassPortInfo(g) => {
            let mask = result
                .ok()
                .and_then(|r| r.decode::<ClassPortInfo>().ok())
                .map(|c| c.capability_mask);
            if mask.is_some_and(pma_capability::has_extended_counters) {
                for &i in &groups[g].1 {
                    let t = targets[i];
                    out.push((
                        Query::Extended(i),
                        port_request::<PortCountersExtended>(&t, method::SET, 0xffff),
                    ));
                }
            }
        }
        Query::Counters(i) => {
            if let Err(e) = result {
                results[i].errors.push(format!("PortCounters Set: {e}"));
            }
        }
        Query::Extended(i) => match result {
            Ok(_) => results[i].extended = true,
            Err(e) => results[i]
                .errors
                .push(format!("PortCountersExtended Set: {e}")),
        },
        // Never sent by reset.
        Query::AllPorts(_) | Query::AllPortsExtended(_) => {}
    });
    results
}
