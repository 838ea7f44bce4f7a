//! How big a topology file is, as far as ibsim's limits care, and the command-line limits
//! that size needs.

use std::fs;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// ibsim 0.10 built-in limits; beyond these the command line must raise them.
const IBSIM_DEFAULT_NODES: usize = 2048;
const IBSIM_DEFAULT_SWITCHES: usize = 256;
const IBSIM_DEFAULT_PORTS: usize = 13312;
const IBSIM_DEFAULT_LFT_CAP: usize = 30720;
/// Top of the unicast LID space + 1: the largest LFT that makes sense.
const MAX_LFT_CAP: usize = 0xc000;

/// What a topology file holds, as far as ibsim's limits care.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FabricSize {
    pub switches: usize,
    pub hcas: usize,
    pub routers: usize,
    /// Ports as ibsim counts them: a switch has its port 0 as well.
    pub ports: usize,
    /// LIDs OpenSM will hand out with LMC 0: one per switch, one per CA/router port.
    pub lids: usize,
}

impl FabricSize {
    pub fn nodes(&self) -> usize {
        self.switches + self.hcas + self.routers
    }

    /// `-N/-S/-P/-L` arguments, only for limits the defaults do not cover (25 % headroom).
    pub fn ibsim_limit_args(&self) -> Vec<String> {
        let headroom = |n: usize| n + n / 4 + 16;
        let mut args = Vec::new();
        if headroom(self.nodes()) > IBSIM_DEFAULT_NODES {
            args.extend(["-N".to_string(), headroom(self.nodes()).to_string()]);
        }
        if headroom(self.switches) > IBSIM_DEFAULT_SWITCHES {
            args.extend(["-S".to_string(), headroom(self.switches).to_string()]);
        }
        if headroom(self.ports) > IBSIM_DEFAULT_PORTS {
            args.extend(["-P".to_string(), headroom(self.ports).to_string()]);
        }
        if headroom(self.lids) > IBSIM_DEFAULT_LFT_CAP {
            let cap = headroom(self.lids).div_ceil(64) * 64;
            args.extend(["-L".to_string(), cap.min(MAX_LFT_CAP).to_string()]);
        }
        args
    }
}

/// Count nodes and ports in a topology file (follows `include` lines).
pub fn topology_size(path: &Path) -> Result<FabricSize> {
    let mut size = FabricSize::default();
    count_topology(path, &mut size, 0)?;
    Ok(size)
}

fn count_topology(path: &Path, size: &mut FabricSize, depth: usize) -> Result<()> {
    if depth > 16 {
        bail!("{}: include nesting too deep", path.display());
    }
    let text = fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    for line in text.lines() {
        let line = line.trim();
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else { continue };
        if first == "include" {
            let Some(target) = words.next() else { continue };
            let target = Path::new(target.trim_matches('"'));
            let resolved = if target.is_absolute() {
                target.to_path_buf()
            } else {
                // ibsim runs with the topology's directory as cwd, so both readings agree.
                path.parent().unwrap_or(Path::new(".")).join(target)
            };
            count_topology(&resolved, size, depth + 1)?;
            continue;
        }
        let kind = first.to_ascii_lowercase();
        let Some(ports) = words.next().and_then(|w| w.parse::<usize>().ok()) else {
            continue;
        };
        match kind.as_str() {
            "switch" => {
                size.switches += 1;
                size.ports += ports + 1;
                size.lids += 1;
            }
            "hca" | "ca" => {
                size.hcas += 1;
                size.ports += ports;
                size.lids += ports;
            }
            "router" | "rt" => {
                size.routers += 1;
                size.ports += ports;
                size.lids += ports;
            }
            _ => {}
        }
    }
    Ok(())
}
