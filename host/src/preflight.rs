//! The commissioning preflight: what in a host's RDMA side keeps it from running a job at
//! full speed, as findings of the shared vocabulary (`ibscope_topo::findings`).
//!
//! Rules:
//! - every port of every device is Active;
//! - an Active port's rate is not below the norm of its link layer: `--expect` for
//!   InfiniBand ports, else the most common rate among the host's Active ports of that
//!   layer (the higher rate where two are equally common);
//! - an HCA's PCIe link runs at what the HCA and its slot both support, and carries its
//!   best Active port's rate;
//! - where NVIDIA GPUs are, a GPUDirect RDMA module is loaded;
//! - HCAs of one model run one firmware version;
//! - all devices run under one driver and version;
//! - libibverbs can use every device the kernel shows (when it was asked);
//! - no bridge between a GPU and an HCA behind the same PCIe switch redirects peer-to-peer
//!   requests (ACS), which would send GPUDirect RDMA through the root complex;
//! - an Active RoCE port has a RoCE v2 GID, and the lossless configuration of the `[roce]`
//!   profile (PFC on exactly its priorities, its DSCP mapped to its priority and as the
//!   default RoCE ToS, ECN on its priority, a netdev MTU that carries its RoCE MTU);
//!   without a profile, the host's Active RoCE ports agree with each other;
//! - an Active port's device has its uverbs node in `/dev/infiniband`, and an Active
//!   InfiniBand port its umad node (RoCE needs no umad).

use std::collections::BTreeMap;

use ibscope_mad::attr::link::Rate;
use ibscope_mad::attr::PortState;
use ibscope_topo::findings::{Finding, FindingKind};
use ibscope_topo::model::refs::{NodeRef, PortRef};
use ibscope_topo::model::NodeKind;
use serde::Serialize;

use crate::model::{Device, DevicePort, LinkLayer, LocalHost, PeerMemory, VerbsStatus};
use crate::roce::{RoceConfig, RoceProfile};

/// What the preflight is told.
#[derive(Debug, Clone, Default)]
pub struct PreflightOptions {
    /// The rate every InfiniBand port should run at (default: the host's most common).
    pub expect: Option<Rate>,
    /// The lossless configuration every RoCE port should have (`[roce]` in the config).
    pub roce: Option<crate::roce::RoceProfile>,
}

/// A finding about the host, with the device it concerns. JSON: the finding's fields
/// (`kind`, `severity`, `at` for a port, `message`) and `device`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HostFinding {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(flatten)]
    pub finding: Finding,
}

impl HostFinding {
    fn device(device: &Device, kind: FindingKind, message: String) -> HostFinding {
        HostFinding {
            device: Some(device.name.clone()),
            finding: Finding::new(kind, message),
        }
    }
    fn port(device: &Device, port: &DevicePort, kind: FindingKind, message: String) -> HostFinding {
        let node = NodeRef {
            guid: device.node_guid.unwrap_or(0),
            kind: NodeKind::Ca,
            name: device.name.as_str().into(),
        };
        let at = PortRef::on(node, port.port, port.lid.unwrap_or(0));
        HostFinding {
            device: Some(device.name.clone()),
            finding: Finding::new(kind, message).at(at, None),
        }
    }
    fn host(kind: FindingKind, message: String) -> HostFinding {
        HostFinding {
            device: None,
            finding: Finding::new(kind, message),
        }
    }
    /// The line `ibscope host --check` prints: the finding's one text, its device named
    /// where it has no port.
    pub fn text_line(&self) -> String {
        self.finding.text_about(
            self.device.as_deref(),
            ibscope_topo::findings::PortNaming::Full,
        )
    }
}

/// The rate each link layer's ports are held to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LinkLayerNorms {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub infiniband: Option<Rate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ethernet: Option<Rate>,
}

impl LinkLayerNorms {
    pub fn of(host: &LocalHost, opts: &PreflightOptions) -> LinkLayerNorms {
        LinkLayerNorms {
            infiniband: opts
                .expect
                .or_else(|| most_common_rate(host, LinkLayer::InfiniBand)),
            ethernet: most_common_rate(host, LinkLayer::Ethernet),
        }
    }
    pub fn get(&self, layer: LinkLayer) -> Option<Rate> {
        match layer {
            LinkLayer::InfiniBand => self.infiniband,
            LinkLayer::Ethernet => self.ethernet,
            LinkLayer::Unknown => None,
        }
    }
}

fn active_ports(host: &LocalHost) -> impl Iterator<Item = (&Device, &DevicePort)> {
    host.devices.iter().flat_map(|d| {
        d.ports
            .iter()
            .filter(|p| p.state == Some(PortState::Active))
            .map(move |p| (d, p))
    })
}

