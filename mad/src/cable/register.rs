//! The firmware registers NVIDIA's tools read a module through over InfiniBand, as
//! mstflint's published layouts give them (tools_layouts/cables_layouts.h for MCIA,
//! mtcr_ul/packets_layout.h for the TLVs; the `adb2c` offsets there are from the most
//! significant bit of each big-endian dword, as `wire_struct!` numbers them): an
//! AccessRegister MAD carries an operation TLV, a register TLV header and the register.
//! mstflint sends it as a SubnSet of attribute 0xFF52 (an SMP: 44 register bytes at most)
//! or as a Set of vendor class 0x0A (204 bytes), even to read, so a reader of these is a
//! writer on the wire and must be asked for by name.
//!
//! Only the layouts are here; nothing sends them yet, and they are verified against
//! mstflint's field tables only, not against hardware.

use super::codes::byte;
use crate::wire::Region;

/// SMP attribute ID of AccessRegister (mstflint's `IB_SMP_ATTR_REG_ACCESS`).
pub const SMP_ACCESS_REGISTER: u16 = 0xff52;
/// The vendor management class mstflint also sends it in (`MAD_CLASS_A_REG_ACCESS`).
pub const VENDOR_CLASS_ACCESS_REGISTER: u8 = 0x0a;
/// Register IDs (mstflint reg_ids.h): module EEPROM access, and the PHY's module info.
pub const MCIA: u16 = 0x9014;
pub const PDDR: u16 = 0x5031;
/// TLV types (packets_layout.h).
pub const TLV_OPERATION: u8 = 1;
pub const TLV_REG: u8 = 3;
/// Register method of the operation TLV: 1 query, 2 write.
pub const METHOD_QUERY: u8 = 1;

crate::wire_struct! {
    /// The operation TLV (16 bytes).
    pub struct OperationTlv (16) {
        pub status: u8 = 8, 7, "status";
        pub dr: bool = 15, 1, "dr";
        /// In dwords: 4.
        pub len: u16 = 16, 11, "len";
        pub tlv_type: u8 = 27, 5, "Type";
        pub class: u8 = 32, 8, "class";
        pub method: u8 = 40, 7, "method";
        pub r: bool = 47, 1, "r";
        pub register_id: u16 = 48, 16, "register_id";
        pub tid: u64 = 64, 64, "tid";
    }
}

crate::wire_struct! {
    /// The register TLV header (4 bytes): its length in dwords counts itself.
    pub struct RegTlv (4) {
        pub len: u16 = 16, 11, "len";
        pub tlv_type: u8 = 27, 5, "Type";
    }
}

crate::wire_struct! {
    /// MCIA, Management Cable Info Access (148 bytes): `size` bytes at `device_address`
    /// of `page_number` of `module`'s memory at `i2c_device_address`, in `data`.
    pub struct Mcia (148) {
        pub lock: bool = 0, 1, "l";
        pub pnv: bool = 2, 1, "pnv";
        pub module: u8 = 8, 8, "module";
        pub slot_index: u8 = 16, 4, "slot_index";
        pub status: u8 = 24, 8, "status";
        pub i2c_device_address: u8 = byte(4), 8, "i2c_device_address";
        pub page_number: u8 = byte(5), 8, "page_number";
        pub device_address: u16 = byte(6), 16, "device_address";
        pub bank_number: u8 = byte(9), 8, "bank_number";
        pub size: u16 = byte(10), 16, "size";
        /// The bytes read: `Mcia::data.bytes(reply)`.
        pub data: Region = byte(16), 1024, "dword[0..32]";
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mcia_query_is_laid_out_as_mstflint_packs_it() {
        // mstflint's init_operation_tlv: Type 1, class 1, len 4, method 1 (query),
        // register 0x9014: bytes 2-3 are len << 5 | Type = 0x0081, byte 5 method << 1.
        let op = OperationTlv {
            len: 4,
            tlv_type: TLV_OPERATION,
            class: 1,
            method: METHOD_QUERY,
            register_id: MCIA,
            ..OperationTlv::default()
        };
        assert_eq!(
            op.to_bytes(),
            [0, 0, 0x00, 0x81, 0x01, 0x02, 0x90, 0x14, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        // init_reg_tlv: Type 3, length (148 + 4) / 4 = 38 dwords.
        assert_eq!(
            RegTlv {
                len: 38,
                tlv_type: TLV_REG
            }
            .to_bytes(),
            [0, 0, 0x04, 0xc3]
        );
        // reg_access_hca_mcia_ext_pack: module at bits 8-15, i2c address at 32, page at
        // 40, device address at 48, size at 80, data from bit 128.
        let mcia = Mcia {
            module: 3,
            i2c_device_address: 0x50,
            page_number: 0x11,
            device_address: 0x80,
            size: 128,
            ..Mcia::default()
        };
        let b = mcia.to_bytes();
        assert_eq!(
            &b[..12],
            &[0, 3, 0, 0, 0x50, 0x11, 0x00, 0x80, 0, 0, 0, 128]
        );
        let mut reply = b;
        reply[3] = 0x00;
        reply[16] = 0x18;
        let back = Mcia::decode(&reply).unwrap();
        assert_eq!(back.status, 0);
        assert_eq!(Mcia::data.bytes(&reply).unwrap()[0], 0x18);
    }
}
