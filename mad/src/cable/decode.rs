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

/// The halves a reader asks for once those of [`halves_to_read`] are in: a CMIS module's
/// page 11h in every bank beyond bank 0 that its page 01h says it has (byte 142 bits 1-0:
/// banks 0-1, or 0-3), lanes 9 to 32.
pub fn bank_halves(memory: &ModuleMemory) -> Vec<HalfAddr> {
    let Ok(MapKind::Cmis) = memory.map() else {
        return Vec::new();
    };
    let Some(page1) = memory.half(HalfAddr::page(ADDR_A0, 0x01)) else {
        return Vec::new();
    };
    let banks: u8 = match page1[142 - HALF] & 0x03 {
        0x01 => 2,
        0x02 => 4,
        _ => 1,
    };
    (1..banks)
        .map(|bank| HalfAddr {
            bank,
            ..HalfAddr::page(ADDR_A0, 0x11)
        })
        .collect()
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

    #[test]
    fn more_banks_where_page_01h_says_so() {
        let mut m = ModuleMemory::new();
        let mut lower = [0u8; HALF];
        lower[0] = 0x19;
        m.insert(HalfAddr::lower(ADDR_A0), lower);
        assert_eq!(bank_halves(&m), []);
        let mut page1 = [0u8; HALF];
        m.insert(HalfAddr::page(ADDR_A0, 1), page1);
        assert_eq!(bank_halves(&m), []);
        // Byte 142 bits 1-0 = 01b: banks 0 and 1; 10b: banks 0 to 3.
        page1[142 - HALF] = 0x01;
        m.insert(HalfAddr::page(ADDR_A0, 1), page1);
        let at = |bank| HalfAddr {
            bank,
            ..HalfAddr::page(ADDR_A0, 0x11)
        };
        assert_eq!(bank_halves(&m), [at(1)]);
        page1[142 - HALF] = 0x02;
        m.insert(HalfAddr::page(ADDR_A0, 1), page1);
        assert_eq!(bank_halves(&m), [at(1), at(2), at(3)]);
    }
}
