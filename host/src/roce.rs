//! A RoCE port's lossless configuration: which priorities have PFC, how DSCP maps to
//! priorities (trust DSCP), where ECN reacts and notifies, the default RoCE ToS of
//! rdma_cm, the netdev's MTU, and whether RoCE v2 GIDs exist; checked against the profile
//! the operator declares (`[roce]` in the config file), or without one for consistency
//! between the host's ports. There is no built-in "best practice".
//!
//! Sources: DCB through rtnetlink (`RTM_GETDCB`, `DCB_CMD_IEEE_GET`: the IEEE PFC object's
//! `pfc_en` and the APP table's DSCP entries, layouts of linux/dcbnl.h), or under a fixture
//! root `ROOT/dcb/NETDEV` in iproute2 `dcb` output (`prio-pfc 3:on ...`, `dscp-prio 26:3`);
//! `/sys/class/net/IF/mtu`; `/sys/class/net/IF/ecn/roce_{np,rp}/enable/P` where the driver
//! has them (mlx5); `/sys/kernel/config/rdma_cm/DEV/ports/N/default_roce_tos` where rdma_cm
//! is configured.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::netlink::{self, attributes};

/// What the operator wants of every RoCE port (`[roce]` in the config file).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct RoceProfile {
    /// The lossless priority RoCE traffic runs on.
    pub priority: Option<u8>,
    /// The DSCP RoCE traffic is marked with (mapped to `priority`, and the default RoCE ToS).
    pub dscp: Option<u8>,
    /// Exactly the priorities with PFC on (default: `[priority]`).
    pub pfc: Option<Vec<u8>>,
    /// ECN reaction and notification on `priority`.
    pub ecn: Option<bool>,
    /// The RoCE MTU (bytes: 1024, 2048, 4096) the netdev's MTU must carry.
    pub mtu: Option<u32>,
}

impl RoceProfile {
    /// Errors in a profile as read: values out of range.
    pub fn validate(&self) -> Result<(), String> {
        let prio = |p: u8| {
            if p < 8 {
                Ok(())
            } else {
                Err(format!("priority {p} is not 0-7"))
            }
        };
        if let Some(p) = self.priority {
            prio(p)?;
        }
        for p in self.pfc.iter().flatten() {
            prio(*p)?;
        }
        if self.dscp.is_some_and(|d| d > 63) {
            return Err("dscp is 0-63".into());
        }
        if let Some(m) = self.mtu {
            if ![256, 512, 1024, 2048, 4096].contains(&m) {
                return Err(format!(
                    "mtu {m} is not a RoCE MTU (256, 512, 1024, 2048, 4096)"
                ));
            }
        }
        Ok(())
    }
    /// The priorities that should have PFC.
    pub fn pfc_wanted(&self) -> Option<Vec<u8>> {
        self.pfc.clone().or_else(|| self.priority.map(|p| vec![p]))
    }
}

/// What a RoCE port is configured with; `None` where it could not be read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RoceConfig {
    pub port: u8,
    pub netdev: Option<String>,
    pub netdev_mtu: Option<u32>,
    /// Priorities with PFC enabled.
    pub pfc: Option<Vec<u8>>,
    /// DSCP to priority (the APP table's DSCP entries: trust DSCP when any).
    pub dscp_to_priority: Option<BTreeMap<u8, u8>>,
    /// Priorities where ECN notification (NP) and reaction (RP) are on.
    pub ecn_np: Option<Vec<u8>>,
    pub ecn_rp: Option<Vec<u8>>,
    /// rdma_cm's default ToS for RoCE (DSCP in its upper six bits).
    pub default_roce_tos: Option<u8>,
    pub rocev2_gids: usize,
    /// Why DCB could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dcb_error: Option<String>,
}

