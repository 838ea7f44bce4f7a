//! Port counters through the PMA of every port (PerfMgt class, LID routed).
//!
//! MAD budget per node: one ClassPortInfo (its CapabilityMask says whether
//! PortCountersExtended is implemented); per port one PortCounters and, when implemented,
//! one PortCountersExtended. Every request goes out through one executor batch; the
//! extended query follows the node's ClassPortInfo reply, so the window stays full.
//!
//! Ports covered, as perfquery and ibqueryerrors do: switch ports 1..=N at the switch's LID
//! (port 0 only with SwitchInfo.EnhancedPort0: a base port 0 has no PMA counters of its own),
//! and every CA or router port that has a LID, at that LID. The port is chosen by the
//! PortSelect field of the payload (IBA 16.1.3.5); the attribute modifier is 0.
//!
//! Units: PortXmitData and PortRcvData count 4-octet words on the wire; everything here is
//! in **bytes** (multiplied by 4). Saturation is judged on the wire value.
//!
//! Screening ([`sweep_screened`], what ibqueryerrors does): a switch whose PMA has
//! AllPortSelect is first asked for PortCounters with PortSelect 0xFF, the saturating sum
//! over its ports; its ports are read one by one only when [`screen`] says the sum leaves
//! room for a finding. CA ports are always read one by one.

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ibscope_mad::attr::perf_attrs;
use ibscope_mad::attr::{
    pma_capability, ClassPortInfo, CounterKind, CounterValue, PortCounters, PortCountersExtended,
    PortSelected,
};
use ibscope_mad::engine::{MadError, Request, Response};
use ibscope_mad::header::method;
use serde::{Deserialize, Serialize};

use crate::discover::SmpExecutor;
use crate::health::PortRef;
use crate::model::{End, Fabric, NodeId};
use crate::namemap::NameMap;

/// The counters thresholds and `check` look at: the PortCounters error counters
/// (IBA 16.1.3.5), as the PortCounters table marks them.
pub const ERROR_COUNTERS: &[&str] = &perf_attrs::ERROR_COUNTERS;

/// Counters whose extended 64-bit form replaces the 32-bit one when available.
const HAS_EXTENDED: [&str; perf_attrs::COUNTERS_WITH_EXTENDED_FORM.len()] =
    perf_attrs::COUNTERS_WITH_EXTENDED_FORM;

/// Every counter name known: PortCounters, then the extended-only ones.
pub fn known_counter(name: &str) -> bool {
    PORT_COUNTER_NAMES.contains(&name) || EXTENDED_ONLY.contains(&name)
}

/// PortCounters in specification order.
pub const PORT_COUNTER_NAMES: [&str; perf_attrs::PORT_COUNTER_NAMES.len()] =
    perf_attrs::PORT_COUNTER_NAMES;

/// PortCountersExtended counters in specification order.
pub const EXTENDED_COUNTER_NAMES: [&str; perf_attrs::EXTENDED_COUNTER_NAMES.len()] =
    perf_attrs::EXTENDED_COUNTER_NAMES;

/// PortCountersExtended counters without a PortCounters counterpart.
pub const EXTENDED_ONLY: [&str; perf_attrs::EXTENDED_ONLY_COUNTERS.len()] =
    perf_attrs::EXTENDED_ONLY_COUNTERS;

/// Counters in bytes (converted from 4-octet words).
pub fn is_data_counter(name: &str) -> bool {
    perf_attrs::counter_kind(name) == Some(CounterKind::Data)
}

/// A decoded counter in the units used here: data counters in bytes.
fn in_bytes(v: &CounterValue) -> u64 {
    if v.data_words() {
        v.value.saturating_mul(4)
    } else {
        v.value
    }
}

/// Named counter values in a fixed order; serializes as a JSON object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CounterSet(pub Vec<(String, u64)>);

impl CounterSet {
    pub fn get(&self, name: &str) -> Option<u64> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.0.iter().map(|(n, v)| (n.as_str(), *v))
    }
    /// From decoded wire values: data counters converted to bytes.
    fn from_values(values: &[CounterValue]) -> CounterSet {
        CounterSet(
            values
                .iter()
                .map(|v| (v.name.to_string(), in_bytes(v)))
                .collect(),
        )
    }
}

impl Serialize for CounterSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for CounterSet {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<CounterSet, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = CounterSet;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of counter name to value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<CounterSet, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, u64>()? {
                    out.push((k, v));
                }
                Ok(CounterSet(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// One port's counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortSample {
    #[serde(flatten)]
    pub at: PortRef,
    /// The far end of the port's link, if any.
    pub remote: Option<PortRef>,
    /// The PMA's ClassPortInfo CapabilityMask (0x200: PortCountersExtended).
    pub capability_mask: Option<u16>,
    /// PortCounters by specification name. PortXmitData/PortRcvData in bytes (the wire
    /// counts 4-octet words; multiplied by 4). `None` if the PMA did not answer.
    pub counters: Option<CounterSet>,
    /// PortCountersExtended (64-bit) by specification name, data in bytes; `None` when
    /// not implemented or not answered.
    pub extended: Option<CounterSet>,
    /// PortCounters counters at their maximum (they stop counting there).
    pub saturated: Vec<String>,
    /// Queries of this port that failed.
    pub errors: Vec<String>,
}

impl PortSample {
    /// The best value of a counter: the 64-bit extended one where there is one.
    pub fn value(&self, name: &str) -> Option<u64> {
        if let Some(ext) = &self.extended {
            if HAS_EXTENDED.contains(&name) || EXTENDED_ONLY.contains(&name) {
                if let Some(v) = ext.get(name) {
                    return Some(v);
                }
            }
        }
        self.counters.as_ref()?.get(name)
    }

    /// Saturated and not replaced by an extended value: the count is lost.
    pub fn is_saturated(&self, name: &str) -> bool {
        let replaced = self
            .extended
            .as_ref()
            .is_some_and(|e| e.get(name).is_some());
        !replaced && self.saturated.iter().any(|s| s == name)
    }

    /// Every counter with its best value, PortCounters order then extended-only ones.
    pub fn effective(&self) -> Vec<(&'static str, u64)> {
        PORT_COUNTER_NAMES
            .iter()
            .chain(EXTENDED_ONLY.iter())
            .filter_map(|n| self.value(n).map(|v| (*n, v)))
            .collect()
    }
}

/// One sweep.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    /// Unix time the sweep started, in milliseconds.
    pub time_ms: u64,
    pub duration_ms: u64,
    pub mads_sent: u64,
    /// Always "bytes": PortXmitData/PortRcvData are converted from 4-octet words.
    pub data_unit: String,
    pub ports: Vec<PortSample>,
}

/// A port whose PMA is to be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CounterTarget {
    pub node: NodeId,
    pub port: u8,
    /// Where the PMA answers: the switch's LID, or the CA port's own.
    pub lid: u16,
}

/// The ports to read: every node, or one node (and one port of it).
pub fn targets(fabric: &Fabric, only: Option<NodeId>, port: Option<u8>) -> Vec<CounterTarget> {
    let mut out = Vec::new();
    for (id, node) in fabric.nodes() {
        if only.is_some_and(|o| o != id) {
            continue;
        }
        if node.is_switch() {
            let Some(lid) = node.lid() else { continue };
            let enhanced = node.switch.as_ref().is_some_and(|s| s.enhanced_port0);
            let first = if enhanced || port == Some(0) { 0 } else { 1 };
            for p in first..=node.num_ports {
                if port.map_or(true, |want| want == p) {
                    out.push(CounterTarget {
                        node: id,
                        port: p,
                        lid,
                    });
                }
            }
        } else {
            for p in &node.ports {
                if p.lid != 0 && port.map_or(true, |want| want == p.number) {
                    out.push(CounterTarget {
                        node: id,
                        port: p.number,
                        lid: p.lid,
                    });
                }
            }
        }
    }
    out
}

