//! Attribute codecs: SMP attributes (IBA 14.2.5) and PerfMgt attributes (IBA 16.1.3).

pub mod link;
pub mod perf_attrs;
pub mod smp_attrs;

pub use perf_attrs::{
    pma_capability, ClassPortInfo, CounterValue, PortCounters, PortCountersExtended,
};
pub use smp_attrs::{
    capability, mtu_bytes, LinearForwardingTableBlock, NodeDescription, NodeInfo, NodeType,
    PhysState, PortInfo, PortState, SmInfo, SwitchInfo,
};
