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

/// What a bridge's Access Control Services say of peer-to-peer requests (PCIe base
/// specification, ACS Extended Capability, ID 0x000D: capability register at +4, control
/// register at +6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "acs", rename_all = "kebab-case")]
pub enum Acs {
    /// The configuration space past 0x100 could not be read (only root reads it whole).
    Unreadable,
    /// No ACS capability: nothing redirects.
    Absent,
    Present {
        /// The control register as read.
        control: u16,
        /// P2P Request Redirect: requests between downstream ports go up to the root
        /// complex instead of across the switch.
        request_redirect: bool,
        /// P2P Completion Redirect.
        completion_redirect: bool,
        /// P2P Egress Control.
        egress_control: bool,
    },
}

impl Acs {
    /// The ACS capability ID in the extended capability list.
    const ID: u16 = 0x000d;
    /// Where the extended capabilities start.
    const EXTENDED: usize = 0x100;

    /// Peer-to-peer requests or completions are sent up instead of across.
    pub fn redirects(self) -> bool {
        matches!(
            self,
            Acs::Present {
                request_redirect: true,
                ..
            } | Acs::Present {
                completion_redirect: true,
                ..
            }
        )
    }

    /// Decode a function's configuration space (sysfs `config`): walk the extended
    /// capability list from 0x100 (each header: ID bits 0-15, version 16-19, next offset
    /// 20-31) to the ACS capability. Untrusted bytes: a short space, a loop or an offset
    /// out of range end the walk.
    pub fn from_config(config: &[u8]) -> Acs {
        let dword = |at: usize| -> Option<u32> {
            let b = config.get(at..at + 4)?;
            Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        let Some(first) = dword(Self::EXTENDED) else {
            return Acs::Unreadable;
        };
        let mut at = Self::EXTENDED;
        let mut header = first;
        // 4 KiB of config space holds at most (4096 - 256) / 4 headers.
        for _ in 0..960 {
            if header == 0 || header == u32::MAX {
                return Acs::Absent;
            }
            if (header & 0xffff) as u16 == Self::ID {
                let Some(word) = dword(at + 4) else {
                    return Acs::Unreadable;
                };
                let control = (word >> 16) as u16;
                return Acs::Present {
                    control,
                    request_redirect: control & (1 << 2) != 0,
                    completion_redirect: control & (1 << 3) != 0,
                    egress_control: control & (1 << 5) != 0,
                };
            }
            let next = ((header >> 20) & 0xffc) as usize;
            if next < Self::EXTENDED {
                return Acs::Absent;
            }
            at = next;
            header = match dword(at) {
                Some(h) => h,
                None => return Acs::Unreadable,
            };
        }
        Acs::Absent
    }
}

/// The bridges between two devices that meet below a PCIe switch: every bridge on either
/// path below their common part (the switch's downstream ports and any switch below them),
/// where ACS decides whether a request crosses or goes up. Empty unless they share a switch.
pub fn bridges_between<'a>(a_path: &'a [String], b_path: &'a [String]) -> Vec<&'a str> {
    let common = a_path
        .iter()
        .zip(b_path)
        .take_while(|(x, y)| x == y)
        .count();
    if common < 3 || a_path.len() <= common || b_path.len() <= common {
        return Vec::new();
    }
    // The last element of each path is the device itself.
    let side = |p: &'a [String]| p[common..p.len() - 1].iter().map(String::as_str);
    side(a_path).chain(side(b_path)).collect()
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

    /// Config space with the given extended capabilities chained from 0x100, each
    /// (id, control register) 8 bytes apart.
    fn config(caps: &[(u16, u16)]) -> Vec<u8> {
        let mut c = vec![0u8; 4096];
        for (i, (id, control)) in caps.iter().enumerate() {
            let at = 0x100 + i * 8;
            let next = if i + 1 < caps.len() { at + 8 } else { 0 };
            let header = u32::from(*id) | (1 << 16) | ((next as u32) << 20);
            c[at..at + 4].copy_from_slice(&header.to_le_bytes());
            c[at + 4..at + 6].copy_from_slice(&0x005f_u16.to_le_bytes());
            c[at + 6..at + 8].copy_from_slice(&control.to_le_bytes());
        }
        c
    }

    #[test]
    fn acs_is_found_in_the_extended_capability_list() {
        // AER (0x0001) first, then ACS with Source Validation, Request and Completion
        // Redirect and Upstream Forwarding: what a BIOS that enables ACS leaves.
        let acs = Acs::from_config(&config(&[(0x0001, 0), (0x000d, 0x001d)]));
        assert_eq!(
            acs,
            Acs::Present {
                control: 0x001d,
                request_redirect: true,
                completion_redirect: true,
                egress_control: false
            }
        );
        assert!(acs.redirects());
        let off = Acs::from_config(&config(&[(0x000d, 0x0000)]));
        assert!(!off.redirects());
        assert_eq!(Acs::from_config(&config(&[(0x0001, 0)])), Acs::Absent);
        // What a user other than root reads: 256 bytes.
        assert_eq!(
            Acs::from_config(&config(&[(0x000d, 4)])[..256]),
            Acs::Unreadable
        );
        assert_eq!(Acs::from_config(&[]), Acs::Unreadable);
    }

    #[test]
    fn acs_walks_survive_bad_lists() {
        // A list pointing back at itself, out of range, or into the standard space.
        let mut looped = vec![0u8; 4096];
        looped[0x100..0x104].copy_from_slice(&(0x0001u32 | (0x100 << 20)).to_le_bytes());
        assert_eq!(Acs::from_config(&looped), Acs::Absent);
        let mut past = vec![0u8; 0x104];
        past[0x100..0x104].copy_from_slice(&(0x0001u32 | (0xffc << 20)).to_le_bytes());
        assert_eq!(Acs::from_config(&past), Acs::Unreadable);
        let mut down = vec![0u8; 4096];
        down[0x100..0x104].copy_from_slice(&(0x0001u32 | (0x40 << 20)).to_le_bytes());
        assert_eq!(Acs::from_config(&down), Acs::Absent);
        for len in 0..0x110 {
            Acs::from_config(&config(&[(0x0001, 0), (0x000d, 0x1d)])[..len]);
        }
    }

    #[test]
    fn the_bridges_between_a_gpu_and_its_hca_are_the_switch_ports_below_their_meeting() {
        let nic = path("pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0");
        let gpu = path("pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:1a:00.0");
        assert_eq!(
            bridges_between(&nic, &gpu),
            ["0000:17:00.0", "0000:17:02.0"]
        );
        let other_rp = path("pci0000:15/0000:15:03.0/0000:1c:00.0");
        assert!(bridges_between(&nic, &other_rp).is_empty());
    }
}
