//! The ibnetdiscover-format topology parser on untrusted text; what it accepts must write
//! back out (ibnetdiscover text and DOT) without panicking. Seed it with the published
//! files: `cargo fuzz run ibnd_parse fuzz/corpus/ibnd_parse tests/data/real`.
#![no_main]

use ibscope_topo::{dot, health, ibnd};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(fabric) = ibnd::parse(text) {
        let _ = ibnd::write(&fabric, None);
        let report = health::assess(&fabric, None, &Default::default());
        let _ = dot::write(&fabric, None, &report);
    }
});
