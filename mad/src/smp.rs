//! Framing of whole 256-byte MADs: LID-routed and directed-route SMPs (IBA 14.2.1) and
//! plain GMPs such as PerfMgt's (IBA 16.1.1), as layout tables in MAD bit numbering; SA
//! framing is in [`crate::sa`]. Attribute payloads are separate codecs.

use crate::error::DecodeError;
use crate::header::{class, MadHeader, MadStatus, MAD_SIZE};
use crate::wire::{self, Region, Slot};
use crate::wire_struct;

/// Directed-route paths have at most 63 hops (64 bytes, index 0 unused).
pub const MAX_DR_HOPS: usize = 63;
/// The permissive LID: DrSLID/DrDLID of a route directed end to end, and the destination of
/// a directed-route SMP.
pub const PERMISSIVE_LID: u16 = 0xffff;

wire_struct! {
    /// The SMP fields around the common header (IBA 14.2.1.1 LID routed, 14.2.1.2 directed
    /// route), in MAD bit numbering. A directed-route SMP redefines the header's Status and
    /// ClassSpecific words: D, HopPointer and HopCount overlay [`MadHeader`]'s rows there,
    /// so a MAD is framed header first, then this with `write_fields`. In a LID-routed SMP the
    /// directed-route rows are reserved (zero).
    pub struct SmpFrame (256) {
        /// Direction: 0 on the way out (requests), 1 on the way back (replies).
        pub direction: bool = 32, 1, "D";
        pub hop_pointer: u8 = 48, 8, "HopPointer";
        pub hop_count: u8 = 56, 8, "HopCount";
        pub m_key: u64 = 192, 64, "M_Key";
        pub dr_slid: u16 = 256, 16, "DrSLID";
        pub dr_dlid: u16 = 272, 16, "DrDLID";
        /// The attribute (64 bytes).
        pub data: Region = 512, 512, "Data";
        /// Egress port per hop, index 0 unused.
        pub initial_path: Region = 1024, 512, "InitialPath";
        /// Ingress port per hop, filled on the way back.
        pub return_path: Region = 1536, 512, "ReturnPath";
    }
}

wire_struct! {
    /// A plain GMP after the common header (PerfMgt, IBA 16.1.1): 40 reserved bytes, then
    /// the attribute.
    pub struct GmpFrame (256) {
        /// The attribute (192 bytes).
        pub data: Region = 512, 1536, "Data";
    }
}

/// A directed route: the egress port at each hop from the local port. The empty path means
/// the local node itself.
///
/// Kept inline (no heap): discovery builds and clones one per MAD, and at 100k MADs the
/// allocations showed in profiles.
#[derive(Clone)]
pub struct DrPath {
    len: u8,
    /// Only `..len` is meaningful; the rest stays zero.
    hops: [u8; MAX_DR_HOPS],
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("directed route has {0} hops; at most 63 are allowed")]
    TooLong(usize),
    #[error("directed route element {0:?} is not a port number (0-255)")]
    BadElement(String),
}

impl DrPath {
    pub fn local() -> Self {
        DrPath {
            len: 0,
            hops: [0; MAX_DR_HOPS],
        }
    }
    pub fn from_hops(hops: &[u8]) -> Result<Self, PathError> {
        if hops.len() > MAX_DR_HOPS {
            return Err(PathError::TooLong(hops.len()));
        }
        let mut path = DrPath::local();
        path.hops[..hops.len()].copy_from_slice(hops);
        path.len = hops.len() as u8;
        Ok(path)
    }
    pub fn hops(&self) -> &[u8] {
        &self.hops[..usize::from(self.len)]
    }
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// This path extended by one egress port.
    pub fn child(&self, port: u8) -> Result<Self, PathError> {
        let len = self.len();
        if len >= MAX_DR_HOPS {
            return Err(PathError::TooLong(len + 1));
        }
        let mut path = self.clone();
        path.hops[len] = port;
        path.len += 1;
        Ok(path)
    }
    /// Parse the infiniband-diags notation: `0,1,3` (a leading 0 for the local port, as
    /// smpquery -D writes it; `0` alone is the local node).
    pub fn parse(text: &str) -> Result<Self, PathError> {
        let mut hops = Vec::new();
        for (i, part) in text.split(',').enumerate() {
            let part = part.trim();
            let port: u8 = part
                .parse()
                .map_err(|_| PathError::BadElement(part.to_string()))?;
            if i == 0 && port == 0 {
                continue;
            }
            hops.push(port);
        }
        DrPath::from_hops(&hops)
    }
}

