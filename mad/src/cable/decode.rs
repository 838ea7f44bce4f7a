//! A module's memory to a [`Module`]: the identifier picks the map.

use super::codes::MapKind;
use super::memory::{MemoryError, ModuleMemory};
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
