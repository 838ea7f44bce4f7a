//! PerfMgt attribute layouts (IBA 16.1), in the 192-byte GMP data area (MAD offset 64).
//!
//! A counter is a row of its attribute's table like any field, with a [`Counter`] role: its
//! kind (error, data, packets, congestion) and the ClassPortInfo capability it needs. Names,
//! widths, saturation and the name lists below all come from those rows.

use crate::attribute::{Attribute, PerfMgt};
use crate::wire::{FieldSpec, FieldValue, Role};
use crate::wire_struct;
use CounterKind::*;

wire_struct! {
    /// ClassPortInfo (IBA 13.4.8.1), as the PMA answers it.
    pub struct ClassPortInfo (72) attribute(PerfMgt, 0x0001, "ClassPortInfo") {
        pub base_version: u8 = 0, 8, "BaseVersion";
        pub class_version: u8 = 8, 8, "ClassVersion";
        /// See [`pma_capability`].
        pub capability_mask: u16 = 16, 16, "CapabilityMask";
        /// See [`pma_capability2`].
        pub capability_mask2: u32 = 32, 27, "CapabilityMask2";
        pub resp_time_value: u8 = 59, 5, "RespTimeVal";
        pub redirect_gid: [u8; 16] = 64, 128, "RedirectGID";
        pub redirect_tc: u8 = 192, 8, "RedirectTC";
        pub redirect_sl: u8 = 200, 4, "RedirectSL";
        pub redirect_fl: u32 = 204, 20, "RedirectFL";
        pub redirect_lid: u16 = 224, 16, "RedirectLID";
        pub redirect_pkey: u16 = 240, 16, "RedirectPKey";
        pub redirect_qp: u32 = 264, 24, "RedirectQP";
        pub redirect_qkey: u32 = 288, 32, "RedirectQKey";
        pub trap_gid: [u8; 16] = 320, 128, "TrapGID";
        pub trap_tc: u8 = 448, 8, "TrapTC";
        pub trap_sl: u8 = 456, 4, "TrapSL";
        pub trap_fl: u32 = 460, 20, "TrapFL";
        pub trap_lid: u16 = 480, 16, "TrapLID";
        pub trap_pkey: u16 = 496, 16, "TrapPKey";
        pub trap_hl: u8 = 512, 8, "TrapHL";
        pub trap_qp: u32 = 520, 24, "TrapQP";
        pub trap_qkey: u32 = 544, 32, "TrapQKey";
    }
}

impl ClassPortInfo {
    /// PortCountersExtended answers (with or without the unicast/multicast counters).
    pub fn has_extended_counters(&self) -> bool {
        pma_capability::has_extended_counters(self.capability_mask)
    }
    /// PortCountersExtended carries the four unicast/multicast packet counters.
    pub fn has_ietf_counters(&self) -> bool {
        self.capability_mask & pma_capability::IS_EXTENDED_WIDTH_SUPPORTED != 0
    }
    pub fn has_xmit_wait(&self) -> bool {
        self.capability_mask & pma_capability::IS_PORT_XMIT_WAIT_SUPPORTED != 0
    }
}

/// PMA ClassPortInfo CapabilityMask bits (IBA 16.1.2 and the PortCountersExtended annex;
/// the names of rdma-core's IB_PM_* constants in comments).
pub mod pma_capability {
    /// PortSelect 0xFF (all ports) is accepted. IB_PM_ALL_PORT_SELECT.
    pub const ALL_PORT_SELECT: u16 = 1 << 8;
    /// PortCountersExtended with every counter. IB_PM_EXT_WIDTH_SUPPORTED.
    pub const IS_EXTENDED_WIDTH_SUPPORTED: u16 = 1 << 9;
    /// PortCountersExtended without the unicast/multicast counters. IB_PM_EXT_WIDTH_NOIETF_SUP.
    pub const IS_EXTENDED_WIDTH_NO_IETF_SUPPORTED: u16 = 1 << 10;
    /// Only PortSamples* are implemented. IB_PM_SAMPLES_ONLY_SUP.
    pub const IS_SAMPLES_ONLY_SUPPORTED: u16 = 1 << 11;
    /// PortCounters.PortXmitWait is implemented. IB_PM_PC_XMIT_WAIT_SUP.
    pub const IS_PORT_XMIT_WAIT_SUPPORTED: u16 = 1 << 12;
    /// PortCounters.QP1Dropped is implemented. IB_PM_IS_QP1_DROP_SUP.
    pub const IS_QP1_DROPPED_SUPPORTED: u16 = 1 << 15;

