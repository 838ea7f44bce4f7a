//! The 24-byte common MAD header (IBA 13.4.2) and the management class / method constants.

use crate::error::DecodeError;
use crate::wire_struct;

/// Every MAD is 256 bytes on the wire.
pub const MAD_SIZE: usize = 256;
/// Size of the common header.
pub const HEADER_LEN: usize = 24;

/// Management classes ibscope speaks.
pub mod class {
    /// Subnet management, LID routed.
    pub const SMI_LID: u8 = 0x01;
    /// Subnet administration (the SA, served by the SM on QP1).
    pub const SUBN_ADM: u8 = 0x03;
    /// Performance management (the PMA of every port).
    pub const PERF: u8 = 0x04;
    /// Subnet management, directed route.
    pub const SMI_DIRECT: u8 = 0x81;
}

/// Methods (IBA 13.4.5). The response bit (0x80) is kept in [`MadHeader::response`].
pub mod method {
    pub const GET: u8 = 0x01;
    pub const SET: u8 = 0x02;
    pub const GET_RESP: u8 = 0x81;
    pub const SEND: u8 = 0x03;
    pub const TRAP: u8 = 0x05;
    pub const REPORT: u8 = 0x06;
    pub const TRAP_REPRESS: u8 = 0x07;
    /// SA GetTable.
    pub const GET_TABLE: u8 = 0x12;
}

/// The class version ibscope speaks (and registers its agents with) for each class: 2 for
/// the SA (IBA 15.2.1.1), 1 for the others.
pub const fn class_version(mgmt_class: u8) -> u8 {
    match mgmt_class {
        class::SUBN_ADM => 2,
        _ => 1,
    }
}

wire_struct! {
    /// Common MAD header. For directed-route SMPs `status` and `class_specific` hold the
    /// D bit, hop pointer and hop count: see [`crate::smp::SmpFrame`].
    pub struct MadHeader (24) {
        pub base_version: u8 = 0, 8, "BaseVersion";
        pub mgmt_class: u8 = 8, 8, "MgmtClass";
        pub class_version: u8 = 16, 8, "ClassVersion";
        /// The R bit: set on responses.
        pub response: bool = 24, 1, "R";
        /// Method without the R bit.
        pub method: u8 = 25, 7, "Method";
        pub status: u16 = 32, 16, "Status";
        pub class_specific: u16 = 48, 16, "ClassSpecific";
        pub transaction_id: u64 = 64, 64, "TransactionID";
        pub attribute_id: u16 = 128, 16, "AttributeID";
        pub attribute_modifier: u32 = 160, 32, "AttributeModifier";
    }
}

impl MadHeader {
    /// Method byte as it appears on the wire (R bit included).
    pub fn method_byte(&self) -> u8 {
        (u8::from(self.response) << 7) | self.method
    }

    /// A request header for `class` with the class version ibscope uses for it.
    pub fn request(mgmt_class: u8, method: u8, attribute_id: u16, attribute_modifier: u32) -> Self {
        MadHeader {
            base_version: 1,
            mgmt_class,
            class_version: class_version(mgmt_class),
            response: false,
            method,
            status: 0,
            class_specific: 0,
            transaction_id: 0,
            attribute_id,
            attribute_modifier,
        }
    }

    /// The MAD status field split per IBA 13.4.7 (bits 2..4 are the code; bit 0 busy,
    /// bit 1 redirect). Directed-route SMPs keep the D bit in bit 15: mask it off first.
    pub fn status_code(&self) -> MadStatus {
        MadStatus::from_bits(self.status)
    }
}

/// The meaning of a non-zero MAD status, for error messages a user can act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MadStatus(pub u16);

crate::coded_enum! {
    /// The code in bits 2..4 of the MAD status (IBA 13.4.7, table 127).
    pub enum MadStatusCode: u8 {
        Ok = 0, "ok", "ok";
        BadVersion = 1, "bad base/class version", "bad-version";
        MethodUnsupported = 2, "method not supported", "bad-method";
        MethodAttributeUnsupported = 3, "method/attribute combination not supported", "bad-attribute";
        InvalidValue = 7, "invalid attribute or attribute modifier value", "bad-value";
    }
}

impl MadStatus {
    pub fn from_bits(raw: u16) -> Self {
        MadStatus(raw & 0x7fff)
    }
    /// The common status code (bits 2..4).
    pub fn code(self) -> MadStatusCode {
        MadStatusCode::from_code(((self.0 >> 2) & 0x7) as u8)
    }
    pub fn is_ok(self) -> bool {
        self.0 & 0x1f == 0 && self.0 >> 8 == 0
    }
    /// Human meaning of the common status bits; class-specific bits (8..14) are reported raw.
    pub fn describe(self) -> String {
        let mut parts = Vec::new();
        if self.0 & 0x1 != 0 {
            parts.push("busy".to_string());
        }
        if self.0 & 0x2 != 0 {
            parts.push("redirect required".to_string());
        }
        match self.code() {
            MadStatusCode::Ok => {}
            MadStatusCode::Unknown(c) => parts.push(format!("reserved code {c}")),
            code => parts.push(code.name().into()),
        }
        let class_bits = (self.0 >> 8) & 0x7f;
        if class_bits != 0 {
            parts.push(format!("class-specific status {class_bits:#x}"));
        }
        if parts.is_empty() {
            "ok".into()
        } else {
            parts.join(", ")
        }
    }
}

impl std::fmt::Display for MadStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#06x} ({})", self.0, self.describe())
    }
}

/// Decode just the header of a 256-byte MAD.
pub fn peek_header(mad: &[u8]) -> Result<MadHeader, DecodeError> {
    MadHeader::decode(mad)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A NodeInfo Get as smpquery sends it (IBA 13.4.2 layout; TID chosen by us).
    #[test]
    fn golden_get_nodeinfo_header() {
        let mut h = MadHeader::request(class::SMI_DIRECT, method::GET, 0x0011, 0);
        h.transaction_id = 0x0000_0000_1234_5678;
        let bytes = h.to_bytes();
        assert_eq!(
            bytes,
            [
                0x01, 0x81, 0x01, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0x12, 0x34, 0x56, 0x78, 0x00, 0x11,
                0, 0, 0, 0, 0, 0
            ]
        );
        assert_eq!(MadHeader::decode(&bytes).unwrap(), h);
    }

    #[test]
    fn response_bit_split() {
        let mut raw = [0u8; 24];
        raw[3] = 0x81;
        let h = MadHeader::decode(&raw).unwrap();
        assert!(h.response);
        assert_eq!(h.method, method::GET);
        assert_eq!(h.method_byte(), 0x81);
    }

    #[test]
    fn one_class_version_per_class() {
        assert_eq!(class_version(class::SUBN_ADM), 2);
        for c in [class::SMI_LID, class::SMI_DIRECT, class::PERF] {
            assert_eq!(class_version(c), 1);
            assert_eq!(MadHeader::request(c, method::GET, 1, 0).class_version, 1);
        }
        assert_eq!(
            MadHeader::request(class::SUBN_ADM, method::GET, 1, 0).class_version,
            2
        );
    }

    #[test]
    fn short_header_is_error() {
        assert!(MadHeader::decode(&[0u8; 23]).is_err());
    }

    #[test]
    fn status_text() {
        assert_eq!(
            MadStatus(0x1c).describe(),
            "invalid attribute or attribute modifier value"
        );
        assert!(MadStatus(0).is_ok());
        assert!(!MadStatus(0x0c).is_ok());
    }
}
