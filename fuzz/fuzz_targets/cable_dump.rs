//! Module dumps (raw bytes and every text format) and the three memory maps' decoders on
//! untrusted bytes.
#![no_main]

use ibscope_mad::cable::{self, dump, ModuleMemory};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = dump::parse(data) {
        let _ = cable::decode(&d.memory);
    }
    // The same bytes as raw memory of each map, cut to whole halves.
    let len = data.len().min(768) / 128 * 128;
    for id in [0x03u8, 0x11, 0x18] {
        let mut bytes = data[..len].to_vec();
        if let Some(first) = bytes.first_mut() {
            *first = id;
        }
        if let Ok(m) = ModuleMemory::from_raw(&bytes) {
            let _ = cable::decode(&m);
        }
    }
});
