//! PerfMgt attribute layouts (IBA 16.1), in the 192-byte GMP data area (MAD offset 64).
//!
//! A counter is a row of its attribute's table like any field, with a [`Counter`] role: its
//! kind (error, data, packets, congestion, a breakdown of an error counter, a physical-layer
//! count) and the ClassPortInfo capabilities it needs. Names, widths, saturation and the
//! name lists below all come from those rows.

pub use super::counter_facts::{
    pma_capability, pma_capability2, Counter, CounterKind, PmaCapabilities,
};
use crate::attribute::{Attribute, PerfMgt};
use crate::wire::{get_bits, FieldSpec, FieldValue, Role};
use crate::wire_struct;
use crate::DecodeError;
use std::collections::HashMap;
use std::sync::{OnceLock, PoisonError, RwLock};
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
    /// CapabilityMask and CapabilityMask2 together.
    pub fn capabilities(&self) -> PmaCapabilities {
        PmaCapabilities::new(self.capability_mask, self.capability_mask2)
    }
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
    /// PortCountersExtended also carries the error counters, 64 bits wide.
    pub fn has_additional_extended_counters(&self) -> bool {
        self.capabilities().covers(ADDITIONAL_EXTENDED)
    }
}

/// No capability bit needed.
pub const ALWAYS: PmaCapabilities = PmaCapabilities::NONE;

/// The capabilities of CapabilityMask bits `mask` and CapabilityMask2 bits `mask2`.
pub const fn needs(mask: u16, mask2: u32) -> PmaCapabilities {
    PmaCapabilities::new(mask, mask2)
}

/// The 64-bit error counters of PortCountersExtended (IsAdditionalPortCountersExtendedSupported).
pub const ADDITIONAL_EXTENDED: PmaCapabilities = needs(
    0,
    pma_capability2::IS_ADDITIONAL_PORT_COUNTERS_EXTENDED_SUPPORTED,
);

/// The role of a counter row of a layout table.
pub const fn counter(kind: CounterKind, needs: PmaCapabilities) -> Role {
    Role::Counter(Counter { kind, needs })
}

/// What a PMA is assumed to implement when its ClassPortInfo is not known: every counter but
/// QP1Dropped (whose bits are reserved without IsQP1DroppedSupported) and the 64-bit error
/// counters of PortCountersExtended.
pub const ASSUMED_CAPABILITIES: PmaCapabilities = needs(
    pma_capability::IS_PORT_XMIT_WAIT_SUPPORTED | pma_capability::IS_EXTENDED_WIDTH_SUPPORTED,
    0,
);

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
            counter(Resource, needs(pma_capability::IS_QP1_DROPPED_SUPPORTED, 0));
        pub vl15_dropped: u16 = 176, 16, "VL15Dropped", counter(Error, ALWAYS);
        pub port_xmit_data: u32 = 192, 32, "PortXmitData", counter(Data, ALWAYS);
        pub port_rcv_data: u32 = 224, 32, "PortRcvData", counter(Data, ALWAYS);
        pub port_xmit_pkts: u32 = 256, 32, "PortXmitPkts", counter(Packets, ALWAYS);
        pub port_rcv_pkts: u32 = 288, 32, "PortRcvPkts", counter(Packets, ALWAYS);
        pub port_xmit_wait: u32 = 320, 32, "PortXmitWait",
            counter(Congestion, needs(pma_capability::IS_PORT_XMIT_WAIT_SUPPORTED, 0));
    }
}

/// The unicast/multicast counters of PortCountersExtended.
const IETF: PmaCapabilities = needs(pma_capability::IS_EXTENDED_WIDTH_SUPPORTED, 0);
/// QP1Dropped in 64 bits: the additional counters, and QP1Dropped at all.
const ADDITIONAL_QP1_DROPPED: PmaCapabilities =
    ADDITIONAL_EXTENDED.union(needs(pma_capability::IS_QP1_DROPPED_SUPPORTED, 0));