    /// A PMA with this CapabilityMask answers PortCountersExtended (with or without the
    /// unicast/multicast counters).
    pub const fn has_extended_counters(capability_mask: u16) -> bool {
        capability_mask & (IS_EXTENDED_WIDTH_SUPPORTED | IS_EXTENDED_WIDTH_NO_IETF_SUPPORTED) != 0
    }
}

/// PMA ClassPortInfo CapabilityMask2 bits (the 27-bit field).
pub mod pma_capability2 {
    /// IB_PM_IS_PM_KEY_SUPPORTED.
    pub const IS_PM_KEY_SUPPORTED: u32 = 1 << 0;
    /// PortCountersExtended also carries the error counters in 64 bits.
    /// IB_PM_IS_ADDL_PORT_CTRS_EXT_SUP.
    pub const IS_ADDITIONAL_PORT_COUNTERS_EXTENDED_SUPPORTED: u32 = 1 << 1;
}

/// What a counter counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum CounterKind {
    /// One of the twelve error counters of IBA 16.1.3.5: what ibqueryerrors and `check`
    /// look at.
    Error,
    /// Data in 4-octet words (PortXmitData, PortRcvData): multiply by 4 for bytes.
    Data,
    /// Packets.
    Packets,
    /// Ticks a port had data to send and no credit to send it (PortXmitWait): congestion,
    /// not an error.
    Congestion,
    /// MADs dropped at QP1 for want of resources (QP1Dropped): neither an error counter nor
    /// traffic.
    Resource,
}

/// The counter facts of a table row: see [`Role::Counter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    pub kind: CounterKind,
    /// ClassPortInfo CapabilityMask bits a PMA sets when it implements the counter
    /// ([`ALWAYS`]: every PMA does).
    pub needs: u16,
}

/// No capability bit needed.
pub const ALWAYS: u16 = 0;

/// The role of a counter row of a layout table.
pub const fn counter(kind: CounterKind, needs: u16) -> Role {
    Role::Counter(Counter { kind, needs })
}

/// What a PMA is assumed to implement when its ClassPortInfo is not known: every counter but
/// QP1Dropped (whose bits are reserved without IsQP1DroppedSupported).
pub const ASSUMED_CAPABILITIES: u16 =
    pma_capability::IS_PORT_XMIT_WAIT_SUPPORTED | pma_capability::IS_EXTENDED_WIDTH_SUPPORTED;