impl RoceConfig {
    /// One line: `MTU 9000, PFC on 3, DSCP 26->3 48->6, ECN np 3 rp 3, default ToS 106`
    /// (`?` for what could not be read). Interface names are the caller's to escape.
    pub fn summary(&self) -> String {
        let list = |l: &Option<Vec<u8>>| match l {
            None => "?".to_string(),
            Some(l) if l.is_empty() => "none".to_string(),
            Some(l) => l.iter().map(u8::to_string).collect::<Vec<_>>().join(","),
        };
        let map = match &self.dscp_to_priority {
            None => "?".to_string(),
            Some(m) if m.is_empty() => "none (trust PCP)".to_string(),
            Some(m) => m
                .iter()
                .map(|(d, p)| format!("{d}->{p}"))
                .collect::<Vec<_>>()
                .join(" "),
        };
        format!(
            "MTU {}, PFC on {}, DSCP {map}, ECN np {} rp {}, default ToS {}, {} RoCE v2 GID(s)",
            self.netdev_mtu.map_or("?".into(), |m| m.to_string()),
            list(&self.pfc),
            list(&self.ecn_np),
            list(&self.ecn_rp),
            self.default_roce_tos.map_or("-".into(), |t| t.to_string()),
            self.rocev2_gids
        )
    }
}

/// A netdev's DCB settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Dcb {
    pub pfc: Vec<u8>,
    pub dscp_to_priority: BTreeMap<u8, u8>,
}

/// Where DCB settings come from.
pub trait DcbSource {
    fn dcb(&self, netdev: &str) -> Result<Dcb, String>;
}

/// `dcb pfc show dev IF` and `dcb app show dev IF dscp-prio` output, saved as one file.
pub fn parse_dcb_text(text: &str) -> Result<Dcb, String> {
    let mut dcb = Dcb::default();
    let mut words = text.split_whitespace();
    let mut section = "";
    for w in words.by_ref() {
        if w.ends_with("-pfc") || w.ends_with("-prio") || !w.contains(':') {
            section = w;
            continue;
        }
        let (a, b) = w.split_once(':').expect("has a colon");
        let bad = || format!("{w:?} in {section:?} is not N:VALUE");
        match section {
            "prio-pfc" => {
                let p: u8 = a.parse().map_err(|_| bad())?;
                match b {
                    "on" => dcb.pfc.push(p),
                    "off" => {}
                    _ => return Err(bad()),
                }
            }
            "dscp-prio" => {
                let d: u8 = a.parse().map_err(|_| bad())?;
                let p: u8 = b.parse().map_err(|_| bad())?;
                dcb.dscp_to_priority.insert(d, p);
            }
            _ => {}
        }
    }
    dcb.pfc.sort_unstable();
    Ok(dcb)
}

/// DCB saved under a fixture root (`ROOT/dcb/NETDEV`).
pub struct SavedDcb {
    pub dir: PathBuf,
}

impl DcbSource for SavedDcb {
    fn dcb(&self, netdev: &str) -> Result<Dcb, String> {
        let path = self.dir.join(netdev);
        // A few lines; bounded all the same.
        let mut text = String::new();
        std::fs::File::open(&path)
            .and_then(|f| {
                std::io::Read::read_to_string(&mut std::io::Read::take(f, 64 * 1024), &mut text)
            })
            .map_err(|_| format!("no saved DCB settings in {}", path.display()))?;
        parse_dcb_text(&text)
    }
}

const RTM_GETDCB: u16 = 78;
const DCB_CMD_IEEE_GET: u8 = 21;
const DCB_ATTR_IFNAME: u16 = 1;
const DCB_ATTR_IEEE: u16 = 13;
const DCB_ATTR_IEEE_PFC: u16 = 2;
const DCB_ATTR_IEEE_APP_TABLE: u16 = 3;
const DCB_ATTR_IEEE_APP: u16 = 1;
/// `IEEE_8021QAZ_APP_SEL_DSCP`.
const APP_SELECTOR_DSCP: u8 = 5;

/// The request: an `nlmsghdr`, a `dcbmsg` (family, cmd, pad) and the interface name.
pub fn ieee_get_request(netdev: &str, seq: u32) -> Vec<u8> {
    netlink::message(
        RTM_GETDCB,
        netlink::F_REQUEST,
        seq,
        &[0, DCB_CMD_IEEE_GET, 0, 0],
        &[netlink::attr_str(DCB_ATTR_IFNAME, netdev)],
    )
}

