//! How far each GPU is from the NIC it uses, from every format NCCL has printed it in:
//! NCCL 2.4/2.5's `CUDA Dev 0[3], IB NIC distance :  SYS`, the `GPU Direct RDMA ... (distance
//! 6 <= 7)` lines (numbers decoded by the process's release), and a topology dump's path
//! lines (`GPU/81000 :... NET/1 (3/24.000000/PHB)`); and the rule on it
//! (`nccl-gpu-nic-distance`): a GPU whose NIC is across the CPU interconnect (SYS), or
//! behind the CPU's host bridge (PHB) where the server has NICs under the GPUs' PCIe
//! switches (PXB, PIX).

use std::collections::{BTreeMap, BTreeSet};

use ibscope_topo::findings::{Finding, FindingKind};

use super::common::{finding, Index};
use crate::log::{Connection, NcclLog, Place, ProcessId, Transport};
use crate::paths::{self, PathType};

/// A GPU and a NIC of one process, and the path between them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NicPath {
    /// The GPU as the line names it (a bus ID, a CUDA device number).
    pub gpu: String,
    /// The NIC's index in the process's network device list.
    pub nic: u32,
    pub path: PathType,
    pub at: Place,
}

/// Every GPU-NIC path the log shows for process `id`.
pub fn nic_paths(log: &NcclLog, id: &ProcessId) -> Vec<NicPath> {
    let Some(p) = log.processes.get(id) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for d in &p.nic_distances {
        for (nic, path) in d.distances.iter().enumerate() {
            out.push(NicPath {
                gpu: d.cuda_dev.to_string(),
                nic: nic as u32,
                path: *path,
                at: d.at,
            });
        }
    }
    if let Some(version) = log.version_of(id) {
        for g in &p.gdr_paths {
            if let Some(path) = paths::numbered(version, g.distance) {
                out.push(NicPath {
                    gpu: g.gpu.clone(),
                    nic: g.hca,
                    path,
                    at: g.at,
                });
            }
        }
    }
    for t in &p.topo_paths {
        let gpu = t.gpu.rsplit(['/', '-']).next().unwrap_or(&t.gpu);
        for (net, path) in &t.nets {
            let Some(nic) = net
                .rsplit(['/', '-'])
                .next()
                .and_then(|n| u32::from_str_radix(n, 16).ok())
            else {
                continue;
            };
            out.push(NicPath {
                gpu: gpu.to_string(),
                nic,
                path: *path,
                at: t.at,
            });
        }
    }
    out
}

/// The NICs a process's own network connections use (not through a PXN proxy).
pub fn used_nics(own: &[&Connection]) -> BTreeSet<u32> {
    own.iter()
        .filter_map(|c| match c.transport {
            Transport::Net {
                device,
                proxy: None,
                ..
            } => Some(device),
            _ => None,
        })
        .collect()
}

/// For each GPU of process `id`, the path to the NIC it uses: the farthest of the NICs its
/// connections use, else (no connection in the log) the closest, as NCCL would choose.
pub fn gpu_paths(log: &NcclLog, id: &ProcessId, by: &Index) -> Vec<NicPath> {
    let used = used_nics(by.of(id));
    let mut by_gpu: BTreeMap<String, NicPath> = BTreeMap::new();
    let one_gpu = by.ranks_of(id).len() <= 1;
    for np in nic_paths(log, id) {
        if !used.is_empty() && !used.contains(&np.nic) {
            continue;
        }
        // A process of one GPU names it in several ways (bus ID, CUDA device): one GPU.
        let key = if one_gpu {
            String::new()
        } else {
            np.gpu.clone()
        };
        let replace = match by_gpu.get(&key) {
            None => true,
            Some(old) if used.is_empty() => np.path < old.path,
            Some(old) => np.path > old.path,
        };
        if replace {
            by_gpu.insert(key, np);
        }
    }
    by_gpu.into_values().collect()
}

/// GPUs whose NIC sits across the CPU interconnect, or behind the host bridge where the
/// server has closer GPU-NIC pairs.
pub fn gpu_nic_distance(log: &NcclLog, by: &Index) -> Vec<Finding> {
    let mut per_host: BTreeMap<&str, Vec<(&ProcessId, NicPath)>> = BTreeMap::new();
    let mut close_on: BTreeSet<&str> = BTreeSet::new();
    for id in log.processes.keys() {
        if nic_paths(log, id).iter().any(|p| p.path.under_switch()) {
            close_on.insert(id.host.as_str());
        }
        for np in gpu_paths(log, id, by) {
            per_host.entry(id.host.as_str()).or_default().push((id, np));
        }
    }
    let mut out = Vec::new();
    for (host, gpus) in per_host {
        for (id, np) in gpus {
            let why = match np.path {
                PathType::Sys => "across the CPU interconnect: its traffic crosses sockets",
                PathType::Phb | PathType::Node if close_on.contains(host) => {
                    "through the CPU's host bridge, while GPUs of this server reach NICs under \
                     their PCIe switch (PXB, PIX)"
                }
                _ => continue,
            };
            let nic = log
                .processes
                .get(id)
                .and_then(|p| p.net_devices.iter().find(|d| d.index == np.nic))
                .map_or_else(|| format!("NIC {}", np.nic), |d| d.device.clone());
            let rank = by
                .ranks_of(id)
                .first()
                .map_or(String::new(), |r| format!(" (rank {})", r.rank));
            out.push(finding(
                log,
                FindingKind::NcclGpuNicDistance,
                format!(
                    "GPU {}{rank} reaches its NIC {nic} at distance {}: {why}",
                    np.gpu,
                    np.path.name()
                ),
                Some(host),
                [np.at],
            ));
        }
    }
    out
}