wire_struct! {
    /// PortCounters (IBA 16.1.3.5). PortXmitData/PortRcvData count 4-octet words. Every
    /// counter stops at its maximum (its width's, [`FieldSpec::max`]) instead of wrapping.
    pub struct PortCounters (44) attribute(PerfMgt, 0x0012, "PortCounters") {
        pub port_select: u8 = 8, 8, "PortSelect";
        /// Which counters a Set clears; see [`counter_select`].
        pub counter_select: u16 = 16, 16, "CounterSelect";
        pub symbol_error_counter: u16 = 32, 16, "SymbolErrorCounter", counter(Error, ALWAYS);
        pub link_error_recovery_counter: u8 = 48, 8, "LinkErrorRecoveryCounter",
            counter(Error, ALWAYS);
        pub link_downed_counter: u8 = 56, 8, "LinkDownedCounter", counter(Error, ALWAYS);
        pub port_rcv_errors: u16 = 64, 16, "PortRcvErrors", counter(Error, ALWAYS);
        pub port_rcv_remote_physical_errors: u16 = 80, 16, "PortRcvRemotePhysicalErrors",
            counter(Error, ALWAYS);
        pub port_rcv_switch_relay_errors: u16 = 96, 16, "PortRcvSwitchRelayErrors",
            counter(Error, ALWAYS);
        pub port_xmit_discards: u16 = 112, 16, "PortXmitDiscards", counter(Error, ALWAYS);
        pub port_xmit_constraint_errors: u8 = 128, 8, "PortXmitConstraintErrors",
            counter(Error, ALWAYS);
        pub port_rcv_constraint_errors: u8 = 136, 8, "PortRcvConstraintErrors",
            counter(Error, ALWAYS);
        pub counter_select2: u8 = 144, 8, "CounterSelect2";
        pub local_link_integrity_errors: u8 = 152, 4, "LocalLinkIntegrityErrors",
            counter(Error, ALWAYS);
        pub excessive_buffer_overrun_errors: u8 = 156, 4, "ExcessiveBufferOverrunErrors",
            counter(Error, ALWAYS);
        pub qp1_dropped: u16 = 160, 16, "QP1Dropped",
            counter(Resource, pma_capability::IS_QP1_DROPPED_SUPPORTED);
        pub vl15_dropped: u16 = 176, 16, "VL15Dropped", counter(Error, ALWAYS);
        pub port_xmit_data: u32 = 192, 32, "PortXmitData", counter(Data, ALWAYS);
        pub port_rcv_data: u32 = 224, 32, "PortRcvData", counter(Data, ALWAYS);
        pub port_xmit_pkts: u32 = 256, 32, "PortXmitPkts", counter(Packets, ALWAYS);
        pub port_rcv_pkts: u32 = 288, 32, "PortRcvPkts", counter(Packets, ALWAYS);
        pub port_xmit_wait: u32 = 320, 32, "PortXmitWait",
            counter(Congestion, pma_capability::IS_PORT_XMIT_WAIT_SUPPORTED);
    }
}

wire_struct! {
    /// PortCountersExtended (IBA 16.1.4.6): 64-bit data and packet counters. The four
    /// unicast/multicast counters exist only with IsExtendedWidthSupported (without it,
    /// IsExtendedWidthSupportedNoIETF, they read 0).
    pub struct PortCountersExtended (72) attribute(PerfMgt, 0x001d, "PortCountersExtended") {
        pub port_select: u8 = 8, 8, "PortSelect";
        pub counter_select: u16 = 16, 16, "CounterSelect";
        pub port_xmit_data: u64 = 64, 64, "PortXmitData", counter(Data, ALWAYS);
        pub port_rcv_data: u64 = 128, 64, "PortRcvData", counter(Data, ALWAYS);
        pub port_xmit_pkts: u64 = 192, 64, "PortXmitPkts", counter(Packets, ALWAYS);
        pub port_rcv_pkts: u64 = 256, 64, "PortRcvPkts", counter(Packets, ALWAYS);
        pub port_unicast_xmit_pkts: u64 = 320, 64, "PortUnicastXmitPkts",
            counter(Packets, pma_capability::IS_EXTENDED_WIDTH_SUPPORTED);
        pub port_unicast_rcv_pkts: u64 = 384, 64, "PortUnicastRcvPkts",
            counter(Packets, pma_capability::IS_EXTENDED_WIDTH_SUPPORTED);
        pub port_multicast_xmit_pkts: u64 = 448, 64, "PortMulticastXmitPkts",
            counter(Packets, pma_capability::IS_EXTENDED_WIDTH_SUPPORTED);
        pub port_multicast_rcv_pkts: u64 = 512, 64, "PortMulticastRcvPkts",
            counter(Packets, pma_capability::IS_EXTENDED_WIDTH_SUPPORTED);
    }
}

/// One counter of a counters attribute, by its specification name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CounterValue {
    /// The name in the specification (and perfquery's output), e.g. "SymbolErrorCounter".
    pub name: &'static str,
    pub value: u64,
    /// Width of the counter on the wire: a value of `2^bits - 1` is saturated.
    pub bits: u32,
    pub kind: CounterKind,
}