/// The most common rate among Active ports of a layer; the higher one on a tie.
fn most_common_rate(host: &LocalHost, layer: LinkLayer) -> Option<Rate> {
    let mut counts: BTreeMap<Rate, usize> = BTreeMap::new();
    for (_, p) in active_ports(host).filter(|(_, p)| p.link_layer == layer) {
        if let Some(r) = p.rate() {
            *counts.entry(r).or_default() += 1;
        }
    }
    counts
        .into_iter()
        .max_by(|(ra, a), (rb, b)| {
            a.cmp(b)
                .then(ra.nominal_gbps().total_cmp(&rb.nominal_gbps()))
        })
        .map(|(r, _)| r)
}

/// Every finding, in rule order, devices in their order.
pub fn preflight(host: &LocalHost, opts: &PreflightOptions) -> Vec<HostFinding> {
    let mut out = Vec::new();
    verbs_unusable(host, &mut out);
    ports_not_active(host, &mut out);
    rates_below_norm(host, &LinkLayerNorms::of(host, opts), &mut out);
    pcie_links(host, &mut out);
    peer_memory(host, &mut out);
    mixed_firmware(host, &mut out);
    mixed_drivers(host, &mut out);
    device_files(host, &mut out);
    acs_redirects(host, &mut out);
    roce_config(host, opts.roce.as_ref(), &mut out);
    out
}

/// A GPU and an HCA behind one PCIe switch whose path crosses a bridge that redirects
/// peer-to-peer requests or completions (ACS): GPUDirect RDMA goes up to the root complex
/// (slower, or blocked by the IOMMU) instead of across the switch.
fn acs_redirects(host: &LocalHost, out: &mut Vec<HostFinding>) {
    for d in &host.devices {
        let Some(pci) = &d.pci else { continue };
        for g in &host.gpus {
            let redirecting: Vec<String> = crate::pci::bridges_between(&pci.path, &g.path)
                .into_iter()
                .filter_map(|address| host.bridges.iter().find(|b| b.address == address))
                .filter_map(|b| match b.acs {
                    crate::pci::Acs::Present { control, .. } if b.acs.redirects() => {
                        Some(format!("{} (ACS control {control:#06x})", b.address))
                    }
                    _ => None,
                })
                .collect();
            if redirecting.is_empty() {
                continue;
            }
            let msg = format!(
                "shares a PCIe switch with GPU {} ({}), but ACS redirects peer-to-peer \
                 requests at {}: GPUDirect RDMA goes through the root complex; disable ACS \
                 redirection on the switch's ports (BIOS, or setpci ECAP_ACS+6.w=0)",
                g.index,
                g.address,
                redirecting.join(", ")
            );
            out.push(HostFinding::device(
                d,
                FindingKind::AcsBlocksPeerToPeer,
                msg,
            ));
        }
    }
}

/// An Active port no application can use: its device's uverbs, or (InfiniBand) its umad,
/// has no class entry (the module is not loaded) or no node in `/dev/infiniband`.
fn device_files(host: &LocalHost, out: &mut Vec<HostFinding>) {
    for (d, p) in active_ports(host) {
        let mut missing = Vec::new();
        match &d.files.uverbs {
            None => missing.push(
                "no uverbs device (is ib_uverbs loaded?): no RDMA application can open it"
                    .to_string(),
            ),
            Some(f) if !f.present => missing.push(format!(
                "/dev/infiniband/{} is missing: no RDMA application can open it (udev, or a \
                 container started without the device)",
                f.name
            )),
            Some(_) => {}
        }
        if p.link_layer == LinkLayer::InfiniBand {
            match d.files.umad.iter().find(|u| u.port == p.port) {
                None => missing.push(
                    "no umad device for the port (is ib_umad loaded?): the SM and diagnostics \
                     cannot send MADs through it"
                        .to_string(),
                ),
                Some(u) if !u.file.present => missing.push(format!(
                    "/dev/infiniband/{} is missing: the SM and diagnostics cannot send MADs \
                     through the port",
                    u.file.name
                )),
                Some(_) => {}
            }
        }
        if !missing.is_empty() {
            let msg = format!("port is Active, but {}", missing.join("; "));
            out.push(HostFinding::port(
                d,
                p,
                FindingKind::DeviceFilesMissing,
                msg,
            ));
        }
    }
}

fn verbs_unusable(host: &LocalHost, out: &mut Vec<HostFinding>) {
    if host.verbs.status == VerbsStatus::NotUsed {
        return;
    }
    for d in &host.devices {
        if let Some(why) = &d.verbs_error {
            out.push(HostFinding::device(
                d,
                FindingKind::VerbsUnusable,
                why.clone(),
            ));
        }
    }
}

fn ports_not_active(host: &LocalHost, out: &mut Vec<HostFinding>) {
    for d in &host.devices {
        for p in &d.ports {
            if p.state == Some(PortState::Active) {
                continue;
            }
            let state = p
                .state
                .map_or("unknown state".into(), |s| s.name().to_string());
            let phys = p.phys_state.map_or("?".into(), |s| s.name().to_string());
            let hint = if !p.link_up() {
                "no link: check the cable, the transceiver and the switch port"
            } else if p.link_layer == LinkLayer::InfiniBand {
                "the link is up but no subnet manager has made the port Active: is an SM running?"
            } else {
                "the link is up but the port is not Active"
            };
            let msg = format!("port is {state} (physical {phys}): {hint}");
            out.push(HostFinding::port(d, p, FindingKind::HcaPortNotActive, msg));
        }
    }
}