wire_struct! {
    /// PortCountersExtended (IBA 16.1.4.6): 64-bit data and packet counters. The four
    /// unicast/multicast counters exist only with IsExtendedWidthSupported (without it,
    /// IsExtendedWidthSupportedNoIETF, they read 0). With CapabilityMask2
    /// IsAdditionalPortCountersExtendedSupported it also carries every PortCounters counter
    /// 64 bits wide (CounterSelect2 and the error counters from byte 72): counters that
    /// never stop at 65535 or 255 on a fast link. Without that bit those bytes mean nothing
    /// (ibsim leaves stale buffer contents there).
    pub struct PortCountersExtended (184) attribute(PerfMgt, 0x001d, "PortCountersExtended") {
        pub port_select: u8 = 8, 8, "PortSelect";
        pub counter_select: u16 = 16, 16, "CounterSelect";
        /// Which of the additional counters a Set clears.
        pub counter_select2: u32 = 32, 32, "CounterSelect2";
        pub port_xmit_data: u64 = 64, 64, "PortXmitData", counter(Data, ALWAYS);
        pub port_rcv_data: u64 = 128, 64, "PortRcvData", counter(Data, ALWAYS);
        pub port_xmit_pkts: u64 = 192, 64, "PortXmitPkts", counter(Packets, ALWAYS);
        pub port_rcv_pkts: u64 = 256, 64, "PortRcvPkts", counter(Packets, ALWAYS);
        pub port_unicast_xmit_pkts: u64 = 320, 64, "PortUnicastXmitPkts", counter(Packets, IETF);
        pub port_unicast_rcv_pkts: u64 = 384, 64, "PortUnicastRcvPkts", counter(Packets, IETF);
        pub port_multicast_xmit_pkts: u64 = 448, 64, "PortMulticastXmitPkts",
            counter(Packets, IETF);
        pub port_multicast_rcv_pkts: u64 = 512, 64, "PortMulticastRcvPkts",
            counter(Packets, IETF);
        pub symbol_error_counter: u64 = 576, 64, "SymbolErrorCounter",
            counter(Error, ADDITIONAL_EXTENDED);
        pub link_error_recovery_counter: u64 = 640, 64, "LinkErrorRecoveryCounter",
            counter(Error, ADDITIONAL_EXTENDED);
        pub link_downed_counter: u64 = 704, 64, "LinkDownedCounter",
            counter(Error, ADDITIONAL_EXTENDED);
        pub port_rcv_errors: u64 = 768, 64, "PortRcvErrors", counter(Error, ADDITIONAL_EXTENDED);
        pub port_rcv_remote_physical_errors: u64 = 832, 64, "PortRcvRemotePhysicalErrors",
            counter(Error, ADDITIONAL_EXTENDED);
        pub port_rcv_switch_relay_errors: u64 = 896, 64, "PortRcvSwitchRelayErrors",
            counter(Error, ADDITIONAL_EXTENDED);
        pub port_xmit_discards: u64 = 960, 64, "PortXmitDiscards",
            counter(Error, ADDITIONAL_EXTENDED);
        pub port_xmit_constraint_errors: u64 = 1024, 64, "PortXmitConstraintErrors",
            counter(Error, ADDITIONAL_EXTENDED);
        pub port_rcv_constraint_errors: u64 = 1088, 64, "PortRcvConstraintErrors",
            counter(Error, ADDITIONAL_EXTENDED);
        pub local_link_integrity_errors: u64 = 1152, 64, "LocalLinkIntegrityErrors",
            counter(Error, ADDITIONAL_EXTENDED);
        pub excessive_buffer_overrun_errors: u64 = 1216, 64, "ExcessiveBufferOverrunErrors",
            counter(Error, ADDITIONAL_EXTENDED);
        pub vl15_dropped: u64 = 1280, 64, "VL15Dropped", counter(Error, ADDITIONAL_EXTENDED);
        pub port_xmit_wait: u64 = 1344, 64, "PortXmitWait",
            counter(Congestion, ADDITIONAL_EXTENDED);
        pub qp1_dropped: u64 = 1408, 64, "QP1Dropped", counter(Resource, ADDITIONAL_QP1_DROPPED);
    }
}

wire_struct! {
    /// PortRcvErrorDetails (IBA 16.1.4.2): why packets counted in PortRcvErrors were
    /// dropped. Every counter stops at 65535.
    pub struct PortRcvErrorDetails (16) attribute(PerfMgt, 0x0015, "PortRcvErrorDetails") {
        pub port_select: u8 = 8, 8, "PortSelect";
        pub counter_select: u16 = 16, 16, "CounterSelect";
        pub port_local_physical_errors: u16 = 32, 16, "PortLocalPhysicalErrors",
            counter(Detail, ALWAYS);
        pub port_malformed_pkt_errors: u16 = 48, 16, "PortMalformedPktErrors",
            counter(Detail, ALWAYS);
        pub port_buffer_overrun_errors: u16 = 64, 16, "PortBufferOverrunErrors",
            counter(Detail, ALWAYS);
        pub port_dlid_mapping_errors: u16 = 80, 16, "PortDLIDMappingErrors",
            counter(Detail, ALWAYS);
        pub port_vl_mapping_errors: u16 = 96, 16, "PortVLMappingErrors", counter(Detail, ALWAYS);
        pub port_looping_errors: u16 = 112, 16, "PortLoopingErrors", counter(Detail, ALWAYS);
    }
}

wire_struct! {
    /// PortXmitDiscardDetails (IBA 16.1.4.3): why packets counted in PortXmitDiscards were
    /// discarded. Every counter stops at 65535.
    pub struct PortXmitDiscardDetails (12) attribute(PerfMgt, 0x0016, "PortXmitDiscardDetails") {
        pub port_select: u8 = 8, 8, "PortSelect";
        pub counter_select: u16 = 16, 16, "CounterSelect";
        pub port_inactive_discards: u16 = 32, 16, "PortInactiveDiscards", counter(Detail, ALWAYS);
        pub port_neighbor_mtu_discards: u16 = 48, 16, "PortNeighborMTUDiscards",
            counter(Detail, ALWAYS);
        pub port_sw_lifetime_limit_discards: u16 = 64, 16, "PortSwLifetimeLimitDiscards",
            counter(Detail, ALWAYS);
        pub port_sw_hoq_lifetime_limit_discards: u16 = 80, 16,
            "PortSwHOQLifetimeLimitDiscards", counter(Detail, ALWAYS);
    }
}

