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

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ibscope_mad::attr::{
    pma_capability, ClassPortInfo, CounterValue, PortCounters, PortCountersExtended,
};
use ibscope_mad::engine::{MadError, Request, Response};
use ibscope_mad::header::{attr, method};
use serde::{Deserialize, Serialize};

use crate::discover::SmpExecutor;
use crate::health::PortRef;
use crate::model::{End, Fabric, NodeId};
use crate::namemap::NameMap;

/// The counters thresholds and `check` look at: PortCounters error counters (IBA 16.1.3.5),
/// the first twelve of [`PORT_COUNTER_NAMES`] (the data, packet and wait counters follow).
pub const ERROR_COUNTERS: &[&str] = PORT_COUNTER_NAMES.split_at(12).0;

/// Counters whose extended 64-bit form replaces the 32-bit one when available.
const HAS_EXTENDED: [&str; 4] = ["PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts"];

/// Every counter name known: PortCounters, then the extended-only ones.
pub fn known_counter(name: &str) -> bool {
    PORT_COUNTER_NAMES.contains(&name) || EXTENDED_ONLY.contains(&name)
}

/// PortCounters in specification order.
pub const PORT_COUNTER_NAMES: [&str; 17] = [
    "SymbolErrorCounter",
    "LinkErrorRecoveryCounter",
    "LinkDownedCounter",
    "PortRcvErrors",
    "PortRcvRemotePhysicalErrors",
    "PortRcvSwitchRelayErrors",
    "PortXmitDiscards",
    "PortXmitConstraintErrors",
    "PortRcvConstraintErrors",
    "LocalLinkIntegrityErrors",
    "ExcessiveBufferOverrunErrors",
    "VL15Dropped",
    "PortXmitData",
    "PortRcvData",
    "PortXmitPkts",
    "PortRcvPkts",
    "PortXmitWait",
];

/// PortCountersExtended counters without a PortCounters counterpart.
pub const EXTENDED_ONLY: [&str; 4] = [
    "PortUnicastXmitPkts",
    "PortUnicastRcvPkts",
    "PortMulticastXmitPkts",
    "PortMulticastRcvPkts",
];

/// Counters in bytes (converted from 4-octet words).
pub fn is_data_counter(name: &str) -> bool {
    name == "PortXmitData" || name == "PortRcvData"
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
                .map(|v| {
                    let value = if v.data_words {
                        v.value.saturating_mul(4)
                    } else {
                        v.value
                    };
                    (v.name.to_string(), value)
                })
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

/// PortCounters / PortCountersExtended request payload: PortSelect at byte 1.
fn select_payload(port: u8, counter_select: u16) -> [u8; 4] {
    let cs = counter_select.to_be_bytes();
    [0, port, cs[0], cs[1]]
}

/// A PortCounters-family request to one port: PortSelect and CounterSelect in the payload.
fn port_request(
    t: &CounterTarget,
    method_code: u8,
    attribute: u16,
    counter_select: u16,
) -> Request {
    Request::perf(
        t.lid,
        method_code,
        attribute,
        0,
        &select_payload(t.port, counter_select),
    )
}

fn class_port_info_request(lid: u16) -> Request {
    Request::perf(lid, method::GET, attr::CLASS_PORT_INFO, 0, &[])
}

fn extended_supported(mask: u16) -> bool {
    mask & (pma_capability::EXTENDED_WIDTH | pma_capability::EXTENDED_WIDTH_NO_IETF) != 0
}

enum Query {
    ClassPortInfo(usize),
    Counters(usize),
    Extended(usize),
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

/// Read the counters of `targets`.
pub fn sweep<E: SmpExecutor>(
    exec: &mut E,
    fabric: &Fabric,
    targets: &[CounterTarget],
    names: Option<&NameMap>,
) -> Sample {
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
    let mut batch = Vec::new();
    for (g, (lid, members)) in groups.iter().enumerate() {
        batch.push((Query::ClassPortInfo(g), class_port_info_request(*lid)));
        for &i in members {
            let t = targets[i];
            batch.push((
                Query::Counters(i),
                port_request(&t, method::GET, attr::PORT_COUNTERS, 0),
            ));
        }
    }
    let mut on_done =
        |q: Query, result: Result<Response, MadError>, out: &mut Vec<(Query, Request)>| match q {
            Query::ClassPortInfo(g) => {
                let members = &groups[g].1;
                let mask = match result.map_err(|e| e.to_string()).and_then(|r| {
                    ClassPortInfo::decode(r.gmp_data())
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
                        return;
                    }
                };
                for &i in members {
                    ports[i].capability_mask = Some(mask);
                    if extended_supported(mask) {
                        let t = targets[i];
                        out.push((
                            Query::Extended(i),
                            port_request(&t, method::GET, attr::PORT_COUNTERS_EXTENDED, 0),
                        ));
                    }
                }
            }
            Query::Counters(i) => {
                let want = targets[i].port;
                match result {
                    Ok(r) => match PortCounters::decode(r.gmp_data()) {
                        Ok(c) if c.port_select == want => {
                            let values = c.counters();
                            ports[i].saturated = values
                                .iter()
                                .filter(|v| v.saturated())
                                .map(|v| v.name.to_string())
                                .collect();
                            ports[i].counters = Some(CounterSet::from_values(&values));
                        }
                        Ok(c) => ports[i].errors.push(format!(
                            "PortCounters: reply is for port {} (asked {want})",
                            c.port_select
                        )),
                        Err(e) => ports[i]
                            .errors
                            .push(format!("PortCounters: malformed reply: {e}")),
                    },
                    Err(e) => ports[i].errors.push(format!("PortCounters: {e}")),
                }
            }
            Query::Extended(i) => {
                let want = targets[i].port;
                match result {
                    Ok(r) => match PortCountersExtended::decode(r.gmp_data()) {
                        Ok(c) if c.port_select == want => {
                            ports[i].extended = Some(CounterSet::from_values(&c.counters()));
                        }
                        Ok(c) => ports[i].errors.push(format!(
                            "PortCountersExtended: reply is for port {} (asked {want})",
                            c.port_select
                        )),
                        Err(e) => ports[i]
                            .errors
                            .push(format!("PortCountersExtended: malformed reply: {e}")),
                    },
                    Err(e) => ports[i].errors.push(format!("PortCountersExtended: {e}")),
                }
            }
        };
    exec.execute(batch, &mut on_done);
    Sample {
        time_ms,
        duration_ms: started.elapsed().as_millis() as u64,
        mads_sent: exec.mads_sent() - sent_before,
        data_unit: "bytes".to_string(),
        ports,
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
            let data = PortCounters {
                port_select: t.port,
                counter_select: 0xffff,
                counter_select2: 0xff,
                ..Default::default()
            }
            .to_bytes();
            batch.push((
                Query::Counters(i),
                Request::perf(t.lid, method::SET, attr::PORT_COUNTERS, 0, &data),
            ));
        }
    }
    exec.execute(batch, &mut |q, result, out| match q {
        Query::ClassPortInfo(g) => {
            let mask = result
                .ok()
                .and_then(|r| ClassPortInfo::decode(r.gmp_data()).ok())
                .map(|c| c.capability_mask);
            if mask.is_some_and(extended_supported) {
                for &i in &groups[g].1 {
                    let t = targets[i];
                    out.push((
                        Query::Extended(i),
                        port_request(&t, method::SET, attr::PORT_COUNTERS_EXTENDED, 0xffff),
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
        assert_eq!(select_payload(7, 0xffff), [0, 7, 0xff, 0xff]);
    }
}
