//! Which counters there are: PortCounters in specification order, the
//! PortCountersExtended-only ones, which are errors, which count data.

/// The counters thresholds and `check` look at: PortCounters error counters (IBA 16.1.3.5),
/// the first twelve of [`PORT_COUNTER_NAMES`] (the data, packet and wait counters follow).
pub const ERROR_COUNTERS: &[&str] = PORT_COUNTER_NAMES.split_at(12).0;

/// Counters whose extended 64-bit form replaces the 32-bit one when available.
pub(super) const HAS_EXTENDED: [&str; 4] =
    ["PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts"];

/// Every counter name known: PortCounters, then the extended-only ones.
pub fn known_counter(name: &str) -> bool {
    PORT_COUNTER_NAMES.contains(&name) || EXTENDED_ONLY.contains(&name)
}

/// PortCounters in specification order.
pub const PORT_COUNTER_NAMES: [&str; 17] = [
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
    "PortXmitData",
    "PortRcvData",
    "PortXmitPkts",
    "PortRcvPkts",
    "PortXmitWait",
];

/// PortCountersExtended counters without a PortCounters counterpart.
pub const EXTENDED_ONLY: [&str; 4] = [
    "PortUnicastXmitPkts",
    "PortUnicastRcvPkts",
    "PortMulticastXmitPkts",
    "PortMulticastRcvPkts",
];

/// Every counter name, PortCounters order then the extended-only ones.
pub fn all_counter_names() -> Vec<&'static str> {
    PORT_COUNTER_NAMES
        .iter()
        .chain(EXTENDED_ONLY.iter())
        .copied()
        .collect()
}

/// PortCountersExtended's counters in specification order: the 64-bit forms of the data
/// and packet counters, then the extended-only ones.
pub fn extended_counter_names() -> Vec<&'static str> {
    HAS_EXTENDED
        .iter()
        .chain(EXTENDED_ONLY.iter())
        .copied()
        .collect()
}

/// Counters in bytes (converted from 4-octet words).
pub fn is_data_counter(name: &str) -> bool {
    name == "PortXmitData" || name == "PortRcvData"
}

/// A port with PortCountersExtended answers this counter from it ([`PortSample::value`]).
pub(super) fn has_extended_form(name: &str) -> bool {
    HAS_EXTENDED.contains(&name) || EXTENDED_ONLY.contains(&name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_counters_are_the_twelve_error_counters() {
        assert_eq!(ERROR_COUNTERS.len(), 12);
        assert_eq!(ERROR_COUNTERS[0], "SymbolErrorCounter");
        assert_eq!(ERROR_COUNTERS[11], "VL15Dropped");
        assert!(!ERROR_COUNTERS
            .iter()
            .any(|c| c.contains("Data") || c.contains("Pkts")));
    }
}
