//! PerfMgt attribute layouts (IBA 16.1.3), in the 192-byte GMP payload.

use crate::wire_struct;

wire_struct! {
    /// ClassPortInfo (IBA 13.4.8.1), as the PMA answers it.
    pub struct ClassPortInfo (72) {
        pub base_version: u8 = 0, 8;
        pub class_version: u8 = 8, 8;
        pub capability_mask: u16 = 16, 16;
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

/// PMA ClassPortInfo CapabilityMask bits (IBA 16.1.3.1 and the PortCountersExtended annex).
pub mod pma_capability {
    /// PortSelect 0xFF (all ports) is accepted.
    pub const ALL_PORT_SELECT: u16 = 1 << 8;
    /// PortCountersExtended is implemented.
    pub const EXTENDED_WIDTH: u16 = 1 << 9;
    /// PortCountersExtended without the unicast/multicast counters.
    pub const EXTENDED_WIDTH_NO_IETF: u16 = 1 << 10;
    /// PortXmitWait is implemented.
    pub const PORT_XMIT_WAIT: u16 = 1 << 12;
}

wire_struct! {
    /// PortCounters (IBA 16.1.3.5). Data counters count 4-octet words.
    pub struct PortCounters (44) {
        pub port_select: u8 = 8, 8;
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
        pub vl15_dropped: u16 = 176, 16;
        pub port_xmit_data: u32 = 192, 32;
        pub port_rcv_data: u32 = 224, 32;
        pub port_xmit_pkts: u32 = 256, 32;
        pub port_rcv_pkts: u32 = 288, 32;
        pub port_xmit_wait: u32 = 320, 32;
    }
}

/// One counter of a counters attribute, by its specification name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterValue {
    pub name: &'static str,
    pub value: u64,
    /// Width of the counter on the wire: a value of `2^bits - 1` is saturated.
    pub bits: u32,
    /// Counts 4-octet words (PortXmitData / PortRcvData).
    pub data_words: bool,
}

impl CounterValue {
    pub fn saturated(&self) -> bool {
        self.bits < 64 && self.value == (1u64 << self.bits) - 1
    }
}

/// CounterSelect bits for a PortCounters Set (IBA 16.1.3.5): which counters to clear.
pub mod counter_select {
    pub const ALL: u16 = 0xffff;
}

impl PortCounters {
    /// Every counter with its spec name and width, in the order of the specification.
    pub fn counters(&self) -> Vec<CounterValue> {
        let c = |name, value: u64, bits, data_words| CounterValue {
            name,
            value,
            bits,
            data_words,
        };
        vec![
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
            c("VL15Dropped", self.vl15_dropped.into(), 16, false),
            c("PortXmitData", self.port_xmit_data.into(), 32, true),
            c("PortRcvData", self.port_rcv_data.into(), 32, true),
            c("PortXmitPkts", self.port_xmit_pkts.into(), 32, false),
            c("PortRcvPkts", self.port_rcv_pkts.into(), 32, false),
            c("PortXmitWait", self.port_xmit_wait.into(), 32, false),
        ]
    }
}

wire_struct! {
    /// PortCountersExtended (IBA 16.1.4.6): 64-bit data and packet counters.
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
    pub fn counters(&self) -> Vec<CounterValue> {
        let c = |name, value, data_words| CounterValue {
            name,
            value,
            bits: 64,
            data_words,
        };
        vec![
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PortCounters laid out by hand from IBA 16.1.3.5: port 1, SymbolErrorCounter 17,
    /// LinkDowned 255 (saturated), PortXmitData 0x01020304 words.
    #[test]
    fn golden_port_counters() {
        let mut b = [0u8; 44];
        b[1] = 1;
        b[4..6].copy_from_slice(&17u16.to_be_bytes());
        b[7] = 0xff;
        b[19] = 0x21; // LocalLinkIntegrity 2, ExcessiveBufferOverrun 1
        b[24..28].copy_from_slice(&0x01020304u32.to_be_bytes());
        b[40..44].copy_from_slice(&9u32.to_be_bytes());
        let c = PortCounters::decode(&b).unwrap();
        assert_eq!(c.port_select, 1);
        assert_eq!(c.symbol_error_counter, 17);
        assert_eq!(c.link_downed_counter, 255);
        assert_eq!(c.local_link_integrity_errors, 2);
        assert_eq!(c.excessive_buffer_overrun_errors, 1);
        assert_eq!(c.port_xmit_data, 0x01020304);
        assert_eq!(c.port_xmit_wait, 9);
        assert_eq!(c.to_bytes(), b);
        let all = c.counters();
        let downed = all.iter().find(|v| v.name == "LinkDownedCounter").unwrap();
        assert!(downed.saturated());
        assert!(!all[0].saturated());
        assert!(PortCounters::decode(&b[..43]).is_err());
    }

    #[test]
    fn golden_extended_and_class_port_info() {
        let mut b = [0u8; 72];
        b[1] = 3;
        b[8..16].copy_from_slice(&0x1_0000_0000u64.to_be_bytes());
        b[64..72].copy_from_slice(&5u64.to_be_bytes());
        let e = PortCountersExtended::decode(&b).unwrap();
        assert_eq!(
            (e.port_select, e.port_xmit_data, e.port_multicast_rcv_pkts),
            (3, 1 << 32, 5)
        );
        assert_eq!(e.to_bytes(), b);
        let mut c = [0u8; 72];
        c[0] = 1;
        c[1] = 1;
        c[2..4].copy_from_slice(&0x0300u16.to_be_bytes());
        c[7] = 18;
        let cpi = ClassPortInfo::decode(&c).unwrap();
        assert_eq!(
            cpi.capability_mask & pma_capability::EXTENDED_WIDTH,
            pma_capability::EXTENDED_WIDTH
        );
        assert_eq!(cpi.resp_time_value, 18);
        assert_eq!(cpi.to_bytes(), c);
    }
}
