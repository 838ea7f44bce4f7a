//! The options commands share, in groups each command takes as it needs them (the fabric
//! options under their own heading of its help), and the settings a command runs with.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgMatches, Args, ValueHint};
use ibscope_mad::engine::EngineConfig;

use crate::settings::{Settings, FABRIC_HEADING};

/// Exit codes every command uses (documented in README).
pub mod exit {
    /// Success, healthy, or equal.
    pub const OK: u8 = 0;
    /// Ran, and found something: findings, differences.
    pub const FINDINGS: u8 = 1;
    /// Could not run: bad input, no device, fabric unreachable.
    pub const ERROR: u8 = 2;
}

/// The local port `ibscope agent` serves (`-C`, `-P`: the same keys as the fabric
/// options', without the engine's options, which are the other side's).
#[derive(Debug, Clone, Args)]
pub struct PortArgs {
    /// CA whose port to serve (e.g. mlx5_0); default: the first CA found.
    #[arg(short = 'C', long = "ca", global = true, value_name = "CA")]
    pub ca: Option<String>,

    /// CA port to serve; default: the first active port of the CA.
    #[arg(short = 'P', long = "port", global = true, value_name = "PORT")]
    pub port: Option<u8>,
}

/// The local RDMA devices `host` reports (it reads this machine, not the fabric).
#[derive(Debug, Clone, Args)]
pub struct DeviceArgs {
    /// Only this RDMA device (e.g. mlx5_0).
    #[arg(short = 'C', long = "ca", global = true, value_name = "DEVICE")]
    pub ca: Option<String>,
}

/// The M_Key: the one fabric option that is not a config key.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = FABRIC_HEADING)]
pub struct MKeyArgs {
    /// M_Key to put into every SMP (0x-hex or decimal). Needed only on fabrics
    /// whose SM sets M_Keys (OpenSM: m_key, m_key_protection_level): a protected port
    /// silently drops a SubnSet (and with protect bits 2 or 3 a SubnGet) carrying the
    /// wrong key.
    #[arg(long = "m-key", global = true, default_value = "0", value_name = "KEY",
          value_parser = parse_m_key)]
    pub m_key: u64,
}

/// The options of every command that reads the live fabric: the config file's top-level
/// keys that have a flag ([`Settings`]), and the M_Key. What is in force is read from
/// [`Global`], not from here.
#[derive(Debug, Clone, Args)]
pub struct FabricArgs {
    #[command(flatten)]
    pub settings: Settings,
    #[command(flatten)]
    pub m_key: MKeyArgs,
}

/// A saved fabric instead of the live one, for the commands that can work on one.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = FABRIC_HEADING)]
pub struct TopologyArgs {
    /// Work on a saved topology instead of the live fabric: an ibnetdiscover-format file or
    /// an ibscope JSON snapshot (`ibscope discover --format json`).
    #[arg(long, global = true, value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub topology: Option<PathBuf>,
}

/// Options every command takes.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Common options")]
pub struct CommonArgs {
    /// More log output on stderr (-v info, -vv debug, -vvv trace); IBSCOPE_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    /// The most any file or stream a command reads may hold (bytes, or 512M, 2G).
    #[arg(long, global = true, value_name = "SIZE", default_value = "1G",
          value_parser = ibscope_topo::input::parse_size)]
    pub max_input: u64,
}

/// The settings a command runs with: the config file's keys in force (defaults, files,
/// environment and the command's own flags, layered by `crate::config`), read through it
/// as `g.timeout_ms`, `g.serve.journal`; and the options only the command line gives.
#[derive(Debug, Clone)]
pub struct Global {
    pub settings: Settings,
    pub m_key: u64,
    pub topology: Option<PathBuf>,
    pub verbose: u8,
}

impl Global {
    /// `settings` in force, with the options of the command `matches` holds (the deepest
    /// subcommand's matches, where the fabric options of its command are found).
    pub fn new(settings: Settings, common: &CommonArgs, matches: &ArgMatches) -> Global {
        fn get<T: Clone + Send + Sync + 'static>(m: &ArgMatches, id: &str) -> Option<T> {
            m.try_get_one::<T>(id).ok().flatten().cloned()
        }
        Global {
            settings,
            m_key: get(matches, "m_key").unwrap_or(0),
            topology: get(matches, "topology"),
            verbose: common.verbose,
        }
    }
}

impl std::ops::Deref for Global {
    type Target = Settings;
    fn deref(&self) -> &Settings {
        &self.settings
    }
}