impl std::fmt::Display for DrPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Digits by hand into one buffer, written once: discovery renders every node's
        // route, and the formatting machinery per hop showed in profiles at 100k nodes.
        let mut text = [0u8; 1 + 4 * MAX_DR_HOPS];
        text[0] = b'0';
        let mut len = 1;
        for &hop in self.hops() {
            text[len] = b',';
            len += 1;
            if hop >= 100 {
                text[len] = b'0' + hop / 100;
                len += 1;
            }
            if hop >= 10 {
                text[len] = b'0' + hop / 10 % 10;
                len += 1;
            }
            text[len] = b'0' + hop % 10;
            len += 1;
        }
        // Only ASCII digits and commas were written.
        f.write_str(std::str::from_utf8(&text[..len]).map_err(|_| std::fmt::Error)?)
    }
}

impl Default for DrPath {
    fn default() -> Self {
        DrPath::local()
    }
}

impl std::fmt::Debug for DrPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DrPath").field(&self.hops()).finish()
    }
}

impl PartialEq for DrPath {
    fn eq(&self, other: &Self) -> bool {
        self.hops() == other.hops()
    }
}

impl Eq for DrPath {}

impl std::hash::Hash for DrPath {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.hops().hash(state);
    }
}

impl PartialOrd for DrPath {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for DrPath {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.hops().cmp(other.hops())
    }
}

/// Serialized as the list of hops, as before the inline representation.
impl serde::Serialize for DrPath {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.hops())
    }
}

/// Paths come from files: an over-long one is an error, not a truncated route.
impl<'de> serde::Deserialize<'de> for DrPath {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let hops = Vec::<u8>::deserialize(deserializer)?;
        DrPath::from_hops(&hops).map_err(serde::de::Error::custom)
    }
}

/// How an SMP reaches its target.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum SmpRoute {
    Lid(u16),
    Directed(DrPath),
}

/// Copy `data` into region `slot` of `mad`, cut to the region's size.
pub(crate) fn put_region(mad: &mut [u8; MAD_SIZE], slot: &Slot<Region>, data: &[u8]) {
    // Every region of a MAD frame lies inside the 256 bytes.
    if let Ok(area) = slot.bytes_mut(mad) {
        let n = data.len().min(area.len());
        area[..n].copy_from_slice(&data[..n]);
    }
}

/// Build a Get/Set SMP. `data` is the attribute payload (at most 64 bytes; for Get it is
/// usually empty). The TID is filled in by the transport.
pub fn build_smp(
    route: &SmpRoute,
    method_code: u8,
    attribute_id: u16,
    attribute_modifier: u32,
    m_key: u64,
    data: &[u8],
) -> [u8; MAD_SIZE] {
    let mut mad = [0u8; MAD_SIZE];
    let path = match route {
        SmpRoute::Lid(_) => None,
        SmpRoute::Directed(path) => Some(path),
    };
    let mgmt_class = if path.is_some() {
        class::SMI_DIRECT
    } else {
        class::SMI_LID
    };
    let header = MadHeader::request(mgmt_class, method_code, attribute_id, attribute_modifier);
    let mut frame = SmpFrame {
        m_key,
        ..Default::default()
    };
    if let Some(path) = path {
        // Outbound (D 0) from hop 0; permissive DrSLID/DrDLID: the whole route is directed
        // (IBA 14.2.2.1).
        frame.hop_count = path.len() as u8;
        frame.dr_slid = PERMISSIVE_LID;
        frame.dr_dlid = PERMISSIVE_LID;
    }
    // Both layouts fit a MAD and every value fits its field: neither write can fail.
    let _ = header.encode_into(&mut mad);
    let _ = frame.write_fields(&mut mad);
    if let (Some(path), Ok(initial)) = (path, SmpFrame::initial_path.bytes_mut(&mut mad)) {
        // InitialPath[0] is unused: hop i leaves by InitialPath[i].
        initial[1..=path.len()].copy_from_slice(path.hops());
    }
    put_region(&mut mad, &SmpFrame::data, data);
    mad
}

