//! Attribute codecs: SMP attributes (IBA 14.2.5) and PerfMgt attributes (IBA 16.1).

pub mod counter_facts;
pub mod link;
pub mod perf_attrs;
pub mod smp_attrs;

#[cfg(test)]
pub(crate) mod golden;

pub use link::{Rate, Speed, SpeedSet, Width, WidthSet};
pub use perf_attrs::{
    counter_select, pma_capability, pma_capability2, ClassPortInfo, CounterKind, CounterName,
    CounterValue, PmaCapabilities, PortCounters, PortCountersExtended, PortExtendedSpeedsCounters,
    PortExtendedSpeedsCountersRsFec, PortRcvErrorDetails, PortSelected, PortXmitDiscardDetails,
};
pub use smp_attrs::{
    capability, capability2, mtu_bytes, FecMode, LinearForwardingTableBlock, LinkDownDefaultState,
    MlnxExtPortInfo, NodeDescription, NodeInfo, NodeType, PhysState, PortInfo, PortInfoExtended,
    PortState, SmInfo, SmState, SwitchInfo, VlCount,
};