impl CounterValue {
    /// The largest value the counter holds.
    pub fn max(&self) -> u64 {
        if self.bits >= 64 {
            u64::MAX
        } else {
            (1u64 << self.bits) - 1
        }
    }
    /// The counter has stopped at its maximum (64-bit counters are never reported so).
    pub fn saturated(&self) -> bool {
        self.bits < 64 && self.value == self.max()
    }
    /// Counts 4-octet words (PortXmitData / PortRcvData): multiply by 4 for bytes.
    pub fn data_words(&self) -> bool {
        self.kind == CounterKind::Data
    }
}

/// The counters among a counters attribute's fields that a PMA with `capability_mask`
/// implements, in table order.
fn counters_in<'a>(
    fields: impl Iterator<Item = (&'static FieldSpec, FieldValue<'a>)> + 'a,
    capability_mask: u16,
) -> impl Iterator<Item = CounterValue> + 'a {
    fields.filter_map(move |(spec, value)| {
        let counter = spec.counter()?;
        if capability_mask & counter.needs != counter.needs {
            return None;
        }
        Some(CounterValue {
            name: spec.name,
            value: value.as_u64()?,
            bits: spec.bit_width as u32,
            kind: counter.kind,
        })
    })
}

/// A counters attribute a request addresses to one port (or all: 0xFF) by PortSelect, and
/// whose Set clears the counters CounterSelect names.
pub trait PortSelected: Attribute<Class = PerfMgt> + Default {
    /// The template of a request for port `port`.
    fn selecting(port: u8, counter_select: u16) -> Self;
    /// The port a reply is for.
    fn port_select(&self) -> u8;
}

/// The counters of the counters attributes, read from their tables, and their selection.
macro_rules! counter_access {
    ($($ty:ty),*) => {$(
        impl PortSelected for $ty {
            fn selecting(port: u8, counter_select: u16) -> Self {
                Self {
                    port_select: port,
                    counter_select,
                    ..Default::default()
                }
            }
            fn port_select(&self) -> u8 {
                self.port_select
            }
        }

        impl $ty {
            /// The counters a PMA with ClassPortInfo CapabilityMask `capability_mask`
            /// implements, in specification order.
            pub fn counters_for(&self, capability_mask: u16) -> impl Iterator<Item = CounterValue> + '_ {
                counters_in(self.fields(), capability_mask)
            }
            /// The counters of a PMA with [`ASSUMED_CAPABILITIES`], collected.
            pub fn counters(&self) -> Vec<CounterValue> {
                self.counters_for(ASSUMED_CAPABILITIES).collect()
            }
            /// The counter called `name` (spec name, as perfquery prints it), of
            /// [`Self::counters`].
            pub fn get(&self, name: &str) -> Option<CounterValue> {
                self.counters_for(ASSUMED_CAPABILITIES).find(|c| c.name == name)
            }
        }
    )*};
}
counter_access!(PortCounters, PortCountersExtended);

/// CounterSelect bits of a PortCounters Set (IBA 16.1.3.5): which counters to clear.
pub mod counter_select {
    pub const SYMBOL_ERROR_COUNTER: u16 = 1 << 0;
    pub const LINK_ERROR_RECOVERY_COUNTER: u16 = 1 << 1;
    pub const LINK_DOWNED_COUNTER: u16 = 1 << 2;
    pub const PORT_RCV_ERRORS: u16 = 1 << 3;
    pub const PORT_RCV_REMOTE_PHYSICAL_ERRORS: u16 = 1 << 4;
    pub const PORT_RCV_SWITCH_RELAY_ERRORS: u16 = 1 << 5;
    pub const PORT_XMIT_DISCARDS: u16 = 1 << 6;
    pub const PORT_XMIT_CONSTRAINT_ERRORS: u16 = 1 << 7;
    pub const PORT_RCV_CONSTRAINT_ERRORS: u16 = 1 << 8;
    pub const LOCAL_LINK_INTEGRITY_ERRORS: u16 = 1 << 9;
    pub const EXCESSIVE_BUFFER_OVERRUN_ERRORS: u16 = 1 << 10;
    pub const VL15_DROPPED: u16 = 1 << 11;
    pub const PORT_XMIT_DATA: u16 = 1 << 12;
    pub const PORT_RCV_DATA: u16 = 1 << 13;
    pub const PORT_XMIT_PKTS: u16 = 1 << 14;
    pub const PORT_RCV_PKTS: u16 = 1 << 15;
    pub const ALL: u16 = 0xffff;
}

