//! MadView::parse, its accessors and the MAD header codec on untrusted bytes.
#![no_main]

use ibscope_mad::header::{peek_header, MadHeader};
use ibscope_mad::sa::SaFrame;
use ibscope_mad::smp::{DrPath, MadView, SmpFrame};
use ibscope_mad::umad::UmadHeader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(h) = MadHeader::decode(data) {
        let _ = h.method_byte();
        let _ = h.status_code().describe();
        let _ = h.to_bytes();
    }
    let _ = peek_header(data);
    // The framing layouts on the same bytes: decode never panics, what decodes re-encodes.
    if let Ok(f) = SmpFrame::decode(data) {
        let _ = f.to_bytes();
    }
    if let Ok(f) = SaFrame::decode(data) {
        let _ = f.to_bytes();
    }
    if let Ok(h) = UmadHeader::decode(data) {
        let _ = h.to_bytes();
    }
    if let Ok(view) = MadView::parse(data) {
        let _ = view.is_directed();
        let _ = view.is_response();
        let _ = view.status().describe();
        let _ = view.dr_hops();
        let _ = view.m_key();
        let _ = view.smp_data();
        let _ = view.gmp_data();
        let _ = view.sa_data();
        let _ = view.sa_attribute_offset();
        let _ = view.initial_path();
        let _ = view.return_path();
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = DrPath::parse(text);
    }
});
