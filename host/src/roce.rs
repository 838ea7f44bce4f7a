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

use ibscope_mad::wire::HostOrder;
use ibscope_mad::wire_struct;
use serde::{Deserialize, Serialize};

use crate::netlink;

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
    /// Each setting that could not be read (keyed by its field's name: `netdev`,
    /// `netdev_mtu`, `pfc`, `dscp_to_priority`, `ecn_np`, `ecn_rp`) and why.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub unread: BTreeMap<String, String>,
}

impl RoceConfig {
    /// Why `setting` (a field's name) could not be read.
    pub fn why_unread(&self, setting: &str) -> &str {
        self.unread
            .get(setting)
            .or_else(|| self.unread.get("netdev"))
            .map_or("not read", String::as_str)
    }

    /// One line: `MTU 9000, PFC on 3, DSCP 26->3 48->6, ECN np 3 rp 3, default ToS 106`;
    /// what could not be read says why (`PFC and DSCP unknown (no DCB: ...)`). Raw text
    /// (interface names, paths): the caller escapes it.
    pub fn summary(&self) -> String {
        let list = |l: &[u8]| match l {
            [] => "none".to_string(),
            l => l.iter().map(u8::to_string).collect::<Vec<_>>().join(","),
        };
        let tail = format!(
            "default ToS {}, {} RoCE v2 GID(s)",
            self.default_roce_tos
                .map_or("not set".into(), |t| t.to_string()),
            self.rocev2_gids
        );
        if self.netdev.is_none() {
            return format!(
                "MTU, PFC, DSCP and ECN unknown ({}), {tail}",
                self.why_unread("netdev")
            );
        }
        let unknown = |what: &str, key: &str| format!("{what} unknown ({})", self.why_unread(key));
        let mtu = self
            .netdev_mtu
            .map_or_else(|| unknown("MTU", "netdev_mtu"), |m| format!("MTU {m}"));
        let map = self.dscp_to_priority.as_ref().map(|m| match m.is_empty() {
            true => "DSCP none (trust PCP)".to_string(),
            false => {
                let pairs: Vec<String> = m.iter().map(|(d, p)| format!("{d}->{p}")).collect();
                format!("DSCP {}", pairs.join(" "))
            }
        });
        let dcb = match (&self.pfc, map) {
            (None, None) => unknown("PFC and DSCP", "pfc"),
            (pfc, map) => format!(
                "{}, {}",
                pfc.as_deref()
                    .map_or_else(|| unknown("PFC", "pfc"), |p| format!("PFC on {}", list(p))),
                map.unwrap_or_else(|| unknown("DSCP", "dscp_to_priority"))
            ),
        };
        let ecn = match (&self.ecn_np, &self.ecn_rp) {
            (None, None) => unknown("ECN", "ecn_np"),
            (np, rp) => {
                let side = |l: &Option<Vec<u8>>, key| {
                    l.as_deref()
                        .map_or_else(|| format!("unknown ({})", self.why_unread(key)), list)
                };
                format!("ECN np {} rp {}", side(np, "ecn_np"), side(rp, "ecn_rp"))
            }
        };
        format!("{mtu}, {dcb}, {ecn}, {tail}")
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

/// The DSCP codepoints iproute2's `dcb` prints by name (its rt_dsfield table, shifted
/// from the DS field to the DSCP), as the RFCs define them: the Default PHB and the Class
/// Selectors CS0-CS7 (RFC 2474, xxx000), Assured Forwarding AF11-AF43 (RFC 2597, class x
/// and drop precedence y at 8x + 2y), Expedited Forwarding EF (RFC 3246, 101110).
pub const DSCP_NAMES: [(&str, u8); 22] = [
    ("default", 0),
    ("CS0", 0),
    ("CS1", 8),
    ("CS2", 16),
    ("CS3", 24),
    ("CS4", 32),
    ("CS5", 40),
    ("CS6", 48),
    ("CS7", 56),
    ("AF11", 10),
    ("AF12", 12),
    ("AF13", 14),
    ("AF21", 18),
    ("AF22", 20),
    ("AF23", 22),
    ("AF31", 26),
    ("AF32", 28),
    ("AF33", 30),
    ("AF41", 34),
    ("AF42", 36),
    ("AF43", 38),
    ("EF", 46),
];

/// A DSCP as `dcb` prints it: a number (0-63, as `dcb -N` and for unnamed codepoints) or
/// a name of [`DSCP_NAMES`] (any case).
pub fn dscp_value(text: &str) -> Option<u8> {
    match text.parse::<u8>() {
        Ok(n) => (n < 64).then_some(n),
        Err(_) => DSCP_NAMES
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(text))
            .map(|&(_, dscp)| dscp),
    }
}

/// `dcb pfc show dev IF` and `dcb app show dev IF dscp-prio` output, saved as one file:
/// DSCPs by number or by the names `dcb` prints by default (`AF31:3 CS6:6`).
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
                let d = dscp_value(a).ok_or_else(|| {
                    format!("{w:?} in \"dscp-prio\": {a:?} is not a DSCP (0-63, or a name such as AF31 or CS6)")
                })?;
                let p: u8 = b.parse().ok().filter(|p| *p < 8).ok_or_else(bad)?;
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

wire_struct! {
    /// `struct dcbmsg` (linux/dcbnl.h): the DCB family's header after the netlink one.
    pub struct DcbMsg (4) {
        pub family: u8 = 0, 8, "dcb_family";
        pub cmd: u8 = 8, 8, "cmd";
        pub pad: HostOrder<u16> = 16, 16, "dcb_pad";
    }
}

wire_struct! {
    /// `struct ieee_pfc` (linux/dcbnl.h), its leading fields; the per-priority request
    /// and indication counters follow them.
    pub struct IeeePfc (8) {
        /// How many priorities can have PFC on at once.
        pub pfc_cap: u8 = 0, 8, "pfc_cap";
        /// The priorities with PFC on, one bit each (bit 0: priority 0).
        pub pfc_en: u8 = 8, 8, "pfc_en";
        pub mbc: u8 = 16, 8, "mbc";
        pub delay: HostOrder<u16> = 32, 16, "delay";
    }
}

wire_struct! {
    /// `struct dcb_app` (linux/dcbnl.h): one entry of the APP table.
    pub struct DcbApp (4) {
        /// What `protocol` is: `IEEE_8021QAZ_APP_SEL_DSCP` for a DSCP.
        pub selector: u8 = 0, 8, "selector";
        pub priority: u8 = 8, 8, "priority";
        pub protocol: HostOrder<u16> = 16, 16, "protocol";
    }
}

/// The request: a `dcbmsg` for IEEE_GET and the interface name.
pub fn ieee_get_request(netdev: &str, seq: u32) -> Vec<u8> {
    let mut name = netdev.as_bytes().to_vec();
    name.push(0);
    let mut dcb = [0u8; DcbMsg::WIRE_LEN];
    let head = DcbMsg {
        family: 0,
        cmd: DCB_CMD_IEEE_GET,
        pad: HostOrder(0),
    };
    head.encode_into(&mut dcb)
        .expect("a dcbmsg fits its buffer");
    netlink::request(RTM_GETDCB, seq, &dcb, &[(DCB_ATTR_IFNAME, &name)])
}

/// Decode the answer to [`ieee_get_request`]: the PFC-enabled priorities and the APP
/// table's DSCP entries.
pub fn decode_ieee(buf: &[u8]) -> Result<Dcb, String> {
    let body = netlink::payload(buf).map_err(|e| format!("DCB: {e}"))?;
    let attrs = body.get(DcbMsg::WIRE_LEN..).ok_or("short DCB answer")?;
    let mut dcb = Dcb::default();
    let Some((_, ieee)) = netlink::attributes(attrs)
        .into_iter()
        .find(|(k, _)| *k == DCB_ATTR_IEEE)
    else {
        return Err("no IEEE DCB attributes: the driver does not do DCB".into());
    };
    for (kind, value) in netlink::attributes(ieee) {
        match kind {
            DCB_ATTR_IEEE_PFC => {
                let pfc = IeeePfc::decode(value).map_err(|_| "short ieee_pfc")?;
                dcb.pfc = (0..8).filter(|p| pfc.pfc_en & (1 << p) != 0).collect();
            }
            DCB_ATTR_IEEE_APP_TABLE => {
                for (k, app) in netlink::attributes(value) {
                    let Ok(app) = DcbApp::decode(app) else {
                        continue;
                    };
                    if k != DCB_ATTR_IEEE_APP || app.selector != APP_SELECTOR_DSCP {
                        continue;
                    }
                    if let Ok(dscp) = u8::try_from(app.protocol.0) {
                        dcb.dscp_to_priority.insert(dscp, app.priority);
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
    // SAFETY: plain socket(2); closed below.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE) };
    if fd < 0 {
        return Err(format!("netlink: {}", std::io::Error::last_os_error()));
    }
    let answer = exchange(fd, &ieee_get_request(netdev, 1));
    // SAFETY: our own descriptor, closed once.
    unsafe { libc::close(fd) };
    answer
}

/// Send `request` on netlink socket `fd` and read one answer (with a 2 s timeout).
fn exchange(fd: libc::c_int, request: &[u8]) -> Result<Vec<u8>, String> {
    let timeout = libc::timeval {
        tv_sec: 2,
        tv_usec: 0,
    };
    // SAFETY: setsockopt with a timeval of the size given; send and recv on buffers of
    // the lengths given.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            std::ptr::addr_of!(timeout).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
        if libc::send(fd, request.as_ptr().cast(), request.len(), 0) < 0 {
            return Err(format!("netlink send: {}", std::io::Error::last_os_error()));
        }
        let mut buf = vec![0u8; 16 * 1024];
        let n = libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0);
        if n < 0 {
            return Err(format!("netlink: {}", std::io::Error::last_os_error()));
        }
        buf.truncate(n as usize);
        Ok(buf)
    }
}

/// The netdev MTU that carries a RoCE MTU: the payload plus Ethernet, IP, UDP, BTH, an
/// RETH and the ICRC (4096 needs 4200, the figure vendors give).
pub fn netdev_mtu_for(roce_mtu: u32) -> u32 {
    roce_mtu + 104
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend(((4 + value.len()) as u16).to_ne_bytes());
        a.extend(kind.to_ne_bytes());
        a.extend(value);
        a.resize(a.len().next_multiple_of(4), 0);
        a
    }

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
        error[4..6].copy_from_slice(&netlink::NLMSG_ERROR.to_ne_bytes());
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
        assert!(parse_dcb_text("dscp-prio 64:3").is_err());
        assert!(parse_dcb_text("dscp-prio AF31:8").is_err());
    }

    fn capture(name: &str) -> String {
        std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/data/netdev/iproute2-dcb")
                .join(name),
        )
        .unwrap()
    }

    /// iproute2's `dcb` itself, run on a kernel answer of PFC on priority 3, DSCP 26 -> 3
    /// and 48 -> 6 (tests/data/netdev/README.md): it prints the DSCPs by name.
    #[test]
    fn iproute2_dcb_output_with_dscp_names_reads() {
        let text = capture("pfc3-dscp26.txt");
        assert!(text.contains("dscp-prio AF31:3 CS6:6"), "{text}");
        let dcb = parse_dcb_text(&text).unwrap();
        assert_eq!(dcb.pfc, [3]);
        assert_eq!(dcb.dscp_to_priority, BTreeMap::from([(26, 3), (48, 6)]));
        // The APP table the kernel was given, printed by `dcb app show`: names where
        // iproute2 has one, numbers elsewhere.
        let text = capture("app-names.txt");
        assert!(
            text.contains("CS1:1 AF11:1 CS3:3 AF41:4 EF:5 CS7:7 63:2"),
            "{text}"
        );
        let given = [
            (0, 0),
            (8, 1),
            (10, 1),
            (24, 3),
            (34, 4),
            (46, 5),
            (56, 7),
            (63, 2),
        ];
        assert_eq!(
            parse_dcb_text(&text).unwrap().dscp_to_priority,
            BTreeMap::from(given)
        );
        // dcb-app(8)'s own example output (iproute2, man/man8/dcb-app.8), a DSCP given two
        // priorities: the later entry is what the table holds last.
        let man = parse_dcb_text("dscp-prio 0:0 CS3:2 CS3:3 CS6:6").unwrap();
        assert_eq!(
            man.dscp_to_priority,
            BTreeMap::from([(0, 0), (24, 3), (48, 6)])
        );
    }

    /// The names against the RFCs' bit patterns: class selectors xxx000, AF classes xyy0
    /// (class x, drop precedence y), EF 101110.
    #[test]
    fn dscp_names_are_the_rfcs_codepoints() {
        for class in 0..8u8 {
            assert_eq!(dscp_value(&format!("CS{class}")), Some(class << 3));
        }
        for class in 1..=4u8 {
            for drop in 1..=3u8 {
                assert_eq!(
                    dscp_value(&format!("af{class}{drop}")),
                    Some(class << 3 | drop << 1)
                );
            }
        }
        assert_eq!(dscp_value("EF"), Some(0b101110));
        assert_eq!(dscp_value("default"), Some(0));
        assert_eq!(dscp_value("63"), Some(63));
        assert_eq!(dscp_value("64"), None);
        assert_eq!(dscp_value("AF51"), None);
    }

    /// What could not be read says why; nothing is a bare `?`.
    #[test]
    fn the_summary_says_why_a_setting_is_unknown() {
        let mut c = RoceConfig {
            port: 1,
            netdev: Some("eth2".into()),
            pfc: Some(vec![3]),
            dscp_to_priority: Some(BTreeMap::from([(26, 3)])),
            rocev2_gids: 1,
            ..RoceConfig::default()
        };
        c.unread
            .insert("netdev_mtu".into(), "mtu could not be read".into());
        c.unread.insert("ecn_np".into(), "no ecn/roce_np".into());
        c.unread.insert("ecn_rp".into(), "no ecn/roce_rp".into());
        assert_eq!(
            c.summary(),
            "MTU unknown (mtu could not be read), PFC on 3, DSCP 26->3, ECN unknown \
             (no ecn/roce_np), default ToS not set, 1 RoCE v2 GID(s)"
        );
        c.pfc = None;
        c.dscp_to_priority = None;
        c.ecn_np = Some(vec![3]);
        for key in ["pfc", "dscp_to_priority"] {
            c.unread
                .insert(key.into(), "DCB: Operation not supported".into());
        }
        let s = c.summary();
        assert!(
            s.contains("PFC and DSCP unknown (DCB: Operation not supported)"),
            "{s}"
        );
        assert!(s.contains("ECN np 3 rp unknown (no ecn/roce_rp)"), "{s}");
        c.netdev = None;
        c.unread = BTreeMap::from([("netdev".into(), "no GID of port 1 names a netdev".into())]);
        assert!(c
            .summary()
            .starts_with("MTU, PFC, DSCP and ECN unknown (no GID of port 1 names a netdev)"));
        assert!(!c.summary().contains('?'));
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