wire_struct! {
    /// PortExtendedSpeedsCounters (IBA 16.1.4.8), the layout of a port that does not run
    /// RS-FEC: 64b/66b sync header and unknown-block errors, and per lane the error
    /// detection, FEC-correctable and FEC-uncorrectable block counts. CounterSelect is 64
    /// bits here. Which layout a PMA answers with: [`extended_speeds_rs_fec`].
    pub struct PortExtendedSpeedsCounters (140)
        attribute(PerfMgt, 0x001f, "PortExtendedSpeedsCounters")
    {
        pub port_select: u8 = 8, 8, "PortSelect";
        pub counter_select: u64 = 64, 64, "CounterSelect";
        pub sync_header_error_counter: u16 = 128, 16, "SyncHeaderErrorCounter",
            counter(Physical, ALWAYS);
        pub unknown_block_counter: u16 = 144, 16, "UnknownBlockCounter", counter(Physical, ALWAYS);
        pub error_detection_lane0: u16 = 160, 16, "ErrorDetectionCounterLane0",
            counter(Physical, ALWAYS);
        pub error_detection_lane1: u16 = 176, 16, "ErrorDetectionCounterLane1",
            counter(Physical, ALWAYS);
        pub error_detection_lane2: u16 = 192, 16, "ErrorDetectionCounterLane2",
            counter(Physical, ALWAYS);
        pub error_detection_lane3: u16 = 208, 16, "ErrorDetectionCounterLane3",
            counter(Physical, ALWAYS);
        pub error_detection_lane4: u16 = 224, 16, "ErrorDetectionCounterLane4",
            counter(Physical, ALWAYS);
        pub error_detection_lane5: u16 = 240, 16, "ErrorDetectionCounterLane5",
            counter(Physical, ALWAYS);
        pub error_detection_lane6: u16 = 256, 16, "ErrorDetectionCounterLane6",
            counter(Physical, ALWAYS);
        pub error_detection_lane7: u16 = 272, 16, "ErrorDetectionCounterLane7",
            counter(Physical, ALWAYS);
        pub error_detection_lane8: u16 = 288, 16, "ErrorDetectionCounterLane8",
            counter(Physical, ALWAYS);
        pub error_detection_lane9: u16 = 304, 16, "ErrorDetectionCounterLane9",
            counter(Physical, ALWAYS);
        pub error_detection_lane10: u16 = 320, 16, "ErrorDetectionCounterLane10",
            counter(Physical, ALWAYS);
        pub error_detection_lane11: u16 = 336, 16, "ErrorDetectionCounterLane11",
            counter(Physical, ALWAYS);
        pub fec_correctable_block_lane0: u32 = 352, 32, "FECCorrectableBlockCtrLane0",
            counter(Physical, ALWAYS);
        pub fec_correctable_block_lane1: u32 = 384, 32, "FECCorrectableBlockCtrLane1",
            counter(Physical, ALWAYS);
        pub fec_correctable_block_lane2: u32 = 416, 32, "FECCorrectableBlockCtrLane2",
            counter(Physical, ALWAYS);
        pub fec_correctable_block_lane3: u32 = 448, 32, "FECCorrectableBlockCtrLane3",
            counter(Physical, ALWAYS);
        pub fec_correctable_block_lane4: u32 = 480, 32, "FECCorrectableBlockCtrLane4",
            counter(Physical, ALWAYS);
        pub fec_correctable_block_lane5: u32 = 512, 32, "FECCorrectableBlockCtrLane5",
            counter(Physical, ALWAYS);
        pub fec_correctable_block_lane6: u32 = 544, 32, "FECCorrectableBlockCtrLane6",
            counter(Physical, ALWAYS);
        pub fec_correctable_block_lane7: u32 = 576, 32, "FECCorrectableBlockCtrLane7",
            counter(Physical, ALWAYS);
        pub fec_correctable_block_lane8: u32 = 608, 32, "FECCorrectableBlockCtrLane8",
            counter(Physical, ALWAYS);
        pub fec_correctable_block_lane9: u32 = 640, 32, "FECCorrectableBlockCtrLane9",
            counter(Physical, ALWAYS);
        pub fec_correctable_block_lane10: u32 = 672, 32, "FECCorrectableBlockCtrLane10",
            counter(Physical, ALWAYS);
        pub fec_correctable_block_lane11: u32 = 704, 32, "FECCorrectableBlockCtrLane11",
            counter(Physical, ALWAYS);
        pub fec_uncorrectable_block_lane0: u32 = 736, 32, "FECUncorrectableBlockCtrLane0",
            counter(Physical, ALWAYS);
        pub fec_uncorrectable_block_lane1: u32 = 768, 32, "FECUncorrectableBlockCtrLane1",
            counter(Physical, ALWAYS);
        pub fec_uncorrectable_block_lane2: u32 = 800, 32, "FECUncorrectableBlockCtrLane2",
            counter(Physical, ALWAYS);
        pub fec_uncorrectable_block_lane3: u32 = 832, 32, "FECUncorrectableBlockCtrLane3",
            counter(Physical, ALWAYS);
        pub fec_uncorrectable_block_lane4: u32 = 864, 32, "FECUncorrectableBlockCtrLane4",
            counter(Physical, ALWAYS);
        pub fec_uncorrectable_block_lane5: u32 = 896, 32, "FECUncorrectableBlockCtrLane5",
            counter(Physical, ALWAYS);
        pub fec_uncorrectable_block_lane6: u32 = 928, 32, "FECUncorrectableBlockCtrLane6",
            counter(Physical, ALWAYS);
        pub fec_uncorrectable_block_lane7: u32 = 960, 32, "FECUncorrectableBlockCtrLane7",
            counter(Physical, ALWAYS);
        pub fec_uncorrectable_block_lane8: u32 = 992, 32, "FECUncorrectableBlockCtrLane8",
            counter(Physical, ALWAYS);
        pub fec_uncorrectable_block_lane9: u32 = 1024, 32, "FECUncorrectableBlockCtrLane9",
            counter(Physical, ALWAYS);
        pub fec_uncorrectable_block_lane10: u32 = 1056, 32, "FECUncorrectableBlockCtrLane10",
            counter(Physical, ALWAYS);
        pub fec_uncorrectable_block_lane11: u32 = 1088, 32, "FECUncorrectableBlockCtrLane11",
            counter(Physical, ALWAYS);
    }
}