// Name lists, computed from the tables at compile time.

/// Whether a row is a counter of `kind` (any kind for `None`) that a PMA with
/// `capability_mask` implements.
const fn listed(spec: &FieldSpec, kind: Option<CounterKind>, capability_mask: u16) -> bool {
    let Role::Counter(c) = spec.role else {
        return false;
    };
    let kind_matches = match kind {
        Some(k) => k as u8 == c.kind as u8,
        None => true,
    };
    kind_matches && capability_mask & c.needs == c.needs
}

const fn same_name(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Whether `in_table` has a counter row called `name`.
const fn has_counter(in_table: &[FieldSpec], name: &str) -> bool {
    let mut i = 0;
    while i < in_table.len() {
        if listed(&in_table[i], None, u16::MAX) && same_name(in_table[i].name, name) {
            return true;
        }
        i += 1;
    }
    false
}

/// Which rows of `table` a name list takes: counters of `kind` a PMA with `capability_mask`
/// implements, and of those only the ones `other` has (`Some(true)`), lacks (`Some(false)`),
/// or either (`None`).
#[derive(Clone, Copy)]
struct Pick {
    kind: Option<CounterKind>,
    capability_mask: u16,
    in_other: Option<(&'static [FieldSpec], bool)>,
}

const fn picked(spec: &FieldSpec, pick: Pick) -> bool {
    if !listed(spec, pick.kind, pick.capability_mask) {
        return false;
    }
    match pick.in_other {
        Some((other, wanted)) => has_counter(other, spec.name) == wanted,
        None => true,
    }
}

const fn count(table: &[FieldSpec], pick: Pick) -> usize {
    let (mut i, mut n) = (0, 0);
    while i < table.len() {
        if picked(&table[i], pick) {
            n += 1;
        }
        i += 1;
    }
    n
}

const fn names<const N: usize>(table: &[FieldSpec], pick: Pick) -> [&'static str; N] {
    let mut out = [""; N];
    let (mut i, mut n) = (0, 0);
    while i < table.len() {
        if picked(&table[i], pick) {
            out[n] = table[i].name;
            n += 1;
        }
        i += 1;
    }
    out
}

const PORT_COUNTERS_PICK: Pick = Pick {
    kind: None,
    capability_mask: ASSUMED_CAPABILITIES,
    in_other: None,
};
const ERROR_PICK: Pick = Pick {
    kind: Some(Error),
    capability_mask: u16::MAX,
    in_other: None,
};
const EXTENDED_ONLY_PICK: Pick = Pick {
    kind: None,
    capability_mask: u16::MAX,
    in_other: Some((PortCounters::FIELDS, false)),
};
const WITH_EXTENDED_FORM_PICK: Pick = Pick {
    kind: None,
    capability_mask: u16::MAX,
    in_other: Some((PortCountersExtended::FIELDS, true)),
};

/// PortCounters' counters of a PMA with [`ASSUMED_CAPABILITIES`], in specification order.
pub const PORT_COUNTER_NAMES: [&str; count(PortCounters::FIELDS, PORT_COUNTERS_PICK)] =
    names(PortCounters::FIELDS, PORT_COUNTERS_PICK);

/// The twelve error counters of IBA 16.1.3.5 (the rows of kind [`CounterKind::Error`]).
pub const ERROR_COUNTERS: [&str; count(PortCounters::FIELDS, ERROR_PICK)] =
    names(PortCounters::FIELDS, ERROR_PICK);

/// PortCountersExtended's counters, in specification order.
pub const EXTENDED_COUNTER_NAMES: [&str; count(PortCountersExtended::FIELDS, PORT_COUNTERS_PICK)] =
    names(PortCountersExtended::FIELDS, PORT_COUNTERS_PICK);

/// PortCountersExtended counters PortCounters does not have (unicast and multicast).
pub const EXTENDED_ONLY_COUNTERS: [&str; count(PortCountersExtended::FIELDS, EXTENDED_ONLY_PICK)] =
    names(PortCountersExtended::FIELDS, EXTENDED_ONLY_PICK);

/// PortCounters counters PortCountersExtended also has, 64 bits wide (data and packets).
pub const COUNTERS_WITH_EXTENDED_FORM: [&str;
    count(PortCounters::FIELDS, WITH_EXTENDED_FORM_PICK)] =
    names(PortCounters::FIELDS, WITH_EXTENDED_FORM_PICK);

/// The kind of the counter called `name` in PortCounters or PortCountersExtended.
pub fn counter_kind(name: &str) -> Option<CounterKind> {
    PortCounters::FIELDS
        .iter()
        .chain(PortCountersExtended::FIELDS)
        .find(|spec| spec.name == name)
        .and_then(|spec| spec.counter())
        .map(|c| c.kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PortCounters laid out by hand from IBA 16.1.3.5: port 1, SymbolErrorCounter 17,
    /// LinkDowned 255 (saturated), PortXmitData 0x01020304 words.
    #[test]
    fn golden_port_counters_by_hand() {
        let mut b = [0u8; 44];
        b[1] = 1;
        b[4..6].copy_from_slice(&17u16.to_be_bytes());
        b[7] = 0xff;
        b[19] = 0x21; // LocalLinkIntegrity 2, ExcessiveBufferOverrun 1
        b[20..22].copy_from_slice(&3u16.to_be_bytes()); // QP1Dropped
        b[22..24].copy_from_slice(&0xffffu16.to_be_bytes()); // VL15Dropped, saturated
        b[24..28].copy_from_slice(&0x01020304u32.to_be_bytes());
        b[40..44].copy_from_slice(&9u32.to_be_bytes());
        let c = PortCounters::decode(&b).unwrap();
        assert_eq!(c.port_select, 1);
        assert_eq!(c.symbol_error_counter, 17);
        assert_eq!(c.link_downed_counter, 255);
        assert_eq!(c.local_link_integrity_errors, 2);
        assert_eq!(c.excessive_buffer_overrun_errors, 1);
        assert_eq!(c.qp1_dropped, 3);
        assert_eq!(
            u64::from(c.vl15_dropped),
            PortCounters::vl15_dropped.spec.max()
        );
        assert_eq!(c.port_xmit_data, 0x01020304);
        assert_eq!(c.port_xmit_wait, 9);
        assert_eq!(c.to_bytes(), b);
        let downed = c.get("LinkDownedCounter").unwrap();
        assert!(downed.saturated());
        assert_eq!(downed.max(), 255);
        assert!(c.get("VL15Dropped").unwrap().saturated());
        let sym = c.get("SymbolErrorCounter").unwrap();
        assert_eq!((sym.value, sym.bits, sym.saturated()), (17, 16, false));
        assert_eq!(sym.kind, CounterKind::Error);
        assert!(c.get("PortXmitData").unwrap().data_words());
        assert_eq!(c.counters().len(), 17);
        assert!(c.get("QP1Dropped").is_none());
        let with_qp1: Vec<_> = c
            .counters_for(pma_capability::IS_QP1_DROPPED_SUPPORTED)
            .map(|f| (f.name, f.value))
            .collect();
        assert!(with_qp1.contains(&("QP1Dropped", 3)));
        assert!(!with_qp1.iter().any(|(n, _)| *n == "PortXmitWait"));
        assert_eq!(c.counters_for(0x1200).count(), 17);
        assert!(PortCounters::decode(&b[..43]).is_err());
    }

    #[test]
    fn every_counter_saturates_at_its_field_width() {
        let all = PortCounters {
            symbol_error_counter: u16::MAX,
            link_error_recovery_counter: u8::MAX,
            link_downed_counter: u8::MAX,
            port_rcv_errors: u16::MAX,
            port_rcv_remote_physical_errors: u16::MAX,
            port_rcv_switch_relay_errors: u16::MAX,
            port_xmit_discards: u16::MAX,
            port_xmit_constraint_errors: u8::MAX,
            port_rcv_constraint_errors: u8::MAX,
            local_link_integrity_errors: 15,
            excessive_buffer_overrun_errors: 15,
            qp1_dropped: u16::MAX,
            vl15_dropped: u16::MAX,
            port_xmit_data: u32::MAX,
            port_rcv_data: u32::MAX,
            port_xmit_pkts: u32::MAX,
            port_rcv_pkts: u32::MAX,
            port_xmit_wait: u32::MAX,
            ..Default::default()
        };
        // Every counter at its maximum encodes without overflow and reads back saturated.
        let mut buf = [0u8; 44];
        all.encode_into(&mut buf).unwrap();
        let decoded = PortCounters::decode(&buf).unwrap();
        assert!(decoded.counters_for(u16::MAX).all(|c| c.saturated()));
        assert_eq!(decoded.counters_for(u16::MAX).count(), 18);
        assert_eq!(PortCounters::local_link_integrity_errors.spec.max(), 15);
        assert_eq!(PortCounters::port_xmit_wait.spec.max(), 0xffff_ffff);
        let e = PortCountersExtended {
            port_xmit_data: u64::MAX,
            ..Default::default()
        };
        assert!(!e.get("PortXmitData").unwrap().saturated());
        assert_eq!(PortCountersExtended::port_xmit_data.spec.max(), u64::MAX);
    }

    /// The name lists come from the tables: the twelve error counters of IBA 16.1.3.5 by
    /// kind (QP1Dropped and PortXmitWait are not among them), the rest by table.
    #[test]
    fn name_lists_follow_the_tables() {
        assert_eq!(
            ERROR_COUNTERS,
            [
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
            ]
        );
        assert_eq!(PORT_COUNTER_NAMES.len(), 17);
        assert_eq!(PORT_COUNTER_NAMES[..12], ERROR_COUNTERS);
        assert_eq!(
            PORT_COUNTER_NAMES[12..],
            [
                "PortXmitData",
                "PortRcvData",
                "PortXmitPkts",
                "PortRcvPkts",
                "PortXmitWait"
            ]
        );
        assert_eq!(
            COUNTERS_WITH_EXTENDED_FORM,
            ["PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts"]
        );
        assert_eq!(
            EXTENDED_ONLY_COUNTERS,
            [
                "PortUnicastXmitPkts",
                "PortUnicastRcvPkts",
                "PortMulticastXmitPkts",
                "PortMulticastRcvPkts"
            ]
        );
        assert_eq!(EXTENDED_COUNTER_NAMES[..4], COUNTERS_WITH_EXTENDED_FORM);
        assert_eq!(EXTENDED_COUNTER_NAMES[4..], EXTENDED_ONLY_COUNTERS);
        assert_eq!(counter_kind("PortXmitWait"), Some(CounterKind::Congestion));
        assert_eq!(counter_kind("PortRcvData"), Some(CounterKind::Data));
        assert_eq!(
            counter_kind("PortUnicastRcvPkts"),
            Some(CounterKind::Packets)
        );
        assert_eq!(counter_kind("PortSelect"), None);
        assert_eq!(counter_kind("Nonsense"), None);
    }

    #[test]
    fn class_port_info_capabilities() {
        let c = ClassPortInfo {
            capability_mask: 0x1200,
            ..Default::default()
        };
        assert!(c.has_extended_counters());
        assert!(c.has_ietf_counters());
        assert!(c.has_xmit_wait());
        let noietf = ClassPortInfo {
            capability_mask: pma_capability::IS_EXTENDED_WIDTH_NO_IETF_SUPPORTED,
            ..Default::default()
        };
        assert!(noietf.has_extended_counters() && !noietf.has_ietf_counters());
        assert!(!ClassPortInfo::default().has_extended_counters());
    }
}
