//! One module per subcommand: `Args` (clap) and `run`.

pub mod agent;
pub mod check;
pub mod check_plan;
pub mod completions;
pub mod config;
pub mod counters;
pub mod demo;
pub mod diff;
pub mod discover;
pub mod events;
pub mod gen;
pub mod host;
pub mod host_compare;
pub mod host_counters;
pub mod hosts;
pub mod links;
pub mod man;
pub mod nccl;
pub mod port;
pub mod query;
pub mod route;
pub mod sa;
pub mod serve;
pub mod sim;
pub mod sm;
pub mod tui;
