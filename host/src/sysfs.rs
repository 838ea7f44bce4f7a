//! Reading the host's facts from sysfs and procfs under a root directory: `/` on a real
//! host, a fixture tree in tests (`IBSCOPE_SYSFS_ROOT`). Nothing here fails: a file that is
//! missing, unreadable (the kernel answers EINVAL for an empty GID entry's attributes) or
//! odd leaves its fact unknown.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::model::GidType;
use crate::model::{
    Device, DeviceFile, DeviceFiles, DevicePort, Driver, Gid, Gpu, LinkLayer, Pci, PeerMemory,
    UmadFile,
};
use crate::parse;
use crate::pci::PcieLink;
use crate::roce::{DcbSource, Netlink, RoceConfig, SavedDcb};

/// The GPUDirect RDMA modules, newest first.
pub const PEER_MEMORY_MODULES: [&str; 2] = ["nvidia_peermem", "nv_peer_mem"];

/// NVIDIA's PCI vendor ID.
pub const NVIDIA_VENDOR: u32 = 0x10de;

/// sysfs and procfs under one root.
#[derive(Debug, Clone)]
pub struct Sysfs {
    root: PathBuf,
}

impl Sysfs {
    pub fn new(root: impl Into<PathBuf>) -> Sysfs {
        let root = root.into();
        // Symlinks resolve to absolute paths: compare them with the root's own.
        let root = std::fs::canonicalize(&root).unwrap_or(root);
        Sysfs { root }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// A small text file (sysfs attributes are at most a page; /proc/modules a few KiB).
    pub(crate) fn read(path: &Path) -> Option<String> {
        let mut text = String::new();
        std::fs::File::open(path)
            .ok()?
            .take(256 * 1024)
            .read_to_string(&mut text)
            .ok()?;
        Some(text)
    }

    /// The names in a directory, in natural order (`mlx5_2` before `mlx5_10`).
    pub(crate) fn list(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        names.sort_by_key(|n| natural_key(n));
        names
    }

    /// Where a symlink points, by its last component (`driver` -> `mlx5_core`).
    fn link_name(path: &Path) -> Option<String> {
        let target = std::fs::read_link(path).ok()?;
        Some(target.file_name()?.to_str()?.to_string())
    }

    pub fn hostname(&self) -> Option<String> {
        Self::read(&self.path("proc/sys/kernel/hostname")).and_then(|t| parse::version(&t))
    }

    pub fn kernel(&self) -> Option<String> {
        Self::read(&self.path("proc/sys/kernel/osrelease")).and_then(|t| parse::version(&t))
    }

    /// The RDMA devices the kernel shows (`/sys/class/infiniband`).
    pub fn device_names(&self) -> Vec<String> {
        Self::list(&self.path("sys/class/infiniband"))
    }

    /// One device, everything sysfs tells of it.
    pub fn device(&self, name: &str) -> Device {
        let dir = self.path("sys/class/infiniband").join(name);
        let text = |file: &str| Self::read(&dir.join(file));
        let mut device = Device::named(name);
        device.node_guid = text("node_guid").and_then(|t| parse::sysfs_guid(&t));
        device.sys_image_guid = text("sys_image_guid").and_then(|t| parse::sysfs_guid(&t));
        device.fw_ver = text("fw_ver").and_then(|t| parse::version(&t));
        device.hca_type = text("hca_type").and_then(|t| parse::version(&t));
        device.board_id = text("board_id").and_then(|t| parse::version(&t));
        device.ports = Self::list(&dir.join("ports"))
            .iter()
            .filter_map(|n| n.parse::<u8>().ok())
            .map(|n| Self::port(&dir.join("ports").join(n.to_string()), n))
            .collect();
        if let Some(pci_dir) = self.pci_dir(&dir.join("device")) {
            device.driver = self.driver(&pci_dir);
            device.pci = Some(self.pci(&pci_dir));
        }
        device.files = self.device_files(name);
        device.roce = device
            .ports
            .iter()
            .filter(|p| p.link_layer == LinkLayer::Ethernet)
            .map(|p| self.roce(name, p))
            .collect();
        device
    }

    /// Where DCB settings come from: rtnetlink on the real root, saved `dcb` output in
    /// `ROOT/dcb/` under a fixture root.
    pub fn dcb_source(&self) -> Box<dyn DcbSource> {
        if self.root() == Path::new("/") {
            Box::new(Netlink)
        } else {
            Box::new(SavedDcb {
                dir: self.root().join("dcb"),
            })
        }
    }

    /// A RoCE port's lossless configuration.
    fn roce(&self, device: &str, port: &DevicePort) -> RoceConfig {
        let netdev = port
            .gids
            .iter()
            .find_map(|g| g.netdev.clone())
            .filter(|n| !n.contains('/'));
        let mut config = RoceConfig {
            port: port.port,
            rocev2_gids: port
                .gids
                .iter()
                .filter(|g| g.gid_type == Some(GidType::RoceV2))
                .count(),
            default_roce_tos: Self::read(
                &self
                    .path("sys/kernel/config/rdma_cm")
                    .join(device)
                    .join(format!("ports/{}/default_roce_tos", port.port)),
            )
            .and_then(|t| t.trim().parse().ok()),
            ..RoceConfig::default()
        };
        let Some(ifname) = &netdev else {
            config.unread.insert(
                "netdev".into(),
                format!("no GID of port {} names a netdev", port.port),
            );
            return config;
        };
        let net = self.path("sys/class/net").join(ifname);
        let mtu = net.join("mtu");
        config.netdev_mtu = Self::read(&mtu).and_then(|t| t.trim().parse().ok());
        if config.netdev_mtu.is_none() {
            let why = format!("{} could not be read", mtu.display());
            config.unread.insert("netdev_mtu".into(), why);
        }
        for (point, key) in [("roce_np", "ecn_np"), ("roce_rp", "ecn_rp")] {
            let dir = net.join("ecn").join(point).join("enable");
            let list: Vec<u8> = (0..8u8)
                .filter_map(|p| Some((p, Self::read(&dir.join(p.to_string()))?)))
                .filter(|(_, t)| t.trim() == "1")
                .map(|(p, _)| p)
                .collect();
            let enabled = dir.is_dir().then_some(list);
            if enabled.is_none() {
                let why = format!(
                    "no {} (the driver keeps no RoCE ECN settings there)",
                    dir.display()
                );
                config.unread.insert(key.into(), why);
            }
            match key {
                "ecn_np" => config.ecn_np = enabled,
                _ => config.ecn_rp = enabled,
            }
        }
        match self.dcb_source().dcb(ifname) {
            Ok(dcb) => {
                config.pfc = Some(dcb.pfc);
                config.dscp_to_priority = Some(dcb.dscp_to_priority);
            }
            Err(e) => {
                for key in ["pfc", "dscp_to_priority"] {
                    config.unread.insert(key.into(), e.clone());
                }
                config.dcb_error = Some(e);
            }
        }
        config.netdev = netdev;
        config
    }

    /// The uverbs and umad character devices of device `name` (`/sys/class/infiniband_verbs`
    /// and `infiniband_mad` entries whose `ibdev` names it) and their nodes in `/dev`.
    fn device_files(&self, name: &str) -> DeviceFiles {
        let of = |class: &str| -> Vec<(String, PathBuf)> {
            let dir = self.path("sys/class").join(class);
            Self::list(&dir)
                .into_iter()
                .map(|n| (n.clone(), dir.join(n)))
                .filter(|(_, d)| Self::read(&d.join("ibdev")).is_some_and(|t| t.trim() == name))
                .collect()
        };
        let file = |n: String| DeviceFile {
            present: self
                .path("dev/infiniband")
                .join(&n)
                .symlink_metadata()
                .is_ok(),
            name: n,
        };
        DeviceFiles {
            uverbs: of("infiniband_verbs")
                .into_iter()
                .next()
                .map(|(n, _)| file(n)),
            umad: of("infiniband_mad")
                .into_iter()
                .filter_map(|(n, d)| {
                    let port = Self::read(&d.join("port"))?.trim().parse().ok()?;
                    Some(UmadFile {
                        port,
                        file: file(n),
                    })
                })
                .collect(),
        }
    }

    fn port(dir: &Path, number: u8) -> DevicePort {
        let text = |file: &str| Self::read(&dir.join(file));
        let layer = text("link_layer").map_or(LinkLayer::Unknown, |t| parse::link_layer(&t));
        let mut port = DevicePort {
            port: number,
            link_layer: layer,
            state: text("state").and_then(|t| parse::port_state(&t)),
            phys_state: text("phys_state").and_then(|t| parse::phys_state(&t)),
            width: None,
            speed: None,
            lid: None,
            sm_lid: None,
            gids: Self::gids(dir, layer),
        };
        if port.link_up() {
            if let Some((w, s)) = text("rate").and_then(|t| parse::port_rate(&t)) {
                port.width = Some(w);
                port.speed = Some(s);
            }
        }
        if layer != LinkLayer::Ethernet {
            port.lid = text("lid").and_then(|t| parse::lid(&t));
            port.sm_lid = text("sm_lid").and_then(|t| parse::lid(&t));
        }
        port
    }

    /// The used (non-zero) GID entries with their types and network interfaces.
    fn gids(port_dir: &Path, layer: LinkLayer) -> Vec<Gid> {
        let attrs = port_dir.join("gid_attrs");
        Self::list(&port_dir.join("gids"))
            .iter()
            .filter_map(|name| {
                let index: u32 = name.parse().ok()?;
                let gid = parse::gid(&Self::read(&port_dir.join("gids").join(name))?)?;
                if gid == [0; 16] {
                    return None;
                }
                Some(Gid {
                    gid_type: Self::read(&attrs.join("types").join(name))
                        .and_then(|t| parse::gid_type(&t, layer)),
                    netdev: Self::read(&attrs.join("ndevs").join(name))
                        .and_then(|t| parse::version(&t)),
                    ..Gid::new(index, gid, layer)
                })
            })
            .collect()
    }

    /// The PCI device directory a `device` link leads to, if it is one (soft devices such
    /// as rxe have none).
    fn pci_dir(&self, link: &Path) -> Option<PathBuf> {
        let dir = std::fs::canonicalize(link).ok()?;
        let name = dir.file_name()?.to_str()?;
        parse::is_pci_address(name).then_some(dir)
    }

    /// The path below /sys/devices: host bridge, bridges, the device.
    fn pci_path(&self, dir: &Path) -> Vec<String> {
        dir.strip_prefix(self.path("sys/devices"))
            .map(|rel| {
                rel.components()
                    .filter_map(|c| c.as_os_str().to_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn link(dir: &Path, prefix: &str) -> Option<PcieLink> {
        let gts = Self::read(&dir.join(format!("{prefix}_link_speed")))
            .and_then(|t| parse::pcie_speed(&t))?;
        let width = Self::read(&dir.join(format!("{prefix}_link_width")))
            .and_then(|t| parse::pcie_width(&t))?;
        Some(PcieLink::new(gts, width))
    }

    fn pci(&self, dir: &Path) -> Pci {
        // The bridge above a device is its slot; a host bridge (`pci0000:15`) has no link.
        let slot = dir.parent().filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(parse::is_pci_address)
        });
        Pci {
            address: dir
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_string(),
            numa_node: Self::read(&dir.join("numa_node")).and_then(|t| parse::numa_node(&t)),
            link: Self::link(dir, "current"),
            device_max: Self::link(dir, "max"),
            slot_max: slot.and_then(|s| Self::link(s, "max")),
            path: self.pci_path(dir),
        }
    }

    /// rdma-core's release from its libibverbs' file name in the usual library directories.
    pub fn rdma_core_version(&self) -> Option<String> {
        const DIRS: [&str; 5] = [
            "usr/lib/x86_64-linux-gnu",
            "usr/lib/aarch64-linux-gnu",
            "usr/lib64",
            "usr/lib",
            "lib/x86_64-linux-gnu",
        ];
        DIRS.iter().find_map(|dir| {
            Self::list(&self.path(dir))
                .iter()
                .find_map(|name| parse::rdma_core_release(name))
        })
    }

    /// The NVIDIA kernel driver's version.
    pub fn nvidia_driver_version(&self) -> Option<String> {
        self.module_version("nvidia").or_else(|| {
            Self::read(&self.path("proc/driver/nvidia/version"))
                .and_then(|t| parse::nvidia_proc_version(&t))
        })
    }

    /// The ACS settings of PCI function `address`, from its configuration space (root
    /// reads 4 KiB, others the first 64 or 256 bytes: then unreadable).
    pub fn acs(&self, address: &str) -> crate::pci::Acs {
        let path = self
            .path("sys/bus/pci/devices")
            .join(address)
            .join("config");
        let mut bytes = Vec::new();
        let read = std::fs::File::open(path).and_then(|f| f.take(4096).read_to_end(&mut bytes));
        match read {
            Ok(_) => crate::pci::Acs::from_config(&bytes),
            Err(_) => crate::pci::Acs::Unreadable,
        }
    }

    fn driver(&self, pci_dir: &Path) -> Option<Driver> {
        let driver = pci_dir.join("driver");
        let module =
            Self::link_name(&driver.join("module")).or_else(|| Self::link_name(&driver))?;
        Some(Driver {
            version: self.module_version(&module),
            module,
        })
    }

    /// `/sys/module/<name>/version`: set by out-of-tree modules.
    pub fn module_version(&self, module: &str) -> Option<String> {
        Self::read(&self.path("sys/module").join(module).join("version"))
            .and_then(|t| parse::version(&t))
    }

    /// NVIDIA GPUs in PCI address order.
    pub fn gpus(&self) -> Vec<Gpu> {
        let bus = self.path("sys/bus/pci/devices");
        let mut gpus: Vec<Gpu> = Self::list(&bus)
            .iter()
            .filter_map(|name| {
                let dir = self.pci_dir(&bus.join(name))?;
                let hex = |file: &str| Self::read(&dir.join(file)).and_then(|t| parse::hex_u32(&t));
                let is_gpu = hex("vendor") == Some(NVIDIA_VENDOR)
                    && hex("class").is_some_and(|c| c >> 16 == 0x03);
                is_gpu.then(|| Gpu {
                    index: 0,
                    address: name.clone(),
                    device_id: hex("device"),
                    numa_node: Self::read(&dir.join("numa_node"))
                        .and_then(|t| parse::numa_node(&t)),
                    link: Self::link(&dir, "current"),
                    path: self.pci_path(&dir),
                })
            })
            .collect();
        gpus.sort_by(|a, b| a.address.cmp(&b.address));
        for (i, g) in gpus.iter_mut().enumerate() {
            g.index = i;
        }
        gpus
    }

    /// The modules loaded: from /proc/modules, else the `/sys/module/*/initstate` files of
    /// the modules asked about. `None` if neither can be read.
    fn loaded(&self, candidates: &[&str]) -> Option<Vec<String>> {
        if let Some(text) = Self::read(&self.path("proc/modules")) {
            return Some(parse::loaded_modules(&text));
        }
        let sys_module = self.path("sys/module");
        if !sys_module.is_dir() {
            return None;
        }
        Some(
            candidates
                .iter()
                .filter(|m| {
                    Self::read(&sys_module.join(m).join("initstate"))
                        .is_some_and(|t| parse::first_line(&t) == "live")
                })
                .map(|m| m.to_string())
                .collect(),
        )
    }

    /// Whether a GPUDirect RDMA module is loaded, and which.
    pub fn peer_memory(&self) -> PeerMemory {
        let Some(loaded) = self.loaded(&PEER_MEMORY_MODULES) else {
            return PeerMemory::Unknown;
        };
        match PEER_MEMORY_MODULES
            .iter()
            .find(|m| loaded.iter().any(|l| l == *m))
        {
            Some(m) => PeerMemory::Loaded {
                module: m.to_string(),
                version: self.module_version(m),
            },
            None => PeerMemory::Missing,
        }
    }
}

/// Sort key putting `mlx5_2` before `mlx5_10`: the name with its trailing number apart.
pub fn natural_key(name: &str) -> (String, u64, String) {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (stem, number) = name.split_at(name.len() - digits);
    (
        stem.to_string(),
        number.parse().unwrap_or(0),
        name.to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order() {
        let mut names = vec!["mlx5_10", "mlx5_2", "irdma0", "mlx5_1", "mlx5_"];
        names.sort_by_key(|n| natural_key(n));
        assert_eq!(names, ["irdma0", "mlx5_", "mlx5_1", "mlx5_2", "mlx5_10"]);
    }

    #[test]
    fn an_empty_root_has_nothing_and_does_not_fail() {
        let dir = tempfile::tempdir().unwrap();
        let sysfs = Sysfs::new(dir.path());
        assert!(sysfs.device_names().is_empty());
        assert!(sysfs.gpus().is_empty());
        assert_eq!(sysfs.peer_memory(), PeerMemory::Unknown);
        assert_eq!(sysfs.hostname(), None);
        let ghost = sysfs.device("mlx5_0");
        assert!(ghost.ports.is_empty() && ghost.pci.is_none() && ghost.node_guid.is_none());
    }

    #[test]
    fn junk_files_leave_facts_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path().join("sys/class/infiniband/mlx5_0");
        let port = dev.join("ports/1");
        std::fs::create_dir_all(port.join("gids")).unwrap();
        std::fs::write(dev.join("node_guid"), "not a guid").unwrap();
        std::fs::write(dev.join("fw_ver"), [0xff, 0xfe, 0x00]).unwrap();
        std::fs::write(port.join("state"), "\u{0}\u{0}").unwrap();
        std::fs::write(port.join("phys_state"), "5: LinkUp").unwrap();
        std::fs::write(port.join("rate"), "lots").unwrap();
        std::fs::write(port.join("link_layer"), "InfiniBand").unwrap();
        std::fs::write(port.join("gids/0"), "fe80::1").unwrap();
        std::fs::write(dir.path().join("sys/class/infiniband/README"), "x").unwrap();
        std::fs::create_dir_all(dev.join("ports/notaport")).unwrap();
        let sysfs = Sysfs::new(dir.path());
        let d = sysfs.device("mlx5_0");
        assert_eq!(d.node_guid, None);
        assert_eq!(d.fw_ver, None);
        assert_eq!(d.ports.len(), 1);
        assert_eq!(d.ports[0].state, None);
        assert_eq!(d.ports[0].rate(), None);
        assert!(d.ports[0].gids.is_empty());
    }
}
