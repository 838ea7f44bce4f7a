//! Parsers for the text the kernel writes in sysfs and procfs. Each takes whatever a file
//! held (possibly truncated, empty or from another kernel version) and returns `None`
//! rather than guess; none panics.
//!
//! Formats, as the kernel's `drivers/infiniband/core/sysfs.c` and `drivers/pci/pci-sysfs.c`
//! write them:
//! - `node_guid`, `sys_image_guid`: `0c42:a103:00a5:8f2e` (four groups of four hex digits);
//! - `ports/N/state`: `4: ACTIVE`; `ports/N/phys_state`: `5: LinkUp` (code, then a name);
//! - `ports/N/rate`: `400 Gb/sec (4X NDR)`, `2.5 Gb/sec (1X SDR)`; kernels before 4.x wrote
//!   SDR as no name at all: `10 Gb/sec (4X)`;
//! - `ports/N/lid`, `sm_lid`: `0x1a`;
//! - `ports/N/gids/I`: `fe80:0000:0000:0000:0c42:a103:00a5:8f2e` (eight groups);
//! - `ports/N/gid_attrs/types/I`: `IB/RoCE v1` or `RoCE v2`;
//! - PCI `current_link_speed`: `16.0 GT/s PCIe` (`8 GT/s` before 4.17/5.x, `Unknown` when
//!   the link is down); `current_link_width`: `16`; `numa_node`: `-1` for none; `vendor`:
//!   `0x10de`; `class`: `0x030200`;
//! - `/proc/modules`: `nvidia_peermem 16384 0 - Live 0xffffffffc0e7e000 (POE)`.

use ibscope_mad::attr::link::{Speed, Width};
use ibscope_mad::attr::{PhysState, PortState};

use crate::model::{GidType, LinkLayer};

/// The first line of a sysfs file, without its newline and surrounding blanks.
pub fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("").trim()
}

/// A GUID in sysfs form, `0c42:a103:00a5:8f2e`.
pub fn sysfs_guid(text: &str) -> Option<u64> {
    let groups: Vec<&str> = first_line(text).split(':').collect();
    if groups.len() != 4 {
        return None;
    }
    groups.iter().try_fold(0u64, |acc, g| {
        let v = hex_group(g)?;
        Some(acc << 16 | u64::from(v))
    })
}

/// Exactly four hex digits.
fn hex_group(text: &str) -> Option<u16> {
    if text.len() != 4 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u16::from_str_radix(text, 16).ok()
}

/// A GID as the kernel prints it (`%pI6`: eight groups of four hex digits).
pub fn gid(text: &str) -> Option<[u8; 16]> {
    let groups: Vec<&str> = first_line(text).split(':').collect();
    if groups.len() != 8 {
        return None;
    }
    let mut raw = [0u8; 16];
    for (i, g) in groups.iter().enumerate() {
        let v = hex_group(g)?;
        raw[2 * i..2 * i + 2].copy_from_slice(&v.to_be_bytes());
    }
    Some(raw)
}

/// The leading code of `4: ACTIVE` / `5: LinkUp`.
fn leading_code(text: &str) -> Option<u8> {
    let (code, _) = first_line(text).split_once(':')?;
    code.trim().parse().ok()
}

/// `ports/N/state`: `4: ACTIVE`. A line without a code is read by its name.
pub fn port_state(text: &str) -> Option<PortState> {
    if let Some(code) = leading_code(text) {
        return Some(PortState::from_code(code));
    }
    match first_line(text).to_ascii_uppercase().as_str() {
        "DOWN" => Some(PortState::Down),
        "INIT" => Some(PortState::Init),
        "ARMED" => Some(PortState::Armed),
        "ACTIVE" => Some(PortState::Active),
        "ACTIVE_DEFER" => Some(PortState::ActiveDefer),
        _ => None,
    }
}

/// `ports/N/phys_state`: `5: LinkUp`. The kernel writes `Phy Test` with a blank and
/// `<unknown>` for codes it has no name for: the code is what counts.
pub fn phys_state(text: &str) -> Option<PhysState> {
    if let Some(code) = leading_code(text) {
        return Some(PhysState::from_code(code));
    }
    PhysState::parse(first_line(text))
}

/// `ports/N/rate`: `400 Gb/sec (4X NDR)` → (4x, NDR). `(4X)` is SDR (older kernels).
pub fn port_rate(text: &str) -> Option<(Width, Speed)> {
    let line = first_line(text);
    let inner = line.split_once('(')?.1.strip_suffix(')')?.trim();
    let (lanes, speed) = match inner.split_once(' ') {
        Some((lanes, speed)) => (lanes, Speed::parse(speed)?),
        None => (inner, Speed::Sdr),
    };
    let lanes = lanes.strip_suffix(['X', 'x'])?;
    let width = Width::parse(lanes).filter(|w| w.is_known())?;
    Some((width, speed))
}

