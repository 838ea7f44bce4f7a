//! A RoCE port's pluggable module, read from its netdev: through ethtool netlink
//! (`ETHTOOL_MSG_MODULE_EEPROM_GET`, linux/ethtool_netlink.h: 128 bytes a request, by I2C
//! address, page and bank, so a CMIS module's further banks and lanes 9-16 are read), else
//! the legacy ioctls (`ETHTOOL_GMODULEINFO` for the map and its length,
//! `ETHTOOL_GMODULEEEPROM` for the bytes, in the flat layout `ethtool -m DEV raw on` writes;
//! linux/ethtool.h; what drivers flatten into 256-768 bytes), or, under a fixture root, a
//! saved dump (`ROOT/module/NETDEV`: raw bytes or any text format `ibscope cables decode`
//! reads). An InfiniBand port has no netdev with a module (IPoIB does not implement module
//! reads): its module is read through the fabric instead.

use std::path::PathBuf;

use ibscope_mad::cable::decode::{bank_halves, halves_to_read};
use ibscope_mad::cable::{dump, HalfAddr, ModuleMemory, ADDR_A0, HALF};

use crate::ethtool::{as_bytes, Socket};
use crate::netlink::{self, generic};

/// Where a netdev's module memory comes from.
pub trait ModuleSource {
    fn read(&self, netdev: &str) -> Result<ModuleMemory, String>;
}

/// The module dumps saved under a fixture root (`ROOT/module/NETDEV`).
pub struct SavedModules {
    pub dir: PathBuf,
}

/// A dump larger than any module map in any layout is not one.
const MAX_DUMP: u64 = 64 * 1024;

