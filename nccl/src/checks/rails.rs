//! GPU-NIC rails: a rank's channels through another rail's HCA (`nccl-wrong-rail`), an HCA
//! that carries none of them (`nccl-rail-unused`).
//!
//! A server has rails where its processes list several HCAs of one link layer, one per GPU
//! of the job there (8 GPUs, 8 InfiniBand HCAs); a 1-GPU node with a RoCE and an IB port,
//! or a server with storage HCAs beside its GPUs' ones, has none, and NCCL's choice there
//! is its own. A GPU's own HCA is the D-th of its rail HCAs for CUDA device D (NCCL lists
//! HCAs in PCI order, and servers with one HCA per GPU pair them in that order). An HCA's
//! rail is the fabric's (its leaf's rail, see `ibscope hosts`) when a fabric is given,
//! else its place in that list.

use std::collections::{BTreeMap, BTreeSet};

use ibscope_topo::findings::{Finding, FindingKind};
use ibscope_topo::hosts::Hosts;

use super::common::{finding, gpu_rank, gpus_per_host, host_devices, list, Index};
use crate::log::{NcclLog, NetDevice, Place};

/// A server's rails: its HCAs of one link layer, in NCCL's order.
pub struct Rails<'a> {
    pub layer: &'a str,
    pub hcas: Vec<&'a NetDevice>,
}

impl Rails<'_> {
    fn position(&self, device: &str) -> Option<u8> {
        let i = self.hcas.iter().position(|d| d.device == device)?;
        u8::try_from(i).ok()
    }
}

/// The rails of `host`, where it has them: `gpus` HCAs of one link layer for the job's
/// `gpus` GPUs there (at least 2).
pub fn rails<'a>(index: &Index<'a>, host: &str, gpus: usize) -> Option<Rails<'a>> {
    if gpus < 2 {
        return None;
    }
    let mut by_layer: BTreeMap<&str, Vec<&NetDevice>> = BTreeMap::new();
    for d in host_devices(index, host) {
        by_layer.entry(d.link_layer.as_str()).or_default().push(d);
    }
    by_layer
        .into_iter()
        .find(|(_, hcas)| hcas.len() == gpus)
        .map(|(layer, hcas)| Rails { layer, hcas })
}

/// The rail of HCA `device` on `host`: the fabric's when given, else its place among the
/// host's rails.
pub fn rail_of(hosts: Option<&Hosts>, host: &str, device: &str, rails: &Rails) -> Option<u8> {
    if let Some(hosts) = hosts {
        if let Some(i) = hosts.find(host) {
            return hosts.hosts()[i]
                .hcas
                .iter()
                .find(|h| h.device.as_deref() == Some(device))
                .and_then(|h| h.rail);
        }
    }
    rails.position(device)
}

/// Every server's rails, by host.
fn all_rails<'a>(log: &'a NcclLog, index: &Index<'a>) -> BTreeMap<&'a str, Rails<'a>> {
    gpus_per_host(log)
        .into_iter()
        .filter_map(|(host, gpus)| Some((host, rails(index, host, gpus.len())?)))
        .collect()
}

/// What one GPU's channels through another rail's HCA showed.
struct Crossing {
    own: String,
    channels: BTreeSet<u32>,
    at: Vec<Place>,
}

/// A rank whose network channels leave through another rail's HCA than its GPU's own
/// (through its PXN proxy's GPU when proxied).
pub fn wrong_rail(log: &NcclLog, index: &Index, hosts: Option<&Hosts>) -> Vec<Finding> {
    let rails = all_rails(log, index);
    let mut seen: BTreeMap<(u32, String), Crossing> = BTreeMap::new();
    for (c, host, device) in index.net_ends() {
        let Some(r) = rails.get(host) else { continue };
        if device.link_layer != r.layer {
            continue;
        }
        let gpu_rank = gpu_rank(c);
        let Some(gpu) = log.ranks.get(&gpu_rank) else {
            continue;
        };
        let Some(own) = r.hcas.get(gpu.cuda_dev as usize) else {
            continue;
        };
        let other_rail = own.device != device.device
            && (hosts.is_none()
                || rail_of(hosts, host, &device.device, r) != rail_of(hosts, host, &own.device, r));
        if other_rail {
            let x = seen
                .entry((gpu_rank, device.device.clone()))
                .or_insert_with(|| Crossing {
                    own: own.device.clone(),
                    channels: BTreeSet::new(),
                    at: Vec::new(),
                });
            x.channels.insert(c.channel);
            x.at.push(c.at);
        }
    }
    seen.into_iter()
        .map(|((rank, device), x)| {
            let r = &log.ranks[&rank];
            let host = r.process.host.as_str();
            let rs = &rails[host];
            let rail = |d: &str| {
                rail_of(hosts, host, d, rs).map_or(String::new(), |n| format!(" (rail {n})"))
            };
            let mut f = finding(
                log,
                FindingKind::NcclWrongRail,
                format!(
                    "rank {rank} (GPU {}) uses {device}{} for {} channel(s) ({}): its own HCA \
                     is {}; GPU and HCA meet over PCIe/NVLink instead of the rail (NCCL_IB_HCA, \
                     NCCL_TOPO_FILE, the PCIe layout)",
                    r.cuda_dev,
                    rail(&device),
                    x.channels.len(),
                    list(&x.channels),
                    x.own,
                ),
                Some(host),
                x.at,
            );
            f.rail = rail_of(hosts, host, &x.own, rs);
            f
        })
        .collect()
}

/// A server's rail HCAs that carry none of the job's network channels.
pub fn rails_unused(log: &NcclLog, index: &Index, hosts: Option<&Hosts>) -> Vec<Finding> {
    let rails = all_rails(log, index);
    let mut used: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (_, host, device) in index.net_ends() {
        used.entry(host).or_default().insert(device.device.as_str());
    }
    let mut out = Vec::new();
    for (host, used) in used {
        let Some(r) = rails.get(host) else { continue };
        let processes = index.on(host);
        let listed = processes.iter().find_map(|(_, p)| p.net_devices_at);
        let restricted = processes
            .iter()
            .find_map(|(_, p)| p.settings.get("NCCL_IB_HCA"))
            .map(|v| format!(" (NCCL_IB_HCA={})", v.value))
            .unwrap_or_default();
        for d in &r.hcas {
            if used.contains(d.device.as_str()) {
                continue;
            }
            let mut f = finding(
                log,
                FindingKind::NcclRailUnused,
                format!(
                    "{} carries none of the job's network channels{restricted}: its rail is \
                     idle and the others carry its share",
                    d.device
                ),
                Some(host),
                listed,
            );
            f.rail = rail_of(hosts, host, &d.device, r);
            out.push(f);
        }
    }
    out
}
