//! The firmware registers NVIDIA's tools read a module through over InfiniBand, as
//! mstflint's published layouts give them (mstflint commit b9d9e844a14a:
//! tools_layouts/adb/prm/{hca,switch}/ext/register_access_table.adb for MCIA, PMLP and
//! PLIB; mtcr_ul/packets_layout.c for the TLVs; the adb offsets count bits from the least
//! significant bit of each big-endian dword, `wire_struct!` from the most significant bit
//! of byte 0): an AccessRegister MAD carries an operation TLV, a register TLV header and
//! the register.
//!
//! As an SMP (attribute 0xFF52, the path this crate frames) the 64-byte attribute holds
//! 20 bytes of TLVs and the first 44 bytes of the register, so an MCIA read carries 28
//! module bytes. mstflint sends it as a SubnSet even to query (the operation TLV's method
//! says query), so a reader of these is a writer on the wire and must be asked for by name.
//! (mstflint also has two GMP paths in vendor class 0x0A: the same TLVs in a Set, and an
//! AccessRegisterGMP Get of attribute 0x51 where a device's GeneralInfo says it has one;
//! this crate frames neither.)
//!
//! Verified against mstflint's field tables and golden bytes only, not against hardware.

use super::codes::byte;
use crate::wire::Region;

/// SMP attribute ID of AccessRegister (mstflint's `IB_SMP_ATTR_REG_ACCESS`).
pub const SMP_ACCESS_REGISTER: u16 = 0xff52;
/// Register IDs (the adb files' register table): module EEPROM access, a local port's
/// module and lanes, a local port's InfiniBand port number.
pub const MCIA: u16 = 0x9014;
pub const PMLP: u16 = 0x5002;
pub const PLIB: u16 = 0x500a;
/// The register bytes an SMP's 64-byte attribute carries after the two TLV headers.
pub const SMP_REGISTER_BYTES: usize = 44;
/// Module bytes one MCIA read in an SMP carries: the register less its 16-byte header.
pub const MCIA_SMP_CHUNK: usize = SMP_REGISTER_BYTES - 16;
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

crate::wire_struct! {
    /// PLIB, Port Local to InfiniBand port (16 bytes): which InfiniBand port number a
    /// local port carries. A switch numbers its local ports apart from its InfiniBand
    /// ports (split-capable cages leave gaps), so the IB port must be looked up.
    pub struct Plib (16) {
        pub local_port: u8 = 8, 8, "local_port";
        pub lp_msb: u8 = 18, 2, "lp_msb";
        pub ib_port: u16 = 22, 10, "ib_port";
    }
}

crate::wire_struct! {
    /// PMLP, Ports Module to Local Port (64 bytes): the module and module lanes a local
    /// port uses.
    pub struct Pmlp (64) {
        pub rxtx: bool = 0, 1, "rxtx";
        pub m_lane_m: bool = 3, 1, "m_lane_m";
        pub local_port: u8 = 8, 8, "local_port";
        pub lp_msb: u8 = 18, 2, "lp_msb";
        /// Lanes used: 0 (the local port is not mapped), 1, 2, 4 or 8.
        pub width: u8 = 24, 8, "width";
        /// Eight [`PmlpLane`]s, the port's lane 0 first.
        pub lanes: [u8; 32] = byte(4), 256, "lane_module_mapping[0..8]";
    }
}

crate::wire_struct! {
    /// One lane of a PMLP: the module it is wired to and that module's lane.
    pub struct PmlpLane (4) {
        pub rx_lane: u8 = 4, 4, "rx_lane";
        pub tx_lane: u8 = 12, 4, "tx_lane";
        pub sub_module: u8 = 16, 4, "sub_module";
        pub slot_index: u8 = 20, 4, "slot_index";
        pub module: u8 = 24, 8, "module";
    }
}

impl Pmlp {
    /// The lanes in use, the port's lane 0 first (`width` of them, at most 8).
    pub fn used_lanes(&self) -> Vec<PmlpLane> {
        self.lanes
            .chunks_exact(4)
            .take(usize::from(self.width.min(8)))
            .filter_map(|b| PmlpLane::decode(b).ok())
            .collect()
    }
}

crate::coded_enum! {
    /// The operation TLV's status: how the firmware took the register access
    /// (mstflint's `return_by_reg_status`).
    pub enum RegisterStatus: u8 {
        Ok = 0, "OK", "ok";
        Busy = 1, "device busy", "busy";
        VersionNotSupported = 2, "version not supported", "version";
        UnknownTlv = 3, "unknown TLV", "tlv";
        RegisterNotSupported = 4, "register not supported", "no-register";
        ClassNotSupported = 5, "class not supported", "class";
        MethodNotSupported = 6, "method not supported", "method";
        BadParameter = 7, "bad parameter", "bad-param";
        ResourceNotAvailable = 8, "resource not available", "resource";
        MessageReceiptAck = 9, "message receipt acknowledged", "ack";
    }
}

