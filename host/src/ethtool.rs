//! A RoCE port's netdev statistics as `ethtool -S` shows them: the driver's named
//! counters, of which the per-priority pause and discard ones tell whether the lossless
//! class works (`rx_prio3_pause`, `tx_prio3_pause_duration`, `rx_discards_phy`,
//! `rx_out_of_buffer`, mlx5's `tx_pause_storm_error_events`).
//!
//! Read through the ethtool ioctl (`SIOCETHTOOL`: `ETHTOOL_GSSET_INFO` for the number of
//! statistics, `ETHTOOL_GSTRINGS` for their names, `ETHTOOL_GSTATS` for their values; the
//! layouts of linux/ethtool.h), or, under a fixture root, from `ethtool -S` text saved as
//! `ROOT/ethtool/NETDEV`. The decoders take the kernel's buffers as untrusted bytes.

use std::path::PathBuf;

use ibscope_mad::wire::HostOrder;
use ibscope_mad::wire_struct;

/// Where a netdev's statistics come from.
pub trait NetdevStats {
    /// Every statistic of `netdev`, by name, in the driver's order.
    fn stats(&self, netdev: &str) -> Result<Vec<(String, u64)>, String>;
}

/// The names of the statistics worth keeping beside the RDMA counters: pause frames and
/// their duration per priority, discards, receive buffer exhaustion, pause storms.
pub fn is_lossless_stat(name: &str) -> bool {
    name.contains("pause") || name.contains("discard") || name == "rx_out_of_buffer"
}

/// `ethtool -S` output: a `NIC statistics:` line, then `     name: value` lines.
pub fn parse_text(text: &str) -> Result<Vec<(String, u64)>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.ends_with("statistics:") {
            continue;
        }
        let (name, value) = line
            .rsplit_once(':')
            .ok_or_else(|| format!("line {}: not \"name: value\": {line:?}", n + 1))?;
        let value = value
            .trim()
            .parse()
            .map_err(|_| format!("line {}: {:?} is not a number", n + 1, value.trim()))?;
        out.push((name.trim().to_string(), value));
    }
    Ok(out)
}

/// Statistics saved as `ethtool -S` text under a fixture root (`ROOT/ethtool/NETDEV`).
pub struct SavedStats {
    pub dir: PathBuf,
}

impl NetdevStats for SavedStats {
    fn stats(&self, netdev: &str) -> Result<Vec<(String, u64)>, String> {
        let path = self.dir.join(netdev);
        let text = crate::sysfs::Sysfs::read(&path)
            .ok_or_else(|| format!("no saved statistics in {}", path.display()))?;
        parse_text(&text)
    }
}

/// `ETH_SS_STATS`: the string set of statistics.
const STATS_SET: u32 = 1;
/// `ETH_GSTRING_LEN`.
const NAME_LEN: usize = 32;
/// Drivers have a few thousand statistics at most; more is a broken answer.
const MAX_STATS: usize = 65_536;

wire_struct! {
    /// `struct ethtool_sset_info` (linux/ethtool.h) asked for one string set: its data is
    /// one u32, that set's count.
    pub struct SsetInfo (20) {
        pub cmd: HostOrder<u32> = 0, 32, "cmd";
        pub reserved: HostOrder<u32> = 32, 32, "reserved";
        /// The sets asked for; the kernel clears those the driver does not have.
        pub sset_mask: HostOrder<u64> = 64, 64, "sset_mask";
        pub count: HostOrder<u32> = 128, 32, "data[0]";
    }
}

wire_struct! {
    /// `struct ethtool_gstrings` without its data: `len` names of `ETH_GSTRING_LEN` bytes
    /// follow, NUL-padded.
    pub struct GStrings (12) {
        pub cmd: HostOrder<u32> = 0, 32, "cmd";
        pub string_set: HostOrder<u32> = 32, 32, "string_set";
        pub len: HostOrder<u32> = 64, 32, "len";
    }
}

