//! The PMA requests of a sweep or a reset, and their checked replies.

use ibscope_mad::attr::{
    perf_attrs, ClassPortInfo, CounterValue, PmaCapabilities, PortCounters, PortCountersExtended,
    PortExtendedSpeedsCounters, PortExtendedSpeedsCountersRsFec, PortRcvErrorDetails, PortSelected,
    PortXmitDiscardDetails,
};
use ibscope_mad::engine::{FollowUps, MadError, PackedRequest, PortSelectGet, Request, Response};
use ibscope_mad::header::{method, MadStatusCode};

use super::targets::CounterTarget;

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
pub(super) enum PmaQuery {
    ClassPortInfo(usize),
    Counters(usize),
    Extended(usize),
    /// PortCounters with PortSelect 0xFF, of group `usize` (a switch).
    AllPorts(usize),
    /// PortCountersExtended with PortSelect 0xFF, of group `usize`.
    AllPortsExtended(usize),
    /// A breakdown attribute of a target.
    Breakdown(usize, BreakdownKind),
    /// The PortInfo that says whether a target's port has PortInfoExtended (port 0's on a
    /// switch, as perfquery reads it).
    FecPortInfo(usize),
    /// The PortInfoExtended that says whether a target's port runs RS-FEC.
    FecMode(usize),
    /// PortExtendedSpeedsCounters of a target, in the RS-FEC layout or not.
    ExtendedSpeeds(usize, bool),
}

/// The breakdown attributes a sweep reads, in [`perf_attrs::BREAKDOWNS`] order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BreakdownKind {
    RcvErrors,
    XmitDiscards,
}

impl BreakdownKind {
    pub(super) const ALL: [BreakdownKind; 2] =
        [BreakdownKind::RcvErrors, BreakdownKind::XmitDiscards];

    /// Its facts: which counter it explains, the attribute's name.
    pub(super) fn facts(self) -> &'static perf_attrs::Breakdown {
        &perf_attrs::BREAKDOWNS[self as usize]
    }
    pub(super) fn request(self, t: &CounterTarget) -> Request {
        match self {
            BreakdownKind::RcvErrors => port_request::<PortRcvErrorDetails>(t, method::GET, 0),
            BreakdownKind::XmitDiscards => {
                port_request::<PortXmitDiscardDetails>(t, method::GET, 0)
            }
        }
    }
    /// Its Set clearing every counter of the attribute.
    pub(super) fn clear(self, t: &CounterTarget) -> Request {
        match self {
            BreakdownKind::RcvErrors => port_request::<PortRcvErrorDetails>(t, method::SET, 0xffff),
            BreakdownKind::XmitDiscards => {
                port_request::<PortXmitDiscardDetails>(t, method::SET, 0xffff)
            }
        }
    }
    pub(super) fn decode(
        self,
        result: Result<Response, MadError>,
        want: u8,
    ) -> Result<Vec<CounterValue>, String> {
        match self {
            BreakdownKind::RcvErrors => {
                decode_reply::<PortRcvErrorDetails>(result, want, PmaCapabilities::ALL)
            }
            BreakdownKind::XmitDiscards => {
                decode_reply::<PortXmitDiscardDetails>(result, want, PmaCapabilities::ALL)
            }
        }
    }
}

/// PortExtendedSpeedsCounters of a target, in the RS-FEC layout or not.
pub(super) fn extended_speeds_request(t: &CounterTarget, rs_fec: bool) -> Request {
    if rs_fec {
        port_request::<PortExtendedSpeedsCountersRsFec>(t, method::GET, 0)
    } else {
        port_request::<PortExtendedSpeedsCounters>(t, method::GET, 0)
    }
}

/// A PortExtendedSpeedsCounters reply in the layout asked for.
pub(super) fn decode_extended_speeds(
    result: Result<Response, MadError>,
    want: u8,
    rs_fec: bool,
) -> Result<Vec<CounterValue>, String> {
    if rs_fec {
        decode_reply::<PortExtendedSpeedsCountersRsFec>(result, want, PmaCapabilities::ALL)
    } else {
        decode_reply::<PortExtendedSpeedsCounters>(result, want, PmaCapabilities::ALL)
    }
}

