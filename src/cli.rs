//! Global options shared by every subcommand, in the infiniband-diags style.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
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

#[derive(Debug, Clone, Args)]
pub struct Global {
    /// CA to use (e.g. mlx5_0); default: the first CA found. Several fabrics at once:
    /// `all` (every InfiniBand port of every CA and every [[fabric]] of the config file),
    /// a list (mlx5_0,mlx5_1), a port (mlx5_0:2), or a fabric's name from the config file.
    /// Ports on the same subnet are swept once.
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

    /// Work on a saved topology instead of the live fabric: an ibnetdiscover-format file or
    /// an ibscope JSON snapshot (`ibscope discover --format json`).
    #[arg(long, global = true, value_name = "FILE")]
    pub topology: Option<PathBuf>,

    /// Node name map: lines of `0xGUID "name"` (# comments), used wherever a node is named.
    /// Default: $IBSCOPE_NODE_NAME_MAP, the config file's node-name-map, else
    /// /etc/rdma/ib-node-name-map when present (as infiniband-diags).
    #[arg(long, global = true, value_name = "FILE")]
    pub node_name_map: Option<PathBuf>,

    /// Counter threshold file in force (not a flag): the config file's `thresholds`, else
    /// /etc/infiniband-diags/error_thresholds, else /etc/rdma/error_thresholds, when present.
    /// `check --thresholds` overrides.
    #[arg(skip)]
    pub thresholds: Option<PathBuf>,

    /// The config file's `[[fabric]]` tables (not a flag): names for local ports and
    /// fabrics reached through `ibscope agent` (see `-C`).
    #[arg(skip)]
    pub fabrics: Vec<FabricConfig>,

    /// The config file's `[roce]` profile (not a flag): the lossless configuration
    /// `host --check` holds every RoCE port to.
    #[arg(skip)]
    pub roce: Option<ibscope_host::roce::RoceProfile>,

    /// The config file's `[serve] journal` (not a flag): where `events` and `check`
    /// read the journal by default.
    #[arg(skip)]
    pub serve_journal: Option<PathBuf>,

    /// More log output on stderr (-v info, -vv debug, -vvv trace); IBSCOPE_LOG overrides.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
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
