//! Helpers shared by the counters module's tests.

use ibscope_mad::attr::{PortCounters, PortCountersExtended};

use super::pma::ALL_PORTS;
use super::sample::{CounterSet, PortSample, Sample};
use crate::health::PortRef;
use crate::model::NodeKind;

/// ibsim's switch PMA: AllPortSelect, PortCountersExtended, PortXmitWait.
pub const SWITCH_MASK: u16 = 0x1300;
/// AllPortSelect without PortCountersExtended.
pub const NO_EXTENDED_MASK: u16 = 0x1100;

pub fn port_ref(guid: u64, port: u8) -> PortRef {
    PortRef {
        node: "n".into(),
        node_guid: guid,
        kind: NodeKind::Switch,
        port,
        lid: 1,
    }
}

pub fn port_sample(
    values: &[(&str, u64)],
    ext: Option<&[(&str, u64)]>,
    sat: &[&str],
) -> PortSample {
    let set = |v: &[(&str, u64)]| CounterSet(v.iter().map(|(n, x)| (n.to_string(), *x)).collect());
    PortSample {
        at: port_ref(1, 1),
        remote: None,
        capability_mask: Some(0x1300),
        counters: Some(set(values)),
        extended: ext.map(set),
        saturated: sat.iter().map(|s| s.to_string()).collect(),
        errors: Vec::new(),
    }
}

pub fn wrap(p: PortSample) -> Sample {
    Sample {
        time_ms: 0,
        duration_ms: 0,
        mads_sent: 0,
        data_unit: "bytes".into(),
        ports: vec![p],
    }
}

/// The sum a PMA answers for PortSelect 0xFF: every field saturating at its width;
/// `ibsim_discards`: PortXmitDiscards stops at 255 as in ibsim 0.10.
pub fn saturating_sum(
    ports: &[(PortCounters, PortCountersExtended)],
    ibsim_discards: bool,
) -> (PortCounters, PortCountersExtended) {
    let add = |a: u64, b: u64, max: u64| (a + b).min(max);
    let mut s = PortCounters {
        port_select: ALL_PORTS,
        ..Default::default()
    };
    let mut e = PortCountersExtended {
        port_select: ALL_PORTS,
        ..Default::default()
    };
    for (c, x) in ports {
        macro_rules! sum {
            ($($f:ident: $t:ty = $max:expr),* $(,)?) => {
                $( s.$f = add(s.$f.into(), c.$f.into(), $max) as $t; )*
            };
        }
        sum!(
            symbol_error_counter: u16 = 0xffff,
            link_error_recovery_counter: u8 = 0xff,
            link_downed_counter: u8 = 0xff,
            port_rcv_errors: u16 = 0xffff,
            port_rcv_remote_physical_errors: u16 = 0xffff,
            port_rcv_switch_relay_errors: u16 = 0xffff,
            port_xmit_discards: u16 = if ibsim_discards { 0xff } else { 0xffff },
            port_xmit_constraint_errors: u8 = 0xff,
            port_rcv_constraint_errors: u8 = 0xff,
            local_link_integrity_errors: u8 = 0xf,
            excessive_buffer_overrun_errors: u8 = 0xf,
            vl15_dropped: u16 = 0xffff,
            port_xmit_data: u32 = 0xffff_ffff,
            port_rcv_data: u32 = 0xffff_ffff,
            port_xmit_pkts: u32 = 0xffff_ffff,
            port_rcv_pkts: u32 = 0xffff_ffff,
            port_xmit_wait: u32 = 0xffff_ffff,
        );
        macro_rules! sum64 {
            ($($f:ident),*) => { $( e.$f = e.$f.saturating_add(x.$f); )* };
        }
        sum64!(
            port_xmit_data,
            port_rcv_data,
            port_xmit_pkts,
            port_rcv_pkts,
            port_unicast_xmit_pkts,
            port_unicast_rcv_pkts,
            port_multicast_xmit_pkts,
            port_multicast_rcv_pkts
        );
    }
    (s, e)
}
