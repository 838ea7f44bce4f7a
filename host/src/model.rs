//! What `ibscope host` knows of the local machine: its RDMA devices and their ports, their
//! PCIe links and drivers, the NVIDIA GPUs beside them and the GPUDirect RDMA module. The
//! JSON form of these types is what `ibscope host --json` prints.

use std::net::{IpAddr, Ipv6Addr};

use ibscope_mad::attr::link::{Rate, Speed, Width};
use ibscope_mad::attr::{PhysState, PortState};
use ibscope_mad::codes::guid;
use serde::{Serialize, Serializer};

use crate::pci::PcieLink;
pub use crate::pci::Relation;

/// Everything gathered about the host.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LocalHost {
    /// `/proc/sys/kernel/hostname`.
    pub hostname: Option<String>,
    /// The running kernel's release (`/proc/sys/kernel/osrelease`): the version of every
    /// in-tree driver.
    pub kernel: Option<String>,
    /// Whether the device and port facts came through libibverbs.
    pub verbs: VerbsUse,
    pub devices: Vec<Device>,
    /// NVIDIA GPUs (PCI vendor 0x10de, display class 0x03), in PCI address order; `index`
    /// is the position in that order, which is nvidia-smi's default numbering.
    pub gpus: Vec<Gpu>,
    /// The GPUDirect RDMA module (nvidia_peermem, or the older nv_peer_mem).
    pub peer_memory: PeerMemory,
    /// The versions of the stack a job runs on.
    pub versions: Versions,
    /// The PCIe bridges between each GPU and an HCA behind the same switch, with their
    /// ACS settings.
    pub bridges: Vec<Bridge>,
    /// Every port's and device's RDMA counters as read, when asked
    /// ([`GatherOptions::counters`](crate::GatherOptions)); `host compare` sets error
    /// counters that count beside the fleet's.
    pub counters: Vec<RdmaCounterSet>,
}

/// The commissioning checklist's versions (the kernel's and each RDMA driver's are in
/// `kernel` and each device's `driver`; nvidia_peermem's in `peer_memory`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Versions {
    /// rdma-core's release, from the file name of its libibverbs
    /// (`libibverbs.so.1.14.50.0`: 50.0).
    pub rdma_core: Option<String>,
    /// The NVIDIA kernel driver (`/sys/module/nvidia/version`, else
    /// `/proc/driver/nvidia/version`).
    pub nvidia_driver: Option<String>,
    /// The CUDA driver API version libcuda reports (`12.4`); read on the real host only.
    pub cuda_driver: Option<String>,
}

/// A PCIe bridge (a switch port) and its Access Control Services.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Bridge {
    /// `0000:17:00.0`.
    pub address: String,
    #[serde(flatten)]
    pub acs: crate::pci::Acs,
}

/// How libibverbs took part.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VerbsUse {
    pub status: VerbsStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum VerbsStatus {
    /// Devices were listed, opened and queried through libibverbs; sysfs added the rest.
    Used,
    /// libibverbs could not list devices (see `detail`); the facts are from sysfs alone.
    Failed,
    /// Not asked: built without the `verbs` feature, or sysfs is read from another root
    /// (IBSCOPE_SYSFS_ROOT), which libibverbs cannot follow.
    NotUsed,
}

/// One RDMA device (`mlx5_0`): an HCA, or one PCI function of a multi-port NIC.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Device {
    pub name: String,
    #[serde(with = "guid::option")]
    pub node_guid: Option<u64>,
    #[serde(with = "guid::option")]
    pub sys_image_guid: Option<u64>,
    pub fw_ver: Option<String>,
    /// The device's model as its driver names it (`MT4129` for a ConnectX-7).
    pub hca_type: Option<String>,
    pub board_id: Option<String>,
    /// From libibverbs (`4129` for a ConnectX-7).
    pub vendor_part_id: Option<u32>,
    /// Why libibverbs could not open or query this device, when it was asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verbs_error: Option<String>,
    pub driver: Option<Driver>,
    pub pci: Option<Pci>,
    /// GPUs close to this device on the PCIe tree or the NUMA node, closest first.
    pub gpus_near: Vec<GpuNear>,
    pub ports: Vec<DevicePort>,
    /// The character devices applications open for it.
    pub files: DeviceFiles,
    /// Each RoCE port's lossless configuration.
    pub roce: Vec<crate::roce::RoceConfig>,
}

/// A device's character devices: its uverbs (every RDMA application opens it) and each
/// InfiniBand port's umad (the SM, ibscope and infiniband-diags send MADs through it), as
/// the kernel's classes list them, and whether each has its node in `/dev/infiniband`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DeviceFiles {
    /// `None`: sysfs shows no uverbs for the device (ib_uverbs not loaded).
    pub uverbs: Option<DeviceFile>,
    pub umad: Vec<UmadFile>,
}

