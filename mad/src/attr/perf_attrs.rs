//! PerfMgt attribute layouts (IBA 16.1), in the 192-byte GMP data area (MAD offset 64).

use crate::wire_struct;

wire_struct! {
    /// ClassPortInfo (IBA 13.4.8.1), as the PMA answers it.
    pub struct ClassPortInfo (72) {
        pub base_version: u8 = 0, 8;
        pub class_version: u8 = 8, 8;
        /// See [`pma_capability`].
        pub capability_mask: u16 = 16, 16;
        /// See [`pma_capability2`].
        pub capability_mask2: u32 = 32, 27;
        pub resp_time_value: u8 = 59, 5;
        pub redirect_gid: [u8; 16] = 64, 128;
        pub redirect_tc: u8 = 192, 8;
        pub redirect_sl: u8 = 200, 4;
        pub redirect_fl: u32 = 204, 20;
        pub redirect_lid: u16 = 224, 16;
        pub redirect_pkey: u16 = 240, 16;
        pub redirect_qp: u32 = 264, 24;
        pub redirect_qkey: u32 = 288, 32;
        pub trap_gid: [u8; 16] = 320, 128;
        pub trap_tc: u8 = 448, 8;
        pub trap_sl: u8 = 456, 4;
        pub trap_fl: u32 = 460, 20;
        pub trap_lid: u16 = 480, 16;
        pub trap_pkey: u16 = 496, 16;
        pub trap_hl: u8 = 512, 8;
        pub trap_qp: u32 = 520, 24;
        pub trap_qkey: u32 = 544, 32;
    }
}