/// The PMA answered that it does not implement the attribute: absent, not an error.
pub(super) fn not_implemented(result: &Result<Response, MadError>) -> bool {
    matches!(
        result,
        Err(MadError::Status(s)) if matches!(
            s.code(),
            MadStatusCode::MethodAttributeUnsupported | MadStatusCode::MethodUnsupported
        )
    )
}

/// Targets grouped by node: the LID ClassPortInfo goes to, and the target indexes.
pub(super) fn group(targets: &[CounterTarget]) -> Vec<(u16, Vec<usize>)> {
    // A node's group by node index: targets come node by node from a fabric, whose
    // indexes are dense (hashing 700k targets at 100k HCAs showed in check's profile).
    let slots = targets
        .iter()
        .map(|t| t.node.index() + 1)
        .max()
        .unwrap_or(0);
    let mut by_node: Vec<Option<usize>> = vec![None; slots];
    let mut groups: Vec<(u16, Vec<usize>)> = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        let slot = &mut by_node[t.node.index()];
        match *slot {
            Some(g) => groups[g].1.push(i),
            None => {
                *slot = Some(groups.len());
                groups.push((t.lid, vec![i]));
            }
        }
    }
    groups
}

/// A counters reply of attribute `A`, checked: it must answer for PortSelect `want` (a PMA
/// that ignores PortSelect would otherwise give another port's values). Its counters are
/// those a PMA with `capabilities` implements. The error does not name the attribute;
/// callers add that.
pub(super) fn decode_reply<A: PortSelected>(
    result: Result<Response, MadError>,
    want: u8,
    capabilities: PmaCapabilities,
) -> Result<Vec<CounterValue>, String> {
    let mut values = Vec::new();
    decode_reply_into::<A>(result, want, capabilities, &mut values)?;
    Ok(values)
}

/// [`decode_reply`] into `out` (cleared first; left empty on an error).
fn decode_reply_into<A: PortSelected>(
    result: Result<Response, MadError>,
    want: u8,
    capabilities: PmaCapabilities,
    out: &mut Vec<CounterValue>,
) -> Result<(), String> {
    out.clear();
    let r = result.map_err(|e| e.to_string())?;
    let port_select = A::counter_values_from_wire(r.payload::<A::Class>(), capabilities, out)
        .map_err(|e| {
            out.clear();
            format!("malformed reply: {e}")
        })?;
    if port_select != want {
        out.clear();
        return Err(format!("reply is for port {port_select} (asked {want})"));
    }
    Ok(())
}

/// A PortCounters (`extended` false) or PortCountersExtended reply, checked as
/// [`decode_reply`] does; PortCounters' counters are those of
/// [`ASSUMED_CAPABILITIES`](perf_attrs::ASSUMED_CAPABILITIES), PortCountersExtended's those
/// `capabilities` say the PMA has.
pub(super) fn decode_counter_reply(
    result: Result<Response, MadError>,
    extended: bool,
    want: u8,
    capabilities: PmaCapabilities,
) -> Result<Vec<CounterValue>, String> {
    let mut values = Vec::new();
    decode_counter_reply_into(result, extended, want, capabilities, &mut values)?;
    Ok(values)
}

/// [`decode_counter_reply`] into `out` (cleared first; left empty on an error): a port's
/// reply is turned into its [`CounterSet`](super::CounterSet) straight away, so the buffer
/// serves every reply of a sweep.
pub(super) fn decode_counter_reply_into(
    result: Result<Response, MadError>,
    extended: bool,
    want: u8,
    capabilities: PmaCapabilities,
    out: &mut Vec<CounterValue>,
) -> Result<(), String> {
    if extended {
        decode_reply_into::<PortCountersExtended>(result, want, capabilities, out)
    } else {
        let assumed = perf_attrs::ASSUMED_CAPABILITIES;
        decode_reply_into::<PortCounters>(result, want, assumed, out)
    }
}

