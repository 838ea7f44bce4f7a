//! Where detached simulators keep their state, and what their `state.json` says.

use std::path::PathBuf;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

/// Base directory of detached simulators: `$IBSCOPE_SIM_DIR`, else `$XDG_RUNTIME_DIR/ibscope-sim`,
/// else `/tmp/ibscope-sim`.
pub fn state_base_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("IBSCOPE_SIM_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let runtime = std::env::var_os("XDG_RUNTIME_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    runtime.join("ibscope-sim")
}

/// State directory of the detached simulator called `name`.
pub fn default_state_dir(name: &str) -> PathBuf {
    state_base_dir().join(name)
}

/// The simulator name to use when none is given: `$IBSCOPE_SIM` (set by `sim up`'s exports),
/// else `default`.
pub fn default_name() -> String {
    std::env::var("IBSCOPE_SIM")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_string())
}

pub(crate) fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 32
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && !name.starts_with('.');
    if !ok {
        bail!("simulator name {name:?}: use 1-32 of A-Z a-z 0-9 - _ . (not starting with .)");
    }
    Ok(())
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ProcRecord {
    pub(crate) pid: u32,
    pub(crate) start_time: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct StateFile {
    pub(crate) version: u32,
    pub(crate) name: String,
    pub(crate) sockname: String,
    pub(crate) topology: PathBuf,
    pub(crate) state_dir: PathBuf,
    pub(crate) client_dir: PathBuf,
    pub(crate) ibsim: ProcRecord,
    pub(crate) opensm: Option<ProcRecord>,
    /// The ibsim console FIFO, opened read-write by ibsim itself (see [`crate::Sim::start`]).
    pub(crate) console: PathBuf,
    /// Always null: ibsim keeps its own write end of the FIFO, no holder process is needed.
    pub(crate) holder: Option<ProcRecord>,
    pub(crate) env: Vec<(String, String)>,
}

/// A detached simulator found under [`state_base_dir`].
#[derive(Debug, Clone)]
pub struct SimStatus {
    pub name: String,
    pub state_dir: PathBuf,
    pub topology: PathBuf,
    pub sockname: String,
    pub ibsim_pid: u32,
    pub opensm_pid: Option<u32>,
    /// ibsim (and OpenSM, if any) still running.
    pub running: bool,
}
