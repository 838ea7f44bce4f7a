//! What a counter row of a PerfMgt layout table is beyond its place: its kind and the
//! PMA capabilities it needs ([`crate::wire::Role::Counter`]). The rows themselves are in
//! `perf_attrs.rs`; these types stand apart so the layout tables (`wire.rs`) can name a
//! counter's role without importing the attributes that use them. The CapabilityMask bits
//! a PMA sets are here too, with the type that holds them.

/// What a PMA implements: its ClassPortInfo CapabilityMask and CapabilityMask2. Also what a
/// counter needs of them ([`Counter::needs`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
pub struct PmaCapabilities {
    /// See [`pma_capability`].
    pub mask: u16,
    /// See [`pma_capability2`] (27 bits).
    pub mask2: u32,
}

impl PmaCapabilities {
    /// Nothing: what a counter every PMA implements needs.
    pub const NONE: PmaCapabilities = PmaCapabilities::new(0, 0);
    /// Every bit: the rows of a table whatever the PMA implements.
    pub const ALL: PmaCapabilities = PmaCapabilities::new(u16::MAX, u32::MAX);

    pub const fn new(mask: u16, mask2: u32) -> PmaCapabilities {
        PmaCapabilities { mask, mask2 }
    }
    /// Every bit of `needs` is set here.
    pub const fn covers(self, needs: PmaCapabilities) -> bool {
        self.mask & needs.mask == needs.mask && self.mask2 & needs.mask2 == needs.mask2
    }
    /// The bits of both.
    pub const fn union(self, other: PmaCapabilities) -> PmaCapabilities {
        PmaCapabilities::new(self.mask | other.mask, self.mask2 | other.mask2)
    }
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
    /// One cause of an error counter ([`BREAKDOWNS`](super::perf_attrs::BREAKDOWNS)): PortRcvErrorDetails breaks
    /// PortRcvErrors down, PortXmitDiscardDetails PortXmitDiscards.
    Detail,
    /// The physical layer of a link at an extended speed (PortExtendedSpeedsCounters):
    /// 64b/66b sync header and block errors, per-lane error detection and FEC counts.
    Physical,
}

/// The counter facts of a table row: see [`Role::Counter`](crate::wire::Role::Counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    pub kind: CounterKind,
    /// ClassPortInfo capability bits a PMA sets when it implements the counter
    /// ([`ALWAYS`]: every PMA does).
    pub needs: PmaCapabilities,
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
    /// PortExtendedSpeedsCounters has its RS-FEC layout where the port runs RS-FEC.
    /// IS_PM_RSFEC_COUNTERS_SUP.
    pub const IS_RS_FEC_COUNTERS_SUPPORTED: u16 = 1 << 14;
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