wire_struct! {
    /// PortExtendedSpeedsCounters of a port that runs RS-FEC (perfquery's "with RS-FEC
    /// Active"): the same attribute ID, other counters in the per-lane area: corrected
    /// symbols per lane, and the port's correctable and uncorrectable block and corrected
    /// symbol counts.
    pub struct PortExtendedSpeedsCountersRsFec (152)
        attribute(PerfMgt, 0x001f, "PortExtendedSpeedsCounters")
    {
        pub port_select: u8 = 8, 8, "PortSelect";
        pub counter_select: u64 = 64, 64, "CounterSelect";
        pub sync_header_error_counter: u16 = 128, 16, "SyncHeaderErrorCounter",
            counter(Physical, ALWAYS);
        pub unknown_block_counter: u16 = 144, 16, "UnknownBlockCounter", counter(Physical, ALWAYS);
        pub fec_correctable_symbol_lane0: u32 = 352, 32, "FECCorrectableSymbolCtrLane0",
            counter(Physical, ALWAYS);
        pub fec_correctable_symbol_lane1: u32 = 384, 32, "FECCorrectableSymbolCtrLane1",
            counter(Physical, ALWAYS);
        pub fec_correctable_symbol_lane2: u32 = 416, 32, "FECCorrectableSymbolCtrLane2",
            counter(Physical, ALWAYS);
        pub fec_correctable_symbol_lane3: u32 = 448, 32, "FECCorrectableSymbolCtrLane3",
            counter(Physical, ALWAYS);
        pub fec_correctable_symbol_lane4: u32 = 480, 32, "FECCorrectableSymbolCtrLane4",
            counter(Physical, ALWAYS);
        pub fec_correctable_symbol_lane5: u32 = 512, 32, "FECCorrectableSymbolCtrLane5",
            counter(Physical, ALWAYS);
        pub fec_correctable_symbol_lane6: u32 = 544, 32, "FECCorrectableSymbolCtrLane6",
            counter(Physical, ALWAYS);
        pub fec_correctable_symbol_lane7: u32 = 576, 32, "FECCorrectableSymbolCtrLane7",
            counter(Physical, ALWAYS);
        pub fec_correctable_symbol_lane8: u32 = 608, 32, "FECCorrectableSymbolCtrLane8",
            counter(Physical, ALWAYS);
        pub fec_correctable_symbol_lane9: u32 = 640, 32, "FECCorrectableSymbolCtrLane9",
            counter(Physical, ALWAYS);
        pub fec_correctable_symbol_lane10: u32 = 672, 32, "FECCorrectableSymbolCtrLane10",
            counter(Physical, ALWAYS);
        pub fec_correctable_symbol_lane11: u32 = 704, 32, "FECCorrectableSymbolCtrLane11",
            counter(Physical, ALWAYS);
        pub port_fec_correctable_block: u32 = 1120, 32, "PortFECCorrectableBlockCtr",
            counter(Physical, ALWAYS);
        pub port_fec_uncorrectable_block: u32 = 1152, 32, "PortFECUncorrectableBlockCtr",
            counter(Physical, ALWAYS);
        pub port_fec_corrected_symbol: u32 = 1184, 32, "PortFECCorrectedSymbolCtr",
            counter(Physical, ALWAYS);
    }
}

/// Which PortExtendedSpeedsCounters layout a port's PMA answers with, decided as perfquery
/// does: the RS-FEC one when the PMA has IsRSFECCountersSupported and the port's
/// PortInfoExtended says FEC modes are supported and RS-FEC (or RS-FEC2) is active;
/// `port_info_extended` is `None` where it was not (or could not be) read.
pub fn extended_speeds_rs_fec(
    capabilities: PmaCapabilities,
    port_info_extended: Option<&crate::attr::smp_attrs::PortInfoExtended>,
) -> bool {
    capabilities.mask & pma_capability::IS_RS_FEC_COUNTERS_SUPPORTED != 0
        && port_info_extended.is_some_and(|p| p.rs_fec_active())
}

/// An attribute that breaks one PortCounters error counter down by cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Breakdown {
    /// The PortCounters counter it explains.
    pub explains: &'static str,
    /// The attribute's name.
    pub attribute: &'static str,
    /// Its layout table (the counter rows are the causes).
    pub fields: &'static [FieldSpec],
}

/// The breakdown attributes: PortRcvErrorDetails of PortRcvErrors, PortXmitDiscardDetails of
/// PortXmitDiscards (IBA 16.1.4.2, 16.1.4.3).
pub const BREAKDOWNS: [Breakdown; 2] = [
    Breakdown {
        explains: PortCounters::port_rcv_errors.spec.name,
        attribute: <PortRcvErrorDetails as Attribute>::NAME,
        fields: PortRcvErrorDetails::FIELDS,
    },
    Breakdown {
        explains: PortCounters::port_xmit_discards.spec.name,
        attribute: <PortXmitDiscardDetails as Attribute>::NAME,
        fields: PortXmitDiscardDetails::FIELDS,
    },
];

/// The breakdown of the PortCounters counter called `counter`, if it has one.
pub fn breakdown_of(counter: &str) -> Option<&'static Breakdown> {
    BREAKDOWNS.iter().find(|b| b.explains == counter)
}

/// A counter's name held in two bytes (a `&str` takes sixteen): a sweep at 100k HCAs keeps
/// some twenty million, and a reading of a name, a value and a flag fits in sixteen. It
/// is the place of the name's first row in [`TABLE_ROWS`] (a name several tables share,
/// such as PortXmitData, is one `CounterName`), or past the rows for a name no table has.
/// It compares, hashes and prints as the name it holds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct CounterName(u16);

impl CounterName {
    /// The name of row `row` of the table whose rows start at `base` in [`TABLE_ROWS`].
    fn of_row(base: usize, row: usize) -> CounterName {
        CounterName(FIRST_ROW_NAMED[base + row])
    }