wire_struct! {
    /// `struct ethtool_stats` without its data: `n_stats` u64 values follow.
    pub struct Stats (8) {
        pub cmd: HostOrder<u32> = 0, 32, "cmd";
        pub n_stats: HostOrder<u32> = 32, 32, "n_stats";
    }
}

/// The number of statistics from an `ethtool_sset_info` answer for the stats set.
pub fn decode_count(buf: &[u8]) -> Result<usize, String> {
    let info = SsetInfo::decode(buf).map_err(|_| "short ETHTOOL_GSSET_INFO answer")?;
    if info.sset_mask.0 & (1 << STATS_SET) == 0 {
        return Err("the driver has no statistics".into());
    }
    let count = info.count.0 as usize;
    if count > MAX_STATS {
        return Err(format!("{count} statistics: not a plausible answer"));
    }
    Ok(count)
}

/// The names from an `ethtool_gstrings` answer.
pub fn decode_names(buf: &[u8], count: usize) -> Result<Vec<String>, String> {
    let short = "short ETHTOOL_GSTRINGS answer";
    let len = GStrings::decode(buf).map_err(|_| short)?.len.0 as usize;
    if len != count {
        return Err(format!("{len} names for {count} statistics"));
    }
    let names = buf
        .get(GStrings::WIRE_LEN..GStrings::WIRE_LEN + count * NAME_LEN)
        .ok_or(short)?;
    Ok(names
        .chunks(NAME_LEN)
        .map(|raw| {
            let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
            String::from_utf8_lossy(&raw[..end]).into_owned()
        })
        .collect())
}

/// The values from an `ethtool_stats` answer.
pub fn decode_values(buf: &[u8], count: usize) -> Result<Vec<u64>, String> {
    let short = "short ETHTOOL_GSTATS answer";
    let n = Stats::decode(buf).map_err(|_| short)?.n_stats.0 as usize;
    if n != count {
        return Err(format!("{n} values for {count} statistics"));
    }
    let values = buf
        .get(Stats::WIRE_LEN..Stats::WIRE_LEN + count * 8)
        .ok_or(short)?;
    Ok(values
        .chunks_exact(8)
        .filter_map(|b| b.try_into().ok().map(u64::from_ne_bytes))
        .collect())
}

/// The live statistics through the ethtool ioctl (read-only Gets).
pub struct Ioctl;

/// The three answers of one read, as the kernel wrote them (GSSET_INFO, GSTRINGS, GSTATS):
/// what the decoders take, and what a capture keeps.
pub fn raw_answers(netdev: &str) -> Result<[Vec<u8>; 3], String> {
    let socket = Socket::open()?;
    let mut info = [0u64; 3];
    info[0] = u64::from(ETHTOOL_GSSET_INFO);
    info[1] = 1 << STATS_SET;
    let info = as_bytes(socket.ethtool(netdev, &mut info)?).to_vec();
    let count = decode_count(&info)?;
    let mut names = vec![0u64; (12 + count * NAME_LEN).div_ceil(8)];
    names[0] = u64::from(ETHTOOL_GSTRINGS) | (u64::from(STATS_SET) << 32);
    names[1] = count as u64;
    let names = as_bytes(socket.ethtool(netdev, &mut names)?).to_vec();
    let mut values = vec![0u64; 1 + count];
    values[0] = u64::from(ETHTOOL_GSTATS) | ((count as u64) << 32);
    let values = as_bytes(socket.ethtool(netdev, &mut values)?).to_vec();
    Ok([info, names, values])
}

/// Statistics from the three answers of [`raw_answers`].
pub fn decode_answers([info, names, values]: &[Vec<u8>; 3]) -> Result<Vec<(String, u64)>, String> {
    let count = decode_count(info)?;
    let names = decode_names(names, count)?;
    let values = decode_values(values, count)?;
    Ok(names.into_iter().zip(values).collect())
}

