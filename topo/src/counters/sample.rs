//! One sweep's values: per port the PortCounters and PortCountersExtended read, data in
//! bytes, and which 32-bit counters are stuck at their maximum.

use ibscope_mad::attr::CounterValue;
use serde::{Deserialize, Serialize};

use super::names::{EXTENDED_ONLY, HAS_EXTENDED, PORT_COUNTER_NAMES};
use crate::health::PortRef;

/// A decoded counter in the units used here: data counters in bytes.
pub(super) fn in_bytes(v: &CounterValue) -> u64 {
    if v.data_words {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::test_support::port_sample as sample;
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
