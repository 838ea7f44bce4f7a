//! Subnet Administration: the SA MAD framing with its RMPP header (IBA 15.2.1.1, 13.6.2.1),
//! the records (IBA 15.2.5) as layout tables, their component-mask bits, and a splitter for
//! payloads that carry several records.
//!
//! Every record is a `wire_struct!` table; records that embed an SMP attribute (NodeInfo,
//! PortInfo, SMInfo) nest that attribute's codec at its byte offset, so there is one layout
//! per attribute. Component-mask bit N selects the record's N-th field
//! in specification order (reserved fields count): the constants below name them.
//!
//! RMPP: GetTable replies larger than one MAD arrive as an RMPP transfer (IBA 13.6). The
//! kernel reassembles it for an agent registered for RMPP (the transport registers the SA
//! class so, as libibmad does) and hands over one buffer: the first segment whole, then the
//! data of each further segment. [`table`] reads such a reply (or a single MAD), and says
//! how many records the SA announced and whether a transport without RMPP (the simulator's
//! shim, which cuts every reply to one MAD) may have cut the table.

use crate::attr::{NodeDescription, NodeInfo, PortInfo, SmInfo};
use crate::attribute::{gsi, Class, SubnAdm};
use crate::error::DecodeError;
use crate::header::{class, MadHeader, MadStatus, MAD_SIZE};
use crate::smp::{put_region, MadView};
use crate::umad::Dest;
use crate::wire::{Region, Slot};
use crate::wire_struct;

wire_struct! {
    /// The RMPP header (IBA 13.6.2.1), bytes 24-35 of a MAD of a class that uses RMPP (the
    /// SA's): whether the MAD is one segment of a larger transfer.
    pub struct RmppHeader (12) {
        pub rmpp_version: u8 = 0, 8, "RMPPVersion";
        /// 1 DATA, 2 ACK, 3 STOP, 4 ABORT.
        pub rmpp_type: u8 = 8, 8, "RMPPType";
        pub r_resp_time: u8 = 16, 5, "RRespTime";
        /// See [`rmpp_flags`].
        pub rmpp_flags: u8 = 21, 3, "RMPPFlags";
        pub rmpp_status: u8 = 24, 8, "RMPPStatus";
        /// SegmentNumber in a DATA segment.
        pub data1: u32 = 32, 32, "Data1";
        /// PayloadLength in a DATA segment (first and last), NewWindowLast in an ACK.
        pub data2: u32 = 64, 32, "Data2";
    }
}

/// RMPPFlags bits (IBA 13.6.2.1).
pub mod rmpp_flags {
    pub const ACTIVE: u8 = 1 << 0;
    pub const FIRST: u8 = 1 << 1;
    pub const LAST: u8 = 1 << 2;
}

wire_struct! {
    /// The SA fields after the common header (IBA 15.2.1.1), in MAD bit numbering.
    pub struct SaFrame (256) {
        pub rmpp: RmppHeader = 192, 96, "RMPPHeader";
        pub sm_key: u64 = 288, 64, "SM_Key";
        /// Record stride of a reply, in 8-byte words.
        pub attribute_offset: u16 = 352, 16, "AttributeOffset";
        /// Which fields of the record template a query matches on (see [`comp_mask`]).
        pub component_mask: u64 = 384, 64, "ComponentMask";
        /// The record(s) (200 bytes).
        pub data: Region = 448, 1600, "SubnAdminData";
    }
}

/// What an RMPP PayloadLength counts besides the records: the SA header after the RMPP
/// header (SM_Key to ComponentMask, 20 bytes).
const SA_HEADER_AFTER_RMPP: usize =
    SaFrame::data.spec.bytes().start - SaFrame::rmpp.spec.bytes().end;

/// Build an SA request: `header`, then `frame`'s fields (SM_Key, ComponentMask), then
/// `record` (the template, at most 200 bytes) as the data.
pub fn build_sa(header: &MadHeader, frame: &SaFrame, record: &[u8]) -> [u8; MAD_SIZE] {
    let mut mad = [0u8; MAD_SIZE];
    // Both layouts fit a MAD and every value fits its field: neither write can fail.
    let _ = header.encode_into(&mut mad);
    let _ = frame.write_fields(&mut mad);
    put_region(&mut mad, &SaFrame::data, record);
    mad
}