impl NetdevStats for Ioctl {
    fn stats(&self, netdev: &str) -> Result<Vec<(String, u64)>, String> {
        decode_answers(&raw_answers(netdev)?)
    }
}

const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;

/// The buffers are u64 arrays for the values' alignment; little-endian hosts lay the
/// leading u32 fields out as written above (`cmd` in the low half of word 0).
fn as_bytes(words: &[u64]) -> &[u8] {
    // SAFETY: u64 has no padding and any byte pattern is a valid u8.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 8) }
}

struct Socket(libc::c_int);

impl Socket {
    fn open() -> Result<Socket, String> {
        // SAFETY: plain socket(2); the descriptor is closed on drop.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
        if fd < 0 {
            return Err(format!("socket: {}", std::io::Error::last_os_error()));
        }
        Ok(Socket(fd))
    }

    /// One ethtool Get on `netdev` with `buf` as its command buffer.
    fn ethtool<'b>(&self, netdev: &str, buf: &'b mut [u64]) -> Result<&'b [u64], String> {
        let name = netdev.as_bytes();
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.contains(&0) {
            return Err(format!("{netdev:?} is not an interface name"));
        }
        // struct ifreq: the name, then the union whose ifr_data points at the command.
        #[repr(C)]
        struct IfReq {
            name: [u8; libc::IFNAMSIZ],
            data: *mut libc::c_void,
            _pad: [u8; 16],
        }
        let mut req = IfReq {
            name: [0; libc::IFNAMSIZ],
            data: buf.as_mut_ptr().cast(),
            _pad: [0; 16],
        };
        req.name[..name.len()].copy_from_slice(name);
        // SAFETY: SIOCETHTOOL reads the command from `buf` and writes at most the length
        // the command states, which the callers sized `buf` for.
        let rc = unsafe { libc::ioctl(self.0, SIOCETHTOOL as _, &mut req) };
        if rc < 0 {
            return Err(format!(
                "ethtool {netdev}: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(buf)
    }
}

impl Drop for Socket {
    fn drop(&mut self) {
        // SAFETY: our own descriptor, closed once.
        unsafe { libc::close(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ETHTOOL_GSSET_INFO answer for 3 statistics, as the kernel fills it.
    fn count_answer(mask: u64, count: u32) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(ETHTOOL_GSSET_INFO.to_ne_bytes());
        b.extend(0u32.to_ne_bytes());
        b.extend(mask.to_ne_bytes());
        b.extend(count.to_ne_bytes());
        b
    }

    fn names_answer(names: &[&str]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(ETHTOOL_GSTRINGS.to_ne_bytes());
        b.extend(STATS_SET.to_ne_bytes());
        b.extend((names.len() as u32).to_ne_bytes());
        for n in names {
            let mut raw = [0u8; NAME_LEN];
            raw[..n.len()].copy_from_slice(n.as_bytes());
            b.extend(raw);
        }
        b
    }

    fn values_answer(values: &[u64]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(ETHTOOL_GSTATS.to_ne_bytes());
        b.extend((values.len() as u32).to_ne_bytes());
        for v in values {
            b.extend(v.to_ne_bytes());
        }
        b
    }

    /// A virtio_net interface's answers, captured (tests/data/netdev/README.md).
    #[test]
    fn captured_answers_decode() {
        let captured = |f: &str| {
            std::fs::read(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../tests/data/netdev/virtio-eth0")
                    .join(f),
            )
            .unwrap()
        };
        let answers = [
            captured("ethtool-gsset-info.bin"),
            captured("ethtool-gstrings.bin"),
            captured("ethtool-gstats.bin"),
        ];
        // Each header read and written again is the bytes the kernel wrote.
        let mut again = [0u8; 20];
        SsetInfo::decode(&answers[0])
            .unwrap()
            .encode_into(&mut again)
            .unwrap();
        assert_eq!(again[..20], answers[0][..20]);
        GStrings::decode(&answers[1])
            .unwrap()
            .encode_into(&mut again)
            .unwrap();
        assert_eq!(again[..12], answers[1][..12]);
        Stats::decode(&answers[2])
            .unwrap()
            .encode_into(&mut again)
            .unwrap();
        assert_eq!(again[..8], answers[2][..8]);
        let stats = decode_answers(&answers).unwrap();
        assert_eq!(stats.len(), 20);
        assert_eq!(stats[0].0, "rx_drops");
        assert!(stats.iter().all(|(n, _)| !n.is_empty() && n.is_ascii()));
        assert!(
            !stats.iter().any(|(n, _)| is_lossless_stat(n)),
            "virtio has no pause"
        );
        // Each answer cut anywhere: an error, never a panic.
        for i in 0..3 {
            for cut in 0..answers[i].len() {
                let mut short = answers.clone();
                short[i].truncate(cut);
                let _ = decode_answers(&short);
            }
        }
    }

    #[test]
    fn the_three_answers_decode() {
        assert_eq!(decode_count(&count_answer(1 << STATS_SET, 3)), Ok(3));
        let names = [
            "rx_prio3_pause",
            "tx_prio3_pause_duration",
            "rx_discards_phy",
        ];
        assert_eq!(decode_names(&names_answer(&names), 3).unwrap(), names);
        assert_eq!(
            decode_values(&values_answer(&[7, 2_900_000, u64::MAX]), 3).unwrap(),
            [7, 2_900_000, u64::MAX]
        );
    }

    #[test]
    fn bad_answers_are_errors_never_panics() {
        assert!(decode_count(&count_answer(0, 3)).is_err(), "no stats set");
        assert!(decode_count(&count_answer(2, u32::MAX)).is_err());
        let names = names_answer(&["a", "b"]);
        assert!(decode_names(&names, 3).is_err());
        let values = values_answer(&[1, 2]);
        assert!(decode_values(&values, 3).is_err());
        for cut in 0..names.len() {
            let _ = decode_names(&names[..cut], 2);
        }
        for cut in 0..values.len() {
            let _ = decode_values(&values[..cut], 2);
        }
        for cut in 0..20 {
            let _ = decode_count(&count_answer(2, 3)[..cut]);
        }
    }

    #[test]
    fn ethtool_text_reads_and_the_lossless_ones_are_kept() {
        let text = "NIC statistics:\n     rx_packets: 12\n     rx_prio3_pause: 5\n     \
                    tx_prio3_pause_duration: 1900000\n     rx_out_of_buffer: 0\n";
        let stats = parse_text(text).unwrap();
        assert_eq!(stats.len(), 4);
        let kept: Vec<&str> = stats
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| is_lossless_stat(n))
            .collect();
        assert_eq!(
            kept,
            [
                "rx_prio3_pause",
                "tx_prio3_pause_duration",
                "rx_out_of_buffer"
            ]
        );
        assert!(parse_text("     rx: lots\n").is_err());
        assert!(parse_text("garbage line\n").is_err());
    }

    /// On a machine with a virtio or physical NIC, the live path reads what `ethtool -S`
    /// shows: names and values, as many of each.
    #[test]
    fn a_live_interface_reads_when_there_is_one() {
        for netdev in ["eth0", "ens3", "enp0s3"] {
            if let Ok(stats) = Ioctl.stats(netdev) {
                assert!(!stats.is_empty(), "{netdev}");
                assert!(stats
                    .iter()
                    .all(|(n, _)| !n.is_empty() && !n.contains('\0')));
                return;
            }
        }
    }

    #[test]
    fn no_such_interface_is_an_error() {
        assert!(Ioctl.stats("ibscope-none0").is_err());
        assert!(Ioctl.stats("a/b/c/d/e/f/g/h/i/j").is_err());
    }
}
