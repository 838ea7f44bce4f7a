//! GPUDirect: network channels without GPUDirect RDMA where the job uses it elsewhere
//! (`nccl-gdr-off`), and variables that make NCCL use it where its default would refuse it
//! or keep it off where it would help (`nccl-gdr-forced`).
//!
//! NCCL lets GPUDirect RDMA run up to PXB by default (no CPU between GPU and NIC:
//! `NCCL_NET_GDR_LEVEL`'s default, PHB with `distance >= level` refused up to 2.5, PXB
//! with `distance > level` since 2.6). A level beyond it only changes anything where the
//! NIC is farther: there it forces GPUDirect through the CPU. A level below it only
//! changes anything where the NIC is close: there it keeps GPUDirect off. Peer-to-peer
//! between the GPUs of a server is NCCL's GPUDirect P2P; `NCCL_P2P_DISABLE=1` or
//! `NCCL_P2P_LEVEL=LOC` sends it through host memory (SHM).

use std::collections::{BTreeMap, BTreeSet};

use ibscope_topo::findings::{Finding, FindingKind};

use super::common::{finding, gpu_rank, list, Index};
use super::distance::{gpu_paths, NicPath};
use crate::log::{Connection, NcclLog, Place, ProcessId, Transport};
use crate::paths::{self, PathType};

/// Network channels without GPUDirect RDMA where the host (an `Enabled` line, another of
/// its connections) or the job's other hosts use it.
pub fn gdr_off(log: &NcclLog, index: &Index) -> Vec<Finding> {
    let mut host_uses: BTreeSet<&str> = BTreeSet::new();
    for (id, p) in &log.processes {
        if !p.gdr_enabled.is_empty() {
            host_uses.insert(id.host.as_str());
        }
    }
    let mut without: BTreeMap<(u32, String), (BTreeSet<u32>, Vec<Place>)> = BTreeMap::new();
    for (c, host, device) in index.net_ends() {
        match c.transport {
            Transport::Net { gdr: true, .. } => {
                host_uses.insert(host);
            }
            Transport::Net { gdr: false, .. } => {
                let e = without
                    .entry((gpu_rank(c), device.device.clone()))
                    .or_default();
                e.0.insert(c.channel);
                e.1.push(c.at);
            }
            Transport::Local { .. } => {}
        }
    }
    if host_uses.is_empty() {
        return Vec::new();
    }
    without
        .into_iter()
        .filter_map(|((rank, device), (channels, at))| {
            let r = log.ranks.get(&rank)?;
            let host = r.process.host.as_str();
            let why = log
                .processes
                .get(&r.process)
                .and_then(|p| p.gdr_disabled.get(&device))
                .map(|w| format!("; NCCL says GPUDirect RDMA is disabled for {device} ({w})"))
                .unwrap_or_default();
            let whose = if host_uses.contains(host) {
                "its host uses it on other channels"
            } else {
                "other hosts of the job use it: is nvidia-peermem loaded here?"
            };
            Some(finding(
                log,
                FindingKind::NcclGdrOff,
                format!(
                    "rank {rank} (GPU {}) moves {} network channel(s) ({}) over \
                     {device} through host memory, without GPUDirect RDMA: {whose}{why}",
                    r.cuda_dev,
                    channels.len(),
                    list(&channels)
                ),
                Some(host),
                at,
            ))
        })
        .collect()
}

/// The farthest path a GPUDirect level lets GPUDirect RDMA run over; `None`: none.
fn allowed(value: &str, version: Option<&str>) -> Option<Option<PathType>> {
    if let Some(t) = PathType::named(value) {
        return Some(Some(t));
    }
    let n: u32 = value.parse().ok()?;
    let old = version.map_or(true, |v| {
        paths::compare_versions(v, "2.6.0") == std::cmp::Ordering::Less
    });
    if old {
        // Up to 2.5 a number is compared as `distance < level`.
        if n == 0 {
            return Some(None);
        }
        return Some(paths::numbered(version.unwrap_or("2.4.8"), n - 1));
    }
    // Since 2.6 an old-style number maps onto the path types (paths.cc's levelsOldToNew).
    const OLD_TO_NEW: [PathType; 6] = [
        PathType::Loc,
        PathType::Pix,
        PathType::Pxb,
        PathType::Phb,
        PathType::Sys,
        PathType::Sys,
    ];
    Some(Some(OLD_TO_NEW[(n as usize).min(5)]))
}

/// What a variable did on one host.
#[derive(Default)]
struct Effect {
    value: String,
    processes: usize,
    channels: usize,
    /// The GPU-NIC path it acted on, in words.
    path: Option<(PathType, String)>,
    at: Vec<Place>,
}

