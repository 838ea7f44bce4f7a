//! A simulated fabric: `ibsim` (the fabric) plus, optionally, OpenSM under the umad2sim shim.
//! `ibscope sim`, `ibscope demo` and the integration tests use it; nothing else does.

mod process;
mod simulator;
mod size;
mod state;

pub use process::{process_alive, run_with_timeout};
pub use simulator::{interrupt_waits_when, Sim, SimOptions, SHIM_PATH, TOPOLOGY_ENV};
pub use size::{topology_size, FabricSize};
pub use state::{default_name, default_state_dir, state_base_dir, SimStatus};
