//! Port counters through the PMA of every port (PerfMgt class, LID routed).
//!
//! MAD budget per node: one ClassPortInfo (its CapabilityMask says whether
//! PortCountersExtended is implemented, CapabilityMask2 whether it carries the error
//! counters 64 bits wide); per port one PortCounters and, when implemented, one
//! PortCountersExtended; with [`SweepOptions`] the breakdown attributes
//! (PortRcvErrorDetails, PortXmitDiscardDetails) and PortExtendedSpeedsCounters. Every
//! request goes out through one executor batch; the extended query follows the node's
//! ClassPortInfo reply, so the window stays full.
//!
//! Ports covered, as perfquery and ibqueryerrors do: switch ports 1..=N at the switch's LID
//! (port 0 only with SwitchInfo.EnhancedPort0: a base port 0 has no PMA counters of its own),
//! and every CA or router port that has a LID, at that LID. The port is chosen by the
//! PortSelect field of the payload (IBA 16.1.3.5); the attribute modifier is 0.
//!
//! Units: PortXmitData and PortRcvData count 4-octet words on the wire; everything here is
//! in **bytes** (multiplied by 4). Saturation is judged on the wire value.
//!
//! Screening ([`sweep_screened`], what ibqueryerrors does): a switch whose PMA has
//! AllPortSelect is first asked for PortCounters with PortSelect 0xFF, the saturating sum
//! over its ports; its ports are read one by one only when [`screen()`] says the sum leaves
//! room for a finding. CA ports are always read one by one.
//!
//! The rooms: `names` (which counters there are), `sample` (one sweep's values),
//! `targets` (which ports are read, where), `pma` (the PMA requests and their checked
//! replies), `sweep` (reading, with or without screening), `screen` (what an all-ports sum
//! rules out), `thresholds`, `delta` (rates between two sweeps) and `reset`.

pub mod delta;
pub mod json;
pub mod names;
mod pma;
pub mod reset;
pub mod sample;
pub mod screen;
pub mod sweep;
pub mod targets;
pub mod text;
pub mod thresholds;

pub use delta::{changes_over, diff, CounterDelta, PortDelta};
pub use names::{
    all_counter_names, detail_counter_names, is_data_counter, known_counter, ADDITIONAL_EXTENDED,
    ERROR_COUNTERS, EXTENDED_COUNTER_NAMES, EXTENDED_ONLY, PORT_COUNTER_NAMES,
};
pub use pma::ALL_PORTS;
pub use reset::{reset, ResetResult};
pub use sample::{CounterSet, Details, PortSample, Reading, Sample};
pub use screen::{screen, Screen};
pub use sweep::{
    sweep, sweep_screened, sweep_screened_with, sweep_with, DetailReads, DrilledSwitch,
    ScreenedSweep, ScreenedSwitch, SweepOptions,
};
pub use targets::{targets, CounterTarget};
pub use thresholds::{FlapLimits, RateLimit, ThresholdError, Thresholds};
