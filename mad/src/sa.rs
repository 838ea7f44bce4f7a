//! Subnet Administration records (IBA 15.2.5) as layout tables, their component-mask bits,
//! and a splitter for payloads that carry several records.
//!
//! Every record is a `wire_struct!` table; records that embed an SMP attribute (NodeInfo,
//! PortInfo, SMInfo) reuse that attribute's codec at its byte offset, so there is one layout
//! per attribute. Component-mask bit N selects the record's N-th field
//! in specification order (reserved fields count): the constants below name them.
//!
//! RMPP: GetTable replies larger than one MAD arrive as an RMPP transfer (IBA 13.6). This
//! module does not reassemble RMPP (nor does the engine); [`split_records`] works on one
//! MAD's payload, or on a payload reassembled elsewhere. Under the simulator an SA reply is
//! always a single MAD, so single-record SubnAdmGet queries are the default in ibscope.

use crate::attr::{NodeDescription, NodeInfo, PortInfo, SmInfo};
use crate::error::DecodeError;
use crate::header::MadStatus;
use crate::smp::{MadView, SA_DATA_OFFSET};
use crate::wire_struct;

wire_struct! {
    /// The key of a NodeRecord (IBA 15.2.5.2): bytes 0-3, then NodeInfo at byte 4 and
    /// NodeDescription at byte 44 (see [`NodeRecord`]).
    pub struct NodeRecordKey (4) {
        pub lid: u16 = 0, 16;
    }
}

/// NodeRecord (IBA 15.2.5.2): 108 bytes, 112 with the padding to 8-byte words.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeRecord {
    pub lid: u16,
    pub node_info: NodeInfo,
    pub node_description: NodeDescription,
}

impl NodeRecord {
    pub const WIRE_LEN: usize = 108;
    const NODE_INFO_AT: usize = 4;
    const NODE_DESCRIPTION_AT: usize = 44;

    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        crate::wire::need(buf, Self::WIRE_LEN, "NodeRecord")?;
        Ok(NodeRecord {
            lid: NodeRecordKey::decode(buf)?.lid,
            node_info: NodeInfo::decode(&buf[Self::NODE_INFO_AT..])?,
            node_description: NodeDescription::decode(&buf[Self::NODE_DESCRIPTION_AT..])?,
        })
    }

    pub fn to_bytes(&self) -> [u8; 108] {
        let mut out = [0u8; 108];
        out[..4].copy_from_slice(&NodeRecordKey { lid: self.lid }.to_bytes());
        out[Self::NODE_INFO_AT..Self::NODE_DESCRIPTION_AT]
            .copy_from_slice(&self.node_info.to_bytes());
        out[Self::NODE_DESCRIPTION_AT..].copy_from_slice(&self.node_description.to_bytes());
        out
    }
}

wire_struct! {
    /// The key of a PortInfoRecord (IBA 15.2.5.3): bytes 0-3, then PortInfo at byte 4.
    pub struct PortInfoRecordKey (4) {
        pub endport_lid: u16 = 0, 16;
        pub port_num: u8 = 16, 8;
        /// Options (IBA 1.3; reserved before).
        pub options: u8 = 24, 8;
    }
}

/// PortInfoRecord (IBA 15.2.5.3): 68 bytes (72 padded).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortInfoRecord {
    pub key: PortInfoRecordKey,
    pub port_info: PortInfo,
}

impl PortInfoRecord {
    pub const WIRE_LEN: usize = 68;

    pub fn decode(buf: &[u8]) -> Result<Self, DecodeError> {
        crate::wire::need(buf, Self::WIRE_LEN, "PortInfoRecord")?;
        Ok(PortInfoRecord {
            key: PortInfoRecordKey::decode(buf)?,
            port_info: PortInfo::decode(&buf[4..])?,
        })
    }

    pub fn to_bytes(&self) -> [u8; 68] {
        let mut out = [0u8; 68];
        out[..4].copy_from_slice(&self.key.to_bytes());
        out[4..].copy_from_slice(&self.port_info.to_bytes());
        out
    }
}

wire_struct! {
    /// SMInfoRecord (IBA 15.2.5.13): 28 bytes (32 padded).
    pub struct SmInfoRecord (28) {
        pub lid: u16 = 0, 16;
        /// SMInfo (24 bytes): decode with [`SmInfoRecord::sm_info`].
        pub sm_info_raw: [u8; 24] = 32, 192;
    }
}