impl ModuleSource for SavedModules {
    fn read(&self, netdev: &str) -> Result<ModuleMemory, String> {
        let path = self.dir.join(netdev);
        let meta = std::fs::metadata(&path)
            .map_err(|_| format!("no saved module memory in {}", path.display()))?;
        if !meta.is_file() || meta.len() > MAX_DUMP {
            return Err(format!("{} is not a module dump", path.display()));
        }
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        dump::parse(&bytes)
            .map(|d| d.memory)
            .map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// The live module of a netdev, through the ethtool ioctls.
pub struct EthtoolModules;

/// `ETHTOOL_GMODULEINFO` and `ETHTOOL_GMODULEEEPROM` (linux/ethtool.h).
const GMODULEINFO: u32 = 0x42;
const GMODULEEEPROM: u32 = 0x43;
/// The longest flat layout (CMIS: the lower page and five upper pages).
const MAX_LEN: u32 = 768;

/// The length of module memory from an `ethtool_modinfo` answer (`cmd`, `type`,
/// `eeprom_len`, then reserved words; host order).
pub fn decode_modinfo(buf: &[u8]) -> Result<u32, String> {
    let word = |i: usize| {
        buf.get(i * 4..i * 4 + 4)
            .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    };
    let len = word(2).ok_or("short ETHTOOL_GMODULEINFO answer")?;
    if len == 0 || len > MAX_LEN {
        return Err(format!("the driver reports {len} bytes of module memory"));
    }
    Ok(len)
}

impl ModuleSource for EthtoolModules {
    fn read(&self, netdev: &str) -> Result<ModuleMemory, String> {
        let socket = Socket::open()?;
        // struct ethtool_modinfo: cmd, type, eeprom_len, reserved[8].
        let mut info = [0u64; 6];
        info[0] = words_of(GMODULEINFO, 0);
        let answer = socket.ethtool(netdev, &mut info)?;
        let len = decode_modinfo(as_bytes(answer))?;
        // struct ethtool_eeprom: cmd, magic, offset, len, then the bytes.
        let mut buf = vec![0u64; 2 + (len as usize).div_ceil(8)];
        buf[0] = words_of(GMODULEEEPROM, 0);
        buf[1] = words_of(0, len);
        let answer = socket.ethtool(netdev, &mut buf)?;
        let bytes = as_bytes(answer)
            .get(16..16 + len as usize)
            .ok_or("short ETHTOOL_GMODULEEEPROM answer")?;
        ModuleMemory::from_raw(bytes).map_err(|e| format!("{netdev}: {e}"))
    }
}

/// Two native-order u32 words in one u64 of a command buffer, `first` at the lower address.
fn words_of(first: u32, second: u32) -> u64 {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&first.to_ne_bytes());
    b[4..].copy_from_slice(&second.to_ne_bytes());
    u64::from_ne_bytes(b)
}

/// The live module of a netdev through ethtool netlink, half by half: the lower page, the
/// halves its identifier names, then a CMIS module's further banks.
pub struct NetlinkModules;

/// `ETHTOOL_MSG_MODULE_EEPROM_GET` and its attributes (linux/ethtool_netlink.h).
const MSG_MODULE_EEPROM_GET: u8 = 31;
const A_EEPROM_HEADER: u16 = 1;
const A_EEPROM_OFFSET: u16 = 2;
const A_EEPROM_LENGTH: u16 = 3;
const A_EEPROM_PAGE: u16 = 4;
const A_EEPROM_BANK: u16 = 5;
const A_EEPROM_I2C_ADDRESS: u16 = 6;
const A_EEPROM_DATA: u16 = 7;
const A_HEADER_DEV_NAME: u16 = 2;
const ETHTOOL_GENL_VERSION: u8 = 1;

/// The request of one half of `netdev`'s module: 128 bytes at offset 0 (the lower half)
/// or 128 (the page's upper half) of `half`'s page, bank and I2C address.
pub fn eeprom_request(family: u16, netdev: &str, half: HalfAddr, seq: u32) -> Vec<u8> {
    let offset: u32 = if half.upper { HALF as u32 } else { 0 };
    let page = if half.upper { half.page } else { 0 };
    netlink::message(
        family,
        netlink::F_REQUEST,
        seq,
        &generic::header(MSG_MODULE_EEPROM_GET, ETHTOOL_GENL_VERSION),
        &[
            netlink::attr(
                A_EEPROM_HEADER | netlink::F_NESTED,
                &netlink::attr_str(A_HEADER_DEV_NAME, netdev),
            ),
            netlink::attr(A_EEPROM_OFFSET, &offset.to_ne_bytes()),
            netlink::attr(A_EEPROM_LENGTH, &(HALF as u32).to_ne_bytes()),
            netlink::attr(A_EEPROM_PAGE, &[page]),
            netlink::attr(A_EEPROM_BANK, &[half.bank]),
            netlink::attr(A_EEPROM_I2C_ADDRESS, &[half.i2c]),
        ],
    )
}

/// The 128 bytes of an answer to [`eeprom_request`].
pub fn decode_eeprom(buf: &[u8], half: HalfAddr) -> Result<[u8; HALF], String> {
    let (_, body) = netlink::answer(buf, &format!("module {half}"))?;
    let data = netlink::attributes(body.get(4..).unwrap_or(&[]))
        .into_iter()
        .find(|(k, _)| *k == A_EEPROM_DATA)
        .map(|(_, v)| v)
        .ok_or_else(|| format!("module {half}: no data in the answer"))?;
    data.try_into()
        .map_err(|_| format!("module {half}: {} bytes, not {HALF}", data.len()))
}

impl ModuleSource for NetlinkModules {
    fn read(&self, netdev: &str) -> Result<ModuleMemory, String> {
        if netdev.is_empty() || netdev.len() >= libc::IFNAMSIZ || netdev.contains('\0') {
            return Err(format!("{netdev:?} is not an interface name"));
        }
        let socket = netlink::Socket::open(libc::NETLINK_GENERIC)?;
        let family = generic::family(&socket, "ethtool")?;
        let mut seq = 1;
        let mut read = |half: HalfAddr| {
            seq += 1;
            decode_eeprom(
                &socket.exchange(&eeprom_request(family, netdev, half, seq))?,
                half,
            )
        };
        let mut memory = ModuleMemory::new();
        let lower = read(HalfAddr::lower(ADDR_A0))?;
        memory.insert(HalfAddr::lower(ADDR_A0), lower);
        let wanted = halves_to_read(&lower).map_err(|e| format!("{netdev}: {e}"))?;
        for (i, half) in wanted.into_iter().enumerate() {
            match read(half) {
                Ok(bytes) => memory.insert(half, bytes),
                // The identity page is needed; an optional page a module lacks is not.
                Err(e) if i == 0 => return Err(e),
                Err(_) => {}
            }
        }
        for half in bank_halves(&memory) {
            if let Ok(bytes) = read(half) {
                memory.insert(half, bytes);
            }
        }
        Ok(memory)
    }
}

/// A netdev's live module: through netlink, else (an older kernel or driver) the ioctls.
pub struct LiveModules;

impl ModuleSource for LiveModules {
    fn read(&self, netdev: &str) -> Result<ModuleMemory, String> {
        NetlinkModules.read(netdev).or_else(|netlink| {
            EthtoolModules
                .read(netdev)
                .map_err(|ioctl| format!("netlink: {netlink}; ioctl: {ioctl}"))
        })
    }
}

/// Every netdev of `netdevs` with a module: its memory or why it could not be read.
pub fn read_all(
    source: &dyn ModuleSource,
    netdevs: &[String],
) -> Vec<(String, Result<ModuleMemory, String>)> {
    netdevs
        .iter()
        .map(|n| (n.clone(), source.read(n)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modinfo_answers_decode() {
        let answer: Vec<u8> = [GMODULEINFO, 0x3, 640, 0]
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .collect();
        assert_eq!(decode_modinfo(&answer), Ok(640));
        assert!(decode_modinfo(&answer[..8]).is_err());
        let huge: Vec<u8> = [GMODULEINFO, 0, 1 << 20]
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .collect();
        assert!(decode_modinfo(&huge).is_err());
    }

    #[test]
    fn no_such_interface_is_an_error() {
        assert!(EthtoolModules.read("ibscope-none0").is_err());
        assert!(EthtoolModules.read("").is_err());
        assert!(NetlinkModules.read("ibscope-none0").is_err());
        assert!(LiveModules.read("lo").is_err());
    }

    #[test]
    fn a_netlink_request_names_page_bank_and_address() {
        // Page 11h of bank 1 of a CMIS module: offset 128, length 128, page 0x11, bank 1,
        // I2C 0x50, as ethtool_netlink.h numbers the attributes.
        let half = HalfAddr {
            bank: 1,
            ..HalfAddr::page(ADDR_A0, 0x11)
        };
        let r = eeprom_request(21, "eth2", half, 9);
        let (kind, body) = netlink::answer(&r, "x").unwrap();
        assert_eq!(kind, 21);
        assert_eq!(&body[..4], &[MSG_MODULE_EEPROM_GET, 1, 0, 0]);
        let attrs = netlink::attributes(&body[4..]);
        let value = |k: u16| attrs.iter().find(|(x, _)| *x == k).unwrap().1;
        assert_eq!(
            netlink::attributes(value(A_EEPROM_HEADER)),
            [(2, &b"eth2\0"[..])]
        );
        assert_eq!(value(A_EEPROM_OFFSET), 128u32.to_ne_bytes());
        assert_eq!(value(A_EEPROM_LENGTH), 128u32.to_ne_bytes());
        assert_eq!(
            (
                value(A_EEPROM_PAGE),
                value(A_EEPROM_BANK),
                value(A_EEPROM_I2C_ADDRESS)
            ),
            (&[0x11][..], &[1][..], &[0x50][..])
        );
        // The lower half: offset 0, page 0.
        let r = eeprom_request(21, "eth2", HalfAddr::lower(0x51), 1);
        let attrs = netlink::attributes(&netlink::answer(&r, "x").unwrap().1[4..])
            .into_iter()
            .map(|(k, v)| (k, v.to_vec()))
            .collect::<Vec<_>>();
        assert!(attrs.contains(&(A_EEPROM_OFFSET, 0u32.to_ne_bytes().to_vec())));
        assert!(attrs.contains(&(A_EEPROM_I2C_ADDRESS, vec![0x51])));
    }

    #[test]
    fn a_netlink_answer_gives_its_128_bytes_or_an_error() {
        let half = HalfAddr::page(ADDR_A0, 0);
        let reply = netlink::message(
            21,
            0,
            2,
            &generic::header(MSG_MODULE_EEPROM_GET + 1, 1),
            &[netlink::attr(A_EEPROM_DATA, &[0x11; HALF])],
        );
        assert_eq!(decode_eeprom(&reply, half), Ok([0x11; HALF]));
        let short = netlink::message(
            21,
            0,
            2,
            &generic::header(1, 1),
            &[netlink::attr(A_EEPROM_DATA, &[0x11; 12])],
        );
        assert!(decode_eeprom(&short, half)
            .unwrap_err()
            .contains("12 bytes"));
        let none = netlink::message(21, 0, 2, &generic::header(1, 1), &[]);
        assert!(decode_eeprom(&none, half).unwrap_err().contains("no data"));
        let error = netlink::message(netlink::NLMSG_ERROR, 0, 2, &(-95i32).to_ne_bytes(), &[]);
        assert!(decode_eeprom(&error, half).is_err());
    }
}
