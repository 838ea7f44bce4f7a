//! The command line: the clap definition of `ibscope` and the dispatch to each command.
//! It lives in the library so that completions, man pages and tests see the same tree the
//! binary parses.

use std::process::ExitCode;

use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};

use crate::cli::{CommonArgs, Global};
use crate::cmd;
use crate::config;
use crate::settings::Settings;

/// InfiniBand fabric diagnostics: discovery, link health, counters, routing, live TUI.
///
/// Every command reads the fabric through the local HCA's management port (libibumad),
/// or a saved topology with --topology. Nothing changes the fabric unless the command's
/// name says so (`counters --reset`, `port disable|enable`), and only a flag that says so
/// sends a Set MAD that writes nothing (`--access-register`: module register queries).
///
/// Defaults come from /etc/ibscope/config.toml and ~/.config/ibscope/config.toml (see
/// `ibscope config show`), the node-name map from /etc/rdma/ib-node-name-map and the
/// counter thresholds from /etc/infiniband-diags/error_thresholds (else
/// /etc/rdma/error_thresholds) when present; flags win.
///
/// Exit codes: 0 ok/healthy/equal, 1 findings or differences, 2 could not run.
#[derive(Debug, Parser)]
#[command(
    name = "ibscope",
    version,
    propagate_version = true,
    max_term_width = 100,
    after_help = EXAMPLES
)]
pub struct Cli {
    #[command(flatten)]
    pub common: CommonArgs,
    #[command(subcommand)]
    pub command: Command,
}

const EXAMPLES: &str = "\
Examples:
  ibscope demo                       # a simulated faulty fabric, no hardware needed
  ibscope check                      # one health report; exit 1 on findings
  ibscope links --degraded           # links running below what they could
  ibscope counters --interval 5      # error and traffic rates of every port
  ibscope serve                      # Prometheus exporter on 127.0.0.1:9315
  ibscope config show                # the defaults in force and where they come from";

/// Each variant's `about` is its line in `ibscope --help`; the command's own doc comment
/// (with its examples) is its `--help`.
#[derive(Debug, Subcommand)]
pub enum Command {
    #[command(
        about = "A bundled simulated fabric with planted faults, ibscope attached (start here)"
    )]
    Demo(cmd::demo::Args),
    #[command(
        about = "Fabric health in one report: degraded links, port states, error counters, SM"
    )]
    Check(cmd::check::Args),
    #[command(
        about = "Pluggable modules and cables: vendor, part, serial, light per lane, temperature, findings"
    )]
    Cables(cmd::cables::Args),
    #[command(
        about = "Port counters (PortCounters/PortCountersExtended) of every port; rates; reset"
    )]
    Counters(cmd::counters::Args),
    #[command(about = "What happened to the links: the journal serve --journal writes")]
    Events(cmd::events::Args),
    #[command(about = "Discover the fabric and export it (ibnetdiscover text, JSON, DOT, plan)")]
    Discover(cmd::discover::Args),
    #[command(about = "Compare two topology files: nodes, links, width/speed/state changes")]
    Diff(cmd::diff::Args),
    #[command(
        about = "This host's RDMA devices, ports, PCIe links, GPUs; --check: ready for a job?"
    )]
    Host(cmd::host::Args),
    #[command(
        about = "The servers of a GPU cluster: each HCA's rail, rate, state and leaf switch port"
    )]
    Hosts(cmd::hosts::Args),
    #[command(
        about = "Every link with both ends' width/speed/state and what it could be (iblinkinfo)"
    )]
    Links(cmd::links::Args),
    #[command(
        about = "Disable or enable one port's link (writes: a PortInfo Set, like ibportstate)"
    )]
    Port(cmd::port::Args),
    #[command(about = "Query one attribute of one node or port (the smpquery equivalent)")]
    Query(cmd::query::Args),
    #[command(
        about = "Routing analysis: dump and trace LFT routes, check for black holes, loops and \
                 credit loops, predict a collective's bandwidth on the actual routes"
    )]
    Route(cmd::route::Args),
    #[command(about = "nccl-tests runs and NCCL logs beside the fabric: is the fabric the limit?")]
    Nccl(cmd::nccl::Args),
    #[command(about = "Ask the Subnet Administrator for records: nodes by LID, path records")]
    Sa(cmd::sa::Args),
    #[command(
        about = "Prometheus exporter: counters, link state and health over HTTP (/metrics, /healthz)"
    )]
    Serve(cmd::serve::Args),
    #[command(about = "Run, drive and generate simulated fabrics (ibsim + OpenSM)")]
    Sim(cmd::sim::Args),
    #[command(about = "Interactive terminal UI: the fabric in views, one per tab")]
    Tui(cmd::tui::Args),
    #[command(
        about = "The master subnet manager: LID, GUID, priority, state, activity (the sminfo equivalent)"
    )]
    Sm(cmd::sm::Args),
    #[command(
        about = "The settings in force (config files, environment, flags) and where each comes from"
    )]
    Config(cmd::config::Args),
    #[command(about = "Shell completions for bash, zsh or fish, generated from this command line")]
    Completions(cmd::completions::Args),
    #[command(about = "Man pages for ibscope and each of its commands")]
    Man(cmd::man::Args),
    #[command(
        about = "Relay one local port's MADs over stdin/stdout for an ibscope elsewhere (ssh)"
    )]
    Agent(cmd::agent::Args),
}

