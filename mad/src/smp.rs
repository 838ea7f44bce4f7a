//! Framing of whole 256-byte MADs: LID-routed and directed-route SMPs (IBA 14.2.1), PerfMgt
//! GMPs (IBA 16.1.1) and SA MADs (IBA 15.2.1). Attribute payloads are separate codecs.

use crate::error::DecodeError;
use crate::header::{class, MadHeader, MAD_SIZE};
use crate::wire;

/// Attribute payload of an SMP.
pub const SMP_DATA_LEN: usize = 64;
pub const SMP_DATA_OFFSET: usize = 64;
/// Attribute payload of a PerfMgt (and other plain GMP) MAD.
pub const GMP_DATA_OFFSET: usize = 64;
pub const GMP_DATA_LEN: usize = 192;
/// SA payload.
pub const SA_DATA_OFFSET: usize = 56;
pub const SA_DATA_LEN: usize = 200;
/// Directed-route paths have at most 63 hops (64 bytes, index 0 unused).
pub const MAX_DR_HOPS: usize = 63;

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
    pub fn new(hops: Vec<u8>) -> Result<Self, PathError> {
        Self::from_hops(&hops)
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
        DrPath::new(hops)
    }
}

impl std::fmt::Display for DrPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "0")?;
        for h in self.hops() {
            write!(f, ",{h}")?;
        }
        Ok(())
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
    let mgmt_class = match route {
        SmpRoute::Lid(_) => class::SMI_LID,
        SmpRoute::Directed(_) => class::SMI_DIRECT,
    };
    let mut h = MadHeader::request(mgmt_class, method_code, attribute_id, attribute_modifier);
    if let SmpRoute::Directed(path) = route {
        // D bit 0 (outbound), hop pointer 0, hop count = path length.
        h.class_specific = path.len() as u16;
    }
    let _ = h.encode_into(&mut mad);
    mad[24..32].copy_from_slice(&m_key.to_be_bytes());
    if let SmpRoute::Directed(path) = route {
        // Permissive DrSLID/DrDLID: the whole route is directed (IBA 14.2.2.1).
        mad[32..34].copy_from_slice(&0xffffu16.to_be_bytes());
        mad[34..36].copy_from_slice(&0xffffu16.to_be_bytes());
        for (i, port) in path.hops().iter().enumerate() {
            mad[128 + 1 + i] = *port;
        }
    }
    let n = data.len().min(SMP_DATA_LEN);
    mad[SMP_DATA_OFFSET..SMP_DATA_OFFSET + n].copy_from_slice(&data[..n]);
    mad
}

/// Build a PerfMgt (class 0x04) request with a 192-byte payload.
pub fn build_gmp(
    mgmt_class: u8,
    method_code: u8,
    attribute_id: u16,
    attribute_modifier: u32,
    data: &[u8],
) -> [u8; MAD_SIZE] {
    let mut mad = [0u8; MAD_SIZE];
    let h = MadHeader::request(mgmt_class, method_code, attribute_id, attribute_modifier);
    let _ = h.encode_into(&mut mad);
    let n = data.len().min(GMP_DATA_LEN);
    mad[GMP_DATA_OFFSET..GMP_DATA_OFFSET + n].copy_from_slice(&data[..n]);
    mad
}

