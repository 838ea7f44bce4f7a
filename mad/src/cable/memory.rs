//! A module's memory as it was read: 128-byte halves, each named by the I2C address, bank
//! and page it came from. Every source (ethtool netlink reads, the legacy ioctl's flat
//! layout, saved dumps, firmware registers) fills one of these; the decoders read it.

use std::collections::BTreeMap;

use super::codes::{Identifier, MapKind};

/// The size of a half page, and of one ethtool netlink or register read at most.
pub const HALF: usize = 128;

/// The I2C address of a module's main memory (SFF-8472 A0h, every QSFP and CMIS page).
pub const ADDR_A0: u8 = 0x50;
/// The I2C address of SFF-8472's diagnostics (A2h).
pub const ADDR_A2: u8 = 0x51;

/// Where one half was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HalfAddr {
    /// 7-bit I2C address: [`ADDR_A0`] or [`ADDR_A2`].
    pub i2c: u8,
    pub bank: u8,
    pub page: u8,
    /// Bytes 128-255 of the page; the lower half (bytes 0-127) is one for all pages.
    pub upper: bool,
}

impl HalfAddr {
    /// The lower half at `i2c`.
    pub const fn lower(i2c: u8) -> HalfAddr {
        HalfAddr {
            i2c,
            bank: 0,
            page: 0,
            upper: false,
        }
    }
    /// Upper page `page` of bank 0 at `i2c`.
    pub const fn page(i2c: u8, page: u8) -> HalfAddr {
        HalfAddr {
            i2c,
            bank: 0,
            page,
            upper: true,
        }
    }
}

impl std::fmt::Display for HalfAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let addr = if self.i2c == ADDR_A2 { "A2h" } else { "A0h" };
        if self.upper {
            write!(f, "{addr} page {:02X}h", self.page)?;
            if self.bank != 0 {
                write!(f, " bank {}", self.bank)?;
            }
            Ok(())
        } else {
            write!(f, "{addr} lower page")
        }
    }
}

/// What went wrong putting a module's memory together or reading it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    #[error("no module memory: the dump is empty")]
    Empty,
    #[error("{0} was not read")]
    Missing(HalfAddr),
    #[error("identifier 0x{0:02x} ({1}) has no memory map ibscope reads")]
    UnknownIdentifier(u8, &'static str),
    #[error("a raw dump of {0} bytes is not a layout ethtool writes (128, 256, 512, 640 or 768)")]
    RawLength(usize),
    #[error("{what} is incomplete: {got} of 128 bytes")]
    Incomplete { what: HalfAddr, got: usize },
}

/// A module's memory: the halves that were read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModuleMemory {
    halves: BTreeMap<HalfAddr, [u8; HALF]>,
}

impl ModuleMemory {
    pub fn new() -> ModuleMemory {
        ModuleMemory::default()
    }
    /// Adds (or replaces) one half.
    pub fn insert(&mut self, at: HalfAddr, bytes: [u8; HALF]) {
        self.halves.insert(at, bytes);
    }
    /// One half, if it was read.
    pub fn half(&self, at: HalfAddr) -> Option<&[u8; HALF]> {
        self.halves.get(&at)
    }
    /// One half, or the error naming it.
    pub fn need(&self, at: HalfAddr) -> Result<&[u8; HALF], MemoryError> {
        self.half(at).ok_or(MemoryError::Missing(at))
    }
    /// Every half read, in address order.
    pub fn halves(&self) -> impl Iterator<Item = (HalfAddr, &[u8; HALF])> {
        self.halves.iter().map(|(a, b)| (*a, b))
    }
    pub fn is_empty(&self) -> bool {
        self.halves.is_empty()
    }
    /// Byte 0 of the main memory: the SFF-8024 identifier.
    pub fn identifier(&self) -> Result<Identifier, MemoryError> {
        let lower = self.need(HalfAddr::lower(ADDR_A0))?;
        Ok(Identifier::from_code(lower[0]))
    }
    /// The map the identifier says to read.
    pub fn map(&self) -> Result<MapKind, MemoryError> {
        let id = self.identifier()?;
        MapKind::of(id).ok_or(MemoryError::UnknownIdentifier(id.code(), id.name()))
    }

    /// The memory of a raw dump in the flat layout ethtool's ioctl path and `ethtool -m
    /// DEV raw on` write (the kernel's `ETH_MODULE_SFF_*` lengths): SFF-8079/8472 as A0h
    /// (256 bytes) then A2h (256); SFF-8436/8636 as the lower page, then upper pages 00h to
    /// 03h; CMIS as the lower page, then pages 00h, 01h, 02h, 10h and 11h (768 bytes). A
    /// dump cut short keeps the whole halves it has.
    pub fn from_raw(bytes: &[u8]) -> Result<ModuleMemory, MemoryError> {
        let first = *bytes.first().ok_or(MemoryError::Empty)?;
        if bytes.len() % HALF != 0 || bytes.len() > 6 * HALF {
            return Err(MemoryError::RawLength(bytes.len()));
        }
        let id = Identifier::from_code(first);
        let map = MapKind::of(id).ok_or(MemoryError::UnknownIdentifier(first, id.name()))?;
        let order = raw_order(map);
        let mut memory = ModuleMemory::new();
        for (chunk, at) in bytes.chunks_exact(HALF).zip(order) {
            let mut half = [0u8; HALF];
            half.copy_from_slice(chunk);
            memory.insert(*at, half);
        }
        Ok(memory)
    }