/// Re-aim a directed-route SMP made by [`build_smp`] along `path`: its HopCount and
/// InitialPath, nothing else. A copy of one SMP re-aimed costs far less than framing each
/// request anew, which counts when discovery sends a million of them.
pub fn aim_smp(mad: &mut [u8; MAD_SIZE], path: &DrPath) {
    // HopCount is a whole byte and InitialPath a 64-byte region of the 256: neither
    // write can fail.
    let _ = SmpFrame::hop_count.write(mad, &(path.len() as u8));
    if let Ok(initial) = SmpFrame::initial_path.bytes_mut(mad) {
        // InitialPath[0] is unused: hop i leaves by InitialPath[i]; the rest stays zero.
        let (used, rest) = initial[1..].split_at_mut(path.len());
        used.copy_from_slice(path.hops());
        rest.fill(0);
    }
}

/// Build a plain GMP request (PerfMgt) with a payload of at most 192 bytes.
pub fn build_gmp(
    mgmt_class: u8,
    method_code: u8,
    attribute_id: u16,
    attribute_modifier: u32,
    data: &[u8],
) -> [u8; MAD_SIZE] {
    let mut mad = [0u8; MAD_SIZE];
    let header = MadHeader::request(mgmt_class, method_code, attribute_id, attribute_modifier);
    let _ = header.encode_into(&mut mad);
    put_region(&mut mad, &GmpFrame::data, data);
    mad
}

/// A received MAD split into header and views of its parts. Borrowed from the buffer.
#[derive(Debug, Clone)]
pub struct MadView<'a> {
    pub header: MadHeader,
    bytes: &'a [u8],
}

impl<'a> MadView<'a> {
    /// Accepts a full 256-byte MAD; anything shorter is rejected.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, DecodeError> {
        wire::need(bytes, MAD_SIZE, "MAD")?;
        Ok(MadView {
            header: MadHeader::decode(bytes)?,
            bytes: &bytes[..MAD_SIZE],
        })
    }
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
    pub fn is_directed(&self) -> bool {
        self.header.mgmt_class == class::SMI_DIRECT
    }
    /// MAD status without the directed-route D bit ([`MadStatus::from_bits`] drops bit 15,
    /// which no other class uses either).
    pub fn status(&self) -> MadStatus {
        MadStatus::from_bits(self.header.status)
    }
    pub fn is_response(&self) -> bool {
        self.header.response
    }
    /// Directed route: hop pointer and hop count.
    pub fn dr_hops(&self) -> (u8, u8) {
        let hop_pointer = SmpFrame::hop_pointer.read(self.bytes).unwrap_or(0);
        let hop_count = SmpFrame::hop_count.read(self.bytes).unwrap_or(0);
        (hop_pointer, hop_count)
    }
    pub fn m_key(&self) -> u64 {
        SmpFrame::m_key.read(self.bytes).unwrap_or(0)
    }
    /// A region of the MAD: parse checked that all 256 bytes are there.
    pub(crate) fn region(&self, slot: &Slot<Region>) -> &'a [u8] {
        slot.bytes(self.bytes).unwrap_or(&[])
    }
    pub fn smp_data(&self) -> &'a [u8] {
        self.region(&SmpFrame::data)
    }
    pub fn gmp_data(&self) -> &'a [u8] {
        self.region(&GmpFrame::data)
    }
    /// DR initial and return paths (64 bytes each; index 0 unused).
    pub fn initial_path(&self) -> &'a [u8] {
        self.region(&SmpFrame::initial_path)
    }
    pub fn return_path(&self) -> &'a [u8] {
        self.region(&SmpFrame::return_path)
    }
}

