//! The PMA requests of a sweep or a reset, and their checked replies.

use std::collections::HashMap;

use ibscope_mad::attr::{
    ClassPortInfo, CounterValue, PortCounters, PortCountersExtended, PortSelected,
};
use ibscope_mad::engine::{MadError, Request, Response};
use ibscope_mad::header::method;

use super::targets::CounterTarget;
use crate::model::NodeId;

/// PortSelect asking a switch PMA for the sum over all its ports (IBA 16.1.3.5), accepted
/// when its ClassPortInfo CapabilityMask has AllPortSelect.
pub const ALL_PORTS: u8 = 0xff;

/// A PortCounters-family request to one port: PortSelect and CounterSelect in the payload.
pub(super) fn port_request<A: PortSelected>(
    t: &CounterTarget,
    method_code: u8,
    counter_select: u16,
) -> Request {
    Request::with_value(
        &t.lid,
        method_code,
        0,
        &A::selecting(t.port, counter_select),
    )
}

pub(super) fn class_port_info_request(lid: u16) -> Request {
    Request::get::<ClassPortInfo>(&lid, 0)
}

/// What a request of a batch asks; `usize` is a target index, or a group index.
pub(super) enum Query {
    ClassPortInfo(usize),
    Counters(usize),
    Extended(usize),
    /// PortCounters with PortSelect 0xFF, of group `usize` (a switch).
    AllPorts(usize),
    /// PortCountersExtended with PortSelect 0xFF, of group `usize`.
    AllPortsExtended(usize),
}

/// Targets grouped by node: the LID ClassPortInfo goes to, and the target indexes.
pub(super) fn group(targets: &[CounterTarget]) -> Vec<(u16, Vec<usize>)> {
    let mut by_node: HashMap<NodeId, usize> = HashMap::new();
    let mut groups: Vec<(u16, Vec<usize>)> = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        match by_node.get(&t.node) {
            Some(&g) => groups[g].1.push(i),
            None => {
                by_node.insert(t.node, groups.len());
                groups.push((t.lid, vec![i]));
            }
        }
    }
    groups
}

/// A PortCounters (`extended` false) or PortCountersExtended reply, checked: it must answer
/// for PortSelect `want` (a PMA that ignores PortSelect would otherwise give another port's
/// values). The error does not name the attribute; callers add that.
pub(super) fn decode_counter_reply(
    result: Result<Response, MadError>,
    extended: bool,
    want: u8,
) -> Result<Vec<CounterValue>, String> {
    let r = result.map_err(|e| e.to_string())?;
    let (port_select, values) = if extended {
        let c = r
            .decode::<PortCountersExtended>()
            .map_err(|e| format!("malformed reply: {e}"))?;
        (c.port_select, c.counters())
    } else {
        let c = r
            .decode::<PortCounters>()
            .map_err(|e| format!("malformed reply: {e}"))?;
        (c.port_select, c.counters())
    };
    if port_select != want {
        return Err(format!("reply is for port {port_select} (asked {want})"));
    }
    Ok(values)
}

/// Queue the per-port reads of `members`.
pub(super) fn push_port_reads(
    out: &mut Vec<(Query, Request)>,
    targets: &[CounterTarget],
    members: &[usize],
    counters: bool,
    extended: bool,
) {
    for &i in members {
        let t = targets[i];
        if counters {
            out.push((
                Query::Counters(i),
                port_request::<PortCounters>(&t, method::GET, 0),
            ));
        }
        if extended {
            out.push((
                Query::Extended(i),
                port_request::<PortCountersExtended>(&t, method::GET, 0),
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibscope_mad::attribute::{Attribute, PerfMgt};

    #[test]
    fn payload_puts_port_select_in_byte_1() {
        let t = CounterTarget {
            node: NodeId::new(0),
            port: 7,
            lid: 1,
        };
        let r = port_request::<PortCountersExtended>(&t, method::SET, 0xffff);
        assert_eq!(&r.payload::<PerfMgt>()[..4], &[0, 7, 0xff, 0xff]);
        assert_eq!(r.header().unwrap().attribute_id, PortCountersExtended::ID);
        assert_eq!(r.header().unwrap().method, method::SET);
    }
}
