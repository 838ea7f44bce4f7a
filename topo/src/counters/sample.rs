//! One sweep's values: per port the PortCounters and PortCountersExtended read (and the
//! detail attributes, when read), data in bytes, and which counters stopped at their
//! maximum.

use std::sync::Arc;

use ibscope_mad::attr::{CounterName, CounterValue, PmaCapabilities};
use serde::{Deserialize, Serialize};

use super::names::{EXTENDED_ONLY, PORT_COUNTER_NAMES};
use crate::model::refs::PortRef;

/// A decoded counter in the units used here: data counters in bytes.
pub(super) fn in_bytes(v: &CounterValue) -> u64 {
    if v.data_words() {
        v.value.saturating_mul(4)
    } else {
        v.value
    }
}

/// One counter as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// The specification's name (perfquery's), e.g. "SymbolErrorCounter", in two bytes: a
    /// reading takes sixteen (a sweep at 100k HCAs holds some twenty million).
    pub name: CounterName,
    /// Data counters in bytes.
    pub value: u64,
    /// The counter stopped at its maximum (its field is narrower than 64 bits): `value` is
    /// a lower bound, not a count.
    pub saturated: bool,
}

/// Named counter values in a fixed order. JSON: an object of counter name to value; a
/// counter that stopped at its maximum is `{"value": N, "saturated": true}` instead of a
/// plain number, so nothing reads it as a count.
///
/// The readings may live in storage shared with the other sets of one sweep (see
/// [`ReadingArena`]): a set is a window on it, and a clone shares it.
#[derive(Clone)]
pub struct CounterSet {
    store: Arc<[Reading]>,
    start: u32,
    len: u32,
}

impl CounterSet {
    /// A set of its own of these readings.
    pub fn from_readings(readings: Vec<Reading>) -> CounterSet {
        CounterSet::owning(Arc::from(readings))
    }
    fn owning(store: Arc<[Reading]>) -> CounterSet {
        let len = u32::try_from(store.len()).expect("fewer than 4G counters in a set");
        CounterSet {
            store,
            start: 0,
            len,
        }
    }
    /// The readings, in their order.
    pub fn readings(&self) -> &[Reading] {
        let start = self.start as usize;
        &self.store[start..start + self.len as usize]
    }
    pub fn get(&self, name: &str) -> Option<u64> {
        self.reading(name).map(|r| r.value)
    }
    pub fn reading(&self, name: &str) -> Option<&Reading> {
        self.readings().iter().find(|r| r.name == name)
    }
    /// The counter is there and stopped at its maximum.
    pub fn is_saturated(&self, name: &str) -> bool {
        self.reading(name).is_some_and(|r| r.saturated)
    }
    pub fn iter(&self) -> impl Iterator<Item = (&str, u64)> {
        self.readings().iter().map(|r| (&*r.name, r.value))
    }
    pub fn len(&self) -> usize {
        self.len as usize
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// From decoded wire values: data counters converted to bytes, saturation judged on
    /// the wire value.
    pub(super) fn from_values(values: &[CounterValue]) -> CounterSet {
        CounterSet::owning(values.iter().map(Reading::from_value).collect())
    }
    /// Counters that did not saturate, from (name, value) pairs.
    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, u64)>) -> CounterSet {
        CounterSet::from_readings(
            pairs
                .into_iter()
                .map(|(name, value)| Reading {
                    name: CounterName::intern(name),
                    value,
                    saturated: false,
                })
                .collect(),
        )
    }
}

impl Reading {
    /// A decoded wire value as read: data counters in bytes, saturation judged on the wire.
    fn from_value(v: &CounterValue) -> Reading {
        Reading {
            name: v.short_name,
            value: in_bytes(v),
            saturated: v.saturated(),
        }
    }
}

impl Default for CounterSet {
    fn default() -> CounterSet {
        CounterSet::from_readings(Vec::new())
    }
}

impl PartialEq for CounterSet {
    fn eq(&self, other: &CounterSet) -> bool {
        self.readings() == other.readings()
    }
}

impl Eq for CounterSet {}

impl std::fmt::Debug for CounterSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.readings()).finish()
    }
}