/// The fabric options written before the command (`ibscope -C all check`, as
/// infiniband-diags users write them) are moved behind the command's name, where the
/// command that takes them reads them and one that does not refuses them. Everything else
/// keeps its place.
pub fn hoist_fabric_options(args: Vec<OsString>, root: &clap::Command) -> Vec<OsString> {
    let groups = [
        FabricArgs::augment_args(clap::Command::new("fabric")),
        TopologyArgs::augment_args(clap::Command::new("topology")),
    ];
    let fabric: Vec<clap::Arg> = groups
        .iter()
        .flat_map(|g| g.get_arguments().cloned().collect::<Vec<_>>())
        .collect();
    // Options of the root that take a value, so that their value is not taken for the
    // command's name.
    let root_valued: Vec<clap::Arg> = root
        .get_arguments()
        .filter(|a| a.get_action().takes_values())
        .cloned()
        .collect();
    let mut kept = Vec::with_capacity(args.len());
    let mut hoisted = Vec::new();
    let mut iter = args.into_iter();
    if let Some(program) = iter.next() {
        kept.push(program);
    }
    while let Some(arg) = iter.next() {
        let text = arg.to_string_lossy().into_owned();
        if text == "--" || !text.starts_with('-') || text == "-" {
            // The command's name: the hoisted options go right after it.
            kept.push(arg);
            kept.append(&mut hoisted);
            kept.extend(iter);
            return kept;
        }
        let (matched, needs_next) = option_match(&fabric, &text);
        if matched {
            hoisted.push(arg);
            if needs_next {
                hoisted.extend(iter.next());
            }
            continue;
        }
        let (root_option, root_needs_next) = option_match(&root_valued, &text);
        kept.push(arg);
        if root_option && root_needs_next {
            kept.extend(iter.next());
        }
    }
    // No command: leave the options where they were, for clap to say what is missing.
    kept.append(&mut hoisted);
    kept
}

/// Whether `text` is one of `options` (`--name`, `--name=V`, `-X`, `-XV`), and whether
/// its value is the next word.
fn option_match(options: &[clap::Arg], text: &str) -> (bool, bool) {
    for arg in options {
        let takes = arg.get_action().takes_values();
        if let Some(long) = arg.get_long() {
            if let Some(rest) = text.strip_prefix("--").and_then(|t| t.strip_prefix(long)) {
                if rest.is_empty() {
                    return (true, takes);
                }
                if rest.starts_with('=') {
                    return (true, false);
                }
            }
        }
        if let Some(short) = arg.get_short() {
            let mut chars = text.chars();
            if chars.next() == Some('-') && chars.next() == Some(short) {
                let rest = chars.as_str();
                return (true, takes && rest.is_empty());
            }
        }
    }
    (false, false)
}

/// An M_Key: 0x-hex or decimal, 64 bits.
pub fn parse_m_key(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => t.parse::<u64>(),
    };
    parsed.map_err(|_| format!("{text:?} is not an M_Key (a 64-bit number, decimal or 0x-hex)"))
}

impl Global {
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.max(1))
    }
    /// The engine settings of --max-outstanding, --timeout-ms and --retries.
    pub fn engine_config(&self) -> EngineConfig {
        EngineConfig {
            max_outstanding: self.max_outstanding as usize,
            timeout: self.timeout(),
            retries: self.retries,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hoisted(args: &[&str]) -> Vec<String> {
        let args = args.iter().map(std::ffi::OsString::from).collect();
        hoist_fabric_options(args, &crate::app::command())
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn fabric_options_before_the_command_move_behind_its_name() {
        assert_eq!(
            hoisted(&["ibscope", "-C", "all", "check", "--json"]),
            ["ibscope", "check", "-C", "all", "--json"]
        );
        assert_eq!(
            hoisted(&[
                "ibscope",
                "-Cmlx5_1",
                "--topology=f",
                "-v",
                "route",
                "trace",
                "a",
                "b"
            ]),
            [
                "ibscope",
                "-v",
                "route",
                "-Cmlx5_1",
                "--topology=f",
                "trace",
                "a",
                "b"
            ]
        );
        // A root option's value is not the command's name; other options stay in place.
        assert_eq!(
            hoisted(&["ibscope", "--max-input", "2G", "--timeout-ms", "5", "links"]),
            ["ibscope", "--max-input", "2G", "links", "--timeout-ms", "5"]
        );
        // Nothing to move, or no command: unchanged.
        assert_eq!(
            hoisted(&["ibscope", "links", "-C", "x"]),
            ["ibscope", "links", "-C", "x"]
        );
        assert_eq!(hoisted(&["ibscope", "-C", "x"]), ["ibscope", "-C", "x"]);
    }

    #[test]
    fn m_keys() {
        assert_eq!(parse_m_key("0"), Ok(0));
        assert_eq!(parse_m_key("0x1234567890abcdef"), Ok(0x1234_5678_90ab_cdef));
        assert_eq!(parse_m_key("0XFFFFFFFFFFFFFFFF"), Ok(u64::MAX));
        assert_eq!(parse_m_key("18446744073709551615"), Ok(u64::MAX));
        assert!(parse_m_key("0x10000000000000000").is_err());
        assert!(parse_m_key("-1").is_err());
        assert!(parse_m_key("key").is_err());
    }
}