/// Decode the answer to [`ieee_get_request`]: the PFC-enabled priorities (`ieee_pfc`'s
/// second byte, `pfc_en`) and the APP table's DSCP entries (`dcb_app`: selector,
/// priority, protocol = the DSCP).
pub fn decode_ieee(buf: &[u8]) -> Result<Dcb, String> {
    let (_, body) = netlink::answer(buf, "DCB")?;
    let mut dcb = Dcb::default();
    let Some((_, ieee)) = attributes(body.get(4..).unwrap_or(&[]))
        .into_iter()
        .find(|(k, _)| *k == DCB_ATTR_IEEE)
    else {
        return Err("no IEEE DCB attributes: the driver does not do DCB".into());
    };
    for (kind, value) in attributes(ieee) {
        match kind {
            DCB_ATTR_IEEE_PFC => {
                let enabled = *value.get(1).ok_or("short ieee_pfc")?;
                dcb.pfc = (0..8).filter(|p| enabled & (1 << p) != 0).collect();
            }
            DCB_ATTR_IEEE_APP_TABLE => {
                for (k, app) in attributes(value) {
                    if k != DCB_ATTR_IEEE_APP || app.len() < 4 || app[0] != APP_SELECTOR_DSCP {
                        continue;
                    }
                    let dscp = u16::from_ne_bytes([app[2], app[3]]);
                    if let Ok(dscp) = u8::try_from(dscp) {
                        dcb.dscp_to_priority.insert(dscp, app[1]);
                    }
                }
            }
            _ => {}
        }
    }
    Ok(dcb)
}

/// DCB read live through rtnetlink.
pub struct Netlink;

impl DcbSource for Netlink {
    fn dcb(&self, netdev: &str) -> Result<Dcb, String> {
        if netdev.is_empty() || netdev.len() >= libc::IFNAMSIZ || netdev.contains('\0') {
            return Err(format!("{netdev:?} is not an interface name"));
        }
        decode_ieee(&raw_ieee_answer(netdev)?)
    }
}

/// The kernel's answer to [`ieee_get_request`] for `netdev`, as it wrote it (what a
/// capture keeps).
pub fn raw_ieee_answer(netdev: &str) -> Result<Vec<u8>, String> {
    netlink::Socket::open(libc::NETLINK_ROUTE)?.exchange(&ieee_get_request(netdev, 1))
}