/// A PortCounters-family request to one port: PortSelect and CounterSelect in the payload.
fn port_request<A: PortSelected>(
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

fn class_port_info_request(lid: u16) -> Request {
    Request::get::<ClassPortInfo>(&lid, 0)
}

enum Query {
    ClassPortInfo(usize),
    Counters(usize),
    Extended(usize),
    /// PortCounters with PortSelect 0xFF, of group `usize` (a switch).
    AllPorts(usize),
    /// PortCountersExtended with PortSelect 0xFF, of group `usize`.
    AllPortsExtended(usize),
}

/// Targets grouped by node: the LID ClassPortInfo goes to, and the target indexes.
fn group(targets: &[CounterTarget]) -> Vec<(u16, Vec<usize>)> {
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

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// PortSelect asking a switch PMA for the sum over all its ports (IBA 16.1.3.5), accepted
/// when its ClassPortInfo CapabilityMask has AllPortSelect.
pub const ALL_PORTS: u8 = 0xff;

/// A counter of an all-ports sum that may have stopped counting: at its own maximum, or at
/// the maximum of a narrower PortCounters field (ibsim 0.10 stops the PortXmitDiscards sum
/// at 255, the 8-bit PortXmitConstraintErrors limit). Such a sum bounds nothing.
fn sum_may_have_stopped(c: &CounterValue) -> bool {
    c.bits < 64
        && PortCounters::FIELDS
            .iter()
            .filter(|f| f.counter().is_some() && f.bit_width as u32 <= c.bits)
            .any(|f| c.value == f.max())
}

/// A port with PortCountersExtended answers this counter from it ([`PortSample::value`]).
fn has_extended_form(name: &str) -> bool {
    HAS_EXTENDED.contains(&name) || EXTENDED_ONLY.contains(&name)
}

/// What a switch's all-ports sum says about its ports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Screen {
    /// No port can have a counter finding: the ports need no per-port read.
    Clean,
    /// Some port may: read them one by one. The reason.
    DrillDown(String),
}

/// Whether a switch's ports need per-port reads, from its all-ports PortCounters
/// (`counters`, as decoded from the wire), its all-ports PortCountersExtended when read,
/// its PMA CapabilityMask and the thresholds.
///
/// The findings a per-port read can give are a counter above its threshold
/// ([`Thresholds::exceeded`]: strictly above) and a saturated counter with no 64-bit
/// replacement ([`PortSample::is_saturated`]). Counters are non-negative and the sum
/// saturates, so a sum at or below a threshold bounds every port, and a sum that has not
/// stopped counting means no port has. The 32-bit data and packet counters saturate in any
/// busy switch's sum: they matter only without PortCountersExtended (where a saturated one
/// is a finding per port). A threshold on a counter that ports answer from
/// PortCountersExtended needs the extended sum (`None`: drill down).
pub fn screen(
    counters: &[CounterValue],
    extended: Option<&[CounterValue]>,
    capability_mask: u16,
    thresholds: &Thresholds,
) -> Screen {
    let has_extended = pma_capability::has_extended_counters(capability_mask);
    for c in counters {
        if has_extended && HAS_EXTENDED.contains(&c.name) {
            continue;
        }
        if sum_may_have_stopped(c) {
            return Screen::DrillDown(format!(
                "{} = {} in the all-ports sum: it may have stopped counting",
                c.name, c.value
            ));
        }
    }
    for (name, limit) in &thresholds.limits {
        let name = name.as_str();
        let from_extended = has_extended && has_extended_form(name);
        let source = match (from_extended, extended) {
            (false, _) => counters,
            (true, Some(e)) => e,
            (true, None) => {
                return Screen::DrillDown(format!(
                    "{name} has a threshold and the all-ports PortCountersExtended is missing"
                ))
            }
        };
        // Not in the source: ports have no value for it either (never a finding).
        let Some(c) = source.iter().find(|c| c.name == name) else {
            continue;
        };
        let value = in_bytes(c);
        if value > *limit {
            return Screen::DrillDown(format!(
                "{name} = {value} in the all-ports sum, above its threshold {limit}"
            ));
        }
    }
    Screen::Clean
}

/// A switch whose all-ports sum cleared its ports: they were not read one by one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScreenedSwitch {
    /// The switch, at port 0 (its PMA).
    #[serde(flatten)]
    pub at: PortRef,
    /// The target ports the sum stood for.
    pub ports: Vec<u8>,
    pub capability_mask: u16,
    /// PortCounters summed over every port (PortSelect 0xFF), data in bytes.
    pub counters: CounterSet,
    /// PortCountersExtended summed likewise, when a threshold needed it.
    pub extended: Option<CounterSet>,
}

/// A switch whose ports were read one by one although its PMA has AllPortSelect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrilledSwitch {
    #[serde(flatten)]
    pub at: PortRef,
    /// Why: what the sum showed, or why it could not be read.
    pub reason: String,
}

/// A sweep with all-ports screening.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScreenedSweep {
    /// The ports read one by one, in target order. `mads_sent` and `duration_ms` cover the
    /// whole sweep, the sums included.
    pub sample: Sample,
    /// Switches cleared by their sum (their ports are not in `sample`).
    pub screened: Vec<ScreenedSwitch>,
    /// Switches with AllPortSelect whose ports were read anyway.
    pub drilled: Vec<DrilledSwitch>,
}

impl ScreenedSweep {
    /// Ports cleared by their switch's sum.
    pub fn ports_screened(&self) -> usize {
        self.screened.iter().map(|s| s.ports.len()).sum()
    }
    /// Every port covered: read one by one or cleared by a sum.
    pub fn ports_covered(&self) -> usize {
        self.sample.ports.len() + self.ports_screened()
    }
}

/// Read the counters of `targets`, every port one by one.
pub fn sweep<E: SmpExecutor>(
    exec: &mut E,
    fabric: &Fabric,
    targets: &[CounterTarget],
    names: Option<&NameMap>,
) -> Sample {
    run_sweep(exec, fabric, targets, names, None).sample
}

/// Read the counters of `targets` as ibqueryerrors does: a switch whose PMA has
/// AllPortSelect is read as one all-ports sum first, and port by port only when [`screen`]
/// says `thresholds` could find something there (or the sum cannot be read). Every other
/// port is read as [`sweep`] reads it, so it gives the same findings. All in one batch:
/// the sum follows the switch's ClassPortInfo, the per-port reads follow the sum.
///
/// A screened switch's ports are not read one by one: a port whose own counters would not
/// answer goes unnoticed there.
pub fn sweep_screened<E: SmpExecutor>(
    exec: &mut E,
    fabric: &Fabric,
    targets: &[CounterTarget],
    names: Option<&NameMap>,
    thresholds: &Thresholds,
) -> ScreenedSweep {
    run_sweep(exec, fabric, targets, names, Some(thresholds))
}

/// A switch's all-ports reads as they come in.
struct AllPortsState {
    mask: u16,
    counters: Option<Result<Vec<CounterValue>, String>>,
    /// `None` while pending or when not asked for.
    extended: Option<Result<Vec<CounterValue>, String>>,
    want_extended: bool,
}

/// A switch cleared by its sums: CapabilityMask, PortCounters sum, PortCountersExtended sum.
type ClearedSums = (u16, Vec<CounterValue>, Option<Vec<CounterValue>>);