fn rates_below_norm(host: &LocalHost, norms: &LinkLayerNorms, out: &mut Vec<HostFinding>) {
    for (d, p) in active_ports(host) {
        let (Some(rate), Some(norm)) = (p.rate(), norms.get(p.link_layer)) else {
            continue;
        };
        if rate.is_below(norm) {
            let msg = format!(
                "runs at {rate} ({} Gb/s), below this host's norm {norm} ({} Gb/s)",
                rate.nominal_gbps(),
                norm.nominal_gbps()
            );
            out.push(HostFinding::port(d, p, FindingKind::HcaRateBelowNorm, msg));
        }
    }
}

fn pcie_links(host: &LocalHost, out: &mut Vec<HostFinding>) {
    for d in &host.devices {
        let Some(pci) = &d.pci else { continue };
        let Some(link) = pci.link else { continue };
        let mut problems = Vec::new();
        if let Some(cap) = pci.capability() {
            let lost = cap.gbps() - link.gbps();
            if lost > 0.5 {
                problems.push(format!(
                    "trained at {} ({:.0} Gb/s) where the HCA and its slot support {} \
                     ({:.0} Gb/s): {lost:.0} Gb/s ({:.0}%) lost",
                    link.text(),
                    link.gbps(),
                    cap.text(),
                    cap.gbps(),
                    100.0 * lost / cap.gbps()
                ));
            }
        }
        if let Some(rate) = d.best_active_rate() {
            if link.gbps() + 0.5 < rate.nominal_gbps() {
                problems.push(format!(
                    "{} ({:.0} Gb/s) cannot carry its {rate} port ({} Gb/s)",
                    link.text(),
                    link.gbps(),
                    rate.nominal_gbps()
                ));
            }
        }
        if !problems.is_empty() {
            let msg = format!("PCIe link of {}: {}", pci.address, problems.join("; "));
            out.push(HostFinding::device(d, FindingKind::PcieLinkDegraded, msg));
        }
    }
}

fn peer_memory(host: &LocalHost, out: &mut Vec<HostFinding>) {
    if host.gpus.is_empty() || host.peer_memory != PeerMemory::Missing {
        return;
    }
    let msg = format!(
        "{} NVIDIA GPU(s) but neither nvidia_peermem nor nv_peer_mem is loaded: GPUDirect RDMA \
         is off unless the job uses DMA-BUF (modprobe nvidia_peermem)",
        host.gpus.len()
    );
    out.push(HostFinding::host(FindingKind::PeerMemoryMissing, msg));
}