/// `NCCL_NET_GDR_LEVEL` that forces GPUDirect RDMA beyond NCCL's default, or keeps it off
/// where the NIC is close, and `NCCL_P2P_DISABLE` / `NCCL_P2P_LEVEL` that keep the GPUs
/// of a server off peer-to-peer.
pub fn gdr_forced(log: &NcclLog, by: &Index) -> Vec<Finding> {
    let mut forced: BTreeMap<&str, Effect> = BTreeMap::new();
    let mut kept_off: BTreeMap<&str, Effect> = BTreeMap::new();
    let mut p2p_off: BTreeMap<(&str, &str), Effect> = BTreeMap::new();
    for (id, p) in &log.processes {
        if let Some(level) = p.settings.get("NCCL_NET_GDR_LEVEL") {
            let Some(allows) = allowed(&level.value, log.version_of(id)) else {
                continue;
            };
            let paths = gpu_paths(log, id, by);
            let gdr: Vec<Place> = own_net(by.of(id), true);
            let beyond = allows.is_some_and(PathType::beyond_gdr_default);
            let far = paths
                .iter()
                .filter(|p| p.path.beyond_gdr_default())
                .max_by_key(|p| p.path);
            let close = paths
                .iter()
                .filter(|p| p.path <= PathType::Pxb)
                .min_by_key(|p| p.path);
            let target = if beyond && !gdr.is_empty() && (paths.is_empty() || far.is_some()) {
                Some((&mut forced, far, gdr))
            } else if !beyond && allows.map_or(true, |a| close.is_some_and(|c| c.path > a)) {
                let plain = own_net(by.of(id), false);
                (close.is_some() && gdr.is_empty() && !plain.is_empty()).then_some((
                    &mut kept_off,
                    close,
                    plain,
                ))
            } else {
                None
            };
            if let Some((map, path, channels)) = target {
                let e = map.entry(id.host.as_str()).or_default();
                note(e, &level.value, path, &channels, level.at, log, id);
            }
        }
        for key in ["NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL"] {
            let Some(s) = p.settings.get(key) else {
                continue;
            };
            let off = if key == "NCCL_P2P_DISABLE" {
                s.value == "1"
            } else {
                matches!(s.value.as_str(), "LOC" | "0")
            };
            let shm: Vec<Place> = by
                .of(id)
                .iter()
                .filter(
                    |c| matches!(&c.transport, Transport::Local { via } if via.starts_with("SHM")),
                )
                .map(|c| c.at)
                .collect();
            if off && !shm.is_empty() {
                let e = p2p_off.entry((id.host.as_str(), key)).or_default();
                note(e, &s.value, None, &shm, s.at, log, id);
            }
        }
    }
    let mut out = Vec::new();
    for (host, e) in forced {
        let distance = match &e.path {
            Some((t, what)) => format!(" at distance {} ({what})", t.name()),
            None => "; the log does not print how far GPU and NIC are (NCCL_DEBUG_SUBSYS=INIT,GRAPH,NET \
                     prints it): at PHB or SYS, as this level allows"
                .to_string(),
        };
        out.push(finding(
            log,
            FindingKind::NcclGdrForced,
            format!(
                "NCCL_NET_GDR_LEVEL={} lets GPUDirect RDMA run beyond NCCL's default (PXB: no CPU \
                 between GPU and NIC), and {} network connection(s) of its {} process(es) use \
                 it{distance}: reading GPU memory through the CPU is slower than staging in host \
                 memory",
                e.value, e.channels, e.processes
            ),
            Some(host),
            e.at,
        ));
    }
    for (host, e) in kept_off {
        let (t, what) = e.path.clone().unwrap_or((PathType::Pxb, String::new()));
        out.push(finding(
            log,
            FindingKind::NcclGdrForced,
            format!(
                "NCCL_NET_GDR_LEVEL={} keeps GPUDirect RDMA off although its NIC is \
                 close ({} at {}), where NCCL's default would use it: {} network connection(s) \
                 go through host memory",
                e.value,
                what,
                t.name(),
                e.channels
            ),
            Some(host),
            e.at,
        ));
    }
    for ((host, key), e) in p2p_off {
        out.push(finding(
            log,
            FindingKind::NcclGdrForced,
            format!(
                "{key}={} keeps the server's GPUs off peer-to-peer: {} connection(s) between \
                 them go through host memory (SHM) instead of NVLink or PCIe",
                e.value, e.channels
            ),
            Some(host),
            e.at,
        ));
    }
    out
}

/// A process's own network connections with (or without) GPUDirect RDMA: their lines.
fn own_net(own: &[&Connection], gdr: bool) -> Vec<Place> {
    own.iter()
        .filter(|c| matches!(c.transport, Transport::Net { gdr: g, .. } if g == gdr))
        .map(|c| c.at)
        .collect()
}

fn note(
    e: &mut Effect,
    value: &str,
    path: Option<&NicPath>,
    channels: &[Place],
    setting: Place,
    log: &NcclLog,
    id: &ProcessId,
) {
    e.value = value.to_string();
    e.processes += 1;
    e.channels += channels.len();
    if let Some(p) = path {
        let nic = log
            .processes
            .get(id)
            .and_then(|x| x.net_devices.iter().find(|d| d.index == p.nic))
            .map_or_else(|| format!("NIC {}", p.nic), |d| d.device.clone());
        if e.path.as_ref().map_or(true, |(t, _)| p.path > *t) {
            e.path = Some((p.path, format!("GPU {} to {nic}", p.gpu)));
        }
        e.at.push(p.at);
    }
    e.at.push(setting);
    e.at.extend(channels.iter().take(2));
}