/// The readings of one sweep, stored a chunk at a time, so that its sets share a few
/// allocations instead of one each: at 100k HCAs a sweep makes over a million sets, and
/// allocating and later freeing each took a tenth of a `counters` run. A set is made
/// once its sweep is over ([`SealedReadings::set`]); until then the sweep holds where its
/// readings are ([`Stored`]).
#[derive(Debug, Default)]
pub(super) struct ReadingArena {
    chunks: Vec<Arc<[Reading]>>,
    /// Readings stored in the last chunk.
    used: usize,
}

/// Where a set's readings are in a [`ReadingArena`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Stored {
    chunk: u32,
    start: u32,
    len: u32,
}

impl Stored {
    /// An empty set: no chunk.
    const EMPTY: Stored = Stored {
        chunk: u32::MAX,
        start: 0,
        len: 0,
    };
}

impl ReadingArena {
    /// Readings per chunk (64 KiB): a set kept after the rest of its sweep is dropped keeps
    /// its chunk, so chunks stay small.
    const CHUNK: usize = 4096;

    /// Stores the readings of decoded wire values (as [`CounterSet::from_values`] makes
    /// them). A set never spans two chunks; a chunk never grows (no reading moves).
    pub fn store(&mut self, values: &[CounterValue]) -> Stored {
        let Some(first) = values.first() else {
            return Stored::EMPTY;
        };
        let room = self.chunks.last().map_or(0, |c| c.len() - self.used);
        if room < values.len() {
            // Filled in place below: the chunk is made at its size, in one allocation,
            // with copies of the first reading as placeholders.
            let size = Self::CHUNK.max(values.len());
            let filler = Reading::from_value(first);
            self.chunks
                .push(std::iter::repeat(filler).take(size).collect());
            self.used = 0;
        }
        let chunk = self.chunks.len() - 1;
        let readings = Arc::get_mut(&mut self.chunks[chunk])
            .expect("a chunk is the arena's alone until it is sealed");
        let start = self.used;
        for (slot, v) in readings[start..].iter_mut().zip(values) {
            *slot = Reading::from_value(v);
        }
        self.used += values.len();
        Stored {
            chunk: u32::try_from(chunk).expect("fewer than 4G chunks"),
            start: u32::try_from(start).expect("a chunk holds fewer than 4G readings"),
            len: u32::try_from(values.len()).expect("fewer than 4G counters in a set"),
        }
    }

    /// The sweep is over: its sets can be made.
    pub fn seal(self) -> SealedReadings {
        SealedReadings {
            chunks: self.chunks,
        }
    }
}

/// A [`ReadingArena`] whose sweep is over.
pub(super) struct SealedReadings {
    chunks: Vec<Arc<[Reading]>>,
}

impl SealedReadings {
    /// The set stored at `at` (by the arena this was sealed from).
    pub fn set(&self, at: Stored) -> CounterSet {
        match self.chunks.get(at.chunk as usize) {
            Some(chunk) => CounterSet {
                store: Arc::clone(chunk),
                start: at.start,
                len: at.len,
            },
            None => CounterSet::default(),
        }
    }
}

/// A saturated counter's JSON form.
#[derive(Serialize, Deserialize)]
struct SaturatedValue {
    value: u64,
    saturated: bool,
}

/// A counter's JSON form: a plain number, or a saturated one.
#[derive(Deserialize)]
#[serde(untagged)]
enum ReadingRepr {
    Plain(u64),
    Flagged(SaturatedValue),
}