#[cfg(test)]
mod tests {
    use super::DrPath;

    #[test]
    fn dr_path_serializes_as_its_hops_and_rejects_long_ones() {
        let path = DrPath::from_hops(&[1, 2, 36]).unwrap();
        assert_eq!(serde_json::to_string(&path).unwrap(), "[1,2,36]");
        let back: DrPath = serde_json::from_str("[1,2,36]").unwrap();
        assert_eq!(back, path);
        let long = format!("[{}]", vec!["1"; 64].join(","));
        assert!(serde_json::from_str::<DrPath>(&long).is_err());
        let mut p = DrPath::local();
        for _ in 0..63 {
            p = p.child(1).unwrap();
        }
        assert!(p.child(1).is_err());
        assert_eq!(p.len(), 63);
        assert!(DrPath::from_hops(&[1, 2]).unwrap() < DrPath::from_hops(&[1, 3]).unwrap());
        assert!(DrPath::from_hops(&[1]).unwrap() < DrPath::from_hops(&[1, 0]).unwrap());
    }

    use super::*;
    use crate::attr::{NodeInfo, PortCounters, PortInfo};
    use crate::attribute::Attribute;
    use crate::header::method;

    #[test]
    fn dr_path_parse_and_display() {
        assert_eq!(DrPath::parse("0").unwrap(), DrPath::local());
        let p = DrPath::parse("0,1,3").unwrap();
        assert_eq!(p.hops(), &[1, 3]);
        assert_eq!(p.to_string(), "0,1,3");
        assert!(DrPath::parse("0,x").is_err());
        assert!(DrPath::parse("0,256").is_err());
        assert!(DrPath::from_hops(&[1; 64]).is_err());
    }

    /// Layout of a DR Get(PortInfo) to port 1 along 0,1,3 (IBA 14.2.1.2 field positions).
    #[test]
    fn golden_dr_smp() {
        let route = SmpRoute::Directed(DrPath::parse("0,1,3").unwrap());
        let mad = build_smp(&route, method::GET, PortInfo::ID, 1, 0, &[]);
        assert_eq!(
            &mad[0..8],
            &[0x01, 0x81, 0x01, 0x01, 0x00, 0x00, 0x00, 0x02]
        );
        assert_eq!(&mad[16..24], &[0x00, 0x15, 0, 0, 0, 0, 0, 1]);
        assert_eq!(&mad[32..36], &[0xff, 0xff, 0xff, 0xff]);
        assert_eq!(&mad[128..132], &[0, 1, 3, 0]);
        let v = MadView::parse(&mad).unwrap();
        assert_eq!(v.dr_hops(), (0, 2));
        assert!(v.is_directed());
    }

    /// A re-aimed SMP is the very SMP built for its route, whatever route it had before.
    #[test]
    fn aimed_smp_equals_built_smp() {
        let paths = ["0", "0,1", "0,1,3", "0,255,100,10,9,0", "0,7,7,7,7,7,7,7,7"];
        for from in paths {
            for to in paths {
                let from = SmpRoute::Directed(DrPath::parse(from).unwrap());
                let to = DrPath::parse(to).unwrap();
                let mut mad = build_smp(&from, method::GET, PortInfo::ID, 7, 0, &[]);
                aim_smp(&mut mad, &to);
                let built = build_smp(
                    &SmpRoute::Directed(to),
                    method::GET,
                    PortInfo::ID,
                    7,
                    0,
                    &[],
                );
                assert_eq!(mad, built);
            }
        }
        let longest = DrPath::from_hops(&[200; MAX_DR_HOPS]).unwrap();
        let mut mad = build_smp(
            &SmpRoute::Directed(DrPath::local()),
            method::GET,
            0x11,
            0,
            0,
            &[],
        );
        aim_smp(&mut mad, &longest);
        let built = build_smp(&SmpRoute::Directed(longest), method::GET, 0x11, 0, 0, &[]);
        assert_eq!(mad, built);
    }