/// A character device and whether `/dev/infiniband/NAME` exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceFile {
    /// `uverbs0`, `umad3`.
    pub name: String,
    pub present: bool,
}

/// A port's umad.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UmadFile {
    pub port: u8,
    #[serde(flatten)]
    pub file: DeviceFile,
}

impl Device {
    /// A device known by name only; the readers fill in what they find.
    pub fn named(name: &str) -> Device {
        Device {
            name: name.to_string(),
            node_guid: None,
            sys_image_guid: None,
            fw_ver: None,
            hca_type: None,
            board_id: None,
            vendor_part_id: None,
            verbs_error: None,
            driver: None,
            pci: None,
            gpus_near: Vec::new(),
            ports: Vec::new(),
            files: DeviceFiles::default(),
            roce: Vec::new(),
        }
    }
    /// The model, for grouping HCAs that should run one firmware: `hca_type`, else the
    /// vendor part ID.
    pub fn model(&self) -> Option<String> {
        self.hca_type
            .clone()
            .or_else(|| self.vendor_part_id.map(|p| format!("part {p}")))
    }
    /// The best rate among its Active ports.
    pub fn best_active_rate(&self) -> Option<Rate> {
        self.ports
            .iter()
            .filter(|p| p.state == Some(PortState::Active))
            .filter_map(DevicePort::rate)
            .max_by(|a, b| a.nominal_gbps().total_cmp(&b.nominal_gbps()))
    }
}

/// The kernel driver of a device's PCI function.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Driver {
    /// The module (`mlx5_core`).
    pub module: String,
    /// `/sys/module/<module>/version`: present for out-of-tree drivers (MLNX_OFED/DOCA);
    /// `None` for in-tree ones, whose version is the kernel's.
    pub version: Option<String>,
}

impl Driver {
    /// `mlx5_core 24.10-1.1.4`, or `mlx5_core (in-tree)`.
    pub fn text(&self) -> String {
        match &self.version {
            Some(v) => format!("{} {v}", self.module),
            None => format!("{} (in-tree)", self.module),
        }
    }
}

/// A device's place on the PCIe tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pci {
    /// `0000:17:00.0`.
    pub address: String,
    pub numa_node: Option<u32>,
    /// The link as trained now (`None` when down or unreadable).
    pub link: Option<PcieLink>,
    /// The best link the device supports.
    pub device_max: Option<PcieLink>,
    /// The best link the port above it (the slot) supports; `None` directly on a host
    /// bridge (virtual machines) or when unreadable.
    pub slot_max: Option<PcieLink>,
    /// The path from the PCI host bridge down to the device (`pci0000:15`,
    /// `0000:15:01.0`, ...), as in /sys/devices.
    pub path: Vec<String>,
}

impl Pci {
    /// The best link the device and its slot both support: each part the lesser.
    pub fn capability(&self) -> Option<PcieLink> {
        match (self.device_max, self.slot_max) {
            (Some(d), Some(s)) => Some(d.lesser(s)),
            (d, s) => d.or(s),
        }
    }
}

/// InfiniBand or Ethernet (RoCE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum LinkLayer {
    InfiniBand,
    Ethernet,
    Unknown,
}

impl LinkLayer {
    pub fn short(self) -> &'static str {
        match self {
            LinkLayer::InfiniBand => "IB",
            LinkLayer::Ethernet => "Eth",
            LinkLayer::Unknown => "?",
        }
    }
}

/// One port of a device. JSON adds `rate` (`4xNDR`) and its nominal `gbps`.
#[derive(Debug, Clone, PartialEq)]
pub struct DevicePort {
    pub port: u8,
    pub link_layer: LinkLayer,
    pub state: Option<PortState>,
    pub phys_state: Option<PhysState>,
    /// Active width and speed, only while the link is up (a port without a link reports
    /// a meaningless default).
    pub width: Option<Width>,
    pub speed: Option<Speed>,
    /// InfiniBand only (an Ethernet port has no LID).
    pub lid: Option<u16>,
    pub sm_lid: Option<u16>,
    /// The GID table's used entries.
    pub gids: Vec<Gid>,
}

impl DevicePort {
    /// Width and speed together.
    pub fn rate(&self) -> Option<Rate> {
        Some(Rate::new(self.width?, self.speed?))
    }
    /// Whether the physical link is up (by its physical state, else by its port state).
    pub fn link_up(&self) -> bool {
        match self.phys_state {
            Some(p) => p == PhysState::LinkUp,
            None => self.state == Some(PortState::Active),
        }
    }
}