/// Build an SA request (SubnAdmGet / GetTable) with a component mask and a record template.
pub fn build_sa(
    method_code: u8,
    attribute_id: u16,
    component_mask: u64,
    sm_key: u64,
    record: &[u8],
) -> [u8; MAD_SIZE] {
    let mut mad = [0u8; MAD_SIZE];
    let h = MadHeader::request(class::SUBN_ADM, method_code, attribute_id, 0);
    let _ = h.encode_into(&mut mad);
    mad[36..44].copy_from_slice(&sm_key.to_be_bytes());
    mad[48..56].copy_from_slice(&component_mask.to_be_bytes());
    let n = record.len().min(SA_DATA_LEN);
    mad[SA_DATA_OFFSET..SA_DATA_OFFSET + n].copy_from_slice(&record[..n]);
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
    /// MAD status without the directed-route D bit.
    pub fn status(&self) -> crate::header::MadStatus {
        if self.is_directed() {
            crate::header::MadStatus::from_bits(self.header.status & 0x7fff)
        } else {
            crate::header::MadStatus::from_bits(self.header.status)
        }
    }
    pub fn is_response(&self) -> bool {
        self.header.response
    }
    /// Directed route: hop pointer and hop count.
    pub fn dr_hops(&self) -> (u8, u8) {
        (
            (self.header.class_specific >> 8) as u8,
            self.header.class_specific as u8,
        )
    }
    pub fn m_key(&self) -> u64 {
        u64::from_be_bytes(self.bytes[24..32].try_into().unwrap_or([0; 8]))
    }
    pub fn smp_data(&self) -> &'a [u8] {
        &self.bytes[SMP_DATA_OFFSET..SMP_DATA_OFFSET + SMP_DATA_LEN]
    }
    pub fn gmp_data(&self) -> &'a [u8] {
        &self.bytes[GMP_DATA_OFFSET..GMP_DATA_OFFSET + GMP_DATA_LEN]
    }
    pub fn sa_data(&self) -> &'a [u8] {
        &self.bytes[SA_DATA_OFFSET..SA_DATA_OFFSET + SA_DATA_LEN]
    }
    /// SA AttributeOffset: record size in 8-byte words (IBA 15.2.1.1).
    pub fn sa_attribute_offset(&self) -> u16 {
        u16::from_be_bytes([self.bytes[44], self.bytes[45]])
    }
    /// DR initial and return paths (64 bytes each; index 0 unused).
    pub fn initial_path(&self) -> &'a [u8] {
        &self.bytes[128..192]
    }
    pub fn return_path(&self) -> &'a [u8] {
        &self.bytes[192..256]
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
    use crate::header::{attr, method};

    #[test]
    fn dr_path_parse_and_display() {
        assert_eq!(DrPath::parse("0").unwrap(), DrPath::local());
        let p = DrPath::parse("0,1,3").unwrap();
        assert_eq!(p.hops(), &[1, 3]);
        assert_eq!(p.to_string(), "0,1,3");
        assert!(DrPath::parse("0,x").is_err());
        assert!(DrPath::parse("0,256").is_err());
        assert!(DrPath::new(vec![1; 64]).is_err());
    }

    /// Layout of a DR Get(PortInfo) to port 1 along 0,1,3 (IBA 14.2.1.2 field positions).
    #[test]
    fn golden_dr_smp() {
        let route = SmpRoute::Directed(DrPath::parse("0,1,3").unwrap());
        let mad = build_smp(&route, method::GET, attr::PORT_INFO, 1, 0, &[]);
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

    #[test]
    fn golden_lid_smp() {
        let mad = build_smp(&SmpRoute::Lid(5), method::GET, attr::NODE_INFO, 0, 0, &[]);
        assert_eq!(&mad[0..8], &[0x01, 0x01, 0x01, 0x01, 0, 0, 0, 0]);
        assert!(mad[32..].iter().all(|&b| b == 0));
    }

    #[test]
    fn golden_sa_and_gmp() {
        let sa = build_sa(method::GET, attr::SA_NODE_RECORD, 0x1, 0, &[0x00, 0x05]);
        assert_eq!(&sa[0..4], &[0x01, 0x03, 0x02, 0x01]);
        assert_eq!(&sa[48..56], &[0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(&sa[56..58], &[0x00, 0x05]);
        let pm = build_gmp(class::PERF, method::GET, attr::PORT_COUNTERS, 0, &[0, 1]);
        assert_eq!(&pm[0..4], &[0x01, 0x04, 0x01, 0x01]);
        assert_eq!(&pm[64..66], &[0, 1]);
    }

    #[test]
    fn short_mad_rejected() {
        assert!(MadView::parse(&[0u8; 255]).is_err());
    }
}
