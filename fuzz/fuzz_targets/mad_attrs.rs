//! Every SMP and PerfMgt attribute decoder on untrusted bytes; the first byte picks the
//! decoder so one corpus covers all of them. A decoder may refuse, never panic; what it
//! accepts must re-encode without panicking.
#![no_main]

use ibscope_mad::attr::{
    ClassPortInfo, LinearForwardingTableBlock, MlnxExtPortInfo, NodeDescription, NodeInfo,
    PmaCapabilities, PortCounters, PortCountersExtended, PortExtendedSpeedsCounters,
    PortExtendedSpeedsCountersRsFec, PortInfo, PortInfoExtended, PortRcvErrorDetails,
    PortXmitDiscardDetails, SmInfo, SwitchInfo,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, buf)) = data.split_first() else {
        return;
    };
    match selector % 15 {
        0 => {
            if let Ok(v) = NodeInfo::decode(buf) {
                let _ = v.to_bytes();
                let _ = format!("{v:?}");
            }
        }
        1 => {
            if let Ok(v) = NodeDescription::decode(buf) {
                let _ = format!("{v:?}");
            }
        }
        2 => {
            if let Ok(v) = PortInfo::decode(buf) {
                let _ = v.to_bytes();
                let _ = format!("{v:?}");
            }
        }
        3 => {
            if let Ok(v) = SwitchInfo::decode(buf) {
                let _ = v.to_bytes();
            }
        }
        4 => {
            if let Ok(v) = LinearForwardingTableBlock::decode(buf) {
                let _ = format!("{v:?}");
            }
        }
        5 => {
            if let Ok(v) = SmInfo::decode(buf) {
                let _ = v.to_bytes();
            }
        }
        6 => {
            if let Ok(v) = ClassPortInfo::decode(buf) {
                let _ = v.to_bytes();
            }
        }
        7 => {
            if let Ok(v) = PortCounters::decode(buf) {
                let _ = v.to_bytes();
                let _ = format!("{v:?}");
            }
        }
        8 => {
            if let Ok(v) = PortCountersExtended::decode(buf) {
                let _ = v.to_bytes();
                let _ = v.counters_for(PmaCapabilities::ALL).count();
                let _ = format!("{v:?}");
            }
        }
        9 => {
            if let Ok(v) = PortRcvErrorDetails::decode(buf) {
                let _ = v.to_bytes();
            }
        }
        10 => {
            if let Ok(v) = PortXmitDiscardDetails::decode(buf) {
                let _ = v.to_bytes();
            }
        }
        11 => {
            if let Ok(v) = PortExtendedSpeedsCounters::decode(buf) {
                let _ = v.to_bytes();
            }
        }
        12 => {
            if let Ok(v) = PortExtendedSpeedsCountersRsFec::decode(buf) {
                let _ = v.to_bytes();
            }
        }
        13 => {
            if let Ok(v) = MlnxExtPortInfo::decode(buf) {
                let _ = v.to_bytes();
            }
        }
        _ => {
            if let Ok(v) = PortInfoExtended::decode(buf) {
                let _ = (v.to_bytes(), v.rs_fec_active());
            }
        }
    }
});
