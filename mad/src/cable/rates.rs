//! The lane rate a module is built for, from what its memory declares, in the terms of the
//! fabric's one table of lane speeds (`SPEEDS` in `attr/link.rs`).

use super::codes::{ExtendedCompliance, HostInterface, HostLane};
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

/// The signalling rate per lane of a host interface: an InfiniBand speed's, or the fastest
/// lane speed of `SPEEDS` named by that nominal rate (25 is EDR's 25.78125 Gb/s, 50 HDR's
/// 53.125; Ethernet signals its 25G and 50G lanes at the same rates).
pub fn host_lane_gbps(interface: HostInterface) -> Option<f64> {
    match interface.lane()? {
        HostLane::Ib(name) => SPEEDS.iter().find(|s| s.name == name).map(|s| s.lane_gbps),
        HostLane::Nominal(nominal) => SPEEDS
            .iter()
            .filter(|s| s.lane_nominal_gbps == nominal)
            .map(|s| s.lane_gbps)
            .reduce(f64::max),
    }
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
    fn host_interfaces_signal_at_their_speeds_rate() {
        // SPEEDS: IB NDR lanes at 106.25 Gb/s; 400GAUI-8 is 8 lanes of 50G, HDR's 53.125;
        // CAUI-4 4 lanes of 25G, EDR's 25.78125; XLAUI 4 of 10G, FDR10's 10.3125.
        assert_eq!(host_lane_gbps(HostInterface::IbNdr), Some(106.25));
        assert_eq!(host_lane_gbps(HostInterface::Aui400G8), Some(53.125));
        assert_eq!(host_lane_gbps(HostInterface::Caui4), Some(25.78125));
        assert_eq!(host_lane_gbps(HostInterface::Xlaui), Some(10.3125));
        assert_eq!(host_lane_gbps(HostInterface::Aui800G8S), Some(106.25));
        assert_eq!(host_lane_gbps(HostInterface::from_code(0xfe)), None);
    }

    #[test]
    fn rounding_of_nominal_rates_is_no_mismatch() {
        // A QSFP28 DAC declaring 25.5 Gb/s carries EDR (25.78125) but not HDR.
        assert!(!too_slow(25.5, 25.78125));
        assert!(too_slow(25.5, 53.125));
    }
}