/// The netdev MTU that carries a RoCE MTU: the payload plus Ethernet, IP, UDP, BTH, an
/// RETH and the ICRC (4096 needs 4200, the figure vendors give).
pub fn netdev_mtu_for(roce_mtu: u32) -> u32 {
    roce_mtu + 104
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::netlink::{attr, NLMSG_ERROR};

    /// An IEEE_GET answer: PFC on priority 3 (`ieee_pfc`: cap 8, pfc_en 0x08, mbc,
    /// delay, requests, indications: 136 bytes) and DSCP 26 -> 3, 48 -> 6, an 802.1p
    /// entry (selector 1) that is not DSCP.
    fn answer() -> Vec<u8> {
        let mut pfc = vec![0u8; 136];
        pfc[0] = 8;
        pfc[1] = 0x08;
        let app = |sel: u8, prio: u8, proto: u16| {
            let mut a = vec![sel, prio];
            a.extend(proto.to_ne_bytes());
            attr(DCB_ATTR_IEEE_APP, &a)
        };
        let mut table = app(APP_SELECTOR_DSCP, 3, 26);
        table.extend(app(APP_SELECTOR_DSCP, 6, 48));
        table.extend(app(1, 3, 0x8915));
        let mut ieee = attr(DCB_ATTR_IEEE_PFC, &pfc);
        ieee.extend(attr(DCB_ATTR_IEEE_APP_TABLE | 0x8000, &table));
        let body = attr(DCB_ATTR_IEEE | 0x8000, &ieee);
        let total = 20 + body.len();
        let mut m = Vec::new();
        m.extend((total as u32).to_ne_bytes());
        m.extend(RTM_GETDCB.to_ne_bytes());
        m.extend(0u16.to_ne_bytes());
        m.extend(1u32.to_ne_bytes());
        m.extend(0u32.to_ne_bytes());
        m.extend([0, DCB_CMD_IEEE_GET, 0, 0]);
        m.extend(body);
        m
    }

    #[test]
    fn an_ieee_answer_decodes() {
        let dcb = decode_ieee(&answer()).unwrap();
        assert_eq!(dcb.pfc, [3]);
        assert_eq!(dcb.dscp_to_priority, BTreeMap::from([(26, 3), (48, 6)]));
    }

    /// A virtio_net interface's answer to IEEE_GET, captured (tests/data/netdev/README.md):
    /// an NLMSG_ERROR, -EOPNOTSUPP.
    #[test]
    fn a_captured_answer_without_dcb_is_an_error() {
        let bytes = std::fs::read(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/data/netdev/virtio-eth0/dcb-ieee-get.bin"),
        )
        .unwrap();
        let e = decode_ieee(&bytes).unwrap_err();
        assert!(e.starts_with("DCB: ") && e.contains("not supported"), "{e}");
    }

    #[test]
    fn bad_answers_are_errors_never_panics() {
        let good = answer();
        for cut in 0..good.len() {
            let _ = decode_ieee(&good[..cut]);
        }
        let mut error = vec![0u8; 36];
        error[0..4].copy_from_slice(&36u32.to_ne_bytes());
        error[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        error[16..20].copy_from_slice(&(-95i32).to_ne_bytes());
        let e = decode_ieee(&error).unwrap_err();
        assert!(e.starts_with("DCB: "), "{e}");
        let mut lying = good.clone();
        lying[24..26].copy_from_slice(&0xffffu16.to_ne_bytes());
        let _ = decode_ieee(&lying);
    }

    #[test]
    fn the_request_names_the_interface() {
        let r = ieee_get_request("ens1f0np0", 7);
        assert_eq!(r.len() % 4, 0);
        assert_eq!(
            u32::from_ne_bytes(r[0..4].try_into().unwrap()) as usize,
            r.len()
        );
        assert_eq!(u16::from_ne_bytes([r[4], r[5]]), RTM_GETDCB);
        assert_eq!(r[17], DCB_CMD_IEEE_GET);
        assert_eq!(&r[24..34], b"ens1f0np0\0");
    }

    #[test]
    fn dcb_tool_output_reads() {
        let dcb = parse_dcb_text(
            "pfc-cap 8 macsec-bypass off delay 0\nprio-pfc 0:off 1:off 2:off 3:on 4:off 5:on \
             6:off 7:off\ndscp-prio 26:3 48:6\n",
        )
        .unwrap();
        assert_eq!(dcb.pfc, [3, 5]);
        assert_eq!(dcb.dscp_to_priority[&26], 3);
        assert!(parse_dcb_text("prio-pfc 3:maybe").is_err());
        assert!(parse_dcb_text("dscp-prio x:3").is_err());
    }

    #[test]
    fn no_dcb_on_an_interface_without_it_is_an_error() {
        assert!(Netlink.dcb("lo").is_err());
        assert!(Netlink.dcb("ibscope-none0").is_err());
    }

    #[test]
    fn profiles_are_validated() {
        let p = |text: &str| toml_like(text);
        assert!(p("priority=3").validate().is_ok());
        assert!(p("priority=8").validate().is_err());
        assert!(p("dscp=64").validate().is_err());
        assert!(p("mtu=9000").validate().is_err());
        assert_eq!(p("priority=3").pfc_wanted(), Some(vec![3]));
    }

    /// A profile from `key=value` pairs (the config file's TOML is parsed by the binary).
    fn toml_like(text: &str) -> RoceProfile {
        let mut p = RoceProfile::default();
        for kv in text.split(',') {
            let (k, v) = kv.split_once('=').unwrap();
            let n: u32 = v.parse().unwrap();
            match k {
                "priority" => p.priority = Some(n as u8),
                "dscp" => p.dscp = Some(n as u8),
                "mtu" => p.mtu = Some(n),
                _ => unreachable!(),
            }
        }
        p
    }
}
