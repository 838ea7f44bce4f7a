//! InfiniBand management datagrams: wire codecs and a libibumad transport.
//!
//! This crate knows bytes and transports and nothing of graphs. Layouts follow the
//! InfiniBand Architecture Specification, Volume 1 (chapters 13-16).
//!
//! # Where things live
//!
//! - [`wire`]: bit access in IB numbering and `wire_struct!`, which turns one layout table
//!   per structure (Rust name, bit offset, width, specification name, role) into the struct,
//!   its codec, its table ([`wire::FieldSpec`] rows) and one [`wire::Slot`] per field. Every
//!   byte offset of a MAD is a row of such a table.
//! - [`header`]: the common MAD header, class codes, methods, the class version of each class
//!   and the MAD status.
//! - [`smp`] and [`sa`]: MAD framing (`SmpFrame`, `GmpFrame`, `SaFrame`, `RmppHeader`),
//!   directed routes, request builders, [`smp::MadView`]; SA records.
//! - [`attr`]: SMP and PerfMgt attribute codecs, the counters' kinds, link speeds and widths.
//! - [`attribute`]: the [`attribute::Attribute`] trait (class, attribute ID, name, codec) and
//!   the management classes (`SubnMgt`, `PerfMgt`, `SubnAdm`).
//! - [`codes`]: `coded_enum!` (coded values with spec and short names) and GUID text.
//! - [`umad`]: the libibumad binding and the umad header; [`relay`]: MADs carried over a
//!   byte stream to an `ibscope agent` in another process (or on another host);
//!   [`transport`]: either, as the engine's port; [`engine`]: requests, the pure ledger and
//!   the I/O loop; [`runtime_dir`]: the private working directory of the processes a
//!   command starts (relay agents, the simulator's).
//!
//! # Recipes
//!
//! **Add an attribute**: one `wire_struct!` with `attribute(Class, id, "Name")` after its
//! length, in `attr/smp_attrs.rs` (SMP), `attr/perf_attrs.rs` (PerfMgt) or `sa.rs` (an SA
//! record); each row carries the specification's name. Then `engine.get::<A>(target,
//! modifier)` reads it, `Request::get::<A>` puts it in a batch and `Response::decode::<A>`
//! decodes the reply. Add its golden bytes (from the specification or a reference tool's
//! capture) to `attr/golden.rs` and a line to `tests/it/codecs_proptest.rs`.
//!
//! ```
//! use ibscope_mad::attribute::{Attribute, SubnMgt};
//! use ibscope_mad::engine::Request;
//! use ibscope_mad::smp::SmpRoute;
//!
//! ibscope_mad::wire_struct! {
//!     /// GUIDInfo (IBA 14.2.5.5): the first two of a block's eight GUIDs.
//!     pub struct GuidInfo (16) attribute(SubnMgt, 0x0014, "GUIDInfo") {
//!         pub guid0: u64 = 0, 64, "GUID0";
//!         pub guid1: u64 = 64, 64, "GUID1";
//!     }
//! }
//! let request = Request::get::<GuidInfo>(&SmpRoute::Lid(1), 0);
//! assert_eq!(request.header().unwrap().attribute_id, GuidInfo::ID);
//! assert_eq!(GuidInfo::FIELDS[1].name, "GUID1");
//! ```
//!
//! **Add a counter**: one row in `PortCounters` or `PortCountersExtended`
//! (`attr/perf_attrs.rs`) with its name and role, e.g.
//! `pub port_foo: u16 = 400, 16, "PortFoo", counter(Error, ALWAYS);`. Its width,
//! saturation, kind (an `Error` row joins `ERROR_COUNTERS`, what `check` and the thresholds
//! look at), the capability it needs and every name list (`PORT_COUNTER_NAMES`,
//! `EXTENDED_COUNTER_NAMES`, ...) follow from that row.
//!
//! **Add a coded value**: one line `Variant = code, "Spec name", "short";` in its type's
//! `coded_enum!` table (`PortState`, `PhysState`, `NodeType`, `SmState` in
//! `attr/smp_attrs.rs`, `Width` in `attr/link.rs`, `MadStatusCode` in `header.rs`). A new
//! coded type is one new `coded_enum!` beside the attribute field that carries it.

// Lets `wire_struct!` name this crate the same way inside and outside it.
extern crate self as ibscope_mad;

pub mod attr;
pub mod attribute;
pub mod codes;
pub mod engine;
pub mod error;
pub mod header;
pub mod relay;
pub mod runtime_dir;
pub mod sa;
mod shim_stderr;
pub mod smp;
pub mod transport;
pub mod umad;
pub mod wire;

pub use error::{DecodeError, EncodeError};

#[doc(hidden)]
pub use serde as __serde;
#[doc(hidden)]
pub use tracing as __tracing;
