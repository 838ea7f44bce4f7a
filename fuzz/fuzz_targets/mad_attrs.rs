//! Every SMP and PerfMgt attribute decoder on untrusted bytes; the first byte picks the
//! decoder so one corpus covers all of them. A decoder may refuse, never panic; what it
//! accepts must re-encode without panicking.
#![no_main]

use ibscope_mad::attr::{
    ClassPortInfo, LinearForwardingTableBlock, NodeDescription, NodeInfo, PortCounters,
    PortCountersExtended, PortInfo, SmInfo, SwitchInfo,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, buf)) = data.split_first() else {
        return;
    };
    match selector % 9 {
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
        _ => {
            if let Ok(v) = PortCountersExtended::decode(buf) {
                let _ = v.to_bytes();
                let _ = format!("{v:?}");
            }
        }
    }
});