/// The SA class: requests carry the SA header (no RMPP) and go to the SM's LID on QP1.
impl Class for SubnAdm {
    type Target = u16;
    const PAYLOAD: Slot<Region> = SaFrame::data;
    fn frame(
        sm_lid: &u16,
        method: u8,
        attribute_id: u16,
        modifier: u32,
        payload: &[u8],
    ) -> ([u8; MAD_SIZE], Dest) {
        let header = MadHeader::request(class::SUBN_ADM, method, attribute_id, modifier);
        (
            build_sa(&header, &SaFrame::default(), payload),
            gsi(*sm_lid),
        )
    }
}

/// The SA parts of a MAD (parse checked that all 256 bytes are there).
impl<'a> MadView<'a> {
    pub fn sa_data(&self) -> &'a [u8] {
        self.region(&SaFrame::data)
    }
    /// SA AttributeOffset: record size in 8-byte words (IBA 15.2.1.1).
    pub fn sa_attribute_offset(&self) -> u16 {
        SaFrame::attribute_offset.read(self.bytes()).unwrap_or(0)
    }
}

wire_struct! {
    /// NodeRecord (IBA 15.2.5.2): 108 bytes, 112 with the padding to 8-byte words.
    pub struct NodeRecord (108) attribute(SubnAdm, 0x0011, "NodeRecord") {
        pub lid: u16 = 0, 16, "LID";
        pub node_info: NodeInfo = 32, 320, "NodeInfo";
        pub node_description: NodeDescription = 352, 512, "NodeDescription";
    }
}

wire_struct! {
    /// PortInfoRecord (IBA 15.2.5.3): 68 bytes (72 padded).
    pub struct PortInfoRecord (68) attribute(SubnAdm, 0x0012, "PortInfoRecord") {
        pub endport_lid: u16 = 0, 16, "EndportLID";
        pub port_num: u8 = 16, 8, "PortNum";
        /// Options (IBA 1.3; reserved before).
        pub options: u8 = 24, 8, "Options";
        pub port_info: PortInfo = 32, 512, "PortInfo";
    }
}

wire_struct! {
    /// SMInfoRecord (IBA 15.2.5.13): 28 bytes (32 padded).
    pub struct SmInfoRecord (28) attribute(SubnAdm, 0x0018, "SMInfoRecord") {
        pub lid: u16 = 0, 16, "LID";
        pub sm_info: SmInfo = 32, 192, "SMInfo";
    }
}

wire_struct! {
    /// LinkRecord (IBA 15.2.5.15): one direction of one link, 8 bytes.
    pub struct LinkRecord (8) attribute(SubnAdm, 0x0020, "LinkRecord") {
        pub from_lid: u16 = 0, 16, "FromLID";
        pub from_port: u8 = 16, 8, "FromPort";
        pub to_port: u8 = 24, 8, "ToPort";
        pub to_lid: u16 = 32, 16, "ToLID";
    }
}

