//! NCCL's path types: how far a GPU is from a NIC (or another GPU), as NCCL prints them by
//! name (`IB NIC distance :  SYS`, topology dumps' `NET/0 (4/3.125000/SYS)`) and by number
//! (`GPU Direct RDMA Enabled for GPU 81000 / HCA 1 (distance 6 <= 7)`). The numbers index a
//! table that changed between releases; each release's table is below, as NCCL's sources
//! define it (`pathDists` up to 2.5, `topoPathTypeStr` since 2.6).

use std::cmp::Ordering;

/// A path type, closest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathType {
    /// The same device.
    Loc,
    /// NVLink.
    Nvl,
    /// Through another GPU over NVLink.
    Nvb,
    /// A CPU's chip-to-chip link (Grace).
    C2c,
    /// One PCIe switch.
    Pix,
    /// Several PCIe switches, not the CPU's host bridge.
    Pxb,
    /// PCIe to a C2C-attached CPU.
    P2c,
    /// Through another GPU of the server (PXN) then PCIe.
    Pxn,
    /// Through the CPU's PCIe host bridge.
    Phb,
    /// Between host bridges of one NUMA node (NCCL 2.4 and 2.5).
    Node,
    /// Across the CPUs' interconnect (QPI, UPI, Infinity Fabric): another socket.
    Sys,
    /// Through the network.
    Net,
    /// Disconnected.
    Dis,
}

impl serde::Serialize for PathType {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl PathType {
    /// NCCL's name of a path type (`SOC`, before NCCL 2.4.6, is `SYS`).
    pub fn named(name: &str) -> Option<PathType> {
        use PathType::*;
        Some(match name {
            "LOC" => Loc,
            "NVL" => Nvl,
            "NVB" => Nvb,
            "C2C" => C2c,
            "PIX" => Pix,
            "PXB" => Pxb,
            "P2C" => P2c,
            "PXN" => Pxn,
            "PHB" => Phb,
            "NODE" => Node,
            "SYS" | "SOC" => Sys,
            "NET" => Net,
            "DIS" => Dis,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        use PathType::*;
        match self {
            Loc => "LOC",
            Nvl => "NVL",
            Nvb => "NVB",
            C2c => "C2C",
            Pix => "PIX",
            Pxb => "PXB",
            P2c => "P2C",
            Pxn => "PXN",
            Phb => "PHB",
            Node => "NODE",
            Sys => "SYS",
            Net => "NET",
            Dis => "DIS",
        }
    }

    /// Farther than NCCL lets GPUDirect RDMA run by default (PXB: no CPU on the way).
    pub fn beyond_gdr_default(self) -> bool {
        matches!(self, PathType::Phb | PathType::Node | PathType::Sys)
    }

    /// Under a PCIe switch the GPU shares with the NIC (or closer): where a NIC should be.
    pub fn under_switch(self) -> bool {
        self <= PathType::Pxn
    }
}

/// The path types by number in the release `version` (`2.16.5+cuda11.8`), as its
/// sources list them.
fn table(version: &str) -> Option<&'static [&'static str]> {
    let (major, minor, patch) = version_numbers(version)?;
    if major != 2 {
        return None;
    }
    Some(match (minor, patch) {
        (0..=3, _) | (4, 0..=5) => &["PIX", "PXB", "PHB", "SOC"],
        (4..=5, _) => &["PIX", "PXB", "PHB", "NODE", "SYS"],
        (6..=7, _) => &["LOC", "NVL", "PIX", "PXB", "PHB", "SYS", "NET"],
        (8..=11, _) => &["LOC", "NVL", "NVB", "PIX", "PXB", "PHB", "SYS"],
        (12..=20, _) => &[
            "LOC", "NVL", "NVB", "PIX", "PXB", "PXN", "PHB", "SYS", "DIS",
        ],
        (21..=25, _) => &[
            "LOC", "NVL", "NVB", "PIX", "PXB", "PXN", "PHB", "SYS", "NET", "DIS",
        ],
        (26, _) => &[
            "LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "PHB", "SYS", "NET", "DIS",
        ],
        (27, 0..=4) => &[
            "LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "PXN", "P2C", "PHB", "SYS", "NET", "DIS",
        ],
        _ => &[
            "LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS",
        ],
    })
}

/// Path type number `n` as the release `version` numbers them.
pub fn numbered(version: &str, n: u32) -> Option<PathType> {
    PathType::named(table(version)?.get(n as usize)?)
}

/// `2.16.5+cuda11.8` as (2, 16, 5).
pub fn version_numbers(version: &str) -> Option<(u32, u32, u32)> {
    let core = version.split(['+', ' ']).next()?;
    let mut parts = core.split('.').map(|p| {
        let digits: String = p.chars().take_while(char::is_ascii_digit).collect();
        digits.parse::<u32>().ok()
    });
    Some((
        parts.next()??,
        parts.next()??,
        parts.next().flatten().unwrap_or(0),
    ))
}

/// Compares two releases by number (`2.9.9` before `2.16.5`).
pub fn compare_versions(a: &str, b: &str) -> Ordering {
    version_numbers(a).cmp(&version_numbers(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers of captured logs decoded by their release's table: NCCL 2.16.5's
    /// `distance 6 <= 7` is PHB within SYS (the capture's own topology dump says PHB for
    /// that GPU and NIC); 2.4.8 and 2.27.5 as their sources number them.
    #[test]
    fn numbers_read_by_release() {
        assert_eq!(numbered("2.16.5+cuda11.8", 6), Some(PathType::Phb));
        assert_eq!(numbered("2.16.5+cuda11.8", 7), Some(PathType::Sys));
        assert_eq!(numbered("2.4.8+cuda10.1", 2), Some(PathType::Phb));
        assert_eq!(numbered("2.4.8", 4), Some(PathType::Sys));
        assert_eq!(numbered("2.4.2", 3), Some(PathType::Sys));
        assert_eq!(numbered("2.9.9+cuda11.0", 6), Some(PathType::Sys));
        assert_eq!(numbered("2.27.5+cuda12.9", 7), Some(PathType::Pxn));
        assert_eq!(numbered("2.27.3", 7), Some(PathType::P2c));
        assert_eq!(numbered("2.30.3", 9), Some(PathType::Sys));
        assert_eq!(numbered("3.0.0", 1), None);
        assert_eq!(numbered("2.16.5", 40), None);
    }

    #[test]
    fn releases_compare_by_number() {
        assert_eq!(compare_versions("2.9.9", "2.16.5"), Ordering::Less);
        assert_eq!(version_numbers("2.18.3+cuda12.2"), Some((2, 18, 3)));
        assert_eq!(version_numbers("nonsense"), None);
        assert!(PathType::Sys.beyond_gdr_default() && !PathType::Pxb.beyond_gdr_default());
        assert!(PathType::Pix.under_switch() && !PathType::Phb.under_switch());
    }
}
