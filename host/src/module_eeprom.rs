//! A RoCE port's pluggable module, read from its netdev: the legacy ethtool ioctls
//! (`ETHTOOL_GMODULEINFO` for the map and its length, `ETHTOOL_GMODULEEEPROM` for the
//! bytes, in the flat layout `ethtool -m DEV raw on` writes; linux/ethtool.h), or, under a
//! fixture root, a saved dump (`ROOT/module/NETDEV`: raw bytes or any text format
//! `ibscope cables decode` reads). An InfiniBand port has no netdev with a module (IPoIB
//! does not implement module reads): its module is read through the fabric instead.
//!
//! Not yet here: the netlink request (`ETHTOOL_MSG_MODULE_EEPROM_GET`, page by page, with
//! banks for CMIS lanes 9-16); the ioctl gives what drivers flatten into 256-768 bytes.

use std::path::PathBuf;

use ibscope_mad::cable::{dump, ModuleMemory};

use crate::ethtool::{as_bytes, Socket};

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
    }
}
