//! Glue shared by the `ibscope` binary and the integration tests: CLI options, commands,
//! simulator orchestration. The fabric logic lives in `ibscope-topo`, the wire in `ibscope-mad`.

pub mod cli;
pub mod cmd;
pub mod fabric;
pub mod output;
pub mod signals;
pub mod sim;
pub mod tui;
