//! Pluggable modules' memory maps: SFF-8472 (SFP), SFF-8636 (QSFP+, QSFP28, QSFP56) and
//! CMIS (QSFP-DD, OSFP), decoded from untrusted bytes into one [`Module`]; the SFF-8024
//! codes they share; the saved dumps they come in; and the firmware registers that carry
//! them over InfiniBand (`register`).

pub mod cmis;
pub mod codes;
pub mod decode;
pub mod dump;
pub mod memory;
pub mod model;
pub mod rates;
pub mod register;
pub mod sff8472;
pub mod sff8636;

pub use codes::{Connector, ExtendedCompliance, HostInterface, Identifier, MapKind, Media};
pub use decode::decode;
pub use dump::{Dump, DumpError, DumpFormat};
pub use memory::{HalfAddr, MemoryError, ModuleMemory, ADDR_A0, ADDR_A2, HALF};
pub use model::Module;
