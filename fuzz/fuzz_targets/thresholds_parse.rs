//! The counter threshold file parser on untrusted text.
#![no_main]

use ibscope_topo::counters::Thresholds;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(t) = Thresholds::parse(text, "fuzz.thresholds") {
            for (name, _) in &t.limits {
                let _ = t.get(name);
            }
        }
    }
});
