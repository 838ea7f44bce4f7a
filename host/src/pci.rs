//! PCIe arithmetic and topology: what a link of some generation and width carries, and how
//! close two devices sit on the PCIe tree.

use serde::{Serialize, Serializer};

/// One PCIe generation: its transfer rate and what one lane carries after line encoding
/// (8b/10b for Gen1-2, 128b/130b for Gen3-5; Gen6 is PAM4 with 242/256 FLIT framing).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PcieGen {
    pub gen: u8,
    pub gts: f64,
    pub lane_gbps: f64,
}

/// Every generation, oldest first.
pub const PCIE_GENS: [PcieGen; 6] = [
    PcieGen {
        gen: 1,
        gts: 2.5,
        lane_gbps: 2.0,
    },
    PcieGen {
        gen: 2,
        gts: 5.0,
        lane_gbps: 4.0,
    },
    PcieGen {
        gen: 3,
        gts: 8.0,
        lane_gbps: 8.0 * 128.0 / 130.0,
    },
    PcieGen {
        gen: 4,
        gts: 16.0,
        lane_gbps: 16.0 * 128.0 / 130.0,
    },
    PcieGen {
        gen: 5,
        gts: 32.0,
        lane_gbps: 32.0 * 128.0 / 130.0,
    },
    PcieGen {
        gen: 6,
        gts: 64.0,
        lane_gbps: 64.0 * 242.0 / 256.0,
    },
];

/// A PCIe link: transfer rate (GT/s) and lanes. JSON: `{"gen": 5, "gts": 32.0, "width":
/// 16, "gbps": 504.1}`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PcieLink {
    pub gts: f64,
    pub width: u8,
}

impl PcieLink {
    pub fn new(gts: f64, width: u8) -> PcieLink {
        PcieLink { gts, width }
    }
    /// The generation of its transfer rate, if a known one.
    pub fn gen(self) -> Option<PcieGen> {
        PCIE_GENS
            .iter()
            .copied()
            .find(|g| (g.gts - self.gts).abs() < 0.01)
    }
    /// Data rate in Gb/s after line encoding (an unknown generation counts at its raw
    /// transfer rate).
    pub fn gbps(self) -> f64 {
        let lane = self.gen().map_or(self.gts, |g| g.lane_gbps);
        lane * f64::from(self.width)
    }
    /// Each part the lesser.
    pub fn lesser(self, other: PcieLink) -> PcieLink {
        PcieLink {
            gts: self.gts.min(other.gts),
            width: self.width.min(other.width),
        }
    }
    /// `Gen5 x16`, or `20.0GT/s x16` for a rate no generation has.
    pub fn text(self) -> String {
        match self.gen() {
            Some(g) => format!("Gen{} x{}", g.gen, self.width),
            None => format!("{:.1}GT/s x{}", self.gts, self.width),
        }
    }
}

impl Serialize for PcieLink {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Json {
            gen: Option<u8>,
            gts: f64,
            width: u8,
            gbps: f64,
        }
        Json {
            gen: self.gen().map(|g| g.gen),
            gts: self.gts,
            width: self.width,
            gbps: (self.gbps() * 10.0).round() / 10.0,
        }
        .serialize(s)
    }
}

/// How close a GPU sits to an RDMA device. Ordered: closest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Relation {
    /// Behind one PCIe switch: peer-to-peer traffic need not cross the CPU (nvidia-smi
    /// topo: PIX/PXB).
    PcieSwitch,
    /// Under one PCI host bridge, through the CPU's root complex (PHB).
    HostBridge,
    /// Same NUMA node, different host bridges (NODE).
    NumaNode,
}

impl Relation {
    pub fn short(self) -> &'static str {
        match self {
            Relation::PcieSwitch => "switch",
            Relation::HostBridge => "host bridge",
            Relation::NumaNode => "numa",
        }
    }
}

/// How close two devices are, from their /sys/devices paths (host bridge first, e.g.
/// `pci0000:15`, `0000:15:01.0` (root port), `0000:16:00.0` (switch upstream port), ...)
/// and NUMA nodes. `None`: nothing in common.
pub fn relation(
    a_path: &[String],
    a_numa: Option<u32>,
    b_path: &[String],
    b_numa: Option<u32>,
) -> Option<Relation> {
    let common = a_path
        .iter()
        .zip(b_path)
        .take_while(|(x, y)| x == y)
        .count();
    // Both below the host bridge, the root port and at least one more bridge: a switch.
    // (A root port has one link, so two endpoints under one root port are behind a
    // switch unless they are functions of one device.)
    let below = |path: &[String]| path.len() > common;
    if common >= 3 && below(a_path) && below(b_path) {
        return Some(Relation::PcieSwitch);
    }
    if common >= 1 {
        return Some(Relation::HostBridge);
    }
    match (a_numa, b_numa) {
        (Some(x), Some(y)) if x == y => Some(Relation::NumaNode),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> Vec<String> {
        text.split('/').map(str::to_string).collect()
    }

    #[test]
    fn bandwidth() {
        let gen5 = PcieLink::new(32.0, 16);
        assert_eq!(gen5.gen().unwrap().gen, 5);
        assert!((gen5.gbps() - 504.12).abs() < 0.01);
        let gen4x8 = PcieLink::new(16.0, 8);
        assert!((gen4x8.gbps() - 126.03).abs() < 0.01);
        assert_eq!(gen4x8.text(), "Gen4 x8");
        assert!((PcieLink::new(2.5, 1).gbps() - 2.0).abs() < 1e-9);
        assert_eq!(PcieLink::new(20.0, 4).text(), "20.0GT/s x4");
        assert_eq!(PcieLink::new(20.0, 4).gbps(), 80.0);
        assert_eq!(gen5.lesser(gen4x8), gen4x8);
        let json = serde_json::to_value(gen5).unwrap();
        assert_eq!(json["gen"], 5);
        assert_eq!(json["gbps"], 504.1);
        for pair in PCIE_GENS.windows(2) {
            assert!(pair[1].lane_gbps > pair[0].lane_gbps);
        }
    }

    #[test]
    fn relations() {
        let nic = path("pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0");
        let gpu = path("pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:1a:00.0");
        let other_rp = path("pci0000:15/0000:15:03.0/0000:1c:00.0");
        let other_hb = path("pci0000:37/0000:37:01.0/0000:38:00.0");
        assert_eq!(
            relation(&nic, Some(0), &gpu, Some(0)),
            Some(Relation::PcieSwitch)
        );
        assert_eq!(
            relation(&nic, Some(0), &other_rp, Some(0)),
            Some(Relation::HostBridge)
        );
        assert_eq!(
            relation(&nic, Some(0), &other_hb, Some(0)),
            Some(Relation::NumaNode)
        );
        assert_eq!(relation(&nic, Some(0), &other_hb, Some(1)), None);
        assert_eq!(relation(&nic, None, &other_hb, None), None);
        // A device and the bridge above it are not two devices behind one switch.
        let bridge = path("pci0000:15/0000:15:01.0/0000:16:00.0");
        assert_eq!(
            relation(&nic, Some(0), &bridge, Some(0)),
            Some(Relation::HostBridge)
        );
        assert_eq!(relation(&[], None, &[], None), None);
    }
}
