//! Loading a JSON snapshot (`--topology FILE.json`): schema parse, then the graph build,
//! which must refuse inconsistent files (dangling links, duplicate GUIDs) without panicking.
#![no_main]

use ibscope_topo::{ibnd, Fabric, FabricFile};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(file) = serde_json::from_str::<FabricFile>(text) {
        if let Ok(fabric) = Fabric::from_file(file) {
            let _ = ibnd::write(&fabric, None);
        }
    }
});