    pub fn as_str(&self) -> &'static str {
        match TABLE_ROWS.get(usize::from(self.0)) {
            Some(spec) => spec.name,
            None => {
                let others = OTHER_NAMES.read().unwrap_or_else(PoisonError::into_inner);
                others[usize::from(self.0) - TABLE_ROWS.len()]
            }
        }
    }

    /// A name of the PMA attributes' tables: ASCII letters, digits and `_` only, so JSON
    /// and Prometheus take it as it is.
    pub fn is_from_table(&self) -> bool {
        usize::from(self.0) < TABLE_ROWS.len()
    }

    /// Where a name of the tables is among [`CounterName::table_names`]: writers keep
    /// something per name (a JSON key) in a list by it.
    pub fn table_row(&self) -> Option<usize> {
        self.is_from_table().then_some(usize::from(self.0))
    }

    /// Every row name of the PMA attributes' tables, in [`CounterName::table_row`] order
    /// (a name several tables share appears at each of its rows).
    pub fn table_names() -> impl ExactSizeIterator<Item = &'static str> {
        TABLE_ROWS.iter().map(|spec| spec.name)
    }

    /// `name` as a [`CounterName`]: a counter of the PMA attributes' tables is found there;
    /// any other name (JSON read back from a later version, or written by hand) is stored
    /// once for the rest of the process.
    pub fn intern(name: &str) -> CounterName {
        static KNOWN: OnceLock<HashMap<&'static str, CounterName>> = OnceLock::new();
        let known = KNOWN.get_or_init(|| {
            (0..TABLE_ROWS.len())
                .map(|row| (TABLE_ROWS[row].name, CounterName::of_row(0, row)))
                .collect()
        });
        if let Some(&n) = known.get(name) {
            return n;
        }
        let mut others = OTHER_NAMES.write().unwrap_or_else(PoisonError::into_inner);
        let at = match others.iter().position(|&n| n == name) {
            Some(at) => at,
            None => {
                others.push(Box::leak(name.into()));
                others.len() - 1
            }
        };
        // Past 65,535 names (only hand-made input gets there) the last one stands for the rest.
        CounterName(u16::try_from(TABLE_ROWS.len() + at).unwrap_or(u16::MAX))
    }
}

/// Names no table has, as [`CounterName::intern`] met them: the place of a name here, past
/// the table rows, is its `CounterName`.
static OTHER_NAMES: RwLock<Vec<&'static str>> = RwLock::new(Vec::new());

impl std::ops::Deref for CounterName {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq<str> for CounterName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for CounterName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::hash::Hash for CounterName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl std::fmt::Debug for CounterName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for CounterName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The field tables of the counters attributes.
const COUNTER_TABLES: [&[FieldSpec]; 6] = [
    PortCounters::FIELDS,
    PortCountersExtended::FIELDS,
    PortRcvErrorDetails::FIELDS,
    PortXmitDiscardDetails::FIELDS,
    PortExtendedSpeedsCounters::FIELDS,
    PortExtendedSpeedsCountersRsFec::FIELDS,
];

/// Every row of the counters attributes' tables, table after table.
static TABLE_ROWS: [FieldSpec; table_rows()] = flatten_tables();

const fn table_rows() -> usize {
    let (mut t, mut n) = (0, 0);
    while t < COUNTER_TABLES.len() {
        n += COUNTER_TABLES[t].len();
        t += 1;
    }
    n
}

const fn flatten_tables() -> [FieldSpec; table_rows()] {
    let mut out = [COUNTER_TABLES[0][0]; table_rows()];
    let (mut t, mut n) = (0, 0);
    while t < COUNTER_TABLES.len() {
        let mut row = 0;
        while row < COUNTER_TABLES[t].len() {
            out[n] = COUNTER_TABLES[t][row];
            n += 1;
            row += 1;
        }
        t += 1;
    }
    out
}

/// Per row of [`TABLE_ROWS`], the first row with the same name: what a [`CounterName`] holds.
static FIRST_ROW_NAMED: [u16; table_rows()] = first_rows_named();

const fn first_rows_named() -> [u16; table_rows()] {
    let rows = flatten_tables();
    assert!(rows.len() < u16::MAX as usize);
    let mut out = [0u16; table_rows()];
    let mut i = 0;
    while i < rows.len() {
        let mut first = 0;
        while !same_name(rows[first].name, rows[i].name) {
            first += 1;
        }
        out[i] = first as u16;
        i += 1;
    }
    out
}

/// Where the rows of `table` (one of [`COUNTER_TABLES`], told apart by its rows' names)
/// start in [`TABLE_ROWS`].
const fn table_base(table: &[FieldSpec]) -> usize {
    let (mut t, mut base) = (0, 0);
    while t < COUNTER_TABLES.len() {
        if same_rows(COUNTER_TABLES[t], table) {
            return base;
        }
        base += COUNTER_TABLES[t].len();
        t += 1;
    }
    panic!("not a counters attribute's table")
}

const fn same_rows(a: &[FieldSpec], b: &[FieldSpec]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if !same_name(a[i].name, b[i].name) || a[i].bit_offset != b[i].bit_offset {
            return false;
        }
        i += 1;
    }
    true
}

/// One counter of a counters attribute, by its specification name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct CounterValue {
    /// The name in the specification (and perfquery's output), e.g. "SymbolErrorCounter".
    pub name: &'static str,
    /// `name` in two bytes (what a sweep's readings keep).
    #[serde(skip)]
    pub short_name: CounterName,
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

/// The counters among a counters attribute's fields that a PMA with `capabilities`
/// implements, in table order.
fn counters_in<'a>(
    fields: impl Iterator<Item = (&'static FieldSpec, FieldValue<'a>)> + 'a,
    table_base: usize,
    capabilities: PmaCapabilities,
) -> impl Iterator<Item = CounterValue> + 'a {
    // The table's rows are the fields, in order: each field's name is its row's.
    let names = FIRST_ROW_NAMED[table_base..].iter();
    fields.zip(names).filter_map(move |((spec, value), &name)| {
        let counter = counter_row(spec, name, capabilities)?;
        Some(counter(value.as_u64()?))
    })
}

