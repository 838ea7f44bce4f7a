//! One module per subcommand: `Args` (clap) and `run`.

pub mod check;
pub mod counters;
pub mod demo;
pub mod diff;
pub mod discover;
pub mod gen;
pub mod host;
pub mod links;
pub mod port;
pub mod query;
pub mod route;
pub mod sa;
pub mod serve;
pub mod sim;
pub mod sm;
pub mod tui;