impl SmInfoRecord {
    pub fn sm_info(&self) -> Result<SmInfo, DecodeError> {
        SmInfo::decode(&self.sm_info_raw)
    }
}

wire_struct! {
    /// LinkRecord (IBA 15.2.5.15): one direction of one link, 8 bytes.
    pub struct LinkRecord (8) {
        pub from_lid: u16 = 0, 16;
        pub from_port: u8 = 16, 8;
        pub to_port: u8 = 24, 8;
        pub to_lid: u16 = 32, 16;
    }
}

wire_struct! {
    /// PathRecord (IBA 15.2.5.16): 64 bytes. Selector fields take the values of
    /// [`selector`]; `mtu` and `rate` are the PortInfo/IBA codes.
    pub struct PathRecord (64) {
        /// ServiceID (IBA 1.2; reserved before). Component-mask bits 0 and 1.
        pub service_id: u64 = 0, 64;
        pub dgid: [u8; 16] = 64, 128;
        pub sgid: [u8; 16] = 192, 128;
        pub dlid: u16 = 320, 16;
        pub slid: u16 = 336, 16;
        pub raw_traffic: bool = 352, 1;
        pub flow_label: u32 = 356, 20;
        pub hop_limit: u8 = 376, 8;
        pub traffic_class: u8 = 384, 8;
        pub reversible: bool = 392, 1;
        pub numb_path: u8 = 393, 7;
        pub p_key: u16 = 400, 16;
        pub qos_class: u16 = 416, 12;
        pub sl: u8 = 428, 4;
        pub mtu_selector: u8 = 432, 2;
        pub mtu: u8 = 434, 6;
        pub rate_selector: u8 = 440, 2;
        pub rate: u8 = 442, 6;
        pub packet_life_time_selector: u8 = 448, 2;
        pub packet_life_time: u8 = 450, 6;
        pub preference: u8 = 456, 8;
    }
}

/// PathRecord selector values (IBA 15.2.5.16).
pub mod selector {
    pub const GREATER_THAN: u8 = 0;
    pub const LESS_THAN: u8 = 1;
    pub const EXACTLY: u8 = 2;
    /// "Largest available" for MTU and rate, "smallest available" for packet life time.
    pub const BEST_AVAILABLE: u8 = 3;
}

/// Component-mask bits: bit N selects the record's N-th field (IBA 15.2.5, each record's
/// table; reserved fields have bits too).
pub mod comp_mask {
    pub mod node_record {
        pub const LID: u64 = 1 << 0;
        pub const BASE_VERSION: u64 = 1 << 2;
        pub const CLASS_VERSION: u64 = 1 << 3;
        pub const NODE_TYPE: u64 = 1 << 4;
        pub const NUM_PORTS: u64 = 1 << 5;
        pub const SYSTEM_IMAGE_GUID: u64 = 1 << 6;
        pub const NODE_GUID: u64 = 1 << 7;
        pub const PORT_GUID: u64 = 1 << 8;
        pub const PARTITION_CAP: u64 = 1 << 9;
        pub const DEVICE_ID: u64 = 1 << 10;
        pub const REVISION: u64 = 1 << 11;
        pub const LOCAL_PORT_NUM: u64 = 1 << 12;
        pub const VENDOR_ID: u64 = 1 << 13;
        pub const NODE_DESCRIPTION: u64 = 1 << 14;
    }
    pub mod port_info_record {
        pub const ENDPORT_LID: u64 = 1 << 0;
        pub const PORT_NUM: u64 = 1 << 1;
        pub const OPTIONS: u64 = 1 << 2;
    }
    pub mod sm_info_record {
        pub const LID: u64 = 1 << 0;
        pub const GUID: u64 = 1 << 2;
        pub const SM_KEY: u64 = 1 << 3;
        pub const ACT_COUNT: u64 = 1 << 4;
        pub const PRIORITY: u64 = 1 << 5;
        pub const SM_STATE: u64 = 1 << 6;
    }
    pub mod link_record {
        pub const FROM_LID: u64 = 1 << 0;
        pub const FROM_PORT: u64 = 1 << 1;
        pub const TO_PORT: u64 = 1 << 2;
        pub const TO_LID: u64 = 1 << 3;
    }
    pub mod path_record {
        /// ServiceID is two mask bits (its upper 8 and lower 56 bits): set both.
        pub const SERVICE_ID: u64 = (1 << 0) | (1 << 1);
        pub const DGID: u64 = 1 << 2;
        pub const SGID: u64 = 1 << 3;
        pub const DLID: u64 = 1 << 4;
        pub const SLID: u64 = 1 << 5;
        pub const RAW_TRAFFIC: u64 = 1 << 6;
        pub const FLOW_LABEL: u64 = 1 << 8;
        pub const HOP_LIMIT: u64 = 1 << 9;
        pub const TRAFFIC_CLASS: u64 = 1 << 10;
        pub const REVERSIBLE: u64 = 1 << 11;
        pub const NUMB_PATH: u64 = 1 << 12;
        pub const P_KEY: u64 = 1 << 13;
        pub const QOS_CLASS: u64 = 1 << 14;
        pub const SL: u64 = 1 << 15;
        pub const MTU_SELECTOR: u64 = 1 << 16;
        pub const MTU: u64 = 1 << 17;
        pub const RATE_SELECTOR: u64 = 1 << 18;
        pub const RATE: u64 = 1 << 19;
        pub const PACKET_LIFE_TIME_SELECTOR: u64 = 1 << 20;
        pub const PACKET_LIFE_TIME: u64 = 1 << 21;
        pub const PREFERENCE: u64 = 1 << 22;
    }
}