/// Row `spec` (its name at place `name`, see [`CounterName`]) as a counter a PMA with
/// `capabilities` implements: what makes its [`CounterValue`] of the value read there.
/// `None` for a row that is no counter, or one the PMA lacks.
fn counter_row(
    spec: &'static FieldSpec,
    name: u16,
    capabilities: PmaCapabilities,
) -> Option<impl FnOnce(u64) -> CounterValue> {
    let counter = spec.counter()?;
    capabilities
        .covers(counter.needs)
        .then_some(move |value| CounterValue {
            name: spec.name,
            short_name: CounterName(name),
            value,
            bits: spec.bit_width as u32,
            kind: counter.kind,
        })
}

/// A counters attribute a request addresses to one port (or all: 0xFF) by PortSelect, and
/// whose Set clears the counters CounterSelect names.
pub trait PortSelected: Attribute<Class = PerfMgt> + Default {
    /// The template of a request for port `port`.
    fn selecting(port: u8, counter_select: u16) -> Self;
    /// The port a reply is for.
    fn port_select(&self) -> u8;
    /// The counters a PMA with `capabilities` implements, in specification order.
    fn counter_values(&self, capabilities: PmaCapabilities) -> Vec<CounterValue>;
    /// [`PortSelected::counter_values`], appended to `out`: a sweep reuses one buffer for
    /// its million replies.
    fn counter_values_into(&self, capabilities: PmaCapabilities, out: &mut Vec<CounterValue>);
    /// What decoding `data` and [`PortSelected::counter_values_into`] give (the PortSelect
    /// and the counters appended to `out`), read straight from the bytes: a sweep's two
    /// million replies skip the decoded struct and its list of every field's value.
    fn counter_values_from_wire(
        data: &[u8],
        capabilities: PmaCapabilities,
        out: &mut Vec<CounterValue>,
    ) -> Result<u8, DecodeError>;
}

/// [`PortSelected::counter_values_from_wire`] of the attribute whose layout is `table`,
/// whose rows start at `table_base` in [`TABLE_ROWS`]. `data` holds the whole layout.
fn counters_from_wire(
    table: &'static [FieldSpec],
    table_base: usize,
    data: &[u8],
    capabilities: PmaCapabilities,
    out: &mut Vec<CounterValue>,
) -> Result<(), DecodeError> {
    for (spec, &name) in table.iter().zip(&FIRST_ROW_NAMED[table_base..]) {
        if let Some(counter) = counter_row(spec, name, capabilities) {
            out.push(counter(get_bits(data, spec.bit_offset, spec.bit_width)?));
        }
    }
    Ok(())
}

