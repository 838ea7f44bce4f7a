//! Global options shared by every subcommand, in the infiniband-diags style.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

/// Exit codes every command uses (documented in README).
pub mod exit {
    /// Success, healthy, or equal.
    pub const OK: u8 = 0;
    /// Ran, and found something: findings, differences.
    pub const FINDINGS: u8 = 1;
    /// Could not run: bad input, no device, fabric unreachable.
    pub const ERROR: u8 = 2;
}

#[derive(Debug, Clone, Args)]
pub struct Global {
    /// CA to use (e.g. mlx5_0); default: the first CA found.
    #[arg(short = 'C', long = "ca", global = true, value_name = "CA")]
    pub ca: Option<String>,

    /// CA port to use; default: the first active port of the CA.
    #[arg(short = 'P', long = "port", global = true, value_name = "PORT")]
    pub port: Option<u8>,

    /// Time to wait for each MAD reply before retrying.
    #[arg(long, global = true, default_value_t = 200, value_name = "MS")]
    pub timeout_ms: u64,

    /// Retries per MAD after the first attempt times out.
    #[arg(long, global = true, default_value_t = 3, value_name = "N")]
    pub retries: u32,

    /// Maximum MADs in flight at once (keep at 64 or below under ibsim).
    #[arg(long, global = true, default_value_t = 16, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub max_outstanding: u32,

    /// Work on a saved topology instead of the live fabric: an ibnetdiscover-format file or
    /// an ibscope JSON snapshot (`ibscope discover --format json`).
    #[arg(long, global = true, value_name = "FILE")]
    pub topology: Option<PathBuf>,

    /// Node name map: lines of `0xGUID "name"` (# comments), used wherever a node is named.
    #[arg(long, global = true, value_name = "FILE")]
    pub node_name_map: Option<PathBuf>,

    /// More log output on stderr (-v info, -vv debug, -vvv trace); IBSCOPE_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

impl Global {
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.max(1))
    }
}
