//! `ibscope`: InfiniBand fabric discovery, diagnostics and live terminal UI.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ibscope::cli::{exit, Global};
use ibscope::cmd;

/// InfiniBand fabric diagnostics: discovery, link health, counters, routing, live TUI.
///
/// Every command reads the fabric through the local HCA's management port (libibumad),
/// or a saved topology with --topology. Nothing changes the fabric unless the command's
/// name says so (`counters --reset`, `port disable|enable`).
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
    /// Fabric health in one report: degraded links, port states, error counters, SM.
    Check(cmd::check::Args),
    /// Port counters (PortCounters/PortCountersExtended) of every port; rates; reset.
    Counters(cmd::counters::Args),
    /// Discover the fabric and export it (ibnetdiscover text, JSON, DOT).
    Discover(cmd::discover::Args),
    /// Compare two topology files: nodes, links, width/speed/state changes.
    Diff(cmd::diff::Args),
    // No doc comment here: clap then takes the about and the long help (with its
    // examples) from `cmd::host::Args`.
    Host(cmd::host::Args),
    /// Every link with both ends' width/speed/state and what it could be (iblinkinfo).
    Links(cmd::links::Args),
    /// Disable or enable one port's link (writes: a PortInfo Set, like ibportstate).
    Port(cmd::port::Args),
    /// Query one attribute of one node or port (the smpquery equivalent).
    Query(cmd::query::Args),
    /// Routing analysis: dump and trace LFT routes, check for black holes, loops and credit
    /// loops, predict a collective's bandwidth on the actual routes.
    Route(cmd::route::Args),
    /// Ask the Subnet Administrator for records: nodes by LID, path records.
    Sa(cmd::sa::Args),
    /// Prometheus exporter: counters, link state and health over HTTP (/metrics, /healthz).
    Serve(cmd::serve::Args),
    /// Run, drive and generate simulated fabrics (ibsim + OpenSM).
    Sim(cmd::sim::Args),
    /// Interactive terminal UI: overview, nodes, links, counters, routing, events.
    Tui(cmd::tui::Args),
    /// The master subnet manager: LID, GUID, priority, state, activity (the sminfo equivalent).
    Sm(cmd::sm::Args),
}

fn main() -> ExitCode {
    ibscope::output::exit_quietly_on_closed_stdout();
    let cli = Cli::parse();
    init_logging(cli.global.verbose);
    let result = match &cli.command {
        Command::Demo(a) => cmd::demo::run(&cli.global, a),
        Command::Check(a) => cmd::check::run(&cli.global, a),
        Command::Counters(a) => cmd::counters::run(&cli.global, a),
        Command::Discover(a) => cmd::discover::run(&cli.global, a),
        Command::Diff(a) => cmd::diff::run(&cli.global, a),
        Command::Host(a) => cmd::host::run(&cli.global, a),
        Command::Links(a) => cmd::links::run(&cli.global, a),
        Command::Port(a) => cmd::port::run(&cli.global, a),
        Command::Query(a) => cmd::query::run(&cli.global, a),
        Command::Route(a) => cmd::route::run(&cli.global, a),
        Command::Sa(a) => cmd::sa::run(&cli.global, a),
        Command::Serve(a) => cmd::serve::run(&cli.global, a),
        Command::Sim(a) => cmd::sim::run(&cli.global, a),
        Command::Tui(a) => cmd::tui::run(&cli.global, a),
        Command::Sm(a) => cmd::sm::run(&cli.global, a),
    };
    match result {
        Ok(code) => code,
        Err(e) if ibscope::output::is_closed_pipe(&e) => ExitCode::from(exit::OK),
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