crate::coded_enum! {
    /// MCIA's module status (the adb's `mcia_ext.status`).
    pub enum ModuleStatus: u8 {
        Success = 0, "SUCCESS", "ok";
        NoEeprom = 1, "NO_EEPROM_MODULE", "no-eeprom";
        NotSupported = 2, "MODULE_NOT_SUPPORTED", "unsupported";
        NotConnected = 3, "MODULE_NOT_CONNECTED", "empty";
        TypeInvalid = 4, "MODULE_TYPE_INVALID", "invalid";
        I2cError = 9, "I2C_ERROR", "i2c";
        Disabled = 16, "MODULE_DISABLED", "disabled";
    }
}

/// AccessRegister as an SMP carries it (attribute 0xFF52): the operation TLV, the register
/// TLV's header and the first [`SMP_REGISTER_BYTES`] of the register.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRegister {
    pub operation: OperationTlv,
    pub reg: RegTlv,
    pub register: [u8; SMP_REGISTER_BYTES],
}

impl AccessRegister {
    /// A query of register `register_id`, carrying `register` (its index fields set; cut
    /// to what an SMP holds). The register TLV's length is what is carried, in dwords,
    /// with its own header, as mstflint's `reg_tlv.len`.
    pub fn query(register_id: u16, register: &[u8]) -> AccessRegister {
        let mut bytes = [0u8; SMP_REGISTER_BYTES];
        let n = register.len().min(SMP_REGISTER_BYTES);
        bytes[..n].copy_from_slice(&register[..n]);
        AccessRegister {
            operation: OperationTlv {
                len: 4,
                tlv_type: TLV_OPERATION,
                class: 1,
                method: METHOD_QUERY,
                register_id,
                ..OperationTlv::default()
            },
            reg: RegTlv {
                len: ((SMP_REGISTER_BYTES + 4) / 4) as u16,
                tlv_type: TLV_REG,
            },
            register: bytes,
        }
    }

    /// The register, padded with zeros to `len` bytes so a layout longer than an SMP
    /// carries decodes (its fields past the carried bytes read 0).
    pub fn register_padded(&self, len: usize) -> Vec<u8> {
        let mut out = self.register.to_vec();
        out.resize(len.max(SMP_REGISTER_BYTES), 0);
        out
    }

    /// Whether a reply is an answer to `asked`: the same register, as an operation TLV.
    /// A node that does not implement AccessRegister may answer the SMP with something
    /// else (the simulator answers zeros).
    pub fn answers(&self, asked: &AccessRegister) -> bool {
        self.operation.tlv_type == TLV_OPERATION
            && self.operation.register_id == asked.operation.register_id
            && self.reg.tlv_type == TLV_REG
    }

    pub fn status(&self) -> RegisterStatus {
        RegisterStatus::from_code(self.operation.status)
    }
}

impl crate::attribute::Attribute for AccessRegister {
    type Class = crate::attribute::SubnMgt;
    const ID: u16 = SMP_ACCESS_REGISTER;
    const NAME: &'static str = "AccessRegister";

    fn decode(payload: &[u8]) -> Result<Self, crate::DecodeError> {
        crate::wire::need(payload, 20 + SMP_REGISTER_BYTES, "AccessRegister")?;
        let mut register = [0u8; SMP_REGISTER_BYTES];
        register.copy_from_slice(&payload[20..20 + SMP_REGISTER_BYTES]);
        Ok(AccessRegister {
            operation: OperationTlv::decode(&payload[..16])?,
            reg: RegTlv::decode(&payload[16..20])?,
            register,
        })
    }

    fn encode_into(&self, payload: &mut [u8]) -> Result<(), crate::EncodeError> {
        let got = payload.len();
        let area = payload.get_mut(..20 + SMP_REGISTER_BYTES).ok_or(
            crate::EncodeError::BufferTooSmall {
                what: "AccessRegister",
                need: 20 + SMP_REGISTER_BYTES,
                got,
            },
        )?;
        self.operation.encode_into(&mut area[..16])?;
        self.reg.encode_into(&mut area[16..20])?;
        area[20..].copy_from_slice(&self.register);
        Ok(())
    }
}

/// The query of `len` (at most [`MCIA_SMP_CHUNK`]) module bytes from `address` (0-255:
/// the lower half, then the page's upper half) of `page` in `bank`, at I2C address `i2c`
/// of `module` in `slot`.
pub fn mcia_query(
    slot: u8,
    module: u8,
    i2c: u8,
    bank: u8,
    page: u8,
    address: u16,
    len: u16,
) -> AccessRegister {
    let mcia = Mcia {
        slot_index: slot,
        module,
        i2c_device_address: i2c,
        page_number: page,
        bank_number: bank,
        device_address: address,
        size: len.min(MCIA_SMP_CHUNK as u16),
        ..Mcia::default()
    };
    AccessRegister::query(MCIA, &mcia.to_bytes())
}

