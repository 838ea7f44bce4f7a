//! The lane rate a module is built for, from what its memory declares, in the terms of the
//! fabric's one table of lane speeds (`SPEEDS` in `attr/link.rs`).

use super::codes::ExtendedCompliance;
use crate::attr::link::SPEEDS;

/// How far below a link's lane rate a module's declared rate may be and still carry it:
/// nominal bit rates are rounded to their units (100 or 250 Mb/s; a QSFP28 DAC declares
/// 25.5 Gb/s for 25.78125), so only a rate lower by more than this is a mismatch.
pub const RATE_TOLERANCE: f64 = 0.05;

/// The highest signalling rate per lane, in Gb/s, that the module declares: its InfiniBand
/// rates (by their names in `SPEEDS`), else its extended compliance code, else its nominal
/// bit rate (`nominal_gbps`, 0 when unset).
pub fn max_lane_gbps(
    infiniband: &[&str],
    extended: Option<ExtendedCompliance>,
    nominal_gbps: f64,
) -> Option<f64> {
    let ib = SPEEDS
        .iter()
        .filter(|s| infiniband.contains(&s.name))
        .map(|s| s.lane_gbps)
        .fold(None, |m: Option<f64>, g| Some(m.map_or(g, |m| m.max(g))));
    ib.or_else(|| extended.and_then(ExtendedCompliance::lane_gbps))
        .or_else(|| (nominal_gbps > 0.0).then_some(nominal_gbps))
}

/// Whether a module declaring `module_gbps` per lane is too slow for a link whose lanes
/// run at `link_gbps`.
pub fn too_slow(module_gbps: f64, link_gbps: f64) -> bool {
    module_gbps * (1.0 + RATE_TOLERANCE) < link_gbps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infiniband_rates_come_from_the_speed_table() {
        // SPEEDS: EDR lanes signal at 25.78125 Gb/s, HDR at 53.125.
        assert_eq!(max_lane_gbps(&["QDR", "EDR"], None, 25.5), Some(25.78125));
        assert_eq!(max_lane_gbps(&[], None, 25.5), Some(25.5));
        assert_eq!(max_lane_gbps(&[], None, 0.0), None);
    }

    #[test]
    fn rounding_of_nominal_rates_is_no_mismatch() {
        // A QSFP28 DAC declaring 25.5 Gb/s carries EDR (25.78125) but not HDR.
        assert!(!too_slow(25.5, 25.78125));
        assert!(too_slow(25.5, 53.125));
    }
}