/// `ports/N/lid`, `sm_lid`: `0x1a` (decimal accepted too).
pub fn lid(text: &str) -> Option<u16> {
    let t = first_line(text);
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u16::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

/// `ports/N/link_layer`: `InfiniBand`, `Ethernet`, anything else is `Unknown`.
pub fn link_layer(text: &str) -> LinkLayer {
    match first_line(text) {
        "InfiniBand" => LinkLayer::InfiniBand,
        "Ethernet" => LinkLayer::Ethernet,
        _ => LinkLayer::Unknown,
    }
}

/// `gid_attrs/types/I`: `IB/RoCE v1` means InfiniBand on an InfiniBand port and RoCE v1 on
/// an Ethernet one (the kernel names both by one string).
pub fn gid_type(text: &str, layer: LinkLayer) -> Option<GidType> {
    match first_line(text) {
        "IB/RoCE v1" if layer == LinkLayer::Ethernet => Some(GidType::RoceV1),
        "IB/RoCE v1" => Some(GidType::Ib),
        "RoCE v2" => Some(GidType::RoceV2),
        _ => None,
    }
}

/// PCI `current_link_speed` / `max_link_speed`: the transfer rate in GT/s, `16.0 GT/s PCIe`
/// or `8 GT/s`. `None` for `Unknown` (link down) or anything else.
pub fn pcie_speed(text: &str) -> Option<f64> {
    let number = first_line(text)
        .strip_suffix("PCIe")
        .unwrap_or(first_line(text));
    let number = number.trim().strip_suffix("GT/s")?.trim();
    let gts: f64 = number.parse().ok()?;
    (gts.is_finite() && gts > 0.0).then_some(gts)
}

/// PCI `current_link_width` / `max_link_width`: lanes, 1..=32; 0 (link down) is `None`.
pub fn pcie_width(text: &str) -> Option<u8> {
    first_line(text)
        .parse()
        .ok()
        .filter(|w| (1..=32).contains(w))
}

/// PCI `numa_node`: `-1` (no affinity) is `None`.
pub fn numa_node(text: &str) -> Option<u32> {
    first_line(text).parse().ok()
}

/// A `0x`-hex number (`vendor`, `device`, `class`).
pub fn hex_u32(text: &str) -> Option<u32> {
    let t = first_line(text);
    let hex = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X"))?;
    u32::from_str_radix(hex, 16).ok()
}

/// Names of the modules `/proc/modules` lists as loaded (state `Live`; `Loading` and
/// `Unloading` modules are not usable).
pub fn loaded_modules(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                [name, _, _, _, state, ..] if *state == "Live" => Some(name.to_string()),
                _ => None,
            }
        })
        .collect()
}

/// A version string from `/sys/module/M/version` or `fw_ver`: the first line, `None` if
/// empty or not printable.
pub fn version(text: &str) -> Option<String> {
    let t = first_line(text);
    (!t.is_empty() && t.chars().all(|c| c.is_ascii_graphic() || c == ' ')).then(|| t.to_string())
}

/// A PCI address, `0000:17:00.0`: domain, bus, device, function.
pub fn is_pci_address(text: &str) -> bool {
    let b = text.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && [0, 1, 2, 3, 5, 6, 8, 9, 11]
            .iter()
            .all(|&i| b[i].is_ascii_hexdigit())
}

/// rdma-core's release from a libibverbs file name: `libibverbs.so.1.14.50.0` is the
/// provider ABI 1.14 of rdma-core 50.0.
pub fn rdma_core_release(file: &str) -> Option<String> {
    let rest = file.strip_prefix("libibverbs.so.")?;
    let parts: Vec<&str> = rest.split('.').collect();
    if parts.len() != 4
        || !parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    Some(format!("{}.{}", parts[2], parts[3]))
}