/// What an MCIA answer says: the module's status, and the bytes read (`size` of them).
pub fn mcia_answer(reply: &AccessRegister) -> Result<(ModuleStatus, Vec<u8>), crate::DecodeError> {
    let bytes = reply.register_padded(Mcia::WIRE_LEN);
    let mcia = Mcia::decode(&bytes)?;
    let data = Mcia::data.bytes(&bytes)?;
    let n = usize::from(mcia.size).min(MCIA_SMP_CHUNK);
    Ok((ModuleStatus::from_code(mcia.status), data[..n].to_vec()))
}

/// The query of local port `local_port`'s module mapping.
pub fn pmlp_query(local_port: u16) -> AccessRegister {
    let pmlp = Pmlp {
        local_port: (local_port & 0xff) as u8,
        lp_msb: ((local_port >> 8) & 0x3) as u8,
        ..Pmlp::default()
    };
    AccessRegister::query(PMLP, &pmlp.to_bytes())
}

/// The query of local port `local_port`'s InfiniBand port number.
pub fn plib_query(local_port: u16) -> AccessRegister {
    let plib = Plib {
        local_port: (local_port & 0xff) as u8,
        lp_msb: ((local_port >> 8) & 0x3) as u8,
        ..Plib::default()
    };
    AccessRegister::query(PLIB, &plib.to_bytes())
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
    #[test]
    fn an_smp_access_register_carries_tlvs_and_44_register_bytes() {
        use crate::attribute::Attribute;
        // mstflint's SMP path: 16-byte operation TLV, 4-byte register TLV header, then
        // the register; reg_tlv.len = (44 + 4) / 4 = 12 dwords.
        let q = mcia_query(0, 7, 0x50, 0, 0x03, 128 + 28, 28);
        let mut payload = [0u8; 64];
        q.encode_into(&mut payload).unwrap();
        assert_eq!(&payload[..8], &[0, 0, 0x00, 0x81, 0x01, 0x02, 0x90, 0x14]);
        assert_eq!(&payload[16..20], &[0, 0, 0x01, 0x83]);
        // MCIA: module 7 in byte 1, i2c 0x50 in byte 4, page 3 in byte 5, address 156
        // in bytes 6-7, size 28 in bytes 10-11.
        assert_eq!(
            &payload[20..32],
            &[0, 7, 0, 0, 0x50, 0x03, 0x00, 156, 0, 0, 0, 28]
        );
        let back = AccessRegister::decode(&payload).unwrap();
        assert_eq!(back, q);
        assert!(back.answers(&q));
        // A reply of zeros (what a node without AccessRegister may send) answers nothing.
        let zeros = AccessRegister::decode(&[0u8; 64]).unwrap();
        assert!(!zeros.answers(&q));
        // The module bytes come back from register byte 16 on, `size` of them.
        let mut reply = back;
        reply.register[3] = 0;
        reply.register[16] = 0x11;
        reply.register[43] = 0xab;
        let (status, data) = mcia_answer(&reply).unwrap();
        assert_eq!(status, ModuleStatus::Success);
        assert_eq!((data.len(), data[0], data[27]), (28, 0x11, 0xab));
        reply.register[3] = 3;
        assert_eq!(mcia_answer(&reply).unwrap().0, ModuleStatus::NotConnected);
        assert!(AccessRegister::decode(&[0u8; 63]).is_err());
    }

    #[test]
    fn plib_and_pmlp_fields_lie_where_the_adb_puts_them() {
        // PLIB: local_port at 0x0.16 (byte 1), lp_msb at 0x0.12 (bits 13-12), ib_port at
        // 0x0.0 for 10 bits.
        let plib = Plib {
            local_port: 0x21,
            lp_msb: 1,
            ib_port: 0x2ff,
        };
        assert_eq!(&plib.to_bytes()[..4], &[0, 0x21, 0x12, 0xff]);
        assert_eq!(&plib_query(0x121).register[..4], &[0, 0x21, 0x10, 0]);
        // PMLP: rxtx at 0x0.31, local_port at byte 1, width at byte 3; each lane dword:
        // module at bits 7-0, slot_index 11-8, tx_lane 19-16, rx_lane 27-24.
        let mut bytes = [0u8; 64];
        bytes[..4].copy_from_slice(&[0x80, 5, 0, 4]);
        for lane in 0..4u8 {
            let at = 4 + 4 * usize::from(lane);
            bytes[at..at + 4].copy_from_slice(&[lane, 4 + lane, 0x01, 12]);
        }
        let pmlp = Pmlp::decode(&bytes).unwrap();
        assert!(pmlp.rxtx);
        assert_eq!((pmlp.local_port, pmlp.width), (5, 4));
        let lanes = pmlp.used_lanes();
        assert_eq!(lanes.len(), 4);
        assert_eq!(
            (
                lanes[2].module,
                lanes[2].slot_index,
                lanes[2].tx_lane,
                lanes[2].rx_lane
            ),
            (12, 1, 6, 2)
        );
        // Only the first 44 bytes travel in an SMP: all eight lanes fit, and decode from
        // what an SMP carries.
        let carried = AccessRegister::query(PMLP, &bytes);
        assert_eq!(
            Pmlp::decode(&carried.register_padded(Pmlp::WIRE_LEN))
                .unwrap()
                .used_lanes(),
            lanes
        );
    }
}
