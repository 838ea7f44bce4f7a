//! What a switch's all-ports sum rules out: whether its ports need reading one by one.

use ibscope_mad::attr::{CounterValue, PmaCapabilities, PortCounters};
use serde::Serialize;

use super::names::has_extended_form;
use super::sample::in_bytes;
use super::thresholds::Thresholds;

/// A counter of an all-ports sum that may have stopped counting: at its own maximum, or at
/// the maximum of a narrower PortCounters field (ibsim 0.10 stops the PortXmitDiscards sum
/// at 255, the 8-bit PortXmitConstraintErrors limit). Such a sum bounds nothing.
fn sum_may_have_stopped(c: &CounterValue) -> bool {
    c.bits < 64
        && PortCounters::FIELDS
            .iter()
            .filter(|f| f.counter().is_some() && f.bit_width as u32 <= c.bits)
            .any(|f| c.value == f.max())
}

/// What a switch's all-ports sum says about its ports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Screen {
    /// No port can have a counter finding: the ports need no per-port read.
    Clean,
    /// Some port may: read them one by one. The reason.
    DrillDown(String),
}

/// Whether a switch's ports need per-port reads, from its all-ports PortCounters
/// (`counters`, as decoded from the wire), its all-ports PortCountersExtended when read,
/// its PMA capabilities and the thresholds.
///
/// The findings a per-port read can give are a counter above its threshold
/// ([`Thresholds::exceeded`]: strictly above) and a saturated counter with no 64-bit
/// replacement ([`PortSample::is_saturated`](super::PortSample::is_saturated)). Counters are non-negative and the sum
/// saturates, so a sum at or below a threshold bounds every port, and a sum that has not
/// stopped counting means no port has. The 32-bit data and packet counters saturate in any
/// busy switch's sum: they matter only without PortCountersExtended (where a saturated one
/// is a finding per port); likewise the error counters where PortCountersExtended carries
/// them too (IsAdditionalPortCountersExtendedSupported). A threshold on a counter that
/// ports answer from PortCountersExtended needs the extended sum (`None`: drill down).
pub fn screen(
    counters: &[CounterValue],
    extended: Option<&[CounterValue]>,
    capabilities: PmaCapabilities,
    thresholds: &Thresholds,
) -> Screen {
    for c in counters {
        if has_extended_form(c.name, capabilities) {
            continue;
        }
        if sum_may_have_stopped(c) {
            return Screen::DrillDown(format!(
                "{} = {} in the all-ports sum: it may have stopped counting",
                c.name, c.value
            ));
        }
    }
    for (name, limit) in &thresholds.limits {
        let name = name.as_str();
        let from_extended = has_extended_form(name, capabilities);
        let source = match (from_extended, extended) {
            (false, _) => counters,
            (true, Some(e)) => e,
            (true, None) => {
                return Screen::DrillDown(format!(
                    "{name} has a threshold and the all-ports PortCountersExtended is missing"
                ))
            }
        };
        // Not in the source: ports have no value for it either (never a finding).
        let Some(c) = source.iter().find(|c| c.name == name) else {
            continue;
        };
        let value = in_bytes(c);
        if value > *limit {
            return Screen::DrillDown(format!(
                "{name} = {value} in the all-ports sum, above its threshold {limit}"
            ));
        }
    }
    Screen::Clean
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::names::ERROR_COUNTERS;
    use crate::counters::pma::ALL_PORTS;
    use crate::counters::sample::test_support::{
        port_ref, saturating_sum, ADDITIONAL_MASK, NO_EXTENDED_MASK, SWITCH_MASK,
    };
    use crate::counters::sample::{CounterSet, PortSample};
    use ibscope_mad::attr::{pma_capability, PortCounters, PortCountersExtended};

    fn pc(f: impl FnOnce(&mut PortCounters)) -> PortCounters {
        let mut c = PortCounters::default();
        f(&mut c);
        c
    }

    fn is_clean(s: &Screen) -> bool {
        matches!(s, Screen::Clean)
    }

    fn reason(s: Screen) -> String {
        match s {
            Screen::Clean => panic!("expected a drill-down"),
            Screen::DrillDown(r) => r,
        }
    }

    #[test]
    fn screen_clean_sum_needs_no_per_port_read() {
        let sum = pc(|c| {
            c.port_xmit_data = 123_456;
            c.port_rcv_pkts = 1_000;
        });
        let t = Thresholds::default();
        assert!(is_clean(&screen(&sum.counters(), None, SWITCH_MASK, &t)));
        assert!(is_clean(&screen(
            &sum.counters(),
            None,
            NO_EXTENDED_MASK,
            &t
        )));
    }

    #[test]
    fn screen_drills_down_on_any_error_with_default_thresholds() {
        let t = Thresholds::default();
        for name in ERROR_COUNTERS {
            // The counter at 1, wherever the PortCounters table puts it.
            let field = PortCounters::FIELDS
                .iter()
                .find(|f| f.name == *name)
                .unwrap_or_else(|| panic!("error counter {name} has no PortCounters field"));
            let last_bit = field.bit_offset + field.bit_width - 1;
            let mut bytes = PortCounters::default().to_bytes();
            bytes[last_bit / 8] |= 0x80 >> (last_bit % 8);
            let sum = PortCounters::decode(&bytes).unwrap();
            let r = reason(screen(&sum.counters(), None, SWITCH_MASK, &t));
            assert!(r.starts_with(&format!("{name} = 1 ")), "{r}");
            assert!(r.contains("above its threshold 0"), "{r}");
        }
    }

    #[test]
    fn screen_sum_at_the_threshold_is_clean_above_it_is_not() {
        let t = Thresholds::parse("SymbolErrorCounter=20\nPortXmitWait=100\n", "t").unwrap();
        let at = pc(|c| c.symbol_error_counter = 20);
        assert!(is_clean(&screen(&at.counters(), None, SWITCH_MASK, &t)));
        let above = pc(|c| c.symbol_error_counter = 21);
        let r = reason(screen(&above.counters(), None, SWITCH_MASK, &t));
        assert_eq!(
            r,
            "SymbolErrorCounter = 21 in the all-ports sum, above its threshold 20"
        );
        // PortXmitWait only counts when a threshold is set, as per port.
        let wait = pc(|c| c.port_xmit_wait = 101);
        assert!(!is_clean(&screen(&wait.counters(), None, SWITCH_MASK, &t)));
        let wait_default = screen(&wait.counters(), None, SWITCH_MASK, &Thresholds::default());
        assert!(is_clean(&wait_default));
    }

    #[test]
    fn screen_saturated_error_counter_drills_down_whatever_the_threshold() {
        // Thresholds at the maximum: no port can be above, but a saturated port is a finding.
        let t = Thresholds::parse(
            "SymbolErrorCounter=65535\nLocalLinkIntegrityErrors=15\nPortXmitWait=4294967295\n",
            "t",
        )
        .unwrap();
        let sym = pc(|c| c.symbol_error_counter = u16::MAX);
        let r = reason(screen(&sym.counters(), None, SWITCH_MASK, &t));
        assert!(
            r.starts_with("SymbolErrorCounter = 65535 in the all-ports sum: it may have stopped"),
            "{r}"
        );
        let lli = pc(|c| c.local_link_integrity_errors = 15);
        assert!(!is_clean(&screen(&lli.counters(), None, SWITCH_MASK, &t)));
        // PortXmitWait has no 64-bit replacement: saturated is a finding, extended or not.
        let wait = pc(|c| c.port_xmit_wait = u32::MAX);
        assert!(!is_clean(&screen(&wait.counters(), None, SWITCH_MASK, &t)));
        let wait_below = pc(|c| c.port_xmit_wait = u32::MAX - 1);
        assert!(is_clean(&screen(
            &wait_below.counters(),
            None,
            SWITCH_MASK,
            &t
        )));
    }

    #[test]
    fn screen_sum_stopped_at_a_narrower_limit_bounds_nothing() {
        // ibsim 0.10 stops the PortXmitDiscards sum (16-bit field) at 255.
        let t = Thresholds::parse("PortXmitDiscards=1000\n", "t").unwrap();
        for (v, clean) in [
            (254, true),
            (255, false),
            (256, true),
            (4095, true),
            (65535, false),
        ] {
            let sum = pc(|c| c.port_xmit_discards = v);
            assert_eq!(
                is_clean(&screen(&sum.counters(), None, SWITCH_MASK, &t)),
                clean && u64::from(v) <= 1000,
                "PortXmitDiscards sum {v}"
            );
        }
        let t = Thresholds::parse("SymbolErrorCounter=100\n", "t").unwrap();
        let fifteen = pc(|c| c.symbol_error_counter = 15);
        assert!(!is_clean(&screen(
            &fifteen.counters(),
            None,
            SWITCH_MASK,
            &t
        )));
    }

    #[test]
    fn screen_saturated_data_counters_matter_only_without_extended() {
        let t = Thresholds::default();
        let busy = pc(|c| {
            c.port_xmit_data = u32::MAX;
            c.port_rcv_data = u32::MAX;
            c.port_xmit_pkts = u32::MAX;
            c.port_rcv_pkts = u32::MAX;
        });
        assert!(is_clean(&screen(&busy.counters(), None, SWITCH_MASK, &t)));
        // IsExtendedWidthSupportedNoIETF is PortCountersExtended too.
        let no_ietf = PmaCapabilities::new(0x0500, 0);
        assert!(is_clean(&screen(&busy.counters(), None, no_ietf, &t)));
        let r = reason(screen(&busy.counters(), None, NO_EXTENDED_MASK, &t));
        assert!(r.starts_with("PortXmitData = 4294967295 "), "{r}");
        for field in 0..4 {
            let one = pc(|c| match field {
                0 => c.port_xmit_data = u32::MAX,
                1 => c.port_rcv_data = u32::MAX,
                2 => c.port_xmit_pkts = u32::MAX,
                _ => c.port_rcv_pkts = u32::MAX,
            });
            assert!(!is_clean(&screen(
                &one.counters(),
                None,
                NO_EXTENDED_MASK,
                &t
            )));
            assert!(is_clean(&screen(&one.counters(), None, SWITCH_MASK, &t)));
        }
        // Without extended, a data sum at a narrower limit is read port by port too.
        let narrow = pc(|c| c.port_rcv_pkts = 65535);
        assert!(!is_clean(&screen(
            &narrow.counters(),
            None,
            NO_EXTENDED_MASK,
            &t
        )));
        assert!(is_clean(&screen(&narrow.counters(), None, SWITCH_MASK, &t)));
    }

    #[test]
    fn screen_thresholds_on_extended_counters_need_the_extended_sum() {
        let t = Thresholds::parse("PortXmitData=4000\nPortUnicastRcvPkts=10\n", "t").unwrap();
        let sum = pc(|c| c.port_xmit_data = 10);
        let r = reason(screen(&sum.counters(), None, SWITCH_MASK, &t));
        assert!(r.contains("PortCountersExtended is missing"), "{r}");
        let ext = |data: u64, unicast: u64| {
            PortCountersExtended {
                port_select: ALL_PORTS,
                port_xmit_data: data,
                port_unicast_rcv_pkts: unicast,
                ..Default::default()
            }
            .counters()
        };
        // 1000 words = 4000 bytes: at the threshold.
        assert!(is_clean(&screen(
            &sum.counters(),
            Some(&ext(1000, 10)),
            SWITCH_MASK,
            &t
        )));
        let r = reason(screen(
            &sum.counters(),
            Some(&ext(1001, 10)),
            SWITCH_MASK,
            &t,
        ));
        assert_eq!(
            r,
            "PortXmitData = 4004 in the all-ports sum, above its threshold 4000"
        );
        assert!(!is_clean(&screen(
            &sum.counters(),
            Some(&ext(0, 11)),
            SWITCH_MASK,
            &t
        )));
        // Without PortCountersExtended ports answer PortXmitData from PortCounters (bytes)
        // and have no PortUnicastRcvPkts at all.
        assert!(is_clean(&screen(
            &sum.counters(),
            None,
            NO_EXTENDED_MASK,
            &t
        )));
        let big = pc(|c| c.port_xmit_data = 1001);
        assert!(!is_clean(&screen(
            &big.counters(),
            None,
            NO_EXTENDED_MASK,
            &t
        )));
    }

    /// Tiny deterministic generator (xorshift64*), so the property test needs no crate.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        /// Mostly 0, sometimes small, sometimes at or near `max`.
        fn counter(&mut self, max: u64) -> u64 {
            match self.next() % 10 {
                0..=5 => 0,
                6 | 7 => self.next() % 4,
                8 => max - self.next() % 2,
                _ => self.next() % (max + 1),
            }
        }
    }

    /// A port's counters as a PMA with saturating fields would hold them. Two ports in
    /// three count no errors (data and packets only).
    fn random_port(rng: &mut Rng) -> (PortCounters, PortCountersExtended) {
        let quiet = rng.next() % 3 != 0;
        let mut c = PortCounters {
            port_select: 1,
            symbol_error_counter: rng.counter(0xffff) as u16,
            link_error_recovery_counter: rng.counter(0xff) as u8,
            link_downed_counter: rng.counter(0xff) as u8,
            port_rcv_errors: rng.counter(0xffff) as u16,
            port_rcv_remote_physical_errors: rng.counter(0xffff) as u16,
            port_rcv_switch_relay_errors: rng.counter(0xffff) as u16,
            port_xmit_discards: rng.counter(0xffff) as u16,
            port_xmit_constraint_errors: rng.counter(0xff) as u8,
            port_rcv_constraint_errors: rng.counter(0xff) as u8,
            local_link_integrity_errors: rng.counter(0xf) as u8,
            excessive_buffer_overrun_errors: rng.counter(0xf) as u8,
            vl15_dropped: rng.counter(0xffff) as u16,
            port_xmit_data: rng.counter(0xffff_ffff) as u32,
            port_rcv_data: rng.counter(0xffff_ffff) as u32,
            port_xmit_pkts: rng.counter(0xffff_ffff) as u32,
            port_rcv_pkts: rng.counter(0xffff_ffff) as u32,
            port_xmit_wait: rng.counter(0xffff_ffff) as u32,
            ..Default::default()
        };
        if quiet {
            c = PortCounters {
                port_select: 1,
                port_xmit_data: c.port_xmit_data,
                port_rcv_data: c.port_rcv_data,
                port_xmit_pkts: c.port_xmit_pkts,
                port_rcv_pkts: c.port_rcv_pkts,
                ..Default::default()
            };
        }
        let e = PortCountersExtended {
            port_select: 1,
            port_xmit_data: rng.counter(1 << 40),
            port_rcv_data: rng.counter(1 << 40),
            port_xmit_pkts: rng.counter(1 << 40),
            port_rcv_pkts: rng.counter(1 << 40),
            port_unicast_xmit_pkts: rng.counter(1 << 40),
            port_unicast_rcv_pkts: rng.counter(1 << 40),
            port_multicast_xmit_pkts: rng.counter(1 << 40),
            port_multicast_rcv_pkts: rng.counter(1 << 40),
            ..Default::default()
        };
        // The 64-bit error counters count on where the narrow ones stopped.
        let mut e = e;
        macro_rules! count_on {
            ($($f:ident: $max:expr),* $(,)?) => {$(
                let v = u64::from(c.$f);
                e.$f = if v == $max { v + rng.next() % 1000 } else { v };
            )*};
        }
        count_on!(
            symbol_error_counter: 0xffff,
            link_error_recovery_counter: 0xff,
            link_downed_counter: 0xff,
            port_rcv_errors: 0xffff,
            port_rcv_remote_physical_errors: 0xffff,
            port_rcv_switch_relay_errors: 0xffff,
            port_xmit_discards: 0xffff,
            port_xmit_constraint_errors: 0xff,
            port_rcv_constraint_errors: 0xff,
            local_link_integrity_errors: 0xf,
            excessive_buffer_overrun_errors: 0xf,
            vl15_dropped: 0xffff,
            port_xmit_wait: 0xffff_ffff,
        );
        (c, e)
    }

    /// A port as the sweep records it.
    fn as_sample(c: &PortCounters, e: &PortCountersExtended, caps: PmaCapabilities) -> PortSample {
        let values = c.counters();
        let extended: Vec<_> = e.counters_for(caps).collect();
        PortSample {
            capability_mask: Some(caps.mask),
            capability_mask2: Some(caps.mask2),
            counters: Some(CounterSet::from_values(&values)),
            extended: pma_capability::has_extended_counters(caps.mask)
                .then(|| CounterSet::from_values(&extended)),
            saturated: values
                .iter()
                .filter(|v| v.saturated())
                .map(|v| v.name.to_string())
                .collect(),
            ..PortSample::new(port_ref(1, c.port_select), None)
        }
    }

    /// What `check` reports for a port: thresholds exceeded, counters saturated for good.
    fn port_has_finding(p: &PortSample, t: &Thresholds) -> bool {
        !t.exceeded(p).is_empty() || p.saturated.iter().any(|n| p.is_saturated(n))
    }

    #[test]
    fn screen_clean_implies_no_port_finding() {
        let threshold_sets = [
            Thresholds::default(),
            Thresholds::parse(
                "SymbolErrorCounter=3\nPortXmitDiscards=300\nLinkDownedCounter=255\n\
                 PortXmitWait=1000\nVL15Dropped=65535\n",
                "t",
            )
            .unwrap(),
            Thresholds::parse(
                "SymbolErrorCounter=65535\nPortRcvErrors=65535\nPortXmitDiscards=65535\n\
                 LinkErrorRecoveryCounter=255\nLinkDownedCounter=255\nLocalLinkIntegrityErrors=15\n\
                 ExcessiveBufferOverrunErrors=15\nPortRcvRemotePhysicalErrors=65535\n\
                 PortRcvSwitchRelayErrors=65535\nPortXmitConstraintErrors=255\n\
                 PortRcvConstraintErrors=255\nVL15Dropped=65535\n\
                 PortXmitData=1000000000\nPortMulticastRcvPkts=5\n",
                "t",
            )
            .unwrap(),
        ];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let (mut clean, mut drilled, mut caught) = (0, 0, 0);
        for round in 0..3000 {
            let n = 1 + (rng.next() % 6) as usize;
            let ports: Vec<_> = (0..n).map(|_| random_port(&mut rng)).collect();
            let t = &threshold_sets[round % threshold_sets.len()];
            for mask in [SWITCH_MASK, NO_EXTENDED_MASK, ADDITIONAL_MASK] {
                for quirk in [false, true] {
                    let (s, e) = saturating_sum(&ports, quirk);
                    let e: Vec<_> = e.counters_for(mask).collect();
                    let decision = screen(&s.counters(), Some(&e), mask, t);
                    let findings = ports
                        .iter()
                        .filter(|(c, x)| port_has_finding(&as_sample(c, x, mask), t))
                        .count();
                    if is_clean(&decision) {
                        clean += 1;
                        assert_eq!(
                            findings, 0,
                            "screened out with a port finding: {ports:?} {t:?} mask {mask:?}"
                        );
                    } else {
                        drilled += 1;
                        if findings > 0 {
                            caught += 1;
                        }
                    }
                }
            }
        }
        // The property is exercised both ways.
        assert!(
            clean > 500 && drilled > 1000 && caught > 1000,
            "{clean} {drilled} {caught}"
        );
    }
}