impl ClassPortInfo {
    /// PortCountersExtended answers (with or without the unicast/multicast counters).
    pub fn has_extended_counters(&self) -> bool {
        self.capability_mask
            & (pma_capability::IS_EXTENDED_WIDTH_SUPPORTED
                | pma_capability::IS_EXTENDED_WIDTH_NO_IETF_SUPPORTED)
            != 0
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

    /// Older short names, kept for callers.
    pub const EXTENDED_WIDTH: u16 = IS_EXTENDED_WIDTH_SUPPORTED;
    pub const EXTENDED_WIDTH_NO_IETF: u16 = IS_EXTENDED_WIDTH_NO_IETF_SUPPORTED;
    pub const PORT_XMIT_WAIT: u16 = IS_PORT_XMIT_WAIT_SUPPORTED;
}

/// PMA ClassPortInfo CapabilityMask2 bits (the 27-bit field).
pub mod pma_capability2 {
    /// IB_PM_IS_PM_KEY_SUPPORTED.
    pub const IS_PM_KEY_SUPPORTED: u32 = 1 << 0;
    /// PortCountersExtended also carries the error counters in 64 bits.
    /// IB_PM_IS_ADDL_PORT_CTRS_EXT_SUP.
    pub const IS_ADDITIONAL_PORT_COUNTERS_EXTENDED_SUPPORTED: u32 = 1 << 1;
}

wire_struct! {
    /// PortCounters (IBA 16.1.3.5). PortXmitData/PortRcvData count 4-octet words. Every
    /// counter stops at its maximum (see the `MAX_*` constants) instead of wrapping.
    pub struct PortCounters (44) {
        pub port_select: u8 = 8, 8;
        /// Which counters a Set clears; see [`counter_select`].
        pub counter_select: u16 = 16, 16;
        pub symbol_error_counter: u16 = 32, 16;
        pub link_error_recovery_counter: u8 = 48, 8;
        pub link_downed_counter: u8 = 56, 8;
        pub port_rcv_errors: u16 = 64, 16;
        pub port_rcv_remote_physical_errors: u16 = 80, 16;
        pub port_rcv_switch_relay_errors: u16 = 96, 16;
        pub port_xmit_discards: u16 = 112, 16;
        pub port_xmit_constraint_errors: u8 = 128, 8;
        pub port_rcv_constraint_errors: u8 = 136, 8;
        pub counter_select2: u8 = 144, 8;
        pub local_link_integrity_errors: u8 = 152, 4;
        pub excessive_buffer_overrun_errors: u8 = 156, 4;
        /// Only meaningful with [`pma_capability::IS_QP1_DROPPED_SUPPORTED`].
        pub qp1_dropped: u16 = 160, 16;
        pub vl15_dropped: u16 = 176, 16;
        pub port_xmit_data: u32 = 192, 32;
        pub port_rcv_data: u32 = 224, 32;
        pub port_xmit_pkts: u32 = 256, 32;
        pub port_rcv_pkts: u32 = 288, 32;
        /// Only meaningful with [`pma_capability::IS_PORT_XMIT_WAIT_SUPPORTED`].
        pub port_xmit_wait: u32 = 320, 32;
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
    /// Counts 4-octet words (PortXmitData / PortRcvData): multiply by 4 for bytes.
    pub data_words: bool,
}

impl CounterValue {
    /// The largest value the counter holds.
    pub fn max(&self) -> u64 {
        max_for_bits(self.bits)
    }
    /// The counter has stopped at its maximum (64-bit counters are never reported so).
    pub fn saturated(&self) -> bool {
        self.bits < 64 && self.value == self.max()
    }
}

const fn max_for_bits(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

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

impl PortCounters {
    pub const MAX_SYMBOL_ERROR_COUNTER: u64 = max_for_bits(16);
    pub const MAX_LINK_ERROR_RECOVERY_COUNTER: u64 = max_for_bits(8);
    pub const MAX_LINK_DOWNED_COUNTER: u64 = max_for_bits(8);
    pub const MAX_PORT_RCV_ERRORS: u64 = max_for_bits(16);
    pub const MAX_PORT_RCV_REMOTE_PHYSICAL_ERRORS: u64 = max_for_bits(16);
    pub const MAX_PORT_RCV_SWITCH_RELAY_ERRORS: u64 = max_for_bits(16);
    pub const MAX_PORT_XMIT_DISCARDS: u64 = max_for_bits(16);
    pub const MAX_PORT_XMIT_CONSTRAINT_ERRORS: u64 = max_for_bits(8);
    pub const MAX_PORT_RCV_CONSTRAINT_ERRORS: u64 = max_for_bits(8);
    pub const MAX_LOCAL_LINK_INTEGRITY_ERRORS: u64 = max_for_bits(4);
    pub const MAX_EXCESSIVE_BUFFER_OVERRUN_ERRORS: u64 = max_for_bits(4);
    pub const MAX_QP1_DROPPED: u64 = max_for_bits(16);
    pub const MAX_VL15_DROPPED: u64 = max_for_bits(16);
    pub const MAX_PORT_XMIT_DATA: u64 = max_for_bits(32);
    pub const MAX_PORT_RCV_DATA: u64 = max_for_bits(32);
    pub const MAX_PORT_XMIT_PKTS: u64 = max_for_bits(32);
    pub const MAX_PORT_RCV_PKTS: u64 = max_for_bits(32);
    pub const MAX_PORT_XMIT_WAIT: u64 = max_for_bits(32);

    /// Every counter of IBA 16.1.3.5 with its spec name and width, in specification order.
    /// QP1Dropped is left out (its bits are reserved unless the PMA sets
    /// IsQP1DroppedSupported): see [`Self::fields_for`].
    pub fn fields(&self) -> impl Iterator<Item = CounterValue> {
        self.all_fields().filter(|c| c.name != "QP1Dropped")
    }

    /// The counters a PMA with ClassPortInfo CapabilityMask `capability_mask` implements:
    /// QP1Dropped only with IsQP1DroppedSupported, PortXmitWait only with
    /// IsPortXmitWaitSupported.
    pub fn fields_for(&self, capability_mask: u16) -> impl Iterator<Item = CounterValue> {
        let qp1 = capability_mask & pma_capability::IS_QP1_DROPPED_SUPPORTED != 0;
        let wait = capability_mask & pma_capability::IS_PORT_XMIT_WAIT_SUPPORTED != 0;
        self.all_fields().filter(move |c| match c.name {
            "QP1Dropped" => qp1,
            "PortXmitWait" => wait,
            _ => true,
        })
    }

    fn all_fields(&self) -> impl Iterator<Item = CounterValue> {
        let c = |name, value: u64, bits, data_words| CounterValue {
            name,
            value,
            bits,
            data_words,
        };
        [
            c(
                "SymbolErrorCounter",
                self.symbol_error_counter.into(),
                16,
                false,
            ),
            c(
                "LinkErrorRecoveryCounter",
                self.link_error_recovery_counter.into(),
                8,
                false,
            ),
            c(
                "LinkDownedCounter",
                self.link_downed_counter.into(),
                8,
                false,
            ),
            c("PortRcvErrors", self.port_rcv_errors.into(), 16, false),
            c(
                "PortRcvRemotePhysicalErrors",
                self.port_rcv_remote_physical_errors.into(),
                16,
                false,
            ),
            c(
                "PortRcvSwitchRelayErrors",
                self.port_rcv_switch_relay_errors.into(),
                16,
                false,
            ),
            c(
                "PortXmitDiscards",
                self.port_xmit_discards.into(),
                16,
                false,
            ),
            c(
                "PortXmitConstraintErrors",
                self.port_xmit_constraint_errors.into(),
                8,
                false,
            ),
            c(
                "PortRcvConstraintErrors",
                self.port_rcv_constraint_errors.into(),
                8,
                false,
            ),
            c(
                "LocalLinkIntegrityErrors",
                self.local_link_integrity_errors.into(),
                4,
                false,
            ),
            c(
                "ExcessiveBufferOverrunErrors",
                self.excessive_buffer_overrun_errors.into(),
                4,
                false,
            ),
            c("QP1Dropped", self.qp1_dropped.into(), 16, false),
            c("VL15Dropped", self.vl15_dropped.into(), 16, false),
            c("PortXmitData", self.port_xmit_data.into(), 32, true),
            c("PortRcvData", self.port_rcv_data.into(), 32, true),
            c("PortXmitPkts", self.port_xmit_pkts.into(), 32, false),
            c("PortRcvPkts", self.port_rcv_pkts.into(), 32, false),
            c("PortXmitWait", self.port_xmit_wait.into(), 32, false),
        ]
        .into_iter()
    }

    /// [`Self::fields`] collected.
    pub fn counters(&self) -> Vec<CounterValue> {
        self.fields().collect()
    }

    /// The counter called `name` (spec name, as perfquery prints it), of [`Self::fields`].
    pub fn get(&self, name: &str) -> Option<CounterValue> {
        self.fields().find(|c| c.name == name)
    }
}

wire_struct! {
    /// PortCountersExtended (IBA 16.1.4.6): 64-bit data and packet counters. The four
    /// unicast/multicast counters exist only with IsExtendedWidthSupported (without it,
    /// IsExtendedWidthSupportedNoIETF, they read 0).
    pub struct PortCountersExtended (72) {
        pub port_select: u8 = 8, 8;
        pub counter_select: u16 = 16, 16;
        pub port_xmit_data: u64 = 64, 64;
        pub port_rcv_data: u64 = 128, 64;
        pub port_xmit_pkts: u64 = 192, 64;
        pub port_rcv_pkts: u64 = 256, 64;
        pub port_unicast_xmit_pkts: u64 = 320, 64;
        pub port_unicast_rcv_pkts: u64 = 384, 64;
        pub port_multicast_xmit_pkts: u64 = 448, 64;
        pub port_multicast_rcv_pkts: u64 = 512, 64;
    }
}

impl PortCountersExtended {
    /// All counters are 64 bits wide.
    pub const COUNTER_BITS: u32 = 64;
    pub const MAX_COUNTER: u64 = u64::MAX;

    /// Every counter with its spec name, in the order of the specification.
    pub fn fields(&self) -> impl Iterator<Item = CounterValue> {
        let c = |name, value, data_words| CounterValue {
            name,
            value,
            bits: Self::COUNTER_BITS,
            data_words,
        };
        [
            c("PortXmitData", self.port_xmit_data, true),
            c("PortRcvData", self.port_rcv_data, true),
            c("PortXmitPkts", self.port_xmit_pkts, false),
            c("PortRcvPkts", self.port_rcv_pkts, false),
            c("PortUnicastXmitPkts", self.port_unicast_xmit_pkts, false),
            c("PortUnicastRcvPkts", self.port_unicast_rcv_pkts, false),
            c(
                "PortMulticastXmitPkts",
                self.port_multicast_xmit_pkts,
                false,
            ),
            c("PortMulticastRcvPkts", self.port_multicast_rcv_pkts, false),
        ]
        .into_iter()
    }

    /// [`Self::fields`] collected.
    pub fn counters(&self) -> Vec<CounterValue> {
        self.fields().collect()
    }

    pub fn get(&self, name: &str) -> Option<CounterValue> {
        self.fields().find(|c| c.name == name)
    }
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
        assert_eq!(u64::from(c.vl15_dropped), PortCounters::MAX_VL15_DROPPED);
        assert_eq!(c.port_xmit_data, 0x01020304);
        assert_eq!(c.port_xmit_wait, 9);
        assert_eq!(c.to_bytes(), b);
        let downed = c.get("LinkDownedCounter").unwrap();
        assert!(downed.saturated());
        assert_eq!(downed.max(), PortCounters::MAX_LINK_DOWNED_COUNTER);
        assert!(c.get("VL15Dropped").unwrap().saturated());
        let sym = c.get("SymbolErrorCounter").unwrap();
        assert_eq!((sym.value, sym.bits, sym.saturated()), (17, 16, false));
        assert!(c.get("PortXmitData").unwrap().data_words);
        assert_eq!(c.fields().count(), 17);
        assert!(c.get("QP1Dropped").is_none());
        let with_qp1: Vec<_> = c
            .fields_for(pma_capability::IS_QP1_DROPPED_SUPPORTED)
            .map(|f| (f.name, f.value))
            .collect();
        assert!(with_qp1.contains(&("QP1Dropped", 3)));
        assert!(!with_qp1.iter().any(|(n, _)| *n == "PortXmitWait"));
        assert_eq!(c.fields_for(0x1200).count(), 17);
        assert!(PortCounters::decode(&b[..43]).is_err());
    }

    #[test]
    fn max_constants_match_field_widths() {
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
        assert!(PortCounters::decode(&buf)
            .unwrap()
            .fields()
            .all(|c| c.saturated()));
        assert_eq!(PortCounters::MAX_LOCAL_LINK_INTEGRITY_ERRORS, 15);
        assert_eq!(PortCounters::MAX_PORT_XMIT_WAIT, 0xffff_ffff);
        let e = PortCountersExtended {
            port_xmit_data: u64::MAX,
            ..Default::default()
        };
        assert!(!e.get("PortXmitData").unwrap().saturated());
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