#[derive(Serialize)]
struct PortJson<'a> {
    port: u8,
    link_layer: LinkLayer,
    state: Option<PortState>,
    phys_state: Option<PhysState>,
    width: Option<Width>,
    speed: Option<Speed>,
    rate: Option<Rate>,
    gbps: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lid: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sm_lid: Option<u16>,
    gids: &'a [Gid],
}

impl Serialize for DevicePort {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        PortJson {
            port: self.port,
            link_layer: self.link_layer,
            state: self.state,
            phys_state: self.phys_state,
            width: self.width,
            speed: self.speed,
            rate: self.rate(),
            gbps: self.rate().map(Rate::nominal_gbps),
            lid: self.lid,
            sm_lid: self.sm_lid,
            gids: &self.gids,
        }
        .serialize(s)
    }
}

/// The GID's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum GidType {
    Ib,
    RoceV1,
    RoceV2,
}

impl GidType {
    pub fn name(self) -> &'static str {
        match self {
            GidType::Ib => "IB",
            GidType::RoceV1 => "RoCE v1",
            GidType::RoceV2 => "RoCE v2",
        }
    }
}

impl Serialize for GidType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// One used entry of a port's GID table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Gid {
    pub index: u32,
    /// As the kernel writes it: eight groups of four hex digits.
    #[serde(serialize_with = "gid_text")]
    pub gid: [u8; 16],
    #[serde(rename = "type")]
    pub gid_type: Option<GidType>,
    /// The network interface a RoCE GID belongs to.
    pub netdev: Option<String>,
    /// The IP address a RoCE GID stands for (IPv4 for an IPv4-mapped GID); none on
    /// InfiniBand, where a GID is not an address of IP.
    pub ip: Option<IpAddr>,
}

impl Gid {
    /// An entry of a port of the given link layer; type and interface to be filled in.
    pub fn new(index: u32, gid: [u8; 16], layer: LinkLayer) -> Gid {
        Gid {
            index,
            gid,
            gid_type: None,
            netdev: None,
            ip: (layer == LinkLayer::Ethernet).then(|| ip_of(gid)),
        }
    }
}

/// IPv4 for an IPv4-mapped GID, else IPv6.
pub fn ip_of(gid: [u8; 16]) -> IpAddr {
    let v6 = Ipv6Addr::from(gid);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(v6),
    }
}

/// The kernel's GID text: `fe80:0000:0000:0000:0c42:a103:00a5:8f2e`.
pub fn gid_string(raw: &[u8; 16]) -> String {
    raw.chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect::<Vec<_>>()
        .join(":")
}

fn gid_text<S: Serializer>(raw: &[u8; 16], s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&gid_string(raw))
}

/// An NVIDIA GPU on the PCIe tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Gpu {
    pub index: usize,
    pub address: String,
    /// PCI device ID (`0x2330`: H100 SXM5).
    #[serde(serialize_with = "hex_id")]
    pub device_id: Option<u32>,
    pub numa_node: Option<u32>,
    /// GPUs lower their link speed when idle: shown, never judged.
    pub link: Option<PcieLink>,
    #[serde(skip)]
    pub path: Vec<String>,
}

fn hex_id<S: Serializer>(id: &Option<u32>, s: S) -> Result<S::Ok, S::Error> {
    match id {
        Some(id) => s.serialize_str(&format!("{id:#06x}")),
        None => s.serialize_none(),
    }
}

/// A GPU near a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuNear {
    pub gpu: usize,
    pub address: String,
    pub relation: Relation,
}

/// The GPUDirect RDMA module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum PeerMemory {
    Loaded {
        module: String,
        version: Option<String>,
    },
    Missing,
    /// Neither /proc/modules nor /sys/module could be read.
    Unknown,
}

// The RDMA counters as read (`counters` reads them; `LocalHost` and `host --counters`
// carry them).

/// How an operator groups a counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CounterGroup {
    /// The physical link: symbol errors, downed links, integrity and overrun errors.
    LinkErrors,
    /// Bytes and packets moved.
    Data,
    /// The reliable transport: retries, sequence errors, timeouts, RNR NAKs.
    Transport,
    /// Receive queues out of buffers.
    ReceiveResources,
    /// Congestion control: CNPs, ECN marks, RoCE adaptive retransmission.
    Congestion,
    Other,
}

impl CounterGroup {
    pub fn title(self) -> &'static str {
        match self {
            CounterGroup::LinkErrors => "link errors",
            CounterGroup::Data => "data",
            CounterGroup::Transport => "transport",
            CounterGroup::ReceiveResources => "receive resources",
            CounterGroup::Congestion => "congestion",
            CounterGroup::Other => "other",
        }
    }
}