/// Queue the per-port reads of `members`.
pub(super) fn push_port_reads(
    out: &mut FollowUps<PmaQuery>,
    targets: &[CounterTarget],
    members: &[usize],
    counters: bool,
    extended: bool,
) {
    let reads = reads();
    for &i in members {
        let t = &targets[i];
        if counters {
            out.push_packed(PmaQuery::Counters(i), reads.counters.to(t.lid, t.port));
        }
        if extended {
            out.push_packed(PmaQuery::Extended(i), reads.extended.to(t.lid, t.port));
        }
    }
}

/// The PortCounters read of target `i`.
pub(super) fn counters_read(targets: &[CounterTarget], i: usize) -> (PmaQuery, PackedRequest) {
    let t = &targets[i];
    (PmaQuery::Counters(i), reads().counters.to(t.lid, t.port))
}

/// The Gets of a port's PortCounters and PortCountersExtended, framed once: a sweep makes
/// two reads per port (what [`port_request`] frames with `method::GET` and no
/// CounterSelect, packed without framing each).
struct Reads {
    counters: PortSelectGet,
    extended: PortSelectGet,
}

fn reads() -> &'static Reads {
    static READS: std::sync::OnceLock<Reads> = std::sync::OnceLock::new();
    READS.get_or_init(|| Reads {
        counters: PortSelectGet::new::<PortCounters>(),
        extended: PortSelectGet::new::<PortCountersExtended>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NodeId;
    use ibscope_mad::attribute::{Attribute, PerfMgt};

    #[test]
    fn targets_group_by_node_in_the_order_nodes_first_come() {
        let t = |node: usize, port: u8, lid: u16| CounterTarget {
            node: NodeId::new(node),
            port,
            lid,
        };
        let targets = [t(7, 1, 30), t(2, 0, 4), t(7, 2, 30), t(2, 1, 4), t(0, 1, 9)];
        assert_eq!(
            group(&targets),
            [(30, vec![0, 2]), (4, vec![1, 3]), (9, vec![4])]
        );
        assert!(group(&[]).is_empty());
    }

    #[test]
    fn breakdowns_follow_the_table() {
        assert_eq!(
            BreakdownKind::RcvErrors.facts().attribute,
            PortRcvErrorDetails::NAME
        );
        assert_eq!(
            BreakdownKind::XmitDiscards.facts().attribute,
            PortXmitDiscardDetails::NAME
        );
        let t = CounterTarget {
            node: NodeId::new(0),
            port: 3,
            lid: 9,
        };
        for b in BreakdownKind::ALL {
            let r = b.request(&t);
            assert_eq!(
                r.header().unwrap().attribute_id,
                if b == BreakdownKind::RcvErrors {
                    PortRcvErrorDetails::ID
                } else {
                    PortXmitDiscardDetails::ID
                }
            );
            assert_eq!(r.payload::<PerfMgt>()[1], 3);
        }
    }

    /// The reads packed from the templates are what `port_request` frames, to any port
    /// at any LID.
    #[test]
    fn packed_reads_are_what_port_request_frames() {
        for (lid, port) in [(1, 0), (0xbfff, 1), (77, 36), (0xffff, 255)] {
            let t = CounterTarget {
                node: NodeId::new(0),
                port,
                lid,
            };
            let mut out = FollowUps::new();
            push_port_reads(&mut out, &[t], &[0], true, true);
            let (_, first) = counters_read(&[t], 0);
            out.push_packed(PmaQuery::Counters(0), first);
            let framed = [
                port_request::<PortCounters>(&t, method::GET, 0),
                port_request::<PortCountersExtended>(&t, method::GET, 0),
                port_request::<PortCounters>(&t, method::GET, 0),
            ];
            let got: Vec<Request> = out.drain().map(|(_, r)| r).collect();
            assert_eq!(got, framed, "lid {lid} port {port}");
        }
    }

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
