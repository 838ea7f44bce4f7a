//! InfiniBand management datagrams: wire codecs and a libibumad transport.
//!
//! This crate knows bytes and transports and nothing of graphs. Layouts follow the
//! InfiniBand Architecture Specification, Volume 1 (chapters 13-16).

// Lets `wire_struct!` name this crate the same way inside and outside it.
extern crate self as ibscope_mad;

pub mod attr;
pub mod codes;
pub mod engine;
pub mod error;
pub mod header;
pub mod sa;
pub mod smp;
pub mod umad;
pub mod wire;

pub use error::{DecodeError, EncodeError};

#[doc(hidden)]
pub use serde as __serde;
#[doc(hidden)]
pub use tracing as __tracing;