/// The counters of the counters attributes, read from their tables, and their selection.
macro_rules! counter_access {
    ($($ty:ty),*) => {$(
        impl PortSelected for $ty {
            fn selecting(port: u8, counter_select: u16) -> Self {
                Self {
                    port_select: port,
                    counter_select: counter_select.into(),
                    ..Default::default()
                }
            }
            fn port_select(&self) -> u8 {
                self.port_select
            }
            fn counter_values(&self, capabilities: PmaCapabilities) -> Vec<CounterValue> {
                self.counters_for(capabilities).collect()
            }
            fn counter_values_into(&self, capabilities: PmaCapabilities, out: &mut Vec<CounterValue>) {
                out.extend(self.counters_for(capabilities));
            }
            fn counter_values_from_wire(
                data: &[u8],
                capabilities: PmaCapabilities,
                out: &mut Vec<CounterValue>,
            ) -> Result<u8, DecodeError> {
                if data.len() < Self::WIRE_LEN {
                    // Short: the decoder's own error, word for word.
                    return Self::decode(data).map(|c| c.port_select);
                }
                let port_select = Self::port_select.read(data)?;
                let base = const { table_base(<$ty>::FIELDS) };
                counters_from_wire(Self::FIELDS, base, data, capabilities, out)?;
                Ok(port_select)
            }
        }

        impl $ty {
            /// The counters a PMA with `capabilities` implements, in specification order.
            pub fn counters_for(&self, capabilities: PmaCapabilities) -> impl Iterator<Item = CounterValue> + '_ {
                counters_in(self.fields(), const { table_base(<$ty>::FIELDS) }, capabilities)
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
counter_access!(
    PortCounters,
    PortCountersExtended,
    PortRcvErrorDetails,
    PortXmitDiscardDetails,
    PortExtendedSpeedsCounters,
    PortExtendedSpeedsCountersRsFec
);

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
/// `capabilities` implements and that needs at least `requiring`.
const fn listed(
    spec: &FieldSpec,
    kind: Option<CounterKind>,
    capabilities: PmaCapabilities,
    requiring: PmaCapabilities,
) -> bool {
    let Role::Counter(c) = spec.role else {
        return false;
    };
    let kind_matches = match kind {
        Some(k) => k as u8 == c.kind as u8,
        None => true,
    };
    kind_matches && capabilities.covers(c.needs) && c.needs.covers(requiring)
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
        if listed(&in_table[i], None, PmaCapabilities::ALL, ALWAYS)
            && same_name(in_table[i].name, name)
        {
            return true;
        }
        i += 1;
    }
    false
}

/// Which rows of `table` a name list takes: counters of `kind` a PMA with `capabilities`
/// implements that need at least `requiring`, and of those only the ones `other` has
/// (`Some(true)`), lacks (`Some(false)`), or either (`None`).
#[derive(Clone, Copy)]
struct Pick {
    kind: Option<CounterKind>,
    capabilities: PmaCapabilities,
    requiring: PmaCapabilities,
    in_other: Option<(&'static [FieldSpec], bool)>,
}

/// Every counter of a table.
const ANY_COUNTER: Pick = Pick {
    kind: None,
    capabilities: PmaCapabilities::ALL,
    requiring: ALWAYS,
    in_other: None,
};

const fn picked(spec: &FieldSpec, pick: Pick) -> bool {
    if !listed(spec, pick.kind, pick.capabilities, pick.requiring) {
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

/// Every counter row of `table`, in table order (a `const` name list).
macro_rules! all_counters {
    ($ty:ty) => {
        names::<{ count(<$ty>::FIELDS, ANY_COUNTER) }>(<$ty>::FIELDS, ANY_COUNTER)
    };
}

const PORT_COUNTERS_PICK: Pick = Pick {
    capabilities: ASSUMED_CAPABILITIES,
    ..ANY_COUNTER
};
const ERROR_PICK: Pick = Pick {
    kind: Some(Error),
    ..ANY_COUNTER
};
const EXTENDED_ONLY_PICK: Pick = Pick {
    in_other: Some((PortCounters::FIELDS, false)),
    ..ANY_COUNTER
};
const WITH_EXTENDED_FORM_PICK: Pick = Pick {
    in_other: Some((PortCountersExtended::FIELDS, true)),
    ..ANY_COUNTER
};
const ADDITIONAL_PICK: Pick = Pick {
    requiring: ADDITIONAL_EXTENDED,
    ..ANY_COUNTER
};

/// PortCounters' counters of a PMA with [`ASSUMED_CAPABILITIES`], in specification order.
pub const PORT_COUNTER_NAMES: [&str; count(PortCounters::FIELDS, PORT_COUNTERS_PICK)] =
    names(PortCounters::FIELDS, PORT_COUNTERS_PICK);

/// The twelve error counters of IBA 16.1.3.5 (the rows of kind [`CounterKind::Error`]).
pub const ERROR_COUNTERS: [&str; count(PortCounters::FIELDS, ERROR_PICK)] =
    names(PortCounters::FIELDS, ERROR_PICK);

/// PortCountersExtended's counters of a PMA with [`ASSUMED_CAPABILITIES`] (data and
/// packets), in specification order.
pub const EXTENDED_COUNTER_NAMES: [&str; count(PortCountersExtended::FIELDS, PORT_COUNTERS_PICK)] =
    names(PortCountersExtended::FIELDS, PORT_COUNTERS_PICK);

/// PortCountersExtended counters PortCounters does not have (unicast and multicast).
pub const EXTENDED_ONLY_COUNTERS: [&str; count(PortCountersExtended::FIELDS, EXTENDED_ONLY_PICK)] =
    names(PortCountersExtended::FIELDS, EXTENDED_ONLY_PICK);

/// PortCounters counters PortCountersExtended can carry 64 bits wide: data and packets
/// always, the others with IsAdditionalPortCountersExtendedSupported.
pub const COUNTERS_WITH_EXTENDED_FORM: [&str;
    count(PortCounters::FIELDS, WITH_EXTENDED_FORM_PICK)] =
    names(PortCounters::FIELDS, WITH_EXTENDED_FORM_PICK);

/// PortCountersExtended's additional counters (IsAdditionalPortCountersExtendedSupported):
/// the error counters, PortXmitWait and QP1Dropped, 64 bits wide.
pub const ADDITIONAL_EXTENDED_COUNTERS: [&str;
    count(PortCountersExtended::FIELDS, ADDITIONAL_PICK)] =
    names(PortCountersExtended::FIELDS, ADDITIONAL_PICK);

/// PortRcvErrorDetails' counters.
pub const RCV_ERROR_DETAIL_COUNTERS: [&str; count(PortRcvErrorDetails::FIELDS, ANY_COUNTER)] =
    all_counters!(PortRcvErrorDetails);

/// PortXmitDiscardDetails' counters.
pub const XMIT_DISCARD_DETAIL_COUNTERS: [&str; count(PortXmitDiscardDetails::FIELDS, ANY_COUNTER)] =
    all_counters!(PortXmitDiscardDetails);

/// PortExtendedSpeedsCounters' counters (the layout without RS-FEC).
pub const EXTENDED_SPEEDS_COUNTERS: [&str; count(PortExtendedSpeedsCounters::FIELDS, ANY_COUNTER)] =
    all_counters!(PortExtendedSpeedsCounters);

/// PortExtendedSpeedsCounters' counters in the RS-FEC layout.
pub const EXTENDED_SPEEDS_RS_FEC_COUNTERS: [&str;
    count(PortExtendedSpeedsCountersRsFec::FIELDS, ANY_COUNTER)] =
    all_counters!(PortExtendedSpeedsCountersRsFec);

/// The counter called `name` in PortCounters, PortCountersExtended or a detail attribute:
/// its row's counter facts.
fn counter_facts(name: &str) -> Option<Counter> {
    COUNTER_TABLES
        .into_iter()
        .flatten()
        .find(|spec| spec.name == name)
        .and_then(|spec| spec.counter())
}

/// The kind of the counter called `name` in any counters attribute.
pub fn counter_kind(name: &str) -> Option<CounterKind> {
    counter_facts(name).map(|c| c.kind)
}

/// Whether a PMA with `capabilities` answers the PortCounters counter `name` from
/// PortCountersExtended, 64 bits wide.
pub fn has_extended_form(name: &str, capabilities: PmaCapabilities) -> bool {
    pma_capability::has_extended_counters(capabilities.mask)
        && PortCountersExtended::FIELDS.iter().any(|spec| {
            spec.name == name && spec.counter().is_some_and(|c| capabilities.covers(c.needs))
        })
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
            .counters_for(needs(pma_capability::IS_QP1_DROPPED_SUPPORTED, 0))
            .map(|f| (f.name, f.value))
            .collect();
        assert!(with_qp1.contains(&("QP1Dropped", 3)));
        assert!(!with_qp1.iter().any(|(n, _)| *n == "PortXmitWait"));
        assert_eq!(c.counters_for(needs(0x1200, 0)).count(), 17);
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
        assert!(decoded
            .counters_for(PmaCapabilities::ALL)
            .all(|c| c.saturated()));
        assert_eq!(decoded.counters_for(PmaCapabilities::ALL).count(), 18);
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
        // Every PortCounters counter has a 64-bit form (the additional counters).
        assert_eq!(
            COUNTERS_WITH_EXTENDED_FORM,
            *PortCounters::FIELDS
                .iter()
                .filter(|f| f.counter().is_some())
                .map(|f| f.name)
                .collect::<Vec<_>>()
        );
        assert_eq!(
            EXTENDED_COUNTER_NAMES[..4],
            ["PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts"]
        );
        let mut additional = ERROR_COUNTERS.to_vec();
        additional.extend(["PortXmitWait", "QP1Dropped"]);
        assert_eq!(ADDITIONAL_EXTENDED_COUNTERS.to_vec(), additional);
        assert_eq!(
            EXTENDED_ONLY_COUNTERS,
            [
                "PortUnicastXmitPkts",
                "PortUnicastRcvPkts",
                "PortMulticastXmitPkts",
                "PortMulticastRcvPkts"
            ]
        );
        assert_eq!(EXTENDED_COUNTER_NAMES[4..], EXTENDED_ONLY_COUNTERS);
        assert_eq!(counter_kind("PortLoopingErrors"), Some(CounterKind::Detail));
        assert_eq!(
            counter_kind("PortFECCorrectedSymbolCtr"),
            Some(CounterKind::Physical)
        );
        assert_eq!(RCV_ERROR_DETAIL_COUNTERS.len(), 6);
        assert_eq!(XMIT_DISCARD_DETAIL_COUNTERS.len(), 4);
        assert_eq!(EXTENDED_SPEEDS_COUNTERS.len(), 2 + 3 * 12);
        assert_eq!(EXTENDED_SPEEDS_RS_FEC_COUNTERS.len(), 2 + 12 + 3);
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

#[cfg(test)]
mod counter_name_tests {
    use super::*;

    /// A decoded counter's short name is its table row's; a name read back from text is
    /// the same name, and one no table has is kept and compares as itself.
    #[test]
    fn counter_names_compare_as_their_text() {
        let c = PortCounters {
            symbol_error_counter: 3,
            ..Default::default()
        };
        let first = c.counters()[0];
        assert_eq!(first.short_name, first.name);
        assert_eq!(CounterName::intern("SymbolErrorCounter"), first.short_name);
        let other = CounterName::intern("NotACounterOfAnyTable");
        assert_eq!(other, "NotACounterOfAnyTable");
        assert_eq!(other, CounterName::intern("NotACounterOfAnyTable"));
        assert_ne!(other, first.short_name);
        assert_eq!(other.to_string(), "NotACounterOfAnyTable");
        assert!(!other.is_from_table() && first.short_name.is_from_table());
        assert_eq!(std::mem::size_of::<CounterName>(), 2);
    }

    /// The counters read straight from the bytes are the decoded struct's, for every
    /// counters attribute, any bytes and any capabilities; a short reply is the decoder's
    /// error.
    fn wire_and_struct_agree<A: PortSelected>(data: &[u8], capabilities: PmaCapabilities) {
        let mut from_wire = Vec::new();
        let wire = A::counter_values_from_wire(data, capabilities, &mut from_wire);
        match A::decode(data) {
            Ok(decoded) => {
                assert_eq!(wire, Ok(decoded.port_select()));
                let mut from_struct = Vec::new();
                decoded.counter_values_into(capabilities, &mut from_struct);
                assert_eq!(from_wire, from_struct);
            }
            Err(e) => assert_eq!(wire, Err(e)),
        }
    }

    proptest::proptest! {
        #[test]
        fn counters_from_the_wire_are_the_decoded_ones(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 200),
            // Half the cases whole, the rest cut anywhere.
            cut in 0..400usize,
            mask in proptest::prelude::any::<u16>(),
            mask2 in proptest::prelude::any::<u32>(),
        ) {
            let capabilities = PmaCapabilities { mask, mask2 };
            let data = &bytes[..cut.min(bytes.len())];
            wire_and_struct_agree::<PortCounters>(data, capabilities);
            wire_and_struct_agree::<PortCountersExtended>(data, capabilities);
            wire_and_struct_agree::<PortRcvErrorDetails>(data, capabilities);
            wire_and_struct_agree::<PortXmitDiscardDetails>(data, capabilities);
            wire_and_struct_agree::<PortExtendedSpeedsCounters>(data, capabilities);
            wire_and_struct_agree::<PortExtendedSpeedsCountersRsFec>(data, capabilities);
        }
    }

    /// A name two tables share is one name, whichever table a value came from.
    #[test]
    fn a_name_two_tables_share_is_one_name() {
        let plain = PortCounters {
            port_xmit_data: 1,
            ..Default::default()
        };
        let extended = PortCountersExtended {
            port_xmit_data: 1,
            ..Default::default()
        };
        let name_in = |values: Vec<CounterValue>| {
            values
                .into_iter()
                .find(|v| v.name == "PortXmitData")
                .expect("a data counter")
                .short_name
        };
        let (a, b) = (name_in(plain.counters()), name_in(extended.counters()));
        assert_eq!(a, b);
        assert_eq!(a.as_str(), "PortXmitData");
        let mut seen = std::collections::HashSet::new();
        seen.insert(a);
        assert!(seen.contains(&CounterName::intern("PortXmitData")));
    }

    /// Every table name is one JSON and Prometheus take as it is (what
    /// `is_from_table` promises), and each table is found at its own place.
    #[test]
    fn table_names_need_no_escaping() {
        for spec in TABLE_ROWS.iter() {
            assert!(
                spec.name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_'),
                "{}",
                spec.name
            );
        }
        let mut base = 0;
        for table in COUNTER_TABLES {
            assert_eq!(table_base(table), base);
            for (row, spec) in table.iter().enumerate() {
                assert_eq!(CounterName::of_row(base, row).as_str(), spec.name);
            }
            base += table.len();
        }
    }
}