/// SA class status codes (IBA 15.2.1.2), carried in bits 8-15 of the MAD status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum SaStatus {
    NoResources,
    RequestInvalid,
    NoRecords,
    TooManyRecords,
    InvalidGid,
    InsufficientComponents,
    RequestDenied,
    PrioritySuggested,
    Other(u8),
}

impl SaStatus {
    /// The SA-specific part of a MAD status, if any.
    pub fn from_mad_status(status: MadStatus) -> Option<SaStatus> {
        let code = (status.0 >> 8) as u8;
        Some(match code {
            0 => return None,
            1 => SaStatus::NoResources,
            2 => SaStatus::RequestInvalid,
            3 => SaStatus::NoRecords,
            4 => SaStatus::TooManyRecords,
            5 => SaStatus::InvalidGid,
            6 => SaStatus::InsufficientComponents,
            7 => SaStatus::RequestDenied,
            8 => SaStatus::PrioritySuggested,
            other => SaStatus::Other(other),
        })
    }

    pub fn describe(self) -> &'static str {
        match self {
            SaStatus::NoResources => "the SA has no resources to answer",
            SaStatus::RequestInvalid => "the SA rejected the request as invalid",
            SaStatus::NoRecords => "no record matches",
            SaStatus::TooManyRecords => {
                "more than one record matches (SubnAdmGet wants exactly one)"
            }
            SaStatus::InvalidGid => "a GID in the request is invalid",
            SaStatus::InsufficientComponents => "the component mask selects too few fields",
            SaStatus::RequestDenied => "the SA denied the request",
            SaStatus::PrioritySuggested => "the SA suggests a different priority",
            SaStatus::Other(_) => "unknown SA status",
        }
    }
}

/// Cut an SA payload into records `attribute_offset * 8` bytes apart (IBA 15.2.1.1). Each
/// slice is at least `record_len` bytes. `count` is how many records the sender said it
/// sent (from RMPP PayloadLength); without it every whole record in `payload` is returned.
/// An AttributeOffset of 0 is read as one record (a SubnAdmGetResp carries exactly one).
pub fn split_records(
    payload: &[u8],
    attribute_offset: u16,
    record_len: usize,
    count: Option<usize>,
) -> Result<Vec<&[u8]>, DecodeError> {
    let stride = usize::from(attribute_offset) * 8;
    if stride == 0 {
        crate::wire::need(payload, record_len, "SA record")?;
        return Ok(vec![&payload[..record_len]]);
    }
    if stride < record_len {
        return Err(DecodeError::Truncated {
            what: "SA AttributeOffset shorter than the record",
            need: record_len,
            got: stride,
        });
    }
    let whole = if payload.len() >= record_len {
        (payload.len() - record_len) / stride + 1
    } else {
        0
    };
    let n = match count {
        Some(c) if c > whole => {
            return Err(DecodeError::Truncated {
                what: "SA records",
                need: (c - 1) * stride + record_len,
                got: payload.len(),
            })
        }
        Some(c) => c,
        None => whole,
    };
    Ok((0..n)
        .filter_map(|i| payload.get(i * stride..i * stride + record_len))
        .collect())
}

