//! One module per subcommand: `Args` (clap) and `run`.

pub mod demo;
pub mod diff;
pub mod discover;
pub mod gen;
pub mod query;
pub mod route;
pub mod sim;
