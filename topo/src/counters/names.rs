//! Which counters there are, as the PortCounters and PortCountersExtended field tables
//! declare them: specification order, the extended-only ones, which are errors, which
//! count data.

use ibscope_mad::attr::{perf_attrs, CounterKind};

/// The counters thresholds and `check` look at: the PortCounters error counters
/// (IBA 16.1.3.5), as the PortCounters table marks them.
pub const ERROR_COUNTERS: &[&str] = &perf_attrs::ERROR_COUNTERS;

/// Counters whose extended 64-bit form replaces the 32-bit one when available.
pub(super) const HAS_EXTENDED: [&str; perf_attrs::COUNTERS_WITH_EXTENDED_FORM.len()] =
    perf_attrs::COUNTERS_WITH_EXTENDED_FORM;

/// Every counter name known: PortCounters, then the extended-only ones.
pub fn known_counter(name: &str) -> bool {
    PORT_COUNTER_NAMES.contains(&name) || EXTENDED_ONLY.contains(&name)
}

/// PortCounters in specification order.
pub const PORT_COUNTER_NAMES: [&str; perf_attrs::PORT_COUNTER_NAMES.len()] =
    perf_attrs::PORT_COUNTER_NAMES;

/// PortCountersExtended counters in specification order.
pub const EXTENDED_COUNTER_NAMES: [&str; perf_attrs::EXTENDED_COUNTER_NAMES.len()] =
    perf_attrs::EXTENDED_COUNTER_NAMES;

/// PortCountersExtended counters without a PortCounters counterpart.
pub const EXTENDED_ONLY: [&str; perf_attrs::EXTENDED_ONLY_COUNTERS.len()] =
    perf_attrs::EXTENDED_ONLY_COUNTERS;

/// Every counter name, PortCounters order then the extended-only ones.
pub fn all_counter_names() -> Vec<&'static str> {
    PORT_COUNTER_NAMES
        .iter()
        .chain(EXTENDED_ONLY.iter())
        .copied()
        .collect()
}

/// Counters in bytes (converted from 4-octet words).
pub fn is_data_counter(name: &str) -> bool {
    perf_attrs::counter_kind(name) == Some(CounterKind::Data)
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