/// The records of a single-MAD SA response. The RMPP header (bytes 24-35) says whether the
/// MAD is part of a transfer: a multi-segment transfer is refused rather than misread.
pub fn records_in_mad<'a>(
    view: &MadView<'a>,
    record_len: usize,
) -> Result<Vec<&'a [u8]>, DecodeError> {
    let bytes = view.bytes();
    let rmpp_flags = bytes[26];
    // OpenSM marks every GetTable reply Active and leaves segmentation to the kernel's RMPP
    // layer; without one (the simulator's shim) the MAD arrives as sent: RMPPVersion 0,
    // flags 0x01, PayloadLength 0. That is one MAD, not a transfer (captured in attr::golden).
    let rmpp_active = bytes[24] != 0 && rmpp_flags & 0x01 != 0;
    let payload = &bytes[SA_DATA_OFFSET..];
    if !rmpp_active {
        return split_records(payload, view.sa_attribute_offset(), record_len, None);
    }
    // Active RMPP: a lone segment is both First (0x02) and Last (0x04); PayloadLength counts
    // the SA header's 20 bytes after the RMPP header plus the records.
    let first_and_last = rmpp_flags & 0x06 == 0x06;
    if !first_and_last {
        return Err(DecodeError::Truncated {
            what: "SA reply spans several RMPP segments (reassembly is not implemented)",
            need: 2 * crate::header::MAD_SIZE,
            got: crate::header::MAD_SIZE,
        });
    }
    let payload_length = u32::from_be_bytes([bytes[32], bytes[33], bytes[34], bytes[35]]);
    let data_len = (payload_length as usize)
        .saturating_sub(20)
        .min(payload.len());
    let stride = usize::from(view.sa_attribute_offset()) * 8;
    let count = if stride == 0 {
        usize::from(data_len >= record_len)
    } else if data_len >= record_len {
        (data_len - record_len) / stride + 1
    } else {
        0
    };
    split_records(payload, view.sa_attribute_offset(), record_len, Some(count))
}

