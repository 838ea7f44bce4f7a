//! SA record splitting and every SA record decoder on untrusted bytes.
#![no_main]

use ibscope_mad::sa::{
    records_in_mad, split_records, LinkRecord, NodeRecord, PathRecord, PortInfoRecord, SmInfoRecord,
};
use ibscope_mad::smp::MadView;
use libfuzzer_sys::fuzz_target;

fn decode_all(record: &[u8]) {
    let _ = NodeRecord::decode(record);
    let _ = PortInfoRecord::decode(record);
    if let Ok(r) = SmInfoRecord::decode(record) {
        let _ = r.sm_info.state();
    }
    let _ = LinkRecord::decode(record);
    let _ = PathRecord::decode(record);
}

fuzz_target!(|data: &[u8]| {
    // The first 4 bytes choose split_records' parameters; the rest is the payload.
    if data.len() >= 4 {
        let attribute_offset = u16::from_be_bytes([data[0], data[1]]);
        let record_len = usize::from(data[2]);
        let count = (data[3] & 0x80 != 0).then_some(usize::from(data[3] & 0x7f));
        if let Ok(records) = split_records(&data[4..], attribute_offset, record_len, count) {
            for r in records {
                assert!(r.len() >= record_len, "a record shorter than record_len");
                decode_all(r);
            }
        }
    }
    decode_all(data);
    if let Ok(view) = MadView::parse(data) {
        for len in [
            NodeRecord::record_len(),
            PortInfoRecord::record_len(),
            SmInfoRecord::record_len(),
            LinkRecord::record_len(),
            PathRecord::record_len(),
        ] {
            if let Ok(records) = records_in_mad(&view, len) {
                for r in records {
                    decode_all(r);
                }
            }
        }
    }
});
