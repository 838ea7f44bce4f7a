//! The node-name-map parser on untrusted text.
#![no_main]

use ibscope_topo::namemap::NameMap;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = NameMap::parse(text, "fuzz.map");
    }
});