/// Record sizes: `record_len()` is the record's own length, `padded_len()` the stride the SA
/// uses between records (AttributeOffset, a whole number of 8-byte words).
macro_rules! record_lengths {
    ($($ty:ty),*) => {$(
        impl $ty {
            pub const fn record_len() -> usize {
                Self::WIRE_LEN
            }
            pub const fn padded_len() -> usize {
                Self::WIRE_LEN.div_ceil(8) * 8
            }
            /// AttributeOffset of a reply carrying these records, in 8-byte words.
            pub const fn attribute_offset_words() -> u16 {
                (Self::WIRE_LEN.div_ceil(8)) as u16
            }
        }
    )*};
}
record_lengths!(
    NodeRecord,
    PortInfoRecord,
    SmInfoRecord,
    LinkRecord,
    PathRecord
);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::header::{attr, method};

    /// NodeRecord of LID 2 in examples/fabrics/net as laid out in IBA 15.2.5.2: LID at byte
    /// 0, NodeInfo at byte 4, NodeDescription at byte 44.
    #[test]
    fn golden_node_record() {
        let mut b = [0u8; 112];
        b[0..2].copy_from_slice(&2u16.to_be_bytes());
        b[4] = 1; // BaseVersion
        b[5] = 1; // ClassVersion
        b[6] = 1; // NodeType CA
        b[7] = 2; // NumPorts
        b[8..16].copy_from_slice(&0x0002_c900_0000_0010u64.to_be_bytes()); // SystemImageGUID
        b[16..24].copy_from_slice(&0x0002_c900_0000_0010u64.to_be_bytes()); // NodeGUID
        b[24..32].copy_from_slice(&0x0002_c900_0000_0011u64.to_be_bytes()); // PortGUID
        b[32..34].copy_from_slice(&0xffffu16.to_be_bytes()); // PartitionCap
        b[40] = 1; // LocalPortNum
        b[41..44].copy_from_slice(&[0x00, 0x02, 0xc9]);
        b[44..50].copy_from_slice(b"Hca1 x");
        let r = NodeRecord::decode(&b).unwrap();
        assert_eq!(r.lid, 2);
        let ni = &r.node_info;
        assert_eq!(ni.num_ports, 2);
        assert_eq!(ni.node_guid, 0x0002_c900_0000_0010);
        assert_eq!(ni.port_guid, 0x0002_c900_0000_0011);
        assert_eq!(ni.local_port_num, 1);
        assert_eq!(ni.vendor_id, 0x0002c9);
        assert_eq!(r.node_description.text(), "Hca1 x");
        assert_eq!(&r.to_bytes()[..], &b[..108]);
        assert!(NodeRecord::decode(&b[..107]).is_err());
    }

    #[test]
    fn golden_port_info_record() {
        let mut b = [0u8; 68];
        b[0..2].copy_from_slice(&0x0102u16.to_be_bytes());
        b[2] = 7;
        b[3] = 0;
        b[4 + 16..4 + 18].copy_from_slice(&9u16.to_be_bytes()); // PortInfo.LID
        b[4 + 32] = 0x74; // speed supported 7, state Active
        let r = PortInfoRecord::decode(&b).unwrap();
        assert_eq!((r.key.endport_lid, r.key.port_num), (0x0102, 7));
        let pi = &r.port_info;
        assert_eq!(pi.lid, 9);
        assert_eq!(pi.port_state, 4);
        assert_eq!(r.to_bytes(), b);
    }

    #[test]
    fn golden_sm_info_record_and_link_record() {
        let mut b = [0u8; 28];
        b[0..2].copy_from_slice(&1u16.to_be_bytes());
        b[4..12].copy_from_slice(&0x0002_c900_0000_0101u64.to_be_bytes());
        b[20..24].copy_from_slice(&0x0000_0123u32.to_be_bytes()); // ActCount
        b[24] = 0xf3; // priority 15, state Master
        let r = SmInfoRecord::decode(&b).unwrap();
        assert_eq!(r.lid, 1);
        let s = r.sm_info().unwrap();
        assert_eq!(s.guid, 0x0002_c900_0000_0101);
        assert_eq!(s.act_count, 0x123);
        assert_eq!((s.priority, s.sm_state), (15, 3));
        assert_eq!(r.to_bytes(), b);

        let l = LinkRecord::decode(&[0x00, 0x05, 3, 1, 0x00, 0x07, 0, 0]).unwrap();
        assert_eq!((l.from_lid, l.from_port, l.to_port, l.to_lid), (5, 3, 1, 7));
        assert_eq!(l.to_bytes(), [0x00, 0x05, 3, 1, 0x00, 0x07, 0, 0]);
    }

    /// Every PathRecord field at its IBA 15.2.5.16 position, each with a distinct value.
    #[test]
    fn golden_path_record() {
        let mut dgid = [0u8; 16];
        dgid[..8].copy_from_slice(&0xfe80_0000_0000_0000u64.to_be_bytes());
        dgid[8..].copy_from_slice(&0x0002_c900_0000_0021u64.to_be_bytes());
        let mut sgid = dgid;
        sgid[15] = 0x11;
        let p = PathRecord {
            service_id: 0x0102_0304_0506_0708,
            dgid,
            sgid,
            dlid: 0x0021,
            slid: 0x0011,
            raw_traffic: true,
            flow_label: 0xabcde,
            hop_limit: 0x40,
            traffic_class: 0x5a,
            reversible: true,
            numb_path: 0x7f,
            p_key: 0xffff,
            qos_class: 0x123,
            sl: 0x9,
            mtu_selector: selector::EXACTLY,
            mtu: 4,
            rate_selector: selector::EXACTLY,
            rate: 3,
            packet_life_time_selector: selector::EXACTLY,
            packet_life_time: 0x12,
            preference: 0x77,
        };
        let b = p.to_bytes();
        assert_eq!(&b[0..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[8..24], &dgid);
        assert_eq!(&b[24..40], &sgid);
        assert_eq!(&b[40..44], &[0x00, 0x21, 0x00, 0x11]);
        // RawTraffic(1) Reserved(3) FlowLabel(20) HopLimit(8)
        assert_eq!(&b[44..48], &[0x8a, 0xbc, 0xde, 0x40]);
        assert_eq!(b[48], 0x5a);
        assert_eq!(b[49], 0xff); // Reversible | NumbPath 127
        assert_eq!(&b[50..52], &[0xff, 0xff]);
        assert_eq!(&b[52..54], &[0x12, 0x39]); // QoSClass 0x123 | SL 9
        assert_eq!(b[54], 0x84); // selector 2, MTU 4 (2048)
        assert_eq!(b[55], 0x83); // selector 2, rate 3 (10 Gb/s)
        assert_eq!(b[56], 0x92); // selector 2, life 0x12
        assert_eq!(b[57], 0x77);
        assert_eq!(&b[58..64], &[0; 6]);
        assert_eq!(PathRecord::decode(&b).unwrap(), p);
        assert!(PathRecord::decode(&b[..63]).is_err());
    }

    #[test]
    fn component_masks_match_field_order() {
        use comp_mask::path_record as pr;
        // The combination saquery sends for --src-to-dst with LIDs (libibmad
        // IB_PR_COMPMASK_DLID | SLID | NUMBPATH would be 0x1030).
        assert_eq!(pr::DLID | pr::SLID | pr::NUMB_PATH, 0x1030);
        assert_eq!(pr::DGID | pr::SGID, 0xc);
        assert_eq!(pr::PREFERENCE, 0x40_0000);
        assert_eq!(comp_mask::node_record::NODE_DESCRIPTION, 0x4000);
        assert_eq!(comp_mask::sm_info_record::SM_STATE, 0x40);
    }

    #[test]
    fn split_by_attribute_offset() {
        let mut payload = [0u8; 200];
        for i in 0..3 {
            payload[i * 72] = i as u8 + 1;
        }
        // PortInfoRecord: 68 bytes, offset 9 words (72 bytes): two whole ones fit in 200.
        let recs = split_records(&payload, 9, 68, None).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!((recs[0][0], recs[1][0]), (1, 2));
        assert!(recs.iter().all(|r| r.len() == 68));
        assert_eq!(split_records(&payload, 9, 68, Some(1)).unwrap().len(), 1);
        assert!(split_records(&payload, 9, 68, Some(3)).is_err());
        // An offset shorter than the record would overlap records: refused.
        assert!(split_records(&payload, 8, 68, None).is_err());
        // Offset 0: one record.
        assert_eq!(split_records(&payload, 0, 108, None).unwrap().len(), 1);
        assert!(split_records(&payload[..100], 0, 108, None).is_err());
        assert!(split_records(&[], 14, 108, None).unwrap().is_empty());
        // Huge offsets neither panic nor overflow.
        assert_eq!(split_records(&payload, u16::MAX, 8, None).unwrap().len(), 1);
    }

    #[test]
    fn records_in_single_and_rmpp_mads() {
        let mut mad = crate::smp::build_sa(method::GET_RESP, attr::SA_NODE_RECORD, 1, 0, &[]);
        mad[3] = 0x81;
        mad[44..46].copy_from_slice(&14u16.to_be_bytes());
        let v = MadView::parse(&mad).unwrap();
        assert_eq!(records_in_mad(&v, 108).unwrap().len(), 1);
        // A lone RMPP segment holding two 8-byte LinkRecords.
        let mut mad = crate::smp::build_sa(0x92, attr::SA_LINK_RECORD, 0, 0, &[]);
        mad[44..46].copy_from_slice(&1u16.to_be_bytes());
        mad[24] = 1; // RMPP version
        mad[25] = 1; // DATA
        mad[26] = 0x07; // active, first, last
        mad[32..36].copy_from_slice(&(20u32 + 16).to_be_bytes());
        let v = MadView::parse(&mad).unwrap();
        assert_eq!(records_in_mad(&v, 8).unwrap().len(), 2);
        // First of several segments: refused.
        mad[26] = 0x03;
        let v = MadView::parse(&mad).unwrap();
        assert!(records_in_mad(&v, 8).is_err());
    }

    #[test]
    fn sa_status_codes() {
        assert_eq!(
            SaStatus::from_mad_status(MadStatus(0x0300)),
            Some(SaStatus::NoRecords)
        );
        assert_eq!(SaStatus::from_mad_status(MadStatus(0x001c)), None);
    }
}