impl Command {
    /// The command ends on its own once it has answered, rather than running until
    /// stopped (see [`crate::memory`]). Only the commands that run until stopped (servers,
    /// loops, screens) are named.
    pub fn is_one_shot(&self) -> bool {
        match self {
            Command::Serve(_)
            | Command::Tui(_)
            | Command::Demo(_)
            | Command::Sim(_)
            | Command::Agent(_) => false,
            Command::Counters(a) => a.interval.is_none(),
            // Every other command answers and ends: a new one needs no line here.
            _ => true,
        }
    }
}

/// The clap command tree (for completions, man pages and tests): each command's help
/// ends with its examples (see [`examples_last`]).
pub fn command() -> clap::Command {
    examples_last(Cli::command())
}

/// Parses `args` as the binary does: fabric options written before the command move
/// behind it first ([`crate::cli::hoist_fabric_options`]).
pub fn parse(
    args: impl IntoIterator<Item = std::ffi::OsString>,
) -> clap::error::Result<ArgMatches> {
    let root = command();
    let args = crate::cli::hoist_fabric_options(args.into_iter().collect(), &root);
    root.try_get_matches_from(args)
}

/// A command's examples are written at the end of its doc comment, which clap shows before
/// the usage and the options; they are moved behind the options, where readers of a long
/// help find them last, as in a man page.
fn examples_last(mut cmd: clap::Command) -> clap::Command {
    const HEADING: &str = "\nExamples:\n";
    if let Some(long) = cmd.get_long_about().map(ToString::to_string) {
        if let Some(at) = long.find(HEADING) {
            let (about, examples) = long.split_at(at);
            let examples = examples.trim_start_matches('\n').trim_end().to_string();
            let after = match cmd.get_after_long_help() {
                Some(more) => format!("{more}\n\n{examples}"),
                None => examples,
            };
            cmd = cmd
                .long_about(about.trim_end().to_string())
                .after_long_help(after);
        }
    }
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, examples_last);
    }
    cmd
}

/// Parse the command line, apply the configured defaults and run the command.
pub fn main_with(matches: &ArgMatches) -> anyhow::Result<ExitCode> {
    let cli = Cli::from_arg_matches(matches).map_err(|e| e.format(&mut command()))?;
    crate::init_logging(cli.common.verbose);
    ibscope_topo::input::set_limit(cli.common.max_input);
    // Completions and man pages describe the command line, not a setup: a broken config
    // file must not keep an operator from getting them.
    let (settings, in_force) = match &cli.command {
        Command::Completions(_) | Command::Man(_) => (Settings::defaults(), None),
        _ => {
            let (settings, in_force) = config::resolve(matches, &config::Env::from_process())?;
            (settings, Some(in_force))
        }
    };
    let global = Global::new(settings, &cli.common, config::deepest(matches));
    let g = &global;
    crate::memory::tune_for(cli.command.is_one_shot());
    match &cli.command {
        Command::Demo(a) => cmd::demo::run(g, a),
        Command::Check(a) => cmd::check::run(g, a),
        Command::Counters(a) => cmd::counters::run(g, a),
        Command::Cables(a) => cmd::cables::run(g, a),
        Command::Discover(a) => cmd::discover::run(g, a),
        Command::Diff(a) => cmd::diff::run(g, a),
        Command::Events(a) => cmd::events::run(g, a),
        Command::Host(a) => cmd::host::run(g, a),
        Command::Hosts(a) => cmd::hosts::run(g, a),
        Command::Links(a) => cmd::links::run(g, a),
        Command::Port(a) => cmd::port::run(g, a),
        Command::Query(a) => cmd::query::run(g, a),
        Command::Route(a) => cmd::route::run(g, a),
        Command::Nccl(a) => cmd::nccl::run(g, a),
        Command::Sa(a) => cmd::sa::run(g, a),
        Command::Serve(a) => cmd::serve::run(g, a),
        Command::Sim(a) => cmd::sim::run(g, a),
        Command::Tui(a) => cmd::tui::run(g, a),
        Command::Sm(a) => cmd::sm::run(g, a),
        Command::Config(a) => cmd::config::run(a, in_force.as_ref()),
        Command::Completions(a) => cmd::completions::run(a, command()),
        Command::Man(a) => cmd::man::run(a, command()),
        Command::Agent(a) => cmd::agent::run(g, a),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_commands_that_end_on_their_own_keep_freed_memory() {
        use clap::FromArgMatches;
        let one_shot = |args: &[&str]| {
            let matches = super::command().get_matches_from(args);
            let cli = super::Cli::from_arg_matches(&matches).unwrap();
            cli.command.is_one_shot()
        };
        for args in [
            &["ibscope", "check"][..],
            &["ibscope", "counters"],
            &["ibscope", "discover"],
            &["ibscope", "route", "check"],
        ] {
            assert!(one_shot(args), "{args:?}");
        }
        for args in [
            &["ibscope", "serve"][..],
            &["ibscope", "tui"],
            &["ibscope", "counters", "--interval", "5"],
        ] {
            assert!(!one_shot(args), "{args:?}");
        }
    }

    #[test]
    fn the_command_line_is_consistent() {
        // clap's own checks: ids named by conflicts/requires exist, no duplicate flags.
        super::command().debug_assert();
    }
}
