//! The options commands share, in groups each command takes as it needs them (the fabric
//! options under their own heading of its help), and the settings a command runs with.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgMatches, Args};
use ibscope_host::fabric_plan::FabricConfig;
use ibscope_mad::engine::EngineConfig;

/// Exit codes every command uses (documented in README).
pub mod exit {
    /// Success, healthy, or equal.
    pub const OK: u8 = 0;
    /// Ran, and found something: findings, differences.
    pub const FINDINGS: u8 = 1;
    /// Could not run: bad input, no device, fabric unreachable.
    pub const ERROR: u8 = 2;
}

/// The heading the fabric options stand under in each command's help, after its own.
pub const FABRIC_HEADING: &str = "Fabric options";

/// The local port a command reaches the fabric through (`-C`, `-P`). Like every fabric
/// option group, it is global within the command that flattens it, so that it may also
/// follow a subcommand (`ibscope route trace A B -C mlx5_1`), and it may come before the
/// command (`ibscope -C all check`; see [`hoist_fabric_options`]).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = FABRIC_HEADING)]
pub struct PortArgs {
    /// CA to use (e.g. mlx5_0); default: the first CA found. Several fabrics at once:
    /// `all` (every InfiniBand port of every CA and every [[fabric]] of the config file),
    /// a list (mlx5_0,mlx5_1), a port (mlx5_0:2), or a fabric's name from the config file.
    /// Ports on the same subnet are swept once.
    #[arg(short = 'C', long = "ca", global = true, value_name = "CA")]
    pub ca: Option<String>,

    /// CA port to use; default: the first active port of the CA.
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

/// How MADs are sent: the reply timeout, retries, the window, the M_Key.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = FABRIC_HEADING)]
pub struct EngineArgs {
    /// Time to wait for each MAD reply before retrying (1 or more).
    #[arg(long, global = true, default_value_t = 200, value_name = "MS",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,

    /// Retries per MAD after the first attempt times out.
    #[arg(long, global = true, default_value_t = 3, value_name = "N")]
    pub retries: u32,

    /// Maximum MADs in flight at once: the bound of the adaptive window, which starts at 8,
    /// grows while replies come back in time and halves on timeouts; no destination has more
    /// than 4 in flight. Under ibsim more than 128 are clamped to 128 (a few hundred
    /// deadlock its umad shim).
    #[arg(long, global = true, default_value_t = 128, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub max_outstanding: u32,

    /// M_Key to put into every SMP (0x-hex or decimal). Needed only on fabrics
    /// whose SM sets M_Keys (OpenSM: m_key, m_key_protection_level): a protected port
    /// silently drops a SubnSet (and with protect bits 2 or 3 a SubnGet) carrying the
    /// wrong key.
    #[arg(long = "m-key", global = true, default_value = "0", value_name = "KEY",
          value_parser = parse_m_key)]
    pub m_key: u64,
}

/// How nodes are named.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = FABRIC_HEADING)]
pub struct NamesArgs {
    /// Node name map: lines of `0xGUID "name"` (# comments), used wherever a node is named.
    /// Default: $IBSCOPE_NODE_NAME_MAP, the config file's node-name-map, else
    /// /etc/rdma/ib-node-name-map when present (as infiniband-diags).
    #[arg(long, global = true, value_name = "FILE")]
    pub node_name_map: Option<PathBuf>,
}

/// The options of every command that reads the live fabric.
#[derive(Debug, Clone, Args)]
pub struct FabricArgs {
    #[command(flatten)]
    pub port: PortArgs,
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub names: NamesArgs,
}

/// A saved fabric instead of the live one, for the commands that can work on one.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = FABRIC_HEADING)]
pub struct TopologyArgs {
    /// Work on a saved topology instead of the live fabric: an ibnetdiscover-format file or
    /// an ibscope JSON snapshot (`ibscope discover --format json`).
    #[arg(long, global = true, value_name = "FILE")]
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

/// The settings a command runs with: its fabric options as given (a command without one
/// gets the default), then the config file's layers (`config::apply`).
#[derive(Debug, Clone)]
pub struct Global {
    pub ca: Option<String>,
    pub port: Option<u8>,
    pub timeout_ms: u64,
    pub retries: u32,
    pub max_outstanding: u32,
    pub m_key: u64,
    pub topology: Option<PathBuf>,
    pub node_name_map: Option<PathBuf>,
    /// Counter threshold file in force: the config file's `thresholds`, else
    /// /etc/infiniband-diags/error_thresholds, else /etc/rdma/error_thresholds, when
    /// present. `check --thresholds` overrides.
    pub thresholds: Option<PathBuf>,
    /// The config file's `[[fabric]]` tables: names for local ports and fabrics reached
    /// through `ibscope agent` (see `-C`).
    pub fabrics: Vec<FabricConfig>,
    /// The config file's `[roce]` profile: the lossless configuration `host --check`
    /// holds every RoCE port to.
    pub roce: Option<ibscope_host::roce::RoceProfile>,
    /// The config file's `[serve] journal`: where `events` and `check` read the journal
    /// by default.
    pub serve_journal: Option<PathBuf>,
    pub verbose: u8,
}

impl Global {
    /// The options of the command `matches` holds (the deepest subcommand's matches, where
    /// the fabric options of its command are found), defaults for those it does not take.
    pub fn from_matches(common: &CommonArgs, matches: &ArgMatches) -> Global {
        fn get<T: Clone + Send + Sync + 'static>(m: &ArgMatches, id: &str) -> Option<T> {
            m.try_get_one::<T>(id).ok().flatten().cloned()
        }
        Global {
            ca: get(matches, "ca"),
            port: get(matches, "port"),
            timeout_ms: get(matches, "timeout_ms").unwrap_or(DEFAULT_TIMEOUT_MS),
            retries: get(matches, "retries").unwrap_or(DEFAULT_RETRIES),
            max_outstanding: get(matches, "max_outstanding").unwrap_or(DEFAULT_MAX_OUTSTANDING),
            m_key: get(matches, "m_key").unwrap_or(0),
            topology: get(matches, "topology"),
            node_name_map: get(matches, "node_name_map"),
            thresholds: None,
            fabrics: Vec::new(),
            roce: None,
            serve_journal: None,
            verbose: common.verbose,
        }
    }
}

/// The defaults of [`EngineArgs`], for the commands that do not take it.
const DEFAULT_TIMEOUT_MS: u64 = 200;
const DEFAULT_RETRIES: u32 = 3;
const DEFAULT_MAX_OUTSTANDING: u32 = 128;

/// The fabric options written before the command (`ibscope -C all check`, as
/// infiniband-diags users write them) are moved behind the command's name, where the
/// command that takes them reads them and one that does not refuses them. Everything else
/// keeps its place.
pub fn hoist_fabric_options(args: Vec<OsString>, root: &clap::Command) -> Vec<OsString> {
    let groups = [
        PortArgs::augment_args(clap::Command::new("port")),
        EngineArgs::augment_args(clap::Command::new("engine")),
        NamesArgs::augment_args(clap::Command::new("names")),
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