    #[test]
    fn dr_path_text_of_every_hop_value() {
        for hop in 0..=255u8 {
            let path = DrPath::from_hops(&[hop, 1, hop]).unwrap();
            assert_eq!(path.to_string(), format!("0,{hop},1,{hop}"));
            assert_eq!(DrPath::parse(&path.to_string()).unwrap(), path);
        }
        let longest = DrPath::from_hops(&[255; MAX_DR_HOPS]).unwrap();
        assert_eq!(
            longest.to_string(),
            format!("0{}", ",255".repeat(MAX_DR_HOPS))
        );
    }

    #[test]
    fn golden_lid_smp() {
        let mad = build_smp(&SmpRoute::Lid(5), method::GET, NodeInfo::ID, 0, 0, &[]);
        assert_eq!(&mad[0..8], &[0x01, 0x01, 0x01, 0x01, 0, 0, 0, 0]);
        assert!(mad[32..].iter().all(|&b| b == 0));
    }

    /// Every SMP framing field at its IBA 14.2.1.2 position (D bit 32, HopPointer byte 6,
    /// HopCount byte 7, M_Key bytes 24-31, DrSLID 32-33, DrDLID 34-35, data 64-127,
    /// InitialPath 128-191, ReturnPath 192-255), bytes written by hand, each value distinct.
    #[test]
    fn golden_smp_frame() {
        let mut mad = [0u8; MAD_SIZE];
        mad[4] = 0x80; // D
        mad[6] = 2; // HopPointer
        mad[7] = 3; // HopCount
        mad[24..32].copy_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
        mad[32..34].copy_from_slice(&0x0011u16.to_be_bytes());
        mad[34..36].copy_from_slice(&0x0022u16.to_be_bytes());
        mad[64] = 0x64;
        mad[129] = 0x81;
        mad[193] = 0xc1;
        let f = SmpFrame::decode(&mad).unwrap();
        assert!(f.direction);
        assert_eq!((f.hop_pointer, f.hop_count), (2, 3));
        assert_eq!(f.m_key, 0x0102_0304_0506_0708);
        assert_eq!((f.dr_slid, f.dr_dlid), (0x11, 0x22));
        let v = MadView::parse(&mad).unwrap();
        assert_eq!(v.dr_hops(), (2, 3));
        assert_eq!(v.m_key(), 0x0102_0304_0506_0708);
        assert_eq!((v.smp_data()[0], v.smp_data().len()), (0x64, 64));
        assert_eq!((v.initial_path()[1], v.initial_path().len()), (0x81, 64));
        assert_eq!((v.return_path()[1], v.return_path().len()), (0xc1, 64));
        // The regions are framed, not held: the frame's own bytes carry only its fields.
        let mut own = [0u8; MAD_SIZE];
        f.write_fields(&mut own).unwrap();
        let mut fields_only = mad;
        fields_only[64] = 0;
        fields_only[129] = 0;
        fields_only[193] = 0;
        assert_eq!(own, fields_only);
        // The header's Status and ClassSpecific words are what the DR rows overlay.
        let h = MadHeader::decode(&mad).unwrap();
        assert_eq!((h.status, h.class_specific), (0x8000, 0x0203));
        assert_eq!(v.status(), MadStatus(0));
    }

    #[test]
    fn golden_gmp() {
        let pm = build_gmp(class::PERF, method::GET, PortCounters::ID, 0, &[0, 1]);
        assert_eq!(&pm[0..4], &[0x01, 0x04, 0x01, 0x01]);
        assert_eq!(&pm[16..18], &[0x00, 0x12]);
        assert!(pm[24..64].iter().all(|&b| b == 0), "40 reserved bytes");
        assert_eq!(&pm[64..66], &[0, 1]);
        assert_eq!(GmpFrame::data.spec.bytes(), 64..256);
    }

    #[test]
    fn short_mad_rejected() {
        assert!(MadView::parse(&[0u8; 255]).is_err());
    }
}
