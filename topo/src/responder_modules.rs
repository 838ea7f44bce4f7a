//! Pluggable modules the in-process fabric ([`crate::responder`]) serves: recorded module
//! memory on chosen ports, answered to SubnSet(AccessRegister) queries of PLIB, PMLP and
//! MCIA as the registers' layouts (`ibscope_mad::cable::register`) say a device answers.
//!
//! The numbering is a split-capable switch's, so that a reader which took an InfiniBand
//! port for a local port would read the wrong module: a switch's InfiniBand port P is its
//! local port 2P-1 (the even local ports are the unused halves of split cages) and its
//! module P-1, four lanes; a CA's port P is its local port P and module P-1. A cage without
//! recorded memory is empty (MODULE_NOT_CONNECTED).

use std::collections::HashMap;

use ibscope_mad::cable::register::{
    AccessRegister, Mcia, ModuleStatus, Plib, Pmlp, PmlpLane, RegisterStatus, MCIA, MCIA_SMP_CHUNK,
    PLIB, PMLP, SMP_REGISTER_BYTES,
};
use ibscope_mad::cable::{HalfAddr, ModuleMemory, HALF};

/// Lanes of every module the responder serves.
const LANES: u8 = 4;

/// Recorded module memory by (node GUID as served, port number).
#[derive(Debug, Clone, Default)]
pub struct RecordedModules {
    modules: HashMap<(u64, u8), ModuleMemory>,
}

/// The node an AccessRegister query reaches, as the responder models it.
#[derive(Debug, Clone, Copy)]
pub struct RegisterTarget {
    pub guid: u64,
    pub switch: bool,
    pub num_ports: u8,
}

impl RecordedModules {
    pub fn new() -> RecordedModules {
        RecordedModules::default()
    }

    /// Puts `memory` in port `port` of the node with GUID `guid`.
    pub fn insert(&mut self, guid: u64, port: u8, memory: ModuleMemory) {
        self.modules.insert((guid, port), memory);
    }

    pub fn len(&self) -> usize {
        self.modules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.modules.is_empty()
    }

    /// The InfiniBand port local port `local` carries, if any.
    fn ib_port(target: RegisterTarget, local: u16) -> Option<u8> {
        let port = if target.switch {
            (local % 2 == 1).then(|| local.div_ceil(2))?
        } else {
            local
        };
        u8::try_from(port)
            .ok()
            .filter(|p| (1..=target.num_ports).contains(p))
    }

    /// The answer to an AccessRegister query `asked` at `target`.
    pub fn answer(&self, target: RegisterTarget, asked: &AccessRegister) -> AccessRegister {
        let mut reply = asked.clone();
        let (status, register) = match asked.operation.register_id {
            PLIB => self.plib(target, asked),
            PMLP => self.pmlp(target, asked),
            MCIA => self.mcia(target, asked),
            _ => (RegisterStatus::RegisterNotSupported, asked.register),
        };
        reply.operation.status = status.code();
        reply.register = register;
        reply
    }

    fn plib(
        &self,
        target: RegisterTarget,
        asked: &AccessRegister,
    ) -> (RegisterStatus, [u8; SMP_REGISTER_BYTES]) {
        let Ok(mut plib) = Plib::decode(&asked.register) else {
            return (RegisterStatus::BadParameter, asked.register);
        };
        if !target.switch {
            return (RegisterStatus::RegisterNotSupported, asked.register);
        }
        let local = u16::from(plib.local_port) | u16::from(plib.lp_msb) << 8;
        if local == 0 || local > 2 * u16::from(target.num_ports) {
            return (RegisterStatus::BadParameter, asked.register);
        }
        plib.ib_port = Self::ib_port(target, local).map_or(0, u16::from);
        (RegisterStatus::Ok, carried(&plib.to_bytes()))
    }

    fn pmlp(
        &self,
        target: RegisterTarget,
        asked: &AccessRegister,
    ) -> (RegisterStatus, [u8; SMP_REGISTER_BYTES]) {
        let padded = asked.register_padded(Pmlp::WIRE_LEN);
        let Ok(mut pmlp) = Pmlp::decode(&padded) else {
            return (RegisterStatus::BadParameter, asked.register);
        };
        let local = u16::from(pmlp.local_port) | u16::from(pmlp.lp_msb) << 8;
        pmlp.width = 0;
        pmlp.lanes = [0; 32];
        if let Some(port) = Self::ib_port(target, local) {
            pmlp.width = LANES;
            for lane in 0..LANES {
                let at = usize::from(lane) * 4;
                let bytes = PmlpLane {
                    module: port - 1,
                    tx_lane: lane,
                    rx_lane: lane,
                    ..PmlpLane::default()
                }
                .to_bytes();
                pmlp.lanes[at..at + 4].copy_from_slice(&bytes);
            }
        } else if local == 0 || local > 2 * u16::from(target.num_ports) {
            return (RegisterStatus::BadParameter, asked.register);
        }
        (RegisterStatus::Ok, carried(&pmlp.to_bytes()))
    }

    fn mcia(
        &self,
        target: RegisterTarget,
        asked: &AccessRegister,
    ) -> (RegisterStatus, [u8; SMP_REGISTER_BYTES]) {
        let padded = asked.register_padded(Mcia::WIRE_LEN);
        let Ok(mut mcia) = Mcia::decode(&padded) else {
            return (RegisterStatus::BadParameter, asked.register);
        };
        let size = usize::from(mcia.size);
        let address = usize::from(mcia.device_address);
        if size > MCIA_SMP_CHUNK || address + size > 2 * HALF || (address % HALF) + size > HALF {
            return (RegisterStatus::BadParameter, asked.register);
        }
        let port = mcia.module.wrapping_add(1);
        let mut out = padded.clone();
        let status = match self.modules.get(&(target.guid, port)) {
            _ if port > target.num_ports => ModuleStatus::NotSupported,
            None => ModuleStatus::NotConnected,
            Some(memory) => {
                let half = if address < HALF {
                    HalfAddr::lower(mcia.i2c_device_address)
                } else {
                    HalfAddr {
                        i2c: mcia.i2c_device_address,
                        bank: mcia.bank_number,
                        page: mcia.page_number,
                        upper: true,
                    }
                };
                match memory.half(half) {
                    Some(bytes) => {
                        let from = address % HALF;
                        out[16..16 + size].copy_from_slice(&bytes[from..from + size]);
                        ModuleStatus::Success
                    }
                    None => ModuleStatus::I2cError,
                }
            }
        };
        mcia.status = status.code();
        let _ = mcia.write_fields(&mut out);
        (RegisterStatus::Ok, carried(&out))
    }
}

/// The first bytes of a register, as many as an SMP carries.
fn carried(register: &[u8]) -> [u8; SMP_REGISTER_BYTES] {
    let mut out = [0u8; SMP_REGISTER_BYTES];
    let n = register.len().min(SMP_REGISTER_BYTES);
    out[..n].copy_from_slice(&register[..n]);
    out
}
