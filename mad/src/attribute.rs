//! Typed attributes: every attribute codec knows its management class, its attribute ID
//! and its name, so a caller asks for a `PortInfo` and gets one back
//! (`engine.get::<PortInfo>(&route, port)`), never pairing an attribute ID with a decoder by
//! hand. Attribute IDs are per class (PortCounters, SwitchInfo and PortInfoRecord are all
//! 0x12, in three classes): each is declared once, in its codec's `wire_struct!` line.

use crate::error::{DecodeError, EncodeError};
use crate::header::{class, MAD_SIZE};
use crate::smp::{build_gmp, build_smp, GmpFrame, SmpFrame, SmpRoute};
use crate::umad::{Dest, GSI_QKEY};
use crate::wire::{Region, Slot};

/// A management class family: how its MADs are addressed and where the attribute lies in
/// them.
pub trait Class {
    /// Who a request goes to: an [`SmpRoute`] for SMPs, the agent's LID for GMPs.
    type Target: ?Sized;
    /// Where the attribute lies in a MAD of this class.
    const PAYLOAD: Slot<Region>;
    /// A request's MAD and where it goes: `method` on `attribute_id`/`modifier`, addressed
    /// to `target`, with `payload` (cut to the data area) as the attribute. (The engine's
    /// `Request` is made of these; the class knows nothing of the engine.)
    fn frame(
        target: &Self::Target,
        method: u8,
        attribute_id: u16,
        modifier: u32,
        payload: &[u8],
    ) -> ([u8; MAD_SIZE], Dest);
}

/// An attribute codec of one management class.
pub trait Attribute: Sized {
    type Class: Class;
    /// The attribute ID in its class.
    const ID: u16;
    /// The specification's name, e.g. "PortInfo".
    const NAME: &'static str;
    /// Decode from the attribute payload of a MAD (untrusted bytes).
    fn decode(payload: &[u8]) -> Result<Self, DecodeError>;
    /// Encode into the start of an attribute payload.
    fn encode_into(&self, payload: &mut [u8]) -> Result<(), EncodeError>;
}

/// The attribute payload of `mad` for class `C` (empty if `mad` is shorter than a MAD).
pub fn payload<C: Class>(mad: &[u8]) -> &[u8] {
    C::PAYLOAD.bytes(mad).unwrap_or(&[])
}

/// Subnet management (SMPs, IBA 14): LID routed or directed route, by the route.
pub enum SubnMgt {}

/// Performance management (the PMA of every port, IBA 16.1), over QP1.
pub enum PerfMgt {}

/// Subnet administration (the SA, served by the master SM over QP1, IBA 15). Its requests
/// are framed where the SA framing is (`sa.rs`).
pub enum SubnAdm {}

/// A GMP's destination: the agent at `lid` on QP1.
pub(crate) fn gsi(lid: u16) -> Dest {
    Dest::Gsi {
        lid,
        qpn: 1,
        qkey: GSI_QKEY,
    }
}

impl Class for SubnMgt {
    type Target = SmpRoute;
    const PAYLOAD: Slot<Region> = SmpFrame::data;
    fn frame(
        route: &SmpRoute,
        method: u8,
        attribute_id: u16,
        modifier: u32,
        payload: &[u8],
    ) -> ([u8; MAD_SIZE], Dest) {
        (
            build_smp(route, method, attribute_id, modifier, 0, payload),
            Dest::Smp(route.clone()),
        )
    }
}

impl Class for PerfMgt {
    type Target = u16;
    const PAYLOAD: Slot<Region> = GmpFrame::data;
    fn frame(
        lid: &u16,
        method: u8,
        attribute_id: u16,
        modifier: u32,
        payload: &[u8],
    ) -> ([u8; MAD_SIZE], Dest) {
        (
            build_gmp(class::PERF, method, attribute_id, modifier, payload),
            gsi(*lid),
        )
    }
}
