//! Which counters there are, as the PortCounters and PortCountersExtended field tables
//! declare them: specification order, the extended-only ones, which are errors, which
//! count data.

use ibscope_mad::attr::{perf_attrs, CounterKind, PmaCapabilities};

/// The counters thresholds and `check` look at: the PortCounters error counters
/// (IBA 16.1.3.5), as the PortCounters table marks them.
pub const ERROR_COUNTERS: &[&str] = &perf_attrs::ERROR_COUNTERS;

/// Every counter name thresholds know: PortCounters, then the extended-only ones.
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

/// PortCountersExtended's 64-bit error counters (and PortXmitWait, QP1Dropped), read where
/// the PMA has IsAdditionalPortCountersExtendedSupported.
pub const ADDITIONAL_EXTENDED: [&str; perf_attrs::ADDITIONAL_EXTENDED_COUNTERS.len()] =
    perf_attrs::ADDITIONAL_EXTENDED_COUNTERS;

/// The counters of the breakdown attributes (PortRcvErrorDetails, then
/// PortXmitDiscardDetails): the counter families `serve` and `counters --format prom` add
/// for them.
pub fn detail_counter_names() -> Vec<&'static str> {
    perf_attrs::RCV_ERROR_DETAIL_COUNTERS
        .iter()
        .chain(perf_attrs::XMIT_DISCARD_DETAIL_COUNTERS.iter())
        .copied()
        .collect()
}

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

/// A port whose PMA has `capabilities` answers this counter from PortCountersExtended, 64
/// bits wide ([`PortSample::value`](super::PortSample::value)).
pub(super) fn has_extended_form(name: &str, capabilities: PmaCapabilities) -> bool {
    perf_attrs::has_extended_form(name, capabilities)
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
