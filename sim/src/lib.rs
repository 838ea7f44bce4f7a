//! A simulated fabric: `ibsim` (the fabric) plus, optionally, OpenSM under the umad2sim shim.
//! `ibscope sim`, `ibscope demo` and the integration tests use it; nothing else does.

pub mod simulator;
pub mod statedir;

pub use simulator::*;