wire_struct! {
    /// PathRecord (IBA 15.2.5.16): 64 bytes. Selector fields take the values of
    /// [`selector`]; `mtu` and `rate` are the PortInfo/IBA codes.
    pub struct PathRecord (64) attribute(SubnAdm, 0x0035, "PathRecord") {
        /// ServiceID (IBA 1.2; reserved before). Component-mask bits 0 and 1.
        pub service_id: u64 = 0, 64, "ServiceID";
        pub dgid: [u8; 16] = 64, 128, "DGID";
        pub sgid: [u8; 16] = 192, 128, "SGID";
        pub dlid: u16 = 320, 16, "DLID";
        pub slid: u16 = 336, 16, "SLID";
        pub raw_traffic: bool = 352, 1, "RawTraffic";
        pub flow_label: u32 = 356, 20, "FlowLabel";
        pub hop_limit: u8 = 376, 8, "HopLimit";
        pub traffic_class: u8 = 384, 8, "TClass";
        pub reversible: bool = 392, 1, "Reversible";
        pub numb_path: u8 = 393, 7, "NumbPath";
        pub p_key: u16 = 400, 16, "P_Key";
        pub qos_class: u16 = 416, 12, "QoSClass";
        pub sl: u8 = 428, 4, "SL";
        pub mtu_selector: u8 = 432, 2, "MTUSelector";
        pub mtu: u8 = 434, 6, "MTU";
        pub rate_selector: u8 = 440, 2, "RateSelector";
        pub rate: u8 = 442, 6, "Rate";
        pub packet_life_time_selector: u8 = 448, 2, "PacketLifeTimeSelector";
        pub packet_life_time: u8 = 450, 6, "PacketLifeTime";
        pub preference: u8 = 456, 8, "Preference";
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

crate::coded_enum! {
    /// SA class status codes (IBA 15.2.1.2), carried in bits 8-15 of the MAD status; the
    /// name says what the code means to the person who asked.
    pub enum SaStatus: u8 {
        NoResources = 1, "the SA has no resources to answer", "no-resources";
        RequestInvalid = 2, "the SA rejected the request as invalid", "invalid";
        NoRecords = 3, "no record matches", "no-records";
        TooManyRecords = 4, "more than one record matches (SubnAdmGet wants exactly one)",
            "too-many-records";
        InvalidGid = 5, "a GID in the request is invalid", "invalid-gid";
        InsufficientComponents = 6, "the component mask selects too few fields",
            "insufficient-components";
        RequestDenied = 7, "the SA denied the request", "denied";
        PrioritySuggested = 8, "the SA suggests a different priority", "priority-suggested";
    }
}

impl SaStatus {
    /// The SA-specific part of a MAD status, if any.
    pub fn from_mad_status(status: MadStatus) -> Option<SaStatus> {
        match (status.0 >> 8) as u8 {
            0 => None,
            code => Some(SaStatus::from_code(code)),
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            SaStatus::Unknown(_) => "unknown SA status",
            known => known.name(),
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

/// The records of a single-MAD SA response. The RMPP header says whether the MAD is part of
/// a transfer: a multi-segment transfer is refused rather than misread.
pub fn records_in_mad<'a>(
    view: &MadView<'a>,
    record_len: usize,
) -> Result<Vec<&'a [u8]>, DecodeError> {
    let bytes = view.bytes();
    let frame = SaFrame::decode(bytes)?;
    let payload = SaFrame::data.bytes(bytes)?;
    let rmpp = &frame.rmpp;
    // OpenSM marks every GetTable reply Active and leaves segmentation to the kernel's RMPP
    // layer; without one (the simulator's shim) the MAD arrives as sent: RMPPVersion 0,
    // flags Active, PayloadLength 0. That is one MAD, not a transfer (captured in
    // attr::golden).
    let rmpp_active = rmpp.rmpp_version != 0 && rmpp.rmpp_flags & rmpp_flags::ACTIVE != 0;
    if !rmpp_active {
        return split_records(payload, frame.attribute_offset, record_len, None);
    }
    // Active RMPP: a lone segment is both First and Last; PayloadLength counts the SA
    // header after the RMPP header plus the records.
    let first_and_last = rmpp_flags::FIRST | rmpp_flags::LAST;
    if rmpp.rmpp_flags & first_and_last != first_and_last {
        return Err(DecodeError::Truncated {
            what: "SA reply spans several RMPP segments (reassembly is not implemented)",
            need: 2 * MAD_SIZE,
            got: MAD_SIZE,
        });
    }
    let data_len = (rmpp.data2 as usize)
        .saturating_sub(SA_HEADER_AFTER_RMPP)
        .min(payload.len());
    let stride = usize::from(frame.attribute_offset) * 8;
    let count = if stride == 0 {
        usize::from(data_len >= record_len)
    } else if data_len >= record_len {
        (data_len - record_len) / stride + 1
    } else {
        0
    };
    split_records(payload, frame.attribute_offset, record_len, Some(count))
}

/// Bytes of SA data each RMPP segment carries (IBA 15.2.1.1: a MAD less its 56 bytes of
/// headers), and the RMPP payload of a segment: that data and the SA header after the RMPP
/// header, which every segment repeats. The kernel's RMPP sender counts PayloadLength in
/// these 220-byte units (mad_rmpp.c), OpenSM's own sender likewise for a single segment.
const SEGMENT_DATA: usize = MAD_SIZE - 56;
const SEGMENT_PAYLOAD: usize = SEGMENT_DATA + SA_HEADER_AFTER_RMPP;

/// The SA data bytes an RMPP transfer carries, from the first segment's PayloadLength:
/// each of its `n` segments adds the repeated 20-byte SA header to the count, so
/// PayloadLength = data + 20 n with n = ceil(PayloadLength / 220).
pub fn rmpp_data_len(payload_length: u32) -> usize {
    let paylen = payload_length as usize;
    let segments = paylen.div_ceil(SEGMENT_PAYLOAD);
    paylen.saturating_sub(segments * SA_HEADER_AFTER_RMPP)
}

/// The records of a SubnAdmGetTable reply, as [`table`] found them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table<'a> {
    /// Each record's bytes (`record_len` of them), in the SA's order.
    pub records: Vec<&'a [u8]>,
    /// How many records the SA says the table holds: from the RMPP header's PayloadLength
    /// of the first segment; `None` when the reply carries no RMPP header (a single MAD
    /// sent without RMPP, as under the simulator).
    pub announced: Option<usize>,
    /// The reply is one whole MAD without RMPP: a transport that does not reassemble RMPP
    /// cuts a longer table there, so this many records may be only the start of it.
    pub maybe_cut: bool,
}

impl Table<'_> {
    /// The SA announced more records than arrived.
    pub fn is_short(&self) -> bool {
        self.announced.is_some_and(|m| m > self.records.len())
    }
}

/// Read a SubnAdmGetTable reply: `message` is the reply as delivered (one MAD, possibly
/// shorter than 256 bytes when the sender sent less, or a kernel-reassembled RMPP transfer:
/// the first MAD whole, then each further segment's data). Records start at byte 56 and
/// lie AttributeOffset x 8 bytes apart, as saquery reads them (ibdiag_sa.c: `(len - 56) /
/// (offset << 3)` records); an AttributeOffset of 0 means no record.
pub fn table(message: &[u8], record_len: usize) -> Result<Table<'_>, DecodeError> {
    let mut first = [0u8; MAD_SIZE];
    let head = message.len().min(MAD_SIZE);
    first[..head].copy_from_slice(&message[..head]);
    crate::wire::need(message, SaFrame::data.spec.bytes().start, "SA reply")?;
    let frame = SaFrame::decode(&first)?;
    let rmpp = &frame.rmpp;
    let active = rmpp.rmpp_version != 0 && rmpp.rmpp_flags & rmpp_flags::ACTIVE != 0;
    if active && rmpp.rmpp_flags & rmpp_flags::FIRST == 0 {
        return Err(DecodeError::Truncated {
            what: "SA reply: an RMPP segment other than the first (not reassembled)",
            need: 2 * MAD_SIZE,
            got: message.len(),
        });
    }
    let stride = usize::from(frame.attribute_offset) * 8;
    let data = &message[SaFrame::data.spec.bytes().start..];
    let records = if stride == 0 {
        Vec::new()
    } else {
        split_records(data, frame.attribute_offset, record_len, None)?
    };
    let announced = match (active, stride) {
        (true, 0) => Some(0),
        (true, _) if rmpp.data2 != 0 => Some(rmpp_data_len(rmpp.data2) / stride),
        _ => None,
    };
    Ok(Table {
        maybe_cut: !active && message.len() >= MAD_SIZE && !records.is_empty(),
        records,
        announced,
    })
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
    use crate::attribute::Attribute;
    use crate::header::{class, method};
    use crate::wire::FieldValue;

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
        // Walked by its table: the nested NodeInfo is a structure of its own rows.
        let Some(FieldValue::Struct(node_info)) = r.field("NodeInfo") else {
            panic!("NodeInfo is not a nested structure");
        };
        let guid = node_info.iter().find(|(spec, _)| spec.name == "Guid");
        assert_eq!(
            guid.map(|(_, v)| v.as_u64()),
            Some(Some(0x0002_c900_0000_0010))
        );
        assert_eq!(r.field("LID").and_then(|v| v.as_u64()), Some(2));
        let names: Vec<&str> = NodeRecord::FIELDS.iter().map(|f| f.name).collect();
        assert_eq!(names, ["LID", "NodeInfo", "NodeDescription"]);
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
        assert_eq!((r.endport_lid, r.port_num), (0x0102, 7));
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
        let s = &r.sm_info;
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

    /// A GetResp MAD of class SA with `frame` and no records yet.
    fn sa_reply(attribute_id: u16, frame: &SaFrame) -> [u8; MAD_SIZE] {
        let mut header = MadHeader::request(class::SUBN_ADM, method::GET, attribute_id, 0);
        header.response = true;
        build_sa(&header, frame, &[])
    }

    #[test]
    fn records_in_single_and_rmpp_mads() {
        let single = SaFrame {
            attribute_offset: 14,
            ..Default::default()
        };
        let mad = sa_reply(NodeRecord::ID, &single);
        let v = MadView::parse(&mad).unwrap();
        assert_eq!(records_in_mad(&v, 108).unwrap().len(), 1);
        // A lone RMPP segment holding two 8-byte LinkRecords.
        let mut lone = SaFrame {
            rmpp: RmppHeader {
                rmpp_version: 1,
                rmpp_type: 1, // DATA
                rmpp_flags: rmpp_flags::ACTIVE | rmpp_flags::FIRST | rmpp_flags::LAST,
                data2: 20 + 16,
                ..Default::default()
            },
            attribute_offset: 1,
            ..Default::default()
        };
        let mad = sa_reply(LinkRecord::ID, &lone);
        let v = MadView::parse(&mad).unwrap();
        assert_eq!(records_in_mad(&v, 8).unwrap().len(), 2);
        // First of several segments: refused.
        lone.rmpp.rmpp_flags = rmpp_flags::ACTIVE | rmpp_flags::FIRST;
        let mad = sa_reply(LinkRecord::ID, &lone);
        let v = MadView::parse(&mad).unwrap();
        assert!(records_in_mad(&v, 8).is_err());
    }

    /// PayloadLength as the kernel's RMPP sender writes it in the first segment (mad_rmpp.c:
    /// segments x 220 less the padding of the last) for every data length, read back.
    #[test]
    fn rmpp_payload_length_counts_the_sa_header_once_per_segment() {
        for data in 1..3000usize {
            let segments = data.div_ceil(200);
            let paylen = segments * 220 - (segments * 200 - data);
            assert_eq!(rmpp_data_len(paylen as u32), data, "{data} bytes of data");
        }
        // OpenSM's own single-segment sender: data + 20.
        assert_eq!(rmpp_data_len(112 + 20), 112);
        assert_eq!(rmpp_data_len(0), 0);
    }

    /// A GetTable reply carrying `records` records of `stride` bytes (each starting with its
    /// index + 1), with `rmpp` in its first MAD, delivered in `len` bytes (None: all of it).
    fn table_reply(rmpp: RmppHeader, stride: usize, records: usize, len: Option<usize>) -> Vec<u8> {
        let mut header = MadHeader::request(class::SUBN_ADM, method::GET_TABLE, NodeRecord::ID, 0);
        header.response = true;
        let frame = SaFrame {
            rmpp,
            attribute_offset: (stride / 8) as u16,
            ..Default::default()
        };
        let first = build_sa(&header, &frame, &[]);
        let mut message = first[..56].to_vec();
        for i in 0..records {
            let mut r = vec![0u8; stride];
            r[0] = i as u8 + 1;
            message.extend_from_slice(&r);
        }
        message.resize(len.unwrap_or(message.len()).max(56), 0);
        message
    }

    fn first_segment(paylen: usize, last: bool) -> RmppHeader {
        RmppHeader {
            rmpp_version: 1,
            rmpp_type: 1,
            rmpp_flags: rmpp_flags::ACTIVE
                | rmpp_flags::FIRST
                | if last { rmpp_flags::LAST } else { 0 },
            data1: 1,
            data2: paylen as u32,
            ..Default::default()
        }
    }

    #[test]
    fn a_reassembled_table_is_read_whole() {
        // Five NodeRecords (112-byte stride): 560 bytes of data in three segments, the
        // kernel's buffer 56 + 560 bytes long, PayloadLength 560 + 3 x 20.
        let message = table_reply(first_segment(620, false), 112, 5, None);
        assert_eq!(message.len(), 616);
        let t = table(&message, NodeRecord::WIRE_LEN).unwrap();
        assert_eq!(t.records.len(), 5);
        assert_eq!(t.announced, Some(5));
        assert!(!t.maybe_cut && !t.is_short());
        let firsts: Vec<u8> = t.records.iter().map(|r| r[0]).collect();
        assert_eq!(firsts, [1, 2, 3, 4, 5]);
        assert!(t.records.iter().all(|r| r.len() == NodeRecord::WIRE_LEN));
        // A transfer that announced more than arrived is short.
        let cut = &message[..56 + 3 * 112];
        let t = table(cut, NodeRecord::WIRE_LEN).unwrap();
        assert_eq!((t.records.len(), t.announced), (3, Some(5)));
        assert!(t.is_short());
        // A later segment alone is not a table.
        let mut middle = message.clone();
        middle[26] = rmpp_flags::ACTIVE;
        assert!(table(&middle, NodeRecord::WIRE_LEN).is_err());
    }

    #[test]
    fn a_lone_segment_and_an_empty_table() {
        // Two LinkRecords in one segment the kernel cut to its payload: 56 + 16 bytes.
        let message = table_reply(first_segment(16 + 20, true), 8, 2, None);
        let t = table(&message, LinkRecord::WIRE_LEN).unwrap();
        assert_eq!(
            (t.records.len(), t.announced, t.maybe_cut),
            (2, Some(2), false)
        );
        // No record: AttributeOffset 0, as OpenSM answers an empty GetTable.
        let empty = table_reply(first_segment(20, true), 0, 0, None);
        let t = table(&empty, LinkRecord::WIRE_LEN).unwrap();
        assert_eq!((t.records.len(), t.announced), (0, Some(0)));
        assert!(table(&empty[..40], LinkRecord::WIRE_LEN).is_err());
    }

    /// Under the simulator OpenSM's reply goes out as one MAD whatever its size, RMPPVersion
    /// 0 and only the Active flag (attr::golden captures one): the shim delivers the bytes
    /// OpenSM sent, cut at 256.
    #[test]
    fn a_single_mad_without_rmpp_may_be_cut() {
        let simulator = RmppHeader {
            rmpp_flags: rmpp_flags::ACTIVE,
            ..Default::default()
        };
        // Eight LinkRecords: 56 + 64 bytes, the whole table.
        let whole = table_reply(simulator.clone(), 8, 8, None);
        let t = table(&whole, LinkRecord::WIRE_LEN).unwrap();
        assert_eq!(
            (t.records.len(), t.announced, t.maybe_cut),
            (8, None, false)
        );
        // Sixteen PathRecords cut at 256 bytes: the three whole ones that fit, as saquery
        // lists them, and a reply that may be cut.
        let cut = table_reply(simulator, 64, 16, Some(MAD_SIZE));
        let t = table(&cut, PathRecord::WIRE_LEN).unwrap();
        assert_eq!((t.records.len(), t.announced, t.maybe_cut), (3, None, true));
        assert_eq!(t.records[2][0], 3);
    }

    /// The SA framing at its IBA 15.2.1.1 / 13.6.2.1 positions, bytes written by hand:
    /// RMPPVersion 24, RMPPType 25, RRespTime (5 bits) and RMPPFlags (3 bits) 26, RMPPStatus
    /// 27, Data1 28-31, Data2 32-35, SM_Key 36-43, AttributeOffset 44-45, reserved 46-47,
    /// ComponentMask 48-55, records from 56.
    #[test]
    fn golden_sa_frame() {
        let frame = SaFrame {
            rmpp: RmppHeader {
                rmpp_version: 1,
                rmpp_type: 2,
                r_resp_time: 0x1f,
                rmpp_flags: 0x5,
                rmpp_status: 0x76,
                data1: 0x0102_0304,
                data2: 0x0506_0708,
            },
            sm_key: 0x1112_1314_1516_1718,
            attribute_offset: 0x2122,
            component_mask: 0x3132_3334_3536_3738,
            data: Region,
        };
        let header = MadHeader::request(class::SUBN_ADM, method::GET_TABLE, PathRecord::ID, 0);
        let mad = build_sa(&header, &frame, &[0xaa, 0xbb]);
        assert_eq!(&mad[0..4], &[0x01, 0x03, 0x02, 0x12]);
        assert_eq!(&mad[16..18], &[0x00, 0x35]);
        assert_eq!(&mad[24..36], &[1, 2, 0xfd, 0x76, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(
            &mad[36..44],
            &[0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]
        );
        assert_eq!(&mad[44..48], &[0x21, 0x22, 0, 0]);
        assert_eq!(
            &mad[48..56],
            &[0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38]
        );
        assert_eq!(&mad[56..58], &[0xaa, 0xbb]);
        assert_eq!(SaFrame::decode(&mad).unwrap(), frame);
        assert_eq!(MadView::parse(&mad).unwrap().sa_attribute_offset(), 0x2122);
        assert_eq!(SA_HEADER_AFTER_RMPP, 20);
    }

    #[test]
    fn sa_status_codes() {
        assert_eq!(
            SaStatus::from_mad_status(MadStatus(0x0300)),
            Some(SaStatus::NoRecords)
        );
        assert_eq!(SaStatus::from_mad_status(MadStatus(0x001c)), None);
        let unknown = SaStatus::from_mad_status(MadStatus(0x2a00)).unwrap();
        assert_eq!(unknown, SaStatus::Unknown(0x2a));
        assert_eq!(unknown.describe(), "unknown SA status");
        assert_eq!(SaStatus::NoRecords.describe(), "no record matches");
    }
}
