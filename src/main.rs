//! `ibscope`: InfiniBand fabric discovery, diagnostics and live terminal UI.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ibscope::cli::{exit, Global};
use ibscope::cmd;

/// InfiniBand fabric diagnostics: discovery, link health, counters, routing, live TUI.
///
/// Every command reads the fabric through the local HCA's management port (libibumad),
/// or a saved topology with --topology. Nothing changes the fabric unless the command's
/// name says so (`counters --reset`).
///
/// Exit codes: 0 ok/healthy/equal, 1 findings or differences, 2 could not run.
#[derive(Debug, Parser)]
#[command(
    name = "ibscope",
    version,
    propagate_version = true,
    max_term_width = 100
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// A bundled simulated fabric with planted faults, ibscope attached (start here).
    Demo(cmd::demo::Args),
    /// Discover the fabric and export it (ibnetdiscover text, JSON, DOT).
    Discover(cmd::discover::Args),
    /// Compare two topology files: nodes, links, width/speed/state changes.
    Diff(cmd::diff::Args),
    /// Query one attribute of one node or port (the smpquery equivalent).
    Query(cmd::query::Args),
    /// Routing analysis: dump and trace LFT routes, check for black holes, loops and credit
    /// loops, predict a collective's bandwidth on the actual routes.
    Route(cmd::route::Args),
    /// Run, drive and generate simulated fabrics (ibsim + OpenSM).
    Sim(cmd::sim::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.global.verbose);
    let result = match &cli.command {
        Command::Demo(a) => cmd::demo::run(&cli.global, a),
        Command::Discover(a) => cmd::discover::run(&cli.global, a),
        Command::Diff(a) => cmd::diff::run(&cli.global, a),
        Command::Query(a) => cmd::query::run(&cli.global, a),
        Command::Route(a) => cmd::route::run(&cli.global, a),
        Command::Sim(a) => cmd::sim::run(&cli.global, a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("ibscope: error: {e:#}");
            ExitCode::from(exit::ERROR)
        }
    }
}

fn init_logging(verbose: u8) {
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
        .with_target(false)
        .init();
}