/// Where a counter was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CounterSource {
    /// `ports/N/counters/` (the InfiniBand PortCounters the kernel reads from the PMA).
    Port,
    /// `ports/N/hw_counters/`.
    PortHw,
    /// The device's `hw_counters/`.
    DeviceHw,
    /// The RoCE port's netdev (`/sys/class/net/IF/`).
    Netdev,
    /// The netdev's driver statistics (`ethtool -S`): pause frames and discards.
    Ethtool,
}

/// What a counter file held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CounterFileValue {
    Value(u64),
    /// "N/A (no PMA)": the port has no performance management agent.
    NotAvailable,
    /// Missing between listing and reading, unreadable, or not a number: why.
    Unknown(String),
}

/// One counter of a port or device. JSON: `name`, `group`, `source`, `value` (a number,
/// or null with a `note`: "N/A (no PMA)", "unreadable", "not a number: ..."), `unit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaCounter {
    /// The file's name, as the driver names it.
    pub name: String,
    pub group: CounterGroup,
    pub source: CounterSource,
    /// For `port_xmit_data`/`port_rcv_data` the bytes (the kernel counts 4-byte words).
    pub reading: CounterFileValue,
    /// `bytes` for the data counters converted from words, else absent.
    pub unit: Option<&'static str>,
}

impl Serialize for RdmaCounter {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("RdmaCounter", 6)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("group", &self.group)?;
        st.serialize_field("source", &self.source)?;
        let (value, note) = match &self.reading {
            CounterFileValue::Value(v) => (Some(*v), None),
            CounterFileValue::NotAvailable => (None, Some("N/A (no PMA)")),
            CounterFileValue::Unknown(why) => (None, Some(why.as_str())),
        };
        st.serialize_field("value", &value)?;
        if let Some(note) = note {
            st.serialize_field("note", note)?;
        }
        if let Some(unit) = self.unit {
            st.serialize_field("unit", unit)?;
        }
        st.end()
    }
}

/// The counters of one port (`port` set) or of a device as a whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RdmaCounterSet {
    pub device: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netdev: Option<String>,
    pub counters: Vec<RdmaCounter>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gid(text: &str, layer: LinkLayer) -> Gid {
        Gid {
            gid_type: Some(GidType::RoceV2),
            ..Gid::new(0, crate::parse::gid(text).unwrap(), layer)
        }
    }

    #[test]
    fn gid_ips() {
        let eth = LinkLayer::Ethernet;
        let v4 = gid("0000:0000:0000:0000:0000:ffff:c0a8:0a15", eth);
        assert_eq!(v4.ip.unwrap().to_string(), "192.168.10.21");
        let v6 = gid("fe80:0000:0000:0000:0e42:a1ff:fe8a:1c2e", eth);
        assert_eq!(v6.ip.unwrap().to_string(), "fe80::e42:a1ff:fe8a:1c2e");
        let text = "fe80:0000:0000:0000:0c42:a103:00a5:8f2e";
        assert_eq!(gid(text, LinkLayer::InfiniBand).ip, None);
        assert_eq!(gid_string(&gid(text, eth).gid), text);
        let json = serde_json::to_value(gid(text, eth)).unwrap();
        assert_eq!(json["gid"], text);
        assert_eq!(json["type"], "RoCE v2");
        assert_eq!(json["ip"], "fe80::c42:a103:a5:8f2e");
    }

    #[test]
    fn capability_is_the_lesser_of_device_and_slot() {
        let pci = Pci {
            address: "0000:17:00.0".into(),
            numa_node: None,
            link: None,
            device_max: Some(PcieLink::new(16.0, 16)),
            slot_max: Some(PcieLink::new(32.0, 8)),
            path: Vec::new(),
        };
        assert_eq!(pci.capability(), Some(PcieLink::new(16.0, 8)));
        let alone = Pci {
            slot_max: None,
            ..pci
        };
        assert_eq!(alone.capability(), Some(PcieLink::new(16.0, 16)));
    }

    #[test]
    fn peer_memory_json() {
        let loaded = PeerMemory::Loaded {
            module: "nvidia_peermem".into(),
            version: Some("550.54.15".into()),
        };
        let json = serde_json::to_value(loaded).unwrap();
        assert_eq!(json["status"], "loaded");
        assert_eq!(json["module"], "nvidia_peermem");
        assert_eq!(
            serde_json::to_value(PeerMemory::Missing).unwrap()["status"],
            "missing"
        );
    }
}
