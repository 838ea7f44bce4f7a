//! One sweep's values: per port the PortCounters and PortCountersExtended read, data in
//! bytes, and which 32-bit counters are stuck at their maximum.

use ibscope_mad::attr::CounterValue;
use serde::{Deserialize, Serialize};

use super::names::{EXTENDED_ONLY, HAS_EXTENDED, PORT_COUNTER_NAMES};
use crate::health::PortRef;

/// A decoded counter in the units used here: data counters in bytes.
pub(super) fn in_bytes(v: &CounterValue) -> u64 {
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
    pub(super) fn from_values(values: &[CounterValue]) -> CounterSet {
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

/// Helpers shared by the counters module's tests.
#[cfg(test)]
pub(super) mod test_support {
    use ibscope_mad::attr::{PortCounters, PortCountersExtended};

    use super::{CounterSet, PortSample, Sample};
    use crate::counters::pma::ALL_PORTS;
    use crate::health::PortRef;
    use crate::model::NodeKind;

    /// ibsim's switch PMA: AllPortSelect, PortCountersExtended, PortXmitWait.
    pub const SWITCH_MASK: u16 = 0x1300;
    /// AllPortSelect without PortCountersExtended.
    pub const NO_EXTENDED_MASK: u16 = 0x1100;

    pub fn port_ref(guid: u64, port: u8) -> PortRef {
        PortRef {
            node: "n".into(),
            node_guid: guid,
            kind: NodeKind::Switch,
            port,
            lid: 1,
            host: None,
            rail: None,
        }
    }

    pub fn port_sample(
        values: &[(&str, u64)],
        ext: Option<&[(&str, u64)]>,
        sat: &[&str],
    ) -> PortSample {
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

    pub fn wrap(p: PortSample) -> Sample {
        Sample {
            time_ms: 0,
            duration_ms: 0,
            mads_sent: 0,
            data_unit: "bytes".into(),
            ports: vec![p],
        }
    }

    /// The sum a PMA answers for PortSelect 0xFF: every field saturating at its width;
    /// `ibsim_discards`: PortXmitDiscards stops at 255 as in ibsim 0.10.
    pub fn saturating_sum(
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
}

#[cfg(test)]
mod tests {
    use super::test_support::port_sample as sample;
    use super::*;
    use ibscope_mad::attr::PortCounters;

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
}
