//! A module's memory to a [`Module`]: the identifier picks the map.

use super::codes::{Identifier, MapKind};
use super::memory::{HalfAddr, MemoryError, ModuleMemory, ADDR_A0, ADDR_A2, HALF};
use super::model::Module;
use super::{cmis, sff8472, sff8636};

/// Decodes whatever map the module's identifier names.
pub fn decode(memory: &ModuleMemory) -> Result<Module, MemoryError> {
    match memory.map()? {
        MapKind::Sff8472 => sff8472::decode(memory),
        MapKind::Sff8636 => sff8636::decode(memory),
        MapKind::Cmis => cmis::decode(memory),
    }
}

/// The upper halves (and SFF-8472's A2h) the decoders read, beyond the lower page at A0h,
/// as the lower page's identifier and memory model say: what a reader asks a module for.
/// SFF-8472: A2h's lower half where the module implements diagnostics (byte 92 bit 6);
/// SFF-8636: page 00h, and 03h unless its memory is flat (byte 2 bit 2); CMIS: page 00h,
/// and 01h, 02h and bank 0's 11h unless its memory is flat (byte 2 bit 7).
pub fn halves_to_read(lower: &[u8; HALF]) -> Result<Vec<HalfAddr>, MemoryError> {
    let id = Identifier::from_code(lower[0]);
    let map = MapKind::of(id).ok_or(MemoryError::UnknownIdentifier(lower[0], id.name()))?;
    Ok(match map {
        MapKind::Sff8472 if lower[92] & 0x40 != 0 => vec![HalfAddr::lower(ADDR_A2)],
        MapKind::Sff8472 => Vec::new(),
        MapKind::Sff8636 if lower[2] & 0x04 != 0 => vec![HalfAddr::page(ADDR_A0, 0)],
        MapKind::Sff8636 => vec![HalfAddr::page(ADDR_A0, 0), HalfAddr::page(ADDR_A0, 3)],
        MapKind::Cmis if lower[2] & 0x80 != 0 => vec![HalfAddr::page(ADDR_A0, 0)],
        MapKind::Cmis => [0x00, 0x01, 0x02, 0x11]
            .into_iter()
            .map(|p| HalfAddr::page(ADDR_A0, p))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_halves_read_follow_the_identifier_and_memory_model() {
        let mut lower = [0u8; HALF];
        lower[0] = 0x03;
        assert_eq!(halves_to_read(&lower).unwrap(), []);
        lower[92] = 0x40;
        assert_eq!(halves_to_read(&lower).unwrap(), [HalfAddr::lower(ADDR_A2)]);
        lower[0] = 0x11;
        lower[2] = 0x04;
        assert_eq!(
            halves_to_read(&lower).unwrap(),
            [HalfAddr::page(ADDR_A0, 0)]
        );
        lower[2] = 0;
        assert_eq!(halves_to_read(&lower).unwrap().len(), 2);
        lower[0] = 0x18;
        assert_eq!(
            halves_to_read(&lower).unwrap().last(),
            Some(&HalfAddr::page(ADDR_A0, 0x11))
        );
        lower[2] = 0x80;
        assert_eq!(halves_to_read(&lower).unwrap().len(), 1);
        lower[0] = 0x7f;
        assert!(halves_to_read(&lower).is_err());
    }
}
