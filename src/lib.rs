//! Glue shared by the `ibscope` binary and the integration tests: CLI options, commands,
//! simulator orchestration. The fabric logic lives in `ibscope-topo`, the wire in `ibscope-mad`.

pub mod app;
pub mod cli;
pub mod cmd;
pub mod config;
pub mod fabric;
pub mod fabric_set;
pub mod memory;
pub mod output;
pub mod settings;
pub mod signals;

/// Log to stderr at the level -v asks for; `IBSCOPE_LOG` (e.g. `debug`) overrides. In
/// colour only on a terminal (and without `NO_COLOR`): a file, a pipe or the journal of a
/// service gets plain lines.
pub fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_env("IBSCOPE_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour_on_stderr())
        .with_target(false)
        .init();
}

/// Whether what goes to stderr may be in colour: a terminal, and no `NO_COLOR` (any
/// non-empty value turns colour off, as no-color.org has it).
fn colour_on_stderr() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").map_or(true, |v| v.is_empty())
}