/// `value (dev, dev), value (dev)` for one group's differing values.
fn spread(groups: &BTreeMap<String, Vec<&str>>) -> String {
    groups
        .iter()
        .map(|(value, devices)| format!("{value} ({})", devices.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

fn mixed_firmware(host: &LocalHost, out: &mut Vec<HostFinding>) {
    let mut models: BTreeMap<String, BTreeMap<String, Vec<&str>>> = BTreeMap::new();
    for d in &host.devices {
        let (Some(model), Some(fw)) = (d.model(), &d.fw_ver) else {
            continue;
        };
        models
            .entry(model)
            .or_default()
            .entry(fw.clone())
            .or_default()
            .push(&d.name);
    }
    for (model, versions) in &models {
        if versions.len() > 1 {
            let msg = format!(
                "{} HCAs of model {model} run {} firmware versions: {}",
                versions.values().map(Vec::len).sum::<usize>(),
                versions.len(),
                spread(versions)
            );
            out.push(HostFinding::host(FindingKind::MixedFirmware, msg));
        }
    }
}

fn mixed_drivers(host: &LocalHost, out: &mut Vec<HostFinding>) {
    let mut drivers: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for d in &host.devices {
        if let Some(driver) = &d.driver {
            drivers.entry(driver.text()).or_default().push(&d.name);
        }
    }
    if drivers.len() > 1 {
        let msg = format!(
            "RDMA devices run under {} drivers: {}",
            drivers.len(),
            spread(&drivers)
        );
        out.push(HostFinding::host(FindingKind::MixedDriver, msg));
    }
}

/// `1, 3` or `none`.
fn priorities(list: &[u8]) -> String {
    if list.is_empty() {
        return "none".into();
    }
    list.iter()
        .map(u8::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What `profile` asks of a RoCE port that could not be read there, and why.
fn unread_against_profile(c: &RoceConfig, profile: &RoceProfile) -> Vec<String> {
    let mut unread = Vec::new();
    let mut not_read = |what: &str, key: &str, wanted: String| {
        if c.unread.contains_key(key) || (c.netdev.is_none() && key != "netdev") {
            unread.push(format!(
                "{what} could not be read ({}); the profile wants {wanted}",
                c.why_unread(key)
            ));
        }
    };
    if let Some(want) = profile.pfc_wanted() {
        not_read(
            "PFC",
            "pfc",
            format!("it on priorities {}", priorities(&want)),
        );
    }
    if let (Some(dscp), Some(prio)) = (profile.dscp, profile.priority) {
        not_read(
            "the DSCP map",
            "dscp_to_priority",
            format!("DSCP {dscp} on priority {prio}"),
        );
    }
    if let (Some(true), Some(prio)) = (profile.ecn, profile.priority) {
        for (point, key) in [
            ("ECN notification (roce_np)", "ecn_np"),
            ("ECN reaction (roce_rp)", "ecn_rp"),
        ] {
            not_read(point, key, format!("it on priority {prio}"));
        }
    }
    if let Some(mtu) = profile.mtu {
        not_read("the netdev MTU", "netdev_mtu", format!("RoCE MTU {mtu}"));
    }
    unread
}

/// What an Active RoCE port's configuration lacks against `profile`: what differs, and
/// what it asks for that could not be read.
fn against_profile(c: &RoceConfig, profile: &RoceProfile) -> Vec<String> {
    let mut wrong = unread_against_profile(c, profile);
    if let (Some(want), Some(have)) = (profile.pfc_wanted(), &c.pfc) {
        let mut want = want;
        want.sort_unstable();
        if &want != have {
            wrong.push(format!(
                "PFC is on for priorities {}, the profile wants {}",
                priorities(have),
                priorities(&want)
            ));
        }
    }
    if let (Some(dscp), Some(prio), Some(map)) =
        (profile.dscp, profile.priority, &c.dscp_to_priority)
    {
        match map.get(&dscp) {
            Some(p) if *p == prio => {}
            Some(p) => wrong.push(format!("DSCP {dscp} maps to priority {p}, not {prio}")),
            None if map.is_empty() => wrong.push(format!(
                "no DSCP is mapped (trust is PCP): DSCP {dscp} does not reach priority {prio}"
            )),
            None => wrong.push(format!("DSCP {dscp} is not mapped to priority {prio}")),
        }
    }
    if let (Some(dscp), Some(tos)) = (profile.dscp, c.default_roce_tos) {
        if tos >> 2 != dscp {
            wrong.push(format!(
                "rdma_cm's default RoCE ToS {tos} is DSCP {}, not {dscp}",
                tos >> 2
            ));
        }
    }
    if let (Some(true), Some(prio)) = (profile.ecn, profile.priority) {
        for (point, list) in [
            ("notification (roce_np)", &c.ecn_np),
            ("reaction (roce_rp)", &c.ecn_rp),
        ] {
            if list.as_ref().is_some_and(|l| !l.contains(&prio)) {
                wrong.push(format!("ECN {point} is off on priority {prio}"));
            }
        }
    }
    if let (Some(mtu), Some(netdev_mtu)) = (profile.mtu, c.netdev_mtu) {
        let need = crate::roce::netdev_mtu_for(mtu);
        if netdev_mtu < need {
            wrong.push(format!(
                "netdev MTU {netdev_mtu} cannot carry RoCE MTU {mtu} (needs at least {need})"
            ));
        }
    }
    wrong
}

/// The Active RoCE ports' lossless configuration: against the profile, else for agreement.
fn roce_config(host: &LocalHost, profile: Option<&RoceProfile>, out: &mut Vec<HostFinding>) {
    let mut seen: Vec<(&Device, &DevicePort, &RoceConfig)> = Vec::new();
    for (d, p) in active_ports(host).filter(|(_, p)| p.link_layer == LinkLayer::Ethernet) {
        let Some(c) = d.roce.iter().find(|c| c.port == p.port) else {
            continue;
        };
        let mut wrong = Vec::new();
        if c.rocev2_gids == 0 {
            wrong.push("no RoCE v2 GID: routed RoCE (and NCCL) has none to use".to_string());
        }
        if let Some(profile) = profile {
            wrong.extend(against_profile(c, profile));
        }
        if !wrong.is_empty() {
            let netdev = c.netdev.as_deref().unwrap_or("no netdev");
            let msg = format!("{netdev}: {}", wrong.join("; "));
            out.push(HostFinding::port(d, p, FindingKind::RoceConfig, msg));
        }
        seen.push((d, p, c));
    }
    if profile.is_some() || seen.len() < 2 {
        return;
    }
    let facts = |c: &RoceConfig| {
        (
            c.pfc.clone(),
            c.dscp_to_priority.clone(),
            c.ecn_np.clone(),
            c.ecn_rp.clone(),
            c.netdev_mtu,
        )
    };
    let first = facts(seen[0].2);
    if seen.iter().all(|(_, _, c)| facts(c) == first) {
        return;
    }
    let each: Vec<String> = seen
        .iter()
        .map(|(d, p, c)| {
            format!(
                "{} port {} PFC {}, DSCP map {}, MTU {}",
                d.name,
                p.port,
                c.pfc
                    .as_deref()
                    .map_or_else(|| format!("unknown ({})", c.why_unread("pfc")), priorities),
                c.dscp_to_priority.as_ref().map_or_else(
                    || format!("unknown ({})", c.why_unread("dscp_to_priority")),
                    |m| {
                        let pairs: Vec<String> =
                            m.iter().map(|(k, v)| format!("{k}->{v}")).collect();
                        if pairs.is_empty() {
                            "none".into()
                        } else {
                            pairs.join(" ")
                        }
                    }
                ),
                c.netdev_mtu.map_or_else(
                    || format!("unknown ({})", c.why_unread("netdev_mtu")),
                    |m| m.to_string()
                )
            )
        })
        .collect();
    out.push(HostFinding::host(
        FindingKind::RoceConfig,
        format!(
            "this host's RoCE ports disagree (no [roce] profile to say which is right): {}",
            each.join("; ")
        ),
    ));
}

/// The finding kinds `host --check` reports, from the shared table (its help text).
pub fn kinds_help() -> String {
    ibscope_topo::findings::kinds_help("Findings of --check", ibscope_topo::findings::Scope::Host)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::{DeviceFile, DeviceFiles, Driver, Gpu, Pci, UmadFile, VerbsUse};
    use crate::pci::PcieLink;
    use ibscope_mad::attr::link::{Speed, Width};
    use ibscope_mad::attr::PhysState;

    fn port(n: u8, rate: &str) -> DevicePort {
        let r = Rate::parse(rate).unwrap();
        DevicePort {
            port: n,
            link_layer: LinkLayer::InfiniBand,
            state: Some(PortState::Active),
            phys_state: Some(PhysState::LinkUp),
            width: Some(r.width),
            speed: Some(r.speed),
            lid: Some(u16::from(n) + 10),
            sm_lid: Some(1),
            gids: Vec::new(),
        }
    }

    fn hca(name: &str, rate: &str) -> Device {
        let mut d = Device::named(name);
        d.node_guid = Some(0x0c42_a103_0000_0000 + name.len() as u64);
        d.hca_type = Some("MT4129".into());
        d.fw_ver = Some("28.39.1002".into());
        d.driver = Some(Driver {
            module: "mlx5_core".into(),
            version: Some("24.10-1.1.4".into()),
        });
        d.pci = Some(Pci {
            address: "0000:18:00.0".into(),
            numa_node: Some(0),
            link: Some(PcieLink::new(32.0, 16)),
            device_max: Some(PcieLink::new(32.0, 16)),
            slot_max: Some(PcieLink::new(32.0, 16)),
            path: Vec::new(),
        });
        d.ports = vec![port(1, rate)];
        let file = |name: &str| DeviceFile {
            name: name.into(),
            present: true,
        };
        d.files = DeviceFiles {
            uverbs: Some(file("uverbs0")),
            umad: vec![UmadFile {
                port: 1,
                file: file("umad0"),
            }],
        };
        d
    }

    /// A host named node1 with these devices, verbs used, no GPU.
    pub(crate) fn host(devices: Vec<Device>) -> LocalHost {
        LocalHost {
            hostname: Some("node1".into()),
            kernel: Some("6.8.0".into()),
            verbs: VerbsUse {
                status: VerbsStatus::Used,
                detail: None,
            },
            devices,
            gpus: Vec::new(),
            peer_memory: PeerMemory::Missing,
            versions: crate::model::Versions::default(),
            bridges: Vec::new(),
            counters: Vec::new(),
        }
    }

    fn kinds(findings: &[HostFinding]) -> Vec<FindingKind> {
        findings.iter().map(|f| f.finding.kind).collect()
    }

    #[test]
    fn a_healthy_host_has_no_findings() {
        let h = host((0..8).map(|i| hca(&format!("mlx5_{i}"), "4xNDR")).collect());
        assert_eq!(preflight(&h, &PreflightOptions::default()), []);
    }

    #[test]
    fn ports_not_active_say_why() {
        let mut down = hca("mlx5_1", "4xNDR");
        down.ports[0].state = Some(PortState::Down);
        down.ports[0].phys_state = Some(PhysState::Polling);
        let mut init = hca("mlx5_2", "4xNDR");
        init.ports[0].state = Some(PortState::Init);
        let f = preflight(
            &host(vec![hca("mlx5_0", "4xNDR"), down, init]),
            &Default::default(),
        );
        assert_eq!(kinds(&f), [FindingKind::HcaPortNotActive; 2]);
        assert!(
            f[0].finding.message.contains("no link"),
            "{}",
            f[0].finding.message
        );
        assert!(
            f[1].finding.message.contains("subnet manager"),
            "{}",
            f[1].finding.message
        );
        let at = f[0].finding.at.as_ref().unwrap();
        assert_eq!((at.node.name.as_ref(), at.port, at.lid), ("mlx5_1", 1, 11));
        assert!(f[0].text_line().starts_with(
            "[hca-port-not-active] \"mlx5_1\" (0x0c42a10300000006) port 1 (lid 11): "
        ));
    }

    #[test]
    fn rates_below_the_norm_or_the_expected_rate() {
        let mut devices: Vec<Device> = (0..7).map(|i| hca(&format!("mlx5_{i}"), "4xNDR")).collect();
        devices.push(hca("mlx5_7", "4xHDR"));
        let h = host(devices);
        let f = preflight(&h, &Default::default());
        assert_eq!(kinds(&f), [FindingKind::HcaRateBelowNorm]);
        assert_eq!(f[0].device.as_deref(), Some("mlx5_7"));
        assert!(f[0]
            .finding
            .message
            .contains("4xHDR (200 Gb/s), below this host's norm 4xNDR (400 Gb/s)"));
        // --expect replaces the norm: now every port is below it.
        let expect = PreflightOptions {
            expect: Some(Rate::new(Width::X4, Speed::Xdr)),
            ..PreflightOptions::default()
        };
        assert_eq!(preflight(&h, &expect).len(), 8);
        // On a tie the higher rate is the norm.
        let tie = host(vec![hca("mlx5_0", "4xHDR"), hca("mlx5_1", "4xNDR")]);
        assert_eq!(
            LinkLayerNorms::of(&tie, &Default::default()).infiniband,
            Rate::parse("4xNDR")
        );
        // Ethernet ports have their own norm.
        let mut eth = hca("mlx5_2", "4xEDR");
        eth.ports[0].link_layer = LinkLayer::Ethernet;
        let mixed = host(vec![hca("mlx5_0", "4xNDR"), eth]);
        assert_eq!(preflight(&mixed, &Default::default()), []);
    }

    #[test]
    fn pcie_below_capability_says_the_bandwidth_lost() {
        let mut d = hca("mlx5_0", "4xNDR");
        d.pci.as_mut().unwrap().link = Some(PcieLink::new(16.0, 8));
        let f = preflight(&host(vec![d]), &Default::default());
        assert_eq!(kinds(&f), [FindingKind::PcieLinkDegraded]);
        let m = &f[0].finding.message;
        assert!(
            m.starts_with("PCIe link of 0000:18:00.0: trained at"),
            "{m}"
        );
        assert!(m.contains("trained at Gen4 x8 (126 Gb/s) where the HCA and its slot support Gen5 x16 (504 Gb/s): 378 Gb/s (75%) lost"), "{m}");
        assert!(m.contains("cannot carry its 4xNDR port (400 Gb/s)"), "{m}");
        assert!(f[0]
            .text_line()
            .starts_with("[pcie-link-degraded] mlx5_0: PCIe link of"));

        // A Gen4 HCA at full Gen4 x16 in a Gen5 slot is at its capability.
        let mut gen4 = hca("mlx5_0", "4xHDR");
        let pci = gen4.pci.as_mut().unwrap();
        pci.link = Some(PcieLink::new(16.0, 16));
        pci.device_max = Some(PcieLink::new(16.0, 16));
        assert_eq!(preflight(&host(vec![gen4]), &Default::default()), []);
    }

    #[test]
    fn peer_memory_only_matters_with_gpus() {
        let mut h = host(vec![hca("mlx5_0", "4xNDR")]);
        assert_eq!(preflight(&h, &Default::default()), []);
        h.gpus.push(Gpu {
            index: 0,
            address: "0000:1a:00.0".into(),
            device_id: Some(0x2330),
            numa_node: Some(0),
            link: None,
            path: Vec::new(),
        });
        assert_eq!(
            kinds(&preflight(&h, &Default::default())),
            [FindingKind::PeerMemoryMissing]
        );
        h.peer_memory = PeerMemory::Loaded {
            module: "nvidia_peermem".into(),
            version: None,
        };
        assert_eq!(preflight(&h, &Default::default()), []);
        h.peer_memory = PeerMemory::Unknown;
        assert_eq!(
            preflight(&h, &Default::default()),
            [],
            "unknown is not missing"
        );
    }

    #[test]
    fn mixed_firmware_within_a_model_and_mixed_drivers() {
        let mut odd = hca("mlx5_1", "4xNDR");
        odd.fw_ver = Some("28.37.1014".into());
        // Another model's firmware is its own.
        let mut bf3 = hca("mlx5_2", "4xNDR");
        bf3.hca_type = Some("MT41692".into());
        bf3.fw_ver = Some("32.41.1000".into());
        let mut inbox = hca("mlx5_3", "4xNDR");
        inbox.driver = Some(Driver {
            module: "mlx5_core".into(),
            version: None,
        });
        let f = preflight(
            &host(vec![hca("mlx5_0", "4xNDR"), odd, bf3, inbox]),
            &Default::default(),
        );
        assert_eq!(
            kinds(&f),
            [FindingKind::MixedFirmware, FindingKind::MixedDriver]
        );
        assert_eq!(
            f[0].finding.message,
            "3 HCAs of model MT4129 run 2 firmware versions: 28.37.1014 (mlx5_1); 28.39.1002 (mlx5_0, mlx5_3)"
        );
        assert_eq!(
            f[1].finding.message,
            "RDMA devices run under 2 drivers: mlx5_core (in-tree) (mlx5_3); mlx5_core 24.10-1.1.4 (mlx5_0, mlx5_1, mlx5_2)"
        );
        let json = serde_json::to_value(&f[0]).unwrap();
        assert_eq!(json["kind"], "mixed-firmware");
        assert_eq!(json["severity"], "warning");
        assert!(json.get("device").is_none());
    }

    #[test]
    fn verbs_errors_are_findings_only_when_verbs_was_asked() {
        let mut d = hca("mlx5_0", "4xNDR");
        d.verbs_error = Some("ibv_open_device: Permission denied".into());
        let mut h = host(vec![d]);
        let f = preflight(&h, &Default::default());
        assert_eq!(kinds(&f), [FindingKind::VerbsUnusable]);
        assert_eq!(serde_json::to_value(&f[0]).unwrap()["device"], "mlx5_0");
        h.verbs.status = VerbsStatus::NotUsed;
        assert_eq!(preflight(&h, &Default::default()), []);
    }

    #[test]
    fn an_active_port_without_its_device_files_cannot_be_used() {
        let mut gone = hca("mlx5_0", "4xNDR");
        gone.files.umad[0].file.present = false;
        let mut unloaded = hca("mlx5_1", "4xNDR");
        unloaded.files.uverbs = None;
        unloaded.files.umad.clear();
        let mut roce = hca("mlx5_2", "4xNDR");
        roce.ports[0].link_layer = LinkLayer::Ethernet;
        roce.files.umad.clear();
        let mut down = hca("mlx5_3", "4xNDR");
        down.ports[0].state = Some(PortState::Down);
        down.files = DeviceFiles::default();
        let found: Vec<HostFinding> = preflight(
            &host(vec![gone, unloaded, roce, down]),
            &PreflightOptions::default(),
        )
        .into_iter()
        .filter(|f| f.finding.kind == FindingKind::DeviceFilesMissing)
        .collect();
        assert_eq!(found.len(), 2, "{found:#?}");
        assert_eq!(found[0].device.as_deref(), Some("mlx5_0"));
        assert!(found[0]
            .finding
            .message
            .contains("/dev/infiniband/umad0 is missing"));
        assert!(!found[0].finding.message.contains("uverbs"));
        assert_eq!(found[1].device.as_deref(), Some("mlx5_1"));
        assert!(found[1].finding.message.contains("ib_uverbs loaded"));
        assert!(found[1].finding.message.contains("ib_umad loaded"));
    }

    #[test]
    fn acs_redirecting_between_a_gpu_and_its_hca_is_found() {
        use crate::model::Bridge;
        use crate::pci::Acs;
        let path = |p: &str| p.split('/').map(str::to_string).collect::<Vec<_>>();
        let mut nic = hca("mlx5_0", "4xNDR");
        nic.pci.as_mut().unwrap().path =
            path("pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:00.0/0000:18:00.0");
        let gpu = Gpu {
            index: 0,
            address: "0000:1a:00.0".into(),
            device_id: Some(0x2330),
            numa_node: Some(0),
            link: None,
            path: path("pci0000:15/0000:15:01.0/0000:16:00.0/0000:17:02.0/0000:1a:00.0"),
        };
        let mut h = host(vec![nic]);
        h.gpus = vec![gpu];
        h.peer_memory = PeerMemory::Loaded {
            module: "nvidia_peermem".into(),
            version: None,
        };
        let acs = |control: u16| Acs::Present {
            control,
            request_redirect: control & 4 != 0,
            completion_redirect: control & 8 != 0,
            egress_control: false,
        };
        h.bridges = vec![
            Bridge {
                address: "0000:17:00.0".into(),
                acs: acs(0),
            },
            Bridge {
                address: "0000:17:02.0".into(),
                acs: acs(0x001d),
            },
        ];
        let found = preflight(&h, &PreflightOptions::default());
        assert_eq!(
            kinds(&found),
            [FindingKind::AcsBlocksPeerToPeer],
            "{found:#?}"
        );
        assert!(found[0]
            .finding
            .message
            .contains("0000:17:02.0 (ACS control 0x001d)"));
        h.bridges[1].acs = acs(0x0011);
        assert!(preflight(&h, &PreflightOptions::default()).is_empty());
        h.bridges[1].acs = Acs::Unreadable;
        assert!(preflight(&h, &PreflightOptions::default()).is_empty());
    }

    /// A RoCE NIC whose port is configured as `pfc`, `dscp -> prio`, MTU 9000, ECN on 3.
    fn roce_nic(name: &str, pfc: &[u8], map: &[(u8, u8)]) -> Device {
        let mut d = hca(name, "4xEDR");
        d.ports[0].link_layer = LinkLayer::Ethernet;
        d.files.umad.clear();
        d.roce = vec![RoceConfig {
            port: 1,
            netdev: Some(format!("{name}-eth")),
            netdev_mtu: Some(9000),
            pfc: Some(pfc.to_vec()),
            dscp_to_priority: Some(map.iter().copied().collect()),
            ecn_np: Some(vec![3]),
            ecn_rp: Some(vec![3]),
            default_roce_tos: Some(106),
            rocev2_gids: 2,
            dcb_error: None,
            unread: Default::default(),
        }];
        d
    }

    #[test]
    fn roce_ports_against_a_profile() {
        let profile = RoceProfile {
            priority: Some(3),
            dscp: Some(26),
            pfc: None,
            ecn: Some(true),
            mtu: Some(4096),
        };
        let opts = PreflightOptions {
            roce: Some(profile),
            ..PreflightOptions::default()
        };
        let good = roce_nic("mlx5_0", &[3], &[(26, 3)]);
        assert!(preflight(&host(vec![good.clone()]), &opts).is_empty());
        let mut bad = roce_nic("mlx5_1", &[0, 3], &[]);
        bad.roce[0].netdev_mtu = Some(1500);
        bad.roce[0].ecn_rp = Some(vec![]);
        bad.roce[0].default_roce_tos = Some(0);
        bad.roce[0].rocev2_gids = 0;
        let found = preflight(&host(vec![good, bad]), &opts);
        assert_eq!(kinds(&found), [FindingKind::RoceConfig], "{found:#?}");
        let m = &found[0].finding.message;
        for part in [
            "mlx5_1-eth: no RoCE v2 GID",
            "PFC is on for priorities 0, 3, the profile wants 3",
            "no DSCP is mapped (trust is PCP): DSCP 26 does not reach priority 3",
            "default RoCE ToS 0 is DSCP 0, not 26",
            "ECN reaction (roce_rp) is off on priority 3",
            "netdev MTU 1500 cannot carry RoCE MTU 4096 (needs at least 4200)",
        ] {
            assert!(m.contains(part), "{part}: {m}");
        }
        assert!(!m.contains("notification"), "{m}");
    }

    /// A port whose DCB could not be read: a finding with the reason where the profile
    /// asks for PFC and the DSCP map, none where it asks for neither.
    #[test]
    fn settings_a_profile_asks_for_that_could_not_be_read_are_findings() {
        let mut nic = roce_nic("mlx5_0", &[], &[]);
        let reason = "DCB: Operation not supported (os error 95)";
        nic.roce[0].pfc = None;
        nic.roce[0].dscp_to_priority = None;
        for key in ["pfc", "dscp_to_priority"] {
            nic.roce[0].unread.insert(key.into(), reason.into());
        }
        let profile = |p: RoceProfile| PreflightOptions {
            roce: Some(p),
            ..PreflightOptions::default()
        };
        let wants = profile(RoceProfile {
            priority: Some(3),
            dscp: Some(26),
            ..RoceProfile::default()
        });
        let found = preflight(&host(vec![nic.clone()]), &wants);
        assert_eq!(kinds(&found), [FindingKind::RoceConfig], "{found:#?}");
        let m = &found[0].finding.message;
        for part in [
            "mlx5_0-eth: PFC could not be read (DCB: Operation not supported (os error 95)); \
             the profile wants it on priorities 3",
            "the DSCP map could not be read (DCB: Operation not supported (os error 95)); \
             the profile wants DSCP 26 on priority 3",
        ] {
            assert!(m.contains(part), "{part}: {m}");
        }
        let mtu_only = profile(RoceProfile {
            mtu: Some(4096),
            ..RoceProfile::default()
        });
        assert!(preflight(&host(vec![nic.clone()]), &mtu_only).is_empty());
        // No netdev at all: every setting asked for is unknown, for that reason.
        nic.roce[0].netdev = None;
        nic.roce[0].netdev_mtu = None;
        nic.roce[0].unread = [(
            "netdev".to_string(),
            "no GID of port 1 names a netdev".to_string(),
        )]
        .into();
        let found = preflight(&host(vec![nic]), &mtu_only);
        assert!(
            found[0].finding.message.contains(
                "no netdev: the netdev MTU could not be read (no GID of port 1 names a netdev)"
            ),
            "{found:#?}"
        );
    }

    #[test]
    fn roce_ports_without_a_profile_must_agree() {
        let a = roce_nic("mlx5_0", &[3], &[(26, 3)]);
        let b = roce_nic("mlx5_1", &[3], &[(26, 3)]);
        assert!(preflight(&host(vec![a.clone(), b]), &PreflightOptions::default()).is_empty());
        let c = roce_nic("mlx5_1", &[], &[]);
        let found = preflight(&host(vec![a, c]), &PreflightOptions::default());
        assert_eq!(kinds(&found), [FindingKind::RoceConfig], "{found:#?}");
        assert!(found[0].device.is_none());
        assert!(found[0]
            .finding
            .message
            .contains("mlx5_1 port 1 PFC none, DSCP map none"));
    }
}