/// The version in `/proc/driver/nvidia/version`'s first line (`NVRM version: NVIDIA UNIX
/// x86_64 Kernel Module  550.54.15  Tue Mar  5 ...`): the word after `Kernel Module`.
pub fn nvidia_proc_version(text: &str) -> Option<String> {
    let line = text.lines().next()?;
    let after = line.split("Kernel Module").nth(1)?;
    let v = after.split_whitespace().next()?;
    v.bytes()
        .all(|b| b.is_ascii_digit() || b == b'.')
        .then(|| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guids() {
        assert_eq!(
            sysfs_guid("0c42:a103:00a5:8f2e\n"),
            Some(0x0c42_a103_00a5_8f2e)
        );
        assert_eq!(sysfs_guid("0c42:a103:00a5"), None);
        assert_eq!(sysfs_guid("0c42:a103:00a5:8f2e:0000"), None);
        assert_eq!(sysfs_guid("0c42:a103:00a5:8f2g"), None);
        assert_eq!(sysfs_guid("c42:a103:00a5:8f2e"), None);
        assert_eq!(sysfs_guid(""), None);
        assert_eq!(sysfs_guid("+c42:a103:00a5:8f2e"), None);
    }

    #[test]
    fn gids() {
        let g = gid("fe80:0000:0000:0000:0c42:a103:00a5:8f2e\n").unwrap();
        assert_eq!(g[0..2], [0xfe, 0x80]);
        assert_eq!(g[8..16], 0x0c42_a103_00a5_8f2e_u64.to_be_bytes());
        let v4 = gid("0000:0000:0000:0000:0000:ffff:c0a8:0a15").unwrap();
        assert_eq!(v4[12..], [192, 168, 10, 21]);
        assert_eq!(gid("fe80::1"), None);
        assert_eq!(gid("fe80:0000:0000:0000:0c42:a103:00a5"), None);
        assert_eq!(gid("zz80:0000:0000:0000:0c42:a103:00a5:8f2e"), None);
    }

    #[test]
    fn states() {
        assert_eq!(port_state("4: ACTIVE\n"), Some(PortState::Active));
        assert_eq!(port_state("1: DOWN"), Some(PortState::Down));
        assert_eq!(port_state("2: INIT"), Some(PortState::Init));
        assert_eq!(port_state("5: ACTIVE_DEFER"), Some(PortState::ActiveDefer));
        assert_eq!(port_state("9: UNKNOWN"), Some(PortState::Unknown(9)));
        assert_eq!(port_state("ARMED"), Some(PortState::Armed));
        assert_eq!(port_state("x: ACTIVE"), None);
        assert_eq!(port_state(""), None);
        assert_eq!(port_state("999: ACTIVE"), None);
        assert_eq!(phys_state("5: LinkUp\n"), Some(PhysState::LinkUp));
        assert_eq!(phys_state("2: Polling"), Some(PhysState::Polling));
        assert_eq!(phys_state("3: Disabled"), Some(PhysState::Disabled));
        assert_eq!(phys_state("7: Phy Test"), Some(PhysState::PhyTest));
        assert_eq!(phys_state("0: <unknown>"), Some(PhysState::NoChange));
        assert_eq!(phys_state("LinkUp"), Some(PhysState::LinkUp));
        assert_eq!(phys_state("junk"), None);
    }

    #[test]
    fn rates() {
        assert_eq!(
            port_rate("400 Gb/sec (4X NDR)\n"),
            Some((Width::X4, Speed::Ndr))
        );
        assert_eq!(
            port_rate("200 Gb/sec (4X HDR)"),
            Some((Width::X4, Speed::Hdr))
        );
        assert_eq!(
            port_rate("100 Gb/sec (2X HDR)"),
            Some((Width::X2, Speed::Hdr))
        );
        assert_eq!(
            port_rate("2.5 Gb/sec (1X SDR)"),
            Some((Width::X1, Speed::Sdr))
        );
        assert_eq!(port_rate("10 Gb/sec (4X)"), Some((Width::X4, Speed::Sdr)));
        assert_eq!(
            port_rate("40 Gb/sec (4X FDR10)"),
            Some((Width::X4, Speed::Fdr10))
        );
        assert_eq!(
            port_rate("56 Gb/sec (4X FDR)"),
            Some((Width::X4, Speed::Fdr))
        );
        assert_eq!(
            port_rate("300 Gb/sec (12X EDR)"),
            Some((Width::X12, Speed::Edr))
        );
        assert_eq!(
            port_rate("800 Gb/sec (4X XDR)"),
            Some((Width::X4, Speed::Xdr))
        );
        assert_eq!(port_rate("120 Gb/sec (3X QDR)"), None);
        assert_eq!(port_rate("100 Gb/sec (4X ZDR)"), None);
        assert_eq!(port_rate("100 Gb/sec"), None);
        assert_eq!(port_rate("(4X EDR"), None);
        assert_eq!(port_rate(""), None);
    }

    #[test]
    fn lids() {
        assert_eq!(lid("0x1a\n"), Some(26));
        assert_eq!(lid("0x0"), Some(0));
        assert_eq!(lid("0xbfff"), Some(0xbfff));
        assert_eq!(lid("17"), Some(17));
        assert_eq!(lid("0x10000"), None);
        assert_eq!(lid("0x"), None);
        assert_eq!(lid(""), None);
    }

    #[test]
    fn layers_and_gid_types() {
        assert_eq!(link_layer("InfiniBand\n"), LinkLayer::InfiniBand);
        assert_eq!(link_layer("Ethernet"), LinkLayer::Ethernet);
        assert_eq!(link_layer("Unknown"), LinkLayer::Unknown);
        assert_eq!(link_layer(""), LinkLayer::Unknown);
        assert_eq!(
            gid_type("IB/RoCE v1\n", LinkLayer::InfiniBand),
            Some(GidType::Ib)
        );
        assert_eq!(
            gid_type("IB/RoCE v1", LinkLayer::Ethernet),
            Some(GidType::RoceV1)
        );
        assert_eq!(
            gid_type("RoCE v2", LinkLayer::Ethernet),
            Some(GidType::RoceV2)
        );
        assert_eq!(gid_type("RoCE v3", LinkLayer::Ethernet), None);
    }

    #[test]
    fn pcie() {
        assert_eq!(pcie_speed("16.0 GT/s PCIe\n"), Some(16.0));
        assert_eq!(pcie_speed("32.0 GT/s PCIe"), Some(32.0));
        assert_eq!(pcie_speed("2.5 GT/s PCIe"), Some(2.5));
        assert_eq!(pcie_speed("8 GT/s"), Some(8.0));
        assert_eq!(pcie_speed("5 GT/s"), Some(5.0));
        assert_eq!(pcie_speed("Unknown"), None);
        assert_eq!(pcie_speed("Unknown speed"), None);
        assert_eq!(pcie_speed("-8 GT/s"), None);
        assert_eq!(pcie_speed("NaN GT/s"), None);
        assert_eq!(pcie_speed(""), None);
        assert_eq!(pcie_width("16\n"), Some(16));
        assert_eq!(pcie_width("8"), Some(8));
        assert_eq!(pcie_width("0"), None);
        assert_eq!(pcie_width("x16"), None);
        assert_eq!(pcie_width("255"), None);
        assert_eq!(numa_node("1\n"), Some(1));
        assert_eq!(numa_node("-1"), None);
        assert_eq!(numa_node(""), None);
        assert_eq!(hex_u32("0x10de\n"), Some(0x10de));
        assert_eq!(hex_u32("0x030200"), Some(0x030200));
        assert_eq!(hex_u32("10de"), None);
        assert!(is_pci_address("0000:17:00.0"));
        assert!(is_pci_address("0000:c1:1f.7"));
        assert!(!is_pci_address("pci0000:16"));
        assert!(!is_pci_address("0000:17:00"));
        assert!(!is_pci_address("0000-17:00.0"));
    }

    #[test]
    fn modules_and_versions() {
        let text = "nvidia_peermem 16384 0 - Live 0xffffffffc0e7e000 (POE)\n\
                    mlx5_ib 491520 0 - Live 0xffffffffc0d63000\n\
                    nv_peer_mem 16384 0 - Unloading 0x0\n\
                    broken line\n";
        assert_eq!(loaded_modules(text), ["nvidia_peermem", "mlx5_ib"]);
        assert!(loaded_modules("").is_empty());
        assert_eq!(version("24.10-1.1.4\n"), Some("24.10-1.1.4".into()));
        assert_eq!(version("\n"), None);
        assert_eq!(version("a\u{1b}[31m"), None);
        assert_eq!(first_line("  x \ny"), "x");
    }

    #[test]
    fn stack_versions() {
        assert_eq!(
            rdma_core_release("libibverbs.so.1.14.50.0").as_deref(),
            Some("50.0")
        );
        assert_eq!(rdma_core_release("libibverbs.so.1"), None);
        assert_eq!(rdma_core_release("libibverbs.so.1.14.x.0"), None);
        assert_eq!(rdma_core_release("libmlx5.so.1.24.50.0"), None);
        let proc = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 \
                    22:23:56 UTC 2024\nGCC version:  gcc version 12.3.0\n";
        assert_eq!(nvidia_proc_version(proc).as_deref(), Some("550.54.15"));
        assert_eq!(nvidia_proc_version("NVRM version: garbage"), None);
        assert_eq!(nvidia_proc_version(""), None);
    }
}