/// A PortCounters (`extended` false) or PortCountersExtended reply, checked: it must answer
/// for PortSelect `want` (a PMA that ignores PortSelect would otherwise give another port's
/// values). The error does not name the attribute; callers add that.
fn decode_counter_reply(
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
fn push_port_reads(
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

/// The sweep; `screen_with`: screen switches against these thresholds.
fn run_sweep<E: SmpExecutor>(
    exec: &mut E,
    fabric: &Fabric,
    targets: &[CounterTarget],
    names: Option<&NameMap>,
    screen_with: Option<&Thresholds>,
) -> ScreenedSweep {
    let started = Instant::now();
    let time_ms = now_ms();
    let sent_before = exec.mads_sent();
    let mut ports: Vec<PortSample> = targets
        .iter()
        .map(|t| {
            let node = fabric.node(t.node);
            PortSample {
                at: PortRef {
                    lid: t.lid,
                    ..PortRef::new(node, t.port, names)
                },
                remote: fabric
                    .peer(End {
                        node: t.node,
                        port: t.port,
                    })
                    .map(|e| PortRef::new(fabric.node(e.node), e.port, names)),
                capability_mask: None,
                counters: None,
                extended: None,
                saturated: Vec::new(),
                errors: Vec::new(),
            }
        })
        .collect();
    let groups = group(targets);
    // Screened groups: switches. Their PortCounters wait for ClassPortInfo.
    let screened_group: Vec<bool> = groups
        .iter()
        .map(|(_, members)| {
            screen_with.is_some() && fabric.node(targets[members[0]].node).is_switch()
        })
        .collect();
    // Extended counters a threshold looks at: then the extended sum is needed too.
    let thresholds_need_extended =
        screen_with.is_some_and(|t| t.limits.iter().any(|(n, _)| has_extended_form(n)));
    let mut all_ports: Vec<Option<AllPortsState>> = groups.iter().map(|_| None).collect();
    // Per group, once its sum cleared it: the mask and the sums.
    let mut cleared: Vec<Option<ClearedSums>> = groups.iter().map(|_| None).collect();
    let mut drilled: Vec<(usize, String)> = Vec::new();

    let mut batch = Vec::new();
    for (g, (lid, members)) in groups.iter().enumerate() {
        batch.push((Query::ClassPortInfo(g), class_port_info_request(*lid)));
        if !screened_group[g] {
            push_port_reads(&mut batch, targets, members, true, false);
        }
    }
    let mut on_done = |q: Query,
                       result: Result<Response, MadError>,
                       out: &mut Vec<(Query, Request)>| match q {
        Query::ClassPortInfo(g) => {
            let members = &groups[g].1;
            let mask = match result.map_err(|e| e.to_string()).and_then(|r| {
                r.decode::<ClassPortInfo>()
                    .map(|c| c.capability_mask)
                    .map_err(|e| format!("malformed reply: {e}"))
            }) {
                Ok(m) => m,
                Err(e) => {
                    for &i in members {
                        ports[i].errors.push(format!(
                            "ClassPortInfo: {e} (PortCountersExtended not read)"
                        ));
                    }
                    if screened_group[g] {
                        // As unscreened: PortCounters of every port, no extended.
                        push_port_reads(out, targets, members, true, false);
                    }
                    return;
                }
            };
            for &i in members {
                ports[i].capability_mask = Some(mask);
            }
            let extended = pma_capability::has_extended_counters(mask);
            if screened_group[g] && mask & pma_capability::ALL_PORT_SELECT != 0 {
                let sum_target = CounterTarget {
                    port: ALL_PORTS,
                    ..targets[members[0]]
                };
                let want_extended = extended && thresholds_need_extended;
                out.push((
                    Query::AllPorts(g),
                    port_request::<PortCounters>(&sum_target, method::GET, 0),
                ));
                if want_extended {
                    let request = port_request::<PortCountersExtended>(&sum_target, method::GET, 0);
                    out.push((Query::AllPortsExtended(g), request));
                }
                all_ports[g] = Some(AllPortsState {
                    mask,
                    counters: None,
                    extended: None,
                    want_extended,
                });
            } else {
                // PortCounters already queued unless this group was held for screening.
                push_port_reads(out, targets, members, screened_group[g], extended);
            }
        }
        Query::AllPorts(g) | Query::AllPortsExtended(g) => {
            let Some(state) = all_ports[g].as_mut() else {
                return;
            };
            if matches!(q, Query::AllPorts(_)) {
                state.counters = Some(decode_counter_reply(result, false, ALL_PORTS));
            } else {
                state.extended = Some(decode_counter_reply(result, true, ALL_PORTS));
            }
            let complete =
                state.counters.is_some() && (!state.want_extended || state.extended.is_some());
            if !complete {
                return;
            }
            let (Some(state), Some(thresholds)) = (all_ports[g].take(), screen_with) else {
                return;
            };
            let sum = match state.counters {
                Some(Ok(sum)) => Ok(sum),
                Some(Err(e)) => Err(format!("PortCounters (PortSelect {ALL_PORTS}): {e}")),
                None => Err("no all-ports PortCounters".to_string()),
            };
            let extended = match state.extended {
                None => Ok(None),
                Some(Ok(e)) => Ok(Some(e)),
                Some(Err(e)) => Err(format!(
                    "PortCountersExtended (PortSelect {ALL_PORTS}): {e}"
                )),
            };
            let drill = match (sum, extended) {
                (Ok(sum), Ok(extended)) => {
                    match screen(&sum, extended.as_deref(), state.mask, thresholds) {
                        Screen::Clean => {
                            cleared[g] = Some((state.mask, sum, extended));
                            None
                        }
                        Screen::DrillDown(reason) => Some(reason),
                    }
                }
                (Err(e), _) | (_, Err(e)) => Some(e),
            };
            if let Some(reason) = drill {
                drilled.push((g, reason));
                push_port_reads(
                    out,
                    targets,
                    &groups[g].1,
                    true,
                    pma_capability::has_extended_counters(state.mask),
                );
            }
        }
        Query::Counters(i) => match decode_counter_reply(result, false, targets[i].port) {
            Ok(values) => {
                ports[i].saturated = values
                    .iter()
                    .filter(|v| v.saturated())
                    .map(|v| v.name.to_string())
                    .collect();
                ports[i].counters = Some(CounterSet::from_values(&values));
            }
            Err(e) => ports[i].errors.push(format!("PortCounters: {e}")),
        },
        Query::Extended(i) => match decode_counter_reply(result, true, targets[i].port) {
            Ok(values) => ports[i].extended = Some(CounterSet::from_values(&values)),
            Err(e) => ports[i].errors.push(format!("PortCountersExtended: {e}")),
        },
    };
    exec.execute(batch, &mut on_done);
    let switch_at = |g: usize| {
        let t = targets[groups[g].1[0]];
        PortRef {
            lid: t.lid,
            ..PortRef::new(fabric.node(t.node), 0, names)
        }
    };
    let mut screened = Vec::new();
    let mut skip = vec![false; targets.len()];
    for (g, c) in cleared.into_iter().enumerate() {
        let Some((mask, sum, extended)) = c else {
            continue;
        };
        let members = &groups[g].1;
        for &i in members {
            skip[i] = true;
        }
        screened.push(ScreenedSwitch {
            at: switch_at(g),
            ports: members.iter().map(|&i| targets[i].port).collect(),
            capability_mask: mask,
            counters: CounterSet::from_values(&sum),
            extended: extended.map(|e| CounterSet::from_values(&e)),
        });
    }
    drilled.sort_by_key(|(g, _)| *g);
    let drilled = drilled
        .into_iter()
        .map(|(g, reason)| DrilledSwitch {
            at: switch_at(g),
            reason,
        })
        .collect();
    let ports = ports
        .into_iter()
        .zip(skip)
        .filter(|(_, skip)| !skip)
        .map(|(p, _)| p)
        .collect();
    ScreenedSweep {
        sample: Sample {
            time_ms,
            duration_ms: started.elapsed().as_millis() as u64,
            mads_sent: exec.mads_sent() - sent_before,
            data_unit: "bytes".to_string(),
            ports,
        },
        screened,
        drilled,
    }
}

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
    let before: HashMap<(u64, u8), &PortSample> = prev
        .ports
        .iter()
        .map(|p| ((p.at.node_guid, p.at.port), p))
        .collect();
    let mut out = Vec::new();
    for c in &cur.ports {
        let Some(p) = before.get(&(c.at.node_guid, c.at.port)) else {
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

/// Error thresholds: a counter above its threshold is a finding. The file format is
/// ibqueryerrors' --threshold-file: `Name=value` lines, `#` comments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thresholds {
    /// (counter name, threshold): a value strictly above is reported.
    pub limits: Vec<(String, u64)>,
}

impl Default for Thresholds {
    /// Every error counter at 0 (any error is reported), as ibqueryerrors does;
    /// PortXmitWait (congestion, not an error) only when a file sets it.
    fn default() -> Self {
        Thresholds {
            limits: ERROR_COUNTERS.iter().map(|n| (n.to_string(), 0)).collect(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct ThresholdError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl Thresholds {
    /// The defaults, overridden by the lines of `text` (`file` names it in errors).
    pub fn parse(text: &str, file: &str) -> Result<Thresholds, ThresholdError> {
        let mut t = Thresholds::default();
        for (i, raw) in text.lines().enumerate() {
            let err = |message: String| ThresholdError {
                file: file.to_string(),
                line: i + 1,
                message,
            };
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let Some((name, value)) = line.split_once('=') else {
                return Err(err(format!("expected Name=value, got {line:?}")));
            };
            let (name, value) = (name.trim(), value.trim());
            if !known_counter(name) {
                return Err(err(format!("unknown counter {name:?}")));
            }
            let value: u64 = value
                .parse()
                .map_err(|_| err(format!("{value:?} is not a non-negative integer")))?;
            match t.limits.iter_mut().find(|(n, _)| n == name) {
                Some(slot) => slot.1 = value,
                None => t.limits.push((name.to_string(), value)),
            }
        }
        Ok(t)
    }

    pub fn get(&self, name: &str) -> Option<u64> {
        self.limits.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    /// (counter, value, threshold) of every counter of `port` above its threshold.
    pub fn exceeded(&self, port: &PortSample) -> Vec<(String, u64, u64)> {
        self.limits
            .iter()
            .filter_map(|(name, limit)| {
                let v = port.value(name)?;
                (v > *limit).then(|| (name.clone(), v, *limit))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::NodeKind;
    use ibscope_mad::attribute::{Attribute, Class, PerfMgt};
    use ibscope_mad::header::MadHeader;

    #[test]
    fn error_counters_are_the_twelve_error_counters() {
        assert_eq!(ERROR_COUNTERS.len(), 12);
        assert_eq!(ERROR_COUNTERS[0], "SymbolErrorCounter");
        assert_eq!(ERROR_COUNTERS[11], "VL15Dropped");
        assert!(!ERROR_COUNTERS
            .iter()
            .any(|c| c.contains("Data") || c.contains("Pkts")));
    }

    fn port_ref(guid: u64, port: u8) -> PortRef {
        PortRef {
            node: "n".into(),
            node_guid: guid,
            kind: NodeKind::Switch,
            port,
            lid: 1,
        }
    }

    fn sample(values: &[(&str, u64)], ext: Option<&[(&str, u64)]>, sat: &[&str]) -> PortSample {
        let set =
            |v: &[(&str, u64)]| CounterSet(v.iter().map(|(n, x)| (n.to_string(), *x)).collect());
        PortSample {
            at: port_ref(1, 1),
            remote: None,
            capability_mask: Some(0x1300),
            counters: Some(set(values)),
            extended: ext.map(set),
            saturated: sat.iter().map(|s| s.to_string()).collect(),
            errors: Vec::new(),
        }
    }

    fn wrap(p: PortSample) -> Sample {
        Sample {
            time_ms: 0,
            duration_ms: 0,
            mads_sent: 0,
            data_unit: "bytes".into(),
            ports: vec![p],
        }
    }

    #[test]
    fn words_become_bytes_and_saturation_is_judged_on_the_wire() {
        let mut b = [0u8; 44];
        b[1] = 3;
        b[24..28].copy_from_slice(&u32::MAX.to_be_bytes()); // PortXmitData
        b[28..32].copy_from_slice(&10u32.to_be_bytes()); // PortRcvData
        let c = PortCounters::decode(&b).unwrap();
        let values = c.counters();
        let set = CounterSet::from_values(&values);
        assert_eq!(set.get("PortXmitData"), Some(u64::from(u32::MAX) * 4));
        assert_eq!(set.get("PortRcvData"), Some(40));
        let sat: Vec<&str> = values
            .iter()
            .filter(|v| v.saturated())
            .map(|v| v.name)
            .collect();
        assert_eq!(sat, vec!["PortXmitData"]);
        assert_eq!(
            serde_json::to_string(&CounterSet(vec![("A".into(), 1), ("B".into(), 2)])).unwrap(),
            r#"{"A":1,"B":2}"#
        );
    }

    #[test]
    fn extended_replaces_saturated_32_bit_values() {
        let p = sample(
            &[
                ("PortXmitData", u64::from(u32::MAX) * 4),
                ("SymbolErrorCounter", 3),
            ],
            Some(&[("PortXmitData", 1 << 40), ("PortUnicastXmitPkts", 9)]),
            &["PortXmitData"],
        );
        assert_eq!(p.value("PortXmitData"), Some(1 << 40));
        assert_eq!(p.value("SymbolErrorCounter"), Some(3));
        assert!(!p.is_saturated("PortXmitData"));
        let q = sample(
            &[("PortXmitData", u64::from(u32::MAX) * 4)],
            None,
            &["PortXmitData"],
        );
        assert!(q.is_saturated("PortXmitData"));
        assert_eq!(p.effective().last(), Some(&("PortUnicastXmitPkts", 9)));
    }

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

    #[test]
    fn thresholds_file() {
        let t = Thresholds::parse(
            "# comment\nSymbolErrorCounter=10\n\n  PortXmitWait = 100 # congestion\n",
            "t.conf",
        )
        .unwrap();
        assert_eq!(t.get("SymbolErrorCounter"), Some(10));
        assert_eq!(t.get("PortXmitWait"), Some(100));
        assert_eq!(t.get("LinkDownedCounter"), Some(0));
        let p = sample(
            &[
                ("SymbolErrorCounter", 10),
                ("LinkDownedCounter", 1),
                ("PortXmitWait", 101),
            ],
            None,
            &[],
        );
        let names: Vec<String> = t.exceeded(&p).into_iter().map(|e| e.0).collect();
        assert_eq!(names, vec!["LinkDownedCounter", "PortXmitWait"]);
        let e = Thresholds::parse("SymbolErrorCounter=10\nBogus=1\n", "t.conf").unwrap_err();
        assert_eq!(e.to_string(), "t.conf:2: unknown counter \"Bogus\"");
        let e = Thresholds::parse("SymbolErrorCounter\n", "f").unwrap_err();
        assert_eq!(e.line, 1);
        assert!(Thresholds::parse("SymbolErrorCounter=-1", "f").is_err());
    }

    #[test]
    fn payload_puts_port_select_in_byte_1() {
        let (_, t) = small_fabric();
        let t = CounterTarget { port: 7, ..t[0] };
        let r = port_request::<PortCountersExtended>(&t, method::SET, 0xffff);
        assert_eq!(&r.payload::<PerfMgt>()[..4], &[0, 7, 0xff, 0xff]);
        assert_eq!(r.header().unwrap().attribute_id, PortCountersExtended::ID);
        assert_eq!(r.header().unwrap().method, method::SET);
    }

    // ---- screening: the decision ----

    /// ibsim's switch PMA: AllPortSelect, PortCountersExtended, PortXmitWait.
    const SWITCH_MASK: u16 = 0x1300;
    /// AllPortSelect without PortCountersExtended.
    const NO_EXTENDED_MASK: u16 = 0x1100;

    fn pc(f: impl FnOnce(&mut PortCounters)) -> PortCounters {
        let mut c = PortCounters::default();
        f(&mut c);
        c
    }

    fn is_clean(s: &Screen) -> bool {
        matches!(s, Screen::Clean)
    }

    fn reason(s: Screen) -> String {
        match s {
            Screen::Clean => panic!("expected a drill-down"),
            Screen::DrillDown(r) => r,
        }
    }

    #[test]
    fn screen_clean_sum_needs_no_per_port_read() {
        let sum = pc(|c| {
            c.port_xmit_data = 123_456;
            c.port_rcv_pkts = 1_000;
        });
        let t = Thresholds::default();
        assert!(is_clean(&screen(&sum.counters(), None, SWITCH_MASK, &t)));
        assert!(is_clean(&screen(
            &sum.counters(),
            None,
            NO_EXTENDED_MASK,
            &t
        )));
    }

    #[test]
    fn screen_drills_down_on_any_error_with_default_thresholds() {
        let t = Thresholds::default();
        for name in ERROR_COUNTERS {
            let mut sum = PortCounters::default();
            match *name {
                "SymbolErrorCounter" => sum.symbol_error_counter = 1,
                "LinkErrorRecoveryCounter" => sum.link_error_recovery_counter = 1,
                "LinkDownedCounter" => sum.link_downed_counter = 1,
                "PortRcvErrors" => sum.port_rcv_errors = 1,
                "PortRcvRemotePhysicalErrors" => sum.port_rcv_remote_physical_errors = 1,
                "PortRcvSwitchRelayErrors" => sum.port_rcv_switch_relay_errors = 1,
                "PortXmitDiscards" => sum.port_xmit_discards = 1,
                "PortXmitConstraintErrors" => sum.port_xmit_constraint_errors = 1,
                "PortRcvConstraintErrors" => sum.port_rcv_constraint_errors = 1,
                "LocalLinkIntegrityErrors" => sum.local_link_integrity_errors = 1,
                "ExcessiveBufferOverrunErrors" => sum.excessive_buffer_overrun_errors = 1,
                "VL15Dropped" => sum.vl15_dropped = 1,
                other => panic!("unexpected error counter {other}"),
            }
            let r = reason(screen(&sum.counters(), None, SWITCH_MASK, &t));
            assert!(r.starts_with(&format!("{name} = 1 ")), "{r}");
            assert!(r.contains("above its threshold 0"), "{r}");
        }
    }

    #[test]
    fn screen_sum_at_the_threshold_is_clean_above_it_is_not() {
        let t = Thresholds::parse("SymbolErrorCounter=20\nPortXmitWait=100\n", "t").unwrap();
        let at = pc(|c| c.symbol_error_counter = 20);
        assert!(is_clean(&screen(&at.counters(), None, SWITCH_MASK, &t)));
        let above = pc(|c| c.symbol_error_counter = 21);
        let r = reason(screen(&above.counters(), None, SWITCH_MASK, &t));
        assert_eq!(
            r,
            "SymbolErrorCounter = 21 in the all-ports sum, above its threshold 20"
        );
        // PortXmitWait only counts when a threshold is set, as per port.
        let wait = pc(|c| c.port_xmit_wait = 101);
        assert!(!is_clean(&screen(&wait.counters(), None, SWITCH_MASK, &t)));
        let wait_default = screen(&wait.counters(), None, SWITCH_MASK, &Thresholds::default());
        assert!(is_clean(&wait_default));
    }

    #[test]
    fn screen_saturated_error_counter_drills_down_whatever_the_threshold() {
        // Thresholds at the maximum: no port can be above, but a saturated port is a finding.
        let t = Thresholds::parse(
            "SymbolErrorCounter=65535\nLocalLinkIntegrityErrors=15\nPortXmitWait=4294967295\n",
            "t",
        )
        .unwrap();
        let sym = pc(|c| c.symbol_error_counter = u16::MAX);
        let r = reason(screen(&sym.counters(), None, SWITCH_MASK, &t));
        assert!(
            r.starts_with("SymbolErrorCounter = 65535 in the all-ports sum: it may have stopped"),
            "{r}"
        );
        let lli = pc(|c| c.local_link_integrity_errors = 15);
        assert!(!is_clean(&screen(&lli.counters(), None, SWITCH_MASK, &t)));
        // PortXmitWait has no 64-bit replacement: saturated is a finding, extended or not.
        let wait = pc(|c| c.port_xmit_wait = u32::MAX);
        assert!(!is_clean(&screen(&wait.counters(), None, SWITCH_MASK, &t)));
        let wait_below = pc(|c| c.port_xmit_wait = u32::MAX - 1);
        assert!(is_clean(&screen(
            &wait_below.counters(),
            None,
            SWITCH_MASK,
            &t
        )));
    }

    #[test]
    fn screen_sum_stopped_at_a_narrower_limit_bounds_nothing() {
        // ibsim 0.10 stops the PortXmitDiscards sum (16-bit field) at 255.
        let t = Thresholds::parse("PortXmitDiscards=1000\n", "t").unwrap();
        for (v, clean) in [
            (254, true),
            (255, false),
            (256, true),
            (4095, true),
            (65535, false),
        ] {
            let sum = pc(|c| c.port_xmit_discards = v);
            assert_eq!(
                is_clean(&screen(&sum.counters(), None, SWITCH_MASK, &t)),
                clean && u64::from(v) <= 1000,
                "PortXmitDiscards sum {v}"
            );
        }
        let t = Thresholds::parse("SymbolErrorCounter=100\n", "t").unwrap();
        let fifteen = pc(|c| c.symbol_error_counter = 15);
        assert!(!is_clean(&screen(
            &fifteen.counters(),
            None,
            SWITCH_MASK,
            &t
        )));
    }

    #[test]
    fn screen_saturated_data_counters_matter_only_without_extended() {
        let t = Thresholds::default();
        let busy = pc(|c| {
            c.port_xmit_data = u32::MAX;
            c.port_rcv_data = u32::MAX;
            c.port_xmit_pkts = u32::MAX;
            c.port_rcv_pkts = u32::MAX;
        });
        assert!(is_clean(&screen(&busy.counters(), None, SWITCH_MASK, &t)));
        // IsExtendedWidthSupportedNoIETF is PortCountersExtended too.
        assert!(is_clean(&screen(&busy.counters(), None, 0x0500, &t)));
        let r = reason(screen(&busy.counters(), None, NO_EXTENDED_MASK, &t));
        assert!(r.starts_with("PortXmitData = 4294967295 "), "{r}");
        for field in 0..4 {
            let one = pc(|c| match field {
                0 => c.port_xmit_data = u32::MAX,
                1 => c.port_rcv_data = u32::MAX,
                2 => c.port_xmit_pkts = u32::MAX,
                _ => c.port_rcv_pkts = u32::MAX,
            });
            assert!(!is_clean(&screen(
                &one.counters(),
                None,
                NO_EXTENDED_MASK,
                &t
            )));
            assert!(is_clean(&screen(&one.counters(), None, SWITCH_MASK, &t)));
        }
        // Without extended, a data sum at a narrower limit is read port by port too.
        let narrow = pc(|c| c.port_rcv_pkts = 65535);
        assert!(!is_clean(&screen(
            &narrow.counters(),
            None,
            NO_EXTENDED_MASK,
            &t
        )));
        assert!(is_clean(&screen(&narrow.counters(), None, SWITCH_MASK, &t)));
    }

    #[test]
    fn screen_thresholds_on_extended_counters_need_the_extended_sum() {
        let t = Thresholds::parse("PortXmitData=4000\nPortUnicastRcvPkts=10\n", "t").unwrap();
        let sum = pc(|c| c.port_xmit_data = 10);
        let r = reason(screen(&sum.counters(), None, SWITCH_MASK, &t));
        assert!(r.contains("PortCountersExtended is missing"), "{r}");
        let ext = |data: u64, unicast: u64| {
            PortCountersExtended {
                port_select: ALL_PORTS,
                port_xmit_data: data,
                port_unicast_rcv_pkts: unicast,
                ..Default::default()
            }
            .counters()
        };
        // 1000 words = 4000 bytes: at the threshold.
        assert!(is_clean(&screen(
            &sum.counters(),
            Some(&ext(1000, 10)),
            SWITCH_MASK,
            &t
        )));
        let r = reason(screen(
            &sum.counters(),
            Some(&ext(1001, 10)),
            SWITCH_MASK,
            &t,
        ));
        assert_eq!(
            r,
            "PortXmitData = 4004 in the all-ports sum, above its threshold 4000"
        );
        assert!(!is_clean(&screen(
            &sum.counters(),
            Some(&ext(0, 11)),
            SWITCH_MASK,
            &t
        )));
        // Without PortCountersExtended ports answer PortXmitData from PortCounters (bytes)
        // and have no PortUnicastRcvPkts at all.
        assert!(is_clean(&screen(
            &sum.counters(),
            None,
            NO_EXTENDED_MASK,
            &t
        )));
        let big = pc(|c| c.port_xmit_data = 1001);
        assert!(!is_clean(&screen(
            &big.counters(),
            None,
            NO_EXTENDED_MASK,
            &t
        )));
    }

    /// Tiny deterministic generator (xorshift64*), so the property test needs no crate.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        /// Mostly 0, sometimes small, sometimes at or near `max`.
        fn counter(&mut self, max: u64) -> u64 {
            match self.next() % 10 {
                0..=5 => 0,
                6 | 7 => self.next() % 4,
                8 => max - self.next() % 2,
                _ => self.next() % (max + 1),
            }
        }
    }

    /// A port's counters as a PMA with saturating fields would hold them. Two ports in
    /// three count no errors (data and packets only).
    fn random_port(rng: &mut Rng) -> (PortCounters, PortCountersExtended) {
        let quiet = rng.next() % 3 != 0;
        let mut c = PortCounters {
            port_select: 1,
            symbol_error_counter: rng.counter(0xffff) as u16,
            link_error_recovery_counter: rng.counter(0xff) as u8,
            link_downed_counter: rng.counter(0xff) as u8,
            port_rcv_errors: rng.counter(0xffff) as u16,
            port_rcv_remote_physical_errors: rng.counter(0xffff) as u16,
            port_rcv_switch_relay_errors: rng.counter(0xffff) as u16,
            port_xmit_discards: rng.counter(0xffff) as u16,
            port_xmit_constraint_errors: rng.counter(0xff) as u8,
            port_rcv_constraint_errors: rng.counter(0xff) as u8,
            local_link_integrity_errors: rng.counter(0xf) as u8,
            excessive_buffer_overrun_errors: rng.counter(0xf) as u8,
            vl15_dropped: rng.counter(0xffff) as u16,
            port_xmit_data: rng.counter(0xffff_ffff) as u32,
            port_rcv_data: rng.counter(0xffff_ffff) as u32,
            port_xmit_pkts: rng.counter(0xffff_ffff) as u32,
            port_rcv_pkts: rng.counter(0xffff_ffff) as u32,
            port_xmit_wait: rng.counter(0xffff_ffff) as u32,
            ..Default::default()
        };
        if quiet {
            c = PortCounters {
                port_select: 1,
                port_xmit_data: c.port_xmit_data,
                port_rcv_data: c.port_rcv_data,
                port_xmit_pkts: c.port_xmit_pkts,
                port_rcv_pkts: c.port_rcv_pkts,
                ..Default::default()
            };
        }
        let e = PortCountersExtended {
            port_select: 1,
            port_xmit_data: rng.counter(1 << 40),
            port_rcv_data: rng.counter(1 << 40),
            port_xmit_pkts: rng.counter(1 << 40),
            port_rcv_pkts: rng.counter(1 << 40),
            port_unicast_xmit_pkts: rng.counter(1 << 40),
            port_unicast_rcv_pkts: rng.counter(1 << 40),
            port_multicast_xmit_pkts: rng.counter(1 << 40),
            port_multicast_rcv_pkts: rng.counter(1 << 40),
            ..Default::default()
        };
        (c, e)
    }

    /// The sum a PMA answers for PortSelect 0xFF: every field saturating at its width;
    /// `ibsim_discards`: PortXmitDiscards stops at 255 as in ibsim 0.10.
    fn saturating_sum(
        ports: &[(PortCounters, PortCountersExtended)],
        ibsim_discards: bool,
    ) -> (PortCounters, PortCountersExtended) {
        let add = |a: u64, b: u64, max: u64| (a + b).min(max);
        let mut s = PortCounters {
            port_select: ALL_PORTS,
            ..Default::default()
        };
        let mut e = PortCountersExtended {
            port_select: ALL_PORTS,
            ..Default::default()
        };
        for (c, x) in ports {
            macro_rules! sum {
                ($($f:ident: $t:ty = $max:expr),* $(,)?) => {
                    $( s.$f = add(s.$f.into(), c.$f.into(), $max) as $t; )*
                };
            }
            sum!(
                symbol_error_counter: u16 = 0xffff,
                link_error_recovery_counter: u8 = 0xff,
                link_downed_counter: u8 = 0xff,
                port_rcv_errors: u16 = 0xffff,
                port_rcv_remote_physical_errors: u16 = 0xffff,
                port_rcv_switch_relay_errors: u16 = 0xffff,
                port_xmit_discards: u16 = if ibsim_discards { 0xff } else { 0xffff },
                port_xmit_constraint_errors: u8 = 0xff,
                port_rcv_constraint_errors: u8 = 0xff,
                local_link_integrity_errors: u8 = 0xf,
                excessive_buffer_overrun_errors: u8 = 0xf,
                vl15_dropped: u16 = 0xffff,
                port_xmit_data: u32 = 0xffff_ffff,
                port_rcv_data: u32 = 0xffff_ffff,
                port_xmit_pkts: u32 = 0xffff_ffff,
                port_rcv_pkts: u32 = 0xffff_ffff,
                port_xmit_wait: u32 = 0xffff_ffff,
            );
            macro_rules! sum64 {
                ($($f:ident),*) => { $( e.$f = e.$f.saturating_add(x.$f); )* };
            }
            sum64!(
                port_xmit_data,
                port_rcv_data,
                port_xmit_pkts,
                port_rcv_pkts,
                port_unicast_xmit_pkts,
                port_unicast_rcv_pkts,
                port_multicast_xmit_pkts,
                port_multicast_rcv_pkts
            );
        }
        (s, e)
    }

    /// A port as the sweep records it.
    fn as_sample(c: &PortCounters, e: &PortCountersExtended, mask: u16) -> PortSample {
        let values = c.counters();
        PortSample {
            at: port_ref(1, c.port_select),
            remote: None,
            capability_mask: Some(mask),
            counters: Some(CounterSet::from_values(&values)),
            extended: pma_capability::has_extended_counters(mask)
                .then(|| CounterSet::from_values(&e.counters())),
            saturated: values
                .iter()
                .filter(|v| v.saturated())
                .map(|v| v.name.to_string())
                .collect(),
            errors: Vec::new(),
        }
    }

    /// What `check` reports for a port: thresholds exceeded, counters saturated for good.
    fn port_has_finding(p: &PortSample, t: &Thresholds) -> bool {
        !t.exceeded(p).is_empty() || p.saturated.iter().any(|n| p.is_saturated(n))
    }

    #[test]
    fn screen_clean_implies_no_port_finding() {
        let threshold_sets = [
            Thresholds::default(),
            Thresholds::parse(
                "SymbolErrorCounter=3\nPortXmitDiscards=300\nLinkDownedCounter=255\n\
                 PortXmitWait=1000\nVL15Dropped=65535\n",
                "t",
            )
            .unwrap(),
            Thresholds::parse(
                "SymbolErrorCounter=65535\nPortRcvErrors=65535\nPortXmitDiscards=65535\n\
                 LinkErrorRecoveryCounter=255\nLinkDownedCounter=255\nLocalLinkIntegrityErrors=15\n\
                 ExcessiveBufferOverrunErrors=15\nPortRcvRemotePhysicalErrors=65535\n\
                 PortRcvSwitchRelayErrors=65535\nPortXmitConstraintErrors=255\n\
                 PortRcvConstraintErrors=255\nVL15Dropped=65535\n\
                 PortXmitData=1000000000\nPortMulticastRcvPkts=5\n",
                "t",
            )
            .unwrap(),
        ];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut clean, mut drilled, mut caught) = (0, 0, 0);
        for round in 0..3000 {
            let n = 1 + (rng.next() % 6) as usize;
            let ports: Vec<_> = (0..n).map(|_| random_port(&mut rng)).collect();
            let t = &threshold_sets[round % threshold_sets.len()];
            for mask in [SWITCH_MASK, NO_EXTENDED_MASK] {
                for quirk in [false, true] {
                    let (s, e) = saturating_sum(&ports, quirk);
                    let decision = screen(&s.counters(), Some(&e.counters()), mask, t);
                    let findings = ports
                        .iter()
                        .filter(|(c, x)| port_has_finding(&as_sample(c, x, mask), t))
                        .count();
                    if is_clean(&decision) {
                        clean += 1;
                        assert_eq!(
                            findings, 0,
                            "screened out with a port finding: {ports:?} {t:?} mask {mask:#x}"
                        );
                    } else {
                        drilled += 1;
                        if findings > 0 {
                            caught += 1;
                        }
                    }
                }
            }
        }
        // The property is exercised both ways.
        assert!(
            clean > 500 && drilled > 1000 && caught > 1000,
            "{clean} {drilled} {caught}"
        );
    }

    // ---- screening: the sweep, against a fake PMA ----

    /// One switch (LID 1, 4 ports) with two CAs (LIDs 2 and 3) on ports 1 and 2.
    const SMALL_FABRIC: &str = "
switchguid=0x10(10)
Switch\t4 \"S-0000000000000010\"\t\t# \"sw\" base port 0 lid 1 lmc 0
[1]\t\"H-0000000000000020\"[1](21) \t\t# \"ca1\" lid 2 4xSDR
[2]\t\"H-0000000000000030\"[1](31) \t\t# \"ca2\" lid 3 4xSDR

caguid=0x20
Ca\t1 \"H-0000000000000020\"\t\t# \"ca1\"
[1](21) \t\"S-0000000000000010\"[1]\t\t# lid 2 lmc 0 \"sw\" lid 1 4xSDR

caguid=0x30
Ca\t1 \"H-0000000000000030\"\t\t# \"ca2\"
[1](31) \t\"S-0000000000000010\"[2]\t\t# lid 3 lmc 0 \"sw\" lid 1 4xSDR
";

    /// A PMA per LID, answering at once, one request after another.
    #[derive(Default)]
    struct FakePma {
        /// (LID, port) -> counters.
        ports: HashMap<(u16, u8), (PortCounters, PortCountersExtended)>,
        masks: HashMap<u16, u16>,
        /// LIDs whose ClassPortInfo does not answer.
        no_class_port_info: Vec<u16>,
        /// How PortSelect 0xFF is answered.
        all_ports: AllPortsBehaviour,
        /// (LID, port) whose per-port reads are answered with PortSelect 7.
        wrong_port: Vec<(u16, u8)>,
        executes: usize,
        sent: u64,
        /// (LID, attribute, PortSelect) of every request, in order.
        log: Vec<(u16, u16, u8)>,
    }

    #[derive(Default, Clone, Copy, PartialEq)]
    enum AllPortsBehaviour {
        #[default]
        Sum,
        Timeout,
        /// A PMA that ignores PortSelect 0xFF and answers for port 1.
        WrongPort,
    }

    impl FakePma {
        fn new(mask_switch: u16) -> FakePma {
            let mut f = FakePma::default();
            f.masks.insert(1, mask_switch);
            f.masks.insert(2, 0x1200);
            f.masks.insert(3, 0x1200);
            for p in 1..=4 {
                f.ports.insert((1, p), Default::default());
            }
            f.ports.insert((2, 1), Default::default());
            f.ports.insert((3, 1), Default::default());
            f
        }

        fn answer(&self, r: &Request) -> Result<Response, MadError> {
            let ibscope_mad::umad::Dest::Gsi { lid, .. } = r.dest else {
                panic!("not a GSI request")
            };
            let attribute = r.header().unwrap().attribute_id;
            let select = r.decode::<PortCounters>().unwrap().port_select;
            let mut mad = r.mad;
            let data: Vec<u8> = match attribute {
                ClassPortInfo::ID => {
                    if self.no_class_port_info.contains(&lid) {
                        return Err(MadError::Timeout { attempts: 4 });
                    }
                    ClassPortInfo {
                        capability_mask: self.masks[&lid],
                        ..Default::default()
                    }
                    .to_bytes()
                    .to_vec()
                }
                PortCounters::ID | PortCountersExtended::ID => {
                    let extended = attribute == PortCountersExtended::ID;
                    let (c, e) = if select == ALL_PORTS {
                        match self.all_ports {
                            AllPortsBehaviour::Timeout => {
                                return Err(MadError::Timeout { attempts: 4 })
                            }
                            AllPortsBehaviour::WrongPort => {
                                let (mut c, mut e) = self.ports[&(lid, 1)].clone();
                                c.port_select = 1;
                                e.port_select = 1;
                                (c, e)
                            }
                            AllPortsBehaviour::Sum => {
                                let mine: Vec<_> = self
                                    .ports
                                    .iter()
                                    .filter(|((l, _), _)| *l == lid)
                                    .map(|(_, v)| v.clone())
                                    .collect();
                                saturating_sum(&mine, false)
                            }
                        }
                    } else {
                        let (mut c, mut e) = self.ports[&(lid, select)].clone();
                        let answered = if self.wrong_port.contains(&(lid, select)) {
                            7
                        } else {
                            select
                        };
                        c.port_select = answered;
                        e.port_select = answered;
                        (c, e)
                    };
                    if extended {
                        e.to_bytes().to_vec()
                    } else {
                        c.to_bytes().to_vec()
                    }
                }
                other => panic!("unexpected attribute {other:#x}"),
            };
            // The response bit is not looked at by the sweep.
            MadHeader::response.write(&mut mad, &true).unwrap();
            PerfMgt::PAYLOAD.bytes_mut(&mut mad).unwrap()[..data.len()].copy_from_slice(&data);
            Ok(Response { mad: Box::new(mad) })
        }
    }

    impl SmpExecutor for FakePma {
        fn execute<T>(
            &mut self,
            requests: Vec<(T, Request)>,
            on_done: &mut crate::discover::OnDone<'_, T>,
        ) {
            self.executes += 1;
            let mut queue: std::collections::VecDeque<(T, Request)> = requests.into();
            let mut follow_ups = Vec::new();
            while let Some((token, request)) = queue.pop_front() {
                self.sent += 1;
                let ibscope_mad::umad::Dest::Gsi { lid, .. } = request.dest else {
                    panic!("not a GSI request")
                };
                self.log.push((
                    lid,
                    request.header().unwrap().attribute_id,
                    request.decode::<PortCounters>().unwrap().port_select,
                ));
                let result = self.answer(&request);
                on_done(token, result, &mut follow_ups);
                queue.extend(follow_ups.drain(..));
            }
        }
        fn mads_sent(&self) -> u64 {
            self.sent
        }
    }

    fn small_fabric() -> (Fabric, Vec<CounterTarget>) {
        let f = crate::ibnd::parse(SMALL_FABRIC).unwrap();
        let t = targets(&f, None, None);
        assert_eq!(t.len(), 6, "{t:?}");
        (f, t)
    }

    /// Both sweeps on fresh copies of the same PMA: (screened, per-port, screened's PMA).
    fn both(
        pma: impl Fn() -> FakePma,
        thresholds: &Thresholds,
    ) -> (ScreenedSweep, Sample, FakePma) {
        let (f, t) = small_fabric();
        let mut screened_pma = pma();
        let screened = sweep_screened(&mut screened_pma, &f, &t, None, thresholds);
        let mut plain_pma = pma();
        let plain = sweep(&mut plain_pma, &f, &t, None);
        assert_eq!(screened_pma.executes, 1, "one batch");
        assert_eq!(plain_pma.executes, 1, "one batch");
        assert_eq!(plain.mads_sent, plain_pma.sent);
        assert_eq!(screened.sample.mads_sent, screened_pma.sent);
        (screened, plain, screened_pma)
    }

    /// Ports of `sample` on the switch (LID 1).
    fn switch_ports(ports: &[PortSample]) -> Vec<u8> {
        ports
            .iter()
            .filter(|p| p.at.lid == 1)
            .map(|p| p.at.port)
            .collect()
    }

    #[test]
    fn sweep_screened_clean_switch_is_one_sum() {
        let (s, plain, pma) = both(|| FakePma::new(SWITCH_MASK), &Thresholds::default());
        // 3 ClassPortInfo + 1 sum + 2 CA ports x (PortCounters + extended).
        assert_eq!(s.sample.mads_sent, 8);
        // 3 ClassPortInfo + 6 ports x 2.
        assert_eq!(plain.mads_sent, 15);
        assert_eq!(s.screened.len(), 1);
        assert_eq!(s.screened[0].ports, vec![1, 2, 3, 4]);
        assert_eq!(s.screened[0].at.lid, 1);
        assert_eq!(s.ports_screened(), 4);
        assert_eq!(s.ports_covered(), 6);
        assert!(s.drilled.is_empty());
        assert!(switch_ports(&s.sample.ports).is_empty());
        // The CA ports are read exactly as sweep reads them.
        let cas: Vec<_> = plain
            .ports
            .iter()
            .filter(|p| p.at.lid != 1)
            .cloned()
            .collect();
        assert_eq!(s.sample.ports, cas);
        // The sum follows the switch's ClassPortInfo, with PortSelect 0xFF.
        let sums: Vec<_> = pma.log.iter().filter(|l| l.2 == ALL_PORTS).collect();
        assert_eq!(sums, vec![&(1, PortCounters::ID, ALL_PORTS)]);
        assert!(!pma
            .log
            .iter()
            .any(|l| l.0 == 1 && l.2 != ALL_PORTS && l.1 != ClassPortInfo::ID));
    }

    #[test]
    fn sweep_screened_drills_into_a_switch_with_errors_and_matches_sweep() {
        let pma = || {
            let mut p = FakePma::new(SWITCH_MASK);
            p.ports.get_mut(&(1, 3)).unwrap().0.symbol_error_counter = 5;
            p.ports.get_mut(&(2, 1)).unwrap().0.port_rcv_errors = 65535;
            p
        };
        let (s, plain, _) = both(pma, &Thresholds::default());
        assert!(s.screened.is_empty());
        assert_eq!(s.drilled.len(), 1);
        assert_eq!(
            s.drilled[0].reason,
            "SymbolErrorCounter = 5 in the all-ports sum, above its threshold 0"
        );
        assert_eq!(s.sample.ports, plain.ports);
        assert_eq!(s.sample.mads_sent, plain.mads_sent + 1);
    }

    #[test]
    fn sweep_rejects_a_reply_for_another_port() {
        // A PMA answering LID 2 port 1 with PortSelect 7: neither set of values is taken
        // for port 1, and both errors say why; the other ports are unaffected.
        let (f, t) = small_fabric();
        let mut pma = FakePma::new(SWITCH_MASK);
        pma.wrong_port.push((2, 1));
        let s = sweep(&mut pma, &f, &t, None);
        let bad = s.ports.iter().find(|p| p.at.lid == 2).unwrap();
        assert_eq!(bad.counters, None);
        assert_eq!(bad.extended, None);
        assert_eq!(
            bad.errors,
            vec![
                "PortCounters: reply is for port 7 (asked 1)".to_string(),
                "PortCountersExtended: reply is for port 7 (asked 1)".to_string(),
            ]
        );
        for p in s.ports.iter().filter(|p| p.at.lid != 2) {
            assert!(p.errors.is_empty(), "{p:?}");
            assert!(p.counters.is_some() && p.extended.is_some(), "{p:?}");
        }
    }

    #[test]
    fn sweep_screened_falls_back_when_the_sum_fails() {
        for behaviour in [AllPortsBehaviour::Timeout, AllPortsBehaviour::WrongPort] {
            let pma = || {
                let mut p = FakePma::new(SWITCH_MASK);
                p.all_ports = behaviour;
                p.ports.get_mut(&(1, 4)).unwrap().0.link_downed_counter = 1;
                p
            };
            let (s, plain, _) = both(pma, &Thresholds::default());
            assert!(s.screened.is_empty());
            assert_eq!(s.drilled.len(), 1);
            let r = &s.drilled[0].reason;
            assert!(r.starts_with("PortCounters (PortSelect 255): "), "{r}");
            if behaviour == AllPortsBehaviour::WrongPort {
                assert!(r.ends_with("reply is for port 1 (asked 255)"), "{r}");
            }
            assert_eq!(s.sample.ports, plain.ports);
            assert_eq!(switch_ports(&s.sample.ports), vec![1, 2, 3, 4]);
        }
    }

    #[test]
    fn sweep_screened_without_all_port_select_reads_ports() {
        let (s, plain, pma) = both(|| FakePma::new(0x1200), &Thresholds::default());
        assert!(s.screened.is_empty() && s.drilled.is_empty());
        assert_eq!(s.sample.ports, plain.ports);
        assert_eq!(s.sample.mads_sent, plain.mads_sent);
        assert!(!pma.log.iter().any(|l| l.2 == ALL_PORTS));
    }

    #[test]
    fn sweep_screened_switch_without_class_port_info_reads_ports() {
        let pma = || {
            let mut p = FakePma::new(SWITCH_MASK);
            p.no_class_port_info.push(1);
            p
        };
        let (s, plain, _) = both(pma, &Thresholds::default());
        assert!(s.screened.is_empty());
        assert_eq!(s.sample.ports, plain.ports);
        let p = s.sample.ports.iter().find(|p| p.at.lid == 1).unwrap();
        assert!(p.counters.is_some() && p.extended.is_none());
        assert!(p.errors[0].starts_with("ClassPortInfo: "), "{:?}", p.errors);
    }

    #[test]
    fn sweep_screened_reads_the_extended_sum_for_extended_thresholds() {
        let t = Thresholds::parse("PortXmitData=4000\n", "t").unwrap();
        let pma = |words: u64| {
            move || {
                let mut p = FakePma::new(SWITCH_MASK);
                p.ports.get_mut(&(1, 2)).unwrap().1.port_xmit_data = words;
                p
            }
        };
        let (s, _, log) = both(pma(1000), &t);
        assert_eq!(s.screened.len(), 1);
        assert_eq!(
            s.screened[0].extended.as_ref().unwrap().get("PortXmitData"),
            Some(4000)
        );
        assert!(log.log.contains(&(1, PortCountersExtended::ID, ALL_PORTS)));
        assert_eq!(s.sample.mads_sent, 9);
        let (s, plain, _) = both(pma(1001), &t);
        assert!(s.screened.is_empty());
        assert_eq!(s.sample.ports, plain.ports);
        let port2 = s
            .sample
            .ports
            .iter()
            .find(|p| (p.at.lid, p.at.port) == (1, 2));
        assert_eq!(t.exceeded(port2.unwrap()).len(), 1);
    }
}