impl Serialize for CounterSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.len()))?;
        for r in self.readings() {
            if r.saturated {
                let v = SaturatedValue {
                    value: r.value,
                    saturated: true,
                };
                m.serialize_entry(&*r.name, &v)?;
            } else {
                m.serialize_entry(&*r.name, &r.value)?;
            }
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
                while let Some((name, v)) = map.next_entry::<String, ReadingRepr>()? {
                    let (value, saturated) = match v {
                        ReadingRepr::Plain(v) => (v, false),
                        ReadingRepr::Flagged(f) => (f.value, f.saturated),
                    };
                    out.push(Reading {
                        name: CounterName::intern(&name),
                        value,
                        saturated,
                    });
                }
                Ok(CounterSet::from_readings(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// The detail attributes a port answered (PortRcvErrorDetails, PortXmitDiscardDetails,
/// PortExtendedSpeedsCounters), each by its name with its counters. JSON: an object of
/// attribute name to counters. PortExtendedSpeedsCounters of a port running RS-FEC has
/// that layout's counters (FECCorrectableSymbolCtrLane0...).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Details(pub Vec<(String, CounterSet)>);

impl Details {
    pub fn get(&self, attribute: &str) -> Option<&CounterSet> {
        self.0.iter().find(|(a, _)| a == attribute).map(|(_, c)| c)
    }
    /// Adds or replaces an attribute's counters. The attributes stay in one order (the
    /// breakdowns, then PortExtendedSpeedsCounters), whatever order their replies came in.
    pub fn insert(&mut self, attribute: &str, counters: CounterSet) {
        match self.0.iter_mut().find(|(a, _)| a == attribute) {
            Some(slot) => slot.1 = counters,
            None => {
                self.0.push((attribute.to_string(), counters));
                self.0.sort_by_key(|(a, _)| Details::rank(a));
            }
        }
    }
    /// Where an attribute goes in the order of [`Details::insert`].
    fn rank(attribute: &str) -> usize {
        use ibscope_mad::attr::{perf_attrs::BREAKDOWNS, PortExtendedSpeedsCounters};
        use ibscope_mad::attribute::Attribute;
        BREAKDOWNS
            .iter()
            .map(|b| b.attribute)
            .chain([<PortExtendedSpeedsCounters as Attribute>::NAME])
            .position(|a| a == attribute)
            .unwrap_or(usize::MAX)
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Details {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (attribute, counters) in &self.0 {
            m.serialize_entry(attribute, counters)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Details {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Details, D::Error> {
        let map = std::collections::BTreeMap::<String, CounterSet>::deserialize(d)?;
        let mut details = Details::default();
        for (attribute, counters) in map {
            details.insert(&attribute, counters);
        }
        Ok(details)
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
    /// Its CapabilityMask2 (0x2: PortCountersExtended carries the error counters too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability_mask2: Option<u32>,
    /// PortCounters by specification name. PortXmitData/PortRcvData in bytes (the wire
    /// counts 4-octet words; multiplied by 4). `None` if the PMA did not answer.
    pub counters: Option<CounterSet>,
    /// PortCountersExtended (64-bit) by specification name, data in bytes: the counters the
    /// PMA implements (the error counters too with IsAdditionalPortCountersExtendedSupported);
    /// `None` when not implemented or not answered.
    pub extended: Option<CounterSet>,
    /// PortCounters counters at their maximum (they stop counting there).
    pub saturated: Vec<String>,
    /// The detail attributes read (`counters --details`, or the breakdown of an error
    /// counter that counted).
    #[serde(default, skip_serializing_if = "Details::is_empty")]
    pub details: Details,
    /// Queries of this port that failed.
    pub errors: Vec<String>,
}

impl PortSample {
    /// A port as a sweep starts it: nothing read yet.
    pub fn new(at: PortRef, remote: Option<PortRef>) -> PortSample {
        PortSample {
            at,
            remote,
            capability_mask: None,
            capability_mask2: None,
            counters: None,
            extended: None,
            saturated: Vec::new(),
            details: Details::default(),
            errors: Vec::new(),
        }
    }

    /// What the port's PMA implements, as far as its ClassPortInfo was read.
    pub fn capabilities(&self) -> PmaCapabilities {
        PmaCapabilities::new(
            self.capability_mask.unwrap_or(0),
            self.capability_mask2.unwrap_or(0),
        )
    }

    /// The best reading of a counter: the 64-bit PortCountersExtended one where the PMA
    /// has it, else PortCounters', else a detail attribute's.
    pub fn reading(&self, name: &str) -> Option<&Reading> {
        self.best(|r| r.name == name)
    }

    /// [`PortSample::reading`] of a name held as a [`CounterName`]: two bytes compared per
    /// reading instead of text (what checking every port against thresholds does).
    pub fn reading_of(&self, name: CounterName) -> Option<&Reading> {
        self.best(|r| r.name == name)
    }

    /// The first reading `is` picks, in [`PortSample::reading`]'s order.
    fn best(&self, is: impl Fn(&Reading) -> bool + Copy) -> Option<&Reading> {
        fn first_in(set: &CounterSet, is: impl Fn(&Reading) -> bool) -> Option<&Reading> {
            set.readings().iter().find(|&r| is(r))
        }
        self.extended
            .as_ref()
            .and_then(|set| first_in(set, is))
            .or_else(|| self.counters.as_ref().and_then(|set| first_in(set, is)))
            .or_else(|| self.details.0.iter().find_map(|(_, set)| first_in(set, is)))
    }

    /// The best value of a counter (see [`PortSample::reading`]).
    pub fn value(&self, name: &str) -> Option<u64> {
        self.reading(name).map(|r| r.value)
    }

    /// Its best reading stopped at its maximum and has no 64-bit replacement: the count is
    /// lost.
    pub fn is_saturated(&self, name: &str) -> bool {
        self.reading(name).is_some_and(|r| r.saturated)
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
pub(crate) mod test_support {
    use ibscope_mad::attr::{pma_capability2, PmaCapabilities, PortCounters, PortCountersExtended};

    use super::{CounterSet, PortSample, Reading, Sample};
    use crate::counters::pma::ALL_PORTS;
    use crate::model::refs::PortRef;
    use crate::model::NodeKind;

    /// ibsim's switch PMA: AllPortSelect, PortCountersExtended, PortXmitWait.
    pub const SWITCH_MASK: PmaCapabilities = PmaCapabilities::new(0x1300, 0);
    /// AllPortSelect without PortCountersExtended.
    pub const NO_EXTENDED_MASK: PmaCapabilities = PmaCapabilities::new(0x1100, 0);
    /// A fast switch's PMA: as ibsim's, and the 64-bit error counters.
    pub const ADDITIONAL_MASK: PmaCapabilities = PmaCapabilities::new(
        0x1300,
        pma_capability2::IS_ADDITIONAL_PORT_COUNTERS_EXTENDED_SUPPORTED,
    );

    pub fn port_ref(guid: u64, port: u8) -> PortRef {
        PortRef {
            node: crate::model::refs::NodeRef {
                guid,
                kind: NodeKind::Switch,
                name: "n".into(),
            },
            port,
            lid: 1,
            host: None,
            rail: None,
        }
    }

    /// A port whose PortCounters are `values` (those in `sat` saturated) and whose
    /// PortCountersExtended are `ext`.
    pub fn port_sample(
        values: &[(&str, u64)],
        ext: Option<&[(&str, u64)]>,
        sat: &[&str],
    ) -> PortSample {
        let counters = CounterSet::from_readings(
            values
                .iter()
                .map(|&(name, value)| Reading {
                    name: ibscope_mad::attr::CounterName::intern(name),
                    value,
                    saturated: sat.contains(&name),
                })
                .collect(),
        );
        PortSample {
            capability_mask: Some(SWITCH_MASK.mask),
            counters: Some(counters),
            extended: ext.map(|e| CounterSet::from_pairs(e.iter().copied())),
            saturated: sat.iter().map(|s| s.to_string()).collect(),
            ..PortSample::new(port_ref(1, 1), None)
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
                port_multicast_rcv_pkts,
                symbol_error_counter,
                link_error_recovery_counter,
                link_downed_counter,
                port_rcv_errors,
                port_rcv_remote_physical_errors,
                port_rcv_switch_relay_errors,
                port_xmit_discards,
                port_xmit_constraint_errors,
                port_rcv_constraint_errors,
                local_link_integrity_errors,
                excessive_buffer_overrun_errors,
                vl15_dropped,
                port_xmit_wait,
                qp1_dropped
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

    /// A sweep at 100k HCAs holds some twenty million readings: each is a name in two
    /// bytes, a value and a flag, sixteen bytes (it was twenty-four with a pointer).
    #[test]
    fn a_reading_takes_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Reading>(), 16);
    }

    /// Counter values decoded from a PortCounters of these bytes (zero-padded).
    fn decoded(bytes: &[u8]) -> Vec<CounterValue> {
        let mut b = [0u8; 44];
        b[..bytes.len().min(44)].copy_from_slice(&bytes[..bytes.len().min(44)]);
        PortCounters::decode(&b).unwrap().counters()
    }

    proptest::proptest! {
        /// Whatever mix of set sizes a sweep stores, each set made from the arena is the
        /// set made on its own of the same values: chunk boundaries lose nothing and mix
        /// no two sets.
        #[test]
        fn sets_from_the_arena_are_the_sets_on_their_own(
            sets in proptest::collection::vec(
                (proptest::collection::vec(proptest::num::u8::ANY, 0..44), 0usize..40),
                0..400,
            ),
        ) {
            let mut arena = ReadingArena::default();
            let mut expected = Vec::new();
            for (bytes, len) in &sets {
                let values: Vec<CounterValue> =
                    decoded(bytes).into_iter().cycle().take(*len).collect();
                expected.push((arena.store(&values), CounterSet::from_values(&values)));
            }
            let sealed = arena.seal();
            for (at, alone) in expected {
                proptest::prop_assert_eq!(sealed.set(at), alone);
            }
        }
    }

    /// Looking a counter up by its two-byte name finds what looking it up by text does,
    /// in the same order: PortCountersExtended, PortCounters, the detail attributes.
    #[test]
    fn a_reading_by_its_two_byte_name_is_the_reading_by_text() {
        let mut p = sample(
            &[("SymbolErrorCounter", 3), ("PortXmitData", 10)],
            Some(&[("PortXmitData", 11), ("SymbolErrorCounter", 4)]),
            &[],
        );
        p.details.insert(
            "PortRcvErrorDetails",
            CounterSet::from_pairs([("PortLocalPhysicalErrors", 5)]),
        );
        for name in CounterName::table_names().chain(["NotACounter"]) {
            let by_name = p.reading_of(CounterName::intern(name));
            assert_eq!(by_name, p.reading(name), "{name}");
        }
        let symbol = CounterName::intern("SymbolErrorCounter");
        assert_eq!(p.reading_of(symbol).map(|r| r.value), Some(4));
        let local = CounterName::intern("PortLocalPhysicalErrors");
        assert_eq!(p.reading_of(local).map(|r| r.value), Some(5));
    }

    #[test]
    fn a_set_longer_than_a_chunk_is_kept_whole() {
        let values: Vec<CounterValue> = decoded(&[7; 44])
            .into_iter()
            .cycle()
            .take(ReadingArena::CHUNK + 5)
            .collect();
        let mut arena = ReadingArena::default();
        let small = arena.store(&values[..3]);
        let long = arena.store(&values);
        let after = arena.store(&values[..2]);
        let sealed = arena.seal();
        assert_eq!(sealed.set(long), CounterSet::from_values(&values));
        assert_eq!(sealed.set(long).len(), ReadingArena::CHUNK + 5);
        assert_eq!(sealed.set(small), CounterSet::from_values(&values[..3]));
        assert_eq!(sealed.set(after), CounterSet::from_values(&values[..2]));
    }

    /// A set is a window on shared storage: equality and the JSON are its readings only.
    #[test]
    fn a_window_compares_and_prints_as_its_readings() {
        let values = decoded(&[1; 44]);
        let mut arena = ReadingArena::default();
        arena.store(&values[..4]);
        let at = arena.store(&values[4..9]);
        let set = arena.seal().set(at);
        let alone = CounterSet::from_values(&values[4..9]);
        assert_eq!(set, alone);
        assert_eq!(set.len(), 5);
        assert_eq!(format!("{set:?}"), format!("{alone:?}"));
        assert_eq!(
            serde_json::to_string(&set).unwrap(),
            serde_json::to_string(&alone).unwrap()
        );
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
            serde_json::to_string(&CounterSet::from_pairs([("A", 1), ("B", 2)])).unwrap(),
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

#[cfg(test)]
mod saturation_tests {
    use super::test_support::port_sample as sample;
    use super::*;
    use ibscope_mad::attr::{pma_capability, pma_capability2, PortCounters, PortCountersExtended};

    /// A 16-bit counter at 65535 is not a value: JSON says saturated with the value; it
    /// reads back the same.
    #[test]
    fn saturated_counters_are_not_plain_numbers_in_json() {
        let c = PortCounters {
            port_select: 1,
            symbol_error_counter: u16::MAX,
            port_rcv_errors: 3,
            ..Default::default()
        };
        let set = CounterSet::from_values(&c.counters());
        let json = serde_json::to_value(&set).unwrap();
        assert_eq!(
            json["SymbolErrorCounter"],
            serde_json::json!({"value": 65535, "saturated": true})
        );
        assert_eq!(json["PortRcvErrors"], 3);
        let text = serde_json::to_string(&set).unwrap();
        let back: CounterSet = serde_json::from_str(&text).unwrap();
        assert_eq!(back, set);
        assert!(back.is_saturated("SymbolErrorCounter"));
        assert!(!back.is_saturated("PortRcvErrors"));
    }

    /// A 64-bit counter past 2^53 (a few days of PortXmitData in bytes on a fast link)
    /// is written with all its digits, an integer (docs/json/README.md: readers that hold
    /// numbers as doubles round it; the JSON does not), and reads back exactly.
    #[test]
    fn counters_past_2_pow_53_keep_every_digit() {
        let big = (1u64 << 53) + 1;
        let set = CounterSet::from_pairs([("PortXmitData", big), ("PortRcvData", u64::MAX)]);
        let text = serde_json::to_string(&set).unwrap();
        assert_eq!(
            text,
            r#"{"PortXmitData":9007199254740993,"PortRcvData":18446744073709551615}"#
        );
        let back: CounterSet = serde_json::from_str(&text).unwrap();
        assert_eq!(back.get("PortXmitData"), Some(big));
        assert_eq!(back.get("PortRcvData"), Some(u64::MAX));
    }

    /// With IsAdditionalPortCountersExtendedSupported the 64-bit error counters replace the
    /// 16-bit ones: not saturated, the real count.
    #[test]
    fn additional_extended_error_counters_replace_saturated_ones() {
        let pc = PortCounters {
            port_select: 1,
            symbol_error_counter: u16::MAX,
            link_downed_counter: u8::MAX,
            ..Default::default()
        };
        let ext = PortCountersExtended {
            port_select: 1,
            symbol_error_counter: 1_000_000,
            link_downed_counter: 300,
            ..Default::default()
        };
        let caps = PmaCapabilities::new(
            pma_capability::IS_EXTENDED_WIDTH_SUPPORTED,
            pma_capability2::IS_ADDITIONAL_PORT_COUNTERS_EXTENDED_SUPPORTED,
        );
        let p = PortSample {
            capability_mask: Some(caps.mask),
            capability_mask2: Some(caps.mask2),
            counters: Some(CounterSet::from_values(&pc.counters())),
            extended: Some(CounterSet::from_values(
                &ext.counters_for(caps).collect::<Vec<_>>(),
            )),
            saturated: vec!["SymbolErrorCounter".into(), "LinkDownedCounter".into()],
            ..PortSample::new(test_support::port_ref(1, 1), None)
        };
        assert_eq!(p.capabilities(), caps);
        assert_eq!(p.value("SymbolErrorCounter"), Some(1_000_000));
        assert_eq!(p.value("LinkDownedCounter"), Some(300));
        assert!(!p.is_saturated("SymbolErrorCounter"));
        // Without the capability the same PortCountersExtended reply has no error counters:
        // the 16-bit value stands, saturated.
        let q = PortSample {
            capability_mask2: Some(0),
            extended: Some(CounterSet::from_values(
                &ext.counters_for(PmaCapabilities::new(caps.mask, 0))
                    .collect::<Vec<_>>(),
            )),
            ..p.clone()
        };
        assert_eq!(q.value("SymbolErrorCounter"), Some(65535));
        assert!(q.is_saturated("SymbolErrorCounter"));
    }

    #[test]
    fn details_are_an_object_of_attributes() {
        let mut p = sample(&[("PortRcvErrors", 4)], None, &[]);
        let mut d = Details::default();
        d.insert(
            "PortRcvErrorDetails",
            CounterSet::from_pairs([("PortMalformedPktErrors", 4)]),
        );
        p.details = d;
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(
            json["details"],
            serde_json::json!({"PortRcvErrorDetails": {"PortMalformedPktErrors": 4}})
        );
        assert_eq!(p.value("PortMalformedPktErrors"), Some(4));
        let back: PortSample = serde_json::from_str(&serde_json::to_string(&p).unwrap()).unwrap();
        assert_eq!(back, p);
        // No details read: no key.
        let plain = serde_json::to_value(sample(&[], None, &[])).unwrap();
        assert!(plain.get("details").is_none());
    }

    /// Replies come back in any order; the attributes are listed in one.
    #[test]
    fn details_keep_one_order_whatever_the_replies_order() {
        let set = || CounterSet::from_pairs([("X", 1)]);
        let mut d = Details::default();
        for a in [
            "PortExtendedSpeedsCounters",
            "PortXmitDiscardDetails",
            "PortRcvErrorDetails",
        ] {
            d.insert(a, set());
        }
        let order: Vec<&str> = d.0.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(
            order,
            [
                "PortRcvErrorDetails",
                "PortXmitDiscardDetails",
                "PortExtendedSpeedsCounters"
            ]
        );
        let json = serde_json::to_string(&d).unwrap();
        let back: Details = serde_json::from_str(&json).unwrap();
        assert_eq!(back, d);
    }
}