    /// The memory of bytes read at linear offsets of the raw layout (a text dump), keeping
    /// the halves read whole.
    pub fn from_linear(bytes: &BTreeMap<usize, u8>) -> Result<ModuleMemory, MemoryError> {
        let first = *bytes.get(&0).ok_or(MemoryError::Empty)?;
        let id = Identifier::from_code(first);
        let map = MapKind::of(id).ok_or(MemoryError::UnknownIdentifier(first, id.name()))?;
        let mut memory = ModuleMemory::new();
        for (i, at) in raw_order(map).iter().enumerate() {
            match whole_half(bytes, i * HALF) {
                Ok(Some(half)) => memory.insert(*at, half),
                Ok(None) => {}
                Err(got) => return Err(MemoryError::Incomplete { what: *at, got }),
            }
        }
        Ok(memory)
    }

    /// Adds the halves of one page read at offsets 0-255 of that page (a page dump: lower
    /// half at 0-127, the page's upper half at 128-255).
    pub fn insert_page_bytes(
        &mut self,
        i2c: u8,
        bank: u8,
        page: u8,
        bytes: &BTreeMap<usize, u8>,
    ) -> Result<(), MemoryError> {
        let halves = [
            (0, HalfAddr::lower(i2c)),
            (
                HALF,
                HalfAddr {
                    i2c,
                    bank,
                    page,
                    upper: true,
                },
            ),
        ];
        for (start, at) in halves {
            match whole_half(bytes, start) {
                Ok(Some(half)) => self.insert(at, half),
                Ok(None) => {}
                Err(got) => return Err(MemoryError::Incomplete { what: at, got }),
            }
        }
        Ok(())
    }
}

/// The halves of a raw dump of `map`, in file order.
fn raw_order(map: MapKind) -> &'static [HalfAddr] {
    const SFF8472: [HalfAddr; 4] = [
        HalfAddr::lower(ADDR_A0),
        HalfAddr::page(ADDR_A0, 0),
        HalfAddr::lower(ADDR_A2),
        HalfAddr::page(ADDR_A2, 0),
    ];
    const SFF8636: [HalfAddr; 5] = [
        HalfAddr::lower(ADDR_A0),
        HalfAddr::page(ADDR_A0, 0),
        HalfAddr::page(ADDR_A0, 1),
        HalfAddr::page(ADDR_A0, 2),
        HalfAddr::page(ADDR_A0, 3),
    ];
    const CMIS: [HalfAddr; 6] = [
        HalfAddr::lower(ADDR_A0),
        HalfAddr::page(ADDR_A0, 0),
        HalfAddr::page(ADDR_A0, 1),
        HalfAddr::page(ADDR_A0, 2),
        HalfAddr::page(ADDR_A0, 0x10),
        HalfAddr::page(ADDR_A0, 0x11),
    ];
    match map {
        MapKind::Sff8472 => &SFF8472,
        MapKind::Sff8636 => &SFF8636,
        MapKind::Cmis => &CMIS,
    }
}

/// The half starting at `start` if every byte of it is there, `None` if none is, or how
/// many are there if only some.
fn whole_half(bytes: &BTreeMap<usize, u8>, start: usize) -> Result<Option<[u8; HALF]>, usize> {
    let mut half = [0u8; HALF];
    let mut got = 0;
    for (offset, b) in bytes.range(start..start + HALF) {
        half[offset - start] = *b;
        got += 1;
    }
    match got {
        0 => Ok(None),
        HALF => Ok(Some(half)),
        partial => Err(partial),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_layouts_follow_the_identifier() {
        let mut sfp = vec![0u8; 512];
        sfp[0] = 0x03;
        sfp[256] = 0x4e;
        let m = ModuleMemory::from_raw(&sfp).unwrap();
        assert_eq!(m.map().unwrap(), MapKind::Sff8472);
        assert_eq!(m.half(HalfAddr::lower(ADDR_A2)).unwrap()[0], 0x4e);

        let mut qsfp = vec![0u8; 640];
        qsfp[0] = 0x11;
        qsfp[512] = 0x4b;
        let m = ModuleMemory::from_raw(&qsfp).unwrap();
        assert_eq!(m.half(HalfAddr::page(ADDR_A0, 3)).unwrap()[0], 0x4b);

        let mut cmis = vec![0u8; 768];
        cmis[0] = 0x18;
        cmis[640] = 0x44;
        let m = ModuleMemory::from_raw(&cmis).unwrap();
        assert_eq!(m.half(HalfAddr::page(ADDR_A0, 0x11)).unwrap()[0], 0x44);
    }

    #[test]
    fn odd_raw_dumps_are_refused() {
        assert_eq!(ModuleMemory::from_raw(&[]), Err(MemoryError::Empty));
        assert_eq!(
            ModuleMemory::from_raw(&[0x11; 100]),
            Err(MemoryError::RawLength(100))
        );
        assert!(matches!(
            ModuleMemory::from_raw(&[0x7f; 256]),
            Err(MemoryError::UnknownIdentifier(0x7f, _))
        ));
    }

    #[test]
    fn a_partial_half_is_named() {
        let bytes: BTreeMap<usize, u8> = (0..200).map(|i| (i, 0x11)).collect();
        assert_eq!(
            ModuleMemory::from_linear(&bytes),
            Err(MemoryError::Incomplete {
                what: HalfAddr::page(ADDR_A0, 0),
                got: 72
            })
        );
    }
}
